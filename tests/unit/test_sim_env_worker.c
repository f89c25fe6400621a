/* test_sim_env_worker.c — the env role's methods (workers/env/env.c) against
 * a policy peer on a real data channel that misbehaves: NaN actions, a wrong
 * shape, a wrong stage, out-of-range values (clipped and counted, or an
 * error with env.clip_actions false), then a well-behaved one whose reply
 * has the contract's shapes. Needs `make libero-data` (SKIPPED otherwise). */
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "workers/roles.h"
#include "rlrt/error.h"
#include "workers/env/env.h"
#include "common/schema/trainer.h"
#include "rlrt/runtime/channel.h"
#include "rlrt/tensor.h"

enum { P_GOOD, P_NAN, P_SHAPE, P_STAGE, P_BIG };

typedef struct s_peer {
    char endpoint[256];
    int mode, calls;
} s_peer;

/* The policy side: answers every observation batch until the env's end. */
static void *s_policy(void *arg)
{
    s_peer *p = arg;
    rl_channel *ch = rl_channel_connect(p->endpoint);
    if (!ch)
        return NULL;
    for (;;) {
        rl_dataproto *m = NULL;
        if (rl_channel_recv(ch, &m, 20000))
            break;
        int64_t end = 0, stage = 0, step = 0;
        rl_dataproto_meta_int(m, RL_ENV_END, 0, &end);
        if (end) {
            rl_dataproto_free(m);
            break;
        }
        rl_dataproto_meta_int(m, RL_ENV_STAGE, 0, &stage);
        rl_dataproto_meta_int(m, RL_ENV_STEP, 0, &step);
        int64_t n = rl_dataproto_rows(m), sh[3] = {n, 5, p->mode == P_SHAPE ? 6 : 7};
        rl_dataproto *a = rl_dataproto_new();
        rl_tensor *t = rl_dataproto_new_tensor(a, RL_ENV_ACTIONS, RL_F32, 3, sh);
        float *x = rl_tensor_data(t);
        for (int64_t i = 0; i < n * 5 * sh[2]; i++)
            x[i] = p->mode == P_BIG ? 3.0f : 0.0f;
        if (p->mode == P_NAN && step == 0 && n > 1)
            x[(1 * 5 + 2) * 7 + 4] = NAN;
        json_object_set_new(rl_dataproto_meta(a), RL_ENV_STAGE,
                            json_integer(p->mode == P_STAGE ? stage + 1 : stage));
        json_object_set_new(rl_dataproto_meta(a), RL_ENV_STEP, json_integer(step));
        rl_channel_send(ch, a, 20000);
        p->calls++;
        rl_dataproto_free(a);
        rl_dataproto_free(m);
    }
    rl_channel_free(ch);
    return NULL;
}

static const rl_method *s_method(const char *name)
{
    for (const rl_method *m = rl_role_env.methods; m->name; m++)
        if (strcmp(m->name, name) == 0)
            return m;
    return NULL;
}

typedef struct s_env {
    rl_config *cfg;
    rl_worker_ctx ctx;
} s_env;

static int s_start(s_env *e, const char *extra)
{
    const char *data = getenv("LIBERO_DATA") && *getenv("LIBERO_DATA") ? getenv("LIBERO_DATA") : "build/libero-data";
    char p[4096], o1[4200], o2[64];
    snprintf(p, sizeof p, "%s/manifest.json", data);
    if (access(p, R_OK) != 0) {
        printf("# skip: no LIBERO-Object data in %s; run: make libero-data\n", data);
        return 1;
    }
    snprintf(o1, sizeof o1, "env.data_dir=%s", data);
    snprintf(o2, sizeof o2, "%s", extra ? extra : "env.clip_actions=true");
    const char *ov[] = {o1, "env.total_num_envs=2", "env.max_episode_steps=20", "env.num_action_chunks=5",
                        "env.channel_timeout_s=5", "env.task_ids=0,6", o2};
    const rl_config_section *secs[] = {&rl_trainer_section, &rl_env_section};
    rl_config *known = rl_config_schema_defaults(secs, 2, NULL, 0);
    assert_non_null(known);
    e->cfg = rl_config_load_job_tree(known, NULL, 7, ov);
    rl_config_free(known);
    assert_non_null(e->cfg);
    memset(&e->ctx, 0, sizeof e->ctx);
    e->ctx.role = "env";
    e->ctx.world_size = 1;
    e->ctx.node = "test";
    e->ctx.config = e->cfg;
    if (rl_role_env.init(&e->ctx))
        fail_msg("env init: %s", rl_error_message());
    return 0;
}

static void s_stop(s_env *e)
{
    rl_role_env.fini(&e->ctx);
    rl_config_free(e->cfg);
}

/* open_channel, a policy thread in `mode`, interact; returns its status. */
static int s_round(s_env *e, int mode, rl_dataproto **out, s_peer *peer)
{
    rl_dataproto *in = rl_dataproto_new_meta(json_pack("{s:s}", RL_ENV_HOST, "127.0.0.1")), *rep = NULL;
    assert_int_equal(s_method(RL_ENV_OPEN_CHANNEL)->fn(&e->ctx, in, &rep), 0);
    rl_dataproto_free(in);
    memset(peer, 0, sizeof *peer);
    snprintf(peer->endpoint, sizeof peer->endpoint, "%s", rl_dataproto_meta_str(rep, RL_ENV_ENDPOINT, ""));
    rl_dataproto_free(rep);
    peer->mode = mode;
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, s_policy, peer), 0);
    in = rl_dataproto_new_meta(json_pack("{s:i,s:i,s:i}", RL_ENV_CHUNK_STEPS, 4, RL_ENV_RESET, 1, RL_ENV_ROUND, 0));
    *out = NULL;
    int rc = s_method(RL_ENV_INTERACT)->fn(&e->ctx, in, out);
    rl_dataproto_free(in);
    pthread_join(th, NULL);
    return rc;
}

