/* workers/rollout/multi_turn.c — the language-model track's hooks on the
 * rollout (workers/rollout/hooks.h): with rollout.multi_turn enabled,
 * generate samples with tool calls (common/tools/agent_loop.h), adding to
 * the LM kind's outputs the loss mask (0 at tool output) and the per-row
 * tool counts (RL_ROLLOUT_TOOL_STATS); one log line per call with the
 * outcomes. */
#include <stdlib.h>

#include "common/nn/models/lm/lm_model.h"
#include "common/schema/job.h"
#include "common/schema/model.h"
#include "common/schema/rollout.h"
#include "common/tools/agent_loop.h"
#include "common/tools/tools.h"
#include "rlrt/dataproto.h"
#include "rlrt/dtype.h"
#include "rlrt/error.h"
#include "rlrt/log.h"
#include "rlrt/tensor.h"
#include "workers/rollout/hooks.h"
#include "workers/rollout/rollout.h"

static rl_agent *s_agent; /* the tools, while the job's multi_turn is enabled */

static int s_open(rl_worker_ctx *ctx, int *active)
{
    const rl_rollout_multi_turn_config *mt;
    *active = 0;
    if (rl_schema_optional(ctx->config, &rl_rollout_multi_turn_section, (const void **)&mt))
        return rl_error_code();
    if (!mt || !mt->enable)
        return RL_OK;
    if (!(s_agent = rl_agent_open(ctx->config)))
        return rl_error_code();
    *active = 1;
    return RL_OK;
}

static void s_close(void)
{
    rl_agent_free(s_agent);
    s_agent = NULL;
}

/* Sums and logs the calls' tool counts; row b's into stats (B, RL_TOOL_STATS_N). */
static void s_tool_stats(rl_worker_ctx *ctx, const rl_agent_row_stats *st, int B, int32_t *stats)
{
    long long sum[RL_TOOL_STATS_N] = {0};
    for (int b = 0; b < B; b++) {
        int32_t *row = stats + (size_t)b * RL_TOOL_STATS_N;
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
    rl_log_info("rollout/%d: %d samples, %lld turns, %lld tool calls (ok %lld, error "
                "%lld, garbage %lld, timeout %lld, unknown %lld, bad call %lld), "
                "%lld truncated, %lld at max_turns, %d tool threads stuck",
                ctx->rank, B, sum[RL_TS_TURNS], sum[RL_TS_CALLS], sum[RL_TS_OUTCOME0],
                sum[RL_TS_OUTCOME0 + 1], sum[RL_TS_OUTCOME0 + 2], sum[RL_TS_OUTCOME0 + 3],
                sum[RL_TS_OUTCOME0 + 4], sum[RL_TS_BAD_CALLS], sum[RL_TS_TRUNCATED],
                sum[RL_TS_MAX_TURNS], rl_tool_runner_stuck(s_agent->runner));
}

/* The LM kind's sampling with the agent loop as its generation
 * (rl_lm_sampler): the outputs get the loss mask and the tool counts. */
static int s_agent_sample(void *arg, const rl_lm_sample_call *c)
{
    rl_tensor *ts = rl_dataproto_new_tensor(c->out, RL_ROLLOUT_TOOL_STATS, RL_I32, 2,
                                            (int64_t[]){c->B, RL_TOOL_STATS_N});
    rl_agent_row_stats *st = ts ? calloc((size_t)(c->B ? c->B : 1), sizeof *st) : NULL;
    int rc = st ? RL_OK : ts ? rl_error_set(RL_ENOMEM, "multi-turn generate: out of memory") : rl_error_code();
    if (!rc && c->B > 0) {
        rc = rl_agent_generate(c->net, s_agent->tok, &s_agent->at, s_agent->runner, s_agent->max_turns, c->B,
                               c->P, c->prompts, c->plens, c->seeds, c->s, c->tokens, c->logp, c->entropy,
                               c->mask, c->lens, st);
        if (!rc)
            s_tool_stats(arg, st, c->B, rl_tensor_data(ts));
    }
    free(st);
    return rc;
}

static int s_generate(rl_worker_ctx *ctx, const rl_rollout_policy *p, const rl_dataproto *in,
                      rl_dataproto **out)
{
    const char *what = "multi-turn generate";
    if (!rl_lm_model_network(p->model))
        return rl_error_set(RL_EUNSUPPORTED, "%s: rollout.multi_turn needs %s lm", what,
                            RL_CFG_PATH(&rl_model_base_section, rl_model_base_config, type));
    return rl_lm_model_sample_with(p->model, in, &p->sampling, what, 1, s_agent_sample, ctx, out);
}

const rl_rollout_hooks rl_rollout_multi_turn_hooks = {
    .name = "multi-turn tools",
    .open = s_open,
    .close = s_close,
    .generate = s_generate,
};
