/* test_channel.c — direct data channels and the versioned weight channel:
 * round trips, multiple receivers, version ordering, size mismatches, and
 * that a partially received version never becomes active. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>
#include <cmocka.h>

#include "rlrt/error.h"
#include "rlrt/dtype.h"
#include "rlrt/tensor.h"
#include "rlrt/dataproto.h"
#include "rlrt/runtime/channel.h"
#include "common/runtime/abort.h"

static void test_data_channel_round_trip(void **state)
{
    (void)state;
    rl_channel *a = rl_channel_listen("tcp://127.0.0.1:*");
    assert_non_null(a);
    assert_non_null(strstr(rl_channel_endpoint(a), "tcp://127.0.0.1:"));
    rl_channel *b = rl_channel_connect(rl_channel_endpoint(a));
    assert_non_null(b);
    rl_dataproto *dp = rl_dataproto_new();
    int64_t shape[2] = {3, 4};
    float *x = rl_tensor_data(rl_dataproto_new_tensor(dp, "x", RL_F32, 2, shape));
    for (int i = 0; i < 12; i++)
        x[i] = (float)i;
    rl_column_set_str(rl_dataproto_new_column(dp, "uid", RL_COL_STRING), 2, "p2");
    assert_int_equal(rl_channel_send(b, dp, 1000), 0);
    rl_dataproto *got = NULL;
    assert_int_equal(rl_channel_recv(a, &got, 2000), 0);
    assert_true(rl_dataproto_equal(dp, got));
    rl_dataproto_free(got);
    assert_int_equal(rl_channel_recv(a, &got, 50), RL_ETIMEOUT);
    assert_non_null(strstr(rl_error_message(), "nothing received in 50 ms"));
    rl_dataproto_free(dp);
    rl_channel_free(a);
    rl_channel_free(b);
    assert_null(rl_channel_connect("bogus://x"));
}

typedef struct {
    const char *endpoint;
    int64_t count;
    int versions; /* how many versions to wait for */
    int rc;
    uint64_t version;
    float first, last;
} s_recv_job;

static void *s_receiver(void *arg)
{
    s_recv_job *j = arg;
    rl_weight_receiver *r = rl_weight_receiver_new(j->endpoint, j->count);
    if (!r) {
        j->rc = -1;
        return NULL;
    }
    for (int v = 0; v < j->versions; v++)
        if ((j->rc = rl_weight_recv_poll(r, 10000)))
            break;
    const float *w = rl_weight_recv_active(r, &j->version);
    j->first = w[0];
    j->last = w[j->count - 1];
    rl_weight_receiver_free(r);
    return NULL;
}

static void test_weight_channel_two_receivers_two_versions(void **state)
{
    (void)state;
    const int64_t count = 1000003; /* several 1 MiB buckets, last one short */
    rl_weight_sender *s = rl_weight_sender_new("tcp://127.0.0.1:*", 1 << 20);
    assert_non_null(s);
    s_recv_job jobs[2] = {{rl_weight_sender_endpoint(s), count, 2, 0, 0, 0, 0},
                          {rl_weight_sender_endpoint(s), count, 2, 0, 0, 0, 0}};
    pthread_t th[2];
    for (int i = 0; i < 2; i++)
        pthread_create(&th[i], NULL, s_receiver, &jobs[i]);
    float *buf = malloc(sizeof(float) * count);
    for (int v = 1; v <= 2; v++) {
        for (int64_t i = 0; i < count; i++)
            buf[i] = (float)(i % 7) + 10.0f * v;
        assert_int_equal(rl_weight_send(s, (uint64_t)v, buf, count, 2, 10000), 0);
    }
    assert_int_equal(rl_weight_send(s, 2, buf, count, 2, 1000), RL_EINVAL);
    assert_non_null(strstr(rl_error_message(), "version 2 is not newer than 2"));
    for (int i = 0; i < 2; i++) {
        pthread_join(th[i], NULL);
        assert_int_equal(jobs[i].rc, 0);
        assert_int_equal(jobs[i].version, 2);
        assert_true(jobs[i].first == 20.0f);
        assert_true(jobs[i].last == (float)((count - 1) % 7) + 20.0f);
    }
    free(buf);
    rl_weight_sender_free(s);
}

