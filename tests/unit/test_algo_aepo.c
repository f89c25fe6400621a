/* test_algo_aepo.c — ARES / AEPO entropy shaping against the independent
 * float64 PyTorch reference (tests/reference/gen_algo_aepo.py), plus finite
 * differences, hand-derived edge cases, state save/restore and α sign
 * properties.
 *
 * Tolerances: outputs are f32 computed in double, so values compare at
 * atol 1e-6 / rtol 1e-6 (entropy 1e-5 since H ~ log V); α, λ, τ and targets
 * are doubles computed from the same f32 inputs in the same order and
 * compare at 1e-12; flags, counts and buckets compare exactly. */
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
#include "common/algo/lm/aepo.h"

#define GOLDEN_DIR "tests/golden/algo_aepo/"

static rl_golden *s_load(const char *name)
{
    char path[256];
    snprintf(path, sizeof path, GOLDEN_DIR "%s", name);
    rl_golden *g = rl_golden_load(path);
    if (!g)
        fail_msg("%s", rl_error_message());
    return g;
}

static uint8_t *s_u8(const rl_golden *g, const char *name, int64_t *n)
{
    const rl_golden_array *a = rl_golden_get(g, name);
    if (!a)
        fail_msg("golden array '%s' missing", name);
    uint8_t *o = malloc((size_t)(a->numel ? a->numel : 1));
    memcpy(o, a->data, (size_t)a->numel);
    if (n)
        *n = a->numel;
    return o;
}

static int64_t s_count_neq_u8(const char *what, const uint8_t *got, const uint8_t *want,
                              int64_t n)
{
    int64_t bad = 0;
    for (int64_t i = 0; i < n; i++)
        if (got[i] != want[i]) {
            if (!bad)
                print_error("%s: first mismatch at [%lld]: got %d want %d\n", what,
                            (long long)i, got[i], want[i]);
            bad++;
        }
    return bad;
}

/* ---- token entropy ------------------------------------------------------------ */

static void test_entropy_golden(void **state)
{
    (void)state;
    rl_golden *g = s_load("entropy.safetensors");
    int64_t nl, n;
    float *logits = rl_golden_f32(g, "logits", &nl);
    float *dH = rl_golden_f32(g, "dH", &n);
    double *H = rl_golden_f64(g, "H", NULL);
    double *dl = rl_golden_f64(g, "dlogits", NULL);
    int64_t N = n, V = nl / n;
    float *h = malloc(sizeof *h * (size_t)N), *gz = malloc(sizeof *gz * (size_t)nl);
    assert_int_equal(rl_aepo_token_entropy(logits, N, V, h), 0);
    assert_int_equal(rl_check_close_f32("H", h, H, N, 1e-5, 1e-5), 0);
    /* hand-derivable rows: uniform row 5 → log V, masked one-hot row 7 → 0 */
    assert_true(fabs(h[5] - log((double)V)) < 1e-6);
    assert_true(h[7] == 0.0f);
    assert_int_equal(rl_aepo_token_entropy_backward(logits, dH, N, V, gz, 0), 0);
    assert_int_equal(rl_check_close_f32("dlogits", gz, dl, nl, 1e-6, 1e-5), 0);
    /* accumulate adds on top of what is there */
    float *gz2 = malloc(sizeof *gz2 * (size_t)nl);
    for (int64_t i = 0; i < nl; i++)
        gz2[i] = 1.0f;
    assert_int_equal(rl_aepo_token_entropy_backward(logits, dH, N, V, gz2, 1), 0);
    for (int64_t i = 0; i < nl; i++)
        dl[i] += 1.0;
    assert_int_equal(rl_check_close_f32("dlogits+1", gz2, dl, nl, 1e-6, 1e-5), 0);
    free(gz2);
    free(h);
    free(gz);
    free(logits);
    free(dH);
    free(H);
    free(dl);
    rl_golden_free(g);
}

/* Central differences of Σ_n c_n H_n along single coordinates, with the
 * perturbation actually representable in f32 as the step. */
static void test_entropy_gradient_fd(void **state)
{
    (void)state;
    enum { N = 5, V = 13 };
    rl_rng r;
    rl_rng_init(&r, 7, 0);
    float z[N * V], c[N], g[N * V], Hp[N], Hm[N];
    for (int i = 0; i < N * V; i++)
        z[i] = (float)(2.0 * rl_rng_normal(&r));
    for (int n = 0; n < N; n++)
        c[n] = (float)rl_rng_normal(&r);
    z[2 * V + 4] = -INFINITY; /* gradient must be 0 there */
    assert_int_equal(rl_aepo_token_entropy_backward(z, c, N, V, g, 0), 0);
    assert_true(g[2 * V + 4] == 0.0f);
    double worst = 0;
    for (int i = 0; i < N * V; i++) {
        if (i == 2 * V + 4)
            continue;
        float z0 = z[i];
        float zp = z0 + 1e-2f, zm = z0 - 1e-2f;
        z[i] = zp;
        assert_int_equal(rl_aepo_token_entropy(z, N, V, Hp), 0);
        z[i] = zm;
        assert_int_equal(rl_aepo_token_entropy(z, N, V, Hm), 0);
        z[i] = z0;
        double fd = 0;
        for (int n = 0; n < N; n++)
            fd += (double)c[n] * ((double)Hp[n] - (double)Hm[n]);
        fd /= ((double)zp - (double)zm);
        double err = fabs(fd - g[i]);
        if (err > worst)
            worst = err;
        if (err > 2e-4 + 1e-3 * fabs(g[i]))
            fail_msg("entropy FD mismatch at %d: fd %.8g analytic %.8g", i, fd, (double)g[i]);
    }
    assert_true(worst < 2e-4);
    /* the gradient of H sums to zero over a row (softmax shift invariance) */
    for (int n = 0; n < N; n++) {
        double s = 0;
        for (int j = 0; j < V; j++)
            s += g[n * V + j];
        assert_true(fabs(s) < 1e-6);
    }
}

