/* tokenizer_bpe.c — byte-level BPE from a Hugging Face tokenizer.json:
 * loading and validation, added-token splitting, the pre-tokenizer's split
 * regex (compiled from tokenizer.json with PCRE2), rank-ordered merges with
 * a per-word cache, and the byte-level decoder. */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <jansson.h>
#include <pcre2.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rlrt/error.h"
#include "common/text/tokenizer_internal.h"

/* this kind's ops (defined at the end) */
static const rl_tok_ops s_ops;

/* What ByteLevel(use_regex = true) splits with (GPT-2's regex). */
static const char s_re_gpt2[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

enum { S_CACHE_SLOTS = 1 << 16, S_CACHE_MAX_WORD = 128 };

typedef struct s_cache_slot {
    char *key;      /* malloc'd: ids (int32) followed by the key bytes */
    uint64_t hash;
    uint32_t klen, nids;
} s_cache_slot;

typedef struct s_bpe {
    pcre2_code *split; /* the pre-tokenizer regex; NULL: no split */
    bool jit;          /* split is JIT-compiled */
    bool nfc, add_prefix_space, ignore_merges, fuse_unk;
    int32_t unk_id;
    int32_t byte_id[256];    /* id of each single-byte token, -1 if absent */
    /* merges: (left id, right id) → (rank, merged id); empty slots rank -1 */
    uint64_t *mkey;
    int32_t *mrank, *mnew;
    size_t mcap;
    /* id → byte string the token decodes to (byte-level unmapped) */
    char **bytes;
    uint32_t *bytes_len;
    size_t nvocab;
    rl_tok_strmap bytes_map; /* byte string → id, for ignore_merges */
    uint8_t *in_model;       /* id is in model.vocab */
    uint8_t *is_added;
    rl_tok_matcher added;
    pthread_mutex_t cache_lock;
    s_cache_slot *cache;
    size_t cache_count;
} s_bpe;

/* ---------------------------------------------------------------------
 * GPT-2 bytes_to_unicode: printable Latin-1 bytes map to themselves, the
 * rest to U+0100.. in byte order.
 * --------------------------------------------------------------------- */
static void s_byte_map(uint32_t b2u[256], int16_t u2b[324])
{
    for (int i = 0; i < 324; i++)
        u2b[i] = -1;
    int n = 0;
    for (int b = 0; b < 256; b++) {
        bool keep = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174);
        b2u[b] = keep ? (uint32_t)b : (uint32_t)(256 + n++);
        u2b[b2u[b]] = (int16_t)b;
    }
}

/* ---------------------------------------------------------------------
 * merges map
 * --------------------------------------------------------------------- */
static uint64_t s_mix(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    return x ^ (x >> 33);
}

static void s_merge_put(s_bpe *b, int32_t l, int32_t r, int32_t rank, int32_t nid)
{
    uint64_t k = (uint64_t)(uint32_t)l << 32 | (uint32_t)r;
    size_t mask = b->mcap - 1, i = s_mix(k) & mask;
    while (b->mrank[i] >= 0 && b->mkey[i] != k)
        i = (i + 1) & mask;
    /* a repeated pair keeps its last rank, as HF's map construction does */
    b->mkey[i] = k;
    b->mrank[i] = rank;
    b->mnew[i] = nid;
}

static inline bool s_merge_get(const s_bpe *b, int32_t l, int32_t r, int32_t *rank, int32_t *nid)
{
    uint64_t k = (uint64_t)(uint32_t)l << 32 | (uint32_t)r;
    size_t mask = b->mcap - 1, i = s_mix(k) & mask;
    while (b->mrank[i] >= 0) {
        if (b->mkey[i] == k) {
            *rank = b->mrank[i];
            *nid = b->mnew[i];
            return true;
        }
        i = (i + 1) & mask;
    }
    return false;
}

/* ---------------------------------------------------------------------
 * BPE merges over one pre-token
 * --------------------------------------------------------------------- */
typedef struct s_sym { int32_t id, prev, next, len; } s_sym;
typedef struct s_cand { int32_t rank, pos, nid; } s_cand;

static inline bool s_cand_less(s_cand a, s_cand b)
{
    return a.rank < b.rank || (a.rank == b.rank && a.pos < b.pos);
}

static void s_heap_push(s_cand *h, int64_t *n, s_cand c)
{
    int64_t i = (*n)++;
    while (i > 0) {
        int64_t p = (i - 1) / 2;
        if (!s_cand_less(c, h[p]))
            break;
        h[i] = h[p];
        i = p;
    }
    h[i] = c;
}

static s_cand s_heap_pop(s_cand *h, int64_t *n)
{
    s_cand top = h[0], last = h[--(*n)];
    int64_t i = 0;
    for (;;) {
        int64_t c = 2 * i + 1;
        if (c >= *n)
            break;
        if (c + 1 < *n && s_cand_less(h[c + 1], h[c]))
            c++;
        if (!s_cand_less(h[c], last))
            break;
        h[i] = h[c];
        i = c;
    }
    if (*n > 0)
        h[i] = last;
    return top;
}

