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

typedef struct rl_env_config {
#define X RL_CFG_FIELD
#include "common/schema/env.def"
#undef X
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
