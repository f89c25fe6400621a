/* dataproto.c — DataProto batches: tensors, per-row columns, meta
 * (see rlrt/dataproto.h). */
#include "rlrt/dataproto.h"
#include "common/core/util.h"
#include "rlrt/error.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One cell of a column. Scalars live in v; strings/bytes/lists in p:
 *   STRING, BYTES: p holds nbytes = len + 1 bytes (NUL-terminated); NULL = "".
 *   INT64_LIST, DOUBLE_LIST: p holds n 8-byte values, nbytes = 8n.
 *   STRING_LIST, BYTES_LIST: p holds uint64 offsets[n + 1] then the items,
 *     each followed by a NUL; item i spans [offsets[i], offsets[i+1] - 1). */
typedef struct s_cell {
    int64_t n;
    size_t nbytes;
    void *p;
    union {
        int64_t i;
        double d;
    } v;
} s_cell;

struct rl_column {
    char *name;
    rl_column_type type;
    int64_t rows;
    s_cell *cells;
};

struct rl_dataproto {
    int64_t rows; /* -1 until fixed */
    int nt, capt;
    char **tnames;
    rl_tensor **tensors;
    int nc, capc;
    rl_column **cols;
    json_t *meta;
};

const char *rl_column_type_name(int type)
{
    static const char *names[] = {"?", "string", "int64", "double", "bytes",
                                  "string_list", "int64_list", "double_list", "bytes_list"};
    return (type >= RL_COL_STRING && type <= RL_COL_BYTES_LIST) ? names[type] : "?";
}

/* ---- columns ------------------------------------------------------------------ */

static void s_column_free(rl_column *c)
{
    if (!c)
        return;
    if (c->cells)
        for (int64_t r = 0; r < c->rows; r++)
            free(c->cells[r].p);
    free(c->cells);
    free(c->name);
    free(c);
}

static rl_column *s_column_new(const char *name, rl_column_type type, int64_t rows)
{
    rl_column *c = calloc(1, sizeof *c);
    if (!c)
        goto oom;
    c->name = strdup(name);
    c->type = type;
    c->rows = rows;
    c->cells = calloc((size_t)(rows > 0 ? rows : 1), sizeof *c->cells);
    if (!c->name || !c->cells)
        goto oom;
    return c;
oom:
    s_column_free(c);
    rl_error_set(RL_ENOMEM, "column '%s': out of memory", name);
    return NULL;
}

static int s_cell_copy(s_cell *dst, const s_cell *src)
{
    *dst = *src;
    dst->p = NULL;
    if (src->p) {
        dst->p = malloc(src->nbytes);
        if (!dst->p)
            return rl_error_set(RL_ENOMEM, "column cell: out of memory");
        memcpy(dst->p, src->p, src->nbytes);
    }
    return RL_OK;
}

/* New column with rows idx[0..n) of c (idx NULL: rows [begin, begin + n)). */
static rl_column *s_column_gather(const rl_column *c, const int64_t *idx, int64_t begin, int64_t n)
{
    rl_column *out = s_column_new(c->name, c->type, n);
    if (!out)
        return NULL;
    for (int64_t r = 0; r < n; r++) {
        int64_t src = idx ? idx[r] : begin + r;
        if (s_cell_copy(&out->cells[r], &c->cells[src])) {
            s_column_free(out);
            return NULL;
        }
    }
    return out;
}

/* Unset cells equal empty ones ("" / empty list). */
static int s_cell_equal(rl_column_type t, const s_cell *a, const s_cell *b)
{
    switch (t) {
    case RL_COL_INT64: return a->v.i == b->v.i;
    case RL_COL_DOUBLE: return a->v.d == b->v.d || (a->v.d != a->v.d && b->v.d != b->v.d);
    case RL_COL_STRING:
    case RL_COL_BYTES: {
        size_t la = a->p ? a->nbytes - 1 : 0, lb = b->p ? b->nbytes - 1 : 0;
        return la == lb && (la == 0 || memcmp(a->p, b->p, la) == 0);
    }
    default:
        if (a->n != b->n)
            return 0;
        return a->n == 0 || (a->nbytes == b->nbytes && memcmp(a->p, b->p, a->nbytes) == 0);
    }
}

static int s_column_equal(const rl_column *a, const rl_column *b)
{
    if (a->type != b->type || a->rows != b->rows)
        return 0;
    for (int64_t r = 0; r < a->rows; r++)
        if (!s_cell_equal(a->type, &a->cells[r], &b->cells[r]))
            return 0;
    return 1;
}

static int s_column_check(const rl_column *c, int64_t row, rl_column_type want)
{
    if (c->type != want)
        return rl_error_set(RL_EDTYPE, "column '%s' holds %s values, not %s", c->name,
                            rl_column_type_name(c->type), rl_column_type_name(want));
    if (row < 0 || row >= c->rows)
        return rl_error_set(RL_ERANGE, "column '%s': row %lld outside [0, %lld)", c->name,
                            (long long)row, (long long)c->rows);
    return RL_OK;
}

const char *rl_column_name(const rl_column *c) { return c->name; }
rl_column_type rl_column_get_type(const rl_column *c) { return c->type; }
int64_t rl_column_rows(const rl_column *c) { return c->rows; }

int rl_column_set_i64(rl_column *c, int64_t row, int64_t v)
{
    int rc = s_column_check(c, row, RL_COL_INT64);
    if (!rc)
        c->cells[row].v.i = v;
    return rc;
}

int rl_column_set_f64(rl_column *c, int64_t row, double v)
{
    int rc = s_column_check(c, row, RL_COL_DOUBLE);
    if (!rc)
        c->cells[row].v.d = v;
    return rc;
}

