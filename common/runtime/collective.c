/* collective.c — ring collectives over ZeroMQ PUSH/PULL (see
 * rlrt/runtime/collective.h). */
#include "rlrt/runtime/collective.h"

#include "common/core/util.h"
#include "rlrt/error.h"
#include "common/runtime/abort.h"
#include "common/runtime/collective_shm.h"
#include "common/runtime/collective_nccl.h"
#include "common/runtime/net.h"

#include <arpa/inet.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#define S_EP_MAX 220 /* longest endpoint text (with "|KEY" when secured) */

struct rl_comm {
    void *ctx;
    void *ctl_ctx; /* rank 0: the context of a rendezvous socket bound by
                      rl_comm_id_create (NULL: ctl lives in ctx) */
    void *push; /* to the right neighbour (rank + 1) */
    void *pull; /* from the left neighbour (rank - 1) */
    void *ctl;  /* rendezvous: ROUTER on rank 0, DEALER elsewhere */
    int rank, world;
    int broken;
    int timeout_ms;
    int64_t seg; /* floats per segment */
    uint64_t abort_base; /* the running operation's (common/runtime/abort.h) */
    uint64_t aborts0;    /* rl_abort_count() when made (rl_comm_aborted) */
    /* Segments sent zero-copy (zmq_msg_init_data on the caller's buffer)
     * that ZeroMQ still holds: every operation waits for 0 before it
     * returns, so the buffers are the caller's again (s_wait_refs). ZeroMQ's
     * I/O thread drops them (s_ref_free) under refs_mu and signals refs_cv
     * at 0. */
    int refs;
    /* Pipelined broadcasts (rl_comm_broadcast_start): `started` and
     * `finished` count them; the unfinished one number i holds its
     * zero-copy segments in slot[i % RL_COMM_MAX_INFLIGHT]; slot[MAX] is
     * the blocking operations'. `cur`: the slot s_send_ref charges. */
    uint64_t started, finished;
    struct s_slot {
        struct rl_comm *c;
        int refs;
    } slot[RL_COMM_MAX_INFLIGHT + 1];
    int cur;
    int starting; /* inside rl_comm_broadcast_start (s_check waits for none) */
    pthread_mutex_t refs_mu;
    pthread_cond_t refs_cv;
    int refs_sync; /* refs_mu and refs_cv were made */
    char my_ep[S_EP_MAX + 32];
    char right_ep[S_EP_MAX + 32];
    char ctl_ep[S_EP_MAX + 32]; /* rank 0: the rendezvous endpoint it bound */
    rl_comm_shm *shm;           /* every rank on one host: all-reduce's path */
    rl_nccl *nccl;              /* options.nccl: device buffers over NCCL */
};

void rl_shard_range(int64_t total, int world, int rank, int64_t *begin, int64_t *end)
{
    if (total < 0 || world < 1 || rank < 0 || rank >= world) {
        *begin = *end = 0;
        return;
    }
    /* unsigned: per * rank + per <= total + 2 * world cannot wrap */
    uint64_t t = (uint64_t)total, per = t / (uint64_t)world + (t % (uint64_t)world != 0);
    uint64_t b = per * (uint64_t)rank, e = b + per;
    *begin = (int64_t)(b < t ? b : t);
    *end = (int64_t)(e < t ? e : t);
}

void rl_comm_options_default(rl_comm_options *o)
{
    o->timeout_s = 120.0;
    o->segment_bytes = 1 << 20;
    o->listen_host = NULL;
    o->io_threads = 1;
    o->shared_memory = 1;
    o->nccl = 0;
}

/* ---- ids -------------------------------------------------------------------------- */

/* Splits "tcp://HOST[:PORT]" into host and port ("" if none). */
static int s_split_tcp(const char *ep, char *host, size_t hsize, char *port, size_t psize)
{
    if (strncmp(ep, "tcp://", 6) != 0)
        return -1;
    const char *h = ep + 6;
    const char *colon = strrchr(h, ':');
    size_t hl = colon ? (size_t)(colon - h) : strlen(h);
    if (hl == 0 || hl >= hsize)
        return -1;
    memcpy(host, h, hl);
    host[hl] = '\0';
    snprintf(port, psize, "%s", colon ? colon + 1 : "");
    return 0;
}

/* Rendezvous sockets bound by rl_comm_id_create on a wildcard port and
 * adopted by rank 0's rl_comm_init_rank in the same process (picking a free
 * port, closing it and binding it later races with every other process of
 * the host). Kept for the newest S_PREBOUND_MAX ids. */
#define S_PREBOUND_MAX 16
typedef struct {
    char nonce[17];
    pid_t pid; /* a forked child cannot use its parent's sockets */
    void *ctx, *sock;
} s_prebound;
static s_prebound s_pre[S_PREBOUND_MAX];
static int s_pre_next;
static pthread_mutex_t s_pre_mu = PTHREAD_MUTEX_INITIALIZER;

static void s_prebound_close(s_prebound *p)
{
    if (p->sock)
        zmq_close(p->sock);
    if (p->ctx)
        zmq_ctx_term(p->ctx);
    memset(p, 0, sizeof *p);
}

/* Binds a ROUTER on tcp://HOST:* now; `ep` gets the endpoint to advertise. */
static int s_prebind(const char *host, const char *nonce, char *ep, size_t size)
{
    void *ctx = zmq_ctx_new();
    void *sock = ctx ? zmq_socket(ctx, ZMQ_ROUTER) : NULL;
    char bind[S_EP_MAX + 8];
    snprintf(bind, sizeof bind, "tcp://%s:*", host);
    int rc = sock ? rl_net_bind(ctx, sock, bind, ep, size)
                  : rl_error_set(RL_EIO, "comm id: cannot create a socket");
    if (!rc && strlen(ep) > S_EP_MAX)
        rc = rl_error_set(RL_EINVAL, "comm id: endpoint too long: '%s'", ep);
    if (rc) {
        if (sock)
            zmq_close(sock);
        if (ctx)
            zmq_ctx_term(ctx);
        return rl_error_wrap(rc, "comm id on '%s'", host);
    }
    pthread_mutex_lock(&s_pre_mu);
    s_prebound *p = &s_pre[s_pre_next];
    s_pre_next = (s_pre_next + 1) % S_PREBOUND_MAX;
    s_prebound_close(p); /* the oldest id's socket, never adopted */
    snprintf(p->nonce, sizeof p->nonce, "%s", nonce);
    p->pid = getpid();
    p->ctx = ctx;
    p->sock = sock;
    pthread_mutex_unlock(&s_pre_mu);
    return RL_OK;
}

