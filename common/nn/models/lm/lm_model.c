/* lm_model.c — the language-model kind of rl_model (see common/nn/models/lm/lm_model.h):
 * the (prompt ++ response) layout, response-aligned quantities, KV-cache
 * sampling and the model: config section. */
#include "common/nn/models/lm/lm_model.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/nn/models/lm/generate.h"
#include "common/nn/models/model_base.h"
#include "common/schema/lm.h"
#include "common/schema/model.h"
#include "rlrt/error.h"

typedef struct s_lm_model {
    rl_model_base base; /* the network's views and buffers, lent */
    rl_lm *net;
    double init_std;
} s_lm_model;

static const rl_model_ops s_ops;

static s_lm_model *s_of(rl_model *m) { return (s_lm_model *)m; }
static const s_lm_model *s_cof(const rl_model *m) { return (const s_lm_model *)m; }

rl_lm *rl_lm_model_network(rl_model *m)
{
    return m && m->ops == &s_ops ? s_of(m)->net : NULL;
}

/* ---- layout ----------------------------------------------------------------------------
 * Row b of a batch is prompt[b, :plen] ++ response[b, :rlen], right-padded
 * with pad_id to L = the longest row; response token j sits at position
 * plen[b] + j, so its quantity is full[b, plen[b] + j]
 * (common/nn/models/lm/transformer.h: logp[b, t] = log π(token t | tokens < t)). */

typedef struct s_seq {
    const char *what; /* the call, in errors */
    int B, P, R, L;
    const int32_t *plen, *rlen; /* rlen NULL: prompts only */
    const float *rmask;         /* (B, R) RL_LM_RESPONSE_MASK or NULL (all 1) */
    int32_t *tokens;            /* (B, L) */
    uint8_t *mask;              /* (B, L) */
} s_seq;

static void s_seq_free(s_seq *s)
{
    free(s->tokens);
    free(s->mask);
    memset(s, 0, sizeof *s);
}

/* A tensor of `dtype` with `ndim` dims, or NULL and a message naming it. */
static const rl_tensor *s_need(const rl_dataproto *dp, const char *what, const char *name,
                               rl_dtype dtype, int ndim)
{
    const rl_tensor *t = rl_dataproto_tensor(dp, name);
    if (!t) {
        rl_error_set(RL_ENOTFOUND, "%s: missing tensor '%s' (%s, %d dims)", what, name,
                     rl_dtype_name(dtype), ndim);
        return NULL;
    }
    if (t->dtype != dtype || t->ndim != ndim) {
        rl_error_set(RL_EDTYPE, "%s: tensor '%s' must be %s with %d dims, got %s with %d", what,
                     name, rl_dtype_name(dtype), ndim, rl_dtype_name(t->dtype), t->ndim);
        return NULL;
    }
    return t;
}

