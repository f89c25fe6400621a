/* flow_mlp.c — the residual-MLP velocity trunk of the flow model kinds (see
 * flow_mlp_internal.h). */
#include "common/nn/models/flow_mlp_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rlrt/error.h"
#include "common/nn/engine/ops.h"

int rl_flow_mlp_init(rl_flow_mlp *t, int D, int Hd, int L, int E, const char *who)
{
    memset(t, 0, sizeof *t);
    t->D = D;
    t->Hd = Hd;
    t->L = L;
    t->E = E;
    t->dev = RL_DEVICE_CPU;
    t->nn = rl_nn_ops_get(RL_DEVICE_CPU);
    t->fc1_w = calloc((size_t)(L + 1), sizeof(int64_t));
    t->fc1_b = calloc((size_t)(L + 1), sizeof(int64_t));
    t->fc2_w = calloc((size_t)(L + 1), sizeof(int64_t));
    t->fc2_b = calloc((size_t)(L + 1), sizeof(int64_t));
    if (!t->fc1_w || !t->fc1_b || !t->fc2_w || !t->fc2_b)
        return rl_error_set(RL_ENOMEM, "%s: out of memory", who);
    return RL_OK;
}

/* The activations: one block from temb. */
static void s_free_acts(rl_flow_mlp *t)
{
    rl_model_floats_free(t->dev, t->temb);
    t->temb = NULL;
    t->cap = 0;
}

void rl_flow_mlp_on(rl_flow_mlp *t, rl_device dev, const rl_nn_ops *nn)
{
    s_free_acts(t);
    t->dev = dev;
    t->nn = nn;
}

void rl_flow_mlp_free(rl_flow_mlp *t)
{
    s_free_acts(t);
    free(t->fc1_w);
    free(t->fc1_b);
    free(t->fc2_w);
    free(t->fc2_b);
    t->fc1_w = t->fc1_b = t->fc2_w = t->fc2_b = NULL;
}

int rl_flow_mlp_add_head(rl_flow_mlp *t, rl_model_base *b)
{
    int rc;
    if ((rc = rl_model_base_add(b, "in.weight", 2, t->Hd, t->D, &t->in_w)) ||
        (rc = rl_model_base_add(b, "in.bias", 1, t->Hd, 0, &t->in_b)) ||
        (rc = rl_model_base_add(b, "time.weight", 2, t->Hd, t->E, &t->t_w)) ||
        (rc = rl_model_base_add(b, "time.bias", 1, t->Hd, 0, &t->t_b)))
        return rc;
    return RL_OK;
}

int rl_flow_mlp_add_tail(rl_flow_mlp *t, rl_model_base *b)
{
    int rc = RL_OK;
    char name[64];
    for (int l = 0; l < t->L && !rc; l++) {
        snprintf(name, sizeof name, "blocks.%d.fc1.weight", l);
        if ((rc = rl_model_base_add(b, name, 2, t->Hd, t->Hd, &t->fc1_w[l])))
            break;
        snprintf(name, sizeof name, "blocks.%d.fc1.bias", l);
        if ((rc = rl_model_base_add(b, name, 1, t->Hd, 0, &t->fc1_b[l])))
            break;
        snprintf(name, sizeof name, "blocks.%d.fc2.weight", l);
        if ((rc = rl_model_base_add(b, name, 2, t->Hd, t->Hd, &t->fc2_w[l])))
            break;
        snprintf(name, sizeof name, "blocks.%d.fc2.bias", l);
        rc = rl_model_base_add(b, name, 1, t->Hd, 0, &t->fc2_b[l]);
    }
    if (!rc && !(rc = rl_model_base_add(b, "out.weight", 2, t->D, t->Hd, &t->out_w)))
        rc = rl_model_base_add(b, "out.bias", 1, t->D, 0, &t->out_b);
    return rc;
}

int rl_flow_mlp_reserve(rl_flow_mlp *t, int64_t n, const char *who)
{
    if (n < 1)
        n = 1;
    if (n <= t->cap)
        return RL_OK;
    s_free_acts(t);
    size_t nH = (size_t)n * (size_t)t->Hd, L = (size_t)t->L, L1 = L ? L : 1;
    float **const arrays[7] = {&t->temb, &t->cond, &t->h, &t->sh, &t->a, &t->g, &t->scratch};
    const size_t counts[7] = {(size_t)n * (size_t)t->E, nH, (L + 1) * nH, (L + 1) * nH, L1 * nH, L1 * nH, 4 * nH};
    int rc = rl_model_floats_on(t->dev, arrays, counts, 7, who);
    t->cap = rc ? 0 : n;
    return rc;
}

