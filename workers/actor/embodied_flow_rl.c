/* workers/actor/embodied_flow_rl.c — the embodied track's losses (loss op
 * "flow_rl", method update_flow; contract: workers/flow_rl.h): one
 * optimiser step of FlowSAR (seed 000), FlowIPO (seed 001), flow-SDE GRPO
 * or flow-SDE PPO (with the value head), picked by algorithm.loss_type, with
 * the demonstration anchor; and the value forward for GAE (flow_values).
 *
 * Every loss is a mean over the kept rows (or trained denoising steps) of
 * the WHOLE mini-batch: a micro-batch's local mean is scaled by its share
 * (kept here / global), so W FSDP ranks and any micro-batching give one
 * update. Metrics come back as partial sums (mean × kept rows) that the
 * recipe adds over ranks and divides by the total. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "workers/actor/actor_internal.h"
#include "common/algo/diffusion/diffusion.h"
#include "common/algo/flow/flow.h"
#include "common/nn/models/flow_policy.h"
#include "rlrt/error.h"
#include "common/nn/models/model_device.h"
#include "rlrt/dtype.h"
#include "rlrt/nn/model.h"
#include "rlrt/tensor.h"
#include "rlrt/dataproto.h"
#include "workers/flow_rl.h"

/* metric slots (partial sums) */
enum {
    M_SAR_LOSS, M_SAR_EPOS, M_SAR_ENEG, M_SAR_W, M_SAR_CONTR, M_SAR_KL, M_SAR_SUCC,
    M_IPO_LOSS, M_IPO_VMSE, M_IPO_GAP,
    M_PG_LOSS, M_PG_CLIP, M_PG_KL, M_PG_RATIO, M_STEPS, M_VF_LOSS, M_VF_CLIP,
    M_SAR_LPOS, M_SAR_SIG, M_SAR_FLAT, M_G_RL, M_G_DEMO, M_G_COS,
    M_COUNT
};
static const char *const s_mname[M_COUNT] = {
    "actor/flow_sar_loss", "actor/flow_sar_E_pos", "actor/flow_sar_E_neg", "actor/flow_sar_weight_mean",
    "actor/flow_sar_contrastive", "actor/flow_sar_kl_penalty", "actor/flow_sar_success_ratio",
    "actor/flow_ipo_loss", "actor/velocity_mse", "actor/flow_ipo_target_gap",
    "actor/pg_loss", "actor/pg_clipfrac", "actor/ppo_kl", "actor/ratio_mean", "actor/trained_steps",
    "critic/value_loss", "critic/value_clipfrac",
    "actor/flow_sar_label_pos", "actor/flow_sar_softplus_grad_scale", "actor/flow_sar_softplus_flat",
    "actor/rl_grad_norm", "actor/anchor_grad_norm", "actor/rl_anchor_grad_cos",
};

typedef struct s_fctx {
    rl_flow_rl_config alg;
    rl_flow_sar_config sar;
    int64_t D, N;
    double global_rows, global_steps;
    /* flow_sar / flow_ipo: (B, D) / (B) of the whole call */
    const float *v_old, *t, *w, *labels, *mask;
    float *u;      /* (B, D) u = ε − a, or FlowIPO's target ṽ */
    /* GRPO / PPO */
    const float *old, *adv, *ret, *old_v; /* (B, N), (B), (B), (B) */
    float *advx;                          /* (rows·N) scratch */
    double clip_range;
    double m[M_COUNT];
    double rows;  /* kept rows seen */
    struct s_scaled {      /* the method's loss × algorithm.rl_coef */
        rl_model_loss_fn fn;
        void *ctx;
        double coef;
    } scaled;
    double demo_loss; /* the anchor's plain mean × this rank's rows (0 without it) */
} s_fctx;

static double s_mask_sum(const float *mask, int64_t row0, int64_t rows)
{
    double m = 0;
    for (int64_t r = 0; r < rows; r++)
        m += mask ? (mask[row0 + r] != 0.0f) : 1.0;
    return m;
}

/* The velocity loss's micro-batch: the model's width must be the batch's. */
static int s_vel_width(const s_fctx *c, const rl_model_io *out)
{
    if (out->width[RL_Q_VELOCITY] == c->D)
        return RL_OK;
    return rl_error_set(RL_ESHAPE, "%s: the model's velocity has %lld floats per row, the batch %lld",
                        RL_ACTOR_UPDATE_FLOW, (long long)out->width[RL_Q_VELOCITY], (long long)c->D);
}

