/* test_nn_flow_policy.c — the flow_policy model kind against the PyTorch
 * reference (tests/reference/gen_nn_flow_policy.py): velocity, value,
 * SDE-chain log-probs and every parameter gradient (obs_norm's stay 0);
 * finite differences; sampling (deterministic per seed, different across
 * seeds, ODE = manual Euler, the SDE's recorded log-probs = the re-scored
 * RL_Q_LOGP of the chain); micro-batching; bad batches named in errors;
 * save / load_dir round trip.
 *
 * Tolerances (float32 engine vs float64 reference): quantities atol 2e-5 +
 * rtol 1e-4 (log-probs: sums over D, atol 1e-3); each gradient tensor atol
 * 2e-4·max|g_ref| + 1e-6, rtol 1e-3. */
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
#include "common/nn/models/flow_policy.h"
#include "tests/common/golden.h"

#define GOLDEN "tests/golden/nn_flow_policy/small.safetensors"

static const rl_model_pass s_pass0 = {.micro_batch = 0};

static rl_golden *s_golden(void)
{
    rl_golden *g = rl_golden_load(GOLDEN);
    if (!g)
        fail_msg("%s", rl_error_message());
    return g;
}

/* The golden's model; the golden's critic is not detached (its gradients
 * reach the encoder and the task table, the stronger check). */
static rl_model *s_model_detach(const rl_golden *g, const char *sde_mode, int detach)
{
    char yaml[512];
    snprintf(yaml, sizeof yaml,
             "model: {type: flow_policy, num_action_chunks: %s, num_tasks: %s, hidden_size: %s, "
             "num_layers: %s, time_embed_dim: %s, sde_mode: %s, obs_clip: 0, detach_critic_input: %s, "
             "init_from: ''}\n",
             rl_golden_meta(g, "chunks"), rl_golden_meta(g, "tasks"), rl_golden_meta(g, "hidden"),
             rl_golden_meta(g, "layers"), rl_golden_meta(g, "time_dim"), sde_mode, detach ? "true" : "false");
    rl_config *job = rl_config_parse_string(yaml, strlen(yaml), "<test>");
    assert_non_null(job);
    rl_model *m = rl_model_build(job, 1);
    rl_config_free(job);
    if (!m)
        fail_msg("%s", rl_error_message());
    int64_t np;
    float *p = rl_golden_f32(g, "params", &np);
    assert_int_equal(np, rl_model_num_params(m));
    memcpy(rl_model_params(m), p, sizeof(float) * (size_t)np);
    free(p);
    return m;
}

static rl_model *s_model(const rl_golden *g, const char *sde_mode)
{
    return s_model_detach(g, sde_mode, 0);
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
        if (strncmp(man->views[v].name, "obs_norm.", 9) == 0) /* never trained */
            for (int64_t i = 0; i < n; i++)
                assert_true(grads[man->views[v].offset + i] == 0.0f);
        else {
            double atol = 2e-4 * s_max_abs(want, n) + 1e-6;
            int64_t bad = rl_check_close_f32(key, grads + man->views[v].offset, want, n, atol, 1e-3);
            if (bad)
                fail_msg("%s: %lld mismatches", key, (long long)bad);
        }
        free(want);
    }
}

/* A tensor copied from the golden file (f32, or i64 when dt is RL_I64). */
static void s_put(rl_dataproto *dp, const rl_golden *g, const char *key, const char *name, rl_dtype dt,
                  int ndim, const int64_t *shape)
{
    rl_tensor *t = rl_dataproto_new_tensor(dp, name, dt, ndim, shape);
    assert_non_null(t);
    int64_t n;
    void *src = dt == RL_I64 ? (void *)rl_golden_i64(g, key, &n) : (void *)rl_golden_f32(g, key, &n);
    memcpy(rl_tensor_data(t), src, (dt == RL_I64 ? 8 : 4) * (size_t)n);
    free(src);
}

static rl_dataproto *s_obs_batch(const rl_golden *g, const char *pre, int64_t B)
{
    rl_dataproto *dp = rl_dataproto_new();
    char k[64];
    snprintf(k, sizeof k, "%s.proprio", pre);
    s_put(dp, g, k, RL_FP_PROPRIO, RL_F32, 2, (int64_t[]){B, 39});
    snprintf(k, sizeof k, "%s.object", pre);
    s_put(dp, g, k, RL_FP_OBJECT, RL_F32, 2, (int64_t[]){B, 98});
    snprintf(k, sizeof k, "%s.task", pre);
    s_put(dp, g, k, RL_FP_TASK, RL_I64, 1, (int64_t[]){B});
    return dp;
}

