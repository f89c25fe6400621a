/* driver/recipes/lm/rlvr_aepo.h — ARES/AEPO entropy shaping (seed 002) as the
 * rlvr recipe uses it: driver-side bookkeeping over the rollout's per-token
 * entropies. Per step:
 *   rl_rlvr_aepo_shape   window entropy → per-response percentile → EMA
 *                        threshold τ → HWE counts → difficulty buckets, α and
 *                        targets → the entropy reward added to the score;
 *   rl_rlvr_aepo_kl      after the KL is computed: dual ascent on λ_d and, with
 *                        algorithm.aepo.dynamic_kl, the token-level KL weights
 *                        (halved at HWE tokens) folded into the KL.
 * Its state (buckets, α, λ, targets, τ) travels with checkpoints as JSON.
 *
 * Config: rl_rlvr_aepo_section (common/schema/rlvr.h): algorithm.aepo.*,
 * rollout.window_size, data.{bootstrap, bootstrap_size}.
 * Ownership: open/close; the per-step arrays live until the next shape. */
#ifndef RLRT_DRIVER_RLVR_AEPO_H
#define RLRT_DRIVER_RLVR_AEPO_H

#include "driver/recipes/lm/lm_common.h"
#include "common/algo/lm/aepo.h"

typedef struct rl_rlvr_aepo {
    rl_aepo_state *st;
    int64_t window;
    double percentile;
    int dynamic_kl, bootstrap;
    int64_t bootstrap_size;
    int64_t rows;   /* B of this step's shaped batch */
    int8_t *bucket; /* (B) this step's difficulty buckets */
    uint8_t *flags; /* (B, R) this step's HWE flags */
} rl_rlvr_aepo;

/* Reads the config; *enabled = 0 (and nothing allocated) when
 * algorithm.aepo.enable is false. */
int rl_rlvr_aepo_open(rl_rlvr_aepo *a, const rl_config *job, int *enabled);
void rl_rlvr_aepo_close(rl_rlvr_aepo *a);
/* The state for trainer_state.json (a new JSON string) and back. */
json_t *rl_rlvr_aepo_save(const rl_rlvr_aepo *a);
int rl_rlvr_aepo_restore(rl_rlvr_aepo *a, const json_t *saved, const char *where);

/* A round of `n` prompts sampled and scored by the recipe (for the
 * bootstrap pass). */
typedef int (*rl_rlvr_round_fn)(void *ctx, int64_t round, int64_t n, rl_dataproto **out);
/* data.bootstrap: rollouts over data.bootstrap_size prompts, in rounds of at
 * most `batch`, set the difficulty buckets and HWE targets before training. */
int rl_rlvr_aepo_bootstrap(rl_rlvr_aepo *a, int64_t batch, rl_rlvr_round_fn gen, void *ctx);
/* Shapes a scored batch (RL_REWARD_SCORE gets the entropy reward). */
int rl_rlvr_aepo_shape(rl_rlvr_aepo *a, rl_dataproto *batch, rl_metric_set *ms);
/* kl (B, R) of the shaped batch: λ update; with dynamic_kl and a KL in the
 * reward (kl_coef > 0), kl ← kl · w / kl_coef (w the token weights), so the
 * reward uses w·kl with coefficient 1. */
int rl_rlvr_aepo_kl(rl_rlvr_aepo *a, float *kl, const float *mask, int64_t B, int64_t R,
                    double kl_coef, int kl_in_reward, rl_metric_set *ms);

#endif
