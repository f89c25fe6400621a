/* workers/actor/actor.h — contract of the actor role (workers/actor/): the
 * trainable policy (any rl_model kind, rlrt/nn/model.h), a frozen reference
 * copy, FSDP over the flat parameter buffer on its W ranks, the weight
 * channel to the rollout ranks and checkpoints.
 *
 * Config (read and range-checked once, at CONFIGURE; RL_ACTOR_DEFAULTS is the
 * one place these defaults live; the recipe reads the ppo_* batch keys too):
 *   actor.optim.{lr >= 0, weight_decay >= 0, beta1 [0,1), beta2 [0,1), eps > 0,
 *                warmup_steps >= 0, lr_schedule constant|linear|cosine}
 *   actor.grad_clip >= 0 (0 = off)     actor.ppo_micro_batch_size >= 0 (0 = all rows)
 *   actor.ppo_mini_batch_size >= 1    actor.ppo_epochs >= 1
 *   actor.clip_ratio_low, clip_ratio_high [0, 10]   actor.clip_ratio_c > 1 (dual clip)
 *   actor.loss_agg_mode token-mean|seq-mean-token-sum|seq-mean-token-mean|seq-mean-token-sum-norm
 *   actor.entropy_coeff     actor.use_kl_loss     actor.kl_loss_coef >= 0
 *   actor.kl_loss_type kl|k1|abs|mse|k2|low_var_kl|k3
 *   actor.comm_timeout_s (0, 3600]: how long a collective or a weight publish
 *     waits for a peer (a lost peer ends the call after it; then recovery)
 *   actor.optim.total_training_steps >= 1 for a decaying schedule (-1: the
 *     recipe sets the optimiser steps of its run before the workers start)
 *   rollout.temperature (log-probs are those of the sampling distribution)
 *   trainer.seed (random init)
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
 *   update_actor      dp_compute  one optimiser step (PPO loss): batch + tensors
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
 *   sft_step          dp_compute  one optimiser step of masked NLL on the batch's
 *                                 response positions; meta RL_ACTOR_GLOBAL_TOKENS →
 *                                 meta RL_ACTOR_M_LOSS, _TOKENS, _GRAD_NORM, _LR
 *   open_weights      rank_zero   meta RL_ACTOR_HOST → meta RL_ACTOR_ENDPOINT,
 *                                 RL_ACTOR_COUNT (parameters)
 *   publish_weights   rank_zero   meta RL_ACTOR_VERSION, RL_ACTOR_RECEIVERS: sends
 *                                 the parameters as that version
 *   save_checkpoint   one_to_all  meta RL_ACTOR_DIR (checkpoint root), RL_ACTOR_STEP,
 *                                 RL_ACTOR_EPOCH, RL_ACTOR_DATA_POSITION,
 *                                 RL_ACTOR_EXTRA (a JSON object): every rank takes
 *                                 part (the moments are gathered), rank 0 writes
 *   load_checkpoint   one_to_all  meta RL_ACTOR_PATH (a step directory) → meta
 *                                 RL_ACTOR_STEP, _EPOCH, _DATA_POSITION, _EXTRA
 *   save_model        one_to_all  meta RL_ACTOR_PATH (a directory): rank 0 writes
 *                                 model.safetensors + config.json
 *
 * Diffusion methods (a clip_flow policy, common/nn/models/clip_flow.h; the section of
 * RL_ACTOR_DIFFUSION_DEFAULTS must be in the job — the diffusion recipes add
 * it — and the FSDP step, optimiser and checkpoints are the ones above):
 *   flow_matching_step  dp_compute  one optimiser step of flow matching (any kind
 *                                 with RL_Q_VELOCITY): the kind's velocity inputs
 *                                 (clip_flow: x_t, sigma, prompt_ids; flow_policy:
 *                                 proprio, object, task, x_t, t) +
 *                                 tensor RL_ACTOR_VELOCITY_TARGET (B, D) f32;
 *                                 loss Σ (v − target)² / (global rows · D); meta
 *                                 RL_ACTOR_GLOBAL_ROWS (>= 1) → meta RL_ACTOR_M_LOSS
 *                                 (this rank's part), _GRAD_NORM, _LR; clips at
 *                                 actor.ppo_max_grad_norm
 *   update_diffusion  dp_compute  one optimiser step of the clipped per-timestep
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
 * Embodied flow-policy methods (update_flow: FlowSAR, FlowIPO, flow-SDE GRPO
 * and PPO; flow_values): contract in workers/flow_rl.h, code in
 * workers/actor/flow_update.c.
 */
#ifndef RLRT_ROLES_ACTOR_H
#define RLRT_ROLES_ACTOR_H

#include <stddef.h>
#include <stdint.h>

#include "common/algo/kl.h"
#include "common/algo/policy_loss.h"
#include "rlrt/config.h"
#include "rlrt/error.h"
#include "common/nn/engine/optim.h"

