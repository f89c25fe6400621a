/* test_nn_flow_cuda.c — the flow model kinds on the GPU (issue 39):
 * flow_policy, image_classifier and clip_flow with the MLP trunk moved
 * with rl_model_to_device(RL_DEVICE_CUDA), against the same model on the
 * CPU; and the kernel-table entries they added (silu forward/backward,
 * time_embed, standardize) against their CPU twins on ragged shapes.
 *
 * Per kind, fp32 (TF32 off): every quantity of forward, the loss and every
 * gradient of forward_backward (micro-batched), three AdamW steps with the
 * moments on the device, and for the two generators sampling (the ODE and
 * the SDE with its per-step log-probs) from the same seeds; the flow
 * policy's model also saved from the GPU and loaded on the CPU (bit for
 * bit) and moved back.
 *
 * Tolerances (the GPU sums the products and the column sums in another
 * order; silu's exp is expf against the CPU's vectorised one, < 1e-7
 * relative; the host's SDE step math and noise are the same code):
 *   kernels: silu, its backward atol 1e-6 + rtol 1e-5; time_embed atol 1e-6
 *     (double sin/cos on both); standardize exact;
 *   quantities (velocity, value, logits' log-probs): atol 1e-5 + rtol 1e-4;
 *     chain log-probs (sums over D of squared residuals over a small
 *     variance): atol 1e-3 + rtol 1e-4; losses (Σ w·q, log-probs
 *     included) atol 1e-4 + rtol 1e-4;
 *   gradients, per view: relative L2 distance ||gpu − cpu|| / ||cpu|| <=
 *     1e-4 and every element within 1e-4·max|view| + 1e-3·|cpu|;
 *   parameters after three AdamW steps (lr 1e-3): atol 2e-4 + rtol 1e-4
 *     (a step moves each weight by up to lr, and a tiny gradient's sign
 *     decides its direction);
 *   samples (chains, actions): atol 1e-4 + rtol 1e-4; their log-probs
 *     atol 1e-3 + rtol 1e-3; grids, noise levels and step masks (host
 *     code) exact.
 * Each check prints its largest distance, so a GPU run records them.
 *
 * Without a GPU (or a build without CUDA) the parity tests skip with the
 * reason, and the *_without_gpu test checks that each kind's move is
 * refused with a message and leaves the model on the CPU. The conv kinds
 * (image_cnn, clip_flow's conv trunk) are test_nn_conv_cuda.c's. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "common/core/rng.h"
#include "common/nn/engine/device.h"
#include "common/nn/engine/ops.h"
#include "common/nn/engine/optim.h"
#include "common/nn/models/clip_flow.h"
#include "common/nn/models/flow_policy.h"
#include "common/nn/models/image_classifier.h"
#include "common/nn/models/image_net.h"
#include "common/nn/models/model_device.h"
#include "rlrt/config.h"
#include "rlrt/dataproto.h"
#include "rlrt/error.h"
#include "rlrt/nn/model.h"
#include "rlrt/tensor.h"
#include "tests/common/model_parity.h"

/* Built with -DRL_FLOW_CUDA_DRYRUN the parity tests run the "GPU" model on
 * the CPU (the harness checked on a machine without a GPU: batches, loss,
 * comparisons; not a device check). */
#ifdef RL_FLOW_CUDA_DRYRUN
#define S_DEV RL_DEVICE_CPU
static int s_gpu(void) { return 1; }
#else
#define S_DEV RL_DEVICE_CUDA
static int s_gpu(void) { return rl_device_count(RL_DEVICE_CUDA) > 0; }
#endif

#define S_NEED_GPU()                                                                                \
    do {                                                                                            \
        if (!s_gpu()) {                                                                             \
            print_message("skip: no CUDA GPU visible (or built without make CUDA=1)\n");            \
            skip();                                                                                 \
            return;                                                                                 \
        }                                                                                           \
    } while (0)

/* ---- helpers: tests/common/model_parity.h ------------------------------------------------ */

/* ---- kernels against their CPU twins ------------------------------------------------------------- */

