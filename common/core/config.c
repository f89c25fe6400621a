/* config.c — YAML config trees with locations, typed getters, overrides
 * (see rlrt/config.h). */
#include "rlrt/config.h"
#include "common/core/config_internal.h"
#include "common/core/util.h"

#include "rlrt/error.h"

#include <ctype.h>
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <yaml.h>

struct rl_config_node {
    rl_config_kind kind;
    char *text;   /* scalars only */
    int quoted;   /* scalar written quoted (or set as a string) */
    int open;     /* map that was empty where it came from: accepts any key */
    int number;   /* an integer literal standing where a number belongs */
    char *path;   /* "" for the root */
    char *file;
    int line, col;
    size_t n, cap;
    char **keys;  /* maps only */
    int *key_line, *key_col;
    rl_config_node **items;
};

struct rl_config {
    char *name;
    rl_config_node *root;
    /* typed sections read from this tree (config_schema.c), dropped when a
     * value changes */
    void *cache;
    void (*cache_free)(void *cache);
};

void *rl__config_cache(const rl_config *c) { return c->cache; }

void rl__config_set_cache(const rl_config *c, void *cache, void (*cache_free)(void *))
{
    rl_config *m = (rl_config *)c; /* the cache is not part of the tree's value */
    m->cache = cache;
    m->cache_free = cache_free;
}

static void s_drop_cache(rl_config *c)
{
    if (c->cache && c->cache_free)
        c->cache_free(c->cache);
    c->cache = NULL;
}

/* ---- small helpers ----------------------------------------------------------- */

static char *s_strdup(const char *s)
{
    size_t n = strlen(s);
    char *p = malloc(n + 1);
    if (p)
        memcpy(p, s, n + 1);
    return p;
}

static char *s_join_key(const char *parent, const char *key)
{
    size_t a = strlen(parent), b = strlen(key);
    char *p = malloc(a + b + 2);
    if (!p)
        return NULL;
    if (a == 0) {
        memcpy(p, key, b + 1);
    } else {
        memcpy(p, parent, a);
        p[a] = '.';
        memcpy(p + a + 1, key, b + 1);
    }
    return p;
}

static char *s_join_index(const char *parent, size_t i)
{
    size_t a = strlen(parent);
    char *p = malloc(a + 24);
    if (p)
        snprintf(p, a + 24, "%s[%zu]", parent, i);
    return p;
}

static rl_config_node *s_node_new(rl_config_kind kind, const char *path,
                                  const char *file, int line, int col)
{
    rl_config_node *n = calloc(1, sizeof *n);
    if (!n)
        return NULL;
    n->kind = kind;
    n->path = s_strdup(path);
    n->file = s_strdup(file);
    n->line = line;
    n->col = col;
    if (!n->path || !n->file) {
        free(n->path);
        free(n->file);
        free(n);
        return NULL;
    }
    return n;
}

static void s_node_free(rl_config_node *n)
{
    if (!n)
        return;
    for (size_t i = 0; i < n->n; i++) {
        s_node_free(n->items[i]);
        if (n->keys)
            free(n->keys[i]);
    }
    free(n->items);
    free(n->keys);
    free(n->key_line);
    free(n->key_col);
    free(n->text);
    free(n->path);
    free(n->file);
    free(n);
}

/* Appends a child (key NULL for lists); takes ownership of `child`. */
static int s_node_append(rl_config_node *n, const char *key, int kline,
                         int kcol, rl_config_node *child)
{
    if (n->n == n->cap) {
        size_t cap = n->cap ? n->cap * 2 : 4;
        rl_config_node **items = realloc(n->items, cap * sizeof *items);
        if (!items)
            return RL_ENOMEM;
        n->items = items;
        if (n->kind == RL_CONFIG_MAP) {
            char **keys = realloc(n->keys, cap * sizeof *keys);
            if (!keys)
                return RL_ENOMEM;
            n->keys = keys;
            int *kl = realloc(n->key_line, cap * sizeof *kl);
            if (!kl)
                return RL_ENOMEM;
            n->key_line = kl;
            int *kc = realloc(n->key_col, cap * sizeof *kc);
            if (!kc)
                return RL_ENOMEM;
            n->key_col = kc;
        }
        n->cap = cap;
    }
    if (n->kind == RL_CONFIG_MAP) {
        char *k = s_strdup(key);
        if (!k)
            return RL_ENOMEM;
        n->keys[n->n] = k;
        n->key_line[n->n] = kline;
        n->key_col[n->n] = kcol;
    }
    n->items[n->n++] = child;
    return RL_OK;
}

static long s_map_find(const rl_config_node *n, const char *key)
{
    if (n->kind != RL_CONFIG_MAP)
        return -1;
    for (size_t i = 0; i < n->n; i++)
        if (strcmp(n->keys[i], key) == 0)
            return (long)i;
    return -1;
}

/* Rewrites the paths of a subtree so that its root is at `path`. */
static int s_repath(rl_config_node *n, const char *path)
{
    char *p = s_strdup(path);
    if (!p)
        return RL_ENOMEM;
    free(n->path);
    n->path = p;
    for (size_t i = 0; i < n->n; i++) {
        char *cp = n->kind == RL_CONFIG_MAP ? s_join_key(path, n->keys[i])
                                            : s_join_index(path, i);
        if (!cp)
            return RL_ENOMEM;
        int rc = s_repath(n->items[i], cp);
        free(cp);
        if (rc)
            return rc;
    }
    return RL_OK;
}

static rl_config_node *s_node_copy(const rl_config_node *n)
{
    rl_config_node *c = s_node_new(n->kind, n->path, n->file, n->line, n->col);
    if (!c)
        return NULL;
    c->quoted = n->quoted;
    c->open = n->open;
    c->number = n->number;
    if (n->text && !(c->text = s_strdup(n->text)))
        goto fail;
    for (size_t i = 0; i < n->n; i++) {
        rl_config_node *item = s_node_copy(n->items[i]);
        if (!item)
            goto fail;
        if (s_node_append(c, n->keys ? n->keys[i] : NULL,
                          n->key_line ? n->key_line[i] : 0,
                          n->key_col ? n->key_col[i] : 0, item)) {
            s_node_free(item);
            goto fail;
        }
    }
    return c;
fail:
    s_node_free(c);
    return NULL;
}

static rl_config *s_tree_new(const char *name, rl_config_node *root)
{
    rl_config *c = calloc(1, sizeof *c);
    if (!c || !(c->name = s_strdup(name))) {
        free(c);
        s_node_free(root);
        rl_error_set(RL_ENOMEM, "config: out of memory");
        return NULL;
    }
    c->root = root;
    return c;
}

/* ---- scalar typing ---------------------------------------------------------------- */

static int s_is_null_text(const char *t)
{
    return t[0] == '\0' || strcmp(t, "~") == 0 || strcmp(t, "null") == 0 ||
           strcmp(t, "Null") == 0 || strcmp(t, "NULL") == 0;
}

/* 1 true, 0 false, -1 not a boolean. */
static int s_parse_bool(const char *t)
{
    static const char *const yes[] = {"true", "yes", "on"};
    static const char *const no[] = {"false", "no", "off"};
    for (int i = 0; i < 3; i++) {
        if (strcasecmp(t, yes[i]) == 0)
            return 1;
        if (strcasecmp(t, no[i]) == 0)
            return 0;
    }
    return -1;
}

/* 0 ok, 1 not an integer, 2 out of range. */
static int s_parse_int(const char *t, int64_t *out)
{
    const char *p = t;
    if (*p == '+' || *p == '-')
        p++;
    int base = 10;
    if (p[0] == '0' && (p[1] == 'x' || p[1] == 'X')) {
        base = 16;
        p += 2;
        if (!isxdigit((unsigned char)*p))
            return 1;
        for (const char *q = p; *q; q++)
            if (!isxdigit((unsigned char)*q))
                return 1;
    } else {
        if (!isdigit((unsigned char)*p))
            return 1;
        for (const char *q = p; *q; q++)
            if (!isdigit((unsigned char)*q))
                return 1;
    }
    errno = 0;
    long long v;
    if (base == 16) {
        unsigned long long u = strtoull(p, NULL, 16);
        if (errno || u > (unsigned long long)LLONG_MAX + (t[0] == '-'))
            return 2;
        v = t[0] == '-' ? (long long)(0 - u) : (long long)u;
    } else {
        v = strtoll(t, NULL, 10);
        if (errno)
            return 2;
    }
    *out = v;
    return 0;
}

/* 0 ok, 1 not a number. Accepts YAML's .inf/.nan spellings, rejects the
 * bare words strtod would take ("inf", "nan", "infinity") and hex floats. */
