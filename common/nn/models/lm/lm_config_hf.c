/* lm_config_hf.c — Hugging Face config.json <-> rl_lm_config (see
 * common/nn/models/lm/lm_config.h). */
#include "common/nn/models/lm/lm_config.h"
#include "rlrt/error.h"
#include "common/core/util.h"
#include "common/nn/engine/safetensors.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

static const char *s_type(const json_t *j)
{
    switch (json_typeof(j)) {
    case JSON_OBJECT: return "object";
    case JSON_ARRAY: return "array";
    case JSON_STRING: return "string";
    case JSON_INTEGER: return "integer";
    case JSON_REAL: return "number";
    case JSON_TRUE:
    case JSON_FALSE: return "boolean";
    case JSON_NULL: return "null";
    }
    return "?";
}

/* Positive int key; required unless def > 0 (then the default when absent). */
static int s_get_int(const char *path, const json_t *root, const char *key, int def, int *out)
{
    json_t *j = json_object_get(root, key);
    if (!j || json_is_null(j)) {
        if (def > 0) {
            *out = def;
            return RL_OK;
        }
        return rl_error_set(RL_ECONFIG, "%s: missing required key '%s'", path, key);
    }
    if (!json_is_integer(j))
        return rl_error_set(RL_ECONFIG, "%s: key '%s' is a %s, expected an integer", path, key,
                            s_type(j));
    json_int_t v = json_integer_value(j);
    if (v <= 0 || v > 0x7fffffff)
        return rl_error_set(RL_ECONFIG, "%s: key '%s' = %lld must be in [1, 2^31)", path, key,
                            (long long)v);
    *out = (int)v;
    return RL_OK;
}

static int s_get_float(const char *path, const json_t *root, const char *key, double def,
                       float *out)
{
    json_t *j = json_object_get(root, key);
    if (!j || json_is_null(j)) {
        *out = (float)def;
        return RL_OK;
    }
    if (!json_is_number(j))
        return rl_error_set(RL_ECONFIG, "%s: key '%s' is a %s, expected a number", path, key,
                            s_type(j));
    double v = json_number_value(j);
    if (!(v > 0.0) || !isfinite(v))
        return rl_error_set(RL_ECONFIG, "%s: key '%s' = %g must be finite and > 0", path, key, v);
    *out = (float)v;
    return RL_OK;
}

static int s_get_bool(const char *path, const json_t *root, const char *key, int def, int *out)
{
    json_t *j = json_object_get(root, key);
    if (!j || json_is_null(j)) {
        *out = def;
        return RL_OK;
    }
    if (!json_is_boolean(j))
        return rl_error_set(RL_ECONFIG, "%s: key '%s' is a %s, expected true or false", path, key,
                            s_type(j));
    *out = json_is_true(j);
    return RL_OK;
}

/* Token id: absent/null -> -1; an integer >= 0; a list -> its first element. */
static int s_get_token(const char *path, const json_t *root, const char *key, int *out)
{
    json_t *j = json_object_get(root, key);
    *out = -1;
    if (!j || json_is_null(j))
        return RL_OK;
    if (json_is_array(j)) {
        if (json_array_size(j) == 0)
            return RL_OK;
        j = json_array_get(j, 0);
    }
    if (!json_is_integer(j))
        return rl_error_set(RL_ECONFIG, "%s: key '%s' is a %s, expected an integer token id (or "
                            "a list of them)", path, key, s_type(j));
    json_int_t v = json_integer_value(j);
    if (v < 0 || v > 0x7fffffff)
        return rl_error_set(RL_ECONFIG, "%s: key '%s' = %lld is not a valid token id", path, key,
                            (long long)v);
    *out = (int)v;
    return RL_OK;
}