static void s_try_pair(const s_bpe *b, const s_sym *sym, int32_t pos, s_cand *h, int64_t *nh)
{
    int32_t nx = sym[pos].next, rank, nid;
    if (nx >= 0 && s_merge_get(b, sym[pos].id, sym[nx].id, &rank, &nid))
        s_heap_push(h, nh, (s_cand){rank, pos, nid});
}

/* Appends the ids of word w[0..m) to out (HF BPE::merge_word semantics:
 * lowest rank first, leftmost on ties; unknown bytes become unk or are
 * dropped when there is no unk token). */
static int s_bpe_word(const s_bpe *b, const unsigned char *w, size_t m, rl_tok_ivec *out)
{
    /* The heap starts with at most m-1 pairs; each merge pops one entry and
     * pushes at most two, and there are at most m-1 merges: < 2m entries. */
    s_sym sym_stack[64];
    s_cand h_stack[128];
    bool small = m <= 64;
    s_sym *sym = small ? sym_stack : malloc(m * sizeof *sym);
    s_cand *h = small ? h_stack : malloc(2 * m * sizeof *h);
    if (!sym || !h) {
        if (!small) {
            free(sym);
            free(h);
        }
        return rl_error_set(RL_ENOMEM, "bpe: word of %zu bytes: out of memory", m);
    }
    int32_t ns = 0;
    for (size_t i = 0; i < m; i++) {
        int32_t id = b->byte_id[w[i]];
        if (id < 0) {
            if (b->unk_id < 0)
                continue;
            if (b->fuse_unk && ns > 0 && sym[ns - 1].id == b->unk_id) {
                sym[ns - 1].len++;
                continue;
            }
            id = b->unk_id;
        }
        sym[ns] = (s_sym){id, ns - 1, -1, 1};
        if (ns > 0)
            sym[ns - 1].next = ns;
        ns++;
    }
    int64_t nh = 0;
    for (int32_t p = 0; p + 1 < ns; p++)
        s_try_pair(b, sym, p, h, &nh);
    while (nh > 0) {
        s_cand c = s_heap_pop(h, &nh);
        s_sym *a = &sym[c.pos];
        if (a->len == 0 || a->next < 0)
            continue;
        int32_t rank, nid;
        if (!s_merge_get(b, a->id, sym[a->next].id, &rank, &nid) || nid != c.nid)
            continue;
        s_sym *r = &sym[a->next];
        a->id = nid;
        a->len += r->len;
        a->next = r->next;
        r->len = 0;
        if (a->next >= 0)
            sym[a->next].prev = c.pos;
        if (a->prev >= 0)
            s_try_pair(b, sym, a->prev, h, &nh);
        s_try_pair(b, sym, c.pos, h, &nh);
    }
    int rc = RL_OK;
    for (int32_t p = ns > 0 ? 0 : -1; p >= 0 && rc == RL_OK; p = sym[p].next)
        rc = rl_tok_ivec_push(out, sym[p].id);
    if (!small) {
        free(sym);
        free(h);
    }
    return rc;
}

static s_cache_slot *s_cache_find(s_bpe *b, const unsigned char *w, size_t m, uint64_t hash)
{
    size_t mask = S_CACHE_SLOTS - 1, i = hash & mask;
    while (b->cache[i].key) {
        s_cache_slot *e = &b->cache[i];
        if (e->hash == hash && e->klen == m &&
            memcmp(e->key + e->nids * sizeof(int32_t), w, m) == 0)
            return e;
        i = (i + 1) & mask;
    }
    return &b->cache[i];
}

static void s_cache_clear(s_bpe *b)
{
    for (size_t i = 0; i < S_CACHE_SLOTS; i++) {
        free(b->cache[i].key);
        b->cache[i].key = NULL;
    }
    b->cache_count = 0;
}

static int s_encode_word(const s_bpe *cb, const unsigned char *w, size_t m, rl_tok_ivec *out)
{
    s_bpe *b = (s_bpe *)cb; /* only the cache is mutated, under its lock */
    if (m == 0)
        return RL_OK;
    if (b->ignore_merges) {
        int32_t id = rl_tok_strmap_get(&b->bytes_map, (const char *)w, m);
        if (id >= 0)
            return rl_tok_ivec_push(out, id);
    }
    if (m == 1) {
        int32_t id = b->byte_id[w[0]] >= 0 ? b->byte_id[w[0]] : b->unk_id;
        return id >= 0 ? rl_tok_ivec_push(out, id) : RL_OK;
    }
    bool cacheable = m <= S_CACHE_MAX_WORD && b->cache;
    uint64_t hash = cacheable ? rl_tok_hash_bytes(w, m) : 0;
    if (cacheable && pthread_mutex_trylock(&b->cache_lock) == 0) {
        s_cache_slot *e = s_cache_find(b, w, m, hash);
        bool hit = e->key != NULL;
        int rc = hit ? rl_tok_ivec_append(out, (const int32_t *)e->key, e->nids) : RL_OK;
        pthread_mutex_unlock(&b->cache_lock);
        if (hit)
            return rc;
    }
    int64_t start = out->n;
    int rc = s_bpe_word(b, w, m, out);
    if (rc || !cacheable)
        return rc;
    if (pthread_mutex_trylock(&b->cache_lock) == 0) {
        if (b->cache_count * 2 >= S_CACHE_SLOTS)
            s_cache_clear(b);
        s_cache_slot *e = s_cache_find(b, w, m, hash);
        if (!e->key) {
            uint32_t nids = (uint32_t)(out->n - start);
            char *k = malloc(nids * sizeof(int32_t) + m);
            if (k) {
                memcpy(k, out->v + start, nids * sizeof(int32_t));
                memcpy(k + nids * sizeof(int32_t), w, m);
                e->key = k;
                e->hash = hash;
                e->klen = (uint32_t)m;
                e->nids = nids;
                b->cache_count++;
            }
        }
        pthread_mutex_unlock(&b->cache_lock);
    }
    return RL_OK;
}

