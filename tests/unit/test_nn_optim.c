/* test_nn_optim.c — AdamW, gradient clipping and LR schedules against
 * torch.optim.AdamW / clip_grad_norm_ / transformers schedules
 * (tests/golden/nn_io/adamw.safetensors from tests/reference/gen_nn_io.py),
 * plus hand-derivable cases and FSDP-shard equivalence. */
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
#include "common/nn/engine/optim.h"
#include "rlrt/runtime/collective.h"
#include "tests/common/golden.h"

/* Tolerances vs PyTorch: the update is computed in float32 in the same order
 * as torch with the scalars rounded the same way; with zero tolerance the first
 * difference seen was 1 ulp (1.2e-7) after 8 steps, so these bounds leave a
 * few ulp of headroom while still catching any formula change. */
#ifndef TRAJ_ATOL
#define TRAJ_ATOL 5e-7
#endif
#ifndef TRAJ_RTOL
#define TRAJ_RTOL 1e-6
#endif

static rl_param_manifest *s_toy_manifest(void)
{
    rl_param_manifest *m = rl_param_manifest_new();
    int64_t s1[2] = {4, 3}, s2[1] = {3}, s3[2] = {2, 5};
    assert_true(rl_param_manifest_add(m, "w1", 2, s1) >= 0);
    assert_true(rl_param_manifest_add(m, "b1", 1, s2) >= 0);
    assert_true(rl_param_manifest_add(m, "w2", 2, s3) >= 0);
    return m;
}

static void s_run_case(const rl_golden *g, const char *name)
{
    char key[128];
    int64_t n = 0, k;
    snprintf(key, sizeof key, "%s.hparams", name);
    double *hp = rl_golden_f64(g, key, &k);
    assert_int_equal(k, 10);
    rl_lr_schedule sch = {(rl_lr_kind)(int)hp[9], hp[0], (int64_t)hp[1], (int64_t)hp[2], hp[3]};
    assert_int_equal(rl_lr_schedule_check(&sch), RL_OK);
    float max_norm = (float)hp[5];
    rl_adamw_config cfg = {hp[6], hp[7], hp[8], hp[4]};

    rl_param_manifest *m = s_toy_manifest();
    snprintf(key, sizeof key, "%s.init", name);
    float *p = rl_golden_f32(g, key, &n);
    assert_int_equal(n, m->total);
    snprintf(key, sizeof key, "%s.grads", name);
    float *grads = rl_golden_f32(g, key, &k);
    snprintf(key, sizeof key, "%s.lr", name);
    double *lr = rl_golden_f64(g, key, &k);
    int steps = (int)k;
    snprintf(key, sizeof key, "%s.norm", name);
    double *norm = rl_golden_f64(g, key, &k);
    snprintf(key, sizeof key, "%s.params", name);
    double *traj = rl_golden_f64(g, key, &k);
    assert_int_equal(k, (int64_t)steps * n);

    rl_adamw *o = rl_adamw_new(&cfg, m, 0, m->total);
    assert_non_null(o);
    assert_int_equal(rl_adamw_set_no_decay(o, m, rl_param_pred_no_decay_1d, NULL), RL_OK);
    float *gr = malloc(sizeof(float) * (size_t)n);
    for (int t = 0; t < steps; t++) {
        memcpy(gr, grads + (int64_t)t * n, sizeof(float) * (size_t)n);
        float got_norm;
        assert_int_equal(rl_grad_clip_norm(gr, n, max_norm, &got_norm), RL_OK);
        snprintf(key, sizeof key, "%s step %d norm", name, t);
        double gn = got_norm;
        assert_int_equal(rl_check_close_f64(key, &gn, &norm[t], 1, 0, 1e-6), 0);
        double l = rl_lr_at(&sch, t);
        snprintf(key, sizeof key, "%s step %d lr", name, t);
        assert_int_equal(rl_check_close_f64(key, &l, &lr[t], 1, 1e-15, 1e-12), 0);
        assert_int_equal(rl_adamw_step(o, l, p, gr), RL_OK);
        snprintf(key, sizeof key, "%s params after step %d", name, t + 1);
        assert_int_equal(rl_check_close_f32(key, p, traj + (int64_t)t * n, n, TRAJ_ATOL,
                                            TRAJ_RTOL), 0);
    }
    assert_int_equal(o->step, steps);
    snprintf(key, sizeof key, "%s.exp_avg", name);
    double *em = rl_golden_f64(g, key, &k);
    assert_int_equal(rl_check_close_f32(key, o->m, em, n, 1e-7, 1e-5), 0);
    snprintf(key, sizeof key, "%s.exp_avg_sq", name);
    double *ev = rl_golden_f64(g, key, &k);
    assert_int_equal(rl_check_close_f32(key, o->v, ev, n, 1e-9, 1e-5), 0);
    free(em);
    free(ev);
    free(gr);
    rl_adamw_free(o);
    free(hp);
    free(p);
    free(grads);
    free(lr);
    free(norm);
    free(traj);
    rl_param_manifest_free(m);
}

