/* test_nn_tokenizer.c — char tokenizer (hand-derived ids) and byte-level BPE
 * against ids produced by Hugging Face `tokenizers`
 * (tests/reference/gen_nn_tokenizer.py → tests/golden/nn_tok/). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <unistd.h>
#include <cmocka.h>
#include <jansson.h>

#include "rlrt/error.h"
#include "common/text/tokenizer.h"
#include "tests/common/golden.h"
#include "common/text/tokenizer_internal.h"

/* ---------------------------------------------------------------------
 * char tokenizer
 * --------------------------------------------------------------------- */

static const char *const k_specials[] = {"<pad>", "<bos>", "<eos>", "<think>", "</think>",
                                         "\\boxed{"};
/* ids: specials 0..5, then charset characters 6.. in order */
static const char k_charset[] = "0123456789+-*=(){} .abcxyz\xc3\xa9"; /* é last */

static rl_tokenizer *s_char_tok(const char *unk)
{
    rl_char_tokenizer_spec spec = {k_charset, k_specials, 6, "<pad>", "<bos>", "<eos>", unk};
    rl_tokenizer *t = rl_tokenizer_new_char(&spec);
    if (!t)
        fail_msg("rl_tokenizer_new_char: %s", rl_error_message());
    return t;
}

static int32_t s_cid(char c)
{
    const char *p = strchr(k_charset, c);
    assert_non_null(p);
    return (int32_t)(6 + (p - k_charset));
}

static void test_char_encode_specials_and_round_trip(void **state)
{
    (void)state;
    rl_tokenizer *t = s_char_tok(NULL);
    assert_int_equal(rl_tokenizer_kind_of(t), RL_TOKENIZER_CHAR);
    assert_int_equal(rl_tokenizer_vocab_size(t), 6 + 27);
    assert_int_equal(rl_tokenizer_special_id(t, RL_TOK_PAD), 0);
    assert_int_equal(rl_tokenizer_special_id(t, RL_TOK_BOS), 1);
    assert_int_equal(rl_tokenizer_special_id(t, RL_TOK_EOS), 2);
    assert_int_equal(rl_tokenizer_special_id(t, RL_TOK_UNK), -1);

    const char *text = "<bos>12+3=<think>x</think>\\boxed{15}<eos>";
    int32_t want[] = {1, s_cid('1'), s_cid('2'), s_cid('+'), s_cid('3'), s_cid('='), 3,
                      s_cid('x'), 4, 5, s_cid('1'), s_cid('5'), s_cid('}'), 2};
    int32_t *ids = NULL;
    int64_t n = 0;
    assert_int_equal(rl_tokenizer_encode(t, text, strlen(text), &ids, &n), RL_OK);
    assert_int_equal(n, (int64_t)(sizeof want / sizeof want[0]));
    for (int64_t i = 0; i < n; i++)
        assert_int_equal(ids[i], want[i]);
    char *back = NULL;
    size_t blen = 0;
    assert_int_equal(rl_tokenizer_decode(t, ids, n, &back, &blen), RL_OK);
    assert_string_equal(back, text);
    assert_int_equal(blen, strlen(text));
    free(back);
    assert_int_equal(rl_tokenizer_decode_opts(t, ids, n, RL_TOKENIZER_SKIP_SPECIAL, &back, NULL),
                     RL_OK);
    assert_string_equal(back, "12+3=x15}");
    free(back);
    free(ids);

    /* a two-byte character is one token */
    const char *t2 = "\xc3\xa9 (";
    assert_int_equal(rl_tokenizer_encode(t, t2, 4, &ids, &n), RL_OK);
    assert_int_equal(n, 3);
    assert_int_equal(ids[0], 6 + 26);
    assert_int_equal(ids[1], s_cid(' '));
    assert_int_equal(ids[2], s_cid('('));
    free(ids);
    rl_tokenizer_free(t);
}

static void test_char_longest_special_wins(void **state)
{
    (void)state;
    const char *const sp[] = {"<a>", "<ab>", "<"};
    rl_char_tokenizer_spec spec = {"ab>", sp, 3, NULL, NULL, NULL, NULL};
    rl_tokenizer *t = rl_tokenizer_new_char(&spec);
    assert_non_null(t);
    int32_t *ids;
    int64_t n;
    assert_int_equal(rl_tokenizer_encode(t, "<ab><a><b", 9, &ids, &n), RL_OK);
    int32_t want[] = {1, 0, 2, 4};
    assert_int_equal(n, 4);
    for (int i = 0; i < 4; i++)
        assert_int_equal(ids[i], want[i]);
    free(ids);
    rl_tokenizer_free(t);
}

