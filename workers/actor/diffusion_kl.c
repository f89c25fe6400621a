/* workers/actor/diffusion_kl.c — the KL loss of update_diffusion (Flow-GRPO's
 * beta·KL): per trained step, the KL of the policy's SDE step to the frozen
 * reference's (the pretrained generator, model.init_from), which for two
 * Gaussians of the same std is cv²·mean_j (v − v_ref)²/(2s²)
 * (rl_diffusion_sde_kl). The reference's velocities come from one forward of
 * a->ref; the policy's from a velocity forward_backward over the same
 * (x_k, σ_k, prompt) rows, whose gradients ADD to those of the clipped loss
 * already accumulated, before the one FSDP step. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/algo/diffusion/diffusion.h"
#include "common/nn/models/clip_flow.h"
#include "rlrt/error.h"
#include "rlrt/dtype.h"
#include "rlrt/nn/model.h"
#include "rlrt/tensor.h"
#include "rlrt/dataproto.h"
#include "common/sde/diffusion_sde.h"
#include "workers/actor/actor_internal.h"

typedef struct s_kl_ctx {
    const float *v_ref;       /* (P, D) of the whole call */
    const float *sig, *sn, *nl; /* (P): σ_k, σ_{k+1}, the chain's noise level */
    double coef;              /* kl_loss_coef / the global trained-step count */
    float *kl, *gk;           /* (P) scratch */
    double kl_sum;
} s_kl_ctx;

/* coef·Σ kl over the micro-batch's pairs; dL/dv into grad. */
static int s_kl_loss(void *arg, const rl_model_io *out, rl_model_io *grad, double *loss)
{
    s_kl_ctx *c = arg;
    int64_t D = out->width[RL_Q_VELOCITY], r0 = out->row0, n = out->rows;
    for (int64_t i = 0; i < n; i++) {
        c->gk[i] = (float)c->coef;
        /* the noise level is per chain; the algo function takes one */
        int rc = rl_diffusion_sde_kl(out->q[RL_Q_VELOCITY] + i * D, c->v_ref + (r0 + i) * D,
                                     c->sig + r0 + i, c->sn + r0 + i, (double)c->nl[r0 + i], 1, D,
                                     c->kl + i, c->gk + i, grad->q[RL_Q_VELOCITY] + i * D);
        if (rc)
            return rl_error_wrap(rc, "KL loss");
        c->kl_sum += c->kl[i];
        *loss += c->coef * c->kl[i];
    }
    return RL_OK;
}

/* The (x_k, σ_k, prompt) rows of the trained steps of `in` as a flow-matching
 * batch, with σ_{k+1} and the noise level beside it; *P pairs. */
