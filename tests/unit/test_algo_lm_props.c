/* test_algo_lm_props.c — properties, finite-difference gradient checks and
 * edge cases of the language-model RL algorithms (rlrt/algo headers).
 *
 * Finite differences: central, f(x + h) − f(x − h) over the perturbation
 * actually representable in f32, h = 1e-2 (the loss is evaluated with f32
 * per-token arithmetic and double sums; truncation error ~h²·f''' ≈ 2e-5
 * relative). Tolerance |fd − g| ≤ 2e-3·|g| + 1e-5·w_max, where w_max is the
 * largest aggregation weight. Inputs are drawn away from clip kinks so the
 * loss is smooth within ±2h. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "rlrt/error.h"
#include "common/core/rng.h"
#include "common/algo/advantage.h"
#include "common/algo/kl.h"
#include "common/algo/policy_loss.h"
#include "common/algo/filter.h"

static float *s_f(int64_t n)
{
    float *p = calloc((size_t)n, sizeof *p);
    assert_non_null(p);
    return p;
}

static void s_lengths_mask(rl_rng *r, float *mask, int64_t B, int64_t T)
{
    for (int64_t b = 0; b < B; b++) {
        int64_t len = (int64_t)rl_rng_below(r, (uint64_t)T + 1);
        for (int64_t t = 0; t < T; t++)
            mask[b * T + t] = t < len ? 1.0f : 0.0f;
    }
}

/* ---- REINFORCE Pro Max properties ----------------------------------------------- */

static void s_pro_max_inputs(rl_rng *r, int64_t B, int64_t T, float *rew, float *kl, float *mask)
{
    for (int64_t b = 0; b < B; b++)
        rew[b] = rl_rng_uniform(r) < 0.5f ? 1.0f : 0.0f;
    for (int64_t i = 0; i < B * T; i++)
        kl[i] = 0.05f * rl_rng_normal(r);
    s_lengths_mask(r, mask, B, T);
}

static void test_pro_max_mean0_var1(void **state)
{
    (void)state;
    rl_rng r;
    rl_rng_init(&r, 7, 1);
    int64_t n = 8, B = 64 * 8, T = 40, G = B / n;
    float *rew = s_f(B), *kl = s_f(B * T), *mask = s_f(B * T), *adv = s_f(B * T);
    s_pro_max_inputs(&r, B, T, rew, kl, mask);
    rl_pro_max_cfg cfg;
    rl_pro_max_cfg_default(&cfg, n);
    cfg.kl_coef = 0.01;
    uint8_t *st = malloc((size_t)G);
    rl_pro_max_result res;
    assert_int_equal(rl_adv_pro_max(&cfg, rew, kl, mask, NULL, NULL, B, T, adv, st, &res), RL_OK);
    int64_t checked = 0;
    for (int64_t g = 0; g < G; g++) {
        if (st[g] != RL_PM_NORMALIZED)
            continue;
        double s = 0, q = 0, c = 0;
        for (int64_t i = g * n * T; i < (g + 1) * n * T; i++)
            if (mask[i] != 0.0f && adv[i] != 0.0f) {
                s += adv[i];
                q += (double)adv[i] * adv[i];
                c++;
            }
        double mean = s / c, var = q / c - mean * mean;
        if (!(fabs(mean) < 1e-3 && fabs(var - 1.0) < 1e-2))
            fail_msg("group %lld: mean %g var %g over %g tokens", (long long)g, mean, var, c);
        checked++;
    }
    assert_true(checked > G / 2);
    assert_int_equal(res.n_groups, G);
    /* the monitoring metrics agree with the output over valid tokens */
    double s1 = 0, s2 = 0, nv = 0;
    for (int64_t i = 0; i < B * T; i++)
        if (mask[i] != 0.0f) {
            s1 += adv[i];
            s2 += (double)adv[i] * adv[i];
            nv++;
        }
    double mu = s1 / nv, sd = sqrt(s2 / nv - mu * mu);
    assert_float_equal(res.adv_mean, mu, 1e-5);
    assert_float_equal(res.adv_std, sd, 1e-5);
    /* RLOO-shaped rewards sum to 0 in every group */
    assert_true(fabs(res.reward_mean) < 1e-12);
    free(rew), free(kl), free(mask), free(adv), free(st);
}