static rl_dataproto *s_fm_batch(const rl_golden *g, int64_t D)
{
    rl_dataproto *dp = s_obs_batch(g, "fm", 5);
    s_put(dp, g, "fm.x", RL_FP_X_T, RL_F32, 2, (int64_t[]){5, D});
    s_put(dp, g, "fm.t", RL_FP_T, RL_F32, 1, (int64_t[]){5});
    return dp;
}

static rl_dataproto *s_sde_batch(const rl_golden *g, int64_t D)
{
    rl_dataproto *dp = s_obs_batch(g, "sde", 3);
    s_put(dp, g, "sde.chain", RL_FP_CHAIN, RL_F32, 3, (int64_t[]){3, 5, D});
    s_put(dp, g, "sde.times", RL_FP_TIMES, RL_F32, 2, (int64_t[]){3, 5});
    s_put(dp, g, "sde.noise_level", RL_FP_NOISE_LEVEL, RL_F32, 1, (int64_t[]){3});
    s_put(dp, g, "sde.mask", RL_FP_STEP_MASK, RL_F32, 2, (int64_t[]){3, 4});
    return dp;
}

typedef struct s_lin {
    const float *coef[RL_Q_COUNT]; /* (B, K) per quantity, NULL = not in the loss */
} s_lin;

static int s_linear_loss(void *ctx, const rl_model_io *out, rl_model_io *grad, double *loss)
{
    const s_lin *c = ctx;
    for (int q = 0; q < RL_Q_COUNT; q++) {
        if (!c->coef[q] || !out->q[q])
            continue;
        int64_t K = out->width[q];
        for (int64_t r = 0; r < out->rows; r++)
            for (int64_t k = 0; k < K; k++) {
                int64_t i = r * K + k;
                if (out->mask[q] && !out->mask[q][i])
                    continue;
                double w = c->coef[q][(out->row0 + r) * K + k];
                *loss += w * out->q[q][i];
                grad->q[q][i] = (float)w;
            }
    }
    return RL_OK;
}

static void test_velocity_value_golden(void **state)
{
    (void)state;
    rl_golden *g = s_golden();
    rl_model *m = s_model(g, "one");
    int64_t D = rl_flow_policy_dim(rl_flow_policy_get_config(m)), n;
    rl_dataproto *b = s_fm_batch(g, D), *out = NULL;
    unsigned want = RL_Q_BIT(RL_Q_VELOCITY) | RL_Q_BIT(RL_Q_VALUE);
    for (int mb = 0; mb <= 2; mb++) { /* whole batch, then 2 rows at a time: the same bits */
        rl_model_pass pass = {.micro_batch = mb};
        assert_int_equal(rl_model_forward(m, b, want, &pass, &out), 0);
        double *v = rl_golden_f64(g, "fm.velocity", &n), *val = rl_golden_f64(g, "fm.value", NULL);
        assert_int_equal(rl_check_close_f32("velocity", rl_tensor_data(rl_dataproto_tensor(out, "velocity")), v,
                                            n, 2e-5, 1e-4), 0);
        assert_int_equal(rl_check_close_f32("value", rl_tensor_data(rl_dataproto_tensor(out, "value")), val, 5,
                                            2e-5, 1e-4), 0);
        free(v);
        free(val);
        rl_dataproto_free(out);
        /* gradients of Σ coef·v + Σ vcoef·value */
        float *coef = rl_golden_f32(g, "fm.coef", NULL), *vcoef = rl_golden_f32(g, "fm.vcoef", NULL);
        s_lin c = {{0}};
        c.coef[RL_Q_VELOCITY] = coef;
        c.coef[RL_Q_VALUE] = vcoef;
        rl_model_zero_grad(m);
        double loss = 0;
        assert_int_equal(rl_model_forward_backward(m, b, want, &pass, s_linear_loss, &c, &loss), 0);
        s_check_grads(m, g, "fm");
        free(coef);
        free(vcoef);
    }
    rl_dataproto_free(b);
    rl_model_free(m);
    rl_golden_free(g);
}

