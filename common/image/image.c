/* image.c — JPEG sizes, PNG, GIF and grids (common/image/image.h). */
#include "common/image/image.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <gif_lib.h>
#include <math.h>
#include <png.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
/* jpeglib.h needs FILE and size_t first */
#include <jpeglib.h>
#include <setjmp.h>

#include "rlrt/error.h"
#include "common/core/util.h"

#define S_MAX_SIDE 16384

static int s_check(const char *fn, const void *px, int w, int h, int c)
{
    if (!px || w < 1 || h < 1 || w > S_MAX_SIDE || h > S_MAX_SIDE || (c != 1 && c != 3))
        return rl_error_set(RL_EINVAL, "%s: need pixels, 1 <= w, h <= %d and 1 or 3 channels, got "
                                       "%dx%d with %d channels", fn, S_MAX_SIDE, w, h, c);
    return RL_OK;
}

/* ---- JPEG -------------------------------------------------------------------------------- */

double rl_image_ink(const uint8_t *px, size_t n)
{
    size_t hist[256] = {0};
    for (size_t i = 0; i < n; i++)
        hist[px[i]]++;
    size_t want = (n + 9) / 10, got = 0;
    double sum = 0;
    for (int v = 255; v >= 0 && got < want; v--) { /* the brightest tenth, from the top */
        size_t take = hist[v] < want - got ? hist[v] : want - got;
        sum += (double)v * (double)take;
        got += take;
    }
    return got ? sum / (double)got : 0;
}

void rl_image_match_ink(const uint8_t *px, size_t n, double ink, double max_gain, uint8_t *out,
                        double *gain)
{
    double m = rl_image_ink(px, n), g = max_gain;
    if (m > 0 && ink / m < max_gain)
        g = ink / m;
    if (g < 1)
        g = 1;
    for (size_t i = 0; i < n; i++) {
        double v = floor((double)px[i] * g + 0.5);
        out[i] = (uint8_t)(v > 255 ? 255 : v);
    }
    if (gain)
        *gain = g;
}

typedef struct s_jerr {
    struct jpeg_error_mgr pub;
    jmp_buf jb;
    char msg[JMSG_LENGTH_MAX];
} s_jerr;

static void s_jerr_exit(j_common_ptr cinfo)
{
    s_jerr *e = (s_jerr *)cinfo->err;
    (*cinfo->err->format_message)(cinfo, e->msg);
    longjmp(e->jb, 1);
}

int rl_image_jpeg_size(const uint8_t *px, int w, int h, int c, int quality, size_t *bytes)
{
    int rc = s_check("jpeg", px, w, h, c);
    if (rc)
        return rc;
    if (quality < 1 || quality > 100)
        return rl_error_set(RL_EINVAL, "jpeg: quality %d outside [1, 100]", quality);
    struct jpeg_compress_struct ci;
    s_jerr err;
    /* volatile: read after a longjmp */
    unsigned char *volatile buf = NULL;
    unsigned long len = 0;
    ci.err = jpeg_std_error(&err.pub);
    err.pub.error_exit = s_jerr_exit;
    if (setjmp(err.jb)) {
        jpeg_destroy_compress(&ci);
        free(buf);
        return rl_error_set(RL_EIO, "jpeg: %s", err.msg);
    }
    jpeg_create_compress(&ci);
    unsigned char *b = NULL;
    jpeg_mem_dest(&ci, &b, &len);
    ci.image_width = (JDIMENSION)w;
    ci.image_height = (JDIMENSION)h;
    ci.input_components = c;
    ci.in_color_space = c == 1 ? JCS_GRAYSCALE : JCS_RGB;
    jpeg_set_defaults(&ci);
    jpeg_set_quality(&ci, quality, TRUE);
    jpeg_start_compress(&ci, TRUE);
    while (ci.next_scanline < ci.image_height) {
        JSAMPROW row = (JSAMPROW)(px + (size_t)ci.next_scanline * (size_t)w * (size_t)c);
        jpeg_write_scanlines(&ci, &row, 1);
    }
    jpeg_finish_compress(&ci);
    buf = b;
    *bytes = len;
    jpeg_destroy_compress(&ci);
    free(buf);
    return RL_OK;
}

/* ---- PNG (libpng's simplified API) ------------------------------------------------------- */