/* Builds the sequences of `in`; responses are optional when `need_resp` is 0. */
static int s_seq_build(const rl_lm *net, const rl_dataproto *in, const char *what, int need_resp,
                       s_seq *s)
{
    memset(s, 0, sizeof *s);
    s->what = what;
    const rl_lm_config *cfg = rl_lm_get_config(net);
    const rl_tensor *pr = s_need(in, what, RL_LM_PROMPTS, RL_I32, 2);
    const rl_tensor *pl = pr ? s_need(in, what, RL_LM_PROMPT_LENS, RL_I32, 1) : NULL;
    if (!pl)
        return rl_error_code();
    const rl_tensor *rs = NULL, *rl = NULL;
    if (need_resp || rl_dataproto_tensor(in, RL_LM_RESPONSES)) {
        rs = s_need(in, what, RL_LM_RESPONSES, RL_I32, 2);
        rl = rs ? s_need(in, what, RL_LM_RESPONSE_LENS, RL_I32, 1) : NULL;
        if (!rl)
            return rl_error_code();
    }
    s->B = (int)pr->shape[0];
    s->P = (int)pr->shape[1];
    s->R = rs ? (int)rs->shape[1] : 0;
    s->plen = rl_tensor_data(pl);
    s->rlen = rs ? rl_tensor_data(rl) : NULL;
    if (rs && rl_dataproto_tensor(in, RL_LM_RESPONSE_MASK)) { /* optional loss mask */
        const rl_tensor *mt = s_need(in, what, RL_LM_RESPONSE_MASK, RL_F32, 2);
        if (!mt)
            return rl_error_code();
        if (mt->shape[0] != s->B || mt->shape[1] != s->R)
            return rl_error_set(RL_ESHAPE, "%s: tensor '%s' is (%lld, %lld), the responses (%d, %d)",
                                what, RL_LM_RESPONSE_MASK, (long long)mt->shape[0],
                                (long long)mt->shape[1], s->B, s->R);
        s->rmask = rl_tensor_data(mt);
        for (int64_t i = 0; i < (int64_t)s->B * s->R; i++)
            if (s->rmask[i] != 0.0f && s->rmask[i] != 1.0f)
                return rl_error_set(RL_ERANGE, "%s: %s[%lld, %lld] = %g, expected 0 or 1", what,
                                    RL_LM_RESPONSE_MASK, (long long)(i / s->R),
                                    (long long)(i % s->R), (double)s->rmask[i]);
    }
    int L = 1;
    for (int b = 0; b < s->B; b++) {
        int p = s->plen[b], r = s->rlen ? s->rlen[b] : 0;
        if (p < 1 || p > s->P)
            return rl_error_set(RL_ERANGE, "%s: %s[%d] = %d outside [1, %d]", what,
                                RL_LM_PROMPT_LENS, b, p, s->P);
        if (r < 0 || r > s->R)
            return rl_error_set(RL_ERANGE, "%s: %s[%d] = %d outside [0, %d]", what,
                                RL_LM_RESPONSE_LENS, b, r, s->R);
        L = p + r > L ? p + r : L;
    }
    s->L = L;
    size_t n = (size_t)(s->B ? s->B : 1) * (size_t)L;
    s->tokens = malloc(sizeof(int32_t) * n);
    s->mask = calloc(n, 1);
    if (!s->tokens || !s->mask) {
        s_seq_free(s);
        return rl_error_set(RL_ENOMEM, "%s: out of memory for %d x %d tokens", what, s->B, L);
    }
    const int32_t *P = rl_tensor_data(pr), *R = rs ? rl_tensor_data(rs) : NULL;
    int32_t pad = cfg->pad_token_id >= 0 ? cfg->pad_token_id : 0;
    for (int b = 0; b < s->B; b++) {
        int p = s->plen[b], r = s->rlen ? s->rlen[b] : 0;
        int32_t *row = s->tokens + (size_t)b * L;
        for (int t = 0; t < L; t++) {
            int32_t id = t < p ? P[(size_t)b * s->P + t] : t < p + r ? R[(size_t)b * s->R + (t - p)] : pad;
            if (t < p + r && (id < 0 || id >= cfg->vocab_size)) {
                s_seq_free(s);
                return rl_error_set(RL_ERANGE, "%s: row %d: token %d at position %d outside the "
                                               "vocabulary [0, %d)", what, b, id, t, cfg->vocab_size);
            }
            row[t] = id;
        }
        memset(s->mask + (size_t)b * L, 1, (size_t)(p + r));
    }
    return RL_OK;
}

/* out[b, j] = full[b, plen[b] + j] for j < rlen[b], else 0 (rows row0..). */
static void s_gather(const s_seq *s, const float *full, int row0, int rows, int T, float *out)
{
    for (int b = 0; b < rows; b++) {
        int gb = row0 + b, p = s->plen[gb], r = s->rlen ? s->rlen[gb] : 0;
        for (int j = 0; j < s->R; j++)
            out[(size_t)b * s->R + j] = j < r ? full[(size_t)b * T + p + j] : 0.0f;
    }
}

/* The inverse: full[b, plen[b] + j] = part[b, j] (other entries untouched). */
static void s_scatter(const s_seq *s, const float *part, int row0, int rows, int T, float *full)
{
    for (int b = 0; b < rows; b++) {
        int gb = row0 + b, p = s->plen[gb], r = s->rlen ? s->rlen[gb] : 0;
        for (int j = 0; j < r && p + j < T; j++)
            full[(size_t)b * T + p + j] = part[(size_t)b * s->R + j];
    }
}

static int s_check_want(const s_lm_model *lm, unsigned want, const char *what)
{
    if (want & RL_Q_BIT(RL_Q_VELOCITY))
        return rl_error_set(RL_EUNSUPPORTED, "%s: the lm model has no velocity quantity", what);
    if ((want & RL_Q_BIT(RL_Q_VALUE)) && !rl_lm_get_config(lm->net)->value_head)
        return rl_error_set(RL_EUNSUPPORTED, "%s: the value quantity needs %s: true", what,
                            RL_CFG_PATH(&rl_lm_model_section, rl_lm_model_config, value_head));
    if (!(want & (RL_Q_BIT(RL_Q_LOGP) | RL_Q_BIT(RL_Q_ENTROPY) | RL_Q_BIT(RL_Q_VALUE))))
        return rl_error_set(RL_EINVAL, "%s: no quantity asked for", what);
    return RL_OK;
}