static void test_entropy_nonfinite(void **state)
{
    (void)state;
    float z[3 * 4] = {0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3};
    float H[3], dH[3] = {1, 1, 1}, g[12];
    z[1 * 4 + 2] = NAN;
    assert_int_equal(rl_aepo_token_entropy(z, 3, 4, H), RL_ENUMERIC);
    assert_non_null(strstr(rl_error_message(), "logits[1,2]"));
    assert_int_equal(rl_aepo_token_entropy_backward(z, dH, 3, 4, g, 0), RL_ENUMERIC);
    z[1 * 4 + 2] = INFINITY;
    assert_int_equal(rl_aepo_token_entropy(z, 3, 4, H), RL_ENUMERIC);
    for (int j = 0; j < 4; j++)
        z[1 * 4 + j] = -INFINITY;
    assert_int_equal(rl_aepo_token_entropy(z, 3, 4, H), RL_ENUMERIC);
    assert_non_null(strstr(rl_error_message(), "row 1 is all -inf"));
    /* partial −inf is fine and equals the entropy over the finite entries */
    float z2[4] = {-INFINITY, 0, 0, -INFINITY};
    assert_int_equal(rl_aepo_token_entropy(z2, 1, 4, H), 0);
    assert_true(fabs(H[0] - log(2.0)) < 1e-7);
    float bad_dH[1] = {NAN};
    assert_int_equal(rl_aepo_token_entropy_backward(z2, bad_dH, 1, 4, g, 0), RL_ENUMERIC);
    assert_int_equal(rl_aepo_token_entropy(z2, 1, 0, H), RL_EINVAL);
    assert_int_equal(rl_aepo_token_entropy(NULL, 0, 4, NULL), 0); /* N = 0 is a no-op */
}

/* Large N·V takes the threaded path: it must agree with one row at a time
 * and report the lowest bad row whatever the thread schedule. */
static void test_entropy_threaded(void **state)
{
    (void)state;
    enum { N = 48, V = 3001 };
    float *z = malloc(sizeof *z * N * V), *dH = malloc(sizeof *dH * N);
    float *g = malloc(sizeof *g * N * V), *g1 = malloc(sizeof *g1 * V);
    float H[N], h1;
    rl_rng r;
    rl_rng_init(&r, 11, 3);
    for (int i = 0; i < N * V; i++)
        z[i] = (float)(3.0 * rl_rng_normal(&r));
    for (int n = 0; n < N; n++)
        dH[n] = (float)rl_rng_normal(&r);
    assert_int_equal(rl_aepo_token_entropy(z, N, V, H), 0);
    assert_int_equal(rl_aepo_token_entropy_backward(z, dH, N, V, g, 0), 0);
    for (int n = 0; n < N; n++) {
        assert_int_equal(rl_aepo_token_entropy(z + n * V, 1, V, &h1), 0);
        assert_true(h1 == H[n]);
        assert_int_equal(rl_aepo_token_entropy_backward(z + n * V, dH + n, 1, V, g1, 0), 0);
        assert_memory_equal(g1, g + n * V, sizeof *g1 * V);
    }
    z[40 * V + 5] = NAN;
    z[17 * V + 2999] = INFINITY;
    assert_int_equal(rl_aepo_token_entropy(z, N, V, H), RL_ENUMERIC);
    assert_non_null(strstr(rl_error_message(), "logits[17,2999]"));
    free(z);
    free(dH);
    free(g);
    free(g1);
}

/* ---- windows, percentile, HWE --------------------------------------------------- */

static void test_windows_golden(void **state)
{
    (void)state;
    rl_golden *g = s_load("windows.safetensors");
    const rl_golden_array *ha = rl_golden_get(g, "H");
    int64_t B = ha->shape[0], T = ha->shape[1], BT = B * T;
    float *H = rl_golden_f32(g, "H", NULL), *mask = rl_golden_f32(g, "mask", NULL);
    uint8_t *cand = s_u8(g, "cand", NULL);
    float *win = malloc(sizeof *win * (size_t)BT), *pct = malloc(sizeof *pct * (size_t)B);
    uint8_t *valid = malloc((size_t)BT), *has = malloc((size_t)B);
    int ws[3] = {4, 1, 3};
    for (int k = 0; k < 3; k++) {
        char nm[32];
        assert_int_equal(rl_aepo_window_entropy(H, mask, B, T, ws[k], win, valid), 0);
        snprintf(nm, sizeof nm, "win_w%d", ws[k]);
        double *want = rl_golden_f64(g, nm, NULL);
        assert_int_equal(rl_check_close_f32(nm, win, want, BT, 0, 0), 0); /* same f32 */
        free(want);
        snprintf(nm, sizeof nm, "valid_w%d", ws[k]);
        uint8_t *wv = s_u8(g, nm, NULL);
        assert_int_equal(s_count_neq_u8(nm, valid, wv, BT), 0);
        free(wv);
        assert_int_equal(rl_aepo_window_percentile(win, valid, B, T, 95.0, pct, has), 0);
        snprintf(nm, sizeof nm, "pct_w%d", ws[k]);
        want = rl_golden_f64(g, nm, NULL);
        assert_int_equal(rl_check_close_f32(nm, pct, want, B, 1e-6, 1e-6), 0);
        free(want);
        snprintf(nm, sizeof nm, "has_w%d", ws[k]);
        wv = s_u8(g, nm, NULL);
        assert_int_equal(s_count_neq_u8(nm, has, wv, B), 0);
        free(wv);
    }
    /* HWE with the reference τ, with and without a candidate mask */
    assert_int_equal(rl_aepo_window_entropy(H, mask, B, T, 4, win, valid), 0);
    double tau = rl_golden_scalar(g, "tau");
    uint8_t *flags = malloc((size_t)BT);
    float *counts = malloc(sizeof *counts * (size_t)B);
    assert_int_equal(rl_aepo_hwe(win, valid, NULL, B, T, tau, flags, counts), 0);
    uint8_t *wf = s_u8(g, "flags", NULL);
    double *wc = rl_golden_f64(g, "counts", NULL);
    assert_int_equal(s_count_neq_u8("flags", flags, wf, BT), 0);
    assert_int_equal(rl_check_close_f32("counts", counts, wc, B, 0, 0), 0);
    free(wf);
    free(wc);
    assert_int_equal(rl_aepo_hwe(win, valid, cand, B, T, tau, flags, counts), 0);
    wf = s_u8(g, "flags_cand", NULL);
    wc = rl_golden_f64(g, "counts_cand", NULL);
    assert_int_equal(s_count_neq_u8("flags_cand", flags, wf, BT), 0);
    assert_int_equal(rl_check_close_f32("counts_cand", counts, wc, B, 0, 0), 0);
    free(wf);
    free(wc);
    /* percentile at other q on the full row 6 */
    double *rq = rl_golden_f64(g, "row6_q", NULL);
    double qs[4] = {0, 50, 100, 37.5};
    for (int k = 0; k < 4; k++) {
        float p;
        uint8_t hp;
        assert_int_equal(rl_aepo_window_percentile(win + 6 * T, valid + 6 * T, 1, T, qs[k], &p,
                                                   &hp), 0);
        assert_int_equal(hp, 1);
        assert_true(fabs(p - rq[k]) <= 1e-6 * fabs(rq[k]) + 1e-7);
    }
    free(rq);
    free(flags);
    free(counts);
    free(H);
    free(mask);
    free(cand);
    free(win);
    free(pct);
    free(valid);
    free(has);
    rl_golden_free(g);
}

