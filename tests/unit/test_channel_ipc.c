/* test_channel_ipc.c — the weight channel's same-device transport
 * (rlrt/runtime/channel_ipc.h) between two real processes.
 *
 * The sender is this binary again (`--ipc-sender KIND COUNT FIRST LAST
 * BUCKET WINDOW`): it allocates a block of the kind, prints its endpoint,
 * and for each version writes the version's pattern into the block and
 * sends it. The test process is the receiver: after every version its
 * active buffer must equal the pattern; with the sender killed (SIGKILL)
 * after some buckets of a version, the previous version stays active and
 * whole; a receiver that went away between versions is dropped and its
 * new process served; a send that timed out leaves no trouble for the
 * next one (its late acknowledgements are dropped). Each runs over POSIX shared memory (any machine) and over CUDA
 * IPC on one GPU (skipped, with the reason, without a GPU or without
 * `make CUDA=1`). Hostile senders (a raw ROUTER in this process): a short
 * message, another memory kind, another size, a bucket that does not tile,
 * a garbage handle — each refused with a message naming the problem, the
 * active version unchanged. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "rlrt/error.h"
#include "common/runtime/ipc_mem.h"
#include "rlrt/runtime/channel_ipc.h"

#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zmq.h>

extern char **environ;

static float s_pattern(int64_t i, uint64_t version) { return (float)(i % 997) * 0.25f + (float)version * 1000.0f; }

static int s_fill(rl_weight_ipc_kind kind, float *dev, int64_t n, uint64_t version)
{
    float *x = malloc(sizeof(float) * (size_t)(n ? n : 1));
    if (!x)
        return RL_ENOMEM;
    for (int64_t i = 0; i < n; i++)
        x[i] = s_pattern(i, version);
    int rc = rl_weight_ipc_copy(kind, dev, x, sizeof(float) * (size_t)n, RL_WEIGHT_IPC_H2D);
    free(x);
    return rc;
}

/* The index of the first element of dev that is not version's pattern, or -1. */
static int64_t s_check(rl_weight_ipc_kind kind, const float *dev, int64_t n, uint64_t version)
{
    float *x = malloc(sizeof(float) * (size_t)(n ? n : 1));
    assert_non_null(x);
    assert_int_equal(rl_weight_ipc_copy(kind, x, dev, sizeof(float) * (size_t)n, RL_WEIGHT_IPC_D2H), 0);
    int64_t bad = -1;
    for (int64_t i = 0; i < n && bad < 0; i++)
        if (x[i] != s_pattern(i, version))
            bad = i;
    free(x);
    return bad;
}

/* The sender process: exit 0 when every version was acknowledged. */
static int s_sender(char **a)
{
    rl_weight_ipc_kind kind = (rl_weight_ipc_kind)atoi(a[0]);
    int64_t n = atoll(a[1]);
    uint64_t first = strtoull(a[2], NULL, 10), last = strtoull(a[3], NULL, 10);
    size_t bucket = (size_t)atoll(a[4]);
    int window = atoi(a[5]);
    float *dev = rl_weight_ipc_alloc(kind, sizeof(float) * (size_t)n);
    rl_weight_ipc_sender *s = dev ? rl_weight_ipc_sender_new("tcp://127.0.0.1:*", kind, bucket, window) : NULL;
    if (!s) {
        fprintf(stderr, "sender: %s\n", rl_error_message());
        return 2;
    }
    printf("%s\n", rl_weight_ipc_sender_endpoint(s));
    fflush(stdout);
    for (uint64_t v = first; v <= last; v++) {
        if (s_fill(kind, dev, n, v) || rl_weight_ipc_send(s, v, dev, n, 1, 30000)) {
            fprintf(stderr, "sender: version %llu: %s\n", (unsigned long long)v, rl_error_message());
            return 3;
        }
        rl_weight_ipc_stats st;
        rl_weight_ipc_sender_stats(s, &st);
        fprintf(stderr, "sender: version %llu: %.0f bytes in %.6f s (%.2f GB/s, %s)\n",
                (unsigned long long)v, st.bytes, st.seconds, st.gbps, st.transport);
    }
    rl_weight_ipc_sender_free(s);
    rl_weight_ipc_free(kind, dev);
    return 0;
}

