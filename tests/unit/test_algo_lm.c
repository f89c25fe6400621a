/* test_algo_lm.c — language-model RL algorithms against the float64 PyTorch
 * reference (tests/reference/gen_algo_lm.py → tests/golden/algo_lm/).
 *
 * Inputs in the golden files are the exact f32 values the reference used.
 * Tolerances (|got − want| ≤ atol + rtol·|want|):
 *   advantages, returns, KL values and gradients: atol 2e-6, rtol 2e-5
 *     (f32 outputs of double arithmetic);
 *   PPO loss and metrics: atol 1e-6, rtol 1e-5; PPO gradients: atol 1e-7,
 *     rtol 1e-4 (per-token arithmetic is f32 with a 2e-7 exp);
 *   KL controller values: rtol 1e-12 (pure double).
 */
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
#include "common/algo/advantage.h"
#include "common/algo/lm/opo.h"
#include "common/algo/kl.h"
#include "common/algo/policy_loss.h"
#include "common/algo/filter.h"

#define ADV_ATOL 2e-6
#define ADV_RTOL 2e-5

static rl_golden *s_load(const char *name)
{
    char path[256];
    snprintf(path, sizeof path, "tests/golden/algo_lm/%s.safetensors", name);
    rl_golden *g = rl_golden_load(path);
    if (!g)
        fail_msg("cannot load %s: %s", path, rl_error_message());
    return g;
}

static const rl_golden_array *s_arr(const rl_golden *g, const char *name)
{
    const rl_golden_array *a = rl_golden_get(g, name);
    if (!a)
        fail_msg("golden array '%s' missing", name);
    return a;
}

/* Compares a float output with a golden f64 array of the same size. */
static void s_cmp(const rl_golden *g, const char *name, const float *got, int64_t n,
                  double atol, double rtol)
{
    int64_t nn;
    double *want = rl_golden_f64(g, name, &nn);
    assert_int_equal(nn, n);
    int64_t bad = rl_check_close_f32(name, got, want, n, atol, rtol);
    free(want);
    if (bad)
        fail_msg("%s: %lld mismatches", name, (long long)bad);
}

static void s_cmp_scalar(const rl_golden *g, const char *name, double got, double atol,
                         double rtol)
{
    double want = rl_golden_scalar(g, name);
    if (rl_check_close_f64(name, &got, &want, 1, atol, rtol))
        fail_msg("%s: got %.10g want %.10g", name, got, want);
}

static void test_gae_golden(void **state)
{
    (void)state;
    rl_golden *g = s_load("advantages");
    const rl_golden_array *m = s_arr(g, "gae.mask");
    int64_t B = m->shape[0], T = m->shape[1], n;
    float *rew = rl_golden_f32(g, "gae.rewards", &n), *val = rl_golden_f32(g, "gae.values", &n);
    float *mask = rl_golden_f32(g, "gae.mask", &n);
    float *adv = malloc(sizeof(float) * B * T), *ret = malloc(sizeof(float) * B * T);
    for (int w = 0; w < 2; w++) {
        assert_int_equal(rl_adv_gae(rew, val, mask, B, T, 0.99, 0.95, w, adv, ret), RL_OK);
        char a[64], r[64];
        snprintf(a, sizeof a, "gae.w%d.adv", w);
        snprintf(r, sizeof r, "gae.w%d.ret", w);
        s_cmp(g, a, adv, B * T, ADV_ATOL, ADV_RTOL);
        s_cmp(g, r, ret, B * T, ADV_ATOL, ADV_RTOL);
    }
    free(rew), free(val), free(mask), free(adv), free(ret);
    rl_golden_free(g);
}