static int s_set_blob(rl_column *c, int64_t row, const void *p, size_t len, int64_t n)
{
    void *copy = malloc(len ? len : 1);
    if (!copy)
        return rl_error_set(RL_ENOMEM, "column '%s': out of memory", c->name);
    if (len && p)
        memcpy(copy, p, len);
    free(c->cells[row].p);
    c->cells[row].p = copy;
    c->cells[row].nbytes = len;
    c->cells[row].n = n;
    return RL_OK;
}

int rl_column_set_bytes(rl_column *c, int64_t row, const void *p, size_t len)
{
    int rc = s_column_check(c, row, RL_COL_BYTES);
    if (rc)
        return rc;
    rc = s_set_blob(c, row, NULL, len + 1, 1);
    if (!rc) {
        if (len)
            memcpy(c->cells[row].p, p, len);
        ((char *)c->cells[row].p)[len] = '\0';
    }
    return rc;
}

int rl_column_set_str(rl_column *c, int64_t row, const char *s)
{
    int rc = s_column_check(c, row, RL_COL_STRING);
    if (rc)
        return rc;
    return s_set_blob(c, row, s, strlen(s) + 1, 1);
}

int rl_column_set_i64_list(rl_column *c, int64_t row, const int64_t *v, int64_t n)
{
    int rc = s_column_check(c, row, RL_COL_INT64_LIST);
    return rc ? rc : s_set_blob(c, row, v, (size_t)n * 8, n);
}

int rl_column_set_f64_list(rl_column *c, int64_t row, const double *v, int64_t n)
{
    int rc = s_column_check(c, row, RL_COL_DOUBLE_LIST);
    return rc ? rc : s_set_blob(c, row, v, (size_t)n * 8, n);
}

static int s_set_item_list(rl_column *c, int64_t row, const void *const *items, const size_t *lens,
                           int64_t n)
{
    size_t head = (size_t)(n + 1) * sizeof(uint64_t), total = head;
    for (int64_t i = 0; i < n; i++)
        total += lens[i] + 1;
    int rc = s_set_blob(c, row, NULL, total, n);
    if (rc)
        return rc;
    char *base = c->cells[row].p;
    uint64_t off = head;
    for (int64_t i = 0; i < n; i++) {
        memcpy(base + (size_t)i * 8, &off, 8);
        if (lens[i])
            memcpy(base + off, items[i], lens[i]);
        base[off + lens[i]] = '\0';
        off += lens[i] + 1;
    }
    memcpy(base + (size_t)n * 8, &off, 8);
    return RL_OK;
}

int rl_column_set_str_list(rl_column *c, int64_t row, const char *const *s, int64_t n)
{
    int rc = s_column_check(c, row, RL_COL_STRING_LIST);
    if (rc)
        return rc;
    size_t *lens = malloc(sizeof *lens * (size_t)(n ? n : 1));
    if (!lens)
        return rl_error_set(RL_ENOMEM, "column '%s': out of memory", c->name);
    for (int64_t i = 0; i < n; i++)
        lens[i] = strlen(s[i]);
    rc = s_set_item_list(c, row, (const void *const *)s, lens, n);
    free(lens);
    return rc;
}

int rl_column_set_bytes_list(rl_column *c, int64_t row, const void *const *p, const size_t *len,
                             int64_t n)
{
    int rc = s_column_check(c, row, RL_COL_BYTES_LIST);
    return rc ? rc : s_set_item_list(c, row, p, len, n);
}

int64_t rl_column_i64(const rl_column *c, int64_t row)
{
    return (c->type == RL_COL_INT64 && row >= 0 && row < c->rows) ? c->cells[row].v.i : 0;
}

double rl_column_f64(const rl_column *c, int64_t row)
{
    return (c->type == RL_COL_DOUBLE && row >= 0 && row < c->rows) ? c->cells[row].v.d : 0.0;
}

const char *rl_column_str(const rl_column *c, int64_t row)
{
    if ((c->type != RL_COL_STRING && c->type != RL_COL_BYTES) || row < 0 || row >= c->rows)
        return NULL;
    return c->cells[row].p ? c->cells[row].p : "";
}

const void *rl_column_bytes(const rl_column *c, int64_t row, size_t *len)
{
    const char *s = rl_column_str(c, row);
    if (len)
        *len = (s && c->cells[row].p) ? c->cells[row].nbytes - 1 : 0;
    return s;
}

int64_t rl_column_list_len(const rl_column *c, int64_t row)
{
    if (c->type < RL_COL_STRING_LIST || row < 0 || row >= c->rows)
        return 0;
    return c->cells[row].n;
}

const int64_t *rl_column_list_i64(const rl_column *c, int64_t row)
{
    if (c->type != RL_COL_INT64_LIST || row < 0 || row >= c->rows)
        return NULL;
    return c->cells[row].p;
}

const double *rl_column_list_f64(const rl_column *c, int64_t row)
{
    if (c->type != RL_COL_DOUBLE_LIST || row < 0 || row >= c->rows)
        return NULL;
    return c->cells[row].p;
}

const void *rl_column_list_item(const rl_column *c, int64_t row, int64_t i, size_t *len)
{
    if ((c->type != RL_COL_STRING_LIST && c->type != RL_COL_BYTES_LIST) || row < 0 ||
        row >= c->rows || i < 0 || i >= c->cells[row].n)
        return NULL;
    const char *base = c->cells[row].p;
    uint64_t a, b;
    memcpy(&a, base + (size_t)i * 8, 8);
    memcpy(&b, base + (size_t)(i + 1) * 8, 8);
    if (len)
        *len = (size_t)(b - a - 1);
    return base + a;
}

/* ---- dataproto basics ------------------------------------------------------------- */

rl_dataproto *rl_dataproto_new(void)
{
    rl_dataproto *dp = rl_zalloc(sizeof *dp, "dataproto");
    if (!dp)
        return NULL;
    dp->rows = -1;
    dp->meta = json_object();
    if (!dp->meta) {
        free(dp);
        rl_error_set(RL_ENOMEM, "dataproto: out of memory");
        return NULL;
    }
    return dp;
}

