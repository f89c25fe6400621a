/* net.c — frame limits and CurveZMQ for every socket of a process (see
 * common/runtime/net.h). */
#include "common/runtime/net.h"

#include "common/runtime/abort.h"

#include "rlrt/error.h"
#include "rlrt/log.h"

#include <czmq.h>
#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <errno.h>
#include <poll.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

typedef struct {
    uint8_t key[32];
} s_key;

/* s_mu guards the key material; the two scalars are atomics, read without
 * it (s_secure is written under s_mu, together with s_own). */
static pthread_mutex_t s_mu = PTHREAD_MUTEX_INITIALIZER;
static _Atomic int64_t s_max_message = RL_NET_DEFAULT_MAX_MESSAGE;
static atomic_int s_secure;
static rl_net_keypair s_own;
static s_key *s_allowed;
static int s_n_allowed;

/* ZAP handlers: one per ZeroMQ context that has a CURVE server socket. */
typedef struct s_zap {
    void *ctx;
    void *rep;
    struct s_zap *next;
} s_zap;
static s_zap *s_zaps;
/* the log lines of refusals and dropped peers (guarded by s_mu) */
static rl_net_ratelimit s_zap_log = {10.0, 10, 0, 0, 0};

static double s_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

int rl_net_ratelimit_allow(rl_net_ratelimit *rl, long *suppressed)
{
    double now = s_now();
    double period = rl->period_s > 0 ? rl->period_s : 10.0;
    int burst = rl->burst > 0 ? rl->burst : 10;
    if (now - rl->window_start >= period) {
        rl->window_start = now;
        rl->in_window = 0;
    }
    if (rl->in_window >= burst) {
        rl->suppressed++;
        return 0;
    }
    rl->in_window++;
    if (suppressed)
        *suppressed = rl->suppressed;
    rl->suppressed = 0;
    return 1;
}

int rl_net_set_max_message(int64_t bytes)
{
    if (bytes < 1024)
        return rl_error_set(RL_EINVAL, "max message size %lld bytes is below 1024",
                            (long long)bytes);
    s_max_message = bytes;
    return RL_OK;
}

int64_t rl_net_max_message(void) { return s_max_message; }

static int s_decode_key(const char *txt, uint8_t out[32])
{
    if (!txt || strlen(txt) != 40 || !zmq_z85_decode(out, txt))
        return rl_error_set(RL_EINVAL, "'%.48s' is not a 40-character Z85 CurveZMQ key",
                            txt ? txt : "(null)");
    return RL_OK;
}

/* s_mu held */
static int s_set_allowed_locked(const char *const *allowed, int n)
{
    s_key *keys = calloc((size_t)(n > 0 ? n : 1), sizeof *keys);
    if (!keys)
        return rl_error_set(RL_ENOMEM, "security: out of memory");
    for (int i = 0; i < n; i++) {
        if (s_decode_key(allowed[i], keys[i].key)) {
            free(keys);
            return rl_error_wrap(RL_EINVAL, "authorized key %d", i);
        }
    }
    free(s_allowed);
    s_allowed = keys;
    s_n_allowed = n;
    return RL_OK;
}

int rl_net_set_security(const rl_net_keypair *own, const char *const *allowed, int n)
{
    uint8_t k[32];
    if (!own || s_decode_key(own->public_txt, k) || s_decode_key(own->secret_txt, k))
        return rl_error_wrap(RL_EINVAL, "security: this process's key pair");
    pthread_mutex_lock(&s_mu);
    int rc = s_set_allowed_locked(allowed, n);
    if (!rc) {
        s_own = *own;
        s_secure = 1;
    }
    pthread_mutex_unlock(&s_mu);
    return rc;
}

int rl_net_set_allowed(const char *const *allowed, int n)
{
    pthread_mutex_lock(&s_mu);
    int rc = s_set_allowed_locked(allowed, n);
    pthread_mutex_unlock(&s_mu);
    return rc;
}

int rl_net_secure(void) { return s_secure; }

void rl_net_public_key(char out[RL_NET_KEY_TXT])
{
    pthread_mutex_lock(&s_mu);
    snprintf(out, RL_NET_KEY_TXT, "%s", s_secure ? s_own.public_txt : "");
    pthread_mutex_unlock(&s_mu);
}