static int s_parse_double(const char *t, double *out)
{
    const char *p = t;
    int neg = 0;
    if (*p == '+' || *p == '-')
        neg = *p++ == '-';
    if (strcasecmp(p, ".inf") == 0) {
        *out = neg ? -INFINITY : INFINITY;
        return 0;
    }
    if (strcasecmp(t, ".nan") == 0) {
        *out = NAN;
        return 0;
    }
    int digits = 0;
    for (const char *q = p; *q; q++) {
        if (isdigit((unsigned char)*q))
            digits = 1;
        else if (*q != '.' && *q != 'e' && *q != 'E' && *q != '+' && *q != '-')
            return 1;
    }
    if (!digits)
        return 1;
    char *end;
    errno = 0;
    double v = strtod(t, &end);
    if (*end != '\0' || end == t)
        return 1;
    *out = v;
    return 0;
}

rl_config_type rl_config_node_type(const rl_config_node *n)
{
    if (n->kind == RL_CONFIG_MAP)
        return RL_CONFIG_T_MAP;
    if (n->kind == RL_CONFIG_LIST)
        return RL_CONFIG_T_LIST;
    if (n->quoted)
        return RL_CONFIG_T_STRING;
    int64_t i;
    double d;
    if (s_is_null_text(n->text))
        return RL_CONFIG_T_NULL;
    if (s_parse_bool(n->text) >= 0)
        return RL_CONFIG_T_BOOL;
    if (s_parse_int(n->text, &i) != 1)
        return n->number ? RL_CONFIG_T_NUMBER : RL_CONFIG_T_INT;
    if (s_parse_double(n->text, &d) == 0)
        return RL_CONFIG_T_NUMBER;
    return RL_CONFIG_T_STRING;
}

const char *rl_config_type_name(rl_config_type t)
{
    switch (t) {
    case RL_CONFIG_T_NULL: return "null";
    case RL_CONFIG_T_BOOL: return "a boolean";
    case RL_CONFIG_T_INT: return "an integer";
    case RL_CONFIG_T_NUMBER: return "a number";
    case RL_CONFIG_T_STRING: return "a string";
    case RL_CONFIG_T_LIST: return "a list";
    case RL_CONFIG_T_MAP: return "a map";
    }
    return "?";
}

/* "'text'" for scalars (shortened), "a list", "a map", "null". */
static const char *s_describe(const rl_config_node *n, char *buf, size_t size)
{
    if (n->kind == RL_CONFIG_MAP)
        return "a map";
    if (n->kind == RL_CONFIG_LIST)
        return "a list";
    if (!n->quoted && s_is_null_text(n->text))
        return "null";
    size_t len = strlen(n->text);
    if (n->quoted) /* written quoted: a string, however it reads */
        snprintf(buf, size, len > 60 ? "the string \"%.57s...\"" : "the string \"%s\"", n->text);
    else if (len > 60)
        snprintf(buf, size, "'%.57s...'", n->text);
    else
        snprintf(buf, size, "'%s'", n->text);
    return buf;
}

/* ---- error helpers ------------------------------------------------------------------ */

static int s_errv(const rl_config_node *n, int code, const char *fmt, va_list ap)
{
    char msg[768];
    vsnprintf(msg, sizeof msg, fmt, ap);
    if (n->line == 0) /* a command-line override: its text is the location */
        return n->path[0] ? rl_error_set(code, "%s: %s: %s", n->file, n->path, msg)
                          : rl_error_set(code, "%s: %s", n->file, msg);
    if (n->path[0])
        return rl_error_set(code, "%s:%d:%d: %s: %s", n->file, n->line, n->col,
                            n->path, msg);
    return rl_error_set(code, "%s:%d:%d: %s", n->file, n->line, n->col, msg);
}

int rl_config_node_error(const rl_config_node *n, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    s_errv(n, code, fmt, ap);
    va_end(ap);
    return code;
}

static int s_type_error(const rl_config_node *n, rl_config_type want)
{
    char buf[80];
    return rl_config_node_error(n, RL_ECONFIG, "expected %s, got %s",
                                rl_config_type_name(want),
                                s_describe(n, buf, sizeof buf));
}

/* ---- parsing ------------------------------------------------------------------------- */

typedef struct s_anchor {
    char *name;
    rl_config_node *node;
} s_anchor;

/* Limits on what a parse may build: the text can come from a network peer
 * (a worker parses the driver's CONFIGURE), so nesting is bounded (the tree
 * is walked recursively) and so is what the tree holds beyond the text
 * itself: a few hundred bytes of nested aliases would otherwise expand to
 * gigabytes, and so would every node's path repeating a long key. */
#define S_MAX_DEPTH 64                       /* nested maps/lists */
#define S_MAX_ALIAS_NODES 1000000            /* nodes copied by aliases, in all */
#define S_MAX_TEXT ((size_t)64 << 20)        /* bytes of every node's path, and of
                                                the text and keys aliases copy */

typedef struct s_parse {
    yaml_parser_t parser;
    const char *name;
    s_anchor *anchors;
    size_t n_anchors, cap_anchors;
    int depth;                /* maps/lists open around the current event */
    size_t alias_nodes;       /* nodes copied by aliases so far */
    size_t text;              /* bytes of paths, and of what aliases copied */
} s_parse;

/* What copying the subtree `n` (anchored at a path `base` bytes long) to a
 * path `path_len` bytes long adds: nodes, text bytes, and its height (0 for
 * a scalar). Stops counting once over the remaining budget. */
typedef struct s_cost {
    size_t nodes, text, node_cap, text_cap;
    int height;
} s_cost;

static void s_alias_cost(const rl_config_node *n, size_t base, size_t path_len, int level,
                         s_cost *c)
{
    if (c->nodes > c->node_cap || c->text > c->text_cap)
        return;
    size_t own = strlen(n->path);
    c->nodes++;
    c->text += path_len + (own > base ? own - base : 0) + 2 + strlen(n->file) + 1;
    if (n->text)
        c->text += strlen(n->text) + 1;
    if (n->kind != RL_CONFIG_SCALAR && level + 1 > c->height)
        c->height = level + 1;
    for (size_t i = 0; i < n->n; i++) {
        if (n->keys)
            c->text += strlen(n->keys[i]) + 1;
        s_alias_cost(n->items[i], base, path_len, level + 1, c);
    }
}

static int s_parser_error(s_parse *P)
{
    yaml_parser_t *y = &P->parser;
    const yaml_mark_t *m = &y->problem_mark;
    const char *problem = y->problem ? y->problem : "invalid YAML";
    if (y->error == YAML_MEMORY_ERROR)
        return rl_error_set(RL_ENOMEM, "%s: out of memory", P->name);
    if (y->context && y->context_mark.line != m->line)
        return rl_error_set(RL_ECONFIG, "%s:%zu:%zu: %s %s (started at line %zu)",
                            P->name, m->line + 1, m->column + 1, problem, y->context,
                            y->context_mark.line + 1);
    if (y->context)
        return rl_error_set(RL_ECONFIG, "%s:%zu:%zu: %s %s", P->name,
                            m->line + 1, m->column + 1, problem, y->context);
    return rl_error_set(RL_ECONFIG, "%s:%zu:%zu: %s", P->name, m->line + 1,
                        m->column + 1, problem);
}

static int s_next(s_parse *P, yaml_event_t *ev)
{
    if (!yaml_parser_parse(&P->parser, ev))
        return s_parser_error(P);
    return RL_OK;
}

/* The anchors are a hash table (open addressing, a power-of-two size, at
 * most half full): a document of many anchors and aliases costs linear
 * time, not anchors x aliases. */
static uint64_t s_hash(const char *s)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (const unsigned char *q = (const unsigned char *)s; *q; q++)
        h = (h ^ *q) * 1099511628211ull;
    return h;
}

static size_t s_anchor_slot(const s_anchor *tab, size_t cap, const char *name)
{
    size_t mask = cap - 1, i = (size_t)s_hash(name) & mask;
    while (tab[i].name && strcmp(tab[i].name, name) != 0)
        i = (i + 1) & mask;
    return i;
}

static const rl_config_node *s_find_anchor(const s_parse *P, const char *name)
{
    if (!P->cap_anchors)
        return NULL;
    return P->anchors[s_anchor_slot(P->anchors, P->cap_anchors, name)].node;
}

static int s_remember_anchor(s_parse *P, const yaml_char_t *anchor,
                             rl_config_node *node)
{
    if (!anchor)
        return RL_OK;
    if ((P->n_anchors + 1) * 2 > P->cap_anchors) {
        size_t cap = P->cap_anchors ? P->cap_anchors * 2 : 16;
        s_anchor *tab = calloc(cap, sizeof *tab);
        if (!tab)
            return RL_ENOMEM;
        for (size_t i = 0; i < P->cap_anchors; i++)
            if (P->anchors[i].name)
                tab[s_anchor_slot(tab, cap, P->anchors[i].name)] = P->anchors[i];
        free(P->anchors);
        P->anchors = tab;
        P->cap_anchors = cap;
    }
    /* The table holds a borrowed pointer: the node lives in the tree. A
     * name defined again stands for its latest node. */
    s_anchor *a = &P->anchors[s_anchor_slot(P->anchors, P->cap_anchors, (const char *)anchor)];
    if (!a->name) {
        if (!(a->name = s_strdup((const char *)anchor)))
            return RL_ENOMEM;
        P->n_anchors++;
    }
    a->node = node;
    return RL_OK;
}

