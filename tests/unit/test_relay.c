/* test_relay.c — the node relay (rlrt/runtime/relay.h) on real sockets: a
 * ROUTER standing for the driver (speaking through common/runtime/msg.h,
 * as the driver does), rl_relay_run on its own thread, and DEALERs standing
 * for the workers with the workers' identities. Checks: messages pass both
 * ways and the driver sees relay + worker identities; replies to one
 * method's calls are held until the last one comes, or until hold_ms;
 * another message from a worker sends the held replies first; a call of
 * another method is not held back by them; hostile identities and frames
 * are dropped on the relay and refused by the driver's receive without
 * losing the framing; bad options are errors naming the option. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>
#include <cmocka.h>

#include "rl.pb-c.h"
#include "rlrt/error.h"
#include "rlrt/log.h"
#include "rlrt/runtime/relay.h"
#include "rlrt/wire.h"
#include "common/runtime/msg.h"

typedef struct {
    void *ctx, *drv;      /* the driver's ROUTER */
    void *w[3];           /* the workers' DEALERs */
    char drv_ep[128], relay_ep[128];
    rl_relay_options opt;
    rl_relay_stats st;
    int rc;
    volatile sig_atomic_t stop;
    pthread_t th;
    unsigned char wid[3][RL_MSG_ID_MAX]; /* each worker as the driver sees it */
    size_t wid_len[3];
} s_fix;

static double s_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void *s_relay_main(void *arg)
{
    s_fix *f = arg;
    f->rc = rl_relay_run(&f->opt, &f->st);
    return NULL;
}

/* Worker k sends an envelope (CALL answers: REPLY with call_id; 0: HEARTBEAT). */
static void s_worker_send(s_fix *f, int k, int body, uint64_t call_id)
{
    Rl__Envelope env = RL__ENVELOPE__INIT;
    Rl__Reply reply = RL__REPLY__INIT;
    Rl__Heartbeat hb = RL__HEARTBEAT__INIT;
    Rl__Hello hello = RL__HELLO__INIT;
    env.body_case = body;
    if (body == RL__ENVELOPE__BODY_REPLY) {
        reply.call_id = call_id;
        env.reply = &reply;
    } else if (body == RL__ENVELOPE__BODY_HELLO) {
        hello.role = "reward";
        hello.rank = (uint32_t)k;
        env.hello = &hello;
    } else {
        env.heartbeat = &hb;
    }
    assert_int_equal(rl_msg_send(f->w[k], NULL, 0, &env, NULL), RL_OK);
}

/* The driver receives one message within timeout_s (0: none came). */
static int s_driver_recv(s_fix *f, double timeout_s, rl_msg *m)
{
    zmq_pollitem_t it = {f->drv, 0, ZMQ_POLLIN, 0};
    double t0 = s_now();
    while (s_now() - t0 < timeout_s) {
        zmq_poll(&it, 1, 20);
        if (rl_msg_recv(f->drv, 1, m) == RL_OK)
            return 1;
        rl_msg_clear(m);
    }
    return 0;
}

/* The driver's CALL of `method` with call_id to worker k. */
static void s_driver_call(s_fix *f, int k, const char *method, uint64_t call_id)
{
    Rl__Envelope env = RL__ENVELOPE__INIT;
    Rl__Call call = RL__CALL__INIT;
    call.call_id = call_id;
    call.method = (char *)method;
    env.body_case = RL__ENVELOPE__BODY_CALL;
    env.call = &call;
    assert_int_equal(rl_msg_send(f->drv, f->wid[k], f->wid_len[k], &env, NULL), RL_OK);
}

/* Worker k receives the CALL and says which call id it was. */
static uint64_t s_worker_take_call(s_fix *f, int k)
{
    zmq_pollitem_t it = {f->w[k], 0, ZMQ_POLLIN, 0};
    assert_true(zmq_poll(&it, 1, 3000) == 1);
    rl_msg m;
    assert_int_equal(rl_msg_recv(f->w[k], 0, &m), RL_OK);
    assert_int_equal(m.env->body_case, RL__ENVELOPE__BODY_CALL);
    uint64_t id = m.env->call->call_id;
    rl_msg_clear(&m);
    return id;
}

