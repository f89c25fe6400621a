// cuda_emu.cpp — the CUDA runtime, cuBLAS and kernel launches on the host, for
// `make CUDA=emu` (include/cuda_runtime.h says what it checks and what not).
//
// Device memory: each cudaMalloc block is its own memfd mapping, placed so
// that it ends at a PROT_NONE guard page (a read or write past the end
// faults), filled with 0xff bytes (NaN floats) as a GPU's uninitialised
// memory is garbage, and kept PROT_NONE while host code runs: a kernel, a copy
// or a cuBLAS call opens every block for its duration (RL_CUDA_EMU_PROTECT=0
// leaves them open). A fault in a block, a guard, a fiber's stack guard or
// the dynamic shared memory's guard is reported with what it hit, then the
// process dies of the signal. CUDA IPC: a handle names the exporting process
// and its memfd; the opener maps /proc/<pid>/fd/<fd> (same uid).
//
// Kernels: rl_emu_run checks the launch configuration like the runtime
// (cudaErrorInvalidConfiguration / cudaErrorInvalidValue, returned by
// cudaGetLastError), then runs block after block; a block's threads are
// fibers (a 14-instruction stack switch below, no system call) that yield at
// __syncthreads and warp shuffles. A barrier
// that not every live thread of the block reaches, or a shuffle that not
// every lane of its warp reaches, stops the launch with a message and a
// sticky cudaErrorLaunchFailure, as a trapped kernel does. Between two
// switch points the threads run in index order, or from the last to the first
// with RL_CUDA_EMU_ORDER=reverse: a read of shared or global memory that
// another thread writes without a barrier in between gets a different value
// (NaN, for shared memory, at the block's start) in one of the two orders.
#include <cuda_runtime.h>
#include <cublas_v2.h>

#include <cblas.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include <map>
#include <mutex>
#include <vector>

// `make CUDA=emu EMU_TSAN=1`: the kernels are compiled with ThreadSanitizer
// and each GPU thread is a TSan fiber. Switches carry no synchronisation;
// what does is what a GPU guarantees: a barrier orders its block's threads
// (release before, acquire after, on one object per barrier parity), a
// shuffle its warp's lanes, and a block's start and end order it against the
// host (blocks run one after another, as racecheck looks within a block). So
// TSan reports a read of another thread's write (shared or global memory)
// with no barrier between them: compute-sanitizer racecheck's hazards.
#ifdef RL_CUDA_EMU_TSAN
#include <sanitizer/tsan_interface.h>
#define TSAN(x) x
#else
#define TSAN(x)
#endif

uint3 rl_emu_threadIdx, rl_emu_blockIdx;
dim3 rl_emu_blockDim, rl_emu_gridDim;

