/* rlvr_guidance.c — off-policy guidance of the rlvr recipe (see rlvr_guidance.h). */
#include "driver/recipes/lm/rlvr_guidance.h"

#include <stdlib.h>
#include <string.h>

#include "common/algo/advantage.h"
#include "rlrt/error.h"
#include "rlrt/dtype.h"
#include "common/nn/models/lm/lm_model.h"
#include "rlrt/tensor.h"
#include "rlrt/dataproto.h"
#include "rlrt/config.h"
#include "common/data/data.h"
#include "common/metrics/metrics.h"

/* Column of the guided rows' reference solutions (only inside this module). */
#define S_TEXT "guidance_text"

/* The reference solution of the training row with global id `id`, or NULL
 * + a message. */
static const char *s_solution(const rl_rlvr_guidance_config *g, const rl_dataset *train, int64_t id)
{
    int64_t row = rl_dataset_row_of(train, id);
    if (row < 0) {
        rl_error_set(RL_ENOTFOUND, "guidance: no training row with global_id %lld", (long long)id);
        return NULL;
    }
    const char *s = json_string_value(json_object_get(rl_dataset_extra(train, row), g->field));
    if (!s)
        rl_error_set(RL_ENOTFOUND, "guidance: training row %lld (line %lld) has no string field "
                                   "'%s' (%s)", (long long)id,
                     (long long)rl_dataset_line(train, row), g->field,
                     RL_CFG_PATH(&rl_rlvr_guidance_section, rl_rlvr_guidance_config, field));
    return s;
}

/* The rows to replace: the last g->samples rows (by row order) of each
 * group none of whose samples is correct. rows (B) receives them in row
 * order, *k their count, *groups the groups guided, *all_groups every group. */
static int s_pick(const rl_rlvr_guidance_config *g, const rl_dataproto *dp, int64_t *rows, int64_t *k,
                  int64_t *groups, int64_t *all_groups)
{
    int64_t B = rl_dataproto_rows(dp), G = 0;
    const float *acc = rl_lm_rows_f32(dp, RL_REWARD_ACCURACY);
    int64_t *gid = acc ? rl_lm_column_i64(dp, RL_DATA_GLOBAL_ID) : NULL;
    int64_t *perm = malloc(sizeof(int64_t) * (size_t)(B + 1)),
            *starts = malloc(sizeof(int64_t) * (size_t)(B + 2));
    uint8_t *take = calloc((size_t)(B + 1), 1);
    int rc = !gid ? rl_error_code()
             : (!perm || !starts || !take) ? rl_error_set(RL_ENOMEM, "guidance: out of memory")
                                           : rl_group_runs(gid, B, perm, starts, &G);
    *k = *groups = 0;
    for (int64_t q = 0; !rc && q < G; q++) {
        int64_t a = starts[q], e = starts[q + 1];
        int none = 1;
        for (int64_t i = a; i < e; i++)
            none &= !(acc[perm[i]] > 0);
        if (!none || e - a <= g->samples) /* a group must keep samples of the policy */
            continue;
        for (int64_t i = e - g->samples; i < e; i++) /* perm is sorted by (id, row) */
            take[perm[i]] = 1;
        ++*groups;
    }
    for (int64_t b = 0; !rc && b < B; b++)
        if (take[b])
            rows[(*k)++] = b;
    *all_groups = G;
    free(gid);
    free(perm);
    free(starts);
    free(take);
    return rc;
}

/* The guided rows as a new sample batch: prompts and data columns of the
 * rows they replace, the solutions' tokens, the policy's log-probs and
 * entropies of them, their text and scores. */
static rl_dataproto *s_guided_samples(const rl_rlvr_guidance_config *g, rl_lm_job *j,
                                      const rl_dataproto *sub)
{
    static const char *const keep_t[2] = {RL_LM_PROMPTS, RL_LM_PROMPT_LENS};
    static const char *const keep_c[2] = {RL_DATA_GROUND_TRUTH, RL_DATA_SOURCE};
    int64_t k = rl_dataproto_rows(sub);
    const rl_column *ids = rl_dataproto_column(sub, RL_DATA_GLOBAL_ID);
    if (!ids || rl_column_get_type(ids) != RL_COL_INT64) {
        rl_error_set(RL_EPROTO, "guidance: the batch has no int64 column '%s'", RL_DATA_GLOBAL_ID);
        return NULL;
    }
    rl_dataproto *fresh = rl_dataproto_request(sub, keep_t, 2, keep_c, 2, NULL);
    rl_column *text = fresh ? rl_dataproto_new_column(fresh, S_TEXT, RL_COL_STRING) : NULL;
    int rc = text ? RL_OK : rl_error_code();
    for (int64_t i = 0; !rc && i < k; i++) {
        const char *s = s_solution(g, j->train, rl_column_i64(ids, i));
        rc = s ? rl_column_set_str(text, i, s) : rl_error_code();
    }
    rl_column *mark = rc ? NULL : rl_dataproto_new_column(fresh, RL_LM_GUIDED, RL_COL_INT64);
    if (!rc && !mark)
        rc = rl_error_code();
    for (int64_t i = 0; !rc && i < k; i++)
        rc = rl_column_set_i64(mark, i, 1);
    if (!rc)
        rc = rl_lm_job_encode_responses(j, fresh, S_TEXT);
    if (!rc)
        rc = rl_dataproto_remove(fresh, S_TEXT);
    /* the policy's log-probs and entropies of the solutions' tokens */
    if (!rc && (rc = rl_lm_job_log_prob(j, fresh, RL_ACTOR_WHICH_POLICY, RL_LM_RESPONSE_LOGP,
                                        RL_LM_RESPONSE_ENTROPY)))
        rc = rl_error_wrap(rc, "guidance");
    double reward_s;
    if (!rc)
        rc = rl_lm_job_score(j, &fresh, &reward_s);
    if (rc) {
        rl_dataproto_free(fresh);
        return NULL;
    }
    return fresh;
}

