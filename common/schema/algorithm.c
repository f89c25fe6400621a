/* algorithm.c — the keys the tracks share (common/schema/algorithm.h). */
#include "common/schema/algorithm.h"

#define RL_CFG_DEFINE rl_estimator_section, rl_estimator_config, "common/schema/estimator.def", NULL, \
    "algorithm (advantage estimator)", "The advantages of every training track.", \
    "the driver (each track looks the name up for itself)"
#include "common/schema/section.inc"

#define RL_CFG_DEFINE rl_group_norm_section, rl_group_norm_config, "common/schema/group_norm.def", NULL, \
    "algorithm (group normalisation)", "GRPO's normalisation of a prompt group's rewards (language model, diffusion).", \
    "the driver"
#include "common/schema/section.inc"

#define RL_CFG_DEFINE rl_discount_section, rl_discount_config, "common/schema/discount.def", NULL, \
    "algorithm (discount)", "The discount of the estimators that discount.", "the driver"
#include "common/schema/section.inc"

#define RL_CFG_DEFINE rl_batch_section, rl_batch_config, "common/schema/batch.def", NULL, \
    "data (batch)", "The batch of a training step (language model, diffusion).", "the driver"
#include "common/schema/section.inc"
