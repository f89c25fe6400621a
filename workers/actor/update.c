/* workers/actor/update.c — the actor's optimiser step (see
 * workers/actor/actor_internal.h): the FSDP step over the flat parameter
 * buffer and the update runner every loss op goes through.
 *
 * FSDP (full shard) on W actor ranks: rank r owns the shard
 * rl_shard_range(P, W, r) of the AdamW state. Each step a rank runs forward
 * and backward on its part of the batch (dp_compute chunks it), then
 * reduce-scatter sums the gradients into its shard, the clip norm is
 * all-reduced, AdamW updates the shard, and all-gather rebuilds the full
 * parameters for the next forward. Losses are normalised by GLOBAL counts the
 * recipe passes, so W ranks compute the same update as one rank. */
#include <math.h>
#include <stdlib.h>

#include "rlrt/error.h"
#include "rlrt/tensor.h"
#include "common/nn/models/model_device.h"
#include "workers/actor/actor_internal.h"

float *rl_actor_host_params(rl_actor_state *a)
{
    if (!a->host_params)
        return rl_model_params(a->policy);
    if (a->host_stale) {
        if (rl_model_params_get(a->policy, a->host_params)) {
            rl_error_wrap(rl_error_code(), "actor/%d: copying the parameters from the %s", a->rank,
                          rl_device_name(a->dev));
            return NULL;
        }
        a->host_stale = 0;
    }
    return a->host_params;
}

int rl_actor_shard_alloc(rl_actor_state *a)
{
    a->shard_dev = a->dev;
    a->shard_grad = a->dev == RL_DEVICE_CPU ? malloc(sizeof(float) * (size_t)(a->end - a->begin + 1))
                                            : rl_device_buffer_new(a->dev, a->end - a->begin, RL_MEM_GRADS);
    return a->shard_grad ? RL_OK
                         : rl_error_set(RL_ENOMEM, "actor/%d: no memory for the gradient shard on the %s",
                                        a->rank, rl_device_name(a->dev));
}

void rl_actor_shard_free(rl_actor_state *a)
{
    if (a->shard_grad && a->shard_dev != RL_DEVICE_CPU)
        rl_device_buffer_free(a->shard_dev, a->shard_grad);
    else
        free(a->shard_grad);
    a->shard_grad = NULL;
}

int rl_actor_all_gather_host(rl_actor_state *a, const float *shard, float *host)
{
    if (a->dev == RL_DEVICE_CPU)
        return rl_comm_all_gather(a->comm, shard, host, a->P);
    float *d = rl_device_buffer_new(a->dev, a->P, RL_MEM_SCRATCH);
    if (!d)
        return rl_error_code();
    int rc = rl_comm_all_gather(a->comm, shard, d, a->P);
    if (!rc)
        rc = rl_device_copy(RL_DEVICE_CPU, host, a->dev, d, sizeof(float) * (size_t)a->P);
    rl_device_buffer_free(a->dev, d);
    return rc;
}

/* The FSDP shards' sums of squares, all-reduced as a float pair (on the
 * device when the communicator is NCCL's). */
static int s_all_reduce_pair(rl_actor_state *a, const float part[2], float tot[2])
{
    if (a->dev == RL_DEVICE_CPU)
        return rl_comm_all_reduce(a->comm, part, tot, 2, RL_REDUCE_SUM);
    float *d = rl_device_buffer_new(a->dev, 2, RL_MEM_SCRATCH);
    if (!d)
        return rl_error_code();
    int rc = rl_device_copy(a->dev, d, RL_DEVICE_CPU, part, 2 * sizeof(float));
    if (!rc)
        rc = rl_comm_all_reduce(a->comm, d, d, 2, RL_REDUCE_SUM);
    if (!rc)
        rc = rl_device_copy(RL_DEVICE_CPU, tot, a->dev, d, 2 * sizeof(float));
    rl_device_buffer_free(a->dev, d);
    return rc;
}

rl_actor_state *rl_actor_get(rl_worker_ctx *ctx, const char *method)
{
    rl_actor_state *a = ctx->user;
    if (!a || !a->policy) {
        rl_error_set(RL_ESTATE, "%s: init_model has not run on actor/%d", method, ctx->rank);
        return NULL;
    }
    return a;
}

