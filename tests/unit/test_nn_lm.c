/* test_nn_lm.c — the language-model policy against the PyTorch reference
 * (tests/reference/gen_nn_lm.py), micro-batching, and generation.
 *
 * Tolerances (float32 engine vs float64 reference): logits/logp/entropy/
 * values atol 2e-5 + rtol 1e-4; loss rtol 1e-5; each gradient tensor
 * atol = 2e-4·max|g_ref| + 1e-7, rtol 1e-3. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "rlrt/error.h"
#include "common/core/rng.h"
#include "rlrt/nn/params.h"
#include "common/nn/models/lm/lm_config.h"
#include "common/nn/engine/ops.h"
#include "common/nn/engine/device.h"
#include "common/nn/models/lm/transformer.h"
#include "common/nn/models/lm/generate.h"
#include "tests/common/golden.h"

static int s_meta_int(const rl_golden *g, const char *k)
{
    const char *v = rl_golden_meta(g, k);
    if (!v)
        fail_msg("golden meta '%s' missing", k);
    return atoi(v);
}

static float s_meta_f(const rl_golden *g, const char *k)
{
    const char *v = rl_golden_meta(g, k);
    if (!v)
        fail_msg("golden meta '%s' missing", k);
    return strtof(v, NULL);
}

static rl_lm_config s_cfg_from_golden(const rl_golden *g)
{
    rl_lm_config c = {0};
    c.vocab_size = s_meta_int(g, "vocab");
    c.hidden_size = s_meta_int(g, "hidden");
    c.intermediate_size = s_meta_int(g, "inter");
    c.num_layers = s_meta_int(g, "layers");
    c.num_heads = s_meta_int(g, "heads");
    c.num_kv_heads = s_meta_int(g, "kv_heads");
    c.max_seq_len = 64;
    c.rope_theta = s_meta_f(g, "theta");
    c.rms_norm_eps = s_meta_f(g, "eps");
    c.tie_word_embeddings = s_meta_int(g, "tied");
    c.qkv_bias = s_meta_int(g, "qkv_bias");
    c.value_head = s_meta_int(g, "value_head");
    c.bos_token_id = c.eos_token_id = c.pad_token_id = -1;
    return c;
}

static double s_max_abs(const double *x, int64_t n)
{
    double m = 0;
    for (int64_t i = 0; i < n; i++)
        m = fabs(x[i]) > m ? fabs(x[i]) : m;
    return m;
}

static void s_golden_case(const char *path)
{
    rl_golden *g = rl_golden_load(path);
    if (!g)
        fail_msg("%s", rl_error_message());
    rl_lm_config cfg = s_cfg_from_golden(g);
    rl_lm *m = rl_lm_new(&cfg, RL_DEVICE_CPU);
    assert_non_null(m);
    const rl_param_manifest *man = rl_lm_manifest(m);

    /* Manifest names and order match the reference's HF names. */
    char *names = strdup(rl_golden_meta(g, "param_names"));
    int i = 0;
    for (char *tok = strtok(names, ","); tok; tok = strtok(NULL, ","), i++) {
        assert_true(i < man->count);
        assert_string_equal(man->views[i].name, tok);
    }
    assert_int_equal(i, man->count);
    free(names);

    int64_t np;
    float *params = rl_golden_f32(g, "params", &np);
    assert_int_equal(np, rl_lm_num_params(m));
    memcpy(rl_lm_params(m), params, sizeof(float) * (size_t)np);
    free(params);

    const rl_golden_array *ta = rl_golden_get(g, "tokens");
    assert_non_null(ta);
    int B = (int)ta->shape[0], T = (int)ta->shape[1], V = cfg.vocab_size;
    int64_t n;
    int64_t *tok64 = rl_golden_i64(g, "tokens", &n);
    int64_t *mask64 = rl_golden_i64(g, "attn_mask", NULL);
    int32_t *tok = malloc(sizeof(int32_t) * (size_t)n);
    uint8_t *mask = malloc((size_t)n);
    for (int64_t j = 0; j < n; j++) {
        tok[j] = (int32_t)tok64[j];
        mask[j] = (uint8_t)mask64[j];
    }
    float temp = s_meta_f(g, "temperature");
    float *logp = calloc((size_t)n, sizeof(float)), *ent = calloc((size_t)n, sizeof(float));
    float *val = calloc((size_t)n, sizeof(float));
    rl_lm_zero_grad(m);
    assert_int_equal(rl_lm_forward(m, B, T, tok, mask, temp, logp, ent,
                                   cfg.value_head ? val : NULL), 0);

    /* Logits at real positions (padded slots hold junk tokens in the reference). */
    double *want_logits = rl_golden_f64(g, "logits", NULL);
    const float *logits = rl_lm_logits(m);
    int64_t bad = 0;
    for (int64_t r = 0; r < n; r++)
        if (mask[r])
            bad += rl_check_close_f32("logits", logits + r * V, want_logits + r * V, V, 2e-5,
                                      1e-4);
    assert_int_equal(bad, 0);
    free(want_logits);

    double *want_lp = rl_golden_f64(g, "logp", NULL), *want_ent = rl_golden_f64(g, "entropy", NULL);
    assert_int_equal(rl_check_close_f32("logp", logp, want_lp, n, 2e-5, 1e-4), 0);
    assert_int_equal(rl_check_close_f32("entropy", ent, want_ent, n, 2e-5, 1e-4), 0);
    double *want_val = NULL;
    if (cfg.value_head) {
        want_val = rl_golden_f64(g, "values", NULL);
        assert_int_equal(rl_check_close_f32("values", val, want_val, n, 2e-5, 1e-4), 0);
    }

    /* The loss and its per-token gradients (hand-derived from its formula). */
    double *cl = rl_golden_f64(g, "coef_logp", NULL), *ce = rl_golden_f64(g, "coef_ent", NULL);
    double *vt = rl_golden_f64(g, "value_target", NULL);
    float *dlp = calloc((size_t)n, sizeof(float)), *den = calloc((size_t)n, sizeof(float));
    float *dval = calloc((size_t)n, sizeof(float));
    double loss = 0;
    uint8_t *valid = calloc((size_t)n, 1);
    for (int b = 0; b < B; b++)
        for (int t = 1; t < T; t++) {
            int64_t r = (int64_t)b * T + t;
            if (!mask[r])
                continue;
            valid[r] = 1;
            loss += cl[r] * logp[r] + ce[r] * ent[r];
            dlp[r] = (float)cl[r];
            den[r] = (float)ce[r];
            if (cfg.value_head) {
                loss += 0.5 * (val[r] - vt[r]) * (val[r] - vt[r]);
                dval[r] = (float)(val[r] - vt[r]);
            }
        }
    double want_loss = rl_golden_scalar(g, "loss");
    assert_true(fabs(loss - want_loss) <= 1e-5 * fabs(want_loss) + 1e-5);
    double nll = rl_lm_masked_nll(logp, valid, n, 0, NULL);
    assert_true(fabs(nll - rl_golden_scalar(g, "nll")) <= 1e-5);

    assert_int_equal(rl_lm_backward(m, dlp, den, cfg.value_head ? dval : NULL), 0);
    const float *grads = rl_lm_grads(m);
    for (int v = 0; v < man->count; v++) {
        char key[RL_PARAM_NAME_MAX + 8];
        snprintf(key, sizeof key, "grad.%s", man->views[v].name);
        int64_t gn;
        double *want = rl_golden_f64(g, key, &gn);
        assert_int_equal(gn, man->views[v].numel);
        double atol = 2e-4 * s_max_abs(want, gn) + 1e-7;
        int64_t nbad = rl_check_close_f32(key, grads + man->views[v].offset, want, gn, atol, 1e-3);
        if (nbad)
            fail_msg("%s: %lld mismatches", key, (long long)nbad);
        free(want);
    }

    free(cl); free(ce); free(vt); free(dlp); free(den); free(dval); free(valid);
    free(want_lp); free(want_ent); free(want_val);
    free(tok64); free(mask64); free(tok); free(mask); free(logp); free(ent); free(val);
    rl_lm_free(m);
    rl_golden_free(g);
}