void rl_net_reset(void)
{
    pthread_mutex_lock(&s_mu);
    s_secure = 0;
    memset(&s_own, 0, sizeof s_own);
    free(s_allowed);
    s_allowed = NULL;
    s_n_allowed = 0;
    s_max_message = RL_NET_DEFAULT_MAX_MESSAGE;
    s_zap_log.window_start = 0; /* a fresh log budget */
    s_zap_log.in_window = 0;
    s_zap_log.suppressed = 0;
    pthread_mutex_unlock(&s_mu);
}

/* A detached thread running fn(arg); pthread_create's error number. */
static int s_start_detached(void *(*fn)(void *), void *arg)
{
    pthread_t t;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    int rc = pthread_create(&t, &attr, fn, arg);
    pthread_attr_destroy(&attr);
    return rc;
}

/* ---- ZAP ---------------------------------------------------------------------------- */

static int s_key_allowed(const uint8_t *key)
{
    pthread_mutex_lock(&s_mu);
    int ok = 0;
    for (int i = 0; i < s_n_allowed && !ok; i++)
        ok = memcmp(s_allowed[i].key, key, 32) == 0;
    pthread_mutex_unlock(&s_mu);
    return ok;
}


/* One ZAP request (RFC 27): version, request id, domain, address, identity,
 * mechanism, credentials...; answers 200 for an allowed CURVE key. */
static void s_zap_answer(void *rep)
{
    zmq_msg_t f[8];
    int n = 0, more = 1;
    while (more) {
        zmq_msg_t m;
        zmq_msg_init(&m);
        if (zmq_msg_recv(&m, rep, 0) < 0) {
            zmq_msg_close(&m);
            for (int i = 0; i < n; i++)
                zmq_msg_close(&f[i]);
            return;
        }
        more = zmq_msg_more(&m);
        if (n < 8)
            f[n++] = m;
        else
            zmq_msg_close(&m);
    }
    char address[64] = "?", mech[16] = "?";
    int ok = 0;
    if (n >= 6) {
        size_t al = zmq_msg_size(&f[3]) < sizeof address - 1 ? zmq_msg_size(&f[3]) : sizeof address - 1;
        memcpy(address, zmq_msg_data(&f[3]), al);
        address[al] = '\0';
        size_t ml = zmq_msg_size(&f[5]) < sizeof mech - 1 ? zmq_msg_size(&f[5]) : sizeof mech - 1;
        memcpy(mech, zmq_msg_data(&f[5]), ml);
        mech[ml] = '\0';
    }
    char keytxt[RL_NET_KEY_TXT] = "";
    if (n >= 7 && strcmp(mech, "CURVE") == 0 && zmq_msg_size(&f[6]) == 32) {
        zmq_z85_encode(keytxt, zmq_msg_data(&f[6]), 32);
        ok = s_key_allowed(zmq_msg_data(&f[6]));
    }
    if (!ok) {
        long dropped = 0;
        pthread_mutex_lock(&s_mu);
        int allow = rl_net_ratelimit_allow(&s_zap_log, &dropped);
        pthread_mutex_unlock(&s_mu);
        if (allow)
            rl_log_warn("refused a %s connection from %s: %s%s%s%s", mech, address,
                        keytxt[0] ? "client key " : "no client key",
                        keytxt[0] ? keytxt : "", keytxt[0] ? " is not authorized" : "",
                        dropped ? " (more refusals were not logged)" : "");
    }
    const char *status = ok ? "200" : "400";
    const char *text = ok ? "OK" : "not authorized";
    zmq_send(rep, "1.0", 3, ZMQ_SNDMORE);
    if (n >= 2)
        zmq_send(rep, zmq_msg_data(&f[1]), zmq_msg_size(&f[1]), ZMQ_SNDMORE);
    else
        zmq_send(rep, "", 0, ZMQ_SNDMORE);
    zmq_send(rep, status, 3, ZMQ_SNDMORE);
    zmq_send(rep, text, strlen(text), ZMQ_SNDMORE);
    zmq_send(rep, keytxt, strlen(keytxt), ZMQ_SNDMORE);
    zmq_send(rep, "", 0, 0);
    for (int i = 0; i < n; i++)
        zmq_msg_close(&f[i]);
}

