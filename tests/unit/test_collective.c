/* test_collective.c — ring collectives among W = 1..4 forked processes over
 * real ZeroMQ sockets (ipc and tcp).
 *
 * Reference: every rank's input is a deterministic function of (rank, i), so
 * each process computes the single-process result itself. The ring's
 * summation order is fixed (collective.h): element i of chunk c is
 * ((x[c+1] + x[c+2]) + ... ) + x[c], ranks mod W, in float32 — the reference
 * adds in that order and results are compared BIT-EXACTLY. As an independent
 * sanity check they are also compared with a plain rank-order sum in double
 * (tolerance 1e-5 relative to sum |x|). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>
#include <zmq.h>

#include "rlrt/error.h"
#include "rlrt/runtime/collective.h"
#include "common/runtime/abort.h"
#include "common/runtime/net.h"

static float s_input(int rank, int64_t i)
{
    uint32_t h = (uint32_t)(i * 2654435761u) ^ (uint32_t)((rank + 1) * 0x9e3779b9u);
    h ^= h >> 15;
    h *= 0x85ebca6bu;
    h ^= h >> 13;
    /* mixed magnitudes so that the order of additions changes the result */
    float mag = (h & 3) == 0 ? 1000.0f : (h & 3) == 1 ? 1.0f : 1e-3f;
    return ((float)(h >> 8) / 16777216.0f - 0.5f) * mag;
}

/* The ring's documented summation order. */
static float s_ring_sum(int W, int64_t count, int64_t i, rl_reduce_op op)
{
    int64_t per = (count + W - 1) / W;
    int c = (int)(i / per);
    float acc = s_input((c + 1) % W, i);
    for (int k = 2; k <= W; k++)
        acc = acc + s_input((c + k) % W, i);
    if (W == 1)
        acc = s_input(0, i);
    return op == RL_REDUCE_AVG ? acc / (float)W : acc;
}

#define CHECK(cond, ...)                                                                  \
    do {                                                                                  \
        if (!(cond)) {                                                                    \
            fprintf(stderr, "rank %d: ", rank);                                           \
            fprintf(stderr, __VA_ARGS__);                                                 \
            fprintf(stderr, " [%s:%d]\n", __FILE__, __LINE__);                            \
            return 1;                                                                     \
        }                                                                                 \
    } while (0)

static int s_same_bits(float a, float b) { return memcmp(&a, &b, sizeof a) == 0; }

/* Largest count a run uses (tiny segments make huge counts slow). */
static int64_t s_max_count = 300007;

/* One rank's whole test sequence on an established communicator: counts
 * of 0, below W, not divisible by W, and spanning many segments. */
