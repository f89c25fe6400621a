/* workers/env/env.h — contract of the env role (workers/env/): vectorised
 * LIBERO-Object environments (common/sim/libero.h) that exchange observations
 * and action chunks with the rollout over a direct data channel
 * (rlrt/runtime/channel.h), never through the driver.
 *
 * Config (read and range-checked once, at CONFIGURE; RL_ENV_DEFAULTS is the
 * one place these defaults live):
 *   env.data_dir              the scenes of `make libero-data` (a missing or
 *                             corrupt file is an error naming it)
 *   env.scene                 phys | full (full: visual meshes, for rendering)
 *   env.task_ids              "0-9", "0,3,7": LIBERO-Object tasks; global env g
 *                             runs task_ids[(g / group_size) % n]
 *   env.total_num_envs        [1, 4096], split over the env ranks (rank r gets
 *                             rl_shard_range-like contiguous envs)
 *   env.max_episode_steps     [1, 100000] env steps (RLinf LIBERO-Object: 240)
 *   env.num_action_chunks     [1, 1000] actions per policy call (π0: 10)
 *   env.pipeline_stage_num    [1, 64] sub-batches: stepping one overlaps the
 *                             policy on another (RLinf's pipeline)
 *   env.auto_reset            a finished env resets at the next chunk boundary
 *   env.terminate_on_success  an episode ends at its first success
 *   env.group_size            [1, 4096] envs per group: the G consecutive
 *                             global envs of group q = g / G run the same
 *                             task (task_ids[q % n]) from the same initial
 *                             state in every episode (GRPO's groups, RLinf's
 *                             group_size); 1: every env on its own.
 *                             total_num_envs must be a multiple of it, and
 *                             (when > 1) the groups a multiple of the tasks,
 *                             so every task has as many envs. An interact
 *                             call with meta RL_ENV_UNGROUPED 1 (evaluation)
 *                             gives the envs of a task distinct initial
 *                             states instead
 *   env.init_state            cycle | random: which of the 50 initial states
 *   env.clip_actions          out-of-range actions are clipped and counted
 *                             (false: an error naming env and step)
 *   env.channel_timeout_s     (0, 3600] wait for the peer on the data channel
 *   env.policy                expert | model: what the rollout's serve_env
 *                             answers with (model: the rollout's flow_policy
 *                             model, common/nn/models/flow_policy.h; its
 *                             model.num_action_chunks must equal
 *                             env.num_action_chunks)
 *   env.policy_cost_ms        [0, 10000] extra busy time per policy call
 *                             (benchmarks: a policy of realistic cost)
 *   env.render_every          [0, 100000] 0 = off; k: a frame of the agent view
 *                             of each rank's first env at every episode start
 *                             and every k steps (for people: PNG strips in the
 *                             job's output; needs EGL, loads the full scene)
 *   env.render_size           [16, 1024] pixels a side
 *                             (GIFs of evaluation episodes are drawn by the
 *                             driver instead, from interact's replies:
 *                             eval.gif_*, driver/recipes/embodied/libero_gif.h)
 *   trainer.seed              env.init_state random
 *
 * Methods (dispatch):
 *   open_channel  one_to_all  meta RL_ENV_HOST → meta RL_ENV_ENDPOINT (the
 *                             rank listens; rollout rank r connects to env
 *                             rank r)
 *   interact      one_to_all  meta RL_ENV_CHUNK_STEPS T (policy calls per env),
 *                             RL_ENV_RESET (0/1: reset every env first),
 *                             RL_ENV_ROUND (0 .. INT32_MAX: picks the initial
 *                             states of a reset, so a re-run repeats an
 *                             episode; -1 or absent: the envs' own episode
 *                             counts; anything else is refused naming it),
 *                             optional RL_ENV_UNGROUPED (0/1: with
 *                             env.group_size > 1, per-env initial states) →
 *                             the rank's envs as rows, K = T · num_action_chunks:
 *       RL_ENV_PROPRIO  (N, K+1, 39) f32  observation before step k (k = K: after)
 *       RL_ENV_OBJECT   (N, K+1, 98) f32
 *       RL_ENV_ACTIONS  (N, K, 7) f32     actions as applied (clipped)
 *       RL_ENV_REWARDS  (N, K) f32        1 on a step that ends in success
 *       RL_ENV_DONES    (N, K) u8         the episode ended at this step
 *       RL_ENV_VALID    (N, K) u8         a step was taken (0 after the end
 *                                         when auto_reset is off)
 *       RL_ENV_TASK     (N, K+1) i64      task of the episode at step k
 *       RL_ENV_INIT     (N, K+1) i64      its initial state
 *       RL_ENV_SUCCESS  (N, K+1) u8       success_once of the episode so far
 *       column RL_ENV_FRAMES (bytes)      row 0: a PNG strip of the rank's first
 *                                         env when env.render_every > 0, else empty
 *     meta RL_ENV_M_* (steps, clipped, unstable, seconds stepping / waiting)
 *
 * Data channel (env rank r ⇄ rollout rank r, DataProtos):
 *   env → rollout, per stage s and chunk step t: tensors RL_ENV_PROPRIO (n, 39),
 *     RL_ENV_OBJECT (n, 98) f32, RL_ENV_TASK (n) i64, RL_ENV_NEW_EPISODE (n) u8,
 *     RL_ENV_TASK_INFO (n, 4) f32 (target slot, basket slot, target height,
 *     grasp axis: what the scripted expert needs); meta RL_ENV_STAGE, RL_ENV_STEP;
 *     finally a 0-row message with meta RL_ENV_END = 1.
 *   rollout → env: tensor RL_ENV_ACTIONS (n, C, 7) f32, meta RL_ENV_STAGE,
 *     RL_ENV_STEP (checked against what was sent).
 */
