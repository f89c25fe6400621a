/* common/algo/advantage.h — advantage estimators for language-model RL.
 *
 * Purpose: the estimators of verl core_algos / OpenRLHF experience_maker
 * (GAE, GRPO, RLOO, REINFORCE++, REINFORCE++-baseline) and REINFORCE Pro Max
 * (seed 003) as pure functions over caller-owned arrays. No I/O, no model.
 *
 * Conventions shared by every function here:
 *  * Token arrays are (B, T) row-major f32: element [b, t] is at b*T + t.
 *  * mask is f32 (B, T) with values 0 or 1 (response / action mask). A
 *    position is "valid" when mask != 0. Inputs at masked-out positions are
 *    never read into a result, so padding may hold anything (even NaN),
 *    except where a function says otherwise (GRPO/RLOO/REINFORCE++-baseline
 *    sum the reward row over all T, as verl does).
 *  * Group ids are int64 per row (any values; rows with equal ids form a
 *    group, in any order). Group statistics are accumulated in row order, in
 *    double, so results do not depend on the thread count.
 *  * Outputs are f32 (B, T) and are always multiplied by the mask (zero at
 *    masked-out positions). Output arrays may not alias inputs unless noted.
 *  * NaN/Inf in a value that is read (a valid position, a reward) makes the
 *    function return RL_ENUMERIC with a message naming the array and the
 *    first bad index (row-major order); outputs are then unspecified.
 *  * Errors: RL_EINVAL for NULL pointers or bad options, RL_ESHAPE for bad
 *    sizes, RL_ENOMEM when a small (O(B)) scratch allocation fails.
 *
 * Ownership: the caller owns every array; nothing is retained.
 */
#ifndef RLRT_ALGO_ADVANTAGE_H
#define RLRT_ALGO_ADVANTAGE_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Groups rows by id: perm (B) receives the rows sorted by (id, row), starts
 * (B + 1) the offset in perm of each group's run (starts[n_groups] = B), and
 * *n_groups the number of distinct ids. Every grouped function here and
 * filter.h use it, so group statistics are summed in row order. */
int rl_group_runs(const int64_t *group, int64_t B, int64_t *perm,
                  int64_t *starts, int64_t *n_groups);

/* Epsilon of GRPO's (r − mean)/(std + eps) (verl default). */
#define RL_GRPO_EPS 1e-6
/* Variance floor of masked whitening: (x − μ)·rsqrt(var + 1e-8). */
#define RL_WHITEN_EPS 1e-8

/* GAE (verl compute_gae_advantage_return). rewards, values, mask are (B, T);
 * adv and ret (B, T) outputs. Masked-out positions are skipped: the value and
 * the running GAE carry over them unchanged. ret = adv + values (before
 * whitening, × mask). If whiten != 0, adv is masked-whitened over the whole
 * batch (unbiased variance, as verl masked_whiten) and multiplied by mask. */
int rl_adv_gae(const float *rewards, const float *values, const float *mask,
               int64_t B, int64_t T, double gamma, double lam, int whiten,
               float *adv, float *ret);

/* GRPO (verl compute_grpo_outcome_advantage). token_rewards (B, T): the score
 * of row b is Σ_t token_rewards[b, t] over all T. Per group: A = (s − mean) /
 * (std + eps) with the unbiased std, or A = s − mean when norm_by_std == 0
 * (Dr.GRPO). A group of one row uses mean 0, std 1. adv[b, t] = A_b·mask.
 * scores_out (B) optional (NULL): the per-row scalar advantage A_b. */
int rl_adv_grpo(const float *token_rewards, const float *mask,
                const int64_t *group, int64_t B, int64_t T, double eps,
                int norm_by_std, float *adv, float *scores_out);

/* RLOO (verl compute_rloo_outcome_advantage): A = s − (Σ_group s − s)/(n − 1);
 * a group of one row keeps A = s. Scores as in GRPO. */
int rl_adv_rloo(const float *token_rewards, const float *mask,
                const int64_t *group, int64_t B, int64_t T, float *adv);

/* REINFORCE++ (verl): G_t = r_t + γ·G_{t+1}, the running return reset to 0
 * after every masked-out position; ret = G·mask; adv = masked_whiten(G)·mask
 * over the whole batch (unbiased variance; a batch with ≤ 1 valid token uses
 * variance 0). ret may be NULL. */
int rl_adv_reinforce_pp(const float *token_rewards, const float *mask,
                        int64_t B, int64_t T, double gamma, float *adv,
                        float *ret);

/* REINFORCE++-baseline (verl): A_b = s_b − group mean (a one-row group uses
 * mean 0), tiled over valid tokens, then masked_whiten over the whole batch,
 * × mask. */
int rl_adv_reinforce_pp_baseline(const float *token_rewards, const float *mask,
                                 const int64_t *group, int64_t B, int64_t T,
                                 float *adv);

/* Masked whitening over all valid positions of x (B, T), in place allowed
 * (out may equal x): out = (x − μ)·rsqrt(var + 1e-8)·mask with the unbiased
 * variance (n ≤ 1 valid → variance 0). */
int rl_masked_whiten(const float *x, const float *mask, int64_t B, int64_t T,
                     float *out);

