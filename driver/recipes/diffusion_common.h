/* driver/recipes/diffusion_common.h — what the diffusion-track recipes
 * (scorer_train, flow_pretrain, diffusion) share on the driver: the actor
 * (and rollout) groups with their models and FSDP communicator, Fashion-MNIST
 * batches, seeds, one actor optimiser step and reading its replies.
 *
 * The role contracts (rlrt/roles/{actor,rollout,reward}.h) and the model
 * kinds' layouts (rlrt/nn/clip_flow.h, rlrt/nn/image_classifier.h) name
 * every method, tensor and argument used here.
 *
 * Ownership: rl_dj_open() fills a caller's struct whose resources
 * rl_dj_close() frees; groups and the job are the driver's.
 */
#ifndef RLRT_DRIVER_DIFFUSION_COMMON_H
#define RLRT_DRIVER_DIFFUSION_COMMON_H

#include "phases.h"
#include "rlrt/clips.h"
#include "rlrt/nn/clip_flow.h"
#include "rlrt/nn/image_classifier.h"
#include "rlrt/roles/actor.h"
#include "rlrt/roles/reward.h"
#include "rlrt/roles/rollout.h"

typedef struct rl_dj {
    rl_driver *d;
    const rl_config *job;
    rl_group *actor, *rollout, *reward; /* rollout/reward NULL when not used */
    rl_actor_config actor_cfg;
    rl_weight_sync sync;                /* actor → rollout */
} rl_dj;

/* The data section of the pretraining recipes. */
#define RL_DJ_DATA_DEFAULTS \
    "data:\n" \
    "  dir: " RL_FMNIST_DIR "   # Debian's dataset-fashion-mnist\n" \
    "  train_limit: 0          # first N training images (0: all 60000)\n" \
    "  train_batch_size: 128\n"

/* splitmix64. */
uint64_t rl_dj_mix(uint64_t x);

/* Groups (rollout when `with_rollout`, reward when `with_reward`), models on
 * every rank (actor ranks join one FSDP communicator), first weight sync. */
int rl_dj_open(rl_dj *j, rl_driver *d, const rl_config *job, int with_rollout, int with_reward);
void rl_dj_close(rl_dj *j);
int rl_dj_sync_weights(rl_dj *j);
/* Restores checkpoint `want` of t (-1: the newest; > 0: that step) into
 * j's actor, carries the saved "weight_version" (checkpoint extra) into the
 * sync so versions keep rising, and syncs the weights to the rollout.
 * *start = 0 (nothing restored) syncs nothing. extra_out (may be NULL)
 * receives the checkpoint's extra object when one was restored (the
 * caller's reference; NULL otherwise). */
int rl_dj_restore(rl_dj *j, rl_trainer *t, int64_t want, int64_t *start, json_t **extra_out);

/* One optimiser step: `method` on the actor ranks (dp_compute) with `req`
 * (borrowed); the replies' RL_ACTOR_M_* partial sums added over the ranks
 * into sums[0..n) for keys[0..n); grad norm and lr from rank 0. */
int rl_dj_actor_step(rl_dj *j, const char *method, rl_dataproto *req, const char *const *keys,
                     int n, double *sums, double *grad_norm, double *lr);

/* B training rows of step `step`: images of Fashion-MNIST drawn by Philox
 * (seed, step), as clips of `frames` → clips (B, frames·784) f32 and labels
 * (B) (caller's buffers). */
int rl_dj_draw(const rl_fmnist *d, uint64_t seed, int64_t step, int64_t B, int frames,
               float *clips, int32_t *labels);

/* `actor.optim.total_training_steps: -1` becomes trainer.total_steps ×
 * updates_per_step; the model and actor sections are checked. */
int rl_dj_prepare(rl_config *job, int64_t updates_per_step);

/* mkdir -p dir. */
int rl_dj_mkdirs(const char *dir);

#endif