static void s_setup(s_fix *f, int hold_ms)
{
    memset(f, 0, sizeof *f);
    f->ctx = zmq_ctx_new();
    f->drv = zmq_socket(f->ctx, ZMQ_ROUTER);
    int zero = 0;
    zmq_setsockopt(f->drv, ZMQ_LINGER, &zero, sizeof zero);
    assert_int_equal(zmq_bind(f->drv, "tcp://127.0.0.1:*"), 0);
    size_t len = sizeof f->drv_ep;
    zmq_getsockopt(f->drv, ZMQ_LAST_ENDPOINT, f->drv_ep, &len);
    snprintf(f->relay_ep, sizeof f->relay_ep, "ipc://@rlrt-test-relay-%d-%d", (int)getpid(),
             hold_ms);
    f->opt = (rl_relay_options){.driver = f->drv_ep, .bind = f->relay_ep, .node = "n1",
                                .hold_ms = hold_ms, .stop = &f->stop};
    assert_int_equal(pthread_create(&f->th, NULL, s_relay_main, f), 0);
    for (int k = 0; k < 3; k++) {
        f->w[k] = zmq_socket(f->ctx, ZMQ_DEALER);
        zmq_setsockopt(f->w[k], ZMQ_LINGER, &zero, sizeof zero);
        char id[64];
        snprintf(id, sizeof id, "reward/%d#%d.1", k, 100 + k);
        zmq_setsockopt(f->w[k], ZMQ_ROUTING_ID, id, strlen(id));
        assert_int_equal(zmq_connect(f->w[k], f->relay_ep), 0);
    }
    /* HELLO from each: the driver learns who is behind the relay */
    for (int k = 0; k < 3; k++) {
        rl_msg m;
        double t0 = s_now();
        int got = 0;
        while (!got && s_now() - t0 < 5) { /* the relay may still be binding */
            s_worker_send(f, k, RL__ENVELOPE__BODY_HELLO, 0);
            got = s_driver_recv(f, 0.3, &m);
        }
        assert_true(got);
        assert_int_equal(m.env->body_case, RL__ENVELOPE__BODY_HELLO);
        assert_true(m.peer_off > 2);
        assert_int_equal(m.id[0], RL_MSG_RELAY_MARK);
        assert_int_equal(rl_msg_relay_part(m.id, m.id_len), m.peer_off);
        char want[64];
        snprintf(want, sizeof want, "reward/%d#%d.1", k, 100 + k);
        assert_int_equal(m.id_len - m.peer_off, strlen(want));
        assert_memory_equal(m.id + m.peer_off, want, strlen(want));
        memcpy(f->wid[k], m.id, m.id_len);
        f->wid_len[k] = m.id_len;
        rl_msg_clear(&m);
        /* a repeated HELLO may still be in flight: drain it */
        while (s_driver_recv(f, 0.05, &m))
            rl_msg_clear(&m);
    }
}

static void s_teardown_fix(s_fix *f)
{
    f->stop = 1;
    pthread_join(f->th, NULL);
    for (int k = 0; k < 3; k++)
        zmq_close(f->w[k]);
    zmq_close(f->drv);
    zmq_ctx_term(f->ctx);
}