static int s_parse_node(s_parse *P, yaml_event_t *ev, const char *path,
                        rl_config_node **out);

/* The keys of a map being parsed, hashed (slots hold index + 1), so that
 * the duplicate check of a map of many keys costs linear time, not n^2. */
typedef struct s_keyset {
    size_t *slot;
    size_t cap;
} s_keyset;

/* 1 if `key` is one of map n's keys, else 0 after recording it as the key
 * of n's next item; -1 out of memory. */
static int s_keyset_add(s_keyset *ks, const rl_config_node *n, const char *key)
{
    if ((n->n + 1) * 2 > ks->cap) {
        size_t cap = ks->cap ? ks->cap * 2 : 16;
        size_t *slot = calloc(cap, sizeof *slot);
        if (!slot)
            return -1;
        for (size_t k = 0; k < n->n; k++) {
            size_t i = (size_t)s_hash(n->keys[k]) & (cap - 1);
            while (slot[i])
                i = (i + 1) & (cap - 1);
            slot[i] = k + 1;
        }
        free(ks->slot);
        ks->slot = slot;
        ks->cap = cap;
    }
    size_t i = (size_t)s_hash(key) & (ks->cap - 1);
    for (; ks->slot[i]; i = (i + 1) & (ks->cap - 1))
        if (strcmp(n->keys[ks->slot[i] - 1], key) == 0)
            return 1;
    ks->slot[i] = n->n + 1;
    return 0;
}

static int s_parse_items(s_parse *P, rl_config_node *n, s_keyset *ks);

static int s_parse_children(s_parse *P, rl_config_node *n)
{
    s_keyset ks = {0};
    int rc = s_parse_items(P, n, &ks);
    free(ks.slot);
    return rc;
}

static int s_parse_items(s_parse *P, rl_config_node *n, s_keyset *ks)
{
    for (;;) {
        yaml_event_t ev;
        int rc = s_next(P, &ev);
        if (rc)
            return rc;
        if (ev.type == YAML_MAPPING_END_EVENT || ev.type == YAML_SEQUENCE_END_EVENT) {
            yaml_event_delete(&ev);
            return RL_OK;
        }
        if (n->kind == RL_CONFIG_LIST) {
            char *cp = s_join_index(n->path, n->n);
            rl_config_node *child = NULL;
            rc = cp ? s_parse_node(P, &ev, cp, &child) : RL_ENOMEM;
            free(cp);
            yaml_event_delete(&ev);
            if (rc)
                return rc;
            if (s_node_append(n, NULL, 0, 0, child)) {
                s_node_free(child);
                return rl_error_set(RL_ENOMEM, "config: out of memory");
            }
            continue;
        }
        /* map: key event, then value */
        int kline = (int)ev.start_mark.line + 1, kcol = (int)ev.start_mark.column + 1;
        if (ev.type != YAML_SCALAR_EVENT) {
            yaml_event_delete(&ev);
            if (n->path[0])
                return rl_error_set(RL_ECONFIG, "%s:%d:%d: %s: map keys must be scalars",
                                    P->name, kline, kcol, n->path);
            return rl_error_set(RL_ECONFIG, "%s:%d:%d: map keys must be scalars",
                                P->name, kline, kcol);
        }
        char *key = s_strdup((const char *)ev.data.scalar.value);
        yaml_event_delete(&ev);
        if (!key)
            return rl_error_set(RL_ENOMEM, "config: out of memory");
        char *cp = s_join_key(n->path, key);
        if (!cp) {
            free(key);
            return rl_error_set(RL_ENOMEM, "config: out of memory");
        }
        int dup = s_keyset_add(ks, n, key);
        if (dup) {
            if (dup > 0)
                rl_error_set(RL_ECONFIG, "%s:%d:%d: %s: duplicate key", P->name, kline,
                             kcol, cp);
            else
                rl_error_set(RL_ENOMEM, "config: out of memory");
            free(key);
            free(cp);
            return dup > 0 ? RL_ECONFIG : RL_ENOMEM;
        }
        rl_config_node *child = NULL;
        rc = s_next(P, &ev);
        if (!rc) {
            rc = s_parse_node(P, &ev, cp, &child);
            yaml_event_delete(&ev);
        }
        free(cp);
        if (!rc && s_node_append(n, key, kline, kcol, child)) {
            s_node_free(child);
            rc = rl_error_set(RL_ENOMEM, "config: out of memory");
        }
        free(key);
        if (rc)
            return rc;
    }
}

static int s_parse_node(s_parse *P, yaml_event_t *ev, const char *path,
                        rl_config_node **out)
{
    int line = (int)ev->start_mark.line + 1, col = (int)ev->start_mark.column + 1;
    rl_config_node *n = NULL;
    int rc = RL_OK;
    if (ev->type != YAML_ALIAS_EVENT) { /* an alias counts what it copies */
        size_t cost = strlen(path) + 1;
        if (cost > S_MAX_TEXT - P->text)
            return rl_error_set(RL_ECONFIG,
                                "%s:%d:%d: the config's paths pass %zu MiB (long keys over "
                                "many entries)",
                                P->name, line, col, S_MAX_TEXT >> 20);
        P->text += cost;
    }
    switch (ev->type) {
    case YAML_SCALAR_EVENT:
        n = s_node_new(RL_CONFIG_SCALAR, path, P->name, line, col);
        if (!n || !(n->text = s_strdup((const char *)ev->data.scalar.value)))
            goto nomem;
        n->quoted = ev->data.scalar.style != YAML_PLAIN_SCALAR_STYLE;
        /* An explicit !!str tag makes a plain scalar a string. */
        if (ev->data.scalar.tag &&
            strcmp((const char *)ev->data.scalar.tag, YAML_STR_TAG) == 0)
            n->quoted = 1;
        rc = s_remember_anchor(P, ev->data.scalar.anchor, n);
        break;
    case YAML_SEQUENCE_START_EVENT:
    case YAML_MAPPING_START_EVENT:
        if (P->depth >= S_MAX_DEPTH)
            return rl_error_set(RL_ECONFIG, "%s:%d:%d: nesting deeper than %d levels",
                                P->name, line, col, S_MAX_DEPTH);
        n = s_node_new(ev->type == YAML_MAPPING_START_EVENT ? RL_CONFIG_MAP
                                                           : RL_CONFIG_LIST,
                       path, P->name, line, col);
        if (!n)
            goto nomem;
        P->depth++;
        rc = s_parse_children(P, n);
        P->depth--;
        if (!rc && n->kind == RL_CONFIG_MAP && n->n == 0)
            n->open = 1;
        if (!rc)
            rc = s_remember_anchor(P, ev->type == YAML_MAPPING_START_EVENT
                                          ? ev->data.mapping_start.anchor
                                          : ev->data.sequence_start.anchor,
                                   n);
        break;
    case YAML_ALIAS_EVENT: {
        const char *name = (const char *)ev->data.alias.anchor;
        const rl_config_node *a = s_find_anchor(P, name);
        if (!a)
            return rl_error_set(RL_ECONFIG, "%s:%d:%d: unknown anchor '%.64s'", P->name,
                                line, col, name);
        s_cost cost = {.node_cap = S_MAX_ALIAS_NODES - P->alias_nodes,
                       .text_cap = S_MAX_TEXT - P->text};
        s_alias_cost(a, strlen(a->path), strlen(path), 0, &cost);
        if (P->depth + cost.height > S_MAX_DEPTH)
            return rl_error_set(RL_ECONFIG,
                                "%s:%d:%d: alias '*%.64s' nests deeper than %d levels",
                                P->name, line, col, name, S_MAX_DEPTH);
        if (cost.nodes > cost.node_cap)
            return rl_error_set(RL_ECONFIG,
                                "%s:%d:%d: alias '*%.64s' expands the config past %d nodes "
                                "copied by aliases",
                                P->name, line, col, name, S_MAX_ALIAS_NODES);
        if (cost.text > cost.text_cap)
            return rl_error_set(RL_ECONFIG,
                                "%s:%d:%d: alias '*%.64s' expands the config past %zu MiB "
                                "of text",
                                P->name, line, col, name, S_MAX_TEXT >> 20);
        P->alias_nodes += cost.nodes;
        P->text += cost.text;
        n = s_node_copy(a);
        if (!n || s_repath(n, path))
            goto nomem;
        break;
    }
    default:
        return rl_error_set(RL_ECONFIG, "%s:%d:%d: unexpected YAML event", P->name,
                            line, col);
    }
    if (rc) {
        s_node_free(n);
        if (rc == RL_ENOMEM)
            goto nomem;
        return rc;
    }
    *out = n;
    return RL_OK;
nomem:
    s_node_free(n);
    return rl_error_set(RL_ENOMEM, "config: out of memory");
}

