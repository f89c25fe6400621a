/* bench_runtime.c — control-plane costs, measured side by side in one run:
 *   * no-op call round trip (rank_zero echo of an empty batch);
 *   * calls/s across 8 workers (one_to_all, and 64 futures in flight);
 *   * dp_compute of a 64-row batch with 64 MiB of tensors (echo: the bytes go
 *     out and come back) versus a raw DataProto round trip of the same bytes
 *     between two processes over the same transport, no driver in between.
 *     The ratio is the driver's overhead (target <= 1.1).
 * Run: make bench-runtime (also runs bench_runtime_allreduce). */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#include "rlrt/rlrt.h"
#include "rlrt/roles/roles.h"
#include "rlrt/runtime/cluster.h"
#include "rlrt/runtime/driver.h"
#include "rlrt/wire.h"

static double s_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static rl_dataproto *s_batch(int64_t rows, int64_t cols)
{
    rl_dataproto *dp = rl_dataproto_new();
    int64_t shape[2] = {rows, cols};
    float *x = rl_tensor_data(rl_dataproto_new_tensor(dp, "x", RL_F32, 2, shape));
    for (int64_t i = 0; i < rows * cols; i++)
        x[i] = (float)(i & 1023);
    return dp;
}

/* Raw baseline: a forked process echoes DataProtos over a PAIR socket. */
static double s_raw_round_trip(const rl_dataproto *dp, int iters)
{
    void *ctx = zmq_ctx_new();
    void *sock = zmq_socket(ctx, ZMQ_PAIR);
    zmq_bind(sock, "tcp://127.0.0.1:*");
    char ep[256];
    size_t len = sizeof ep;
    zmq_getsockopt(sock, ZMQ_LAST_ENDPOINT, ep, &len);
    pid_t pid = fork();
    if (pid == 0) {
        void *c2 = zmq_ctx_new();
        void *s2 = zmq_socket(c2, ZMQ_PAIR);
        zmq_connect(s2, ep);
        for (int i = 0; i < iters + 1; i++) {
            rl_dataproto *in = NULL;
            if (rl_wire_recv_dataproto(s2, &in))
                _exit(1);
            rl_wire_send_dataproto(s2, in, 0);
            rl_dataproto_free(in);
        }
        zmq_close(s2);
        zmq_ctx_term(c2);
        _exit(0);
    }
    double best = 1e30;
    for (int i = 0; i < iters + 1; i++) {
        double t0 = s_now();
        rl_dataproto *back = NULL;
        rl_wire_send_dataproto(sock, dp, 0);
        rl_wire_recv_dataproto(sock, &back);
        double dt = s_now() - t0;
        rl_dataproto_free(back);
        if (i > 0 && dt < best) /* first round warms up */
            best = dt;
    }
    waitpid(pid, NULL, 0);
    zmq_close(sock);
    zmq_ctx_term(ctx);
    return best;
}

/* The floor of a no-op call: a plain ZeroMQ REQ/REP round trip of a
 * 1-byte message between two processes over the same transport (tcp
 * loopback), mean over n. */
static double s_raw_zmq_rtt(int n)
{
    void *ctx = zmq_ctx_new();
    void *rep = zmq_socket(ctx, ZMQ_REP);
    zmq_bind(rep, "tcp://127.0.0.1:*");
    char ep[256];
    size_t len = sizeof ep;
    zmq_getsockopt(rep, ZMQ_LAST_ENDPOINT, ep, &len);
    zmq_close(rep);
    zmq_ctx_term(ctx);
    pid_t pid = fork();
    if (pid == 0) {
        void *c2 = zmq_ctx_new();
        void *r2 = zmq_socket(c2, ZMQ_REP);
        if (zmq_bind(r2, ep) != 0)
            _exit(1);
        char b[8];
        for (int i = 0; i < n + 100; i++) {
            if (zmq_recv(r2, b, sizeof b, 0) < 0)
                _exit(1);
            zmq_send(r2, b, 1, 0);
        }
        zmq_close(r2);
        zmq_ctx_term(c2);
        _exit(0);
    }
    ctx = zmq_ctx_new();
    void *req = zmq_socket(ctx, ZMQ_REQ);
    zmq_connect(req, ep);
    char b[8] = "x";
    for (int i = 0; i < 100; i++) { /* connect and warm up */
        zmq_send(req, b, 1, 0);
        zmq_recv(req, b, sizeof b, 0);
    }
    double t0 = s_now();
    for (int i = 0; i < n; i++) {
        zmq_send(req, b, 1, 0);
        zmq_recv(req, b, sizeof b, 0);
    }
    double rtt = (s_now() - t0) / n;
    waitpid(pid, NULL, 0);
    zmq_close(req);
    zmq_ctx_term(ctx);
    return rtt;
}

