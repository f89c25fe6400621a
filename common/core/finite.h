/* common/core/finite.h — the non-finite check the numeric modules share
 * (algo, sde): internal, not part of the public API. */
#ifndef RLRT_CORE_FINITE_H
#define RLRT_CORE_FINITE_H

#include <stdint.h>

/* RL_ENUMERIC "fn: name[i] is nan (not finite)" for the first non-finite
 * arr[off .. off + len); 0 when all are finite or arr is NULL. */
int rl__first_nonfinite(const char *fn, const char *name, const float *arr, int64_t off,
                        int64_t len);

#endif
