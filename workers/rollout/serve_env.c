/* workers/rollout/serve_env.c — the rollout's side of the env data channel
 * (workers/env/env.h): connect to env rank r's channel, answer every
 * observation batch with an action chunk (n, num_action_chunks, 7) until the
 * env says it is done.
 *
 * The policy is env.policy: `expert` is the scripted LIBERO-Object expert
 * (common/sim/libero.h), one per env row, reset at each new episode; it plans
 * a chunk open-loop by predicting where its own deltas move the hand. `model`
 * is the rollout's rl_model (a flow_policy, common/nn/models/flow_policy.h): each
 * observation batch is answered by rl_model_sample — the greedy ODE when the
 * call's meta `greedy` is 1, else the flow SDE of rollout.noise_level /
 * rollout.num_steps — with noise seeds derived from trainer.seed, the call's
 * meta `round`, the env's global index and the chunk step, so a run repeats
 * bit for bit; unless meta `record` is 0 the reply carries one row per
 * (policy call, env) for training (workers/rollout/rollout.h). env.policy_cost_ms
 * adds busy time per call, so benchmarks can give the policy the cost of a
 * real network. Every tensor from the peer is checked before use. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/schema/model.h"
#include "rlrt/error.h"
#include "common/nn/models/flow_policy.h"
#include "workers/rollout/rollout.h"
#include "workers/env/env.h"
#include "rlrt/runtime/channel.h"
#include "common/sim/libero.h"
#include "workers/rollout/serve_env.h"
#include "common/schema/flow_policy.h"
#include "common/schema/env.h"
#include "common/core/rng.h"

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

/* An optional argument in [0, hi]: absent keeps *out. */
static int s_opt_int(const rl_dataproto *in, const char *key, int64_t hi, int64_t *out)
{
    const json_t *meta = rl_dataproto_meta_const(in);
    if (!meta || !json_object_get(meta, key))
        return RL_OK;
    return rl_dataproto_meta_get_int(in, key, 0, hi, out);
}

int64_t rl_rollout_env_seed(uint64_t seed, int64_t round, int64_t global_env, int64_t chunk_step,
                            int which)
{
    uint64_t h = rl_splitmix64(seed);
    h = rl_splitmix64(h ^ (uint64_t)round);
    h = rl_splitmix64(h ^ (uint64_t)global_env);
    h = rl_splitmix64(h ^ (uint64_t)chunk_step);
    return (int64_t)(rl_splitmix64(h ^ (uint64_t)(which + 1)) >> 1);
}

/* The model's answer to one observation batch m (n rows at `offset`, chunk
 * step `step`): *acts (n, C, 7) for the env and, when `rec`, the training
 * row set appended to *recs. */
static int s_model_call(const rl_rollout_policy *pol, const rl_dataproto *m, int64_t n, int64_t first,
                        int64_t offset, int64_t step, int64_t round, int greedy, int rec,
                        rl_dataproto **acts, rl_dataproto ***recs, int *nrec, int *caprec)
{
    rl_tensor *tp = rl_dataproto_tensor(m, RL_ENV_PROPRIO), *to = rl_dataproto_tensor(m, RL_ENV_OBJECT);
    rl_tensor *tt = rl_dataproto_tensor_shaped(m, RL_ENV_TASK, RL_I64, 1, NULL);
    if (!tt)
        return rl_error_code();
    rl_dataproto *q = rl_dataproto_new(), *s = NULL;
    int64_t d1[1] = {n};
    rl_tensor *tn = NULL, *tr = NULL, *er = NULL, *cs = NULL;
    int rc = q ? RL_OK : rl_error_code();
    if (!rc && !(rc = rl_dataproto_add_tensor(q, RL_FP_PROPRIO, tp)) &&
        !(rc = rl_dataproto_add_tensor(q, RL_FP_OBJECT, to)))
        rc = rl_dataproto_add_tensor(q, RL_FP_TASK, tt);
    if (!rc && (!(tn = rl_dataproto_new_tensor(q, RL_FP_NOISE_SEEDS, RL_I64, 1, d1)) ||
                !(tr = rl_dataproto_new_tensor(q, RL_FP_ROW_SEEDS, RL_I64, 1, d1))))
        rc = rl_error_code();
    if (!rc) {
        int64_t *ns = rl_tensor_data(tn), *rs = rl_tensor_data(tr);
        for (int64_t i = 0; i < n; i++) {
            ns[i] = rl_rollout_env_seed(pol->seed, round, first + offset + i, step, 0);
            rs[i] = rl_rollout_env_seed(pol->seed, round, first + offset + i, step, 1);
        }
        rl_model_sampling sp = pol->sampling;
        sp.greedy = greedy;
        rc = rl_model_sample(pol->model, q, &sp, &s);
    }
    rl_tensor *ta = rc ? NULL : rl_dataproto_tensor(s, RL_FP_ACTION);
    if (!rc && !ta)
        rc = rl_error_set(RL_EINVAL, "serve_env: the model's sample has no '%s'", RL_FP_ACTION);
    rl_dataproto *a = rc ? NULL : rl_dataproto_new();
    if (!rc && (!a || (rc = rl_dataproto_add_tensor(a, RL_ENV_ACTIONS, ta))))
        rc = rc ? rc : rl_error_code();
    if (!rc && rec) {
        if (!(er = rl_dataproto_new_tensor(s, "env_row", RL_I64, 1, d1)) ||
            !(cs = rl_dataproto_new_tensor(s, "chunk_step", RL_I64, 1, d1)))
            rc = rl_error_code();
        for (int64_t i = 0; !rc && i < n; i++) {
            ((int64_t *)rl_tensor_data(er))[i] = offset + i;
            ((int64_t *)rl_tensor_data(cs))[i] = step;
        }
        if (!rc && !(rc = rl_dataproto_add_tensor(s, RL_FP_PROPRIO, tp)) &&
            !(rc = rl_dataproto_add_tensor(s, RL_FP_OBJECT, to)))
            rc = rl_dataproto_add_tensor(s, RL_FP_TASK, tt);
        if (!rc && *nrec == *caprec) {
            int cap = *caprec ? 2 * *caprec : 64;
            rl_dataproto **g = realloc(*recs, sizeof *g * (size_t)cap);
            if (!g)
                rc = rl_error_set(RL_ENOMEM, "serve_env: out of memory");
            else {
                *recs = g;
                *caprec = cap;
            }
        }
        if (!rc) {
            (*recs)[(*nrec)++] = s;
            s = NULL;
        }
    }
    rl_dataproto_free(q);
    rl_dataproto_free(s);
    if (rc) {
        rl_dataproto_free(a);
        return rc;
    }
    *acts = a;
    return RL_OK;
}

