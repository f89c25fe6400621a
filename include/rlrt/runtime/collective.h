/* rlrt/runtime/collective.h — collectives among W ranks (CPU: a ring over
 * ZeroMQ; shaped like NCCL so a GPU backend drops in).
 *
 * Purpose: FSDP actor ranks all-gather parameters before the forward pass,
 * reduce-scatter gradients after the backward pass and broadcast weights;
 * barrier orders phases. On CPU every rank is a process (or thread) with a
 * PULL socket bound for its left neighbour and a PUSH socket connected to its
 * right neighbour; every operation is a ring algorithm whose chunks are cut
 * into segments (options.segment_bytes) so large buffers stream: a segment is
 * forwarded as soon as it has been received and reduced.
 *
 * Setup (as with ncclGetUniqueId / ncclCommInitRank): one party creates an
 * rl_comm_id — the rendezvous endpoint that rank 0 binds plus a random nonce —
 * and the driver hands its text form to every rank over the control plane;
 * each rank then calls rl_comm_init_rank(id, world, rank). Rank 0 collects
 * every rank's data endpoint and tells each rank its right neighbour.
 *
 * Layout: the chunks of a `count`-element buffer are the shards of
 * rl_shard_range(count, world, r): chunk r is
 * [r*ceil(count/W), min(count, (r+1)*ceil(count/W))), so trailing chunks may
 * be short or empty. reduce-scatter leaves rank r exactly its shard;
 * all-gather takes it back. FSDP shards a flat parameter buffer the same way,
 * so a rank's optimizer state is the chunk the collectives give it.
 *
 * Same host: when every rank maps one shared-memory segment (checked at
 * init, all or none), all-reduce copies through it instead of the ring
 * (common/runtime/collective_shm.h), in the same order, so the results do
 * not depend on the path.
 *
 * Reduction order (deterministic): element i of chunk c is summed along the
 * ring starting after its owner and ending at it,
 *     ((x[c+1] + x[c+2]) + ... + x[c+W-1]) + x[c]      (rank indices mod W)
 * in float32, so every rank gets bit-identical results and a single process
 * that adds in that order reproduces them exactly. RL_REDUCE_AVG divides the
 * final sum by W (a float division).
 *
 * Invariants: every rank calls the same operations in the same order with
 * the same count/root/op (a wrong size is detected and reported as
 * RL_EPROTO; a rank that stops answering gives RL_ETIMEOUT after
 * options.timeout_s, once: the wait for the data it did not take adds none).
 * Every wait (rendezvous, send, receive) also ends within 50 ms with
 * RL_EPEER when the process's waits are aborted (an rl-worker does it on
 * the driver's RL_WORKER_ABORT when a peer died: rlrt/runtime/worker.h), so
 * a dead rank costs its peers the heartbeat's detection, not the timeout.
 * After any error the communicator is unusable (RL_ESTATE) and must be
 * destroyed; an operation that failed returns only once ZeroMQ let go of
 * the caller's buffers. Calls on one communicator are not thread-safe; use
 * one communicator per thread.
 *
 * In place: sendbuf == recvbuf is allowed for broadcast and all-reduce;
 * reduce-scatter may use recvbuf == sendbuf + shard_begin, all-gather
 * sendbuf == recvbuf + shard_begin.
 *
 * Ownership: rl_comm_init_rank() returns a communicator destroyed with
 * rl_comm_destroy(); the buffers stay the caller's.
 */
#ifndef RLRT_RUNTIME_COLLECTIVE_H
#define RLRT_RUNTIME_COLLECTIVE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define RL_COMM_ID_BYTES 256

/* Opaque rendezvous blob; its bytes are a NUL-terminated text
 * "rlcomm1 <nonce> <endpoint>" that can travel in any message. */
typedef struct rl_comm_id {
    char bytes[RL_COMM_ID_BYTES];
} rl_comm_id;

typedef struct rl_comm rl_comm;

typedef enum rl_reduce_op {
    RL_REDUCE_SUM = 0,
    RL_REDUCE_AVG = 1
} rl_reduce_op;

typedef struct rl_comm_options {
    double timeout_s;     /* per receive and for setup; default 120: how long a
                             LIVE peer may send nothing (a lost one is aborted) */
    size_t segment_bytes; /* pipelining unit; default 1 MiB (rounded to floats) */
    /* Address this rank's data socket binds and advertises (tcp only).
     * NULL: the local address that routes to rank 0's host. */
    const char *listen_host;
    int io_threads;       /* ZeroMQ I/O threads; default 1 */
    /* 1 (default): when every rank maps one shared-memory segment (one
     * host), all-reduce goes through it (same results, bit for bit);
     * 0: always the ring. */
    int shared_memory;
    /* 1: the buffers of every operation are CUDA device memory of the
     * calling thread's current device, and all-reduce, reduce-scatter,
     * all-gather and broadcast run over NCCL (loaded at run time; the ring
     * above only bootstraps it: rank 0's ncclUniqueId goes over it; barrier
     * stays on the ring). Needs `make CUDA=1` and libnccl.so.2 on the
     * loader's path; otherwise init fails with a message naming what was
     * looked for. A dead or stuck peer ends an operation at timeout_s or
     * at an abort (ncclCommAbort), never a hang. Results are NCCL's sums
     * (not the ring's order, not bit-identical to it).
     * 0 (default): host buffers. common/runtime/collective_nccl.h. */
    int nccl;
} rl_comm_options;