/* Spawns a sender; returns its pid and its endpoint. */
static pid_t s_spawn(rl_weight_ipc_kind kind, int64_t n, int first, int last, size_t bucket, int window,
                     char *ep, size_t ep_size)
{
    int fd[2];
    assert_int_equal(pipe(fd), 0);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fd[1], 1);
    posix_spawn_file_actions_addclose(&fa, fd[0]);
    char k[8], ns[32], fs[16], ls[16], bs[32], ws[16];
    snprintf(k, sizeof k, "%d", (int)kind);
    snprintf(ns, sizeof ns, "%lld", (long long)n);
    snprintf(fs, sizeof fs, "%d", first);
    snprintf(ls, sizeof ls, "%d", last);
    snprintf(bs, sizeof bs, "%zu", bucket);
    snprintf(ws, sizeof ws, "%d", window);
    char *argv[] = {"/proc/self/exe", "--ipc-sender", k, ns, fs, ls, bs, ws, NULL};
    pid_t pid;
    assert_int_equal(posix_spawn(&pid, "/proc/self/exe", &fa, NULL, argv, environ), 0);
    posix_spawn_file_actions_destroy(&fa);
    close(fd[1]);
    FILE *f = fdopen(fd[0], "r");
    assert_non_null(f);
    if (!fgets(ep, (int)ep_size, f))
        fail_msg("the sender printed no endpoint");
    fclose(f);
    ep[strcspn(ep, "\n")] = 0;
    return pid;
}

