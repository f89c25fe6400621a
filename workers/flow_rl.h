/* workers/flow_rl.h — contract of the embodied flow-policy RL methods
 * (seeds 000 FlowSAR and 001 FlowIPO, RLinf's flow-SDE GRPO and PPO): the
 * algorithm.* section the rollout, the actor and the libero_rl recipe share,
 * the rollout's EMA reference and annotation method, and the actor's update
 * and value methods. The policy is a flow_policy model (common/nn/models/flow_policy.h);
 * the mathematics is common/algo/flow/flow.h.
 *
 * Algorithm switch (the only keys that change between methods):
 *   algorithm.loss_type     flow_sar | flow_ipo | actor (flow-SDE GRPO) |
 *                           actor_critic (flow-SDE PPO, value head)
 *   algorithm.adv_estimator grpo | gae  (actor needs grpo, actor_critic gae;
 *                           the flow_* losses ignore it: their credit is
 *                           their own, the advantages are the seeds' dummies)
 *
 * Loss aggregation (actor / actor_critic): actor.loss_agg_mode token-mean
 * (every trained chunk step weighs the same: a failed episode that ran to
 * the time limit counts ~2x a success that ended early) or
 * seq-mean-token-mean (every episode weighs the same; the recipe scales the
 * advantages, rl_embodied_seq_mean_scale). The LM's other two modes are
 * located errors here; flow_sar / flow_ipo weigh chunks by their own credit
 * and take token-mean only. rl_flow_rl_config_read reads this one actor.*
 * key, so its config needs RL_ACTOR_DEFAULTS too.
 *
 * EMA reference (rollout, flow_sar / flow_ipo only). The rollout keeps
 * θ_ref, a copy of the flat parameter buffer, with cpu_weight_swap
 * semantics: an annotate call swaps θ_ref into the model once for the whole
 * batch and swaps the live weights back before it returns. The first weight
 * sync copies θ; each later sync i (0-based count of EMA updates) does
 * θ_ref ← β_i·θ_ref + (1 − β_i)·θ with β_i from rl_flow_ema_beta:
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
 *     optimiser step; meta partial sum "actor/demo_fm_loss" (× rows).
 *     algorithm.rl_coef scales the method's own loss (1; 0 leaves the
 *     anchor alone: the control that tells the method's gain from the
 *     demonstrations').
 *     Without it, a policy that regresses on its own samples (FlowSAR's
 *     positive branch, FlowIPO's target, self-imitation) drifts off the
 *     demonstrations within tens of updates (docs/ARCHITECTURE.md,
 *     "Embodied RL": measured).
 *   flow_values  dp_compute  observation rows → RL_FLOW_VALUES (B) f32
 */
#ifndef RLRT_ROLES_FLOW_RL_H
#define RLRT_ROLES_FLOW_RL_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "common/algo/flow/flow.h"
#include "rlrt/config.h"
#include "rlrt/error.h"

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

typedef enum rl_flow_loss_type {
    RL_FLOW_LOSS_SAR = 0,
    RL_FLOW_LOSS_IPO = 1,
    RL_FLOW_LOSS_GRPO = 2, /* loss_type actor, adv_estimator grpo */
    RL_FLOW_LOSS_PPO = 3   /* loss_type actor_critic, adv_estimator gae */
} rl_flow_loss_type;

