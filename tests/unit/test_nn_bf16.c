/* test_nn_bf16.c — model.precision bf16 on the CPU (the emulation of
 * common/nn/engine/ops_bf16.c):
 *  - rl_bf16_round against known bit patterns: round to nearest even with
 *    ties both ways, ±0, ±Inf, NaNs (a signalling NaN must not become Inf),
 *    overflow to Inf, subnormals (no flush to zero). The expected values were
 *    checked against torch's float32 → bfloat16 cast (torch 2, CPU);
 *  - the bf16 linear forward and backward against a float64 reference on the
 *    bf16-rounded inputs (and NOT against the float32 one: the rounding is
 *    really applied), accumulating into their outputs;
 *  - the bf16 attention against a float64 reference of its contract (ops.h)
 *    and apart from float32's; a head over 128 runs float32's;
 *  - the transformer in bf16 against fp32 within a bf16-sized tolerance (and
 *    visibly different), bit-identical to itself run twice, its bf16 weights
 *    re-made from whatever the parameters are at each forward and generate;
 *  - model.precision: the lm kind takes bf16, another kind refuses it by
 *    name, a value outside fp32|bf16 is a config error.
 * No timing. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "common/core/rng.h"
#include "common/nn/engine/device.h"
#include "common/nn/engine/ops.h"
#include "common/nn/engine/optim.h"
#include "common/nn/models/lm/generate.h"
#include "common/nn/models/lm/lm_model.h"
#include "common/nn/models/lm/transformer.h"
#include "rlrt/config.h"
#include "rlrt/error.h"
#include "rlrt/nn/model.h"

static float s_f(uint32_t u)
{
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

/* ---- rounding ------------------------------------------------------------------ */

static void test_bf16_round_known(void **state)
{
    (void)state;
    static const struct { uint32_t in; uint16_t out; const char *what; } k[] = {
        {0x3F800000u, 0x3F80, "1.0 exact"},
        {0xC0000000u, 0xC000, "-2.0 exact"},
        {0x00000000u, 0x0000, "+0"},
        {0x80000000u, 0x8000, "-0"},
        {0x3F808000u, 0x3F80, "tie, even below: down"},
        {0x3F818000u, 0x3F82, "tie, odd below: up"},
        {0xBF818000u, 0xBF82, "negative tie, odd below: away"},
        {0x3F808001u, 0x3F81, "just above a tie: up"},
        {0x3F807FFFu, 0x3F80, "just below a tie: down"},
        {0x3FFFFFFFu, 0x4000, "carry into the exponent"},
        {0x7F800000u, 0x7F80, "+Inf"},
        {0xFF800000u, 0xFF80, "-Inf"},
        {0x7F7FFFFFu, 0x7F80, "FLT_MAX overflows to Inf"},
        {0x7F7F7FFFu, 0x7F7F, "the largest finite bf16 stays"},
        {0x7FC00000u, 0x7FC0, "quiet NaN"},
        {0x7F800001u, 0x7FC0, "signalling NaN (the plain formula makes it Inf)"},
        {0xFFC00001u, 0x7FC0, "negative NaN"},
        {0x00000001u, 0x0000, "smallest subnormal: down to 0"},
        {0x00008000u, 0x0000, "subnormal tie, even below"},
        {0x00018000u, 0x0002, "subnormal tie, odd below"},
        {0x80018000u, 0x8002, "negative subnormal tie"},
        {0x00010000u, 0x0001, "subnormal exact"},
        {0x007FFFFFu, 0x0080, "largest subnormal rounds to the smallest normal"},
    };
    enum { NK = sizeof k / sizeof k[0] };
    float in[NK];
    uint16_t out[NK];
    for (int i = 0; i < NK; i++) {
        in[i] = s_f(k[i].in);
        uint16_t got = rl_bf16_round(in[i]);
        if (got != k[i].out)
            fail_msg("%s: 0x%08X -> 0x%04X, want 0x%04X", k[i].what, k[i].in, got, k[i].out);
    }
    rl_round_bf16(out, in, NK); /* the table's kernel: the same bits */
    for (int i = 0; i < NK; i++)
        assert_int_equal(out[i], k[i].out);
    assert_true(rl_bf16_to_float(0x3F80) == 1.0f);
    assert_true(rl_bf16_to_float(0xC000) == -2.0f);
    assert_true(isinf(rl_bf16_to_float(0xFF80)) && rl_bf16_to_float(0xFF80) < 0);
    assert_true(isnan(rl_bf16_to_float(0x7FC0)));
    assert_true(rl_bf16_to_float(0x0001) == s_f(0x00010000u));
    /* every bf16 value survives widening and rounding again */
    for (uint32_t h = 0; h < 0x10000u; h++) {
        float x = rl_bf16_to_float((uint16_t)h);
        if (!isnan(x) && rl_bf16_round(x) != h)
            fail_msg("bf16 0x%04X does not round-trip", h);
    }
}

