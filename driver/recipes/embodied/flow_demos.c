/* driver/recipes/embodied/flow_demos.c — the demonstration pairs of the flow
 * policy (contract: flow_demos.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "driver/recipes/embodied/flow_demos.h"
#include "rlrt/error.h"
#include "common/nn/engine/safetensors.h"
#include "workers/actor/actor.h"
#include "workers/flow_rl.h"
#include "common/core/rng.h"

void rl_flow_demos_free(rl_flow_demos *p)
{
    free(p->prop);
    free(p->obj);
    free(p->act);
    free(p->task);
    memset(p, 0, sizeof *p);
}

static const rl_st_tensor *s_tensor(const rl_safetensors *st, const char *path, const char *name,
                                    rl_dtype dt, int ndim, int64_t d1)
{
    int i = rl_safetensors_find(st, name);
    const rl_st_tensor *t = i < 0 ? NULL : rl_safetensors_tensor(st, i);
    if (!t) {
        rl_error_set(RL_ENOTFOUND, "%s: no tensor '%s' (not a libero_collect dataset?)", path, name);
        return NULL;
    }
    if (t->dtype != dt || t->ndim != ndim || (ndim == 2 && t->shape[1] != d1)) {
        rl_error_set(RL_ESHAPE, "%s: tensor '%s' has the wrong dtype or shape", path, name);
        return NULL;
    }
    return t;
}

/* Reads the demonstrations into pairs of chunks of C actions. */
int rl_flow_demos_load(const char *path, int64_t per_task, int64_t C, int num_tasks, rl_flow_demos *p)
{
    memset(p, 0, sizeof *p);
    p->C = C;
    p->D = C * RL_FP_ACTION_DIM;
    rl_safetensors *st = rl_safetensors_open(path);
    if (!st) {
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", rl_error_message());
        return rl_error_set(rl_error_code(), "%s (collect them with examples/libero_collect.yaml)", msg);
    }
    const rl_st_tensor *tp = s_tensor(st, path, RL_DEMOS_PROPRIO, RL_F32, 2, RL_FP_PROPRIO_DIM);
    const rl_st_tensor *to = tp ? s_tensor(st, path, RL_DEMOS_OBJECT, RL_F32, 2, RL_FP_OBJECT_DIM) : NULL;
    const rl_st_tensor *ta = to ? s_tensor(st, path, RL_DEMOS_ACTIONS, RL_F32, 2, RL_FP_ACTION_DIM) : NULL;
    const rl_st_tensor *ts = ta ? s_tensor(st, path, RL_DEMOS_START, RL_I64, 1, 0) : NULL;
    const rl_st_tensor *tl = ts ? s_tensor(st, path, RL_DEMOS_LENGTH, RL_I64, 1, 0) : NULL;
    const rl_st_tensor *tt = tl ? s_tensor(st, path, RL_DEMOS_TASK, RL_I64, 1, 0) : NULL;
    const rl_st_tensor *tk = tt ? s_tensor(st, path, RL_DEMOS_SUCCESS, RL_U8, 1, 0) : NULL;
    int rc = tk ? RL_OK : rl_error_code();
    const int64_t S = tp ? tp->shape[0] : 0, E = ts ? ts->shape[0] : 0;
    if (!rc && (to->shape[0] != S || ta->shape[0] != S || tl->shape[0] != E || tt->shape[0] != E ||
                tk->shape[0] != E))
        rc = rl_error_set(RL_ESHAPE, "%s: step or episode tensors disagree in length", path);
    const int64_t *start = rc ? NULL : ts->data, *len = rc ? NULL : tl->data, *task = rc ? NULL : tt->data;
    const uint8_t *ok = rc ? NULL : tk->data;
    uint8_t *keep = rc ? NULL : calloc((size_t)(E + 1), 1);
    if (!rc && !keep)
        rc = rl_error_set(RL_ENOMEM, "out of memory");
    int64_t n = 0;
    for (int64_t e = 0; !rc && e < E; e++) {
        if (start[e] < 0 || len[e] < 1 || start[e] + len[e] > S || task[e] < 0 || task[e] >= num_tasks ||
            task[e] >= RL_ENV_MAX_TASKS)
            rc = rl_error_set(RL_ERANGE, "%s: episode %lld (start %lld, length %lld, task %lld) out of range", path,
                              (long long)e, (long long)start[e], (long long)len[e], (long long)task[e]);
        else if (ok[e] && p->per_task[task[e]] < per_task) {
            keep[e] = 1;
            p->per_task[task[e]]++;
            p->eps++;
            n += len[e];
        }
    }
    if (!rc && n == 0)
        rc = rl_error_set(RL_EINVAL, "%s: no successful episode of tasks [0, %d)", path, num_tasks);
    p->n = n;
    if (!rc) {
        p->prop = malloc(sizeof(float) * (size_t)n * RL_FP_PROPRIO_DIM);
        p->obj = malloc(sizeof(float) * (size_t)n * RL_FP_OBJECT_DIM);
        p->act = malloc(sizeof(float) * (size_t)(n * p->D));
        p->task = malloc(sizeof(int64_t) * (size_t)n);
        if (!p->prop || !p->obj || !p->act || !p->task)
            rc = rl_error_set(RL_ENOMEM, "out of memory for %lld pairs", (long long)n);
    }
    const float *P = rc ? NULL : tp->data, *O = rc ? NULL : to->data, *A = rc ? NULL : ta->data;
    int64_t i = 0;
    for (int64_t e = 0; !rc && e < E; e++) {
        if (!keep[e])
            continue;
        for (int64_t s = 0; s < len[e]; s++, i++) {
            int64_t g = start[e] + s;
            memcpy(p->prop + i * RL_FP_PROPRIO_DIM, P + g * RL_FP_PROPRIO_DIM, sizeof(float) * RL_FP_PROPRIO_DIM);
            memcpy(p->obj + i * RL_FP_OBJECT_DIM, O + g * RL_FP_OBJECT_DIM, sizeof(float) * RL_FP_OBJECT_DIM);
            for (int64_t c = 0; c < C; c++) { /* past the end: the last action again */
                int64_t src = start[e] + (s + c < len[e] ? s + c : len[e] - 1);
                memcpy(p->act + i * p->D + c * RL_FP_ACTION_DIM, A + src * RL_FP_ACTION_DIM,
                       sizeof(float) * RL_FP_ACTION_DIM);
            }
            p->task[i] = task[e];
        }
    }
    for (int64_t k = 0; !rc && k < n * p->D; k++)
        if (!isfinite(p->act[k]))
            rc = rl_error_set(RL_ENUMERIC, "%s: a kept action is not finite", path);
    /* obs_norm: mean and std over the pairs (double sums), std >= 0.01 */
    for (int j = 0; !rc && j < RL_FLOW_DEMOS_OBS; j++) {
        double s1 = 0, s2 = 0;
        for (int64_t r = 0; r < n; r++) {
            double x = j < RL_FP_PROPRIO_DIM ? p->prop[r * RL_FP_PROPRIO_DIM + j]
                                             : p->obj[r * RL_FP_OBJECT_DIM + j - RL_FP_PROPRIO_DIM];
            s1 += x;
            s2 += x * x;
        }
        double m = s1 / (double)n, v = s2 / (double)n - m * m;
        p->mean[j] = (float)m;
        p->std[j] = (float)fmax(sqrt(fmax(v, 0.0)), 0.01);
        if (!isfinite(p->mean[j]) || !isfinite(p->std[j]))
            rc = rl_error_set(RL_ENUMERIC, "%s: observation %d is not finite", path, j);
    }
    free(keep);
    rl_safetensors_close(st);
    if (rc)
        rl_flow_demos_free(p);
    return rc;
}

