/* generate.c — batched KV-cache sampling for rl_lm (see common/nn/models/lm/generate.h).
 *
 * Prefill runs the training forward over the distinct right-padded prompts
 * (rows with equal prompts, e.g. GRPO's n samples of one prompt, share one
 * forward) and copies each row's post-RoPE keys/values into its cache slot;
 * decode steps then feed one token per live row at that row's own position,
 * the rows cut into one task per thread when the model is small. Rows never
 * see each other: attention of row b reads only cache slot b up to its
 * position.
 *
 * On a GPU model the cache and the decode step's scratch live on the
 * device and every step runs through the device table (the cache write and
 * the decode attention included); each step's tokens, positions and slots
 * go up. Without top-k/top-p the sampler runs on the device too
 * (rl_sample_rows: each row's uniform, drawn on the host from the row's
 * stream, goes up; its token, log-prob and entropy come back, the logits
 * never leave the device); with top-k/top-p the logits (n, V) come back and
 * the host sampler runs, the same code as on the CPU. */
#include "common/nn/models/lm/generate.h"

#include "common/nn/engine/ops_internal.h"
#include "common/nn/models/lm/transformer_internal.h"

#include "rlrt/error.h"
#include "common/core/rng.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct rl_lm_gen {
    int B, maxT;
    rl_device dev;                  /* where kc/vc, the step's scratch and d* live */
    float *kc, *vc;                 /* (L, B, maxT, kvd) */
    float *x, *ln, *q, *k, *v, *atty, *xmid, *gate, *up, *h, *dlogits; /* per live row */
    float *scores;                  /* (B, H, maxT) */
    float *logits;                  /* (B, V) host: what the sampler reads (= dlogits on the CPU) */
    int32_t *tok, *pos, *slot;      /* (B) host: the live rows' token, position, cache slot */
    int32_t *dtok, *dpos, *dslot;   /* their copies on dev (= tok, pos, slot on the CPU) */
    struct s_cand { float p; int id; } *cand; /* (B, V) sampling scratch */
    int dev_sample;                 /* this call samples on the device (not the CPU) */
    double *su, *dsu;               /* (B) each live row's uniform (< 0: argmax), host / dev */
    int32_t *stok, *dstok;          /* (3B) tokens, then log-probs, then entropies (as floats) */
};

static void s_gen_free(rl_lm *m)
{
    rl_lm_gen *g = m->gen;
    if (!g)
        return;
    if (g->dev == RL_DEVICE_CPU) {
        free(g->kc);
        free(g->x);
    } else {
        rl_device_free(g->dev, g->kc);
        rl_device_free(g->dev, g->x);
        rl_device_free(g->dev, g->dtok);
        rl_device_free(g->dev, g->dsu);
        free(g->logits);
    }
    free(g->su);
    free(g->tok);
    free(g->cand);
    free(g);
    m->gen = NULL;
}

/* n floats on the generator's device (host memory on the CPU). */
static void *s_gen_alloc(rl_device dev, size_t bytes)
{
    return dev == RL_DEVICE_CPU ? malloc(bytes) : rl_device_alloc_for(dev, bytes, RL_MEM_SCRATCH);
}

/* bytes from src (on src_dev) to dst (on dst_dev): a memcpy on the CPU. */
static int s_copy(rl_device dst_dev, void *dst, rl_device src_dev, const void *src, size_t bytes)
{
    if (dst_dev == RL_DEVICE_CPU && src_dev == RL_DEVICE_CPU) {
        memcpy(dst, src, bytes);
        return 0;
    }
    return rl_device_copy(dst_dev, dst, src_dev, src, bytes);
}