static int s_rank_body(rl_comm *comm, int W, int rank)
{
    static const int64_t counts[] = {0, 1, 2, 3, 7, 1001, 300007};
    for (size_t t = 0; t < sizeof counts / sizeof counts[0]; t++) {
        int64_t n = counts[t];
        if (n > s_max_count)
            continue;
        float *x = malloc((size_t)(n + 1) * sizeof(float));
        float *y = malloc((size_t)(n + 1) * sizeof(float));
        float *z = malloc((size_t)(n + 1) * sizeof(float));
        CHECK(x && y && z, "malloc");
        for (int64_t i = 0; i < n; i++)
            x[i] = s_input(rank, i);
        int64_t b, e;
        rl_shard_range(n, W, rank, &b, &e);

        /* all-reduce sum, out of place */
        int rc = rl_comm_all_reduce(comm, x, y, n, RL_REDUCE_SUM);
        CHECK(rc == 0, "all_reduce n=%lld: %s", (long long)n, rl_error_message());
        for (int64_t i = 0; i < n; i++) {
            float want = s_ring_sum(W, n, i, RL_REDUCE_SUM);
            CHECK(s_same_bits(y[i], want), "all_reduce n=%lld i=%lld: %.9g != %.9g",
                  (long long)n, (long long)i, y[i], want);
            double plain = 0, mag = 0;
            for (int r = 0; r < W; r++) {
                plain += s_input(r, i);
                mag += fabs(s_input(r, i));
            }
            CHECK(fabs(y[i] - plain) <= 1e-5 * mag + 1e-30, "all_reduce i=%lld far from sum",
                  (long long)i);
        }
        /* all-reduce average, in place */
        memcpy(z, x, (size_t)n * sizeof(float));
        rc = rl_comm_all_reduce(comm, z, z, n, RL_REDUCE_AVG);
        CHECK(rc == 0, "all_reduce avg: %s", rl_error_message());
        for (int64_t i = 0; i < n; i++)
            CHECK(s_same_bits(z[i], s_ring_sum(W, n, i, RL_REDUCE_AVG)),
                  "all_reduce avg n=%lld i=%lld", (long long)n, (long long)i);

        /* reduce-scatter: rank r gets exactly its shard */
        for (int64_t i = 0; i < n; i++)
            z[i] = -1.0f;
        rc = rl_comm_reduce_scatter(comm, x, z, n, RL_REDUCE_SUM);
        CHECK(rc == 0, "reduce_scatter: %s", rl_error_message());
        for (int64_t i = b; i < e; i++)
            CHECK(s_same_bits(z[i - b], s_ring_sum(W, n, i, RL_REDUCE_SUM)),
                  "reduce_scatter n=%lld i=%lld", (long long)n, (long long)i);
        for (int64_t i = e - b; i < n; i++)
            CHECK(z[i] == -1.0f, "reduce_scatter wrote past its shard at %lld", (long long)i);
        /* in place: recvbuf = sendbuf + begin */
        memcpy(z, x, (size_t)n * sizeof(float));
        rc = rl_comm_reduce_scatter(comm, z, z + b, n, RL_REDUCE_AVG);
        CHECK(rc == 0, "reduce_scatter in place: %s", rl_error_message());
        for (int64_t i = b; i < e; i++)
            CHECK(s_same_bits(z[i], s_ring_sum(W, n, i, RL_REDUCE_AVG)),
                  "reduce_scatter in place i=%lld", (long long)i);

        /* all-gather: shard of owner o is s_input(o + 100, i) */
        for (int64_t i = b; i < e; i++)
            z[i - b] = s_input(rank + 100, i);
        rc = rl_comm_all_gather(comm, z, y, n);
        CHECK(rc == 0, "all_gather: %s", rl_error_message());
        int64_t per = n ? (n + W - 1) / W : 1;
        for (int64_t i = 0; i < n; i++)
            CHECK(s_same_bits(y[i], s_input((int)(i / per) + 100, i)),
                  "all_gather n=%lld i=%lld", (long long)n, (long long)i);
        /* in place: sendbuf = recvbuf + begin */
        for (int64_t i = 0; i < n; i++)
            y[i] = (i >= b && i < e) ? s_input(rank + 200, i) : 0.0f;
        rc = rl_comm_all_gather(comm, y + b, y, n);
        CHECK(rc == 0, "all_gather in place: %s", rl_error_message());
        for (int64_t i = 0; i < n; i++)
            CHECK(s_same_bits(y[i], s_input((int)(i / per) + 200, i)),
                  "all_gather in place i=%lld", (long long)i);

        /* broadcast from a root that moves with the test */
        int root = (int)(t % (size_t)W);
        for (int64_t i = 0; i < n; i++)
            y[i] = rank == root ? x[i] : 0.0f;
        rc = rl_comm_broadcast(comm, y, y, n, root);
        CHECK(rc == 0, "broadcast: %s", rl_error_message());
        for (int64_t i = 0; i < n; i++)
            CHECK(s_same_bits(y[i], s_input(root, i)), "broadcast root %d i=%lld", root,
                  (long long)i);
        CHECK(rl_comm_barrier(comm) == 0, "barrier: %s", rl_error_message());
        free(x);
        free(y);
        free(z);
    }
    return 0;
}

typedef int (*s_body_fn)(const rl_comm_id *id, int W, int rank, const rl_comm_options *o);

/* options.shared_memory of the ranks s_run_ranks forks */
static int s_shared_memory = 1;

