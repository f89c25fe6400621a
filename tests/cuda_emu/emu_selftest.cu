// emu_selftest.cu — the host emulation catches what it says it catches
// (tests/cuda_emu/include/cuda_runtime.h). Each case runs in a child process
// (a fault kills it) and is judged on the child's exit and its stderr: a
// reduction with barriers and shuffles gives the right sum (the control),
// and each planted bug is reported — a read past a device block, host code
// reading device memory, a barrier some threads skip, a shuffle on a partial
// warp, a write past the dynamic shared memory, too much shared memory
// without the kernel's attribute, a block of 2048 threads, a copy whose kind
// calls a host pointer device memory, a GEMM with a short leading dimension,
// fresh device memory read as NaN, a process opening its own IPC handle, a
// read of another thread's shared-memory write without a barrier (NaN in
// one of the two thread orders).
// Compiled by g++ after tests/cuda_emu/emu_cu.pl (`make CUDA=emu`); prints
// one line per case and "N passed, N failed". Built with EMU_TSAN=1, the two
// race cases must be reported by ThreadSanitizer and the others must not.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

__global__ void k_block_sum(float *out, const float *in, int n)
{
    extern __shared__ float sh[];
    float v = 0.0f;
    for (int i = threadIdx.x; i < n; i += blockDim.x)
        v += in[i];
    sh[threadIdx.x] = v;
    __syncthreads();
    for (int s = blockDim.x / 2; s >= 32; s >>= 1) {
        if (threadIdx.x < s)
            sh[threadIdx.x] += sh[threadIdx.x + s];
        __syncthreads();
    }
    if (threadIdx.x < 32) {
        v = sh[threadIdx.x];
        for (int o = 16; o > 0; o >>= 1)
            v += __shfl_xor_sync(0xffffffffu, v, o);
        if (threadIdx.x == 0)
            out[blockIdx.x] = v;
    }
}

__global__ void k_read_past(float *out, const float *in, int n)
{
    out[threadIdx.x] = in[threadIdx.x + n]; // n floats in the block: past its end
}

__global__ void k_early_return(float *out)
{
    if (threadIdx.x < 16)
        return;
    __syncthreads();
    out[threadIdx.x] = 1.0f;
}

__global__ void k_shuffle(float *out)
{
    out[threadIdx.x] = __shfl_xor_sync(0xffffffffu, (float)threadIdx.x, 1);
}

__global__ void k_smem_past(float *out, int n)
{
    extern __shared__ float sh[];
    sh[threadIdx.x + n] = 1.0f; // n floats of dynamic shared memory
    out[threadIdx.x] = sh[threadIdx.x];
}

__global__ void k_copy(float *out, const float *in)
{
    out[threadIdx.x] = in[threadIdx.x];
}

__global__ void k_race(float *out)
{
    extern __shared__ float sh[];
    sh[threadIdx.x] = (float)threadIdx.x;
    out[threadIdx.x] = sh[(threadIdx.x + 1) % blockDim.x]; // no barrier: a race
}

static float *dev(size_t n)
{
    void *p = nullptr;
    if (cudaMalloc(&p, n * sizeof(float)) != cudaSuccess) {
        fprintf(stderr, "cudaMalloc failed\n");
        exit(3);
    }
    return (float *)p;
}

// Each case returns 0 when the emulator behaved as expected (or dies, for
// the cases whose expectation is a reported fault).
static int c_reduction(void)
{
    enum { n = 1000 };
    float h[n];
    double want = 0.0;
    for (int i = 0; i < n; i++) {
        h[i] = (float)(i % 17) * 0.25f;
        want += h[i];
    }
    float *d = dev(n), *o = dev(1), got = 0.0f;
    cudaMemcpy(d, h, sizeof h, cudaMemcpyHostToDevice);
    k_block_sum<<<1, 256, 256 * sizeof(float)>>>(o, d, n);
    if (cudaGetLastError() != cudaSuccess || cudaDeviceSynchronize() != cudaSuccess)
        return 1;
    cudaMemcpy(&got, o, sizeof got, cudaMemcpyDeviceToHost);
    return fabs(got - want) > 1e-3 ? 1 : 0;
}

static int c_read_past(void)
{
    float *d = dev(64), *o = dev(64);
    k_read_past<<<1, 64>>>(o, d, 64);
    return 1; // not reached: the read faults
}

static int c_host_touch(void)
{
    float *d = dev(64);
    volatile float x = d[3]; // host code reading device memory
    (void)x;
    return 1;
}