static void test_pro_max_shuffle_invariant(void **state)
{
    (void)state;
    rl_rng r;
    rl_rng_init(&r, 11, 2);
    int64_t n = 4, B = 48, T = 17;
    float *rew = s_f(B), *kl = s_f(B * T), *mask = s_f(B * T), *adv = s_f(B * T);
    s_pro_max_inputs(&r, B, T, rew, kl, mask);
    for (int64_t b = 0; b < B; b++)
        rew[b] += 0.1f * rl_rng_normal(&r);
    rl_pro_max_cfg cfg;
    rl_pro_max_cfg_default(&cfg, n);
    cfg.kl_coef = 0.02;
    assert_int_equal(rl_adv_pro_max(&cfg, rew, kl, mask, NULL, NULL, B, T, adv, NULL, NULL),
                     RL_OK);
    int64_t *perm = malloc(sizeof(int64_t) * B), *prompt = malloc(sizeof(int64_t) * B);
    for (int64_t b = 0; b < B; b++)
        perm[b] = b;
    rl_rng_shuffle_i64(&r, perm, B);
    /* row j of the shuffled batch is original sample perm[j] */
    float *srew = s_f(B), *skl = s_f(B * T), *smask = s_f(B * T), *sadv = s_f(B * T);
    for (int64_t j = 0; j < B; j++) {
        srew[j] = rew[perm[j]];
        memcpy(skl + j * T, kl + perm[j] * T, sizeof(float) * T);
        memcpy(smask + j * T, mask + perm[j] * T, sizeof(float) * T);
        prompt[j] = 1000 + perm[j] / n;
    }
    rl_pro_max_result res;
    assert_int_equal(rl_adv_pro_max(&cfg, srew, skl, smask, perm, prompt, B, T, sadv, NULL, &res),
                     RL_OK);
    for (int64_t j = 0; j < B; j++)
        if (memcmp(sadv + j * T, adv + perm[j] * T, sizeof(float) * T) != 0)
            fail_msg("shuffled row %lld (index %lld) differs", (long long)j, (long long)perm[j]);
    /* gamma is forced to 1 with a warning; the result does not change */
    cfg.gamma = 0.9;
    assert_int_equal(rl_adv_pro_max(&cfg, srew, skl, smask, perm, prompt, B, T, skl, NULL, &res),
                     RL_OK);
    assert_true(res.warnings & RL_PM_WARN_GAMMA_FORCED);
    assert_memory_equal(skl, sadv, sizeof(float) * B * T);

    /* not a permutation: a repeated index, an out-of-range index */
    int64_t keep = perm[5];
    perm[5] = perm[9];
    assert_int_equal(rl_adv_pro_max(&cfg, srew, skl, smask, perm, NULL, B, T, sadv, NULL, NULL),
                     RL_EINVAL);
    assert_non_null(strstr(rl_error_message(), "appears twice"));
    perm[5] = B + 3;
    assert_int_equal(rl_adv_pro_max(&cfg, srew, skl, smask, perm, NULL, B, T, sadv, NULL, NULL),
                     RL_EINVAL);
    assert_non_null(strstr(rl_error_message(), "index[5]"));
    perm[5] = keep;
    /* a group with two prompts */
    int64_t save = prompt[3];
    prompt[3] = 77;
    assert_int_equal(rl_adv_pro_max(&cfg, srew, skl, smask, perm, prompt, B, T, sadv, NULL, NULL),
                     RL_EINVAL);
    assert_non_null(strstr(rl_error_message(), "two prompts"));
    assert_non_null(strstr(rl_error_message(), "prompt_id 77"));
    prompt[3] = save;
    free(rew), free(kl), free(mask), free(adv), free(perm), free(prompt);
    free(srew), free(skl), free(smask), free(sadv);
}

static void test_pro_max_edges(void **state)
{
    (void)state;
    int64_t n = 2, B = 6, T = 3;
    /* group 0: mixed; group 1: all-equal rewards, no KL → all zero (same-sign
     * fallback, zeros stay); group 2: one zero-length row. */
    float rew[6] = {1, 0, 1, 1, 2, 0};
    float mask[18] = {1, 1, 1, 1, 1, 0, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0};
    float adv[18];
    rl_pro_max_cfg cfg;
    rl_pro_max_cfg_default(&cfg, n);
    uint8_t st[3];
    rl_pro_max_result res;
    assert_int_equal(rl_adv_pro_max(&cfg, rew, NULL, mask, NULL, NULL, B, T, adv, st, &res), RL_OK);
    /* group 0: r̃ = ±1, A = +1 on 3 tokens, −1 on 2: S+ = 3, S− = −2, Q+ = 3,
     * Q− = 2, ratio = −1.5, α = sqrt(5 / (3 + 4.5)), β = 1.5α. */
    double a = sqrt(5.0 / (3.0 + 4.5 + 1e-8)), bb = 1.5 * a;
    for (int t = 0; t < 3; t++)
        assert_float_equal(adv[t], a, 1e-6);
    assert_float_equal(adv[3], -bb, 1e-6);
    assert_float_equal(adv[4], -bb, 1e-6);
    assert_true(adv[5] == 0.0f);
    assert_int_equal(st[0], RL_PM_NORMALIZED);
    assert_int_equal(st[1], RL_PM_SAME_SIGN);
    for (int i = 6; i < 12; i++)
        assert_true(adv[i] == 0.0f);
    /* group 2: r̃ = ±2; the zero-length row gets nothing; the other row's
     * tokens are all positive → same-sign fallback, raw returns (2, 2). */
    assert_int_equal(st[2], RL_PM_SAME_SIGN);
    assert_float_equal(adv[12], 2.0, 0);
    assert_float_equal(adv[13], 2.0, 0);
    for (int i = 14; i < 18; i++)
        assert_true(adv[i] == 0.0f);
    assert_int_equal(res.n_same_sign, 2);
    assert_int_equal(res.n_normalized, 1);

    /* uniform_scale: the all-equal group gets r/n = 0.5 on every token */
    cfg.uniform_scale = 1;
    assert_int_equal(rl_adv_pro_max(&cfg, rew, NULL, mask, NULL, NULL, B, T, adv, st, &res), RL_OK);
    assert_int_equal(st[1], RL_PM_UNIFORM);
    for (int i = 6; i < 12; i++)
        assert_float_equal(adv[i], 0.5, 0);
    assert_int_equal(res.n_uniform, 1);

    /* all-negative token advantages: k≥0 KL on an all-equal group */
    float kl[18];
    for (int i = 0; i < 18; i++)
        kl[i] = 0.5f;
    cfg.uniform_scale = 0;
    cfg.kl_coef = 0.1;
    assert_int_equal(rl_adv_pro_max(&cfg, rew, kl, mask, NULL, NULL, B, T, adv, st, &res), RL_OK);
    assert_int_equal(st[1], RL_PM_SAME_SIGN);
    /* returns of −0.05 per token: −0.15, −0.10, −0.05 */
    assert_float_equal(adv[6], -0.15, 1e-7);
    assert_float_equal(adv[7], -0.10, 1e-7);
    assert_float_equal(adv[8], -0.05, 1e-7);

    /* n not dividing the batch, n < 2 */
    cfg.n_samples = 4;
    assert_int_equal(rl_adv_pro_max(&cfg, rew, kl, mask, NULL, NULL, B, T, adv, NULL, NULL),
                     RL_ESHAPE);
    assert_non_null(strstr(rl_error_message(), "not a multiple"));
    cfg.n_samples = 1;
    assert_int_equal(rl_adv_pro_max(&cfg, rew, kl, mask, NULL, NULL, B, T, adv, NULL, NULL),
                     RL_ESHAPE);
    cfg.n_samples = 2;
    /* NaN / Inf */
    rew[4] = INFINITY;
    assert_int_equal(rl_adv_pro_max(&cfg, rew, kl, mask, NULL, NULL, B, T, adv, NULL, NULL),
                     RL_ENUMERIC);
    assert_non_null(strstr(rl_error_message(), "rewards[4]"));
    rew[4] = 2;
    kl[7] = NAN;
    assert_int_equal(rl_adv_pro_max(&cfg, rew, kl, mask, NULL, NULL, B, T, adv, NULL, NULL),
                     RL_ENUMERIC);
    assert_non_null(strstr(rl_error_message(), "kl[2, 1]"));
    /* NaN at a masked-out position is not read */
    kl[7] = 0.5f;
    kl[5] = NAN;
    assert_int_equal(rl_adv_pro_max(&cfg, rew, kl, mask, NULL, NULL, B, T, adv, NULL, NULL),
                     RL_OK);
}

