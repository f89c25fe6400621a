/* clips.c — Fashion-MNIST IDX files, built-in prompts and Moving-MNIST clips
 * (see common/data/clips.h). gzread reads both the .gz and the plain files. */
#include "common/data/clips.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "common/core/util.h"
#include "rlrt/error.h"
#include "common/core/rng.h"

static const char *const s_prompts[RL_FMNIST_CLASSES] = {
    "a T-shirt", "a trouser", "a pullover", "a dress", "a coat",
    "a sandal",  "a shirt",   "a sneaker",  "a bag",   "an ankle boot",
};

const char *rl_fmnist_prompt(int c)
{
    return c >= 0 && c < RL_FMNIST_CLASSES ? s_prompts[c] : NULL;
}

int rl_fmnist_prompt_class(const char *prompt)
{
    for (int c = 0; prompt && c < RL_FMNIST_CLASSES; c++)
        if (strcmp(prompt, s_prompts[c]) == 0)
            return c;
    char known[400];
    int n = 0;
    for (int c = 0; c < RL_FMNIST_CLASSES; c++)
        n += snprintf(known + n, sizeof known - (size_t)n, "%s'%s'", c ? ", " : "", s_prompts[c]);
    rl_error_set(RL_ENOTFOUND, "unknown prompt '%s' (the built-in prompts: %s)",
                 prompt ? prompt : "(null)", known);
    return -1;
}

/* <dir>/<stem>.gz if present, else <dir>/<stem>. */
static int s_path(const char *dir, const char *stem, char *buf, size_t len)
{
    snprintf(buf, len, "%s/%s.gz", dir, stem);
    if (access(buf, R_OK) == 0)
        return RL_OK;
    snprintf(buf, len, "%s/%s", dir, stem);
    if (access(buf, R_OK) == 0)
        return RL_OK;
    return rl_error_set(RL_ENOTFOUND,
                        "%s/%s(.gz) not found: install Debian's dataset-fashion-mnist "
                        "(deploy/install-deps.sh) or set the data directory",
                        dir, stem);
}

static uint32_t s_be32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* Reads an IDX file: magic 0x00000800 | ndim, then ndim big-endian sizes,
 * then the u8 payload. dims[0..ndim) out; *data malloc'd (caller frees). */
static int s_read_idx(const char *path, int ndim, uint32_t *dims, int64_t limit, uint8_t **data)
{
    gzFile f = gzopen(path, "rb");
    if (!f)
        return rl_error_set(RL_EIO, "%s: cannot open: %s", path, strerror(errno));
    unsigned char head[16];
    int want = 4 + 4 * ndim;
    int got = gzread(f, head, (unsigned)want);
    int rc = RL_OK;
    if (got != want) {
        rc = rl_error_set(RL_EPROTO, "%s: file ends inside the %d-byte IDX header", path, want);
        goto out;
    }
    uint32_t magic = s_be32(head);
    if (magic != (0x800u | (uint32_t)ndim)) {
        rc = rl_error_set(RL_EPROTO, "%s: IDX magic 0x%08x, expected 0x%08x (u8, %d dims)", path,
                          magic, 0x800u | (uint32_t)ndim, ndim);
        goto out;
    }
    uint64_t total = 1;
    for (int i = 0; i < ndim; i++) {
        dims[i] = s_be32(head + 4 + 4 * i);
        if (dims[i] == 0 || dims[i] > 10000000u) {
            rc = rl_error_set(RL_EPROTO, "%s: dimension %d is %u (expected 1..10^7)", path, i,
                              dims[i]);
            goto out;
        }
        if (i > 0)
            total *= dims[i];
    }
    if (total > 4096) {
        rc = rl_error_set(RL_EPROTO, "%s: items of %llu bytes (expected at most 4096)", path,
                          (unsigned long long)total);
        goto out;
    }
    if (limit > 0 && (uint64_t)limit < dims[0])
        dims[0] = (uint32_t)limit;
    uint64_t bytes = total * dims[0];
    *data = malloc(bytes ? bytes : 1);
    if (!*data) {
        rc = rl_error_set(RL_ENOMEM, "%s: out of memory for %llu bytes", path,
                          (unsigned long long)bytes);
        goto out;
    }
    uint64_t done = 0;
    while (done < bytes) {
        unsigned chunk = bytes - done > (1u << 30) ? (1u << 30) : (unsigned)(bytes - done);
        int n = gzread(f, *data + done, chunk);
        if (n <= 0)
            break;
        done += (uint64_t)n;
    }
    if (done != bytes) {
        free(*data);
        *data = NULL;
        rc = rl_error_set(RL_EPROTO, "%s: header says %u items of %llu bytes, file ends after %llu",
                          path, dims[0], (unsigned long long)total, (unsigned long long)done);
    }
out:
    gzclose(f);
    return rc;
}

