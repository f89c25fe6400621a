/* registry.c — the table of the roles rl-worker serves (see registry.h). */
#include "registry.h"

#include <stdio.h>
#include <string.h>

#include "roles.h"

const rl_worker_role *const rl_worker_roles[] = {
    &rl_role_rollout,
    &rl_role_actor,
    &rl_role_reward,
    &rl_role_env,
    NULL,
};

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
