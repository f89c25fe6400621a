/* lm_shape.c — overlong shaping, online filtering and the batch of whole
 * groups (common/batch/lm_shape.h). */
#include "common/batch/lm_shape.h"

#include <stdlib.h>
#include <string.h>

#include "common/algo/filter.h"
#include "common/algo/offpolicy.h"
#include "rlrt/error.h"
#include "rlrt/tensor.h"

/* The positions the policy sampled, kept as L->sampled_mask before whole
 * rows leave L->loss_mask (made from the lengths when absent), then the
 * truncated rows zeroed there. */
static int s_mask_cut(rl_dataproto *dp, const rl_lm_names *L, const uint8_t *cut, int64_t B,
                      int64_t R)
{
    rl_tensor *mt = (rl_tensor *)rl_dataproto_tensor(dp, L->loss_mask);
    if (!mt) {
        float *m = rl_lm_mask(dp, L, RL_LM_MASK_LOSS, &B, &R);
        rl_tensor *nt = m ? rl_dataproto_new_tensor(dp, L->loss_mask, RL_F32, 2, (int64_t[]){B, R})
                          : NULL;
        if (nt)
            memcpy(rl_tensor_data(nt), m, sizeof(float) * (size_t)(B * R));
        free(m);
        if (!(mt = nt))
            return rl_error_code();
    }
    if (!rl_dataproto_tensor(dp, L->sampled_mask)) {
        rl_tensor *st = rl_dataproto_new_tensor(dp, L->sampled_mask, RL_F32, 2, (int64_t[]){B, R});
        if (!st)
            return rl_error_code();
        memcpy(rl_tensor_data(st), rl_tensor_data(mt), sizeof(float) * (size_t)(B * R));
    }
    for (int64_t b = 0; b < B; b++)
        if (cut[b])
            memset((float *)rl_tensor_data(mt) + b * R, 0, sizeof(float) * (size_t)R);
    return RL_OK;
}

int rl_lm_overlong_shape(rl_dataproto *dp, const rl_lm_names *L, const rl_lm_overlong *o,
                         rl_metric_set *ms)
{
    if (!o->filter && !o->buffer)
        return RL_OK;
    const rl_tensor *t = rl_dataproto_tensor_shaped(dp, L->responses, RL_I32, 2, NULL);
    const rl_tensor *l = t ? rl_dataproto_tensor_shaped(dp, L->response_lens, RL_I32, 1, NULL) : NULL;
    float *score = l ? rl_lm_rows_f32(dp, L->score) : NULL;
    if (!score)
        return rl_error_code();
    int64_t B = t->shape[0], R = t->shape[1], cut_n = 0;
    const int32_t *lens = rl_tensor_data((rl_tensor *)l);
    uint8_t *cut = malloc((size_t)(B > 0 ? B : 1));
    float *pen = malloc(sizeof(float) * (size_t)(B > 0 ? B : 1));
    int rc = cut && pen ? RL_OK : rl_error_set(RL_ENOMEM, "overlong: out of memory");
    if (!rc)
        rc = rl_overlong_truncated(rl_tensor_data((rl_tensor *)t), lens, B, R, &o->eos, o->eos >= 0,
                                   cut, &cut_n);
    if (!rc && o->buffer &&
        !(rc = rl_overlong_penalty(lens, B, R, o->buffer_len, o->factor, pen))) {
        double sum = 0;
        for (int64_t b = 0; b < B; b++) {
            score[b] += pen[b];
            sum += pen[b];
        }
        if (ms)
            rl_metric_set_put(ms, "batch/overlong_penalty_mean", B ? sum / B : 0);
    }
    if (!rc && o->filter)
        rc = s_mask_cut(dp, L, cut, B, R);
    if (!rc && ms)
        rl_metric_set_put(ms, "batch/truncated_frac", B ? (double)cut_n / (double)B : 0);
    free(cut);
    free(pen);
    return rc;
}

int rl_lm_mask_spans(rl_dataproto *dp, const rl_lm_names *L, int32_t begin, int32_t end)
{
    const rl_tensor *t = rl_dataproto_tensor_shaped(dp, L->responses, RL_I32, 2, NULL);
    int64_t B = t ? t->shape[0] : 0, R = t ? t->shape[1] : 0;
    rl_tensor *mt = t ? rl_dataproto_new_tensor(dp, L->loss_mask, RL_F32, 2, (int64_t[]){B, R}) : NULL;
    if (!mt)
        return rl_error_code();
    const int32_t *ids = rl_tensor_data((rl_tensor *)t);
    float *m = rl_tensor_data(mt);
    for (int64_t b = 0; b < B; b++) {
        int in = 0;
        for (int64_t k = 0; k < R; k++) {
            int32_t id = ids[b * R + k];
            if (id == begin)
                in = 1;
            m[b * R + k] = in ? 0.0f : 1.0f;
            if (id == end)
                in = 0;
        }
    }
    return RL_OK;
}