static void test_golden_qkvbias_tied(void **state)
{
    (void)state;
    s_golden_case("tests/golden/nn_lm/qkvbias_tied.safetensors");
}

static void test_golden_untied_value(void **state)
{
    (void)state;
    s_golden_case("tests/golden/nn_lm/untied_value.safetensors");
}

/* ---- a small random model for the remaining tests ---------------------------- */

static rl_lm_config s_small_cfg(void)
{
    rl_lm_config c = {.vocab_size = 61, .hidden_size = 48, .intermediate_size = 80,
                      .num_layers = 2, .num_heads = 6, .num_kv_heads = 2, .max_seq_len = 40,
                      .rope_theta = 10000.0f, .rms_norm_eps = 1e-5f,
                      .tie_word_embeddings = 0, .qkv_bias = 1, .value_head = 1,
                      .bos_token_id = -1, .eos_token_id = 3, .pad_token_id = 0};
    return c;
}

static rl_lm *s_small_model(void)
{
    rl_lm_config c = s_small_cfg();
    rl_lm *m = rl_lm_new(&c, RL_DEVICE_CPU);
    assert_non_null(m);
    /* Large init so next-token distributions are peaked (no near-ties). */
    assert_int_equal(rl_lm_init_random(m, 7, 0.25f), 0);
    return m;
}

typedef struct { const float *coef; } s_loss_ctx;

/* L = Σ coef·logp + 0.1·Σ entropy + ½ Σ values², rows offset by row0. */
static int s_loss(void *ctx, int row0, int B, int T, const float *logp, const float *entropy,
                  const float *values, float *dlogp, float *dentropy, float *dvalues,
                  double *loss)
{
    const float *coef = ((s_loss_ctx *)ctx)->coef + (size_t)row0 * T;
    for (int i = 0; i < B * T; i++) {
        *loss += coef[i] * logp[i] + 0.1 * entropy[i] + 0.5 * values[i] * values[i];
        dlogp[i] = coef[i];
        dentropy[i] = 0.1f;
        dvalues[i] = values[i];
    }
    return 0;
}

static void test_microbatch_accumulates_full_batch(void **state)
{
    (void)state;
    rl_lm *m = s_small_model();
    int B = 5, T = 12, lens[5] = {12, 3, 7, 12, 1};
    int32_t tok[60];
    uint8_t mask[60];
    float coef[60];
    rl_rng g;
    rl_rng_init(&g, 3, 0);
    for (int i = 0; i < B * T; i++) {
        tok[i] = (int32_t)rl_rng_below(&g, 61);
        mask[i] = (i % T) < lens[i / T];
        coef[i] = rl_rng_normal(&g);
    }
    s_loss_ctx ctx = {coef};
    int64_t P = rl_lm_num_params(m);
    float *full = malloc(sizeof(float) * (size_t)P);
    double l1 = 0, l2 = 0;
    rl_lm_zero_grad(m);
    assert_int_equal(rl_lm_forward_backward(m, B, T, tok, mask, 0.9f, 0, s_loss, &ctx, &l1), 0);
    memcpy(full, rl_lm_grads(m), sizeof(float) * (size_t)P);
    rl_lm_zero_grad(m);
    assert_int_equal(rl_lm_forward_backward(m, B, T, tok, mask, 0.9f, 2, s_loss, &ctx, &l2), 0);
    assert_true(fabs(l1 - l2) < 1e-4 * (1 + fabs(l1)));
    const float *mb = rl_lm_grads(m);
    double gmax = 0;
    for (int64_t i = 0; i < P; i++)
        gmax = fabs(full[i]) > gmax ? fabs(full[i]) : gmax;
    assert_true(gmax > 0);
    for (int64_t i = 0; i < P; i++)
        if (fabs(full[i] - mb[i]) > 1e-5 * gmax + 1e-4 * fabs(full[i]))
            fail_msg("grad[%lld]: full %g vs micro %g", (long long)i, full[i], mb[i]);
    /* Deterministic: the same step twice gives bit-identical gradients. */
    float *again = malloc(sizeof(float) * (size_t)P);
    memcpy(again, mb, sizeof(float) * (size_t)P);
    rl_lm_zero_grad(m);
    assert_int_equal(rl_lm_forward_backward(m, B, T, tok, mask, 0.9f, 2, s_loss, &ctx, &l2), 0);
    assert_memory_equal(again, rl_lm_grads(m), sizeof(float) * (size_t)P);
    free(again);
    free(full);
    rl_lm_free(m);
}

/* The same rows left-padded (verl-style) give the same per-token outputs
 * (shifted) and the same gradients as right-padded: positions count real
 * tokens, padding is invisible. */
