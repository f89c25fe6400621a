/* test_algo_diffusion.c — diffusion GRPO functions against the float64
 * PyTorch references (tests/reference/gen_algo_diffusion.py), finite
 * differences, properties and documented edge cases. */
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
#include "common/core/rng.h"
#include "common/algo/diffusion/diffusion.h"
#include "common/sde/diffusion_sde.h"
#include "common/batch/diffusion.h"
#include "common/batch/estimators.h"
#include "common/schema/diffusion.h"

static rl_golden *s_load(void)
{
    rl_golden *g = rl_golden_load("tests/golden/algo_flow/diffusion.safetensors");
    if (!g)
        fail_msg("%s", rl_error_message());
    return g;
}

static void s_close_f32(const char *what, const float *got, const rl_golden *g,
                        const char *name, int64_t n, double atol, double rtol)
{
    int64_t m = 0;
    double *want = rl_golden_f64(g, name, &m);
    assert_int_equal(m, n);
    int64_t bad = rl_check_close_f32(what, got, want, n, atol, rtol);
    free(want);
    assert_int_equal(bad, 0);
}

static void s_close_scalar(const char *what, double got, const rl_golden *g, const char *name,
                           double atol, double rtol)
{
    double want = rl_golden_scalar(g, name);
    if (rl_check_close_f64(what, &got, &want, 1, atol, rtol) != 0)
        fail_msg("%s mismatch", what);
}

static void test_sigmas(void **state)
{
    (void)state;
    rl_golden *g = s_load();
    float s[11];
    assert_int_equal(rl_diffusion_sigmas(10, 1.0, s), 0);
    s_close_f32("sigmas shift 1", s, g, "sigmas_s1", 11, 1e-7, 1e-6);
    assert_true(s[0] == 1.0f && s[10] == 0.0f);
    assert_int_equal(rl_diffusion_sigmas(10, 3.0, s), 0);
    s_close_f32("sigmas shift 3", s, g, "sigmas_s3", 11, 1e-7, 1e-6);
    for (int k = 0; k < 10; k++)
        assert_true(s[k] > s[k + 1]);
    assert_int_equal(rl_diffusion_sigmas(10, 0.0, s), RL_EINVAL);
    assert_int_equal(rl_diffusion_sigmas(0, 1.0, s), RL_EINVAL);
    rl_golden_free(g);
}

static void test_sde_step_golden_and_fd(void **state)
{
    (void)state;
    rl_golden *g = s_load();
    const int64_t B = 4, D = 24;
    const double nl = 0.7;
    float *x = rl_golden_f32(g, "x", NULL), *v = rl_golden_f32(g, "v", NULL);
    float *noise = rl_golden_f32(g, "noise", NULL), *sig = rl_golden_f32(g, "sigma", NULL);
    float *sn = rl_golden_f32(g, "sigma_next", NULL), *v2 = rl_golden_f32(g, "v2", NULL);
    float *gl = rl_golden_f32(g, "grad_logp", NULL), *xr = rl_golden_f32(g, "x_next", NULL);
    assert_true(sig[0] == 1.0f); /* σ = 1 uses the next σ: covered */
    float xn[96], lp[4], gv[96];
    assert_int_equal(rl_diffusion_sde_step(x, v, sig, sn, nl, noise, B, D, xn, lp), 0);
    s_close_f32("x_next", xn, g, "x_next", B * D, 1e-6, 1e-5);
    s_close_f32("logp (sample)", lp, g, "logp_sample", B, 1e-5, 1e-5);
    assert_int_equal(rl_diffusion_sde_logprob(x, v2, xr, sig, sn, nl, B, D, lp, gl, gv), 0);
    s_close_f32("logp", lp, g, "logp", B, 1e-5, 1e-5);
    s_close_f32("grad_v", gv, g, "grad_v", B * D, 1e-6, 1e-5);
    for (int64_t k = 0; k < B * D; k += 5) {
        float lpp[4], lpm[4];
        const float keep = v2[k];
        v2[k] = keep + 1e-2f;
        const double hp = (double)v2[k] - keep;
        rl_diffusion_sde_logprob(x, v2, xr, sig, sn, nl, B, D, lpp, NULL, NULL);
        v2[k] = keep - 1e-2f;
        const double hm = keep - (double)v2[k];
        rl_diffusion_sde_logprob(x, v2, xr, sig, sn, nl, B, D, lpm, NULL, NULL);
        v2[k] = keep;
        const int64_t i = k / D;
        const double fd = gl[i] * ((double)lpp[i] - lpm[i]) / (hp + hm);
        if (!(fabs(fd - gv[k]) <= 1e-3 + 1e-3 * fabs(fd)))
            fail_msg("FD %g vs grad %g at %lld", fd, (double)gv[k], (long long)k);
    }
    /* σ = 1 by hand: std_t = nl·sqrt(1/(1 − σ_next)), s = std_t·sqrt(1 − σ_next) = nl */
    {
        float x0[1] = {0}, v0[1] = {0}, one[1] = {1.0f}, sn1[1] = {0.75f}, z[1] = {1.0f}, o[1], l[1];
        assert_int_equal(rl_diffusion_sde_step(x0, v0, one, sn1, 0.7, z, 1, 1, o, l), 0);
        assert_true(fabs(o[0] - 0.7) < 1e-7);
        assert_true(fabs(l[0] - (-0.5 - log(0.7) - 0.5 * log(2 * M_PI))) < 1e-6);
    }
    /* errors: σ_next ≥ σ, noise_level 0, NaN named */
    float bad_sn[4] = {0.9f, 0.9f, 0.95f, 0.0f};
    assert_int_equal(rl_diffusion_sde_step(x, v, sig, bad_sn, nl, noise, B, D, xn, lp), RL_ERANGE);
    assert_non_null(strstr(rl_error_message(), "row 2"));
    assert_int_equal(rl_diffusion_sde_step(x, v, sig, sn, 0.0, noise, B, D, xn, lp), RL_EINVAL);
    x[30] = NAN;
    assert_int_equal(rl_diffusion_sde_step(x, v, sig, sn, nl, noise, B, D, xn, lp), RL_ENUMERIC);
    assert_non_null(strstr(rl_error_message(), "x[30]"));
    free(x); free(v); free(noise); free(sig); free(sn); free(v2); free(gl); free(xr);
    rl_golden_free(g);
}