static int s_gen_reserve(rl_lm *m, int B, int maxT)
{
    if (m->gen && m->gen->B >= B && m->gen->maxT == maxT)
        return 0;
    s_gen_free(m);
    const rl_lm_config *c = &m->cfg;
    int64_t L = c->num_layers, d = c->hidden_size, I = c->intermediate_size;
    int64_t V = c->vocab_size, H = c->num_heads;
    rl_lm_gen *g = calloc(1, sizeof *g);
    if (!g)
        return rl_error_set(RL_ENOMEM, "generate: out of memory");
    m->gen = g;
    m->gen_free = s_gen_free;
    g->B = B;
    g->maxT = maxT;
    g->dev = m->dev;
    int cpu = g->dev == RL_DEVICE_CPU;
    int64_t cache = L * B * maxT * m->kvd;
    g->kc = s_gen_alloc(g->dev, sizeof(float) * (size_t)(2 * cache));
    int64_t per = 3 * d + 2 * m->qd + 2 * m->kvd + 3 * I + V + d;
    g->x = s_gen_alloc(g->dev, sizeof(float) * (size_t)(B * per + B * H * maxT));
    g->tok = malloc(sizeof(int32_t) * (size_t)(3 * B));
    g->dtok = cpu ? g->tok : s_gen_alloc(g->dev, sizeof(int32_t) * (size_t)(3 * B));
    g->logits = cpu ? NULL : malloc(sizeof(float) * (size_t)(B * V));
    g->cand = malloc(sizeof *g->cand * (size_t)(B * V));
    size_t sb = (sizeof(double) + 3 * sizeof(int32_t)) * (size_t)B; /* su, then stok */
    g->su = cpu ? NULL : malloc(sb);
    g->dsu = cpu ? NULL : s_gen_alloc(g->dev, sb);
    if (!g->kc || !g->x || !g->tok || !g->dtok || (!cpu && (!g->logits || !g->su || !g->dsu)) ||
        !g->cand) {
        if (cpu)
            g->dtok = NULL;
        s_gen_free(m);
        return rl_error_set(RL_ENOMEM, "generate: KV cache for B=%d T=%d on %s", B, maxT,
                            rl_device_name(m->dev));
    }
    g->vc = g->kc + cache;
    float *p = g->x + B * d;
    g->ln = p; p += B * d;
    g->q = p; p += B * m->qd;
    g->k = p; p += B * m->kvd;
    g->v = p; p += B * m->kvd;
    g->atty = p; p += B * m->qd;
    g->xmid = p; p += B * d;
    g->gate = p; p += B * I;
    g->up = p; p += B * I;
    g->h = p; p += B * I;
    g->dlogits = p; p += B * V;
    g->scores = p;
    if (cpu)
        g->logits = g->dlogits;
    g->pos = g->tok + B;
    g->slot = g->tok + 2 * B;
    g->dpos = g->dtok + B;
    g->dslot = g->dtok + 2 * B;
    if (!cpu) {
        g->stok = (int32_t *)(g->su + B);
        g->dstok = (int32_t *)(g->dsu + B);
    }
    return 0;
}

/* A linear layer in the model's precision; returns from the caller on error. */
#define LINF(...)                                                                             \
    do {                                                                                      \
        if ((rc = rl_lm_lin_fwd(m, __VA_ARGS__)) < 0)                                         \
            return rc;                                                                        \
    } while (0)

/* Per-row scratch of rows [i0, i0 + n) of the live batch: the same layout
 * as rl_lm_gen's buffers, offset to row i0. */
typedef struct s_rows {
    float *x, *ln, *q, *k, *v, *atty, *xmid, *gate, *up, *h, *logits, *scores;
    const int32_t *tok, *pos, *slot;
} s_rows;

/* The decode step for live rows [i0, i0 + n): row i feeds dtok[i] at
 * position dpos[i] into cache slot dslot[i]; leaves its logits (n, V) at
 * g->dlogits + i0 * V. Rows never read each other's scratch or cache slots,
 * so disjoint row ranges may run at once. */