/* Takes the socket bound for `nonce` (0 when there is none). */
static int s_prebound_take(const char *nonce, void **ctx, void **sock)
{
    int found = 0;
    pthread_mutex_lock(&s_pre_mu);
    for (int i = 0; i < S_PREBOUND_MAX && !found; i++) {
        if (s_pre[i].sock && s_pre[i].pid == getpid() && strcmp(s_pre[i].nonce, nonce) == 0) {
            *ctx = s_pre[i].ctx;
            *sock = s_pre[i].sock;
            memset(&s_pre[i], 0, sizeof s_pre[i]);
            found = 1;
        }
    }
    pthread_mutex_unlock(&s_pre_mu);
    return found;
}

int rl_comm_id_create(rl_comm_id *id, const char *endpoint)
{
    uint64_t nonce = 0;
    if (getrandom(&nonce, sizeof nonce, 0) != (ssize_t)sizeof nonce)
        nonce = ((uint64_t)getpid() << 32) ^ (uint64_t)(uintptr_t)id;
    char ep[S_EP_MAX + 1];
    if (!endpoint) {
        snprintf(ep, sizeof ep, "ipc:///tmp/rlrt-comm-%d-%016llx", (int)getpid(),
                 (unsigned long long)nonce);
    } else if (strncmp(endpoint, "ipc://", 6) == 0) {
        if (strlen(endpoint) > S_EP_MAX)
            return rl_error_set(RL_EINVAL, "comm id: endpoint too long: '%s'", endpoint);
        snprintf(ep, sizeof ep, "%s", endpoint);
    } else {
        char host[160], port[32];
        if (strlen(endpoint) > S_EP_MAX ||
            s_split_tcp(endpoint, host, sizeof host, port, sizeof port))
            return rl_error_set(RL_EINVAL,
                                "comm id: endpoint '%s' is not tcp://HOST[:PORT] or ipc://PATH",
                                endpoint);
        char nonce_txt[17];
        snprintf(nonce_txt, sizeof nonce_txt, "%016llx", (unsigned long long)nonce);
        if (port[0] == '\0') {
            /* bound now on a port the kernel picks; rank 0 adopts it */
            char bound[RL_NET_ENDPOINT_MAX];
            int rc = s_prebind(host, nonce_txt, bound, sizeof bound);
            if (rc)
                return rc;
            snprintf(ep, sizeof ep, "%s", bound);
        } else {
            char key[RL_NET_KEY_TXT];
            rl_net_public_key(key);
            if (snprintf(ep, sizeof ep, "%s%s%s", endpoint, key[0] ? "|" : "", key) >= (int)sizeof ep)
                return rl_error_set(RL_EINVAL, "comm id: endpoint too long: '%s'", endpoint);
        }
    }
    snprintf(id->bytes, sizeof id->bytes, "rlcomm1 %016llx %s", (unsigned long long)nonce, ep);
    return RL_OK;
}

const char *rl_comm_id_string(const rl_comm_id *id) { return id->bytes; }

/* Splits an id into nonce and endpoint. */
static int s_id_fields(const char *text, char *nonce, char *ep)
{
    char magic[16];
    if (sscanf(text, "%15s %16s %220s", magic, nonce, ep) != 3 ||
        strcmp(magic, "rlcomm1") != 0 || strlen(nonce) != 16 ||
        (strncmp(ep, "tcp://", 6) != 0 && strncmp(ep, "ipc://", 6) != 0))
        return rl_error_set(RL_EINVAL, "comm id: malformed '%.80s'", text);
    return RL_OK;
}

int rl_comm_id_parse(rl_comm_id *id, const char *text)
{
    char nonce[17], ep[S_EP_MAX + 1];
    if (strlen(text) >= sizeof id->bytes)
        return rl_error_set(RL_EINVAL, "comm id: too long");
    int rc = s_id_fields(text, nonce, ep);
    if (rc)
        return rc;
    snprintf(id->bytes, sizeof id->bytes, "%s", text);
    return RL_OK;
}

/* ---- setup ----------------------------------------------------------------------------- */

/* The local IPv4 address the kernel would use to reach `host`. */
static void s_route_addr(const char *host, char *out, size_t size)
{
    snprintf(out, size, "127.0.0.1");
    struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_DGRAM}, *ai;
    if (getaddrinfo(host, "9", &hints, &ai) != 0)
        return;
    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    if (fd >= 0 && connect(fd, ai->ai_addr, ai->ai_addrlen) == 0) {
        struct sockaddr_in sa;
        socklen_t len = sizeof sa;
        if (getsockname(fd, (struct sockaddr *)&sa, &len) == 0)
            inet_ntop(AF_INET, &sa.sin_addr, out, (socklen_t)size);
    }
    if (fd >= 0)
        close(fd);
    freeaddrinfo(ai);
}

static void s_setopt_int(void *sock, int opt, int v) { zmq_setsockopt(sock, opt, &v, sizeof v); }

static rl_comm *s_fail_init(rl_comm *c, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static rl_comm *s_fail_init(rl_comm *c, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    rl_error_setv(code, fmt, ap);
    va_end(ap);
    c->broken = 1;
    /* keep the message: destroy() may not touch it */
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", rl_error_message());
    rl_comm_destroy(c);
    rl_error_set(code, "%s", msg);
    return NULL;
}

static double s_seconds_since(const struct timespec *t0)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)(now.tv_sec - t0->tv_sec) + 1e-9 * (double)(now.tv_nsec - t0->tv_nsec);
}

static int64_t s_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Waits until `sock` has `events` (ZMQ_POLLIN or ZMQ_POLLOUT) or the
 * monotonic clock reaches deadline_ms, looking for an abort of the running
 * operation (abort.h) every RL_ABORT_POLL_MS. RL_OK; RL_ETIMEOUT (no
 * message); RL_EPEER (aborted) or RL_EIO with the message set. Does not
 * break the communicator. */
static int s_poll(rl_comm *c, void *sock, short events, int64_t deadline_ms, const char *op)
{
    for (;;) {
        if (rl_abort_pending(c->abort_base)) {
            char what[96];
            snprintf(what, sizeof what, "%s: rank %d", op, c->rank);
            return rl_abort_check(c->abort_base, what);
        }
        int64_t left = deadline_ms - s_now_ms();
        if (left <= 0)
            return RL_ETIMEOUT;
        zmq_pollitem_t it = {.socket = sock, .events = events};
        int n = zmq_poll(&it, 1, left < RL_ABORT_POLL_MS ? (long)left : RL_ABORT_POLL_MS);
        if (n > 0)
            return RL_OK;
        if (n < 0 && zmq_errno() != EINTR)
            return rl_error_set(RL_EIO, "%s: rank %d: zmq_poll: %s", op, c->rank,
                                zmq_strerror(zmq_errno()));
    }
}

/* Rank 0: collect every rank's HELLO, answer each with its right neighbour.
 * Anyone can connect to the rendezvous endpoint: a message that is not
 * exactly [identity, HELLO with our nonce] is read whole and ignored, and
 * ignored messages do not extend the wait (the timeout runs from the last
 * rank that joined). */
