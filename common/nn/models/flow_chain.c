/* flow_chain.c — the flow-matching inputs, the recorded SDE chains and the
 * sampling checks of the flow model kinds (see flow_chain_internal.h). */
#include "common/nn/models/flow_chain_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/core/rng.h"
#include "common/nn/models/model_base.h"
#include "rlrt/error.h"

int rl_flow_chain_read(const rl_dataproto *in, const char *what, const rl_flow_chain_kind *kind,
                       int64_t B, int64_t D, rl_flow_chain *c)
{
    memset(c, 0, sizeof *c);
    c->kind = kind;
    c->B = B;
    c->D = D;
    const int64_t dt[2] = {B, -1};
    const rl_tensor *tt = rl_model_input(in, what, kind->t, RL_F32, 2, dt);
    if (!tt)
        return rl_error_code();
    c->N = tt->shape[1] - 1;
    if (c->N < 1 || c->N > 10000)
        return rl_error_set(RL_ESHAPE, "%s: %s has %lld grid points, expected 2 to 10001", what,
                            kind->t, (long long)tt->shape[1]);
    const int64_t dx[3] = {B, c->N + 1, D}, dn[1] = {B}, dm[2] = {B, c->N};
    const rl_tensor *tx = rl_model_input(in, what, kind->x, RL_F32, 3, dx);
    const rl_tensor *tn = tx ? rl_model_input(in, what, kind->noise, RL_F32, 1, dn) : NULL;
    if (!tn)
        return rl_error_code();
    const rl_tensor *tm = NULL;
    if (rl_dataproto_tensor(in, kind->mask) && !(tm = rl_model_input(in, what, kind->mask, RL_F32, 2, dm)))
        return rl_error_code();
    c->x = rl_tensor_data((rl_tensor *)tx);
    c->t = rl_tensor_data((rl_tensor *)tt);
    c->noise = rl_tensor_data((rl_tensor *)tn);
    c->mask = tm ? rl_tensor_data((rl_tensor *)tm) : NULL;
    return rl_model_input_finite(what, kind->x, c->x, B * (c->N + 1) * D);
}

void rl_flow_work_free(rl_flow_work *w)
{
    free(w->pb);
    free(w->x);
    memset(w, 0, sizeof *w);
}

int rl_flow_work_alloc(rl_flow_work *w, int64_t rows, int64_t N, int64_t D, const char *who)
{
    memset(w, 0, sizeof *w);
    int64_t pairs = rows * N;
    size_t p = (size_t)(pairs > 0 ? pairs : 1), pd = p * (size_t)D;
    float **const arrays[8] = {&w->x, &w->v, &w->gv, &w->t, &w->lp, &w->q, &w->gq, &w->qmask};
    const size_t counts[8] = {pd, pd, pd, p, p, p, p, p};
    int rc = rl_model_floats(arrays, counts, 8, who);
    if (!rc && !(w->pb = malloc(sizeof(int64_t) * 2 * p)))
        rc = rl_error_set(RL_ENOMEM, "%s: out of memory for %lld scored steps", who, (long long)pairs);
    if (rc) {
        rl_flow_work_free(w);
        return rc;
    }
    w->pk = w->pb + p;
    return RL_OK;
}

/* The state after the scored step i and its time. */
static const float *s_next(const rl_flow_chain *c, const rl_flow_work *w, int64_t i, const float **tn)
{
    int64_t b = w->pb[i], k = w->pk[i], N = c->N;
    *tn = c->t + b * (N + 1) + k + 1;
    return c->x + (b * (N + 1) + k + 1) * c->D;
}