static void *s_zap_main(void *arg)
{
    s_zap *z = arg;
    for (;;) {
        zmq_pollitem_t it = {z->rep, 0, ZMQ_POLLIN, 0};
        if (zmq_poll(&it, 1, -1) < 0) {
            if (zmq_errno() == EINTR)
                continue;
            break; /* ETERM: the context is going away */
        }
        s_zap_answer(z->rep);
    }
    pthread_mutex_lock(&s_mu);
    for (s_zap **p = &s_zaps; *p; p = &(*p)->next)
        if (*p == z) {
            *p = z->next;
            break;
        }
    pthread_mutex_unlock(&s_mu);
    zmq_close(z->rep);
    free(z);
    return NULL;
}

/* Starts the ZAP handler of ctx unless it runs. */
static int s_zap_ensure(void *ctx)
{
    pthread_mutex_lock(&s_mu);
    for (s_zap *z = s_zaps; z; z = z->next)
        if (z->ctx == ctx) {
            pthread_mutex_unlock(&s_mu);
            return RL_OK;
        }
    s_zap *z = calloc(1, sizeof *z);
    void *rep = z ? zmq_socket(ctx, ZMQ_REP) : NULL;
    int linger = 0;
    if (rep)
        zmq_setsockopt(rep, ZMQ_LINGER, &linger, sizeof linger);
    if (!rep || zmq_bind(rep, "inproc://zeromq.zap.01") != 0) {
        int e = zmq_errno();
        if (rep)
            zmq_close(rep);
        free(z);
        pthread_mutex_unlock(&s_mu);
        return rl_error_set(RL_EIO, "security: cannot start the ZAP handler: %s",
                            zmq_strerror(e));
    }
    z->ctx = ctx;
    z->rep = rep;
    int rc = s_start_detached(s_zap_main, z);
    if (rc) {
        zmq_close(rep);
        free(z);
        pthread_mutex_unlock(&s_mu);
        return rl_error_set(RL_EIO, "security: cannot start the ZAP thread: %s", strerror(rc));
    }
    z->next = s_zaps;
    s_zaps = z;
    pthread_mutex_unlock(&s_mu);
    return RL_OK;
}

/* ---- the connection monitor ---------------------------------------------------------
 * Every listening TCP socket (rl_net_bind, rl_net_curve_server) gets a
 * monitor: a thread reading the socket's events, ending with the socket
 * (ZMQ_EVENT_MONITOR_STOPPED) or with the context (ETERM).
 *
 * Handshake failures (CURVE sockets only): a plaintext peer (mechanism
 * mismatch) and a client that encrypts for the wrong server key (its HELLO
 * does not decrypt) fail the CURVE handshake before ZAP is asked, so the ZAP
 * handler never sees them. libzmq names the listening endpoint, not the
 * peer, in a handshake-failure event, so the monitor notes the peer of each
 * accepted descriptor (getpeername at ZMQ_EVENT_ACCEPTED) and logs a failure
 * when its connection is dropped (ZMQ_EVENT_DISCONNECTED follows the failure
 * of the same engine). A peer gone before the monitor asked is logged as "a
 * peer of <endpoint>".
 *
 * Frames over the limit: libzmq drops a peer that announces a frame above
 * ZMQ_MAXMSGSIZE and says nothing but DISCONNECTED, the same event as a peer
 * that hung up. So the monitor keeps a duplicate of each accepted descriptor
 * (F_DUPFD_CLOEXEC; the connection stays open until the monitor closes it,
 * microseconds after libzmq) and looks at it on DISCONNECTED: a peer that
 * hung up has sent FIN (or reset), while one libzmq dropped mid-stream still
 * has bytes waiting that libzmq stopped reading. That is logged with the
 * peer's address and the limit; libzmq does not tell the frame's size.
 *
 * Every line is rate-limited together with the ZAP refusals. */

#define S_MON_PEERS 64

typedef struct {
    int fd;   /* libzmq's descriptor, -1: free */
    int dup;  /* ours, or -1 */
    char peer[64];
} s_mon_peer;

typedef struct {
    void *pair;
    int curve; /* log handshake failures */
} s_mon_arg;

static const char *s_handshake_why(uint16_t event, uint32_t code)
{
    if (event == ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL)
        return "it closed the connection during the handshake (a plaintext peer, or a peer "
               "that does not accept this server's key)";
    switch (code) {
    case ZMQ_PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH:
        return "it does not speak CURVE (a plaintext peer)";
    case ZMQ_PROTOCOL_ERROR_ZMTP_CRYPTOGRAPHIC:
        return "its CURVE handshake does not decrypt (a client using the wrong server key)";
    case ZMQ_PROTOCOL_ERROR_ZMTP_KEY_EXCHANGE:
        return "the CURVE key exchange failed";
    default:
        return "a malformed or out-of-order handshake";
    }
}

