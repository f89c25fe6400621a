/* test_nn_conv.c — the convolutional kernels (common/nn/engine/ops_conv.h),
 * the image_cnn model kind (common/nn/models/image_cnn.h) and the Fréchet
 * distance (common/metrics/frechet.h) against the PyTorch / scipy reference
 * (tests/reference/gen_nn_conv.py): conv2d forward and every gradient (two
 * geometries: padding 1 stride 1, padding 0 stride 2 with a 2×3 kernel),
 * max pooling with a floor, ReLU; the CNN's log-probs, features,
 * probabilities and every parameter gradient (whole batch and micro-batches);
 * the Fréchet statistics and distance against pytorch-fid's formula with
 * scipy's sqrtm; errors named.
 *
 * Tolerances (float32 engine vs float64 reference): values atol 1e-5 + rtol
 * 1e-4; gradients atol 1e-4·max|g_ref| + 1e-6, rtol 1e-3; Fréchet rtol 1e-6
 * (double throughout). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "common/metrics/frechet.h"
#include "common/nn/engine/ops_conv.h"
#include "common/nn/models/image_classifier.h"
#include "common/nn/models/image_cnn.h"
#include "common/nn/models/image_net.h"
#include "rlrt/config.h"
#include "rlrt/dataproto.h"
#include "rlrt/error.h"
#include "rlrt/nn/model.h"
#include "rlrt/nn/params.h"
#include "rlrt/tensor.h"
#include "tests/common/golden.h"

#define KERNELS "tests/golden/nn_conv/kernels.safetensors"
#define CNN "tests/golden/nn_conv/image_cnn.safetensors"
#define FRECHET "tests/golden/nn_conv/frechet.safetensors"

static rl_golden *s_load(const char *path)
{
    rl_golden *g = rl_golden_load(path);
    if (!g)
        fail_msg("%s", rl_error_message());
    return g;
}

static double s_max_abs(const double *x, int64_t n)
{
    double m = 0;
    for (int64_t i = 0; i < n; i++)
        m = fabs(x[i]) > m ? fabs(x[i]) : m;
    return m;
}

/* got (n floats) against the golden's f64 `name`; gradients (grad 1) with the
 * gradient tolerance; `times` scales the reference (accumulation). */
static void s_expect(const rl_golden *g, const char *name, const float *got, int64_t n, int grad, double times)
{
    int64_t m;
    double *want = rl_golden_f64(g, name, &m);
    assert_int_equal(m, n);
    for (int64_t i = 0; i < n; i++)
        want[i] *= times;
    double atol = grad ? 1e-4 * s_max_abs(want, n) + 1e-6 : 1e-5;
    int64_t bad = rl_check_close_f32(name, got, want, n, atol, grad ? 1e-3 : 1e-4);
    free(want);
    if (bad)
        fail_msg("%s: %lld mismatches", name, (long long)bad);
}

/* ---- kernels --------------------------------------------------------------------------------- */

static void s_conv_case(const rl_golden *g, const char *tag)
{
    char key[64];
    snprintf(key, sizeof key, "conv_%s", tag);
    const char *geo = rl_golden_meta(g, key);
    assert_non_null(geo);
    rl_conv2d_shape s;
    assert_int_equal(sscanf(geo, "%d,%d,%d,%d,%d,%d,%d,%d,%d", &s.N, &s.C, &s.H, &s.W, &s.OC, &s.KH, &s.KW,
                            &s.pad, &s.stride), 9);
    int64_t nx, nw, nb, ny;
#define S_GET(var, what, np)                       \
    snprintf(key, sizeof key, "conv_%s." what, tag); \
    float *var = rl_golden_f32(g, key, np)
    S_GET(x, "x", &nx);
    S_GET(w, "w", &nw);
    S_GET(b, "b", &nb);
    S_GET(coef, "coef", &ny);
#undef S_GET
    int OH = rl_conv2d_out_h(&s), OW = rl_conv2d_out_w(&s);
    assert_int_equal(ny, (int64_t)s.N * s.OC * OH * OW);
    float *y = calloc((size_t)ny, sizeof(float)), *dx = calloc((size_t)nx, sizeof(float)),
          *dw = calloc((size_t)nw, sizeof(float)), *db = calloc((size_t)nb, sizeof(float));
    assert_int_equal(rl_conv2d_forward(y, x, w, b, &s), RL_OK);
    snprintf(key, sizeof key, "conv_%s.y", tag);
    s_expect(g, key, y, ny, 0, 1);
    /* twice: the backward accumulates */
    for (int rep = 1; rep <= 2; rep++) {
        assert_int_equal(rl_conv2d_backward(dx, dw, db, coef, x, w, &s), RL_OK);
        snprintf(key, sizeof key, "conv_%s.dx", tag);
        s_expect(g, key, dx, nx, 1, rep);
        snprintf(key, sizeof key, "conv_%s.dw", tag);
        s_expect(g, key, dw, nw, 1, rep);
        snprintf(key, sizeof key, "conv_%s.db", tag);
        s_expect(g, key, db, nb, 1, rep);
    }
    /* NULL gradients are skipped; the others still right */
    memset(dw, 0, sizeof(float) * (size_t)nw);
    assert_int_equal(rl_conv2d_backward(NULL, dw, NULL, coef, x, w, &s), RL_OK);
    snprintf(key, sizeof key, "conv_%s.dw", tag);
    s_expect(g, key, dw, nw, 1, 1);
    free(x), free(w), free(b), free(coef), free(y), free(dx), free(dw), free(db);
}

