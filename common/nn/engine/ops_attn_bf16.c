/* ops_attn_bf16.c — causal grouped-query attention with bf16 products
 * (model.precision bf16; the contract is in common/nn/engine/ops.h, "bf16
 * attention"). This is the CPU's reference of the GPU's tensor-core kernels:
 * the same values rounded to bf16 at the same places, float32 sums, the
 * forward's online softmax over the same 64-key tiles (P is rounded after
 * subtracting the running maximum of the tiles seen so far, so the tiling
 * decides which values are rounded). Row by row and unblocked: it is there
 * for parity and for CPU jobs in bf16, not for speed. One OpenMP task per
 * (batch, head) forward and per (batch, kv head) backward, each writing its
 * own rows, so the result does not depend on the thread count. */
#include "common/nn/engine/ops_elem.h"
#include "common/nn/engine/ops_internal.h"

#include "rlrt/error.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

enum { ATT_BF16_TILE = 64 }; /* the GPU kernels' key tile */

static inline float s_b(float x) { return rl_bf16_to_float(rl_bf16_round(x)); }

/* dst (T, hd) = bf16(src rows of stride rs). */
static void s_round_rows(float *dst, const float *src, int T, int rs, int hd)
{
    for (int t = 0; t < T; t++)
        for (int e = 0; e < hd; e++)
            dst[(size_t)t * hd + e] = s_b(src[(size_t)t * rs + e]);
}

static inline float s_dot(const float *a, const float *b, int n)
{
    float s = 0.0f;
    for (int e = 0; e < n; e++)
        s = fmaf(a[e], b[e], s);
    return s;
}

static inline int s_vis(int s, int t, const uint8_t *mb) { return s <= t && (!mb || mb[s]); }

int rl_attention_forward_bf16(float *out, float *lse, const float *q, const float *k,
                              const float *v, const uint8_t *mask, int B, int T, int H, int KH,
                              int hd)
{
    if (hd > RL_ATTENTION_BF16_MAX_HD)
        return rl_attention_forward(out, lse, q, k, v, mask, B, T, H, KH, hd);
    if (B <= 0 || T <= 0 || H <= 0)
        return 0;
    const int rep = H / KH, qs = H * hd, ks = KH * hd;
    const float scale = 1.0f / sqrtf((float)hd);
    const int nt = rl_nn_get_threads();
    /* per thread: q̂, k̂, v̂ (T, hd) each, a row's o (hd) and p (64) */
    const size_t per = 3 * (size_t)T * hd + (size_t)hd + ATT_BF16_TILE;
    float *scr = malloc(sizeof(float) * per * (size_t)nt);
    if (!scr)
        return rl_error_set(RL_ENOMEM, "attention (bf16): scratch for T=%d hd=%d", T, hd);
    RL_OMP_FOR_IF((int64_t)B * H * T * T * hd > RL_PAR_MIN)
    for (int bh = 0; bh < B * H; bh++) {
        const int b = bh / H, h = bh % H;
        float *Q = scr + (size_t)omp_get_thread_num() * per, *K = Q + (size_t)T * hd;
        float *V = K + (size_t)T * hd, *o = V + (size_t)T * hd, *p = o + hd;
        const uint8_t *mb = mask ? mask + (size_t)b * T : NULL;
        s_round_rows(Q, q + (size_t)b * T * qs + (size_t)h * hd, T, qs, hd);
        s_round_rows(K, k + (size_t)b * T * ks + (size_t)(h / rep) * hd, T, ks, hd);
        s_round_rows(V, v + (size_t)b * T * ks + (size_t)(h / rep) * hd, T, ks, hd);
        for (int t = 0; t < T; t++) {
            float m = -INFINITY, l = 0.0f;
            memset(o, 0, sizeof(float) * (size_t)hd);
            for (int k0 = 0; k0 <= t; k0 += ATT_BF16_TILE) {
                int k1 = k0 + ATT_BF16_TILE < T ? k0 + ATT_BF16_TILE : T;
                float mx = -INFINITY;
                for (int s = k0; s < k1; s++) {
                    p[s - k0] = s_vis(s, t, mb) ? s_dot(Q + (size_t)t * hd, K + (size_t)s * hd, hd) * scale
                                                : -INFINITY;
                    mx = fmaxf(mx, p[s - k0]);
                }
                float mn = fmaxf(m, mx);
                float alpha = mn == -INFINITY ? 1.0f : expf(m - mn), sum = 0.0f;
                for (int e = 0; e < hd; e++)
                    o[e] *= alpha;
                for (int s = k0; s < k1; s++) {
                    float e = p[s - k0] == -INFINITY ? 0.0f : expf(p[s - k0] - mn);
                    sum += e;
                    float eb = s_b(e);
                    for (int j = 0; j < hd; j++)
                        o[j] = fmaf(eb, V[(size_t)s * hd + j], o[j]);
                }
                l = l * alpha + sum;
                m = mn;
            }
            float inv = l > 0.0f ? 1.0f / l : 0.0f;
            float *ob = out + ((size_t)b * T + t) * qs + (size_t)h * hd;
            for (int e = 0; e < hd; e++)
                ob[e] = o[e] * inv;
            lse[(size_t)bh * T + t] = l > 0.0f ? m + logf(l) : INFINITY;
        }
    }
    free(scr);
    return 0;
}

