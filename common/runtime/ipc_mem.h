/* common/runtime/ipc_mem.h — memory another process can map: the kinds of
 * rlrt/runtime/channel_ipc.h behind one small table.
 *
 * Purpose: the same-device weight transport (channel_ipc.c) moves buckets
 * between blocks of one kind; this gives it, per kind, how to allocate,
 * export, open, close and copy. RL_WEIGHT_IPC_CUDA calls cudart directly
 * (compiled against it only with RL_CUDA, `make CUDA=1`; otherwise every
 * call is RL_EUNSUPPORTED); RL_WEIGHT_IPC_SHM uses POSIX shared memory
 * (shm_open + mmap) so the protocol runs between real processes on a
 * machine without a GPU.
 *
 * Invariants: a handle is RL_IPC_HANDLE_BYTES opaque bytes; open() refuses
 * a handle it cannot use with a message (never crashes on garbage: a shm
 * handle must be a NUL-terminated "/rlrt-w-" name of a segment of at least
 * `bytes`). export() takes the start of a block from alloc() (CUDA: any
 * cudaMalloc block start). copy() returns when the bytes are in place.
 *
 * Ownership: alloc'ed blocks are freed with free_() of the same kind (a shm
 * block is unlinked then: openers keep their mapping until close()).
 * Threading: any thread (the shm registry has a lock; CUDA acts on the
 * calling thread's current device).
 */
#ifndef RLRT_COMMON_RUNTIME_IPC_MEM_H
#define RLRT_COMMON_RUNTIME_IPC_MEM_H

#include <stddef.h>

#include "rlrt/runtime/channel_ipc.h"

#define RL_IPC_HANDLE_BYTES 64

typedef struct rl_ipc_mem {
    rl_weight_ipc_kind kind;
    const char *name;
    int (*available)(void); /* 1, or 0 + message */
    void *(*alloc)(size_t bytes);
    void (*free_)(void *p);
    int (*sync)(void); /* the device's queued work done */
    int (*export_)(const void *p, unsigned char handle[RL_IPC_HANDLE_BYTES]);
    void *(*open)(const unsigned char handle[RL_IPC_HANDLE_BYTES], size_t bytes);
    int (*close)(void *p, size_t bytes);
    int (*copy)(void *dst, const void *src, size_t bytes, rl_weight_ipc_dir dir);
} rl_ipc_mem;

/* The table of `kind`, or NULL + RL_EINVAL message for an unknown kind. */
const rl_ipc_mem *rl_ipc_mem_get(rl_weight_ipc_kind kind);

#endif
