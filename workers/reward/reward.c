/* workers/reward/reward.c — the reward role (contract: workers/reward/reward.h):
 * verifiable rewards (common/reward/reward.h) for a batch of decoded responses, and
 * image rewards for the diffusion track (JPEG (in)compressibility, the
 * learned prompt-match scorer, a remote scorer such as HPSv3). The reward.*
 * section is read and range-checked once, in init, where the scorer is
 * loaded and the remote client made; a call carries no settings. */
#include "workers/roles.h"

#include "rlrt/error.h"
#include "common/reward/reward.h"
#include "common/reward/reward_config.h"
#include "common/schema/reward_image.h"
#include "workers/reward/reward.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/data/clips.h"
#include "common/image/image.h"
#include "common/reward/image_reward.h"
#include "rlrt/log.h"
#include "common/nn/models/image_classifier.h"
#include "common/nn/models/image_net.h"
#include "common/reward/scorer.h"

typedef struct s_state {
    rl_reward_config cfg;
    char *default_source; /* owned copy (the config tree may be replaced) */
    /* image rewards (absent: the job has no image-reward section) */
    int image;
    rl_reward_image_config img; /* its strings cleared after init */
    double weight[RL_IMG_REWARD_COUNT];
    rl_model *scorer[RL_REWARD_MAX_SCORERS]; /* the ensemble of reward.scorer_path */
    int n_scorers;
    rl_model *judge;
    rl_scorer_client *remote;
} s_state;

static void s_free_state(s_state *st)
{
    if (!st)
        return;
    for (int i = 0; i < st->n_scorers; i++)
        rl_model_free(st->scorer[i]);
    rl_model_free(st->judge);
    rl_scorer_client_free(st->remote);
    free(st->default_source);
    free(st);
}

/* reward.jpeg_contrast's choices (as_is|matched) and the matched gain's cap. */
enum { S_JPEG_AS_IS = 0, S_JPEG_MATCHED = 1 };
#define S_JPEG_MAX_GAIN 8.0

/* An error located at the image-reward key of `field`. */
#define S_IMG_ERROR(ctx, field, code, ...) \
    RL_CFG_ERROR((ctx)->config, &rl_reward_image_section, rl_reward_image_config, field, code, __VA_ARGS__)

/* The image classifier (an image_classifier MLP or an image_cnn) saved at
 * `path` into *out (errors at the key of the field at `offset`); an empty
 * path leaves *out NULL. */
static int s_load_classifier(rl_worker_ctx *ctx, size_t offset, const char *path, rl_model **out)
{
    if (!path || !*path)
        return RL_OK;
    if (!(*out = rl_model_load_dir(path)))
        return rl_config_key_error(ctx->config, &rl_reward_image_section, offset, rl_error_code(),
                                   "loading the classifier: %s", rl_error_message());
    if (!rl_image_net_of(*out))
        return rl_config_key_error(ctx->config, &rl_reward_image_section, offset, RL_ECONFIG,
                                   "%s holds a %s model, not an image classifier "
                                   "(image_classifier or image_cnn)", path,
                                   rl_model_kind_name(*out));
    return RL_OK;
}

