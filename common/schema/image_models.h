/* common/schema/image_models.h — the model sections of the diffusion
 * track's two kinds (common/nn/models/{clip_flow,image_classifier}.h): the
 * image size both have, then each kind's network. A kind's sections are
 * rl_model_base_section, rl_image_size_section and its own
 * (rl_model_kind.sections); the keys of the two kinds' own sections that
 * share a path (model.hidden_size) are alternatives no job combines. */
#ifndef RLRT_SCHEMA_IMAGE_MODELS_H
#define RLRT_SCHEMA_IMAGE_MODELS_H

#include <stddef.h>
#include <stdint.h>

#include "rlrt/config.h"

#define RL_IMAGE_SIZE_KEYS(X)                                                                       \
    X(INT, channels, "model.channels", "1", 1, 4, 0, NULL, "C: channels of an image (frame)")        \
    X(INT, height, "model.height", "28", 1, 512, 0, NULL, "H: pixels of an image's height")         \
    X(INT, width, "model.width", "28", 1, 512, 0, NULL, "W: pixels of an image's width")

typedef struct rl_image_size_config {
    RL_IMAGE_SIZE_KEYS(RL_CFG_FIELD)
} rl_image_size_config;

extern const rl_config_section rl_image_size_section;

/* clip_flow: the rectified-flow clip generator. Its check: time_embed_dim
 * even, a clip (frames·C·H·W) at most 2^22 floats. */
#define RL_CLIP_FLOW_MODEL_KEYS(X)                                                                  \
    X(INT, frames, "model.frames", "1", 1, 64, 0, NULL, "F: 1 = images, > 1 = moving-item clips")   \
    X(INT, num_prompts, "model.num_prompts", "10", 1, 1 << 20, 0, NULL,                             \
      "rows of the learned prompt table (the built-in prompts)")                                    \
    X(INT, hidden_size, "model.hidden_size", "512", 2, 1 << 14, 0, NULL,                            \
      "width of the residual MLP")                                                                  \
    X(INT, num_layers, "model.num_layers", "3", 0, 64, 0, NULL, "residual blocks")                  \
    X(INT, time_embed_dim, "model.time_embed_dim", "64", 2, 4096, 0, NULL,                          \
      "sinusoidal embedding of sigma (even: sin and cos halves)")                                   \
    X(ENUM, prediction, "model.prediction", "x0", 0, 0, 0, "velocity|x0",                           \
      "what the network outputs: x0 (the clean clip; v follows) or the velocity")

typedef struct rl_clip_flow_model_config {
    RL_CLIP_FLOW_MODEL_KEYS(RL_CFG_FIELD)
} rl_clip_flow_model_config;

/* model.prediction */
#define RL_CLIP_FLOW_PREDICT_VELOCITY 0
#define RL_CLIP_FLOW_PREDICT_X0 1

extern const rl_config_section rl_clip_flow_model_section;

/* image_classifier: the learned prompt-match scorer. */
#define RL_IMAGE_CLASSIFIER_MODEL_KEYS(X)                                                           \
    X(INT, num_classes, "model.num_classes", "10", 2, 1 << 16, 0, NULL, "classes (prompts) it tells apart") \
    X(INT, hidden_size, "model.hidden_size", "256", 1, 1 << 14, 0, NULL,                            \
      "width of the two hidden layers")

typedef struct rl_image_classifier_model_config {
    RL_IMAGE_CLASSIFIER_MODEL_KEYS(RL_CFG_FIELD)
} rl_image_classifier_model_config;

extern const rl_config_section rl_image_classifier_model_section;

#endif
