/* transformer_internal.h — the rl_lm struct, shared by transformer.c and
 * generate.c (private to common/nn). */
#ifndef RLRT_NN_TRANSFORMER_INTERNAL_H
#define RLRT_NN_TRANSFORMER_INTERNAL_H

#include "common/nn/models/lm/transformer.h"

/* Offsets (in floats) of one layer's views in the flat buffer; -1 = absent. */
typedef struct rl_lm_layer_off {
    int64_t ln1, wq, bq, wk, bk, wv, bv, wo, ln2, wg, wu, wd;
} rl_lm_layer_off;

/* Views into the activation arena for the current (B,T); N = B·T.
 * Per-layer arrays are stacked layer-major. */
typedef struct rl_lm_acts {
    float *x;               /* (L+1, N, d) residual stream at each layer input */
    float *ln1, *rstd1;     /* (L, N, d), (L, N) */
    float *q, *k, *v;       /* (L, N, qd), (L, N, kvd) ×2 — q, k after RoPE */
    float *lse;             /* (L, B, H, T) attention log-sum-exp per query row */
    float *atty;            /* (L, N, qd) attention output before o_proj */
    float *xmid;            /* (L, N, d) residual after attention */
    float *ln2, *rstd2;     /* (L, N, d), (L, N) */
    float *gate, *up, *hmid; /* (L, N, I) */
    float *lnf, *rstdf;     /* (N, d), (N) */
    float *logits;          /* (N, V) raw */
    float *vlse, *ent, *lp, *val; /* (N) per row, row n predicts token n+1 (vocab lse) */
    /* backward scratch */
    float *dx, *dxmid, *dln, *datty, *dq, *dk, *dv, *dgate, *dup, *dh, *dlogits;
    float *dlp, *dent, *dval;
    int32_t *tokens, *target, *pos; /* (N) */
    uint8_t *mask;                  /* (N) */
} rl_lm_acts;

typedef struct rl_lm_gen rl_lm_gen; /* generation scratch (generate.c) */

struct rl_lm {
    rl_lm_config cfg;
    rl_device dev;
    const rl_nn_ops *ops;
    int hd, qd, kvd;
    rl_param_manifest *man;
    float *params, *grads;
    rl_precision prec;  /* how the linear layers multiply (rl_lm_set_precision) */
    uint16_t *w16;      /* bf16: the weights rounded to bf16 (on dev, num_params),
                         * made from params by rl_lm_bf16_refresh; NULL in fp32 */
    rl_lm_layer_off *layer;
    int64_t off_embed, off_normf, off_lmhead, off_vw, off_vb;
    float *act;         /* activations: on dev */
    int64_t act_cap;
    void *ibuf;         /* tokens, targets, positions, mask: host (prepare and the
                         * per-token outputs read them) */
    void *dibuf;        /* their copy on dev (NULL on the CPU: a's index pointers are ibuf's) */
    int64_t ibuf_cap;
    int32_t *h_target;  /* the host targets (== a.target on the CPU) */
    float *h_out;       /* (4N) host staging of lp/ent/val and their gradients (CUDA) */
    int64_t h_out_cap;
    rl_lm_acts a;
    int fB, fT, have_fwd;
    float inv_temp;
    /* generation scratch, owned by generate.c, which sets gen_free beside
     * it (so the transformer frees it without calling into generation) */
    rl_lm_gen *gen;
    void (*gen_free)(rl_lm *m);
};

int rl_lm_prepare(rl_lm *m, int B, int T, const int32_t *tokens, const uint8_t *mask,
                  int tstride);
int rl_lm_forward_raw(rl_lm *m, int B, int T);
int rl_lm_reserve(rl_lm *m, int B, int T);

/* bf16: rounds the parameters into m->w16 (allocated on first use), which
 * every linear layer of the calls that follow reads until the next refresh.
 * Called at the start of each forward and each generate, so whatever wrote
 * the parameters (an optimiser step, a load, a weight sync, a memcpy) is
 * seen, and the backward uses the weights its forward used. No-op in fp32. */
int rl_lm_bf16_refresh(rl_lm *m);

/* One linear layer of the model whose weight sits at offset woff of the
 * parameters, in the model's precision: the fp32 kernel on m->params or the
 * bf16 one on m->w16. 0 or a negative rl_status. */
static inline int rl_lm_lin_fwd(rl_lm *m, float *out, const float *inp, int64_t woff,
                                const float *b, int N, int C, int OC)
{
    if (m->prec == RL_PRECISION_BF16)
        return m->ops->linear_forward_bf16(out, inp, m->w16 + woff, b, N, C, OC);
    m->ops->linear_forward(out, inp, m->params + woff, b, N, C, OC);
    return 0;
}

static inline int rl_lm_lin_bwd(rl_lm *m, float *dinp, float *dw, float *db, const float *dout,
                                const float *inp, int64_t woff, int N, int C, int OC)
{
    if (m->prec == RL_PRECISION_BF16)
        return m->ops->linear_backward_bf16(dinp, dw, db, dout, inp, m->w16 + woff, N, C, OC);
    m->ops->linear_backward(dinp, dw, db, dout, inp, m->params + woff, N, C, OC);
    return 0;
}

#endif
