/* channel_ipc.c — the weight channel's same-device transport
 * (see rlrt/runtime/channel_ipc.h).
 *
 * receiver -> sender: HAVE {magic "RLIH", kind, version}            16 bytes
 *                     on connecting and after a version became active
 *                     ACK  {magic "RLIA", index, version}           16 bytes
 *                     after bucket `index` of `version` was copied
 * sender -> receiver: BUCKET {magic "RLIB", kind, index, n_buckets, version,
 *                     offset, bytes, per, total, block, handle[64]}  120 bytes
 *                     (bytes: offset, bytes, per, total, block)
 * The last bucket's acknowledgement is the HAVE of its version.
 */
#include "rlrt/runtime/channel_ipc.h"
#include "common/core/util.h"
#include "common/runtime/abort.h"
#include "common/runtime/ipc_mem.h"
#include "common/runtime/net.h"
#include "common/runtime/weight_version.h"
#include "rlrt/error.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zmq.h>

#define S_MAGIC_HAVE 0x48494c52u   /* "RLIH" */
#define S_MAGIC_ACK 0x41494c52u    /* "RLIA" */
#define S_MAGIC_BUCKET 0x42494c52u /* "RLIB" */
#define S_MAX_RECEIVERS 64
#define S_DEFAULT_BUCKET ((size_t)1 << 30)

typedef struct {
    uint32_t magic, x; /* HAVE: kind; ACK: index */
    uint64_t version;
} s_small;

typedef struct {
    uint32_t magic, kind, index, n_buckets;
    uint64_t version, offset, bytes, per, total, block;
    unsigned char handle[RL_IPC_HANDLE_BYTES];
} s_bucket;

static double s_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int s_zerr(const char *what)
{
    return rl_error_set(RL_EIO, "%s: %s", what, zmq_strerror(zmq_errno()));
}

/* rl_net_own_socket with no high-water marks (a version's buckets all queue) */
static int s_open_sock(void **ctx, void **sock, int type, const char *who)
{
    int rc = rl_net_own_socket(ctx, sock, type, who), hwm = 0;
    if (!rc) {
        zmq_setsockopt(*sock, ZMQ_SNDHWM, &hwm, sizeof hwm);
        zmq_setsockopt(*sock, ZMQ_RCVHWM, &hwm, sizeof hwm);
    }
    return rc;
}

/* ---- sender ------------------------------------------------------------------------- */

typedef struct {
    unsigned char id[256];
    size_t id_len;
    uint64_t version;   /* active on the receiver */
    uint32_t sent, acked; /* buckets of the version being sent */
} s_peer;

struct rl_weight_ipc_sender {
    void *ctx, *sock;
    char endpoint[RL_NET_ENDPOINT_MAX];
    const rl_ipc_mem *mem;
    size_t bucket_bytes;
    int window;
    s_peer peers[S_MAX_RECEIVERS];
    int n_peers;
    uint64_t last_version;
    unsigned char handle[RL_IPC_HANDLE_BYTES];
    rl_weight_ipc_stats stats;
};

rl_weight_ipc_sender *rl_weight_ipc_sender_new(const char *bind, rl_weight_ipc_kind kind,
                                               size_t bucket_bytes, int window)
{
    const rl_ipc_mem *mem = rl_ipc_mem_get(kind);
    if (!mem)
        return NULL;
    if (window < 0) {
        rl_error_set(RL_EINVAL, "weight ipc sender: window %d is negative", window);
        return NULL;
    }
    rl_weight_ipc_sender *s = rl_zalloc(sizeof *s, "weight ipc sender");
    if (!s)
        return NULL;
    s->mem = mem;
    s->bucket_bytes = (bucket_bytes ? bucket_bytes : S_DEFAULT_BUCKET) / sizeof(float) * sizeof(float);
    if (s->bucket_bytes == 0)
        s->bucket_bytes = sizeof(float);
    s->window = window;
    int mandatory = 1;
    if (s_open_sock(&s->ctx, &s->sock, ZMQ_ROUTER, "weight ipc sender") ||
        zmq_setsockopt(s->sock, ZMQ_ROUTER_MANDATORY, &mandatory, sizeof mandatory) ||
        rl_net_bind(s->ctx, s->sock, bind, s->endpoint, sizeof s->endpoint)) {
        rl_error_wrap(rl_error_code() ? rl_error_code() : RL_EIO, "weight ipc sender");
        rl_weight_ipc_sender_free(s);
        return NULL;
    }
    return s;
}