static rl_comm *s_rendezvous_root(rl_comm *c, const char *nonce, const char *id_ep)
{
    int W = c->world;
    char plain[S_EP_MAX + 32], bound[RL_NET_ENDPOINT_MAX];
    rl_net_endpoint_plain(id_ep, plain, sizeof plain);
    if (!s_prebound_take(nonce, &c->ctl_ctx, &c->ctl)) {
        c->ctl = zmq_socket(c->ctx, ZMQ_ROUTER);
        if (!c->ctl || rl_net_bind(c->ctx, c->ctl, plain, bound, sizeof bound)) {
            char msg[512];
            snprintf(msg, sizeof msg, "%s", c->ctl ? rl_error_message() : "no socket");
            return s_fail_init(c, RL_EIO, "comm rank 0: %s (an id made from tcp://HOST holds its "
                               "port in the process that made it: rank 0 must be that process)",
                               msg);
        }
    }
    s_setopt_int(c->ctl, ZMQ_RCVTIMEO, c->timeout_ms);
    s_setopt_int(c->ctl, ZMQ_LINGER, c->timeout_ms);
    snprintf(c->ctl_ep, sizeof c->ctl_ep, "%s", plain);
    char (*eps)[S_EP_MAX + 32] = calloc((size_t)W, sizeof *eps);
    unsigned char (*ids)[256] = calloc((size_t)W, sizeof *ids);
    size_t *id_len = calloc((size_t)W, sizeof *id_len);
    if (!eps || !ids || !id_len) {
        free(eps), free(ids), free(id_len);
        return s_fail_init(c, RL_ENOMEM, "comm: out of memory");
    }
    snprintf(eps[0], sizeof eps[0], "%s", c->my_ep);
    int joined = 1;
    struct timespec since;
    clock_gettime(CLOCK_MONOTONIC, &since);
    while (joined < W) {
        unsigned char ident[256];
        char msg[512];
        if (rl_abort_pending(c->abort_base)) {
            free(eps), free(ids), free(id_len);
            rl_abort_check(c->abort_base, "comm rank 0: rendezvous");
            snprintf(msg, sizeof msg, "%s", rl_error_message());
            return s_fail_init(c, RL_EPEER, "%s (%d of %d ranks had joined)", msg, joined, W);
        }
        double left_ms = c->timeout_ms - 1000.0 * s_seconds_since(&since);
        zmq_pollitem_t item = {.socket = c->ctl, .events = ZMQ_POLLIN};
        long slice = left_ms > RL_ABORT_POLL_MS ? RL_ABORT_POLL_MS : (long)left_ms + 1;
        int ready = left_ms > 0 ? zmq_poll(&item, 1, slice) : 0;
        if (ready < 0 && zmq_errno() == EINTR)
            continue;
        if (ready < 0) {
            int e = zmq_errno();
            free(eps), free(ids), free(id_len);
            return s_fail_init(c, RL_EIO, "comm rank 0: rendezvous: %s", zmq_strerror(e));
        }
        if (ready == 0) {
            if (left_ms > 0)
                continue; /* woke early: wait out the rest */
            free(eps), free(ids), free(id_len);
            return s_fail_init(c, RL_ETIMEOUT,
                               "comm rank 0: only %d of %d ranks joined within %.3g s", joined, W,
                               c->timeout_ms / 1000.0);
        }
        int il = zmq_recv(c->ctl, ident, sizeof ident, ZMQ_DONTWAIT);
        if (il < 0)
            continue; /* EAGAIN or EINTR: nothing was read */
        /* identity, then one body frame; anything else is a stranger's */
        int ml = rl_net_more(c->ctl) ? zmq_recv(c->ctl, msg, sizeof msg - 1, ZMQ_DONTWAIT) : -1;
        int extra = rl_net_drain(c->ctl);
        if (ml < 0 || extra > 0 || il > (int)sizeof ident || ml > (int)sizeof msg - 1)
            continue;
        msg[ml] = '\0';
        char n[32], ep[S_EP_MAX + 32];
        int w, r;
        if (sscanf(msg, "HELLO %31s %d %d %250s", n, &w, &r, ep) != 4 || strcmp(n, nonce) != 0)
            continue; /* a stranger or a stale rank of an older communicator */
        if (w != W || r <= 0 || r >= W || eps[r][0]) {
            free(eps), free(ids), free(id_len);
            return s_fail_init(c, RL_EINVAL,
                               "comm rank 0: a rank joined as rank %d of %d; expected a new "
                               "rank in 1..%d of %d",
                               r, w, W - 1, W);
        }
        snprintf(eps[r], sizeof eps[r], "%s", ep);
        memcpy(ids[r], ident, (size_t)il);
        id_len[r] = (size_t)il;
        joined++;
        clock_gettime(CLOCK_MONOTONIC, &since);
    }
    for (int r = 1; r < W; r++) {
        char reply[S_EP_MAX + 64];
        int len = snprintf(reply, sizeof reply, "PEER %s", eps[(r + 1) % W]);
        zmq_send(c->ctl, ids[r], id_len[r], ZMQ_SNDMORE);
        zmq_send(c->ctl, reply, (size_t)len, 0);
    }
    snprintf(c->right_ep, sizeof c->right_ep, "%s", eps[1]);
    free(eps), free(ids), free(id_len);
    return c;
}

static rl_comm *s_rendezvous_peer(rl_comm *c, const char *nonce, const char *id_ep)
{
    c->ctl = zmq_socket(c->ctx, ZMQ_DEALER);
    s_setopt_int(c->ctl, ZMQ_LINGER, c->timeout_ms);
    if (rl_net_connect(c->ctl, id_ep)) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s", rl_error_message());
        return s_fail_init(c, RL_EIO, "comm rank %d: %s", c->rank, msg);
    }
    char msg[512];
    int len = snprintf(msg, sizeof msg, "HELLO %s %d %d %s", nonce, c->world, c->rank, c->my_ep);
    zmq_send(c->ctl, msg, (size_t)len, 0);
    int got = -1, prc = s_poll(c, c->ctl, ZMQ_POLLIN, s_now_ms() + c->timeout_ms, "comm setup");
    if (prc == RL_OK)
        got = zmq_recv(c->ctl, msg, sizeof msg - 1, ZMQ_DONTWAIT);
    if (prc && prc != RL_ETIMEOUT) {
        snprintf(msg, sizeof msg, "%s", rl_error_message());
        return s_fail_init(c, prc, "%s", msg);
    }
    if (got < 0)
        return s_fail_init(c, RL_ETIMEOUT,
                           "comm rank %d: rank 0 at %s did not answer within %.3g s", c->rank,
                           id_ep, c->timeout_ms / 1000.0);
    msg[got < (int)sizeof msg - 1 ? got : (int)sizeof msg - 1] = '\0';
    if (strncmp(msg, "PEER ", 5) != 0 || strlen(msg + 5) >= sizeof c->right_ep)
        return s_fail_init(c, RL_EPROTO, "comm rank %d: bad rendezvous reply", c->rank);
    snprintf(c->right_ep, sizeof c->right_ep, "%s", msg + 5);
    return c;
}