/* 1 when a line may be logged now; *dropped: lines not logged before it. */
static int s_monitor_allow(long *dropped)
{
    pthread_mutex_lock(&s_mu);
    int allow = rl_net_ratelimit_allow(&s_zap_log, dropped);
    pthread_mutex_unlock(&s_mu);
    return allow;
}

static void s_monitor_log(const char *peer, const char *endpoint, uint16_t event, uint32_t code)
{
    long dropped = 0;
    if (s_monitor_allow(&dropped))
        rl_log_warn("refused a connection from %s%s: %s%s", peer[0] ? "" : "a peer of ",
                    peer[0] ? peer : endpoint, s_handshake_why(event, code),
                    dropped ? " (more refusals were not logged)" : "");
}

/* "host:port" of a connected socket into out ("" when unknown). */
static void s_peer_name(int fd, char *out, size_t size)
{
    struct sockaddr_storage sa;
    socklen_t len = sizeof sa;
    char host[INET6_ADDRSTRLEN] = "";
    int port = 0;
    out[0] = '\0';
    if (getpeername(fd, (struct sockaddr *)&sa, &len) != 0)
        return;
    if (sa.ss_family == AF_INET) {
        struct sockaddr_in *in = (struct sockaddr_in *)&sa;
        inet_ntop(AF_INET, &in->sin_addr, host, sizeof host);
        port = ntohs(in->sin_port);
    } else if (sa.ss_family == AF_INET6) {
        struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&sa;
        inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof host);
        port = ntohs(in6->sin6_port);
    }
    if (host[0])
        snprintf(out, size, "%s:%d", host, port);
}

/* The local port of a socket, or -1. */
static int s_local_port(int fd)
{
    struct sockaddr_storage sa;
    socklen_t len = sizeof sa;
    if (getsockname(fd, (struct sockaddr *)&sa, &len) != 0)
        return -1;
    if (sa.ss_family == AF_INET)
        return ntohs(((struct sockaddr_in *)&sa)->sin_port);
    if (sa.ss_family == AF_INET6)
        return ntohs(((struct sockaddr_in6 *)&sa)->sin6_port);
    return -1;
}

static void s_mon_forget(s_mon_peer *p)
{
    if (p->dup >= 0)
        close(p->dup);
    p->fd = p->dup = -1;
    p->peer[0] = '\0';
}

/* DISCONNECTED of a connection with no handshake failure: was it libzmq
 * that dropped a peer still sending? Then log it (see the top). */
static void s_check_dropped(const s_mon_peer *p, const char *endpoint)
{
    if (p->dup < 0)
        return;
    char c;
    ssize_t r = recv(p->dup, &c, 1, MSG_PEEK | MSG_DONTWAIT);
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        /* open, nothing pending yet: libzmq may have read all that had
         * arrived of the frame (a loaded machine); the rest, or a FIN,
         * comes within moments */
        struct pollfd pf = {.fd = p->dup, .events = POLLIN};
        if (poll(&pf, 1, 200) > 0)
            r = recv(p->dup, &c, 1, MSG_PEEK | MSG_DONTWAIT);
    }
    if (r <= 0) /* 0: the peer hung up; < 0: reset, or nothing pending */
        return;
    int unread = 0;
    ioctl(p->dup, FIONREAD, &unread);
    long dropped = 0;
    if (s_monitor_allow(&dropped))
        rl_log_warn("dropped the connection from %s%s: it sent a frame over the limit of %lld "
                    "bytes (limits.max_message_mb), refused by libzmq before it was buffered "
                    "(libzmq does not say its size; %d more bytes were on their way)%s",
                    p->peer[0] ? "" : "a peer of ", p->peer[0] ? p->peer : endpoint,
                    (long long)rl_net_max_message(), unread,
                    dropped ? " (more were not logged)" : "");
}

