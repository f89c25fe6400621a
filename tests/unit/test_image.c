/* test_image.c — the diffusion track's image helpers: JPEG sizes on known
 * images (the compressibility reward), PNG round trips and corrupt PNGs,
 * GIF files (gray; RGB read back with giflib's decoder), grids, reward specifications, Fashion-MNIST loading and the
 * Moving-MNIST clips, and the image classifier's gradients by finite
 * differences. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>
#include <gif_lib.h>

#include "rlrt/error.h"
#include "common/core/rng.h"
#include "rlrt/dtype.h"
#include "common/nn/engine/ops.h"
#include "rlrt/nn/model.h"
#include "rlrt/tensor.h"
#include "rlrt/dataproto.h"
#include "rlrt/config.h"
#include "common/core/util.h"
#include "common/data/clips.h"
#include "common/image/image.h"
#include "common/reward/image_reward.h"
#include "common/nn/models/image_classifier.h"
#include "common/nn/models/image_net.h"

#define assert_msg_contains(s) \
    do { \
        if (!strstr(rl_error_message(), (s))) \
            fail_msg("message '%s' lacks '%s'", rl_error_message(), (s)); \
    } while (0)

/* ---- JPEG: the DDPO rewards on known images -------------------------------------------- */

static void test_jpeg_known_images(void **state)
{
    (void)state;
    enum { S = 28 };
    uint8_t flat[S * S], checker[S * S], noise[S * S], rgb[S * S * 3];
    rl_rng g;
    rl_rng_init(&g, 42, 0);
    for (int i = 0; i < S * S; i++) {
        flat[i] = 128;
        checker[i] = ((i / S) / 4 + (i % S) / 4) % 2 ? 255 : 0;
        noise[i] = (uint8_t)rl_rng_below(&g, 256);
    }
    for (int i = 0; i < S * S * 3; i++)
        rgb[i] = (uint8_t)rl_rng_below(&g, 256);
    size_t a, b, c, d, a2;
    assert_int_equal(rl_image_jpeg_size(flat, S, S, 1, 95, &a), 0);
    assert_int_equal(rl_image_jpeg_size(checker, S, S, 1, 95, &b), 0);
    assert_int_equal(rl_image_jpeg_size(noise, S, S, 1, 95, &c), 0);
    assert_int_equal(rl_image_jpeg_size(rgb, S, S, 3, 95, &d), 0);
    /* a flat image is mostly headers; structure costs bytes; noise costs most */
    assert_true(a < 500);
    assert_true(a < b && b < c);
    assert_true(c > 700);
    assert_true(d > c);
    /* deterministic, and quality matters */
    assert_int_equal(rl_image_jpeg_size(flat, S, S, 1, 95, &a2), 0);
    assert_int_equal(a, a2);
    assert_int_equal(rl_image_jpeg_size(noise, S, S, 1, 10, &a2), 0);
    assert_true(a2 < c);
    /* bad arguments are named */
    assert_int_equal(rl_image_jpeg_size(flat, S, S, 2, 95, &a), RL_EINVAL);
    assert_int_equal(rl_image_jpeg_size(flat, S, S, 1, 0, &a), RL_EINVAL);
    assert_msg_contains("quality 0");
}

/* reward.jpeg_contrast matched: an image dimmed by half is brought back to
 * its own grey levels (within the rounding of the halving), so dimming saves
 * no bytes; a bright image is never dimmed; black stays black. */
