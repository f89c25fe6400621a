/* driver/recipes/lm/rlvr_guidance.h — off-policy guidance for the rlvr recipe
 * (LUFFY, "Learning to Reason under Off-Policy Guidance", Yan et al. 2025):
 * a prompt group whose samples are all wrong carries no signal for a group
 * baseline, so a mistake the policy makes every time (a carry it always
 * drops) is never corrected by RL. With guidance on, such a group gets the
 * data row's reference solution in place of its last `samples` samples;
 * the group then holds a correct answer, and the group baseline pushes the
 * policy towards it and away from its own mistakes.
 *
 * Keys (algorithm.guidance.*, common/schema/rlvr.h):
 *   enable   false by default
 *   field    the JSONL field with the reference solution ("solution", the
 *            built-in task's worked solution); every training row must
 *            have it, encoding within rollout.response_length − 1 tokens
 *            (checked by file:line before any worker starts)
 *   samples  samples replaced per all-wrong group, in [1, rollout.n − 1]
 * A group is all-wrong when no sample has reward accuracy > 0.
 *
 * A guided row is a whole sample: the solution's tokens and length, the
 * policy's own log-probs and entropies of those tokens (the actor's
 * compute_log_prob, so TIS and AEPO see what the policy would have given
 * them), its text and the reward ranks' scores; the weight version, seed and
 * prompt columns stay those of the row it replaces. Rows keep their
 * positions. With multi-turn rollouts guidance is refused: a solution's tool
 * output would be learned as if the model had written it. With AEPO on, the
 * guided rows stay out of AEPO's statistics and get no entropy reward
 * (rlvr_aepo.c), and no row gets a KL term in the reward (common/batch/lm_adv.h:
 * k1/k2/k3 estimate KL only at tokens the policy sampled; with it, a
 * guided row's KL made AEPO collapse, docs/decisions/off-policy-guidance.md
 * guidance").
 *
 * Metrics (of the first round of a step): batch/guided_groups (share of
 * groups guided), batch/guided_accuracy (the reward's accuracy on the
 * guided rows: below 1 means reference solutions the verifier rejects).
 *
 * Ownership: the struct borrows the job's section (valid while the job
 * tree is unchanged). */
#ifndef RLRT_DRIVER_RLVR_GUIDANCE_H
#define RLRT_DRIVER_RLVR_GUIDANCE_H

#include <stdint.h>

#include "common/schema/rlvr.h"
#include "driver/recipes/lm/lm_common.h"


/* Replaces the last `samples` rows of every all-wrong group of the scored
 * round *dp (see above; the solutions are the rows of j->train by global
 * id). *guided (may be NULL) receives the number of groups guided;
 * ms (may be NULL) the metrics. `shape` (may be NULL) is applied to the
 * guided rows after scoring (the recipe's overlong shaping). */
typedef int (*rl_rlvr_shape_fn)(void *ctx, rl_dataproto *dp);
int rl_rlvr_guidance_apply(const rl_rlvr_guidance_config *g, rl_lm_job *j, rl_dataproto **dp,
                           rl_rlvr_shape_fn shape, void *shape_ctx, int64_t *guided,
                           rl_metric_set *ms);

#endif
