/* driver/recipes/diffusion/diffusion_common.h — what the diffusion-track
 * recipes (scorer_train, flow_pretrain, diffusion) share on the driver:
 * the Fashion-MNIST data section and batches. The actor/rollout job they
 * run on is driver/recipes/actor_job.h.
 *
 * The role contracts (rlrt/roles/{actor,rollout,reward}.h) and the model
 * kinds' layouts (common/nn/models/clip_flow.h, common/nn/models/image_classifier.h) name
 * every method, tensor and argument used here.
 *
 * Ownership: rl_actor_job_open() fills a caller's struct whose resources
 * rl_actor_job_close() frees; groups and the job are the driver's.
 */
#ifndef RLRT_DRIVER_DIFFUSION_COMMON_H
#define RLRT_DRIVER_DIFFUSION_COMMON_H

#include "driver/recipes/actor_job.h"
#include "common/data/clips.h"
#include "common/nn/models/clip_flow.h"
#include "common/nn/models/image_classifier.h"
#include "workers/actor/actor.h"
#include "workers/reward/reward.h"
#include "workers/rollout/rollout.h"

/* The data section of the pretraining recipes. */
#define RL_DJ_DATA_DEFAULTS \
    "data:\n" \
    "  dir: " RL_FMNIST_DIR "   # Debian's dataset-fashion-mnist\n" \
    "  train_limit: 0          # first N training images (0: all 60000)\n" \
    "  train_batch_size: 128\n"

/* B training rows of step `step`: images of Fashion-MNIST drawn by Philox
 * (seed, step), as clips of `frames` → clips (B, frames·784) f32 and labels
 * (B) (caller's buffers). */
int rl_fmnist_draw(const rl_fmnist *d, uint64_t seed, int64_t step, int64_t B, int frames,
               float *clips, int32_t *labels);

#endif