static int s_decode_rows(rl_lm *m, int i0, int n)
{
    int rc;
    const rl_lm_config *c = &m->cfg;
    const rl_nn_ops *o = m->ops;
    rl_lm_gen *g = m->gen;
    int d = c->hidden_size, I = c->intermediate_size, H = c->num_heads, KH = c->num_kv_heads;
    int hd = m->hd, qd = m->qd, kvd = m->kvd, maxT = g->maxT;
    int V = c->vocab_size;
    s_rows r = {
        .x = g->x + (size_t)i0 * d, .ln = g->ln + (size_t)i0 * d,
        .q = g->q + (size_t)i0 * qd, .k = g->k + (size_t)i0 * kvd,
        .v = g->v + (size_t)i0 * kvd, .atty = g->atty + (size_t)i0 * qd,
        .xmid = g->xmid + (size_t)i0 * d, .gate = g->gate + (size_t)i0 * I,
        .up = g->up + (size_t)i0 * I, .h = g->h + (size_t)i0 * I,
        .logits = g->dlogits + (size_t)i0 * V, .scores = g->scores + (size_t)i0 * H * maxT,
        .tok = g->dtok + i0, .pos = g->dpos + i0, .slot = g->dslot + i0,
    };
    o->embedding_forward(r.x, r.tok, m->params + m->off_embed, n, d);
    for (int l = 0; l < c->num_layers; l++) {
        const rl_lm_layer_off *Lo = &m->layer[l];
        float *kc = g->kc + (size_t)l * g->B * maxT * kvd;
        float *vc = g->vc + (size_t)l * g->B * maxT * kvd;
        o->rmsnorm_forward(r.ln, NULL, r.x, m->params + Lo->ln1, c->rms_norm_eps, n, d);
        LINF(r.q, r.ln, Lo->wq, Lo->bq >= 0 ? m->params + Lo->bq : NULL, n, d, qd);
        LINF(r.k, r.ln, Lo->wk, Lo->bk >= 0 ? m->params + Lo->bk : NULL, n, d, kvd);
        LINF(r.v, r.ln, Lo->wv, Lo->bv >= 0 ? m->params + Lo->bv : NULL, n, d, kvd);
        o->rope_forward(r.q, r.q, r.pos, n, H, hd, c->rope_theta);
        o->rope_forward(r.k, r.k, r.pos, n, KH, hd, c->rope_theta);
        o->kv_cache_write(kc, vc, r.k, r.v, r.slot, r.pos, n, kvd, maxT);
        o->decode_attention(r.atty, r.scores, r.q, kc, vc, r.slot, r.pos, n, H, KH, hd, maxT);
        LINF(r.xmid, r.atty, Lo->wo, NULL, n, qd, d);
        o->add_inplace(r.xmid, r.x, (int64_t)n * d);
        o->rmsnorm_forward(r.ln, NULL, r.xmid, m->params + Lo->ln2, c->rms_norm_eps, n, d);
        LINF(r.gate, r.ln, Lo->wg, NULL, n, d, I);
        LINF(r.up, r.ln, Lo->wu, NULL, n, d, I);
        o->swiglu_forward(r.h, r.gate, r.up, (int64_t)n * I);
        LINF(r.x, r.h, Lo->wd, NULL, n, I, d);
        o->add_inplace(r.x, r.xmid, (int64_t)n * d);
    }
    o->rmsnorm_forward(r.ln, NULL, r.x, m->params + m->off_normf, c->rms_norm_eps, n, d);
    LINF(r.logits, r.ln, m->off_lmhead, NULL, n, d, c->vocab_size);
    return 0;
}

/* Fewest rows in a decode task: below this OpenBLAS spends more time
 * re-packing the weights for each task than multiplying. */
enum { RL_GEN_MIN_ROWS_PER_TASK = 16 };

/* One decode step for the n live rows. A small model's products are too
 * small for rl_sgemm to split (one core would do the whole step), so the
 * rows are cut into one task per thread (at least RL_GEN_MIN_ROWS_PER_TASK
 * rows each), each running the whole step for its rows on one core. A large
 * model's products split themselves across the threads, and the rows stay
 * one task. The cut depends only on n and the thread count. */
static int s_decode_step(rl_lm *m, int n)
{
    const rl_lm_config *c = &m->cfg;
    rl_lm_gen *g = m->gen;
    if (g->dev != RL_DEVICE_CPU) { /* one task: the device runs the rows at once */
        size_t ib = sizeof(int32_t) * (size_t)n;
        int rc;
        if ((rc = s_copy(g->dev, g->dtok, RL_DEVICE_CPU, g->tok, ib)) ||
            (rc = s_copy(g->dev, g->dpos, RL_DEVICE_CPU, g->pos, ib)) ||
            (rc = s_copy(g->dev, g->dslot, RL_DEVICE_CPU, g->slot, ib)) ||
            (rc = s_decode_rows(m, 0, n)) < 0)
            return rc;
        if (!g->dev_sample && (rc = s_copy(RL_DEVICE_CPU, g->logits, g->dev, g->dlogits,
                                           sizeof(float) * (size_t)n * c->vocab_size)))
            return rc;
        return g->dev_sample ? 0 : rl_device_sync(g->dev);
    }
    int wide = c->intermediate_size > m->qd ? c->intermediate_size : m->qd;
    int nt = rl_nn_get_threads();
    if (nt <= 1 || (double)n * c->hidden_size * wide >= RL_SGEMM_SPLIT_MIN)
        return s_decode_rows(m, 0, n);
    int per = (n + nt - 1) / nt;
    per = per < RL_GEN_MIN_ROWS_PER_TASK ? RL_GEN_MIN_ROWS_PER_TASK : per;
    int tasks = (n + per - 1) / per;
    int rc = 0; /* a task's error (only the bf16 products' RL_ENOMEM) */
    RL_PRAGMA(omp parallel for if(tasks > 1) num_threads(nt) schedule(static, 1) reduction(min : rc))
    for (int t = 0; t < tasks; t++) {
        int i0 = t * per, cnt = n - i0 < per ? n - i0 : per;
        int r = s_decode_rows(m, i0, cnt);
        rc = r < rc ? r : rc;
    }
    if (rc < 0) /* the message was set on the task's thread */
        return rl_error_set(rc, "generate: a decode step of %d rows ran out of memory for its "
                                "bf16 products", n);
    return 0;
}