static void test_outcome_golden(void **state)
{
    (void)state;
    rl_golden *g = s_load("advantages");
    const rl_golden_array *m = s_arr(g, "out.mask");
    int64_t B = m->shape[0], T = m->shape[1], n;
    float *tr = rl_golden_f32(g, "out.token_rewards", &n), *mask = rl_golden_f32(g, "out.mask", &n);
    int64_t *group = rl_golden_i64(g, "out.group", &n);
    float *adv = malloc(sizeof(float) * B * T), *sc = malloc(sizeof(float) * B);
    for (int nb = 0; nb < 2; nb++) {
        assert_int_equal(rl_adv_grpo(tr, mask, group, B, T, RL_GRPO_EPS, nb, adv, sc), RL_OK);
        char a[64], s[64];
        snprintf(a, sizeof a, "grpo.n%d.adv", nb);
        snprintf(s, sizeof s, "grpo.n%d.scores", nb);
        s_cmp(g, a, adv, B * T, ADV_ATOL, ADV_RTOL);
        s_cmp(g, s, sc, B, ADV_ATOL, ADV_RTOL);
    }
    assert_int_equal(rl_adv_rloo(tr, mask, group, B, T, adv), RL_OK);
    s_cmp(g, "rloo.adv", adv, B * T, ADV_ATOL, ADV_RTOL);
    assert_int_equal(rl_adv_reinforce_pp_baseline(tr, mask, group, B, T, adv), RL_OK);
    s_cmp(g, "rpp_base.adv", adv, B * T, ADV_ATOL, ADV_RTOL);
    assert_int_equal(rl_adv_opo(tr, mask, group, B, T, adv), RL_OK);
    s_cmp(g, "opo.adv", adv, B * T, ADV_ATOL, ADV_RTOL);
    free(tr), free(mask), free(group), free(adv), free(sc);
    rl_golden_free(g);
}

static void test_reinforce_pp_and_returns_golden(void **state)
{
    (void)state;
    rl_golden *g = s_load("advantages");
    const rl_golden_array *m = s_arr(g, "rpp.mask");
    int64_t B = m->shape[0], T = m->shape[1], n;
    float *tr = rl_golden_f32(g, "rpp.token_rewards", &n), *mask = rl_golden_f32(g, "rpp.mask", &n);
    float *adv = malloc(sizeof(float) * B * T), *ret = malloc(sizeof(float) * B * T);
    assert_int_equal(rl_adv_reinforce_pp(tr, mask, B, T, 0.9, adv, ret), RL_OK);
    s_cmp(g, "rpp.adv", adv, B * T, ADV_ATOL, ADV_RTOL);
    s_cmp(g, "rpp.ret", ret, B * T, ADV_ATOL, ADV_RTOL);

    float *sc = rl_golden_f32(g, "tr.scores", &n), *kl = rl_golden_f32(g, "tr.kl", &n);
    double *coefs = rl_golden_f64(g, "tr.coefs", &n);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(rl_token_rewards_kl(sc, kl, mask, B, T, coefs[i], adv), RL_OK);
        char name[64];
        snprintf(name, sizeof name, "tr.c%d.out", i);
        s_cmp(g, name, adv, B * T, ADV_ATOL, ADV_RTOL);
    }
    assert_int_equal(rl_cumulative_returns(tr, mask, B, T, 0.95, adv), RL_OK);
    s_cmp(g, "cum.out", adv, B * T, ADV_ATOL, ADV_RTOL);
    /* in place */
    memcpy(ret, tr, sizeof(float) * B * T);
    assert_int_equal(rl_cumulative_returns(ret, mask, B, T, 0.95, ret), RL_OK);
    s_cmp(g, "cum.out", ret, B * T, ADV_ATOL, ADV_RTOL);
    free(tr), free(mask), free(adv), free(ret), free(sc), free(kl), free(coefs);
    rl_golden_free(g);
}