static void test_adamw_matches_torch(void **state)
{
    (void)state;
    rl_golden *g = rl_golden_load("tests/golden/nn_io/adamw.safetensors");
    assert_non_null(g);
    const char *cases = rl_golden_meta(g, "cases");
    assert_non_null(cases);
    char buf[256];
    snprintf(buf, sizeof buf, "%s", cases);
    int count = 0;
    for (char *save = NULL, *c = strtok_r(buf, ",", &save); c; c = strtok_r(NULL, ",", &save)) {
        s_run_case(g, c);
        count++;
    }
    assert_int_equal(count, 6); /* const, const_warmup, cosine_clip, cosine_min, linear x2 */
    rl_golden_free(g);
}

/* With zero gradients the moments stay 0 and the update is 0/(0+eps) = 0, so
 * only the decoupled decay acts: p *= 1 - lr*wd on decay views. */
static void test_no_decay_views(void **state)
{
    (void)state;
    rl_param_manifest *m = s_toy_manifest();
    rl_adamw_config cfg = rl_adamw_config_default();
    cfg.weight_decay = 0.5f;
    rl_adamw *o = rl_adamw_new(&cfg, m, 0, m->total);
    uint8_t mask[3] = {0, 1, 0}; /* b1 no decay */
    assert_int_equal(rl_adamw_set_no_decay_mask(o, m, mask), RL_OK);
    assert_int_equal(o->nseg, 3);
    float *p = rl_param_buffer_new(m->total), *g = rl_param_buffer_new(m->total);
    for (int64_t i = 0; i < m->total; i++)
        p[i] = 2.0f;
    assert_int_equal(rl_adamw_step(o, 0.1f, p, g), RL_OK);
    float decayed = 2.0f * (float)(1.0 - 0.1 * 0.5);
    for (int64_t i = 0; i < m->total; i++) {
        int in_b1 = i >= 12 && i < 15;
        assert_float_equal(p[i], in_b1 ? 2.0f : decayed, 0.0f);
    }
    /* predicate NULL: decay everywhere again */
    assert_int_equal(rl_adamw_set_no_decay(o, m, NULL, NULL), RL_OK);
    assert_int_equal(o->nseg, 1);
    rl_param_buffer_free(p);
    rl_param_buffer_free(g);
    rl_adamw_free(o);
    rl_param_manifest_free(m);
}

/* First step by hand: m = (1-b1) g, v = (1-b2) g², bias-corrected ratio
 * m̂/sqrt(v̂) = sign(g), so p -= lr * g/(|g| + eps') — for |g| >> eps the
 * step is lr * sign(g). */
static void test_first_step_by_hand(void **state)
{
    (void)state;
    rl_param_manifest *m = rl_param_manifest_new();
    int64_t s[1] = {4};
    rl_param_manifest_add(m, "x", 1, s);
    rl_adamw_config cfg = {0.9, 0.999, 1e-8, 0.0};
    rl_adamw *o = rl_adamw_new(&cfg, m, 0, 4);
    float p[4] = {1, 1, 1, 1}, g[4] = {3, -0.5f, 1e-3f, -100};
    assert_int_equal(rl_adamw_step(o, 0.01f, p, g), RL_OK);
    for (int i = 0; i < 4; i++)
        assert_float_equal(p[i], 1.0f - 0.01f * (g[i] > 0 ? 1.0f : -1.0f), 2e-7f);
    assert_float_equal(o->m[0], 0.3f, 1e-7f);
    assert_float_equal(o->v[0], 0.009f, 1e-8f);
    rl_adamw_free(o);
    rl_param_manifest_free(m);
}

