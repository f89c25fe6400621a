/* diffusion_pretrain.c — the two pretraining recipes of the diffusion track
 * (seed 004), both on Fashion-MNIST through the actor role (FSDP over its
 * ranks), on the trainer loop (rl_recipe_run) with the phases
 *   batch         images and labels of the step; for the generator the
 *                 flow-matching pairs x_σ = (1 − σ)·x0 + σ·ε, σ ~ U(0, 1),
 *                 target ε − x0 (rl_flow_matching_pairs); with
 *                 model.cfg_dropout p, each row's prompt is the null prompt
 *                 (id model.num_prompts) with probability p (classifier-free
 *                 guidance's training; the draw: trainer.seed, step, row)
 *   update_actor  one optimiser step: the masked NLL of the image's class
 *                 (scorer_train: model.type image_classifier or image_cnn, the actor's
 *                 sft_step) or flow matching (flow_pretrain: model.type
 *                 clip_flow, the actor's flow_matching_step)
 * and after the last step the hook that saves <trainer.output_dir>/final
 * (model.safetensors + config.json: the reward's scorer_path, the GRPO
 * job's model.init_from); the scorer's accuracy on the test split follows
 * as a row of its own. No checkpoints: a lost worker replays from step 1. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/batch/diffusion.h"
#include "common/core/rng.h"
#include "driver/recipes/diffusion/diffusion_common.h"
#include "rlrt/error.h"
#include "rlrt/log.h"

static const char *const s_roles[] = {RL_ACTOR_ROLE, NULL};

typedef struct s_pre {
    rl_trainer *t; /* the loop's */
    rl_actor_job j;
    int generator; /* flow_pretrain */
    rl_fmnist_data_config data;
    rl_fmnist *train;
    int64_t batch, step, D;
    int frames; /* clip_flow: model.frames; scorer: 1 */
    double cfg_dropout; /* clip_flow: model.cfg_dropout (0 without the null prompt) */
    int32_t null_id;    /* clip_flow: model.num_prompts, the null prompt's id */
    double t0;
    float *clips, *x, *target, *sigma;
    int32_t *labels;
} s_pre;

static int s_open(void *st, rl_trainer *t)
{
    s_pre *s = st;
    s->t = t;
    s->t0 = rl_now_s();
    rl_batch_config batch;
    rl_clip_flow_model_config model = {.frames = 1};
    const rl_config_section *secs[3] = {&rl_fmnist_data_section, &rl_batch_section,
                                        &rl_clip_flow_model_section};
    void *const outs[3] = {&s->data, &batch, &model};
    int rc = rl_diffusion_read_sections(t->job, secs, outs, s->generator ? 3 : 2);
    int64_t limit = s->data.train_limit ? s->data.train_offset + s->data.train_limit : 0;
    if (!rc && !(s->train = rl_fmnist_load(s->data.dir, "train", limit))) {
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", rl_error_message());
        rc = RL_CFG_ERROR(t->job, &rl_fmnist_data_section, rl_fmnist_data_config, dir, rl_error_code(),
                          "%s", msg);
    }
    if (!rc && s->data.train_offset && s->data.train_offset >= s->train->n)
        rc = RL_CFG_ERROR(t->job, &rl_fmnist_data_section, rl_fmnist_data_config, train_offset, RL_ECONFIG,
                          "%lld skips all %lld training images", (long long)s->data.train_offset,
                          (long long)s->train->n);
    if (!rc && s->data.train_offset)
        rc = rl_fmnist_skip(s->train, s->data.train_offset);
    if (rc)
        return rc;
    s->batch = batch.train_batch_size;
    s->frames = (int)model.frames;
    s->cfg_dropout = s->generator && model.null_prompt ? model.cfg_dropout : 0.0;
    s->null_id = (int32_t)model.num_prompts;
    s->D = model.frames * RL_FMNIST_SIDE * RL_FMNIST_SIDE;
    size_t n = (size_t)s->batch * (size_t)s->D;
    s->clips = malloc(sizeof(float) * n);
    s->x = malloc(sizeof(float) * n);
    s->target = malloc(sizeof(float) * n);
    s->sigma = malloc(sizeof(float) * (size_t)s->batch);
    s->labels = malloc(sizeof(int32_t) * (size_t)s->batch);
    if (!s->clips || !s->x || !s->target || !s->sigma || !s->labels)
        return rl_error_set(RL_ENOMEM, "out of memory for a batch of %lld", (long long)s->batch);
    if ((rc = rl_actor_job_open(&s->j, t->d, t->job, 0, 0)))
        return rc;
    int W = rl_group_size(s->j.actor);
    if (s->batch % W)
        rc = RL_CFG_ERROR(t->job, &rl_batch_section, rl_batch_config, train_batch_size,
                          RL_ECONFIG, "%lld must be a multiple of the %d actor ranks", (long long)s->batch, W);
    return rc;
}