/* The KL of a step to the reference's step: by hand, as the Gaussian
 * log-prob identity, as the Monte-Carlo mean of logp − logp_ref under the
 * policy's step, and its gradient by finite differences. */
static void test_sde_kl(void **state)
{
    (void)state;
    /* by hand. Row 0: σ 0.5 → 0.25, noise 0.5: dt = −0.25, std_t = 0.5,
     * cv = (1 + 0.25·0.5/1)·(−0.25) = −0.28125, s = 0.5·0.5 = 0.25;
     * v − v_ref = (1, −2): kl = cv²·(1 + 4)/2 / (2s²) = 1.58203125.
     * Row 1: σ = 1 → 0.75: std_t = 0.5·sqrt(1/0.25) = 1, cv = dt = −0.25,
     * s = 0.5; v − v_ref = (0.5, 0.5): kl = 0.0625·0.25 / 0.5 = 0.03125. */
    {
        float v[4] = {1.0f, 0.0f, 0.75f, -0.25f}, vr[4] = {0.0f, 2.0f, 0.25f, -0.75f};
        float sg[2] = {0.5f, 1.0f}, sn[2] = {0.25f, 0.75f}, kl[2], gv[4];
        assert_int_equal(rl_diffusion_sde_kl(v, vr, sg, sn, 0.5, 2, 2, kl, NULL, gv), 0);
        assert_true(fabs(kl[0] - 1.58203125) < 1e-6);
        assert_true(fabs(kl[1] - 0.03125) < 1e-7);
        /* ∂kl/∂v = cv²(v − v_ref)/(D s²): row 0 0.0791015625·(1, −2)/(2·0.0625) */
        assert_true(fabs(gv[0] - 0.6328125) < 1e-6 && fabs(gv[1] + 1.265625) < 1e-6);
        assert_true(fabs(gv[2] - 0.0625) < 1e-7 && fabs(gv[3] - 0.0625) < 1e-7);
        /* the same model: no KL and no gradient */
        assert_int_equal(rl_diffusion_sde_kl(v, v, sg, sn, 0.5, 2, 2, kl, NULL, gv), 0);
        assert_true(kl[0] == 0.0f && kl[1] == 0.0f && gv[0] == 0.0f && gv[3] == 0.0f);
    }
    enum { B = 3, D = 20000 };
    float *x = malloc(sizeof(float) * B * D), *v = malloc(sizeof(float) * B * D);
    float *vr = malloc(sizeof(float) * B * D), *z = malloc(sizeof(float) * B * D);
    float *mu = malloc(sizeof(float) * B * D), *gv = malloc(sizeof(float) * B * D);
    assert_true(x && v && vr && z && mu && gv);
    rl_rng r;
    rl_rng_init(&r, 13, 0);
    for (int64_t k = 0; k < (int64_t)B * D; k++) {
        x[k] = rl_rng_normal(&r);
        v[k] = rl_rng_normal(&r);
        vr[k] = v[k] + 0.3f * rl_rng_normal(&r);
        z[k] = 0.0f;
    }
    float sg[B] = {1.0f, 0.6f, 0.2f}, sn[B] = {0.8f, 0.45f, 0.05f}, kl[B], gk[B] = {0.5f, -2.0f, 1.5f};
    const double nl = 0.7;
    assert_int_equal(rl_diffusion_sde_kl(v, vr, sg, sn, nl, B, D, kl, NULL, NULL), 0);
    /* KL = logp(mean; v) − logp(mean; v_ref): the step's own mean is its mode */
    float lp[B], lpr[B];
    assert_int_equal(rl_diffusion_sde_step(x, v, sg, sn, nl, z, B, D, mu, NULL), 0);
    assert_int_equal(rl_diffusion_sde_logprob(x, v, mu, sg, sn, nl, B, D, lp, NULL, NULL), 0);
    assert_int_equal(rl_diffusion_sde_logprob(x, vr, mu, sg, sn, nl, B, D, lpr, NULL, NULL), 0);
    for (int i = 0; i < B; i++) {
        assert_true(kl[i] > 0.0f);
        if (!(fabs((lp[i] - lpr[i]) - kl[i]) <= 1e-4 + 1e-3 * kl[i]))
            fail_msg("row %d: kl %g vs logp difference %g", i, (double)kl[i],
                     (double)(lp[i] - lpr[i]));
    }
    /* E_{x' ~ policy step}[logp(x') − logp_ref(x')] = KL (mean over D draws):
     * the estimate is KL + mean_j Δ_j·ε_j/s, of std sqrt(2·KL/D); allow 4 std */
    for (int64_t k = 0; k < (int64_t)B * D; k++)
        z[k] = rl_rng_normal(&r);
    assert_int_equal(rl_diffusion_sde_step(x, v, sg, sn, nl, z, B, D, mu, NULL), 0);
    assert_int_equal(rl_diffusion_sde_logprob(x, v, mu, sg, sn, nl, B, D, lp, NULL, NULL), 0);
    assert_int_equal(rl_diffusion_sde_logprob(x, vr, mu, sg, sn, nl, B, D, lpr, NULL, NULL), 0);
    for (int i = 0; i < B; i++)
        if (!(fabs((lp[i] - lpr[i]) - kl[i]) <= 4.0 * sqrt(2.0 * kl[i] / D) + 1e-5))
            fail_msg("row %d: kl %g vs Monte-Carlo %g", i, (double)kl[i], (double)(lp[i] - lpr[i]));
    /* gradient: central differences (kl is quadratic in v) */
    assert_int_equal(rl_diffusion_sde_kl(v, vr, sg, sn, nl, B, D, kl, gk, gv), 0);
    for (int64_t k = 0; k < (int64_t)B * D; k += 997) {
        float kp[B], km[B];
        const float keep = v[k];
        v[k] = keep + 1e-1f;
        const double hp = (double)v[k] - keep;
        rl_diffusion_sde_kl(v, vr, sg, sn, nl, B, D, kp, NULL, NULL);
        v[k] = keep - 1e-1f;
        const double hm = keep - (double)v[k];
        rl_diffusion_sde_kl(v, vr, sg, sn, nl, B, D, km, NULL, NULL);
        v[k] = keep;
        const int64_t i = k / D;
        const double fd = gk[i] * ((double)kp[i] - km[i]) / (hp + hm);
        if (!(fabs(fd - gv[k]) <= 2e-6 + 2e-2 * fabs(fd)))
            fail_msg("FD %g vs grad %g at %lld", fd, (double)gv[k], (long long)k);
    }
    /* errors */
    assert_int_equal(rl_diffusion_sde_kl(v, vr, sg, sn, 0.0, B, D, kl, NULL, NULL), RL_EINVAL);
    assert_int_equal(rl_diffusion_sde_kl(v, NULL, sg, sn, nl, B, D, kl, NULL, NULL), RL_EINVAL);
    vr[D + 7] = NAN;
    assert_int_equal(rl_diffusion_sde_kl(v, vr, sg, sn, nl, B, D, kl, NULL, NULL), RL_ENUMERIC);
    assert_non_null(strstr(rl_error_message(), "v_ref[20007]"));
    free(x); free(v); free(vr); free(z); free(mu); free(gv);
}

