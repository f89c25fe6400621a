/* bench_gpu_train.c — rlrt's side of `make bench-gpu` (bench/bench_gpu.sh puts
 * PyTorch's figures from bench/bench_gpu_torch.py beside these, same GPU,
 * same run).
 *
 * Model: the Qwen2.5-0.5B shape (hidden 896, RL_BENCH_GPU_LAYERS layers
 * (default 24), 14 heads, 2 KV heads, intermediate 4864, vocab 151936, QKV
 * bias, tied embeddings, RoPE theta 1e6; RL_BENCH_GPU_HIDDEN, _INTERMEDIATE
 * and _VOCAB shrink it for a dry run), random init, parameters,
 * gradients, AdamW moments and activations on the GPU (rl_lm_new(cfg,
 * RL_DEVICE_CUDA)), in each precision of RL_BENCH_GPU_PRECISION (fp32, bf16
 * or both, the default; one after the other, each with its own model):
 * fp32 with TF32 off, and bf16 (model.precision bf16: bf16 GEMMs with fp32
 * accumulation, fp32 master weights and AdamW, what torch's bf16 autocast arm
 * does).
 * A step: forward over RL_BENCH_GPU_B × RL_BENCH_GPU_T tokens (default
 * 8 × 1024; RL_BENCH_GPU_MICRO rows per micro-batch, default all), the mean
 * next-token NLL, backward, AdamW over the flat buffer (rl_adamw_new_on: the actor's optimiser, moments on the GPU)
 * (lr 1e-5, betas 0.9/0.999, eps 1e-8, weight decay 0.01: torch's side uses
 * the same). Two warm-up steps, then RL_BENCH_GPU_STEPS timed (default 5;
 * one when a warm-up step took over 10 s, so that a slow engine still fits
 * the device run's minutes).
 *
 * Prints `bench: <name> = <value>`:
 *   rlrt_gpu_params, rlrt_gpu_train_tokens_per_s_<p>, rlrt_gpu_train_step_s_<p>,
 *   rlrt_gpu_train_tflops_<p> (model FLOPs: 6·N·tokens + 12·L·d·T·tokens),
 *   rlrt_gpu_train_loss_last_<p> for p = fp32, bf16; for fp32
 *   rlrt_gpu_mem_gib_<purpose> and rlrt_gpu_mem_peak_gib, for bf16
 *   rlrt_gpu_bf16_mem_gib_<purpose> and rlrt_gpu_bf16_mem_peak_gib
 *   (rl_device_memory_get at the arm's end, before its model is freed; the
 *   peak is since the program started).
 * The attention (issue 39's fused kernels): unless RL_BENCH_GPU_FLASH=0, the
 * attention pair alone at the bench's shape on both CUDA paths
 * (rlrt_gpu_attention_ms_cublas / _flash, rlrt_gpu_attention_flash_speedup,
 * the largest difference between the paths' results; then the bf16 pair's
 * tensor-core kernels: rlrt_gpu_attention_ms_bf16, rlrt_gpu_attention_bf16_speedup
 * over the float32 fused kernels), and the bf16 arm once more with
 * RL_CUDA_ATTENTION=cublas and once with flash32 (the float32 fused kernels
 * in bf16; RL_BENCH_GPU_FLASH=2: the fp32 arm with cublas too), rows
 * suffixed _cublas / _flash32 and rlrt_gpu_train_flash_vs_<path>_<p> = the
 * plain arm's tokens/s (the default attention) over that arm's.
 * After its timed steps each arm runs one more step with the per-op timing on
 * (RL_BENCH_GPU_PROFILE=0: not) and prints rlrt_gpu_prof_<p>_<entry>_ms_per_step
 * for it and rlrt_gpu_prof_<p>_top, its six longest entries.
 * With RL_CUDA_PROFILE=1 each arm instead prints where its timed steps went,
 * per kernel-table entry: rlrt_gpu_prof_<p>_<entry>_ms_per_step
 * (rl_device_profile_take; the events add a little to the step time).
 * Exits 77 (skipped) without a CUDA build or a visible GPU.
 * RL_BENCH_GPU_DEVICE=cpu runs the same on the CPU table: a smoke test of
 * this program with small sizes on a machine without a GPU. */
