/* finite.c — the shared non-finite checks and masked sums (common/core/finite.h). */
#include "common/core/finite.h"

#include <math.h>

#include "rlrt/error.h"

int rl__first_nonfinite(const char *fn, const char *name, const float *arr, int64_t off,
                        int64_t len)
{
    if (!arr)
        return 0;
    for (int64_t j = 0; j < len; j++)
        if (!isfinite(arr[off + j]))
            return rl_error_set(RL_ENUMERIC, "%s: %s[%lld] is %g (not finite)", fn, name,
                                (long long)(off + j), (double)arr[off + j]);
    return 0;
}

int rl__row_overflow(const char *fn, const char *what, int64_t i, int64_t off, int64_t len,
                     const rl__named_array *in, int n)
{
    for (int k = 0; k < n; k++) {
        int rc = rl__first_nonfinite(fn, in[k].name, in[k].arr, off, len);
        if (rc)
            return rc;
    }
    return rl_error_set(RL_ENUMERIC, "%s: %s %lld overflows", fn, what, (long long)i);
}

int rl__mask_inv_sum(const char *fn, const float *mask, int64_t n, double *inv, double *mean)
{
    int rc = rl__first_nonfinite(fn, "mask", mask, 0, n);
    double s = 0.0;
    for (int64_t i = 0; !rc && i < n; i++)
        s += mask ? mask[i] : 1.0;
    *inv = s > 0.0 ? 1.0 / s : 0.0;
    *mean = s > 0.0 ? *inv : NAN;
    return rc;
}

void rl__row_sums(const float *x, int64_t B, int64_t T, double *out)
{
#pragma omp parallel for schedule(static)
    for (int64_t b = 0; b < B; b++) {
        const float *r = x + b * T;
        double s = 0.0;
#pragma omp simd reduction(+ : s)
        for (int64_t t = 0; t < T; t++)
            s += r[t];
        out[b] = s;
    }
}