namespace {

constexpr size_t kPage = 4096;
constexpr int kOptinSmem = 232448; // an H100's opt-in shared memory per block (227 KiB)
constexpr int kDefaultSmem = 48 * 1024;
constexpr size_t kStack = 256 * 1024;

std::recursive_mutex g_mu;
cudaError_t g_last = cudaSuccess, g_sticky = cudaSuccess;

cudaError_t note(cudaError_t e)
{
    if (e != cudaSuccess)
        g_last = e;
    return e;
}

// ---- device memory ------------------------------------------------------------

struct Block {
    char *map;       // the mapping: data pages then one guard page
    size_t map_len;  // data pages + guard
    char *ptr;       // what cudaMalloc returned: ends where the guard begins
    size_t size;
    int fd;          // memfd (-1: anonymous, not exportable)
    bool opened;     // mapped from another process by cudaIpcOpenMemHandle
};
std::map<uintptr_t, Block> g_blocks; // by ptr
int g_open_depth = 0;                // device access windows open
int g_protect = -1;

bool protect_on()
{
    if (g_protect < 0) {
        const char *e = getenv("RL_CUDA_EMU_PROTECT");
        g_protect = !(e && strcmp(e, "0") == 0);
    }
    return g_protect;
}

void set_access(const Block &b, bool on)
{
    size_t data = b.map_len - kPage;
    if (mprotect(b.map, data, on ? PROT_READ | PROT_WRITE : PROT_NONE) != 0) {
        fprintf(stderr, "cuda_emu: mprotect: %s\n", strerror(errno));
        abort();
    }
}

// The block holding [p, p + n), or null.
const Block *find(const void *p, size_t n)
{
    uintptr_t a = (uintptr_t)p;
    auto it = g_blocks.upper_bound(a);
    if (it == g_blocks.begin())
        return nullptr;
    --it;
    const Block &b = it->second;
    if (a < (uintptr_t)b.ptr || a + n > (uintptr_t)b.ptr + b.size || a + n < a)
        return nullptr;
    return &b;
}

bool in_any_map(const void *p)
{
    for (auto &kv : g_blocks)
        if ((const char *)p >= kv.second.map && (const char *)p < kv.second.map + kv.second.map_len)
            return true;
    return false;
}

// Places a block of `size` bytes over `fd` (or anonymous memory) ending at a
// guard page; NULL on failure.
bool map_block(Block *b, size_t size, int fd)
{
    size_t rounded = (size + 255) & ~(size_t)255;
    size_t data = (rounded + kPage - 1) & ~(kPage - 1);
    size_t len = data + kPage;
    char *m = (char *)mmap(nullptr, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED)
        return false;
    void *d = fd >= 0 ? mmap(m, data, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, 0)
                      : mmap(m, data, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
    if (d == MAP_FAILED) {
        munmap(m, len);
        return false;
    }
    b->map = m;
    b->map_len = len;
    b->ptr = m + data - rounded;
    b->size = size;
    b->fd = fd;
    b->opened = false;
    return true;
}

// ---- faults -------------------------------------------------------------------

const char *g_kernel = nullptr; // the running kernel's name
char *g_smem_map = nullptr;
size_t g_smem_map_len = 0;
char *g_stacks = nullptr;
size_t g_nstacks = 0;
struct sigaction g_old_segv, g_old_bus;

void say(const char *s) { ssize_t r = write(2, s, strlen(s)); (void)r; }

void on_fault(int sig, siginfo_t *si, void *uc)
{
    char msg[512];
    const char *a = (const char *)si->si_addr;
    const char *where = nullptr;
    for (auto &kv : g_blocks) {
        const Block &b = kv.second;
        if (a >= b.map && a < b.map + b.map_len) {
            if (a >= b.ptr + b.size)
                snprintf(msg, sizeof msg, "%zd bytes past the end of the %zu-byte device block at %p",
                         a - (b.ptr + b.size), b.size, (void *)b.ptr);
            else if (a < b.ptr)
                snprintf(msg, sizeof msg, "%zd bytes before the %zu-byte device block at %p",
                         b.ptr - a, b.size, (void *)b.ptr);
            else
                snprintf(msg, sizeof msg, "byte %zd of the %zu-byte device block at %p", a - b.ptr,
                         b.size, (void *)b.ptr);
            where = msg;
            break;
        }
    }
    if (!where && g_smem_map && a >= g_smem_map && a < g_smem_map + g_smem_map_len) {
        snprintf(msg, sizeof msg, "past the end of the dynamic shared memory");
        where = msg;
    }
    if (!where && g_stacks && a >= g_stacks && a < g_stacks + g_nstacks * (kStack + kPage)) {
        snprintf(msg, sizeof msg, "a thread's stack overflowed (%zu KiB)", kStack / 1024);
        where = msg;
    }
    if (where) {
        char line[800];
        if (g_kernel)
            snprintf(line, sizeof line,
                     "cuda_emu: kernel %s, block (%u,%u,%u) thread (%u,%u,%u): invalid access at %p: %s\n",
                     g_kernel, rl_emu_blockIdx.x, rl_emu_blockIdx.y, rl_emu_blockIdx.z,
                     rl_emu_threadIdx.x, rl_emu_threadIdx.y, rl_emu_threadIdx.z, (const void *)a, where);
        else
            snprintf(line, sizeof line,
                     "cuda_emu: host code touched device memory at %p (%s): device memory is "
                     "read and written only by kernels, copies and cuBLAS\n", (const void *)a, where);
        say(line);
    }
    sigaction(SIGSEGV, &g_old_segv, nullptr);
    sigaction(SIGBUS, &g_old_bus, nullptr);
    (void)sig;
    (void)uc; // returning re-runs the access under the old handler: the process dies of it
}

void init_once()
{
    static bool done = false;
    if (done)
        return;
    done = true;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_fault;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGSEGV, &sa, &g_old_segv);
    sigaction(SIGBUS, &sa, &g_old_bus);
    // an alternate signal stack: a fiber's stack overflow still reports
    static char alt[64 * 1024];
    stack_t ss;
    ss.ss_sp = alt;
    ss.ss_size = sizeof alt;
    ss.ss_flags = 0;
    sigaltstack(&ss, nullptr);
}

// A device access window (kernels, copies, cuBLAS), nested: the outermost
// opens every block, its end closes them.
void access_window(bool open)
{
    int depth = open ? g_open_depth++ : --g_open_depth;
    if (depth == 0 && protect_on())
        for (auto &kv : g_blocks)
            set_access(kv.second, open);
}
struct Access {
    Access() { access_window(true); }
    ~Access() { access_window(false); }
};

// A new block is closed when no window is open.
void settle(const Block &b)
{
    if (g_open_depth == 0 && protect_on())
        set_access(b, false);
}

// ---- fibers -------------------------------------------------------------------

#if !defined(__x86_64__)
#error "cuda_emu: the fiber switch is written for x86-64"
#endif
// rl_emu_switch(save, to): pushes the callee-saved registers, stores the
// stack pointer in *save, loads `to` and pops the registers saved there.
extern "C" void rl_emu_switch(void **save, void *to);
asm(".text\n"
    ".globl rl_emu_switch\n"
    ".type rl_emu_switch,@function\n"
    "rl_emu_switch:\n"
    "  pushq %rbp\n  pushq %rbx\n  pushq %r12\n  pushq %r13\n  pushq %r14\n  pushq %r15\n"
    "  movq %rsp, (%rdi)\n"
    "  movq %rsi, %rsp\n"
    "  popq %r15\n  popq %r14\n  popq %r13\n  popq %r12\n  popq %rbx\n  popq %rbp\n"
    "  ret\n"
    ".size rl_emu_switch, .-rl_emu_switch\n");

enum { F_RUN, F_BAR, F_SHFL, F_DONE };
struct Fiber {
    void *sp;
    int state;
    uint3 tid;
    unsigned lin;
    unsigned shfl_seq;
    unsigned bars;
    void *tsan; // its TSan fiber (EMU_TSAN)
};
std::vector<Fiber> g_fibers;
void *g_sched_sp = nullptr;
Fiber *g_cur = nullptr;
void (*g_body)(void *) = nullptr;
void *g_ctx = nullptr;
char *g_smem = nullptr;
union Slot {
    float f;
    double d;
    int i;
};
Slot g_shfl[2][1024];
bool g_failed = false;
// the synchronisation objects of EMU_TSAN (addresses only)
[[maybe_unused]] char g_sync_start, g_sync_end, g_sync_bar[2], g_sync_warp[32][2];
[[maybe_unused]] void *g_sched_tsan = nullptr;

// From the running fiber back to the scheduler.
void yield_fiber(Fiber *f)
{
    TSAN(__tsan_switch_to_fiber(g_sched_tsan, __tsan_switch_to_fiber_no_sync));
    rl_emu_switch(&f->sp, g_sched_sp);
}

[[noreturn]] void fiber_main()
{
    TSAN(__tsan_acquire(&g_sync_start));
    g_body(g_ctx);
    TSAN(__tsan_release(&g_sync_end));
    g_cur->state = F_DONE;
    yield_fiber(g_cur);
    __builtin_unreachable();
}

// A fresh fiber's stack: six zero registers, then fiber_main as the return
// address, so that fiber_main starts with the stack aligned as after a call.
void *fresh_stack(char *lo, size_t size)
{
    uintptr_t top = ((uintptr_t)lo + size) & ~(uintptr_t)15;
    void **sp = (void **)(top - 64);
    for (int i = 0; i < 6; i++)
        sp[i] = nullptr;
    sp[6] = (void *)fiber_main;
    sp[7] = nullptr;
    return sp;
}

void ensure_stacks(size_t n)
{
    if (n <= g_nstacks)
        return;
    size_t len = 1024 * (kStack + kPage);
    g_stacks = (char *)mmap(nullptr, len, PROT_READ | PROT_WRITE,
                            MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (g_stacks == MAP_FAILED) {
        fprintf(stderr, "cuda_emu: no memory for the threads' stacks\n");
        abort();
    }
    for (size_t i = 0; i < 1024; i++) // a guard page below each stack
        mprotect(g_stacks + i * (kStack + kPage), kPage, PROT_NONE);
    g_nstacks = 1024;
    g_fibers.resize(1024);
#ifdef RL_CUDA_EMU_TSAN
    for (Fiber &f : g_fibers)
        f.tsan = __tsan_create_fiber(0);
#endif
}

void fail(const char *what)
{
    fprintf(stderr, "cuda_emu: kernel %s, block (%u,%u,%u): %s\n", g_kernel, rl_emu_blockIdx.x,
            rl_emu_blockIdx.y, rl_emu_blockIdx.z, what);
    g_failed = true;
}

// Runs one block to its end; false when it stopped on a divergence.
bool run_block(unsigned nthreads)
{
    const dim3 bd = rl_emu_blockDim;
    for (unsigned t = 0; t < nthreads; t++) {
        Fiber &f = g_fibers[t];
        f.state = F_RUN;
        f.lin = t;
        f.tid = {t % bd.x, (t / bd.x) % bd.y, t / (bd.x * bd.y)};
        f.shfl_seq = 0;
        f.bars = 0;
        f.sp = fresh_stack(g_stacks + t * (kStack + kPage) + kPage, kStack);
    }
    // a thread slot's TSan fiber serves every block: the host's release
    // before a block and acquire after it order the blocks anyway
    TSAN(g_sched_tsan = __tsan_get_current_fiber());
    TSAN(__tsan_release(&g_sync_start));
    struct EndOfBlock {
        ~EndOfBlock() { TSAN(__tsan_acquire(&g_sync_end)); }
    } end_;
    unsigned warps = (nthreads + 31) / 32;
    static int reverse = -1;
    if (reverse < 0) {
        const char *e = getenv("RL_CUDA_EMU_ORDER");
        reverse = e && strcmp(e, "reverse") == 0;
    }
    for (;;) {
        for (unsigned k = 0; k < nthreads; k++) {
            unsigned t = reverse ? nthreads - 1 - k : k;
            Fiber &f = g_fibers[t];
            if (f.state != F_RUN)
                continue;
            g_cur = &f;
            rl_emu_threadIdx = f.tid;
            TSAN(__tsan_switch_to_fiber(f.tsan, __tsan_switch_to_fiber_no_sync));
            rl_emu_switch(&g_sched_sp, f.sp);
        }
        g_cur = nullptr;
        unsigned done = 0, bar = 0, shfl = 0;
        for (unsigned t = 0; t < nthreads; t++) {
            int s = g_fibers[t].state;
            done += s == F_DONE;
            bar += s == F_BAR;
            shfl += s == F_SHFL;
        }
        if (done == nthreads)
            return true;
        bool released = false;
        for (unsigned w = 0; w < warps; w++) {
            unsigned lo = w * 32, hi = lo + 32 < nthreads ? lo + 32 : nthreads, in = 0;
            for (unsigned t = lo; t < hi; t++)
                in += g_fibers[t].state == F_SHFL;
            if (in == 0)
                continue;
            if (in != 32) {
                char m[200];
                snprintf(m, sizeof m, "a full-warp shuffle reached by %u of the 32 lanes of warp %u "
                         "(the block has %u threads: a warp's lanes must all exist and all arrive)",
                         in, w, nthreads);
                fail(m);
                return false;
            }
            for (unsigned t = lo; t < hi; t++)
                g_fibers[t].state = F_RUN;
            released = true;
        }
        if (released)
            continue;
        if (bar + done == nthreads && done == 0) {
            for (unsigned t = 0; t < nthreads; t++)
                g_fibers[t].state = F_RUN;
            continue;
        }
        char m[200];
        snprintf(m, sizeof m, "__syncthreads reached by %u threads while %u had returned (a barrier "
                 "every thread of the block must reach)", bar, done);
        fail(m);
        return false;
    }
}

std::map<const void *, int> g_attr; // kernel -> max dynamic shared memory

double now_ms()
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

} // namespace

// ---- device side ----------------------------------------------------------------

void __syncthreads(void)
{
    Fiber *f = g_cur;
    char *obj = &g_sync_bar[f->bars++ & 1];
    TSAN(__tsan_release(obj));
    f->state = F_BAR;
    yield_fiber(f);
    TSAN(__tsan_acquire(obj));
    (void)obj;
}

void rl_emu_syncwarp(unsigned)
{
    Fiber *f = g_cur;
    char *obj = &g_sync_warp[(f->lin / 32) & 31][f->shfl_seq++ & 1];
    TSAN(__tsan_release(obj));
    f->state = F_SHFL;
    yield_fiber(f);
    TSAN(__tsan_acquire(obj));
    (void)obj;
}

// Each lane writes its value into the slot of its shuffle's parity, all the
// warp's lanes arrive, then each reads its partner's: a lane that runs ahead
// to its next shuffle writes the other parity.
template <typename T> static T shfl_xor(T v, int o, T Slot::*field)
{
    Fiber *f = g_cur;
    int par = f->shfl_seq++ & 1;
    g_shfl[par][f->lin].*field = v;
    char *obj = &g_sync_warp[(f->lin / 32) & 31][par];
    TSAN(__tsan_release(obj));
    f->state = F_SHFL;
    yield_fiber(f);
    TSAN(__tsan_acquire(obj));
    (void)obj;
    unsigned partner = (f->lin & ~31u) | ((f->lin & 31u) ^ (unsigned)(o & 31));
    return g_shfl[par][partner].*field;
}
float rl_emu_shfl_xor_f(unsigned, float v, int o) { return shfl_xor(v, o, &Slot::f); }
double rl_emu_shfl_xor_d(unsigned, double v, int o) { return shfl_xor(v, o, &Slot::d); }
int rl_emu_shfl_xor_i(unsigned, int v, int o) { return shfl_xor(v, o, &Slot::i); }

void *rl_emu_dyn_smem(void) { return g_smem; }

cudaError_t rl_emu_func_attr(const void *key, cudaFuncAttribute attr, int value)
{
    std::lock_guard<std::recursive_mutex> lk(g_mu);
    if (attr != cudaFuncAttributeMaxDynamicSharedMemorySize || value < 0 || value > kOptinSmem)
        return note(cudaErrorInvalidValue);
    g_attr[key] = value;
    return cudaSuccess;
}

void rl_emu_run(const char *name, const void *key, const rl_emu_config &c, void (*body)(void *),
                void *ctx)
{
    std::lock_guard<std::recursive_mutex> lk(g_mu);
    init_once();
    if (g_sticky != cudaSuccess)
        return;
    unsigned long long nthreads = (unsigned long long)c.block.x * c.block.y * c.block.z;
    if (nthreads == 0 || nthreads > 1024 || c.block.z > 64 || c.grid.x == 0 || c.grid.y == 0 ||
        c.grid.z == 0 || c.grid.x > 2147483647u || c.grid.y > 65535 || c.grid.z > 65535) {
        fprintf(stderr, "cuda_emu: kernel %s: invalid configuration grid (%u,%u,%u) block (%u,%u,%u)\n",
                name, c.grid.x, c.grid.y, c.grid.z, c.block.x, c.block.y, c.block.z);
        note(cudaErrorInvalidConfiguration);
        return;
    }
    int allowed = kDefaultSmem;
    auto at = g_attr.find(key);
    if (at != g_attr.end() && at->second > allowed)
        allowed = at->second;
    if (c.smem > (size_t)allowed) {
        fprintf(stderr, "cuda_emu: kernel %s: %zu bytes of dynamic shared memory, %d allowed "
                "(cudaFuncSetAttribute raises the 48 KiB default up to %d)\n", name, c.smem,
                allowed, kOptinSmem);
        note(cudaErrorInvalidValue);
        return;
    }
    ensure_stacks((size_t)nthreads);
    // the dynamic shared memory ends at a guard page
    size_t sm = (c.smem + 15) & ~(size_t)15;
    size_t data = (sm + kPage - 1) & ~(kPage - 1);
    if (data + kPage > g_smem_map_len) {
        if (g_smem_map)
            munmap(g_smem_map, g_smem_map_len);
        g_smem_map_len = data + kPage;
        g_smem_map = (char *)mmap(nullptr, g_smem_map_len, PROT_READ | PROT_WRITE,
                                  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    }
    size_t cur_data = g_smem_map_len - kPage;
    mprotect(g_smem_map, cur_data, PROT_READ | PROT_WRITE);
    mprotect(g_smem_map + cur_data, kPage, PROT_NONE);
    g_smem = g_smem_map + cur_data - sm;
    Access open_;
    g_kernel = name;
    g_body = body;
    g_ctx = ctx;
    g_failed = false;
    rl_emu_blockDim = c.block;
    rl_emu_gridDim = c.grid;
    for (unsigned z = 0; z < c.grid.z && !g_failed; z++)
        for (unsigned y = 0; y < c.grid.y && !g_failed; y++)
            for (unsigned x = 0; x < c.grid.x && !g_failed; x++) {
                rl_emu_blockIdx = {x, y, z};
                memset(g_smem, 0xff, sm); // NaN: a read of shared memory nothing wrote shows
                if (!run_block((unsigned)nthreads))
                    g_sticky = g_last = cudaErrorLaunchFailure;
            }
    g_kernel = nullptr;
}

// ---- runtime API --------------------------------------------------------------------

extern "C" {

cudaError_t cudaGetDeviceCount(int *count)
{
    const char *e = getenv("RL_CUDA_EMU_DEVICES");
    *count = e ? atoi(e) : 1;
    return *count > 0 ? cudaSuccess : note(cudaErrorNoDevice);
}
cudaError_t cudaGetDevice(int *device) { *device = 0; return cudaSuccess; }
cudaError_t cudaSetDevice(int device) { return device == 0 ? cudaSuccess : note(cudaErrorInvalidValue); }
cudaError_t cudaDeviceGetAttribute(int *value, cudaDeviceAttr attr, int device)
{
    if (device != 0)
        return note(cudaErrorInvalidValue);
    if (attr == cudaDevAttrComputeCapabilityMajor) { // an H100's 9.0
        *value = 9;
        return cudaSuccess;
    }
    if (attr != cudaDevAttrMaxSharedMemoryPerBlockOptin)
        return note(cudaErrorInvalidValue);
    *value = kOptinSmem;
    return cudaSuccess;
}
cudaError_t cudaDeviceSynchronize(void) { return g_sticky; }
cudaError_t cudaGetLastError(void)
{
    std::lock_guard<std::recursive_mutex> lk(g_mu);
    cudaError_t e = g_last;
    g_last = g_sticky;
    return e;
}
cudaError_t cudaPeekAtLastError(void) { return g_last; }
const char *cudaGetErrorName(cudaError_t e) { return cudaGetErrorString(e); }
const char *cudaGetErrorString(cudaError_t e)
{
    switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    case cudaErrorInvalidDevicePointer: return "invalid device pointer";
    case cudaErrorInvalidMemcpyDirection: return "invalid copy direction for memcpy";
    case cudaErrorInvalidResourceHandle: return "invalid resource handle";
    case cudaErrorNotReady: return "device not ready";
    case cudaErrorNoDevice: return "no CUDA-capable device is detected";
    case cudaErrorNotSupported: return "operation not supported";
    case cudaErrorLaunchFailure: return "unspecified launch failure";
    }
    return "unknown error";
}
cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total_bytes)
{
    *total_bytes = (size_t)80 << 30;
    size_t used = 0;
    for (auto &kv : g_blocks)
        used += kv.second.size;
    *free_bytes = *total_bytes - used;
    return cudaSuccess;
}

cudaError_t cudaMalloc(void **ptr, size_t size)
{
    std::lock_guard<std::recursive_mutex> lk(g_mu);
    init_once();
    *ptr = nullptr;
    if (g_sticky)
        return g_sticky;
    if (size == 0)
        return cudaSuccess;
    int fd = memfd_create("rl_cuda_emu", MFD_CLOEXEC);
    size_t rounded = (size + 255) & ~(size_t)255;
    size_t data = (rounded + kPage - 1) & ~(kPage - 1);
    if (fd >= 0 && ftruncate(fd, (off_t)data) != 0) {
        close(fd);
        return note(cudaErrorMemoryAllocation);
    }
    Block b;
    if (!map_block(&b, size, fd)) {
        if (fd >= 0)
            close(fd);
        return note(cudaErrorMemoryAllocation);
    }
    memset(b.ptr, 0xff, size); // a GPU's fresh memory is garbage: NaN shows a read of it
    g_blocks[(uintptr_t)b.ptr] = b;
    settle(b);
    *ptr = b.ptr;
    return cudaSuccess;
}

cudaError_t cudaFree(void *ptr)
{
    std::lock_guard<std::recursive_mutex> lk(g_mu);
    if (!ptr)
        return cudaSuccess;
    auto it = g_blocks.find((uintptr_t)ptr);
    if (it == g_blocks.end() || it->second.opened) {
        fprintf(stderr, "cuda_emu: cudaFree(%p): %s\n", ptr,
                it == g_blocks.end() ? "not the start of a cudaMalloc block"
                                     : "an IPC mapping (cudaIpcCloseMemHandle closes it)");
        return note(cudaErrorInvalidValue);
    }
    munmap(it->second.map, it->second.map_len);
    if (it->second.fd >= 0)
        close(it->second.fd);
    g_blocks.erase(it);
    return cudaSuccess;
}

static cudaError_t check_side(const void *p, size_t n, bool device, const char *what)
{
    if (n == 0)
        return cudaSuccess;
    bool dev = find(p, n) != nullptr;
    if (device && !dev) {
        fprintf(stderr, "cuda_emu: %s: %p (+%zu bytes) is not inside one device block%s\n", what, p, n,
                in_any_map(p) ? " (it runs past the block's end)" : "");
        return note(cudaErrorInvalidValue);
    }
    if (!device && in_any_map(p)) {
        fprintf(stderr, "cuda_emu: %s: %p is device memory where the copy's kind says host\n", what, p);
        return note(cudaErrorInvalidValue);
    }
    return cudaSuccess;
}

cudaError_t cudaMemcpy(void *dst, const void *src, size_t count, cudaMemcpyKind kind)
{
    std::lock_guard<std::recursive_mutex> lk(g_mu);
    if (g_sticky)
        return g_sticky;
    if (kind < cudaMemcpyHostToHost || kind > cudaMemcpyDeviceToDevice)
        return note(cudaErrorInvalidMemcpyDirection);
    bool src_dev = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
    bool dst_dev = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
    cudaError_t e = check_side(src, count, src_dev, "cudaMemcpy source");
    if (e == cudaSuccess)
        e = check_side(dst, count, dst_dev, "cudaMemcpy destination");
    if (e != cudaSuccess)
        return e;
    Access open_;
    memmove(dst, src, count);
    return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t count, cudaMemcpyKind kind,
                            cudaStream_t)
{
    return cudaMemcpy(dst, src, count, kind);
}

cudaError_t cudaMemset(void *ptr, int value, size_t count)
{
    std::lock_guard<std::recursive_mutex> lk(g_mu);
    if (g_sticky)
        return g_sticky;
    cudaError_t e = check_side(ptr, count, true, "cudaMemset");
    if (e != cudaSuccess)
        return e;
    Access open_;
    memset(ptr, value, count);
    return cudaSuccess;
}
cudaError_t cudaMemsetAsync(void *ptr, int value, size_t count, cudaStream_t)
{
    return cudaMemset(ptr, value, count);
}

struct rl_emu_stream { int unused; };
struct rl_emu_event { double ms; unsigned flags; bool recorded; };

cudaError_t cudaStreamCreate(cudaStream_t *s) { *s = new rl_emu_stream(); return cudaSuccess; }
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned) { return cudaStreamCreate(s); }
cudaError_t cudaStreamDestroy(cudaStream_t s) { delete s; return cudaSuccess; }
cudaError_t cudaStreamSynchronize(cudaStream_t) { return g_sticky; }
cudaError_t cudaStreamWaitEvent(cudaStream_t, cudaEvent_t e, unsigned)
{
    return e ? cudaSuccess : note(cudaErrorInvalidResourceHandle);
}
cudaError_t cudaEventCreate(cudaEvent_t *e) { return cudaEventCreateWithFlags(e, 0); }
cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned flags)
{
    *e = new rl_emu_event{0.0, flags, false};
    return cudaSuccess;
}
cudaError_t cudaEventDestroy(cudaEvent_t e) { delete e; return cudaSuccess; }
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t)
{
    if (!e)
        return note(cudaErrorInvalidResourceHandle);
    e->ms = now_ms();
    e->recorded = true;
    return cudaSuccess;
}
cudaError_t cudaEventQuery(cudaEvent_t e) { return e ? cudaSuccess : note(cudaErrorInvalidResourceHandle); }
cudaError_t cudaEventSynchronize(cudaEvent_t e) { return cudaEventQuery(e); }
cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t a, cudaEvent_t b)
{
    if (!a || !b || (a->flags | b->flags) & cudaEventDisableTiming)
        return note(cudaErrorInvalidResourceHandle);
    if (!a->recorded || !b->recorded)
        return note(cudaErrorNotReady);
    *ms = (float)(b->ms - a->ms);
    return cudaSuccess;
}

