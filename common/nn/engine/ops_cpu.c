/* ops_cpu.c — CPU kernels: GEMM/linear, elementwise, reductions, softmax,
 * RMSNorm, SiLU/SwiGLU, RoPE, embedding (see common/nn/engine/ops.h). */
#include "common/nn/engine/ops_internal.h"

#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int s_threads = 0; /* 0 = not yet chosen */

/* OpenBLAS always runs single-threaded inside the caller's thread: the only
 * thread pool is OpenMP's, and large products are split across it by
 * rl_sgemm. Two pools (OpenMP workers spinning while OpenBLAS's pthreads
 * wait for a core) cost a scheduler slice per hand-off on a busy machine. */
int rl_nn_set_threads(int n)
{
    if (n <= 0) {
        long c = sysconf(_SC_NPROCESSORS_ONLN);
        n = c > 0 ? (int)c : 1;
    }
    s_threads = n;
    openblas_set_num_threads(1);
    return n;
}

int rl_nn_get_threads(void)
{
    if (s_threads <= 0) {
        int n = omp_get_max_threads(); /* OMP_NUM_THREADS or the core count */
        s_threads = n > 0 ? n : 1;
        openblas_set_num_threads(1);
    }
    return s_threads;
}

/* Sets `name`=`value` and runs this program again with the same argv, so
 * that libgomp, which reads its variables once when it loads, sees it. On
 * failure the variable is removed again and -1 returned. */
static int s_reexec_with(char **argv, const char *name, const char *value)
{
    if (!argv || !argv[0] || setenv(name, value, 1) != 0)
        return -1;
    execv("/proc/self/exe", argv);
    unsetenv(name); /* no /proc, or not executable: as before */
    return -1;
}

int rl_nn_use_passive_wait(char **argv)
{
    if (getenv("OMP_WAIT_POLICY") || getenv("GOMP_SPINCOUNT"))
        return 0;
    return s_reexec_with(argv, "OMP_WAIT_POLICY", "passive");
}

int rl_nn_use_thread_count(char **argv, int n)
{
    if (getenv("OMP_NUM_THREADS") || n <= 0)
        return 0;
    char text[16];
    snprintf(text, sizeof text, "%d", n);
    (void)s_reexec_with(argv, "OMP_NUM_THREADS", text); /* returns only on failure */
    rl_nn_set_threads(n); /* at least the products and attention */
    return -1;
}

/* ---- matrix products ---------------------------------------------------- */

static void s_blas(int transA, int transB, int M, int N, int K, float alpha, const float *A,
                   int lda, const float *B, int ldb, float beta, float *C, int ldc)
{
    cblas_sgemm(CblasRowMajor, transA ? CblasTrans : CblasNoTrans,
                transB ? CblasTrans : CblasNoTrans, M, N, K, alpha, A, lda, B, ldb, beta, C,
                ldc);
}

