/* workers/rollout/flow_ref.c — the rollout's EMA reference θ_ref and the
 * FlowSAR self-annotation / FlowIPO reference actions over a recorded batch
 * (contract: workers/flow_rl.h; mathematics: common/algo/flow/flow.h).
 *
 * cpu_weight_swap: an annotate call copies the live weights aside, puts
 * θ_ref into the model ONCE for the whole batch (every forward and the ODE
 * run over all rows at once: steps × envs in one batch), and puts the live
 * weights back before it returns, on every path. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "workers/rollout/flow_ref.h"
#include "common/nn/models/flow_policy.h"
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
#include "workers/rollout/rollout.h"
#include "common/core/util.h"

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

void rl_flow_ref_reset(void)
{
    s_avg_reset(&s_ref);
    s_avg_reset(&s_eval);
    free(s_eval_in.live);
    s_eval_in.live = NULL;
}

/* eval.ema_decay of the job (0: no evaluation EMA; LM jobs have no key). */
static int s_eval_decay(const rl_config *c, double *d)
{
    *d = 0;
    if (!rl_config_has(c, "eval.ema_decay"))
        return RL_OK;
    return rl_config_get_double_in(c, "eval.ema_decay", 0, 1, RL_CFG_MAX_OPEN, d);
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

/* 1: the job keeps an EMA reference (flow_sar / flow_ipo), with *o read. */
static int s_wants_ref(const rl_config *c, rl_flow_rl_config *o, int *rc)
{
    *rc = RL_OK;
    if (!rl_config_has_section(c, &rl_flow_rl_section))
        return 0;
    const rl_flow_rl_config *p = rl_config_section_get(c, &rl_flow_rl_section);
    if (!p) {
        *rc = rl_error_code();
        return 0;
    }
    *o = *p;
    return o->loss == RL_FLOW_LOSS_SAR || o->loss == RL_FLOW_LOSS_IPO;
}

int rl_flow_ref_on_sync(rl_worker_ctx *ctx, rl_model *m)
{
    rl_flow_rl_config o;
    int rc;
    double decay;
    int64_t P = rl_model_num_params(m);
    const float *cur = rl_model_params(m);
    free(s_eval_in.live); /* new live weights are in: nothing to put back */
    s_eval_in.live = NULL;
    if ((rc = s_eval_decay(ctx->config, &decay)))
        return rc;
    if (decay > 0 && (rc = s_avg_update(ctx, &s_eval, cur, P, decay)))
        return rc;
    if (!s_wants_ref(ctx->config, &o, &rc))
        return rc;
    return s_avg_update(ctx, &s_ref, cur, P, rl_flow_rl_ema_beta(&o, s_ref.count));
}

/* ---- the swap ------------------------------------------------------------------------------ */

static int s_swap_in(rl_worker_ctx *ctx, const char *method, const s_avg *a, s_swap *w)
{
    w->m = rl_rollout_model(ctx);
    w->live = NULL;
    if (!w->m)
        return rl_error_set(RL_ESTATE, "%s: init_model has not run on rollout/%d", method, ctx->rank);
    if (!a->ref)
        return rl_error_set(RL_ESTATE,
                            a == &s_ref ? "%s: rollout/%d has no EMA reference (no weight sync yet, or "
                                          "algorithm.loss_type is neither flow_sar nor flow_ipo)"
                                        : "%s: rollout/%d has no evaluation EMA (no weight sync yet, or "
                                          "eval.ema_decay is 0)", method, ctx->rank);
    int64_t P = rl_model_num_params(w->m);
    if (P != a->P)
        return rl_error_set(RL_ESTATE, "%s: the %s has %lld parameters, the model %lld", method, a->what,
                            (long long)a->P, (long long)P);
    if (!(w->live = malloc(sizeof(float) * (size_t)P)))
        return rl_error_set(RL_ENOMEM, "rollout/%d: out of memory", ctx->rank);
    float *p = rl_model_params(w->m);
    memcpy(w->live, p, sizeof(float) * (size_t)P);
    memcpy(p, a->ref, sizeof(float) * (size_t)P);
    w->P = P;
    return RL_OK;
}

static void s_swap_out(s_swap *w)
{
    if (w->live)
        memcpy(rl_model_params(w->m), w->live, sizeof(float) * (size_t)w->P);
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
static int s_ref_actions(rl_worker_ctx *ctx, rl_model *m, const rl_dataproto *in, int64_t B, int64_t D, float *ref)
{
    static const char *const keep[4] = {RL_FP_PROPRIO, RL_FP_OBJECT, RL_FP_TASK, RL_FP_INITIAL_NOISE};
    if (!rl_dataproto_tensor_shaped(in, RL_FP_INITIAL_NOISE, RL_F32, 2, (int64_t[]){B, D}))
        return rl_error_code();
    rl_rollout_config ro;
    int rc = rl_rollout_config_read(ctx->config, &ro);
    if (rc)
        return rc;
    rl_model_sampling s = {.greedy = 1, .temperature = 1.0, .top_p = 1.0, .num_steps = ro.num_steps,
                           .noise_level = ro.noise_level, .shift = ro.shift};
    rl_dataproto *req = rl_dataproto_select(in, keep, 4, NULL, 0), *out = NULL;
    rc = req ? rl_model_sample(m, req, &s, &out) : rl_error_code();
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

int rl_flow_ref_annotate(rl_worker_ctx *ctx, const rl_dataproto *in, rl_dataproto **out)
{
    rl_flow_rl_config o;
    int rc;
    if (!s_wants_ref(ctx->config, &o, &rc))
        return rc ? rc
                  : rl_error_set(RL_ESTATE, "%s: algorithm.loss_type is neither flow_sar nor flow_ipo",
                                 RL_ROLLOUT_FLOW_ANNOTATE);
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
    rl_rollout_config ro;
    if ((rc = rl_rollout_config_read(ctx->config, &ro)))
        return rc;
    const int sar = o.loss == RL_FLOW_LOSS_SAR;
    const double tmin = sar ? o.sar_t_min : o.ipo_t_min, tmax = sar ? o.sar_t_max : o.ipo_t_max;
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
        rl_rng_init(&g, (uint64_t)ro.seed ^ 0xf10a5a9ull, (uint64_t)seeds[b]);
        t[b] = (float)(tmin + (tmax - tmin) * rl_rng_uniform_f64(&g));
        for (int64_t j = 0; j < D; j++)
            eps[b * D + j] = rl_rng_normal(&g);
        for (int64_t j = 0; j < D; j++)
            emid[b * D + j] = rl_rng_normal(&g);
        tmid[b] = (float)o.sar_tau_mid;
    }
    s_swap w;
    if ((rc = s_swap_in(ctx, RL_ROLLOUT_FLOW_ANNOTATE, &s_ref, &w)))
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
            rc = rl_flow_recon_error(a, xt, vm, (float)o.sar_tau_mid, B, D, rl_tensor_data(tx));
    } else if (!rc) {
        rc = s_ref_actions(ctx, w.m, in, B, D, rl_tensor_data(tx));
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

/* The average a save/load request names: meta RL_FLOW_WHICH "ref" (the
 * default) or "eval". */
static int s_which(const rl_dataproto *in, const char *method, s_avg **a)
{
    const char *w = rl_dataproto_meta_str(in, RL_FLOW_WHICH, "ref");
    if (!w)
        return rl_error_code();
    if (strcmp(w, "ref") != 0 && strcmp(w, "eval") != 0)
        return rl_error_set(RL_EPROTO, "%s: meta '%s': expected \"ref\" or \"eval\", got \"%.40s\"", method,
                            RL_FLOW_WHICH, w);
    *a = strcmp(w, "ref") == 0 ? &s_ref : &s_eval;
    return RL_OK;
}

int rl_flow_ref_save(rl_worker_ctx *ctx, const rl_dataproto *in, rl_dataproto **out)
{
    (void)out;
    const char *dir = rl_dataproto_meta_str(in, RL_FLOW_PATH, NULL);
    s_avg *a;
    if (!dir)
        return rl_error_code();
    int rc = s_which(in, RL_ROLLOUT_FLOW_REF_SAVE, &a);
    s_swap w;
    if (rc || (rc = s_swap_in(ctx, RL_ROLLOUT_FLOW_REF_SAVE, a, &w)))
        return rc;
    rc = rl_model_save(w.m, dir);
    s_swap_out(&w);
    if (rc)
        return rc;
    char path[4200], text[64];
    snprintf(path, sizeof path, "%s/ema.json", dir);
    int n = snprintf(text, sizeof text, "{\"count\": %lld}\n", (long long)a->count);
    return rl_file_write_atomic(path, text, (size_t)n);
}

int rl_flow_ref_load(rl_worker_ctx *ctx, const rl_dataproto *in, rl_dataproto **out)
{
    (void)out;
    const char *dir = rl_dataproto_meta_str(in, RL_FLOW_PATH, NULL);
    s_avg *a;
    if (!dir)
        return rl_error_code();
    int rc = s_which(in, RL_ROLLOUT_FLOW_REF_LOAD, &a);
    if (rc)
        return rc;
    rl_model *m = rl_rollout_model(ctx);
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
    memcpy(live, rl_model_params(m), sizeof(float) * (size_t)P);
    rc = rl_model_load(m, dir);
    if (!rc)
        memcpy(ref, rl_model_params(m), sizeof(float) * (size_t)P);
    memcpy(rl_model_params(m), live, sizeof(float) * (size_t)P);
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

int rl_flow_eval_weights(rl_worker_ctx *ctx, const rl_dataproto *in, rl_dataproto **out)
{
    (void)out;
    const json_t *v = json_object_get(rl_dataproto_meta_const(in), RL_FLOW_EMA);
    if (!json_is_boolean(v))
        return rl_error_set(RL_EPROTO, "%s: meta '%s': expected a boolean", RL_ROLLOUT_EVAL_WEIGHTS, RL_FLOW_EMA);
    if (json_is_true(v)) /* kept in until ema: false or the next sync */
        return s_eval_in.live ? RL_OK : s_swap_in(ctx, RL_ROLLOUT_EVAL_WEIGHTS, &s_eval, &s_eval_in);
    s_swap_out(&s_eval_in);
    return RL_OK;
}