int rl_lm_filter_groups(rl_dataproto **dp, const rl_lm_names *L, const rl_lm_filter *f,
                        int64_t *kept_groups, rl_dataproto **rejected)
{
    int64_t B = rl_dataproto_rows(*dp);
    const float *m = rl_lm_rows_f32(*dp, f->key);
    int64_t *group = m ? rl_lm_column_i64(*dp, L->group) : NULL;
    int64_t *rows = malloc(sizeof(int64_t) * (size_t)(B > 0 ? B : 1));
    uint8_t *keep = malloc((size_t)(B > 0 ? B : 1));
    int rc = !m ? rl_error_wrap(rl_error_code(), "%s", f->what)
             : !group ? rl_error_code()
             : (!rows || !keep) ? rl_error_set(RL_ENOMEM, "online filtering: out of memory")
                                : RL_OK;
    int64_t kept = 0, n = 0;
    rl_filter_result res;
    if (!rc && f->std_mode) /* DAPO's dynamic sampling: groups whose metric varies */
        rc = rl_filter_groups_std(m, group, B, keep, &kept, NULL);
    else if (!rc) /* the kept rows are read off `keep` below */
        rc = rl_filter_groups(m, group, B, f->low, f->high, keep, NULL, &res);
    for (int64_t b = 0; !rc && b < B; b++)
        if (keep[b])
            rows[n++] = b;
    if (!rc && rejected) { /* the other groups' rows, in order */
        int64_t k = 0;
        for (int64_t b = 0; b < B; b++)
            if (!keep[b])
                group[k++] = b;
        rl_dataproto_free(*rejected);
        if (!(*rejected = rl_dataproto_index(*dp, group, k)))
            rc = rl_error_code();
    }
    rl_dataproto *kept_dp = rc ? NULL : rl_dataproto_index(*dp, rows, n);
    free(group);
    free(rows);
    free(keep);
    if (rc || !kept_dp)
        return rc ? rc : rl_error_code();
    rl_dataproto_free(*dp);
    *dp = kept_dp;
    *kept_groups = n / f->n;
    return RL_OK;
}

/* *acc ++ part (part stolen; *acc replaced, or part itself when empty). */
static int s_append(rl_dataproto **acc, rl_dataproto *part)
{
    if (!*acc) {
        *acc = part;
        return RL_OK;
    }
    rl_dataproto *items[2] = {*acc, part};
    rl_dataproto *cat = rl_dataproto_concat(items, 2);
    rl_dataproto_free(part);
    if (!cat)
        return rl_error_code();
    rl_dataproto_free(*acc);
    *acc = cat;
    return RL_OK;
}

int rl_lm_group_batch_add(rl_lm_group_batch *g, rl_dataproto *part, int64_t groups,
                          rl_dataproto *rejected)
{
    int rc = rejected ? s_append(&g->spare, rejected) : RL_OK;
    if (!rc && groups > g->want - g->groups) { /* whole groups, up to the batch */
        rl_dataproto *cut = rl_dataproto_slice(part, 0, (g->want - g->groups) * g->n);
        rl_dataproto_free(part);
        part = cut;
        groups = g->want - g->groups;
        rc = part ? RL_OK : rl_error_code();
    }
    if (!rc) {
        rc = s_append(&g->batch, part);
        part = NULL;
    }
    rl_dataproto_free(part);
    if (!rc)
        g->groups += groups;
    return rc;
}

int rl_lm_group_batch_fill(rl_lm_group_batch *g, int64_t *filled)
{
    int64_t need = g->want - g->groups;
    *filled = 0;
    if (!g->spare || rl_dataproto_rows(g->spare) < need * g->n)
        return RL_OK;
    rl_dataproto *part = rl_dataproto_slice(g->spare, 0, need * g->n);
    int rc = part ? s_append(&g->batch, part) : rl_error_code();
    if (!rc) {
        g->groups = g->want;
        *filled = need;
    }
    return rc;
}

void rl_lm_group_batch_drop_spare(rl_lm_group_batch *g)
{
    rl_dataproto_free(g->spare);
    g->spare = NULL;
}
