/* config_schema.c — reading config sections into typed structs with ranges
 * (rl_config_read, rl_config_section_*), the known-keys tree of a set of
 * sections, and their docs/CONFIG.md tables (see rlrt/config.h). */
#include "rlrt/config.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/core/config_internal.h"
#include "common/core/util.h"
#include "rlrt/error.h"

/* ---- declarative reading with ranges -------------------------------------------------------- */

/* A bound as people write it: 16, 0.2, 1e+30. */
static const char *s_num_text(double v, char *buf, size_t size)
{
    if (v == floor(v) && fabs(v) < 1e15)
        snprintf(buf, size, "%.0f", v);
    else
        snprintf(buf, size, "%g", v);
    return buf;
}

/* "must be in [lo, hi]" / "must be > lo" ... for the bounds of a spec. */
static void s_bounds_text(double lo, double hi, unsigned flags, char *buf, size_t size)
{
    if (lo > hi) {
        snprintf(buf, size, "must be a finite number");
        return;
    }
    int has_lo = isfinite(lo), has_hi = isfinite(hi);
    const char *lb = flags & RL_CFG_MIN_OPEN ? "(" : "[", *hb = flags & RL_CFG_MAX_OPEN ? ")" : "]";
    char a[40], b[40];
    if (has_lo && has_hi)
        snprintf(buf, size, "must be in %s%s, %s%s", lb, s_num_text(lo, a, sizeof a),
                 s_num_text(hi, b, sizeof b), hb);
    else if (has_lo)
        snprintf(buf, size, "must be %s %s", flags & RL_CFG_MIN_OPEN ? ">" : ">=",
                 s_num_text(lo, a, sizeof a));
    else if (has_hi)
        snprintf(buf, size, "must be %s %s", flags & RL_CFG_MAX_OPEN ? "<" : "<=",
                 s_num_text(hi, b, sizeof b));
    else
        snprintf(buf, size, "must be a finite number");
}

static int s_in_range(double v, double lo, double hi, unsigned flags)
{
    if (lo > hi)
        return !isnan(v);
    if (isnan(v))
        return 0;
    if (flags & RL_CFG_MIN_OPEN ? !(v > lo) : !(v >= lo))
        return 0;
    if (flags & RL_CFG_MAX_OPEN ? !(v < hi) : !(v <= hi))
        return 0;
    return 1;
}

static int s_range_error(const rl_config_node *n, double lo, double hi, unsigned flags)
{
    char b[160];
    s_bounds_text(lo, hi, flags, b, sizeof b);
    return rl_config_node_error(n, RL_ECONFIG, "%s, got %s", b, rl_config_node_text(n) ? rl_config_node_text(n) : "?");
}

static int s_read_one(const rl_config *c, const rl_config_spec *sp, void *out)
{
    const rl_config_node *n;
    int rc = rl__config_find(c, sp->path, &n);
    if (rc)
        return rc;
    char *field = (char *)out + sp->offset;
    switch (sp->type) {
    case RL_CFG_INT: {
        int64_t v;
        if ((rc = rl_config_node_int(n, &v)))
            return rc;
        if (!s_in_range((double)v, sp->min, sp->max, sp->flags))
            return s_range_error(n, sp->min, sp->max, sp->flags);
        memcpy(field, &v, sizeof v);
        return RL_OK;
    }
    case RL_CFG_NUM: {
        double v;
        if ((rc = rl_config_node_double(n, &v)))
            return rc;
        if (!s_in_range(v, sp->min, sp->max, sp->flags) || (sp->min > sp->max && isinf(v)))
            return s_range_error(n, sp->min, sp->max, sp->flags);
        memcpy(field, &v, sizeof v);
        return RL_OK;
    }
    case RL_CFG_BOOL: {
        int v;
        if ((rc = rl_config_node_bool(n, &v)))
            return rc;
        memcpy(field, &v, sizeof v);
        return RL_OK;
    }
    case RL_CFG_STR: {
        const char *v = NULL;
        if (rl_config_node_type(n) != RL_CONFIG_T_NULL && (rc = rl_config_node_string(n, &v)))
            return rc;
        if ((sp->flags & RL_CFG_NONEMPTY) && (!v || !*v))
            return rl_config_node_error(n, RL_ECONFIG, "must not be empty");
        memcpy(field, &v, sizeof v);
        return RL_OK;
    }
    case RL_CFG_ENUM: {
        const char *v;
        if ((rc = rl_config_node_string(n, &v)))
            return rc;
        const char *p = sp->choices ? sp->choices : "";
        size_t len = strlen(v);
        for (int i = 0;; i++) {
            size_t k = strcspn(p, "|");
            if (k == len && strncmp(p, v, len) == 0) {
                memcpy(field, &i, sizeof i);
                return RL_OK;
            }
            if (!p[k])
                break;
            p += k + 1;
        }
        char list[512];
        snprintf(list, sizeof list, "%s", sp->choices ? sp->choices : "");
        for (char *q = list; *q; q++)
            if (*q == '|')
                *q = ',';
        return rl_config_node_error(n, RL_ECONFIG, "unknown value '%s' (expected one of: %s)", v,
                                    list);
    }
    case RL_CFG_LIST:
    case RL_CFG_MAP:
    case RL_CFG_ANY:
        break; /* schema keys only: rl_config_section_read */
    }
    return rl_error_set(RL_EINVAL, "rl_config_read: %s: bad field type %d", sp->path, (int)sp->type);
}