/* ---- the linear layer ---------------------------------------------------------- */

static double s_bf(float x) { return (double)rl_bf16_to_float(rl_bf16_round(x)); }

static void s_fill(float *a, int64_t n, rl_rng *g, float scale)
{
    for (int64_t i = 0; i < n; i++)
        a[i] = scale * rl_rng_normal(g);
}

/* |got - want| within float32 accumulation of terms whose |.| sum to mag;
 * returns the largest |got - want_fp32| seen, to show the rounding matters */
static void s_check(const char *what, const float *got, const double *want, const double *mag,
                    const double *want32, int64_t n, double *gap32)
{
    for (int64_t i = 0; i < n; i++) {
        double tol = 4e-6 * mag[i] + 1e-30;
        if (!(fabs(got[i] - want[i]) <= tol))
            fail_msg("%s[%lld]: %.9g, float64 reference of the bf16 inputs %.9g (tol %.3g)", what,
                     (long long)i, got[i], want[i], tol);
        double d = fabs(got[i] - want32[i]);
        *gap32 = d > *gap32 ? d : *gap32;
    }
}

static void test_bf16_linear_vs_f64(void **state)
{
    (void)state;
    enum { N = 37, C = 53, OC = 29 };
    rl_rng g;
    rl_rng_init(&g, 7, 1);
    float *x = malloc(sizeof(float) * N * C), *w = malloc(sizeof(float) * OC * C);
    float *b = malloc(sizeof(float) * OC), *dout = malloc(sizeof(float) * N * OC);
    float *out = malloc(sizeof(float) * N * OC), *dx = malloc(sizeof(float) * N * C);
    float *dw = malloc(sizeof(float) * OC * C), *db = malloc(sizeof(float) * OC);
    uint16_t *w16 = malloc(sizeof(uint16_t) * OC * C);
    double *ref = malloc(sizeof(double) * N * C * 3), *mag = ref + N * C, *r32 = mag + N * C;
    double *refw = malloc(sizeof(double) * OC * C * 3), *magw = refw + OC * C, *r32w = magw + OC * C;
    s_fill(x, N * C, &g, 1.0f);
    s_fill(w, OC * C, &g, 0.3f);
    s_fill(b, OC, &g, 0.5f);
    s_fill(dout, N * OC, &g, 1.0f);
    rl_round_bf16(w16, w, OC * C);
    double gap = 0.0;

    /* forward: out = bf(x) · bf(w)^T + b */
    assert_int_equal(rl_linear_forward_bf16(out, x, w16, b, N, C, OC), 0);
    for (int n = 0; n < N; n++)
        for (int o = 0; o < OC; o++) {
            double s = b[o], m = fabs(b[o]), s32 = b[o];
            for (int c = 0; c < C; c++) {
                double t = s_bf(x[n * C + c]) * s_bf(w[o * C + c]);
                s += t;
                m += fabs(t);
                s32 += (double)x[n * C + c] * w[o * C + c];
            }
            ref[n * OC + o] = s;
            mag[n * OC + o] = m;
            r32[n * OC + o] = s32;
        }
    s_check("forward", out, ref, mag, r32, N * OC, &gap);
    print_message("bf16 linear forward: largest distance to the float32 product %.3g\n", gap);
    assert_true(gap > 1e-3); /* the inputs were really rounded */

    /* backward accumulates: start from known values */
    for (int i = 0; i < N * C; i++)
        dx[i] = 0.25f;
    for (int i = 0; i < OC * C; i++)
        dw[i] = -0.5f;
    for (int i = 0; i < OC; i++)
        db[i] = 1.0f;
    assert_int_equal(rl_linear_backward_bf16(dx, dw, db, dout, x, w16, N, C, OC), 0);
    for (int n = 0; n < N; n++)
        for (int c = 0; c < C; c++) {
            double s = 0.25, m = 0.25, s32 = 0.25;
            for (int o = 0; o < OC; o++) {
                double t = s_bf(dout[n * OC + o]) * s_bf(w[o * C + c]);
                s += t;
                m += fabs(t);
                s32 += (double)dout[n * OC + o] * w[o * C + c];
            }
            ref[n * C + c] = s;
            mag[n * C + c] = m;
            r32[n * C + c] = s32;
        }
    gap = 0.0;
    s_check("dinp", dx, ref, mag, r32, N * C, &gap);
    assert_true(gap > 1e-3);
    for (int o = 0; o < OC; o++)
        for (int c = 0; c < C; c++) {
            double s = -0.5, m = 0.5, s32 = -0.5;
            for (int n = 0; n < N; n++) {
                double t = s_bf(dout[n * OC + o]) * s_bf(x[n * C + c]);
                s += t;
                m += fabs(t);
                s32 += (double)dout[n * OC + o] * x[n * C + c];
            }
            refw[o * C + c] = s;
            magw[o * C + c] = m;
            r32w[o * C + c] = s32;
        }
    gap = 0.0;
    s_check("dw", dw, refw, magw, r32w, OC * C, &gap);
    assert_true(gap > 1e-3);
    for (int o = 0; o < OC; o++) { /* the bias gradient: a float32 sum of float32 dout */
        double s = 1.0, m = 1.0;
        for (int n = 0; n < N; n++) {
            s += dout[n * OC + o];
            m += fabs(dout[n * OC + o]);
        }
        if (!(fabs(db[o] - s) <= 4e-6 * m))
            fail_msg("db[%d]: %.9g vs %.9g", o, db[o], s);
    }
    /* NULL outputs are skipped */
    assert_int_equal(rl_linear_backward_bf16(NULL, NULL, NULL, dout, x, w16, N, C, OC), 0);
    free(x), free(w), free(b), free(dout), free(out), free(dx), free(dw), free(db), free(w16);
    free(ref), free(refw);
}

