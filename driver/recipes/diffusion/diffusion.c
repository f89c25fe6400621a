/* diffusion.c — diffusion GRPO for clip generators (seed 004, MMDanceGRPO;
 * Flow-GRPO / DanceGRPO mathematics in common/algo/diffusion/diffusion.h). A step is this
 * table of phases (rl_phases_run times each one):
 *   gen           train_batch_size prompts drawn by (seed, step), repeated
 *                 rollout.n times (one group per prompt), sampled by the
 *                 rollout ranks with the SDE: every latent, σ and per-step
 *                 log-prob recorded; init_same_noise shares the initial noise
 *                 within a group
 *   reward        the first frame of each sample scored by the reward ranks
 *                 (reward.reward_model: JPEG (in)compressibility, the learned
 *                 prompt-match scorer, a remote scorer), times reward_coeff
 *                 algorithm.constraint holds one of the scorer's terms
 *                 (on_prompt or prompt_match) at a floor: that term's weight
 *                 becomes a Lagrange multiplier λ, moved after each step by
 *                 the batch's shortfall (rl_constraint_pi_update)
 *   adv           group advantages (r − mean)/(std + 1e-8) with
 *                 algorithm.reward_threshold, or one global z-score
 *   update_actor  per sample a seeded random subset of timestep_fraction of
 *                 the steps; per mini-batch one optimiser step of the clipped
 *                 per-timestep loss (the actor's update_diffusion: new log-prob,
 *                 ratio, clip_range, ppo_adv_clip_max, ppo_max_grad_norm; with
 *                 actor.use_kl_loss + kl_loss_coef·KL to the pretrained
 *                 reference's step, Flow-GRPO's beta)
 *   sync_weights  the new weights to the rollout ranks
 * then metrics, validation (ODE samples of the fixed prompts, scored), the
 * online test images (PNG grid + animated GIF under <output_dir>/online/) and
 * a checkpoint every trainer.save_every steps. Every random draw is a
 * function of (seed, step, row), so trainer.resume continues exactly.
 * Config keys mirror the seed's (docs/ARCHITECTURE.md has the table). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "driver/recipes/diffusion/diffusion_common.h"
#include "common/algo/diffusion/diffusion.h"
#include "common/image/image.h"
#include "common/reward/image_reward.h"
#include "rlrt/error.h"
#include "rlrt/log.h"
#include "common/core/rng.h"
#include "rlrt/dtype.h"
#include "rlrt/tensor.h"
#include "rlrt/dataproto.h"
#include "rlrt/config.h"
#include "common/metrics/metrics.h"
#include "common/core/util.h"
#include "common/schema/trainer.h"

static const char *const s_roles[] = {RL_ACTOR_ROLE, RL_ROLLOUT_ROLE, RL_REWARD_ROLE, NULL};

/* ---- options ------------------------------------------------------------------------------ */

typedef struct s_opts {
    int64_t batch, n, val_per_prompt, online_interval, frames, num_prompts;
    int init_same_noise, use_group, norm_by_std, online_test;
    double reward_threshold;
    int con_term; /* algorithm.constraint.reward: 0 none, 1 on_prompt, 2 prompt_match */
    double con_min, con_ki, con_kp, con_init, con_max;
} s_opts;

#define S_OFF(f) offsetof(s_opts, f)
static const rl_config_spec s_spec[] = {
    {"data.train_batch_size", RL_CFG_INT, S_OFF(batch), 1, 1 << 16, 0, NULL},
    {"data.val_per_prompt", RL_CFG_INT, S_OFF(val_per_prompt), 1, 4096, 0, NULL},
    {"rollout.n", RL_CFG_INT, S_OFF(n), 1, 1 << 16, 0, NULL},
    {"rollout.init_same_noise", RL_CFG_BOOL, S_OFF(init_same_noise), 0, 0, 0, NULL},
    {"rollout.online.test", RL_CFG_BOOL, S_OFF(online_test), 0, 0, 0, NULL},
    {"rollout.online.step.interval", RL_CFG_INT, S_OFF(online_interval), 1, 1000000000, 0, NULL},
    {"algorithm.use_group", RL_CFG_BOOL, S_OFF(use_group), 0, 0, 0, NULL},
    {"algorithm.norm_adv_by_std_in_grpo", RL_CFG_BOOL, S_OFF(norm_by_std), 0, 0, 0, NULL},
    {"algorithm.reward_threshold", RL_CFG_NUM, S_OFF(reward_threshold), -1e30, 1e30, 0, NULL},
    {"model.frames", RL_CFG_INT, S_OFF(frames), 1, 64, 0, NULL},
    {"model.num_prompts", RL_CFG_INT, S_OFF(num_prompts), 1, 1 << 20, 0, NULL},
    {"algorithm.constraint.reward", RL_CFG_ENUM, S_OFF(con_term), 0, 0, 0,
     "none|on_prompt|prompt_match"},
    {"algorithm.constraint.min", RL_CFG_NUM, S_OFF(con_min), 0, 1, 0, NULL},
    {"algorithm.constraint.ki", RL_CFG_NUM, S_OFF(con_ki), 0, 1e6, 0, NULL},
    {"algorithm.constraint.kp", RL_CFG_NUM, S_OFF(con_kp), 0, 1e6, 0, NULL},
    {"algorithm.constraint.init", RL_CFG_NUM, S_OFF(con_init), -1, 1e6, 0, NULL},
    {"algorithm.constraint.lambda_max", RL_CFG_NUM, S_OFF(con_max), 0, 1e6, 0, NULL},
};

