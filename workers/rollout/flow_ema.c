/* workers/rollout/flow_ema.c — the embodied track's hooks on the rollout
 * (workers/rollout/hooks.h; contract: workers/flow_rl.h; mathematics:
 * common/algo/flow/flow.h): the EMA reference θ_ref of FlowSAR / FlowIPO
 * and the self-annotation / reference actions over a recorded batch, the
 * evaluation EMA θ_eval, their checkpoints.
 *
 * State (one per process): θ_ref (P floats) and its count of EMA updates,
 * only in a job whose algorithm.loss_type is flow_sar or flow_ipo; θ_eval
 * and its count, only with eval.ema_decay > 0; the live weights set aside
 * while θ_eval is in the model for an evaluation. The job's settings are
 * read once, at CONFIGURE (s_open).
 *
 * cpu_weight_swap: an annotate call copies the live weights aside, puts
 * θ_ref into the model ONCE for the whole batch (every forward and the ODE
 * run over all rows at once: steps × envs in one batch), and puts the live
 * weights back before it returns, on every path.
 *
 * Device: the averages live on the host. With rollout.device cuda the
 * model's parameters are on the GPU: a sync copies them out for the EMA
 * update, a swap copies them out and the average in (and back), through
 * rl_model_params_get/set (on the CPU a plain copy, as before). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/nn/models/flow_policy.h"
#include "common/nn/models/model_device.h"
#include "common/nn/engine/checkpoint.h"
#include "common/nn/engine/safetensors.h"
#include "rlrt/error.h"
#include "common/core/rng.h"
#include "rlrt/dtype.h"
#include "rlrt/nn/model.h"
#include "rlrt/tensor.h"
#include "rlrt/dataproto.h"
#include "rlrt/config.h"
#include "common/algo/flow/flow.h"
#include "workers/flow_rl.h"
#include "workers/rollout/hooks.h"
#include "workers/rollout/rollout.h"
#include "common/core/util.h"
#include "common/schema/libero.h"
#include "common/schema/job.h"

/* An EMA of the live weights: θ_ref, or θ_eval (eval.ema_decay). */
typedef struct s_avg {
    float *ref;     /* (P), NULL until the first sync */
    int64_t P;
    int64_t count;  /* EMA updates so far */
    const char *what;
} s_avg;

/* An average put into the model, the live weights set aside. */
typedef struct s_swap {
    rl_model *m;
    float *live; /* (P) the live weights while the average is in */
    int64_t P;
} s_swap;

static s_avg s_ref = {NULL, 0, 0, "EMA reference"};
static s_avg s_eval = {NULL, 0, 0, "evaluation EMA"};
static s_swap s_eval_in; /* θ_eval in the model for an evaluation (live != NULL) */

static void s_avg_reset(s_avg *a)
{
    free(a->ref);
    a->ref = NULL;
    a->P = a->count = 0;
}

#define S_LOSS_TYPE RL_CFG_PATH(&rl_flow_rl_section, rl_flow_rl_config, loss_type_name)

/* The job's settings (s_open). */
static struct {
    int has_alg;             /* the job has the algorithm section */
    int ref;                 /* flow_sar / flow_ipo: keep θ_ref */
    rl_flow_rl_config alg;   /* when has_alg (strings borrowed from the job tree) */
    double eval_decay;       /* eval.ema_decay (0: no evaluation EMA) */
} s_job;

static void s_reset(void)
{
    s_avg_reset(&s_ref);
    s_avg_reset(&s_eval);
    free(s_eval_in.live);
    s_eval_in.live = NULL;
}

