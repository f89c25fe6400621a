/* common/runtime/weight_bcast.c — rlrt/runtime/weight_bcast.h: a weight
 * version over a communicator's broadcast, bucketed, version-tagged, whole
 * or absent. Device memory (an NCCL comm) comes from the same-device
 * transport's allocator (rlrt/runtime/channel_ipc.h, RL_WEIGHT_IPC_CUDA). */
#include "rlrt/runtime/weight_bcast.h"

#include "rlrt/error.h"
#include "rlrt/runtime/channel_ipc.h"

#include <stdlib.h>
#include <string.h>

#define S_MAGIC 7340033.0f /* exact in float */
#define S_PART (1u << 24)  /* floats hold integers below 2^24 exactly */
#define S_HDR 8

struct rl_weight_bcast {
    rl_comm *c;
    int64_t count, per; /* floats a version; a bucket (the sender's) */
    int device;         /* the comm is NCCL: buffers on the device */
    float *hdr;         /* S_HDR floats of the comm's kind */
    float *staging, *active;
    uint64_t version;
    int depth;            /* the sender's buckets in flight at most */
    int64_t last_buckets; /* the last version's */
    int last_inflight;
};

static void *s_alloc(int device, size_t bytes)
{
    if (device)
        return rl_weight_ipc_alloc(RL_WEIGHT_IPC_CUDA, bytes);
    void *p = calloc(1, bytes ? bytes : 1);
    if (!p)
        rl_error_set(RL_ENOMEM, "weight broadcast: out of memory");
    return p;
}

static void s_free(int device, void *p)
{
    if (p && device)
        rl_weight_ipc_free(RL_WEIGHT_IPC_CUDA, p);
    else
        free(p);
}

rl_weight_bcast *rl_weight_bcast_new(rl_comm *c, int64_t count, size_t bucket_bytes)
{
    if (!c || count < 1 || count >= (int64_t)1 << 48) {
        rl_error_set(RL_EINVAL, "weight broadcast: needs a communicator and a count in [1, 2^48), got %lld",
                     (long long)count);
        return NULL;
    }
    rl_weight_bcast *b = calloc(1, sizeof *b);
    if (!b) {
        rl_error_set(RL_ENOMEM, "weight broadcast: out of memory");
        return NULL;
    }
    b->c = c;
    b->count = count;
    b->per = (int64_t)((bucket_bytes ? bucket_bytes : (size_t)256 << 20) / sizeof(float));
    b->per = b->per < 1 ? 1 : b->per > count ? count : b->per;
    b->device = strcmp(rl_comm_transport(c), "nccl") == 0;
    b->depth = 2;
    b->hdr = s_alloc(b->device, sizeof(float) * S_HDR);
    if (b->hdr && rl_comm_rank(c) != 0) {
        b->staging = s_alloc(b->device, sizeof(float) * (size_t)count);
        b->active = b->staging ? s_alloc(b->device, sizeof(float) * (size_t)count) : NULL;
    }
    if (!b->hdr || (rl_comm_rank(c) != 0 && !b->active)) {
        int code = rl_error_code();
        rl_weight_bcast_free(b);
        rl_error_wrap(code, "weight broadcast of %lld floats", (long long)count);
        return NULL;
    }
    return b;
}

/* The header between host and the comm's memory. */
static int s_hdr_io(rl_weight_bcast *b, float *host, int to_comm)
{
    size_t bytes = sizeof(float) * S_HDR;
    if (!b->device) {
        if (to_comm)
            memcpy(b->hdr, host, bytes);
        else
            memcpy(host, b->hdr, bytes);
        return RL_OK;
    }
    return to_comm ? rl_weight_ipc_copy(RL_WEIGHT_IPC_CUDA, b->hdr, host, bytes, RL_WEIGHT_IPC_H2D)
                   : rl_weight_ipc_copy(RL_WEIGHT_IPC_CUDA, host, b->hdr, bytes, RL_WEIGHT_IPC_D2H);
}

static uint64_t s_u48(float lo, float hi)
{
    return (uint64_t)lo + (uint64_t)hi * S_PART;
}

