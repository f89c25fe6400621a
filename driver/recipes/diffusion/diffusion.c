/* diffusion.c — diffusion GRPO for clip generators (seed 004, MMDanceGRPO;
 * Flow-GRPO / DanceGRPO mathematics in common/algo/diffusion/diffusion.h,
 * the batch transforms in common/batch/diffusion.h). A step is this table
 * of phases:
 *   gen           train_batch_size prompts drawn by (seed, step), repeated
 *                 rollout.n times (one group per prompt), sampled by the
 *                 rollout ranks with the SDE: every latent, σ and per-step
 *                 log-prob recorded; init_same_noise shares the initial noise
 *                 within a group
 *   reward        one frame of each sample (data.reward_frame, 0: the first,
 *                 as the seed scores a video's first frame; data.reward_image
 *                 'mean': of the last step's ODE mean, the sample without
 *                 the last step's noise) scored by the reward ranks
 *                 (reward.reward_model: JPEG (in)compressibility, the learned
 *                 prompt-match scorer, a remote scorer), times reward_coeff;
 *                 algorithm.constraint pays one of the scorer's terms a
 *                 Lagrange multiplier λ, moved after each step by the
 *                 batch's shortfall
 *   adv           algorithm.adv_estimator's advantages (grpo: per group
 *                 (r − mean)/(std + 1e-8) with algorithm.reward_threshold,
 *                 or one global z-score)
 *   update_actor  per sample a seeded random subset of timestep_fraction of
 *                 the steps; per mini-batch one optimiser step of the clipped
 *                 per-timestep loss (the actor's update_diffusion; with
 *                 actor.use_kl_loss + kl_loss_coef·KL to the pretrained
 *                 reference's step, Flow-GRPO's beta)
 *   sync_weights  the new weights to the rollout ranks
 * then the hooks: validation (ODE samples of the fixed prompts, scored; with
 * data.fid_model their FID and a CNN judge's verdict, diffusion_fid.h; for
 * clips (model.frames > 1) val/frame_consistency, common/data/clips.h) and
 * the online test images (diffusion_images.h), and a checkpoint every
 * trainer.save_every steps. Every random draw is a function of (seed, step,
 * row), so trainer.resume continues exactly. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/batch/diffusion.h"
#include "common/reward/image_reward.h"
#include "driver/recipes/diffusion/diffusion_calls.h"
#include "driver/recipes/diffusion/diffusion_common.h"
#include "driver/recipes/diffusion/diffusion_fid.h"
#include "driver/recipes/diffusion/diffusion_images.h"
#include "rlrt/error.h"
#include "rlrt/log.h"

static const char *const s_roles[] = {RL_ACTOR_ROLE, RL_ROLLOUT_ROLE, RL_REWARD_ROLE, NULL};

/* The reward ranks' columns: their means are reward/<name> (all but the
 * score) and val/<name>. */
static const rl_batch_mean s_cols[8] = {
    {RL_REWARD_SCORE, "score"},         {RL_REWARD_JPEG_KB, "jpeg_kb"},
    {RL_REWARD_JPEG_KB_MATCHED, "jpeg_kb_matched"}, {RL_REWARD_INK, "ink"},
    {RL_REWARD_PROMPT_MATCH, "prompt_match"}, {RL_REWARD_ON_PROMPT, "on_prompt"},
    {RL_REWARD_REMOTE, "remote"},       {RL_REWARD_JUDGE_ON_PROMPT, "judge_on_prompt"},
};

/* algorithm.constraint.reward's term: its weight slot in reward.reward_model
 * and its column. */
static const int s_con_slot[3] = {-1, RL_IMG_ON_PROMPT, RL_IMG_PROMPT_MATCH};
static const char *const s_con_col[3] = {NULL, RL_REWARD_ON_PROMPT, RL_REWARD_PROMPT_MATCH};

/* The job's sections and the estimator the diffusion track uses. */
typedef struct s_cfg {
    rl_batch_config batch;
    rl_diffusion_data_config data;
    rl_diffusion_rollout_config ro;
    rl_diffusion_algorithm_config alg;
    rl_diffusion_constraint_config con;
    rl_clip_flow_model_config model;
    const rl_estimator *est;
} s_cfg;