#include "common/nn/engine/device.h"
#include "common/nn/engine/optim.h"
#include "common/nn/models/lm/generate.h"
#include "common/nn/models/lm/transformer.h"
#include "rlrt/error.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double s_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int s_env(const char *name, int dflt)
{
    const char *s = getenv(name);
    return s && *s ? atoi(s) : dflt;
}

/* the model's shape: Qwen2.5-0.5B's unless RL_BENCH_GPU_HIDDEN,
 * RL_BENCH_GPU_INTERMEDIATE or RL_BENCH_GPU_VOCAB say otherwise (tiny
 * sizes for a dry run on the host emulation, tests/gpu_dryrun.sh); 14
 * heads over 2 KV heads always, so the head is hidden / 14 */
static struct {
    int hidden, inter, vocab;
} s_shape = {896, 4864, 151936};

typedef struct {
    double scale; /* 1 / the number of predicted tokens of the whole batch */
    int T;
} s_nll;

/* L = −Σ logp / (B·(T − 1)) over the positions that predict a token
 * (logp[b, t] is the log-prob of token t + 1; the last position predicts
 * nothing). */
static int s_nll_fn(void *ctx, int row0, int B, int T, const float *logp, const float *entropy,
                    const float *values, float *dlogp, float *dentropy, float *dvalues,
                    double *loss)
{
    (void)row0, (void)entropy, (void)values, (void)dentropy, (void)dvalues;
    const s_nll *w = ctx;
    for (int b = 0; b < B; b++)
        for (int t = 0; t + 1 < T && t + 1 < w->T; t++) {
            *loss -= w->scale * logp[(size_t)b * T + t];
            dlogp[(size_t)b * T + t] = (float)-w->scale;
        }
    return RL_OK;
}

/* One arm: a fresh model in precision `prec`, two warm-up steps and the
 * timed ones; prints its figures. 0, or 1 with the message printed. */
