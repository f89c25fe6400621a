/* channel.c — direct data channels and the versioned weight channel
 * (see rlrt/runtime/channel.h). */
#include "rlrt/runtime/channel.h"
#include "common/core/util.h"
#include "rlrt/error.h"
#include "common/runtime/abort.h"
#include "common/runtime/net.h"
#include "common/runtime/weight_version.h"
#include "rlrt/wire.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zmq.h>

static int s_zerr(const char *what)
{
    return rl_error_set(RL_EIO, "%s: %s", what, zmq_strerror(zmq_errno()));
}

/* The deadline of a wait of timeout_ms (< 0: none, -1). */
static int64_t s_deadline(int timeout_ms) { return timeout_ms < 0 ? -1 : rl_net_now_ms() + timeout_ms; }

/* ---- data channel ------------------------------------------------------------------ */

static _Atomic uint64_t s_weight_version;

uint64_t rl_weight_channel_version(void) { return atomic_load(&s_weight_version); }

static void s_note_version(uint64_t v)
{
    uint64_t cur = atomic_load(&s_weight_version);
    while (v > cur && !atomic_compare_exchange_weak(&s_weight_version, &cur, v))
        ;
}

struct rl_channel {
    void *ctx;
    void *sock;
    char endpoint[RL_NET_ENDPOINT_MAX];
};

/* A channel end bound to `where` (listen) or connected to it. */
static rl_channel *s_channel_open(const char *where, int listen)
{
    rl_channel *ch = rl_zalloc(sizeof *ch, "channel");
    if (!ch)
        return NULL;
    if (rl_net_own_socket(&ch->ctx, &ch->sock, ZMQ_PAIR, "channel")) {
        rl_channel_free(ch);
        return NULL;
    }
    if (listen ? rl_net_bind(ch->ctx, ch->sock, where, ch->endpoint, sizeof ch->endpoint)
               : rl_net_connect(ch->sock, where)) {
        rl_error_wrap(rl_error_code(), "channel");
        rl_channel_free(ch);
        return NULL;
    }
    if (!listen)
        rl_net_endpoint_plain(where, ch->endpoint, sizeof ch->endpoint);
    return ch;
}

rl_channel *rl_channel_listen(const char *bind) { return s_channel_open(bind, 1); }

rl_channel *rl_channel_connect(const char *endpoint) { return s_channel_open(endpoint, 0); }

const char *rl_channel_endpoint(const rl_channel *ch) { return ch->endpoint; }

int rl_channel_send(rl_channel *ch, const rl_dataproto *dp, int timeout_ms)
{
    char what[RL_NET_ENDPOINT_MAX + 32];
    snprintf(what, sizeof what, "channel %s: send", ch->endpoint);
    int64_t deadline = s_deadline(timeout_ms);
    /* a PAIR blocks while no peer is connected: wait (abortably) until a
     * message can go, then send it whole */
    int rc = rl_net_wait(ch->sock, ZMQ_POLLOUT, deadline, rl_abort_base(), what);
    if (rc == RL_ETIMEOUT)
        return rl_error_set(RL_ETIMEOUT, "channel %s: could not send within %d ms", ch->endpoint,
                            timeout_ms);
    if (rc)
        return rc;
    int64_t left = deadline < 0 ? -1 : deadline - rl_net_now_ms();
    int t = left < 0 ? (deadline < 0 ? -1 : 0) : (int)left;
    zmq_setsockopt(ch->sock, ZMQ_SNDTIMEO, &t, sizeof t);
    rc = rl_wire_send_dataproto(ch->sock, dp, 0);
    return rc ? rl_error_wrap(rc, "channel %s", ch->endpoint) : RL_OK;
}

int rl_channel_recv(rl_channel *ch, rl_dataproto **out, int timeout_ms)
{
    char what[RL_NET_ENDPOINT_MAX + 32];
    snprintf(what, sizeof what, "channel %s: receive", ch->endpoint);
    int rc = rl_net_wait(ch->sock, ZMQ_POLLIN, s_deadline(timeout_ms), rl_abort_base(), what);
    if (rc == RL_ETIMEOUT)
        return rl_error_set(RL_ETIMEOUT, "channel %s: nothing received in %d ms", ch->endpoint,
                            timeout_ms);
    if (rc)
        return rc;
    rc = rl_wire_recv_dataproto(ch->sock, out);
    return rc ? rl_error_wrap(rc, "channel %s", ch->endpoint) : RL_OK;
}

void rl_channel_free(rl_channel *ch)
{
    if (!ch)
        return;
    rl_net_own_close(ch->ctx, ch->sock);
    free(ch);
}

/* ---- weight channel ----------------------------------------------------------------
 * receiver -> sender: HAVE  {magic "RLWH", rank + 1 (0: none), version}    16 bytes
 *                     [+ one frame: the receiver's chain input endpoint]
 * sender -> receiver: ROUTE {magic "RLWR", first next rank + 1, version}   16 bytes
 *                     + one frame: the endpoints to forward to, separated by
 *                       spaces, at most S_MAX_NEXT ("" for none)
 * sender or upstream receiver -> receiver:
 *                     BUCKET{magic "RLWB", index, n_buckets, pad, version, offset,
 *                             count, total}                              48 bytes
 *                     + one frame of count floats (zero-copy from the sender's buffer,
 *                       or the upstream receiver's received frame, shared)
 * Chain: every ranked receiver binds a PULL (its input) and names it in its
 * HAVE; before each version the sender sends every such receiver a ROUTE
 * naming the next receiver's input (rank order), and the head alone gets
 * the buckets from the sender. A receiver forwards each new bucket of a
 * version it has a ROUTE for, as it arrives, through a PUSH connected to the
 * next input, and acknowledges to the sender itself. A bucket from the
 * input waits for that version's ROUTE (the sender sent it first).
 * When the inputs are on more than one host, the chain runs over the hosts
 * (nodes) instead: the lowest rank of each host (its head) forwards to the
 * next host's head and to up to S_MAX_NEXT - 1 of its host's other ranks
 * (the rest of them in a chain after the last of those), so a version
 * crosses each node's link once and the pipeline fill counts nodes, not
 * ranks.
 */