/* FSDP: 3 shards with their own optimisers = one optimiser over the whole
 * buffer. The update is elementwise, so without clipping it is bit-exact;
 * with clipping, the all-reduced partial sums differ only by summation order. */
static void test_sharded_equals_full(void **state)
{
    (void)state;
    rl_param_manifest *m = rl_param_manifest_new();
    int64_t a[2] = {37, 11}, b[1] = {11}, c[2] = {5, 7}, d[1] = {1};
    rl_param_manifest_add(m, "emb", 2, a);
    rl_param_manifest_add(m, "norm", 1, b);
    rl_param_manifest_add(m, "proj", 2, c);
    rl_param_manifest_add(m, "scale", 1, d);
    int64_t n = m->total;
    float *pf = rl_param_buffer_new(n), *ps = rl_param_buffer_new(n);
    float *gf = rl_param_buffer_new(n), *gs = rl_param_buffer_new(n);
    rl_rng r;
    rl_rng_init(&r, 3, 0);
    for (int64_t i = 0; i < n; i++)
        pf[i] = ps[i] = rl_rng_normal(&r);
    rl_adamw_config cfg = rl_adamw_config_default();
    cfg.weight_decay = 0.1f;
    rl_adamw *full = rl_adamw_new(&cfg, m, 0, n);
    rl_adamw_set_no_decay(full, m, rl_param_pred_no_decay_1d, NULL);
    enum { W = 3 };
    rl_adamw *sh[W];
    for (int w = 0; w < W; w++) {
        int64_t lo, hi;
        rl_shard_range(n, W, w, &lo, &hi);
        sh[w] = rl_adamw_new(&cfg, m, lo, hi);
        assert_non_null(sh[w]);
        rl_adamw_set_no_decay(sh[w], m, rl_param_pred_no_decay_1d, NULL);
    }
    for (int clip = 0; clip < 2; clip++) {
        for (int t = 0; t < 5; t++) {
            for (int64_t i = 0; i < n; i++)
                gf[i] = gs[i] = 3.0f * rl_rng_normal(&r);
            float nf = 0, ns = 0;
            rl_grad_clip_norm(gf, n, clip ? 1.0f : 0.0f, &nf);
            double total = 0;
            for (int w = 0; w < W; w++) /* the all-reduce */
                total += rl_grad_sumsq(gs + sh[w]->begin, sh[w]->n);
            for (int w = 0; w < W; w++)
                rl_grad_clip_apply(gs + sh[w]->begin, sh[w]->n, total, clip ? 1.0f : 0.0f, &ns);
            assert_float_equal(nf, ns, 1e-5f * nf);
            rl_adamw_step(full, 1e-2f, pf, gf);
            for (int w = 0; w < W; w++)
                rl_adamw_step(sh[w], 1e-2f, ps + sh[w]->begin, gs + sh[w]->begin);
        }
        if (!clip) {
            assert_memory_equal(pf, ps, sizeof(float) * (size_t)n);
            for (int w = 0; w < W; w++)
                assert_memory_equal(full->m + sh[w]->begin, sh[w]->m,
                                    sizeof(float) * (size_t)sh[w]->n);
        } else {
            for (int64_t i = 0; i < n; i++)
                assert_float_equal(pf[i], ps[i], 1e-5f);
        }
    }
    for (int w = 0; w < W; w++)
        rl_adamw_free(sh[w]);
    rl_adamw_free(full);
    rl_param_buffer_free(pf);
    rl_param_buffer_free(ps);
    rl_param_buffer_free(gf);
    rl_param_buffer_free(gs);
    rl_param_manifest_free(m);
}

