/* test_runtime.c — driver + real rl-worker processes over real sockets:
 * dispatch modes, kill -9 and hang detection with restart, restart limits,
 * protocol mismatch, unknown peers, external waits, a worker giving up. */
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>
#include <cmocka.h>

#include "rl.pb-c.h"
#include "rlrt/error.h"
#include "rlrt/dtype.h"
#include "rlrt/tensor.h"
#include "rlrt/dataproto.h"
#include "rlrt/config.h"
#include "workers/contracts.h"
#include "rlrt/runtime/cluster.h"
#include "rlrt/runtime/driver.h"
#include "common/runtime/msg.h"
#include "common/runtime/value.h"
#include "rlrt/runtime/worker.h"
#include "rlrt/wire.h"

static char s_worker[512];

static double s_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

#define assert_msg_contains(msg, s) \
    do { \
        if (!strstr((msg), (s))) \
            fail_msg("message '%s' lacks '%s'", (msg), (s)); \
    } while (0)

typedef struct {
    rl_config *cfg, *job;
    rl_cluster *cl;
    rl_driver *d;
} s_job;

static s_job *s_current; /* stopped by the teardown if a test fails */

/* A cluster with `roles` (YAML flow text for the roles map) on one local
 * node, heartbeat 0.2 s × 3, restart policy as given; `opt_in` (may be NULL)
 * supplies the job, the roles to start and test_methods (default 1). */
static s_job *s_start_opt(const char *roles, int max_restarts, int start,
                          const rl_driver_options *opt_in)
{
    static s_job job; /* static: the teardown may use it after a failed test */
    s_job *j = &job;
    memset(j, 0, sizeof *j);
    char yaml[2048];
    snprintf(yaml, sizeof yaml,
             "driver: {bind: 127.0.0.1, port: 5555}\n"
             "heartbeat: {interval_s: 0.2, liveness: 3}\n"
             "restart: {max_restarts: %d, backoff_s: 0.1, backoff_max_s: 0.2}\n"
             "external_wait_timeout_s: 0.5\n"
             "nodes:\n"
             "  - {name: local, address: 127.0.0.1, launch: local}\n"
             "  - {name: ext, address: 127.0.0.1, launch: external}\n"
             "roles: %s\n",
             max_restarts, roles);
    j->cfg = rl_config_parse_string(yaml, strlen(yaml), "test-cluster.yaml");
    assert_non_null(j->cfg);
    j->cl = rl_cluster_from_config(j->cfg);
    if (!j->cl)
        fail_msg("cluster: %s", rl_error_message());
    /* the production roles read their config sections at init */
    j->job = rl_roles_job(NULL, 0, NULL);
    assert_non_null(j->job);
    rl_driver_options opt = {.cluster = j->cl, .job = j->job, .worker_binary = s_worker,
                             .bind_override = "tcp://127.0.0.1:*", .worker_log_level = "warn",
                             .ready_timeout_ms = 20000, .test_methods = 1};
    if (opt_in) {
        opt.job = opt_in->job ? opt_in->job : j->job;
        opt.roles = opt_in->roles;
        opt.test_methods = opt_in->test_methods;
    }
    j->d = rl_driver_new(&opt);
    if (!j->d)
        fail_msg("rl_driver_new: %s", rl_error_message());
    s_current = j;
    if (start && rl_driver_start(j->d))
        fail_msg("start: %s", rl_error_message());
    return j;
}

static s_job *s_start(const char *roles, int max_restarts, int start)
{
    return s_start_opt(roles, max_restarts, start, NULL);
}

/* Waits until `rank` runs in a new process and the group is READY again. */
static void s_wait_restarted(s_job *j, rl_group *g, int rank, int old_pid)
{
    for (int i = 0; i < 200 && (rl_group_pid(g, rank) == old_pid || rl_group_pid(g, rank) == 0); i++)
        rl_driver_poll(j->d, 50);
    assert_int_not_equal(rl_group_pid(g, rank), old_pid);
    assert_int_equal(rl_group_wait_ready(g, 10000), 0);
}

static void s_stop(s_job *j)
{
    s_current = NULL;
    rl_driver_shutdown(j->d, 5000);
    rl_driver_free(j->d);
    rl_cluster_free(j->cl);
    rl_config_free(j->cfg);
    rl_config_free(j->job);
}

static rl_dataproto *s_batch(int64_t rows)
{
    rl_dataproto *dp = rl_dataproto_new();
    int64_t shape[2] = {rows, 2};
    float *x = rl_tensor_data(rl_dataproto_new_tensor(dp, "x", RL_F32, 2, shape));
    for (int64_t i = 0; i < rows * 2; i++)
        x[i] = (float)i;
    return dp;
}

typedef struct {
    rl_group *g;
    int n, ok;
} s_echo_arg;

/* n calls, alternating echo (inline) and echo_queued (compute thread), of
 * a batch whose rows name the call; counts the right answers. */
static void *s_echo_thread(void *arg)
{
    s_echo_arg *a = arg;
    for (int i = 0; i < a->n; i++) {
        rl_dataproto *in = s_batch(1 + i % 5), *out = NULL;
        rl_dispatch mode = i % 3 ? RL_DISPATCH_RANK_ZERO : RL_DISPATCH_DP_COMPUTE;
        if (rl_group_call_sync(a->g, i % 2 ? "echo" : "echo_queued", mode, in, &out) == 0 &&
            rl_dataproto_rows(out) == 1 + i % 5)
            a->ok++;
        rl_dataproto_free(in);
        rl_dataproto_free(out);
    }
    return NULL;
}

