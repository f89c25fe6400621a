/* workers/roles.h — the method table of each role of rl-worker.
 * Every role also has the runtime's builtin methods (rl_builtin_methods:
 * echo, add, sleep, fail, whoami) used by the selftest recipe. */
#ifndef RLRT_WORKERS_ROLES_H
#define RLRT_WORKERS_ROLES_H

#include "rlrt/runtime/worker.h"

extern const rl_worker_role rl_role_rollout;
extern const rl_worker_role rl_role_actor;
extern const rl_worker_role rl_role_env;
extern const rl_worker_role rl_role_reward;

#endif
