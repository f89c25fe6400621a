/* workers/roles.h — the method table of each role of rl-worker. Each role's
 * contract (methods, tensors, meta keys, config) is its header,
 * workers/<role>/<role>.h; the registry (workers/registry.c) lists the roles
 * `rl-worker --role` accepts. */
#ifndef RLRT_WORKERS_ROLES_H
#define RLRT_WORKERS_ROLES_H

#include "rlrt/runtime/worker.h"

extern const rl_worker_role rl_role_rollout;
extern const rl_worker_role rl_role_actor;
extern const rl_worker_role rl_role_reward;
extern const rl_worker_role rl_role_env;

#endif
