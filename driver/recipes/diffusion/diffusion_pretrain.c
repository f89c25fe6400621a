/* diffusion_pretrain.c — the two pretraining recipes of the diffusion track
 * (seed 004), both on Fashion-MNIST through the actor role (FSDP over its
 * ranks):
 *   scorer_train   the learned prompt-match scorer (model.type
 *                  image_classifier): masked NLL of the image's class
 *                  (the actor's sft_step), then its accuracy on the test split
 *   flow_pretrain  the clip generator (model.type clip_flow) by flow matching:
 *                  x_σ = (1 − σ)·x0 + σ·ε, σ ~ U(0, 1), target ε − x0
 *                  (the actor's flow_matching_step)
 * Each saves <trainer.output_dir>/final (model.safetensors + config.json),
 * the reward's scorer_path and the GRPO job's model.init_from. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "driver/recipes/diffusion/diffusion_common.h"
#include "rlrt/error.h"
#include "rlrt/log.h"
#include "common/core/rng.h"
#include "rlrt/dtype.h"
#include "rlrt/nn/model.h"
#include "rlrt/tensor.h"
#include "rlrt/dataproto.h"
#include "rlrt/config.h"
#include "common/metrics/metrics.h"
#include "common/schema/trainer.h"

static const char *const s_roles[] = {RL_ACTOR_ROLE, NULL};

typedef struct s_pre {
    rl_actor_job j;
    rl_trainer t;
    rl_fmnist *data;
    int64_t batch, step;
    int frames;      /* clip_flow: model.frames; scorer: 1 */
    int64_t D;
    int generator;   /* flow_pretrain */
    float *clips, *x, *target, *sigma;
    int32_t *labels;
} s_pre;

static int s_open(s_pre *s, rl_driver *d, const rl_config *job, int generator)
{
    memset(s, 0, sizeof *s);
    s->generator = generator;
    const char *dir;
    int64_t limit, frames = 1;
    int rc = rl_trainer_open(&s->t, d, job);
    if (!rc && (rl_config_get_string(job, "data.dir", &dir) ||
                rl_config_get_int_in(job, "data.train_limit", 0, 1 << 30, &limit) ||
                rl_config_get_int_in(job, "data.train_batch_size", 1, 1 << 16, &s->batch) ||
                (generator && rl_config_get_int_in(job, "model.frames", 1, 64, &frames))))
        rc = rl_error_code();
    if (!rc && !(s->data = rl_fmnist_load(dir, "train", limit)))
        rc = rl_config_error_at(job, "data.dir", rl_error_code(), "%s", rl_error_message());
    if (rc)
        return rc;
    s->frames = (int)frames;
    s->D = frames * RL_FMNIST_SIDE * RL_FMNIST_SIDE;
    size_t n = (size_t)s->batch * (size_t)s->D;
    s->clips = malloc(sizeof(float) * n);
    s->x = malloc(sizeof(float) * n);
    s->target = malloc(sizeof(float) * n);
    s->sigma = malloc(sizeof(float) * (size_t)s->batch);
    s->labels = malloc(sizeof(int32_t) * (size_t)s->batch);
    if (!s->clips || !s->x || !s->target || !s->sigma || !s->labels)
        return rl_error_set(RL_ENOMEM, "out of memory for a batch of %lld", (long long)s->batch);
    int W = 0;
    if (!(rc = rl_actor_job_open(&s->j, d, job, 0, 0)))
        W = rl_group_size(s->j.actor);
    if (!rc && s->batch % W)
        rc = rl_config_error_at(job, "data.train_batch_size", RL_ECONFIG,
                                "%lld must be a multiple of the %d actor ranks", (long long)s->batch, W);
    return rc ? rc : rl_trainer_open_metrics(&s->t, 0);
}

static void s_close(s_pre *s)
{
    rl_trainer_close(&s->t);
    rl_actor_job_close(&s->j);
    rl_fmnist_free(s->data);
    free(s->clips);
    free(s->x);
    free(s->target);
    free(s->sigma);
    free(s->labels);
    memset(s, 0, sizeof *s); /* closing twice is harmless */
}

