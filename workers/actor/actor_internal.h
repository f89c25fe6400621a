/* workers/actor/actor_internal.h — the actor role's state and FSDP step,
 * shared by its method files (actor.c: the LM and diffusion methods;
 * diffusion_kl.c: the diffusion update's KL to the reference;
 * flow_update.c: the embodied flow-policy methods of workers/flow_rl.h).
 * One state per actor process (ctx->user), owned by actor.c's init/fini. */
#ifndef RLRT_WORKERS_ACTOR_INTERNAL_H
#define RLRT_WORKERS_ACTOR_INTERNAL_H

#include "rlrt/nn/model.h"
#include "common/nn/engine/optim.h"
#include "workers/actor/actor.h"
#include "rlrt/runtime/channel.h"
#include "rlrt/runtime/collective.h"
#include "rlrt/runtime/worker.h"

typedef struct rl_actor_state {
    rl_actor_config o;
    int diffusion;                /* the job has the diffusion section */
    rl_actor_diffusion_config df; /* actor.clip_range, ... (diffusion methods) */
    rl_ppo_loss_cfg loss;
    rl_lr_schedule lr;
    rl_model *policy, *ref;
    int64_t P;          /* parameter count */
    rl_comm *comm;      /* NULL when W == 1 */
    int W, rank;
    int64_t begin, end; /* owned shard */
    float *shard_grad;  /* (end - begin) */
    rl_adamw *opt;
    rl_weight_sender *wsend;
} rl_actor_state;

/* The state, or NULL with RL_ESTATE when init_model has not run. */
rl_actor_state *rl_actor_get(rl_worker_ctx *ctx, const char *method);
/* After the gradients of one optimiser step are accumulated: reduce-scatter,
 * global clip at `clip` (0: off), AdamW on the shard, all-gather; the
 * gradients are zeroed. Every rank must call it (collectives). */
int rl_actor_fsdp_step(rl_actor_state *a, double clip, double *grad_norm, double *lr_out);

/* Flow matching (a rl_model_loss_fn over RL_Q_VELOCITY): Σ (v − target)² /
 * norm over the micro-batch, the gradient 2(v − target)/norm. */
typedef struct rl_actor_fm_ctx {
    const float *target; /* (B, D) of the whole call */
    double norm;         /* global rows · D (divided by a loss weight) */
    int64_t D;           /* the target's floats per row: must be the model's velocity width */
    const char *name;    /* the target tensor's name (errors) */
} rl_actor_fm_ctx;
int rl_actor_fm_loss(void *arg, const rl_model_io *out, rl_model_io *grad, double *loss);

/* diffusion_kl.c: adds to the policy's gradients those of
 * coef·Σ KL(policy step ‖ reference step) / global_steps over the trained
 * steps of an update_diffusion batch (RL_CF_STEP_MASK), with a->ref the
 * reference; *kl_sum is the unscaled Σ KL of this rank's steps. */
int rl_actor_diffusion_kl(rl_actor_state *a, const rl_dataproto *in, double coef,
                          double global_steps, double *kl_sum);

/* flow_update.c (contract: workers/flow_rl.h) */
int rl_actor_update_flow(rl_worker_ctx *ctx, const rl_dataproto *in, rl_dataproto **out);
int rl_actor_flow_values(rl_worker_ctx *ctx, const rl_dataproto *in, rl_dataproto **out);

#endif
