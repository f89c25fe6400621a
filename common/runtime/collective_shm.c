/* collective_shm.c — the same-host all-reduce through POSIX shared memory
 * (see common/runtime/collective_shm.h). */
#include "common/runtime/collective_shm.h"

#include "common/runtime/abort.h"
#include "rlrt/error.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define S_MAGIC 0x726c636f6d6d7368ull /* "rlcommsh" */
#define S_MAX_WORLD 1024

/* The segment: this header, then `world` slots of `slot` floats, then the
 * result area of `slot` floats, each 64-byte aligned. */
typedef struct s_hdr {
    _Atomic uint64_t magic; /* written last by rank 0 */
    char nonce[32];
    int32_t world;
    int32_t pad;
    int64_t slot;
    _Atomic uint32_t gen;   /* the barrier's generation: the futex word */
    _Atomic uint32_t count; /* ranks arrived at this generation */
    _Atomic uint32_t arrived[S_MAX_WORLD]; /* each rank's last generation + 1 */
    _Atomic int64_t counts[S_MAX_WORLD];   /* each rank's count in this operation */
} s_hdr;

struct rl_comm_shm {
    s_hdr *h;
    size_t bytes;
    int world, rank;
    int64_t slot;
    float *slots, *result;
};

static size_t s_align(size_t n) { return (n + 63) & ~(size_t)63; }

static size_t s_size(int world, int64_t slot)
{
    return s_align(sizeof(s_hdr)) + (size_t)(world + 1) * s_align(sizeof(float) * (size_t)slot);
}

static void s_name(const char *nonce, char *out, size_t n) { snprintf(out, n, "/rlrt-comm-%s", nonce); }

static void s_layout(rl_comm_shm *s)
{
    char *base = (char *)s->h + s_align(sizeof(s_hdr));
    size_t per = s_align(sizeof(float) * (size_t)s->slot);
    s->slots = (float *)base;
    s->result = (float *)(base + (size_t)s->world * per);
}

static float *s_slot(const rl_comm_shm *s, int r)
{
    return (float *)((char *)s->slots + (size_t)r * s_align(sizeof(float) * (size_t)s->slot));
}

rl_comm_shm *rl_comm_shm_open(const char *nonce, int world, int rank, int64_t slot, int create)
{
    if (world < 2 || world > S_MAX_WORLD || slot < 1 || strlen(nonce) >= sizeof(((s_hdr *)0)->nonce)) {
        rl_error_set(RL_EINVAL, "comm shm: world %d, slot %lld: out of range", world, (long long)slot);
        return NULL;
    }
    char name[64];
    s_name(nonce, name, sizeof name);
    size_t bytes = s_size(world, slot);
    int fd = shm_open(name, create ? O_RDWR | O_CREAT | O_EXCL : O_RDWR, 0600);
    if (fd < 0) {
        rl_error_set(RL_EIO, "comm shm: shm_open %s: %s", name, strerror(errno));
        return NULL;
    }
    int e = 0;
    if (create) {
        /* the pages now, so a full /dev/shm is an error here and not a
         * SIGBUS later */
        if ((e = posix_fallocate(fd, 0, (off_t)bytes)) != 0) {
            close(fd);
            shm_unlink(name);
            rl_error_set(RL_ENOMEM, "comm shm: %zu bytes in /dev/shm: %s", bytes, strerror(e));
            return NULL;
        }
    } else {
        struct stat st;
        if (fstat(fd, &st) != 0 || (size_t)st.st_size != bytes) {
            close(fd);
            rl_error_set(RL_EPROTO, "comm shm: %s is not this communicator's segment", name);
            return NULL;
        }
    }
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    e = errno;
    close(fd);
    if (p == MAP_FAILED) {
        if (create)
            shm_unlink(name);
        rl_error_set(RL_EIO, "comm shm: mmap of %zu bytes: %s", bytes, strerror(e));
        return NULL;
    }
    rl_comm_shm *s = calloc(1, sizeof *s);
    if (!s) {
        munmap(p, bytes);
        if (create)
            shm_unlink(name);
        rl_error_set(RL_ENOMEM, "comm shm: out of memory");
        return NULL;
    }
    *s = (rl_comm_shm){.h = p, .bytes = bytes, .world = world, .rank = rank, .slot = slot};
    s_layout(s);
    if (create) {
        snprintf(s->h->nonce, sizeof s->h->nonce, "%s", nonce);
        s->h->world = world;
        s->h->slot = slot;
        atomic_store(&s->h->gen, 0);
        atomic_store(&s->h->count, 0);
        for (int r = 0; r < world; r++)
            atomic_store(&s->h->arrived[r], 0);
        atomic_store_explicit(&s->h->magic, S_MAGIC, memory_order_release);
    } else if (atomic_load_explicit(&s->h->magic, memory_order_acquire) != S_MAGIC ||
               strcmp(s->h->nonce, nonce) != 0 || s->h->world != world || s->h->slot != slot) {
        rl_comm_shm_close(s);
        rl_error_set(RL_EPROTO, "comm shm: %s is not this communicator's segment", name);
        return NULL;
    }
    return s;
}

void rl_comm_shm_unlink(const char *nonce)
{
    char name[64];
    s_name(nonce, name, sizeof name);
    shm_unlink(name);
}

