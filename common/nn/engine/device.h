/* common/nn/engine/device.h — where tensors live and which kernels run on them.
 *
 * Purpose: models call their kernels through an rl_nn_ops table, one per
 * device, so a CUDA twin of any op can be added in common/nn/cuda without
 * touching the models. Every entry has exactly the signature of the CPU
 * function of the same name in common/nn/engine/ops.h (the convolutional
 * ones: ops_conv.h); on a CUDA table the pointers
 * are device pointers (index arrays such as ids/pos/target/mask too).
 *
 * Invariants: both tables are RL_NN_OPS, so each is complete (new entries
 * go at its end: the flow kinds' silu, time_embed and standardize, then
 * the convolutional kinds' ops_conv.h kernels are the last); the CUDA
 * table exists only in a `make CUDA=1` build. rl_nn_ops_missing() names the
 * first NULL entry of a table (one filled by hand, e.g. a test's), so a
 * model can refuse it up front instead of crashing mid-step.
 * Kernels on CUDA are asynchronous on the default stream; their errors
 * surface from rl_device_sync().
 *
 * Ownership: tables are static; buffers from rl_device_alloc() are freed
 * with rl_device_free() on the same device.
 */
#ifndef RLRT_NN_DEVICE_H
#define RLRT_NN_DEVICE_H

#include <stddef.h>
#include <stdint.h>


