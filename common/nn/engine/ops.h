/* common/nn/engine/ops.h — CPU compute kernels of the NN engine, each with its backward.
 *
 * Purpose: plain forward/backward functions over float* in the style of
 * llm.c. Matrix products go to OpenBLAS (cblas_sgemm); everything else is
 * OpenMP loops. All tensors are dense row-major; shapes are in comments, with
 * N = rows (usually B*T), C = channels, V = vocabulary.
 *
 * Invariants:
 *  - Every *_backward ACCUMULATES into its gradient outputs (+=), like
 *    llm.c, so residual branches and tied weights need no extra adds. The
 *    caller zeroes gradient buffers when starting a new sum. A NULL gradient
 *    pointer skips that gradient. Exceptions say so explicitly.
 *  - Results are deterministic for a given thread count: no atomics, and
 *    reductions over rows run in a fixed order per output element (most are
 *    also independent of the thread count; OpenBLAS may not be).
 *  - Linear weights use the Hugging Face (out, in) layout.
 *  - Functions never allocate unless stated, never print and cannot fail
 *    (shapes are trusted: the model layer checks them); the attention pair
 *    allocates scratch and returns an rl_status.
 *  - Exponentials use a vectorisable expf (relative error < 1e-7).
 *
 * Threads: one pool only. rl_nn_set_threads(n) sets the thread count of the
 * matrix products and attention (explicit num_threads) and pins OpenBLAS to
 * 1 thread; the other parallel loops (optimizer, losses, advantages) use
 * OpenMP's own count, which libgomp takes from OMP_NUM_THREADS or the cores
 * the process may use when it loads (rl_nn_use_thread_count sets both in a
 * program bound to fewer cores). rl_sgemm splits large
 * products into n slabs run by the OpenMP threads (each a single-threaded
 * BLAS call), and attention runs whole (batch, head) tasks per thread. So
 * n = number of cores never oversubscribes, and there is no hand-off
 * between two spinning pools. Default: OMP_NUM_THREADS or the core count.
 *
 * Waiting: libgomp's default lets an idle pool spin for a while before it
 * sleeps. The roles of one job take turns on the same cores (rollout, then
 * actor, then rollout...), so the pool that just finished spins on the cores
 * the next one needs: an arithmetic GRPO step on 2 cores took 1.9x as long
 * as with OMP_WAIT_POLICY=passive, with bit-identical results.
 * rl_nn_use_passive_wait makes the passive policy the processes' default;
 * libgomp reads it once, when it loads, hence the re-exec.
 */
#ifndef RLRT_NN_OPS_H
#define RLRT_NN_OPS_H

#include <stddef.h>
#include <stdint.h>

#include "common/nn/engine/ops_elem.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Sets the thread count of the kernels (n <= 0: the number of online CPUs)
 * and pins OpenBLAS to one thread. Returns the count now in use. Process-wide. */
int rl_nn_set_threads(int n);
int rl_nn_get_threads(void);

/* Called first thing in main() of a program that shares its cores with
 * other processes of the job (rl-driver, rl-worker). When neither
 * OMP_WAIT_POLICY nor GOMP_SPINCOUNT is set, sets OMP_WAIT_POLICY=passive
 * and re-executes the program (/proc/self/exe) with the same argv, pid,
 * descriptors and the rest of the environment: it does not return. Returns 0
 * when the user chose a policy (nothing done: OMP_WAIT_POLICY=active keeps
 * spinning) and -1 when the re-exec failed (the environment is left as it
 * was and the program goes on with libgomp's default). argv: main's,
 * NULL-terminated. */
int rl_nn_use_passive_wait(char **argv);

/* For a program that has just bound itself to n cores (rl-worker --cpus):
 * when OMP_NUM_THREADS is not set, sets it to n and re-executes the program
 * as rl_nn_use_passive_wait does (does not return), so every parallel loop
 * of every thread runs n threads. Returns 0 when OMP_NUM_THREADS is set or
 * n <= 0 (nothing done), -1 when the re-exec failed (the variable is removed
 * again and rl_nn_set_threads(n) applied: the products and attention use n
 * threads, the other loops libgomp's default). */
int rl_nn_use_thread_count(char **argv, int n);

/* ---- matrix products ---------------------------------------------------- */

/* C (M,N) = alpha * op(A) · op(B) + beta * C, row-major, op = transpose when
 * trans* != 0 (A is (M,K) or (K,M); B is (K,N) or (N,K)). */
void rl_sgemm(int transA, int transB, int M, int N, int K, float alpha,
              const float *A, int lda, const float *B, int ldb, float beta,
              float *C, int ldc);