/* The job's EMA settings: active when it keeps θ_ref or θ_eval. */
static int s_open(rl_worker_ctx *ctx, int *active)
{
    const rl_config *c = ctx->config;
    memset(&s_job, 0, sizeof s_job);
    *active = 0;
    const rl_libero_eval_config *ev = NULL;
    const rl_flow_rl_config *alg = NULL;
    int rc = rl_schema_optional(c, &rl_libero_eval_section, (const void **)&ev);
    if (!rc)
        rc = rl_schema_optional(c, &rl_flow_rl_section, (const void **)&alg);
    if (rc)
        return rc;
    s_job.eval_decay = ev ? ev->ema_decay : 0.0;
    if (alg) {
        s_job.alg = *alg;
        s_job.has_alg = 1;
        s_job.ref = alg->loss == RL_FLOW_LOSS_SAR || alg->loss == RL_FLOW_LOSS_IPO;
    }
    *active = s_job.has_alg || s_job.eval_decay > 0;
    return RL_OK;
}

/* First sync a = θ, later a ← β·a + (1 − β)·θ. */
static int s_avg_update(rl_worker_ctx *ctx, s_avg *a, const float *cur, int64_t P, double beta)
{
    if (!a->ref || a->P != P) {
        s_avg_reset(a);
        if (!(a->ref = malloc(sizeof(float) * (size_t)P)))
            return rl_error_set(RL_ENOMEM, "rollout/%d: out of memory for the %s", ctx->rank, a->what);
        memcpy(a->ref, cur, sizeof(float) * (size_t)P);
        a->P = P;
        return RL_OK;
    }
    int rc = rl_flow_ema_update(a->ref, cur, P, beta);
    if (rc)
        return rl_error_wrap(rc, "rollout/%d: %s update %lld", ctx->rank, a->what, (long long)a->count);
    a->count++;
    return RL_OK;
}

/* After the model received new weights: first sync θ_ref = θ, later
 * θ_ref ← β·θ_ref + (1 − β)·θ; the same for θ_eval with β = eval.ema_decay.
 * A sync while θ_eval is in makes the synced weights live. */
static int s_on_sync(rl_worker_ctx *ctx, const rl_rollout_policy *p)
{
    int64_t P = rl_model_num_params(p->model);
    free(s_eval_in.live); /* new live weights are in: nothing to put back */
    s_eval_in.live = NULL;
    if (!(s_job.eval_decay > 0) && !s_job.ref)
        return RL_OK;
    /* the weights on the host: the model's own buffer on the CPU, a copy from a device */
    float *copy = NULL;
    const float *cur = rl_model_params(p->model);
    if (rl_model_device(p->model) != RL_DEVICE_CPU) {
        if (!(copy = malloc(sizeof(float) * (size_t)(P + 1))))
            return rl_error_set(RL_ENOMEM, "rollout/%d: out of memory", ctx->rank);
        int rc = rl_model_params_get(p->model, copy);
        if (rc) {
            free(copy);
            return rc;
        }
        cur = copy;
    }
    int rc = s_job.eval_decay > 0 ? s_avg_update(ctx, &s_eval, cur, P, s_job.eval_decay) : RL_OK;
    if (!rc && s_job.ref)
        rc = s_avg_update(ctx, &s_ref, cur, P, rl_flow_rl_ema_beta(&s_job.alg, s_ref.count));
    free(copy);
    return rc;
}

/* ---- the swap ------------------------------------------------------------------------------ */

