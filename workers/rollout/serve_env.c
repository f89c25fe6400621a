/* workers/rollout/serve_env.c — the rollout's side of the env data channel
 * (rlrt/roles/env.h): connect to env rank r's channel, answer every
 * observation batch with an action chunk (n, num_action_chunks, 7) until the
 * env says it is done.
 *
 * The policy is env.policy: `expert` is the scripted LIBERO-Object expert
 * (rlrt/sim/libero.h), one per env row, reset at each new episode; it plans
 * a chunk open-loop by predicting where its own deltas move the hand. `model`
 * (the learned flow policy) comes with the learning issue and is an error
 * until then. env.policy_cost_ms adds busy time per call, so benchmarks can
 * give the policy the cost of a real network. Every tensor from the peer is
 * checked before use. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../roles.h"
#include "rlrt/error.h"
#include "rlrt/roles/env.h"
#include "rlrt/runtime/channel.h"
#include "rlrt/sim/libero.h"
#include "serve_env.h"

#define S_MAX_ENVS 4096

/* The experts of the env rank this process serves, by env row: they live
 * across serve_env calls, so an episode that continues from one interact
 * call to the next (auto-reset training rounds) keeps its expert's phase. A
 * worker process serves one role and one call at a time. */
static rl_libero_expert *s_experts;

static double s_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int rl_rollout_serve_env(rl_worker_ctx *ctx, const rl_dataproto *in, rl_dataproto **out)
{
    rl_env_config c;
    int rc = rl_env_config_read(ctx->config, &c);
    if (rc)
        return rc;
    if (c.policy != 0)
        return rl_config_error_at(ctx->config, "env.policy", RL_EUNSUPPORTED,
                                  "policy 'model' needs the flow-policy model kind, which is not built yet; "
                                  "use 'expert'");
    const char *ep = rl_dataproto_meta_str(in, RL_ENV_ENDPOINT, NULL);
    if (!ep)
        return rl_error_code();
    rl_channel *ch = rl_channel_connect(ep);
    if (!ch)
        return rl_error_code();
    if (!s_experts && !(s_experts = calloc(S_MAX_ENVS, sizeof *s_experts))) {
        rl_channel_free(ch);
        return rl_error_set(RL_ENOMEM, "serve_env: out of memory");
    }
    rl_libero_expert *experts = s_experts;
    const int timeout_ms = (int)(c.channel_timeout_s * 1000);
    const int64_t C = c.num_action_chunks;
    int64_t calls = 0;
    double policy_s = 0;
    for (;;) {
        rl_dataproto *m = NULL;
        if ((rc = rl_channel_recv(ch, &m, timeout_ms))) {
            rc = rl_error_wrap(rc, "rollout/%d waiting for observations", ctx->rank);
            break;
        }
        int64_t end = 0, stage, step, offset;
        if ((rc = rl_dataproto_meta_int(m, RL_ENV_END, 0, &end)) || end) {
            rl_dataproto_free(m);
            break;
        }
        int64_t n = rl_dataproto_rows(m), dp[1] = {39}, dob[1] = {98}, di[1] = {4};
        rl_tensor *tp = NULL, *to = NULL, *tn = NULL, *ti = NULL;
        if ((rc = rl_dataproto_meta_get_int(m, RL_ENV_STAGE, 0, 63, &stage)) ||
            (rc = rl_dataproto_meta_get_int(m, RL_ENV_STEP, 0, INT64_MAX, &step)) ||
            (rc = rl_dataproto_meta_get_int(m, "offset", 0, S_MAX_ENVS, &offset)))
            ;
        else if (n < 1 || offset + n > S_MAX_ENVS)
            rc = rl_error_set(RL_ERANGE, "observation batch of %lld rows at offset %lld (at most %d envs)",
                              (long long)n, (long long)offset, S_MAX_ENVS);
        else if (!(tp = rl_dataproto_tensor_shaped(m, RL_ENV_PROPRIO, RL_F32, 2, (int64_t[]){n, dp[0]})) ||
                 !(to = rl_dataproto_tensor_shaped(m, RL_ENV_OBJECT, RL_F32, 2, (int64_t[]){n, dob[0]})) ||
                 !(tn = rl_dataproto_tensor_shaped(m, RL_ENV_NEW_EPISODE, RL_U8, 1, NULL)) ||
                 !(ti = rl_dataproto_tensor_shaped(m, RL_ENV_TASK_INFO, RL_F32, 2, (int64_t[]){n, di[0]})))
            rc = rl_error_code();
        if (rc) {
            rl_dataproto_free(m);
            break;
        }
        double t0 = s_now();
        rl_dataproto *a = rl_dataproto_new();
        int64_t sh[3] = {n, C, 7};
        rl_tensor *ta = a ? rl_dataproto_new_tensor(a, RL_ENV_ACTIONS, RL_F32, 3, sh) : NULL;
        if (!ta) {
            rl_dataproto_free(a);
            rl_dataproto_free(m);
            rc = rl_error_code();
            break;
        }
        const float *p = rl_tensor_data(tp), *o = rl_tensor_data(to), *info = rl_tensor_data(ti);
        const uint8_t *ne = rl_tensor_data(tn);
        float *act = rl_tensor_data(ta);
        for (int64_t i = 0; i < n && !rc; i++) {
            rl_libero_expert *x = &experts[offset + i];
            if (ne[i]) {
                int target = (int)info[4 * i], basket = (int)info[4 * i + 1], axis = (int)info[4 * i + 3];
                if (target < 0 || target >= RL_LIBERO_NUM_OBJECTS || basket < 0 ||
                    basket >= RL_LIBERO_NUM_OBJECTS || axis < -1 || axis > 1 || !isfinite(info[4 * i + 2]))
                    rc = rl_error_set(RL_ERANGE, "row %lld: task_info (%g, %g, %g, %g) is not a LIBERO task",
                                      (long long)i, info[4 * i], info[4 * i + 1], info[4 * i + 2],
                                      info[4 * i + 3]);
                else
                    rl_libero_expert_reset(x, target, basket, info[4 * i + 2], axis);
            }
            if (!rc)
                rl_libero_expert_act_chunk(x, p + 39 * i, o + 98 * i, (int)C, act + (size_t)(7 * C * i));
        }
        /* a policy of realistic cost: busy until policy_cost_ms have passed */
        while (!rc && (s_now() - t0) * 1000 < c.policy_cost_ms)
            ;
        policy_s += s_now() - t0;
        calls++;
        json_object_set_new(rl_dataproto_meta(a), RL_ENV_STAGE, json_integer(stage));
        json_object_set_new(rl_dataproto_meta(a), RL_ENV_STEP, json_integer(step));
        if (!rc)
            rc = rl_channel_send(ch, a, timeout_ms);
        rl_dataproto_free(a);
        rl_dataproto_free(m);
        if (rc)
            break;
    }
    rl_channel_free(ch);
    if (rc)
        return rc;
    *out = rl_dataproto_new_meta(json_pack("{s:I,s:f}", RL_ENV_M_POLICY_CALLS, (json_int_t)calls,
                                           RL_ENV_M_POLICY_S, policy_s));
    return *out ? RL_OK : rl_error_code();
}