static void test_dispatch_modes(void **state)
{
    (void)state;
    s_job *j = s_start("{reward: {count: 3, node: local}}", 1, 1);
    rl_group *g = rl_driver_group(j->d, "reward");
    assert_int_equal(rl_group_size(g), 3);

    /* dp_compute, 10 rows over 3 ranks: padded to 12, chunks of 4, the 2
     * padding rows (repeats of rows 0, 1 on rank 2) stripped */
    rl_dataproto *in = s_batch(10), *out = NULL;
    json_object_set_new(rl_dataproto_meta(in), "value", json_real(1.0));
    assert_int_equal(rl_group_call_sync(g, "add", RL_DISPATCH_DP_COMPUTE, in, &out), 0);
    assert_int_equal(rl_dataproto_rows(out), 10);
    const float *x = rl_tensor_data(rl_dataproto_tensor(out, "x"));
    for (int i = 0; i < 20; i++)
        assert_true(x[i] == (float)i + 1.0f);
    const rl_column *rank = rl_dataproto_column(out, "rank");
    int64_t want_rank[10] = {0, 0, 0, 0, 1, 1, 1, 1, 2, 2};
    for (int i = 0; i < 10; i++)
        assert_int_equal(rl_column_i64(rank, i), want_rank[i]);
    rl_dataproto_free(out);

    /* one_to_all: one result per rank; take() refuses */
    rl_future *f = rl_group_call(g, "add", RL_DISPATCH_ONE_TO_ALL, in);
    assert_int_equal(rl_future_wait(f, 10000), 0);
    assert_int_equal(rl_future_take(f, &out), RL_EINVAL);
    for (int r = 0; r < 3; r++) {
        assert_int_equal(rl_future_take_rank(f, r, &out), 0);
        assert_int_equal(rl_dataproto_rows(out), 10);
        assert_int_equal(rl_column_i64(rl_dataproto_column(out, "rank"), 0), r);
        rl_dataproto_free(out);
    }
    rl_future_free(f);

    /* rank_zero */
    assert_int_equal(rl_group_call_sync(g, "whoami", RL_DISPATCH_RANK_ZERO, NULL, &out), 0);
    assert_int_equal(rl_column_i64(rl_dataproto_column(out, "rank"), 0), 0);
    rl_dataproto_free(out);

    /* all_to_all with an empty entry */
    rl_dataproto *per[3] = {in, NULL, in};
    f = rl_group_call_each(g, "echo", per);
    assert_int_equal(rl_future_wait(f, 10000), 0);
    assert_int_equal(rl_future_take_rank(f, 1, &out), 0);
    assert_int_equal(rl_dataproto_rows(out), 0);
    rl_dataproto_free(out);
    rl_future_free(f);

    /* taking the result of a call whose rank returned no payload is an
     * error naming the method, the role and the rank, not a NULL result */
    rl_dataproto *nap = rl_dataproto_new_meta(json_pack("{s:i}", "ms", 1));
    out = (rl_dataproto *)nap; /* must be reset */
    assert_int_equal(rl_group_call_sync(g, "sleep", RL_DISPATCH_RANK_ZERO, nap, &out), RL_EPROTO);
    assert_null(out);
    assert_string_equal(rl_error_message(), "call 'sleep' on reward: reward/0 returned no payload");
    assert_int_equal(rl_group_call_sync(g, "sleep", RL_DISPATCH_DP_COMPUTE, nap, &out), RL_EPROTO);
    assert_null(out);
    assert_string_equal(rl_error_message(), "call 'sleep' on reward: reward/0 returned no payload");
    f = rl_group_call(g, "sleep", RL_DISPATCH_ONE_TO_ALL, nap);
    assert_int_equal(rl_future_wait(f, 10000), 0);
    assert_int_equal(rl_future_take_rank(f, 2, &out), RL_EPROTO);
    assert_string_equal(rl_error_message(), "call 'sleep' on reward: reward/2 returned no payload");
    rl_future_free(f);
    assert_int_equal(rl_group_call_sync(g, "sleep", RL_DISPATCH_RANK_ZERO, nap, NULL), 0);
    rl_dataproto_free(nap);

    /* echo is declared inline (run on the worker's I/O thread when its
     * compute thread is idle); behind a running call it waits its turn, so
     * the calls to a rank still run in the order they were sent */
    rl_dataproto *nap300 = rl_dataproto_new_meta(json_pack("{s:i}", "ms", 300));
    rl_future *fs = rl_group_call(g, "sleep", RL_DISPATCH_RANK_ZERO, nap300);
    rl_future *fe = rl_group_call(g, "echo", RL_DISPATCH_RANK_ZERO, in);
    assert_int_equal(rl_future_wait(fe, 10000), 0);
    assert_true(rl_future_done(fs)); /* the sleep answered first */
    assert_int_equal(rl_future_wait(fs, 0), 0);
    rl_future_free(fs);
    rl_future_free(fe);
    rl_dataproto_free(nap300);

    /* API threads send their calls themselves (under the driver's lock):
     * calls from several threads at once all come back right */
    pthread_t th[3];
    s_echo_arg ea[3];
    for (int t = 0; t < 3; t++) {
        ea[t] = (s_echo_arg){g, 200, 0};
        assert_int_equal(pthread_create(&th[t], NULL, s_echo_thread, &ea[t]), 0);
    }
    for (int t = 0; t < 3; t++) {
        pthread_join(th[t], NULL);
        assert_int_equal(ea[t].ok, 200);
    }

    /* handler error names worker and method; other ranks unaffected */
    assert_int_equal(rl_group_call_sync(g, "fail", RL_DISPATCH_ONE_TO_ALL, NULL, NULL), RL_EINVAL);
    assert_msg_contains(rl_error_message(), "method 'fail' failed: fail requested on reward/");
    assert_int_equal(rl_group_call_sync(g, "add", RL_DISPATCH_RANK_ZERO, NULL, NULL), RL_ENOTFOUND);
    assert_msg_contains(rl_error_message(), "reward/0: method 'add' failed: tensor 'x' not in the batch");
    rl_dataproto_free(in);
    s_stop(j);
}

