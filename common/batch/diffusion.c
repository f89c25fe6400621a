/* diffusion.c — the batch transforms of the diffusion track (see
 * common/batch/diffusion.h). */
#include "common/batch/diffusion.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/core/rng.h"
#include "rlrt/error.h"
#include "rlrt/log.h"

/* ---- rows ------------------------------------------------------------------------------------------ */

void rl_diffusion_train_rows(uint64_t seed, int64_t step, int64_t P, int64_t n, int n_prompts,
                             int same_noise, int32_t *ids, int64_t *group, int64_t *noise_seed,
                             int64_t *row_seed)
{
    rl_rng g;
    rl_rng_init(&g, seed, 0x200000000ull + (uint64_t)step);
    uint64_t base = rl_splitmix64(seed ^ rl_splitmix64((uint64_t)step));
    for (int64_t p = 0; p < P; p++) {
        int32_t id = (int32_t)rl_rng_below(&g, (uint64_t)n_prompts);
        for (int64_t k = 0; k < n; k++) {
            int64_t b = p * n + k;
            uint64_t nk = same_noise ? (uint64_t)p : 1000000u + (uint64_t)b;
            ids[b] = id;
            group[b] = p;
            noise_seed[b] = (int64_t)(rl_splitmix64(base ^ rl_splitmix64(nk)) >> 1);
            row_seed[b] = (int64_t)(rl_splitmix64(base ^ rl_splitmix64(2000000u + (uint64_t)b)) >> 1);
        }
    }
}

void rl_diffusion_eval_rows(uint64_t seed, uint64_t salt, int n_prompts, int64_t per, int32_t *ids,
                            int64_t *noise_seed, int64_t *row_seed)
{
    for (int64_t b = 0; b < n_prompts * per; b++) {
        ids[b] = (int32_t)(b / per);
        noise_seed[b] = (int64_t)(rl_splitmix64(seed ^ salt ^ rl_splitmix64((uint64_t)b)) >> 1);
        row_seed[b] = noise_seed[b];
    }
}

/* ---- algorithm.constraint -------------------------------------------------------------------------- */

void rl_diffusion_constraint_init(rl_diffusion_constraint *c, double weight, double coeff, double floor,
                                  double ki, double kp, double init, double lambda_max)
{
    *c = (rl_diffusion_constraint){{0, 0}, weight, coeff, floor, ki, kp, lambda_max};
    c->pi.lambda = init >= 0 ? init : weight;
    c->pi.integral = c->pi.lambda;
}

int rl_diffusion_constraint_step(rl_diffusion_constraint *c, const float *term, float *score, int64_t B,
                                 rl_metric_set *ms)
{
    double mean = 0;
    for (int64_t b = 0; b < B; b++) {
        mean += term[b];
        score[b] += (float)(c->coeff * (c->pi.lambda - c->weight) * term[b]);
    }
    mean = B ? mean / (double)B : c->floor;
    rl_metric_set_put(ms, "constraint/lambda", c->pi.lambda);
    rl_metric_set_put(ms, "constraint/mean", mean);
    rl_metric_set_put(ms, "constraint/shortfall", c->floor - mean);
    return rl_constraint_pi_update(&c->pi, c->ki, c->kp, c->floor, mean, c->lambda_max);
}

static const char *const s_state_keys[2] = {"constraint_lambda", "constraint_integral"};

int rl_diffusion_constraint_save(const rl_diffusion_constraint *c, json_t *extra)
{
    if (json_object_set_new(extra, s_state_keys[0], json_real(c->pi.lambda)) ||
        json_object_set_new(extra, s_state_keys[1], json_real(c->pi.integral)))
        return rl_error_set(RL_ENOMEM, "checkpoint: out of memory");
    return RL_OK;
}

int rl_diffusion_constraint_restore(rl_diffusion_constraint *c, const json_t *extra, int64_t step)
{
    double *dst[2] = {&c->pi.lambda, &c->pi.integral};
    if (!json_object_get(extra, s_state_keys[0]) && !json_object_get(extra, s_state_keys[1])) {
        rl_log_warn("checkpoint of step %lld has no algorithm.constraint state: the multiplier "
                    "starts at %g", (long long)step, c->pi.lambda);
        return RL_OK;
    }
    for (int k = 0; k < 2; k++) {
        const json_t *v = json_object_get(extra, s_state_keys[k]);
        if (!json_is_number(v) || !isfinite(json_number_value(v)) || json_number_value(v) < 0)
            return rl_error_set(RL_EIO, "checkpoint of step %lld: the algorithm.constraint state "
                                        "'%s' is missing or not a number >= 0",
                                (long long)step, s_state_keys[k]);
        *dst[k] = json_number_value(v);
    }
    return RL_OK;
}

/* ---- advantages ------------------------------------------------------------------------------------ */

int rl_diffusion_advantages(const rl_diffusion_adv_cfg *cfg, const float *score, const int64_t *group,
                            int64_t B, float *adv, rl_metric_set *ms)
{
    int rc;
    switch (cfg->est->id) {
    case RL_EST_GRPO:
        rc = rl_diffusion_grpo_advantages(score, group, B, cfg->n_groups, cfg->use_group,
                                          cfg->norm_by_std, cfg->reward_threshold, 1e-8, adv);
        break;
    default:
        rc = rl_error_set(RL_EUNSUPPORTED, "estimator '%s' has no diffusion form", cfg->est->name);
    }
    double sum = 0, sq = 0;
    for (int64_t b = 0; !rc && b < B; b++) {
        sum += adv[b];
        sq += (double)adv[b] * adv[b];
    }
    if (!rc && B) {
        rl_metric_set_put(ms, "critic/advantages/mean", sum / B);
        rl_metric_set_put(ms, "critic/advantages/std", sqrt(fmax(sq / B - (sum / B) * (sum / B), 0)));
    }
    return rc;
}

