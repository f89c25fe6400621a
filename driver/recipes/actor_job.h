/* driver/recipes/actor_job.h — the actor (and rollout, reward) groups of a
 * recipe that trains one model with the actor role's optimiser methods
 * (the diffusion and embodied tracks): models on every rank, the FSDP
 * communicator, the actor → rollout weight sync, checkpoint restore with
 * the weight version carried on, and one optimiser step with its replies
 * summed.
 *
 * Ownership: rl_actor_job_open() fills a caller's struct whose resources
 * rl_actor_job_close() frees; groups and the job are the driver's.
 */
#ifndef RLRT_DRIVER_RECIPES_ACTOR_JOB_H
#define RLRT_DRIVER_RECIPES_ACTOR_JOB_H

#include "driver/recipes/phases.h"
#include "workers/actor/actor.h"

typedef struct rl_actor_job {
    rl_driver *d;
    const rl_config *job;
    rl_group *actor, *rollout, *reward; /* rollout/reward NULL when not used */
    rl_actor_config actor_cfg;
    rl_weight_sync sync;                /* actor → rollout */
} rl_actor_job;

/* Groups (rollout when `with_rollout`, reward when `with_reward`), models on
 * every rank (actor ranks join one FSDP communicator), first weight sync. */
int rl_actor_job_open(rl_actor_job *j, rl_driver *d, const rl_config *job, int with_rollout, int with_reward);
void rl_actor_job_close(rl_actor_job *j);
int rl_actor_job_sync_weights(rl_actor_job *j);
/* Restores checkpoint `want` of t (-1: the newest; > 0: that step) into
 * j's actor, carries the saved "weight_version" (checkpoint extra) into the
 * sync so versions keep rising, and syncs the weights to the rollout.
 * *start = 0 (nothing restored) syncs nothing. extra_out (may be NULL)
 * receives the checkpoint's extra object when one was restored (the
 * caller's reference; NULL otherwise). */
int rl_actor_job_restore(rl_actor_job *j, rl_trainer *t, int64_t want, int64_t *start, json_t **extra_out);

/* One optimiser step: `method` on the actor ranks (dp_compute) with `req`
 * (borrowed); the replies' RL_ACTOR_M_* partial sums added over the ranks
 * into sums[0..n) for keys[0..n); grad norm and lr from rank 0. */
int rl_actor_job_actor_step(rl_actor_job *j, const char *method, rl_dataproto *req, const char *const *keys,
                     int n, double *sums, double *grad_norm, double *lr);

/* `actor.optim.total_training_steps: -1` becomes trainer.total_steps ×
 * updates_per_step; the model and actor sections are checked (a recipe
 * with the actor's diffusion keys checks them itself). */
int rl_actor_job_prepare(rl_config *job, int64_t updates_per_step);

#endif
