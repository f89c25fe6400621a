/* cuda_runtime_api.h — the subset of the CUDA runtime API that rlrt calls,
 * implemented on the host by tests/cuda_emu/cuda_emu.cpp (`make CUDA=emu`:
 * the GPU tests run without a GPU). Not NVIDIA's header: the names and
 * values rlrt uses, with the runtime's documented semantics (errors returned,
 * the last one kept for cudaGetLastError). "Device" memory is host memory
 * that host code cannot touch outside a copy, a kernel or a cuBLAS call
 * (cuda_emu.cpp: a fault there names the allocation). C and C++. */
#ifndef RL_CUDA_EMU_RUNTIME_API_H
#define RL_CUDA_EMU_RUNTIME_API_H

#include <stddef.h>

#define RL_CUDA_EMU 1

#ifdef __cplusplus
#define RL_EMU_DEFAULT(x) = x
extern "C" {
#else
#define RL_EMU_DEFAULT(x)
#endif

typedef enum cudaError {
    cudaSuccess = 0,
    cudaErrorInvalidValue = 1,
    cudaErrorMemoryAllocation = 2,
    cudaErrorInvalidConfiguration = 9,
    cudaErrorInvalidDevicePointer = 17,
    cudaErrorInvalidMemcpyDirection = 21,
    cudaErrorInvalidResourceHandle = 400,
    cudaErrorNotReady = 600,
    cudaErrorNoDevice = 100,
    cudaErrorNotSupported = 801,
    cudaErrorLaunchFailure = 719
} cudaError_t;

typedef enum cudaMemcpyKind {
    cudaMemcpyHostToHost = 0,
    cudaMemcpyHostToDevice = 1,
    cudaMemcpyDeviceToHost = 2,
    cudaMemcpyDeviceToDevice = 3,
    cudaMemcpyDefault = 4
} cudaMemcpyKind;

typedef enum cudaDeviceAttr {
    cudaDevAttrComputeCapabilityMajor = 75,
    cudaDevAttrMaxSharedMemoryPerBlockOptin = 97
} cudaDeviceAttr;

typedef enum cudaFuncAttribute {
    cudaFuncAttributeMaxDynamicSharedMemorySize = 8
} cudaFuncAttribute;

typedef struct rl_emu_stream *cudaStream_t;
typedef struct rl_emu_event *cudaEvent_t;
typedef struct cudaIpcMemHandle_st {
    char reserved[64];
} cudaIpcMemHandle_t;

#define cudaEventDefault 0x00
#define cudaEventDisableTiming 0x02
#define cudaIpcMemLazyEnablePeerAccess 0x01
#define cudaStreamNonBlocking 0x01

cudaError_t cudaGetDeviceCount(int *count);
cudaError_t cudaGetDevice(int *device);
cudaError_t cudaSetDevice(int device);
cudaError_t cudaDeviceGetAttribute(int *value, cudaDeviceAttr attr, int device);
cudaError_t cudaDeviceSynchronize(void);
cudaError_t cudaGetLastError(void);
cudaError_t cudaPeekAtLastError(void);
const char *cudaGetErrorString(cudaError_t error);
const char *cudaGetErrorName(cudaError_t error);
cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total_bytes);

cudaError_t cudaMalloc(void **ptr, size_t size);
cudaError_t cudaFree(void *ptr);
cudaError_t cudaMemcpy(void *dst, const void *src, size_t count, cudaMemcpyKind kind);
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t count, cudaMemcpyKind kind,
                            cudaStream_t stream RL_EMU_DEFAULT(0));
cudaError_t cudaMemset(void *ptr, int value, size_t count);
cudaError_t cudaMemsetAsync(void *ptr, int value, size_t count, cudaStream_t stream RL_EMU_DEFAULT(0));

cudaError_t cudaStreamCreate(cudaStream_t *stream);
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *stream, unsigned flags);
cudaError_t cudaStreamDestroy(cudaStream_t stream);
cudaError_t cudaStreamSynchronize(cudaStream_t stream);
cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned flags RL_EMU_DEFAULT(0));

cudaError_t cudaEventCreate(cudaEvent_t *event);
cudaError_t cudaEventCreateWithFlags(cudaEvent_t *event, unsigned flags);
cudaError_t cudaEventDestroy(cudaEvent_t event);
cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream RL_EMU_DEFAULT(0));
cudaError_t cudaEventQuery(cudaEvent_t event);
cudaError_t cudaEventSynchronize(cudaEvent_t event);
cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end);

cudaError_t cudaIpcGetMemHandle(cudaIpcMemHandle_t *handle, void *ptr);
cudaError_t cudaIpcOpenMemHandle(void **ptr, cudaIpcMemHandle_t handle, unsigned flags);
cudaError_t cudaIpcCloseMemHandle(void *ptr);

#ifdef __cplusplus
}
#endif
#endif