static int s_read_cfg(const rl_config *job, s_cfg *c)
{
    static const rl_config_section *const secs[6] = {
        &rl_batch_section,     &rl_diffusion_data_section,       &rl_diffusion_rollout_section,
        &rl_diffusion_algorithm_section, &rl_diffusion_constraint_section, &rl_clip_flow_model_section};
    void *const outs[6] = {&c->batch, &c->data, &c->ro, &c->alg, &c->con, &c->model};
    int rc = rl_diffusion_read_sections(job, secs, outs, 6);
    if (!rc && !(c->est = rl_estimator_find(rl_estimators[c->alg.adv_estimator].name, RL_TRACK_DIFFUSION))) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s", rl_error_message());
        rc = RL_CFG_ERROR(job, &rl_estimator_section, rl_estimator_config, adv_estimator, RL_ECONFIG,
                          "%s", msg);
    }
    return rc;
}

/* What the sections cannot check alone: the roles' sections, the built-in
 * prompts, the constrained term among the rewards. */
static int s_prepare(rl_config *job)
{
    s_cfg c;
    double w[RL_IMG_REWARD_COUNT];
    rl_reward_config rw;
    int rc = s_read_cfg(job, &c);
    if (!rc && !(rc = rl_actor_job_prepare(job, c.data.updates_per_step)) &&
        !(rc = rl_reward_config_from_job(job, &rw)))
        rc = rl_image_reward_weights_from_job(job, w);
    const rl_reward_image_config *ri = rc ? NULL : rl_config_section_get(job, &rl_reward_image_section);
    if (!rc && (!ri || !rl_config_section_get(job, &rl_actor_diffusion_section) ||
                !rl_config_section_get(job, &rl_rollout_section)))
        rc = rl_error_code();
    if (!rc && c.model.num_prompts != RL_FMNIST_CLASSES)
        rc = RL_CFG_ERROR(job, &rl_clip_flow_model_section, rl_clip_flow_model_config, num_prompts,
                          RL_ECONFIG, "the built-in prompts are the %d Fashion-MNIST classes, got %lld",
                          RL_FMNIST_CLASSES, (long long)c.model.num_prompts);
    if (!rc && c.data.reward_frame >= c.model.frames)
        rc = RL_CFG_ERROR2(job, &rl_diffusion_data_section, rl_diffusion_data_config, reward_frame,
                           &rl_clip_flow_model_section, rl_clip_flow_model_config, frames, RL_ECONFIG,
                           "%s %lld is not a frame of the %lld-frame clips (%s)",
                           RL_CFG_PATH(&rl_diffusion_data_section, rl_diffusion_data_config, reward_frame),
                           (long long)c.data.reward_frame, (long long)c.model.frames,
                           RL_CFG_PATH(&rl_clip_flow_model_section, rl_clip_flow_model_config, frames));
    if (!rc && c.con.reward && w[s_con_slot[c.con.reward]] == 0)
        rc = RL_CFG_ERROR2(job, &rl_diffusion_constraint_section, rl_diffusion_constraint_config, reward,
                           &rl_reward_image_section, rl_reward_image_config, reward_model,
                           RL_ECONFIG, "%s is not a term of %s '%s': list it there (its weight is the "
                                       "starting multiplier)",
                          rl_image_reward_name(s_con_slot[c.con.reward]),
                          RL_CFG_PATH(&rl_reward_image_section, rl_reward_image_config, reward_model),
                          ri->reward_model);
    return rc;
}

/* ---- state -------------------------------------------------------------------------------------- */

typedef struct s_dg {
    rl_trainer *t; /* the loop's (rl_recipe_run) */
    rl_actor_job j;
    s_cfg c;
    rl_actor_diffusion_config df;
    rl_diffusion_adv_cfg adv;
    int64_t step, n, N, D; /* rollout.n; the chain's steps; floats per sample */
    int kl_on;             /* actor.use_kl_loss with kl_loss_coef > 0 */
    rl_diffusion_constraint con;
    /* this step */
    rl_dataproto *batch;
    int64_t *group;
    rl_online_images images; /* kept across a recovery */
    rl_diffusion_fid fid;    /* data.fid_model: val/fid and the CNN judge */
} s_dg;

/* The f32 (B) tensor `name` of the step's batch (B = its rows), or NULL. */
static float *s_col(s_dg *s, const char *name)
{
    rl_tensor *t = rl_dataproto_tensor_shaped(s->batch, name, RL_F32, 1,
                                              (int64_t[]){rl_dataproto_rows(s->batch)});
    return t ? rl_tensor_data(t) : NULL;
}