int rl_config_read(const rl_config *c, const rl_config_spec *spec, size_t n, void *out)
{
    if (!c || (!spec && n) || !out)
        return rl_error_set(RL_EINVAL, "rl_config_read: NULL argument");
    for (size_t i = 0; i < n; i++) {
        int rc = s_read_one(c, &spec[i], out);
        if (rc)
            return rc;
    }
    return RL_OK;
}

int rl_config_get_int_in(const rl_config *c, const char *path, int64_t lo, int64_t hi,
                         int64_t *out)
{
    rl_config_spec sp = {path, RL_CFG_INT, 0, (double)lo, (double)hi, 0, NULL};
    if (lo > hi)
        sp.min = 1, sp.max = 0;
    return s_read_one(c, &sp, out);
}

int rl_config_get_double_in(const rl_config *c, const char *path, double lo, double hi,
                            unsigned flags, double *out)
{
    rl_config_spec sp = {path, RL_CFG_NUM, 0, lo, hi, flags, NULL};
    return s_read_one(c, &sp, out);
}

/* ---- sections ----------------------------------------------------------------------------- */

static int s_read_key(const rl_config *c, const rl_config_key *k, void *out)
{
    if (k->type == RL_CFG_LIST || k->type == RL_CFG_MAP || k->type == RL_CFG_ANY) {
        const rl_config_node *n;
        int rc = rl__config_find(c, k->path, &n);
        if (rc)
            return rc;
        rl_config_type t = rl_config_node_type(n);
        if (k->type == RL_CFG_LIST && t != RL_CONFIG_T_LIST && t != RL_CONFIG_T_NULL)
            return rl_config_node_error(n, RL_ECONFIG, "expected a list, got %s",
                                        rl_config_type_name(t));
        if (k->type == RL_CFG_MAP && t != RL_CONFIG_T_MAP && t != RL_CONFIG_T_NULL)
            return rl_config_node_error(n, RL_ECONFIG, "expected a map, got %s",
                                        rl_config_type_name(t));
        memcpy((char *)out + k->offset, &n, sizeof n);
        return RL_OK;
    }
    rl_config_spec sp = {k->path, k->type, k->offset, k->min, k->max, k->flags, k->choices};
    return s_read_one(c, &sp, out);
}

int rl_config_section_read(const rl_config *c, const rl_config_section *s, void *out)
{
    if (!c || !s || !out)
        return rl_error_set(RL_EINVAL, "rl_config_section_read: NULL argument");
    memset(out, 0, s->size);
    for (size_t i = 0; i < s->n_keys; i++) {
        int rc = s_read_key(c, &s->keys[i], out);
        if (rc)
            return rc;
    }
    return s->check ? s->check(c, out) : RL_OK;
}

/* The cache of a tree: its sections as read, in the order first asked for. */
typedef struct s_cached {
    const rl_config_section *section;
    void *data;
} s_cached;

typedef struct s_cache {
    s_cached *items;
    size_t n, cap;
} s_cache;

static void s_cache_free(void *p)
{
    s_cache *cache = p;
    for (size_t i = 0; i < cache->n; i++)
        free(cache->items[i].data);
    free(cache->items);
    free(cache);
}