static void *s_monitor_main(void *arg)
{
    s_mon_arg *ma = arg;
    void *pair = ma->pair;
    int curve = ma->curve;
    free(ma);
    s_mon_peer peers[S_MON_PEERS];
    for (int i = 0; i < S_MON_PEERS; i++)
        peers[i].fd = peers[i].dup = -1;
    uint16_t failed_event = 0; /* a failure waiting for its DISCONNECTED */
    uint32_t failed_code = 0;
    char endpoint[128] = "?";
    for (;;) {
        zmq_msg_t ev, addr;
        zmq_msg_init(&ev);
        if (zmq_msg_recv(&ev, pair, 0) < 0) {
            zmq_msg_close(&ev);
            if (zmq_errno() == EINTR)
                continue;
            break; /* ETERM */
        }
        uint16_t event = 0;
        uint32_t value = 0;
        if (zmq_msg_size(&ev) >= 6) {
            memcpy(&event, zmq_msg_data(&ev), 2);
            memcpy(&value, (const char *)zmq_msg_data(&ev) + 2, 4);
        }
        if (zmq_msg_more(&ev)) {
            zmq_msg_init(&addr);
            if (zmq_msg_recv(&addr, pair, 0) >= 0) {
                size_t al = zmq_msg_size(&addr) < sizeof endpoint - 1 ? zmq_msg_size(&addr)
                                                                      : sizeof endpoint - 1;
                memcpy(endpoint, zmq_msg_data(&addr), al);
                endpoint[al] = '\0';
            }
            zmq_msg_close(&addr);
        }
        zmq_msg_close(&ev);
        if (event == ZMQ_EVENT_MONITOR_STOPPED)
            break;
        if (event == ZMQ_EVENT_ACCEPTED) {
            int fd = (int)value, slot = -1;
            for (int i = 0; i < S_MON_PEERS && slot < 0; i++)
                if (peers[i].fd == fd || peers[i].fd < 0)
                    slot = i;
            if (slot < 0)
                slot = fd % S_MON_PEERS; /* a full table forgets one peer */
            s_mon_forget(&peers[slot]);
            peers[slot].fd = fd;
            s_peer_name(fd, peers[slot].peer, sizeof peers[slot].peer);
            /* ours only if fd still is a connection of this listener (it
             * may have closed and been reused before this event came) */
            const char *colon = strrchr(endpoint, ':');
            int port = colon ? atoi(colon + 1) : -1;
            int dup = fcntl(fd, F_DUPFD_CLOEXEC, 0);
            if (dup >= 0 && (port <= 0 || s_local_port(dup) != port)) {
                close(dup);
                dup = -1;
            }
            peers[slot].dup = dup;
        } else if (event == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL ||
                   event == ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL) {
            if (failed_event && curve) /* two in a row: log the first without its peer */
                s_monitor_log("", endpoint, failed_event, failed_code);
            failed_event = event;
            failed_code = value;
        } else if (event == ZMQ_EVENT_DISCONNECTED) {
            int fd = (int)value, slot = -1;
            for (int i = 0; i < S_MON_PEERS && slot < 0; i++)
                if (peers[i].fd == fd)
                    slot = i;
            if (failed_event && curve)
                s_monitor_log(slot >= 0 ? peers[slot].peer : "", endpoint, failed_event,
                              failed_code);
            else if (!failed_event && slot >= 0)
                s_check_dropped(&peers[slot], endpoint);
            if (slot >= 0)
                s_mon_forget(&peers[slot]);
            failed_event = 0;
        }
    }
    if (failed_event && curve)
        s_monitor_log("", endpoint, failed_event, failed_code);
    for (int i = 0; i < S_MON_PEERS; i++)
        s_mon_forget(&peers[i]);
    zmq_close(pair);
    return NULL;
}

/* Starts the monitor of `sock` (a listening socket of ctx); curve: log
 * handshake failures too. */
