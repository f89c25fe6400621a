/* common/runtime/collective_nccl.h — the collectives of rlrt/runtime/collective.h
 * on CUDA device buffers over NCCL, loaded at run time.
 *
 * Purpose: an rl_comm made with options.nccl = 1 (collective.c) runs
 * all-reduce, reduce-scatter, all-gather and broadcast through this file
 * on device pointers of the calling thread's current CUDA device. NCCL is
 * not linked: rl_nccl_load() dlopen()s "libnccl.so.2" (then "libnccl.so")
 * on first use, so a machine without NCCL builds, runs every CPU path and
 * gets a clear error naming what was looked for (the GPU machine's NCCL is
 * PyPI's nvidia-nccl-cu13: tests/gpu_check.sh puts its lib folder on
 * LD_LIBRARY_PATH). Only with RL_CUDA (`make CUDA=1`: nccl.h's types);
 * otherwise every call is RL_EUNSUPPORTED.
 *
 * Liveness: the communicator is non-blocking (ncclConfig_t.blocking = 0).
 * Every wait — the init, each operation's launch and its completion on the
 * communicator's stream — polls ncclCommGetAsyncError and the stream, and
 * ends at the deadline (timeout_ms) or within ~1 ms of an abort after
 * `abort_base` (common/runtime/abort.h: the driver's heartbeat found a dead
 * rank, and its reason names it): then ncclCommAbort, and the error names
 * this rank, the operation and why. Never a hang on a dead or stuck peer.
 *
 * Layout: the shards of rl_shard_range (ceil(count/W) per rank, the last
 * short or empty). NCCL wants equal shards: when W does not divide count,
 * reduce-scatter and all-gather go through a padded device scratch buffer
 * (ceil(count/W)·W floats, kept between calls). Sums are NCCL's (not
 * bit-identical to the CPU ring's order).
 *
 * Ownership: rl_nccl_new returns a communicator freed with rl_nccl_free
 * (abort = 1 after a failure: ncclCommAbort instead of finalize+destroy).
 * Threading: one thread at a time per communicator.
 */
#ifndef RLRT_COMMON_RUNTIME_COLLECTIVE_NCCL_H
#define RLRT_COMMON_RUNTIME_COLLECTIVE_NCCL_H

#include <stdint.h>

#define RL_NCCL_ID_BYTES 128 /* NCCL_UNIQUE_ID_BYTES */

typedef struct rl_nccl rl_nccl;

typedef enum {
    RL_NCCL_ALL_REDUCE = 0,
    RL_NCCL_REDUCE_SCATTER,
    RL_NCCL_ALL_GATHER,
    RL_NCCL_BROADCAST
} rl_nccl_coll;

/* Loads NCCL (once per process). 0 and *version = NCCL's version code
 * (major·10000 + minor·100 + patch) when it is there; RL_EUNSUPPORTED with
 * a message naming the libraries looked for otherwise. */
int rl_nccl_load(int *version);
/* ncclGetUniqueId (rank 0 makes it; the others get its bytes). */
int rl_nccl_unique_id(unsigned char id[RL_NCCL_ID_BYTES]);
/* Joins the world-rank communicator of id on the current CUDA device. */
rl_nccl *rl_nccl_new(const unsigned char id[RL_NCCL_ID_BYTES], int world, int rank, int timeout_ms,
                     uint64_t abort_base);
/* One collective (shapes as rlrt/runtime/collective.h; device pointers).
 * avg: RL_REDUCE_AVG. root: broadcast's. */
int rl_nccl_run(rl_nccl *n, rl_nccl_coll op, const float *send, float *recv, int64_t count, int root,
                int avg, int timeout_ms, uint64_t abort_base);
/* Pipelined broadcasts (rlrt/runtime/collective.h, rl_comm_broadcast_start):
 * start enqueues the broadcast on the communicator's stream and records its
 * completion event (at most 4 unfinished: a fifth waits for the oldest);
 * the root of an in-place one (send == recv) packs it first on a second
 * stream into one of two staging buffers and sends from there (the copy of
 * bucket k+1 overlaps the broadcast of bucket k; a staging buffer is
 * rewritten only after the broadcast that read it). wait returns when at
 * most `keep` are unfinished (each wait as rl_nccl_run's: abort, timeout,
 * NCCL's asynchronous error); inflight polls without waiting. */
int rl_nccl_bcast_start(rl_nccl *n, const float *send, float *recv, int64_t count, int root, int timeout_ms,
                        uint64_t abort_base);
int rl_nccl_wait(rl_nccl *n, int keep, int timeout_ms, uint64_t abort_base);
int rl_nccl_inflight(rl_nccl *n);
void rl_nccl_free(rl_nccl *n, int abort);

#endif