#define RL_FLOW_RL_DEFAULTS \
    "algorithm:\n" \
    "  loss_type: flow_sar          # flow_sar | flow_ipo | actor (GRPO) | actor_critic (PPO)\n" \
    "  adv_estimator: grpo          # grpo | gae (actor: grpo, actor_critic: gae)\n" \
    "  flow_sar_beta: 1.0           # mirror trust region\n" \
    "  flow_sar_temperature: 0.5    # credit softmax temperature\n" \
    "  flow_sar_tau_mid: 0.5        # self-annotation time\n" \
    "  flow_sar_ema_beta: 0.995     # fixed schedule\n" \
    "  flow_sar_ema_schedule: linear  # fixed | linear (DiffusionNFT)\n" \
    "  flow_sar_ema_eta_rate: 0.001\n" \
    "  flow_sar_ema_eta_max: 0.5\n" \
    "  flow_sar_t_min: 0.2\n" \
    "  flow_sar_t_max: 0.8\n" \
    "  flow_sar_energy_type: mse    # mse | sde (1/(2t))\n" \
    "  flow_sar_loss_variant: softplus_kl  # softplus_kl | mse_branch\n" \
    "  flow_sar_credit: softmax     # softmax (seed 000) | success (self-imitation: successes only)\n" \
    "  flow_sar_kl_coeff: 1.0\n" \
    "  flow_sar_w_min: 0.0\n" \
    "  flow_sar_w_max: 1.0\n" \
    "  flow_ipo_alpha: 2.0\n" \
    "  flow_ipo_beta_ref: 0.995\n" \
    "  flow_ipo_t_min: 0.2\n" \
    "  flow_ipo_t_max: 0.8\n" \
    "  gamma: 0.99                  # GAE\n" \
    "  gae_lambda: 0.95\n" \
    "  normalize_advantages: true   # PPO: GAE advantages whitened over the step's chunk steps (RLinf)\n" \
    "  filter_rewards: true         # GRPO: groups with mean reward outside the bounds get A = 0\n" \
    "  rewards_lower_bound: 0.1\n" \
    "  rewards_upper_bound: 0.9\n" \
    "  value_loss_coef: 0.5         # PPO value head\n" \
    "  value_clip: 0.2\n" \
    "  demo_coef: 0.0               # >0: + demo_coef x flow matching on demonstrations (the anchor)\n" \
    "  rl_coef: 1.0                 # the method's own loss x rl_coef (0 with demo_coef > 0: the anchor alone, a control)\n" \
    "  demos: ''                    # a libero_collect dataset (needed when demo_coef > 0)\n" \
    "  demos_per_task: 10           # its first successful episodes per task\n"

typedef struct rl_flow_rl_config {
    const char *loss_type_name, *adv_name; /* borrowed */
    rl_flow_loss_type loss;
    int gae;
    int sar_schedule, sar_energy, sar_variant, sar_credit; /* enum indices in their lists */
    double sar_beta, sar_temperature, sar_tau_mid, sar_ema_beta, sar_eta_rate, sar_eta_max;
    double sar_t_min, sar_t_max, sar_kl_coeff, sar_w_min, sar_w_max;
    double ipo_alpha, ipo_beta_ref, ipo_t_min, ipo_t_max;
    double gamma, gae_lambda, rewards_lower, rewards_upper, value_coef, value_clip;
    int filter_rewards;
    int normalize_adv;      /* algorithm.normalize_advantages (GAE) */
    int seq_mean;           /* actor.loss_agg_mode: 0 token-mean, 1 seq-mean-token-mean */
    double demo_coef;       /* the demonstration anchor's weight (0: off) */
    double rl_coef;         /* the method's loss weight (1; 0 = the anchor alone) */
    const char *demos;      /* borrowed; "" when off */
    int64_t demos_per_task;
} rl_flow_rl_config;

