/* diffusion_images.c — the diffusion recipe's online test images
 * (driver/recipes/diffusion/diffusion_images.h). */
#include "driver/recipes/diffusion/diffusion_images.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/core/util.h"
#include "common/data/clips.h"
#include "common/image/image.h"
#include "rlrt/error.h"

#define S_ZOOM 3
#define S_PAD 2
#define S_BG 64

/* img (h, w) enlarged z times (nearest neighbour), or NULL + a message. */
static uint8_t *s_upscale(const uint8_t *img, int w, int h, int z)
{
    uint8_t *o = malloc((size_t)w * z * (size_t)h * z);
    if (!o) {
        rl_error_set(RL_ENOMEM, "out of memory for a %dx%d image", w * z, h * z);
        return NULL;
    }
    for (int y = 0; y < h * z; y++)
        for (int x = 0; x < w * z; x++)
            o[(size_t)y * w * z + x] = img[(size_t)(y / z) * w + x / z];
    return o;
}

/* The grid (h, w) enlarged, as a gray PNG at `path`. */
static int s_png(const char *path, const uint8_t *grid, int w, int h)
{
    uint8_t *big = s_upscale(grid, w, h, S_ZOOM);
    int rc = big ? rl_image_png_write(path, big, w * S_ZOOM, h * S_ZOOM, 1) : rl_error_code();
    free(big);
    return rc;
}

/* Before above after, when both grids have one width. */
static int s_before_after(const rl_online_images *im, const char *out_dir, const uint8_t *grid, int gw,
                          int gh)
{
    if (im->bw != gw)
        return RL_OK;
    uint8_t *both = malloc((size_t)gw * (size_t)(2 * gh));
    if (!both)
        return RL_OK;
    char path[4300];
    memcpy(both, im->before, (size_t)gw * gh);
    memcpy(both + (size_t)gw * gh, grid, (size_t)gw * gh);
    snprintf(path, sizeof path, "%s/before_after.png", out_dir);
    int rc = s_png(path, both, gw, 2 * gh);
    free(both);
    return rc;
}

/* <dir>/step_<step>_frames.png: P rows of the F frames of each final sample. */
static int s_strips(char *path, size_t len, const char *dir, int64_t step, const float *lat, int P, int64_t N,
                    int64_t F, int S)
{
    int64_t D = F * S * S, n = (int64_t)P * F;
    int gw, gh;
    rl_image_grid(NULL, (int)n, S, S, (int)F, S_PAD, S_BG, NULL, &gw, &gh);
    uint8_t *tiles = malloc((size_t)n * S * S), *grid = malloc((size_t)gw * gh);
    int rc = tiles && grid ? RL_OK : rl_error_set(RL_ENOMEM, "out of memory");
    for (int p = 0; !rc && p < P; p++)
        rl_clip_to_u8(lat + (p * (N + 1) + N) * D, D, tiles + (size_t)p * (size_t)D);
    if (!rc) {
        rl_image_grid(tiles, (int)n, S, S, (int)F, S_PAD, S_BG, grid, &gw, &gh);
        snprintf(path, len, "%s/step_%lld_frames.png", dir, (long long)step);
        rc = s_png(path, grid, gw, gh);
    }
    free(tiles);
    free(grid);
    return rc;
}

int rl_online_images_write(rl_online_images *im, const char *out_dir, int64_t step, const float *lat,
                           int P, int64_t N, int64_t F, int S)
{
    int64_t D = F * S * S, nfr = F > 1 ? F : N + 1; /* GIF frames */
    char dir[4200], path[4300];
    snprintf(dir, sizeof dir, "%s/online", out_dir);
    int gw, gh, rc = RL_OK;
    rl_image_grid(NULL, P, S, S, P, S_PAD, S_BG, NULL, &gw, &gh);
    uint8_t *tiles = malloc((size_t)P * S * S), *frames = malloc((size_t)nfr * (size_t)gw * (size_t)gh);
    uint8_t *grid = malloc((size_t)gw * gh);
    if (!tiles || !frames || !grid)
        rc = rl_error_set(RL_ENOMEM, "out of memory");
    if (!rc)
        rc = rl_mkdir_p(dir);
    for (int64_t f = 0; !rc && f < nfr; f++) {
        for (int p = 0; p < P; p++) {
            /* clip frame f of the sample, or the chain's latent f (its first frame) */
            const float *src = F > 1 ? lat + ((p * (N + 1) + N) * D + f * S * S) : lat + (p * (N + 1) + f) * D;
            rl_clip_to_u8(src, S * S, tiles + (size_t)p * S * S);
        }
        rl_image_grid(tiles, P, S, S, P, S_PAD, S_BG, frames + (size_t)f * gw * gh, &gw, &gh);
    }
    /* the PNG: the first frame of every final sample */
    for (int p = 0; !rc && p < P; p++)
        rl_clip_to_u8(lat + (p * (N + 1) + N) * D, S * S, tiles + (size_t)p * S * S);
    if (!rc) {
        rl_image_grid(tiles, P, S, S, P, S_PAD, S_BG, grid, &gw, &gh);
        snprintf(path, sizeof path, "%s/step_%lld.png", dir, (long long)step);
        rc = s_png(path, grid, gw, gh);
    }
    if (!rc && F > 1) /* the clips as strips: a row per sample, its frames left to right */
        rc = s_strips(path, sizeof path, dir, step, lat, P, N, F, S);
    if (!rc) {
        snprintf(path, sizeof path, "%s/step_%lld.gif", dir, (long long)step);
        rc = rl_image_gif_write(path, frames, (int)nfr, gw, gh, F > 1 ? 20 : 30);
    }
    if (!rc && !im->before) { /* the first grid of the run: "before" */
        im->before = grid;
        im->bw = gw;
        im->bh = gh;
        grid = NULL;
    } else if (!rc) {
        rc = s_before_after(im, out_dir, grid, gw, gh);
    }
    free(grid);
    free(tiles);
    free(frames);
    return rc;
}

void rl_online_images_free(rl_online_images *im)
{
    free(im->before);
    memset(im, 0, sizeof *im);
}
