/* collective_nccl.c — device collectives over NCCL, dlopen()ed at run time
 * (see common/runtime/collective_nccl.h). */
#include "common/runtime/collective_nccl.h"
#include "common/runtime/abort.h"
#include "rlrt/error.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef RL_CUDA
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <nccl.h>
#include <pthread.h>
#include <time.h>

/* ---- the library ------------------------------------------------------------------- */

static const char *const s_libs[] = {"libnccl.so.2", "libnccl.so"};

static struct {
    int tried, ok, version;
    char why[512];
    ncclResult_t (*get_version)(int *);
    ncclResult_t (*get_unique_id)(ncclUniqueId *);
    ncclResult_t (*init_rank_config)(ncclComm_t *, int, ncclUniqueId, int, ncclConfig_t *);
    ncclResult_t (*get_async_error)(ncclComm_t, ncclResult_t *);
    ncclResult_t (*abort_)(ncclComm_t);
    ncclResult_t (*finalize)(ncclComm_t);
    ncclResult_t (*destroy)(ncclComm_t);
    const char *(*error_string)(ncclResult_t);
    ncclResult_t (*all_reduce)(const void *, void *, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t,
                               cudaStream_t);
    ncclResult_t (*reduce_scatter)(const void *, void *, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t,
                                   cudaStream_t);
    ncclResult_t (*all_gather)(const void *, void *, size_t, ncclDataType_t, ncclComm_t, cudaStream_t);
    ncclResult_t (*broadcast)(const void *, void *, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t);
} s_nc;
static pthread_mutex_t s_load_lock = PTHREAD_MUTEX_INITIALIZER;

static void s_load_once(void)
{
    void *h = NULL;
    char tried[400] = "";
    size_t at = 0;
    for (size_t i = 0; i < sizeof s_libs / sizeof *s_libs && !h; i++) {
        h = dlopen(s_libs[i], RTLD_NOW | RTLD_LOCAL);
        if (!h && at < sizeof tried) {
            const char *e = dlerror();
            at += (size_t)snprintf(tried + at, sizeof tried - at, "%s%s (%s)", i ? ", " : "", s_libs[i],
                                   e ? e : "not found");
        }
    }
    if (!h) {
        snprintf(s_nc.why, sizeof s_nc.why,
                 "NCCL not found: dlopen %s; put the folder of libnccl.so.2 on LD_LIBRARY_PATH "
                 "(PyPI nvidia-nccl-cu13: <site-packages>/nvidia/nccl/lib)", tried);
        return;
    }
#define S_SYM(field, name)                                                                         \
    do {                                                                                           \
        *(void **)&s_nc.field = dlsym(h, name);                                                    \
        if (!s_nc.field) {                                                                         \
            snprintf(s_nc.why, sizeof s_nc.why, "NCCL: %s has no %s (too old?)", s_libs[0], name); \
            return;                                                                                \
        }                                                                                          \
    } while (0)
    S_SYM(get_version, "ncclGetVersion");
    S_SYM(get_unique_id, "ncclGetUniqueId");
    S_SYM(init_rank_config, "ncclCommInitRankConfig");
    S_SYM(get_async_error, "ncclCommGetAsyncError");
    S_SYM(abort_, "ncclCommAbort");
    S_SYM(finalize, "ncclCommFinalize");
    S_SYM(destroy, "ncclCommDestroy");
    S_SYM(error_string, "ncclGetErrorString");
    S_SYM(all_reduce, "ncclAllReduce");
    S_SYM(reduce_scatter, "ncclReduceScatter");
    S_SYM(all_gather, "ncclAllGather");
    S_SYM(broadcast, "ncclBroadcast");
#undef S_SYM
    if (s_nc.get_version(&s_nc.version) != ncclSuccess) {
        snprintf(s_nc.why, sizeof s_nc.why, "NCCL: ncclGetVersion failed");
        return;
    }
    if (s_nc.version < 21400) { /* ncclCommInitRankConfig, non-blocking comms, ncclAvg */
        snprintf(s_nc.why, sizeof s_nc.why, "NCCL %d is older than 2.14 (non-blocking communicators)",
                 s_nc.version);
        return;
    }
    s_nc.ok = 1;
}

