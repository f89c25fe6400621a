/* test_collective_nccl.c — the collectives on CUDA device buffers over NCCL
 * (rl_comm_options.nccl, common/runtime/collective_nccl.h).
 *
 * One rank per communicator (any GPU with NCCL): all-reduce (sum, mean),
 * reduce-scatter, all-gather and broadcast give exactly the input. Two
 * ranks on the single GPU (this process and a second one, this binary
 * with `--rank1`), where NCCL >= 2.30 with NCCL_MULTI_RANK_GPU_ENABLE=1
 * allows it, else a skip naming the version found: every operation on
 * 1000 and 1001 floats (the padded shards) equals the host's sums exactly;
 * a peer that died is an error naming this rank within the abort's 50 ms
 * (the driver's heartbeat abort, raised here by a thread, or NCCL's own
 * error if it sees the death first), and a stuck peer is RL_ETIMEOUT at
 * timeout_s, never a hang. The weight broadcast (rlrt/runtime/weight_bcast.h,
 * its buckets pipelined: depth 2, then 4)
 * over NCCL between the two: versions 1 and 3 of 1001 floats in 1 KiB
 * buckets arrive whole on rank 1. Without CUDA (or a GPU)
 * the request is refused with a message; the GPU cases skip with the
 * reason. NCCL is looked for as libnccl.so.2 on the loader's path
 * (tests/gpu_check.sh adds PyPI nvidia-nccl-cu13's lib folder). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "common/runtime/collective_nccl.h"
#include "rlrt/error.h"
#include "common/runtime/abort.h"
#include "rlrt/runtime/channel_ipc.h"
#include "rlrt/runtime/collective.h"
#include "rlrt/runtime/weight_bcast.h"

#include <pthread.h>
#include <signal.h>
#include <spawn.h>
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

/* Device memory through the runtime's CUDA helpers (channel_ipc.h). */
static float *s_dev(const float *host, int64_t n)
{
    float *d = rl_weight_ipc_alloc(RL_WEIGHT_IPC_CUDA, sizeof(float) * (size_t)(n ? n : 1));
    assert_non_null(d);
    if (host)
        assert_int_equal(rl_weight_ipc_copy(RL_WEIGHT_IPC_CUDA, d, host, sizeof(float) * (size_t)n,
                                            RL_WEIGHT_IPC_H2D), 0);
    return d;
}

static void s_host(float *host, const float *d, int64_t n)
{
    assert_int_equal(rl_weight_ipc_copy(RL_WEIGHT_IPC_CUDA, host, d, sizeof(float) * (size_t)n, RL_WEIGHT_IPC_D2H), 0);
}

static float s_val(int64_t i, int rank) { return (float)(i % 17) + 0.5f * (float)rank + 1.0f; }

/* Why the GPU cases cannot run here ("" when they can). */
static const char *s_why_not(int *version)
{
    static char why[600];
    why[0] = 0;
    if (!rl_weight_ipc_available(RL_WEIGHT_IPC_CUDA) || rl_nccl_load(version))
        snprintf(why, sizeof why, "%s", rl_error_message());
    return why;
}

/* Every operation on one communicator of `world` ranks, this one `rank`;
 * returns a message for the first wrong element, or NULL. */
