/* flow_policy.c — the flow-matching action-chunk policy kind of rl_model
 * (see common/nn/models/flow_policy.h): the observation encoder, the shared velocity
 * trunk (flow_mlp_internal.h), the value head, the flow-matching / SDE-chain
 * / value quantities with their backward, ODE/SDE sampling and the model:
 * section. */
#include "common/nn/models/flow_policy.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/core/rng.h"
#include "common/nn/engine/ops.h"
#include "common/nn/models/model_device.h"
#include "common/nn/models/flow_chain_internal.h"
#include "common/nn/models/flow_mlp_internal.h"
#include "common/schema/flow_policy.h"
#include "common/schema/model.h"
#include "common/sde/flow_step.h"
#include "rlrt/error.h"

#define S_OBS (RL_FP_PROPRIO_DIM + RL_FP_OBJECT_DIM) /* 137 */

/* The observation encoder's activations over n items (one block of
 * floats and the tasks), on the model's device (dev). */
typedef struct s_enc {
    int64_t cap, n;
    rl_device dev;
    float *obs;      /* (n, 137) normalised; the start of the block */
    float *e1, *s1;  /* (n, H) obs_enc.0 output, silu of it */
    float *enc;      /* (n, H) obs_enc.1 output */
    float *senc;     /* (n, H) silu(enc) (value path) */
    float *d1, *d2;  /* (n, H) backward scratch */
    float *temb;     /* (n, H) task.embedding[task] */
    int32_t *task;   /* (n) */
    float *hobs;     /* (n, 137) the raw observations on the host (a device only; the CPU: obs) */
    int32_t *htask;  /* (n) the tasks on the host (a device only; the CPU: task) */
} s_enc;

/* On a device: the host arrays of a velocity pass (x, t, dL/dv in; v
 * out), (n, D) or (n), and of a value pass (dL/dvalue in; value out), (n):
 * two blocks, so a value forward that grows its own never frees the x the
 * trunk keeps for its backward. */
typedef struct s_io {
    int64_t cap, vcap;
    float *x, *t, *v, *gv;
    float *val, *gval;
} s_io;

typedef struct s_fp {
    rl_model_base base;             /* the views (s_from_config) */
    rl_model_flow_policy_config v;  /* the section as read */
    rl_flow_policy_config c;
    int64_t D;
    rl_flow_mlp t;
    int64_t mean, std, e0w, e0b, e1w, e1b, emb, vw, vb; /* offsets */
    s_enc ev; /* the velocity path's encoder */
    s_enc vv; /* the value path's encoder */
    s_io io;  /* a device's copies of a pass's host arrays */
} s_fp;

static const rl_model_ops s_ops;

static s_fp *s_of(rl_model *m) { return (s_fp *)m; }

/* its model.* sections (rl_model_kind.sections) */
static const rl_config_section *const s_sections[] = {&rl_model_base_section, &rl_model_flow_policy_section,
                                                      NULL};

const rl_flow_policy_config *rl_flow_policy_get_config(const rl_model *m)
{
    return m && m->ops == &s_ops ? &((const s_fp *)m)->c : NULL;
}

int64_t rl_flow_policy_dim(const rl_flow_policy_config *c)
{
    return (int64_t)c->chunks * RL_FP_ACTION_DIM;
}

int rl_flow_policy_set_obs_norm(rl_model *mm, const float *mean, const float *std)
{
    if (!mm || mm->ops != &s_ops)
        return rl_error_set(RL_EINVAL, "rl_flow_policy_set_obs_norm: not a flow_policy model");
    for (int i = 0; i < S_OBS; i++) {
        if (!isfinite(mean[i]))
            return rl_error_set(RL_ENUMERIC, "flow_policy obs_norm: mean[%d] is %g", i,
                                (double)mean[i]);
        if (!(std[i] > 0.0f) || !isfinite(std[i]))
            return rl_error_set(RL_ERANGE, "flow_policy obs_norm: std[%d] is %g, must be > 0", i,
                                (double)std[i]);
    }
    s_fp *m = s_of(mm);
    int rc = rl_model_copy_in(m->base.dev, m->base.params + m->mean, mean, sizeof(float) * S_OBS);
    if (!rc)
        rc = rl_model_copy_in(m->base.dev, m->base.params + m->std, std, sizeof(float) * S_OBS);
    return rc;
}

/* ---- the network ------------------------------------------------------------------------ */

/* Frees the activations; the encoder stays on its device. */
static void s_enc_free(s_enc *e)
{
    rl_device dev = e->dev;
    rl_model_floats_free(dev, e->obs);
    if (dev == RL_DEVICE_CPU)
        free(e->task);
    else
        rl_device_free(dev, e->task);
    free(e->hobs);
    free(e->htask);
    memset(e, 0, sizeof *e);
    e->dev = dev;
}