int rl_flow_demos_open(const rl_config *job, const rl_config_section *sec, size_t offset, const char *path,
                       int64_t per_task, int64_t C, int num_tasks, rl_flow_demos *p)
{
    int rc = rl_flow_demos_load(path, per_task, C, num_tasks, p);
    if (!rc)
        return RL_OK;
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", rl_error_message());
    return rl_config_key_error(job, sec, offset, rc, "%s", msg);
}

int rl_flow_demos_anchor(const rl_flow_demos *p, uint64_t seed, int64_t index, rl_dataproto *req)
{
    static const char *const from[6] = {RL_FP_PROPRIO, RL_FP_OBJECT, RL_FP_TASK, RL_FP_X_T, RL_FP_T,
                                        RL_ACTOR_VELOCITY_TARGET};
    static const char *const to[6] = {RL_FLOW_DEMO_PROPRIO, RL_FLOW_DEMO_OBJECT, RL_FLOW_DEMO_TASK,
                                      RL_FLOW_DEMO_X_T, RL_FLOW_DEMO_T, RL_FLOW_DEMO_TARGET};
    rl_dataproto *db = rl_flow_demos_batch(p, seed, index, rl_dataproto_rows(req), 1);
    int rc = db ? RL_OK : rl_error_code();
    for (int k = 0; !rc && k < 6; k++)
        rc = rl_dataproto_add_tensor(req, to[k], rl_dataproto_tensor(db, from[k]));
    rl_dataproto_free(db);
    return rc;
}

