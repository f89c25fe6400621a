/* workers/actor/actor_internal.h — the actor role's state, its one update
 * (rl_actor_update: a loss op's forward/backward, then the FSDP step) and
 * the loss ops the tracks register.
 *
 * Files (no file calls one that calls it back):
 *   actor.c            the role: its method table, set-up, log-probs,
 *                      weights, checkpoints; `update` and each op's wire
 *                      name run rl_actor_update with the op
 *   update.c           the state's accessors, the FSDP step, the update
 *                      runner and what the ops share
 *   lm_ppo.c, lm_sft.c              the language-model track's losses
 *   flow_matching.c                 flow matching (diffusion and embodied)
 *   diffusion_grpo.c, diffusion_kl.c  the diffusion track's GRPO loss and its KL
 *   embodied_flow_rl.c              the embodied track's FlowSAR / FlowIPO /
 *                                   flow-SDE GRPO and PPO, and its values
 * A new loss is its file with one rl_actor_loss_op plus one line in
 * RL_ACTOR_LOSS_OPS.
 *
 * Ownership: one state per actor process (ctx->user), made by actor.c's
 * init and freed by its fini; a step's context is the runner's. */
#ifndef RLRT_WORKERS_ACTOR_INTERNAL_H
#define RLRT_WORKERS_ACTOR_INTERNAL_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "common/algo/policy_loss.h"
#include "common/nn/engine/optim.h"
#include "common/schema/actor.h"
#include "common/schema/actor_diffusion.h"
#include "rlrt/dataproto.h"
#include "rlrt/nn/model.h"
#include "rlrt/runtime/channel.h"
#include "rlrt/runtime/weight_bcast.h"
#include "rlrt/runtime/channel_ipc.h"
#include "rlrt/runtime/collective.h"
#include "rlrt/runtime/worker.h"
#include "workers/actor/actor.h"
#include "workers/flow_rl.h"

typedef struct rl_actor_state {
    const rl_config *job;         /* ctx->config (fixed while the role runs) */
    rl_actor_config o;            /* the actor section (strings borrowed from the job tree) */
    int diffusion;                /* the job has the flow and diffusion section */
    rl_actor_diffusion_config df; /* ... then this */
    double temperature;           /* rollout.temperature (1 without token sampling) */
    uint64_t seed;                /* trainer.seed */
    rl_ppo_loss_cfg loss;
    rl_lr_schedule lr;
    rl_model *policy, *ref;
    int64_t P;          /* parameter count */
    rl_comm *comm;      /* NULL when W == 1 */
    int W, rank;
    int64_t begin, end; /* owned shard */
    float *shard_grad;  /* (end - begin), on the actor's device */
    rl_device shard_dev; /* where shard_grad was allocated */
    rl_adamw *opt;
    rl_weight_sender *wsend;
    rl_weight_ipc_sender *wipc; /* CUDA IPC to the rollout ranks on this GPU (weights.c); NULL: none */
    /* the broadcast to rollout ranks (weights.c, rlrt/runtime/weight_bcast.h):
     * its communicator's id (made at open_weights), the communicator and
     * the sender once they joined (NULL: not yet, or dropped after an error) */
    rl_comm_id bcast_id;
    int bcast_world;
    rl_comm *bcomm;
    rl_weight_bcast *wbcast;
    /* actor.device: where policy, ref, gradients and moments live; on a GPU
     * the host keeps a copy of the parameters for weight sync and
     * checkpoints, refreshed after an optimiser step when first needed */
    rl_device dev;
    float *host_params; /* (P) on a GPU; NULL on the CPU (the model's own buffer is the host's) */
    int host_stale;     /* host_params is older than the device's parameters */
} rl_actor_state;

/* actor.device's choices, in the schema's order. */
enum { RL_ACTOR_DEVICE_CPU = 0, RL_ACTOR_DEVICE_CUDA = 1 };
/* actor.weight_fanout's choices, in the order of its .def line */
enum { RL_ACTOR_FANOUT_STAR = 0, RL_ACTOR_FANOUT_CHAIN = 1 };

/* The policy's parameters as a host array (the model's own buffer on the
 * CPU; on a GPU the host copy, refreshed when stale). NULL + message. */
float *rl_actor_host_params(rl_actor_state *a);

/* open_weights and publish_weights (weights.c): ZeroMQ to every receiver,
 * or CUDA IPC to the RL_ACTOR_IPC_RECEIVERS that share this GPU. */
int rl_actor_weights_open(rl_actor_state *a, const rl_dataproto *in, rl_dataproto **out);
int rl_actor_weights_publish(rl_actor_state *a, const rl_dataproto *in, rl_dataproto **out);

/* The gradient shard on a->dev (update.c), and its release. */
int rl_actor_shard_alloc(rl_actor_state *a);
void rl_actor_shard_free(rl_actor_state *a);
/* host[0..P) = every rank's shard (this rank's: `shard`, on a->dev) —
 * collective; over NCCL through a device buffer. */
int rl_actor_all_gather_host(rl_actor_state *a, const float *shard, float *host);

/* The state, or NULL with RL_ESTATE when init_model has not run. */
rl_actor_state *rl_actor_get(rl_worker_ctx *ctx, const char *method);
/* After the gradients of one optimiser step are accumulated: reduce-scatter,
 * global clip at `clip` (0: off), AdamW on the shard, all-gather; the
 * gradients are zeroed. Every rank must call it (collectives). */
