/* dataset.c — JSONL prompt datasets and resumable shuffled epochs. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/data/data.h"
#include "common/core/util.h"
#include "rlrt/error.h"
#include "common/core/rng.h"

typedef struct s_row {
    char *prompt, *ground_truth, *data_source;
    int64_t global_id;
    int64_t line;
    json_t *extra;
} s_row;

/* by_id: the rows sorted by global id (ids unique), for rl_dataset_row_of */
typedef struct s_idline {
    int64_t id, line, row;
} s_idline;

struct rl_dataset {
    char *path;
    s_row *rows;
    int64_t n, cap;
    s_idline *by_id;
};


void rl_dataset_free(rl_dataset *ds)
{
    if (!ds)
        return;
    for (int64_t i = 0; i < ds->n; i++) {
        free(ds->rows[i].prompt);
        free(ds->rows[i].ground_truth);
        free(ds->rows[i].data_source);
        json_decref(ds->rows[i].extra);
    }
    free(ds->rows);
    free(ds->by_id);
    free(ds->path);
    free(ds);
}

/* Parses one non-blank line into *r; returns 0 or an error naming path:line. */
static int s_parse_row(const char *path, int64_t line, const char *text, size_t len,
                       int64_t index, s_row *r)
{
    json_error_t err;
    json_t *o = json_loadb(text, len, 0, &err);
    if (!o)
        return rl_error_set(RL_EPROTO, "%s:%" PRId64 ": bad JSON: %s (column %d)", path, line,
                            err.text, err.column);
    if (!json_is_object(o)) {
        int rc = rl_error_set(RL_EPROTO, "%s:%" PRId64 ": expected a JSON object, got %s",
                              path, line, rl_json_type_name(o));
        json_decref(o);
        return rc;
    }
    int rc = RL_OK;
    json_t *p = json_object_get(o, "prompt"), *gt = json_object_get(o, "ground_truth");
    json_t *ds = json_object_get(o, "data_source"), *id = json_object_get(o, "global_id");
    char num[32];
    if (!p)
        rc = rl_error_set(RL_ENOTFOUND, "%s:%" PRId64 ": missing field 'prompt'", path, line);
    else if (!json_is_string(p))
        rc = rl_error_set(RL_EDTYPE, "%s:%" PRId64 ": field 'prompt': expected string, got %s",
                          path, line, rl_json_type_name(p));
    else if (!gt)
        rc = rl_error_set(RL_ENOTFOUND, "%s:%" PRId64 ": missing field 'ground_truth'", path,
                          line);
    else if (!json_is_string(gt) && !json_is_integer(gt))
        rc = rl_error_set(RL_EDTYPE,
                          "%s:%" PRId64 ": field 'ground_truth': expected string or integer, "
                          "got %s", path, line, rl_json_type_name(gt));
    else if (ds && !json_is_string(ds))
        rc = rl_error_set(RL_EDTYPE,
                          "%s:%" PRId64 ": field 'data_source': expected string, got %s", path,
                          line, rl_json_type_name(ds));
    else if (id && !json_is_integer(id))
        rc = rl_error_set(RL_EDTYPE,
                          "%s:%" PRId64 ": field 'global_id': expected integer, got %s", path,
                          line, rl_json_type_name(id));
    if (rc) {
        json_decref(o);
        return rc;
    }
    if (json_is_integer(gt))
        snprintf(num, sizeof num, "%" JSON_INTEGER_FORMAT, json_integer_value(gt));
    r->prompt = strdup(json_string_value(p));
    r->ground_truth = strdup(json_is_string(gt) ? json_string_value(gt) : num);
    r->data_source = strdup(ds ? json_string_value(ds) : "unknown");
    r->global_id = id ? (int64_t)json_integer_value(id) : index;
    r->line = line;
    json_object_del(o, "prompt");
    json_object_del(o, "ground_truth");
    json_object_del(o, "data_source");
    json_object_del(o, "global_id");
    r->extra = o;
    if (!r->prompt || !r->ground_truth || !r->data_source)
        return rl_error_set(RL_ENOMEM, "%s:%" PRId64 ": out of memory", path, line);
    return RL_OK;
}

static int s_cmp_idline(const void *a, const void *b)
{
    const s_idline *x = a, *y = b;
    if (x->id != y->id)
        return x->id < y->id ? -1 : 1;
    return x->line < y->line ? -1 : x->line > y->line;
}