static int c_early_return(void)
{
    float *o = dev(64);
    k_early_return<<<1, 64>>>(o);
    cudaError_t e = cudaDeviceSynchronize();
    // sticky: every later call fails too, as after a trapped kernel
    void *p = nullptr;
    return e == cudaErrorLaunchFailure && cudaMalloc(&p, 16) == cudaErrorLaunchFailure ? 0 : 1;
}

static int c_partial_warp(void)
{
    float *o = dev(16);
    k_shuffle<<<1, 16>>>(o);
    return cudaDeviceSynchronize() == cudaErrorLaunchFailure ? 0 : 1;
}

static int c_full_warp(void) // the control of the one above
{
    float *o = dev(32), h[32];
    k_shuffle<<<1, 32>>>(o);
    if (cudaDeviceSynchronize() != cudaSuccess)
        return 1;
    cudaMemcpy(h, o, sizeof h, cudaMemcpyDeviceToHost);
    for (int i = 0; i < 32; i++)
        if (h[i] != (float)(i ^ 1))
            return 1;
    return 0;
}

static int c_smem_past(void)
{
    float *o = dev(64);
    k_smem_past<<<1, 64, 64 * sizeof(float)>>>(o, 64);
    return 1; // not reached
}

static int c_smem_attribute(void)
{
    float *o = dev(64), *d = dev(64);
    size_t big = 100 * 1024;
    k_copy<<<1, 64, big>>>(o, d);
    if (cudaGetLastError() != cudaErrorInvalidValue)
        return 1;
    if (cudaFuncSetAttribute(k_copy, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)big) != cudaSuccess)
        return 1;
    k_copy<<<1, 64, big>>>(o, d);
    if (cudaGetLastError() != cudaSuccess)
        return 1;
    k_copy<<<1, 64, 240 * 1024>>>(o, d); // past an H100's opt-in limit
    return cudaGetLastError() == cudaErrorInvalidValue ? 0 : 1;
}

static int c_block_2048(void)
{
    float *o = dev(64), *d = dev(64);
    k_copy<<<1, 2048>>>(o, d);
    // not sticky: the next launch works
    if (cudaGetLastError() != cudaErrorInvalidConfiguration)
        return 1;
    k_copy<<<1, 64>>>(o, d);
    return cudaGetLastError() == cudaSuccess ? 0 : 1;
}

static int c_copy_kind(void)
{
    float h[4] = {0}, h2[4];
    float *d = dev(4);
    if (cudaMemcpy(h2, h, sizeof h, cudaMemcpyHostToDevice) != cudaErrorInvalidValue)
        return 1; // h2 is host memory
    if (cudaMemcpy(d, h, 2 * sizeof h, cudaMemcpyHostToDevice) != cudaErrorInvalidValue)
        return 1; // runs past the block
    if (cudaMemcpy(d, h, sizeof h, cudaMemcpyHostToHost) != cudaErrorInvalidValue)
        return 1; // d is device memory
    return cudaMemcpy(d, h, sizeof h, cudaMemcpyHostToDevice) == cudaSuccess ? 0 : 1;
}

static int c_gemm_lda(void)
{
    cublasHandle_t h;
    cublasCreate(&h);
    float *A = dev(6), *B = dev(6), *C = dev(4), one = 1.0f, zero = 0.0f;
    float ha[6] = {1, 2, 3, 4, 5, 6}, hb[6] = {1, 0, 0, 1, 1, 1}, hc[4];
    cudaMemcpy(A, ha, sizeof ha, cudaMemcpyHostToDevice);
    cudaMemcpy(B, hb, sizeof hb, cudaMemcpyHostToDevice);
    // column-major C (2,2) = A (2,3) B (3,2); lda 1 < 2 rows is refused
    if (cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 3, &one, A, 1, B, 3, &zero, C, 2) !=
        CUBLAS_STATUS_INVALID_VALUE)
        return 1;
    if (cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 3, &one, A, 2, B, 3, &zero, C, 2) !=
        CUBLAS_STATUS_SUCCESS)
        return 1;
    cudaMemcpy(hc, C, sizeof hc, cudaMemcpyDeviceToHost);
    // C[:,0] = A·(1,0,0) = (1,2); C[:,1] = A·(1,1,1) = (9,12)
    return hc[0] == 1 && hc[1] == 2 && hc[2] == 9 && hc[3] == 12 ? 0 : 1;
}

static int c_fresh_nan(void)
{
    float *d = dev(8), h[8];
    cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost);
    for (int i = 0; i < 8; i++)
        if (!isnan(h[i]))
            return 1;
    return 0;
}

