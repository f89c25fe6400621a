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

#define RL_SELFTEST_KEYS(X)                                                                         \
    X(INT, rounds, "selftest.rounds", "1", 1, 1000000000, 0, NULL,                                  \
      "repeat every check this many times (the weight version grows per round)")                   \
    X(INT, rows, "selftest.rows", "37", 1, 1 << 20, 0, NULL,                                        \
      "dp_compute batch rows (not a multiple of the ranks)")                                        \
    X(INT, payload_mb, "selftest.payload_mb", "8", 1, 1024, 0, NULL, "size of the echoed payload")  \
    X(INT, sleep_ms, "selftest.sleep_ms", "300", 1, 60000, 0, NULL,                                 \
      "each role sleeps this long at once: the overlap check")                                      \
    X(INT, weight_mb, "selftest.weight_mb", "16", 1, 1024, 0, NULL,                                 \
      "buffer sent over the weight channel")                                                        \
    X(LIST, weight_roles, "selftest.weight_roles", "[actor, rollout]", 0, 0, 0, NULL,               \
      "the weight channel: from rank 0 of the first role to every rank of the second")              \
    X(LIST, channel_roles, "selftest.channel_roles", "[rollout, reward]", 0, 0, 0, NULL,            \
      "the data channel: rank r of one role <-> rank r of the other")                               \
    X(INT, channel_steps, "selftest.channel_steps", "50", 1, 1000000, 0, NULL,                      \
      "ping-pong round trips per pair")

typedef struct rl_selftest_config {
    RL_SELFTEST_KEYS(RL_CFG_FIELD)
    /* derived: the two lists' names */
    const char *weight_pair[2], *channel_pair[2];
} rl_selftest_config;

extern const rl_config_section rl_selftest_section;

#endif
