/* bench_wire.c — DataProto over ZeroMQ vs memcpy vs a raw TCP socket blast.
 *
 * For batch sizes 1 MiB .. 1 GiB (BENCH_WIRE_MAX_MIB caps it), all measured in
 * this one run, side by side:
 *   memcpy       one memcpy of the batch bytes (destination pre-faulted)
 *   rawtcp       plain BSD sockets between two processes (fork): length, bytes,
 *                1-byte ack; the receiver reads into a pre-faulted buffer. Run
 *                with kernel autotuned buffers and with 4 MiB buffers; ratios
 *                use whichever was faster
 *   dp_tcp/ipc   rl_wire_send_dataproto -> rl_wire_recv_dataproto between two
 *                processes over tcp://127.0.0.1 and ipc://, 1-frame ack back
 *   encdec       rl_wire_encode + rl_wire_decode_msgs (no transport) as a
 *                fraction of the memcpy time of the same bytes
 * Every transfer is timed from the send call until the receiver's ack, so
 * latency and throughput are measured the same way for both transports.
 *
 * The batch: 64 rows, tensor "x" f32 (64, N) with nearly all the bytes, "mask"
 * u8 (64, 64), column "uid" (64 strings), meta {"step": 1}.
 *
 * Tuning (why the numbers are what they are): no message size limit
 * (ZMQ_MAXMSGSIZE -1); sends are zero-copy from the tensor; receives are
 * zero-copy into the tensor (libzmq reads large frames straight into the
 * message). The receiving
 * process keeps freed memory in its heap (mallopt: no mmap, no trim, one
 * arena so libzmq's I/O thread allocates from the same heap) so each received
 * batch reuses already-faulted pages as the raw-TCP receiver's fixed buffer
 * does; without it every 256 MiB+ batch page-faults its whole size and runs
 * at a third of the speed. Kernel socket buffers are left to autotuning
 * (fixed 4 MiB SO_SNDBUF/RCVBUF measured slower for raw TCP too);
 * BENCH_WIRE_ZMQ_BUF=<bytes> sets ZMQ_SNDBUF/RCVBUF to compare.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <malloc.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "rlrt/error.h"
#include "rlrt/dtype.h"
#include "rlrt/tensor.h"
#include "rlrt/dataproto.h"
#include "rlrt/wire.h"

#define ROWS 64

static double s_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void s_die(const char *what)
{
    fprintf(stderr, "bench_wire: %s: %s (%s)\n", what, strerror(errno), rl_error_message());
    exit(1);
}

static rl_dataproto *s_batch(size_t bytes)
{
    rl_dataproto *dp = rl_dataproto_new();
    int64_t sx[2] = {ROWS, (int64_t)((bytes - ROWS * 64) / (4 * ROWS))};
    int64_t sm[2] = {ROWS, 64};
    rl_tensor *x = rl_dataproto_new_tensor(dp, "x", RL_F32, 2, sx);
    rl_tensor *m = rl_dataproto_new_tensor(dp, "mask", RL_U8, 2, sm);
    if (!x || !m)
        s_die("batch");
    float *xd = rl_tensor_data(x);
    for (int64_t i = 0; i < x->numel; i++)
        xd[i] = (float)(i & 1023);
    memset(rl_tensor_data(m), 1, rl_tensor_nbytes(m));
    rl_column *uid = rl_dataproto_new_column(dp, "uid", RL_COL_STRING);
    for (int r = 0; r < ROWS; r++) {
        char s[32];
        snprintf(s, sizeof s, "prompt-%d", r / 8);
        rl_column_set_str(uid, r, s);
    }
    json_object_set_new(rl_dataproto_meta(dp), "step", json_integer(1));
    return dp;
}

static size_t s_batch_bytes(const rl_dataproto *dp)
{
    size_t n = 0;
    for (int i = 0; i < rl_dataproto_tensor_count(dp); i++)
        n += rl_tensor_nbytes(rl_dataproto_tensor_at(dp, i));
    return n;
}

static int s_reps(size_t bytes)
{
    size_t r = ((size_t)1 << 30) / bytes;
    return r < 3 ? 3 : r > 100 ? 100 : (int)r;
}

/* ---- memcpy and encode/decode --------------------------------------------------- */

