/* test_algo_offpolicy.c — DAPO's overlong shaping and group filter and
 * truncated importance sampling against the float64 PyTorch reference
 * (tests/reference/gen_algo_offpolicy.py → tests/golden/algo_lm/offpolicy),
 * plus the edges: bad arguments, truncation detection, the PPO loss with
 * TIS weights applied through the advantage.
 * Tolerances (|got − want| ≤ atol + rtol·|want|): weights and penalties
 * atol 1e-7, rtol 1e-6 (f32 outputs of double math); the PPO loss atol 1e-6,
 * rtol 1e-5 and its gradient atol 1e-7, rtol 1e-4 (f32 per-token math). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "tests/common/golden.h"
#include "rlrt/error.h"
#include "common/algo/policy_loss.h"
#include "common/algo/offpolicy.h"

static rl_golden *s_load(void)
{
    rl_golden *g = rl_golden_load("tests/golden/algo_lm/offpolicy.safetensors");
    if (!g)
        fail_msg("cannot load the golden: %s", rl_error_message());
    return g;
}

static void s_close(const char *what, double got, double want, double atol, double rtol)
{
    if (rl_check_close_f64(what, &got, &want, 1, atol, rtol))
        fail_msg("%s: got %.10g want %.10g", what, got, want);
}

static void test_tis_golden(void **state)
{
    (void)state;
    rl_golden *g = s_load();
    const rl_golden_array *ma = rl_golden_get(g, "tis.mask");
    assert_non_null(ma);
    int64_t B = ma->shape[0], T = ma->shape[1], n;
    float *old = rl_golden_f32(g, "tis.old", &n), *roll = rl_golden_f32(g, "tis.rollout", &n);
    float *mask = rl_golden_f32(g, "tis.mask", &n);
    double *want = rl_golden_f64(g, "tis.w", &n);
    float *w = malloc(sizeof(float) * (size_t)(B * T));
    rl_tis_stats st;
    assert_int_equal(rl_tis_weights(old, roll, mask, B, T, rl_golden_scalar(g, "tis.cap"), w, &st),
                     RL_OK);
    assert_int_equal(rl_check_close_f32("tis.w", w, want, B * T, 1e-7, 1e-6), 0);
    s_close("tis.mean", st.mean, rl_golden_scalar(g, "tis.mean"), 1e-9, 1e-9);
    s_close("tis.raw_mean", st.raw_mean, rl_golden_scalar(g, "tis.raw_mean"), 1e-9, 1e-9);
    s_close("tis.raw_max", st.raw_max, rl_golden_scalar(g, "tis.raw_max"), 1e-9, 1e-9);
    s_close("tis.capped_frac", st.capped_frac, rl_golden_scalar(g, "tis.capped_frac"), 0, 1e-12);
    s_close("tis.mismatch_kl", st.mismatch_kl, rl_golden_scalar(g, "tis.mismatch_kl"), 1e-9, 1e-9);
    /* a NaN at a valid position is named; at a masked one it is ignored */
    float keep = old[0];
    old[0] = NAN;
    assert_int_equal(rl_tis_weights(old, roll, mask, B, T, 2.0, w, NULL), RL_ENUMERIC);
    assert_non_null(strstr(rl_error_message(), "old_logp[0, 0]"));
    old[0] = keep;
    old[2 * T] = NAN; /* row 2 is empty */
    assert_int_equal(rl_tis_weights(old, roll, mask, B, T, 2.0, w, NULL), RL_OK);
    assert_int_equal(rl_tis_weights(old, roll, mask, B, T, 0.0, w, NULL), RL_EINVAL);
    free(old), free(roll), free(mask), free(want), free(w);
    rl_golden_free(g);
}

/* verl multiplies the per-token policy loss by the TIS weight; rlrt scales
 * the advantage (w > 0): the loss and its gradient must be the same. */
static void test_tis_through_advantage(void **state)
{
    (void)state;
    rl_golden *g = s_load();
    const rl_golden_array *ma = rl_golden_get(g, "tis.mask");
    int64_t B = ma->shape[0], T = ma->shape[1], n;
    float *old = rl_golden_f32(g, "tis.old", &n), *roll = rl_golden_f32(g, "tis.rollout", &n);
    float *mask = rl_golden_f32(g, "tis.mask", &n), *logp = rl_golden_f32(g, "ppo.logp", &n);
    float *adv = rl_golden_f32(g, "ppo.adv", &n);
    double *want = rl_golden_f64(g, "ppo.grad", &n);
    float *w = malloc(sizeof(float) * (size_t)(B * T)), *gl = malloc(sizeof(float) * (size_t)(B * T));
    assert_int_equal(rl_tis_weights(old, roll, mask, B, T, rl_golden_scalar(g, "tis.cap"), w, NULL),
                     RL_OK);
    for (int64_t i = 0; i < B * T; i++)
        adv[i] *= w[i];
    rl_ppo_loss_cfg cfg;
    rl_ppo_loss_cfg_default(&cfg);
    cfg.clip_ratio_high = 0.28;
    rl_ppo_loss_out o;
    assert_int_equal(rl_ppo_policy_loss(&cfg, logp, old, adv, mask, NULL, NULL, B, T, gl, NULL, &o),
                     RL_OK);
    s_close("ppo.loss", o.loss, rl_golden_scalar(g, "ppo.loss"), 1e-6, 1e-5);
    assert_int_equal(rl_check_close_f32("ppo.grad", gl, want, B * T, 1e-7, 1e-4), 0);
    free(old), free(roll), free(mask), free(logp), free(adv), free(want), free(w), free(gl);
    rl_golden_free(g);
}