/* ---- the transformer ----------------------------------------------------------- */

static rl_lm_config s_cfg(void)
{
    rl_lm_config c = {.vocab_size = 97, .hidden_size = 64, .intermediate_size = 96,
                      .num_layers = 2, .num_heads = 4, .num_kv_heads = 2, .max_seq_len = 32,
                      .rope_theta = 10000.0f, .rms_norm_eps = 1e-6f,
                      .tie_word_embeddings = 0, .qkv_bias = 1, .value_head = 1,
                      .bos_token_id = -1, .eos_token_id = -1, .pad_token_id = -1};
    return c;
}

enum { B = 4, T = 11 };

typedef struct {
    float lp[B * T], ent[B * T], val[B * T];
    float *grads;
} s_run;

/* forward (temperature 0.7) and the backward of Σ wl·logp + we·entropy + wv·values */
static void s_pass(rl_lm *m, const int32_t *tok, const uint8_t *mask, const float *wts, s_run *r)
{
    assert_int_equal(rl_lm_forward(m, B, T, tok, mask, 0.7f, r->lp, r->ent, r->val), 0);
    rl_lm_zero_grad(m);
    if (rl_lm_backward(m, wts, wts + B * T, wts + 2 * B * T))
        fail_msg("backward: %s", rl_error_message());
    int64_t P = rl_lm_num_params(m);
    r->grads = malloc(sizeof(float) * (size_t)P);
    memcpy(r->grads, rl_lm_grads(m), sizeof(float) * (size_t)P);
}

