/* ops_bf16.c — the CPU's emulation of bf16 products with float32
 * accumulation (see common/nn/engine/ops.h, "bf16 products"): round each
 * input to bf16, widen it back (exact) and multiply with rl_sgemm. */
#include "common/nn/engine/ops_internal.h"

#include "rlrt/error.h"

#include <stdlib.h>

void rl_round_bf16(uint16_t *out, const float *in, int64_t n)
{
    RL_OMP_FOR_IF(n > RL_PAR_MIN)
    for (int64_t i = 0; i < n; i++)
        out[i] = rl_bf16_round(in[i]);
}

/* dst (n) = the float32 values of bf16(src (n)). */
static void s_round_f32(float *dst, const float *src, int64_t n)
{
    RL_OMP_FOR_IF(n > RL_PAR_MIN)
    for (int64_t i = 0; i < n; i++)
        dst[i] = rl_bf16_to_float(rl_bf16_round(src[i]));
}

/* dst (n) = the float32 values of the bf16 w16 (n). */
static void s_widen(float *dst, const uint16_t *w16, int64_t n)
{
    RL_OMP_FOR_IF(n > RL_PAR_MIN)
    for (int64_t i = 0; i < n; i++)
        dst[i] = rl_bf16_to_float(w16[i]);
}

static float *s_scratch(int64_t n, const char *what, int N, int C, int OC)
{
    float *p = malloc(sizeof(float) * (size_t)(n > 0 ? n : 1));
    if (!p)
        rl_error_set(RL_ENOMEM, "%s (N=%d C=%d OC=%d): no memory for the bf16-rounded inputs",
                     what, N, C, OC);
    return p;
}

int rl_linear_forward_bf16(float *out, const float *inp, const uint16_t *w16, const float *b,
                           int N, int C, int OC)
{
    if (N <= 0 || OC <= 0)
        return 0;
    int64_t ni = (int64_t)N * C, nw = (int64_t)OC * C;
    float *x = s_scratch(ni + nw, "linear_forward_bf16", N, C, OC);
    if (!x)
        return RL_ENOMEM;
    float *w = x + ni;
    s_round_f32(x, inp, ni);
    s_widen(w, w16, nw);
    rl_linear_forward(out, x, w, b, N, C, OC);
    free(x);
    return 0;
}

int rl_linear_backward_bf16(float *dinp, float *dw, float *db, const float *dout,
                            const float *inp, const uint16_t *w16, int N, int C, int OC)
{
    if (N <= 0 || C <= 0 || OC <= 0)
        return 0;
    int64_t ng = (int64_t)N * OC, ni = dw ? (int64_t)N * C : 0, nw = dinp ? (int64_t)OC * C : 0;
    if (dinp || dw) {
        float *g = s_scratch(ng + ni + nw, "linear_backward_bf16", N, C, OC);
        if (!g)
            return RL_ENOMEM;
        float *x = g + ng, *w = x + ni;
        s_round_f32(g, dout, ng);
        if (dw)
            s_round_f32(x, inp, ni);
        if (dinp)
            s_widen(w, w16, nw);
        rl_linear_backward(dinp, dw, NULL, g, x, w, N, C, OC);
        free(g);
    }
    if (db) /* the bias's gradient is a sum, not a product: float32 dout */
        rl_linear_backward(NULL, NULL, db, dout, NULL, NULL, N, C, OC);
    return 0;
}
