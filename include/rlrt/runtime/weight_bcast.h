/* rlrt/runtime/weight_bcast.h — a version of the flat weight buffer from
 * rank 0 of a communicator to every other rank, bucketed and
 * version-tagged, over the communicator's broadcast (NCCL on device
 * buffers for rollout ranks on other GPUs; the CPU ring elsewhere):
 * the cross-GPU weight transport (docs/decisions/gpu-weight-transport.md,
 * decision 5: workers/actor/weights.c sends, workers/rollout/weights_bcast.c
 * receives).
 *
 * Protocol, per version: one 8-float header broadcast (a magic, the
 * version and the count in 24-bit parts, the bucket length), then one
 * broadcast per bucket (bucket b holds floats [b·per, min((b+1)·per,
 * count))) into the receiver's staging buffer; after the last one the
 * receiver swaps staging and active.
 *
 * Overlap: the buckets are pipelined broadcasts (rl_comm_broadcast_start):
 * the sender starts bucket k+1 while up to depth-1 earlier ones are still
 * in flight (default depth 2: double buffering; over NCCL the next bucket
 * is packed on a second stream into the other staging buffer while NCCL
 * sends this one; over the ring ZeroMQ still sends bucket k when bucket
 * k+1 is queued), and returns once all of them finished. The bytes and
 * their order are those of one bucket after another (bit-identical), and
 * the receiver's swap still waits for the last bucket. A version is active whole or not at
 * all: any failure (a dead sender, a timeout, a header that does not fit)
 * leaves the previous version active, and the communicator unusable
 * (rlrt/runtime/collective.h: destroy it and make a new one).
 *
 * Header checks (receiver): the magic, count equal to the receiver's, the
 * version newer than the active one and below 2^48, the bucket length in
 * [1, count]; RL_EPROTO otherwise, and the comm is broken. No
 * acknowledgement travels back: the sender's success says its broadcasts
 * left (ring buffers may hold them), not that every receiver took the
 * version; the weight sync's reply from each receiver says that.
 *
 * Memory: device memory of the calling thread's current CUDA device when
 * rl_comm_transport(c) is "nccl" (the sender's buffer, and the receiver's
 * staging and active buffers, allocated here), host memory otherwise.
 *
 * Ownership: rl_weight_bcast_new borrows the communicator (it must outlive
 * the object); the receiver's buffers are the object's. Threading: the
 * communicator's (one thread at a time).
 */
#ifndef RLRT_RUNTIME_WEIGHT_BCAST_H
#define RLRT_RUNTIME_WEIGHT_BCAST_H

#include <stddef.h>
#include <stdint.h>

#include "rlrt/runtime/collective.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct rl_weight_bcast rl_weight_bcast;

/* count floats a version; bucket_bytes: the sender's bucket (0: 256 MiB),
 * rounded down to whole floats (at least one). NULL + message on error. */
rl_weight_bcast *rl_weight_bcast_new(rl_comm *c, int64_t count, size_t bucket_bytes);
/* Rank 0: sends buf[0..count) (memory of the comm's kind) as `version`
 * (must grow, < 2^48). */
int rl_weight_bcast_send(rl_weight_bcast *b, uint64_t version, const float *buf);
/* Other ranks: receives the next version whole, then it is active. */
int rl_weight_bcast_recv(rl_weight_bcast *b);
/* The active buffer (count floats, of the comm's kind; NULL before the
 * first version) and its version (0 = none). */
const float *rl_weight_bcast_active(const rl_weight_bcast *b, uint64_t *version);
/* The sender's buckets in flight at most, in [1, RL_COMM_MAX_INFLIGHT]
 * (1: one after another, as before the pipelining). RL_EINVAL otherwise. */
int rl_weight_bcast_set_depth(rl_weight_bcast *b, int depth);
/* The last send's (or receive's) bucket count and, on the sender, the most
 * buckets that were in flight at once (rl_comm_inflight after each start). */
void rl_weight_bcast_last(const rl_weight_bcast *b, int64_t *buckets, int *max_inflight);
void rl_weight_bcast_free(rl_weight_bcast *b);

#ifdef __cplusplus
}
#endif
#endif