static void test_jpeg_contrast_matched(void **state)
{
    (void)state;
    enum { S = 28, N = S * S };
    uint8_t item[N], dim[N], back[N], out[N];
    for (int i = 0; i < N; i++) { /* a bright bar on black: the top tenth are all 240 */
        int y = i / S, x = i % S;
        item[i] = (x >= 8 && x < 20 && y >= 4 && y < 24) ? (uint8_t)(200 + (x + y) % 41) : 0;
        dim[i] = (uint8_t)(item[i] / 2);
    }
    double g_item, g_dim;
    rl_image_match_ink(item, N, 235.0, 8.0, out, &g_item);
    rl_image_match_ink(dim, N, 235.0, 8.0, back, &g_dim);
    assert_true(g_item >= 1.0 && g_item < 1.05);
    assert_true(g_dim > 1.9 && g_dim < 2.1);
    for (int i = 0; i < N; i++)
        assert_true(abs((int)back[i] - (int)out[i]) <= 6);
    size_t k_item, k_dim, k_back;
    assert_int_equal(rl_image_jpeg_size(out, S, S, 1, 95, &k_item), 0);
    assert_int_equal(rl_image_jpeg_size(dim, S, S, 1, 95, &k_dim), 0);
    assert_int_equal(rl_image_jpeg_size(back, S, S, 1, 95, &k_back), 0);
    assert_true(k_dim < k_item);                               /* dimming alone saves bytes */
    assert_true(labs((long)k_back - (long)k_item) * 20 < (long)k_item); /* matched: within 5% */
    /* never dimmed: the ink level below the image's own leaves it as is */
    rl_image_match_ink(item, N, 50.0, 8.0, out, &g_item);
    assert_true(g_item == 1.0 && memcmp(out, item, N) == 0);
    /* the gain is capped, black stays black, and values clip at 255 */
    uint8_t black[N] = {0}, faint[N];
    for (int i = 0; i < N; i++)
        faint[i] = (uint8_t)(i % 3);
    rl_image_match_ink(black, N, 208.0, 8.0, out, &g_item);
    assert_true(g_item == 8.0 && out[0] == 0 && out[N - 1] == 0);
    rl_image_match_ink(faint, N, 208.0, 8.0, out, &g_item);
    assert_true(g_item == 8.0 && out[2] == 16);
    rl_image_match_ink(item, N, 255.0, 8.0, item, &g_item); /* in place */
    for (int i = 0; i < N; i++)
        assert_true(item[i] == 0 || item[i] >= 200);
    assert_true(g_item > 1.0);
}

/* ---- PNG ---------------------------------------------------------------------------------- */

static void test_png_round_trip_and_corrupt(void **state)
{
    (void)state;
    enum { W = 13, H = 7 };
    uint8_t img[W * H * 3];
    for (int i = 0; i < W * H * 3; i++)
        img[i] = (uint8_t)(i * 37 + 5);
    for (int c = 1; c <= 3; c += 2) {
        uint8_t *buf = NULL, *px = NULL;
        size_t len = 0;
        int w, h;
        assert_int_equal(rl_image_png_encode(img, W, H, c, &buf, &len), 0);
        assert_memory_equal(buf, "\x89PNG\r\n\x1a\n", 8);
        assert_int_equal(rl_image_png_decode(buf, len, c, &px, &w, &h), 0);
        assert_int_equal(w, W);
        assert_int_equal(h, H);
        assert_memory_equal(px, img, (size_t)(W * H * c));
        free(px);
        /* truncated */
        px = NULL;
        assert_int_equal(rl_image_png_decode(buf, len / 2, c, &px, &w, &h), RL_EPROTO);
        assert_msg_contains("png:");
        assert_null(px);
        /* a flipped byte inside the image data (the CRC catches it) */
        buf[len - 20] ^= 0x5a;
        assert_int_equal(rl_image_png_decode(buf, len, c, &px, &w, &h), RL_EPROTO);
        assert_msg_contains("png:");
        /* not a PNG at all */
        assert_int_equal(rl_image_png_decode((const uint8_t *)"GIF89a....", 10, c, &px, &w, &h),
                         RL_EPROTO);
        free(buf);
    }
}