/* Hand-derived: lengths 0, w−1, w, w+1, a hole, and an all-masked batch. */
static void test_windows_edges(void **state)
{
    (void)state;
    enum { B = 5, T = 8, W = 3 };
    float H[B * T], mask[B * T] = {0}, win[B * T];
    uint8_t valid[B * T], has[B], flags[B * T];
    float pct[B], counts[B];
    for (int i = 0; i < B * T; i++)
        H[i] = (float)(i % T) + 1.0f; /* H[b,t] = t + 1 */
    int len[B] = {0, W - 1, W, W + 1, T};
    for (int b = 0; b < B; b++)
        for (int t = 0; t < len[b]; t++)
            mask[b * T + t] = 1;
    mask[4 * T + 2] = 0; /* row 4: hole at t = 2, valid t = 0,1,3..7 (7 tokens) */
    H[4 * T + 2] = NAN;  /* never read */
    H[0 * T + 5] = NAN;  /* masked in the empty row */
    assert_int_equal(rl_aepo_window_entropy(H, mask, B, T, W, win, valid), 0);
    for (int b = 0; b < 3; b++) /* L ≤ w: no complete window */
        for (int t = 0; t < T; t++) {
            assert_int_equal(valid[b * T + t], 0);
            assert_true(win[b * T + t] == 0.0f);
        }
    /* L = w + 1: one window, at t = 0, mean of H[1..3] = (2+3+4)/3 = 3 */
    for (int t = 0; t < T; t++)
        assert_int_equal(valid[3 * T + t], t == 0);
    assert_true(win[3 * T + 0] == 3.0f);
    /* row 4, valid positions 0,1,3,4,5,6,7 → windows at 0,1,3,4:
     * t=0: H at 1,3,4 = 2,4,5 → 11/3; t=1: 3,4,5 → 4,5,6 → 5;
     * t=3: 4,5,6 → 5,6,7 → 6; t=4: 5,6,7 → 6,7,8 → 7 */
    int wantv[T] = {1, 1, 0, 1, 1, 0, 0, 0};
    float wantw[T] = {(float)(11.0 / 3.0), 5, 0, 6, 7, 0, 0, 0};
    for (int t = 0; t < T; t++) {
        assert_int_equal(valid[4 * T + t], wantv[t]);
        assert_true(win[4 * T + t] == wantw[t]);
    }
    assert_int_equal(rl_aepo_window_percentile(win, valid, B, T, 95, pct, has), 0);
    for (int b = 0; b < 3; b++) {
        assert_int_equal(has[b], 0);
        assert_true(pct[b] == 0.0f);
    }
    assert_int_equal(has[3], 1);
    assert_true(pct[3] == 3.0f);
    /* row 4 sorted 11/3, 5, 6, 7; q=95 → pos 2.85 → 6 + 0.85·1 */
    assert_true(fabs(pct[4] - 6.85) < 1e-6);
    /* HWE at τ = 6: row 4 has 6 and 7 (≥ is inclusive) */
    assert_int_equal(rl_aepo_hwe(win, valid, NULL, B, T, 6.0, flags, counts), 0);
    for (int b = 0; b < 4; b++)
        assert_true(counts[b] == 0.0f);
    assert_true(counts[4] == 2.0f);
    assert_int_equal(flags[4 * T + 3], 1);
    assert_int_equal(flags[4 * T + 4], 1);
    assert_int_equal(flags[4 * T + 1], 0);
    assert_int_equal(rl_aepo_hwe(win, valid, NULL, B, T, NAN, flags, counts), RL_ENUMERIC);

    /* an all-masked batch: nothing valid, τ stays unset */
    memset(mask, 0, sizeof mask);
    assert_int_equal(rl_aepo_window_entropy(H, mask, B, T, W, win, valid), 0);
    assert_int_equal(rl_aepo_window_percentile(win, valid, B, T, 95, pct, has), 0);
    rl_aepo_state *s = rl_aepo_state_new(NULL);
    double med = 0, tau;
    assert_int_equal(rl_aepo_threshold_update(s, pct, has, B, &med), 0);
    assert_true(isnan(med));
    assert_int_equal(rl_aepo_threshold_get(s, &tau), RL_ESTATE);
    rl_aepo_state_free(s);

    /* NaN at a valid position is an error naming it; bad window size */
    mask[1 * T + 4] = 1;
    H[1 * T + 4] = NAN;
    assert_int_equal(rl_aepo_window_entropy(H, mask, B, T, W, win, valid), RL_ENUMERIC);
    assert_non_null(strstr(rl_error_message(), "H[1,4]"));
    assert_int_equal(rl_aepo_window_entropy(H, mask, B, T, 0, win, valid), RL_EINVAL);
    assert_int_equal(rl_aepo_window_percentile(win, valid, B, T, 101, pct, has), RL_EINVAL);
}

static void test_threshold_ema(void **state)
{
    (void)state;
    rl_aepo_state *s = rl_aepo_state_new(NULL);
    double tau, med;
    float p1[4] = {1, 3, 100, 2};
    uint8_t h1[4] = {1, 1, 0, 1}; /* row 2 has no windows: excluded */
    assert_int_equal(rl_aepo_threshold_update(s, p1, h1, 4, &med), 0);
    assert_true(med == 2.0);
    assert_int_equal(rl_aepo_threshold_get(s, &tau), 0);
    assert_true(tau == 2.0); /* first batch sets τ */
    float p2[2] = {7, 5};
    uint8_t h2[2] = {1, 1};
    assert_int_equal(rl_aepo_threshold_update(s, p2, h2, 2, &med), 0);
    assert_true(med == 6.0); /* even count: mean of the middle two */
    assert_int_equal(rl_aepo_threshold_get(s, &tau), 0);
    assert_true(fabs(tau - (0.99 * 2.0 + 0.01 * 6.0)) < 1e-15);
    assert_int_equal(rl_aepo_threshold_set(s, INFINITY), RL_ENUMERIC);
    assert_int_equal(rl_aepo_threshold_set(s, 1.5), 0);
    assert_int_equal(rl_aepo_threshold_get(s, &tau), 0);
    assert_true(tau == 1.5);
    rl_aepo_state_free(s);
}