/* model.detach_critic_input: the value is the same, its loss trains
 * value_head alone (the same head gradient as undetached), and every other
 * parameter's gradient is the velocity's alone. */
static void test_detach_critic_input(void **state)
{
    (void)state;
    rl_golden *g = s_golden();
    rl_model *m[2] = {s_model_detach(g, "one", 0), s_model_detach(g, "one", 1)};
    int64_t D = rl_flow_policy_dim(rl_flow_policy_get_config(m[0])), P = rl_model_num_params(m[0]);
    rl_dataproto *b = s_fm_batch(g, D);
    float *vcoef = rl_golden_f32(g, "fm.vcoef", NULL), *coef = rl_golden_f32(g, "fm.coef", NULL);
    float *gr[3];
    for (int k = 0; k < 3; k++) { /* value loss undetached, detached; velocity loss alone */
        rl_model *mm = m[k == 1];
        s_lin c = {{0}};
        c.coef[RL_Q_VALUE] = k < 2 ? vcoef : NULL;
        c.coef[RL_Q_VELOCITY] = k == 2 ? coef : NULL;
        unsigned want = k < 2 ? RL_Q_BIT(RL_Q_VALUE) : RL_Q_BIT(RL_Q_VELOCITY);
        rl_model_pass pass = {.micro_batch = 0};
        double loss = 0;
        rl_model_zero_grad(mm);
        assert_int_equal(rl_model_forward_backward(mm, b, want, &pass, s_linear_loss, &c, &loss), 0);
        gr[k] = malloc(sizeof(float) * (size_t)P);
        memcpy(gr[k], rl_model_grads(mm), sizeof(float) * (size_t)P);
    }
    const rl_param_manifest *man = rl_model_manifest(m[1]);
    int head = 0, moved = 0;
    for (int i = 0; i < man->count; i++) {
        const rl_param_view *v = &man->views[i];
        int is_head = strncmp(v->name, RL_MODEL_VALUE_HEAD_PREFIX, strlen(RL_MODEL_VALUE_HEAD_PREFIX)) == 0;
        for (int64_t j = v->offset; j < v->offset + v->numel; j++) {
            if (is_head) {
                assert_true(gr[1][j] == gr[0][j]);
                head += gr[1][j] != 0.0f;
            } else {
                assert_true(gr[1][j] == 0.0f);
                moved += gr[0][j] != 0.0f; /* undetached: the encoder and task table learn */
            }
        }
    }
    assert_true(head > 0 && moved > 0);
    /* the detached model's velocity gradients are unchanged (the same weights) */
    s_lin c = {{0}};
    c.coef[RL_Q_VELOCITY] = coef;
    rl_model_pass pass = {.micro_batch = 0};
    double loss = 0;
    rl_model_zero_grad(m[1]);
    assert_int_equal(rl_model_forward_backward(m[1], b, RL_Q_BIT(RL_Q_VELOCITY), &pass, s_linear_loss, &c, &loss),
                     0);
    assert_memory_equal(rl_model_grads(m[1]), gr[2], sizeof(float) * (size_t)P);
    for (int k = 0; k < 3; k++)
        free(gr[k]);
    free(coef);
    free(vcoef);
    rl_dataproto_free(b);
    rl_model_free(m[0]);
    rl_model_free(m[1]);
    rl_golden_free(g);
}

static void test_sde_logp_golden(void **state)
{
    (void)state;
    rl_golden *g = s_golden();
    rl_model *m = s_model(g, "one");
    int64_t D = rl_flow_policy_dim(rl_flow_policy_get_config(m)), n;
    rl_dataproto *b = s_sde_batch(g, D), *out = NULL;
    for (int mb = 0; mb <= 1; mb++) {
        rl_model_pass pass = {.micro_batch = mb};
        assert_int_equal(rl_model_forward(m, b, RL_Q_BIT(RL_Q_LOGP), &pass, &out), 0);
        double *lp = rl_golden_f64(g, "sde.logp", &n);
        assert_int_equal(rl_check_close_f32("logp", rl_tensor_data(rl_dataproto_tensor(out, "logp")), lp, n, 1e-3,
                                            1e-4), 0);
        const float *mask = rl_tensor_data(rl_dataproto_tensor(out, "logp_mask"));
        float *gm = rl_golden_f32(g, "sde.mask", NULL);
        assert_memory_equal(mask, gm, sizeof(float) * (size_t)n);
        free(gm);
        free(lp);
        rl_dataproto_free(out);
        float *coef = rl_golden_f32(g, "sde.coef", NULL);
        s_lin c = {{0}};
        c.coef[RL_Q_LOGP] = coef;
        rl_model_zero_grad(m);
        double loss = 0;
        assert_int_equal(rl_model_forward_backward(m, b, RL_Q_BIT(RL_Q_LOGP), &pass, s_linear_loss, &c, &loss), 0);
        s_check_grads(m, g, "sde");
        free(coef);
    }
    rl_dataproto_free(b);
    rl_model_free(m);
    rl_golden_free(g);
}

