/* common/nn/models/lm/generate.h — batched sampling from an rl_lm with a KV cache.
 *
 * Purpose: the rollout side of the policy. Each row b has its own prompt
 * length, its own random stream rl_rng_init(seed, stream = row_seeds[b])
 * (one uniform per sampled token), and stops on a stop token, after
 * max_new_tokens, or when it reaches cfg.max_seq_len (a prompt of
 * cfg.max_seq_len tokens gets none: its length is 0). A row's tokens
 * therefore do not depend on which other rows share its batch.
 *
 * Returned log-probs and entropies are those of the FULL distribution
 * softmax(logits / temperature) (before top-k / top-p truncation), i.e. the
 * same quantities rl_lm_forward() computes for the finished sequence with
 * the same temperature. Greedy decoding takes the first argmax of the logits;
 * its log-probs use the given temperature (1 when temperature <= 0).
 *
 * Cost: rows with equal prompts (same length and tokens) share one prefill
 * forward; on a model whose products are too small for rl_sgemm to split,
 * each decode step runs the live rows as one task per thread
 * (rl_nn_set_threads), at least 16 rows a task.
 *
 * Ownership: outputs are caller buffers. The KV cache and scratch live in
 * the model and are reused across calls; generation invalidates the saved
 * training forward (call rl_lm_forward again before rl_lm_backward).
 */
#ifndef RLRT_NN_GENERATE_H
#define RLRT_NN_GENERATE_H

#include <stdint.h>

#include "common/nn/models/lm/transformer.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct rl_lm_sampling {
    float temperature;           /* > 0 (<= 0 behaves as greedy) */
    float top_p;                 /* (0, 1]; 1 = off */
    int top_k;                   /* 0 = off */
    int greedy;                  /* 1 = argmax */
    int max_new_tokens;          /* >= 1 */
    const int32_t *stop_tokens;  /* may be NULL; the stop token is emitted */
    int num_stop_tokens;
    uint64_t seed;
    int no_kv_cache;             /* 1 = recompute the full prefix every step (reference) */
    /* Continuous batching: at most this many rows hold a KV-cache slot at
     * once; a row that finishes gives its slot to the next waiting prompt
     * (rows start in index order). 0 or >= B: all rows at once. Every row
     * has its own random stream, so its tokens do not depend on it. */
    int max_batch;
    /* Partial rollouts (docs/decisions/partial-rollouts.md). When set, called
     * between decode steps (after a step's tokens are sampled, before the
     * live rows' next forward): it may replace the model's weights in place
     * and then returns 1, else 0; < 0 is an error that ends the call. After
     * a 1 each live row's KV cache is recomputed with the new weights over
     * its whole prefix (prompt and tokens so far: one prefill, as for a
     * prompt), so every later token is sampled from the new weights given
     * the full prefix: the same tokens and log-probs as generating the
     * first ones with the old weights and then the rest from the prefix as
     * a prompt with the new ones (same row streams). Rows that have not
     * started yet start with the new weights. */
    int (*switch_weights)(void *ctx);
    void *switch_ctx;
    /* (B, max_new_tokens) out, or NULL: how many switches came before each
     * token was sampled (0: the weights of the call's start; 0 after a
     * row's end). */
    int32_t *out_epoch;
} rl_lm_sampling;

/* temperature 1, top_p 1, top_k 0, sampling, 64 new tokens, no stop tokens, seed 0. */
void rl_lm_sampling_default(rl_lm_sampling *s);

/* prompts (B,P) right-padded, prompt_lens (B) in [1, P]; row_seeds (B) or
 * NULL (= row index). Outputs: tokens (B, max_new_tokens) padded with
 * cfg.pad_token_id (0 if none), logp / entropy (B, max_new_tokens) or NULL
 * (0 after the end), lens (B) = tokens generated per row (stop token included).
 * Errors: RL_EINVAL / RL_ESHAPE / RL_ERANGE naming the bad argument. */
int rl_lm_generate(rl_lm *m, int B, int P, const int32_t *prompts, const int *prompt_lens,
                   const uint64_t *row_seeds, const rl_lm_sampling *s, int32_t *out_tokens,
                   float *out_logp, float *out_entropy, int *out_lens);

#ifdef __cplusplus
}
#endif
#endif
