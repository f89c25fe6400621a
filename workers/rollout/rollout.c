/* workers/rollout/rollout.c — the rollout role: a copy of the policy that
 * samples responses with a KV cache. Its weights arrive from the actor over
 * the weight channel (rlrt/runtime/channel.h), versioned: a new version
 * becomes active only when complete.
 *
 * Methods:
 *   init_model    build the model (model.* of the job; weights follow by sync)
 *   sync_weights  meta endpoint, version: receive that version from the actor
 *   generate      tensors prompts (B,P) i32, prompt_lens (B) i32, row_seeds
 *                 (B) i64; meta temperature, top_p, top_k, greedy,
 *                 max_new_tokens, seed → responses (B,R) i32, response_lens
 *                 (B) i32, response_logp (B,R) f32, response_entropy (B,R) f32
 */
#include <stdlib.h>
#include <string.h>

#include "../lm_common.h"
#include "../roles.h"
#include "rlrt/rlrt.h"
#include "rlrt/nn/generate.h"
#include "rlrt/runtime/channel.h"

typedef struct s_rollout {
    rl_lm *model;
    rl_weight_receiver *recv;
    char endpoint[256];
    uint64_t version;
} s_rollout;

static int s_init(rl_worker_ctx *ctx)
{
    ctx->user = calloc(1, sizeof(s_rollout));
    return ctx->user ? RL_OK : rl_error_set(RL_ENOMEM, "rollout: out of memory");
}

static void s_fini(rl_worker_ctx *ctx)
{
    s_rollout *r = ctx->user;
    if (r) {
        rl_lm_free(r->model);
        rl_weight_receiver_free(r->recv);
        free(r);
    }
    ctx->user = NULL;
}

static int s_init_model(rl_worker_ctx *ctx, const rl_dataproto *in, rl_dataproto **out)
{
    (void)in;
    (void)out;
    s_rollout *r = ctx->user;
    rl_lm_free(r->model);
    r->model = rl_job_lm_build(ctx->config);
    return r->model ? RL_OK : rl_error_wrap(rl_error_code(), "rollout/%d: building the model", ctx->rank);
}

static int s_sync_weights(rl_worker_ctx *ctx, const rl_dataproto *in, rl_dataproto **out)
{
    (void)out;
    s_rollout *r = ctx->user;
    if (!r->model)
        return rl_error_set(RL_ESTATE, "rollout/%d: init_model has not run", ctx->rank);
    const char *ep = rl_dataproto_meta_str(in, "endpoint", NULL);
    int64_t version;
    if (!ep || rl_dataproto_meta_int(in, "version", 0, &version))
        return rl_error_set(RL_EINVAL, "sync_weights needs meta 'endpoint' and 'version'");
    if (r->recv && strcmp(r->endpoint, ep) != 0) {
        rl_weight_receiver_free(r->recv);
        r->recv = NULL;
    }
    int64_t P = rl_lm_num_params(r->model);
    if (!r->recv) {
        r->recv = rl_weight_receiver_new(ep, P);
        if (!r->recv)
            return rl_error_code();
        snprintf(r->endpoint, sizeof r->endpoint, "%s", ep);
    }
    uint64_t have = 0;
    rl_weight_recv_active(r->recv, &have);
    while (have < (uint64_t)version) {
        int rc = rl_weight_recv_poll(r->recv, 120000);
        if (rc)
            return rl_error_wrap(rc, "rollout/%d waiting for weights v%lld", ctx->rank,
                                 (long long)version);
        rl_weight_recv_active(r->recv, &have);
    }
    memcpy(rl_lm_params(r->model), rl_weight_recv_active(r->recv, NULL), sizeof(float) * (size_t)P);
    r->version = have;
    return RL_OK;
}

static int s_generate(rl_worker_ctx *ctx, const rl_dataproto *in, rl_dataproto **out)
{
    s_rollout *r = ctx->user;
    if (!r->model)
        return rl_error_set(RL_ESTATE, "rollout/%d: init_model has not run", ctx->rank);
    const rl_tensor *pr = rl_dataproto_tensor_typed(in, "prompts", RL_I32);
    const rl_tensor *pl = pr ? rl_dataproto_tensor_typed(in, "prompt_lens", RL_I32) : NULL;
    const rl_tensor *sd = pl ? rl_dataproto_tensor_typed(in, "row_seeds", RL_I64) : NULL;
    if (!sd)
        return rl_error_code();
    rl_lm_sampling s;
    rl_lm_sampling_default(&s);
    double temp, top_p;
    int64_t top_k, greedy, max_new, seed;
    if (rl_dataproto_meta_double(in, "temperature", 1.0, &temp) || rl_dataproto_meta_double(in, "top_p", 1.0, &top_p) ||
        rl_dataproto_meta_int(in, "top_k", 0, &top_k) || rl_dataproto_meta_int(in, "greedy", 0, &greedy) ||
        rl_dataproto_meta_int(in, "max_new_tokens", 32, &max_new) || rl_dataproto_meta_int(in, "seed", 0, &seed))
        return rl_error_code();
    int B = (int)pr->shape[0], P = (int)pr->shape[1], R = (int)max_new;
    const rl_lm_config *cfg = rl_lm_get_config(r->model);
    int32_t stop = cfg->eos_token_id;
    s.temperature = (float)temp;
    s.top_p = (float)top_p;
    s.top_k = (int)top_k;
    s.greedy = (int)greedy;
    s.max_new_tokens = R;
    s.stop_tokens = stop >= 0 ? &stop : NULL;
    s.num_stop_tokens = stop >= 0 ? 1 : 0;
    s.seed = (uint64_t)seed;
    rl_dataproto *o = rl_dataproto_new();
    int64_t shape[2] = {B, R};
    rl_tensor *tok = rl_dataproto_new_tensor(o, "responses", RL_I32, 2, shape);
    rl_tensor *lens = rl_dataproto_new_tensor(o, "response_lens", RL_I32, 1, shape);
    rl_tensor *lp = rl_dataproto_new_tensor(o, "response_logp", RL_F32, 2, shape);
    rl_tensor *en = rl_dataproto_new_tensor(o, "response_entropy", RL_F32, 2, shape);
    int *ilens = malloc(sizeof(int) * (size_t)(B ? B : 1));
    const int32_t *plens32 = rl_tensor_data(pl);
    int *plens = malloc(sizeof(int) * (size_t)(B ? B : 1));
    for (int b = 0; b < B; b++)
        plens[b] = plens32[b];
    int rc = B == 0 ? RL_OK
                    : rl_lm_generate(r->model, B, P, rl_tensor_data(pr), plens,
                                     (const uint64_t *)rl_tensor_data(sd), &s, rl_tensor_data(tok),
                                     rl_tensor_data(lp), rl_tensor_data(en), ilens);
    int32_t *l32 = rl_tensor_data(lens);
    for (int b = 0; b < B; b++)
        l32[b] = ilens[b];
    free(ilens);
    free(plens);
    if (rc) {
        rl_dataproto_free(o);
        return rl_error_wrap(rc, "rollout/%d generate", ctx->rank);
    }
    json_object_set_new(rl_dataproto_meta(o), "weights_version", json_integer((json_int_t)r->version));
    *out = o;
    return RL_OK;
}

static const rl_method s_methods[] = {
    {"init_model", s_init_model},
    {"sync_weights", s_sync_weights},
    {"generate", s_generate},
    {NULL, NULL},
};

const rl_worker_role rl_role_rollout = {"rollout", s_methods, s_init, s_fini};