/* out (N,OC) = inp (N,C) · w^T + b;  w is (OC,C), b is (OC) or NULL. */
void rl_linear_forward(float *out, const float *inp, const float *w,
                       const float *b, int N, int C, int OC);
/* dinp (N,C) += dout · w;  dw (OC,C) += dout^T · inp;  db (OC) += Σ_rows dout. */
void rl_linear_backward(float *dinp, float *dw, float *db, const float *dout,
                        const float *inp, const float *w, int N, int C, int OC);

/* ---- bf16 products (model.precision bf16; ops_bf16.c) -------------------
 * On the CPU these EMULATE the GPU's bf16 GEMMs: each input of a product is
 * rounded to bf16 (rl_bf16_round of ops_elem.h, nearest even) and widened
 * back to float32 (exact), then rl_sgemm multiplies in float32. A product of
 * two bf16 values is exact in float32, so this is a bf16 GEMM with float32
 * accumulation, only slower than float32 (the rounding passes). The
 * results differ from a GPU's only by the order of the float32 sums. */

/* out (n) = the bf16 bits of in (n), rounded to nearest even. */
void rl_round_bf16(uint16_t *out, const float *in, int64_t n);
/* rl_linear_forward with inp rounded to bf16 and the weights w16 (OC,C) in
 * bf16; the bias is added in float32. Allocates the rounded inputs
 * (N·C + OC·C floats): returns 0, or RL_ENOMEM with the message set. */
int rl_linear_forward_bf16(float *out, const float *inp, const uint16_t *w16, const float *b,
                           int N, int C, int OC);
/* rl_linear_backward on bf16 inputs: dinp += bf16(dout) · w16,
 * dw += bf16(dout)^T · bf16(inp) (float32 accumulation into the float32
 * gradients), db += Σ_rows dout in float32. Allocates (N·OC + N·C + OC·C
 * floats at most): 0 or RL_ENOMEM. */
int rl_linear_backward_bf16(float *dinp, float *dw, float *db, const float *dout,
                            const float *inp, const uint16_t *w16, int N, int C, int OC);

/* ---- elementwise and reductions ----------------------------------------- */

void rl_add_forward(float *out, const float *a, const float *b, int64_t n);
/* a (n) += b (n): also the backward of out = a + b for each input. */
void rl_add_inplace(float *a, const float *b, int64_t n);
void rl_scale_forward(float *out, const float *a, float s, int64_t n);
/* da += s * dout. */
void rl_scale_backward(float *da, const float *dout, float s, int64_t n);
void rl_mul_forward(float *out, const float *a, const float *b, int64_t n);
/* da += dout * b;  db += dout * a. */
void rl_mul_backward(float *da, float *db, const float *dout, const float *a,
                     const float *b, int64_t n);
/* a (n) *= s (gradient clipping). */
void rl_scale_inplace(float *a, float s, int64_t n);
/* ref (n) = β·ref + (1 − β)·cur, each element formed in double (EMA copies
 * of the flat parameter buffer). */
void rl_ema_update(float *ref, const float *cur, double beta, int64_t n);
/* Σ a in double, summed in fixed 4096-element blocks (thread-count independent). */
double rl_sum(const float *a, int64_t n);
/* out (C) += Σ_rows a (N,C).  Backward: da (N,C) += dout broadcast (rl_rowsum_backward). */
void rl_rowsum_forward(float *out, const float *a, int N, int C);
void rl_rowsum_backward(float *da, const float *dout, int N, int C);

/* ---- normalisation and activations --------------------------------------- */

/* Row softmax: out (N,C) = softmax(inp (N,C)) (out may equal inp). */
void rl_softmax_forward(float *out, const float *inp, int N, int C);
/* dinp (N,C) += out ⊙ (dout − Σ_c dout·out). */
void rl_softmax_backward(float *dinp, const float *dout, const float *out,
                         int N, int C);

/* RMSNorm: out (N,C) = inp · rstd · w,  rstd (N) = 1/sqrt(mean(inp²) + eps). */
void rl_rmsnorm_forward(float *out, float *rstd, const float *inp,
                        const float *w, float eps, int N, int C);
/* dinp (N,C) += ..., dw (C) += Σ_rows dout · inp · rstd. Uses the saved rstd. */
void rl_rmsnorm_backward(float *dinp, float *dw, const float *dout,
                         const float *inp, const float *w, const float *rstd,
                         int N, int C);

/* SiLU: out = x · sigmoid(x);  dinp += dout · silu'(x). */
void rl_silu_forward(float *out, const float *inp, int64_t n);
void rl_silu_backward(float *dinp, const float *dout, const float *inp, int64_t n);
/* The flow trunks' sinusoidal time embedding: temb (n, E) row r =
 * [sin(1000·t[r]·f_i), cos(1000·t[r]·f_i)] for i < E/2, f_i =
 * 10000^(−i/(E/2)), in double (rl_time_embed_elem of ops_elem.h). */
