/* bench_algo.c — throughput of the language-model advantage estimators and of
 * the PPO loss with gradient, against a memory-bandwidth floor measured in
 * the same run.
 *
 * Floor: the bytes a function must touch (each input read once, each output
 * written once) divided by the copy bandwidth of memcpy (2 × bytes copied per
 * second, the better of a single-thread and an OpenMP-parallel copy of 64 MiB
 * blocks). ratio = floor time / measured time (1.0 = at the bandwidth
 * limit). Also a second floor from a STREAM-style triad (a = b + s·c, the
 * read-read-write pattern of these kernels), since on some hosts memcpy is
 * much slower than plain vector loads and stores. Times are the best of
 * RL_BENCH_REPS (default 5) runs, each right after a bandwidth measurement;
 * the ratio is the best per-run ratio.
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

#include "rlrt/error.h"
#include "common/core/rng.h"
#include "common/algo/advantage.h"
#include "common/algo/policy_loss.h"

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

/* Copy bandwidth in bytes/s (read + write) of one 64 MiB memcpy, the better
 * of a single-thread and an OpenMP-parallel copy. */
static char *s_src, *s_dst;
static const size_t s_copy_n = (size_t)64 << 20;
static double s_bw1_best, s_bwp_best;

static double s_copy_bw(void)
{
    size_t n = s_copy_n;
    double t0 = s_now();
    memcpy(s_dst, s_src, n);
    double t1 = s_now() - t0;
    int nt = omp_get_max_threads();
    size_t chunk = (n + (size_t)nt - 1) / (size_t)nt;
    t0 = s_now();
#pragma omp parallel for schedule(static)
    for (int i = 0; i < nt; i++) {
        size_t off = (size_t)i * chunk;
        if (off < n)
            memcpy(s_dst + off, s_src + off, off + chunk > n ? n - off : chunk);
    }
    double tp = s_now() - t0;
    double bw1 = 2.0 * (double)n / t1, bwp = 2.0 * (double)n / tp;
    s_bw1_best = bw1 > s_bw1_best ? bw1 : s_bw1_best;
    s_bwp_best = bwp > s_bwp_best ? bwp : s_bwp_best;
    return bw1 > bwp ? bw1 : bwp;
}

/* STREAM-style triad a = b + s·c over 3 × 64 MiB of floats (two reads, one
 * write per element, the access pattern of these functions), in bytes/s. */
static float *s_ta, *s_tb, *s_tc;
static const size_t s_triad_n = (size_t)16 << 20;
static double s_triad_best;

static double s_triad_bw(void)
{
    int64_t n = (int64_t)s_triad_n;
    double t0 = s_now();
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i++)
        s_ta[i] = s_tb[i] + 0.5f * s_tc[i];
    double t = s_now() - t0;
    double bw = 12.0 * (double)n / t;
    s_triad_best = bw > s_triad_best ? bw : s_triad_best;
    return bw;
}

/* Runs fn reps times, each run right after a copy-bandwidth measurement, so
 * that the floor and the run see the same machine load (this host is
 * shared). Reports the best time and the best per-run ratio. */
typedef int (*s_fn)(void *);

static int s_measure(const char *name, s_fn fn, void *arg, int reps, double elems, double bytes)
{
    double best = 1e30, best_ratio = 0.0, best_triad = 0.0;
    for (int k = 0; k < reps; k++) {
        double bwt = s_triad_bw();
        double bw = s_copy_bw();
        double t0 = s_now();
        if (fn(arg)) {
            fprintf(stderr, "%s: %s\n", name, rl_error_message());
            return 1;
        }
        double t = s_now() - t0;
        best = t < best ? t : best;
        double ratio = (bytes / bw) / t;
        best_ratio = ratio > best_ratio ? ratio : best_ratio;
        double rt = (bytes / bwt) / t;
        best_triad = rt > best_triad ? rt : best_triad;
    }
    printf("bench: %s_ms = %.3f\n", name, best * 1e3);
    printf("bench: %s_elements_per_s = %.4g\n", name, elems / best);
    printf("bench: %s_bytes_per_element = %.1f\n", name, bytes / elems);
    printf("bench: %s_floor_ratio = %.3f\n", name, best_ratio);
    printf("bench: %s_triad_floor_ratio = %.3f\n", name, best_triad);
    return 0;
}