/* The constrained term of algorithm.constraint.reward (con_term ≥ 1): its
 * weight slot in reward.reward_model and its output column. */
static const int s_con_slot[3] = {-1, RL_IMG_ON_PROMPT, RL_IMG_PROMPT_MATCH};
static const char *const s_con_col[3] = {NULL, RL_REWARD_ON_PROMPT, RL_REWARD_PROMPT_MATCH};
static const char *const s_con_name[3] = {"none", "on_prompt", "prompt_match"};

static int s_read_opts(const rl_config *job, s_opts *o)
{
    memset(o, 0, sizeof *o);
    int rc = rl_config_read(job, s_spec, sizeof s_spec / sizeof s_spec[0], o);
    if (!rc && o->num_prompts != RL_FMNIST_CLASSES)
        rc = rl_config_error_at(job, "model.num_prompts", RL_ECONFIG,
                                "the built-in prompts are the %d Fashion-MNIST classes, got %lld",
                                RL_FMNIST_CLASSES, (long long)o->num_prompts);
    if (!rc && o->con_init < 0 && o->con_init != -1)
        rc = rl_config_error_at(job, "algorithm.constraint.init", RL_ECONFIG,
                                "the starting multiplier is >= 0, or -1 for the term's weight in "
                                "reward.reward_model; got %g", o->con_init);
    double w[RL_IMG_REWARD_COUNT];
    if (!rc && o->con_term && !(rc = rl_image_reward_weights_from_job(job, w)) &&
        w[s_con_slot[o->con_term]] == 0)
        rc = rl_config_error_at(job, "algorithm.constraint.reward", RL_ECONFIG,
                                "%s is not a term of reward.reward_model '%s': list it there "
                                "(its weight is the starting multiplier)",
                                s_con_name[o->con_term],
                                ((const rl_reward_image_config *)rl_config_section_get(job, &rl_reward_image_section))
                                    ->reward_model);
    return rc;
}

static int s_prepare(rl_config *job)
{
    s_opts o;
    int64_t mini, epochs;
    int rc = rl_config_get_int_in(job, "actor.ppo_mini_batch_size", 1, 1 << 24, &mini) ||
                     rl_config_get_int_in(job, "actor.ppo_epochs", 1, 10000, &epochs)
                 ? rl_error_code()
                 : RL_OK;
    if (!rc)
        rc = s_read_opts(job, &o);
    if (!rc && o.batch % mini)
        rc = rl_config_error_at(job, "actor.ppo_mini_batch_size", RL_ECONFIG,
                                "%lld must divide data.train_batch_size %lld", (long long)mini,
                                (long long)o.batch);
    if (!rc)
        rc = rl_actor_job_prepare(job, epochs * (o.batch / mini));
    const rl_rollout_flow_config *ro = NULL;
    rl_reward_config rw;
    double w[RL_IMG_REWARD_COUNT];
    if (!rc && (!rl_config_section_get(job, &rl_rollout_section) ||
                !(ro = rl_config_section_get(job, &rl_rollout_flow_section))))
        rc = rl_error_code();
    if (!rc && !(rc = rl_reward_config_from_job(job, &rw)))
        rc = rl_image_reward_weights_from_job(job, w);
    if (!rc && !(ro->noise_level > 0))
        rc = rl_config_error_at(job, "rollout.noise_level", RL_ECONFIG,
                                "GRPO samples with the SDE: the noise level must be > 0");
    int64_t x;
    int b;
    if (!rc && (rl_config_get_int_in(job, "trainer.save_every", 0, 1000000000, &x) ||
                rl_config_get_bool(job, "trainer.resume", &b)))
        rc = rl_error_code();
    return rc;
}

/* ---- state ------------------------------------------------------------------------------------ */

typedef struct s_dg {
    rl_trainer *t; /* the loop's (rl_recipe_run) */
    rl_actor_job j;
    s_opts o;
    rl_actor_diffusion_config df;
    int64_t step, N, D, mini;
    int kl_on; /* actor.use_kl_loss with kl_loss_coef > 0 */
    /* algorithm.constraint: the multiplier λ of the constrained term, which
     * the reward ranks weigh with con_w; scores are reward_coeff-scaled */
    rl_constraint_pi con;
    double con_w, coeff;
    /* this step */
    rl_dataproto *batch;
    int64_t *group;
    uint8_t *before; /* the step-0 online grid (first frames), for before/after */
    int bw, bh;
} s_dg;