static void test_weight_channel_size_mismatch(void **state)
{
    (void)state;
    rl_weight_sender *s = rl_weight_sender_new("tcp://127.0.0.1:*", 1 << 16);
    s_recv_job job = {rl_weight_sender_endpoint(s), 10, 1, 0, 0, 0, 0};
    pthread_t th;
    pthread_create(&th, NULL, s_receiver, &job);
    float buf[20] = {0};
    rl_weight_send(s, 1, buf, 20, 1, 1500); /* receiver never acknowledges */
    pthread_join(th, NULL);
    assert_int_equal(job.rc, RL_ESHAPE);
    assert_int_equal(job.version, 0);
    rl_weight_sender_free(s);
}

/* A raw sender delivers only bucket 0 of 2 of version 2: the receiver keeps
 * version 1 active and unchanged. Header layout as in channel.c. */
typedef struct {
    uint32_t magic, index, n_buckets, pad;
    uint64_t version, offset, count, total;
} s_bucket;

static void s_raw_bucket(void *router, const void *id, size_t idn, uint32_t index, uint32_t n,
                         uint64_t version, uint64_t off, const float *data, uint64_t cnt, uint64_t total)
{
    s_bucket h = {0x42574c52u, index, n, 0, version, off, cnt, total};
    zmq_send(router, id, idn, ZMQ_SNDMORE);
    zmq_send(router, &h, sizeof h, ZMQ_SNDMORE);
    zmq_send(router, data, cnt * sizeof(float), 0);
}