/* ---- outcome estimators: edge cases ----------------------------------------------- */

static void test_outcome_edges(void **state)
{
    (void)state;
    /* rows: group 3 has one row; group 1 all-equal; row 5 is all-masked */
    int64_t B = 6, T = 2;
    float tr[12] = {0, 2, 0, 1, 0, 1, 0, 1, 0, 0.5, 0, 0};
    float mask[12] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0};
    int64_t group[6] = {3, 1, 1, 1, 8, 8};
    float adv[12], sc[6];
    assert_int_equal(rl_adv_grpo(tr, mask, group, B, T, RL_GRPO_EPS, 1, adv, sc), RL_OK);
    assert_float_equal(sc[0], 2.0 / (1.0 + 1e-6), 1e-7); /* size 1: mean 0, std 1 */
    for (int b = 1; b < 4; b++)
        assert_true(sc[b] == 0.0f); /* all-equal group */
    /* group 8: scores 0.5 and 0: std = sqrt(0.125) */
    double s = sqrt(0.125);
    assert_float_equal(sc[4], 0.25 / (s + 1e-6), 1e-6);
    assert_float_equal(sc[5], -0.25 / (s + 1e-6), 1e-6);
    assert_true(adv[10] == 0.0f && adv[11] == 0.0f); /* masked row */
    assert_int_equal(rl_adv_grpo(tr, mask, group, B, T, RL_GRPO_EPS, 0, adv, sc), RL_OK);
    assert_float_equal(sc[0], 2.0, 0); /* Dr.GRPO: size-1 group keeps r − 0 */
    assert_float_equal(sc[4], 0.25, 1e-7);
    assert_int_equal(rl_adv_rloo(tr, mask, group, B, T, adv), RL_OK);
    assert_float_equal(adv[0], 2.0, 0);
    assert_float_equal(adv[8], 0.5, 1e-7);
    tr[3] = NAN;
    assert_int_equal(rl_adv_grpo(tr, mask, group, B, T, RL_GRPO_EPS, 1, adv, sc), RL_ENUMERIC);
    assert_non_null(strstr(rl_error_message(), "token_rewards[1, 1]"));
    /* an all-masked batch whitens to zeros */
    float zm[12] = {0};
    tr[3] = 1;
    assert_int_equal(rl_adv_reinforce_pp(tr, zm, B, T, 1.0, adv, NULL), RL_OK);
    for (int i = 0; i < 12; i++)
        assert_true(adv[i] == 0.0f);
    /* whitening: mean 0, unbiased std 1 over the valid tokens */
    float x[12] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 99, 99}, w[12];
    assert_int_equal(rl_masked_whiten(x, mask, B, T, w), RL_OK);
    double m = 0, q = 0;
    for (int i = 0; i < 10; i++)
        m += w[i];
    for (int i = 0; i < 10; i++)
        q += (double)w[i] * w[i];
    assert_true(fabs(m) < 1e-5);
    assert_float_equal(q / 9.0, 1.0, 1e-5);
    assert_true(w[10] == 0.0f);
    assert_int_equal(rl_adv_grpo(tr, mask, group, -1, T, 0, 1, adv, sc), RL_ESHAPE);
    assert_int_equal(rl_adv_grpo(NULL, mask, group, B, T, 0, 1, adv, sc), RL_EINVAL);
}

/* ---- PPO loss ------------------------------------------------------------------- */

