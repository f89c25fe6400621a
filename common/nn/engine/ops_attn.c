/* ops_attn.c — causal grouped-query attention and the log-prob / entropy /
 * cross-entropy heads (see common/nn/engine/ops.h).
 *
 * Attention runs one OpenMP task per (batch, head) (forward) or per
 * (batch, kv head) (backward), each doing its small products with
 * single-threaded OpenBLAS and its masked softmax in cache. Only the
 * per-row log-sum-exp is saved; the backward recomputes the probabilities
 * block by block (memory O(B·H·T) instead of O(B·H·T²)). */
#include "common/nn/engine/ops_elem.h"
#include "common/nn/engine/ops_internal.h"

#include "rlrt/error.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

/* Causal block size: query rows [r0, r1) only need keys [0, r1), so the
 * products run per row block and skip the masked upper triangle (≈ 40 % of
 * the attention FLOPs at T = 256). */
enum { ATT_BLK = 64 };

/* Per-thread scratch for one row block: two (ATT_BLK, T) score panels. */
static float *s_scratch(int T, int *nthreads)
{
    int nt = rl_nn_get_threads();
    *nthreads = nt;
    return malloc(sizeof(float) * 2 * (size_t)ATT_BLK * (size_t)T * (size_t)nt);
}

/* Scores → probabilities for rows [r0, r1) of one (batch, head), in place in
 * S (row t at S + (t − r0)·T, columns [0, r1) valid). fwd: softmax, and the
 * row's log-sum-exp is stored in lse[t] (+inf when no key is visible).
 * !fwd: P = exp(S − lse[t]) from the forward's lse. Masked and future
 * columns become 0. */
static void s_probs(float *S, float *lse, const uint8_t *mb, int r0, int r1, int T, int fwd)
{
    for (int t = r0; t < r1; t++) {
        float *row = S + (size_t)(t - r0) * T;
        float m, l;
        if (fwd) {
            m = -INFINITY;
            if (mb) {
                RL_PRAGMA(omp simd reduction(max : m))
                for (int s = 0; s <= t; s++) {
                    float v = rl_selectf(mb[s], row[s], -INFINITY);
                    m = v > m ? v : m;
                }
            } else {
                RL_PRAGMA(omp simd reduction(max : m))
                for (int s = 0; s <= t; s++)
                    m = row[s] > m ? row[s] : m;
            }
            if (m == -INFINITY) {
                lse[t] = INFINITY;
                memset(row, 0, sizeof(float) * (size_t)r1);
                continue;
            }
        } else {
            l = lse[t];
            if (l == INFINITY) {
                memset(row, 0, sizeof(float) * (size_t)r1);
                continue;
            }
            m = l;
        }
        float sum = 0.0f;
        if (mb) {
            RL_SIMD_SUM(sum)
            for (int s = 0; s <= t; s++) {
                float e = rl_fast_expf(row[s] - m);
                e = rl_selectf(mb[s], e, 0.0f);
                row[s] = e;
                sum += e;
            }
        } else {
            RL_SIMD_SUM(sum)
            for (int s = 0; s <= t; s++) {
                float e = rl_fast_expf(row[s] - m);
                row[s] = e;
                sum += e;
            }
        }
        if (fwd) {
            float inv = 1.0f / sum;
            lse[t] = m + logf(sum);
            RL_SIMD
            for (int s = 0; s <= t; s++)
                row[s] *= inv;
        }
        for (int s = t + 1; s < r1; s++)
            row[s] = 0.0f;
    }
}