const char *rl_weight_ipc_sender_endpoint(const rl_weight_ipc_sender *s) { return s->endpoint; }

void rl_weight_ipc_sender_stats(const rl_weight_ipc_sender *s, rl_weight_ipc_stats *out)
{
    *out = s->stats;
    out->transport = rl_weight_ipc_kind_name(s->mem->kind);
}

/* Reads one message from a receiver: a HAVE (registers it) or an ACK of
 * `version`'s next bucket. */
static int s_read(rl_weight_ipc_sender *s, uint64_t version, uint32_t n_buckets)
{
    unsigned char id[256];
    int idn = zmq_recv(s->sock, id, sizeof id, 0);
    if (idn < 0)
        return s_zerr("weight ipc sender: receive");
    s_small m;
    int n = rl_net_more(s->sock) ? zmq_recv(s->sock, &m, sizeof m, 0) : -1;
    int extra = rl_net_drain(s->sock);
    if (idn <= 0 || idn > (int)sizeof id || n != (int)sizeof m || extra ||
        (m.magic != S_MAGIC_HAVE && m.magic != S_MAGIC_ACK))
        return rl_error_set(RL_EPROTO, "weight ipc sender: malformed message (%d bytes) from a receiver", n);
    s_peer *p = NULL;
    for (int i = 0; i < s->n_peers && !p; i++)
        if (s->peers[i].id_len == (size_t)idn && memcmp(s->peers[i].id, id, (size_t)idn) == 0)
            p = &s->peers[i];
    if (m.magic == S_MAGIC_HAVE) {
        if (m.x != (uint32_t)s->mem->kind)
            return rl_error_set(RL_EPROTO, "weight ipc: a receiver uses %s memory, the sender %s",
                                rl_weight_ipc_kind_name((rl_weight_ipc_kind)m.x), s->mem->name);
        if (!p) {
            if (s->n_peers == S_MAX_RECEIVERS)
                return rl_error_set(RL_ERANGE, "weight ipc sender: more than %d receivers", S_MAX_RECEIVERS);
            p = &s->peers[s->n_peers++];
            memset(p, 0, sizeof *p);
            memcpy(p->id, id, (size_t)idn);
            p->id_len = (size_t)idn;
        }
        /* (a version newer than the last completed send: one whose send
         * failed after this receiver had it all) */
        p->version = m.version;
        return RL_OK;
    }
    if (p && m.version != version)
        return RL_OK; /* late, of a send that failed: nobody waits for it */
    if (!p || m.x != p->acked || p->acked >= p->sent || m.x >= n_buckets)
        return rl_error_set(RL_EPROTO, "weight ipc: unexpected acknowledgement of bucket %u of version "
                            "%llu (sending version %llu)", m.x, (unsigned long long)m.version,
                            (unsigned long long)version);
    p->acked++;
    return RL_OK;
}

/* "receiver 0 (3 of 8 buckets), ..." of those that have not got `version`. */
static void s_missing(const rl_weight_ipc_sender *s, uint64_t version, uint32_t n_buckets, char *out,
                      size_t size)
{
    size_t at = 0;
    out[0] = 0;
    for (int i = 0; i < s->n_peers && at < size; i++)
        if (s->peers[i].version < version)
            at += (size_t)snprintf(out + at, size - at, "%sreceiver %d (%u of %u buckets copied)",
                                   at ? ", " : "", i, s->peers[i].acked, n_buckets);
}

