/* lm_validate.c — greedy validation of the LM recipes and their sample
 * dumps (lm_common.h). */
#include "driver/recipes/lm/lm_common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/core/util.h"
#include "rlrt/dataproto.h"
#include "rlrt/error.h"
#include "rlrt/tensor.h"

/* The integer "level" of dataset row i, or -1 when it has none. */
static json_int_t s_row_level(const rl_dataset *ds, int64_t i)
{
    const json_t *lv = json_object_get(rl_dataset_extra(ds, i), "level");
    return json_is_integer(lv) ? json_integer_value(lv) : -1;
}

/* Per-level accuracy of the validation rows into ms (see the header). */
static int s_put_level_accuracy(const rl_dataset *ds, const float *acc, int64_t n,
                                rl_metric_set *ms)
{
    double sum[RL_LM_VAL_MAX_LEVEL + 1] = {0};
    int64_t cnt[RL_LM_VAL_MAX_LEVEL + 1] = {0};
    for (int64_t i = 0; i < n; i++) {
        json_int_t k = s_row_level(ds, i);
        if (k < 0 || k > RL_LM_VAL_MAX_LEVEL)
            continue;
        sum[k] += acc[i];
        cnt[k]++;
    }
    for (int k = 0; k <= RL_LM_VAL_MAX_LEVEL; k++) {
        char name[48];
        snprintf(name, sizeof name, "val/accuracy/level_%d", k);
        if (cnt[k] && rl_metric_set_put(ms, name, sum[k] / (double)cnt[k]))
            return rl_error_code();
    }
    return RL_OK;
}

/* The columns of a sample dump. */
static const char *const s_names[4] = {RL_DATA_PROMPT, RL_REWARD_RESPONSE, RL_DATA_GROUND_TRUTH,
                                       RL_DATA_GLOBAL_ID};
/* optional, written when present: int64, int64, double, int64 */
static const char *const s_opt[4] = {RL_ROLLOUT_ROW_VERSION, RL_LM_GUIDED, RL_LM_KL_PENALTY,
                                     RL_LM_REPLAYED};

typedef struct s_dump {
    const float *score, *acc, *fmt;
    const int32_t *len;
    const rl_column *c[4], *oc[4];
    double *adv; /* the mean advantage over each row's loss positions, or NULL */
} s_dump;

static int s_dump_open(const rl_dataproto *dp, const char *key, s_dump *d)
{
    int64_t n = rl_dataproto_rows(dp);
    memset(d, 0, sizeof *d);
    const float *f[3];
    static const char *const rows[3] = {RL_REWARD_SCORE, RL_REWARD_ACCURACY, RL_REWARD_FORMAT};
    for (int k = 0; k < 3; k++) {
        const rl_tensor *t = rl_dataproto_tensor_shaped(dp, rows[k], RL_F32, 1, (int64_t[]){n});
        if (!t)
            return rl_error_wrap(rl_error_code(), "%s", key);
        f[k] = rl_tensor_data((rl_tensor *)t);
    }
    const rl_tensor *len = rl_dataproto_tensor_shaped(dp, RL_LM_RESPONSE_LENS, RL_I32, 1, (int64_t[]){n});
    if (!len)
        return rl_error_wrap(rl_error_code(), "%s", key);
    *d = (s_dump){f[0], f[1], f[2], rl_tensor_data((rl_tensor *)len), {0}, {0}, NULL};
    for (int k = 0; k < 4; k++) {
        d->c[k] = rl_dataproto_column(dp, s_names[k]);
        if (!d->c[k] || rl_column_get_type(d->c[k]) != (k == 3 ? RL_COL_INT64 : RL_COL_STRING))
            return rl_error_set(RL_EPROTO, "%s: the samples have no %s column '%s'", key,
                                k == 3 ? "int64" : "string", s_names[k]);
        d->oc[k] = rl_dataproto_column(dp, s_opt[k]);
        if (d->oc[k] && rl_column_get_type(d->oc[k]) != (k == 2 ? RL_COL_DOUBLE : RL_COL_INT64))
            d->oc[k] = NULL;
    }
    /* the rlvr recipe dumps after its adv phase */
    if (rl_dataproto_tensor(dp, RL_ACTOR_ADVANTAGES) &&
        !(d->adv = rl_lm_row_means(dp, &rl_lm_batch_names, RL_ACTOR_ADVANTAGES)))
        return rl_error_wrap(rl_error_code(), "%s: advantages", key);
    return RL_OK;
}

