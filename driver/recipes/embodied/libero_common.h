/* driver/recipes/embodied/libero_common.h — what the LIBERO recipes (libero_collect,
 * flow_warmstart, libero_rl) share on the driver: one round of episodes of the env role
 * (workers/env/env.h) against the rollout's serve_env (workers/rollout/rollout.h).
 *
 * Ownership: the replies of a round are the caller's (rl_libero_replies_free);
 * groups are borrowed. */
#ifndef RLRT_DRIVER_LIBERO_COMMON_H
#define RLRT_DRIVER_LIBERO_COMMON_H

#include <stdint.h>

#include "rlrt/dataproto.h"
#include "rlrt/runtime/driver.h"
#include "common/batch/episodes.h"
#include "common/schema/env.h"
#include "common/schema/flow_rl.h"
#include "driver/recipes/embodied/libero_gif.h" /* the evaluations' GIFs */

typedef struct rl_libero_replies {
    rl_dataproto **env; /* (E) the env ranks' interact replies */
    rl_dataproto **rec; /* (E) the rollout ranks' serve_env records; NULL when not recorded */
    int E;
} rl_libero_replies;

/* Env rank r opens its channel, rollout rank r serves it (meta round,
 * greedy: the ODE from each row's initial noise, else the flow SDE;
 * record) and every env runs T policy calls from a reset whose initial
 * states the round picks. An `ungrouped` round (an evaluation): with
 * env.group_size > 1 the envs of a task take distinct initial states; a
 * `heldout` round (an evaluation): with env.heldout_init_states H > 0 the
 * resets start from each task's last H initial states, else from the
 * others (workers/env/env.h);
 * init_model first when `init_model` (the policy of model.init_from). With
 * `record` the rollout records its samples (out->rec). On error nothing is
 * left to free. */
int rl_libero_round(rl_group *genv, rl_group *groll, int64_t T, int64_t round, int greedy, int ungrouped,
                    int heldout, int init_model, int record, rl_libero_replies *out);
void rl_libero_replies_free(rl_libero_replies *r);

/* The embodied batch's columns (common/batch/episodes.h) as the env, rollout,
 * actor and flow RL contracts name them. */
extern const rl_episode_cols rl_libero_cols;

/* Greedy evaluation rounds 0, 1, … (the ODE; ungrouped: with
 * env.group_size > 1 the envs of a task take distinct initial states;
 * held-out: with env.heldout_init_states H > 0 only a task's last H
 * initial states, which training never starts from), their episodes
 * counted into t:
 *   per_task > 0  libero_rl: the rounds rl_episode_eval_rounds gives, the
 *                 first per_task initial states of every task (of its
 *                 held-out ones, cycled when per_task > H)
 *   per_task 0    flow_warmstart: until `limit` episodes, the envs in
 *                 order (each round logged), or `d` is interrupted
 * and GIFs of their first episodes of each task (rl_libero_eval_gifs) in
 * gifs/<gif_tag>, or gifs/step_<gif_step> (gif_tag NULL and gif_step < 0:
 * none). */
int rl_libero_evaluate(rl_driver *d, rl_group *genv, rl_group *groll, const rl_config *job, int64_t per_task,
                       int64_t limit, const char *gif_tag, int64_t gif_step, rl_episode_tally *t);

/* update_flow's request columns for loss type `loss` (workers/flow_rl.h;
 * their count in *n) and its partial sums in the order of RL_FUS_*
 * (common/batch/episodes.h). */
const char *const *rl_libero_update_columns(rl_flow_loss_type loss, int *n);
extern const char *const rl_libero_update_sums[RL_FUS_COUNT];

/* 0, or RL_ECONFIG when the cluster does not pair env rank r with rollout
 * rank r (as many ranks of each), naming `recipe`. */
int rl_libero_paired(rl_group *genv, rl_group *groll, const char *recipe);

/* Policy calls of an episode: ceil(env.max_episode_steps / env.num_action_chunks). */
int64_t rl_libero_chunk_steps(const rl_env_config *env);

#endif
