/* driver/recipes/diffusion/diffusion_fid.h — the held-out image quality of
 * the diffusion recipe's validation (issue 44): an FID for Fashion-MNIST and
 * the judgement of a convolutional classifier that no run trains against.
 *
 *   val/fid              the squared Fréchet distance (common/metrics/frechet.h)
 *                        between Gaussians fitted to the features of an
 *                        image_cnn (data.fid_model; common/nn/models/image_cnn.h,
 *                        its F hidden units after ReLU) of the validation's
 *                        samples and of the first data.fid_real images of the
 *                        Fashion-MNIST test split
 *   val/fid_floor        the same for as many real images as samples (the
 *                        first of the train split): the distance a perfect
 *                        generator would be measured at with this sample
 *                        count (the estimate is biased upwards for few samples)
 *   val/cnn_on_prompt    the CNN's argmax is the prompt's class (mean over samples)
 *   val/cnn_prompt_match the CNN's probability of the prompt's class (mean)
 *
 * Samples are the final latents' first frames clamped to [−1, 1] (what the
 * PNGs show); real images are [−1, 1] as rl_clip_build makes them. The
 * reference statistics are computed once, when the state is opened.
 *
 * Ownership: rl_diffusion_fid owns its model and statistics
 * (rl_diffusion_fid_close frees them; closing a zeroed state is a no-op).
 * Errors are rl_status codes with the message set. */
#ifndef RLRT_DRIVER_DIFFUSION_FID_H
#define RLRT_DRIVER_DIFFUSION_FID_H

#include <stdint.h>

#include "common/metrics/metrics.h"
#include "rlrt/nn/model.h"

typedef struct rl_diffusion_fid {
    rl_model *cnn; /* NULL: off */
    int F;
    double *mu, *cov; /* (F), (F, F): the reference */
    double floor;
    int64_t floor_n; /* the sample count val/fid_floor was measured with */
} rl_diffusion_fid;

/* Loads the image_cnn at model_dir (RL_EINVAL naming it when it is another
 * kind), the reference statistics of the first `real` test images of the
 * Fashion-MNIST at fmnist_dir, and the floor for `samples` images. */
int rl_diffusion_fid_open(rl_diffusion_fid *f, const char *model_dir, const char *fmnist_dir, int64_t real,
                          int64_t samples);
/* The metrics above of n images (n, 784) (clamped here, in place) with their
 * prompt ids (n), put into ms. */
int rl_diffusion_fid_measure(rl_diffusion_fid *f, float *images, const int32_t *prompt, int64_t n,
                             rl_metric_set *ms);
void rl_diffusion_fid_close(rl_diffusion_fid *f);

/* The features' statistics of n images (n, 784): mu (F), cov (F, F). */
int rl_diffusion_fid_stats(rl_diffusion_fid *f, const float *images, int64_t n, double *mu, double *cov);

#endif
