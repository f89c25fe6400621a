/* safetensors.c — validated safetensors reader and atomic writer (see
 * common/nn/engine/safetensors.h). */
#include "common/nn/engine/safetensors.h"
#include "common/core/util.h"
#include "rlrt/error.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

struct rl_safetensors {
    void *map; /* mmap'd file, or NULL when borrowed */
    size_t map_len;
    const uint8_t *data; /* start of the data section */
    size_t data_len;
    json_t *header; /* owns the tensor names */
    json_t *meta;   /* borrowed from header, may be NULL */
    rl_st_tensor *t;
    int n;
};

/* ---- dtype names (strict: exactly the safetensors spellings) ---------------- */

static const struct {
    const char *name;
    rl_dtype dtype;
} s_st_dtypes[] = {
    {"F64", RL_F64}, {"F32", RL_F32}, {"F16", RL_F16}, {"BF16", RL_BF16}, {"I64", RL_I64},
    {"I32", RL_I32}, {"I8", RL_I8},   {"U8", RL_U8},   {"BOOL", RL_BOOL},
};
#define S_NDTYPES ((int)(sizeof s_st_dtypes / sizeof s_st_dtypes[0]))

static int s_dtype_from_name(const char *name, rl_dtype *out)
{
    for (int i = 0; i < S_NDTYPES; i++)
        if (strcmp(name, s_st_dtypes[i].name) == 0) {
            *out = s_st_dtypes[i].dtype;
            return 1;
        }
    return 0;
}

static const char *s_dtype_to_name(rl_dtype d)
{
    for (int i = 0; i < S_NDTYPES; i++)
        if (s_st_dtypes[i].dtype == d)
            return s_st_dtypes[i].name;
    return NULL;
}

/* ---- parsing ---------------------------------------------------------------- */


static int s_cmp_offsets(const void *a, const void *b)
{
    const rl_st_tensor *x = a, *y = b;
    const uint8_t *px = x->data, *py = y->data;
    if (px != py)
        return px < py ? -1 : 1;
    if (x->nbytes != y->nbytes)
        return x->nbytes < y->nbytes ? -1 : 1;
    return strcmp(x->name, y->name);
}

