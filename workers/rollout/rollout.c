/* workers/rollout/rollout.c — the rollout role (contract:
 * workers/rollout/rollout.h): a copy of the policy (an rl_model of the job's
 * model.type) that samples. Its weights arrive from the actor over the
 * weight channel (rlrt/runtime/channel.h), versioned: a new version becomes
 * active only when complete. The sampling settings (rollout.*) are read and
 * range-checked once, in init; a call carries only `greedy`. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "workers/roles.h"
#include "rlrt/nn/model.h"
#include "rlrt/error.h"
#include "rlrt/log.h"
#include "rlrt/dtype.h"
#include "common/nn/models/lm/transformer.h"
#include "common/nn/models/lm/generate.h"
#include "common/nn/models/lm/lm_model.h"
#include "rlrt/tensor.h"
#include "rlrt/dataproto.h"
#include "common/tools/tools.h"
#include "common/tools/agent_loop.h"
#include "workers/rollout/rollout.h"
#include "rlrt/runtime/channel.h"
#include "workers/rollout/flow_ref.h"
#include "workers/flow_rl.h"
#include "workers/rollout/serve_env.h"

typedef struct s_rollout {
    rl_model_sampling sampling;
    uint64_t seed;
    double weight_timeout_s;
    rl_model *model;
    rl_agent *agent; /* rollout.multi_turn.enable: tools during sampling */
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
    if (o.mt_enable && !(r->agent = rl_agent_open(ctx->config)))
        return rl_error_wrap(rl_error_code(), "rollout/%d: multi-turn tools", ctx->rank);
    return RL_OK;
}