static void test_left_padding_matches_right(void **state)
{
    (void)state;
    rl_lm *m = s_small_model();
    enum { B = 3, T = 9 };
    int lens[B] = {9, 4, 6};
    int32_t rt[B * T] = {0}, lt[B * T] = {0};
    uint8_t rm[B * T] = {0}, lm[B * T] = {0};
    float coef[B * T];
    rl_rng g;
    rl_rng_init(&g, 8, 0);
    for (int b = 0; b < B; b++)
        for (int j = 0; j < lens[b]; j++) {
            int32_t tok = (int32_t)rl_rng_below(&g, 61);
            rt[b * T + j] = tok;
            rm[b * T + j] = 1;
            lt[b * T + T - lens[b] + j] = tok;
            lm[b * T + T - lens[b] + j] = 1;
        }
    for (int i = 0; i < B * T; i++)
        coef[i] = rl_rng_normal(&g);
    float rlp[B * T], rent[B * T], rval[B * T], llp[B * T], lent[B * T], lval[B * T];
    float dr[B * T] = {0}, dl[B * T] = {0};
    int64_t P = rl_lm_num_params(m);
    float *gr = malloc(sizeof(float) * (size_t)P);
    rl_lm_zero_grad(m);
    assert_int_equal(rl_lm_forward(m, B, T, rt, rm, 1.0f, rlp, rent, rval), 0);
    for (int i = 0; i < B * T; i++)
        dr[i] = coef[i] * rm[i];
    assert_int_equal(rl_lm_backward(m, dr, dr, dr), 0);
    memcpy(gr, rl_lm_grads(m), sizeof(float) * (size_t)P);
    rl_lm_zero_grad(m);
    assert_int_equal(rl_lm_forward(m, B, T, lt, lm, 1.0f, llp, lent, lval), 0);
    for (int b = 0; b < B; b++)
        for (int j = 0; j < T; j++) {
            int r = b * T + j, l = b * T + (T - lens[b]) + j;
            if (j >= lens[b]) {
                assert_float_equal(rlp[r], 0, 0);
                continue;
            }
            assert_float_equal(rlp[r], llp[l], 1e-5);
            assert_float_equal(rent[r], lent[l], 1e-5);
            assert_float_equal(rval[r], lval[l], 1e-5);
            dl[l] = dr[r];
        }
    assert_int_equal(rl_lm_backward(m, dl, dl, dl), 0);
    const float *gl = rl_lm_grads(m);
    double gmax = 0;
    for (int64_t i = 0; i < P; i++)
        gmax = fabs(gr[i]) > gmax ? fabs(gr[i]) : gmax;
    for (int64_t i = 0; i < P; i++)
        if (fabs(gr[i] - gl[i]) > 1e-5 * gmax)
            fail_msg("grad[%lld]: right-padded %g vs left-padded %g", (long long)i, gr[i], gl[i]);
    free(gr);
    rl_lm_free(m);
}

/* Full forward over prompt + generated tokens; returns logp/entropy (B,T). */
static void s_score(rl_lm *m, int B, int P, const int32_t *prompts, const int *plen, int maxnew,
                    const int32_t *gen, const int *glen, float temp, float *logits_argmax_ok,
                    float *lp_out, float *ent_out, int T)
{
    int32_t *tok = calloc((size_t)B * T, sizeof(int32_t));
    uint8_t *mask = calloc((size_t)B * T, 1);
    for (int b = 0; b < B; b++) {
        for (int t = 0; t < plen[b]; t++)
            tok[b * T + t] = prompts[b * P + t];
        for (int j = 0; j < glen[b]; j++)
            tok[b * T + plen[b] + j] = gen[b * maxnew + j];
        for (int t = 0; t < plen[b] + glen[b]; t++)
            mask[b * T + t] = 1;
    }
    assert_int_equal(rl_lm_forward(m, B, T, tok, mask, temp, lp_out, ent_out, NULL), 0);
    if (logits_argmax_ok) {
        const float *lg = rl_lm_logits(m);
        int V = rl_lm_get_config(m)->vocab_size;
        *logits_argmax_ok = 1;
        for (int b = 0; b < B; b++)
            for (int j = 0; j < glen[b]; j++) {
                const float *z = lg + ((size_t)b * T + plen[b] + j - 1) * V;
                int best = 0;
                for (int v = 1; v < V; v++)
                    if (z[v] > z[best])
                        best = v;
                if (best != gen[b * maxnew + j])
                    *logits_argmax_ok = 0;
            }
    }
    free(tok);
    free(mask);
}

enum { GB = 4, GP = 6, GN = 10 };
static const int32_t s_prompts[GB * GP] = {5, 9, 2, 44, 17, 8, 11, 0, 0, 0, 0, 0,
                                           30, 31, 32, 33, 0, 0, 7, 7, 7, 7, 7, 7};
static const int s_plen[GB] = {6, 1, 4, 6};

static void test_greedy_equals_forward_argmax(void **state)
{
    (void)state;
    rl_lm *m = s_small_model();
    rl_lm_sampling s;
    rl_lm_sampling_default(&s);
    s.greedy = 1;
    s.max_new_tokens = GN;
    int32_t out[GB * GN];
    float lp[GB * GN], ent[GB * GN];
    int lens[GB];
    assert_int_equal(rl_lm_generate(m, GB, GP, s_prompts, s_plen, NULL, &s, out, lp, ent, lens), 0);
    int T = GP + GN;
    float ok, flp[GB * (GP + GN)], fent[GB * (GP + GN)];
    for (int b = 0; b < GB; b++)
        assert_int_equal(lens[b], GN);
    s_score(m, GB, GP, s_prompts, s_plen, GN, out, lens, 1.0f, &ok, flp, fent, T);
    assert_true(ok == 1.0f);
    for (int b = 0; b < GB; b++)
        for (int j = 0; j < lens[b]; j++) {
            assert_float_equal(lp[b * GN + j], flp[b * T + s_plen[b] + j], 1e-4);
            assert_float_equal(ent[b * GN + j], fent[b * T + s_plen[b] + j], 1e-4);
        }
    rl_lm_free(m);
}