#define S_MAGIC_HAVE 0x48574c52u   /* "RLWH" */
#define S_MAGIC_ROUTE 0x52574c52u  /* "RLWR" */
#define S_MAGIC_BUCKET 0x42574c52u /* "RLWB" */
#define S_MAX_RECEIVERS 1024
#define S_FORWARD_LINGER_MS 5000
#define S_MAX_NEXT 16 /* forwards of one receiver (a host's head: the next head + locals) */
#define S_HOLD_BYTES ((size_t)1 << 20) /* a head's run of buckets to its own host's ranks */
#define S_HOLD_MAX 64                  /* ... and at most this many buckets */
#define S_ROUTE_MAX (S_MAX_NEXT * RL_NET_ENDPOINT_MAX)

typedef struct {
    uint32_t magic, rank1;
    uint64_t version;
} s_have; /* also the ROUTE header (rank1: the next receiver's rank + 1) */

typedef struct {
    uint32_t magic, index, n_buckets, pad;
    uint64_t version, offset, count, total;
} s_bucket;

typedef struct {
    unsigned char id[256];
    size_t id_len;
    uint64_t version;
    int rank;                          /* -1: the receiver did not say */
    char input[RL_NET_ENDPOINT_MAX];   /* its chain input ("" : none) */
} s_peer;

struct rl_weight_sender {
    void *ctx;
    void *sock;
    char endpoint[RL_NET_ENDPOINT_MAX];
    size_t bucket_bytes;
    rl_weight_fanout fanout;
    s_peer *peers; /* S_MAX_RECEIVERS */
    int n_peers;
    uint64_t last_version;
    int broken; /* a send failed after its buckets were queued (s_sender_break) */
};

rl_weight_sender *rl_weight_sender_new(const char *bind, size_t bucket_bytes)
{
    rl_weight_sender *s = rl_zalloc(sizeof *s, "weight sender");
    if (!s)
        return NULL;
    s->bucket_bytes = bucket_bytes ? bucket_bytes : (size_t)4 << 20;
    s->fanout = RL_WEIGHT_FANOUT_STAR;
    s->peers = rl_zalloc(sizeof *s->peers * S_MAX_RECEIVERS, "weight sender");
    if (!s->peers || rl_net_own_socket(&s->ctx, &s->sock, ZMQ_ROUTER, "weight sender")) {
        rl_weight_sender_free(s);
        return NULL;
    }
    int hwm = 0, mandatory = 1;
    zmq_setsockopt(s->sock, ZMQ_SNDHWM, &hwm, sizeof hwm);
    zmq_setsockopt(s->sock, ZMQ_ROUTER_MANDATORY, &mandatory, sizeof mandatory);
    if (rl_net_bind(s->ctx, s->sock, bind, s->endpoint, sizeof s->endpoint)) {
        rl_error_wrap(rl_error_code(), "weight sender");
        rl_weight_sender_free(s);
        return NULL;
    }
    return s;
}

const char *rl_weight_sender_endpoint(const rl_weight_sender *s) { return s->endpoint; }

void rl_weight_sender_set_fanout(rl_weight_sender *s, rl_weight_fanout fanout)
{
    s->fanout = fanout == RL_WEIGHT_FANOUT_CHAIN ? RL_WEIGHT_FANOUT_CHAIN : RL_WEIGHT_FANOUT_STAR;
}

/* Reads one HAVE from a receiver and records it. A ranked receiver that
 * comes back under a new identity (a restarted process) takes its rank's
 * place: the old identity is dead and will never acknowledge. */
static int s_read_have(rl_weight_sender *s)
{
    unsigned char id[256];
    int idn = zmq_recv(s->sock, id, sizeof id, 0);
    if (idn < 0)
        return s_zerr("weight sender receive");
    if (idn == 0 || idn > (int)sizeof id) /* zmq_recv reports the untruncated size */
        idn = -1;
    s_have h;
    int n = rl_net_more(s->sock) ? zmq_recv(s->sock, &h, sizeof h, 0) : -1;
    char input[RL_NET_ENDPOINT_MAX] = "";
    int en = 0;
    if (rl_net_more(s->sock)) {
        en = zmq_recv(s->sock, input, sizeof input - 1, 0);
        if (en < 0 || en >= (int)sizeof input - 1)
            en = -1; /* too long (zmq_recv reports the untruncated size) */
        else
            input[en] = 0;
    }
    rl_net_drain(s->sock); /* extra frames */
    if (idn < 0 || n != (int)sizeof h || h.magic != S_MAGIC_HAVE || en < 0 ||
        h.rank1 > S_MAX_RECEIVERS * 64u || (int)strlen(input) != en)
        return rl_error_set(RL_EPROTO, "weight sender: malformed message (%d bytes) from a receiver", n);
    int rank = (int)h.rank1 - 1;
    s_peer *p = NULL;
    for (int i = 0; i < s->n_peers && !p; i++)
        if (s->peers[i].id_len == (size_t)idn && memcmp(s->peers[i].id, id, (size_t)idn) == 0)
            p = &s->peers[i];
    for (int i = 0; i < s->n_peers && !p && rank >= 0; i++)
        if (s->peers[i].rank == rank) { /* the rank's new process */
            p = &s->peers[i];
            memcpy(p->id, id, (size_t)idn);
            p->id_len = (size_t)idn;
            p->version = 0;
        }
    if (!p) {
        if (s->n_peers == S_MAX_RECEIVERS)
            return rl_error_set(RL_ERANGE, "weight sender: more than %d receivers", S_MAX_RECEIVERS);
        p = &s->peers[s->n_peers++];
        memcpy(p->id, id, (size_t)idn);
        p->id_len = (size_t)idn;
    }
    p->version = h.version;
    p->rank = rank;
    snprintf(p->input, sizeof p->input, "%s", input);
    return RL_OK;
}