static void test_flow_kernels_cuda(void **state)
{
    (void)state;
    S_NEED_GPU();
    const rl_nn_ops *g = rl_nn_ops_get(S_DEV);
    assert_non_null(g);
    assert_null(rl_nn_ops_missing(g));
    static const int64_t ns[] = {1, 7, 1000, 4099, 70001};
    for (size_t k = 0; k < sizeof ns / sizeof ns[0]; k++) {
        const int64_t n = ns[k];
        const size_t b = sizeof(float) * (size_t)n;
        float *x = malloc(b), *dy = malloc(b), *y = malloc(b), *dx = malloc(b), *h = malloc(b);
        rl_parity_fill(x, n, 1 + (uint64_t)k, 6.0f, 0.0f);
        rl_parity_fill(dy, n, 11 + (uint64_t)k, 1.0f, 0.0f);
        rl_parity_fill(dx, n, 21 + (uint64_t)k, 1.0f, 0.0f); /* backward accumulates into it */
        x[0] = 90.0f;                                 /* saturated both ways */
        if (n > 1)
            x[1] = -90.0f;
        float *gx = rl_device_alloc(S_DEV, b), *gdy = rl_device_alloc(S_DEV, b);
        float *gy = rl_device_alloc(S_DEV, b), *gdx = rl_device_alloc(S_DEV, b);
        assert_int_equal(rl_device_copy(S_DEV, gx, RL_DEVICE_CPU, x, b), 0);
        assert_int_equal(rl_device_copy(S_DEV, gdy, RL_DEVICE_CPU, dy, b), 0);
        assert_int_equal(rl_device_copy(S_DEV, gdx, RL_DEVICE_CPU, dx, b), 0);
        rl_silu_forward(y, x, n);
        g->silu_forward(gy, gx, n);
        assert_int_equal(rl_device_copy(RL_DEVICE_CPU, h, S_DEV, gy, b), 0);
        assert_int_equal(rl_device_sync(S_DEV), 0);
        rl_parity_close("silu_forward", h, y, n, 1e-6, 1e-5);
        rl_silu_backward(dx, dy, x, n);
        g->silu_backward(gdx, gdy, gx, n);
        assert_int_equal(rl_device_copy(RL_DEVICE_CPU, h, S_DEV, gdx, b), 0);
        assert_int_equal(rl_device_sync(S_DEV), 0);
        rl_parity_close("silu_backward (accumulated)", h, dx, n, 1e-6, 1e-5);
        rl_device_free(S_DEV, gx);
        rl_device_free(S_DEV, gdy);
        rl_device_free(S_DEV, gy);
        rl_device_free(S_DEV, gdx);
        free(x), free(dy), free(y), free(dx), free(h);
    }
    /* the time embedding: rows of t in [0, 1] (0 and 1 included), ragged E */
    static const int Es[] = {2, 6, 64, 130};
    for (size_t k = 0; k < sizeof Es / sizeof Es[0]; k++) {
        const int E = Es[k];
        const int64_t n = 37;
        float t[37];
        for (int i = 0; i < n; i++)
            t[i] = (float)i / (float)(n - 1);
        const size_t b = sizeof(float) * (size_t)(n * E);
        float *e = calloc(1, b), *h = malloc(b);
        float *gt = rl_device_alloc(S_DEV, sizeof t), *ge = rl_device_alloc(S_DEV, b);
        assert_int_equal(rl_device_copy(S_DEV, gt, RL_DEVICE_CPU, t, sizeof t), 0);
        rl_time_embed(e, t, n, E);
        g->time_embed(ge, gt, n, E);
        assert_int_equal(rl_device_copy(RL_DEVICE_CPU, h, S_DEV, ge, b), 0);
        assert_int_equal(rl_device_sync(S_DEV), 0);
        rl_parity_close("time_embed", h, e, n * E, 1e-6, 0);
        rl_device_free(S_DEV, gt);
        rl_device_free(S_DEV, ge);
        free(e), free(h);
    }
    /* standardisation: N ragged, C 137 and 5, clip off and on, in place */
    static const int Ns[] = {1, 3, 257};
    static const int Cs[] = {137, 5};
    for (size_t a = 0; a < 3; a++)
        for (size_t c = 0; c < 2; c++)
            for (int clip = 0; clip < 2; clip++) {
                const int N = Ns[a], C = Cs[c];
                const size_t b = sizeof(float) * (size_t)N * C, bc = sizeof(float) * (size_t)C;
                float *x = malloc(b), *y = malloc(b), *h = malloc(b), *mu = malloc(bc), *sd = malloc(bc);
                rl_parity_fill(x, (int64_t)N * C, 5 + a, 3.0f, 0.5f);
                rl_parity_fill(mu, C, 6 + c, 1.0f, 0.0f);
                rl_parity_fill(sd, C, 7 + c, 0.2f, 1.0f);
                for (int j = 0; j < C; j++)
                    sd[j] = fabsf(sd[j]) + 0.01f;
                float *gx = rl_device_alloc(S_DEV, b), *gm = rl_device_alloc(S_DEV, bc);
                float *gs = rl_device_alloc(S_DEV, bc);
                assert_int_equal(rl_device_copy(S_DEV, gx, RL_DEVICE_CPU, x, b), 0);
                assert_int_equal(rl_device_copy(S_DEV, gm, RL_DEVICE_CPU, mu, bc), 0);
                assert_int_equal(rl_device_copy(S_DEV, gs, RL_DEVICE_CPU, sd, bc), 0);
                rl_standardize(y, x, mu, sd, clip ? 2.0f : 0.0f, N, C);
                g->standardize(gx, gx, gm, gs, clip ? 2.0f : 0.0f, N, C);
                assert_int_equal(rl_device_copy(RL_DEVICE_CPU, h, S_DEV, gx, b), 0);
                assert_int_equal(rl_device_sync(S_DEV), 0);
                rl_parity_close("standardize", h, y, (int64_t)N * C, 0, 0);
                rl_device_free(S_DEV, gx);
                rl_device_free(S_DEV, gm);
                rl_device_free(S_DEV, gs);
                free(x), free(y), free(h), free(mu), free(sd);
            }
}