static void test_sampled_logp_matches_forward_and_no_cache(void **state)
{
    (void)state;
    rl_lm *m = s_small_model();
    rl_lm_sampling s;
    rl_lm_sampling_default(&s);
    s.temperature = 0.8f;
    s.top_p = 0.9f;
    s.top_k = 20;
    s.max_new_tokens = GN;
    s.seed = 1234;
    int32_t stop = 3;
    s.stop_tokens = &stop;
    s.num_stop_tokens = 1;
    uint64_t seeds[GB] = {100, 101, 102, 103};
    int32_t out[GB * GN], out2[GB * GN];
    float lp[GB * GN], ent[GB * GN], lp2[GB * GN], ent2[GB * GN];
    int lens[GB], lens2[GB];
    assert_int_equal(rl_lm_generate(m, GB, GP, s_prompts, s_plen, seeds, &s, out, lp, ent, lens), 0);
    int T = GP + GN;
    float flp[GB * (GP + GN)], fent[GB * (GP + GN)];
    s_score(m, GB, GP, s_prompts, s_plen, GN, out, lens, s.temperature, NULL, flp, fent, T);
    for (int b = 0; b < GB; b++) {
        assert_true(lens[b] >= 1 && lens[b] <= GN);
        for (int j = 0; j < lens[b]; j++) {
            assert_float_equal(lp[b * GN + j], flp[b * T + s_plen[b] + j], 1e-4);
            assert_float_equal(ent[b * GN + j], fent[b * T + s_plen[b] + j], 1e-4);
            if (j < lens[b] - 1)
                assert_int_not_equal(out[b * GN + j], stop);
        }
        if (lens[b] < GN)
            assert_int_equal(out[b * GN + lens[b] - 1], stop);
        for (int j = lens[b]; j < GN; j++)
            assert_int_equal(out[b * GN + j], 0); /* pad_token_id */
    }
    /* The no-cache reference path gives the same samples. */
    s.no_kv_cache = 1;
    assert_int_equal(rl_lm_generate(m, GB, GP, s_prompts, s_plen, seeds, &s, out2, lp2, ent2, lens2), 0);
    assert_memory_equal(lens, lens2, sizeof lens);
    assert_memory_equal(out, out2, sizeof out);
    for (int i = 0; i < GB * GN; i++) {
        assert_float_equal(lp[i], lp2[i], 1e-4);
        assert_float_equal(ent[i], ent2[i], 1e-4);
    }
    rl_lm_free(m);
}

static void test_row_seed_independent_of_batch(void **state)
{
    (void)state;
    rl_lm *m = s_small_model();
    rl_lm_sampling s;
    rl_lm_sampling_default(&s);
    s.temperature = 1.0f;
    s.max_new_tokens = GN;
    s.seed = 99;
    uint64_t seeds[GB] = {7, 8, 9, 10};
    int32_t out[GB * GN];
    float lp[GB * GN];
    int lens[GB];
    assert_int_equal(rl_lm_generate(m, GB, GP, s_prompts, s_plen, seeds, &s, out, lp, NULL, lens), 0);
    /* Row 2 alone (shorter padded width), then rows {3, 2} in a new order. */
    int32_t p1[4] = {30, 31, 32, 33};
    int l1 = 4;
    uint64_t sd1 = 9;
    int32_t o1[GN];
    float lp1[GN];
    int len1;
    assert_int_equal(rl_lm_generate(m, 1, 4, p1, &l1, &sd1, &s, o1, lp1, NULL, &len1), 0);
    assert_int_equal(len1, lens[2]);
    assert_memory_equal(o1, out + 2 * GN, sizeof o1);
    for (int j = 0; j < GN; j++)
        assert_float_equal(lp1[j], lp[2 * GN + j], 1e-5);
    int32_t p2[2 * GP];
    memcpy(p2, s_prompts + 3 * GP, sizeof(int32_t) * GP);
    memcpy(p2 + GP, s_prompts + 2 * GP, sizeof(int32_t) * GP);
    int l2[2] = {s_plen[3], s_plen[2]};
    uint64_t sd2[2] = {10, 9};
    int32_t o2[2 * GN];
    int len2[2];
    assert_int_equal(rl_lm_generate(m, 2, GP, p2, l2, sd2, &s, o2, NULL, NULL, len2), 0);
    assert_memory_equal(o2, out + 3 * GN, sizeof(int32_t) * GN);
    assert_memory_equal(o2 + GN, out + 2 * GN, sizeof(int32_t) * GN);
    /* A different row seed gives a different sample. */
    sd1 = 12345;
    int32_t o3[GN];
    assert_int_equal(rl_lm_generate(m, 1, 4, p1, &l1, &sd1, &s, o3, NULL, NULL, &len1), 0);
    assert_true(memcmp(o3, o1, sizeof o1) != 0);
    rl_lm_free(m);
}

/* 40 rows from 5 prompts, 8 samples each, shuffled, with padding garbage
 * and a prompt that is a prefix of another: rows with equal prompts share
 * one prefill forward, the decode runs in several row tasks. Every row must
 * still get what it gets alone (no sharing, one task), on 1 and 3 threads,
 * and what the no-cache reference path gets. */
static void test_shared_prefill_and_row_tasks(void **state)
{
    (void)state;
    enum { NB = 40, NP = 6, NU = 5 };
    static const int32_t uniq[NU][NP] = {{5, 9, 2, 44, 0, 0}, {5, 9, 2, 44, 17, 0},
                                         {11, 0, 0, 0, 0, 0}, {30, 31, 32, 33, 34, 35},
                                         {7, 7, 7, 0, 0, 0}};
    static const int ulen[NU] = {4, 5, 1, 6, 3};
    int32_t prompts[NB * NP];
    int plen[NB];
    uint64_t seeds[NB];
    for (int b = 0; b < NB; b++) {
        int u = (b * 3) % NU; /* interleaved, not grouped */
        for (int t = 0; t < NP; t++) /* padding past the length differs per row */
            prompts[b * NP + t] = t < ulen[u] ? uniq[u][t] : (int32_t)(b + t) % 50;
        plen[b] = ulen[u];
        seeds[b] = 1000 + (uint64_t)b;
    }
    rl_lm *m = s_small_model();
    rl_lm_sampling s;
    rl_lm_sampling_default(&s);
    s.max_new_tokens = GN;
    s.seed = 5;
    int32_t stop = 3;
    s.stop_tokens = &stop;
    s.num_stop_tokens = 1;
    static int32_t out[3][NB * GN];
    static float lp[3][NB * GN];
    int lens[3][NB];
    const int threads[2] = {1, 3};
    for (int k = 0; k < 2; k++) {
        rl_nn_set_threads(threads[k]);
        assert_int_equal(rl_lm_generate(m, NB, NP, prompts, plen, seeds, &s, out[k], lp[k], NULL,
                                        lens[k]), 0);
    }
    s.no_kv_cache = 1;
    assert_int_equal(rl_lm_generate(m, NB, NP, prompts, plen, seeds, &s, out[2], lp[2], NULL,
                                    lens[2]), 0);
    s.no_kv_cache = 0;
    rl_nn_set_threads(1);
    int stopped = 0;
    for (int k = 1; k < 3; k++) {
        assert_memory_equal(lens[0], lens[k], sizeof lens[0]);
        assert_memory_equal(out[0], out[k], sizeof out[0]);
        for (int i = 0; i < NB * GN; i++)
            assert_float_equal(lp[0][i], lp[k][i], 1e-4);
    }
    for (int b = 0; b < NB; b++) {
        int32_t o1[GN];
        float lp1[GN];
        int len1;
        assert_int_equal(rl_lm_generate(m, 1, plen[b], prompts + b * NP, &plen[b], &seeds[b], &s,
                                        o1, lp1, NULL, &len1), 0);
        assert_int_equal(len1, lens[0][b]);
        assert_memory_equal(o1, out[0] + b * GN, sizeof o1);
        for (int j = 0; j < GN; j++)
            assert_float_equal(lp1[j], lp[0][b * GN + j], 1e-5);
        stopped += len1 < GN;
    }
    /* Samples of one prompt differ (their seeds do), so rows were not copied. */
    assert_true(memcmp(out[0], out[0] + 5 * GN, sizeof(int32_t) * GN) != 0);
    assert_true(stopped > 0 && stopped < NB); /* the live batch shrank mid-way */
    rl_lm_free(m);
}

