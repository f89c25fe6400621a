/* common/image/image.h — image codecs: JPEG sizes (DDPO's compressibility
 * rewards), PNG encoding/decoding (the remote scorer's image format, online
 * test frames), animated GIFs (gray, and RGB for the embodied track's
 * evaluation episodes) and image grids.
 *
 * Images are u8, row-major (H, W, C) with C = 1 (gray) or 3 (RGB). Encoders
 * use Debian's libjpeg-turbo, libpng (simplified API) and giflib.
 *
 * Errors: 0 or a negative rl_status with the message set. A corrupt or
 * truncated PNG is RL_EPROTO "png: <libpng's reason>"; sizes and channel
 * counts are checked before anything is allocated (at most 16384 × 16384).
 * Ownership: *_encode and rl_image_png_decode return malloc'd buffers the
 * caller frees.
 */
#ifndef RLRT_IMAGE_H
#define RLRT_IMAGE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Bytes of the baseline JPEG of the image at `quality` (1..100). */
int rl_image_jpeg_size(const uint8_t *px, int w, int h, int c, int quality, size_t *bytes);

/* The image's ink: the mean of its brightest ceil(n / 10) of n u8 values
 * (0 for n = 0). Dimming an item lowers it, and so does thinning it to a
 * few dots (the tenth then takes in background). */
double rl_image_ink(const uint8_t *px, size_t n);

/* The image with its grey levels scaled by g = clamp(ink / m, 1, max_gain),
 * m = rl_image_ink(px, n), rounded and clipped to
 * 255: an image is brought up to a given ink level, never dimmed (m = 0, a
 * black image, gets max_gain and stays black). px and out hold n u8 values
 * (any channel layout; out may be px); *gain (may be NULL) receives g.
 * The compressibility reward's contrast matching (reward.jpeg_contrast):
 * dimming an item or thinning it to a few dots then saves no bytes. */
void rl_image_match_ink(const uint8_t *px, size_t n, double ink, double max_gain, uint8_t *out,
                        double *gain);

/* PNG of the image (8-bit gray or RGB) into *out (*len bytes). */
int rl_image_png_encode(const uint8_t *px, int w, int h, int c, uint8_t **out, size_t *len);
/* Decodes a PNG into 8-bit pixels with `want_c` channels (1 or 3):
 * *px (h, w, want_c) malloc'd, *w and *h set. */
int rl_image_png_decode(const uint8_t *buf, size_t len, int want_c, uint8_t **px, int *w, int *h);
/* The PNG written atomically to `path`. */
int rl_image_png_write(const char *path, const uint8_t *px, int w, int h, int c);

/* An animated gray GIF of `frames` (frames, h, w) u8 at `delay_cs`
 * hundredths of a second per frame, looping; written atomically. */
int rl_image_gif_write(const char *path, const uint8_t *frames, int n_frames, int w, int h,
                       int delay_cs);
/* An animated RGB GIF of `frames` (frames, h, w, 3) u8, the same way: each
 * frame is reduced to its own palette of at most 256 colours (giflib's
 * median cut, GifQuantizeBuffer, on 5 bits per channel; a local colour
 * table per frame), so a decoded pixel is near, not equal to, the input. */
int rl_image_gif_write_rgb(const char *path, const uint8_t *frames, int n_frames, int w, int h,
                           int delay_cs);

/* Tiles n gray images (n, h, w) into a grid of `cols` columns with a `pad`
 * pixel border of value `bg`: out (rows·(h+pad)+pad, cols·(w+pad)+pad),
 * rows = ceil(n / cols); *gw and *gh receive its size. out NULL: only the size. */
void rl_image_grid(const uint8_t *imgs, int n, int w, int h, int cols, int pad, uint8_t bg,
                   uint8_t *out, int *gw, int *gh);

/* ---- the reward role's image rewards ------------------------------------------------ */

#ifdef __cplusplus
}
#endif
#endif
