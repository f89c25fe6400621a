/* rlvr_aepo.c — ARES/AEPO glue of the rlvr recipe (see rlvr_aepo.h). */
#include "driver/recipes/lm/rlvr_aepo.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rlrt/error.h"
#include "rlrt/log.h"
#include "rlrt/dtype.h"
#include "common/nn/models/lm/lm_model.h"
#include "rlrt/tensor.h"
#include "rlrt/dataproto.h"
#include "common/algo/lm/aepo.h"
#include "common/schema/rlvr.h"
#include "rlrt/config.h"
#include "common/metrics/metrics.h"

int rl_rlvr_aepo_open(rl_rlvr_aepo *a, const rl_config *job, int *enabled)
{
    memset(a, 0, sizeof *a);
    const rl_rlvr_aepo_config *c = rl_config_section_get(job, &rl_rlvr_aepo_section);
    if (!c)
        return rl_error_code();
    if (!(*enabled = c->enable))
        return RL_OK;
    a->percentile = c->percentile;
    a->window = c->window_size;
    a->dynamic_kl = c->dynamic_kl;
    a->bootstrap = c->bootstrap;
    a->bootstrap_size = c->bootstrap_size;
    rl_aepo_config cfg;
    rl_aepo_config_default(&cfg);
    cfg.window = (int)a->window;
    cfg.percentile = a->percentile;
    cfg.tau_decay = c->tau_decay;
    a->st = rl_aepo_state_new(&cfg);
    return a->st ? RL_OK
                 : RL_CFG_ERROR(job, &rl_rlvr_aepo_section, rl_rlvr_aepo_config, enable,
                                rl_error_code(), "%s", rl_error_message());
}

static void s_step_free(rl_rlvr_aepo *a)
{
    free(a->bucket);
    free(a->flags);
    a->bucket = NULL;
    a->flags = NULL;
}

void rl_rlvr_aepo_close(rl_rlvr_aepo *a)
{
    s_step_free(a);
    rl_aepo_state_free(a->st);
    memset(a, 0, sizeof *a);
}

json_t *rl_rlvr_aepo_save(const rl_rlvr_aepo *a)
{
    char *text = rl_aepo_state_to_json(a->st);
    json_t *j = json_string(text ? text : "");
    free(text);
    return j;
}

int rl_rlvr_aepo_restore(rl_rlvr_aepo *a, const json_t *saved, const char *where)
{
    const char *text = json_string_value(saved);
    if (!text || !*text)
        return rl_error_set(RL_EPROTO, "%s: no AEPO state (was the run started with %s=false?)",
                            where, RL_CFG_PATH(&rl_rlvr_aepo_section, rl_rlvr_aepo_config, enable));
    rl_aepo_state *st = rl_aepo_state_from_json(text);
    if (!st)
        return rl_error_wrap(rl_error_code(), "AEPO state of %s", where);
    rl_aepo_state_free(a->st);
    a->st = st;
    return RL_OK;
}

/* *out: (B) 1 for the rows off-policy guidance put in (rlvr_guidance.h),
 * or NULL when the batch has none: AEPO's statistics (τ, the per-prompt
 * accuracy and HWE counts, the entropy reward) are about the policy's own
 * samples. */
static int s_guided_rows(const rl_dataproto *dp, int64_t B, uint8_t **out)
{
    *out = NULL;
    const rl_column *c = rl_dataproto_column(dp, RL_LM_GUIDED);
    if (!c || rl_column_get_type(c) != RL_COL_INT64)
        return RL_OK;
    uint8_t *g = calloc((size_t)(B > 0 ? B : 1), 1);
    if (!g)
        return rl_error_set(RL_ENOMEM, "aepo: out of memory");
    int any = 0;
    for (int64_t b = 0; b < B; b++)
        any |= g[b] = rl_column_i64(c, b) != 0;
    if (any)
        *out = g;
    else
        free(g);
    return RL_OK;
}

