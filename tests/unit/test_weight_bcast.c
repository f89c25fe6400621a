/* test_weight_bcast.c — rlrt/runtime/weight_bcast.h over the CPU ring (the
 * same code runs over NCCL on device buffers: tests/unit/test_collective_nccl.c
 * is where two GPU ranks are tried):
 *
 * 1. Three versions from rank 0 to two receivers, cut into 16 buckets (and
 *    a count that leaves the last bucket short): each receiver's active
 *    buffer equals the sender's after every version.
 * 2. A sender that stops after the header and 2 of 16 buckets of version
 *    2: the receivers' call fails and version 1 stays active and whole.
 * 3. A receiver whose count differs from the sender's refuses the header
 *    (RL_EPROTO, naming both counts) and keeps no version.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "rlrt/error.h"
#include "rlrt/runtime/collective.h"
#include "rlrt/runtime/weight_bcast.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { N = 1000, BUCKET = 256 /* bytes: 64 floats, 16 buckets */ };

static float s_val(int64_t i, uint64_t v)
{
    return (float)(i % 101) * 0.5f + (float)v * 1000.0f;
}

typedef struct s_rank {
    const rl_comm_id *id;
    int W, rank, scenario; /* 1, 2, 3 as above */
    int64_t count;
    int rc[3];             /* receivers: each recv's status */
    uint64_t version[3];   /* the active version after each */
    int64_t bad[3];        /* elements unequal to that version's values */
    char msg[3][512];
} s_rank;

static void *s_main(void *arg)
{
    s_rank *a = arg;
    rl_comm_options o;
    rl_comm_options_default(&o);
    o.timeout_s = 2;
    rl_comm *c = rl_comm_init_rank(a->id, a->W, a->rank, &o);
    if (!c) {
        a->rc[0] = rl_error_code();
        snprintf(a->msg[0], sizeof a->msg[0], "init: %s", rl_error_message());
        return NULL;
    }
    rl_weight_bcast *b = rl_weight_bcast_new(c, a->count, BUCKET);
    if (!b) {
        a->rc[0] = rl_error_code();
        snprintf(a->msg[0], sizeof a->msg[0], "new: %s", rl_error_message());
        rl_comm_destroy(c);
        return NULL;
    }
    static const uint64_t V[3] = {1, 2, 5};
    int rounds = a->scenario == 1 ? 3 : a->scenario == 2 ? 2 : 1;
    float *buf = malloc(sizeof(float) * (size_t)a->count);
    for (int k = 0; k < rounds; k++) {
        if (a->rank == 0) {
            for (int64_t i = 0; i < a->count; i++)
                buf[i] = s_val(i, V[k]);
            if (a->scenario == 2 && k == 1) { /* the header and 2 buckets of version 2, then gone */
                float h[8] = {7340033.0f, 2, 0, (float)a->count, 0, BUCKET / 4, 0, 0};
                a->rc[k] = rl_comm_broadcast(c, h, h, 8, 0);
                for (int j = 0; j < 2 && !a->rc[k]; j++)
                    a->rc[k] = rl_comm_broadcast(c, buf + j * (BUCKET / 4), buf + j * (BUCKET / 4), BUCKET / 4, 0);
                break;
            }
            a->rc[k] = rl_weight_bcast_send(b, V[k], buf);
        } else {
            a->rc[k] = rl_weight_bcast_recv(b);
            const float *act = rl_weight_bcast_active(b, &a->version[k]);
            for (int64_t i = 0; act && i < a->count; i++)
                a->bad[k] += act[i] != s_val(i, a->version[k]);
        }
        if (a->rc[k])
            snprintf(a->msg[k], sizeof a->msg[k], "%s", rl_error_message());
    }
    free(buf);
    rl_weight_bcast_free(b);
    rl_comm_destroy(c);
    return NULL;
}

static void s_run(int scenario, int W, const int64_t *counts, s_rank *r)
{
    rl_comm_id id;
    assert_int_equal(rl_comm_id_create(&id, NULL), 0);
    pthread_t th[4];
    for (int k = 0; k < W; k++) {
        memset(&r[k], 0, sizeof r[k]);
        r[k] = (s_rank){.id = &id, .W = W, .rank = k, .scenario = scenario, .count = counts[k]};
        assert_int_equal(pthread_create(&th[k], NULL, s_main, &r[k]), 0);
    }
    for (int k = 0; k < W; k++)
        pthread_join(th[k], NULL);
}

static void test_versions_whole(void **state)
{
    (void)state;
    s_rank r[3];
    const int64_t counts[3] = {N, N, N};
    s_run(1, 3, counts, r);
    static const uint64_t V[3] = {1, 2, 5};
    for (int k = 0; k < 3; k++) {
        if (r[0].rc[k])
            fail_msg("send %d: %s", k, r[0].msg[k]);
        for (int q = 1; q < 3; q++) {
            if (r[q].rc[k])
                fail_msg("rank %d recv %d: %s", q, k, r[q].msg[k]);
            assert_int_equal(r[q].version[k], V[k]);
            assert_int_equal(r[q].bad[k], 0);
        }
    }
}

static void test_sender_gone_mid_version(void **state)
{
    (void)state;
    s_rank r[3];
    const int64_t counts[3] = {N, N, N};
    s_run(2, 3, counts, r);
    for (int q = 1; q < 3; q++) {
        assert_int_equal(r[q].rc[0], 0);
        assert_int_not_equal(r[q].rc[1], 0); /* the version never completed */
        assert_int_equal(r[q].version[1], 1);
        assert_int_equal(r[q].bad[1], 0); /* version 1 whole */
        assert_non_null(strstr(r[q].msg[1], "version 1 stays active"));
        print_message("rank %d: %s\n", q, r[q].msg[1]);
    }
}

static void test_count_refused(void **state)
{
    (void)state;
    s_rank r[2];
    const int64_t counts[2] = {N, N - 1};
    s_run(3, 2, counts, r);
    assert_int_equal(r[1].rc[0], RL_EPROTO);
    assert_non_null(strstr(r[1].msg[0], "1000 floats for its 999"));
    assert_int_equal(r[1].version[0], 0);
}

static void test_refused_arguments(void **state)
{
    (void)state;
    assert_null(rl_weight_bcast_new(NULL, 10, 0));
    rl_comm_id id;
    assert_int_equal(rl_comm_id_create(&id, NULL), 0);
    rl_comm *c = rl_comm_init_rank(&id, 1, 0, NULL);
    assert_non_null(c);
    assert_null(rl_weight_bcast_new(c, 0, 0));
    rl_weight_bcast *b = rl_weight_bcast_new(c, 10, 0);
    assert_non_null(b);
    float x[10] = {0};
    assert_int_equal(rl_weight_bcast_send(b, 1, x), 0);
    assert_int_equal(rl_weight_bcast_send(b, 1, x), RL_EINVAL); /* must grow */
    assert_int_equal(rl_weight_bcast_recv(b), RL_ESTATE);      /* rank 0 sends */
    rl_weight_bcast_free(b);
    rl_comm_destroy(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_versions_whole),
        cmocka_unit_test(test_sender_gone_mid_version),
        cmocka_unit_test(test_count_refused),
        cmocka_unit_test(test_refused_arguments),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
