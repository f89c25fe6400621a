/* tensor.c — refcounted storage and tensor views (see rlrt/tensor.h). */
#include "rlrt/tensor.h"
#include "common/core/util.h"
#include "rlrt/error.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

/* Storages of 32 MiB and more (where glibc's malloc maps fresh pages anyway:
 * its largest mmap threshold) come straight from mmap: the kernel hands out
 * zeroed pages, so there is no memset pass over memory that is about to be
 * written (a DataProto concat, ...). No MADV_HUGEPAGE: with the common
 * `defrag: madvise` setting its first use can stall for a compaction (we
 * measured 0.6 s once). */
#define S_MMAP_MIN ((size_t)32 << 20)

static void s_munmap_release(void *data, void *ctx) { munmap(data, (size_t)(uintptr_t)ctx); }

/* s holding data (nbytes), one reference; release(data, ctx) at the last. */
static rl_storage *s_storage_init(rl_storage *s, void *data, size_t nbytes,
                                  rl_storage_release_fn release, void *ctx)
{
    s->data = data;
    s->nbytes = nbytes;
    atomic_init(&s->refcount, 1);
    s->release = release;
    s->ctx = ctx;
    return s;
}

static rl_storage *s_storage_mmap(rl_storage *s, size_t nbytes)
{
    size_t len = (nbytes + 4095) & ~(size_t)4095;
    void *data = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (data == MAP_FAILED) {
        free(s);
        rl_error_set(RL_ENOMEM, "storage of %zu bytes: out of memory", nbytes);
        return NULL;
    }
    return s_storage_init(s, data, nbytes, s_munmap_release, (void *)(uintptr_t)len);
}

rl_storage *rl_storage_new(size_t nbytes)
{
    rl_storage *s = malloc(sizeof *s);
    if (s && nbytes >= S_MMAP_MIN)
        return s_storage_mmap(s, nbytes);
    size_t alloc = (nbytes + 63) & ~(size_t)63;
    void *data = aligned_alloc(64, alloc ? alloc : 64);
    if (!s || !data) {
        free(s);
        free(data);
        rl_error_set(RL_ENOMEM, "storage of %zu bytes: out of memory", nbytes);
        return NULL;
    }
    memset(data, 0, alloc ? alloc : 64);
    return s_storage_init(s, data, nbytes, NULL, NULL);
}

rl_storage *rl_storage_wrap(void *data, size_t nbytes, rl_storage_release_fn release, void *ctx)
{
    rl_storage *s = malloc(sizeof *s);
    if (!s) {
        rl_error_set(RL_ENOMEM, "storage wrapper: out of memory");
        return NULL;
    }
    return s_storage_init(s, data, nbytes, release, ctx);
}

void rl_storage_retain(rl_storage *s) { atomic_fetch_add_explicit(&s->refcount, 1, memory_order_relaxed); }

void rl_storage_release(rl_storage *s)
{
    if (!s)
        return;
    if (atomic_fetch_sub_explicit(&s->refcount, 1, memory_order_acq_rel) != 1)
        return;
    if (s->release)
        s->release(s->data, s->ctx);
    else
        free(s->data);
    free(s);
}

int rl_shape_numel(int ndim, const int64_t *shape, int64_t *numel)
{
    if (ndim < 0 || ndim > RL_TENSOR_MAX_DIMS)
        return rl_error_set(RL_ESHAPE, "ndim %d not in [0, %d]", ndim, RL_TENSOR_MAX_DIMS);
    int64_t n = 1;
    for (int d = 0; d < ndim; d++) {
        if (shape[d] < 0)
            return rl_error_set(RL_ERANGE, "dim %d is negative (%lld)", d, (long long)shape[d]);
        if (shape[d] > 0 && n > INT64_MAX / shape[d])
            return rl_error_set(RL_ERANGE, "shape product overflows int64 at dim %d (%lld)", d,
                                (long long)shape[d]);
        n *= shape[d];
    }
    *numel = n;
    return RL_OK;
}

static rl_tensor *s_tensor_alloc(rl_storage *storage, size_t offset, rl_dtype dtype, int ndim,
                                 const int64_t *shape, int64_t numel)
{
    rl_tensor *t = rl_zalloc(sizeof *t, "tensor");
    if (!t)
        return NULL;
    t->storage = storage;
    t->offset = offset;
    t->dtype = dtype;
    t->ndim = ndim;
    for (int d = 0; d < ndim; d++)
        t->shape[d] = shape[d];
    t->numel = numel;
    atomic_init(&t->refcount, 1);
    return t;
}

/* numel × dtype size without overflow. */
static int s_nbytes(rl_dtype dtype, int ndim, const int64_t *shape, int64_t *numel, size_t *nbytes)
{
    if (!rl_dtype_valid((int)dtype))
        return rl_error_set(RL_EDTYPE, "unknown dtype code %d", (int)dtype);
    int rc = rl_shape_numel(ndim, shape, numel);
    if (rc)
        return rc;
    size_t es = rl_dtype_size((int)dtype);
    if ((uint64_t)*numel > SIZE_MAX / es)
        return rl_error_set(RL_ERANGE, "tensor of %lld %s elements is too large", (long long)*numel,
                            rl_dtype_name((int)dtype));
    *nbytes = (size_t)*numel * es;
    return RL_OK;
}