static void test_relay_holds_until_the_last_reply(void **state)
{
    (void)state;
    s_fix f;
    s_setup(&f, 5000);
    for (int k = 0; k < 3; k++)
        s_driver_call(&f, k, "compute_reward", 10 + (uint64_t)k);
    uint64_t ids[3];
    for (int k = 0; k < 3; k++)
        ids[k] = s_worker_take_call(&f, k);
    assert_int_equal(ids[0], 10);
    assert_int_equal(ids[2], 12);
    s_worker_send(&f, 0, RL__ENVELOPE__BODY_REPLY, ids[0]);
    s_worker_send(&f, 1, RL__ENVELOPE__BODY_REPLY, ids[1]);
    rl_msg m;
    assert_false(s_driver_recv(&f, 0.4, &m)); /* held: reward/2 has not answered */
    /* a call of another method is not held back by them */
    s_driver_call(&f, 2, "drain", 20);
    assert_int_equal(s_worker_take_call(&f, 2), 20);
    s_worker_send(&f, 2, RL__ENVELOPE__BODY_REPLY, 20);
    assert_true(s_driver_recv(&f, 2.0, &m));
    assert_int_equal(m.env->reply->call_id, 20);
    rl_msg_clear(&m);
    /* the last answer: all three come, the held ones first */
    double t0 = s_now();
    s_worker_send(&f, 2, RL__ENVELOPE__BODY_REPLY, ids[2]);
    uint64_t got[3];
    for (int i = 0; i < 3; i++) {
        assert_true(s_driver_recv(&f, 2.0, &m));
        assert_int_equal(m.env->body_case, RL__ENVELOPE__BODY_REPLY);
        got[i] = m.env->reply->call_id;
        assert_int_equal(m.id_len, f.wid_len[got[i] - 10]); /* from the worker that answered */
        assert_memory_equal(m.id, f.wid[got[i] - 10], m.id_len);
        rl_msg_clear(&m);
    }
    assert_true(s_now() - t0 < 1.0);
    assert_int_equal(got[0], 10);
    assert_int_equal(got[1], 11);
    assert_int_equal(got[2], 12);
    s_teardown_fix(&f);
    assert_int_equal(f.rc, RL_OK);
    assert_int_equal(f.st.held, 2);
    assert_int_equal(f.st.dropped, 0);
}

static void test_relay_hold_is_bounded(void **state)
{
    (void)state;
    s_fix f;
    s_setup(&f, 150);
    for (int k = 0; k < 3; k++)
        s_driver_call(&f, k, "compute_reward", 30 + (uint64_t)k);
    for (int k = 0; k < 3; k++)
        s_worker_take_call(&f, k);
    double t0 = s_now();
    s_worker_send(&f, 0, RL__ENVELOPE__BODY_REPLY, 30); /* reward/1 and 2 never answer */
    rl_msg m;
    assert_true(s_driver_recv(&f, 3.0, &m));
    double waited = s_now() - t0;
    assert_int_equal(m.env->reply->call_id, 30);
    rl_msg_clear(&m);
    if (waited < 0.12 || waited > 2.0)
        fail_msg("the held reply came after %.3f s (hold 0.15 s)", waited);
    /* a HELLO of reward/1's next connection forgets its unanswered call:
     * reward/2's answer, now the last one, is not held */
    s_worker_send(&f, 1, RL__ENVELOPE__BODY_HELLO, 0);
    assert_true(s_driver_recv(&f, 2.0, &m));
    assert_int_equal(m.env->body_case, RL__ENVELOPE__BODY_HELLO);
    rl_msg_clear(&m);
    t0 = s_now();
    s_worker_send(&f, 2, RL__ENVELOPE__BODY_REPLY, 32);
    assert_true(s_driver_recv(&f, 2.0, &m));
    assert_true(s_now() - t0 < 0.1);
    assert_int_equal(m.env->reply->call_id, 32);
    rl_msg_clear(&m);
    s_teardown_fix(&f);
}

static void test_relay_keeps_a_workers_order(void **state)
{
    (void)state;
    s_fix f;
    s_setup(&f, 5000);
    for (int k = 0; k < 2; k++)
        s_driver_call(&f, k, "generate", 40 + (uint64_t)k);
    for (int k = 0; k < 2; k++)
        s_worker_take_call(&f, k);
    s_worker_send(&f, 0, RL__ENVELOPE__BODY_REPLY, 40); /* held for rollout/1 */
    s_worker_send(&f, 0, RL__ENVELOPE__BODY_HEARTBEAT, 0);
    rl_msg m;
    assert_true(s_driver_recv(&f, 2.0, &m));
    assert_int_equal(m.env->body_case, RL__ENVELOPE__BODY_REPLY); /* the reply first */
    rl_msg_clear(&m);
    assert_true(s_driver_recv(&f, 2.0, &m));
    assert_int_equal(m.env->body_case, RL__ENVELOPE__BODY_HEARTBEAT);
    rl_msg_clear(&m);
    s_teardown_fix(&f);
}