static int s_arm(rl_device dev, rl_precision prec, const char *tag, int B, int T, int L, int steps,
                 int micro, double *tps)
{
    char pn[48];
    snprintf(pn, sizeof pn, "%s%s", rl_precision_name(prec), tag);
    rl_lm_config c = {.vocab_size = s_shape.vocab, .hidden_size = s_shape.hidden,
                      .intermediate_size = s_shape.inter, .num_layers = L, .num_heads = 14,
                      .num_kv_heads = 2, .max_seq_len = T,
                      .rope_theta = 1e6f, .rms_norm_eps = 1e-6f, .tie_word_embeddings = 1,
                      .qkv_bias = 1, .value_head = 0, .bos_token_id = -1, .eos_token_id = -1,
                      .pad_token_id = -1};
    rl_lm *m = rl_lm_new(&c, dev);
    if (!m || rl_lm_set_precision(m, prec) || rl_lm_init_random(m, 1, 0.02f)) {
        fprintf(stderr, "bench_gpu_train: model (%s): %s\n", pn, rl_error_message());
        rl_lm_free(m);
        return 1;
    }
    const int64_t P = rl_lm_num_params(m);
    rl_adamw_config ac = rl_adamw_config_default();
    ac.beta1 = 0.9, ac.beta2 = 0.999, ac.eps = 1e-8, ac.weight_decay = 0.01;
    /* the actor's optimiser object, its moments on the model's device */
    rl_adamw *opt = rl_adamw_new_on(&ac, rl_lm_manifest(m), 0, P, dev);
    int32_t *tok = malloc(sizeof(int32_t) * (size_t)B * T);
    uint8_t *mask = malloc((size_t)B * T);
    int rc = 1;
    if (!opt || !tok || !mask) {
        fprintf(stderr, "bench_gpu_train: memory: %s\n", rl_error_message());
        goto done;
    }
    uint64_t x = 0x9e3779b97f4a7c15ull;
    for (size_t i = 0; i < (size_t)B * T; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        tok[i] = (int32_t)(x % (uint64_t)c.vocab_size);
        mask[i] = 1;
    }
    s_nll w = {.scale = 1.0 / ((double)B * (T - 1)), .T = T};
    double t0 = 0, loss = 0, tw = s_now();
    int timed = steps;
    for (int s = 0; s < timed + 2; s++) {
        if (s == 1 || s == 2) {
            if (rl_device_sync(dev))
                break;
            if (s == 2 && s_now() - tw > 10.0)
                timed = 1;
            if (s == 2) { /* the per-op profile counts the timed steps only */
                rl_device_prof drop[1];
                rl_device_profile_take(dev, drop, 1);
            }
            t0 = tw = s_now();
        }
        loss = 0;
        rl_lm_zero_grad(m);
        if (rl_lm_forward_backward(m, B, T, tok, mask, 1.0f, micro, s_nll_fn, &w, &loss) ||
            rl_adamw_step(opt, 1e-5, rl_lm_params(m), rl_lm_grads(m))) {
            fprintf(stderr, "bench_gpu_train: %s step %d: %s\n", pn, s, rl_error_message());
            goto done;
        }
    }
    if (rl_device_sync(dev)) {
        fprintf(stderr, "bench_gpu_train: %s: %s\n", pn, rl_error_message());
        goto done;
    }
    double dt = (s_now() - t0) / timed, tokens = (double)B * T;
    rl_device_prof prof[48];
    int np = rl_device_profile_take(dev, prof, 48);
    for (int i = 0; i < np; i++) /* RL_CUDA_PROFILE=1: where the step goes */
        printf("bench: rlrt_gpu_prof_%s_%s_ms_per_step = %.2f (%ld calls)\n", pn, prof[i].name,
               prof[i].ms / timed, prof[i].calls / timed);
    double flops = 6.0 * (double)P * tokens + 12.0 * L * c.hidden_size * (double)T * tokens;
    printf("bench: rlrt_gpu_params = %lld\n", (long long)P);
    printf("bench: rlrt_gpu_train_tokens_per_s_%s = %.1f\n", pn, tokens / dt);
    printf("bench: rlrt_gpu_train_step_s_%s = %.4f\n", pn, dt);
    printf("bench: rlrt_gpu_train_steps_timed_%s = %d\n", pn, timed);
    printf("bench: rlrt_gpu_train_tflops_%s = %.2f\n", pn, flops / dt / 1e12);
    printf("bench: rlrt_gpu_train_loss_last_%s = %.4f\n", pn, loss);
    *tps = tokens / dt;
    char mp[48];
    snprintf(mp, sizeof mp, "%s%s", prec == RL_PRECISION_BF16 ? "bf16_" : "", *tag ? tag + 1 : "");
    if (*tag)
        strcat(mp, "_");
    rl_device_memory mem;
    rl_device_memory_get(dev, &mem);
    for (int i = 0; i < RL_MEM_COUNT; i++)
        printf("bench: rlrt_gpu_%smem_gib_%s = %.2f\n", mp, rl_mem_purpose_name((rl_mem_purpose)i),
               mem.bytes[i] / 1073741824.0);
    printf("bench: rlrt_gpu_%smem_peak_gib = %.2f\n", mp, mem.peak / 1073741824.0);
    /* where a step goes, without slowing the timed ones: one more step with
     * the per-op timing on (RL_BENCH_GPU_PROFILE=0: not; with
     * RL_CUDA_PROFILE=1 the timed steps were profiled above instead) */
    if (dev == RL_DEVICE_CUDA && s_env("RL_BENCH_GPU_PROFILE", 1) && !np &&
        !rl_device_profile_set(dev, 1)) {
        loss = 0;
        rl_lm_zero_grad(m);
        int prc = rl_lm_forward_backward(m, B, T, tok, mask, 1.0f, micro, s_nll_fn, &w, &loss);
        if (!prc)
            prc = rl_adamw_step(opt, 1e-5, rl_lm_params(m), rl_lm_grads(m));
        if (!prc)
            prc = rl_device_sync(dev);
        np = prc ? 0 : rl_device_profile_take(dev, prof, 48);
        rl_device_profile_set(dev, 0);
        if (prc)
            fprintf(stderr, "bench_gpu_train: %s profiled step: %s\n", pn, rl_error_message());
        double total = 0;
        for (int i = 0; i < np; i++)
            total += prof[i].ms;
        for (int i = 0; i < np; i++)
            printf("bench: rlrt_gpu_prof_%s_%s_ms_per_step = %.2f (%ld calls, %.1f%%; one profiled step)\n",
                   pn, prof[i].name, prof[i].ms, prof[i].calls, total > 0 ? 100.0 * prof[i].ms / total : 0.0);
        printf("bench: rlrt_gpu_prof_%s_top = ", pn);
        for (int i = 0; i < np && i < 6; i++)
            printf("%s%s %.1f ms", i ? "; " : "", prof[i].name, prof[i].ms);
        printf("\n");
    }
    rc = 0;
done:
    rl_adamw_free(opt);
    rl_lm_free(m);
    free(tok);
    free(mask);
    return rc;
}

