/* tests/common/model_parity.c — see model_parity.h. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "tests/common/model_parity.h"

#include "common/core/rng.h"
#include "common/nn/engine/optim.h"
#include "common/nn/models/clip_flow.h"
#include "common/nn/models/model_device.h"
#include "rlrt/config.h"
#include "rlrt/error.h"
#include "rlrt/tensor.h"

rl_model *rl_parity_build(const char *yaml, uint64_t seed)
{
    rl_config *job = rl_config_parse_string(yaml, strlen(yaml), "<test>");
    assert_non_null(job);
    rl_model *m = rl_model_build(job, seed);
    rl_config_free(job);
    if (!m)
        fail_msg("%s", rl_error_message());
    return m;
}

/* A host copy of the parameters (grads = 0) or gradients (grads = 1). */
float *rl_parity_host(rl_model *m, int grads)
{
    int64_t P = rl_model_num_params(m);
    float *h = malloc(sizeof(float) * (size_t)(P + 1));
    assert_non_null(h);
    const float *src = grads ? rl_model_grads(m) : rl_model_params(m);
    assert_int_equal(rl_device_copy(RL_DEVICE_CPU, h, rl_model_device(m), src, sizeof(float) * (size_t)P), 0);
    assert_int_equal(rl_device_sync(rl_model_device(m)), 0);
    return h;
}

void rl_parity_fill(float *x, int64_t n, uint64_t seed, float scale, float shift)
{
    rl_rng g;
    rl_rng_init(&g, seed, 0);
    for (int64_t i = 0; i < n; i++)
        x[i] = shift + scale * rl_rng_normal(&g);
}

/* Every |got − want| <= atol + rtol·|want|; prints the largest distance. */
void rl_parity_close(const char *what, const float *got, const float *want, int64_t n, double atol,
                    double rtol)
{
    double worst = 0;
    int64_t at = -1;
    for (int64_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - want[i]);
        if (!(d <= atol + rtol * fabs(want[i])))
            fail_msg("%s[%lld]: cuda %.9g vs cpu %.9g (|d| %.3g > %.3g)", what, (long long)i, got[i], want[i], d,
                     atol + rtol * fabs(want[i]));
        if (d > worst) {
            worst = d;
            at = i;
        }
    }
    print_message("  %-36s n %-6lld max |cuda - cpu| %.3g%s\n", what, (long long)n, worst,
                  at >= 0 ? "" : " (identical)");
}

/* Per view: the relative L2 distance <= 1e-4 and every element within
 * 1e-4·max|view| + 1e-3·|cpu|. */
void rl_parity_close_views(const char *what, const rl_param_manifest *man, const float *got, const float *want)
{
    double worst = 0;
    const char *wv = "-";
    for (int v = 0; v < man->count; v++) {
        const float *a = got + man->views[v].offset, *b = want + man->views[v].offset;
        int64_t n = man->views[v].numel;
        double d2 = 0, s2 = 0, mx = 0;
        for (int64_t i = 0; i < n; i++) {
            d2 += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
            s2 += (double)b[i] * b[i];
            mx = fabs(b[i]) > mx ? fabs(b[i]) : mx;
        }
        double rel = s2 > 0 ? sqrt(d2 / s2) : sqrt(d2);
        if (!(rel <= 1e-4))
            fail_msg("%s %s: relative distance %.3g > 1e-4", what, man->views[v].name, rel);
        for (int64_t i = 0; i < n; i++)
            if (!(fabs((double)a[i] - b[i]) <= 1e-4 * mx + 1e-3 * fabs(b[i])))
                fail_msg("%s %s[%lld]: cuda %.9g vs cpu %.9g", what, man->views[v].name, (long long)i, a[i], b[i]);
        if (rel > worst) {
            worst = rel;
            wv = man->views[v].name;
        }
    }
    print_message("  %-36s worst view ||cuda - cpu|| / ||cpu|| %.3g (%s)\n", what, worst, wv);
}

