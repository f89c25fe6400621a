/* test_nn_clip_flow.c — the clip_flow model kind against the PyTorch
 * reference (tests/reference/gen_nn_clip_flow.py): velocities, SDE-chain
 * log-probs and every parameter gradient; finite differences; sampling
 * (the recorded log-prob is the Gaussian density of the recorded step, ODE
 * vs SDE, init_same_noise through shared noise seeds); micro-batching; bad
 * batches named in errors.
 *
 * Tolerances (float32 engine vs float64 reference): velocity and logp atol
 * 2e-5 + rtol 1e-4; each gradient tensor atol 2e-4·max|g_ref| + 1e-6, rtol 1e-3. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "rlrt/error.h"
#include "rlrt/dtype.h"
#include "rlrt/nn/params.h"
#include "common/nn/engine/ops.h"
#include "rlrt/nn/model.h"
#include "rlrt/tensor.h"
#include "rlrt/dataproto.h"
#include "rlrt/config.h"
#include "common/nn/models/clip_flow.h"
#include "common/nn/models/image_classifier.h"
#include "tests/common/golden.h"

static const char *s_golden = "tests/golden/nn_clip_flow/small_x0.safetensors";
#define GOLDEN s_golden

/* The model a job YAML describes, built with seed 1 (the test fails with
 * the builder's message when it cannot be). */
static rl_model *s_build(const char *yaml)
{
    rl_config *job = rl_config_parse_string(yaml, strlen(yaml), "<test>");
    assert_non_null(job);
    rl_model *m = rl_model_build(job, 1);
    rl_config_free(job);
    if (!m)
        fail_msg("%s", rl_error_message());
    return m;
}

static rl_model *s_model(const rl_golden *g)
{
    char yaml[512];
    snprintf(yaml, sizeof yaml,
             "model: {type: clip_flow, frames: %s, channels: %s, height: %s, width: %s, "
             "num_prompts: %s, hidden_size: %s, num_layers: %s, time_embed_dim: %s, "
             "prediction: %s, trunk: mlp, conv_channels: 32, null_prompt: false, cfg_dropout: 0, guidance: 1, init_from: ''}\n",
             rl_golden_meta(g, "frames"), rl_golden_meta(g, "channels"),
             rl_golden_meta(g, "height"), rl_golden_meta(g, "width"),
             rl_golden_meta(g, "prompts"), rl_golden_meta(g, "hidden"),
             rl_golden_meta(g, "layers"), rl_golden_meta(g, "time_dim"),
             rl_golden_meta(g, "prediction"));
    rl_model *m = s_build(yaml);
    int64_t np;
    float *p = rl_golden_f32(g, "params", &np);
    assert_int_equal(np, rl_model_num_params(m));
    memcpy(rl_model_params(m), p, sizeof(float) * (size_t)np);
    free(p);
    return m;
}

static double s_max_abs(const double *x, int64_t n)
{
    double m = 0;
    for (int64_t i = 0; i < n; i++)
        m = fabs(x[i]) > m ? fabs(x[i]) : m;
    return m;
}

static void s_check_grads(const rl_model *m, const rl_golden *g, const char *prefix)
{
    const rl_param_manifest *man = rl_model_manifest(m);
    const float *grads = rl_model_grads((rl_model *)m);
    for (int v = 0; v < man->count; v++) {
        char key[RL_PARAM_NAME_MAX + 16];
        snprintf(key, sizeof key, "%s.grad.%s", prefix, man->views[v].name);
        int64_t n;
        double *want = rl_golden_f64(g, key, &n);
        assert_int_equal(n, man->views[v].numel);
        double atol = 2e-4 * s_max_abs(want, n) + 1e-6;
        int64_t bad = rl_check_close_f32(key, grads + man->views[v].offset, want, n, atol, 1e-3);
        if (bad)
            fail_msg("%s: %lld mismatches", key, (long long)bad);
        free(want);
    }
}

/* ---- flow matching: velocity and its gradients ------------------------------------------- */

static rl_dataproto *s_fm_batch(const rl_golden *g, int64_t *B, int64_t *D)
{
    int64_t n;
    float *x = rl_golden_f32(g, "fm.x", &n), *sig = rl_golden_f32(g, "fm.sigma", B);
    int64_t *ids = rl_golden_i64(g, "fm.ids", NULL);
    *D = n / *B;
    rl_dataproto *dp = rl_dataproto_new();
    int64_t s2[2] = {*B, *D}, s1[1] = {*B};
    rl_tensor *tx = rl_dataproto_new_tensor(dp, RL_CF_X_T, RL_F32, 2, s2);
    rl_tensor *ts = rl_dataproto_new_tensor(dp, RL_CF_SIGMA, RL_F32, 1, s1);
    rl_tensor *ti = rl_dataproto_new_tensor(dp, RL_CF_PROMPT_IDS, RL_I32, 1, s1);
    memcpy(rl_tensor_data(tx), x, sizeof(float) * (size_t)n);
    memcpy(rl_tensor_data(ts), sig, sizeof(float) * (size_t)*B);
    for (int64_t b = 0; b < *B; b++)
        ((int32_t *)rl_tensor_data(ti))[b] = (int32_t)ids[b];
    free(x);
    free(sig);
    free(ids);
    return dp;
}

typedef struct s_lin {
    const float *coef; /* (B, K) */
    int q;
} s_lin;