void rl_dataproto_free(rl_dataproto *dp)
{
    if (!dp)
        return;
    for (int i = 0; i < dp->nt; i++) {
        rl_tensor_release(dp->tensors[i]);
        free(dp->tnames[i]);
    }
    free(dp->tensors);
    free(dp->tnames);
    for (int i = 0; i < dp->nc; i++)
        s_column_free(dp->cols[i]);
    free(dp->cols);
    json_decref(dp->meta);
    free(dp);
}

int64_t rl_dataproto_rows(const rl_dataproto *dp) { return dp->rows; }

int rl_dataproto_set_rows(rl_dataproto *dp, int64_t rows)
{
    if (rows < 0)
        return rl_error_set(RL_ERANGE, "rows must be >= 0, got %lld", (long long)rows);
    if (dp->rows >= 0 && dp->rows != rows)
        return rl_error_set(RL_ESHAPE, "dataproto has %lld rows, cannot set %lld",
                            (long long)dp->rows, (long long)rows);
    dp->rows = rows;
    return RL_OK;
}

static int s_find_tensor(const rl_dataproto *dp, const char *name)
{
    for (int i = 0; i < dp->nt; i++)
        if (strcmp(dp->tnames[i], name) == 0)
            return i;
    return -1;
}

static int s_find_column(const rl_dataproto *dp, const char *name)
{
    for (int i = 0; i < dp->nc; i++)
        if (strcmp(dp->cols[i]->name, name) == 0)
            return i;
    return -1;
}

static int s_check_new_name(const rl_dataproto *dp, const char *name)
{
    if (!name || !*name)
        return rl_error_set(RL_EINVAL, "empty tensor/column name");
    if (s_find_tensor(dp, name) >= 0)
        return rl_error_set(RL_EEXIST, "'%s' already exists as a tensor", name);
    if (s_find_column(dp, name) >= 0)
        return rl_error_set(RL_EEXIST, "'%s' already exists as a column", name);
    return RL_OK;
}

int rl_dataproto_add_tensor(rl_dataproto *dp, const char *name, rl_tensor *t)
{
    int rc = s_check_new_name(dp, name);
    if (rc)
        return rc;
    if (t->ndim < 1)
        return rl_error_set(RL_ESHAPE, "tensor '%s': 0-d tensors have no rows (need ndim >= 1)",
                            name);
    if (dp->rows >= 0 && t->shape[0] != dp->rows)
        return rl_error_set(RL_ESHAPE, "tensor '%s': expected %lld rows, got %lld", name,
                            (long long)dp->rows, (long long)t->shape[0]);
    if (dp->nt == dp->capt) {
        int cap = dp->capt ? 2 * dp->capt : 8;
        rl_tensor **ts = realloc(dp->tensors, sizeof *ts * (size_t)cap);
        if (ts)
            dp->tensors = ts;
        char **ns = realloc(dp->tnames, sizeof *ns * (size_t)cap);
        if (ns)
            dp->tnames = ns;
        if (!ts || !ns)
            return rl_error_set(RL_ENOMEM, "dataproto: out of memory");
        dp->capt = cap;
    }
    char *copy = strdup(name);
    if (!copy)
        return rl_error_set(RL_ENOMEM, "dataproto: out of memory");
    dp->tnames[dp->nt] = copy;
    dp->tensors[dp->nt++] = rl_tensor_retain(t);
    dp->rows = t->shape[0];
    return RL_OK;
}

rl_tensor *rl_dataproto_new_tensor(rl_dataproto *dp, const char *name, rl_dtype dtype, int ndim,
                                   const int64_t *shape)
{
    rl_tensor *t = rl_tensor_new(dtype, ndim, shape);
    if (!t)
        return NULL;
    int rc = rl_dataproto_add_tensor(dp, name, t);
    rl_tensor_release(t);
    return rc ? NULL : t;
}

rl_tensor *rl_dataproto_tensor(const rl_dataproto *dp, const char *name)
{
    int i = s_find_tensor(dp, name);
    return i < 0 ? NULL : dp->tensors[i];
}

rl_tensor *rl_dataproto_tensor_typed(const rl_dataproto *dp, const char *name, rl_dtype dtype)
{
    rl_tensor *t = rl_dataproto_tensor(dp, name);
    if (!t) {
        rl_error_set(RL_ENOTFOUND, "tensor '%s' not in the batch", name);
        return NULL;
    }
    if (t->dtype != dtype) {
        rl_error_set(RL_EDTYPE, "tensor '%s': expected dtype %s, got %s", name,
                     rl_dtype_name((int)dtype), rl_dtype_name((int)t->dtype));
        return NULL;
    }
    return t;
}

int rl_dataproto_tensor_count(const rl_dataproto *dp) { return dp->nt; }
rl_tensor *rl_dataproto_tensor_at(const rl_dataproto *dp, int i) { return dp->tensors[i]; }
const char *rl_dataproto_tensor_name(const rl_dataproto *dp, int i) { return dp->tnames[i]; }

static int s_add_column(rl_dataproto *dp, rl_column *c)
{
    if (dp->nc == dp->capc) {
        int cap = dp->capc ? 2 * dp->capc : 8;
        rl_column **cs = realloc(dp->cols, sizeof *cs * (size_t)cap);
        if (!cs)
            return rl_error_set(RL_ENOMEM, "dataproto: out of memory");
        dp->cols = cs;
        dp->capc = cap;
    }
    dp->cols[dp->nc++] = c;
    if (dp->rows < 0)
        dp->rows = c->rows;
    return RL_OK;
}