/* Rows: prompt ids, noise and SDE seeds, prompt texts. */
static rl_dataproto *s_rows(const int32_t *ids, const int64_t *nseed, const int64_t *rseed,
                            int64_t B)
{
    rl_dataproto *dp = rl_dataproto_new();
    int64_t s1[1] = {B};
    rl_tensor *ti = dp ? rl_dataproto_new_tensor(dp, RL_CF_PROMPT_IDS, RL_I32, 1, s1) : NULL;
    rl_tensor *tn = ti ? rl_dataproto_new_tensor(dp, RL_CF_NOISE_SEEDS, RL_I64, 1, s1) : NULL;
    rl_tensor *tr = tn ? rl_dataproto_new_tensor(dp, RL_CF_ROW_SEEDS, RL_I64, 1, s1) : NULL;
    rl_column *pc = tr ? rl_dataproto_new_column(dp, RL_REWARD_PROMPT, RL_COL_STRING) : NULL;
    if (!pc) {
        rl_dataproto_free(dp);
        return NULL;
    }
    memcpy(rl_tensor_data(ti), ids, sizeof(int32_t) * (size_t)B);
    memcpy(rl_tensor_data(tn), nseed, sizeof(int64_t) * (size_t)B);
    memcpy(rl_tensor_data(tr), rseed, sizeof(int64_t) * (size_t)B);
    for (int64_t b = 0; b < B; b++)
        if (rl_column_set_str(pc, b, rl_fmnist_prompt(ids[b]))) {
            rl_dataproto_free(dp);
            return NULL;
        }
    return dp;
}

/* Samples `rows` on the rollout ranks (greedy: the ODE), adds the chain. */
static int s_sample(s_dg *s, rl_dataproto **rows, int greedy)
{
    static const char *const in[3] = {RL_CF_PROMPT_IDS, RL_CF_NOISE_SEEDS, RL_CF_ROW_SEEDS};
    rl_dataproto *req = rl_dataproto_request(*rows, in, 3, NULL, 0,
                                             json_pack("{s:i}", RL_ROLLOUT_GREEDY, greedy)),
                 *gen = NULL;
    int rc = req ? rl_group_call_sync(s->j.rollout, RL_ROLLOUT_GENERATE, RL_DISPATCH_DP_COMPUTE, req,
                                      &gen)
                 : rl_error_code();
    rl_dataproto_free(req);
    if (rc)
        return rc;
    const rl_tensor *lt = rl_dataproto_tensor_shaped(gen, RL_CF_LATENTS, RL_F32, 3,
                                                     (int64_t[]){rl_dataproto_rows(*rows), -1, s->D});
    if (!lt) {
        rl_dataproto_free(gen);
        return rl_error_wrap(rl_error_code(), "the rollout's samples");
    }
    s->N = lt->shape[1] - 1;
    return rl_dataproto_union_into(rows, gen);
}

/* First frames (B, 1, 28, 28) of the final latents, then the reward ranks. */
static int s_score(s_dg *s, rl_dataproto **rows)
{
    int64_t B = rl_dataproto_rows(*rows), N = s->N, F = RL_FMNIST_SIDE * RL_FMNIST_SIDE;
    const float *lat = rl_tensor_data(rl_dataproto_tensor(*rows, RL_CF_LATENTS));
    rl_dataproto *req = rl_dataproto_new();
    int64_t shape[4] = {B, 1, RL_FMNIST_SIDE, RL_FMNIST_SIDE};
    rl_tensor *ti = req ? rl_dataproto_new_tensor(req, RL_REWARD_IMAGES, RL_F32, 4, shape) : NULL;
    const rl_column *pc = rl_dataproto_column(*rows, RL_REWARD_PROMPT);
    rl_column *c = ti && pc ? rl_dataproto_new_column(req, RL_REWARD_PROMPT, RL_COL_STRING) : NULL;
    int rc = c ? RL_OK : rl_error_code();
    for (int64_t b = 0; !rc && b < B; b++) {
        memcpy((float *)rl_tensor_data(ti) + b * F, lat + (b * (N + 1) + N) * s->D,
               sizeof(float) * (size_t)F);
        rc = rl_column_set_str(c, b, rl_column_str(pc, b));
    }
    rl_dataproto *scored = NULL;
    if (!rc)
        rc = rl_group_call_sync(s->j.reward, RL_REWARD_IMAGE_COMPUTE, RL_DISPATCH_DP_COMPUTE, req,
                                &scored);
    rl_dataproto_free(req);
    return rc ? rc : rl_dataproto_union_into(rows, scored);
}

/* Mean of the f32 (B) tensor `name` into metric `key` (absent: nothing). */
static void s_mean_metric(rl_metric_set *ms, const rl_dataproto *dp, const char *name,
                          const char *key)
{
    const rl_tensor *t = rl_dataproto_tensor(dp, name);
    int64_t B = rl_dataproto_rows(dp);
    if (!t || t->dtype != RL_F32 || t->ndim != 1 || B <= 0)
        return;
    const float *v = rl_tensor_data((rl_tensor *)t);
    double sum = 0;
    for (int64_t b = 0; b < B; b++)
        sum += v[b];
    rl_metric_set_put(ms, key, sum / (double)B);
}

/* ---- phases ------------------------------------------------------------------------------------- */