static int s_monitor_start(void *ctx, void *sock, int curve)
{
    static long s_serial;
    char ep[96];
    pthread_mutex_lock(&s_mu);
    long serial = ++s_serial;
    pthread_mutex_unlock(&s_mu);
    snprintf(ep, sizeof ep, "inproc://rlrt-connection-monitor-%ld", serial);
    if (zmq_socket_monitor(sock, ep,
                           ZMQ_EVENT_ACCEPTED | ZMQ_EVENT_DISCONNECTED |
                               ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |
                               ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL |
                               ZMQ_EVENT_MONITOR_STOPPED) != 0)
        return rl_error_set(RL_EIO, "cannot monitor a listening socket: %s",
                            zmq_strerror(zmq_errno()));
    void *pair = zmq_socket(ctx, ZMQ_PAIR);
    s_mon_arg *ma = calloc(1, sizeof *ma);
    int linger = 0;
    if (pair)
        zmq_setsockopt(pair, ZMQ_LINGER, &linger, sizeof linger);
    if (!pair || !ma || zmq_connect(pair, ep) != 0) {
        int e = zmq_errno();
        if (pair)
            zmq_close(pair);
        free(ma);
        zmq_socket_monitor(sock, NULL, 0);
        return rl_error_set(RL_EIO, "cannot monitor a listening socket: %s", zmq_strerror(e));
    }
    ma->pair = pair;
    ma->curve = curve;
    int rc = s_start_detached(s_monitor_main, ma);
    if (rc) {
        zmq_socket_monitor(sock, NULL, 0);
        zmq_close(pair);
        free(ma);
        return rl_error_set(RL_EIO, "cannot start the connection monitor: %s", strerror(rc));
    }
    return RL_OK;
}

/* ---- sockets -------------------------------------------------------------------------- */

void rl_net_limits(void *sock)
{
    int64_t max = rl_net_max_message();
    zmq_setsockopt(sock, ZMQ_MAXMSGSIZE, &max, sizeof max);
}

int rl_net_curve_server(void *ctx, void *sock)
{
    if (!rl_net_secure())
        return s_monitor_start(ctx, sock, 0); /* frames over the limit */
    int rc = s_zap_ensure(ctx);
    if (rc)
        return rc;
    rl_net_keypair own;
    pthread_mutex_lock(&s_mu);
    own = s_own;
    pthread_mutex_unlock(&s_mu);
    int one = 1;
    if (zmq_setsockopt(sock, ZMQ_CURVE_SERVER, &one, sizeof one) ||
        zmq_setsockopt(sock, ZMQ_CURVE_SECRETKEY, own.secret_txt, 40) ||
        zmq_setsockopt(sock, ZMQ_ZAP_DOMAIN, "rlrt", 4))
        return rl_error_set(RL_EIO, "security: CURVE server options: %s",
                            zmq_strerror(zmq_errno()));
    return s_monitor_start(ctx, sock, 1);
}

int rl_net_curve_client(void *sock, const char *server_key)
{
    uint8_t k[32];
    if (s_decode_key(server_key, k))
        return rl_error_wrap(RL_EINVAL, "security: the server key");
    rl_net_keypair own;
    pthread_mutex_lock(&s_mu);
    int secure = s_secure;
    own = s_own;
    pthread_mutex_unlock(&s_mu);
    if (!secure)
        return rl_error_set(RL_EINVAL, "security: a CURVE endpoint, but this process has no key "
                            "pair (give the worker its certificate)");
    if (zmq_setsockopt(sock, ZMQ_CURVE_SERVERKEY, server_key, 40) ||
        zmq_setsockopt(sock, ZMQ_CURVE_PUBLICKEY, own.public_txt, 40) ||
        zmq_setsockopt(sock, ZMQ_CURVE_SECRETKEY, own.secret_txt, 40))
        return rl_error_set(RL_EIO, "security: CURVE client options: %s",
                            zmq_strerror(zmq_errno()));
    return RL_OK;
}

void rl_net_endpoint_plain(const char *endpoint, char *out, size_t size)
{
    const char *bar = strchr(endpoint, '|');
    size_t n = bar ? (size_t)(bar - endpoint) : strlen(endpoint);
    snprintf(out, size, "%.*s", (int)n, endpoint);
}

int rl_net_bind(void *ctx, void *sock, const char *endpoint, char *out, size_t out_size)
{
    rl_net_limits(sock);
    int tcp = strncmp(endpoint, "tcp://", 6) == 0;
    int rc = tcp ? rl_net_curve_server(ctx, sock) : RL_OK;
    if (rc)
        return rc;
    if (zmq_bind(sock, endpoint) != 0)
        return rl_error_set(RL_EIO, "cannot bind %s: %s", endpoint, zmq_strerror(zmq_errno()));
    char last[RL_NET_ENDPOINT_MAX];
    size_t len = sizeof last;
    if (zmq_getsockopt(sock, ZMQ_LAST_ENDPOINT, last, &len) != 0)
        snprintf(last, sizeof last, "%s", endpoint);
    char key[RL_NET_KEY_TXT];
    rl_net_public_key(key);
    if ((size_t)snprintf(out, out_size, "%s%s%s", last, tcp && key[0] ? "|" : "",
                         tcp ? key : "") >= out_size)
        return rl_error_set(RL_EINVAL, "endpoint '%s' is too long", last);
    return RL_OK;
}

