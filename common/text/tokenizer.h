/* common/text/tokenizer.h — text <-> token ids for the NN engine.
 *
 * Purpose: one rl_tokenizer type with two kinds.
 *  * CHAR: a fixed vocabulary for built-in tasks (arithmetic with
 *    "<think>…</think>" and "\boxed{…}"): special tokens first (ids
 *    0..n_specials-1, in the order given), then one token per character of
 *    the charset (UTF-8 code points, in order). Special tokens are matched
 *    greedily (longest first) anywhere in the text.
 *  * BPE: byte-level BPE loaded from a Hugging Face tokenizer.json
 *    (model.type "BPE"; GPT-2 ByteLevel pre-tokenizer, or a Split regex
 *    such as Qwen2's or Llama-3's followed by ByteLevel(use_regex=false);
 *    optional NFC normalizer; ByteLevel decoder). Ids match HF `tokenizers`
 *    encode(text, add_special_tokens=False): added/special tokens are cut out
 *    of the raw text first (leftmost-longest), the rest is NFC-normalized if
 *    configured (libutf8proc), split by the regex (PCRE2, UTF + UCP, compiled
 *    once per tokenizer) and merged by rank.
 *
 * Invariants: ids are in [0, vocab_size). Encoding never adds BOS/EOS (the
 * tokenizer.json post_processor is ignored; callers add them explicitly).
 * Differences from HF, all outside what real GPT-2/Qwen2/Llama-3 files use:
 * added tokens are always matched on the raw text (HF matches
 * "normalized": true ones after normalization); added tokens with
 * single_word/lstrip/rstrip, BPE dropout, byte_fallback, subword
 * prefixes/suffixes and other normalizers/pre-tokenizers are rejected with
 * RL_EUNSUPPORTED. The regex runs on PCRE2, not HF's Oniguruma: a pattern
 * PCRE2 refuses fails with RL_EUNSUPPORTED (PCRE2's message and offset);
 * \s is Unicode White_Space as in Oniguruma (U+180E is not space).
 * Unicode properties are those of the system's PCRE2 and libutf8proc
 * (docs/decisions/tokenizer-libraries.md). Invalid UTF-8 input still
 * encodes with BPE: each byte that is not part of a valid sequence counts
 * as one punctuation-class character (the regex sees U+001A) and keeps its
 * byte value, so decode(encode(x)) == x for any bytes x. Decoding returns
 * the exact bytes (no U+FFFD replacement, unlike HF's lossy decode); added
 * tokens decode to their content as written.
 *
 * Thread safety: a tokenizer is immutable after construction except for
 * rl_tokenizer_set_special_id(); encode/decode may run concurrently on one
 * tokenizer (the BPE word cache is taken with a try-lock and skipped when
 * busy).
 *
 * Ownership: arrays returned through `ids` / `text` are malloc'd and owned
 * by the caller (free()). Strings returned by rl_tokenizer_id_to_token()
 * belong to the tokenizer.
 */
#ifndef RLRT_NN_TOKENIZER_H
#define RLRT_NN_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct rl_tokenizer rl_tokenizer;

typedef enum rl_tokenizer_kind {
    RL_TOKENIZER_CHAR = 1,
    RL_TOKENIZER_BPE = 2
} rl_tokenizer_kind;

typedef enum rl_tokenizer_special {
    RL_TOK_PAD = 0,
    RL_TOK_BOS = 1,
    RL_TOK_EOS = 2,
    RL_TOK_UNK = 3
} rl_tokenizer_special;

/* Character tokenizer description. `specials` get ids 0..n_specials-1;
 * charset characters follow in order (duplicates, or a character equal to a
 * one-character special, are an error). pad/bos/eos/unk are NULL or one of
 * the `specials` strings. With unk == NULL an unknown character is an error
 * (RL_ENOTFOUND naming it and its byte offset); otherwise it maps to unk. */
typedef struct rl_char_tokenizer_spec {
    const char *charset;
    const char *const *specials;
    int n_specials;
    const char *pad, *bos, *eos, *unk;
} rl_char_tokenizer_spec;

/* NULL + message on error. */
rl_tokenizer *rl_tokenizer_new_char(const rl_char_tokenizer_spec *spec);

/* Loads a Hugging Face tokenizer.json. Unsupported configurations fail with
 * RL_EUNSUPPORTED and a message naming the field (e.g.
 * "pre_tokenizer.type 'Metaspace' is not supported"); malformed files with
 * RL_EPROTO / RL_EINVAL naming the entry. NULL + message on error. */
