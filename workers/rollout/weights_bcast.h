/* workers/rollout/weights_bcast.h — a rollout rank receiving weights by the
 * broadcast of a communicator with actor rank 0 (weights_bcast.c,
 * rlrt/runtime/weight_bcast.h; rollout.weight_transport).
 *
 * Invariants: the model's parameters change only when a whole version
 * arrived and is finite; otherwise the error says why and the model keeps
 * what it had. After an error the communicator is dropped and joined again
 * at the next call. Ownership: the communicator and receiver are this
 * file's (one per process). Threading: the worker's compute thread only.
 * Partial rollouts do not poll it: a collective cannot be joined between
 * two decode steps without stalling the actor's publish on it.
 */
#ifndef RLRT_WORKERS_ROLLOUT_WEIGHTS_BCAST_H
#define RLRT_WORKERS_ROLLOUT_WEIGHTS_BCAST_H

#include <stdint.h>

#include "rlrt/nn/model.h"

/* Joins the communicator `id` (text) as `comm_rank` of `world` when not in
 * it yet (NCCL when m is on CUDA, else the CPU ring; timeout_s bounds the
 * join and each receive), receives the next version, checks it is
 * `version` or newer, puts it into m's parameters and sets *have. */
int rl_rollout_weights_bcast(int rank, rl_model *m, const char *id, int comm_rank, int world, int64_t version,
                             double timeout_s, uint64_t *have);

#endif