/* ---- flow_policy ----------------------------------------------------------------------------------- */

static const char s_fp_yaml[] =
    "model: {type: flow_policy, num_action_chunks: 3, num_tasks: 3, hidden_size: 24, num_layers: 2, "
    "time_embed_dim: 8, sde_mode: joint, obs_clip: 3, detach_critic_input: false, init_from: ''}\n";

enum { FP_B = 7, FP_D = 21, FP_N = 4 };

static rl_model *s_fp_model(void)
{
    rl_model *m = rl_parity_build(s_fp_yaml, 3);
    float mean[137], sd[137];
    rl_parity_fill(mean, 137, 31, 0.5f, 0.0f);
    rl_parity_fill(sd, 137, 32, 0.3f, 1.0f);
    for (int i = 0; i < 137; i++)
        sd[i] = fabsf(sd[i]) + 0.05f;
    assert_int_equal(rl_flow_policy_set_obs_norm(m, mean, sd), 0);
    return m;
}

static rl_dataproto *s_fp_obs(void)
{
    rl_dataproto *dp = rl_dataproto_new();
    rl_parity_fill(rl_tensor_data(rl_parity_new(dp, RL_FP_PROPRIO, RL_F32, 2, (int64_t[]){FP_B, 39})), FP_B * 39, 41, 2.0f, 0.0f);
    rl_parity_fill(rl_tensor_data(rl_parity_new(dp, RL_FP_OBJECT, RL_F32, 2, (int64_t[]){FP_B, 98})), FP_B * 98, 42, 2.0f, 0.0f);
    int64_t *task = rl_tensor_data(rl_parity_new(dp, RL_FP_TASK, RL_I64, 1, (int64_t[]){FP_B}));
    for (int b = 0; b < FP_B; b++)
        task[b] = (b * 2) % 3;
    return dp;
}

/* The sampling inputs: observations, initial-noise seeds and SDE row seeds. */
static rl_dataproto *s_fp_sample_in(void)
{
    rl_dataproto *dp = s_fp_obs();
    int64_t *ns = rl_tensor_data(rl_parity_new(dp, RL_FP_NOISE_SEEDS, RL_I64, 1, (int64_t[]){FP_B}));
    int64_t *rs = rl_tensor_data(rl_parity_new(dp, RL_FP_ROW_SEEDS, RL_I64, 1, (int64_t[]){FP_B}));
    for (int b = 0; b < FP_B; b++) {
        ns[b] = 1000 + b;
        rs[b] = 2000 + 3 * b;
    }
    return dp;
}