static int s_join_and_run(const rl_comm_id *id, int W, int rank, const rl_comm_options *o)
{
    rl_comm *comm = rl_comm_init_rank(id, W, rank, o);
    CHECK(comm, "init: %s", rl_error_message());
    CHECK(rl_comm_rank(comm) == rank && rl_comm_world(comm) == W, "rank/world");
    /* forked ranks share the host: all-reduce takes shared memory unless off */
    const char *want = W > 1 && o->shared_memory ? "shm" : "ring";
    CHECK(strcmp(rl_comm_transport(comm), want) == 0, "transport %s, want %s",
          rl_comm_transport(comm), want);
    int rc = s_rank_body(comm, W, rank);
    rl_comm_destroy(comm);
    return rc;
}

/* Forks W ranks running `body`; returns how many exited non-zero. A tcp id
 * without a port binds its rendezvous socket in the process that makes it,
 * so rank 0 makes it (as an rlrt worker does) and hands its text to the
 * other ranks through shared memory and a pipe (the driver's part). */
static int s_run_ranks(const char *endpoint, int W, size_t seg_bytes, s_body_fn body)
{
    rl_comm_id *copy = mmap(NULL, sizeof *copy, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                            -1, 0);
    assert_true(copy != MAP_FAILED);
    int rank0_makes = endpoint && strncmp(endpoint, "tcp://", 6) == 0 && !strchr(endpoint + 6, ':');
    int ready[2];
    assert_int_equal(pipe(ready), 0);
    if (!rank0_makes) {
        rl_comm_id id;
        assert_int_equal(rl_comm_id_create(&id, endpoint), 0);
        /* the id travels as text, as it would over the control plane */
        assert_int_equal(rl_comm_id_parse(copy, rl_comm_id_string(&id)), 0);
    }
    rl_comm_options o;
    rl_comm_options_default(&o);
    o.timeout_s = 20.0;
    o.shared_memory = s_shared_memory;
    if (seg_bytes)
        o.segment_bytes = seg_bytes;
    pid_t pids[8];
    for (int r = 0; r < W; r++) {
        pids[r] = fork();
        assert_true(pids[r] >= 0);
        if (pids[r] == 0) {
            if (rank0_makes && r == 0) {
                rl_comm_id id;
                if (rl_comm_id_create(&id, endpoint) ||
                    rl_comm_id_parse(copy, rl_comm_id_string(&id)))
                    _exit(3);
                for (int k = 1; k < W; k++)
                    if (write(ready[1], "x", 1) != 1)
                        _exit(3);
            } else if (rank0_makes) {
                char c;
                if (read(ready[0], &c, 1) != 1)
                    _exit(3);
            }
            _exit(body(copy, W, r, &o));
        }
    }
    close(ready[0]);
    close(ready[1]);
    int bad = 0;
    for (int r = 0; r < W; r++) {
        int st;
        assert_int_equal(waitpid(pids[r], &st, 0), pids[r]);
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
            bad++;
    }
    munmap(copy, sizeof *copy);
    return bad;
}

static void test_ring_ipc_small_segments(void **state)
{
    (void)state;
    /* 12-byte segments: every chunk streams as many messages */
    s_max_count = 1001;
    for (int W = 1; W <= 4; W++)
        assert_int_equal(s_run_ranks(NULL, W, 12, s_join_and_run), 0);
    s_max_count = 300007;
}

static void test_ring_ipc_default_segments(void **state)
{
    (void)state;
    for (int W = 1; W <= 4; W++)
        assert_int_equal(s_run_ranks(NULL, W, 0, s_join_and_run), 0);
}

/* The same checks with the shared-memory path off: all-reduce over the
 * ring's sockets gives the same bits (both against one reference). */
static void test_ring_without_shared_memory(void **state)
{
    (void)state;
    s_shared_memory = 0;
    for (int W = 2; W <= 4; W++)
        assert_int_equal(s_run_ranks(NULL, W, 64 * 1024, s_join_and_run), 0);
    s_shared_memory = 1;
}

static void test_ring_tcp(void **state)
{
    (void)state;
    for (int W = 2; W <= 4; W++)
        assert_int_equal(s_run_ranks("tcp://127.0.0.1", W, 64 * 1024, s_join_and_run), 0);
}

typedef struct s_thread_arg {
    const rl_comm_id *id;
    const rl_comm_options *o;
    int W, rank, rc;
} s_thread_arg;