void rl_time_embed(float *temb, const float *t, int64_t n, int E);
/* out (N,C) = (inp − mean) / std per column (mean, std (C)), then clamped
 * to ±clip when clip > 0 (rl_standardize_elem); out may equal inp. No
 * backward: the flow policy's observation normalisation is a fixed input
 * transform. */
void rl_standardize(float *out, const float *inp, const float *mean, const float *std, float clip,
                    int N, int C);
/* SwiGLU: out (n) = silu(gate) · up. */
void rl_swiglu_forward(float *out, const float *gate, const float *up, int64_t n);
void rl_swiglu_backward(float *dgate, float *dup, const float *dout,
                        const float *gate, const float *up, int64_t n);

/* ---- positional encoding ------------------------------------------------ */

/* Rotary embedding, Hugging Face "rotate_half" convention: within a head of
 * size hd, element i < hd/2 pairs with i + hd/2, angle = pos · theta^(-2i/hd).
 * x is (N,H,hd) with row n at position pos[n] (pos NULL: n). In place is fine
 * (out == inp). Backward is the inverse rotation: dinp (N,H,hd) += R^T dout. */
void rl_rope_forward(float *out, const float *inp, const int32_t *pos, int N,
                     int H, int hd, float theta);
void rl_rope_backward(float *dinp, const float *dout, const int32_t *pos,
                      int N, int H, int hd, float theta);

/* ---- embedding ---------------------------------------------------------- */

/* out (N,C) = table (V,C) [ids (N)]. */
void rl_embedding_forward(float *out, const int32_t *ids, const float *table,
                          int N, int C);
/* dtable (V,C) += scatter(dout (N,C)); parallel over channel blocks, rows in order. */
void rl_embedding_backward(float *dtable, const float *dout,
                           const int32_t *ids, int N, int C);

/* ---- attention ---------------------------------------------------------- */

/* Causal grouped-query attention with a key padding mask.
 * q (B,T,H,hd), k/v (B,T,KH,hd), H % KH == 0 (query head h uses kv head
 * h / (H/KH)); mask (B,T) nonzero = real token, NULL = all real.
 * out (B,T,H,hd); lse (B,H,T) saves each query row's log-sum-exp of its
 * scaled scores (+inf for a row with no visible key), all the backward needs
 * besides the inputs (probabilities are recomputed, flash-attention style).
 * Query t attends to keys s <= t with mask[b,s] != 0; a query with no such
 * key gets out = 0. Scale 1/sqrt(hd). Allocates 2·64·T floats of scratch per
 * thread: returns 0, or RL_ENOMEM (message set) when that fails. */
int rl_attention_forward(float *out, float *lse, const float *q, const float *k,
                         const float *v, const uint8_t *mask, int B, int T, int H, int KH,
                         int hd);
/* dq (B,T,H,hd), dk/dv (B,T,KH,hd) += ...; same mask as the forward. out:
 * the forward's output, or NULL; this CPU kernel does not read it (the fused
 * CUDA kernels take D_t = dO_t · O_t from it instead of a sweep over keys). */
int rl_attention_backward(float *dq, float *dk, float *dv, const float *dout, const float *out,
                          const float *lse, const float *q, const float *k, const float *v,
                          const uint8_t *mask, int B, int T, int H, int KH, int hd);

/* bf16 attention (model.precision bf16, as torch's autocast runs SDPA and
 * FlashAttention-2 its bf16 path): the same shapes, mask, outputs (float32)
 * and backward accumulation as above, with the products on bf16 inputs and
 * float32 sums. Forward: Q, K, V rounded to bf16; s = (q̂·k̂)·scale; an
 * online softmax over key tiles of 64 (0-63, 64-127, ...): per tile the
 * running maximum m, p = exp(s − m) in float32, l += p, and P rounded to
 * bf16 for o += bf16(p)·v̂ (o and l rescaled by exp(m_old − m_new)); out =
 * o / l, lse = m + log l. Backward: p = exp(s − lse) in float32, dP = bf16(dO)
 * · v̂ᵀ, D_t = dO_t · O_t in float32 from `out` (NULL: Σ_s p·dP), dS = p ⊙
 * (dP − D); dV += bf16(p)ᵀ · bf16(dO), dK += scale · bf16(dS)ᵀ · q̂, dQ +=
 * scale · bf16(dS) · k̂. The CPU's is a row-by-row reference of the GPU's
 * tensor-core kernels (ops_attn_bf16.c); they differ by the order of the
 * float32 sums (and, through it, a rare P or dS rounded the other way).
 * Heads wider than RL_ATTENTION_BF16_MAX_HD run the float32 pair above on
 * both devices (as does a GPU without bf16 tensor cores or the shared
 * memory: cuda_ops.h). Allocates scratch: 0, or RL_ENOMEM with the message
 * set. */
