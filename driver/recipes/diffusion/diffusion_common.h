/* driver/recipes/diffusion/diffusion_common.h — what the diffusion-track
 * recipes (scorer_train, flow_pretrain, diffusion) share on the driver:
 * their sections read into the recipe's own copies. The actor/rollout job
 * they run on is driver/recipes/actor_job.h, the batch transforms are
 * common/batch/diffusion.h, the config sections common/schema/
 * {diffusion, fmnist, image_models}.h.
 *
 * The role contracts (workers/{actor,rollout,reward}/<role>.h) and the model
 * kinds' layouts (common/nn/models/clip_flow.h, image_classifier.h) name
 * every method, tensor and argument the recipes use.
 */
#ifndef RLRT_DRIVER_DIFFUSION_COMMON_H
#define RLRT_DRIVER_DIFFUSION_COMMON_H

#include "driver/recipes/actor_job.h"
#include "common/data/clips.h"
#include "common/nn/models/clip_flow.h"
#include "common/nn/models/image_classifier.h"
#include "common/nn/models/image_cnn.h"
#include "common/nn/models/image_net.h"
#include "common/schema/diffusion.h"
#include "common/schema/fmnist.h"
#include "common/schema/image_models.h"
#include "common/schema/model.h"
#include "common/schema/trainer.h"
#include "workers/actor/actor.h"
#include "workers/reward/reward.h"
#include "workers/rollout/rollout.h"

/* Copies sections secs[0..n) of the job, as read and checked
 * (rl_config_section_get), into outs[i] (each secs[i]->size bytes). */
int rl_diffusion_read_sections(const rl_config *job, const rl_config_section *const *secs,
                               void *const *outs, int n);

#endif
