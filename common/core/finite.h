/* common/core/finite.h — the non-finite checks and the masked sums the
 * numeric modules share (algo, sde): internal, not part of the public API.
 * Each sum keeps the order of operations its callers had when they summed
 * for themselves (the golden tests compare their results bit for bit). */
#ifndef RLRT_CORE_FINITE_H
#define RLRT_CORE_FINITE_H

#include <stdint.h>

/* RL_ENUMERIC "fn: name[i] is nan (not finite)" for the first non-finite
 * arr[off .. off + len); 0 when all are finite or arr is NULL. */
int rl__first_nonfinite(const char *fn, const char *name, const float *arr, int64_t off,
                        int64_t len);

/* An input array and its name, for rl__row_overflow. */
typedef struct rl__named_array {
    const char *name;
    const float *arr; /* NULL: not checked */
} rl__named_array;

/* Why the sum over row i (values off .. off + len of each array) came out
 * non-finite: the first non-finite value of the arrays, in order, as
 * rl__first_nonfinite reports it; else (the inputs are finite, the sum
 * overflowed) RL_ENUMERIC "fn: <what> <i> overflows", what naming the sum
 * and the row ("step of row", "energy of chunk"). */
int rl__row_overflow(const char *fn, const char *what, int64_t i, int64_t off, int64_t len,
                     const rl__named_array *in, int n);

/* The scales of a loss averaged over the valid rows of mask[0 .. n) (the
 * sum in double, in index order; a NULL mask counts n ones): *inv = 1 / Σ
 * mask for the loss and its gradient, 0 when the sum is not > 0; *mean =
 * the same for the means of the metrics, but NaN when the sum is not > 0.
 * First rl__first_nonfinite(fn, "mask", mask, 0, n). */
int rl__mask_inv_sum(const char *fn, const float *mask, int64_t n, double *inv, double *mean);

/* out[b] = Σ_t x[b, t] in double for the rows of x (B, T): rows in
 * parallel (OpenMP), each row one simd reduction. */
void rl__row_sums(const float *x, int64_t B, int64_t T, double *out);

#endif