static void test_char_unknown_character(void **state)
{
    (void)state;
    rl_tokenizer *t = s_char_tok(NULL);
    int32_t *ids = (int32_t *)1;
    int64_t n = 7;
    assert_int_equal(rl_tokenizer_encode(t, "12%", 3, &ids, &n), RL_ENOTFOUND);
    assert_string_equal(rl_error_message(), "char tokenizer: character '%' (U+0025) at byte "
                                            "offset 2 is not in the vocabulary");
    assert_null(ids);
    assert_int_equal(n, 0);
    assert_int_equal(rl_tokenizer_encode(t, "1\xff", 2, &ids, &n), RL_ENOTFOUND);
    assert_string_equal(rl_error_message(), "char tokenizer: invalid UTF-8 byte 0xFF at byte "
                                            "offset 1 is not in the vocabulary");
    assert_int_equal(rl_tokenizer_encode(t, "\xe4\xb8\xad", 3, &ids, &n), RL_ENOTFOUND);
    assert_non_null(strstr(rl_error_message(), "(U+4E2D) at byte offset 0"));
    rl_tokenizer_free(t);

    /* with an unk token configured, unknown characters map to it */
    const char *const sp[] = {"<pad>", "<unk>"};
    rl_char_tokenizer_spec spec = {"ab", sp, 2, "<pad>", NULL, NULL, "<unk>"};
    t = rl_tokenizer_new_char(&spec);
    assert_non_null(t);
    assert_int_equal(rl_tokenizer_encode(t, "a?b", 3, &ids, &n), RL_OK);
    assert_int_equal(n, 3);
    assert_int_equal(ids[0], 2);
    assert_int_equal(ids[1], 1);
    assert_int_equal(ids[2], 3);
    free(ids);
    rl_tokenizer_free(t);
}

static void test_char_bad_specs(void **state)
{
    (void)state;
    const char *const sp[] = {"<pad>"};
    rl_char_tokenizer_spec dup = {"abca", sp, 1, NULL, NULL, NULL, NULL};
    assert_null(rl_tokenizer_new_char(&dup));
    assert_int_equal(rl_error_code(), RL_EEXIST);
    assert_non_null(strstr(rl_error_message(), "character 'a' (U+0061) at byte offset 3 is "
                                               "already token 1"));
    rl_char_tokenizer_spec nopad = {"ab", sp, 1, "<PAD>", NULL, NULL, NULL};
    assert_null(rl_tokenizer_new_char(&nopad));
    assert_non_null(strstr(rl_error_message(), "pad token '<PAD>'"));
    rl_char_tokenizer_spec badutf = {"a\xff", sp, 1, NULL, NULL, NULL, NULL};
    assert_null(rl_tokenizer_new_char(&badutf));
    assert_non_null(strstr(rl_error_message(), "invalid UTF-8 byte 0xFF at offset 1"));
    const char *const sp2[] = {"<x>", "<x>"};
    rl_char_tokenizer_spec dupsp = {"ab", sp2, 2, NULL, NULL, NULL, NULL};
    assert_null(rl_tokenizer_new_char(&dupsp));
    assert_non_null(strstr(rl_error_message(), "token '<x>' has two ids, 0 and 1"));

    rl_tokenizer *t = s_char_tok(NULL);
    int32_t bad[] = {1, 999};
    char *txt;
    assert_int_equal(rl_tokenizer_decode(t, bad, 2, &txt, NULL), RL_ERANGE);
    assert_non_null(strstr(rl_error_message(), "ids[1] = 999 is not a token"));
    rl_tokenizer_free(t);
}

static void test_char_save_load(void **state)
{
    (void)state;
    rl_tokenizer *t = s_char_tok(NULL);
    char path[] = "/tmp/rl_tok_char_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    assert_int_equal(rl_tokenizer_save(t, path), RL_OK);
    rl_tokenizer *u = rl_tokenizer_load(path);
    if (!u)
        fail_msg("load: %s", rl_error_message());
    assert_int_equal(rl_tokenizer_kind_of(u), RL_TOKENIZER_CHAR);
    assert_int_equal(rl_tokenizer_vocab_size(u), rl_tokenizer_vocab_size(t));
    for (int k = 0; k < 4; k++)
        assert_int_equal(rl_tokenizer_special_id(u, (rl_tokenizer_special)k),
                         rl_tokenizer_special_id(t, (rl_tokenizer_special)k));
    for (int32_t id = 0; id < rl_tokenizer_vocab_size(t); id++)
        assert_string_equal(rl_tokenizer_id_to_token(u, id), rl_tokenizer_id_to_token(t, id));
    const char *text = "<think>(1+2)*3 = 9.\xc3\xa9</think>";
    int32_t *a, *b;
    int64_t na, nb;
    assert_int_equal(rl_tokenizer_encode(t, text, strlen(text), &a, &na), RL_OK);
    assert_int_equal(rl_tokenizer_encode(u, text, strlen(text), &b, &nb), RL_OK);
    assert_int_equal(na, nb);
    assert_memory_equal(a, b, (size_t)na * sizeof *a);
    free(a);
    free(b);
    rl_tokenizer_free(u);
    /* a BPE tokenizer is not saved; the char file is not an HF file */
    assert_null(rl_tokenizer_load_hf(path));
    assert_non_null(strstr(rl_error_message(), "missing 'model' object"));
    unlink(path);
    rl_tokenizer_free(t);
}

/* ---------------------------------------------------------------------
 * BPE against HF tokenizers
 * --------------------------------------------------------------------- */

