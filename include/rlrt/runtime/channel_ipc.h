/* rlrt/runtime/channel_ipc.h — the weight channel's same-device transport:
 * a version of the flat buffer moves from actor rank 0 to rollout ranks
 * that share its memory (CUDA IPC on one GPU), with only small messages on
 * the wire (docs/decisions/gpu-weight-transport.md).
 *
 * The sender exports its device buffer once (CUDA IPC handle, 64 bytes) and
 * sends each receiver, per bucket of the version, a BUCKET message over a
 * ZeroMQ ROUTER/DEALER pair of its own (the same shape as the ZeroMQ weight
 * channel, rlrt/runtime/channel.h): the handle, the block's size, the
 * version, the bucket's index and count, its byte offset and length, and the
 * bucket size that cuts the version (bucket b holds bytes
 * [b·per, min((b+1)·per, total)); the last one is the last). The receiver
 * maps the handle (once per handle), copies the bucket device-to-device
 * from the sender's block into its own staging buffer, waits for the copy
 * and acknowledges the bucket; after the last bucket it swaps staging and
 * active and says which version it holds. A version is active whole or not
 * at all: a sender killed mid-version leaves the previous version active.
 * At most `window` buckets per receiver are unacknowledged at once (0: all
 * of them, the fastest; 1: the receiver paces the sender bucket by bucket).
 *
 * Kinds of memory: RL_WEIGHT_IPC_CUDA (cudaMalloc blocks on the calling
 * thread's current device, cudaIpc* handles, cudart called directly: this
 * file is compiled against cudart only under `make CUDA=1`, elsewhere it is
 * RL_EUNSUPPORTED; common/runtime includes nothing of common/nn) and
 * RL_WEIGHT_IPC_SHM (POSIX shared memory on the host: the same protocol
 * between two processes on a machine without a GPU, which is what the CPU
 * tests run). Both sides must use the same kind (RL_EPROTO otherwise).
 *
 * Hostile peers: every field of a message is checked before use (kind,
 * total against the receiver's count, the tiling, the bucket inside the
 * exported block, the index order); a shared-memory handle is a name the
 * receiver opens read-only after checking its size. A CUDA handle's block
 * size cannot be checked (cudart has no call for it): a peer on the same
 * GPU is trusted to state it.
 *
 * Waits end at their timeout or within 50 ms of an abort (RL_EPEER,
 * common/runtime/abort.h), naming the receivers that did not acknowledge.
 * The sender stays usable after a failed send (its messages carry no part
 * of the buffer).
 *
 * Threading: each object is used by one thread at a time (for CUDA, a
 * thread whose current device holds the memory).
 * Ownership: objects are freed with their *_free(); the sender never frees
 * the buffer it sends (it must stay allocated until every receiver has
 * acknowledged, i.e. until rl_weight_ipc_send returns); the active buffer
 * (device memory of the receiver's kind) belongs to the receiver and stays
 * valid until the next rl_weight_ipc_recv_poll.
 */
#ifndef RLRT_RUNTIME_CHANNEL_IPC_H
#define RLRT_RUNTIME_CHANNEL_IPC_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { RL_WEIGHT_IPC_SHM = 1, RL_WEIGHT_IPC_CUDA = 2 } rl_weight_ipc_kind;

/* "shm" or "cuda_ipc" ("?" for anything else). */
const char *rl_weight_ipc_kind_name(rl_weight_ipc_kind kind);
/* 1 when this build and machine can use `kind` (CUDA: built with CUDA=1 and
 * a GPU visible), else 0 with a message saying why (rl_error_message). */
int rl_weight_ipc_available(rl_weight_ipc_kind kind);

/* Memory of a kind: blocks the sender can export and the receiver's own
 * buffers. alloc: NULL + message. copy directions: */