/* Hostile peers: on the relay's worker side, and at the driver's receive. */
static void test_relay_hostile_frames(void **state)
{
    (void)state;
    s_fix f;
    s_setup(&f, 0);
    int zero = 0;
    /* a worker whose identity carries the relay mark: dropped by the relay */
    void *bad = zmq_socket(f.ctx, ZMQ_DEALER);
    zmq_setsockopt(bad, ZMQ_LINGER, &zero, sizeof zero);
    const char badid[] = "\x01x\x01reward/0#1.1";
    zmq_setsockopt(bad, ZMQ_ROUTING_ID, badid, sizeof badid - 1);
    assert_int_equal(zmq_connect(bad, f.relay_ep), 0);
    Rl__Envelope env = RL__ENVELOPE__INIT;
    Rl__Heartbeat hb = RL__HEARTBEAT__INIT;
    env.body_case = RL__ENVELOPE__BODY_HEARTBEAT;
    env.heartbeat = &hb;
    for (int i = 0; i < 5; i++)
        rl_msg_send(bad, NULL, 0, &env, NULL);
    rl_msg m;
    assert_false(s_driver_recv(&f, 0.4, &m));
    /* the driver's messages for a worker not behind the relay: dropped */
    unsigned char ghost[RL_MSG_ID_MAX];
    size_t relay = rl_msg_relay_part(f.wid[0], f.wid_len[0]);
    memcpy(ghost, f.wid[0], relay);
    memcpy(ghost + relay, "ghost/0#1.1", 11);
    assert_int_equal(rl_msg_send(f.drv, ghost, relay + 11, &env, NULL), RL_OK);
    /* the relay still serves its workers */
    s_worker_send(&f, 1, RL__ENVELOPE__BODY_HEARTBEAT, 0);
    assert_true(s_driver_recv(&f, 2.0, &m));
    assert_memory_equal(m.id, f.wid[1], f.wid_len[1]);
    rl_msg_clear(&m);

    /* a direct peer claiming to be a relay, at the driver's receive: a
     * missing, empty, too long or relay-marked second identity is RL_EPROTO
     * and the next message is read whole */
    void *fake = zmq_socket(f.ctx, ZMQ_DEALER);
    zmq_setsockopt(fake, ZMQ_LINGER, &zero, sizeof zero);
    zmq_setsockopt(fake, ZMQ_ROUTING_ID, "\x01" "fake\x01", 6);
    assert_int_equal(zmq_connect(fake, f.drv_ep), 0);
    uint8_t envbuf[64];
    size_t envlen = rl__envelope__pack(&env, envbuf);
    char longid[RL_MSG_PEER_ID_MAX + 2];
    memset(longid, 'a', sizeof longid);
    struct {
        const void *id;
        size_t len;
        int with_env;
    } cases[] = {
        {envbuf, envlen, 0},               /* no worker identity: the envelope taken for one */
        {"", 0, 1},                        /* empty */
        {longid, sizeof longid, 1},        /* too long */
        {"\x01y\x01w", 4, 1},              /* a relay's again */
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        zmq_send(fake, cases[c].id, cases[c].len, cases[c].with_env ? ZMQ_SNDMORE : 0);
        if (cases[c].with_env)
            zmq_send(fake, envbuf, envlen, 0);
        zmq_pollitem_t it = {f.drv, 0, ZMQ_POLLIN, 0};
        assert_true(zmq_poll(&it, 1, 3000) == 1);
        int rc = rl_msg_recv(f.drv, 1, &m);
        if (rc != RL_EPROTO)
            fail_msg("case %zu: rl_msg_recv gave %d, not RL_EPROTO", c, rc);
        assert_true(strstr(rl_error_message(), "relay") != NULL);
        rl_msg_clear(&m);
    }
    /* then a good one from the same peer */
    zmq_send(fake, "reward/9#1.1", 12, ZMQ_SNDMORE);
    zmq_send(fake, envbuf, envlen, 0);
    assert_true(s_driver_recv(&f, 2.0, &m));
    assert_int_equal(m.env->body_case, RL__ENVELOPE__BODY_HEARTBEAT);
    assert_int_equal(m.id_len - m.peer_off, 12);
    rl_msg_clear(&m);
    /* an identity with the mark but more after it in the same frame */
    void *odd = zmq_socket(f.ctx, ZMQ_DEALER);
    zmq_setsockopt(odd, ZMQ_LINGER, &zero, sizeof zero);
    zmq_setsockopt(odd, ZMQ_ROUTING_ID, "\x01z\x01tail", 7);
    assert_int_equal(zmq_connect(odd, f.drv_ep), 0);
    zmq_send(odd, envbuf, envlen, 0);
    zmq_pollitem_t it = {f.drv, 0, ZMQ_POLLIN, 0};
    assert_true(zmq_poll(&it, 1, 3000) == 1);
    assert_int_equal(rl_msg_recv(f.drv, 1, &m), RL_EPROTO);
    rl_msg_clear(&m);
    zmq_close(odd);
    zmq_close(fake);
    zmq_close(bad);
    s_teardown_fix(&f);
    assert_true(f.st.dropped >= 6);
}

