/* rlrt/nn/lm_config.h — shape and options of a decoder-only language model
 * of the Llama / Qwen2 family (the fields of a Hugging Face config.json that
 * the engine needs).
 *
 * Invariants (checked by rl_lm_config_validate): all sizes > 0,
 * hidden_size % num_heads == 0, num_heads % num_kv_heads == 0, head size even
 * (RoPE) and <= 1024, rope_theta > 0, rms_norm_eps > 0, flags are 0/1 and
 * token ids are -1 (none) or < vocab_size. head_dim = hidden_size / num_heads.
 */
#ifndef RLRT_NN_LM_CONFIG_H
#define RLRT_NN_LM_CONFIG_H

#ifdef __cplusplus
extern "C" {
#endif

typedef struct rl_lm_config {
    int vocab_size, hidden_size, intermediate_size, num_layers, num_heads, num_kv_heads,
        max_seq_len;
    float rope_theta, rms_norm_eps;
    int tie_word_embeddings, qkv_bias, value_head;
    int bos_token_id, eos_token_id, pad_token_id;
} rl_lm_config;

/* 0 or RL_EINVAL with a message naming the first bad field and its value. */
int rl_lm_config_validate(const rl_lm_config *c);

#ifdef __cplusplus
}
#endif
#endif