int rl_weight_bcast_send(rl_weight_bcast *b, uint64_t version, const float *buf)
{
    if (rl_comm_rank(b->c) != 0)
        return rl_error_set(RL_ESTATE, "weight broadcast: only rank 0 sends (this is rank %d)", rl_comm_rank(b->c));
    if (!buf || version <= b->version || version >= (uint64_t)1 << 48)
        return rl_error_set(RL_EINVAL, "weight broadcast: version %llu after %llu (must grow, < 2^48), buffer %p",
                            (unsigned long long)version, (unsigned long long)b->version, (const void *)buf);
    float h[S_HDR] = {S_MAGIC, (float)(version % S_PART), (float)(version / S_PART),
                      (float)((uint64_t)b->count % S_PART), (float)((uint64_t)b->count / S_PART),
                      (float)((uint64_t)b->per % S_PART), (float)((uint64_t)b->per / S_PART), 0};
    int rc = s_hdr_io(b, h, 1);
    if (!rc)
        rc = rl_comm_broadcast(b->c, b->hdr, b->hdr, S_HDR, 0);
    /* bucket k+1 starts while bucket k (and up to depth-1 before it) is in
     * flight: ZeroMQ still sending it (ring), NCCL broadcasting it while the
     * next one is packed on the copy stream (nccl) */
    int64_t nb = 0;
    int most = 0;
    for (int64_t off = 0; !rc && off < b->count; off += b->per, nb++) {
        int64_t n = b->count - off < b->per ? b->count - off : b->per;
        rc = rl_comm_broadcast_start(b->c, buf + off, (float *)buf + off, n, 0); /* in place at the root */
        int f = rc ? 0 : rl_comm_inflight(b->c);
        most = f > most ? f : most;
        if (!rc)
            rc = rl_comm_wait(b->c, b->depth - 1);
    }
    if (!rc)
        rc = rl_comm_wait(b->c, 0);
    b->last_buckets = nb;
    b->last_inflight = most;
    if (rc)
        return rl_error_wrap(rc, "weight broadcast: sending version %llu", (unsigned long long)version);
    b->version = version;
    return RL_OK;
}

int rl_weight_bcast_recv(rl_weight_bcast *b)
{
    int rank = rl_comm_rank(b->c);
    if (rank == 0)
        return rl_error_set(RL_ESTATE, "weight broadcast: rank 0 sends, it does not receive");
    float h[S_HDR];
    int rc = rl_comm_broadcast(b->c, b->hdr, b->hdr, S_HDR, 0);
    if (!rc)
        rc = s_hdr_io(b, h, 0);
    if (rc)
        return rl_error_wrap(rc, "weight broadcast: rank %d waiting for a version's header", rank);
    uint64_t version = s_u48(h[1], h[2]), count = s_u48(h[3], h[4]), per = s_u48(h[5], h[6]);
    if (h[0] != S_MAGIC || count != (uint64_t)b->count || version <= b->version || per < 1 || per > count)
        return rl_error_set(RL_EPROTO, "weight broadcast: rank %d refused a header (magic %s, version %llu after "
                            "%llu, %llu floats for its %lld, bucket %llu)", rank, h[0] == S_MAGIC ? "ok" : "wrong",
                            (unsigned long long)version, (unsigned long long)b->version, (unsigned long long)count,
                            (long long)b->count, (unsigned long long)per);
    /* every bucket enqueued as it comes (NCCL: up to RL_COMM_MAX_INFLIGHT
     * on the stream; the ring receives each before its start returns), the
     * swap only after all of them finished */
    int64_t nb = 0;
    for (int64_t off = 0; !rc && off < b->count; off += (int64_t)per, nb++) {
        int64_t n = b->count - off < (int64_t)per ? b->count - off : (int64_t)per;
        rc = rl_comm_broadcast_start(b->c, NULL, b->staging + off, n, 0);
    }
    if (!rc)
        rc = rl_comm_wait(b->c, 0);
    b->last_buckets = nb;
    b->last_inflight = 0;
    if (rc)
        return rl_error_wrap(rc, "weight broadcast: rank %d receiving version %llu (version %llu stays active)", rank,
                             (unsigned long long)version, (unsigned long long)b->version);
    float *t = b->active;
    b->active = b->staging;
    b->staging = t;
    b->version = version;
    return RL_OK;
}

const float *rl_weight_bcast_active(const rl_weight_bcast *b, uint64_t *version)
{
    if (version)
        *version = b->version;
    return b->version ? b->active : NULL;
}

int rl_weight_bcast_set_depth(rl_weight_bcast *b, int depth)
{
    if (depth < 1 || depth > RL_COMM_MAX_INFLIGHT)
        return rl_error_set(RL_EINVAL, "weight broadcast: %d buckets in flight (must be in [1, %d])", depth,
                            RL_COMM_MAX_INFLIGHT);
    b->depth = depth;
    return RL_OK;
}

void rl_weight_bcast_last(const rl_weight_bcast *b, int64_t *buckets, int *max_inflight)
{
    if (buckets)
        *buckets = b->last_buckets;
    if (max_inflight)
        *max_inflight = b->last_inflight;
}

void rl_weight_bcast_free(rl_weight_bcast *b)
{
    if (!b)
        return;
    s_free(b->device, b->hdr);
    s_free(b->device, b->staging);
    s_free(b->device, b->active);
    free(b);
}