static int s_exit(pid_t pid)
{
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static int s_usable(rl_weight_ipc_kind kind)
{
    if (rl_weight_ipc_available(kind))
        return 1;
    print_message("skip: %s\n", rl_error_message());
    return 0;
}

/* Versions 1..3 from a sender process: the receiver's buffer equals the
 * sender's after every version. */
static void s_versions(rl_weight_ipc_kind kind)
{
    const int64_t n = (1 << 20) + 13; /* 4 MiB + 52 bytes: 5 buckets of 1 MiB, the last short */
    char ep[400];
    pid_t pid = s_spawn(kind, n, 1, 3, 1 << 20, 2, ep, sizeof ep);
    rl_weight_ipc_receiver *r = rl_weight_ipc_receiver_new(ep, kind, n);
    assert_non_null(r);
    uint64_t have = 7;
    const float *act = rl_weight_ipc_recv_active(r, &have);
    assert_int_equal(have, 0);
    for (uint64_t v = 1; v <= 3; v++) {
        int rc = rl_weight_ipc_recv_poll(r, 30000);
        if (rc)
            fail_msg("version %llu: %s", (unsigned long long)v, rl_error_message());
        act = rl_weight_ipc_recv_active(r, &have);
        assert_int_equal(have, v);
        int64_t bad = s_check(kind, act, n, v);
        if (bad >= 0)
            fail_msg("%s version %llu: element %lld differs from the sender's", rl_weight_ipc_kind_name(kind),
                     (unsigned long long)v, (long long)bad);
    }
    assert_int_equal(s_exit(pid), 0);
    rl_weight_ipc_receiver_free(r);
    print_message("%s: 3 versions of %lld floats, each equal to the sender's\n", rl_weight_ipc_kind_name(kind),
                  (long long)n);
}

/* The sender dies after some buckets of version 2 (window 1: it can be at
 * most one bucket ahead): version 1 stays active and whole. */
static void s_killed(rl_weight_ipc_kind kind)
{
    const int64_t n = 64 * 4096 + 5; /* 65 buckets of 16 KiB */
    char ep[400];
    pid_t pid = s_spawn(kind, n, 1, 2, 16 << 10, 1, ep, sizeof ep);
    rl_weight_ipc_receiver *r = rl_weight_ipc_receiver_new(ep, kind, n);
    assert_non_null(r);
    if (rl_weight_ipc_recv_poll(r, 30000))
        fail_msg("version 1: %s", rl_error_message());
    uint32_t got = 0, of = 0;
    /* three buckets of version 2, one at a time: with a window of 1 the
     * sender is at most one bucket ahead of what was acknowledged */
    for (int i = 0; i < 3; i++) {
        int complete = 1;
        if (rl_weight_ipc_recv_step(r, 30000, &complete))
            fail_msg("bucket %d of version 2: %s", i, rl_error_message());
        assert_int_equal(complete, 0);
    }
    rl_weight_ipc_recv_progress(r, &got, &of);
    assert_int_equal(got, 3);
    kill(pid, SIGKILL);
    assert_int_equal(s_exit(pid), 128 + SIGKILL);
    assert_int_equal(rl_weight_ipc_recv_poll(r, 300), RL_ETIMEOUT);
    assert_non_null(strstr(rl_error_message(), "of 65 buckets of version 2"));
    rl_weight_ipc_recv_progress(r, &got, &of);
    assert_int_equal(of, 65);
    assert_true(got < 65);
    uint64_t have = 0;
    const float *act = rl_weight_ipc_recv_active(r, &have);
    assert_int_equal(have, 1);
    int64_t bad = s_check(kind, act, n, 1);
    if (bad >= 0)
        fail_msg("after the kill, element %lld of the active buffer is not version 1's", (long long)bad);
    print_message("%s: sender killed after %u of %u buckets of version 2: version 1 active and whole\n",
                  rl_weight_ipc_kind_name(kind), got, of);
    rl_weight_ipc_receiver_free(r);
    /* the dead sender's segment (shm): nobody else unlinks it */
    char name[64];
    for (int i = 0; i < 4; i++) {
        snprintf(name, sizeof name, "/rlrt-w-%ld-%d", (long)pid, i);
        shm_unlink(name);
    }
}

static void test_ipc_shm_versions(void **state)
{
    (void)state;
    s_versions(RL_WEIGHT_IPC_SHM);
}

static void test_ipc_shm_sender_killed(void **state)
{
    (void)state;
    s_killed(RL_WEIGHT_IPC_SHM);
}

/* A receiver that went away between versions (a restarted rollout rank's
 * old process) is dropped when the sender finds it gone, and its new
 * process gets the next version. Sender on a thread of this process. */
typedef struct {
    rl_weight_ipc_sender *s;
    float *blk;
    int64_t n;
    volatile int go; /* 1: send version 2 */
    int rc[2];
    char err[512];
} s_restart;

static void *s_restart_sender(void *arg)
{
    s_restart *t = arg;
    for (uint64_t v = 1; v <= 2; v++) {
        while (v == 2 && !t->go)
            usleep(1000);
        t->rc[v - 1] = s_fill(RL_WEIGHT_IPC_SHM, t->blk, t->n, v) ? -1
                       : rl_weight_ipc_send(t->s, v, t->blk, t->n, 1, 20000);
        if (t->rc[v - 1]) {
            snprintf(t->err, sizeof t->err, "%s", rl_error_message());
            break;
        }
    }
    return NULL;
}

static void test_ipc_shm_receiver_restarted(void **state)
{
    (void)state;
    s_restart t = {.n = 10007};
    t.blk = rl_weight_ipc_alloc(RL_WEIGHT_IPC_SHM, sizeof(float) * (size_t)t.n);
    t.s = rl_weight_ipc_sender_new("tcp://127.0.0.1:*", RL_WEIGHT_IPC_SHM, 4096, 0);
    assert_non_null(t.blk);
    assert_non_null(t.s);
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, s_restart_sender, &t), 0);
    rl_weight_ipc_receiver *r1 = rl_weight_ipc_receiver_new(rl_weight_ipc_sender_endpoint(t.s), RL_WEIGHT_IPC_SHM,
                                                            t.n);
    assert_non_null(r1);
    if (rl_weight_ipc_recv_poll(r1, 20000))
        fail_msg("version 1: %s", rl_error_message());
    rl_weight_ipc_receiver_free(r1); /* the old process goes */
    usleep(200000);
    rl_weight_ipc_receiver *r2 = rl_weight_ipc_receiver_new(rl_weight_ipc_sender_endpoint(t.s), RL_WEIGHT_IPC_SHM,
                                                            t.n);
    assert_non_null(r2);
    t.go = 1;
    int rc = rl_weight_ipc_recv_poll(r2, 20000);
    pthread_join(th, NULL);
    if (rc || t.rc[0] || t.rc[1])
        fail_msg("receiver %d (%s), sender %d %d (%s)", rc, rc ? rl_error_message() : "", t.rc[0], t.rc[1], t.err);
    uint64_t v = 0;
    const float *act = rl_weight_ipc_recv_active(r2, &v);
    assert_int_equal(v, 2);
    assert_int_equal(s_check(RL_WEIGHT_IPC_SHM, act, t.n, 2), -1);
    rl_weight_ipc_stats st;
    rl_weight_ipc_sender_stats(t.s, &st);
    assert_int_equal(st.receivers, 1);
    assert_int_equal(st.version, 2);
    assert_string_equal(st.transport, "shm");
    rl_weight_ipc_receiver_free(r2);
    rl_weight_ipc_sender_free(t.s);
    rl_weight_ipc_free(RL_WEIGHT_IPC_SHM, t.blk);
}