/* The image-reward section: the scorer, the judge and the remote client. */
static int s_init_image(rl_worker_ctx *ctx, s_state *st)
{
    const rl_reward_image_config *img = rl_config_section_get(ctx->config, &rl_reward_image_section);
    int rc = img ? rl_image_reward_weights_from_job(ctx->config, st->weight) : rl_error_code();
    if (rc)
        return rc;
    st->img = *img;
    st->image = 1;
    /* reward.scorer_path: one directory, or several separated by commas (an ensemble) */
    const char *p = img->scorer_path ? img->scorer_path : "";
    while (*p) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        char dir[4096];
        if (len == 0)
            return S_IMG_ERROR(ctx, scorer_path, RL_ECONFIG, "an empty path in the list '%s'",
                               img->scorer_path);
        if (len >= sizeof dir || st->n_scorers == RL_REWARD_MAX_SCORERS)
            return S_IMG_ERROR(ctx, scorer_path, RL_ECONFIG, "at most %d scorers, each path under %zu bytes",
                               RL_REWARD_MAX_SCORERS, sizeof dir);
        memcpy(dir, p, len);
        dir[len] = 0;
        if ((rc = s_load_classifier(ctx, offsetof(rl_reward_image_config, scorer_path), dir,
                                    &st->scorer[st->n_scorers])))
            return rc;
        st->n_scorers++;
        p = e ? e + 1 : p + len;
    }
    if ((rc = s_load_classifier(ctx, offsetof(rl_reward_image_config, judge_path), img->judge_path,
                                &st->judge)))
        return rc;
    if (img->endpoint && *img->endpoint) {
        st->remote = rl_scorer_client_new(img->endpoint, (int)img->timeout_ms, (int)img->retries,
                                          img->raw ? RL_SCORER_RAW : RL_SCORER_PNG);
        if (!st->remote)
            return S_IMG_ERROR(ctx, endpoint, rl_error_code(), "%s", rl_error_message());
    }
    /* the config tree may be replaced: keep nothing borrowed */
    st->img.reward_model = st->img.scorer_path = st->img.judge_path = st->img.endpoint = NULL;
    return RL_OK;
}

static int s_init(rl_worker_ctx *ctx)
{
    s_state *st = calloc(1, sizeof *st);
    if (!st)
        return rl_error_set(RL_ENOMEM, "reward: out of memory");
    int rc = rl_reward_config_from_job(ctx->config, &st->cfg);
    if (!rc && st->cfg.default_source && !(st->default_source = strdup(st->cfg.default_source)))
        rc = rl_error_set(RL_ENOMEM, "reward: out of memory");
    st->cfg.default_source = st->default_source;
    if (!rc && rl_config_has_section(ctx->config, &rl_reward_image_section))
        rc = s_init_image(ctx, st);
    if (rc) {
        s_free_state(st);
        return rc;
    }
    ctx->user = st;
    return RL_OK;
}

static void s_fini(rl_worker_ctx *ctx)
{
    s_free_state(ctx->user);
    ctx->user = NULL;
}

static const rl_column *s_string_column(const rl_dataproto *in, const char *name)
{
    const rl_column *c = rl_dataproto_column(in, name);
    if (!c) {
        rl_error_set(RL_ENOTFOUND,
                     "missing column '%s' (expected a string column, one "
                     "cell per row)",
                     name);
        return NULL;
    }
    if (rl_column_get_type(c) != RL_COL_STRING) {
        rl_error_set(RL_EDTYPE, "column '%s' is %s, expected string", name,
                     rl_column_type_name(rl_column_get_type(c)));
        return NULL;
    }
    return c;
}

