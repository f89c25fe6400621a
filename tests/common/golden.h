/* tests/common/golden.h — reads golden files written by
 * tests/reference/golden.py (safetensors layout) and compares arrays.
 *
 * Ownership: rl_golden owns the whole file in memory; arrays returned by
 * rl_golden_get() point into it and live until rl_golden_free().
 * Test-only code: not part of librlrt.
 */
#ifndef RLRT_TESTS_GOLDEN_H
#define RLRT_TESTS_GOLDEN_H

#include <stddef.h>
#include <stdint.h>

typedef enum rl_golden_dtype {
    RL_GOLDEN_F64, RL_GOLDEN_F32, RL_GOLDEN_I64, RL_GOLDEN_I32,
    RL_GOLDEN_U8, RL_GOLDEN_BOOL
} rl_golden_dtype;

typedef struct rl_golden_array {
    const char *name;
    rl_golden_dtype dtype;
    int ndim;
    int64_t shape[8];
    int64_t numel;
    const void *data; /* little-endian, aligned to 8 bytes when possible */
} rl_golden_array;

typedef struct rl_golden rl_golden;

/* path relative to the repo root (tests run from there). NULL + message on
 * error (missing file: run `make golden`). */
rl_golden *rl_golden_load(const char *path);
void rl_golden_free(rl_golden *g);
/* NULL if absent. */
const rl_golden_array *rl_golden_get(const rl_golden *g, const char *name);
/* Metadata string or NULL. */
const char *rl_golden_meta(const rl_golden *g, const char *key);
int rl_golden_count(const rl_golden *g);
const rl_golden_array *rl_golden_at(const rl_golden *g, int i);

/* Copies an array converted to double / float / int64 into a new malloc'd
 * buffer (caller frees). Aborts the test (via cmocka fail_msg) if missing. */
double *rl_golden_f64(const rl_golden *g, const char *name, int64_t *numel);
float *rl_golden_f32(const rl_golden *g, const char *name, int64_t *numel);
int64_t *rl_golden_i64(const rl_golden *g, const char *name, int64_t *numel);
/* Scalar accessor for shape [] or [1] arrays. */
double rl_golden_scalar(const rl_golden *g, const char *name);

/* Compares got[i] with want[i] (|got − want| ≤ atol + rtol·|want|, NaN equal
 * to NaN, ±Inf equal to itself). On mismatch prints the first bad index
 * and both values with `what`, and returns the number of mismatches. */
int64_t rl_check_close_f64(const char *what, const double *got,
                           const double *want, int64_t n, double atol,
                           double rtol);
int64_t rl_check_close_f32(const char *what, const float *got,
                           const double *want, int64_t n, double atol,
                           double rtol);

#endif