int rl_attention_backward_bf16(float *dq, float *dk, float *dv, const float *dout, const float *out,
                               const float *lse, const float *q, const float *k, const float *v,
                               const uint8_t *mask, int B, int T, int H, int KH, int hd)
{
    if (hd > RL_ATTENTION_BF16_MAX_HD)
        return rl_attention_backward(dq, dk, dv, dout, out, lse, q, k, v, mask, B, T, H, KH, hd);
    if (B <= 0 || T <= 0 || H <= 0 || (!dq && !dk && !dv))
        return 0;
    const int rep = H / KH, qs = H * hd, ks = KH * hd;
    const float scale = 1.0f / sqrtf((float)hd);
    const int nt = rl_nn_get_threads();
    /* per thread: q̂, dÔ, k̂, v̂ (T, hd), the dK and dV sums (T, hd), a row's
     * dQ sum (hd), P and dS of a row (T each) */
    const size_t per = 6 * (size_t)T * hd + (size_t)hd + 2 * (size_t)T;
    float *scr = malloc(sizeof(float) * per * (size_t)nt);
    if (!scr)
        return rl_error_set(RL_ENOMEM, "attention backward (bf16): scratch for T=%d hd=%d", T, hd);
    RL_OMP_FOR_IF((int64_t)B * H * T * T * hd > RL_PAR_MIN)
    for (int bk = 0; bk < B * KH; bk++) {
        const int b = bk / KH, kh = bk % KH;
        const size_t ko = (size_t)b * T * ks + (size_t)kh * hd;
        float *Q = scr + (size_t)omp_get_thread_num() * per, *dO = Q + (size_t)T * hd;
        float *K = dO + (size_t)T * hd, *V = K + (size_t)T * hd;
        float *gk = V + (size_t)T * hd, *gv = gk + (size_t)T * hd, *gq = gv + (size_t)T * hd;
        float *P = gq + hd, *dS = P + T;
        const uint8_t *mb = mask ? mask + (size_t)b * T : NULL;
        s_round_rows(K, k + ko, T, ks, hd);
        s_round_rows(V, v + ko, T, ks, hd);
        for (int h = kh * rep; h < (kh + 1) * rep; h++) {
            const size_t qo = (size_t)b * T * qs + (size_t)h * hd;
            const float *lh = lse + ((size_t)b * H + h) * T;
            s_round_rows(Q, q + qo, T, qs, hd);
            s_round_rows(dO, dout + qo, T, qs, hd);
            /* each head's dK, dV share summed on its own, then added in head
             * order (the GPU's per-head shares and their reduction) */
            memset(gk, 0, sizeof(float) * 2 * (size_t)T * hd);
            for (int t = 0; t < T; t++) {
                const float L = lh[t];
                if (isinf(L))
                    continue; /* a row that sees no key: P = 0 */
                float Dt = 0.0f;
                for (int s = 0; s <= t; s++) {
                    int vis = s_vis(s, t, mb);
                    P[s] = vis ? expf(s_dot(Q + (size_t)t * hd, K + (size_t)s * hd, hd) * scale - L) : 0.0f;
                    dS[s] = vis ? s_dot(dO + (size_t)t * hd, V + (size_t)s * hd, hd) : 0.0f; /* dP */
                    if (!out)
                        Dt += P[s] * dS[s];
                }
                if (out) { /* D_t = dO_t · O_t in float32 */
                    const float *orow = out + qo + (size_t)t * qs, *grow = dout + qo + (size_t)t * qs;
                    for (int e = 0; e < hd; e++)
                        Dt = fmaf(grow[e], orow[e], Dt);
                }
                memset(gq, 0, sizeof(float) * (size_t)hd);
                for (int s = 0; s <= t; s++) {
                    float pb = s_b(P[s]), ds = s_b(P[s] * (dS[s] - Dt));
                    for (int e = 0; e < hd; e++) {
                        gv[(size_t)s * hd + e] = fmaf(pb, dO[(size_t)t * hd + e], gv[(size_t)s * hd + e]);
                        gk[(size_t)s * hd + e] = fmaf(ds, Q[(size_t)t * hd + e], gk[(size_t)s * hd + e]);
                        gq[e] = fmaf(ds, K[(size_t)s * hd + e], gq[e]);
                    }
                }
                if (dq)
                    for (int e = 0; e < hd; e++)
                        dq[qo + (size_t)t * qs + e] += scale * gq[e];
            }
            for (int s = 0; s < T; s++)
                for (int e = 0; e < hd; e++) {
                    if (dk)
                        dk[ko + (size_t)s * ks + e] += scale * gk[(size_t)s * hd + e];
                    if (dv)
                        dv[ko + (size_t)s * ks + e] += gv[(size_t)s * hd + e];
                }
        }
    }
    free(scr);
    return 0;
}
