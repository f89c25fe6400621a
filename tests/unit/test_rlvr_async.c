/* test_rlvr_async.c — the one-step-off prefetch queue (driver/recipes/
 * rlvr_async.c): rounds keyed by (step, round), dropping the rounds a step
 * did not need, and the checkpoint form: save → restore round trip, the
 * older "step" keys, rounds that do not fit the resumed job (a lower
 * staleness, another batch size or response length) dropped, and every
 * malformed entry (keys, versions, types) refused with its name. (The
 * LM batch's masks: tests/unit/test_algo_lm_batch.c.) */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "driver/recipes/lm/rlvr_async.h"
#include "rlrt/error.h"
#include "rlrt/dtype.h"
#include "common/nn/models/lm/lm_model.h"
#include "rlrt/tensor.h"
#include "rlrt/dataproto.h"

#define S_R 6 /* response width of the test rounds */

/* A finished round: one f32 tensor "x" of `rows` rows filled with `v`, the
 * (rows, S_R) responses, and every row sampled by weight version `version`. */
static rl_dataproto *s_round_v(int64_t rows, float v, int64_t version)
{
    rl_dataproto *dp = rl_dataproto_new();
    int64_t shape[1] = {rows};
    rl_tensor *x = rl_dataproto_new_tensor(dp, "x", RL_F32, 1, shape);
    assert_non_null(x);
    float *d = rl_tensor_data(x);
    for (int64_t i = 0; i < rows; i++)
        d[i] = v + (float)i;
    assert_non_null(rl_dataproto_new_tensor(dp, RL_LM_RESPONSES, RL_I32, 2, (int64_t[]){rows, S_R}));
    rl_column *c = rl_dataproto_new_column(dp, RL_ROLLOUT_ROW_VERSION, RL_COL_INT64);
    assert_non_null(c);
    for (int64_t i = 0; i < rows; i++)
        assert_int_equal(rl_column_set_i64(c, i, version), RL_OK);
    return dp;
}

static rl_dataproto *s_round(int64_t rows, float v) { return s_round_v(rows, v, 6); }

/* A resume at step `start` of rounds of `rows` rows, with version start + 1
 * published for step start + 1. */
static rl_rlvr_async_expect s_expect(int64_t start, int64_t rows)
{
    return (rl_rlvr_async_expect){start, rows, S_R, start + 1};
}

static float s_first(const rl_dataproto *dp)
{
    rl_tensor *x = rl_dataproto_tensor(dp, "x");
    assert_non_null(x);
    return ((const float *)rl_tensor_data(x))[0];
}

static void test_queue_by_step_and_round(void **state)
{
    (void)state;
    rl_rlvr_async a = {.staleness = 1};
    assert_int_equal(rl_rlvr_async_push(&a, 3, 0, s_round(2, 30), NULL), RL_OK);
    assert_int_equal(rl_rlvr_async_push(&a, 3, 1, s_round(2, 31), NULL), RL_OK);
    assert_int_equal(rl_rlvr_async_push(&a, 3, 2, s_round(2, 32), NULL), RL_OK);
    assert_int_equal(rl_rlvr_async_push(&a, 4, 0, s_round(2, 40), NULL), RL_OK);
    assert_true(rl_rlvr_async_has(&a, 3, 1));
    assert_false(rl_rlvr_async_has(&a, 4, 1));
    rl_dataproto *out = NULL;
    double g = -1, w = -1;
    assert_int_equal(rl_rlvr_async_take(&a, NULL, 3, 1, &out, &g, &w), RL_OK);
    assert_true(s_first(out) == 31.0f);
    rl_dataproto_free(out);
    assert_int_equal(rl_rlvr_async_take(&a, NULL, 3, 1, &out, &g, &w), RL_ENOTFOUND);
    assert_string_equal(rl_error_message(), "async: no round 1 queued for step 3");
    assert_null(out);
    /* step 3 is done: its rounds 0 and 2 were not needed; step 4's stays */
    assert_int_equal(rl_rlvr_async_drop_through(&a, 3), 2);
    assert_int_equal(a.n, 1);
    assert_true(rl_rlvr_async_has(&a, 4, 0));
    assert_int_equal(rl_rlvr_async_drop_through(&a, 3), 0);
    /* bounded: the queue holds RL_RLVR_ASYNC_QUEUE rounds, then refuses */
    for (int i = 1; i < RL_RLVR_ASYNC_QUEUE; i++)
        assert_int_equal(rl_rlvr_async_push(&a, 5 + i, 0, s_round(1, 0), NULL), RL_OK);
    assert_int_equal(rl_rlvr_async_push(&a, 999, 0, s_round(1, 0), NULL), RL_ESTATE);
    rl_rlvr_async_close(&a);
    assert_int_equal(a.n, 0);
}

