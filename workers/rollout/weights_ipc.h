/* workers/rollout/weights_ipc.h — a rollout rank receiving weights over CUDA
 * IPC from actor rank 0 on the same GPU (weights_ipc.c).
 *
 * Invariants: the model's parameters change only when a whole version
 * arrived and is finite; otherwise the error says why and the model keeps
 * what it had. A version already in the model is not copied again (a
 * partial rollout's poll may have put it there before sync_weights asks
 * for it). Ownership: the receiver is this file's (one per process).
 * Threading: the worker's compute thread only.
 *
 * `kind` is RL_WEIGHT_IPC_CUDA in the worker; RL_WEIGHT_IPC_SHM (host
 * shared memory, the same protocol) lets the CPU tests drive this code
 * without a GPU (tests/unit/test_rollout_weights_ipc.c).
 */
#ifndef RLRT_WORKERS_ROLLOUT_WEIGHTS_IPC_H
#define RLRT_WORKERS_ROLLOUT_WEIGHTS_IPC_H

#include <stdint.h>

#include "rlrt/nn/model.h"
#include "rlrt/runtime/channel_ipc.h"

/* Waits (up to timeout_s per poll) until `version` or a newer one is active
 * on the receiver of `endpoint`, puts it into m's parameters unless the
 * model already holds it (model_version: the version m holds, 0 when
 * unknown) and sets *have to its version. */
int rl_rollout_weights_ipc(int rank, rl_model *m, const char *endpoint, rl_weight_ipc_kind kind,
                           int64_t version, uint64_t model_version, double timeout_s, uint64_t *have);

/* Partial rollouts, between two decode steps: handles the buckets that
 * have arrived without waiting; when a complete version newer than
 * model_version (the version the caller samples with) is active, puts it into m's parameters and returns 1 with
 * *have its version. 0 when there is none (nor a receiver yet: the first
 * version comes through rl_rollout_weights_ipc); < 0 (rl_status) on an
 * error, the model unchanged. */
int rl_rollout_weights_ipc_poll(int rank, rl_model *m, uint64_t model_version, uint64_t *have);

/* 1 when a receiver is open (a version came over IPC before), else 0. */
int rl_rollout_weights_ipc_open(void);

#endif