static int s_cand_cmp(const void *a, const void *b)
{
    const struct s_cand *x = a, *y = b;
    if (x->p != y->p)
        return x->p > y->p ? -1 : 1;
    return x->id - y->id;
}

/* Picks the next token from one row of logits; writes its full-distribution
 * log-prob and the entropy. -1 when the logits are not finite (NaN or +Inf:
 * weights that are, or that overflow): no distribution to sample from. */
static int s_sample(const float *z, int V, float inv_temp, const rl_lm_sampling *s, rl_rng *rng,
                    struct s_cand *cand, float *logp, float *entropy)
{
    int greedy = s->greedy || !(s->temperature > 0.0f);
    if (greedy || (s->top_k <= 0 && !(s->top_p < 1.0f))) { /* what the device sampler does */
        double u = greedy ? -1.0 : rl_rng_uniform_f64(rng);
        int32_t tok;
        rl_sample_rows(&tok, logp, entropy, z, &u, inv_temp, 1, V);
        return tok;
    }
    float lse;
    rl_logprob_forward(NULL, entropy, &lse, z, NULL, inv_temp, 1, V);
    if (!isfinite(lse))
        return -1;
    /* top-k / top-p. Only tokens with p >= tau can be in the top-k / nucleus once they
     * alone hold k tokens (top-k) or top_p of the mass (top-p): sort just
     * those, lowering tau until that holds. Exact, and sorts a handful of
     * tokens instead of the vocabulary. */
    int kk = s->top_k > 0 && s->top_k < V ? s->top_k : V;
    float zmax = z[0];
    for (int j = 1; j < V; j++)
        zmax = z[j] > zmax ? z[j] : zmax;
    float tau = expf(zmax * inv_temp - lse) * 1e-4f;
    int n = 0;
    double total = 0.0;
    for (;;) {
        double mass = 0.0;
        n = 0;
        total = 0.0;
        for (int j = 0; j < V; j++) {
            float p = expf(z[j] * inv_temp - lse);
            total += p;
            if (p >= tau) {
                cand[n].p = p;
                cand[n++].id = j;
                mass += p;
            }
        }
        int ok = s->top_k > 0 ? n >= kk : mass >= (double)s->top_p * total;
        if (ok || tau == 0.0f)
            break;
        tau = tau > 1e-30f ? tau * 1e-4f : 0.0f;
    }
    qsort(cand, (size_t)n, sizeof *cand, s_cand_cmp);
    int keep = s->top_k > 0 ? kk : n;
    double zk = 0.0;
    if (s->top_k > 0)
        for (int j = 0; j < keep; j++)
            zk += cand[j].p;
    else
        zk = total;
    if (s->top_p < 1.0f) {
        double cum = 0.0, lim = (double)s->top_p * zk;
        int kp = 0;
        while (kp < keep && (kp == 0 || cum < lim))
            cum += cand[kp++].p;
        keep = kp;
        zk = cum;
    }
    double target = rl_rng_uniform_f64(rng) * zk, cum = 0.0;
    int tok = cand[keep - 1].id;
    for (int j = 0; j < keep; j++) {
        cum += cand[j].p;
        if (cum > target) {
            tok = cand[j].id;
            break;
        }
    }
    *logp = z[tok] * inv_temp - lse;
    return tok;
}

/* Index of the first row whose prompt equals row b's (same length and
 * tokens), found through a hash table of the rows before it; fills
 * first[b] for every row. table has 2B slots (-1 = empty). */
static void s_first_equal_rows(int B, int P, const int32_t *prompts, const int *lens, int *first,
                               int *table)
{
    int slots = 2 * B;
    for (int i = 0; i < slots; i++)
        table[i] = -1;
    for (int b = 0; b < B; b++) {
        const int32_t *row = prompts + (size_t)b * P;
        uint64_t h = 1469598103934665603ull ^ (uint64_t)lens[b];
        for (int t = 0; t < lens[b]; t++)
            h = (h ^ (uint32_t)row[t]) * 1099511628211ull;
        int at = (int)(h % (uint64_t)slots);
        first[b] = b;
        for (; table[at] >= 0; at = (at + 1) % slots) {
            int o = table[at];
            if (lens[o] == lens[b] &&
                !memcmp(prompts + (size_t)o * P, row, sizeof(int32_t) * (size_t)lens[b])) {
                first[b] = o;
                break;
            }
        }
        if (first[b] == b)
            table[at] = b;
    }
}

