/* tokenizer.c — the rl_tokenizer API (dispatch to the char / BPE kinds) and
 * helpers both kinds share: UTF-8, NFC (libutf8proc), hash map, special
 * token matcher. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "rlrt/error.h"
#include "common/core/util.h"
#include "common/text/tokenizer_internal.h"

/* ======================================================================
 * UTF-8
 * ====================================================================== */

int rl_tok_utf8_next(const unsigned char *s, size_t n, size_t i, uint32_t *cp)
{
    unsigned c = s[i];
    if (c < 0x80) {
        *cp = c;
        return 1;
    }
    size_t rem = n - i;
    if (c >= 0xC2 && c < 0xE0) {
        if (rem >= 2 && (s[i + 1] & 0xC0) == 0x80) {
            *cp = ((c & 0x1Fu) << 6) | (s[i + 1] & 0x3Fu);
            return 2;
        }
    } else if (c >= 0xE0 && c < 0xF0) {
        if (rem >= 3 && (s[i + 1] & 0xC0) == 0x80 && (s[i + 2] & 0xC0) == 0x80 &&
            !(c == 0xE0 && s[i + 1] < 0xA0) && !(c == 0xED && s[i + 1] >= 0xA0)) {
            *cp = ((c & 0x0Fu) << 12) | ((s[i + 1] & 0x3Fu) << 6) | (s[i + 2] & 0x3Fu);
            return 3;
        }
    } else if (c >= 0xF0 && c < 0xF5) {
        if (rem >= 4 && (s[i + 1] & 0xC0) == 0x80 && (s[i + 2] & 0xC0) == 0x80 &&
            (s[i + 3] & 0xC0) == 0x80 && !(c == 0xF0 && s[i + 1] < 0x90) &&
            !(c == 0xF4 && s[i + 1] >= 0x90)) {
            *cp = ((c & 0x07u) << 18) | ((s[i + 1] & 0x3Fu) << 12) |
                  ((s[i + 2] & 0x3Fu) << 6) | (s[i + 3] & 0x3Fu);
            return 4;
        }
    }
    *cp = RL_TOK_BAD_CP | c;
    return 1;
}