#define RL_ATTENTION_BF16_MAX_HD 128
int rl_attention_forward_bf16(float *out, float *lse, const float *q, const float *k,
                              const float *v, const uint8_t *mask, int B, int T, int H, int KH,
                              int hd);
int rl_attention_backward_bf16(float *dq, float *dk, float *dv, const float *dout, const float *out,
                               const float *lse, const float *q, const float *k, const float *v,
                               const uint8_t *mask, int B, int T, int H, int KH, int hd);

/* ---- the optimiser's kernels (the optimiser object and clipping: optim.h) -- */

/* The AdamW update (optim.h's formula, rl_adamw_elem of ops_elem.h on each
 * element) on n elements at step t (>= 1) with weight decay wd: what
 * rl_adamw_step() runs per segment on the CPU. */
void rl_adamw_update(const rl_adamw_config *cfg, int64_t t, double lr, double wd,
                     float *p, const float *g, float *m, float *v, int64_t n);
/* Σ g[i]² over g[0..n), in double, summed over fixed 64 Ki-element blocks in
 * block order (independent of the thread count). */
double rl_grad_sumsq(const float *g, int64_t n);

/* ---- decoding over a KV cache -------------------------------------------- */

/* The caches kc/vc are (slots, maxT, KH·hd) for one layer. Row i of a decode
 * step writes its key and value (n, KH·hd) at kc/vc[slot[i], pos[i]]. */
void rl_kv_cache_write(float *kc, float *vc, const float *k, const float *v, const int32_t *slot,
                       const int32_t *pos, int n, int kvd, int maxT);
/* Row i's query q (n, H, hd) at position pos[i] attends to its slot's keys
 * and values at positions 0..pos[i] (causal, grouped: query head h reads kv
 * head h / (H/KH)), scale 1/sqrt(hd): out (n, H, hd). scores: scratch of
 * (n, H, maxT) floats. Rows and heads never read each other's. */
void rl_decode_attention(float *out, float *scores, const float *q, const float *kc,
                         const float *vc, const int32_t *slot, const int32_t *pos, int n, int H,
                         int KH, int hd, int maxT);

/* ---- log-probs, entropy, cross-entropy ---------------------------------- */

/* For each row n of logits (N,V) with a = logits * inv_temp:
 *   lse (N)      = log Σ exp(a)                    (saved for backward)
 *   logp (N)     = a[target[n]] − lse               (target < 0: logp = 0)
 *   entropy (N)  = −Σ p log p of the full softmax(a)  (NULL: skipped)
 * logp may be NULL (entropy only). */
void rl_logprob_forward(float *logp, float *entropy, float *lse,
                        const float *logits, const int32_t *target,
                        float inv_temp, int N, int V);
/* The next token of each row i of logits (n, V), a = logits·inv_temp:
 * entropy[i] and lse as rl_logprob_forward; u[i] < 0: the first argmax of
 * the logits; u[i] in [0, 1): the first j whose running sum of
 * exp(a_j − lse) in index order passes u[i]·Σ exp(a − lse) (V − 1 when none
 * does); logp[i] = a[tok] − lse. tok[i] = −1 (logp 0) when lse is not
 * finite (NaN or +Inf logits). generate.c's sampler without top-k/top-p;
 * on a GPU it keeps the logits on the device. */
void rl_sample_rows(int32_t *tok, float *logp, float *entropy, const float *logits,
                    const double *u, float inv_temp, int n, int V);
/* dlogits (N,V) = (OVERWRITTEN, not accumulated) d/dlogits of
 *   Σ_n dlogp[n]·logp[n] + dentropy[n]·entropy[n]
 * (either NULL = zero). Needs the forward's lse and entropy (entropy may be
 * NULL only when dentropy is NULL). dlogits may alias logits. */
void rl_logprob_backward(float *dlogits, const float *dlogp,
                         const float *dentropy, const float *logits,
                         const float *lse, const float *entropy,
                         const int32_t *target, float inv_temp, int N, int V);
/* Mean cross-entropy of targets over rows with target >= 0 (returns it) and,
 * if dlogits != NULL, writes its gradient (OVERWRITES dlogits). */
float rl_cross_entropy(float *dlogits, const float *logits,
                       const int32_t *target, int N, int V);

#ifdef __cplusplus
}
#endif
#endif