/* A send failed after buckets that point into the caller's buffer were
 * queued: closing the socket and terminating its own context makes ZeroMQ
 * drop them before this returns (linger 0), so the buffer is the caller's
 * again. The sender cannot send any more. */
static void s_sender_break(rl_weight_sender *s)
{
    rl_net_own_close(s->ctx, s->sock);
    s->ctx = s->sock = NULL;
    s->broken = 1;
}

static int s_count_at(const rl_weight_sender *s, uint64_t version)
{
    int n = 0;
    for (int i = 0; i < s->n_peers; i++)
        n += s->peers[i].version >= version;
    return n;
}

/* "rank 3, rank 4, ..." of the receivers that have not acknowledged `version`,
 * lowest rank first (in a chain the first one is where it broke). */
static void s_missing(const rl_weight_sender *s, uint64_t version, char *out, size_t size)
{
    size_t at = 0;
    int listed = 0;
    out[0] = 0;
    for (int rank = -1, next; listed < 8; rank = next) {
        next = INT32_MAX;
        int anon = 0;
        for (int i = 0; i < s->n_peers; i++) {
            if (s->peers[i].version >= version)
                continue;
            if (s->peers[i].rank > rank && s->peers[i].rank < next)
                next = s->peers[i].rank;
            anon += s->peers[i].rank < 0;
        }
        if (next == INT32_MAX) {
            if (rank == -1 && anon && at < size)
                snprintf(out + at, size - at, "%d unranked", anon);
            break;
        }
        if (at < size)
            at += (size_t)snprintf(out + at, size - at, "%srank %d", listed ? ", " : "", next);
        listed++;
    }
}

static int s_cmp_rank(const void *a, const void *b)
{
    const s_peer *x = *(s_peer *const *)a, *y = *(s_peer *const *)b;
    return (x->rank > y->rank) - (x->rank < y->rank);
}

/* The host of a chain input "tcp://HOST:PORT[|key]" into out (size n). */
static void s_host(const char *ep, char *out, size_t n)
{
    const char *a = strstr(ep, "://");
    a = a ? a + 3 : ep;
    const char *bar = strchr(a, '|');
    size_t len = bar ? (size_t)(bar - a) : strlen(a);
    const char *colon = NULL;
    for (size_t i = 0; i < len; i++)
        if (a[i] == ':')
            colon = a + i;
    if (colon)
        len = (size_t)(colon - a);
    snprintf(out, n, "%.*s", (int)(len < n ? len : n - 1), a);
}

/* Where each of chain[0..nc) (rank order) forwards: nexts[c * S_MAX_NEXT
 * + j] (-1 ends the list) index chain, and (*eps)[c * S_ROUTE_MAX] is the
 * ROUTE's frame, their inputs joined by spaces. One host: the rank chain.
 * More: the chain of the hosts' heads, each head also feeding its host's
 * ranks (see the protocol comment). NULL on no memory. */
static int *s_plan(s_peer **chain, int nc, char **eps)
{
    size_t m = nc ? (size_t)nc : 1;
    int *nexts = malloc(sizeof *nexts * m * S_MAX_NEXT), *head = malloc(sizeof *head * m);
    char (*host)[RL_NET_ENDPOINT_MAX] = malloc(sizeof *host * m);
    *eps = calloc(m, S_ROUTE_MAX);
    if (!nexts || !head || !host || !*eps) {
        free(nexts);
        free(head);
        free(host);
        free(*eps);
        *eps = NULL;
        rl_error_set(RL_ENOMEM, "weight sender: out of memory");
        return NULL;
    }
    for (size_t i = 0; i < m * S_MAX_NEXT; i++)
        nexts[i] = -1;
    int hosts = 0;
    for (int c = 0; c < nc; c++) {
        s_host(chain[c]->input, host[c], sizeof host[c]);
        head[c] = c;
        for (int j = 0; j < c; j++)
            if (head[j] == j && strcmp(host[j], host[c]) == 0) {
                head[c] = j;
                break;
            }
        hosts += head[c] == c;
    }
    for (int c = 0; c < nc; c++) {
        int *nx = nexts + (size_t)c * S_MAX_NEXT, k = 0;
        if (hosts <= 1) {
            if (c + 1 < nc)
                nx[k++] = c + 1;
        } else if (head[c] == c) {
            for (int j = c + 1; j < nc; j++) /* the next host's head */
                if (head[j] == j) {
                    nx[k++] = j;
                    break;
                }
            int locals = 0; /* its own ranks: the first S_MAX_NEXT - 1 */
            for (int j = c + 1; j < nc && locals < S_MAX_NEXT - 1; j++)
                if (head[j] == c) {
                    nx[k++] = j;
                    locals++;
                }
        } else { /* a local rank past its head's S_MAX_NEXT - 1: the one after it */
            int before = 0, after = -1;
            for (int j = head[c] + 1; j < nc; j++) {
                if (head[j] != head[c])
                    continue;
                if (j < c)
                    before++;
                else if (j > c) {
                    after = j;
                    break;
                }
            }
            if (before >= S_MAX_NEXT - 2 && after >= 0)
                nx[k++] = after;
        }
        char *ep = *eps + (size_t)c * S_ROUTE_MAX;
        size_t at = 0;
        for (int j = 0; j < k; j++)
            at += (size_t)snprintf(ep + at, S_ROUTE_MAX - at, "%s%s", j ? " " : "",
                                   chain[nx[j]]->input);
    }
    free(head);
    free(host);
    return nexts;
}

