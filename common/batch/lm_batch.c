/* lm_batch.c — the reads the LM batch transforms share (common/batch/lm_batch.h). */
#include "common/batch/lm_batch.h"

#include <stdlib.h>

#include "rlrt/error.h"
#include "rlrt/tensor.h"

float *rl_lm_mask(const rl_dataproto *dp, const rl_lm_names *L, rl_lm_mask_kind kind, int64_t *B,
                  int64_t *R)
{
    const rl_tensor *t = rl_dataproto_tensor_shaped(dp, L->responses, RL_I32, 2, NULL);
    const rl_tensor *l = t ? rl_dataproto_tensor_shaped(dp, L->response_lens, RL_I32, 1, NULL) : NULL;
    if (!l)
        return NULL;
    *B = t->shape[0];
    *R = t->shape[1];
    float *mask = calloc((size_t)((*B) * (*R) > 0 ? (*B) * (*R) : 1), sizeof(float));
    if (!mask) {
        rl_error_set(RL_ENOMEM, "out of memory for a (%lld, %lld) mask", (long long)*B, (long long)*R);
        return NULL;
    }
    const char *extra_name = kind == RL_LM_MASK_LOSS ? L->loss_mask
                             : kind == RL_LM_MASK_SAMPLED && rl_dataproto_tensor(dp, L->sampled_mask)
                                 ? L->sampled_mask
                             : kind == RL_LM_MASK_SAMPLED ? L->loss_mask
                                                          : NULL;
    const rl_tensor *mt = extra_name ? rl_dataproto_tensor(dp, extra_name) : NULL;
    if (mt && !(mt = rl_dataproto_tensor_shaped(dp, extra_name, RL_F32, 2, (int64_t[]){*B, *R}))) {
        free(mask);
        return NULL;
    }
    const int32_t *len = rl_tensor_data(l);
    const float *extra = mt ? rl_tensor_data((rl_tensor *)mt) : NULL;
    for (int64_t b = 0; b < *B; b++) {
        if (len[b] < 0 || len[b] > *R) {
            free(mask);
            rl_error_set(RL_ERANGE, "%s[%lld] = %d outside [0, %lld]", L->response_lens,
                         (long long)b, len[b], (long long)*R);
            return NULL;
        }
        for (int64_t k = 0; k < len[b]; k++)
            mask[b * *R + k] = extra ? extra[b * *R + k] : 1.0f;
    }
    return mask;
}

float *rl_lm_rows_f32(const rl_dataproto *dp, const char *name)
{
    rl_tensor *t = rl_dataproto_tensor_shaped(dp, name, RL_F32, 1, NULL);
    return t ? rl_tensor_data(t) : NULL;
}

float *rl_lm_tokens_f32(const rl_dataproto *dp, const char *name, int64_t R)
{
    rl_tensor *t = rl_dataproto_tensor_shaped(dp, name, RL_F32, 2, (int64_t[]){-1, R});
    return t ? rl_tensor_data(t) : NULL;
}

int64_t *rl_lm_column_i64(const rl_dataproto *dp, const char *name)
{
    const rl_column *c = rl_dataproto_column(dp, name);
    if (!c || rl_column_get_type(c) != RL_COL_INT64) {
        rl_error_set(RL_ENOTFOUND, "missing int64 column '%s'", name);
        return NULL;
    }
    int64_t B = rl_dataproto_rows(dp);
    int64_t *g = malloc(sizeof(int64_t) * (size_t)(B > 0 ? B : 1));
    if (!g) {
        rl_error_set(RL_ENOMEM, "out of memory");
        return NULL;
    }
    for (int64_t b = 0; b < B; b++)
        g[b] = rl_column_i64(c, b);
    return g;
}

int64_t rl_lm_guided_rows(const rl_dataproto *dp, const rl_lm_names *L)
{
    const rl_column *c = rl_dataproto_column(dp, L->guided);
    if (!c || rl_column_get_type(c) != RL_COL_INT64)
        return -1;
    int64_t n = 0;
    for (int64_t b = 0; b < rl_dataproto_rows(dp); b++)
        n += rl_column_i64(c, b) != 0;
    return n;
}

int rl_lm_loss_tokens(const rl_dataproto *dp, const rl_lm_names *L, int32_t *out)
{
    int64_t B, R;
    float *m = rl_lm_mask(dp, L, RL_LM_MASK_LOSS, &B, &R);
    if (!m)
        return rl_error_code();
    for (int64_t b = 0; b < B; b++) {
        double c = 0;
        for (int64_t k = 0; k < R; k++)
            c += m[b * R + k];
        out[b] = (int32_t)c;
    }
    free(m);
    return RL_OK;
}

double *rl_lm_row_means(const rl_dataproto *dp, const rl_lm_names *L, const char *name)
{
    int64_t B, R;
    float *m = rl_lm_mask(dp, L, RL_LM_MASK_LOSS, &B, &R);
    const float *v = m ? rl_lm_tokens_f32(dp, name, R) : NULL;
    double *out = v ? malloc(sizeof(double) * (size_t)(B > 0 ? B : 1)) : NULL;
    if (v && !out)
        rl_error_set(RL_ENOMEM, "out of memory");
    for (int64_t b = 0; out && b < B; b++) {
        double sum = 0, cnt = 0;
        for (int64_t t = 0; t < R; t++) {
            sum += (double)m[b * R + t] * v[b * R + t];
            cnt += m[b * R + t];
        }
        out[b] = cnt > 0 ? sum / cnt : 0;
    }
    free(m);
    return out;
}