rl_column *rl_dataproto_new_column(rl_dataproto *dp, const char *name, rl_column_type type)
{
    if (type < RL_COL_STRING || type > RL_COL_BYTES_LIST) {
        rl_error_set(RL_EDTYPE, "column '%s': unknown column type %d", name ? name : "", (int)type);
        return NULL;
    }
    if (s_check_new_name(dp, name))
        return NULL;
    if (dp->rows < 0) {
        rl_error_set(RL_ESTATE, "column '%s': batch rows unknown (add a tensor or call "
                                "rl_dataproto_set_rows first)", name);
        return NULL;
    }
    rl_column *c = s_column_new(name, type, dp->rows);
    if (!c)
        return NULL;
    if (s_add_column(dp, c)) {
        s_column_free(c);
        return NULL;
    }
    return c;
}

rl_column *rl_dataproto_column(const rl_dataproto *dp, const char *name)
{
    int i = s_find_column(dp, name);
    return i < 0 ? NULL : dp->cols[i];
}

int rl_dataproto_column_count(const rl_dataproto *dp) { return dp->nc; }
rl_column *rl_dataproto_column_at(const rl_dataproto *dp, int i) { return dp->cols[i]; }

/* Detaches tensor i (the caller takes its reference) or column i. */
static rl_tensor *s_detach_tensor(rl_dataproto *dp, int i)
{
    rl_tensor *t = dp->tensors[i];
    free(dp->tnames[i]);
    memmove(&dp->tensors[i], &dp->tensors[i + 1], sizeof *dp->tensors * (size_t)(dp->nt - i - 1));
    memmove(&dp->tnames[i], &dp->tnames[i + 1], sizeof *dp->tnames * (size_t)(dp->nt - i - 1));
    dp->nt--;
    return t;
}

static rl_column *s_detach_column(rl_dataproto *dp, int i)
{
    rl_column *c = dp->cols[i];
    memmove(&dp->cols[i], &dp->cols[i + 1], sizeof *dp->cols * (size_t)(dp->nc - i - 1));
    dp->nc--;
    return c;
}

int rl_dataproto_remove(rl_dataproto *dp, const char *name)
{
    int i = s_find_tensor(dp, name);
    if (i >= 0) {
        rl_tensor_release(s_detach_tensor(dp, i));
        return RL_OK;
    }
    i = s_find_column(dp, name);
    if (i >= 0) {
        s_column_free(s_detach_column(dp, i));
        return RL_OK;
    }
    return rl_error_set(RL_ENOTFOUND, "remove: no tensor or column named '%s'", name);
}

json_t *rl_dataproto_meta(rl_dataproto *dp) { return dp->meta; }
const json_t *rl_dataproto_meta_const(const rl_dataproto *dp) { return dp->meta; }

int rl_dataproto_set_meta(rl_dataproto *dp, json_t *meta)
{
    if (!json_is_object(meta)) {
        json_decref(meta);
        return rl_error_set(RL_EINVAL, "meta must be a JSON object");
    }
    json_decref(dp->meta);
    dp->meta = meta;
    return RL_OK;
}

rl_dataproto *rl_dataproto_new_meta(json_t *meta)
{
    rl_dataproto *dp = rl_dataproto_new();
    if (!dp) {
        json_decref(meta);
        return NULL;
    }
    dp->rows = 0;
    if (rl_dataproto_set_meta(dp, meta)) {
        rl_dataproto_free(dp);
        return NULL;
    }
    return dp;
}

/* The meta value of `key`; NULL when it is missing or null. */
static const json_t *s_meta(const rl_dataproto *dp, const char *key)
{
    const json_t *v = json_object_get(dp->meta, key);
    return v && !json_is_null(v) ? v : NULL;
}

/* RL_EINVAL "argument 'key' must be <want>, got <v as JSON>". */
static int s_bad_arg(const char *key, const char *want, const json_t *v)
{
    char *text = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
    rl_error_set(RL_EINVAL, "argument '%s' must be %s, got %s", key, want, text ? text : "?");
    free(text);
    return RL_EINVAL;
}

int rl_dataproto_meta_int(const rl_dataproto *dp, const char *key, int64_t def, int64_t *out)
{
    const json_t *v = s_meta(dp, key);
    if (v && !json_is_integer(v))
        return rl_error_set(RL_EINVAL, "argument '%s' must be an integer", key);
    *out = v ? json_integer_value(v) : def;
    return RL_OK;
}

int rl_dataproto_meta_double(const rl_dataproto *dp, const char *key, double def, double *out)
{
    const json_t *v = s_meta(dp, key);
    if (v && !json_is_number(v))
        return rl_error_set(RL_EINVAL, "argument '%s' must be a number", key);
    *out = v ? json_number_value(v) : def;
    return RL_OK;
}

const char *rl_dataproto_meta_str(const rl_dataproto *dp, const char *key, const char *def)
{
    const char *s = json_string_value(json_object_get(dp->meta, key));
    if (!s && !def)
        rl_error_set(RL_EINVAL, "argument '%s' (a string) is missing", key);
    return s ? s : def;
}

int rl_dataproto_meta_get_int(const rl_dataproto *dp, const char *key, int64_t lo, int64_t hi,
                              int64_t *out)
{
    const json_t *v = s_meta(dp, key);
    char want[96];
    snprintf(want, sizeof want, "an integer in [%lld, %lld]", (long long)lo, (long long)hi);
    if (!v)
        return rl_error_set(RL_EINVAL, "argument '%s' is missing (%s)", key, want);
    if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi)
        return s_bad_arg(key, want, v);
    *out = json_integer_value(v);
    return RL_OK;
}

int rl_dataproto_meta_get_double(const rl_dataproto *dp, const char *key, double lo, double hi,
                                 double *out)
{
    const json_t *v = s_meta(dp, key);
    if (!v)
        return rl_error_set(RL_EINVAL, "argument '%s' is missing (a number in [%g, %g])", key, lo,
                            hi);
    double x = json_number_value(v);
    if (!json_is_number(v) || !isfinite(x) || x < lo || x > hi) {
        char want[96];
        snprintf(want, sizeof want, "a finite number in [%g, %g]", lo, hi);
        return s_bad_arg(key, want, v);
    }
    *out = x;
    return RL_OK;
}