/* ---- phases ------------------------------------------------------------------------------------- */

static int s_phase_gen(void *arg)
{
    s_dg *s = arg;
    int64_t P = s->c.batch.train_batch_size, B = P * s->n, *ns, *rs;
    int32_t *ids;
    s->group = malloc(sizeof(int64_t) * (size_t)B);
    if (!s->group || !(s->batch = rl_diffusion_rows(B, &ids, &ns, &rs)))
        return s->group ? rl_error_code() : rl_error_set(RL_ENOMEM, "out of memory");
    rl_diffusion_train_rows(s->t->seed, s->step, P, s->n, RL_FMNIST_CLASSES, s->c.ro.init_same_noise, ids,
                            s->group, ns, rs);
    int rc = rl_diffusion_prompts(s->batch);
    return rc ? rc : rl_diffusion_sample(s->j.rollout, &s->batch, 0, s->D, &s->N);
}

static int s_phase_reward(void *arg)
{
    s_dg *s = arg;
    int64_t B = rl_dataproto_rows(s->batch);
    int rc = rl_diffusion_score(s->j.reward, &s->batch, s->N, s->D, s->c.data.reward_frame,
                                s->c.data.reward_image == RL_REWARD_IMAGE_MEAN);
    float *score = rc ? NULL : s_col(s, RL_REWARD_SCORE), *term;
    if (!rc && !score)
        return rl_error_wrap(rl_error_code(), "the reward ranks' scores");
    if (!rc && s->c.con.reward) {
        if (!(term = s_col(s, s_con_col[s->c.con.reward])))
            return rl_error_wrap(rl_error_code(), "%s: the reward ranks' '%s'",
                                 RL_CFG_PATH(&rl_diffusion_constraint_section,
                                             rl_diffusion_constraint_config, reward),
                                 s_con_col[s->c.con.reward]);
        rc = rl_diffusion_constraint_step(&s->con, term, score, B, s->t->ms);
    }
    if (!rc)
        rc = rl_diffusion_score_metrics(score, B, s->t->ms);
    if (!rc)
        rl_diffusion_column_means(s->batch, s_cols + 1, 7, "reward/", s->t->ms);
    return rc;
}

static int s_phase_adv(void *arg)
{
    s_dg *s = arg;
    int64_t B = rl_dataproto_rows(s->batch);
    const float *score = s_col(s, RL_REWARD_SCORE);
    rl_tensor *at = score ? rl_dataproto_new_tensor(s->batch, RL_ACTOR_ADVANTAGES, RL_F32, 1, (int64_t[]){B})
                          : NULL;
    return at ? rl_diffusion_advantages(&s->adv, score, s->group, B, rl_tensor_data(at), s->t->ms)
              : rl_error_code();
}

/* The trained steps (step mask) and the sampler's log-probs as old_logp,
 * then the optimiser steps. */
static int s_phase_update(void *arg)
{
    s_dg *s = arg;
    int64_t B = rl_dataproto_rows(s->batch), N = s->N, s2[2] = {B, N};
    rl_tensor *mt = rl_dataproto_new_tensor(s->batch, RL_CF_STEP_MASK, RL_F32, 2, s2);
    rl_tensor *ot = mt ? rl_dataproto_new_tensor(s->batch, RL_ACTOR_OLD_LOGP, RL_F32, 2, s2) : NULL;
    const rl_tensor *lp = ot ? rl_dataproto_tensor_shaped(s->batch, RL_CF_SAMPLE_LOGP, RL_F32, 2, s2) : NULL;
    if (!lp)
        return rl_error_code();
    memcpy(rl_tensor_data(ot), rl_tensor_data((rl_tensor *)lp), sizeof(float) * (size_t)(B * N));
    float *mask = rl_tensor_data(mt);
    int rc = rl_diffusion_step_mask(s->t->seed, s->step, s->df.timestep_fraction, B, N, mask);
    /* data.reward_image 'mean': the reward does not depend on the last
     * step's noise, so that step's log-prob gradient is pure noise (zero
     * in expectation): it leaves the policy gradient's steps; the KL keeps
     * it (the last step's velocity makes the scored image) */
    if (!rc && s->c.data.reward_image == RL_REWARD_IMAGE_MEAN) {
        rl_tensor *kt = rl_dataproto_new_tensor(s->batch, RL_CF_KL_STEP_MASK, RL_F32, 2, s2);
        if (!kt)
            return rl_error_code();
        memcpy(rl_tensor_data(kt), mask, sizeof(float) * (size_t)(B * N));
        for (int64_t b = 0; b < B; b++)
            mask[b * N + N - 1] = 0.0f;
    }
    return rc ? rc : rl_diffusion_update(&s->j, s->batch, s->c.data.mini_batch * s->n, s->kl_on, s->t->ms);
}

