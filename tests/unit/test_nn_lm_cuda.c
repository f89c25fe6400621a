/* test_nn_lm_cuda.c — the Llama/Qwen2 transformer with its parameters,
 * gradients and activations on the GPU (rl_lm_new(cfg, RL_DEVICE_CUDA)),
 * against the same model on the CPU: per-token log-probs, entropies and
 * values of a padded batch (left and right padding, a row of one real
 * token), then every gradient of a loss on all three, then the
 * micro-batched forward/backward, fp32 both ways.
 *
 * Skips (with the reason) without a CUDA build or a visible GPU. Without a
 * GPU it still checks that a CUDA model is refused with a message instead
 * of crashing. Tolerance: atol 2e-4 + rtol 1e-3 on outputs and gradients
 * (sums over the vocabulary, the sequence and the hidden size run in
 * another order on the GPU; TF32 is off). */
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
#include "common/nn/models/lm/generate.h"
#include "common/nn/models/lm/transformer.h"
#include "rlrt/error.h"

static rl_lm_config s_cfg(int tie, int qkv_bias, int value_head)
{
    rl_lm_config c = {.vocab_size = 97, .hidden_size = 64, .intermediate_size = 96,
                      .num_layers = 2, .num_heads = 4, .num_kv_heads = 2, .max_seq_len = 32,
                      .rope_theta = 10000.0f, .rms_norm_eps = 1e-6f,
                      .tie_word_embeddings = tie, .qkv_bias = qkv_bias, .value_head = value_head,
                      .bos_token_id = -1, .eos_token_id = -1, .pad_token_id = -1};
    return c;
}

static int s_gpu(void)
{
    return rl_device_count(RL_DEVICE_CUDA) > 0;
}

/* Without a GPU (or without CUDA) the model is refused with a message. */
static void test_lm_cuda_refused_without_gpu(void **state)
{
    (void)state;
    if (s_gpu()) {
        print_message("skip: a GPU is visible (the parity tests run instead)\n");
        skip();
        return;
    }
    rl_lm_config c = s_cfg(0, 1, 1);
    rl_lm *m = rl_lm_new(&c, RL_DEVICE_CUDA);
    assert_null(m);
    assert_int_equal(rl_error_code(), RL_EUNSUPPORTED);
}

static void s_close(const char *what, const float *got, const float *want, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        if (!(fabsf(got[i] - want[i]) <= 2e-4f + 1e-3f * fabsf(want[i])))
            fail_msg("%s[%lld]: cuda %.7g vs cpu %.7g", what, (long long)i, got[i], want[i]);
}

typedef struct {
    const float *wl, *we, *wv; /* (B, T) loss weights of logp, entropy, values */
} s_loss;

/* L = Σ wl·logp + we·entropy + wv·values over the micro-batch rows. */
static int s_loss_fn(void *ctx, int row0, int B, int T, const float *logp, const float *entropy,
                     const float *values, float *dlogp, float *dentropy, float *dvalues,
                     double *loss)
{
    const s_loss *w = ctx;
    for (int64_t i = 0; i < (int64_t)B * T; i++) {
        int64_t g = (int64_t)row0 * T + i;
        *loss += w->wl[g] * logp[i] + w->we[g] * entropy[i] + (values ? w->wv[g] * values[i] : 0);
        dlogp[i] = w->wl[g];
        dentropy[i] = w->we[g];
        if (dvalues)
            dvalues[i] = w->wv[g];
    }
    return 0;
}

