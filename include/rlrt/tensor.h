/* rlrt/tensor.h — rl_tensor: typed, shaped, refcounted views of storage.
 *
 * Purpose: the tensor half of DataProto. A tensor is a contiguous row-major
 * block of `numel × dtype size` bytes at `offset` inside an rl_storage. Views
 * (row slices) share the storage; nothing is copied unless an operation has
 * to gather rows (index, repeat).
 *
 * Invariants:
 *   * 0 ≤ ndim ≤ RL_TENSOR_MAX_DIMS, every dim ≥ 0, numel fits in int64 and
 *     offset + nbytes ≤ storage->nbytes.
 *   * dim 0 is the row dimension when a tensor sits in a DataProto (ndim ≥ 1).
 *   * rl_storage and rl_tensor refcounts are atomic: retain/release from any
 *     thread (the ZeroMQ I/O thread releases storage after a zero-copy send).
 *
 * Ownership: *_new / *_view / *_wrap return an object with one reference the
 * caller owns; rl_tensor_release() drops it. A storage is freed (or its release
 * callback called) when the last tensor referencing it is released.
 */
#ifndef RLRT_TENSOR_H
#define RLRT_TENSOR_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "rlrt/dtype.h"

#ifdef __cplusplus
extern "C" {
#endif

#define RL_TENSOR_MAX_DIMS 8

typedef void (*rl_storage_release_fn)(void *data, void *ctx);

typedef struct rl_storage {
    void *data;
    size_t nbytes;
    atomic_int refcount;
    rl_storage_release_fn release; /* NULL: data was allocated by rlrt (free) */
    void *ctx;
} rl_storage;

/* 64-byte aligned, zeroed. NULL + message on failure. */
rl_storage *rl_storage_new(size_t nbytes);
/* Wraps foreign memory (e.g. a received ZeroMQ frame); `release(data, ctx)` is
 * called exactly once when the last reference goes. */
rl_storage *rl_storage_wrap(void *data, size_t nbytes, rl_storage_release_fn release,
                            void *ctx);
void rl_storage_retain(rl_storage *s);
void rl_storage_release(rl_storage *s);

typedef struct rl_tensor {
    rl_storage *storage;
    size_t offset; /* bytes */
    rl_dtype dtype;
    int ndim;
    int64_t shape[RL_TENSOR_MAX_DIMS];
    int64_t numel;
    atomic_int refcount;
} rl_tensor;

/* Product of dims with overflow checking; RL_ERANGE if it overflows int64 or
 * a dim is negative. */
int rl_shape_numel(int ndim, const int64_t *shape, int64_t *numel);

/* Zero-filled contiguous tensor. */
rl_tensor *rl_tensor_new(rl_dtype dtype, int ndim, const int64_t *shape);
/* A tensor over `storage` at byte `offset` (retains storage); validates that
 * the bytes fit. */
rl_tensor *rl_tensor_from_storage(rl_storage *storage, size_t offset, rl_dtype dtype,
                                  int ndim, const int64_t *shape);
/* New tensor holding a copy of `data` (nbytes = numel × dtype size). */
rl_tensor *rl_tensor_from_data(rl_dtype dtype, int ndim, const int64_t *shape,
                               const void *data);
/* Rows [begin, end) of dim 0, sharing storage. */
rl_tensor *rl_tensor_view_rows(const rl_tensor *t, int64_t begin, int64_t end);
/* Deep copy into fresh storage. */
rl_tensor *rl_tensor_clone(const rl_tensor *t);
/* Rows picked by idx[0..n) (duplicates allowed), copied. RL_ERANGE for an
 * index outside [0, rows). */
rl_tensor *rl_tensor_gather_rows(const rl_tensor *t, const int64_t *idx, int64_t n);

rl_tensor *rl_tensor_retain(rl_tensor *t);
void rl_tensor_release(rl_tensor *t);

/* The first byte of the view (storage data + offset). */
void *rl_tensor_data(const rl_tensor *t);
size_t rl_tensor_nbytes(const rl_tensor *t);
/* Bytes in one dim-0 row (numel/rows × dtype size); 0 for ndim 0. */
size_t rl_tensor_row_bytes(const rl_tensor *t);
/* Same dtype, shape and bytes. */
int rl_tensor_equal(const rl_tensor *a, const rl_tensor *b);
/* "f32[4, 128]" into buf. */
const char *rl_tensor_describe(const rl_tensor *t, char *buf, size_t len);

#ifdef __cplusplus
}
#endif
#endif
