/* common/runtime/msg.h — control-plane messages on ZeroMQ sockets.
 *
 * Purpose: one control-plane message is a ZeroMQ multipart message
 *   [identity]          ROUTER side only (added/stripped by ZeroMQ)
 *   [worker identity]   only on the driver's ROUTER, from a node relay
 *   envelope            rl.Envelope (proto/rl.proto), protocol_version set
 *   [DataProto frames]  only when the CALL/REPLY says has_payload
 * rl_msg_send()/rl_msg_recv() move such messages; the DataProto frames are
 * zero-copy both ways (see rlrt/wire.h).
 *
 * Invariants: rl_msg_recv() always consumes every frame of one message, even
 * when it fails, so framing never goes out of step; a garbage envelope or a
 * bad payload is reported as an error with the peer identity still filled
 * in (the caller can answer with ERROR / DISCONNECT). The protocol version is
 * NOT checked here: the caller decides how to refuse a mismatch.
 *
 * Ownership: rl_msg owns its unpacked envelope and payload; rl_msg_clear()
 * frees both. rl_msg_send() does not take ownership of anything.
 */
#ifndef RLRT_RUNTIME_MSG_H
#define RLRT_RUNTIME_MSG_H

#include <stddef.h>
#include <stdint.h>

#include "rl.pb-c.h"
#include "rlrt/dataproto.h"

#ifdef __cplusplus
extern "C" {
#endif

#define RL_MSG_ID_MAX 255

/* Node relays (common/runtime/relay.h). A relay's connection to the driver
 * has the routing identity RL_MSG_RELAY_MARK + text + RL_MSG_RELAY_MARK
 * (3..RL_MSG_RELAY_ID_MAX bytes, no mark inside), and every message it
 * forwards carries the worker's own identity as a second frame. The driver
 * sees the two as one identity, the relay's followed by the worker's (the
 * worker's starts at rl_msg.peer_off); rl_msg_send() splits such an
 * identity into its two frames again. A worker's identity never starts
 * with the mark and is 1..RL_MSG_PEER_ID_MAX bytes. */
#define RL_MSG_RELAY_MARK 0x01
#define RL_MSG_RELAY_ID_MAX 64
#define RL_MSG_PEER_ID_MAX (RL_MSG_ID_MAX - RL_MSG_RELAY_ID_MAX)

/* The length of the relay's part of identity id (a relay's identity alone,
 * or one with a worker's after it); 0 when id is not a relay's. */
size_t rl_msg_relay_part(const void *id, size_t len);
#define RL_MSG_MAX_FRAMES 8200 /* header + at most 4096 tensors, with room */

typedef struct rl_msg {
    unsigned char id[RL_MSG_ID_MAX]; /* ROUTER peer identity (a relay's and
                                        the worker's behind it, together) */
    size_t id_len;
    size_t peer_off;  /* where the sender's own identity starts in id: 0,
                         or after the relay's part */
    Rl__Envelope *env;      /* NULL if the envelope could not be parsed */
    rl_dataproto *payload;  /* NULL if none */
    int payload_error;      /* rl_status of a payload that failed to decode */
    size_t bytes;           /* every frame's size, identity included */
} rl_msg;

/* Short name of an envelope body ("HELLO", "CALL", ...). */
const char *rl_msg_kind_name(int body_case);

/* Sends env (+ payload frames). `id` is the ROUTER destination (NULL on a
 * DEALER; a relay's and a worker's identity together go as two frames). Sets env->protocol_version. Never blocks: RL_ETIMEOUT when the
 * socket cannot take the message now (a DEALER without a peer), RL_EIO on
 * other socket errors. A frame above rl_net_max_message() (the peer's
 * ZMQ_MAXMSGSIZE: it would drop the connection) is not sent: RL_EPROTO
 * naming the frame, its size and the limit. */
int rl_msg_send(void *sock, const void *id, size_t id_len, Rl__Envelope *env,
                const rl_dataproto *payload);
/* A HEARTBEAT envelope stamped time_ns (a monotonic clock's ns) into *env,
 * its body in *hb (both the caller's, e.g. on its stack). */
void rl_msg_heartbeat(Rl__Envelope *env, Rl__Heartbeat *hb, uint64_t time_ns);
/* Bytes that rl_msg_send(env, payload) puts on the wire (identity aside). */
size_t rl_msg_size(const Rl__Envelope *env, const rl_dataproto *payload);
/* Receives one message without blocking (RL_ETIMEOUT if none is queued).
 * router: the socket is a ROUTER (first frame = identity; from a relay, a
 * second identity frame follows: RL_EPROTO when it is missing, empty, too
 * long or itself a relay's). */
int rl_msg_recv(void *sock, int router, rl_msg *out);
void rl_msg_clear(rl_msg *m);

/* Printable identity (hex of the bytes) for logs. */
const char *rl_msg_id_str(const unsigned char *id, size_t len, char *buf, size_t buflen);

#ifdef __cplusplus
}
#endif
#endif
