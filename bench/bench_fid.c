/* bench_fid.c — what the diffusion track's FID (val/fid,
 * driver/recipes/diffusion/diffusion_fid.h) says of known degradations of
 * real images, measured side by side in one run: the Fréchet distance on an
 * image_cnn's features between a reference (the first half of the
 * Fashion-MNIST test split) and
 *   real      the other half, untouched (near 0: the sample's own spread)
 *   blur S    the other half under a Gaussian blur of σ = S pixels
 *   noise S   the other half plus Gaussian noise of std S (pixels in
 *             [−1, 1], clamped after)
 * A usable FID is near 0 for real, clearly larger for every degradation, and
 * grows with S. Beside each FID: the set's mean JPEG size as the
 * compressibility reward measures it (quality 95, the image brought up to
 * ink 208 as reward.jpeg_contrast matched does: `jpeg_kb_<set>`; and a black
 * image's, `jpeg_kb_black`): what a given saving in bytes costs real images
 * in FID (docs/decisions/diffusion-jpeg-contrast.md). Prints
 * `bench: fid_<set> = <value>` lines and, with
 * --check, exits 1 when the real set is not the smallest or a series is
 * not increasing (tests/integration/diffusion_fid.py runs it so).
 *
 *   bench_fid --model DIR [--fmnist DIR] [--n N] [--check]
 *     DIR: an image_cnn directory (examples/fmnist_cnn.yaml's final/);
 *     N: images per set (default 2000; at most 5000) */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/data/clips.h"
#include "common/image/image.h"
#include "common/metrics/frechet.h"
#include "common/nn/models/image_cnn.h"
#include "rlrt/error.h"
#include "rlrt/nn/model.h"

#define S_SIDE RL_FMNIST_SIDE
#define S_PIX (S_SIDE * S_SIDE)

/* Gaussian blur of σ (separable, edges clamped) of n images, in place. */
static void s_blur(float *x, int64_t n, double sigma)
{
    int r = (int)ceil(3 * sigma);
    double k[64], sum = 0;
    for (int i = -r; i <= r; i++)
        sum += k[i + r] = exp(-0.5 * i * i / (sigma * sigma));
    for (int i = 0; i <= 2 * r; i++)
        k[i] /= sum;
    float tmp[S_PIX];
    for (int64_t b = 0; b < n; b++) {
        float *im = x + b * S_PIX;
        for (int pass = 0; pass < 2; pass++) {
            for (int y = 0; y < S_SIDE; y++)
                for (int c = 0; c < S_SIDE; c++) {
                    double acc = 0;
                    for (int i = -r; i <= r; i++) {
                        int yy = pass ? y + i : y, cc = pass ? c : c + i;
                        yy = yy < 0 ? 0 : yy >= S_SIDE ? S_SIDE - 1 : yy;
                        cc = cc < 0 ? 0 : cc >= S_SIDE ? S_SIDE - 1 : cc;
                        acc += k[i + r] * im[yy * S_SIDE + cc];
                    }
                    tmp[y * S_SIDE + c] = (float)acc;
                }
            memcpy(im, tmp, sizeof tmp);
        }
    }
}

/* x += N(0, std²) from a fixed xorshift stream, clamped to [−1, 1]. */
static void s_noise(float *x, int64_t n, double std)
{
    uint64_t st = 0x9e3779b97f4a7c15ull;
    for (int64_t i = 0; i < n * S_PIX; i++) {
        double u[2];
        for (int j = 0; j < 2; j++) {
            st ^= st << 13, st ^= st >> 7, st ^= st << 17;
            u[j] = ((double)(st >> 11) + 0.5) / 9007199254740992.0;
        }
        double z = sqrt(-2 * log(u[0])) * cos(2 * M_PI * u[1]);
        double v = x[i] + std * z;
        x[i] = (float)(v < -1 ? -1 : v > 1 ? 1 : v);
    }
}

/* Mean kB of the images' JPEGs (quality 95) at matched contrast (ink 208,
 * gain at most 8), as workers/reward/reward.c scores jpeg_compressibility. */
static double s_jpeg_kb(const float *x, int64_t n)
{
    double sum = 0;
    uint8_t u[S_PIX], lifted[S_PIX];
    for (int64_t b = 0; b < n; b++) {
        rl_clip_to_u8(x + b * S_PIX, S_PIX, u);
        rl_image_match_ink(u, S_PIX, 208, 8, lifted, NULL);
        size_t bytes = 0;
        if (rl_image_jpeg_size(lifted, S_SIDE, S_SIDE, 1, 95, &bytes))
            return -1;
        sum += (double)bytes / 1000.0;
    }
    return sum / (double)n;
}