/* HWE flags (B, R) and counts (B) of a scored batch; folds the batch's
 * percentiles into τ first (not those of the guided rows, NULL: none). */
static int s_hwe(rl_rlvr_aepo *a, const rl_dataproto *dp, const uint8_t *guided, uint8_t *flags,
                 float *counts, rl_metric_set *ms)
{
    int64_t B, R;
    float *mask = rl_lm_mask(dp, &rl_lm_batch_names, RL_LM_MASK_LOSS, &B, &R);
    const rl_tensor *Ht = mask ? rl_dataproto_tensor_shaped(dp, RL_LM_RESPONSE_ENTROPY, RL_F32, 2,
                                                            (int64_t[]){-1, R})
                               : NULL;
    size_t nt = (size_t)(B * R > 0 ? B * R : 1), nb = (size_t)(B > 0 ? B : 1);
    float *win = malloc(sizeof(float) * nt), *pct = malloc(sizeof(float) * nb);
    uint8_t *wv = malloc(nt), *has = malloc(nb);
    double median = 0, tau = 0;
    int rc = !Ht ? rl_error_code()
             : (!win || !pct || !wv || !has) ? rl_error_set(RL_ENOMEM, "aepo: out of memory")
                                              : RL_OK;
    if (!rc)
        rc = rl_aepo_window_entropy(rl_tensor_data(Ht), mask, B, R, (int)a->window, win, wv);
    if (!rc)
        rc = rl_aepo_window_percentile(win, wv, B, R, a->percentile, pct, has);
    for (int64_t b = 0; !rc && guided && b < B; b++)
        has[b] = guided[b] ? 0 : has[b];
    if (!rc)
        rc = rl_aepo_threshold_update(a->st, pct, has, B, &median);
    if (!rc && rl_aepo_threshold_get(a->st, &tau) != RL_OK) { /* no complete window yet */
        memset(flags, 0, (size_t)(B * R));
        memset(counts, 0, sizeof(float) * (size_t)B);
    } else if (!rc) {
        rc = rl_aepo_hwe(win, wv, NULL, B, R, tau, flags, counts);
    }
    if (!rc && ms) {
        double c = 0;
        for (int64_t b = 0; b < B; b++)
            c += counts[b];
        rl_metric_set_put(ms, "aepo/tau", tau);
        rl_metric_set_put(ms, "aepo/hwe_count_mean", B ? c / B : 0);
    }
    free(win);
    free(wv);
    free(pct);
    free(has);
    free(mask);
    return rc;
}

int rl_rlvr_aepo_bootstrap(rl_rlvr_aepo *a, int64_t batch, rl_rlvr_round_fn gen, void *ctx)
{
    int64_t done = 0;
    int rc = RL_OK;
    for (int64_t round = 0; !rc && done < a->bootstrap_size; round++) {
        rl_dataproto *dp = NULL;
        int64_t n = batch < a->bootstrap_size - done ? batch : a->bootstrap_size - done;
        if ((rc = gen(ctx, round, n, &dp)))
            break;
        int64_t B = rl_dataproto_rows(dp);
        const rl_tensor *resp = rl_dataproto_tensor_shaped(dp, RL_LM_RESPONSES, RL_I32, 2, NULL);
        int64_t R = resp ? resp->shape[1] : 0;
        uint8_t *flags = malloc((size_t)(B * R > 0 ? B * R : 1));
        float *counts = malloc(sizeof(float) * (size_t)(B > 0 ? B : 1));
        int64_t *gid = rl_lm_column_i64(dp, RL_DATA_GLOBAL_ID);
        const float *acc = rl_lm_rows_f32(dp, RL_REWARD_ACCURACY);
        rc = !resp || !gid || !acc ? rl_error_code()
             : (!flags || !counts) ? rl_error_set(RL_ENOMEM, "aepo: out of memory")
                                   : RL_OK;
        if (!rc)
            rc = s_hwe(a, dp, NULL, flags, counts, NULL); /* no guidance in the bootstrap */
        if (!rc)
            rc = rl_aepo_bootstrap_add(a->st, gid, acc, counts, B);
        free(flags);
        free(counts);
        free(gid);
        rl_dataproto_free(dp);
        done += n;
    }
    rl_aepo_batch_stats stats;
    if (!rc)
        rc = rl_aepo_bootstrap_finish(a->st, &stats);
    if (!rc)
        rl_log_info("aepo bootstrap over %lld prompts: %lld easy, %lld medium, %lld hard ids",
                    (long long)done, (long long)stats.n_ids[0], (long long)stats.n_ids[1],
                    (long long)stats.n_ids[2]);
    return rc ? rl_error_wrap(rc, "aepo bootstrap") : RL_OK;
}

