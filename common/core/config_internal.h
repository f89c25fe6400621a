/* common/core/config_internal.h — what config.c lends the schema reader
 * (config_schema.c): path lookup with config.c's messages, and the slot of
 * a tree's cache of typed sections. Internal to common/core. */
#ifndef RLRT_CORE_CONFIG_INTERNAL_H
#define RLRT_CORE_CONFIG_INTERNAL_H

#include "rlrt/config.h"

/* The node at `path`, or RL_ENOTFOUND / RL_ECONFIG with a located message. */
int rl__config_find(const rl_config *c, const char *path, const rl_config_node **out);

/* The tree's cache (NULL: none) and setting it with its destructor; config.c
 * drops it whenever a value of the tree changes and when the tree is freed. */
void *rl__config_cache(const rl_config *c);
void rl__config_set_cache(const rl_config *c, void *cache, void (*cache_free)(void *));

#endif