/* The loss Σ coef·v + Σ vcoef·value in double, by forward. */
static double s_loss_fwd(rl_model *m, const rl_dataproto *b, const float *coef, const float *vcoef, int64_t D)
{
    rl_dataproto *out = NULL;
    assert_int_equal(rl_model_forward(m, b, RL_Q_BIT(RL_Q_VELOCITY) | RL_Q_BIT(RL_Q_VALUE), &s_pass0, &out), 0);
    const float *v = rl_tensor_data(rl_dataproto_tensor(out, "velocity"));
    const float *val = rl_tensor_data(rl_dataproto_tensor(out, "value"));
    double s = 0;
    for (int64_t i = 0; i < 5 * D; i++)
        s += (double)coef[i] * v[i];
    for (int64_t i = 0; i < 5; i++)
        s += (double)vcoef[i] * val[i];
    rl_dataproto_free(out);
    return s;
}

static void test_finite_differences(void **state)
{
    (void)state;
    rl_golden *g = s_golden();
    rl_model *m = s_model(g, "one");
    int64_t D = rl_flow_policy_dim(rl_flow_policy_get_config(m));
    rl_dataproto *b = s_fm_batch(g, D);
    float *coef = rl_golden_f32(g, "fm.coef", NULL), *vcoef = rl_golden_f32(g, "fm.vcoef", NULL);
    s_lin c = {{0}};
    c.coef[RL_Q_VELOCITY] = coef;
    c.coef[RL_Q_VALUE] = vcoef;
    rl_model_zero_grad(m);
    double loss = 0;
    assert_int_equal(rl_model_forward_backward(m, b, RL_Q_BIT(RL_Q_VELOCITY) | RL_Q_BIT(RL_Q_VALUE), &s_pass0,
                                               s_linear_loss, &c, &loss), 0);
    const rl_param_manifest *man = rl_model_manifest(m);
    float *P = rl_model_params(m), *G = rl_model_grads(m);
    int checked = 0;
    for (int v = 0; v < man->count; v++) { /* two entries of every trained view */
        if (strncmp(man->views[v].name, "obs_norm.", 9) == 0)
            continue;
        for (int j = 0; j < 2; j++) {
            int64_t i = man->views[v].offset + (j * 7919) % man->views[v].numel;
            float keep = P[i], h = 1e-2f;
            P[i] = keep + h;
            double lp = s_loss_fwd(m, b, coef, vcoef, D);
            P[i] = keep - h;
            double lm = s_loss_fwd(m, b, coef, vcoef, D);
            P[i] = keep;
            double fd = (lp - lm) / (2.0 * h);
            if (fabs(fd - G[i]) > 2e-2 * fmax(1.0, fabs(fd)))
                fail_msg("%s[%lld]: finite difference %g, backward %g", man->views[v].name,
                         (long long)(i - man->views[v].offset), fd, (double)G[i]);
            checked++;
        }
    }
    assert_true(checked > 20);
    free(coef);
    free(vcoef);
    rl_dataproto_free(b);
    rl_model_free(m);
    rl_golden_free(g);
}

/* An observation batch with noise and row seeds (seed0 + b). */
static rl_dataproto *s_sample_in(const rl_golden *g, int64_t seed0)
{
    rl_dataproto *dp = s_obs_batch(g, "fm", 5);
    rl_tensor *tn = rl_dataproto_new_tensor(dp, RL_FP_NOISE_SEEDS, RL_I64, 1, (int64_t[]){5});
    rl_tensor *tr = rl_dataproto_new_tensor(dp, RL_FP_ROW_SEEDS, RL_I64, 1, (int64_t[]){5});
    for (int64_t b = 0; b < 5; b++) {
        ((int64_t *)rl_tensor_data(tn))[b] = seed0 + b;
        ((int64_t *)rl_tensor_data(tr))[b] = seed0 + 100 + b;
    }
    return dp;
}