static int s_send_copy(rl_comm *c, const void *p, size_t bytes, const char *op);
static int s_recv(rl_comm *c, zmq_msg_t *m, size_t bytes, const char *op);

/* One lap of the ring carrying a byte: rank 0 sends *flag and gets back
 * what went round; another rank takes it, applies `step` (NULL: none) and
 * passes it on. */
static int s_flag_lap(rl_comm *c, uint8_t *flag, int (*step)(rl_comm *, uint8_t *, void *),
                      void *arg, const char *op)
{
    zmq_msg_t m;
    int rc;
    if (c->rank == 0 && (rc = s_send_copy(c, flag, 1, op)))
        return rc;
    if ((rc = s_recv(c, &m, 1, op)))
        return rc;
    memcpy(flag, zmq_msg_data(&m), 1);
    zmq_msg_close(&m);
    if (c->rank != 0 && step)
        step(c, flag, arg);
    return c->rank == 0 ? RL_OK : s_send_copy(c, flag, 1, op);
}

typedef struct s_shm_args {
    const char *nonce;
    int64_t slot;
} s_shm_args;

static int s_shm_map(rl_comm *c, uint8_t *flag, void *arg)
{
    const s_shm_args *a = arg;
    if (*flag)
        c->shm = rl_comm_shm_open(a->nonce, c->world, c->rank, a->slot, 0);
    *flag = *flag && c->shm;
    return RL_OK;
}

/* Shared memory for all-reduce when every rank maps rank 0's segment
 * (one host): a lap ANDs whether each could, a second tells everyone; then
 * rank 0 removes the name (the mappings stay). A rank that cannot map it
 * is no error: the ring carries the operations then. Slots of four
 * segments, at most 256 MiB in all. */
static int s_shm_agree(rl_comm *c, const char *nonce, const rl_comm_options *o)
{
    (void)o;
    const char *op = "shared memory setup";
    int64_t slot = 4 * c->seg, cap = ((int64_t)256 << 20) / (int64_t)sizeof(float) / (c->world + 1);
    s_shm_args a = {nonce, slot < cap ? slot : cap > 0 ? cap : 1};
    uint8_t ok = 0;
    if (c->rank == 0) {
        c->shm = rl_comm_shm_open(nonce, c->world, 0, a.slot, 1);
        ok = c->shm != NULL;
    }
    int rc = s_flag_lap(c, &ok, s_shm_map, &a, op);
    if (!rc)
        rc = s_flag_lap(c, &ok, NULL, NULL, op);
    if (c->rank == 0)
        rl_comm_shm_unlink(nonce);
    if (rc || !ok) {
        rl_comm_shm_close(c->shm);
        c->shm = NULL;
    }
    return rc;
}

/* options.nccl: rank 0 makes the ncclUniqueId and broadcasts it over the
 * ring just set up (whose id the driver handed out), then every rank joins
 * the NCCL communicator on its current CUDA device. */
static rl_comm *s_nccl_setup(rl_comm *c)
{
    unsigned char uid[RL_NCCL_ID_BYTES];
    float words[RL_NCCL_ID_BYTES / sizeof(float)] = {0};
    int rc = c->rank == 0 ? rl_nccl_unique_id(uid) : RL_OK;
    if (!rc && c->rank == 0)
        memcpy(words, uid, sizeof uid);
    /* broadcast moves bytes (no arithmetic): the id arrives bit for bit */
    if (!rc && c->world > 1)
        rc = rl_comm_broadcast(c, words, words, (int64_t)(sizeof words / sizeof *words), 0);
    if (!rc) {
        memcpy(uid, words, sizeof uid);
        c->nccl = rl_nccl_new(uid, c->world, c->rank, c->timeout_ms, c->abort_base);
        rc = c->nccl ? RL_OK : rl_error_code();
    }
    if (rc) {
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", rl_error_message());
        return s_fail_init(c, rc, "comm rank %d: NCCL setup: %s", c->rank, msg);
    }
    return c;
}

rl_comm *rl_comm_init_rank(const rl_comm_id *id, int world, int rank, const rl_comm_options *opt)
{
    rl_comm_options o;
    if (opt)
        o = *opt;
    else
        rl_comm_options_default(&o);
    if (world < 1 || rank < 0 || rank >= world)
        return rl_error_set(RL_EINVAL, "comm: rank %d out of range for world size %d", rank,
                            world), NULL;
    if (!(o.timeout_s > 0))
        return rl_error_set(RL_EINVAL, "comm: timeout_s must be > 0"), NULL;
    char nonce[17], id_ep[S_EP_MAX + 1];
    if (s_id_fields(id->bytes, nonce, id_ep))
        return NULL;
    rl_comm *c = rl_zalloc(sizeof *c, "comm");
    if (!c)
        return NULL;
    if (pthread_mutex_init(&c->refs_mu, NULL) == 0) {
        if (pthread_cond_init(&c->refs_cv, NULL) == 0)
            c->refs_sync = 1;
        else
            pthread_mutex_destroy(&c->refs_mu);
    }
    for (int i = 0; i <= RL_COMM_MAX_INFLIGHT; i++)
        c->slot[i].c = c;
    c->cur = RL_COMM_MAX_INFLIGHT;
    if (!c->refs_sync) {
        free(c);
        return rl_error_set(RL_EIO, "comm: cannot make a mutex"), NULL;
    }
    c->abort_base = rl_abort_base();
    c->aborts0 = rl_abort_count();
    c->rank = rank;
    c->world = world;
    c->timeout_ms = o.timeout_s * 1000 > 2e9 ? 2000000000 : (int)(o.timeout_s * 1000);
    if (c->timeout_ms < 1)
        c->timeout_ms = 1;
    c->seg = (int64_t)(o.segment_bytes / sizeof(float));
    if (c->seg < 1)
        c->seg = 1;
    if (world == 1)
        return o.nccl ? s_nccl_setup(c) : c;
    c->ctx = zmq_ctx_new();
    if (!c->ctx)
        return s_fail_init(c, RL_EIO, "comm: zmq_ctx_new failed");
    zmq_ctx_set(c->ctx, ZMQ_IO_THREADS, o.io_threads > 0 ? o.io_threads : 1);

    c->pull = zmq_socket(c->ctx, ZMQ_PULL);
    s_setopt_int(c->pull, ZMQ_RCVHWM, 0);
    s_setopt_int(c->pull, ZMQ_LINGER, 0);
    char bind_ep[S_EP_MAX + 32];
    if (strncmp(id_ep, "ipc://", 6) == 0) {
        snprintf(bind_ep, sizeof bind_ep, "%s-r%d", id_ep, rank);
    } else {
        char host[S_EP_MAX], port[32], local[64], plain[S_EP_MAX + 32];
        rl_net_endpoint_plain(id_ep, plain, sizeof plain);
        s_split_tcp(plain, host, sizeof host, port, sizeof port);
        const char *h = o.listen_host;
        if (!h) {
            if (rank == 0) {
                h = host;
            } else {
                s_route_addr(host, local, sizeof local);
                h = local;
            }
        }
        snprintf(bind_ep, sizeof bind_ep, "tcp://%s:*", h);
    }
    char my[RL_NET_ENDPOINT_MAX];
    if (rl_net_bind(c->ctx, c->pull, bind_ep, my, sizeof my) || strlen(my) >= sizeof c->my_ep) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s", rl_error_message());
        return s_fail_init(c, RL_EIO, "comm rank %d: %s", rank, msg);
    }
    snprintf(c->my_ep, sizeof c->my_ep, "%s", my);

    if (!(rank == 0 ? s_rendezvous_root(c, nonce, id_ep) : s_rendezvous_peer(c, nonce, id_ep)))
        return NULL;

    c->push = zmq_socket(c->ctx, ZMQ_PUSH);
    s_setopt_int(c->push, ZMQ_SNDHWM, 0);
    s_setopt_int(c->push, ZMQ_LINGER, c->timeout_ms);
    if (rl_net_connect(c->push, c->right_ep)) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s", rl_error_message());
        return s_fail_init(c, RL_EIO, "comm rank %d: %s", rank, msg);
    }
    /* One barrier proves the ring is connected before anyone relies on it. */
    if (rl_comm_barrier(c) || (o.shared_memory && s_shm_agree(c, nonce, &o))) {
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", rl_error_message());
        return s_fail_init(c, rl_error_code(), "comm rank %d: ring setup: %s", rank, msg);
    }
    return o.nccl ? s_nccl_setup(c) : c;
}

