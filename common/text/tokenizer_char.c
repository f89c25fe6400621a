/* tokenizer_char.c — character-level tokenizer for built-in tasks: special
 * tokens (matched longest first) then one token per charset code point;
 * saved/loaded as a small JSON document. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rlrt/error.h"
#include "common/core/util.h"
#include "common/text/tokenizer_internal.h"

/* this kind's ops (defined at the end) */
static const rl_tok_ops s_ops;

typedef struct s_char_impl {
    int32_t ascii[128]; /* id of each ASCII character, -1 if absent */
    rl_tok_matcher specials;
    char *charset;      /* as given, for save */
    int n_specials;     /* specials are ids 0..n_specials-1 */
} s_char_impl;

static void s_free_impl(void *impl)
{
    s_char_impl *c = impl;
    rl_tok_matcher_free(&c->specials);
    free(c->charset);
    free(c);
}

static void s_describe_cp(uint32_t cp, char *buf, size_t cap)
{
    if (cp & RL_TOK_BAD_CP) {
        snprintf(buf, cap, "invalid UTF-8 byte 0x%02X", (unsigned)(cp & 0xFF));
    } else if (cp < 0x20 || cp == 0x7F) {
        snprintf(buf, cap, "character U+%04X", (unsigned)cp);
    } else {
        char u[5] = {0};
        rl_tok_utf8_put(cp, u);
        snprintf(buf, cap, "character '%s' (U+%04X)", u, (unsigned)cp);
    }
}

static int s_special_by_name(rl_tokenizer *t, const char *name, const char *field)
{
    if (!name)
        return -1;
    int32_t id = rl_tokenizer_token_to_id(t, name);
    if (id < 0)
        return rl_error_set(RL_ENOTFOUND, "char tokenizer: %s token '%s' is neither a special "
                            "token nor a charset character", field, name);
    return id;
}

rl_tokenizer *rl_tokenizer_new_char(const rl_char_tokenizer_spec *spec)
{
    if (!spec || !spec->charset || spec->n_specials < 0 || (spec->n_specials && !spec->specials)) {
        rl_error_set(RL_EINVAL, "rl_tokenizer_new_char: spec, spec->charset or spec->specials "
                     "is NULL (or n_specials < 0)");
        return NULL;
    }
    const unsigned char *cs = (const unsigned char *)spec->charset;
    size_t cslen = strlen(spec->charset);
    int64_t nchars = 0;
    for (size_t i = 0; i < cslen;) {
        uint32_t cp;
        int l = rl_tok_utf8_next(cs, cslen, i, &cp);
        if (cp & RL_TOK_BAD_CP) {
            rl_error_set(RL_EINVAL, "char tokenizer: charset has an invalid UTF-8 byte 0x%02X at "
                         "offset %zu", cs[i], i);
            return NULL;
        }
        i += (size_t)l;
        nchars++;
    }
    for (int k = 0; k < spec->n_specials; k++) {
        if (!spec->specials[k] || !spec->specials[k][0]) {
            rl_error_set(RL_EINVAL, "char tokenizer: specials[%d] is NULL or empty", k);
            return NULL;
        }
    }
    rl_tokenizer *t = rl_tok_alloc(RL_TOKENIZER_CHAR, &s_ops, spec->n_specials + nchars);
    if (!t)
        return NULL;
    s_char_impl *c = calloc(1, sizeof *c);
    if (!c || !(c->charset = strdup(spec->charset))) {
        free(c);
        rl_tokenizer_free(t);
        rl_error_set(RL_ENOMEM, "char tokenizer: out of memory");
        return NULL;
    }
    t->impl = c;
    c->n_specials = spec->n_specials;
    for (int i = 0; i < 128; i++)
        c->ascii[i] = -1;
    char what[64];
    for (int k = 0; k < spec->n_specials; k++) {
        snprintf(what, sizeof what, "char tokenizer: specials[%d]", k);
        if (rl_tok_set_token(t, k, spec->specials[k], strlen(spec->specials[k]), what))
            goto fail;
        t->is_special[k] = 1;
    }
    int32_t id = spec->n_specials;
    for (size_t i = 0; i < cslen; id++) {
        uint32_t cp;
        int l = rl_tok_utf8_next(cs, cslen, i, &cp);
        int32_t prev = rl_tok_strmap_get(&t->token_map, spec->charset + i, (size_t)l);
        if (prev >= 0) {
            char d[64];
            s_describe_cp(cp, d, sizeof d);
            rl_error_set(RL_EEXIST, "char tokenizer: charset %s at byte offset %zu is already "
                         "token %d ('%s')", d, i, (int)prev, t->tokens[prev]);
            goto fail;
        }
        if (rl_tok_set_token(t, id, spec->charset + i, (size_t)l, "char tokenizer: charset"))
            goto fail;
        if (cp < 128)
            c->ascii[cp] = id;
        i += (size_t)l;
    }
    {
        int32_t *ids = malloc(((size_t)spec->n_specials + 1) * sizeof *ids);
        if (!ids) {
            rl_error_set(RL_ENOMEM, "char tokenizer: out of memory");
            goto fail;
        }
        for (int k = 0; k < spec->n_specials; k++)
            ids[k] = k;
        int rc = rl_tok_matcher_build(&c->specials, (const char *const *)t->tokens, ids,
                                      spec->n_specials);
        free(ids);
        if (rc)
            goto fail;
    }
    const char *names[4] = {spec->pad, spec->bos, spec->eos, spec->unk};
    const char *fields[4] = {"pad", "bos", "eos", "unk"};
    for (int k = 0; k < 4; k++) {
        int r = s_special_by_name(t, names[k], fields[k]);
        if (r < -1)
            goto fail;
        t->special[k] = r;
    }
    return t;
fail:
    rl_tokenizer_free(t);
    return NULL;
}