static double s_memcpy_s(const void *src, size_t n, int reps)
{
    char *dst = malloc(n);
    memset(dst, 0, n);
    memcpy(dst, src, n); /* warm */
    double best = 1e30;
    for (int i = 0; i < reps; i++) {
        double t = s_now();
        memcpy(dst, src, n);
        t = s_now() - t;
        if (t < best)
            best = t;
    }
    if (dst[n / 2] != ((const char *)src)[n / 2])
        s_die("memcpy check");
    free(dst);
    return best;
}

static double s_encdec_s(const rl_dataproto *dp, int reps)
{
    double best = 1e30;
    for (int i = 0; i < reps + 1; i++) {
        double t = s_now();
        zmq_msg_t *f;
        int n;
        rl_dataproto *out;
        if (rl_wire_encode(dp, &f, &n) || rl_wire_decode_msgs(f, n, &out))
            s_die("encode/decode");
        rl_dataproto_free(out);
        free(f);
        t = s_now() - t;
        if (i && t < best)
            best = t;
    }
    return best;
}

/* ---- raw TCP ------------------------------------------------------------------------- */

static void s_full_write(int fd, const void *p, size_t n)
{
    const char *c = p;
    while (n) {
        ssize_t w = send(fd, c, n, 0);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            s_die("send");
        c += w;
        n -= (size_t)w;
    }
}

static int s_full_read(int fd, void *p, size_t n)
{
    char *c = p;
    while (n) {
        ssize_t r = recv(fd, c, n, 0);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return -1;
        c += r;
        n -= (size_t)r;
    }
    return 0;
}

static void s_rawtcp_child(int lfd, size_t max, int bufsz)
{
    int fd = accept(lfd, NULL, NULL);
    if (fd < 0)
        s_die("accept");
    if (bufsz)
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &bufsz, sizeof bufsz);
    char *buf = NULL;
    size_t cap = 0;
    for (;;) {
        uint64_t n;
        if (s_full_read(fd, &n, 8) || n == 0 || n > max)
            break;
        if (n > cap) { /* grown and pre-faulted once, outside the timing */
            free(buf);
            buf = malloc(n);
            memset(buf, 0, n);
            cap = n;
        }
        if (s_full_read(fd, buf, n))
            break;
        char ack = buf[n - 1];
        s_full_write(fd, &ack, 1);
    }
    close(fd);
    _exit(0);
}

typedef struct raw_peer {
    int fd;
    pid_t pid;
} raw_peer;

/* bufsz 0 = kernel autotuning, else SO_SNDBUF/SO_RCVBUF of that many bytes
 * (as the ZeroMQ sockets get). */
static raw_peer s_raw_start(size_t max, int bufsz)
{
    int lfd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = 0};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t al = sizeof a;
    if (bind(lfd, (struct sockaddr *)&a, sizeof a) || listen(lfd, 1) ||
        getsockname(lfd, (struct sockaddr *)&a, &al))
        s_die("listen");
    raw_peer p;
    p.pid = fork();
    if (p.pid == 0)
        s_rawtcp_child(lfd, max, bufsz);
    close(lfd);
    p.fd = socket(AF_INET, SOCK_STREAM, 0);
    if (bufsz) {
        setsockopt(p.fd, SOL_SOCKET, SO_SNDBUF, &bufsz, sizeof bufsz);
        setsockopt(p.fd, SOL_SOCKET, SO_RCVBUF, &bufsz, sizeof bufsz);
    }
    if (connect(p.fd, (struct sockaddr *)&a, sizeof a))
        s_die("connect");
    int one = 1;
    setsockopt(p.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return p;
}

/* One transfer of the batch's tensor bytes; seconds until the ack. */
static double s_raw_xfer(raw_peer *p, const rl_dataproto *dp)
{
    double t = s_now();
    uint64_t n = s_batch_bytes(dp);
    s_full_write(p->fd, &n, 8);
    for (int k = 0; k < rl_dataproto_tensor_count(dp); k++) {
        const rl_tensor *tt = rl_dataproto_tensor_at(dp, k);
        s_full_write(p->fd, rl_tensor_data(tt), rl_tensor_nbytes(tt));
    }
    char ack;
    if (s_full_read(p->fd, &ack, 1))
        s_die("ack");
    return s_now() - t;
}

static void s_raw_stop(raw_peer *p)
{
    uint64_t zero = 0;
    s_full_write(p->fd, &zero, 8);
    close(p->fd);
    waitpid(p->pid, NULL, 0);
}

/* ---- DataProto over ZeroMQ ---------------------------------------------------------- */

