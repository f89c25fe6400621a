/* workers/contracts.h — the contracts of every role rl-worker registers
 * (workers/registry.c), and RL_ROLES_SECTIONS: all the config sections
 * they read at CONFIGURE, for a job that starts every role whatever its
 * recipe (the selftest recipe, tests, benchmarks, fuzz targets). A new role
 * adds its contract header here and its sections to the list. */
#ifndef RLRT_ROLES_ROLES_H
#define RLRT_ROLES_ROLES_H

#include "common/schema/job.h"
#include "workers/actor/actor.h"
#include "workers/env/env.h"
#include "workers/reward/reward.h"
#include "workers/rollout/rollout.h"

/* The roles' sections (a recipe's trainer section, with trainer.seed, is
 * implicit; rl_schema_job adds it). */
#define RL_ROLES_SECTIONS                                                                           \
    &rl_actor_section, &rl_rollout_section, &rl_rollout_tokens_section, &rl_rollout_flow_section,   \
        &rl_rollout_multi_turn_section, &rl_reward_section, &rl_env_section

/* A job of every role's sections (rl_schema_job; the caller frees it). */
#define rl_roles_job(job_path, n_overrides, overrides)                                              \
    rl_schema_job((const rl_config_section *const[]){RL_ROLES_SECTIONS, NULL}, NULL, job_path,      \
                  n_overrides, overrides)

#endif