rl_config *rl_config_parse_string(const char *text, size_t len, const char *name)
{
    if (!text)
        return rl_error_set(RL_EINVAL, "config: NULL text"), NULL;
    if (!name)
        name = "<string>";
    s_parse P;
    memset(&P, 0, sizeof P);
    P.name = name;
    if (!yaml_parser_initialize(&P.parser))
        return rl_error_set(RL_ENOMEM, "config: out of memory"), NULL;
    yaml_parser_set_input_string(&P.parser, (const unsigned char *)text, len);
    rl_config_node *root = NULL;
    int rc, docs = 0, done = 0;
    while (!done) {
        yaml_event_t ev;
        if ((rc = s_next(&P, &ev)))
            goto out;
        switch (ev.type) {
        case YAML_STREAM_END_EVENT:
            done = 1;
            break;
        case YAML_DOCUMENT_START_EVENT:
            if (++docs > 1) {
                rc = rl_error_set(RL_ECONFIG,
                                  "%s:%zu:%zu: more than one YAML document", name,
                                  ev.start_mark.line + 1, ev.start_mark.column + 1);
                yaml_event_delete(&ev);
                goto out;
            }
            break;
        case YAML_SCALAR_EVENT:
        case YAML_SEQUENCE_START_EVENT:
        case YAML_MAPPING_START_EVENT:
        case YAML_ALIAS_EVENT:
            rc = s_parse_node(&P, &ev, "", &root);
            if (rc) {
                yaml_event_delete(&ev);
                goto out;
            }
            break;
        default:
            break;
        }
        yaml_event_delete(&ev);
    }
    /* An empty document is an empty map, so "no settings" parses. */
    if (!root || (root->kind == RL_CONFIG_SCALAR && !root->quoted &&
                  s_is_null_text(root->text))) {
        s_node_free(root);
        root = s_node_new(RL_CONFIG_MAP, "", name, 1, 1);
        if (!root) {
            rc = rl_error_set(RL_ENOMEM, "config: out of memory");
            goto out;
        }
        root->open = 1;
    }
    rc = RL_OK;
out:
    for (size_t i = 0; i < P.cap_anchors; i++)
        free(P.anchors[i].name);
    free(P.anchors);
    yaml_parser_delete(&P.parser);
    if (rc) {
        s_node_free(root);
        return NULL;
    }
    return s_tree_new(name, root);
}

rl_config *rl_config_parse_file(const char *path)
{
    size_t len;
    char *buf = rl_file_read_all(path, &len);
    if (!buf)
        return NULL;
    rl_config *c = rl_config_parse_string(buf, len, path);
    free(buf);
    return c;
}

rl_config *rl_config_new(const char *name)
{
    if (!name)
        name = "<config>";
    rl_config_node *root = s_node_new(RL_CONFIG_MAP, "", name, 1, 1);
    if (!root)
        return rl_error_set(RL_ENOMEM, "config: out of memory"), NULL;
    root->open = 1;
    return s_tree_new(name, root);
}

void rl_config_free(rl_config *c)
{
    if (!c)
        return;
    s_drop_cache(c);
    s_node_free(c->root);
    free(c->name);
    free(c);
}

const char *rl_config_name(const rl_config *c) { return c->name; }

/* ---- paths ---------------------------------------------------------------------------- */

/* Splits the next component off `*p`: a key (into buf) or an index. Returns
 * 1 if a component was read, 0 at the end, -1 on a malformed path. */
static int s_next_component(const char **p, char *buf, size_t size, int *is_index,
                            size_t *index)
{
    const char *s = *p;
    if (*s == '.')
        s++;
    if (*s == '\0')
        return 0;
    if (*s == '[') {
        char *end;
        errno = 0;
        unsigned long long v = strtoull(s + 1, &end, 10);
        if (end == s + 1 || *end != ']' || errno)
            return -1;
        *is_index = 1;
        *index = (size_t)v;
        *p = end + 1;
        return 1;
    }
    size_t n = strcspn(s, ".[");
    if (n == 0 || n >= size)
        return -1;
    memcpy(buf, s, n);
    buf[n] = '\0';
    *is_index = 0;
    *p = s + n;
    return 1;
}

typedef struct s_found {
    rl_config_node *node;   /* the node, or NULL if missing */
    rl_config_node *parent; /* deepest existing node on the way */
    size_t index;           /* index of node in parent (if node) */
    char missing[256];      /* the first missing component */
    const char *rest;       /* where that component starts in the path */
    int through_scalar;     /* the path ran into a scalar */
    int bad_path;
} s_found;

static void s_lookup(rl_config_node *root, const char *path, s_found *f)
{
    memset(f, 0, sizeof *f);
    rl_config_node *n = root;
    const char *p = path ? path : "";
    char key[256];
    int is_index;
    size_t index;
    for (;;) {
        const char *start = p;
        int r = s_next_component(&p, key, sizeof key, &is_index, &index);
        if (r == 0)
            break;
        f->rest = start;
        if (r < 0) {
            f->bad_path = 1;
            f->parent = n;
            return;
        }
        long found = -1;
        if (n->kind == RL_CONFIG_MAP && !is_index) {
            found = s_map_find(n, key);
        } else if (n->kind == RL_CONFIG_LIST) {
            if (!is_index) {
                char *end;
                unsigned long long v = strtoull(key, &end, 10);
                if (*end == '\0' && isdigit((unsigned char)key[0])) {
                    is_index = 1;
                    index = (size_t)v;
                }
            }
            if (is_index && index < n->n)
                found = (long)index;
        } else if (n->kind == RL_CONFIG_SCALAR) {
            f->through_scalar = 1;
        }
        if (found < 0) {
            f->parent = n;
            if (is_index)
                snprintf(f->missing, sizeof f->missing, "[%zu]", index);
            else
                snprintf(f->missing, sizeof f->missing, "%s", key);
            return;
        }
        f->parent = n;
        f->index = (size_t)found;
        n = n->items[found];
    }
    f->node = n;
}

/* Finds `path` or sets the "missing key" / "bad path" message. */
static int s_find(const rl_config *c, const char *path, rl_config_node **out)
{
    s_found f;
    s_lookup(c->root, path, &f);
    if (f.node) {
        *out = f.node;
        return RL_OK;
    }
    if (f.bad_path)
        return rl_error_set(RL_EINVAL, "%s: malformed config path '%s'", c->name,
                            path);
    if (f.through_scalar)
        return s_type_error(f.parent, RL_CONFIG_T_MAP);
    if (f.parent->kind == RL_CONFIG_LIST && f.missing[0] == '[')
        return rl_config_node_error(f.parent, RL_ENOTFOUND,
                                    "missing item %s (the list has %zu items)",
                                    f.missing, f.parent->n);
    return rl_config_node_error(f.parent, RL_ENOTFOUND, "missing key '%s'", f.missing);
}

int rl__config_find(const rl_config *c, const char *path, const rl_config_node **out)
{
    rl_config_node *n = NULL;
    int rc = s_find(c, path, &n);
    *out = n;
    return rc;
}

int rl_config_has(const rl_config *c, const char *path)
{
    s_found f;
    s_lookup(c->root, path, &f);
    return f.node != NULL;
}

const rl_config_node *rl_config_root(const rl_config *c) { return c->root; }

const rl_config_node *rl_config_node_at(const rl_config_node *n, const char *path)
{
    s_found f;
    s_lookup((rl_config_node *)n, path, &f);
    return f.node;
}

rl_config_kind rl_config_node_kind(const rl_config_node *n) { return n->kind; }
const char *rl_config_node_path(const rl_config_node *n) { return n->path; }
const char *rl_config_node_file(const rl_config_node *n) { return n->file; }
int rl_config_node_line(const rl_config_node *n) { return n->line; }
int rl_config_node_column(const rl_config_node *n) { return n->col; }
const char *rl_config_node_text(const rl_config_node *n) { return n->text; }
int rl_config_node_quoted(const rl_config_node *n) { return n->quoted; }
size_t rl_config_node_len(const rl_config_node *n) { return n->n; }

const char *rl_config_node_key(const rl_config_node *n, size_t i)
{
    return n->kind == RL_CONFIG_MAP && i < n->n ? n->keys[i] : NULL;
}

const rl_config_node *rl_config_node_item(const rl_config_node *n, size_t i)
{
    return i < n->n ? n->items[i] : NULL;
}

int rl_config_node_key_line(const rl_config_node *n, size_t i)
{
    return n->kind == RL_CONFIG_MAP && i < n->n ? n->key_line[i] : 0;
}

int rl_config_node_key_column(const rl_config_node *n, size_t i)
{
    return n->kind == RL_CONFIG_MAP && i < n->n ? n->key_col[i] : 0;
}

/* ---- typed reads ------------------------------------------------------------------------ */

int rl_config_node_string(const rl_config_node *n, const char **out)
{
    if (n->kind != RL_CONFIG_SCALAR || (!n->quoted && s_is_null_text(n->text)))
        return s_type_error(n, RL_CONFIG_T_STRING);
    *out = n->text;
    return RL_OK;
}