static void s_ppo_inputs(rl_rng *r, int64_t B, int64_t T, float *lp, float *old, float *adv,
                         float *mask, float *ent, float *ref, double clip_lo, double clip_hi,
                         double c)
{
    for (int64_t i = 0; i < B * T; i++) {
        old[i] = -3.0f * rl_rng_uniform(r);
        float nk;
        for (;;) { /* keep the ratio 3% away from every kink */
            nk = 0.5f * rl_rng_normal(r);
            double ratio = exp(nk);
            if (fabs(ratio - (1 - clip_lo)) > 0.03 && fabs(ratio - (1 + clip_hi)) > 0.03)
                break;
        }
        lp[i] = old[i] + nk;
        for (;;) {
            adv[i] = rl_rng_normal(r);
            if (fabs(adv[i]) > 0.05)
                break;
        }
        if (c > 0 && adv[i] < 0) { /* away from the dual-clip kink */
            double ratio = exp((double)lp[i] - old[i]);
            double Lc = fmax(-adv[i] * ratio,
                             -adv[i] * fmin(fmax(ratio, 1 - clip_lo), 1 + clip_hi));
            if (fabs(Lc - (-adv[i] * c)) < 0.05 * fabs(adv[i]))
                adv[i] = -adv[i];
        }
        ent[i] = 2.0f * rl_rng_uniform(r);
        ref[i] = lp[i] + 0.3f * rl_rng_normal(r);
    }
    s_lengths_mask(r, mask, B, T);
    mask[0] = 1; /* at least one token */
}

static double s_loss(const rl_ppo_loss_cfg *cfg, const float *lp, const float *old,
                     const float *adv, const float *mask, const float *ent, const float *ref,
                     int64_t B, int64_t T, float *scratch)
{
    rl_ppo_loss_out o;
    int rc = rl_ppo_policy_loss(cfg, lp, old, adv, mask, ent, ref, B, T, scratch, NULL, &o);
    if (rc)
        fail_msg("%s", rl_error_message());
    return o.loss;
}

static void test_ppo_finite_difference(void **state)
{
    (void)state;
    int64_t B = 4, T = 9, N = B * T;
    float *lp = s_f(N), *old = s_f(N), *adv = s_f(N), *mask = s_f(N), *ent = s_f(N),
          *ref = s_f(N), *gl = s_f(N), *ge = s_f(N), *scr = s_f(N);
    rl_rng r;
    rl_rng_init(&r, 3, 9);
    int64_t checked = 0;
    for (int agg = 0; agg < 4; agg++)
        for (int dual = 0; dual < 2; dual++)
            for (int kind = 0; kind < 4; kind++) {
                rl_ppo_loss_cfg cfg;
                rl_ppo_loss_cfg_default(&cfg);
                cfg.clip_ratio_high = 0.28;
                cfg.clip_ratio_c = dual ? 3.0 : 0.0;
                cfg.agg = (rl_loss_agg)agg;
                cfg.entropy_coeff = 0.01;
                cfg.kl_loss_coef = 0.2;
                cfg.kl_kind = (rl_kl_kind)kind;
                s_ppo_inputs(&r, B, T, lp, old, adv, mask, ent, ref, 0.2, 0.28,
                             cfg.clip_ratio_c);
                rl_ppo_loss_out o;
                assert_int_equal(
                    rl_ppo_policy_loss(&cfg, lp, old, adv, mask, ent, ref, B, T, gl, ge, &o),
                    RL_OK);
                double wmax = agg == 0 ? 1.0 / o.n_tokens : agg == 3 ? 1.0 / T : 1.0;
                for (int64_t i = 0; i < N; i++) {
                    if (kind == RL_KL_ABS && fabs((double)lp[i] - ref[i]) < 0.03)
                        continue; /* |x| has a kink at 0 */
                    for (int which = 0; which < 2; which++) {
                        float *x = which ? ent : lp;
                        float x0 = x[i];
                        double h = 1e-2;
                        x[i] = (float)(x0 + h);
                        double xp = x[i];
                        double fp = s_loss(&cfg, lp, old, adv, mask, ent, ref, B, T, scr);
                        x[i] = (float)(x0 - h);
                        double xm = x[i];
                        double fm = s_loss(&cfg, lp, old, adv, mask, ent, ref, B, T, scr);
                        x[i] = x0;
                        double fd = (fp - fm) / (xp - xm);
                        double gv = which ? ge[i] : gl[i];
                        if (fabs(fd - gv) > 2e-3 * fabs(gv) + 1e-5 * wmax)
                            fail_msg("agg %d dual %d kl %d: d loss/d %s[%lld] = %.8g, finite "
                                     "difference %.8g",
                                     agg, dual, kind, which ? "entropy" : "logp", (long long)i,
                                     gv, fd);
                        checked++;
                    }
                }
            }
    assert_true(checked > 1000);
    free(lp), free(old), free(adv), free(mask), free(ent), free(ref), free(gl), free(ge);
    free(scr);
}