static void test_conv2d_golden(void **state)
{
    (void)state;
    rl_golden *g = s_load(KERNELS);
    s_conv_case(g, "a");
    s_conv_case(g, "b");
    rl_golden_free(g);
}

static void test_pool_relu_golden(void **state)
{
    (void)state;
    rl_golden *g = s_load(KERNELS);
    int N, C, H, W, k;
    assert_int_equal(sscanf(rl_golden_meta(g, "pool"), "%d,%d,%d,%d,%d", &N, &C, &H, &W, &k), 5);
    int64_t nx, ny;
    float *x = rl_golden_f32(g, "pool.x", &nx), *coef = rl_golden_f32(g, "pool.coef", &ny);
    assert_int_equal(ny, (int64_t)N * C * (H / k) * (W / k));
    float *y = calloc((size_t)ny, sizeof(float)), *dx = calloc((size_t)nx, sizeof(float));
    int32_t *arg = calloc((size_t)ny, sizeof(int32_t));
    rl_maxpool2d_forward(y, arg, x, N, C, H, W, k);
    s_expect(g, "pool.y", y, ny, 0, 1);
    rl_maxpool2d_backward(dx, coef, arg, N, C, H, W, k);
    s_expect(g, "pool.dx", dx, nx, 1, 1);
    free(x), free(coef), free(y), free(dx), free(arg);

    x = rl_golden_f32(g, "relu.x", &nx);
    coef = rl_golden_f32(g, "relu.coef", NULL);
    y = calloc((size_t)nx, sizeof(float));
    dx = calloc((size_t)nx, sizeof(float));
    rl_relu_forward(y, x, nx);
    s_expect(g, "relu.y", y, nx, 0, 1);
    rl_relu_backward(dx, coef, x, nx);
    s_expect(g, "relu.dx", dx, nx, 1, 1);
    free(x), free(coef), free(y), free(dx);
    rl_golden_free(g);
}

/* ---- the image_cnn kind ----------------------------------------------------------------------- */

static rl_model *s_cnn(const rl_golden *g)
{
    char yaml[512];
    snprintf(yaml, sizeof yaml,
             "model: {type: image_cnn, channels: %s, height: %s, width: %s, conv1_channels: %s, "
             "conv2_channels: %s, hidden_size: %s, num_classes: %s, init_from: ''}\n",
             rl_golden_meta(g, "channels"), rl_golden_meta(g, "height"), rl_golden_meta(g, "width"),
             rl_golden_meta(g, "conv1"), rl_golden_meta(g, "conv2"), rl_golden_meta(g, "features"),
             rl_golden_meta(g, "classes"));
    rl_config *job = rl_config_parse_string(yaml, strlen(yaml), "<test>");
    assert_non_null(job);
    rl_model *m = rl_model_build(job, 1);
    rl_config_free(job);
    if (!m)
        fail_msg("%s", rl_error_message());
    int64_t np;
    float *p = rl_golden_f32(g, "params", &np);
    assert_int_equal(np, rl_model_num_params(m));
    memcpy(rl_model_params(m), p, sizeof(float) * (size_t)np);
    free(p);
    return m;
}