/* ---------------------------------------------------------------------
 * pre-tokenizer: the split regex
 * --------------------------------------------------------------------- */

/* The text the regex runs on: s itself, or *copy, a copy of the same length
 * in which each byte that is not valid UTF-8 reads as U+001A SUBSTITUTE (one
 * punctuation-class character; PCRE2 needs valid UTF-8) and U+180E MONGOLIAN
 * VOWEL SEPARATOR as U+200B ZERO WIDTH SPACE, another format character:
 * PCRE2's \s matches U+180E, Oniguruma's (HF's) does not. Words are cut
 * from s at the same offsets. */
static int s_subject(const unsigned char *s, size_t n, unsigned char **copy)
{
    *copy = NULL;
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        if (s[i] < 0x80) {
            i++;
            continue;
        }
        int l = rl_tok_utf8_next(s, n, i, &cp);
        if ((cp & RL_TOK_BAD_CP) || cp == 0x180E) {
            if (!*copy) {
                if (!(*copy = malloc(n)))
                    return rl_error_set(RL_ENOMEM, "bpe: text of %zu bytes: out of memory", n);
                memcpy(*copy, s, n);
            }
            if (cp == 0x180E)
                memcpy(*copy + i, "\xe2\x80\x8b", 3);
            else
                (*copy)[i] = 0x1A;
        }
        i += (size_t)l;
    }
    return RL_OK;
}

/* The next match in subj[0..n) at or after `at`: 1 and [*ms, *me), 0 if
 * there is none, or an error (a PCRE2 limit). */
static int s_split_find(const s_bpe *b, pcre2_match_data *md, const unsigned char *subj,
                        size_t n, size_t at, size_t *ms, size_t *me)
{
    int rc = b->jit ? pcre2_jit_match(b->split, subj, n, at, 0, md, NULL)
                    : pcre2_match(b->split, subj, n, at, PCRE2_NO_UTF_CHECK, md, NULL);
    if (rc == PCRE2_ERROR_NOMATCH)
        return 0;
    if (rc < 0) {
        PCRE2_UCHAR msg[160];
        pcre2_get_error_message(rc, msg, sizeof msg);
        return rl_error_set(RL_ERANGE, "bpe: split regex at byte %zu of a %zu-byte text: %s", at,
                            n, (const char *)msg);
    }
    const PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
    *ms = ov[0];
    *me = ov[1] > ov[0] ? ov[1] : ov[0]; /* \K may leave the start after the end */
    return 1;
}

/* Encodes s[0..n) split like HF's Split(behavior = Isolated): each match
 * and each stretch between matches is a word. Like the onig crate's
 * find_iter, which HF uses, an empty match right at the end of the previous
 * match is skipped. */
static int s_split_encode(const s_bpe *b, const unsigned char *s, size_t n, rl_tok_ivec *out)
{
    unsigned char *copy = NULL;
    pcre2_match_data *md = pcre2_match_data_create_from_pattern(b->split, NULL);
    int rc = md ? s_subject(s, n, &copy) : rl_error_set(RL_ENOMEM, "bpe: out of memory");
    const unsigned char *subj = copy ? copy : s;
    size_t at = 0, prev = 0, last = SIZE_MAX;
    while (rc == RL_OK && at <= n) {
        size_t ms = 0, me = 0;
        int found = s_split_find(b, md, subj, n, at, &ms, &me);
        if (found <= 0) {
            rc = found;
            break;
        }
        if (ms == me && me == last) {
            uint32_t cp;
            at = me < n ? me + (size_t)rl_tok_utf8_next(subj, n, me, &cp) : n + 1;
            continue;
        }
        at = last = me;
        rc = s_encode_word(b, s + prev, ms - prev, out);
        if (rc == RL_OK)
            rc = s_encode_word(b, s + ms, me - ms, out);
        prev = me;
    }
    if (rc == RL_OK)
        rc = s_encode_word(b, s + prev, n - prev, out);
    free(copy);
    pcre2_match_data_free(md);
    return rc;
}

