/* test_nn_conv_cuda.c — the convolutional kinds on the GPU: the device
 * table's conv entries (conv2d forward/backward, max pooling, relu and the
 * conv trunk's glue: plane_add, plane_sum, upsample2x_add/backward)
 * against their CPU twins on ragged shapes, and image_cnn and clip_flow
 * with model.trunk conv moved with rl_model_to_device(RL_DEVICE_CUDA)
 * against the same model on the CPU.
 *
 * Kernels: forward and backward, the backwards accumulating onto non-zero
 * gradients, with every NULL-gradient combination the models use; shapes
 * with N = 1, C = 1, OC = 1, odd H and W, stride 1 and 2, padding 0 and 1,
 * 1×1 and 3×3 kernels (and a 3×5 one), max pooling with odd H/W, window 2
 * and 3, and ties (the first maximum wins on both). Tolerances: the
 * convolution's sums run in cuBLAS's order: forward and input gradient
 * atol 1e-5 + rtol 1e-4, weight and bias gradients (sums over images and
 * positions, cancelling) 3e-5·max|gradient| + rtol 1e-4; also with the
 * images in several chunks (RL_CUDA_CONV_CHUNK); pooling, relu, plane_add and the
 * upsampling pair exact (one add per element, in the CPU's order);
 * plane_sum (double) atol 1e-6 + rtol 1e-6.
 *
 * Models (fp32): as test_nn_flow_cuda.c (every quantity of forward, the
 * loss and every gradient of forward_backward, micro-batched, three AdamW
 * steps with the moments on the device; for clip_flow ODE and SDE sampling
 * from the same seeds, with classifier-free guidance, and the SDE chain
 * re-scored), with its tolerances; image_cnn also its class probabilities
 * and features.
 *
 * Without a GPU (or a build without CUDA) the parity tests skip with the
 * reason, and test_conv_kinds_refused_without_gpu checks that each move is
 * refused naming the kind, leaving the model on the CPU. On the host
 * emulation of CUDA (make CUDA=emu; tests/cuda_emu/) they all run. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "common/core/rng.h"
#include "common/nn/engine/device.h"
#include "common/nn/engine/ops.h"
#include "common/nn/engine/ops_conv.h"
#include "common/nn/engine/optim.h"
#include "common/nn/models/clip_flow.h"
#include "common/nn/models/image_cnn.h"
#include "common/nn/models/image_classifier.h"
#include "common/nn/models/image_net.h"
#include "common/nn/models/model_device.h"
#include "rlrt/config.h"
#include "rlrt/dataproto.h"
#include "rlrt/error.h"
#include "rlrt/nn/model.h"
#include "rlrt/tensor.h"
#include "tests/common/model_parity.h"

#define S_DEV RL_DEVICE_CUDA
static int s_gpu(void) { return rl_device_count(RL_DEVICE_CUDA) > 0; }

#define S_NEED_GPU()                                                                                \
    do {                                                                                            \
        if (!s_gpu()) {                                                                             \
            print_message("skip: no CUDA GPU visible (or built without make CUDA=1)\n");            \
            skip();                                                                                 \
            return;                                                                                 \
        }                                                                                           \
    } while (0)

/* ---- helpers: tests/common/model_parity.h ------------------------------------------------ */

/* bytes of a host array on the device (a fresh block; h NULL: unwritten). */
static void *s_up(const void *h, size_t bytes)
{
    void *d = rl_device_alloc(S_DEV, bytes ? bytes : 1);
    assert_non_null(d);
    if (h && bytes)
        assert_int_equal(rl_device_copy(S_DEV, d, RL_DEVICE_CPU, h, bytes), 0);
    return d;
}

/* The device block d (n floats) against the host's want: every element
 * within atol + rtol·|want|, atol < 0 meaning −atol·max|want| (sums over
 * many images and positions, cancelling to small values: cuBLAS adds them
 * in another order). */
static void s_check(const char *what, const float *d, const float *want, int64_t n, double atol, double rtol)
{
    if (atol < 0) {
        double mx = 0;
        for (int64_t i = 0; i < n; i++)
            mx = fabs(want[i]) > mx ? fabs(want[i]) : mx;
        atol = -atol * (mx > 1 ? mx : 1);
    }
    float *h = malloc(sizeof(float) * (size_t)(n + 1));
    assert_non_null(h);
    assert_int_equal(rl_device_copy(RL_DEVICE_CPU, h, S_DEV, d, sizeof(float) * (size_t)n), 0);
    if (rl_device_sync(S_DEV))
        fail_msg("%s: %s", what, rl_error_message());
    rl_parity_close(what, h, want, n, atol, rtol);
    free(h);
}

