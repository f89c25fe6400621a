/* common/nn/engine/safetensors.h — safetensors files: validated reader, atomic writer,
 * and the bridge to the flat parameter buffer (rlrt/nn/params.h).
 *
 * Format: 8-byte little-endian header length N, N bytes of UTF-8 JSON
 *   {"<name>": {"dtype": "F32", "shape": [2, 3], "data_offsets": [b, e]},
 *    ..., "__metadata__": {"key": "string", ...}}
 * then the data section; offsets are relative to its start.
 *
 * The reader trusts nothing. It rejects, with a message naming the tensor and
 * the field: a file shorter than 8 bytes, N = 0 or N beyond the file or above
 * 100 MB, JSON that does not parse or is not an object, duplicate keys, a
 * tensor entry that is not an object or has a missing/unknown/wrongly typed
 * field, a dtype outside {F64, F32, F16, BF16, I64, I32, I8, U8, BOOL}, a
 * shape that is not an array of integers >= 0, has more than
 * RL_ST_MAX_DIMS dims or whose element count or byte size overflows,
 * data_offsets that are not two integers 0 <= b <= e, e - b different from
 * numel × dtype size, offsets that overlap, leave gaps, or do not cover the
 * data section exactly, and a __metadata__ that is not an object of strings.
 *
 * The writer pads the header with spaces so the data starts 8-byte aligned,
 * orders tensors by dtype size (largest first) then name so that every
 * tensor is naturally aligned, and writes atomically: a temporary file in
 * the same directory, fsync, rename over the target, fsync of the directory.
 * Readers therefore see the old file or the new one, never a torn one.
 *
 * Data is little-endian (the library assumes a little-endian host).
 *
 * Ownership: rl_safetensors_open() maps the file read-only (private mapping)
 * and rl_safetensors_close() unmaps it (a file truncated by someone else
 * while mapped would fault on access; rlrt's own writers only ever replace
 * files by rename, which leaves an open mapping intact); names, shapes and data pointers
 * returned by the accessors live until then. rl_safetensors_from_memory()
 * borrows the caller's buffer, which must outlive the object. Data pointers
 * may be unaligned when the file was written by another tool: read them with
 * memcpy or rl_safetensors_read_f32().
 */
#ifndef RLRT_NN_SAFETENSORS_H
#define RLRT_NN_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "rlrt/dtype.h"
#include "rlrt/nn/params.h"

#ifdef __cplusplus
extern "C" {
#endif

#define RL_ST_MAX_DIMS 8
#define RL_ST_MAX_HEADER ((uint64_t)100 * 1000 * 1000)

typedef struct rl_safetensors rl_safetensors;

typedef struct rl_st_tensor {
    const char *name;
    rl_dtype dtype;
    int ndim;
    int64_t shape[RL_ST_MAX_DIMS];
    int64_t numel;
    const void *data; /* numel × rl_dtype_size(dtype) bytes */
    size_t nbytes;
} rl_st_tensor;

/* Reads and validates the file. NULL + message (naming the path) on error. */
rl_safetensors *rl_safetensors_open(const char *path);
/* Validates an in-memory image of a file; `what` names it in messages
 * (NULL: "<memory>"). Borrows buf. */
rl_safetensors *rl_safetensors_from_memory(const void *buf, size_t len, const char *what);
void rl_safetensors_close(rl_safetensors *st);

/* Tensors are numbered in data-offset order. */
int rl_safetensors_count(const rl_safetensors *st);
const rl_st_tensor *rl_safetensors_tensor(const rl_safetensors *st, int i);
/* Index of tensor `name`, or -1. */
int rl_safetensors_find(const rl_safetensors *st, const char *name);
const char *rl_safetensors_name(const rl_safetensors *st, int i);
rl_dtype rl_safetensors_dtype(const rl_safetensors *st, int i);
int rl_safetensors_ndim(const rl_safetensors *st, int i);
const int64_t *rl_safetensors_shape(const rl_safetensors *st, int i);
int64_t rl_safetensors_numel(const rl_safetensors *st, int i);
const void *rl_safetensors_data(const rl_safetensors *st, int i);
/* __metadata__: the value for `key` or NULL; the whole object (borrowed,
 * NULL when the file has none). */
const char *rl_safetensors_metadata(const rl_safetensors *st, const char *key);
const json_t *rl_safetensors_metadata_json(const rl_safetensors *st);

/* Converts tensor i (F32, F16, BF16 or F64) to float: out has `n` slots and
 * n must equal its numel. RL_EDTYPE for other dtypes, RL_ESHAPE for n. */
int rl_safetensors_read_f32(const rl_safetensors *st, int i, float *out, int64_t n);

/* Loads every view of `m` into params (m->total floats): each view must be
 * present with the same shape (RL_ENOTFOUND naming a missing view, RL_ESHAPE
 * for a shape mismatch) and dtype F32/F16/BF16/F64; a tensor in the file
 * that the manifest lacks is an error (RL_EINVAL) naming it. */
int rl_safetensors_load_params(const rl_safetensors *st, const rl_param_manifest *m,
                               float *params);
/* FSDP: the same checks, but fills only the flat range [begin, end) of the
 * buffer into shard[0 .. end-begin) (shard-local indexing, as rl_adamw). */
int rl_safetensors_load_params_range(const rl_safetensors *st, const rl_param_manifest *m,
                                     int64_t begin, int64_t end, float *shard);
/* open + load_params + close. */
int rl_safetensors_read_params(const char *path, const rl_param_manifest *m, float *params);

/* ---- a model directory: one file or Hugging Face shards ----------------------------
 * The weights of a model directory are dir/model.safetensors or, when that
 * is absent, the shards of a Hugging Face sharded checkpoint:
 * dir/model.safetensors.index.json ({"metadata": {...}, "weight_map":
 * {tensor name: shard file name}}) and the shard files beside it (plain
 * names, no '/'). Index and shards must agree: every tensor the index maps
 * is in its shard, and every tensor of a shard is mapped to it. */
#define RL_ST_SINGLE_FILE "model.safetensors"
#define RL_ST_INDEX_FILE "model.safetensors.index.json"

/* The directory's weights are there and readable: the single file's header,
 * or the index, every shard it names (a missing one is RL_ENOTFOUND naming
 * the shard, its path and a tensor the index puts there) and their headers,
 * in agreement. Reads headers only (the files are mapped, not read). */
int rl_safetensors_dir_check(const char *dir);
/* rl_safetensors_read_params of the directory's weights (the single file,
 * else the shards) with the same checks against the manifest; errors name
 * the file. */
int rl_safetensors_dir_read_params(const char *dir, const rl_param_manifest *m, float *params);

/* Writes every view of `m` from params as `dtype` (RL_F32, RL_BF16, RL_F16
 * or RL_F64), named by the view names. metadata: NULL or an object whose
 * values are all strings (written as __metadata__). Atomic. */
int rl_safetensors_write_params(const char *path, const rl_param_manifest *m,
                                const float *params, rl_dtype dtype,
                                const json_t *metadata);

/* One tensor to write: `data` holds numel × rl_dtype_size(dtype) bytes,
 * little-endian, row-major. ndim 0 is a scalar. */
typedef struct rl_st_entry {
    const char *name;
    rl_dtype dtype;
    int ndim;
    const int64_t *shape;
    const void *data;
} rl_st_entry;

/* Writes n tensors (unique, non-empty names, not "__metadata__") and the
 * optional metadata object of strings. Atomic. */
int rl_safetensors_write(const char *path, const rl_st_entry *tensors, int n,
                         const json_t *metadata);


#ifdef __cplusplus
}
#endif
#endif
