/* selftest.c — the selftest recipe's section (common/schema/selftest.h). */
#include "common/schema/selftest.h"

#include <string.h>

#include "rlrt/error.h"

/* The list node n of two different role names into out[2]. */
static int s_role_pair(const rl_config_node *n, const char **out)
{
    size_t len = rl_config_node_len(n);
    if (len != 2)
        return rl_config_node_error(n, RL_ECONFIG, "expected two role names, got %zu", len);
    for (size_t i = 0; i < 2; i++) {
        const rl_config_node *item = rl_config_node_item(n, i);
        int rc = rl_config_node_string(item, &out[i]);
        if (rc)
            return rc;
        if (!*out[i])
            return rl_config_node_error(item, RL_ECONFIG, "expected a role name");
    }
    if (strcmp(out[0], out[1]) == 0)
        return rl_config_node_error(rl_config_node_item(n, 1), RL_ECONFIG,
                                    "the two roles must differ, got '%s' twice", out[0]);
    return RL_OK;
}

static int s_check(const rl_config *c, void *out)
{
    (void)c;
    rl_selftest_config *o = out;
    int rc = s_role_pair(o->weight_roles, o->weight_pair);
    return rc ? rc : s_role_pair(o->channel_roles, o->channel_pair);
}

#define RL_CFG_DEFINE rl_selftest_section, rl_selftest_config, "common/schema/selftest.def", s_check, \
    "selftest", "The cluster check: every dispatch mode, errors, overlap, collectives, the weight and data channels on every started role.", \
    "the driver"
#include "common/schema/section.inc"