// ---- IPC ------------------------------------------------------------------------

struct IpcHandle {
    char magic[8];
    int32_t pid, fd;
    uint64_t size;
};
static_assert(sizeof(IpcHandle) <= sizeof(cudaIpcMemHandle_t), "handle fits");

cudaError_t cudaIpcGetMemHandle(cudaIpcMemHandle_t *handle, void *ptr)
{
    std::lock_guard<std::recursive_mutex> lk(g_mu);
    auto it = g_blocks.find((uintptr_t)ptr);
    if (it == g_blocks.end() || it->second.opened || it->second.fd < 0) {
        fprintf(stderr, "cuda_emu: cudaIpcGetMemHandle(%p): not the start of an exportable cudaMalloc block\n", ptr);
        return note(cudaErrorInvalidValue);
    }
    IpcHandle h;
    memset(&h, 0, sizeof h);
    memcpy(h.magic, "rlcuemu", 8);
    h.pid = (int32_t)getpid();
    h.fd = it->second.fd;
    h.size = it->second.size;
    memset(handle, 0, sizeof *handle);
    memcpy(handle, &h, sizeof h);
    return cudaSuccess;
}

cudaError_t cudaIpcOpenMemHandle(void **ptr, cudaIpcMemHandle_t handle, unsigned)
{
    std::lock_guard<std::recursive_mutex> lk(g_mu);
    init_once();
    IpcHandle h;
    memcpy(&h, &handle, sizeof h);
    *ptr = nullptr;
    if (memcmp(h.magic, "rlcuemu", 8) != 0)
        return note(cudaErrorInvalidValue);
    if (h.pid == (int32_t)getpid()) // as the runtime: a process cannot open its own handle
        return note(cudaErrorInvalidValue);
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/fd/%d", (int)h.pid, (int)h.fd);
    int fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0)
        return note(cudaErrorInvalidValue);
    Block b;
    if (!map_block(&b, (size_t)h.size, fd)) {
        close(fd);
        return note(cudaErrorMemoryAllocation);
    }
    close(fd);
    b.fd = -1;
    b.opened = true;
    g_blocks[(uintptr_t)b.ptr] = b;
    settle(b);
    *ptr = b.ptr;
    return cudaSuccess;
}