/* Replaces rows[0..k) of *dp (in row order) by their guided samples,
 * shaped by `shape`; the rows keep their places. *acc_sum: the reward's
 * accuracy summed over the guided rows. */
static int s_swap_in(const rl_rlvr_guidance_config *g, rl_lm_job *j, rl_dataproto **dp,
                     const int64_t *rows, int64_t k, rl_rlvr_shape_fn shape, void *shape_ctx,
                     double *acc_sum)
{
    int64_t B = rl_dataproto_rows(*dp), nr = 0, ng = 0;
    int64_t *order = malloc(sizeof(int64_t) * (size_t)(B + 1));
    uint8_t *is_g = calloc((size_t)B + 1, 1);
    rl_dataproto *sub = NULL, *fresh = NULL, *rest = NULL, *merged = NULL;
    int rc = order && is_g ? RL_OK : rl_error_set(RL_ENOMEM, "guidance: out of memory");
    /* the rows that stay, then the guided ones; order puts them back */
    for (int64_t i = 0; !rc && i < k; i++)
        is_g[rows[i]] = 1;
    for (int64_t b = 0; !rc && b < B; b++)
        if (!is_g[b])
            order[nr++] = b;
    if (!rc && !(rest = rl_dataproto_index(*dp, order, nr)))
        rc = rl_error_code();
    if (!rc && !(sub = rl_dataproto_index(*dp, rows, k)))
        rc = rl_error_code();
    if (!rc && !(fresh = s_guided_samples(g, j, sub)))
        rc = rl_error_code();
    /* the sample's keys come from fresh; the rest (version, seeds, ids) stays */
    for (int q = 0; !rc && q < rl_dataproto_tensor_count(fresh); q++)
        rl_dataproto_remove(sub, rl_dataproto_tensor_name(fresh, q));
    for (int q = 0; !rc && q < rl_dataproto_column_count(fresh); q++)
        rl_dataproto_remove(sub, rl_column_name(rl_dataproto_column_at(fresh, q)));
    if (!rc && rl_dataproto_tensor(sub, RL_LM_RESPONSE_MASK))
        rc = rl_dataproto_remove(sub, RL_LM_RESPONSE_MASK); /* rebuilt by shape */
    if (!rc && rl_dataproto_tensor(sub, RL_LM_SAMPLED_MASK))
        rc = rl_dataproto_remove(sub, RL_LM_SAMPLED_MASK); /* likewise */
    if (!rc) {
        rc = rl_dataproto_union_into(&sub, fresh);
        fresh = NULL;
    }
    if (!rc && shape)
        rc = shape(shape_ctx, sub);
    rl_dataproto *items[2] = {rest, sub};
    if (!rc && !(merged = rl_dataproto_concat(items, 2)))
        rc = rl_error_wrap(rl_error_code(), "guidance: the guided rows against the batch");
    for (int64_t b = 0; !rc && b < B; b++) /* row b of the result: its place in merged */
        order[b] = is_g[b] ? nr + ng++ : b - ng;
    if (!rc)
        rc = rl_dataproto_reorder(merged, order);
    const float *acc = rc ? NULL : rl_lm_rows_f32(sub, RL_REWARD_ACCURACY);
    *acc_sum = 0;
    for (int64_t i = 0; acc && i < k; i++)
        *acc_sum += acc[i];
    if (!rc) {
        rl_dataproto_free(*dp);
        *dp = merged;
        merged = NULL;
    }
    rl_dataproto_free(fresh);
    rl_dataproto_free(sub);
    rl_dataproto_free(rest);
    rl_dataproto_free(merged);
    free(is_g);
    free(order);
    return rc;
}

int rl_rlvr_guidance_apply(const rl_rlvr_guidance_config *g, rl_lm_job *j, rl_dataproto **dp,
                           rl_rlvr_shape_fn shape, void *shape_ctx, int64_t *guided,
                           rl_metric_set *ms)
{
    int64_t n_guided = 0;
    if (guided)
        *guided = 0;
    if (!g->enable)
        return RL_OK;
    int64_t B = rl_dataproto_rows(*dp), k = 0, G = 0;
    if (!rl_dataproto_column(*dp, RL_LM_GUIDED)) { /* every row says whether it was guided */
        rl_column *c = rl_dataproto_new_column(*dp, RL_LM_GUIDED, RL_COL_INT64);
        if (!c)
            return rl_error_code();
        for (int64_t b = 0; b < B; b++)
            if (rl_column_set_i64(c, b, 0))
                return rl_error_code();
    }
    int64_t *rows = malloc(sizeof(int64_t) * (size_t)(B + 1));
    int rc = rows ? s_pick(g, *dp, rows, &k, &n_guided, &G)
                  : rl_error_set(RL_ENOMEM, "guidance: out of memory");
    double acc_sum = 0;
    if (!rc && k > 0 && !(rc = s_swap_in(g, j, dp, rows, k, shape, shape_ctx, &acc_sum)) && ms)
        rl_metric_set_put(ms, "batch/guided_accuracy", acc_sum / (double)k);
    if (!rc && ms)
        rl_metric_set_put(ms, "batch/guided_groups", G ? (double)n_guided / (double)G : 0);
    free(rows);
    if (!rc && guided)
        *guided = n_guided;
    return rc;
}