/* Prefill of the n rows rows[i] (of the call's prompts (·, P) and pmask,
 * which marks the real prompt tokens): runs the training forward over their
 * distinct prompts (GRPO's n samples of a prompt share one), copies each
 * row's post-RoPE keys/values into its cache slot slot_of[rows[i]] and its
 * last prompt position's logits to live position at + i of g->logits (V
 * each; g->dlogits when the device samples). */
static int s_prefill(rl_lm *m, int n, const int *rows, const int *slot_of, int at, int P,
                     const int32_t *prompts_all, const int *lens_all, const uint8_t *pmask)
{
    const rl_lm_config *c = &m->cfg;
    rl_lm_gen *g = m->gen;
    int V = c->vocab_size, kvd = m->kvd, B = n;
    int *first = malloc(sizeof(int) * (size_t)B * 5);
    int32_t *uprompts = malloc(sizeof(int32_t) * (size_t)B * P * 2);
    uint8_t *umask = malloc((size_t)B * P);
    int rc = 0;
    if (!first || !uprompts || !umask) {
        rc = rl_error_set(RL_ENOMEM, "generate: out of memory");
        goto done;
    }
    int *unique = first + B, *table = first + 2 * B, *prompt_lens = first + 4 * B, U = 0;
    int32_t *prompts = uprompts + (size_t)B * P; /* the n rows' prompts, in order */
    for (int i = 0; i < n; i++) {
        memcpy(prompts + (size_t)i * P, prompts_all + (size_t)rows[i] * P,
               sizeof(int32_t) * (size_t)P);
        prompt_lens[i] = lens_all[rows[i]];
    }
    s_first_equal_rows(B, P, prompts, prompt_lens, first, table);
    for (int b = 0; b < B; b++) { /* unique[b]: b's row in the prefill batch */
        if (first[b] != b) {
            unique[b] = unique[first[b]];
            continue;
        }
        memcpy(uprompts + (size_t)U * P, prompts + (size_t)b * P, sizeof(int32_t) * (size_t)P);
        memcpy(umask + (size_t)U * P, pmask + (size_t)rows[b] * P, (size_t)P);
        unique[b] = U++;
    }
    if ((rc = rl_lm_reserve(m, U, P)) < 0 || (rc = rl_lm_prepare(m, U, P, uprompts, umask, P)) < 0 ||
        (rc = rl_lm_forward_raw(m, U, P)) < 0)
        goto done;
    int64_t N = (int64_t)U * P;
    for (int l = 0; l < c->num_layers && !rc; l++)
        for (int b = 0; b < B && !rc; b++) {
            size_t dst = (((size_t)l * g->B + slot_of[rows[b]]) * g->maxT) * kvd;
            size_t src = ((size_t)l * N + (size_t)unique[b] * P) * kvd;
            size_t cnt = (size_t)prompt_lens[b] * kvd;
            if (!(rc = s_copy(g->dev, g->kc + dst, m->dev, m->a.k + src, sizeof(float) * cnt)))
                rc = s_copy(g->dev, g->vc + dst, m->dev, m->a.v + src, sizeof(float) * cnt);
        }
    for (int b = 0; b < B && !rc; b++) /* to the device sampler's rows, or the host's */
        rc = s_copy(g->dev_sample ? g->dev : RL_DEVICE_CPU,
                    (g->dev_sample ? g->dlogits : g->logits) + (size_t)(at + b) * V, m->dev,
                    m->a.logits + ((size_t)unique[b] * P + prompt_lens[b] - 1) * V, sizeof(float) * V);
    if (!rc && m->dev != RL_DEVICE_CPU)
        rc = rl_device_sync(m->dev);
done:
    free(first);
    free(uprompts);
    free(umask);
    return rc;
}

/* The whole prefixes of a call's rows (B, maxT): prompt, then the tokens
 * sampled so far; allocated at the first weight switch. */
typedef struct s_ext {
    int32_t *buf; /* (B, maxT) */
    int *lens;    /* (B) */
    uint8_t *mask; /* (B, maxT) */
} s_ext;

/* After a weight switch: the n live rows rows[i] (each with out_lens[b] >=
 * 1 tokens, the last not yet fed) get their cache slots recomputed by a
 * prefill over prompt + all their tokens with the new weights; their
 * next-token logits land where a decode step leaves them (live position i),
 * so the caller skips this step's decode. Prefill's positions are those
 * the decode steps would have written (0 .. len − 1). */