static void s_fp_sample_parity(rl_model *cpu, rl_model *gpu, int greedy)
{
    print_message("flow_policy sample (%s)\n", greedy ? "ODE" : "SDE, joint");
    rl_dataproto *in = s_fp_sample_in(), *oc = NULL, *og = NULL;
    rl_model_sampling sp = {.greedy = greedy, .num_steps = FP_N, .noise_level = 0.5};
    assert_int_equal(rl_model_sample(cpu, in, &sp, &oc), 0);
    if (rl_model_sample(gpu, in, &sp, &og))
        fail_msg("%s", rl_error_message());
    rl_parity_cmp_out(og, oc, RL_FP_ACTION, 1e-4, 1e-4);
    rl_parity_cmp_out(og, oc, RL_FP_CHAIN, 1e-4, 1e-4);
    rl_parity_cmp_out(og, oc, RL_FP_INITIAL_NOISE, 0, 0);
    rl_parity_cmp_out(og, oc, RL_FP_TIMES, 0, 0);
    rl_parity_cmp_out(og, oc, RL_FP_NOISE_LEVEL, 0, 0);
    rl_parity_cmp_out(og, oc, RL_FP_STEP_MASK, 0, 0);
    rl_parity_cmp_out(og, oc, RL_FP_SAMPLE_LOGP, 1e-3, 1e-3);
    rl_dataproto_free(in);
    rl_dataproto_free(oc);
    rl_dataproto_free(og);
}

static void test_flow_policy_on_cuda(void **state)
{
    (void)state;
    S_NEED_GPU();
    rl_model *cpu = s_fp_model(), *gpu = s_fp_model();
    const int64_t P = rl_model_num_params(cpu);
    if (rl_model_to_device(gpu, S_DEV))
        fail_msg("%s", rl_error_message());
    assert_int_equal(rl_model_device(gpu), S_DEV);
    float *h = rl_parity_host(gpu, 0);
    assert_memory_equal(h, rl_model_params(cpu), sizeof(float) * (size_t)P);
    free(h);

    /* sampling first (same weights), then its SDE chain re-scored */
    s_fp_sample_parity(cpu, gpu, 1);
    s_fp_sample_parity(cpu, gpu, 0);
    rl_dataproto *sin = s_fp_sample_in(), *chain = NULL;
    rl_model_sampling sp = {.greedy = 0, .num_steps = FP_N, .noise_level = 0.5};
    assert_int_equal(rl_model_sample(cpu, sin, &sp, &chain), 0);
    rl_dataproto *lb = s_fp_obs();
    rl_parity_copy_tensor(lb, chain, RL_FP_CHAIN);
    rl_parity_copy_tensor(lb, chain, RL_FP_TIMES);
    rl_parity_copy_tensor(lb, chain, RL_FP_NOISE_LEVEL);
    float *mask = rl_tensor_data(rl_parity_new(lb, RL_FP_STEP_MASK, RL_F32, 2, (int64_t[]){FP_B, FP_N}));
    for (int i = 0; i < FP_B * FP_N; i++) /* a subset of the steps; row 4 none, row 5 one: the */
        mask[i] = i / FP_N == 4 ? 0.0f      /* micro-batch of rows 4-5 scores fewer steps than rows */
                  : i / FP_N == 5 ? (float)(i % FP_N == 2)
                                  : (float)((i % 3) != 1);
    rl_dataproto_free(sin);
    rl_dataproto_free(chain);

    /* flow matching with the value head, then the chain with it */
    rl_dataproto *fm = s_fp_obs();
    rl_parity_fill(rl_tensor_data(rl_parity_new(fm, RL_FP_X_T, RL_F32, 2, (int64_t[]){FP_B, FP_D})), FP_B * FP_D, 51, 1.0f, 0.0f);
    float *t = rl_tensor_data(rl_parity_new(fm, RL_FP_T, RL_F32, 1, (int64_t[]){FP_B}));
    for (int b = 0; b < FP_B; b++)
        t[b] = (float)b / (FP_B - 1);
    static const char *const vel_names[] = {"velocity", "value", NULL};
    static const char *const lp_names[] = {"logp", "logp_mask", "value", NULL};
    rl_parity_train(S_DEV, cpu, gpu, fm, RL_Q_BIT(RL_Q_VELOCITY) | RL_Q_BIT(RL_Q_VALUE), 3, vel_names,
                   "flow_policy: velocity + value (micro-batch 3)");
    rl_parity_train(S_DEV, cpu, gpu, lb, RL_Q_BIT(RL_Q_LOGP) | RL_Q_BIT(RL_Q_VALUE), 2, lp_names,
                   "flow_policy: SDE chain log-probs + value (micro-batch 2)");

    /* save from the GPU, load on the CPU: bit for bit; then back to the CPU */
    h = rl_parity_host(gpu, 0);
    char dir[] = "/tmp/rlrt_flow_cuda_XXXXXX";
    assert_non_null(mkdtemp(dir));
    assert_int_equal(rl_model_save(gpu, dir), 0);
    rl_model *back = rl_parity_build(s_fp_yaml, 9);
    assert_int_equal(rl_model_load(back, dir), 0);
    assert_memory_equal(rl_model_params(back), h, sizeof(float) * (size_t)P);
    assert_int_equal(rl_model_to_device(gpu, RL_DEVICE_CPU), 0);
    assert_int_equal(rl_model_device(gpu), RL_DEVICE_CPU);
    assert_memory_equal(rl_model_params(gpu), h, sizeof(float) * (size_t)P);
    rl_dataproto *o = NULL;
    rl_model_pass pass = {.micro_batch = 0};
    assert_int_equal(rl_model_forward(gpu, fm, RL_Q_BIT(RL_Q_VELOCITY), &pass, &o), 0);
    rl_dataproto_free(o);
    char path[128];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    unlink(path);
    snprintf(path, sizeof path, "%s/config.json", dir);
    unlink(path);
    rmdir(dir);
    free(h);
    rl_dataproto_free(fm);
    rl_dataproto_free(lb);
    rl_model_free(back);
    rl_model_free(cpu);
    rl_model_free(gpu);
}