/* ---- reward ---------------------------------------------------------------- */

static void test_reward_grid(void **state)
{
    (void)state;
    rl_golden *g = s_load("reward_grid.safetensors");
    int64_t n;
    int64_t *bk = rl_golden_i64(g, "bucket", &n), *cor = rl_golden_i64(g, "correct", NULL);
    double *cnt = rl_golden_f64(g, "count", NULL), *tgt = rl_golden_f64(g, "target", NULL);
    double *al = rl_golden_f64(g, "alpha", NULL), *want = rl_golden_f64(g, "reward", NULL);
    double *got = malloc(sizeof *got * (size_t)n);
    rl_aepo_config c;
    rl_aepo_config_default(&c);
    for (int64_t i = 0; i < n; i++)
        got[i] = rl_aepo_entropy_reward_one(&c, (int)bk[i], (int)cor[i], cnt[i], tgt[i], al[i]);
    assert_int_equal(rl_check_close_f64("reward", got, want, n, 1e-12, 1e-12), 0);
    assert_true(isnan(rl_aepo_entropy_reward_one(&c, 3, 1, 1, 1, 1)));
    /* hand checks: easy correct inside the band → 0; hard correct at δ = −m
     * → sig(0)·cap = 0.5·α·1.2 */
    assert_true(rl_aepo_entropy_reward_one(&c, RL_AEPO_EASY, 1, 10, 10, 1) == 0.0);
    double m = 0.35 * 20;
    assert_true(fabs(rl_aepo_entropy_reward_one(&c, RL_AEPO_HARD, 1, 20 - m, 20, 1) - 0.6) <
                1e-15);
    free(got);
    free(bk);
    free(cor);
    free(cnt);
    free(tgt);
    free(al);
    free(want);
    rl_golden_free(g);
}

/* ---- multi-step simulation ------------------------------------------------------ */

typedef struct sim {
    rl_golden *g;
    int64_t S, B, T;
    double beta;
    int64_t *gid, *bucket_w;
    float *acc, *H, *mask, *kl;
    double *median, *tau, *counts, *alpha, *target, *ent, *overall, *klb, *lambda, *klw;
    uint8_t *flags;
} sim;

static void s_sim_load(sim *m)
{
    m->g = s_load("sim.safetensors");
    const rl_golden_array *a = rl_golden_get(m->g, "H");
    m->S = a->shape[0];
    m->B = a->shape[1];
    m->T = a->shape[2];
    m->beta = atof(rl_golden_meta(m->g, "beta"));
    m->gid = rl_golden_i64(m->g, "gid", NULL);
    m->bucket_w = rl_golden_i64(m->g, "bucket", NULL);
    m->acc = rl_golden_f32(m->g, "acc", NULL);
    m->H = rl_golden_f32(m->g, "H", NULL);
    m->mask = rl_golden_f32(m->g, "mask", NULL);
    m->kl = rl_golden_f32(m->g, "kl", NULL);
    m->median = rl_golden_f64(m->g, "median", NULL);
    m->tau = rl_golden_f64(m->g, "tau", NULL);
    m->counts = rl_golden_f64(m->g, "counts", NULL);
    m->alpha = rl_golden_f64(m->g, "alpha", NULL);
    m->target = rl_golden_f64(m->g, "target", NULL);
    m->ent = rl_golden_f64(m->g, "ent", NULL);
    m->overall = rl_golden_f64(m->g, "overall", NULL);
    m->klb = rl_golden_f64(m->g, "kl_bucket", NULL);
    m->lambda = rl_golden_f64(m->g, "lambda", NULL);
    m->klw = rl_golden_f64(m->g, "klw", NULL);
    m->flags = s_u8(m->g, "flags", NULL);
}

static void s_sim_free(sim *m)
{
    void *p[] = {m->gid, m->bucket_w, m->acc, m->H, m->mask, m->kl, m->median, m->tau,
                 m->counts, m->alpha, m->target, m->ent, m->overall, m->klb, m->lambda,
                 m->klw, m->flags};
    for (size_t i = 0; i < sizeof p / sizeof p[0]; i++)
        free(p[i]);
    rl_golden_free(m->g);
}

/* Everything one step produces, for comparing two states bit for bit. */
typedef struct step_out {
    double median, tau, alpha[3], target[3], lambda[3], klb[3];
    float counts[64], ent[64], overall[64], klw[64 * 64];
    uint8_t flags[64 * 64];
    int8_t bucket[64];
} step_out;

static void s_sim_step(rl_aepo_state *s, const sim *m, int64_t st, step_out *o)
{
    int64_t B = m->B, T = m->T, BT = B * T;
    assert_true(B <= 64 && T <= 64);
    const float *H = m->H + st * BT, *mask = m->mask + st * BT, *kl = m->kl + st * BT;
    const float *acc = m->acc + st * B;
    const int64_t *gid = m->gid + st * B;
    float win[64 * 64], pct[64];
    uint8_t valid[64 * 64], has[64];
    const rl_aepo_config *c = rl_aepo_state_config(s);
    assert_int_equal(rl_aepo_window_entropy(H, mask, B, T, c->window, win, valid), 0);
    assert_int_equal(rl_aepo_window_percentile(win, valid, B, T, c->percentile, pct, has), 0);
    assert_int_equal(rl_aepo_threshold_update(s, pct, has, B, &o->median), 0);
    assert_int_equal(rl_aepo_threshold_get(s, &o->tau), 0);
    assert_int_equal(rl_aepo_hwe(win, valid, NULL, B, T, o->tau, o->flags, o->counts), 0);
    assert_int_equal(rl_aepo_update(s, gid, acc, o->counts, B, o->bucket, NULL), 0);
    assert_int_equal(rl_aepo_entropy_reward(s, o->bucket, acc, o->counts, B, o->ent, o->overall),
                     0);
    assert_int_equal(rl_aepo_lambda_update(s, kl, mask, o->bucket, B, T, o->klb), 0);
    assert_int_equal(rl_aepo_kl_weights(s, o->flags, mask, o->bucket, B, T, m->beta, -1, o->klw),
                     0);
    for (int d = 0; d < 3; d++) {
        o->alpha[d] = rl_aepo_alpha(s, d);
        o->target[d] = rl_aepo_target(s, d, NULL);
        o->lambda[d] = rl_aepo_lambda(s, d);
    }
}