static void *s_thread_main(void *p)
{
    s_thread_arg *a = p;
    a->rc = s_join_and_run(a->id, a->W, a->rank, a->o);
    return NULL;
}

/* A tcp id without a port is bound when it is made (a wildcard bind that
 * reports the real port): nobody can take the port before rank 0 uses it,
 * which a "find a free port, close it, bind it later" scheme could not
 * promise ("Address already in use", then every rank timing out). */
static void test_id_port_is_held(void **state)
{
    (void)state;
    for (int k = 0; k < 20; k++) {
        rl_comm_id id;
        assert_int_equal(rl_comm_id_create(&id, "tcp://127.0.0.1"), 0);
        int port = 0;
        const char *colon = strrchr(strchr(rl_comm_id_string(&id), '/') + 2, ':');
        assert_non_null(colon);
        port = atoi(colon + 1);
        assert_true(port > 0 && port < 65536);
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
        inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
        assert_int_not_equal(bind(fd, (struct sockaddr *)&sa, sizeof sa), 0);
        close(fd);
    }
}

/* Runs 3 ranks of `id` as threads (counts up to 1001, 4 KiB segments,
 * timeout_s) and asserts each returned 0. */
static void s_ring_threads(rl_comm_id *id, double timeout_s)
{
    rl_comm_options o;
    rl_comm_options_default(&o);
    o.timeout_s = timeout_s;
    o.segment_bytes = 4096;
    s_max_count = 1001;
    pthread_t th[3];
    s_thread_arg args[3];
    for (int r = 0; r < 3; r++) {
        args[r] = (s_thread_arg){.id = id, .o = &o, .W = 3, .rank = r, .rc = -1};
        assert_int_equal(pthread_create(&th[r], NULL, s_thread_main, &args[r]), 0);
    }
    for (int r = 0; r < 3; r++)
        pthread_join(th[r], NULL);
    for (int r = 0; r < 3; r++)
        assert_int_equal(args[r].rc, 0);
    s_max_count = 300007;
}

/* Ranks may be threads of one process too (one communicator each). */
static void test_ring_threads(void **state)
{
    (void)state;
    rl_comm_id id;
    assert_int_equal(rl_comm_id_create(&id, "tcp://127.0.0.1"), 0);
    s_ring_threads(&id, 20.0);
}

/* Anyone can connect to the rendezvous endpoint. A stranger's messages of
 * any shape (more frames than a HELLO, fewer, junk) sent before the ranks
 * join are read whole and ignored: the ring still comes up. */
static void test_rendezvous_ignores_strangers(void **state)
{
    (void)state;
    rl_comm_id id;
    assert_int_equal(rl_comm_id_create(&id, "tcp://127.0.0.1"), 0);
    const char *ep = strstr(rl_comm_id_string(&id), "tcp://");
    assert_non_null(ep);
    void *ctx = zmq_ctx_new();
    assert_non_null(ctx);
    void *stranger = zmq_socket(ctx, ZMQ_DEALER);
    assert_non_null(stranger);
    int linger = 0;
    zmq_setsockopt(stranger, ZMQ_LINGER, &linger, sizeof linger);
    assert_int_equal(rl_net_connect(stranger, ep), 0);
    /* [identity, "x", "y"] at rank 0: one frame too many */
    assert_int_equal(zmq_send(stranger, "x", 1, ZMQ_SNDMORE), 1);
    assert_int_equal(zmq_send(stranger, "y", 1, 0), 1);
    /* a HELLO-looking body followed by junk frames */
    assert_int_equal(zmq_send(stranger, "HELLO", 5, ZMQ_SNDMORE), 5);
    assert_int_equal(zmq_send(stranger, "", 0, ZMQ_SNDMORE), 0);
    assert_int_equal(zmq_send(stranger, "z", 1, 0), 1);
    /* two frames at rank 0, but not HELLOs */
    assert_int_equal(zmq_send(stranger, "", 0, 0), 0);
    assert_int_equal(zmq_send(stranger, "junk", 4, 0), 4);
    usleep(100 * 1000); /* let them arrive before the ranks' HELLOs */
    s_ring_threads(&id, 3.0);
    zmq_close(stranger);
    zmq_ctx_term(ctx);
}