/* ---- image_classifier ------------------------------------------------------------------------------ */

static const char s_ic_yaml[] = "model: {type: image_classifier, channels: 1, height: 5, width: 7, "
                                "num_classes: 4, hidden_size: 12, init_from: ''}\n";

static void test_image_classifier_on_cuda(void **state)
{
    (void)state;
    S_NEED_GPU();
    enum { B = 9, D = 35 };
    rl_model *cpu = rl_parity_build(s_ic_yaml, 4), *gpu = rl_parity_build(s_ic_yaml, 4);
    if (rl_model_to_device(gpu, S_DEV))
        fail_msg("%s", rl_error_message());
    rl_dataproto *in = rl_dataproto_new();
    float *x = rl_tensor_data(rl_parity_new(in, RL_IC_IMAGES, RL_F32, 2, (int64_t[]){B, D}));
    rl_parity_fill(x, B * D, 61, 0.5f, 0.0f);
    for (int i = 0; i < B * D; i++)
        x[i] = x[i] > 1 ? 1 : x[i] < -1 ? -1 : x[i];
    int32_t *y = rl_tensor_data(rl_parity_new(in, RL_IC_LABELS, RL_I32, 1, (int64_t[]){B}));
    for (int b = 0; b < B; b++)
        y[b] = b % 4;
    float pc[B * 4], pg[B * 4];
    assert_int_equal(rl_image_model_probs(cpu, B, x, pc), 0);
    if (rl_image_model_probs(gpu, B, x, pg))
        fail_msg("%s", rl_error_message());
    rl_parity_close("probs", pg, pc, B * 4, 1e-6, 1e-4);
    static const char *const names[] = {"logp", NULL};
    rl_parity_train(S_DEV, cpu, gpu, in, RL_Q_BIT(RL_Q_LOGP), 4, names, "image_classifier: logp (micro-batch 4)");
    rl_dataproto_free(in);
    rl_model_free(cpu);
    rl_model_free(gpu);
}

/* ---- clip_flow (MLP trunk) -------------------------------------------------------------------------- */

static const char s_cf_yaml[] =
    "model: {type: clip_flow, frames: 2, channels: 1, height: 3, width: 4, num_prompts: 3, hidden_size: 16, "
    "num_layers: 2, time_embed_dim: 8, prediction: x0, trunk: mlp, conv_channels: 4, null_prompt: false, cfg_dropout: 0, guidance: 1, init_from: ''}\n";

