/* ipc_mem.c — shared-memory and CUDA IPC blocks for the same-device weight
 * transport (see common/runtime/ipc_mem.h). */
#include "common/runtime/ipc_mem.h"
#include "rlrt/error.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#ifdef RL_CUDA
#include <cuda_runtime_api.h>
#endif

/* ---- POSIX shared memory -------------------------------------------------------- */

#define S_SHM_PREFIX "/rlrt-w-"

typedef struct s_shm_block {
    void *p;
    size_t bytes;
    char name[RL_IPC_HANDLE_BYTES];
    struct s_shm_block *next;
} s_shm_block;

static pthread_mutex_t s_shm_lock = PTHREAD_MUTEX_INITIALIZER;
static s_shm_block *s_shm_blocks;
static _Atomic unsigned s_shm_serial;

static int s_shm_available(void) { return 1; }

static void *s_shm_alloc(size_t bytes)
{
    s_shm_block *b = calloc(1, sizeof *b);
    if (!b) {
        rl_error_set(RL_ENOMEM, "shm ipc: out of memory");
        return NULL;
    }
    snprintf(b->name, sizeof b->name, S_SHM_PREFIX "%ld-%u", (long)getpid(),
             atomic_fetch_add(&s_shm_serial, 1));
    size_t len = bytes ? bytes : 1;
    int fd = shm_open(b->name, O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd < 0 || ftruncate(fd, (off_t)len) != 0) {
        rl_error_set(RL_EIO, "shm ipc: cannot create %s (%zu bytes)", b->name, len);
        if (fd >= 0) {
            close(fd);
            shm_unlink(b->name);
        }
        free(b);
        return NULL;
    }
    b->p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (b->p == MAP_FAILED) {
        shm_unlink(b->name);
        free(b);
        rl_error_set(RL_ENOMEM, "shm ipc: cannot map %zu bytes", len);
        return NULL;
    }
    b->bytes = len;
    pthread_mutex_lock(&s_shm_lock);
    b->next = s_shm_blocks;
    s_shm_blocks = b;
    pthread_mutex_unlock(&s_shm_lock);
    return b->p;
}

static void s_shm_free(void *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&s_shm_lock);
    s_shm_block **at = &s_shm_blocks;
    while (*at && (*at)->p != p)
        at = &(*at)->next;
    s_shm_block *b = *at;
    if (b)
        *at = b->next;
    pthread_mutex_unlock(&s_shm_lock);
    if (!b)
        return;
    munmap(b->p, b->bytes);
    shm_unlink(b->name);
    free(b);
}

static int s_shm_sync(void) { return RL_OK; }

static int s_shm_export(const void *p, unsigned char handle[RL_IPC_HANDLE_BYTES])
{
    int rc = RL_EINVAL;
    pthread_mutex_lock(&s_shm_lock);
    for (s_shm_block *b = s_shm_blocks; b; b = b->next)
        if (b->p == p) {
            memset(handle, 0, RL_IPC_HANDLE_BYTES);
            memcpy(handle, b->name, strlen(b->name));
            rc = RL_OK;
        }
    pthread_mutex_unlock(&s_shm_lock);
    return rc ? rl_error_set(rc, "shm ipc export: %p is not the start of a shared block", p) : RL_OK;
}

static void *s_shm_open(const unsigned char handle[RL_IPC_HANDLE_BYTES], size_t bytes)
{
    char name[RL_IPC_HANDLE_BYTES];
    memcpy(name, handle, sizeof name);
    size_t n = strnlen(name, sizeof name);
    if (n == sizeof name || strncmp(name, S_SHM_PREFIX, strlen(S_SHM_PREFIX)) != 0 ||
        strchr(name + 1, '/')) {
        rl_error_set(RL_EPROTO, "shm ipc open: the handle is not a " S_SHM_PREFIX "* name");
        return NULL;
    }
    int fd = shm_open(name, O_RDONLY, 0);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        if (fd >= 0)
            close(fd);
        rl_error_set(RL_EIO, "shm ipc open: %s: no such segment", name);
        return NULL;
    }
    if ((uint64_t)st.st_size < (uint64_t)bytes || bytes == 0) {
        close(fd);
        rl_error_set(RL_ERANGE, "shm ipc open: %s has %lld bytes, the sender says %zu", name,
                     (long long)st.st_size, bytes);
        return NULL;
    }
    void *p = mmap(NULL, bytes, PROT_READ, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED) {
        rl_error_set(RL_EIO, "shm ipc open: cannot map %s", name);
        return NULL;
    }
    return p;
}