/* kill -9 during a call: the call fails naming the worker and the method,
 * the worker is restarted and the next call succeeds. */
static void test_kill9_during_call(void **state)
{
    (void)state;
    s_job *j = s_start("{actor: {count: 2, node: local}}", 2, 1);
    rl_group *g = rl_driver_group(j->d, "actor");
    int pid = rl_group_pid(g, 1);
    assert_true(pid > 0);
    rl_dataproto *in = rl_dataproto_new();
    rl_dataproto_set_rows(in, 0);
    json_object_set_new(rl_dataproto_meta(in), "ms", json_integer(2000));
    rl_future *f = rl_group_call(g, "sleep", RL_DISPATCH_ONE_TO_ALL, in);
    rl_driver_poll(j->d, 300);
    double t0 = s_now();
    kill(pid, SIGKILL);
    assert_int_not_equal(rl_future_wait(f, 10000), 0);
    double dt = s_now() - t0;
    assert_msg_contains(rl_error_message(), "worker actor/1");
    assert_msg_contains(rl_error_message(), "during call 'sleep'");
    assert_msg_contains(rl_error_message(), "killed by signal 9");
    assert_true(dt < 0.6 + 1.0); /* interval × liveness plus a margin */
    rl_future_free(f); /* actor/0 still sleeps: its late reply is dropped */
    s_wait_restarted(j, g, 1, pid);
    assert_int_equal(rl_driver_restarts(j->d), 1);
    rl_dataproto *out = NULL;
    assert_int_equal(rl_group_call_sync(g, "whoami", RL_DISPATCH_ONE_TO_ALL, NULL, NULL), 0);
    rl_dataproto_free(out);
    rl_dataproto_free(in);
    s_stop(j);
}

/* A rank dies while its group's other ranks wait for it (here a 60 s sleep
 * that polls rl_worker_should_stop, as a collective polls the abort): the
 * driver tells them to abort at once, so they are done within a heartbeat,
 * not after 60 s. rl_group_abort does the same to another group's waits;
 * calls sent after an abort run whole. */
static void test_abort_waits_of_lost_peers(void **state)
{
    (void)state;
    s_job *j = s_start("{actor: {count: 2, node: local}, rollout: {count: 1, node: local}}", 2, 1);
    rl_group *ga = rl_driver_group(j->d, "actor"), *gr = rl_driver_group(j->d, "rollout");
    rl_dataproto *in = rl_dataproto_new_meta(json_pack("{s:i}", "ms", 60000));
    rl_future *fa = rl_group_call(ga, "sleep", RL_DISPATCH_ONE_TO_ALL, in);
    rl_future *fr = rl_group_call(gr, "sleep", RL_DISPATCH_RANK_ZERO, in);
    rl_driver_poll(j->d, 300);
    int pid = rl_group_pid(ga, 1);
    double t0 = s_now();
    kill(pid, SIGKILL);
    assert_int_not_equal(rl_future_wait(fa, 20000), 0);
    assert_msg_contains(rl_error_message(), "worker actor/1");
    assert_int_equal(rl_group_drain(ga, 20000), 0); /* actor/0's sleep ended too */
    assert_true(s_now() - t0 < 10.0);
    rl_future_free(fa);
    assert_false(rl_future_done(fr));
    t0 = s_now();
    assert_int_equal(rl_group_abort(gr, "a test", 10000), 0);
    assert_int_equal(rl_future_wait(fr, 10000), 0);
    assert_true(s_now() - t0 < 10.0);
    rl_future_free(fr);
    rl_dataproto *nap = rl_dataproto_new_meta(json_pack("{s:i}", "ms", 300));
    t0 = s_now();
    assert_int_equal(rl_group_call_sync(gr, "sleep", RL_DISPATCH_RANK_ZERO, nap, NULL), 0);
    assert_true(s_now() - t0 >= 0.29);
    rl_dataproto_free(nap);
    rl_dataproto_free(in);
    s_stop(j);
}

/* A hung worker (SIGSTOP) is detected by missed heartbeats alone. */
static void test_hung_worker_liveness(void **state)
{
    (void)state;
    s_job *j = s_start("{rollout: {count: 1, node: local}}", 2, 1);
    rl_group *g = rl_driver_group(j->d, "rollout");
    int pid = rl_group_pid(g, 0);
    rl_dataproto *in = rl_dataproto_new();
    rl_dataproto_set_rows(in, 0);
    json_object_set_new(rl_dataproto_meta(in), "ms", json_integer(20000));
    rl_future *f = rl_group_call(g, "sleep", RL_DISPATCH_RANK_ZERO, in);
    rl_driver_poll(j->d, 200);
    double t0 = s_now();
    kill(pid, SIGSTOP);
    assert_int_not_equal(rl_future_wait(f, 10000), 0);
    double dt = s_now() - t0;
    assert_msg_contains(rl_error_message(), "worker rollout/0");
    assert_msg_contains(rl_error_message(), "missed heartbeats");
    assert_msg_contains(rl_error_message(), "during call 'sleep'");
    assert_true(dt >= 0.4 && dt < 0.6 + 1.0);
    rl_future_free(f);
    s_wait_restarted(j, g, 0, pid);
    assert_int_equal(rl_group_call_sync(g, "whoami", RL_DISPATCH_RANK_ZERO, NULL, NULL), 0);
    rl_dataproto_free(in);
    s_stop(j);
}