const void *rl_config_section_get(const rl_config *c, const rl_config_section *s)
{
    if (!c || !s)
        return rl_error_set(RL_EINVAL, "rl_config_section_get: NULL argument"), NULL;
    s_cache *cache = rl__config_cache(c);
    for (size_t i = 0; cache && i < cache->n; i++)
        if (cache->items[i].section == s)
            return cache->items[i].data;
    void *data = calloc(1, s->size ? s->size : 1);
    if (!data)
        return rl_error_set(RL_ENOMEM, "config: out of memory"), NULL;
    if (rl_config_section_read(c, s, data)) {
        free(data);
        return NULL;
    }
    /* the check may have read (and cached) other sections meanwhile */
    cache = rl__config_cache(c);
    if (!cache) {
        if (!(cache = calloc(1, sizeof *cache))) {
            free(data);
            return rl_error_set(RL_ENOMEM, "config: out of memory"), NULL;
        }
        rl__config_set_cache(c, cache, s_cache_free);
    }
    if (cache->n == cache->cap) {
        size_t cap = cache->cap ? 2 * cache->cap : 8;
        s_cached *items = realloc(cache->items, cap * sizeof *items);
        if (!items) {
            free(data);
            return rl_error_set(RL_ENOMEM, "config: out of memory"), NULL;
        }
        cache->items = items;
        cache->cap = cap;
    }
    cache->items[cache->n++] = (s_cached){s, data};
    return data;
}

int rl_config_has_section(const rl_config *c, const rl_config_section *s)
{
    for (size_t i = 0; c && s && i < s->n_keys; i++)
        if (!rl_config_has(c, s->keys[i].path))
            return 0;
    return c && s;
}

static const rl_config_key *s_key_at(const rl_config_section *s, size_t offset)
{
    for (size_t i = 0; s && i < s->n_keys; i++)
        if (s->keys[i].offset == offset)
            return &s->keys[i];
    return NULL;
}

const char *rl_config_key_path(const rl_config_section *s, size_t offset)
{
    const rl_config_key *k = s_key_at(s, offset);
    return k ? k->path : NULL;
}

int rl_config_key_error(const rl_config *c, const rl_config_section *s, size_t offset, int code,
                        const char *fmt, ...)
{
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    const char *path = rl_config_key_path(s, offset);
    if (!path)
        return rl_error_set(code, "%s: %s", s ? s->name : "?", msg);
    return rl_config_error_at(c, path, code, "%s", msg);
}

int rl_config_key_error2(const rl_config *c, const rl_config_section *sa, size_t offa,
                         const rl_config_section *sb, size_t offb, int code, const char *fmt, ...)
{
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    const char *const paths[] = {rl_config_key_path(sa, offa), rl_config_key_path(sb, offb), NULL};
    if (!paths[0] || !paths[1])
        return rl_error_set(code, "%s: %s", sa ? sa->name : "?", msg);
    return rl_config_error_among(c, paths, code, "%s", msg);
}

int rl_config_key_set(rl_config *c, const rl_config_section *s, size_t offset, const char *yaml)
{
    const char *path = rl_config_key_path(s, offset);
    if (!path)
        return rl_error_set(RL_EINVAL, "rl_config_key_set: no key of section '%s' at offset %zu",
                            s ? s->name : "?", offset);
    return rl_config_set_yaml(c, path, yaml);
}

int rl_config_key_derive(rl_config *c, const rl_config_section *s, size_t offset, const char *yaml,
                         const char *const *from, const char *why)
{
    const rl_config_key *k = NULL;
    for (size_t i = 0; s && i < s->n_keys && !k; i++)
        if (s->keys[i].offset == offset)
            k = &s->keys[i];
    if (!k)
        return rl_error_set(RL_EINVAL, "rl_config_key_derive: no key of section '%s' at offset %zu",
                            s ? s->name : "?", offset);
    int rc = rl_config_set_yaml(c, k->path, yaml);
    if (rc || (k->type != RL_CFG_INT && k->type != RL_CFG_NUM))
        return rc;
    const rl_config_node *n;
    if ((rc = rl__config_find(c, k->path, &n)))
        return rc;
    int64_t i;
    double v;
    int ok = k->type == RL_CFG_INT ? rl_config_node_int(n, &i) == RL_OK
                                   : rl_config_node_double(n, &v) == RL_OK;
    if (ok && k->type == RL_CFG_INT)
        v = (double)i;
    if (ok && s_in_range(v, k->min, k->max, k->flags) && !(k->min > k->max && isinf(v)))
        return RL_OK;
    char b[160];
    s_bounds_text(k->min, k->max, k->flags, b, sizeof b);
    return rl_config_error_among(c, from, RL_ECONFIG, "%s = %s (%s) %s", k->path, yaml,
                                 why ? why : "derived", b);
}

