/* workers/rollout/rollout.c — the rollout role (contract:
 * workers/rollout/rollout.h): a copy of the policy (an rl_model of the job's
 * model.type) that samples. Its weights arrive from the actor over the
 * weight channel (rlrt/runtime/channel.h), versioned: a new version becomes
 * active only when complete. The sampling settings (the rollout sections,
 * common/schema/rollout.h) are read once, at CONFIGURE; a call carries only
 * `greedy`. What a track adds (tool calls while sampling, the embodied EMA
 * reference) comes through the hook sets of s_hooks (workers/rollout/hooks.h). */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/schema/job.h"
#include "common/schema/rollout.h"
#include "common/schema/trainer.h"
#include "rlrt/dataproto.h"
#include "rlrt/error.h"
#include "rlrt/nn/model.h"
#include "rlrt/runtime/channel.h"
#include "workers/flow_rl.h"
#include "workers/roles.h"
#include "workers/rollout/weights_bcast.h"
#include "workers/rollout/weights_ipc.h"
#include "workers/rollout/hooks.h"
#include "workers/rollout/rollout.h"
#include "workers/rollout/serve_env.h"
#include "common/nn/models/model_device.h"

/* The tracks' hooks on this role: a new track's is one line. */
static const rl_rollout_hooks *const s_hooks[] = {
    &rl_rollout_multi_turn_hooks, /* language models: tool calls while sampling */
    &rl_rollout_flow_ema_hooks,   /* embodied: the EMA reference and its annotation */
};
#define S_NHOOKS (sizeof s_hooks / sizeof s_hooks[0])

typedef struct s_rollout {
    rl_rollout_policy pol; /* the model, the job's sampling, trainer.seed, the active version */
    double weight_timeout_s;
    rl_device dev;        /* rollout.device: where the model generates */
    int active[S_NHOOKS]; /* the job uses s_hooks[i] */
    rl_weight_receiver *recv;
    char endpoint[256];
    int partial;          /* rollout.partial_rollouts: switch weights between decode steps */
    int ipc;              /* the last sync_weights came over CUDA IPC (weights_ipc.c) */
    uint64_t ipc_in_model; /* the IPC version the model holds (0: none since init_model) */
    rl_worker_ctx *ctx;   /* for s_poll_weights */
} s_rollout;

static int s_init(rl_worker_ctx *ctx)
{
    const rl_config *job = ctx->config;
    const rl_rollout_config *o = rl_config_section_get(job, &rl_rollout_section);
    const rl_trainer_config *t = o ? rl_config_section_get(job, &rl_trainer_section) : NULL;
    const rl_rollout_tokens_config *k = NULL; /* the sampling sections the job has */
    const rl_rollout_flow_config *f = NULL;
    if (!t || rl_schema_optional(job, &rl_rollout_tokens_section, (const void **)&k) ||
        rl_schema_optional(job, &rl_rollout_flow_section, (const void **)&f))
        return rl_error_code();
    s_rollout *r = calloc(1, sizeof *r);
    if (!r)
        return rl_error_set(RL_ENOMEM, "rollout: out of memory");
    rl_model_sampling *s = &r->pol.sampling; /* a kind reads its own fields */
    if (k) {
        s->temperature = k->temperature;
        s->top_p = k->top_p;
        s->top_k = k->top_k;
        s->max_new_tokens = k->response_length;
        s->max_batch = k->max_num_seqs;
        r->partial = k->partial_rollouts;
    }
    if (f) {
        s->num_steps = f->num_steps;
        s->noise_level = f->noise_level;
        s->shift = f->shift;
    }
    r->pol.seed = (uint64_t)t->seed;
    r->weight_timeout_s = o->weight_timeout_s;
    r->dev = o->device == 1 ? RL_DEVICE_CUDA : RL_DEVICE_CPU; /* rollout.def: cpu|cuda */
    ctx->user = r;
    for (size_t i = 0; i < S_NHOOKS; i++) {
        int rc = s_hooks[i]->open(ctx, &r->active[i]);
        if (rc)
            return rl_error_wrap(rc, "rollout/%d: %s", ctx->rank, s_hooks[i]->name);
    }
    return RL_OK;
}