/* A request of tensors (names[i], dims) copied from bufs. */
static rl_dataproto *s_request(s_pre *s, json_t *meta)
{
    rl_dataproto *dp = rl_dataproto_new();
    int64_t B = s->batch, s1[1] = {B}, s2[2] = {B, s->D};
    if (!dp || rl_dataproto_set_meta(dp, meta)) {
        rl_dataproto_free(dp);
        return NULL;
    }
    rl_tensor *a, *b;
    if (s->generator) {
        rl_tensor *c, *e;
        a = rl_dataproto_new_tensor(dp, RL_CF_PROMPT_IDS, RL_I32, 1, s1);
        b = a ? rl_dataproto_new_tensor(dp, RL_CF_X_T, RL_F32, 2, s2) : NULL;
        c = b ? rl_dataproto_new_tensor(dp, RL_CF_SIGMA, RL_F32, 1, s1) : NULL;
        e = c ? rl_dataproto_new_tensor(dp, RL_ACTOR_VELOCITY_TARGET, RL_F32, 2, s2) : NULL;
        if (!e) {
            rl_dataproto_free(dp);
            return NULL;
        }
        memcpy(rl_tensor_data(b), s->x, sizeof(float) * (size_t)(B * s->D));
        memcpy(rl_tensor_data(c), s->sigma, sizeof(float) * (size_t)B);
        memcpy(rl_tensor_data(e), s->target, sizeof(float) * (size_t)(B * s->D));
    } else {
        a = rl_dataproto_new_tensor(dp, RL_IC_LABELS, RL_I32, 1, s1);
        b = a ? rl_dataproto_new_tensor(dp, RL_IC_IMAGES, RL_F32, 2, s2) : NULL;
        if (!b) {
            rl_dataproto_free(dp);
            return NULL;
        }
        memcpy(rl_tensor_data(b), s->clips, sizeof(float) * (size_t)(B * s->D));
    }
    memcpy(rl_tensor_data(a), s->labels, sizeof(int32_t) * (size_t)B);
    return dp;
}

/* Images and labels of this step; for the generator the noisy clips too. */
static int s_phase_batch(void *arg)
{
    s_pre *s = arg;
    int rc = rl_fmnist_draw(s->data, s->t.seed, s->step, s->batch, s->frames, s->clips, s->labels);
    if (rc || !s->generator)
        return rc;
    for (int64_t b = 0; b < s->batch; b++) {
        rl_rng g;
        rl_rng_init(&g, s->t.seed ^ 0x5157u, (uint64_t)s->step * 1000003u + (uint64_t)b);
        float sig = rl_rng_uniform(&g);
        s->sigma[b] = sig;
        for (int64_t i = 0; i < s->D; i++) {
            float x0 = s->clips[b * s->D + i], e = rl_rng_normal(&g);
            s->x[b * s->D + i] = (1.0f - sig) * x0 + sig * e;
            s->target[b * s->D + i] = e - x0;
        }
    }
    return RL_OK;
}

static int s_phase_update(void *arg)
{
    s_pre *s = arg;
    json_t *meta = s->generator
                       ? json_pack("{s:I}", RL_ACTOR_GLOBAL_ROWS, (json_int_t)s->batch)
                       : json_pack("{s:I}", RL_ACTOR_GLOBAL_TOKENS, (json_int_t)s->batch);
    rl_dataproto *req = meta ? s_request(s, meta) : NULL;
    if (!req)
        return rl_error_code();
    static const char *const keys[1] = {RL_ACTOR_M_LOSS};
    double loss, gnorm, lr;
    int rc = rl_actor_job_actor_step(&s->j, s->generator ? RL_ACTOR_FLOW_STEP : RL_ACTOR_SFT_STEP, req,
                              keys, 1, &loss, &gnorm, &lr);
    rl_dataproto_free(req);
    if (rc)
        return rc;
    rl_metric_set_put(s->t.ms, s->generator ? "train/flow_matching_loss" : "train/nll", loss);
    rl_metric_set_put(s->t.ms, "actor/grad_norm", gnorm);
    rl_metric_set_put(s->t.ms, "actor/lr", lr);
    return RL_OK;
}

