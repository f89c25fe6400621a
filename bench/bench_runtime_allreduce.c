/* bench_runtime_allreduce.c — ring all-reduce over ZeroMQ among W = 2 and 4
 * CPU processes versus the ring's bandwidth bound, measured in the same run.
 *
 * A ring all-reduce moves 2(W-1)/W x bytes through every link, so with a
 * link rate R (measured here as a raw ZeroMQ PUSH->PULL transfer of the same
 * size between two processes, same transport, same segment size) it cannot
 * finish faster than  t_bound = 2(W-1)/W x bytes / R.  The bench prints
 * t_bound / t_measured (1.0 = at the bound; on a machine with fewer cores
 * than ranks the reduction arithmetic and the ranks share CPUs, so expect
 * less).
 *
 * Environment: RL_BENCH_MIB (default 256), RL_BENCH_ENDPOINT (default
 * tcp://127.0.0.1; ipc:// also works), RL_BENCH_ITERS (timed repetitions
 * per round after a warm-up; default 1), RL_BENCH_ROUNDS (interleaved rounds
 * of raw, W = 2 and W = 4; the best of each is reported; default 3),
 * RL_BENCH_SEGMENT_KIB (default 1024),
 * RL_BENCH_IO_THREADS (ZeroMQ I/O threads per rank, default 1).
 *
 * Two arms per W: the default communicator (ranks on this host all-reduce
 * through shared memory: allreduce_wW_*) and the ring over its sockets
 * alone (options.shared_memory = 0: allreduce_wW_ring_sockets_*), both
 * over the same bound. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#include "rlrt/error.h"
#include "rlrt/nn/params.h"
#include "rlrt/runtime/collective.h"

static double s_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static long s_env(const char *name, long def)
{
    const char *v = getenv(name);
    return v && *v ? strtol(v, NULL, 10) : def;
}

/* ---- raw point-to-point: rank 0 pushes `bytes` in segments, rank 1 copies
 * them into its buffer and acks; best time of `iters`. ---- */
static int s_raw_child(int role, const char *data_ep, const char *ack_ep, size_t bytes,
                       size_t seg, int iters, int out_fd)
{
    void *ctx = zmq_ctx_new();
    char *buf = malloc(bytes);
    if (!ctx || !buf)
        return 1;
    memset(buf, role + 1, bytes);
    int zero = 0, linger = 5000;
    void *data = zmq_socket(ctx, role == 0 ? ZMQ_PUSH : ZMQ_PULL);
    void *ack = zmq_socket(ctx, role == 0 ? ZMQ_PULL : ZMQ_PUSH);
    zmq_setsockopt(data, role == 0 ? ZMQ_SNDHWM : ZMQ_RCVHWM, &zero, sizeof zero);
    zmq_setsockopt(data, ZMQ_LINGER, &linger, sizeof linger);
    zmq_setsockopt(ack, ZMQ_LINGER, &linger, sizeof linger);
    if (role == 1) {
        if (zmq_bind(data, data_ep) || zmq_connect(ack, ack_ep))
            return 2;
    } else {
        if (zmq_connect(data, data_ep) || zmq_bind(ack, ack_ep))
            return 2;
    }
    double best = 1e30;
    for (int it = 0; it <= iters; it++) { /* iteration 0 warms up */
        if (role == 0) {
            double t0 = s_now();
            for (size_t off = 0; off < bytes; off += seg) {
                size_t n = bytes - off < seg ? bytes - off : seg;
                zmq_msg_t m;
                zmq_msg_init_size(&m, n);
                memcpy(zmq_msg_data(&m), buf + off, n);
                zmq_msg_send(&m, data, 0);
            }
            char a;
            zmq_recv(ack, &a, 1, 0);
            double t = s_now() - t0;
            if (it > 0 && t < best)
                best = t;
        } else {
            for (size_t off = 0; off < bytes; off += seg) {
                zmq_msg_t m;
                zmq_msg_init(&m);
                zmq_msg_recv(&m, data, 0);
                memcpy(buf + off, zmq_msg_data(&m), zmq_msg_size(&m));
                zmq_msg_close(&m);
            }
            zmq_send(ack, "k", 1, 0);
        }
    }
    if (role == 0 && write(out_fd, &best, sizeof best) != (ssize_t)sizeof best)
        return 3;
    zmq_close(data);
    zmq_close(ack);
    zmq_ctx_term(ctx);
    free(buf);
    return 0;
}

/* A loopback port free right now (the baseline's two sockets only: the
 * collectives bind wildcard ports themselves). */