int rl_nccl_load(int *version)
{
    pthread_mutex_lock(&s_load_lock);
    if (!s_nc.tried) {
        s_nc.tried = 1;
        s_load_once();
    }
    pthread_mutex_unlock(&s_load_lock);
    if (version)
        *version = s_nc.ok ? s_nc.version : 0;
    return s_nc.ok ? RL_OK : rl_error_set(RL_EUNSUPPORTED, "%s", s_nc.why);
}

int rl_nccl_unique_id(unsigned char id[RL_NCCL_ID_BYTES])
{
    _Static_assert(sizeof(ncclUniqueId) == RL_NCCL_ID_BYTES, "ncclUniqueId size");
    int rc = rl_nccl_load(NULL);
    if (rc)
        return rc;
    ncclUniqueId u;
    ncclResult_t r = s_nc.get_unique_id(&u);
    if (r != ncclSuccess)
        return rl_error_set(RL_EIO, "NCCL: ncclGetUniqueId: %s", s_nc.error_string(r));
    memcpy(id, &u, sizeof u);
    return RL_OK;
}

/* ---- communicators ---------------------------------------------------------------------- */

#define S_PIPE 4 /* RL_COMM_MAX_INFLIGHT */

struct rl_nccl {
    ncclComm_t comm;
    cudaStream_t stream;
    int world, rank;
    float *scratch; /* padded reduce-scatter / all-gather */
    int64_t scratch_n;
    /* pipelined broadcasts (rl_nccl_bcast_start): op i's completion event
     * done[i % S_PIPE]; the root packs in-place ones into stage[i % 2] on
     * copy_stream (event packed[i % 2]) */
    cudaStream_t copy_stream;
    cudaEvent_t done[S_PIPE], packed[2];
    int events;
    float *stage[2];
    int64_t stage_n;
    uint64_t started, finished;
    int staged[S_PIPE]; /* op i read stage[i % 2] */
};

static int64_t s_now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static void s_nap(void)
{
    struct timespec ts = {0, 20000}; /* 20 us */
    nanosleep(&ts, NULL);
}

/* Waits for the communicator's pending work (stream = 1: and its stream)
 * to finish; aborts it at the deadline, on an abort or on an NCCL error. */
static int s_wait_ev(rl_nccl *n, int stream, cudaEvent_t ev, int64_t deadline_us, int timeout_ms,
                     uint64_t abort_base, const char *what);

static int s_wait(rl_nccl *n, int stream, int64_t deadline_us, int timeout_ms, uint64_t abort_base,
                  const char *what)
{
    return s_wait_ev(n, stream, NULL, deadline_us, timeout_ms, abort_base, what);
}

/* s_wait; with ev, waits for that event of the stream instead of all of it. */
static int s_wait_ev(rl_nccl *n, int stream, cudaEvent_t ev, int64_t deadline_us, int timeout_ms,
                     uint64_t abort_base, const char *what)
{
    for (;;) {
        ncclResult_t st = ncclSuccess;
        ncclResult_t r = s_nc.get_async_error(n->comm, &st);
        if (r != ncclSuccess)
            st = r;
        if (st != ncclSuccess && st != ncclInProgress) {
            s_nc.abort_(n->comm);
            n->comm = NULL;
            return rl_error_set(RL_EIO, "NCCL rank %d of %d: %s: %s (the communicator was aborted)",
                                n->rank, n->world, what, s_nc.error_string(st));
        }
        if (st == ncclSuccess) {
            cudaError_t e = ev ? cudaEventQuery(ev) : stream ? cudaStreamQuery(n->stream) : cudaSuccess;
            if (e == cudaSuccess)
                return RL_OK;
            if (e != cudaErrorNotReady) {
                s_nc.abort_(n->comm);
                n->comm = NULL;
                return rl_error_set(RL_EIO, "NCCL rank %d of %d: %s: %s", n->rank, n->world, what,
                                    cudaGetErrorString(e));
            }
        }
        int rc = rl_abort_check(abort_base, what);
        if (rc || (deadline_us >= 0 && s_now_us() >= deadline_us)) {
            char why[300];
            snprintf(why, sizeof why, "%s", rc ? rl_error_message() : "");
            s_nc.abort_(n->comm);
            n->comm = NULL;
            if (rc)
                return rl_error_set(RL_EPEER, "NCCL rank %d of %d: %s: %s (the communicator was aborted)",
                                    n->rank, n->world, what, why);
            return rl_error_set(RL_ETIMEOUT, "NCCL rank %d of %d: %s: not complete after %d ms: a peer "
                                "is dead or stuck (the communicator was aborted)", n->rank, n->world, what,
                                timeout_ms);
        }
        s_nap();
    }
}