int rl_net_connect(void *sock, const char *endpoint)
{
    rl_net_limits(sock);
    char plain[RL_NET_ENDPOINT_MAX];
    if (strlen(endpoint) >= sizeof plain)
        return rl_error_set(RL_EINVAL, "endpoint '%.60s...' is too long", endpoint);
    rl_net_endpoint_plain(endpoint, plain, sizeof plain);
    const char *bar = strchr(endpoint, '|');
    int tcp = strncmp(plain, "tcp://", 6) == 0;
    if (bar) {
        int rc = rl_net_curve_client(sock, bar + 1);
        if (rc)
            return rl_error_wrap(rc, "connecting to %s", plain);
    } else if (tcp && rl_net_secure()) {
        return rl_error_set(RL_EINVAL, "security is on but %s carries no server key: refusing a "
                            "plaintext connection", plain);
    }
    if (zmq_connect(sock, plain) != 0)
        return rl_error_set(RL_EINVAL, "cannot connect to %s: %s", plain,
                            zmq_strerror(zmq_errno()));
    return RL_OK;
}

/* ---- key files -------------------------------------------------------------------------- */

int rl_net_keygen(const char *dir, const char *name, rl_net_keypair *out)
{
    if (!dir || !name || !*name || strchr(name, '/'))
        return rl_error_set(RL_EINVAL, "keygen: a folder and a plain NAME are needed");
    if (mkdir(dir, 0700) != 0 && errno != EEXIST)
        return rl_error_set(RL_EIO, "keygen: cannot make %s: %s", dir, strerror(errno));
    char path[4096];
    if ((size_t)snprintf(path, sizeof path, "%s/%s.cert", dir, name) >= sizeof path)
        return rl_error_set(RL_EINVAL, "keygen: path too long");
    zcert_t *cert = zcert_new();
    if (!cert)
        return rl_error_set(RL_EIO, "keygen: cannot make a key pair (libsodium)");
    zcert_set_meta(cert, "name", "%s", name);
    zcert_set_meta(cert, "made-by", "rl-driver keygen");
    mode_t old = umask(0077); /* the secret file must not be readable by others */
    int rc = zcert_save(cert, path);
    umask(old);
    if (rc != 0) {
        zcert_destroy(&cert);
        return rl_error_set(RL_EIO, "keygen: cannot write %s and %s_secret", path, path);
    }
    chmod(path, 0644);
    if (out) {
        snprintf(out->public_txt, sizeof out->public_txt, "%s", zcert_public_txt(cert));
        snprintf(out->secret_txt, sizeof out->secret_txt, "%s", zcert_secret_txt(cert));
    }
    zcert_destroy(&cert);
    return RL_OK;
}

int rl_net_load_cert(const char *path, int need_secret, rl_net_keypair *out)
{
    char pub[4096];
    /* zcert_load(X) reads X and X_secret: accept either file name */
    size_t n = strlen(path);
    if (n >= sizeof pub)
        return rl_error_set(RL_EINVAL, "certificate path too long");
    snprintf(pub, sizeof pub, "%s", path);
    if (n > 7 && strcmp(pub + n - 7, "_secret") == 0)
        pub[n - 7] = '\0';
    zsys_set_logstream(NULL);
    zcert_t *cert = zcert_load(pub);
    if (!cert)
        return rl_error_set(RL_ECONFIG, "cannot read the certificate %s (a zcert file: `rl-driver "
                            "keygen DIR NAME` writes one)", path);
    snprintf(out->public_txt, sizeof out->public_txt, "%s", zcert_public_txt(cert));
    snprintf(out->secret_txt, sizeof out->secret_txt, "%s", zcert_secret_txt(cert));
    zcert_destroy(&cert);
    uint8_t k[32];
    int has_secret = strcmp(out->secret_txt, "0000000000000000000000000000000000000000") != 0 &&
                     !s_decode_key(out->secret_txt, k);
    if (s_decode_key(out->public_txt, k))
        return rl_error_set(RL_ECONFIG, "%s: no valid public key", path);
    if (need_secret && !has_secret)
        return rl_error_set(RL_ECONFIG, "%s: no secret key (%s_secret is missing or unreadable)",
                            path, pub);
    if (!has_secret)
        out->secret_txt[0] = '\0';
    return RL_OK;
}