static int s_free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET};
    inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
    socklen_t len = sizeof sa;
    int port = -1;
    if (fd >= 0 && bind(fd, (struct sockaddr *)&sa, sizeof sa) == 0 &&
        getsockname(fd, (struct sockaddr *)&sa, &len) == 0)
        port = ntohs(sa.sin_port);
    if (fd >= 0)
        close(fd);
    return port;
}

static double s_raw_seconds(const char *endpoint, size_t bytes, size_t seg, int iters)
{
    char data_ep[256], ack_ep[256];
    if (strncmp(endpoint, "ipc://", 6) == 0) {
        snprintf(data_ep, sizeof data_ep, "ipc:///tmp/rlrt-bench-raw-%d-d", (int)getpid());
        snprintf(ack_ep, sizeof ack_ep, "ipc:///tmp/rlrt-bench-raw-%d-a", (int)getpid());
    } else {
        int pa = s_free_port(), pb = s_free_port();
        if (pa <= 0 || pb <= 0)
            return -1;
        snprintf(data_ep, sizeof data_ep, "%s:%d", endpoint, pa);
        snprintf(ack_ep, sizeof ack_ep, "%s:%d", endpoint, pb);
    }
    int fds[2];
    if (pipe(fds))
        return -1;
    pid_t pids[2];
    for (int r = 0; r < 2; r++) {
        pids[r] = fork();
        if (pids[r] == 0)
            _exit(s_raw_child(r, data_ep, ack_ep, bytes, seg, iters, fds[1]));
    }
    close(fds[1]);
    double t = -1;
    if (read(fds[0], &t, sizeof t) != (ssize_t)sizeof t)
        t = -1;
    close(fds[0]);
    for (int r = 0; r < 2; r++) {
        int st;
        waitpid(pids[r], &st, 0);
        if (!WIFEXITED(st) || WEXITSTATUS(st))
            t = -1;
    }
    if (strncmp(data_ep, "ipc://", 6) == 0) {
        unlink(data_ep + 6);
        unlink(ack_ep + 6);
    }
    return t;
}

/* ---- ring all-reduce among W processes; rank 0 reports the best time ---- */
static int s_ring_child(const rl_comm_id *id, int W, int rank, int64_t count,
                        const rl_comm_options *o, int iters, int out_fd)
{
    rl_comm *c = rl_comm_init_rank(id, W, rank, o);
    if (!c) {
        fprintf(stderr, "rank %d: %s\n", rank, rl_error_message());
        return 1;
    }
    float *x = rl_param_buffer_new(count), *y = rl_param_buffer_new(count);
    if (!x || !y)
        return 1;
    for (int64_t i = 0; i < count; i++)
        x[i] = (float)((i + rank) % 1000) * 1e-3f;
    memset(y, 0, (size_t)count * sizeof(float));
    double best = 1e30;
    for (int it = 0; it <= iters; it++) {
        if (rl_comm_barrier(c))
            goto fail;
        double t0 = s_now();
        if (rl_comm_all_reduce(c, x, y, count, RL_REDUCE_SUM) || rl_comm_barrier(c))
            goto fail;
        double t = s_now() - t0;
        if (it > 0 && t < best)
            best = t;
    }
    /* spot check: element i is sum over ranks of ((i + r) % 1000) * 1e-3 */
    for (int64_t i = 0; i < count; i += count / 7 + 1) {
        double want = 0;
        for (int r = 0; r < W; r++)
            want += (double)((float)((i + r) % 1000) * 1e-3f);
        if (y[i] < want - 1e-3 || y[i] > want + 1e-3) {
            fprintf(stderr, "rank %d: wrong sum at %lld\n", rank, (long long)i);
            return 1;
        }
    }
    if (rank == 0 && write(out_fd, &best, sizeof best) != (ssize_t)sizeof best)
        return 1;
    rl_param_buffer_free(x);
    rl_param_buffer_free(y);
    rl_comm_destroy(c);
    return 0;
fail:
    fprintf(stderr, "rank %d: %s\n", rank, rl_error_message());
    return 1;
}