static int s_phase_gen(void *arg)
{
    s_dg *s = arg;
    int64_t P = s->o.batch, n = s->o.n, B = P * n;
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)B);
    int64_t *ns = malloc(sizeof(int64_t) * (size_t)B), *rs = malloc(sizeof(int64_t) * (size_t)B);
    s->group = malloc(sizeof(int64_t) * (size_t)B);
    int rc = ids && ns && rs && s->group ? RL_OK : rl_error_set(RL_ENOMEM, "out of memory");
    rl_rng g;
    rl_rng_init(&g, s->t->seed, 0x200000000ull + (uint64_t)s->step);
    for (int64_t p = 0; !rc && p < P; p++) {
        int32_t id = (int32_t)rl_rng_below(&g, RL_FMNIST_CLASSES);
        for (int64_t k = 0; k < n; k++) {
            int64_t b = p * n + k;
            uint64_t base = rl_splitmix64(s->t->seed ^ rl_splitmix64((uint64_t)s->step));
            ids[b] = id;
            s->group[b] = p;
            ns[b] = (int64_t)(rl_splitmix64(base ^ rl_splitmix64(s->o.init_same_noise ? (uint64_t)p
                                                                               : 1000000u + (uint64_t)b)) >> 1);
            rs[b] = (int64_t)(rl_splitmix64(base ^ rl_splitmix64(2000000u + (uint64_t)b)) >> 1);
        }
    }
    if (!rc && !(s->batch = s_rows(ids, ns, rs, B)))
        rc = rl_error_code();
    free(ids);
    free(ns);
    free(rs);
    return rc ? rc : s_sample(s, &s->batch, 0);
}

/* algorithm.constraint: the reward ranks weighed the constrained term c
 * with its reward_model weight w; this step pays λ instead,
 *   score_b += reward_coeff·(λ − w)·c_b,
 * logs λ and the batch's mean of c, then moves λ by the shortfall. */
static int s_constrain(s_dg *s, rl_tensor *score_t, int64_t B)
{
    int64_t s1[1] = {B};
    const char *col = s_con_col[s->o.con_term];
    const rl_tensor *ct = rl_dataproto_tensor_shaped(s->batch, col, RL_F32, 1, s1);
    if (!ct)
        return rl_error_wrap(rl_error_code(), "algorithm.constraint: the reward ranks' '%s'", col);
    const float *c = rl_tensor_data((rl_tensor *)ct);
    float *score = rl_tensor_data(score_t);
    double mean = 0;
    for (int64_t b = 0; b < B; b++) {
        mean += c[b];
        score[b] += (float)(s->coeff * (s->con.lambda - s->con_w) * c[b]);
    }
    mean = B ? mean / (double)B : s->o.con_min;
    rl_metric_set_put(s->t->ms, "constraint/lambda", s->con.lambda);
    rl_metric_set_put(s->t->ms, "constraint/mean", mean);
    rl_metric_set_put(s->t->ms, "constraint/shortfall", s->o.con_min - mean);
    return rl_constraint_pi_update(&s->con, s->o.con_ki, s->o.con_kp, s->o.con_min, mean,
                                   s->o.con_max);
}

static int s_phase_reward(void *arg)
{
    s_dg *s = arg;
    int rc = s_score(s, &s->batch);
    if (rc)
        return rc;
    const rl_tensor *t = rl_dataproto_tensor(s->batch, RL_REWARD_SCORE);
    int64_t B = rl_dataproto_rows(s->batch);
    if (s->o.con_term && (rc = s_constrain(s, (rl_tensor *)t, B)))
        return rc;
    double *v = malloc(sizeof(double) * (size_t)B);
    if (!v)
        return rl_error_set(RL_ENOMEM, "out of memory");
    for (int64_t b = 0; b < B; b++)
        v[b] = ((const float *)rl_tensor_data((rl_tensor *)t))[b];
    rl_metric_set_put_stats(s->t->ms, "critic/score", v, B);
    free(v);
    s_mean_metric(s->t->ms, s->batch, RL_REWARD_JPEG_KB, "reward/jpeg_kb");
    s_mean_metric(s->t->ms, s->batch, RL_REWARD_PROMPT_MATCH, "reward/prompt_match");
    s_mean_metric(s->t->ms, s->batch, RL_REWARD_ON_PROMPT, "reward/on_prompt");
    s_mean_metric(s->t->ms, s->batch, RL_REWARD_REMOTE, "reward/remote");
    s_mean_metric(s->t->ms, s->batch, RL_REWARD_JUDGE_ON_PROMPT, "reward/judge_on_prompt");
    return RL_OK;
}

static int s_phase_adv(void *arg)
{
    s_dg *s = arg;
    int64_t B = rl_dataproto_rows(s->batch), s1[1] = {B};
    const rl_tensor *st = rl_dataproto_tensor_shaped(s->batch, RL_REWARD_SCORE, RL_F32, 1, s1);
    rl_tensor *at = st ? rl_dataproto_new_tensor(s->batch, RL_ACTOR_ADVANTAGES, RL_F32, 1, s1) : NULL;
    if (!at)
        return rl_error_code();
    float *adv = rl_tensor_data(at);
    int rc = rl_diffusion_grpo_advantages(rl_tensor_data((rl_tensor *)st), s->group, B, s->o.batch,
                                          s->o.use_group, s->o.norm_by_std, s->o.reward_threshold,
                                          1e-8, adv);
    double sum = 0, sq = 0;
    for (int64_t b = 0; !rc && b < B; b++) {
        sum += adv[b];
        sq += (double)adv[b] * adv[b];
    }
    if (!rc && B) {
        rl_metric_set_put(s->t->ms, "critic/advantages/mean", sum / B);
        rl_metric_set_put(s->t->ms, "critic/advantages/std", sqrt(fmax(sq / B - (sum / B) * (sum / B), 0)));
    }
    return rc;
}