int rl_rollout_serve_env(rl_worker_ctx *ctx, const rl_rollout_policy *pol, const rl_dataproto *in,
                         rl_dataproto **out)
{
    const rl_env_config *cp = rl_config_section_get(ctx->config, &rl_env_section);
    if (!cp)
        return rl_error_code();
    const rl_env_config c = *cp;
    int rc;
    int64_t greedy = 0, record = 1, round = 0;
    if ((rc = s_opt_int(in, RL_ROLLOUT_GREEDY, 1, &greedy)) || (rc = s_opt_int(in, "record", 1, &record)) ||
        (rc = s_opt_int(in, RL_ENV_ROUND, INT64_MAX, &round)))
        return rc;
#define S_POLICY RL_CFG_PATH(&rl_env_section, rl_env_config, policy)
    const int use_model = c.policy != 0;
    if (use_model) {
        const rl_flow_policy_config *fc = pol ? rl_flow_policy_get_config(pol->model) : NULL;
        if (!pol || !pol->model)
            return rl_error_set(RL_ESTATE, "serve_env: %s is 'model' but init_model has not run on rollout/%d",
                                S_POLICY, ctx->rank);
        if (!fc)
            return RL_CFG_ERROR(ctx->config, &rl_model_base_section, rl_model_base_config, type,
                                RL_ECONFIG, "%s 'model' needs a flow_policy model, got '%s'", S_POLICY,
                                rl_model_kind_name(pol->model));
        if (fc->chunks != c.num_action_chunks)
            return RL_CFG_ERROR(ctx->config, &rl_model_flow_policy_section, rl_model_flow_policy_config,
                                num_action_chunks, RL_ECONFIG, "is %d but %s is %lld", fc->chunks,
                                RL_CFG_PATH(&rl_env_section, rl_env_config, num_action_chunks),
                                (long long)c.num_action_chunks);
    }
    const int64_t W = ctx->world_size > 0 ? ctx->world_size : 1;
    const int64_t first = c.total_num_envs * ctx->rank / W; /* as the env role splits */
    rl_dataproto **recs = NULL;
    int nrec = 0, caprec = 0;
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
        if (use_model) {
            rl_dataproto *a = NULL;
            rc = s_model_call(pol, m, n, first, offset, step, round, (int)greedy, use_model && record, &a,
                              &recs, &nrec, &caprec);
            policy_s += s_now() - t0;
            calls++;
            if (!rc) {
                json_object_set_new(rl_dataproto_meta(a), RL_ENV_STAGE, json_integer(stage));
                json_object_set_new(rl_dataproto_meta(a), RL_ENV_STEP, json_integer(step));
                rc = rl_channel_send(ch, a, timeout_ms);
            }
            rl_dataproto_free(a);
            rl_dataproto_free(m);
            if (rc)
                break;
            continue;
        }
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
                /* floats from the env peer: range-checked before they become ints */
                const float *ti4 = info + 4 * i;
                int in_range = ti4[0] >= 0 && ti4[0] < RL_LIBERO_NUM_OBJECTS && ti4[1] >= 0 &&
                               ti4[1] < RL_LIBERO_NUM_OBJECTS && ti4[3] >= -1 && ti4[3] <= 1 &&
                               isfinite(ti4[2]);
                int target = in_range ? (int)ti4[0] : -1, basket = in_range ? (int)ti4[1] : -1,
                    axis = in_range ? (int)ti4[3] : 0;
                if (!in_range)
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
    rl_dataproto *o = NULL;
    if (!rc && nrec > 0) {
        if (!(o = rl_dataproto_concat(recs, nrec)))
            rc = rl_error_wrap(rl_error_code(), "serve_env: the recorded rows");
    } else if (!rc && !(o = rl_dataproto_new_meta(json_object()))) {
        rc = rl_error_code();
    }
    for (int i = 0; i < nrec; i++)
        rl_dataproto_free(recs[i]);
    free(recs);
    if (rc) {
        rl_dataproto_free(o);
        return rc;
    }
    json_t *meta = rl_dataproto_meta(o);
    json_object_set_new(meta, RL_ENV_M_POLICY_CALLS, json_integer((json_int_t)calls));
    json_object_set_new(meta, RL_ENV_M_POLICY_S, json_real(policy_s));
    if (use_model)
        json_object_set_new(meta, RL_ROLLOUT_WEIGHTS_VERSION, json_integer((json_int_t)pol->version));
    *out = o;
    return RL_OK;
}