static void test_pro_max_golden(void **state)
{
    (void)state;
    rl_golden *g = s_load("pro_max");
    int64_t cases = (int64_t)rl_golden_scalar(g, "pm.count");
    assert_true(cases >= 5);
    for (int64_t c = 0; c < cases; c++) {
        char k[64];
#define K(s) (snprintf(k, sizeof k, "pm%lld.%s", (long long)c, s), k)
        int64_t n;
        const rl_golden_array *m = s_arr(g, K("mask"));
        int64_t B = m->shape[0], T = m->shape[1];
        float *r = rl_golden_f32(g, K("rewards"), &n), *mask = rl_golden_f32(g, K("mask"), &n);
        float *kl = rl_golden_get(g, K("kl")) ? rl_golden_f32(g, k, &n) : NULL;
        int64_t *idx = rl_golden_i64(g, K("index"), &n), *pr = rl_golden_i64(g, K("prompt"), &n);
        double *cfgv = rl_golden_f64(g, K("cfg"), &n);
        rl_pro_max_cfg cfg;
        rl_pro_max_cfg_default(&cfg, (int64_t)cfgv[0]);
        cfg.kl_coef = cfgv[1];
        cfg.uniform_scale = (int)cfgv[2];
        int64_t G = B / cfg.n_samples;
        float *adv = malloc(sizeof(float) * B * T);
        uint8_t *st = malloc((size_t)G);
        rl_pro_max_result res;
        assert_int_equal(rl_adv_pro_max(&cfg, r, kl, mask, idx, pr, B, T, adv, st, &res), RL_OK);
        s_cmp(g, K("adv"), adv, B * T, ADV_ATOL, ADV_RTOL);
        int64_t *want = rl_golden_i64(g, K("status"), &n);
        assert_int_equal(n, G);
        for (int64_t i = 0; i < G; i++) {
            if (st[i] != want[i])
                fail_msg("pm%lld group %lld: status %d, reference %lld", (long long)c,
                         (long long)i, st[i], (long long)want[i]);
        }
        assert_int_equal(res.n_groups, G);
        assert_int_equal(res.warnings, 0);
        free(r), free(mask), free(kl), free(idx), free(pr), free(cfgv), free(adv), free(st);
        free(want);
#undef K
    }
    rl_golden_free(g);
}

static void test_kl_golden(void **state)
{
    (void)state;
    rl_golden *g = s_load("kl_ppo");
    const rl_golden_array *m = s_arr(g, "kl.mask");
    int64_t B = m->shape[0], T = m->shape[1], n;
    float *lp = rl_golden_f32(g, "kl.logp", &n), *ref = rl_golden_f32(g, "kl.ref", &n);
    float *mask = rl_golden_f32(g, "kl.mask", &n);
    float *kl = malloc(sizeof(float) * B * T), *gr = malloc(sizeof(float) * B * T);
    for (int kind = 0; kind < 4; kind++)
        for (int ci = 0; ci < 2; ci++) {
            assert_int_equal(rl_kl_penalty(lp, ref, mask, B, T, (rl_kl_kind)kind,
                                           ci ? 10.0 : 0.0, kl, gr),
                             RL_OK);
            char a[64], b[64];
            snprintf(a, sizeof a, "kl.k%d.c%d.val", kind, ci);
            snprintf(b, sizeof b, "kl.k%d.c%d.grad", kind, ci);
            s_cmp(g, a, kl, B * T, ADV_ATOL, ADV_RTOL);
            s_cmp(g, b, gr, B * T, ADV_ATOL, ADV_RTOL);
        }
    double *kls = rl_golden_f64(g, "klctl.kls", &n), *want = rl_golden_f64(g, "klctl.values", &n);
    int64_t *steps = rl_golden_i64(g, "klctl.steps", &n);
    rl_kl_ctl ctl, fixed;
    assert_int_equal(rl_kl_ctl_init_adaptive(&ctl, 0.2, 0.1, 10000.0), RL_OK);
    assert_int_equal(rl_kl_ctl_init_fixed(&fixed, 0.05), RL_OK);
    for (int64_t i = 0; i < n; i++) {
        assert_int_equal(rl_kl_ctl_update(&ctl, kls[i], steps[i]), RL_OK);
        assert_int_equal(rl_kl_ctl_update(&fixed, kls[i], steps[i]), RL_OK);
        if (rl_check_close_f64("klctl", &ctl.value, &want[i], 1, 0.0, 1e-12))
            fail_msg("adaptive KL controller step %lld", (long long)i);
        assert_true(fixed.value == 0.05);
    }
    assert_int_equal(rl_kl_ctl_update(&ctl, NAN, 1), RL_ENUMERIC);
    rl_kl_kind kk;
    assert_int_equal(rl_kl_kind_parse("low_var_kl", &kk), RL_OK);
    assert_int_equal(kk, RL_KL_K3);
    assert_int_equal(rl_kl_kind_parse("mse", &kk), RL_OK);
    assert_int_equal(kk, RL_KL_K2);
    assert_int_equal(rl_kl_kind_parse("k9", &kk), RL_EINVAL);
    assert_non_null(strstr(rl_error_message(), "'k9'"));
    free(lp), free(ref), free(mask), free(kl), free(gr), free(kls), free(want), free(steps);
    rl_golden_free(g);
}

