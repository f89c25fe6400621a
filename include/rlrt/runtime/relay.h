/* rlrt/runtime/relay.h — a node relay: one connection to the driver for
 * the workers of a node.
 *
 * Purpose: at hundreds of workers the driver's cost is one TCP message per
 * worker each way per call, each waking libzmq's I/O thread and the
 * driver's loop (docs/SCALE.md). A relay (`rl-worker --relay`, one per node
 * with `relay: true` in cluster.yaml, started by the driver before the
 * node's workers) binds an endpoint on its node that those workers connect
 * to instead of the driver, and forwards every message both ways over one
 * DEALER connected to the driver's ROUTER. It keeps no session: handshakes,
 * heartbeats and calls pass through unchanged, and the driver addresses a
 * worker behind it by the relay's identity followed by the worker's
 * (common/runtime/msg.h), so a worker proves its slot exactly as when
 * directly connected.
 *
 * Coalescing: the replies (REPLY, or ERROR naming a call) to the calls of
 * one method the relay forwarded are held while other calls of that method
 * through this relay are unanswered, and sent together when the last is
 * answered or hold_ms after the first was held, whichever comes first: the
 * driver then wakes once per node, not once per worker. A call's future
 * completes on its last reply, which is never held past the others, so
 * holding adds no wait to a completed call (hold_ms bounds how late the
 * earlier replies of a straggling node arrive). Any other message from a
 * worker (HELLO, READY, HEARTBEAT, DISCONNECT) first sends everything held,
 * so a worker's messages keep their order; a HELLO also forgets the calls
 * its role and rank's earlier connection left unanswered.
 *
 * Security: see rl_relay_options.driver_key.
 *
 * Failure: a relay that exits takes its workers' connections with it; the
 * driver that started it starts it again on the same endpoint, and its
 * workers reconnect to it (ZeroMQ) under a new relay identity. The first
 * of them to prove its slot's token through the new relay (HELLO) tells
 * the driver (the identity names the node; a made-up identity proves
 * nothing): every other worker behind the old one fails its calls in
 * flight (the retry-safe ones go again once it is READY; the recipe
 * replays the step) and is told over the new relay to HELLO again at once,
 * so the node is back within a round trip, not after its heartbeats. Everything a peer
 * sends is checked: a worker identity that is empty, longer than
 * RL_MSG_PEER_ID_MAX or starts with the relay mark is refused; a message
 * without an envelope frame is dropped (the driver decides about the rest).
 *
 * Threading and ownership: rl_relay_run() runs the relay on the calling
 * thread until *stop becomes nonzero (a signal handler's flag); it owns its
 * ZeroMQ context and sockets.
 */
#ifndef RLRT_RUNTIME_RELAY_H
#define RLRT_RUNTIME_RELAY_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct rl_relay_options {
    const char *driver; /* the driver's endpoint (tcp://host:port) */
    const char *bind;   /* where the node's workers connect (e.g. ipc://@name) */
    const char *node;   /* names the relay in its identity and logs ([A-Za-z0-9_.-]) */
    int hold_ms;        /* 0: forward every reply at once */
    volatile sig_atomic_t *stop;
    int give_up_ms;     /* > 0: stop (RL_ETIMEOUT) after this long without a
                           message from the driver (an orphan of a dead
                           driver on an ssh node); 0: never */
    /* Security: the driver's public key (Z85, 40 characters) or NULL. Set,
     * the connection to the driver is a CURVE client with the key pair the
     * process loaded (rl_net_set_security: a worker certificate the driver
     * authorizes), and the workers' side must be a Unix socket at a path
     * (ipc:///DIR/NAME) whose directory only this user may enter: the relay
     * makes DIR with mode 0700, or refuses one that is not its own 0700
     * directory. Its workers then speak to it in clear, guarded by the file
     * system, and keep CURVE on their own channels. */
    const char *driver_key;
} rl_relay_options;

typedef struct rl_relay_stats {
    int64_t down;    /* messages driver -> workers */
    int64_t up;      /* messages workers -> driver */
    int64_t sends_up; /* bursts sent to the driver (held replies go as one) */
    int64_t held;    /* replies that waited for their method's others */
    int64_t dropped; /* malformed or unroutable messages */
} rl_relay_stats;

/* Runs the relay until *stop. RL_EINVAL for bad options (naming the
 * option), RL_EIO when a socket cannot be made or bound, RL_ETIMEOUT when
 * the driver was silent for give_up_ms; RL_OK on stop.
 * stats (may be NULL) is filled on return. */
int rl_relay_run(const rl_relay_options *opt, rl_relay_stats *stats);

/* The endpoint the driver gives node `node`'s relay and workers for job
 * `job_id`: an abstract Unix socket, ipc://@rlrt-JOB-NODE, or with security
 * a path in a directory of the relay's own, ipc:///tmp/rlrt-JOB-NODE/relay. */
void rl_relay_endpoint(const char *job_id, const char *node, int secure, char *out,
                       size_t out_size);

#ifdef __cplusplus
}
#endif
#endif
