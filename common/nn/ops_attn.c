/* ops_attn.c — causal grouped-query attention and the log-prob / entropy /
 * cross-entropy heads (see rlrt/nn/ops.h).
 *
 * Attention runs one OpenMP task per (batch, head) (forward) or per
 * (batch, kv head) (backward), each doing its small products with
 * single-threaded OpenBLAS and its masked softmax in cache. */
#include "ops_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Masked causal softmax in place of score rows [r0, r1) (row t at
 * S + (t − r0)·T, scores already scaled, columns > t never read and set to
 * 0); rows with no visible key become 0. */
static void s_masked_softmax(float *S, const uint8_t *mb, int r0, int r1, int T)
{
    for (int t = r0; t < r1; t++) {
        float *row = S + (size_t)(t - r0) * T;
        float m = -INFINITY;
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
        if (m == -INFINITY) { /* no visible key: zero output */
            memset(row, 0, sizeof(float) * (size_t)T);
            continue;
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
        float inv = 1.0f / sum;
        RL_SIMD
        for (int s = 0; s <= t; s++)
            row[s] *= inv;
        for (int s = t + 1; s < T; s++)
            row[s] = 0.0f;
    }
}

/* Causal block size: query rows [r0, r1) only need keys [0, r1), so the
 * products run per row block and skip the masked upper triangle (≈ 40 % of
 * the attention FLOPs at T = 256). */
enum { ATT_BLK = 64 };

void rl_attention_forward(float *out, float *att, const float *q, const float *k,
                          const float *v, const uint8_t *mask, int B, int T, int H, int KH,
                          int hd)
{
    int rep = H / KH;
    float scale = 1.0f / sqrtf((float)hd);
    int qs = H * hd, ks = KH * hd; /* row strides */
    int tasks = B * H;
    /* One (batch, head) per task: scores, softmax and P·V stay in cache, and
     * rl_sgemm runs single-threaded inside the OpenMP region. */
    RL_OMP_FOR_IF((int64_t)tasks * T * T * hd > RL_PAR_MIN)
    for (int bh = 0; bh < tasks; bh++) {
        int b = bh / H, h = bh % H;
        const float *qb = q + (size_t)b * T * qs + (size_t)h * hd;
        const float *kb = k + (size_t)b * T * ks + (size_t)(h / rep) * hd;
        const float *vb = v + (size_t)b * T * ks + (size_t)(h / rep) * hd;
        float *ob = out + (size_t)b * T * qs + (size_t)h * hd;
        float *S = att + (size_t)bh * T * T;
        for (int r0 = 0; r0 < T; r0 += ATT_BLK) {
            int r1 = r0 + ATT_BLK < T ? r0 + ATT_BLK : T;
            float *Sb = S + (size_t)r0 * T;
            rl_sgemm(0, 1, r1 - r0, r1, hd, scale, qb + (size_t)r0 * qs, qs, kb, ks, 0.0f, Sb, T);
            s_masked_softmax(Sb, mask ? mask + (size_t)b * T : NULL, r0, r1, T);
            rl_sgemm(0, 0, r1 - r0, hd, r1, 1.0f, Sb, T, vb, ks, 0.0f, ob + (size_t)r0 * qs, qs);
        }
    }
}

void rl_attention_backward(float *dq, float *dk, float *dv, float *datt, const float *dout,
                           const float *att, const float *q, const float *k, const float *v,
                           int B, int T, int H, int KH, int hd)
{
    int rep = H / KH;
    float scale = 1.0f / sqrtf((float)hd);
    int qs = H * hd, ks = KH * hd;
    int tasks = B * KH;
    /* One (batch, kv head) per task: the query heads sharing that kv head add
     * into the same dk/dv rows, in a fixed order, on one thread. */
    RL_OMP_FOR_IF((int64_t)tasks * T * T * hd > RL_PAR_MIN)
    for (int bk = 0; bk < tasks; bk++) {
        int b = bk / KH, kh = bk % KH;
        size_t ko = (size_t)b * T * ks + (size_t)kh * hd;
        for (int h = kh * rep; h < (kh + 1) * rep; h++) {
            size_t qo = (size_t)b * T * qs + (size_t)h * hd;
            for (int r0 = 0; r0 < T; r0 += ATT_BLK) {
                int r1 = r0 + ATT_BLK < T ? r0 + ATT_BLK : T, rb = r1 - r0;
                const float *P = att + (((size_t)b * H + h) * T + r0) * T;
                float *dP = datt + (((size_t)b * H + h) * T + r0) * T;
                const float *dO = dout + qo + (size_t)r0 * qs;
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
                    rl_sgemm(1, 0, r1, hd, rb, scale, dP, T, q + qo + (size_t)r0 * qs, qs, 1.0f, dk + ko, ks);
            }
        }
    }
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
        double l = m + log(s);
        if (lse)
            lse[n] = (float)l;
        if (entropy)
            entropy[n] = (float)(log(s) - sa / s);
        if (logp) {
            int y = target ? target[n] : -1;
            logp[n] = y >= 0 ? (float)((double)z[y] * inv_temp - l) : 0.0f;
        }
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
            float g = -gl * p - ge * p * (lp + H);
            d[j] = g * inv_temp;
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