/* ---- kernels against their CPU twins ------------------------------------------------------------- */

static void s_conv_case(const rl_nn_ops *g, const rl_conv2d_shape *s, int bias, uint64_t seed)
{
    const int OH = rl_conv2d_out_h(s), OW = rl_conv2d_out_w(s);
    const int64_t ni = (int64_t)s->N * s->C * s->H * s->W, no = (int64_t)s->N * s->OC * OH * OW;
    const int64_t nw = (int64_t)s->OC * s->C * s->KH * s->KW;
    print_message("conv2d N %d C %d %dx%d OC %d kernel %dx%d pad %d stride %d -> %dx%d%s\n", s->N, s->C, s->H,
                  s->W, s->OC, s->KH, s->KW, s->pad, s->stride, OH, OW, bias ? "" : " (no bias)");
    float *x = malloc(sizeof(float) * (size_t)ni), *w = malloc(sizeof(float) * (size_t)nw);
    float *b = malloc(sizeof(float) * (size_t)s->OC), *y = malloc(sizeof(float) * (size_t)no);
    float *dy = malloc(sizeof(float) * (size_t)no), *dx = malloc(sizeof(float) * (size_t)ni);
    float *dw = malloc(sizeof(float) * (size_t)nw), *db = malloc(sizeof(float) * (size_t)s->OC);
    rl_parity_fill(x, ni, seed, 1.0f, 0.0f);
    rl_parity_fill(w, nw, seed + 1, 0.5f, 0.0f);
    rl_parity_fill(b, s->OC, seed + 2, 1.0f, 0.0f);
    rl_parity_fill(dy, no, seed + 3, 1.0f, 0.0f);
    float *gx = s_up(x, sizeof(float) * (size_t)ni), *gw = s_up(w, sizeof(float) * (size_t)nw);
    float *gb = s_up(b, sizeof(float) * (size_t)s->OC), *gdy = s_up(dy, sizeof(float) * (size_t)no);
    float *gy = s_up(NULL, sizeof(float) * (size_t)no);
    assert_int_equal(rl_conv2d_forward(y, x, w, bias ? b : NULL, s), 0);
    assert_int_equal(g->conv2d_forward(gy, gx, gw, bias ? gb : NULL, s), 0);
    s_check("conv2d_forward", gy, y, no, 1e-5, 1e-4);
    /* the backward with each set of gradients the models ask for, onto
     * non-zero values */
    for (int mode = 0; mode < 3; mode++) { /* 0: all three, 1: no dinp (a first layer), 2: dinp only */
        rl_parity_fill(dx, ni, seed + 4, 1.0f, 0.0f);
        rl_parity_fill(dw, nw, seed + 5, 1.0f, 0.0f);
        rl_parity_fill(db, s->OC, seed + 6, 1.0f, 0.0f);
        float *gdx = s_up(dx, sizeof(float) * (size_t)ni), *gdw = s_up(dw, sizeof(float) * (size_t)nw);
        float *gdb = s_up(db, sizeof(float) * (size_t)s->OC);
        float *pdx = mode == 1 ? NULL : dx, *pdw = mode == 2 ? NULL : dw, *pdb = mode == 2 ? NULL : db;
        assert_int_equal(rl_conv2d_backward(pdx, pdw, pdb, dy, x, w, s), 0);
        assert_int_equal(g->conv2d_backward(pdx ? gdx : NULL, pdw ? gdw : NULL, pdb ? gdb : NULL, gdy, gx, gw, s), 0);
        s_check(mode == 1 ? "conv2d_backward dinp (untouched)" : "conv2d_backward dinp (accumulated)", gdx, dx, ni,
                1e-5, 1e-4);
        s_check(mode == 2 ? "conv2d_backward dw (untouched)" : "conv2d_backward dw (accumulated)", gdw, dw, nw, -3e-5,
                1e-4);
        s_check(mode == 2 ? "conv2d_backward db (untouched)" : "conv2d_backward db (accumulated)", gdb, db, s->OC,
                -3e-5, 1e-4);
        rl_device_free(S_DEV, gdx);
        rl_device_free(S_DEV, gdw);
        rl_device_free(S_DEV, gdb);
    }
    rl_device_free(S_DEV, gx), rl_device_free(S_DEV, gw), rl_device_free(S_DEV, gb);
    rl_device_free(S_DEV, gdy), rl_device_free(S_DEV, gy);
    free(x), free(w), free(b), free(y), free(dy), free(dx), free(dw), free(db);
}