/* loss = Σ coef·q over the rows of the micro-batch (masked positions only) */
static int s_linear_loss(void *ctx, const rl_model_io *out, rl_model_io *grad, double *loss)
{
    const s_lin *c = ctx;
    int64_t K = out->width[c->q];
    for (int64_t r = 0; r < out->rows; r++)
        for (int64_t k = 0; k < K; k++) {
            int64_t i = r * K + k;
            if (out->mask[c->q] && !out->mask[c->q][i])
                continue;
            double w = c->coef[(out->row0 + r) * K + k];
            *loss += w * out->q[c->q][i];
            grad->q[c->q][i] = (float)w;
        }
    return RL_OK;
}

/* The central difference (h = 1e-2) of the loss Σ coef·q at parameter i of
 * view `vw` against the backward's gradient g[i]: fails beyond
 * rtol·|g[i]| + atol. The parameter is restored. */
static void s_fd_check(rl_model *m, rl_dataproto *dp, const rl_model_pass *pass, s_lin *c,
                       const float *g, const rl_param_view *vw, int64_t i, double rtol,
                       double atol)
{
    float *p = rl_model_params(m);
    float keep = p[i];
    double lo = 0, hi = 0, h = 1e-2;
    p[i] = keep + (float)h;
    assert_int_equal(rl_model_forward_backward(m, dp, RL_Q_BIT(c->q), pass, s_linear_loss, c, &hi), 0);
    p[i] = keep - (float)h;
    assert_int_equal(rl_model_forward_backward(m, dp, RL_Q_BIT(c->q), pass, s_linear_loss, c, &lo), 0);
    p[i] = keep;
    double fd = (hi - lo) / (2 * h);
    if (fabs(fd - g[i]) > rtol * fabs(g[i]) + atol)
        fail_msg("%s[%lld]: finite difference %g, backward %g", vw->name,
                 (long long)(i - vw->offset), fd, (double)g[i]);
}

static void test_velocity_golden(void **state)
{
    (void)state;
    rl_golden *g = rl_golden_load(GOLDEN);
    if (!g)
        fail_msg("%s", rl_error_message());
    rl_model *m = s_model(g);
    int64_t B, D;
    rl_dataproto *dp = s_fm_batch(g, &B, &D);
    for (int64_t micro = 0; micro <= 2; micro += 2) {
        rl_model_pass pass = {.temperature = 1, .micro_batch = micro};
        rl_dataproto *out = NULL;
        assert_int_equal(rl_model_forward(m, dp, RL_Q_BIT(RL_Q_VELOCITY), &pass, &out), 0);
        double *want = rl_golden_f64(g, "fm.velocity", NULL);
        rl_tensor *v = rl_dataproto_tensor(out, "velocity");
        assert_non_null(v);
        assert_int_equal(rl_check_close_f32("velocity", rl_tensor_data(v), want, B * D, 2e-5, 1e-4), 0);
        free(want);
        rl_dataproto_free(out);
        float *coef = rl_golden_f32(g, "fm.coef", NULL);
        s_lin c = {coef, RL_Q_VELOCITY};
        rl_model_zero_grad(m);
        double loss = 0;
        assert_int_equal(rl_model_forward_backward(m, dp, RL_Q_BIT(RL_Q_VELOCITY), &pass,
                                                   s_linear_loss, &c, &loss), 0);
        s_check_grads(m, g, "fm");
        free(coef);
    }
    rl_dataproto_free(dp);
    rl_model_free(m);
    rl_golden_free(g);
}

/* ---- SDE chains: log-probs and their gradients -------------------------------------------- */

static rl_dataproto *s_chain_batch(const rl_golden *g, double nl, int64_t *B, int64_t *N)
{
    const rl_golden_array *la = rl_golden_get(g, "sde.latents");
    assert_non_null(la);
    *B = la->shape[0];
    *N = la->shape[1] - 1;
    int64_t D = la->shape[2];
    float *lat = rl_golden_f32(g, "sde.latents", NULL), *grid = rl_golden_f32(g, "sde.sigmas", NULL);
    float *mask = rl_golden_f32(g, "sde.mask", NULL);
    int64_t *ids = rl_golden_i64(g, "sde.ids", NULL);
    rl_dataproto *dp = rl_dataproto_new();
    int64_t sl[3] = {*B, *N + 1, D}, ss[2] = {*B, *N + 1}, sm[2] = {*B, *N}, s1[1] = {*B};
    rl_tensor *tl = rl_dataproto_new_tensor(dp, RL_CF_LATENTS, RL_F32, 3, sl);
    rl_tensor *ts = rl_dataproto_new_tensor(dp, RL_CF_SIGMAS, RL_F32, 2, ss);
    rl_tensor *tm = rl_dataproto_new_tensor(dp, RL_CF_STEP_MASK, RL_F32, 2, sm);
    rl_tensor *tn = rl_dataproto_new_tensor(dp, RL_CF_NOISE_LEVEL, RL_F32, 1, s1);
    rl_tensor *ti = rl_dataproto_new_tensor(dp, RL_CF_PROMPT_IDS, RL_I32, 1, s1);
    memcpy(rl_tensor_data(tl), lat, sizeof(float) * (size_t)(*B * (*N + 1) * D));
    memcpy(rl_tensor_data(tm), mask, sizeof(float) * (size_t)(*B * *N));
    for (int64_t b = 0; b < *B; b++) {
        memcpy((float *)rl_tensor_data(ts) + b * (*N + 1), grid, sizeof(float) * (size_t)(*N + 1));
        ((float *)rl_tensor_data(tn))[b] = (float)nl;
        ((int32_t *)rl_tensor_data(ti))[b] = (int32_t)ids[b];
    }
    free(lat);
    free(grid);
    free(mask);
    free(ids);
    return dp;
}