typedef struct s_chatter_arg {
    const char *ep;
    double seconds;
} s_chatter_arg;

/* A stranger sending a junk message every 50 ms for `seconds`. */
static void *s_chatter_main(void *p)
{
    s_chatter_arg *a = p;
    void *ctx = zmq_ctx_new();
    void *sock = ctx ? zmq_socket(ctx, ZMQ_DEALER) : NULL;
    int linger = 0;
    if (sock && zmq_setsockopt(sock, ZMQ_LINGER, &linger, sizeof linger) == 0 &&
        rl_net_connect(sock, a->ep) == 0)
        for (int i = 0; i < (int)(a->seconds * 20); i++) {
            zmq_send(sock, "junk", 4, ZMQ_DONTWAIT);
            usleep(50 * 1000);
        }
    if (sock)
        zmq_close(sock);
    if (ctx)
        zmq_ctx_term(ctx);
    return NULL;
}

/* A stranger's chatter does not keep rank 0 waiting past its timeout. */
static void test_rendezvous_timeout_despite_strangers(void **state)
{
    (void)state;
    rl_comm_id id;
    assert_int_equal(rl_comm_id_create(&id, "tcp://127.0.0.1"), 0);
    s_chatter_arg a = {.ep = strstr(rl_comm_id_string(&id), "tcp://"), .seconds = 3.0};
    assert_non_null(a.ep);
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, s_chatter_main, &a), 0);
    rl_comm_options o;
    rl_comm_options_default(&o);
    o.timeout_s = 0.5;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    assert_null(rl_comm_init_rank(&id, 2, 0, &o));
    clock_gettime(CLOCK_MONOTONIC, &t1);
    int code = rl_error_code();
    char msg[256];
    snprintf(msg, sizeof msg, "%s", rl_error_message());
    pthread_join(th, NULL);
    double took = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    assert_int_equal(code, RL_ETIMEOUT);
    assert_string_equal(msg, "comm rank 0: only 1 of 2 ranks joined within 0.5 s");
    if (took > 2.0)
        fail_msg("rank 0 gave up after %.2f s, not 0.5 s", took);
}

/* Rank 0 all-reduces 10 floats, rank 1 12: both see the other's chunk size. */
static int s_mismatch_body(const rl_comm_id *id, int W, int rank, const rl_comm_options *o)
{
    rl_comm_options oo = *o;
    oo.timeout_s = 2.0;
    rl_comm *comm = rl_comm_init_rank(id, W, rank, &oo);
    CHECK(comm, "init: %s", rl_error_message());
    float buf[12] = {0};
    int rc = rl_comm_all_reduce(comm, buf, buf, rank == 0 ? 10 : 12, RL_REDUCE_SUM);
    CHECK(rc == RL_EPROTO, "expected RL_EPROTO, got %d (%s)", rc, rl_error_message());
    const char *ring = rank == 0
                           ? "all_reduce: rank 0 got a 24-byte message from rank 1, expected 20 "
                             "(ranks called different collectives or counts)"
                           : "all_reduce: rank 1 got a 20-byte message from rank 0, expected 24 "
                             "(ranks called different collectives or counts)";
    const char *shm = rank == 0 ? "all_reduce (shared memory): rank 0 has 10 elements, rank 1 12: "
                                  "every rank must pass the same count"
                                : "all_reduce (shared memory): rank 1 has 12 elements, rank 0 10: "
                                  "every rank must pass the same count";
    const char *want = strcmp(rl_comm_transport(comm), "shm") == 0 ? shm : ring;
    CHECK(strcmp(rl_error_message(), want) == 0, "message '%s'", rl_error_message());
    rc = rl_comm_barrier(comm);
    CHECK(rc == RL_ESTATE, "a failed communicator must refuse further calls");
    CHECK(strcmp(rl_error_message(), "barrier: the communicator failed earlier; destroy it") == 0,
          "message '%s'", rl_error_message());
    rl_comm_destroy(comm);
    return 0;
}