static int s_encode_segment(const s_bpe *b, const char *seg, size_t n, rl_tok_ivec *out)
{
    char *norm = NULL, *pref = NULL;
    size_t nn = 0;
    if (b->nfc) {
        int rc = rl_tok_nfc(seg, n, &norm, &nn);
        if (rc)
            return rc;
        if (norm) {
            seg = norm;
            n = nn;
        }
    }
    if (b->add_prefix_space && n > 0 && seg[0] != ' ') {
        pref = malloc(n + 1);
        if (!pref) {
            free(norm);
            return rl_error_set(RL_ENOMEM, "bpe: out of memory");
        }
        pref[0] = ' ';
        memcpy(pref + 1, seg, n);
        seg = pref;
        n++;
    }
    const unsigned char *s = (const unsigned char *)seg;
    int rc = b->split ? s_split_encode(b, s, n, out) : s_encode_word(b, s, n, out);
    free(norm);
    free(pref);
    return rc;
}

static int s_encode(const rl_tokenizer *t, const char *text, size_t len, rl_tok_ivec *out)
{
    const s_bpe *b = t->impl;
    size_t pos = 0;
    while (pos < len) {
        size_t ms, me;
        int32_t id;
        bool found = rl_tok_matcher_find(&b->added, text, len, pos, &ms, &me, &id);
        size_t end = found ? ms : len;
        if (end > pos) {
            int rc = s_encode_segment(b, text + pos, end - pos, out);
            if (rc)
                return rc;
        }
        if (!found)
            break;
        int rc = rl_tok_ivec_push(out, id);
        if (rc)
            return rc;
        pos = me;
    }
    return RL_OK;
}

static int s_decode(const rl_tokenizer *t, const int32_t *ids, int64_t n, int flags,
                      char **text, size_t *len)
{
    const s_bpe *b = t->impl;
    size_t total = 0;
    for (int64_t i = 0; i < n; i++)
        total += b->is_added[ids[i]] ? t->token_len[ids[i]] : b->bytes_len[ids[i]];
    char *o = malloc(total + 1);
    if (!o)
        return rl_error_set(RL_ENOMEM, "bpe: decode of %zu bytes: out of memory", total);
    size_t p = 0;
    for (int64_t i = 0; i < n; i++) {
        int32_t id = ids[i];
        if ((flags & RL_TOKENIZER_SKIP_SPECIAL) && t->is_special[id])
            continue;
        if (b->is_added[id]) {
            memcpy(o + p, t->tokens[id], t->token_len[id]);
            p += t->token_len[id];
        } else {
            memcpy(o + p, b->bytes[id], b->bytes_len[id]);
            p += b->bytes_len[id];
        }
    }
    o[p] = 0;
    *text = o;
    *len = p;
    return RL_OK;
}

static void s_free_impl(void *impl)
{
    s_bpe *b = impl;
    if (b->cache) {
        s_cache_clear(b);
        free(b->cache);
    }
    pthread_mutex_destroy(&b->cache_lock);
    pcre2_code_free(b->split);
    free(b->mkey);
    free(b->mrank);
    free(b->mnew);
    if (b->bytes)
        for (size_t id = 0; id < b->nvocab; id++)
            free(b->bytes[id]);
    free(b->bytes);
    free(b->bytes_len);
    free(b->in_model);
    free(b->is_added);
    rl_tok_strmap_free(&b->bytes_map);
    rl_tok_matcher_free(&b->added);
    free(b);
}

/* ---------------------------------------------------------------------
 * loading
 * --------------------------------------------------------------------- */

/* Max id accepted from a file, so a corrupt id cannot request a huge table. */
#define S_MAX_ID (1 << 26)

static const char *s_type_of(json_t *o)
{
    return json_string_value(json_object_get(o, "type"));
}

static int s_bool_field(json_t *o, const char *key, bool dflt, bool *out, const char *where)
{
    json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) {
        *out = dflt;
        return RL_OK;
    }
    if (!json_is_boolean(v))
        return rl_error_set(RL_EPROTO, "%s.%s must be a boolean", where, key);
    *out = json_is_true(v);
    return RL_OK;
}

static int s_parse_normalizer(s_bpe *b, json_t *root)
{
    json_t *nz = json_object_get(root, "normalizer");
    if (!nz || json_is_null(nz))
        return RL_OK;
    const char *ty = s_type_of(nz);
    if (!ty)
        return rl_error_set(RL_EPROTO, "normalizer.type is missing");
    if (strcmp(ty, "NFC") == 0) {
        b->nfc = true;
        return RL_OK;
    }
    if (strcmp(ty, "Sequence") == 0) {
        json_t *list = json_object_get(nz, "normalizers");
        size_t k;
        json_t *e;
        if (!json_is_array(list))
            return rl_error_set(RL_EPROTO, "normalizer.normalizers must be an array");
        json_array_foreach(list, k, e) {
            const char *et = s_type_of(e);
            if (et && strcmp(et, "NFC") == 0) {
                b->nfc = true;
                continue;
            }
            return rl_error_set(RL_EUNSUPPORTED, "normalizer.normalizers[%zu].type '%s' is not "
                                "supported (only NFC)", k, et ? et : "(missing)");
        }
        return RL_OK;
    }
    return rl_error_set(RL_EUNSUPPORTED, "normalizer.type '%s' is not supported (null or NFC)", ty);
}