static void s_show_ids(const rl_tokenizer *t, const char *label, const int32_t *ids, int64_t n)
{
    fprintf(stderr, "    %s (%lld):", label, (long long)n);
    for (int64_t i = 0; i < n && i < 64; i++) {
        const char *tk = rl_tokenizer_id_to_token(t, ids[i]);
        fprintf(stderr, " %d'%s'", ids[i], tk ? tk : "?");
    }
    fprintf(stderr, "\n");
}

/* Compares every text of golden `name`: ids exactly, decode bytes exactly,
 * and (no normalizer) decode(encode(x)) == x. Returns the mismatch count. */
static int s_check_golden(const char *name, bool round_trip_exact)
{
    char gpath[256];
    snprintf(gpath, sizeof gpath, "tests/golden/nn_tok/%s.safetensors", name);
    rl_golden *g = rl_golden_load(gpath);
    if (!g)
        fail_msg("%s: %s", gpath, rl_error_message());
    const char *jpath = rl_golden_meta(g, "tokenizer");
    assert_non_null(jpath);
    rl_tokenizer *t = rl_tokenizer_load_hf(jpath);
    if (!t)
        fail_msg("%s: %s", jpath, rl_error_message());
    assert_int_equal(rl_tokenizer_kind_of(t), RL_TOKENIZER_BPE);
    assert_int_equal(rl_tokenizer_vocab_size(t), atoi(rl_golden_meta(g, "vocab_size")));
    const rl_golden_array *text = rl_golden_get(g, "text");
    const rl_golden_array *dec = rl_golden_get(g, "decoded");
    const rl_golden_array *gids = rl_golden_get(g, "ids");
    assert_non_null(text);
    assert_non_null(dec);
    assert_non_null(gids);
    int64_t ntext, nid, ndec;
    int64_t *toff = rl_golden_i64(g, "text_offsets", &ntext);
    int64_t *ioff = rl_golden_i64(g, "id_offsets", &nid);
    int64_t *doff = rl_golden_i64(g, "decoded_offsets", &ndec);
    int64_t *want_all = rl_golden_i64(g, "ids", &nid);
    assert_int_equal(ntext, atoi(rl_golden_meta(g, "n_texts")) + 1);
    const char *tb = text->data, *db = dec->data;
    int bad = 0;
    for (int64_t k = 0; k + 1 < ntext; k++) {
        const char *s = tb + toff[k];
        size_t len = (size_t)(toff[k + 1] - toff[k]);
        const int64_t *want = want_all + ioff[k];
        int64_t nwant = ioff[k + 1] - ioff[k];
        int32_t *ids = NULL;
        int64_t n = 0;
        if (rl_tokenizer_encode(t, s, len, &ids, &n) != RL_OK)
            fail_msg("%s text %lld: %s", name, (long long)k, rl_error_message());
        bool same = n == nwant;
        for (int64_t i = 0; same && i < n; i++)
            same = ids[i] == want[i];
        if (!same) {
            bad++;
            fprintf(stderr, "  %s text %lld MISMATCH: \"%.*s\"\n", name, (long long)k,
                    len > 300 ? 300 : (int)len, s);
            s_show_ids(t, "got ", ids, n);
            int32_t w32[64];
            for (int64_t i = 0; i < nwant && i < 64; i++)
                w32[i] = (int32_t)want[i];
            s_show_ids(t, "want", w32, nwant);
        }
        char *back = NULL;
        size_t blen = 0;
        assert_int_equal(rl_tokenizer_decode(t, ids, n, &back, &blen), RL_OK);
        size_t dlen = (size_t)(doff[k + 1] - doff[k]);
        if (blen != dlen || memcmp(back, db + doff[k], dlen) != 0) {
            bad++;
            fprintf(stderr, "  %s text %lld decode MISMATCH: got \"%s\"\n", name, (long long)k, back);
        }
        if (round_trip_exact && (blen != len || memcmp(back, s, len) != 0)) {
            bad++;
            fprintf(stderr, "  %s text %lld round trip changed the text\n", name, (long long)k);
        }
        free(back);
        /* the caller-buffer form gives the same ids */
        int32_t *buf = malloc(((size_t)n + 1) * sizeof *buf);
        int64_t n2 = -1;
        assert_int_equal(rl_tokenizer_encode_into(t, s, len, buf, n, &n2), RL_OK);
        assert_int_equal(n2, n);
        if (n)
            assert_memory_equal(buf, ids, (size_t)n * sizeof *ids);
        free(buf);
        free(ids);
    }
    free(toff);
    free(ioff);
    free(doff);
    free(want_all);
    rl_tokenizer_free(t);
    rl_golden_free(g);
    return bad;
}

static void test_bpe_gpt2_matches_hf(void **state)
{
    (void)state;
    assert_int_equal(s_check_golden("gpt2", true), 0);
}

static void test_bpe_gpt2_prefix_space_matches_hf(void **state)
{
    (void)state;
    assert_int_equal(s_check_golden("gpt2_prefix", false), 0);
}