/* Generation in precision `prec`: GEN_PROMPTS random prompts of 32 tokens,
 * GEN_TOKENS sampled tokens each (temperature 1, no top-p/top-k, no stop
 * token), the KV cache on the device and the sampler on the host, after a
 * warm-up of 8 tokens (fewer when GEN_TOKENS is); prints tokens/s. 0, or 1 with the message printed. */
static int s_gen_arm(rl_device dev, rl_precision prec, int L, int prompts, int tokens)
{
    const char *pn = rl_precision_name(prec);
    enum { S_P = 32 };
    rl_lm_config c = {.vocab_size = s_shape.vocab, .hidden_size = s_shape.hidden,
                      .intermediate_size = s_shape.inter, .num_layers = L, .num_heads = 14,
                      .num_kv_heads = 2, .max_seq_len = S_P + tokens,
                      .rope_theta = 1e6f, .rms_norm_eps = 1e-6f, .tie_word_embeddings = 1,
                      .qkv_bias = 1, .value_head = 0, .bos_token_id = -1, .eos_token_id = -1,
                      .pad_token_id = -1};
    rl_lm *m = rl_lm_new(&c, dev);
    int32_t *pr = malloc(sizeof(int32_t) * (size_t)prompts * S_P);
    int32_t *out = malloc(sizeof(int32_t) * (size_t)prompts * tokens);
    int *plen = malloc(sizeof(int) * (size_t)prompts), *lens = malloc(sizeof(int) * (size_t)prompts);
    int rc = 1;
    if (!m || !pr || !out || !plen || !lens || rl_lm_set_precision(m, prec) || rl_lm_init_random(m, 1, 0.02f)) {
        fprintf(stderr, "bench_gpu_train: generation model (%s): %s\n", pn, rl_error_message());
        goto done;
    }
    uint64_t x = 0x2545f4914f6cdd1dull;
    for (int i = 0; i < prompts * S_P; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        pr[i] = (int32_t)(x % (uint64_t)c.vocab_size);
    }
    for (int b = 0; b < prompts; b++)
        plen[b] = S_P;
    rl_lm_sampling sp;
    rl_lm_sampling_default(&sp);
    sp.seed = 2;
    /* out and the model's max_seq_len hold `tokens` new tokens: the warm-up
     * never asks for more (the dry run's GEN_TOKENS is under 8) */
    sp.max_new_tokens = tokens < 8 ? tokens : 8;
    if (rl_lm_generate(m, prompts, S_P, pr, plen, NULL, &sp, out, NULL, NULL, lens)) {
        fprintf(stderr, "bench_gpu_train: generate (%s, warm-up): %s\n", pn, rl_error_message());
        goto done;
    }
    sp.max_new_tokens = tokens;
    double t0 = s_now();
    if (rl_lm_generate(m, prompts, S_P, pr, plen, NULL, &sp, out, NULL, NULL, lens) ||
        rl_device_sync(dev)) {
        fprintf(stderr, "bench_gpu_train: generate (%s): %s\n", pn, rl_error_message());
        goto done;
    }
    double dt = s_now() - t0, n = 0;
    for (int b = 0; b < prompts; b++)
        n += lens[b];
    printf("bench: rlrt_gpu_gen_tokens_per_s_%s = %.1f\n", pn, n / dt);
    printf("bench: rlrt_gpu_gen_s_%s = %.3f\n", pn, dt);
    rc = 0;
done:
    rl_lm_free(m);
    free(pr);
    free(out);
    free(plen);
    free(lens);
    return rc;
}