static rl_dataproto *s_cnn_batch(const rl_golden *g, int64_t *B, int64_t *D)
{
    const rl_golden_array *ia = rl_golden_get(g, "images");
    assert_non_null(ia);
    *B = ia->shape[0];
    *D = ia->shape[1];
    float *x = rl_golden_f32(g, "images", NULL);
    int64_t *y = rl_golden_i64(g, "labels", NULL);
    rl_dataproto *dp = rl_dataproto_new();
    rl_tensor *ti = rl_dataproto_new_tensor(dp, RL_IC_IMAGES, RL_F32, 2, (int64_t[]){*B, *D});
    rl_tensor *tl = rl_dataproto_new_tensor(dp, RL_IC_LABELS, RL_I32, 1, (int64_t[]){*B});
    memcpy(rl_tensor_data(ti), x, sizeof(float) * (size_t)(*B * *D));
    for (int64_t b = 0; b < *B; b++)
        ((int32_t *)rl_tensor_data(tl))[b] = (int32_t)y[b];
    free(x);
    free(y);
    return dp;
}

typedef struct s_lin {
    const float *coef;
} s_lin;

static int s_linear_loss(void *ctx, const rl_model_io *out, rl_model_io *grad, double *loss)
{
    const s_lin *c = ctx;
    for (int64_t r = 0; r < out->rows; r++) {
        double w = c->coef[out->row0 + r];
        *loss += w * out->q[RL_Q_LOGP][r];
        grad->q[RL_Q_LOGP][r] = (float)w;
    }
    return RL_OK;
}

static void test_image_cnn_golden(void **state)
{
    (void)state;
    rl_golden *g = s_load(CNN);
    rl_model *m = s_cnn(g);
    int64_t B, D;
    rl_dataproto *dp = s_cnn_batch(g, &B, &D);
    int F = rl_image_cnn_feature_dim(m), K = rl_image_model_classes(m);
    assert_int_equal(F, atoi(rl_golden_meta(g, "features")));
    assert_int_equal(rl_image_model_dim(m), D);
    float *coef = rl_golden_f32(g, "coef", NULL);
    for (int64_t micro = 0; micro <= 2; micro += 2) {
        rl_model_pass pass = {.temperature = 1, .micro_batch = micro};
        rl_dataproto *out = NULL;
        assert_int_equal(rl_model_forward(m, dp, RL_Q_BIT(RL_Q_LOGP), &pass, &out), 0);
        s_expect(g, "logp", rl_tensor_data(rl_dataproto_tensor(out, "logp")), B, 0, 1);
        rl_dataproto_free(out);
        s_lin c = {coef};
        rl_model_zero_grad(m);
        double loss = 0;
        assert_int_equal(rl_model_forward_backward(m, dp, RL_Q_BIT(RL_Q_LOGP), &pass, s_linear_loss, &c, &loss),
                         0);
        const rl_param_manifest *man = rl_model_manifest(m);
        for (int v = 0; v < man->count; v++) {
            char key[RL_PARAM_NAME_MAX + 16];
            snprintf(key, sizeof key, "grad.%s", man->views[v].name);
            s_expect(g, key, rl_model_grads(m) + man->views[v].offset, man->views[v].numel, 1, 1);
        }
    }
    float *x = rl_golden_f32(g, "images", NULL), *f = calloc((size_t)(B * F), sizeof(float)),
          *p = calloc((size_t)(B * K), sizeof(float));
    assert_int_equal(rl_image_cnn_features(m, B, x, f), RL_OK);
    s_expect(g, "features", f, B * F, 0, 1);
    assert_int_equal(rl_image_model_probs(m, B, x, p), RL_OK);
    s_expect(g, "probs", p, B * K, 0, 1);
    /* a pixel that is not finite is named */
    x[D + 3] = NAN;
    assert_int_not_equal(rl_image_cnn_features(m, B, x, f), RL_OK);
    assert_non_null(strstr(rl_error_message(), "image 1 holds nan at pixel 3"));
    free(x), free(f), free(p), free(coef);
    rl_dataproto_free(dp);
    rl_model_free(m);
    rl_golden_free(g);
}

static void test_image_cnn_errors(void **state)
{
    (void)state;
    const char *yaml = "model: {type: image_cnn, channels: 1, height: 3, width: 8, num_classes: 10, hidden_size: 8, "
                       "conv1_channels: 2, conv2_channels: 2, init_from: ''}\n";
    rl_config *job = rl_config_parse_string(yaml, strlen(yaml), "<test>");
    assert_non_null(job);
    assert_null(rl_model_build(job, 1));
    assert_non_null(strstr(rl_error_message(), "model.height and model.width must be at least 4, got 3 x 8"));
    rl_config_free(job);
    /* not a CNN */
    yaml = "model: {type: image_classifier, channels: 1, height: 4, width: 4, hidden_size: 8, num_classes: 3, "
           "init_from: ''}\n";
    job = rl_config_parse_string(yaml, strlen(yaml), "<test>");
    rl_model *m = rl_model_build(job, 1);
    assert_non_null(m);
    float x[16] = {0}, f[8];
    assert_int_equal(rl_image_cnn_feature_dim(m), 0);
    assert_int_equal(rl_image_model_dim(m), 16);
    assert_int_equal(rl_image_cnn_features(m, 1, x, f), RL_EINVAL);
    assert_non_null(strstr(rl_error_message(), "not an image_cnn model (image_classifier)"));
    rl_model_free(m);
    rl_config_free(job);
}

