/* workers/rollout/rollout.h — contract of the rollout role (workers/rollout/):
 * a copy of the policy (any rl_model kind, rlrt/nn/model.h) that samples.
 * Its weights arrive from the actor over the weight channel, versioned: a
 * version becomes active only when complete.
 *
 * Config: the rollout sections (common/schema/rollout.h), read once at
 * CONFIGURE: rollout (every job), and those the job has of rollout (token
 * sampling), rollout (flow and diffusion sampling) and rollout.multi_turn.
 * Multi-turn sampling (LM only; common/tools/agent_loop.h, the hooks of
 * workers/rollout/multi_turn.c) needs a tokenizer with the tool markup
 * (data.tokenizer: arith_ext) and adds to generate's output
 * RL_LM_RESPONSE_MASK (0 at tool output) and RL_ROLLOUT_TOOL_STATS (B,
 * RL_TOOL_STATS_N) i32: per row the counts of rl_agent_row_stats in the
 * order of the RL_TS_* indices below.
 *
 * Methods (dispatch):
 *   init_model    one_to_all   builds the model from the job (no weights yet:
 *                              they come with the first sync)
 *   sync_weights  one_to_all   meta RL_ROLLOUT_ENDPOINT (string), RL_ROLLOUT_VERSION
 *                              (int >= 1), RL_ROLLOUT_HOST (string, optional: the
 *                              rank's node address, where it binds its input as a
 *                              link of the actor's chain) [, RL_ROLLOUT_IPC_ENDPOINT:
 *                              actor rank 0 shares this rank's GPU, the version
 *                              comes over CUDA IPC, workers/rollout/weights_ipc.h;
 *                              or RL_ROLLOUT_BCAST_ID, _RANK, _WORLD: by the
 *                              broadcast, workers/rollout/weights_bcast.h]:
 *                              receives that version
 *   generate      dp_compute   the model kind's sampling inputs (LM: prompts,
 *                              prompt_lens, row_seeds) and meta RL_ROLLOUT_GREEDY
 *                              (0/1, optional: validation decodes greedily) →
 *                              the kind's samples (LM: responses, response_lens,
 *                              response_logp, response_entropy) and meta
 *                              RL_ROLLOUT_WEIGHTS_VERSION (the version that sampled),
 *                              and the int64 column RL_ROLLOUT_ROW_VERSION (B): that
 *                              version per row, so it travels with each sample
 *                              through concatenation, filtering and reordering.
 *                              With rollout.partial_rollouts (LM, not greedy, not
 *                              multi-turn) the rollout takes a newer complete weight
 *                              version from the channel between two decode steps
 *                              and switches it in (docs/decisions/partial-rollouts.md):
 *                              the output then has RL_LM_TOKEN_VERSION (B, R) i64,
 *                              the version of each token, and the row column is
 *                              its oldest token's
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
 *   annotate      dp_compute   a track's annotation of a recorded batch
 *   save_state    rank_zero    a track's state into meta "path" (a directory)
 *   load_state    one_to_all   the same back
 *   eval_weights  one_to_all   a track's evaluation weights in or out
 *                              The four go to the track hooks of the job
 *                              (workers/rollout/hooks.h); RL_ESTATE when no
 *                              track of the job serves one. The embodied
 *                              track's (the EMA reference θ_ref and its
 *                              annotation, θ_eval; workers/rollout/flow_ema.c)
 *                              are in workers/flow_rl.h, where flow_annotate,
 *                              flow_ref_save and flow_ref_load name the first
 *                              three too.
 */
#ifndef RLRT_ROLES_ROLLOUT_H
#define RLRT_ROLES_ROLLOUT_H

#include "common/nn/models/lm/lm_model.h"
#include "common/schema/rollout.h"
#include "common/tools/tools.h"

#define RL_ROLLOUT_ROLE "rollout"

#define RL_ROLLOUT_INIT_MODEL "init_model"
#define RL_ROLLOUT_SYNC_WEIGHTS "sync_weights"
#define RL_ROLLOUT_GENERATE "generate"
#define RL_ROLLOUT_SERVE_ENV "serve_env"
#define RL_ROLLOUT_ANNOTATE "annotate"
#define RL_ROLLOUT_SAVE_STATE "save_state"
#define RL_ROLLOUT_LOAD_STATE "load_state"

#define RL_ROLLOUT_ENDPOINT "endpoint"
#define RL_ROLLOUT_VERSION "version"
#define RL_ROLLOUT_HOST "host"
#define RL_ROLLOUT_IPC_ENDPOINT "ipc_endpoint"
#define RL_ROLLOUT_BCAST_ID "bcast_id"       /* the broadcast's communicator (text) */
#define RL_ROLLOUT_BCAST_RANK "bcast_rank"   /* this rank's place in it (1 ..) */
#define RL_ROLLOUT_BCAST_WORLD "bcast_world" /* its size (actor rank 0 and the receivers) */
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

#endif
