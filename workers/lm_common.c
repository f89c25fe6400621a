/* lm_common.c — shared pieces of the actor and rollout roles (see lm_common.h). */
#include "lm_common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rlrt/error.h"
#include "rlrt/nn/safetensors.h"

int rl_job_lm_config(const rl_config *job, rl_lm_config *c)
{
    int64_t v[9];
    double theta, eps;
    int tie;
    if (rl_config_get_int(job, "model.vocab_size", &v[0]) ||
        rl_config_get_int(job, "model.hidden_size", &v[1]) ||
        rl_config_get_int(job, "model.intermediate_size", &v[2]) ||
        rl_config_get_int(job, "model.num_layers", &v[3]) ||
        rl_config_get_int(job, "model.num_heads", &v[4]) ||
        rl_config_get_int(job, "model.num_kv_heads", &v[5]) ||
        rl_config_get_int(job, "model.max_seq_len", &v[6]) ||
        rl_config_get_int_or(job, "model.eos_token_id", -1, &v[7]) ||
        rl_config_get_int_or(job, "model.pad_token_id", 0, &v[8]) ||
        rl_config_get_double_or(job, "model.rope_theta", 10000.0, &theta) ||
        rl_config_get_double_or(job, "model.rms_norm_eps", 1e-6, &eps) ||
        rl_config_get_bool_or(job, "model.tie_word_embeddings", 1, &tie))
        return rl_error_code();
    memset(c, 0, sizeof *c);
    c->vocab_size = (int)v[0];
    c->hidden_size = (int)v[1];
    c->intermediate_size = (int)v[2];
    c->num_layers = (int)v[3];
    c->num_heads = (int)v[4];
    c->num_kv_heads = (int)v[5];
    c->max_seq_len = (int)v[6];
    c->eos_token_id = (int)v[7];
    c->pad_token_id = (int)v[8];
    c->bos_token_id = -1;
    c->rope_theta = (float)theta;
    c->rms_norm_eps = (float)eps;
    c->tie_word_embeddings = tie;
    return rl_lm_config_validate(c);
}

rl_lm *rl_job_lm_build(const rl_config *job)
{
    rl_lm_config cfg;
    if (rl_job_lm_config(job, &cfg))
        return NULL;
    rl_lm *m = rl_lm_new(&cfg, RL_DEVICE_CPU);
    if (!m)
        return NULL;
    const char *from = "";
    int64_t seed = 1;
    double std = 0.02;
    rl_config_get_string_or(job, "model.init_from", "", &from);
    rl_config_get_int_or(job, "trainer.seed", 1, &seed);
    rl_config_get_double_or(job, "model.init_std", 0.02, &std);
    int rc;
    if (from && *from) {
        char path[4096];
        snprintf(path, sizeof path, "%s/model.safetensors", from);
        rc = rl_safetensors_read_params(path, rl_lm_manifest(m), rl_lm_params(m));
        if (rc)
            rl_error_wrap(rc, "model.init_from");
    } else {
        rc = rl_lm_init_random(m, (uint64_t)seed, (float)std);
    }
    if (rc) {
        rl_lm_free(m);
        return NULL;
    }
    return m;
}

int rl_seq_batch_build(const rl_dataproto *in, int pad_id, rl_seq_batch *s)
{
    memset(s, 0, sizeof *s);
    const rl_tensor *pr = rl_dataproto_tensor_typed(in, "prompts", RL_I32);
    const rl_tensor *pl = pr ? rl_dataproto_tensor_typed(in, "prompt_lens", RL_I32) : NULL;
    if (!pr || !pl)
        return rl_error_code();
    const rl_tensor *rs = rl_dataproto_tensor(in, "responses");
    const rl_tensor *rl = rl_dataproto_tensor(in, "response_lens");
    if ((rs && !rl) || (rs && (rs->dtype != RL_I32 || rl->dtype != RL_I32 || rs->ndim != 2)))
        return rl_error_set(RL_EDTYPE, "responses/response_lens must be i32 (B,R) and (B)");
    s->B = (int)pr->shape[0];
    s->P = (int)pr->shape[1];
    s->R = rs ? (int)rs->shape[1] : 0;
    s->plen = rl_tensor_data(pl);
    static const int32_t zero = 0;
    s->rlen = rs ? rl_tensor_data(rl) : &zero;
    int L = 1;
    for (int b = 0; b < s->B; b++) {
        int p = s->plen[b], r = rs ? s->rlen[b] : 0;
        if (p < 1 || p > s->P || r < 0 || r > s->R)
            return rl_error_set(RL_ERANGE, "row %d: prompt_len %d (P %d) or response_len %d (R %d) "
                                           "out of range", b, p, s->P, r, s->R);
        if (p + r > L)
            L = p + r;
        s->n_response_tokens += r;
    }
    s->L = L;
    s->tokens = malloc(sizeof(int32_t) * (size_t)(s->B ? s->B : 1) * (size_t)L);
    s->mask = calloc((size_t)(s->B ? s->B : 1) * (size_t)L, 1);
    const int32_t *P = rl_tensor_data(pr), *R = rs ? rl_tensor_data(rs) : NULL;
    for (int b = 0; b < s->B; b++) {
        int p = s->plen[b], r = rs ? s->rlen[b] : 0;
        int32_t *row = s->tokens + (size_t)b * L;
        for (int t = 0; t < L; t++)
            row[t] = t < p ? P[(size_t)b * s->P + t]
                           : t < p + r ? R[(size_t)b * s->R + (t - p)] : pad_id;
        memset(s->mask + (size_t)b * L, 1, (size_t)(p + r));
    }
    if (!rs)
        s->rlen = NULL;
    return RL_OK;
}

void rl_seq_batch_free(rl_seq_batch *s)
{
    free(s->tokens);
    free(s->mask);
    memset(s, 0, sizeof *s);
}

void rl_seq_gather(const rl_seq_batch *s, const float *full, int row0, int rows, int L,
                   float *out)
{
    for (int b = 0; b < rows; b++) {
        int gb = row0 + b, p = s->plen[gb], r = s->rlen ? s->rlen[gb] : 0;
        for (int j = 0; j < s->R; j++)
            out[(size_t)b * s->R + j] = j < r ? full[(size_t)b * L + p + j] : 0.0f;
    }
}

void rl_seq_scatter(const rl_seq_batch *s, const float *part, int row0, int rows, int L,
                    float *full)
{
    for (int b = 0; b < rows; b++) {
        int gb = row0 + b, p = s->plen[gb], r = s->rlen ? s->rlen[gb] : 0;
        for (int j = 0; j < r && p + j < L; j++)
            full[(size_t)b * L + p + j] = part[(size_t)b * s->R + j];
    }
}