static int s_parse(const char *path, const json_t *root, rl_lm_config *c)
{
    if (!json_is_object(root))
        return rl_error_set(RL_ECONFIG, "%s: top level is a %s, expected an object", path,
                            s_type(root));
    json_t *mt = json_object_get(root, "model_type");
    if (!mt)
        return rl_error_set(RL_ECONFIG, "%s: missing required key 'model_type'", path);
    if (!json_is_string(mt))
        return rl_error_set(RL_ECONFIG, "%s: key 'model_type' is a %s, expected a string", path,
                            s_type(mt));
    const char *type = json_string_value(mt);
    int is_qwen2 = strcmp(type, "qwen2") == 0, is_llama = strcmp(type, "llama") == 0;
    if (!is_qwen2 && !is_llama)
        return rl_error_set(RL_ECONFIG, "%s: key 'model_type' = '%s' is not supported (expected "
                            "'qwen2' or 'llama')", path, type);
    memset(c, 0, sizeof *c);
    int rc;
    if ((rc = s_get_int(path, root, "vocab_size", 0, &c->vocab_size)) < 0 ||
        (rc = s_get_int(path, root, "hidden_size", 0, &c->hidden_size)) < 0 ||
        (rc = s_get_int(path, root, "intermediate_size", 0, &c->intermediate_size)) < 0 ||
        (rc = s_get_int(path, root, "num_hidden_layers", 0, &c->num_layers)) < 0 ||
        (rc = s_get_int(path, root, "num_attention_heads", 0, &c->num_heads)) < 0 ||
        (rc = s_get_int(path, root, "num_key_value_heads", c->num_heads, &c->num_kv_heads)) < 0 ||
        (rc = s_get_int(path, root, "max_position_embeddings", 0, &c->max_seq_len)) < 0 ||
        (rc = s_get_float(path, root, "rope_theta", 10000.0, &c->rope_theta)) < 0 ||
        (rc = s_get_float(path, root, "rms_norm_eps", 1e-6, &c->rms_norm_eps)) < 0 ||
        (rc = s_get_bool(path, root, "tie_word_embeddings", 0, &c->tie_word_embeddings)) < 0 ||
        (rc = s_get_bool(path, root, "rlrt_value_head", 0, &c->value_head)) < 0 ||
        (rc = s_get_token(path, root, "bos_token_id", &c->bos_token_id)) < 0 ||
        (rc = s_get_token(path, root, "eos_token_id", &c->eos_token_id)) < 0 ||
        (rc = s_get_token(path, root, "pad_token_id", &c->pad_token_id)) < 0)
        return rc;
    if (is_qwen2) {
        c->qkv_bias = 1;
    } else if ((rc = s_get_bool(path, root, "attention_bias", 0, &c->qkv_bias)) < 0) {
        return rc;
    }
    /* Features the C transformer does not implement: refuse rather than
     * silently compute a different model. */
    json_t *act = json_object_get(root, "hidden_act");
    if (act && !json_is_null(act) &&
        (!json_is_string(act) || strcmp(json_string_value(act), "silu") != 0))
        return rl_error_set(RL_ECONFIG, "%s: key 'hidden_act' must be \"silu\"", path);
    json_t *rs = json_object_get(root, "rope_scaling");
    if (rs && !json_is_null(rs)) {
        const char *kind = json_string_value(json_object_get(rs, "rope_type"));
        kind = kind ? kind : json_string_value(json_object_get(rs, "type"));
        return rl_error_set(RL_ECONFIG, "%s: key 'rope_scaling' is set (type '%s'): RoPE scaling "
                            "is not supported (rlrt's transformer computes plain RoPE with "
                            "rope_theta); use a checkpoint without it", path, kind ? kind : "?");
    }
    int flag = 0;
    if ((rc = s_get_bool(path, root, "use_sliding_window", 0, &flag)) < 0)
        return rc;
    if (flag)
        return rl_error_set(RL_ECONFIG, "%s: key 'use_sliding_window' is true; sliding-window "
                            "attention is not supported", path);
    if ((rc = s_get_bool(path, root, "mlp_bias", 0, &flag)) < 0)
        return rc;
    if (flag)
        return rl_error_set(RL_ECONFIG, "%s: key 'mlp_bias' is true; MLP biases are not "
                            "supported", path);
    if (c->hidden_size % c->num_heads)
        return rl_error_set(RL_ECONFIG, "%s: hidden_size %d is not divisible by "
                            "num_attention_heads %d", path, c->hidden_size, c->num_heads);
    json_t *hd = json_object_get(root, "head_dim");
    if (hd && !json_is_null(hd) &&
        (!json_is_integer(hd) || json_integer_value(hd) != c->hidden_size / c->num_heads))
        return rl_error_set(RL_ECONFIG, "%s: key 'head_dim' must equal hidden_size / "
                            "num_attention_heads = %d", path, c->hidden_size / c->num_heads);
    if (c->num_heads % c->num_kv_heads)
        return rl_error_set(RL_ECONFIG, "%s: num_attention_heads %d is not divisible by "
                            "num_key_value_heads %d", path, c->num_heads, c->num_kv_heads);
    return RL_OK;
}