static const float *s_f(const rl_dataproto *dp, const char *name)
{
    rl_tensor *t = rl_dataproto_tensor(dp, name);
    assert_non_null(t);
    return rl_tensor_data(t);
}

static void test_sampling(void **state)
{
    (void)state;
    rl_golden *g = s_golden();
    for (int joint = 0; joint <= 1; joint++) {
        rl_model *m = s_model(g, joint ? "joint" : "one");
        const int64_t D = rl_flow_policy_dim(rl_flow_policy_get_config(m)), N = 4, B = 5;
        rl_model_sampling sp = {.num_steps = N, .noise_level = 0.7};
        rl_dataproto *in = s_sample_in(g, 11), *in2 = s_sample_in(g, 12), *a = NULL, *b = NULL, *c = NULL;
        assert_int_equal(rl_model_sample(m, in, &sp, &a), 0);
        assert_int_equal(rl_model_sample(m, in, &sp, &b), 0);
        assert_int_equal(rl_model_sample(m, in2, &sp, &c), 0);
        /* same seeds: the same bits; other seeds: other actions */
        assert_memory_equal(s_f(a, RL_FP_CHAIN), s_f(b, RL_FP_CHAIN), sizeof(float) * (size_t)(B * (N + 1) * D));
        assert_memory_not_equal(s_f(a, RL_FP_ACTION), s_f(c, RL_FP_ACTION), sizeof(float) * (size_t)(B * D));
        /* stochastic steps: one per row (sde_mode one) or all (joint) */
        const float *sm = s_f(a, RL_FP_STEP_MASK), *sl = s_f(a, RL_FP_SAMPLE_LOGP);
        for (int64_t r = 0; r < B; r++) {
            float k = 0;
            for (int64_t s = 0; s < N; s++)
                k += sm[r * N + s];
            assert_true(k == (joint ? (float)N : 1.0f));
        }
        /* the recorded log-probs = the re-scored RL_Q_LOGP of the chain */
        rl_dataproto *chain = s_obs_batch(g, "fm", 5), *out = NULL;
        const char *keep[] = {RL_FP_CHAIN, RL_FP_TIMES, RL_FP_NOISE_LEVEL, RL_FP_STEP_MASK};
        for (int i = 0; i < 4; i++)
            assert_int_equal(rl_dataproto_add_tensor(chain, keep[i], rl_dataproto_tensor(a, keep[i])), 0);
        assert_int_equal(rl_model_forward(m, chain, RL_Q_BIT(RL_Q_LOGP), &s_pass0, &out), 0);
        const float *lp = s_f(out, "logp");
        for (int64_t i = 0; i < B * N; i++)
            if (fabsf(lp[i] - sl[i]) > 1e-3f * fmaxf(1.0f, fabsf(sl[i])))
                fail_msg("step %lld: sampled logp %g, re-scored %g", (long long)i, (double)sl[i], (double)lp[i]);
        rl_dataproto_free(out);
        rl_dataproto_free(chain);
        /* greedy: the ODE = a manual Euler integration from the same noise */
        rl_model_sampling ode = {.greedy = 1, .num_steps = N};
        rl_dataproto *o = NULL;
        assert_int_equal(rl_model_sample(m, in, &ode, &o), 0);
        const float *x0 = s_f(o, RL_FP_INITIAL_NOISE);
        assert_memory_equal(x0, s_f(a, RL_FP_INITIAL_NOISE), sizeof(float) * (size_t)(B * D));
        float *x = malloc(sizeof(float) * (size_t)(B * D)), t[5];
        memcpy(x, x0, sizeof(float) * (size_t)(B * D));
        for (int64_t k = 0; k < N; k++) {
            rl_dataproto *q = s_obs_batch(g, "fm", 5), *vo = NULL;
            rl_tensor *tx = rl_dataproto_new_tensor(q, RL_FP_X_T, RL_F32, 2, (int64_t[]){B, D});
            rl_tensor *tt = rl_dataproto_new_tensor(q, RL_FP_T, RL_F32, 1, (int64_t[]){B});
            memcpy(rl_tensor_data(tx), x, sizeof(float) * (size_t)(B * D));
            float tk = (float)(1.0 - (double)k / (double)N), tn = k + 1 == N ? 0.0f : (float)(1.0 - (double)(k + 1) / (double)N);
            for (int64_t r = 0; r < B; r++)
                t[r] = tk;
            memcpy(rl_tensor_data(tt), t, sizeof(float) * (size_t)B);
            assert_int_equal(rl_model_forward(m, q, RL_Q_BIT(RL_Q_VELOCITY), &s_pass0, &vo), 0);
            const float *v = s_f(vo, "velocity");
            for (int64_t i = 0; i < B * D; i++)
                x[i] = x[i] - (tk - tn) * v[i];
            rl_dataproto_free(vo);
            rl_dataproto_free(q);
        }
        const float *act = s_f(o, RL_FP_ACTION), *ol = s_f(o, RL_FP_SAMPLE_LOGP), *om = s_f(o, RL_FP_STEP_MASK);
        for (int64_t i = 0; i < B * D; i++)
            assert_true(fabsf(act[i] - x[i]) <= 1e-5f * fmaxf(1.0f, fabsf(x[i])));
        for (int64_t i = 0; i < B * N; i++)
            assert_true(ol[i] == 0.0f && om[i] == 0.0f);
        free(x);
        /* RL_FP_INITIAL_NOISE given instead of seeds: the same ODE sample */
        rl_dataproto *in3 = s_obs_batch(g, "fm", 5), *o3 = NULL;
        assert_int_equal(rl_dataproto_add_tensor(in3, RL_FP_INITIAL_NOISE, rl_dataproto_tensor(o, RL_FP_INITIAL_NOISE)), 0);
        assert_int_equal(rl_model_sample(m, in3, &ode, &o3), 0);
        assert_memory_equal(s_f(o3, RL_FP_ACTION), act, sizeof(float) * (size_t)(B * D));
        rl_dataproto_free(o3);
        rl_dataproto_free(in3);
        rl_dataproto_free(o);
        rl_dataproto_free(a);
        rl_dataproto_free(b);
        rl_dataproto_free(c);
        rl_dataproto_free(in);
        rl_dataproto_free(in2);
        rl_model_free(m);
    }
    rl_golden_free(g);
}