int rl_config_node_int(const rl_config_node *n, int64_t *out)
{
    if (n->kind != RL_CONFIG_SCALAR)
        return s_type_error(n, RL_CONFIG_T_INT);
    int r = s_parse_int(n->text, out);
    if (r == 2)
        return rl_config_node_error(n, RL_ERANGE, "integer out of range: '%s'", n->text);
    if (r)
        return s_type_error(n, RL_CONFIG_T_INT);
    return RL_OK;
}

int rl_config_node_double(const rl_config_node *n, double *out)
{
    if (n->kind != RL_CONFIG_SCALAR || s_parse_double(n->text, out))
        return s_type_error(n, RL_CONFIG_T_NUMBER);
    return RL_OK;
}

int rl_config_node_bool(const rl_config_node *n, int *out)
{
    int b = n->kind == RL_CONFIG_SCALAR ? s_parse_bool(n->text) : -1;
    if (b < 0)
        return s_type_error(n, RL_CONFIG_T_BOOL);
    *out = b;
    return RL_OK;
}

/* Lookup for the *_or getters: 1 = use the default, 0 = node found. */
static int s_find_or(const rl_config *c, const char *path, rl_config_node **n, int *rc)
{
    s_found f;
    s_lookup(c->root, path, &f);
    *rc = RL_OK;
    if (f.node) {
        *n = f.node;
        return f.node->kind == RL_CONFIG_SCALAR && !f.node->quoted &&
               s_is_null_text(f.node->text);
    }
    if (f.bad_path || f.through_scalar)
        *rc = s_find(c, path, n);
    return 1;
}

/* The node at `path`, which must be a `kind` (`type` names it in the error). */
static int s_find_kind(const rl_config *c, const char *path, rl_config_kind kind,
                       rl_config_type type, rl_config_node **n)
{
    int rc = s_find(c, path, n);
    if (!rc && (*n)->kind != kind)
        rc = s_type_error(*n, type);
    return rc;
}

/* One reader for every typed getter: the scalar at `path` read as `type`
 * into out. With def (the default, `size` bytes) a missing key or a null
 * value gives the default (the *_or getters); without, a missing key is an
 * error. */
static int s_get(const rl_config *c, const char *path, rl_config_type type, const void *def,
                 size_t size, void *out)
{
    rl_config_node *n;
    int rc;
    if (def) {
        if (s_find_or(c, path, &n, &rc)) {
            if (!rc)
                memcpy(out, def, size);
            return rc;
        }
    } else if ((rc = s_find(c, path, &n))) {
        return rc;
    }
    switch (type) {
    case RL_CONFIG_T_STRING: return rl_config_node_string(n, out);
    case RL_CONFIG_T_INT: return rl_config_node_int(n, out);
    case RL_CONFIG_T_NUMBER: return rl_config_node_double(n, out);
    default: return rl_config_node_bool(n, out);
    }
}

int rl_config_get_string(const rl_config *c, const char *path, const char **out)
{
    return s_get(c, path, RL_CONFIG_T_STRING, NULL, 0, out);
}

int rl_config_get_int(const rl_config *c, const char *path, int64_t *out)
{
    return s_get(c, path, RL_CONFIG_T_INT, NULL, 0, out);
}

int rl_config_get_double(const rl_config *c, const char *path, double *out)
{
    return s_get(c, path, RL_CONFIG_T_NUMBER, NULL, 0, out);
}

int rl_config_get_bool(const rl_config *c, const char *path, int *out)
{
    return s_get(c, path, RL_CONFIG_T_BOOL, NULL, 0, out);
}

int rl_config_get_string_or(const rl_config *c, const char *path, const char *def,
                            const char **out)
{
    return s_get(c, path, RL_CONFIG_T_STRING, &def, sizeof def, out);
}

int rl_config_get_int_or(const rl_config *c, const char *path, int64_t def, int64_t *out)
{
    return s_get(c, path, RL_CONFIG_T_INT, &def, sizeof def, out);
}

int rl_config_get_double_or(const rl_config *c, const char *path, double def, double *out)
{
    return s_get(c, path, RL_CONFIG_T_NUMBER, &def, sizeof def, out);
}

int rl_config_get_bool_or(const rl_config *c, const char *path, int def, int *out)
{
    return s_get(c, path, RL_CONFIG_T_BOOL, &def, sizeof def, out);
}

int rl_config_list_len(const rl_config *c, const char *path, size_t *out)
{
    rl_config_node *n;
    int rc = s_find_kind(c, path, RL_CONFIG_LIST, RL_CONFIG_T_LIST, &n);
    if (!rc)
        *out = n->n;
    return rc;
}

int rl_config_map_len(const rl_config *c, const char *path, size_t *out)
{
    rl_config_node *n;
    int rc = s_find_kind(c, path, RL_CONFIG_MAP, RL_CONFIG_T_MAP, &n);
    if (!rc)
        *out = n->n;
    return rc;
}

int rl_config_map_key(const rl_config *c, const char *path, size_t i, const char **out)
{
    rl_config_node *n;
    int rc = s_find_kind(c, path, RL_CONFIG_MAP, RL_CONFIG_T_MAP, &n);
    if (rc)
        return rc;
    if (i >= n->n)
        return rl_config_node_error(n, RL_ERANGE, "entry %zu out of range (the map has %zu)",
                                    i, n->n);
    *out = n->keys[i];
    return RL_OK;
}

/* ---- suggestions ------------------------------------------------------------------------ */