static int c_ipc_own(void)
{
    float *d = dev(8);
    cudaIpcMemHandle_t hd;
    if (cudaIpcGetMemHandle(&hd, d) != cudaSuccess)
        return 1;
    void *p = nullptr;
    return cudaIpcOpenMemHandle(&p, hd, cudaIpcMemLazyEnablePeerAccess) != cudaSuccess ? 0 : 1;
}

// The race above reads a neighbour's write without a barrier: in index
// order thread t reads before t + 1 wrote (NaN, the block's fresh shared
// memory), in reverse order only the last thread does.
static int race(int reverse)
{
    if (reverse)
        setenv("RL_CUDA_EMU_ORDER", "reverse", 1);
    float *o = dev(64), h[64];
    k_race<<<1, 64, 64 * sizeof(float)>>>(o);
    cudaMemcpy(h, o, sizeof h, cudaMemcpyDeviceToHost);
    int nan_first = isnan(h[0]), nan_last = isnan(h[63]);
    return reverse ? !(nan_last && !nan_first) : !(nan_first && !nan_last);
}
static int c_race_forward(void) { return race(0); }
static int c_race_reverse(void) { return race(1); }

struct Case {
    const char *name;
    int (*fn)(void);
    int dies;           // 1: the child must die of a signal
    const char *report; // what its stderr must say ("" nothing)
    int race;           // 1: ThreadSanitizer (EMU_TSAN) must report a data race
};

#ifdef __SANITIZE_THREAD__
// `make CUDA=emu EMU_TSAN=1`: TSan turns a fault into exit 66 after its
// report, and reports the planted races (exit 66 too).
static const bool tsan = true;
#else
static const bool tsan = false;
#endif

int main(void)
{
    const Case cases[] = {
        {"reduction with barriers and shuffles", c_reduction, 0, "", 0},
        {"read past a device block", c_read_past, 1, "bytes past the end of the 256-byte device block", 0},
        {"host code reads device memory", c_host_touch, 1, "host code touched device memory", 0},
        {"barrier skipped by returned threads", c_early_return, 0, "__syncthreads reached by 48 threads while 16 had returned", 0},
        {"full-warp shuffle on a 16-thread block", c_partial_warp, 0, "reached by 16 of the 32 lanes", 0},
        {"full-warp shuffle on a warp", c_full_warp, 0, "", 0},
        {"write past the dynamic shared memory", c_smem_past, 1, "past the end of the dynamic shared memory", 0},
        {"dynamic shared memory over 48 KiB", c_smem_attribute, 0, "dynamic shared memory, 49152 allowed", 0},
        {"a block of 2048 threads", c_block_2048, 0, "invalid configuration", 0},
        {"copy kinds and extents", c_copy_kind, 0, "device memory where the copy's kind says host", 0},
        {"GEMM with a short leading dimension", c_gemm_lda, 0, "cublasSgemm: invalid", 0},
        {"fresh device memory is NaN", c_fresh_nan, 0, "", 0},
        {"a process opens its own IPC handle", c_ipc_own, 0, "", 0},
        {"an unsynchronised shared read, index order", c_race_forward, 0, "", 1},
        {"an unsynchronised shared read, reverse order", c_race_reverse, 0, "", 1},
    };
    int passed = 0, failed = 0;
    for (const Case &c : cases) {
        int fds[2];
        if (pipe(fds) != 0)
            return 2;
        fflush(stdout);
        pid_t pid = fork();
        if (pid == 0) {
            close(fds[0]);
            dup2(fds[1], 2);
            _exit(c.fn());
        }
        close(fds[1]);
        char err[4096];
        size_t got = 0;
        ssize_t r;
        while (got < sizeof err - 1 && (r = read(fds[0], err + got, sizeof err - 1 - got)) > 0)
            got += (size_t)r;
        err[got] = 0;
        close(fds[0]);
        int st = 0;
        waitpid(pid, &st, 0);
        bool exit66 = WIFEXITED(st) && WEXITSTATUS(st) == 66;
        bool ok = c.dies ? (WIFSIGNALED(st) || (tsan && exit66))
                         : tsan && c.race ? exit66 && strstr(err, "ThreadSanitizer: data race")
                                          : (WIFEXITED(st) && WEXITSTATUS(st) == 0);
        ok = ok && strstr(err, c.report) != nullptr;
        printf("%s: %s\n", ok ? "ok" : "FAILED", c.name);
        if (!ok)
            printf("    child %s %d; its stderr:\n%s\n", WIFSIGNALED(st) ? "killed by signal" : "exited",
                   WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st), err);
        (ok ? passed : failed)++;
    }
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
