/* common/schema/image_models.h — the model sections of the diffusion
 * track's kinds (common/nn/models/{clip_flow,image_classifier,image_cnn}.h): the
 * image size both have, then each kind's network. A kind's sections are
 * rl_model_base_section, rl_image_size_section and its own
 * (rl_model_kind.sections); the keys of the two kinds' own sections that
 * share a path (model.hidden_size) are alternatives no job combines. */
#ifndef RLRT_SCHEMA_IMAGE_MODELS_H
#define RLRT_SCHEMA_IMAGE_MODELS_H

#include <stddef.h>
#include <stdint.h>

#include "rlrt/config.h"

typedef struct rl_image_size_config {
#define X RL_CFG_FIELD
#include "common/schema/image_size.def"
#undef X
} rl_image_size_config;

extern const rl_config_section rl_image_size_section;

/* clip_flow: the rectified-flow clip generator. Its check: time_embed_dim
 * even, a clip (frames·C·H·W) at most 2^22 floats. */

typedef struct rl_clip_flow_model_config {
#define X RL_CFG_FIELD
#include "common/schema/clip_flow_model.def"
#undef X
} rl_clip_flow_model_config;

/* model.prediction */
#define RL_CLIP_FLOW_PREDICT_VELOCITY 0
#define RL_CLIP_FLOW_PREDICT_X0 1
/* model.trunk */
#define RL_CLIP_FLOW_TRUNK_MLP 0
#define RL_CLIP_FLOW_TRUNK_CONV 1

extern const rl_config_section rl_clip_flow_model_section;

/* image_classifier: the learned prompt-match scorer. */

typedef struct rl_image_classifier_model_config {
#define X RL_CFG_FIELD
#include "common/schema/image_classifier_model.def"
#undef X
} rl_image_classifier_model_config;

extern const rl_config_section rl_image_classifier_model_section;

/* image_cnn: the convolutional classifier (the FID's feature network). Its
 * sections are the image size, image_classifier's (num_classes, and
 * hidden_size: its features) and this one. Its check: height and width at
 * least 4 (two 2x2 poolings). */

typedef struct rl_image_cnn_model_config {
#define X RL_CFG_FIELD
#include "common/schema/image_cnn_model.def"
#undef X
} rl_image_cnn_model_config;

extern const rl_config_section rl_image_cnn_model_section;

#endif
