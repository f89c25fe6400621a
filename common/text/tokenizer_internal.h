/* tokenizer_internal.h — shared between the tokenizer sources (not public):
 * tokenizer_base.c (the shared tables and helpers, and the calls that go
 * through a kind's ops), tokenizer_char.c and tokenizer_bpe.c (the kinds),
 * tokenizer.c (loading: picks the kind). Calls go one way: loading → kinds →
 * base.
 *
 * rl_tokenizer holds what both kinds share: the id → token table, the token
 * → id map, special flags and ids, and a kind-specific `impl`. Helpers here:
 * strict UTF-8 decoding, NFC (over libutf8proc), a string → id hash map, a
 * leftmost-longest matcher for special tokens and a growable id vector.
 */
#ifndef RLRT_TOKENIZER_INTERNAL_H
#define RLRT_TOKENIZER_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/text/tokenizer.h"

/* ---- UTF-8 and NFC ---- */
/* Marks a byte that is not part of a valid UTF-8 sequence (low 8 bits =
 * the byte); never a valid code point. */
#define RL_TOK_BAD_CP 0x80000000u

/* Decodes one code point at s[i] (i < n) strictly (no overlongs, surrogates
 * or values above U+10FFFF); returns its byte length (>= 1). An invalid byte
 * gives *cp = RL_TOK_BAD_CP | byte and length 1. */
int rl_tok_utf8_next(const unsigned char *s, size_t n, size_t i, uint32_t *cp);
/* Writes cp as UTF-8 into out (4 bytes room); returns the length. */
int rl_tok_utf8_put(uint32_t cp, char *out);
/* NFC of s[0..n) (libutf8proc's data; linear in n, however many combining
 * marks). Returns 0 with *out = NULL when the text is certainly unchanged
 * (only code points below U+0300), else a malloc'd *out of *out_n bytes.
 * Bad bytes pass through unchanged and block composition. */
int rl_tok_nfc(const char *s, size_t n, char **out, size_t *out_n);

/* ---- string → int32 map (keys are not copied) ---- */
typedef struct rl_tok_strmap {
    const char **keys;
    uint32_t *lens;
    int32_t *vals;
    size_t cap, count; /* cap is a power of two */
} rl_tok_strmap;

int rl_tok_strmap_init(rl_tok_strmap *m, size_t expected);
void rl_tok_strmap_free(rl_tok_strmap *m);
/* Inserts or overwrites; *old receives the previous value or -1. */
int rl_tok_strmap_put(rl_tok_strmap *m, const char *key, size_t len, int32_t val, int32_t *old);
int32_t rl_tok_strmap_get(const rl_tok_strmap *m, const char *key, size_t len);
uint64_t rl_tok_hash_bytes(const void *p, size_t n);

/* ---- leftmost-longest special-token matcher ---- */
typedef struct rl_tok_matcher {
    /* cand[first byte] = indices into str/len/id, longest first. */
    int32_t *cand_start; /* 257 entries */
    int32_t *cand;
    const char **str;
    uint32_t *len;
    int32_t *id;
    int count;
} rl_tok_matcher;

int rl_tok_matcher_build(rl_tok_matcher *m, const char *const *str, const int32_t *ids, int count);
void rl_tok_matcher_free(rl_tok_matcher *m);
/* Finds the leftmost match at or after pos (the longest there). Returns
 * true and sets [*ms, *me) and *id, or false. */
bool rl_tok_matcher_find(const rl_tok_matcher *m, const char *text, size_t len, size_t pos,
                         size_t *ms, size_t *me, int32_t *id);
/* Longest match starting exactly at pos: its length, or 0. */
size_t rl_tok_matcher_at(const rl_tok_matcher *m, const char *text, size_t len, size_t pos,
                         int32_t *id);

/* ---- growable id vector ---- */
typedef struct rl_tok_ivec { int32_t *v; int64_t n, cap; } rl_tok_ivec;
int rl_tok_ivec_push(rl_tok_ivec *v, int32_t x);
int rl_tok_ivec_append(rl_tok_ivec *v, const int32_t *x, int64_t n);

/* ---- the tokenizer ---- */
/* What a kind does its own way; the front (tokenizer_base.c) calls through
 * it, so the shared code never calls a kind by name. */
typedef struct rl_tok_ops {
    int (*encode)(const rl_tokenizer *t, const char *text, size_t len, rl_tok_ivec *out);
    int (*decode)(const rl_tokenizer *t, const int32_t *ids, int64_t n, int flags, char **text,
                  size_t *len);
    void (*free_impl)(void *impl);
    int (*save)(const rl_tokenizer *t, const char *path); /* NULL: not saved */
} rl_tok_ops;

struct rl_tokenizer {
    rl_tokenizer_kind kind;
    const rl_tok_ops *ops;
    int32_t special[4];
    int64_t vocab_size;
    char **tokens;       /* id → token (owned, NUL-terminated); NULL for holes */
    uint32_t *token_len;
    uint8_t *is_special;
    rl_tok_strmap token_map;
    void *impl;
};

/* Allocates the id tables for vocab_size ids (zeroed). NULL + message. */
rl_tokenizer *rl_tok_alloc(rl_tokenizer_kind kind, const rl_tok_ops *ops, int64_t vocab_size);
/* Sets token `id` to a copy of s[0..n) and indexes it (RL_EEXIST on a
 * different token already at id, or the same string at another id). */
int rl_tok_set_token(rl_tokenizer *t, int32_t id, const char *s, size_t n, const char *what);

/* The kinds, built from a parsed JSON root (tokenizer.c picks one). */
rl_tokenizer *rl_tok_char_from_json(void *json_root, const char *what);
rl_tokenizer *rl_tok_bpe_from_json(void *json_root, const char *what);

#endif