/* A send that timed out while its receiver was slow: the receiver's late
 * acknowledgements of it come in during the next send, which succeeds. */
static void *s_late_sender(void *arg)
{
    s_restart *t = arg;
    t->rc[0] = s_fill(RL_WEIGHT_IPC_SHM, t->blk, t->n, 1) ? -1 : rl_weight_ipc_send(t->s, 1, t->blk, t->n, 1, 100);
    snprintf(t->err, sizeof t->err, "%s", rl_error_message());
    t->go = 1;
    while (t->go != 2)
        usleep(1000);
    t->rc[1] = s_fill(RL_WEIGHT_IPC_SHM, t->blk, t->n, 2) ? -1 : rl_weight_ipc_send(t->s, 2, t->blk, t->n, 1, 20000);
    if (t->rc[1])
        snprintf(t->err, sizeof t->err, "%s", rl_error_message());
    return NULL;
}

static void test_ipc_shm_late_acknowledgements(void **state)
{
    (void)state;
    s_restart t = {.n = 10007};
    t.blk = rl_weight_ipc_alloc(RL_WEIGHT_IPC_SHM, sizeof(float) * (size_t)t.n);
    t.s = rl_weight_ipc_sender_new("tcp://127.0.0.1:*", RL_WEIGHT_IPC_SHM, 4096, 0);
    assert_non_null(t.blk);
    assert_non_null(t.s);
    rl_weight_ipc_receiver *r = rl_weight_ipc_receiver_new(rl_weight_ipc_sender_endpoint(t.s), RL_WEIGHT_IPC_SHM, t.n);
    assert_non_null(r);
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, s_late_sender, &t), 0);
    while (!t.go) /* the receiver does not read until version 1's send gave up */
        usleep(1000);
    assert_int_equal(t.rc[0], RL_ETIMEOUT);
    assert_non_null(strstr(t.err, "not acknowledged by receiver 0 (0 of 10 buckets copied)"));
    /* version 1 is still whole in the sender's block: the receiver takes it
     * (its acknowledgements are late), then version 2 */
    if (rl_weight_ipc_recv_poll(r, 20000))
        fail_msg("version 1: %s", rl_error_message());
    t.go = 2;
    int rc = rl_weight_ipc_recv_poll(r, 20000);
    pthread_join(th, NULL);
    if (rc || t.rc[1])
        fail_msg("receiver %d (%s), sender %d (%s)", rc, rc ? rl_error_message() : "", t.rc[1], t.err);
    uint64_t v = 0;
    assert_int_equal(s_check(RL_WEIGHT_IPC_SHM, rl_weight_ipc_recv_active(r, &v), t.n, 2), -1);
    assert_int_equal(v, 2);
    rl_weight_ipc_receiver_free(r);
    rl_weight_ipc_sender_free(t.s);
    rl_weight_ipc_free(RL_WEIGHT_IPC_SHM, t.blk);
}