static void test_relay_bad_options(void **state)
{
    (void)state;
    volatile sig_atomic_t stop = 0;
    char dir[128], badbind[160];
    snprintf(dir, sizeof dir, "/tmp/rlrt-test-relay-open-%d", (int)getpid());
    mkdir(dir, 0755); /* others may enter it: refused under security */
    snprintf(badbind, sizeof badbind, "ipc://%s/relay", dir);
    const char *key = "0123456789012345678901234567890123456789"; /* 40 Z85 characters */
/* each case: the defaults, one field changed (a later designated field wins) */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Woverride-init"
#define O(...) ((rl_relay_options){.driver = "tcp://127.0.0.1:1", .bind = "ipc://@x", \
                                   .node = "n", .stop = &stop, __VA_ARGS__})
    struct {
        rl_relay_options o;
        const char *want;
    } cases[] = {
        {O(.driver = NULL), "no driver endpoint"},
        {O(.bind = ""), "no endpoint to bind"},
        {O(.node = "a b"), "node name 'a b'"},
        {O(.hold_ms = -1), "hold of -1 ms"},
        {O(.stop = NULL), "no stop flag"},
        {O(.bind = "bogus://x"), "cannot bind bogus://x"},
        {O(.give_up_ms = -5), "give-up of -5 ms"},
        {O(.driver_key = "short"), "the driver key must be 40 Z85 characters, got 5"},
        {O(.driver_key = key), "with security the workers' side must be a Unix socket at a path"},
        {O(.driver_key = key, .bind = "tcp://127.0.0.1:5"), "must be a Unix socket at a path"},
        {O(.driver_key = key, .bind = badbind), "nobody else may enter (mode 0700)"},
    };
#undef O
#pragma GCC diagnostic pop
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        int rc = rl_relay_run(&cases[i].o, NULL);
        assert_int_not_equal(rc, RL_OK);
        if (!strstr(rl_error_message(), cases[i].want))
            fail_msg("case %zu: '%s' lacks '%s'", i, rl_error_message(), cases[i].want);
    }
    struct stat st;
    assert_int_equal(stat(dir, &st), 0); /* a directory it refused is left alone */
    rmdir(dir);
    /* a driver that never speaks: the relay gives up (an orphan leaves) */
    rl_relay_options o = {.driver = "tcp://127.0.0.1:1", .bind = "ipc://@rlrt-test-giveup",
                          .node = "n", .stop = &stop, .give_up_ms = 300};
    double t0 = s_now();
    assert_int_equal(rl_relay_run(&o, NULL), RL_ETIMEOUT);
    assert_true(s_now() - t0 < 2.0);
    assert_true(strstr(rl_error_message(), "nothing from the driver") != NULL);
    char ep[128];
    rl_relay_endpoint("0123456789abcdef", "node-1", 0, ep, sizeof ep);
    assert_string_equal(ep, "ipc://@rlrt-0123456789abcdef-node-1");
    rl_relay_endpoint("0123456789abcdef", "node-1", 1, ep, sizeof ep);
    assert_string_equal(ep, "ipc:///tmp/rlrt-0123456789abcdef-node-1/relay");
}

int main(void)
{
    rl_log_set_level(RL_LOG_WARN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_relay_holds_until_the_last_reply),
        cmocka_unit_test(test_relay_hold_is_bounded),
        cmocka_unit_test(test_relay_keeps_a_workers_order),
        cmocka_unit_test(test_relay_hostile_frames),
        cmocka_unit_test(test_relay_bad_options),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