void rl_comm_shm_close(rl_comm_shm *s)
{
    if (!s)
        return;
    munmap(s->h, s->bytes);
    free(s);
}

static int64_t s_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Every rank arrives before any leaves. Waits on the generation word (a
 * shared futex), a short spin first; ends at the deadline, naming the
 * ranks that did not arrive, or at an abort. */
static int s_barrier(rl_comm_shm *s, int timeout_ms, uint64_t abort_base)
{
    s_hdr *h = s->h;
    uint32_t g = atomic_load(&h->gen);
    atomic_store(&h->arrived[s->rank], g + 1);
    if (atomic_fetch_add(&h->count, 1) == (uint32_t)s->world - 1) {
        atomic_store(&h->count, 0);
        atomic_fetch_add(&h->gen, 1);
        syscall(SYS_futex, &h->gen, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
        return RL_OK;
    }
    for (int spin = 0; spin < 200 && atomic_load(&h->gen) == g; spin++)
        __builtin_ia32_pause();
    int64_t deadline = s_now_ms() + timeout_ms;
    while (atomic_load(&h->gen) == g) {
        if (rl_abort_pending(abort_base)) {
            char what[64];
            snprintf(what, sizeof what, "all_reduce (shared memory): rank %d", s->rank);
            return rl_abort_check(abort_base, what);
        }
        int64_t left = deadline - s_now_ms();
        if (left <= 0) {
            char who[256] = "";
            size_t n = 0;
            for (int r = 0; r < s->world && n < sizeof who - 16; r++)
                if (atomic_load(&h->arrived[r]) != g + 1)
                    n += (size_t)snprintf(who + n, sizeof who - n, "%s%d", n ? ", " : "", r);
            return rl_error_set(RL_ETIMEOUT,
                                "all_reduce (shared memory): rank %d waited %.1f s for rank %s",
                                s->rank, timeout_ms / 1000.0, who[0] ? who : "?");
        }
        if (left > RL_ABORT_POLL_MS)
            left = RL_ABORT_POLL_MS;
        struct timespec ts = {left / 1000, (left % 1000) * 1000000};
        syscall(SYS_futex, &h->gen, FUTEX_WAIT, g, &ts, NULL, 0);
    }
    return RL_OK;
}

/* result[b, e) of the window at global offset o: each element in the ring's
 * order for its ring chunk c (collective.h's layout: chunks of
 * ceil(count / W)), ((x[c+1] + x[c+2]) + ...) + x[c]. */
static void s_reduce_slice(const rl_comm_shm *s, int64_t count, int64_t o, int64_t b, int64_t e,
                           int avg)
{
    const int W = s->world;
    const float wf = (float)W;
    const int64_t per = count / W + (count % W != 0);
    for (int c = 0; c < W; c++) {
        int64_t cb = per * c < count ? per * c : count, ce = cb + per < count ? cb + per : count;
        int64_t lo = cb > o + b ? cb : o + b, hi = ce < o + e ? ce : o + e;
        if (lo >= hi)
            continue;
        int64_t off = lo - o, n = hi - lo;
        float *y = s->result + off;
        memcpy(y, s_slot(s, (c + 1) % W) + off, sizeof(float) * (size_t)n);
        for (int k = 2; k < W; k++) {
            const float *x = s_slot(s, (c + k) % W) + off;
            for (int64_t i = 0; i < n; i++)
                y[i] = y[i] + x[i];
        }
        const float *x = s_slot(s, c) + off;
        if (avg)
            for (int64_t i = 0; i < n; i++)
                y[i] = (y[i] + x[i]) / wf;
        else
            for (int64_t i = 0; i < n; i++)
                y[i] = y[i] + x[i];
    }
}

int rl_comm_shm_all_reduce(rl_comm_shm *s, const float *send, float *recv, int64_t count, int avg,
                           int timeout_ms, uint64_t abort_base)
{
    /* Window 0 always runs (count 0 too): its second barrier keeps every
     * rank's count until all have compared them. */
    atomic_store(&s->h->counts[s->rank], count);
    for (int64_t o = 0; o == 0 || o < count; o += s->slot) {
        int64_t S = count - o < s->slot ? count - o : s->slot, b, e;
        if (S > 0)
            memcpy(s_slot(s, s->rank), send + o, sizeof(float) * (size_t)S);
        int rc = s_barrier(s, timeout_ms, abort_base);
        if (rc)
            return rc;
        for (int r = 0; o == 0 && r < s->world; r++) {
            int64_t n = atomic_load(&s->h->counts[r]);
            if (n != count) /* every rank sees the same counts: all fail */
                return rl_error_set(RL_EPROTO,
                                    "all_reduce (shared memory): rank %d has %lld elements, rank "
                                    "%d %lld: every rank must pass the same count",
                                    s->rank, (long long)count, r, (long long)n);
        }
        int64_t per = S / s->world + (S % s->world != 0); /* this rank's slice */
        b = per * s->rank < S ? per * s->rank : S;
        e = b + per < S ? b + per : S;
        s_reduce_slice(s, count, o, b, e, avg);
        if ((rc = s_barrier(s, timeout_ms, abort_base)))
            return rc;
        /* the next window's first barrier keeps the result until every
         * rank has copied it */
        if (S > 0)
            memcpy(recv + o, s->result, sizeof(float) * (size_t)S);
    }
    return RL_OK;
}