static int s_reprefill(rl_lm *m, int n, const int *rows, const int *slot_of, int B, int P, int maxT,
                       int maxnew, const int32_t *prompts, const int *prompt_lens,
                       const int32_t *out_tokens, const int *out_lens, s_ext *e)
{
    if (!e->buf) {
        size_t cells = (size_t)B * (size_t)maxT;
        e->buf = malloc(cells * (sizeof(int32_t) + 1) + sizeof(int) * (size_t)B);
        if (!e->buf)
            return rl_error_set(RL_ENOMEM, "generate: out of memory (weight switch)");
        e->lens = (int *)(e->buf + cells);
        e->mask = (uint8_t *)(e->lens + B);
    }
    for (int i = 0; i < n; i++) {
        int b = rows[i], pl = prompt_lens[b], j = out_lens[b], len = pl + j;
        if (len > maxT) /* a live row has room for its next token: cannot happen */
            return rl_error_set(RL_ESTATE, "generate: row %d's prefix of %d tokens exceeds %d",
                                b, len, maxT);
        int32_t *row = e->buf + (size_t)b * maxT;
        memcpy(row, prompts + (size_t)b * P, sizeof(int32_t) * (size_t)pl);
        memcpy(row + pl, out_tokens + (size_t)b * maxnew, sizeof(int32_t) * (size_t)j);
        for (int t = len; t < maxT; t++)
            row[t] = 0;
        for (int t = 0; t < maxT; t++)
            e->mask[(size_t)b * maxT + t] = t < len;
        e->lens[b] = len;
    }
    return s_prefill(m, n, rows, slot_of, 0, maxT, e->buf, e->lens, e->mask);
}

void rl_lm_sampling_default(rl_lm_sampling *s)
{
    memset(s, 0, sizeof *s);
    s->temperature = 1.0f;
    s->top_p = 1.0f;
    s->max_new_tokens = 64;
}

/* No-cache reference path: logits of the last position of each live row
 * from a full forward over the current sequences. */
static int s_full_step(rl_lm *m, int n, const int *rows, const int32_t *seq, int seqT,
                       const int *cur_len, float *logits_out)
{
    int T = 0;
    for (int i = 0; i < n; i++)
        T = cur_len[rows[i]] > T ? cur_len[rows[i]] : T;
    int rc = rl_lm_reserve(m, n, T);
    if (rc < 0)
        return rc;
    int32_t *tok = malloc(sizeof(int32_t) * (size_t)n * T);
    uint8_t *msk = malloc((size_t)n * T);
    if (!tok || !msk) {
        free(tok);
        free(msk);
        return rl_error_set(RL_ENOMEM, "generate: out of memory");
    }
    for (int i = 0; i < n; i++)
        for (int t = 0; t < T; t++) {
            int on = t < cur_len[rows[i]];
            tok[(size_t)i * T + t] = on ? seq[(size_t)rows[i] * seqT + t] : 0;
            msk[(size_t)i * T + t] = (uint8_t)on;
        }
    rc = rl_lm_prepare(m, n, T, tok, msk, T);
    free(tok);
    free(msk);
    if (rc < 0)
        return rc;
    if ((rc = rl_lm_forward_raw(m, n, T)) < 0)
        return rc;
    int V = m->cfg.vocab_size;
    for (int i = 0; i < n && !rc; i++)
        rc = s_copy(RL_DEVICE_CPU, logits_out + (size_t)i * V, m->dev,
                    m->a.logits + ((size_t)i * T + cur_len[rows[i]] - 1) * V, sizeof(float) * V);
    return rc;
}

/* The device sampler's step for the n live rows (g->dev_sample): each row's
 * uniform from its own stream (none for argmax, or for a row with no room,
 * which s_sample would not have drawn either) goes up, rl_sample_rows runs
 * on g->dlogits, and the tokens, log-probs and entropies land in g->stok. */
static int s_device_sample(rl_lm *m, const rl_lm_sampling *s, int n, const int *rows,
                           const int *prompt_lens, const int *out_lens, rl_rng *rng,
                           float inv_temp)
{
    rl_lm_gen *g = m->gen;
    int greedy = s->greedy || !(s->temperature > 0.0f);
    for (int i = 0; i < n; i++) {
        int b = rows[i];
        int full = prompt_lens[b] + out_lens[b] >= m->cfg.max_seq_len;
        g->su[i] = full || greedy ? -1.0 : rl_rng_uniform_f64(&rng[b]);
    }
    int rc = s_copy(g->dev, g->dsu, RL_DEVICE_CPU, g->su, sizeof(double) * (size_t)n);
    if (rc)
        return rc;
    float *dlp = (float *)(g->dstok + g->B), *dent = dlp + g->B;
    m->ops->sample_rows(g->dstok, dlp, dent, g->dlogits, g->dsu, inv_temp, n, m->cfg.vocab_size);
    if ((rc = s_copy(RL_DEVICE_CPU, g->stok, g->dev, g->dstok, 3 * sizeof(int32_t) * (size_t)g->B)))
        return rc;
    return rl_device_sync(g->dev);
}