static void test_restart_limit(void **state)
{
    (void)state;
    s_job *j = s_start("{rollout: {count: 1, node: local}}", 1, 1);
    rl_group *g = rl_driver_group(j->d, "rollout");
    int pid = rl_group_pid(g, 0);
    kill(pid, SIGKILL);
    s_wait_restarted(j, g, 0, pid);
    kill(rl_group_pid(g, 0), SIGKILL);
    assert_int_not_equal(rl_group_call_sync(g, "whoami", RL_DISPATCH_RANK_ZERO, NULL, NULL), 0);
    assert_non_null(rl_driver_fatal(j->d));
    assert_msg_contains(rl_driver_fatal(j->d), "role rollout cannot be restored: rollout/0 was killed "
                                              "by signal 9 and was already restarted 1 times");
    s_stop(j);
}

/* Raw DEALER peers: a protocol mismatch is refused with a message; a
 * message from an unknown peer gets DISCONNECT. */
static int s_raw_send(void *sock, uint32_t version, Rl__Envelope *env)
{
    env->protocol_version = version;
    uint8_t buf[512];
    size_t len = rl__envelope__pack(env, buf);
    return zmq_send(sock, buf, len, 0);
}

static Rl__Envelope *s_raw_recv(rl_driver *d, void *sock)
{
    for (int i = 0; i < 100; i++) {
        rl_driver_poll(d, 0);
        uint8_t buf[2048];
        int n = zmq_recv(sock, buf, sizeof buf, ZMQ_DONTWAIT);
        if (n >= 0)
            return rl__envelope__unpack(NULL, (size_t)n, buf);
        usleep(10000);
    }
    return NULL;
}

static void test_protocol_mismatch_and_unknown_peer(void **state)
{
    (void)state;
    s_job *j = s_start("{reward: {count: 1, node: ext}}", 1, 0);
    void *ctx = zmq_ctx_new();
    void *sock = zmq_socket(ctx, ZMQ_DEALER);
    int linger = 0;
    zmq_setsockopt(sock, ZMQ_LINGER, &linger, sizeof linger);
    assert_int_equal(zmq_connect(sock, rl_driver_endpoint(j->d)), 0);

    Rl__Envelope env = RL__ENVELOPE__INIT;
    Rl__Hello h = RL__HELLO__INIT;
    h.role = "reward";
    env.body_case = RL__ENVELOPE__BODY_HELLO;
    env.hello = &h;
    assert_true(s_raw_send(sock, 99, &env) > 0);
    Rl__Envelope *got = s_raw_recv(j->d, sock);
    assert_non_null(got);
    assert_int_equal(got->body_case, RL__ENVELOPE__BODY_ERROR);
    char want[128];
    snprintf(want, sizeof want, "refused: worker speaks protocol version 99, driver speaks %d",
             RL_PROTOCOL_VERSION);
    assert_string_equal(got->error->message, want);
    rl__envelope__free_unpacked(got, NULL);
    got = s_raw_recv(j->d, sock);
    assert_non_null(got);
    assert_int_equal(got->body_case, RL__ENVELOPE__BODY_DISCONNECT);
    rl__envelope__free_unpacked(got, NULL);

    /* heartbeat without HELLO */
    Rl__Envelope hb = RL__ENVELOPE__INIT;
    Rl__Heartbeat b = RL__HEARTBEAT__INIT;
    hb.body_case = RL__ENVELOPE__BODY_HEARTBEAT;
    hb.heartbeat = &b;
    assert_true(s_raw_send(sock, RL_PROTOCOL_VERSION, &hb) > 0);
    got = s_raw_recv(j->d, sock);
    assert_non_null(got);
    assert_int_equal(got->body_case, RL__ENVELOPE__BODY_DISCONNECT);
    assert_string_equal(got->disconnect->reason, "unknown peer; send HELLO first");
    rl__envelope__free_unpacked(got, NULL);

    /* HELLO for a rank the cluster does not have */
    h.rank = 5;
    assert_true(s_raw_send(sock, RL_PROTOCOL_VERSION, &env) > 0);
    got = s_raw_recv(j->d, sock);
    assert_non_null(got);
    assert_int_equal(got->body_case, RL__ENVELOPE__BODY_ERROR);
    assert_msg_contains(got->error->message, "refused: no slot reward/5 in test-cluster.yaml (reward has 1 rank)");
    rl__envelope__free_unpacked(got, NULL);
    got = s_raw_recv(j->d, sock); /* its DISCONNECT */
    assert_non_null(got);
    assert_int_equal(got->body_case, RL__ENVELOPE__BODY_DISCONNECT);
    rl__envelope__free_unpacked(got, NULL);

    /* a rank that does not fit an int (>= 2^31) is refused, not wrapped
     * into a negative index */
    h.rank = 0x80000000u;
    assert_true(s_raw_send(sock, RL_PROTOCOL_VERSION, &env) > 0);
    got = s_raw_recv(j->d, sock);
    assert_non_null(got);
    assert_int_equal(got->body_case, RL__ENVELOPE__BODY_ERROR);
    assert_string_equal(got->error->message,
                        "refused: no slot reward/2147483648 in test-cluster.yaml (reward has 1 rank)");
    rl__envelope__free_unpacked(got, NULL);
    got = s_raw_recv(j->d, sock);
    assert_non_null(got);
    assert_int_equal(got->body_case, RL__ENVELOPE__BODY_DISCONNECT);
    rl__envelope__free_unpacked(got, NULL);
    h.rank = 0xffffffffu;
    assert_true(s_raw_send(sock, RL_PROTOCOL_VERSION, &env) > 0);
    got = s_raw_recv(j->d, sock);
    assert_non_null(got);
    assert_msg_contains(got->error->message, "refused: no slot reward/4294967295");
    rl__envelope__free_unpacked(got, NULL);
    got = s_raw_recv(j->d, sock);
    rl__envelope__free_unpacked(got, NULL);

    /* a role the cluster does not have */
    h.rank = 0;
    h.role = "nope";
    assert_true(s_raw_send(sock, RL_PROTOCOL_VERSION, &env) > 0);
    got = s_raw_recv(j->d, sock);
    assert_non_null(got);
    assert_string_equal(got->error->message, "refused: test-cluster.yaml has no role 'nope'");
    rl__envelope__free_unpacked(got, NULL);
    got = s_raw_recv(j->d, sock);
    rl__envelope__free_unpacked(got, NULL);

    /* garbage bytes */
    assert_int_equal(zmq_send(sock, "\xff\xff\xff", 3, 0), 3);
    got = s_raw_recv(j->d, sock);
    while (got && got->body_case != RL__ENVELOPE__BODY_DISCONNECT) {
        rl__envelope__free_unpacked(got, NULL);
        got = s_raw_recv(j->d, sock);
    }
    assert_non_null(got);
    rl__envelope__free_unpacked(got, NULL);
    zmq_close(sock);
    zmq_ctx_term(ctx);
    s_stop(j);
}