/* Parses one tensor entry; begin/end are returned for the coverage check. */
static int s_parse_entry(const char *what, const char *name, json_t *e, size_t data_len,
                         rl_st_tensor *t, uint64_t *begin, uint64_t *end)
{
    if (!json_is_object(e))
        return rl_error_set(RL_EPROTO, "%s: tensor '%s': entry is a %s, expected an object with "
                            "dtype, shape, data_offsets", what, name, rl_json_type_name(e));
    const char *key;
    json_t *val;
    json_object_foreach(e, key, val) {
        if (strcmp(key, "dtype") && strcmp(key, "shape") && strcmp(key, "data_offsets"))
            return rl_error_set(RL_EPROTO, "%s: tensor '%s': unknown field '%s' (expected dtype, "
                                "shape, data_offsets)", what, name, key);
    }
    json_t *jd = json_object_get(e, "dtype");
    json_t *js = json_object_get(e, "shape");
    json_t *jo = json_object_get(e, "data_offsets");
    if (!jd)
        return rl_error_set(RL_EPROTO, "%s: tensor '%s': missing field 'dtype'", what, name);
    if (!js)
        return rl_error_set(RL_EPROTO, "%s: tensor '%s': missing field 'shape'", what, name);
    if (!jo)
        return rl_error_set(RL_EPROTO, "%s: tensor '%s': missing field 'data_offsets'", what,
                            name);
    if (!json_is_string(jd))
        return rl_error_set(RL_EPROTO, "%s: tensor '%s': field 'dtype' is a %s, expected a string",
                            what, name, rl_json_type_name(jd));
    if (!s_dtype_from_name(json_string_value(jd), &t->dtype))
        return rl_error_set(RL_EDTYPE, "%s: tensor '%s': field 'dtype': unsupported dtype '%s' "
                            "(expected F64, F32, F16, BF16, I64, I32, I8, U8 or BOOL)",
                            what, name, json_string_value(jd));
    if (!json_is_array(js))
        return rl_error_set(RL_EPROTO, "%s: tensor '%s': field 'shape' is a %s, expected an array",
                            what, name, rl_json_type_name(js));
    size_t nd = json_array_size(js);
    if (nd > RL_ST_MAX_DIMS)
        return rl_error_set(RL_ESHAPE, "%s: tensor '%s': field 'shape' has %zu dims (at most %d "
                            "supported)", what, name, nd, RL_ST_MAX_DIMS);
    t->ndim = (int)nd;
    uint64_t numel = 1;
    for (size_t d = 0; d < nd; d++) {
        json_t *x = json_array_get(js, d);
        if (!json_is_integer(x))
            return rl_error_set(RL_EPROTO, "%s: tensor '%s': field 'shape'[%zu] is a %s, expected "
                                "an integer", what, name, d, rl_json_type_name(x));
        json_int_t v = json_integer_value(x);
        if (v < 0)
            return rl_error_set(RL_ESHAPE, "%s: tensor '%s': field 'shape'[%zu] = %lld is negative",
                                what, name, d, (long long)v);
        if (v > 0 && numel > (uint64_t)INT64_MAX / (uint64_t)v)
            return rl_error_set(RL_ERANGE, "%s: tensor '%s': field 'shape': element count "
                                "overflows at dim %zu", what, name, d);
        numel *= (uint64_t)v;
        t->shape[d] = v;
    }
    size_t esz = rl_dtype_size(t->dtype);
    if (numel > (uint64_t)SIZE_MAX / esz || numel * esz > (uint64_t)INT64_MAX)
        return rl_error_set(RL_ERANGE, "%s: tensor '%s': field 'shape': byte size of %llu %s "
                            "elements overflows", what, name, (unsigned long long)numel,
                            json_string_value(jd));
    t->numel = (int64_t)numel;
    t->nbytes = (size_t)numel * esz;
    if (!json_is_array(jo))
        return rl_error_set(RL_EPROTO, "%s: tensor '%s': field 'data_offsets' is a %s, expected "
                            "an array of 2 integers", what, name, rl_json_type_name(jo));
    if (json_array_size(jo) != 2)
        return rl_error_set(RL_EPROTO, "%s: tensor '%s': field 'data_offsets' has %zu elements, "
                            "expected 2", what, name, json_array_size(jo));
    json_int_t off[2];
    for (int k = 0; k < 2; k++) {
        json_t *x = json_array_get(jo, (size_t)k);
        if (!json_is_integer(x))
            return rl_error_set(RL_EPROTO, "%s: tensor '%s': field 'data_offsets'[%d] is a %s, "
                                "expected an integer", what, name, k, rl_json_type_name(x));
        off[k] = json_integer_value(x);
        if (off[k] < 0)
            return rl_error_set(RL_ERANGE, "%s: tensor '%s': field 'data_offsets'[%d] = %lld is "
                                "negative", what, name, k, (long long)off[k]);
    }
    if (off[1] < off[0])
        return rl_error_set(RL_ERANGE, "%s: tensor '%s': field 'data_offsets' [%lld, %lld]: end "
                            "before begin", what, name, (long long)off[0], (long long)off[1]);
    if ((uint64_t)off[1] > (uint64_t)data_len)
        return rl_error_set(RL_ERANGE, "%s: tensor '%s': field 'data_offsets' [%lld, %lld] "
                            "exceeds the data section of %zu bytes (truncated file?)", what, name,
                            (long long)off[0], (long long)off[1], data_len);
    if ((uint64_t)(off[1] - off[0]) != (uint64_t)t->nbytes)
        return rl_error_set(RL_ESHAPE, "%s: tensor '%s': field 'data_offsets' [%lld, %lld] spans "
                            "%lld bytes but shape × dtype %s needs %zu", what, name,
                            (long long)off[0], (long long)off[1], (long long)(off[1] - off[0]),
                            json_string_value(jd), t->nbytes);
    *begin = (uint64_t)off[0];
    *end = (uint64_t)off[1];
    t->name = name;
    return RL_OK;
}

static int s_parse_metadata(const char *what, json_t *m)
{
    if (!json_is_object(m))
        return rl_error_set(RL_EPROTO, "%s: field '__metadata__' is a %s, expected an object of "
                            "strings", what, rl_json_type_name(m));
    const char *key;
    json_t *val;
    json_object_foreach(m, key, val) {
        if (!json_is_string(val))
            return rl_error_set(RL_EPROTO, "%s: field '__metadata__': value of '%s' is a %s, "
                                "expected a string", what, key, rl_json_type_name(val));
    }
    return RL_OK;
}