static int s_enc_reserve(s_enc *e, int64_t n, int64_t H)
{
    if (n < 1)
        n = 1;
    if (n <= e->cap)
        return RL_OK;
    s_enc_free(e);
    size_t nH = (size_t)n * (size_t)H;
    float **const arrays[8] = {&e->obs, &e->e1, &e->s1, &e->enc, &e->senc, &e->d1, &e->d2, &e->temb};
    const size_t counts[8] = {(size_t)n * S_OBS, nH, nH, nH, nH, nH, nH, nH};
    int rc = rl_model_floats_on(e->dev, arrays, counts, 8, "flow_policy");
    if (!rc && e->dev == RL_DEVICE_CPU) {
        if (!(e->task = malloc(sizeof(int32_t) * (size_t)n)))
            rc = rl_error_set(RL_ENOMEM, "flow_policy: out of memory for %lld rows of activations", (long long)n);
        e->hobs = NULL;
    } else if (!rc) {
        e->task = rl_device_alloc_for(e->dev, sizeof(int32_t) * (size_t)n, RL_MEM_ACTIVATIONS);
        e->hobs = malloc(sizeof(float) * (size_t)n * S_OBS);
        e->htask = malloc(sizeof(int32_t) * (size_t)n);
        if (!e->task || !e->hobs || !e->htask)
            rc = rl_error_set(RL_ENOMEM, "flow_policy: out of memory for %lld rows of activations on %s",
                              (long long)n, rl_device_name(e->dev));
    }
    if (rc) {
        s_enc_free(e);
        return rc;
    }
    e->cap = n;
    return RL_OK;
}

static void s_io_free(s_io *io, rl_device dev)
{
    rl_model_floats_free(dev, io->x);
    rl_model_floats_free(dev, io->val);
    memset(io, 0, sizeof *io);
}

/* A device's copies of n rows of a velocity pass (value = 0) or a value
 * pass (value = 1); nothing on the CPU. */
static int s_io_reserve(s_fp *m, int64_t n, int value)
{
    s_io *io = &m->io;
    if (m->base.dev == RL_DEVICE_CPU || n <= (value ? io->vcap : io->cap))
        return RL_OK;
    const size_t nD = (size_t)n * (size_t)m->D, n1 = (size_t)n;
    int rc;
    if (value) {
        rl_model_floats_free(m->base.dev, io->val);
        float **const arrays[2] = {&io->val, &io->gval};
        const size_t counts[2] = {n1, n1};
        rc = rl_model_floats_on(m->base.dev, arrays, counts, 2, "flow_policy");
        io->vcap = rc ? 0 : n;
    } else {
        rl_model_floats_free(m->base.dev, io->x);
        float **const arrays[4] = {&io->x, &io->t, &io->v, &io->gv};
        const size_t counts[4] = {nD, n1, nD, nD};
        rc = rl_model_floats_on(m->base.dev, arrays, counts, 4, "flow_policy");
        io->cap = rc ? 0 : n;
    }
    return rc;
}

/* The observations of a batch (checked by s_obs_read). */
typedef struct s_obs {
    int64_t B;
    const float *prop, *obj;
    const int64_t *task;
} s_obs;

/* enc (n, H) of the items whose batch rows are rows[i] (NULL: item i is row
 * r0 + i); keeps the activations in e. */
static int s_enc_forward(s_fp *m, s_enc *e, const s_obs *ob, int64_t n, int64_t r0,
                         const int64_t *rows)
{
    const int H = m->c.hidden;
    int rc = s_enc_reserve(e, n, H);
    if (rc)
        return rc;
    const float *P = m->base.params;
    const rl_nn_ops *nn = m->base.nn;
    const int cpu = e->dev == RL_DEVICE_CPU;
    float *ho = cpu ? e->obs : e->hobs;
    int32_t *ht = cpu ? e->task : e->htask;
    e->n = n;
    /* the raw observations gathered on the host, then normalised (and
     * clamped: the inputs, not parameters, so no gradient to route) where
     * the network runs */
    for (int64_t i = 0; i < n; i++) {
        int64_t b = rows ? rows[i] : r0 + i;
        float *o = ho + i * S_OBS;
        memcpy(o, ob->prop + b * RL_FP_PROPRIO_DIM, sizeof(float) * RL_FP_PROPRIO_DIM);
        memcpy(o + RL_FP_PROPRIO_DIM, ob->obj + b * RL_FP_OBJECT_DIM, sizeof(float) * RL_FP_OBJECT_DIM);
        ht[i] = (int32_t)ob->task[b];
    }
    if (!cpu && ((rc = rl_model_copy_in(e->dev, e->obs, ho, sizeof(float) * (size_t)(n * S_OBS))) ||
                 (rc = rl_model_copy_in(e->dev, e->task, ht, sizeof(int32_t) * (size_t)n))))
        return rc;
    nn->standardize(e->obs, e->obs, P + m->mean, P + m->std, (float)m->c.obs_clip, (int)n, S_OBS);
    nn->linear_forward(e->e1, e->obs, P + m->e0w, P + m->e0b, (int)n, S_OBS, H);
    nn->silu_forward(e->s1, e->e1, n * H);
    nn->linear_forward(e->enc, e->s1, P + m->e1w, P + m->e1b, (int)n, H, H);
    /* the task's row of task.embedding, for the caller to add */
    nn->embedding_forward(e->temb, e->task, P + m->emb, (int)n, H);
    return RL_OK;
}