static int s_phase_sync(void *arg) { return rl_actor_job_sync_weights(&((s_dg *)arg)->j); }

/* ---- validation and online test ------------------------------------------------------------------ */

/* val/fid and the CNN's judgement of the validation's samples: their final
 * latents' frame data.reward_frame (the reward's). */
static int s_measure_fid(s_dg *s, const rl_dataproto *dp)
{
    int64_t B = rl_dataproto_rows(dp), P = RL_FMNIST_SIDE * RL_FMNIST_SIDE;
    const rl_tensor *lt = rl_dataproto_tensor_shaped(dp, RL_CF_LATENTS, RL_F32, 3, (int64_t[]){B, s->N + 1, s->D});
    const rl_tensor *it = lt ? rl_dataproto_tensor_shaped(dp, RL_CF_PROMPT_IDS, RL_I32, 1, (int64_t[]){B}) : NULL;
    float *x = it ? malloc(sizeof(float) * (size_t)(B * P)) : NULL;
    if (!x)
        return it ? rl_error_set(RL_ENOMEM, "out of memory") : rl_error_code();
    const float *lat = rl_tensor_data((rl_tensor *)lt);
    for (int64_t b = 0; b < B; b++)
        memcpy(x + b * P, lat + (b * (s->N + 1) + s->N) * s->D + s->c.data.reward_frame * P,
               sizeof(float) * (size_t)P);
    int rc = rl_diffusion_fid_measure(&s->fid, x, rl_tensor_data((rl_tensor *)it), B, s->t->ms);
    free(x);
    return rc;
}

/* val/frame_consistency of the validation's clips (frames > 1): their final
 * latents clamped to [−1, 1], rl_clip_frame_consistency with shifts up to the
 * data's largest move (docs/decisions/diffusion-clip-consistency.md). */
static int s_measure_consistency(s_dg *s, const rl_dataproto *dp)
{
    int64_t B = rl_dataproto_rows(dp);
    const rl_tensor *lt = rl_dataproto_tensor_shaped(dp, RL_CF_LATENTS, RL_F32, 3, (int64_t[]){B, s->N + 1, s->D});
    float *x = lt ? malloc(sizeof(float) * (size_t)(B * s->D)) : NULL;
    if (!x)
        return lt ? rl_error_set(RL_ENOMEM, "out of memory") : rl_error_code();
    const float *lat = rl_tensor_data((rl_tensor *)lt);
    for (int64_t b = 0; b < B; b++)
        for (int64_t i = 0; i < s->D; i++) {
            float v = lat[(b * (s->N + 1) + s->N) * s->D + i];
            x[b * s->D + i] = v < -1.0f ? -1.0f : v > 1.0f ? 1.0f : v;
        }
    double c = 0;
    int rc = rl_clip_frame_consistency(x, B, (int)s->c.model.frames, RL_FMNIST_SIDE, RL_CLIP_MAX_SPEED, &c);
    free(x);
    if (!rc)
        rl_metric_set_put(s->t->ms, "val/frame_consistency", c);
    return rc;
}

static int s_validate(void *ctx)
{
    s_dg *s = ctx;
    double t0 = rl_now_s();
    rl_dataproto *dp = NULL;
    int rc = rl_diffusion_eval(&s->j, s->t->seed, 0x7a11dull, s->c.data.val_per_prompt, s->D,
                               s->c.data.reward_frame, &s->N, &dp);
    if (rc)
        return rl_error_wrap(rc, "validation");
    rl_diffusion_column_means(dp, s_cols, 8, "val/", s->t->ms);
    if (s->fid.cnn && (rc = s_measure_fid(s, dp))) {
        rl_dataproto_free(dp);
        return rl_error_wrap(rc, "validation: the FID");
    }
    if (s->c.model.frames > 1 && (rc = s_measure_consistency(s, dp))) {
        rl_dataproto_free(dp);
        return rl_error_wrap(rc, "validation: the frame consistency");
    }
    rl_metric_set_put(s->t->ms, "timing_s/testing", rl_now_s() - t0);
    rl_dataproto_free(dp);
    static const char *const keys[9] = {"val/score",   "val/prompt_match", "val/on_prompt",
                                        "val/judge_on_prompt", "val/cnn_on_prompt", "val/fid",
                                        "val/jpeg_kb", "val/remote", "val/frame_consistency"};
    char line[512];
    int n = snprintf(line, sizeof line, "step %lld validation:", (long long)s->step);
    for (int k = 0; k < 9 && n < (int)sizeof line; k++) {
        double v;
        if (rl_metric_set_get(s->t->ms, keys[k], &v) == RL_OK)
            n += snprintf(line + n, sizeof line - (size_t)n, "  %s %.4f", keys[k] + 4, v);
    }
    rl_log_info("%s", line);
    return RL_OK;
}