/* Validates buf[0..len) into st (whose map fields the caller set). */
static int s_parse(rl_safetensors *st, const uint8_t *buf, size_t len, const char *what)
{
    if (len < 8)
        return rl_error_set(RL_EPROTO, "%s: truncated: %zu bytes, shorter than the 8-byte header "
                            "length", what, len);
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--)
        hlen = (hlen << 8) | buf[i];
    if (hlen == 0)
        return rl_error_set(RL_EPROTO, "%s: header length is 0", what);
    if (hlen > RL_ST_MAX_HEADER)
        return rl_error_set(RL_EPROTO, "%s: header length %llu exceeds the %llu-byte limit", what,
                            (unsigned long long)hlen, (unsigned long long)RL_ST_MAX_HEADER);
    if (hlen > len - 8)
        return rl_error_set(RL_EPROTO, "%s: header length %llu exceeds the %zu bytes after the "
                            "length field (truncated file?)", what, (unsigned long long)hlen,
                            len - 8);
    json_error_t jerr;
    st->header = json_loadb((const char *)buf + 8, (size_t)hlen, JSON_REJECT_DUPLICATES, &jerr);
    if (!st->header)
        return rl_error_set(RL_EPROTO, "%s: header is not valid JSON: %s (line %d, column %d)",
                            what, jerr.text, jerr.line, jerr.column);
    if (!json_is_object(st->header))
        return rl_error_set(RL_EPROTO, "%s: header is a JSON %s, expected an object", what,
                            rl_json_type_name(st->header));
    st->data = buf + 8 + hlen;
    st->data_len = len - 8 - (size_t)hlen;
    size_t cap = json_object_size(st->header);
    st->t = calloc(cap ? cap : 1, sizeof *st->t);
    if (!st->t)
        return rl_error_set(RL_ENOMEM, "%s: out of memory for %zu tensors", what, cap);
    const char *key;
    json_t *val;
    int rc = RL_OK;
    json_object_foreach(st->header, key, val) {
        if (strcmp(key, "__metadata__") == 0) {
            if ((rc = s_parse_metadata(what, val)) < 0)
                break;
            st->meta = val;
            continue;
        }
        if (key[0] == '\0') {
            rc = rl_error_set(RL_EPROTO, "%s: a tensor has an empty name", what);
            break;
        }
        uint64_t b = 0, e = 0;
        rl_st_tensor *t = &st->t[st->n];
        if ((rc = s_parse_entry(what, key, val, st->data_len, t, &b, &e)) < 0)
            break;
        t->data = st->data + b; /* data/nbytes carry the offsets for sorting */
        st->n++;
    }
    if (rc < 0)
        return rc;
    qsort(st->t, (size_t)st->n, sizeof *st->t, s_cmp_offsets);
    size_t expect = 0;
    for (int i = 0; i < st->n; i++) {
        const rl_st_tensor *t = &st->t[i];
        size_t b = (size_t)((const uint8_t *)t->data - st->data);
        if (b < expect)
            return rl_error_set(RL_EPROTO, "%s: tensor '%s': field 'data_offsets' [%zu, %zu] "
                                "overlaps tensor '%s' which ends at %zu", what, t->name, b,
                                b + t->nbytes, st->t[i - 1].name, expect);
        if (b > expect)
            return rl_error_set(RL_EPROTO, "%s: tensor '%s': field 'data_offsets' [%zu, %zu] "
                                "leaves a gap of %zu bytes after offset %zu", what, t->name, b,
                                b + t->nbytes, b - expect, expect);
        expect = b + t->nbytes;
    }
    if (expect != st->data_len)
        return rl_error_set(RL_EPROTO, "%s: tensors cover %zu bytes of data but the data section "
                            "has %zu (trailing bytes)", what, expect, st->data_len);
    return RL_OK;
}

rl_safetensors *rl_safetensors_from_memory(const void *buf, size_t len, const char *what)
{
    rl_safetensors *st = calloc(1, sizeof *st);
    if (!st) {
        rl_error_set(RL_ENOMEM, "safetensors: out of memory");
        return NULL;
    }
    if (s_parse(st, buf, len, what ? what : "<memory>") < 0) {
        rl_safetensors_close(st);
        return NULL;
    }
    return st;
}

rl_safetensors *rl_safetensors_open(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        rl_error_set(errno == ENOENT ? RL_ENOTFOUND : RL_EIO, "%s: cannot open: %s", path,
                     strerror(errno));
        return NULL;
    }
    struct stat sb;
    if (fstat(fd, &sb) < 0 || !S_ISREG(sb.st_mode)) {
        rl_error_set(RL_EIO, "%s: not a regular file", path);
        close(fd);
        return NULL;
    }
    rl_safetensors *st = calloc(1, sizeof *st);
    if (!st) {
        close(fd);
        rl_error_set(RL_ENOMEM, "safetensors: out of memory");
        return NULL;
    }
    size_t len = (size_t)sb.st_size;
    static const uint8_t empty[1];
    const uint8_t *buf = empty;
    if (len > 0) {
        void *map = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
        if (map == MAP_FAILED) {
            rl_error_set(RL_EIO, "%s: mmap of %zu bytes failed: %s", path, len, strerror(errno));
            close(fd);
            free(st);
            return NULL;
        }
        st->map = map;
        st->map_len = len;
        buf = map;
    }
    close(fd);
    if (s_parse(st, buf, len, path) < 0) {
        rl_safetensors_close(st);
        return NULL;
    }
    return st;
}

void rl_safetensors_close(rl_safetensors *st)
{
    if (!st)
        return;
    if (st->map)
        munmap(st->map, st->map_len);
    json_decref(st->header);
    free(st->t);
    free(st);
}

/* ---- accessors -------------------------------------------------------------- */

int rl_safetensors_count(const rl_safetensors *st) { return st->n; }