/* ---- the Fréchet distance -------------------------------------------------------------------- */

static void test_frechet_golden(void **state)
{
    (void)state;
    rl_golden *g = s_load(FRECHET);
    int d = atoi(rl_golden_meta(g, "dim"));
    int64_t n1, n2, n3;
    float *x1 = rl_golden_f32(g, "x1", &n1), *x2 = rl_golden_f32(g, "x2", &n2), *x3 = rl_golden_f32(g, "x3", &n3);
    n1 /= d, n2 /= d, n3 /= d;
    double *mu1 = malloc(sizeof(double) * (size_t)d), *c1 = malloc(sizeof(double) * (size_t)(d * d));
    double *mu2 = malloc(sizeof(double) * (size_t)d), *c2 = malloc(sizeof(double) * (size_t)(d * d));
    assert_int_equal(rl_frechet_stats(x1, n1, d, mu1, c1), RL_OK);
    double *want = rl_golden_f64(g, "mu1", NULL);
    assert_int_equal(rl_check_close_f64("mu1", mu1, want, d, 1e-12, 1e-9), 0);
    free(want);
    want = rl_golden_f64(g, "cov1", NULL);
    assert_int_equal(rl_check_close_f64("cov1", c1, want, d * d, 1e-12, 1e-9), 0);
    free(want);
    double v;
    assert_int_equal(rl_frechet_stats(x2, n2, d, mu2, c2), RL_OK);
    assert_int_equal(rl_frechet_distance(mu1, c1, mu2, c2, d, &v), RL_OK);
    assert_true(fabs(v - rl_golden_scalar(g, "fid12")) <= 1e-6 * fabs(rl_golden_scalar(g, "fid12")));
    /* symmetric */
    double back;
    assert_int_equal(rl_frechet_distance(mu2, c2, mu1, c1, d, &back), RL_OK);
    assert_true(fabs(v - back) <= 1e-9 * fabs(v));
    assert_int_equal(rl_frechet_stats(x3, n3, d, mu2, c2), RL_OK);
    assert_int_equal(rl_frechet_distance(mu1, c1, mu2, c2, d, &v), RL_OK);
    assert_true(fabs(v - rl_golden_scalar(g, "fid13")) <= 1e-6 * fabs(rl_golden_scalar(g, "fid13")));
    assert_true(v < rl_golden_scalar(g, "fid12"));
    /* a set against itself: 0 (to rounding) */
    assert_int_equal(rl_frechet_distance(mu1, c1, mu1, c1, d, &v), RL_OK);
    assert_true(fabs(v) < 1e-9);
    /* a rank-deficient covariance (3 rows of 6 features) is still a finite, positive distance */
    assert_int_equal(rl_frechet_stats(x3, 3, d, mu2, c2), RL_OK);
    assert_int_equal(rl_frechet_distance(mu1, c1, mu2, c2, d, &v), RL_OK);
    assert_true(isfinite(v) && v > 0);
    /* errors named */
    assert_int_equal(rl_frechet_stats(x1, 1, d, mu1, c1), RL_EINVAL);
    assert_non_null(strstr(rl_error_message(), "need at least 2 rows"));
    x1[2 * d + 4] = INFINITY;
    assert_int_equal(rl_frechet_stats(x1, n1, d, mu1, c1), RL_ENUMERIC);
    assert_non_null(strstr(rl_error_message(), "row 2, feature 4 is inf"));
    c1[d + 2] = NAN;
    assert_int_equal(rl_frechet_distance(mu1, c1, mu2, c2, d, &v), RL_ENUMERIC);
    assert_non_null(strstr(rl_error_message(), "covariance 1 holds a value that is not finite at (1, 2)"));
    free(x1), free(x2), free(x3), free(mu1), free(c1), free(mu2), free(c2);
    rl_golden_free(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_conv2d_golden),     cmocka_unit_test(test_pool_relu_golden),
        cmocka_unit_test(test_image_cnn_golden),  cmocka_unit_test(test_image_cnn_errors),
        cmocka_unit_test(test_frechet_golden),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