/* restore of `saved` at step 6 (rounds of 4 rows) into a queue of staleness
 * `staleness`: the return code, with *dropped */
static int s_restore(rl_rlvr_async *a, const json_t *saved, int *dropped)
{
    rl_rlvr_async_expect e = s_expect(6, 4);
    return rl_rlvr_async_restore(a, saved, &e, dropped);
}

static void test_checkpoint_round_trip(void **state)
{
    (void)state;
    rl_rlvr_async a = {.staleness = 2};
    assert_int_equal(rl_rlvr_async_push(&a, 7, 0, s_round(4, 70), NULL), RL_OK);
    assert_int_equal(rl_rlvr_async_push(&a, 7, 1, s_round(4, 71), NULL), RL_OK);
    assert_int_equal(rl_rlvr_async_push(&a, 8, 0, s_round(4, 80), NULL), RL_OK);
    json_t *saved = NULL;
    assert_int_equal(rl_rlvr_async_save(&a, NULL, &saved), RL_OK);
    assert_int_equal(json_object_size(saved), 3);
    assert_non_null(json_object_get(saved, "7.1"));
    rl_rlvr_async b = {.staleness = 2};
    int dropped = -1;
    assert_int_equal(s_restore(&b, saved, &dropped), RL_OK);
    assert_int_equal(b.n, 3);
    assert_int_equal(dropped, 0);
    rl_dataproto *out = NULL;
    double g, w;
    assert_int_equal(rl_rlvr_async_take(&b, NULL, 7, 1, &out, &g, &w), RL_OK);
    assert_int_equal(rl_dataproto_rows(out), 4);
    assert_true(s_first(out) == 71.0f);
    rl_dataproto_free(out);
    /* a checkpoint of before async_rounds: "step" is round 0 */
    json_t *old = json_pack("{s:O}", "7", json_object_get(saved, "8.0"));
    rl_rlvr_async c = {.staleness = 1};
    assert_int_equal(s_restore(&c, old, &dropped), RL_OK);
    assert_true(rl_rlvr_async_has(&c, 7, 0));
    json_decref(old);
    rl_rlvr_async_close(&c);
    /* trainer.staleness lowered to 1 on resume: step 8's round (a step past
     * 6 + 1) is dropped; so is a round of step 7 whose samples are 2 versions
     * older than the actor at step 7 (version 7 − 2 = 5 < 7 − 1) */
    json_t *low = json_pack("{s:O,s:O,s:o}", "7.0", json_object_get(saved, "7.0"), "8.0",
                            json_object_get(saved, "8.0"), "7.1", json_null());
    rl_rlvr_async stale = {.staleness = 2};
    assert_int_equal(rl_rlvr_async_push(&stale, 7, 1, s_round_v(4, 0, 5), NULL), RL_OK);
    json_t *stale_saved = NULL;
    assert_int_equal(rl_rlvr_async_save(&stale, NULL, &stale_saved), RL_OK);
    json_object_set(low, "7.1", json_object_get(stale_saved, "7.1"));
    rl_rlvr_async e1 = {.staleness = 1};
    assert_int_equal(s_restore(&e1, low, &dropped), RL_OK);
    assert_int_equal(dropped, 2);
    assert_int_equal(e1.n, 1);
    assert_true(rl_rlvr_async_has(&e1, 7, 0));
    rl_rlvr_async_close(&e1);
    rl_rlvr_async e2 = {.staleness = 2}; /* with the bound of the run, all three are kept */
    assert_int_equal(s_restore(&e2, low, &dropped), RL_OK);
    assert_int_equal(dropped, 0);
    assert_int_equal(e2.n, 3);
    rl_rlvr_async_close(&e2);
    json_decref(low);
    /* another batch size or response length than the checkpoint's: dropped */
    rl_rlvr_async f = {.staleness = 2};
    rl_rlvr_async_expect other_rows = s_expect(6, 8), other_width = s_expect(6, 4);
    other_width.response_length = S_R + 1;
    assert_int_equal(rl_rlvr_async_restore(&f, saved, &other_rows, &dropped), RL_OK);
    assert_int_equal(dropped, 3);
    assert_int_equal(f.n, 0);
    assert_int_equal(rl_rlvr_async_restore(&f, saved, &other_width, &dropped), RL_OK);
    assert_int_equal(dropped, 3);
    assert_int_equal(f.n, 0);
    /* malformed entries are refused, naming the entry: not digits, a round
     * out of range, a step already trained (<= 6) or past any bound (> 14),
     * a sign or a space, more digits than a step can have */
    static const char *const bad_keys[] = {"x", "7.", "7.x", "0.0", "7.-1", "7.8", "7.0.1", "",
                                           "6.0", "15.0", "+7.0", " 7.0", "7. 0",
                                           "99999999999999999999.0", "7.99999999999999999999"};
    for (size_t i = 0; i < sizeof bad_keys / sizeof bad_keys[0]; i++) {
        json_t *j = json_pack("{s:O}", bad_keys[i], json_object_get(saved, "7.0"));
        rl_rlvr_async d = {.staleness = 1};
        assert_int_equal(s_restore(&d, j, &dropped), RL_EPROTO);
        char want[200];
        snprintf(want, sizeof want, "async state: entry '%s' is not \"step.round\" → base64 "
                                    "text with step in 7 .. 14 and round < 8", bad_keys[i]);
        assert_string_equal(rl_error_message(), want);
        assert_int_equal(d.n, 0);
        rl_rlvr_async_close(&d);
        json_decref(j);
    }
    json_t *twice = json_pack("{s:O,s:O}", "9", json_object_get(saved, "7.0"), "9.0",
                              json_object_get(saved, "7.0"));
    rl_rlvr_async d = {.staleness = 1};
    assert_int_equal(s_restore(&d, twice, &dropped), RL_EPROTO);
    assert_string_equal(rl_error_message(), "async state: round 0 of step 9 given twice");
    rl_rlvr_async_close(&d);
    json_decref(twice);
    json_t *garbage = json_pack("{s:s}", "9.1", "not base64!");
    assert_int_equal(s_restore(&d, garbage, &dropped), RL_EPROTO);
    assert_non_null(strstr(rl_error_message(), "async state of 9.1"));
    rl_rlvr_async_close(&d);
    json_decref(garbage);
    /* not an object; a version from the future or below 1; no version column */
    json_t *arr = json_array();
    assert_int_equal(s_restore(&d, arr, &dropped), RL_EPROTO);
    assert_string_equal(rl_error_message(), "async state: expected an object of rounds");
    json_decref(arr);
    static const int64_t bad_versions[] = {8, 0, -1, INT64_MIN, INT64_MAX};
    for (size_t i = 0; i < sizeof bad_versions / sizeof bad_versions[0]; i++) {
        rl_rlvr_async src = {.staleness = 1};
        assert_int_equal(rl_rlvr_async_push(&src, 7, 0, s_round_v(4, 0, bad_versions[i]), NULL),
                         RL_OK);
        json_t *j = NULL;
        assert_int_equal(rl_rlvr_async_save(&src, NULL, &j), RL_OK);
        assert_int_equal(s_restore(&d, j, &dropped), RL_EPROTO);
        char want[200];
        snprintf(want, sizeof want, "async state of 7.0: async state 7.0: row 0: weight_version "
                                    "expected 1 .. 7 (the checkpoint's weights), got %lld",
                 (long long)bad_versions[i]);
        assert_string_equal(rl_error_message(), want);
        assert_int_equal(d.n, 0);
        json_decref(j);
        rl_rlvr_async_close(&src);
    }
    rl_rlvr_async src = {.staleness = 1};
    rl_dataproto *nov = s_round(4, 0);
    assert_int_equal(rl_dataproto_remove(nov, RL_ROLLOUT_ROW_VERSION), RL_OK);
    assert_int_equal(rl_rlvr_async_push(&src, 7, 0, nov, NULL), RL_OK);
    json_t *j = NULL;
    assert_int_equal(rl_rlvr_async_save(&src, NULL, &j), RL_OK);
    assert_int_equal(s_restore(&d, j, &dropped), RL_EPROTO);
    assert_non_null(strstr(rl_error_message(), "no int64 column 'weight_version'"));
    json_decref(j);
    rl_rlvr_async_close(&src);
    rl_rlvr_async_close(&stale);
    json_decref(stale_saved);
    json_decref(saved);
    rl_rlvr_async_close(&a);
    rl_rlvr_async_close(&b);
}