static int s_byte_level(json_t *bl, const char *where, bool *uses_regex, bool *prefix)
{
    int rc = s_bool_field(bl, "add_prefix_space", false, prefix, where);
    if (!rc)
        rc = s_bool_field(bl, "use_regex", true, uses_regex, where);
    return rc;
}

/* Compiles the split regex re[0..len): UTF-8, Unicode properties for \d
 * \s \w and POSIX classes, no \C (it could end a word inside a character);
 * JIT-compiled where PCRE2 can, else run by its interpreter. */
static int s_compile_split(s_bpe *b, const char *re, size_t len, const char *where)
{
    int err;
    PCRE2_SIZE off;
    b->split = pcre2_compile((PCRE2_SPTR)re, len, PCRE2_UTF | PCRE2_UCP | PCRE2_NEVER_BACKSLASH_C,
                             &err, &off, NULL);
    if (!b->split) {
        PCRE2_UCHAR msg[160];
        pcre2_get_error_message(err, msg, sizeof msg);
        return rl_error_set(RL_EUNSUPPORTED, "%s '%.200s': PCRE2 cannot compile it: %s (at "
                            "offset %zu)", where, re, (const char *)msg, (size_t)off);
    }
    b->jit = pcre2_jit_compile(b->split, PCRE2_JIT_COMPLETE) == 0;
    return RL_OK;
}

static int s_parse_pre_tokenizer(s_bpe *b, json_t *root)
{
    json_t *pt = json_object_get(root, "pre_tokenizer");
    if (!pt || json_is_null(pt))
        return rl_error_set(RL_EUNSUPPORTED, "pre_tokenizer is null: only byte-level BPE "
                            "(a ByteLevel pre_tokenizer) is supported");
    const char *ty = s_type_of(pt);
    if (!ty)
        return rl_error_set(RL_EPROTO, "pre_tokenizer.type is missing");
    bool use_regex = true, prefix = false;
    if (strcmp(ty, "ByteLevel") == 0) {
        int rc = s_byte_level(pt, "pre_tokenizer", &use_regex, &prefix);
        if (rc)
            return rc;
        b->add_prefix_space = prefix;
        return use_regex ? s_compile_split(b, s_re_gpt2, sizeof s_re_gpt2 - 1, "ByteLevel regex")
                         : RL_OK;
    }
    if (strcmp(ty, "Sequence") != 0)
        return rl_error_set(RL_EUNSUPPORTED, "pre_tokenizer.type '%s' is not supported "
                            "(ByteLevel, or Sequence of Split + ByteLevel)", ty);
    json_t *list = json_object_get(pt, "pretokenizers");
    if (!json_is_array(list) || json_array_size(list) != 2)
        return rl_error_set(RL_EUNSUPPORTED, "pre_tokenizer.pretokenizers must be [Split, "
                            "ByteLevel] (got %zu entries)", json_array_size(list));
    json_t *sp = json_array_get(list, 0), *bl = json_array_get(list, 1);
    const char *t0 = s_type_of(sp), *t1 = s_type_of(bl);
    if (!t0 || strcmp(t0, "Split") != 0)
        return rl_error_set(RL_EUNSUPPORTED, "pre_tokenizer.pretokenizers[0].type '%s' is not "
                            "supported (Split)", t0 ? t0 : "(missing)");
    if (!t1 || strcmp(t1, "ByteLevel") != 0)
        return rl_error_set(RL_EUNSUPPORTED, "pre_tokenizer.pretokenizers[1].type '%s' is not "
                            "supported (ByteLevel)", t1 ? t1 : "(missing)");
    json_t *rej = json_object_get(json_object_get(sp, "pattern"), "Regex");
    if (!json_is_string(rej))
        return rl_error_set(RL_EUNSUPPORTED, "pre_tokenizer.pretokenizers[0].pattern must be "
                            "{\"Regex\": ...}");
    const char *beh = json_string_value(json_object_get(sp, "behavior"));
    if (!beh || strcmp(beh, "Isolated") != 0)
        return rl_error_set(RL_EUNSUPPORTED, "pre_tokenizer.pretokenizers[0].behavior '%s' is "
                            "not supported (Isolated)", beh ? beh : "(missing)");
    bool invert = false;
    int rc = s_bool_field(sp, "invert", false, &invert, "pre_tokenizer.pretokenizers[0]");
    if (rc)
        return rc;
    if (invert)
        return rl_error_set(RL_EUNSUPPORTED, "pre_tokenizer.pretokenizers[0].invert = true is "
                            "not supported");
    rc = s_byte_level(bl, "pre_tokenizer.pretokenizers[1]", &use_regex, &prefix);
    if (rc)
        return rc;
    if (use_regex || prefix)
        return rl_error_set(RL_EUNSUPPORTED, "pre_tokenizer.pretokenizers[1]: ByteLevel after "
                            "Split must have use_regex = false and add_prefix_space = false");
    return s_compile_split(b, json_string_value(rej), json_string_length(rej),
                           "pre_tokenizer.pretokenizers[0].pattern.Regex");
}