int rl_lm_config_from_hf_json(const char *path, rl_lm_config *out)
{
    json_error_t err;
    json_t *root = json_load_file(path, JSON_REJECT_DUPLICATES, &err);
    if (!root)
        return rl_error_set(RL_ECONFIG, "%s:%d: cannot read config.json: %s", path, err.line,
                            err.text);
    rl_lm_config c;
    int rc = s_parse(path, root, &c);
    json_decref(root);
    if (rc == RL_OK)
        *out = c;
    return rc;
}

static json_t *s_token(int id) { return id >= 0 ? json_integer(id) : json_null(); }

int rl_lm_config_to_hf_json(const rl_lm_config *c, const char *path)
{
    if (c->vocab_size <= 0 || c->hidden_size <= 0 || c->intermediate_size <= 0 ||
        c->num_layers <= 0 || c->num_heads <= 0 || c->num_kv_heads <= 0 || c->max_seq_len <= 0)
        return rl_error_set(RL_EINVAL, "%s: lm config has a non-positive size", path);
    if (c->hidden_size % c->num_heads || c->num_heads % c->num_kv_heads)
        return rl_error_set(RL_EINVAL, "%s: lm config: heads do not divide hidden_size / kv "
                            "heads do not divide heads", path);
    int qwen = c->qkv_bias != 0;
    json_t *j = json_pack(
        "{s:[s], s:s, s:s, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:f, s:f, s:b, s:o, s:o, s:o,"
        " s:s, s:f, s:b}",
        "architectures", qwen ? "Qwen2ForCausalLM" : "LlamaForCausalLM",
        "model_type", qwen ? "qwen2" : "llama",
        "hidden_act", "silu",
        "vocab_size", c->vocab_size, "hidden_size", c->hidden_size,
        "intermediate_size", c->intermediate_size, "num_hidden_layers", c->num_layers,
        "num_attention_heads", c->num_heads, "num_key_value_heads", c->num_kv_heads,
        "max_position_embeddings", c->max_seq_len, "rope_theta", (double)c->rope_theta,
        "rms_norm_eps", (double)c->rms_norm_eps, "tie_word_embeddings", c->tie_word_embeddings != 0,
        "bos_token_id", s_token(c->bos_token_id), "eos_token_id", s_token(c->eos_token_id),
        "pad_token_id", s_token(c->pad_token_id), "torch_dtype", "float32",
        "initializer_range", 0.02, "use_cache", 1);
    if (!j)
        return rl_error_set(RL_ENOMEM, "%s: out of memory building config.json", path);
    int rc = RL_OK;
    if (!qwen)
        rc = json_object_set_new(j, "attention_bias", json_false()) ? RL_ENOMEM : RL_OK;
    if (rc == RL_OK && c->value_head)
        rc = json_object_set_new(j, "rlrt_value_head", json_true()) ? RL_ENOMEM : RL_OK;
    char *text = rc == RL_OK ? json_dumps(j, JSON_INDENT(2) | JSON_REAL_PRECISION(9)) : NULL;
    json_decref(j);
    if (!text)
        return rl_error_set(RL_ENOMEM, "%s: out of memory writing config.json", path);
    size_t n = strlen(text);
    text[n] = '\n'; /* replace the NUL: the buffer has room for it */
    rc = rl_file_write_atomic(path, text, n + 1);
    free(text);
    return rc;
}