/* Tells every chainable receiver where to forward `version` (chain: the
 * next one's input in rank order; star: nowhere) and returns in *direct the
 * receivers the sender itself sends to (chain: the head and any receiver
 * without an input; star: all). 1 with *gone = its index when a chainable
 * receiver is no longer connected (nothing of the version was sent yet). */
static int s_route(rl_weight_sender *s, uint64_t version, s_peer **direct, int *n_direct, int *gone)
{
    s_peer **chain = malloc(sizeof *chain * (size_t)(s->n_peers ? s->n_peers : 1));
    if (!chain)
        return rl_error_set(RL_ENOMEM, "weight sender: out of memory");
    int nc = 0, nd = 0;
    for (int i = 0; i < s->n_peers; i++) {
        s_peer *p = &s->peers[i];
        if (s->fanout == RL_WEIGHT_FANOUT_CHAIN && p->input[0] && p->rank >= 0)
            chain[nc++] = p;
        else
            direct[nd++] = p;
    }
    qsort(chain, (size_t)nc, sizeof *chain, s_cmp_rank);
    if (nc)
        direct[nd++] = chain[0];
    char *eps = NULL;
    int *nexts = s_plan(chain, nc, &eps);
    if (!nexts) {
        free(chain);
        return rl_error_code();
    }
    int rc = RL_OK;
    for (int i = 0; i < s->n_peers && !rc; i++) {
        s_peer *p = &s->peers[i];
        if (!p->input[0])
            continue; /* it cannot forward, and ignores routes */
        int c = 0, first = -1;
        while (c < nc && chain[c] != p)
            c++;
        char *ep = eps; /* "" when it is not in the chain (star) */
        if (c < nc) {
            ep = eps + (size_t)c * S_ROUTE_MAX;
            first = nexts[(size_t)c * S_MAX_NEXT];
        }
        s_have h = {S_MAGIC_ROUTE, first >= 0 ? (uint32_t)chain[first]->rank + 1 : 0, version};
        if (c == nc)
            ep = "";
        if (zmq_send(s->sock, p->id, p->id_len, ZMQ_SNDMORE) < 0) {
            if (zmq_errno() == EHOSTUNREACH) { /* gone (a restarted rank's old process) */
                *gone = i;
                free(chain);
                free(nexts);
                free(eps);
                return 1;
            }
            rc = rl_error_wrap(s_zerr("weight channel route"), "to rank %d", p->rank);
        } else if (zmq_send(s->sock, &h, sizeof h, ZMQ_SNDMORE) < 0 ||
                   zmq_send(s->sock, ep, strlen(ep), 0) < 0)
            rc = rl_error_wrap(s_zerr("weight channel route"), "to rank %d", p->rank);
    }
    free(chain);
    free(nexts);
    free(eps);
    *n_direct = nd;
    return rc;
}

int rl_weight_send(rl_weight_sender *s, uint64_t version, const float *buf, int64_t count,
                   int n_receivers, int timeout_ms)
{
    if (s->broken)
        return rl_error_set(RL_ESTATE, "weight channel: an earlier send failed; make a new sender");
    if (version <= s->last_version)
        return rl_error_set(RL_EINVAL, "weight version %llu is not newer than %llu",
                            (unsigned long long)version, (unsigned long long)s->last_version);
    int64_t deadline = s_deadline(timeout_ms);
    uint64_t base = rl_abort_base();
    s_peer **direct = malloc(sizeof *direct * S_MAX_RECEIVERS);
    if (!direct)
        return rl_error_set(RL_ENOMEM, "weight sender: out of memory");
    int n_direct = 0, rc;
    for (;;) {
        /* what receivers said since the last send (a restarted rank's new
         * process takes its place), then enough of them */
        while ((rc = rl_net_wait(s->sock, ZMQ_POLLIN, s->n_peers < n_receivers ? deadline : 0, base,
                            "weight channel: waiting for receivers")) == RL_OK)
            if ((rc = s_read_have(s)))
                break;
        if (rc == RL_ETIMEOUT && s->n_peers < n_receivers)
            rc = rl_error_set(RL_ETIMEOUT, "weight channel: %d of %d receivers connected after %d ms",
                              s->n_peers, n_receivers, timeout_ms);
        else if (rc == RL_ETIMEOUT)
            rc = RL_OK;
        int gone = -1;
        if (!rc && (rc = s_route(s, version, direct, &n_direct, &gone)) == 1) {
            s->peers[gone] = s->peers[--s->n_peers]; /* wait for its new process */
            continue;
        }
        break;
    }
    if (rc) { /* nothing of the caller's buffer was queued: the sender stays usable */
        free(direct);
        return rc;
    }
    int64_t per = (int64_t)(s->bucket_bytes / sizeof(float));
    if (per < 1)
        per = 1;
    uint32_t n_buckets = (uint32_t)((count + per - 1) / per);
    if (n_buckets == 0)
        n_buckets = 1;
    for (uint32_t b = 0; b < n_buckets; b++) {
        int64_t off = (int64_t)b * per, len = count - off < per ? count - off : per;
        if (len < 0)
            len = 0;
        s_bucket h = {S_MAGIC_BUCKET, b, n_buckets, 0, version, (uint64_t)off, (uint64_t)len,
                      (uint64_t)count};
        for (int i = 0; i < n_direct; i++) {
            zmq_msg_t data;
            /* no free function: the caller's buffer outlives the send because
             * we return only after every receiver acknowledged, or after a
             * failure closed the socket (s_sender_break) */
            zmq_msg_init_data(&data, (void *)(buf + off), (size_t)len * sizeof(float), NULL, NULL);
            if (zmq_send(s->sock, direct[i]->id, direct[i]->id_len, ZMQ_SNDMORE) < 0 ||
                zmq_send(s->sock, &h, sizeof h, ZMQ_SNDMORE) < 0 ||
                zmq_msg_send(&data, s->sock, 0) < 0) {
                zmq_msg_close(&data);
                rc = rl_error_wrap(s_zerr("weight channel send"), "to rank %d", direct[i]->rank);
                free(direct);
                s_sender_break(s);
                return rc;
            }
        }
    }
    free(direct);
    while (s_count_at(s, version) < s->n_peers) {
        rc = rl_net_wait(s->sock, ZMQ_POLLIN, deadline, base, "weight channel: waiting for acknowledgements");
        if (rc == RL_ETIMEOUT)
            rc = rl_error_set(RL_ETIMEOUT,
                              "weight channel: %d of %d receivers acknowledged version %llu after %d ms",
                              s_count_at(s, version), s->n_peers, (unsigned long long)version,
                              timeout_ms);
        if (rc || (rc = s_read_have(s))) {
            char missing[160];
            s_missing(s, version, missing, sizeof missing);
            rc = rl_error_wrap(rc, "weight channel (%s) version %llu: no acknowledgement from %s",
                               s->fanout == RL_WEIGHT_FANOUT_CHAIN ? "chain" : "star",
                               (unsigned long long)version, missing);
            s_sender_break(s);
            return rc;
        }
    }
    s->last_version = version;
    s_note_version(version);
    return RL_OK;
}