static void test_mismatched_counts(void **state)
{
    (void)state;
    assert_int_equal(s_run_ranks(NULL, 2, 0, s_mismatch_body), 0);
    s_shared_memory = 0;
    assert_int_equal(s_run_ranks(NULL, 2, 0, s_mismatch_body), 0);
    s_shared_memory = 1;
}

static void test_setup_errors(void **state)
{
    (void)state;
    rl_comm_id id;
    assert_int_equal(rl_comm_id_create(&id, NULL), 0);
    assert_null(rl_comm_init_rank(&id, 2, 2, NULL));
    assert_string_equal(rl_error_message(), "comm: rank 2 out of range for world size 2");
    assert_int_equal(rl_comm_id_parse(&id, "nccl 123"), RL_EINVAL);
    assert_string_equal(rl_error_message(), "comm id: malformed 'nccl 123'");
    assert_int_equal(rl_comm_id_create(&id, "udp://x"), RL_EINVAL);
    assert_string_equal(rl_error_message(),
                        "comm id: endpoint 'udp://x' is not tcp://HOST[:PORT] or ipc://PATH");
    /* rank 1 never comes: rank 0 gives up after the timeout */
    assert_int_equal(rl_comm_id_create(&id, NULL), 0);
    rl_comm_options o;
    rl_comm_options_default(&o);
    o.timeout_s = 0.3;
    assert_null(rl_comm_init_rank(&id, 2, 0, &o));
    assert_int_equal(rl_error_code(), RL_ETIMEOUT);
    assert_string_equal(rl_error_message(), "comm rank 0: only 1 of 2 ranks joined within 0.3 s");
    /* world 1 needs no sockets; operations are copies */
    rl_comm *c = rl_comm_init_rank(&id, 1, 0, NULL);
    assert_non_null(c);
    float a[3] = {1, 2, 3}, b[3] = {0};
    assert_int_equal(rl_comm_all_reduce(c, a, b, 3, RL_REDUCE_AVG), 0);
    assert_true(b[0] == 1 && b[1] == 2 && b[2] == 3);
    assert_int_equal(rl_comm_all_reduce(c, a, b, -1, RL_REDUCE_SUM), RL_EINVAL);
    assert_int_equal(rl_comm_broadcast(c, a, b, 3, 1), RL_EINVAL);
    assert_string_equal(rl_error_message(), "broadcast: root 1 out of range for world size 1");
    rl_comm_destroy(c);
}

/* ---- a peer that is gone --------------------------------------------------------- */

static double s_mono(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Rank 1 of a 2-rank ring that joins, then leaves at once (a dead worker:
 * its sockets are closed without reading anything). */
static void *s_leaver_main(void *p)
{
    s_thread_arg *a = p;
    rl_comm *c = rl_comm_init_rank(a->id, a->W, a->rank, a->o);
    a->rc = c ? 0 : -1;
    rl_comm_destroy(c);
    return NULL;
}

typedef struct {
    rl_comm *c;
    float *x, *y;
    int64_t n;
    int reduce; /* 1: an in-place all-reduce of x instead of the all-gather */
    int rc;
    char msg[512];
    double took;
} s_gather_job;

static void *s_gather_main(void *p)
{
    s_gather_job *g = p;
    double t0 = s_mono();
    g->rc = g->reduce ? rl_comm_all_reduce(g->c, g->x, g->x, g->n, RL_REDUCE_SUM)
                      : rl_comm_all_gather(g->c, g->x, g->y, g->n);
    g->took = s_mono() - t0;
    snprintf(g->msg, sizeof g->msg, "%s", rl_error_message());
    return NULL;
}

/* Rank 0 of a ring whose rank 1 joined and died; n floats; timeout_s. */
static rl_comm *s_orphan(rl_comm_id *id, double timeout_s)
{
    assert_int_equal(rl_comm_id_create(id, "tcp://127.0.0.1"), 0);
    static rl_comm_options o;
    rl_comm_options_default(&o);
    o.timeout_s = timeout_s;
    o.segment_bytes = 64 * 1024;
    s_thread_arg leaver = {.id = id, .o = &o, .W = 2, .rank = 1, .rc = -1};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, s_leaver_main, &leaver), 0);
    rl_comm *c = rl_comm_init_rank(id, 2, 0, &o);
    pthread_join(th, NULL);
    assert_non_null(c);
    assert_int_equal(leaver.rc, 0);
    return c;
}