/* Continuous batching (rl_lm_sampling.max_batch): with 1, 3 or 7 cache
 * slots for 19 rows (finishing at different steps: a stop token, prompts of
 * different lengths, some prompts repeated) every row's tokens, log-probs
 * and entropies are those of all rows at once, and with top-p too. */
static void test_continuous_batching(void **state)
{
    (void)state;
    enum { NB = 19, NP = 6 };
    static const int32_t uniq[4][NP] = {{5, 9, 2, 44, 0, 0}, {11, 0, 0, 0, 0, 0},
                                        {30, 31, 32, 33, 34, 35}, {7, 7, 7, 0, 0, 0}};
    static const int ulen[4] = {4, 1, 6, 3};
    int32_t prompts[NB * NP];
    int plen[NB];
    uint64_t seeds[NB];
    for (int b = 0; b < NB; b++) {
        int u = (b * 3) % 4;
        for (int t = 0; t < NP; t++)
            prompts[b * NP + t] = t < ulen[u] ? uniq[u][t] : 0;
        plen[b] = ulen[u];
        seeds[b] = 77 + (uint64_t)b;
    }
    rl_lm *m = s_small_model();
    rl_lm_sampling s;
    rl_lm_sampling_default(&s);
    s.max_new_tokens = GN;
    s.seed = 9;
    int32_t stop = 3;
    s.stop_tokens = &stop;
    s.num_stop_tokens = 1;
    static int32_t out[4][NB * GN];
    static float lp[4][NB * GN], ent[4][NB * GN];
    int lens[4][NB];
    for (int topp = 0; topp < 2; topp++) {
        s.top_p = topp ? 0.9f : 1.0f;
        const int slots[4] = {0, 1, 3, 7};
        for (int k = 0; k < 4; k++) {
            s.max_batch = slots[k];
            assert_int_equal(rl_lm_generate(m, NB, NP, prompts, plen, seeds, &s, out[k], lp[k],
                                            ent[k], lens[k]), 0);
        }
        int stopped = 0;
        for (int b = 0; b < NB; b++)
            stopped += lens[0][b] < GN;
        assert_true(stopped > 0 && stopped < NB); /* rows finish at different steps */
        for (int k = 1; k < 4; k++) {
            assert_memory_equal(lens[0], lens[k], sizeof lens[0]);
            assert_memory_equal(out[0], out[k], sizeof out[0]);
            for (int i = 0; i < NB * GN; i++) {
                assert_float_equal(lp[0][i], lp[k][i], 1e-4);
                assert_float_equal(ent[0][i], ent[k][i], 1e-4);
            }
        }
    }
    rl_lm_free(m);
}

/* Partial rollouts (rl_lm_sampling.switch_weights): a switch to weights B
 * after k sampled tokens. */
typedef struct s_switcher {
    rl_lm *m;
    const float *to; /* the weights B */
    int at, calls;   /* switch at call `at` (1-based: after `at` tokens of the first rows) */
} s_switcher;

static int s_switch_at(void *ctx)
{
    s_switcher *w = ctx;
    if (++w->calls != w->at)
        return 0;
    memcpy(rl_lm_params(w->m), w->to, sizeof(float) * (size_t)rl_lm_num_params(w->m));
    return 1;
}

/* Two weight sets A and B of one architecture: *a and *b are copies. */
static rl_lm *s_two_weights(float **a, float **b)
{
    rl_lm *m = s_small_model();
    size_t bytes = sizeof(float) * (size_t)rl_lm_num_params(m);
    *a = malloc(bytes);
    *b = malloc(bytes);
    memcpy(*a, rl_lm_params(m), bytes);
    assert_int_equal(rl_lm_init_random(m, 8, 0.25f), 0);
    memcpy(*b, rl_lm_params(m), bytes);
    memcpy(rl_lm_params(m), *a, bytes);
    return m;
}

/* Greedy: generating GN tokens with a switch A → B after K equals the first
 * K tokens from A, then the prefix (prompt + K tokens) continued as a prompt
 * with B (a separate call: prefill from scratch). Every token records its
 * epoch; the switch changed the tokens (B alone differs after K). */