static void test_overlong_golden(void **state)
{
    (void)state;
    rl_golden *g = s_load();
    int64_t B;
    int64_t *l64 = rl_golden_i64(g, "overlong.lens", &B);
    double *want = rl_golden_f64(g, "overlong.penalty", &B);
    int32_t *lens = malloc(sizeof(int32_t) * (size_t)B);
    float *pen = malloc(sizeof(float) * (size_t)B);
    for (int64_t b = 0; b < B; b++)
        lens[b] = (int32_t)l64[b];
    int64_t max_len = (int64_t)rl_golden_scalar(g, "overlong.max_len");
    int64_t buf = (int64_t)rl_golden_scalar(g, "overlong.buffer");
    assert_int_equal(rl_overlong_penalty(lens, B, max_len, buf, rl_golden_scalar(g, "overlong.factor"),
                                         pen),
                     RL_OK);
    assert_int_equal(rl_check_close_f32("overlong.penalty", pen, want, B, 1e-7, 1e-6), 0);
    assert_int_equal(rl_overlong_penalty(lens, B, max_len, 0, 1.0, pen), RL_EINVAL);
    assert_int_equal(rl_overlong_penalty(lens, B, max_len, max_len + 1, 1.0, pen), RL_EINVAL);
    lens[0] = (int32_t)max_len + 1;
    assert_int_equal(rl_overlong_penalty(lens, B, max_len, buf, 1.0, pen), RL_ERANGE);
    assert_non_null(strstr(rl_error_message(), "lens[0]"));
    free(l64), free(want), free(lens), free(pen);
    rl_golden_free(g);
}

static void test_overlong_truncated(void **state)
{
    (void)state;
    /* R = 4; stop token 2: full rows without the stop at the end are cut */
    int32_t tok[] = {5, 6, 7, 8, 5, 6, 7, 2, 5, 2, 0, 0, 5, 6, 7, 9};
    int32_t lens[] = {4, 4, 2, 4};
    int32_t stop[] = {2, 9};
    uint8_t cut[4];
    int64_t n = -1;
    assert_int_equal(rl_overlong_truncated(tok, lens, 4, 4, stop, 1, cut, &n), RL_OK);
    assert_int_equal(n, 2);
    assert_int_equal(cut[0], 1), assert_int_equal(cut[1], 0), assert_int_equal(cut[2], 0);
    assert_int_equal(cut[3], 1);
    assert_int_equal(rl_overlong_truncated(tok, lens, 4, 4, stop, 2, cut, &n), RL_OK);
    assert_int_equal(n, 1);
    lens[2] = 5;
    assert_int_equal(rl_overlong_truncated(tok, lens, 4, 4, stop, 1, cut, &n), RL_ERANGE);
}

static void test_filter_std_golden(void **state)
{
    (void)state;
    rl_golden *g = s_load();
    int64_t B, n;
    float *metric = rl_golden_f32(g, "filter.metric", &B);
    int64_t *group = rl_golden_i64(g, "filter.group", &n), *want = rl_golden_i64(g, "filter.keep", &n);
    uint8_t *keep = malloc((size_t)B);
    int64_t kept = 0, groups = 0;
    assert_int_equal(rl_filter_groups_std(metric, group, B, keep, &kept, &groups), RL_OK);
    for (int64_t b = 0; b < B; b++)
        assert_int_equal(keep[b], want[b]);
    assert_int_equal(groups, 5);
    assert_int_equal(kept, 3); /* groups 4 (mixed), 9 (one row), 3 (mixed) */
    metric[0] = INFINITY;
    assert_int_equal(rl_filter_groups_std(metric, group, B, keep, NULL, NULL), RL_ENUMERIC);
    free(metric), free(group), free(want), free(keep);
    rl_golden_free(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tis_golden),
        cmocka_unit_test(test_tis_through_advantage),
        cmocka_unit_test(test_overlong_golden),
        cmocka_unit_test(test_overlong_truncated),
        cmocka_unit_test(test_filter_std_golden),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
