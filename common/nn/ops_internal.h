/* ops_internal.h — private helpers shared by the CPU kernels (not installed).
 *
 * RL_OMP_FOR runs the next for-loop on rl_nn_get_threads() OpenMP threads
 * with a static schedule, so the split of work (and hence every result) is a
 * pure function of the thread count. */
#ifndef RLRT_NN_OPS_INTERNAL_H
#define RLRT_NN_OPS_INTERNAL_H

#include "rlrt/nn/ops.h"

#define RL_PRAGMA(x) _Pragma(#x)
#define RL_OMP_FOR RL_PRAGMA(omp parallel for num_threads(rl_nn_get_threads()) schedule(static))
/* Same, but on one thread when `cond` is false. */
#define RL_OMP_FOR_IF(cond) \
    RL_PRAGMA(omp parallel for if(cond) num_threads(rl_nn_get_threads()) schedule(static))

/* Element counts below which a loop stays on one thread (thread start-up
 * costs more than the work). */
#define RL_PAR_MIN (1 << 17)

#endif
