/* test_scorer.c — the remote-scorer protocol (proto/scorer.proto) end to end
 * with the reference Python server (deploy/scorer_server.py) as a real
 * process serving a learned scorer that this test saves: the scores coming
 * back equal the C classifier's probabilities of the prompts' classes, for
 * PNG and RAW images; an error reply (an unknown prompt) and a corrupt image
 * are clear errors; a killed server is a timeout after the retries. A fake
 * hostile server (a thread here) checks the client's validation of replies
 * (a reply far larger than its scores need is refused before it is decoded).
 * The Python cases are skipped with a message where python3, python3-zmq
 * or python3-numpy is missing. */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <math.h>
#include <pthread.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zmq.h>
#include <cmocka.h>

#include "rlrt/error.h"
#include "common/core/rng.h"
#include "rlrt/nn/model.h"
#include "rlrt/config.h"
#include "common/data/clips.h"
#include "common/image/image.h"
#include "common/nn/models/image_classifier.h"
#include "common/nn/models/image_net.h"
#include "common/reward/scorer.h"
#include "scorer.pb-c.h"

extern char **environ;

#define assert_msg_contains(s) \
    do { \
        if (!strstr(rl_error_message(), (s))) \
            fail_msg("message '%s' lacks '%s'", rl_error_message(), (s)); \
    } while (0)

static char s_dir[64];
static rl_model *s_model;

static const char *s_python(void)
{
    const char *p = getenv("PYTHON");
    return p && *p ? p : "/usr/bin/python3";
}

/* 1 when the server's Python modules are importable. */
static int s_have_python(void)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd, "%s -c 'import zmq, numpy' >/dev/null 2>&1", s_python());
    return access(s_python(), X_OK) == 0 && system(cmd) == 0;
}

/* A free TCP port on 127.0.0.1 (bound by libzmq's wildcard, then released). */
static int s_free_port(void)
{
    void *ctx = zmq_ctx_new(), *s = zmq_socket(ctx, ZMQ_REP);
    assert_int_equal(zmq_bind(s, "tcp://127.0.0.1:*"), 0);
    char ep[128];
    size_t len = sizeof ep;
    zmq_getsockopt(s, ZMQ_LAST_ENDPOINT, ep, &len);
    zmq_close(s);
    zmq_ctx_term(ctx);
    return atoi(strrchr(ep, ':') + 1);
}

static pid_t s_start_server(const char *ep)
{
    char *argv[] = {(char *)s_python(), "deploy/scorer_server.py", "--backend", "classifier",
                    "--model-dir", s_dir, "--bind", (char *)ep, NULL};
    pid_t pid;
    assert_int_equal(posix_spawn(&pid, s_python(), NULL, NULL, argv, environ), 0);
    return pid;
}

static int s_setup(void **state)
{
    (void)state;
    snprintf(s_dir, sizeof s_dir, "/tmp/rlrt_scorer_XXXXXX");
    if (!mkdtemp(s_dir))
        return -1;
    const char *yaml = "model: {type: image_classifier, channels: 1, height: 28, width: 28, "
                       "num_classes: 10, hidden_size: 32, init_from: ''}\n";
    rl_config *job = rl_config_parse_string(yaml, strlen(yaml), "<test>");
    s_model = job ? rl_model_build(job, 11) : NULL;
    rl_config_free(job);
    /* sharper logits than the init gives, so the scores spread */
    float *p = s_model ? rl_model_params(s_model) : NULL;
    for (int64_t i = 0; p && i < rl_model_num_params(s_model); i++)
        p[i] *= 3.0f;
    return s_model && rl_model_save(s_model, s_dir) == 0 ? 0 : -1;
}

static int s_teardown(void **state)
{
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", s_dir);
    rl_model_free(s_model);
    return system(cmd) == 0 ? 0 : -1;
}

/* n random u8 images (n, 28, 28, 1) and their prompts. */
static uint8_t *s_images(int n, const char **prompts)
{
    uint8_t *px = malloc((size_t)n * 784);
    rl_rng g;
    rl_rng_init(&g, 3, 0);
    for (int i = 0; i < n * 784; i++)
        px[i] = (uint8_t)rl_rng_below(&g, 256);
    for (int i = 0; i < n; i++)
        prompts[i] = rl_fmnist_prompt(i % 10);
    return px;
}