static void test_weight_switch_equals_continuation(void **state)
{
    (void)state;
    enum { K = 4, CP = GP + K };
    float *wa, *wb;
    rl_lm *m = s_two_weights(&wa, &wb);
    size_t bytes = sizeof(float) * (size_t)rl_lm_num_params(m);
    rl_lm_sampling s;
    rl_lm_sampling_default(&s);
    s.greedy = 1;
    s.max_new_tokens = GN;
    int32_t out[GB * GN], epoch[GB * GN], ref[GB * K], cont[GB * (GN - K)], plain[GB * GN];
    float lp[GB * GN], rlp[GB * K], clp[GB * (GN - K)];
    int lens[GB], rlens[GB], clens[GB], plens[GB];
    s_switcher w = {m, wb, K, 0};
    s.switch_weights = s_switch_at;
    s.switch_ctx = &w;
    s.out_epoch = epoch;
    assert_int_equal(rl_lm_generate(m, GB, GP, s_prompts, s_plen, NULL, &s, out, lp, NULL, lens), 0);
    assert_true(w.calls >= K);
    /* the reference: K tokens from A ... */
    memcpy(rl_lm_params(m), wa, bytes);
    rl_lm_sampling r;
    rl_lm_sampling_default(&r);
    r.greedy = 1;
    r.max_new_tokens = K;
    assert_int_equal(rl_lm_generate(m, GB, GP, s_prompts, s_plen, NULL, &r, ref, rlp, NULL, rlens), 0);
    r.max_new_tokens = GN;
    assert_int_equal(rl_lm_generate(m, GB, GP, s_prompts, s_plen, NULL, &r, plain, NULL, NULL, plens), 0);
    /* ... then the prefixes continued from scratch with B */
    int32_t cprompts[GB * CP] = {0};
    int cplen[GB];
    for (int b = 0; b < GB; b++) {
        assert_int_equal(rlens[b], K);
        memcpy(cprompts + b * CP, s_prompts + b * GP, sizeof(int32_t) * (size_t)s_plen[b]);
        memcpy(cprompts + b * CP + s_plen[b], ref + b * K, sizeof(int32_t) * K);
        cplen[b] = s_plen[b] + K;
    }
    memcpy(rl_lm_params(m), wb, bytes);
    r.max_new_tokens = GN - K;
    assert_int_equal(rl_lm_generate(m, GB, CP, cprompts, cplen, NULL, &r, cont, clp, NULL, clens), 0);
    int differs = 0;
    for (int b = 0; b < GB; b++) {
        assert_int_equal(lens[b], K + clens[b]);
        for (int j = 0; j < lens[b]; j++) {
            int32_t want = j < K ? ref[b * K + j] : cont[b * (GN - K) + j - K];
            float wlp = j < K ? rlp[b * K + j] : clp[b * (GN - K) + j - K];
            assert_int_equal(out[b * GN + j], want);
            assert_float_equal(lp[b * GN + j], wlp, 1e-5);
            assert_int_equal(epoch[b * GN + j], j < K ? 0 : 1);
            differs += j >= K && out[b * GN + j] != plain[b * GN + j];
        }
    }
    assert_true(differs > 0); /* B's tokens are not A's */
    free(wa);
    free(wb);
    rl_lm_free(m);
}

/* Sampled (top-p, a stop token, row streams): the KV-cache path with a
 * switch equals the no-cache path (every step recomputed from the full
 * prefix) with the same switch, token for token; with continuous batching
 * (3 cache slots for 19 rows) a row that finished before the switch equals
 * A alone and one that started after it equals B alone. */
static void test_weight_switch_sampled(void **state)
{
    (void)state;
    enum { NB = 19, NP = 6 };
    float *wa, *wb;
    rl_lm *m = s_two_weights(&wa, &wb);
    size_t bytes = sizeof(float) * (size_t)rl_lm_num_params(m);
    int32_t prompts[NB * NP] = {0};
    int plen[NB];
    uint64_t seeds[NB];
    for (int b = 0; b < NB; b++) {
        plen[b] = 1 + b % NP;
        for (int t = 0; t < plen[b]; t++)
            prompts[b * NP + t] = (int32_t)(3 + (b * 7 + t * 5) % 50);
        seeds[b] = 500 + (uint64_t)b;
    }
    rl_lm_sampling s;
    rl_lm_sampling_default(&s);
    s.max_new_tokens = GN;
    s.seed = 21;
    s.top_p = 0.9f;
    int32_t stop = 3;
    s.stop_tokens = &stop;
    s.num_stop_tokens = 1;
    s.switch_weights = s_switch_at;
    static int32_t out[3][NB * GN], ep[3][NB * GN], alone[NB * GN];
    static float lp[3][NB * GN];
    int lens[3][NB], alens[NB];
    for (int k = 0; k < 3; k++) { /* kv cache, no cache, kv cache with 3 slots */
        memcpy(rl_lm_params(m), wa, bytes);
        s_switcher w = {m, wb, k == 2 ? 25 : 3, 0}; /* 3 slots: past the first rows */
        s.switch_ctx = &w;
        s.out_epoch = ep[k];
        s.no_kv_cache = k == 1;
        s.max_batch = k == 2 ? 3 : 0;
        assert_int_equal(rl_lm_generate(m, NB, NP, prompts, plen, seeds, &s, out[k], lp[k], NULL,
                                        lens[k]), 0);
        assert_true(w.calls >= w.at);
    }
    assert_memory_equal(lens[0], lens[1], sizeof lens[0]);
    assert_memory_equal(out[0], out[1], sizeof out[0]);
    assert_memory_equal(ep[0], ep[1], sizeof ep[0]);
    for (int i = 0; i < NB * GN; i++)
        assert_float_equal(lp[0][i], lp[1][i], 1e-4);
    int before = 0, after = 0, both = 0;
    for (int k = 0; k < 3; k += 2)
        for (int b = 0; b < NB; b++) {
            int first = ep[k][b * GN], last = ep[k][b * GN + lens[k][b] - 1];
            for (int j = 1; j < lens[k][b]; j++) /* epochs never go down along a row */
                assert_true(ep[k][b * GN + j] >= ep[k][b * GN + j - 1]);
            both += k == 0 && first == 0 && last == 1;
            if (k == 2 && (last == 0 || first == 1)) { /* one set of weights: equals it alone */
                memcpy(rl_lm_params(m), last == 0 ? wa : wb, bytes);
                rl_lm_sampling a = s;
                a.switch_weights = NULL;
                a.out_epoch = NULL;
                a.max_batch = 0;
                assert_int_equal(rl_lm_generate(m, 1, NP, prompts + b * NP, &plen[b], &seeds[b], &a,
                                                alone, NULL, NULL, alens), 0);
                assert_int_equal(alens[0], lens[k][b]);
                assert_memory_equal(alone, out[k] + b * GN, sizeof(int32_t) * (size_t)alens[0]);
                before += last == 0;
                after += first == 1;
            }
        }
    assert_true(both > 0);                /* rows that hold tokens of both versions */
    assert_true(before > 0 && after > 0); /* continuous batching: rows on either side */
    free(wa);
    free(wb);
    rl_lm_free(m);
}