static int s_shm_close(void *p, size_t bytes)
{
    return p && munmap(p, bytes) != 0 ? rl_error_set(RL_EIO, "shm ipc close: munmap failed") : RL_OK;
}

static int s_shm_copy(void *dst, const void *src, size_t bytes, rl_weight_ipc_dir dir)
{
    (void)dir;
    if (bytes)
        memcpy(dst, src, bytes);
    return RL_OK;
}

static const rl_ipc_mem s_shm = {RL_WEIGHT_IPC_SHM, "shm", s_shm_available, s_shm_alloc, s_shm_free,
                                 s_shm_sync, s_shm_export, s_shm_open, s_shm_close, s_shm_copy};

/* ---- CUDA IPC ------------------------------------------------------------------------ */

#ifdef RL_CUDA
static int s_cuerr(cudaError_t e, const char *what)
{
    return rl_error_set(e == cudaErrorMemoryAllocation ? RL_ENOMEM : RL_EIO, "cuda ipc: %s: %s", what,
                        cudaGetErrorString(e));
}

static int s_cuda_available(void)
{
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n == 0) {
        rl_error_set(RL_EUNSUPPORTED, "cuda ipc: no CUDA GPU visible (%s)",
                     e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
        return 0;
    }
    return 1;
}

static void *s_cuda_alloc(size_t bytes)
{
    void *p = NULL;
    cudaError_t e = cudaMalloc(&p, bytes ? bytes : 1);
    if (e != cudaSuccess) {
        s_cuerr(e, "cudaMalloc");
        return NULL;
    }
    return p;
}

static void s_cuda_free(void *p)
{
    if (p)
        cudaFree(p);
}

static int s_cuda_sync(void)
{
    cudaError_t e = cudaDeviceSynchronize();
    return e == cudaSuccess ? RL_OK : s_cuerr(e, "cudaDeviceSynchronize");
}

static int s_cuda_export(const void *p, unsigned char handle[RL_IPC_HANDLE_BYTES])
{
    _Static_assert(sizeof(cudaIpcMemHandle_t) <= RL_IPC_HANDLE_BYTES, "IPC handle size");
    cudaIpcMemHandle_t h;
    cudaError_t e = cudaIpcGetMemHandle(&h, (void *)p);
    if (e != cudaSuccess)
        return s_cuerr(e, "export (cudaIpcGetMemHandle: not the start of a cudaMalloc block?)");
    memset(handle, 0, RL_IPC_HANDLE_BYTES);
    memcpy(handle, &h, sizeof h);
    return RL_OK;
}

static void *s_cuda_open(const unsigned char handle[RL_IPC_HANDLE_BYTES], size_t bytes)
{
    (void)bytes; /* cudart cannot tell a mapped block's size */
    cudaIpcMemHandle_t h;
    memcpy(&h, handle, sizeof h);
    void *p = NULL;
    cudaError_t e = cudaIpcOpenMemHandle(&p, h, cudaIpcMemLazyEnablePeerAccess);
    if (e != cudaSuccess) {
        cudaGetLastError(); /* not sticky: clear it */
        s_cuerr(e, "open (cudaIpcOpenMemHandle)");
        return NULL;
    }
    return p;
}

static int s_cuda_close(void *p, size_t bytes)
{
    (void)bytes;
    cudaError_t e = p ? cudaIpcCloseMemHandle(p) : cudaSuccess;
    return e == cudaSuccess ? RL_OK : s_cuerr(e, "close (cudaIpcCloseMemHandle)");
}

