/* common/nn/models/lm/lm_model.h — the language-model kind of rl_model (model.type: lm):
 * the transformer of common/nn/models/lm/transformer.h behind the model interface.
 *
 * Batch layout (the tensors forward / forward_backward / sample read):
 *   RL_LM_PROMPTS        (B, P) i32  prompt tokens, right-padded
 *   RL_LM_PROMPT_LENS    (B)    i32  real prompt tokens per row, in [1, P]
 *   RL_LM_RESPONSES      (B, R) i32  response tokens, right-padded
 *   RL_LM_RESPONSE_LENS  (B)    i32  real response tokens per row, in [0, R]
 *   RL_LM_RESPONSE_MASK  (B, R) f32  optional, 0/1: positions of the response
 *                                    that belong to the loss (0 at tool output
 *                                    tokens and at rows left out, e.g. DAPO's
 *                                    overlong filtering); absent = all 1
 * Row b is the sequence prompt[b, :plen] ++ response[b, :rlen]; the
 * quantities are aligned with the response: K = R, position j of row b is
 * response token j (its log-prob is log π(response[b, j] | everything
 * before it)); the mask is 1 for j < rlen[b]. RL_Q_VALUE needs
 * model.value_head; forward_backward's loss sees mask[b, j] =
 * (j < rlen[b]) · response_mask[b, j]; RL_Q_VELOCITY is not an LM quantity (RL_EUNSUPPORTED).
 *
 * Sampling (rl_model_sample) reads RL_LM_PROMPTS, RL_LM_PROMPT_LENS and
 * RL_LM_ROW_SEEDS (B) i64 (the random stream of each row) and returns
 * RL_LM_RESPONSES (B, max_new_tokens) i32, RL_LM_RESPONSE_LENS (B) i32 (the
 * stop token counts), RL_LM_RESPONSE_LOGP and RL_LM_RESPONSE_ENTROPY
 * (B, max_new_tokens) f32 (0 after the end) under softmax(logits / T), with
 * model.eos_token_id as the stop token. With sampling->poll_weights (partial
 * rollouts) it also returns RL_LM_TOKEN_VERSION (B, max_new_tokens) i64: the
 * weight version that sampled each token (0 after the end).
 *
 * Config: model.type and model.init_from (common/schema/model.h), then the
 * kind's section rl_lm_model_section (common/schema/lm.h: every key's
 * default and range, read typed with located errors). vocab_size,
 * eos_token_id and pad_token_id are usually set by the recipe from the
 * tokenizer. config.json is Hugging Face's (Qwen2/Llama).
 */
#ifndef RLRT_NN_LM_MODEL_H
#define RLRT_NN_LM_MODEL_H

#include "rlrt/nn/model.h"
#include "common/nn/models/lm/generate.h"
#include "common/nn/models/lm/transformer.h"

#ifdef __cplusplus
extern "C" {
#endif

#define RL_LM_PROMPTS "prompts"
#define RL_LM_PROMPT_LENS "prompt_lens"
#define RL_LM_RESPONSES "responses"
#define RL_LM_RESPONSE_LENS "response_lens"
#define RL_LM_RESPONSE_MASK "response_mask"
#define RL_LM_ROW_SEEDS "row_seeds"
#define RL_LM_RESPONSE_LOGP "response_logp"
#define RL_LM_RESPONSE_ENTROPY "response_entropy"
#define RL_LM_TOKEN_VERSION "token_weight_version"

extern const rl_model_kind rl_model_kind_lm;

/* The transformer inside an LM-kind model (NULL for another kind): for
 * tools and tests that need the network itself. */
rl_lm *rl_lm_model_network(rl_model *m);

/* One sampling call of an LM-kind model: its checked inputs and the
 * response tensors a sampler fills. */
typedef struct rl_lm_sample_call {
    rl_lm *net;
    int B, P, R;
    const int32_t *prompts;   /* (B, P) */
    const int *plens;         /* (B) in [1, P] */
    const uint64_t *seeds;    /* (B) the random stream of each row */
    const rl_lm_sampling *s;  /* sampling->* with model.eos_token_id as the stop token */
    int32_t *tokens;          /* (B, R) RL_LM_RESPONSES */
    float *logp, *entropy;    /* (B, R) RL_LM_RESPONSE_LOGP, RL_LM_RESPONSE_ENTROPY */
    float *mask;              /* (B, R) RL_LM_RESPONSE_MASK when asked for, else NULL */
    int *lens;                /* (B) becomes RL_LM_RESPONSE_LENS */
    rl_dataproto *out;        /* the call's output, for tensors of the sampler's own */
} rl_lm_sample_call;

/* Fills the call's outputs (B may be 0); 0 or an rl_status with the message set. */
typedef int (*rl_lm_sampler)(void *ctx, const rl_lm_sample_call *call);

/* rl_model_sample of an LM-kind model `m` with its generation done by
 * fn(ctx, ...) (the kind's own: KV-cache sampling; the rollout's multi-turn
 * agent loop): the batch and sampling->* checked as sample() checks them
 * (errors prefixed by `what`), the outputs of the batch layout above plus
 * RL_LM_RESPONSE_MASK when with_mask. */
int rl_lm_model_sample_with(rl_model *m, const rl_dataproto *in, const rl_model_sampling *sp,
                            const char *what, int with_mask, rl_lm_sampler fn, void *ctx,
                            rl_dataproto **out);

#ifdef __cplusplus
}
#endif
#endif