static void test_kl_finite_difference(void **state)
{
    (void)state;
    int64_t N = 64;
    float *lp = s_f(N), *ref = s_f(N), *kl = s_f(N), *g = s_f(N), *k2 = s_f(N), *g2 = s_f(N);
    rl_rng r;
    rl_rng_init(&r, 5, 5);
    for (int64_t i = 0; i < N; i++) {
        lp[i] = -2.0f * rl_rng_uniform(&r);
        do
            ref[i] = lp[i] + 1.0f * rl_rng_normal(&r);
        while (fabs((double)ref[i] - lp[i]) < 0.05 || fabs((double)ref[i] - lp[i]) > 2.3);
    }
    for (int kind = 0; kind < 4; kind++) {
        assert_int_equal(rl_kl_penalty(lp, ref, NULL, 1, N, (rl_kl_kind)kind, 0, kl, g), RL_OK);
        for (int64_t i = 0; i < N; i++) {
            float x0 = lp[i];
            lp[i] = x0 + 1e-2f;
            double xp = lp[i];
            assert_int_equal(rl_kl_penalty(lp, ref, NULL, 1, N, (rl_kl_kind)kind, 0, k2, g2), 0);
            double fp = rl_kl_token((rl_kl_kind)kind, lp[i], ref[i], 0, NULL);
            lp[i] = x0 - 1e-2f;
            double xm = lp[i];
            double fm = rl_kl_token((rl_kl_kind)kind, lp[i], ref[i], 0, NULL);
            lp[i] = x0;
            double fd = (fp - fm) / (xp - xm);
            if (fabs(fd - g[i]) > 1e-3 * fabs(g[i]) + 1e-4)
                fail_msg("kl %d [%lld]: grad %.8g, finite difference %.8g", kind, (long long)i,
                         (double)g[i], fd);
        }
    }
    /* masked NaN is ignored; a valid NaN is named */
    float mask[4] = {1, 1, 0, 1}, a[4] = {-1, -2, NAN, -1}, b[4] = {-1.5f, -1, -1, -1}, o[4];
    assert_int_equal(rl_kl_penalty(a, b, mask, 1, 4, RL_KL_K3, 0, o, NULL), RL_OK);
    assert_true(o[2] == 0.0f);
    b[3] = -INFINITY;
    assert_int_equal(rl_kl_penalty(a, b, mask, 1, 4, RL_KL_K3, 0, o, NULL), RL_ENUMERIC);
    assert_non_null(strstr(rl_error_message(), "ref_logp[0, 3]"));
    free(lp), free(ref), free(kl), free(g), free(k2), free(g2);
}

static void test_value_loss_finite_difference(void **state)
{
    (void)state;
    int64_t B = 3, T = 6, N = B * T;
    float vp[18], v[18], R[18], mask[18], g[18];
    rl_rng r;
    rl_rng_init(&r, 4, 4);
    double clip = 0.2;
    for (int i = 0; i < N; i++) {
        v[i] = rl_rng_normal(&r);
        R[i] = rl_rng_normal(&r);
        do /* away from the clip bounds and from the l1 = l2 switch */
            vp[i] = v[i] + 0.5f * rl_rng_normal(&r);
        while (fabs(fabs((double)vp[i] - v[i]) - clip) < 0.03 ||
               fabs(fabs((double)vp[i] - R[i]) -
                    fabs(fmin(fmax(vp[i], v[i] - clip), v[i] + clip) - R[i])) < 0.03 ||
               fabs((double)vp[i] - R[i]) < 0.03);
        mask[i] = (i % T) < 4 + i / T ? 1.0f : 0.0f;
    }
    for (int agg = 0; agg < 4; agg++) {
        double L, f;
        assert_int_equal(rl_value_loss(vp, v, R, mask, B, T, clip, (rl_loss_agg)agg, 0, &L, &f, g),
                         RL_OK);
        for (int i = 0; i < N; i++) {
            float x0 = vp[i];
            double fx[2], xs[2];
            float scratch[18];
            for (int s = 0; s < 2; s++) {
                vp[i] = (float)(x0 + (s ? -1e-2 : 1e-2));
                xs[s] = vp[i];
                assert_int_equal(rl_value_loss(vp, v, R, mask, B, T, clip, (rl_loss_agg)agg, 0,
                                               &fx[s], &f, scratch),
                                 RL_OK);
            }
            vp[i] = x0;
            double fd = (fx[0] - fx[1]) / (xs[0] - xs[1]);
            if (fabs(fd - g[i]) > 1e-3 * fabs(g[i]) + 1e-6)
                fail_msg("agg %d: d loss / d vpred[%d] = %.8g, finite difference %.8g", agg, i,
                         (double)g[i], fd);
        }
    }
    vp[3] = NAN;
    double L, f;
    assert_int_equal(rl_value_loss(vp, v, R, mask, B, T, clip, RL_AGG_TOKEN_MEAN, 0, &L, &f, g),
                     RL_ENUMERIC);
    assert_non_null(strstr(rl_error_message(), "vpred[0, 3]"));
}

static void test_entropy_finite_difference(void **state)
{
    (void)state;
    int64_t N = 3, V = 7;
    float z[21], up[3] = {1.0f, -0.5f, 2.0f}, g[21], H[3];
    rl_rng r;
    rl_rng_init(&r, 8, 8);
    for (int i = 0; i < 21; i++)
        z[i] = 2.0f * rl_rng_normal(&r);
    assert_int_equal(rl_entropy_backward(z, up, N, V, g), RL_OK);
    for (int i = 0; i < 21; i++) {
        float z0 = z[i];
        double f[2], x[2];
        for (int s = 0; s < 2; s++) {
            z[i] = (float)(z0 + (s ? -1e-2 : 1e-2));
            x[s] = z[i];
            assert_int_equal(rl_entropy_from_logits(z, N, V, H), RL_OK);
            f[s] = up[0] * (double)H[0] + up[1] * (double)H[1] + up[2] * (double)H[2];
        }
        z[i] = z0;
        double fd = (f[0] - f[1]) / (x[0] - x[1]);
        /* H is stored in f32: ±6e-8·|H| of noise over a 2e-2 step */
        if (fabs(fd - g[i]) > 2e-3 * fabs(g[i]) + 2e-5)
            fail_msg("d H / d z[%d] = %.8g, finite difference %.8g", i, (double)g[i], fd);
    }
}

