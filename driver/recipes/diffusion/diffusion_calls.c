/* diffusion_calls.c — the diffusion recipe's calls to its roles
 * (driver/recipes/diffusion/diffusion_calls.h). */
#include "driver/recipes/diffusion/diffusion_calls.h"

#include <string.h>

#include "common/batch/diffusion.h"
#include "driver/recipes/diffusion/diffusion_common.h"
#include "rlrt/error.h"

rl_dataproto *rl_diffusion_rows(int64_t B, int32_t **ids, int64_t **noise_seed, int64_t **row_seed)
{
    rl_dataproto *dp = rl_dataproto_new();
    int64_t s1[1] = {B};
    rl_tensor *ti = dp ? rl_dataproto_new_tensor(dp, RL_CF_PROMPT_IDS, RL_I32, 1, s1) : NULL;
    rl_tensor *tn = ti ? rl_dataproto_new_tensor(dp, RL_CF_NOISE_SEEDS, RL_I64, 1, s1) : NULL;
    rl_tensor *tr = tn ? rl_dataproto_new_tensor(dp, RL_CF_ROW_SEEDS, RL_I64, 1, s1) : NULL;
    if (!tr || !rl_dataproto_new_column(dp, RL_REWARD_PROMPT, RL_COL_STRING)) {
        rl_dataproto_free(dp);
        return NULL;
    }
    *ids = rl_tensor_data(ti);
    *noise_seed = rl_tensor_data(tn);
    *row_seed = rl_tensor_data(tr);
    return dp;
}

int rl_diffusion_prompts(rl_dataproto *rows)
{
    const int32_t *ids = rl_tensor_data(rl_dataproto_tensor(rows, RL_CF_PROMPT_IDS));
    rl_column *pc = rl_dataproto_column(rows, RL_REWARD_PROMPT);
    int rc = RL_OK;
    for (int64_t b = 0; !rc && b < rl_dataproto_rows(rows); b++)
        rc = rl_column_set_str(pc, b, rl_fmnist_prompt(ids[b]));
    return rc;
}

int rl_diffusion_sample(rl_group *rollout, rl_dataproto **rows, int greedy, int64_t D, int64_t *N)
{
    static const char *const in[3] = {RL_CF_PROMPT_IDS, RL_CF_NOISE_SEEDS, RL_CF_ROW_SEEDS};
    rl_dataproto *req = rl_dataproto_request(*rows, in, 3, NULL, 0,
                                             json_pack("{s:i}", RL_ROLLOUT_GREEDY, greedy)),
                 *gen = NULL;
    int rc = req ? rl_group_call_sync(rollout, RL_ROLLOUT_GENERATE, RL_DISPATCH_DP_COMPUTE, req, &gen)
                 : rl_error_code();
    rl_dataproto_free(req);
    if (rc)
        return rc;
    const rl_tensor *lt = rl_dataproto_tensor_shaped(gen, RL_CF_LATENTS, RL_F32, 3,
                                                     (int64_t[]){rl_dataproto_rows(*rows), -1, D});
    if (!lt) {
        rl_dataproto_free(gen);
        return rl_error_wrap(rl_error_code(), "the rollout's samples");
    }
    *N = lt->shape[1] - 1;
    return rl_dataproto_union_into(rows, gen);
}

int rl_diffusion_score(rl_group *reward, rl_dataproto **rows, int64_t N, int64_t D, int64_t frame, int mean)
{
    int64_t B = rl_dataproto_rows(*rows), F = RL_FMNIST_SIDE * RL_FMNIST_SIDE;
    const float *lat = rl_tensor_data(rl_dataproto_tensor(*rows, RL_CF_LATENTS)), *fm = NULL;
    if (mean) {
        const rl_tensor *mt = rl_dataproto_tensor_shaped(*rows, RL_CF_FINAL_MEAN, RL_F32, 2, (int64_t[]){B, D});
        if (!mt)
            return rl_error_wrap(rl_error_code(), "the rollout's last-step means (the reward's image)");
        fm = rl_tensor_data((rl_tensor *)mt);
    }
    rl_dataproto *req = rl_dataproto_new();
    int64_t shape[4] = {B, 1, RL_FMNIST_SIDE, RL_FMNIST_SIDE};
    rl_tensor *ti = req ? rl_dataproto_new_tensor(req, RL_REWARD_IMAGES, RL_F32, 4, shape) : NULL;
    const rl_column *pc = rl_dataproto_column(*rows, RL_REWARD_PROMPT);
    rl_column *c = ti && pc ? rl_dataproto_new_column(req, RL_REWARD_PROMPT, RL_COL_STRING) : NULL;
    int rc = c ? rl_diffusion_reward_images(lat, fm, B, N, D, frame, F, rl_tensor_data(ti)) : rl_error_code();
    for (int64_t b = 0; !rc && b < B; b++)
        rc = rl_column_set_str(c, b, rl_column_str(pc, b));
    rl_dataproto *scored = NULL;
    if (!rc)
        rc = rl_group_call_sync(reward, RL_REWARD_IMAGE_COMPUTE, RL_DISPATCH_DP_COMPUTE, req, &scored);
    rl_dataproto_free(req);
    return rc ? rc : rl_dataproto_union_into(rows, scored);
}