static const rl_phase s_phases[] = {
    {"batch", s_phase_batch, 0},
    {"update_actor", s_phase_update, 0},
};

/* The saved scorer's accuracy on the test split (the driver loads it). */
static int s_scorer_accuracy(s_pre *s, const char *dir, double *acc)
{
    const char *data_dir;
    if (rl_config_get_string(s->t.job, "data.dir", &data_dir))
        return rl_error_code();
    rl_fmnist *test = rl_fmnist_load(data_dir, "t10k", 0);
    rl_model *m = test ? rl_model_load_dir(dir) : NULL;
    int K = m ? rl_image_classifier_classes(m) : 0;
    float *x = malloc(sizeof(float) * 256 * 784), *p = malloc(sizeof(float) * 256 * (size_t)(K + 1));
    int rc = !test || !m ? rl_error_code() : !x || !p ? rl_error_set(RL_ENOMEM, "out of memory")
                                                       : RL_OK;
    int64_t right = 0;
    for (int64_t i0 = 0; !rc && i0 < test->n; i0 += 256) {
        int64_t n = test->n - i0 < 256 ? test->n - i0 : 256;
        for (int64_t i = 0; !rc && i < n; i++)
            rc = rl_clip_build(test, i0 + i, 1, 0, 0, x + i * 784);
        if (!rc)
            rc = rl_image_classifier_probs(m, n, x, p);
        for (int64_t i = 0; !rc && i < n; i++) {
            int arg = 0;
            for (int k = 1; k < K; k++)
                arg = p[i * K + k] > p[i * K + arg] ? k : arg;
            right += arg == test->labels[i0 + i];
        }
    }
    if (!rc)
        *acc = (double)right / (double)test->n;
    free(x);
    free(p);
    rl_model_free(m);
    rl_fmnist_free(test);
    return rc;
}