static double s_dp_round_trip(rl_group *g, const rl_dataproto *dp, int iters)
{
    double best = 1e30;
    for (int i = 0; i < iters + 1; i++) {
        double t0 = s_now();
        rl_dataproto *out = NULL;
        if (rl_group_call_sync(g, "echo", RL_DISPATCH_DP_COMPUTE, dp, &out)) {
            fprintf(stderr, "dp_compute failed: %s\n", rl_error_message());
            exit(1);
        }
        double dt = s_now() - t0;
        rl_dataproto_free(out);
        if (i > 0 && dt < best)
            best = dt;
    }
    return best;
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    const char *build = getenv("BUILD");
    char worker[512];
    snprintf(worker, sizeof worker, "%s/bin/rl-worker", build ? build : "build");
    const char *yaml = "driver: {bind: 127.0.0.1, port: 5555}\n"
                       "nodes: [{name: local, address: 127.0.0.1, launch: local}]\n"
                       "roles: {reward: {count: 8, node: local}, actor: {count: 2, node: local},"
                       " rollout: {count: 1, node: local}}\n";
    rl_config *cfg = rl_config_parse_string(yaml, strlen(yaml), "bench-cluster.yaml");
    rl_cluster *cl = rl_cluster_from_config(cfg);
    rl_log_set_level(RL_LOG_WARN);
    rl_config *job = rl_config_load_job(RL_ROLES_DEFAULTS, NULL, 0, NULL);
    rl_driver_options opt = {.cluster = cl, .job = job, .worker_binary = worker,
                             .bind_override = "tcp://127.0.0.1:*", .worker_log_level = "warn",
                             .test_methods = 1}; /* echo is a test method */
    rl_driver *d = rl_driver_new(&opt);
    if (!d || rl_driver_start(d)) {
        fprintf(stderr, "bench_runtime: %s\n", rl_error_message());
        return 1;
    }
    rl_group *one = rl_driver_group(d, "rollout"), *eight = rl_driver_group(d, "reward"),
             *two = rl_driver_group(d, "actor");

    /* no-op round trip, side by side with a raw ZeroMQ REQ/REP */
    int n = 2000;
    for (int i = 0; i < 100; i++) /* warm up */
        rl_group_call_sync(one, "echo", RL_DISPATCH_RANK_ZERO, NULL, NULL);
    double raw_rtt = s_raw_zmq_rtt(n);
    double t0 = s_now();
    for (int i = 0; i < n; i++)
        rl_group_call_sync(one, "echo", RL_DISPATCH_RANK_ZERO, NULL, NULL);
    double rtt = (s_now() - t0) / n;
    double raw_rtt2 = s_raw_zmq_rtt(n);
    raw_rtt = raw_rtt2 < raw_rtt ? raw_rtt2 : raw_rtt;
    printf("bench: noop_call_round_trip_us = %.1f\n", rtt * 1e6);
    printf("bench: raw_zmq_req_rep_round_trip_us = %.1f\n", raw_rtt * 1e6);
    printf("bench: noop_call_rtt_over_raw_zmq = %.2f\n", rtt / raw_rtt);

    /* calls/s across 8 workers, one call (8 sub-calls) at a time */
    n = 500;
    t0 = s_now();
    for (int i = 0; i < n; i++) {
        rl_future *f = rl_group_call(eight, "echo", RL_DISPATCH_ONE_TO_ALL, NULL);
        rl_future_wait(f, -1);
        rl_future_free(f);
    }
    printf("bench: calls_per_s_8_workers_sequential = %.0f\n", 8.0 * n / (s_now() - t0));
    /* 64 one_to_all calls in flight */
    rl_future *fs[64];
    t0 = s_now();
    for (int round = 0; round < 10; round++) {
        for (int i = 0; i < 64; i++)
            fs[i] = rl_group_call(eight, "echo", RL_DISPATCH_ONE_TO_ALL, NULL);
        for (int i = 0; i < 64; i++) {
            rl_future_wait(fs[i], -1);
            rl_future_free(fs[i]);
        }
    }
    printf("bench: calls_per_s_8_workers_pipelined = %.0f\n", 8.0 * 640 / (s_now() - t0));

    /* dp_compute of 64 rows x 64 MiB vs raw DataProto round trip */
    rl_dataproto *big = s_batch(64, 64 * 1024 * 1024 / 4 / 64);
    double raw = s_raw_round_trip(big, 3);
    double dp1 = s_dp_round_trip(one, big, 3);
    double dp2 = s_dp_round_trip(two, big, 3);
    double dp8 = s_dp_round_trip(eight, big, 3);
    double mib = 64.0;
    printf("bench: raw_dataproto_round_trip_64MiB_ms = %.1f (%.0f MiB/s each way)\n", raw * 1e3,
           mib / raw * 2);
    printf("bench: dp_compute_64MiB_1_worker_ms = %.1f\n", dp1 * 1e3);
    printf("bench: dp_compute_64MiB_2_workers_ms = %.1f\n", dp2 * 1e3);
    printf("bench: dp_compute_64MiB_8_workers_ms = %.1f\n", dp8 * 1e3);
    printf("bench: dp_compute_overhead_ratio_1_worker = %.3f\n", dp1 / raw);
    printf("bench: dp_compute_overhead_ratio_2_workers = %.3f\n", dp2 / raw);
    printf("bench: dp_compute_overhead_ratio_8_workers = %.3f\n", dp8 / raw);
    rl_dataproto_free(big);
    rl_driver_shutdown(d, 5000);
    rl_driver_free(d);
    rl_cluster_free(cl);
    rl_config_free(cfg);
    return 0;
}