rl_dataproto *rl_dataproto_request(const rl_dataproto *src, const char *const *tensors,
                                   int n_tensors, const char *const *columns, int n_columns,
                                   json_t *meta)
{
    static const char *const none[1] = {""};
    rl_dataproto *r = rl_dataproto_select(src, tensors ? tensors : none, n_tensors,
                                          columns ? columns : none, n_columns);
    if (!r) {
        json_decref(meta);
        return NULL;
    }
    if (rl_dataproto_set_meta(r, meta ? meta : json_object())) {
        rl_dataproto_free(r);
        return NULL;
    }
    return r;
}

/* "f32 (B, 48)" for a shape spec, "i32 (4, 7)" for a tensor. */
static void s_shape_text(rl_dtype dt, int ndim, const int64_t *dims, int spec, char *buf,
                         size_t size)
{
    int n = snprintf(buf, size, "%s (", rl_dtype_name(dt));
    for (int i = 0; i < ndim && n < (int)size; i++) {
        if (spec && (i == 0 || !dims || dims[i] < 0))
            n += snprintf(buf + n, size - (size_t)n, "%s%s", i ? ", " : "", i == 0 ? "B" : "*");
        else
            n += snprintf(buf + n, size - (size_t)n, "%s%lld", i ? ", " : "", (long long)dims[i]);
    }
    if (n < (int)size)
        snprintf(buf + n, size - (size_t)n, ")");
}

rl_tensor *rl_dataproto_tensor_shaped(const rl_dataproto *dp, const char *name, rl_dtype dtype,
                                      int ndim, const int64_t *dims)
{
    rl_tensor *t = rl_dataproto_tensor(dp, name);
    char want[160], got[160];
    s_shape_text(dtype, ndim, dims, 1, want, sizeof want);
    if (!t) {
        rl_error_set(RL_ENOTFOUND, "missing tensor '%s' (expected %s)", name, want);
        return NULL;
    }
    int ok = t->dtype == dtype && t->ndim == ndim;
    for (int i = 1; ok && dims && i < ndim; i++)
        ok = dims[i] < 0 || dims[i] == t->shape[i];
    if (!ok) {
        s_shape_text(t->dtype, t->ndim, t->shape, 0, got, sizeof got);
        rl_error_set(t->dtype != dtype ? RL_EDTYPE : RL_ESHAPE, "tensor '%s' is %s, expected %s",
                     name, got, want);
        return NULL;
    }
    return t;
}

/* ---- operations -------------------------------------------------------------------- */

/* New dataproto with a deep copy of src's meta and src's rows. */
static rl_dataproto *s_new_like(const rl_dataproto *src, int64_t rows)
{
    rl_dataproto *dp = rl_dataproto_new();
    if (!dp)
        return NULL;
    json_decref(dp->meta);
    dp->meta = json_deep_copy(src->meta);
    if (!dp->meta) {
        dp->meta = json_object();
        rl_dataproto_free(dp);
        rl_error_set(RL_ENOMEM, "dataproto: out of memory");
        return NULL;
    }
    dp->rows = rows;
    return dp;
}

/* Rows idx[0..n) of src (idx NULL: the view [begin, begin + n)). */
static rl_dataproto *s_take_rows(const rl_dataproto *src, const int64_t *idx, int64_t begin,
                                 int64_t n)
{
    rl_dataproto *dp = s_new_like(src, n);
    if (!dp)
        return NULL;
    for (int i = 0; i < src->nt; i++) {
        rl_tensor *t = idx ? rl_tensor_gather_rows(src->tensors[i], idx, n)
                           : rl_tensor_view_rows(src->tensors[i], begin, begin + n);
        if (!t || rl_dataproto_add_tensor(dp, src->tnames[i], t)) {
            rl_error_wrap(rl_error_code(), "tensor '%s'", src->tnames[i]);
            rl_tensor_release(t);
            rl_dataproto_free(dp);
            return NULL;
        }
        rl_tensor_release(t);
    }
    for (int i = 0; i < src->nc; i++) {
        rl_column *c = s_column_gather(src->cols[i], idx, begin, n);
        if (!c || s_add_column(dp, c)) {
            s_column_free(c);
            rl_dataproto_free(dp);
            return NULL;
        }
    }
    return dp;
}

static int64_t s_rows0(const rl_dataproto *dp) { return dp->rows < 0 ? 0 : dp->rows; }

rl_dataproto *rl_dataproto_slice(const rl_dataproto *dp, int64_t begin, int64_t end)
{
    int64_t rows = s_rows0(dp);
    if (begin < 0 || end < begin || end > rows) {
        rl_error_set(RL_ERANGE, "slice [%lld, %lld) outside [0, %lld)", (long long)begin,
                     (long long)end, (long long)rows);
        return NULL;
    }
    return s_take_rows(dp, NULL, begin, end - begin);
}

rl_dataproto *rl_dataproto_index(const rl_dataproto *dp, const int64_t *idx, int64_t n)
{
    int64_t rows = s_rows0(dp);
    if (n < 0) {
        rl_error_set(RL_ERANGE, "index: negative count %lld", (long long)n);
        return NULL;
    }
    for (int64_t i = 0; i < n; i++) {
        if (idx[i] < 0 || idx[i] >= rows) {
            rl_error_set(RL_ERANGE, "index: row %lld at position %lld outside [0, %lld)",
                         (long long)idx[i], (long long)i, (long long)rows);
            return NULL;
        }
    }
    return s_take_rows(dp, idx, 0, n);
}

