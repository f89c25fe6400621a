/* device.c — per-device kernel tables and raw memory (see common/nn/engine/device.h). */
#include "common/nn/engine/device.h"
#include "rlrt/error.h"
#include "common/nn/engine/ops.h"
#include "common/nn/engine/ops_conv.h"
#include "rlrt/nn/params.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#ifdef RL_CUDA
#include "common/nn/engine/cuda/cuda_ops.h"
#endif

#define S_CPU(op) .op = rl_##op,
static const rl_nn_ops s_cpu_ops = {.device = RL_DEVICE_CPU, .name = "cpu", RL_NN_OPS(S_CPU)};

#ifdef RL_CUDA
#define S_CUDA(op) .op = rl_cuda_##op,
static const rl_nn_ops s_cuda_ops = {.device = RL_DEVICE_CUDA, .name = "cuda", RL_NN_OPS(S_CUDA)};
#endif

const char *rl_precision_name(rl_precision p) { return p == RL_PRECISION_BF16 ? "bf16" : "fp32"; }

const rl_nn_ops *rl_nn_ops_get(rl_device dev)
{
    switch (dev) {
    case RL_DEVICE_CPU:
        return &s_cpu_ops;
    case RL_DEVICE_CUDA:
#ifdef RL_CUDA
        return &s_cuda_ops;
#else
        rl_error_set(RL_EUNSUPPORTED, "device cuda: this build has no CUDA (make CUDA=1)");
        return NULL;
#endif
    }
    rl_error_set(RL_EINVAL, "unknown device %d", (int)dev);
    return NULL;
}

const char *rl_nn_ops_missing(const rl_nn_ops *o)
{
#define S_MISSING(op)                                                                               \
    if (!o->op)                                                                                     \
        return #op;
    RL_NN_OPS(S_MISSING)
    return NULL;
}

int rl_device_count(rl_device dev)
{
    if (dev == RL_DEVICE_CPU)
        return 1;
#ifdef RL_CUDA
    if (dev == RL_DEVICE_CUDA)
        return rl_cuda_device_count();
#endif
    return 0;
}

const char *rl_device_name(rl_device dev)
{
    return dev == RL_DEVICE_CPU ? "cpu" : dev == RL_DEVICE_CUDA ? "cuda" : "unknown";
}

/* ---- accounting: an open-addressing map pointer → (bytes, purpose) per device ---- */

typedef struct s_block {
    void *p;        /* NULL: empty; S_TOMB: deleted */
    size_t bytes;
    int why;
} s_block;

#define S_DEVS 2
#define S_TOMB ((void *)1)

static struct {
    pthread_mutex_t lock;
    s_block *tab;
    size_t cap, used; /* used counts live and deleted slots */
    rl_device_memory mem[S_DEVS];
} s_acct = {PTHREAD_MUTEX_INITIALIZER, NULL, 0, 0, {{{0}, 0, 0, 0}}};

static size_t s_slot(void *p, size_t cap)
{
    return (size_t)(((uintptr_t)p >> 4) * 0x9e3779b97f4a7c15ull) & (cap - 1);
}

/* Rehash into a table twice the live size (at least 256 slots); 0 or -1 (no memory). */
static int s_grow(void)
{
    size_t cap = 256;
    while (cap < 4 * (size_t)(s_acct.mem[0].blocks + s_acct.mem[1].blocks + 1))
        cap *= 2;
    s_block *tab = calloc(cap, sizeof *tab);
    if (!tab)
        return -1;
    for (size_t i = 0; i < s_acct.cap; i++) {
        s_block b = s_acct.tab[i];
        if (!b.p || b.p == S_TOMB)
            continue;
        size_t j = s_slot(b.p, cap);
        while (tab[j].p)
            j = (j + 1) & (cap - 1);
        tab[j] = b;
    }
    free(s_acct.tab);
    s_acct.tab = tab;
    s_acct.cap = cap;
    s_acct.used = (size_t)(s_acct.mem[0].blocks + s_acct.mem[1].blocks);
    return 0;
}