static void s_fini(rl_worker_ctx *ctx)
{
    s_rollout *r = ctx->user;
    if (r) {
        rl_model_free(r->model);
        rl_agent_free(r->agent);
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
    /* weights from the network: refused (and the model kept) when not finite */
    char what[64];
    snprintf(what, sizeof what, "weights v%llu from the actor", (unsigned long long)have);
    int frc = rl_model_check_finite(r->model, rl_weight_recv_active(r->recv, NULL), what);
    if (frc)
        return frc;
    memcpy(rl_model_params(r->model), rl_weight_recv_active(r->recv, NULL), sizeof(float) * (size_t)P);
    r->version = have;
    return rl_flow_ref_on_sync(ctx, r->model); /* the EMA reference (flow_sar / flow_ipo) */
}

/* Multi-turn sampling with tools (common/tools/agent_loop.h): the LM kind's
 * sampling outputs plus the loss mask (0 at tool output) and the per-row
 * tool counts; one log line per call with the outcomes. */
static int s_generate_agent(rl_worker_ctx *ctx, const rl_dataproto *in, const rl_model_sampling *sp,
                            rl_dataproto **out)
{
    s_rollout *r = ctx->user;
    const char *what = "multi-turn generate";
    rl_lm *net = rl_lm_model_network(r->model);
    if (!net)
        return rl_error_set(RL_EUNSUPPORTED, "%s: rollout.multi_turn needs model.type lm", what);
    const rl_tensor *pr = rl_dataproto_tensor_shaped(in, RL_LM_PROMPTS, RL_I32, 2, NULL);
    const rl_tensor *pl = pr ? rl_dataproto_tensor_shaped(in, RL_LM_PROMPT_LENS, RL_I32, 1,
                                                          (int64_t[]){pr->shape[0]}) : NULL;
    const rl_tensor *sd = pl ? rl_dataproto_tensor_shaped(in, RL_LM_ROW_SEEDS, RL_I64, 1,
                                                          (int64_t[]){pr->shape[0]}) : NULL;
    if (!sd)
        return rl_error_wrap(rl_error_code(), "%s", what);
    int B = (int)pr->shape[0], P = (int)pr->shape[1], R = (int)sp->max_new_tokens;
    rl_lm_sampling s;
    rl_lm_sampling_default(&s);
    int32_t stop = rl_lm_get_config(net)->eos_token_id;
    s.temperature = (float)sp->temperature;
    s.top_p = (float)sp->top_p;
    s.top_k = (int)sp->top_k;
    s.greedy = sp->greedy;
    s.max_new_tokens = R;
    s.stop_tokens = stop >= 0 ? &stop : NULL;
    s.num_stop_tokens = stop >= 0 ? 1 : 0;
    rl_dataproto *o = rl_dataproto_new();
    int64_t shape[2] = {B, R}, sshape[2] = {B, RL_TOOL_STATS_N};
    rl_tensor *tok = o ? rl_dataproto_new_tensor(o, RL_LM_RESPONSES, RL_I32, 2, shape) : NULL;
    rl_tensor *lens = tok ? rl_dataproto_new_tensor(o, RL_LM_RESPONSE_LENS, RL_I32, 1, shape) : NULL;
    rl_tensor *lp = lens ? rl_dataproto_new_tensor(o, RL_LM_RESPONSE_LOGP, RL_F32, 2, shape) : NULL;
    rl_tensor *en = lp ? rl_dataproto_new_tensor(o, RL_LM_RESPONSE_ENTROPY, RL_F32, 2, shape) : NULL;
    rl_tensor *mk = en ? rl_dataproto_new_tensor(o, RL_LM_RESPONSE_MASK, RL_F32, 2, shape) : NULL;
    rl_tensor *ts = mk ? rl_dataproto_new_tensor(o, RL_ROLLOUT_TOOL_STATS, RL_I32, 2, sshape) : NULL;
    int *ilens = malloc(sizeof(int) * (size_t)(B ? B : 1));
    int *plens = malloc(sizeof(int) * (size_t)(B ? B : 1));
    rl_agent_row_stats *st = calloc((size_t)(B ? B : 1), sizeof *st);
    int rc = RL_OK;
    if (!ts || !ilens || !plens || !st) {
        rc = ts ? rl_error_set(RL_ENOMEM, "%s: out of memory", what) : rl_error_code();
    } else if (B > 0) {
        const int32_t *p32 = rl_tensor_data(pl);
        for (int b = 0; b < B; b++)
            plens[b] = p32[b];
        rc = rl_agent_generate(net, r->agent->tok, &r->agent->at, r->agent->runner,
                               r->agent->max_turns, B, P, rl_tensor_data(pr), plens,
                               (const uint64_t *)rl_tensor_data(sd), &s, rl_tensor_data(tok),
                               rl_tensor_data(lp), rl_tensor_data(en), rl_tensor_data(mk), ilens,
                               st);
        int32_t *l32 = rl_tensor_data(lens), *t32 = rl_tensor_data(ts);
        long long sum[RL_TOOL_STATS_N] = {0};
        for (int b = 0; !rc && b < B; b++) {
            l32[b] = ilens[b];
            int32_t *row = t32 + (size_t)b * RL_TOOL_STATS_N;
            row[RL_TS_TURNS] = st[b].turns;
            row[RL_TS_CALLS] = st[b].calls;
            for (int k = 0; k < RL_TOOL_NOUTCOMES; k++)
                row[RL_TS_OUTCOME0 + k] = st[b].outcomes[k];
            row[RL_TS_BAD_CALLS] = st[b].bad_calls;
            row[RL_TS_TRUNCATED] = st[b].truncated;
            row[RL_TS_MAX_TURNS] = st[b].max_turns_hit;
            for (int k = 0; k < RL_TOOL_STATS_N; k++)
                sum[k] += row[k];
            for (int k = 1; k < RL_TOOL_NOUTCOMES; k++)
                if (st[b].outcomes[k])
                    rl_log_debug("rollout/%d: row %d: %d tool call(s) ended '%s'", ctx->rank, b,
                                 st[b].outcomes[k], rl_tool_outcome_name((rl_tool_outcome)k));
        }
        if (!rc)
            rl_log_info("rollout/%d: %d samples, %lld turns, %lld tool calls (ok %lld, error "
                        "%lld, garbage %lld, timeout %lld, unknown %lld, bad call %lld), "
                        "%lld truncated, %lld at max_turns, %d tool threads stuck",
                        ctx->rank, B, sum[RL_TS_TURNS], sum[RL_TS_CALLS], sum[RL_TS_OUTCOME0],
                        sum[RL_TS_OUTCOME0 + 1], sum[RL_TS_OUTCOME0 + 2],
                        sum[RL_TS_OUTCOME0 + 3], sum[RL_TS_OUTCOME0 + 4], sum[RL_TS_BAD_CALLS],
                        sum[RL_TS_TRUNCATED], sum[RL_TS_MAX_TURNS],
                        rl_tool_runner_stuck(r->agent->runner));
    }
    free(ilens);
    free(plens);
    free(st);
    if (rc) {
        rl_dataproto_free(o);
        return rc;
    }
    *out = o;
    return RL_OK;
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
    int rc = r->agent ? s_generate_agent(ctx, in, &s, &o) : rl_model_sample(r->model, in, &s, &o);
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
    {RL_ROLLOUT_EVAL_WEIGHTS, rl_flow_eval_weights},
    {NULL, NULL},
};

const rl_worker_role rl_role_rollout = {RL_ROLLOUT_ROLE, s_methods, s_init, s_fini};