static void test_clip_and_sumsq(void **state)
{
    (void)state;
    /* 3-4-5 triangle */
    float g[2] = {3, 4};
    float norm;
    assert_int_equal(rl_grad_clip_norm(g, 2, 1.0f, &norm), RL_OK);
    assert_float_equal(norm, 5.0f, 0);
    assert_float_equal(g[0], 3.0f / (5.0f + 1e-6f), 1e-7f);
    assert_float_equal(g[1], 4.0f / (5.0f + 1e-6f), 1e-7f);
    /* below the threshold: untouched */
    float h[2] = {0.3f, 0.4f};
    assert_int_equal(rl_grad_clip_norm(h, 2, 1.0f, &norm), RL_OK);
    assert_float_equal(h[0], 0.3f, 0);
    /* many blocks: exact in double, same with any thread count */
    int64_t n = 300000;
    float *big = malloc(sizeof(float) * (size_t)n);
    for (int64_t i = 0; i < n; i++)
        big[i] = 0.5f;
    assert_true(rl_grad_sumsq(big, n) == 75000.0);
    /* non-finite: RL_ENUMERIC, grads left alone */
    big[12345] = NAN;
    assert_int_equal(rl_grad_clip_norm(big, n, 1.0f, &norm), RL_ENUMERIC);
    assert_non_null(strstr(rl_error_message(), "non-finite"));
    assert_float_equal(big[0], 0.5f, 0);
    free(big);
}

static void test_lr_schedules_by_hand(void **state)
{
    (void)state;
    rl_lr_schedule c = {RL_LR_COSINE, 1.0, 10, 110, 0.1};
    assert_float_equal(rl_lr_at(&c, 0), 0.0, 0);
    assert_float_equal(rl_lr_at(&c, 5), 0.5, 1e-15);
    assert_float_equal(rl_lr_at(&c, 10), 1.0, 1e-15);
    assert_float_equal(rl_lr_at(&c, 60), 0.1 + 0.9 * 0.5, 1e-12); /* halfway */
    assert_float_equal(rl_lr_at(&c, 110), 0.1, 1e-12);
    assert_float_equal(rl_lr_at(&c, 500), 0.1, 1e-12); /* stays at the floor */
    rl_lr_schedule l = {RL_LR_LINEAR, 2.0, 0, 4, 0.0};
    assert_float_equal(rl_lr_at(&l, 0), 2.0, 0);
    assert_float_equal(rl_lr_at(&l, 1), 1.5, 1e-15);
    assert_float_equal(rl_lr_at(&l, 4), 0.0, 1e-15);
    rl_lr_schedule k = {RL_LR_CONSTANT, 3e-4, 0, 0, 0.0};
    assert_float_equal(rl_lr_at(&k, 12345), 3e-4, 0);
    rl_lr_kind kind;
    assert_int_equal(rl_lr_kind_parse("cosine", &kind), RL_OK);
    assert_int_equal(kind, RL_LR_COSINE);
    assert_int_equal(rl_lr_kind_parse("step", &kind), RL_EINVAL);
    assert_non_null(strstr(rl_error_message(), "'step'"));
    rl_lr_schedule bad = {RL_LR_COSINE, 1.0, 10, 5, 0.0};
    assert_int_equal(rl_lr_schedule_check(&bad), RL_EINVAL);
    assert_non_null(strstr(rl_error_message(), "total_steps"));
    bad.total_steps = 20;
    bad.min_ratio = 1.5;
    assert_int_equal(rl_lr_schedule_check(&bad), RL_EINVAL);
    assert_non_null(strstr(rl_error_message(), "min_ratio"));
}

static void test_bad_config_and_range(void **state)
{
    (void)state;
    rl_param_manifest *m = s_toy_manifest();
    rl_adamw_config cfg = rl_adamw_config_default();
    cfg.beta1 = 1.0f;
    assert_null(rl_adamw_new(&cfg, m, 0, m->total));
    assert_non_null(strstr(rl_error_message(), "beta1"));
    cfg = rl_adamw_config_default();
    cfg.eps = 0.0f;
    assert_null(rl_adamw_new(&cfg, m, 0, m->total));
    assert_non_null(strstr(rl_error_message(), "eps"));
    cfg = rl_adamw_config_default();
    assert_null(rl_adamw_new(&cfg, m, 0, m->total + 1));
    assert_int_equal(rl_error_code(), RL_ERANGE);
    rl_adamw *o = rl_adamw_new(&cfg, m, 5, 20);
    assert_non_null(o);
    /* the shard [5,20) cuts w1 (0..12), holds b1 (12..15) and part of w2 */
    rl_adamw_set_no_decay(o, m, rl_param_pred_no_decay_1d, NULL);
    assert_int_equal(o->nseg, 3);
    assert_int_equal(o->seg[0].begin, 0);
    assert_int_equal(o->seg[0].end, 7);
    assert_int_equal(o->seg[1].decay, 0);
    assert_int_equal(o->seg[2].end, 15);
    float p[15] = {0}, g[15] = {0};
    assert_int_equal(rl_adamw_step(o, NAN, p, g), RL_EINVAL);
    assert_non_null(strstr(rl_error_message(), "lr"));
    rl_adamw_free(o);
    rl_param_manifest_free(m);
}