static void test_ipc_cuda_versions(void **state)
{
    (void)state;
    if (!s_usable(RL_WEIGHT_IPC_CUDA)) {
        skip();
        return;
    }
    s_versions(RL_WEIGHT_IPC_CUDA);
}

static void test_ipc_cuda_sender_killed(void **state)
{
    (void)state;
    if (!s_usable(RL_WEIGHT_IPC_CUDA)) {
        skip();
        return;
    }
    s_killed(RL_WEIGHT_IPC_CUDA);
}

/* ---- hostile senders: a raw ROUTER speaking the wire format of channel_ipc.c ---- */

typedef struct {
    uint32_t magic, kind, index, n_buckets;
    uint64_t version, offset, bytes, per, total, block;
    unsigned char handle[64];
} s_bucket;

typedef struct {
    const char *what, *expect;
    s_bucket b;
    size_t size;
} s_case;

static void test_ipc_hostile_sender(void **state)
{
    (void)state;
    const int64_t n = 1000;
    void *ctx = zmq_ctx_new();
    void *router = zmq_socket(ctx, ZMQ_ROUTER);
    int linger = 0;
    zmq_setsockopt(router, ZMQ_LINGER, &linger, sizeof linger);
    assert_int_equal(zmq_bind(router, "tcp://127.0.0.1:*"), 0);
    char ep[256];
    size_t len = sizeof ep;
    zmq_getsockopt(router, ZMQ_LAST_ENDPOINT, ep, &len);
    rl_weight_ipc_receiver *r = rl_weight_ipc_receiver_new(ep, RL_WEIGHT_IPC_SHM, n);
    assert_non_null(r);
    unsigned char id[256], have[16];
    int idn = zmq_recv(router, id, sizeof id, 0);
    assert_true(idn > 0);
    assert_int_equal(zmq_recv(router, have, sizeof have, 0), 16);
    /* a real block with version 5's pattern for the well-formed parts */
    float *blk = rl_weight_ipc_alloc(RL_WEIGHT_IPC_SHM, sizeof(float) * (size_t)n);
    assert_non_null(blk);
    for (int64_t i = 0; i < n; i++)
        blk[i] = s_pattern(i, 5);
    s_bucket good = {0x42494c52u, RL_WEIGHT_IPC_SHM, 0, 1, 5, 0, 4000, 4000, 4000, 4000, {0}};
    assert_int_equal(rl_ipc_mem_get(RL_WEIGHT_IPC_SHM)->export_(blk, good.handle), 0); /* what a sender does */
    s_case cases[8];
    int nc = 0;
    cases[nc] = (s_case){"short message", "malformed message", good, 40};
    nc++;
    cases[nc] = (s_case){"another memory kind", "uses cuda_ipc memory", good, sizeof good};
    cases[nc].b.kind = RL_WEIGHT_IPC_CUDA;
    nc++;
    cases[nc] = (s_case){"another size", "expects 4000", good, sizeof good};
    cases[nc].b.total = cases[nc].b.bytes = cases[nc].b.per = cases[nc].b.block = 8000;
    nc++;
    cases[nc] = (s_case){"a gap", "does not tile", good, sizeof good};
    cases[nc].b.n_buckets = 2, cases[nc].b.per = 2000, cases[nc].b.bytes = 1000;
    nc++;
    cases[nc] = (s_case){"a block smaller than the buffer", "does not tile", good, sizeof good};
    cases[nc].b.block = 100;
    nc++;
    cases[nc] = (s_case){"a garbage handle", "not a /rlrt-w-* name", good, sizeof good};
    memset(cases[nc].b.handle, 'x', sizeof cases[nc].b.handle);
    nc++;
    cases[nc] = (s_case){"a segment that does not exist", "no such segment", good, sizeof good};
    snprintf((char *)cases[nc].b.handle, sizeof cases[nc].b.handle, "/rlrt-w-0-0");
    nc++;
    for (int c = 0; c < nc; c++) {
        assert_true(zmq_send(router, id, (size_t)idn, ZMQ_SNDMORE) >= 0);
        assert_true(zmq_send(router, &cases[c].b, cases[c].size, 0) >= 0);
        int rc = rl_weight_ipc_recv_poll(r, 5000);
        if (rc == 0 || !strstr(rl_error_message(), cases[c].expect))
            fail_msg("%s: rc %d, message '%s' (want '%s')", cases[c].what, rc, rl_error_message(),
                     cases[c].expect);
        uint64_t v = 9;
        rl_weight_ipc_recv_active(r, &v);
        assert_int_equal(v, 0);
    }
    /* and the well-formed one is taken: version 5 active, acknowledged */
    assert_true(zmq_send(router, id, (size_t)idn, ZMQ_SNDMORE) >= 0);
    assert_true(zmq_send(router, &good, sizeof good, 0) >= 0);
    if (rl_weight_ipc_recv_poll(r, 5000))
        fail_msg("the well-formed bucket: %s", rl_error_message());
    uint64_t v = 0;
    const float *act = rl_weight_ipc_recv_active(r, &v);
    assert_int_equal(v, 5);
    assert_int_equal(s_check(RL_WEIGHT_IPC_SHM, act, n, 5), -1);
    assert_true(zmq_recv(router, id, sizeof id, 0) > 0);
    uint32_t ack[4];
    assert_int_equal(zmq_recv(router, ack, sizeof ack, 0), 16);
    assert_int_equal(ack[0], 0x48494c52u); /* HAVE */
    assert_int_equal(ack[2], 5);
    rl_weight_ipc_receiver_free(r);
    rl_weight_ipc_free(RL_WEIGHT_IPC_SHM, blk);
    zmq_close(router);
    zmq_ctx_term(ctx);
}

