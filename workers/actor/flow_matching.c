/* workers/actor/flow_matching.c — flow matching (loss op "flow_matching",
 * method flow_matching_step; contract: workers/actor/actor.h), the
 * pretraining and warm start of the diffusion and embodied tracks: any kind
 * with RL_Q_VELOCITY, the kind's velocity inputs + RL_ACTOR_VELOCITY_TARGET
 * (B, D) f32; loss Σ (v − target)² / (global rows · D), gradients clipped
 * at the flow and diffusion section's ppo_max_grad_norm. The loss itself
 * (rl_actor_fm_loss) is also the embodied demonstration anchor's. */
#include <stdint.h>

#include "rlrt/error.h"
#include "rlrt/tensor.h"
#include "workers/actor/actor_internal.h"

int rl_actor_fm_loss(void *arg, const rl_model_io *out, rl_model_io *grad, double *loss)
{
    rl_actor_fm_ctx *c = arg;
    int64_t D = out->width[RL_Q_VELOCITY], n = out->rows * D;
    if (D != c->D) /* the target is (B, c->D): indexed with the model's width it would be overread */
        return rl_error_set(RL_ESHAPE, "tensor '%s': expected %lld floats per row (the model's "
                                       "velocity), got %lld", c->name, (long long)D, (long long)c->D);
    const float *v = out->q[RL_Q_VELOCITY], *t = c->target + out->row0 * D;
    double s = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = (double)v[i] - t[i];
        s += d * d;
        grad->q[RL_Q_VELOCITY][i] = (float)(2.0 * d / c->norm);
    }
    *loss += s / c->norm;
    return RL_OK;
}

static int s_prepare(rl_actor_step *s)
{
    rl_actor_fm_ctx *c = s->ctx;
    int64_t grows, B = rl_dataproto_rows(s->in);
    if (rl_dataproto_meta_get_int(s->in, RL_ACTOR_GLOBAL_ROWS, 1, INT64_MAX, &grows))
        return rl_error_code();
    const rl_tensor *t = rl_dataproto_tensor_shaped(s->in, RL_ACTOR_VELOCITY_TARGET, RL_F32, 2,
                                                    (int64_t[]){B, -1});
    if (!t || (t->shape[1] > 0 && !rl_actor_f32(s->in, RL_ACTOR_VELOCITY_TARGET, B, t->shape[1])))
        return rl_error_code();
    *c = (rl_actor_fm_ctx){rl_tensor_data(t), (double)grows * (double)t->shape[1], t->shape[1],
                           RL_ACTOR_VELOCITY_TARGET};
    s->want = RL_Q_BIT(RL_Q_VELOCITY);
    s->loss = rl_actor_fm_loss;
    return RL_OK;
}

static json_t *s_reply(const rl_actor_step *s)
{
    (void)s;
    return json_object();
}

const rl_actor_loss_op rl_actor_loss_flow_matching = {
    RL_ACTOR_LOSS_FLOW_MATCHING, RL_ACTOR_FLOW_STEP, sizeof(rl_actor_fm_ctx), 1,
    .prepare = s_prepare, .reply = s_reply};