static int s_swap_in(rl_worker_ctx *ctx, rl_model *m, const char *method, const s_avg *a, s_swap *w)
{
    w->m = m;
    w->live = NULL;
    if (!w->m)
        return rl_error_set(RL_ESTATE, "%s: init_model has not run on rollout/%d", method, ctx->rank);
    if (!a->ref)
        return a == &s_ref ? rl_error_set(RL_ESTATE, "%s: rollout/%d has no EMA reference (no weight sync yet, "
                                                     "or %s is neither flow_sar nor flow_ipo)",
                                          method, ctx->rank, S_LOSS_TYPE)
                           : rl_error_set(RL_ESTATE, "%s: rollout/%d has no evaluation EMA (no weight sync yet, "
                                                     "or %s is 0)",
                                          method, ctx->rank,
                                          RL_CFG_PATH(&rl_libero_eval_section, rl_libero_eval_config, ema_decay));
    int64_t P = rl_model_num_params(w->m);
    if (P != a->P)
        return rl_error_set(RL_ESTATE, "%s: the %s has %lld parameters, the model %lld", method, a->what,
                            (long long)a->P, (long long)P);
    if (!(w->live = malloc(sizeof(float) * (size_t)P)))
        return rl_error_set(RL_ENOMEM, "rollout/%d: out of memory", ctx->rank);
    int rc = rl_model_params_get(w->m, w->live);
    if (!rc && (rc = rl_model_params_set(w->m, a->ref)))
        rl_model_params_set(w->m, w->live); /* the live weights back (a device's error) */
    if (rc) {
        free(w->live);
        w->live = NULL;
        return rc;
    }
    w->P = P;
    return RL_OK;
}

/* The live weights back (a device copy that fails leaves its error set
 * for the caller's next device call to report). */
static void s_swap_out(s_swap *w)
{
    if (w->live)
        rl_model_params_set(w->m, w->live);
    free(w->live);
    w->live = NULL;
}

/* ---- annotation -------------------------------------------------------------------------------- */

/* The observation tensors of `in` plus x_t (B, D) and t (B): the velocity
 * batch of the flow_policy layout. */
static rl_dataproto *s_vel_batch(const rl_dataproto *in, const float *x, const float *t, int64_t B, int64_t D)
{
    static const char *const obs[3] = {RL_FP_PROPRIO, RL_FP_OBJECT, RL_FP_TASK};
    rl_dataproto *dp = rl_dataproto_select(in, obs, 3, NULL, 0);
    int64_t s2[2] = {B, D}, s1[1] = {B};
    rl_tensor *tx = dp ? rl_dataproto_new_tensor(dp, RL_FP_X_T, RL_F32, 2, s2) : NULL;
    rl_tensor *tt = tx ? rl_dataproto_new_tensor(dp, RL_FP_T, RL_F32, 1, s1) : NULL;
    if (!tt) {
        rl_dataproto_free(dp);
        return NULL;
    }
    memcpy(rl_tensor_data(tx), x, sizeof(float) * (size_t)(B * D));
    memcpy(rl_tensor_data(tt), t, sizeof(float) * (size_t)B);
    return dp;
}

/* v (B, D) of the model at (x, t). */
static int s_velocity(rl_model *m, const rl_dataproto *in, const float *x, const float *t, int64_t B, int64_t D,
                      float *v)
{
    rl_dataproto *dp = s_vel_batch(in, x, t, B, D), *out = NULL;
    if (!dp)
        return rl_error_code();
    rl_model_pass pass = {.temperature = 1.0, .micro_batch = 0};
    int rc = rl_model_forward(m, dp, RL_Q_BIT(RL_Q_VELOCITY), &pass, &out);
    rl_dataproto_free(dp);
    if (rc)
        return rc;
    const rl_tensor *tv = rl_dataproto_tensor_shaped(out, rl_quantity_name(RL_Q_VELOCITY), RL_F32, 2,
                                                     (int64_t[]){B, D});
    if (tv)
        memcpy(v, rl_tensor_data(tv), sizeof(float) * (size_t)(B * D));
    rc = tv ? RL_OK : rl_error_code();
    rl_dataproto_free(out);
    return rc;
}