static void test_sde_logp_golden(void **state)
{
    (void)state;
    rl_golden *g = rl_golden_load(GOLDEN);
    if (!g)
        fail_msg("%s", rl_error_message());
    rl_model *m = s_model(g);
    int64_t B, N;
    double nl = atof(rl_golden_meta(g, "noise_level"));
    rl_dataproto *dp = s_chain_batch(g, nl, &B, &N);
    for (int64_t micro = 0; micro <= 1; micro++) {
        rl_model_pass pass = {.temperature = 1, .micro_batch = micro};
        rl_dataproto *out = NULL;
        assert_int_equal(rl_model_forward(m, dp, RL_Q_BIT(RL_Q_LOGP), &pass, &out), 0);
        double *want = rl_golden_f64(g, "sde.logp", NULL);
        rl_tensor *lp = rl_dataproto_tensor(out, "logp");
        assert_int_equal(rl_check_close_f32("logp", rl_tensor_data(lp), want, B * N, 2e-5, 1e-4), 0);
        free(want);
        rl_dataproto_free(out);
        float *coef = rl_golden_f32(g, "sde.coef", NULL);
        s_lin c = {coef, RL_Q_LOGP};
        rl_model_zero_grad(m);
        double loss = 0;
        assert_int_equal(rl_model_forward_backward(m, dp, RL_Q_BIT(RL_Q_LOGP), &pass,
                                                   s_linear_loss, &c, &loss), 0);
        s_check_grads(m, g, "sde");
        free(coef);
    }
    rl_dataproto_free(dp);
    rl_model_free(m);
    rl_golden_free(g);
}

/* Central differences of the linear loss over the logp quantity, in
 * parameters picked across every view (float32: a coarse but independent
 * check of the backward). */
static void test_finite_differences(void **state)
{
    (void)state;
    rl_golden *g = rl_golden_load(GOLDEN);
    if (!g)
        fail_msg("%s", rl_error_message());
    rl_model *m = s_model(g);
    int64_t B, N;
    double nl = atof(rl_golden_meta(g, "noise_level"));
    rl_dataproto *dp = s_chain_batch(g, nl, &B, &N);
    float *coef = rl_golden_f32(g, "sde.coef", NULL);
    s_lin c = {coef, RL_Q_LOGP};
    rl_model_pass pass = {.temperature = 1, .micro_batch = 0};
    rl_model_zero_grad(m);
    double loss = 0;
    assert_int_equal(rl_model_forward_backward(m, dp, RL_Q_BIT(RL_Q_LOGP), &pass, s_linear_loss, &c,
                                               &loss), 0);
    const rl_param_manifest *man = rl_model_manifest(m);
    const float *gr = rl_model_grads(m);
    float *gcopy = malloc(sizeof(float) * (size_t)man->total);
    memcpy(gcopy, gr, sizeof(float) * (size_t)man->total);
    int checked = 0;
    for (int v = 0; v < man->count; v++) {
        int64_t i = man->views[v].offset + (man->views[v].numel * 7 / 13);
        s_fd_check(m, dp, &pass, &c, gcopy, &man->views[v], i, 2e-2, 2e-3);
        checked++;
    }
    assert_int_equal(checked, man->count);
    free(gcopy);
    free(coef);
    rl_dataproto_free(dp);
    rl_model_free(m);
    rl_golden_free(g);
}

/* The conv trunk (model.trunk conv), frames as channels: central differences
 * of a linear loss over the velocity in parameters of every view (two per
 * view), rows independent of the micro-batch, and a side that is not a
 * multiple of 4 refused. */