/* ||a - b|| / ||b|| */
static double s_rel(const float *a, const float *b, int64_t n)
{
    double d = 0, s = 0;
    for (int64_t i = 0; i < n; i++) {
        d += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
        s += (double)b[i] * b[i];
    }
    return s > 0 ? sqrt(d / s) : sqrt(d);
}

static void test_bf16_lm_vs_fp32(void **state)
{
    (void)state;
    rl_lm_config c = s_cfg();
    rl_lm *f = rl_lm_new(&c, RL_DEVICE_CPU), *h = rl_lm_new(&c, RL_DEVICE_CPU);
    assert_non_null(f);
    assert_non_null(h);
    assert_int_equal(rl_lm_precision(h), RL_PRECISION_FP32);
    assert_int_equal(rl_lm_set_precision(h, RL_PRECISION_BF16), 0);
    assert_int_equal(rl_lm_precision(h), RL_PRECISION_BF16);
    assert_int_equal(rl_lm_set_precision(h, (rl_precision)7), RL_EINVAL);
    int64_t P = rl_lm_num_params(f);
    assert_int_equal(rl_lm_init_random(f, 11, 0.1f), 0);
    memcpy(rl_lm_params(h), rl_lm_params(f), sizeof(float) * (size_t)P);

    int32_t tok[B * T];
    uint8_t mask[B * T];
    float wts[3 * B * T];
    rl_rng g;
    rl_rng_init(&g, 11, 9);
    for (int i = 0; i < B * T; i++) {
        int b = i / T, t = i % T;
        tok[i] = (int32_t)rl_rng_below(&g, (uint64_t)c.vocab_size);
        mask[i] = b == 0 ? 1 : b == 1 ? t >= 4 : b == 2 ? t < 7 : t == 5;
    }
    for (int i = 0; i < 3 * B * T; i++)
        wts[i] = rl_rng_normal(&g);

    s_run rf, rh, rh2;
    s_pass(f, tok, mask, wts, &rf);
    s_pass(h, tok, mask, wts, &rh);
    /* bf16-sized: the outputs within a few bf16 ulps (2^-8 relative) */
    double dlp = s_rel(rh.lp, rf.lp, B * T), dent = s_rel(rh.ent, rf.ent, B * T);
    double dval = s_rel(rh.val, rf.val, B * T);
    print_message("bf16 vs fp32, relative distance: logp %.3g entropy %.3g values %.3g\n", dlp,
                  dent, dval);
    assert_true(dlp < 2e-2 && dent < 2e-2 && dval < 5e-2);
    assert_true(dlp > 1e-5); /* bf16 is not fp32 */
    const rl_param_manifest *man = rl_lm_manifest(f);
    double worst = 0;
    for (int i = 0; i < man->count; i++) {
        const rl_param_view *v = &man->views[i];
        double d = s_rel(rh.grads + v->offset, rf.grads + v->offset, v->numel);
        if (!(d < 5e-2))
            fail_msg("gradient %s: relative distance bf16 vs fp32 %.3g", v->name, d);
        worst = d > worst ? d : worst;
    }
    print_message("bf16 vs fp32 gradients: worst view's relative distance %.3g\n", worst);
    assert_true(worst > 1e-4);

    /* bit-identical run twice */
    s_pass(h, tok, mask, wts, &rh2);
    assert_memory_equal(rh.lp, rh2.lp, sizeof rh.lp);
    assert_memory_equal(rh.ent, rh2.ent, sizeof rh.ent);
    assert_memory_equal(rh.val, rh2.val, sizeof rh.val);
    assert_memory_equal(rh.grads, rh2.grads, sizeof(float) * (size_t)P);

    /* an AdamW step on the parameters: the next forward multiplies by the
     * new weights (its bf16 copy is re-made), as a fresh bf16 model does */
    rl_adamw_config ac = rl_adamw_config_default();
    rl_adamw *opt = rl_adamw_new(&ac, man, 0, P);
    assert_non_null(opt);
    assert_int_equal(rl_adamw_step(opt, 1e-2, rl_lm_params(h), rh2.grads), 0);
    rl_lm *fresh = rl_lm_new(&c, RL_DEVICE_CPU);
    assert_int_equal(rl_lm_set_precision(fresh, RL_PRECISION_BF16), 0);
    memcpy(rl_lm_params(fresh), rl_lm_params(h), sizeof(float) * (size_t)P);
    s_run ra, rb;
    s_pass(h, tok, mask, wts, &ra);
    s_pass(fresh, tok, mask, wts, &rb);
    assert_memory_equal(ra.lp, rb.lp, sizeof ra.lp);
    assert_memory_equal(ra.grads, rb.grads, sizeof(float) * (size_t)P);
    assert_true(memcmp(ra.lp, rh.lp, sizeof ra.lp) != 0);

    /* generation: the same tokens twice; the weights written between two
     * generate calls are used by the second */
    enum { NEW = 6 };
    int32_t prompts[B * 5];
    int plen[B] = {5, 1, 3, 2};
    for (int i = 0; i < B * 5; i++)
        prompts[i] = tok[i];
    rl_lm_sampling sp;
    rl_lm_sampling_default(&sp);
    sp.max_new_tokens = NEW;
    sp.seed = 3;
    int32_t t1[B * NEW], t2[B * NEW], t3[B * NEW];
    float l1[B * NEW], l2[B * NEW], l3[B * NEW];
    int n1[B], n2[B], n3[B];
    assert_int_equal(rl_lm_generate(h, B, 5, prompts, plen, NULL, &sp, t1, l1, NULL, n1), 0);
    assert_int_equal(rl_lm_generate(h, B, 5, prompts, plen, NULL, &sp, t2, l2, NULL, n2), 0);
    assert_memory_equal(t1, t2, sizeof t1);
    assert_memory_equal(l1, l2, sizeof l1);
    assert_memory_equal(n1, n2, sizeof n1);
    memcpy(rl_lm_params(h), rl_lm_params(f), sizeof(float) * (size_t)P);
    assert_int_equal(rl_lm_generate(h, B, 5, prompts, plen, NULL, &sp, t3, l3, NULL, n3), 0);
    rl_lm *h2 = rl_lm_new(&c, RL_DEVICE_CPU);
    assert_int_equal(rl_lm_set_precision(h2, RL_PRECISION_BF16), 0);
    memcpy(rl_lm_params(h2), rl_lm_params(f), sizeof(float) * (size_t)P);
    assert_int_equal(rl_lm_generate(h2, B, 5, prompts, plen, NULL, &sp, t1, l1, NULL, n1), 0);
    assert_memory_equal(t1, t3, sizeof t1);
    assert_memory_equal(l1, l3, sizeof l1);

    /* back to fp32: the fp32 model's results exactly */
    assert_int_equal(rl_lm_set_precision(h, RL_PRECISION_FP32), 0);
    s_run r32;
    s_pass(h, tok, mask, wts, &r32);
    assert_memory_equal(r32.lp, rf.lp, sizeof rf.lp);
    assert_memory_equal(r32.grads, rf.grads, sizeof(float) * (size_t)P);

    free(rf.grads), free(rh.grads), free(rh2.grads), free(ra.grads), free(rb.grads), free(r32.grads);
    rl_adamw_free(opt);
    rl_lm_free(f), rl_lm_free(h), rl_lm_free(h2), rl_lm_free(fresh);
}

