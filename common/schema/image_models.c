/* image_models.c — the model sections of the diffusion track's kinds
 * (common/schema/image_models.h). */
#include "common/schema/image_models.h"

#include "rlrt/error.h"

#define RL_CFG_DEFINE rl_image_size_section, rl_image_size_config, "common/schema/image_size.def", NULL, \
    "model (image size)", "The size of one image (a clip's frame).", \
    "the actor, rollout and reward ranks (clip_flow, image_classifier); the driver"
#include "common/schema/section.inc"

static int s_clip_flow_check(const rl_config *c, void *out)
{
    const rl_clip_flow_model_config *m = out;
    if (m->time_embed_dim % 2)
        return RL_CFG_ERROR(c, &rl_clip_flow_model_section, rl_clip_flow_model_config, time_embed_dim,
                            RL_ECONFIG, "must be even (sin and cos halves), got %lld",
                            (long long)m->time_embed_dim);
    const rl_image_size_config *sz = rl_config_section_get(c, &rl_image_size_section);
    if (!sz)
        return rl_error_code();
    int64_t floats = m->frames * sz->channels * sz->height * sz->width;
    if (floats > (1 << 22)) {
        const char *const keys[] = {
            RL_CFG_PATH(&rl_clip_flow_model_section, rl_clip_flow_model_config, frames),
            RL_CFG_PATH(&rl_image_size_section, rl_image_size_config, channels),
            RL_CFG_PATH(&rl_image_size_section, rl_image_size_config, height),
            RL_CFG_PATH(&rl_image_size_section, rl_image_size_config, width), NULL};
        return rl_config_error_among(c, keys, RL_ECONFIG,
                                     "a clip of %lld floats (%s %lld x %s %lld x %s %lld x %s %lld) is "
                                     "more than 2^22", (long long)floats, keys[0], (long long)m->frames,
                                     keys[1], (long long)sz->channels, keys[2], (long long)sz->height,
                                     keys[3], (long long)sz->width);
    }
    if (!m->null_prompt && (m->cfg_dropout > 0 || m->guidance != 1.0)) {
        const char *const keys[] = {
            RL_CFG_PATH(&rl_clip_flow_model_section, rl_clip_flow_model_config, null_prompt),
            RL_CFG_PATH(&rl_clip_flow_model_section, rl_clip_flow_model_config, cfg_dropout),
            RL_CFG_PATH(&rl_clip_flow_model_section, rl_clip_flow_model_config, guidance), NULL};
        return rl_config_error_among(c, keys, RL_ECONFIG,
                                     "%s %g and %s %g need the null prompt: set %s true", keys[1],
                                     m->cfg_dropout, keys[2], m->guidance, keys[0]);
    }
    if (m->trunk == RL_CLIP_FLOW_TRUNK_CONV && (sz->height % 4 || sz->width % 4)) {
        const char *const keys[] = {
            RL_CFG_PATH(&rl_clip_flow_model_section, rl_clip_flow_model_config, trunk),
            RL_CFG_PATH(&rl_image_size_section, rl_image_size_config, height),
            RL_CFG_PATH(&rl_image_size_section, rl_image_size_config, width), NULL};
        return rl_config_error_among(c, keys, RL_ECONFIG,
                                     "%s conv halves the image twice: %s %lld and %s %lld must be "
                                     "multiples of 4", keys[0], keys[1], (long long)sz->height, keys[2],
                                     (long long)sz->width);
    }
    return RL_OK;
}

#define RL_CFG_DEFINE rl_clip_flow_model_section, rl_clip_flow_model_config, "common/schema/clip_flow_model.def", s_clip_flow_check, \
    "model (clip_flow)", "The rectified-flow clip generator of the diffusion track (model.type clip_flow).", \
    "the actor and rollout ranks; the driver"
#include "common/schema/section.inc"

#define RL_CFG_DEFINE rl_image_classifier_model_section, rl_image_classifier_model_config, "common/schema/image_classifier_model.def", NULL, \
    "model (image_classifier)", "The learned prompt-match scorer (model.type image_classifier): an MLP over the first frame.", \
    "the actor ranks (scorer_train), the reward ranks (scorer_path, judge_path)"
#include "common/schema/section.inc"

static int s_cnn_check(const rl_config *c, void *out)
{
    (void)out;
    const rl_image_size_config *sz = rl_config_section_get(c, &rl_image_size_section);
    if (!sz)
        return rl_error_code();
    if (sz->height < 4 || sz->width < 4) {
        const char *const keys[] = {RL_CFG_PATH(&rl_image_size_section, rl_image_size_config, height),
                                    RL_CFG_PATH(&rl_image_size_section, rl_image_size_config, width), NULL};
        return rl_config_error_among(c, keys, RL_ECONFIG,
                                     "an image_cnn pools twice by 2: %s and %s must be at least 4, got %lld x %lld",
                                     keys[0], keys[1], (long long)sz->height, (long long)sz->width);
    }
    return RL_OK;
}

#define RL_CFG_DEFINE rl_image_cnn_model_section, rl_image_cnn_model_config, "common/schema/image_cnn_model.def", s_cnn_check, \
    "model (image_cnn)", "The convolutional image classifier (model.type image_cnn): the feature network of val/fid and a judge of another architecture than the MLP scorer; trained on the scorer's split, a convolutional prompt-match scorer.", \
    "the actor ranks (scorer_train), the driver (diffusion: data.fid_model), the reward ranks (scorer_path, judge_path)"
#include "common/schema/section.inc"