/* Roles are data: the driver starts the roles it is asked for, by name. */
static void test_roles_started_by_name(void **state)
{
    (void)state;
    const char *const roles[] = {"actor", NULL};
    rl_driver_options o = {.roles = roles, .test_methods = 1};
    /* the unstarted roles are logged once, at info, by rl_driver_new */
    fflush(stderr);
    int saved = dup(2);
    FILE *cap = tmpfile();
    assert_non_null(cap);
    dup2(fileno(cap), 2);
    s_job *j = s_start_opt("{actor: {count: 2, node: local}, reward: {count: 1, node: local},"
                           " critic: {count: 3, node: local}}",
                           0, 0, &o);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    char logbuf[4096] = "";
    rewind(cap);
    size_t got = fread(logbuf, 1, sizeof logbuf - 1, cap);
    logbuf[got] = '\0';
    fclose(cap);
    assert_msg_contains(logbuf, "INFO cluster role reward (1 rank) is not used by this job: not started");
    assert_msg_contains(logbuf, "INFO cluster role critic (3 ranks) is not used by this job: not started");
    if (rl_driver_start(j->d))
        fail_msg("start: %s", rl_error_message());
    assert_int_equal(rl_driver_group_count(j->d), 1);
    rl_group *g = rl_driver_group_at(j->d, 0);
    assert_non_null(g);
    assert_string_equal(rl_group_role(g), "actor");
    assert_true(rl_driver_group(j->d, "actor") == g);
    assert_null(rl_driver_group_at(j->d, 1));
    assert_null(rl_driver_group(j->d, "reward"));
    assert_int_equal(rl_error_code(), RL_ENOTFOUND);
    assert_string_equal(rl_error_message(), "role reward of test-cluster.yaml is not started by "
                                            "this job (its recipe does not list it)");
    assert_null(rl_driver_group(j->d, "rollout"));
    assert_string_equal(rl_error_message(),
                        "role rollout is not in test-cluster.yaml (roles: actor, reward, critic)");
    assert_int_equal(rl_group_call_sync(g, "whoami", RL_DISPATCH_ONE_TO_ALL, NULL, NULL), 0);
    s_stop(j);

    /* every role with ranks when no list is given; a role with no ranks is
     * not a group */
    j = s_start("{actor: {count: 1, node: local}, idle: {count: 0, node: local},"
                " reward: {count: 2, node: local}}", 0, 1);
    assert_int_equal(rl_driver_group_count(j->d), 2);
    assert_string_equal(rl_group_role(rl_driver_group_at(j->d, 0)), "actor");
    assert_string_equal(rl_group_role(rl_driver_group_at(j->d, 1)), "reward");
    assert_int_equal(rl_group_size(rl_driver_group_at(j->d, 1)), 2);
    assert_null(rl_driver_group(j->d, "idle"));
    assert_string_equal(rl_error_message(),
                        "role idle of test-cluster.yaml is not started by this job (it has no ranks)");
    s_stop(j);

    /* a role the job needs but the cluster lacks: rl_driver_new refuses */
    const char *yaml = "driver: {bind: 127.0.0.1, port: 5555}\n"
                       "nodes: [{name: local, address: 127.0.0.1}]\n"
                       "roles: {actor: {count: 1, node: local}, idle: {count: 0, node: local}}\n";
    rl_config *cfg = rl_config_parse_string(yaml, strlen(yaml), "c.yaml");
    rl_cluster *cl = rl_cluster_from_config(cfg);
    assert_non_null(cl);
    const char *const need[] = {"actor", "rollout", NULL};
    rl_driver_options bad = {.cluster = cl, .worker_binary = s_worker, .roles = need,
                             .bind_override = "tcp://127.0.0.1:*"};
    assert_null(rl_driver_new(&bad));
    assert_int_equal(rl_error_code(), RL_ECONFIG);
    assert_string_equal(rl_error_message(),
                        "c.yaml has no role 'rollout', which this job needs (roles: actor, idle)");
    const char *const need_idle[] = {"idle", NULL};
    bad.roles = need_idle;
    assert_null(rl_driver_new(&bad));
    assert_string_equal(rl_error_message(),
                        "c.yaml:3: role 'idle' has no ranks (count: 0), but this job needs it");
    rl_cluster_free(cl);
    rl_config_free(cfg);
}

/* A resumed run's job id: rl_driver_new takes a well-formed one as given
 * (its workers present it in HELLO) and refuses anything else by name. */