/* Reads and checks algorithm.* (located errors). */
static inline int rl_flow_rl_config_read(const rl_config *c, rl_flow_rl_config *o)
{
#define RL_F_NUM(p, f, lo, hi, fl) {p, RL_CFG_NUM, offsetof(rl_flow_rl_config, f), lo, hi, fl, NULL}
    static const rl_config_spec spec[] = {
        {"algorithm.loss_type", RL_CFG_STR, offsetof(rl_flow_rl_config, loss_type_name), 0, 0, RL_CFG_NONEMPTY, NULL},
        {"algorithm.adv_estimator", RL_CFG_STR, offsetof(rl_flow_rl_config, adv_name), 0, 0, RL_CFG_NONEMPTY, NULL},
        RL_F_NUM("algorithm.flow_sar_beta", sar_beta, 0, 100, RL_CFG_MIN_OPEN),
        RL_F_NUM("algorithm.flow_sar_temperature", sar_temperature, 0, 1e6, RL_CFG_MIN_OPEN),
        RL_F_NUM("algorithm.flow_sar_tau_mid", sar_tau_mid, 0, 1, RL_CFG_MIN_OPEN),
        RL_F_NUM("algorithm.flow_sar_ema_beta", sar_ema_beta, 0, 1, 0),
        {"algorithm.flow_sar_ema_schedule", RL_CFG_ENUM, offsetof(rl_flow_rl_config, sar_schedule), 0, 0, 0,
         "fixed|linear"},
        RL_F_NUM("algorithm.flow_sar_ema_eta_rate", sar_eta_rate, 0, 1, 0),
        RL_F_NUM("algorithm.flow_sar_ema_eta_max", sar_eta_max, 0, 1, 0),
        RL_F_NUM("algorithm.flow_sar_t_min", sar_t_min, 0, 1, 0),
        RL_F_NUM("algorithm.flow_sar_t_max", sar_t_max, 0, 1, 0),
        {"algorithm.flow_sar_energy_type", RL_CFG_ENUM, offsetof(rl_flow_rl_config, sar_energy), 0, 0, 0, "mse|sde"},
        {"algorithm.flow_sar_loss_variant", RL_CFG_ENUM, offsetof(rl_flow_rl_config, sar_variant), 0, 0, 0,
         "mse_branch|softplus_kl"},
        {"algorithm.flow_sar_credit", RL_CFG_ENUM, offsetof(rl_flow_rl_config, sar_credit), 0, 0, 0,
         "softmax|success"},
        RL_F_NUM("algorithm.flow_sar_kl_coeff", sar_kl_coeff, 0, 1e6, 0),
        RL_F_NUM("algorithm.flow_sar_w_min", sar_w_min, 0, 1, 0),
        RL_F_NUM("algorithm.flow_sar_w_max", sar_w_max, 0, 1, 0),
        RL_F_NUM("algorithm.flow_ipo_alpha", ipo_alpha, 0, 1e6, 0),
        RL_F_NUM("algorithm.flow_ipo_beta_ref", ipo_beta_ref, 0, 1, 0),
        RL_F_NUM("algorithm.flow_ipo_t_min", ipo_t_min, 0, 1, 0),
        RL_F_NUM("algorithm.flow_ipo_t_max", ipo_t_max, 0, 1, 0),
        RL_F_NUM("algorithm.gamma", gamma, 0, 1, 0),
        RL_F_NUM("algorithm.gae_lambda", gae_lambda, 0, 1, 0),
        {"algorithm.filter_rewards", RL_CFG_BOOL, offsetof(rl_flow_rl_config, filter_rewards), 0, 0, 0, NULL},
        {"algorithm.normalize_advantages", RL_CFG_BOOL, offsetof(rl_flow_rl_config, normalize_adv), 0, 0, 0, NULL},
        RL_F_NUM("algorithm.rewards_lower_bound", rewards_lower, -1e30, 1e30, 0),
        RL_F_NUM("algorithm.rewards_upper_bound", rewards_upper, -1e30, 1e30, 0),
        {"actor.loss_agg_mode", RL_CFG_ENUM, offsetof(rl_flow_rl_config, seq_mean), 0, 0, 0,
         "token-mean|seq-mean-token-mean"},
        RL_F_NUM("algorithm.value_loss_coef", value_coef, 0, 1e6, 0),
        RL_F_NUM("algorithm.value_clip", value_clip, 0, 1e6, 0),
        RL_F_NUM("algorithm.demo_coef", demo_coef, 0, 1e6, 0),
        RL_F_NUM("algorithm.rl_coef", rl_coef, 0, 1e6, 0),
        {"algorithm.demos", RL_CFG_STR, offsetof(rl_flow_rl_config, demos), 0, 0, 0, NULL},
        {"algorithm.demos_per_task", RL_CFG_INT, offsetof(rl_flow_rl_config, demos_per_task), 1, 100000, 0, NULL},
    };
#undef RL_F_NUM
    memset(o, 0, sizeof *o);
    int rc = rl_config_read(c, spec, sizeof spec / sizeof spec[0], o);
    if (rc)
        return rc;
    const char *lt = o->loss_type_name, *ae = o->adv_name;
    if (strcmp(lt, "flow_sar") == 0)
        o->loss = RL_FLOW_LOSS_SAR;
    else if (strcmp(lt, "flow_ipo") == 0)
        o->loss = RL_FLOW_LOSS_IPO;
    else if (strcmp(lt, "actor") == 0)
        o->loss = RL_FLOW_LOSS_GRPO;
    else if (strcmp(lt, "actor_critic") == 0)
        o->loss = RL_FLOW_LOSS_PPO;
    else
        return rl_config_error_at(c, "algorithm.loss_type", RL_ECONFIG,
                                  "expected flow_sar, flow_ipo, actor or actor_critic, got '%s'", lt);
    if (o->demo_coef > 0 && (!o->demos || !*o->demos))
        return rl_config_error_at(c, "algorithm.demos", RL_ECONFIG,
                                  "algorithm.demo_coef is %g: name the demonstrations (a libero_collect "
                                  "dataset, e.g. runs/libero_demos/demos.safetensors)", o->demo_coef);
    if (o->rl_coef == 0 && o->demo_coef == 0)
        return rl_config_error_at(c, "algorithm.rl_coef", RL_ECONFIG,
                                  "0 with algorithm.demo_coef 0 trains nothing: rl_coef 0 is the anchor-only "
                                  "control, which needs demo_coef > 0 and algorithm.demos");
    if (strcmp(ae, "gae") == 0)
        o->gae = 1;
    else if (strcmp(ae, "grpo") != 0)
        return rl_config_error_at(c, "algorithm.adv_estimator", RL_ECONFIG, "expected grpo or gae, got '%s'", ae);
    if (o->loss == RL_FLOW_LOSS_GRPO && o->gae)
        return rl_config_error_at(c, "algorithm.adv_estimator", RL_ECONFIG,
                                  "loss_type actor has no value head: it needs adv_estimator grpo, got gae");
    if (o->loss == RL_FLOW_LOSS_PPO && !o->gae)
        return rl_config_error_at(c, "algorithm.adv_estimator", RL_ECONFIG,
                                  "loss_type actor_critic trains the value head with GAE: it needs "
                                  "adv_estimator gae, got grpo");
    if (o->seq_mean && o->loss < RL_FLOW_LOSS_GRPO)
        return rl_config_error_at(c, "actor.loss_agg_mode", RL_ECONFIG,
                                  "seq-mean-token-mean weights the chunk steps of loss_type actor or "
                                  "actor_critic; %s weighs its chunks by its own credit: set "
                                  "actor.loss_agg_mode: token-mean", lt);
    if (o->sar_t_min > o->sar_t_max)
        return rl_config_error_at(c, "algorithm.flow_sar_t_min", RL_ECONFIG, "%g is above flow_sar_t_max %g",
                                  o->sar_t_min, o->sar_t_max);
    if (o->ipo_t_min > o->ipo_t_max)
        return rl_config_error_at(c, "algorithm.flow_ipo_t_min", RL_ECONFIG, "%g is above flow_ipo_t_max %g",
                                  o->ipo_t_min, o->ipo_t_max);
    if (o->sar_w_min > o->sar_w_max)
        return rl_config_error_at(c, "algorithm.flow_sar_w_min", RL_ECONFIG, "%g is above flow_sar_w_max %g",
                                  o->sar_w_min, o->sar_w_max);
    if (o->loss == RL_FLOW_LOSS_SAR && o->sar_energy == 1 && o->sar_t_min <= 0)
        return rl_config_error_at(c, "algorithm.flow_sar_t_min", RL_ECONFIG,
                                  "the sde energy divides by 2t: t_min must be > 0, got %g", o->sar_t_min);
    return RL_OK;
}

