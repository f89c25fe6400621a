/* common/nn/models/lm/transformer.h — the language-model policy: a decoder-only
 * transformer of the Llama / Qwen2 family (RMSNorm, RoPE, SwiGLU MLP,
 * grouped-query attention, optional QKV bias, tied or untied embeddings,
 * optional scalar value head), with training forward/backward, per-token
 * log-probs and exact entropy, and KV-cache generation (common/nn/models/lm/generate.h).
 *
 * Parameters: ONE flat float buffer described by a manifest with Hugging Face
 * names, in this order (Linear weights are (out, in)):
 *   model.embed_tokens.weight (V,d)
 *   per layer N: model.layers.N.input_layernorm.weight (d),
 *     .self_attn.q_proj.weight (H·hd,d) [.q_proj.bias (H·hd)],
 *     .self_attn.k_proj.weight (KH·hd,d) [.k_proj.bias], .v_proj likewise,
 *     .self_attn.o_proj.weight (d,H·hd), .post_attention_layernorm.weight (d),
 *     .mlp.gate_proj.weight (I,d), .mlp.up_proj.weight (I,d),
 *     .mlp.down_proj.weight (d,I)
 *   model.norm.weight (d)
 *   lm_head.weight (V,d)                      only when not tied
 *   value_head.weight (1,d), value_head.bias (1)   only with value_head
 * The gradient buffer has the same layout (AdamW moments / reference copies
 * can too: allocate rl_lm_num_params() floats with rl_param_buffer_new()).
 *
 * Batches are padded: tokens (B,T), attn_mask (B,T) with 1 for real tokens
 * and 0 for padding (mask NULL = all real). The real tokens of a row must be
 * contiguous: right padding, left padding (verl-style prompts) or both work.
 * The RoPE position of a token is the number of real tokens before it (HF's
 * cumsum(mask) − 1), so a row gives the same results wherever it is padded.
 *
 * Alignment of per-token outputs (all (B,T)): entry [b,t] is about token
 * tokens[b,t] and the state before it:
 *   logp[b,t]    = log π(tokens[b,t] | tokens[b,<t])   under softmax(logits/temperature)
 *   entropy[b,t] = exact entropy of that full next-token distribution
 *   values[b,t]  = value head on the hidden state at t-1
 * They are 0 wherever token t or token t−1 is padding (so at the first real
 * token of each row too).
 *
 * Memory: the training forward keeps O(L·B·T·(4d + 3I)) activations plus
 * the (B,T,V) logits and their gradient; attention keeps only a (B,H,T)
 * log-sum-exp per layer (probabilities are recomputed in the backward).
 * Micro-batch (rl_lm_forward_backward) to bound it.
 *
 * Determinism: for a given thread count (rl_nn_set_threads) every result is
 * bit-reproducible; different thread counts agree to float rounding.
 *
 * Not supported (yet): head_dim != hidden_size / num_heads, RoPE scaling
 * (Llama 3 / YaRN), sliding-window attention.
 *
 * Ownership: rl_lm_new() returns a model that owns its manifest, parameter
 * and gradient buffers (zeroed) and activation scratch; rl_lm_free() frees
 * them. Pointers from rl_lm_params()/rl_lm_grads() stay valid for the
 * model's life. A model is not thread-safe: one call at a time.
 */
#ifndef RLRT_NN_TRANSFORMER_H
#define RLRT_NN_TRANSFORMER_H

#include <stdint.h>

#include "common/nn/engine/device.h"
#include "common/nn/models/lm/lm_config.h"
#include "rlrt/nn/params.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct rl_lm rl_lm;

/* Validates cfg and builds the manifest; NULL + message on error.
 * RL_DEVICE_CUDA (a `make CUDA=1` build with a GPU visible) keeps the
 * parameters, gradients and activations on the GPU and runs the training
 * forward and backward there (the kernels of common/nn/engine/cuda):
 * rl_lm_params/grads/param/logits are then device pointers (copy with
 * rl_device_copy), tokens and masks come from the host and the per-token
 * outputs and their gradients go through host arrays as on the CPU.
 * rl_lm_set_precision picks fp32 or bf16 products on either device.
 * Generation (generate.h) runs on either device. A build
 * or machine without the device is RL_EUNSUPPORTED. */
