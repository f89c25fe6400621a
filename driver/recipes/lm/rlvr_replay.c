/* rlvr_replay.c — hard-prompt replay of the rlvr recipe (see rlvr_replay.h). */
#include "driver/recipes/lm/rlvr_replay.h"

#include <stdlib.h>
#include <string.h>

#include "common/algo/advantage.h"
#include "common/schema/lm.h"
#include "common/schema/rlvr.h"
#include "rlrt/error.h"
#include "rlrt/dataproto.h"
#include "rlrt/config.h"
#include "common/data/data.h"
#include "common/metrics/metrics.h"

int rl_rlvr_replay_open(rl_rlvr_replay *q, const rl_config *job, const rl_dataset *train)
{
    memset(q, 0, sizeof *q);
    const rl_rlvr_replay_config *c = rl_config_section_get(job, &rl_rlvr_replay_section);
    if (!c)
        return rl_error_code();
    if (!(q->enable = c->enable))
        return RL_OK;
    q->below = c->below;
    q->times = c->times;
    q->per_step = c->per_step;
    q->capacity = c->capacity;
    q->train = train;
    q->row = malloc(sizeof(int64_t) * (size_t)q->capacity);
    q->done = malloc(sizeof(int64_t) * (size_t)q->capacity);
    if (!q->row || !q->done)
        return rl_error_set(RL_ENOMEM, "hard_replay: out of memory (capacity %lld)",
                            (long long)q->capacity);
    return RL_OK;
}

void rl_rlvr_replay_close(rl_rlvr_replay *q)
{
    free(q->row);
    free(q->done);
    memset(q, 0, sizeof *q);
}

/* Appends (row, done); the oldest entry leaves when the queue is full. */
static void s_push(rl_rlvr_replay *q, int64_t row, int64_t done)
{
    if (q->len == q->capacity) {
        q->head = (q->head + 1) % q->capacity;
        q->len--;
        q->n_dropped++;
    }
    int64_t at = (q->head + q->len) % q->capacity;
    q->row[at] = row;
    q->done[at] = done;
    q->len++;
}

/* 1 when row is among rows[0..n). */
static int s_has(const int64_t *rows, int64_t n, int64_t row)
{
    for (int64_t i = 0; i < n; i++)
        if (rows[i] == row)
            return 1;
    return 0;
}

int rl_rlvr_replay_prompts(rl_rlvr_replay *q, rl_data_iter *it, int64_t prompts, int queued,
                           rl_dataproto **out)
{
    *out = NULL;
    if (!q->enable)
        return rl_data_iter_next(it, prompts, out);
    int64_t k = !queued ? 0 : q->per_step < q->len ? q->per_step : q->len;
    k = k < prompts ? k : prompts;
    /* rows [0, nr): replays (times[i] = their replay count), then [nr, nr +
     * nf) fresh rows; a prompt is never in a round twice (its group id is
     * its global id) */
    int64_t *rows = malloc(sizeof(int64_t) * (size_t)(prompts > 0 ? prompts : 1));
    int64_t *fresh = malloc(sizeof(int64_t) * (size_t)(prompts > 0 ? prompts : 1));
    int64_t *times = malloc(sizeof(int64_t) * (size_t)(prompts > 0 ? prompts : 1));
    rl_dataproto *dp = rl_dataproto_new();
    int rc = !rows || !fresh || !times || !dp ? rl_error_set(RL_ENOMEM, "hard_replay: out of memory")
                                              : RL_OK;
    int64_t nr = 0, nf = 0;
    if (!rc && prompts > k)
        rc = rl_data_iter_next_rows(it, prompts - k, fresh, &nf);
    while (!rc && nr < k && q->len > 0) { /* oldest first */
        int64_t row = q->row[q->head], done = q->done[q->head];
        q->head = (q->head + 1) % q->capacity;
        q->len--;
        if (s_has(fresh, nf, row) || s_has(rows, nr, row)) {
            q->n_merged++; /* the prompt is in this round already */
            continue;
        }
        rows[nr] = row;
        times[nr++] = done + 1;
    }
    while (!rc && nr + nf < prompts) { /* the queue ran short: fresh rows instead */
        int64_t row, got;
        if ((rc = rl_data_iter_next_rows(it, 1, &row, &got)))
            break;
        for (int64_t i = 0; i < nr; i++)
            if (rows[i] == row) { /* the fresh copy stands in for the replay */
                memmove(rows + i, rows + i + 1, sizeof(int64_t) * (size_t)(nr - i - 1));
                memmove(times + i, times + i + 1, sizeof(int64_t) * (size_t)(nr - i - 1));
                nr--;
                q->n_merged++;
                break;
            }
        fresh[nf++] = row;
    }
    for (int64_t i = 0; !rc && i < nf; i++) {
        rows[nr + i] = fresh[i];
        times[nr + i] = 0;
    }
    if (!rc)
        rc = rl_dataset_fill(q->train, rows, nr + nf, dp);
    rl_column *c = rc ? NULL : rl_dataproto_new_column(dp, RL_LM_REPLAYED, RL_COL_INT64);
    if (!rc && !c)
        rc = rl_error_code();
    for (int64_t i = 0; !rc && i < nr + nf; i++)
        rc = rl_column_set_i64(c, i, times[i]);
    free(rows);
    free(fresh);
    free(times);
    if (rc) {
        rl_dataproto_free(dp);
        return rc;
    }
    q->n_prompts += nr;
    *out = dp;
    return RL_OK;
}