/* ---- the known-keys tree ----------------------------------------------------------------- */

/* A node of the nested key tree being laid out as YAML. */
typedef struct s_tnode {
    char *key;
    const char *value;   /* a key's default (a leaf), or NULL for a map */
    const char *section; /* the section of a leaf (messages) */
    struct s_tnode **kids;
    size_t n, cap;
} s_tnode;

static void s_tnode_free(s_tnode *t)
{
    if (!t)
        return;
    for (size_t i = 0; i < t->n; i++)
        s_tnode_free(t->kids[i]);
    free(t->kids);
    free(t->key);
    free(t);
}

static s_tnode *s_tnode_child(s_tnode *t, const char *key, size_t len)
{
    for (size_t i = 0; i < t->n; i++)
        if (strlen(t->kids[i]->key) == len && strncmp(t->kids[i]->key, key, len) == 0)
            return t->kids[i];
    if (t->n == t->cap) {
        size_t cap = t->cap ? 2 * t->cap : 8;
        s_tnode **k = realloc(t->kids, cap * sizeof *k);
        if (!k)
            return NULL;
        t->kids = k;
        t->cap = cap;
    }
    s_tnode *c = calloc(1, sizeof *c);
    if (!c || !(c->key = strndup(key, len))) {
        free(c);
        return NULL;
    }
    t->kids[t->n++] = c;
    return c;
}

static int s_tree_put(s_tnode *root, const char *path, const char *value, const char *section)
{
    s_tnode *t = root;
    const char *p = path;
    for (;;) {
        size_t len = strcspn(p, ".");
        if (len == 0)
            return rl_error_set(RL_EINVAL, "section '%s': malformed key '%s'", section, path);
        if (t->value)
            return rl_error_set(RL_EINVAL, "key '%s' (section '%s') lies below the key of "
                                           "section '%s'", path, section, t->section);
        if (!(t = s_tnode_child(t, p, len)))
            return rl_error_set(RL_ENOMEM, "config: out of memory");
        if (!p[len])
            break;
        p += len + 1;
    }
    if (t->value)
        return rl_error_set(RL_EINVAL, "key '%s' is in two sections: '%s' and '%s'", path,
                            t->section, section);
    if (t->n)
        return rl_error_set(RL_EINVAL, "key '%s' (section '%s') is also a map of other keys",
                            path, section);
    t->value = value;
    t->section = section;
    return RL_OK;
}

static void s_emit_yaml(const s_tnode *t, int depth, rl_text *b)
{
    for (size_t i = 0; i < t->n; i++) {
        const s_tnode *c = t->kids[i];
        if (c->value)
            rl_text_printf(b, "%*s%s: %s\n", 2 * depth, "", c->key, c->value);
        else {
            rl_text_printf(b, "%*s%s:\n", 2 * depth, "", c->key);
            s_emit_yaml(c, depth + 1, b);
        }
    }
}

/* A default that does not fit its own key: a schema bug, named as such. */
static int s_check_defaults(const rl_config *tree, const rl_config_section *const *sections,
                            size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const rl_config_section *s = sections[i];
        for (size_t k = 0; k < s->n_keys; k++) {
            void *scratch = calloc(1, s->size ? s->size : 1);
            if (!scratch)
                return rl_error_set(RL_ENOMEM, "config: out of memory");
            int rc = s_read_key(tree, &s->keys[k], scratch);
            free(scratch);
            if (rc)
                return rl_error_wrap(RL_EINVAL, "section '%s': the default of '%s'", s->name,
                                     s->keys[k].path);
        }
    }
    return RL_OK;
}