/* Accumulates the encoder's gradients for denc (n, H) (obs_norm: none). */
static void s_enc_backward(s_fp *m, s_enc *e, const float *denc)
{
    const int H = m->c.hidden, N = (int)e->n;
    const int64_t nH = e->n * H;
    const float *P = m->base.params;
    float *G = m->base.grads;
    const rl_nn_ops *nn = m->base.nn;
    rl_device_zero(e->dev, e->d1, sizeof(float) * (size_t)nH);
    nn->linear_backward(e->d1, G + m->e1w, G + m->e1b, denc, e->s1, P + m->e1w, N, H, H);
    rl_device_zero(e->dev, e->d2, sizeof(float) * (size_t)nH);
    nn->silu_backward(e->d2, e->d1, e->e1, nH);
    nn->linear_backward(NULL, G + m->e0w, G + m->e0b, e->d2, e->obs, P + m->e0w, N, S_OBS, H);
}

/* v (n, D) for the items (batch row rows[i] or r0 + i, x (n, D), t (n));
 * keeps the activations (m->ev, m->t). x, tt and v are host arrays: on a
 * device they are copied in and out (m->io). */
static int s_vel_forward(s_fp *m, const s_obs *ob, int64_t n, int64_t r0, const int64_t *rows,
                         const float *x, const float *tt, float *v)
{
    const int H = m->c.hidden;
    const int64_t nH = n * H, D = m->D;
    const rl_device dev = m->base.dev;
    int rc = s_enc_forward(m, &m->ev, ob, n, r0, rows);
    if (!rc)
        rc = rl_flow_mlp_reserve(&m->t, n, "flow_policy");
    if (!rc)
        rc = s_io_reserve(m, n, 0);
    if (rc)
        return rc;
    const float *dx = x, *dt = tt;
    float *dv = v;
    if (dev != RL_DEVICE_CPU) {
        dx = m->io.x;
        dt = m->io.t;
        dv = m->io.v;
        if ((rc = rl_model_copy_in(dev, m->io.x, x, sizeof(float) * (size_t)(n * D))) ||
            (rc = rl_model_copy_in(dev, m->io.t, tt, sizeof(float) * (size_t)n)))
            return rc;
    }
    const float *P = m->base.params;
    const rl_nn_ops *nn = m->base.nn;
    rl_flow_mlp_cond(&m->t, P, n, dt);
    /* cond += enc + task.embedding[task] (the pair summed first) */
    nn->add_inplace(m->ev.temb, m->ev.enc, nH);
    nn->add_inplace(m->t.cond, m->ev.temb, nH);
    rl_flow_mlp_trunk(&m->t, P, dx, dv);
    return dev == RL_DEVICE_CPU ? RL_OK : rl_model_copy_out(dev, v, dv, sizeof(float) * (size_t)(n * D));
}

/* Accumulates the gradients of Σ dv·v for the last s_vel_forward (dv: a
 * host array). */
static int s_vel_backward(s_fp *m, const float *dv)
{
    const rl_device dev = m->base.dev;
    if (dev != RL_DEVICE_CPU) {
        int rc = rl_model_copy_in(dev, m->io.gv, dv, sizeof(float) * (size_t)(m->t.n * m->D));
        if (rc)
            return rc;
        dv = m->io.gv;
    }
    float *dcond = rl_flow_mlp_backward(&m->t, m->base.params, m->base.grads, dv);
    m->base.nn->embedding_backward(m->base.grads + m->emb, dcond, m->ev.task, (int)m->t.n, m->c.hidden);
    s_enc_backward(m, &m->ev, dcond);
    return RL_OK;
}

/* value (n) of rows [r0, r0 + n) into a host array; keeps the
 * activations (m->vv). */
static int s_value_forward(s_fp *m, const s_obs *ob, int64_t r0, int64_t n, float *value)
{
    const int H = m->c.hidden;
    const rl_device dev = m->base.dev;
    const rl_nn_ops *nn = m->base.nn;
    int rc = s_enc_forward(m, &m->vv, ob, n, r0, NULL);
    if (!rc)
        rc = s_io_reserve(m, n, 1);
    if (rc)
        return rc;
    float *dval = dev == RL_DEVICE_CPU ? value : m->io.val;
    /* the critic knows its task: enc + task.embedding[task], in place (the
     * encoder's backward does not read enc) */
    nn->add_inplace(m->vv.enc, m->vv.temb, n * H);
    nn->silu_forward(m->vv.senc, m->vv.enc, n * H);
    nn->linear_forward(dval, m->vv.senc, m->base.params + m->vw, m->base.params + m->vb, (int)n, H, 1);
    return dev == RL_DEVICE_CPU ? RL_OK : rl_model_copy_out(dev, value, dval, sizeof(float) * (size_t)n);
}

