/* lm_config.c — validation of rl_lm_config (see common/nn/models/lm/lm_config.h). */
#include "common/nn/models/lm/lm_config.h"
#include "rlrt/error.h"

#include <math.h>

int rl_lm_config_validate(const rl_lm_config *c)
{
    if (!c)
        return rl_error_set(RL_EINVAL, "lm config: NULL");
#define POS(f)                                                                                \
    if (c->f <= 0)                                                                            \
        return rl_error_set(RL_EINVAL, "lm config: " #f " must be > 0, got %d", c->f);
    POS(vocab_size) POS(hidden_size) POS(intermediate_size) POS(num_layers) POS(num_heads)
    POS(num_kv_heads) POS(max_seq_len)
#undef POS
    if (c->hidden_size % c->num_heads)
        return rl_error_set(RL_EINVAL,
                            "lm config: hidden_size %d is not a multiple of num_heads %d",
                            c->hidden_size, c->num_heads);
    if (c->num_heads % c->num_kv_heads)
        return rl_error_set(RL_EINVAL,
                            "lm config: num_heads %d is not a multiple of num_kv_heads %d",
                            c->num_heads, c->num_kv_heads);
    int hd = c->hidden_size / c->num_heads;
    if (hd % 2 || hd > 1024)
        return rl_error_set(RL_EINVAL, "lm config: head size %d must be even and <= 1024", hd);
    if (!(c->rope_theta > 0.0f) || !isfinite(c->rope_theta))
        return rl_error_set(RL_EINVAL, "lm config: rope_theta must be > 0, got %g",
                            (double)c->rope_theta);
    if (!(c->rms_norm_eps > 0.0f) || !isfinite(c->rms_norm_eps))
        return rl_error_set(RL_EINVAL, "lm config: rms_norm_eps must be > 0, got %g",
                            (double)c->rms_norm_eps);
#define FLAG(f)                                                                               \
    if (c->f != 0 && c->f != 1)                                                               \
        return rl_error_set(RL_EINVAL, "lm config: " #f " must be 0 or 1, got %d", c->f);
    FLAG(tie_word_embeddings) FLAG(qkv_bias) FLAG(value_head)
#undef FLAG
#define TOK(f)                                                                                \
    if (c->f < -1 || c->f >= c->vocab_size)                                                   \
        return rl_error_set(RL_EINVAL, "lm config: " #f " %d not in [-1, vocab_size %d)",     \
                            c->f, c->vocab_size);
    TOK(bos_token_id) TOK(eos_token_id) TOK(pad_token_id)
#undef TOK
    return RL_OK;
}