void rl_weight_sender_free(rl_weight_sender *s)
{
    if (!s)
        return;
    rl_net_own_close(s->ctx, s->sock);
    free(s->peers);
    free(s);
}

struct rl_weight_receiver {
    void *ctx;
    void *sock;    /* DEALER to the sender */
    void *in;      /* PULL: buckets from the previous receiver of a chain (NULL: unranked) */
    void *out[S_MAX_NEXT]; /* PUSHes to the next receivers' inputs (n_out of them) */
    int n_out;
    int rank;
    char input[RL_NET_ENDPOINT_MAX], next[S_ROUTE_MAX]; /* next: the ROUTE's frame */
    int next_rank;
    uint64_t route_version; /* the version the current route is for */
    int64_t count;
    float *active, *staging;
    uint64_t active_version, staging_version;
    unsigned char *got; /* per bucket of the staging version */
    uint32_t n_buckets, n_got;
    uint64_t per; /* floats a bucket holds in the staging version (0: not known yet) */
    /* A head's forwards to its own host's ranks, held and sent in runs
     * (S_HOLD_BYTES, or the version complete here): each of them then
     * wakes once a run, not once a bucket. The next head's are never held. */
    unsigned char local_out[S_MAX_NEXT]; /* out[o] is on this receiver's host (held) */
    int hold;                            /* some outs are held (a head with more than one out) */
    zmq_msg_t held[S_HOLD_MAX];
    s_bucket held_h[S_HOLD_MAX];
    int n_held;
    size_t held_bytes;
};

/* The floats a bucket of the sender's layout holds (bucket b covers
 * [b·per, min((b+1)·per, count)), n = ceil(count / per) buckets), as this
 * bucket tells it; 0 when no such layout puts it where it says. */
static uint64_t s_bucket_per(const s_bucket *h, int64_t count)
{
    uint64_t n = h->n_buckets, per;
    if (n == 1)
        return h->offset == 0 && h->count == (uint64_t)count ? (count > 0 ? (uint64_t)count : 1) : 0;
    if (h->index + 1 < n) { /* a full bucket */
        per = h->count;
        if (per == 0 || h->offset % per || h->offset / per != h->index)
            return 0;
    } else { /* the last one ends the buffer */
        if (h->offset % (n - 1) || h->offset + h->count != (uint64_t)count)
            return 0;
        per = h->offset / (n - 1);
        if (per == 0 || h->count == 0 || h->count > per)
            return 0;
    }
    return ((uint64_t)count + per - 1) / per == n ? per : 0; /* n = ceil(count / per) */
}

static int s_send_have(rl_weight_receiver *r)
{
    s_have h = {S_MAGIC_HAVE, r->rank >= 0 ? (uint32_t)r->rank + 1 : 0, r->active_version};
    int more = r->input[0] ? ZMQ_SNDMORE : 0;
    if (zmq_send(r->sock, &h, sizeof h, more) < 0 ||
        (more && zmq_send(r->sock, r->input, strlen(r->input), 0) < 0))
        return s_zerr("weight receiver send");
    return RL_OK;
}