/* Per sample a seeded subset of the steps (Flow-GRPO: per sample), as the
 * step mask; the sampler's log-probs become old_logp. */
static int s_step_mask(s_dg *s)
{
    int64_t B = rl_dataproto_rows(s->batch), N = s->N, s2[2] = {B, N};
    rl_tensor *mt = rl_dataproto_new_tensor(s->batch, RL_CF_STEP_MASK, RL_F32, 2, s2);
    rl_tensor *ot = mt ? rl_dataproto_new_tensor(s->batch, RL_ACTOR_OLD_LOGP, RL_F32, 2, s2) : NULL;
    const rl_tensor *lp = ot ? rl_dataproto_tensor_shaped(s->batch, RL_CF_SAMPLE_LOGP, RL_F32, 2, s2)
                             : NULL;
    int64_t *idx = lp ? malloc(sizeof(int64_t) * (size_t)N) : NULL;
    if (!idx)
        return lp ? rl_error_set(RL_ENOMEM, "out of memory") : rl_error_code();
    float *mask = rl_tensor_data(mt);
    memcpy(rl_tensor_data(ot), rl_tensor_data((rl_tensor *)lp), sizeof(float) * (size_t)(B * N));
    memset(mask, 0, sizeof(float) * (size_t)(B * N));
    int rc = RL_OK;
    for (int64_t b = 0; !rc && b < B; b++) {
        int64_t k = 0;
        rc = rl_diffusion_timestep_subset(s->t->seed ^ 0x7157ull, (uint64_t)s->step * 1000003u + (uint64_t)b,
                                          N, s->df.timestep_fraction, idx, &k);
        for (int64_t i = 0; !rc && i < k; i++)
            mask[b * N + idx[i]] = 1.0f;
    }
    free(idx);
    return rc;
}

static int s_phase_update(void *arg)
{
    s_dg *s = arg;
    int rc = s_step_mask(s);
    if (rc)
        return rc;
    int64_t B = rl_dataproto_rows(s->batch), N = s->N, rows = s->mini * s->o.n;
    static const char *const keep[7] = {RL_CF_PROMPT_IDS, RL_CF_LATENTS, RL_CF_SIGMAS,
                                        RL_CF_NOISE_LEVEL, RL_CF_STEP_MASK, RL_ACTOR_OLD_LOGP,
                                        RL_ACTOR_ADVANTAGES};
    static const char *const keys[6] = {RL_ACTOR_M_LOSS, RL_ACTOR_M_TOKENS, RL_ACTOR_M_CLIPFRAC_SUM,
                                        RL_ACTOR_M_PPO_KL_SUM, RL_ACTOR_M_RATIO_SUM,
                                        RL_ACTOR_M_KL_LOSS_SUM};
    const float *mask = rl_tensor_data(rl_dataproto_tensor(s->batch, RL_CF_STEP_MASK));
    double tot[6] = {0}, gn = 0, lr = 0;
    int updates = 0;
    for (int64_t e = 0; !rc && e < s->j.actor_cfg.epochs; e++)
        for (int64_t r0 = 0; !rc && r0 + rows <= B; r0 += rows) {
            int64_t steps = 0;
            for (int64_t i = r0 * N; i < (r0 + rows) * N; i++)
                steps += mask[i] != 0.0f;
            rl_dataproto *mb = rl_dataproto_slice(s->batch, r0, r0 + rows);
            rl_dataproto *req = mb ? rl_dataproto_request(mb, keep, 7, NULL, 0,
                                                          json_pack("{s:I}", RL_ACTOR_GLOBAL_TOKENS,
                                                                    (json_int_t)steps))
                                   : NULL;
            rl_dataproto_free(mb);
            double sums[6], g, l;
            rc = req ? rl_actor_job_actor_step(&s->j, RL_ACTOR_UPDATE_DIFFUSION, req, keys, 6, sums, &g, &l)
                     : rl_error_code();
            rl_dataproto_free(req);
            for (int k = 0; !rc && k < 6; k++)
                tot[k] += sums[k];
            gn += g;
            lr = l;
            updates++;
        }
    if (rc)
        return rc;
    if (tot[1] > 0) {
        rl_metric_set_put(s->t->ms, "actor/pg_loss", tot[0] / updates);
        rl_metric_set_put(s->t->ms, "actor/pg_clipfrac", tot[2] / tot[1]);
        rl_metric_set_put(s->t->ms, RL_M_PPO_KL, tot[3] / tot[1]);
        rl_metric_set_put(s->t->ms, "actor/ratio_mean", tot[4] / tot[1]);
        rl_metric_set_put(s->t->ms, "actor/trained_steps", tot[1]);
        if (s->kl_on) /* mean KL of a trained step to the reference's step */
            rl_metric_set_put(s->t->ms, RL_M_KL_LOSS, tot[5] / tot[1]);
    }
    rl_metric_set_put(s->t->ms, "actor/grad_norm", updates ? gn / updates : 0);
    rl_metric_set_put(s->t->ms, "actor/lr", lr);
    return RL_OK;
}

static int s_phase_sync(void *arg) { return rl_actor_job_sync_weights(&((s_dg *)arg)->j); }

/* ---- validation and online test ------------------------------------------------------------------ */

/* ODE samples of every prompt × `per` with fixed seeds (the same at every
 * step), scored. */