static int s_encode(const rl_tokenizer *t, const char *text, size_t len, rl_tok_ivec *out)
{
    const s_char_impl *c = t->impl;
    const unsigned char *u = (const unsigned char *)text;
    for (size_t i = 0; i < len;) {
        int32_t id = -1;
        size_t l = rl_tok_matcher_at(&c->specials, text, len, i, &id);
        if (l == 0) {
            uint32_t cp;
            l = (size_t)rl_tok_utf8_next(u, len, i, &cp);
            id = cp < 128 ? c->ascii[cp]
                          : (cp & RL_TOK_BAD_CP) ? -1 : rl_tok_strmap_get(&t->token_map, text + i, l);
            if (id < 0) {
                id = t->special[RL_TOK_UNK];
                if (id < 0) {
                    char d[64];
                    s_describe_cp(cp, d, sizeof d);
                    return rl_error_set(RL_ENOTFOUND, "char tokenizer: %s at byte offset %zu is "
                                        "not in the vocabulary", d, i);
                }
            }
        }
        int rc = rl_tok_ivec_push(out, id);
        if (rc)
            return rc;
        i += l;
    }
    return RL_OK;
}

static int s_decode(const rl_tokenizer *t, const int32_t *ids, int64_t n, int flags,
                       char **text, size_t *len)
{
    size_t total = 0;
    for (int64_t i = 0; i < n; i++)
        if (!((flags & RL_TOKENIZER_SKIP_SPECIAL) && t->is_special[ids[i]]))
            total += t->token_len[ids[i]];
    char *o = malloc(total + 1);
    if (!o)
        return rl_error_set(RL_ENOMEM, "char tokenizer: decode of %zu bytes: out of memory", total);
    size_t p = 0;
    for (int64_t i = 0; i < n; i++) {
        if ((flags & RL_TOKENIZER_SKIP_SPECIAL) && t->is_special[ids[i]])
            continue;
        memcpy(o + p, t->tokens[ids[i]], t->token_len[ids[i]]);
        p += t->token_len[ids[i]];
    }
    o[p] = 0;
    *text = o;
    *len = p;
    return RL_OK;
}

