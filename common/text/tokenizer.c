/* tokenizer.c — the rl_tokenizer API (dispatch to the char / BPE kinds) and
 * helpers both kinds share: UTF-8, Unicode classes, NFC, hash map, special
 * token matcher. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rlrt/error.h"
#include "common/core/util.h"
#include "common/text/tokenizer_internal.h"

/* ======================================================================
 * UTF-8 and Unicode classes
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

static int s_range_lookup(const rl_tok_uc_range *r, int count, uint32_t cp)
{
    int lo = 0, hi = count - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (cp < r[mid].lo)
            hi = mid - 1;
        else if (cp > r[mid].hi)
            lo = mid + 1;
        else
            return r[mid].v;
    }
    return 0;
}

static bool s_is_white_space(uint32_t cp)
{
    /* Unicode White_Space = what Oniguruma's \s matches in UTF-8 mode. */
    return (cp >= 0x09 && cp <= 0x0D) || cp == 0x20 || cp == 0x85 || cp == 0xA0 ||
           cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 ||
           cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

int rl_tok_uc_class(uint32_t cp)
{
    if (cp & RL_TOK_BAD_CP)
        return RL_TOK_OTHER;
    if (cp < 0x80) {
        if ((cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z'))
            return RL_TOK_LETTER;
        if (cp >= '0' && cp <= '9')
            return RL_TOK_NUMBER;
        if ((cp >= 0x09 && cp <= 0x0D) || cp == 0x20)
            return RL_TOK_SPACE;
        return RL_TOK_OTHER;
    }
    if (s_is_white_space(cp))
        return RL_TOK_SPACE;
    return s_range_lookup(rl_tok_uc_class_ranges, rl_tok_uc_class_count, cp);
}

/* ======================================================================
 * NFC (UAX #15: canonical decomposition, canonical ordering, composition)
 * ====================================================================== */

enum { S_SBASE = 0xAC00, S_LBASE = 0x1100, S_VBASE = 0x1161, S_TBASE = 0x11A7,
       S_LCOUNT = 19, S_VCOUNT = 21, S_TCOUNT = 28, S_NCOUNT = 588, S_SCOUNT = 11172 };

static int s_ccc(uint32_t cp)
{
    if (cp < 0x300 || (cp & RL_TOK_BAD_CP))
        return 0;
    return s_range_lookup(rl_tok_uc_ccc_ranges, rl_tok_uc_ccc_count, cp);
}

static const rl_tok_uc_decomp *s_decomp(uint32_t cp)
{
    int lo = 0, hi = rl_tok_uc_decomp_count - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (cp < rl_tok_uc_decomps[mid].cp)
            hi = mid - 1;
        else if (cp > rl_tok_uc_decomps[mid].cp)
            lo = mid + 1;
        else
            return &rl_tok_uc_decomps[mid];
    }
    return NULL;
}

/* The primary composite of (a, b), or 0. */
static uint32_t s_compose(uint32_t a, uint32_t b)
{
    if (a >= S_LBASE && a < S_LBASE + S_LCOUNT && b >= S_VBASE && b < S_VBASE + S_VCOUNT)
        return S_SBASE + ((a - S_LBASE) * S_VCOUNT + (b - S_VBASE)) * S_TCOUNT;
    if (a >= S_SBASE && a < S_SBASE + S_SCOUNT && (a - S_SBASE) % S_TCOUNT == 0 &&
        b > S_TBASE && b < S_TBASE + S_TCOUNT)
        return a + (b - S_TBASE);
    int lo = 0, hi = rl_tok_uc_comp_count - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        const rl_tok_uc_comp *c = &rl_tok_uc_comps[mid];
        if (a < c->a || (a == c->a && b < c->b))
            hi = mid - 1;
        else if (a > c->a || b > c->b)
            lo = mid + 1;
        else
            return c->c;
    }
    return 0;
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
    /* Canonical decompositions are at most 4 code points long in Unicode. */
    size_t cap = 4 * n + 4;
    uint32_t *d = malloc(cap * sizeof *d);
    char *o = malloc(4 * cap + 1);
    if (!d || !o) {
        free(d);
        free(o);
        return rl_error_set(RL_ENOMEM, "tokenizer: NFC of %zu bytes: out of memory", n);
    }
    size_t nd = 0;
    for (i = 0; i < n;) {
        uint32_t cp;
        i += (size_t)rl_tok_utf8_next(u, n, i, &cp);
        if (cp >= S_SBASE && cp < S_SBASE + S_SCOUNT) {
            uint32_t si = cp - S_SBASE;
            d[nd++] = S_LBASE + si / S_NCOUNT;
            d[nd++] = S_VBASE + (si % S_NCOUNT) / S_TCOUNT;
            if (si % S_TCOUNT)
                d[nd++] = S_TBASE + si % S_TCOUNT;
            continue;
        }
        const rl_tok_uc_decomp *e = (cp & RL_TOK_BAD_CP) || cp < 0xC0 ? NULL : s_decomp(cp);
        if (e) {
            for (int k = 0; k < e->len; k++)
                d[nd++] = rl_tok_uc_decomp_data[e->off + k];
        } else {
            d[nd++] = cp;
        }
    }
    /* Canonical ordering: a stable sort of each run of non-starters by ccc;
     * long runs by counting sort (ccc < 256), so a hostile text of many
     * combining marks stays linear. */
    for (size_t k = 0; k < nd;) {
        if (s_ccc(d[k]) == 0) {
            k++;
            continue;
        }
        size_t a = k;
        while (k < nd && s_ccc(d[k]) != 0)
            k++;
        if (k - a <= 32) {
            for (size_t q = a + 1; q < k; q++) {
                uint32_t x = d[q];
                int cq = s_ccc(x);
                size_t j = q;
                for (; j > a && s_ccc(d[j - 1]) > cq; j--)
                    d[j] = d[j - 1];
                d[j] = x;
            }
        } else {
            size_t cnt[257] = {0};
            for (size_t q = a; q < k; q++)
                cnt[s_ccc(d[q]) + 1]++;
            for (int c = 0; c < 256; c++)
                cnt[c + 1] += cnt[c];
            uint32_t *tmp = malloc((k - a) * sizeof *tmp);
            if (!tmp) {
                free(d);
                free(o);
                return rl_error_set(RL_ENOMEM, "tokenizer: NFC of %zu bytes: out of memory", n);
            }
            for (size_t q = a; q < k; q++)
                tmp[cnt[s_ccc(d[q])]++] = d[q];
            memcpy(d + a, tmp, (k - a) * sizeof *d);
            free(tmp);
        }
    }
    /* Composition. */
    size_t nc = 0;
    if (nd > 0) {
        size_t starter = 0;
        int last = s_ccc(d[0]);
        if (last != 0)
            last = 256; /* a leading non-starter composes with nothing */
        nc = 1;
        for (size_t k = 1; k < nd; k++) {
            uint32_t ch = d[k];
            int cc = s_ccc(ch);
            uint32_t comp = (last == 256 || (d[starter] & RL_TOK_BAD_CP) || (ch & RL_TOK_BAD_CP))
                                ? 0 : s_compose(d[starter], ch);
            if (comp && (last < cc || last == 0)) {
                d[starter] = comp;
                continue;
            }
            if (cc == 0) {
                starter = nc;
                last = 0;
            } else {
                last = cc;
            }
            d[nc++] = ch;
        }
    }
    size_t on = 0;
    for (size_t k = 0; k < nc; k++)
        on += (size_t)rl_tok_utf8_put(d[k], o + on);
    o[on] = 0;
    free(d);
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

rl_tokenizer *rl_tok_alloc(rl_tokenizer_kind kind, int64_t vocab_size)
{
    rl_tokenizer *t = calloc(1, sizeof *t);
    if (!t) {
        rl_error_set(RL_ENOMEM, "tokenizer: out of memory");
        return NULL;
    }
    t->kind = kind;
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
    if (tok->impl) {
        if (tok->kind == RL_TOKENIZER_CHAR)
            rl_tok_char_free_impl(tok->impl);
        else
            rl_tok_bpe_free_impl(tok->impl);
    }
    if (tok->tokens)
        for (int64_t i = 0; i < tok->vocab_size; i++)
            free(tok->tokens[i]);
    free(tok->tokens);
    free(tok->token_len);
    free(tok->is_special);
    rl_tok_strmap_free(&tok->token_map);
    free(tok);
}

static char *s_read_file(const char *path, size_t *len)
{
    char *buf = rl_file_read_all(path, len);
    if (!buf)
        rl_error_wrap(rl_error_code(), "tokenizer: cannot open '%s'", path);
    return buf;
}

static json_t *s_parse(const char *json, size_t len, const char *what)
{
    json_error_t je;
    json_t *root = json_loadb(json, len, 0, &je);
    if (!root) {
        rl_error_set(RL_EPROTO, "%s: invalid JSON at line %d column %d: %s", what, je.line,
                     je.column, je.text);
        return NULL;
    }
    if (!json_is_object(root)) {
        json_decref(root);
        rl_error_set(RL_EPROTO, "%s: top level is not a JSON object", what);
        return NULL;
    }
    return root;
}

rl_tokenizer *rl_tokenizer_from_hf_json(const char *json, size_t len)
{
    if (!json) {
        rl_error_set(RL_EINVAL, "rl_tokenizer_from_hf_json: json is NULL");
        return NULL;
    }
    json_t *root = s_parse(json, len, "tokenizer.json");
    if (!root)
        return NULL;
    rl_tokenizer *t = rl_tok_bpe_from_json(root, "tokenizer.json");
    json_decref(root);
    return t;
}

static rl_tokenizer *s_load(const char *path, bool allow_char)
{
    if (!path) {
        rl_error_set(RL_EINVAL, "tokenizer: path is NULL");
        return NULL;
    }
    size_t len;
    char *buf = s_read_file(path, &len);
    if (!buf)
        return NULL;
    json_t *root = s_parse(buf, len, path);
    free(buf);
    if (!root)
        return NULL;
    rl_tokenizer *t;
    json_t *type = json_object_get(root, "type");
    if (allow_char && json_is_string(type) && strcmp(json_string_value(type), "rlrt-char") == 0)
        t = rl_tok_char_from_json(root, path);
    else
        t = rl_tok_bpe_from_json(root, path);
    json_decref(root);
    return t;
}

rl_tokenizer *rl_tokenizer_load_hf(const char *path) { return s_load(path, false); }
rl_tokenizer *rl_tokenizer_load(const char *path) { return s_load(path, true); }

int rl_tokenizer_save(const rl_tokenizer *tok, const char *path)
{
    if (!tok || !path)
        return rl_error_set(RL_EINVAL, "rl_tokenizer_save: tok or path is NULL");
    if (tok->kind != RL_TOKENIZER_CHAR)
        return rl_error_set(RL_EUNSUPPORTED,
                            "rl_tokenizer_save: only char tokenizers are saved (keep the "
                            "tokenizer.json of a BPE tokenizer)");
    return rl_tok_char_save(tok, path);
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

static int s_encode(const rl_tokenizer *tok, const char *text, size_t len, rl_tok_ivec *v)
{
    if (!tok)
        return rl_error_set(RL_EINVAL, "rl_tokenizer_encode: tok is NULL");
    if (!text && len)
        return rl_error_set(RL_EINVAL, "rl_tokenizer_encode: text is NULL with len %zu", len);
    if (!text)
        text = "";
    return tok->kind == RL_TOKENIZER_CHAR ? rl_tok_char_encode(tok, text, len, v)
                                          : rl_tok_bpe_encode(tok, text, len, v);
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
    if (rc) {
        free(v.v);
        return rc;
    }
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
    if (rc) {
        free(v.v);
        return rc;
    }
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
    int rc = tok->kind == RL_TOKENIZER_CHAR ? rl_tok_char_decode(tok, ids, n, flags, text, &l)
                                            : rl_tok_bpe_decode(tok, ids, n, flags, text, &l);
    if (rc == RL_OK && len)
        *len = l;
    return rc;
}

int rl_tokenizer_decode(const rl_tokenizer *tok, const int32_t *ids, int64_t n, char **text,
                        size_t *len)
{
    return rl_tokenizer_decode_opts(tok, ids, n, 0, text, len);
}
