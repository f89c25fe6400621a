/* common/batch/lm_batch.h — a language-model batch as the batch transforms
 * see it (common/batch/lm_{shape,adv,metrics}.h), and the small reads they
 * share: masks, per-row values, prompt groups, loss tokens.
 *
 * A batch is one DataProto of B rows (samples) and R response positions.
 * Its tensors and columns are named by the model kind (the response
 * layout), the reward ranks (scores), the actor (log-probs) and the data
 * (prompt groups): all above this layer, so the caller names them once in
 * an rl_lm_names (driver/recipes/lm/lm_common.c: rl_lm_batch_names) and
 * passes it to every transform. The roles of the names:
 *
 *   responses     (B, R) i32   sampled tokens, right-padded
 *   response_lens (B)    i32   tokens of each response (its stop token too), in [0, R]
 *   loss_mask     (B, R) f32   optional, 0/1: positions in the loss (0 at tool
 *                              output and at rows that left the loss)
 *   sampled_mask  (B, R) f32   optional, 0/1: the positions the policy sampled,
 *                              kept when rows leave the loss (the KL is taken here)
 *   entropy       (B, R) f32   the rollout's per-token entropy
 *   rollout_logp  (B, R) f32   the rollout's per-token log-probs
 *   score, accuracy, format (B) f32   the reward's outputs (score is shaped in place)
 *   old_logp, ref_logp (B, R) f32     the policy's and the reference's log-probs
 *   advantages    (B, R) f32   written by rl_lm_advantages
 *   group         int64 column: the prompt group of each row (its global id)
 *   guided        int64 column, optional: 1 for the rows off-policy guidance put in
 *   kl_penalty    double column, written: each row's KL term in the reward
 *   row_version   int64 column: the weight version that sampled the row
 *   tool_stats    (B, tool_layout->n) i32, optional: multi-turn counts per row
 *
 * Ownership: functions returning arrays return new ones the caller frees;
 * NULL + a message (naming the tensor) on error. Nothing is retained.
 */
#ifndef RLRT_BATCH_LM_BATCH_H
#define RLRT_BATCH_LM_BATCH_H

#include <stdint.h>

#include "rlrt/dataproto.h"

/* The columns of the tool counts (B, n) i32 and the call outcomes' names. */
typedef struct rl_lm_tool_layout {
    int n;                            /* columns */
    int turns, calls, outcome0;       /* columns: turns, calls, the first outcome's */
    int n_outcomes;                   /* outcome columns from outcome0 */
    int bad_calls, truncated, max_turns;
    const char *(*outcome_name)(int k); /* outcome k's name ("ok", "error", ...) */
} rl_lm_tool_layout;

typedef struct rl_lm_names {
    const char *responses, *response_lens, *loss_mask, *sampled_mask, *entropy, *rollout_logp;
    const char *score, *accuracy, *format;
    const char *old_logp, *ref_logp, *advantages;
    const char *group, *guided, *kl_penalty, *row_version;
    const char *tool_stats;
    const rl_lm_tool_layout *tools;
} rl_lm_names;

/* The (B, R) 0/1 masks, as new arrays (*B, *R set):
 *   RL_LM_MASK_LENGTHS  1 for j < response_lens[b]: every sampled position
 *                       (where outcome rewards sit and group baselines are taken)
 *   RL_LM_MASK_LOSS     times loss_mask when the batch has one
 *   RL_LM_MASK_SAMPLED  times sampled_mask, or without one loss_mask: the
 *                       positions the policy sampled (where a KL to the
 *                       reference estimates it) */
typedef enum rl_lm_mask_kind {
    RL_LM_MASK_LENGTHS = 0,
    RL_LM_MASK_LOSS,
    RL_LM_MASK_SAMPLED
} rl_lm_mask_kind;
float *rl_lm_mask(const rl_dataproto *dp, const rl_lm_names *L, rl_lm_mask_kind kind, int64_t *B,
                  int64_t *R);

/* The f32 (B) tensor `name` (borrowed from dp), or NULL + a message naming it. */
float *rl_lm_rows_f32(const rl_dataproto *dp, const char *name);
/* The (B, R) f32 tensor `name` (borrowed), or NULL + a message naming it. */
float *rl_lm_tokens_f32(const rl_dataproto *dp, const char *name, int64_t R);
/* (B) the int64 column `name` as a new array, or NULL + a message. */
int64_t *rl_lm_column_i64(const rl_dataproto *dp, const char *name);
/* Rows with a non-zero int64 column L->guided, or -1 when the batch has no
 * such column. */
int64_t rl_lm_guided_rows(const rl_dataproto *dp, const rl_lm_names *L);
/* (B) the mean of the (B, R) f32 tensor `name` over each row's loss
 * positions (RL_LM_MASK_LOSS; 0 for a row with none), in double, as a new
 * array; NULL + a message. */
double *rl_lm_row_means(const rl_dataproto *dp, const rl_lm_names *L, const char *name);
/* (B) loss tokens of each row: the sum of its RL_LM_MASK_LOSS row (the
 * response length when the batch has no loss mask). */
int rl_lm_loss_tokens(const rl_dataproto *dp, const rl_lm_names *L, int32_t *out);

#endif