static void test_gif_and_grid(void **state)
{
    (void)state;
    enum { S = 5, N = 3 };
    uint8_t tiles[N * S * S];
    for (int i = 0; i < N * S * S; i++)
        tiles[i] = (uint8_t)(i * 11);
    int gw, gh;
    rl_image_grid(NULL, N, S, S, 2, 1, 9, NULL, &gw, &gh);
    assert_int_equal(gw, 2 * (S + 1) + 1);
    assert_int_equal(gh, 2 * (S + 1) + 1);
    uint8_t *grid = malloc((size_t)gw * gh);
    rl_image_grid(tiles, N, S, S, 2, 1, 9, grid, &gw, &gh);
    assert_int_equal(grid[0], 9);
    assert_int_equal(grid[1 * gw + 1], tiles[0]);                    /* tile 0 at (1, 1) */
    assert_int_equal(grid[(S + 2) * gw + 1], tiles[2 * S * S]);      /* tile 2 below it */
    char path[] = "/tmp/rlrt_gif_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    uint8_t frames[2 * 4 * 6];
    for (int i = 0; i < 48; i++)
        frames[i] = (uint8_t)(i * 5);
    assert_int_equal(rl_image_gif_write(path, frames, 2, 6, 4, 20), 0);
    size_t len = 0;
    char *data = rl_file_read_all(path, &len);
    assert_non_null(data);
    assert_memory_equal(data, "GIF89a", 6);
    assert_int_equal((unsigned char)data[len - 1], 0x3b);
    assert_non_null(memmem(data, len, "NETSCAPE2.0", 11));
    free(data);
    unlink(path);
    assert_int_equal(rl_image_gif_write(path, frames, 0, 6, 4, 20), RL_EINVAL);
    free(grid);
}

/* The RGB GIF read back by giflib's own decoder: frame count, size, the
 * loop and delay, and every decoded pixel near its input (the palette is a
 * per-frame median cut of a picture with far more than 256 colours, so not
 * equal; a swapped channel or a wrong palette is off by ~100). */
static void test_gif_rgb(void **state)
{
    (void)state;
    enum { W = 64, H = 48, N = 3 };
    uint8_t *frames = malloc((size_t)N * H * W * 3);
    for (int f = 0; f < N; f++)
        for (int y = 0; y < H; y++)
            for (int x = 0; x < W; x++) {
                uint8_t *p = frames + (((size_t)f * H + y) * W + x) * 3;
                p[0] = (uint8_t)(x * 4);
                p[1] = (uint8_t)(y * 5);
                p[2] = (uint8_t)((x + y) * 2 + f * 60);
                if (f == 1 && x >= 10 && x < 20 && y >= 10 && y < 20) /* a red square in frame 1 */
                    p[0] = 250, p[1] = 10, p[2] = 10;
            }
    char path[] = "/tmp/rlrt_gifrgb_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    mode_t um = umask(022);
    assert_int_equal(rl_image_gif_write_rgb(path, frames, N, W, H, 12), 0);
    umask(um);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0644); /* the umask's mode, not giflib's 0600 */
    char tmp[64];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    assert_int_not_equal(access(tmp, F_OK), 0); /* atomic: no temporary file left */
    int err = 0;
    GifFileType *g = DGifOpenFileName(path, &err);
    if (!g)
        fail_msg("DGifOpenFileName: %s", GifErrorString(err));
    assert_int_equal(DGifSlurp(g), GIF_OK);
    assert_int_equal(g->ImageCount, N);
    assert_int_equal(g->SWidth, W);
    assert_int_equal(g->SHeight, H);
    double worst_mean = 0;
    int worst = 0;
    for (int f = 0; f < N; f++) {
        const SavedImage *im = &g->SavedImages[f];
        assert_int_equal(im->ImageDesc.Width, W);
        assert_int_equal(im->ImageDesc.Height, H);
        const ColorMapObject *cm = im->ImageDesc.ColorMap ? im->ImageDesc.ColorMap : g->SColorMap;
        assert_non_null(cm);
        GraphicsControlBlock gcb;
        assert_int_equal(DGifSavedExtensionToGCB(g, f, &gcb), GIF_OK);
        assert_int_equal(gcb.DelayTime, 12);
        double sum = 0;
        for (int i = 0; i < W * H; i++) {
            int k = im->RasterBits[i];
            assert_true(k < cm->ColorCount);
            const uint8_t *p = frames + ((size_t)f * W * H + (size_t)i) * 3;
            int d[3] = {abs(cm->Colors[k].Red - p[0]), abs(cm->Colors[k].Green - p[1]),
                        abs(cm->Colors[k].Blue - p[2])};
            for (int c = 0; c < 3; c++) {
                sum += d[c];
                worst = d[c] > worst ? d[c] : worst;
            }
        }
        sum /= (double)W * H * 3;
        worst_mean = sum > worst_mean ? sum : worst_mean;
        if (f == 1) { /* the red square survives the palette */
            int k = im->RasterBits[15 * W + 15];
            assert_true(cm->Colors[k].Red > 220 && cm->Colors[k].Green < 40 && cm->Colors[k].Blue < 40);
        }
    }
    printf("# rgb gif: mean |error| per channel <= %.2f, max %d\n", worst_mean, worst);
    /* measured: 6.96 and 52 (3072 colours spread over the cube: ~12 per
     * palette entry; giflib's boxes are built on 5 bits per channel) */
    assert_true(worst_mean < 9.0);
    assert_true(worst <= 64);
    int looped = 0;
    for (int i = 0; i < g->SavedImages[0].ExtensionBlockCount; i++) {
        const ExtensionBlock *e = &g->SavedImages[0].ExtensionBlocks[i];
        looped |= e->ByteCount == 11 && memcmp(e->Bytes, "NETSCAPE2.0", 11) == 0;
    }
    assert_true(looped);
    DGifCloseFile(g, &err);
    /* errors: no frames, a bad delay, no pixels, a directory that does not exist */
    assert_int_equal(rl_image_gif_write_rgb(path, frames, 0, W, H, 12), RL_EINVAL);
    assert_int_equal(rl_image_gif_write_rgb(path, frames, N, W, H, -1), RL_EINVAL);
    assert_int_equal(rl_image_gif_write_rgb(path, NULL, N, W, H, 12), RL_EINVAL);
    assert_int_equal(rl_image_gif_write_rgb("/nonexistent/dir/x.gif", frames, N, W, H, 12), RL_EIO);
    assert_msg_contains("/nonexistent/dir/x.gif");
    unlink(path);
    free(frames);
}