static void test_weight_partial_version_never_active(void **state)
{
    (void)state;
    void *ctx = zmq_ctx_new();
    void *router = zmq_socket(ctx, ZMQ_ROUTER);
    int linger = 0;
    zmq_setsockopt(router, ZMQ_LINGER, &linger, sizeof linger);
    assert_int_equal(zmq_bind(router, "tcp://127.0.0.1:*"), 0);
    char ep[256];
    size_t len = sizeof ep;
    zmq_getsockopt(router, ZMQ_LAST_ENDPOINT, ep, &len);
    rl_weight_receiver *r = rl_weight_receiver_new(ep, 4);
    assert_non_null(r);
    unsigned char id[256], have[16];
    int idn = zmq_recv(router, id, sizeof id, 0);
    assert_true(idn > 0);
    assert_int_equal(zmq_recv(router, have, sizeof have, 0), 16);
    float v1[4] = {1, 1, 1, 1}, v2[4] = {2, 2, 2, 2};
    s_raw_bucket(router, id, (size_t)idn, 0, 2, 1, 0, v1, 2, 4);
    s_raw_bucket(router, id, (size_t)idn, 1, 2, 1, 2, v1 + 2, 2, 4);
    assert_int_equal(rl_weight_recv_poll(r, 2000), 0);
    uint64_t version;
    const float *w = rl_weight_recv_active(r, &version);
    assert_int_equal(version, 1);
    s_raw_bucket(router, id, (size_t)idn, 0, 2, 2, 0, v2, 2, 4); /* half of v2 */
    assert_int_equal(rl_weight_recv_poll(r, 200), RL_ETIMEOUT);
    assert_non_null(strstr(rl_error_message(), "1 of 2 buckets of version 2"));
    w = rl_weight_recv_active(r, &version);
    assert_int_equal(version, 1);
    for (int i = 0; i < 4; i++)
        assert_true(w[i] == 1.0f);
    s_raw_bucket(router, id, (size_t)idn, 1, 2, 2, 2, v2 + 2, 2, 4); /* the rest */
    assert_int_equal(rl_weight_recv_poll(r, 2000), 0);
    w = rl_weight_recv_active(r, &version);
    assert_int_equal(version, 2);
    for (int i = 0; i < 4; i++)
        assert_true(w[i] == 2.0f);
    /* a bucket running past the buffer is refused */
    s_raw_bucket(router, id, (size_t)idn, 0, 1, 3, 3, v2, 2, 4);
    assert_int_equal(rl_weight_recv_poll(r, 2000), RL_EPROTO);
    /* a bucket count no buffer of 4 floats can have (each bucket holds at
     * least one float) is refused before anything is allocated for it */
    s_raw_bucket(router, id, (size_t)idn, 0, 0xffffffffu, 3, 0, v2, 1, 4);
    assert_int_equal(rl_weight_recv_poll(r, 2000), RL_EPROTO);
    assert_string_equal(rl_error_message(),
                        "weight channel: malformed bucket 0 of 4294967295 (offset 0, 1 floats of 4)");
    /* buckets within bounds that do not tile the buffer as the sender cuts
     * it: 2 buckets where bucket 1 repeats floats 0-1 (so floats 2-3 would
     * keep version 2's values under version 3's name) */
    float v3[4] = {3, 3, 3, 3};
    s_raw_bucket(router, id, (size_t)idn, 0, 2, 3, 0, v3, 2, 4);
    s_raw_bucket(router, id, (size_t)idn, 1, 2, 3, 0, v3, 2, 4);
    assert_int_equal(rl_weight_recv_poll(r, 2000), RL_EPROTO);
    assert_string_equal(rl_error_message(), "weight channel: bucket 1 of 2 of version 3 (offset "
                                            "0, 2 floats) does not tile a buffer of 4 floats");
    /* ... or whose sizes disagree: a full bucket of 3, a last one of 2 at 2 */
    s_raw_bucket(router, id, (size_t)idn, 0, 2, 4, 0, v3, 3, 4);
    s_raw_bucket(router, id, (size_t)idn, 1, 2, 4, 2, v3, 2, 4);
    assert_int_equal(rl_weight_recv_poll(r, 2000), RL_EPROTO);
    assert_non_null(strstr(rl_error_message(), "like the version's other buckets"));
    w = rl_weight_recv_active(r, &version);
    assert_int_equal(version, 2);
    /* the sender's own cut of 4 floats in buckets of 3 (3 + 1) is taken */
    s_raw_bucket(router, id, (size_t)idn, 0, 2, 5, 0, v3, 3, 4);
    s_raw_bucket(router, id, (size_t)idn, 1, 2, 5, 3, v3 + 3, 1, 4);
    assert_int_equal(rl_weight_recv_poll(r, 2000), 0);
    w = rl_weight_recv_active(r, &version);
    assert_int_equal(version, 5);
    for (int i = 0; i < 4; i++)
        assert_true(w[i] == 3.0f);
    rl_weight_receiver_free(r);
    zmq_close(router);
    zmq_ctx_term(ctx);
}

/* ---- aborted waits (common/runtime/abort.h) ------------------------------------------ */

