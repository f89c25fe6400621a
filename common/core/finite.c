/* finite.c — the shared non-finite check (common/core/finite.h). */
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
