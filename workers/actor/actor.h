/* workers/actor/actor.h — contract of the actor role (workers/actor/): the
 * trainable policy (any rl_model kind, rlrt/nn/model.h), a frozen reference
 * copy, FSDP over the flat parameter buffer on its W ranks, the weight
 * channel to the rollout ranks and checkpoints.
 *
 * Config: the actor section (common/schema/actor.h; the recipes read its
 * batch sizes too) and, for the flow and diffusion losses, the actor (flow
 * and diffusion) section (common/schema/actor_diffusion.h); with them
 * rollout.temperature (the log-probs are those of the sampling
 * distribution; 1 in a job without token sampling) and trainer.seed (random
 * init). Read once, at CONFIGURE; the driver reads the same sections before
 * it starts any process.
 *
 * Methods (dispatch; batches use the model kind's layout, e.g. the LM's
 * prompts/prompt_lens/responses/response_lens of common/nn/models/lm/lm_model.h):
 *   comm_id_create    rank_zero   meta RL_ACTOR_HOST → meta RL_ACTOR_COMM_ID: the
 *                                 FSDP communicator's id (rank 0 listens on host)
 *   init_model        one_to_all  meta RL_ACTOR_COMM_ID (when W > 1): builds the
 *                                 policy and the reference, joins the communicator
 *   compute_log_prob  dp_compute  batch; meta RL_ACTOR_WHICH "policy"|"ref",
 *                                 RL_ACTOR_WANT_ENTROPY 0/1 → tensors RL_ACTOR_LOGP
 *                                 (B, K) f32 [, RL_ACTOR_ENTROPY (B, K) f32]
 *   update            dp_compute  one optimiser step of the loss op meta RL_ACTOR_LOSS
 *                                 names (below), with the FSDP step, AdamW and the
 *                                 gradient clip; the request is the op's → meta of
 *                                 the op's partial sums, RL_ACTOR_M_LOSS, _GRAD_NORM,
 *                                 _LR, one reply per rank. Each op is also served
 *                                 under its own method name (in brackets below)
 *   open_weights      rank_zero   meta RL_ACTOR_HOST [, RL_ACTOR_IPC_RECEIVERS,
 *                                 RL_ACTOR_BCAST_RECEIVERS (→ RL_ACTOR_BCAST_ID: the
 *                                 communicator of rlrt/runtime/weight_bcast.h)] → meta
 *                                 RL_ACTOR_ENDPOINT, RL_ACTOR_COUNT (parameters) [,
 *                                 RL_ACTOR_IPC_ENDPOINT: CUDA IPC for the rollout
 *                                 ranks on this GPU, when the actor is on it]
 *   publish_weights   rank_zero   meta RL_ACTOR_VERSION, RL_ACTOR_RECEIVERS (ZeroMQ) [,
 *                                 RL_ACTOR_IPC_RECEIVERS, RL_ACTOR_BCAST_RECEIVERS]: sends the parameters as
 *                                 that version → meta RL_ACTOR_SYNC_BYTES, _S, _GBPS,
 *                                 _TRANSPORT (workers/actor/weights.c)
 *   save_checkpoint   one_to_all  meta RL_ACTOR_DIR (checkpoint root), RL_ACTOR_STEP,
 *                                 RL_ACTOR_EPOCH, RL_ACTOR_DATA_POSITION,
 *                                 RL_ACTOR_EXTRA (a JSON object) [, RL_ACTOR_FILES]:
 *                                 every rank takes part (the moments are gathered),
 *                                 rank 0 writes (model.safetensors with metadata
 *                                 "format": "pt", config.json, the files)
 *   load_checkpoint   one_to_all  meta RL_ACTOR_PATH (a step directory) → meta
 *                                 RL_ACTOR_STEP, _EPOCH, _DATA_POSITION, _EXTRA
 *   save_model        one_to_all  meta RL_ACTOR_PATH (a directory) [, RL_ACTOR_DTYPE
 *                                 "float32" (default) | "bfloat16", RL_ACTOR_FILES]:
 *                                 rank 0 writes model.safetensors (metadata
 *                                 "format": "pt") + config.json + the files
 *   RL_ACTOR_FILES (optional) is an object {file name: {"copy": path} or
 *   {"text": content}}: files rank 0 writes into the directory beside the
 *   model (a copy of a file on its node, or the text), each atomically: the
 *   tokenizer files and generation_config.json of a Hugging Face model, so
 *   the directory loads in transformers as it is. A name is a plain file
 *   name (no '/'). The actor gives the files no meaning.
 *
 * Loss ops (each in its track's file, workers/actor/actor_internal.h):
 *   ppo [update_actor]            one optimiser step (PPO loss): batch + tensors
 *                                 RL_ACTOR_OLD_LOGP, RL_ACTOR_ADVANTAGES (B, K) f32
 *                                 [, RL_ACTOR_REF_LOGP (B, K) f32 with use_kl_loss];
 *                                 meta RL_ACTOR_GLOBAL_TOKENS (valid positions in the
 *                                 whole mini-batch over all ranks, >= 0),
 *                                 RL_ACTOR_GLOBAL_ROWS (its rows, >= 0) and
 *                                 RL_ACTOR_GLOBAL_SEQS (its rows with at least one
 *                                 valid position, >= 0): the divisors of the loss
 *                                 aggregation (common/algo/policy_loss.h), so W ranks
 *                                 and any micro-batching give one update → meta of
 *                                 partial sums, one reply per rank: RL_ACTOR_M_* below
 *   sft [sft_step]                one optimiser step of masked NLL on the batch's
 *                                 response positions; meta RL_ACTOR_GLOBAL_TOKENS →
 *                                 meta RL_ACTOR_M_LOSS, _TOKENS, _GRAD_NORM, _LR
 *
 * Flow and diffusion loss ops (the actor (flow and diffusion) section must be
 * in the job; its ppo_max_grad_norm clips their gradients):
 *   flow_matching [flow_matching_step]  one optimiser step of flow matching (any kind
 *                                 with RL_Q_VELOCITY): the kind's velocity inputs
 *                                 (clip_flow: x_t, sigma, prompt_ids; flow_policy:
 *                                 proprio, object, task, x_t, t) +
 *                                 tensor RL_ACTOR_VELOCITY_TARGET (B, D) f32;
 *                                 loss Σ (v − target)² / (global rows · D); meta
 *                                 RL_ACTOR_GLOBAL_ROWS (>= 1) → meta RL_ACTOR_M_LOSS
 *                                 (this rank's part), _GRAD_NORM, _LR; clips at
 *                                 actor.ppo_max_grad_norm
 *   diffusion_grpo [update_diffusion]  one optimiser step of the clipped per-timestep
 *                                 GRPO loss (rl_diffusion_grpo_loss, seed 004):
 *                                 the kind's recorded chain (latents, sigmas,
 *                                 noise_level, prompt_ids, step_mask = the trained
 *                                 timesteps) + RL_ACTOR_OLD_LOGP (B, N) f32 (the
 *                                 sampler's log-probs) + RL_ACTOR_ADVANTAGES (B) f32;
 *                                 L = Σ over trained (b, k) of max(−A·r, −A·clip(r,
 *                                 1 ± clip_range)) / global steps, A clamped to
 *                                 ±ppo_adv_clip_max; with actor.use_kl_loss plus
 *                                 kl_loss_coef·Σ KL(step ‖ reference's step) / global
 *                                 steps (rl_diffusion_sde_kl, Flow-GRPO's beta; the
 *                                 reference is the frozen copy, model.init_from;
 *                                 kl_loss_type does not apply: the KL of two
 *                                 Gaussian steps is exact); meta
 *                                 RL_ACTOR_GLOBAL_TOKENS (the trained steps of the
 *                                 whole mini-batch, >= 1) → meta RL_ACTOR_M_LOSS
 *                                 (the clipped loss alone), _TOKENS, _CLIPFRAC_SUM, _PPO_KL_SUM, _KL_LOSS_SUM
 *                                 (Σ KL), RL_ACTOR_M_RATIO_SUM (sums over this rank's
 *                                 trained steps), _GRAD_NORM, _LR; gradients clipped
 *                                 at actor.ppo_max_grad_norm
 *
 * Embodied loss op:
 *   flow_rl [update_flow]         the embodied track's FlowSAR, FlowIPO, flow-SDE
 *                                 GRPO and PPO: contract in workers/flow_rl.h, code
 *                                 in workers/actor/embodied_flow_rl.c (with the value
 *                                 forward, method flow_values)
 */
