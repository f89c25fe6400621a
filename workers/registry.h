/* workers/registry.h — the roles rl-worker serves: one table of method
 * tables, looked up by the name given with --role.
 *
 * Purpose: the runtime knows no role names; this table is the one place
 * that maps a name to a role's rl_worker_role (its methods, init and fini).
 * Adding a role is one file with its table plus one line here.
 *
 * Invariants: names are unique and match cluster.yaml role names
 * ([a-z][a-z0-9_]*). Ownership: everything is static and read-only.
 */
#ifndef RLRT_WORKERS_REGISTRY_H
#define RLRT_WORKERS_REGISTRY_H

#include <stddef.h>

#include "rlrt/runtime/worker.h"

/* The registered roles, in table order, NULL-terminated. */
extern const rl_worker_role *const rl_worker_roles[];

/* The role called `name`, or NULL. */
const rl_worker_role *rl_worker_role_find(const char *name);

/* The methods of role `name` that are retry-safe (stateless, idempotent:
 * the driver may run them again on a restarted worker when the worker dies
 * during the call), NULL-terminated; never NULL. The declaration is data
 * here, beside the table, so the runtime knows no role names. */
const char *const *rl_worker_role_retry_safe(const char *name);

/* "rollout, actor, reward": the registered names for messages. Always
 * NUL-terminates buf (size > 0); returns buf. */
const char *rl_worker_role_names(char *buf, size_t size);

#endif
