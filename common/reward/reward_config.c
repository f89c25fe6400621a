/* reward_config.c — the reward sections of a job, checked (see
 * common/reward/reward_config.h). */
#include "common/reward/reward_config.h"

#include "common/schema/reward.h"
#include "common/schema/reward_image.h"
#include "rlrt/error.h"

int rl_reward_config_from_job(const rl_config *job, rl_reward_config *out)
{
    const rl_reward_role_config *o = rl_config_section_get(job, &rl_reward_section);
    if (!o)
        return rl_error_code();
    rl_reward_config_default(out);
    out->format_weight = o->format_weight;
    out->last_number_fallback = o->last_number_fallback;
    out->math_last_number_fallback = o->math_last_number_fallback;
    out->default_source = o->default_source;
    rl_verifier v;
    if (o->default_source && rl_reward_verifier_for(NULL, o->default_source, &v))
        return RL_CFG_ERROR(job, &rl_reward_section, rl_reward_role_config, default_source, RL_ECONFIG,
                            "%s", rl_error_message());
    return RL_OK;
}

int rl_image_reward_weights_from_job(const rl_config *job, double weight[RL_IMG_REWARD_COUNT])
{
    const rl_reward_image_config *o = rl_config_section_get(job, &rl_reward_image_section);
    if (!o)
        return rl_error_code();
    if (rl_image_reward_parse(o->reward_model, weight))
        return RL_CFG_ERROR(job, &rl_reward_image_section, rl_reward_image_config, reward_model,
                            RL_ECONFIG, "%s", rl_error_message());
    static const rl_image_reward_kind scored[2] = {RL_IMG_PROMPT_MATCH, RL_IMG_ON_PROMPT};
    for (int i = 0; i < 2; i++)
        if (weight[scored[i]] != 0 && !(o->scorer_path && *o->scorer_path))
            return RL_CFG_ERROR(job, &rl_reward_image_section, rl_reward_image_config, scorer_path,
                                RL_ECONFIG, "%s needs the learned scorer's directory",
                                rl_image_reward_name(scored[i]));
    if (weight[RL_IMG_REMOTE] != 0 && !(o->endpoint && *o->endpoint))
        return RL_CFG_ERROR(job, &rl_reward_image_section, rl_reward_image_config, endpoint, RL_ECONFIG,
                            "the remote reward needs the scorer server's endpoint");
    return RL_OK;
}