/* ---- model.precision ------------------------------------------------------------- */

static rl_config *s_job(int n, const char *const *kv)
{
    rl_config *known = rl_config_schema_defaults(rl_model_kind_lm.sections, 2, NULL, 0);
    rl_config *c = known ? rl_config_load_job_tree(known, NULL, n, kv) : NULL;
    rl_config_free(known);
    return c;
}

/* The bf16 attention (ops.h's "bf16 attention") against a float64 reference
 * of its contract on one key tile (T <= 64, so P is rounded after the row's
 * own maximum, whatever the tiling), two query heads over one kv head, a
 * masked key: out, lse, dq, dk, dv within float32 noise plus a P or dS that
 * float32 rounds to the other bf16 neighbour; visibly apart from the float32
 * attention; and a head wider than 128 runs the float32 pair exactly. */
static void test_bf16_attention_vs_f64(void **state)
{
    (void)state;
    enum { T = 37, H = 2, KH = 1, HD = 24, NQ = T * H * HD, NK = T * KH * HD };
    rl_rng g;
    rl_rng_init(&g, 11, 1);
    float *in = malloc(sizeof(float) * (2 * NQ + 2 * NK)), *q = in, *k = q + NQ, *v = k + NK, *go = v + NK;
    for (int i = 0; i < 2 * NQ + 2 * NK; i++)
        in[i] = rl_rng_normal(&g);
    uint8_t mask[T];
    for (int t = 0; t < T; t++)
        mask[t] = t != 5;
    float *out = malloc(sizeof(float) * NQ), *lse = malloc(sizeof(float) * H * T);
    float *o32 = malloc(sizeof(float) * NQ), *l32 = malloc(sizeof(float) * H * T);
    float *gq = calloc(NQ, sizeof(float)), *gk = calloc(NK, sizeof(float)), *gv = calloc(NK, sizeof(float));
    assert_int_equal(rl_attention_forward_bf16(out, lse, q, k, v, mask, 1, T, H, KH, HD), 0);
    assert_int_equal(rl_attention_forward(o32, l32, q, k, v, mask, 1, T, H, KH, HD), 0);
    assert_int_equal(rl_attention_backward_bf16(gq, gk, gv, go, out, lse, q, k, v, mask, 1, T, H, KH, HD), 0);
    double *rq = calloc(NQ, sizeof(double)), *rk = calloc(NK, sizeof(double)), *rv = calloc(NK, sizeof(double));
    double ro[NQ], rl[H * T], P[T], dS[T], scale = 1.0 / sqrt((double)HD), eo = 0, el = 0, apart = 0;
    for (int h = 0; h < H; h++)
        for (int t = 0; t < T; t++) {
            const float *qt = q + (t * H + h) * HD, *gt = go + (t * H + h) * HD;
            double m = -INFINITY, l = 0, D = 0;
            for (int s = 0; s <= t; s++) {
                double d = 0;
                for (int e = 0; e < HD; e++)
                    d += s_bf(qt[e]) * s_bf(k[s * HD + e]);
                P[s] = mask[s] ? d * scale : -INFINITY;
                m = fmax(m, P[s]);
            }
            for (int s = 0; s <= t; s++)
                l += P[s] = mask[s] ? exp(P[s] - m) : 0.0;
            for (int e = 0; e < HD; e++) {
                double o = 0;
                for (int s = 0; s <= t; s++)
                    o += s_bf((float)P[s]) * s_bf(v[s * HD + e]);
                ro[(t * H + h) * HD + e] = o / l;
                D += (double)gt[e] * out[(t * H + h) * HD + e];
            }
            rl[h * T + t] = m + log(l);
            for (int s = 0; s <= t; s++) { /* the backward's p = exp(s − lse), dP, dS */
                double p = P[s] / l, dp = 0;
                for (int e = 0; e < HD; e++)
                    dp += s_bf(gt[e]) * s_bf(v[s * HD + e]);
                dS[s] = s_bf((float)(p * (dp - D)));
                P[s] = p;
            }
            for (int s = 0; s <= t; s++)
                for (int e = 0; e < HD; e++) {
                    rv[s * HD + e] += s_bf((float)P[s]) * s_bf(gt[e]);
                    rk[s * HD + e] += scale * dS[s] * s_bf(qt[e]);
                    rq[(t * H + h) * HD + e] += scale * dS[s] * s_bf(k[s * HD + e]);
                }
        }
    for (int i = 0; i < NQ; i++) {
        eo = fmax(eo, fabs(out[i] - ro[i]));
        apart = fmax(apart, fabs((double)out[i] - o32[i]));
        assert_true(fabs((double)o32[i] - out[i]) <= 0.03 * (1.0 + fabs(o32[i])));
    }
    for (int i = 0; i < H * T; i++)
        el = fmax(el, fabs(lse[i] - rl[i]));
    double eq = 0, ek = 0, ev = 0;
    for (int i = 0; i < NQ; i++)
        eq = fmax(eq, fabs(gq[i] - rq[i]));
    for (int i = 0; i < NK; i++) {
        ek = fmax(ek, fabs(gk[i] - rk[i]));
        ev = fmax(ev, fabs(gv[i] - rv[i]));
    }
    print_message("bf16 attention vs float64: out %.2e lse %.2e dq %.2e dk %.2e dv %.2e; apart from float32 %.2e\n",
                  eo, el, eq, ek, ev, apart);
    assert_true(eo < 2e-3 && el < 1e-5 && eq < 5e-3 && ek < 5e-3 && ev < 5e-3);
    assert_true(apart > 1e-3);
    /* a head over RL_ATTENTION_BF16_MAX_HD: the float32 pair, bit for bit */
    enum { W = RL_ATTENTION_BF16_MAX_HD + 8, NW = 3 * W };
    float *wq = malloc(sizeof(float) * NW * 4), *wo = wq + NW, *wl = wo + NW, *wr = wl + 3;
    for (int i = 0; i < NW; i++)
        wq[i] = rl_rng_normal(&g);
    assert_int_equal(rl_attention_forward_bf16(wo, wl, wq, wq, wq, NULL, 1, 3, 1, 1, W), 0);
    assert_int_equal(rl_attention_forward(wr, wl + 6, wq, wq, wq, NULL, 1, 3, 1, 1, W), 0);
    assert_memory_equal(wo, wr, sizeof(float) * NW);
    free(wq); free(in); free(out); free(lse); free(o32); free(l32); free(gq); free(gk); free(gv);
    free(rq); free(rk); free(rv);
}