static void test_aggregate_weights(void **state)
{
    (void)state;
    int64_t B = 3, T = 4;
    float v[12], mask[12] = {1, 1, 1, 0, 1, 0, 0, 0, 0, 0, 0, 0}, w[12], w2[12];
    for (int i = 0; i < 12; i++)
        v[i] = (float)(i + 1);
    double res;
    /* token-mean: (1+2+3+5)/4 */
    assert_int_equal(rl_loss_aggregate(v, mask, B, T, RL_AGG_TOKEN_MEAN, 0, &res, w), RL_OK);
    assert_float_equal(res, 11.0 / 4, 1e-12);
    /* seq-mean-token-sum: mean over the two non-empty rows of 6 and 5 */
    assert_int_equal(rl_loss_aggregate(v, mask, B, T, RL_AGG_SEQ_MEAN_TOKEN_SUM, 0, &res, w), 0);
    assert_float_equal(res, 11.0 / 2, 1e-12);
    /* seq-mean-token-mean: (6/3 + 5/1) / 2 non-empty rows (verl's agg_loss
     * leaves the all-padding row 3 out of the mean) */
    assert_int_equal(rl_loss_aggregate(v, mask, B, T, RL_AGG_SEQ_MEAN_TOKEN_MEAN, 0, &res, w), 0);
    assert_float_equal(res, (6.0 / 3 + 5.0) / 2, 1e-7);
    /* with a caller's row count (verl's global_batch_size) it divides by that */
    assert_int_equal(rl_loss_aggregate(v, mask, B, T, RL_AGG_SEQ_MEAN_TOKEN_MEAN, 8, &res, w), 0);
    assert_float_equal(res, (6.0 / 3 + 5.0) / 8, 1e-7);
    assert_int_equal(rl_loss_aggregate(v, mask, B, T, RL_AGG_SEQ_MEAN_TOKEN_SUM, 8, &res, w), 0);
    assert_float_equal(res, 11.0 / 8, 1e-12);
    /* seq-mean-token-sum-norm: 11 / T, or 11 / 2 with a given norm */
    assert_int_equal(rl_loss_aggregate(v, mask, B, T, RL_AGG_SEQ_MEAN_TOKEN_SUM_NORM, 0, &res, w),
                     0);
    assert_float_equal(res, 11.0 / 4, 1e-12);
    assert_int_equal(rl_loss_aggregate(v, mask, B, T, RL_AGG_SEQ_MEAN_TOKEN_SUM_NORM, 2, &res, w2),
                     0);
    assert_float_equal(res, 11.0 / 2, 1e-12);
    /* the weights are the derivative: linear, so Σ w·v = result */
    for (int agg = 0; agg < 4; agg++) {
        assert_int_equal(rl_loss_aggregate(v, mask, B, T, (rl_loss_agg)agg, 0, &res, w), 0);
        double s = 0;
        for (int i = 0; i < 12; i++)
            s += (double)w[i] * v[i];
        assert_float_equal(s, res, 1e-5 * fabs(res));
    }
    rl_loss_agg a;
    assert_int_equal(rl_loss_agg_parse("seq-mean-token-sum-norm", &a), RL_OK);
    assert_int_equal(a, RL_AGG_SEQ_MEAN_TOKEN_SUM_NORM);
    assert_int_equal(rl_loss_agg_parse("token_mean", &a), RL_EINVAL);
}

/* The sequence means are over non-empty rows (verl's agg_loss): appending an
 * all-padding row changes neither the loss nor any gradient, whatever that
 * row holds; and a mini-batch split into micro-batches, each given the
 * mini-batch's count of non-empty rows as norm, sums to the whole batch's
 * loss and gradient (what a caller that sums gradients over micro-batches
 * and ranks must pass). */