static double s_mono(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

typedef struct {
    rl_weight_receiver *r;
    rl_channel *ch;
    rl_weight_sender *s;
    const float *buf;
    int64_t count;
    int rc;
    char msg[512];
} s_wait_job;

static void *s_wait_main(void *p)
{
    s_wait_job *j = p;
    rl_dataproto *got = NULL;
    if (j->r)
        j->rc = rl_weight_recv_poll(j->r, 120000);
    else if (j->ch)
        j->rc = rl_channel_recv(j->ch, &got, 120000);
    else
        j->rc = rl_weight_send(j->s, 1, j->buf, j->count, 1, 120000);
    rl_dataproto_free(got);
    snprintf(j->msg, sizeof j->msg, "%s", rl_error_message());
    return NULL;
}

/* Runs j's wait on a thread, aborts after 300 ms; the wait must end with
 * RL_EPEER naming `what` and the reason, well before its 120 s. */
static void s_abort_wait(s_wait_job *j, const char *what)
{
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, s_wait_main, j), 0);
    usleep(300 * 1000);
    double t0 = s_mono();
    rl_abort_raise("actor/0 was killed by signal 9 (test)");
    pthread_join(th, NULL);
    assert_int_equal(j->rc, RL_EPEER);
    char want[256];
    snprintf(want, sizeof want, "%s: aborted: actor/0 was killed by signal 9 (test)", what);
    assert_string_equal(j->msg, want);
    assert_true(s_mono() - t0 < 10.0); /* a poll period (50 ms); generous */
}

/* A rollout waiting for the weights of a dead actor, and an env waiting on
 * its data channel for a dead rollout, return when the waits are aborted;
 * the objects stay usable (only the waits under way ended). */
static void test_abort_ends_receives(void **state)
{
    (void)state;
    rl_weight_sender *s = rl_weight_sender_new("tcp://127.0.0.1:*", 0);
    rl_weight_receiver *r = rl_weight_receiver_new(rl_weight_sender_endpoint(s), 8);
    assert_non_null(r);
    s_wait_job j = {.r = r};
    s_abort_wait(&j, "weight channel: receiving");
    /* a wait that starts after the abort gets the version */
    float w[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    s_wait_job again = {.r = r};
    pthread_t th;
    pthread_create(&th, NULL, s_wait_main, &again);
    assert_int_equal(rl_weight_send(s, 1, w, 8, 1, 10000), 0);
    pthread_join(th, NULL);
    assert_int_equal(again.rc, 0);
    uint64_t v = 0;
    assert_true(rl_weight_recv_active(r, &v)[7] == 8.0f);
    assert_int_equal(v, 1);
    rl_weight_receiver_free(r);
    rl_weight_sender_free(s);

    rl_channel *a = rl_channel_listen("tcp://127.0.0.1:*");
    assert_non_null(a);
    s_wait_job jc = {.ch = a};
    char what[300];
    snprintf(what, sizeof what, "channel %s: receive", rl_channel_endpoint(a));
    s_abort_wait(&jc, what);
    rl_channel_free(a);
}

/* An actor publishing to a rollout that died (connected, then gone without
 * acknowledging) returns when its wait is aborted; the buckets that point
 * into its buffer are dropped before it returns (the buffer is freed right
 * away: ASan would see a late read), and the sender refuses to go on. */
static void test_abort_ends_a_publish(void **state)
{
    (void)state;
    rl_weight_sender *s = rl_weight_sender_new("tcp://127.0.0.1:*", 1 << 16);
    rl_weight_receiver *r = rl_weight_receiver_new(rl_weight_sender_endpoint(s), 1 << 20);
    assert_non_null(r);
    float *buf = calloc(1 << 20, sizeof(float));
    s_wait_job j = {.s = s, .buf = buf, .count = 1 << 20};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, s_wait_main, &j), 0);
    usleep(200 * 1000);
    rl_weight_receiver_free(r); /* the rollout dies: no acknowledgement */
    usleep(200 * 1000);
    rl_abort_raise("rollout/0 was killed by signal 9 (test)");
    pthread_join(th, NULL);
    free(buf);
    assert_int_equal(j.rc, RL_EPEER);
    assert_non_null(strstr(j.msg, "weight channel: waiting for acknowledgements: aborted: rollout/0 was "
                                  "killed by signal 9 (test)"));
    assert_non_null(strstr(j.msg, "(star) version 1: no acknowledgement from 1 unranked"));
    float w[4] = {0};
    assert_int_equal(rl_weight_send(s, 2, w, 4, 1, 1000), RL_ESTATE);
    assert_string_equal(rl_error_message(), "weight channel: an earlier send failed; make a new sender");
    rl_weight_sender_free(s);
}