int rl_image_png_encode(const uint8_t *px, int w, int h, int c, uint8_t **out, size_t *len)
{
    int rc = s_check("png", px, w, h, c);
    if (rc)
        return rc;
    png_image img;
    memset(&img, 0, sizeof img);
    img.version = PNG_IMAGE_VERSION;
    img.width = (png_uint_32)w;
    img.height = (png_uint_32)h;
    img.format = c == 1 ? PNG_FORMAT_GRAY : PNG_FORMAT_RGB;
    png_alloc_size_t size = 0;
    if (!png_image_write_to_memory(&img, NULL, &size, 0, px, 0, NULL))
        return rl_error_set(RL_EIO, "png: %s", img.message);
    uint8_t *buf = malloc(size ? size : 1);
    if (!buf)
        return rl_error_set(RL_ENOMEM, "png: out of memory for %zu bytes", (size_t)size);
    if (!png_image_write_to_memory(&img, buf, &size, 0, px, 0, NULL)) {
        free(buf);
        return rl_error_set(RL_EIO, "png: %s", img.message);
    }
    *out = buf;
    *len = size;
    return RL_OK;
}

int rl_image_png_decode(const uint8_t *buf, size_t len, int want_c, uint8_t **px, int *w, int *h)
{
    if (!buf || (want_c != 1 && want_c != 3))
        return rl_error_set(RL_EINVAL, "png: need a buffer and 1 or 3 channels, got %d", want_c);
    png_image img;
    memset(&img, 0, sizeof img);
    img.version = PNG_IMAGE_VERSION;
    if (!png_image_begin_read_from_memory(&img, buf, len))
        return rl_error_set(RL_EPROTO, "png: %s (%zu bytes)", img.message, len);
    if (img.width < 1 || img.height < 1 || img.width > S_MAX_SIDE || img.height > S_MAX_SIDE) {
        png_image_free(&img);
        return rl_error_set(RL_EPROTO, "png: %ux%u image (at most %d per side)", img.width,
                            img.height, S_MAX_SIDE);
    }
    img.format = want_c == 1 ? PNG_FORMAT_GRAY : PNG_FORMAT_RGB;
    size_t n = (size_t)img.width * img.height * (size_t)want_c;
    uint8_t *p = malloc(n);
    if (!p) {
        png_image_free(&img);
        return rl_error_set(RL_ENOMEM, "png: out of memory for %zu bytes", n);
    }
    if (!png_image_finish_read(&img, NULL, p, 0, NULL)) {
        free(p);
        return rl_error_set(RL_EPROTO, "png: %s", img.message);
    }
    *px = p;
    *w = (int)img.width;
    *h = (int)img.height;
    return RL_OK;
}

int rl_image_png_write(const char *path, const uint8_t *px, int w, int h, int c)
{
    uint8_t *buf = NULL;
    size_t len = 0;
    int rc = rl_image_png_encode(px, w, h, c, &buf, &len);
    if (!rc)
        rc = rl_file_write_atomic(path, buf, len);
    free(buf);
    return rc;
}

/* ---- GIF (giflib) ------------------------------------------------------------------------------ */

/* Writes n frames of c channels (1: one global gray palette; 3: a local
 * palette of at most 256 colours per frame, giflib's median-cut
 * GifQuantizeBuffer) to `path` atomically (a .tmp file renamed). */
