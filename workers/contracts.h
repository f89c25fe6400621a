/* workers/contracts.h — the contracts of every role rl-worker registers
 * (workers/registry.c), and RL_ROLES_DEFAULTS: their config sections not
 * yet in common/schema, for a job that starts every role whatever its
 * recipe (the selftest, tests, benchmarks), with trainer.seed, which the
 * roles read too (the env's section is rl_env_section, common/schema/env.h).
 * A new role adds its contract header here. */
#ifndef RLRT_ROLES_ROLES_H
#define RLRT_ROLES_ROLES_H

#include "workers/actor/actor.h"
#include "workers/env/env.h"
#include "workers/reward/reward.h"
#include "workers/rollout/rollout.h"

#define RL_ROLES_DEFAULTS \
    RL_ACTOR_DEFAULTS RL_ROLLOUT_DEFAULTS RL_REWARD_DEFAULTS "trainer:\n  seed: 1\n"

#endif