/* FlowSAR's or FlowIPO's velocity loss of a micro-batch. */
static int s_vel_loss(void *arg, const rl_model_io *out, rl_model_io *grad, double *loss)
{
    s_fctx *c = arg;
    int64_t rows = out->rows, r0 = out->row0, D = c->D;
    int rc = s_vel_width(c, out);
    if (rc)
        return rc;
    double m = s_mask_sum(c->mask, r0, rows), local;
    const float *v = out->q[RL_Q_VELOCITY], *mask = c->mask ? c->mask + r0 : NULL;
    float *g = grad->q[RL_Q_VELOCITY];
    if (c->alg.loss == RL_FLOW_LOSS_SAR) {
        rl_flow_sar_metrics mt;
        if ((rc = rl_flow_sar_loss(v, c->v_old + r0 * D, c->u + r0 * D, c->w + r0, c->labels + r0, c->t + r0,
                                   mask, rows, D, &c->sar, g, &mt)))
            return rc;
        local = mt.loss;
        if (m > 0) {
            c->m[M_SAR_LOSS] += mt.loss * m;
            c->m[M_SAR_EPOS] += mt.e_pos * m;
            c->m[M_SAR_ENEG] += mt.e_neg * m;
            c->m[M_SAR_W] += mt.weight_mean * m;
            c->m[M_SAR_LPOS] += mt.label_pos * m;
            if (c->sar.variant == RL_FLOW_SAR_SOFTPLUS_KL) {
                c->m[M_SAR_CONTR] += mt.contrastive * m;
                c->m[M_SAR_KL] += mt.kl_penalty * m;
                c->m[M_SAR_SIG] += mt.softplus_grad_scale * m;
                c->m[M_SAR_FLAT] += mt.softplus_flat * m;
            } else {
                c->m[M_SAR_SUCC] += mt.success_ratio * m;
            }
        }
    } else {
        rl_flow_ipo_metrics mt;
        if ((rc = rl_flow_ipo_loss(v, c->u + r0 * D, mask, rows, D, 1, g, &mt)))
            return rc;
        local = mt.loss;
        c->m[M_IPO_LOSS] += mt.loss * m;
        c->m[M_IPO_VMSE] += mt.velocity_mse * m;
    }
    rl_actor_share(g, rows * D, local, m, c->global_rows, loss);
    c->rows += m;
    return RL_OK;
}

/* Clipped PPO over the trained denoising steps (normalised by the global
 * step count) + for actor_critic the clipped value loss over kept rows. */