/* A fixed weight per (quantity, row, position). */
static float s_w(int q, int64_t row, int64_t j)
{
    rl_rng g;
    rl_rng_init(&g, 77u + (uint64_t)q, (uint64_t)(row * 100003 + j));
    return rl_rng_uniform(&g) - 0.5f;
}

/* L = Σ w·q over every quantity asked for and its existing positions. */
int rl_parity_loss(void *ctx, const rl_model_io *out, rl_model_io *grad, double *loss)
{
    (void)ctx;
    for (int q = 0; q < RL_Q_COUNT; q++) {
        if (!out->q[q])
            continue;
        int64_t W = out->width[q];
        for (int64_t r = 0; r < out->rows; r++)
            for (int64_t j = 0; j < W; j++) {
                int64_t i = r * W + j;
                float mk = out->mask[q] ? out->mask[q][i] : 1.0f;
                if (mk == 0.0f)
                    continue;
                float w = s_w(q, out->row0 + r, j) * mk;
                *loss += (double)w * out->q[q][i];
                grad->q[q][i] = w;
            }
    }
    return 0;
}

rl_tensor *rl_parity_new(rl_dataproto *dp, const char *name, rl_dtype dt, int ndim, const int64_t *shape)
{
    rl_tensor *t = rl_dataproto_new_tensor(dp, name, dt, ndim, shape);
    assert_non_null(t);
    return t;
}

/* A tensor of `from` copied into `to` under the same name. */
void rl_parity_copy_tensor(rl_dataproto *to, const rl_dataproto *from, const char *name)
{
    const rl_tensor *t = rl_dataproto_tensor(from, name);
    assert_non_null(t);
    rl_tensor *c = rl_parity_new(to, name, t->dtype, t->ndim, t->shape);
    memcpy(rl_tensor_data(c), rl_tensor_data(t), rl_tensor_nbytes(t));
}

/* The f32 tensor `name` of both outputs, compared. */
void rl_parity_cmp_out(const rl_dataproto *gpu, const rl_dataproto *cpu, const char *name, double atol,
                      double rtol)
{
    const rl_tensor *a = rl_dataproto_tensor_typed(gpu, name, RL_F32), *b = rl_dataproto_tensor_typed(cpu, name, RL_F32);
    assert_non_null(a);
    assert_non_null(b);
    assert_int_equal(rl_tensor_nbytes(a), rl_tensor_nbytes(b));
    rl_parity_close(name, rl_tensor_data(a), rl_tensor_data(b), (int64_t)(rl_tensor_nbytes(b) / sizeof(float)), atol, rtol);
}

/* forward's quantities, then three steps of forward_backward (micro-batch
 * mb) + AdamW on both models: losses, gradients, parameters. `names` are
 * forward's f32 outputs (NULL-terminated), the first `nlogp` of them
 * log-probs (looser). */