static void test_python_round_trip(void **state)
{
    (void)state;
    if (!s_have_python()) {
        print_message("skipped: %s with zmq and numpy (python3-zmq, python3-numpy) is needed for "
                      "the reference scorer server\n", s_python());
        skip();
    }
    char ep[64];
    snprintf(ep, sizeof ep, "tcp://127.0.0.1:%d", s_free_port());
    pid_t pid = s_start_server(ep);
    enum { N = 12 };
    const char *prompts[N];
    uint8_t *px = s_images(N, prompts);
    /* the C classifier's scores of the same (quantised) images */
    float x[N * 784], probs[N * 10], want[N];
    for (int i = 0; i < N * 784; i++)
        x[i] = (float)px[i] / 127.5f - 1.0f;
    assert_int_equal(rl_image_model_probs(s_model, N, x, probs), 0);
    for (int i = 0; i < N; i++)
        want[i] = probs[i * 10 + i % 10];
    for (int f = 0; f < 2; f++) {
        /* the server needs a moment to start: the client's retries cover it */
        rl_scorer_client *c = rl_scorer_client_new(ep, 3000, 3, f ? RL_SCORER_RAW : RL_SCORER_PNG);
        assert_non_null(c);
        float got[N];
        char **info = NULL;
        if (rl_scorer_score(c, px, N, 28, 28, 1, prompts, got, &info))
            fail_msg("%s", rl_error_message());
        for (int i = 0; i < N; i++)
            if (fabsf(got[i] - want[i]) > 1e-5f + 1e-4f * want[i])
                fail_msg("image %d: server %g, C %g", i, (double)got[i], (double)want[i]);
        assert_non_null(info);
        assert_non_null(strstr(info[3], "\"class\": 3"));
        for (int i = 0; i < N; i++)
            free(info[i]);
        free(info);
        /* an error reply (a prompt the scorer does not know) fails the call,
         * after the retries, with the server's message */
        const char *bad[N];
        memcpy(bad, prompts, sizeof bad);
        bad[5] = "a spaceship";
        assert_int_equal(rl_scorer_score(c, px, N, 28, 28, 1, bad, got, NULL), RL_EPEER);
        assert_msg_contains("not one of the classifier's prompts");
        assert_msg_contains("after 4 attempts");
        rl_scorer_client_free(c);
    }
    /* a corrupt PNG sent by hand: the server says which image is bad */
    {
        Rl__ScoreRequest req = RL__SCORE_REQUEST__INIT;
        uint8_t junk[40] = "\x89PNG\r\n\x1a\n0123456789abcdefghijklmnopqrstuv";
        ProtobufCBinaryData img = {sizeof junk, junk};
        char *pr = "a bag";
        req.version = 1;
        req.request_id = 77;
        req.n_images = 1;
        req.images = &img;
        req.n_prompts = 1;
        req.prompts = &pr;
        uint8_t buf[256];
        size_t len = rl__score_request__pack(&req, buf);
        void *ctx = zmq_ctx_new(), *s = zmq_socket(ctx, ZMQ_REQ);
        int linger = 0, tmo = 5000;
        zmq_setsockopt(s, ZMQ_LINGER, &linger, sizeof linger);
        zmq_setsockopt(s, ZMQ_RCVTIMEO, &tmo, sizeof tmo);
        assert_int_equal(zmq_connect(s, ep), 0);
        assert_int_equal(zmq_send(s, buf, len, 0), (int)len);
        uint8_t rbuf[4096];
        int n = zmq_recv(s, rbuf, sizeof rbuf, 0);
        assert_true(n > 0);
        Rl__ScoreReply *r = rl__score_reply__unpack(NULL, (size_t)n, rbuf);
        assert_non_null(r);
        assert_int_equal(r->request_id, 77);
        assert_int_equal(r->n_scores, 0);
        if (!strstr(r->error, "image 0"))
            fail_msg("error reply '%s' does not name the image", r->error);
        rl__score_reply__free_unpacked(r, NULL);
        zmq_close(s);
        zmq_ctx_term(ctx);
    }
    /* the server dies: a timeout after the retries, never a score */
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    rl_scorer_client *c = rl_scorer_client_new(ep, 200, 2, RL_SCORER_PNG);
    float got[N];
    assert_int_equal(rl_scorer_score(c, px, N, 28, 28, 1, prompts, got, NULL), RL_ETIMEOUT);
    assert_msg_contains("no reply within 200 ms after 3 attempts");
    rl_scorer_client_free(c);
    free(px);
}