static void s_fini(rl_worker_ctx *ctx)
{
    s_rollout *r = ctx->user;
    if (r) {
        for (size_t i = 0; i < S_NHOOKS; i++)
            if (r->active[i])
                s_hooks[i]->close();
        rl_model_free(r->pol.model);
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
    rl_model_free(r->pol.model);
    r->pol.model = rl_model_build(ctx->config, r->pol.seed);
    r->ipc_in_model = 0;
    for (size_t i = 0; i < S_NHOOKS; i++)
        if (r->active[i] && s_hooks[i]->reset)
            s_hooks[i]->reset();
    if (!r->pol.model)
        return rl_error_wrap(rl_error_code(), "rollout/%d: building the model", ctx->rank);
    int rc = rl_model_to_device(r->pol.model, r->dev);
    if (rc) { /* built and loaded on the host, then moved once */
        char why[512];
        snprintf(why, sizeof why, "%s", rl_error_message());
        return RL_CFG_ERROR(ctx->config, &rl_rollout_section, rl_rollout_config, device, rc,
                            "%s on rollout/%d: %s", rl_device_name(r->dev), ctx->rank, why);
    }
    return RL_OK;
}

/* The rollout's state, or NULL with RL_ESTATE before init_model. */
static s_rollout *s_with_model(rl_worker_ctx *ctx, const char *method)
{
    s_rollout *r = ctx->user;
    if (!r->pol.model)
        rl_error_set(RL_ESTATE, "%s: init_model has not run on rollout/%d", method, ctx->rank);
    return r->pol.model ? r : NULL;
}

/* A version v is in the model (rc == RL_OK): it becomes the policy's, and
 * the active hooks see it (on_sync); rc otherwise, as it is. */
static int s_synced(rl_worker_ctx *ctx, s_rollout *r, int rc, uint64_t v)
{
    if (rc)
        return rc;
    r->pol.version = v;
    for (size_t i = 0; !rc && i < S_NHOOKS; i++)
        if (r->active[i] && s_hooks[i]->on_sync)
            rc = s_hooks[i]->on_sync(ctx, &r->pol);
    return rc;
}

static int s_sync_weights(rl_worker_ctx *ctx, const rl_dataproto *in, rl_dataproto **out)
{
    (void)out;
    s_rollout *r = s_with_model(ctx, RL_ROLLOUT_SYNC_WEIGHTS);
    if (!r)
        return rl_error_code();
    const char *ep = rl_dataproto_meta_str(in, RL_ROLLOUT_ENDPOINT, NULL);
    int64_t version;
    if (!ep || rl_dataproto_meta_get_int(in, RL_ROLLOUT_VERSION, 1, INT64_MAX, &version))
        return rl_error_code();
    const char *bid = rl_dataproto_meta_str(in, RL_ROLLOUT_BCAST_ID, "");
    if (*bid) { /* by the broadcast of actor rank 0's communicator (weights_bcast.c) */
        int64_t crank, world;
        uint64_t v = 0;
        int rc = rl_dataproto_meta_get_int(in, RL_ROLLOUT_BCAST_RANK, 1, 64, &crank) ||
                         rl_dataproto_meta_get_int(in, RL_ROLLOUT_BCAST_WORLD, 2, 65, &world)
                     ? rl_error_code()
                     : rl_rollout_weights_bcast(ctx->rank, r->pol.model, bid, (int)crank, (int)world, version,
                                                r->weight_timeout_s, &v);
        r->ipc = 0;
        r->ipc_in_model = 0;
        return s_synced(ctx, r, rc, v);
    }
    const char *ipc = rl_dataproto_meta_str(in, RL_ROLLOUT_IPC_ENDPOINT, "");
    if (*ipc) { /* actor rank 0 on this rank's GPU: CUDA IPC (weights_ipc.c) */
        uint64_t v = 0;
        int rc = rl_rollout_weights_ipc(ctx->rank, r->pol.model, ipc, RL_WEIGHT_IPC_CUDA, version, r->ipc_in_model,
                                        r->weight_timeout_s, &v);
        r->ipc = 1;
        r->ipc_in_model = rc ? 0 : v;
        return s_synced(ctx, r, rc, v);
    }
    r->ipc = 0;
    if (r->recv && strcmp(r->endpoint, ep) != 0) {
        rl_weight_receiver_free(r->recv);
        r->recv = NULL;
    }
    int64_t P = rl_model_num_params(r->pol.model);
    if (!r->recv) {
        if (strlen(ep) >= sizeof r->endpoint)
            return rl_error_set(RL_EINVAL, "argument '%s' is longer than %zu characters",
                                RL_ROLLOUT_ENDPOINT, sizeof r->endpoint - 1);
        /* with its node's address it can be a link of the actor's chain */
        const char *host = rl_dataproto_meta_str(in, RL_ROLLOUT_HOST, NULL);
        char bind[300];
        if (host && (size_t)snprintf(bind, sizeof bind, "tcp://%s:*", host) >= sizeof bind)
            return rl_error_set(RL_EINVAL, "argument '%s' is too long", RL_ROLLOUT_HOST);
        r->recv = rl_weight_receiver_new_ranked(ep, P, ctx->rank, host ? bind : NULL);
        if (!r->recv)
            return rl_error_code();
        snprintf(r->endpoint, sizeof r->endpoint, "%s", ep);
    }
    uint64_t have = 0;
    rl_weight_recv_active(r->recv, &have);
    while (have < (uint64_t)version) {
        int rc = rl_weight_recv_poll(r->recv, (int)(r->weight_timeout_s * 1000));
        if (rc)
            return rl_error_wrap(rc, "rollout/%d waiting for weights v%lld", ctx->rank,
                                 (long long)version);
        rl_weight_recv_active(r->recv, &have);
    }
    /* weights from the network: refused (and the model kept) when not finite */
    char what[64];
    snprintf(what, sizeof what, "weights v%llu from the actor", (unsigned long long)have);
    int rc = rl_model_check_finite(r->pol.model, rl_weight_recv_active(r->recv, NULL), what);
    if (rc)
        return rc;
    if ((rc = rl_model_params_set(r->pol.model, rl_weight_recv_active(r->recv, NULL))))
        return rl_error_wrap(rc, "rollout/%d: weights v%llu to the %s", ctx->rank,
                             (unsigned long long)have, rl_device_name(r->dev));
    return s_synced(ctx, r, RL_OK, have);
}

/* The first hook set of the job that has the callback at `offset` (in
 * rl_rollout_hooks), or NULL. */
static rl_rollout_hook_fn s_hook(const s_rollout *r, size_t offset)
{
    for (size_t i = 0; i < S_NHOOKS; i++) {
        rl_rollout_hook_fn fn;
        memcpy(&fn, (const char *)s_hooks[i] + offset, sizeof fn);
        if (r->active[i] && fn)
            return fn;
    }
    return NULL;
}
#define S_HOOK(r, field) s_hook(r, offsetof(rl_rollout_hooks, field))

/* Partial rollouts (rl_model_sampling.poll_weights, between two decode
 * steps): takes what the weight channel has without waiting; a newer
 * complete version is switched in as sync_weights would (refused when not
 * finite), and sync_weights then finds it active. 1 with its version, 0
 * when there is none. */
static int s_poll_weights(void *arg, uint64_t *version)
{
    s_rollout *r = arg;
    uint64_t have = 0;
    int rc;
    if (r->ipc) { /* over CUDA IPC: the same switch (weights_ipc.c) */
        /* newer than the version the job samples with, as below */
        rc = rl_rollout_weights_ipc_poll(r->ctx->rank, r->pol.model, r->pol.version, &have);
        if (rc <= 0)
            return rc;
        r->pol.version = r->ipc_in_model = have;
        for (size_t i = 0; i < S_NHOOKS; i++)
            if (r->active[i] && s_hooks[i]->on_sync && (rc = s_hooks[i]->on_sync(r->ctx, &r->pol)))
                return rc;
        *version = have;
        return 1;
    }
    rc = rl_weight_recv_poll(r->recv, 0);
    if (rc && rc != RL_ETIMEOUT)
        return rl_error_wrap(rc, "rollout/%d: weights while generating", r->ctx->rank);
    const float *w = rl_weight_recv_active(r->recv, &have);
    if (have <= r->pol.version)
        return 0;
    char what[64];
    snprintf(what, sizeof what, "weights v%llu from the actor", (unsigned long long)have);
    if ((rc = rl_model_check_finite(r->pol.model, w, what)) ||
        (rc = rl_model_params_set(r->pol.model, w)))
        return rc;
    r->pol.version = have;
    for (size_t i = 0; !rc && i < S_NHOOKS; i++)
        if (r->active[i] && s_hooks[i]->on_sync)
            rc = s_hooks[i]->on_sync(r->ctx, &r->pol);
    *version = have;
    return rc ? rc : 1;
}

/* The oldest version of each row's tokens (partial rollouts: a row can hold
 * several) into the row column; `start` for a row with none. */
static int s_row_versions(rl_dataproto *o, uint64_t start, rl_column *vc)
{
    const rl_tensor *tv = rl_dataproto_tensor(o, RL_LM_TOKEN_VERSION);
    const rl_tensor *tl = tv ? rl_dataproto_tensor(o, RL_LM_RESPONSE_LENS) : NULL;
    int64_t B = rl_dataproto_rows(o), R = tv ? tv->shape[1] : 0;
    const int64_t *v = tv ? rl_tensor_data((rl_tensor *)tv) : NULL;
    const int32_t *len = tl ? rl_tensor_data((rl_tensor *)tl) : NULL;
    for (int64_t b = 0; b < B; b++) {
        int64_t oldest = (int64_t)start;
        if (v && len && len[b] > 0) {
            oldest = v[b * R];
            for (int64_t j = 1; j < len[b] && j < R; j++)
                oldest = v[b * R + j] < oldest ? v[b * R + j] : oldest;
        }
        if (rl_column_set_i64(vc, b, oldest))
            return rl_error_code();
    }
    return RL_OK;
}

static int s_generate(rl_worker_ctx *ctx, const rl_dataproto *in, rl_dataproto **out)
{
    s_rollout *r = s_with_model(ctx, RL_ROLLOUT_GENERATE);
    if (!r)
        return rl_error_code();
    int64_t greedy;
    if (rl_dataproto_meta_int(in, RL_ROLLOUT_GREEDY, 0, &greedy))
        return rl_error_code();
    rl_rollout_policy p = r->pol;
    p.sampling.greedy = greedy != 0;
    rl_rollout_hook_fn own = S_HOOK(r, generate);
    if (r->partial && !own && (r->ipc ? rl_rollout_weights_ipc_open() : r->recv != NULL) &&
        !greedy) { /* multi-turn and validation: whole */
        r->ctx = ctx;
        p.sampling.poll_weights = s_poll_weights;
        p.sampling.poll_ctx = r;
        p.sampling.version = p.version;
    }
    rl_dataproto *o = NULL;
    int rc = own ? own(ctx, &p, in, &o) : rl_model_sample(p.model, in, &p.sampling, &o);
    if (rc)
        return rl_error_wrap(rc, "rollout/%d", ctx->rank);
    json_object_set_new(rl_dataproto_meta(o), RL_ROLLOUT_WEIGHTS_VERSION,
                        json_integer((json_int_t)p.version));
    /* every sample carries the weight version that generated it (its
     * oldest token's with partial rollouts) */
    rl_column *vc = rl_dataproto_new_column(o, RL_ROLLOUT_ROW_VERSION, RL_COL_INT64);
    if (vc && s_row_versions(o, p.version, vc))
        vc = NULL;
    if (!vc) {
        rl_dataproto_free(o);
        return rl_error_wrap(rl_error_code(), "rollout/%d: the %s column", ctx->rank,
                             RL_ROLLOUT_ROW_VERSION);
    }
    *out = o;
    return RL_OK;
}

static int s_serve_env(rl_worker_ctx *ctx, const rl_dataproto *in, rl_dataproto **out)
{
    s_rollout *r = ctx->user;
    int rc = rl_rollout_serve_env(ctx, &r->pol, in, out);
    return rc ? rl_error_wrap(rc, "rollout/%d", ctx->rank) : RL_OK;
}

/* A track's method: the first hook set of the job that has it. */
static int s_track_method(rl_worker_ctx *ctx, size_t offset, const char *method, const rl_dataproto *in,
                          rl_dataproto **out)
{
    s_rollout *r = ctx->user;
    rl_rollout_hook_fn fn = s_hook(r, offset);
    if (!fn)
        return rl_error_set(RL_ESTATE, "%s: no track of this job serves it on rollout/%d", method, ctx->rank);
    return fn(ctx, &r->pol, in, out);
}

#define S_TRACK_METHOD(name, field, method)                                                         \
    static int name(rl_worker_ctx *ctx, const rl_dataproto *in, rl_dataproto **out)                \
    {                                                                                               \
        return s_track_method(ctx, offsetof(rl_rollout_hooks, field), method, in, out);             \
    }
S_TRACK_METHOD(s_annotate, annotate, RL_ROLLOUT_ANNOTATE)
S_TRACK_METHOD(s_save_state, save_state, RL_ROLLOUT_SAVE_STATE)
S_TRACK_METHOD(s_load_state, load_state, RL_ROLLOUT_LOAD_STATE)
S_TRACK_METHOD(s_eval_weights, eval_weights, RL_ROLLOUT_EVAL_WEIGHTS)

static const rl_method s_methods[] = {
    {RL_ROLLOUT_INIT_MODEL, s_init_model},
    {RL_ROLLOUT_SYNC_WEIGHTS, s_sync_weights},
    {RL_ROLLOUT_GENERATE, s_generate},
    {RL_ROLLOUT_SERVE_ENV, s_serve_env},
    {RL_ROLLOUT_ANNOTATE, s_annotate},
    {RL_ROLLOUT_SAVE_STATE, s_save_state},
    {RL_ROLLOUT_LOAD_STATE, s_load_state},
    {RL_ROLLOUT_EVAL_WEIGHTS, s_eval_weights},
    /* the embodied recipe's names of the three (workers/flow_rl.h) */
    {RL_ROLLOUT_FLOW_ANNOTATE, s_annotate},
    {RL_ROLLOUT_FLOW_REF_SAVE, s_save_state},
    {RL_ROLLOUT_FLOW_REF_LOAD, s_load_state},
    {NULL, NULL},
};

const rl_worker_role rl_role_rollout = {RL_ROLLOUT_ROLE, s_methods, s_init, s_fini};