/* ---- chain fan-out ---------------------------------------------------------------- */

static float s_chain_value(int64_t i, int v) { return (float)(i % 1013) * 0.5f + 1000.0f * (float)v; }

typedef struct {
    const char *endpoint;
    int64_t count;
    int rank, versions;
    int die_after_buckets; /* > 0: free the receiver once it holds that many buckets of version 1 */
    int rc, mismatches;
    uint64_t version;
    char msg[512];
    const char *bind; /* its input (NULL: tcp://127.0.0.1:*) */
    int no_wait; /* poll with timeout 0 between short sleeps (partial rollouts' decode steps) */
} s_chain_job;

/* A ranked receiver: after every version, the whole active buffer must be
 * the sender's of that version. */
static void *s_chain_receiver(void *arg)
{
    s_chain_job *j = arg;
    rl_weight_receiver *r = rl_weight_receiver_new_ranked(j->endpoint, j->count, j->rank,
                                                          j->bind ? j->bind : "tcp://127.0.0.1:*");
    if (!r) {
        j->rc = -1;
        return NULL;
    }
    if (j->die_after_buckets > 0) { /* dies mid-transfer (a killed process) */
        for (int tries = 0; tries < 20000; tries++) {
            int rc = rl_weight_recv_poll(r, 1);
            unsigned got = 0;
            if (rc == RL_ETIMEOUT && sscanf(strstr(rl_error_message(), "(") + 1, "%u", &got) == 1 &&
                got >= (unsigned)j->die_after_buckets)
                break;
            if (rc != RL_ETIMEOUT)
                break;
        }
        rl_weight_receiver_free(r);
        return NULL;
    }
    for (int v = 1; v <= j->versions; v++) {
        uint64_t have = 0;
        for (int tries = 0; j->no_wait && have < (uint64_t)v && tries < 200000; tries++) {
            j->rc = rl_weight_recv_poll(r, 0);
            if (j->rc == RL_ETIMEOUT)
                j->rc = 0;
            if (j->rc)
                break;
            rl_weight_recv_active(r, &have);
            if (have < (uint64_t)v)
                usleep(100);
        }
        if (!j->no_wait)
            j->rc = rl_weight_recv_poll(r, 20000);
        else if (!j->rc && have < (uint64_t)v)
            j->rc = RL_ETIMEOUT;
        if (j->rc) {
            snprintf(j->msg, sizeof j->msg, "%s", rl_error_message());
            break;
        }
        const float *w = rl_weight_recv_active(r, &j->version);
        for (int64_t i = 0; i < j->count; i++)
            j->mismatches += w[i] != s_chain_value(i, (int)j->version);
    }
    rl_weight_receiver_free(r);
    return NULL;
}

/* Four ranked receivers (joining out of rank order) and one plain one get
 * three versions down a chain; every receiver's buffer equals the sender's
 * after every version. */