/* A view's lr scale: its elements step exactly as an optimiser at lr ×
 * scale would; the others as at lr; the decay flags survive; scale 0
 * freezes a view; bad scales are errors naming the view. */
static void test_lr_scale_views(void **state)
{
    (void)state;
    rl_param_manifest *m = s_toy_manifest(); /* w1 0..12, b1 12..15, w2 15..25 */
    rl_adamw_config cfg = rl_adamw_config_default();
    cfg.weight_decay = 0.1;
    rl_adamw *o = rl_adamw_new(&cfg, m, 0, m->total), *lo = rl_adamw_new(&cfg, m, 0, m->total),
             *hi = rl_adamw_new(&cfg, m, 0, m->total);
    assert_non_null(o);
    assert_non_null(lo);
    assert_non_null(hi);
    for (rl_adamw **x = (rl_adamw *[]){o, lo, hi}, **e = x + 3; x < e; x++)
        assert_int_equal(rl_adamw_set_no_decay(*x, m, rl_param_pred_no_decay_1d, NULL), RL_OK);
    double scale[3] = {1.0, 0.0, 3.0};
    assert_int_equal(rl_adamw_set_lr_scale(o, m, scale), RL_OK);
    assert_int_equal(o->nseg, 3);
    assert_int_equal(o->seg[1].decay, 0);       /* b1 keeps its no-decay flag */
    assert_true(o->seg[2].lr_scale == 3.0);
    float p[25], pl[25], ph[25], g[25];
    for (int i = 0; i < 25; i++) {
        p[i] = pl[i] = ph[i] = 0.1f * (float)(i - 12);
    }
    for (int step = 0; step < 3; step++) {
        for (int i = 0; i < 25; i++)
            g[i] = 0.05f * (float)((i * 7 + step * 3) % 11) - 0.2f;
        assert_int_equal(rl_adamw_step(o, 0.01, p, g), RL_OK);
        assert_int_equal(rl_adamw_step(lo, 0.01, pl, g), RL_OK);
        assert_int_equal(rl_adamw_step(hi, 0.03, ph, g), RL_OK);
    }
    for (int i = 0; i < 12; i++)
        assert_true(p[i] == pl[i]);
    for (int i = 12; i < 15; i++)
        assert_true(p[i] == 0.1f * (float)(i - 12)); /* frozen */
    for (int i = 15; i < 25; i++)
        assert_true(p[i] == ph[i]);
    assert_true(ph[20] != pl[20]);
    /* bad scales name the view; the previous ones stay */
    double bad[3] = {1.0, -1.0, 1.0};
    assert_int_equal(rl_adamw_set_lr_scale(o, m, bad), RL_EINVAL);
    assert_non_null(strstr(rl_error_message(), "'b1'"));
    bad[1] = NAN;
    assert_int_equal(rl_adamw_set_lr_scale(o, m, bad), RL_EINVAL);
    assert_true(o->seg[2].lr_scale == 3.0);
    /* NULL: every view back to 1 (w1 and w2 still differ by their decay flags from b1) */
    assert_int_equal(rl_adamw_set_lr_scale(o, m, NULL), RL_OK);
    assert_int_equal(o->nseg, 3);
    assert_true(o->seg[2].lr_scale == 1.0);
    /* a manifest of another layout is refused */
    rl_param_manifest *m2 = rl_param_manifest_new();
    assert_true(rl_param_manifest_add(m2, "w", 1, (int64_t[]){25}) >= 0);
    assert_int_equal(rl_adamw_set_lr_scale(o, m2, NULL), RL_ESHAPE);
    rl_param_manifest_free(m2);
    rl_adamw_free(o);
    rl_adamw_free(lo);
    rl_adamw_free(hi);
    rl_param_manifest_free(m);
}