int rl_weight_ipc_send(rl_weight_ipc_sender *s, uint64_t version, const float *buf, int64_t count,
                       int n_receivers, int timeout_ms)
{
    if (version <= s->last_version)
        return rl_error_set(RL_EINVAL, "weight ipc: version %llu is not newer than %llu",
                            (unsigned long long)version, (unsigned long long)s->last_version);
    if (count < 0 || !buf || n_receivers < 1 || n_receivers > S_MAX_RECEIVERS)
        return rl_error_set(RL_EINVAL, "weight ipc send: bad buffer, count %lld or receivers %d "
                            "(1..%d)", (long long)count, n_receivers, S_MAX_RECEIVERS);
    int64_t deadline = timeout_ms < 0 ? -1 : rl_net_now_ms() + timeout_ms;
    uint64_t base = rl_abort_base();
    int rc = s->mem->sync(); /* the caller's writes land before anyone reads */
    if (rc)
        return rl_error_wrap(rc, "weight ipc send");
    /* exported on every send (the receiver maps a handle once): the
     * caller may have freed a block and got another at the same address */
    if ((rc = s->mem->export_(buf, s->handle)))
        return rl_error_wrap(rc, "weight ipc send");
    /* what receivers said since the last send, then enough of them */
    for (;;) {
        rc = rl_net_wait(s->sock, ZMQ_POLLIN, s->n_peers < n_receivers ? deadline : 0, base,
                       "weight ipc: waiting for receivers");
        if (rc == RL_ETIMEOUT && s->n_peers >= n_receivers)
            break;
        if (rc == RL_ETIMEOUT)
            return rl_error_set(RL_ETIMEOUT, "weight ipc: %d of %d receivers connected after %d ms",
                                s->n_peers, n_receivers, timeout_ms);
        if (rc || (rc = s_read(s, version, 0)))
            return rc;
    }
    double t0 = s_now_s();
    uint64_t total = (uint64_t)count * sizeof(float), per = s->bucket_bytes;
    uint32_t n_buckets = total ? (uint32_t)((total + per - 1) / per) : 1;
    if (total / per >= UINT32_MAX)
        return rl_error_set(RL_ERANGE, "weight ipc: %llu bytes in %llu-byte buckets: too many buckets",
                            (unsigned long long)total, (unsigned long long)per);
    for (int i = 0; i < s->n_peers; i++)
        s->peers[i].sent = s->peers[i].acked = 0;
    s_bucket h = {.magic = S_MAGIC_BUCKET, .kind = (uint32_t)s->mem->kind, .n_buckets = n_buckets,
                  .version = version, .per = per, .total = total, .block = total};
    memcpy(h.handle, s->handle, sizeof h.handle);
    for (;;) {
        int done = s->n_peers >= n_receivers;
        for (int i = 0; i < s->n_peers; i++) {
            s_peer *p = &s->peers[i];
            if (p->version >= version)
                continue;
            done = 0;
            while (p->sent < n_buckets && (!s->window || p->sent - p->acked < (uint32_t)s->window)) {
                h.index = p->sent;
                h.offset = (uint64_t)p->sent * per;
                h.bytes = total - h.offset < per ? total - h.offset : per;
                if (zmq_send(s->sock, p->id, p->id_len, ZMQ_SNDMORE) < 0) {
                    if (zmq_errno() != EHOSTUNREACH)
                        return rl_error_wrap(s_zerr("weight ipc send"), "version %llu to receiver %d",
                                             (unsigned long long)version, i);
                    /* gone (a restarted rank's old process): its new one
                     * says HAVE, and we wait for enough receivers below */
                    s->peers[i--] = s->peers[--s->n_peers];
                    break;
                }
                if (zmq_send(s->sock, &h, sizeof h, 0) < 0)
                    return rl_error_wrap(s_zerr("weight ipc send"), "version %llu to receiver %d",
                                         (unsigned long long)version, i);
                p->sent++;
            }
        }
        if (s->n_peers < n_receivers)
            done = 0;
        if (done)
            break;
        rc = rl_net_wait(s->sock, ZMQ_POLLIN, deadline, base, "weight ipc: waiting for acknowledgements");
        if (rc == RL_ETIMEOUT)
            rc = rl_error_set(RL_ETIMEOUT, "weight ipc: no acknowledgement within %d ms (%d of %d receivers "
                              "connected)", timeout_ms, s->n_peers, n_receivers);
        if (rc || (rc = s_read(s, version, n_buckets))) {
            char missing[256];
            s_missing(s, version, n_buckets, missing, sizeof missing);
            return rl_error_wrap(rc, "weight ipc (%s) version %llu: not acknowledged by %s",
                                 s->mem->name, (unsigned long long)version, missing);
        }
    }
    double dt = s_now_s() - t0;
    s->last_version = version;
    rl_weight_channel_note_version(version);
    s->stats = (rl_weight_ipc_stats){.version = version, .receivers = s->n_peers, .bytes = (double)total,
                                     .seconds = dt, .gbps = dt > 0 ? (double)total / dt / 1e9 : 0,
                                     .transport = s->mem->name};
    return RL_OK;
}