/* ---- a hostile server -------------------------------------------------------------------- */

typedef struct {
    void *ctx;
    char ep[128];
    int mode; /* what to answer */
} s_fake;

static void *s_fake_main(void *arg)
{
    s_fake *f = arg;
    void *s = zmq_socket(f->ctx, ZMQ_REP);
    int linger = 0;
    zmq_setsockopt(s, ZMQ_LINGER, &linger, sizeof linger);
    zmq_bind(s, "tcp://127.0.0.1:*");
    size_t len = sizeof f->ep;
    zmq_getsockopt(s, ZMQ_LAST_ENDPOINT, f->ep, &len);
    for (;;) {
        uint8_t buf[1 << 16];
        int n = zmq_recv(s, buf, sizeof buf, 0);
        if (n < 0)
            break;
        Rl__ScoreRequest *q = rl__score_request__unpack(NULL, (size_t)n, buf);
        Rl__ScoreReply r = RL__SCORE_REPLY__INIT;
        float scores[64];
        size_t k = q ? q->n_images : 0;
        for (size_t i = 0; i < k && i < 64; i++)
            scores[i] = 0.5f;
        r.version = 1;
        r.request_id = q ? q->request_id : 0;
        r.n_scores = k;
        r.scores = scores;
        if (f->mode == 1)
            r.n_scores = k - 1; /* a score short */
        else if (f->mode == 2)
            scores[1] = NAN;
        else if (f->mode == 3)
            r.request_id += 1;
        else if (f->mode == 4)
            r.version = 9;
        rl__score_request__free_unpacked(q, NULL);
        if (f->mode == 5) {
            zmq_send(s, "\xff\xff\xff", 3, 0); /* not a protobuf message */
            continue;
        }
        uint8_t out[1024];
        size_t ol = rl__score_reply__pack(&r, out);
        if (f->mode == 6) { /* a valid reply, then 200 KB of unknown fields (15: 0) */
            size_t big = ol + 200000;
            uint8_t *b = malloc(big);
            memcpy(b, out, ol);
            for (size_t i = ol; i + 1 < big; i += 2) {
                b[i] = 0x78;
                b[i + 1] = 0x00;
            }
            zmq_send(s, b, big, 0);
            free(b);
            continue;
        }
        zmq_send(s, out, ol, 0);
    }
    zmq_close(s);
    return NULL;
}

static void test_hostile_replies(void **state)
{
    (void)state;
    static const char *want[7] = {NULL, "scores: expected 4, got 3", "score 1 is nan",
                                  "reply to request", "reply version 9",
                                  "is not a ScoreReply",
                                  "bytes for 4 images (at most 81984)"};
    const char *prompts[4];
    uint8_t *px = s_images(4, prompts);
    for (int mode = 0; mode < 7; mode++) {
        s_fake f = {.ctx = zmq_ctx_new(), .mode = mode};
        pthread_t th;
        pthread_create(&th, NULL, s_fake_main, &f);
        while (!f.ep[0])
            usleep(1000);
        rl_scorer_client *c = rl_scorer_client_new(f.ep, 2000, 1, RL_SCORER_RAW);
        float got[4] = {0};
        int rc = rl_scorer_score(c, px, 4, 28, 28, 1, prompts, got, NULL);
        if (mode == 0) {
            assert_int_equal(rc, 0);
            assert_float_equal(got[3], 0.5f, 0);
        } else {
            assert_int_not_equal(rc, 0);
            assert_msg_contains(want[mode]);
            assert_float_equal(got[3], 0.0f, 0); /* nothing is written on failure */
        }
        rl_scorer_client_free(c);
        zmq_ctx_shutdown(f.ctx);
        pthread_join(th, NULL);
        zmq_ctx_term(f.ctx);
    }
    /* bad arguments */
    assert_null(rl_scorer_client_new("", 100, 1, RL_SCORER_PNG));
    assert_null(rl_scorer_client_new("tcp://127.0.0.1:1", 0, 1, RL_SCORER_PNG));
    free(px);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_python_round_trip),
        cmocka_unit_test(test_hostile_replies),
    };
    return cmocka_run_group_tests(tests, s_setup, s_teardown);
}