static void test_advantages(void **state)
{
    (void)state;
    rl_golden *g = s_load();
    int64_t n = 0;
    float *r = rl_golden_f32(g, "rewards", &n);
    int64_t *grp = rl_golden_i64(g, "group", NULL);
    float adv[11];
    assert_int_equal(n, 11);
    assert_int_equal(rl_diffusion_grpo_advantages(r, grp, n, 5, 1, 1, -INFINITY, 1e-8, adv), 0);
    s_close_f32("adv group", adv, g, "adv_group", n, 1e-6, 1e-5);
    assert_true(adv[10] == 0.0f); /* group 3 has one row: documented A = 0 */
    assert_int_equal(rl_diffusion_grpo_advantages(r, grp, n, 5, 1, 1, 0.5, 1e-8, adv), 0);
    s_close_f32("adv group thr", adv, g, "adv_group_thr", n, 1e-6, 1e-5);
    assert_true(adv[6] == 0.0f && adv[7] == 0.0f && adv[8] == 0.0f); /* mean 0.23 < 0.5 */
    assert_int_equal(rl_diffusion_grpo_advantages(r, NULL, n, 0, 0, 1, 0.5, 1e-8, adv), 0);
    s_close_f32("adv global", adv, g, "adv_global", n, 1e-6, 1e-5);
    /* global batch of one row */
    assert_int_equal(rl_diffusion_grpo_advantages(r, NULL, 1, 0, 0, 1, 0.0, 1e-8, adv), 0);
    assert_true(adv[0] == 0.0f);
    /* equal rewards in a group: zero spread, A = 0 exactly */
    float same[3] = {2, 2, 2};
    int64_t g0[3] = {0, 0, 0};
    assert_int_equal(rl_diffusion_grpo_advantages(same, g0, 3, 1, 1, 1, -INFINITY, 1e-8, adv), 0);
    assert_true(adv[0] == 0.0f && adv[2] == 0.0f);
    /* norm_by_std 0: r − group mean, not divided (by hand: groups {1, 2, 6},
     * {0.5, 0.5}, and a one-row group) and r − global mean */
    {
        float rr[6] = {1, 2, 6, 0.5f, 0.5f, 2}, a6[6];
        int64_t gg[6] = {0, 0, 0, 1, 1, 2};
        assert_int_equal(rl_diffusion_grpo_advantages(rr, gg, 6, 3, 1, 0, -INFINITY, 1e-8, a6), 0);
        assert_true(a6[0] == -2.0f && a6[1] == -1.0f && a6[2] == 3.0f);
        assert_true(a6[3] == 0.0f && a6[4] == 0.0f && a6[5] == 0.0f);
        assert_int_equal(rl_diffusion_grpo_advantages(rr, NULL, 6, 0, 0, 0, 0.0, 1e-8, a6), 0);
        assert_true(a6[0] == -1.0f && a6[2] == 4.0f && a6[3] == -1.5f);
    }
    /* errors */
    grp[2] = 7;
    assert_int_equal(rl_diffusion_grpo_advantages(r, grp, n, 5, 1, 1, 0.0, 1e-8, adv), RL_ERANGE);
    assert_non_null(strstr(rl_error_message(), "group[2]=7"));
    r[4] = NAN;
    assert_int_equal(rl_diffusion_grpo_advantages(r, NULL, n, 0, 0, 1, 0.0, 1e-8, adv), RL_ENUMERIC);
    assert_non_null(strstr(rl_error_message(), "rewards[4]"));
    free(r); free(grp);
    rl_golden_free(g);
}