int rl_attention_forward(float *out, float *lse, const float *q, const float *k, const float *v,
                         const uint8_t *mask, int B, int T, int H, int KH, int hd)
{
    int rep = H / KH;
    float scale = 1.0f / sqrtf((float)hd);
    int qs = H * hd, ks = KH * hd; /* row strides */
    int tasks = B * H, nt;
    float *scr = s_scratch(T, &nt);
    if (!scr)
        return rl_error_set(RL_ENOMEM, "attention: scratch for T=%d", T);
    /* One (batch, head) per task: scores, softmax and P·V stay in cache, and
     * rl_sgemm runs single-threaded inside the OpenMP region. */
    RL_OMP_FOR_IF((int64_t)tasks * T * T * hd > RL_PAR_MIN)
    for (int bh = 0; bh < tasks; bh++) {
        int b = bh / H, h = bh % H;
        const float *qb = q + (size_t)b * T * qs + (size_t)h * hd;
        const float *kb = k + (size_t)b * T * ks + (size_t)(h / rep) * hd;
        const float *vb = v + (size_t)b * T * ks + (size_t)(h / rep) * hd;
        float *ob = out + (size_t)b * T * qs + (size_t)h * hd;
        float *S = scr + (size_t)omp_get_thread_num() * 2 * ATT_BLK * T;
        for (int r0 = 0; r0 < T; r0 += ATT_BLK) {
            int r1 = r0 + ATT_BLK < T ? r0 + ATT_BLK : T;
            rl_sgemm(0, 1, r1 - r0, r1, hd, scale, qb + (size_t)r0 * qs, qs, kb, ks, 0.0f, S, T);
            s_probs(S, lse + (size_t)bh * T, mask ? mask + (size_t)b * T : NULL, r0, r1, T, 1);
            rl_sgemm(0, 0, r1 - r0, hd, r1, 1.0f, S, T, vb, ks, 0.0f, ob + (size_t)r0 * qs, qs);
        }
    }
    free(scr);
    return 0;
}

int rl_attention_backward(float *dq, float *dk, float *dv, const float *dout, const float *out,
                          const float *lse, const float *q, const float *k, const float *v,
                          const uint8_t *mask, int B, int T, int H, int KH, int hd)
{
    int rep = H / KH;
    float scale = 1.0f / sqrtf((float)hd);
    int qs = H * hd, ks = KH * hd;
    int tasks = B * KH, nt;
    float *scr = s_scratch(T, &nt);
    if (!scr)
        return rl_error_set(RL_ENOMEM, "attention backward: scratch for T=%d", T);
    /* One (batch, kv head) per task: the query heads sharing that kv head add
     * into the same dk/dv rows, in a fixed order, on one thread. The
     * probabilities are recomputed from the saved log-sum-exp. */
    RL_OMP_FOR_IF((int64_t)tasks * T * T * hd > RL_PAR_MIN)
    for (int bk = 0; bk < tasks; bk++) {
        int b = bk / KH, kh = bk % KH;
        size_t ko = (size_t)b * T * ks + (size_t)kh * hd;
        float *P = scr + (size_t)omp_get_thread_num() * 2 * ATT_BLK * T;
        float *dP = P + (size_t)ATT_BLK * T;
        const uint8_t *mb = mask ? mask + (size_t)b * T : NULL;
        for (int h = kh * rep; h < (kh + 1) * rep; h++) {
            size_t qo = (size_t)b * T * qs + (size_t)h * hd;
            const float *lh = lse + ((size_t)b * H + h) * T;
            for (int r0 = 0; r0 < T; r0 += ATT_BLK) {
                int r1 = r0 + ATT_BLK < T ? r0 + ATT_BLK : T, rb = r1 - r0;
                const float *Qb = q + qo + (size_t)r0 * qs;
                const float *dO = dout + qo + (size_t)r0 * qs;
                rl_sgemm(0, 1, rb, r1, hd, scale, Qb, qs, k + ko, ks, 0.0f, P, T);
                s_probs(P, (float *)lh, mb, r0, r1, T, 0);
                rl_sgemm(0, 1, rb, r1, hd, 1.0f, dO, qs, v + ko, ks, 0.0f, dP, T);
                if (dv)
                    rl_sgemm(1, 0, r1, hd, rb, 1.0f, P, T, dO, qs, 1.0f, dv + ko, ks);
                for (int t = r0; t < r1; t++) {
                    const float *Pr = P + (size_t)(t - r0) * T;
                    float *dr = dP + (size_t)(t - r0) * T;
                    float dot = 0.0f;
                    RL_SIMD_SUM(dot)
                    for (int s = 0; s <= t; s++)
                        dot += dr[s] * Pr[s];
                    RL_SIMD
                    for (int s = 0; s <= t; s++)
                        dr[s] = Pr[s] * (dr[s] - dot);
                    for (int s = t + 1; s < r1; s++)
                        dr[s] = 0.0f;
                }
                if (dq)
                    rl_sgemm(0, 0, rb, hd, r1, scale, dP, T, k + ko, ks, 1.0f, dq + qo + (size_t)r0 * qs, qs);
                if (dk)
                    rl_sgemm(1, 0, r1, hd, rb, scale, dP, T, Qb, qs, 1.0f, dk + ko, ks);
            }
        }
    }
    free(scr);
    return 0;
}

