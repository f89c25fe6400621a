/* tokenizer_hf.c — the special tokens of a Hugging Face tokenizer directory:
 * tokenizer_config.json, then generation_config.json (common/text/tokenizer.h,
 * rl_tokenizer_apply_hf_config). */
#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common/text/tokenizer.h"
#include "rlrt/error.h"

/* dir/name parsed (an object), NULL with *rc = 0 when absent, or NULL with
 * *rc set on an error. */
static json_t *s_load(const char *dir, const char *name, char *path, size_t cap, int flags,
                      int *rc)
{
    snprintf(path, cap, "%s/%s", dir, name);
    *rc = RL_OK;
    if (access(path, F_OK) != 0)
        return NULL;
    json_error_t je;
    json_t *j = json_load_file(path, (size_t)flags, &je);
    if (!j) {
        *rc = rl_error_set(RL_EPROTO, "%s:%d: %s", path, je.line, je.text);
        return NULL;
    }
    if (!json_is_object(j)) {
        json_decref(j);
        *rc = rl_error_set(RL_EPROTO, "%s: top level is not a JSON object", path);
        return NULL;
    }
    return j;
}

/* tokenizer_config.json's `key`: *id the token's id, -2 when the file does
 * not set it (absent or null). */
static int s_config_token(const rl_tokenizer *tok, const json_t *cfg, const char *path,
                          const char *key, int32_t *id)
{
    *id = -2;
    json_t *v = cfg ? json_object_get(cfg, key) : NULL;
    if (!v || json_is_null(v))
        return RL_OK;
    if (json_is_object(v))
        v = json_object_get(v, "content");
    const char *text = json_string_value(v);
    if (!text)
        return rl_error_set(RL_EPROTO, "%s: '%s' must be a string or an object with a string "
                            "'content'", path, key);
    *id = rl_tokenizer_token_to_id(tok, text);
    if (*id < 0)
        return rl_error_set(RL_ENOTFOUND, "%s: %s '%s' is not a token of the tokenizer", path, key,
                            text);
    return RL_OK;
}

/* generation_config.json's `key`: an id or a list of them (the first), -2
 * when absent or null. */
static int s_gen_token(const rl_tokenizer *tok, const json_t *gen, const char *path,
                       const char *key, int32_t *id)
{
    *id = -2;
    json_t *v = gen ? json_object_get(gen, key) : NULL;
    if (json_is_array(v))
        v = json_array_get(v, 0);
    if (!v || json_is_null(v))
        return RL_OK;
    if (!json_is_integer(v))
        return rl_error_set(RL_EPROTO, "%s: '%s' must be a token id or a list of them", path, key);
    json_int_t x = json_integer_value(v);
    if (x < 0 || x >= rl_tokenizer_vocab_size(tok))
        return rl_error_set(RL_ENOTFOUND, "%s: %s %lld is outside the tokenizer's %lld ids", path,
                            key, (long long)x, (long long)rl_tokenizer_vocab_size(tok));
    *id = (int32_t)x;
    return RL_OK;
}

int rl_tokenizer_apply_hf_config(rl_tokenizer *tok, const char *dir)
{
    if (!tok || !dir)
        return rl_error_set(RL_EINVAL, "rl_tokenizer_apply_hf_config: NULL argument");
    char cpath[4200], gpath[4200];
    int rc;
    /* tokenizer_config.json's model_max_length may be 1e30 written as an
     * integer: read its numbers as reals (only its strings are used) */
    json_t *cfg = s_load(dir, "tokenizer_config.json", cpath, sizeof cpath,
                         JSON_DECODE_INT_AS_REAL, &rc);
    json_t *gen = rc ? NULL : s_load(dir, "generation_config.json", gpath, sizeof gpath, 0, &rc);
    static const struct {
        rl_tokenizer_special which;
        const char *cfg_key, *gen_key;
    } keys[] = {{RL_TOK_BOS, "bos_token", "bos_token_id"},
                {RL_TOK_EOS, "eos_token", "eos_token_id"},
                {RL_TOK_PAD, "pad_token", "pad_token_id"},
                {RL_TOK_UNK, "unk_token", NULL}};
    for (size_t k = 0; !rc && k < sizeof keys / sizeof keys[0]; k++) {
        int32_t id;
        rc = s_config_token(tok, cfg, cpath, keys[k].cfg_key, &id);
        if (!rc && id == -2 && keys[k].gen_key)
            rc = s_gen_token(tok, gen, gpath, keys[k].gen_key, &id);
        if (!rc && id >= 0)
            rc = rl_tokenizer_set_special_id(tok, keys[k].which, id);
    }
    if (!rc && rl_tokenizer_special_id(tok, RL_TOK_PAD) < 0)
        rc = rl_tokenizer_set_special_id(tok, RL_TOK_PAD, rl_tokenizer_special_id(tok, RL_TOK_EOS));
    json_decref(cfg);
    json_decref(gen);
    return rc;
}