static void test_given_job_id(void **state)
{
    (void)state;
    const char *yaml = "driver: {bind: 127.0.0.1, port: 5555}\n"
                       "nodes: [{name: local, address: 127.0.0.1}]\n"
                       "roles: {actor: {count: 1, node: local}}\n";
    rl_config *cfg = rl_config_parse_string(yaml, strlen(yaml), "c.yaml");
    rl_cluster *cl = rl_cluster_from_config(cfg);
    assert_non_null(cl);
    rl_driver_options opt = {.cluster = cl, .worker_binary = s_worker,
                             .bind_override = "tcp://127.0.0.1:*", .job_id = "0123456789abcdef"};
    rl_driver *d = rl_driver_new(&opt);
    assert_non_null(d);
    assert_string_equal(rl_driver_job_id(d), "0123456789abcdef");
    rl_driver_free(d);
    const char *bad[] = {"0123456789ABCDEF", "0123456789abcde", "0123456789abcdef0", "", "xyz"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        opt.job_id = bad[i];
        assert_null(rl_driver_new(&opt));
        assert_int_equal(rl_error_code(), RL_EINVAL);
        assert_non_null(strstr(rl_error_message(), "is not 16 lowercase hex digits"));
    }
    opt.job_id = NULL; /* a random one */
    d = rl_driver_new(&opt);
    assert_non_null(d);
    assert_int_equal(strlen(rl_driver_job_id(d)), 16);
    assert_string_not_equal(rl_driver_job_id(d), "0123456789abcdef");
    rl_driver_free(d);
    rl_cluster_free(cl);
    rl_config_free(cfg);
}

/* rl-worker exits 64 for a role it does not serve: the driver fails at
 * once, without restarting it max_restarts times. */
static void test_usage_exit_is_fatal(void **state)
{
    (void)state;
    s_job *j = s_start("{actor: {count: 1, node: local}, critic: {count: 1, node: local}}", 3, 0);
    double t0 = s_now();
    assert_int_equal(rl_driver_start(j->d), RL_ESTATE);
    assert_string_equal(rl_error_message(), "role critic cannot start: rl-worker exited with "
                                            "status 64 (usage error; see its message above)");
    assert_true(s_now() - t0 < 5.0);
    assert_int_equal(rl_driver_restarts(j->d), 0);
    assert_non_null(rl_driver_fatal(j->d));
    s_stop(j);
}

/* A production job (test_methods = 0): the worker serves only its role's
 * methods and the error for a test method names only those. */
static void test_production_worker_has_no_test_methods(void **state)
{
    (void)state;
    rl_driver_options o = {.test_methods = 0};
    s_job *j = s_start_opt("{actor: {count: 1, node: local}}", 0, 1, &o);
    rl_group *g = rl_driver_group(j->d, "actor");
    assert_int_equal(rl_group_call_sync(g, "echo", RL_DISPATCH_RANK_ZERO, NULL, NULL), RL_ENOTFOUND);
    const char *msg = rl_error_message();
    const char *want = "actor/0: method 'echo' failed: unknown method 'echo' for role actor (known: ";
    if (strncmp(msg, want, strlen(want)) != 0)
        fail_msg("message '%s' does not start with '%s'", msg, want);
    /* the known list is the actor's own table: no test method in it */
    static const char *const tests[] = {" echo", " add ", " sleep", " fail", " whoami",
                                        " coll_check", " weights_recv", " channel_open"};
    for (size_t i = 0; i < sizeof tests / sizeof tests[0]; i++)
        if (strstr(msg + strlen(want) - 1, tests[i]))
            fail_msg("known list of '%s' names the test method '%s'", msg, tests[i]);
    assert_int_equal(rl_group_call_sync(g, "whoami", RL_DISPATCH_RANK_ZERO, NULL, NULL),
                     RL_ENOTFOUND);
    s_stop(j);
}

/* The worker side of HELLO -> CONFIGURE -> READY, seen from a fake driver:
 * READY lists exactly the methods served; test methods only on request;
 * a CONFIGURE with numbers out of range is answered with ERROR. */
static Rl__Envelope *s_router_recv(void *sock, unsigned char *id, size_t *id_len)
{
    int to = 10000;
    zmq_setsockopt(sock, ZMQ_RCVTIMEO, &to, sizeof to);
    int n = zmq_recv(sock, id, 255, 0);
    if (n < 0)
        return NULL;
    *id_len = (size_t)n;
    uint8_t buf[8192];
    n = zmq_recv(sock, buf, sizeof buf, 0);
    return n < 0 ? NULL : rl__envelope__unpack(NULL, (size_t)n, buf);
}

static void s_router_send(void *sock, const unsigned char *id, size_t id_len, Rl__Envelope *env)
{
    env->protocol_version = RL_PROTOCOL_VERSION;
    uint8_t buf[4096];
    size_t len = rl__envelope__pack(env, buf);
    zmq_send(sock, id, id_len, ZMQ_SNDMORE);
    zmq_send(sock, buf, len, 0);
}

/* Starts rl-worker --role reward against a fake ROUTER, answers its HELLO
 * with a CONFIGURE whose extra is `extra_json`, returns what came back. */
