/* driver/recipes/diffusion/diffusion_images.h — the diffusion recipe's
 * online test images (the seed's rollout.online.test): from the chains of
 * one ODE sample per prompt, a PNG grid of the final samples' first frames,
 * an animated GIF (the clip's frames, or for images the denoising chain),
 * for clips a PNG of strips (a row per sample, its frames left to right) and, from the second call of a run on, before_after.png (the run's first
 * grid above this one). 28-pixel tiles are enlarged 3× to be seen.
 *
 * Ownership: the caller's rl_online_images keeps the run's first grid
 * (before) until rl_online_images_free; a recovery keeps it. */
#ifndef RLRT_DRIVER_DIFFUSION_IMAGES_H
#define RLRT_DRIVER_DIFFUSION_IMAGES_H

#include <stdint.h>

typedef struct rl_online_images {
    uint8_t *before; /* (bh, bw) u8: the first grid of the run, or NULL */
    int bw, bh;
} rl_online_images;

/* Writes <out_dir>/online/step_<step>.png and .gif (F > 1: and
 * step_<step>_frames.png, the strips) and, when `im` holds a
 * first grid of the same width, <out_dir>/before_after.png; else keeps this
 * grid as the first. lat (P, N+1, D) f32: the chains of P samples of
 * F frames of S×S pixels (D = F·S·S), values in [−1, 1]. */
int rl_online_images_write(rl_online_images *im, const char *out_dir, int64_t step, const float *lat,
                           int P, int64_t N, int64_t F, int S);
void rl_online_images_free(rl_online_images *im);

#endif