static void test_conv_trunk(void **state)
{
    (void)state;
    const char *yaml = "model: {type: clip_flow, trunk: conv, conv_channels: 3, null_prompt: false, cfg_dropout: 0, guidance: 1, frames: 2, channels: 1, "
                       "height: 8, width: 8, num_prompts: 3, hidden_size: 6, num_layers: 0, time_embed_dim: 4, "
                       "prediction: x0, init_from: ''}\n";
    rl_model *m = s_build(yaml);
    assert_int_equal(rl_model_init_random(m, 5), 0);
    enum { B = 3, D = 2 * 8 * 8 };
    rl_dataproto *dp = rl_dataproto_new();
    int64_t s2[2] = {B, D}, s1[1] = {B};
    float *x = rl_tensor_data(rl_dataproto_new_tensor(dp, RL_CF_X_T, RL_F32, 2, s2));
    float *sig = rl_tensor_data(rl_dataproto_new_tensor(dp, RL_CF_SIGMA, RL_F32, 1, s1));
    int32_t *ids = rl_tensor_data(rl_dataproto_new_tensor(dp, RL_CF_PROMPT_IDS, RL_I32, 1, s1));
    static float coef[B * D];
    for (int i = 0; i < B * D; i++) {
        x[i] = (float)sin(0.37 * i);
        coef[i] = (float)cos(0.11 * i) / (B * D);
    }
    for (int b = 0; b < B; b++) {
        sig[b] = 0.2f + 0.3f * (float)b;
        ids[b] = b % 3;
    }
    /* micro-batching never changes a row */
    rl_model_pass whole = {.temperature = 1, .micro_batch = 0}, one = {.temperature = 1, .micro_batch = 1};
    rl_dataproto *o1 = NULL, *o2 = NULL;
    assert_int_equal(rl_model_forward(m, dp, RL_Q_BIT(RL_Q_VELOCITY), &whole, &o1), 0);
    assert_int_equal(rl_model_forward(m, dp, RL_Q_BIT(RL_Q_VELOCITY), &one, &o2), 0);
    rl_tensor *v1 = rl_dataproto_tensor(o1, rl_quantity_name(RL_Q_VELOCITY));
    rl_tensor *v2 = rl_dataproto_tensor(o2, rl_quantity_name(RL_Q_VELOCITY));
    assert_non_null(v1);
    assert_non_null(v2);
    assert_memory_equal(rl_tensor_data(v1), rl_tensor_data(v2), sizeof(float) * B * D);
    rl_dataproto_free(o1);
    rl_dataproto_free(o2);
    s_lin c = {coef, RL_Q_VELOCITY};
    rl_model_zero_grad(m);
    double loss = 0;
    assert_int_equal(rl_model_forward_backward(m, dp, RL_Q_BIT(RL_Q_VELOCITY), &one, s_linear_loss, &c, &loss), 0);
    const rl_param_manifest *man = rl_model_manifest(m);
    const float *gr = rl_model_grads(m);
    float *gcopy = malloc(sizeof(float) * (size_t)man->total);
    memcpy(gcopy, gr, sizeof(float) * (size_t)man->total);
    int checked = 0;
    for (int v = 0; v < man->count; v++)
        for (int j = 0; j < 2; j++) {
            int64_t i = man->views[v].offset + (man->views[v].numel * (3 + 7 * j) / 13);
            s_fd_check(m, dp, &whole, &c, gcopy, &man->views[v], i, 2e-2, 1e-4);
            checked++;
        }
    assert_int_equal(checked, 2 * man->count);
    assert_non_null(strstr(man->views[man->count - 1].name, "conv.6"));
    free(gcopy);
    rl_dataproto_free(dp);
    rl_model_free(m);
    const char *bad = "model: {type: clip_flow, trunk: conv, conv_channels: 3, null_prompt: false, cfg_dropout: 0, guidance: 1, frames: 1, channels: 1, "
                      "height: 10, width: 8, num_prompts: 3, hidden_size: 6, num_layers: 0, "
                      "time_embed_dim: 4, prediction: x0, init_from: ''}\n";
    rl_config *job = rl_config_parse_string(bad, strlen(bad), "<test>");
    assert_non_null(job);
    assert_null(rl_model_build(job, 1));
    if (!strstr(rl_error_message(), "model.height 10 and model.width 8 must be multiples of 4"))
        fail_msg("'%s'", rl_error_message());
    rl_config_free(job);
}

/* ---- sampling --------------------------------------------------------------------------------- */

static rl_dataproto *s_sample_in(int64_t B, const int64_t *noise_seeds, const int64_t *row_seeds,
                                 const int32_t *ids)
{
    rl_dataproto *dp = rl_dataproto_new();
    int64_t s1[1] = {B};
    rl_tensor *ti = rl_dataproto_new_tensor(dp, RL_CF_PROMPT_IDS, RL_I32, 1, s1);
    rl_tensor *tn = rl_dataproto_new_tensor(dp, RL_CF_NOISE_SEEDS, RL_I64, 1, s1);
    rl_tensor *tr = rl_dataproto_new_tensor(dp, RL_CF_ROW_SEEDS, RL_I64, 1, s1);
    memcpy(rl_tensor_data(ti), ids, sizeof(int32_t) * (size_t)B);
    memcpy(rl_tensor_data(tn), noise_seeds, sizeof(int64_t) * (size_t)B);
    memcpy(rl_tensor_data(tr), row_seeds, sizeof(int64_t) * (size_t)B);
    return dp;
}