static int s_same_schema(const rl_dataproto *a, const rl_dataproto *b, const char *op, int item)
{
    if (a->nt != b->nt || a->nc != b->nc)
        return rl_error_set(RL_ESHAPE, "%s item %d: expected %d tensors and %d columns, got %d and %d",
                            op, item, a->nt, a->nc, b->nt, b->nc);
    for (int i = 0; i < a->nt; i++) {
        const rl_tensor *x = a->tensors[i], *y = rl_dataproto_tensor(b, a->tnames[i]);
        char bx[96], by[96];
        if (!y)
            return rl_error_set(RL_ENOTFOUND, "%s item %d: tensor '%s' missing", op, item,
                                a->tnames[i]);
        if (x->dtype != y->dtype)
            return rl_error_set(RL_EDTYPE, "%s item %d: tensor '%s': expected dtype %s, got %s", op,
                                item, a->tnames[i], rl_dtype_name((int)x->dtype),
                                rl_dtype_name((int)y->dtype));
        int same = x->ndim == y->ndim;
        for (int d = 1; same && d < x->ndim; d++)
            same = x->shape[d] == y->shape[d];
        if (!same)
            return rl_error_set(RL_ESHAPE, "%s item %d: tensor '%s': expected shape %s (any rows), got %s",
                                op, item, a->tnames[i], rl_tensor_describe(x, bx, sizeof bx),
                                rl_tensor_describe(y, by, sizeof by));
    }
    for (int i = 0; i < a->nc; i++) {
        const rl_column *y = rl_dataproto_column(b, a->cols[i]->name);
        if (!y)
            return rl_error_set(RL_ENOTFOUND, "%s item %d: column '%s' missing", op, item,
                                a->cols[i]->name);
        if (y->type != a->cols[i]->type)
            return rl_error_set(RL_EDTYPE, "%s item %d: column '%s': expected type %s, got %s", op,
                                item, a->cols[i]->name, rl_column_type_name(a->cols[i]->type),
                                rl_column_type_name(y->type));
    }
    return RL_OK;
}

rl_dataproto *rl_dataproto_concat(rl_dataproto *const *items, int n)
{
    if (n <= 0) {
        rl_error_set(RL_EINVAL, "concat of %d items", n);
        return NULL;
    }
    int64_t total = 0;
    for (int k = 0; k < n; k++) {
        if (k && s_same_schema(items[0], items[k], "concat", k))
            return NULL;
        int64_t sum;
        if (__builtin_add_overflow(total, s_rows0(items[k]), &sum)) {
            rl_error_set(RL_ERANGE, "concat item %d: its %lld rows added to the %lld rows "
                         "before it overflow int64", k, (long long)s_rows0(items[k]),
                         (long long)total);
            return NULL;
        }
        total = sum;
    }
    if (n == 1)
        return s_take_rows(items[0], NULL, 0, s_rows0(items[0]));
    rl_dataproto *dp = s_new_like(items[0], total);
    if (!dp)
        return NULL;
    for (int i = 0; i < items[0]->nt; i++) {
        const rl_tensor *t0 = items[0]->tensors[i];
        int64_t shape[RL_TENSOR_MAX_DIMS];
        memcpy(shape, t0->shape, sizeof shape);
        shape[0] = total;
        rl_tensor *t = rl_dataproto_new_tensor(dp, items[0]->tnames[i], t0->dtype, t0->ndim, shape);
        if (!t) {
            rl_dataproto_free(dp);
            return NULL;
        }
        char *dst = rl_tensor_data(t);
        for (int k = 0; k < n; k++) {
            const rl_tensor *src = rl_dataproto_tensor(items[k], items[0]->tnames[i]);
            size_t nb = rl_tensor_nbytes(src);
            if (nb)
                memcpy(dst, rl_tensor_data(src), nb);
            dst += nb;
        }
    }
    for (int i = 0; i < items[0]->nc; i++) {
        rl_column *c = s_column_new(items[0]->cols[i]->name, items[0]->cols[i]->type, total);
        if (!c || s_add_column(dp, c)) {
            s_column_free(c);
            rl_dataproto_free(dp);
            return NULL;
        }
        int64_t r = 0;
        for (int k = 0; k < n; k++) {
            const rl_column *src = rl_dataproto_column(items[k], c->name);
            for (int64_t j = 0; j < src->rows; j++, r++) {
                if (s_cell_copy(&c->cells[r], &src->cells[j])) {
                    rl_dataproto_free(dp);
                    return NULL;
                }
            }
        }
    }
    return dp;
}

/* n rows of dp: row i is dp's row i / every (every > 0: each row repeated
 * in place), else i % rows (the rows over and over). bytes: the size of
 * the index array, checked by the caller; what names the call in the
 * out-of-memory error. */
static rl_dataproto *s_take_cycled(const rl_dataproto *dp, size_t bytes, int64_t n, int64_t rows,
                                   int64_t every, const char *what)
{
    int64_t *idx = malloc(bytes);
    if (!idx) {
        rl_error_set(RL_ENOMEM, "%s: out of memory for %lld row indices", what, (long long)n);
        return NULL;
    }
    for (int64_t i = 0; i < n; i++)
        idx[i] = every > 0 ? i / every : i % rows;
    rl_dataproto *out = s_take_rows(dp, idx, 0, n);
    free(idx);
    return out;
}

rl_dataproto *rl_dataproto_pad_to_divisor(const rl_dataproto *dp, int64_t divisor,
                                          int64_t *pad_count)
{
    if (divisor <= 0) {
        rl_error_set(RL_EINVAL, "pad divisor must be > 0, got %lld", (long long)divisor);
        return NULL;
    }
    int64_t rows = s_rows0(dp);
    int64_t pad = rows % divisor ? divisor - rows % divisor : 0;
    if (rows == 0)
        pad = 0; /* nothing to repeat */
    if (pad_count)
        *pad_count = pad;
    if (pad == 0)
        return s_take_rows(dp, NULL, 0, rows);
    int64_t total;
    size_t bytes;
    if (__builtin_add_overflow(rows, pad, &total) ||
        __builtin_mul_overflow(sizeof(int64_t), (uint64_t)total, &bytes)) {
        rl_error_set(RL_ERANGE, "pad: %lld rows + %lld padding rows (divisor %lld) overflow "
                     "the size of the row index array", (long long)rows, (long long)pad,
                     (long long)divisor);
        return NULL;
    }
    return s_take_cycled(dp, bytes, total, rows, 0, "pad");
}