int rl_lm_generate(rl_lm *m, int B, int P, const int32_t *prompts, const int *prompt_lens,
                   const uint64_t *row_seeds, const rl_lm_sampling *s, int32_t *out_tokens,
                   float *out_logp, float *out_entropy, int *out_lens)
{
    const rl_lm_config *c = &m->cfg;
    m->have_fwd = 0;
    if (!s || !prompts || !prompt_lens || !out_tokens || !out_lens)
        return rl_error_set(RL_EINVAL, "generate: NULL argument");
    if (B < 1 || P < 1 || P > c->max_seq_len)
        return rl_error_set(RL_ESHAPE, "generate: prompts (%d, %d) need B >= 1, 1 <= P <= %d",
                            B, P, c->max_seq_len);
    if (s->max_new_tokens < 1)
        return rl_error_set(RL_EINVAL, "generate: max_new_tokens must be >= 1, got %d",
                            s->max_new_tokens);
    if (!s->greedy && s->temperature > 0.0f && !(s->top_p > 0.0f && s->top_p <= 1.0f))
        return rl_error_set(RL_EINVAL, "generate: top_p must be in (0, 1], got %g",
                            (double)s->top_p);
    for (int b = 0; b < B; b++)
        if (prompt_lens[b] < 1 || prompt_lens[b] > P)
            return rl_error_set(RL_ERANGE, "generate: prompt_lens[%d] = %d not in [1, %d]", b,
                                prompt_lens[b], P);
    int V = c->vocab_size, maxnew = s->max_new_tokens;
    int maxT = P + maxnew;
    if (maxT > c->max_seq_len)
        maxT = c->max_seq_len;
    /* continuous batching: at most S rows hold a cache slot; a finished
     * row's slot goes to the next waiting prompt */
    int S = s->max_batch > 0 && s->max_batch < B && !s->no_kv_cache ? s->max_batch : B;
    int rc = s_gen_reserve(m, S, maxT);
    if (rc < 0 || (rc = rl_lm_bf16_refresh(m)) < 0)
        return rc;
    rl_lm_gen *g = m->gen;
    g->dev_sample = g->dev != RL_DEVICE_CPU && !s->no_kv_cache &&
                    (s->greedy || !(s->temperature > 0.0f) || (s->top_k <= 0 && !(s->top_p < 1.0f)));
    float inv_temp = s->temperature > 0.0f ? 1.0f / s->temperature : 1.0f;
    int32_t pad = c->pad_token_id >= 0 ? c->pad_token_id : 0;

    s_ext ext = {0};
    rl_rng *rng = malloc(sizeof(rl_rng) * (size_t)B);
    int *rows = malloc(sizeof(int) * ((size_t)B * 3 + (size_t)S));
    int32_t *seq = s->no_kv_cache ? malloc(sizeof(int32_t) * (size_t)B * maxT) : NULL;
    uint8_t *pmask = malloc((size_t)B * P);
    if (!rng || !rows || !pmask || (s->no_kv_cache && !seq)) {
        rc = rl_error_set(RL_ENOMEM, "generate: out of memory");
        goto done;
    }
    int *cur_len = rows + B, *slot_of = rows + 2 * B, *free_slots = rows + 3 * B, nfree = 0;
    int32_t epoch = 0; /* weight switches so far */
    for (int b = 0; b < B; b++) {
        rl_rng_init(&rng[b], s->seed, row_seeds ? row_seeds[b] : (uint64_t)b);
        out_lens[b] = 0;
        cur_len[b] = prompt_lens[b];
        for (int j = 0; j < maxnew; j++) {
            out_tokens[(size_t)b * maxnew + j] = pad;
            if (out_logp)
                out_logp[(size_t)b * maxnew + j] = 0.0f;
            if (out_entropy)
                out_entropy[(size_t)b * maxnew + j] = 0.0f;
            if (s->out_epoch)
                s->out_epoch[(size_t)b * maxnew + j] = 0;
        }
        for (int t = 0; t < P; t++)
            pmask[(size_t)b * P + t] = t < prompt_lens[b];
        if (seq)
            for (int t = 0; t < prompt_lens[b]; t++)
                seq[(size_t)b * maxT + t] = prompts[(size_t)b * P + t];
    }

    /* Prefill: the first S rows' first tokens (every row's when S = B). */
    int n = S, next = S;
    for (int b = 0; b < S; b++)
        rows[b] = slot_of[b] = b;
    if (s->no_kv_cache) {
        if ((rc = s_full_step(m, n, rows, seq, maxT, cur_len, g->logits)) < 0)
            goto done;
    } else {
        if ((rc = s_prefill(m, n, rows, slot_of, 0, P, prompts, prompt_lens, pmask)) < 0)
            goto done;
    }

    while (n > 0) {
        /* Sample one token for each live row (rows are independent). */
        if (g->dev_sample && (rc = s_device_sample(m, s, n, rows, prompt_lens, out_lens, rng,
                                                   inv_temp)) < 0)
            goto done;
        RL_OMP_FOR_IF(!g->dev_sample && n > 1 && V >= 1024)
        for (int i = 0; i < n; i++) {
            int b = rows[i], j = out_lens[b];
            if (prompt_lens[b] + j >= c->max_seq_len)
                continue; /* a prompt that fills the context: no room for a token */
            float lp, ent;
            int tok;
            if (g->dev_sample) {
                tok = g->stok[i];
                memcpy(&lp, &g->stok[g->B + i], sizeof lp);
                memcpy(&ent, &g->stok[2 * g->B + i], sizeof ent);
            } else {
                tok = s_sample(g->logits + (size_t)i * V, V, inv_temp, s, &rng[b],
                               g->cand + (size_t)i * V, &lp, &ent);
            }
            out_tokens[(size_t)b * maxnew + j] = tok;
            if (tok < 0) /* marked; reported below, outside the parallel loop (pad is >= 0) */
                continue;
            if (s->out_epoch)
                s->out_epoch[(size_t)b * maxnew + j] = epoch;
            if (out_logp)
                out_logp[(size_t)b * maxnew + j] = lp;
            if (out_entropy)
                out_entropy[(size_t)b * maxnew + j] = ent;
            out_lens[b] = j + 1;
        }
        /* Keep rows that have room and did not stop. */
        int live = 0;
        int *slots = rows; /* compacted in place, order kept */
        for (int i = 0; i < n; i++) {
            int b = rows[i], j = out_lens[b];
            if (j < maxnew && out_tokens[(size_t)b * maxnew + j] < 0) { /* the marker above */
                rc = rl_error_set(RL_ENUMERIC, "generate: row %d, token %d: the logits are not "
                                               "finite (NaN or Inf weights, or an overflow)", b, j);
                goto done;
            }
            if (j == 0) { /* it sampled nothing */
                free_slots[nfree++] = slot_of[b];
                continue;
            }
            int32_t tok = out_tokens[(size_t)b * maxnew + j - 1];
            int stop = j >= maxnew || prompt_lens[b] + j >= maxT;
            for (int k = 0; k < s->num_stop_tokens && !stop; k++)
                stop = s->stop_tokens[k] == tok;
            if (stop) {
                free_slots[nfree++] = slot_of[b];
                continue;
            }
            slots[live] = b;
            g->slot[live] = slot_of[b];
            g->tok[live] = tok;
            g->pos[live] = prompt_lens[b] + j - 1;
            if (seq)
                seq[(size_t)b * maxT + prompt_lens[b] + j - 1] = tok;
            cur_len[b] = prompt_lens[b] + j;
            live++;
        }
        n = live;
        int switched = 0; /* partial rollouts: new weights between two steps */
        if (n > 0 && s->switch_weights && (switched = s->switch_weights(s->switch_ctx)) != 0) {
            if (switched < 0 || (rc = rl_lm_bf16_refresh(m)) < 0) {
                rc = switched < 0 ? switched : rc;
                goto done;
            }
            epoch++;
            if (!s->no_kv_cache && (rc = s_reprefill(m, n, rows, slot_of, B, P, maxT, maxnew,
                                                      prompts, prompt_lens, out_tokens, out_lens,
                                                      &ext)) < 0)
                goto done;
        }
        if (s->no_kv_cache) {
            if (n > 0 && (rc = s_full_step(m, n, rows, seq, maxT, cur_len, g->logits)) < 0)
                goto done;
            continue;
        }
        if (n > 0 && !switched && (rc = s_decode_step(m, n)) < 0)
            goto done;
        /* waiting prompts take the freed slots: their logits follow the
         * continuing rows' */
        int joined = 0;
        while (next < B && nfree > 0) {
            slot_of[next] = free_slots[--nfree];
            rows[n + joined++] = next++;
        }
        if (joined > 0 &&
            (rc = s_prefill(m, joined, rows + n, slot_of, n, P, prompts, prompt_lens, pmask)) < 0)
            goto done;
        n += joined;
    }
    rc = 0;
done:
    free(rng);
    free(rows);
    free(seq);
    free(pmask);
    free(ext.buf);
    return rc;
}
