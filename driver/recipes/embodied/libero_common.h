/* driver/recipes/embodied/libero_common.h — what the LIBERO recipes (libero_collect,
 * flow_warmstart, libero_rl) share on the driver: one round of episodes of the env role
 * (workers/env/env.h) against the rollout's serve_env (workers/rollout/rollout.h).
 *
 * Ownership: results[r] receive the env ranks' interact replies (the
 * caller's, rl_dataproto_free); groups and the driver are borrowed. */
#ifndef RLRT_DRIVER_LIBERO_COMMON_H
#define RLRT_DRIVER_LIBERO_COMMON_H

#include <stdint.h>

#include "rlrt/dataproto.h"
#include "rlrt/runtime/driver.h"
#include "driver/recipes/embodied/libero_gif.h" /* the evaluations' GIFs */

/* Env rank r opens its channel, rollout rank r serves it (meta round,
 * greedy: the ODE from each row's initial noise, else the flow SDE;
 * record) and every env runs T policy calls. An `ungrouped` round (an
 * evaluation): with env.group_size > 1 the envs of a task take distinct
 * initial states; init_model first when `init_model`: the policy of
 * model.init_from) and every env runs T policy calls from a reset whose
 * initial states the round picks. (*results)[0..E) get the interact
 * replies; with `records` non-NULL the rollout records its samples and
 * records[0..E) get the serve_env replies (record 0 otherwise). On error the
 * entries taken so far are the caller's to free. */
int rl_libero_round(rl_driver *d, rl_group *genv, rl_group *groll, int64_t T, int64_t round,
                    int greedy, int ungrouped, int init_model, rl_dataproto ***results,
                    rl_dataproto **records);

#endif