const rl_st_tensor *rl_safetensors_tensor(const rl_safetensors *st, int i)
{
    return (i >= 0 && i < st->n) ? &st->t[i] : NULL;
}

int rl_safetensors_find(const rl_safetensors *st, const char *name)
{
    for (int i = 0; i < st->n; i++)
        if (strcmp(st->t[i].name, name) == 0)
            return i;
    return -1;
}

const char *rl_safetensors_name(const rl_safetensors *st, int i)
{
    return (i >= 0 && i < st->n) ? st->t[i].name : NULL;
}

rl_dtype rl_safetensors_dtype(const rl_safetensors *st, int i)
{
    return (i >= 0 && i < st->n) ? st->t[i].dtype : (rl_dtype)0;
}

int rl_safetensors_ndim(const rl_safetensors *st, int i)
{
    return (i >= 0 && i < st->n) ? st->t[i].ndim : -1;
}

const int64_t *rl_safetensors_shape(const rl_safetensors *st, int i)
{
    return (i >= 0 && i < st->n) ? st->t[i].shape : NULL;
}

int64_t rl_safetensors_numel(const rl_safetensors *st, int i)
{
    return (i >= 0 && i < st->n) ? st->t[i].numel : -1;
}

const void *rl_safetensors_data(const rl_safetensors *st, int i)
{
    return (i >= 0 && i < st->n) ? st->t[i].data : NULL;
}

const char *rl_safetensors_metadata(const rl_safetensors *st, const char *key)
{
    if (!st->meta)
        return NULL;
    return json_string_value(json_object_get(st->meta, key));
}

const json_t *rl_safetensors_metadata_json(const rl_safetensors *st) { return st->meta; }

/* ---- conversion ------------------------------------------------------------- */

static void s_to_f32(rl_dtype dt, const uint8_t *src, float *out, int64_t n)
{
    switch (dt) {
    case RL_F32:
        memcpy(out, src, (size_t)n * 4);
        break;
    case RL_BF16:
    case RL_F16: {
        const int bf16 = dt == RL_BF16;
#pragma omp parallel for schedule(static) if (n >= (1 << 18))
        for (int64_t i = 0; i < n; i++) {
            uint16_t h;
            memcpy(&h, src + 2 * i, 2);
            out[i] = bf16 ? rl_bf16_to_f32(h) : rl_f16_to_f32(h);
        }
        break;
    }
    case RL_F64:
        for (int64_t i = 0; i < n; i++) {
            double d;
            memcpy(&d, src + 8 * i, 8);
            out[i] = (float)d;
        }
        break;
    default:
        break;
    }
}

static void s_from_f32(rl_dtype dt, const float *src, uint8_t *out, int64_t n)
{
    switch (dt) {
    case RL_F32:
        memcpy(out, src, (size_t)n * 4);
        break;
    case RL_BF16:
    case RL_F16:
        for (int64_t i = 0; i < n; i++) {
            uint16_t h = dt == RL_BF16 ? rl_f32_to_bf16(src[i]) : rl_f32_to_f16(src[i]);
            memcpy(out + 2 * i, &h, 2);
        }
        break;
    case RL_F64:
        for (int64_t i = 0; i < n; i++) {
            double d = src[i];
            memcpy(out + 8 * i, &d, 8);
        }
        break;
    default:
        break;
    }
}

static int s_is_float(rl_dtype d)
{
    return d == RL_F32 || d == RL_F16 || d == RL_BF16 || d == RL_F64;
}

int rl_safetensors_read_f32(const rl_safetensors *st, int i, float *out, int64_t n)
{
    if (i < 0 || i >= st->n)
        return rl_error_set(RL_ERANGE, "safetensors: tensor index %d not in [0, %d)", i, st->n);
    const rl_st_tensor *t = &st->t[i];
    if (!s_is_float(t->dtype))
        return rl_error_set(RL_EDTYPE, "tensor '%s': dtype %s cannot be read as f32 (expected "
                            "F32, F16, BF16 or F64)", t->name, s_dtype_to_name(t->dtype));
    if (n != t->numel)
        return rl_error_set(RL_ESHAPE, "tensor '%s': has %lld elements, caller expects %lld",
                            t->name, (long long)t->numel, (long long)n);
    s_to_f32(t->dtype, t->data, out, n);
    return RL_OK;
}

static void s_shape_str(char *buf, size_t cap, int ndim, const int64_t *shape)
{
    size_t k = 0;
    k += (size_t)snprintf(buf + k, cap - k, "[");
    for (int d = 0; d < ndim && k < cap; d++)
        k += (size_t)snprintf(buf + k, cap - k, d ? ", %lld" : "%lld", (long long)shape[d]);
    if (k < cap)
        snprintf(buf + k, cap - k, "]");
}

/* Tensor `t` (view v's, from `what`) checked against the view (shape, float
 * dtype), and the part of the view that falls in [begin, end) converted. */