int rl_diffusion_eval(const rl_actor_job *j, uint64_t seed, uint64_t salt, int64_t per, int64_t D,
                      int64_t frame, int64_t *N, rl_dataproto **out)
{
    int32_t *ids;
    int64_t *ns, *rs;
    rl_dataproto *dp = rl_diffusion_rows(RL_FMNIST_CLASSES * per, &ids, &ns, &rs);
    if (!dp)
        return rl_error_code();
    rl_diffusion_eval_rows(seed, salt, RL_FMNIST_CLASSES, per, ids, ns, rs);
    int rc = rl_diffusion_prompts(dp);
    if (rc || (rc = rl_diffusion_sample(j->rollout, &dp, 1, D, N)) ||
        (rc = rl_diffusion_score(j->reward, &dp, *N, D, frame, 0))) {
        rl_dataproto_free(dp);
        return rc;
    }
    *out = dp;
    return RL_OK;
}

int rl_diffusion_update(rl_actor_job *j, const rl_dataproto *batch, int64_t rows, int kl_on,
                        rl_metric_set *ms)
{
    static const char *const keep[8] = {RL_CF_PROMPT_IDS, RL_CF_LATENTS, RL_CF_SIGMAS, RL_CF_NOISE_LEVEL,
                                        RL_CF_STEP_MASK, RL_ACTOR_OLD_LOGP, RL_ACTOR_ADVANTAGES,
                                        RL_CF_KL_STEP_MASK};
    const int n_keep = rl_dataproto_tensor(batch, RL_CF_KL_STEP_MASK) ? 8 : 7;
    static const char *const keys[6] = {RL_ACTOR_M_LOSS, RL_ACTOR_M_TOKENS, RL_ACTOR_M_CLIPFRAC_SUM,
                                        RL_ACTOR_M_PPO_KL_SUM, RL_ACTOR_M_RATIO_SUM, RL_ACTOR_M_KL_LOSS_SUM};
    const rl_tensor *mt = rl_dataproto_tensor(batch, RL_CF_STEP_MASK);
    if (!mt)
        return rl_error_set(RL_EINVAL, "the GRPO update: the batch has no %s", RL_CF_STEP_MASK);
    const float *mask = rl_tensor_data((rl_tensor *)mt);
    int64_t B = rl_dataproto_rows(batch), N = mt->shape[1];
    double tot[6] = {0}, gn = 0, lr = 0;
    int updates = 0, rc = RL_OK;
    for (int64_t e = 0; !rc && e < j->actor_cfg.epochs; e++)
        for (int64_t r0 = 0; !rc && r0 + rows <= B; r0 += rows) {
            int64_t steps = 0;
            for (int64_t i = r0 * N; i < (r0 + rows) * N; i++)
                steps += mask[i] != 0.0f;
            rl_dataproto *mb = rl_dataproto_slice(batch, r0, r0 + rows);
            rl_dataproto *req = mb ? rl_dataproto_request(mb, keep, n_keep, NULL, 0,
                                                          json_pack("{s:I}", RL_ACTOR_GLOBAL_TOKENS,
                                                                    (json_int_t)steps))
                                   : NULL;
            rl_dataproto_free(mb);
            double sums[6], g = 0, l = 0;
            rc = req ? rl_actor_job_actor_step(j, RL_ACTOR_UPDATE_DIFFUSION, req, keys, 6, sums, &g, &l)
                     : rl_error_code();
            rl_dataproto_free(req);
            for (int k = 0; !rc && k < 6; k++)
                tot[k] += sums[k];
            gn += g;
            lr = l;
            updates++;
        }
    if (!rc)
        rl_diffusion_update_metrics(tot, updates, gn, lr, kl_on, ms);
    return rc;
}