static int s_compute_reward(rl_worker_ctx *ctx, const rl_dataproto *in, rl_dataproto **out)
{
    const s_state *st = ctx->user;
    const rl_reward_config cfg = st->cfg;
    const rl_column *resp = s_string_column(in, RL_REWARD_RESPONSE);
    const rl_column *gt = resp ? s_string_column(in, RL_REWARD_GROUND_TRUTH) : NULL;
    const rl_column *src = gt ? s_string_column(in, RL_REWARD_DATA_SOURCE) : NULL;
    if (!src)
        return rl_error_code();
    int64_t rows = rl_dataproto_rows(in);
    if (rows < 0)
        rows = 0;
    const float *extra = NULL;
    if (rl_dataproto_tensor(in, RL_REWARD_EXTRA)) {
        const rl_tensor *t = rl_dataproto_tensor_shaped(in, RL_REWARD_EXTRA, RL_F32, 1, NULL);
        if (!t)
            return rl_error_code();
        extra = rl_tensor_data((rl_tensor *)t);
        for (int64_t i = 0; i < rows; i++)
            if (!isfinite(extra[i]))
                return rl_error_set(RL_ENUMERIC, "tensor '%s': row %lld holds %g (expected a "
                                                 "finite reward)", RL_REWARD_EXTRA, (long long)i,
                                    (double)extra[i]);
    }
    rl_dataproto *o = rl_dataproto_new();
    if (!o)
        return rl_error_code();
    int64_t shape[1] = {rows};
    rl_tensor *ts = rl_dataproto_new_tensor(o, RL_REWARD_SCORE, RL_F32, 1, shape);
    rl_tensor *ta = ts ? rl_dataproto_new_tensor(o, RL_REWARD_ACCURACY, RL_F32, 1, shape) : NULL;
    rl_tensor *tf = ta ? rl_dataproto_new_tensor(o, RL_REWARD_FORMAT, RL_F32, 1, shape) : NULL;
    if (!tf) {
        rl_dataproto_free(o);
        return rl_error_code();
    }
    float *score = rl_tensor_data(ts), *acc = rl_tensor_data(ta), *fmt = rl_tensor_data(tf);
    for (int64_t i = 0; i < rows; i++) {
        rl_reward_result r;
        int rc = rl_reward_score(&cfg, rl_column_str(src, i), rl_column_str(resp, i),
                                 rl_column_str(gt, i), extra ? (double)extra[i] : 0.0, &r);
        if (rc) {
            rl_dataproto_free(o);
            return rl_error_wrap(rc, "row %lld", (long long)i);
        }
        score[i] = (float)r.score;
        acc[i] = (float)r.accuracy;
        fmt[i] = (float)r.format;
    }
    *out = o;
    return RL_OK;
}

/* ---- image rewards ------------------------------------------------------------------------ */

/* A new (B) f32 output tensor `name`. */
static float *s_out(rl_dataproto *o, const char *name, int64_t B)
{
    int64_t shape[1] = {B};
    rl_tensor *t = rl_dataproto_new_tensor(o, name, RL_F32, 1, shape);
    return t ? rl_tensor_data(t) : NULL;
}

/* The classifiers m[0..nm) on images fq (B, D) with their prompts, their
 * class probabilities averaged (an ensemble; one model is itself): pm[b]
 * (may be NULL) = p(prompt's class | image b), on[b] = 1 when the argmax is
 * that class, else 0. cls (B) is scratch. */
static int s_classify(rl_model *const *m, int nm, const char *what, const float *fq, int64_t B,
                      int64_t D, const char *const *prompts, int *cls, float *pm, float *on)
{
    int K = rl_image_model_classes(m[0]);
    for (int j = 0; j < nm; j++)
        if (rl_image_model_dim(m[j]) != D || rl_image_model_classes(m[j]) != K || K > 16)
            return rl_error_set(RL_ESHAPE, "the %s (%d of %d) takes images of %lld floats into %d "
                                           "classes; the images have %lld floats, and every member "
                                           "needs the first one's %d classes (at most 16)",
                                what, j + 1, nm, (long long)rl_image_model_dim(m[j]),
                                rl_image_model_classes(m[j]), (long long)D, K);
    for (int64_t b = 0; b < B; b++)
        if ((cls[b] = rl_fmnist_prompt_class(prompts[b])) < 0 || cls[b] >= K)
            return rl_error_wrap(RL_EINVAL, "row %lld", (long long)b);
    int rc = RL_OK;
    for (int64_t b0 = 0; !rc && b0 < B; b0 += 256) {
        int64_t n = B - b0 < 256 ? B - b0 : 256;
        float *p = malloc(sizeof(float) * (size_t)(n * K) * 2), *q = p ? p + n * K : NULL;
        rc = p ? rl_image_model_probs(m[0], n, fq + b0 * D, p)
               : rl_error_set(RL_ENOMEM, "out of memory");
        for (int j = 1; !rc && j < nm; j++) {
            rc = rl_image_model_probs(m[j], n, fq + b0 * D, q);
            for (int64_t i = 0; !rc && i < n * K; i++)
                p[i] += q[i];
        }
        for (int64_t i = 0; !rc && nm > 1 && i < n * K; i++)
            p[i] /= (float)nm;
        for (int64_t i = 0; !rc && i < n; i++) {
            int arg = 0;
            for (int k = 1; k < K; k++)
                arg = p[i * K + k] > p[i * K + arg] ? k : arg;
            if (pm)
                pm[b0 + i] = p[i * K + cls[b0 + i]];
            on[b0 + i] = arg == cls[b0 + i] ? 1.0f : 0.0f;
        }
        free(p);
    }
    return rc;
}