/* The sequences of a forward or forward_backward call named `what`. */
static int s_seq_open(rl_model *m, const rl_dataproto *batch, unsigned want, const char *what, s_seq *s)
{
    const s_lm_model *lm = s_cof(m);
    int rc = s_check_want(lm, want, what);
    return rc ? rc : s_seq_build(lm->net, batch, what, 1, s);
}

/* ---- forward ---------------------------------------------------------------------------- */

static int s_forward(rl_model *m, const rl_dataproto *batch, unsigned want,
                     const rl_model_pass *pass, rl_dataproto **out)
{
    s_seq s;
    int rc = s_seq_open(m, batch, want, "lm forward", &s);
    if (rc)
        return rc;
    rl_dataproto *o = rl_dataproto_new();
    float *dst[3] = {NULL, NULL, NULL};
    int64_t shape[2] = {s.B, s.R};
    for (int q = 0; o && q < 3; q++) {
        if (!(want & RL_Q_BIT(q)))
            continue;
        rl_tensor *t = rl_dataproto_new_tensor(o, rl_quantity_name((rl_quantity)q), RL_F32, 2, shape);
        if (!t) {
            rl_dataproto_free(o);
            o = NULL;
            break;
        }
        dst[q] = rl_tensor_data(t);
    }
    int mb = (int)rl_model_micro_rows(pass, s.B);
    size_t n = (size_t)mb * (size_t)s.L;
    float *full = o ? malloc(sizeof(float) * 3 * n) : NULL;
    if (!full) {
        rc = o ? rl_error_set(RL_ENOMEM, "%s: out of memory", s.what) : rl_error_code();
        goto done;
    }
    for (int r0 = 0; r0 < s.B && !rc; r0 += mb) {
        int rows = s.B - r0 < mb ? s.B - r0 : mb;
        rc = rl_lm_forward(s_of(m)->net, rows, s.L, s.tokens + (size_t)r0 * s.L,
                           s.mask + (size_t)r0 * s.L, (float)pass->temperature,
                           dst[0] ? full : NULL, dst[1] ? full + n : NULL, dst[2] ? full + 2 * n : NULL);
        for (int q = 0; !rc && q < 3; q++)
            if (dst[q])
                s_gather(&s, full + (size_t)q * n, r0, rows, s.L, dst[q] + (size_t)r0 * s.R);
    }
done:
    free(full);
    s_seq_free(&s);
    return rl_model_give(o, rc, out);
}

/* ---- forward + backward ---------------------------------------------------------------- */

typedef struct s_fb {
    const s_seq *s;
    unsigned want;
    rl_model_loss_fn fn;
    void *ctx;
    float *q[3], *g[3], *mask; /* (mb, R) scratch */
} s_fb;

/* The transformer's loss callback: response-aligned quantities in, the
 * caller's loss, gradients scattered back to sequence positions. */
static int s_fb_loss(void *arg, int row0, int B, int T, const float *logp, const float *entropy,
                     const float *values, float *dlogp, float *dentropy, float *dvalues,
                     double *loss)
{
    s_fb *c = arg;
    const s_seq *s = c->s;
    const float *full[3] = {logp, entropy, values};
    float *dfull[3] = {dlogp, dentropy, dvalues};
    rl_model_io out, grad;
    memset(&out, 0, sizeof out);
    out.row0 = row0;
    out.rows = B;
    size_t n = (size_t)B * (size_t)s->R;
    for (int b = 0; b < B; b++)
        for (int j = 0; j < s->R; j++)
            c->mask[(size_t)b * s->R + j] =
                j >= s->rlen[row0 + b] ? 0.0f
                : s->rmask             ? s->rmask[(size_t)(row0 + b) * s->R + j]
                                       : 1.0f;
    for (int q = 0; q < 3; q++) {
        if (!(c->want & RL_Q_BIT(q)))
            continue;
        s_gather(s, full[q], row0, B, T, c->q[q]);
        memset(c->g[q], 0, sizeof(float) * n);
        out.width[q] = s->R;
        out.q[q] = c->q[q];
        out.mask[q] = c->mask;
    }
    grad = out;
    for (int q = 0; q < 3; q++)
        grad.q[q] = out.q[q] ? c->g[q] : NULL;
    int rc = c->fn(c->ctx, &out, &grad, loss);
    if (rc)
        return rc;
    for (int q = 0; q < 3; q++)
        if (grad.q[q] && dfull[q])
            s_scatter(s, c->g[q], row0, B, T, dfull[q]);
    return RL_OK;
}