#ifndef RLRT_ROLES_ENV_H
#define RLRT_ROLES_ENV_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "rlrt/config.h"
#include "rlrt/error.h"

#define RL_ENV_ROLE "env"

#define RL_ENV_OPEN_CHANNEL "open_channel"
#define RL_ENV_INTERACT "interact"

#define RL_ENV_HOST "host"
#define RL_ENV_ENDPOINT "endpoint"
#define RL_ENV_CHUNK_STEPS "chunk_steps"
#define RL_ENV_RESET "reset"
#define RL_ENV_ROUND "round"
#define RL_ENV_UNGROUPED "ungrouped"
#define RL_ENV_STAGE "stage"
#define RL_ENV_STEP "step"
#define RL_ENV_END "end"

#define RL_ENV_PROPRIO "proprio"
#define RL_ENV_OBJECT "object"
#define RL_ENV_ACTIONS "actions"
#define RL_ENV_REWARDS "rewards"
#define RL_ENV_DONES "dones"
#define RL_ENV_VALID "valid"
#define RL_ENV_TASK "task_id"
#define RL_ENV_INIT "init_index"
#define RL_ENV_SUCCESS "success_once"
#define RL_ENV_NEW_EPISODE "new_episode"
#define RL_ENV_TASK_INFO "task_info"
#define RL_ENV_FRAMES "frames"

#define RL_ENV_M_STEPS "env_steps"
#define RL_ENV_M_CLIPPED "clipped_actions"
#define RL_ENV_M_UNSTABLE "unstable_episodes"
#define RL_ENV_M_EPISODES "episodes_done"
#define RL_ENV_M_STEP_S "step_s"
#define RL_ENV_M_WAIT_S "wait_s"

/* rollout's side of the channel (workers/rollout/rollout.h lists the method) */
#define RL_ENV_SERVE "serve_env"
#define RL_ENV_M_POLICY_CALLS "policy_calls"
#define RL_ENV_M_POLICY_S "policy_s"

#define RL_ENV_DEFAULTS \
    "env:\n" \
    "  data_dir: build/libero-data  # written by `make libero-data`\n" \
    "  scene: phys                 # phys | full (visual meshes: rendering)\n" \
    "  task_ids: '0-9'             # LIBERO-Object tasks; env g runs task_ids[(g / group_size) % n]\n" \
    "  total_num_envs: 10          # over all env ranks\n" \
    "  max_episode_steps: 240      # RLinf's LIBERO-Object setting\n" \
    "  num_action_chunks: 10       # actions per policy call\n" \
    "  pipeline_stage_num: 1       # sub-batches overlapping env and policy\n" \
    "  auto_reset: true\n" \
    "  terminate_on_success: true\n" \
    "  group_size: 1               # envs sharing a task and initial state (GRPO groups)\n" \
    "  init_state: cycle           # cycle | random\n" \
    "  clip_actions: true          # false: an out-of-range action is an error\n" \
    "  channel_timeout_s: 60\n" \
    "  policy: expert              # expert | model (the rollout's flow_policy)\n" \
    "  policy_cost_ms: 0           # extra busy time per policy call\n" \
    "  render_every: 0             # >0: agent-view PNG strips of each rank's first env\n" \
    "  render_size: 128\n"

#define RL_ENV_MAX_TASKS 64

typedef struct rl_env_config {
    const char *data_dir, *task_ids; /* borrowed from the tree */
    int scene, init_random, policy;  /* enums: phys|full, cycle|random, expert|model */
    int auto_reset, terminate_on_success, clip_actions;
    int64_t total_num_envs, group_size, max_episode_steps, num_action_chunks, pipeline_stage_num, seed;
    int64_t render_every, render_size;
    double channel_timeout_s, policy_cost_ms;
    int tasks[RL_ENV_MAX_TASKS];
    int num_tasks;
} rl_env_config;