static int s_zmq_buf = 0; /* bytes; 0 = leave the kernel's autotuning on */

static void s_tune(void *sock)
{
    int64_t maxmsg = -1;
    if (s_zmq_buf) {
        zmq_setsockopt(sock, ZMQ_SNDBUF, &s_zmq_buf, sizeof s_zmq_buf);
        zmq_setsockopt(sock, ZMQ_RCVBUF, &s_zmq_buf, sizeof s_zmq_buf);
    }
    zmq_setsockopt(sock, ZMQ_MAXMSGSIZE, &maxmsg, sizeof maxmsg);
}

static void s_dp_child(const char *bind_ep, int pipe_w)
{
    mallopt(M_MMAP_MAX, 0);
    mallopt(M_TRIM_THRESHOLD, -1);
    mallopt(M_ARENA_MAX, 1);
    void *ctx = zmq_ctx_new();
    void *s = zmq_socket(ctx, ZMQ_PAIR);
    s_tune(s);
    if (zmq_bind(s, bind_ep))
        s_die("zmq_bind");
    char ep[256];
    size_t len = sizeof ep;
    zmq_getsockopt(s, ZMQ_LAST_ENDPOINT, ep, &len);
    if (write(pipe_w, ep, sizeof ep) != (ssize_t)sizeof ep)
        s_die("pipe");
    for (;;) {
        rl_dataproto *dp;
        if (rl_wire_recv_dataproto(s, &dp))
            s_die("rl_wire_recv_dataproto");
        int64_t rows = rl_dataproto_rows(dp);
        const rl_tensor *x = rl_dataproto_tensor(dp, "x");
        float last = x ? ((const float *)rl_tensor_data(x))[x->numel - 1] : 0;
        rl_dataproto_free(dp);
        if (rows < 0)
            break;
        if (getenv("BENCH_WIRE_FAULTS")) {
            struct rusage ru;
            getrusage(RUSAGE_SELF, &ru);
            fprintf(stderr, "child %s: rows %lld minflt %ld\n", bind_ep, (long long)rows, ru.ru_minflt);
        }
        zmq_send(s, &last, sizeof last, 0);
    }
    zmq_close(s);
    zmq_ctx_term(ctx);
    _exit(0);
}

typedef struct dp_peer {
    void *ctx, *sock;
    pid_t pid;
} dp_peer;

static dp_peer s_dp_start(const char *bind_ep)
{
    int pfd[2];
    if (pipe(pfd))
        s_die("pipe");
    dp_peer p;
    p.pid = fork();
    if (p.pid == 0) {
        close(pfd[0]);
        s_dp_child(bind_ep, pfd[1]);
    }
    close(pfd[1]);
    char ep[256];
    if (read(pfd[0], ep, sizeof ep) != (ssize_t)sizeof ep)
        s_die("child endpoint");
    close(pfd[0]);
    p.ctx = zmq_ctx_new();
    p.sock = zmq_socket(p.ctx, ZMQ_PAIR);
    s_tune(p.sock);
    if (zmq_connect(p.sock, ep))
        s_die("zmq_connect");
    return p;
}

static double s_dp_xfer(dp_peer *p, const rl_dataproto *dp)
{
    const rl_tensor *x = rl_dataproto_tensor(dp, "x");
    float want = ((const float *)rl_tensor_data(x))[x->numel - 1];
    double t = s_now();
    if (rl_wire_send_dataproto(p->sock, dp, 0))
        s_die("rl_wire_send_dataproto");
    float got;
    if (zmq_recv(p->sock, &got, sizeof got, 0) != sizeof got || got != want)
        s_die("ack");
    return s_now() - t;
}