/* The ODE of the model from the rows' initial noise → ref (B, D). */
static int s_ref_actions(const rl_rollout_policy *p, rl_model *m, const rl_dataproto *in, int64_t B, int64_t D,
                         float *ref)
{
    static const char *const keep[4] = {RL_FP_PROPRIO, RL_FP_OBJECT, RL_FP_TASK, RL_FP_INITIAL_NOISE};
    if (!rl_dataproto_tensor_shaped(in, RL_FP_INITIAL_NOISE, RL_F32, 2, (int64_t[]){B, D}))
        return rl_error_code();
    rl_model_sampling s = {.greedy = 1, .temperature = 1.0, .top_p = 1.0, .num_steps = p->sampling.num_steps,
                           .noise_level = p->sampling.noise_level, .shift = p->sampling.shift};
    rl_dataproto *req = rl_dataproto_select(in, keep, 4, NULL, 0), *out = NULL;
    int rc = req ? rl_model_sample(m, req, &s, &out) : rl_error_code();
    rl_dataproto_free(req);
    if (rc)
        return rc;
    const rl_tensor *ta = rl_dataproto_tensor_shaped(out, RL_FP_ACTION, RL_F32, 3,
                                                     (int64_t[]){B, D / RL_FP_ACTION_DIM, RL_FP_ACTION_DIM});
    if (ta)
        memcpy(ref, rl_tensor_data(ta), sizeof(float) * (size_t)(B * D));
    rc = ta ? RL_OK : rl_error_code();
    rl_dataproto_free(out);
    return rc;
}

static int s_annotate(rl_worker_ctx *ctx, const rl_rollout_policy *p, const rl_dataproto *in,
                      rl_dataproto **out)
{
    if (!s_job.ref)
        return rl_error_set(RL_ESTATE, "%s: %s is neither flow_sar nor flow_ipo", RL_ROLLOUT_FLOW_ANNOTATE,
                            S_LOSS_TYPE);
    const rl_flow_rl_config *o = &s_job.alg;
    int rc;
    int64_t B = rl_dataproto_rows(in);
    const rl_tensor *ta = rl_dataproto_tensor_shaped(in, RL_FLOW_ACTION, RL_F32, 2, (int64_t[]){B, -1});
    const rl_tensor *ts = ta ? rl_dataproto_tensor_shaped(in, RL_FLOW_SEEDS, RL_I64, 1, (int64_t[]){B}) : NULL;
    if (!ts)
        return rl_error_code();
    const int64_t D = ta->shape[1];
    const float *a = rl_tensor_data(ta);
    const int64_t *seeds = rl_tensor_data(ts);
    for (int64_t i = 0; i < B * D; i++)
        if (!isfinite(a[i]))
            return rl_error_set(RL_ENUMERIC, "tensor '%s' holds %g at [%lld]", RL_FLOW_ACTION, (double)a[i],
                                (long long)i);
    const int sar = o->loss == RL_FLOW_LOSS_SAR;
    const double tmin = sar ? o->sar_t_min : o->ipo_t_min, tmax = sar ? o->sar_t_max : o->ipo_t_max;
    rl_dataproto *res = rl_dataproto_new();
    int64_t s1[1] = {B}, s2[2] = {B, D};
    rl_tensor *tt = res ? rl_dataproto_new_tensor(res, RL_FLOW_T, RL_F32, 1, s1) : NULL;
    rl_tensor *te = tt ? rl_dataproto_new_tensor(res, RL_FLOW_EPS, RL_F32, 2, s2) : NULL;
    rl_tensor *tv = te ? rl_dataproto_new_tensor(res, RL_FLOW_V_OLD, RL_F32, 2, s2) : NULL;
    rl_tensor *tx = tv ? (sar ? rl_dataproto_new_tensor(res, RL_FLOW_RECON, RL_F32, 1, s1)
                              : rl_dataproto_new_tensor(res, RL_FLOW_REF_ACTION, RL_F32, 2, s2))
                       : NULL;
    float *xt = malloc(sizeof(float) * (size_t)(B * D + 1)), *emid = malloc(sizeof(float) * (size_t)(B * D + 1));
    float *tmid = malloc(sizeof(float) * (size_t)(B + 1));
    if (!tx || !xt || !emid || !tmid) {
        rc = tx ? rl_error_set(RL_ENOMEM, "rollout/%d: out of memory", ctx->rank) : rl_error_code();
        goto done;
    }
    float *t = rl_tensor_data(tt), *eps = rl_tensor_data(te), *v = rl_tensor_data(tv);
    /* the row's draws: Philox(trainer.seed ^ salt, row seed) — t, ε, ε_mid */
    for (int64_t b = 0; b < B; b++) {
        rl_rng g;
        rl_rng_init(&g, p->seed ^ 0xf10a5a9ull, (uint64_t)seeds[b]);
        t[b] = (float)(tmin + (tmax - tmin) * rl_rng_uniform_f64(&g));
        for (int64_t j = 0; j < D; j++)
            eps[b * D + j] = rl_rng_normal(&g);
        for (int64_t j = 0; j < D; j++)
            emid[b * D + j] = rl_rng_normal(&g);
        tmid[b] = (float)o->sar_tau_mid;
    }
    s_swap w;
    if ((rc = s_swap_in(ctx, p->model, RL_ROLLOUT_FLOW_ANNOTATE, &s_ref, &w)))
        goto done;
    rc = rl_flow_interp(a, eps, t, B, D, xt, NULL);
    if (!rc)
        rc = s_velocity(w.m, in, xt, t, B, D, v);
    if (!rc && sar) { /* e_i at τ_mid: â = x_mid − v·τ */
        float *vm = emid; /* reuse: ε_mid → x_mid in xt, v_mid over ε_mid */
        rc = rl_flow_interp(a, emid, tmid, B, D, xt, NULL);
        if (!rc)
            rc = s_velocity(w.m, in, xt, tmid, B, D, vm);
        if (!rc)
            rc = rl_flow_recon_error(a, xt, vm, (float)o->sar_tau_mid, B, D, rl_tensor_data(tx));
    } else if (!rc) {
        rc = s_ref_actions(p, w.m, in, B, D, rl_tensor_data(tx));
    }
    s_swap_out(&w);
done:
    free(xt);
    free(emid);
    free(tmid);
    if (rc) {
        rl_dataproto_free(res);
        return rl_error_wrap(rc, "rollout/%d %s", ctx->rank, RL_ROLLOUT_FLOW_ANNOTATE);
    }
    json_object_set_new(rl_dataproto_meta(res), "ema_updates", json_integer((json_int_t)s_ref.count));
    *out = res;
    return RL_OK;
}