void rl_weight_ipc_sender_free(rl_weight_ipc_sender *s)
{
    if (!s)
        return;
    rl_net_own_close(s->ctx, s->sock);
    free(s);
}

/* ---- receiver ------------------------------------------------------------------------ */

struct rl_weight_ipc_receiver {
    void *ctx, *sock;
    const rl_ipc_mem *mem;
    int64_t count;
    float *active, *staging;
    uint64_t active_version, staging_version;
    uint32_t n_buckets, n_got;
    uint64_t per;
    /* the sender's block, mapped */
    unsigned char handle[RL_IPC_HANDLE_BYTES];
    void *mapped;
    size_t mapped_bytes;
    double copy_s, last_copy_s; /* the bucket copies of the version being received, of the last one */
};

static int s_send_small(rl_weight_ipc_receiver *r, uint32_t magic, uint32_t x, uint64_t version)
{
    s_small m = {magic, x, version};
    return zmq_send(r->sock, &m, sizeof m, 0) < 0 ? s_zerr("weight ipc receiver: send") : RL_OK;
}

rl_weight_ipc_receiver *rl_weight_ipc_receiver_new(const char *endpoint, rl_weight_ipc_kind kind,
                                                   int64_t count)
{
    const rl_ipc_mem *mem = rl_ipc_mem_get(kind);
    if (!mem)
        return NULL;
    if (count < 0) {
        rl_error_set(RL_EINVAL, "weight ipc receiver: count %lld is negative", (long long)count);
        return NULL;
    }
    if (!mem->available())
        return NULL;
    rl_weight_ipc_receiver *r = rl_zalloc(sizeof *r, "weight ipc receiver");
    if (!r)
        return NULL;
    r->mem = mem;
    r->count = count;
    size_t bytes = (size_t)count * sizeof(float);
    r->active = mem->alloc(bytes);
    r->staging = r->active ? mem->alloc(bytes) : NULL;
    float *zero = r->staging ? calloc(count ? (size_t)count : 1, sizeof(float)) : NULL;
    if (!zero || mem->copy(r->active, zero, bytes, RL_WEIGHT_IPC_H2D) ||
        s_open_sock(&r->ctx, &r->sock, ZMQ_DEALER, "weight ipc receiver") ||
        rl_net_connect(r->sock, endpoint) || s_send_small(r, S_MAGIC_HAVE, (uint32_t)kind, 0)) {
        free(zero);
        rl_error_wrap(rl_error_code() ? rl_error_code() : RL_ENOMEM, "weight ipc receiver (%s, %lld floats)",
                      mem->name, (long long)count);
        rl_weight_ipc_receiver_free(r);
        return NULL;
    }
    free(zero);
    return r;
}