void rl_net_free_keys(char **keys, int n)
{
    for (int i = 0; keys && i < n; i++)
        free(keys[i]);
    free(keys);
}

int rl_net_load_authorized(const char *dir, char ***keys_out, int *n_out)
{
    *keys_out = NULL;
    *n_out = 0;
    DIR *dp = opendir(dir);
    if (!dp)
        return rl_error_set(RL_ECONFIG, "cannot read the authorized keys folder %s: %s", dir,
                            strerror(errno));
    char **keys = NULL;
    int n = 0, cap = 0, rc = RL_OK;
    struct dirent *e;
    while ((e = readdir(dp))) {
        size_t len = strlen(e->d_name);
        if (len < 6 || strcmp(e->d_name + len - 5, ".cert") != 0)
            continue;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        rl_net_keypair kp;
        if ((rc = rl_net_load_cert(path, 0, &kp)))
            break;
        if (n == cap) {
            char **k2 = realloc(keys, sizeof *keys * (size_t)(cap = cap ? cap * 2 : 8));
            if (!k2) {
                rc = rl_error_set(RL_ENOMEM, "authorized keys: out of memory");
                break;
            }
            keys = k2;
        }
        if (!(keys[n] = strdup(kp.public_txt))) {
            rc = rl_error_set(RL_ENOMEM, "authorized keys: out of memory");
            break;
        }
        n++;
    }
    closedir(dp);
    if (!rc && n == 0)
        rc = rl_error_set(RL_ECONFIG, "the authorized keys folder %s holds no *.cert file", dir);
    if (rc) {
        rl_net_free_keys(keys, n);
        return rc;
    }
    *keys_out = keys;
    *n_out = n;
    return RL_OK;
}

int rl_net_more(void *sock)
{
    int more = 0;
    size_t len = sizeof more;
    return zmq_getsockopt(sock, ZMQ_RCVMORE, &more, &len) == 0 && more;
}

int rl_net_drain(void *sock)
{
    int dropped = 0;
    while (rl_net_more(sock)) {
        zmq_msg_t m;
        zmq_msg_init(&m);
        int rc = zmq_msg_recv(&m, sock, ZMQ_DONTWAIT);
        zmq_msg_close(&m);
        if (rc < 0 && zmq_errno() != EINTR)
            return dropped + 1;
        dropped += rc >= 0;
    }
    return dropped;
}

/* ---- waits and owned sockets of the channels --------------------------------------------------- */

int64_t rl_net_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int rl_net_wait(void *sock, short events, int64_t deadline_ms, uint64_t base, const char *what)
{
    for (;;) {
        int rc = rl_abort_check(base, what);
        if (rc)
            return rc;
        int64_t left = deadline_ms < 0 ? RL_ABORT_POLL_MS : deadline_ms - rl_net_now_ms();
        zmq_pollitem_t it = {sock, 0, events, 0};
        int n = zmq_poll(&it, 1, left <= 0 ? 0 : left < RL_ABORT_POLL_MS ? (long)left : RL_ABORT_POLL_MS);
        if (n > 0)
            return RL_OK;
        if (n < 0 && zmq_errno() != EINTR)
            return rl_error_set(RL_EIO, "zmq_poll: %s", zmq_strerror(zmq_errno()));
        if (deadline_ms >= 0 && rl_net_now_ms() >= deadline_ms)
            return RL_ETIMEOUT;
    }
}

int rl_net_own_socket(void **ctx, void **sock, int type, const char *who)
{
    *ctx = zmq_ctx_new();
    *sock = *ctx ? zmq_socket(*ctx, type) : NULL;
    if (!*sock)
        return rl_error_set(RL_EIO, "%s: cannot create a socket: %s", who, zmq_strerror(zmq_errno()));
    int linger = 0;
    zmq_setsockopt(*sock, ZMQ_LINGER, &linger, sizeof linger);
    return RL_OK;
}

void rl_net_own_close(void *ctx, void *sock)
{
    if (sock)
        zmq_close(sock);
    if (ctx)
        zmq_ctx_term(ctx);
}