/* interact's meta `round` comes from the peer: out of [-1, INT32_MAX] it is
 * refused by name before it reaches the initial-state arithmetic (INT64_MAX
 * overflowed (k + e * sharing) into a negative state index). */
static void s_bad_round(s_env *e, json_int_t round, const char *want)
{
    rl_dataproto *in = rl_dataproto_new_meta(json_pack("{s:s}", RL_ENV_HOST, "127.0.0.1")), *rep = NULL;
    assert_int_equal(s_method(RL_ENV_OPEN_CHANNEL)->fn(&e->ctx, in, &rep), 0);
    rl_dataproto_free(in);
    rl_dataproto_free(rep);
    in = rl_dataproto_new_meta(json_pack("{s:i,s:i,s:I}", RL_ENV_CHUNK_STEPS, 4, RL_ENV_RESET, 1, RL_ENV_ROUND,
                                         round));
    rep = NULL;
    assert_int_equal(s_method(RL_ENV_INTERACT)->fn(&e->ctx, in, &rep), RL_EINVAL);
    assert_null(rep);
    assert_string_equal(rl_error_message(), want);
    rl_dataproto_free(in);
}

static void test_hostile_policy(void **state)
{
    (void)state;
    s_env e;
    if (s_start(&e, NULL)) {
        skip();
        return;
    }
    s_bad_round(&e, INT64_MAX,
                "argument 'round' must be an integer in [-1, 2147483647], got 9223372036854775807");
    s_bad_round(&e, -2, "argument 'round' must be an integer in [-1, 2147483647], got -2");
    rl_dataproto *out = NULL;
    s_peer peer;
    assert_int_equal(s_round(&e, P_NAN, &out, &peer), RL_ENUMERIC);
    printf("# NaN: %s\n", rl_error_message());
    assert_non_null(strstr(rl_error_message(), "env 1 (task 6, initial state 0): action[4] is NaN at step 2"));
    assert_int_equal(s_round(&e, P_SHAPE, &out, &peer), RL_ESHAPE);
    printf("# shape: %s\n", rl_error_message());
    assert_non_null(strstr(rl_error_message(), "actions"));
    assert_int_not_equal(s_round(&e, P_STAGE, &out, &peer), 0);
    assert_non_null(strstr(rl_error_message(), "the policy answered stage 1 step 0, expected stage 0 step 0"));
    /* out of range: clipped and counted */
    assert_int_equal(s_round(&e, P_BIG, &out, &peer), 0);
    int64_t clipped = 0;
    rl_dataproto_meta_int(out, RL_ENV_M_CLIPPED, 0, &clipped);
    assert_int_equal(clipped, 2 * 20 * 6); /* 2 envs x 20 steps x 6 arm components */
    const rl_tensor *a = rl_dataproto_tensor(out, RL_ENV_ACTIONS);
    assert_float_equal(((const float *)rl_tensor_data(a))[0], 1.0f, 0);
    rl_dataproto_free(out);
    /* a good policy after all that: the contract's shapes */
    assert_int_equal(s_round(&e, P_GOOD, &out, &peer), 0);
    assert_int_equal(rl_dataproto_rows(out), 2);
    int64_t d1[3] = {2, 21, 39}, d2[3] = {2, 21, 98}, d3[3] = {2, 20, 7}, dk[2] = {2, 20};
    assert_non_null(rl_dataproto_tensor_shaped(out, RL_ENV_PROPRIO, RL_F32, 3, d1));
    assert_non_null(rl_dataproto_tensor_shaped(out, RL_ENV_OBJECT, RL_F32, 3, d2));
    assert_non_null(rl_dataproto_tensor_shaped(out, RL_ENV_ACTIONS, RL_F32, 3, d3));
    const rl_tensor *dn = rl_dataproto_tensor_shaped(out, RL_ENV_DONES, RL_U8, 2, dk);
    assert_non_null(dn);
    assert_int_equal(((const uint8_t *)rl_tensor_data(dn))[19], 1); /* max_episode_steps 20 */
    assert_int_equal(peer.calls, 4);
    rl_dataproto_free(out);
    s_stop(&e);
}

static void test_clip_off_is_an_error(void **state)
{
    (void)state;
    s_env e;
    if (s_start(&e, "env.clip_actions=false")) {
        skip();
        return;
    }
    rl_dataproto *out = NULL;
    s_peer peer;
    assert_int_equal(s_round(&e, P_BIG, &out, &peer), RL_ERANGE);
    assert_non_null(strstr(rl_error_message(), "action[0] = 3 is outside [-1, 1] at step 0"));
    assert_non_null(strstr(rl_error_message(), "env.clip_actions is false"));
    s_stop(&e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hostile_policy),
        cmocka_unit_test(test_clip_off_is_an_error),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