static int s_pg_loss(void *arg, const rl_model_io *out, rl_model_io *grad, double *loss)
{
    s_fctx *c = arg;
    int64_t N = out->width[RL_Q_LOGP], rows = out->rows, r0 = out->row0, n = rows * N;
    if (N != c->N)
        return rl_error_set(RL_ESHAPE, "%s: %s has %lld steps per row, the chain %lld", RL_ACTOR_UPDATE_FLOW,
                            RL_ACTOR_OLD_LOGP, (long long)c->N, (long long)N);
    const float *mask = out->mask[RL_Q_LOGP];
    float *gm = malloc(sizeof(float) * (size_t)(n ? n : 1));
    if (!gm)
        return rl_error_set(RL_ENOMEM, "out of memory");
    double m = 0;
    for (int64_t r = 0; r < rows; r++) {
        float keep = c->mask ? (c->mask[r0 + r] != 0.0f) : 1.0f;
        for (int64_t k = 0; k < N; k++) {
            c->advx[r * N + k] = c->adv[r0 + r];
            gm[r * N + k] = (mask ? mask[r * N + k] : 1.0f) * keep;
            m += gm[r * N + k] != 0.0f;
        }
    }
    rl_diffusion_grpo_metrics mt;
    int rc = rl_diffusion_grpo_loss(out->q[RL_Q_LOGP], c->old + r0 * N, c->advx, gm, n, c->clip_range, 1e30,
                                    grad->q[RL_Q_LOGP], &mt);
    free(gm);
    if (rc)
        return rc;
    rl_actor_share(grad->q[RL_Q_LOGP], n, mt.loss, m, c->global_steps, loss);
    c->m[M_STEPS] += m;
    c->m[M_PG_LOSS] += mt.loss * m;
    c->m[M_PG_CLIP] += mt.clip_frac * m;
    c->m[M_PG_KL] += mt.approx_kl * m;
    c->m[M_PG_RATIO] += mt.ratio_mean * m;
    c->rows += s_mask_sum(c->mask, r0, rows);
    if (c->alg.loss == RL_FLOW_LOSS_PPO) {
        if (out->width[RL_Q_VALUE] != 1)
            return rl_error_set(RL_ESHAPE, "%s: the value head gives %lld values per row, expected 1",
                                RL_ACTOR_UPDATE_FLOW, (long long)out->width[RL_Q_VALUE]);
        const float *v = out->q[RL_Q_VALUE];
        double vl = 0, vc = 0, kept = 0, cl = c->alg.value_clip;
        for (int64_t r = 0; r < rows; r++) {
            if (c->mask && c->mask[r0 + r] == 0.0f)
                continue;
            double R = c->ret[r0 + r], o = c->old_v[r0 + r], d = v[r] - o;
            double vcl = o + (d < -cl ? -cl : d > cl ? cl : d);
            double a = (v[r] - R) * (v[r] - R), b = (vcl - R) * (vcl - R);
            double g = a >= b ? (v[r] - R) : ((d > -cl && d < cl) ? (vcl - R) : 0.0);
            vl += 0.5 * (a >= b ? a : b);
            vc += b > a;
            kept++;
            grad->q[RL_Q_VALUE][r] = (float)(c->alg.value_coef * g / c->global_rows);
        }
        *loss += c->alg.value_coef * vl / c->global_rows;
        c->m[M_VF_LOSS] += vl;
        c->m[M_VF_CLIP] += vc;
        (void)kept;
    }
    return RL_OK;
}

/* The velocity batch: observations + x_t = (1 − t)·a + t·ε and t. */
static rl_dataproto *s_vel_batch(const rl_dataproto *in, const float *a, const float *eps, const float *t,
                                 int64_t B, int64_t D)
{
    static const char *const obs[3] = {RL_FP_PROPRIO, RL_FP_OBJECT, RL_FP_TASK};
    rl_dataproto *dp = rl_dataproto_select(in, obs, 3, NULL, 0);
    rl_tensor *tx = dp ? rl_dataproto_new_tensor(dp, RL_FP_X_T, RL_F32, 2, (int64_t[]){B, D}) : NULL;
    rl_tensor *tt = tx ? rl_dataproto_new_tensor(dp, RL_FP_T, RL_F32, 1, (int64_t[]){B}) : NULL;
    if (!tt || rl_flow_interp(a, eps, t, B, D, rl_tensor_data(tx), NULL)) {
        rl_dataproto_free(dp);
        return NULL;
    }
    memcpy(rl_tensor_data(tt), t, sizeof(float) * (size_t)B);
    return dp;
}

/* The method's loss × algorithm.rl_coef (loss and every gradient). */
static int s_scaled_loss(void *arg, const rl_model_io *out, rl_model_io *grad, double *loss)
{
    struct s_scaled *w = arg;
    double l = 0;
    int rc = w->fn(w->ctx, out, grad, &l);
    if (rc)
        return rc;
    *loss += w->coef * l;
    for (int k = 0; k < RL_Q_COUNT; k++)
        for (int64_t i = 0; grad->q[k] && i < out->rows * out->width[k]; i++)
            grad->q[k][i] = (float)(w->coef * grad->q[k][i]);
    return RL_OK;
}

/* The demonstration anchor's batch: the RL_FLOW_DEMO_* tensors of `in`
 * under the model's names (B rows; shapes checked by the model and here). */