/* Counts a new block; a block that cannot be counted (no memory for the
 * map) is still valid, only missing from the figures. */
static void s_count(rl_device dev, void *p, size_t bytes, rl_mem_purpose why)
{
    pthread_mutex_lock(&s_acct.lock);
    if (2 * (s_acct.used + 1) <= s_acct.cap || !s_grow()) {
        size_t j = s_slot(p, s_acct.cap);
        while (s_acct.tab[j].p && s_acct.tab[j].p != S_TOMB)
            j = (j + 1) & (s_acct.cap - 1);
        if (!s_acct.tab[j].p)
            s_acct.used++;
        s_acct.tab[j] = (s_block){p, bytes, (int)dev * RL_MEM_COUNT + (int)why};
        rl_device_memory *m = &s_acct.mem[dev];
        m->bytes[why] += bytes;
        m->total += bytes;
        m->blocks++;
        if (m->total > m->peak)
            m->peak = m->total;
    }
    pthread_mutex_unlock(&s_acct.lock);
}

static void s_uncount(void *p)
{
    pthread_mutex_lock(&s_acct.lock);
    for (size_t j = s_acct.cap ? s_slot(p, s_acct.cap) : 0; s_acct.cap && s_acct.tab[j].p;
         j = (j + 1) & (s_acct.cap - 1)) {
        if (s_acct.tab[j].p != p)
            continue;
        s_block b = s_acct.tab[j];
        rl_device_memory *m = &s_acct.mem[b.why / RL_MEM_COUNT];
        m->bytes[b.why % RL_MEM_COUNT] -= b.bytes;
        m->total -= b.bytes;
        m->blocks--;
        s_acct.tab[j].p = S_TOMB;
        break;
    }
    pthread_mutex_unlock(&s_acct.lock);
}

void rl_device_memory_get(rl_device dev, rl_device_memory *out)
{
    memset(out, 0, sizeof *out);
    if ((unsigned)dev >= S_DEVS)
        return;
    pthread_mutex_lock(&s_acct.lock);
    *out = s_acct.mem[dev];
    pthread_mutex_unlock(&s_acct.lock);
}

const char *rl_mem_purpose_name(rl_mem_purpose why)
{
    static const char *const names[RL_MEM_COUNT] = {"params", "grads", "optim",
                                                    "activations", "scratch", "other"};
    return (unsigned)why < RL_MEM_COUNT ? names[why] : "?";
}

void *rl_device_alloc_for(rl_device dev, size_t bytes, rl_mem_purpose why)
{
    if ((unsigned)why >= RL_MEM_COUNT)
        why = RL_MEM_OTHER;
    void *p = NULL;
    if (dev == RL_DEVICE_CPU) {
        size_t n = (bytes + 63) & ~(size_t)63;
        p = aligned_alloc(64, n ? n : 64);
        if (!p)
            rl_error_set(RL_ENOMEM, "cpu alloc of %zu bytes failed", bytes);
    }
#ifdef RL_CUDA
    else if (dev == RL_DEVICE_CUDA) {
        p = rl_cuda_alloc(bytes);
    }
#endif
    else {
        rl_error_set(RL_EUNSUPPORTED, "device %s: not available in this build", rl_device_name(dev));
    }
    if (p)
        s_count(dev, p, bytes, why);
    return p;
}

void *rl_device_alloc(rl_device dev, size_t bytes) { return rl_device_alloc_for(dev, bytes, RL_MEM_OTHER); }

void rl_device_free(rl_device dev, void *p)
{
    if (!p)
        return;
    s_uncount(p);
    if (dev == RL_DEVICE_CPU) {
        free(p);
        return;
    }
#ifdef RL_CUDA
    if (dev == RL_DEVICE_CUDA)
        rl_cuda_free(p);
#endif
}

