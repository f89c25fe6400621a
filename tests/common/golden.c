/* golden.c — golden-file reader for the tests (see golden.h). */
#include "tests/common/golden.h"

#include <jansson.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "rlrt/error.h"

struct rl_golden {
    unsigned char *file;
    size_t size;
    int count;
    rl_golden_array *arrays;
    json_t *meta;
};

static int s_dtype(const char *s, rl_golden_dtype *d, size_t *esize)
{
    static const struct { const char *n; rl_golden_dtype d; size_t sz; } t[] = {
        {"F64", RL_GOLDEN_F64, 8}, {"F32", RL_GOLDEN_F32, 4},
        {"I64", RL_GOLDEN_I64, 8}, {"I32", RL_GOLDEN_I32, 4},
        {"U8", RL_GOLDEN_U8, 1},   {"BOOL", RL_GOLDEN_BOOL, 1}};
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        if (strcmp(s, t[i].n) == 0) {
            *d = t[i].d;
            *esize = t[i].sz;
            return 0;
        }
    return -1;
}

rl_golden *rl_golden_load(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        rl_error_set(RL_ENOTFOUND, "golden file %s not found (run `make golden`)", path);
        return NULL;
    }
    rl_golden *g = calloc(1, sizeof *g);
    fseek(f, 0, SEEK_END);
    long sz = ftell(f);
    fseek(f, 0, SEEK_SET);
    g->size = (size_t)sz;
    /* 8-byte alignment: malloc is 16-aligned and the data starts at 8 + hlen,
     * hlen padded to 8 by golden.py. */
    g->file = malloc(g->size ? g->size : 1);
    if (fread(g->file, 1, g->size, f) != g->size || g->size < 8) {
        fclose(f);
        rl_golden_free(g);
        rl_error_set(RL_EIO, "golden file %s truncated", path);
        return NULL;
    }
    fclose(f);
    uint64_t hlen;
    memcpy(&hlen, g->file, 8);
    if (hlen > g->size - 8) {
        rl_golden_free(g);
        rl_error_set(RL_EPROTO, "golden file %s: bad header length", path);
        return NULL;
    }
    json_error_t jerr;
    json_t *h = json_loadb((const char *)g->file + 8, hlen, 0, &jerr);
    if (!h || !json_is_object(h)) {
        rl_golden_free(g);
        rl_error_set(RL_EPROTO, "golden file %s: bad JSON header: %s", path, jerr.text);
        return NULL;
    }
    size_t n = json_object_size(h);
    g->arrays = calloc(n ? n : 1, sizeof *g->arrays);
    const char *key;
    json_t *val;
    const unsigned char *base = g->file + 8 + hlen;
    json_object_foreach(h, key, val) {
        if (strcmp(key, "__metadata__") == 0) {
            g->meta = json_incref(val);
            continue;
        }
        rl_golden_array *a = &g->arrays[g->count];
        size_t esize;
        if (s_dtype(json_string_value(json_object_get(val, "dtype")), &a->dtype, &esize) != 0) {
            rl_error_set(RL_EDTYPE, "golden %s: %s has unknown dtype", path, key);
            json_decref(h);
            rl_golden_free(g);
            return NULL;
        }
        json_t *shape = json_object_get(val, "shape");
        a->ndim = (int)json_array_size(shape);
        a->numel = 1;
        for (int d = 0; d < a->ndim && d < 8; d++) {
            a->shape[d] = json_integer_value(json_array_get(shape, (size_t)d));
            a->numel *= a->shape[d];
        }
        json_t *off = json_object_get(val, "data_offsets");
        int64_t b0 = json_integer_value(json_array_get(off, 0));
        int64_t b1 = json_integer_value(json_array_get(off, 1));
        if (b0 < 0 || b1 < b0 || (uint64_t)b1 > g->size - 8 - hlen ||
            (uint64_t)(b1 - b0) != (uint64_t)a->numel * esize) {
            rl_error_set(RL_EPROTO, "golden %s: %s has bad offsets", path, key);
            json_decref(h);
            rl_golden_free(g);
            return NULL;
        }
        a->name = strdup(key);
        a->data = base + b0;
        g->count++;
    }
    json_decref(h);
    return g;
}

void rl_golden_free(rl_golden *g)
{
    if (!g)
        return;
    for (int i = 0; i < g->count; i++)
        free((char *)g->arrays[i].name);
    free(g->arrays);
    free(g->file);
    if (g->meta)
        json_decref(g->meta);
    free(g);
}