rl_tensor *rl_tensor_new(rl_dtype dtype, int ndim, const int64_t *shape)
{
    int64_t numel;
    size_t nbytes;
    if (s_nbytes(dtype, ndim, shape, &numel, &nbytes))
        return NULL;
    rl_storage *s = rl_storage_new(nbytes);
    if (!s)
        return NULL;
    rl_tensor *t = s_tensor_alloc(s, 0, dtype, ndim, shape, numel);
    if (!t)
        rl_storage_release(s);
    return t;
}

rl_tensor *rl_tensor_from_storage(rl_storage *storage, size_t offset, rl_dtype dtype, int ndim,
                                  const int64_t *shape)
{
    int64_t numel;
    size_t nbytes;
    if (s_nbytes(dtype, ndim, shape, &numel, &nbytes))
        return NULL;
    if (offset > storage->nbytes || nbytes > storage->nbytes - offset) {
        rl_error_set(RL_ERANGE, "tensor of %zu bytes at offset %zu exceeds storage of %zu bytes",
                     nbytes, offset, storage->nbytes);
        return NULL;
    }
    rl_tensor *t = s_tensor_alloc(storage, offset, dtype, ndim, shape, numel);
    if (t)
        rl_storage_retain(storage);
    return t;
}

rl_tensor *rl_tensor_from_data(rl_dtype dtype, int ndim, const int64_t *shape, const void *data)
{
    rl_tensor *t = rl_tensor_new(dtype, ndim, shape);
    if (t && t->numel)
        memcpy(rl_tensor_data(t), data, rl_tensor_nbytes(t));
    return t;
}

void *rl_tensor_data(const rl_tensor *t) { return (char *)t->storage->data + t->offset; }

size_t rl_tensor_nbytes(const rl_tensor *t) { return (size_t)t->numel * rl_dtype_size((int)t->dtype); }

size_t rl_tensor_row_bytes(const rl_tensor *t)
{
    if (t->ndim == 0)
        return 0;
    size_t row = rl_dtype_size((int)t->dtype);
    for (int d = 1; d < t->ndim; d++)
        row *= (size_t)t->shape[d];
    return row;
}

rl_tensor *rl_tensor_view_rows(const rl_tensor *t, int64_t begin, int64_t end)
{
    if (t->ndim < 1) {
        rl_error_set(RL_ESHAPE, "row view of a 0-d tensor");
        return NULL;
    }
    if (begin < 0 || end < begin || end > t->shape[0]) {
        rl_error_set(RL_ERANGE, "rows [%lld, %lld) outside [0, %lld)", (long long)begin,
                     (long long)end, (long long)t->shape[0]);
        return NULL;
    }
    int64_t shape[RL_TENSOR_MAX_DIMS];
    memcpy(shape, t->shape, sizeof shape);
    shape[0] = end - begin;
    size_t row = rl_tensor_row_bytes(t);
    return rl_tensor_from_storage(t->storage, t->offset + (size_t)begin * row, t->dtype, t->ndim,
                                  shape);
}

rl_tensor *rl_tensor_clone(const rl_tensor *t)
{
    return rl_tensor_from_data(t->dtype, t->ndim, t->shape, rl_tensor_data(t));
}

rl_tensor *rl_tensor_gather_rows(const rl_tensor *t, const int64_t *idx, int64_t n)
{
    if (t->ndim < 1) {
        rl_error_set(RL_ESHAPE, "row gather of a 0-d tensor");
        return NULL;
    }
    for (int64_t i = 0; i < n; i++) {
        if (idx[i] < 0 || idx[i] >= t->shape[0]) {
            rl_error_set(RL_ERANGE, "row index %lld at position %lld outside [0, %lld)",
                         (long long)idx[i], (long long)i, (long long)t->shape[0]);
            return NULL;
        }
    }
    int64_t shape[RL_TENSOR_MAX_DIMS];
    memcpy(shape, t->shape, sizeof shape);
    shape[0] = n;
    rl_tensor *out = rl_tensor_new(t->dtype, t->ndim, shape);
    if (!out)
        return NULL;
    size_t row = rl_tensor_row_bytes(t);
    const char *src = rl_tensor_data(t);
    char *dst = rl_tensor_data(out);
    for (int64_t i = 0; i < n; i++)
        memcpy(dst + (size_t)i * row, src + (size_t)idx[i] * row, row);
    return out;
}

rl_tensor *rl_tensor_retain(rl_tensor *t)
{
    atomic_fetch_add_explicit(&t->refcount, 1, memory_order_relaxed);
    return t;
}

void rl_tensor_release(rl_tensor *t)
{
    if (!t)
        return;
    if (atomic_fetch_sub_explicit(&t->refcount, 1, memory_order_acq_rel) != 1)
        return;
    rl_storage_release(t->storage);
    free(t);
}

int rl_tensor_equal(const rl_tensor *a, const rl_tensor *b)
{
    if (a->dtype != b->dtype || a->ndim != b->ndim)
        return 0;
    for (int d = 0; d < a->ndim; d++)
        if (a->shape[d] != b->shape[d])
            return 0;
    return memcmp(rl_tensor_data(a), rl_tensor_data(b), rl_tensor_nbytes(a)) == 0;
}

const char *rl_tensor_describe(const rl_tensor *t, char *buf, size_t len)
{
    int n = snprintf(buf, len, "%s[", rl_dtype_name((int)t->dtype));
    for (int d = 0; d < t->ndim && n > 0 && (size_t)n < len; d++)
        n += snprintf(buf + n, len - (size_t)n, d ? ", %lld" : "%lld", (long long)t->shape[d]);
    if (n > 0 && (size_t)n < len)
        snprintf(buf + n, len - (size_t)n, "]");
    return buf;
}