static void test_conv_kernels_cuda(void **state)
{
    (void)state;
    S_NEED_GPU();
    const rl_nn_ops *g = rl_nn_ops_get(S_DEV);
    assert_non_null(g);
    assert_null(rl_nn_ops_missing(g));
    static const rl_conv2d_shape shapes[] = {
        /* N, C, H, W, OC, KH, KW, pad, stride */
        {1, 1, 5, 7, 3, 3, 3, 1, 1},  /* N = 1, C = 1, odd sides */
        {3, 2, 9, 6, 4, 3, 3, 0, 2},  /* no padding, stride 2 */
        {2, 3, 7, 5, 5, 3, 3, 1, 2},  /* padding and stride 2 on odd sides */
        {4, 5, 6, 6, 2, 1, 1, 0, 1},  /* 1×1 */
        {2, 4, 5, 5, 3, 1, 1, 0, 2},  /* 1×1, stride 2 */
        {1, 2, 3, 3, 1, 3, 3, 1, 1},  /* OC = 1, the kernel as large as the image */
        {2, 2, 4, 9, 3, 3, 5, 1, 1},  /* a 3×5 kernel */
        {5, 3, 8, 8, 6, 3, 3, 1, 1},  /* the models' kind of layer */
        {3, 1, 2, 2, 2, 3, 3, 1, 2},  /* an output of 1×1 */
    };
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++)
        s_conv_case(g, &shapes[k], k != 3, 100 + 10 * (uint64_t)k);
    /* the chunks of images (2^24 floats of columns each by default): the
     * 5×8×8 case's 1728 floats per image one image at a time, then two (2,
     * 2, 1), the 3×9×6 case's 144 two then one */
    static const struct {
        const char *floats;
        int shape;
    } chunks[] = {{"1728", 7}, {"3500", 7}, {"300", 1}};
    for (size_t k = 0; k < sizeof chunks / sizeof chunks[0]; k++) {
        print_message("RL_CUDA_CONV_CHUNK=%s\n", chunks[k].floats);
        setenv("RL_CUDA_CONV_CHUNK", chunks[k].floats, 1);
        s_conv_case(g, &shapes[chunks[k].shape], 1, 900 + 10 * (uint64_t)k);
    }
    unsetenv("RL_CUDA_CONV_CHUNK");

    /* max pooling: odd sides, window 2 and 3, ties (values on a coarse grid) */
    static const int pools[][5] = {{1, 1, 5, 7, 2}, {2, 3, 9, 6, 2}, {3, 2, 7, 7, 3}, {1, 1, 2, 2, 2}, {2, 2, 4, 5, 2}};
    for (size_t k = 0; k < sizeof pools / sizeof pools[0]; k++) {
        const int N = pools[k][0], C = pools[k][1], H = pools[k][2], W = pools[k][3], q = pools[k][4];
        const int64_t ni = (int64_t)N * C * H * W, no = (int64_t)N * C * (H / q) * (W / q);
        print_message("maxpool2d N %d C %d %dx%d window %d\n", N, C, H, W, q);
        float *x = malloc(sizeof(float) * (size_t)ni), *y = malloc(sizeof(float) * (size_t)no);
        float *dy = malloc(sizeof(float) * (size_t)no), *dx = malloc(sizeof(float) * (size_t)ni);
        int32_t *arg = malloc(sizeof(int32_t) * (size_t)no), *harg = malloc(sizeof(int32_t) * (size_t)no);
        rl_parity_fill(x, ni, 300 + k, 1.0f, 0.0f);
        for (int64_t i = 0; i < ni; i++)
            x[i] = roundf(x[i] * 2.0f) / 2.0f; /* ties */
        rl_parity_fill(dy, no, 310 + k, 1.0f, 0.0f);
        rl_parity_fill(dx, ni, 320 + k, 1.0f, 0.0f);
        float *gx = s_up(x, sizeof(float) * (size_t)ni), *gy = s_up(NULL, sizeof(float) * (size_t)no);
        float *gdy = s_up(dy, sizeof(float) * (size_t)no), *gdx = s_up(dx, sizeof(float) * (size_t)ni);
        int32_t *garg = s_up(NULL, sizeof(int32_t) * (size_t)no);
        rl_maxpool2d_forward(y, arg, x, N, C, H, W, q);
        g->maxpool2d_forward(gy, garg, gx, N, C, H, W, q);
        s_check("maxpool2d_forward", gy, y, no, 0, 0);
        assert_int_equal(rl_device_copy(RL_DEVICE_CPU, harg, S_DEV, garg, sizeof(int32_t) * (size_t)no), 0);
        assert_int_equal(rl_device_sync(S_DEV), 0);
        assert_memory_equal(harg, arg, sizeof(int32_t) * (size_t)no);
        rl_maxpool2d_backward(dx, dy, arg, N, C, H, W, q);
        g->maxpool2d_backward(gdx, gdy, garg, N, C, H, W, q);
        s_check("maxpool2d_backward (accumulated)", gdx, dx, ni, 0, 0);
        rl_device_free(S_DEV, gx), rl_device_free(S_DEV, gy), rl_device_free(S_DEV, gdy);
        rl_device_free(S_DEV, gdx), rl_device_free(S_DEV, garg);
        free(x), free(y), free(dy), free(dx), free(arg), free(harg);
    }

    /* relu and the conv trunk's glue on ragged sizes */
    static const int64_t ns[] = {1, 7, 1000, 4099};
    for (size_t k = 0; k < sizeof ns / sizeof ns[0]; k++) {
        const int64_t n = ns[k];
        const size_t bytes = sizeof(float) * (size_t)n;
        float *x = malloc(bytes), *y = malloc(bytes), *dy = malloc(bytes), *dx = malloc(bytes);
        rl_parity_fill(x, n, 400 + k, 1.0f, 0.0f);
        x[0] = 0.0f; /* relu's edge: no gradient at 0 */
        rl_parity_fill(dy, n, 410 + k, 1.0f, 0.0f);
        rl_parity_fill(dx, n, 420 + k, 1.0f, 0.0f);
        float *gx = s_up(x, bytes), *gy = s_up(NULL, bytes), *gdy = s_up(dy, bytes), *gdx = s_up(dx, bytes);
        rl_relu_forward(y, x, n);
        g->relu_forward(gy, gx, n);
        s_check("relu_forward", gy, y, n, 0, 0);
        rl_relu_backward(dx, dy, x, n);
        g->relu_backward(gdx, gdy, gx, n);
        s_check("relu_backward (accumulated)", gdx, dx, n, 0, 0);
        rl_device_free(S_DEV, gx), rl_device_free(S_DEV, gy), rl_device_free(S_DEV, gdy), rl_device_free(S_DEV, gdx);
        free(x), free(y), free(dy), free(dx);
    }
    static const int64_t planes_hw[][2] = {{1, 1}, {3, 7}, {6, 100}, {2, 3000}, {37, 16}};
    for (size_t k = 0; k < sizeof planes_hw / sizeof planes_hw[0]; k++) {
        const int64_t pl = planes_hw[k][0], hw = planes_hw[k][1], n = pl * hw;
        float *x = malloc(sizeof(float) * (size_t)n), *a = malloc(sizeof(float) * (size_t)pl);
        float *sm = malloc(sizeof(float) * (size_t)pl);
        rl_parity_fill(x, n, 500 + k, 1.0f, 0.5f);
        rl_parity_fill(a, pl, 510 + k, 1.0f, 0.0f);
        float *gx = s_up(x, sizeof(float) * (size_t)n), *ga = s_up(a, sizeof(float) * (size_t)pl);
        float *gs = s_up(NULL, sizeof(float) * (size_t)pl);
        rl_plane_add(x, a, pl, hw);
        g->plane_add(gx, ga, pl, hw);
        s_check("plane_add", gx, x, n, 0, 0);
        rl_plane_sum(sm, x, pl, hw);
        g->plane_sum(gs, gx, pl, hw);
        s_check("plane_sum", gs, sm, pl, 1e-6, 1e-6);
        rl_device_free(S_DEV, gx), rl_device_free(S_DEV, ga), rl_device_free(S_DEV, gs);
        free(x), free(a), free(sm);
    }
    static const int ups[][3] = {{1, 2, 2}, {3, 4, 6}, {2, 8, 4}, {5, 6, 10}};
    for (size_t k = 0; k < sizeof ups / sizeof ups[0]; k++) {
        const int64_t pl = ups[k][0];
        const int h = ups[k][1], w = ups[k][2];
        const int64_t nb = pl * h * w, ns2 = pl * (h / 2) * (w / 2);
        float *a = malloc(sizeof(float) * (size_t)nb), *s = malloc(sizeof(float) * (size_t)ns2);
        rl_parity_fill(a, nb, 600 + k, 1.0f, 0.0f);
        rl_parity_fill(s, ns2, 610 + k, 1.0f, 0.0f);
        float *ga = s_up(a, sizeof(float) * (size_t)nb), *gs = s_up(s, sizeof(float) * (size_t)ns2);
        rl_upsample2x_add(a, s, pl, h, w);
        g->upsample2x_add(ga, gs, pl, h, w);
        s_check("upsample2x_add", ga, a, nb, 0, 0);
        rl_upsample2x_backward(s, a, pl, h, w);
        g->upsample2x_backward(gs, ga, pl, h, w);
        s_check("upsample2x_backward (accumulated)", gs, s, ns2, 0, 0);
        rl_device_free(S_DEV, ga), rl_device_free(S_DEV, gs);
        free(a), free(s);
    }
}