static int s_gif_write(const char *fn, const char *path, const uint8_t *frames, int n_frames, int w, int h,
                       int c, int delay_cs)
{
    int rc = s_check(fn, frames, w, h, c);
    if (rc)
        return rc;
    if (!path || !*path)
        return rl_error_set(RL_EINVAL, "%s: no path", fn);
    if (n_frames < 1 || n_frames > 4096 || delay_cs < 0 || delay_cs > 65535)
        return rl_error_set(RL_EINVAL, "%s: %d frames at %d cs (need 1..4096 frames, 0..65535 cs)", fn,
                            n_frames, delay_cs);
    const size_t px = (size_t)w * (size_t)h;
    uint8_t *planes = NULL, *index = NULL;
    if (c == 3 && (!(planes = malloc(3 * px)) || !(index = malloc(px)))) {
        free(planes);
        return rl_error_set(RL_ENOMEM, "%s: out of memory", fn);
    }
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    int err = 0;
    /* open() rather than EGifOpenFileName, which creates files 0600: the
     * GIFs are for people, so the umask decides as for any other output */
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0666);
    if (fd < 0) {
        int e = errno;
        free(planes);
        free(index);
        return rl_error_set(RL_EIO, "%s: %s: %s", fn, tmp, strerror(e));
    }
    GifFileType *g = EGifOpenFileHandle(fd, &err);
    if (!g) {
        close(fd);
        unlink(tmp);
        free(planes);
        free(index);
        return rl_error_set(RL_EIO, "%s: %s: %s", fn, tmp, GifErrorString(err));
    }
    EGifSetGifVersion(g, true); /* GIF89a: the animation extensions */
    GifColorType pal[256];
    for (int i = 0; i < 256; i++)
        pal[i].Red = pal[i].Green = pal[i].Blue = (GifByteType)i;
    ColorMapObject *cmap = GifMakeMapObject(256, pal);
    int ok = cmap != NULL, oom = cmap == NULL;
    /* gray: the palette is global; RGB: each frame brings its own */
    ok = ok && EGifPutScreenDesc(g, w, h, 8, 0, c == 1 ? cmap : NULL) == GIF_OK;
    /* NETSCAPE2.0: loop forever */
    static const unsigned char app[11] = {'N', 'E', 'T', 'S', 'C', 'A', 'P', 'E', '2', '.', '0'};
    static const unsigned char loop[3] = {1, 0, 0};
    ok = ok && EGifPutExtensionLeader(g, APPLICATION_EXT_FUNC_CODE) == GIF_OK &&
         EGifPutExtensionBlock(g, 11, app) == GIF_OK && EGifPutExtensionBlock(g, 3, loop) == GIF_OK &&
         EGifPutExtensionTrailer(g) == GIF_OK;
    for (int f = 0; ok && f < n_frames; f++) {
        const uint8_t *frame = frames + (size_t)f * px * (size_t)c;
        const uint8_t *rows = frame;
        if (c == 3) {
            for (size_t i = 0; i < px; i++) {
                planes[i] = frame[3 * i];
                planes[px + i] = frame[3 * i + 1];
                planes[2 * px + i] = frame[3 * i + 2];
            }
            int colors = 256;
            if (GifQuantizeBuffer((unsigned)w, (unsigned)h, &colors, planes, planes + px, planes + 2 * px, index,
                                  cmap->Colors) != GIF_OK) {
                ok = 0, oom = 1;
                break;
            }
            for (int i = colors; i < 256; i++) /* unused entries: defined, black */
                cmap->Colors[i].Red = cmap->Colors[i].Green = cmap->Colors[i].Blue = 0;
            rows = index;
        }
        unsigned char gce[4] = {0, (unsigned char)(delay_cs & 0xff), (unsigned char)(delay_cs >> 8), 0};
        ok = EGifPutExtension(g, GRAPHICS_EXT_FUNC_CODE, 4, gce) == GIF_OK &&
             EGifPutImageDesc(g, 0, 0, w, h, false, c == 3 ? cmap : NULL) == GIF_OK;
        for (int y = 0; ok && y < h; y++)
            ok = EGifPutLine(g, (GifPixelType *)(rows + (size_t)y * (size_t)w), w) == GIF_OK;
    }
    int gerr = g->Error;
    GifFreeMapObject(cmap);
    free(planes);
    free(index);
    if (EGifCloseFile(g, &err) != GIF_OK && ok)
        ok = 0, gerr = err;
    if (!ok) {
        unlink(tmp);
        if (oom)
            return rl_error_set(RL_ENOMEM, "%s: %s: out of memory", fn, path);
        return rl_error_set(RL_EIO, "%s: writing %s: %s", fn, path, GifErrorString(gerr));
    }
    if (rename(tmp, path) != 0) {
        int e = errno;
        unlink(tmp);
        return rl_error_set(RL_EIO, "%s: renaming %s: %s", fn, tmp, strerror(e));
    }
    return RL_OK;
}

int rl_image_gif_write(const char *path, const uint8_t *frames, int n_frames, int w, int h,
                       int delay_cs)
{
    return s_gif_write("gif", path, frames, n_frames, w, h, 1, delay_cs);
}

int rl_image_gif_write_rgb(const char *path, const uint8_t *frames, int n_frames, int w, int h,
                           int delay_cs)
{
    return s_gif_write("gif rgb", path, frames, n_frames, w, h, 3, delay_cs);
}

void rl_image_grid(const uint8_t *imgs, int n, int w, int h, int cols, int pad, uint8_t bg,
                   uint8_t *out, int *gw, int *gh)
{
    if (cols < 1)
        cols = 1;
    int rows = (n + cols - 1) / cols;
    *gw = cols * (w + pad) + pad;
    *gh = rows * (h + pad) + pad;
    if (!out)
        return;
    memset(out, bg, (size_t)*gw * (size_t)*gh);
    for (int i = 0; i < n; i++) {
        int x0 = pad + (i % cols) * (w + pad), y0 = pad + (i / cols) * (h + pad);
        for (int y = 0; y < h; y++)
            memcpy(out + (size_t)(y0 + y) * (size_t)*gw + x0, imgs + ((size_t)i * h + y) * (size_t)w,
                   (size_t)w);
    }
}