/* ---- checkpoints of θ_ref and θ_eval ----------------------------------------------------------- */

/* What a save/load request names: the directory, meta RL_FLOW_PATH, and the
 * average, meta RL_FLOW_WHICH "ref" (the default) or "eval". */
static int s_target(const rl_dataproto *in, const char *method, const char **dir, s_avg **a)
{
    *dir = rl_dataproto_meta_str(in, RL_FLOW_PATH, NULL);
    const char *w = *dir ? rl_dataproto_meta_str(in, RL_FLOW_WHICH, "ref") : NULL;
    if (!w)
        return rl_error_code();
    if (strcmp(w, "ref") != 0 && strcmp(w, "eval") != 0)
        return rl_error_set(RL_EPROTO, "%s: meta '%s': expected \"ref\" or \"eval\", got \"%.40s\"", method,
                            RL_FLOW_WHICH, w);
    *a = strcmp(w, "ref") == 0 ? &s_ref : &s_eval;
    return RL_OK;
}

static int s_save_state(rl_worker_ctx *ctx, const rl_rollout_policy *p, const rl_dataproto *in,
                        rl_dataproto **out)
{
    (void)out;
    const char *dir;
    s_avg *a;
    int rc = s_target(in, RL_ROLLOUT_FLOW_REF_SAVE, &dir, &a);
    s_swap w;
    if (rc || (rc = s_swap_in(ctx, p->model, RL_ROLLOUT_FLOW_REF_SAVE, a, &w)))
        return rc;
    rc = rl_model_save(w.m, dir);
    s_swap_out(&w);
    if (rc)
        return rc;
    char path[4200], text[64];
    snprintf(path, sizeof path, "%s/ema.json", dir);
    int n = snprintf(text, sizeof text, "{\"count\": %lld}\n", (long long)a->count);
    rc = rl_file_write_atomic(path, text, (size_t)n);
    /* its checksums: a resume verifies the directory with its step's */
    return rc ? rc : rl_checkpoint_seal(dir);
}

