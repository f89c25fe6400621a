/* workers/rollout/rollout.c — the rollout role (contract:
 * rlrt/roles/rollout.h): a copy of the policy (an rl_model of the job's
 * model.type) that samples. Its weights arrive from the actor over the
 * weight channel (rlrt/runtime/channel.h), versioned: a new version becomes
 * active only when complete. The sampling settings (rollout.*) are read and
 * range-checked once, in init; a call carries only `greedy`. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../roles.h"
#include "rlrt/nn/model.h"
#include "rlrt/rlrt.h"
#include "rlrt/roles/rollout.h"
#include "rlrt/runtime/channel.h"
#include "flow_ref.h"
#include "rlrt/roles/flow_rl.h"
#include "serve_env.h"

typedef struct s_rollout {
    rl_model_sampling sampling;
    uint64_t seed;
    double weight_timeout_s;
    rl_model *model;
    rl_weight_receiver *recv;
    char endpoint[256];
    uint64_t version;
} s_rollout;

static int s_init(rl_worker_ctx *ctx)
{
    rl_rollout_config o;
    int rc = rl_rollout_config_read(ctx->config, &o);
    if (rc)
        return rc;
    s_rollout *r = calloc(1, sizeof *r);
    if (!r)
        return rl_error_set(RL_ENOMEM, "rollout: out of memory");
    r->sampling.temperature = o.temperature;
    r->sampling.top_p = o.top_p;
    r->sampling.top_k = o.top_k;
    r->sampling.max_new_tokens = o.response_length;
    r->sampling.num_steps = o.num_steps;
    r->sampling.noise_level = o.noise_level;
    r->sampling.shift = o.shift;
    r->seed = (uint64_t)o.seed;
    r->weight_timeout_s = o.weight_timeout_s;
    ctx->user = r;
    return RL_OK;
}

static void s_fini(rl_worker_ctx *ctx)
{
    s_rollout *r = ctx->user;
    if (r) {
        rl_model_free(r->model);
        rl_weight_receiver_free(r->recv);
        rl_flow_ref_reset();
        free(r);
    }
    ctx->user = NULL;
}

static int s_init_model(rl_worker_ctx *ctx, const rl_dataproto *in, rl_dataproto **out)
{
    (void)in;
    (void)out;
    s_rollout *r = ctx->user;
    rl_model_free(r->model);
    r->model = rl_model_build(ctx->config, r->seed);
    rl_flow_ref_reset();
    return r->model ? RL_OK : rl_error_wrap(rl_error_code(), "rollout/%d: building the model", ctx->rank);
}

static int s_sync_weights(rl_worker_ctx *ctx, const rl_dataproto *in, rl_dataproto **out)
{
    (void)out;
    s_rollout *r = ctx->user;
    if (!r->model)
        return rl_error_set(RL_ESTATE, "%s: init_model has not run on rollout/%d",
                            RL_ROLLOUT_SYNC_WEIGHTS, ctx->rank);
    const char *ep = rl_dataproto_meta_str(in, RL_ROLLOUT_ENDPOINT, NULL);
    int64_t version;
    if (!ep || rl_dataproto_meta_get_int(in, RL_ROLLOUT_VERSION, 1, INT64_MAX, &version))
        return rl_error_code();
    if (r->recv && strcmp(r->endpoint, ep) != 0) {
        rl_weight_receiver_free(r->recv);
        r->recv = NULL;
    }
    int64_t P = rl_model_num_params(r->model);
    if (!r->recv) {
        if (strlen(ep) >= sizeof r->endpoint)
            return rl_error_set(RL_EINVAL, "argument '%s' is longer than %zu characters",
                                RL_ROLLOUT_ENDPOINT, sizeof r->endpoint - 1);
        r->recv = rl_weight_receiver_new(ep, P);
        if (!r->recv)
            return rl_error_code();
        snprintf(r->endpoint, sizeof r->endpoint, "%s", ep);
    }
    uint64_t have = 0;
    rl_weight_recv_active(r->recv, &have);
    while (have < (uint64_t)version) {
        int rc = rl_weight_recv_poll(r->recv, (int)(r->weight_timeout_s * 1000));
        if (rc)
            return rl_error_wrap(rc, "rollout/%d waiting for weights v%lld", ctx->rank,
                                 (long long)version);
        rl_weight_recv_active(r->recv, &have);
    }
    memcpy(rl_model_params(r->model), rl_weight_recv_active(r->recv, NULL), sizeof(float) * (size_t)P);
    r->version = have;
    return rl_flow_ref_on_sync(ctx, r->model); /* the EMA reference (flow_sar / flow_ipo) */
}

static int s_generate(rl_worker_ctx *ctx, const rl_dataproto *in, rl_dataproto **out)
{
    s_rollout *r = ctx->user;
    if (!r->model)
        return rl_error_set(RL_ESTATE, "%s: init_model has not run on rollout/%d",
                            RL_ROLLOUT_GENERATE, ctx->rank);
    int64_t greedy;
    if (rl_dataproto_meta_int(in, RL_ROLLOUT_GREEDY, 0, &greedy))
        return rl_error_code();
    rl_model_sampling s = r->sampling;
    s.greedy = greedy != 0;
    rl_dataproto *o = NULL;
    int rc = rl_model_sample(r->model, in, &s, &o);
    if (rc)
        return rl_error_wrap(rc, "rollout/%d", ctx->rank);
    json_object_set_new(rl_dataproto_meta(o), RL_ROLLOUT_WEIGHTS_VERSION,
                        json_integer((json_int_t)r->version));
    /* every sample carries the weight version that generated it */
    rl_column *vc = rl_dataproto_new_column(o, RL_ROLLOUT_ROW_VERSION, RL_COL_INT64);
    for (int64_t b = 0; vc && b < rl_dataproto_rows(o); b++)
        if (rl_column_set_i64(vc, b, (int64_t)r->version))
            vc = NULL;
    if (!vc) {
        rl_dataproto_free(o);
        return rl_error_wrap(rl_error_code(), "rollout/%d: the %s column", ctx->rank,
                             RL_ROLLOUT_ROW_VERSION);
    }
    *out = o;
    return RL_OK;
}

rl_model *rl_rollout_model(rl_worker_ctx *ctx)
{
    s_rollout *r = ctx->user;
    return r ? r->model : NULL;
}

static int s_serve_env(rl_worker_ctx *ctx, const rl_dataproto *in, rl_dataproto **out)
{
    s_rollout *r = ctx->user;
    rl_rollout_policy pol = {r->model, r->sampling, r->seed, r->version};
    int rc = rl_rollout_serve_env(ctx, &pol, in, out);
    return rc ? rl_error_wrap(rc, "rollout/%d", ctx->rank) : RL_OK;
}

static const rl_method s_methods[] = {
    {RL_ROLLOUT_INIT_MODEL, s_init_model},
    {RL_ROLLOUT_SYNC_WEIGHTS, s_sync_weights},
    {RL_ROLLOUT_GENERATE, s_generate},
    {RL_ROLLOUT_SERVE_ENV, s_serve_env},
    {RL_ROLLOUT_FLOW_ANNOTATE, rl_flow_ref_annotate},
    {RL_ROLLOUT_FLOW_REF_SAVE, rl_flow_ref_save},
    {RL_ROLLOUT_FLOW_REF_LOAD, rl_flow_ref_load},
    {NULL, NULL},
};

const rl_worker_role rl_role_rollout = {RL_ROLLOUT_ROLE, s_methods, s_init, s_fini};