static const char *s_ops(rl_comm *c, int64_t n)
{
    static char msg[256];
    int W = rl_comm_world(c), r = rl_comm_rank(c);
    float *x = malloc(sizeof(float) * (size_t)n), *y = malloc(sizeof(float) * (size_t)n);
    for (int64_t i = 0; i < n; i++)
        x[i] = s_val(i, r);
    float *dx = s_dev(x, n), *dy = s_dev(NULL, n);
    int64_t b, e;
    rl_shard_range(n, W, r, &b, &e);
    const char *bad = NULL;
    for (int op = 0; op < 5 && !bad; op++) {
        int rc = op == 0   ? rl_comm_all_reduce(c, dx, dy, n, RL_REDUCE_SUM)
                 : op == 1 ? rl_comm_all_reduce(c, dx, dy, n, RL_REDUCE_AVG)
                 : op == 2 ? rl_comm_reduce_scatter(c, dx, dy, n, RL_REDUCE_SUM)
                 : op == 3 ? rl_comm_all_gather(c, dx + b, dy, n)
                           : rl_comm_broadcast(c, dx, dy, n, W - 1);
        if (rc) {
            snprintf(msg, sizeof msg, "op %d: %s", op, rl_error_message());
            bad = msg;
            break;
        }
        s_host(y, dy, op == 2 ? e - b : n);
        for (int64_t i = 0; i < (op == 2 ? e - b : n) && !bad; i++) {
            int64_t g = op == 2 ? b + i : i;
            float sum = 0;
            for (int k = 0; k < W; k++)
                sum += s_val(g, k);
            float want = op == 0 || op == 2 ? sum
                         : op == 1          ? sum / (float)W
                         : op == 3          ? s_val(g, (int)(g / ((n + W - 1) / W)))
                                            : s_val(g, W - 1);
            if (y[i] != want) {
                snprintf(msg, sizeof msg, "op %d (%s), rank %d of %d, %lld floats: element %lld is %g, want %g",
                         op, rl_comm_transport(c), r, W, (long long)n, (long long)g, y[i], want);
                bad = msg;
            }
        }
    }
    rl_weight_ipc_free(RL_WEIGHT_IPC_CUDA, dx);
    rl_weight_ipc_free(RL_WEIGHT_IPC_CUDA, dy);
    free(x);
    free(y);
    return bad;
}

static rl_comm *s_join(const rl_comm_id *id, int world, int rank, double timeout_s)
{
    rl_comm_options o;
    rl_comm_options_default(&o);
    o.nccl = 1;
    o.timeout_s = timeout_s;
    return rl_comm_init_rank(id, world, rank, &o);
}

/* rank 1 of two: MODE "ops" (every operation, twice), "die" (exit right
 * after joining), "stuck" (join, then sleep). */
static int s_rank1(const char *idtext, const char *mode)
{
    rl_comm_id id;
    if (rl_comm_id_parse(&id, idtext))
        return 2;
    rl_comm *c = s_join(&id, 2, 1, 60);
    if (!c) {
        fprintf(stderr, "rank 1: %s\n", rl_error_message());
        return 3;
    }
    if (strcmp(mode, "die") == 0)
        _exit(0); /* no goodbye: the peer must find out */
    if (strcmp(mode, "stuck") == 0) {
        sleep(120);
        return 0;
    }
    if (strcmp(mode, "wbcast") == 0) { /* versions 1 and 3 of the weight broadcast */
        rl_weight_bcast *b = rl_weight_bcast_new(c, 1001, 1024);
        float *h = malloc(sizeof(float) * 1001);
        int rc = b && h ? 0 : 5;
        for (int k = 0; k < 2 && !rc; k++) {
            uint64_t v = 0;
            if (rl_weight_bcast_recv(b)) {
                fprintf(stderr, "rank 1: %s\n", rl_error_message());
                rc = 6;
                break;
            }
            const float *act = rl_weight_bcast_active(b, &v);
            if (v != (k ? 3u : 1u) ||
                rl_weight_ipc_copy(RL_WEIGHT_IPC_CUDA, h, act, sizeof(float) * 1001, RL_WEIGHT_IPC_D2H))
                rc = 7;
            for (int64_t i = 0; i < 1001 && !rc; i++)
                if (h[i] != s_val(i, (int)v)) {
                    fprintf(stderr, "rank 1: version %llu element %lld is %g, want %g\n", (unsigned long long)v,
                            (long long)i, h[i], s_val(i, (int)v));
                    rc = 8;
                }
        }
        free(h);
        rl_weight_bcast_free(b);
        rl_comm_destroy(c);
        return rc;
    }
    const char *bad = s_ops(c, 1000);
    if (!bad)
        bad = s_ops(c, 1001);
    if (bad) {
        fprintf(stderr, "rank 1: %s\n", bad);
        return 4;
    }
    rl_comm_destroy(c);
    return 0;
}

static pid_t s_spawn_rank1(const rl_comm_id *id, const char *mode)
{
    char *argv[] = {"/proc/self/exe", "--rank1", (char *)rl_comm_id_string(id), (char *)mode, NULL};
    pid_t pid;
    assert_int_equal(posix_spawn(&pid, "/proc/self/exe", NULL, NULL, argv, environ), 0);
    return pid;
}