rl_weight_receiver *rl_weight_receiver_new_ranked(const char *endpoint, int64_t count, int rank,
                                                  const char *bind)
{
    rl_weight_receiver *r = calloc(1, sizeof *r);
    if (!r || count < 0 || (bind && (rank < 0 || rank >= S_MAX_RECEIVERS * 64))) {
        free(r);
        rl_error_set(r ? RL_EINVAL : RL_ENOMEM,
                     "weight receiver: bad count or rank (%lld, %d) or out of memory", (long long)count,
                     rank);
        return NULL;
    }
    r->rank = bind ? rank : -1;
    r->next_rank = -1;
    r->count = count;
    r->active = calloc((size_t)(count ? count : 1), sizeof(float));
    r->staging = calloc((size_t)(count ? count : 1), sizeof(float));
    if (!r->active || !r->staging) {
        rl_error_set(RL_ENOMEM, "weight receiver: %lld floats: out of memory", (long long)count);
        rl_weight_receiver_free(r);
        return NULL;
    }
    if (rl_net_own_socket(&r->ctx, &r->sock, ZMQ_DEALER, "weight receiver")) {
        rl_weight_receiver_free(r);
        return NULL;
    }
    int hwm = 0;
    zmq_setsockopt(r->sock, ZMQ_RCVHWM, &hwm, sizeof hwm);
    if (bind) {
        r->in = zmq_socket(r->ctx, ZMQ_PULL);
        int linger = 0;
        if (r->in) {
            zmq_setsockopt(r->in, ZMQ_LINGER, &linger, sizeof linger);
            zmq_setsockopt(r->in, ZMQ_RCVHWM, &hwm, sizeof hwm);
        }
        if (!r->in || rl_net_bind(r->ctx, r->in, bind, r->input, sizeof r->input)) {
            if (!r->in)
                s_zerr("weight receiver: chain input");
            rl_error_wrap(rl_error_code(), "weight receiver rank %d: chain input", rank);
            rl_weight_receiver_free(r);
            return NULL;
        }
    }
    if (rl_net_connect(r->sock, endpoint)) {
        rl_error_wrap(rl_error_code(), "weight receiver");
        rl_weight_receiver_free(r);
        return NULL;
    }
    if (s_send_have(r)) {
        rl_error_set(RL_EIO, "weight receiver cannot reach %s", endpoint);
        rl_weight_receiver_free(r);
        return NULL;
    }
    return r;
}

rl_weight_receiver *rl_weight_receiver_new(const char *endpoint, int64_t count)
{
    return rl_weight_receiver_new_ranked(endpoint, count, -1, NULL);
}

/* A ROUTE from the sender (header read into h): forward `version` to the
 * endpoint it names ("" : to nobody). Reconnects only when it changed. */
/* Forgets the held forwards (a route that changed, a version given up). */
static void s_drop_held(rl_weight_receiver *r)
{
    for (int i = 0; i < r->n_held; i++)
        zmq_msg_close(&r->held[i]);
    r->n_held = 0;
    r->held_bytes = 0;
}

/* Sends the held buckets to this host's ranks, in order. */
static int s_flush_held(rl_weight_receiver *r)
{
    int rc = RL_OK;
    for (int i = 0; i < r->n_held && !rc; i++)
        for (int o = 0; o < r->n_out && !rc; o++) {
            if (!r->local_out[o])
                continue;
            zmq_msg_t fwd;
            zmq_msg_init(&fwd);
            if (zmq_msg_copy(&fwd, &r->held[i]) ||
                zmq_send(r->out[o], &r->held_h[i], sizeof r->held_h[i], ZMQ_SNDMORE) < 0 ||
                zmq_msg_send(&fwd, r->out[o], 0) < 0) {
                zmq_msg_close(&fwd);
                rc = rl_error_wrap(s_zerr("weight channel forward"), "rank %d to %s (its forward %d "
                                   "of %d; the first is rank %d)", r->rank, r->next, o + 1,
                                   r->n_out, r->next_rank);
            }
        }
    s_drop_held(r);
    return rc;
}

static void s_close_outs(rl_weight_receiver *r)
{
    s_drop_held(r);
    for (int i = 0; i < r->n_out; i++)
        zmq_close(r->out[i]);
    r->n_out = 0;
    r->hold = 0;
    r->next[0] = 0;
}

static int s_take_route(rl_weight_receiver *r, const s_have *h)
{
    char ep[S_ROUTE_MAX] = "";
    int n = rl_net_more(r->sock) ? zmq_recv(r->sock, ep, sizeof ep - 1, 0) : 0;
    int more = rl_net_more(r->sock);
    rl_net_drain(r->sock);
    if (n < 0 || n >= (int)sizeof ep - 1 || more)
        return rl_error_set(RL_EPROTO, "weight channel: malformed route");
    ep[n] = 0;
    if ((int)strlen(ep) != n || (n > 0) != (h->rank1 > 0))
        return rl_error_set(RL_EPROTO, "weight channel: malformed route");
    if (strcmp(ep, r->next) != 0) {
        s_close_outs(r);
        char list[S_ROUTE_MAX], *save = NULL;
        memcpy(list, ep, (size_t)n + 1);
        for (char *tok = strtok_r(list, " ", &save); tok; tok = strtok_r(NULL, " ", &save)) {
            if (r->n_out == S_MAX_NEXT || strlen(tok) >= RL_NET_ENDPOINT_MAX) {
                s_close_outs(r);
                return rl_error_set(RL_EPROTO, "weight channel: route of more than %d endpoints "
                                               "or one too long", S_MAX_NEXT);
            }
            /* a receiver freed right after its version completed still
             * delivers what it forwarded: its context waits up to this long */
            int hwm = 0, linger = S_FORWARD_LINGER_MS;
            void *o = zmq_socket(r->ctx, ZMQ_PUSH);
            if (!o) {
                s_close_outs(r);
                return s_zerr("weight channel: forward socket");
            }
            r->out[r->n_out++] = o;
            zmq_setsockopt(o, ZMQ_LINGER, &linger, sizeof linger);
            zmq_setsockopt(o, ZMQ_SNDHWM, &hwm, sizeof hwm);
            if (rl_net_connect(o, tok)) {
                s_close_outs(r);
                return rl_error_wrap(rl_error_code(), "weight channel: rank %d forwarding to %s",
                                     r->rank, tok);
            }
        }
        snprintf(r->next, sizeof r->next, "%s", ep);
        /* a head (more than one forward) holds those to its own host */
        char mine[RL_NET_ENDPOINT_MAX], theirs[RL_NET_ENDPOINT_MAX];
        s_host(r->input, mine, sizeof mine);
        memcpy(list, ep, (size_t)n + 1);
        save = NULL;
        int o = 0;
        for (char *tok = strtok_r(list, " ", &save); tok && o < r->n_out;
             tok = strtok_r(NULL, " ", &save), o++) {
            s_host(tok, theirs, sizeof theirs);
            r->local_out[o] = r->n_out > 1 && mine[0] && strcmp(mine, theirs) == 0;
            r->hold |= r->local_out[o];
        }
    }
    r->next_rank = (int)h->rank1 - 1;
    r->route_version = h->version;
    return RL_OK;
}