static void test_weight_chain_versions(void **state)
{
    (void)state;
    const int64_t count = 1000003; /* 16 buckets of 256 KiB, the last one short */
    rl_weight_sender *s = rl_weight_sender_new("tcp://127.0.0.1:*", 1 << 18);
    assert_non_null(s);
    rl_weight_sender_set_fanout(s, RL_WEIGHT_FANOUT_CHAIN);
    int ranks[4] = {2, 0, 3, 1};
    s_chain_job jobs[4];
    pthread_t th[5];
    for (int i = 0; i < 4; i++) {
        jobs[i] = (s_chain_job){rl_weight_sender_endpoint(s), count, ranks[i], 3, 0, 0, 0, 0, "", NULL, 0};
        pthread_create(&th[i], NULL, s_chain_receiver, &jobs[i]);
    }
    s_recv_job plain = {rl_weight_sender_endpoint(s), count, 3, 0, 0, 0, 0};
    pthread_create(&th[4], NULL, s_receiver, &plain);
    float *buf = malloc(sizeof(float) * count);
    for (int v = 1; v <= 3; v++) {
        for (int64_t i = 0; i < count; i++)
            buf[i] = s_chain_value(i, v);
        int rc = rl_weight_send(s, (uint64_t)v, buf, count, 5, 20000);
        if (rc)
            fprintf(stderr, "version %d: %s\n", v, rl_error_message());
        assert_int_equal(rc, 0);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        assert_int_equal(jobs[i].rc, 0);
        assert_int_equal(jobs[i].version, 3);
        assert_int_equal(jobs[i].mismatches, 0);
    }
    pthread_join(th[4], NULL);
    assert_int_equal(plain.rc, 0);
    assert_int_equal(plain.version, 3);
    assert_true(plain.last == s_chain_value(count - 1, 3));
    free(buf);
    rl_weight_sender_free(s);
}

/* Inputs on two hosts (127.0.0.1 and 127.0.0.2, both loopback): the
 * chain runs over the hosts' heads, each head feeding its host's ranks, 15
 * directly and the rest in a chain after them (host 2 has 17 ranks besides
 * its head). Every rank, given in shuffled order, gets both versions whole:
 * a rank the plan leaves out never completes and the send times out. */
static void test_weight_chain_two_hosts(void **state)
{
    (void)state;
    enum { N = 20 };
    const int64_t count = 300007; /* 5 buckets of 256 KiB, the last one short */
    rl_weight_sender *s = rl_weight_sender_new("tcp://127.0.0.1:*", 1 << 18);
    assert_non_null(s);
    rl_weight_sender_set_fanout(s, RL_WEIGHT_FANOUT_CHAIN);
    s_chain_job jobs[N];
    pthread_t th[N];
    for (int i = 0; i < N; i++) {
        int rank = (i * 7) % N; /* joins out of rank order */
        jobs[i] = (s_chain_job){rl_weight_sender_endpoint(s), count, rank, 2, 0, 0, 0, 0, "",
                                rank % 7 == 0 ? "tcp://127.0.0.1:*" : "tcp://127.0.0.2:*", 0};
        pthread_create(&th[i], NULL, s_chain_receiver, &jobs[i]);
    }
    float *buf = malloc(sizeof(float) * count);
    for (int v = 1; v <= 2; v++) {
        for (int64_t i = 0; i < count; i++)
            buf[i] = s_chain_value(i, v);
        int rc = rl_weight_send(s, (uint64_t)v, buf, count, N, 20000);
        if (rc)
            fprintf(stderr, "version %d: %s\n", v, rl_error_message());
        assert_int_equal(rc, 0);
    }
    for (int i = 0; i < N; i++) {
        pthread_join(th[i], NULL);
        if (jobs[i].rc)
            fprintf(stderr, "rank %d: %s\n", jobs[i].rank, jobs[i].msg);
        assert_int_equal(jobs[i].rc, 0);
        assert_int_equal(jobs[i].version, 2);
        assert_int_equal(jobs[i].mismatches, 0);
    }
    free(buf);
    rl_weight_sender_free(s);
}

/* Ranked receivers that never wait (rl_weight_recv_poll(r, 0) between short
 * sleeps, as partial rollouts poll between decode steps) get three
 * versions down a chain whole: no bucket is lost when one comes before its
 * route. */