/* Accumulates the gradients of Σ dvalue·value (dvalue: a host array). */
static int s_value_backward(s_fp *m, const float *dvalue)
{
    const int H = m->c.hidden, N = (int)m->vv.n;
    const int64_t nH = m->vv.n * H;
    const rl_device dev = m->base.dev;
    const rl_nn_ops *nn = m->base.nn;
    float *ds = m->vv.d1, *denc = m->vv.d2;
    if (dev != RL_DEVICE_CPU) {
        int rc = rl_model_copy_in(dev, m->io.gval, dvalue, sizeof(float) * (size_t)N);
        if (rc)
            return rc;
        dvalue = m->io.gval;
    }
    if (m->c.detach_critic) { /* model.detach_critic_input: the head alone learns */
        nn->linear_backward(NULL, m->base.grads + m->vw, m->base.grads + m->vb, dvalue, m->vv.senc,
                            m->base.params + m->vw, N, H, 1);
        return RL_OK;
    }
    rl_device_zero(dev, ds, sizeof(float) * (size_t)nH);
    nn->linear_backward(ds, m->base.grads + m->vw, m->base.grads + m->vb, dvalue, m->vv.senc,
                        m->base.params + m->vw, N, H, 1);
    /* s_enc_backward reuses d1/d2: move denc into senc's buffer first */
    rl_device_zero(dev, denc, sizeof(float) * (size_t)nH);
    nn->silu_backward(denc, ds, m->vv.enc, nH);
    int rc = rl_device_copy(dev, m->vv.senc, dev, denc, sizeof(float) * (size_t)nH);
    if (rc)
        return rc;
    nn->embedding_backward(m->base.grads + m->emb, m->vv.senc, m->vv.task, N, H);
    s_enc_backward(m, &m->vv, m->vv.senc);
    return RL_OK;
}

/* ---- batch checks ----------------------------------------------------------------------------- */

static int s_obs_read(const s_fp *m, const rl_dataproto *in, const char *what, s_obs *ob)
{
    const int64_t dp[2] = {-1, RL_FP_PROPRIO_DIM};
    const rl_tensor *tp = rl_model_input(in, what, RL_FP_PROPRIO, RL_F32, 2, dp);
    if (!tp)
        return rl_error_code();
    ob->B = tp->shape[0];
    const int64_t dob[2] = {ob->B, RL_FP_OBJECT_DIM}, dt[1] = {ob->B};
    const rl_tensor *to = rl_model_input(in, what, RL_FP_OBJECT, RL_F32, 2, dob);
    const rl_tensor *tt = to ? rl_model_input(in, what, RL_FP_TASK, RL_I64, 1, dt) : NULL;
    if (!tt)
        return rl_error_code();
    ob->prop = rl_tensor_data((rl_tensor *)tp);
    ob->obj = rl_tensor_data((rl_tensor *)to);
    ob->task = rl_tensor_data((rl_tensor *)tt);
    int rc = rl_model_input_finite(what, RL_FP_PROPRIO, ob->prop, ob->B * RL_FP_PROPRIO_DIM);
    if (!rc)
        rc = rl_model_input_finite(what, RL_FP_OBJECT, ob->obj, ob->B * RL_FP_OBJECT_DIM);
    for (int64_t b = 0; !rc && b < ob->B; b++)
        if (ob->task[b] < 0 || ob->task[b] >= m->c.num_tasks)
            rc = rl_error_set(RL_ERANGE, "%s: %s[%lld] = %lld outside [0, %d) (%s)",
                              what, RL_FP_TASK, (long long)b, (long long)ob->task[b],
                              m->c.num_tasks,
                              RL_CFG_PATH(&rl_model_flow_policy_section, rl_model_flow_policy_config,
                                          num_tasks));
    return rc;
}

/* A recorded chain: the actions' states on the time grid, re-scored with
 * the flow-SDE step. */
static int s_sde_logprob(const float *x, const float *v, const float *x_next, const float *t,
                         const float *t_next, double noise, int64_t n, int64_t d, float *logp,
                         const float *grad_logp, float *grad_v)
{
    return rl_flow_step_logprob(RL_FLOW_STEP_SDE, x, v, x_next, t, t_next, noise, n, d, logp, grad_logp,
                                grad_v);
}

static const rl_flow_chain_kind s_chain_kind = {RL_FP_CHAIN, RL_FP_TIMES, RL_FP_NOISE_LEVEL,
                                                RL_FP_STEP_MASK, s_sde_logprob};

/* The grid of every row decreases strictly within [0, 1]; the noise levels
 * are finite and >= 0; the mask is finite. */
static int s_chain_check(const rl_flow_chain *c, const char *what)
{
    int rc = c->mask ? rl_model_input_finite(what, RL_FP_STEP_MASK, c->mask, c->B * c->N) : RL_OK;
    for (int64_t b = 0; !rc && b < c->B; b++) {
        if (!(c->noise[b] >= 0.0f && isfinite(c->noise[b])))
            rc = rl_error_set(RL_ERANGE, "%s: %s[%lld] = %g, must be finite and >= 0", what,
                              RL_FP_NOISE_LEVEL, (long long)b, (double)c->noise[b]);
        const float *g = c->t + b * (c->N + 1);
        for (int64_t k = 0; !rc && k <= c->N; k++)
            if (!(g[k] >= 0.0f && g[k] <= 1.0f) || (k > 0 && !(g[k] < g[k - 1])))
                rc = rl_error_set(RL_ERANGE,
                                  "%s: %s[%lld, %lld] = %g: the grid must decrease strictly "
                                  "within [0, 1]",
                                  what, RL_FP_TIMES, (long long)b, (long long)k, (double)g[k]);
    }
    return rc;
}