static Rl__Envelope *s_configure_worker(const char *extra_json, uint32_t heartbeat_ms, pid_t *pid,
                                        void **ctx_out, void **sock_out)
{
    void *ctx = zmq_ctx_new();
    void *sock = zmq_socket(ctx, ZMQ_ROUTER);
    int linger = 0;
    zmq_setsockopt(sock, ZMQ_LINGER, &linger, sizeof linger);
    assert_int_equal(zmq_bind(sock, "tcp://127.0.0.1:*"), 0);
    char ep[256];
    size_t len = sizeof ep;
    zmq_getsockopt(sock, ZMQ_LAST_ENDPOINT, ep, &len);
    *pid = fork();
    if (*pid == 0) {
        execl(s_worker, s_worker, "--role", "reward", "--rank", "0", "--driver", ep, "--log-level",
              "error", "--give-up-s", "3", (char *)NULL);
        _exit(127);
    }
    unsigned char id[256];
    size_t id_len;
    Rl__Envelope *hello = s_router_recv(sock, id, &id_len);
    assert_non_null(hello);
    assert_int_equal(hello->body_case, RL__ENVELOPE__BODY_HELLO);
    rl__envelope__free_unpacked(hello, NULL);
    json_error_t err;
    json_t *extra = json_loads(extra_json, 0, &err);
    assert_non_null(extra);
    Rl__Value *ev = rl_value_from_json(extra);
    json_decref(extra);
    Rl__Envelope env = RL__ENVELOPE__INIT;
    Rl__Configure c = RL__CONFIGURE__INIT;
    /* the reward role reads its section at init */
    rl_config *job = rl_roles_job(NULL, 0, NULL);
    char *cfg_json = job ? rl_config_to_json(job, "") : NULL;
    rl_config_free(job);
    assert_non_null(cfg_json);
    c.config.data = (uint8_t *)cfg_json;
    c.config.len = strlen(cfg_json);
    c.config_format = "json";
    c.heartbeat_ms = heartbeat_ms;
    c.liveness = 3;
    c.extra = ev;
    env.body_case = RL__ENVELOPE__BODY_CONFIGURE;
    env.configure = &c;
    s_router_send(sock, id, id_len, &env);
    rl_value_free(ev);
    free(cfg_json);
    Rl__Envelope *got;
    do { /* skip heartbeats */
        got = s_router_recv(sock, id, &id_len);
        if (got && got->body_case == RL__ENVELOPE__BODY_HEARTBEAT) {
            rl__envelope__free_unpacked(got, NULL);
            continue;
        }
        break;
    } while (1);
    *ctx_out = ctx;
    *sock_out = sock;
    return got;
}

static void s_end_worker(pid_t pid, void *ctx, void *sock)
{
    kill(pid, SIGTERM);
    waitpid(pid, NULL, 0);
    zmq_close(sock);
    zmq_ctx_term(ctx);
}

static int s_has_method(const Rl__Ready *r, const char *name)
{
    for (size_t i = 0; i < r->n_methods; i++)
        if (strcmp(r->methods[i], name) == 0)
            return 1;
    return 0;
}

static void test_worker_ready_lists_served_methods(void **state)
{
    (void)state;
    pid_t pid;
    void *ctx, *sock;
    Rl__Envelope *got = s_configure_worker("{\"world_size\": 1, \"rank\": 0}", 200, &pid, &ctx, &sock);
    assert_non_null(got);
    assert_int_equal(got->body_case, RL__ENVELOPE__BODY_READY);
    /* the reward role's methods: the LM's and the diffusion track's images */
    assert_int_equal(got->ready->n_methods, 2);
    assert_string_equal(got->ready->methods[0], "compute_reward");
    assert_string_equal(got->ready->methods[1], "compute_image_reward");
    /* the registry declares the reward's scoring retry-safe (data, not a
     * role name in the runtime) */
    assert_int_equal(got->ready->n_retry_safe, 2);
    assert_string_equal(got->ready->retry_safe[0], "compute_reward");
    assert_string_equal(got->ready->retry_safe[1], "compute_image_reward");
    rl__envelope__free_unpacked(got, NULL);
    s_end_worker(pid, ctx, sock);

    got = s_configure_worker("{\"world_size\": 1, \"rank\": 0, \"test_methods\": true}", 200,
                             &pid, &ctx, &sock);
    assert_non_null(got);
    assert_int_equal(got->body_case, RL__ENVELOPE__BODY_READY);
    assert_true(s_has_method(got->ready, "compute_reward"));
    assert_true(s_has_method(got->ready, "echo"));
    assert_true(s_has_method(got->ready, "coll_check"));
    assert_int_equal(got->ready->n_methods, 18); /* 2 of the reward role, 16 test methods */
    int safe_sleep = 0, unsafe_sleep = 0;
    for (size_t i = 0; i < got->ready->n_retry_safe; i++) {
        safe_sleep |= strcmp(got->ready->retry_safe[i], "sleep_safe") == 0;
        unsafe_sleep |= strcmp(got->ready->retry_safe[i], "sleep") == 0;
    }
    assert_true(safe_sleep && !unsafe_sleep);
    rl__envelope__free_unpacked(got, NULL);
    s_end_worker(pid, ctx, sock);

    /* numbers from the driver are checked before use */
    static const char *const bad[] = {
        "{\"world_size\": 0, \"rank\": 0}",
        "{\"world_size\": 2, \"rank\": 5}",
        "{\"world_size\": 2, \"rank\": 1}",
        "{\"world_size\": 1, \"test_methods\": 3}",
        "{\"world_size\": 9999999999}",
    };
    static const char *const why[] = {
        "CONFIGURE: extra.world_size must be an integer in [1, 1048576]",
        "CONFIGURE: extra.rank must be an integer in [0, 1]",
        "CONFIGURE for rank 1 sent to reward/0",
        "CONFIGURE: extra.test_methods must be a boolean",
        "CONFIGURE: extra.world_size must be an integer in [1, 1048576]",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        got = s_configure_worker(bad[i], 200, &pid, &ctx, &sock);
        assert_non_null(got);
        assert_int_equal(got->body_case, RL__ENVELOPE__BODY_ERROR);
        assert_string_equal(got->error->message, why[i]);
        rl__envelope__free_unpacked(got, NULL);
        s_end_worker(pid, ctx, sock);
    }
    got = s_configure_worker("{}", 4000000000u, &pid, &ctx, &sock);
    assert_non_null(got);
    assert_int_equal(got->body_case, RL__ENVELOPE__BODY_ERROR);
    assert_string_equal(got->error->message, "CONFIGURE: heartbeat 4000000000 ms x 3 is out of range");
    rl__envelope__free_unpacked(got, NULL);
    s_end_worker(pid, ctx, sock);
}

