/* workers/rollout/rollout.h — contract of the rollout role (workers/rollout/):
 * a copy of the policy (any rl_model kind, rlrt/nn/model.h) that samples.
 * Its weights arrive from the actor over the weight channel, versioned: a
 * version becomes active only when complete.
 *
 * Config (read and range-checked once, at CONFIGURE; the model section is
 * the model kind's; RL_ROLLOUT_DEFAULTS is the one place these defaults live):
 *   rollout.n                 >= 1   samples per prompt (the recipe repeats)
 *   rollout.temperature       (0, 100]
 *   rollout.top_p             (0, 1]
 *   rollout.top_k             >= 0 (0 = off)
 *   rollout.response_length   [1, 2^20]  new tokens per sample
 *   rollout.num_steps         [1, 10^4]  flow / diffusion integration steps
 *   rollout.noise_level       [0, 10]    flow / diffusion SDE noise
 *   rollout.weight_timeout_s  (0, 3600]  how long sync_weights waits for a version
 *   rollout.shift             (0, 1000]  diffusion σ-schedule shift (seed 004's shift)
 *   rollout.multi_turn.enable          false: one turn (plain sampling)
 *   rollout.multi_turn.max_turns       [0, 64]  tool calls per sample at most
 *   rollout.multi_turn.tools           list of built-in tool names (rl_tool_builtin)
 *   rollout.multi_turn.tool_timeout_ms [1, 600000] per call
 *   rollout.multi_turn.max_tool_output [1, RL_TOOL_MAX_OUTPUT = 4096] bytes of a tool's output
 *   Multi-turn sampling (LM only; common/tools/agent_loop.h) needs a tokenizer with
 *   the tool markup (data.tokenizer: arith_ext) and adds to generate's output
 *   RL_LM_RESPONSE_MASK (0 at tool output) and RL_ROLLOUT_TOOL_STATS (B,
 *   RL_TOOL_STATS_N) i32: per row the counts of rl_agent_row_stats in the
 *   order of the RL_TS_* indices below.
 *
 * Methods (dispatch):
 *   init_model    one_to_all   builds the model from the job (no weights yet:
 *                              they come with the first sync)
 *   sync_weights  one_to_all   meta RL_ROLLOUT_ENDPOINT (string), RL_ROLLOUT_VERSION
 *                              (int >= 1): receives that version from the actor
 *   generate      dp_compute   the model kind's sampling inputs (LM: prompts,
 *                              prompt_lens, row_seeds) and meta RL_ROLLOUT_GREEDY
 *                              (0/1, optional: validation decodes greedily) →
 *                              the kind's samples (LM: responses, response_lens,
 *                              response_logp, response_entropy) and meta
 *                              RL_ROLLOUT_WEIGHTS_VERSION (the version that sampled),
 *                              and the int64 column RL_ROLLOUT_ROW_VERSION (B): that
 *                              version per row, so it travels with each sample
 *                              through concatenation, filtering and reordering
 *   serve_env     all_to_all   meta endpoint of env rank r's data channel: answers
 *                              its observations with action chunks until it is done
 *                              (workers/env/env.h; reads the env.* section) → meta
 *                              policy_calls, policy_s. Optional meta: greedy (0/1,
 *                              default 0), record (0/1, default 1), round (>= 0,
 *                              default 0; pass the interact call's round).
 *                              With env.policy: model (needs init_model; the
 *                              model is a flow_policy) each observation batch is
 *                              answered by rl_model_sample: the ODE when greedy,
 *                              else the flow SDE of rollout.num_steps /
 *                              rollout.noise_level, with noise_seeds / row_seeds
 *                              = rl_rollout_env_seed(trainer.seed, round, global
 *                              env index, chunk step, 0 / 1), so a run repeats
 *                              bit for bit. Unless record = 0 the reply holds one
 *                              row per (policy call, env) in arrival order:
 *                                proprio (R, 39), object (R, 98) f32, task (R) i64,
 *                                initial_noise (R, D), chain (R, N+1, D),
 *                                times (R, N+1), noise_level (R), step_mask (R, N),
 *                                sample_logp (R, N), action (R, C, 7) f32
 *                                (common/nn/models/flow_policy.h), env_row (R) i64 (the
 *                                env's row in the env rank's interact reply),
 *                                chunk_step (R) i64 (the policy call t within
 *                                the interact call)
 *                              and meta weights_version (the active version).
 *   flow_annotate, flow_ref_save, flow_ref_load: the EMA reference and the
 *                              FlowSAR / FlowIPO annotation of the embodied
 *                              recipe (contract: workers/flow_rl.h)
 */
#ifndef RLRT_ROLES_ROLLOUT_H
#define RLRT_ROLES_ROLLOUT_H

#include <stddef.h>
#include <stdint.h>

#include "rlrt/config.h"
#include "common/nn/models/lm/lm_model.h"
#include "common/tools/tools.h"