/* ---- forward / forward_backward ------------------------------------------------------------ */

static int s_check_want(unsigned want, const char *what)
{
    unsigned ok = RL_Q_BIT(RL_Q_LOGP) | RL_Q_BIT(RL_Q_VELOCITY) | RL_Q_BIT(RL_Q_VALUE);
    unsigned both = RL_Q_BIT(RL_Q_LOGP) | RL_Q_BIT(RL_Q_VELOCITY);
    if (!want || (want & ~ok) || (want & both) == both)
        return rl_error_set(RL_EUNSUPPORTED,
                            "%s: a flow_policy pass computes velocity (flow matching) or logp (an "
                            "SDE chain), optionally with value, got mask 0x%x",
                            what, want);
    return RL_OK;
}

/* What one pass reads and the buffers of one micro-batch. */
typedef struct s_pass {
    s_fp *m;
    s_obs ob;
    const float *x, *tt; /* velocity */
    rl_flow_chain c;     /* logp */
    int64_t mb;
    float *v, *gv, *val, *gval; /* (mb, D), (mb, 1) */
    rl_flow_work w;
} s_pass;

static void s_pass_free(s_pass *p)
{
    free(p->v);
    free(p->gv);
    free(p->val);
    free(p->gval);
    rl_flow_work_free(&p->w);
}

static int s_pass_open(s_fp *m, const rl_dataproto *batch, unsigned want,
                       const rl_model_pass *pass, const char *what, s_pass *p)
{
    memset(p, 0, sizeof *p);
    p->m = m;
    int rc = s_check_want(want, what);
    if (!rc)
        rc = s_obs_read(m, batch, what, &p->ob);
    if (!rc && (want & RL_Q_BIT(RL_Q_VELOCITY)))
        rc = rl_flow_fm_read(batch, what, RL_FP_X_T, RL_FP_T, p->ob.B, m->D, &p->x, &p->tt);
    if (!rc && (want & RL_Q_BIT(RL_Q_LOGP)) &&
        !(rc = rl_flow_chain_read(batch, what, &s_chain_kind, p->ob.B, m->D, &p->c)))
        rc = s_chain_check(&p->c, what);
    if (rc)
        return rc;
    int64_t mb = p->mb = rl_model_micro_rows(pass, p->ob.B), D = m->D;
    p->v = malloc(sizeof(float) * (size_t)(mb * D));
    p->gv = malloc(sizeof(float) * (size_t)(mb * D));
    p->val = malloc(sizeof(float) * (size_t)mb);
    p->gval = malloc(sizeof(float) * (size_t)mb);
    if (!p->v || !p->gv || !p->val || !p->gval)
        return rl_error_set(RL_ENOMEM, "%s: out of memory", what);
    if (want & RL_Q_BIT(RL_Q_LOGP))
        return rl_flow_work_alloc(&p->w, mb, p->c.N, D, "flow_policy");
    return RL_OK;
}

/* The chain's velocities (rl_flow_chain_vel_fn): the velocity path at the
 * scored steps' observations. */
static int s_pass_vel(void *kind, int64_t n, const int64_t *rows, const float *x, const float *tt,
                      float *v)
{
    s_pass *p = kind;
    return s_vel_forward(p->m, &p->ob, n, 0, rows, x, tt, v);
}

/* The quantities of rows [r0, r0 + rows) into o (and *npairs scored steps). */
static int s_pass_forward(s_fp *m, s_pass *p, unsigned want, int64_t r0, int64_t rows,
                          rl_model_io *o, int64_t *npairs)
{
    const int64_t D = m->D;
    int rc = RL_OK;
    memset(o, 0, sizeof *o);
    o->row0 = r0;
    o->rows = rows;
    *npairs = 0;
    if (want & RL_Q_BIT(RL_Q_VELOCITY)) {
        rc = s_vel_forward(m, &p->ob, rows, r0, NULL, p->x + r0 * D, p->tt + r0, p->v);
        o->width[RL_Q_VELOCITY] = D;
        o->q[RL_Q_VELOCITY] = p->v;
    }
    if (!rc && (want & RL_Q_BIT(RL_Q_LOGP))) {
        rc = rl_flow_chain_forward(&p->c, s_pass_vel, p, r0, rows, &p->w, npairs);
        o->width[RL_Q_LOGP] = p->c.N;
        o->q[RL_Q_LOGP] = p->w.q;
        o->mask[RL_Q_LOGP] = p->w.qmask;
    }
    /* the value last: its encoder activations are its own */
    if (!rc && (want & RL_Q_BIT(RL_Q_VALUE))) {
        rc = s_value_forward(m, &p->ob, r0, rows, p->val);
        o->width[RL_Q_VALUE] = 1;
        o->q[RL_Q_VALUE] = p->val;
    }
    return rc;
}