static void s_sim_check(const sim *m, int64_t st, const step_out *o)
{
    int64_t B = m->B, BT = B * m->T;
    char what[64];
#define CHK(name, got, want, n, atol, rtol)                                                   \
    do {                                                                                       \
        snprintf(what, sizeof what, "step %lld %s", (long long)st, name);                     \
        assert_int_equal(rl_check_close_f64(what, got, want, n, atol, rtol), 0);              \
    } while (0)
#define CHK32(name, got, want, n, atol, rtol)                                                 \
    do {                                                                                       \
        snprintf(what, sizeof what, "step %lld %s", (long long)st, name);                     \
        assert_int_equal(rl_check_close_f32(what, got, want, n, atol, rtol), 0);              \
    } while (0)
    CHK("median", &o->median, m->median + st, 1, 1e-12, 1e-12);
    CHK("tau", &o->tau, m->tau + st, 1, 1e-12, 1e-12);
    CHK32("counts", o->counts, m->counts + st * B, B, 0, 0);
    snprintf(what, sizeof what, "step %lld flags", (long long)st);
    assert_int_equal(s_count_neq_u8(what, o->flags, m->flags + st * BT, BT), 0);
    for (int64_t b = 0; b < B; b++)
        if (o->bucket[b] != m->bucket_w[st * B + b])
            fail_msg("step %lld row %lld: bucket %d want %lld", (long long)st, (long long)b,
                     o->bucket[b], (long long)m->bucket_w[st * B + b]);
    CHK("alpha", o->alpha, m->alpha + st * 3, 3, 1e-12, 1e-12);
    CHK("target", o->target, m->target + st * 3, 3, 0, 0);
    CHK32("ent", o->ent, m->ent + st * B, B, 1e-6, 1e-6);
    CHK32("overall", o->overall, m->overall + st * B, B, 1e-6, 1e-6);
    CHK("kl_bucket", o->klb, m->klb + st * 3, 3, 1e-9, 1e-6);
    CHK("lambda", o->lambda, m->lambda + st * 3, 3, 1e-12, 1e-9);
    CHK32("klw", o->klw, m->klw + st * BT, BT, 1e-8, 1e-6);
#undef CHK
#undef CHK32
}

static rl_aepo_state *s_sim_bootstrap(const sim *m)
{
    rl_aepo_state *s = rl_aepo_state_new(NULL);
    int64_t nb;
    int64_t *bg = rl_golden_i64(m->g, "boot_gid", &nb);
    float *ba = rl_golden_f32(m->g, "boot_acc", NULL), *bh = rl_golden_f32(m->g, "boot_hwe", NULL);
    double *bt = rl_golden_f64(m->g, "boot_target", NULL);
    int64_t *bb = rl_golden_i64(m->g, "boot_bucket", NULL);
    /* two bootstrap batches: sums carry across them */
    int64_t half = nb / 2;
    assert_int_equal(rl_aepo_bootstrap_add(s, bg, ba, bh, half), 0);
    assert_int_equal(rl_aepo_difficulty_get(s, bg[0]), RL_AEPO_UNKNOWN); /* not yet */
    assert_int_equal(rl_aepo_bootstrap_add(s, bg + half, ba + half, bh + half, nb - half), 0);
    rl_aepo_batch_stats st;
    assert_int_equal(rl_aepo_bootstrap_finish(s, &st), 0);
    for (int d = 0; d < 3; d++) {
        int has;
        assert_true(rl_aepo_target(s, d, &has) == bt[d]);
        assert_int_equal(has, 1);
        assert_true(rl_aepo_alpha(s, d) == 0.5); /* bootstrap leaves α */
    }
    for (int64_t g = 0; g < 10; g++)
        assert_int_equal(rl_aepo_difficulty_get(s, g), (int)bb[g]);
    assert_int_equal(rl_aepo_difficulty_count(s), 10);
    free(bg);
    free(ba);
    free(bh);
    free(bt);
    free(bb);
    return s;
}

static void test_sim_golden(void **state)
{
    (void)state;
    sim m;
    s_sim_load(&m);
    rl_aepo_state *s = s_sim_bootstrap(&m);
    /* id 10 is introduced at step 2 and was never bootstrapped */
    assert_int_equal(rl_aepo_difficulty_get(s, 10), RL_AEPO_UNKNOWN);
    step_out *o = malloc(sizeof *o);
    for (int64_t st = 0; st < m.S; st++) {
        s_sim_step(s, &m, st, o);
        s_sim_check(&m, st, o);
        if (st == 2)
            assert_int_not_equal(rl_aepo_difficulty_get(s, 10), RL_AEPO_UNKNOWN);
    }
    free(o);
    rl_aepo_state_free(s);
    s_sim_free(&m);
}

/* save → restore mid-run: the restored state continues bit-identically. */
static void test_state_roundtrip(void **state)
{
    (void)state;
    sim m;
    s_sim_load(&m);
    rl_aepo_state *a = s_sim_bootstrap(&m);
    step_out *oa = calloc(1, sizeof *oa), *ob = calloc(1, sizeof *ob);
    for (int64_t st = 0; st < 3; st++)
        s_sim_step(a, &m, st, oa);
    /* also keep pending bootstrap sums in the saved state */
    int64_t pg[2] = {500, 501};
    float pa[2] = {0.25f, 1.0f}, ph[2] = {3.0f, 1.5f};
    assert_int_equal(rl_aepo_bootstrap_add(a, pg, pa, ph, 2), 0);
    char *j1 = rl_aepo_state_to_json(a);
    assert_non_null(j1);
    rl_aepo_state *b = rl_aepo_state_from_json(j1);
    if (!b)
        fail_msg("restore failed: %s", rl_error_message());
    char *j2 = rl_aepo_state_to_json(b);
    assert_string_equal(j1, j2);
    for (int64_t st = 3; st < m.S; st++) {
        s_sim_step(a, &m, st, oa);
        s_sim_step(b, &m, st, ob);
        assert_memory_equal(oa, ob, sizeof *oa);
        s_sim_check(&m, st, ob);
    }
    rl_aepo_batch_stats sa, sb;
    assert_int_equal(rl_aepo_bootstrap_finish(a, &sa), 0);
    assert_int_equal(rl_aepo_bootstrap_finish(b, &sb), 0);
    assert_memory_equal(&sa, &sb, sizeof sa);
    free(j1);
    free(j2);
    j1 = rl_aepo_state_to_json(a);
    j2 = rl_aepo_state_to_json(b);
    assert_string_equal(j1, j2);
    free(j1);
    free(j2);
    free(oa);
    free(ob);
    rl_aepo_state_free(a);
    rl_aepo_state_free(b);
    s_sim_free(&m);
}

