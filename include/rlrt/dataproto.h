/* rlrt/dataproto.h — DataProto: the batch that travels between rlrt roles.
 *
 * Purpose: verl's DataProto in C. Three parts:
 *   * tensors (verl `batch`): named rl_tensor, all sharing dim 0 = rows;
 *   * columns (verl `non_tensor_batch`): named per-row values of one type
 *     (string, int64, double, bytes, or a list of one of those per row);
 *   * meta (verl `meta_info`): a JSON object (jansson json_t) with nested
 *     maps/lists of int, real, string, bool, null.
 *
 * Operations mirror verl: concat, chunk (optionally padded, reporting the pad
 * count), split, union, repeat (interleave/tile), select, index, reorder, pop,
 * slice. Row slices (slice, chunk, split) and select are views: tensors share
 * storage. index/repeat/concat gather rows into new storage. Columns are always
 * copied (they are small).
 *
 * Invariants:
 *   * rows ≥ 0 once set; it is set by the first tensor/column added or by
 *     rl_dataproto_set_rows(); every tensor has ndim ≥ 1 and shape[0] == rows
 *     and every column has exactly `rows` cells.
 *   * names are unique within tensors and within columns.
 *   * every inconsistency is an error whose message names the key and the
 *     expected and actual size/dtype/shape.
 *
 * Ownership: functions returning rl_dataproto* give the caller a new object to
 * free with rl_dataproto_free() (NULL + rl_error_message() on error). Tensors
 * added with rl_dataproto_add_tensor() are retained (the caller keeps its own
 * reference). Getters return borrowed pointers valid until the dataproto is
 * changed or freed. Meta is owned by the dataproto.
 */
#ifndef RLRT_DATAPROTO_H
#define RLRT_DATAPROTO_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "rlrt/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The numeric codes are part of the wire format. */
typedef enum rl_column_type {
    RL_COL_STRING = 1,
    RL_COL_INT64 = 2,
    RL_COL_DOUBLE = 3,
    RL_COL_BYTES = 4,
    RL_COL_STRING_LIST = 5,
    RL_COL_INT64_LIST = 6,
    RL_COL_DOUBLE_LIST = 7,
    RL_COL_BYTES_LIST = 8
} rl_column_type;

const char *rl_column_type_name(int type);

typedef struct rl_column rl_column;
typedef struct rl_dataproto rl_dataproto;

/* ---- construction and access --------------------------------------------- */

rl_dataproto *rl_dataproto_new(void);
void rl_dataproto_free(rl_dataproto *dp);
/* Rows, or -1 while nothing fixed it yet. */
int64_t rl_dataproto_rows(const rl_dataproto *dp);
/* Fixes rows for a batch with no tensors yet (RL_ESHAPE if it disagrees). */
int rl_dataproto_set_rows(rl_dataproto *dp, int64_t rows);

/* Adds (retains) a tensor. RL_EEXIST for a duplicate name; RL_ESHAPE if
 * ndim == 0 or shape[0] != rows. */
int rl_dataproto_add_tensor(rl_dataproto *dp, const char *name, rl_tensor *t);
/* Creates a zeroed tensor, adds it, returns it (borrowed). */
rl_tensor *rl_dataproto_new_tensor(rl_dataproto *dp, const char *name, rl_dtype dtype,
                                   int ndim, const int64_t *shape);
/* Borrowed; NULL if absent (no error message set). */
rl_tensor *rl_dataproto_tensor(const rl_dataproto *dp, const char *name);
/* Like rl_dataproto_tensor but checks presence and dtype: NULL + message
 * naming the key and the expected/actual dtype. */
rl_tensor *rl_dataproto_tensor_typed(const rl_dataproto *dp, const char *name,
                                     rl_dtype dtype);
/* Checks presence, dtype, ndim and trailing dims: dims[0..ndim) with a
 * negative entry meaning "any" (dims may be NULL: any shape; dim 0 is the
 * row count by the invariant). NULL + RL_ENOTFOUND "missing tensor 'x'
 * (expected f32 (B, 48))" or RL_EDTYPE / RL_ESHAPE "tensor 'x' is i32
 * (4, 7), expected f32 (B, 48)". */