/* ---- reward specifications ------------------------------------------------------------------ */

static void test_reward_specs(void **state)
{
    (void)state;
    double w[RL_IMG_REWARD_COUNT];
    assert_int_equal(rl_image_reward_parse("prompt_match", w), 0);
    assert_true(w[RL_IMG_PROMPT_MATCH] == 1 && w[RL_IMG_JPEG_COMPRESSIBILITY] == 0);
    assert_int_equal(rl_image_reward_parse(" jpeg_compressibility:0.5 , prompt_match:2 ", w), 0);
    assert_true(w[RL_IMG_JPEG_COMPRESSIBILITY] == 0.5 && w[RL_IMG_PROMPT_MATCH] == 2);
    assert_true(w[RL_IMG_REMOTE] == 0 && w[RL_IMG_JPEG_INCOMPRESSIBILITY] == 0);
    assert_true(w[RL_IMG_ON_PROMPT] == 0);
    assert_int_equal(rl_image_reward_parse("jpeg_compressibility,on_prompt:0.5", w), 0);
    assert_true(w[RL_IMG_JPEG_COMPRESSIBILITY] == 1 && w[RL_IMG_ON_PROMPT] == 0.5);
    assert_string_equal(rl_image_reward_name(RL_IMG_ON_PROMPT), "on_prompt");
    assert_int_equal(rl_image_reward_parse("hpsv3", w), RL_EINVAL);
    assert_msg_contains("unknown reward 'hpsv3'");
    assert_int_equal(rl_image_reward_parse("remote:abc", w), RL_EINVAL);
    assert_msg_contains("weight 'abc' of remote");
    assert_int_equal(rl_image_reward_parse("remote,remote:2", w), RL_EINVAL);
    assert_msg_contains("named twice");
    assert_int_equal(rl_image_reward_parse(" , ", w), RL_EINVAL);
    assert_int_equal(rl_image_reward_parse("remote:nan", w), RL_EINVAL);
}

/* ---- Fashion-MNIST and clips ------------------------------------------------------------------ */

