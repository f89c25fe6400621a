/* test_rlvr_async.c — the one-step-off prefetch queue (driver/recipes/
 * rlvr_async.c): rounds keyed by (step, round), dropping the rounds a step
 * did not need, and the checkpoint form: save → restore round trip, the
 * older "step" keys, and every malformed entry refused with its name. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "../../driver/recipes/rlvr_async.h"
#include "rlrt/rlrt.h"

/* A finished round: one f32 tensor "x" of `rows` rows filled with `v`. */
static rl_dataproto *s_round(int64_t rows, float v)
{
    rl_dataproto *dp = rl_dataproto_new();
    int64_t shape[1] = {rows};
    rl_tensor *x = rl_dataproto_new_tensor(dp, "x", RL_F32, 1, shape);
    assert_non_null(x);
    float *d = rl_tensor_data(x);
    for (int64_t i = 0; i < rows; i++)
        d[i] = v + (float)i;
    return dp;
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

static void test_checkpoint_round_trip(void **state)
{
    (void)state;
    rl_rlvr_async a = {.staleness = 2};
    assert_int_equal(rl_rlvr_async_push(&a, 7, 0, s_round(3, 70), NULL), RL_OK);
    assert_int_equal(rl_rlvr_async_push(&a, 7, 1, s_round(5, 71), NULL), RL_OK);
    assert_int_equal(rl_rlvr_async_push(&a, 8, 0, s_round(4, 80), NULL), RL_OK);
    json_t *saved = NULL;
    assert_int_equal(rl_rlvr_async_save(&a, NULL, &saved), RL_OK);
    assert_int_equal(json_object_size(saved), 3);
    assert_non_null(json_object_get(saved, "7.1"));
    rl_rlvr_async b = {.staleness = 2};
    assert_int_equal(rl_rlvr_async_restore(&b, saved), RL_OK);
    assert_int_equal(b.n, 3);
    rl_dataproto *out = NULL;
    double g, w;
    assert_int_equal(rl_rlvr_async_take(&b, NULL, 7, 1, &out, &g, &w), RL_OK);
    assert_int_equal(rl_dataproto_rows(out), 5);
    assert_true(s_first(out) == 71.0f);
    rl_dataproto_free(out);
    /* a checkpoint of before async_rounds: "step" is round 0 */
    json_t *old = json_pack("{s:O}", "12", json_object_get(saved, "8.0"));
    rl_rlvr_async c = {.staleness = 1};
    assert_int_equal(rl_rlvr_async_restore(&c, old), RL_OK);
    assert_true(rl_rlvr_async_has(&c, 12, 0));
    json_decref(old);
    rl_rlvr_async_close(&c);
    /* malformed entries are refused, naming the entry */
    static const char *const bad_keys[] = {"x", "7.", "7.x", "0.0", "7.-1", "7.8", "7.0.1", ""};
    for (size_t i = 0; i < sizeof bad_keys / sizeof bad_keys[0]; i++) {
        json_t *j = json_pack("{s:O}", bad_keys[i], json_object_get(saved, "7.0"));
        rl_rlvr_async d = {.staleness = 1};
        assert_int_equal(rl_rlvr_async_restore(&d, j), RL_EPROTO);
        char want[160];
        snprintf(want, sizeof want, "async state: entry '%s' is not \"step.round\" (round < 8) "
                                    "→ base64 text", bad_keys[i]);
        assert_string_equal(rl_error_message(), want);
        rl_rlvr_async_close(&d);
        json_decref(j);
    }
    json_t *twice = json_pack("{s:O,s:O}", "9", json_object_get(saved, "7.0"), "9.0",
                              json_object_get(saved, "7.0"));
    rl_rlvr_async d = {.staleness = 1};
    assert_int_equal(rl_rlvr_async_restore(&d, twice), RL_EPROTO);
    assert_string_equal(rl_error_message(), "async state: round 0 of step 9 given twice");
    rl_rlvr_async_close(&d);
    json_decref(twice);
    json_t *garbage = json_pack("{s:s}", "9.1", "not base64!");
    assert_int_equal(rl_rlvr_async_restore(&d, garbage), RL_EPROTO);
    assert_non_null(strstr(rl_error_message(), "async state of 9.1"));
    rl_rlvr_async_close(&d);
    json_decref(garbage);
    json_decref(saved);
    rl_rlvr_async_close(&a);
    rl_rlvr_async_close(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_queue_by_step_and_round),
        cmocka_unit_test(test_checkpoint_round_trip),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