typedef struct s_args {
    int64_t B, T, n;
    float *mask, *tr, *kl, *lp, *old, *adv, *out, *rew;
    int64_t *group;
    rl_pro_max_cfg pm;
    rl_ppo_loss_cfg ppo;
    rl_ppo_loss_out o;
} s_args;

static int s_run_grpo(void *p)
{
    s_args *a = p;
    return rl_adv_grpo(a->tr, a->mask, a->group, a->B, a->T, RL_GRPO_EPS, 1, a->out, NULL);
}

static int s_run_pro_max(void *p)
{
    s_args *a = p;
    return rl_adv_pro_max(&a->pm, a->rew, a->kl, a->mask, NULL, NULL, a->B, a->T, a->out, NULL,
                          NULL);
}

static int s_run_ppo(void *p)
{
    s_args *a = p;
    return rl_ppo_policy_loss(&a->ppo, a->lp, a->old, a->adv, a->mask, NULL, NULL, a->B, a->T,
                              a->out, NULL, &a->o);
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
    s_src = malloc(s_copy_n);
    s_dst = malloc(s_copy_n);
    if (!s_src || !s_dst)
        return 1;
    memset(s_src, 1, s_copy_n);
    memset(s_dst, 2, s_copy_n);
    s_ta = s_alloc(s_triad_n);
    s_tb = s_alloc(s_triad_n);
    s_tc = s_alloc(s_triad_n);
    for (size_t i = 0; i < s_triad_n; i++)
        s_ta[i] = 0.0f, s_tb[i] = 1.0f, s_tc[i] = 2.0f;
    double elems = (double)N;
    s_args a = {.B = B, .T = T, .n = n, .mask = mask, .tr = tr, .kl = kl, .lp = lp,
                .old = old, .adv = adv, .out = out, .rew = rew, .group = group};
    rl_pro_max_cfg_default(&a.pm, n);
    a.pm.kl_coef = 1e-3;
    rl_ppo_loss_cfg_default(&a.ppo);
    int rc = 0;
    /* GRPO reads token rewards and mask, writes adv (+ B group ids). */
    rc |= s_measure("grpo", s_run_grpo, &a, reps, elems, 12.0 * elems + 8.0 * B);
    /* Pro Max reads rewards (B), kl and mask, writes adv. */
    rc |= s_measure("pro_max", s_run_pro_max, &a, reps, elems, 12.0 * elems + 4.0 * B);
    /* PPO loss + gradient reads logp, old_logp, adv and mask, writes grad. */
    a.ppo.agg = RL_AGG_TOKEN_MEAN;
    rc |= s_measure("ppo_loss_token_mean", s_run_ppo, &a, reps, elems, 20.0 * elems);
    a.ppo.agg = RL_AGG_SEQ_MEAN_TOKEN_MEAN;
    rc |= s_measure("ppo_loss_seq_mean_token_mean", s_run_ppo, &a, reps, elems, 20.0 * elems);
    printf("bench: memcpy_1thread_best_GBps = %.2f\n", s_bw1_best / 1e9);
    printf("bench: memcpy_%dthreads_best_GBps = %.2f\n", omp_get_max_threads(), s_bwp_best / 1e9);
    printf("bench: triad_best_GBps = %.2f\n", s_triad_best / 1e9);
    printf("bench: ppo_loss_value = %.6f\n", a.o.loss);
    free(s_ta);
    free(s_tb);
    free(s_tc);
    free(s_src);
    free(s_dst);
    free(mask), free(tr), free(kl), free(lp), free(old), free(adv), free(out), free(rew);
    free(group);
    return 0;
}
