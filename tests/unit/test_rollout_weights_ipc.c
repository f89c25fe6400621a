/* test_rollout_weights_ipc.c — the rollout's side of the same-device weight
 * transport (workers/rollout/weights_ipc.h) on the CPU: the worker runs it
 * over CUDA IPC, this test over the transport's shared-memory kind (the
 * same protocol and the same code in weights_ipc.c) between a sender
 * thread and a small LM on the host.
 *
 * 1. sync_weights' wait puts a whole version into the model; a version the
 *    model already holds (a partial rollout's poll put it there) is not
 *    copied again.
 * 2. The poll between decode steps never half-applies: while a version
 *    arrives in 17 buckets (the sender paced bucket by bucket), every poll
 *    that returns 0 leaves the previous version in the model; the one that
 *    returns 1 has the new one whole. (A poll handles every bucket that has
 *    arrived, so with a fast sender one poll may take the whole version.)
 * 3. A generation whose poll_weights is the IPC poll, with a version sent
 *    after 3 decode steps, equals the same generation switched directly
 *    at the same step: tokens, log-probs and per-token versions.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "rlrt/config.h"
#include "rlrt/dataproto.h"
#include "rlrt/error.h"
#include "rlrt/nn/model.h"
#include "rlrt/runtime/channel_ipc.h"
#include "rlrt/tensor.h"
#include "common/nn/models/lm/lm_model.h"
#include "common/nn/models/model_device.h"
#include "workers/rollout/weights_ipc.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char *const TINY[] = {"model.vocab_size=23", "model.hidden_size=16",
                                   "model.intermediate_size=24", "model.num_layers=2",
                                   "model.num_heads=2", "model.num_kv_heads=1",
                                   "model.max_seq_len=40", "model.eos_token_id=-1"};
#define NTINY 8

static rl_model *s_tiny(void)
{
    rl_config *known = rl_config_schema_defaults(rl_model_kind_lm.sections, 2, NULL, 0);
    rl_config *c = known ? rl_config_load_job_tree(known, NULL, NTINY, TINY) : NULL;
    rl_config_free(known);
    if (!c)
        fail_msg("job: %s", rl_error_message());
    rl_model *m = rl_model_build(c, 7);
    rl_config_free(c);
    if (!m)
        fail_msg("build: %s", rl_error_message());
    return m;
}

/* The sender thread: sends version `want` (weights w[want]) whenever it
 * grows, over shared memory, bucket by bucket (window 1). */
typedef struct s_sender {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    rl_weight_ipc_sender *s;
    float *blk;
    const float *w[4];
    int64_t n;
    int want, sent, quit, rc;
} s_sender;

static void *s_send_loop(void *arg)
{
    s_sender *t = arg;
    pthread_mutex_lock(&t->mu);
    for (;;) {
        while (!t->quit && t->want <= t->sent)
            pthread_cond_wait(&t->cv, &t->mu);
        if (t->quit)
            break;
        int v = t->want;
        pthread_mutex_unlock(&t->mu);
        size_t bytes = sizeof(float) * (size_t)t->n;
        int rc = rl_weight_ipc_copy(RL_WEIGHT_IPC_SHM, t->blk, t->w[v], bytes, RL_WEIGHT_IPC_H2D);
        if (!rc)
            rc = rl_weight_ipc_send(t->s, (uint64_t)v, t->blk, t->n, 1, 20000);
        pthread_mutex_lock(&t->mu);
        t->sent = v;
        t->rc = t->rc ? t->rc : rc;
        pthread_cond_broadcast(&t->cv);
    }
    pthread_mutex_unlock(&t->mu);
    return NULL;
}

static void s_want(s_sender *t, int v)
{
    pthread_mutex_lock(&t->mu);
    t->want = v;
    pthread_cond_broadcast(&t->cv);
    pthread_mutex_unlock(&t->mu);
}

static double s_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int s_params_are(rl_model *m, const float *w)
{
    return memcmp(rl_model_params(m), w, sizeof(float) * (size_t)rl_model_num_params(m)) == 0;
}

/* poll_weights for test 3: at call `at` asks the sender for version 3 and
 * polls until it is in (direct: sets it itself); else the IPC poll. */