static void test_weight_chain_no_wait(void **state)
{
    (void)state;
    const int64_t count = 1000003;
    rl_weight_sender *s = rl_weight_sender_new("tcp://127.0.0.1:*", 1 << 18);
    assert_non_null(s);
    rl_weight_sender_set_fanout(s, RL_WEIGHT_FANOUT_CHAIN);
    s_chain_job jobs[3];
    pthread_t th[3];
    for (int i = 0; i < 3; i++) {
        jobs[i] = (s_chain_job){.endpoint = rl_weight_sender_endpoint(s), .count = count, .rank = i,
                                .versions = 3, .no_wait = 1};
        pthread_create(&th[i], NULL, s_chain_receiver, &jobs[i]);
    }
    float *buf = malloc(sizeof(float) * count);
    for (int v = 1; v <= 3; v++) {
        for (int64_t i = 0; i < count; i++)
            buf[i] = s_chain_value(i, v);
        int rc = rl_weight_send(s, (uint64_t)v, buf, count, 3, 20000);
        if (rc)
            fprintf(stderr, "version %d: %s\n", v, rl_error_message());
        assert_int_equal(rc, 0);
    }
    for (int i = 0; i < 3; i++) {
        pthread_join(th[i], NULL);
        if (jobs[i].rc)
            fprintf(stderr, "rank %d: %s\n", i, jobs[i].msg);
        assert_int_equal(jobs[i].rc, 0);
        assert_int_equal(jobs[i].version, 3);
        assert_int_equal(jobs[i].mismatches, 0);
    }
    free(buf);
    rl_weight_sender_free(s);
}

/* Rank 1 of a chain of 3 dies after it holds 2 buckets of version 1: the
 * sender ends at its timeout naming rank 1 (and rank 2 below it), rank 0
 * has the version, and rank 2's wait ends when the waits are aborted. */
static void test_weight_chain_dead_middle_rank(void **state)
{
    (void)state;
    const int64_t count = 4 << 20; /* 64 buckets of 256 KiB */
    rl_weight_sender *s = rl_weight_sender_new("tcp://127.0.0.1:*", 1 << 18);
    rl_weight_sender_set_fanout(s, RL_WEIGHT_FANOUT_CHAIN);
    s_chain_job jobs[3];
    pthread_t th[3];
    for (int i = 0; i < 3; i++) {
        jobs[i] = (s_chain_job){rl_weight_sender_endpoint(s), count, i, 1, i == 1 ? 2 : 0, 0, 0, 0, "", NULL, 0};
        pthread_create(&th[i], NULL, s_chain_receiver, &jobs[i]);
    }
    float *buf = malloc(sizeof(float) * count);
    for (int64_t i = 0; i < count; i++)
        buf[i] = s_chain_value(i, 1);
    double t0 = s_mono();
    assert_int_equal(rl_weight_send(s, 1, buf, count, 3, 3000), RL_ETIMEOUT);
    assert_true(s_mono() - t0 < 10.0);
    assert_non_null(strstr(rl_error_message(),
                           "weight channel (chain) version 1: no acknowledgement from rank 1, rank 2"));
    free(buf);
    pthread_join(th[0], NULL);
    pthread_join(th[1], NULL);
    assert_int_equal(jobs[0].rc, 0);
    assert_int_equal(jobs[0].mismatches, 0);
    rl_abort_raise("rollout/1 was killed by signal 9 (test)");
    pthread_join(th[2], NULL);
    assert_int_equal(jobs[2].rc, RL_EPEER);
    assert_int_equal(jobs[2].version, 0); /* nothing half-applied */
    rl_weight_sender_free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_data_channel_round_trip),
        cmocka_unit_test(test_weight_channel_two_receivers_two_versions),
        cmocka_unit_test(test_weight_channel_size_mismatch),
        cmocka_unit_test(test_weight_partial_version_never_active),
        cmocka_unit_test(test_abort_ends_receives),
        cmocka_unit_test(test_abort_ends_a_publish),
        cmocka_unit_test(test_weight_chain_versions),
        cmocka_unit_test(test_weight_chain_no_wait),
        cmocka_unit_test(test_weight_chain_dead_middle_rank),
        cmocka_unit_test(test_weight_chain_two_hosts),
    };
    return cmocka_run_group_tests_name("channel", tests, NULL, NULL);
}