/* The multiplier of a constrained reward term: its integral rises by
 * ki·(floor − mean) while the term is under its floor and falls while above;
 * λ adds kp·(floor − mean); both stay in [0, lambda_max]; bad values are
 * errors that name them and leave the state. */
static void test_constraint_pi(void **state)
{
    (void)state;
    rl_constraint_pi st = {1.0, 1.0};
    assert_int_equal(rl_constraint_pi_update(&st, 2.0, 0.0, 0.85, 0.75, 100), 0);
    assert_true(fabs(st.integral - 1.2) < 1e-12 && fabs(st.lambda - 1.2) < 1e-12);
    assert_int_equal(rl_constraint_pi_update(&st, 2.0, 0.0, 0.85, 0.95, 100), 0);
    assert_true(fabs(st.integral - 1.0) < 1e-12 && fabs(st.lambda - 1.0) < 1e-12);
    /* the proportional part: in λ for this step only, not in the integral */
    assert_int_equal(rl_constraint_pi_update(&st, 1.0, 10.0, 0.85, 0.65, 100), 0);
    assert_true(fabs(st.integral - 1.2) < 1e-12 && fabs(st.lambda - 3.2) < 1e-12);
    assert_int_equal(rl_constraint_pi_update(&st, 1.0, 20.0, 0.85, 0.95, 100), 0);
    assert_true(fabs(st.integral - 1.1) < 1e-12 && st.lambda == 0.0); /* 1.1 − 2.0 < 0 → 0 */
    assert_int_equal(rl_constraint_pi_update(&st, 20.0, 0.0, 0.85, 1.0, 100), 0);
    assert_true(st.integral == 0.0 && st.lambda == 0.0); /* clamped at 0, not −1.9 */
    assert_int_equal(rl_constraint_pi_update(&st, 1000.0, 1.0, 0.85, 0.0, 5), 0);
    assert_true(st.integral == 5.0 && st.lambda == 5.0); /* clamped at lambda_max */
    assert_int_equal(rl_constraint_pi_update(&st, 0.0, 0.0, 0.85, 0.0, 5), 0);
    assert_true(st.integral == 5.0 && st.lambda == 5.0); /* ki 0 holds it */
    assert_int_equal(rl_constraint_pi_update(&st, 1.0, 0.0, 0.85, NAN, 5), RL_EINVAL);
    assert_non_null(strstr(rl_error_message(), "mean=nan"));
    assert_true(st.integral == 5.0 && st.lambda == 5.0); /* an error leaves it */
    assert_int_equal(rl_constraint_pi_update(&st, -1.0, 0.0, 0.85, 0.5, 5), RL_EINVAL);
    assert_non_null(strstr(rl_error_message(), "ki=-1"));
    assert_int_equal(rl_constraint_pi_update(NULL, 1.0, 0.0, 0.85, 0.5, 5), RL_EINVAL);
}

