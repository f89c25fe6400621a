/* common/nn/models/image_cnn.h — the convolutional image classifier kind of
 * rl_model (model.type: image_cnn): the feature network of the diffusion
 * track's FID (val/fid: common/metrics/frechet.h over its features) and a
 * judge of another architecture than the MLP scorer (image_classifier.h).
 * Trained like the scorer (the scorer_train recipe: the actor's sft_step on
 * (image, label) rows; examples/fmnist_cnn.yaml), saved and loaded like any
 * model.
 *
 * Network (rows independent; kernels in common/nn/engine/ops_conv.h):
 *   a1 = conv1(x)  3×3, padding 1, C → c1     h1 = relu(a1)   p1 = maxpool2(h1)
 *   a2 = conv2(p1) 3×3, padding 1, c1 → c2    h2 = relu(a2)   p2 = maxpool2(h2)
 *   a3 = fc(flatten(p2))  c2·(H/4)·(W/4) → F  f = relu(a3)    logits = out(f)  F → classes
 * The features are f (F = model.hidden_size): the penultimate layer, as
 * the FID's Inception pool3. Names: conv1, conv2 (".weight" (out, in, 3, 3)
 * stored as the 2-D view (out, in·9), ".bias"), fc, out (".weight" (out,
 * in) / ".bias"): PyTorch's Conv2d/Linear layouts.
 *
 * Batch layout and quantities: those of image_classifier.h (RL_IC_IMAGES
 * (B, C·H·W) f32 finite, RL_IC_LABELS (B) i32; RL_Q_LOGP, K = 1).
 * sample() is RL_EUNSUPPORTED.
 *
 * Device: rl_model_to_device moves it (model_device.h): the network runs
 * through the device's kernel table with its activations there; each
 * forward copies the images in and the logits out (rl_image_cnn_features
 * the features), the log-softmax and the loss stay on the host, as
 * image_classifier. Its CUDA kernels have run on the host emulation of
 * CUDA only, not yet on a GPU.
 *
 * Config: model.channels/height/width (height and width at least 4),
 * model.num_classes, model.hidden_size (F) and model.conv1_channels /
 * model.conv2_channels (common/schema/image_models.h).
 */
#ifndef RLRT_NN_IMAGE_CNN_H
#define RLRT_NN_IMAGE_CNN_H

#include "rlrt/nn/model.h"

#ifdef __cplusplus
extern "C" {
#endif

extern const rl_model_kind rl_model_kind_image_cnn;

/* F, the features per image of an image_cnn model; 0 for another kind. */
int rl_image_cnn_feature_dim(const rl_model *m);
/* feats (n, F) = the features f of images (n, C·H·W) (finite: RL_ENUMERIC
 * naming the image otherwise); RL_EINVAL for another kind. */
int rl_image_cnn_features(rl_model *m, int64_t n, const float *images, float *feats);

/* Its dimensions and class probabilities: rl_image_model_dim, _classes and
 * _probs (common/nn/models/image_net.h), shared with image_classifier. */

#ifdef __cplusplus
}
#endif
#endif