/* Sample i as a JSON object (NULL: out of memory). */
static json_t *s_sample(const s_dump *d, int64_t i, int64_t step, const rl_dataset *levels)
{
    json_t *o = json_pack("{s:I, s:I}", "step", (json_int_t)step, "global_id",
                          (json_int_t)rl_column_i64(d->c[3], i));
    json_int_t level = levels ? s_row_level(levels, i) : -1;
    if (o && level >= 0)
        json_object_set_new(o, "level", json_integer(level));
    if (!o)
        return NULL;
    json_object_set_new(o, "prompt", json_string(rl_column_str(d->c[0], i)));
    json_object_set_new(o, "response", json_string(rl_column_str(d->c[1], i)));
    json_object_set_new(o, "ground_truth", json_string(rl_column_str(d->c[2], i)));
    json_object_set_new(o, "score", json_real(d->score[i]));
    json_object_set_new(o, "accuracy", json_real(d->acc[i]));
    json_object_set_new(o, "format", json_real(d->fmt[i]));
    json_object_set_new(o, "response_length", json_integer(d->len[i]));
    for (int k = 0; k < 4; k++)
        if (d->oc[k])
            json_object_set_new(o, s_opt[k], k == 2 ? json_real(rl_column_f64(d->oc[k], i))
                                                    : json_integer(rl_column_i64(d->oc[k], i)));
    if (d->adv)
        json_object_set_new(o, "advantage", json_real(d->adv[i]));
    return o;
}

int rl_lm_dump_samples(const char *dir, const char *key, int64_t step, const rl_dataproto *dp,
                       const rl_dataset *levels)
{
    s_dump d;
    int rc = s_dump_open(dp, key, &d);
    char *buf = NULL;
    size_t size = 0;
    FILE *mem = rc ? NULL : open_memstream(&buf, &size);
    if (!rc && !mem)
        rc = rl_error_set(RL_ENOMEM, "%s: out of memory", key);
    for (int64_t i = 0; !rc && i < rl_dataproto_rows(dp); i++) {
        json_t *o = s_sample(&d, i, step, levels);
        char *line = o ? json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
        if (!line || fprintf(mem, "%s\n", line) < 0)
            rc = rl_error_set(RL_ENOMEM, "%s: out of memory", key);
        free(line);
        json_decref(o);
    }
    free(d.adv);
    if (mem && fclose(mem) != 0 && !rc)
        rc = rl_error_set(RL_ENOMEM, "%s: out of memory", key);
    char path[4200];
    if (!rc && snprintf(path, sizeof path, "%s/%lld.jsonl", dir, (long long)step) >= (int)sizeof path)
        rc = rl_error_set(RL_ERANGE, "%s: path too long", key);
    if (!rc)
        rc = rl_file_write_atomic(path, buf, size);
    free(buf);
    return rc;
}

int rl_lm_job_validate(rl_lm_job *j, int64_t step, double *accuracy, double *format,
                       double *resp_len, rl_metric_set *ms)
{
    int64_t n = rl_dataset_size(j->val);
    int64_t *rows = malloc(sizeof(int64_t) * (size_t)(n ? n : 1));
    rl_dataproto *dp = rl_dataproto_new();
    if (!rows || !dp) {
        free(rows);
        rl_dataproto_free(dp);
        return rl_error_set(RL_ENOMEM, "validation: out of memory");
    }
    for (int64_t i = 0; i < n; i++)
        rows[i] = i;
    int rc = rl_dataset_fill(j->val, rows, n, dp);
    free(rows);
    if (!rc)
        rc = rl_lm_job_encode_prompts(j, dp);
    int64_t shape[1] = {n};
    if (!rc && !rl_dataproto_new_tensor(dp, RL_LM_ROW_SEEDS, RL_I64, 1, shape))
        rc = rl_error_code();
    double g, r;
    if (!rc)
        rc = rl_lm_job_rollout(j, &dp, 1, &g, &r);
    const rl_tensor *acc = NULL, *fmt = NULL, *len = NULL;
    if (!rc && (!(acc = rl_dataproto_tensor_shaped(dp, RL_REWARD_ACCURACY, RL_F32, 1, NULL)) ||
                !(fmt = rl_dataproto_tensor_shaped(dp, RL_REWARD_FORMAT, RL_F32, 1, NULL)) ||
                !(len = rl_dataproto_tensor_shaped(dp, RL_LM_RESPONSE_LENS, RL_I32, 1, NULL))))
        rc = rl_error_code();
    if (!rc) {
        const float *pa = rl_tensor_data(acc), *pf = rl_tensor_data(fmt);
        const int32_t *pl = rl_tensor_data(len);
        double a = 0, f = 0, l = 0;
        for (int64_t i = 0; i < n; i++) {
            a += pa[i];
            f += pf[i];
            l += pl[i];
        }
        *accuracy = n ? a / n : 0;
        *format = n ? f / n : 0;
        *resp_len = n ? l / n : 0;
        if (ms)
            rc = s_put_level_accuracy(j->val, pa, n, ms);
        if (!rc && j->val_dump_dir && *j->val_dump_dir)
            rc = rl_lm_dump_samples(j->val_dump_dir,
                                    RL_CFG_PATH(&rl_lm_trainer_section, rl_lm_trainer_config,
                                                validation_data_dir),
                                    step, dp, j->val);
    }
    rl_dataproto_free(dp);
    return rc ? rl_error_wrap(rc, "validation") : RL_OK;
}
