/* lm_hf.c — a Hugging Face model directory as the start of an LM job (see
 * common/nn/models/lm/lm_hf.h). */
#include "common/nn/models/lm/lm_hf.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common/nn/engine/safetensors.h"
#include "common/nn/models/lm/lm_config.h"
#include "common/schema/lm.h"
#include "common/schema/model.h"
#include "rlrt/error.h"

/* 1 when the job itself set the key at `path` (its file or an override),
 * 0 when it holds a default or a value a recipe set. */
static int s_job_set(const rl_config *job, const char *path)
{
    const rl_config_node *n = rl_config_node_at(rl_config_root(job), path);
    const char *file = n ? rl_config_node_file(n) : NULL;
    return file && strcmp(file, "<defaults>") != 0 && strcmp(file, "<set>") != 0;
}

/* A YAML single-quoted string of `s` into buf ('' for each quote). */
static int s_quote(char *buf, size_t cap, const char *s)
{
    size_t k = 0;
    buf[k++] = '\'';
    for (; *s && k + 3 < cap; s++) {
        if (*s == '\'')
            buf[k++] = '\'';
        buf[k++] = *s;
    }
    if (*s)
        return rl_error_set(RL_EINVAL, "path too long for the config: %.64s...", s);
    buf[k++] = '\'';
    buf[k] = '\0';
    return RL_OK;
}

typedef enum { S_INT, S_NUM, S_BOOL } s_kind;

/* One architecture key: its field in the job's section and in config.json. */
typedef struct s_key {
    size_t offset;   /* in rl_lm_model_config */
    const char *hf;  /* the config.json key */
    s_kind kind;
    size_t cfg;      /* in rl_lm_config */
} s_key;

#define S_K(field, hf, kind, cfgfield) \
    {offsetof(rl_lm_model_config, field), hf, kind, offsetof(rl_lm_config, cfgfield)}
static const s_key s_keys[] = {
    S_K(vocab_size, "vocab_size", S_INT, vocab_size),
    S_K(hidden_size, "hidden_size", S_INT, hidden_size),
    S_K(intermediate_size, "intermediate_size", S_INT, intermediate_size),
    S_K(num_layers, "num_hidden_layers", S_INT, num_layers),
    S_K(num_heads, "num_attention_heads", S_INT, num_heads),
    S_K(num_kv_heads, "num_key_value_heads", S_INT, num_kv_heads),
    S_K(max_seq_len, "max_position_embeddings", S_INT, max_seq_len),
    S_K(rope_theta, "rope_theta", S_NUM, rope_theta),
    S_K(rms_norm_eps, "rms_norm_eps", S_NUM, rms_norm_eps),
    S_K(tie_word_embeddings, "tie_word_embeddings", S_BOOL, tie_word_embeddings),
    S_K(qkv_bias, "qkv_bias (qwen2: always; llama: attention_bias)", S_BOOL, qkv_bias),
    S_K(value_head, "rlrt_value_head", S_BOOL, value_head),
};

/* The value of key k in the job's section (v) and in the config (c) as text;
 * 1 when they agree. */
static int s_values(const s_key *k, const rl_lm_model_config *v, const rl_lm_config *c,
                    char *job, char *hf, size_t cap)
{
    const char *jv = (const char *)v + k->offset, *cv = (const char *)c + k->cfg;
    switch (k->kind) {
    case S_INT: {
        int64_t a = *(const int64_t *)jv;
        int b = *(const int *)cv;
        snprintf(job, cap, "%lld", (long long)a);
        snprintf(hf, cap, "%d", b);
        return a == b;
    }
    case S_NUM: {
        double a = *(const double *)jv;
        float b = *(const float *)cv;
        snprintf(job, cap, "%.9g", a);
        snprintf(hf, cap, "%.9g", (double)b);
        if (!strpbrk(hf, ".eEn")) /* a number for YAML, not an integer */
            strncat(hf, ".0", cap - strlen(hf) - 1);
        return (float)a == b;
    }
    case S_BOOL: {
        int a = *(const int *)jv, b = *(const int *)cv;
        snprintf(job, cap, "%s", a ? "true" : "false");
        snprintf(hf, cap, "%s", b ? "true" : "false");
        return !a == !b;
    }
    }
    return 0;
}