static void test_nccl_refused_without_gpu(void **state)
{
    (void)state;
    int v = 0;
    if (!*s_why_not(&v)) {
        print_message("a GPU and NCCL %d are here: the GPU cases run instead\n", v);
        return;
    }
    rl_comm_id id;
    assert_int_equal(rl_comm_id_create(&id, NULL), 0);
    assert_null(s_join(&id, 1, 0, 5));
    assert_int_not_equal(rl_error_code(), 0);
    const char *m = rl_error_message();
    print_message("refused: %s\n", m);
    assert_non_null(strstr(m, "comm rank 0: NCCL setup: "));
    assert_true(strlen(m) > strlen("comm rank 0: NCCL setup: ") + 10); /* and why */
}

static void test_nccl_one_rank(void **state)
{
    (void)state;
    int v = 0;
    const char *why = s_why_not(&v);
    if (*why) {
        print_message("skip: %s\n", why);
        skip();
        return;
    }
    rl_comm_id id;
    assert_int_equal(rl_comm_id_create(&id, NULL), 0);
    rl_comm *c = s_join(&id, 1, 0, 30);
    if (!c)
        fail_msg("%s", rl_error_message());
    assert_string_equal(rl_comm_transport(c), "nccl");
    const char *bad = s_ops(c, 1001);
    if (bad)
        fail_msg("%s", bad);
    rl_comm_destroy(c);
    print_message("NCCL %d: one rank, every operation exact\n", v);
}

static void *s_abort_later(void *arg)
{
    (void)arg;
    usleep(500000);
    rl_abort_raise("rank 1 died (the test's stand-in for the driver's heartbeat)");
    return NULL;
}

static void test_nccl_two_ranks_one_gpu_where_allowed(void **state)
{
    (void)state;
    int v = 0;
    const char *why = s_why_not(&v);
    if (*why) {
        print_message("skip: %s\n", why);
        skip();
        return;
    }
    if (v < 23000) {
        print_message("skip: NCCL %d.%d.%d found; two ranks on one GPU need NCCL >= 2.30 with "
                      "NCCL_MULTI_RANK_GPU_ENABLE=1\n", v / 10000, v / 100 % 100, v % 100);
        skip();
        return;
    }
    setenv("NCCL_MULTI_RANK_GPU_ENABLE", "1", 1);
    /* every operation, exact, on both ranks */
    rl_comm_id id;
    assert_int_equal(rl_comm_id_create(&id, NULL), 0);
    pid_t pid = s_spawn_rank1(&id, "ops");
    rl_comm *c = s_join(&id, 2, 0, 60);
    if (!c) {
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        fail_msg("rank 0: %s", rl_error_message());
    }
    const char *bad = s_ops(c, 1000);
    if (!bad)
        bad = s_ops(c, 1001);
    int st = 0;
    waitpid(pid, &st, 0);
    if (bad)
        fail_msg("rank 0: %s", bad);
    if (!WIFEXITED(st) || WEXITSTATUS(st))
        fail_msg("rank 1 failed (status %d)", WEXITSTATUS(st));
    rl_comm_destroy(c);
    /* a dead peer: the abort (heartbeat) ends the wait, naming why */
    assert_int_equal(rl_comm_id_create(&id, NULL), 0);
    pid = s_spawn_rank1(&id, "die");
    c = s_join(&id, 2, 0, 60);
    assert_non_null(c);
    waitpid(pid, &st, 0);
    float *d = s_dev(NULL, 1 << 20);
    pthread_t th;
    pthread_create(&th, NULL, s_abort_later, NULL);
    double t0 = s_now();
    int rc = rl_comm_all_reduce(c, d, d, 1 << 20, RL_REDUCE_SUM);
    double dt = s_now() - t0;
    pthread_join(th, NULL);
    assert_int_not_equal(rc, 0);
    print_message("dead peer: %.2f s: %s\n", dt, rl_error_message());
    assert_non_null(strstr(rl_error_message(), "NCCL rank 0 of 2"));
    /* the abort's reason, or NCCL's own error when it saw the death first */
    if (rc == RL_EPEER)
        assert_non_null(strstr(rl_error_message(), "rank 1 died"));
    else
        assert_int_equal(rc, RL_EIO);
    assert_true(dt < 5);
    assert_int_equal(rl_comm_all_reduce(c, d, d, 1 << 20, RL_REDUCE_SUM), RL_ESTATE);
    rl_comm_destroy(c);
    /* a stuck peer: the timeout */
    assert_int_equal(rl_comm_id_create(&id, NULL), 0);
    pid = s_spawn_rank1(&id, "stuck");
    c = s_join(&id, 2, 0, 8); /* the init is bounded by it too */
    assert_non_null(c);
    t0 = s_now();
    rc = rl_comm_all_reduce(c, d, d, 1 << 20, RL_REDUCE_SUM);
    dt = s_now() - t0;
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    print_message("stuck peer: %.2f s: %s\n", dt, rl_error_message());
    assert_int_equal(rc, RL_ETIMEOUT);
    assert_non_null(strstr(rl_error_message(), "dead or stuck"));
    assert_true(dt > 7 && dt < 20);
    rl_comm_destroy(c);
    rl_weight_ipc_free(RL_WEIGHT_IPC_CUDA, d);
    print_message("NCCL %d: two ranks on one GPU: every operation exact; dead and stuck peers end\n", v);
}