static int s_cuda_copy(void *dst, const void *src, size_t bytes, rl_weight_ipc_dir dir)
{
    enum cudaMemcpyKind k = dir == RL_WEIGHT_IPC_H2D   ? cudaMemcpyHostToDevice
                            : dir == RL_WEIGHT_IPC_D2H ? cudaMemcpyDeviceToHost
                                                       : cudaMemcpyDeviceToDevice;
    if (!bytes)
        return RL_OK;
    cudaError_t e = cudaMemcpyAsync(dst, src, bytes, k, 0);
    if (e == cudaSuccess)
        e = cudaStreamSynchronize(0);
    return e == cudaSuccess ? RL_OK : s_cuerr(e, "cudaMemcpy");
}
#else
static int s_cuda_available(void)
{
    rl_error_set(RL_EUNSUPPORTED, "cuda ipc: this build has no CUDA (make CUDA=1)");
    return 0;
}

static void *s_cuda_alloc(size_t bytes)
{
    (void)bytes;
    s_cuda_available();
    return NULL;
}

static void s_cuda_free(void *p) { (void)p; }

static int s_cuda_sync(void) { return s_cuda_available(), rl_error_code(); }

static int s_cuda_export(const void *p, unsigned char handle[RL_IPC_HANDLE_BYTES])
{
    (void)p;
    (void)handle;
    return s_cuda_available(), rl_error_code();
}

static void *s_cuda_open(const unsigned char handle[RL_IPC_HANDLE_BYTES], size_t bytes)
{
    (void)handle;
    return s_cuda_alloc(bytes);
}

static int s_cuda_close(void *p, size_t bytes)
{
    (void)p;
    (void)bytes;
    return s_cuda_sync();
}

static int s_cuda_copy(void *dst, const void *src, size_t bytes, rl_weight_ipc_dir dir)
{
    (void)dst;
    (void)src;
    (void)bytes;
    (void)dir;
    return s_cuda_sync();
}
#endif

static const rl_ipc_mem s_cuda = {RL_WEIGHT_IPC_CUDA, "cuda_ipc", s_cuda_available, s_cuda_alloc,
                                  s_cuda_free, s_cuda_sync, s_cuda_export, s_cuda_open,
                                  s_cuda_close, s_cuda_copy};

const rl_ipc_mem *rl_ipc_mem_get(rl_weight_ipc_kind kind)
{
    if (kind == RL_WEIGHT_IPC_SHM)
        return &s_shm;
    if (kind == RL_WEIGHT_IPC_CUDA)
        return &s_cuda;
    rl_error_set(RL_EINVAL, "weight ipc: unknown memory kind %d", (int)kind);
    return NULL;
}

/* ---- the public helpers of rlrt/runtime/channel_ipc.h -------------------------------- */

const char *rl_weight_ipc_kind_name(rl_weight_ipc_kind kind)
{
    return kind == RL_WEIGHT_IPC_SHM ? "shm" : kind == RL_WEIGHT_IPC_CUDA ? "cuda_ipc" : "?";
}

int rl_weight_ipc_available(rl_weight_ipc_kind kind)
{
    const rl_ipc_mem *m = rl_ipc_mem_get(kind);
    return m ? m->available() : 0;
}

void *rl_weight_ipc_alloc(rl_weight_ipc_kind kind, size_t bytes)
{
    const rl_ipc_mem *m = rl_ipc_mem_get(kind);
    return m ? m->alloc(bytes) : NULL;
}

void rl_weight_ipc_free(rl_weight_ipc_kind kind, void *p)
{
    const rl_ipc_mem *m = rl_ipc_mem_get(kind);
    if (m)
        m->free_(p);
}

int rl_weight_ipc_copy(rl_weight_ipc_kind kind, void *dst, const void *src, size_t bytes,
                       rl_weight_ipc_dir dir)
{
    const rl_ipc_mem *m = rl_ipc_mem_get(kind);
    return m ? m->copy(dst, src, bytes, dir) : rl_error_code();
}