rl_dataproto *rl_flow_demos_batch(const rl_flow_demos *p, uint64_t seed, int64_t step, int64_t B, int beta_t)
{
    const int64_t D = p->D;
    rl_dataproto *dp = rl_dataproto_new();
    if (dp && rl_dataproto_set_meta(dp, json_pack("{s:I}", RL_ACTOR_GLOBAL_ROWS, (json_int_t)B))) {
        rl_dataproto_free(dp);
        return NULL;
    }
    int64_t s1[1] = {B}, sp[2] = {B, RL_FP_PROPRIO_DIM}, so[2] = {B, RL_FP_OBJECT_DIM}, sd[2] = {B, D};
    rl_tensor *tp = dp ? rl_dataproto_new_tensor(dp, RL_FP_PROPRIO, RL_F32, 2, sp) : NULL;
    rl_tensor *to = tp ? rl_dataproto_new_tensor(dp, RL_FP_OBJECT, RL_F32, 2, so) : NULL;
    rl_tensor *tk = to ? rl_dataproto_new_tensor(dp, RL_FP_TASK, RL_I64, 1, s1) : NULL;
    rl_tensor *tx = tk ? rl_dataproto_new_tensor(dp, RL_FP_X_T, RL_F32, 2, sd) : NULL;
    rl_tensor *tt = tx ? rl_dataproto_new_tensor(dp, RL_FP_T, RL_F32, 1, s1) : NULL;
    rl_tensor *tg = tt ? rl_dataproto_new_tensor(dp, RL_ACTOR_VELOCITY_TARGET, RL_F32, 2, sd) : NULL;
    if (!tg) {
        rl_dataproto_free(dp);
        return NULL;
    }
    float *P = rl_tensor_data(tp), *O = rl_tensor_data(to), *X = rl_tensor_data(tx);
    float *T = rl_tensor_data(tt), *G = rl_tensor_data(tg);
    int64_t *K = rl_tensor_data(tk);
    for (int64_t b = 0; b < B; b++) {
        rl_rng g;
        rl_rng_init(&g, seed ^ 0x77a5u, (uint64_t)step * 1000003u + (uint64_t)b);
        int64_t i = (int64_t)rl_rng_below(&g, (uint64_t)p->n);
        double u = rl_rng_uniform_f64(&g);
        float t = beta_t ? (float)(0.999 * pow(u, 1.0 / 1.5) + 0.001) : (float)u;
        memcpy(P + b * RL_FP_PROPRIO_DIM, p->prop + i * RL_FP_PROPRIO_DIM, sizeof(float) * RL_FP_PROPRIO_DIM);
        memcpy(O + b * RL_FP_OBJECT_DIM, p->obj + i * RL_FP_OBJECT_DIM, sizeof(float) * RL_FP_OBJECT_DIM);
        K[b] = p->task[i];
        T[b] = t;
        for (int64_t j = 0; j < D; j++) {
            float a = p->act[i * D + j], e = rl_rng_normal(&g);
            X[b * D + j] = (1.0f - t) * a + t * e;
            G[b * D + j] = e - a;
        }
    }
    return dp;
}
