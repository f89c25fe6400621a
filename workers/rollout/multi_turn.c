/* workers/rollout/multi_turn.c — the language-model track's hooks on the
 * rollout (workers/rollout/hooks.h): with rollout.multi_turn enabled,
 * generate samples with tool calls (common/tools/agent_loop.h), adding to
 * the LM kind's outputs the loss mask (0 at tool output) and the per-row
 * tool counts (RL_ROLLOUT_TOOL_STATS); one log line per call with the
 * outcomes. */
#include <stdlib.h>

#include "common/nn/models/lm/generate.h"
#include "common/nn/models/lm/lm_model.h"
#include "common/nn/models/lm/transformer.h"
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

static int s_generate(rl_worker_ctx *ctx, const rl_rollout_policy *p, const rl_dataproto *in,
                      rl_dataproto **out)
{
    const char *what = "multi-turn generate";
    const rl_model_sampling *sp = &p->sampling;
    rl_lm *net = rl_lm_model_network(p->model);
    if (!net)
        return rl_error_set(RL_EUNSUPPORTED, "%s: rollout.multi_turn needs %s lm", what,
                            RL_CFG_PATH(&rl_model_base_section, rl_model_base_config, type));
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
        rc = rl_agent_generate(net, s_agent->tok, &s_agent->at, s_agent->runner, s_agent->max_turns, B, P,
                               rl_tensor_data(pr), plens, (const uint64_t *)rl_tensor_data(sd), &s,
                               rl_tensor_data(tok), rl_tensor_data(lp), rl_tensor_data(en),
                               rl_tensor_data(mk), ilens, st);
        int32_t *l32 = rl_tensor_data(lens);
        for (int b = 0; !rc && b < B; b++)
            l32[b] = ilens[b];
        if (!rc)
            s_tool_stats(ctx, st, B, rl_tensor_data(ts));
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

const rl_rollout_hooks rl_rollout_multi_turn_hooks = {
    .name = "multi-turn tools",
    .open = s_open,
    .close = s_close,
    .generate = s_generate,
};
