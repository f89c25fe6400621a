/* common/nn/models/image_classifier.h — the image classifier kind of rl_model
 * (model.type: image_classifier): the learned prompt-match scorer of the
 * diffusion track, the small-scale analogue of HPSv3 (seed 004). It is
 * trained on Fashion-MNIST by the project (the sft_step of the actor role on
 * (image, label) rows), saved and loaded like any model, and served by the
 * reward role: the score of an image for a prompt is the probability of the
 * prompt's class.
 *
 * Network (rows independent): an MLP over the flattened first frame
 *   h1 = silu(fc1(x)), h2 = silu(fc2(h1)), logits = out(h2)    (C·H·W → classes)
 * Names: fc1, fc2, out (".weight" (out, in) / ".bias").
 *
 * Batch layout:
 *   RL_IC_IMAGES  (B, C·H·W) f32   pixels in [−1, 1], finite
 *   RL_IC_LABELS  (B) i32          the class of each row, in [0, classes)
 * RL_Q_LOGP: K = 1, logp[b, 0] = log softmax(logits_b)[label_b]; the
 * supervised step (masked NLL) of the actor trains it unchanged.
 * sample() is RL_EUNSUPPORTED.
 *
 * Device: rl_model_to_device moves it (model_device.h): the three linear
 * layers and SiLUs run through the device's kernel table with the
 * activations there; each forward copies the images in and the logits
 * (n, K) out, the log-softmax, the loss and rl_image_model_probs' softmax
 * stay on the host, and dlogits go back in for the backward.
 *
 * Config: model.channels/height/width and model.num_classes/hidden_size
 * (common/schema/image_models.h). config.json is {"model": {...}}, a job
 * fragment: rl_model_load_dir (nn/model.h) loads it.
 */
#ifndef RLRT_NN_IMAGE_CLASSIFIER_H
#define RLRT_NN_IMAGE_CLASSIFIER_H

#include "rlrt/nn/model.h"

#ifdef __cplusplus
extern "C" {
#endif

#define RL_IC_IMAGES "images"
#define RL_IC_LABELS "labels"

extern const rl_model_kind rl_model_kind_image_classifier;

/* Its dimensions and class probabilities: rl_image_model_dim, _classes and
 * _probs (common/nn/models/image_net.h), shared with image_cnn. */

#ifdef __cplusplus
}
#endif
#endif