/* Partial rollouts: a round whose rows hold tokens of two versions (the
 * row column the oldest) round-trips with its per-token versions; a token
 * newer than the checkpoint's weights or older than its row's version, or
 * the per-token versions without the response lengths, is refused with its
 * row and token. */
static rl_dataproto *s_partial_round(int64_t bad)
{
    rl_dataproto *dp = s_round_v(4, 0, 6); /* rows sampled from version 6 on */
    int32_t *len = rl_tensor_data(rl_dataproto_new_tensor(dp, RL_LM_RESPONSE_LENS, RL_I32, 1,
                                                          (int64_t[]){4}));
    int64_t *v = rl_tensor_data(rl_dataproto_new_tensor(dp, RL_LM_TOKEN_VERSION, RL_I64, 2,
                                                        (int64_t[]){4, S_R}));
    for (int64_t b = 0; b < 4; b++) {
        len[b] = (int32_t)(b + 2);
        for (int64_t j = 0; j < S_R; j++)
            v[b * S_R + j] = j < len[b] ? (j < 2 ? 6 : 7) : 0; /* a switch 6 → 7 after 2 tokens */
    }
    if (bad)
        v[1 * S_R + 2] = bad; /* row 1, token 2 */
    return dp;
}

static void test_partial_token_versions(void **state)
{
    (void)state;
    int dropped = -1;
    static const int64_t cases[] = {0, 8, 5};
    for (size_t i = 0; i < 3; i++) {
        rl_rlvr_async src = {.staleness = 2}, d = {.staleness = 2};
        assert_int_equal(rl_rlvr_async_push(&src, 7, 0, s_partial_round(cases[i]), NULL), RL_OK);
        json_t *j = NULL;
        assert_int_equal(rl_rlvr_async_save(&src, NULL, &j), RL_OK);
        int rc = s_restore(&d, j, &dropped);
        if (cases[i] == 0) {
            assert_int_equal(rc, RL_OK);
            assert_int_equal(d.n, 1);
            const rl_tensor *tv = rl_dataproto_tensor(d.q[0].dp, RL_LM_TOKEN_VERSION);
            assert_non_null(tv);
            const int64_t *v = rl_tensor_data((rl_tensor *)tv);
            assert_int_equal(v[3 * S_R + 4], 7);
            assert_int_equal(v[3 * S_R + 1], 6);
        } else {
            assert_int_equal(rc, RL_EPROTO);
            char want[240];
            snprintf(want, sizeof want, "async state of 7.0: async state 7.0: row 1, token 2: "
                                        "token_weight_version expected 6 .. 7 (the row's oldest .. "
                                        "the checkpoint's weights), got %lld", (long long)cases[i]);
            assert_string_equal(rl_error_message(), want);
            assert_int_equal(d.n, 0);
        }
        json_decref(j);
        rl_rlvr_async_close(&src);
        rl_rlvr_async_close(&d);
    }
    rl_rlvr_async src = {.staleness = 2}, d = {.staleness = 2};
    rl_dataproto *nolen = s_partial_round(0);
    assert_int_equal(rl_dataproto_remove(nolen, RL_LM_RESPONSE_LENS), RL_OK);
    assert_int_equal(rl_rlvr_async_push(&src, 7, 0, nolen, NULL), RL_OK);
    json_t *j = NULL;
    assert_int_equal(rl_rlvr_async_save(&src, NULL, &j), RL_OK);
    assert_int_equal(s_restore(&d, j, &dropped), RL_EPROTO);
    assert_non_null(strstr(rl_error_message(), "token_weight_version needs responses (B, R) and "
                                                "response_lens (B) beside it"));
    json_decref(j);
    rl_rlvr_async_close(&src);
    rl_rlvr_async_close(&d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_queue_by_step_and_round),
        cmocka_unit_test(test_checkpoint_round_trip),
        cmocka_unit_test(test_partial_token_versions),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