/* The optimiser's device API on the CPU: new_on(CPU) is rl_adamw_new step
 * for step, the moments come out and go back through get/set, the clip on
 * the CPU table is rl_grad_clip_norm, and a device this build or machine
 * lacks is refused by name (the CUDA twin of this test is in test_nn_cuda). */
static void test_device_api_on_cpu(void **state)
{
    (void)state;
    rl_param_manifest *m = s_toy_manifest();
    rl_adamw_config cfg = rl_adamw_config_default();
    rl_adamw *a = rl_adamw_new(&cfg, m, 0, m->total);
    rl_adamw *b = rl_adamw_new_on(&cfg, m, 0, m->total, RL_DEVICE_CPU);
    assert_non_null(a);
    assert_non_null(b);
    assert_int_equal(b->dev, RL_DEVICE_CPU);
    uint8_t mask[3] = {0, 1, 0};
    assert_int_equal(rl_adamw_set_no_decay_mask(a, m, mask), RL_OK);
    assert_int_equal(rl_adamw_set_no_decay_mask(b, m, mask), RL_OK);
    float *pa = rl_param_buffer_new(m->total), *pb = rl_param_buffer_new(m->total);
    float *g = rl_param_buffer_new(m->total);
    for (int64_t i = 0; i < m->total; i++) {
        pa[i] = pb[i] = 0.1f * (float)i - 0.7f;
        g[i] = (float)((i * 7) % 5) - 2.0f;
    }
    for (int s = 0; s < 3; s++) {
        assert_int_equal(rl_adamw_step(a, 1e-2, pa, g), RL_OK);
        assert_int_equal(rl_adamw_step(b, 1e-2, pb, g), RL_OK);
    }
    assert_memory_equal(pa, pb, sizeof(float) * (size_t)m->total);
    float *mh = calloc((size_t)m->total, sizeof(float)), *vh = calloc((size_t)m->total, sizeof(float));
    assert_int_equal(rl_adamw_moments_get(b, mh, vh), RL_OK);
    assert_memory_equal(mh, a->m, sizeof(float) * (size_t)m->total);
    assert_memory_equal(vh, a->v, sizeof(float) * (size_t)m->total);
    mh[3] = 42.0f;
    assert_int_equal(rl_adamw_moments_set(b, mh, vh), RL_OK);
    assert_float_equal(b->m[3], 42.0f, 0);
    assert_int_equal(rl_adamw_moments_set(b, mh, NULL), RL_EINVAL);
    float h[2] = {3, 4}, k[2] = {3, 4}, n1, n2;
    assert_int_equal(rl_grad_clip_norm(h, 2, 1.0f, &n1), RL_OK);
    assert_int_equal(rl_grad_clip_norm_on(RL_DEVICE_CPU, k, 2, 1.0f, &n2), RL_OK);
    assert_memory_equal(h, k, sizeof h);
    assert_float_equal(n1, n2, 0);
#ifndef RL_CUDA
    assert_null(rl_adamw_new_on(&cfg, m, 0, m->total, RL_DEVICE_CUDA));
    assert_non_null(strstr(rl_error_message(), "no CUDA"));
    assert_int_equal(rl_grad_clip_norm_on(RL_DEVICE_CUDA, k, 2, 1.0f, &n2), RL_EUNSUPPORTED);
#endif
    free(mh);
    free(vh);
    rl_param_buffer_free(pa);
    rl_param_buffer_free(pb);
    rl_param_buffer_free(g);
    rl_adamw_free(a);
    rl_adamw_free(b);
    rl_param_manifest_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_adamw_matches_torch),
        cmocka_unit_test(test_no_decay_views),
        cmocka_unit_test(test_first_step_by_hand),
        cmocka_unit_test(test_sharded_equals_full),
        cmocka_unit_test(test_clip_and_sumsq),
        cmocka_unit_test(test_lr_schedules_by_hand),
        cmocka_unit_test(test_bad_config_and_range),
        cmocka_unit_test(test_lr_scale_views),
        cmocka_unit_test(test_device_api_on_cpu),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