#define RL_ACTOR_ROLE "actor"

#define RL_ACTOR_COMM_ID_CREATE "comm_id_create"
#define RL_ACTOR_INIT_MODEL "init_model"
#define RL_ACTOR_COMPUTE_LOG_PROB "compute_log_prob"
#define RL_ACTOR_UPDATE "update_actor"
#define RL_ACTOR_SFT_STEP "sft_step"
#define RL_ACTOR_WEIGHTS_OPEN "open_weights"
#define RL_ACTOR_PUBLISH_WEIGHTS "publish_weights"
#define RL_ACTOR_SAVE_CHECKPOINT "save_checkpoint"
#define RL_ACTOR_LOAD_CHECKPOINT "load_checkpoint"
#define RL_ACTOR_SAVE_MODEL "save_model"
#define RL_ACTOR_FLOW_STEP "flow_matching_step"
#define RL_ACTOR_UPDATE_DIFFUSION "update_diffusion"

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
#define RL_ACTOR_DIR "dir"
#define RL_ACTOR_PATH "path"
#define RL_ACTOR_STEP "step"
#define RL_ACTOR_EPOCH "epoch"
#define RL_ACTOR_DATA_POSITION "data_position"
#define RL_ACTOR_EXTRA "extra"

/* meta results of update_actor / sft_step (partial sums over this rank's
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

#define RL_ACTOR_DEFAULTS \
    "actor:\n" \
    "  optim: {lr: 1.0e-4, weight_decay: 0.0, beta1: 0.9, beta2: 0.999, eps: 1.0e-8,\n" \
    "          warmup_steps: 0, lr_schedule: constant,\n" \
    "          total_training_steps: -1,  # optimiser steps of the schedule (-1: the recipe's)\n" \
    "          value_lr: 0.0}  # the value head's lr (views value_head.*), on the same schedule; 0: lr\n" \
    "  grad_clip: 1.0\n" \
    "  ppo_mini_batch_size: 16   # prompts per optimiser step (x rollout.n rows)\n" \
    "  ppo_micro_batch_size: 0   # rows per forward/backward (0: the whole mini-batch)\n" \
    "  ppo_epochs: 1\n" \
    "  clip_ratio_low: 0.2\n" \
    "  clip_ratio_high: 0.2\n" \
    "  clip_ratio_c: 3.0\n" \
    "  loss_agg_mode: token-mean\n" \
    "  entropy_coeff: 0.0\n" \
    "  use_kl_loss: false\n" \
    "  kl_loss_coef: 0.001\n" \
    "  kl_loss_type: low_var_kl\n" \
    "  comm_timeout_s: 120.0     # a collective or weight publish waits this long for a peer\n"

/* The actor's settings, read and checked by rl_actor_config_read() — the
 * worker at CONFIGURE and the driver before it starts any process use the
 * same table, so a bad value is one located error before anything runs. */
typedef struct rl_actor_config {
    double lr, weight_decay, beta1, beta2, eps, grad_clip, temperature;
    double value_lr; /* actor.optim.value_lr: 0 = lr */
    double clip_low, clip_high, clip_c, entropy_coeff, kl_loss_coef, comm_timeout_s;
    int64_t warmup, total_training_steps, micro_batch, mini_batch, epochs, seed;
    int use_kl_loss;
    const char *lr_schedule_name, *loss_agg_name, *kl_loss_type_name; /* borrowed */
    rl_lr_kind lr_schedule;
    rl_loss_agg loss_agg;
    rl_kl_kind kl_loss_type;
} rl_actor_config;