static void test_sample_sde_density(void **state)
{
    (void)state;
    rl_golden *g = rl_golden_load(GOLDEN);
    if (!g)
        fail_msg("%s", rl_error_message());
    rl_model *m = s_model(g);
    const rl_clip_flow_config *cfg = rl_clip_flow_get_config(m);
    assert_non_null(cfg);
    const int64_t B = 4, D = rl_clip_flow_dim(cfg), N = 6;
    /* rows 0 and 1 share their initial noise (init_same_noise), not their SDE noise */
    int64_t ns[4] = {11, 11, 12, 13}, rs[4] = {101, 102, 103, 104};
    int32_t ids[4] = {0, 0, 1, 2};
    rl_dataproto *in = s_sample_in(B, ns, rs, ids);
    rl_model_sampling sp = {.num_steps = N, .noise_level = 0.7, .shift = 3.0};
    rl_dataproto *out = NULL;
    if (rl_model_sample(m, in, &sp, &out))
        fail_msg("%s", rl_error_message());
    const float *lat = rl_tensor_data(rl_dataproto_tensor(out, RL_CF_LATENTS));
    const float *sig = rl_tensor_data(rl_dataproto_tensor(out, RL_CF_SIGMAS));
    const float *lp = rl_tensor_data(rl_dataproto_tensor(out, RL_CF_SAMPLE_LOGP));
    assert_memory_equal(lat, lat + (N + 1) * D, sizeof(float) * (size_t)D); /* same x_0 */
    assert_memory_not_equal(lat + N * D, lat + ((N + 1) + N) * D, sizeof(float) * (size_t)D);
    assert_float_equal(sig[0], 1.0f, 0);
    assert_float_equal(sig[N], 0.0f, 0);
    /* the recorded log-prob is the Gaussian density of the recorded step,
     * recomputed here from the formula with the network's velocity */
    float *v = malloc(sizeof(float) * (size_t)D);
    for (int64_t b = 0; b < B; b++)
        for (int64_t k = 0; k < N; k++) {
            const float *x = lat + (b * (N + 1) + k) * D, *xn = x + D;
            float s0 = sig[b * (N + 1) + k], s1 = sig[b * (N + 1) + k + 1];
            assert_int_equal(rl_clip_flow_velocity(m, 1, x, &s0, &ids[b], v), 0);
            double dt = (double)s1 - s0, den = 1.0 - (s0 == 1.0f ? s1 : s0);
            double std_t = 0.7 * sqrt(s0 / den), sd = std_t * sqrt(-dt), acc = 0;
            for (int64_t j = 0; j < D; j++) {
                double mean = x[j] * (1 + std_t * std_t / (2 * s0) * dt) +
                              v[j] * (1 + std_t * std_t * (1 - s0) / (2 * s0)) * dt;
                double z = (xn[j] - mean) / sd;
                acc += -0.5 * z * z - log(sd) - 0.5 * log(2 * M_PI);
            }
            double want = acc / (double)D;
            if (fabs(want - lp[b * N + k]) > 1e-4 + 1e-5 * fabs(want))
                fail_msg("row %lld step %lld: recorded logp %g, Gaussian density %g", (long long)b,
                         (long long)k, (double)lp[b * N + k], want);
        }
    /* the last step's ODE mean (data.reward_image 'mean'): x_{N-1} + (σ_N −
     * σ_{N-1})·v, the x0-prediction, recomputed with the network's velocity;
     * not the SDE's mean (its extra drift terms) and not the noisy sample */
    const float *fm = rl_tensor_data(rl_dataproto_tensor(out, RL_CF_FINAL_MEAN));
    assert_non_null(fm);
    for (int64_t b = 0; b < B; b++) {
        const float *x = lat + (b * (N + 1) + N - 1) * D, *xs = x + D;
        float s0 = sig[b * (N + 1) + N - 1], s1 = sig[b * (N + 1) + N];
        assert_int_equal(rl_clip_flow_velocity(m, 1, x, &s0, &ids[b], v), 0);
        double dev = 0;
        for (int64_t j = 0; j < D; j++) {
            double want = x[j] + ((double)s1 - s0) * v[j];
            if (fabs(fm[b * D + j] - want) > 1e-5 + 1e-5 * fabs(want))
                fail_msg("row %lld float %lld: final mean %g, x0-prediction %g", (long long)b, (long long)j,
                         (double)fm[b * D + j], want);
            dev += ((double)xs[j] - fm[b * D + j]) * ((double)xs[j] - fm[b * D + j]);
        }
        /* the sample differs from it by the last step's noise: std 0.7·sqrt(σ/(1−σ))·sqrt(σ) */
        double sd = 0.7 * sqrt(s0 / (1.0 - s0)) * sqrt(s0), rms = sqrt(dev / (double)D);
        assert_true(rms > 0.5 * sd && rms < 2.0 * sd);
    }
    free(v);
    /* re-scoring the recorded chain (the actor's pass) gives the same numbers */
    rl_dataproto *chain = rl_dataproto_union(in, out);
    assert_non_null(chain);
    rl_model_pass pass = {.temperature = 1, .micro_batch = 3};
    rl_dataproto *re = NULL;
    assert_int_equal(rl_model_forward(m, chain, RL_Q_BIT(RL_Q_LOGP), &pass, &re), 0);
    const float *lp2 = rl_tensor_data(rl_dataproto_tensor(re, "logp"));
    for (int64_t i = 0; i < B * N; i++)
        assert_true(fabs(lp2[i] - lp[i]) <= 1e-5 + 1e-6 * fabs(lp[i]));
    /* the same seeds give the same chain */
    rl_dataproto *again = NULL;
    assert_int_equal(rl_model_sample(m, in, &sp, &again), 0);
    assert_true(rl_dataproto_equal(out, again));
    /* ODE: deterministic, log-probs 0, noise level 0, same x_0 */
    sp.greedy = 1;
    rl_dataproto *ode = NULL;
    assert_int_equal(rl_model_sample(m, in, &sp, &ode), 0);
    const float *lo = rl_tensor_data(rl_dataproto_tensor(ode, RL_CF_LATENTS));
    assert_memory_equal(lo, lat, sizeof(float) * (size_t)D);
    assert_float_equal(((float *)rl_tensor_data(rl_dataproto_tensor(ode, RL_CF_SAMPLE_LOGP)))[0], 0, 0);
    /* the ODE's last-step mean is its sample */
    assert_memory_equal(rl_tensor_data(rl_dataproto_tensor(ode, RL_CF_FINAL_MEAN)), lo + N * D,
                        sizeof(float) * (size_t)D);
    /* an ODE chain has no density: re-scoring it is a clear error */
    rl_dataproto *ochain = rl_dataproto_union(in, ode), *bad = NULL;
    assert_int_not_equal(rl_model_forward(m, ochain, RL_Q_BIT(RL_Q_LOGP), &pass, &bad), 0);
    assert_non_null(strstr(rl_error_message(), "noise_level"));
    rl_dataproto_free(ochain);
    rl_dataproto_free(ode);
    rl_dataproto_free(again);
    rl_dataproto_free(re);
    rl_dataproto_free(chain);
    rl_dataproto_free(out);
    rl_dataproto_free(in);
    rl_model_free(m);
    rl_golden_free(g);
}

