/* workers/rollout/flow_ref.h — the rollout's EMA weights: the reference
 * θ_ref of FlowSAR / FlowIPO and its annotation, and the evaluation EMA
 * θ_eval (contract: workers/flow_rl.h).
 *
 * State: one per process (a worker serves one role, one call at a time):
 * θ_ref (P floats) and its count of EMA updates, present only in a job
 * whose algorithm.loss_type is flow_sar or flow_ipo; θ_eval and its count,
 * only with eval.ema_decay > 0, and the live weights set aside while
 * θ_eval is in the model for an evaluation. rollout.c calls
 * rl_flow_ref_reset when it builds a model and rl_flow_ref_on_sync after
 * each completed weight sync (a sync while θ_eval is in makes the synced
 * weights live). */
#ifndef RLRT_WORKERS_ROLLOUT_FLOW_REF_H
#define RLRT_WORKERS_ROLLOUT_FLOW_REF_H

#include "rlrt/nn/model.h"
#include "rlrt/runtime/worker.h"

/* The rollout's model (NULL before init_model); rollout.c defines it. */
rl_model *rl_rollout_model(rl_worker_ctx *ctx);

/* Drops θ_ref (a new model: the next sync starts the reference again). */
void rl_flow_ref_reset(void);
/* After the model received new weights: first sync θ_ref = θ, later
 * θ_ref ← β·θ_ref + (1 − β)·θ; the same for θ_eval with β = eval.ema_decay.
 * Nothing in jobs without either. */
int rl_flow_ref_on_sync(rl_worker_ctx *ctx, rl_model *m);

int rl_flow_ref_annotate(rl_worker_ctx *ctx, const rl_dataproto *in, rl_dataproto **out);
int rl_flow_ref_save(rl_worker_ctx *ctx, const rl_dataproto *in, rl_dataproto **out);
int rl_flow_ref_load(rl_worker_ctx *ctx, const rl_dataproto *in, rl_dataproto **out);
int rl_flow_eval_weights(rl_worker_ctx *ctx, const rl_dataproto *in, rl_dataproto **out);

#endif