size_t rl_edit_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    size_t *row = malloc((lb + 1) * sizeof *row);
    if (!row)
        return (size_t)-1;
    for (size_t j = 0; j <= lb; j++)
        row[j] = j;
    for (size_t i = 1; i <= la; i++) {
        size_t diag = row[0];
        row[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t up = row[j];
            size_t best = diag + (a[i - 1] != b[j - 1]);
            if (up + 1 < best)
                best = up + 1;
            if (row[j - 1] + 1 < best)
                best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    size_t d = row[lb];
    free(row);
    return d;
}

typedef struct s_suggest {
    const char *want;
    char best[512];
    size_t best_d;
} s_suggest;

/* Considers every map key path below `n` (lists are not entered: their
 * items have no names to misspell). */
static void s_suggest_walk(const rl_config_node *n, s_suggest *s)
{
    if (n->kind != RL_CONFIG_MAP)
        return;
    for (size_t i = 0; i < n->n; i++) {
        const char *p = n->items[i]->path;
        size_t d = rl_edit_distance(s->want, p);
        if (d < s->best_d) {
            s->best_d = d;
            snprintf(s->best, sizeof s->best, "%s", p);
        }
        s_suggest_walk(n->items[i], s);
    }
}

/* Fills `out` with "; did you mean 'x'?" or "" when nothing is close. */
static void s_suggestion(const rl_config_node *known, const char *want, char *out,
                         size_t size)
{
    s_suggest s = {.want = want, .best_d = (size_t)-1};
    s.best[0] = '\0';
    s_suggest_walk(known, &s);
    size_t limit = 2 + strlen(want) / 4;
    if (s.best[0] && s.best_d <= limit)
        snprintf(out, size, "; did you mean '%s'?", s.best);
    else
        out[0] = '\0';
}

int rl_config_node_check_keys(const rl_config_node *n, const char *const *allowed)
{
    if (n->kind != RL_CONFIG_MAP)
        return s_type_error(n, RL_CONFIG_T_MAP);
    for (size_t i = 0; i < n->n; i++) {
        const char *k = n->keys[i];
        const char *best = NULL;
        size_t best_d = (size_t)-1;
        int ok = 0;
        for (const char *const *a = allowed; *a; a++) {
            if (strcmp(*a, k) == 0) {
                ok = 1;
                break;
            }
            size_t d = rl_edit_distance(k, *a);
            if (d < best_d) {
                best_d = d;
                best = *a;
            }
        }
        if (ok)
            continue;
        char hint[300] = "";
        if (best && best_d <= 2 + strlen(k) / 4)
            snprintf(hint, sizeof hint, "; did you mean '%s'?", best);
        if (n->path[0])
            return rl_error_set(RL_ECONFIG, "%s:%d:%d: %s: unknown key '%s'%s", n->file,
                                n->key_line[i], n->key_col[i], n->path, k, hint);
        return rl_error_set(RL_ECONFIG, "%s:%d:%d: unknown key '%s'%s", n->file,
                            n->key_line[i], n->key_col[i], k, hint);
    }
    return RL_OK;
}

/* ---- subtree, merge ---------------------------------------------------------------------- */

rl_config *rl_config_subtree(const rl_config *c, const char *path)
{
    rl_config_node *n;
    if (s_find(c, path, &n))
        return NULL;
    rl_config_node *copy = s_node_copy(n);
    if (!copy)
        return rl_error_set(RL_ENOMEM, "config: out of memory"), NULL;
    return s_tree_new(c->name, copy);
}

/* Lays `src` over `dst` (both maps). */
static int s_merge_into(rl_config_node *dst, const rl_config_node *src)
{
    for (size_t i = 0; i < src->n; i++) {
        long j = s_map_find(dst, src->keys[i]);
        const rl_config_node *s = src->items[i];
        if (j >= 0 && dst->items[j]->kind == RL_CONFIG_MAP && s->kind == RL_CONFIG_MAP) {
            int rc = s_merge_into(dst->items[j], s);
            if (rc)
                return rc;
            continue;
        }
        /* "actor:" with every line below commented out keeps the defaults
         * rather than wiping the whole section. */
        if (j >= 0 && dst->items[j]->kind == RL_CONFIG_MAP && s->kind == RL_CONFIG_SCALAR &&
            !s->quoted && s_is_null_text(s->text))
            continue;
        rl_config_node *copy = s_node_copy(s);
        if (!copy)
            return RL_ENOMEM;
        if (j >= 0) {
            /* "lr: 1" over "lr: 1.0e-6" is still a number for later checks. */
            if (rl_config_node_type(dst->items[j]) == RL_CONFIG_T_NUMBER &&
                rl_config_node_type(copy) == RL_CONFIG_T_INT)
                copy->number = 1;
            s_node_free(dst->items[j]);
            dst->items[j] = copy;
            dst->key_line[j] = src->key_line[i];
            dst->key_col[j] = src->key_col[i];
        } else if (s_node_append(dst, src->keys[i], src->key_line[i],
                                 src->key_col[i], copy)) {
            s_node_free(copy);
            return RL_ENOMEM;
        }
    }
    return RL_OK;
}

rl_config *rl_config_merge(const rl_config *base, const rl_config *over)
{
    rl_config_node *root;
    if (base->root->kind == RL_CONFIG_MAP && over->root->kind == RL_CONFIG_MAP) {
        root = s_node_copy(base->root);
        if (root && s_merge_into(root, over->root)) {
            s_node_free(root);
            root = NULL;
        }
    } else {
        root = s_node_copy(over->root);
    }
    if (!root)
        return rl_error_set(RL_ENOMEM, "config: out of memory"), NULL;
    return s_tree_new(over->name, root);
}

/* ---- serialisation ----------------------------------------------------------------------- */

static void s_puts(rl_text *b, const char *s) { rl_text_put(b, s, strlen(s)); }

static int s_yaml_write(void *data, unsigned char *buffer, size_t size)
{
    rl_text *b = data;
    rl_text_put(b, buffer, size);
    return !b->failed;
}

static int s_emit_node(yaml_emitter_t *e, const rl_config_node *n)
{
    yaml_event_t ev;
    if (n->kind == RL_CONFIG_SCALAR) {
        const char *text = n->text;
        yaml_scalar_style_t style = YAML_PLAIN_SCALAR_STYLE;
        if (n->quoted)
            style = YAML_DOUBLE_QUOTED_SCALAR_STYLE;
        else if (s_is_null_text(text))
            text = "null";
        if (!yaml_scalar_event_initialize(&ev, NULL, NULL, (yaml_char_t *)text,
                                          (int)strlen(text), 1, 1, style))
            return 0;
        return yaml_emitter_emit(e, &ev);
    }
    if (n->kind == RL_CONFIG_LIST) {
        if (!yaml_sequence_start_event_initialize(&ev, NULL, NULL, 1,
                                                  YAML_ANY_SEQUENCE_STYLE) ||
            !yaml_emitter_emit(e, &ev))
            return 0;
        for (size_t i = 0; i < n->n; i++)
            if (!s_emit_node(e, n->items[i]))
                return 0;
        return yaml_sequence_end_event_initialize(&ev) && yaml_emitter_emit(e, &ev);
    }
    if (!yaml_mapping_start_event_initialize(&ev, NULL, NULL, 1, YAML_ANY_MAPPING_STYLE) ||
        !yaml_emitter_emit(e, &ev))
        return 0;
    for (size_t i = 0; i < n->n; i++) {
        yaml_scalar_style_t ks = YAML_PLAIN_SCALAR_STYLE;
        if (!yaml_scalar_event_initialize(&ev, NULL, NULL, (yaml_char_t *)n->keys[i],
                                          (int)strlen(n->keys[i]), 1, 1, ks) ||
            !yaml_emitter_emit(e, &ev) || !s_emit_node(e, n->items[i]))
            return 0;
    }
    return yaml_mapping_end_event_initialize(&ev) && yaml_emitter_emit(e, &ev);
}

char *rl_config_to_yaml(const rl_config *c, const char *path)
{
    rl_config_node *n;
    if (s_find(c, path, &n))
        return NULL;
    yaml_emitter_t e;
    yaml_event_t ev;
    rl_text b = {0};
    if (!yaml_emitter_initialize(&e))
        return rl_error_set(RL_ENOMEM, "config: out of memory"), NULL;
    yaml_emitter_set_output(&e, s_yaml_write, &b);
    yaml_emitter_set_unicode(&e, 1);
    yaml_emitter_set_width(&e, -1);
    yaml_emitter_set_indent(&e, 2);
    int ok = yaml_stream_start_event_initialize(&ev, YAML_UTF8_ENCODING) &&
             yaml_emitter_emit(&e, &ev) &&
             yaml_document_start_event_initialize(&ev, NULL, NULL, NULL, 1) &&
             yaml_emitter_emit(&e, &ev) && s_emit_node(&e, n) &&
             yaml_document_end_event_initialize(&ev, 1) && yaml_emitter_emit(&e, &ev) &&
             yaml_stream_end_event_initialize(&ev) && yaml_emitter_emit(&e, &ev);
    const char *problem = e.problem;
    yaml_emitter_delete(&e);
    if (!ok || b.failed) {
        free(b.buf);
        if (b.failed)
            return rl_error_set(RL_ENOMEM, "config: out of memory"), NULL;
        return rl_error_set(RL_EINVAL, "%s: cannot write YAML: %s", c->name,
                            problem ? problem : "emitter error"), NULL;
    }
    return b.buf;
}

static int s_is_json_number(const char *t)
{
    const char *p = t;
    if (*p == '-')
        p++;
    if (*p == '0')
        p++;
    else if (*p >= '1' && *p <= '9')
        while (isdigit((unsigned char)*p))
            p++;
    else
        return 0;
    if (*p == '.') {
        p++;
        if (!isdigit((unsigned char)*p))
            return 0;
        while (isdigit((unsigned char)*p))
            p++;
    }
    if (*p == 'e' || *p == 'E') {
        p++;
        if (*p == '+' || *p == '-')
            p++;
        if (!isdigit((unsigned char)*p))
            return 0;
        while (isdigit((unsigned char)*p))
            p++;
    }
    return *p == '\0';
}

static void s_json_string(rl_text *b, const char *s)
{
    rl_text_put(b, "\"", 1);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        char esc[8];
        switch (*p) {
        case '"': s_puts(b, "\\\""); break;
        case '\\': s_puts(b, "\\\\"); break;
        case '\n': s_puts(b, "\\n"); break;
        case '\t': s_puts(b, "\\t"); break;
        case '\r': s_puts(b, "\\r"); break;
        default:
            if (*p < 0x20) {
                snprintf(esc, sizeof esc, "\\u%04x", *p);
                s_puts(b, esc);
            } else {
                rl_text_put(b, p, 1);
            }
        }
    }
    rl_text_put(b, "\"", 1);
}

static void s_json_node(rl_text *b, const rl_config_node *n)
{
    if (n->kind == RL_CONFIG_SCALAR) {
        rl_config_type t = rl_config_node_type(n);
        int64_t iv;
        if (t == RL_CONFIG_T_NULL) {
            s_puts(b, "null");
        } else if (t == RL_CONFIG_T_BOOL) {
            s_puts(b, s_parse_bool(n->text) ? "true" : "false");
        } else if (t == RL_CONFIG_T_INT && s_parse_int(n->text, &iv) == 0) {
            char num[32];
            snprintf(num, sizeof num, "%lld", (long long)iv); /* hex → decimal */
            s_puts(b, num);
        } else if ((t == RL_CONFIG_T_INT || t == RL_CONFIG_T_NUMBER) &&
                   s_is_json_number(n->text)) {
            s_puts(b, n->text);
        } else {
            s_json_string(b, n->text);
        }
        return;
    }
    s_puts(b, n->kind == RL_CONFIG_LIST ? "[" : "{");
    for (size_t i = 0; i < n->n; i++) {
        if (i)
            s_puts(b, ",");
        if (n->kind == RL_CONFIG_MAP) {
            s_json_string(b, n->keys[i]);
            s_puts(b, ":");
        }
        s_json_node(b, n->items[i]);
    }
    s_puts(b, n->kind == RL_CONFIG_LIST ? "]" : "}");
}

char *rl_config_to_json(const rl_config *c, const char *path)
{
    rl_config_node *n;
    if (s_find(c, path, &n))
        return NULL;
    rl_text b = {0};
    s_json_node(&b, n);
    if (b.failed) {
        free(b.buf);
        return rl_error_set(RL_ENOMEM, "config: out of memory"), NULL;
    }
    return b.buf;
}

