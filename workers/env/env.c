/* workers/env/env.c — method table of the env role.
 * Training methods of this role arrive with the recipes that need them; until
 * then the role serves the runtime's builtin methods (see workers/roles.h). */
#include "../roles.h"

static const rl_method s_methods[] = {{NULL, NULL}};

const rl_worker_role rl_role_env = {"env", s_methods, NULL, NULL};