static void test_bad_batches(void **state)
{
    (void)state;
    rl_golden *g = rl_golden_load(GOLDEN);
    if (!g)
        fail_msg("%s", rl_error_message());
    rl_model *m = s_model(g);
    int64_t B, N;
    rl_dataproto *dp = s_chain_batch(g, 0.7, &B, &N), *out = NULL;
    rl_model_pass pass = {.temperature = 1};
    /* a prompt id outside the table */
    ((int32_t *)rl_tensor_data(rl_dataproto_tensor(dp, RL_CF_PROMPT_IDS)))[1] = 9;
    assert_int_not_equal(rl_model_forward(m, dp, RL_Q_BIT(RL_Q_LOGP), &pass, &out), 0);
    assert_non_null(strstr(rl_error_message(), "prompt_ids[1] = 9"));
    ((int32_t *)rl_tensor_data(rl_dataproto_tensor(dp, RL_CF_PROMPT_IDS)))[1] = 0;
    /* a grid that goes up */
    float *s = rl_tensor_data(rl_dataproto_tensor(dp, RL_CF_SIGMAS));
    float keep = s[2];
    s[2] = 0.99f;
    assert_int_not_equal(rl_model_forward(m, dp, RL_Q_BIT(RL_Q_LOGP), &pass, &out), 0);
    assert_non_null(strstr(rl_error_message(), "not strictly decreasing"));
    s[2] = keep;
    /* a NaN latent */
    float *l = rl_tensor_data(rl_dataproto_tensor(dp, RL_CF_LATENTS));
    l[5] = NAN;
    assert_int_not_equal(rl_model_forward(m, dp, RL_Q_BIT(RL_Q_LOGP), &pass, &out), 0);
    assert_non_null(strstr(rl_error_message(), "latents[5]"));
    l[5] = 0;
    /* both quantities at once, or one this kind lacks */
    assert_int_equal(rl_model_forward(m, dp, RL_Q_BIT(RL_Q_LOGP) | RL_Q_BIT(RL_Q_VELOCITY), &pass,
                                      &out), RL_EUNSUPPORTED);
    assert_int_equal(rl_model_forward(m, dp, RL_Q_BIT(RL_Q_ENTROPY), &pass, &out), RL_EUNSUPPORTED);
    /* a missing tensor is named */
    rl_dataproto_remove(dp, RL_CF_NOISE_LEVEL);
    assert_int_not_equal(rl_model_forward(m, dp, RL_Q_BIT(RL_Q_LOGP), &pass, &out), 0);
    assert_non_null(strstr(rl_error_message(), RL_CF_NOISE_LEVEL));
    rl_dataproto_free(dp);
    rl_model_free(m);
    rl_golden_free(g);
}

/* save → load round trip through config.json (a job fragment) */
static void test_save_load(void **state)
{
    (void)state;
    rl_golden *g = rl_golden_load(GOLDEN);
    if (!g)
        fail_msg("%s", rl_error_message());
    rl_model *m = s_model(g);
    char dir[] = "/tmp/rlrt_cf_XXXXXX";
    assert_non_null(mkdtemp(dir));
    assert_int_equal(rl_model_save(m, dir), 0);
    char path[256];
    snprintf(path, sizeof path, "%s/config.json", dir);
    rl_config *job = rl_config_parse_file(path);
    assert_non_null(job);
    assert_int_equal(rl_config_set_yaml(job, "model.init_from", dir), 0);
    rl_model *m2 = rl_model_build(job, 7);
    if (!m2)
        fail_msg("%s", rl_error_message());
    assert_memory_equal(rl_model_params(m), rl_model_params(m2),
                        sizeof(float) * (size_t)rl_model_num_params(m));
    rl_model_free(m2);
    rl_config_free(job);
    snprintf(path, sizeof path, "rm -rf %s", dir);
    assert_int_equal(system(path), 0);
    rl_model_free(m);
    rl_golden_free(g);
}

/* The text of the file at `path` (malloc'd). */
static char *s_slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    char *t = calloc(1, 4096);
    assert_non_null(t);
    size_t n = fread(t, 1, 4095, f);
    fclose(f);
    assert_true(n > 0);
    return t;
}

/* config.json holds the kind and every key of its sections but init_from,
 * and builds the same architecture back */
static void test_config_json(void **state)
{
    (void)state;
    static const char *const yaml[2] = {
        "model: {type: clip_flow, frames: 2, channels: 1, height: 8, width: 6, num_prompts: 3, "
        "hidden_size: 16, num_layers: 1, time_embed_dim: 8, prediction: velocity, trunk: mlp, "
        "conv_channels: 32, null_prompt: false, cfg_dropout: 0, guidance: 1, init_from: ''}\n",
        "model: {type: image_classifier, channels: 1, height: 8, width: 6, num_classes: 4, "
        "hidden_size: 5, init_from: ''}\n"};
    static const char *const want[2] = {
        "{\"model\": {\"type\": \"clip_flow\", \"channels\": 1, \"height\": 8, \"width\": 6, "
        "\"frames\": 2, \"num_prompts\": 3, \"hidden_size\": 16, \"num_layers\": 1, "
        "\"time_embed_dim\": 8, \"prediction\": \"velocity\", \"trunk\": \"mlp\", \"conv_channels\": 32, "
        "\"null_prompt\": false, \"cfg_dropout\": 0, \"guidance\": 1}}\n",
        "{\"model\": {\"type\": \"image_classifier\", \"channels\": 1, \"height\": 8, \"width\": 6, "
        "\"num_classes\": 4, \"hidden_size\": 5}}\n"};
    for (int k = 0; k < 2; k++) {
        rl_config *job = rl_config_parse_string(yaml[k], strlen(yaml[k]), "<test>");
        assert_non_null(job);
        rl_model *m = rl_model_build(job, 3);
        if (!m)
            fail_msg("%s", rl_error_message());
        char dir[] = "/tmp/rlrt_cfj_XXXXXX", path[256];
        assert_non_null(mkdtemp(dir));
        assert_int_equal(rl_model_save(m, dir), 0);
        snprintf(path, sizeof path, "%s/config.json", dir);
        char *text = s_slurp(path);
        assert_string_equal(text, want[k]);
        free(text);
        rl_model *m2 = rl_model_load_dir(dir);
        if (!m2)
            fail_msg("%s", rl_error_message());
        assert_string_equal(rl_model_kind_name(m2), rl_model_kind_name(m));
        assert_int_equal(rl_model_num_params(m2), rl_model_num_params(m));
        assert_memory_equal(rl_model_params(m), rl_model_params(m2),
                            sizeof(float) * (size_t)rl_model_num_params(m));
        rl_model_free(m2);
        rl_model_free(m);
        rl_config_free(job);
        snprintf(path, sizeof path, "rm -rf %s", dir);
        assert_int_equal(system(path), 0);
    }
}