enum { CF_B = 6, CF_D = 24, CF_N = 5 };

static rl_dataproto *s_cf_sample_in(void)
{
    rl_dataproto *dp = rl_dataproto_new();
    int32_t *ids = rl_tensor_data(rl_parity_new(dp, RL_CF_PROMPT_IDS, RL_I32, 1, (int64_t[]){CF_B}));
    int64_t *ns = rl_tensor_data(rl_parity_new(dp, RL_CF_NOISE_SEEDS, RL_I64, 1, (int64_t[]){CF_B}));
    int64_t *rs = rl_tensor_data(rl_parity_new(dp, RL_CF_ROW_SEEDS, RL_I64, 1, (int64_t[]){CF_B}));
    for (int b = 0; b < CF_B; b++) {
        ids[b] = (b + 1) % 3;
        ns[b] = 300 + b / 2; /* pairs share their initial noise */
        rs[b] = 400 + b;
    }
    return dp;
}

static void test_clip_flow_on_cuda(void **state)
{
    (void)state;
    S_NEED_GPU();
    rl_model *cpu = rl_parity_build(s_cf_yaml, 5), *gpu = rl_parity_build(s_cf_yaml, 5);
    if (rl_model_to_device(gpu, S_DEV))
        fail_msg("%s", rl_error_message());
    rl_parity_clip_flow_sample(S_DEV, cpu, gpu, s_cf_sample_in, CF_B, CF_N, 4, "clip_flow");
    rl_dataproto *fm = rl_dataproto_new();
    int32_t *ids = rl_tensor_data(rl_parity_new(fm, RL_CF_PROMPT_IDS, RL_I32, 1, (int64_t[]){CF_B}));
    rl_parity_fill(rl_tensor_data(rl_parity_new(fm, RL_CF_X_T, RL_F32, 2, (int64_t[]){CF_B, CF_D})), CF_B * CF_D, 71, 1.0f, 0.0f);
    float *sig = rl_tensor_data(rl_parity_new(fm, RL_CF_SIGMA, RL_F32, 1, (int64_t[]){CF_B}));
    for (int b = 0; b < CF_B; b++) {
        ids[b] = b % 3;
        sig[b] = b == 0 ? 0.01f : (float)b / (CF_B - 1); /* σ under the x0 floor in row 0 */
    }
    static const char *const names[] = {"velocity", NULL};
    rl_parity_train(S_DEV, cpu, gpu, fm, RL_Q_BIT(RL_Q_VELOCITY), 4, names, "clip_flow: flow matching (micro-batch 4)");
    rl_dataproto_free(fm);
    rl_model_free(cpu);
    rl_model_free(gpu);
}

/* ---- refusals ------------------------------------------------------------------------------------- */

/* Without a GPU each kind's move is refused with a message naming it, and
 * the model stays on the CPU. */
static void test_flow_kinds_refused_without_gpu(void **state)
{
    (void)state;
    if (s_gpu()) {
        print_message("skip: a GPU is visible (the parity tests run instead)\n");
        skip();
        return;
    }
    static const char *const yamls[3] = {s_fp_yaml, s_ic_yaml, s_cf_yaml};
    static const char *const kinds[3] = {"flow_policy", "image_classifier", "clip_flow"};
    for (int k = 0; k < 3; k++) {
        rl_model *m = rl_parity_build(yamls[k], 1);
        assert_int_equal(rl_model_to_device(m, RL_DEVICE_CUDA), RL_EUNSUPPORTED);
        if (!strstr(rl_error_message(), kinds[k]))
            fail_msg("'%s' does not name %s", rl_error_message(), kinds[k]);
        assert_int_equal(rl_model_device(m), RL_DEVICE_CPU);
        rl_model_free(m);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_flow_kinds_refused_without_gpu),
        cmocka_unit_test(test_flow_kernels_cuda),
        cmocka_unit_test(test_flow_policy_on_cuda),
        cmocka_unit_test(test_image_classifier_on_cuda),
        cmocka_unit_test(test_clip_flow_on_cuda),
    };
    return cmocka_run_group_tests_name("nn_flow_cuda", tests, NULL, NULL);
}
