/* registry.c — the table of the roles rl-worker serves (see registry.h). */
#include "workers/registry.h"

#include <stdio.h>
#include <string.h>

#include "workers/roles.h"
#include "workers/reward/reward.h"

const rl_worker_role *const rl_worker_roles[] = {
    &rl_role_rollout,
    &rl_role_actor,
    &rl_role_reward,
    &rl_role_env,
    NULL,
};

/* Retry-safe methods per role. The reward role scores a batch from its
 * columns and the job config alone; rollout and actor hold weights and
 * optimizer state, so re-running their calls on a fresh process would not
 * give the same answer (that needs the step-level recovery). */
static const char *const s_reward_retry_safe[] = {RL_REWARD_COMPUTE, RL_REWARD_IMAGE_COMPUTE, NULL};
static const char *const s_none[] = {NULL};

static const struct {
    const char *role;
    const char *const *methods;
} s_retry_safe[] = {
    {RL_REWARD_ROLE, s_reward_retry_safe},
};

const char *const *rl_worker_role_retry_safe(const char *name)
{
    for (size_t i = 0; name && i < sizeof s_retry_safe / sizeof s_retry_safe[0]; i++)
        if (strcmp(s_retry_safe[i].role, name) == 0)
            return s_retry_safe[i].methods;
    return s_none;
}

const rl_worker_role *rl_worker_role_find(const char *name)
{
    for (size_t i = 0; name && rl_worker_roles[i]; i++)
        if (strcmp(rl_worker_roles[i]->name, name) == 0)
            return rl_worker_roles[i];
    return NULL;
}

const char *rl_worker_role_names(char *buf, size_t size)
{
    size_t n = 0;
    buf[0] = '\0';
    for (size_t i = 0; rl_worker_roles[i] && n + 1 < size; i++)
        n += (size_t)snprintf(buf + n, size - n, "%s%s", i ? ", " : "", rl_worker_roles[i]->name);
    return buf;
}