/* ---- image_cnn ------------------------------------------------------------------------------------- */

static const char s_cnn_yaml[] = "model: {type: image_cnn, channels: 2, height: 9, width: 10, conv1_channels: 3, "
                                 "conv2_channels: 4, hidden_size: 6, num_classes: 4, init_from: ''}\n";

static void test_image_cnn_on_cuda(void **state)
{
    (void)state;
    S_NEED_GPU();
    enum { B = 7, D = 180, F = 6 };
    rl_model *cpu = rl_parity_build(s_cnn_yaml, 4), *gpu = rl_parity_build(s_cnn_yaml, 4);
    if (rl_model_to_device(gpu, S_DEV))
        fail_msg("%s", rl_error_message());
    assert_int_equal(rl_model_device(gpu), S_DEV);
    rl_dataproto *in = rl_dataproto_new();
    float *x = rl_tensor_data(rl_parity_new(in, RL_IC_IMAGES, RL_F32, 2, (int64_t[]){B, D}));
    rl_parity_fill(x, B * D, 61, 0.5f, 0.0f);
    int32_t *y = rl_tensor_data(rl_parity_new(in, RL_IC_LABELS, RL_I32, 1, (int64_t[]){B}));
    for (int b = 0; b < B; b++)
        y[b] = (b * 3) % 4;
    float pc[B * 4], pg[B * 4], fc[B * F], fg[B * F];
    assert_int_equal(rl_image_model_probs(cpu, B, x, pc), 0);
    if (rl_image_model_probs(gpu, B, x, pg))
        fail_msg("%s", rl_error_message());
    rl_parity_close("probs", pg, pc, B * 4, 1e-6, 1e-4);
    assert_int_equal(rl_image_cnn_features(cpu, B, x, fc), 0);
    if (rl_image_cnn_features(gpu, B, x, fg))
        fail_msg("%s", rl_error_message());
    rl_parity_close("features", fg, fc, B * F, 1e-5, 1e-4);
    static const char *const names[] = {"logp", NULL};
    rl_parity_train(S_DEV, cpu, gpu, in, RL_Q_BIT(RL_Q_LOGP), 3, names, "image_cnn: logp (micro-batch 3)");
    /* back to the CPU: the same parameters, and it runs there */
    float *h = rl_parity_host(gpu, 0);
    assert_int_equal(rl_model_to_device(gpu, RL_DEVICE_CPU), 0);
    assert_memory_equal(rl_model_params(gpu), h, sizeof(float) * (size_t)rl_model_num_params(gpu));
    assert_int_equal(rl_image_model_probs(gpu, B, x, pg), 0);
    free(h);
    rl_dataproto_free(in);
    rl_model_free(cpu);
    rl_model_free(gpu);
}