static void s_expect_error(rl_model *m, rl_dataproto *b, unsigned want, const char *needle)
{
    rl_dataproto *out = NULL;
    int rc = rl_model_forward(m, b, want, &s_pass0, &out);
    if (rc == 0)
        fail_msg("expected an error naming '%s'", needle);
    if (!strstr(rl_error_message(), needle))
        fail_msg("error '%s' does not name '%s'", rl_error_message(), needle);
    rl_dataproto_free(b);
}

static void test_bad_batches(void **state)
{
    (void)state;
    rl_golden *g = s_golden();
    rl_model *m = s_model(g, "one");
    int64_t D = rl_flow_policy_dim(rl_flow_policy_get_config(m));
    unsigned V = RL_Q_BIT(RL_Q_VELOCITY);
    rl_dataproto *b = s_fm_batch(g, D);
    rl_dataproto_remove(b, RL_FP_T);
    s_expect_error(m, b, V, RL_FP_T);
    b = s_fm_batch(g, D); /* wrong shape */
    rl_dataproto_remove(b, RL_FP_X_T);
    rl_dataproto_new_tensor(b, RL_FP_X_T, RL_F32, 2, (int64_t[]){5, D + 1});
    s_expect_error(m, b, V, RL_FP_X_T);
    b = s_fm_batch(g, D); /* wrong dtype */
    rl_dataproto_remove(b, RL_FP_TASK);
    rl_dataproto_new_tensor(b, RL_FP_TASK, RL_I32, 1, (int64_t[]){5});
    s_expect_error(m, b, V, RL_FP_TASK);
    b = s_fm_batch(g, D); /* task out of range */
    ((int64_t *)rl_tensor_data(rl_dataproto_tensor(b, RL_FP_TASK)))[2] = 3;
    s_expect_error(m, b, V, "num_tasks");
    b = s_fm_batch(g, D); /* NaN */
    ((float *)rl_tensor_data(rl_dataproto_tensor(b, RL_FP_OBJECT)))[17] = NAN;
    s_expect_error(m, b, V, RL_FP_OBJECT);
    b = s_fm_batch(g, D);
    ((float *)rl_tensor_data(rl_dataproto_tensor(b, RL_FP_T)))[0] = 1.5f;
    s_expect_error(m, b, V, RL_FP_T);
    b = s_sde_batch(g, D); /* a grid that does not decrease */
    ((float *)rl_tensor_data(rl_dataproto_tensor(b, RL_FP_TIMES)))[2] = 0.9f;
    s_expect_error(m, b, RL_Q_BIT(RL_Q_LOGP), RL_FP_TIMES);
    b = s_sde_batch(g, D);
    ((float *)rl_tensor_data(rl_dataproto_tensor(b, RL_FP_CHAIN)))[3] = INFINITY;
    s_expect_error(m, b, RL_Q_BIT(RL_Q_LOGP), RL_FP_CHAIN);
    b = s_fm_batch(g, D); /* velocity and logp in one pass */
    s_expect_error(m, b, V | RL_Q_BIT(RL_Q_LOGP), "mask");
    /* sampling without seeds or noise; SDE with noise 0 */
    rl_dataproto *in = s_obs_batch(g, "fm", 5), *out = NULL;
    rl_model_sampling sp = {.num_steps = 4, .noise_level = 0.7};
    assert_int_not_equal(rl_model_sample(m, in, &sp, &out), 0);
    assert_non_null(strstr(rl_error_message(), RL_FP_NOISE_SEEDS));
    rl_dataproto_free(in);
    in = s_sample_in(g, 1);
    sp.noise_level = 0;
    assert_int_not_equal(rl_model_sample(m, in, &sp, &out), 0);
    assert_non_null(strstr(rl_error_message(), "noise_level"));
    rl_dataproto_free(in);
    /* config: out of range and odd values, located */
    const char *bad[] = {"model: {type: flow_policy, num_action_chunks: 0, num_tasks: 10, hidden_size: 8, "
                         "num_layers: 1, time_embed_dim: 8, sde_mode: one, obs_clip: 0, detach_critic_input: true, init_from: ''}\n",
                         "model: {type: flow_policy, num_action_chunks: 2, num_tasks: 10, hidden_size: 8, "
                         "num_layers: 1, time_embed_dim: 7, sde_mode: one, obs_clip: 0, detach_critic_input: true, init_from: ''}\n",
                         "model: {type: flow_policy, num_action_chunks: 2, num_tasks: 10, hidden_size: 8, "
                         "num_layers: 1, time_embed_dim: 8, sde_mode: all, obs_clip: 0, detach_critic_input: true, init_from: ''}\n"};
    const char *names[] = {"model.num_action_chunks", "model.time_embed_dim", "model.sde_mode"};
    for (int i = 0; i < 3; i++) {
        rl_config *job = rl_config_parse_string(bad[i], strlen(bad[i]), "<test>");
        assert_non_null(job);
        assert_int_not_equal(rl_model_check_config(job), 0);
        if (!strstr(rl_error_message(), names[i]))
            fail_msg("'%s' does not name %s", rl_error_message(), names[i]);
        assert_null(rl_model_build(job, 1));
        rl_config_free(job);
    }
    rl_model_free(m);
    rl_golden_free(g);
}

