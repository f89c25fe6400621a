/* bench_gpu_weight_sync.c — the same-GPU weight sync of `make bench-gpu`
 * (bench/bench_gpu.sh): actor → rollout over CUDA IPC
 * (rlrt/runtime/channel_ipc.h) against a cudaMemcpy device-to-device of the
 * same bytes on the same GPU, in one run.
 *
 * The buffer is the Qwen2.5-0.5B parameters in bf16: 494,032,768 × 2 bytes
 * (~0.99 GB; RL_BENCH_IPC_BYTES changes it), carried as floats (the weight
 * channel's unit). This process is the actor: it allocates the block,
 * spawns a receiver (this binary again, `--recv ENDPOINT COUNT KIND
 * VERSIONS`, the rollout: its own staging and active buffers), and sends
 * RL_BENCH_IPC_VERSIONS versions (default 6; the first, which maps the
 * handle, is a warm-up), each after writing the version's pattern into the
 * block. A sync is timed around rl_weight_ipc_send (device wait, export,
 * the bucket messages, the receiver's copies and acknowledgements). The
 * baseline is the same bytes copied device-to-device by cudaMemcpy in this
 * process into a second block (one warm-up, then as many timed). The
 * receiver checks the last version element by element before it exits.
 * Buckets: RL_BENCH_IPC_BUCKET_MIB (default 0: the channel's, 1 GiB), no
 * window limit.
 *
 * Prints `bench: <name> = <value>`:
 *   gpu_weight_sync_bytes, gpu_weight_sync_0p5b_s (median sync, s),
 *   gpu_weight_sync_GBps (bytes / that), gpu_weight_sync_d2d_s and
 *   gpu_weight_sync_d2d_GBps (median cudaMemcpy), gpu_weight_sync_GBps_over_d2d
 *   (the ratio; target ≥ 0.8), gpu_weight_sync_transport, and from the
 *   receiver gpu_weight_sync_recv_copy_s (its device copies of a version,
 *   median: the rest of a sync is messaging and waking up).
 * Exits 77 (skipped) without a CUDA build or a visible GPU.
 * RL_BENCH_IPC_KIND=shm runs the same over shared memory on the host (a
 * smoke test of this program on a machine without a GPU: the baseline is
 * then memcpy). */
#include "rlrt/error.h"
#include "rlrt/runtime/channel_ipc.h"

#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

static double s_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static float s_pattern(int64_t i, uint64_t v) { return (float)(i % 1000) + 1000.0f * (float)v; }

static int s_cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double s_median(double *x, int n)
{
    qsort(x, (size_t)n, sizeof *x, s_cmp);
    return n % 2 ? x[n / 2] : 0.5 * (x[n / 2 - 1] + x[n / 2]);
}

static long long s_env(const char *name, long long dflt)
{
    const char *v = getenv(name);
    return v && *v ? atoll(v) : dflt;
}