static rl_dataproto *s_demo_batch(const rl_dataproto *in, int64_t B, int64_t *D, const float **target)
{
    static const char *const from[5] = {RL_FLOW_DEMO_PROPRIO, RL_FLOW_DEMO_OBJECT, RL_FLOW_DEMO_TASK,
                                        RL_FLOW_DEMO_X_T, RL_FLOW_DEMO_T};
    static const char *const to[5] = {RL_FP_PROPRIO, RL_FP_OBJECT, RL_FP_TASK, RL_FP_X_T, RL_FP_T};
    const rl_tensor *tg = rl_dataproto_tensor_shaped(in, RL_FLOW_DEMO_TARGET, RL_F32, 2, (int64_t[]){B, -1});
    if (!tg)
        return NULL;
    *D = tg->shape[1];
    if (!(*target = rl_actor_f32(in, RL_FLOW_DEMO_TARGET, B, *D)))
        return NULL;
    rl_dataproto *dp = rl_dataproto_new();
    for (int k = 0; dp && k < 5; k++) {
        rl_tensor *t = rl_dataproto_tensor((rl_dataproto *)in, from[k]);
        if (!t) {
            rl_error_set(RL_EINVAL, "%s: %s > 0 but the request has no '%s'", RL_ACTOR_UPDATE_FLOW,
                         RL_CFG_PATH(&rl_flow_rl_section, rl_flow_rl_config, demo_coef), from[k]);
            rl_dataproto_free(dp);
            return NULL;
        }
        if (rl_dataproto_add_tensor(dp, to[k], t)) {
            rl_dataproto_free(dp);
            return NULL;
        }
    }
    return dp;
}

static int s_prepare(rl_actor_step *s)
{
    s_fctx *c = s->ctx;
    rl_actor_state *a = s->a;
    const rl_dataproto *in = s->in;
    const rl_flow_rl_config *alg = rl_config_section_get(a->job, &rl_flow_rl_section);
    if (!alg)
        return rl_error_code();
    c->alg = *alg;
    int rc = RL_OK;
    int64_t B = rl_dataproto_rows(in), grows, gsteps = 0;
    if (rl_dataproto_meta_get_int(in, RL_ACTOR_GLOBAL_ROWS, 1, INT64_MAX, &grows))
        return rl_error_code();
    c->global_rows = (double)grows;
    c->sar = rl_flow_rl_sar_loss_config(&c->alg);
    c->clip_range = a->o.clip_high;
    if (!(c->mask = rl_actor_f32(in, RL_FLOW_MASK, B, 0)))
        return rl_error_code();
    rl_model_loss_fn fn;
    if (c->alg.loss == RL_FLOW_LOSS_SAR || c->alg.loss == RL_FLOW_LOSS_IPO) {
        const rl_tensor *ta = rl_dataproto_tensor_shaped(in, RL_FLOW_ACTION, RL_F32, 2, (int64_t[]){B, -1});
        if (!ta)
            return rl_error_code();
        int64_t D = c->D = ta->shape[1];
        const float *act = rl_actor_f32(in, RL_FLOW_ACTION, B, D);
        const float *eps = act ? rl_actor_f32(in, RL_FLOW_EPS, B, D) : NULL;
        c->t = eps ? rl_actor_f32(in, RL_FLOW_T, B, 0) : NULL;
        c->v_old = c->t ? rl_actor_f32(in, RL_FLOW_V_OLD, B, D) : NULL;
        c->w = c->v_old ? rl_actor_f32(in, RL_FLOW_WEIGHTS, B, 0) : NULL;
        if (c->w && c->alg.loss == RL_FLOW_LOSS_SAR)
            c->labels = rl_actor_f32(in, RL_FLOW_LABELS, B, 0);
        if (!c->w || (c->alg.loss == RL_FLOW_LOSS_SAR && !c->labels))
            return rl_error_code();
        for (int64_t b = 0; b < B; b++)
            if (c->t[b] < 0 || c->t[b] > 1)
                return rl_error_set(RL_ERANGE, "tensor '%s' holds %g at [%lld], expected t in [0, 1]", RL_FLOW_T,
                                    (double)c->t[b], (long long)b);
        if (!(c->u = malloc(sizeof(float) * (size_t)(B * D + 1))))
            return rl_error_set(RL_ENOMEM, "actor/%d: out of memory", a->rank);
        rc = rl_flow_interp(act, eps, c->t, B, D, NULL, c->u);
        if (!rc && c->alg.loss == RL_FLOW_LOSS_IPO) {
            /* the ends of the interpolation, u (w = 1) and v_ref (w = 0):
             * mean (u − v_ref)² over the floats, the most w can move ṽ */
            for (int64_t b = 0; b < B; b++) {
                if (c->mask && c->mask[b] == 0.0f)
                    continue;
                double g = 0;
                for (int64_t j = 0; j < D; j++) {
                    double e = (double)c->u[b * D + j] - (double)c->v_old[b * D + j];
                    g += e * e;
                }
                c->m[M_IPO_GAP] += g / (double)D;
            }
            rc = rl_flow_ipo_target(c->u, c->v_old, c->w, B, D, c->u); /* ṽ = w·u + (1 − w)·v_ref */
        }
        if (!rc && !(s->batch = s_vel_batch(in, act, eps, c->t, B, D)))
            rc = rl_error_code();
        if (rc)
            return rc;
        s->want = RL_Q_BIT(RL_Q_VELOCITY);
        fn = s_vel_loss;
    } else {
        if (rl_dataproto_meta_get_int(in, RL_ACTOR_GLOBAL_TOKENS, 0, INT64_MAX, &gsteps))
            return rl_error_code();
        c->global_steps = (double)gsteps;
        const rl_tensor *to = rl_dataproto_tensor_shaped(in, RL_ACTOR_OLD_LOGP, RL_F32, 2, (int64_t[]){B, -1});
        if (!to)
            return rl_error_code();
        c->N = to->shape[1];
        c->old = rl_actor_f32(in, RL_ACTOR_OLD_LOGP, B, c->N);
        c->adv = c->old ? rl_actor_f32(in, RL_ACTOR_ADVANTAGES, B, 0) : NULL;
        if (!c->adv)
            return rl_error_code();
        s->want = RL_Q_BIT(RL_Q_LOGP);
        if (c->alg.loss == RL_FLOW_LOSS_PPO) {
            c->ret = rl_actor_f32(in, RL_FLOW_RETURNS, B, 0);
            c->old_v = c->ret ? rl_actor_f32(in, RL_FLOW_OLD_VALUES, B, 0) : NULL;
            if (!c->old_v)
                return rl_error_code();
            s->want |= RL_Q_BIT(RL_Q_VALUE);
        }
        int64_t mb = a->o.micro_batch > 0 && a->o.micro_batch < B ? a->o.micro_batch : (B ? B : 1);
        if (!(c->advx = malloc(sizeof(float) * (size_t)(mb * (c->N > 0 ? c->N : 1)))))
            return rl_error_set(RL_ENOMEM, "actor/%d: out of memory", a->rank);
        fn = s_pg_loss;
    }
    c->scaled = (struct s_scaled){fn, c, c->alg.rl_coef};
    s->loss = c->alg.rl_coef == 1.0 ? fn : s_scaled_loss;
    s->loss_ctx = c->alg.rl_coef == 1.0 ? (void *)c : &c->scaled;
    return RL_OK;
}