static void test_seq_mean_skips_empty_rows(void **state)
{
    (void)state;
    enum { B = 5, T = 6, N = B * T };
    rl_rng r;
    rl_rng_init(&r, 11, 4);
    float lp[N], old[N], adv[N], mask[N], ent[N], ref[N];
    s_ppo_inputs(&r, B, T, lp, old, adv, mask, ent, ref, 0.2, 0.28, 3.0);
    for (int t = 0; t < T; t++) { /* rows 1 and 4 all padding, with junk values */
        mask[1 * T + t] = mask[4 * T + t] = 0.0f;
        lp[1 * T + t] = NAN;
        adv[4 * T + t] = 1e30f;
    }
    for (int t = 0; t < 2; t++) /* every other row keeps a valid token */
        mask[0 * T + t] = mask[2 * T + t] = mask[3 * T + t] = 1.0f;
    /* the same batch without the padding rows */
    enum { BK = 3 };
    const int keep[BK] = {0, 2, 3};
    float klp[BK * T], kold[BK * T], kadv[BK * T], kmask[BK * T], kent[BK * T], kref[BK * T];
    for (int k = 0; k < BK; k++)
        for (int t = 0; t < T; t++) {
            int i = keep[k] * T + t, j = k * T + t;
            klp[j] = lp[i], kold[j] = old[i], kadv[j] = adv[i];
            kmask[j] = mask[i], kent[j] = ent[i], kref[j] = ref[i];
        }
    for (int agg = RL_AGG_SEQ_MEAN_TOKEN_SUM; agg <= RL_AGG_SEQ_MEAN_TOKEN_MEAN; agg++) {
        rl_ppo_loss_cfg cfg;
        rl_ppo_loss_cfg_default(&cfg);
        cfg.agg = (rl_loss_agg)agg;
        cfg.entropy_coeff = 0.01;
        cfg.kl_loss_coef = 0.1;
        float g[N], ge[N], kg[BK * T], kge[BK * T];
        rl_ppo_loss_out o, ko;
        assert_int_equal(rl_ppo_policy_loss(&cfg, lp, old, adv, mask, ent, ref, B, T, g, ge, &o),
                         RL_OK);
        assert_int_equal(rl_ppo_policy_loss(&cfg, klp, kold, kadv, kmask, kent, kref, BK, T, kg,
                                            kge, &ko),
                         RL_OK);
        if (fabs(o.loss - ko.loss) > 1e-12 * fabs(ko.loss) || o.pg_loss != ko.pg_loss)
            fail_msg("agg %d: loss %.17g with 2 padding rows, %.17g without", agg, o.loss,
                     ko.loss);
        for (int k = 0; k < BK; k++)
            for (int t = 0; t < T; t++) {
                assert_true(g[keep[k] * T + t] == kg[k * T + t]);
                assert_true(ge[keep[k] * T + t] == kge[k * T + t]);
            }
        for (int t = 0; t < T; t++)
            assert_true(g[1 * T + t] == 0.0f && g[4 * T + t] == 0.0f);
        /* by hand: the mean of the 3 non-empty rows' sums (or token means) */
        double want = 0.0, res;
        float w[N];
        for (int b = 0; b < B; b++) {
            double s = 0.0, n = 0.0;
            for (int t = 0; t < T; t++)
                if (mask[b * T + t] != 0.0f) {
                    s += ent[b * T + t];
                    n += 1.0;
                }
            if (n > 0)
                want += agg == RL_AGG_SEQ_MEAN_TOKEN_SUM ? s : s / (n + 1e-8);
        }
        want /= BK;
        assert_int_equal(rl_loss_aggregate(ent, mask, B, T, (rl_loss_agg)agg, 0, &res, w), RL_OK);
        if (fabs(res - want) > 1e-6 * fabs(want))
            fail_msg("agg %d: entropy mean %.9g, over non-empty rows by hand %.9g", agg, res, want);
        assert_float_equal(o.entropy, res, 1e-6 * fabs(res));
        /* micro-batches of rows {0, 1} and {2, 3, 4} with norm = 3 non-empty
         * rows of the whole batch add up to the whole batch */
        cfg.norm = BK;
        rl_ppo_loss_out a, b;
        float ga[N], gea[N];
        assert_int_equal(rl_ppo_policy_loss(&cfg, lp, old, adv, mask, ent, ref, 2, T, ga, gea, &a),
                         RL_OK);
        assert_int_equal(rl_ppo_policy_loss(&cfg, lp + 2 * T, old + 2 * T, adv + 2 * T,
                                            mask + 2 * T, ent + 2 * T, ref + 2 * T, 3, T,
                                            ga + 2 * T, gea + 2 * T, &b),
                         RL_OK);
        if (fabs(a.loss + b.loss - o.loss) > 1e-6 * fabs(o.loss))
            fail_msg("agg %d: micro-batches sum to %.9g, whole batch %.9g", agg, a.loss + b.loss,
                     o.loss);
        for (int i = 0; i < N; i++)
            assert_float_equal(ga[i], g[i], 1e-6 * fabs(g[i]) + 1e-9);
    }
}