static int64_t s_deadline(int timeout_ms) { return timeout_ms < 0 ? -1 : s_now_us() + (int64_t)timeout_ms * 1000; }

rl_nccl *rl_nccl_new(const unsigned char id[RL_NCCL_ID_BYTES], int world, int rank, int timeout_ms,
                     uint64_t abort_base)
{
    if (rl_nccl_load(NULL))
        return NULL;
    rl_nccl *n = calloc(1, sizeof *n);
    if (!n) {
        rl_error_set(RL_ENOMEM, "NCCL: out of memory");
        return NULL;
    }
    n->world = world;
    n->rank = rank;
    cudaError_t e = cudaStreamCreate(&n->stream);
    if (e != cudaSuccess) {
        free(n);
        rl_error_set(RL_EIO, "NCCL rank %d: cudaStreamCreate: %s", rank, cudaGetErrorString(e));
        return NULL;
    }
    ncclUniqueId u;
    memcpy(&u, id, sizeof u);
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.blocking = 0;
    ncclResult_t r = s_nc.init_rank_config(&n->comm, world, u, rank, &cfg);
    if (r != ncclSuccess && r != ncclInProgress) {
        if (n->comm)
            s_nc.abort_(n->comm);
        cudaStreamDestroy(n->stream);
        free(n);
        rl_error_set(RL_EIO, "NCCL rank %d of %d: ncclCommInitRankConfig: %s", rank, world,
                     s_nc.error_string(r));
        return NULL;
    }
    int rc = s_wait(n, 0, s_deadline(timeout_ms), timeout_ms, abort_base, "init");
    if (rc) {
        rl_nccl_free(n, 1);
        return NULL;
    }
    return n;
}

static int s_scratch(rl_nccl *n, int64_t need)
{
    if (n->scratch_n >= need)
        return RL_OK;
    if (n->scratch)
        cudaFree(n->scratch);
    n->scratch = NULL;
    n->scratch_n = 0;
    cudaError_t e = cudaMalloc((void **)&n->scratch, (size_t)need * sizeof(float));
    if (e != cudaSuccess)
        return rl_error_set(RL_ENOMEM, "NCCL rank %d: %lld floats of scratch: %s", n->rank, (long long)need,
                            cudaGetErrorString(e));
    n->scratch_n = need;
    return RL_OK;
}

static int s_copy(rl_nccl *n, void *dst, const void *src, int64_t floats)
{
    if (floats <= 0 || dst == src)
        return RL_OK;
    cudaError_t e = cudaMemcpyAsync(dst, src, (size_t)floats * sizeof(float), cudaMemcpyDeviceToDevice,
                                    n->stream);
    return e == cudaSuccess ? RL_OK
                            : rl_error_set(RL_EIO, "NCCL rank %d: copy: %s", n->rank, cudaGetErrorString(e));
}

static int s_cuda_fail(rl_nccl *n, const char *what, cudaError_t e)
{
    return rl_error_set(RL_EIO, "NCCL rank %d: %s: %s", n->rank, what, cudaGetErrorString(e));
}

/* The pipeline's events, copy stream and (root, staged) the two staging
 * buffers of `need` floats; made at the first start, the buffers grown
 * only while nothing is in flight. */
