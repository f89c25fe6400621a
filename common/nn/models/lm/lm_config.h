/* common/nn/models/lm/lm_config.h — shape and options of a decoder-only language model
 * of the Llama / Qwen2 family (the fields of a Hugging Face config.json that
 * the engine needs).
 *
 * Invariants (checked by rl_lm_config_validate): all sizes > 0,
 * hidden_size % num_heads == 0, num_heads % num_kv_heads == 0, head size even
 * (RoPE) and <= 1024, rope_theta > 0, rms_norm_eps > 0, flags are 0/1 and
 * token ids are -1 (none) or < vocab_size. head_dim = hidden_size / num_heads.
 * value_head is an rlrt extension (config.json key "rlrt_value_head").
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

/* Reads a Hugging Face config.json (model_type "qwen2": QKV bias on;
 * "llama": QKV bias = "attention_bias", default off). Keys read:
 * vocab_size, hidden_size, intermediate_size, num_hidden_layers,
 * num_attention_heads, max_position_embeddings (required);
 * num_key_value_heads (default num_attention_heads), rope_theta (10000),
 * rms_norm_eps (1e-6), tie_word_embeddings (false), bos/eos/pad_token_id
 * (-1; eos may be a list: the first is taken). Rejects, naming the key and
 * the file: a missing required key, a wrong JSON type, an unknown
 * model_type, and features this model does not implement (hidden_act other
 * than silu, rope_scaling, sliding window, mlp_bias). */
int rl_lm_config_from_hf_json(const char *path, rl_lm_config *out);
/* Writes c as a config.json that rl_lm_config_from_hf_json() and
 * transformers both read (model_type qwen2 when qkv_bias, else llama).
 * Atomic. */
int rl_lm_config_to_hf_json(const rl_lm_config *c, const char *path);

#ifdef __cplusplus
}
#endif
#endif
