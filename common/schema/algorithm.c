/* algorithm.c — the keys the tracks share (common/schema/algorithm.h). */
#include "common/schema/algorithm.h"

#define RL_CFG_STRUCT rl_estimator_config
static const rl_config_key s_estimator[] = {
#define X RL_CFG_KEY
#include "common/schema/estimator.def"
#undef X
};
const rl_config_section rl_estimator_section =
    RL_CFG_SECTION("algorithm (advantage estimator)", "The advantages of every training track.",
                   "the driver (each track looks the name up for itself)", s_estimator, NULL);
#undef RL_CFG_STRUCT

#define RL_CFG_STRUCT rl_group_norm_config
static const rl_config_key s_group_norm[] = {
#define X RL_CFG_KEY
#include "common/schema/group_norm.def"
#undef X
};
const rl_config_section rl_group_norm_section =
    RL_CFG_SECTION("algorithm (group normalisation)",
                   "GRPO's normalisation of a prompt group's rewards (language model, diffusion).",
                   "the driver", s_group_norm, NULL);
#undef RL_CFG_STRUCT

#define RL_CFG_STRUCT rl_discount_config
static const rl_config_key s_discount[] = {
#define X RL_CFG_KEY
#include "common/schema/discount.def"
#undef X
};
const rl_config_section rl_discount_section =
    RL_CFG_SECTION("algorithm (discount)", "The discount of the estimators that discount.",
                   "the driver", s_discount, NULL);
#undef RL_CFG_STRUCT

#define RL_CFG_STRUCT rl_batch_config
static const rl_config_key s_batch[] = {
#define X RL_CFG_KEY
#include "common/schema/batch.def"
#undef X
};
const rl_config_section rl_batch_section =
    RL_CFG_SECTION("data (batch)", "The batch of a training step (language model, diffusion).",
                   "the driver", s_batch, NULL);
#undef RL_CFG_STRUCT