int rl_flow_chain_forward(const rl_flow_chain *c, rl_flow_chain_vel_fn vel, void *kind, int64_t r0,
                          int64_t rows, rl_flow_work *w, int64_t *npairs)
{
    const int64_t N = c->N, D = c->D;
    int64_t n = 0;
    memset(w->q, 0, sizeof(float) * (size_t)(rows * N));
    memset(w->qmask, 0, sizeof(float) * (size_t)(rows * N));
    for (int64_t b = r0; b < r0 + rows; b++)
        for (int64_t k = 0; k < N; k++)
            if (!c->mask || c->mask[b * N + k] != 0.0f) {
                w->pb[n] = b;
                w->pk[n] = k;
                memcpy(w->x + n * D, c->x + (b * (N + 1) + k) * D, sizeof(float) * (size_t)D);
                w->t[n] = c->t[b * (N + 1) + k];
                n++;
            }
    *npairs = n;
    if (n == 0)
        return RL_OK;
    int rc = vel(kind, n, w->pb, w->x, w->t, w->v);
    for (int64_t i = 0; !rc && i < n; i++) {
        int64_t b = w->pb[i], k = w->pk[i];
        const float *tn, *xn = s_next(c, w, i, &tn);
        rc = c->kind->step(w->x + i * D, w->v + i * D, xn, &w->t[i], tn, (double)c->noise[b], 1, D,
                           &w->lp[i], NULL, NULL);
        w->q[(b - r0) * N + k] = w->lp[i];
        w->qmask[(b - r0) * N + k] = 1.0f;
    }
    return rc;
}

int rl_flow_chain_backward(const rl_flow_chain *c, int64_t r0, int64_t n, rl_flow_work *w)
{
    const int64_t N = c->N, D = c->D;
    int rc = RL_OK;
    for (int64_t i = 0; !rc && i < n; i++) {
        int64_t b = w->pb[i];
        float gl = w->gq[(b - r0) * N + w->pk[i]], lp;
        const float *tn, *xn = s_next(c, w, i, &tn);
        rc = c->kind->step(w->x + i * D, w->v + i * D, xn, &w->t[i], tn, (double)c->noise[b], 1, D, &lp,
                           &gl, w->gv + i * D);
    }
    return rc;
}

int rl_flow_fm_read(const rl_dataproto *in, const char *what, const char *x_name, const char *t_name,
                    int64_t B, int64_t D, const float **x, const float **t)
{
    const int64_t dx[2] = {B, D}, dt[1] = {B};
    const rl_tensor *tx = rl_model_input(in, what, x_name, RL_F32, 2, dx);
    const rl_tensor *tt = tx ? rl_model_input(in, what, t_name, RL_F32, 1, dt) : NULL;
    if (!tt)
        return rl_error_code();
    *x = rl_tensor_data((rl_tensor *)tx);
    *t = rl_tensor_data((rl_tensor *)tt);
    int rc = rl_model_input_finite(what, x_name, *x, B * D);
    for (int64_t b = 0; !rc && b < B; b++)
        if (!((*t)[b] >= 0.0f && (*t)[b] <= 1.0f))
            rc = rl_error_set(RL_ERANGE, "%s: %s[%lld] = %g outside [0, 1]", what, t_name, (long long)b,
                              (double)(*t)[b]);
    return rc;
}

int rl_flow_sample_noise(const rl_model_sampling *sp, const char *what, double *noise)
{
    if (sp->num_steps < 1 || sp->num_steps > 10000)
        return rl_error_set(RL_EINVAL, "%s: num_steps %lld outside [1, 10000]", what,
                            (long long)sp->num_steps);
    *noise = sp->greedy ? 0.0 : sp->noise_level;
    if (!sp->greedy && !(*noise > 0.0 && isfinite(*noise)))
        return rl_error_set(RL_EINVAL, "%s: SDE sampling needs noise_level > 0, got %g (greedy "
                                       "sampling is the ODE)", what, sp->noise_level);
    return RL_OK;
}

void rl_flow_normal(uint64_t seed, uint64_t stream, int64_t n, float *out)
{
    rl_rng g;
    rl_rng_init(&g, seed, stream);
    for (int64_t j = 0; j < n; j++)
        out[j] = rl_rng_normal(&g);
}