/* A switch callback's error ends the call with it. */
static int s_switch_fails(void *ctx)
{
    (void)ctx;
    return rl_error_set(RL_EPEER, "the weights' sender died");
}

static void test_weight_switch_error(void **state)
{
    (void)state;
    rl_lm *m = s_small_model();
    rl_lm_sampling s;
    rl_lm_sampling_default(&s);
    s.max_new_tokens = GN;
    s.switch_weights = s_switch_fails;
    int32_t out[GB * GN];
    int lens[GB];
    assert_int_equal(rl_lm_generate(m, GB, GP, s_prompts, s_plen, NULL, &s, out, NULL, NULL, lens),
                     RL_EPEER);
    assert_non_null(strstr(rl_error_message(), "sender died"));
    rl_lm_free(m);
}

/* top_k = 1 keeps only the argmax: same tokens as greedy whatever the seed. */
static void test_top_k_one_is_greedy(void **state)
{
    (void)state;
    rl_lm *m = s_small_model();
    rl_lm_sampling s;
    rl_lm_sampling_default(&s);
    s.max_new_tokens = GN;
    s.greedy = 1;
    int32_t g[GB * GN], k1[GB * GN];
    int lg[GB], lk[GB];
    assert_int_equal(rl_lm_generate(m, GB, GP, s_prompts, s_plen, NULL, &s, g, NULL, NULL, lg), 0);
    s.greedy = 0;
    s.top_k = 1;
    s.temperature = 1.3f;
    s.seed = 77;
    assert_int_equal(rl_lm_generate(m, GB, GP, s_prompts, s_plen, NULL, &s, k1, NULL, NULL, lk), 0);
    assert_memory_equal(g, k1, sizeof g);
    /* A tiny top_p keeps only the most likely token too. */
    s.top_k = 0;
    s.top_p = 1e-6f;
    assert_int_equal(rl_lm_generate(m, GB, GP, s_prompts, s_plen, NULL, &s, k1, NULL, NULL, lk), 0);
    assert_memory_equal(g, k1, sizeof g);
    rl_lm_free(m);
}

/* The sampler draws from softmax(logits/temperature) (restricted and
 * renormalised to the top-k or the top-p nucleus): 20000 one-token samples of the same prompt
 * under different row seeds match the probabilities: every token within 4.5
 * standard errors, and Pearson's χ² below df + 6·sqrt(2·df). */
static void test_sampling_frequencies(void **state)
{
    (void)state;
    rl_lm *m = s_small_model();
    enum { R = 20000, V = 61 };
    int32_t prompt[2] = {5, 9};
    uint8_t mask[2] = {1, 1};
    assert_int_equal(rl_lm_forward(m, 1, 2, prompt, mask, 1.0f, NULL, NULL, NULL), 0);
    const float *z = rl_lm_logits(m) + V; /* position 1 predicts the next token */
    float temp = 0.7f;
    double p[V], mx = -1e30, sum = 0;
    for (int v = 0; v < V; v++)
        mx = z[v] / temp > mx ? z[v] / temp : mx;
    for (int v = 0; v < V; v++)
        sum += (p[v] = exp(z[v] / temp - mx));
    for (int v = 0; v < V; v++)
        p[v] /= sum;
    int32_t *prompts = malloc(sizeof(int32_t) * 2 * R);
    int *plen = malloc(sizeof(int) * R), *lens = malloc(sizeof(int) * R);
    uint64_t *seeds = malloc(sizeof(uint64_t) * R);
    int32_t *out = malloc(sizeof(int32_t) * R);
    for (int r = 0; r < R; r++) {
        prompts[2 * r] = 5;
        prompts[2 * r + 1] = 9;
        plen[r] = 2;
        seeds[r] = 1000 + (uint64_t)r;
    }
    rl_lm_sampling s;
    rl_lm_sampling_default(&s);
    s.max_new_tokens = 1;
    s.temperature = temp;
    s.seed = 5;
    for (int pass = 0; pass < 3; pass++) {
        double q[V];
        memcpy(q, p, sizeof q);
        if (pass == 2) { /* top-p 0.8: the smallest most-likely set with mass >= 0.8 */
            s.top_k = 0;
            s.top_p = 0.8f;
            int used[V] = {0};
            double cum = 0;
            while (cum < 0.8) {
                int best = -1;
                for (int v = 0; v < V; v++)
                    if (!used[v] && (best < 0 || p[v] > p[best]))
                        best = v;
                used[best] = 1;
                cum += p[best];
            }
            for (int v = 0; v < V; v++)
                q[v] = used[v] ? p[v] / cum : 0.0;
        }
        if (pass == 1) { /* top-3, renormalised */
            s.top_k = 3;
            int top[3] = {-1, -1, -1};
            for (int k = 0; k < 3; k++)
                for (int v = 0; v < V; v++) {
                    int used = 0;
                    for (int j = 0; j < k; j++)
                        used |= top[j] == v;
                    if (!used && (top[k] < 0 || p[v] > p[top[k]]))
                        top[k] = v;
                }
            double zk = p[top[0]] + p[top[1]] + p[top[2]];
            for (int v = 0; v < V; v++)
                q[v] = (v == top[0] || v == top[1] || v == top[2]) ? p[v] / zk : 0.0;
        }
        assert_int_equal(rl_lm_generate(m, R, 2, prompts, plen, seeds, &s, out, NULL, NULL, lens), 0);
        int cnt[V] = {0};
        for (int r = 0; r < R; r++)
            cnt[out[r]]++;
        double chi2 = 0;
        int df = -1;
        for (int v = 0; v < V; v++) {
            double f = (double)cnt[v] / R, se = sqrt(q[v] * (1 - q[v]) / R);
            if (q[v] == 0.0) {
                assert_int_equal(cnt[v], 0);
                continue;
            }
            if (fabs(f - q[v]) > 4.5 * se + 1e-3)
                fail_msg("pass %d token %d: frequency %.4f vs probability %.4f", pass, v, f, q[v]);
            chi2 += (cnt[v] - R * q[v]) * (cnt[v] - R * q[v]) / (R * q[v]);
            df++;
        }
        if (chi2 > df + 6 * sqrt(2.0 * df))
            fail_msg("pass %d: chi2 %.1f with %d degrees of freedom", pass, chi2, df);
    }
    free(prompts); free(plen); free(lens); free(seeds); free(out);
    rl_lm_free(m);
}