static int s_forward(rl_model *mm, const rl_dataproto *batch, unsigned want,
                     const rl_model_pass *pass, rl_dataproto **out)
{
    s_fp *m = s_of(mm);
    s_pass p;
    int rc = s_pass_open(m, batch, want, pass, "flow_policy forward", &p);
    const int64_t B = p.ob.B, D = m->D, N = p.c.N;
    /* the quantities asked for, in the order velocity, logp (with its
     * mask), value */
    rl_model_output spec[4];
    int n = 0, iv = -1, il = -1, ia = -1;
    if (want & RL_Q_BIT(RL_Q_VELOCITY))
        spec[iv = n++] = (rl_model_output){rl_quantity_name(RL_Q_VELOCITY), RL_F32, 2, {B, D}};
    if (want & RL_Q_BIT(RL_Q_LOGP)) {
        spec[il = n++] = (rl_model_output){rl_quantity_name(RL_Q_LOGP), RL_F32, 2, {B, N}};
        spec[n++] = (rl_model_output){"logp_mask", RL_F32, 2, {B, N}};
    }
    if (want & RL_Q_BIT(RL_Q_VALUE))
        spec[ia = n++] = (rl_model_output){rl_quantity_name(RL_Q_VALUE), RL_F32, 2, {B, 1}};
    rl_tensor *t[4];
    rl_dataproto *o = rc ? NULL : rl_model_outputs(spec, n, t);
    if (!rc && !o)
        rc = rl_error_code();
    for (int64_t r0 = 0; !rc && r0 < B; r0 += p.mb) {
        int64_t rows = B - r0 < p.mb ? B - r0 : p.mb, np;
        rl_model_io io;
        if ((rc = s_pass_forward(m, &p, want, r0, rows, &io, &np)))
            break;
        if (iv >= 0)
            memcpy((float *)rl_tensor_data(t[iv]) + r0 * D, p.v, sizeof(float) * (size_t)(rows * D));
        if (il >= 0) {
            memcpy((float *)rl_tensor_data(t[il]) + r0 * N, p.w.q, sizeof(float) * (size_t)(rows * N));
            memcpy((float *)rl_tensor_data(t[il + 1]) + r0 * N, p.w.qmask,
                   sizeof(float) * (size_t)(rows * N));
        }
        if (ia >= 0)
            memcpy((float *)rl_tensor_data(t[ia]) + r0, p.val, sizeof(float) * (size_t)rows);
    }
    s_pass_free(&p);
    return rl_model_give(o, rc, out);
}

static int s_forward_backward(rl_model *mm, const rl_dataproto *batch, unsigned want,
                              const rl_model_pass *pass, rl_model_loss_fn fn, void *ctx,
                              double *loss)
{
    s_fp *m = s_of(mm);
    s_pass p;
    int rc = s_pass_open(m, batch, want, pass, "flow_policy forward_backward", &p);
    const int64_t B = rc ? 0 : p.ob.B, D = m->D, N = p.c.N;
    for (int64_t r0 = 0; !rc && r0 < B; r0 += p.mb) {
        int64_t rows = B - r0 < p.mb ? B - r0 : p.mb, np;
        rl_model_io o, g;
        if ((rc = s_pass_forward(m, &p, want, r0, rows, &o, &np)))
            break;
        g = o;
        if (want & RL_Q_BIT(RL_Q_VELOCITY)) {
            memset(p.gv, 0, sizeof(float) * (size_t)(rows * D));
            g.q[RL_Q_VELOCITY] = p.gv;
        }
        if (want & RL_Q_BIT(RL_Q_LOGP)) {
            memset(p.w.gq, 0, sizeof(float) * (size_t)(rows * N));
            g.q[RL_Q_LOGP] = p.w.gq;
        }
        if (want & RL_Q_BIT(RL_Q_VALUE)) {
            memset(p.gval, 0, sizeof(float) * (size_t)rows);
            g.q[RL_Q_VALUE] = p.gval;
        }
        if ((rc = fn(ctx, &o, &g, loss)))
            break;
        if ((want & RL_Q_BIT(RL_Q_VALUE)) && (rc = s_value_backward(m, p.gval)))
            break;
        if ((want & RL_Q_BIT(RL_Q_VELOCITY)) && (rc = s_vel_backward(m, p.gv)))
            break;
        if ((want & RL_Q_BIT(RL_Q_LOGP)) && np > 0 && !(rc = rl_flow_chain_backward(&p.c, r0, np, &p.w)))
            rc = s_vel_backward(m, p.w.gv);
    }
    s_pass_free(&p);
    return rc;
}

/* ---- sampling ------------------------------------------------------------------------------------ */