static void test_ppo_golden(void **state)
{
    (void)state;
    rl_golden *g = s_load("kl_ppo");
    const rl_golden_array *m = s_arr(g, "ppo.mask");
    int64_t B = m->shape[0], T = m->shape[1], n;
    float *lp = rl_golden_f32(g, "ppo.logp", &n), *old = rl_golden_f32(g, "ppo.old", &n);
    float *adv = rl_golden_f32(g, "ppo.adv", &n), *mask = rl_golden_f32(g, "ppo.mask", &n);
    float *ent = rl_golden_f32(g, "ppo.ent", &n), *ref = rl_golden_f32(g, "ppo.ref", &n);
    float *gl = malloc(sizeof(float) * B * T), *ge = malloc(sizeof(float) * B * T);
    int64_t cases = (int64_t)rl_golden_scalar(g, "ppo.count");
    assert_true(cases >= 12);
    for (int64_t c = 0; c < cases; c++) {
        char k[64];
#define K(s) (snprintf(k, sizeof k, "ppo.c%lld.%s", (long long)c, s), k)
        double *v = rl_golden_f64(g, K("cfg"), &n);
        rl_ppo_loss_cfg cfg;
        rl_ppo_loss_cfg_default(&cfg);
        cfg.clip_ratio_low = v[0];
        cfg.clip_ratio_high = v[1];
        cfg.clip_ratio_c = v[2];
        cfg.agg = (rl_loss_agg)v[3];
        cfg.norm = v[4];
        cfg.entropy_coeff = v[5];
        cfg.kl_loss_coef = v[6];
        cfg.kl_kind = (rl_kl_kind)v[7];
        cfg.kl_clamp = v[8];
        rl_ppo_loss_out o;
        int rc = rl_ppo_policy_loss(&cfg, lp, old, adv, mask, ent, ref, B, T, gl, ge, &o);
        if (rc)
            fail_msg("case %lld: %s", (long long)c, rl_error_message());
        s_cmp_scalar(g, K("loss"), o.loss, 1e-6, 1e-5);
        s_cmp_scalar(g, K("pg"), o.pg_loss, 1e-6, 1e-5);
        s_cmp_scalar(g, K("ent"), o.entropy, 1e-6, 1e-5);
        s_cmp_scalar(g, K("kl"), o.kl_loss, 1e-6, 1e-5);
        s_cmp_scalar(g, K("clipfrac"), o.clipfrac, 1e-12, 0);
        s_cmp_scalar(g, K("lower"), o.clipfrac_lower, 1e-12, 0);
        s_cmp_scalar(g, K("ppo_kl"), o.ppo_kl, 1e-6, 1e-5);
        s_cmp(g, K("grad_logp"), gl, B * T, 1e-7, 1e-4);
        s_cmp(g, K("grad_ent"), ge, B * T, 1e-7, 1e-4);
        free(v);
#undef K
    }
    free(lp), free(old), free(adv), free(mask), free(ent), free(ref), free(gl), free(ge);
    rl_golden_free(g);
}