/* α, λ, targets and per-bucket counts of this step. */
static void s_bucket_metrics(const rl_rlvr_aepo *a, const rl_aepo_batch_stats *stats,
                             rl_metric_set *ms)
{
    for (int k = 0; k < RL_AEPO_NBUCKETS; k++) {
        char key[64];
        int has;
        const char *name = rl_aepo_bucket_name(k);
        snprintf(key, sizeof key, "aepo/alpha_%s", name);
        rl_metric_set_put(ms, key, rl_aepo_alpha(a->st, k));
        snprintf(key, sizeof key, "aepo/target_%s", name);
        rl_metric_set_put(ms, key, rl_aepo_target(a->st, k, &has));
        if (stats->n_ids[k] > 0) {
            snprintf(key, sizeof key, "aepo/hwe_%s_mean", name);
            rl_metric_set_put(ms, key, stats->mean_hwe[k]);
        }
        snprintf(key, sizeof key, "aepo/rows_%s", name);
        rl_metric_set_put(ms, key, (double)stats->n_rows[k]);
    }
}

/* rl_aepo_update over the policy's own rows only; a guided row takes the
 * bucket of its prompt (every guided group keeps samples of the policy). */
static int s_update_policy_rows(rl_rlvr_aepo *a, const uint8_t *guided, const int64_t *gid,
                                const float *acc, const float *counts, int64_t B,
                                rl_aepo_batch_stats *stats)
{
    size_t nb = (size_t)(B > 0 ? B : 1);
    int64_t *g = malloc(sizeof(int64_t) * nb), *row = malloc(sizeof(int64_t) * nb), n = 0;
    float *ac = malloc(sizeof(float) * nb), *hc = malloc(sizeof(float) * nb);
    int8_t *bk = malloc(nb);
    int rc = g && row && ac && hc && bk ? RL_OK : rl_error_set(RL_ENOMEM, "aepo: out of memory");
    for (int64_t b = 0; !rc && b < B; b++)
        if (!guided[b]) {
            g[n] = gid[b], ac[n] = acc[b], hc[n] = counts[b], row[n] = b;
            n++;
        }
    if (!rc)
        rc = rl_aepo_update(a->st, g, ac, hc, n, bk, stats);
    for (int64_t i = 0; !rc && i < n; i++)
        a->bucket[row[i]] = bk[i];
    for (int64_t b = 0; !rc && b < B; b++) {
        if (!guided[b])
            continue;
        int64_t i = 0;
        while (i < n && g[i] != gid[b])
            i++;
        if (i == n)
            rc = rl_error_set(RL_ESTATE, "aepo: guided row %lld has no sample of the policy in "
                                         "its group", (long long)b);
        else
            a->bucket[b] = bk[i];
    }
    free(g);
    free(row);
    free(ac);
    free(hc);
    free(bk);
    return rc;
}