/* The JSON document of a char tokenizer (rl_tokenizer_save's), malloc'd. */
static char *s_to_json(const rl_tokenizer *t)
{
    const s_char_impl *c = t->impl;
    json_t *root = json_object();
    json_t *sp = json_array();
    if (!root || !sp) {
        json_decref(root);
        json_decref(sp);
        rl_error_set(RL_ENOMEM, "char tokenizer: save: out of memory");
        return NULL;
    }
    json_object_set_new(root, "type", json_string("rlrt-char"));
    json_object_set_new(root, "version", json_integer(1));
    json_object_set_new(root, "charset", json_string(c->charset));
    for (int k = 0; k < c->n_specials; k++)
        json_array_append_new(sp, json_string(t->tokens[k]));
    json_object_set_new(root, "specials", sp);
    const char *fields[4] = {"pad", "bos", "eos", "unk"};
    for (int k = 0; k < 4; k++)
        json_object_set_new(root, fields[k],
                            t->special[k] >= 0 ? json_string(t->tokens[t->special[k]]) : json_null());
    char *text = json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    json_decref(root);
    if (!text)
        rl_error_set(RL_ENOMEM, "char tokenizer: save: out of memory");
    return text;
}

static int s_save(const rl_tokenizer *t, const char *path)
{
    char *text = s_to_json(t);
    if (!text)
        return rl_error_code();
    int rc = rl_file_write_atomic(path, text, strlen(text));
    free(text);
    return rc ? rl_error_wrap(rc, "char tokenizer: cannot write '%s'", path) : RL_OK;
}

char *rl_tokenizer_to_json(const rl_tokenizer *t)
{
    if (!t || t->kind != RL_TOKENIZER_CHAR) {
        rl_error_set(RL_EUNSUPPORTED, "rl_tokenizer_to_json: only char tokenizers are written "
                     "(keep the tokenizer.json of a BPE tokenizer)");
        return NULL;
    }
    return s_to_json(t);
}

rl_tokenizer *rl_tok_char_from_json(void *json_root, const char *what)
{
    json_t *root = json_root;
    json_t *v = json_object_get(root, "version");
    if (!json_is_integer(v) || json_integer_value(v) != 1) {
        rl_error_set(RL_EPROTO, "%s: 'version' must be 1", what);
        return NULL;
    }
    json_t *cs = json_object_get(root, "charset");
    json_t *sp = json_object_get(root, "specials");
    if (!json_is_string(cs) || !json_is_array(sp)) {
        rl_error_set(RL_EPROTO, "%s: 'charset' must be a string and 'specials' an array", what);
        return NULL;
    }
    size_t n = json_array_size(sp);
    const char **specials = calloc(n + 1, sizeof *specials);
    if (!specials) {
        rl_error_set(RL_ENOMEM, "%s: out of memory", what);
        return NULL;
    }
    for (size_t k = 0; k < n; k++) {
        specials[k] = json_string_value(json_array_get(sp, k));
        if (!specials[k]) {
            free(specials);
            rl_error_set(RL_EPROTO, "%s: specials[%zu] is not a string", what, k);
            return NULL;
        }
    }
    const char *names[4];
    const char *fields[4] = {"pad", "bos", "eos", "unk"};
    for (int k = 0; k < 4; k++) {
        json_t *f = json_object_get(root, fields[k]);
        if (f && !json_is_null(f) && !json_is_string(f)) {
            free(specials);
            rl_error_set(RL_EPROTO, "%s: '%s' must be a string or null", what, fields[k]);
            return NULL;
        }
        names[k] = json_string_value(f);
    }
    rl_char_tokenizer_spec spec = {json_string_value(cs), specials, (int)n,
                                   names[0], names[1], names[2], names[3]};
    rl_tokenizer *t = rl_tokenizer_new_char(&spec);
    free(specials);
    if (!t)
        rl_error_wrap(rl_error_code(), "%s", what);
    return t;
}

static const rl_tok_ops s_ops = {s_encode, s_decode, s_free_impl, s_save};