static void test_filter_golden(void **state)
{
    (void)state;
    rl_golden *g = s_load("kl_ppo");
    int64_t B, n;
    float *metric = rl_golden_f32(g, "filter.metric", &B);
    int64_t *group = rl_golden_i64(g, "filter.group", &n);
    int64_t *want = rl_golden_i64(g, "filter.keep", &n);
    uint8_t *keep = malloc((size_t)B);
    int64_t *rows = malloc(sizeof(int64_t) * B);
    rl_filter_result res;
    assert_int_equal(rl_filter_groups(metric, group, B, RL_FILTER_DEFAULT_LOW,
                                      RL_FILTER_DEFAULT_HIGH, keep, rows, &res),
                     RL_OK);
    int64_t nk = 0;
    for (int64_t b = 0; b < B; b++) {
        assert_int_equal(keep[b], want[b]);
        if (want[b])
            assert_int_equal(rows[nk++], b);
    }
    assert_int_equal(res.n_rows_kept, nk);
    assert_int_equal(res.n_groups, 5);
    assert_int_equal(res.n_groups_kept, 3);
    free(metric), free(group), free(want), free(keep), free(rows);
    rl_golden_free(g);
}

static void test_value_loss_golden(void **state)
{
    (void)state;
    rl_golden *g = s_load("kl_ppo");
    const rl_golden_array *m = s_arr(g, "vl.mask");
    int64_t B = m->shape[0], T = m->shape[1], n;
    float *vp = rl_golden_f32(g, "vl.vpred", &n), *v = rl_golden_f32(g, "vl.values", &n);
    float *R = rl_golden_f32(g, "vl.returns", &n), *mask = rl_golden_f32(g, "vl.mask", &n);
    float *gr = malloc(sizeof(float) * B * T);
    for (int c = 0; c < 4; c++) {
        char k[64];
#define K(s) (snprintf(k, sizeof k, "vl.c%d.%s", c, s), k)
        double *cfg = rl_golden_f64(g, K("cfg"), &n);
        double loss, frac;
        assert_int_equal(rl_value_loss(vp, v, R, mask, B, T, cfg[0], (rl_loss_agg)cfg[1], 0,
                                       &loss, &frac, gr),
                         RL_OK);
        s_cmp_scalar(g, K("loss"), loss, 1e-6, 1e-5);
        s_cmp_scalar(g, K("clipfrac"), frac, 1e-12, 0);
        s_cmp(g, K("grad"), gr, B * T, ADV_ATOL, ADV_RTOL);
        free(cfg);
#undef K
    }
    free(vp), free(v), free(R), free(mask), free(gr);
    rl_golden_free(g);
}

static void test_entropy_golden(void **state)
{
    (void)state;
    rl_golden *g = s_load("kl_ppo");
    const rl_golden_array *z = s_arr(g, "ent.logits");
    int64_t N = z->shape[0], V = z->shape[1], n;
    float *logits = rl_golden_f32(g, "ent.logits", &n), *up = rl_golden_f32(g, "ent.up", &n);
    float *H = malloc(sizeof(float) * N), *gz = malloc(sizeof(float) * N * V);
    assert_int_equal(rl_entropy_from_logits(logits, N, V, H), RL_OK);
    s_cmp(g, "ent.H", H, N, ADV_ATOL, ADV_RTOL);
    assert_float_equal(H[2], log((double)V), 1e-6);
    assert_int_equal(rl_entropy_backward(logits, up, N, V, gz), RL_OK);
    s_cmp(g, "ent.grad", gz, N * V, ADV_ATOL, ADV_RTOL);
    logits[7] = INFINITY;
    assert_int_equal(rl_entropy_from_logits(logits, N, V, H), RL_ENUMERIC);
    assert_non_null(strstr(rl_error_message(), "logits[0, 7]"));
    free(logits), free(up), free(H), free(gz);
    rl_golden_free(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gae_golden),
        cmocka_unit_test(test_outcome_golden),
        cmocka_unit_test(test_reinforce_pp_and_returns_golden),
        cmocka_unit_test(test_pro_max_golden),
        cmocka_unit_test(test_kl_golden),
        cmocka_unit_test(test_ppo_golden),
        cmocka_unit_test(test_filter_golden),
        cmocka_unit_test(test_value_loss_golden),
        cmocka_unit_test(test_entropy_golden),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