static void test_state_json_errors(void **state)
{
    (void)state;
    assert_null(rl_aepo_state_from_json("{not json"));
    assert_int_equal(rl_error_code(), RL_EPROTO);
    assert_null(rl_aepo_state_from_json("{\"format\":\"other\",\"version\":1}"));
    assert_int_equal(rl_error_code(), RL_EPROTO);
    rl_aepo_state *s = rl_aepo_state_new(NULL);
    char *j = rl_aepo_state_to_json(s);
    rl_aepo_state *r = rl_aepo_state_from_json(j);
    assert_non_null(r);
    rl_aepo_state_free(r);
    /* an id's bucket is range-checked as saved, not after wrapping to an int
     * (4294967297 became bucket 1); a bucket in range is taken */
    char *ids = strstr(j, "\"ids\":[]");
    assert_non_null(ids);
    for (int k = 0; k < 2; k++) {
        char *w = malloc(strlen(j) + 64);
        size_t at = (size_t)(ids - j) + strlen("\"ids\":[");
        memcpy(w, j, at);
        strcpy(w + at, k ? "[7,1,0.5,1,1,0.5,0.5]" : "[7,4294967297,0.5,1,1,0.5,0.5]");
        strcat(w, ids + strlen("\"ids\":["));
        r = rl_aepo_state_from_json(w);
        if (k) {
            if (!r)
                fail_msg("bucket 1: %s", rl_error_message());
            rl_aepo_state_free(r);
        } else {
            assert_null(r);
            assert_non_null(strstr(rl_error_message(), "ids[0] is malformed"));
        }
        free(w);
    }
    /* α outside [alpha_min, alpha_max] is rejected with the field named */
    char *p = strstr(j, "\"alpha\":[");
    assert_non_null(p);
    char *bad = malloc(strlen(j) + 16);
    size_t pre = (size_t)(p - j) + strlen("\"alpha\":[");
    memcpy(bad, j, pre);
    strcpy(bad + pre, "7.0,");
    strcat(bad, strchr(p, ',') + 1);
    assert_null(rl_aepo_state_from_json(bad));
    assert_int_equal(rl_error_code(), RL_EPROTO);
    assert_non_null(strstr(rl_error_message(), "easy"));
    free(bad);
    /* a missing key is named */
    char *q = strstr(j, "\"kappa\"");
    assert_non_null(q);
    q[1] = 'K';
    assert_null(rl_aepo_state_from_json(j));
    assert_non_null(strstr(rl_error_message(), "'kappa'"));
    free(j);
    /* invalid config at construction */
    rl_aepo_config c;
    rl_aepo_config_default(&c);
    c.kappa[2] = 0;
    assert_null(rl_aepo_state_new(&c));
    assert_non_null(strstr(rl_error_message(), "kappa[hard]"));
    rl_aepo_state_free(s);
}

/* ---- difficulty, targets, fallbacks ----------------------------------------------------- */