void rl_sgemm(int transA, int transB, int M, int N, int K, float alpha, const float *A,
              int lda, const float *B, int ldb, float beta, float *C, int ldc)
{
    if (M <= 0 || N <= 0)
        return;
    if (K <= 0) {
        for (int i = 0; i < M; i++)
            for (int j = 0; j < N; j++)
                C[(size_t)i * ldc + j] = beta == 0.0f ? 0.0f : beta * C[(size_t)i * ldc + j];
        return;
    }
    int nt = rl_nn_get_threads();
    if (nt <= 1 || omp_in_parallel() || (double)M * N * K < RL_SGEMM_SPLIT_MIN) {
        s_blas(transA, transB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
        return;
    }
    /* Split the longer of M, N into nt slabs (multiples of 16): more slabs
     * would each re-pack the other operand (costly when K is large). Every
     * element of C is still one single-threaded BLAS dot product over K; the
     * slab boundaries depend only on the sizes and the thread count, so
     * results are deterministic. */
    int alongM = M >= N;
    int len = alongM ? M : N;
    int chunk = ((len + nt - 1) / nt + 15) / 16 * 16;
    int parts = (len + chunk - 1) / chunk;
    RL_PRAGMA(omp parallel for num_threads(nt) schedule(dynamic, 1))
    for (int p = 0; p < parts; p++) {
        int s0 = p * chunk, s1 = s0 + chunk < len ? s0 + chunk : len;
        if (alongM) {
            const float *Ap = transA ? A + s0 : A + (size_t)s0 * lda;
            s_blas(transA, transB, s1 - s0, N, K, alpha, Ap, lda, B, ldb, beta,
                   C + (size_t)s0 * ldc, ldc);
        } else {
            const float *Bp = transB ? B + (size_t)s0 * ldb : B + s0;
            s_blas(transA, transB, M, s1 - s0, K, alpha, A, lda, Bp, ldb, beta, C + s0, ldc);
        }
    }
}

/* out (C) += Σ_rows a (N,C) — or, with b (N,C) and r (N), Σ_rows a·b·r_row —
 * in row order for every column, in double: parallel over column blocks so
 * the result does not depend on the thread count. */
static void s_colsum_acc(float *out, const float *a, const float *b, const float *r, int N, int C)
{
    enum { BLK = 64 };
    int nblk = (C + BLK - 1) / BLK;
    RL_OMP_FOR_IF((int64_t)N * C > RL_PAR_MIN)
    for (int bi = 0; bi < nblk; bi++) {
        int c0 = bi * BLK, c1 = c0 + BLK < C ? c0 + BLK : C;
        double acc[BLK];
        for (int c = c0; c < c1; c++)
            acc[c - c0] = 0.0;
        for (int n = 0; n < N; n++) {
            const float *row = a + (size_t)n * C;
            if (b) {
                const float *x = b + (size_t)n * C;
                float rn = r[n];
                RL_SIMD
                for (int c = c0; c < c1; c++)
                    acc[c - c0] += row[c] * x[c] * rn;
            } else {
                for (int c = c0; c < c1; c++)
                    acc[c - c0] += row[c];
            }
        }
        for (int c = c0; c < c1; c++)
            out[c] += (float)acc[c - c0];
    }
}

void rl_linear_forward(float *out, const float *inp, const float *w, const float *b, int N,
                       int C, int OC)
{
    if (b) {
        RL_OMP_FOR_IF((int64_t)N * OC > RL_PAR_MIN)
        for (int n = 0; n < N; n++)
            memcpy(out + (size_t)n * OC, b, sizeof(float) * (size_t)OC);
    }
    rl_sgemm(0, 1, N, OC, C, 1.0f, inp, C, w, C, b ? 1.0f : 0.0f, out, OC);
}

void rl_linear_backward(float *dinp, float *dw, float *db, const float *dout, const float *inp,
                        const float *w, int N, int C, int OC)
{
    if (dinp)
        rl_sgemm(0, 0, N, C, OC, 1.0f, dout, OC, w, C, 1.0f, dinp, C);
    if (dw)
        rl_sgemm(1, 0, OC, C, N, 1.0f, dout, OC, inp, C, 1.0f, dw, C);
    if (db)
        s_colsum_acc(db, dout, NULL, NULL, N, OC);
}

/* ---- elementwise and reductions ----------------------------------------- */

void rl_add_forward(float *out, const float *a, const float *b, int64_t n)
{
    RL_OMP_FOR_IF(n > RL_PAR_MIN)
    for (int64_t i = 0; i < n; i++)
        out[i] = a[i] + b[i];
}

void rl_add_inplace(float *a, const float *b, int64_t n)
{
    RL_OMP_FOR_IF(n > RL_PAR_MIN)
    for (int64_t i = 0; i < n; i++)
        a[i] += b[i];
}

void rl_scale_forward(float *out, const float *a, float s, int64_t n)
{
    RL_OMP_FOR_IF(n > RL_PAR_MIN)
    for (int64_t i = 0; i < n; i++)
        out[i] = a[i] * s;
}

void rl_scale_inplace(float *a, float s, int64_t n)
{
    RL_OMP_FOR_IF(n > RL_PAR_MIN)
    for (int64_t i = 0; i < n; i++)
        a[i] *= s;
}

void rl_ema_update(float *ref, const float *cur, double beta, int64_t n)
{
    const double keep = beta, take = 1.0 - beta;
    RL_OMP_FOR_IF(n > RL_PAR_MIN)
    for (int64_t i = 0; i < n; i++)
        ref[i] = (float)(keep * ref[i] + take * cur[i]);
}

void rl_scale_backward(float *da, const float *dout, float s, int64_t n)
{
    RL_OMP_FOR_IF(n > RL_PAR_MIN)
    for (int64_t i = 0; i < n; i++)
        da[i] += dout[i] * s;
}

void rl_mul_forward(float *out, const float *a, const float *b, int64_t n)
{
    RL_OMP_FOR_IF(n > RL_PAR_MIN)
    for (int64_t i = 0; i < n; i++)
        out[i] = a[i] * b[i];
}

void rl_mul_backward(float *da, float *db, const float *dout, const float *a, const float *b,
                     int64_t n)
{
    RL_OMP_FOR_IF(n > RL_PAR_MIN)
    for (int64_t i = 0; i < n; i++) {
        if (da)
            da[i] += dout[i] * b[i];
        if (db)
            db[i] += dout[i] * a[i];
    }
}

double rl_sum(const float *a, int64_t n)
{
    enum { BLK = 4096 };
    int64_t nblk = (n + BLK - 1) / BLK;
    if (nblk <= 1) {
        double s = 0.0;
        for (int64_t i = 0; i < n; i++)
            s += a[i];
        return s;
    }
    double *part = malloc(sizeof(double) * (size_t)nblk);
    if (!part) { /* fall back to one pass: same order as the blocked sum */
        double s = 0.0;
        for (int64_t bi = 0; bi < nblk; bi++) {
            double p = 0.0;
            for (int64_t i = bi * BLK; i < n && i < (bi + 1) * BLK; i++)
                p += a[i];
            s += p;
        }
        return s;
    }
    RL_OMP_FOR_IF(n > RL_PAR_MIN)
    for (int64_t bi = 0; bi < nblk; bi++) {
        double p = 0.0;
        int64_t e = (bi + 1) * BLK < n ? (bi + 1) * BLK : n;
        for (int64_t i = bi * BLK; i < e; i++)
            p += a[i];
        part[bi] = p;
    }
    double s = 0.0;
    for (int64_t bi = 0; bi < nblk; bi++)
        s += part[bi];
    free(part);
    return s;
}

void rl_rowsum_forward(float *out, const float *a, int N, int C) { s_colsum_acc(out, a, NULL, NULL, N, C); }

void rl_rowsum_backward(float *da, const float *dout, int N, int C)
{
    RL_OMP_FOR_IF((int64_t)N * C > RL_PAR_MIN)
    for (int n = 0; n < N; n++)
        for (int c = 0; c < C; c++)
            da[(size_t)n * C + c] += dout[c];
}

/* ---- softmax ------------------------------------------------------------- */

void rl_softmax_forward(float *out, const float *inp, int N, int C)
{
    RL_OMP_FOR_IF((int64_t)N * C > RL_PAR_MIN)
    for (int n = 0; n < N; n++) {
        const float *x = inp + (size_t)n * C;
        float *y = out + (size_t)n * C;
        float m = -INFINITY;
        for (int c = 0; c < C; c++)
            m = x[c] > m ? x[c] : m;
        float s = 0.0f;
        RL_SIMD_SUM(s)
        for (int c = 0; c < C; c++) {
            float e = rl_fast_expf(x[c] - m);
            y[c] = e;
            s += e;
        }
        float inv = 1.0f / s;
        RL_SIMD
        for (int c = 0; c < C; c++)
            y[c] *= inv;
    }
}

void rl_softmax_backward(float *dinp, const float *dout, const float *out, int N, int C)
{
    RL_OMP_FOR_IF((int64_t)N * C > RL_PAR_MIN)
    for (int n = 0; n < N; n++) {
        const float *g = dout + (size_t)n * C, *y = out + (size_t)n * C;
        float *d = dinp + (size_t)n * C;
        double dot = 0.0;
        for (int c = 0; c < C; c++)
            dot += (double)g[c] * y[c];
        float fd = (float)dot;
        for (int c = 0; c < C; c++)
            d[c] += y[c] * (g[c] - fd);
    }
}

/* ---- RMSNorm -------------------------------------------------------------- */

void rl_rmsnorm_forward(float *out, float *rstd, const float *inp, const float *w, float eps,
                        int N, int C)
{
    RL_OMP_FOR_IF((int64_t)N * C > RL_PAR_MIN)
    for (int n = 0; n < N; n++) {
        const float *x = inp + (size_t)n * C;
        float *y = out + (size_t)n * C;
        double ss = 0.0;
        RL_SIMD_SUM(ss)
        for (int c = 0; c < C; c++)
            ss += (double)x[c] * x[c];
        float r = (float)(1.0 / sqrt(ss / C + (double)eps));
        if (rstd)
            rstd[n] = r;
        RL_SIMD
        for (int c = 0; c < C; c++)
            y[c] = x[c] * r * w[c];
    }
}

void rl_rmsnorm_backward(float *dinp, float *dw, const float *dout, const float *inp,
                         const float *w, const float *rstd, int N, int C)
{
    if (dinp) {
        RL_OMP_FOR_IF((int64_t)N * C > RL_PAR_MIN)
        for (int n = 0; n < N; n++) {
            const float *x = inp + (size_t)n * C, *g = dout + (size_t)n * C;
            float *d = dinp + (size_t)n * C;
            float r = rstd[n];
            double dot = 0.0; /* Σ g·w·x */
            RL_SIMD_SUM(dot)
            for (int c = 0; c < C; c++)
                dot += (double)(g[c] * w[c]) * x[c];
            float k = (float)(dot * r * r * r / C);
            RL_SIMD
            for (int c = 0; c < C; c++)
                d[c] += g[c] * w[c] * r - k * x[c];
        }
    }
    if (dw)
        s_colsum_acc(dw, dout, inp, rstd, N, C);
}

/* ---- SiLU / SwiGLU ------------------------------------------------------- */

static inline float s_sigmoid(float x) { return 1.0f / (1.0f + rl_fast_expf(-x)); }

void rl_silu_forward(float *out, const float *inp, int64_t n)
{
    RL_OMP_FOR_SIMD_IF(n > RL_PAR_MIN)
    for (int64_t i = 0; i < n; i++)
        out[i] = inp[i] * s_sigmoid(inp[i]);
}

void rl_silu_backward(float *dinp, const float *dout, const float *inp, int64_t n)
{
    RL_OMP_FOR_SIMD_IF(n > RL_PAR_MIN)
    for (int64_t i = 0; i < n; i++) {
        float x = inp[i], s = s_sigmoid(x);
        dinp[i] += dout[i] * s * (1.0f + x * (1.0f - s));
    }
}

void rl_time_embed(float *temb, const float *t, int64_t n, int E)
{
    const int half = E / 2;
    for (int64_t r = 0; r < n; r++)
        for (int i = 0; i < half; i++)
            rl_time_embed_elem(temb + r * E, t[r], i, half);
}

void rl_standardize(float *out, const float *inp, const float *mean, const float *std, float clip,
                    int N, int C)
{
    for (int64_t r = 0; r < N; r++)
        for (int j = 0; j < C; j++)
            out[r * C + j] = rl_standardize_elem(inp[r * C + j], mean[j], std[j], clip);
}

void rl_swiglu_forward(float *out, const float *gate, const float *up, int64_t n)
{
    RL_OMP_FOR_SIMD_IF(n > RL_PAR_MIN)
    for (int64_t i = 0; i < n; i++) {
        float g = gate[i];
        out[i] = g * s_sigmoid(g) * up[i];
    }
}

void rl_swiglu_backward(float *dgate, float *dup, const float *dout, const float *gate,
                        const float *up, int64_t n)
{
    if (dgate && dup) {
        RL_OMP_FOR_SIMD_IF(n > RL_PAR_MIN)
        for (int64_t i = 0; i < n; i++) {
            float g = gate[i], s = s_sigmoid(g);
            dgate[i] += dout[i] * up[i] * s * (1.0f + g * (1.0f - s));
            dup[i] += dout[i] * g * s;
        }
        return;
    }
    RL_OMP_FOR_IF(n > RL_PAR_MIN)
    for (int64_t i = 0; i < n; i++) {
        float g = gate[i], s = s_sigmoid(g), silu = g * s;
        if (dgate)
            dgate[i] += dout[i] * up[i] * s * (1.0f + g * (1.0f - s));
        if (dup)
            dup[i] += dout[i] * silu;
    }
}

/* ---- RoPE ---------------------------------------------------------------- */

/* Angles are computed in double from the position so long sequences keep
 * full float precision. cos/sin are shared by all heads of a row, and by all
 * rows at the same position when positions are few (a batch of sequences):
 * then one table of (max position + 1) rows is built per call. */
static void s_rope_row(float *y, const float *x, const float *cs, const float *sn, int H,
                       int hd, int accumulate)
{
    int half = hd / 2;
    for (int h = 0; h < H; h++) {
        const float *xh = x + (size_t)h * hd;
        float *yh = y + (size_t)h * hd;
        for (int i = 0; i < half; i++) {
            float x1 = xh[i], x2 = xh[i + half];
            float y1 = x1 * cs[i] - x2 * sn[i];
            float y2 = x2 * cs[i] + x1 * sn[i];
            if (accumulate) {
                yh[i] += y1;
                yh[i + half] += y2;
            } else {
                yh[i] = y1;
                yh[i + half] = y2;
            }
        }
    }
}

static void s_rope(float *out, const float *inp, const int32_t *pos, int N, int H, int hd,
                   float theta, int inverse, int accumulate)
{
    int half = hd / 2;
    double *inv_freq = malloc(sizeof(double) * (size_t)(half > 0 ? half : 1));
    if (!inv_freq)
        return; /* cannot happen for sane sizes; output left as is */
    for (int i = 0; i < half; i++)
        inv_freq[i] = pow((double)theta, -2.0 * i / hd);
    double sgn = inverse ? -1.0 : 1.0;
    int64_t maxpos = N - 1;
    if (pos) {
        maxpos = 0;
        for (int n = 0; n < N; n++)
            maxpos = pos[n] > maxpos ? pos[n] : maxpos;
    }
    float *tab = NULL;
    if (maxpos + 1 <= N / 2 || (!pos && N > 1))
        tab = malloc(sizeof(float) * (size_t)(maxpos + 1) * (size_t)hd);
    if (tab) {
        RL_OMP_FOR_IF((maxpos + 1) * half > RL_PAR_MIN / 8)
        for (int64_t p = 0; p <= maxpos; p++)
            for (int i = 0; i < half; i++) {
                double a = (double)p * inv_freq[i];
                tab[p * hd + i] = (float)cos(a);
                tab[p * hd + half + i] = (float)(sgn * sin(a));
            }
        RL_OMP_FOR_IF((int64_t)N * H * hd > RL_PAR_MIN)
        for (int n = 0; n < N; n++) {
            const float *t = tab + (size_t)(pos ? pos[n] : n) * hd;
            s_rope_row(out + (size_t)n * H * hd, inp + (size_t)n * H * hd, t, t + half, H, hd,
                       accumulate);
        }
        free(tab);
    } else {
        RL_OMP_FOR_IF((int64_t)N * H * hd > RL_PAR_MIN)
        for (int n = 0; n < N; n++) {
            float cs[512], sn[512]; /* hd/2 <= 512 (checked by the model) */
            double p = pos ? (double)pos[n] : (double)n;
            for (int i = 0; i < half && i < 512; i++) {
                double a = p * inv_freq[i];
                cs[i] = (float)cos(a);
                sn[i] = (float)(sgn * sin(a));
            }
            s_rope_row(out + (size_t)n * H * hd, inp + (size_t)n * H * hd, cs, sn, H, hd,
                       accumulate);
        }
    }
    free(inv_freq);
}

void rl_rope_forward(float *out, const float *inp, const int32_t *pos, int N, int H, int hd,
                     float theta)
{
    s_rope(out, inp, pos, N, H, hd, theta, 0, 0);
}

void rl_rope_backward(float *dinp, const float *dout, const int32_t *pos, int N, int H, int hd,
                      float theta)
{
    s_rope(dinp, dout, pos, N, H, hd, theta, 1, 1);
}

/* ---- embedding ------------------------------------------------------------ */

void rl_embedding_forward(float *out, const int32_t *ids, const float *table, int N, int C)
{
    RL_OMP_FOR_IF((int64_t)N * C > RL_PAR_MIN)
    for (int n = 0; n < N; n++)
        memcpy(out + (size_t)n * C, table + (size_t)ids[n] * C, sizeof(float) * (size_t)C);
}

void rl_embedding_backward(float *dtable, const float *dout, const int32_t *ids, int N, int C)
{
    enum { BLK = 32 };
    int nblk = (C + BLK - 1) / BLK;
    RL_OMP_FOR_IF((int64_t)N * C > RL_PAR_MIN)
    for (int bi = 0; bi < nblk; bi++) {
        int c0 = bi * BLK, c1 = c0 + BLK < C ? c0 + BLK : C;
        for (int n = 0; n < N; n++) {
            float *d = dtable + (size_t)ids[n] * C;
            const float *g = dout + (size_t)n * C;
            for (int c = c0; c < c1; c++)
                d[c] += g[c];
        }
    }
}

/* ---- the optimiser's kernels (their object: optim.h) ------------------------------------------ */

/* Loops shorter than this stay on one thread: spawning costs more. */
#define S_ADAMW_PAR_MIN (1 << 16)
/* Block size of the deterministic sum of squares (optim.h). */
#define S_SUMSQ_BLOCK ((int64_t)1 << 16)

void rl_adamw_update(const rl_adamw_config *cfg, int64_t t, double lr, double wd, float *p,
                     const float *g, float *m, float *v, int64_t n)
{
    const rl_adamw_scalars s = rl_adamw_scalars_at(cfg, t, lr, wd);
#pragma omp parallel for schedule(static) if (n >= S_ADAMW_PAR_MIN)
    for (int64_t i = 0; i < n; i++)
        rl_adamw_elem(&s, &p[i], g[i], &m[i], &v[i]);
}

double rl_grad_sumsq(const float *g, int64_t n)
{
    if (n <= 0)
        return 0.0;
    int64_t nb = (n + S_SUMSQ_BLOCK - 1) / S_SUMSQ_BLOCK;
    double part_small[16];
    double *part = nb <= 16 ? part_small : malloc(sizeof(double) * (size_t)nb);
    if (!part) { /* out of memory: fall back to one serial pass (same blocks) */
        double total = 0.0;
        for (int64_t b = 0; b < nb; b++) {
            int64_t lo = b * S_SUMSQ_BLOCK, hi = lo + S_SUMSQ_BLOCK < n ? lo + S_SUMSQ_BLOCK : n;
            double s = 0.0;
            for (int64_t i = lo; i < hi; i++)
                s += (double)g[i] * (double)g[i];
            total += s;
        }
        return total;
    }
#pragma omp parallel for schedule(static) if (nb > 1)
    for (int64_t b = 0; b < nb; b++) {
        int64_t lo = b * S_SUMSQ_BLOCK, hi = lo + S_SUMSQ_BLOCK < n ? lo + S_SUMSQ_BLOCK : n;
        double s = 0.0;
        for (int64_t i = lo; i < hi; i++)
            s += (double)g[i] * (double)g[i];
        part[b] = s;
    }
    double total = 0.0;
    for (int64_t b = 0; b < nb; b++)
        total += part[b];
    if (part != part_small)
        free(part);
    return total;
}