/* The demonstration anchor (algorithm.demo_coef > 0): its gradients add up
 * with the method's before the one step. Diagnostics (this rank's local
 * gradients, before the FSDP reduction; exact with one actor rank): the
 * norms of the method's gradient (× rl_coef) and of the anchor's, and
 * their cosine (0 when either is zero), as partial sums × kept rows. */
static int s_extra(rl_actor_step *s)
{
    s_fctx *c = s->ctx;
    if (!(c->alg.demo_coef > 0))
        return RL_OK;
    rl_model *pm = s->a->policy;
    int64_t np = rl_model_num_params(pm);
    const rl_device dev = rl_model_device(pm);
    const size_t bytes = sizeof(float) * (size_t)(np > 0 ? np : 0);
    float *g = rl_model_grads(pm), *g_rl = g && np > 0 ? malloc(bytes) : NULL;
    /* on a device the diagnostics read host copies of the gradients */
    float *g_all = g_rl && dev != RL_DEVICE_CPU ? malloc(bytes) : NULL;
    if (g_rl && dev != RL_DEVICE_CPU &&
        (!g_all || rl_device_copy(RL_DEVICE_CPU, g_rl, dev, g, bytes) || rl_device_sync(dev))) {
        free(g_rl); /* no diagnostics, the step goes on */
        free(g_all);
        g_rl = g_all = NULL;
    } else if (g_rl && dev == RL_DEVICE_CPU) {
        memcpy(g_rl, g, bytes);
    }
    int64_t Dd = 0;
    const float *target = NULL;
    rl_dataproto *db = s_demo_batch(s->in, rl_dataproto_rows(s->in), &Dd, &target);
    rl_actor_fm_ctx fc = {target, c->global_rows * (double)Dd / c->alg.demo_coef, Dd, RL_FLOW_DEMO_TARGET};
    double demo = 0;
    int rc = db ? rl_model_forward_backward(s->a->policy, db, RL_Q_BIT(RL_Q_VELOCITY), &s->pass, rl_actor_fm_loss,
                                            &fc, &demo)
                : rl_error_code();
    rl_dataproto_free(db);
    s->value += demo;
    c->demo_loss = demo * (c->global_rows / c->alg.demo_coef); /* the plain mean × this rank's rows */
    rl_flow_grad_split gs;
    const float *g_total = rl_model_grads(pm);
    if (!rc && g_all && (rl_device_copy(RL_DEVICE_CPU, g_all, dev, g_total, bytes) || rl_device_sync(dev)))
        rc = rl_error_code();
    if (g_all)
        g_total = g_all;
    if (!rc && g_rl && !rl_flow_grad_split_get(g_rl, g_total, np, &gs)) {
        c->m[M_G_RL] = gs.norm_a * c->rows;
        c->m[M_G_DEMO] = gs.norm_b * c->rows;
        c->m[M_G_COS] = (isfinite(gs.cos) ? gs.cos : 0.0) * c->rows;
    }
    free(g_rl);
    free(g_all);
    return rc;
}