static int s_compute_image_reward(rl_worker_ctx *ctx, const rl_dataproto *in, rl_dataproto **out)
{
    const s_state *st = ctx->user;
    if (!st->image)
        return rl_error_set(RL_ESTATE, "%s: the job has no image-reward section (%s)",
                            RL_REWARD_IMAGE_COMPUTE, rl_reward_image_section.name);
    const rl_tensor *ti = rl_dataproto_tensor_shaped(in, RL_REWARD_IMAGES, RL_F32, 4, NULL);
    const rl_column *pc = ti ? s_string_column(in, RL_REWARD_PROMPT) : NULL;
    if (!pc)
        return rl_error_code();
    int64_t B = ti->shape[0], C = ti->shape[1], H = ti->shape[2], W = ti->shape[3];
    if ((C != 1 && C != 3) || H < 1 || W < 1 || H > 4096 || W > 4096)
        return rl_error_set(RL_ESHAPE, "tensor '%s' must be (B, 1 or 3, H, W) with H, W in [1, "
                                       "4096], got (%lld, %lld, %lld, %lld)", RL_REWARD_IMAGES,
                            (long long)B, (long long)C, (long long)H, (long long)W);
    const float *x = rl_tensor_data((rl_tensor *)ti);
    int64_t D = C * H * W;
    for (int64_t i = 0; i < B * D; i++)
        if (!isfinite(x[i]))
            return rl_error_set(RL_ENUMERIC, "corrupt image: row %lld holds %g at (c, y, x) = "
                                             "(%lld, %lld, %lld)", (long long)(i / D), (double)x[i],
                                (long long)(i % D / (H * W)), (long long)(i % (H * W) / W),
                                (long long)(i % W));
    const double *w = st->weight;
    int want_jpeg = w[RL_IMG_JPEG_COMPRESSIBILITY] != 0 || w[RL_IMG_JPEG_INCOMPRESSIBILITY] != 0;
    int *cls = malloc(sizeof(int) * (size_t)(B > 0 ? B : 1));
    uint8_t *hwc = malloc((size_t)(B > 0 ? B : 1) * (size_t)D);       /* (B, H, W, C) */
    float *fq = malloc(sizeof(float) * (size_t)(B > 0 ? B : 1) * (size_t)D); /* quantised */
    const char **prompts = malloc(sizeof(char *) * (size_t)(B > 0 ? B : 1));
    rl_dataproto *o = rl_dataproto_new();
    int rc = cls && hwc && fq && prompts && o
                 ? RL_OK
                 : rl_error_set(RL_ENOMEM, "%s: out of memory", RL_REWARD_IMAGE_COMPUTE);
    float *score = rc ? NULL : s_out(o, RL_REWARD_SCORE, B);
    if (!rc && !score)
        rc = rl_error_code();
    /* pixels as an image file would hold them: u8 (B, H, W, C), and the
     * floats the scorer sees decoded back from them */
    for (int64_t b = 0; !rc && b < B; b++) {
        for (int64_t c = 0; c < C; c++)
            for (int64_t i = 0; i < H * W; i++) {
                uint8_t u;
                rl_clip_to_u8(x + b * D + c * H * W + i, 1, &u);
                hwc[b * D + i * C + c] = u;
                fq[b * D + c * H * W + i] = (float)u / 127.5f - 1.0f;
            }
        prompts[b] = rl_column_str(pc, b);
        cls[b] = -1;
    }
    for (int64_t b = 0; !rc && b < B; b++)
        score[b] = 0;
    if (!rc && want_jpeg) {
        /* jpeg_contrast matched: the score is the kB of the image brought up
         * to the ink level (reward.jpeg_ink); kb stays the image's own */
        int matched = st->img.jpeg_contrast == S_JPEG_MATCHED;
        float *kb = s_out(o, RL_REWARD_JPEG_KB, B);
        float *ink = kb ? s_out(o, RL_REWARD_INK, B) : NULL;
        float *kbm = ink && matched ? s_out(o, RL_REWARD_JPEG_KB_MATCHED, B) : ink ? kb : NULL;
        uint8_t *lifted = kbm && matched ? malloc((size_t)D) : NULL;
        rc = !kbm ? rl_error_code()
             : matched && !lifted
                 ? rl_error_set(RL_ENOMEM, "%s: out of memory", RL_REWARD_IMAGE_COMPUTE)
                 : RL_OK;
        for (int64_t b = 0; !rc && b < B; b++) {
            size_t bytes = 0;
            if ((rc = rl_image_jpeg_size(hwc + b * D, (int)W, (int)H, (int)C, (int)st->img.quality,
                                         &bytes))) {
                rc = rl_error_wrap(rc, "row %lld", (long long)b);
                break;
            }
            kb[b] = (float)((double)bytes / 1000.0);
            ink[b] = (float)rl_image_ink(hwc + b * D, (size_t)D);
            if (matched) {
                rl_image_match_ink(hwc + b * D, (size_t)D, st->img.jpeg_ink, S_JPEG_MAX_GAIN,
                                   lifted, NULL);
                if ((rc = rl_image_jpeg_size(lifted, (int)W, (int)H, (int)C,
                                             (int)st->img.quality, &bytes))) {
                    rc = rl_error_wrap(rc, "row %lld (contrast matched)", (long long)b);
                    break;
                }
                kbm[b] = (float)((double)bytes / 1000.0);
            }
            score[b] += (float)((w[RL_IMG_JPEG_INCOMPRESSIBILITY] - w[RL_IMG_JPEG_COMPRESSIBILITY]) *
                                kbm[b]);
        }
        free(lifted);
    }
    if (!rc && st->n_scorers) {
        float *pm = s_out(o, RL_REWARD_PROMPT_MATCH, B);
        float *on = pm ? s_out(o, RL_REWARD_ON_PROMPT, B) : NULL;
        rc = on ? s_classify(st->scorer, st->n_scorers, "scorer", fq, B, D, prompts, cls, pm, on)
                : rl_error_code();
        for (int64_t b = 0; !rc && b < B; b++)
            score[b] += (float)(w[RL_IMG_PROMPT_MATCH] * pm[b] + w[RL_IMG_ON_PROMPT] * on[b]);
    }
    if (!rc && st->judge) { /* reported, never scored */
        float *jon = s_out(o, RL_REWARD_JUDGE_ON_PROMPT, B);
        rc = jon ? s_classify(&st->judge, 1, "judge", fq, B, D, prompts, cls, NULL, jon)
                 : rl_error_code();
    }
    if (!rc && w[RL_IMG_REMOTE] != 0) {
        float *rs = s_out(o, RL_REWARD_REMOTE, B);
        rc = rs ? rl_scorer_score(st->remote, hwc, B, (int)W, (int)H, (int)C, prompts, rs, NULL)
                : rl_error_code();
        for (int64_t b = 0; !rc && b < B; b++)
            score[b] += (float)(w[RL_IMG_REMOTE] * rs[b]);
    }
    for (int64_t b = 0; !rc && b < B; b++)
        score[b] = (float)(st->img.coeff * score[b]);
    free(cls);
    free(hwc);
    free(fq);
    free(prompts);
    if (rc) {
        rl_dataproto_free(o);
        return rl_error_wrap(rc, "reward/%d %s", ctx->rank, RL_REWARD_IMAGE_COMPUTE);
    }
    *out = o;
    return RL_OK;
}

static const rl_method s_methods[] = {
    {RL_REWARD_COMPUTE, s_compute_reward},
    {RL_REWARD_IMAGE_COMPUTE, s_compute_image_reward},
    {NULL, NULL},
};

const rl_worker_role rl_role_reward = {RL_REWARD_ROLE, s_methods, s_init, s_fini};
