/* test_algo_flow.c — FlowIPO / FlowSAR / EMA / flow-step functions against
 * the float64 PyTorch references in tests/golden/algo_flow (written by
 * tests/reference/gen_algo_flow.py), finite-difference gradient checks,
 * properties and documented edge cases.
 *
 * Tolerances: f32 outputs of double-accumulated math vs float64 references:
 * atol 1e-6 / rtol 1e-5 unless a comment says otherwise. */
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
#include "common/algo/flow/flow.h"
#include "common/sde/flow_step.h"

#define ATOL 1e-6
#define RTOL 1e-5

static rl_golden *s_load(const char *name)
{
    char path[256];
    snprintf(path, sizeof path, "tests/golden/algo_flow/%s", name);
    rl_golden *g = rl_golden_load(path);
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

/* ------------------------------------------------------------- FlowIPO */

static void test_ipo_weights_golden(void **state)
{
    (void)state;
    rl_golden *g = s_load("flow_ipo.safetensors");
    const int64_t S = 6, B = 5, D = 12;
    float *a = rl_golden_f32(g, "actions", NULL), *r = rl_golden_f32(g, "ref_actions", NULL);
    float *rew = rl_golden_f32(g, "rewards", NULL), *mask = rl_golden_f32(g, "step_mask", NULL);
    float w[30];
    rl_flow_ipo_weight_stats st;
    assert_int_equal(rl_flow_ipo_weights(a, r, rew, mask, S, B, D, 2.0, 1e-8, w, &st), 0);
    s_close_f32("ipo w (masked)", w, g, "w", S * B, ATOL, RTOL);
    s_close_scalar("ipo weight_mean", st.weight_mean, g, "w_mean", 1e-9, 1e-9);
    s_close_scalar("ipo delta_mean", st.delta_mean, g, "delta_mean", 1e-9, 1e-9);
    /* properties: kept weights in (0, 1); masked are 0; one-step episode 0.5 */
    for (int64_t k = 0; k < S * B; k++) {
        if (mask[k] == 0.0f)
            assert_true(w[k] == 0.0f);
        else
            assert_true(w[k] > 0.0f && w[k] < 1.0f);
    }
    assert_true(w[0 * B + 3] == 0.5f);
    /* unmasked: the seed's vectorised formula */
    assert_int_equal(rl_flow_ipo_weights(a, r, rew, NULL, S, B, D, 2.0, 1e-8, w, NULL), 0);
    s_close_f32("ipo w (full)", w, g, "w_full", S * B, ATOL, RTOL);
    free(a); free(r); free(rew); free(mask);
    rl_golden_free(g);
}

static void test_ipo_weights_edges(void **state)
{
    (void)state;
    /* single-step episodes: zero spread -> documented A = 0, w = 0.5 */
    float a[4] = {1, 2, 3, 4}, r[4] = {0, 0, 0, 0}, rew[2] = {1, 0}, w[2];
    assert_int_equal(rl_flow_ipo_weights(a, r, rew, NULL, 1, 2, 2, 2.0, 1e-8, w, NULL), 0);
    assert_true(w[0] == 0.5f && w[1] == 0.5f);
    /* identical δ across steps: std 0, A = 0 -> 0.5 (eps keeps it finite) */
    float a2[4] = {1, 1, 1, 1}, r2[4] = {0, 0, 0, 0}, w2[2];
    assert_int_equal(rl_flow_ipo_weights(a2, r2, rew, NULL, 2, 1, 2, 2.0, 1e-8, w2, NULL), 0);
    assert_true(w2[0] == 0.5f && w2[1] == 0.5f);
    /* success vs failure flip: larger δ gets w > 0.5 on success, < 0.5 on failure */
    float a3[4] = {0, 3, 0, 3}, r3[4] = {0, 0, 0, 0}, w3[4];
    /* S=2, B=2, D=1: step0 δ=0/3, step1 δ=0/3 -> per episode δ = {0,0} and {3,3}: */
    float a4[4] = {0, 0, 3, 3};
    assert_int_equal(rl_flow_ipo_weights(a4, r3, rew, NULL, 2, 2, 1, 2.0, 1e-8, w3, NULL), 0);
    assert_true(w3[2] > 0.5f && w3[0] < 0.5f);  /* episode 0 succeeded */
    assert_true(w3[3] < 0.5f && w3[1] > 0.5f);  /* episode 1 failed */
    (void)a3;
    /* NaN in a kept step is named; a masked one is ignored */
    float an[4] = {0, NAN, 3, 3}, m[4] = {1, 0, 1, 1};
    assert_int_equal(rl_flow_ipo_weights(an, r3, rew, m, 2, 2, 1, 2.0, 1e-8, w3, NULL), 0);
    assert_true(w3[1] == 0.0f);
    assert_true(w3[3] == 0.5f); /* episode 1 has one kept step */
    assert_int_equal(rl_flow_ipo_weights(an, r3, rew, NULL, 2, 2, 1, 2.0, 1e-8, w3, NULL),
                     RL_ENUMERIC);
    assert_non_null(strstr(rl_error_message(), "actions[1]"));
}

static void test_episode_rewards(void **state)
{
    (void)state;
    /* (S=2, B=3, C=2): episode 0 succeeds at the last step, 1 never, 2 has
     * two successes (clamped to 1), and a negative shaping term clamps to 0 */
    const float r[12] = {0, 0, 0, 0, 1, 0,
                         0, 1, -0.5f, 0, 0, 1};
    float out[3];
    assert_int_equal(rl_flow_episode_rewards(r, 2, 3, 2, out), 0);
    assert_true(out[0] == 1.0f && out[1] == 0.0f && out[2] == 1.0f);
    const float r2[2] = {0.25f, 0.5f};
    assert_int_equal(rl_flow_episode_rewards(r2, 2, 1, 1, out), 0);
    assert_true(out[0] == 0.75f);
}

static void test_ipo_loss_golden_and_fd(void **state)
{
    (void)state;
    rl_golden *g = s_load("flow_ipo.safetensors");
    const int64_t N = 7, C = 4, D = 12;
    float *u = rl_golden_f32(g, "u", NULL), *vr = rl_golden_f32(g, "v_ref", NULL);
    float *w = rl_golden_f32(g, "w_loss", NULL), *vt = rl_golden_f32(g, "v_theta", NULL);
    float *m = rl_golden_f32(g, "loss_mask", NULL);
    float tgt[84], grad[84];
    assert_int_equal(rl_flow_ipo_target(u, vr, w, N, D, tgt), 0);
    s_close_f32("ipo target", tgt, g, "target", N * D, ATOL, RTOL);
    rl_flow_ipo_metrics met;
    assert_int_equal(rl_flow_ipo_loss(vt, tgt, m, N, D, C, grad, &met), 0);
    s_close_scalar("ipo loss", met.loss, g, "loss", 1e-7, 1e-6);
    s_close_scalar("ipo velocity_mse", met.velocity_mse, g, "velocity_mse", 1e-7, 1e-6);
    s_close_f32("ipo grad", grad, g, "grad_v", N * D, 1e-7, 1e-5);
    /* finite differences on the C function itself (actual f32 step used) */
    for (int64_t k = 0; k < N * D; k += 5) {
        const float keep = vt[k];
        rl_flow_ipo_metrics mp, mm;
        vt[k] = keep + 1e-2f;
        const double hp = (double)vt[k] - keep;
        rl_flow_ipo_loss(vt, tgt, m, N, D, C, NULL, &mp);
        vt[k] = keep - 1e-2f;
        const double hm = keep - (double)vt[k];
        rl_flow_ipo_loss(vt, tgt, m, N, D, C, NULL, &mm);
        vt[k] = keep;
        const double fd = (mp.loss - mm.loss) / (hp + hm);
        assert_true(fabs(fd - grad[k]) <= 1e-6 + 1e-4 * fabs(fd));
    }
    /* a coarse mask (mk = C) equals the same mask expanded per element */
    {
        float full[84], gf[84];
        rl_flow_ipo_metrics mf;
        for (int64_t k = 0; k < N * D; k++)
            full[k] = m[k / 3];
        assert_int_equal(rl_flow_ipo_loss(vt, tgt, full, N, D, D, gf, &mf), 0);
        assert_true(fabs(mf.loss - met.loss) <= 1e-12 * met.loss);
        assert_memory_equal(gf, grad, sizeof gf);
        /* no mask = every element kept = plain MSE */
        assert_int_equal(rl_flow_ipo_loss(vt, tgt, NULL, N, D, 0, gf, &mf), 0);
        assert_true(fabs(mf.loss - mf.velocity_mse) <= 1e-12 * mf.loss);
    }
    /* all masked: documented loss 0 and zero gradient */
    float zero[28] = {0};
    assert_int_equal(rl_flow_ipo_loss(vt, tgt, zero, N, D, C, grad, &met), 0);
    assert_true(met.loss == 0.0);
    for (int64_t k = 0; k < N * D; k++)
        assert_true(grad[k] == 0.0f);
    /* mask columns must divide D; Inf in v_theta is named */
    assert_int_equal(rl_flow_ipo_loss(vt, tgt, m, N, D, 5, grad, &met), RL_ESHAPE);
    vt[13] = INFINITY;
    assert_int_equal(rl_flow_ipo_loss(vt, tgt, m, N, D, C, grad, &met), RL_ENUMERIC);
    assert_non_null(strstr(rl_error_message(), "v_theta[13]"));
    free(u); free(vr); free(w); free(vt); free(m);
    rl_golden_free(g);
}

/* ------------------------------------------------------------- FlowSAR */

static void test_sar_weights_golden(void **state)
{
    (void)state;
    rl_golden *g = s_load("flow_sar.safetensors");
    const int64_t S = 7, B = 5;
    float *e = rl_golden_f32(g, "recon_errors", NULL), *rew = rl_golden_f32(g, "rewards", NULL);
    float *m = rl_golden_f32(g, "step_mask", NULL);
    float w[35], y[5];
    struct { const char *name; double T, lo, hi; } cases[] = {
        {"w_plain", 0.5, 0.0, 1.0}, {"w_clip", 0.5, 0.05, 0.5}, {"w_clip_t01", 0.1, 0.1, 0.3}};
    for (size_t c = 0; c < 3; c++) {
        assert_int_equal(rl_flow_sar_weights(e, rew, m, S, B, cases[c].T, cases[c].lo, cases[c].hi,
                                             w, y), 0);
        s_close_f32(cases[c].name, w, g, cases[c].name, S * B, ATOL, RTOL);
        /* property: each trajectory's weights sum to 1, masked steps are 0 */
        for (int64_t b = 0; b < B; b++) {
            double sum = 0.0;
            for (int64_t s = 0; s < S; s++) {
                if (m[s * B + b] == 0.0f)
                    assert_true(w[s * B + b] == 0.0f);
                sum += w[s * B + b];
            }
            assert_true(fabs(sum - 1.0) < 1e-6);
        }
    }
    s_close_f32("sar labels", y, g, "labels", B, 0, 0);
    free(e); free(rew); free(m);
    rl_golden_free(g);
}

static void test_sar_weights_edges(void **state)
{
    (void)state;
    /* all success: the most uncertain step (largest e) gets the most weight;
     * all failure: the most confident (smallest e) does. */
    float e[6] = {0.1f, 0.1f, 0.5f, 0.5f, 0.9f, 0.9f}; /* (S=3, B=2) */
    float ones[2] = {1, 1}, zeros[2] = {0, 0}, w[6], y[2];
    assert_int_equal(rl_flow_sar_weights(e, ones, NULL, 3, 2, 0.5, 0, 1, w, y), 0);
    assert_true(w[4] > w[2] && w[2] > w[0] && y[0] == 1.0f && y[1] == 1.0f);
    assert_true(fabs((double)w[0] + w[2] + w[4] - 1.0) < 1e-6);
    assert_int_equal(rl_flow_sar_weights(e, zeros, NULL, 3, 2, 0.5, 0, 1, w, y), 0);
    assert_true(w[0] > w[2] && w[2] > w[4] && y[0] == -1.0f);
    /* hand value: softmax(±e/T) with T = 0.5 */
    const double z0 = exp(-0.2), z1 = exp(-1.0), z2 = exp(-1.8), zs = z0 + z1 + z2;
    assert_true(fabs(w[0] - z0 / zs) < 1e-7 && fabs(w[4] - z2 / zs) < 1e-7);
    /* single-step trajectory: weight 1 (clip then renormalise keeps it 1) */
    float e1[1] = {3.0f}, w1[1];
    assert_int_equal(rl_flow_sar_weights(e1, ones, NULL, 1, 1, 0.5, 0.05, 0.5, w1, NULL), 0);
    assert_true(w1[0] == 1.0f);
    /* fully masked trajectory: all 0, no error */
    float m0[6] = {1, 0, 1, 0, 1, 0};
    assert_int_equal(rl_flow_sar_weights(e, ones, m0, 3, 2, 0.5, 0, 1, w, NULL), 0);
    assert_true(w[1] == 0.0f && w[3] == 0.0f && w[5] == 0.0f);
    /* errors */
    assert_int_equal(rl_flow_sar_weights(e, ones, NULL, 3, 2, 0.0, 0, 1, w, NULL), RL_EINVAL);
    assert_int_equal(rl_flow_sar_weights(e, ones, NULL, 3, 2, 0.5, 0.6, 0.5, w, NULL), RL_EINVAL);
    e[3] = NAN;
    assert_int_equal(rl_flow_sar_weights(e, ones, NULL, 3, 2, 0.5, 0, 1, w, NULL), RL_ENUMERIC);
    assert_non_null(strstr(rl_error_message(), "recon_errors[3]"));
    assert_int_equal(rl_flow_sar_weights(e, ones, m0, 3, 2, 0.5, 0, 1, w, NULL), 0);
}

typedef struct sar_fix {
    rl_golden *g;
    float *vt, *vo, *u, *w, *y, *t, *m;
} sar_fix;

static void s_sar_load(sar_fix *f)
{
    f->g = s_load("flow_sar.safetensors");
    f->vt = rl_golden_f32(f->g, "v_theta", NULL);
    f->vo = rl_golden_f32(f->g, "v_old", NULL);
    f->u = rl_golden_f32(f->g, "u", NULL);
    f->w = rl_golden_f32(f->g, "w", NULL);
    f->y = rl_golden_f32(f->g, "y", NULL);
    f->t = rl_golden_f32(f->g, "t", NULL);
    f->m = rl_golden_f32(f->g, "mask", NULL);
}

static void s_sar_free(sar_fix *f)
{
    free(f->vt); free(f->vo); free(f->u); free(f->w); free(f->y); free(f->t); free(f->m);
    rl_golden_free(f->g);
}

static void s_sar_loss_golden_and_fd(void)
{
    sar_fix f;
    s_sar_load(&f);
    const int64_t N = 9, D = 15;
    float grad[135];
    int combos = 0;
    for (int bi = 0; bi < 2; bi++)
        for (int en = 0; en < 2; en++)
            for (int va = 0; va < 2; va++)
                for (int red = 0; red < 2; red++) {
                    rl_flow_sar_config cfg = rl_flow_sar_config_default();
                    cfg.beta = bi == 0 ? 1.0 : 0.7;
                    cfg.energy = en ? RL_FLOW_SAR_ENERGY_SDE : RL_FLOW_SAR_ENERGY_MSE;
                    cfg.variant = va ? RL_FLOW_SAR_SOFTPLUS_KL : RL_FLOW_SAR_MSE_BRANCH;
                    cfg.kl_coeff = 0.5;
                    cfg.energy_mean = red;
                    char tag[64], name[96];
                    snprintf(tag, sizeof tag, "%s_%s_b%d_r%d", va ? "softplus_kl" : "mse_branch",
                             en ? "sde" : "mse", bi == 0 ? 10 : 7, red);
                    rl_flow_sar_metrics met;
                    assert_int_equal(rl_flow_sar_loss(f.vt, f.vo, f.u, f.w, f.y, f.t, f.m, N, D, &cfg,
                                                      grad, &met), 0);
                    snprintf(name, sizeof name, "grad_%s", tag);
                    s_close_f32(name, grad, f.g, name, N * D, 1e-7, 1e-5);
#define CHECK_MET(field, key)                                                   \
    do {                                                                        \
        snprintf(name, sizeof name, key "_%s", tag);                           \
        s_close_scalar(name, met.field, f.g, name, 1e-9, 1e-7);                \
    } while (0)
                    CHECK_MET(loss, "loss");
                    CHECK_MET(e_pos, "e_pos");
                    CHECK_MET(e_neg, "e_neg");
                    CHECK_MET(weight_mean, "weight_mean");
                    if (va) {
                        CHECK_MET(contrastive, "contrastive");
                        CHECK_MET(kl_penalty, "kl_penalty");
                        assert_true(isnan(met.success_ratio));
                        assert_true(fabs(met.contrastive + met.kl_penalty - met.loss) < 1e-12);
                    } else {
                        CHECK_MET(success_ratio, "success_ratio");
                        assert_true(isnan(met.contrastive) && isnan(met.kl_penalty));
                    }
#undef CHECK_MET
                    assert_true(met.energy_type == (en ? 1.0 : 0.0));
                    assert_true(met.loss_variant == (va ? 1.0 : 0.0));
                    /* masked chunk 5 gets no gradient */
                    for (int64_t j = 0; j < D; j++)
                        assert_true(grad[5 * D + j] == 0.0f);
                    /* finite differences of the C loss */
                    for (int64_t k = 0; k < N * D; k += 7) {
                        const float keep = f.vt[k];
                        rl_flow_sar_metrics mp, mm;
                        f.vt[k] = keep + 1e-2f;
                        const double hp = (double)f.vt[k] - keep;
                        rl_flow_sar_loss(f.vt, f.vo, f.u, f.w, f.y, f.t, f.m, N, D, &cfg, NULL, &mp);
                        f.vt[k] = keep - 1e-2f;
                        const double hm = keep - (double)f.vt[k];
                        rl_flow_sar_loss(f.vt, f.vo, f.u, f.w, f.y, f.t, f.m, N, D, &cfg, NULL, &mm);
                        f.vt[k] = keep;
                        const double fd = (mp.loss - mm.loss) / (hp + hm);
                        if (!(fabs(fd - grad[k]) <= 1e-5 + 1e-3 * fabs(fd)))
                            fail_msg("%s: FD %g vs grad %g at %lld", tag, fd, (double)grad[k],
                                     (long long)k);
                    }
                    combos++;
                }
    assert_int_equal(combos, 16);
    s_sar_free(&f);
}

/* Both kernel paths (AVX2 where the CPU has it, and the portable one). */
static void test_sar_loss_golden_and_fd(void **state)
{
    (void)state;
    unsetenv("RLRT_NO_SIMD");
    s_sar_loss_golden_and_fd();
    setenv("RLRT_NO_SIMD", "1", 1);
    s_sar_loss_golden_and_fd();
    unsetenv("RLRT_NO_SIMD");
}

static void test_sar_loss_edges(void **state)
{
    (void)state;
    sar_fix f;
    s_sar_load(&f);
    const int64_t N = 9, D = 15;
    float grad[135];
    rl_flow_sar_config cfg = rl_flow_sar_config_default();
    rl_flow_sar_metrics met;
    /* sde energy at t = 0 in a kept chunk: a clear range error */
    cfg.energy = RL_FLOW_SAR_ENERGY_SDE;
    f.t[2] = 0.0f;
    assert_int_equal(rl_flow_sar_loss(f.vt, f.vo, f.u, f.w, f.y, f.t, f.m, N, D, &cfg, grad, &met),
                     RL_ERANGE);
    assert_non_null(strstr(rl_error_message(), "flow_t[2]"));
    /* ...but fine in a masked chunk (5), and with the mse energy */
    f.t[2] = 0.5f;
    f.t[5] = 0.0f;
    const float w5 = f.w[5], y5 = f.y[5];
    f.w[5] = NAN; /* masked chunk: never read into a result */
    f.y[5] = INFINITY;
    for (int va = 0; va < 2; va++) {
        cfg.variant = va ? RL_FLOW_SAR_SOFTPLUS_KL : RL_FLOW_SAR_MSE_BRANCH;
        assert_int_equal(rl_flow_sar_loss(f.vt, f.vo, f.u, f.w, f.y, f.t, f.m, N, D, &cfg, grad, &met), 0);
        assert_true(isfinite(met.loss) && isfinite(met.e_pos) && isfinite(met.weight_mean));
        for (int64_t k = 0; k < N * D; k++)
            assert_true(isfinite(grad[k]));
    }
    cfg.variant = RL_FLOW_SAR_MSE_BRANCH;
    f.w[5] = w5;
    f.y[5] = y5;
    cfg.energy = RL_FLOW_SAR_ENERGY_MSE;
    f.t[2] = 0.0f;
    assert_int_equal(rl_flow_sar_loss(f.vt, f.vo, f.u, f.w, f.y, f.t, f.m, N, D, &cfg, grad, &met), 0);
    /* sde with t = 1: exactly half of the mse energy */
    float t1[9];
    for (int i = 0; i < 9; i++)
        t1[i] = 1.0f;
    rl_flow_sar_metrics ms;
    cfg.energy = RL_FLOW_SAR_ENERGY_SDE;
    assert_int_equal(rl_flow_sar_loss(f.vt, f.vo, f.u, f.w, f.y, t1, f.m, N, D, &cfg, NULL, &ms), 0);
    cfg.energy = RL_FLOW_SAR_ENERGY_MSE;
    assert_int_equal(rl_flow_sar_loss(f.vt, f.vo, f.u, f.w, f.y, NULL, f.m, N, D, &cfg, NULL, &met), 0);
    assert_true(fabs(ms.loss - 0.5 * met.loss) <= 1e-12 * fabs(met.loss));
    /* all success: mse_branch is w·E⁺ only (β = 1: E⁺ = ‖v_θ − u‖²) */
    float ypos[9];
    for (int i = 0; i < 9; i++)
        ypos[i] = 1.0f;
    assert_int_equal(rl_flow_sar_loss(f.vt, f.vo, f.u, f.w, ypos, NULL, NULL, N, D, &cfg, NULL, &met), 0);
    double want = 0.0;
    for (int64_t i = 0; i < N; i++) {
        double e = 0.0;
        for (int64_t j = 0; j < D; j++) {
            const double d = (double)f.vt[i * D + j] - f.u[i * D + j];
            e += d * d;
        }
        want += f.w[i] * e;
    }
    assert_true(fabs(met.loss - want / N) <= 1e-6 * want / N);
    assert_true(met.success_ratio == 1.0);
    /* all failure: E⁻ with β = 1 is ‖2v_old − v_θ − u‖² */
    float yneg[9];
    for (int i = 0; i < 9; i++)
        yneg[i] = -1.0f;
    assert_int_equal(rl_flow_sar_loss(f.vt, f.vo, f.u, f.w, yneg, NULL, NULL, N, D, &cfg, NULL, &met), 0);
    want = 0.0;
    for (int64_t i = 0; i < N; i++) {
        double e = 0.0;
        for (int64_t j = 0; j < D; j++) {
            const double d = 2.0 * f.vo[i * D + j] - f.vt[i * D + j] - f.u[i * D + j];
            e += d * d;
        }
        want += f.w[i] * e;
    }
    assert_true(fabs(met.loss - want / N) <= 1e-6 * want / N);
    assert_true(met.success_ratio == 0.0);
    /* every chunk masked: documented loss 0, zero gradient, NaN means */
    float m0[9] = {0};
    assert_int_equal(rl_flow_sar_loss(f.vt, f.vo, f.u, f.w, f.y, NULL, m0, N, D, &cfg, grad, &met), 0);
    assert_true(met.loss == 0.0 && isnan(met.e_pos));
    for (int64_t k = 0; k < N * D; k++)
        assert_true(grad[k] == 0.0f);
    /* NaN/Inf named with array and index; ignored in a masked chunk */
    f.vo[5 * D + 3] = NAN;
    assert_int_equal(rl_flow_sar_loss(f.vt, f.vo, f.u, f.w, f.y, NULL, f.m, N, D, &cfg, grad, &met), 0);
    f.vo[5 * D + 3] = 0.0f;
    f.u[7 * D + 4] = INFINITY;
    assert_int_equal(rl_flow_sar_loss(f.vt, f.vo, f.u, f.w, f.y, NULL, f.m, N, D, &cfg, grad, &met),
                     RL_ENUMERIC);
    assert_non_null(strstr(rl_error_message(), "u[109]"));
    f.u[7 * D + 4] = 0.0f;
    f.w[1] = NAN;
    assert_int_equal(rl_flow_sar_loss(f.vt, f.vo, f.u, f.w, f.y, NULL, f.m, N, D, &cfg, grad, &met),
                     RL_ENUMERIC);
    assert_non_null(strstr(rl_error_message(), "weights[1]"));
    s_sar_free(&f);
}

/* AVX2 (masked tails) and portable kernels agree for every remainder
 * D mod 8, and neither writes past the gradient's end. */
static void test_sar_loss_kernel_paths(void **state)
{
    (void)state;
    rl_rng g;
    rl_rng_init(&g, 77, 0);
    for (int64_t d = 1; d <= 33; d++) {
        const int64_t n = 37, nd = n * d;
        float *vt = malloc((size_t)nd * 4), *vo = malloc((size_t)nd * 4), *u = malloc((size_t)nd * 4);
        float *g1 = malloc((size_t)(nd + 8) * 4), *g2 = malloc((size_t)(nd + 8) * 4);
        float w[37], y[37], t[37], m[37];
        for (int64_t k = 0; k < nd; k++) {
            vo[k] = rl_rng_normal(&g);
            vt[k] = vo[k] + 0.2f * rl_rng_normal(&g);
            u[k] = rl_rng_normal(&g);
        }
        for (int i = 0; i < 37; i++) {
            w[i] = rl_rng_uniform(&g);
            y[i] = rl_rng_uniform(&g) < 0.5f ? 1.0f : -1.0f;
            t[i] = 0.1f + 0.9f * rl_rng_uniform(&g);
            m[i] = i % 5 == 3 ? 0.0f : 1.0f;
        }
        for (int va = 0; va < 2; va++) {
            rl_flow_sar_config cfg = rl_flow_sar_config_default();
            cfg.variant = va ? RL_FLOW_SAR_SOFTPLUS_KL : RL_FLOW_SAR_MSE_BRANCH;
            cfg.energy = RL_FLOW_SAR_ENERGY_SDE;
            cfg.beta = 0.8;
            rl_flow_sar_metrics ma, mb;
            for (int k = 0; k < 8; k++)
                g1[nd + k] = g2[nd + k] = 12345.0f;
            unsetenv("RLRT_NO_SIMD");
            assert_int_equal(rl_flow_sar_loss(vt, vo, u, w, y, t, m, n, d, &cfg, g1, &ma), 0);
            setenv("RLRT_NO_SIMD", "1", 1);
            assert_int_equal(rl_flow_sar_loss(vt, vo, u, w, y, t, m, n, d, &cfg, g2, &mb), 0);
            unsetenv("RLRT_NO_SIMD");
            for (int k = 0; k < 8; k++)
                assert_true(g1[nd + k] == 12345.0f && g2[nd + k] == 12345.0f);
            for (int64_t k = 0; k < nd; k++)
                if (!(fabs(g1[k] - g2[k]) <= 1e-7 + 1e-5 * fabs(g2[k])))
                    fail_msg("d=%lld variant %d: grad[%lld] %g vs %g", (long long)d, va, (long long)k,
                             (double)g1[k], (double)g2[k]);
            /* same double math, only the summation order differs */
            assert_true(fabs(ma.loss - mb.loss) <= 1e-12 * fabs(mb.loss) + 1e-15);
            assert_true(fabs(ma.e_pos - mb.e_pos) <= 1e-12 * fabs(mb.e_pos) + 1e-15);
        }
        free(vt); free(vo); free(u); free(g1); free(g2);
    }
}

/* ------------------------------------------------- EMA, interp, recon */

static void test_ema_interp_recon(void **state)
{
    (void)state;
    rl_golden *g = s_load("flow_misc.safetensors");
    float *ref = rl_golden_f32(g, "ref", NULL), *cur = rl_golden_f32(g, "cur", NULL);
    double *lb = rl_golden_f64(g, "linear_betas", NULL);
    const int64_t steps[7] = {0, 1, 250, 499, 500, 501, 10000};
    for (int i = 0; i < 7; i++)
        assert_true(fabs(rl_flow_ema_beta(RL_FLOW_EMA_LINEAR, 0.995, 0.001, 0.5, steps[i]) - lb[i]) < 1e-15);
    assert_true(rl_flow_ema_beta(RL_FLOW_EMA_FIXED, 0.995, 0.001, 0.5, 77) == 0.995);
    const double betas[4] = {0.995, 0.5, 0.0, 1.0};
    float buf[37];
    for (int k = 0; k < 4; k++) {
        memcpy(buf, ref, sizeof buf);
        assert_int_equal(rl_flow_ema_update(buf, cur, 37, betas[k]), 0);
        char name[16];
        snprintf(name, sizeof name, "ema_%d", k);
        s_close_f32(name, buf, g, name, 37, ATOL, RTOL);
    }
    assert_int_equal(rl_flow_ema_update(buf, cur, 37, 1.5), RL_ERANGE);
    free(ref); free(cur); free(lb);

    const int64_t N = 6, D = 10;
    float *a = rl_golden_f32(g, "a", NULL), *eps = rl_golden_f32(g, "eps", NULL);
    float *t = rl_golden_f32(g, "t", NULL), *v = rl_golden_f32(g, "v", NULL);
    float *xm = rl_golden_f32(g, "x_mid", NULL);
    float xt[60], u[60], e[6];
    assert_int_equal(rl_flow_interp(a, eps, t, N, D, xt, u), 0);
    s_close_f32("x_t", xt, g, "x_t", N * D, ATOL, RTOL);
    s_close_f32("u", u, g, "u", N * D, ATOL, RTOL);
    /* boundaries: t = 0 is the data, t = 1 the noise, exactly */
    for (int64_t j = 0; j < D; j++) {
        assert_true(xt[j] == a[j]);
        assert_true(xt[D + j] == eps[D + j]);
    }
    assert_int_equal(rl_flow_recon_error(a, xm, v, 0.5f, N, D, e), 0);
    s_close_f32("recon", e, g, "recon", N, ATOL, RTOL);
    /* a perfect velocity (v = ε − a) reconstructs a exactly up to rounding */
    float x2[60], u2[60], half[6] = {0.5f, 0.5f, 0.5f, 0.5f, 0.5f, 0.5f};
    rl_flow_interp(a, eps, half, N, D, x2, u2);
    assert_int_equal(rl_flow_recon_error(a, x2, u2, 0.5f, N, D, e), 0);
    for (int64_t i = 0; i < N; i++)
        assert_true(e[i] < 1e-10);
    v[7] = NAN;
    assert_int_equal(rl_flow_recon_error(a, xm, v, 0.5f, N, D, e), RL_ENUMERIC);
    assert_non_null(strstr(rl_error_message(), "v["));
    free(a); free(eps); free(t); free(v); free(xm);
    rl_golden_free(g);
}

/* ------------------------------------------------------- flow step */

static void test_flow_step_golden_and_fd(void **state)
{
    (void)state;
    rl_golden *g = s_load("flow_step.safetensors");
    const int64_t N = 5, D = 8;
    float *xt = rl_golden_f32(g, "x_t", NULL), *v = rl_golden_f32(g, "v", NULL);
    float *noise = rl_golden_f32(g, "noise", NULL), *t = rl_golden_f32(g, "t", NULL);
    float *tn = rl_golden_f32(g, "t_next", NULL), *gl = rl_golden_f32(g, "grad_logp", NULL);
    assert_true(t[0] == 1.0f); /* the σ-at-t=1 case is in the data */
    const struct { rl_flow_step_method m; const char *tag; double nl; } cases[2] = {
        {RL_FLOW_STEP_SDE, "sde", 0.5}, {RL_FLOW_STEP_ODE, "ode", 0.3}};
    for (int c = 0; c < 2; c++) {
        char name[64];
        float xn[40], lp[5], gv[40];
        assert_int_equal(rl_flow_step_sample(cases[c].m, xt, v, t, tn, cases[c].nl, noise, N, D, xn, lp), 0);
        snprintf(name, sizeof name, "%s_x_next", cases[c].tag);
        s_close_f32(name, xn, g, name, N * D, 1e-6, 1e-5);
        snprintf(name, sizeof name, "%s_logp_sample", cases[c].tag);
        s_close_f32(name, lp, g, name, N, 1e-5, 1e-5);
        snprintf(name, sizeof name, "%s_v2", cases[c].tag);
        float *v2 = rl_golden_f32(g, name, NULL);
        float *xr = rl_golden_f32(g, (c == 0 ? "sde_x_next" : "ode_x_next"), NULL);
        assert_int_equal(rl_flow_step_logprob(cases[c].m, xt, v2, xr, t, tn, cases[c].nl, N, D, lp, gl, gv), 0);
        snprintf(name, sizeof name, "%s_logp", cases[c].tag);
        s_close_f32(name, lp, g, name, N, 1e-5, 1e-5);
        snprintf(name, sizeof name, "%s_grad_v", cases[c].tag);
        s_close_f32(name, gv, g, name, N * D, 1e-5, 1e-5);
        /* FD of Σ gl·logp w.r.t. v */
        for (int64_t k = 0; k < N * D; k += 3) {
            float lpp[5], lpm[5];
            const float keep = v2[k];
            v2[k] = keep + 1e-2f;
            const double hp = (double)v2[k] - keep;
            rl_flow_step_logprob(cases[c].m, xt, v2, xr, t, tn, cases[c].nl, N, D, lpp, NULL, NULL);
            v2[k] = keep - 1e-2f;
            const double hm = keep - (double)v2[k];
            rl_flow_step_logprob(cases[c].m, xt, v2, xr, t, tn, cases[c].nl, N, D, lpm, NULL, NULL);
            v2[k] = keep;
            const int64_t i = k / D;
            const double fd = gl[i] * ((double)lpp[i] - lpm[i]) / (hp + hm);
            /* logp is stored in f32 (|logp| ~ 10): FD noise ~ 1e-6/0.02 */
            if (!(fabs(fd - gv[k]) <= 2e-3 + 1e-3 * fabs(fd)))
                fail_msg("%s FD %g vs grad %g at %lld", cases[c].tag, fd, (double)gv[k], (long long)k);
        }
        free(v2);
        free(xr);
    }
    /* ODE with noise_level 0: deterministic Euler step, logp 0, no gradient */
    float xn[40], lp[5], gv[40];
    assert_int_equal(rl_flow_step_sample(RL_FLOW_STEP_ODE, xt, v, t, tn, 0.0, NULL, N, D, xn, lp), 0);
    for (int64_t k = 0; k < N * D; k++) {
        const int64_t i = k / D;
        const double want = (double)xt[k] - ((double)t[i] - tn[i]) * v[k];
        assert_true(fabs(xn[k] - want) <= 1e-6 * (1 + fabs(want)));
    }
    for (int i = 0; i < 5; i++)
        assert_true(lp[i] == 0.0f);
    assert_int_equal(rl_flow_step_logprob(RL_FLOW_STEP_ODE, xt, v, xn, t, tn, 0.0, N, D, lp, NULL, gv), 0);
    assert_true(lp[0] == 0.0f && gv[0] == 0.0f);
    /* t = 1 by hand: σ = nl·sqrt(1/(1 − t_next)) so std = nl·sqrt(Δ/(1 − t_next))
     * = nl when t_next = 1 − Δ; with x_t = v = 0 the mean is 0. */
    {
        float x0[1] = {0}, v0[1] = {0}, one[1] = {1.0f}, tn1[1] = {0.75f}, z[1] = {1.0f}, o[1], l[1];
        assert_int_equal(rl_flow_step_sample(RL_FLOW_STEP_SDE, x0, v0, one, tn1, 0.5, z, 1, 1, o, l), 0);
        assert_true(fabs(o[0] - 0.5) < 1e-7);
        assert_true(fabs(l[0] - (-log(0.5) - 0.5 * log(2 * M_PI) - 0.5)) < 1e-6);
    }
    /* grid errors: t_next >= t, t > 1 */
    float bad_t[5] = {0.5f, 0.5f, 0.5f, 0.5f, 0.5f}, bad_tn[5] = {0.1f, 0.1f, 0.6f, 0.1f, 0.1f};
    assert_int_equal(rl_flow_step_sample(RL_FLOW_STEP_SDE, xt, v, bad_t, bad_tn, 0.5, noise, N, D, xn, lp),
                     RL_ERANGE);
    assert_non_null(strstr(rl_error_message(), "sample 2"));
    noise[9] = NAN;
    assert_int_equal(rl_flow_step_sample(RL_FLOW_STEP_SDE, xt, v, t, tn, 0.5, noise, N, D, xn, lp),
                     RL_ENUMERIC);
    assert_non_null(strstr(rl_error_message(), "noise[9]"));
    free(xt); free(v); free(noise); free(t); free(tn); free(gl);
    rl_golden_free(g);
}

/* Issue 43's diagnostics: clip counts, credit statistics, the gradient
 * split and the SAR loss's label balance and softplus saturation, each
 * against values worked out by hand. */
static void test_diagnostics(void **state)
{
    (void)state;
    /* clip counts: softmax of {0, 0, 5} is {0.0066, 0.0066, 0.9867} */
    const float e[3] = {0, 0, 5}, one = 1.0f;
    float w[3], w0[3];
    int64_t cl[2] = {-1, -1};
    assert_int_equal(rl_flow_sar_weights_ex(e, &one, NULL, 3, 1, 1.0, 0.05, 0.5, w, NULL, cl), 0);
    assert_int_equal(cl[0], 2);
    assert_int_equal(cl[1], 1);
    assert_int_equal(rl_flow_sar_weights(e, &one, NULL, 3, 1, 1.0, 0.05, 0.5, w0, NULL), 0);
    assert_memory_equal(w, w0, sizeof w);
    assert_int_equal(rl_flow_sar_weights_ex(e, &one, NULL, 3, 1, 1.0, 0, 1, w, NULL, cl), 0);
    assert_int_equal(cl[0] + cl[1], 0);

    /* credit stats: episode 0 uniform (H = 1), episode 1 one-hot (H = 0) */
    const float cw[4] = {0.5f, 1.0f, 0.5f, 0.0f}, rew[2] = {1.0f, 0.0f};
    rl_flow_credit_stats st;
    assert_int_equal(rl_flow_credit_stats_get(cw, rew, NULL, 2, 2, &st), 0);
    assert_true(fabs(st.entropy - 0.5) < 1e-12);
    assert_true(fabs(st.saturated - 0.5) < 1e-12);
    assert_true(fabs(st.pos_frac - 0.5) < 1e-12);
    assert_int_equal(st.episodes, 2);
    assert_int_equal(st.steps, 4);
    /* masking episode 1's second step: it has one kept step, no entropy */
    const float m[4] = {1, 1, 1, 0};
    assert_int_equal(rl_flow_credit_stats_get(cw, rew, m, 2, 2, &st), 0);
    assert_true(fabs(st.entropy - 1.0) < 1e-12);
    assert_int_equal(st.steps, 3);
    const float ipo[2] = {0.25f, 0.75f}; /* p = {1/4, 3/4}: H/log 2 = 0.8113 */
    assert_int_equal(rl_flow_credit_stats_get(ipo, rew, NULL, 2, 1, &st), 0);
    assert_true(fabs(st.entropy - (-(0.25 * log(0.25) + 0.75 * log(0.75)) / log(2.0))) < 1e-9);
    assert_true(fabs(st.saturated) < 1e-12);

    /* gradient split: g_b = g_total − g_a */
    rl_flow_grad_split gs;
    const float a1[2] = {3, 0}, t1[2] = {3, 4};
    assert_int_equal(rl_flow_grad_split_get(a1, t1, 2, &gs), 0);
    assert_true(fabs(gs.norm_a - 3) < 1e-12 && fabs(gs.norm_b - 4) < 1e-12 && fabs(gs.cos) < 1e-12);
    const float a2[2] = {1, 1}, t2[2] = {3, 3};
    assert_int_equal(rl_flow_grad_split_get(a2, t2, 2, &gs), 0);
    assert_true(fabs(gs.cos - 1) < 1e-12 && fabs(gs.norm_b - sqrt(8.0)) < 1e-12);
    const float a3[2] = {1, 0}, t3[2] = {0, 0};
    assert_int_equal(rl_flow_grad_split_get(a3, t3, 2, &gs), 0);
    assert_true(fabs(gs.cos + 1) < 1e-12);
    assert_int_equal(rl_flow_grad_split_get(t3, t3, 2, &gs), 0);
    assert_true(isnan(gs.cos));

    /* SAR: z = ½y(E⁺ − E⁻) = 2yβΣrδ with r = v_old − u, δ = v_θ − v_old:
     * chunk 0 y = +1, r = 1, δ = −2 → z = −4 (flat: sigmoid 0.018);
     * chunk 1 y = −1, r = 1, δ = 0.5 → z = −1 (sigmoid 0.269) */
    const float vt[2] = {-1.0f, 1.5f}, vo[2] = {1.0f, 1.0f}, u[2] = {0.0f, 0.0f};
    const float sw[2] = {1, 1}, lab[2] = {1, -1};
    rl_flow_sar_config cfg = rl_flow_sar_config_default();
    cfg.variant = RL_FLOW_SAR_SOFTPLUS_KL;
    rl_flow_sar_metrics mt;
    assert_int_equal(rl_flow_sar_loss(vt, vo, u, sw, lab, NULL, NULL, 2, 1, &cfg, NULL, &mt), 0);
    double s0 = 1 / (1 + exp(4.0)), s1 = 1 / (1 + exp(1.0));
    assert_true(fabs(mt.label_pos - 0.5) < 1e-12);
    assert_true(fabs(mt.softplus_flat - 0.5) < 1e-12);
    assert_true(fabs(mt.softplus_grad_scale - 0.5 * (s0 + s1)) < 1e-12);
    cfg.variant = RL_FLOW_SAR_MSE_BRANCH;
    assert_int_equal(rl_flow_sar_loss(vt, vo, u, sw, lab, NULL, NULL, 2, 1, &cfg, NULL, &mt), 0);
    assert_true(fabs(mt.label_pos - 0.5) < 1e-12);
    assert_true(isnan(mt.softplus_flat) && isnan(mt.softplus_grad_scale));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ipo_weights_golden),
        cmocka_unit_test(test_ipo_weights_edges),
        cmocka_unit_test(test_episode_rewards),
        cmocka_unit_test(test_ipo_loss_golden_and_fd),
        cmocka_unit_test(test_sar_weights_golden),
        cmocka_unit_test(test_sar_weights_edges),
        cmocka_unit_test(test_sar_loss_golden_and_fd),
        cmocka_unit_test(test_sar_loss_edges),
        cmocka_unit_test(test_sar_loss_kernel_paths),
        cmocka_unit_test(test_ema_interp_recon),
        cmocka_unit_test(test_flow_step_golden_and_fd),
        cmocka_unit_test(test_diagnostics),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