static int s_run(rl_driver *d, const rl_config *job, int generator)
{
    s_pre s;
    rl_recovery rec;
    int rc = rl_recovery_open(&rec, job);
    while (!rc) { /* the start too is repeated when it loses a worker */
        if (!(rc = rl_recovery_mark(&rec, d)) && !(rc = s_open(&s, d, job, generator)))
            break;
        if (!rl_recovery_check(&rec, d, 0))
            break;
        s_close(&s);
        rc = RL_OK;
    }
    double t0 = rl_now_s();
    for (s.step = 1; !rc && s.step <= s.t.total_steps && !rl_driver_interrupted(d); s.step++) {
        rl_metric_set_clear(s.t.ms);
        if (!(rc = rl_recovery_mark(&rec, d)))
            rc = rl_phases_run(s_phases, 2, &s, s.t.ms);
        if (rc && rl_recovery_check(&rec, d, s.step)) {
            /* a worker was lost: no checkpoints here, replay from step 1 */
            s_close(&s);
            if (!(rc = rl_recovery_mark(&rec, d)) && !(rc = s_open(&s, d, job, generator)))
                s.step = 0;
            continue;
        }
        if (!rc && (s.step % 50 == 0 || s.step == s.t.total_steps)) {
            double loss = 0;
            rl_metric_set_get(s.t.ms, generator ? "train/flow_matching_loss" : "train/nll", &loss);
            rl_log_info("%s step %lld/%lld: loss %.4f (%.0f s)",
                        generator ? "flow_pretrain" : "scorer_train", (long long)s.step,
                        (long long)s.t.total_steps, loss, rl_now_s() - t0);
        }
        if (!rc)
            rc = rl_metrics_log(s.t.sink, s.step, s.t.ms);
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/final", s.t.out_dir);
    if (!rc && !rl_driver_interrupted(d) &&
        !(rc = rl_call_all(s.j.actor, RL_ACTOR_SAVE_MODEL, json_pack("{s:s}", RL_ACTOR_PATH, path))))
        rl_log_info("saved %s", path);
    double acc = 0;
    if (!rc && !generator && !rl_driver_interrupted(d) && !(rc = s_scorer_accuracy(&s, path, &acc))) {
        rl_log_info("scorer accuracy on the Fashion-MNIST test split: %.4f", acc);
        rl_metric_set_clear(s.t.ms);
        rl_metric_set_put(s.t.ms, RL_M_VAL_ACCURACY, acc);
        rc = rl_metrics_log(s.t.sink, s.t.total_steps, s.t.ms);
    }
    rl_recovery_close(&rec);
    s_close(&s);
    return rc;
}

static int s_run_scorer(rl_driver *d, const rl_config *job) { return s_run(d, job, 0); }
static int s_run_flow(rl_driver *d, const rl_config *job) { return s_run(d, job, 1); }

static int s_prepare(rl_config *job)
{
    int64_t x;
    int rc = rl_actor_job_prepare(job, 1);
    if (!rc && (rl_config_get_int_in(job, "data.train_limit", 0, 1 << 30, &x) ||
                rl_config_get_int_in(job, "data.train_batch_size", 1, 1 << 16, &x)))
        rc = rl_error_code();
    return rc;
}

static int s_prepare_flow(rl_config *job)
{
    int rc = s_prepare(job);
    int64_t v[3];
    if (!rc && (rl_config_get_int(job, "model.channels", &v[0]) ||
                rl_config_get_int(job, "model.height", &v[1]) ||
                rl_config_get_int(job, "model.width", &v[2])))
        rc = rl_error_code();
    if (!rc && (v[0] != 1 || v[1] != RL_FMNIST_SIDE || v[2] != RL_FMNIST_SIDE))
        rc = rl_config_error_at(job, "model.height", RL_ECONFIG,
                                "Fashion-MNIST clips are 1 x 28 x 28 per frame, got %lld x %lld x %lld",
                                (long long)v[0], (long long)v[1], (long long)v[2]);
    return rc;
}

const rl_recipe rl_recipe_scorer_train = {
    .name = "scorer_train",
    .summary = "the learned prompt-match scorer (image_classifier) on Fashion-MNIST",
    .sections = (const rl_config_section *const[]){&rl_trainer_recovery_section, &rl_actor_section, NULL},
    .defaults = (const char *const[]){RL_IMAGE_CLASSIFIER_MODEL_DEFAULTS, RL_DJ_DATA_DEFAULTS,
                                      "actor:\n"
                                      "  optim: {lr: 1.0e-3}\n"
                                      "trainer:\n"
                                      "  total_steps: 600\n"
                                      "  val_every: 0\n"
                                      "  output_dir: runs/fmnist_scorer\n",
                                      NULL},
    .roles = s_roles,
    .prepare = s_prepare,
    .run = s_run_scorer,
};

const rl_recipe rl_recipe_flow_pretrain = {
    .name = "flow_pretrain",
    .summary = "flow-matching pretraining of the clip generator (clip_flow) on Fashion-MNIST",
    .sections = (const rl_config_section *const[]){&rl_trainer_recovery_section, &rl_actor_section,
                                                   &rl_actor_diffusion_section, NULL},
    .defaults = (const char *const[]){RL_CLIP_FLOW_MODEL_DEFAULTS, RL_DJ_DATA_DEFAULTS,
                                      "actor:\n"
                                      "  optim: {lr: 1.0e-3}\n"
                                      "trainer:\n"
                                      "  total_steps: 2000\n"
                                      "  val_every: 0\n"
                                      "  output_dir: runs/fmnist_flow\n",
                                      NULL},
    .roles = s_roles,
    .prepare = s_prepare_flow,
    .run = s_run_flow,
};