static int s_load_state(rl_worker_ctx *ctx, const rl_rollout_policy *p, const rl_dataproto *in,
                        rl_dataproto **out)
{
    (void)out;
    const char *dir;
    s_avg *a;
    int rc = s_target(in, RL_ROLLOUT_FLOW_REF_LOAD, &dir, &a);
    if (rc)
        return rc;
    rl_model *m = p->model;
    if (!m)
        return rl_error_set(RL_ESTATE, "%s: init_model has not run on rollout/%d", RL_ROLLOUT_FLOW_REF_LOAD,
                            ctx->rank);
    if (s_eval_in.live)
        return rl_error_set(RL_ESTATE, "%s: rollout/%d holds the evaluation EMA (eval_weights ema: true "
                                       "without ema: false)", RL_ROLLOUT_FLOW_REF_LOAD, ctx->rank);
    char path[4200];
    snprintf(path, sizeof path, "%s/ema.json", dir);
    json_error_t je;
    json_t *j = json_load_file(path, 0, &je);
    const json_t *cnt = json_object_get(j, "count");
    if (!json_is_integer(cnt) || json_integer_value(cnt) < 0) {
        json_decref(j);
        return rl_error_set(RL_EIO, "%s: expected {\"count\": <int >= 0>}", path);
    }
    int64_t count = json_integer_value(cnt);
    json_decref(j);
    int64_t P = rl_model_num_params(m);
    float *live = malloc(sizeof(float) * (size_t)P), *ref = malloc(sizeof(float) * (size_t)P);
    if (!live || !ref) {
        free(live);
        free(ref);
        return rl_error_set(RL_ENOMEM, "rollout/%d: out of memory", ctx->rank);
    }
    rc = rl_model_params_get(m, live);
    if (!rc)
        rc = rl_model_load(m, dir);
    if (!rc)
        rc = rl_model_params_get(m, ref);
    int back = rl_model_params_set(m, live);
    if (!rc)
        rc = back;
    free(live);
    if (rc) {
        free(ref);
        return rc;
    }
    s_avg_reset(a);
    a->ref = ref;
    a->P = P;
    a->count = count;
    return RL_OK;
}

/* ---- evaluation with θ_eval -------------------------------------------------------------------- */

static int s_eval_weights(rl_worker_ctx *ctx, const rl_rollout_policy *p, const rl_dataproto *in,
                          rl_dataproto **out)
{
    (void)out;
    const json_t *v = json_object_get(rl_dataproto_meta_const(in), RL_FLOW_EMA);
    if (!json_is_boolean(v))
        return rl_error_set(RL_EPROTO, "%s: meta '%s': expected a boolean", RL_ROLLOUT_EVAL_WEIGHTS, RL_FLOW_EMA);
    if (json_is_true(v)) /* kept in until ema: false or the next sync */
        return s_eval_in.live ? RL_OK : s_swap_in(ctx, p->model, RL_ROLLOUT_EVAL_WEIGHTS, &s_eval, &s_eval_in);
    s_swap_out(&s_eval_in);
    return RL_OK;
}

const rl_rollout_hooks rl_rollout_flow_ema_hooks = {
    .name = "EMA reference",
    .open = s_open,
    .close = s_reset,
    .reset = s_reset,
    .on_sync = s_on_sync,
    .annotate = s_annotate,
    .save_state = s_save_state,
    .load_state = s_load_state,
    .eval_weights = s_eval_weights,
};
