/* common/algo/lm/aepo.h — ARES / AEPO entropy shaping (seed 002).
 *
 * Purpose: the pieces of Adaptive-Entropy Policy Optimization as pure
 * functions over arrays, plus one small state object for what persists
 * across training steps:
 *
 *   logits ──► token entropy H ──► forward window entropy ──► per-response
 *   95th percentile ──► batch median ──► EMA threshold τ
 *   window entropy ≥ τ ──► HWE flags (B,T) and HWE counts (B)
 *   (global_id, accuracy, HWE count) ──► difficulty bucket per id,
 *   per-bucket target HWE count, α_d, λ_d
 *   (bucket, correct, count, target, α) ──► entropy reward
 *   HWE flags + β (+ λ_d) ──► token-level KL weights (B,T)
 *
 * Conventions: B rows (responses), T response positions, V vocabulary.
 * Arrays are row-major f32; every reduction accumulates in double. Masks are
 * f32 with nonzero = valid. Flags are uint8 (0/1). Counts are f32 (exact
 * integers up to 2^24). Buckets are int8: 0 easy, 1 medium, 2 hard.
 *
 * Window semantics (our definition where seed and ARES leave it open): the
 * valid tokens of a row are the positions with mask != 0, taken in order
 * (holes in the mask are skipped, so masked tool output never enters a
 * window). For the k-th valid token of a row with L valid tokens, the window
 * is the next w valid tokens k+1..k+w (the token itself is excluded, as in
 * ARES). It is complete only when k + w ≤ L − 1; incomplete windows (the
 * last min(L, w) valid tokens, and every token of a response with L ≤ w)
 * get window entropy 0 and valid flag 0: they never count as HWE and do not
 * enter the percentile. ARES instead pads them with the running mean for the
 * percentile; we exclude them so the percentile only sees real windows.
 *
 * Difficulty ids are int64 global_ids (the dataset row index in practice).
 * Strings are not accepted: the caller maps them to int64 once, so the hot
 * path hashes integers and the state serialises compactly.
 *
 * Correctness: a row counts as "correct" for the entropy reward when its
 * accuracy ≥ 1 (ARES tests accuracy == 1.0); bucket assignment uses the mean
 * accuracy of the id's rows in the batch.
 *
 * Invariants of rl_aepo_state: α_d ∈ [alpha_min, alpha_max], λ_d ∈
 * [0, lambda_max], τ is finite once initialised, targets are finite ≥ 0.
 * Serialising and restoring gives a state whose every later result is
 * bit-identical to the original's.
 *
 * Ownership: rl_aepo_state_new/_from_json return a state the caller frees
 * with rl_aepo_state_free. rl_aepo_state_to_json returns a malloc'd string
 * the caller frees with free(). All array arguments are borrowed; outputs
 * are written in full (no accumulation unless stated).
 *
 * Threads: the array functions are reentrant (token entropy splits rows
 * over OpenMP threads for large N·V); one rl_aepo_state must not be used by
 * two threads at once.
 *
 * Errors: functions return 0 or a negative rl_status and set the message:
 * RL_EINVAL for bad sizes/config/out-of-range buckets, RL_ENUMERIC for
 * NaN/Inf where a finite value is required (naming row and column),
 * RL_ESTATE for τ requested before it was ever set, RL_ENOMEM, RL_EPROTO for
 * malformed JSON.
 */
#ifndef RLRT_ALGO_AEPO_H
#define RLRT_ALGO_AEPO_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum {
    RL_AEPO_UNKNOWN = -1,
    RL_AEPO_EASY = 0,
    RL_AEPO_MEDIUM = 1,
    RL_AEPO_HARD = 2,
    RL_AEPO_NBUCKETS = 3
};

/* "easy" / "medium" / "hard" / "unknown". */
const char *rl_aepo_bucket_name(int bucket);

/* ---- token entropy --------------------------------------------------------- */

/* Exact entropy of softmax(logits) per row: H = logsumexp(z) − Σ softmax(z)·z.
 * logits is (N, V), H is (N). −inf logits are allowed (probability 0, no
 * contribution); NaN, +inf, or a row that is all −inf gives RL_ENUMERIC. */
int rl_aepo_token_entropy(const float *logits, int64_t N, int64_t V, float *H);