/* ---- log-probs, entropy, cross-entropy ---------------------------------- */

void rl_logprob_forward(float *logp, float *entropy, float *lse, const float *logits,
                        const int32_t *target, float inv_temp, int N, int V)
{
    RL_OMP_FOR_IF((int64_t)N * V > RL_PAR_MIN)
    for (int n = 0; n < N; n++) {
        const float *z = logits + (size_t)n * V;
        float m = -INFINITY;
        RL_PRAGMA(omp simd reduction(max : m))
        for (int j = 0; j < V; j++)
            m = z[j] > m ? z[j] : m;
        m *= inv_temp;
        /* s = Σ e^(a-m), sa = Σ e^(a-m)·(a-m): one exp per element, sums in
         * double (vocabularies run to 10^5). */
        double s = 0.0, sa = 0.0;
        RL_PRAGMA(omp simd reduction(+ : s, sa))
        for (int j = 0; j < V; j++) {
            float d = z[j] * inv_temp - m;
            float e = rl_fast_expf(d);
            s += e;
            sa += (double)(e * d);
        }
        rl_logprob_row_end(n, z, target ? target[n] : -1, inv_temp, m, s, sa, logp, entropy, lse);
    }
}

void rl_sample_rows(int32_t *tok, float *logp, float *entropy, const float *logits,
                    const double *u, float inv_temp, int n, int V)
{
    for (int i = 0; i < n; i++) {
        const float *z = logits + (size_t)i * V;
        float lse;
        rl_logprob_forward(NULL, entropy + i, &lse, z, NULL, inv_temp, 1, V);
        if (!isfinite(lse)) {
            tok[i] = -1;
            logp[i] = 0.0f;
            continue;
        }
        int t = 0;
        if (u[i] < 0.0) { /* the first argmax */
            for (int j = 1; j < V; j++)
                if (z[j] > z[t])
                    t = j;
        } else { /* inverse CDF in index order */
            double total = 0.0;
            for (int j = 0; j < V; j++)
                total += exp((double)z[j] * inv_temp - lse);
            double target = u[i] * total, cum = 0.0;
            t = V - 1;
            for (int j = 0; j < V; j++) {
                cum += exp((double)z[j] * inv_temp - lse);
                if (cum > target) {
                    t = j;
                    break;
                }
            }
        }
        tok[i] = t;
        logp[i] = z[t] * inv_temp - lse;
    }
}

void rl_logprob_backward(float *dlogits, const float *dlogp, const float *dentropy,
                         const float *logits, const float *lse, const float *entropy,
                         const int32_t *target, float inv_temp, int N, int V)
{
    RL_OMP_FOR_IF((int64_t)N * V > RL_PAR_MIN)
    for (int n = 0; n < N; n++) {
        const float *z = logits + (size_t)n * V;
        float *d = dlogits + (size_t)n * V;
        float gl = dlogp ? dlogp[n] : 0.0f;
        float ge = dentropy ? dentropy[n] : 0.0f;
        int y = target ? target[n] : -1;
        if (y < 0)
            gl = 0.0f;
        float l = lse[n], H = (ge != 0.0f) ? entropy[n] : 0.0f;
        /* d logp/da_j = δ_jy − p_j;  dH/da_j = −p_j (log p_j + H). */
        RL_SIMD
        for (int j = 0; j < V; j++) {
            float lp = z[j] * inv_temp - l;
            float p = rl_fast_expf(lp);
            d[j] = rl_logprob_grad(gl, ge, lp, p, H) * inv_temp;
        }
        if (y >= 0)
            d[y] += gl * inv_temp;
    }
}