static int s_pairs(const rl_dataproto *in, rl_dataproto **out, float **sn, float **nl,
                   int64_t *P)
{
    int64_t B = rl_dataproto_rows(in), d1[1] = {B};
    const rl_tensor *ti = rl_dataproto_tensor_shaped(in, RL_CF_PROMPT_IDS, RL_I32, 1, d1);
    const rl_tensor *tl = ti ? rl_dataproto_tensor_shaped(in, RL_CF_LATENTS, RL_F32, 3,
                                                          (int64_t[]){B, -1, -1})
                             : NULL;
    if (!tl)
        return rl_error_code();
    int64_t N = tl->shape[1] - 1, D = tl->shape[2];
    const rl_tensor *ts = rl_dataproto_tensor_shaped(in, RL_CF_SIGMAS, RL_F32, 2,
                                                     (int64_t[]){B, N + 1});
    const rl_tensor *tn = ts ? rl_dataproto_tensor_shaped(in, RL_CF_NOISE_LEVEL, RL_F32, 1, d1)
                             : NULL;
    if (!tn)
        return rl_error_code();
    const rl_tensor *tm = NULL;
    const char *mname = rl_dataproto_tensor(in, RL_CF_KL_STEP_MASK) ? RL_CF_KL_STEP_MASK : RL_CF_STEP_MASK;
    if (rl_dataproto_tensor(in, mname) &&
        !(tm = rl_dataproto_tensor_shaped(in, mname, RL_F32, 2, (int64_t[]){B, N})))
        return rl_error_code();
    const int32_t *ids = rl_tensor_data((rl_tensor *)ti);
    const float *lat = rl_tensor_data((rl_tensor *)tl), *sig = rl_tensor_data((rl_tensor *)ts);
    const float *noise = rl_tensor_data((rl_tensor *)tn);
    const float *mask = tm ? rl_tensor_data((rl_tensor *)tm) : NULL;
    int64_t n = 0;
    for (int64_t i = 0; i < B * N; i++)
        n += !mask || mask[i] != 0.0f;
    rl_dataproto *dp = rl_dataproto_new();
    rl_tensor *pi = dp ? rl_dataproto_new_tensor(dp, RL_CF_PROMPT_IDS, RL_I32, 1, (int64_t[]){n})
                       : NULL;
    rl_tensor *px = pi ? rl_dataproto_new_tensor(dp, RL_CF_X_T, RL_F32, 2, (int64_t[]){n, D})
                       : NULL;
    rl_tensor *ps = px ? rl_dataproto_new_tensor(dp, RL_CF_SIGMA, RL_F32, 1, (int64_t[]){n})
                       : NULL;
    *sn = malloc(sizeof(float) * (size_t)(n > 0 ? n : 1));
    *nl = malloc(sizeof(float) * (size_t)(n > 0 ? n : 1));
    if (!ps || !*sn || !*nl) {
        rl_dataproto_free(dp);
        free(*sn);
        free(*nl);
        *sn = *nl = NULL;
        return ps ? rl_error_set(RL_ENOMEM, "KL loss: out of memory for %lld steps", (long long)n)
                  : rl_error_code();
    }
    int32_t *oi = rl_tensor_data(pi);
    float *ox = rl_tensor_data(px), *os = rl_tensor_data(ps);
    int64_t p = 0;
    for (int64_t b = 0; b < B; b++)
        for (int64_t k = 0; k < N; k++) {
            if (mask && mask[b * N + k] == 0.0f)
                continue;
            oi[p] = ids[b];
            memcpy(ox + p * D, lat + (b * (N + 1) + k) * D, sizeof(float) * (size_t)D);
            os[p] = sig[b * (N + 1) + k];
            (*sn)[p] = sig[b * (N + 1) + k + 1];
            (*nl)[p] = noise[b];
            p++;
        }
    *out = dp;
    *P = n;
    return RL_OK;
}

int rl_actor_diffusion_kl(rl_actor_state *a, const rl_dataproto *in, double coef,
                          double global_steps, double *kl_sum)
{
    *kl_sum = 0;
    rl_dataproto *pairs = NULL, *ref = NULL;
    float *sn = NULL, *nl = NULL;
    int64_t P = 0;
    int rc = s_pairs(in, &pairs, &sn, &nl, &P);
    if (rc || P == 0)
        goto done;
    rl_model_pass pass = {.temperature = 1.0, .micro_batch = a->o.micro_batch};
    if ((rc = rl_model_forward(a->ref, pairs, RL_Q_BIT(RL_Q_VELOCITY), &pass, &ref)))
        goto done;
    const rl_tensor *tv = rl_dataproto_tensor(ref, rl_quantity_name(RL_Q_VELOCITY));
    s_kl_ctx c = {.v_ref = rl_tensor_data((rl_tensor *)tv),
                  .sig = rl_tensor_data(rl_dataproto_tensor(pairs, RL_CF_SIGMA)),
                  .sn = sn, .nl = nl, .coef = coef / global_steps};
    int64_t mb = pass.micro_batch > 0 && pass.micro_batch < P ? pass.micro_batch : P;
    c.kl = malloc(sizeof(float) * (size_t)mb);
    c.gk = malloc(sizeof(float) * (size_t)mb);
    double loss = 0;
    rc = c.kl && c.gk ? rl_model_forward_backward(a->policy, pairs, RL_Q_BIT(RL_Q_VELOCITY), &pass,
                                                  s_kl_loss, &c, &loss)
                      : rl_error_set(RL_ENOMEM, "KL loss: out of memory");
    free(c.kl);
    free(c.gk);
    *kl_sum = c.kl_sum;
done:
    rl_dataproto_free(pairs);
    rl_dataproto_free(ref);
    free(sn);
    free(nl);
    return rc;
}