/* The online test (seed: rollout.online.test every online.step.interval
 * steps): one ODE sample per prompt with fixed noise → the images. */
static int s_online(void *ctx)
{
    s_dg *s = ctx;
    rl_dataproto *dp = NULL;
    int rc = rl_diffusion_eval(&s->j, s->t->seed, 0x0471e5ull, 1, s->D, s->c.data.reward_frame, &s->N, &dp);
    if (!rc)
        rc = rl_online_images_write(&s->images, s->t->out_dir, s->step,
                                    rl_tensor_data(rl_dataproto_tensor(dp, RL_CF_LATENTS)), RL_FMNIST_CLASSES,
                                    s->N, s->c.model.frames, RL_FMNIST_SIDE);
    rl_dataproto_free(dp);
    return rc ? rl_error_wrap(rc, "online test") : RL_OK;
}

/* ---- the loop ------------------------------------------------------------------------------------------ */

static int s_open(void *st, rl_trainer *t)
{
    s_dg *s = st;
    const rl_config *job = t->job;
    s->t = t;
    const rl_rollout_config *ro = rl_config_section_get(job, &rl_rollout_section);
    const rl_actor_diffusion_config *df = ro ? rl_config_section_get(job, &rl_actor_diffusion_section) : NULL;
    int rc = df ? s_read_cfg(job, &s->c) : rl_error_code();
    if (!rc) {
        s->df = *df;
        s->n = ro->n;
        rc = rl_actor_job_open(&s->j, t->d, job, 1, 1);
    }
    s->D = s->c.model.frames * RL_FMNIST_SIDE * RL_FMNIST_SIDE;
    s->kl_on = s->j.actor_cfg.use_kl_loss && s->j.actor_cfg.kl_loss_coef > 0;
    s->adv = (rl_diffusion_adv_cfg){s->c.est, s->c.alg.use_group, s->c.alg.norm_adv_by_std_in_grpo,
                                    s->c.alg.reward_threshold, s->c.batch.train_batch_size};
    const rl_diffusion_constraint_config *k = &s->c.con;
    double w[RL_IMG_REWARD_COUNT];
    if (!rc && k->reward && !(rc = rl_image_reward_weights_from_job(job, w))) {
        const rl_reward_image_config *ri = rl_config_section_get(job, &rl_reward_image_section);
        rl_diffusion_constraint_init(&s->con, w[s_con_slot[k->reward]], ri->coeff, k->min, k->ki, k->kp,
                                     k->init, k->lambda_max);
    }
    const rl_fmnist_data_config *fm = rl_config_section_get(job, &rl_fmnist_data_section);
    if (!rc && !fm)
        rc = rl_error_code();
    if (!rc && s->c.data.fid_model[0] &&
        (rc = rl_diffusion_fid_open(&s->fid, s->c.data.fid_model, fm->dir, s->c.data.fid_real,
                                    RL_FMNIST_CLASSES * s->c.data.val_per_prompt))) {
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", rl_error_message());
        rc = RL_CFG_ERROR(job, &rl_diffusion_data_section, rl_diffusion_data_config, fid_model, rc, "%s", msg);
    }
    int64_t mini = s->c.data.mini_batch, W = s->j.actor ? rl_group_size(s->j.actor) : 1;
    if (!rc && (mini * s->n) % W)
        rc = RL_CFG_ERROR2(job, &rl_actor_section, rl_actor_config, mini_batch, &rl_rollout_section,
                           rl_rollout_config, n, RL_ECONFIG,
                           "a mini-batch of %lld rows (%s %lld × %s %lld) must be a multiple of "
                           "the %lld actor ranks", (long long)(mini * s->n),
                           RL_CFG_PATH(&rl_actor_section, rl_actor_config, mini_batch), (long long)mini,
                           RL_CFG_PATH(&rl_rollout_section, rl_rollout_config, n), (long long)s->n,
                           (long long)W);
    return rc;
}