rl_fmnist *rl_fmnist_load(const char *dir, const char *split, int64_t limit)
{
    if (!dir || !split || (strcmp(split, "train") != 0 && strcmp(split, "t10k") != 0)) {
        rl_error_set(RL_EINVAL, "fashion-mnist: split must be 'train' or 't10k', got '%s'",
                     split ? split : "(null)");
        return NULL;
    }
    char ip[4200], lp[4200], stem[64];
    snprintf(stem, sizeof stem, "%s-images-idx3-ubyte", split);
    if (s_path(dir, stem, ip, sizeof ip))
        return NULL;
    snprintf(stem, sizeof stem, "%s-labels-idx1-ubyte", split);
    if (s_path(dir, stem, lp, sizeof lp))
        return NULL;
    rl_fmnist *d = rl_zalloc(sizeof *d, "fashion-mnist");
    if (!d)
        return NULL;
    uint32_t idims[3], ldims[1];
    if (s_read_idx(ip, 3, idims, limit, &d->pixels) || s_read_idx(lp, 1, ldims, limit, &d->labels))
        goto fail;
    if (idims[0] != ldims[0]) {
        rl_error_set(RL_EPROTO, "%s holds %u images but %s %u labels", ip, idims[0], lp, ldims[0]);
        goto fail;
    }
    if (idims[1] != RL_FMNIST_SIDE || idims[2] != RL_FMNIST_SIDE) {
        rl_error_set(RL_EPROTO, "%s: images are %ux%u, expected %dx%d", ip, idims[1], idims[2],
                     RL_FMNIST_SIDE, RL_FMNIST_SIDE);
        goto fail;
    }
    d->n = idims[0];
    d->rows = d->cols = RL_FMNIST_SIDE;
    for (int64_t i = 0; i < d->n; i++)
        if (d->labels[i] >= RL_FMNIST_CLASSES) {
            rl_error_set(RL_EPROTO, "%s: label %u of item %lld is not a class (0..9)", lp,
                         d->labels[i], (long long)i);
            goto fail;
        }
    return d;
fail:
    rl_fmnist_free(d);
    return NULL;
}

int rl_fmnist_skip(rl_fmnist *d, int64_t skip)
{
    if (!d || skip < 0 || skip >= d->n)
        return rl_error_set(RL_EINVAL, "fashion-mnist: cannot skip %lld of %lld images", (long long)skip,
                            d ? (long long)d->n : 0LL);
    size_t px = (size_t)d->rows * (size_t)d->cols;
    memmove(d->pixels, d->pixels + (size_t)skip * px, (size_t)(d->n - skip) * px);
    memmove(d->labels, d->labels + skip, (size_t)(d->n - skip));
    d->n -= skip;
    return RL_OK;
}

void rl_fmnist_free(rl_fmnist *d)
{
    if (!d)
        return;
    free(d->pixels);
    free(d->labels);
    free(d);
}

int rl_clip_build(const rl_fmnist *d, int64_t img, int frames, uint64_t seed, uint64_t index,
                  float *out)
{
    if (!d || !out || img < 0 || img >= d->n)
        return rl_error_set(RL_ERANGE, "clip: image %lld outside [0, %lld)", (long long)img,
                            (long long)(d ? d->n : 0));
    if (frames < 1 || frames > 64)
        return rl_error_set(RL_ERANGE, "clip: frames %d outside [1, 64]", frames);
    const int S = RL_FMNIST_SIDE;
    const uint8_t *src = d->pixels + (size_t)img * (size_t)(S * S);
    if (frames == 1) {
        for (int i = 0; i < S * S; i++)
            out[i] = (float)src[i] / 127.5f - 1.0f;
        return RL_OK;
    }
    /* the item at half size */
    const int h = S / 2;
    float item[14 * 14];
    for (int y = 0; y < h; y++)
        for (int x = 0; x < h; x++) {
            int s = src[(2 * y) * S + 2 * x] + src[(2 * y) * S + 2 * x + 1] +
                    src[(2 * y + 1) * S + 2 * x] + src[(2 * y + 1) * S + 2 * x + 1];
            item[y * h + x] = (float)s / 4.0f;
        }
    rl_rng g;
    rl_rng_init(&g, seed, index);
    const int span = S - h; /* positions 0..span */
    int px = (int)rl_rng_below(&g, (uint64_t)span + 1), py = (int)rl_rng_below(&g, (uint64_t)span + 1);
    int vx = 1 + (int)rl_rng_below(&g, RL_CLIP_MAX_SPEED), vy = 1 + (int)rl_rng_below(&g, RL_CLIP_MAX_SPEED);
    if (rl_rng_below(&g, 2))
        vx = -vx;
    if (rl_rng_below(&g, 2))
        vy = -vy;
    for (int f = 0; f < frames; f++) {
        float *fr = out + (size_t)f * (size_t)(S * S);
        for (int i = 0; i < S * S; i++)
            fr[i] = -1.0f;
        for (int y = 0; y < h; y++)
            for (int x = 0; x < h; x++)
                fr[(py + y) * S + px + x] = item[y * h + x] / 127.5f - 1.0f;
        /* move, bouncing off the edges */
        px += vx;
        py += vy;
        if (px < 0 || px > span) {
            vx = -vx;
            px = px < 0 ? -px : 2 * span - px;
        }
        if (py < 0 || py > span) {
            vy = -vy;
            py = py < 0 ? -py : 2 * span - py;
        }
    }
    return RL_OK;
}