int rl_rlvr_aepo_shape(rl_rlvr_aepo *a, rl_dataproto *dp, rl_metric_set *ms)
{
    s_step_free(a);
    int64_t B = rl_dataproto_rows(dp);
    const rl_tensor *resp = rl_dataproto_tensor_shaped(dp, RL_LM_RESPONSES, RL_I32, 2, NULL);
    int64_t R = resp ? resp->shape[1] : 0;
    size_t nb = (size_t)(B > 0 ? B : 1);
    a->flags = malloc((size_t)(B * R > 0 ? B * R : 1));
    a->bucket = malloc(nb);
    float *counts = malloc(sizeof(float) * nb), *ent = malloc(sizeof(float) * nb);
    int64_t *gid = rl_lm_column_i64(dp, RL_DATA_GLOBAL_ID);
    const float *acc = rl_lm_rows_f32(dp, RL_REWARD_ACCURACY);
    float *score = rl_lm_rows_f32(dp, RL_REWARD_SCORE);
    int rc = !resp || !gid || !acc || !score ? rl_error_code()
             : (!a->flags || !a->bucket || !counts || !ent)
                 ? rl_error_set(RL_ENOMEM, "aepo: out of memory")
                 : RL_OK;
    rl_aepo_batch_stats stats;
    uint8_t *guided = NULL;
    a->rows = B;
    if (!rc)
        rc = s_guided_rows(dp, B, &guided);
    if (!rc)
        rc = s_hwe(a, dp, guided, a->flags, counts, ms);
    if (!rc && !guided)
        rc = rl_aepo_update(a->st, gid, acc, counts, B, a->bucket, &stats);
    else if (!rc)
        rc = s_update_policy_rows(a, guided, gid, acc, counts, B, &stats);
    if (!rc)
        rc = rl_aepo_entropy_reward(a->st, a->bucket, acc, counts, B, ent, NULL);
    for (int64_t b = 0; !rc && guided && b < B; b++)
        ent[b] = guided[b] ? 0.0f : ent[b]; /* no entropy bonus on text it did not write */
    free(guided);
    double es = 0;
    for (int64_t b = 0; !rc && b < B; b++) {
        score[b] += ent[b];
        es += ent[b];
    }
    if (!rc) {
        rl_metric_set_put(ms, "aepo/entropy_reward_mean", B ? es / B : 0);
        s_bucket_metrics(a, &stats, ms);
    }
    free(counts);
    free(ent);
    free(gid);
    if (rc)
        s_step_free(a);
    return rc;
}

int rl_rlvr_aepo_kl(rl_rlvr_aepo *a, float *kl, const float *mask, int64_t B, int64_t R,
                    double kl_coef, int kl_in_reward, rl_metric_set *ms)
{
    if (!a->bucket || !a->flags)
        return rl_error_set(RL_ESTATE, "aepo: the KL step needs a shaped batch");
    if (B != a->rows)
        return rl_error_set(RL_ESTATE, "aepo: the KL step has %lld rows, the shaped batch %lld",
                            (long long)B, (long long)a->rows);
    double klb[RL_AEPO_NBUCKETS];
    int rc = rl_aepo_lambda_update(a->st, kl, mask, a->bucket, B, R, klb);
    for (int k = 0; !rc && k < RL_AEPO_NBUCKETS; k++) {
        char key[64];
        snprintf(key, sizeof key, "aepo/lambda_%s", rl_aepo_bucket_name(k));
        rl_metric_set_put(ms, key, rl_aepo_lambda(a->st, k));
        snprintf(key, sizeof key, "aepo/kl_%s", rl_aepo_bucket_name(k));
        if (klb[k] == klb[k]) /* NaN: no row of the bucket */
            rl_metric_set_put(ms, key, klb[k]);
    }
    if (!rc && a->dynamic_kl && kl_in_reward && kl_coef > 0) {
        float *w = malloc(sizeof(float) * (size_t)(B * R > 0 ? B * R : 1));
        rc = w ? rl_aepo_kl_weights(a->st, a->flags, mask, a->bucket, B, R, kl_coef, -1, w)
               : rl_error_set(RL_ENOMEM, "aepo: out of memory");
        for (int64_t i = 0; !rc && i < B * R; i++)
            kl[i] *= w[i] / (float)kl_coef;
        free(w);
    }
    return rc;
}