typedef struct s_poller {
    rl_model *m;
    s_sender *t;
    const float *to;
    uint64_t in_model;
    int calls, at, direct, spins;
} s_poller;

static int s_poll(void *ctx, uint64_t *version)
{
    s_poller *p = ctx;
    ++p->calls;
    if (p->direct) {
        if (p->calls != p->at)
            return 0;
        int rc = rl_model_params_set(p->m, p->to);
        *version = 3;
        return rc ? rc : 1;
    }
    if (p->calls == p->at)
        s_want(p->t, 3);
    double t0 = s_now();
    for (;;) {
        uint64_t v = 0;
        int rc = rl_rollout_weights_ipc_poll(0, p->m, p->in_model, &v);
        if (rc != 0 || p->calls != p->at) {
            if (rc == 1)
                p->in_model = *version = v;
            return rc;
        }
        if (s_now() - t0 > 10)
            return rl_error_set(RL_ETIMEOUT, "test: version 3 did not arrive");
        p->spins++;
        usleep(200);
    }
}

static rl_dataproto *s_prompts(void)
{
    static const int32_t P[12] = {3, 4, 5, 6, 7, 8, 0, 0, 9, 10, 11, 0};
    static const int32_t PL[3] = {4, 2, 3};
    rl_dataproto *dp = rl_dataproto_new();
    int64_t sp[2] = {3, 4}, s1[1] = {3};
    memcpy(rl_tensor_data(rl_dataproto_new_tensor(dp, RL_LM_PROMPTS, RL_I32, 2, sp)), P, sizeof P);
    memcpy(rl_tensor_data(rl_dataproto_new_tensor(dp, RL_LM_PROMPT_LENS, RL_I32, 1, s1)), PL, sizeof PL);
    static const int64_t SEEDS[3] = {11, 12, 13};
    memcpy(rl_tensor_data(rl_dataproto_new_tensor(dp, RL_LM_ROW_SEEDS, RL_I64, 1, s1)), SEEDS, sizeof SEEDS);
    return dp;
}