static int s_forward_backward(rl_model *m, const rl_dataproto *batch, unsigned want,
                              const rl_model_pass *pass, rl_model_loss_fn fn, void *ctx,
                              double *loss)
{
    s_seq s;
    int rc = s_seq_open(m, batch, want, "lm forward_backward", &s);
    if (rc)
        return rc;
    if (s.B == 0) { /* nothing to differentiate: the gradient stays as it is */
        s_seq_free(&s);
        return RL_OK;
    }
    int mb = (int)rl_model_micro_rows(pass, s.B);
    size_t n = (size_t)mb * (size_t)(s.R ? s.R : 1);
    s_fb c = {.s = &s, .want = want, .fn = fn, .ctx = ctx};
    float *scratch = calloc(7 * n, sizeof(float));
    if (!scratch) {
        s_seq_free(&s);
        return rl_error_set(RL_ENOMEM, "%s: out of memory", s.what);
    }
    for (int q = 0; q < 3; q++) {
        c.q[q] = scratch + (size_t)q * n;
        c.g[q] = scratch + (size_t)(3 + q) * n;
    }
    c.mask = scratch + 6 * n;
    rc = rl_lm_forward_backward(s_of(m)->net, s.B, s.L, s.tokens, s.mask, (float)pass->temperature, mb,
                                s_fb_loss, &c, loss);
    free(scratch);
    s_seq_free(&s);
    return rc;
}

/* ---- sampling ----------------------------------------------------------------------------- */

int rl_lm_model_sample_with(rl_model *m, const rl_dataproto *in, const rl_model_sampling *sp,
                            const char *what, int with_mask, rl_lm_sampler fn, void *ctx,
                            rl_dataproto **out)
{
    rl_lm *net = rl_lm_model_network(m);
    if (!net)
        return rl_error_set(RL_EINVAL, "%s: not an lm model", what);
    const rl_tensor *pr = s_need(in, what, RL_LM_PROMPTS, RL_I32, 2);
    const rl_tensor *pl = pr ? s_need(in, what, RL_LM_PROMPT_LENS, RL_I32, 1) : NULL;
    const rl_tensor *sd = pl ? s_need(in, what, RL_LM_ROW_SEEDS, RL_I64, 1) : NULL;
    if (!sd)
        return rl_error_code();
    if (sp->max_new_tokens < 1 || sp->max_new_tokens > 1 << 20)
        return rl_error_set(RL_EINVAL, "%s: max_new_tokens %lld outside [1, 2^20]", what,
                            (long long)sp->max_new_tokens);
    int B = (int)pr->shape[0], P = (int)pr->shape[1], R = (int)sp->max_new_tokens;
    const int32_t *plens32 = rl_tensor_data(pl);
    for (int b = 0; b < B; b++)
        if (plens32[b] < 1 || plens32[b] > P)
            return rl_error_set(RL_ERANGE, "%s: %s[%d] = %d outside [1, %d]", what,
                                RL_LM_PROMPT_LENS, b, plens32[b], P);
    rl_lm_sampling s;
    rl_lm_sampling_default(&s);
    int32_t stop = rl_lm_get_config(net)->eos_token_id;
    s.temperature = (float)sp->temperature;
    s.top_p = (float)sp->top_p;
    s.top_k = (int)sp->top_k;
    s.greedy = sp->greedy;
    s.max_new_tokens = R;
    s.max_batch = sp->max_batch > 0 && sp->max_batch < B ? (int)sp->max_batch : 0;
    s.stop_tokens = stop >= 0 ? &stop : NULL;
    s.num_stop_tokens = stop >= 0 ? 1 : 0;
    const rl_model_output spec[5] = {{RL_LM_RESPONSES, RL_I32, 2, {B, R}},
                                     {RL_LM_RESPONSE_LENS, RL_I32, 1, {B}},
                                     {RL_LM_RESPONSE_LOGP, RL_F32, 2, {B, R}},
                                     {RL_LM_RESPONSE_ENTROPY, RL_F32, 2, {B, R}},
                                     {RL_LM_RESPONSE_MASK, RL_F32, 2, {B, R}}};
    rl_tensor *t[5] = {NULL};
    rl_dataproto *o = rl_model_outputs(spec, with_mask ? 5 : 4, t);
    int *lens = malloc(sizeof(int) * (size_t)(B ? B : 1));
    int *plens = malloc(sizeof(int) * (size_t)(B ? B : 1));
    int rc = RL_OK;
    if (!o || !lens || !plens) {
        rc = o ? rl_error_set(RL_ENOMEM, "%s: out of memory", what) : rl_error_code();
    } else {
        for (int b = 0; b < B; b++)
            plens[b] = plens32[b];
        rl_lm_sample_call call = {.net = net, .B = B, .P = P, .R = R, .prompts = rl_tensor_data(pr),
                                  .plens = plens, .seeds = (const uint64_t *)rl_tensor_data(sd), .s = &s,
                                  .tokens = rl_tensor_data(t[0]), .logp = rl_tensor_data(t[2]),
                                  .entropy = rl_tensor_data(t[3]), .mask = t[4] ? rl_tensor_data(t[4]) : NULL,
                                  .lens = lens, .out = o};
        rc = fn(ctx, &call);
        int32_t *l32 = rl_tensor_data(t[1]);
        for (int b = 0; !rc && b < B; b++)
            l32[b] = lens[b];
    }
    free(lens);
    free(plens);
    return rl_model_give(o, rc, out);
}