/* Token-level rewards with a KL penalty (OpenRLHF compute_reward, verl
 * apply_kl_penalty): out[b, t] = −kl_coef·kl[b, t]·mask[b, t], plus scores[b]
 * on the last valid token of row b (a row with no valid token gets nothing).
 * kl may be NULL (no penalty); kl_coef ≤ 0 disables the penalty. */
int rl_token_rewards_kl(const float *scores, const float *kl,
                        const float *mask, int64_t B, int64_t T,
                        double kl_coef, float *out);

/* Discounted cumulative returns (OpenRLHF get_cumulative_returns): rewards
 * are zeroed where mask == 0, then G_t = r_t + γ·G_{t+1}; out = G·mask.
 * out may equal rewards. */
int rl_cumulative_returns(const float *rewards, const float *mask, int64_t B,
                          int64_t T, double gamma, float *out);

/* ---- REINFORCE Pro Max (seed 003) ---------------------------------------- */

/* Per-group outcome of the adaptive normalisation (rl_pro_max_result.status
 * and the optional group_status array). */
typedef enum rl_pro_max_group_status {
    RL_PM_NORMALIZED = 0,     /* α/β applied: mean 0, var 1 over non-zeros */
    RL_PM_UNIFORM = 1,        /* uniform_scale group: r/n, not normalised */
    RL_PM_SAME_SIGN = 2,      /* P or N empty: left unchanged */
    RL_PM_SMALL_SUM = 3,      /* |S+| or |S−| < eps: left unchanged */
    RL_PM_NONFINITE = 4,      /* α or β not finite: left unchanged */
    RL_PM_CLAMPED = 5         /* normalised, but α or β hit [eps, max_scale] */
} rl_pro_max_group_status;

/* Warning bits of rl_pro_max_result.warnings (library code cannot print;
 * the caller logs them). */
#define RL_PM_WARN_GAMMA_FORCED 1u /* gamma != 1 was requested; 1 was used */

typedef struct rl_pro_max_cfg {
    int64_t n_samples;   /* n, rows per prompt; > 1 and divides B */
    double gamma;        /* ignored: forced to 1 (warning bit if != 1) */
    double kl_coef;      /* init_kl_coef; ≤ 0 → no KL shaping */
    int uniform_scale;   /* all-same reward groups use r/n, skip normalising */
    double eps;          /* sum threshold and α/β lower clamp; 0 → 1e-8 */
    double max_scale;    /* α/β upper clamp; 0 → 10 */
    double ratio_sq_cap; /* cap of ratio²·Q−; 0 → 1e8 */
} rl_pro_max_cfg;

/* Fills the defaults of seed 003 (n given by the caller). */
void rl_pro_max_cfg_default(rl_pro_max_cfg *cfg, int64_t n_samples);

typedef struct rl_pro_max_result {
    unsigned warnings;        /* RL_PM_WARN_* bits */
    int64_t n_groups;
    int64_t n_normalized;     /* groups with status NORMALIZED or CLAMPED */
    int64_t n_uniform;
    int64_t n_same_sign;
    int64_t n_small_sum;
    int64_t n_nonfinite;
    int64_t n_clamped;
    /* monitoring metrics of seed 003 (over valid tokens of the batch) */
    double adv_mean;          /* ≈ 0 */
    double adv_std;           /* ≈ 1 (population std) */
    double reward_mean;       /* mean shaped reward r̃ (≈ 0 after RLOO) */
} rl_pro_max_result;

/* REINFORCE Pro Max advantages.
 *   rewards (B): sequence rewards r.
 *   kl (B, T) or NULL: per-token KL estimate (any estimator, see kl.h).
 *   mask (B, T): action mask.
 *   index (B) or NULL: original position of each row (dynamic batching may
 *     shuffle rows); must be a permutation of 0..B−1. Row with index i
 *     belongs to group i / n. NULL means index[b] = b.
 *   prompt_id (B) or NULL: an id of each row's prompt; every group must hold
 *     one prompt (checked when given).
 *   adv (B, T): output, in the arrival order of the rows.
 *   group_status (B / n) or NULL: rl_pro_max_group_status per group (group g
 *     = original indices g·n .. g·n + n − 1).
 *   res or NULL: counts and warnings.
 * Steps per group (statistics in index order, so a shuffled batch gives
 * bit-identical results): RLOO shaping r̃ = r − (Σr − r)/(n − 1) (with
 * uniform_scale and unbiased reward std < 1e-8: r̃ = r/n); token rewards
 * −kl_coef·kl·mask plus r̃ at the last valid token; returns with γ = 1;
 * adaptive α/β normalisation over valid non-zero tokens with every fallback
 * and clamp of seed 003; × mask.
 * Errors: RL_ESHAPE if n < 2 or n does not divide B; RL_EINVAL if index is
 * not a permutation or a group holds two prompts; RL_ENUMERIC for NaN/Inf in
 * rewards or in kl at a valid position. */
int rl_adv_pro_max(const rl_pro_max_cfg *cfg, const float *rewards,
                   const float *kl, const float *mask, const int64_t *index,
                   const int64_t *prompt_id, int64_t B, int64_t T, float *adv,
                   uint8_t *group_status, rl_pro_max_result *res);

#ifdef __cplusplus
}
#endif
#endif
