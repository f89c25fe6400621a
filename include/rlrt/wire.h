/* rlrt/wire.h — DataProto on the wire: zero-copy ZeroMQ multipart encoding.
 *
 * Purpose: move an rl_dataproto between processes as ONE multipart message
 * (proto/rl.proto):
 *   frame 0      rl.DataProtoHeader (protobuf-c): rows, tensor specs (name,
 *                dtype code, shape, frame index, byte length), columns with
 *                their per-row values, meta as a typed Value tree;
 *   frame 1..n   raw tensor bytes, one frame per tensor.
 *
 * Zero copy both ways:
 *   * send: each tensor frame is zmq_msg_init_data() over the tensor's bytes;
 *     the frame holds a storage reference that libzmq drops (from its I/O
 *     thread) once the bytes are on the wire. The sender may free its
 *     DataProto right after the send call; it must not WRITE to the tensors
 *     until their storage refcount has fallen back (the bytes are still being
 *     read by the I/O thread).
 *   * receive: each received tensor frame is moved into heap memory and
 *     wrapped in an rl_storage; decoded tensors are views of it and keep it
 *     alive. A frame whose address is not aligned to its dtype size (only
 *     small frames, which libzmq may pack into a shared buffer) is copied.
 *   * over inproc:// libzmq passes the sender's buffer itself, so the
 *     receiver's tensors ARE the sender's bytes: treat sent tensors as
 *     read-only on both sides (clone before writing in place).
 *
 * Invariants: the decoder trusts nothing. Frame count, byte lengths
 * (numel × dtype size), shape products (overflow), negative dims, ndim
 * (1..RL_TENSOR_MAX_DIMS), header.rows (-1..RL_WIRE_MAX_ROWS), dtype and
 * column type codes, duplicate names
 * (tensor/tensor, column/column, tensor/column), column and tensor row counts,
 * the protobuf itself, the meta nesting depth (RL_WIRE_MAX_META_DEPTH) and the
 * memory the header may expand to (64 × its size + 1 MiB) are checked before
 * anything is built; any violation is RL_EPROTO with a message naming the
 * field (tensor/column name, index), the expected and the actual value.
 * RL_EINVAL is kept for caller mistakes (NULL arguments).
 *
 * Ownership: rl_wire_encode() fills zmq_msg_t frames the caller must send or
 * zmq_msg_close(). rl_wire_decode_msgs() takes over the messages it is given
 * (they are closed or moved on return, success or not). Decoded DataProtos
 * belong to the caller (rl_dataproto_free()).
 */
#ifndef RLRT_WIRE_H
#define RLRT_WIRE_H

#include <stddef.h>
#include <stdint.h>
#include <zmq.h>

#include "rlrt/dataproto.h"