/* Maps the sender's block of handle h (once per handle). */
static int s_map(rl_weight_ipc_receiver *r, const s_bucket *h)
{
    if (r->mapped && memcmp(r->handle, h->handle, sizeof r->handle) == 0 && r->mapped_bytes >= h->block)
        return RL_OK;
    if (r->mapped)
        r->mem->close(r->mapped, r->mapped_bytes);
    r->mapped = NULL;
    void *p = r->mem->open(h->handle, (size_t)h->block);
    if (!p)
        return rl_error_wrap(rl_error_code(), "weight ipc: version %llu", (unsigned long long)h->version);
    r->mapped = p;
    r->mapped_bytes = (size_t)h->block;
    memcpy(r->handle, h->handle, sizeof r->handle);
    return RL_OK;
}

/* One BUCKET: checked, copied into staging, acknowledged; *done when it
 * completed a version (switched). */
static int s_take(rl_weight_ipc_receiver *r, int *done)
{
    s_bucket h;
    int n = zmq_recv(r->sock, &h, sizeof h, 0);
    int extra = rl_net_drain(r->sock);
    if (n < 0)
        return s_zerr("weight ipc receiver: receive");
    if (n != (int)sizeof h || extra || h.magic != S_MAGIC_BUCKET)
        return rl_error_set(RL_EPROTO, "weight ipc: malformed message (%d bytes, want %zu)", n, sizeof h);
    if (h.kind != (uint32_t)r->mem->kind)
        return rl_error_set(RL_EPROTO, "weight ipc: the sender uses %s memory, this receiver %s",
                            rl_weight_ipc_kind_name((rl_weight_ipc_kind)h.kind), r->mem->name);
    uint64_t total = (uint64_t)r->count * sizeof(float);
    if (h.total != total)
        return rl_error_set(RL_ESHAPE, "weight ipc: the sender has %llu bytes, this receiver expects %llu",
                            (unsigned long long)h.total, (unsigned long long)total);
    /* the tiling: bucket index of per bytes each, the last one ends the buffer */
    uint64_t want_n = total ? (total + (h.per ? h.per : 1) - 1) / (h.per ? h.per : 1) : 1;
    int bad = h.per == 0 || h.per % sizeof(float) || h.n_buckets != want_n || h.index >= h.n_buckets ||
              h.offset != (uint64_t)h.index * h.per ||
              h.bytes != (total - h.offset < h.per ? total - h.offset : h.per) || h.block < total;
    if (bad)
        return rl_error_set(RL_EPROTO, "weight ipc: bucket %u of %u of version %llu (offset %llu, %llu "
                            "bytes, per %llu, block %llu) does not tile a buffer of %llu bytes",
                            h.index, h.n_buckets, (unsigned long long)h.version,
                            (unsigned long long)h.offset, (unsigned long long)h.bytes,
                            (unsigned long long)h.per, (unsigned long long)h.block,
                            (unsigned long long)total);
    if (h.version <= r->active_version)
        return RL_OK; /* stale: a version this receiver has */
    if (h.version != r->staging_version || h.index == 0) {
        /* a new version (or the same one from a new sender after the last
         * one died mid-version): its buckets come in order from bucket 0 */
        if (h.index != 0)
            return rl_error_set(RL_EPROTO, "weight ipc: version %llu starts at bucket %u, not 0",
                                (unsigned long long)h.version, h.index);
        r->staging_version = h.version;
        r->n_buckets = h.n_buckets;
        r->n_got = 0;
        r->per = h.per;
        r->copy_s = 0;
    } else if (h.index != r->n_got || h.n_buckets != r->n_buckets || h.per != r->per) {
        return rl_error_set(RL_EPROTO, "weight ipc: version %llu: bucket %u of %u (per %llu) after %u "
                            "of %u (per %llu)", (unsigned long long)h.version, h.index, h.n_buckets,
                            (unsigned long long)h.per, r->n_got, r->n_buckets,
                            (unsigned long long)r->per);
    }
    int rc = s_map(r, &h);
    double t0 = s_now_s();
    if (!rc && h.bytes)
        rc = r->mem->copy((char *)r->staging + h.offset, (const char *)r->mapped + h.offset,
                          (size_t)h.bytes, RL_WEIGHT_IPC_D2D);
    r->copy_s += s_now_s() - t0;
    if (rc)
        return rl_error_wrap(rc, "weight ipc: bucket %u of version %llu", h.index,
                             (unsigned long long)h.version);
    r->n_got++;
    if (r->n_got < r->n_buckets)
        return s_send_small(r, S_MAGIC_ACK, h.index, h.version);
    float *t = r->active; /* complete: switch */
    r->active = r->staging;
    r->staging = t;
    r->active_version = r->staging_version;
    r->last_copy_s = r->copy_s;
    rl_weight_channel_note_version(r->active_version);
    r->staging_version = 0;
    r->n_got = r->n_buckets = 0;
    *done = 1;
    return s_send_small(r, S_MAGIC_HAVE, (uint32_t)r->mem->kind, r->active_version);
}