static void test_bpe_qwen2_matches_hf(void **state)
{
    (void)state;
    assert_int_equal(s_check_golden("qwen2", false), 0);
}

static void test_bpe_llama3_matches_hf(void **state)
{
    (void)state;
    assert_int_equal(s_check_golden("llama3", true), 0);
}

static rl_tokenizer *s_gpt2(void)
{
    rl_tokenizer *t = rl_tokenizer_load_hf("tests/golden/nn_tok/gpt2.json");
    if (!t)
        fail_msg("gpt2.json: %s", rl_error_message());
    return t;
}

static void test_bpe_specials_and_api(void **state)
{
    (void)state;
    rl_tokenizer *t = s_gpt2();
    /* HF's trainer puts the special tokens first, the added token last */
    assert_int_equal(rl_tokenizer_token_to_id(t, "<|endoftext|>"), 0);
    assert_int_equal(rl_tokenizer_token_to_id(t, "<think>"), 1);
    assert_int_equal(rl_tokenizer_token_to_id(t, "\\boxed{"), rl_tokenizer_vocab_size(t) - 1);
    assert_string_equal(rl_tokenizer_id_to_token(t, 2), "</think>");
    assert_null(rl_tokenizer_id_to_token(t, (int32_t)rl_tokenizer_vocab_size(t)));
    assert_int_equal(rl_tokenizer_token_to_id(t, "no such token"), -1);
    assert_int_equal(rl_tokenizer_special_id(t, RL_TOK_EOS), 0);
    assert_int_equal(rl_tokenizer_special_id(t, RL_TOK_BOS), -1);
    assert_true(rl_tokenizer_is_special(t, 0));
    assert_false(rl_tokenizer_is_special(t, (int32_t)rl_tokenizer_vocab_size(t) - 1));
    assert_int_equal(rl_tokenizer_set_special_id(t, RL_TOK_BOS, 1), RL_OK);
    assert_int_equal(rl_tokenizer_special_id(t, RL_TOK_BOS), 1);
    assert_int_equal(rl_tokenizer_set_special_id(t, RL_TOK_PAD, 100000), RL_ERANGE);

    /* byte-level: a lone 0xFF byte is the single token for byte 0xFF, which
     * the GPT-2 byte map writes as U+00FF 'ÿ'; byte 0x00 is U+0100 'Ā'. */
    int32_t *ids;
    int64_t n;
    assert_int_equal(rl_tokenizer_encode(t, "\xff", 1, &ids, &n), RL_OK);
    assert_int_equal(n, 1);
    assert_int_equal(ids[0], rl_tokenizer_token_to_id(t, "\xc3\xbf"));
    free(ids);
    assert_int_equal(rl_tokenizer_encode(t, "\0", 1, &ids, &n), RL_OK);
    assert_int_equal(n, 1);
    assert_int_equal(ids[0], rl_tokenizer_token_to_id(t, "\xc4\x80"));
    char *txt;
    size_t tl;
    assert_int_equal(rl_tokenizer_decode(t, ids, n, &txt, &tl), RL_OK);
    assert_int_equal(tl, 1);
    assert_int_equal(txt[0], 0);
    free(txt);
    free(ids);

    /* skip_special drops specials but keeps the non-special added token */
    const char *s = "<think>7</think>\\boxed{7}<|endoftext|>";
    assert_int_equal(rl_tokenizer_encode(t, s, strlen(s), &ids, &n), RL_OK);
    assert_int_equal(ids[0], 1);
    assert_int_equal(ids[n - 1], 0);
    assert_int_equal(rl_tokenizer_decode_opts(t, ids, n, RL_TOKENIZER_SKIP_SPECIAL, &txt, NULL),
                     RL_OK);
    assert_string_equal(txt, "7\\boxed{7}");
    free(txt);
    int32_t small[2];
    int64_t need = 0;
    assert_int_equal(rl_tokenizer_encode_into(t, s, strlen(s), small, 2, &need), RL_ERANGE);
    assert_int_equal(need, n);
    free(ids);

    assert_int_equal(rl_tokenizer_save(t, "/tmp/never_written.json"), RL_EUNSUPPORTED);
    rl_tokenizer_free(t);
}

/* A long text with every case repeated: ids equal the concatenation of the
 * per-piece ids when pieces are separated by a special token (exercises the
 * word cache across many words). */
static void test_bpe_cache_consistency(void **state)
{
    (void)state;
    rl_tokenizer *t = s_gpt2();
    const char *piece = "It's 12345 caf\xc3\xa9 \xf0\x9f\x98\x80  ok?\n";
    int32_t *one;
    int64_t n1;
    assert_int_equal(rl_tokenizer_encode(t, piece, strlen(piece), &one, &n1), RL_OK);
    size_t pl = strlen(piece), sl = strlen("<|endoftext|>");
    size_t total = 200 * (pl + sl);
    char *big = malloc(total);
    for (int r = 0; r < 200; r++) {
        memcpy(big + r * (pl + sl), piece, pl);
        memcpy(big + r * (pl + sl) + pl, "<|endoftext|>", sl);
    }
    int32_t *all;
    int64_t na;
    assert_int_equal(rl_tokenizer_encode(t, big, total, &all, &na), RL_OK);
    assert_int_equal(na, 200 * (n1 + 1));
    for (int r = 0; r < 200; r++) {
        assert_memory_equal(all + r * (n1 + 1), one, (size_t)n1 * sizeof *one);
        assert_int_equal(all[r * (n1 + 1) + n1], 0);
    }
    free(one);
    free(all);
    free(big);
    rl_tokenizer_free(t);
}