/* The state of one incarnation closed; after the last (reopen 0) the
 * run's "before" grid too, which a recovery keeps. */
static void s_close(void *st, int reopen)
{
    s_dg *s = st;
    rl_actor_job_close(&s->j);
    rl_diffusion_fid_close(&s->fid);
    rl_online_images images = s->images;
    if (!reopen)
        rl_online_images_free(&images);
    memset(s, 0, sizeof *s);
    s->images = images;
}

/* Restores checkpoint `want` (-1: the newest; > 0: that step) with the
 * constraint's state. */
static int s_restore(void *st, int64_t want, int64_t *start)
{
    s_dg *s = st;
    json_t *extra = NULL;
    int rc = rl_actor_job_restore(&s->j, s->t, want, start, &extra);
    if (!rc && *start > 0 && s->c.con.reward)
        rc = rl_diffusion_constraint_restore(&s->con, extra, *start);
    json_decref(extra);
    s->step = *start;
    return rc;
}

static int s_save(void *st)
{
    s_dg *s = st;
    json_t *extra = json_pack("{s:I}", "weight_version", (json_int_t)s->j.sync.version);
    int rc = extra ? RL_OK : rl_error_set(RL_ENOMEM, "checkpoint: out of memory");
    if (!rc && s->c.con.reward) /* the constraint's state, when it is on */
        rc = rl_diffusion_constraint_save(&s->con, extra);
    if (!rc)
        rc = rl_trainer_save(s->t, s->j.actor, s->step, 0, s->step, extra);
    json_decref(extra);
    return rc;
}

static int s_phases(void *st, int64_t step, rl_phase *out)
{
    static const rl_phase phases[] = {
        {"gen", s_phase_gen, 0},          {"reward", s_phase_reward, 0},
        {"adv", s_phase_adv, 0},          {"update_actor", s_phase_update, 0},
        {"sync_weights", s_phase_sync, 0},
    };
    ((s_dg *)st)->step = step;
    memcpy(out, phases, sizeof phases);
    return (int)(sizeof phases / sizeof phases[0]);
}

/* validation (and at step 0, the pretrained model's) and the online test */
static int s_hooks(void *st, rl_recipe_hook *out)
{
    s_dg *s = st;
    int on = s->c.ro.online_test;
    out[0] = (rl_recipe_hook){s->t->val_every, 1, s_validate};
    out[1] = (rl_recipe_hook){on ? s->c.ro.online_interval : 0, on, s_online};
    return 2;
}

static void s_step_clear(void *st)
{
    s_dg *s = st;
    rl_dataproto_free(s->batch);
    free(s->group);
    s->batch = NULL;
    s->group = NULL;
}

static const rl_recipe_loop s_loop = {
    .state_size = sizeof(s_dg),
    .open = s_open, .restore = s_restore, .phases = s_phases, .hooks = s_hooks,
    .save = s_save, .step_clear = s_step_clear, .close = s_close,
};

const rl_recipe rl_recipe_diffusion = {
    .name = "diffusion",
    .summary = "diffusion GRPO (MMDanceGRPO): SDE rollouts, image rewards, per-timestep clipped updates",
    .sections = (const rl_config_section *const[]){
        &rl_trainer_steps_section, &rl_trainer_ckpt_section, &rl_trainer_recovery_section,
        &rl_model_base_section, &rl_image_size_section, &rl_clip_flow_model_section,
        &rl_batch_section, &rl_diffusion_data_section, &rl_diffusion_rollout_section,
        &rl_diffusion_algorithm_section, &rl_diffusion_constraint_section, &rl_estimator_section,
        &rl_group_norm_section, &rl_actor_section,
        &rl_actor_diffusion_section, &rl_rollout_section, &rl_rollout_flow_section, &rl_reward_section,
        &rl_reward_image_section, &rl_fmnist_data_section, NULL},
    .changes = rl_diffusion_changes,
    .roles = s_roles,
    .prepare = s_prepare,
    .loop = &s_loop,
};