void rl_comm_options_default(rl_comm_options *o);

/* Shard `rank` of `world` of a `total`-element buffer: [*begin, *end).
 * Shards are contiguous and ceil(total/world) long, except the last ones,
 * which may be shorter or empty. This is the chunk every collective assigns
 * to a rank. An invalid world (< 1), rank (outside [0, world)) or total (< 0)
 * gives the empty range [0, 0). Cannot fail. */
void rl_shard_range(int64_t total, int world, int rank, int64_t *begin, int64_t *end);

/* Makes a new id. `endpoint`:
 *   "tcp://HOST:PORT"  rank 0 will bind it;
 *   "tcp://HOST"       a free port on HOST is picked now;
 *   "ipc:///path"      a Unix socket path (ranks' sockets are path-rN);
 *   NULL               a fresh ipc path under /tmp (all ranks on one host). */
int rl_comm_id_create(rl_comm_id *id, const char *endpoint);
/* The text form (for the control plane) and back (RL_EINVAL if malformed). */
const char *rl_comm_id_string(const rl_comm_id *id);
int rl_comm_id_parse(rl_comm_id *id, const char *text);

/* Joins the communicator; blocks until all `world` ranks have joined (or
 * options->timeout_s passes: NULL + RL_ETIMEOUT). `opt` may be NULL. */
rl_comm *rl_comm_init_rank(const rl_comm_id *id, int world, int rank,
                           const rl_comm_options *opt);
void rl_comm_destroy(rl_comm *c);
int rl_comm_rank(const rl_comm *c);
int rl_comm_world(const rl_comm *c);
/* 1 when this process saw an abort (a recovery, common/runtime/abort.h)
 * after c was made: its peers may have dropped their ends of it without an
 * error on this side, so a holder that keeps a communicator across calls
 * (the weight broadcast) destroys it and joins a new one. */
int rl_comm_aborted(const rl_comm *c);
/* How all-reduce travels: "nccl" (options.nccl), "shm" (every rank on one
 * host, shared memory) or "ring" (sockets; also a world of 1). */
const char *rl_comm_transport(const rl_comm *c);

/* recvbuf[0..count) = root's sendbuf[0..count) on every rank (sendbuf is
 * read on the root only). */
int rl_comm_broadcast(rl_comm *c, const float *sendbuf, float *recvbuf,
                      int64_t count, int root);
/* recvbuf[i] = op over ranks of sendbuf[i], i < count. */
int rl_comm_all_reduce(rl_comm *c, const float *sendbuf, float *recvbuf,
                       int64_t count, rl_reduce_op op);
/* sendbuf has `count` elements; recvbuf receives this rank's shard
 * [begin, end) of the reduced buffer (end - begin elements, possibly 0). */
int rl_comm_reduce_scatter(rl_comm *c, const float *sendbuf, float *recvbuf,
                           int64_t count, rl_reduce_op op);
/* sendbuf holds this rank's shard (end - begin elements) of a `count`-element
 * buffer; recvbuf (count elements) receives every rank's shard. */
int rl_comm_all_gather(rl_comm *c, const float *sendbuf, float *recvbuf,
                       int64_t count);
/* Returns when every rank has entered the barrier. */
int rl_comm_barrier(rl_comm *c);

/* Pipelined broadcasts (the weight broadcast's buckets, rlrt/runtime/weight_bcast.h).
 * rl_comm_broadcast_start starts the broadcast rl_comm_broadcast would make
 * and returns once it is under way, so the caller can prepare and start the
 * next one while it travels; rl_comm_wait(c, keep) returns once at most
 * `keep` started broadcasts are unfinished (they finish in order). Until a
 * broadcast is finished the root's sendbuf must stay unchanged and a
 * receiver's recvbuf unread. At most RL_COMM_MAX_INFLIGHT are unfinished: a
 * start beyond that first waits for the oldest; any other operation first
 * waits for all of them. Every rank starts the same broadcasts in the same
 * order.
 *   ring: the root's segments go out by reference; one is finished when
 *     ZeroMQ released them (what rl_comm_broadcast's return means). A
 *     receiver's start receives and forwards before it returns (finished
 *     at once). The root starts bucket k+1 while ZeroMQ still sends bucket
 *     k, so the ring never drains between buckets.
 *   nccl: the broadcast is enqueued on the communicator's stream. The root
 *     of an in-place broadcast (sendbuf == recvbuf) first copies the data
 *     on a second stream into one of two device staging buffers (double
 *     buffering: the copy of bucket k+1 runs while NCCL sends bucket k,
 *     and the staging buffer of bucket k-1 is reused only after its
 *     broadcast finished), and NCCL sends from there. Finished = its event
 *     completed.
 * Failures as the blocking operations' (a dead peer ends a wait at an abort
 * or the timeout; then the communicator is broken and every started
 * broadcast dropped: the root's buffers are not read after the failing call
 * returned). */
#define RL_COMM_MAX_INFLIGHT 4
int rl_comm_broadcast_start(rl_comm *c, const float *sendbuf, float *recvbuf,
                            int64_t count, int root);
int rl_comm_wait(rl_comm *c, int keep);
/* How many started broadcasts are unfinished right now (polls, never
 * waits): the pipeline's depth, for metrics and tests. */
int rl_comm_inflight(rl_comm *c);

#ifdef __cplusplus
}
#endif
#endif