static void test_difficulty_and_targets(void **state)
{
    (void)state;
    rl_aepo_state *s = rl_aepo_state_new(NULL);
    assert_int_equal(rl_aepo_difficulty_get(s, 42), RL_AEPO_UNKNOWN);
    /* id 42: 3/3 correct → easy; id 7: 1/3 → medium (boundary inclusive);
     * id −5: 0/3 → hard. HWE means 2, 5, 9; first step: no targets yet, so
     * α does not move and targets are set. */
    int64_t gid[9] = {42, 7, -5, 42, 7, -5, 42, 7, -5};
    float acc[9] = {1, 1, 0, 1, 0, 0, 1, 0, 0};
    float hwe[9] = {1, 5, 9, 2, 4, 9, 3, 6, 9};
    int8_t bk[9];
    rl_aepo_batch_stats st;
    assert_int_equal(rl_aepo_update(s, gid, acc, hwe, 9, bk, &st), 0);
    assert_int_equal(bk[0], RL_AEPO_EASY);
    assert_int_equal(bk[1], RL_AEPO_MEDIUM);
    assert_int_equal(bk[2], RL_AEPO_HARD);
    assert_int_equal(rl_aepo_difficulty_get(s, 42), RL_AEPO_EASY);
    assert_int_equal(st.n_ids[0], 1);
    assert_int_equal(st.n_rows[1], 3);
    for (int d = 0; d < 3; d++)
        assert_true(rl_aepo_alpha(s, d) == 0.5);
    assert_true(rl_aepo_target(s, RL_AEPO_EASY, NULL) == 2);
    assert_true(rl_aepo_target(s, RL_AEPO_MEDIUM, NULL) == 5);
    assert_true(rl_aepo_target(s, RL_AEPO_HARD, NULL) == 9);

    /* next batch has only easy ids: medium and hard keep their targets and α;
     * easy: Δ = mean − target = 6 − 2 → α = 0.5 + 0.05·4 = 0.7 */
    int64_t g2[2] = {42, 43};
    float a2[2] = {1, 1}, h2[2] = {6, 6};
    assert_int_equal(rl_aepo_update(s, g2, a2, h2, 2, NULL, &st), 0);
    assert_true(isnan(st.mean_hwe[RL_AEPO_MEDIUM]));
    assert_true(fabs(rl_aepo_alpha(s, RL_AEPO_EASY) - 0.7) < 1e-15);
    assert_true(rl_aepo_alpha(s, RL_AEPO_MEDIUM) == 0.5);
    assert_true(rl_aepo_target(s, RL_AEPO_EASY, NULL) == 6);
    assert_true(rl_aepo_target(s, RL_AEPO_MEDIUM, NULL) == 5);
    assert_true(rl_aepo_target(s, RL_AEPO_HARD, NULL) == 9);
    /* the first-seen id 43 now has a bucket */
    assert_int_equal(rl_aepo_difficulty_get(s, 43), RL_AEPO_EASY);
    rl_aepo_state_free(s);

    /* fallback for a bucket that never had samples: batch-wide mean of the id
     * means (here ids have 2.5 and 3.5 → 3), rounded half to even */
    s = rl_aepo_state_new(NULL);
    int64_t g3[4] = {1, 1, 2, 2};
    float a3[4] = {1, 1, 1, 1}, h3[4] = {2, 3, 3, 4};
    assert_int_equal(rl_aepo_update(s, g3, a3, h3, 4, NULL, &st), 0);
    int has;
    assert_true(rl_aepo_target(s, RL_AEPO_EASY, &has) == 3);
    assert_true(rl_aepo_target(s, RL_AEPO_HARD, &has) == 3);
    assert_int_equal(has, 1);
    /* round half to even: id mean 2.5 alone → 2 */
    int64_t g4[2] = {9, 9};
    float a4[2] = {1, 1}, h4[2] = {2, 3};
    assert_int_equal(rl_aepo_update(s, g4, a4, h4, 2, NULL, &st), 0);
    assert_true(rl_aepo_target(s, RL_AEPO_EASY, NULL) == 2);
    rl_aepo_state_free(s);

    /* an empty batch leaves never-set targets unset; the reward uses 0 then */
    s = rl_aepo_state_new(NULL);
    assert_int_equal(rl_aepo_update(s, NULL, NULL, NULL, 0, NULL, &st), 0);
    assert_true(rl_aepo_target(s, RL_AEPO_MEDIUM, &has) == 0);
    assert_int_equal(has, 0);
    int8_t b1[1] = {RL_AEPO_MEDIUM};
    float ac1[1] = {1}, hw1[1] = {4}, er[1], ov[1];
    assert_int_equal(rl_aepo_entropy_reward(s, b1, ac1, hw1, 1, er, ov), 0);
    double want = rl_aepo_entropy_reward_one(rl_aepo_state_config(s), 1, 1, 4, 0, 0.5);
    assert_true(er[0] == (float)want);
    assert_true(ov[0] == (float)(1 + want));
    /* unknown bucket in the reward is an error; so is bad accuracy */
    b1[0] = RL_AEPO_UNKNOWN;
    assert_int_equal(rl_aepo_entropy_reward(s, b1, ac1, hw1, 1, er, ov), RL_EINVAL);
    assert_non_null(strstr(rl_error_message(), "unknown"));
    int64_t g5[1] = {3};
    float bad_acc[1] = {NAN};
    assert_int_equal(rl_aepo_update(s, g5, bad_acc, hw1, 1, NULL, NULL), RL_ENUMERIC);
    bad_acc[0] = 1.5f;
    assert_int_equal(rl_aepo_update(s, g5, bad_acc, hw1, 1, NULL, NULL), RL_EINVAL);
    assert_int_equal(rl_aepo_difficulty_get(s, 3), RL_AEPO_UNKNOWN); /* nothing applied */
    rl_aepo_state_free(s);

    /* many ids: the id map grows and keeps every bucket */
    s = rl_aepo_state_new(NULL);
    enum { N = 5000 };
    int64_t *gg = malloc(sizeof *gg * N);
    float *aa = malloc(sizeof *aa * N), *hh = malloc(sizeof *hh * N);
    for (int i = 0; i < N; i++) {
        gg[i] = (int64_t)i * 1000003 - 77;
        aa[i] = (float)(i % 3) / 2.0f; /* 0, .5, 1 → hard, medium, easy */
        hh[i] = 1;
    }
    assert_int_equal(rl_aepo_update(s, gg, aa, hh, N, NULL, &st), 0);
    assert_int_equal(rl_aepo_difficulty_count(s), N);
    for (int i = 0; i < N; i++)
        assert_int_equal(rl_aepo_difficulty_get(s, gg[i]), 2 - i % 3);
    free(gg);
    free(aa);
    free(hh);
    rl_aepo_state_free(s);
}

/* Repeated α updates strengthen the pressure toward the target: for easy and
 * medium with too many HWE tokens α rises, so the correct-answer penalty for
 * exceeding the target grows; for hard with too few, α rises, so the reward
 * gap between reaching the target and staying below grows. With the error
 * reversed, α falls and the pressure away from the target side relaxes. */
static void test_alpha_property(void **state)
{
    (void)state;
    rl_aepo_state *s = rl_aepo_state_new(NULL);
    const rl_aepo_config *c = rl_aepo_state_config(s);
    double target = 10;
    for (int d = 0; d < 3; d++)
        assert_int_equal(rl_aepo_set_target(s, d, target), 0);
    rl_aepo_batch_stats st;
    memset(&st, 0, sizeof st);
    for (int d = 0; d < 3; d++) {
        st.n_ids[d] = 4;
        st.mean_hwe[d] = d == RL_AEPO_HARD ? 6 : 14; /* away from target */
    }
    double prev_gap[3] = {-1, -1, -1}, prev_alpha[3];
    for (int d = 0; d < 3; d++)
        prev_alpha[d] = rl_aepo_alpha(s, d);
    for (int it = 0; it < 20; it++) {
        assert_int_equal(rl_aepo_alpha_update(s, &st), 0);
        for (int d = 0; d < 3; d++) {
            double a = rl_aepo_alpha(s, d);
            assert_true(a >= prev_alpha[d]); /* Δ > 0 in the bucket's own sign */
            assert_true(a <= c->alpha_max);
            if (prev_alpha[d] < c->alpha_max)
                assert_true(a > prev_alpha[d]);
            /* reward at the target minus reward on the wrong side of it */
            double wrong_side = d == RL_AEPO_HARD ? target - 8 : target + 8;
            double gap = rl_aepo_entropy_reward_one(c, d, 1, target, target, a) -
                         rl_aepo_entropy_reward_one(c, d, 1, wrong_side, target, a);
            assert_true(gap > 0); /* the target is preferred */
            assert_true(gap >= prev_gap[d]);
            if (a > prev_alpha[d])
                assert_true(gap > prev_gap[d]);
            /* the slope toward the target at the batch mean has the right sign */
            double n0 = st.mean_hwe[d], h = 0.5;
            double slope = (rl_aepo_entropy_reward_one(c, d, 1, n0 + h, target, a) -
                            rl_aepo_entropy_reward_one(c, d, 1, n0 - h, target, a)) / (2 * h);
            if (d == RL_AEPO_HARD)
                assert_true(slope > 0); /* more HWE tokens pay */
            else
                assert_true(slope < 0); /* fewer HWE tokens pay */
            prev_gap[d] = gap;
            prev_alpha[d] = a;
        }
    }
    for (int d = 0; d < 3; d++)
        assert_true(rl_aepo_alpha(s, d) == c->alpha_max); /* clipped at 2 */
    /* reversed error: α falls to alpha_min and never below */
    for (int d = 0; d < 3; d++)
        st.mean_hwe[d] = d == RL_AEPO_HARD ? 14 : 6;
    for (int it = 0; it < 40; it++) {
        double before[3];
        for (int d = 0; d < 3; d++)
            before[d] = rl_aepo_alpha(s, d);
        assert_int_equal(rl_aepo_alpha_update(s, &st), 0);
        for (int d = 0; d < 3; d++) {
            assert_true(rl_aepo_alpha(s, d) <= before[d]);
            assert_true(rl_aepo_alpha(s, d) >= c->alpha_min);
        }
    }
    for (int d = 0; d < 3; d++)
        assert_true(rl_aepo_alpha(s, d) == c->alpha_min);
    /* at α = 0 the entropy reward vanishes everywhere */
    for (int d = 0; d < 3; d++)
        for (int cor = 0; cor < 2; cor++)
            assert_true(fabs(rl_aepo_entropy_reward_one(c, d, cor, 30, target, 0)) == 0);
    rl_aepo_state_free(s);
}