/* ---- the trained timesteps -------------------------------------------------------------------------- */

int rl_diffusion_step_mask(uint64_t seed, int64_t step, double fraction, int64_t B, int64_t N,
                           float *mask)
{
    int64_t *idx = malloc(sizeof(int64_t) * (size_t)(N > 0 ? N : 1));
    if (!idx)
        return rl_error_set(RL_ENOMEM, "out of memory");
    memset(mask, 0, sizeof(float) * (size_t)(B * N));
    int rc = RL_OK;
    for (int64_t b = 0; !rc && b < B; b++) {
        int64_t k = 0;
        rc = rl_diffusion_timestep_subset(seed ^ 0x7157ull, (uint64_t)step * 1000003u + (uint64_t)b, N,
                                          fraction, idx, &k);
        for (int64_t i = 0; !rc && i < k; i++)
            mask[b * N + idx[i]] = 1.0f;
    }
    free(idx);
    return rc;
}

/* ---- metrics ---------------------------------------------------------------------------------------- */

int rl_diffusion_score_metrics(const float *score, int64_t B, rl_metric_set *ms)
{
    double *v = malloc(sizeof(double) * (size_t)(B > 0 ? B : 1));
    if (!v)
        return rl_error_set(RL_ENOMEM, "out of memory");
    for (int64_t b = 0; b < B; b++)
        v[b] = score[b];
    int rc = rl_metric_set_put_stats(ms, "critic/score", v, B);
    free(v);
    return rc;
}

void rl_diffusion_column_means(const rl_dataproto *dp, const rl_batch_mean *cols, int n,
                               const char *prefix, rl_metric_set *ms)
{
    int64_t B = rl_dataproto_rows(dp);
    for (int i = 0; i < n; i++) {
        const rl_tensor *t = rl_dataproto_tensor(dp, cols[i].tensor);
        if (!t || t->dtype != RL_F32 || t->ndim != 1 || B <= 0)
            continue;
        const float *v = rl_tensor_data((rl_tensor *)t);
        double sum = 0;
        for (int64_t b = 0; b < B; b++)
            sum += v[b];
        char key[128];
        snprintf(key, sizeof key, "%s%s", prefix, cols[i].metric);
        rl_metric_set_put(ms, key, sum / (double)B);
    }
}

void rl_diffusion_update_metrics(const double sums[6], int updates, double grad_norm_sum, double lr,
                                 int kl_on, rl_metric_set *ms)
{
    if (sums[1] > 0) {
        rl_metric_set_put(ms, "actor/pg_loss", sums[0] / updates);
        rl_metric_set_put(ms, "actor/pg_clipfrac", sums[2] / sums[1]);
        rl_metric_set_put(ms, RL_M_PPO_KL, sums[3] / sums[1]);
        rl_metric_set_put(ms, "actor/ratio_mean", sums[4] / sums[1]);
        rl_metric_set_put(ms, "actor/trained_steps", sums[1]);
        if (kl_on) /* mean KL of a trained step to the reference's step */
            rl_metric_set_put(ms, RL_M_KL_LOSS, sums[5] / sums[1]);
    }
    rl_metric_set_put(ms, "actor/grad_norm", updates ? grad_norm_sum / updates : 0);
    rl_metric_set_put(ms, "actor/lr", lr);
}

/* ---- flow-matching pretraining ----------------------------------------------------------------------- */

void rl_flow_matching_pairs(uint64_t seed, int64_t step, const float *x0, int64_t B, int64_t D, float *x,
                            float *target, float *sigma)
{
    for (int64_t b = 0; b < B; b++) {
        rl_rng g;
        rl_rng_init(&g, seed ^ 0x5157u, (uint64_t)step * 1000003u + (uint64_t)b);
        float sig = rl_rng_uniform(&g);
        sigma[b] = sig;
        for (int64_t i = 0; i < D; i++) {
            float c = x0[b * D + i], e = rl_rng_normal(&g);
            x[b * D + i] = (1.0f - sig) * c + sig * e;
            target[b * D + i] = e - c;
        }
    }
}

/* ---- the reward's images ------------------------------------------------------------------------------ */

int rl_diffusion_reward_images(const float *latents, const float *final_mean, int64_t B, int64_t N,
                               int64_t D, int64_t frame, int64_t F, float *out)
{
    if (B < 0 || N < 1 || F < 1 || frame < 0 || (frame + 1) * F > D)
        return rl_error_set(RL_ESHAPE, "rl_diffusion_reward_images: frame %lld of %lld floats is not "
                                       "inside a latent of %lld (B=%lld, N=%lld)",
                            (long long)frame, (long long)F, (long long)D, (long long)B, (long long)N);
    if (!out || (B > 0 && !latents && !final_mean))
        return rl_error_set(RL_EINVAL, "rl_diffusion_reward_images: no images or no output");
    for (int64_t b = 0; b < B; b++) {
        const float *src = final_mean ? final_mean + b * D : latents + (b * (N + 1) + N) * D;
        memcpy(out + b * F, src + frame * F, sizeof(float) * (size_t)F);
    }
    return RL_OK;
}