static int s_eval_rows(s_dg *s, int64_t per, uint64_t salt, rl_dataproto **out)
{
    int64_t B = RL_FMNIST_CLASSES * per;
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)B);
    int64_t *ns = malloc(sizeof(int64_t) * (size_t)B), *rs = malloc(sizeof(int64_t) * (size_t)B);
    int rc = ids && ns && rs ? RL_OK : rl_error_set(RL_ENOMEM, "out of memory");
    for (int64_t b = 0; !rc && b < B; b++) {
        ids[b] = (int32_t)(b / per);
        ns[b] = (int64_t)(rl_splitmix64(s->t->seed ^ salt ^ rl_splitmix64((uint64_t)b)) >> 1);
        rs[b] = ns[b];
    }
    rl_dataproto *dp = rc ? NULL : s_rows(ids, ns, rs, B);
    free(ids);
    free(ns);
    free(rs);
    if (!dp)
        return rc ? rc : rl_error_code();
    if ((rc = s_sample(s, &dp, 1)) || (rc = s_score(s, &dp))) {
        rl_dataproto_free(dp);
        return rc;
    }
    *out = dp;
    return RL_OK;
}

static int s_validate(void *ctx)
{
    s_dg *s = ctx;
    double t0 = rl_now_s();
    rl_dataproto *dp = NULL;
    int rc = s_eval_rows(s, s->o.val_per_prompt, 0x7a11dull, &dp);
    if (rc)
        return rl_error_wrap(rc, "validation");
    s_mean_metric(s->t->ms, dp, RL_REWARD_SCORE, "val/score");
    s_mean_metric(s->t->ms, dp, RL_REWARD_JPEG_KB, "val/jpeg_kb");
    s_mean_metric(s->t->ms, dp, RL_REWARD_PROMPT_MATCH, "val/prompt_match");
    s_mean_metric(s->t->ms, dp, RL_REWARD_ON_PROMPT, "val/on_prompt");
    s_mean_metric(s->t->ms, dp, RL_REWARD_REMOTE, "val/remote");
    s_mean_metric(s->t->ms, dp, RL_REWARD_JUDGE_ON_PROMPT, "val/judge_on_prompt");
    rl_metric_set_put(s->t->ms, "timing_s/testing", rl_now_s() - t0);
    static const char *const keys[6] = {"val/score", "val/prompt_match", "val/on_prompt",
                                        "val/judge_on_prompt", "val/jpeg_kb", "val/remote"};
    char line[512];
    int n = snprintf(line, sizeof line, "step %lld validation:", (long long)s->step);
    for (int k = 0; k < 6 && n < (int)sizeof line; k++) {
        double v;
        if (rl_metric_set_get(s->t->ms, keys[k], &v) == RL_OK)
            n += snprintf(line + n, sizeof line - (size_t)n, "  %s %.4f", keys[k] + 4, v);
    }
    rl_log_info("%s", line);
    rl_dataproto_free(dp);
    return RL_OK;
}

#define S_ZOOM 3

/* img (h, w) enlarged z times (nearest neighbour), or NULL + a message. */
static uint8_t *s_upscale(const uint8_t *img, int w, int h, int z)
{
    uint8_t *o = malloc((size_t)w * z * (size_t)h * z);
    if (!o) {
        rl_error_set(RL_ENOMEM, "out of memory for a %dx%d image", w * z, h * z);
        return NULL;
    }
    for (int y = 0; y < h * z; y++)
        for (int x = 0; x < w * z; x++)
            o[(size_t)y * w * z + x] = img[(size_t)(y / z) * w + x / z];
    return o;
}

/* The online test (seed: rollout.online.test every online.step.interval
 * steps): one ODE sample per prompt with fixed noise → <out>/online/
 * step_<N>.png (the first frames in a row) and step_<N>.gif (the clip's
 * frames, or for images the denoising chain). */