/* ---- KL: dual ascent and weights -------------------------------------------------------- */

static void test_lambda_and_kl_weights(void **state)
{
    (void)state;
    enum { B = 10, T = 3 };
    rl_aepo_state *s = rl_aepo_state_new(NULL);
    float kl[B * T], mask[B * T];
    int8_t bk[B];
    for (int b = 0; b < B; b++) {
        bk[b] = b < 9 ? RL_AEPO_EASY : RL_AEPO_HARD;
        for (int t = 0; t < T; t++) {
            kl[b * T + t] = t == 2 ? 100.0f : 0.03f; /* t = 2 is masked out */
            mask[b * T + t] = t < 2;
        }
    }
    /* row 8 is empty: excluded, leaving exactly 8 easy rows */
    mask[8 * T] = mask[8 * T + 1] = 0;
    kl[8 * T] = NAN;
    double klo[3];
    assert_int_equal(rl_aepo_lambda_update(s, kl, mask, bk, B, T, klo), 0);
    assert_true(fabs(klo[0] - 0.03) < 1e-8);
    assert_true(isnan(klo[1]));
    assert_true(fabs(klo[2] - 0.03) < 1e-8);
    assert_true(fabs(rl_aepo_lambda(s, RL_AEPO_EASY) - 0.01 * (klo[0] - 0.01)) < 1e-15);
    assert_true(rl_aepo_lambda(s, RL_AEPO_HARD) == 0); /* 1 row < 8 */
    /* under budget pushes λ down, clipped at 0 */
    for (int i = 0; i < B * T; i++)
        kl[i] = 0;
    for (int it = 0; it < 5; it++)
        assert_int_equal(rl_aepo_lambda_update(s, kl, mask, bk, B, T, NULL), 0);
    assert_true(rl_aepo_lambda(s, RL_AEPO_EASY) == 0);
    /* NaN at a valid position */
    kl[0] = NAN;
    assert_int_equal(rl_aepo_lambda_update(s, kl, mask, bk, B, T, NULL), RL_ENUMERIC);

    /* weights: β = 0.1, λ_easy set via a big KL, λ_hard = 0 */
    for (int i = 0; i < B * T; i++)
        kl[i] = 1.01f;
    assert_int_equal(rl_aepo_lambda_update(s, kl, mask, bk, B, T, NULL), 0);
    double le = rl_aepo_lambda(s, RL_AEPO_EASY);
    assert_true(fabs(le - 0.01) < 1e-8);
    uint8_t flags[B * T] = {0};
    flags[0 * T + 1] = 1;
    flags[9 * T + 0] = 1;
    flags[9 * T + 2] = 1; /* masked: weight 0 whatever the flag */
    float w[B * T];
    assert_int_equal(rl_aepo_kl_weights(s, flags, mask, bk, B, T, 0.1, -1, w), 0);
    assert_true(w[0] == (float)(0.1 + le));
    assert_true(w[1] == (float)(0.5 * (0.1 + le)));
    assert_true(w[2] == 0.0f);
    assert_true(w[9 * T + 0] == (float)(0.05));
    assert_true(w[9 * T + 1] == (float)(0.1));
    assert_true(w[9 * T + 2] == 0.0f);
    /* without a state: plain β and β_low = 0.5β, or an explicit factor */
    assert_int_equal(rl_aepo_kl_weights(NULL, flags, mask, NULL, B, T, 0.2, -1, w), 0);
    assert_true(w[0] == 0.2f && w[1] == 0.1f);
    assert_int_equal(rl_aepo_kl_weights(NULL, flags, mask, NULL, B, T, 0.2, 0.25, w), 0);
    assert_true(w[1] == 0.05f);
    bk[3] = RL_AEPO_UNKNOWN;
    assert_int_equal(rl_aepo_kl_weights(s, flags, mask, bk, B, T, 0.1, -1, w), RL_EINVAL);
    rl_aepo_state_free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_entropy_golden),
        cmocka_unit_test(test_entropy_gradient_fd),
        cmocka_unit_test(test_entropy_nonfinite),
        cmocka_unit_test(test_entropy_threaded),
        cmocka_unit_test(test_windows_golden),
        cmocka_unit_test(test_windows_edges),
        cmocka_unit_test(test_threshold_ema),
        cmocka_unit_test(test_reward_grid),
        cmocka_unit_test(test_sim_golden),
        cmocka_unit_test(test_state_roundtrip),
        cmocka_unit_test(test_state_json_errors),
        cmocka_unit_test(test_difficulty_and_targets),
        cmocka_unit_test(test_alpha_property),
        cmocka_unit_test(test_lambda_and_kl_weights),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
