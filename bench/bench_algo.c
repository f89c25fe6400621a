/* bench_algo.c — throughput of the language-model advantage estimators and of
 * the PPO loss with gradient, against a memory-bandwidth floor measured in
 * the same run.
 *
 * Floor: the bytes a function must touch (each input read once, each output
 * written once) divided by the copy bandwidth of memcpy (2 × bytes copied per
 * second, the better of a single-thread and an OpenMP-parallel copy of 64 MiB
 * blocks). ratio = floor time / measured time (1.0 = at the bandwidth
 * limit). Times are the best of RL_BENCH_REPS (default 5) runs.
 *
 * Usage: bench_algo [B T]   (default 1024 × 4096)
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <omp.h>

#include "rlrt/rlrt.h"

static double s_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static float *s_alloc(size_t n)
{
    float *p = aligned_alloc(64, ((n * sizeof(float) + 63) / 64) * 64);
    if (!p) {
        fprintf(stderr, "bench_algo: out of memory\n");
        exit(1);
    }
    return p;
}

/* Copy bandwidth in bytes/s (read + write). */
static double s_memcpy_bw(int reps)
{
    size_t n = (size_t)64 << 20;
    char *a = malloc(n), *b = malloc(n);
    if (!a || !b)
        exit(1);
    memset(a, 1, n);
    memset(b, 2, n);
    double best1 = 1e30, bestp = 1e30;
    for (int r = 0; r < reps; r++) {
        double t0 = s_now();
        memcpy(b, a, n);
        double t1 = s_now();
        if (t1 - t0 < best1)
            best1 = t1 - t0;
        int nt = omp_get_max_threads();
        size_t chunk = (n + (size_t)nt - 1) / (size_t)nt;
        t0 = s_now();
#pragma omp parallel for schedule(static)
        for (int i = 0; i < nt; i++) {
            size_t off = (size_t)i * chunk;
            if (off < n)
                memcpy(b + off, a + off, off + chunk > n ? n - off : chunk);
        }
        t1 = s_now();
        if (t1 - t0 < bestp)
            bestp = t1 - t0;
    }
    volatile char sink = b[n / 2];
    (void)sink;
    free(a);
    free(b);
    double bw1 = 2.0 * (double)n / best1, bwp = 2.0 * (double)n / bestp;
    printf("bench: memcpy_1thread_GBps = %.2f\n", bw1 / 1e9);
    printf("bench: memcpy_%dthreads_GBps = %.2f\n", omp_get_max_threads(), bwp / 1e9);
    return bw1 > bwp ? bw1 : bwp;
}

static void s_report(const char *name, double best, double elems, double bytes, double bw)
{
    printf("bench: %s_ms = %.3f\n", name, best * 1e3);
    printf("bench: %s_elements_per_s = %.4g\n", name, elems / best);
    printf("bench: %s_floor_ratio = %.3f\n", name, (bytes / bw) / best);
}

int main(int argc, char **argv)
{
    int64_t B = 1024, T = 4096;
    if (argc == 3) {
        B = atoll(argv[1]);
        T = atoll(argv[2]);
    }
    int reps = getenv("RL_BENCH_REPS") ? atoi(getenv("RL_BENCH_REPS")) : 5;
    if (reps < 1)
        reps = 1;
    int64_t n = 8, N = B * T;
    if (B % n != 0) {
        fprintf(stderr, "bench_algo: B must be a multiple of %lld\n", (long long)n);
        return 2;
    }
    printf("bench: algo_lm_shape = %lldx%lld\n", (long long)B, (long long)T);
    printf("bench: omp_threads = %d\n", omp_get_max_threads());
    float *mask = s_alloc((size_t)N), *tr = s_alloc((size_t)N), *kl = s_alloc((size_t)N);
    float *lp = s_alloc((size_t)N), *old = s_alloc((size_t)N), *adv = s_alloc((size_t)N);
    float *out = s_alloc((size_t)N), *rew = s_alloc((size_t)B);
    int64_t *group = malloc(sizeof(int64_t) * (size_t)B);
    rl_rng r;
    rl_rng_init(&r, 2026, 0);
    for (int64_t b = 0; b < B; b++) {
        int64_t len = T / 4 + (int64_t)rl_rng_below(&r, (uint64_t)(3 * T / 4 + 1));
        rew[b] = rl_rng_uniform(&r) < 0.5f ? 1.0f : 0.0f;
        group[b] = b / n;
        for (int64_t t = 0; t < T; t++) {
            int64_t i = b * T + t;
            mask[i] = t < len ? 1.0f : 0.0f;
            tr[i] = t == len - 1 ? rew[b] : 0.0f;
            kl[i] = 0.01f * rl_rng_normal(&r);
            old[i] = -2.0f * rl_rng_uniform(&r);
            lp[i] = old[i] + 0.1f * rl_rng_normal(&r);
            adv[i] = rl_rng_normal(&r);
        }
    }
    double bw = s_memcpy_bw(reps);
    double elems = (double)N;

    /* GRPO: reads token rewards and mask, writes adv. */
    double best = 1e30;
    for (int k = 0; k < reps; k++) {
        double t0 = s_now();
        if (rl_adv_grpo(tr, mask, group, B, T, RL_GRPO_EPS, 1, out, NULL)) {
            fprintf(stderr, "grpo: %s\n", rl_error_message());
            return 1;
        }
        double t1 = s_now() - t0;
        best = t1 < best ? t1 : best;
    }
    s_report("grpo", best, elems, 12.0 * elems + 12.0 * B, bw);

    /* Pro Max: reads rewards, kl and mask, writes adv. */
    rl_pro_max_cfg cfg;
    rl_pro_max_cfg_default(&cfg, n);
    cfg.kl_coef = 1e-3;
    best = 1e30;
    for (int k = 0; k < reps; k++) {
        double t0 = s_now();
        if (rl_adv_pro_max(&cfg, rew, kl, mask, NULL, NULL, B, T, out, NULL, NULL)) {
            fprintf(stderr, "pro_max: %s\n", rl_error_message());
            return 1;
        }
        double t1 = s_now() - t0;
        best = t1 < best ? t1 : best;
    }
    s_report("pro_max", best, elems, 12.0 * elems + 4.0 * B, bw);

    /* PPO loss + gradient: reads logp, old_logp, adv, mask; writes grad. */
    rl_ppo_loss_cfg pc;
    rl_ppo_loss_cfg_default(&pc);
    rl_ppo_loss_out o;
    const char *names[2] = {"ppo_loss_token_mean", "ppo_loss_seq_mean_token_mean"};
    rl_loss_agg aggs[2] = {RL_AGG_TOKEN_MEAN, RL_AGG_SEQ_MEAN_TOKEN_MEAN};
    for (int a = 0; a < 2; a++) {
        pc.agg = aggs[a];
        best = 1e30;
        for (int k = 0; k < reps; k++) {
            double t0 = s_now();
            if (rl_ppo_policy_loss(&pc, lp, old, adv, mask, NULL, NULL, B, T, out, NULL, &o)) {
                fprintf(stderr, "ppo: %s\n", rl_error_message());
                return 1;
            }
            double t1 = s_now() - t0;
            best = t1 < best ? t1 : best;
        }
        s_report(names[a], best, elems, 20.0 * elems, bw);
    }
    printf("bench: ppo_loss_value = %.6f\n", o.loss);
    free(mask), free(tr), free(kl), free(lp), free(old), free(adv), free(out), free(rew);
    free(group);
    return 0;
}
