/* workers/rollout/weights_ipc.h — a rollout rank receiving weights over CUDA
 * IPC from actor rank 0 on the same GPU (weights_ipc.c).
 *
 * Invariants: the model's parameters change only when a whole version
 * arrived and is finite; otherwise the error says why and the model keeps
 * what it had. Ownership: the receiver is this file's (one per process).
 * Threading: the worker's compute thread only.
 */
#ifndef RLRT_WORKERS_ROLLOUT_WEIGHTS_IPC_H
#define RLRT_WORKERS_ROLLOUT_WEIGHTS_IPC_H

#include <stdint.h>

#include "rlrt/nn/model.h"

/* Waits (up to timeout_s per poll) until `version` or a newer one is active
 * on the CUDA IPC receiver of `endpoint`, puts it into m's parameters and
 * sets *have to its version. */
int rl_rollout_weights_ipc(int rank, rl_model *m, const char *endpoint, int64_t version, double timeout_s,
                           uint64_t *have);

#endif