/* The attention pair alone at the bench's shape (B × T, 14 heads over 2 kv
 * heads, head hidden / 14 = 64, no mask), forward then backward, on each CUDA path
 * (RL_CUDA_ATTENTION=cublas, then flash), then the bf16 pair: 1 warm-up and
 * `reps` timed, ms per pair; the outputs and gradients compared with the
 * float32 fused kernels' (largest absolute difference). Prints
 * rlrt_gpu_attention_ms_<path> and the ratios rlrt_gpu_attention_flash_speedup
 * (cuBLAS ms ÷ flash ms) and rlrt_gpu_attention_bf16_speedup (flash ms ÷ bf16
 * ms). 0, or 1. */
static int s_attention_arm(rl_device dev, int B, int T, int reps)
{
    const rl_nn_ops *o = rl_nn_ops_get(dev);
    const int H = 14, KH = 2, hd = s_shape.hidden / 14;
    size_t nq = (size_t)B * T * H * hd, nk = (size_t)B * T * KH * hd, nl = (size_t)B * H * T;
    size_t sz[9] = {nq, nk, nk, nq, nq, nl, nq, nk, nk}; /* q k v dout out lse dq dk dv */
    float *d[9] = {0}, *h = malloc(sizeof(float) * nq), *keep[3][5] = {{0}};
    double ms[3] = {0, 0, 0}, diff = 0, diff16 = 0;
    int rc = 1;
    for (int i = 0; i < 9; i++)
        if (!(d[i] = rl_device_alloc(dev, sizeof(float) * sz[i])))
            goto done;
    uint64_t x = 0x853c49e6748fea9bull;
    for (int i = 0; i < 4; i++) { /* q, k, v, dout: uniform in [-1, 1) */
        for (size_t j = 0; j < sz[i]; j++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            h[j] = (float)((x >> 11) * (1.0 / 9007199254740992.0)) * 2.0f - 1.0f;
        }
        if (rl_device_copy(dev, d[i], RL_DEVICE_CPU, h, sizeof(float) * sz[i]))
            goto done;
    }
    /* cuBLAS and the float32 fused kernels, then the bf16 pair (tensor cores) */
    const char *path[3] = {"cublas", "flash", "flash"};
    for (int p = 0; p < 3; p++) {
        setenv("RL_CUDA_ATTENTION", path[p], 1);
        int (*fwd)(float *, float *, const float *, const float *, const float *, const uint8_t *, int, int,
                   int, int, int) = p == 2 ? o->attention_forward_bf16 : o->attention_forward;
        int (*bwd)(float *, float *, float *, const float *, const float *, const float *, const float *,
                   const float *, const float *, const uint8_t *, int, int, int, int, int) =
            p == 2 ? o->attention_backward_bf16 : o->attention_backward;
        double t0 = 0;
        for (int r = 0; r <= reps; r++) {
            if (r == 1) {
                if (rl_device_sync(dev))
                    goto done;
                t0 = s_now();
            }
            for (int g = 6; g < 9; g++)
                rl_device_zero(dev, d[g], sizeof(float) * sz[g]);
            if (fwd(d[4], d[5], d[0], d[1], d[2], NULL, B, T, H, KH, hd) ||
                bwd(d[6], d[7], d[8], d[3], d[4], d[5], d[0], d[1], d[2], NULL, B, T, H, KH, hd))
                goto done;
        }
        if (rl_device_sync(dev))
            goto done;
        ms[p] = (s_now() - t0) / reps * 1e3;
        for (int i = 0; i < 5; i++) { /* out lse dq dk dv of the last pair */
            int di = 4 + i;
            if (!(keep[p][i] = malloc(sizeof(float) * sz[di])) ||
                rl_device_copy(RL_DEVICE_CPU, keep[p][i], dev, d[di], sizeof(float) * sz[di]))
                goto done;
        }
    }
    for (int i = 0; i < 5; i++)
        for (size_t j = 0; j < sz[4 + i]; j++) {
            double a = keep[0][i][j], b = keep[1][i][j], c = keep[2][i][j];
            double e = a > b ? a - b : b - a, e16 = c > b ? c - b : b - c;
            if (!(e <= diff)) /* NaN counts */
                diff = e;
            if (!(e16 <= diff16))
                diff16 = e16;
        }
    printf("bench: rlrt_gpu_attention_ms_cublas = %.3f (B=%d T=%d H=%d KH=%d hd=%d, forward + backward)\n",
           ms[0], B, T, H, KH, hd);
    printf("bench: rlrt_gpu_attention_ms_flash = %.3f\n", ms[1]);
    printf("bench: rlrt_gpu_attention_flash_speedup = %.3f (cuBLAS ms / flash ms)\n",
           ms[1] > 0 ? ms[0] / ms[1] : 0.0);
    printf("bench: rlrt_gpu_attention_flash_vs_cublas_maxdiff = %.3g (out, lse, dq, dk, dv)\n", diff);
    printf("bench: rlrt_gpu_attention_ms_bf16 = %.3f (the bf16 pair: tensor-core kernels)\n", ms[2]);
    printf("bench: rlrt_gpu_attention_bf16_speedup = %.3f (float32 flash ms / bf16 ms)\n",
           ms[2] > 0 ? ms[1] / ms[2] : 0.0);
    printf("bench: rlrt_gpu_attention_bf16_vs_flash_maxdiff = %.3g (out, lse, dq, dk, dv: bf16 rounding)\n",
           diff16);
    rc = 0;
done:
    if (rc)
        fprintf(stderr, "bench_gpu_train: attention: %s\n", rl_error_message());
    unsetenv("RL_CUDA_ATTENTION");
    for (int i = 0; i < 9; i++)
        rl_device_free(dev, d[i]);
    for (int p = 0; p < 3; p++)
        for (int i = 0; i < 5; i++)
            free(keep[p][i]);
    free(h);
    return rc;
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0); /* each figure out as soon as it is known */
    const int B = s_env("RL_BENCH_GPU_B", 8), T = s_env("RL_BENCH_GPU_T", 1024);
    const int L = s_env("RL_BENCH_GPU_LAYERS", 24), steps = s_env("RL_BENCH_GPU_STEPS", 5);
    const int micro = s_env("RL_BENCH_GPU_MICRO", 0);
    s_shape.hidden = s_env("RL_BENCH_GPU_HIDDEN", 896);
    s_shape.inter = s_env("RL_BENCH_GPU_INTERMEDIATE", 4864);
    s_shape.vocab = s_env("RL_BENCH_GPU_VOCAB", 151936);
    if (B < 1 || T < 2 || L < 1 || steps < 1 || s_shape.hidden < 14 || s_shape.hidden % 14 ||
        s_shape.inter < 1 || s_shape.vocab < 2) {
        fprintf(stderr, "bench_gpu_train: bad sizes B=%d T=%d layers=%d steps=%d hidden=%d (a multiple of 14) "
                "intermediate=%d vocab=%d\n", B, T, L, steps, s_shape.hidden, s_shape.inter, s_shape.vocab);
        return 2;
    }
    const char *pname = getenv("RL_BENCH_GPU_PRECISION");
    int fp32 = 1, bf16 = 1;
    if (pname && *pname && strcmp(pname, "both") != 0) {
        fp32 = strcmp(pname, "fp32") == 0;
        bf16 = strcmp(pname, "bf16") == 0;
        if (!fp32 && !bf16) {
            fprintf(stderr, "bench_gpu_train: RL_BENCH_GPU_PRECISION=%s: expected fp32, bf16 or both\n",
                    pname);
            return 2;
        }
    }
    const char *dname = getenv("RL_BENCH_GPU_DEVICE");
    const rl_device dev = dname && strcmp(dname, "cpu") == 0 ? RL_DEVICE_CPU : RL_DEVICE_CUDA;
    if (rl_device_count(dev) < 1) {
        printf("bench_gpu_train: skipped: no CUDA device (%s)\n",
               rl_nn_ops_get(RL_DEVICE_CUDA) ? "none visible" : "a build without CUDA=1");
        return 77;
    }
    int rc = 0;
    /* RL_BENCH_GPU_FLASH: 1 (default) the bf16 arm again with the cuBLAS
     * attention, 2 both precisions, 0 none; the attention pair alone on
     * both paths unless 0 (CUDA only) */
    const int flash = dev == RL_DEVICE_CUDA ? s_env("RL_BENCH_GPU_FLASH", 1) : 0;
    if (flash)
        rc |= s_attention_arm(dev, B, T, 5);
    double tps = 0;
    const char *cur = getenv("RL_CUDA_ATTENTION");
    if (cur && *cur && strcmp(cur, "flash") != 0)
        fprintf(stderr, "bench_gpu_train: RL_CUDA_ATTENTION=%s: the plain arms use it\n", cur);
    for (int p = 0; p < 2; p++) {
        rl_precision prec = p ? RL_PRECISION_BF16 : RL_PRECISION_FP32;
        if (!(p ? bf16 : fp32))
            continue;
        rc |= s_arm(dev, prec, "", B, T, L, steps, micro, &tps);
        if (flash == 2 || (flash == 1 && p == 1)) {
            /* the same arm on the other attention paths: cuBLAS, and in bf16
             * the float32 fused kernels instead of the tensor-core ones */
            const char *other[2] = {"cublas", "flash32"};
            for (int o = 0; o < (p ? 2 : 1); o++) {
                char *save = cur ? strdup(cur) : NULL, suffix[16];
                double tps_o = 0;
                snprintf(suffix, sizeof suffix, "_%s", other[o]);
                setenv("RL_CUDA_ATTENTION", other[o], 1);
                rc |= s_arm(dev, prec, suffix, B, T, L, steps, micro, &tps_o);
                if (save)
                    setenv("RL_CUDA_ATTENTION", save, 1);
                else
                    unsetenv("RL_CUDA_ATTENTION");
                free(save);
                cur = getenv("RL_CUDA_ATTENTION");
                printf("bench: rlrt_gpu_train_flash_vs_%s_%s = %.3f (tokens/s with the default attention "
                       "/ with RL_CUDA_ATTENTION=%s)\n",
                       other[o], rl_precision_name(prec), tps_o > 0 ? tps / tps_o : 0.0, other[o]);
            }
        }
    }
    /* generation (RL_BENCH_GPU_GEN=0: off), the sizes of bench_gpu_torch.py's */
    const int gp = s_env("RL_BENCH_GPU_GEN_PROMPTS", 64), gt = s_env("RL_BENCH_GPU_GEN_TOKENS", 256);
    if (s_env("RL_BENCH_GPU_GEN", 1) && gp > 0 && gt > 0) {
        if (fp32)
            rc |= s_gen_arm(dev, RL_PRECISION_FP32, L, gp, gt);
        if (bf16)
            rc |= s_gen_arm(dev, RL_PRECISION_BF16, L, gp, gt);
    }
    return rc;
}