/* Concurrent encodes on one tokenizer (shared word cache under a try-lock)
 * give the serial ids. */
typedef struct s_thread_job {
    const rl_tokenizer *t;
    const char *text;
    size_t len;
    const int32_t *want;
    int64_t nwant;
    int bad;
} s_thread_job;

static void *s_thread_main(void *arg)
{
    s_thread_job *j = arg;
    for (int r = 0; r < 20; r++) {
        int32_t *ids;
        int64_t n;
        if (rl_tokenizer_encode(j->t, j->text, j->len, &ids, &n) != RL_OK || n != j->nwant ||
            memcmp(ids, j->want, (size_t)n * sizeof *ids) != 0)
            j->bad++;
        else
            free(ids);
    }
    return NULL;
}

static void test_bpe_concurrent_encode(void **state)
{
    (void)state;
    rl_golden *g = rl_golden_load("tests/golden/nn_tok/qwen2.safetensors");
    assert_non_null(g);
    rl_tokenizer *t = rl_tokenizer_load_hf("tests/golden/nn_tok/qwen2.json");
    assert_non_null(t);
    const rl_golden_array *text = rl_golden_get(g, "text");
    int64_t nt;
    int64_t *toff = rl_golden_i64(g, "text_offsets", &nt);
    int32_t *want;
    int64_t nwant;
    const char *s = text->data;
    size_t len = (size_t)toff[nt - 1];
    assert_int_equal(rl_tokenizer_encode(t, s, len, &want, &nwant), RL_OK);
    pthread_t th[4];
    s_thread_job jobs[4];
    for (int i = 0; i < 4; i++) {
        jobs[i] = (s_thread_job){t, s, len, want, nwant, 0};
        assert_int_equal(pthread_create(&th[i], NULL, s_thread_main, &jobs[i]), 0);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        assert_int_equal(jobs[i].bad, 0);
    }
    free(want);
    free(toff);
    rl_tokenizer_free(t);
    rl_golden_free(g);
}

/* ---------------------------------------------------------------------
 * malformed tokenizer.json
 * --------------------------------------------------------------------- */

static json_t *s_base(void)
{
    json_error_t je;
    json_t *j = json_load_file("tests/golden/nn_tok/gpt2.json", 0, &je);
    if (!j)
        fail_msg("gpt2.json: %s", je.text);
    return j;
}

/* Loads the edited document; expects failure with `code` and `needle` in
 * the message. */
static void s_expect_error(json_t *j, int code, const char *needle)
{
    char *s = json_dumps(j, 0);
    assert_non_null(s);
    rl_tokenizer *t = rl_tokenizer_from_hf_json(s, strlen(s));
    free(s);
    json_decref(j);
    if (t) {
        rl_tokenizer_free(t);
        fail_msg("expected an error containing \"%s\", load succeeded", needle);
    }
    if (!strstr(rl_error_message(), needle) || rl_error_code() != code)
        fail_msg("expected %s with \"%s\", got %s: %s", rl_status_name(code), needle,
                 rl_status_name(rl_error_code()), rl_error_message());
}

/* qwen2.json, its Split regex replaced by `re` unless NULL. */
static json_t *s_qwen2_split(const char *re)
{
    json_error_t je;
    json_t *j = json_load_file("tests/golden/nn_tok/qwen2.json", 0, &je);
    if (!j)
        fail_msg("qwen2.json: %s", je.text);
    if (re)
        json_object_set_new(json_array_get(json_object_get(json_object_get(j, "pre_tokenizer"),
                                                           "pretokenizers"), 0),
                            "pattern", json_pack("{ss}", "Regex", re));
    return j;
}

static rl_tokenizer *s_from_json(json_t *j)
{
    char *s = json_dumps(j, 0);
    json_decref(j);
    rl_tokenizer *t = rl_tokenizer_from_hf_json(s, strlen(s));
    free(s);
    if (!t)
        fail_msg("%s", rl_error_message());
    return t;
}

static void s_expect_ids(const rl_tokenizer *t, const char *text, const int32_t *want, int64_t n)
{
    int32_t *ids;
    int64_t k;
    assert_int_equal(rl_tokenizer_encode(t, text, strlen(text), &ids, &k), RL_OK);
    if (k != n || memcmp(ids, want, (size_t)n * sizeof *ids) != 0) {
        s_show_ids(t, "got ", ids, k);
        s_show_ids(t, "want", want, n);
        fail_msg("ids of \"%s\" differ", text);
    }
    char *back;
    size_t bl;
    assert_int_equal(rl_tokenizer_decode(t, ids, k, &back, &bl), RL_OK);
    assert_int_equal(bl, strlen(text));
    assert_memory_equal(back, text, bl);
    free(back);
    free(ids);
}

