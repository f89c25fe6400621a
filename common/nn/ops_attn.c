/* ops_attn.c — causal grouped-query attention and the log-prob / entropy /
 * cross-entropy heads (see rlrt/nn/ops.h).
 *
 * Attention runs as per-(batch, head) OpenBLAS products with the masked
 * softmax in between as one OpenMP loop over all rows, so BLAS is never called
 * from inside an OpenMP region (the pthread OpenBLAS build would otherwise
 * oversubscribe the cores). */
#include "ops_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void rl_attention_forward(float *out, float *att, const float *q, const float *k,
                          const float *v, const uint8_t *mask, int B, int T, int H, int KH,
                          int hd)
{
    int rep = H / KH;
    float scale = 1.0f / sqrtf((float)hd);
    int qs = H * hd, ks = KH * hd; /* row strides */
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++) {
            const float *qb = q + (size_t)b * T * qs + (size_t)h * hd;
            const float *kb = k + (size_t)b * T * ks + (size_t)(h / rep) * hd;
            float *S = att + ((size_t)b * H + h) * T * T;
            rl_sgemm(0, 1, T, T, hd, scale, qb, qs, kb, ks, 0.0f, S, T);
        }
    int64_t rows = (int64_t)B * H * T;
    RL_OMP_FOR_IF(rows * T > RL_PAR_MIN)
    for (int64_t r = 0; r < rows; r++) {
        int t = (int)(r % T);
        int b = (int)(r / ((int64_t)H * T));
        float *S = att + r * T;
        const uint8_t *mb = mask ? mask + (size_t)b * T : NULL;
        float m = -INFINITY;
        for (int s = 0; s <= t; s++)
            if ((!mb || mb[s]) && S[s] > m)
                m = S[s];
        if (m == -INFINITY) { /* no visible key: zero output */
            memset(S, 0, sizeof(float) * (size_t)T);
            continue;
        }
        double sum = 0.0;
        for (int s = 0; s <= t; s++) {
            float e = (!mb || mb[s]) ? expf(S[s] - m) : 0.0f;
            S[s] = e;
            sum += e;
        }
        float inv = (float)(1.0 / sum);
        for (int s = 0; s <= t; s++)
            S[s] *= inv;
        for (int s = t + 1; s < T; s++)
            S[s] = 0.0f;
    }
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++) {
            const float *vb = v + (size_t)b * T * ks + (size_t)(h / rep) * hd;
            const float *S = att + ((size_t)b * H + h) * T * T;
            float *ob = out + (size_t)b * T * qs + (size_t)h * hd;
            rl_sgemm(0, 0, T, hd, T, 1.0f, S, T, vb, ks, 0.0f, ob, qs);
        }
}

void rl_attention_backward(float *dq, float *dk, float *dv, float *datt, const float *dout,
                           const float *att, const float *q, const float *k, const float *v,
                           int B, int T, int H, int KH, int hd)
{
    int rep = H / KH;
    float scale = 1.0f / sqrtf((float)hd);
    int qs = H * hd, ks = KH * hd;
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++) {
            size_t qo = (size_t)b * T * qs + (size_t)h * hd;
            size_t ko = (size_t)b * T * ks + (size_t)(h / rep) * hd;
            const float *P = att + ((size_t)b * H + h) * T * T;
            float *dP = datt + ((size_t)b * H + h) * T * T;
            rl_sgemm(0, 1, T, T, hd, 1.0f, dout + qo, qs, v + ko, ks, 0.0f, dP, T);
            if (dv)
                rl_sgemm(1, 0, T, hd, T, 1.0f, P, T, dout + qo, qs, 1.0f, dv + ko, ks);
        }
    int64_t rows = (int64_t)B * H * T;
    RL_OMP_FOR_IF(rows * T > RL_PAR_MIN)
    for (int64_t r = 0; r < rows; r++) {
        int t = (int)(r % T);
        const float *P = att + r * T;
        float *dP = datt + r * T;
        double dot = 0.0;
        for (int s = 0; s <= t; s++)
            dot += (double)dP[s] * P[s];
        float fd = (float)dot;
        for (int s = 0; s <= t; s++)
            dP[s] = P[s] * (dP[s] - fd);
        for (int s = t + 1; s < T; s++)
            dP[s] = 0.0f;
    }
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++) {
            size_t qo = (size_t)b * T * qs + (size_t)h * hd;
            size_t ko = (size_t)b * T * ks + (size_t)(h / rep) * hd;
            const float *dS = datt + ((size_t)b * H + h) * T * T;
            if (dq)
                rl_sgemm(0, 0, T, hd, T, scale, dS, T, k + ko, ks, 1.0f, dq + qo, qs);
            if (dk)
                rl_sgemm(1, 0, T, hd, T, scale, dS, T, q + qo, qs, 1.0f, dk + ko, ks);
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
        for (int j = 0; j < V; j++)
            m = z[j] > m ? z[j] : m;
        m *= inv_temp;
        /* s = Σ e^(a-m), sa = Σ e^(a-m)·(a-m): one exp per element. */
        double s = 0.0, sa = 0.0;
        for (int j = 0; j < V; j++) {
            float d = z[j] * inv_temp - m;
            double e = expf(d);
            s += e;
            sa += e * d;
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
        for (int j = 0; j < V; j++) {
            float lp = z[j] * inv_temp - l;
            float p = expf(lp);
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
