/* driver/recipes/libero_common.h — what the LIBERO recipes (libero_collect,
 * flow_warmstart) share on the driver: one round of episodes of the env role
 * (rlrt/roles/env.h) against the rollout's serve_env (rlrt/roles/rollout.h).
 *
 * Ownership: results[r] receive the env ranks' interact replies (the
 * caller's, rl_dataproto_free); groups and the driver are borrowed. */
#ifndef RLRT_DRIVER_LIBERO_COMMON_H
#define RLRT_DRIVER_LIBERO_COMMON_H

#include <stdint.h>

#include "rlrt/rlrt.h"
#include "rlrt/runtime/driver.h"

/* Env rank r opens its channel, rollout rank r serves it (meta round,
 * greedy, record 0; init_model first when `init_model`: the policy of
 * model.init_from) and every env runs T policy calls from a reset whose
 * initial states the round picks. (*results)[0..E) get the interact
 * replies. */
int rl_libero_round(rl_driver *d, rl_group *genv, rl_group *groll, int64_t T, int64_t round,
                    int greedy, int init_model, rl_dataproto ***results);

#endif