void rl_flow_mlp_cond(rl_flow_mlp *t, const float *P, int64_t n, const float *tt)
{
    t->n = n;
    t->nn->time_embed(t->temb, tt, n, t->E);
    t->nn->linear_forward(t->cond, t->temb, P + t->t_w, P + t->t_b, (int)n, t->E, t->Hd);
}

void rl_flow_mlp_trunk(rl_flow_mlp *t, const float *P, const float *x, float *out)
{
    const int Hd = t->Hd, L = t->L, D = t->D, N = (int)t->n;
    const int64_t nH = t->n * Hd;
    const rl_nn_ops *o = t->nn;
    t->x = x;
    o->linear_forward(t->h, x, P + t->in_w, P + t->in_b, N, D, Hd);
    o->add_inplace(t->h, t->cond, nH);
    for (int l = 0; l < L; l++) {
        float *h = t->h + l * nH, *sh = t->sh + l * nH, *a = t->a + l * nH, *g = t->g + l * nH;
        o->silu_forward(sh, h, nH);
        o->linear_forward(a, sh, P + t->fc1_w[l], P + t->fc1_b[l], N, Hd, Hd);
        o->add_inplace(a, t->cond, nH);
        o->silu_forward(g, a, nH);
        float *hn = t->h + (l + 1) * nH;
        o->linear_forward(hn, g, P + t->fc2_w[l], P + t->fc2_b[l], N, Hd, Hd);
        o->add_inplace(hn, h, nH);
    }
    o->silu_forward(t->sh + L * nH, t->h + L * nH, nH);
    o->linear_forward(out, t->sh + L * nH, P + t->out_w, P + t->out_b, N, Hd, D);
}

float *rl_flow_mlp_backward(rl_flow_mlp *t, const float *P, float *G, const float *dout)
{
    const int Hd = t->Hd, L = t->L, E = t->E, D = t->D, N = (int)t->n;
    const int64_t nH = t->n * Hd;
    const size_t bytes = sizeof(float) * (size_t)nH;
    const rl_nn_ops *o = t->nn;
    float *dh = t->scratch, *dcond = dh + nH, *t1 = dcond + nH, *t2 = t1 + nH;
    rl_device_zero(t->dev, dh, bytes);
    rl_device_zero(t->dev, dcond, bytes);
    /* out = out(silu(h_L)) */
    rl_device_zero(t->dev, t1, bytes);
    o->linear_backward(t1, G + t->out_w, G + t->out_b, dout, t->sh + L * nH, P + t->out_w, N,
                       Hd, D);
    o->silu_backward(dh, t1, t->h + L * nH, nH);
    for (int l = L - 1; l >= 0; l--) {
        /* h_{l+1} = h_l + fc2(g_l): dh already holds the residual path */
        rl_device_zero(t->dev, t1, bytes);
        o->linear_backward(t1, G + t->fc2_w[l], G + t->fc2_b[l], dh, t->g + l * nH,
                           P + t->fc2_w[l], N, Hd, Hd);
        rl_device_zero(t->dev, t2, bytes); /* da: g = silu(a) */
        o->silu_backward(t2, t1, t->a + l * nH, nH);
        o->add_inplace(dcond, t2, nH); /* a = fc1(silu(h_l)) + cond */
        rl_device_zero(t->dev, t1, bytes);
        o->linear_backward(t1, G + t->fc1_w[l], G + t->fc1_b[l], t2, t->sh + l * nH,
                           P + t->fc1_w[l], N, Hd, Hd);
        o->silu_backward(dh, t1, t->h + l * nH, nH);
    }
    /* h_0 = in(x) + cond */
    o->linear_backward(NULL, G + t->in_w, G + t->in_b, dh, t->x, P + t->in_w, N, D, Hd);
    o->add_inplace(dcond, dh, nH);
    /* cond = time(temb) + … */
    o->linear_backward(NULL, G + t->t_w, G + t->t_b, dcond, t->temb, P + t->t_w, N, E, Hd);
    return dcond;
}
