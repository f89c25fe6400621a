/* common/schema/env.h — the env section: the LIBERO-Object environments of
 * the env role (workers/env/env.h), which the rollout's serve_env and the
 * LIBERO recipes (driver/recipes/embodied/) read too.
 *
 * The layout the keys define: global env g (0 <= g < total_num_envs, split
 * over the env ranks in contiguous shares) belongs to group q = g / G
 * (G = group_size) and runs task task_ids[q % n] (n tasks listed). The G
 * envs of a group share the task and the initial state of every episode
 * (GRPO's groups); an ungrouped call (evaluation) gives them distinct
 * states instead. rl_env_place_of() says where an env stands; the env role
 * picks initial states from it and the recipes count evaluation episodes by
 * it, so both read the layout from one place.
 *
 * Ownership: strings of the struct are borrowed from the config tree. */
#ifndef RLRT_SCHEMA_ENV_H
#define RLRT_SCHEMA_ENV_H

#include <stddef.h>
#include <stdint.h>

#include "rlrt/config.h"

#define RL_ENV_MAX_TASKS 64

#define RL_ENV_KEYS(X)                                                                              \
    X(STR, data_dir, "env.data_dir", "build/libero-data", 0, 0, RL_CFG_NONEMPTY, NULL,               \
      "the scenes written by `make libero-data` (a missing or corrupt file is an error naming it)") \
    X(ENUM, scene, "env.scene", "phys", 0, 0, 0, "phys|full",                                       \
      "phys, or full: with the visual meshes (rendering)")                                          \
    X(STR, task_ids, "env.task_ids", "'0-9'", 0, 0, RL_CFG_NONEMPTY, NULL,                         \
      "LIBERO-Object tasks, '0-9' or '0,3,7'; env g runs task_ids[(g / group_size) % n]")          \
    X(INT, total_num_envs, "env.total_num_envs", "10", 1, 4096, 0, NULL,                            \
      "environments over all env ranks (each rank gets a contiguous share)")                        \
    X(INT, max_episode_steps, "env.max_episode_steps", "240", 1, 100000, 0, NULL,                  \
      "env steps of an episode at most (RLinf's LIBERO-Object setting: 240)")                      \
    X(INT, num_action_chunks, "env.num_action_chunks", "10", 1, 1000, 0, NULL,                      \
      "actions per policy call (pi0: 10)")                                                          \
    X(INT, pipeline_stage_num, "env.pipeline_stage_num", "1", 1, 64, 0, NULL,                       \
      "sub-batches: stepping one overlaps the policy on another (RLinf's pipeline)")                \
    X(BOOL, auto_reset, "env.auto_reset", "true", 0, 0, 0, NULL,                                    \
      "a finished env resets at the next chunk boundary")                                           \
    X(BOOL, terminate_on_success, "env.terminate_on_success", "true", 0, 0, 0, NULL,                \
      "an episode ends at its first success")                                                       \
    X(INT, group_size, "env.group_size", "1", 1, 4096, 0, NULL,                                     \
      "envs sharing a task and an initial state (GRPO's groups; a divisor of total_num_envs)")      \
    X(ENUM, init_random, "env.init_state", "cycle", 0, 0, 0, "cycle|random",                       \
      "which of a task's 50 initial states: cycle walks them, random draws by trainer.seed")       \
    X(BOOL, clip_actions, "env.clip_actions", "true", 0, 0, 0, NULL,                                \
      "out-of-range actions are clipped and counted (false: an error naming env and step)")        \
    X(NUM, channel_timeout_s, "env.channel_timeout_s", "60.0", 0, 3600, RL_CFG_MIN_OPEN, NULL,      \
      "seconds to wait for the peer on the env-rollout data channel")                               \
    X(ENUM, policy, "env.policy", "expert", 0, 0, 0, "expert|model",                                \
      "what the rollout's serve_env answers with: the scripted expert, or its flow_policy model")   \
    X(NUM, policy_cost_ms, "env.policy_cost_ms", "0.0", 0, 10000, 0, NULL,                          \
      "extra busy time per policy call (benchmarks: a policy of realistic cost)")                  \
    X(INT, render_every, "env.render_every", "0", 0, 100000, 0, NULL,                               \
      "k > 0: agent-view PNG strips of each rank's first env, a frame every k steps (0: off)")     \
    X(INT, render_size, "env.render_size", "128", 16, 1024, 0, NULL, "pixels a side of those frames")

typedef struct rl_env_config {
    RL_ENV_KEYS(RL_CFG_FIELD)
    /* derived (the check): env.task_ids parsed, and trainer.seed (random
     * initial states) */
    int tasks[RL_ENV_MAX_TASKS];
    int num_tasks;
    int64_t seed;
} rl_env_config;

extern const rl_config_section rl_env_section;

/* Where global env g stands in the layout (see above). */
typedef struct rl_env_place {
    int task;        /* its LIBERO task id */
    int64_t slot;    /* that task's index in env.task_ids */
    int64_t k;       /* its place among the envs (grouped: the groups) of the task, from 0 */
    int64_t sharing; /* how many envs (grouped: groups) share the task */
    uint64_t stream; /* whose initial states it draws with env.init_state random */
} rl_env_place;

/* Grouped (the groups share a state) or `ungrouped` (with group_size > 1
 * the envs of a task are numbered one by one, k in [0, total_num_envs / n)). */
rl_env_place rl_env_place_of(const rl_env_config *c, int64_t g, int ungrouped);

#endif