rl_tokenizer *rl_tokenizer_load_hf(const char *path);
/* Same from an in-memory JSON document of `len` bytes. */
rl_tokenizer *rl_tokenizer_from_hf_json(const char *json, size_t len);

/* Loads a file written by rl_tokenizer_save() (a char tokenizer) or, if it
 * is not one, a Hugging Face tokenizer.json. */
rl_tokenizer *rl_tokenizer_load(const char *path);
/* Saves a CHAR tokenizer as JSON ({"type": "rlrt-char", ...}); BPE
 * tokenizers fail with RL_EUNSUPPORTED (keep the tokenizer.json). */
int rl_tokenizer_save(const rl_tokenizer *tok, const char *path);

/* The document rl_tokenizer_save() writes for a CHAR tokenizer, malloc'd
 * (NULL + RL_EUNSUPPORTED for BPE). */
char *rl_tokenizer_to_json(const rl_tokenizer *tok);

/* Hugging Face's special-token files beside a tokenizer.json, in `dir`:
 * tokenizer_config.json's bos_token, eos_token, pad_token and unk_token (a
 * string, or an added-token object {"content": ...}; null or absent: not
 * set there) replace the guessed ids; for EOS, BOS and PAD not named there,
 * generation_config.json's eos_token_id (an id, or a list whose first id is
 * taken), bos_token_id and pad_token_id. A tokenizer left without PAD pads
 * with EOS (as verl does). Absent files are no error; a token the tokenizer
 * does not have, an id outside it, bad JSON or a wrongly typed field is
 * RL_ENOTFOUND / RL_EPROTO naming the file and the key. */
int rl_tokenizer_apply_hf_config(rl_tokenizer *tok, const char *dir);

void rl_tokenizer_free(rl_tokenizer *tok);

rl_tokenizer_kind rl_tokenizer_kind_of(const rl_tokenizer *tok);
/* One more than the largest id (vocab + added tokens). */
int64_t rl_tokenizer_vocab_size(const rl_tokenizer *tok);

/* -1 when the tokenizer has none. For BPE the defaults are guessed from the
 * added tokens ("<|endoftext|>" → EOS, "<|begin_of_text|>"/"<s>" → BOS, …);
 * set them from tokenizer_config.json with rl_tokenizer_set_special_id(). */
int32_t rl_tokenizer_special_id(const rl_tokenizer *tok, rl_tokenizer_special which);
/* id = -1 clears. RL_ERANGE if id is outside the vocabulary. */
int rl_tokenizer_set_special_id(rl_tokenizer *tok, rl_tokenizer_special which, int32_t id);

/* The id of a token string as stored in the vocabulary (for byte-level BPE
 * that is the mapped form, e.g. "Ġthe"), or -1 if absent. */
int32_t rl_tokenizer_token_to_id(const rl_tokenizer *tok, const char *token);
/* The token string for id (mapped form for BPE), NULL if out of range. */
const char *rl_tokenizer_id_to_token(const rl_tokenizer *tok, int32_t id);
/* True for special tokens (char specials; BPE added tokens marked special). */
bool rl_tokenizer_is_special(const rl_tokenizer *tok, int32_t id);

/* Encodes text[0..len) into a new array *ids of *n ids (caller frees; an
 * empty text gives *n = 0 and a non-NULL *ids). */
int rl_tokenizer_encode(const rl_tokenizer *tok, const char *text, size_t len,
                        int32_t **ids, int64_t *n);
/* Same into a caller buffer of `cap` ids. *n is always set to the number of
 * ids the text needs; RL_ERANGE if that exceeds cap (buffer contents then
 * unspecified). */
int rl_tokenizer_encode_into(const rl_tokenizer *tok, const char *text, size_t len,
                             int32_t *ids, int64_t cap, int64_t *n);

enum { RL_TOKENIZER_SKIP_SPECIAL = 1 };

/* Decodes ids[0..n) into a new NUL-terminated buffer *text (caller frees);
 * *len (may be NULL) receives its length without the NUL (the bytes may
 * contain NULs). Special tokens are written out. RL_ERANGE names the first
 * id outside the vocabulary. */
int rl_tokenizer_decode(const rl_tokenizer *tok, const int32_t *ids, int64_t n,
                        char **text, size_t *len);
/* flags: RL_TOKENIZER_SKIP_SPECIAL drops special tokens (like HF's
 * skip_special_tokens=True). */
int rl_tokenizer_decode_opts(const rl_tokenizer *tok, const int32_t *ids, int64_t n,
                             int flags, char **text, size_t *len);

#ifdef __cplusplus
}
#endif
#endif
