/* common/runtime/net.h — what every ZeroMQ socket of a process gets: a frame
 * size limit and, when the job is secured, CurveZMQ with an allow-list.
 *
 * Purpose: the driver, the workers, data and weight channels and the
 * collectives all create their sockets through rl_net_bind() /
 * rl_net_connect() (or call rl_net_prepare() on a socket before bind/connect),
 * so one setting covers every socket of the process:
 *   - ZMQ_MAXMSGSIZE = rl_net_max_message(): a peer that announces a larger
 *     frame is disconnected by libzmq before the frame is buffered; a
 *     monitor on every listening TCP socket (a thread per socket, ending
 *     with it) logs such a drop with the peer's address and the limit,
 *     rate-limited (libzmq reports no size; a peer dropped before the
 *     monitor saw its connection, microseconds after the accept, goes
 *     unlogged); rl_msg_send() refuses to send a frame above the limit;
 *   - with security on (rl_net_set_security()), every TCP socket speaks
 *     CURVE. A binding socket is a CURVE server with this process's key pair
 *     and a ZAP handler (one thread per ZeroMQ context, started on first use)
 *     that admits only the client keys of the allow-list and logs every
 *     refusal with the peer address (rate-limited); a handshake monitor
 *     (a thread per CURVE server socket, ending with it) logs the peers that
 *     fail before ZAP is asked — a plaintext peer, a client that uses the
 *     wrong server key — with their address too; a connecting socket is a
 *     CURVE client that must know the server's public key.
 *
 * Endpoints carry the server's key: with security on, rl_net_bind() reports
 * "tcp://HOST:PORT|<40-char Z85 public key>" and rl_net_connect() expects
 * that form for tcp (a plain tcp endpoint is refused: it would be a
 * plaintext connection). The text travels wherever endpoints travel (CALL
 * meta, comm ids), so callers need no change. ipc:// and inproc:// sockets
 * are local and stay plaintext (their peers are on this host and the file
 * system's permissions guard them).
 *
 * Keys: certificates are czmq zcert files: NAME.cert holds the public key,
 * NAME.cert_secret the secret one (mode 0600). rl_net_keygen() writes a
 * pair; rl_net_load_cert() reads one; rl_net_load_authorized() reads every
 * public certificate of a folder.
 *
 * Threading: the settings are process-wide and meant to be set once, before
 * the sockets they govern are made (a later change applies to later
 * sockets); they are guarded by a mutex. The ZAP threads exit when their
 * context is terminated.
 *
 * Ownership: rl_net_* copy what they are given.
 */
#ifndef RLRT_RUNTIME_NET_H
#define RLRT_RUNTIME_NET_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define RL_NET_KEY_TXT 41            /* Z85 key + NUL */
#define RL_NET_ENDPOINT_MAX 320      /* endpoint + "|" + key */
#define RL_NET_DEFAULT_MAX_MESSAGE ((int64_t)256 << 20)

/* Largest frame a socket made after this call accepts (bytes, >= 1024). */
int rl_net_set_max_message(int64_t bytes);
int64_t rl_net_max_message(void);

typedef struct rl_net_keypair {
    char public_txt[RL_NET_KEY_TXT];
    char secret_txt[RL_NET_KEY_TXT];
} rl_net_keypair;

/* Turns CURVE on for this process's TCP sockets: `own` is this process's
 * key pair; `allowed[0..n)` the Z85 public keys of the clients its binding
 * sockets admit (copied; n may be 0 until known). RL_EINVAL on a malformed
 * key. */
int rl_net_set_security(const rl_net_keypair *own, const char *const *allowed, int n);
/* Replaces the allow-list (e.g. when CONFIGURE brings the job's keys). */
int rl_net_set_allowed(const char *const *allowed, int n);
/* 1 when CURVE is on. */
int rl_net_secure(void);
/* Copies this process's public key (Z85) when security is on; "" otherwise. */
void rl_net_public_key(char out[RL_NET_KEY_TXT]);
/* Turns security off, forgets the keys and resets the frame limit and the
 * refusal log budget (tests). */
void rl_net_reset(void);

