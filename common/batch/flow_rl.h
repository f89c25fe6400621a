/* common/batch/flow_rl.h — what the embodied methods' section
 * (common/schema/flow_rl.h) means for the mathematics
 * (common/algo/flow/flow.h): FlowSAR's loss settings, the EMA reference's β,
 * and the method's advantage estimator from the estimator table. Shared by
 * the actor (update_flow), the rollout (EMA reference) and the libero_rl
 * recipe. Pure functions of the section. */
#ifndef RLRT_BATCH_FLOW_RL_H
#define RLRT_BATCH_FLOW_RL_H

#include <stdint.h>

#include "common/algo/flow/flow.h"
#include "common/batch/estimators.h"
#include "common/schema/flow_rl.h"

/* FlowSAR's loss settings from the section. */
rl_flow_sar_config rl_flow_rl_sar_loss_config(const rl_flow_rl_config *o);

/* β of EMA update number `count` (flow_sar: flow_sar_ema_schedule; flow_ipo:
 * flow_ipo_beta_ref; NaN for the others). */
double rl_flow_rl_ema_beta(const rl_flow_rl_config *o, int64_t count);

/* algorithm.adv_estimator through the estimator table for the embodied track,
 * checked against algorithm.loss_type (actor needs grpo, actor_critic gae):
 * the table's row, or NULL with an error located at the key of the job `c`
 * (whose section `o` is). */
const rl_estimator *rl_flow_rl_estimator(const rl_config *c, const rl_flow_rl_config *o);

#endif