static inline int rl_actor_config_read(const rl_config *c, rl_actor_config *o)
{
#define RL_A_NUM(path, f, lo, hi, fl) {path, RL_CFG_NUM, offsetof(rl_actor_config, f), lo, hi, fl, NULL}
#define RL_A_INT(path, f, lo, hi) {path, RL_CFG_INT, offsetof(rl_actor_config, f), lo, hi, 0, NULL}
#define RL_A_STR(path, f) {path, RL_CFG_STR, offsetof(rl_actor_config, f), 0, 0, RL_CFG_NONEMPTY, NULL}
    static const rl_config_spec spec[] = {
        RL_A_NUM("actor.optim.lr", lr, 0, 10, 0),
        RL_A_NUM("actor.optim.weight_decay", weight_decay, 0, 10, 0),
        RL_A_NUM("actor.optim.value_lr", value_lr, 0, 10, 0),
        RL_A_NUM("actor.optim.beta1", beta1, 0, 1, RL_CFG_MAX_OPEN),
        RL_A_NUM("actor.optim.beta2", beta2, 0, 1, RL_CFG_MAX_OPEN),
        RL_A_NUM("actor.optim.eps", eps, 0, 1, RL_CFG_MIN_OPEN),
        RL_A_INT("actor.optim.warmup_steps", warmup, 0, 1000000000),
        RL_A_STR("actor.optim.lr_schedule", lr_schedule_name),
        RL_A_NUM("actor.grad_clip", grad_clip, 0, 1e9, 0),
        RL_A_INT("actor.ppo_micro_batch_size", micro_batch, 0, 1 << 24),
        RL_A_INT("actor.ppo_mini_batch_size", mini_batch, 1, 1 << 24),
        RL_A_INT("actor.ppo_epochs", epochs, 1, 10000),
        RL_A_NUM("actor.clip_ratio_low", clip_low, 0, 1, 0),
        RL_A_NUM("actor.clip_ratio_high", clip_high, 0, 10, 0),
        RL_A_NUM("actor.clip_ratio_c", clip_c, 1, 1e9, RL_CFG_MIN_OPEN),
        RL_A_STR("actor.loss_agg_mode", loss_agg_name),
        RL_A_NUM("actor.entropy_coeff", entropy_coeff, -100, 100, 0),
        {"actor.use_kl_loss", RL_CFG_BOOL, offsetof(rl_actor_config, use_kl_loss), 0, 0, 0, NULL},
        RL_A_NUM("actor.kl_loss_coef", kl_loss_coef, 0, 1e6, 0),
        RL_A_STR("actor.kl_loss_type", kl_loss_type_name),
        RL_A_NUM("actor.comm_timeout_s", comm_timeout_s, 0, 3600, RL_CFG_MIN_OPEN),
        RL_A_NUM("rollout.temperature", temperature, 0, 100, RL_CFG_MIN_OPEN),
        RL_A_INT("actor.optim.total_training_steps", total_training_steps, -1, 1000000000000),
        RL_A_INT("trainer.seed", seed, 0, INT64_MAX),
    };
#undef RL_A_NUM
#undef RL_A_INT
#undef RL_A_STR
    int rc = rl_config_read(c, spec, sizeof spec / sizeof spec[0], o);
    if (!rc && rl_lr_kind_parse(o->lr_schedule_name, &o->lr_schedule))
        rc = rl_config_error_at(c, "actor.optim.lr_schedule", RL_ECONFIG, "%s", rl_error_message());
    if (!rc && rl_loss_agg_parse(o->loss_agg_name, &o->loss_agg))
        rc = rl_config_error_at(c, "actor.loss_agg_mode", RL_ECONFIG, "%s", rl_error_message());
    if (!rc && rl_kl_kind_parse(o->kl_loss_type_name, &o->kl_loss_type))
        rc = rl_config_error_at(c, "actor.kl_loss_type", RL_ECONFIG, "%s", rl_error_message());
    if (!rc && o->value_lr > 0 && !(o->lr > 0))
        rc = rl_config_error_at(c, "actor.optim.value_lr", RL_ECONFIG,
                                "the value head's lr (%g) follows the policy's lr schedule as a multiple of "
                                "actor.optim.lr, which is 0: set actor.optim.lr > 0", o->value_lr);
    if (!rc && o->lr_schedule != RL_LR_CONSTANT && o->total_training_steps < 1)
        rc = rl_config_error_at(c, "actor.optim.total_training_steps", RL_ECONFIG,
                                "the '%s' schedule needs the number of optimiser steps, got %lld",
                                o->lr_schedule_name, (long long)o->total_training_steps);
    return rc;
}

/* The diffusion section (seed 004's names): the actor reads the first three,
 * the diffusion recipe timestep_fraction. */
#define RL_ACTOR_DIFFUSION_DEFAULTS \
    "actor:\n" \
    "  clip_range: 1.0e-4         # PPO ratio clip of the per-timestep loss\n" \
    "  ppo_adv_clip_max: 5.0      # advantages clamped to +-this\n" \
    "  ppo_max_grad_norm: 1.0     # gradient clipping of the diffusion steps (0: off)\n" \
    "  timestep_fraction: 1.0     # share of the sampling steps trained per sample\n"

typedef struct rl_actor_diffusion_config {
    double clip_range, adv_clip_max, max_grad_norm, timestep_fraction;
} rl_actor_diffusion_config;

static inline int rl_actor_diffusion_config_read(const rl_config *c, rl_actor_diffusion_config *o)
{
#define RL_D_NUM(path, f, lo, hi, fl) \
    {path, RL_CFG_NUM, offsetof(rl_actor_diffusion_config, f), lo, hi, fl, NULL}
    static const rl_config_spec spec[] = {
        RL_D_NUM("actor.clip_range", clip_range, 0, 10, 0),
        RL_D_NUM("actor.ppo_adv_clip_max", adv_clip_max, 0, 1e6, 0),
        RL_D_NUM("actor.ppo_max_grad_norm", max_grad_norm, 0, 1e9, 0),
        RL_D_NUM("actor.timestep_fraction", timestep_fraction, 0, 1, RL_CFG_MIN_OPEN),
    };
#undef RL_D_NUM
    return rl_config_read(c, spec, sizeof spec / sizeof spec[0], o);
}

#endif