/* ---- setting values ------------------------------------------------------------------------ */

/* Puts `value` (owned) at `path`, replacing a node or creating the missing
 * maps on the way. */
static int s_put(rl_config *c, const char *path, rl_config_node *value)
{
    s_drop_cache(c);
    s_found f;
    s_lookup(c->root, path, &f);
    if (f.node) {
        if (s_repath(value, f.node->path))
            goto nomem;
        value->open = value->open || (f.node->kind == RL_CONFIG_MAP && f.node->open &&
                                      value->kind == RL_CONFIG_MAP);
        if (f.node == c->root) {
            s_node_free(c->root);
            c->root = value;
        } else {
            s_node_free(f.parent->items[f.index]);
            f.parent->items[f.index] = value;
        }
        return RL_OK;
    }
    if (f.bad_path) {
        s_node_free(value);
        return rl_error_set(RL_EINVAL, "%s: malformed config path '%s'", c->name, path);
    }
    if (f.parent->kind != RL_CONFIG_MAP || f.missing[0] == '[') {
        s_node_free(value);
        return s_find(c, path, &f.parent);
    }
    /* Create the missing maps below the deepest existing one. */
    rl_config_node *n = f.parent;
    const char *rest = f.rest;
    char key[256];
    int is_index;
    size_t index;
    for (;;) {
        int r = s_next_component(&rest, key, sizeof key, &is_index, &index);
        if (r <= 0 || is_index) {
            s_node_free(value);
            return rl_error_set(RL_EINVAL, "%s: cannot create '%s'", c->name, path);
        }
        int last = *rest == '\0';
        char *cp = s_join_key(n->path, key);
        rl_config_node *child;
        if (last) {
            child = value;
            if (!cp || s_repath(child, cp)) {
                free(cp);
                goto nomem;
            }
        } else {
            child = cp ? s_node_new(RL_CONFIG_MAP, cp, value->file, value->line,
                                    value->col)
                       : NULL;
            if (child)
                child->open = 1;
        }
        free(cp);
        if (!child || s_node_append(n, key, child->line, child->col, child)) {
            if (child != value)
                s_node_free(child);
            goto nomem;
        }
        if (last)
            return RL_OK;
        n = child;
    }
nomem:
    s_node_free(value);
    return rl_error_set(RL_ENOMEM, "config: out of memory");
}

/* The value `text` parsed into v stands for, taken out of v (which it
 * frees): its root, or for blank text an empty scalar (a null value, not
 * the empty map the parser gives). NULL when out of memory. */
static rl_config_node *s_take_value(rl_config *v, const char *text, const char *name)
{
    rl_config_node *value = v->root;
    v->root = NULL;
    rl_config_free(v);
    if (text[strspn(text, " \t\r\n")] != '\0')
        return value;
    s_node_free(value);
    value = s_node_new(RL_CONFIG_SCALAR, "", name, 1, 1);
    if (!value || !(value->text = s_strdup(""))) {
        s_node_free(value);
        rl_error_set(RL_ENOMEM, "config: out of memory");
        return NULL;
    }
    return value;
}

int rl_config_set_yaml(rl_config *c, const char *path, const char *yaml)
{
    rl_config *v = rl_config_parse_string(yaml, strlen(yaml), "<set>");
    if (!v)
        return rl_error_code();
    rl_config_node *value = s_take_value(v, yaml, "<set>");
    return value ? s_put(c, path, value) : RL_ENOMEM;
}

/* Strips one pair of matching outer quotes. */
static char *s_unquote(const char *v)
{
    size_t n = strlen(v);
    if (n >= 2 && (v[0] == '"' || v[0] == '\'') && v[n - 1] == v[0]) {
        char *s = malloc(n - 1);
        if (s) {
            memcpy(s, v + 1, n - 2);
            s[n - 2] = '\0';
        }
        return s;
    }
    return s_strdup(v);
}

/* Every node of `n` now lives at `where` (line 0: "where: path: ..."). */
static int s_relocate(rl_config_node *n, const char *where)
{
    char *f = s_strdup(where);
    if (!f)
        return rl_error_set(RL_ENOMEM, "config: out of memory");
    free(n->file);
    n->file = f;
    n->line = n->col = 0;
    for (size_t i = 0; i < n->n; i++) {
        if (n->key_line)
            n->key_line[i] = n->key_col[i] = 0;
        int rc = s_relocate(n->items[i], where);
        if (rc)
            return rc;
    }
    return RL_OK;
}

/* RL_ECONFIG (message set) unless the parsed override `value` fits the type
 * of the key's node `old` (a number takes an integer too, and is marked a
 * number; a map only where the map is open). */
static int s_override_fits(const rl_config_node *old, rl_config_node *value, const char *kv,
                           const char *key)
{
    rl_config_type want = rl_config_node_type(old), got = rl_config_node_type(value);
    int ok;
    switch (want) {
    case RL_CONFIG_T_NULL: ok = 1; break;
    case RL_CONFIG_T_NUMBER: ok = got == RL_CONFIG_T_NUMBER || got == RL_CONFIG_T_INT; break;
    case RL_CONFIG_T_MAP: ok = got == RL_CONFIG_T_MAP && old->open; break;
    default: ok = got == want;
    }
    if (ok && want == RL_CONFIG_T_NUMBER)
        value->number = 1;
    if (ok)
        return RL_OK;
    char buf[80];
    if (want == RL_CONFIG_T_MAP && !old->open)
        return rl_error_set(RL_ECONFIG,
                            "override %s: '%s' is a map; override its keys one by one "
                            "(%s.<key>=value)",
                            kv, key, key);
    return rl_error_set(RL_ECONFIG, "override %s: expected %s, got %s", kv,
                        rl_config_type_name(want), s_describe(value, buf, sizeof buf));
}

/* The offset of the first byte of s that is not part of well-formed UTF-8
 * (no overlong forms, surrogates or code points past U+10FFFF), or -1. */
static long s_utf8_bad(const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    for (long i = 0; p[i];) {
        unsigned char b = p[i];
        int n = b < 0x80 ? 0 : (b & 0xE0) == 0xC0 ? 1 : (b & 0xF0) == 0xE0 ? 2
                : (b & 0xF8) == 0xF0 ? 3 : -1;
        if (n < 0 || (n == 1 && b < 0xC2) || (n == 3 && b > 0xF4))
            return i;
        for (int k = 1; k <= n; k++)
            if ((p[i + k] & 0xC0) != 0x80)
                return i;
        if ((n == 2 && b == 0xE0 && p[i + 1] < 0xA0) || (n == 2 && b == 0xED && p[i + 1] > 0x9F) ||
            (n == 3 && b == 0xF0 && p[i + 1] < 0x90) || (n == 3 && b == 0xF4 && p[i + 1] > 0x8F))
            return i;
        i += n + 1;
    }
    return -1;
}

int rl_config_override(rl_config *c, const char *kv)
{
    /* the tree goes to the workers as JSON, which holds UTF-8 only */
    long bad = s_utf8_bad(kv);
    if (bad >= 0)
        return rl_error_set(RL_ECONFIG, "override %.*s...: not valid UTF-8 at byte %ld", (int)bad,
                            kv, bad);
    const char *eq = strchr(kv, '=');
    if (!eq || eq == kv)
        return rl_error_set(RL_ECONFIG, "override '%s': expected key=value", kv);
    size_t klen = (size_t)(eq - kv);
    char key[512];
    if (klen >= sizeof key)
        return rl_error_set(RL_ECONFIG, "override '%s': key too long", kv);
    memcpy(key, kv, klen);
    key[klen] = '\0';
    const char *val = eq + 1;

    s_found f;
    s_lookup(c->root, key, &f);
    if (f.bad_path)
        return rl_error_set(RL_ECONFIG, "override %s: malformed key '%s'", kv, key);
    if (!f.node) {
        /* New keys are allowed only below an open map. */
        if (f.parent->kind == RL_CONFIG_MAP && f.parent->open && f.missing[0] != '[') {
            int rc = rl_config_set_yaml(c, key, val);
            if (rc)
                return rl_error_wrap(rc, "override %s", kv);
            rl_config_node *added;
            char where[600];
            snprintf(where, sizeof where, "override %s", kv);
            return s_find(c, key, &added) ? rl_error_code() : s_relocate(added, where);
        }
        char hint[600];
        s_suggestion(c->root, key, hint, sizeof hint);
        return rl_error_set(RL_ECONFIG, "override %s: unknown key '%s'%s", kv, key, hint);
    }
    rl_config_type want = rl_config_node_type(f.node);
    rl_config_node *value;
    if (want == RL_CONFIG_T_STRING) {
        /* A string takes the text as written (so "a: b" is not a map). */
        value = s_node_new(RL_CONFIG_SCALAR, f.node->path, "<override>", 1, 1);
        if (!value || !(value->text = s_unquote(val))) {
            s_node_free(value);
            return rl_error_set(RL_ENOMEM, "config: out of memory");
        }
        value->quoted = 1;
    } else {
        rl_config *v = rl_config_parse_string(val, strlen(val), "<override>");
        if (!v)
            return rl_error_wrap(RL_ECONFIG, "override %s", kv);
        if (!(value = s_take_value(v, val, "<override>")))
            return RL_ENOMEM;
        if (s_override_fits(f.node, value, kv, key)) {
            s_node_free(value);
            return RL_ECONFIG;
        }
    }
    char where[600];
    snprintf(where, sizeof where, "override %s", kv);
    int rc = s_relocate(value, where);
    if (rc) {
        s_node_free(value);
        return rc;
    }
    return s_put(c, key, value);
}

