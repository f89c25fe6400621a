/* workers/reward/reward.c — method table of the reward role.
 * Training methods of this role arrive with the recipes that need them; until
 * then the role serves the runtime's builtin methods (see workers/roles.h). */
#include "../roles.h"

static const rl_method s_methods[] = {{NULL, NULL}};

const rl_worker_role rl_role_reward = {"reward", s_methods, NULL, NULL};