static int s_load_view(const rl_param_view *v, const rl_st_tensor *t, int64_t begin, int64_t end,
                       float *out)
{
    int same = t->ndim == v->ndim;
    for (int d = 0; same && d < v->ndim; d++)
        same = t->shape[d] == v->shape[d];
    if (!same) {
        char a[128], b[128];
        s_shape_str(a, sizeof a, v->ndim, v->shape);
        s_shape_str(b, sizeof b, t->ndim, t->shape);
        return rl_error_set(RL_ESHAPE, "parameter '%s': manifest shape %s, file shape %s",
                            v->name, a, b);
    }
    if (!s_is_float(t->dtype))
        return rl_error_set(RL_EDTYPE, "parameter '%s': dtype %s is not a float type "
                            "(expected F32, F16, BF16 or F64)", v->name,
                            s_dtype_to_name(t->dtype));
    int64_t lo = v->offset > begin ? v->offset : begin;
    int64_t hi = v->offset + v->numel < end ? v->offset + v->numel : end;
    if (lo >= hi)
        return RL_OK;
    const uint8_t *src = (const uint8_t *)t->data +
                         (size_t)(lo - v->offset) * rl_dtype_size(t->dtype);
    s_to_f32(t->dtype, src, out + (lo - begin), hi - lo);
    return RL_OK;
}

static int s_check_range(const rl_param_manifest *m, int64_t begin, int64_t end, const float *out)
{
    if (!m || (!out && end > begin))
        return rl_error_set(RL_EINVAL, "load params: NULL file, manifest or buffer");
    if (begin < 0 || end < begin || end > m->total)
        return rl_error_set(RL_ERANGE, "load params: range [%lld, %lld) not within [0, %lld)",
                            (long long)begin, (long long)end, (long long)m->total);
    return RL_OK;
}

/* Checks that file and manifest agree (names, shapes, float dtypes), then
 * converts the part of every view that falls in [begin, end). */
static int s_load_range(const rl_safetensors *st, const rl_param_manifest *m, int64_t begin,
                        int64_t end, float *out)
{
    int rc = st ? s_check_range(m, begin, end, out)
                : rl_error_set(RL_EINVAL, "load params: NULL file, manifest or buffer");
    if (rc)
        return rc;
    for (int i = 0; i < st->n; i++)
        if (rl_param_manifest_find(m, st->t[i].name) < 0)
            return rl_error_set(RL_EINVAL, "tensor '%s' in the file is not in the parameter "
                                "manifest (%d views)", st->t[i].name, m->count);
    for (int k = 0; k < m->count && !rc; k++) {
        const rl_param_view *v = &m->views[k];
        int i = rl_safetensors_find(st, v->name);
        if (i < 0)
            return rl_error_set(RL_ENOTFOUND, "parameter '%s' is missing from the file", v->name);
        rc = s_load_view(v, &st->t[i], begin, end, out);
    }
    return rc;
}

int rl_safetensors_load_params(const rl_safetensors *st, const rl_param_manifest *m,
                               float *params)
{
    return s_load_range(st, m, 0, m ? m->total : 0, params);
}

int rl_safetensors_load_params_range(const rl_safetensors *st, const rl_param_manifest *m,
                                     int64_t begin, int64_t end, float *shard)
{
    return s_load_range(st, m, begin, end, shard);
}

int rl_safetensors_read_params(const char *path, const rl_param_manifest *m, float *params)
{
    rl_safetensors *st = rl_safetensors_open(path);
    if (!st)
        return rl_error_code() ? rl_error_code() : RL_EIO;
    int rc = rl_safetensors_load_params(st, m, params);
    if (rc < 0)
        rl_error_wrap(rc, "%s", path);
    rl_safetensors_close(st);
    return rc;
}

/* ---- a model directory: one file or Hugging Face shards ------------------------------ */

typedef struct s_shards {
    char index_path[4200];
    json_t *index;         /* the index document */
    json_t *map;           /* its weight_map (borrowed) */
    int n;                 /* shard files */
    const char **names;    /* their names (borrowed from the index) */
    rl_safetensors **st;   /* open shards */
} s_shards;

static void s_shards_close(s_shards *s)
{
    for (int i = 0; i < s->n && s->st; i++)
        rl_safetensors_close(s->st[i]);
    free(s->st);
    free(s->names);
    json_decref(s->index);
    memset(s, 0, sizeof *s);
}

static int s_shard_of(const s_shards *s, const char *name)
{
    for (int i = 0; i < s->n; i++)
        if (strcmp(s->names[i], name) == 0)
            return i;
    return -1;
}

/* A shard's name is a plain file name in the directory. */
static int s_plain_name(const char *f)
{
    return *f && !strchr(f, '/') && strcmp(f, ".") != 0 && strcmp(f, "..") != 0;
}

/* Reads dir's index, opens every shard it names and checks that index and
 * shards agree: each tensor the index maps to a shard is in it, and each
 * tensor of a shard is mapped to that shard. */
