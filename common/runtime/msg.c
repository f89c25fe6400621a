/* msg.c — control-plane envelopes on ZeroMQ sockets (see common/runtime/msg.h). */
#include "common/runtime/msg.h"
#include "rlrt/error.h"
#include "common/runtime/net.h"
#include "rlrt/wire.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

const char *rl_msg_kind_name(int body_case)
{
    switch (body_case) {
    case RL__ENVELOPE__BODY_HELLO: return "HELLO";
    case RL__ENVELOPE__BODY_CONFIGURE: return "CONFIGURE";
    case RL__ENVELOPE__BODY_READY: return "READY";
    case RL__ENVELOPE__BODY_CALL: return "CALL";
    case RL__ENVELOPE__BODY_REPLY: return "REPLY";
    case RL__ENVELOPE__BODY_ERROR: return "ERROR";
    case RL__ENVELOPE__BODY_HEARTBEAT: return "HEARTBEAT";
    case RL__ENVELOPE__BODY_SHUTDOWN: return "SHUTDOWN";
    case RL__ENVELOPE__BODY_DISCONNECT: return "DISCONNECT";
    case RL__ENVELOPE__BODY_CHALLENGE: return "CHALLENGE";
    default: return "EMPTY";
    }
}

const char *rl_msg_id_str(const unsigned char *id, size_t len, char *buf, size_t buflen)
{
    size_t n = 0;
    for (size_t i = 0; i < len && n + 3 < buflen; i++)
        n += (size_t)snprintf(buf + n, buflen - n, "%02x", id[i]);
    if (buflen)
        buf[n < buflen ? n : buflen - 1] = '\0';
    return buf;
}

size_t rl_msg_relay_part(const void *id, size_t len)
{
    const unsigned char *b = id;
    if (len < 3 || b[0] != RL_MSG_RELAY_MARK)
        return 0;
    const unsigned char *end = memchr(b + 1, RL_MSG_RELAY_MARK,
                                      (len < RL_MSG_RELAY_ID_MAX ? len : RL_MSG_RELAY_ID_MAX) - 1);
    return end && end > b + 1 ? (size_t)(end - b) + 1 : 0;
}

static int s_sock_error(const char *what)
{
    int e = zmq_errno();
    /* EAGAIN ends every drain of a socket (each message that wakes a loop):
     * its text without strerror's locale look-up */
    if (e == EAGAIN)
        return rl_error_set(RL_ETIMEOUT, "%s: Resource temporarily unavailable", what);
    return rl_error_set(RL_EIO, "%s: %s", what, zmq_strerror(e));
}

void rl_msg_heartbeat(Rl__Envelope *env, Rl__Heartbeat *hb, uint64_t time_ns)
{
    rl__envelope__init(env);
    rl__heartbeat__init(hb);
    hb->time_ns = time_ns;
    env->body_case = RL__ENVELOPE__BODY_HEARTBEAT;
    env->heartbeat = hb;
}

size_t rl_msg_size(const Rl__Envelope *env, const rl_dataproto *payload)
{
    size_t n = rl__envelope__get_packed_size(env);
    for (int i = 0; payload && i < rl_dataproto_tensor_count(payload); i++)
        n += rl_tensor_nbytes(rl_dataproto_tensor_at(payload, i));
    return n;
}

/* RL_EPROTO naming the frame when one would exceed the frame limit: the
 * receiver's libzmq would drop the connection, and the message with it. */
static int s_check_limit(const Rl__Envelope *env, size_t env_len, const rl_dataproto *payload)
{
    int64_t max = rl_net_max_message();
    if ((int64_t)env_len > max)
        return rl_error_set(RL_EPROTO, "%s envelope of %zu bytes is over the frame limit of %lld "
                            "bytes (limits.max_message_mb): not sent",
                            rl_msg_kind_name(env->body_case), env_len, (long long)max);
    for (int i = 0; payload && i < rl_dataproto_tensor_count(payload); i++) {
        const rl_tensor *t = rl_dataproto_tensor_at(payload, i);
        if ((int64_t)rl_tensor_nbytes(t) > max)
            return rl_error_set(RL_EPROTO, "%s payload tensor '%s' of %zu bytes is over the "
                                "frame limit of %lld bytes (limits.max_message_mb): not sent",
                                rl_msg_kind_name(env->body_case),
                                rl_dataproto_tensor_name(payload, i), rl_tensor_nbytes(t),
                                (long long)max);
    }
    return RL_OK;
}