static int s_online(void *ctx)
{
    s_dg *s = ctx;
    rl_dataproto *dp = NULL;
    int rc = s_eval_rows(s, 1, 0x0471e5ull, &dp);
    if (rc)
        return rl_error_wrap(rc, "online test");
    const int S = RL_FMNIST_SIDE, P = RL_FMNIST_CLASSES;
    int64_t N = s->N, F = s->o.frames;
    const float *lat = rl_tensor_data(rl_dataproto_tensor(dp, RL_CF_LATENTS));
    char dir[4200], path[4300];
    snprintf(dir, sizeof dir, "%s/online", s->t->out_dir);
    int64_t nfr = F > 1 ? F : N + 1; /* GIF frames */
    uint8_t *tiles = malloc((size_t)P * S * S), *frames = NULL;
    int gw, gh;
    rl_image_grid(NULL, P, S, S, P, 2, 64, NULL, &gw, &gh);
    frames = malloc((size_t)nfr * (size_t)gw * (size_t)gh);
    if (!tiles || !frames)
        rc = rl_error_set(RL_ENOMEM, "out of memory");
    if (!rc)
        rc = rl_mkdir_p(dir);
    for (int64_t f = 0; !rc && f < nfr; f++) {
        for (int p = 0; p < P; p++) {
            /* clip frame f of the sample, or the chain's latent f (its first frame) */
            const float *src = F > 1 ? lat + ((p * (N + 1) + N) * s->D + f * S * S)
                                     : lat + (p * (N + 1) + f) * s->D;
            rl_clip_to_u8(src, S * S, tiles + (size_t)p * S * S);
        }
        rl_image_grid(tiles, P, S, S, P, 2, 64, frames + (size_t)f * gw * gh, &gw, &gh);
    }
    /* the PNG: the first frame of every final sample */
    for (int p = 0; !rc && p < P; p++)
        rl_clip_to_u8(lat + (p * (N + 1) + N) * s->D, S * S, tiles + (size_t)p * S * S);
    uint8_t *grid = rc ? NULL : malloc((size_t)gw * gh);
    if (!rc && !grid)
        rc = rl_error_set(RL_ENOMEM, "out of memory");
    if (!rc) {
        rl_image_grid(tiles, P, S, S, P, 2, 64, grid, &gw, &gh);
        uint8_t *big = s_upscale(grid, gw, gh, S_ZOOM); /* 28 px is too small to see */
        snprintf(path, sizeof path, "%s/step_%lld.png", dir, (long long)s->step);
        rc = big ? rl_image_png_write(path, big, gw * S_ZOOM, gh * S_ZOOM, 1) : rl_error_code();
        free(big);
    }
    if (!rc) {
        snprintf(path, sizeof path, "%s/step_%lld.gif", dir, (long long)s->step);
        rc = rl_image_gif_write(path, frames, (int)nfr, gw, gh, F > 1 ? 20 : 30);
    }
    if (!rc && !s->before) { /* the first grid of the run: "before" */
        s->before = grid;
        s->bw = gw;
        s->bh = gh;
        grid = NULL;
    } else if (!rc && s->before && s->bw == gw) { /* before above after */
        uint8_t *both = malloc((size_t)gw * (size_t)(2 * gh));
        if (both) {
            memcpy(both, s->before, (size_t)gw * gh);
            memcpy(both + (size_t)gw * gh, grid, (size_t)gw * gh);
            uint8_t *big = s_upscale(both, gw, 2 * gh, S_ZOOM);
            snprintf(path, sizeof path, "%s/before_after.png", s->t->out_dir);
            rc = big ? rl_image_png_write(path, big, gw * S_ZOOM, 2 * gh * S_ZOOM, 1) : rl_error_code();
            free(big);
            free(both);
        }
    }
    free(grid);
    free(tiles);
    free(frames);
    rl_dataproto_free(dp);
    return rc ? rl_error_wrap(rc, "online test") : RL_OK;
}

/* ---- checkpoints ------------------------------------------------------------------------------------ */

static int s_save(void *ctx)
{
    s_dg *s = ctx;
    json_t *extra = json_pack("{s:I}", "weight_version", (json_int_t)s->j.sync.version);
    if (extra && s->o.con_term && /* the constraint's state, when it is on */
        (json_object_set_new(extra, "constraint_lambda", json_real(s->con.lambda)) ||
         json_object_set_new(extra, "constraint_integral", json_real(s->con.integral)))) {
        json_decref(extra);
        extra = NULL;
    }
    if (!extra)
        return rl_error_set(RL_ENOMEM, "checkpoint: out of memory");
    int rc = rl_trainer_save(s->t, s->j.actor, s->step, 0, s->step, extra);
    json_decref(extra);
    return rc;
}

/* Restores checkpoint `want` (-1: the newest; > 0: that step). */
static int s_resume(s_dg *s, int64_t want, int64_t *start)
{
    json_t *extra = NULL;
    int rc = rl_actor_job_restore(&s->j, s->t, want, start, &extra);
    static const char *const keys[2] = {"constraint_lambda", "constraint_integral"};
    double *dst[2] = {&s->con.lambda, &s->con.integral};
    if (!rc && *start > 0 && s->o.con_term && !json_object_get(extra, keys[0]) &&
        !json_object_get(extra, keys[1])) /* saved by a run without the constraint */
        rl_log_warn("checkpoint of step %lld has no algorithm.constraint state: the multiplier "
                    "starts at %g", (long long)*start, s->con.lambda);
    else
        for (int k = 0; k < 2 && !rc && *start > 0 && s->o.con_term; k++) {
            const json_t *v = json_object_get(extra, keys[k]);
            if (json_is_number(v) && isfinite(json_number_value(v)) && json_number_value(v) >= 0)
                *dst[k] = json_number_value(v);
            else
                rc = rl_error_set(RL_EIO, "checkpoint of step %lld: the algorithm.constraint state "
                                          "'%s' is missing or not a number >= 0",
                                  (long long)*start, keys[k]);
        }
    json_decref(extra);
    return rc;
}

/* ---- the loop ------------------------------------------------------------------------------------------ */

static void s_step_clear(s_dg *s)
{
    rl_dataproto_free(s->batch);
    free(s->group);
    s->batch = NULL;
    s->group = NULL;
}