/* Limits (and, for tcp with security on, CURVE server + ZAP) on `sock` of
 * context `ctx`, then binds `endpoint`; `out` (size RL_NET_ENDPOINT_MAX)
 * receives the endpoint to hand to peers: the real port after a wildcard
 * bind, plus "|KEY" when secured. */
int rl_net_bind(void *ctx, void *sock, const char *endpoint, char *out, size_t out_size);
/* Limits (and CURVE client towards the key of "ENDPOINT|KEY") on `sock`,
 * then connects. A "|KEY" endpoint while security is off, or a plain tcp
 * endpoint while it is on, is RL_EINVAL naming the endpoint. */
int rl_net_connect(void *sock, const char *endpoint);
/* Only the limits (for sockets whose bind/connect the caller does). */
void rl_net_limits(void *sock);
/* The endpoint without "|KEY" (what zmq_bind/zmq_connect take). */
void rl_net_endpoint_plain(const char *endpoint, char *out, size_t size);
/* 1 when the message being read on `sock` has more frames (ZMQ_RCVMORE). */
/* The monotonic clock in milliseconds (the channels' deadlines). */
int64_t rl_net_now_ms(void);
/* Waits until sock has `events` (ZMQ_POLLIN / ZMQ_POLLOUT); RL_ETIMEOUT (no
 * message) when the monotonic clock reaches deadline_ms (< 0: never). Looks
 * every RL_ABORT_POLL_MS for an abort after `base` (abort.h): then RL_EPEER
 * "<what>: aborted: <why>"; RL_EIO "zmq_poll: ..." on a socket error. */
int rl_net_wait(void *sock, short events, int64_t deadline_ms, uint64_t base, const char *what);
/* A channel end's own ZeroMQ context with one socket of `type` in it,
 * linger 0 (a closed end drops what it has not sent); "who: cannot create a
 * socket" when it cannot. rl_net_own_close takes either or both back (NULL:
 * not made). */
int rl_net_own_socket(void **ctx, void **sock, int type, const char *who);
void rl_net_own_close(void *ctx, void *sock);
int rl_net_more(void *sock);
/* Reads and drops the frames left of the message being read (a multipart
 * message arrives whole, so this does not wait); returns how many. A peer's
 * extra frames must be read before its next message can be. */
int rl_net_drain(void *sock);

/* What rl_net_bind does to a listening TCP socket, for one with an endpoint
 * of its own (the driver's ROUTER): the connection monitor and, with
 * security on, a CURVE server with an allow-list ZAP handler in `ctx`. */
int rl_net_curve_server(void *ctx, void *sock);
/* CURVE client towards `server_key` (Z85). */
int rl_net_curve_client(void *sock, const char *server_key);

/* ---- key files ---------------------------------------------------------------- */

/* Writes DIR/NAME.cert and DIR/NAME.cert_secret (0600); DIR is made. */
int rl_net_keygen(const char *dir, const char *name, rl_net_keypair *out);
/* Reads a certificate (NAME.cert_secret or NAME.cert: zcert finds the pair);
 * need_secret: RL_ECONFIG when the secret key is missing. */
int rl_net_load_cert(const char *path, int need_secret, rl_net_keypair *out);
/* Every public certificate (*.cert) of `dir`: *keys is a malloc'd array of
 * *n Z85 strings (free with rl_net_free_keys). RL_ECONFIG when the folder
 * cannot be read or holds no key. */
int rl_net_load_authorized(const char *dir, char ***keys, int *n);
void rl_net_free_keys(char **keys, int n);

/* ---- rate-limited logging ------------------------------------------------------- */

/* A token bucket for log lines about hostile input: at most `burst` lines
 * per `period_s`; rl_net_ratelimit() returns 1 when a line may be logged and
 * sets *suppressed to how many were dropped since the last one logged. */
typedef struct rl_net_ratelimit {
    double period_s;
    int burst;
    double window_start;
    int in_window;
    long suppressed;
} rl_net_ratelimit;

int rl_net_ratelimit_allow(rl_net_ratelimit *rl, long *suppressed);

#ifdef __cplusplus
}
#endif
#endif