static void test_save_load(void **state)
{
    (void)state;
    rl_golden *g = s_golden();
    rl_model *m = s_model(g, "joint");
    float mean[137], sd[137];
    for (int i = 0; i < 137; i++)
        mean[i] = 0.1f * (float)i, sd[i] = 1.0f + 0.01f * (float)i;
    assert_int_equal(rl_flow_policy_set_obs_norm(m, mean, sd), 0);
    sd[5] = 0.0f;
    assert_int_not_equal(rl_flow_policy_set_obs_norm(m, mean, sd), 0);
    char dir[] = "/tmp/rlrt_fp_XXXXXX";
    assert_non_null(mkdtemp(dir));
    assert_int_equal(rl_model_save(m, dir), 0);
    rl_model *m2 = rl_model_load_dir(dir);
    if (!m2)
        fail_msg("%s", rl_error_message());
    assert_string_equal(rl_model_kind_name(m2), "flow_policy");
    assert_int_equal(rl_flow_policy_get_config(m2)->sde_joint, 1);
    assert_int_equal(rl_model_num_params(m2), rl_model_num_params(m));
    assert_memory_equal(rl_model_params(m), rl_model_params(m2), sizeof(float) * (size_t)rl_model_num_params(m));
    rl_model_free(m2);
    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
    rl_model_free(m);
    rl_golden_free(g);
}

