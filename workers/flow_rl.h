/* workers/flow_rl.h — contract of the embodied flow-policy RL methods
 * (seeds 000 FlowSAR and 001 FlowIPO, RLinf's flow-SDE GRPO and PPO): the
 * rollout's EMA reference and annotation methods and the actor's update and
 * value methods, with their tensor and meta names. The algorithm.* section
 * the rollout, the actor and the libero_rl recipe share is rl_flow_rl_section
 * (common/schema/flow_rl.h, read with rl_config_section_get); what it means
 * for the loss, the EMA and the estimator is common/batch/flow_rl.h. The
 * policy is a flow_policy model (common/nn/models/flow_policy.h); the
 * mathematics is common/algo/flow/flow.h.
 *
 * Algorithm switch (the only keys that change between methods):
 *   algorithm.loss_type     flow_sar | flow_ipo | actor (flow-SDE GRPO) |
 *                           actor_critic (flow-SDE PPO, value head)
 *   algorithm.adv_estimator grpo | gae, through the estimator table
 *                           (rl_flow_rl_estimator; actor needs grpo,
 *                           actor_critic gae; the flow_* losses ignore it:
 *                           their credit is their own, the advantages are
 *                           the seeds' dummies)
 *
 * Loss aggregation (actor / actor_critic): actor.loss_agg_mode token-mean
 * (every trained chunk step weighs the same: a failed episode that ran to
 * the time limit counts ~2x a success that ended early) or
 * seq-mean-token-mean (every episode weighs the same; the recipe scales the
 * advantages, rl_embodied_seq_mean_scale). The LM's other two modes are
 * located errors here; flow_sar / flow_ipo weigh chunks by their own credit
 * and take token-mean only (the section's check reads this one actor.* key
 * and rollout.noise_level, so its job has the actor's and the rollout's keys
 * too).
 *
 * EMA reference (rollout, flow_sar / flow_ipo only). The rollout keeps
 * θ_ref, a copy of the flat parameter buffer, with cpu_weight_swap
 * semantics: an annotate call swaps θ_ref into the model once for the whole
 * batch and swaps the live weights back before it returns. The first weight
 * sync copies θ; each later sync i (0-based count of EMA updates) does
 * θ_ref ← β_i·θ_ref + (1 − β_i)·θ with β_i from rl_flow_rl_ema_beta:
 *   flow_sar: flow_sar_ema_schedule fixed (flow_sar_ema_beta) | linear
 *             (min(flow_sar_ema_eta_rate·i, flow_sar_ema_eta_max))
 *   flow_ipo: fixed flow_ipo_beta_ref
 *
 * Rollout methods:
 *   flow_annotate  dp_compute  rows: RL_FP_PROPRIO, RL_FP_OBJECT, RL_FP_TASK,
 *                  RL_FLOW_ACTION (B, D) f32 (the action chunk the env ran),
 *                  RL_FP_INITIAL_NOISE (B, D) f32 (flow_ipo), RL_FLOW_SEEDS (B)
 *                  i64 (each row's draws: Philox(seed, stream) for t, ε, ε_mid)
 *                  → RL_FLOW_T (B) f32 t ~ U[t_min, t_max], RL_FLOW_EPS (B, D)
 *                  ε ~ N(0, I), RL_FLOW_V_OLD (B, D) = v_ref(x_t, t) with
 *                  x_t = (1 − t)·a + t·ε, and
 *                    flow_sar: RL_FLOW_RECON (B) e = ‖a − (x_mid − v_ref·τ)‖²
 *                              at τ = flow_sar_tau_mid with its own ε_mid;
 *                    flow_ipo: RL_FLOW_REF_ACTION (B, D): the ODE of θ_ref
 *                              from the row's initial noise.
 *                  Needs a completed sync (RL_ESTATE otherwise).
 *   flow_ref_save  rank_zero   meta RL_FLOW_PATH (a directory): θ_ref as
 *                  model.safetensors + config.json, and ema.json {count};
 *                  meta RL_FLOW_WHICH "eval": θ_eval instead ("ref" default)
 *   flow_ref_load  one_to_all  meta RL_FLOW_PATH (+ RL_FLOW_WHICH): the same
 *                  back (exact resume)
 *   eval_weights   one_to_all  meta RL_FLOW_EMA true: θ_eval into the model
 *                  (the live weights set aside) until RL_FLOW_EMA false or
 *                  the next weight sync; evaluation episodes served in
 *                  between act with θ_eval. θ_eval (eval.ema_decay d > 0):
 *                  the first sync's weights, then θ_eval ← d·θ_eval +
 *                  (1 − d)·θ at every sync (Polyak averaging, as Diffusion
 *                  Policy and openpi evaluate their EMA weights)
 *
 * Actor methods (FSDP step, optimiser and clipping as update_actor; the loss
 * is normalised by meta RL_ACTOR_GLOBAL_ROWS, the kept rows of the whole
 * mini-batch over all ranks, so W ranks and micro-batching give one update):
 *   update_flow  dp_compute  rows: RL_FP_PROPRIO, RL_FP_OBJECT, RL_FP_TASK,
 *                RL_FLOW_MASK (B) f32 (0: not trained) and per loss_type
 *     flow_sar: RL_FLOW_ACTION, RL_FLOW_T, RL_FLOW_EPS, RL_FLOW_V_OLD,
 *               RL_FLOW_WEIGHTS (B), RL_FLOW_LABELS (B) ±1
 *     flow_ipo: RL_FLOW_ACTION, RL_FLOW_T, RL_FLOW_EPS, RL_FLOW_V_OLD (v_ref),
 *               RL_FLOW_WEIGHTS (B) w
 *     actor / actor_critic: the recorded chain (RL_FP_CHAIN, RL_FP_TIMES,
 *               RL_FP_NOISE_LEVEL, RL_FP_STEP_MASK), RL_ACTOR_OLD_LOGP (B, N),
 *               RL_ACTOR_ADVANTAGES (B); actor_critic also RL_FLOW_RETURNS (B)
 *               and RL_FLOW_OLD_VALUES (B) (value loss, clipped at
 *               algorithm.value_clip, times algorithm.value_loss_coef)
 *     → meta partial sums over this rank's kept rows: RL_ACTOR_M_LOSS, and
 *       "rows" plus the seeds' metric names (actor/flow_sar_*, actor/
 *       flow_ipo_loss, actor/velocity_mse, actor/flow_ipo_target_gap, actor/pg_loss,
 *       actor/pg_clipfrac, actor/ppo_kl, actor/value_loss) each already
 *       multiplied by its row count; RL_ACTOR_M_GRAD_NORM, RL_ACTOR_M_LR.
 *     demonstration anchor (any loss_type, algorithm.demo_coef λ > 0): the
 *     request also holds B demonstration pairs (RL_FLOW_DEMO_* below: the
 *     observation, x_t, t and the flow-matching target ε − a of
 *     driver/recipes/embodied/flow_demos.h) and the step adds λ·mean‖v(x_t, t) − (ε − a)‖²
 *     over them (mean over global rows × D) to the loss before the one
 *     optimiser step; meta partial sum "actor/demo_fm_loss" (× rows), and
 *     (issue 43's diagnostics, this rank's local gradients) actor/
 *     rl_grad_norm, actor/anchor_grad_norm and actor/rl_anchor_grad_cos:
 *     the norms of the method's gradient (× rl_coef) and the anchor's and
 *     their cosine (0 when one is zero), × rows. FlowSAR also sends
 *     actor/flow_sar_label_pos (mean R) and, softplus_kl,
 *     actor/flow_sar_softplus_grad_scale / _flat (rl_flow_sar_metrics).
 *     algorithm.rl_coef scales the method's own loss (1; 0 leaves the
 *     anchor alone: the control that tells the method's gain from the
 *     demonstrations').
 *     Without it, a policy that regresses on its own samples (FlowSAR's
 *     positive branch, FlowIPO's target, self-imitation) drifts off the
 *     demonstrations within tens of updates (docs/decisions/demonstration-anchor.md:
 *     measured).
 *   flow_values  dp_compute  observation rows → RL_FLOW_VALUES (B) f32
 */