int rl_dataproto_chunk(const rl_dataproto *dp, int chunks, int pad, rl_dataproto **out,
                       int64_t *pad_count)
{
    if (chunks <= 0)
        return rl_error_set(RL_EINVAL, "chunk: chunks must be > 0, got %d", chunks);
    int64_t padded = 0;
    rl_dataproto *src = NULL;
    if (pad) {
        src = rl_dataproto_pad_to_divisor(dp, chunks, &padded);
        if (!src)
            return rl_error_code();
        dp = src;
    }
    if (pad_count)
        *pad_count = padded;
    int64_t rows = s_rows0(dp), base = rows / chunks, rem = rows % chunks, begin = 0;
    for (int k = 0; k < chunks; k++) {
        int64_t n = base + (k < rem ? 1 : 0);
        out[k] = s_take_rows(dp, NULL, begin, n);
        if (!out[k]) {
            for (int j = 0; j < k; j++) {
                rl_dataproto_free(out[j]);
                out[j] = NULL;
            }
            rl_dataproto_free(src);
            return rl_error_code();
        }
        begin += n;
    }
    rl_dataproto_free(src);
    return RL_OK;
}

int rl_dataproto_split(const rl_dataproto *dp, int64_t split_size, rl_dataproto ***out, int *n_out)
{
    if (split_size <= 0)
        return rl_error_set(RL_EINVAL, "split: split_size must be > 0, got %lld",
                            (long long)split_size);
    int64_t rows = s_rows0(dp);
    int64_t n64 = rows / split_size + (rows % split_size ? 1 : 0);
    if (n64 > INT_MAX)
        return rl_error_set(RL_ERANGE, "split: %lld rows in pieces of %lld make %lld pieces, "
                            "expected at most %d", (long long)rows, (long long)split_size,
                            (long long)n64, INT_MAX);
    int n = (int)n64;
    rl_dataproto **parts = calloc((size_t)(n ? n : 1), sizeof *parts);
    if (!parts)
        return rl_error_set(RL_ENOMEM, "split: out of memory");
    for (int k = 0; k < n; k++) {
        int64_t b = k * split_size, e = split_size < rows - b ? b + split_size : rows;
        parts[k] = s_take_rows(dp, NULL, b, e - b);
        if (!parts[k]) {
            for (int j = 0; j < k; j++)
                rl_dataproto_free(parts[j]);
            free(parts);
            return rl_error_code();
        }
    }
    *out = parts;
    *n_out = n;
    return RL_OK;
}

rl_dataproto *rl_dataproto_union(const rl_dataproto *a, const rl_dataproto *b)
{
    if (a->rows >= 0 && b->rows >= 0 && a->rows != b->rows) {
        rl_error_set(RL_ESHAPE, "union: expected %lld rows, got %lld", (long long)a->rows,
                     (long long)b->rows);
        return NULL;
    }
    rl_dataproto *dp = s_take_rows(a, NULL, 0, s_rows0(a));
    if (!dp)
        return NULL;
    dp->rows = a->rows >= 0 ? a->rows : b->rows;
    for (int i = 0; i < b->nt; i++) {
        const rl_tensor *have = rl_dataproto_tensor(dp, b->tnames[i]);
        if (have) {
            if (!rl_tensor_equal(have, b->tensors[i])) {
                rl_error_set(RL_EINVAL, "union: tensor '%s' differs between the two batches",
                             b->tnames[i]);
                goto fail;
            }
            continue;
        }
        if (rl_dataproto_add_tensor(dp, b->tnames[i], b->tensors[i]))
            goto fail;
    }
    for (int i = 0; i < b->nc; i++) {
        const rl_column *have = rl_dataproto_column(dp, b->cols[i]->name);
        if (have) {
            if (!s_column_equal(have, b->cols[i])) {
                rl_error_set(RL_EINVAL, "union: column '%s' differs between the two batches",
                             b->cols[i]->name);
                goto fail;
            }
            continue;
        }
        if (s_check_new_name(dp, b->cols[i]->name))
            goto fail;
        rl_column *c = s_column_gather(b->cols[i], NULL, 0, b->cols[i]->rows);
        if (!c || s_add_column(dp, c)) {
            s_column_free(c);
            goto fail;
        }
    }
    const char *key;
    json_t *val;
    json_object_foreach((json_t *)b->meta, key, val) {
        json_t *have = json_object_get(dp->meta, key);
        if (have) {
            if (!json_equal(have, val)) {
                rl_error_set(RL_EINVAL, "union: meta key '%s' differs between the two batches", key);
                goto fail;
            }
            continue;
        }
        json_object_set_new(dp->meta, key, json_deep_copy(val));
    }
    return dp;
fail:
    rl_dataproto_free(dp);
    return NULL;
}

rl_dataproto *rl_dataproto_repeat(const rl_dataproto *dp, int64_t times, int interleave)
{
    if (times <= 0) {
        rl_error_set(RL_EINVAL, "repeat: times must be > 0, got %lld", (long long)times);
        return NULL;
    }
    int64_t rows = s_rows0(dp);
    if (rows > INT64_MAX / times) {
        rl_error_set(RL_ERANGE, "repeat: %lld rows × %lld overflows", (long long)rows,
                     (long long)times);
        return NULL;
    }
    int64_t n = rows * times;
    size_t bytes;
    if (__builtin_mul_overflow(sizeof(int64_t), (uint64_t)(n ? n : 1), &bytes)) {
        rl_error_set(RL_ERANGE, "repeat: %lld rows × %lld = %lld row indices overflow size_t",
                     (long long)rows, (long long)times, (long long)n);
        return NULL;
    }
    return s_take_cycled(dp, bytes, n, rows, interleave ? times : 0, "repeat");
}