static json_t *s_reply(const rl_actor_step *s)
{
    const s_fctx *c = s->ctx;
    json_t *meta = json_pack("{s:f}", RL_FLOW_M_ROWS, c->rows);
    for (int k = 0; meta && k < M_COUNT; k++)
        json_object_set_new(meta, s_mname[k], json_real(c->m[k]));
    if (meta) /* 0 without the anchor */
        json_object_set_new(meta, RL_FLOW_M_DEMO_LOSS, json_real(c->demo_loss));
    return meta;
}

static void s_release(void *ctx)
{
    s_fctx *c = ctx;
    free(c->u);
    free(c->advx);
}

const rl_actor_loss_op rl_actor_loss_flow_rl = {RL_ACTOR_LOSS_FLOW_RL, RL_ACTOR_UPDATE_FLOW, sizeof(s_fctx), 0,
    .prepare = s_prepare, .extra = s_extra, .reply = s_reply, .release = s_release};

int rl_actor_flow_values(rl_worker_ctx *ctx, const rl_dataproto *in, rl_dataproto **out)
{
    rl_actor_state *a = rl_actor_get(ctx, RL_ACTOR_FLOW_VALUES);
    if (!a)
        return rl_error_code();
    static const char *const obs[3] = {RL_FP_PROPRIO, RL_FP_OBJECT, RL_FP_TASK};
    rl_dataproto *req = rl_dataproto_select(in, obs, 3, NULL, 0), *fo = NULL;
    rl_model_pass pass = {.temperature = 1.0, .micro_batch = a->o.micro_batch};
    int rc = req ? rl_model_forward(a->policy, req, RL_Q_BIT(RL_Q_VALUE), &pass, &fo) : rl_error_code();
    rl_dataproto_free(req);
    if (rc)
        return rl_error_wrap(rc, "actor/%d %s", ctx->rank, RL_ACTOR_FLOW_VALUES);
    int64_t B = rl_dataproto_rows(in);
    const rl_tensor *tv = rl_dataproto_tensor_shaped(fo, rl_quantity_name(RL_Q_VALUE), RL_F32, 2,
                                                     (int64_t[]){B, 1});
    rl_dataproto *o = tv ? rl_dataproto_new() : NULL;
    rl_tensor *t = o ? rl_dataproto_new_tensor(o, RL_FLOW_VALUES, RL_F32, 1, (int64_t[]){B}) : NULL;
    if (t)
        memcpy(rl_tensor_data(t), rl_tensor_data(tv), sizeof(float) * (size_t)B);
    rl_dataproto_free(fo);
    if (!t) {
        rl_dataproto_free(o);
        return rl_error_code();
    }
    *out = o;
    return RL_OK;
}