static void test_grpo_loss(void **state)
{
    (void)state;
    rl_golden *g = s_load();
    const int64_t n = 12;
    float *old = rl_golden_f32(g, "old_logp", NULL), *lp = rl_golden_f32(g, "new_logp", NULL);
    float *adv = rl_golden_f32(g, "adv", NULL), *mask = rl_golden_f32(g, "mask", NULL);
    const struct { const char *tag; double clip, amax; } cases[2] = {
        {"c02", 0.2, 10.0}, {"c1em4", 1e-4, 5.0}};
    for (int c = 0; c < 2; c++) {
        float grad[12];
        char name[64];
        rl_diffusion_grpo_metrics met;
        assert_int_equal(rl_diffusion_grpo_loss(lp, old, adv, mask, n, cases[c].clip, cases[c].amax,
                                                grad, &met), 0);
        snprintf(name, sizeof name, "loss_%s", cases[c].tag);
        s_close_scalar(name, met.loss, g, name, 1e-7, 1e-6);
        snprintf(name, sizeof name, "grad_%s", cases[c].tag);
        s_close_f32(name, grad, g, name, n, 1e-7, 1e-5);
        snprintf(name, sizeof name, "clipfrac_%s", cases[c].tag);
        s_close_scalar(name, met.clip_frac, g, name, 1e-12, 0);
        snprintf(name, sizeof name, "kl_%s", cases[c].tag);
        s_close_scalar(name, met.approx_kl, g, name, 1e-9, 1e-6);
        snprintf(name, sizeof name, "ratio_%s", cases[c].tag);
        s_close_scalar(name, met.ratio_mean, g, name, 1e-9, 1e-6);
        assert_true(grad[4] == 0.0f);
        /* finite differences (away from the clip kinks for these draws) */
        for (int64_t k = 0; k < n; k++) {
            rl_diffusion_grpo_metrics mp, mm;
            const float keep = lp[k];
            lp[k] = keep + 1e-3f;
            const double hp = (double)lp[k] - keep;
            rl_diffusion_grpo_loss(lp, old, adv, mask, n, cases[c].clip, cases[c].amax, NULL, &mp);
            lp[k] = keep - 1e-3f;
            const double hm = keep - (double)lp[k];
            rl_diffusion_grpo_loss(lp, old, adv, mask, n, cases[c].clip, cases[c].amax, NULL, &mm);
            lp[k] = keep;
            const double fd = (mp.loss - mm.loss) / (hp + hm);
            double r = exp((double)lp[k] - old[k]);
            /* skip rows within the FD step of a kink */
            if (fabs(r - (1 - cases[c].clip)) < 2e-3 * r || fabs(r - (1 + cases[c].clip)) < 2e-3 * r)
                continue;
            if (!(fabs(fd - grad[k]) <= 1e-5 + 1e-3 * fabs(fd)))
                fail_msg("%s FD %g vs grad %g at %lld", cases[c].tag, fd, (double)grad[k], (long long)k);
        }
    }
    /* ratio 1: the clipped loss equals the unclipped surrogate mean(−A)
     * and its gradient is −A/n, for any clip range */
    float grad[12];
    rl_diffusion_grpo_metrics met;
    const double clips[3] = {0.0, 1e-4, 0.2};
    for (int c = 0; c < 3; c++) {
        assert_int_equal(rl_diffusion_grpo_loss(old, old, adv, NULL, n, clips[c], 1e9, grad, &met), 0);
        double want = 0.0;
        for (int64_t i = 0; i < n; i++) {
            want += -(double)adv[i] / n;
            assert_true(fabs(grad[i] - (-(double)adv[i] / n)) < 1e-7);
        }
        assert_true(fabs(met.loss - want) < 1e-12);
        assert_true(met.clip_frac == 0.0 && met.ratio_mean == 1.0 && met.approx_kl == 0.0);
    }
    /* advantage clipping: |A| beyond adv_clip_max is clamped */
    float a1[1] = {50.0f}, z1[1] = {0.0f}, g1[1];
    assert_int_equal(rl_diffusion_grpo_loss(z1, z1, a1, NULL, 1, 0.2, 5.0, g1, &met), 0);
    assert_true(met.loss == -5.0 && g1[0] == -5.0f);
    /* all masked: loss 0, zero grad */
    float m0[12] = {0};
    assert_int_equal(rl_diffusion_grpo_loss(lp, old, adv, m0, n, 0.2, 5.0, grad, &met), 0);
    assert_true(met.loss == 0.0 && grad[0] == 0.0f);
    lp[3] = INFINITY;
    assert_int_equal(rl_diffusion_grpo_loss(lp, old, adv, NULL, n, 0.2, 5.0, grad, &met), RL_ENUMERIC);
    assert_non_null(strstr(rl_error_message(), "logp[3]"));
    free(old); free(lp); free(adv); free(mask);
    rl_golden_free(g);
}