int rl_rlvr_replay_observe(rl_rlvr_replay *q, const rl_dataproto *dp)
{
    if (!q->enable)
        return RL_OK;
    int64_t B = rl_dataproto_rows(dp), G = 0;
    const rl_column *rc_col = rl_dataproto_column(dp, RL_LM_REPLAYED);
    if (rc_col && rl_column_get_type(rc_col) != RL_COL_INT64)
        return rl_error_set(RL_EDTYPE, "hard_replay: column '%s' is not int64", RL_LM_REPLAYED);
    const float *acc = rl_lm_rows_f32(dp, RL_REWARD_ACCURACY);
    int64_t *gid = acc ? rl_lm_column_i64(dp, RL_DATA_GLOBAL_ID) : NULL;
    int64_t *perm = malloc(sizeof(int64_t) * (size_t)(B + 1)),
            *starts = malloc(sizeof(int64_t) * (size_t)(B + 2));
    int rc = !acc ? rl_error_wrap(rl_error_code(), "hard_replay")
             : !gid ? rl_error_code()
             : (!perm || !starts) ? rl_error_set(RL_ENOMEM, "hard_replay: out of memory")
                                  : rl_group_runs(gid, B, perm, starts, &G);
    for (int64_t g = 0; !rc && g < G; g++) {
        int64_t a = starts[g], e = starts[g + 1], first = perm[a];
        double sum = 0;
        for (int64_t i = a; i < e; i++) /* in row order: a fixed sum */
            sum += acc[perm[i]];
        int64_t done = rc_col ? rl_column_i64(rc_col, first) : 0;
        int hard = sum / (double)(e - a) < q->below;
        if (done < 0 || done > q->times)
            rc = rl_error_set(RL_ERANGE, "hard_replay: row %lld says its prompt was replayed %lld "
                                         "times, expected 0..%lld", (long long)first,
                              (long long)done, (long long)q->times);
        else if (!hard) {
            q->n_solved += done > 0;
        } else if (done == q->times) {
            q->n_expired++;
        } else {
            int64_t row = rl_dataset_row_of(q->train, gid[first]);
            if (row < 0)
                rc = rl_error_set(RL_ENOTFOUND, "hard_replay: no training row with global_id %lld",
                                  (long long)gid[first]);
            else {
                s_push(q, row, done);
                q->n_queued++;
            }
        }
    }
    free(gid);
    free(perm);
    free(starts);
    return rc;
}

void rl_rlvr_replay_metrics(rl_rlvr_replay *q, rl_metric_set *ms)
{
    if (!q->enable)
        return;
    rl_metric_set_put(ms, "replay/prompts", (double)q->n_prompts);
    rl_metric_set_put(ms, "replay/queued", (double)q->n_queued);
    rl_metric_set_put(ms, "replay/solved", (double)q->n_solved);
    rl_metric_set_put(ms, "replay/expired", (double)q->n_expired);
    rl_metric_set_put(ms, "replay/dropped", (double)q->n_dropped);
    rl_metric_set_put(ms, "replay/merged", (double)q->n_merged);
    rl_metric_set_put(ms, "replay/queue", (double)q->len);
    q->n_prompts = q->n_queued = q->n_solved = q->n_expired = q->n_dropped = q->n_merged = 0;
}

json_t *rl_rlvr_replay_save(const rl_rlvr_replay *q)
{
    json_t *a = json_array();
    for (int64_t i = 0; a && i < q->len; i++) {
        int64_t at = (q->head + i) % q->capacity;
        json_t *e = json_pack("[I, I]", (json_int_t)rl_dataset_global_id(q->train, q->row[at]),
                              (json_int_t)q->done[at]);
        if (!e || json_array_append_new(a, e)) {
            json_decref(a);
            return NULL;
        }
    }
    return a;
}

int rl_rlvr_replay_restore(rl_rlvr_replay *q, const json_t *saved)
{
    if (!json_is_array(saved))
        return rl_error_set(RL_EPROTO, "checkpoint: hard_replay: expected an array of "
                                       "[global_id, replays done], got %s",
                            json_is_object(saved) ? "an object" : "a scalar");
    q->head = q->len = 0;
    size_t i;
    const json_t *e;
    json_array_foreach(saved, i, e) {
        const json_t *id = json_array_get(e, 0), *done = json_array_get(e, 1);
        if (!json_is_array(e) || json_array_size(e) != 2 || !json_is_integer(id) ||
            !json_is_integer(done))
            return rl_error_set(RL_EPROTO, "checkpoint: hard_replay entry %zu: expected "
                                           "[global_id, replays done] (two integers)", i);
        int64_t row = rl_dataset_row_of(q->train, json_integer_value(id));
        if (row < 0)
            return rl_error_set(RL_ENOTFOUND, "checkpoint: hard_replay entry %zu: no training row "
                                              "with global_id %lld (%s changed?)",
                                i, (long long)json_integer_value(id),
                                RL_CFG_PATH(&rl_lm_data_section, rl_lm_data_config, train_files));
        if (json_integer_value(done) < 0)
            return rl_error_set(RL_ERANGE, "checkpoint: hard_replay entry %zu: replays done %lld "
                                           "< 0", i, (long long)json_integer_value(done));
        if (json_integer_value(done) < q->times)
            s_push(q, row, json_integer_value(done));
    }
    q->n_dropped = q->n_merged = 0;
    return RL_OK;
}