static void test_ipc_poll_between_decode_steps(void **state)
{
    (void)state;
    rl_model *m = s_tiny();
    int64_t n = rl_model_num_params(m);
    size_t bytes = sizeof(float) * (size_t)n;
    float *a = malloc(bytes), *b = malloc(bytes), *c = malloc(bytes), *zero = calloc((size_t)n, sizeof(float));
    assert_non_null(a && b && c && zero);
    memcpy(a, rl_model_params(m), bytes);
    for (int64_t i = 0; i < n; i++) {
        b[i] = a[i] * 0.5f + 0.05f * (float)((i * 7) % 11 - 5);
        c[i] = -a[i] + 0.03f * (float)((i * 5) % 13 - 6);
    }
    /* no receiver yet: the first version comes through sync_weights */
    uint64_t v = 0;
    assert_int_equal(rl_rollout_weights_ipc_open(), 0);
    assert_int_equal(rl_rollout_weights_ipc_poll(0, m, 0, &v), 0);

    s_sender t = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER, .w = {NULL, a, b, c}, .n = n};
    t.s = rl_weight_ipc_sender_new("tcp://127.0.0.1:*", RL_WEIGHT_IPC_SHM, 1024, 1); /* many buckets, paced */
    t.blk = rl_weight_ipc_alloc(RL_WEIGHT_IPC_SHM, bytes);
    assert_non_null(t.s);
    assert_non_null(t.blk);
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, s_send_loop, &t), 0);
    const char *ep = rl_weight_ipc_sender_endpoint(t.s);

    /* 1. sync_weights' wait: version 1 whole into the model */
    assert_int_equal(rl_model_params_set(m, zero), 0);
    s_want(&t, 1);
    assert_int_equal(rl_rollout_weights_ipc(0, m, ep, RL_WEIGHT_IPC_SHM, 1, 0, 10.0, &v), 0);
    assert_int_equal(v, 1);
    assert_true(s_params_are(m, a));
    assert_int_equal(rl_rollout_weights_ipc_open(), 1);
    assert_int_equal(rl_rollout_weights_ipc_poll(0, m, 1, &v), 0); /* nothing newer */
    assert_true(s_params_are(m, a));

    /* 2. polls while version 2 arrives bucket by bucket: 0 with version 1
     * whole in the model, then 1 with version 2 whole */
    s_want(&t, 2);
    int zeros = 0, rc;
    double t0 = s_now();
    while ((rc = rl_rollout_weights_ipc_poll(0, m, 1, &v)) == 0) {
        assert_true(s_params_are(m, a));
        zeros++;
        assert_true(s_now() - t0 < 10);
        usleep(100);
    }
    assert_int_equal(rc, 1);
    assert_int_equal(v, 2);
    assert_true(s_params_are(m, b));
    printf("version 2 (%lld floats in %lld buckets of 1024 bytes) switched in after %d empty polls\n",
           (long long)n, (long long)((bytes + 1023) / 1024), zeros);
    /* sync_weights for version 2 finds it in the model: no copy (the model
     * is set to A to see that), and copies when the model does not hold it */
    assert_int_equal(rl_model_params_set(m, a), 0);
    assert_int_equal(rl_rollout_weights_ipc(0, m, ep, RL_WEIGHT_IPC_SHM, 2, 2, 10.0, &v), 0);
    assert_int_equal(v, 2);
    assert_true(s_params_are(m, a));
    assert_int_equal(rl_rollout_weights_ipc(0, m, ep, RL_WEIGHT_IPC_SHM, 2, 0, 10.0, &v), 0);
    assert_true(s_params_are(m, b));

    /* 3. generation with version 3 arriving over IPC after 3 decode steps
     * against the same switch made directly */
    rl_dataproto *in = s_prompts(), *out[2] = {NULL, NULL};
    int spins = 0;
    for (int k = 0; k < 2; k++) {
        assert_int_equal(rl_model_params_set(m, b), 0);
        s_poller p = {m, &t, c, 2, 0, 3, k == 0, 0};
        rl_model_sampling sp = {0};
        sp.greedy = 1;
        sp.temperature = 1.0;
        sp.top_p = 1.0;
        sp.max_new_tokens = 10;
        sp.poll_weights = s_poll;
        sp.poll_ctx = &p;
        sp.version = 2;
        rc = rl_model_sample(m, in, &sp, &out[k]);
        if (rc)
            fail_msg("sample: %s", rl_error_message());
        assert_true(p.calls >= 3);
        assert_true(s_params_are(m, c));
        if (k == 1)
            spins = p.spins;
    }
    const char *names[] = {RL_LM_RESPONSES, RL_LM_RESPONSE_LENS, RL_LM_TOKEN_VERSION, RL_LM_RESPONSE_LOGP};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        const rl_tensor *x = rl_dataproto_tensor(out[0], names[i]), *y = rl_dataproto_tensor(out[1], names[i]);
        if (!x || !y)
            fail_msg("%s missing", names[i]);
        assert_int_equal(rl_tensor_nbytes(x), rl_tensor_nbytes(y));
        assert_memory_equal(rl_tensor_data((rl_tensor *)x), rl_tensor_data((rl_tensor *)y), rl_tensor_nbytes(x));
    }
    const rl_tensor *tv = rl_dataproto_tensor(out[1], RL_LM_TOKEN_VERSION);
    const int64_t *tvv = rl_tensor_data((rl_tensor *)tv);
    int n2 = 0, n3 = 0;
    for (int64_t i = 0; i < tv->shape[0] * tv->shape[1]; i++) {
        n2 += tvv[i] == 2;
        n3 += tvv[i] == 3;
    }
    assert_true(n2 > 0 && n3 > 0); /* tokens of both versions */
    printf("generation: %d tokens of version 2, %d of version 3 (arrived over IPC after %d empty polls)\n", n2,
           n3, spins);
    rl_dataproto_free(out[0]);
    rl_dataproto_free(out[1]);
    rl_dataproto_free(in);

    pthread_mutex_lock(&t.mu);
    t.quit = 1;
    pthread_cond_broadcast(&t.cv);
    pthread_mutex_unlock(&t.mu);
    pthread_join(th, NULL);
    assert_int_equal(t.rc, 0);
    rl_weight_ipc_sender_free(t.s);
    rl_weight_ipc_free(RL_WEIGHT_IPC_SHM, t.blk);
    rl_model_free(m);
    free(a);
    free(b);
    free(c);
    free(zero);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ipc_poll_between_decode_steps),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