/* FlowSAR's loss settings from the section. */
static inline rl_flow_sar_config rl_flow_rl_sar_loss_config(const rl_flow_rl_config *o)
{
    rl_flow_sar_config s = rl_flow_sar_config_default();
    s.beta = o->sar_beta;
    s.variant = o->sar_variant ? RL_FLOW_SAR_SOFTPLUS_KL : RL_FLOW_SAR_MSE_BRANCH;
    s.energy = o->sar_energy ? RL_FLOW_SAR_ENERGY_SDE : RL_FLOW_SAR_ENERGY_MSE;
    s.kl_coeff = o->sar_kl_coeff;
    return s;
}

/* β of EMA update number `count` (flow_sar / flow_ipo; NaN for the others). */
static inline double rl_flow_rl_ema_beta(const rl_flow_rl_config *o, int64_t count)
{
    if (o->loss == RL_FLOW_LOSS_SAR)
        return rl_flow_ema_beta(o->sar_schedule ? RL_FLOW_EMA_LINEAR : RL_FLOW_EMA_FIXED, o->sar_ema_beta,
                                o->sar_eta_rate, o->sar_eta_max, count);
    if (o->loss == RL_FLOW_LOSS_IPO)
        return rl_flow_ema_beta(RL_FLOW_EMA_FIXED, o->ipo_beta_ref, 0, 0, count);
    return 0.0 / 0.0;
}

#endif