/* One message from `sock` (the DEALER or the chain input): a ROUTE, or a
 * bucket, forwarded down the chain when it is new and routed. *done = 1
 * when it completed a version (switched and acknowledged). */
/* How long a chained receiver waits for the route of a bucket that came
 * before it, even when its caller does not wait. */
enum { S_ROUTE_WAIT_MS = 2000 };

static int s_take_message_flags(rl_weight_receiver *r, void *sock, int64_t deadline, uint64_t base,
                                int *done, int flags, int *got);

static int s_take_message(rl_weight_receiver *r, void *sock, int64_t deadline, uint64_t base, int *done)
{
    return s_take_message_flags(r, sock, deadline, base, done, 0, NULL);
}

/* s_take_message, or with ZMQ_DONTWAIT in flags: *got = 0 and RL_OK when
 * nothing was queued. */
static int s_take_message_flags(rl_weight_receiver *r, void *sock, int64_t deadline, uint64_t base,
                                int *done, int flags, int *got)
{
    union {
        s_bucket b;
        s_have h;
    } u;
    s_bucket h;
    int n = zmq_recv(sock, &u, sizeof u, flags);
    if (got)
        *got = n >= 0;
    if (n < 0 && (flags & ZMQ_DONTWAIT) && zmq_errno() == EAGAIN)
        return RL_OK;
    if (sock == r->sock && n == (int)sizeof u.h && u.h.magic == S_MAGIC_ROUTE) {
        s_have route = u.h;
        return s_take_route(r, &route);
    }
    memcpy(&h, &u.b, sizeof h);
    zmq_msg_t data;
    zmq_msg_init(&data);
    if (rl_net_more(sock))
        zmq_msg_recv(&data, sock, 0);
    int more = rl_net_more(sock);
    int bad = more || n != (int)sizeof h || h.magic != S_MAGIC_BUCKET;
    if (!bad && (int64_t)h.total != r->count) {
        zmq_msg_close(&data);
        return rl_error_set(RL_ESHAPE, "weight channel: sender has %llu floats, receiver expects %lld",
                            (unsigned long long)h.total, (long long)r->count);
    }
    /* every bucket holds at least one float (one empty bucket for an
     * empty buffer), so n_buckets <= max(count, 1) bounds what we allocate */
    if (!bad)
        bad = h.n_buckets == 0 || h.index >= h.n_buckets ||
              (uint64_t)h.n_buckets > (r->count > 1 ? (uint64_t)r->count : 1) ||
              h.offset > (uint64_t)r->count || h.count > (uint64_t)r->count - h.offset ||
              zmq_msg_size(&data) != h.count * sizeof(float);
    if (bad) {
        int well_formed = n == (int)sizeof h && h.magic == S_MAGIC_BUCKET;
        zmq_msg_close(&data);
        rl_net_drain(sock);
        if (well_formed)
            return rl_error_set(RL_EPROTO,
                                "weight channel: malformed bucket %u of %u (offset %llu, %llu "
                                "floats of %lld)",
                                h.index, h.n_buckets, (unsigned long long)h.offset,
                                (unsigned long long)h.count, (long long)r->count);
        return rl_error_set(RL_EPROTO, "weight channel: malformed bucket");
    }
    if (h.version <= r->active_version) { /* stale */
        zmq_msg_close(&data);
        return RL_OK;
    }
    /* a bucket down the chain: the sender sent this version's route to us
     * before it sent the head anything, so it is on its way; a caller that
     * does not wait (timeout 0: partial rollouts) waits for it up to
     * S_ROUTE_WAIT_MS all the same, so the bucket is not lost */
    int64_t rdl = deadline >= 0 && deadline < rl_net_now_ms() + S_ROUTE_WAIT_MS
                      ? rl_net_now_ms() + S_ROUTE_WAIT_MS
                      : deadline;
    while (sock == r->in && r->route_version < h.version) {
        int rc = rl_net_wait(r->sock, ZMQ_POLLIN, rdl, base, "weight channel: waiting for the route");
        if (rc == RL_ETIMEOUT)
            rc = rl_error_set(RL_ETIMEOUT, "weight channel: rank %d got version %llu from upstream "
                                           "but no route for it", r->rank,
                              (unsigned long long)h.version);
        int sub = 0;
        if (rc || (rc = s_take_message(r, r->sock, rdl, base, &sub))) {
            zmq_msg_close(&data);
            return rc;
        }
        if (sub)
            *done = 1; /* a direct bucket completed a version (not in a chain) */
    }
    if (h.version <= r->active_version) {
        zmq_msg_close(&data);
        return RL_OK;
    }
    if (h.version != r->staging_version) { /* a new version starts */
        s_drop_held(r); /* of a version given up */
        free(r->got);
        r->got = calloc(h.n_buckets, 1);
        if (!r->got) {
            zmq_msg_close(&data);
            r->n_buckets = r->n_got = 0;
            r->staging_version = 0;
            return rl_error_set(RL_ENOMEM, "weight channel: out of memory");
        }
        r->n_buckets = h.n_buckets;
        r->n_got = 0;
        r->per = 0;
        r->staging_version = h.version;
    }
    /* buckets of one version tile the buffer exactly as the sender cuts
     * it: no overlap, no gap, whatever arrives */
    uint64_t per = s_bucket_per(&h, r->count);
    if (h.n_buckets == r->n_buckets && (!per || (r->per && per != r->per))) {
        zmq_msg_close(&data);
        return rl_error_set(RL_EPROTO, "weight channel: bucket %u of %u of version %llu "
                                       "(offset %llu, %llu floats) does not tile a buffer of "
                                       "%lld floats%s", h.index, h.n_buckets,
                            (unsigned long long)h.version, (unsigned long long)h.offset,
                            (unsigned long long)h.count, (long long)r->count,
                            per ? " like the version's other buckets" : "");
    }
    if (h.n_buckets == r->n_buckets)
        r->per = per;
    if (h.n_buckets == r->n_buckets && !r->got[h.index]) {
        int routed = r->route_version == h.version;
        for (int o = 0; routed && o < r->n_out; o++) {
            if (r->hold && r->local_out[o])
                continue; /* held below */
            zmq_msg_t fwd; /* forward first: the pipeline (the frame is shared, not copied) */
            zmq_msg_init(&fwd);
            if (zmq_msg_copy(&fwd, &data) || zmq_send(r->out[o], &h, sizeof h, ZMQ_SNDMORE) < 0 ||
                zmq_msg_send(&fwd, r->out[o], 0) < 0) {
                zmq_msg_close(&fwd);
                zmq_msg_close(&data);
                return rl_error_wrap(s_zerr("weight channel forward"), "rank %d to %s (its "
                                     "forward %d of %d; the first is rank %d)", r->rank,
                                     r->next, o + 1, r->n_out, r->next_rank);
            }
        }
        if (routed && r->hold) { /* this host's ranks get it in a run */
            zmq_msg_init(&r->held[r->n_held]);
            if (zmq_msg_copy(&r->held[r->n_held], &data)) {
                zmq_msg_close(&r->held[r->n_held]);
                zmq_msg_close(&data);
                return s_zerr("weight channel: holding a forward");
            }
            r->held_h[r->n_held++] = h;
            r->held_bytes += zmq_msg_size(&data);
            int rc = r->held_bytes >= S_HOLD_BYTES || r->n_held == S_HOLD_MAX ||
                             r->n_got + 1 == r->n_buckets
                         ? s_flush_held(r)
                         : RL_OK;
            if (rc) {
                zmq_msg_close(&data);
                return rc;
            }
        }
        memcpy(r->staging + h.offset, zmq_msg_data(&data), h.count * sizeof(float));
        r->got[h.index] = 1;
        r->n_got++;
    }
    zmq_msg_close(&data);
    if (r->n_got == r->n_buckets && r->n_buckets) { /* complete: switch atomically */
        float *t = r->active;
        r->active = r->staging;
        r->staging = t;
        r->active_version = r->staging_version;
        s_note_version(r->active_version);
        r->staging_version = 0;
        r->n_got = r->n_buckets = 0;
        *done = 1;
        return s_send_have(r);
    }
    return RL_OK;
}