/* The job's model.* keys against config c (read from `path`). */
static int s_apply(rl_config *job, const rl_lm_config *cp, const char *path)
{
    rl_lm_config c = *cp;
    const rl_lm_model_config *vp = rl_config_section_get(job, &rl_lm_model_section);
    if (!vp)
        return rl_error_code();
    rl_lm_model_config v = *vp; /* setting keys drops the section read */
    for (size_t i = 0; i < sizeof s_keys / sizeof s_keys[0]; i++) {
        const s_key *k = &s_keys[i];
        const char *key = rl_config_key_path(&rl_lm_model_section, k->offset);
        char jv[64], hv[64];
        if (s_values(k, &v, &c, jv, hv, sizeof jv))
            continue;
        if (s_job_set(job, key))
            return rl_config_error_at(job, key, RL_ECONFIG,
                                      "%s in the job, but %s has %s = %s (the architecture comes "
                                      "from the model directory: remove the key or make the two "
                                      "agree)", jv, path, k->hf, hv);
        if (rl_config_key_set(job, &rl_lm_model_section, k->offset, hv))
            return rl_error_code();
    }
    /* the stop and padding tokens: the tokenizer's come later (the recipes) */
    int tok[2] = {c.eos_token_id, c.pad_token_id};
    size_t off[2] = {offsetof(rl_lm_model_config, eos_token_id),
                     offsetof(rl_lm_model_config, pad_token_id)};
    for (int k = 0; k < 2; k++) {
        char text[32];
        snprintf(text, sizeof text, "%d", tok[k]);
        if (tok[k] >= 0 && tok[k] < c.vocab_size &&
            !s_job_set(job, rl_config_key_path(&rl_lm_model_section, off[k])) &&
            rl_config_key_set(job, &rl_lm_model_section, off[k], text))
            return rl_error_code();
    }
    return RL_OK;
}

int rl_lm_hf_config_apply(rl_config *job, const char *dir)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/config.json", dir);
    rl_lm_config c;
    return rl_lm_config_from_hf_json(path, &c) ? rl_error_code() : s_apply(job, &c, path);
}

/* 1 when dir/name exists. */
static int s_has(const char *dir, const char *name)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return access(path, F_OK) == 0;
}

#define S_INIT_FROM RL_CFG_PATH(&rl_model_base_section, rl_model_base_config, init_from)
#define S_PATH RL_CFG_PATH(&rl_lm_model_section, rl_lm_model_config, path)
#define S_TOKENIZER RL_CFG_PATH(&rl_lm_data_section, rl_lm_data_config, tokenizer)

/* The message of the last error, located at the job's `path`. */
static int s_located(const rl_config *job, const char *path)
{
    char msg[2048];
    snprintf(msg, sizeof msg, "%s", rl_error_message());
    return rl_config_error_at(job, path, rl_error_code() ? rl_error_code() : RL_ECONFIG, "%s", msg);
}

/* model.path → model.init_from; *key: the key the job named the directory
 * with (errors about it are located there). */
static int s_alias(rl_config *job, const char **key)
{
    *key = S_INIT_FROM;
    const rl_lm_model_config *v = rl_config_section_get(job, &rl_lm_model_section);
    const rl_model_base_config *b = v ? rl_config_section_get(job, &rl_model_base_section) : NULL;
    if (!b)
        return rl_error_code();
    if (!v->path || !*v->path)
        return RL_OK;
    if (s_job_set(job, S_INIT_FROM) && b->init_from && strcmp(b->init_from, v->path) != 0)
        return rl_config_error_at(job, S_PATH, RL_ECONFIG, "'%s', but %s is '%s': the two name "
                                  "one directory (%s is verl's name for it); set one",
                                  v->path, S_INIT_FROM, b->init_from, S_PATH);
    *key = S_PATH;
    char q[4200];
    return s_quote(q, sizeof q, v->path) ? rl_error_code()
                                         : RL_CFG_SET(job, &rl_model_base_section,
                                                      rl_model_base_config, init_from, q);
}

int rl_lm_hf_job_prepare(rl_config *job)
{
    const char *key;
    int rc = s_alias(job, &key);
    const rl_model_base_config *b = rc ? NULL : rl_config_section_get(job, &rl_model_base_section);
    if (!b)
        return rl_error_code();
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", b->init_from ? b->init_from : "");
    if (!*dir || !s_has(dir, "config.json"))
        return RL_OK;
    char path[4200];
    snprintf(path, sizeof path, "%s/config.json", dir);
    rl_lm_config c;
    if (rl_lm_config_from_hf_json(path, &c) || rl_safetensors_dir_check(dir))
        return s_located(job, key);
    if ((rc = s_apply(job, &c, path)))
        return rc;
    if (!rl_config_has_section(job, &rl_lm_data_section) || s_job_set(job, S_TOKENIZER))
        return RL_OK;
    const char *name = s_has(dir, "tokenizer.json")        ? "tokenizer.json"
                       : s_has(dir, RL_LM_RLRT_TOKENIZER) ? RL_LM_RLRT_TOKENIZER
                                                          : NULL;
    if (!name)
        return rl_config_error_at(job, key, RL_ENOTFOUND,
                                  "%s has no tokenizer.json (nor %s, which rlrt saves beside a "
                                  "model with a built-in tokenizer): copy the model's tokenizer "
                                  "files there (tokenizer.json, tokenizer_config.json) or name a "
                                  "tokenizer with %s (arith for the built-in task)",
                                  dir, RL_LM_RLRT_TOKENIZER, S_TOKENIZER);
    char q[4400];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    if (s_quote(q, sizeof q, path))
        return rl_error_code();
    return RL_CFG_SET(job, &rl_lm_data_section, rl_lm_data_config, tokenizer, q);
}