rl_config *rl_config_schema_defaults(const rl_config_section *const *sections, size_t n,
                                     const rl_config_default *changes, size_t n_changes)
{
    s_tnode *root = rl_zalloc(sizeof *root, "config");
    if (!root)
        return NULL;
    int rc = RL_OK;
    for (size_t i = 0; i < n && !rc; i++)
        for (size_t k = 0; k < sections[i]->n_keys && !rc; k++)
            rc = s_tree_put(root, sections[i]->keys[k].path, sections[i]->keys[k].def,
                            sections[i]->name);
    for (size_t j = 0; j < n_changes && !rc; j++) {
        s_tnode *t = root;
        const char *p = changes[j].path;
        while (t && *p) {
            size_t len = strcspn(p, "."), i;
            for (i = 0; i < t->n; i++)
                if (strlen(t->kids[i]->key) == len && strncmp(t->kids[i]->key, p, len) == 0)
                    break;
            t = i < t->n ? t->kids[i] : NULL;
            p += len + (p[len] ? 1 : 0);
        }
        if (!t || !t->value)
            rc = rl_error_set(RL_EINVAL, "a change of the defaults names '%s', which is no key "
                                         "of the recipe's sections", changes[j].path);
        else
            t->value = changes[j].value;
    }
    rl_config *tree = NULL;
    if (!rc) {
        rl_text b = {0};
        s_emit_yaml(root, 0, &b);
        if (b.failed)
            rl_error_set(RL_ENOMEM, "config: out of memory");
        else
            tree = b.buf ? rl_config_parse_string(b.buf, b.len, "<defaults>") : rl_config_new("<defaults>");
        free(b.buf);
        if (tree && s_check_defaults(tree, sections, n)) {
            rl_config_free(tree);
            tree = NULL;
        }
    }
    s_tnode_free(root);
    return tree;
}

/* ---- docs/CONFIG.md ------------------------------------------------------------------------- */

static const char *s_type_word(rl_config_field t)
{
    switch (t) {
    case RL_CFG_INT: return "integer";
    case RL_CFG_NUM: return "number";
    case RL_CFG_BOOL: return "boolean";
    case RL_CFG_STR: return "string";
    case RL_CFG_ENUM: return "choice";
    case RL_CFG_LIST: return "list";
    case RL_CFG_MAP: return "map";
    case RL_CFG_ANY: return "any";
    }
    return "?";
}

/* A table cell: '|' escaped, newlines as spaces. */
static void s_put_cell(rl_text *b, const char *s)
{
    for (; s && *s; s++) {
        if (*s == '|')
            rl_text_printf(b, "\\|");
        else if (*s == '\n')
            rl_text_printf(b, " ");
        else
            rl_text_printf(b, "%c", *s);
    }
}

static void s_range_cell(rl_text *b, const rl_config_key *k)
{
    char r[200] = "";
    if (k->type == RL_CFG_INT || k->type == RL_CFG_NUM) {
        if (k->min <= k->max) {
            s_bounds_text(k->min, k->max, k->flags, r, sizeof r);
            /* "must be in [0, 10]" → "[0, 10]" */
            const char *p = r;
            if (strncmp(p, "must be in ", 11) == 0)
                p += 11;
            else if (strncmp(p, "must be ", 8) == 0)
                p += 8;
            s_put_cell(b, p);
        } else {
            s_put_cell(b, "finite");
        }
    } else if (k->type == RL_CFG_ENUM) {
        for (const char *p = k->choices ? k->choices : ""; *p; p++)
            rl_text_printf(b, "%s", *p == '|' ? ", " : (char[]){*p, 0});
    } else if (k->type == RL_CFG_STR && (k->flags & RL_CFG_NONEMPTY)) {
        rl_text_printf(b, "not empty");
    }
}

char *rl_config_sections_markdown(const rl_config_section *const *sections, size_t n)
{
    rl_text b = {0};
    for (size_t i = 0; i < n; i++) {
        const rl_config_section *s = sections[i];
        rl_text_printf(&b, "## %s\n\n%s\n\nRead by: %s.\n\n", s->name, s->summary ? s->summary : "",
                   s->readers ? s->readers : "?");
        rl_text_printf(&b, "| key | type | default | range | meaning |\n|---|---|---|---|---|\n");
        for (size_t k = 0; k < s->n_keys; k++) {
            const rl_config_key *key = &s->keys[k];
            rl_text_printf(&b, "| `%s` | %s | `", key->path, s_type_word(key->type));
            s_put_cell(&b, key->def);
            rl_text_printf(&b, "` | ");
            s_range_cell(&b, key);
            rl_text_printf(&b, " | ");
            s_put_cell(&b, key->help);
            rl_text_printf(&b, " |\n");
        }
        rl_text_printf(&b, "\n");
    }
    if (b.failed) {
        free(b.buf);
        return rl_error_set(RL_ENOMEM, "config: out of memory"), NULL;
    }
    if (!b.buf)
        b.buf = calloc(1, 1);
    return b.buf;
}