static void test_timestep_subset(void **state)
{
    (void)state;
    int64_t a[20], b[20], k1, k2;
    /* deterministic for (seed, stream) */
    assert_int_equal(rl_diffusion_timestep_subset(7, 3, 20, 0.6, a, &k1), 0);
    assert_int_equal(rl_diffusion_timestep_subset(7, 3, 20, 0.6, b, &k2), 0);
    assert_int_equal(k1, 12);
    assert_int_equal(k2, 12);
    assert_memory_equal(a, b, sizeof a);
    /* right size, distinct, in range; idx stays a permutation */
    int seen[20] = {0};
    for (int64_t i = 0; i < 20; i++) {
        assert_true(a[i] >= 0 && a[i] < 20);
        seen[a[i]]++;
    }
    for (int i = 0; i < 20; i++)
        assert_int_equal(seen[i], 1);
    /* another stream or seed gives another subset */
    assert_int_equal(rl_diffusion_timestep_subset(7, 4, 20, 0.6, b, &k2), 0);
    int differ = memcmp(a, b, 12 * sizeof a[0]) != 0;
    assert_int_equal(rl_diffusion_timestep_subset(8, 3, 20, 0.6, b, &k2), 0);
    differ += memcmp(a, b, 12 * sizeof a[0]) != 0;
    assert_int_equal(differ, 2);
    /* Python int() truncation: int(100 * 0.29) == 28; fraction 1 keeps all;
     * a tiny fraction still trains one step */
    int64_t big[100];
    assert_int_equal(rl_diffusion_timestep_subset(1, 0, 100, 0.29, big, &k1), 0);
    assert_int_equal(k1, 28);
    assert_int_equal(rl_diffusion_timestep_subset(1, 0, 10, 1.0, a, &k1), 0);
    assert_int_equal(k1, 10);
    assert_int_equal(rl_diffusion_timestep_subset(1, 0, 10, 0.01, a, &k1), 0);
    assert_int_equal(k1, 1);
    /* roughly uniform: each index picked ~ k/T of the time over streams */
    int cnt[10] = {0};
    for (uint64_t s = 0; s < 2000; s++) {
        rl_diffusion_timestep_subset(99, s, 10, 0.3, a, &k1);
        for (int64_t i = 0; i < k1; i++)
            cnt[a[i]]++;
    }
    for (int i = 0; i < 10; i++)
        assert_true(cnt[i] > 600 - 120 && cnt[i] < 600 + 120);
    assert_int_equal(rl_diffusion_timestep_subset(1, 0, 10, 0.0, a, &k1), RL_ERANGE);
    assert_int_equal(rl_diffusion_timestep_subset(1, 0, 10, 1.5, a, &k1), RL_ERANGE);
}

/* ---- the batch transforms (common/batch/diffusion.h) ------------------------------------------ */

static double s_metric(const rl_metric_set *ms, const char *name)
{
    double v = NAN;
    if (rl_metric_set_get(ms, name, &v))
        fail_msg("no metric %s", name);
    return v;
}

/* the diffusion track finds grpo and refuses the other estimators, naming
 * them (the choices themselves: test_algo_lm_batch) */
static void test_estimator_choices(void **state)
{
    (void)state;
    const rl_estimator *e = rl_estimator_find("grpo", RL_TRACK_DIFFUSION);
    assert_non_null(e);
    assert_int_equal(e->id, RL_EST_GRPO);
    assert_null(rl_estimator_find("gae", RL_TRACK_DIFFUSION));
    assert_non_null(strstr(rl_error_message(), "not available to the diffusion track (it has: grpo)"));
}

/* group p holds rows p·n .. p·n + n − 1 with one prompt; shared initial
 * noise with same_noise, not without; SDE seeds per row; a function of
 * (seed, step) only */
static void test_batch_rows(void **state)
{
    (void)state;
    enum { P = 3, N = 4, B = P * N };
    int32_t ids[B], ids2[B];
    int64_t grp[B], ns[B], rs[B], ns2[B], rs2[B];
    rl_diffusion_train_rows(11, 5, P, N, 10, 1, ids, grp, ns, rs);
    rl_diffusion_train_rows(11, 5, P, N, 10, 1, ids2, grp, ns2, rs2);
    assert_memory_equal(ids, ids2, sizeof ids);
    assert_memory_equal(ns, ns2, sizeof ns);
    assert_memory_equal(rs, rs2, sizeof rs);
    for (int b = 0; b < B; b++) {
        assert_int_equal(grp[b], b / N);
        assert_int_equal(ids[b], ids[(b / N) * N]);
        assert_true(ids[b] >= 0 && ids[b] < 10 && ns[b] >= 0 && rs[b] >= 0);
        assert_true(ns[b] == ns[(b / N) * N]);
        for (int c = 0; c < b; c++)
            assert_true(rs[c] != rs[b]);
    }
    rl_diffusion_train_rows(11, 5, P, N, 10, 0, ids2, grp, ns2, rs2);
    assert_memory_equal(ids, ids2, sizeof ids);
    assert_memory_equal(rs, rs2, sizeof rs);
    assert_true(ns2[0] != ns2[1]);
    rl_diffusion_train_rows(11, 6, P, N, 10, 1, ids2, grp, ns2, rs2);
    assert_true(memcmp(rs, rs2, sizeof rs) != 0);
    int32_t eid[20];
    int64_t ens[20], ers[20];
    rl_diffusion_eval_rows(11, 0x7a11d, 10, 2, eid, ens, ers);
    for (int b = 0; b < 20; b++) {
        assert_int_equal(eid[b], b / 2);
        assert_true(ens[b] == ers[b] && ens[b] >= 0);
    }
}

/* the term paid λ instead of its weight, the metrics, then the PI step;
 * its checkpoint state round trip and bad states */
