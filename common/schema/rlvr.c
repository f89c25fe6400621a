/* rlvr.c — the rlvr recipe's sections, changes and size checks
 * (common/schema/rlvr.h). */
#include "common/schema/rlvr.h"
#include "common/schema/rollout.h"
#include "common/schema/actor.h"

#include "common/schema/lm.h"
#include "rlrt/error.h"

#define S_PATH(sec, type, f) RL_CFG_PATH(&sec, type, f)

/* filter_low below filter_high; the overlong buffer within the response. */
static int s_check(const rl_config *c, void *out)
{
    rl_rlvr_config *a = out;
    const rl_estimator_config *e = rl_config_section_get(c, &rl_estimator_section);
    const rl_group_norm_config *g = e ? rl_config_section_get(c, &rl_group_norm_section) : NULL;
    const rl_discount_config *d = g ? rl_config_section_get(c, &rl_discount_section) : NULL;
    if (!d)
        return rl_error_code();
    a->adv_estimator = e->adv_estimator;
    a->norm_adv_by_std_in_grpo = g->norm_adv_by_std_in_grpo;
    a->gamma = d->gamma;
    if (!(a->filter_low < a->filter_high))
        return RL_CFG_ERROR2(c, &rl_rlvr_section, rl_rlvr_config, filter_low, &rl_rlvr_section,
                             rl_rlvr_config, filter_high, RL_ECONFIG, "%s (%g) must be below %s (%g)",
                             S_PATH(rl_rlvr_section, rl_rlvr_config, filter_low), a->filter_low,
                             S_PATH(rl_rlvr_section, rl_rlvr_config, filter_high), a->filter_high);
    const rl_rollout_tokens_config *rt = a->overlong_enable ? rl_config_section_get(c, &rl_rollout_tokens_section) : NULL;
    if (a->overlong_enable && !rt)
        return rl_error_code();
    if (a->overlong_enable && a->overlong_len > rt->response_length)
        return RL_CFG_ERROR2(c, &rl_rlvr_section, rl_rlvr_config, overlong_len,
                             &rl_rollout_tokens_section, rl_rollout_tokens_config, response_length,
                             RL_ECONFIG, "%s (%lld) must not exceed %s (%lld)",
                             S_PATH(rl_rlvr_section, rl_rlvr_config, overlong_len),
                             (long long)a->overlong_len,
                             S_PATH(rl_rollout_tokens_section, rl_rollout_tokens_config, response_length),
                             (long long)rt->response_length);
    return RL_OK;
}

#define RL_CFG_DEFINE rl_rlvr_section, rl_rlvr_config, "common/schema/rlvr.def", s_check, \
    "algorithm (rlvr)", "The advantages of a language-model step: the estimator, the KL to the reference, online filtering, DAPO's overlong shaping, TIS.", \
    "the driver"
#include "common/schema/section.inc"

#define RL_CFG_DEFINE rl_rlvr_trainer_section, rl_rlvr_trainer_config, "common/schema/rlvr_trainer.def", NULL, \
    "trainer (rlvr)", "Sample dumps and one-step-off generation.", "the driver"
#include "common/schema/section.inc"

#define RL_CFG_DEFINE rl_rlvr_aepo_section, rl_rlvr_aepo_config, "common/schema/rlvr_aepo.def", NULL, \
    "algorithm.aepo (rlvr)", "ARES/AEPO: window entropy, difficulty buckets, an entropy reward and token-level KL weights (driver/recipes/lm/rlvr_aepo.h).", \
    "the driver"
#include "common/schema/section.inc"

/* Enabled: a field to read, samples of the policy left in a group, and no
 * tools (a solution's tool output would be trained as the model's text). */
static int s_guidance_check(const rl_config *c, void *out)
{
    const rl_rlvr_guidance_config *g = out;
    if (!g->enable)
        return RL_OK;
    if (!*g->field)
        return RL_CFG_ERROR(c, &rl_rlvr_guidance_section, rl_rlvr_guidance_config, field,
                            RL_ECONFIG, "must name the JSONL field of the reference solutions");
    const rl_rollout_config *ro = rl_config_section_get(c, &rl_rollout_section);
    const rl_rollout_multi_turn_config *mt = ro ? rl_config_section_get(c, &rl_rollout_multi_turn_section) : NULL;
    if (!mt)
        return rl_error_code();
    if (g->samples >= ro->n)
        return RL_CFG_ERROR2(c, &rl_rlvr_guidance_section, rl_rlvr_guidance_config, samples,
                             &rl_rollout_section, rl_rollout_config, n, RL_ECONFIG,
                             "%s (%lld) must be below %s (%lld), so a guided group keeps samples "
                             "of the policy",
                             S_PATH(rl_rlvr_guidance_section, rl_rlvr_guidance_config, samples),
                             (long long)g->samples, S_PATH(rl_rollout_section, rl_rollout_config, n),
                             (long long)ro->n);
    if (mt->enable)
        return RL_CFG_ERROR2(c, &rl_rlvr_guidance_section, rl_rlvr_guidance_config, enable,
                             &rl_rollout_multi_turn_section, rl_rollout_multi_turn_config, enable,
                             RL_ECONFIG,
                             "%s does not combine with %s: a reference solution's tool output "
                             "would be trained as the model's own text",
                             S_PATH(rl_rlvr_guidance_section, rl_rlvr_guidance_config, enable),
                             S_PATH(rl_rollout_multi_turn_section, rl_rollout_multi_turn_config, enable));
    return RL_OK;
}

