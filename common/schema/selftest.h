/* common/schema/selftest.h — the selftest recipe's section
 * (driver/recipes/selftest.c): how long and how hard it checks the
 * cluster, and which pairs of roles the weight channel and the data channel
 * checks use. The check fills the two pairs' names (borrowed from the
 * tree): two different, non-empty role names each. */
#ifndef RLRT_SCHEMA_SELFTEST_H
#define RLRT_SCHEMA_SELFTEST_H

#include <stddef.h>
#include <stdint.h>

#include "rlrt/config.h"

typedef struct rl_selftest_config {
#define X RL_CFG_FIELD
#include "common/schema/selftest.def"
#undef X
    /* derived: the two lists' names */
    const char *weight_pair[2], *channel_pair[2];
} rl_selftest_config;

extern const rl_config_section rl_selftest_section;

#endif