static int s_sample(rl_model *mm, const rl_dataproto *in, const rl_model_sampling *sp,
                    rl_dataproto **out)
{
    s_fp *m = s_of(mm);
    const char *what = "flow_policy sample";
    s_obs ob;
    int rc = s_obs_read(m, in, what, &ob);
    if (rc)
        return rc;
    const int64_t B = ob.B, dn[1] = {B}, dx[2] = {B, m->D}, D = m->D, N = sp->num_steps;
    const rl_tensor *tin = NULL, *tns = NULL, *trs = NULL;
    if (rl_dataproto_tensor(in, RL_FP_INITIAL_NOISE)) {
        if (!(tin = rl_model_input(in, what, RL_FP_INITIAL_NOISE, RL_F32, 2, dx)))
            return rl_error_code();
        if ((rc = rl_model_input_finite(what, RL_FP_INITIAL_NOISE, rl_tensor_data((rl_tensor *)tin),
                                        B * D)))
            return rc;
    } else if (!(tns = rl_model_input(in, what, RL_FP_NOISE_SEEDS, RL_I64, 1, dn))) {
        return rl_error_wrap(rl_error_code(), "(or %s (B, %lld) f32)", RL_FP_INITIAL_NOISE,
                             (long long)D);
    }
    if (!sp->greedy && !(trs = rl_model_input(in, what, RL_FP_ROW_SEEDS, RL_I64, 1, dn)))
        return rl_error_code();
    double noise;
    if ((rc = rl_flow_sample_noise(sp, what, &noise)))
        return rc;
    const rl_model_output spec[7] = {{RL_FP_ACTION, RL_F32, 3, {B, m->c.chunks, RL_FP_ACTION_DIM}},
                                     {RL_FP_INITIAL_NOISE, RL_F32, 2, {B, D}},
                                     {RL_FP_CHAIN, RL_F32, 3, {B, N + 1, D}},
                                     {RL_FP_TIMES, RL_F32, 2, {B, N + 1}},
                                     {RL_FP_NOISE_LEVEL, RL_F32, 1, {B}},
                                     {RL_FP_STEP_MASK, RL_F32, 2, {B, N}},
                                     {RL_FP_SAMPLE_LOGP, RL_F32, 2, {B, N}}};
    rl_tensor *t[7];
    rl_dataproto *o = rl_model_outputs(spec, 7, t);
    size_t bd = (size_t)(B > 0 ? B : 1) * (size_t)D, b1 = (size_t)(B > 0 ? B : 1);
    float *x = malloc(sizeof(float) * bd), *v = malloc(sizeof(float) * bd);
    float *xn = malloc(sizeof(float) * bd), *eps = malloc(sizeof(float) * (size_t)D);
    float *tg = malloc(sizeof(float) * b1);
    int64_t *pick = malloc(sizeof(int64_t) * b1);
    if (!o || !x || !v || !xn || !eps || !tg || !pick) {
        rc = o ? rl_error_set(RL_ENOMEM, "%s: out of memory", what) : rl_error_code();
        goto done;
    }
    float *A = rl_tensor_data(t[0]), *I = rl_tensor_data(t[1]), *CH = rl_tensor_data(t[2]);
    float *T = rl_tensor_data(t[3]), *NL = rl_tensor_data(t[4]), *SM = rl_tensor_data(t[5]);
    float *Q = rl_tensor_data(t[6]);
    const int64_t *rseed = trs ? rl_tensor_data((rl_tensor *)trs) : NULL;
    for (int64_t b = 0; b < B; b++) {
        if (tin)
            memcpy(x + b * D, (const float *)rl_tensor_data((rl_tensor *)tin) + b * D,
                   sizeof(float) * (size_t)D);
        else
            rl_flow_normal((uint64_t)((const int64_t *)rl_tensor_data((rl_tensor *)tns))[b], 0, D, x + b * D);
        for (int64_t k = 0; k <= N; k++) /* the uniform grid t_k = 1 − k/N */
            T[b * (N + 1) + k] = k == N ? 0.0f : (float)(1.0 - (double)k / (double)N);
        NL[b] = (float)noise;
        pick[b] = -1;
        if (rseed && !m->c.sde_joint) { /* sde_mode one: the step from the row seed's stream 0 */
            rl_rng g;
            rl_rng_init(&g, (uint64_t)rseed[b], 0);
            pick[b] = (int64_t)rl_rng_below(&g, (uint64_t)N);
        }
    }
    if (B > 0)
        memcpy(I, x, sizeof(float) * (size_t)(B * D));
    for (int64_t k = 0; k < N && B > 0 && !rc; k++) {
        for (int64_t b = 0; b < B; b++) {
            memcpy(CH + (b * (N + 1) + k) * D, x + b * D, sizeof(float) * (size_t)D);
            tg[b] = T[b * (N + 1) + k];
        }
        if ((rc = s_vel_forward(m, &ob, B, 0, NULL, x, tg, v)))
            break;
        for (int64_t b = 0; b < B && !rc; b++) {
            const float *t0 = &T[b * (N + 1) + k], *t1 = t0 + 1;
            int sde = !sp->greedy && (m->c.sde_joint || pick[b] == k);
            float lp = 0.0f;
            if (sde) {
                rl_flow_normal((uint64_t)rseed[b], (uint64_t)k + 1, D, eps);
                rc = rl_flow_step_sample(RL_FLOW_STEP_SDE, x + b * D, v + b * D, t0, t1, noise,
                                         eps, 1, D, xn + b * D, &lp);
            } else {
                rc = rl_flow_step_sample(RL_FLOW_STEP_ODE, x + b * D, v + b * D, t0, t1, 0.0,
                                         NULL, 1, D, xn + b * D, NULL);
            }
            SM[b * N + k] = sde ? 1.0f : 0.0f;
            Q[b * N + k] = lp;
        }
        float *sw = x;
        x = xn;
        xn = sw;
    }
    for (int64_t b = 0; !rc && b < B; b++) {
        memcpy(CH + (b * (N + 1) + N) * D, x + b * D, sizeof(float) * (size_t)D);
        memcpy(A + b * D, x + b * D, sizeof(float) * (size_t)D);
    }
done:
    free(x);
    free(v);
    free(xn);
    free(eps);
    free(tg);
    free(pick);
    return rl_model_give(o, rc, out);
}