void rl_comm_destroy(rl_comm *c)
{
    if (!c)
        return;
    rl_comm_shm_close(c->shm);
    rl_nccl_free(c->nccl, c->broken);
    if (c->broken || rl_comm_aborted(c)) {
        /* Peers may be gone (an error here, or an abort since it was made:
         * a recovery): do not wait to deliver what is queued, which would
         * hold zmq_ctx_term for the whole linger (the timeout). */
        if (c->push)
            s_setopt_int(c->push, ZMQ_LINGER, 0);
        if (c->ctl)
            s_setopt_int(c->ctl, ZMQ_LINGER, 0);
    }
    if (c->push)
        zmq_close(c->push);
    if (c->pull)
        zmq_close(c->pull);
    if (c->ctl)
        zmq_close(c->ctl);
    if (c->ctx)
        zmq_ctx_term(c->ctx);
    if (c->ctl_ctx)
        zmq_ctx_term(c->ctl_ctx);
    /* the contexts are gone: no ZeroMQ thread runs s_ref_free any more */
    if (c->refs_sync) {
        pthread_mutex_destroy(&c->refs_mu);
        pthread_cond_destroy(&c->refs_cv);
    }
    /* ZeroMQ leaves the socket files of ipc listeners behind. */
    if (strncmp(c->my_ep, "ipc://", 6) == 0)
        unlink(c->my_ep + 6);
    if (strncmp(c->ctl_ep, "ipc://", 6) == 0)
        unlink(c->ctl_ep + 6);
    free(c);
}

int rl_comm_rank(const rl_comm *c) { return c->rank; }
int rl_comm_world(const rl_comm *c) { return c->world; }
int rl_comm_aborted(const rl_comm *c) { return c && rl_abort_count() != c->aborts0; }

const char *rl_comm_transport(const rl_comm *c) { return c->nccl ? "nccl" : c->shm ? "shm" : "ring"; }

/* An operation on an NCCL communicator (device buffers); a failure leaves
 * it broken, like the ring's. */
static int s_nccl_op(rl_comm *c, rl_nccl_coll op, const float *send, float *recv, int64_t count, int root,
                     rl_reduce_op red)
{
    int rc = rl_nccl_run(c->nccl, op, send, recv, count, root, red == RL_REDUCE_AVG, c->timeout_ms,
                         c->abort_base);
    if (rc)
        c->broken = 1;
    return rc;
}

/* ---- messaging ------------------------------------------------------------------------------ */