static int s_pipe(rl_nccl *n, int64_t need)
{
    cudaError_t e = cudaSuccess;
    if (!n->events) {
        int made_s = 0, made_d = 0, made_p = 0;
        e = cudaStreamCreate(&n->copy_stream);
        made_s = e == cudaSuccess;
        for (; e == cudaSuccess && made_d < S_PIPE; made_d++)
            e = cudaEventCreateWithFlags(&n->done[made_d], cudaEventDisableTiming);
        if (e != cudaSuccess)
            made_d--;
        for (; e == cudaSuccess && made_p < 2; made_p++)
            e = cudaEventCreateWithFlags(&n->packed[made_p], cudaEventDisableTiming);
        if (e != cudaSuccess && made_p > 0)
            made_p--;
        if (e != cudaSuccess) {
            while (made_d-- > 0)
                cudaEventDestroy(n->done[made_d]);
            while (made_p-- > 0)
                cudaEventDestroy(n->packed[made_p]);
            if (made_s)
                cudaStreamDestroy(n->copy_stream);
            return s_cuda_fail(n, "the broadcast pipeline's stream and events", e);
        }
        n->events = 1;
    }
    if (need > n->stage_n) {
        if (n->started != n->finished)
            return rl_error_set(RL_ESTATE, "NCCL rank %d: a pipelined broadcast of %lld floats after ones of "
                                "%lld still in flight", n->rank, (long long)need, (long long)n->stage_n);
        for (int i = 0; i < 2; i++) {
            if (n->stage[i])
                cudaFree(n->stage[i]);
            n->stage[i] = NULL;
        }
        n->stage_n = 0;
        for (int i = 0; i < 2 && e == cudaSuccess; i++)
            e = cudaMalloc((void **)&n->stage[i], (size_t)need * sizeof(float));
        if (e != cudaSuccess) {
            for (int i = 0; i < 2; i++) {
                if (n->stage[i])
                    cudaFree(n->stage[i]);
                n->stage[i] = NULL;
            }
            return rl_error_set(RL_ENOMEM, "NCCL rank %d: two staging buffers of %lld floats: %s", n->rank,
                                (long long)need, cudaGetErrorString(e));
        }
        n->stage_n = need;
    }
    return RL_OK;
}

int rl_nccl_bcast_start(rl_nccl *n, const float *send, float *recv, int64_t count, int root, int timeout_ms,
                        uint64_t abort_base)
{
    const char *what = "broadcast";
    if (!n->comm)
        return rl_error_set(RL_ESTATE, "NCCL rank %d: %s: the communicator was aborted; destroy it", n->rank, what);
    if (n->started - n->finished >= S_PIPE) {
        int rc = rl_nccl_wait(n, S_PIPE - 1, timeout_ms, abort_base);
        if (rc)
            return rc;
    }
    int stage = n->rank == root && send == recv && count > 0;
    int rc = s_pipe(n, stage ? count : 0);
    if (rc)
        return rc;
    uint64_t i = n->started;
    const float *from = send;
    cudaError_t e = cudaSuccess;
    if (stage) {
        /* the staging buffer i % 2 is free once broadcast i - 2 (its last
         * reader) finished: the copy stream waits for that on the device */
        int k = (int)(i % 2);
        if (i >= 2 && n->staged[(i - 2) % S_PIPE])
            e = cudaStreamWaitEvent(n->copy_stream, n->done[(i - 2) % S_PIPE], 0);
        if (e == cudaSuccess)
            e = cudaMemcpyAsync(n->stage[k], send, (size_t)count * sizeof(float), cudaMemcpyDeviceToDevice,
                                n->copy_stream);
        if (e == cudaSuccess)
            e = cudaEventRecord(n->packed[k], n->copy_stream);
        if (e == cudaSuccess)
            e = cudaStreamWaitEvent(n->stream, n->packed[k], 0);
        if (e != cudaSuccess)
            return s_cuda_fail(n, "packing a broadcast's bucket", e);
        from = n->stage[k];
    }
    ncclResult_t r = s_nc.broadcast(from, stage ? (void *)from : recv, (size_t)count, ncclFloat32, root, n->comm,
                                    n->stream);
    if (r != ncclSuccess && r != ncclInProgress) {
        s_nc.abort_(n->comm);
        n->comm = NULL;
        return rl_error_set(RL_EIO, "NCCL rank %d of %d: %s: %s (the communicator was aborted)", n->rank, n->world,
                            what, s_nc.error_string(r));
    }
    if (r == ncclInProgress && (rc = s_wait(n, 0, s_deadline(timeout_ms), timeout_ms, abort_base, what)))
        return rc; /* the launch itself */
    if ((e = cudaEventRecord(n->done[i % S_PIPE], n->stream)) != cudaSuccess) {
        s_nc.abort_(n->comm);
        n->comm = NULL;
        return s_cuda_fail(n, "a broadcast's completion event", e);
    }
    n->staged[i % S_PIPE] = stage;
    n->started++;
    return RL_OK;
}