static int s_check_model_options(s_bpe *b, json_t *model)
{
    json_t *v = json_object_get(model, "dropout");
    if (v && !json_is_null(v) && !(json_is_number(v) && json_number_value(v) == 0.0))
        return rl_error_set(RL_EUNSUPPORTED, "model.dropout must be null (BPE dropout is not "
                            "supported)");
    const char *keys[2] = {"continuing_subword_prefix", "end_of_word_suffix"};
    for (int k = 0; k < 2; k++) {
        v = json_object_get(model, keys[k]);
        if (v && !json_is_null(v) && !(json_is_string(v) && json_string_length(v) == 0))
            return rl_error_set(RL_EUNSUPPORTED, "model.%s must be null or \"\" for byte-level "
                                "BPE", keys[k]);
    }
    bool bf = false;
    int rc = s_bool_field(model, "byte_fallback", false, &bf, "model");
    if (rc)
        return rc;
    if (bf)
        return rl_error_set(RL_EUNSUPPORTED, "model.byte_fallback = true is not supported");
    rc = s_bool_field(model, "fuse_unk", false, &b->fuse_unk, "model");
    if (!rc)
        rc = s_bool_field(model, "ignore_merges", false, &b->ignore_merges, "model");
    return rc;
}

static int s_parse_merge(json_t *e, size_t k, const char **a, size_t *al, const char **bb,
                         size_t *bl)
{
    if (json_is_string(e)) {
        const char *s = json_string_value(e);
        size_t n = json_string_length(e);
        const char *sp = memchr(s, ' ', n);
        if (!sp || memchr(sp + 1, ' ', n - (size_t)(sp + 1 - s)) || sp == s || sp + 1 == s + n)
            return rl_error_set(RL_EPROTO, "model.merges[%zu] '%s' is not two tokens separated "
                                "by one space", k, s);
        *a = s;
        *al = (size_t)(sp - s);
        *bb = sp + 1;
        *bl = n - *al - 1;
        return RL_OK;
    }
    if (json_is_array(e) && json_array_size(e) == 2 && json_is_string(json_array_get(e, 0)) &&
        json_is_string(json_array_get(e, 1))) {
        *a = json_string_value(json_array_get(e, 0));
        *al = json_string_length(json_array_get(e, 0));
        *bb = json_string_value(json_array_get(e, 1));
        *bl = json_string_length(json_array_get(e, 1));
        return RL_OK;
    }
    return rl_error_set(RL_EPROTO, "model.merges[%zu] must be \"a b\" or [\"a\", \"b\"]", k);
}

static void s_guess_specials(rl_tokenizer *t, int32_t unk)
{
    static const char *const eos[] = {"<|endoftext|>", "<|end_of_text|>", "</s>", "<eos>"};
    static const char *const bos[] = {"<|begin_of_text|>", "<s>", "<bos>", "<|startoftext|>"};
    static const char *const pad[] = {"<pad>", "<|pad|>", "[PAD]"};
    for (size_t k = 0; k < sizeof eos / sizeof *eos && t->special[RL_TOK_EOS] < 0; k++)
        t->special[RL_TOK_EOS] = rl_tokenizer_token_to_id(t, eos[k]);
    for (size_t k = 0; k < sizeof bos / sizeof *bos && t->special[RL_TOK_BOS] < 0; k++)
        t->special[RL_TOK_BOS] = rl_tokenizer_token_to_id(t, bos[k]);
    for (size_t k = 0; k < sizeof pad / sizeof *pad && t->special[RL_TOK_PAD] < 0; k++)
        t->special[RL_TOK_PAD] = rl_tokenizer_token_to_id(t, pad[k]);
    t->special[RL_TOK_UNK] = unk;
}

/* Converts a vocab token (byte-level mapped form) into the bytes it stands
 * for; a token with any character outside the byte alphabet keeps its raw
 * UTF-8 (like HF's ByteLevel decoder). */
static int s_unmap_token(const int16_t u2b[324], const char *tok, size_t n, char **out,
                         uint32_t *out_len)
{
    char *o = malloc(n + 1);
    if (!o)
        return rl_error_set(RL_ENOMEM, "bpe: out of memory");
    size_t p = 0;
    bool ok = true;
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        i += (size_t)rl_tok_utf8_next((const unsigned char *)tok, n, i, &cp);
        if ((cp & RL_TOK_BAD_CP) || cp >= 324 || u2b[cp] < 0) {
            ok = false;
            break;
        }
        o[p++] = (char)u2b[cp];
    }
    if (!ok) {
        memcpy(o, tok, n);
        p = n;
    }
    o[p] = 0;
    *out = o;
    *out_len = (uint32_t)p;
    return RL_OK;
}