const rl_golden_array *rl_golden_get(const rl_golden *g, const char *name)
{
    for (int i = 0; i < g->count; i++)
        if (strcmp(g->arrays[i].name, name) == 0)
            return &g->arrays[i];
    return NULL;
}

const char *rl_golden_meta(const rl_golden *g, const char *key)
{
    if (!g->meta)
        return NULL;
    return json_string_value(json_object_get(g->meta, key));
}

int rl_golden_count(const rl_golden *g) { return g->count; }
const rl_golden_array *rl_golden_at(const rl_golden *g, int i) { return &g->arrays[i]; }

static double s_elem(const rl_golden_array *a, int64_t i)
{
    const unsigned char *p = a->data;
    switch (a->dtype) {
    case RL_GOLDEN_F64: { double v; memcpy(&v, p + 8 * i, 8); return v; }
    case RL_GOLDEN_F32: { float v; memcpy(&v, p + 4 * i, 4); return v; }
    case RL_GOLDEN_I64: { int64_t v; memcpy(&v, p + 8 * i, 8); return (double)v; }
    case RL_GOLDEN_I32: { int32_t v; memcpy(&v, p + 4 * i, 4); return v; }
    case RL_GOLDEN_U8:
    case RL_GOLDEN_BOOL: return p[i];
    }
    return 0;
}

static const rl_golden_array *s_need(const rl_golden *g, const char *name)
{
    const rl_golden_array *a = rl_golden_get(g, name);
    if (!a)
        fail_msg("golden array '%s' missing", name);
    return a;
}

double *rl_golden_f64(const rl_golden *g, const char *name, int64_t *numel)
{
    const rl_golden_array *a = s_need(g, name);
    double *out = malloc(sizeof(double) * (size_t)(a->numel ? a->numel : 1));
    for (int64_t i = 0; i < a->numel; i++)
        out[i] = s_elem(a, i);
    if (numel)
        *numel = a->numel;
    return out;
}

float *rl_golden_f32(const rl_golden *g, const char *name, int64_t *numel)
{
    const rl_golden_array *a = s_need(g, name);
    float *out = malloc(sizeof(float) * (size_t)(a->numel ? a->numel : 1));
    for (int64_t i = 0; i < a->numel; i++)
        out[i] = (float)s_elem(a, i);
    if (numel)
        *numel = a->numel;
    return out;
}

int64_t *rl_golden_i64(const rl_golden *g, const char *name, int64_t *numel)
{
    const rl_golden_array *a = s_need(g, name);
    int64_t *out = malloc(sizeof(int64_t) * (size_t)(a->numel ? a->numel : 1));
    for (int64_t i = 0; i < a->numel; i++) {
        if (a->dtype == RL_GOLDEN_I64)
            memcpy(&out[i], (const unsigned char *)a->data + 8 * i, 8);
        else
            out[i] = (int64_t)s_elem(a, i);
    }
    if (numel)
        *numel = a->numel;
    return out;
}

double rl_golden_scalar(const rl_golden *g, const char *name)
{
    const rl_golden_array *a = s_need(g, name);
    if (a->numel != 1)
        fail_msg("golden array '%s' is not a scalar (numel %lld)", name, (long long)a->numel);
    return s_elem(a, 0);
}

static int s_close(double got, double want, double atol, double rtol)
{
    if (isnan(want))
        return isnan(got);
    if (isinf(want))
        return got == want;
    return fabs(got - want) <= atol + rtol * fabs(want);
}

int64_t rl_check_close_f64(const char *what, const double *got,
                           const double *want, int64_t n, double atol, double rtol)
{
    int64_t bad = 0, first = -1;
    double worst = 0;
    for (int64_t i = 0; i < n; i++) {
        if (!s_close(got[i], want[i], atol, rtol)) {
            if (first < 0)
                first = i;
            bad++;
        }
        double d = fabs(got[i] - want[i]);
        if (d > worst)
            worst = d;
    }
    if (bad)
        print_error("%s: %lld of %lld values differ (atol %g, rtol %g); first at [%lld]: "
                    "got %.9g want %.9g; max |diff| %.3g\n",
                    what, (long long)bad, (long long)n, atol, rtol, (long long)first,
                    got[first], want[first], worst);
    return bad;
}

int64_t rl_check_close_f32(const char *what, const float *got,
                           const double *want, int64_t n, double atol, double rtol)
{
    double *tmp = malloc(sizeof(double) * (size_t)(n ? n : 1));
    for (int64_t i = 0; i < n; i++)
        tmp[i] = got[i];
    int64_t bad = rl_check_close_f64(what, tmp, want, n, atol, rtol);
    free(tmp);
    return bad;
}