#ifndef RLRT_ROLES_FLOW_RL_H
#define RLRT_ROLES_FLOW_RL_H

#include "common/batch/flow_rl.h"  /* the section as loss settings, EMA β, estimator */
#include "common/schema/flow_rl.h" /* rl_flow_rl_section: the algorithm.* keys */

#define RL_ROLLOUT_FLOW_ANNOTATE "flow_annotate"
#define RL_ROLLOUT_FLOW_REF_SAVE "flow_ref_save"
#define RL_ROLLOUT_FLOW_REF_LOAD "flow_ref_load"
#define RL_ROLLOUT_EVAL_WEIGHTS "eval_weights"
#define RL_ACTOR_UPDATE_FLOW "update_flow"
#define RL_ACTOR_FLOW_VALUES "flow_values"

#define RL_FLOW_ACTION "flow_action"
#define RL_FLOW_SEEDS "flow_seeds"
#define RL_FLOW_T "flow_t"
#define RL_FLOW_EPS "flow_epsilon"
#define RL_FLOW_V_OLD "v_old"
#define RL_FLOW_RECON "recon_error"
#define RL_FLOW_REF_ACTION "ref_action"
#define RL_FLOW_WEIGHTS "flow_weights"
#define RL_FLOW_LABELS "flow_labels"
#define RL_FLOW_MASK "flow_mask"
#define RL_FLOW_RETURNS "returns"
#define RL_FLOW_OLD_VALUES "old_values"
#define RL_FLOW_VALUES "values"
#define RL_FLOW_PATH "path"
#define RL_FLOW_WHICH "which"
#define RL_FLOW_EMA "ema"
#define RL_FLOW_M_ROWS "rows"
#define RL_FLOW_DEMO_PROPRIO "demo_proprio"
#define RL_FLOW_DEMO_OBJECT "demo_object"
#define RL_FLOW_DEMO_TASK "demo_task"
#define RL_FLOW_DEMO_X_T "demo_x_t"
#define RL_FLOW_DEMO_T "demo_t"
#define RL_FLOW_DEMO_TARGET "demo_target"
#define RL_FLOW_M_DEMO_LOSS "actor/demo_fm_loss"

#endif