/* Partial rollouts: the versions of a call's weights, one per switch (epoch). */
typedef struct s_switches {
    const rl_model_sampling *sp;
    uint64_t *version; /* version[e]: the weights after e switches */
    int n, cap;
} s_switches;

/* rl_lm_sampling.switch_weights: asks the caller's poll_weights. */
static int s_switch(void *ctx)
{
    s_switches *w = ctx;
    uint64_t v = 0;
    int rc = w->sp->poll_weights(w->sp->poll_ctx, &v);
    if (rc <= 0)
        return rc;
    if (v <= w->version[w->n - 1])
        return rl_error_set(RL_ESTATE, "lm sample: weights switched to version %llu after %llu "
                                       "(versions must grow)", (unsigned long long)v,
                            (unsigned long long)w->version[w->n - 1]);
    if (w->n == w->cap) {
        uint64_t *g = realloc(w->version, sizeof *g * (size_t)w->cap * 2);
        if (!g)
            return rl_error_set(RL_ENOMEM, "lm sample: out of memory");
        w->version = g;
        w->cap *= 2;
    }
    w->version[w->n++] = v;
    return 1;
}

/* The kind's own sampler: KV-cache generation; with sampling->poll_weights
 * the weights may switch between decode steps and every token's version
 * goes into RL_LM_TOKEN_VERSION. */
static int s_generate(void *ctx, const rl_lm_sample_call *c)
{
    const rl_model_sampling *sp = ctx;
    if (!sp->poll_weights)
        return c->B > 0 ? rl_lm_generate(c->net, c->B, c->P, c->prompts, c->plens, c->seeds, c->s,
                                         c->tokens, c->logp, c->entropy, c->lens)
                        : RL_OK;
    int64_t shape[2] = {c->B, c->R}; /* with no rows too: every rank's output has it */
    rl_tensor *tv = rl_dataproto_new_tensor(c->out, RL_LM_TOKEN_VERSION, RL_I64, 2, shape);
    if (tv && c->B == 0)
        return RL_OK;
    size_t cells = (size_t)c->B * (size_t)c->R;
    s_switches w = {sp, malloc(sizeof(uint64_t) * 4), 1, 4};
    int32_t *epoch = malloc(sizeof(int32_t) * cells);
    if (!tv || !w.version || !epoch) {
        free(w.version);
        free(epoch);
        return tv ? rl_error_set(RL_ENOMEM, "lm sample: out of memory") : rl_error_code();
    }
    w.version[0] = sp->version;
    rl_lm_sampling s = *c->s;
    s.switch_weights = s_switch;
    s.switch_ctx = &w;
    s.out_epoch = epoch;
    int rc = rl_lm_generate(c->net, c->B, c->P, c->prompts, c->plens, c->seeds, &s, c->tokens,
                            c->logp, c->entropy, c->lens);
    int64_t *v = rl_tensor_data(tv);
    for (int b = 0; !rc && b < c->B; b++) /* (B, R): the version of each sampled token */
        for (int j = 0; j < c->R; j++) {
            size_t at = (size_t)b * c->R + (size_t)j;
            v[at] = j < c->lens[b] ? (int64_t)w.version[epoch[at]] : 0;
        }
    free(w.version);
    free(epoch);
    return rc;
}