int rl_actor_fsdp_step(rl_actor_state *a, double clip, double *grad_norm, double *lr_out);

/* ---- loss ops ------------------------------------------------------------------------------ */

/* One update in progress: what an op's prepare sets up for the runner. */
typedef struct rl_actor_step {
    rl_actor_state *a;
    const rl_dataproto *in; /* the request */
    void *ctx;              /* the op's context: ctx_size bytes, zeroed, the runner's */
    /* set by prepare (the runner's defaults in brackets) */
    rl_dataproto *batch;    /* the forward's batch [NULL: `in`]; freed by the runner */
    unsigned want;          /* its quantities (RL_Q_BIT) */
    rl_model_pass pass;     /* [temperature 1, actor.ppo_micro_batch_size] */
    rl_model_loss_fn loss;
    void *loss_ctx;         /* [ctx] */
    double clip;            /* [actor.grad_clip; the section's ppo_max_grad_norm for a flow or
                             * diffusion op] */
    /* the loss summed over the forward/backward passes: RL_ACTOR_M_LOSS */
    double value;
} rl_actor_step;

typedef struct rl_actor_loss_op {
    const char *name;   /* meta RL_ACTOR_LOSS of an update request */
    const char *method; /* its own method name (the recipes'; in messages) */
    size_t ctx_size;
    int diffusion;      /* needs the flow and diffusion section (and clips at its norm) */
    /* Checks every tensor and argument of the request and sets the step up;
     * an error here returns before any collective. */
    int (*prepare)(rl_actor_step *s);
    /* Optional: more gradients after the loss's (a KL term, an anchor),
     * before the one FSDP step; may add to s->value. */
    int (*extra)(rl_actor_step *s);
    /* The reply's meta: the op's partial sums (the runner adds
     * RL_ACTOR_M_LOSS, _GRAD_NORM and _LR). NULL: out of memory. */
    json_t *(*reply)(const rl_actor_step *s);
    /* Optional: frees what prepare allocated in the context. */
    void (*release)(void *ctx);
} rl_actor_loss_op;

/* The loss ops, one line each: X(op, its own method name); the op's
 * rl_actor_loss_<op> is in its track's file. */
#define RL_ACTOR_LOSS_OPS(X)                                                                        \
    X(ppo, RL_ACTOR_UPDATE)                   /* lm_ppo.c */                                        \
    X(sft, RL_ACTOR_SFT_STEP)                 /* lm_sft.c */                                        \
    X(flow_matching, RL_ACTOR_FLOW_STEP)      /* flow_matching.c */                                 \
    X(diffusion_grpo, RL_ACTOR_UPDATE_DIFFUSION) /* diffusion_grpo.c */                            \
    X(flow_rl, RL_ACTOR_UPDATE_FLOW)          /* embodied_flow_rl.c */

#define RL_ACTOR_LOSS_DECLARE(op, method) extern const rl_actor_loss_op rl_actor_loss_##op;
RL_ACTOR_LOSS_OPS(RL_ACTOR_LOSS_DECLARE)
#undef RL_ACTOR_LOSS_DECLARE

/* One optimiser step of `op` on the request: rl_actor_get, prepare, the
 * forward/backward of the loss, extra, then the FSDP step, which every rank
 * takes even after an error of its own (with no gradient: the call fails
 * anyway) → meta of the op's reply. */
int rl_actor_update(rl_worker_ctx *ctx, const rl_actor_loss_op *op, const rl_dataproto *in,
                    rl_dataproto **out);

/* ---- what the ops share -------------------------------------------------------------------- */

/* The (B, D) f32 tensor `name` of `in` (D = 0: (B)), every value finite, or
 * NULL with a message. */
const float *rl_actor_f32(const rl_dataproto *in, const char *name, int64_t B, int64_t D);

/* A micro-batch's local mean loss as its share of the whole mini-batch's:
 * grad[0..n) and `local` times kept / global (0 when global is 0), added to
 * *loss. */
void rl_actor_share(float *grad, int64_t n, double local, double kept, double global, double *loss);

/* Flow matching (a rl_model_loss_fn over RL_Q_VELOCITY, flow_matching.c):
 * Σ (v − target)² / norm over the micro-batch, the gradient 2(v − target)/norm. */
typedef struct rl_actor_fm_ctx {
    const float *target; /* (B, D) of the whole call */
    double norm;         /* global rows · D (divided by a loss weight) */
    int64_t D;           /* the target's floats per row: must be the model's velocity width */
    const char *name;    /* the target tensor's name (errors) */
} rl_actor_fm_ctx;
int rl_actor_fm_loss(void *arg, const rl_model_io *out, rl_model_io *grad, double *loss);

/* diffusion_kl.c: adds to the policy's gradients those of
 * coef·Σ KL(policy step ‖ reference step) / global_steps over the trained
 * steps of a diffusion_grpo batch (RL_CF_STEP_MASK), with a->ref the
 * reference; *kl_sum is the unscaled Σ KL of this rank's steps. */
int rl_actor_diffusion_kl(rl_actor_state *a, const rl_dataproto *in, double coef,
                          double global_steps, double *kl_sum);

/* embodied_flow_rl.c: the value head over the observation rows (contract:
 * workers/flow_rl.h, flow_values). */
int rl_actor_flow_values(rl_worker_ctx *ctx, const rl_dataproto *in, rl_dataproto **out);

#endif