/* Any regex PCRE2 compiles splits: each match and each stretch between
 * matches is a word, so the ids are those of the pieces one by one; a
 * pattern that matches the empty string ends too. */
static void test_bpe_any_split_regex(void **state)
{
    (void)state;
    rl_tokenizer *t = s_from_json(s_qwen2_split("\\p{L}+"));
    const char *const piece[] = {"ab", ", ", "cd", "!"};
    int32_t want[64];
    int64_t nw = 0;
    for (int p = 0; p < 4; p++) {
        int32_t *ids;
        int64_t k;
        assert_int_equal(rl_tokenizer_encode(t, piece[p], strlen(piece[p]), &ids, &k), RL_OK);
        memcpy(want + nw, ids, (size_t)k * sizeof *ids);
        nw += k;
        free(ids);
    }
    s_expect_ids(t, "ab, cd!", want, nw);
    rl_tokenizer_free(t);
    t = s_from_json(s_qwen2_split("\\s*"));
    int32_t *ids;
    int64_t k;
    assert_int_equal(rl_tokenizer_encode(t, "a  b\xc3\xa9 ", 7, &ids, &k), RL_OK);
    free(ids);
    rl_tokenizer_free(t);
}

/* The mapped (byte-level) form of bytes w[0..m) into out. */
static size_t s_mapped(const unsigned char *w, size_t m, char *out)
{
    size_t o = 0;
    for (size_t i = 0; i < m; i++) {
        unsigned b = w[i], cp = b, skipped = 0;
        for (unsigned c = 0; c <= b; c++)
            if (!((c >= 33 && c <= 126) || (c >= 161 && c <= 172) || c >= 174))
                skipped++;
        if (!((b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174))
            cp = 256 + skipped - 1;
        o += (size_t)rl_tok_utf8_put(cp, out + o);
    }
    out[o] = 0;
    return o;
}

/* Adds to tokenizer.json j the merges, ranked first, that join the bytes
 * of `word` left to right into one token; returns that token's id. */
static int32_t s_add_word(json_t *j, const char *word)
{
    json_t *model = json_object_get(j, "model");
    json_t *vocab = json_object_get(model, "vocab"), *merges = json_object_get(model, "merges");
    const unsigned char *w = (const unsigned char *)word;
    size_t m = strlen(word);
    char left[64], right[8], whole[64];
    int32_t id = -1;
    for (size_t k = 2; k <= m; k++) {
        s_mapped(w, k - 1, left);
        s_mapped(w + k - 1, 1, right);
        s_mapped(w, k, whole);
        json_t *have = json_object_get(vocab, whole);
        id = have ? (int32_t)json_integer_value(have) : 5000 + (int32_t)json_object_size(vocab);
        if (!have)
            json_object_set_new(vocab, whole, json_integer(id));
        json_array_insert_new(merges, k - 2, json_pack("[ss]", left, right));
    }
    return id;
}

/* Hostile text: a byte that is not UTF-8 is one punctuation-class
 * character, and U+180E MONGOLIAN VOWEL SEPARATOR is not white space (in
 * Oniguruma, hence HF; PCRE2's \s has it): "a", then "\xff!" or
 * "U+180E !" as one word each, which the added merges make one token. */
static void test_bpe_hostile_text(void **state)
{
    (void)state;
    json_t *j = s_qwen2_split(NULL);
    int32_t bad = s_add_word(j, "\xff!"), mvs = s_add_word(j, "\xe1\xa0\x8e!");
    rl_tokenizer *t = s_from_json(j);
    int32_t a = rl_tokenizer_token_to_id(t, "a");
    s_expect_ids(t, "a\xff!", (int32_t[]){a, bad}, 2);
    s_expect_ids(t, "a\xe1\xa0\x8e!", (int32_t[]){a, mvs}, 2);
    rl_tokenizer_free(t);
}

static void test_bpe_malformed(void **state)
{
    (void)state;
    json_t *j, *m;

    j = s_base();
    json_object_del(j, "model");
    s_expect_error(j, RL_EPROTO, "tokenizer.json: missing 'model' object");

    j = s_base();
    json_object_set_new(json_object_get(j, "model"), "type", json_string("WordPiece"));
    s_expect_error(j, RL_EUNSUPPORTED, "model.type 'WordPiece' is not supported (only 'BPE')");

    j = s_base();
    json_array_insert_new(json_object_get(json_object_get(j, "model"), "merges"), 0,
                          json_string("zzqq \xc4\xa0"));
    s_expect_error(j, RL_EPROTO, "model.merges[0]: token 'zzqq' is not in model.vocab");

    /* both halves exist but their concatenation does not */
    rl_tokenizer *t = s_gpt2();
    assert_true(rl_tokenizer_token_to_id(t, "Q") >= 0);
    assert_int_equal(rl_tokenizer_token_to_id(t, "QZ"), -1);
    rl_tokenizer_free(t);
    j = s_base();
    m = json_pack("[ss]", "Q", "Z"); /* list form */
    json_array_append_new(json_object_get(json_object_get(j, "model"), "merges"), m);
    s_expect_error(j, RL_EPROTO, "]: token 'QZ' is not in model.vocab");

    j = s_base();
    json_array_insert_new(json_object_get(json_object_get(j, "model"), "merges"), 0,
                          json_string("abc"));
    s_expect_error(j, RL_EPROTO, "model.merges[0] 'abc' is not two tokens separated by one space");

    j = s_base();
    json_array_insert_new(json_object_get(json_object_get(j, "model"), "merges"), 0,
                          json_integer(3));
    s_expect_error(j, RL_EPROTO, "model.merges[0] must be \"a b\" or [\"a\", \"b\"]");

    j = s_base();
    json_object_set_new(json_object_get(json_object_get(j, "model"), "vocab"), "hello",
                        json_integer(-5));
    s_expect_error(j, RL_EPROTO, "model.vocab['hello'] = out-of-range integer is not an id");

    j = s_base();
    json_object_set_new(json_object_get(json_object_get(j, "model"), "vocab"), "hello",
                        json_string("7"));
    s_expect_error(j, RL_EPROTO, "model.vocab['hello'] = non-integer is not an id");

    j = s_base();
    json_object_set_new(json_object_get(json_object_get(j, "model"), "vocab"), "hello",
                        json_integer(7));
    s_expect_error(j, RL_EEXIST, "model.vocab: ");

    j = s_base();
    json_object_set_new(json_object_get(j, "model"), "vocab", json_array());
    s_expect_error(j, RL_EPROTO, "model.vocab must be an object");

    j = s_base();
    json_object_set_new(json_object_get(j, "pre_tokenizer"), "type", json_string("Metaspace"));
    s_expect_error(j, RL_EUNSUPPORTED, "pre_tokenizer.type 'Metaspace' is not supported");

    j = s_base();
    json_object_set_new(j, "normalizer", json_pack("{ss}", "type", "Lowercase"));
    s_expect_error(j, RL_EUNSUPPORTED, "normalizer.type 'Lowercase' is not supported");

    j = s_base();
    json_object_set_new(j, "decoder", json_null());
    s_expect_error(j, RL_EUNSUPPORTED, "decoder.type 'null' is not supported (ByteLevel)");

    j = s_base();
    json_object_set_new(json_object_get(j, "model"), "byte_fallback", json_true());
    s_expect_error(j, RL_EUNSUPPORTED, "model.byte_fallback = true is not supported");

    j = s_base();
    json_object_set_new(json_array_get(json_object_get(j, "added_tokens"), 1), "lstrip",
                        json_true());
    s_expect_error(j, RL_EUNSUPPORTED, "added_tokens[1].lstrip = true is not supported ('<think>')");

    j = s_base();
    json_object_set_new(json_array_get(json_object_get(j, "added_tokens"), 1), "content",
                        json_string("<thonk>"));
    s_expect_error(j, RL_EEXIST, "added_tokens[1]: id 1 already used by token '<think>'");

    j = s_qwen2_split("(\\p{L}+");
    s_expect_error(j, RL_EUNSUPPORTED, "pre_tokenizer.pretokenizers[0].pattern.Regex '(\\p{L}+': "
                                       "PCRE2 cannot compile it: missing closing parenthesis (at "
                                       "offset 7)");

    assert_null(rl_tokenizer_from_hf_json("{\"model\": ", 10));
    assert_int_equal(rl_error_code(), RL_EPROTO);
    assert_non_null(strstr(rl_error_message(), "invalid JSON"));
    assert_null(rl_tokenizer_load_hf("tests/golden/nn_tok/does_not_exist.json"));
    assert_int_equal(rl_error_code(), RL_EIO);
    assert_non_null(strstr(rl_error_message(), "cannot open 'tests/golden/nn_tok/does_not_exist.json'"));
}

/* A byte with no token (here byte 0x00, written U+0100 'Ā') is dropped
 * without unk_token, becomes unk with one, and runs of it fuse into one unk
 * with fuse_unk. Same ids as HF tokenizers 0.15.2 on the edited file
 * ([67, 68], [67, 0, 0, 68], [67, 0, 68]), checked by hand once. */
static rl_tokenizer *s_without_nul(const char *unk, bool fuse)
{
    json_t *j = s_base();
    json_t *m = json_object_get(j, "model");
    json_object_del(json_object_get(m, "vocab"), "\xc4\x80");
    json_object_set_new(m, "unk_token", unk ? json_string(unk) : json_null());
    json_object_set_new(m, "fuse_unk", json_boolean(fuse));
    return s_from_json(j);
}

static void test_bpe_unknown_bytes(void **state)
{
    (void)state;
    int32_t *ids;
    int64_t n;
    rl_tokenizer *t = s_without_nul(NULL, false);
    int32_t a = rl_tokenizer_token_to_id(t, "a"), b = rl_tokenizer_token_to_id(t, "b");
    assert_true(a >= 0 && b >= 0);
    assert_int_equal(rl_tokenizer_encode(t, "a\0\0b", 4, &ids, &n), RL_OK);
    assert_int_equal(n, 2);
    assert_int_equal(ids[0], a);
    assert_int_equal(ids[1], b);
    free(ids);
    rl_tokenizer_free(t);

    t = s_without_nul("<|endoftext|>", false);
    assert_int_equal(rl_tokenizer_special_id(t, RL_TOK_UNK), 0);
    assert_int_equal(rl_tokenizer_encode(t, "a\0\0b", 4, &ids, &n), RL_OK);
    assert_int_equal(n, 4);
    assert_int_equal(ids[1], 0);
    assert_int_equal(ids[2], 0);
    free(ids);
    rl_tokenizer_free(t);

    t = s_without_nul("<|endoftext|>", true);
    assert_int_equal(rl_tokenizer_encode(t, "a\0\0b", 4, &ids, &n), RL_OK);
    assert_int_equal(n, 3);
    assert_int_equal(ids[0], a);
    assert_int_equal(ids[1], 0);
    assert_int_equal(ids[2], b);
    free(ids);
    rl_tokenizer_free(t);
}

/* NFC's canonical ordering of a run of combining marks: a stable sort by
 * combining class, by insertion for short runs and by counting for long
 * ones (a hostile text of many marks was quadratic: 80 KB took 2 s). The
 * expected strings are Python's unicodedata.normalize("NFC", ...). */
static void s_append_marks(char *out, size_t *n, int reps, int cls_order)
{
    static const char *const mk[3] = {"\xcc\x81", "\xcc\x96", "\xcc\xa7"}; /* U+0301, 0316, 0327 */
    for (int r = 0; r < reps; r++)
        for (int k = 0; k < 3; k++) {
            const char *m = mk[cls_order ? 2 - k : k];
            memcpy(out + *n, m, 2);
            *n += 2;
        }
}

static void test_nfc_orders_long_runs(void **state)
{
    (void)state;
    for (int reps = 3; reps <= 300; reps += 297) { /* 9 marks: insertion; 900: counting */
        char *in = malloc(2 + 6 * (size_t)reps), *want = malloc(2 + 6 * (size_t)reps);
        size_t n = 1, w = 0;
        in[0] = 'x';
        s_append_marks(in, &n, reps, 0); /* 0301 0316 0327 repeated */
        want[w++] = 'x';
        for (int r = 0; r < reps; r++) { memcpy(want + w, "\xcc\xa7", 2); w += 2; }
        for (int r = 0; r < reps; r++) { memcpy(want + w, "\xcc\x96", 2); w += 2; }
        for (int r = 0; r < reps; r++) { memcpy(want + w, "\xcc\x81", 2); w += 2; }
        char *out = NULL;
        size_t on = 0;
        assert_int_equal(rl_tok_nfc(in, n, &out, &on), RL_OK);
        assert_int_equal(on, w);
        assert_memory_equal(out, want, w);
        free(out);
        free(in);
        free(want);
    }
    /* a composes with U+0301 across U+0316 (class 220 < 230): á, then the rest */
    const char *in = "a\xcc\x81\xcc\x81\xcc\x96\xcc\x96";
    char *out = NULL;
    size_t on = 0;
    assert_int_equal(rl_tok_nfc(in, strlen(in), &out, &on), RL_OK);
    const char *want = "\xc3\xa1\xcc\x96\xcc\x96\xcc\x81";
    assert_int_equal(on, strlen(want));
    assert_memory_equal(out, want, on);
    free(out);
    /* U+AC00 U+11A7 is NFC already (U+11A7 is below the trailing consonants
     * U+11A8..U+11C2); utf8proc 2.8 on its own drops the U+11A7 */
    in = "x\xea\xb0\x80\xe1\x86\xa7";
    assert_int_equal(rl_tok_nfc(in, strlen(in), &out, &on), RL_OK);
    assert_int_equal(on, strlen(in));
    assert_memory_equal(out, in, on);
    free(out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_nfc_orders_long_runs),
        cmocka_unit_test(test_char_encode_specials_and_round_trip),
        cmocka_unit_test(test_char_longest_special_wins),
        cmocka_unit_test(test_char_unknown_character),
        cmocka_unit_test(test_char_bad_specs),
        cmocka_unit_test(test_char_save_load),
        cmocka_unit_test(test_bpe_gpt2_matches_hf),
        cmocka_unit_test(test_bpe_gpt2_prefix_space_matches_hf),
        cmocka_unit_test(test_bpe_qwen2_matches_hf),
        cmocka_unit_test(test_bpe_llama3_matches_hf),
        cmocka_unit_test(test_bpe_specials_and_api),
        cmocka_unit_test(test_bpe_cache_consistency),
        cmocka_unit_test(test_bpe_concurrent_encode),
        cmocka_unit_test(test_bpe_any_split_regex),
        cmocka_unit_test(test_bpe_hostile_text),
        cmocka_unit_test(test_bpe_malformed),
        cmocka_unit_test(test_bpe_unknown_bytes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