rl_lm *rl_lm_new(const rl_lm_config *cfg, rl_device dev);
void rl_lm_free(rl_lm *m);
rl_device rl_lm_device(const rl_lm *m);
/* Moves the model to `dev`: the parameters are copied there, the gradients
 * start at zero, the activation and generation scratch is dropped (made
 * again on first use); pointers from rl_lm_params/grads/param/logits taken
 * before are invalid after. On an error the model is unchanged. */
int rl_lm_to_device(rl_lm *m, rl_device dev);

/* How the linear layers multiply (device.h's rl_precision; a new model is
 * fp32). bf16: each forward (and each generate) first rounds the float32
 * parameters to a bf16 copy on the model's device (num_params × 2 bytes
 * more), the products take bf16 inputs with float32 accumulation, and the
 * gradients, the parameters and everything else stay float32. On the CPU
 * the bf16 products are emulated (ops.h). RL_EINVAL for another value. */
int rl_lm_set_precision(rl_lm *m, rl_precision p);
rl_precision rl_lm_precision(const rl_lm *m);

const rl_lm_config *rl_lm_get_config(const rl_lm *m);
const rl_param_manifest *rl_lm_manifest(const rl_lm *m);
int64_t rl_lm_num_params(const rl_lm *m);
float *rl_lm_params(rl_lm *m); /* (num_params) */
float *rl_lm_grads(rl_lm *m);  /* (num_params), same layout */
void rl_lm_zero_grad(rl_lm *m);
/* Pointer to the parameter view `name` (HF name) or NULL. */
float *rl_lm_param(rl_lm *m, const char *name);

/* Llama-style initialisation from `seed`: every matrix ~ N(0, std²)
 * (counter-based RNG, stream = view index), norm weights 1, biases 0. */
int rl_lm_init_random(rl_lm *m, uint64_t seed, float std);

/* Forward over a padded batch. Writes any non-NULL output among
 * logp/entropy/values (all (B,T), aligned as described above; values needs
 * cfg.value_head). temperature <= 0 means 1. Saves the activations that
 * rl_lm_backward needs. Errors: RL_ESHAPE (B, T < 1 or T > max_seq_len),
 * RL_ERANGE (token id out of range), RL_EINVAL (real tokens not contiguous). */
int rl_lm_forward(rl_lm *m, int B, int T, const int32_t *tokens, const uint8_t *attn_mask,
                  float temperature, float *logp, float *entropy, float *values);
/* Raw logits (B,T,V) of the last forward (before temperature): row (b,t)
 * predicts token t+1. Valid until the next forward, generate or backward
 * (which overwrites them with their gradient, N × V floats saved; NULL
 * after it). */
const float *rl_lm_logits(const rl_lm *m);

/* Backward of L given dL/dlogp, dL/dentropy, dL/dvalues (each (B,T) of the
 * last forward, NULL = zero; entries at masked positions are ignored).
 * ACCUMULATES into rl_lm_grads(). RL_ESTATE if there is no forward to
 * differentiate (generate or a backward ran since: one backward a forward). */
int rl_lm_backward(rl_lm *m, const float *dlogp, const float *dentropy,
                   const float *dvalues);

/* A loss evaluated on one micro-batch (rows [row0, row0+B) of the full
 * batch): reads the forward outputs (B,T) and writes dL/d of each (B,T)
 * (buffers come zeroed; dentropy/dvalues may be left zero), adds the loss to
 * *loss. Returns 0 or a negative rl_status. values is NULL without a value head. */
typedef int (*rl_lm_loss_fn)(void *ctx, int row0, int B, int T, const float *logp,
                             const float *entropy, const float *values, float *dlogp,
                             float *dentropy, float *dvalues, double *loss);

/* Gradient accumulation: runs forward + loss + backward on micro-batches of
 * `micro_batch` rows (<= 0: all B at once), each accumulating into the
 * gradient buffer (not zeroed here). A micro-batch is trimmed after its last
 * real token, so right-padded short rows cost less. *loss (may be NULL) = Σ of the fn losses. */
int rl_lm_forward_backward(rl_lm *m, int B, int T, const int32_t *tokens,
                           const uint8_t *attn_mask, float temperature, int micro_batch,
                           rl_lm_loss_fn fn, void *ctx, double *loss);

/* Supervised helper: L = −Σ mask·logp / denom over n tokens (denom <= 0: the
 * mask count); writes dlogp (n) = −mask/denom when non-NULL; returns L. */
double rl_lm_masked_nll(const float *logp, const uint8_t *loss_mask, int64_t n, double denom,
                        float *dlogp);

#ifdef __cplusplus
}
#endif
#endif