static void s_parity(rl_lm_config c, uint64_t seed)
{
    enum { B = 4, T = 11 };
    rl_lm *cpu = rl_lm_new(&c, RL_DEVICE_CPU), *gpu = rl_lm_new(&c, RL_DEVICE_CUDA);
    if (!gpu)
        fail_msg("%s", rl_error_message());
    assert_non_null(cpu);
    assert_int_equal(rl_lm_device(gpu), RL_DEVICE_CUDA);
    int64_t P = rl_lm_num_params(cpu);
    assert_int_equal(rl_lm_init_random(cpu, seed, 0.1f), 0);
    assert_int_equal(rl_device_copy(RL_DEVICE_CUDA, rl_lm_params(gpu), RL_DEVICE_CPU,
                                    rl_lm_params(cpu), sizeof(float) * (size_t)P),
                     0);
    /* rows: full; left padding; right padding; one real token */
    int32_t tok[B * T];
    uint8_t mask[B * T];
    rl_rng g;
    rl_rng_init(&g, seed, 9);
    for (int i = 0; i < B * T; i++) {
        int b = i / T, t = i % T;
        tok[i] = (int32_t)rl_rng_below(&g, (uint64_t)c.vocab_size);
        mask[i] = b == 0 ? 1 : b == 1 ? t >= 4 : b == 2 ? t < 7 : t == 5;
    }
    float out[2][3][B * T];
    rl_lm *ms[2] = {cpu, gpu};
    for (int k = 0; k < 2; k++)
        assert_int_equal(rl_lm_forward(ms[k], B, T, tok, mask, 0.7f, out[k][0], out[k][1],
                                       c.value_head ? out[k][2] : NULL),
                         0);
    s_close("logp", out[1][0], out[0][0], B * T);
    s_close("entropy", out[1][1], out[0][1], B * T);
    if (c.value_head)
        s_close("values", out[1][2], out[0][2], B * T);

    /* every gradient of a loss on all three outputs */
    float wl[B * T], we[B * T], wv[B * T];
    for (int i = 0; i < B * T; i++) {
        wl[i] = rl_rng_normal(&g);
        we[i] = rl_rng_normal(&g);
        wv[i] = rl_rng_normal(&g);
    }
    for (int k = 0; k < 2; k++) {
        rl_lm_zero_grad(ms[k]);
        assert_int_equal(rl_lm_backward(ms[k], wl, we, c.value_head ? wv : NULL), 0);
    }
    float *gc = rl_lm_grads(cpu), *gg = malloc(sizeof(float) * (size_t)P);
    assert_int_equal(rl_device_copy(RL_DEVICE_CPU, gg, RL_DEVICE_CUDA, rl_lm_grads(gpu),
                                    sizeof(float) * (size_t)P),
                     0);
    const rl_param_manifest *man = rl_lm_manifest(cpu);
    for (int i = 0; i < man->count; i++)
        s_close(man->views[i].name, gg + man->views[i].offset, gc + man->views[i].offset,
                man->views[i].numel);

    /* micro-batches of 3 and 1 rows, accumulated: the same sum */
    s_loss w = {wl, we, wv};
    double lc = 0, lg = 0;
    for (int k = 0; k < 2; k++)
        rl_lm_zero_grad(ms[k]);
    assert_int_equal(rl_lm_forward_backward(cpu, B, T, tok, mask, 0.7f, 3, s_loss_fn, &w, &lc), 0);
    assert_int_equal(rl_lm_forward_backward(gpu, B, T, tok, mask, 0.7f, 3, s_loss_fn, &w, &lg), 0);
    assert_true(fabs(lc - lg) <= 1e-3 + 1e-4 * fabs(lc));
    assert_int_equal(rl_device_copy(RL_DEVICE_CPU, gg, RL_DEVICE_CUDA, rl_lm_grads(gpu),
                                    sizeof(float) * (size_t)P),
                     0);
    s_close("micro-batched grads", gg, gc, P);

    /* generation stays on the CPU: refused, not wrong */
    rl_lm_sampling sp;
    rl_lm_sampling_default(&sp);
    int32_t gen[2 * 4];
    int lens[2], plen[2] = {T, T};
    uint64_t seeds[2] = {1, 2};
    assert_int_equal(rl_lm_generate(gpu, 2, T, tok, plen, seeds, &sp, gen, NULL, NULL, lens),
                     RL_EUNSUPPORTED);
    free(gg);
    rl_lm_free(cpu);
    rl_lm_free(gpu);
}

static void test_lm_cuda_parity(void **state)
{
    (void)state;
    if (!s_gpu()) {
        print_message("skip: no CUDA GPU visible (or built without make CUDA=1)\n");
        skip();
        return;
    }
    s_parity(s_cfg(0, 1, 1), 3); /* Qwen2-like: QKV bias, untied head, value head */
    s_parity(s_cfg(1, 0, 0), 4); /* Llama-like: tied embeddings */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lm_cuda_refused_without_gpu),
        cmocka_unit_test(test_lm_cuda_parity),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