#ifndef RLRT_ROLES_ACTOR_H
#define RLRT_ROLES_ACTOR_H

#include "common/schema/actor.h"
#include "common/schema/actor_diffusion.h"

#define RL_ACTOR_ROLE "actor"

#define RL_ACTOR_COMM_ID_CREATE "comm_id_create"
#define RL_ACTOR_INIT_MODEL "init_model"
#define RL_ACTOR_COMPUTE_LOG_PROB "compute_log_prob"
#define RL_ACTOR_UPDATE_ANY "update"
#define RL_ACTOR_UPDATE "update_actor"
#define RL_ACTOR_SFT_STEP "sft_step"
#define RL_ACTOR_WEIGHTS_OPEN "open_weights"
#define RL_ACTOR_PUBLISH_WEIGHTS "publish_weights"
#define RL_ACTOR_SAVE_CHECKPOINT "save_checkpoint"
#define RL_ACTOR_LOAD_CHECKPOINT "load_checkpoint"
#define RL_ACTOR_SAVE_MODEL "save_model"
#define RL_ACTOR_FLOW_STEP "flow_matching_step"
#define RL_ACTOR_UPDATE_DIFFUSION "update_diffusion"

/* loss ops (meta RL_ACTOR_LOSS of an update) */
#define RL_ACTOR_LOSS "loss"
#define RL_ACTOR_LOSS_PPO "ppo"
#define RL_ACTOR_LOSS_SFT "sft"
#define RL_ACTOR_LOSS_FLOW_MATCHING "flow_matching"
#define RL_ACTOR_LOSS_DIFFUSION_GRPO "diffusion_grpo"
#define RL_ACTOR_LOSS_FLOW_RL "flow_rl"