/* the sections' checks, located at the key */
/* Classifier-free guidance (model.null_prompt, model.guidance w): the ODE's
 * velocity is v_null + w (v_prompt − v_null) of two plain passes; the SDE
 * chain's log-probs re-scored by forward equal the sampled ones; their
 * gradient matches central differences; w != 1 without the null prompt is a
 * config error. */
static void test_guidance(void **state)
{
    (void)state;
    const char *yaml = "model: {type: clip_flow, trunk: mlp, frames: 1, channels: 1, height: 4, width: 4, "
                       "num_prompts: 3, hidden_size: 8, num_layers: 1, time_embed_dim: 4, prediction: x0, "
                       "null_prompt: true, cfg_dropout: 0, guidance: 2.5, conv_channels: 4, init_from: ''}\n";
    rl_model *m = s_build(yaml);
    assert_int_equal(rl_model_init_random(m, 7), 0);
    enum { B = 3, D = 16, N = 3 };
    int64_t ns[B] = {21, 22, 23}, rs[B] = {31, 32, 33};
    int32_t ids[B] = {0, 1, 2}, null_ids[B] = {3, 3, 3};
    /* 1. one ODE step from σ 1 to 0: x1 = x0 − v_guided */
    rl_dataproto *in = s_sample_in(B, ns, rs, ids), *out = NULL;
    rl_model_sampling ode = {.num_steps = 1, .greedy = 1, .shift = 1.0};
    if (rl_model_sample(m, in, &ode, &out))
        fail_msg("%s", rl_error_message());
    const float *lat = rl_tensor_data(rl_dataproto_tensor(out, RL_CF_LATENTS));
    float x0[B * D], vc[B * D], vu[B * D], one[B] = {1, 1, 1};
    for (int b = 0; b < B; b++)
        memcpy(x0 + b * D, lat + b * 2 * D, sizeof(float) * D);
    assert_int_equal(rl_clip_flow_velocity(m, B, x0, one, ids, vc), 0);
    assert_int_equal(rl_clip_flow_velocity(m, B, x0, one, null_ids, vu), 0);
    double diff = 0;
    for (int b = 0; b < B; b++)
        for (int j = 0; j < D; j++) {
            double want = vu[b * D + j] + 2.5 * (vc[b * D + j] - vu[b * D + j]);
            double got = x0[b * D + j] - lat[(b * 2 + 1) * D + j];
            assert_true(fabs(got - want) < 1e-4 + 1e-4 * fabs(want));
            diff += fabs(vc[b * D + j] - vu[b * D + j]);
        }
    assert_true(diff > 1e-3); /* the null prompt is a prompt of its own */
    rl_dataproto_free(out);
    /* 2. an SDE chain: its recorded log-probs are forward's */
    rl_model_sampling sde = {.num_steps = N, .noise_level = 0.7, .shift = 3.0};
    out = NULL;
    if (rl_model_sample(m, in, &sde, &out))
        fail_msg("%s", rl_error_message());
    rl_dataproto *ch = rl_dataproto_new();
    int64_t s1[1] = {B}, s2[2] = {B, N + 1}, s3[3] = {B, N + 1, D};
    memcpy(rl_tensor_data(rl_dataproto_new_tensor(ch, RL_CF_PROMPT_IDS, RL_I32, 1, s1)), ids, sizeof ids);
    memcpy(rl_tensor_data(rl_dataproto_new_tensor(ch, RL_CF_LATENTS, RL_F32, 3, s3)),
           rl_tensor_data(rl_dataproto_tensor(out, RL_CF_LATENTS)), sizeof(float) * B * (N + 1) * D);
    memcpy(rl_tensor_data(rl_dataproto_new_tensor(ch, RL_CF_SIGMAS, RL_F32, 2, s2)),
           rl_tensor_data(rl_dataproto_tensor(out, RL_CF_SIGMAS)), sizeof(float) * B * (N + 1));
    memcpy(rl_tensor_data(rl_dataproto_new_tensor(ch, RL_CF_NOISE_LEVEL, RL_F32, 1, s1)),
           rl_tensor_data(rl_dataproto_tensor(out, RL_CF_NOISE_LEVEL)), sizeof(float) * B);
    rl_model_pass whole = {.temperature = 1, .micro_batch = 0}, mb1 = {.temperature = 1, .micro_batch = 1};
    rl_dataproto *lo = NULL;
    assert_int_equal(rl_model_forward(m, ch, RL_Q_BIT(RL_Q_LOGP), &whole, &lo), 0);
    const float *lq = rl_tensor_data(rl_dataproto_tensor(lo, rl_quantity_name(RL_Q_LOGP)));
    const float *ls = rl_tensor_data(rl_dataproto_tensor(out, RL_CF_SAMPLE_LOGP));
    for (int i = 0; i < B * N; i++)
        if (fabs(lq[i] - ls[i]) > 1e-4 + 1e-5 * fabs(ls[i]))
            fail_msg("logp %d: forward %g, sampled %g", i, (double)lq[i], (double)ls[i]);
    rl_dataproto_free(lo);
    /* 3. the gradient of Σ coef·logp by central differences */
    static float coef[B * N];
    for (int i = 0; i < B * N; i++)
        coef[i] = (float)cos(0.7 * i);
    s_lin c = {coef, RL_Q_LOGP};
    rl_model_zero_grad(m);
    double loss = 0;
    assert_int_equal(rl_model_forward_backward(m, ch, RL_Q_BIT(RL_Q_LOGP), &mb1, s_linear_loss, &c, &loss), 0);
    const rl_param_manifest *man = rl_model_manifest(m);
    const float *gr = rl_model_grads(m);
    float *gcopy = malloc(sizeof(float) * (size_t)man->total);
    memcpy(gcopy, gr, sizeof(float) * (size_t)man->total);
    int checked = 0;
    for (int v = 0; v < man->count; v++)
        for (int j = 0; j < 2; j++) {
            int64_t i = man->views[v].offset + (man->views[v].numel * (3 + 7 * j) / 13);
            if (!strcmp(man->views[v].name, "prompt.embedding"))
                i = man->views[v].offset + (j ? 3 * 8 + 1 : 1 * 8 + 2); /* the null row and row 1 */
            s_fd_check(m, ch, &whole, &c, gcopy, &man->views[v], i, 3e-2, 2e-4);
            checked++;
        }
    assert_int_equal(checked, 2 * man->count);
    free(gcopy);
    rl_dataproto_free(ch);
    rl_dataproto_free(out);
    rl_dataproto_free(in);
    rl_model_free(m);
    /* 4. guidance without the null prompt */
    const char *bad = "model: {type: clip_flow, trunk: mlp, frames: 1, channels: 1, height: 4, width: 4, "
                      "num_prompts: 3, hidden_size: 8, num_layers: 1, time_embed_dim: 4, prediction: x0, "
                      "null_prompt: false, cfg_dropout: 0, guidance: 2, conv_channels: 4, init_from: ''}\n";
    rl_config *job = rl_config_parse_string(bad, strlen(bad), "<test>");
    assert_non_null(job);
    assert_null(rl_model_build(job, 1));
    if (!strstr(rl_error_message(), "need the null prompt: set model.null_prompt true"))
        fail_msg("'%s'", rl_error_message());
    rl_config_free(job);
}