/* D: CONFIGURE carries the file:line:col of the job tree, so a role's
 * config check at init names the job file. The worker runs in this
 * process (a thread) with a role whose init range-checks a key. */
static int s_probe_init(rl_worker_ctx *ctx)
{
    int64_t depth;
    return rl_config_get_int_in(ctx->config, "probe.depth", 1, 100, &depth);
}

static const rl_worker_role s_probe_role = {"probe", NULL, s_probe_init, NULL};

typedef struct {
    rl_worker_options opt;
    int rc;
} s_probe;

static void *s_probe_main(void *arg)
{
    s_probe *p = arg;
    p->rc = rl_worker_run(&p->opt, &s_probe_role);
    return NULL;
}

/* Runs the probe role against a driver with `job`; returns the start error. */
static void s_probe_start(rl_config *job, const char *want)
{
    rl_driver_options o = {.job = job};
    s_job *j = s_start_opt("{probe: {count: 1, node: ext}}", 0, 0, &o);
    s_probe p = {.opt = {.role = "probe", .rank = 0, .driver = rl_driver_endpoint(j->d),
                         .node = "here", .heartbeat_ms = 100, .give_up_ms = 5000}};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, s_probe_main, &p), 0);
    int rc = rl_driver_start(j->d);
    pthread_join(th, NULL);
    assert_int_equal(rc, RL_ESTATE);
    assert_string_equal(rl_error_message(), want);
    assert_int_equal(p.rc, RL_WORKER_EXIT_ERROR); /* init failed: the worker exits 1 */
    s_stop(j);
}

static void test_configure_carries_locations(void **state)
{
    (void)state;
    const char *text = "trainer:\n"
                       "  seed: 1\n"
                       "probe:\n"
                       "  depth: -1\n";
    rl_config *job = rl_config_parse_string(text, strlen(text), "job.yaml");
    assert_non_null(job);
    s_probe_start(job, "role probe cannot start: probe/0: job.yaml:4:10: probe.depth: must be in "
                       "[1, 100], got -1");
    rl_config_free(job);
    /* an override is located at the override itself */
    job = rl_config_load_job("probe:\n  depth: 5\n", NULL, 1,
                             (const char *const[]){"probe.depth=1000"});
    assert_non_null(job);
    s_probe_start(job, "role probe cannot start: probe/0: override probe.depth=1000: probe.depth: "
                       "must be in [1, 100], got 1000");
    rl_config_free(job);
}

static pid_t s_spawn_worker(const char *role, int rank, const char *endpoint, const char *give_up)
{
    pid_t pid = fork();
    if (pid == 0) {
        char r[16];
        snprintf(r, sizeof r, "%d", rank);
        execl(s_worker, s_worker, "--role", role, "--rank", r, "--driver", endpoint, "--log-level",
              "error", "--heartbeat-ms", "100", "--give-up-s", give_up, (char *)NULL);
        _exit(127);
    }
    return pid;
}

static void test_external_workers(void **state)
{
    (void)state;
    s_job *j = s_start("{reward: {count: 1, node: ext}}", 1, 0);
    assert_int_equal(rl_driver_start(j->d), RL_ETIMEOUT);
    assert_string_equal(rl_error_message(),
                        "timed out after 0.5 s waiting for 1 worker: reward/0 (node ext, external)");
    pid_t pid = s_spawn_worker("reward", 0, rl_driver_endpoint(j->d), "5");
    assert_int_equal(rl_group_wait_ready(rl_driver_group(j->d, "reward"), 10000), 0);
    assert_int_equal(rl_group_call_sync(rl_driver_group(j->d, "reward"), "whoami", RL_DISPATCH_RANK_ZERO,
                                        NULL, NULL), 0);
    s_stop(j); /* SHUTDOWN reaches the external worker too */
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

static void test_worker_gives_up_without_driver(void **state)
{
    (void)state;
    double t0 = s_now();
    pid_t pid = s_spawn_worker("reward", 0, "tcp://127.0.0.1:1", "1");
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 2);
    assert_true(s_now() - t0 < 5.0);
}

/* A failed assertion skips s_stop(): shut the workers down here. */
static int s_teardown(void **state)
{
    (void)state;
    if (s_current)
        s_stop(s_current);
    return 0;
}

int main(void)
{
    const char *build = getenv("BUILD");
    snprintf(s_worker, sizeof s_worker, "%s/bin/rl-worker", build ? build : "build");
    if (access(s_worker, X_OK) != 0) {
        fprintf(stderr, "test_runtime: %s not built\n", s_worker);
        return 1;
    }
    signal(SIGPIPE, SIG_IGN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_dispatch_modes, s_teardown),
        cmocka_unit_test_teardown(test_kill9_during_call, s_teardown),
        cmocka_unit_test_teardown(test_hung_worker_liveness, s_teardown),
        cmocka_unit_test_teardown(test_abort_waits_of_lost_peers, s_teardown),
        cmocka_unit_test_teardown(test_restart_limit, s_teardown),
        cmocka_unit_test_teardown(test_protocol_mismatch_and_unknown_peer, s_teardown),
        cmocka_unit_test_teardown(test_external_workers, s_teardown),
        cmocka_unit_test_teardown(test_worker_gives_up_without_driver, s_teardown),
        cmocka_unit_test_teardown(test_roles_started_by_name, s_teardown),
        cmocka_unit_test_teardown(test_usage_exit_is_fatal, s_teardown),
        cmocka_unit_test_teardown(test_production_worker_has_no_test_methods, s_teardown),
        cmocka_unit_test(test_worker_ready_lists_served_methods),
        cmocka_unit_test(test_given_job_id),
        cmocka_unit_test_teardown(test_configure_carries_locations, s_teardown),
    };
    return cmocka_run_group_tests_name("runtime", tests, NULL, NULL);
}