typedef enum { RL_WEIGHT_IPC_D2D = 0, RL_WEIGHT_IPC_H2D = 1, RL_WEIGHT_IPC_D2H = 2 } rl_weight_ipc_dir;
void *rl_weight_ipc_alloc(rl_weight_ipc_kind kind, size_t bytes);
void rl_weight_ipc_free(rl_weight_ipc_kind kind, void *p);
/* Copies and waits until the copy is done. */
int rl_weight_ipc_copy(rl_weight_ipc_kind kind, void *dst, const void *src, size_t bytes,
                       rl_weight_ipc_dir dir);

/* What one send measured (per receiver: every receiver copies `bytes`). */
typedef struct rl_weight_ipc_stats {
    uint64_t version;
    int receivers;
    double bytes, seconds, gbps; /* gbps = bytes / seconds / 1e9 */
    const char *transport;       /* rl_weight_ipc_kind_name */
} rl_weight_ipc_stats;

typedef struct rl_weight_ipc_sender rl_weight_ipc_sender;
typedef struct rl_weight_ipc_receiver rl_weight_ipc_receiver;

/* bind: "tcp://HOST:*". bucket_bytes: 0 = 1 GiB (rounded down to whole
 * floats; a 0.5B model in one bucket: the fewest messages, and the copies
 * are device-to-device anyway). window: unacknowledged buckets per receiver, 0 = no limit. */
rl_weight_ipc_sender *rl_weight_ipc_sender_new(const char *bind, rl_weight_ipc_kind kind,
                                               size_t bucket_bytes, int window);
const char *rl_weight_ipc_sender_endpoint(const rl_weight_ipc_sender *s);
/* Sends buf[0..count) as `version` (must grow) to `n_receivers` receivers
 * (waits up to timeout_ms for them to connect and to acknowledge; < 0: no
 * limit). buf: the START of a block of the sender's kind (CUDA: any
 * cudaMalloc block, e.g. a model's flat parameter buffer) whose writes the
 * caller has issued (this waits for the device before exporting). */
int rl_weight_ipc_send(rl_weight_ipc_sender *s, uint64_t version, const float *buf, int64_t count,
                       int n_receivers, int timeout_ms);
/* What the last successful send measured. */
void rl_weight_ipc_sender_stats(const rl_weight_ipc_sender *s, rl_weight_ipc_stats *out);
void rl_weight_ipc_sender_free(rl_weight_ipc_sender *s);

/* A receiver of `count` floats (two buffers of the kind: staging, active). */
rl_weight_ipc_receiver *rl_weight_ipc_receiver_new(const char *endpoint, rl_weight_ipc_kind kind,
                                                   int64_t count);
/* Receives until a complete newer version is active (0) or the time runs
 * out (RL_ETIMEOUT, the active version unchanged; timeout 0 handles what
 * has arrived and returns). */
int rl_weight_ipc_recv_poll(rl_weight_ipc_receiver *r, int timeout_ms);
/* Handles at most one bucket (waits up to timeout_ms for it): 0 with
 * *complete = 1 when it completed a version, 0 with *complete = 0 when it
 * copied a bucket of an unfinished one, RL_ETIMEOUT when none came. Lets a
 * caller interleave a version's copies with its own work (and a test stop
 * a sender between two buckets). */
int rl_weight_ipc_recv_step(rl_weight_ipc_receiver *r, int timeout_ms, int *complete);
/* The active buffer (device memory of the kind, count floats) and its
 * version (0 = none yet: the buffer is zeros). */
const float *rl_weight_ipc_recv_active(const rl_weight_ipc_receiver *r, uint64_t *version);
/* Buckets of the version being received: copied so far, of how many (0, 0: none). */
void rl_weight_ipc_recv_progress(const rl_weight_ipc_receiver *r, uint32_t *got, uint32_t *of);
/* Seconds the last completed version's bucket copies took here (each copy
 * and its wait for the device), the part of a sync that is not messaging. */
double rl_weight_ipc_recv_copy_seconds(const rl_weight_ipc_receiver *r);
void rl_weight_ipc_receiver_free(rl_weight_ipc_receiver *r);

#ifdef __cplusplus
}
#endif
#endif