int rl_config_override_all(rl_config *c, int n, const char *const *kvs)
{
    for (int i = 0; i < n; i++) {
        int rc = rl_config_override(c, kvs[i]);
        if (rc)
            return rc;
    }
    return RL_OK;
}

/* ---- validation ------------------------------------------------------------------------------ */

static int s_compatible(const rl_config_node *job, rl_config_type want)
{
    int64_t i;
    double d;
    if (job->kind == RL_CONFIG_SCALAR && !job->quoted && s_is_null_text(job->text))
        return 1; /* an explicit null leaves the default's meaning to the reader */
    /* a quoted scalar ("30", '0.5', !!str true) is a string, however it reads */
    int plain = job->kind == RL_CONFIG_SCALAR && !job->quoted;
    switch (want) {
    case RL_CONFIG_T_NULL: return 1;
    case RL_CONFIG_T_BOOL: return plain && s_parse_bool(job->text) >= 0;
    case RL_CONFIG_T_INT: return plain && s_parse_int(job->text, &i) == 0;
    case RL_CONFIG_T_NUMBER: return plain && s_parse_double(job->text, &d) == 0;
    case RL_CONFIG_T_STRING: return job->kind == RL_CONFIG_SCALAR;
    case RL_CONFIG_T_LIST: return job->kind == RL_CONFIG_LIST;
    case RL_CONFIG_T_MAP: return job->kind == RL_CONFIG_MAP;
    }
    return 0;
}

static int s_validate(const rl_config_node *job, const rl_config_node *def,
                      const rl_config_node *known_root)
{
    rl_config_type want = rl_config_node_type(def);
    if (!s_compatible(job, want))
        return s_type_error(job, want);
    if (job->kind == RL_CONFIG_MAP && def->kind == RL_CONFIG_MAP && !def->open) {
        for (size_t i = 0; i < job->n; i++) {
            long j = s_map_find(def, job->keys[i]);
            if (j < 0) {
                char hint[600];
                const char *p = job->items[i]->path;
                s_suggestion(known_root, p, hint, sizeof hint);
                return rl_error_set(RL_ECONFIG, "%s:%d:%d: unknown key '%s'%s", job->file,
                                    job->key_line[i], job->key_col[i], p, hint);
            }
            int rc = s_validate(job->items[i], def->items[j], known_root);
            if (rc)
                return rc;
        }
    } else if (job->kind == RL_CONFIG_LIST && def->kind == RL_CONFIG_LIST && def->n > 0) {
        /* The defaults' first item is the template for every item. */
        for (size_t i = 0; i < job->n; i++) {
            int rc = s_validate(job->items[i], def->items[0], known_root);
            if (rc)
                return rc;
        }
    }
    return RL_OK;
}

int rl_config_validate(const rl_config *job, const rl_config *defaults)
{
    return s_validate(job->root, defaults->root, defaults->root);
}

rl_config *rl_config_load_job_tree(const rl_config *defaults, const char *job_path,
                                   int n_overrides, const char *const *overrides)
{
    rl_config *merged = NULL;
    if (job_path) {
        rl_config *job = rl_config_parse_file(job_path);
        if (job && !rl_config_validate(job, defaults))
            merged = rl_config_merge(defaults, job);
        rl_config_free(job);
    } else {
        merged = rl_config_subtree(defaults, "");
    }
    if (merged && rl_config_override_all(merged, n_overrides, overrides)) {
        rl_config_free(merged);
        return NULL;
    }
    return merged;
}

rl_config *rl_config_load_job(const char *defaults_yaml, const char *job_path,
                              int n_overrides, const char *const *overrides)
{
    const char *dtext = defaults_yaml ? defaults_yaml : "";
    rl_config *defaults = rl_config_parse_string(dtext, strlen(dtext), "<defaults>");
    if (!defaults)
        return NULL;
    rl_config *job = rl_config_load_job_tree(defaults, job_path, n_overrides, overrides);
    rl_config_free(defaults);
    return job;
}

/* ---- locations across processes ------------------------------------------------------------- */

static void s_loc_walk(const rl_config_node *n, json_t *files, json_t *nodes)
{
    size_t fi = json_array_size(files);
    for (size_t i = 0; i < json_array_size(files); i++)
        if (strcmp(json_string_value(json_array_get(files, i)), n->file) == 0) {
            fi = i;
            break;
        }
    if (fi == json_array_size(files))
        json_array_append_new(files, json_string(n->file));
    json_object_set_new(nodes, n->path, json_pack("[I, i, i]", (json_int_t)fi, n->line, n->col));
    for (size_t i = 0; i < n->n; i++)
        s_loc_walk(n->items[i], files, nodes);
}

char *rl_config_locations_json(const rl_config *c)
{
    json_t *files = json_array(), *nodes = json_object();
    json_t *root = json_pack("{s:o, s:o}", "files", files, "nodes", nodes);
    if (!root)
        return rl_error_set(RL_ENOMEM, "config: out of memory"), NULL;
    s_loc_walk(c->root, files, nodes);
    char *text = json_dumps(root, JSON_COMPACT);
    json_decref(root);
    if (!text)
        return rl_error_set(RL_ENOMEM, "config: out of memory"), NULL;
    return text;
}

static void s_loc_apply(rl_config_node *n, const json_t *files, const json_t *nodes)
{
    const json_t *e = json_object_get(nodes, n->path);
    json_int_t fi = json_integer_value(json_array_get(e, 0));
    const char *file = json_string_value(json_array_get(files, (size_t)fi));
    if (json_array_size(e) == 3 && file && json_is_integer(json_array_get(e, 1)) &&
        json_is_integer(json_array_get(e, 2))) {
        char *f = s_strdup(file);
        if (f) {
            free(n->file);
            n->file = f;
            n->line = (int)json_integer_value(json_array_get(e, 1));
            n->col = (int)json_integer_value(json_array_get(e, 2));
        }
    }
    for (size_t i = 0; i < n->n; i++)
        s_loc_apply(n->items[i], files, nodes);
}

int rl_config_apply_locations(rl_config *c, const char *json, size_t len)
{
    json_error_t err;
    json_t *root = json_loadb(json, len, 0, &err);
    if (!root)
        return rl_error_set(RL_EINVAL, "config locations: %s (offset %d)", err.text, err.position);
    const json_t *files = json_object_get(root, "files"), *nodes = json_object_get(root, "nodes");
    if (!json_is_array(files) || !json_is_object(nodes)) {
        json_decref(root);
        return rl_error_set(RL_EINVAL, "config locations: expected {files: [...], nodes: {...}}");
    }
    s_loc_apply(c->root, files, nodes);
    json_decref(root);
    return RL_OK;
}

int rl_config_error_at(const rl_config *c, const char *path, int code, const char *fmt, ...)
{
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    s_found f;
    s_lookup(c->root, path, &f);
    if (f.node)
        return rl_config_node_error(f.node, code, "%s", msg);
    return rl_error_set(code, "%s: %s", path, msg);
}

/* Who wrote a node: 2 an override, 1 the job file, 0 the defaults or the
 * program (rl_config_set_yaml). */
static int s_user_rank(const rl_config_node *n)
{
    if (strcmp(n->file, "<defaults>") == 0 || strcmp(n->file, "<set>") == 0)
        return 0;
    return n->line == 0 && strncmp(n->file, "override ", 9) == 0 ? 2 : 1;
}

int rl_config_user_set(const rl_config *c, const char *path)
{
    s_found f;
    s_lookup(c->root, path, &f);
    return f.node && s_user_rank(f.node) > 0;
}

int rl_config_error_among(const rl_config *c, const char *const *paths, int code, const char *fmt,
                          ...)
{
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    const rl_config_node *best = NULL;
    int best_rank = -1;
    for (size_t i = 0; paths && paths[i]; i++) {
        s_found f;
        s_lookup(c->root, paths[i], &f);
        if (f.node && s_user_rank(f.node) > best_rank) {
            best = f.node;
            best_rank = s_user_rank(f.node);
        }
    }
    if (best)
        return rl_config_node_error(best, code, "%s", msg);
    return rl_error_set(code, "%s: %s", paths && paths[0] ? paths[0] : "?", msg);
}