/* ---- clip_flow (conv trunk) ------------------------------------------------------------------------ */

static const char s_cfc_yaml[] =
    "model: {type: clip_flow, trunk: conv, conv_channels: 3, frames: 2, channels: 1, height: 8, width: 4, "
    "num_prompts: 3, hidden_size: 6, num_layers: 0, time_embed_dim: 4, prediction: x0, null_prompt: true, "
    "cfg_dropout: 0, guidance: %s, init_from: ''}\n";

enum { CC_B = 5, CC_D = 64, CC_N = 4 };

static rl_model *s_cfc_model(const char *guidance)
{
    char yaml[512];
    snprintf(yaml, sizeof yaml, s_cfc_yaml, guidance);
    return rl_parity_build(yaml, 5);
}

static rl_dataproto *s_cfc_sample_in(void)
{
    rl_dataproto *dp = rl_dataproto_new();
    int32_t *ids = rl_tensor_data(rl_parity_new(dp, RL_CF_PROMPT_IDS, RL_I32, 1, (int64_t[]){CC_B}));
    int64_t *ns = rl_tensor_data(rl_parity_new(dp, RL_CF_NOISE_SEEDS, RL_I64, 1, (int64_t[]){CC_B}));
    int64_t *rs = rl_tensor_data(rl_parity_new(dp, RL_CF_ROW_SEEDS, RL_I64, 1, (int64_t[]){CC_B}));
    for (int b = 0; b < CC_B; b++) {
        ids[b] = (b + 1) % 3;
        ns[b] = 300 + b / 2;
        rs[b] = 400 + b;
    }
    return dp;
}