/* flow_pretrain's open (scorer_train's is s_open: the state starts zeroed,
 * and s_close zeroes it again for a reopen) */
static int s_open_flow(void *st, rl_trainer *t)
{
    ((s_pre *)st)->generator = 1;
    return s_open(st, t);
}

static void s_close(void *st, int reopen)
{
    (void)reopen;
    s_pre *s = st;
    rl_actor_job_close(&s->j);
    rl_fmnist_free(s->train);
    free(s->clips);
    free(s->x);
    free(s->target);
    free(s->sigma);
    free(s->labels);
    memset(s, 0, sizeof *s);
}

/* The step's request: the generator's (prompt ids, x_σ, σ, velocity target)
 * or the scorer's (labels, images). */
static rl_dataproto *s_request(s_pre *s, json_t *meta)
{
    rl_dataproto *dp = rl_dataproto_new();
    int64_t B = s->batch, s1[1] = {B}, s2[2] = {B, s->D};
    if (!dp || rl_dataproto_set_meta(dp, meta)) {
        rl_dataproto_free(dp);
        return NULL;
    }
    typedef struct s_src {
        const char *name;
        rl_dtype dtype;
        int ndim;
        const void *src;
    } s_src;
    const s_src gen[4] = {{RL_CF_PROMPT_IDS, RL_I32, 1, s->labels},
                          {RL_CF_X_T, RL_F32, 2, s->x},
                          {RL_CF_SIGMA, RL_F32, 1, s->sigma},
                          {RL_ACTOR_VELOCITY_TARGET, RL_F32, 2, s->target}};
    const s_src cls[2] = {{RL_IC_LABELS, RL_I32, 1, s->labels}, {RL_IC_IMAGES, RL_F32, 2, s->clips}};
    const s_src *t = s->generator ? gen : cls;
    for (int i = 0; i < (s->generator ? 4 : 2); i++) {
        rl_tensor *x = rl_dataproto_new_tensor(dp, t[i].name, t[i].dtype, t[i].ndim, t[i].ndim == 1 ? s1 : s2);
        if (!x) {
            rl_dataproto_free(dp);
            return NULL;
        }
        memcpy(rl_tensor_data(x), t[i].src, rl_tensor_nbytes(x));
    }
    return dp;
}

/* Images and labels of this step; for the generator the noisy clips too. */
static int s_phase_batch(void *arg)
{
    s_pre *s = arg;
    int rc = rl_fmnist_draw(s->train, s->t->seed, s->step, s->batch, s->frames, s->clips, s->labels);
    if (!rc && s->generator)
        rl_flow_matching_pairs(s->t->seed, s->step, s->clips, s->batch, s->D, s->x, s->target, s->sigma);
    for (int64_t b = 0; !rc && s->cfg_dropout > 0 && b < s->batch; b++) {
        rl_rng g;
        rl_rng_init(&g, s->t->seed ^ 0xcf6du, (uint64_t)s->step * 1000003u + (uint64_t)b);
        if (rl_rng_uniform(&g) < s->cfg_dropout)
            s->labels[b] = s->null_id;
    }
    return rc;
}

static int s_phase_update(void *arg)
{
    s_pre *s = arg;
    json_t *meta = json_pack("{s:I}", s->generator ? RL_ACTOR_GLOBAL_ROWS : RL_ACTOR_GLOBAL_TOKENS,
                             (json_int_t)s->batch);
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
    rl_metric_set_put(s->t->ms, s->generator ? "train/flow_matching_loss" : "train/nll", loss);
    rl_metric_set_put(s->t->ms, "actor/grad_norm", gnorm);
    rl_metric_set_put(s->t->ms, "actor/lr", lr);
    return RL_OK;
}

static int s_phases(void *st, int64_t step, rl_phase *out)
{
    ((s_pre *)st)->step = step;
    out[0] = (rl_phase){"batch", s_phase_batch, 0};
    out[1] = (rl_phase){"update_actor", s_phase_update, 0};
    return 2;
}

/* The loss every 50 steps and at the last. */
static int s_step_metrics(void *st, double t_step)
{
    (void)t_step;
    s_pre *s = st;
    double loss = 0;
    if (s->step % 50 == 0 || s->step == s->t->total_steps) {
        rl_metric_set_get(s->t->ms, s->generator ? "train/flow_matching_loss" : "train/nll", &loss);
        rl_log_info("%s step %lld/%lld: loss %.4f (%.0f s)", s->generator ? "flow_pretrain" : "scorer_train",
                    (long long)s->step, (long long)s->t->total_steps, loss, rl_now_s() - s->t0);
    }
    return RL_OK;
}