static void test_fmnist_and_clips(void **state)
{
    (void)state;
    if (access(RL_FMNIST_DIR "/t10k-images-idx3-ubyte.gz", R_OK) != 0)
        skip(); /* Debian's dataset-fashion-mnist is not installed */
    rl_fmnist *d = rl_fmnist_load(RL_FMNIST_DIR, "t10k", 100);
    if (!d)
        fail_msg("%s", rl_error_message());
    assert_int_equal(d->n, 100);
    int counts[10] = {0};
    for (int64_t i = 0; i < d->n; i++)
        counts[d->labels[i]]++;
    for (int c = 0; c < 10; c++)
        assert_true(counts[c] > 0);
    /* a split: skipping 40 keeps images 40..99 in order; skipping all is refused */
    rl_fmnist *tail = rl_fmnist_load(RL_FMNIST_DIR, "t10k", 100);
    assert_non_null(tail);
    assert_int_equal(rl_fmnist_skip(tail, 40), 0);
    assert_int_equal(tail->n, 60);
    assert_memory_equal(tail->pixels, d->pixels + 40 * 784, 60 * 784);
    assert_memory_equal(tail->labels, d->labels + 40, 60);
    assert_int_equal(rl_fmnist_skip(tail, 60), RL_EINVAL);
    assert_int_equal(rl_fmnist_skip(tail, -1), RL_EINVAL);
    assert_int_equal(tail->n, 60);
    rl_fmnist_free(tail);
    float one[784], clip[4 * 784], again[4 * 784];
    assert_int_equal(rl_clip_build(d, 3, 1, 7, 0, one), 0);
    for (int i = 0; i < 784; i++) {
        assert_true(one[i] >= -1.0f && one[i] <= 1.0f);
        assert_float_equal(one[i], d->pixels[3 * 784 + i] / 127.5f - 1.0f, 1e-6);
    }
    assert_int_equal(rl_clip_build(d, 3, 4, 7, 5, clip), 0);
    assert_int_equal(rl_clip_build(d, 3, 4, 7, 5, again), 0);
    assert_memory_equal(clip, again, sizeof clip);
    /* the item moves: consecutive frames differ, and each holds the item's
     * mass (a drifting half-size item on a black canvas) */
    double mass0 = 0;
    for (int i = 0; i < 784; i++)
        mass0 += clip[i] + 1.0;
    for (int f = 1; f < 4; f++) {
        double mass = 0;
        for (int i = 0; i < 784; i++)
            mass += clip[f * 784 + i] + 1.0;
        assert_true(fabs(mass - mass0) < 1e-2 * mass0 + 1e-3);
        assert_memory_not_equal(clip + f * 784, clip + (f - 1) * 784, 784 * sizeof(float));
    }
    assert_int_equal(rl_clip_build(d, 100, 1, 0, 0, one), RL_ERANGE);
    assert_int_equal(rl_fmnist_prompt_class("a sneaker"), 7);
    assert_int_equal(rl_fmnist_prompt_class("a spaceship"), -1);
    assert_msg_contains("unknown prompt 'a spaceship'");
    rl_fmnist_free(d);
    /* a missing directory names the Debian package */
    assert_null(rl_fmnist_load("/nonexistent", "train", 0));
    assert_msg_contains("dataset-fashion-mnist");
}

/* val/frame_consistency's measure (docs/decisions/diffusion-clip-consistency.md):
 * real 8-frame clips score high; the same frames shuffled, or each frame taken
 * from an independently drawn clip of the same image (another start and
 * velocity), score clearly lower; a constant frame scores 0; bad shapes are
 * refused. Without the data only the synthetic part runs. */