int rl_tok_utf8_put(uint32_t cp, char *out)
{
    unsigned char *o = (unsigned char *)out;
    if (cp & RL_TOK_BAD_CP) {
        o[0] = (unsigned char)(cp & 0xFF);
        return 1;
    }
    if (cp < 0x80) {
        o[0] = (unsigned char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (unsigned char)(0xC0 | (cp >> 6));
        o[1] = (unsigned char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (unsigned char)(0xE0 | (cp >> 12));
        o[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (unsigned char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (unsigned char)(0xF0 | (cp >> 18));
    o[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
    o[3] = (unsigned char)(0x80 | (cp & 0x3F));
    return 4;
}

/* ======================================================================
 * NFC: utf8proc's canonical decompositions, combining classes and
 * composition; the canonical ordering is done here (see s_order_marks).
 * ====================================================================== */

/* Code points as int32 for utf8proc; a bad byte b is -1 - b. */
static int s_ccc(int32_t c)
{
    return c < 0x300 ? 0 : utf8proc_get_property(c)->combining_class;
}

/* Stable sort of the non-starters d[a..k) by combining class. utf8proc's
 * own ordering (inside utf8proc_decompose) swaps neighbours, quadratic in
 * the run, and a hostile text of many combining marks made that seconds
 * (80 KB took 2 s): long runs are sorted by counting (classes < 256). */
static int s_order_marks(int32_t *d, size_t a, size_t k)
{
    if (k - a <= 32) {
        for (size_t q = a + 1; q < k; q++) {
            int32_t x = d[q];
            int cq = s_ccc(x);
            size_t j = q;
            for (; j > a && s_ccc(d[j - 1]) > cq; j--)
                d[j] = d[j - 1];
            d[j] = x;
        }
        return RL_OK;
    }
    size_t cnt[257] = {0};
    for (size_t q = a; q < k; q++)
        cnt[s_ccc(d[q]) + 1]++;
    for (int c = 0; c < 256; c++)
        cnt[c + 1] += cnt[c];
    int32_t *tmp = malloc((k - a) * sizeof *tmp);
    if (!tmp)
        return rl_error_set(RL_ENOMEM, "tokenizer: NFC: out of memory");
    for (size_t q = a; q < k; q++)
        tmp[cnt[s_ccc(d[q])]++] = d[q];
    memcpy(d + a, tmp, (k - a) * sizeof *d);
    free(tmp);
    return RL_OK;
}

/* NFC of u[0..n), a stretch with no ASCII after its first byte, appended
 * to o at *on; d has room for 4 n code points (canonical decompositions
 * are at most 4 long) and o for 4 bytes each. */
static int s_nfc_chunk(const unsigned char *u, size_t n, int32_t *d, char *o, size_t *on)
{
    size_t nd = 0;
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        i += (size_t)rl_tok_utf8_next(u, n, i, &cp);
        if (cp & RL_TOK_BAD_CP) {
            d[nd++] = -1 - (int32_t)(cp & 0xFF);
            continue;
        }
        int bound = 0;
        utf8proc_ssize_t k = utf8proc_decompose_char((utf8proc_int32_t)cp, d + nd, 4,
                                                     UTF8PROC_DECOMPOSE, &bound);
        if (k < 0 || k > 4)
            return rl_error_set(RL_EINVAL, "tokenizer: NFC: utf8proc cannot decompose U+%04X: "
                                "%s", (unsigned)cp, k < 0 ? utf8proc_errmsg(k) : "too long");
        nd += (size_t)k;
    }
    for (size_t k = 0; k < nd; k++) {
        size_t a = k;
        while (k < nd && s_ccc(d[k]) != 0)
            k++;
        int rc = k > a ? s_order_marks(d, a, k) : RL_OK;
        if (rc)
            return rc;
    }
    /* Composition of each run between bad bytes and U+11A7, then UTF-8.
     * U+11A7 composes with nothing, but utf8proc 2.8 joins it to a Hangul
     * LV syllable and so drops it (fixed upstream in 2025, utf8proc#317). */
    for (size_t k = 0; k < nd;) {
        if (d[k] < 0 || d[k] == 0x11A7) {
            uint32_t c = d[k] < 0 ? RL_TOK_BAD_CP | (uint32_t)(-1 - d[k]) : 0x11A7;
            *on += (size_t)rl_tok_utf8_put(c, o + *on);
            k++;
            continue;
        }
        size_t a = k;
        while (k < nd && d[k] >= 0 && d[k] != 0x11A7)
            k++;
        utf8proc_ssize_t m = utf8proc_normalize_utf32(d + a, (utf8proc_ssize_t)(k - a),
                                                      UTF8PROC_COMPOSE | UTF8PROC_STABLE);
        for (utf8proc_ssize_t q = 0; q < m; q++)
            *on += (size_t)rl_tok_utf8_put((uint32_t)d[a + (size_t)q], o + *on);
    }
    return RL_OK;
}

int rl_tok_nfc(const char *s, size_t n, char **out, size_t *out_n)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0;
    /* Bytes below 0xCC only encode code points below U+0300 (or are bad
     * bytes, which pass through): all starters that NFC leaves alone. */
    while (i < n && u[i] < 0xCC)
        i++;
    *out = NULL;
    *out_n = 0;
    if (i == n)
        return RL_OK;
    size_t cap = 4 * n + 4; /* code points after decomposition, at most */
    int32_t *d = malloc(cap * sizeof *d);
    char *o = malloc(4 * cap + 1);
    if (!d || !o) {
        free(d);
        free(o);
        return rl_error_set(RL_ENOMEM, "tokenizer: NFC of %zu bytes: out of memory", n);
    }
    /* An ASCII character is a starter that composes with nothing before it:
     * NFC works on each stretch of non-ASCII bytes with the ASCII character
     * before it (which may take its combining marks); the rest is copied. */
    size_t on = 0;
    int rc = RL_OK;
    for (i = 0; i < n && rc == RL_OK;) {
        size_t k = i;
        while (k < n && u[k] < 0x80)
            k++;
        size_t a = k > i && k < n ? k - 1 : k;
        memcpy(o + on, u + i, a - i);
        on += a - i;
        while (k < n && u[k] >= 0x80)
            k++;
        if (k > a)
            rc = s_nfc_chunk(u + a, k - a, d, o, &on);
        i = k;
    }
    free(d);
    if (rc) {
        free(o);
        return rc;
    }
    o[on] = 0;
    *out = o;
    *out_n = on;
    return RL_OK;
}

/* ======================================================================
 * string → int32 hash map (open addressing, linear probing)
 * ====================================================================== */

uint64_t rl_tok_hash_bytes(const void *p, size_t n)
{
    const unsigned char *b = p;
    uint64_t h = 0xcbf29ce484222325ull ^ (uint64_t)n;
    for (size_t i = 0; i < n; i++) {
        h ^= b[i];
        h *= 0x100000001b3ull;
    }
    h ^= h >> 31;
    h *= 0x9e3779b97f4a7c15ull;
    return h ^ (h >> 29);
}

int rl_tok_strmap_init(rl_tok_strmap *m, size_t expected)
{
    size_t cap = 16;
    while (cap < expected * 2 + 2)
        cap <<= 1;
    m->keys = calloc(cap, sizeof *m->keys);
    m->lens = calloc(cap, sizeof *m->lens);
    m->vals = calloc(cap, sizeof *m->vals);
    m->cap = cap;
    m->count = 0;
    if (!m->keys || !m->lens || !m->vals) {
        rl_tok_strmap_free(m);
        return rl_error_set(RL_ENOMEM, "tokenizer: hash map of %zu entries: out of memory", cap);
    }
    return RL_OK;
}

void rl_tok_strmap_free(rl_tok_strmap *m)
{
    free(m->keys);
    free(m->lens);
    free(m->vals);
    memset(m, 0, sizeof *m);
}

static int s_strmap_grow(rl_tok_strmap *m)
{
    rl_tok_strmap g;
    int rc = rl_tok_strmap_init(&g, m->cap);
    if (rc)
        return rc;
    for (size_t i = 0; i < m->cap; i++)
        if (m->keys[i])
            rl_tok_strmap_put(&g, m->keys[i], m->lens[i], m->vals[i], NULL);
    rl_tok_strmap_free(m);
    *m = g;
    return RL_OK;
}

int rl_tok_strmap_put(rl_tok_strmap *m, const char *key, size_t len, int32_t val, int32_t *old)
{
    if ((m->count + 1) * 2 > m->cap) {
        int rc = s_strmap_grow(m);
        if (rc)
            return rc;
    }
    size_t mask = m->cap - 1, i = rl_tok_hash_bytes(key, len) & mask;
    while (m->keys[i]) {
        if (m->lens[i] == len && memcmp(m->keys[i], key, len) == 0) {
            if (old)
                *old = m->vals[i];
            m->vals[i] = val;
            return RL_OK;
        }
        i = (i + 1) & mask;
    }
    m->keys[i] = key;
    m->lens[i] = (uint32_t)len;
    m->vals[i] = val;
    m->count++;
    if (old)
        *old = -1;
    return RL_OK;
}

int32_t rl_tok_strmap_get(const rl_tok_strmap *m, const char *key, size_t len)
{
    if (!m->cap)
        return -1;
    size_t mask = m->cap - 1, i = rl_tok_hash_bytes(key, len) & mask;
    while (m->keys[i]) {
        if (m->lens[i] == len && memcmp(m->keys[i], key, len) == 0)
            return m->vals[i];
        i = (i + 1) & mask;
    }
    return -1;
}

/* ======================================================================
 * Special-token matcher
 * ====================================================================== */

int rl_tok_matcher_build(rl_tok_matcher *m, const char *const *str, const int32_t *ids, int count)
{
    memset(m, 0, sizeof *m);
    m->count = count;
    m->cand_start = calloc(257, sizeof *m->cand_start);
    m->cand = malloc(((size_t)count + 1) * sizeof *m->cand);
    m->str = malloc(((size_t)count + 1) * sizeof *m->str);
    m->len = malloc(((size_t)count + 1) * sizeof *m->len);
    m->id = malloc(((size_t)count + 1) * sizeof *m->id);
    if (!m->cand_start || !m->cand || !m->str || !m->len || !m->id) {
        rl_tok_matcher_free(m);
        return rl_error_set(RL_ENOMEM, "tokenizer: special-token matcher: out of memory");
    }
    for (int i = 0; i < count; i++) {
        m->str[i] = str[i];
        m->len[i] = (uint32_t)strlen(str[i]);
        m->id[i] = ids[i];
        if (m->len[i] > 0)
            m->cand_start[(unsigned char)str[i][0] + 1]++;
    }
    for (int b = 0; b < 256; b++)
        m->cand_start[b + 1] += m->cand_start[b];
    int32_t fill[256];
    for (int b = 0; b < 256; b++)
        fill[b] = m->cand_start[b];
    for (int i = 0; i < count; i++) {
        if (m->len[i] == 0)
            continue;
        int b = (unsigned char)str[i][0];
        /* insertion keeps each bucket sorted longest first */
        int32_t j = fill[b]++;
        while (j > m->cand_start[b] && m->len[m->cand[j - 1]] < m->len[i]) {
            m->cand[j] = m->cand[j - 1];
            j--;
        }
        m->cand[j] = i;
    }
    return RL_OK;
}

void rl_tok_matcher_free(rl_tok_matcher *m)
{
    free(m->cand_start);
    free(m->cand);
    free(m->str);
    free(m->len);
    free(m->id);
    memset(m, 0, sizeof *m);
}

size_t rl_tok_matcher_at(const rl_tok_matcher *m, const char *text, size_t len, size_t pos,
                         int32_t *id)
{
    int b = (unsigned char)text[pos];
    for (int32_t k = m->cand_start[b]; k < m->cand_start[b + 1]; k++) {
        int c = m->cand[k];
        if (m->len[c] <= len - pos && memcmp(text + pos, m->str[c], m->len[c]) == 0) {
            *id = m->id[c];
            return m->len[c];
        }
    }
    return 0;
}

bool rl_tok_matcher_find(const rl_tok_matcher *m, const char *text, size_t len, size_t pos,
                         size_t *ms, size_t *me, int32_t *id)
{
    if (!m->count)
        return false;
    for (size_t i = pos; i < len; i++) {
        int b = (unsigned char)text[i];
        if (m->cand_start[b] == m->cand_start[b + 1])
            continue;
        size_t l = rl_tok_matcher_at(m, text, len, i, id);
        if (l) {
            *ms = i;
            *me = i + l;
            return true;
        }
    }
    return false;
}

/* ======================================================================
 * id vector
 * ====================================================================== */

int rl_tok_ivec_append(rl_tok_ivec *v, const int32_t *x, int64_t n)
{
    if (v->n + n > v->cap) {
        int64_t cap = v->cap ? v->cap : 64;
        while (cap < v->n + n)
            cap *= 2;
        int32_t *p = realloc(v->v, (size_t)cap * sizeof *p);
        if (!p)
            return rl_error_set(RL_ENOMEM, "tokenizer: %lld ids: out of memory", (long long)cap);
        v->v = p;
        v->cap = cap;
    }
    memcpy(v->v + v->n, x, (size_t)n * sizeof *x);
    v->n += n;
    return RL_OK;
}

int rl_tok_ivec_push(rl_tok_ivec *v, int32_t x)
{
    if (v->n < v->cap) {
        v->v[v->n++] = x;
        return RL_OK;
    }
    return rl_tok_ivec_append(v, &x, 1);
}

/* ======================================================================
 * rl_tokenizer
 * ====================================================================== */

rl_tokenizer *rl_tok_alloc(rl_tokenizer_kind kind, const rl_tok_ops *ops, int64_t vocab_size)
{
    rl_tokenizer *t = rl_zalloc(sizeof *t, "tokenizer");
    if (!t)
        return NULL;
    t->kind = kind;
    t->ops = ops;
    t->vocab_size = vocab_size;
    for (int i = 0; i < 4; i++)
        t->special[i] = -1;
    t->tokens = calloc((size_t)vocab_size + 1, sizeof *t->tokens);
    t->token_len = calloc((size_t)vocab_size + 1, sizeof *t->token_len);
    t->is_special = calloc((size_t)vocab_size + 1, 1);
    if (!t->tokens || !t->token_len || !t->is_special ||
        rl_tok_strmap_init(&t->token_map, (size_t)vocab_size)) {
        rl_error_set(RL_ENOMEM, "tokenizer: vocabulary of %lld tokens: out of memory",
                     (long long)vocab_size);
        rl_tokenizer_free(t);
        return NULL;
    }
    return t;
}

int rl_tok_set_token(rl_tokenizer *t, int32_t id, const char *s, size_t n, const char *what)
{
    if (id < 0 || id >= t->vocab_size)
        return rl_error_set(RL_ERANGE, "%s: id %d outside [0, %lld)", what, (int)id,
                            (long long)t->vocab_size);
    if (t->tokens[id]) {
        if (t->token_len[id] == n && memcmp(t->tokens[id], s, n) == 0)
            return RL_OK;
        return rl_error_set(RL_EEXIST, "%s: id %d already used by token '%s'", what, (int)id,
                            t->tokens[id]);
    }
    int32_t prev = rl_tok_strmap_get(&t->token_map, s, n);
    if (prev >= 0)
        return rl_error_set(RL_EEXIST, "%s: token '%.*s' has two ids, %d and %d", what, (int)n,
                            s, (int)prev, (int)id);
    char *c = malloc(n + 1);
    if (!c)
        return rl_error_set(RL_ENOMEM, "%s: out of memory", what);
    memcpy(c, s, n);
    c[n] = 0;
    t->tokens[id] = c;
    t->token_len[id] = (uint32_t)n;
    return rl_tok_strmap_put(&t->token_map, c, n, id, NULL);
}

void rl_tokenizer_free(rl_tokenizer *tok)
{
    if (!tok)
        return;
    if (tok->impl)
        tok->ops->free_impl(tok->impl);
    if (tok->tokens)
        for (int64_t i = 0; i < tok->vocab_size; i++)
            free(tok->tokens[i]);
    free(tok->tokens);
    free(tok->token_len);
    free(tok->is_special);
    rl_tok_strmap_free(&tok->token_map);
    free(tok);
}

int rl_tokenizer_save(const rl_tokenizer *tok, const char *path)
{
    if (!tok || !path)
        return rl_error_set(RL_EINVAL, "rl_tokenizer_save: tok or path is NULL");
    if (!tok->ops->save)
        return rl_error_set(RL_EUNSUPPORTED,
                            "rl_tokenizer_save: only char tokenizers are saved (keep the "
                            "tokenizer.json of a BPE tokenizer)");
    return tok->ops->save(tok, path);
}

rl_tokenizer_kind rl_tokenizer_kind_of(const rl_tokenizer *tok) { return tok->kind; }
int64_t rl_tokenizer_vocab_size(const rl_tokenizer *tok) { return tok->vocab_size; }

int32_t rl_tokenizer_special_id(const rl_tokenizer *tok, rl_tokenizer_special which)
{
    if ((int)which < 0 || (int)which > 3)
        return -1;
    return tok->special[which];
}

int rl_tokenizer_set_special_id(rl_tokenizer *tok, rl_tokenizer_special which, int32_t id)
{
    if ((int)which < 0 || (int)which > 3)
        return rl_error_set(RL_EINVAL, "rl_tokenizer_set_special_id: which = %d not in 0..3",
                            (int)which);
    if (id < -1 || id >= tok->vocab_size || (id >= 0 && !tok->tokens[id]))
        return rl_error_set(RL_ERANGE, "rl_tokenizer_set_special_id: id %d is not a token "
                            "(vocab size %lld)", (int)id, (long long)tok->vocab_size);
    tok->special[which] = id;
    return RL_OK;
}

int32_t rl_tokenizer_token_to_id(const rl_tokenizer *tok, const char *token)
{
    if (!token)
        return -1;
    return rl_tok_strmap_get(&tok->token_map, token, strlen(token));
}

const char *rl_tokenizer_id_to_token(const rl_tokenizer *tok, int32_t id)
{
    if (id < 0 || id >= tok->vocab_size)
        return NULL;
    return tok->tokens[id];
}

bool rl_tokenizer_is_special(const rl_tokenizer *tok, int32_t id)
{
    return id >= 0 && id < tok->vocab_size && tok->is_special[id];
}

/* The ids of text into v (empty on entry); on an error v is left empty. */
static int s_encode(const rl_tokenizer *tok, const char *text, size_t len, rl_tok_ivec *v)
{
    if (!tok)
        return rl_error_set(RL_EINVAL, "rl_tokenizer_encode: tok is NULL");
    if (!text && len)
        return rl_error_set(RL_EINVAL, "rl_tokenizer_encode: text is NULL with len %zu", len);
    if (!text)
        text = "";
    int rc = tok->ops->encode(tok, text, len, v);
    if (rc) {
        free(v->v);
        *v = (rl_tok_ivec){0};
    }
    return rc;
}

int rl_tokenizer_encode(const rl_tokenizer *tok, const char *text, size_t len, int32_t **ids,
                        int64_t *n)
{
    if (!ids || !n)
        return rl_error_set(RL_EINVAL, "rl_tokenizer_encode: ids or n is NULL");
    *ids = NULL;
    *n = 0;
    rl_tok_ivec v = {0};
    int rc = s_encode(tok, text, len, &v);
    if (rc)
        return rc;
    if (!v.v && !(v.v = malloc(sizeof(int32_t))))
        return rl_error_set(RL_ENOMEM, "rl_tokenizer_encode: out of memory");
    *ids = v.v;
    *n = v.n;
    return RL_OK;
}

int rl_tokenizer_encode_into(const rl_tokenizer *tok, const char *text, size_t len, int32_t *ids,
                             int64_t cap, int64_t *n)
{
    if (!n || (!ids && cap > 0))
        return rl_error_set(RL_EINVAL, "rl_tokenizer_encode_into: ids or n is NULL");
    *n = 0;
    rl_tok_ivec v = {0};
    int rc = s_encode(tok, text, len, &v);
    if (rc)
        return rc;
    *n = v.n;
    if (v.n > cap) {
        free(v.v);
        return rl_error_set(RL_ERANGE, "rl_tokenizer_encode_into: text needs %lld ids, buffer "
                            "holds %lld", (long long)v.n, (long long)cap);
    }
    if (v.n)
        memcpy(ids, v.v, (size_t)v.n * sizeof *ids);
    free(v.v);
    return RL_OK;
}

int rl_tokenizer_decode_opts(const rl_tokenizer *tok, const int32_t *ids, int64_t n, int flags,
                             char **text, size_t *len)
{
    if (!tok || !text || (!ids && n > 0) || n < 0)
        return rl_error_set(RL_EINVAL, "rl_tokenizer_decode: bad arguments (tok %p, ids %p, "
                            "n %lld, text %p)", (const void *)tok, (const void *)ids,
                            (long long)n, (void *)text);
    *text = NULL;
    if (len)
        *len = 0;
    for (int64_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= tok->vocab_size || !tok->tokens[ids[i]])
            return rl_error_set(RL_ERANGE, "rl_tokenizer_decode: ids[%lld] = %d is not a token "
                                "(vocab size %lld)", (long long)i, (int)ids[i],
                                (long long)tok->vocab_size);
    size_t l = 0;
    int rc = tok->ops->decode(tok, ids, n, flags, text, &l);
    if (rc == RL_OK && len)
        *len = l;
    return rc;
}

int rl_tokenizer_decode(const rl_tokenizer *tok, const int32_t *ids, int64_t n, char **text,
                        size_t *len)
{
    return rl_tokenizer_decode_opts(tok, ids, n, 0, text, len);
}