int rl_nccl_wait(rl_nccl *n, int keep, int timeout_ms, uint64_t abort_base)
{
    int64_t deadline = s_deadline(timeout_ms);
    while (n->started - n->finished > (uint64_t)(keep < 0 ? 0 : keep)) {
        if (!n->comm) {
            n->finished = n->started;
            return rl_error_set(RL_ESTATE, "NCCL rank %d: broadcast: the communicator was aborted; destroy it",
                                n->rank);
        }
        /* each bucket its own deadline: the timeout bounds a peer's silence, not the version */
        int rc = s_wait_ev(n, 0, n->done[n->finished % S_PIPE], deadline, timeout_ms, abort_base, "broadcast");
        if (rc) {
            n->finished = n->started;
            return rc;
        }
        n->finished++;
        deadline = s_deadline(timeout_ms);
    }
    return RL_OK;
}

int rl_nccl_inflight(rl_nccl *n)
{
    while (n->comm && n->finished < n->started && cudaEventQuery(n->done[n->finished % S_PIPE]) == cudaSuccess)
        n->finished++;
    return (int)(n->started - n->finished);
}

int rl_nccl_run(rl_nccl *n, rl_nccl_coll op, const float *send, float *recv, int64_t count, int root,
                int avg, int timeout_ms, uint64_t abort_base)
{
    static const char *const names[] = {"all_reduce", "reduce_scatter", "all_gather", "broadcast"};
    const char *what = names[op];
    if (!n->comm)
        return rl_error_set(RL_ESTATE, "NCCL rank %d: %s: the communicator was aborted; destroy it", n->rank,
                            what);
    int64_t deadline = s_deadline(timeout_ms);
    int W = n->world;
    /* rl_shard_range's shards (computed here: collective.c calls this file) */
    int64_t per = (count + W - 1) / W;
    int64_t b = per * n->rank < count ? per * n->rank : count, e = b + per < count ? b + per : count;
    int padded = per * W != count;
    ncclRedOp_t red = avg ? ncclAvg : ncclSum;
    ncclResult_t r = ncclSuccess;
    int rc = RL_OK;
    switch (op) {
    case RL_NCCL_ALL_REDUCE:
        r = s_nc.all_reduce(send, recv, (size_t)count, ncclFloat32, red, n->comm, n->stream);
        break;
    case RL_NCCL_BROADCAST:
        r = s_nc.broadcast(send, recv, (size_t)count, ncclFloat32, root, n->comm, n->stream);
        break;
    case RL_NCCL_REDUCE_SCATTER:
        if (!padded) {
            r = s_nc.reduce_scatter(send, recv, (size_t)per, ncclFloat32, red, n->comm, n->stream);
            break;
        }
        if ((rc = s_scratch(n, per * W)) || (rc = s_copy(n, n->scratch, send, count)))
            break;
        if (cudaMemsetAsync(n->scratch + count, 0, (size_t)(per * W - count) * sizeof(float), n->stream) !=
            cudaSuccess) {
            rc = rl_error_set(RL_EIO, "NCCL rank %d: %s: memset failed", n->rank, what);
            break;
        }
        r = s_nc.reduce_scatter(n->scratch, n->scratch + per * n->rank, (size_t)per, ncclFloat32, red, n->comm,
                                n->stream);
        if (r == ncclSuccess || r == ncclInProgress) {
            if (r == ncclInProgress && (rc = s_wait(n, 0, deadline, timeout_ms, abort_base, what)))
                return rc;
            rc = s_copy(n, recv, n->scratch + per * n->rank, e - b);
            r = ncclSuccess;
        }
        break;
    case RL_NCCL_ALL_GATHER:
        if (!padded) {
            r = s_nc.all_gather(send, recv, (size_t)per, ncclFloat32, n->comm, n->stream);
            break;
        }
        if ((rc = s_scratch(n, per * W)) || (rc = s_copy(n, n->scratch + per * n->rank, send, e - b)))
            break;
        r = s_nc.all_gather(n->scratch + per * n->rank, n->scratch, (size_t)per, ncclFloat32, n->comm,
                            n->stream);
        if (r == ncclSuccess || r == ncclInProgress) {
            if (r == ncclInProgress && (rc = s_wait(n, 0, deadline, timeout_ms, abort_base, what)))
                return rc;
            rc = s_copy(n, recv, n->scratch, count);
            r = ncclSuccess;
        }
        break;
    }
    if (rc)
        return rc;
    if (r != ncclSuccess && r != ncclInProgress) {
        s_nc.abort_(n->comm);
        n->comm = NULL;
        return rl_error_set(RL_EIO, "NCCL rank %d of %d: %s: %s (the communicator was aborted)", n->rank, W,
                            what, s_nc.error_string(r));
    }
    return s_wait(n, 1, deadline, timeout_ms, abort_base, what);
}

