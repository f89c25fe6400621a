/* rlrt/roles/reward.h — contract of the reward role (workers/reward/):
 * its methods, the columns and tensors each takes and returns, and its
 * config section. The recipe and the worker both use these names; the
 * strings appear nowhere else.
 *
 * Config (read and range-checked once, at CONFIGURE; RL_REWARD_DEFAULTS is
 * the one place the defaults live):
 *   reward.format_weight            [0, 1]  score = (1 − w)·accuracy + w·format + extra
 *   reward.last_number_fallback     gsm8k: the last number when no "#### n"/\boxed{}
 *   reward.math_last_number_fallback  the same for the math verifiers
 *   reward.default_data_source      verifier for an unknown data_source (null: an error)
 *
 * compute_reward (dispatch dp_compute; rows keep their order)
 *   in   columns RL_REWARD_RESPONSE, RL_REWARD_GROUND_TRUTH, RL_REWARD_DATA_SOURCE
 *        (string, B rows); optional tensor RL_REWARD_EXTRA (B) f32 added to the
 *        score (e.g. the AEPO entropy reward); no meta
 *   out  tensors RL_REWARD_SCORE, RL_REWARD_ACCURACY, RL_REWARD_FORMAT (B) f32
 */
#ifndef RLRT_ROLES_REWARD_H
#define RLRT_ROLES_REWARD_H

#include <stddef.h>

#include "rlrt/config.h"
#include "rlrt/data.h"
#include "rlrt/error.h"
#include "rlrt/reward.h"

#define RL_REWARD_ROLE "reward"

#define RL_REWARD_COMPUTE "compute_reward"

#define RL_REWARD_RESPONSE "response"                 /* decoded response text */
#define RL_REWARD_GROUND_TRUTH RL_DATA_GROUND_TRUTH
#define RL_REWARD_DATA_SOURCE RL_DATA_SOURCE
#define RL_REWARD_EXTRA "extra_reward"
#define RL_REWARD_SCORE "score"
#define RL_REWARD_ACCURACY "accuracy"
#define RL_REWARD_FORMAT "format"

#define RL_REWARD_DEFAULTS \
    "reward:\n" \
    "  format_weight: 0.1\n" \
    "  last_number_fallback: true\n" \
    "  math_last_number_fallback: false\n" \
    "  default_data_source: ~\n"

/* The reward's settings (read by the worker at CONFIGURE and checked by the
 * driver before it starts any process, with the same table). */
typedef struct rl_reward_role_config {
    double format_weight;
    int last_number_fallback, math_last_number_fallback;
    const char *default_source; /* borrowed; NULL = none */
} rl_reward_role_config;

static inline int rl_reward_role_config_read(const rl_config *c, rl_reward_role_config *o)
{
    static const rl_config_spec spec[] = {
        {"reward.format_weight", RL_CFG_NUM, offsetof(rl_reward_role_config, format_weight), 0, 1,
         0, NULL},
        {"reward.last_number_fallback", RL_CFG_BOOL,
         offsetof(rl_reward_role_config, last_number_fallback), 0, 0, 0, NULL},
        {"reward.math_last_number_fallback", RL_CFG_BOOL,
         offsetof(rl_reward_role_config, math_last_number_fallback), 0, 0, 0, NULL},
        {"reward.default_data_source", RL_CFG_STR, offsetof(rl_reward_role_config, default_source),
         0, 0, 0, NULL},
    };
    int rc = rl_config_read(c, spec, sizeof spec / sizeof spec[0], o);
    rl_verifier v;
    if (!rc && o->default_source && rl_reward_verifier_for(NULL, o->default_source, &v))
        rc = rl_config_error_at(c, "reward.default_data_source", RL_ECONFIG, "%s",
                                rl_error_message());
    return rc;
}

#endif