static void test_clip_frame_consistency(void **state)
{
    (void)state;
    enum { F = 8, S = 28, P = S * S, B = 32 };
    static float x[B * F * P], y[B * F * P], z[B * F * P];
    double c = 0;
    /* a 5x5 square moving 2 px a frame: exactly 1; a blank clip: 0 */
    for (int f = 0; f < F; f++)
        for (int i = 0; i < P; i++) {
            int r = i / S, q = i % S;
            x[f * P + i] = r >= 4 && r < 9 && q >= 2 * f + 2 && q < 2 * f + 7 ? 1.0f : -1.0f;
            y[f * P + i] = -1.0f;
        }
    assert_int_equal(rl_clip_frame_consistency(x, 1, F, S, RL_CLIP_MAX_SPEED, &c), 0);
    assert_float_equal(c, 1.0, 1e-9);
    assert_int_equal(rl_clip_frame_consistency(y, 1, F, S, RL_CLIP_MAX_SPEED, &c), 0);
    assert_float_equal(c, 0.0, 1e-12);
    /* with no shift allowed the moving square's pairs overlap only partly */
    assert_int_equal(rl_clip_frame_consistency(x, 1, F, S, 0, &c), 0);
    assert_true(c < 0.7);
    assert_int_equal(rl_clip_frame_consistency(x, 1, 1, S, 3, &c), RL_EINVAL);
    assert_int_equal(rl_clip_frame_consistency(x, 0, F, S, 3, &c), RL_EINVAL);
    assert_int_equal(rl_clip_frame_consistency(x, 1, F, S, S, &c), RL_EINVAL);
    if (access(RL_FMNIST_DIR "/t10k-images-idx3-ubyte.gz", R_OK) != 0)
        skip(); /* Debian's dataset-fashion-mnist is not installed */
    rl_fmnist *d = rl_fmnist_load(RL_FMNIST_DIR, "t10k", B);
    if (!d)
        fail_msg("%s", rl_error_message());
    static const int perm[F] = {0, 5, 2, 7, 4, 1, 6, 3}; /* no two neighbours stay neighbours */
    float one[F * P];
    for (int b = 0; b < B; b++) {
        assert_int_equal(rl_clip_build(d, b, F, 11, (uint64_t)b, x + (size_t)b * F * P), 0);
        for (int f = 0; f < F; f++) {
            memcpy(y + ((size_t)b * F + f) * P, x + ((size_t)b * F + perm[f]) * P, sizeof(float) * P);
            /* frame f of an independent clip of the same image */
            assert_int_equal(rl_clip_build(d, b, F, 11, 1000u + (uint64_t)(b * F + f), one), 0);
            memcpy(z + ((size_t)b * F + f) * P, one + (size_t)f * P, sizeof(float) * P);
        }
    }
    double real = 0, shuffled = 0, indep = 0;
    assert_int_equal(rl_clip_frame_consistency(x, B, F, S, RL_CLIP_MAX_SPEED, &real), 0);
    assert_int_equal(rl_clip_frame_consistency(y, B, F, S, RL_CLIP_MAX_SPEED, &shuffled), 0);
    assert_int_equal(rl_clip_frame_consistency(z, B, F, S, RL_CLIP_MAX_SPEED, &indep), 0);
    print_message("frame consistency: real %.4f, shuffled %.4f, independent %.4f\n", real, shuffled, indep);
    assert_true(real > 0.99); /* a translated item, shifts within the data's speed */
    assert_true(shuffled < real - 0.2);
    assert_true(indep < real - 0.2);
    rl_fmnist_free(d);
}

static void test_fmnist_corrupt_file(void **state)
{
    (void)state;
    char dir[] = "/tmp/rlrt_fm_XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[256];
    /* a header that promises 10 images of 28x28 and a file that ends early */
    snprintf(path, sizeof path, "%s/train-images-idx3-ubyte", dir);
    FILE *f = fopen(path, "wb");
    const unsigned char head[16] = {0, 0, 8, 3, 0, 0, 0, 10, 0, 0, 0, 28, 0, 0, 0, 28};
    fwrite(head, 1, 16, f);
    fwrite(head, 1, 16, f);
    fclose(f);
    snprintf(path, sizeof path, "%s/train-labels-idx1-ubyte", dir);
    f = fopen(path, "wb");
    const unsigned char lh[8] = {0, 0, 8, 1, 0, 0, 0, 10};
    fwrite(lh, 1, 8, f);
    fclose(f);
    assert_null(rl_fmnist_load(dir, "train", 0));
    assert_msg_contains("file ends after");
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
}

/* ---- the image classifier: gradients by finite differences --------------------------------- */

typedef struct {
    double w[6];
} s_nll;

static int s_weighted_nll(void *ctx, const rl_model_io *out, rl_model_io *grad, double *loss)
{
    const s_nll *c = ctx;
    for (int64_t r = 0; r < out->rows; r++) {
        double w = c->w[out->row0 + r];
        *loss -= w * out->q[RL_Q_LOGP][r];
        grad->q[RL_Q_LOGP][r] = (float)-w;
    }
    return RL_OK;
}