static void test_ipc_refused(void **state)
{
    (void)state;
    assert_null(rl_weight_ipc_sender_new("tcp://127.0.0.1:*", (rl_weight_ipc_kind)7, 0, 0));
    assert_non_null(strstr(rl_error_message(), "unknown memory kind 7"));
    assert_null(rl_weight_ipc_receiver_new("tcp://127.0.0.1:1", RL_WEIGHT_IPC_SHM, -1));
    assert_non_null(strstr(rl_error_message(), "negative"));
    rl_weight_ipc_sender *s = rl_weight_ipc_sender_new("tcp://127.0.0.1:*", RL_WEIGHT_IPC_SHM, 0, 0);
    assert_non_null(s);
    float host[4] = {0};
    /* a block that is not shared memory cannot be exported */
    assert_int_not_equal(rl_weight_ipc_send(s, 1, host, 4, 1, 100), 0);
    assert_non_null(strstr(rl_error_message(), "not the start of a shared block"));
    float *blk = rl_weight_ipc_alloc(RL_WEIGHT_IPC_SHM, 16);
    assert_non_null(blk);
    /* nobody connects */
    assert_int_equal(rl_weight_ipc_send(s, 1, blk, 4, 1, 100), RL_ETIMEOUT);
    assert_non_null(strstr(rl_error_message(), "0 of 1 receivers connected"));
    rl_weight_ipc_free(RL_WEIGHT_IPC_SHM, blk);
    rl_weight_ipc_sender_free(s);
#ifndef RL_CUDA
    assert_int_equal(rl_weight_ipc_available(RL_WEIGHT_IPC_CUDA), 0);
    assert_non_null(strstr(rl_error_message(), "no CUDA"));
#endif
}

int main(int argc, char **argv)
{
    if (argc == 8 && strcmp(argv[1], "--ipc-sender") == 0)
        return s_sender(argv + 2);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ipc_shm_versions),
        cmocka_unit_test(test_ipc_shm_sender_killed),
        cmocka_unit_test(test_ipc_shm_receiver_restarted),
        cmocka_unit_test(test_ipc_shm_late_acknowledgements),
        cmocka_unit_test(test_ipc_hostile_sender),
        cmocka_unit_test(test_ipc_refused),
        cmocka_unit_test(test_ipc_cuda_versions),
        cmocka_unit_test(test_ipc_cuda_sender_killed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