#ifdef __cplusplus
extern "C" {
#endif

/* DataProtoHeader.version this build writes and accepts. */
#define RL_WIRE_VERSION 1
/* Envelope.protocol_version of the control plane (2: HELLO proves the slot
 * token by challenge-response; 1 carried the token in clear). */
#define RL_PROTOCOL_VERSION 2
/* Deepest meta nesting accepted (a scalar at top level of meta is depth 1). */
#define RL_WIRE_MAX_META_DEPTH 64
/* Most tensors (frames - 1) in one DataProto. */
#define RL_WIRE_MAX_TENSORS 4096
/* Most columns in one DataProto. */
#define RL_WIRE_MAX_COLUMNS 4096
/* Most rows header.rows may claim (decoding refuses more with RL_EPROTO), so
 * row arithmetic on a received DataProto (pad, repeat, split, concat) cannot
 * overflow even without tensors or with zero-width ones. */
#define RL_WIRE_MAX_ROWS (INT64_C(1) << 31)
/* Largest header frame accepted. */
#define RL_WIRE_MAX_HEADER_BYTES ((size_t)1 << 30)
/* Largest envelope frame accepted (control messages: the job config, call
 * args, results; tensors travel in payload frames). */
#define RL_WIRE_MAX_ENVELOPE_BYTES ((size_t)64 << 20)

/* One received frame for rl_wire_decode(). `owner`, if not NULL, is a storage
 * that contains [data, data + len): decoded tensors become views retaining it
 * (zero copy). With owner NULL the bytes are copied. */
typedef struct rl_wire_frame {
    const void *data;
    size_t len;
    rl_storage *owner;
} rl_wire_frame;

/* ---- whole-message helpers ------------------------------------------------ */

/* Sends dp as 1 + tensor_count frames. `flags` may hold ZMQ_SNDMORE (more
 * frames follow the DataProto, e.g. trailing envelope frames) and
 * ZMQ_DONTWAIT. Frames before the DataProto (an envelope) are sent by the
 * caller with ZMQ_SNDMORE first. RL_EIO on a socket error (RL_ETIMEOUT for
 * EAGAIN), RL_EINVAL/RL_EPROTO for a DataProto that cannot be encoded. */
int rl_wire_send_dataproto(void *zmq_socket, const rl_dataproto *dp, int flags);

/* Receives frames up to the end of the multipart message and decodes them.
 * Call it after reading any leading envelope frames. */
int rl_wire_recv_dataproto(void *zmq_socket, rl_dataproto **out);

/* ---- frames ---------------------------------------------------------------- */

/* Encodes dp into *n_frames = 1 + tensor_count initialised messages in a
 * malloc'd array *frames (free() it after sending/closing every message).
 * Tensor frames are zero-copy (hold a storage reference until closed/sent). */
int rl_wire_encode(const rl_dataproto *dp, zmq_msg_t **frames, int *n_frames);

/* The header frame alone, in a malloc'd buffer (free()). Used by the encoder
 * and by tools that write seeds/fixtures. */
int rl_wire_encode_header(const rl_dataproto *dp, void **buf, size_t *len);

/* Decodes n frames (frame 0 = header). Never crashes on hostile input. */
int rl_wire_decode(const rl_wire_frame *frames, int n, rl_dataproto **out);

/* Zero-copy decode of received messages: takes over msgs[0..n) (each is
 * moved out; the caller's zmq_msg_t are left closed/empty). */
int rl_wire_decode_msgs(zmq_msg_t *msgs, int n, rl_dataproto **out);

/* Frames packed into one byte string: for each frame a little-endian u32
 * length then the bytes. This is the fuzzer's input format and what seed and
 * regression files hold. Decodes with copies. A trailing partial length or a
 * length past the end is RL_EPROTO. */
int rl_wire_decode_packed(const void *buf, size_t len, rl_dataproto **out);
/* Encodes dp into that packed format (malloc'd, free()). */
int rl_wire_encode_packed(const rl_dataproto *dp, void **buf, size_t *len);

/* ---- control-plane envelopes ------------------------------------------------ */

struct Rl__Envelope; /* generated from proto/rl.proto (build/gen/rl.pb-c.h) */

/* Safe replacement for rl__envelope__unpack(): Envelope carries Value trees
 * (Configure.extra, Call.args, Reply.result) and protobuf-c unpacks them
 * recursively without a limit, so one hostile frame of nested lists would
 * overflow the stack. This scans first and refuses nesting deeper than
 * RL_WIRE_MAX_META_DEPTH (RL_EPROTO naming it). A frame over
 * RL_WIRE_MAX_ENVELOPE_BYTES, or one whose decoded structs would take more
 * than 8 × its size + 64 MiB (a list of empty Values unpacks to about 50×
 * its bytes), is refused too. Free the result with
 * rl__envelope__free_unpacked(env, NULL). The protocol version is left to the
 * caller to check. */
int rl_wire_unpack_envelope(const void *buf, size_t len, struct Rl__Envelope **out);

#ifdef __cplusplus
}
#endif
#endif