int rl_msg_send(void *sock, const void *id, size_t id_len, Rl__Envelope *env,
                const rl_dataproto *payload)
{
    env->protocol_version = RL_PROTOCOL_VERSION;
    size_t len = rl__envelope__get_packed_size(env);
    int lim = s_check_limit(env, len, payload);
    if (lim)
        return lim;
    uint8_t stackbuf[512];
    uint8_t *buf = len <= sizeof stackbuf ? stackbuf : malloc(len);
    if (!buf)
        return rl_error_set(RL_ENOMEM, "envelope of %zu bytes: out of memory", len);
    rl__envelope__pack(env, buf);
    int rc = RL_OK;
    size_t relay = id ? rl_msg_relay_part(id, id_len) : 0;
    if (relay && relay < id_len) { /* to a worker behind a relay: two frames */
        if (zmq_send(sock, id, relay, ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0) {
            rc = s_sock_error("send relay identity frame");
            goto done;
        }
        id = (const unsigned char *)id + relay;
        id_len -= relay;
    }
    if (id && zmq_send(sock, id, id_len, ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0) {
        rc = s_sock_error("send identity frame");
        goto done;
    }
    /* never block: a DEALER whose peer is gone (or never completed the
     * CURVE handshake) would block here forever, and with it the loop that
     * must notice the silence and give up */
    if (zmq_send(sock, buf, len, (payload ? ZMQ_SNDMORE : 0) | ZMQ_DONTWAIT) < 0) {
        rc = s_sock_error("send envelope frame");
        goto done;
    }
    if (payload)
        rc = rl_wire_send_dataproto(sock, payload, 0);
done:
    if (buf != stackbuf)
        free(buf);
    return rc;
}

int rl_msg_recv(void *sock, int router, rl_msg *out)
{
    memset(out, 0, sizeof *out);
    zmq_msg_t frame;
    zmq_msg_init(&frame);
    if (zmq_msg_recv(&frame, sock, ZMQ_DONTWAIT) < 0) {
        zmq_msg_close(&frame);
        return s_sock_error("receive");
    }
    out->bytes = zmq_msg_size(&frame);
    if (router) {
        size_t n = zmq_msg_size(&frame);
        out->id_len = n < RL_MSG_ID_MAX ? n : RL_MSG_ID_MAX;
        memcpy(out->id, zmq_msg_data(&frame), out->id_len);
        zmq_msg_close(&frame);
        if (!rl_net_more(sock))
            return rl_error_set(RL_EPROTO, "message has an identity frame but no envelope");
        size_t relay = rl_msg_relay_part(out->id, out->id_len);
        if (relay == out->id_len) { /* a relay's: the worker's identity follows */
            zmq_msg_init(&frame);
            if (zmq_msg_recv(&frame, sock, 0) < 0) {
                zmq_msg_close(&frame);
                return s_sock_error("receive relayed identity");
            }
            size_t n2 = zmq_msg_size(&frame);
            const unsigned char *p2 = zmq_msg_data(&frame);
            out->bytes += n2;
            int bad = n2 == 0 || n2 > RL_MSG_PEER_ID_MAX || p2[0] == RL_MSG_RELAY_MARK;
            if (!bad) {
                memcpy(out->id + relay, p2, n2);
                out->id_len = relay + n2;
                out->peer_off = relay;
            }
            zmq_msg_close(&frame);
            if (bad || !rl_net_more(sock)) {
                rl_net_drain(sock);
                return rl_error_set(RL_EPROTO, "message from relay: the worker's identity frame "
                                    "is %s (expected 1 to %d bytes, not a relay's)",
                                    bad ? "bad" : "there, but no envelope", RL_MSG_PEER_ID_MAX);
            }
        } else if (relay) {
            rl_net_drain(sock);
            return rl_error_set(RL_EPROTO, "identity of %zu bytes is a relay's with more after it",
                                out->id_len);
        }
        zmq_msg_init(&frame);
        if (zmq_msg_recv(&frame, sock, 0) < 0) {
            zmq_msg_close(&frame);
            return s_sock_error("receive envelope");
        }
        out->bytes += zmq_msg_size(&frame);
    }
    /* Not rl__envelope__unpack(): it recurses without limit into nested
     * Values, so one hostile frame could overflow the stack. */
    rl_wire_unpack_envelope(zmq_msg_data(&frame), zmq_msg_size(&frame), &out->env);
    size_t env_len = zmq_msg_size(&frame);
    zmq_msg_close(&frame);
    if (!out->env) {
        rl_net_drain(sock);
        return rl_error_wrap(RL_EPROTO, "envelope frame of %zu bytes is not a valid rl.Envelope",
                             env_len);
    }
    if (!rl_net_more(sock))
        return RL_OK;
    /* Payload frames: gather them all, then decode zero-copy. */
    int cap = 8, n = 0;
    zmq_msg_t *msgs = malloc(sizeof *msgs * (size_t)cap);
    if (!msgs) {
        rl_net_drain(sock);
        return rl_error_set(RL_ENOMEM, "payload: out of memory");
    }
    while (rl_net_more(sock)) {
        if (n == RL_MSG_MAX_FRAMES) { /* more than any valid DataProto has */
            for (int i = 0; i < n; i++)
                zmq_msg_close(&msgs[i]);
            free(msgs);
            rl_net_drain(sock);
            return rl_error_set(RL_EPROTO, "payload of %s has more than %d frames",
                                rl_msg_kind_name(out->env->body_case), RL_MSG_MAX_FRAMES);
        }
        if (n == cap) {
            zmq_msg_t *m2 = realloc(msgs, sizeof *msgs * (size_t)(cap *= 2));
            if (!m2) {
                for (int i = 0; i < n; i++)
                    zmq_msg_close(&msgs[i]);
                free(msgs);
                rl_net_drain(sock);
                return rl_error_set(RL_ENOMEM, "payload: out of memory");
            }
            msgs = m2;
        }
        zmq_msg_init(&msgs[n]);
        if (zmq_msg_recv(&msgs[n], sock, 0) < 0) {
            zmq_msg_close(&msgs[n]);
            break;
        }
        out->bytes += zmq_msg_size(&msgs[n]);
        n++;
    }
    int rc = rl_wire_decode_msgs(msgs, n, &out->payload);
    free(msgs);
    if (rc) {
        out->payload = NULL;
        out->payload_error = rc;
        return rl_error_wrap(rc, "payload of %s", rl_msg_kind_name(out->env->body_case));
    }
    return RL_OK;
}

void rl_msg_clear(rl_msg *m)
{
    if (m->env)
        rl__envelope__free_unpacked(m->env, NULL);
    rl_dataproto_free(m->payload);
    m->env = NULL;
    m->payload = NULL;
}