/* Gradient of Σ_n dH[n]·H[n] w.r.t. the logits:
 * dlogits[n,j] (+)= −dH[n]·p_j·(z_j − Σ_i p_i z_i). logits and dlogits are
 * (N, V), dH is (N). accumulate != 0 adds to dlogits (so an entropy term can
 * join the log-prob gradient), else overwrites. −inf logits get gradient 0. */
int rl_aepo_token_entropy_backward(const float *logits, const float *dH, int64_t N,
                                   int64_t V, float *dlogits, int accumulate);

/* ---- window entropy, percentile, HWE ------------------------------------------- */

/* Forward window entropy (see "Window semantics" above). H and mask are
 * (B, T); win and win_valid are (B, T). H must be finite where mask != 0
 * (RL_ENUMERIC otherwise); H at masked positions is never read. window ≥ 1. */
int rl_aepo_window_entropy(const float *H, const float *mask, int64_t B, int64_t T,
                           int window, float *win, uint8_t *win_valid);

/* Per-row q-th percentile (0 ≤ q ≤ 100, linear interpolation as numpy's
 * default: position q/100·(n−1) among the row's sorted complete windows).
 * win and win_valid are (B, T); pct and has_pct are (B). A row without a
 * complete window gets pct 0 and has_pct 0. */
int rl_aepo_window_percentile(const float *win, const uint8_t *win_valid, int64_t B,
                              int64_t T, double q, float *pct, uint8_t *has_pct);

/* HWE flags and counts: flag[b,t] = win_valid[b,t] && (cand == NULL ||
 * cand[b,t] != 0) && win[b,t] ≥ tau. cand (B, T) optionally restricts HWE to
 * candidate tokens (ARES counts only "reasoning trigger" tokens; the seed
 * counts every token, which is cand == NULL). flags is (B, T) or NULL;
 * counts is (B) or NULL. tau must be finite. */
int rl_aepo_hwe(const float *win, const uint8_t *win_valid, const uint8_t *cand,
                int64_t B, int64_t T, double tau, uint8_t *flags, float *counts);

/* ---- configuration and state ----------------------------------------------------- */

typedef struct rl_aepo_config {
    int window;             /* 4: window size w */
    double percentile;      /* 95: per-response percentile of window entropy */
    double tau_decay;       /* 0.99: τ ← decay·τ + (1 − decay)·batch median */
    double easy_min_acc;    /* 2/3: mean accuracy ≥ this → easy */
    double medium_min_acc;  /* 1/3: ≥ this → medium, else hard */
    int round_targets;      /* 1: target = bucket mean HWE count rounded half
                               to even (ARES stores int targets); 0: exact */
    double alpha_init;      /* 0.5 */
    double alpha_lr;        /* 0.05 */
    double alpha_min;       /* 0 */
    double alpha_max;       /* 2 */
    double lambda_lr;       /* 0.01: dual-ascent step η */
    double lambda_max;      /* 10: cap on λ_d (ARES) */
    int lambda_min_rows;    /* 8: a bucket with fewer rows keeps λ_d (ARES) */
    double kl_budget[RL_AEPO_NBUCKETS]; /* ε_d: 0.01 each */
    double kl_low_factor;   /* 0.5: β_low = factor·β at HWE positions */
    /* entropy reward shape, per bucket easy/medium/hard */
    double margin_frac[RL_AEPO_NBUCKETS]; /* .15 .25 .35 */
    double kappa[RL_AEPO_NBUCKETS];       /* 2 3 4 (Huber knee) */
    double temp[RL_AEPO_NBUCKETS];        /* 2 2.5 3 (sigmoid temperature) */
    double cap_scale[RL_AEPO_NBUCKETS];   /* 1 1 1.2: cap = α_d·scale */
    double wrong_scale[RL_AEPO_NBUCKETS]; /* .6 .8 1: wrong-answer bonus factor */
} rl_aepo_config;

void rl_aepo_config_default(rl_aepo_config *cfg);
/* RL_EINVAL naming the first bad field (non-finite, window < 1, q outside
 * [0,100], decay outside [0,1], kappa/temp ≤ 0, alpha_min > alpha_max, ...). */
int rl_aepo_config_validate(const rl_aepo_config *cfg);

typedef struct rl_aepo_state rl_aepo_state;

/* cfg NULL = defaults. NULL + message if the config is invalid. α_d start at
 * alpha_init, λ_d at 0, τ and targets unset. */
rl_aepo_state *rl_aepo_state_new(const rl_aepo_config *cfg);
void rl_aepo_state_free(rl_aepo_state *s);
const rl_aepo_config *rl_aepo_state_config(const rl_aepo_state *s);