rl_dataproto *rl_dataproto_select(const rl_dataproto *dp, const char *const *tensors, int n_tensors,
                                  const char *const *columns, int n_columns)
{
    rl_dataproto *out = s_new_like(dp, dp->rows);
    if (!out)
        return NULL;
    for (int i = 0; i < (tensors ? n_tensors : dp->nt); i++) {
        const char *name = tensors ? tensors[i] : dp->tnames[i];
        rl_tensor *t = rl_dataproto_tensor(dp, name);
        if (!t) {
            rl_error_set(RL_ENOTFOUND, "select: tensor '%s' not in the batch", name);
            goto fail;
        }
        if (rl_dataproto_add_tensor(out, name, t))
            goto fail;
    }
    for (int i = 0; i < (columns ? n_columns : dp->nc); i++) {
        const char *name = columns ? columns[i] : dp->cols[i]->name;
        const rl_column *c = rl_dataproto_column(dp, name);
        if (!c) {
            rl_error_set(RL_ENOTFOUND, "select: column '%s' not in the batch", name);
            goto fail;
        }
        if (s_check_new_name(out, name))
            goto fail;
        rl_column *copy = s_column_gather(c, NULL, 0, c->rows);
        if (!copy || s_add_column(out, copy)) {
            s_column_free(copy);
            goto fail;
        }
    }
    return out;
fail:
    rl_dataproto_free(out);
    return NULL;
}

int rl_dataproto_reorder(rl_dataproto *dp, const int64_t *idx)
{
    int64_t rows = s_rows0(dp);
    unsigned char *seen = calloc((size_t)(rows ? rows : 1), 1);
    if (!seen)
        return rl_error_set(RL_ENOMEM, "reorder: out of memory");
    for (int64_t i = 0; i < rows; i++) {
        if (idx[i] < 0 || idx[i] >= rows || seen[idx[i]]) {
            int rc = rl_error_set(RL_EINVAL,
                                  "reorder: indices are not a permutation of 0..%lld: position "
                                  "%lld holds %lld (%s)",
                                  (long long)rows - 1, (long long)i, (long long)idx[i],
                                  (idx[i] < 0 || idx[i] >= rows) ? "out of range" : "repeated");
            free(seen);
            return rc;
        }
        seen[idx[i]] = 1;
    }
    free(seen);
    rl_dataproto *tmp = s_take_rows(dp, idx, 0, rows);
    if (!tmp)
        return rl_error_code();
    /* swap contents: dp takes tmp's tensors/columns, tmp takes the old ones */
    rl_dataproto old = *dp;
    dp->nt = tmp->nt, dp->capt = tmp->capt, dp->tnames = tmp->tnames, dp->tensors = tmp->tensors;
    dp->nc = tmp->nc, dp->capc = tmp->capc, dp->cols = tmp->cols;
    tmp->nt = old.nt, tmp->capt = old.capt, tmp->tnames = old.tnames, tmp->tensors = old.tensors;
    tmp->nc = old.nc, tmp->capc = old.capc, tmp->cols = old.cols;
    rl_dataproto_free(tmp);
    return RL_OK;
}

rl_dataproto *rl_dataproto_pop(rl_dataproto *dp, const char *const *names, int n)
{
    for (int k = 0; k < n; k++) {
        if (s_find_tensor(dp, names[k]) < 0 && s_find_column(dp, names[k]) < 0) {
            rl_error_set(RL_ENOTFOUND, "pop: no tensor or column named '%s'", names[k]);
            return NULL;
        }
    }
    rl_dataproto *out = s_new_like(dp, dp->rows);
    if (!out)
        return NULL;
    for (int k = 0; k < n; k++) {
        int i = s_find_tensor(dp, names[k]);
        if (i >= 0) {
            rl_tensor *t = s_detach_tensor(dp, i);
            int rc = rl_dataproto_add_tensor(out, names[k], t);
            rl_tensor_release(t);
            if (rc)
                goto fail;
            continue;
        }
        i = s_find_column(dp, names[k]);
        if (i < 0) {
            rl_error_set(RL_EEXIST, "pop: '%s' named twice", names[k]);
            goto fail;
        }
        rl_column *c = s_detach_column(dp, i);
        if (s_add_column(out, c)) {
            s_column_free(c);
            goto fail;
        }
    }
    return out;
fail:
    rl_dataproto_free(out);
    return NULL;
}

int rl_dataproto_equal(const rl_dataproto *a, const rl_dataproto *b)
{
    if (s_rows0(a) != s_rows0(b) || a->nt != b->nt || a->nc != b->nc || !json_equal(a->meta, b->meta))
        return 0;
    for (int i = 0; i < a->nt; i++) {
        const rl_tensor *y = rl_dataproto_tensor(b, a->tnames[i]);
        if (!y || !rl_tensor_equal(a->tensors[i], y))
            return 0;
    }
    for (int i = 0; i < a->nc; i++) {
        const rl_column *y = rl_dataproto_column(b, a->cols[i]->name);
        if (!y || !s_column_equal(a->cols[i], y))
            return 0;
    }
    return 1;
}

int rl_dataproto_union_into(rl_dataproto **a, rl_dataproto *b)
{
    rl_dataproto *all = rl_dataproto_union(*a, b);
    rl_dataproto_free(b);
    if (!all)
        return rl_error_code();
    rl_dataproto_free(*a);
    *a = all;
    return RL_OK;
}