static int s_shards_open(const char *dir, s_shards *s)
{
    memset(s, 0, sizeof *s);
    snprintf(s->index_path, sizeof s->index_path, "%s/%s", dir, RL_ST_INDEX_FILE);
    const char *ip = s->index_path;
    json_error_t je;
    s->index = json_load_file(ip, JSON_REJECT_DUPLICATES, &je);
    if (!s->index)
        return rl_error_set(RL_EPROTO, "%s:%d: cannot read the shard index: %s", ip, je.line,
                            je.text);
    s->map = json_is_object(s->index) ? json_object_get(s->index, "weight_map") : NULL;
    if (!json_is_object(s->map) || json_object_size(s->map) == 0)
        return rl_error_set(RL_EPROTO, "%s: expected an object with a non-empty object "
                            "'weight_map' (tensor name -> shard file)", ip);
    size_t cap = json_object_size(s->map);
    s->names = calloc(cap, sizeof *s->names);
    s->st = calloc(cap, sizeof *s->st);
    if (!s->names || !s->st)
        return rl_error_set(RL_ENOMEM, "%s: out of memory", ip);
    const char *key;
    json_t *v;
    json_object_foreach(s->map, key, v) {
        const char *f = json_string_value(v);
        if (!f || !s_plain_name(f))
            return rl_error_set(RL_EPROTO, "%s: weight_map['%s'] must be a file name in the "
                                "directory, got %s", ip, key, f ? f : "a non-string");
        if (s_shard_of(s, f) < 0)
            s->names[s->n++] = f;
    }
    for (int i = 0; i < s->n; i++) {
        char path[4600];
        snprintf(path, sizeof path, "%s/%s", dir, s->names[i]);
        if (access(path, F_OK) != 0) {
            int count = 0;
            const char *first = NULL;
            json_object_foreach(s->map, key, v) {
                if (strcmp(json_string_value(v), s->names[i]) == 0) {
                    first = first ? first : key;
                    count++;
                }
            }
            return rl_error_set(RL_ENOTFOUND, "%s: shard '%s' is missing (%s: %s); the index "
                                "puts %d tensors there, e.g. '%s'", ip, s->names[i], path,
                                strerror(errno), count, first);
        }
        if (!(s->st[i] = rl_safetensors_open(path)))
            return rl_error_wrap(rl_error_code(), "%s: shard '%s'", ip, s->names[i]);
    }
    json_object_foreach(s->map, key, v) {
        int i = s_shard_of(s, json_string_value(v));
        if (rl_safetensors_find(s->st[i], key) < 0)
            return rl_error_set(RL_ENOTFOUND, "%s: the index puts tensor '%s' in shard '%s', "
                                "which does not hold it", ip, key, s->names[i]);
    }
    for (int i = 0; i < s->n; i++)
        for (int k = 0; k < s->st[i]->n; k++) {
            const char *name = s->st[i]->t[k].name, *f = json_string_value(json_object_get(s->map, name));
            if (!f || strcmp(f, s->names[i]) != 0)
                return rl_error_set(RL_EPROTO, "%s: shard '%s' holds tensor '%s', which the "
                                    "index %s%s%s", ip, s->names[i], name,
                                    f ? "puts in shard '" : "does not list", f ? f : "", f ? "'" : "");
        }
    return RL_OK;
}

/* 1 when dir/name exists. */
static int s_has(const char *dir, const char *name)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return access(path, F_OK) == 0;
}

int rl_safetensors_dir_check(const char *dir)
{
    if (!dir)
        return rl_error_set(RL_EINVAL, "safetensors: NULL directory");
    if (s_has(dir, RL_ST_SINGLE_FILE)) {
        char path[4200];
        snprintf(path, sizeof path, "%s/%s", dir, RL_ST_SINGLE_FILE);
        rl_safetensors *st = rl_safetensors_open(path);
        rl_safetensors_close(st);
        return st ? RL_OK : rl_error_code();
    }
    if (!s_has(dir, RL_ST_INDEX_FILE))
        return rl_error_set(RL_ENOTFOUND, "%s: no %s and no %s (the weights)", dir,
                            RL_ST_SINGLE_FILE, RL_ST_INDEX_FILE);
    s_shards s;
    int rc = s_shards_open(dir, &s);
    s_shards_close(&s);
    return rc;
}