static int s_open(void *st, rl_trainer *t)
{
    s_dg *s = st;
    const rl_config *job = t->job;
    s->t = t;
    int rc = s_read_opts(job, &s->o);
    const rl_actor_diffusion_config *df = rc ? NULL : rl_config_section_get(job, &rl_actor_diffusion_section);
    if (!rc && !df)
        rc = rl_error_code();
    if (!rc)
        s->df = *df;
    if (!rc)
        rc = rl_actor_job_open(&s->j, t->d, job, 1, 1);
    s->D = s->o.frames * RL_FMNIST_SIDE * RL_FMNIST_SIDE;
    s->mini = s->j.actor_cfg.mini_batch;
    s->kl_on = s->j.actor_cfg.use_kl_loss && s->j.actor_cfg.kl_loss_coef > 0;
    double w[RL_IMG_REWARD_COUNT];
    if (!rc && s->o.con_term && !(rc = rl_image_reward_weights_from_job(job, w))) {
        s->coeff = ((const rl_reward_image_config *)rl_config_section_get(job, &rl_reward_image_section))->coeff;
        s->con_w = w[s_con_slot[s->o.con_term]];
        s->con.lambda = s->o.con_init >= 0 ? s->o.con_init : s->con_w;
        s->con.integral = s->con.lambda;
    }
    int W = s->j.actor ? rl_group_size(s->j.actor) : 1;
    if (!rc && (s->mini * s->o.n) % W)
        rc = rl_config_error_at(job, "actor.ppo_mini_batch_size", RL_ECONFIG,
                                "a mini-batch of %lld rows (%lld prompts × rollout.n %lld) must be a "
                                "multiple of the %d actor ranks", (long long)(s->mini * s->o.n),
                                (long long)s->mini, (long long)s->o.n, W);
    return rc;
}

/* The state of one incarnation closed; after the last (reopen 0) the
 * run's "before" grid too, which a recovery keeps. */
static void s_close(void *st, int reopen)
{
    s_dg *s = st;
    rl_actor_job_close(&s->j);
    uint8_t *before = s->before;
    int bw = s->bw, bh = s->bh;
    memset(s, 0, sizeof *s);
    if (reopen) {
        s->before = before;
        s->bw = bw;
        s->bh = bh;
    } else {
        free(before);
    }
}

static int s_restore(void *st, int64_t want, int64_t *start)
{
    s_dg *s = st;
    int rc = s_resume(s, want, start);
    s->step = *start;
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
    out[0] = (rl_recipe_hook){s->t->val_every, 1, s_validate};
    out[1] = (rl_recipe_hook){s->o.online_test ? s->o.online_interval : 0, s->o.online_test, s_online};
    return 2;
}

static void s_clear(void *st) { s_step_clear(st); }

static const rl_recipe_loop s_loop = {
    .open = s_open, .restore = s_restore, .phases = s_phases, .hooks = s_hooks,
    .save = s_save, .step_clear = s_clear, .close = s_close,
};

static int s_run(rl_driver *d, const rl_config *job)
{
    s_dg s;
    memset(&s, 0, sizeof s);
    return rl_recipe_run(d, job, &s, &s_loop);
}

const rl_recipe rl_recipe_diffusion = {
    .name = "diffusion",
    .summary = "diffusion GRPO (MMDanceGRPO): SDE rollouts, image rewards, per-timestep clipped updates",
    .sections = (const rl_config_section *const[]){&rl_trainer_recovery_section, &rl_actor_section,
                                                   &rl_actor_diffusion_section, &rl_rollout_section,
                                                   &rl_rollout_flow_section, &rl_reward_section,
                                                   &rl_reward_image_section, NULL},
    .defaults = (const char *const[]){
        RL_CLIP_FLOW_MODEL_DEFAULTS,
        "data:\n"
        "  train_batch_size: 8        # prompts per step (groups of rollout.n samples)\n"
        "  val_per_prompt: 8          # validation: ODE samples per built-in prompt\n"
        "actor:\n"
        "  optim: {lr: 1.0e-5, weight_decay: 0.01, lr_schedule: cosine, warmup_steps: 0}\n"
        "  ppo_mini_batch_size: 8     # prompts per optimiser step\n"
        "rollout:\n"
        "  n: 8                       # samples per prompt\n"
        "  init_same_noise: true      # one initial noise per prompt group\n"
        "  online:                    # the seed's online test\n"
        "    test: true\n"
        "    step: {interval: 10}\n"
        "algorithm:\n"
        "  adv_estimator: grpo\n"
        "  use_group: true            # group normalisation (false: one global z-score)\n"
        "  norm_adv_by_std_in_grpo: true  # false: A = r - mean, not divided by the std\n"
        "  reward_threshold: -1.0e30  # a group whose mean reward is below gets A = 0\n"
        "  constraint:                # hold a scorer term at a floor (constrained RL)\n"
        "    reward: none             # none, on_prompt or prompt_match (listed in reward_model)\n"
        "    min: 0.9                 # the floor: the training batch's mean of that term\n"
        "    ki: 1.0                  # after a step I += ki·(min − mean) (the dual step) ...\n"
        "    kp: 0.0                  # ... and λ = I + kp·(min − mean), both in [0, lambda_max]\n"
        "    init: -1                 # the starting λ; -1: the term's weight in reward_model\n"
        "    lambda_max: 100.0\n"
        "trainer:\n"
        "  total_steps: 100\n"
        "  val_every: 10\n"
        "  save_every: 50\n"
        "  resume: false\n"
        "  output_dir: runs/dance_grpo\n",
        NULL},
    .roles = s_roles,
    .prepare = s_prepare,
    .run = s_run,
};
