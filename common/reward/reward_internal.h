/* reward_internal.h — helpers shared by the files of common/reward (not
 * exported). */
#ifndef RLRT_REWARD_INTERNAL_H
#define RLRT_REWARD_INTERNAL_H

#include <stddef.h>

/* malloc'd copy of s[0..n) (NULL + RL_ENOMEM on failure). */
char *rl_reward_dup_n(const char *s, size_t n);
/* Index of the '}' matching the '{' at s[open], or (size_t)-1. */
size_t rl_reward_match_brace(const char *s, size_t open);

#endif