static int s_sample(rl_model *m, const rl_dataproto *in, const rl_model_sampling *sp,
                    rl_dataproto **out)
{
    return rl_lm_model_sample_with(m, in, sp, "lm sample", 0, s_generate, (void *)sp, out);
}

/* ---- the rest of the interface -------------------------------------------------------------- */

static void s_free(rl_model *m)
{
    rl_lm_free(s_of(m)->net);
    free(m);
}

static int s_init_random(rl_model *m, uint64_t seed)
{
    return rl_lm_init_random(s_of(m)->net, seed, (float)s_of(m)->init_std);
}

static int s_write_config(const rl_model *m, const char *path)
{
    return rl_lm_config_to_hf_json(rl_lm_get_config(s_cof(m)->net), path);
}

static int s_device(const rl_model *m) { return (int)rl_lm_device(s_cof(m)->net); }

/* The network moves; the base's borrowed views follow its new buffers. */
static int s_to_device(rl_model *m, int dev)
{
    rl_lm *net = s_of(m)->net;
    int rc = rl_lm_to_device(net, (rl_device)dev);
    if (!rc)
        rl_model_base_borrow(&s_of(m)->base, rl_lm_manifest(net), rl_lm_params(net), rl_lm_grads(net));
    return rc;
}

static const rl_model_ops s_ops = {
    .kind = "lm",
    .free = s_free,
    RL_MODEL_BASE_OPS,
    .init_random = s_init_random,
    .forward = s_forward,
    .forward_backward = s_forward_backward,
    .sample = s_sample,
    .write_config = s_write_config,
    .device = s_device,
    .to_device = s_to_device,
};

/* model.* (common/schema/lm.h, range-checked when read) → an LM config,
 * then the network's own checks. */
static int s_read_config(const rl_config *job, rl_lm_config *c, double *init_std)
{
    const rl_lm_model_config *v = rl_config_section_get(job, &rl_lm_model_section);
    if (!v)
        return rl_error_code();
    memset(c, 0, sizeof *c);
    c->vocab_size = (int)v->vocab_size;
    c->hidden_size = (int)v->hidden_size;
    c->intermediate_size = (int)v->intermediate_size;
    c->num_layers = (int)v->num_layers;
    c->num_heads = (int)v->num_heads;
    c->num_kv_heads = (int)v->num_kv_heads;
    c->max_seq_len = (int)v->max_seq_len;
    c->eos_token_id = (int)v->eos_token_id;
    c->pad_token_id = (int)v->pad_token_id;
    c->bos_token_id = -1;
    c->rope_theta = (float)v->rope_theta;
    c->rms_norm_eps = (float)v->rms_norm_eps;
    c->tie_word_embeddings = v->tie_word_embeddings;
    c->qkv_bias = v->qkv_bias;
    c->value_head = v->value_head;
    *init_std = v->init_std;
    if (rl_lm_config_validate(c))
        return rl_config_error_at(job, "model", RL_ECONFIG, "%s", rl_error_message());
    return RL_OK;
}

static int s_check_config(const rl_config *job)
{
    rl_lm_config c;
    double std;
    return s_read_config(job, &c, &std);
}

static rl_model *s_from_config(const rl_config *job)
{
    rl_lm_config c;
    double init_std;
    s_lm_model *m = s_read_config(job, &c, &init_std) ? NULL : rl_model_base_new(sizeof *m, &s_ops);
    if (!m)
        return NULL;
    m->init_std = init_std;
    m->net = rl_lm_new(&c, RL_DEVICE_CPU);
    const rl_lm_model_config *v = m->net ? rl_config_section_get(job, &rl_lm_model_section) : NULL;
    int rc = !v || rl_lm_set_precision(m->net, (rl_precision)v->precision) != 0;
    if (m->net)
        rl_model_base_borrow(&m->base, rl_lm_manifest(m->net), rl_lm_params(m->net), rl_lm_grads(m->net));
    return rl_model_base_done(&m->base, rc);
}

const rl_model_kind rl_model_kind_lm = {
    .name = "lm",
    .sections = (const rl_config_section *const[]){&rl_model_base_section, &rl_lm_model_section,
                                                    NULL},
    .from_config = s_from_config,
    .check_config = s_check_config,
    .bf16 = 1,
};