/* A rank waiting in a collective for a dead peer (rank 1 gone, 120 s
 * timeout) returns at once when the process's waits are aborted (what the
 * worker does on the driver's RL_WORKER_ABORT), with RL_EPEER and the
 * reason; the communicator is then broken, and the segments it had sent to
 * the dead rank by reference are released before the call returns (the
 * buffer is freed right after: ASan would see a late read). */
static void test_abort_ends_a_wait_on_a_dead_peer(void **state)
{
    (void)state;
    rl_comm_id id;
    rl_comm *c = s_orphan(&id, 120.0);
    s_gather_job g = {.c = c, .n = 1 << 20};
    g.x = calloc((size_t)g.n, sizeof(float));
    g.y = calloc((size_t)g.n, sizeof(float));
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, s_gather_main, &g), 0);
    usleep(300 * 1000);
    double t0 = s_mono();
    rl_abort_raise("actor/1 was killed by signal 9 (test)");
    pthread_join(th, NULL);
    double after = s_mono() - t0;
    free(g.y);
    assert_int_equal(g.rc, RL_EPEER);
    assert_string_equal(g.msg, "all_gather: rank 0: aborted: actor/1 was killed by signal 9 (test)");
    assert_true(after < 10.0); /* a poll period (50 ms), generous for a loaded machine */
    float a = 1, b = 0;
    assert_int_equal(rl_comm_all_reduce(c, &a, &b, 1, RL_REDUCE_SUM), RL_ESTATE);
    rl_comm_destroy(c);
    free(g.x);
    /* waits that start after the abort are not touched: a new ring works */
    rl_comm_id id2;
    assert_int_equal(rl_comm_id_create(&id2, "tcp://127.0.0.1"), 0);
    s_ring_threads(&id2, 20.0);
}

/* On a thread that runs a worker's call, the waits of that call end when an
 * abort came after the call ARRIVED, even when the wait starts later (a
 * queued call of the failed step): joining a ring fails at once. */
static void test_abort_scope_of_a_call(void **state)
{
    (void)state;
    uint64_t arrived = rl_abort_epoch();
    rl_abort_raise("the step is replayed (test)");
    rl_abort_scope_set(arrived);
    rl_comm_id id;
    assert_int_equal(rl_comm_id_create(&id, NULL), 0);
    double t0 = s_mono();
    assert_null(rl_comm_init_rank(&id, 2, 0, NULL)); /* would wait 120 s for rank 1 */
    assert_int_equal(rl_error_code(), RL_EPEER);
    assert_non_null(strstr(rl_error_message(), "aborted: the step is replayed (test)"));
    assert_true(s_mono() - t0 < 10.0);
    /* a call that arrived after the abort waits as usual (here: times out) */
    rl_abort_scope_set(rl_abort_epoch());
    rl_comm_options o;
    rl_comm_options_default(&o);
    o.timeout_s = 0.3;
    assert_null(rl_comm_init_rank(&id, 2, 0, &o));
    assert_int_equal(rl_error_code(), RL_ETIMEOUT);
    rl_abort_scope_set(0);
}

/* Without an abort, a rank whose peer died fails after one timeout: the
 * wait for the segments the dead rank never took does not add a second
 * one (it did: 2 x actor.comm_timeout_s, 240 s by default). */
static void test_dead_peer_costs_one_timeout(void **state)
{
    (void)state;
    rl_comm_id id;
    rl_comm *c = s_orphan(&id, 3.0);
    s_gather_job g = {.c = c, .n = 1 << 20};
    g.x = calloc((size_t)g.n, sizeof(float));
    g.y = calloc((size_t)g.n, sizeof(float));
    s_gather_main(&g);
    free(g.y);
    free(g.x);
    assert_int_equal(g.rc, RL_ETIMEOUT);
    assert_non_null(strstr(g.msg, "all_gather: rank 0 waited more than 3 s for rank 1"));
    assert_true(g.took >= 2.9);
    assert_true(g.took < 5.0); /* one timeout and a margin; two would be 6 s */
    rl_comm_destroy(c);
}