/* Serialises config, τ, per-bucket α/λ/target, every known id (bucket, last
 * accuracy, times seen) and pending bootstrap sums to JSON (jansson; doubles
 * printed with 17 significant digits, so they parse back bit-exact; ids in
 * first-seen order). Returns a malloc'd string, or NULL + message. */
char *rl_aepo_state_to_json(const rl_aepo_state *s);
/* Rebuilds a state from rl_aepo_state_to_json output. NULL + message
 * (RL_EPROTO naming the bad key) on malformed input. */
rl_aepo_state *rl_aepo_state_from_json(const char *json);

/* ---- threshold τ ----------------------------------------------------------- */

/* Folds one batch into τ: the median (mean of the two middle values for an
 * even count) of pct over rows with has_pct != 0; the first batch sets τ to
 * it, later ones do τ ← decay·τ + (1 − decay)·median. A batch with no row
 * having a percentile leaves τ unchanged. pct and has_pct are (B).
 * *median_out (optional) gets the batch median, or NaN if there was none. */
int rl_aepo_threshold_update(rl_aepo_state *s, const float *pct, const uint8_t *has_pct,
                             int64_t B, double *median_out);
/* τ, or RL_ESTATE if no batch has set it yet. */
int rl_aepo_threshold_get(const rl_aepo_state *s, double *tau);
/* Sets τ directly (e.g. from a validation pass); must be finite. */
int rl_aepo_threshold_set(rl_aepo_state *s, double tau);

/* ---- difficulty buckets, targets, α -------------------------------------------------- */

/* Bucket of a mean accuracy under the state's thresholds. */
int rl_aepo_bucket_of_accuracy(const rl_aepo_config *cfg, double acc);
/* Bucket last assigned to gid, or RL_AEPO_UNKNOWN if never seen. */
int rl_aepo_difficulty_get(const rl_aepo_state *s, int64_t gid);
int64_t rl_aepo_difficulty_count(const rl_aepo_state *s);

/* Per-bucket statistics of one batch. Per id: mean accuracy and mean HWE
 * count over its rows; per bucket: mean over its ids of the id means (as
 * ARES averages per-id means). */
typedef struct rl_aepo_batch_stats {
    int64_t n_ids[RL_AEPO_NBUCKETS];
    int64_t n_rows[RL_AEPO_NBUCKETS];
    double mean_hwe[RL_AEPO_NBUCKETS]; /* NaN where n_ids == 0 */
    double mean_acc[RL_AEPO_NBUCKETS]; /* NaN where n_ids == 0 */
    int64_t n_ids_all;
    double mean_hwe_all;               /* over all ids; NaN if none */
} rl_aepo_batch_stats;

/* Online difficulty update from one batch: groups rows by gid, assigns each
 * id the bucket of its mean accuracy (overwriting any earlier bucket; an id
 * first seen here is simply added), fills bucket_out (B, optional) with each
 * row's bucket and *stats (optional). gid is (B); acc and hwe are (B), finite
 * (acc in [0, 1]). Does not touch α or targets. */
int rl_aepo_difficulty_observe(rl_aepo_state *s, const int64_t *gid, const float *acc,
                               const float *hwe, int64_t B, int8_t *bucket_out,
                               rl_aepo_batch_stats *stats);

/* α update from a batch: for each bucket with n_ids > 0 and a target set,
 * Δ = mean_hwe − target (easy, medium) or target − mean_hwe (hard), and
 * α_d ← clip(α_d + alpha_lr·Δ, alpha_min, alpha_max). Buckets without
 * samples or without a target keep α_d. Uses the targets as they are now, so
 * call it before rl_aepo_targets_update for a non-zero Δ. */
int rl_aepo_alpha_update(rl_aepo_state *s, const rl_aepo_batch_stats *stats);

/* Target refresh: a bucket with samples gets target = its mean_hwe (rounded
 * half to even when round_targets). Fallback for a bucket with no samples:
 * it keeps its previous target; if it never had one it gets the batch-wide
 * mean over all ids (same rounding); if the batch is empty too it stays
 * unset. The reward treats an unset target as 0. */
int rl_aepo_targets_update(rl_aepo_state *s, const rl_aepo_batch_stats *stats);

/* One training step's bookkeeping: observe → α update (against the targets
 * from before this batch) → target refresh. Same arguments as observe. */