static void test_bf16_config_key(void **state)
{
    (void)state;
    const char *kv[] = {"model.vocab_size=50", "model.max_seq_len=16", "model.precision=bf16"};
    rl_config *c = s_job(3, kv);
    if (!c)
        fail_msg("job: %s", rl_error_message());
    assert_int_equal(rl_model_check_config(c), 0);
    rl_model *m = rl_model_build(c, 1);
    if (!m)
        fail_msg("build: %s", rl_error_message());
    assert_int_equal(rl_lm_precision(rl_lm_model_network(m)), RL_PRECISION_BF16);
    rl_model_free(m);
    rl_config_free(c);

    c = s_job(2, kv); /* the default */
    assert_non_null(c);
    m = rl_model_build(c, 1);
    assert_non_null(m);
    assert_int_equal(rl_lm_precision(rl_lm_model_network(m)), RL_PRECISION_FP32);
    rl_model_free(m);
    rl_config_free(c);

    const char *bad[] = {"model.vocab_size=50", "model.precision=fp16"};
    c = s_job(2, bad);
    assert_true(!c || rl_model_check_config(c) < 0);
    rl_config_free(c);
    if (!strstr(rl_error_message(), "model.precision") || !strstr(rl_error_message(), "bf16"))
        fail_msg("bad value: '%s'", rl_error_message());
    print_message("model.precision=fp16: %s\n", rl_error_message());
}

/* another kind refuses bf16, naming itself and the key */
static void test_bf16_refused_by_other_kinds(void **state)
{
    (void)state;
    const rl_model_kind *k = rl_model_kind_find("flow_policy");
    assert_non_null(k);
    assert_int_equal(k->bf16, 0);
    static const char yaml[] = "model: {type: flow_policy, init_from: '', precision: bf16}\n";
    rl_config *c = rl_config_parse_string(yaml, strlen(yaml), "<test>");
    assert_non_null(c);
    assert_int_equal(rl_model_check_config(c), RL_EUNSUPPORTED);
    const char *msg = rl_error_message();
    if (!strstr(msg, "model.precision") || !strstr(msg, "'flow_policy'"))
        fail_msg("message: '%s'", msg);
    print_message("%s\n", msg);
    assert_null(rl_model_build(c, 1));
    rl_config_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bf16_round_known),
        cmocka_unit_test(test_bf16_linear_vs_f64),
        cmocka_unit_test(test_bf16_lm_vs_fp32),
        cmocka_unit_test(test_bf16_attention_vs_f64),
        cmocka_unit_test(test_bf16_config_key),
        cmocka_unit_test(test_bf16_refused_by_other_kinds),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