/* tensors */
#define RL_ACTOR_LOGP "logp"
#define RL_ACTOR_ENTROPY "entropy"
#define RL_ACTOR_OLD_LOGP "old_logp"
#define RL_ACTOR_REF_LOGP "ref_logp"
#define RL_ACTOR_ADVANTAGES "advantages"
#define RL_ACTOR_VELOCITY_TARGET "velocity_target"

/* meta arguments */
#define RL_ACTOR_HOST "host"
#define RL_ACTOR_COMM_ID "comm_id"
#define RL_ACTOR_WHICH "which"
#define RL_ACTOR_WHICH_POLICY "policy"
#define RL_ACTOR_WHICH_REF "ref"
#define RL_ACTOR_WANT_ENTROPY "entropy"
#define RL_ACTOR_GLOBAL_TOKENS "global_tokens"
#define RL_ACTOR_GLOBAL_ROWS "global_rows"
#define RL_ACTOR_GLOBAL_SEQS "global_seqs"
#define RL_ACTOR_ENDPOINT "endpoint"
#define RL_ACTOR_COUNT "count"
#define RL_ACTOR_VERSION "version"
#define RL_ACTOR_RECEIVERS "receivers"
#define RL_ACTOR_IPC_RECEIVERS "ipc_receivers" /* rollout ranks on the actor's GPU (CUDA IPC) */
#define RL_ACTOR_IPC_ENDPOINT "ipc_endpoint"
#define RL_ACTOR_BCAST_RECEIVERS "bcast_receivers" /* rollout ranks taking the broadcast */
#define RL_ACTOR_BCAST_ID "bcast_id" /* the broadcast communicator's rl_comm_id (text) */
/* publish_weights' reply: what the sync measured */
#define RL_ACTOR_SYNC_BYTES "sync_bytes"
#define RL_ACTOR_SYNC_S "sync_s"
#define RL_ACTOR_SYNC_GBPS "sync_gbps"
#define RL_ACTOR_SYNC_TRANSPORT "sync_transport"
#define RL_ACTOR_DIR "dir"
#define RL_ACTOR_PATH "path"
#define RL_ACTOR_STEP "step"
#define RL_ACTOR_EPOCH "epoch"
#define RL_ACTOR_DATA_POSITION "data_position"
#define RL_ACTOR_EXTRA "extra"
#define RL_ACTOR_FILES "files"
#define RL_ACTOR_DTYPE "dtype"

/* meta results of an update (partial sums over this rank's
 * rows: the recipe adds the ranks' values and divides by the token count;
 * _PG_LOSS_SUM, _ENTROPY_SUM and _KL_LOSS_SUM are this rank's share of the
 * mini-batch's aggregated value times RL_ACTOR_GLOBAL_TOKENS, so that quotient
 * is the value whatever W and the micro-batching) */
#define RL_ACTOR_M_LOSS "loss"
#define RL_ACTOR_M_TOKENS "tokens"
#define RL_ACTOR_M_PG_LOSS_SUM "pg_loss_sum"
#define RL_ACTOR_M_CLIPFRAC_SUM "clipfrac_sum"
#define RL_ACTOR_M_PPO_KL_SUM "ppo_kl_sum"
#define RL_ACTOR_M_ENTROPY_SUM "entropy_sum"
#define RL_ACTOR_M_KL_LOSS_SUM "kl_loss_sum"
#define RL_ACTOR_M_DUAL_CLIP_SUM "dual_clip_sum"
#define RL_ACTOR_M_GRAD_NORM "grad_norm"
#define RL_ACTOR_M_LR "lr"
#define RL_ACTOR_M_RATIO_SUM "ratio_sum"

#endif