float rl_cross_entropy(float *dlogits, const float *logits, const int32_t *target, int N, int V)
{
    float *lp = malloc(sizeof(float) * (size_t)(N > 0 ? N : 1) * 2);
    if (!lp)
        return NAN;
    float *lse = lp + N;
    rl_logprob_forward(lp, NULL, lse, logits, target, 1.0f, N, V);
    int count = 0;
    for (int n = 0; n < N; n++)
        count += target[n] >= 0;
    double loss = -rl_sum(lp, N) / (count > 0 ? count : 1);
    if (dlogits) {
        float g = count > 0 ? -1.0f / (float)count : 0.0f;
        for (int n = 0; n < N; n++)
            lp[n] = g; /* reuse as dlogp */
        rl_logprob_backward(dlogits, lp, NULL, logits, lse, NULL, target, 1.0f, N, V);
    }
    free(lp);
    return (float)loss;
}

/* ---- decoding over a KV cache ----------------------------------------------------------------- */

void rl_kv_cache_write(float *kc, float *vc, const float *k, const float *v, const int32_t *slot,
                       const int32_t *pos, int n, int kvd, int maxT)
{
    for (int i = 0; i < n; i++) {
        size_t at = ((size_t)slot[i] * maxT + pos[i]) * kvd;
        memcpy(kc + at, k + (size_t)i * kvd, sizeof(float) * (size_t)kvd);
        memcpy(vc + at, v + (size_t)i * kvd, sizeof(float) * (size_t)kvd);
    }
}

void rl_decode_attention(float *out, float *scores, const float *q, const float *kc,
                         const float *vc, const int32_t *slot, const int32_t *pos, int n, int H,
                         int KH, int hd, int maxT)
{
    if (n <= 0)
        return;
    const int qd = H * hd, kvd = KH * hd, rep = H / KH, nh = n * H;
    const float scale = 1.0f / sqrtf((float)hd);
    RL_OMP_FOR_IF((int64_t)nh * (pos[0] + 1) * hd > 8 * RL_PAR_MIN)
    for (int ih = 0; ih < nh; ih++) {
        int i = ih / H, h = ih % H, len = pos[i] + 1;
        const float *qv = q + (size_t)i * qd + (size_t)h * hd;
        const float *kb = kc + (size_t)slot[i] * maxT * kvd + (size_t)(h / rep) * hd;
        const float *vb = vc + (size_t)slot[i] * maxT * kvd + (size_t)(h / rep) * hd;
        float *sc = scores + (size_t)ih * maxT;
        float mx = -INFINITY;
        for (int t = 0; t < len; t++) {
            const float *kr = kb + (size_t)t * kvd;
            float dot = 0.0f;
            RL_SIMD_SUM(dot)
            for (int e = 0; e < hd; e++)
                dot += qv[e] * kr[e];
            sc[t] = dot * scale;
            mx = sc[t] > mx ? sc[t] : mx;
        }
        float sum = 0.0f;
        RL_SIMD_SUM(sum)
        for (int t = 0; t < len; t++) {
            sc[t] = rl_fast_expf(sc[t] - mx);
            sum += sc[t];
        }
        float inv = 1.0f / sum;
        float *o = out + (size_t)i * qd + (size_t)h * hd;
        for (int e = 0; e < hd; e++)
            o[e] = 0.0f;
        for (int t = 0; t < len; t++) {
            float p = sc[t] * inv;
            const float *vr = vb + (size_t)t * kvd;
            RL_SIMD
            for (int e = 0; e < hd; e++)
                o[e] += p * vr[e];
        }
    }
}