#define RL_CFG_DEFINE rl_rlvr_guidance_section, rl_rlvr_guidance_config, "common/schema/rlvr_guidance.def", s_guidance_check, \
    "algorithm.guidance (rlvr)", "Off-policy guidance (LUFFY) of all-wrong prompt groups (driver/recipes/lm/rlvr_guidance.h).", \
    "the driver"
#include "common/schema/section.inc"

/* below in (0, 1]; per_step within the batch. */
static int s_replay_check(const rl_config *c, void *out)
{
    const rl_rlvr_replay_config *q = out;
    const rl_lm_data_config *data = rl_config_section_get(c, &rl_lm_data_section);
    if (!data)
        return rl_error_code();
    if (!(q->below > 0 && q->below <= 1))
        return RL_CFG_ERROR(c, &rl_rlvr_replay_section, rl_rlvr_replay_config, below, RL_ECONFIG,
                            "expected a mean accuracy in (0, 1], got %g", q->below);
    if (q->per_step < 1 || q->per_step > data->train_batch_size)
        return RL_CFG_ERROR2(c, &rl_rlvr_replay_section, rl_rlvr_replay_config, per_step,
                             &rl_batch_section, rl_batch_config, train_batch_size, RL_ECONFIG,
                             "%s: expected 1 to %s (%lld) prompts, got %lld",
                             S_PATH(rl_rlvr_replay_section, rl_rlvr_replay_config, per_step),
                             S_PATH(rl_batch_section, rl_batch_config, train_batch_size),
                             (long long)data->train_batch_size, (long long)q->per_step);
    return RL_OK;
}

#define RL_CFG_DEFINE rl_rlvr_replay_section, rl_rlvr_replay_config, "common/schema/rlvr_replay.def", s_replay_check, \
    "algorithm.hard_replay (rlvr)", "Hard-prompt replay: prompts the policy gets wrong come back in later steps (driver/recipes/lm/rlvr_replay.h).", \
    "the driver"
#include "common/schema/section.inc"

const rl_config_default rl_rlvr_changes[] = {
    {"trainer.val_every", "10"},
    {"trainer.save_every", "50"},
    {NULL, NULL},
};

int rl_rlvr_check_sizes(const rl_config *c, const char *estimator, int64_t min_samples,
                        int actor_ranks)
{
    const rl_lm_data_config *data = rl_config_section_get(c, &rl_lm_data_section);
    const rl_actor_config *ac = data ? rl_config_section_get(c, &rl_actor_section) : NULL;
    const rl_rollout_config *ro = ac ? rl_config_section_get(c, &rl_rollout_section) : NULL;
    if (!ro)
        return rl_error_code();
    int64_t n = ro->n, mini = ac->mini_batch;
    const char *batch_key = S_PATH(rl_batch_section, rl_batch_config, train_batch_size);
    const char *n_key = S_PATH(rl_rollout_section, rl_rollout_config, n);
    const char *mini_key = S_PATH(rl_actor_section, rl_actor_config, mini_batch);
    if (data->train_batch_size % mini)
        return RL_CFG_ERROR2(c, &rl_actor_section, rl_actor_config, mini_batch, &rl_batch_section,
                             rl_batch_config, train_batch_size, RL_ECONFIG,
                             "%s (%lld) must divide %s (%lld)", mini_key, (long long)mini, batch_key,
                             (long long)data->train_batch_size);
    if (n < min_samples)
        return RL_CFG_ERROR2(c, &rl_rollout_section, rl_rollout_config, n, &rl_estimator_section,
                             rl_estimator_config, adv_estimator, RL_ECONFIG,
                             "%s (%lld): %s needs at least %lld samples per prompt", n_key,
                             (long long)n, estimator, (long long)min_samples);
    if (actor_ranks > 0 && (mini * n) % actor_ranks)
        return RL_CFG_ERROR2(c, &rl_actor_section, rl_actor_config, mini_batch, &rl_rollout_section,
                             rl_rollout_config, n, RL_ECONFIG,
                             "a mini-batch of %lld rows (%s %lld × %s %lld) must be a "
                             "multiple of the %d actor ranks",
                             (long long)(mini * n), mini_key, (long long)mini, n_key, (long long)n,
                             actor_ranks);
    return RL_OK;
}