static void test_ppo_on_policy_and_edges(void **state)
{
    (void)state;
    int64_t B = 3, T = 4;
    float lp[12], old[12], adv[12], mask[12] = {1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0};
    float g[12];
    for (int i = 0; i < 12; i++) {
        lp[i] = old[i] = -0.5f * (float)(i % 5);
        adv[i] = (float)(i % 3) - 1.0f;
    }
    /* ratio 1: the loss is the unclipped surrogate −Σ A·m / Σ m, the
     * gradient −A·m/Σm, nothing is clipped and the approximate KL is 0 */
    rl_ppo_loss_cfg cfg;
    rl_ppo_loss_cfg_default(&cfg);
    rl_ppo_loss_out o;
    assert_int_equal(rl_ppo_policy_loss(&cfg, lp, old, adv, mask, NULL, NULL, B, T, g, NULL, &o),
                     RL_OK);
    double s = 0;
    for (int i = 0; i < 12; i++)
        s += -adv[i] * mask[i];
    assert_float_equal(o.loss, s / 6, 1e-12);
    for (int i = 0; i < 12; i++)
        assert_float_equal(g[i], -adv[i] * mask[i] / 6.0, 1e-7);
    assert_true(o.clipfrac == 0 && o.clipfrac_lower == 0 && o.ppo_kl == 0);
    assert_float_equal(o.n_tokens, 6, 0);

    /* all-masked batch: loss 0, gradient 0, for every aggregation */
    float zm[12] = {0};
    for (int agg = 0; agg < 4; agg++) {
        cfg.agg = (rl_loss_agg)agg;
        assert_int_equal(rl_ppo_policy_loss(&cfg, lp, old, adv, zm, NULL, NULL, B, T, g, NULL, &o),
                         RL_OK);
        assert_true(o.loss == 0.0);
        for (int i = 0; i < 12; i++)
            assert_true(g[i] == 0.0f);
    }
    cfg.agg = RL_AGG_TOKEN_MEAN;
    /* NaN at a masked position is ignored; at a valid one it is named */
    lp[10] = NAN;
    assert_int_equal(rl_ppo_policy_loss(&cfg, lp, old, adv, mask, NULL, NULL, B, T, g, NULL, &o),
                     RL_OK);
    assert_float_equal(o.loss, s / 6, 1e-12);
    assert_true(g[10] == 0.0f);
    adv[5] = INFINITY;
    assert_int_equal(rl_ppo_policy_loss(&cfg, lp, old, adv, mask, NULL, NULL, B, T, g, NULL, &o),
                     RL_ENUMERIC);
    assert_non_null(strstr(rl_error_message(), "advantages[1, 1]"));
    adv[5] = 0;
    lp[2] = -INFINITY;
    assert_int_equal(rl_ppo_policy_loss(&cfg, lp, old, adv, mask, NULL, NULL, B, T, g, NULL, &o),
                     RL_ENUMERIC);
    assert_non_null(strstr(rl_error_message(), "logp[0, 2]"));
    lp[2] = old[2];
    /* bad options */
    cfg.clip_ratio_c = 0.5;
    assert_int_equal(rl_ppo_policy_loss(&cfg, lp, old, adv, mask, NULL, NULL, B, T, g, NULL, &o),
                     RL_EINVAL);
    assert_non_null(strstr(rl_error_message(), "clip_ratio_c"));
    cfg.clip_ratio_c = 3;
    cfg.entropy_coeff = 0.1;
    assert_int_equal(rl_ppo_policy_loss(&cfg, lp, old, adv, mask, NULL, NULL, B, T, g, NULL, &o),
                     RL_EINVAL);
}

static void test_ppo_thread_count_deterministic(void **state)
{
    (void)state;
    int64_t B = 37, T = 301, N = B * T;
    float *lp = s_f(N), *old = s_f(N), *adv = s_f(N), *mask = s_f(N), *ent = s_f(N),
          *ref = s_f(N), *g1 = s_f(N), *g2 = s_f(N);
    rl_rng r;
    rl_rng_init(&r, 1, 1);
    s_ppo_inputs(&r, B, T, lp, old, adv, mask, ent, ref, 0.2, 0.2, 3.0);
    rl_ppo_loss_cfg cfg;
    rl_ppo_loss_cfg_default(&cfg);
    cfg.kl_loss_coef = 0.1;
    cfg.entropy_coeff = 0.01;
    rl_ppo_loss_out o1, o2;
    extern void omp_set_num_threads(int);
    omp_set_num_threads(1);
    assert_int_equal(rl_ppo_policy_loss(&cfg, lp, old, adv, mask, ent, ref, B, T, g1, NULL, &o1), 0);
    omp_set_num_threads(2);
    assert_int_equal(rl_ppo_policy_loss(&cfg, lp, old, adv, mask, ent, ref, B, T, g2, NULL, &o2), 0);
    assert_memory_equal(&o1, &o2, sizeof o1);
    assert_memory_equal(g1, g2, sizeof(float) * N);
    free(lp), free(old), free(adv), free(mask), free(ent), free(ref), free(g1), free(g2);
}

static void test_filter_edges(void **state)
{
    (void)state;
    float metric[5] = {0.5f, 0.5f, 1.0f, 0.0f, 0.99f};
    int64_t group[5] = {1, 1, 2, 3, 4};
    uint8_t keep[5];
    rl_filter_result res;
    /* strictly inside: a mean equal to high is dropped */
    assert_int_equal(rl_filter_groups(metric, group, 5, 0.0, 0.99, keep, NULL, &res), RL_OK);
    assert_int_equal(keep[0], 1);
    assert_int_equal(keep[2], 0);
    assert_int_equal(keep[3], 0);
    assert_int_equal(keep[4], 0);
    assert_int_equal(res.n_groups_kept, 1);
    assert_int_equal(rl_filter_groups(metric, group, 5, 0.5, 0.5, keep, NULL, &res), RL_EINVAL);
    metric[3] = NAN;
    assert_int_equal(rl_filter_groups(metric, group, 5, 0.0, 1.0, keep, NULL, &res), RL_ENUMERIC);
    assert_non_null(strstr(rl_error_message(), "metric[3]"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pro_max_mean0_var1),
        cmocka_unit_test(test_pro_max_shuffle_invariant),
        cmocka_unit_test(test_pro_max_edges),
        cmocka_unit_test(test_outcome_edges),
        cmocka_unit_test(test_ppo_finite_difference),
        cmocka_unit_test(test_kl_finite_difference),
        cmocka_unit_test(test_value_loss_finite_difference),
        cmocka_unit_test(test_entropy_finite_difference),
        cmocka_unit_test(test_aggregate_weights),
        cmocka_unit_test(test_seq_mean_skips_empty_rows),
        cmocka_unit_test(test_ppo_on_policy_and_edges),
        cmocka_unit_test(test_ppo_thread_count_deterministic),
        cmocka_unit_test(test_filter_edges),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