static void s_pipe_free(rl_nccl *n)
{
    if (n->events) {
        for (int i = 0; i < S_PIPE; i++)
            cudaEventDestroy(n->done[i]);
        for (int i = 0; i < 2; i++)
            cudaEventDestroy(n->packed[i]);
        cudaStreamDestroy(n->copy_stream);
    }
    for (int i = 0; i < 2; i++)
        if (n->stage[i])
            cudaFree(n->stage[i]);
    n->events = 0;
    n->stage[0] = n->stage[1] = NULL;
}

void rl_nccl_free(rl_nccl *n, int abort)
{
    if (!n)
        return;
    if (n->comm) {
        if (abort) {
            s_nc.abort_(n->comm);
        } else {
            /* non-blocking: finalize, wait (bounded), then destroy */
            ncclResult_t st = s_nc.finalize(n->comm);
            int64_t deadline = s_now_us() + 10 * 1000000;
            while (st == ncclInProgress && s_now_us() < deadline) {
                if (s_nc.get_async_error(n->comm, &st) != ncclSuccess)
                    break;
                s_nap();
            }
            if (st == ncclSuccess)
                s_nc.destroy(n->comm);
            else
                s_nc.abort_(n->comm);
        }
    }
    /* the comm is gone (its kernels ended, aborted or not): a copy that
     * waited for one of its events is free to finish */
    if (n->events)
        cudaStreamSynchronize(n->copy_stream);
    s_pipe_free(n);
    if (n->scratch)
        cudaFree(n->scratch);
    cudaStreamDestroy(n->stream);
    free(n);
}

#else /* no CUDA in this build */

static int s_no_cuda(void)
{
    return rl_error_set(RL_EUNSUPPORTED, "NCCL collectives: this build has no CUDA (make CUDA=1)");
}

int rl_nccl_load(int *version)
{
    if (version)
        *version = 0;
    return s_no_cuda();
}

int rl_nccl_unique_id(unsigned char id[RL_NCCL_ID_BYTES])
{
    (void)id;
    return s_no_cuda();
}

rl_nccl *rl_nccl_new(const unsigned char id[RL_NCCL_ID_BYTES], int world, int rank, int timeout_ms,
                     uint64_t abort_base)
{
    (void)id, (void)world, (void)rank, (void)timeout_ms, (void)abort_base;
    s_no_cuda();
    return NULL;
}

int rl_nccl_run(rl_nccl *n, rl_nccl_coll op, const float *send, float *recv, int64_t count, int root,
                int avg, int timeout_ms, uint64_t abort_base)
{
    (void)n, (void)op, (void)send, (void)recv, (void)count, (void)root, (void)avg, (void)timeout_ms,
        (void)abort_base;
    return s_no_cuda();
}

int rl_nccl_bcast_start(rl_nccl *n, const float *send, float *recv, int64_t count, int root, int timeout_ms,
                        uint64_t abort_base)
{
    (void)n, (void)send, (void)recv, (void)count, (void)root, (void)timeout_ms, (void)abort_base;
    return s_no_cuda();
}

int rl_nccl_wait(rl_nccl *n, int keep, int timeout_ms, uint64_t abort_base)
{
    (void)n, (void)keep, (void)timeout_ms, (void)abort_base;
    return s_no_cuda();
}

int rl_nccl_inflight(rl_nccl *n)
{
    (void)n;
    return 0;
}

void rl_nccl_free(rl_nccl *n, int abort)
{
    (void)n;
    (void)abort;
}
#endif