int rl_weight_ipc_recv_poll(rl_weight_ipc_receiver *r, int timeout_ms)
{
    int64_t deadline = timeout_ms < 0 ? -1 : rl_net_now_ms() + timeout_ms;
    uint64_t base = rl_abort_base();
    for (;;) {
        int rc = rl_net_wait(r->sock, ZMQ_POLLIN, deadline, base, "weight ipc: receiving");
        if (rc == RL_ETIMEOUT)
            return rl_error_set(RL_ETIMEOUT, "weight ipc: no complete version in %d ms (%u of %u "
                                "buckets of version %llu)", timeout_ms, r->n_got, r->n_buckets,
                                (unsigned long long)r->staging_version);
        int done = 0;
        if (rc || (rc = s_take(r, &done)))
            return rc;
        if (done)
            return RL_OK;
    }
}

int rl_weight_ipc_recv_step(rl_weight_ipc_receiver *r, int timeout_ms, int *complete)
{
    *complete = 0;
    int rc = rl_net_wait(r->sock, ZMQ_POLLIN, timeout_ms < 0 ? -1 : rl_net_now_ms() + timeout_ms, rl_abort_base(),
                       "weight ipc: receiving");
    if (rc == RL_ETIMEOUT)
        return rl_error_set(RL_ETIMEOUT, "weight ipc: no bucket in %d ms (%u of %u buckets of version %llu)",
                            timeout_ms, r->n_got, r->n_buckets, (unsigned long long)r->staging_version);
    return rc ? rc : s_take(r, complete);
}

const float *rl_weight_ipc_recv_active(const rl_weight_ipc_receiver *r, uint64_t *version)
{
    if (version)
        *version = r->active_version;
    return r->active;
}

void rl_weight_ipc_recv_progress(const rl_weight_ipc_receiver *r, uint32_t *got, uint32_t *of)
{
    *got = r->n_got;
    *of = r->n_buckets;
}

void rl_weight_ipc_receiver_free(rl_weight_ipc_receiver *r)
{
    if (!r)
        return;
    rl_net_own_close(r->ctx, r->sock);
    if (r->mapped)
        r->mem->close(r->mapped, r->mapped_bytes);
    r->mem->free_(r->active);
    r->mem->free_(r->staging);
    free(r);
}

double rl_weight_ipc_recv_copy_seconds(const rl_weight_ipc_receiver *r) { return r->last_copy_s; }