static void s_dp_stop(dp_peer *p)
{
    rl_dataproto *stop = rl_dataproto_new();
    rl_wire_send_dataproto(p->sock, stop, 0);
    rl_dataproto_free(stop);
    int linger = 1000;
    zmq_setsockopt(p->sock, ZMQ_LINGER, &linger, sizeof linger);
    zmq_close(p->sock);
    zmq_ctx_term(p->ctx);
    waitpid(p->pid, NULL, 0);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    const char *env = getenv("BENCH_WIRE_MAX_MIB");
    size_t max_mib = env ? strtoull(env, NULL, 10) : 1024;
    if (getenv("BENCH_WIRE_ZMQ_BUF"))
        s_zmq_buf = atoi(getenv("BENCH_WIRE_ZMQ_BUF"));
    size_t mibs[] = {1, 16, 64, 256, 1024};
    int ns = 0;
    rl_dataproto *dps[5];
    for (int i = 0; i < 5; i++)
        if (mibs[i] <= max_mib)
            dps[ns++] = s_batch(mibs[i] << 20);
    double t_mem[5], t_enc[5], t_raw[5], t_raw0[5], t_raw4[5], t_tcp[5], t_ipc[5];
    for (int k = 0; k < ns; k++) {
        size_t nb = s_batch_bytes(dps[k]);
        const rl_tensor *x = rl_dataproto_tensor(dps[k], "x");
        t_mem[k] = s_memcpy_s(rl_tensor_data(x), nb - ROWS * 64, s_reps(nb));
        t_enc[k] = s_encdec_s(dps[k], s_reps(nb));
    }
    char ipc_ep[128];
    snprintf(ipc_ep, sizeof ipc_ep, "ipc:///tmp/rl-bench-wire-%d", (int)getpid());
    size_t max = s_batch_bytes(dps[ns - 1]);
    /* All four receivers live for the whole run and the transfers are
     * interleaved rep by rep, so load from other processes on the machine
     * hits every transport alike; each figure is the best of its reps. */
    raw_peer r0 = s_raw_start(max, 0), r4 = s_raw_start(max, 4 << 20);
    dp_peer pt = s_dp_start("tcp://127.0.0.1:*"), pi = s_dp_start(ipc_ep);
    for (int k = 0; k < ns; k++) {
        int reps = s_reps(s_batch_bytes(dps[k]));
        t_raw0[k] = t_raw4[k] = t_tcp[k] = t_ipc[k] = 1e30;
        for (int i = 0; i < reps + 1; i++) {
            double a = s_raw_xfer(&r0, dps[k]), b = s_raw_xfer(&r4, dps[k]);
            double c = s_dp_xfer(&pt, dps[k]), d = s_dp_xfer(&pi, dps[k]);
            if (i == 0)
                continue; /* warm-up: first touch of buffers */
            t_raw0[k] = a < t_raw0[k] ? a : t_raw0[k];
            t_raw4[k] = b < t_raw4[k] ? b : t_raw4[k];
            t_tcp[k] = c < t_tcp[k] ? c : t_tcp[k];
            t_ipc[k] = d < t_ipc[k] ? d : t_ipc[k];
        }
        t_raw[k] = t_raw0[k] < t_raw4[k] ? t_raw0[k] : t_raw4[k];
    }
    s_raw_stop(&r0);
    s_raw_stop(&r4);
    s_dp_stop(&pt);
    s_dp_stop(&pi);
    unlink(ipc_ep + 6);
    printf("batch: %d rows, tensors x f32 (rows, N) + mask u8 (rows, 64), column uid, meta\n",
           ROWS);
    for (int k = 0; k < ns; k++) {
        double gb = (double)s_batch_bytes(dps[k]) / 1e9;
        size_t m = mibs[k];
        printf("bench: memcpy_%zuMiB_GBps = %.2f\n", m, gb / t_mem[k]);
        printf("bench: rawtcp_autobuf_%zuMiB_GBps = %.2f\n", m, gb / t_raw0[k]);
        printf("bench: rawtcp_4MiBbuf_%zuMiB_GBps = %.2f\n", m, gb / t_raw4[k]);
        printf("bench: dataproto_tcp_%zuMiB_GBps = %.2f\n", m, gb / t_tcp[k]);
        printf("bench: dataproto_ipc_%zuMiB_GBps = %.2f\n", m, gb / t_ipc[k]);
        printf("bench: encode_decode_%zuMiB_us = %.1f\n", m, t_enc[k] * 1e6);
        printf("bench: encode_decode_over_memcpy_%zuMiB = %.4f\n", m, t_enc[k] / t_mem[k]);
        printf("bench: dataproto_tcp_over_rawtcp_%zuMiB = %.3f\n", m, t_raw[k] / t_tcp[k]);
    }
    for (int k = 0; k < ns; k++)
        if (mibs[k] == 64 || mibs[k] == 1024)
            printf("bench: ratio_dataproto_over_rawtcp_%s = %.3f\n",
                   mibs[k] == 64 ? "64MiB" : "1GiB", t_raw[k] / t_tcp[k]);
    for (int k = 0; k < ns; k++)
        rl_dataproto_free(dps[k]);
    return 0;
}