/* The shared-memory all-reduce with its peer gone: one timeout, naming the
 * rank that did not arrive; an abort ends the wait within a poll period. */
static void test_shared_memory_dead_peer(void **state)
{
    (void)state;
    rl_comm_id id;
    rl_comm *c = s_orphan(&id, 1.0);
    assert_string_equal(rl_comm_transport(c), "shm");
    s_gather_job j = {.c = c, .n = 1 << 20, .reduce = 1};
    j.x = calloc((size_t)j.n, sizeof(float));
    s_gather_main(&j);
    assert_int_equal(j.rc, RL_ETIMEOUT);
    assert_string_equal(j.msg, "all_reduce (shared memory): rank 0 waited 1.0 s for rank 1");
    assert_true(j.took >= 0.9 && j.took < 3.0);
    float a = 1, b = 0;
    assert_int_equal(rl_comm_all_reduce(c, &a, &b, 1, RL_REDUCE_SUM), RL_ESTATE);
    rl_comm_destroy(c);

    c = s_orphan(&id, 120.0);
    j = (s_gather_job){.c = c, .n = 1 << 20, .x = j.x, .reduce = 1};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, s_gather_main, &j), 0);
    usleep(300 * 1000);
    double t0 = s_mono();
    rl_abort_raise("actor/1 was killed by signal 9 (shm test)");
    pthread_join(th, NULL);
    assert_int_equal(j.rc, RL_EPEER);
    assert_non_null(strstr(j.msg, "aborted: actor/1 was killed by signal 9 (shm test)"));
    assert_true(s_mono() - t0 < 10.0);
    rl_comm_destroy(c);
    free(j.x);
}

/* The shard layout every collective uses: contiguous, ceil(total/W) long,
 * the tail short or empty; shards tile [0, total) exactly. */
static void test_shard_range(void **state)
{
    (void)state;
    int64_t b, e;
    rl_shard_range(10, 3, 0, &b, &e);
    assert_true(b == 0 && e == 4);
    rl_shard_range(10, 3, 2, &b, &e);
    assert_true(b == 8 && e == 10);
    rl_shard_range(2, 4, 3, &b, &e); /* more ranks than elements: empty tail */
    assert_true(b == 2 && e == 2);
    rl_shard_range(0, 2, 1, &b, &e);
    assert_true(b == 0 && e == 0);
    for (int W = 1; W <= 9; W++)
        for (int64_t total = 0; total < 40; total++) {
            int64_t at = 0;
            for (int r = 0; r < W; r++) {
                rl_shard_range(total, W, r, &b, &e);
                assert_true(b == at && e >= b && e - b <= (total + W - 1) / W);
                at = e;
            }
            assert_true(at == total);
        }
    /* no overflow near INT64_MAX */
    rl_shard_range(INT64_MAX, 2, 1, &b, &e);
    assert_true(b == INT64_MAX / 2 + 1 && e == INT64_MAX);
    /* invalid arguments give an empty range instead of dividing by zero */
    rl_shard_range(10, 0, 0, &b, &e);
    assert_true(b == 0 && e == 0);
    rl_shard_range(10, 2, 2, &b, &e);
    assert_true(b == 0 && e == 0);
    rl_shard_range(10, 2, -1, &b, &e);
    assert_true(b == 0 && e == 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ring_ipc_small_segments),
        cmocka_unit_test(test_ring_ipc_default_segments),
        cmocka_unit_test(test_ring_tcp),
        cmocka_unit_test(test_ring_threads),
        cmocka_unit_test(test_rendezvous_ignores_strangers),
        cmocka_unit_test(test_rendezvous_timeout_despite_strangers),
        cmocka_unit_test(test_id_port_is_held),
        cmocka_unit_test(test_mismatched_counts),
        cmocka_unit_test(test_setup_errors),
        cmocka_unit_test(test_shard_range),
        cmocka_unit_test(test_abort_ends_a_wait_on_a_dead_peer),
        cmocka_unit_test(test_abort_scope_of_a_call),
        cmocka_unit_test(test_dead_peer_costs_one_timeout),
        cmocka_unit_test(test_ring_without_shared_memory),
        cmocka_unit_test(test_shared_memory_dead_peer),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