int rl_safetensors_dir_read_params(const char *dir, const rl_param_manifest *m, float *params)
{
    if (!dir)
        return rl_error_set(RL_EINVAL, "safetensors: NULL directory");
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, RL_ST_SINGLE_FILE);
    if (s_has(dir, RL_ST_SINGLE_FILE) || !s_has(dir, RL_ST_INDEX_FILE))
        return rl_safetensors_read_params(path, m, params);
    s_shards s;
    int rc = s_shards_open(dir, &s);
    if (!rc)
        rc = s_check_range(m, 0, m ? m->total : 0, params);
    const char *key;
    json_t *v;
    if (!rc)
        json_object_foreach(s.map, key, v) {
            if (rl_param_manifest_find(m, key) < 0) {
                rc = rl_error_set(RL_EINVAL, "%s: tensor '%s' (shard '%s') is not in the "
                                  "parameter manifest (%d views)", s.index_path, key,
                                  json_string_value(v), m->count);
                break;
            }
        }
    for (int k = 0; !rc && k < m->count; k++) {
        const rl_param_view *pv = &m->views[k];
        const char *f = json_string_value(json_object_get(s.map, pv->name));
        if (!f) {
            rc = rl_error_set(RL_ENOTFOUND, "%s: parameter '%s' is missing from the index",
                              s.index_path, pv->name);
            break;
        }
        int i = s_shard_of(&s, f);
        rc = s_load_view(pv, &s.st[i]->t[rl_safetensors_find(s.st[i], pv->name)], 0, m->total,
                         params);
        if (rc)
            rl_error_wrap(rc, "%s/%s", dir, f);
    }
    s_shards_close(&s);
    return rc;
}

/* ---- writer ------------------------------------------------------------------- */

typedef struct s_item {
    const char *name;
    rl_dtype dtype;
    int ndim;
    const int64_t *shape;
    const void *data;    /* raw bytes in `dtype`, or NULL when src_f32 is set */
    const float *src_f32; /* converted to dtype while writing */
    int64_t numel;
    size_t nbytes;
} s_item;

static int s_cmp_items(const void *a, const void *b)
{
    const s_item *x = a, *y = b;
    size_t sx = rl_dtype_size(x->dtype), sy = rl_dtype_size(y->dtype);
    if (sx != sy)
        return sx > sy ? -1 : 1;
    return strcmp(x->name, y->name);
}

static int s_check_items(const char *path, s_item *it, int n)
{
    for (int i = 0; i < n; i++) {
        s_item *t = &it[i];
        if (!t->name || !*t->name)
            return rl_error_set(RL_EINVAL, "%s: tensor %d has an empty name", path, i);
        if (strcmp(t->name, "__metadata__") == 0)
            return rl_error_set(RL_EINVAL, "%s: '__metadata__' is reserved, not a tensor name",
                                path);
        if (!s_dtype_to_name(t->dtype))
            return rl_error_set(RL_EDTYPE, "%s: tensor '%s': dtype %d has no safetensors name",
                                path, t->name, (int)t->dtype);
        if (t->ndim < 0 || t->ndim > RL_ST_MAX_DIMS || (t->ndim > 0 && !t->shape))
            return rl_error_set(RL_ESHAPE, "%s: tensor '%s': ndim %d not in [0, %d]", path,
                                t->name, t->ndim, RL_ST_MAX_DIMS);
        uint64_t numel = 1;
        for (int d = 0; d < t->ndim; d++) {
            if (t->shape[d] < 0)
                return rl_error_set(RL_ESHAPE, "%s: tensor '%s': shape[%d] = %lld is negative",
                                    path, t->name, d, (long long)t->shape[d]);
            if (t->shape[d] > 0 && numel > (uint64_t)INT64_MAX / (uint64_t)t->shape[d])
                return rl_error_set(RL_ERANGE, "%s: tensor '%s': element count overflows", path,
                                    t->name);
            numel *= (uint64_t)t->shape[d];
        }
        size_t esz = rl_dtype_size(t->dtype);
        if (numel > (uint64_t)(INT64_MAX / 8))
            return rl_error_set(RL_ERANGE, "%s: tensor '%s': byte size overflows", path, t->name);
        t->numel = (int64_t)numel;
        t->nbytes = (size_t)numel * esz;
        if (t->nbytes > 0 && !t->data && !t->src_f32)
            return rl_error_set(RL_EINVAL, "%s: tensor '%s': NULL data", path, t->name);
    }
    return RL_OK;
}