/* "0-9" or "0,3,7-8" into tasks[]; 0 or a message (no location). */
static inline int rl_env_parse_tasks(const char *s, int *tasks, int *n)
{
    *n = 0;
    while (s && *s) {
        char *end;
        long a = strtol(s, &end, 10), b = a;
        if (end == s || a < 0 || a >= RL_ENV_MAX_TASKS)
            return -1;
        s = end;
        if (*s == '-') {
            b = strtol(s + 1, &end, 10);
            if (end == s + 1 || b < a || b >= RL_ENV_MAX_TASKS)
                return -1;
            s = end;
        }
        for (long k = a; k <= b; k++) {
            if (*n >= RL_ENV_MAX_TASKS)
                return -1;
            tasks[(*n)++] = (int)k;
        }
        if (*s == ',')
            s++;
        else if (*s)
            return -1;
    }
    return *n > 0 ? 0 : -1;
}

static inline int rl_env_config_read(const rl_config *c, rl_env_config *o)
{
#define RL_E_INT(path, f, lo, hi) {path, RL_CFG_INT, offsetof(rl_env_config, f), lo, hi, 0, NULL}
#define RL_E_BOOL(path, f) {path, RL_CFG_BOOL, offsetof(rl_env_config, f), 0, 0, 0, NULL}
    static const rl_config_spec spec[] = {
        {"env.data_dir", RL_CFG_STR, offsetof(rl_env_config, data_dir), 0, 0, RL_CFG_NONEMPTY, NULL},
        {"env.scene", RL_CFG_ENUM, offsetof(rl_env_config, scene), 0, 0, 0, "phys|full"},
        {"env.task_ids", RL_CFG_STR, offsetof(rl_env_config, task_ids), 0, 0, RL_CFG_NONEMPTY, NULL},
        RL_E_INT("env.total_num_envs", total_num_envs, 1, 4096),
        RL_E_INT("env.group_size", group_size, 1, 4096),
        RL_E_INT("env.max_episode_steps", max_episode_steps, 1, 100000),
        RL_E_INT("env.num_action_chunks", num_action_chunks, 1, 1000),
        RL_E_INT("env.pipeline_stage_num", pipeline_stage_num, 1, 64),
        RL_E_BOOL("env.auto_reset", auto_reset),
        RL_E_BOOL("env.terminate_on_success", terminate_on_success),
        {"env.init_state", RL_CFG_ENUM, offsetof(rl_env_config, init_random), 0, 0, 0, "cycle|random"},
        RL_E_BOOL("env.clip_actions", clip_actions),
        {"env.channel_timeout_s", RL_CFG_NUM, offsetof(rl_env_config, channel_timeout_s), 0, 3600,
         RL_CFG_MIN_OPEN, NULL},
        {"env.policy", RL_CFG_ENUM, offsetof(rl_env_config, policy), 0, 0, 0, "expert|model"},
        {"env.policy_cost_ms", RL_CFG_NUM, offsetof(rl_env_config, policy_cost_ms), 0, 10000, 0, NULL},
        RL_E_INT("env.render_every", render_every, 0, 100000),
        RL_E_INT("env.render_size", render_size, 16, 1024),
        RL_E_INT("trainer.seed", seed, 0, INT64_MAX),
    };
#undef RL_E_INT
#undef RL_E_BOOL
    int rc = rl_config_read(c, spec, sizeof spec / sizeof spec[0], o);
    if (!rc && rl_env_parse_tasks(o->task_ids, o->tasks, &o->num_tasks))
        rc = rl_config_error_at(c, "env.task_ids", RL_ECONFIG,
                                "expected task numbers in [0, %d) like '0-9' or '0,3,7', got '%s'",
                                RL_ENV_MAX_TASKS, o->task_ids);
    if (!rc && o->total_num_envs % o->group_size)
        rc = rl_config_error_at(c, "env.group_size", RL_ECONFIG,
                                "must divide env.total_num_envs (%lld), got %lld",
                                (long long)o->total_num_envs, (long long)o->group_size);
    if (!rc && o->group_size > 1 && (o->total_num_envs / o->group_size) % o->num_tasks)
        rc = rl_config_error_at(c, "env.group_size", RL_ECONFIG,
                                "%lld envs in groups of %lld make %lld groups: a multiple of the %d tasks is needed, "
                                "so every task has as many groups", (long long)o->total_num_envs,
                                (long long)o->group_size, (long long)(o->total_num_envs / o->group_size),
                                o->num_tasks);
    if (!rc && o->pipeline_stage_num > o->total_num_envs)
        rc = rl_config_error_at(c, "env.pipeline_stage_num", RL_ECONFIG,
                                "must be <= env.total_num_envs (%lld), got %lld",
                                (long long)o->total_num_envs, (long long)o->pipeline_stage_num);
    return rc;
}

#endif