/* ---- the rest of the interface ----------------------------------------------------------------------- */

static void s_free(rl_model *mm)
{
    s_fp *m = s_of(mm);
    s_enc_free(&m->ev);
    s_enc_free(&m->vv);
    s_io_free(&m->io, m->base.dev);
    rl_flow_mlp_free(&m->t);
    rl_model_base_free(&m->base);
    free(m);
}

/* The buffers move (rl_model_base_move); the activations are dropped and
 * re-made on the new device by the next pass. */
static int s_to_device(rl_model *mm, int dev)
{
    s_fp *m = s_of(mm);
    rl_device from = m->base.dev;
    int rc = rl_model_base_move(&m->base, (rl_device)dev);
    if (rc || from == m->base.dev)
        return rc;
    s_enc_free(&m->ev);
    s_enc_free(&m->vv);
    m->ev.dev = m->vv.dev = m->base.dev;
    s_io_free(&m->io, from);
    rl_flow_mlp_on(&m->t, m->base.dev, m->base.nn);
    return RL_OK;
}

/* The architecture from the kind's section (common/schema/flow_policy.h),
 * then the views: obs_norm.{mean,std}, obs_enc.{0,1}, task.embedding, the
 * trunk (in, time, blocks, out), value_head. */
static int s_build(rl_model_base *b)
{
    s_fp *m = (s_fp *)b;
    const rl_model_flow_policy_config *v = &m->v;
    const int64_t H = v->hidden_size;
    m->c = (rl_flow_policy_config){(int)v->num_action_chunks, (int)v->num_tasks, (int)v->hidden_size,
                                   (int)v->num_layers, (int)v->time_embed_dim, v->sde_mode, v->obs_clip,
                                   v->detach_critic_input};
    m->D = rl_flow_policy_dim(&m->c);
    int rc;
    if ((rc = rl_flow_mlp_init(&m->t, (int)m->D, m->c.hidden, m->c.layers, m->c.time_dim, "flow_policy")) ||
        (rc = rl_model_base_add(b, "obs_norm.mean", 1, S_OBS, 0, &m->mean)) ||
        (rc = rl_model_base_add(b, "obs_norm.std", 1, S_OBS, 0, &m->std)) ||
        (rc = rl_model_base_add(b, "obs_enc.0.weight", 2, H, S_OBS, &m->e0w)) ||
        (rc = rl_model_base_add(b, "obs_enc.0.bias", 1, H, 0, &m->e0b)) ||
        (rc = rl_model_base_add(b, "obs_enc.1.weight", 2, H, H, &m->e1w)) ||
        (rc = rl_model_base_add(b, "obs_enc.1.bias", 1, H, 0, &m->e1b)) ||
        (rc = rl_model_base_add(b, "task.embedding", 2, v->num_tasks, H, &m->emb)) ||
        (rc = rl_flow_mlp_add_head(&m->t, b)) || (rc = rl_flow_mlp_add_tail(&m->t, b)) ||
        (rc = rl_model_base_add(b, "value_head.weight", 2, 1, H, &m->vw)))
        return rc;
    return rl_model_base_add(b, "value_head.bias", 1, 1, 0, &m->vb);
}

static const rl_model_base_kind s_base = {sizeof(s_fp), &s_ops, s_sections, {offsetof(s_fp, v)}, s_build};

static rl_model *s_from_config(const rl_config *job) { return rl_model_base_build(job, &s_base); }

/* Linear weights N(0, 1/fan_in), biases 0, the task table N(0, 1),
 * obs_norm the identity (mean 0, std 1; also before any initialisation):
 * the base's rule. */
static const rl_model_ops s_ops = {
    .kind = "flow_policy",
    .free = s_free,
    RL_MODEL_BASE_KIND_OPS,
    .forward = s_forward,
    .forward_backward = s_forward_backward,
    .sample = s_sample,
    .device = rl_model_base_device,
    .to_device = s_to_device,
};

const rl_model_kind rl_model_kind_flow_policy = {
    .name = "flow_policy",
    .sections = s_sections,
    .from_config = s_from_config,
};