/* Validates, sorts (in place) and writes the items. */
static int s_write_items(const char *path, s_item *it, int n, const json_t *metadata)
{
    if (n < 0)
        return rl_error_set(RL_EINVAL, "%s: negative tensor count %d", path, n);
    int rc = s_check_items(path, it, n);
    if (rc < 0)
        return rc;
    qsort(it, (size_t)n, sizeof *it, s_cmp_items);
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j++)
            if (strcmp(it[i].name, it[j].name) == 0)
                return rl_error_set(RL_EEXIST, "%s: tensor name '%s' appears twice", path,
                                    it[i].name);
    if (metadata) {
        if (!json_is_object(metadata))
            return rl_error_set(RL_EINVAL, "%s: metadata must be a JSON object of strings", path);
        const char *key;
        json_t *val;
        json_object_foreach((json_t *)metadata, key, val) {
            if (!json_is_string(val))
                return rl_error_set(RL_EINVAL, "%s: metadata value of '%s' is a %s, expected a "
                                    "string", path, key, rl_json_type_name(val));
        }
    }
    json_t *h = json_object();
    if (!h)
        return rl_error_set(RL_ENOMEM, "%s: out of memory", path);
    rc = RL_OK;
    if (metadata && json_object_size(metadata) > 0)
        rc = json_object_set(h, "__metadata__", (json_t *)metadata) ? RL_ENOMEM : RL_OK;
    uint64_t off = 0;
    for (int i = 0; rc == RL_OK && i < n; i++) {
        json_t *shape = json_array();
        for (int d = 0; shape && d < it[i].ndim; d++)
            json_array_append_new(shape, json_integer(it[i].shape[d]));
        json_t *e = json_pack("{s:s, s:o, s:[I, I]}", "dtype", s_dtype_to_name(it[i].dtype),
                              "shape", shape, "data_offsets", (json_int_t)off,
                              (json_int_t)(off + it[i].nbytes));
        if (!e || json_object_set_new(h, it[i].name, e))
            rc = RL_ENOMEM;
        off += it[i].nbytes;
    }
    char *text = rc == RL_OK ? json_dumps(h, JSON_COMPACT) : NULL;
    json_decref(h);
    if (!text)
        return rl_error_set(RL_ENOMEM, "%s: out of memory building the header", path);
    size_t tlen = strlen(text), padded = (tlen + 7) & ~(size_t)7;
    rl_afile f;
    if ((rc = rl_afile_open(&f, path)) < 0) {
        free(text);
        return rc;
    }
    uint8_t lenbuf[8];
    for (int i = 0; i < 8; i++)
        lenbuf[i] = (uint8_t)((uint64_t)padded >> (8 * i));
    static const char spaces[9] = "        ";
    rc = rl_afile_write(&f, lenbuf, 8);
    if (rc == RL_OK)
        rc = rl_afile_write(&f, text, tlen);
    if (rc == RL_OK)
        rc = rl_afile_write(&f, spaces, padded - tlen);
    free(text);
    enum { CHUNK = 1 << 14 };
    uint8_t *conv = malloc((size_t)CHUNK * 8);
    if (!conv)
        rc = rl_error_set(RL_ENOMEM, "%s: out of memory", path);
    for (int i = 0; rc == RL_OK && i < n; i++) {
        if (!it[i].src_f32) {
            rc = rl_afile_write(&f, it[i].data, it[i].nbytes);
            continue;
        }
        size_t esz = rl_dtype_size(it[i].dtype);
        for (int64_t k = 0; rc == RL_OK && k < it[i].numel; k += CHUNK) {
            int64_t m = it[i].numel - k < CHUNK ? it[i].numel - k : CHUNK;
            s_from_f32(it[i].dtype, it[i].src_f32 + k, conv, m);
            rc = rl_afile_write(&f, conv, (size_t)m * esz);
        }
    }
    free(conv);
    if (rc < 0) {
        rl_afile_abort(&f);
        return rc;
    }
    return rl_afile_commit(&f);
}

int rl_safetensors_write(const char *path, const rl_st_entry *tensors, int n,
                         const json_t *metadata)
{
    if (n > 0 && !tensors)
        return rl_error_set(RL_EINVAL, "%s: NULL tensor list", path);
    s_item *it = calloc((size_t)(n > 0 ? n : 1), sizeof *it);
    if (!it)
        return rl_error_set(RL_ENOMEM, "%s: out of memory", path);
    for (int i = 0; i < n; i++) {
        it[i].name = tensors[i].name;
        it[i].dtype = tensors[i].dtype;
        it[i].ndim = tensors[i].ndim;
        it[i].shape = tensors[i].shape;
        it[i].data = tensors[i].data;
    }
    int rc = s_write_items(path, it, n, metadata);
    free(it);
    return rc;
}

int rl_safetensors_write_params(const char *path, const rl_param_manifest *m,
                                const float *params, rl_dtype dtype, const json_t *metadata)
{
    if (!m || (!params && m->total > 0))
        return rl_error_set(RL_EINVAL, "%s: NULL manifest or parameter buffer", path);
    if (!s_is_float(dtype))
        return rl_error_set(RL_EDTYPE, "%s: parameters can be written as f32, bf16, f16 or f64, "
                            "not %s", path, rl_dtype_name(dtype));
    s_item *it = calloc((size_t)(m->count > 0 ? m->count : 1), sizeof *it);
    if (!it)
        return rl_error_set(RL_ENOMEM, "%s: out of memory", path);
    for (int i = 0; i < m->count; i++) {
        const rl_param_view *v = &m->views[i];
        it[i].name = v->name;
        it[i].dtype = dtype;
        it[i].ndim = v->ndim;
        it[i].shape = v->shape;
        it[i].src_f32 = params + v->offset;
    }
    int rc = s_write_items(path, it, m->count, metadata);
    free(it);
    return rc;
}