/* The rollout: receive `versions` versions, check the last one. */
static int s_recv(char **a)
{
    const char *ep = a[0];
    int64_t n = atoll(a[1]);
    rl_weight_ipc_kind kind = (rl_weight_ipc_kind)atoi(a[2]);
    int versions = atoi(a[3]);
    rl_weight_ipc_receiver *r = rl_weight_ipc_receiver_new(ep, kind, n);
    if (!r) {
        fprintf(stderr, "receiver: %s\n", rl_error_message());
        return 2;
    }
    uint64_t have = 0;
    double *copy_s = calloc((size_t)versions, sizeof(double));
    int got = 0;
    while (have < (uint64_t)versions) {
        if (rl_weight_ipc_recv_poll(r, 120000)) {
            fprintf(stderr, "receiver: %s\n", rl_error_message());
            return 3;
        }
        rl_weight_ipc_recv_active(r, &have);
        if (got < versions)
            copy_s[got++] = rl_weight_ipc_recv_copy_seconds(r);
    }
    if (got > 1) /* the first version (mapping the handle) is the warm-up */
        printf("bench: gpu_weight_sync_recv_copy_s = %.6f (the receiver's copies of a version, median)\n",
               s_median(copy_s + 1, got - 1));
    fflush(stdout);
    free(copy_s);
    float *x = malloc(sizeof(float) * (size_t)n);
    if (!x || rl_weight_ipc_copy(kind, x, rl_weight_ipc_recv_active(r, NULL), sizeof(float) * (size_t)n,
                                 RL_WEIGHT_IPC_D2H))
        return 4;
    for (int64_t i = 0; i < n; i++)
        if (x[i] != s_pattern(i, have)) {
            fprintf(stderr, "receiver: version %llu: element %lld is %g, want %g\n",
                    (unsigned long long)have, (long long)i, x[i], s_pattern(i, have));
            return 5;
        }
    free(x);
    rl_weight_ipc_receiver_free(r);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 6 && strcmp(argv[1], "--recv") == 0)
        return s_recv(argv + 2);
    const char *ks = getenv("RL_BENCH_IPC_KIND");
    rl_weight_ipc_kind kind = ks && strcmp(ks, "shm") == 0 ? RL_WEIGHT_IPC_SHM : RL_WEIGHT_IPC_CUDA;
    if (!rl_weight_ipc_available(kind)) {
        printf("bench_gpu_weight_sync: skipped: %s\n", rl_error_message());
        return 77;
    }
    long long bytes = s_env("RL_BENCH_IPC_BYTES", 494032768LL * 2);
    int versions = (int)s_env("RL_BENCH_IPC_VERSIONS", 6);
    size_t bucket = (size_t)s_env("RL_BENCH_IPC_BUCKET_MIB", 0) << 20;
    if (bytes < 4 || versions < 2) {
        fprintf(stderr, "bench_gpu_weight_sync: RL_BENCH_IPC_BYTES >= 4 and RL_BENCH_IPC_VERSIONS >= 2\n");
        return 2;
    }
    int64_t n = bytes / 4;
    size_t nb = sizeof(float) * (size_t)n;
    float *src = rl_weight_ipc_alloc(kind, nb), *dst = src ? rl_weight_ipc_alloc(kind, nb) : NULL;
    float *host = dst ? malloc(nb) : NULL;
    rl_weight_ipc_sender *s = host ? rl_weight_ipc_sender_new("tcp://127.0.0.1:*", kind, bucket, 0) : NULL;
    if (!s) {
        fprintf(stderr, "bench_gpu_weight_sync: %s\n", rl_error_message());
        return 1;
    }
    char ns[32], kn[8], vn[16];
    snprintf(ns, sizeof ns, "%lld", (long long)n);
    snprintf(kn, sizeof kn, "%d", (int)kind);
    snprintf(vn, sizeof vn, "%d", versions);
    char *rargv[] = {"/proc/self/exe", "--recv", (char *)rl_weight_ipc_sender_endpoint(s), ns, kn, vn, NULL};
    pid_t pid;
    if (posix_spawn(&pid, "/proc/self/exe", NULL, NULL, rargv, environ)) {
        fprintf(stderr, "bench_gpu_weight_sync: cannot start the receiver\n");
        return 1;
    }
    double *t_ipc = calloc((size_t)versions, sizeof(double)), *t_d2d = calloc((size_t)versions, sizeof(double));
    int rc = 0;
    for (int v = 1; v <= versions && !rc; v++) {
        for (int64_t i = 0; i < n; i++)
            host[i] = s_pattern(i, (uint64_t)v);
        if ((rc = rl_weight_ipc_copy(kind, src, host, nb, RL_WEIGHT_IPC_H2D)))
            break;
        double t0 = s_now();
        rc = rl_weight_ipc_send(s, (uint64_t)v, src, n, 1, 120000);
        t_ipc[v - 1] = s_now() - t0;
        if (rc)
            break;
        t0 = s_now(); /* the baseline: the same bytes on the same GPU */
        rc = rl_weight_ipc_copy(kind, dst, src, nb, RL_WEIGHT_IPC_D2D);
        t_d2d[v - 1] = s_now() - t0;
    }
    if (rc)
        fprintf(stderr, "bench_gpu_weight_sync: %s\n", rl_error_message());
    int st = 0;
    waitpid(pid, &st, 0);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        fprintf(stderr, "bench_gpu_weight_sync: the receiver failed (status %d)\n", WEXITSTATUS(st));
        rc = rc ? rc : 1;
    }
    if (!rc) {
        double ipc = s_median(t_ipc + 1, versions - 1), d2d = s_median(t_d2d + 1, versions - 1);
        printf("bench: gpu_weight_sync_transport = %s\n", rl_weight_ipc_kind_name(kind));
        printf("bench: gpu_weight_sync_bytes = %zu\n", nb);
        printf("bench: gpu_weight_sync_bucket_mib = %zu\n", bucket ? bucket >> 20 : (size_t)1024);
        printf("bench: gpu_weight_sync_0p5b_s = %.6f\n", ipc);
        printf("bench: gpu_weight_sync_GBps = %.1f\n", (double)nb / ipc / 1e9);
        printf("bench: gpu_weight_sync_d2d_s = %.6f\n", d2d);
        printf("bench: gpu_weight_sync_d2d_GBps = %.1f\n", (double)nb / d2d / 1e9);
        printf("bench: gpu_weight_sync_GBps_over_d2d = %.3f\n", d2d / ipc);
    }
    free(t_ipc);
    free(t_d2d);
    free(host);
    rl_weight_ipc_sender_free(s);
    rl_weight_ipc_free(kind, src);
    rl_weight_ipc_free(kind, dst);
    return rc ? 1 : 0;
}