/* The saved scorer's accuracy on the test split (the driver loads it). */
static int s_scorer_accuracy(s_pre *s, const char *dir, double *acc)
{
    rl_fmnist *test = rl_fmnist_load(s->data.dir, "t10k", 0);
    rl_model *m = test ? rl_model_load_dir(dir) : NULL;
    int K = m ? rl_image_model_classes(m) : 0;
    float *x = malloc(sizeof(float) * 256 * 784), *p = malloc(sizeof(float) * 256 * (size_t)(K + 1));
    int rc = !test || !m ? rl_error_code() : !x || !p ? rl_error_set(RL_ENOMEM, "out of memory") : RL_OK;
    int64_t right = 0;
    for (int64_t i0 = 0; !rc && i0 < test->n; i0 += 256) {
        int64_t n = test->n - i0 < 256 ? test->n - i0 : 256;
        for (int64_t i = 0; !rc && i < n; i++)
            rc = rl_clip_build(test, i0 + i, 1, 0, 0, x + i * 784);
        if (!rc)
            rc = rl_image_model_probs(m, n, x, p);
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

/* After the last step: <output_dir>/final; the scorer's test accuracy as a
 * row of its own after the step's (logged here first). */
static int s_final(void *st)
{
    s_pre *s = st;
    char path[4096];
    snprintf(path, sizeof path, "%s/final", s->t->out_dir);
    if (rl_driver_interrupted(s->t->d))
        return RL_OK;
    int rc = rl_call_all(s->j.actor, RL_ACTOR_SAVE_MODEL, json_pack("{s:s}", RL_ACTOR_PATH, path));
    if (rc)
        return rc;
    rl_log_info("saved %s", path);
    if (s->generator)
        return RL_OK;
    double acc = 0;
    if ((rc = s_scorer_accuracy(s, path, &acc)) ||
        (s->step > 0 && (rc = rl_metrics_log(s->t->sink, s->step, s->t->ms))))
        return rc;
    rl_log_info("scorer accuracy on the Fashion-MNIST test split: %.4f", acc);
    rl_metric_set_clear(s->t->ms);
    return rl_metric_set_put(s->t->ms, RL_M_VAL_ACCURACY, acc);
}

static int s_hooks(void *st, rl_recipe_hook *out)
{
    int64_t last = ((s_pre *)st)->t->total_steps;
    out[0] = (rl_recipe_hook){last, last == 0, s_final};
    return 1;
}

static const rl_recipe_loop s_loop_scorer = {
    .state_size = sizeof(s_pre), .open = s_open, .phases = s_phases,
    .step_metrics = s_step_metrics, .hooks = s_hooks, .close = s_close,
};

static const rl_recipe_loop s_loop_flow = {
    .state_size = sizeof(s_pre), .open = s_open_flow, .phases = s_phases,
    .step_metrics = s_step_metrics, .hooks = s_hooks, .close = s_close,
};

static int s_prepare(rl_config *job) { return rl_actor_job_prepare(job, 1); }

static int s_prepare_flow(rl_config *job)
{
    int rc = s_prepare(job);
    const rl_image_size_config *sz = rc || !rl_config_section_get(job, &rl_actor_diffusion_section)
                                         ? NULL
                                         : rl_config_section_get(job, &rl_image_size_section);
    if (!sz)
        return rc ? rc : rl_error_code();
    if (sz->channels != 1 || sz->height != RL_FMNIST_SIDE || sz->width != RL_FMNIST_SIDE)
        rc = RL_CFG_ERROR(job, &rl_image_size_section, rl_image_size_config, height, RL_ECONFIG,
                          "Fashion-MNIST clips are 1 x 28 x 28 per frame, got %lld x %lld x %lld",
                          (long long)sz->channels, (long long)sz->height, (long long)sz->width);
    return rc;
}

const rl_recipe rl_recipe_scorer_train = {
    .name = "scorer_train",
    .summary = "the learned prompt-match scorer (image_classifier) or the FID's CNN (image_cnn) on Fashion-MNIST",
    .sections = (const rl_config_section *const[]){
        &rl_trainer_steps_section, &rl_trainer_recovery_section, &rl_model_base_section,
        &rl_image_size_section, &rl_image_classifier_model_section, &rl_image_cnn_model_section,
        &rl_fmnist_data_section, &rl_batch_section, &rl_actor_section, NULL},
    .changes = rl_scorer_train_changes,
    .roles = s_roles,
    .prepare = s_prepare,
    .loop = &s_loop_scorer,
};

const rl_recipe rl_recipe_flow_pretrain = {
    .name = "flow_pretrain",
    .summary = "flow-matching pretraining of the clip generator (clip_flow) on Fashion-MNIST",
    .sections = (const rl_config_section *const[]){
        &rl_trainer_steps_section, &rl_trainer_recovery_section, &rl_model_base_section,
        &rl_image_size_section, &rl_clip_flow_model_section, &rl_fmnist_data_section,
        &rl_batch_section, &rl_actor_section, &rl_actor_diffusion_section, NULL},
    .changes = rl_flow_pretrain_changes,
    .roles = s_roles,
    .prepare = s_prepare_flow,
    .loop = &s_loop_flow,
};