rl_tokenizer *rl_tok_bpe_from_json(void *json_root, const char *what)
{
    json_t *root = json_root;
    rl_tokenizer *t = NULL;
    s_bpe *b = NULL;
    int rc = RL_OK;
    /* tokenizer.json's "model" object; its "type" names the algorithm */
    static const char *const obj = "model";
    json_t *model = json_object_get(root, obj);
    if (!json_is_object(model)) {
        rl_error_set(RL_EPROTO, "%s: missing '%s' object", what, obj);
        return NULL;
    }
    const char *mt = s_type_of(model);
    if (!mt) {
        rl_error_set(RL_EPROTO, "%s: %s.type is missing", what, obj);
        return NULL;
    }
    if (strcmp(mt, "BPE") != 0) {
        rl_error_set(RL_EUNSUPPORTED, "%s: %s.type '%s' is not supported (only 'BPE')", what, obj,
                     mt);
        return NULL;
    }
    json_t *vocab = json_object_get(model, "vocab");
    json_t *merges = json_object_get(model, "merges");
    json_t *added = json_object_get(root, "added_tokens");
    if (!json_is_object(vocab)) {
        rl_error_set(RL_EPROTO, "%s: model.vocab must be an object {token: id}", what);
        return NULL;
    }
    if (!json_is_array(merges)) {
        rl_error_set(RL_EPROTO, "%s: model.merges must be an array", what);
        return NULL;
    }
    if (added && !json_is_null(added) && !json_is_array(added)) {
        rl_error_set(RL_EPROTO, "%s: added_tokens must be an array", what);
        return NULL;
    }
    /* ids: validate and size the table */
    int64_t maxid = -1;
    const char *key;
    json_t *val;
    json_object_foreach(vocab, key, val) {
        if (!json_is_integer(val) || json_integer_value(val) < 0 ||
            json_integer_value(val) >= S_MAX_ID) {
            rl_error_set(RL_EPROTO, "%s: model.vocab['%s'] = %s is not an id in [0, %d)", what,
                         key, json_is_integer(val) ? "out-of-range integer" : "non-integer",
                         S_MAX_ID);
            return NULL;
        }
        if (json_integer_value(val) > maxid)
            maxid = json_integer_value(val);
    }
    size_t k;
    json_t *e;
    json_array_foreach(added, k, e) {
        json_t *id = json_object_get(e, "id");
        json_t *content = json_object_get(e, "content");
        if (!json_is_integer(id) || json_integer_value(id) < 0 ||
            json_integer_value(id) >= S_MAX_ID || !json_is_string(content) ||
            json_string_length(content) == 0) {
            rl_error_set(RL_EPROTO, "%s: added_tokens[%zu] needs an integer 'id' in [0, %d) and "
                         "a non-empty 'content'", what, k, S_MAX_ID);
            return NULL;
        }
        if (json_integer_value(id) > maxid)
            maxid = json_integer_value(id);
        const char *flags[3] = {"single_word", "lstrip", "rstrip"};
        for (int f = 0; f < 3; f++) {
            if (json_is_true(json_object_get(e, flags[f]))) {
                rl_error_set(RL_EUNSUPPORTED, "%s: added_tokens[%zu].%s = true is not supported "
                             "('%s')", what, k, flags[f], json_string_value(content));
                return NULL;
            }
        }
    }
    if (maxid < 0) {
        rl_error_set(RL_EPROTO, "%s: model.vocab is empty", what);
        return NULL;
    }
    t = rl_tok_alloc(RL_TOKENIZER_BPE, &s_ops, maxid + 1);
    if (!t)
        return NULL;
    b = calloc(1, sizeof *b);
    if (!b) {
        rl_tokenizer_free(t);
        rl_error_set(RL_ENOMEM, "%s: out of memory", what);
        return NULL;
    }
    pthread_mutex_init(&b->cache_lock, NULL);
    t->impl = b;
    b->unk_id = -1;
    size_t V = (size_t)t->vocab_size;
    b->nvocab = V;
    b->bytes = calloc(V, sizeof *b->bytes);
    b->bytes_len = calloc(V, sizeof *b->bytes_len);
    b->in_model = calloc(V, 1);
    b->is_added = calloc(V, 1);
    b->cache = calloc(S_CACHE_SLOTS, sizeof *b->cache);
    if (!b->bytes || !b->bytes_len || !b->in_model || !b->is_added || !b->cache ||
        rl_tok_strmap_init(&b->bytes_map, V)) {
        rl_error_set(RL_ENOMEM, "%s: out of memory", what);
        goto fail;
    }
    if ((rc = s_check_model_options(b, model)) || (rc = s_parse_normalizer(b, root)) ||
        (rc = s_parse_pre_tokenizer(b, root)))
        goto fail_wrap;
    {
        json_t *dec = json_object_get(root, "decoder");
        const char *dt = dec ? s_type_of(dec) : NULL;
        if (!dt || strcmp(dt, "ByteLevel") != 0) {
            rl_error_set(RL_EUNSUPPORTED, "decoder.type '%s' is not supported (ByteLevel)",
                         dt ? dt : "null");
            goto fail_wrap;
        }
    }
    json_object_foreach(vocab, key, val) {
        int32_t id = (int32_t)json_integer_value(val);
        char where[64];
        snprintf(where, sizeof where, "model.vocab");
        if ((rc = rl_tok_set_token(t, id, key, strlen(key), where)))
            goto fail_wrap;
        b->in_model[id] = 1;
    }
    json_array_foreach(added, k, e) {
        int32_t id = (int32_t)json_integer_value(json_object_get(e, "id"));
        json_t *content = json_object_get(e, "content");
        char where[64];
        snprintf(where, sizeof where, "added_tokens[%zu]", k);
        if ((rc = rl_tok_set_token(t, id, json_string_value(content), json_string_length(content),
                                   where)))
            goto fail_wrap;
        b->is_added[id] = 1;
        t->is_special[id] = json_is_true(json_object_get(e, "special"));
    }
    /* byte forms */
    {
        uint32_t b2u[256];
        int16_t u2b[324];
        s_byte_map(b2u, u2b);
        for (size_t id = 0; id < V; id++) {
            if (!t->tokens[id])
                continue;
            if ((rc = s_unmap_token(u2b, t->tokens[id], t->token_len[id], &b->bytes[id],
                                    &b->bytes_len[id])))
                goto fail;
            if (b->in_model[id])
                rl_tok_strmap_put(&b->bytes_map, b->bytes[id], b->bytes_len[id], (int32_t)id, NULL);
        }
        for (int c = 0; c < 256; c++) {
            char u[5];
            int l = rl_tok_utf8_put(b2u[c], u);
            int32_t id = rl_tok_strmap_get(&t->token_map, u, (size_t)l);
            b->byte_id[c] = (id >= 0 && b->in_model[id]) ? id : -1;
        }
    }
    {
        json_t *unk = json_object_get(model, "unk_token");
        if (unk && !json_is_null(unk)) {
            int32_t id = json_is_string(unk) ? rl_tokenizer_token_to_id(t, json_string_value(unk)) : -1;
            if (id < 0) {
                rl_error_set(RL_EPROTO, "model.unk_token '%s' is not in the vocabulary",
                             json_is_string(unk) ? json_string_value(unk) : "(not a string)");
                goto fail_wrap;
            }
            b->unk_id = id;
        }
    }
    /* merges */
    {
        size_t nm = json_array_size(merges);
        b->mcap = 16;
        while (b->mcap < nm * 2 + 2)
            b->mcap <<= 1;
        b->mkey = malloc(b->mcap * sizeof *b->mkey);
        b->mrank = malloc(b->mcap * sizeof *b->mrank);
        b->mnew = malloc(b->mcap * sizeof *b->mnew);
        char *cat = NULL;
        size_t catcap = 0;
        if (!b->mkey || !b->mrank || !b->mnew) {
            rl_error_set(RL_ENOMEM, "%s: %zu merges: out of memory", what, nm);
            goto fail;
        }
        for (size_t i = 0; i < b->mcap; i++)
            b->mrank[i] = -1;
        json_array_foreach(merges, k, e) {
            const char *sa = NULL, *sb = NULL;
            size_t la = 0, lb = 0;
            if ((rc = s_parse_merge(e, k, &sa, &la, &sb, &lb)))
                break;
            int32_t ia = rl_tok_strmap_get(&t->token_map, sa, la);
            int32_t ib = rl_tok_strmap_get(&t->token_map, sb, lb);
            if (la + lb + 1 > catcap) {
                catcap = 2 * (la + lb + 1);
                char *nc = realloc(cat, catcap);
                if (!nc) {
                    rc = rl_error_set(RL_ENOMEM, "%s: out of memory", what);
                    break;
                }
                cat = nc;
            }
            memcpy(cat, sa, la);
            memcpy(cat + la, sb, lb);
            int32_t in = rl_tok_strmap_get(&t->token_map, cat, la + lb);
            const char *bad = NULL;
            size_t badl = 0;
            if (ia < 0 || !b->in_model[ia]) {
                bad = sa;
                badl = la;
            } else if (ib < 0 || !b->in_model[ib]) {
                bad = sb;
                badl = lb;
            } else if (in < 0 || !b->in_model[in]) {
                bad = cat;
                badl = la + lb;
            }
            if (bad) {
                rc = rl_error_set(RL_EPROTO, "model.merges[%zu]: token '%.*s' is not in "
                                  "model.vocab", k, (int)badl, bad);
                break;
            }
            s_merge_put(b, ia, ib, (int32_t)k, in);
        }
        free(cat);
        if (rc)
            goto fail_wrap;
    }
    /* added tokens matcher */
    {
        size_t na = json_array_size(added);
        const char **strs = calloc(na + 1, sizeof *strs);
        int32_t *ids = calloc(na + 1, sizeof *ids);
        if (!strs || !ids) {
            free(strs);
            free(ids);
            rl_error_set(RL_ENOMEM, "%s: out of memory", what);
            goto fail;
        }
        json_array_foreach(added, k, e) {
            ids[k] = (int32_t)json_integer_value(json_object_get(e, "id"));
            strs[k] = t->tokens[ids[k]];
        }
        rc = rl_tok_matcher_build(&b->added, strs, ids, (int)na);
        free(strs);
        free(ids);
        if (rc)
            goto fail;
    }
    s_guess_specials(t, b->unk_id);
    return t;
fail_wrap:
    rl_error_wrap(rl_error_code(), "%s", what);
fail:
    rl_tokenizer_free(t);
    return NULL;
}

static const rl_tok_ops s_ops = {s_encode, s_decode, s_free_impl, NULL};