int rl_weight_recv_poll(rl_weight_receiver *r, int timeout_ms)
{
    int64_t deadline = s_deadline(timeout_ms);
    uint64_t base = rl_abort_base();
    for (;;) {
        int rc = rl_abort_check(base, "weight channel: receiving");
        if (rc)
            return rc;
        int64_t left = deadline < 0 ? RL_ABORT_POLL_MS : deadline - rl_net_now_ms();
        zmq_pollitem_t it[2] = {{r->sock, 0, ZMQ_POLLIN, 0}, {r->in, 0, ZMQ_POLLIN, 0}};
        int n = zmq_poll(it, r->in ? 2 : 1,
                         left <= 0 ? 0 : left < RL_ABORT_POLL_MS ? (long)left : RL_ABORT_POLL_MS);
        if (n < 0 && zmq_errno() != EINTR)
            return s_zerr("zmq_poll");
        if (n <= 0) {
            if (deadline >= 0 && rl_net_now_ms() >= deadline)
                return rl_error_set(RL_ETIMEOUT, "weight channel: no complete version in %d ms "
                                                 "(%u of %u buckets of version %llu)",
                                    timeout_ms, r->n_got, r->n_buckets,
                                    (unsigned long long)r->staging_version);
            continue;
        }
        int done = 0;
        for (int i = 0; i < (r->in ? 2 : 1) && !done; i++) {
            if (!(it[i].revents & ZMQ_POLLIN))
                continue;
            if ((rc = s_take_message(r, it[i].socket, deadline, base, &done)))
                return rc;
            /* what else that socket has queued, without a poll and a
             * wake-up each: buckets queue up behind a busy core, and the
             * poll of both sockets costs more than this one receive */
            for (int got = 1; got && !done;)
                if ((rc = rl_abort_check(base, "weight channel: receiving")) ||
                    (rc = s_take_message_flags(r, it[i].socket, deadline, base, &done, ZMQ_DONTWAIT,
                                               &got)))
                    return rc;
        }
        if (done)
            return RL_OK;
    }
}

const float *rl_weight_recv_active(const rl_weight_receiver *r, uint64_t *version)
{
    if (version)
        *version = r->active_version;
    return r->active;
}

void rl_weight_receiver_free(rl_weight_receiver *r)
{
    if (!r)
        return;
    s_close_outs(r);
    if (r->in)
        zmq_close(r->in);
    rl_net_own_close(r->ctx, r->sock);
    free(r->active);
    free(r->staging);
    free(r->got);
    free(r);
}

void rl_weight_channel_note_version(uint64_t v) { s_note_version(v); }