#define RL_ROLLOUT_ROLE "rollout"

#define RL_ROLLOUT_INIT_MODEL "init_model"
#define RL_ROLLOUT_SYNC_WEIGHTS "sync_weights"
#define RL_ROLLOUT_GENERATE "generate"
#define RL_ROLLOUT_SERVE_ENV "serve_env"

#define RL_ROLLOUT_ENDPOINT "endpoint"
#define RL_ROLLOUT_VERSION "version"
#define RL_ROLLOUT_GREEDY "greedy"
#define RL_ROLLOUT_WEIGHTS_VERSION "weights_version"
#define RL_ROLLOUT_ROW_VERSION "weight_version"
#define RL_ROLLOUT_TOOL_STATS "tool_stats"

/* Columns of RL_ROLLOUT_TOOL_STATS: turns, calls, then the calls by
 * rl_tool_outcome (ok, error, garbage, timeout, unknown), bad call texts,
 * truncated (0/1), max_turns_hit (0/1). */
enum {
    RL_TS_TURNS = 0, RL_TS_CALLS = 1, RL_TS_OUTCOME0 = 2, RL_TS_BAD_CALLS = 7,
    RL_TS_TRUNCATED = 8, RL_TS_MAX_TURNS = 9, RL_TOOL_STATS_N = 10
};

#define RL_ROLLOUT_DEFAULTS \
    "rollout:\n" \
    "  n: 8                      # samples per prompt\n" \
    "  temperature: 1.0\n" \
    "  top_p: 1.0\n" \
    "  top_k: 0\n" \
    "  response_length: 48       # new tokens per sample\n" \
    "  num_steps: 10             # flow / diffusion models: integration steps\n" \
    "  noise_level: 0.7          # flow / diffusion models: SDE noise\n" \
    "  weight_timeout_s: 120.0   # sync_weights waits this long for a version\n" \
    "  shift: 1.0                # diffusion models: sigma-schedule shift\n" \
    "  multi_turn:               # LM tool use (common/tools/agent_loop.h)\n" \
    "    enable: false\n" \
    "    max_turns: 2             # tool calls per sample at most\n" \
    "    tools: [calc]            # built-in tools (rl_tool_builtin)\n" \
    "    tool_timeout_ms: 1000    # per call; a stuck tool gives 'error: timeout'\n" \
    "    max_tool_output: 64      # bytes; longer output is 'error: bad output'\n"

/* The rollout's settings (read by the worker at CONFIGURE and checked by
 * the driver before it starts any process, with the same table). */
typedef struct rl_rollout_config {
    int64_t n, response_length, top_k, num_steps, seed;
    double temperature, top_p, noise_level, weight_timeout_s, shift;
    int mt_enable;
    int64_t mt_max_turns, mt_timeout_ms, mt_max_output;
} rl_rollout_config;

static inline int rl_rollout_config_read(const rl_config *c, rl_rollout_config *o)
{
#define RL_R_NUM(path, f, lo, hi, fl) {path, RL_CFG_NUM, offsetof(rl_rollout_config, f), lo, hi, fl, NULL}
#define RL_R_INT(path, f, lo, hi) {path, RL_CFG_INT, offsetof(rl_rollout_config, f), lo, hi, 0, NULL}
    static const rl_config_spec spec[] = {
        RL_R_INT("rollout.n", n, 1, 1 << 16),
        RL_R_NUM("rollout.temperature", temperature, 0, 100, RL_CFG_MIN_OPEN),
        RL_R_NUM("rollout.top_p", top_p, 0, 1, RL_CFG_MIN_OPEN),
        RL_R_INT("rollout.top_k", top_k, 0, 1 << 24),
        RL_R_INT("rollout.response_length", response_length, 1, 1 << 20),
        RL_R_INT("rollout.num_steps", num_steps, 1, 10000),
        RL_R_NUM("rollout.noise_level", noise_level, 0, 10, 0),
        RL_R_NUM("rollout.weight_timeout_s", weight_timeout_s, 0, 3600, RL_CFG_MIN_OPEN),
        RL_R_NUM("rollout.shift", shift, 0, 1000, RL_CFG_MIN_OPEN),
        RL_R_INT("trainer.seed", seed, 0, INT64_MAX),
        {"rollout.multi_turn.enable", RL_CFG_BOOL, offsetof(rl_rollout_config, mt_enable), 0, 0, 0, NULL},
        RL_R_INT("rollout.multi_turn.max_turns", mt_max_turns, 0, 64),
        RL_R_INT("rollout.multi_turn.tool_timeout_ms", mt_timeout_ms, 1, 600000),
        RL_R_INT("rollout.multi_turn.max_tool_output", mt_max_output, 1, RL_TOOL_MAX_OUTPUT),
    };
#undef RL_R_NUM
#undef RL_R_INT
    return rl_config_read(c, spec, sizeof spec / sizeof spec[0], o);
}

#endif