static void test_config_checks(void **state)
{
    (void)state;
    static const char *const bad[4][3] = {
        {"time_embed_dim: 7, frames: 1, height: 8, prediction: x0", "model.time_embed_dim",
         "must be even (sin and cos halves), got 7"},
        {"time_embed_dim: 8, frames: 64, height: 512, prediction: x0", "model.frames",
         "a clip of 16777216 floats (model.frames 64 x"},
        {"time_embed_dim: 8, frames: 1, height: 8, prediction: eps", "model.prediction",
         "unknown value 'eps' (expected one of: velocity,x0)"},
        {"time_embed_dim: 8, frames: 65, height: 8, prediction: x0", "model.frames",
         "must be in [1, 64], got 65"},
    };
    for (int k = 0; k < 4; k++) {
        char yaml[512];
        snprintf(yaml, sizeof yaml,
                 "model: {type: clip_flow, %s, channels: 1, width: 512, num_prompts: 3, "
                 "hidden_size: 16, num_layers: 1, trunk: mlp, conv_channels: 32, null_prompt: false, cfg_dropout: 0, guidance: 1, init_from: ''}\n", bad[k][0]);
        rl_config *job = rl_config_parse_string(yaml, strlen(yaml), "<test>");
        assert_non_null(job);
        assert_int_equal(rl_model_check_config(job), RL_ECONFIG);
        if (!strstr(rl_error_message(), bad[k][1]) || !strstr(rl_error_message(), bad[k][2]))
            fail_msg("case %d: '%s'", k, rl_error_message());
        assert_null(rl_model_build(job, 1));
        rl_config_free(job);
    }
}

static int s_use_velocity(void **state)
{
    (void)state;
    s_golden = "tests/golden/nn_clip_flow/small_velocity.safetensors";
    return 0;
}

static int s_use_x0(void **state)
{
    (void)state;
    s_golden = "tests/golden/nn_clip_flow/small_x0.safetensors";
    return 0;
}

#define S_BOTH(t) cmocka_unit_test_setup(t, s_use_velocity), cmocka_unit_test_setup(t, s_use_x0)

int main(void)
{
    rl_nn_set_threads(2);
    const struct CMUnitTest tests[] = {
        S_BOTH(test_velocity_golden),   S_BOTH(test_sde_logp_golden),
        S_BOTH(test_finite_differences), S_BOTH(test_sample_sde_density),
        cmocka_unit_test_setup(test_bad_batches, s_use_x0),
        cmocka_unit_test_setup(test_save_load, s_use_x0),
        cmocka_unit_test(test_config_json),
        cmocka_unit_test(test_conv_trunk),
        cmocka_unit_test(test_guidance),
        cmocka_unit_test(test_config_checks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