int rl_fmnist_draw(const rl_fmnist *d, uint64_t seed, int64_t step, int64_t B, int frames,
                   float *clips, int32_t *labels)
{
    rl_rng g;
    rl_rng_init(&g, seed, 0x100000000ull + (uint64_t)step);
    int64_t D = (int64_t)frames * RL_FMNIST_SIDE * RL_FMNIST_SIDE;
    for (int64_t b = 0; b < B; b++) {
        int64_t img = (int64_t)rl_rng_below(&g, (uint64_t)d->n);
        int rc = rl_clip_build(d, img, frames, seed, (uint64_t)step * 1000003u + (uint64_t)b,
                               clips + b * D);
        if (rc)
            return rc;
        labels[b] = d->labels[img];
    }
    return RL_OK;
}

void rl_clip_to_u8(const float *x, int64_t n, uint8_t *out)
{
    for (int64_t i = 0; i < n; i++) {
        float v = (x[i] + 1.0f) * 127.5f;
        out[i] = !(v > 0.0f) ? 0 : v >= 255.0f ? 255 : (uint8_t)lrintf(v);
    }
}

/* Pearson correlation of a and b shifted by (dx, dy): b'[y][x] = b[y+dy][x+dx],
 * −1 outside the canvas; 0 when either is constant. */
static double s_corr_shift(const float *a, const float *b, int S, int dx, int dy)
{
    double sa = 0, sb = 0, saa = 0, sbb = 0, sab = 0;
    for (int y = 0; y < S; y++)
        for (int x = 0; x < S; x++) {
            int yy = y + dy, xx = x + dx;
            double va = a[y * S + x];
            double vb = yy >= 0 && yy < S && xx >= 0 && xx < S ? b[yy * S + xx] : -1.0;
            sa += va;
            sb += vb;
            saa += va * va;
            sbb += vb * vb;
            sab += va * vb;
        }
    double n = (double)S * S, ca = saa - sa * sa / n, cb = sbb - sb * sb / n;
    if (ca < 1e-12 * n || cb < 1e-12 * n)
        return 0.0;
    return (sab - sa * sb / n) / sqrt(ca * cb);
}

int rl_clip_frame_consistency(const float *clips, int64_t B, int F, int S, int shift, double *out)
{
    if (!clips || !out || B < 1 || F < 2 || S < 1 || shift < 0 || shift >= S)
        return rl_error_set(RL_EINVAL,
                            "frame consistency: needs clips, B >= 1, F >= 2, S >= 1 and shift in "
                            "[0, S) (got B %lld, F %d, S %d, shift %d)",
                            (long long)B, F, S, shift);
    double sum = 0;
    size_t P = (size_t)S * (size_t)S;
    for (int64_t b = 0; b < B; b++)
        for (int f = 0; f + 1 < F; f++) {
            const float *a = clips + ((size_t)b * (size_t)F + (size_t)f + 1) * P;
            const float *prev = a - P;
            double best = -1.0;
            for (int dy = -shift; dy <= shift; dy++)
                for (int dx = -shift; dx <= shift; dx++) {
                    double c = s_corr_shift(a, prev, S, dx, dy);
                    if (c > best)
                        best = c;
                }
            sum += best;
        }
    *out = sum / ((double)B * (F - 1));
    return RL_OK;
}