int rl_device_copy(rl_device dst_dev, void *dst, rl_device src_dev, const void *src,
                   size_t bytes)
{
    if (dst_dev == RL_DEVICE_CPU && src_dev == RL_DEVICE_CPU) {
        memmove(dst, src, bytes);
        return RL_OK;
    }
#ifdef RL_CUDA
    int kind = (src_dev == RL_DEVICE_CUDA ? 2 : 0) | (dst_dev == RL_DEVICE_CUDA ? 1 : 0);
    return rl_cuda_copy(dst, src, bytes, kind);
#else
    return rl_error_set(RL_EUNSUPPORTED, "device copy %s -> %s: this build has no CUDA",
                        rl_device_name(src_dev), rl_device_name(dst_dev));
#endif
}

int rl_device_zero(rl_device dev, void *p, size_t bytes)
{
    if (dev == RL_DEVICE_CPU) {
        if (p && bytes)
            memset(p, 0, bytes);
        return RL_OK;
    }
#ifdef RL_CUDA
    if (dev == RL_DEVICE_CUDA) {
        rl_cuda_memset0(p, bytes);
        return RL_OK;
    }
#endif
    return rl_error_set(RL_EUNSUPPORTED, "device %s: not available in this build", rl_device_name(dev));
}

int rl_device_sync(rl_device dev)
{
#ifdef RL_CUDA
    if (dev == RL_DEVICE_CUDA)
        return rl_cuda_sync();
#endif
    return dev == RL_DEVICE_CPU ? RL_OK
                                : rl_error_set(RL_EUNSUPPORTED, "device %s: not available",
                                               rl_device_name(dev));
}

static int s_ipc_unsupported(rl_device dev, const char *what)
{
    return rl_error_set(RL_EUNSUPPORTED, "device %s: %s needs a CUDA device%s", rl_device_name(dev),
                        what,
#ifdef RL_CUDA
                        ""
#else
                        " (this build has no CUDA: make CUDA=1)"
#endif
    );
}

int rl_device_ipc_export(rl_device dev, void *p, rl_device_ipc_handle *out)
{
#ifdef RL_CUDA
    if (dev == RL_DEVICE_CUDA)
        return rl_cuda_ipc_export(p, out->bytes);
#endif
    (void)p, (void)out;
    return s_ipc_unsupported(dev, "ipc export");
}

void *rl_device_ipc_open(rl_device dev, const rl_device_ipc_handle *h)
{
#ifdef RL_CUDA
    if (dev == RL_DEVICE_CUDA)
        return rl_cuda_ipc_open(h->bytes);
#endif
    (void)h;
    s_ipc_unsupported(dev, "ipc open");
    return NULL;
}

int rl_device_ipc_close(rl_device dev, void *p)
{
#ifdef RL_CUDA
    if (dev == RL_DEVICE_CUDA)
        return rl_cuda_ipc_close(p);
#endif
    (void)p;
    return s_ipc_unsupported(dev, "ipc close");
}

int rl_device_profile_set(rl_device dev, int on)
{
#ifdef RL_CUDA
    if (dev == RL_DEVICE_CUDA)
        return rl_cuda_profile_set(on);
#endif
    (void)dev, (void)on;
    return 0;
}

int rl_device_profile_take(rl_device dev, rl_device_prof *out, int max)
{
#ifdef RL_CUDA
    if (dev == RL_DEVICE_CUDA)
        return rl_cuda_profile_take(out, max);
#endif
    (void)dev, (void)out, (void)max;
    return 0;
}

float *rl_device_buffer_new(rl_device dev, int64_t n, rl_mem_purpose why)
{
    if (dev == RL_DEVICE_CPU)
        return rl_param_buffer_new(n);
    size_t bytes = sizeof(float) * (size_t)(n > 0 ? n : 1);
    float *p = rl_device_alloc_for(dev, bytes, why);
    if (p && rl_device_zero(dev, p, bytes) < 0) {
        rl_device_free(dev, p);
        return NULL;
    }
    return p;
}

void rl_device_buffer_free(rl_device dev, float *p)
{
    if (dev == RL_DEVICE_CPU)
        rl_param_buffer_free(p);
    else if (p)
        rl_device_free(dev, p);
}