rl_tensor *rl_dataproto_tensor_shaped(const rl_dataproto *dp, const char *name, rl_dtype dtype,
                                      int ndim, const int64_t *dims);
int rl_dataproto_tensor_count(const rl_dataproto *dp);
rl_tensor *rl_dataproto_tensor_at(const rl_dataproto *dp, int i);
const char *rl_dataproto_tensor_name(const rl_dataproto *dp, int i);
/* Removes a tensor or column by name; RL_ENOTFOUND if neither exists. */
int rl_dataproto_remove(rl_dataproto *dp, const char *name);

/* Creates a column with `rows` empty cells (0, 0.0, "", empty list) and
 * returns it (borrowed). Rows must be known. */
rl_column *rl_dataproto_new_column(rl_dataproto *dp, const char *name,
                                   rl_column_type type);
rl_column *rl_dataproto_column(const rl_dataproto *dp, const char *name);
int rl_dataproto_column_count(const rl_dataproto *dp);
rl_column *rl_dataproto_column_at(const rl_dataproto *dp, int i);

const char *rl_column_name(const rl_column *c);
rl_column_type rl_column_get_type(const rl_column *c);
int64_t rl_column_rows(const rl_column *c);

/* Setters copy their input. Type mismatches return RL_EDTYPE, bad rows
 * RL_ERANGE. */
int rl_column_set_i64(rl_column *c, int64_t row, int64_t v);
int rl_column_set_f64(rl_column *c, int64_t row, double v);
int rl_column_set_str(rl_column *c, int64_t row, const char *s);
int rl_column_set_bytes(rl_column *c, int64_t row, const void *p, size_t len);
int rl_column_set_i64_list(rl_column *c, int64_t row, const int64_t *v, int64_t n);
int rl_column_set_f64_list(rl_column *c, int64_t row, const double *v, int64_t n);
int rl_column_set_str_list(rl_column *c, int64_t row, const char *const *s, int64_t n);
int rl_column_set_bytes_list(rl_column *c, int64_t row, const void *const *p,
                             const size_t *len, int64_t n);

/* Getters (no checks beyond an assert-free bounds test; out-of-range or wrong
 * type returns 0 / NULL). Strings and bytes are NUL-terminated. */
int64_t rl_column_i64(const rl_column *c, int64_t row);
double rl_column_f64(const rl_column *c, int64_t row);
const char *rl_column_str(const rl_column *c, int64_t row);
const void *rl_column_bytes(const rl_column *c, int64_t row, size_t *len);
int64_t rl_column_list_len(const rl_column *c, int64_t row);
const int64_t *rl_column_list_i64(const rl_column *c, int64_t row);
const double *rl_column_list_f64(const rl_column *c, int64_t row);
const void *rl_column_list_item(const rl_column *c, int64_t row, int64_t i, size_t *len);

/* Meta: borrowed JSON object, never NULL; modify it in place. */
json_t *rl_dataproto_meta(rl_dataproto *dp);
const json_t *rl_dataproto_meta_const(const rl_dataproto *dp);
/* Replaces meta (steals the reference; must be an object). */
int rl_dataproto_set_meta(rl_dataproto *dp, json_t *meta);

/* Small requests and replies (call arguments, metrics) travel as meta.
 * rl_dataproto_new_meta: a 0-row DataProto carrying `meta` (stolen; must be
 * an object). The getters read one meta key: absent or null gives `def`;
 * a wrong type is RL_EINVAL "argument 'key' must be an integer|a number".
 * rl_dataproto_meta_str returns `def` when the key is absent or not a
 * string, and when that is NULL also sets "argument 'key' (a string) is
 * missing". */
rl_dataproto *rl_dataproto_new_meta(json_t *meta);
int rl_dataproto_meta_int(const rl_dataproto *dp, const char *key, int64_t def, int64_t *out);
int rl_dataproto_meta_double(const rl_dataproto *dp, const char *key, double def, double *out);
const char *rl_dataproto_meta_str(const rl_dataproto *dp, const char *key, const char *def);
/* Required, range-checked arguments: RL_EINVAL "argument 'version' is
 * missing (an integer in [1, 9223372036854775807])", "argument 'version'
 * must be an integer in [1, ...], got 0". A number must also be finite. */