void rl_parity_train(rl_device dev, rl_model *cpu, rl_model *gpu, const rl_dataproto *in, unsigned want, int64_t mb,
                           const char *const *names, const char *what)
{
    print_message("%s\n", what);
    rl_model_pass pass = {.temperature = 1.0, .micro_batch = mb};
    rl_dataproto *oc = NULL, *og = NULL;
    assert_int_equal(rl_model_forward(cpu, in, want, &pass, &oc), 0);
    if (rl_model_forward(gpu, in, want, &pass, &og))
        fail_msg("%s", rl_error_message());
    for (int i = 0; names[i]; i++) {
        int lp = strncmp(names[i], "logp", 4) == 0;
        rl_parity_cmp_out(og, oc, names[i], lp ? 1e-3 : 1e-5, 1e-4);
    }
    rl_dataproto_free(oc);
    rl_dataproto_free(og);

    const int64_t P = rl_model_num_params(cpu);
    const rl_param_manifest *man = rl_model_manifest(cpu);
    rl_adamw_config ac = rl_adamw_config_default();
    rl_adamw *optc = rl_adamw_new(&ac, man, 0, P), *optg = rl_adamw_new_on(&ac, man, 0, P, dev);
    assert_non_null(optc);
    assert_non_null(optg);
    for (int step = 0; step < 3; step++) {
        double lc = 0, lg = 0;
        rl_model_zero_grad(cpu);
        rl_model_zero_grad(gpu);
        assert_int_equal(rl_model_forward_backward(cpu, in, want, &pass, rl_parity_loss, NULL, &lc), 0);
        if (rl_model_forward_backward(gpu, in, want, &pass, rl_parity_loss, NULL, &lg))
            fail_msg("%s", rl_error_message());
        if (!(fabs(lc - lg) <= 1e-4 + 1e-4 * fabs(lc)))
            fail_msg("%s step %d: loss cuda %.9g vs cpu %.9g", what, step, lg, lc);
        print_message("  step %d loss cpu %.9g cuda %.9g\n", step, lc, lg);
        float *g = rl_parity_host(gpu, 1);
        rl_parity_close_views("gradients", man, g, rl_model_grads(cpu));
        free(g);
        assert_int_equal(rl_adamw_step(optc, 1e-3, rl_model_params(cpu), rl_model_grads(cpu)), 0);
        assert_int_equal(rl_adamw_step(optg, 1e-3, rl_model_params(gpu), rl_model_grads(gpu)), 0);
    }
    float *h = rl_parity_host(gpu, 0);
    rl_parity_close("params after 3 AdamW steps", h, rl_model_params(cpu), P, 2e-4, 1e-4);
    free(h);
    rl_adamw_free(optc);
    rl_adamw_free(optg);
}

void rl_parity_clip_flow_sample(rl_device dev, rl_model *cpu, rl_model *gpu, rl_dataproto *(*make_in)(void),
                                int B, int N, int64_t mb, const char *what)
{
    for (int greedy = 1; greedy >= 0; greedy--) {
        print_message("%s sample (%s)\n", what, greedy ? "ODE" : "SDE");
        rl_dataproto *in = make_in(), *oc = NULL, *og = NULL;
        rl_model_sampling sp = {.greedy = greedy, .num_steps = N, .noise_level = 0.7, .shift = 3.0};
        assert_int_equal(rl_model_sample(cpu, in, &sp, &oc), 0);
        if (rl_model_sample(gpu, in, &sp, &og))
            fail_msg("%s", rl_error_message());
        rl_parity_cmp_out(og, oc, RL_CF_LATENTS, 1e-4, 1e-4);
        rl_parity_cmp_out(og, oc, RL_CF_FINAL_MEAN, 1e-4, 1e-4);
        rl_parity_cmp_out(og, oc, RL_CF_SIGMAS, 0, 0);
        rl_parity_cmp_out(og, oc, RL_CF_NOISE_LEVEL, 0, 0);
        rl_parity_cmp_out(og, oc, RL_CF_SAMPLE_LOGP, 1e-3, 1e-3);
        if (!greedy) { /* its chain re-scored on a subset of steps */
            rl_dataproto *lb = rl_dataproto_new();
            rl_parity_copy_tensor(lb, in, RL_CF_PROMPT_IDS);
            rl_parity_copy_tensor(lb, oc, RL_CF_LATENTS);
            rl_parity_copy_tensor(lb, oc, RL_CF_SIGMAS);
            rl_parity_copy_tensor(lb, oc, RL_CF_NOISE_LEVEL);
            float *mask = rl_tensor_data(rl_parity_new(lb, RL_CF_STEP_MASK, RL_F32, 2, (int64_t[]){B, N}));
            for (int i = 0; i < B * N; i++)
                mask[i] = (i % 4) != 2;
            static const char *const names[] = {"logp", NULL};
            char label[160];
            snprintf(label, sizeof label, "%s: SDE chain log-probs (micro-batch %lld)", what, (long long)mb);
            rl_parity_train(dev, cpu, gpu, lb, RL_Q_BIT(RL_Q_LOGP), mb, names, label);
            rl_dataproto_free(lb);
        }
        rl_dataproto_free(in);
        rl_dataproto_free(oc);
        rl_dataproto_free(og);
    }
}