static int s_fail(rl_comm *c, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int s_fail(rl_comm *c, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    rl_error_setv(code, fmt, ap);
    va_end(ap);
    c->broken = 1;
    return code;
}

/* Sends m to the right (sending) or receives it from the left: waits up to
 * the timeout, ending early when the operation is aborted (s_poll); on
 * failure m is closed and the communicator broken. */
static int s_xfer(rl_comm *c, zmq_msg_t *m, int sending, const char *op)
{
    int64_t deadline = s_now_ms() + c->timeout_ms;
    void *sock = sending ? c->push : c->pull;
    if (!sock) {
        zmq_msg_close(m);
        return s_fail(c, RL_ESTATE, "%s: rank %d: the communicator failed earlier", op, c->rank);
    }
    while ((sending ? zmq_msg_send(m, sock, ZMQ_DONTWAIT) : zmq_msg_recv(m, sock, ZMQ_DONTWAIT)) < 0) {
        int e = zmq_errno();
        if (e == EINTR)
            continue;
        int rc = e == EAGAIN ? s_poll(c, sock, sending ? ZMQ_POLLOUT : ZMQ_POLLIN, deadline, op)
                             : rl_error_set(RL_EIO, "%s: rank %d: %s failed: %s", op, c->rank,
                                            sending ? "send" : "receive", zmq_strerror(e));
        if (rc == RL_OK)
            continue;
        zmq_msg_close(m);
        if (rc == RL_ETIMEOUT && sending)
            return s_fail(c, RL_ETIMEOUT, "%s: rank %d could not send to rank %d within %.3g s",
                          op, c->rank, (c->rank + 1) % c->world, c->timeout_ms / 1000.0);
        if (rc == RL_ETIMEOUT)
            return s_fail(c, RL_ETIMEOUT, "%s: rank %d waited more than %.3g s for rank %d", op,
                          c->rank, c->timeout_ms / 1000.0,
                          (c->rank + c->world - 1) % c->world);
        c->broken = 1; /* the message is set */
        return rc;
    }
    return RL_OK;
}

static int s_send_msg(rl_comm *c, zmq_msg_t *m, const char *op) { return s_xfer(c, m, 1, op); }

static int s_send_copy(rl_comm *c, const void *p, size_t bytes, const char *op)
{
    zmq_msg_t m;
    if (zmq_msg_init_size(&m, bytes) != 0)
        return s_fail(c, RL_ENOMEM, "%s: out of memory", op);
    if (bytes)
        memcpy(zmq_msg_data(&m), p, bytes);
    return s_send_msg(c, &m, op);
}

/* ZeroMQ's I/O thread is done with a segment sent by reference. */
static void s_ref_free(void *data, void *hint)
{
    (void)data;
    struct s_slot *sl = hint;
    rl_comm *c = sl->c;
    pthread_mutex_lock(&c->refs_mu);
    sl->refs--;
    if (--c->refs == 0 || sl->refs == 0)
        pthread_cond_broadcast(&c->refs_cv);
    pthread_mutex_unlock(&c->refs_mu);
}

/* Sends bytes at p without a copy: p must stay unchanged until s_wait_refs
 * (the end of the operation). */
static int s_send_ref(rl_comm *c, const void *p, size_t bytes, const char *op)
{
    if (bytes == 0)
        return s_send_copy(c, p, bytes, op);
    zmq_msg_t m;
    struct s_slot *sl = &c->slot[c->cur];
    pthread_mutex_lock(&c->refs_mu);
    c->refs++;
    sl->refs++;
    pthread_mutex_unlock(&c->refs_mu);
    if (zmq_msg_init_data(&m, (void *)p, bytes, s_ref_free, sl) != 0) {
        pthread_mutex_lock(&c->refs_mu);
        c->refs--;
        sl->refs--;
        pthread_mutex_unlock(&c->refs_mu);
        return s_fail(c, RL_ENOMEM, "%s: out of memory", op);
    }
    return s_send_msg(c, &m, op); /* a failed send closes m: the ref drops */
}

/* Waits until ZeroMQ released every segment sent by reference (it does once
 * the bytes are in the kernel). `failed`: the operation already failed, so
 * nobody will take the rest. When that, an abort (abort.h) or the timeout
 * ends the wait, the push socket is closed without linger, which makes
 * ZeroMQ drop (and release) what it still holds at once, so the caller's
 * buffers are never read after the operation returned; the communicator is
 * then broken. No spinning: s_ref_free signals refs_cv. */
static int s_wait_refs_of(rl_comm *c, const int *held_by, int failed, const char *op);

static int s_wait_refs(rl_comm *c, int failed, const char *op)
{
    return s_wait_refs_of(c, &c->refs, failed, op);
}

/* s_wait_refs for the segments counted by *held_by (all of them, or one
 * pipelined broadcast's slot); a failure drops every segment. */
static int s_wait_refs_of(rl_comm *c, const int *held_by, int failed, const char *op)
{
    int64_t deadline = s_now_ms() + c->timeout_ms;
    int code = failed ? RL_ESTATE : RL_OK;
    pthread_mutex_lock(&c->refs_mu);
    while (*held_by > 0 && code == RL_OK) {
        int64_t now = s_now_ms();
        if (rl_abort_pending(c->abort_base)) {
            code = RL_EPEER;
        } else if (now >= deadline) {
            code = RL_ETIMEOUT;
        } else {
            int64_t until = deadline - now < RL_ABORT_POLL_MS ? deadline : now + RL_ABORT_POLL_MS;
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            int64_t ns = ts.tv_nsec + (until - now) * 1000000;
            ts.tv_sec += ns / 1000000000;
            ts.tv_nsec = ns % 1000000000;
            pthread_cond_timedwait(&c->refs_cv, &c->refs_mu, &ts);
        }
    }
    int held = *held_by;
    pthread_mutex_unlock(&c->refs_mu);
    if (code == RL_OK || (failed && !held))
        return RL_OK;
    if (c->push) {
        s_setopt_int(c->push, ZMQ_LINGER, 0);
        zmq_close(c->push);
        c->push = NULL;
    }
    pthread_mutex_lock(&c->refs_mu);
    while (c->refs > 0) /* ZeroMQ's reaper drops them: not a wait on a peer */
        pthread_cond_wait(&c->refs_cv, &c->refs_mu);
    pthread_mutex_unlock(&c->refs_mu);
    if (failed) { /* the operation's own error stays the message */
        c->broken = 1;
        return RL_OK;
    }
    if (code == RL_EPEER) {
        char what[96];
        snprintf(what, sizeof what, "%s: rank %d", op, c->rank);
        rl_abort_check(c->abort_base, what);
        c->broken = 1;
        return RL_EPEER;
    }
    return s_fail(c, RL_ETIMEOUT, "%s: rank %d: rank %d did not take its data within %.3g s",
                  op, c->rank, (c->rank + 1) % c->world, c->timeout_ms / 1000.0);
}

/* Receives the next message from the left; it must be `bytes` long. */
static int s_recv(rl_comm *c, zmq_msg_t *m, size_t bytes, const char *op)
{
    zmq_msg_init(m);
    int rc = s_xfer(c, m, 0, op);
    if (rc)
        return rc;
    if (zmq_msg_size(m) != bytes) {
        size_t got = zmq_msg_size(m);
        zmq_msg_close(m);
        return s_fail(c, RL_EPROTO,
                      "%s: rank %d got a %zu-byte message from rank %d, expected %zu (ranks "
                      "called different collectives or counts)",
                      op, c->rank, got, (c->rank + c->world - 1) % c->world, bytes);
    }
    return RL_OK;
}

static int s_check(rl_comm *c, const void *send, const void *recv, int64_t count,
                   const char *op)
{
    if (c->started == c->finished) /* pipelined broadcasts keep the first one's base */
        c->abort_base = rl_abort_base();
    if (c->broken)
        return rl_error_set(RL_ESTATE, "%s: the communicator failed earlier; destroy it", op);
    if (c->started != c->finished && !c->starting) { /* a blocking operation after pipelined ones */
        int rc = rl_comm_wait(c, 0);
        if (rc)
            return rc;
        c->abort_base = rl_abort_base();
    }
    if (count < 0)
        return rl_error_set(RL_EINVAL, "%s: negative count %lld", op, (long long)count);
    if (count > 0 && (!send || !recv))
        return rl_error_set(RL_EINVAL, "%s: NULL buffer", op);
    return RL_OK;
}

static inline int s_mod(int a, int w) { return ((a % w) + w) % w; }

/* ---- ring phases ------------------------------------------------------------------------------ */

/* y = x + loc (then / w if avg), element by element. ZeroMQ message data
 * need not be float-aligned, so x and y are accessed through memcpy (which
 * compiles to plain unaligned vector loads and stores). */
static void s_add_into(void *y, const void *x, const float *loc, int64_t n, float w, int avg)
{
    unsigned char *yb = y;
    const unsigned char *xb = x;
    if (avg) {
        for (int64_t i = 0; i < n; i++) {
            float v;
            memcpy(&v, xb + 4 * i, 4);
            v = (v + loc[i]) / w;
            memcpy(yb + 4 * i, &v, 4);
        }
    } else {
        for (int64_t i = 0; i < n; i++) {
            float v;
            memcpy(&v, xb + 4 * i, 4);
            v = v + loc[i];
            memcpy(yb + 4 * i, &v, 4);
        }
    }
}

/* The length of the segment at `off` of a chunk ending at e. */
static int64_t s_seg_len(const rl_comm *c, int64_t off, int64_t e)
{
    return e - off < c->seg ? e - off : c->seg;
}

/* Sends buf[b .. e) to the right in segments, by reference (the caller
 * keeps buf unchanged until s_wait_refs) or copied. */
static int s_send_range(rl_comm *c, const float *buf, int64_t b, int64_t e, int by_ref,
                        const char *name)
{
    for (int64_t off = b; off < e; off += c->seg) {
        size_t bytes = (size_t)s_seg_len(c, off, e) * sizeof(float);
        int rc = by_ref ? s_send_ref(c, buf + off, bytes, name)
                        : s_send_copy(c, buf + off, bytes, name);
        if (rc)
            return rc;
    }
    return RL_OK;
}

/* Receives the segments of [b, e) from the left into full[b .. e),
 * sending each one on to the right when `forward`. */
static int s_recv_range(rl_comm *c, float *full, int64_t b, int64_t e, int forward,
                        const char *name)
{
    for (int64_t off = b; off < e; off += c->seg) {
        size_t bytes = (size_t)s_seg_len(c, off, e) * sizeof(float);
        zmq_msg_t in;
        int rc = s_recv(c, &in, bytes, name);
        if (rc)
            return rc;
        memcpy(full + off, zmq_msg_data(&in), bytes);
        if (forward) {
            if ((rc = s_send_msg(c, &in, name)))
                return rc;
        } else {
            zmq_msg_close(&in);
        }
    }
    return RL_OK;
}

/* Reduce-scatter along the ring. The reduced chunk of this rank goes to
 * `dst` (its first element); with `then_gather` each finished segment is
 * also sent on as step 0 of the all-gather that follows. */
static int s_ring_reduce(rl_comm *c, const float *send, float *dst, int64_t count,
                         rl_reduce_op op, int then_gather, const float *out_lo,
                         const float *out_hi, const char *name)
{
    const int W = c->world, r = c->rank;
    int64_t b, e, mb, me;
    rl_shard_range(count, W, r, &mb, &me);
    rl_shard_range(count, W, s_mod(r - 1, W), &b, &e);
    /* the first chunk goes out by reference unless the operation writes
     * over it (in place: [out_lo, out_hi) is what it writes) */
    int by_ref = send + e <= out_lo || out_hi <= send + b;
    int rc = s_send_range(c, send, b, e, by_ref, name);
    if (rc)
        return rc;
    const float wf = (float)W;
    for (int s = 0; s <= W - 2; s++) {
        int chunk = s_mod(r - s - 2, W);
        int final = s == W - 2;
        rl_shard_range(count, W, chunk, &b, &e);
        for (int64_t off = b; off < e; off += c->seg) {
            int64_t n = s_seg_len(c, off, e);
            size_t bytes = (size_t)n * sizeof(float);
            zmq_msg_t in;
            if ((rc = s_recv(c, &in, bytes, name)))
                return rc;
            const void *x = zmq_msg_data(&in);
            const float *loc = send + off;
            if (!final) {
                zmq_msg_t out;
                if (zmq_msg_init_size(&out, bytes) != 0) {
                    zmq_msg_close(&in);
                    return s_fail(c, RL_ENOMEM, "%s: out of memory", name);
                }
                s_add_into(zmq_msg_data(&out), x, loc, n, 1.0f, 0);
                zmq_msg_close(&in);
                if ((rc = s_send_msg(c, &out, name)))
                    return rc;
            } else {
                float *y = dst + (off - mb);
                s_add_into(y, x, loc, n, wf, op == RL_REDUCE_AVG);
                zmq_msg_close(&in);
                /* this rank's reduced chunk is final: nothing writes it
                 * again in this operation */
                if (then_gather && (rc = s_send_ref(c, y, bytes, name)))
                    return rc;
            }
        }
    }
    return RL_OK;
}

/* All-gather steps after this rank's own chunk has been sent: receive the
 * other W-1 chunks into `full`, forwarding each segment unless the right
 * neighbour is its owner. */
static int s_ring_gather(rl_comm *c, float *full, int64_t count, const char *name)
{
    const int W = c->world, r = c->rank;
    for (int s = 0; s <= W - 2; s++) {
        int64_t b, e;
        rl_shard_range(count, W, s_mod(r - s - 1, W), &b, &e);
        int rc = s_recv_range(c, full, b, e, s < W - 2, name);
        if (rc)
            return rc;
    }
    return RL_OK;
}

/* ---- operations -------------------------------------------------------------------------------- */

int rl_comm_broadcast(rl_comm *c, const float *sendbuf, float *recvbuf, int64_t count, int root)
{
    const char *name = "broadcast";
    int rc = s_check(c, c->rank == root ? sendbuf : recvbuf, recvbuf, count, name);
    if (rc)
        return rc;
    if (root < 0 || root >= c->world)
        return rl_error_set(RL_EINVAL, "%s: root %d out of range for world size %d", name, root,
                            c->world);
    if (c->nccl)
        return s_nccl_op(c, RL_NCCL_BROADCAST, sendbuf, recvbuf, count, root, RL_REDUCE_SUM);
    if (c->rank == root) {
        if (count > 0 && recvbuf != sendbuf)
            memmove(recvbuf, sendbuf, (size_t)count * sizeof(float));
        if (c->world == 1)
            return RL_OK;
        rc = s_send_range(c, sendbuf, 0, count, 1, name);
        int rw = s_wait_refs(c, rc != RL_OK, name);
        return rc ? rc : rw;
    }
    return s_recv_range(c, recvbuf, 0, count, (c->rank + 1) % c->world != root, name);
}

int rl_comm_all_reduce(rl_comm *c, const float *sendbuf, float *recvbuf, int64_t count,
                       rl_reduce_op op)
{
    const char *name = "all_reduce";
    int rc = s_check(c, sendbuf, recvbuf, count, name);
    if (rc)
        return rc;
    if (c->nccl)
        return s_nccl_op(c, RL_NCCL_ALL_REDUCE, sendbuf, recvbuf, count, 0, op);
    if (c->world == 1) {
        if (count > 0 && recvbuf != sendbuf)
            memmove(recvbuf, sendbuf, (size_t)count * sizeof(float));
        return RL_OK; /* the sum and the mean of one value are the value */
    }
    if (c->shm) {
        rc = rl_comm_shm_all_reduce(c->shm, sendbuf, recvbuf, count, op == RL_REDUCE_AVG,
                                    c->timeout_ms, c->abort_base);
        if (rc)
            c->broken = 1;
        return rc;
    }
    int64_t b, e;
    rl_shard_range(count, c->world, c->rank, &b, &e);
    rc = s_ring_reduce(c, sendbuf, recvbuf + b, count, op, 1, recvbuf, recvbuf + count, name);
    if (!rc)
        rc = s_ring_gather(c, recvbuf, count, name);
    int rw = s_wait_refs(c, rc != RL_OK, name);
    return rc ? rc : rw;
}

int rl_comm_reduce_scatter(rl_comm *c, const float *sendbuf, float *recvbuf, int64_t count,
                           rl_reduce_op op)
{
    const char *name = "reduce_scatter";
    int64_t b, e;
    rl_shard_range(count, c->world, c->rank, &b, &e);
    int rc = s_check(c, sendbuf, e > b ? recvbuf : sendbuf, count, name);
    if (rc)
        return rc;
    if (c->nccl)
        return s_nccl_op(c, RL_NCCL_REDUCE_SCATTER, sendbuf, recvbuf, count, 0, op);
    if (c->world == 1) {
        if (count > 0 && recvbuf != sendbuf)
            memmove(recvbuf, sendbuf, (size_t)count * sizeof(float));
        return RL_OK;
    }
    rc = s_ring_reduce(c, sendbuf, recvbuf, count, op, 0, recvbuf, recvbuf + (e - b), name);
    int rw = s_wait_refs(c, rc != RL_OK, name);
    return rc ? rc : rw;
}

int rl_comm_all_gather(rl_comm *c, const float *sendbuf, float *recvbuf, int64_t count)
{
    const char *name = "all_gather";
    int64_t b, e;
    rl_shard_range(count, c->world, c->rank, &b, &e);
    int rc = s_check(c, e > b ? sendbuf : recvbuf, recvbuf, count, name);
    if (rc)
        return rc;
    if (c->nccl)
        return s_nccl_op(c, RL_NCCL_ALL_GATHER, sendbuf, recvbuf, count, 0, RL_REDUCE_SUM);
    if (e > b && recvbuf + b != sendbuf)
        memmove(recvbuf + b, sendbuf, (size_t)(e - b) * sizeof(float));
    if (c->world == 1)
        return RL_OK;
    /* this rank's chunk is not written again: it goes out by reference */
    rc = s_send_range(c, recvbuf, b, e, 1, name);
    if (!rc)
        rc = s_ring_gather(c, recvbuf, count, name);
    int rw = s_wait_refs(c, rc != RL_OK, name);
    return rc ? rc : rw;
}

int rl_comm_barrier(rl_comm *c)
{
    const char *name = "barrier";
    int rc0 = s_check(c, NULL, NULL, 0, name);
    if (rc0)
        return rc0;
    if (c->world == 1)
        return RL_OK;
    /* Two laps of an empty token: after the first, rank 0 knows everyone
     * arrived; the second tells everyone else. */
    for (int lap = 0; lap < 2; lap++) {
        zmq_msg_t m;
        int rc;
        if (c->rank == 0) {
            if ((rc = s_send_copy(c, NULL, 0, name)) || (rc = s_recv(c, &m, 0, name)))
                return rc;
            zmq_msg_close(&m);
        } else {
            if ((rc = s_recv(c, &m, 0, name)) || (rc = s_send_msg(c, &m, name)))
                return rc;
        }
    }
    return RL_OK;
}

/* ---- pipelined broadcasts --------------------------------------------------------------------- */

int rl_comm_broadcast_start(rl_comm *c, const float *sendbuf, float *recvbuf, int64_t count, int root)
{
    const char *name = "broadcast";
    if (!c->broken && c->started - c->finished >= RL_COMM_MAX_INFLIGHT) {
        int rw = rl_comm_wait(c, RL_COMM_MAX_INFLIGHT - 1);
        if (rw)
            return rw;
    }
    c->starting = 1;
    int rc = s_check(c, c->rank == root ? sendbuf : recvbuf, recvbuf, count, name);
    c->starting = 0;
    if (rc)
        return rc;
    if (root < 0 || root >= c->world)
        return rl_error_set(RL_EINVAL, "%s: root %d out of range for world size %d", name, root,
                            c->world);
    if (c->nccl) {
        rc = rl_nccl_bcast_start(c->nccl, sendbuf, recvbuf, count, root, c->timeout_ms, c->abort_base);
        if (rc) {
            c->broken = 1;
            return rc;
        }
        c->started++;
        return RL_OK;
    }
    if (c->rank != root || c->world == 1) { /* a receiver's part (or nothing) is done when it returns */
        rc = c->rank == root ? RL_OK : s_recv_range(c, recvbuf, 0, count, (c->rank + 1) % c->world != root, name);
        if (!rc && c->rank == root && count > 0 && recvbuf != sendbuf)
            memmove(recvbuf, sendbuf, (size_t)count * sizeof(float));
        if (rc)
            return rc;
        c->started++;
        c->finished = c->started;
        return RL_OK;
    }
    if (count > 0 && recvbuf != sendbuf)
        memmove(recvbuf, sendbuf, (size_t)count * sizeof(float));
    c->cur = (int)(c->started % RL_COMM_MAX_INFLIGHT);
    c->started++;
    rc = s_send_range(c, sendbuf, 0, count, 1, name);
    c->cur = RL_COMM_MAX_INFLIGHT;
    if (rc) { /* drops what ZeroMQ holds of every started one */
        s_wait_refs(c, 1, name);
        c->finished = c->started;
    }
    return rc;
}

int rl_comm_wait(rl_comm *c, int keep)
{
    const char *name = "broadcast";
    if (keep < 0)
        keep = 0;
    if (c->broken && c->started != c->finished) { /* a failure dropped them */
        c->finished = c->started;
        return rl_error_set(RL_ESTATE, "%s: the communicator failed earlier; destroy it", name);
    }
    int rc = RL_OK;
    if (c->nccl) {
        if (c->started - c->finished > (uint64_t)keep) {
            rc = rl_nccl_wait(c->nccl, keep, c->timeout_ms, c->abort_base);
            c->finished = rc ? c->started : c->started - (uint64_t)keep;
        }
    } else {
        while (!rc && c->started - c->finished > (uint64_t)keep) {
            rc = s_wait_refs_of(c, &c->slot[c->finished % RL_COMM_MAX_INFLIGHT].refs, 0, name);
            c->finished = rc ? c->started : c->finished + 1;
        }
    }
    if (rc)
        c->broken = 1;
    return rc;
}

int rl_comm_inflight(rl_comm *c)
{
    if (c->broken)
        return 0;
    if (c->nccl) {
        int n = rl_nccl_inflight(c->nccl);
        if (n >= 0 && (uint64_t)n < c->started - c->finished)
            c->finished = c->started - (uint64_t)n;
        return (int)(c->started - c->finished);
    }
    pthread_mutex_lock(&c->refs_mu);
    while (c->finished < c->started && c->slot[c->finished % RL_COMM_MAX_INFLIGHT].refs == 0)
        c->finished++;
    pthread_mutex_unlock(&c->refs_mu);
    return (int)(c->started - c->finished);
}