static void test_clip_flow_conv_on_cuda(void **state)
{
    (void)state;
    S_NEED_GPU();
    /* guidance 1.5: sampling and the chain run the doubled batch with the null prompt */
    rl_model *cpu = s_cfc_model("1.5"), *gpu = s_cfc_model("1.5");
    if (rl_model_to_device(gpu, S_DEV))
        fail_msg("%s", rl_error_message());
    assert_int_equal(rl_model_device(gpu), S_DEV);
    rl_parity_clip_flow_sample(S_DEV, cpu, gpu, s_cfc_sample_in, CC_B, CC_N, 2, "clip_flow conv, guidance 1.5");
    rl_model_free(cpu);
    rl_model_free(gpu);

    /* flow matching (the plain pass) */
    cpu = s_cfc_model("1");
    gpu = s_cfc_model("1");
    if (rl_model_to_device(gpu, S_DEV))
        fail_msg("%s", rl_error_message());
    rl_dataproto *fm = rl_dataproto_new();
    int32_t *ids = rl_tensor_data(rl_parity_new(fm, RL_CF_PROMPT_IDS, RL_I32, 1, (int64_t[]){CC_B}));
    rl_parity_fill(rl_tensor_data(rl_parity_new(fm, RL_CF_X_T, RL_F32, 2, (int64_t[]){CC_B, CC_D})), CC_B * CC_D, 71, 1.0f, 0.0f);
    float *sig = rl_tensor_data(rl_parity_new(fm, RL_CF_SIGMA, RL_F32, 1, (int64_t[]){CC_B}));
    for (int b = 0; b < CC_B; b++) {
        ids[b] = b % 4; /* the null prompt (3) included */
        sig[b] = b == 0 ? 0.01f : (float)b / (CC_B - 1); /* σ under the x0 floor in row 0 */
    }
    static const char *const names[] = {"velocity", NULL};
    rl_parity_train(S_DEV, cpu, gpu, fm, RL_Q_BIT(RL_Q_VELOCITY), 3, names, "clip_flow conv: flow matching (micro-batch 3)");
    /* back to the CPU: the same parameters, and it runs there */
    float *h = rl_parity_host(gpu, 0);
    assert_int_equal(rl_model_to_device(gpu, RL_DEVICE_CPU), 0);
    assert_memory_equal(rl_model_params(gpu), h, sizeof(float) * (size_t)rl_model_num_params(gpu));
    rl_dataproto *o = NULL;
    rl_model_pass pass = {.micro_batch = 0};
    assert_int_equal(rl_model_forward(gpu, fm, RL_Q_BIT(RL_Q_VELOCITY), &pass, &o), 0);
    rl_dataproto_free(o);
    free(h);
    rl_dataproto_free(fm);
    rl_model_free(cpu);
    rl_model_free(gpu);
}

/* ---- without a GPU ---------------------------------------------------------------------------------- */

/* Each conv kind's move is refused naming it, and the model stays on the CPU. */
static void test_conv_kinds_refused_without_gpu(void **state)
{
    (void)state;
    if (s_gpu()) {
        print_message("skip: a GPU is visible (the parity tests run instead)\n");
        skip();
        return;
    }
    char cfc[512];
    snprintf(cfc, sizeof cfc, s_cfc_yaml, "1");
    const char *const yamls[2] = {s_cnn_yaml, cfc};
    static const char *const kinds[2] = {"image_cnn", "clip_flow"};
    for (int k = 0; k < 2; k++) {
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
        cmocka_unit_test(test_conv_kinds_refused_without_gpu),
        cmocka_unit_test(test_conv_kernels_cuda),
        cmocka_unit_test(test_image_cnn_on_cuda),
        cmocka_unit_test(test_clip_flow_conv_on_cuda),
    };
    return cmocka_run_group_tests_name("nn_conv_cuda", tests, NULL, NULL);
}