/* The velocity of one row whose object[0] is `x` (obs_norm: mean 0, std 1). */
static float s_vel0(rl_model *m, float x, int64_t D)
{
    rl_dataproto *b = rl_dataproto_new();
    float *p = rl_tensor_data(rl_dataproto_new_tensor(b, RL_FP_PROPRIO, RL_F32, 2, (int64_t[]){1, 39}));
    float *o = rl_tensor_data(rl_dataproto_new_tensor(b, RL_FP_OBJECT, RL_F32, 2, (int64_t[]){1, 98}));
    int64_t *k = rl_tensor_data(rl_dataproto_new_tensor(b, RL_FP_TASK, RL_I64, 1, (int64_t[]){1}));
    float *xt = rl_tensor_data(rl_dataproto_new_tensor(b, RL_FP_X_T, RL_F32, 2, (int64_t[]){1, D}));
    float *t = rl_tensor_data(rl_dataproto_new_tensor(b, RL_FP_T, RL_F32, 1, (int64_t[]){1}));
    memset(p, 0, sizeof(float) * 39);
    memset(o, 0, sizeof(float) * 98);
    memset(xt, 0, sizeof(float) * (size_t)D);
    o[0] = x, k[0] = 0, t[0] = 0.5f;
    rl_model_pass pass = {.temperature = 1, .micro_batch = 0};
    rl_dataproto *out = NULL;
    if (rl_model_forward(m, b, RL_Q_BIT(RL_Q_VELOCITY), &pass, &out))
        fail_msg("%s", rl_error_message());
    float v = ((const float *)rl_tensor_data(rl_dataproto_tensor(out, rl_quantity_name(RL_Q_VELOCITY))))[0];
    rl_dataproto_free(out);
    rl_dataproto_free(b);
    return v;
}

/* model.obs_clip clamps the normalised observation: an object far outside
 * the demonstrations' range acts like one at the bound; 0 is off; a
 * negative value is a located error. */
static void test_obs_clip(void **state)
{
    (void)state;
    const char *y = "model: {type: flow_policy, num_action_chunks: 2, num_tasks: 3, hidden_size: 16, "
                    "num_layers: 1, time_embed_dim: 8, sde_mode: one, obs_clip: %s, detach_critic_input: true, init_from: ''}\n";
    char yaml[512];
    rl_model *m[2];
    for (int i = 0; i < 2; i++) {
        snprintf(yaml, sizeof yaml, y, i ? "3" : "0");
        rl_config *job = rl_config_parse_string(yaml, strlen(yaml), "<test>");
        assert_non_null(job);
        m[i] = rl_model_build(job, 1);
        rl_config_free(job);
        if (!m[i] || rl_model_init_random(m[i], 7))
            fail_msg("%s", rl_error_message());
    }
    assert_true(rl_flow_policy_get_config(m[1])->obs_clip == 3.0);
    const int64_t D = 14;
    assert_float_equal(s_vel0(m[1], 100.0f, D), s_vel0(m[1], 3.0f, D), 0);
    assert_float_equal(s_vel0(m[1], -50.0f, D), s_vel0(m[1], -3.0f, D), 0);
    assert_float_equal(s_vel0(m[1], 1.5f, D), s_vel0(m[0], 1.5f, D), 0); /* inside: unchanged */
    assert_true(s_vel0(m[0], 100.0f, D) != s_vel0(m[0], 3.0f, D));      /* off: not clamped */
    snprintf(yaml, sizeof yaml, y, "-1");
    rl_config *job = rl_config_parse_string(yaml, strlen(yaml), "<test>");
    assert_int_not_equal(rl_model_check_config(job), 0);
    assert_non_null(strstr(rl_error_message(), "model.obs_clip"));
    rl_config_free(job);
    rl_model_free(m[0]);
    rl_model_free(m[1]);
}

int main(void)
{
    rl_nn_set_threads(2);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_velocity_value_golden),
        cmocka_unit_test(test_detach_critic_input), cmocka_unit_test(test_sde_logp_golden),
        cmocka_unit_test(test_finite_differences),    cmocka_unit_test(test_sampling),
        cmocka_unit_test(test_bad_batches),           cmocka_unit_test(test_save_load),
        cmocka_unit_test(test_obs_clip),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