/* Sorts the rows by global id into ds->by_id; a duplicate id is an error. */
static int s_check_unique(rl_dataset *ds)
{
    s_idline *v = malloc((size_t)ds->n * sizeof *v);
    if (!v)
        return rl_error_set(RL_ENOMEM, "%s: out of memory", ds->path);
    for (int64_t i = 0; i < ds->n; i++)
        v[i] = (s_idline){ds->rows[i].global_id, ds->rows[i].line, i};
    qsort(v, (size_t)ds->n, sizeof *v, s_cmp_idline);
    /* Report the duplicate that appears earliest in the file. */
    int64_t bad = -1;
    for (int64_t i = 1; i < ds->n; i++)
        if (v[i].id == v[i - 1].id && (bad < 0 || v[i].line < v[bad].line))
            bad = i;
    if (bad < 0) {
        ds->by_id = v;
        return RL_OK;
    }
    int64_t first = bad - 1;
    while (first > 0 && v[first - 1].id == v[bad].id)
        first--;
    int rc = rl_error_set(RL_EEXIST, "%s:%" PRId64 ": duplicate global_id %" PRId64
                                     " (first at line %" PRId64 ")",
                          ds->path, v[bad].line, v[bad].id, v[first].line);
    free(v);
    return rc;
}

int64_t rl_dataset_row_of(const rl_dataset *ds, int64_t global_id)
{
    int64_t lo = 0, hi = ds && ds->by_id ? ds->n : 0;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (ds->by_id[mid].id < global_id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return ds && ds->by_id && lo < ds->n && ds->by_id[lo].id == global_id ? ds->by_id[lo].row : -1;
}

rl_dataset *rl_dataset_load_jsonl(const char *path)
{
    if (!path) {
        rl_error_set(RL_EINVAL, "rl_dataset_load_jsonl: path is NULL");
        return NULL;
    }
    FILE *f = fopen(path, "r");
    if (!f) {
        rl_error_set(errno == ENOENT ? RL_ENOTFOUND : RL_EIO, "%s: cannot open: %s", path,
                     strerror(errno));
        return NULL;
    }
    rl_dataset *ds = calloc(1, sizeof *ds);
    char *buf = NULL;
    size_t bcap = 0;
    int rc = RL_OK;
    if (!ds || !(ds->path = strdup(path))) {
        rc = rl_error_set(RL_ENOMEM, "%s: out of memory", path);
        goto done;
    }
    ssize_t len;
    int64_t line = 0;
    while ((len = getline(&buf, &bcap, f)) >= 0) {
        line++;
        size_t k = (size_t)len;
        while (k > 0 && (buf[k - 1] == '\n' || buf[k - 1] == '\r' || buf[k - 1] == ' ' ||
                         buf[k - 1] == '\t'))
            k--;
        size_t s = 0;
        while (s < k && (buf[s] == ' ' || buf[s] == '\t'))
            s++;
        if (s == k)
            continue;
        if (ds->n == ds->cap) {
            int64_t nc = ds->cap ? ds->cap * 2 : 64;
            s_row *nr = realloc(ds->rows, (size_t)nc * sizeof *nr);
            if (!nr) {
                rc = rl_error_set(RL_ENOMEM, "%s: out of memory", path);
                goto done;
            }
            ds->rows = nr;
            ds->cap = nc;
        }
        s_row *r = &ds->rows[ds->n];
        memset(r, 0, sizeof *r);
        rc = s_parse_row(path, line, buf + s, k - s, ds->n, r);
        ds->n++; /* counted even on error so rl_dataset_free releases it */
        if (rc)
            goto done;
    }
    if (ferror(f)) {
        rc = rl_error_set(RL_EIO, "%s: read error after line %" PRId64, path, line);
        goto done;
    }
    if (ds->n == 0) {
        rc = rl_error_set(RL_EINVAL, "%s: no rows", path);
        goto done;
    }
    rc = s_check_unique(ds);
done:
    free(buf);
    fclose(f);
    if (rc) {
        rl_dataset_free(ds);
        return NULL;
    }
    return ds;
}

int64_t rl_dataset_size(const rl_dataset *ds) { return ds ? ds->n : 0; }

static const s_row *s_at(const rl_dataset *ds, int64_t row)
{
    return ds && row >= 0 && row < ds->n ? &ds->rows[row] : NULL;
}

const char *rl_dataset_prompt(const rl_dataset *ds, int64_t row)
{
    const s_row *r = s_at(ds, row);
    return r ? r->prompt : NULL;
}

const char *rl_dataset_ground_truth(const rl_dataset *ds, int64_t row)
{
    const s_row *r = s_at(ds, row);
    return r ? r->ground_truth : NULL;
}

const char *rl_dataset_data_source(const rl_dataset *ds, int64_t row)
{
    const s_row *r = s_at(ds, row);
    return r ? r->data_source : NULL;
}

int64_t rl_dataset_global_id(const rl_dataset *ds, int64_t row)
{
    const s_row *r = s_at(ds, row);
    return r ? r->global_id : -1;
}

const json_t *rl_dataset_extra(const rl_dataset *ds, int64_t row)
{
    const s_row *r = s_at(ds, row);
    return r ? r->extra : NULL;
}

int64_t rl_dataset_line(const rl_dataset *ds, int64_t row)
{
    const s_row *r = s_at(ds, row);
    return r ? r->line : -1;
}

static int s_check_rows(const rl_dataset *ds, const int64_t *rows, int64_t n,
                        rl_dataproto *dp, const char *fn)
{
    if (!ds || !dp || (n > 0 && !rows) || n < 0)
        return rl_error_set(RL_EINVAL, "%s: NULL argument or n %" PRId64 " < 0", fn, n);
    for (int64_t i = 0; i < n; i++)
        if (rows[i] < 0 || rows[i] >= ds->n)
            return rl_error_set(RL_ERANGE, "%s: rows[%" PRId64 "] = %" PRId64
                                           " outside 0..%" PRId64, fn, i, rows[i], ds->n - 1);
    int64_t have = rl_dataproto_rows(dp);
    if (have >= 0 && have != n)
        return rl_error_set(RL_ESHAPE, "%s: DataProto has %" PRId64 " rows, batch has %"
                                       PRId64, fn, have, n);
    if (have < 0)
        return rl_dataproto_set_rows(dp, n);
    return RL_OK;
}

int rl_dataset_fill(const rl_dataset *ds, const int64_t *rows, int64_t n, rl_dataproto *dp)
{
    int rc = s_check_rows(ds, rows, n, dp, "rl_dataset_fill");
    if (rc)
        return rc;
    rl_column *cp = rl_dataproto_new_column(dp, RL_DATA_PROMPT, RL_COL_STRING);
    rl_column *cg = cp ? rl_dataproto_new_column(dp, RL_DATA_GROUND_TRUTH, RL_COL_STRING) : NULL;
    rl_column *cs = cg ? rl_dataproto_new_column(dp, RL_DATA_SOURCE, RL_COL_STRING) : NULL;
    rl_column *ci = cs ? rl_dataproto_new_column(dp, RL_DATA_GLOBAL_ID, RL_COL_INT64) : NULL;
    if (!ci)
        return rl_error_wrap(rl_error_code() ? rl_error_code() : RL_EINVAL,
                             "rl_dataset_fill");
    for (int64_t i = 0; i < n && rc == RL_OK; i++) {
        const s_row *r = &ds->rows[rows[i]];
        rc = rl_column_set_str(cp, i, r->prompt);
        if (!rc)
            rc = rl_column_set_str(cg, i, r->ground_truth);
        if (!rc)
            rc = rl_column_set_str(cs, i, r->data_source);
        if (!rc)
            rc = rl_column_set_i64(ci, i, r->global_id);
    }
    return rc;
}

int rl_dataset_fill_extra_i64(const rl_dataset *ds, const int64_t *rows, int64_t n,
                              const char *field, rl_dataproto *dp)
{
    int rc = s_check_rows(ds, rows, n, dp, "rl_dataset_fill_extra_i64");
    if (rc)
        return rc;
    if (!field)
        return rl_error_set(RL_EINVAL, "rl_dataset_fill_extra_i64: field is NULL");
    for (int64_t i = 0; i < n; i++) {
        const s_row *r = &ds->rows[rows[i]];
        json_t *v = json_object_get(r->extra, field);
        if (!v)
            return rl_error_set(RL_ENOTFOUND, "%s:%" PRId64 ": missing field '%s'", ds->path,
                                r->line, field);
        if (!json_is_integer(v))
            return rl_error_set(RL_EDTYPE, "%s:%" PRId64 ": field '%s': expected integer, "
                                           "got %s", ds->path, r->line, field, rl_json_type_name(v));
    }
    rl_column *c = rl_dataproto_new_column(dp, field, RL_COL_INT64);
    if (!c)
        return rl_error_wrap(rl_error_code() ? rl_error_code() : RL_EINVAL,
                             "rl_dataset_fill_extra_i64");
    for (int64_t i = 0; i < n && rc == RL_OK; i++)
        rc = rl_column_set_i64(
            c, i, (int64_t)json_integer_value(json_object_get(ds->rows[rows[i]].extra, field)));
    return rc;
}

/* ---- iteration -------------------------------------------------------------------- */

struct rl_data_iter {
    const rl_dataset *ds;
    uint64_t seed;
    int shuffle, drop_last;
    rl_data_pos pos;
    int64_t *perm;      /* order of perm_epoch */
    int64_t perm_epoch; /* -1 = none computed */
};

rl_data_iter *rl_data_iter_new(const rl_dataset *ds, uint64_t seed, int shuffle, int drop_last)
{
    if (!ds || ds->n < 1) {
        rl_error_set(RL_EINVAL, "rl_data_iter_new: empty or NULL dataset");
        return NULL;
    }
    rl_data_iter *it = calloc(1, sizeof *it);
    if (it)
        it->perm = malloc((size_t)ds->n * sizeof *it->perm);
    if (!it || !it->perm) {
        free(it);
        rl_error_set(RL_ENOMEM, "rl_data_iter_new: out of memory (%" PRId64 " rows)", ds->n);
        return NULL;
    }
    it->ds = ds;
    it->seed = seed;
    it->shuffle = shuffle != 0;
    it->drop_last = drop_last != 0;
    it->perm_epoch = -1;
    return it;
}

void rl_data_iter_free(rl_data_iter *it)
{
    if (!it)
        return;
    free(it->perm);
    free(it);
}

rl_data_pos rl_data_iter_tell(const rl_data_iter *it)
{
    return it ? it->pos : (rl_data_pos){0, 0};
}

int rl_data_iter_seek(rl_data_iter *it, rl_data_pos pos)
{
    if (!it)
        return rl_error_set(RL_EINVAL, "rl_data_iter_seek: iterator is NULL");
    if (pos.epoch < 0 || pos.epoch > (INT64_C(1) << 53) || pos.index < 0 ||
        pos.index > it->ds->n) /* the epoch is incremented later: bounded far from overflow */
        return rl_error_set(RL_ERANGE, "rl_data_iter_seek: position (epoch %" PRId64
                                       ", index %" PRId64 ") outside epoch 0..2^53, index 0..%"
                                       PRId64, pos.epoch, pos.index, it->ds->n);
    it->pos = pos;
    return RL_OK;
}

static void s_perm(rl_data_iter *it, int64_t epoch)
{
    if (it->perm_epoch == epoch)
        return;
    for (int64_t i = 0; i < it->ds->n; i++)
        it->perm[i] = i;
    if (it->shuffle) {
        rl_rng g;
        rl_rng_init(&g, it->seed, (uint64_t)epoch);
        rl_rng_shuffle_i64(&g, it->perm, it->ds->n);
    }
    it->perm_epoch = epoch;
}

int64_t rl_data_iter_row_at(rl_data_iter *it, int64_t epoch, int64_t index)
{
    if (!it || epoch < 0 || index < 0 || index >= it->ds->n)
        return -1;
    s_perm(it, epoch);
    return it->perm[index];
}

int rl_data_iter_next_rows(rl_data_iter *it, int64_t batch, int64_t *rows, int64_t *n)
{
    if (!it || !rows || !n)
        return rl_error_set(RL_EINVAL, "rl_data_iter_next_rows: NULL argument");
    int64_t size = it->ds->n;
    if (batch < 1 || (it->drop_last && batch > size))
        return rl_error_set(RL_EINVAL, "rl_data_iter_next_rows: batch %" PRId64 " must be in "
                                       "1..%" PRId64 "%s", batch, size,
                            it->drop_last ? " (drop_last)" : "");
    if (it->pos.index >= size || (it->drop_last && size - it->pos.index < batch)) {
        it->pos.epoch++;
        it->pos.index = 0;
    }
    int64_t k = size - it->pos.index < batch ? size - it->pos.index : batch;
    s_perm(it, it->pos.epoch);
    memcpy(rows, it->perm + it->pos.index, (size_t)k * sizeof *rows);
    it->pos.index += k;
    *n = k;
    return RL_OK;
}

int rl_data_iter_next(rl_data_iter *it, int64_t batch, rl_dataproto **out)
{
    if (!out)
        return rl_error_set(RL_EINVAL, "rl_data_iter_next: out is NULL");
    *out = NULL;
    if (batch < 1)
        return rl_error_set(RL_EINVAL, "rl_data_iter_next: batch %" PRId64 " < 1", batch);
    if (!it)
        return rl_error_set(RL_EINVAL, "rl_data_iter_next: iterator is NULL");
    /* next_rows gives at most the dataset's size: a huge batch must not size the buffer */
    int64_t cap = batch < it->ds->n ? batch : (it->ds->n > 0 ? it->ds->n : 1);
    int64_t *rows = malloc((size_t)cap * sizeof *rows), n = 0;
    if (!rows)
        return rl_error_set(RL_ENOMEM, "rl_data_iter_next: out of memory");
    rl_data_pos saved = it ? it->pos : (rl_data_pos){0, 0};
    int rc = rl_data_iter_next_rows(it, batch, rows, &n);
    rl_dataproto *dp = NULL;
    if (!rc) {
        dp = rl_dataproto_new();
        rc = dp ? rl_dataset_fill(it->ds, rows, n, dp) : RL_ENOMEM;
    }
    free(rows);
    if (rc) {
        rl_dataproto_free(dp);
        if (it)
            it->pos = saved; /* a failed call does not consume rows */
        return rc;
    }
    *out = dp;
    return RL_OK;
}