cudaError_t cudaIpcCloseMemHandle(void *ptr)
{
    std::lock_guard<std::recursive_mutex> lk(g_mu);
    auto it = g_blocks.find((uintptr_t)ptr);
    if (it == g_blocks.end() || !it->second.opened)
        return note(cudaErrorInvalidValue);
    munmap(it->second.map, it->second.map_len);
    g_blocks.erase(it);
    return cudaSuccess;
}

// ---- cuBLAS ---------------------------------------------------------------------

struct rl_emu_blas { cublasMath_t mode; };

cublasStatus_t cublasCreate(cublasHandle_t *h) { *h = new rl_emu_blas{CUBLAS_DEFAULT_MATH}; return CUBLAS_STATUS_SUCCESS; }
cublasStatus_t cublasDestroy(cublasHandle_t h) { delete h; return CUBLAS_STATUS_SUCCESS; }
cublasStatus_t cublasSetMathMode(cublasHandle_t h, cublasMath_t m)
{
    if (!h)
        return CUBLAS_STATUS_NOT_INITIALIZED;
    h->mode = m;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasGetMathMode(cublasHandle_t h, cublasMath_t *m)
{
    if (!h)
        return CUBLAS_STATUS_NOT_INITIALIZED;
    *m = h->mode;
    return CUBLAS_STATUS_SUCCESS;
}

// cuBLAS's argument checks for a column-major C (m, n) = op(A) op(B): A is
// (rows_a = ta ? k : m) by (ta ? m : k) with lda >= rows_a, and so on; every
// operand inside one device block.
static bool gemm_args(const char *fn, cublasOperation_t ta, cublasOperation_t tb, int m, int n,
                      int k, const void *A, int lda, const void *B, int ldb, const void *C, int ldc,
                      size_t ea, size_t eb, size_t ec)
{
    int ra = ta == CUBLAS_OP_N ? m : k, ca = ta == CUBLAS_OP_N ? k : m;
    int rb = tb == CUBLAS_OP_N ? k : n, cb = tb == CUBLAS_OP_N ? n : k;
    if (m < 0 || n < 0 || k < 0 || lda < (ra > 1 ? ra : 1) || ldb < (rb > 1 ? rb : 1) ||
        ldc < (m > 1 ? m : 1) || ta == CUBLAS_OP_C || tb == CUBLAS_OP_C) {
        fprintf(stderr, "cuda_emu: %s: invalid m=%d n=%d k=%d lda=%d ldb=%d ldc=%d\n", fn, m, n, k,
                lda, ldb, ldc);
        return false;
    }
    struct { const void *p; size_t bytes; const char *name; } ops[3] = {
        {A, (ra && ca) ? ((size_t)lda * (ca - 1) + ra) * ea : 0, "A"},
        {B, (rb && cb) ? ((size_t)ldb * (cb - 1) + rb) * eb : 0, "B"},
        {C, (m && n) ? ((size_t)ldc * (n - 1) + m) * ec : 0, "C"}};
    for (auto &o : ops)
        if (o.bytes && !find(o.p, o.bytes)) {
            fprintf(stderr, "cuda_emu: %s: operand %s (%p, %zu bytes) is not inside one device block\n",
                    fn, o.name, o.p, o.bytes);
            return false;
        }
    return true;
}

static CBLAS_TRANSPOSE tr(cublasOperation_t t) { return t == CUBLAS_OP_N ? CblasNoTrans : CblasTrans; }

cublasStatus_t cublasSgemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n,
                           int k, const float *alpha, const float *A, int lda, const float *B,
                           int ldb, const float *beta, float *C, int ldc)
{
    std::lock_guard<std::recursive_mutex> lk(g_mu);
    if (!h)
        return CUBLAS_STATUS_NOT_INITIALIZED;
    if (g_sticky)
        return CUBLAS_STATUS_NOT_SUPPORTED;
    if (!gemm_args("cublasSgemm", ta, tb, m, n, k, A, lda, B, ldb, C, ldc, 4, 4, 4))
        return CUBLAS_STATUS_INVALID_VALUE;
    if (m == 0 || n == 0)
        return CUBLAS_STATUS_SUCCESS;
    Access open_;
    cblas_sgemm(CblasColMajor, tr(ta), tr(tb), m, n, k, *alpha, A, lda > 0 ? lda : 1, B,
                ldb > 0 ? ldb : 1, *beta, C, ldc);
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSgemmStridedBatched(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb,
                                         int m, int n, int k, const float *alpha, const float *A,
                                         int lda, long long sA, const float *B, int ldb,
                                         long long sB, const float *beta, float *C, int ldc,
                                         long long sC, int count)
{
    if (count < 0)
        return CUBLAS_STATUS_INVALID_VALUE;
    for (int i = 0; i < count; i++) {
        cublasStatus_t s = cublasSgemm(h, ta, tb, m, n, k, alpha, A + i * sA, lda, B + i * sB, ldb,
                                       beta, C + i * sC, ldc);
        if (s != CUBLAS_STATUS_SUCCESS)
            return s;
    }
    return CUBLAS_STATUS_SUCCESS;
}

static float bf16_to_f32(uint16_t u)
{
    uint32_t x = (uint32_t)u << 16;
    float f;
    memcpy(&f, &x, sizeof f);
    return f;
}

// A bf16 operand (rows, cols, ld) widened into a packed float matrix.
static std::vector<float> widen(const void *p, int rows, int cols, int ld)
{
    std::vector<float> out((size_t)rows * cols);
    const uint16_t *s = (const uint16_t *)p;
    for (int c = 0; c < cols; c++)
        for (int r = 0; r < rows; r++)
            out[(size_t)c * rows + r] = bf16_to_f32(s[(size_t)c * ld + r]);
    return out;
}

cublasStatus_t cublasGemmEx(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m,
                            int n, int k, const void *alpha, const void *A, cudaDataType Atype,
                            int lda, const void *B, cudaDataType Btype, int ldb, const void *beta,
                            void *C, cudaDataType Ctype, int ldc, cublasComputeType_t compute,
                            cublasGemmAlgo_t)
{
    std::lock_guard<std::recursive_mutex> lk(g_mu);
    if (!h)
        return CUBLAS_STATUS_NOT_INITIALIZED;
    if (g_sticky)
        return CUBLAS_STATUS_NOT_SUPPORTED;
    if (Atype != CUDA_R_16BF || Btype != CUDA_R_16BF || Ctype != CUDA_R_32F ||
        compute != CUBLAS_COMPUTE_32F) {
        fprintf(stderr, "cuda_emu: cublasGemmEx: only bf16 x bf16 -> f32 with CUBLAS_COMPUTE_32F\n");
        return CUBLAS_STATUS_NOT_SUPPORTED;
    }
    if (!gemm_args("cublasGemmEx", ta, tb, m, n, k, A, lda, B, ldb, C, ldc, 2, 2, 4))
        return CUBLAS_STATUS_INVALID_VALUE;
    if (m == 0 || n == 0)
        return CUBLAS_STATUS_SUCCESS;
    Access open_;
    int ra = ta == CUBLAS_OP_N ? m : k, ca = ta == CUBLAS_OP_N ? k : m;
    int rb = tb == CUBLAS_OP_N ? k : n, cb = tb == CUBLAS_OP_N ? n : k;
    std::vector<float> a = widen(A, ra, ca, lda), b = widen(B, rb, cb, ldb);
    cblas_sgemm(CblasColMajor, tr(ta), tr(tb), m, n, k, *(const float *)alpha, a.data(),
                ra > 0 ? ra : 1, b.data(), rb > 0 ? rb : 1, *(const float *)beta, (float *)C, ldc);
    return CUBLAS_STATUS_SUCCESS;
}

} // extern "C"