static double s_ring_seconds(const char *endpoint, int W, int64_t count,
                             const rl_comm_options *o, int iters)
{
    /* rank 0 makes the id (its rendezvous socket is bound by then) and
     * hands the text to the others, as the driver does */
    rl_comm_id *id = mmap(NULL, sizeof *id, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                          -1, 0);
    int fds[2], ready[2];
    if (id == MAP_FAILED || pipe(fds) || pipe(ready))
        return -1;
    pid_t pids[8];
    for (int r = 0; r < W; r++) {
        pids[r] = fork();
        if (pids[r] == 0) {
            char c = 0;
            if (r == 0) {
                if (rl_comm_id_create(id, strncmp(endpoint, "ipc://", 6) == 0 ? NULL : endpoint))
                    _exit(1);
                for (int k = 1; k < W; k++)
                    if (write(ready[1], &c, 1) != 1)
                        _exit(1);
            } else if (read(ready[0], &c, 1) != 1) {
                _exit(1);
            }
            _exit(s_ring_child(id, W, r, count, o, iters, fds[1]));
        }
    }
    close(ready[0]);
    close(ready[1]);
    close(fds[1]);
    double t = -1;
    if (read(fds[0], &t, sizeof t) != (ssize_t)sizeof t)
        t = -1;
    close(fds[0]);
    for (int r = 0; r < W; r++) {
        int st;
        waitpid(pids[r], &st, 0);
        if (!WIFEXITED(st) || WEXITSTATUS(st))
            t = -1;
    }
    munmap(id, sizeof *id);
    return t;
}

int main(void)
{
    long mib = s_env("RL_BENCH_MIB", 256);
    int iters = (int)s_env("RL_BENCH_ITERS", 1);
    int rounds = (int)s_env("RL_BENCH_ROUNDS", 3);
    if (iters < 1)
        iters = 1;
    if (rounds < 1)
        rounds = 1;
    size_t seg = (size_t)s_env("RL_BENCH_SEGMENT_KIB", 1024) * 1024;
    const char *endpoint = getenv("RL_BENCH_ENDPOINT");
    if (!endpoint || !*endpoint)
        endpoint = "tcp://127.0.0.1";
    size_t bytes = (size_t)mib << 20;
    int64_t count = (int64_t)(bytes / sizeof(float));
    rl_comm_options o;
    rl_comm_options_default(&o);
    o.segment_bytes = seg;
    o.timeout_s = 600;
    o.io_threads = (int)s_env("RL_BENCH_IO_THREADS", 1);

    printf("bench: allreduce_bytes = %zu\n", bytes);
    printf("bench: allreduce_segment_bytes = %zu\n", seg);
    printf("bench: allreduce_transport = %.6s\n", endpoint);
    printf("bench: cpus_online = %ld\n", sysconf(_SC_NPROCESSORS_ONLN));
    fflush(stdout);
    /* The raw transfer and the rings are measured in interleaved rounds
     * (raw, W = 2, W = 4, then again), each the best of `iters` after a
     * warm-up, and the best of each over the rounds is kept: on a shared
     * machine the baseline and the rings then see the same load windows. */
    rl_comm_options ro = o; /* the ring alone: what the sockets give */
    ro.shared_memory = 0;
    double raw = 1e30, ring[2] = {1e30, 1e30}, sock[2] = {1e30, 1e30};
    for (int round = 0; round < rounds; round++) {
        double t = s_raw_seconds(endpoint, bytes, seg, iters);
        if (t <= 0) {
            fprintf(stderr, "raw transfer failed\n");
            return 1;
        }
        raw = t < raw ? t : raw;
        for (int W = 2, k = 0; W <= 4; W += 2, k++) {
            t = s_ring_seconds(endpoint, W, count, &o, iters);
            if (t <= 0) {
                fprintf(stderr, "all-reduce W=%d failed\n", W);
                return 1;
            }
            ring[k] = t < ring[k] ? t : ring[k];
            t = s_ring_seconds(endpoint, W, count, &ro, iters);
            if (t <= 0) {
                fprintf(stderr, "all-reduce W=%d over the ring's sockets failed\n", W);
                return 1;
            }
            sock[k] = t < sock[k] ? t : sock[k];
        }
    }
    double rate = (double)bytes / raw;
    printf("bench: raw_p2p_seconds = %.4f\n", raw);
    printf("bench: raw_p2p_GBps = %.3f\n", rate / 1e9);
    for (int W = 2, k = 0; W <= 4; W += 2, k++) {
        double t = ring[k];
        double moved = 2.0 * (W - 1) / W * (double)bytes;
        double bound = moved / rate;
        printf("bench: allreduce_w%d_seconds = %.4f\n", W, t);
        printf("bench: allreduce_w%d_busbw_GBps = %.3f\n", W, moved / t / 1e9);
        printf("bench: allreduce_w%d_bound_seconds = %.4f\n", W, bound);
        printf("bench: allreduce_w%d_bound_over_measured = %.3f\n", W, bound / t);
        printf("bench: allreduce_w%d_ring_sockets_seconds = %.4f\n", W, sock[k]);
        printf("bench: allreduce_w%d_ring_sockets_bound_over_measured = %.3f\n", W, bound / sock[k]);
    }
    fflush(stdout);
    return 0;
}