static void test_batch_constraint(void **state)
{
    (void)state;
    rl_metric_set *ms = rl_metric_set_new();
    rl_diffusion_constraint c;
    rl_diffusion_constraint_init(&c, 0.5, 0.1, 0.9, 2.0, 0.0, -1, 100);
    assert_true(c.pi.lambda == 0.5 && c.pi.integral == 0.5);
    rl_diffusion_constraint_init(&c, 0.5, 0.1, 0.9, 2.0, 0.0, 3.0, 100);
    assert_true(c.pi.lambda == 3.0 && c.pi.integral == 3.0);
    float term[4] = {1, 0, 1, 0}, score[4] = {1, 2, 3, 4};
    rl_constraint_pi want = c.pi;
    assert_int_equal(rl_constraint_pi_update(&want, 2.0, 0.0, 0.9, 0.5, 100), 0);
    assert_int_equal(rl_diffusion_constraint_step(&c, term, score, 4, ms), 0);
    const float paid = (float)(0.1 * (3.0 - 0.5));
    assert_true(score[0] == 1 + paid && score[1] == 2 && score[2] == 3 + paid && score[3] == 4);
    assert_true(s_metric(ms, "constraint/lambda") == 3.0);
    assert_true(s_metric(ms, "constraint/mean") == 0.5);
    assert_true(fabs(s_metric(ms, "constraint/shortfall") - 0.4) < 1e-12);
    assert_true(c.pi.lambda == want.lambda && c.pi.integral == want.integral);
    /* checkpoint state */
    json_t *extra = json_object();
    assert_int_equal(rl_diffusion_constraint_save(&c, extra), 0);
    rl_diffusion_constraint d;
    rl_diffusion_constraint_init(&d, 0.5, 0.1, 0.9, 2.0, 0.0, -1, 100);
    assert_int_equal(rl_diffusion_constraint_restore(&d, extra, 4), 0);
    assert_true(d.pi.lambda == c.pi.lambda && d.pi.integral == c.pi.integral);
    json_object_set_new(extra, "constraint_integral", json_real(-1));
    assert_int_equal(rl_diffusion_constraint_restore(&d, extra, 4), RL_EIO);
    assert_non_null(strstr(rl_error_message(), "checkpoint of step 4: the algorithm.constraint state "
                                               "'constraint_integral' is missing or not a number >= 0"));
    json_object_del(extra, "constraint_integral");
    assert_int_equal(rl_diffusion_constraint_restore(&d, extra, 4), RL_EIO);
    json_decref(extra);
    extra = json_object(); /* a run without the constraint: λ keeps its start */
    rl_diffusion_constraint_init(&d, 0.5, 0.1, 0.9, 2.0, 0.0, -1, 100);
    assert_int_equal(rl_diffusion_constraint_restore(&d, extra, 4), 0);
    assert_true(d.pi.lambda == 0.5);
    json_decref(extra);
    rl_metric_set_free(ms);
}

/* grpo through the table equals rl_diffusion_grpo_advantages, with the
 * mean and std of the advantages; an estimator without a diffusion form is
 * an error */
static void test_batch_advantages(void **state)
{
    (void)state;
    rl_metric_set *ms = rl_metric_set_new();
    float r[6] = {1, 2, 4, 0, 0, 3}, adv[6], want[6];
    int64_t grp[6] = {0, 0, 0, 1, 1, 1};
    rl_diffusion_adv_cfg cfg = {rl_estimator_find("grpo", RL_TRACK_DIFFUSION), 1, 1, -1e30, 2};
    assert_int_equal(rl_diffusion_advantages(&cfg, r, grp, 6, adv, ms), 0);
    assert_int_equal(rl_diffusion_grpo_advantages(r, grp, 6, 2, 1, 1, -1e30, 1e-8, want), 0);
    assert_memory_equal(adv, want, sizeof adv);
    double sum = 0, sq = 0;
    for (int i = 0; i < 6; i++) {
        sum += adv[i];
        sq += (double)adv[i] * adv[i];
    }
    assert_true(s_metric(ms, "critic/advantages/mean") == sum / 6);
    assert_true(fabs(s_metric(ms, "critic/advantages/std") - sqrt(sq / 6 - (sum / 6) * (sum / 6))) < 1e-12);
    cfg.est = &rl_estimators[RL_EST_RLOO];
    assert_int_equal(rl_diffusion_advantages(&cfg, r, grp, 6, adv, ms), RL_EUNSUPPORTED);
    assert_non_null(strstr(rl_error_message(), "'rloo' has no diffusion form"));
    rl_metric_set_free(ms);
}

/* the step mask is each row's timestep subset; the metrics of scores,
 * columns and the update; flow matching's pairs */