static void test_generate_stops_at_max_seq_len(void **state)
{
    (void)state;
    rl_lm *m = s_small_model(); /* max_seq_len 40 */
    rl_lm_sampling s;
    rl_lm_sampling_default(&s);
    s.max_new_tokens = 50;
    int32_t prompt[30] = {1};
    int plen = 30;
    int32_t out[50];
    int len;
    assert_int_equal(rl_lm_generate(m, 1, 30, prompt, &plen, NULL, &s, out, NULL, NULL, &len), 0);
    assert_int_equal(len, 10);
    /* a prompt that fills the context gets no token (it got one, a sequence
     * of max_seq_len + 1 that no forward takes); its batch mates are as alone */
    int32_t prompts[2 * 40] = {0}, out2[2 * 50], alone[50];
    for (int t = 0; t < 40; t++)
        prompts[t] = prompts[40 + t] = 1 + t % 7;
    int plens[2] = {40, 12}, lens[2] = {-1, -1}, alone_len = -1;
    uint64_t seeds[2] = {5, 6};
    float logp[2 * 50];
    assert_int_equal(rl_lm_generate(m, 2, 40, prompts, plens, seeds, &s, out2, logp, NULL, lens), 0);
    assert_int_equal(lens[0], 0);
    assert_true(logp[0] == 0.0f);
    assert_int_equal(rl_lm_generate(m, 1, 40, prompts + 40, plens + 1, seeds + 1, &s, alone, NULL,
                                    NULL, &alone_len), 0);
    assert_int_equal(lens[1], alone_len);
    assert_int_equal(lens[1], 40 - 12);
    assert_memory_equal(out2 + 50, alone, sizeof(int32_t) * (size_t)alone_len);
    rl_lm_free(m);
}

/* Weights that are NaN, or so large that the logits overflow, leave no
 * distribution to sample from: generate fails naming it (top-p / top-k read
 * an empty candidate list and crashed; plain sampling returned token V-1 with
 * log-prob NaN). */
static void test_generate_refuses_non_finite_logits(void **state)
{
    (void)state;
    int32_t prompt[4] = {1, 2, 3, 4};
    int plen = 4, len = -1;
    int32_t out[8];
    for (int bad = 0; bad < 2; bad++)
        for (int mode = 0; mode < 3; mode++) {
            rl_lm *m = s_small_model();
            float *w = rl_lm_params(m);
            for (int64_t i = 0; i < rl_lm_num_params(m); i++)
                w[i] = bad ? 1e30f : NAN;
            rl_lm_sampling s;
            rl_lm_sampling_default(&s);
            s.max_new_tokens = 8;
            if (mode == 1)
                s.top_p = 0.9f;
            if (mode == 2)
                s.top_k = 5;
            assert_int_equal(rl_lm_generate(m, 1, 4, prompt, &plen, NULL, &s, out, NULL, NULL, &len),
                             RL_ENUMERIC);
            assert_string_equal(rl_error_message(), "generate: row 0, token 0: the logits are not "
                                                    "finite (NaN or Inf weights, or an overflow)");
            rl_lm_free(m);
        }
}

static void test_config_and_argument_errors(void **state)
{
    (void)state;
    rl_lm_config c = s_small_cfg();
    c.num_kv_heads = 4; /* 6 heads not divisible by 4 */
    assert_null(rl_lm_new(&c, RL_DEVICE_CPU));
    assert_non_null(strstr(rl_error_message(), "num_kv_heads"));
    c = s_small_cfg();
    c.eos_token_id = 61;
    assert_int_equal(rl_lm_config_validate(&c), RL_EINVAL);
    assert_non_null(strstr(rl_error_message(), "eos_token_id"));
    c = s_small_cfg();
#ifndef RL_CUDA
    assert_null(rl_lm_new(&c, RL_DEVICE_CUDA));
    assert_int_equal(rl_error_code(), RL_EUNSUPPORTED);
#endif
    rl_lm *m = s_small_model();
    int32_t tok[4] = {1, 2, 61, 3};
    uint8_t mask[4] = {1, 1, 1, 1};
    assert_int_equal(rl_lm_forward(m, 1, 4, tok, mask, 1.0f, NULL, NULL, NULL), RL_ERANGE);
    assert_int_equal(rl_lm_backward(m, NULL, NULL, NULL), RL_ESTATE);
    tok[2] = 5;
    uint8_t holes[4] = {1, 0, 1, 0};
    assert_int_equal(rl_lm_forward(m, 1, 4, tok, holes, 1.0f, NULL, NULL, NULL), RL_EINVAL);
    assert_int_equal(rl_lm_forward(m, 1, 41, tok, NULL, 1.0f, NULL, NULL, NULL), RL_ESHAPE);
    /* a backward consumes its forward: the logits become their gradient */
    assert_int_equal(rl_lm_forward(m, 1, 4, tok, mask, 1.0f, NULL, NULL, NULL), 0);
    assert_non_null(rl_lm_logits(m));
    float dl[4] = {1, 1, 1, 1};
    assert_int_equal(rl_lm_backward(m, dl, NULL, NULL), 0);
    assert_null(rl_lm_logits(m));
    assert_int_equal(rl_lm_backward(m, dl, NULL, NULL), RL_ESTATE);
    assert_non_null(rl_lm_param(m, "model.layers.1.self_attn.k_proj.bias"));
    assert_non_null(rl_lm_param(m, "value_head.bias"));
    assert_null(rl_lm_param(m, "model.layers.2.mlp.up_proj.weight"));
    rl_lm_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_golden_qkvbias_tied),
        cmocka_unit_test(test_golden_untied_value),
        cmocka_unit_test(test_microbatch_accumulates_full_batch),
        cmocka_unit_test(test_left_padding_matches_right),
        cmocka_unit_test(test_greedy_equals_forward_argmax),
        cmocka_unit_test(test_sampled_logp_matches_forward_and_no_cache),
        cmocka_unit_test(test_row_seed_independent_of_batch),
        cmocka_unit_test(test_top_k_one_is_greedy),
        cmocka_unit_test(test_sampling_frequencies),
        cmocka_unit_test(test_generate_stops_at_max_seq_len),
        cmocka_unit_test(test_generate_refuses_non_finite_logits),
        cmocka_unit_test(test_shared_prefill_and_row_tasks),
        cmocka_unit_test(test_continuous_batching),
        cmocka_unit_test(test_weight_switch_equals_continuation),
        cmocka_unit_test(test_weight_switch_sampled),
        cmocka_unit_test(test_weight_switch_error),
        cmocka_unit_test(test_config_and_argument_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
