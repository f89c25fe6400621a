/* common/data/clips.h — image and clip data for the diffusion track (seed 004):
 * Fashion-MNIST read from its IDX files (Debian's dataset-fashion-mnist puts
 * them in /usr/share/datasets/fashion-mnist), the built-in text prompts of
 * its ten classes, and clips [F, C, H, W] built from its images.
 *
 * Clips: F = 1 is the 28×28 image itself. F > 1 is the Moving-MNIST
 * construction: the item, halved to 14×14 (2×2 mean), drifts over a 28×28
 * black canvas with a constant velocity and bounces off the edges; frame f
 * draws it at its position after f moves. Start and velocity are a pure
 * function of (seed, index), so a clip is reproducible anywhere. C = 1.
 *
 * Pixels: u8 0..255 in the files; clips are f32 in [−1, 1] (x/127.5 − 1),
 * the generator's data space.
 *
 * Errors: loading checks magic numbers, counts, sizes, labels < 10 and that
 * the file holds exactly what the header says ("…/train-images-idx3-ubyte.gz:
 * header says 60000 images of 28x28, file ends after 1234 bytes").
 * Ownership: rl_fmnist_load() returns a set freed with rl_fmnist_free();
 * everything else writes into caller buffers.
 */
#ifndef RLRT_CLIPS_H
#define RLRT_CLIPS_H

#include <stdint.h>

#include "common/schema/fmnist.h" /* RL_FMNIST_DIR */

#ifdef __cplusplus
extern "C" {
#endif

#define RL_FMNIST_CLASSES 10
#define RL_FMNIST_SIDE 28
/* the largest per-frame move of a clip's item along x or y, in pixels */
#define RL_CLIP_MAX_SPEED 3

typedef struct rl_fmnist {
    int64_t n;       /* images */
    int rows, cols;  /* 28, 28 */
    uint8_t *pixels; /* (n, rows, cols) */
    uint8_t *labels; /* (n), each < RL_FMNIST_CLASSES */
} rl_fmnist;

/* Reads <dir>/<split>-images-idx3-ubyte[.gz] and <split>-labels-idx1-ubyte[.gz]
 * (split "train" or "t10k"); limit > 0 keeps the first `limit` images.
 * A missing directory or file is RL_ENOTFOUND naming the path and the Debian
 * package that provides it. */
rl_fmnist *rl_fmnist_load(const char *dir, const char *split, int64_t limit);
/* Drops the first `skip` images of d in place (d keeps images skip..n−1, in
 * order): a data split, e.g. the scorer on the first half of the training
 * images and the judge on the second. skip in [0, n): RL_EINVAL otherwise
 * (d unchanged). */
int rl_fmnist_skip(rl_fmnist *d, int64_t skip);
void rl_fmnist_free(rl_fmnist *d);

/* The built-in prompt of class c ("a sneaker"), or NULL outside [0, 10). */
const char *rl_fmnist_prompt(int c);
/* The class of a built-in prompt (exact text), or −1 with RL_ENOTFOUND
 * listing the known prompts. */
int rl_fmnist_prompt_class(const char *prompt);

/* Writes clip `index` of image `img` of d into out (frames, 1, 28, 28) f32
 * in [−1, 1]; frames in [1, 64]. seed and index fix the motion (frames > 1). */
int rl_clip_build(const rl_fmnist *d, int64_t img, int frames, uint64_t seed, uint64_t index,
                  float *out);

/* B training rows of step `step`: images of d drawn by Philox (seed,
 * step), as clips of `frames` (clip index step·1000003 + row) → clips
 * (B, frames·784) f32 and labels (B) (caller's buffers). */
int rl_fmnist_draw(const rl_fmnist *d, uint64_t seed, int64_t step, int64_t B, int frames,
                   float *clips, int32_t *labels);

/* The frame-to-frame consistency of B clips (B, F, S, S) f32, F >= 2
 * (docs/decisions/diffusion-clip-consistency.md): for each clip and each
 * consecutive pair (f, f+1), the Pearson correlation of the two frames' S·S
 * pixels after shifting frame f by the (dx, dy) in [−shift, shift]² that
 * maximises it (pixels shifted in from outside the canvas are −1, the
 * background); a pair where either frame is constant (std < 1e-6) scores 0.
 * *out is the mean over the B·(F−1) pairs, in [−1, 1]: 1 for an item that
 * moves by at most `shift` pixels a frame, low for frames drawn
 * independently. shift in [0, S); RL_EINVAL for F < 2, B < 1, S < 1. */
int rl_clip_frame_consistency(const float *clips, int64_t B, int F, int S, int shift, double *out);

/* f32 [−1, 1] → u8 0..255 (rounded, clamped; NaN → 0) for n values. */
void rl_clip_to_u8(const float *x, int64_t n, uint8_t *out);

#ifdef __cplusplus
}
#endif
#endif