static void test_classifier_gradients(void **state)
{
    (void)state;
    const char *yaml = "model: {type: image_classifier, channels: 1, height: 3, width: 4, "
                       "num_classes: 5, hidden_size: 6, init_from: ''}\n";
    rl_config *job = rl_config_parse_string(yaml, strlen(yaml), "<test>");
    rl_model *m = rl_model_build(job, 3);
    if (!m)
        fail_msg("%s", rl_error_message());
    rl_dataproto *dp = rl_dataproto_new();
    int64_t s2[2] = {6, 12}, s1[1] = {6};
    float *x = rl_tensor_data(rl_dataproto_new_tensor(dp, RL_IC_IMAGES, RL_F32, 2, s2));
    int32_t *y = rl_tensor_data(rl_dataproto_new_tensor(dp, RL_IC_LABELS, RL_I32, 1, s1));
    rl_rng g;
    rl_rng_init(&g, 5, 0);
    for (int i = 0; i < 72; i++)
        x[i] = rl_rng_uniform(&g) * 2 - 1;
    for (int b = 0; b < 6; b++)
        y[b] = b % 5;
    s_nll c = {{1, 0.5, 2, 1, 0.25, 1}};
    rl_model_pass pass = {.temperature = 1, .micro_batch = 4};
    rl_model_zero_grad(m);
    double loss = 0;
    assert_int_equal(rl_model_forward_backward(m, dp, RL_Q_BIT(RL_Q_LOGP), &pass, s_weighted_nll, &c,
                                               &loss), 0);
    int64_t P = rl_model_num_params(m);
    float *gr = malloc(sizeof(float) * (size_t)P), *p = rl_model_params(m);
    memcpy(gr, rl_model_grads(m), sizeof(float) * (size_t)P);
    for (int64_t i = 0; i < P; i += 7) {
        float keep = p[i];
        double h = 1e-2, hi = 0, lo = 0;
        p[i] = keep + (float)h;
        assert_int_equal(rl_model_forward_backward(m, dp, RL_Q_BIT(RL_Q_LOGP), &pass,
                                                   s_weighted_nll, &c, &hi), 0);
        p[i] = keep - (float)h;
        assert_int_equal(rl_model_forward_backward(m, dp, RL_Q_BIT(RL_Q_LOGP), &pass,
                                                   s_weighted_nll, &c, &lo), 0);
        p[i] = keep;
        double fd = (hi - lo) / (2 * h);
        if (fabs(fd - gr[i]) > 2e-2 * fabs(gr[i]) + 2e-3)
            fail_msg("param %lld: finite difference %g, backward %g", (long long)i, fd, (double)gr[i]);
    }
    /* forward's logp equals log of the probabilities */
    rl_dataproto *out = NULL;
    assert_int_equal(rl_model_forward(m, dp, RL_Q_BIT(RL_Q_LOGP), &pass, &out), 0);
    float probs[6 * 5];
    assert_int_equal(rl_image_model_probs(m, 6, x, probs), 0);
    const float *lp = rl_tensor_data(rl_dataproto_tensor(out, "logp"));
    for (int b = 0; b < 6; b++)
        assert_float_equal(lp[b], logf(probs[b * 5 + y[b]]), 1e-5);
    /* a label outside the classes, a NaN pixel: named */
    y[2] = 5;
    rl_dataproto *bad = NULL;
    assert_int_not_equal(rl_model_forward(m, dp, RL_Q_BIT(RL_Q_LOGP), &pass, &bad), 0);
    assert_msg_contains("labels[2] = 5");
    y[2] = 2;
    x[13] = NAN;
    assert_int_not_equal(rl_image_model_probs(m, 6, x, probs), 0);
    assert_msg_contains("image 1 holds nan at pixel 1");
    free(gr);
    rl_dataproto_free(out);
    rl_dataproto_free(dp);
    rl_model_free(m);
    rl_config_free(job);
}

int main(void)
{
    rl_nn_set_threads(2);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_jpeg_known_images),
        cmocka_unit_test(test_jpeg_contrast_matched),
        cmocka_unit_test(test_png_round_trip_and_corrupt),
        cmocka_unit_test(test_gif_and_grid),
        cmocka_unit_test(test_gif_rgb),
        cmocka_unit_test(test_reward_specs),
        cmocka_unit_test(test_fmnist_and_clips),
        cmocka_unit_test(test_clip_frame_consistency),
        cmocka_unit_test(test_fmnist_corrupt_file),
        cmocka_unit_test(test_classifier_gradients),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