int rl_aepo_update(rl_aepo_state *s, const int64_t *gid, const float *acc,
                   const float *hwe, int64_t B, int8_t *bucket_out,
                   rl_aepo_batch_stats *stats);

/* Bootstrap (a rollout pass over the training set before training): add
 * batches with rl_aepo_bootstrap_add (sums accuracy and HWE count per id
 * across batches, nothing else changes), then rl_aepo_bootstrap_finish
 * assigns every accumulated id its bucket from its overall mean accuracy,
 * sets each bucket's target from its ids' mean HWE counts (fallback as in
 * targets_update) and clears the sums. α stays at its current value.
 * *stats (optional) describes the whole bootstrap pass. */
int rl_aepo_bootstrap_add(rl_aepo_state *s, const int64_t *gid, const float *acc,
                          const float *hwe, int64_t B);
int rl_aepo_bootstrap_finish(rl_aepo_state *s, rl_aepo_batch_stats *stats);

/* Per-bucket views. target is 0 with *has_target 0 when unset. */
double rl_aepo_alpha(const rl_aepo_state *s, int bucket);
double rl_aepo_lambda(const rl_aepo_state *s, int bucket);
double rl_aepo_target(const rl_aepo_state *s, int bucket, int *has_target);
/* Overrides (checkpoint migration, tests); RL_EINVAL if out of range. */
int rl_aepo_set_alpha(rl_aepo_state *s, int bucket, double alpha);
int rl_aepo_set_target(rl_aepo_state *s, int bucket, double target);

/* ---- entropy reward -------------------------------------------------------- */

/* The hierarchical entropy reward of one response (REFERENCES.md, ARES):
 * δ = count − target, m = max(1, frac·max(target, 1)), cap = α·cap_scale,
 * huber(x, κ) = ½x²/κ for x ≤ κ else x − ½κ, sig(x, T) = 1/(1 + e^(−x/T));
 * easy:   correct −min(cap, huber(max(δ − m, 0))/(m + κ)·cap)
 * medium: correct −min(cap, huber(max(|δ| − m, 0))/(m + κ)·cap)
 * hard:   correct δ ≥ −m: sig(δ + m)·cap, else −min(cap, ½huber(−δ − m)/(m + κ)·cap)
 * wrong (all): sig(max(δ − m, 0))·cap·wrong_scale.
 * Returns NaN for a bucket outside 0..2. */
double rl_aepo_entropy_reward_one(const rl_aepo_config *cfg, int bucket, int correct,
                                  double count, double target, double alpha);

/* Batch entropy reward with the state's per-bucket targets and α. bucket,
 * acc, hwe are (B); ent_reward is (B); overall (B, optional) = acc +
 * ent_reward. RL_EINVAL for a bucket outside 0..2 (e.g. RL_AEPO_UNKNOWN:
 * run rl_aepo_update on the batch first). */
int rl_aepo_entropy_reward(const rl_aepo_state *s, const int8_t *bucket, const float *acc,
                           const float *hwe, int64_t B, float *ent_reward, float *overall);

/* ---- KL: dual ascent and token-level weights ------------------------------------------------ */

/* Dual ascent on the per-bucket KL budget. kl and mask are (B, T) (token KL
 * estimates and response mask), bucket is (B). KL_d = mean over the bucket's
 * non-empty rows of the row's masked mean KL; buckets with fewer than
 * lambda_min_rows such rows keep λ_d; others λ_d ← clip(λ_d + η(KL_d − ε_d),
 * 0, lambda_max). kl_out (3, optional) gets KL_d (NaN for empty buckets).
 * kl must be finite where mask != 0. */
int rl_aepo_lambda_update(rl_aepo_state *s, const float *kl, const float *mask,
                          const int8_t *bucket, int64_t B, int64_t T, double *kl_out);

/* Token-level dynamic KL weights: w[b,t] = mask[b,t]·β_b·(flags[b,t] ?
 * low_factor : 1), with β_b = beta + λ_{bucket[b]} when s and bucket are
 * given (λ is the dual variable of bucket b's KL budget, so it adds to the
 * base coefficient), else β_b = beta. flags and mask are (B, T); bucket (B);
 * w is (B, T). low_factor < 0 means the config's kl_low_factor (0.5 without
 * a state). */
int rl_aepo_kl_weights(const rl_aepo_state *s, const uint8_t *flags, const float *mask,
                       const int8_t *bucket, int64_t B, int64_t T, double beta,
                       double low_factor, float *w);

#ifdef __cplusplus
}
#endif
#endif