int rl_dataproto_meta_get_int(const rl_dataproto *dp, const char *key, int64_t lo, int64_t hi,
                              int64_t *out);
int rl_dataproto_meta_get_double(const rl_dataproto *dp, const char *key, double lo, double hi,
                                 double *out);
/* A request for a method: views of exactly the named tensors and columns of
 * `src` (a NULL list is none; a missing name is RL_ENOTFOUND naming it) and
 * `meta` as its only meta (stolen; NULL = {}). Unlike select, nothing else
 * of src travels. */
rl_dataproto *rl_dataproto_request(const rl_dataproto *src, const char *const *tensors,
                                   int n_tensors, const char *const *columns, int n_columns,
                                   json_t *meta);

/* ---- operations ------------------------------------------------------------ */
/* Row counts whose sum (concat) or row index array (pad, chunk with pad,
 * repeat) would overflow, or that split into more than INT_MAX pieces, are
 * RL_ERANGE naming the sizes. */

/* Rows of all items stacked. Items must have the same tensor names, dtypes and
 * trailing shapes and the same column names and types. Meta of the first. */
rl_dataproto *rl_dataproto_concat(rl_dataproto *const *items, int n);
/* Splits into `chunks` parts. pad = 0: sizes differ by at most one (the first
 * rows % chunks parts get one more). pad = 1: rows are padded by repeating
 * rows from the start until divisible, *pad_count receives how many were
 * added (strip them from the concatenated result with rl_dataproto_slice).
 * out[0..chunks) receive new objects. */
int rl_dataproto_chunk(const rl_dataproto *dp, int chunks, int pad, rl_dataproto **out,
                       int64_t *pad_count);
/* Pads by repeating rows from the start so rows % divisor == 0. */
rl_dataproto *rl_dataproto_pad_to_divisor(const rl_dataproto *dp, int64_t divisor,
                                          int64_t *pad_count);
/* Pieces of `split_size` rows (the last may be shorter). *n_out receives the
 * count; *out a malloc'd array of new objects (free each, then the array). */
int rl_dataproto_split(const rl_dataproto *dp, int64_t split_size, rl_dataproto ***out,
                       int *n_out);
/* All tensors, columns and meta of a and b; same rows required; a key present
 * in both must be equal (tensor bytes, column cells, meta value) or it is an
 * error naming the key. */
rl_dataproto *rl_dataproto_union(const rl_dataproto *a, const rl_dataproto *b);
/* *a ← *a ∪ b (the union's rules); b is freed in every case, *a replaced
 * only on success. */
int rl_dataproto_union_into(rl_dataproto **a, rl_dataproto *b);
/* Each row `times` times: interleave = 1 gives r0 r0 r1 r1, 0 gives r0 r1 r0 r1. */
rl_dataproto *rl_dataproto_repeat(const rl_dataproto *dp, int64_t times, int interleave);
/* Only the named tensors/columns (NULL list = keep all of that kind). Views.
 * A missing name is RL_ENOTFOUND. Meta is copied. */
rl_dataproto *rl_dataproto_select(const rl_dataproto *dp, const char *const *tensors,
                                  int n_tensors, const char *const *columns, int n_columns);
/* Rows idx[0..n) in that order, duplicates allowed. */
rl_dataproto *rl_dataproto_index(const rl_dataproto *dp, const int64_t *idx, int64_t n);
/* In place: row i becomes old row idx[i]; idx must be a permutation of
 * 0..rows-1 (RL_EINVAL naming the first bad index otherwise). */
int rl_dataproto_reorder(rl_dataproto *dp, const int64_t *idx);
/* Moves the named tensors/columns out of dp into a new DataProto (meta
 * copied). */
rl_dataproto *rl_dataproto_pop(rl_dataproto *dp, const char *const *names, int n);
/* Rows [begin, end), views. */
rl_dataproto *rl_dataproto_slice(const rl_dataproto *dp, int64_t begin, int64_t end);
/* Deep equality of tensors (bytes), columns and meta. */
int rl_dataproto_equal(const rl_dataproto *a, const rl_dataproto *b);

#ifdef __cplusplus
}
#endif
#endif