int rl_actor_fsdp_step(rl_actor_state *a, double clip, double *grad_norm, double *lr_out)
{
    float *g = rl_model_grads(a->policy), *p = rl_model_params(a->policy);
    int64_t n = a->end - a->begin;
    float *gs = g + a->begin;
    int rc;
    if (a->comm) {
        if ((rc = rl_comm_reduce_scatter(a->comm, g, a->shard_grad, a->P, RL_REDUCE_SUM)))
            return rc;
        gs = a->shard_grad;
    }
    double sumsq = a->opt->ops->grad_sumsq(gs, n); /* the CPU's: rl_grad_sumsq */
    if (a->comm) { /* the shards' sums of squares, carried exactly as a float pair */
        float part[2] = {(float)sumsq, (float)(sumsq - (double)(float)sumsq)}, tot[2];
        if ((rc = s_all_reduce_pair(a, part, tot)))
            return rc;
        sumsq = (double)tot[0] + (double)tot[1];
    }
    float norm = 0;
    if ((rc = rl_grad_clip_apply_on(a->dev, gs, n, sumsq, (float)clip, &norm)))
        return rc;
    double lr = rl_lr_at(&a->lr, a->opt->step);
    if ((rc = rl_adamw_step(a->opt, lr, p + a->begin, gs)))
        return rc;
    if (a->comm && (rc = rl_comm_all_gather(a->comm, p + a->begin, p, a->P)))
        return rc;
    rl_model_zero_grad(a->policy);
    a->host_stale = a->host_params != NULL;
    *grad_norm = norm;
    *lr_out = lr;
    return RL_OK;
}

int rl_actor_update(rl_worker_ctx *ctx, const rl_actor_loss_op *op, const rl_dataproto *in,
                    rl_dataproto **out)
{
    rl_actor_state *a = rl_actor_get(ctx, op->method);
    if (!a)
        return rl_error_code();
    if (op->diffusion && !a->diffusion)
        return rl_error_set(RL_ESTATE, "%s: the job has no %s section (%s, ...)", op->method,
                            rl_actor_diffusion_section.name,
                            RL_CFG_PATH(&rl_actor_diffusion_section, rl_actor_diffusion_config, clip_range));
    rl_actor_step s = {.a = a, .in = in, .ctx = calloc(1, op->ctx_size ? op->ctx_size : 1),
                       .pass = {.temperature = 1.0, .micro_batch = a->o.micro_batch},
                       .clip = op->diffusion ? a->df.max_grad_norm : a->o.grad_clip};
    if (!s.ctx)
        return rl_error_set(RL_ENOMEM, "actor/%d: out of memory", ctx->rank);
    s.loss_ctx = s.ctx;
    int rc = op->prepare(&s);
    if (!rc)
        rc = rl_model_forward_backward(a->policy, s.batch ? s.batch : in, s.want, &s.pass, s.loss,
                                       s.loss_ctx, &s.value);
    else
        s.loss = NULL; /* a bad request: no collective */
    if (!rc && op->extra)
        rc = op->extra(&s);
    double gnorm = 0, lr = 0;
    json_t *meta = NULL;
    if (s.loss) { /* every rank takes part in the collectives, even after an error of its own */
        if (rc)
            rl_model_zero_grad(a->policy);
        int rc2 = rl_actor_fsdp_step(a, s.clip, &gnorm, &lr);
        if (rc || rc2)
            rc = rl_error_wrap(rc ? rc : rc2, "actor/%d", ctx->rank);
        if (!rc && !(meta = op->reply(&s)))
            rc = rl_error_set(RL_ENOMEM, "actor/%d: out of memory", ctx->rank);
    }
    if (op->release)
        op->release(s.ctx);
    free(s.ctx);
    rl_dataproto_free(s.batch);
    if (rc)
        return rc;
    json_object_set_new(meta, RL_ACTOR_M_LOSS, json_real(s.value));
    json_object_set_new(meta, RL_ACTOR_M_GRAD_NORM, json_real(gnorm));
    json_object_set_new(meta, RL_ACTOR_M_LR, json_real(lr));
    *out = rl_dataproto_new_meta(meta);
    return *out ? RL_OK : rl_error_code();
}

const float *rl_actor_f32(const rl_dataproto *in, const char *name, int64_t B, int64_t D)
{
    const rl_tensor *t = D > 0 ? rl_dataproto_tensor_shaped(in, name, RL_F32, 2, (int64_t[]){B, D})
                               : rl_dataproto_tensor_shaped(in, name, RL_F32, 1, (int64_t[]){B});
    if (!t)
        return NULL;
    const float *p = rl_tensor_data(t);
    int64_t n = B * (D > 0 ? D : 1);
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(p[i])) {
            rl_error_set(RL_ENUMERIC, "tensor '%s' holds %g at [%lld]", name, (double)p[i], (long long)i);
            return NULL;
        }
    return p;
}

void rl_actor_share(float *grad, int64_t n, double local, double kept, double global, double *loss)
{
    double scale = global > 0 ? kept / global : 0;
    for (int64_t i = 0; i < n; i++)
        grad[i] = (float)(grad[i] * scale);
    *loss += local * scale;
}
