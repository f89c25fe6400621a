/* rlrt/runtime/channel.h — direct worker-to-worker data channels and the
 * versioned weight channel.
 *
 * Data channel: a ZeroMQ PAIR connection between two workers that the driver
 * sets up (one side listens and reports its endpoint, the driver hands it to
 * the other side), so per-step traffic — env observations to rollout, actions
 * back — never passes through the driver (RLinf's channels). Messages are
 * DataProtos in the usual zero-copy wire format.
 *
 * Weight channel: actor → rollout transfer of a flat float buffer (the model's
 * flat parameter buffer) in buckets, tagged with a version.
 * The sender binds a ROUTER; receivers connect DEALERs and say which version
 * they hold. rl_weight_send() pushes every bucket of `version` to every
 * receiver (zero-copy, pipelined) and returns once all have acknowledged it.
 * A receiver writes buckets into a staging buffer and switches its active
 * buffer to the new version only when every bucket of that version arrived
 * (and the byte count matched): readers never see a half-updated model. The
 * buckets must tile the buffer the way the sender cuts it (bucket b holds
 * floats [b·per, min((b+1)·per, count)), the same per for the whole
 * version): one that overlaps another or leaves a gap is RL_EPROTO, so no
 * sender can get a version switched in with stale floats in it.
 * The API is the shape of an NCCL broadcast from the actor to the rollout
 * ranks (flat buffer, count, version), so a GPU transport can replace the
 * ZeroMQ one without touching callers.
 *
 * Fan-out: star (the sender sends every bucket to every receiver: N
 * transfers from the sender) or chain (docs/decisions/weight-fanout-chain.md:
 * the sender sends each bucket to the lowest-ranked receiver only, and
 * every receiver forwards each bucket to the next rank as it arrives, before
 * applying it, so N receivers cost about one transfer plus a pipeline fill
 * of N - 1 buckets; when the receivers' inputs are on more than one host,
 * the chain runs over each host's lowest rank, which also feeds its host's
 * other ranks, so the fill counts hosts). Only receivers made with rl_weight_receiver_new_ranked
 * (a rank and an input to bind) take part in a chain; the others get their
 * buckets from the sender. Every receiver acknowledges to the sender
 * itself, and the sender returns once all have: a version is switched in
 * whole on each receiver or not at all, whatever the shape. A dead receiver
 * stops the chain below it; the sender's wait ends at its timeout or at an
 * abort (the driver aborts the waits when its heartbeats find a dead
 * worker) with an error naming the lowest ranks that did not acknowledge
 * (in a chain the first one is where it broke). A ranked receiver that
 * comes back under a new process takes its rank's place.
 *
 * Waits: every wait here (a receive, a send that needs a peer, a weight
 * send waiting for receivers and their acknowledgements, a weight receive)
 * ends at its timeout, or within 50 ms with RL_EPEER when the process's
 * waits are aborted (an rl-worker does it on the driver's RL_WORKER_ABORT
 * when a peer died: rlrt/runtime/worker.h); the objects stay usable, except
 * a weight sender whose send failed after queueing buckets: it closed its
 * socket so the caller's buffer is free again, and refuses further sends
 * (RL_ESTATE: make a new one).
 *
 * Threading: each object is used by one thread at a time.
 * Ownership: constructors return objects freed with their *_free(); received
 * DataProtos are the caller's; rl_weight_recv_active() returns a buffer owned
 * by the receiver, valid until the next rl_weight_recv_poll().
 */
#ifndef RLRT_RUNTIME_CHANNEL_H
#define RLRT_RUNTIME_CHANNEL_H

#include <stddef.h>
#include <stdint.h>

#include "rlrt/dataproto.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- data channel ------------------------------------------------------------ */

typedef struct rl_channel rl_channel;

/* Binds `bind` ("tcp://HOST:*" picks a free port). */
rl_channel *rl_channel_listen(const char *bind);
rl_channel *rl_channel_connect(const char *endpoint);
/* The bound endpoint (listen side) or the peer's (connect side). */
const char *rl_channel_endpoint(const rl_channel *ch);
int rl_channel_send(rl_channel *ch, const rl_dataproto *dp, int timeout_ms);
/* RL_ETIMEOUT if nothing arrives in timeout_ms (< 0: wait forever). */
int rl_channel_recv(rl_channel *ch, rl_dataproto **out, int timeout_ms);
void rl_channel_free(rl_channel *ch);

/* ---- weight channel ------------------------------------------------------------ */

typedef struct rl_weight_sender rl_weight_sender;
typedef struct rl_weight_receiver rl_weight_receiver;

typedef enum { RL_WEIGHT_FANOUT_STAR = 0, RL_WEIGHT_FANOUT_CHAIN = 1 } rl_weight_fanout;

/* bucket_bytes: transfer unit (default 4 MiB when 0). Star fan-out until
 * rl_weight_sender_set_fanout says otherwise. At most 1024 receivers. */
rl_weight_sender *rl_weight_sender_new(const char *bind, size_t bucket_bytes);
const char *rl_weight_sender_endpoint(const rl_weight_sender *s);
/* The shape of the next sends (any other value is star); can't fail. */
void rl_weight_sender_set_fanout(rl_weight_sender *s, rl_weight_fanout fanout);
/* Sends buf[0..count) as `version` to `n_receivers` receivers (waits up to
 * timeout_ms for them to connect and to acknowledge; < 0: no limit).
 * version must grow. buf is read until it returns, never after. */
int rl_weight_send(rl_weight_sender *s, uint64_t version, const float *buf, int64_t count,
                   int n_receivers, int timeout_ms);
void rl_weight_sender_free(rl_weight_sender *s);

rl_weight_receiver *rl_weight_receiver_new(const char *endpoint, int64_t count);
/* A receiver that can be a link of a chain: it binds its input on `bind`
 * ("tcp://HOST:*", an address the previous rank can reach) and tells the
 * sender its rank (0 <= rank < 65536; chain order). bind NULL: the same as
 * rl_weight_receiver_new. */
rl_weight_receiver *rl_weight_receiver_new_ranked(const char *endpoint, int64_t count, int rank,
                                                  const char *bind);
/* Receives until a complete newer version is active (returns 0) or the time
 * runs out (RL_ETIMEOUT; the active version is unchanged). timeout_ms 0
 * takes what has arrived without waiting (partial rollouts poll so between
 * decode steps), except for a chained bucket that came before its route:
 * the route, already sent, is waited for up to 2 s. In a chain it
 * forwards what it receives while it waits; what it forwarded keeps going
 * after it returns (ZeroMQ's I/O thread), and rl_weight_receiver_free waits
 * up to 5 s for it to leave (a dead next rank: the full 5 s). */
int rl_weight_recv_poll(rl_weight_receiver *r, int timeout_ms);
/* The active buffer (count floats) and its version (0 = none yet). */
const float *rl_weight_recv_active(const rl_weight_receiver *r, uint64_t *version);
void rl_weight_receiver_free(rl_weight_receiver *r);
/* The newest weight version this process sent to every receiver or made
 * active as a receiver (0: none yet), over ZeroMQ or CUDA IPC
 * (rlrt/runtime/channel_ipc.h) — for the daemons' /metrics. */
uint64_t rl_weight_channel_version(void);

#ifdef __cplusplus
}
#endif
#endif