static void test_batch_mask_metrics_pairs(void **state)
{
    (void)state;
    enum { B = 3, N = 10 };
    float mask[B * N];
    int64_t idx[N], k;
    assert_int_equal(rl_diffusion_step_mask(5, 7, 0.6, B, N, mask), 0);
    for (int b = 0; b < B; b++) {
        assert_int_equal(rl_diffusion_timestep_subset(5 ^ 0x7157ull, 7 * 1000003ull + (uint64_t)b, N, 0.6, idx, &k), 0);
        float want[N] = {0};
        for (int64_t i = 0; i < k; i++)
            want[idx[i]] = 1;
        assert_memory_equal(mask + b * N, want, sizeof want);
    }
    rl_metric_set *ms = rl_metric_set_new();
    float score[3] = {1, -2, 4};
    assert_int_equal(rl_diffusion_score_metrics(score, 3, ms), 0);
    assert_true(s_metric(ms, "critic/score/mean") == 1.0 && s_metric(ms, "critic/score/max") == 4.0 &&
                s_metric(ms, "critic/score/min") == -2.0);
    rl_dataproto *dp = rl_dataproto_new();
    rl_tensor *t = rl_dataproto_new_tensor(dp, "kb", RL_F32, 1, (int64_t[]){3});
    memcpy(rl_tensor_data(t), score, sizeof score);
    static const rl_batch_mean cols[2] = {{"kb", "jpeg_kb"}, {"absent", "remote"}};
    rl_diffusion_column_means(dp, cols, 2, "val/", ms);
    assert_true(s_metric(ms, "val/jpeg_kb") == 1.0);
    double v;
    assert_int_not_equal(rl_metric_set_get(ms, "val/remote", &v), 0);
    rl_dataproto_free(dp);
    const double sums[6] = {3.0, 40, 4, 2, 44, 8};
    rl_diffusion_update_metrics(sums, 2, 3.0, 1e-4, 0, ms);
    assert_true(s_metric(ms, "actor/pg_loss") == 1.5 && s_metric(ms, "actor/pg_clipfrac") == 0.1 &&
                s_metric(ms, "actor/ppo_kl") == 0.05 && s_metric(ms, "actor/ratio_mean") == 1.1 &&
                s_metric(ms, "actor/trained_steps") == 40 && s_metric(ms, "actor/grad_norm") == 1.5 &&
                s_metric(ms, "actor/lr") == 1e-4);
    assert_int_not_equal(rl_metric_set_get(ms, "actor/kl_loss", &v), 0);
    rl_diffusion_update_metrics(sums, 2, 3.0, 1e-4, 1, ms);
    assert_true(s_metric(ms, "actor/kl_loss") == 0.2);
    rl_metric_set_free(ms);
    float x0[2 * 5] = {0.1f, -0.2f, 0.3f, 1, -1, 0, 0.5f, -0.5f, 0.25f, 0.75f}, x[10], tg[10], sig[2];
    rl_flow_matching_pairs(3, 9, x0, 2, 5, x, tg, sig);
    for (int b = 0; b < 2; b++) {
        assert_true(sig[b] >= 0 && sig[b] < 1);
        for (int i = 0; i < 5; i++) { /* x = (1 − σ)·x0 + σ·ε with ε = target + x0 */
            float e = tg[b * 5 + i] + x0[b * 5 + i];
            assert_true(fabsf(x[b * 5 + i] - ((1 - sig[b]) * x0[b * 5 + i] + sig[b] * e)) < 1e-5f);
        }
    }
}

/* data.reward_image: the reward scores frame `frame` of the chain's last
 * latent ('sample') or of the last step's ODE mean ('mean'). */
static void test_batch_reward_images(void **state)
{
    (void)state;
    enum { B = 2, N = 2, F = 3, D = 2 * F };
    float lat[B * (N + 1) * D], mean[B * D], out[B * F];
    for (int i = 0; i < B * (N + 1) * D; i++)
        lat[i] = (float)i;
    for (int i = 0; i < B * D; i++)
        mean[i] = -1.0f - (float)i;
    /* sample, frame 1: row b's latent N, floats F..2F */
    assert_int_equal(rl_diffusion_reward_images(lat, NULL, B, N, D, 1, F, out), 0);
    for (int b = 0; b < B; b++)
        for (int j = 0; j < F; j++)
            assert_float_equal(out[b * F + j], (float)((b * (N + 1) + N) * D + F + j), 0);
    /* mean, frame 0: row b of final_mean, never the latents */
    assert_int_equal(rl_diffusion_reward_images(lat, mean, B, N, D, 0, F, out), 0);
    for (int b = 0; b < B; b++)
        for (int j = 0; j < F; j++)
            assert_float_equal(out[b * F + j], -1.0f - (float)(b * D + j), 0);
    /* a frame outside the latent is an error */
    assert_int_equal(rl_diffusion_reward_images(lat, mean, B, N, D, 2, F, out), RL_ESHAPE);
    assert_non_null(strstr(rl_error_message(), "frame 2"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sigmas),
        cmocka_unit_test(test_sde_step_golden_and_fd),
        cmocka_unit_test(test_sde_kl),
        cmocka_unit_test(test_advantages),
        cmocka_unit_test(test_constraint_pi),
        cmocka_unit_test(test_grpo_loss),
        cmocka_unit_test(test_timestep_subset),
        cmocka_unit_test(test_estimator_choices),
        cmocka_unit_test(test_batch_rows),
        cmocka_unit_test(test_batch_constraint),
        cmocka_unit_test(test_batch_advantages),
        cmocka_unit_test(test_batch_mask_metrics_pairs),
        cmocka_unit_test(test_batch_reward_images),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