static int s_stats(rl_model *m, const float *x, int64_t n, int F, double *mu, double *cov)
{
    float *f = malloc(sizeof(float) * (size_t)(n * F));
    int rc = f ? rl_image_cnn_features(m, n, x, f) : rl_error_set(RL_ENOMEM, "out of memory");
    if (!rc)
        rc = rl_frechet_stats(f, n, F, mu, cov);
    free(f);
    return rc;
}

int main(int argc, char **argv)
{
    const char *model = NULL, *dir = RL_FMNIST_DIR;
    int64_t n = 2000;
    int check = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--model") && i + 1 < argc)
            model = argv[++i];
        else if (!strcmp(argv[i], "--fmnist") && i + 1 < argc)
            dir = argv[++i];
        else if (!strcmp(argv[i], "--n") && i + 1 < argc)
            n = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--check"))
            check = 1;
        else {
            fprintf(stderr, "usage: bench_fid --model DIR [--fmnist DIR] [--n N] [--check]\n");
            return 2;
        }
    }
    if (!model || n < 2 || n > 5000) {
        fprintf(stderr, "bench_fid: --model DIR is required and --n must be in [2, 5000]\n");
        return 2;
    }
    rl_model *m = rl_model_load_dir(model);
    rl_fmnist *test = m ? rl_fmnist_load(dir, "t10k", 0) : NULL;
    int F = m ? rl_image_cnn_feature_dim(m) : 0;
    if (!test || !F) {
        fprintf(stderr, "bench_fid: %s\n", m && test ? "--model is not an image_cnn" : rl_error_message());
        return 1;
    }
    float *ref = malloc(sizeof(float) * (size_t)(n * S_PIX)), *half = malloc(sizeof(float) * (size_t)(n * S_PIX)),
          *x = malloc(sizeof(float) * (size_t)(n * S_PIX));
    double *mu0 = malloc(sizeof(double) * (size_t)F), *c0 = malloc(sizeof(double) * (size_t)(F * F));
    double *mu = malloc(sizeof(double) * (size_t)F), *c = malloc(sizeof(double) * (size_t)(F * F));
    int rc = ref && half && x && mu0 && c0 && mu && c ? RL_OK : rl_error_set(RL_ENOMEM, "out of memory");
    for (int64_t i = 0; !rc && i < n; i++)
        if (!(rc = rl_clip_build(test, i, 1, 0, 0, ref + i * S_PIX)))
            rc = rl_clip_build(test, test->n / 2 + i, 1, 0, 0, half + i * S_PIX);
    if (!rc)
        rc = s_stats(m, ref, n, F, mu0, c0);
    static const double blur[4] = {0.5, 1.0, 1.5, 2.0}, noise[4] = {0.1, 0.2, 0.4, 0.8};
    double real = 0, fb[4], fn[4];
    for (int set = 0; !rc && set < 9; set++) {
        memcpy(x, half, sizeof(float) * (size_t)(n * S_PIX));
        if (set >= 1 && set <= 4)
            s_blur(x, n, blur[set - 1]);
        else if (set >= 5)
            s_noise(x, n, noise[set - 5]);
        double v = 0;
        if (!(rc = s_stats(m, x, n, F, mu, c)))
            rc = rl_frechet_distance(mu, c, mu0, c0, F, &v);
        if (rc)
            break;
        double kb = s_jpeg_kb(x, n);
        if (set == 0) {
            real = v;
            printf("bench: fid_real = %.4f\nbench: jpeg_kb_real = %.4f\n", v, kb);
        } else if (set <= 4) {
            fb[set - 1] = v;
            printf("bench: fid_blur_%.1f = %.4f\nbench: jpeg_kb_blur_%.1f = %.4f\n", blur[set - 1],
                   v, blur[set - 1], kb);
        } else {
            fn[set - 5] = v;
            printf("bench: fid_noise_%.1f = %.4f\nbench: jpeg_kb_noise_%.1f = %.4f\n",
                   noise[set - 5], v, noise[set - 5], kb);
        }
    }
    int bad = 0;
    if (!rc) {
        uint8_t black[S_PIX] = {0};
        size_t bytes = 0;
        if (!rl_image_jpeg_size(black, S_SIDE, S_SIDE, 1, 95, &bytes))
            printf("bench: jpeg_kb_black = %.4f\n", (double)bytes / 1000.0);
        printf("bench: fid_images_per_set = %lld\nbench: fid_features = %d\n", (long long)n, F);
        for (int i = 0; i < 4; i++) {
            bad |= fb[i] <= real || fn[i] <= real;
            bad |= i > 0 && (fb[i] <= fb[i - 1] || fn[i] <= fn[i - 1]);
        }
        printf("bench: fid_ordered = %d\n", !bad);
    } else
        fprintf(stderr, "bench_fid: %s\n", rl_error_message());
    free(ref), free(half), free(x), free(mu0), free(c0), free(mu), free(c);
    rl_fmnist_free(test);
    rl_model_free(m);
    return rc ? 1 : check && bad ? 1 : 0;
}
