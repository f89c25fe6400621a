/* workers/reward/reward.h — contract of the reward role (workers/reward/):
 * its methods, the columns and tensors each takes and returns, and its
 * config section. The recipe and the worker both use these names; the
 * strings appear nowhere else.
 *
 * Config: the reward section (common/schema/reward.h), and for image
 * rewards the reward (image) section (common/schema/reward_image.h), read
 * once at CONFIGURE and checked by rl_reward_config_from_job /
 * rl_image_reward_weights_from_job (common/reward/reward_config.h), which
 * the recipes call before any worker starts.
 *
 * compute_reward (dispatch dp_compute; rows keep their order)
 *   in   columns RL_REWARD_RESPONSE, RL_REWARD_GROUND_TRUTH, RL_REWARD_DATA_SOURCE
 *        (string, B rows); optional tensor RL_REWARD_EXTRA (B) f32 added to the
 *        score (e.g. the AEPO entropy reward); no meta
 *   out  tensors RL_REWARD_SCORE, RL_REWARD_ACCURACY, RL_REWARD_FORMAT (B) f32
 *
 * Image rewards (the diffusion track, seed 004): served when the job has
 * the reward (image) section (the diffusion recipes add it; an LM job does
 * not have it and compute_reward is unchanged). The scorer (reward.scorer_path:
 * up to RL_REWARD_MAX_SCORERS image classifiers, image_classifier MLPs or
 * image_cnns, an ensemble whose class probabilities are averaged; when set,
 * every call also reports on_prompt),
 * the judge (a second classifier trained apart, reported and never scored)
 * and the remote client are made at CONFIGURE.
 * compute_image_reward (dispatch dp_compute; rows keep their order)
 *   in   tensor RL_REWARD_IMAGES (B, C, H, W) f32 in [−1, 1] (the first frame,
 *        finite), column RL_REWARD_PROMPT (string); no meta
 *   out  tensors RL_REWARD_SCORE (B) f32 and, per configured reward, its raw
 *        value (B) f32: RL_REWARD_JPEG_KB (kB of the JPEG; compressibility is
 *        −kB; with reward.jpeg_contrast matched also RL_REWARD_JPEG_KB_MATCHED,
 *        the kB of the contrast-matched image that the score uses) and
 *        RL_REWARD_INK (the mean of the image's brightest tenth of u8 grey
 *        levels, rl_image_ink: dimming and thinning lower it),
 *        RL_REWARD_PROMPT_MATCH (p(class | image)), RL_REWARD_REMOTE;
 *        with a scorer, RL_REWARD_ON_PROMPT (B) f32 1/0: the classifier's
 *        argmax is the prompt's class; with a judge, RL_REWARD_JUDGE_ON_PROMPT
 *        (B) f32 1/0: the same for the judge
 */
#ifndef RLRT_ROLES_REWARD_H
#define RLRT_ROLES_REWARD_H

#include "common/data/data.h"
#include "common/reward/reward_config.h"
#include "common/schema/reward.h"
#include "common/schema/reward_image.h"

#define RL_REWARD_ROLE "reward"

#define RL_REWARD_COMPUTE "compute_reward"

#define RL_REWARD_RESPONSE "response"                 /* decoded response text */
#define RL_REWARD_GROUND_TRUTH RL_DATA_GROUND_TRUTH
#define RL_REWARD_DATA_SOURCE RL_DATA_SOURCE
#define RL_REWARD_EXTRA "extra_reward"
#define RL_REWARD_SCORE "score"
#define RL_REWARD_ACCURACY "accuracy"
#define RL_REWARD_FORMAT "format"

#define RL_REWARD_IMAGE_COMPUTE "compute_image_reward"
#define RL_REWARD_IMAGES "images"
#define RL_REWARD_PROMPT "prompt"
#define RL_REWARD_JPEG_KB "jpeg_kb"
#define RL_REWARD_JPEG_KB_MATCHED "jpeg_kb_matched"
#define RL_REWARD_INK "ink"
#define RL_REWARD_PROMPT_MATCH "prompt_match"
#define RL_REWARD_REMOTE "remote_score"
#define RL_REWARD_ON_PROMPT "on_prompt"
#define RL_REWARD_JUDGE_ON_PROMPT "judge_on_prompt"
#define RL_REWARD_MAX_SCORERS 8

#endif
