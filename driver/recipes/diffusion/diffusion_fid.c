/* diffusion_fid.c — val/fid and the CNN's judgement of the diffusion
 * recipe's validation (see driver/recipes/diffusion/diffusion_fid.h). */
#include "driver/recipes/diffusion/diffusion_fid.h"

#include <stdlib.h>
#include <string.h>

#include "common/data/clips.h"
#include "common/metrics/frechet.h"
#include "common/nn/models/image_cnn.h"
#include "common/nn/models/image_net.h"
#include "rlrt/error.h"

#define S_PIX (RL_FMNIST_SIDE * RL_FMNIST_SIDE)

int rl_diffusion_fid_stats(rl_diffusion_fid *f, const float *images, int64_t n, double *mu, double *cov)
{
    float *feats = malloc(sizeof(float) * (size_t)(n * f->F));
    int rc = feats ? rl_image_cnn_features(f->cnn, n, images, feats)
                   : rl_error_set(RL_ENOMEM, "FID: out of memory for %lld features", (long long)n);
    if (!rc)
        rc = rl_frechet_stats(feats, n, f->F, mu, cov);
    free(feats);
    return rc;
}

/* The statistics of the first n images of a split. */
static int s_split_stats(rl_diffusion_fid *f, const char *dir, const char *split, int64_t n, double *mu,
                         double *cov)
{
    rl_fmnist *d = rl_fmnist_load(dir, split, n);
    float *x = d ? malloc(sizeof(float) * (size_t)(d->n * S_PIX)) : NULL;
    int rc = !d ? rl_error_code() : !x ? rl_error_set(RL_ENOMEM, "FID: out of memory") : RL_OK;
    if (!rc && d->n < n)
        rc = rl_error_set(RL_EINVAL, "FID: the %s split has %lld images, fewer than %lld", split,
                          (long long)d->n, (long long)n);
    for (int64_t i = 0; !rc && i < n; i++)
        rc = rl_clip_build(d, i, 1, 0, 0, x + i * S_PIX);
    if (!rc)
        rc = rl_diffusion_fid_stats(f, x, n, mu, cov);
    free(x);
    rl_fmnist_free(d);
    return rc;
}

int rl_diffusion_fid_open(rl_diffusion_fid *f, const char *model_dir, const char *fmnist_dir, int64_t real,
                          int64_t samples)
{
    memset(f, 0, sizeof *f);
    if (!(f->cnn = rl_model_load_dir(model_dir)))
        return rl_error_wrap(rl_error_code(), "FID: the feature network %s", model_dir);
    f->F = rl_image_cnn_feature_dim(f->cnn);
    if (!f->F || rl_image_model_dim(f->cnn) != S_PIX || rl_image_model_classes(f->cnn) != RL_FMNIST_CLASSES) {
        int rc = rl_error_set(RL_EINVAL, "FID: %s is a %s of %lld inputs and %d classes; the FID needs an "
                                         "image_cnn of 1 x 28 x 28 images and %d classes "
                                         "(examples/fmnist_cnn.yaml)",
                              model_dir, f->cnn->ops->kind, (long long)rl_image_model_dim(f->cnn),
                              rl_image_model_classes(f->cnn), RL_FMNIST_CLASSES);
        rl_diffusion_fid_close(f);
        return rc;
    }
    size_t F = (size_t)f->F;
    f->mu = malloc(sizeof(double) * F);
    f->cov = malloc(sizeof(double) * F * F);
    double *mu = malloc(sizeof(double) * F), *cov = malloc(sizeof(double) * F * F);
    int rc = f->mu && f->cov && mu && cov ? RL_OK : rl_error_set(RL_ENOMEM, "FID: out of memory");
    if (!rc)
        rc = s_split_stats(f, fmnist_dir, "t10k", real, f->mu, f->cov);
    if (!rc && !(rc = s_split_stats(f, fmnist_dir, "train", samples, mu, cov)))
        rc = rl_frechet_distance(mu, cov, f->mu, f->cov, f->F, &f->floor);
    f->floor_n = samples;
    free(mu);
    free(cov);
    if (rc)
        rl_diffusion_fid_close(f);
    return rc;
}

int rl_diffusion_fid_measure(rl_diffusion_fid *f, float *images, const int32_t *prompt, int64_t n,
                             rl_metric_set *ms)
{
    size_t F = (size_t)f->F;
    double *mu = malloc(sizeof(double) * F), *cov = malloc(sizeof(double) * F * F);
    float *p = malloc(sizeof(float) * (size_t)n * RL_FMNIST_CLASSES);
    int rc = mu && cov && p ? RL_OK : rl_error_set(RL_ENOMEM, "FID: out of memory");
    for (int64_t i = 0; i < n * S_PIX; i++)
        images[i] = images[i] < -1.0f ? -1.0f : images[i] > 1.0f ? 1.0f : images[i];
    double fid = 0, on = 0, match = 0;
    if (!rc && !(rc = rl_diffusion_fid_stats(f, images, n, mu, cov)))
        rc = rl_frechet_distance(mu, cov, f->mu, f->cov, f->F, &fid);
    if (!rc)
        rc = rl_image_model_probs(f->cnn, n, images, p);
    for (int64_t i = 0; !rc && i < n; i++) {
        const float *pi = p + i * RL_FMNIST_CLASSES;
        int arg = 0;
        for (int k = 1; k < RL_FMNIST_CLASSES; k++)
            arg = pi[k] > pi[arg] ? k : arg;
        on += arg == prompt[i];
        match += pi[prompt[i]];
    }
    if (!rc) {
        rl_metric_set_put(ms, "val/fid", fid);
        rl_metric_set_put(ms, "val/fid_floor", f->floor);
        rl_metric_set_put(ms, "val/cnn_on_prompt", on / (double)n);
        rl_metric_set_put(ms, "val/cnn_prompt_match", match / (double)n);
    }
    free(mu);
    free(cov);
    free(p);
    return rc;
}

void rl_diffusion_fid_close(rl_diffusion_fid *f)
{
    rl_model_free(f->cnn);
    free(f->mu);
    free(f->cov);
    memset(f, 0, sizeof *f);
}