#ifdef __cplusplus
extern "C" {
#endif

typedef enum rl_device { RL_DEVICE_CPU = 0, RL_DEVICE_CUDA = 1 } rl_device;

/* How a model multiplies its matrices (model.precision). FP32: every
 * product in float32 (on CUDA cuBLAS's default math, TF32 off: the parity
 * mode). BF16: the inputs of the linear layers' products are rounded to
 * bfloat16 (nearest even) and multiplied with float32 accumulation into
 * float32 outputs; weights, gradients, optimiser state and every other op
 * stay float32 (torch autocast's split: matmuls low, the rest float32). */
typedef enum rl_precision { RL_PRECISION_FP32 = 0, RL_PRECISION_BF16 = 1 } rl_precision;

/* "fp32" or "bf16". */
const char *rl_precision_name(rl_precision p);

struct rl_adamw_config; /* common/nn/engine/optim.h, which includes this header */
struct rl_conv2d_shape; /* common/nn/engine/ops_conv.h */

typedef struct rl_nn_ops {
    rl_device device;
    const char *name; /* "cpu" or "cuda" */
    void (*sgemm)(int transA, int transB, int M, int N, int K, float alpha, const float *A,
                  int lda, const float *B, int ldb, float beta, float *C, int ldc);
    void (*linear_forward)(float *out, const float *inp, const float *w, const float *b,
                           int N, int C, int OC);
    void (*linear_backward)(float *dinp, float *dw, float *db, const float *dout,
                            const float *inp, const float *w, int N, int C, int OC);
    /* the bf16 products (rl_precision): w16 is a bf16 copy of the weights
     * made by round_bf16; these return 0 or RL_ENOMEM (message set) */
    void (*round_bf16)(uint16_t *out, const float *in, int64_t n);
    int (*linear_forward_bf16)(float *out, const float *inp, const uint16_t *w16, const float *b,
                               int N, int C, int OC);
    int (*linear_backward_bf16)(float *dinp, float *dw, float *db, const float *dout,
                                const float *inp, const uint16_t *w16, int N, int C, int OC);
    void (*add_forward)(float *out, const float *a, const float *b, int64_t n);
    void (*add_inplace)(float *a, const float *b, int64_t n);
    void (*softmax_forward)(float *out, const float *inp, int N, int C);
    void (*softmax_backward)(float *dinp, const float *dout, const float *out, int N, int C);
    void (*rmsnorm_forward)(float *out, float *rstd, const float *inp, const float *w,
                            float eps, int N, int C);
    void (*rmsnorm_backward)(float *dinp, float *dw, const float *dout, const float *inp,
                             const float *w, const float *rstd, int N, int C);
    void (*swiglu_forward)(float *out, const float *gate, const float *up, int64_t n);
    void (*swiglu_backward)(float *dgate, float *dup, const float *dout, const float *gate,
                            const float *up, int64_t n);
    void (*rope_forward)(float *out, const float *inp, const int32_t *pos, int N, int H,
                         int hd, float theta);
    void (*rope_backward)(float *dinp, const float *dout, const int32_t *pos, int N, int H,
                          int hd, float theta);
    void (*embedding_forward)(float *out, const int32_t *ids, const float *table, int N,
                              int C);
    void (*embedding_backward)(float *dtable, const float *dout, const int32_t *ids, int N,
                               int C);
    int (*attention_forward)(float *out, float *lse, const float *q, const float *k,
                             const float *v, const uint8_t *mask, int B, int T, int H, int KH,
                             int hd);
    int (*attention_backward)(float *dq, float *dk, float *dv, const float *dout,
                              const float *out, const float *lse, const float *q,
                              const float *k, const float *v,
                              const uint8_t *mask, int B, int T, int H, int KH, int hd);
    /* the attention pair with bf16 products (model.precision bf16; ops.h) */
    int (*attention_forward_bf16)(float *out, float *lse, const float *q, const float *k,
                                  const float *v, const uint8_t *mask, int B, int T, int H,
                                  int KH, int hd);
    int (*attention_backward_bf16)(float *dq, float *dk, float *dv, const float *dout,
                                   const float *out, const float *lse, const float *q,
                                   const float *k, const float *v, const uint8_t *mask, int B,
                                   int T, int H, int KH, int hd);
    void (*logprob_forward)(float *logp, float *entropy, float *lse, const float *logits,
                            const int32_t *target, float inv_temp, int N, int V);
    void (*logprob_backward)(float *dlogits, const float *dlogp, const float *dentropy,
                             const float *logits, const float *lse, const float *entropy,
                             const int32_t *target, float inv_temp, int N, int V);
    void (*sample_rows)(int32_t *tok, float *logp, float *entropy, const float *logits,
                        const double *u, float inv_temp, int n, int V);
    void (*kv_cache_write)(float *kc, float *vc, const float *k, const float *v,
                           const int32_t *slot, const int32_t *pos, int n, int kvd, int maxT);
    void (*decode_attention)(float *out, float *scores, const float *q, const float *kc,
                             const float *vc, const int32_t *slot, const int32_t *pos, int n,
                             int H, int KH, int hd, int maxT);
    /* the optimiser's and the weight copies' (common/nn/engine/optim.h) */
    void (*adamw_update)(const struct rl_adamw_config *cfg, int64_t t, double lr, double wd, float *p,
                         const float *g, float *m, float *v, int64_t n);
    double (*grad_sumsq)(const float *g, int64_t n);
    void (*scale_inplace)(float *a, float s, int64_t n);
    void (*ema_update)(float *ref, const float *cur, double beta, int64_t n);
    /* the flow kinds' (flow_policy, image_classifier, clip_flow's MLP trunk) */
    void (*silu_forward)(float *out, const float *inp, int64_t n);
    void (*silu_backward)(float *dinp, const float *dout, const float *inp, int64_t n);
    void (*time_embed)(float *temb, const float *t, int64_t n, int E);
    void (*standardize)(float *out, const float *inp, const float *mean, const float *std,
                        float clip, int N, int C);
    /* the convolutional kinds' (image_cnn, clip_flow's conv trunk):
     * common/nn/engine/ops_conv.h; the shape is a host struct */
    int (*conv2d_forward)(float *out, const float *inp, const float *w, const float *b,
                          const struct rl_conv2d_shape *s);
    int (*conv2d_backward)(float *dinp, float *dw, float *db, const float *dout, const float *inp,
                           const float *w, const struct rl_conv2d_shape *s);
    void (*maxpool2d_forward)(float *out, int32_t *arg, const float *inp, int N, int C, int H, int W,
                              int k);
    void (*maxpool2d_backward)(float *dinp, const float *dout, const int32_t *arg, int N, int C, int H,
                               int W, int k);
    void (*relu_forward)(float *out, const float *inp, int64_t n);
    void (*relu_backward)(float *dinp, const float *dout, const float *inp, int64_t n);
    void (*plane_add)(float *x, const float *add, int64_t planes, int64_t hw);
    void (*plane_sum)(float *out, const float *x, int64_t planes, int64_t hw);
    void (*upsample2x_add)(float *a, const float *s, int64_t planes, int h, int w);
    void (*upsample2x_backward)(float *ds, const float *da, int64_t planes, int h, int w);
} rl_nn_ops;

/* Every entry of the table after device and name, in order: X(op) for each.
 * The CPU kernel of op is rl_<op> (ops.h, optim.h, ops_conv.h), the CUDA one
 * rl_cuda_<op> (cuda/cuda_ops.h); the tables and rl_nn_ops_missing() are
 * this list. */
#define RL_NN_OPS(X)                                                                                 \
    X(sgemm) X(linear_forward) X(linear_backward) X(round_bf16) X(linear_forward_bf16)             \
    X(linear_backward_bf16) X(add_forward) X(add_inplace) X(softmax_forward) X(softmax_backward)   \
    X(rmsnorm_forward) X(rmsnorm_backward) X(swiglu_forward)                    \
    X(swiglu_backward) X(rope_forward) X(rope_backward) X(embedding_forward) X(embedding_backward)  \
    X(attention_forward) X(attention_backward) X(attention_forward_bf16)            \
    X(attention_backward_bf16) X(logprob_forward) X(logprob_backward) X(sample_rows) \
    X(kv_cache_write) X(decode_attention) X(adamw_update) X(grad_sumsq) X(scale_inplace)            \
    X(ema_update) X(silu_forward) X(silu_backward) X(time_embed) X(standardize)                    \
    X(conv2d_forward) X(conv2d_backward) X(maxpool2d_forward) X(maxpool2d_backward) X(relu_forward) \
    X(relu_backward) X(plane_add) X(plane_sum) X(upsample2x_add) X(upsample2x_backward)

/* The kernel table of `dev`, or NULL + message (RL_EUNSUPPORTED) when this
 * build has no such device. */
const rl_nn_ops *rl_nn_ops_get(rl_device dev);
/* Name of the first NULL entry of `ops`, or NULL when all are present. */
const char *rl_nn_ops_missing(const rl_nn_ops *ops);

/* Number of usable devices of that kind: 1 for the CPU; for CUDA the
 * cudaGetDeviceCount() result, 0 when it fails or the build has no CUDA. */
int rl_device_count(rl_device dev);
const char *rl_device_name(rl_device dev);

/* Raw memory on a device. alloc returns NULL + message on failure. Every
 * block is counted under its purpose (rl_device_alloc: RL_MEM_OTHER) until
 * it is freed, per device: what a job reports as its memory metrics. */
typedef enum rl_mem_purpose {
    RL_MEM_PARAMS = 0,  /* the flat parameter buffer and its copies (EMA, reference) */
    RL_MEM_GRADS,
    RL_MEM_OPTIM,       /* AdamW moments */
    RL_MEM_ACTIVATIONS, /* the training forward's saved activations */
    RL_MEM_SCRATCH,     /* index arrays, staging, kernels' temporaries */
    RL_MEM_OTHER,
    RL_MEM_COUNT
} rl_mem_purpose;

void *rl_device_alloc(rl_device dev, size_t bytes);
void *rl_device_alloc_for(rl_device dev, size_t bytes, rl_mem_purpose why);
void rl_device_free(rl_device dev, void *p);
/* n floats, zeroed, on dev (counted under why on a GPU; on the CPU the
 * 64-byte aligned flat buffer of rlrt/nn/params.h), NULL + message; freed
 * with rl_device_buffer_free on the same device: the flat parameter,
 * gradient and moment buffers of a model or an optimiser. */
float *rl_device_buffer_new(rl_device dev, int64_t n, rl_mem_purpose why);
void rl_device_buffer_free(rl_device dev, float *p);

typedef struct rl_device_memory {
    size_t bytes[RL_MEM_COUNT]; /* held now, by purpose */
    size_t total, peak;         /* held now; the most held at once since the start */
    int64_t blocks;             /* blocks held now */
} rl_device_memory;

/* What rl_device_alloc* holds on dev now (thread-safe). */
void rl_device_memory_get(rl_device dev, rl_device_memory *out);
/* "params", "grads", "optim", "activations", "scratch", "other". */
const char *rl_mem_purpose_name(rl_mem_purpose why);
/* Copies `bytes` between any two devices (host ↔ device, device ↔ device). */
int rl_device_copy(rl_device dst_dev, void *dst, rl_device src_dev, const void *src,
                   size_t bytes);
/* Sets `bytes` of device memory to 0 (queued on CUDA). */
int rl_device_zero(rl_device dev, void *p, size_t bytes);
/* Waits for queued kernels; returns the first asynchronous error. */
int rl_device_sync(rl_device dev);

/* CUDA IPC: one process's device block opened by another process on the
 * same GPU (the same-GPU weight transport of a colocated actor and
 * rollout). export takes the start of an rl_device_alloc* block on CUDA
 * and fills a handle of RL_DEVICE_IPC_BYTES opaque bytes, which may travel
 * in any message; open maps it in the receiving process (NULL + message:
 * another GPU, a handle of this process, a freed block, garbage); close
 * unmaps it. The exporter must keep the block until every opener has
 * closed it, and must finish its writes (rl_device_sync) before it sends
 * the handle. RL_EUNSUPPORTED on the CPU or without CUDA. */
#define RL_DEVICE_IPC_BYTES 64
typedef struct rl_device_ipc_handle {
    unsigned char bytes[RL_DEVICE_IPC_BYTES];
} rl_device_ipc_handle;
int rl_device_ipc_export(rl_device dev, void *p, rl_device_ipc_handle *out);
void *rl_device_ipc_open(rl_device dev, const rl_device_ipc_handle *h);
int rl_device_ipc_close(rl_device dev, void *p);

/* Per-op device time, for finding where a step goes: on CUDA, with
 * RL_CUDA_PROFILE=1 in the environment, every kernel-table entry (and
 * copy) is timed by a pair of CUDA events (nested entries count in their
 * caller; a linear entry with 32768 outputs or more, an LM head, is named
 * *_vocab; the attention pair's fused kernels are *_flash).
 * rl_device_profile_take waits for the device, fills up to `max`
 * entries with the totals since the last take, the longest first, resets
 * them, and returns the number of entries (0 without CUDA or when off). */
typedef struct rl_device_prof {
    const char *name; /* the entry's name, a static string */
    long calls;
    double ms;
} rl_device_prof;
int rl_device_profile_take(rl_device dev, rl_device_prof *out, int max);
/* Turns the per-op timing on (on != 0) or off from here on, whatever
 * RL_CUDA_PROFILE says (call it between steps, not inside one); returns
 * whether it was on. 0 and nothing done without CUDA. */
int rl_device_profile_set(rl_device dev, int on);

#ifdef __cplusplus
}
#endif
#endif