static void test_nccl_weight_bcast_two_ranks_where_allowed(void **state)
{
    (void)state;
    int v = 0;
    const char *why = s_why_not(&v);
    if (*why) {
        print_message("skip: %s\n", why);
        skip();
        return;
    }
    if (v < 23000) {
        print_message("skip: NCCL %d.%d.%d found; two ranks on one GPU need NCCL >= 2.30 with "
                      "NCCL_MULTI_RANK_GPU_ENABLE=1\n", v / 10000, v / 100 % 100, v % 100);
        skip();
        return;
    }
    setenv("NCCL_MULTI_RANK_GPU_ENABLE", "1", 1);
    rl_comm_id id;
    assert_int_equal(rl_comm_id_create(&id, NULL), 0);
    pid_t pid = s_spawn_rank1(&id, "wbcast");
    rl_comm *c = s_join(&id, 2, 0, 60);
    if (!c) {
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        fail_msg("rank 0: %s", rl_error_message());
    }
    rl_weight_bcast *b = rl_weight_bcast_new(c, 1001, 1024); /* 4 buckets, the last short */
    assert_non_null(b);
    float x[1001];
    float *dx = s_dev(NULL, 1001);
    int rc = 0;
    for (int k = 0; k < 2 && !rc; k++) {
        int ver = k ? 3 : 1;
        for (int64_t i = 0; i < 1001; i++)
            x[i] = s_val(i, ver);
        assert_int_equal(rl_weight_ipc_copy(RL_WEIGHT_IPC_CUDA, dx, x, sizeof x, RL_WEIGHT_IPC_H2D), 0);
        /* version 1 two buckets in flight (the default), version 3 up to four:
         * packed on the copy stream into the staging pair while NCCL sends */
        assert_int_equal(rl_weight_bcast_set_depth(b, k ? 4 : 2), 0);
        rc = rl_weight_bcast_send(b, (uint64_t)ver, dx);
        int64_t nb = 0;
        int most = 0;
        rl_weight_bcast_last(b, &nb, &most);
        print_message("rank 0: version %d in %lld buckets, %d in flight at most (depth %d)\n", ver, (long long)nb,
                      most, k ? 4 : 2);
    }
    if (rc)
        print_message("rank 0: %s\n", rl_error_message());
    int st = 0;
    waitpid(pid, &st, 0);
    rl_weight_bcast_free(b);
    rl_weight_ipc_free(RL_WEIGHT_IPC_CUDA, dx);
    rl_comm_destroy(c);
    assert_int_equal(rc, 0);
    if (!WIFEXITED(st) || WEXITSTATUS(st))
        fail_msg("rank 1 failed (status %d)", WEXITSTATUS(st));
    print_message("NCCL %d: weight broadcast, two ranks on one GPU: versions 1 and 3 whole on rank 1\n", v);
}

int main(int argc, char **argv)
{
    if (argc == 4 && strcmp(argv[1], "--rank1") == 0)
        return s_rank1(argv[2], argv[3]);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_nccl_refused_without_gpu),
        cmocka_unit_test(test_nccl_one_rank),
        cmocka_unit_test(test_nccl_two_ranks_one_gpu_where_allowed),
        cmocka_unit_test(test_nccl_weight_bcast_two_ranks_where_allowed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
