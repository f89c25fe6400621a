/* workers/actor/actor.c — the actor role (contract: workers/actor/actor.h): the
 * trainable policy and a frozen reference copy, both rl_models of the job's
 * model.type, FSDP over the flat parameter buffer (update.c), the weight
 * channel to the rollout ranks and checkpoints.
 *
 * Its methods are generic: set-up, the log-probs (any kind's forward), one
 * `update` that runs the loss op a request names (meta RL_ACTOR_LOSS; the
 * ops are the tracks', RL_ACTOR_LOSS_OPS in actor_internal.h, each also
 * served under its own method name), weights, checkpoints. The config (the
 * actor sections, rollout.temperature, trainer.seed) is read once, at
 * CONFIGURE; calls carry only per-call arguments. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/core/util.h"
#include "common/nn/engine/checkpoint.h"
#include "common/nn/engine/optim.h"
#include "common/schema/job.h"
#include "common/schema/rollout.h"
#include "common/schema/trainer.h"
#include "rlrt/config.h"
#include "rlrt/dataproto.h"
#include "rlrt/dtype.h"
#include "rlrt/error.h"
#include "rlrt/nn/model.h"
#include "rlrt/nn/params.h"
#include "rlrt/runtime/channel.h"
#include "rlrt/runtime/channel_ipc.h"
#include "rlrt/runtime/collective.h"
#include "workers/actor/actor.h"
#include "common/nn/models/model_device.h"
#include "workers/actor/actor_internal.h"
#include "workers/roles.h"

typedef rl_actor_state s_actor;

static void s_free_models(s_actor *a)
{
    rl_model_free(a->policy);
    rl_model_free(a->ref);
    rl_comm_destroy(a->comm);
    rl_actor_shard_free(a);
    rl_adamw_free(a->opt);
    rl_weight_sender_free(a->wsend);
    rl_weight_ipc_sender_free(a->wipc);
    rl_weight_bcast_free(a->wbcast);
    rl_comm_destroy(a->bcomm);
    free(a->host_params);
    a->host_params = NULL;
    a->host_stale = 0;
    a->policy = a->ref = NULL;
    a->comm = NULL;
    a->shard_grad = NULL;
    a->opt = NULL;
    a->wsend = NULL;
    a->wipc = NULL;
    a->wbcast = NULL;
    a->bcomm = NULL;
}

/* The job's sections into the state: the ENUM keys' names as the
 * optimiser's, the loss's and the KL's enums. */
static int s_read_config(const rl_config *job, s_actor *a)
{
    const rl_actor_config *o = rl_config_section_get(job, &rl_actor_section);
    const rl_trainer_config *t = o ? rl_config_section_get(job, &rl_trainer_section) : NULL;
    if (!t)
        return rl_error_code();
    a->job = job;
    a->o = *o;
    a->seed = (uint64_t)t->seed;
    const rl_rollout_tokens_config *k = NULL;
    const rl_actor_diffusion_config *df = NULL;
    if (rl_schema_optional(job, &rl_rollout_tokens_section, (const void **)&k) ||
        rl_schema_optional(job, &rl_actor_diffusion_section, (const void **)&df))
        return rl_error_code();
    a->temperature = k ? k->temperature : 1.0;
    if (df) {
        a->df = *df;
        a->diffusion = 1;
    }
    rl_ppo_loss_cfg_default(&a->loss);
    memset(&a->lr, 0, sizeof a->lr);
    if (rl_loss_agg_parse(o->loss_agg_name, &a->loss.agg) ||
        rl_kl_kind_parse(o->kl_loss_type_name, &a->loss.kl_kind) || rl_lr_kind_parse(o->lr_schedule_name, &a->lr.kind))
        return rl_error_code();
    a->loss.clip_ratio_low = o->clip_low;
    a->loss.clip_ratio_high = o->clip_high;
    a->loss.clip_ratio_c = o->clip_c;
    a->loss.entropy_coeff = o->entropy_coeff;
    a->loss.kl_loss_coef = o->use_kl_loss ? o->kl_loss_coef : 0.0;
    if (a->lr.kind != RL_LR_CONSTANT && o->total_training_steps < 1) /* a recipe left -1 */
        return RL_CFG_ERROR(job, &rl_actor_section, rl_actor_config, total_training_steps, RL_ECONFIG,
                            "the '%s' schedule needs the number of optimiser steps, got %lld",
                            o->lr_schedule_name, (long long)o->total_training_steps);
    a->lr.base_lr = o->lr;
    a->lr.warmup_steps = o->warmup;
    a->lr.total_steps = o->total_training_steps;
    return RL_OK;
}

static int s_init(rl_worker_ctx *ctx)
{
    s_actor *a = calloc(1, sizeof *a);
    if (!a)
        return rl_error_set(RL_ENOMEM, "actor: out of memory");
    int rc = s_read_config(ctx->config, a);
    if (rc) {
        free(a);
        return rc;
    }
    ctx->user = a;
    return RL_OK;
}

static void s_fini(rl_worker_ctx *ctx)
{
    s_actor *a = ctx->user;
    if (a)
        s_free_models(a);
    free(a);
    ctx->user = NULL;
}

/* ---- set-up ------------------------------------------------------------------------------ */

/* On rank 0 (as ncclGetUniqueId): the id of a communicator whose rendezvous
 * endpoint is on this host; the recipe hands its text to every rank. */
static int s_comm_id_create(rl_worker_ctx *ctx, const rl_dataproto *in, rl_dataproto **out)
{
    (void)ctx;
    const char *host = rl_dataproto_meta_str(in, RL_ACTOR_HOST, NULL);
    if (!host)
        return rl_error_code();
    char ep[300];
    snprintf(ep, sizeof ep, "tcp://%s", host);
    rl_comm_id id;
    if (rl_comm_id_create(&id, ep))
        return rl_error_code();
    *out = rl_dataproto_new_meta(json_pack("{s:s}", RL_ACTOR_COMM_ID, rl_comm_id_string(&id)));
    return *out ? RL_OK : rl_error_code();
}

/* lr × scale for the value head's views (rlrt/nn/model.h: value_head.*). */
static int s_set_value_lr(const rl_config *job, rl_adamw *opt, const rl_param_manifest *man, double scale)
{
    double *sc = malloc(sizeof(double) * ((size_t)man->count + 1));
    if (!sc)
        return rl_error_set(RL_ENOMEM, "out of memory");
    int found = 0;
    for (int i = 0; i < man->count; i++) {
        int v = strncmp(man->views[i].name, RL_MODEL_VALUE_HEAD_PREFIX, strlen(RL_MODEL_VALUE_HEAD_PREFIX)) == 0;
        sc[i] = v ? scale : 1.0;
        found += v;
    }
    int rc = found ? rl_adamw_set_lr_scale(opt, man, sc)
                   : RL_CFG_ERROR(job, &rl_actor_section, rl_actor_config, value_lr, RL_ECONFIG,
                                  "a value head's lr, but the model has no value head (no view named %s*)",
                                  RL_MODEL_VALUE_HEAD_PREFIX);
    free(sc);
    return rc;
}


/* actor.device: the policy and the reference move to the GPU once, after
 * they are built and loaded on the host; the host keeps a copy of the
 * parameters for weight sync and checkpoints. With several GPU ranks,
 * FSDP's collectives run over NCCL on the device buffers (rl_comm_options.nccl;
 * two ranks on one GPU need NCCL >= 2.30 and NCCL_MULTI_RANK_GPU_ENABLE=1). */
static int s_place_models(rl_worker_ctx *ctx, s_actor *a)
{
    a->dev = a->o.device == RL_ACTOR_DEVICE_CUDA ? RL_DEVICE_CUDA : RL_DEVICE_CPU;
    if (a->dev == RL_DEVICE_CPU)
        return RL_OK;
    int rc = rl_model_to_device(a->policy, a->dev);
    if (!rc)
        rc = rl_model_to_device(a->ref, a->dev);
    if (rc) {
        char why[512];
        snprintf(why, sizeof why, "%s", rl_error_message());
        return RL_CFG_ERROR(ctx->config, &rl_actor_section, rl_actor_config, device, rc,
                            "cuda on actor/%d: %s", a->rank, why);
    }
    if (!(a->host_params = malloc(sizeof(float) * (size_t)(a->P + 1))))
        return rl_error_set(RL_ENOMEM, "actor/%d: out of memory for the host copy of the parameters",
                            a->rank);
    a->host_stale = 1;
    return RL_OK;
}

static int s_init_model(rl_worker_ctx *ctx, const rl_dataproto *in, rl_dataproto **out)
{
    (void)out;
    s_actor *a = ctx->user;
    s_free_models(a);
    const rl_config *job = ctx->config;
    a->policy = rl_model_build(job, a->seed);
    a->ref = a->policy ? rl_model_build(job, a->seed) : NULL;
    if (!a->ref)
        return rl_error_wrap(rl_error_code(), "actor/%d: building the model", ctx->rank);
    a->P = rl_model_num_params(a->policy);
    a->W = ctx->world_size;
    a->rank = ctx->rank;
    int rc = s_place_models(ctx, a);
    if (rc)
        return rc;
    if (a->W > 1) {
        const char *id_text = rl_dataproto_meta_str(in, RL_ACTOR_COMM_ID, NULL);
        rl_comm_id id;
        if (!id_text)
            return rl_error_wrap(RL_EINVAL, "%d actor ranks need a communicator", a->W);
        if (rl_comm_id_parse(&id, id_text))
            return rl_error_code();
        rl_comm_options co;
        rl_comm_options_default(&co);
        co.timeout_s = a->o.comm_timeout_s;
        co.nccl = a->dev == RL_DEVICE_CUDA; /* device buffers: NCCL */
        a->comm = rl_comm_init_rank(&id, a->W, a->rank, &co);
        if (!a->comm)
            return rl_error_wrap(rl_error_code(), "actor/%d: joining the FSDP communicator", a->rank);
    }
    rl_shard_range(a->P, a->W, a->rank, &a->begin, &a->end);
    if ((rc = rl_actor_shard_alloc(a)))
        return rc;
    rl_adamw_config oc = rl_adamw_config_default();
    oc.weight_decay = a->o.weight_decay;
    oc.beta1 = a->o.beta1;
    oc.beta2 = a->o.beta2;
    oc.eps = a->o.eps;
    const rl_param_manifest *man = rl_model_manifest(a->policy);
    a->opt = rl_adamw_new_on(&oc, man, a->begin, a->end, a->dev);
    if (!a->opt)
        return rl_error_wrap(rl_error_code(), "actor/%d: the optimiser", a->rank);
    rc = rl_adamw_set_no_decay(a->opt, man, rl_param_pred_no_decay_1d, NULL);
    if (!rc && a->o.value_lr > 0) /* the critic's own lr (RLinf's value_lr): views value_head.* */
        rc = s_set_value_lr(job, a->opt, man, a->o.value_lr / a->o.lr);
    return rc;
}

/* ---- log-probs ------------------------------------------------------------------------------ */

static int s_compute_log_prob(rl_worker_ctx *ctx, const rl_dataproto *in, rl_dataproto **out)
{
    s_actor *a = rl_actor_get(ctx, RL_ACTOR_COMPUTE_LOG_PROB);
    if (!a)
        return rl_error_code();
    const char *which = rl_dataproto_meta_str(in, RL_ACTOR_WHICH, RL_ACTOR_WHICH_POLICY);
    int64_t want_entropy;
    if (rl_dataproto_meta_int(in, RL_ACTOR_WANT_ENTROPY, 0, &want_entropy))
        return rl_error_code();
    rl_model *m;
    if (strcmp(which, RL_ACTOR_WHICH_POLICY) == 0)
        m = a->policy;
    else if (strcmp(which, RL_ACTOR_WHICH_REF) == 0)
        m = a->ref;
    else
        return rl_error_set(RL_EINVAL, "argument '%s' must be '%s' or '%s', got '%s'", RL_ACTOR_WHICH,
                            RL_ACTOR_WHICH_POLICY, RL_ACTOR_WHICH_REF, which);
    unsigned want = RL_Q_BIT(RL_Q_LOGP) | (want_entropy ? RL_Q_BIT(RL_Q_ENTROPY) : 0);
    rl_model_pass pass = {.temperature = a->temperature, .micro_batch = a->o.micro_batch};
    /* the forward's tensors are named like the contract's (logp, entropy) */
    return rl_model_forward(m, in, want, &pass, out);
}

/* ---- update --------------------------------------------------------------------------------- */

/* The loss ops, by name (RL_ACTOR_LOSS_OPS). */
#define S_OP_PTR(op, method) &rl_actor_loss_##op,
static const rl_actor_loss_op *const s_ops[] = {RL_ACTOR_LOSS_OPS(S_OP_PTR)};
#undef S_OP_PTR

/* One optimiser step of the loss op that meta RL_ACTOR_LOSS names. */
static int s_update(rl_worker_ctx *ctx, const rl_dataproto *in, rl_dataproto **out)
{
    const char *name = rl_dataproto_meta_str(in, RL_ACTOR_LOSS, NULL);
    if (!name)
        return rl_error_code();
    char known[256] = "";
    for (size_t i = 0, n = 0; i < sizeof s_ops / sizeof s_ops[0]; i++) {
        if (strcmp(s_ops[i]->name, name) == 0)
            return rl_actor_update(ctx, s_ops[i], in, out);
        if (n < sizeof known)
            n += (size_t)snprintf(known + n, sizeof known - n, "%s%s", i ? ", " : "", s_ops[i]->name);
    }
    return rl_error_set(RL_EINVAL, "%s: unknown loss '%.64s' (known: %s)", RL_ACTOR_UPDATE_ANY, name, known);
}

/* Each op under its own method name. */
#define S_OP_METHOD(op, method)                                                                     \
    static int s_update_##op(rl_worker_ctx *ctx, const rl_dataproto *in, rl_dataproto **out)       \
    {                                                                                               \
        return rl_actor_update(ctx, &rl_actor_loss_##op, in, out);                                  \
    }
RL_ACTOR_LOSS_OPS(S_OP_METHOD)
#undef S_OP_METHOD

/* ---- weights ------------------------------------------------------------------------------------ */

/* both in weights.c: ZeroMQ, and CUDA IPC to the rollout ranks on this GPU */
static int s_weights_open(rl_worker_ctx *ctx, const rl_dataproto *in, rl_dataproto **out)
{
    s_actor *a = rl_actor_get(ctx, RL_ACTOR_WEIGHTS_OPEN);
    return a ? rl_actor_weights_open(a, in, out) : rl_error_code();
}

static int s_publish_weights(rl_worker_ctx *ctx, const rl_dataproto *in, rl_dataproto **out)
{
    s_actor *a = rl_actor_get(ctx, RL_ACTOR_PUBLISH_WEIGHTS);
    return a ? rl_actor_weights_publish(a, in, out) : rl_error_code();
}

/* ---- checkpoints ---------------------------------------------------------------------------------- */

/* The AdamW moments of every shard, gathered so a checkpoint does not depend
 * on the rank count (collective: every rank calls it). */
static int s_gather_moments(s_actor *a, float **m_out, float **v_out)
{
    float *m = malloc(sizeof(float) * (size_t)a->P), *v = malloc(sizeof(float) * (size_t)a->P);
    int rc = RL_OK;
    if (!m || !v)
        rc = rl_error_set(RL_ENOMEM, "actor/%d: out of memory for the optimiser moments", a->rank);
    else if (a->comm && !(rc = rl_actor_all_gather_host(a, a->opt->m, m)))
        rc = rl_actor_all_gather_host(a, a->opt->v, v);
    else if (!a->comm)
        rc = rl_adamw_moments_get(a->opt, m, v);
    if (rc) {
        free(m);
        free(v);
        return rc;
    }
    *m_out = m;
    *v_out = v;
    return RL_OK;
}

/* The RL_ACTOR_FILES of a save request written into dir (rank 0). */
static int s_put_files(const rl_dataproto *in, const char *dir)
{
    const json_t *files = json_object_get(rl_dataproto_meta_const(in), RL_ACTOR_FILES);
    if (!files)
        return RL_OK;
    if (!json_is_object(files))
        return rl_error_set(RL_EINVAL, "argument '%s' must be a JSON object", RL_ACTOR_FILES);
    const char *name;
    json_t *v;
    json_object_foreach((json_t *)files, name, v) {
        const char *from = json_string_value(json_object_get(v, "copy"));
        const char *text = json_string_value(json_object_get(v, "text"));
        if (!*name || strchr(name, '/') || strcmp(name, ".") == 0 || strcmp(name, "..") == 0 ||
            !json_is_object(v) || !from == !text)
            return rl_error_set(RL_EINVAL, "argument '%s': entry '%s' must be a plain file name "
                                "with {\"copy\": path} or {\"text\": content}", RL_ACTOR_FILES, name);
        size_t len = text ? strlen(text) : 0;
        char *buf = from ? rl_file_read_all(from, &len) : NULL;
        if (from && !buf)
            return rl_error_wrap(rl_error_code(), "%s: copying %s into %s", RL_ACTOR_FILES, from, dir);
        char path[4600];
        snprintf(path, sizeof path, "%s/%s", dir, name);
        int rc = rl_file_write_atomic(path, from ? buf : text, len);
        free(buf);
        if (rc)
            return rc;
    }
    return RL_OK;
}

/* rl_checkpoint_data.write_extra: the model's config.json and the request's
 * RL_ACTOR_FILES (the tokenizer's) into the step's directory before it is
 * sealed. */
typedef struct s_extra {
    rl_model *policy;
    const rl_dataproto *in;
} s_extra;

static int s_write_extra(const char *dir, void *arg)
{
    const s_extra *x = arg;
    char path[4200];
    snprintf(path, sizeof path, "%s/config.json", dir);
    int rc = rl_model_write_config(x->policy, path);
    return rc ? rc : s_put_files(x->in, dir);
}

static int s_save_checkpoint(rl_worker_ctx *ctx, const rl_dataproto *in, rl_dataproto **out)
{
    (void)out;
    s_actor *a = rl_actor_get(ctx, RL_ACTOR_SAVE_CHECKPOINT);
    if (!a)
        return rl_error_code();
    const char *dir = rl_dataproto_meta_str(in, RL_ACTOR_DIR, NULL);
    int64_t step, pos, epoch;
    const json_t *extra = json_object_get(rl_dataproto_meta_const(in), RL_ACTOR_EXTRA);
    if (!dir || rl_dataproto_meta_get_int(in, RL_ACTOR_STEP, 0, INT64_MAX, &step) ||
        rl_dataproto_meta_get_int(in, RL_ACTOR_DATA_POSITION, 0, INT64_MAX, &pos) ||
        rl_dataproto_meta_get_int(in, RL_ACTOR_EPOCH, 0, INT64_MAX, &epoch))
        return rl_error_code();
    if (extra && !json_is_object(extra))
        return rl_error_set(RL_EINVAL, "argument '%s' must be a JSON object", RL_ACTOR_EXTRA);
    float *m, *v;
    int rc = s_gather_moments(a, &m, &v);
    if (rc)
        return rc;
    json_t *meta = json_pack("{s:s}", "format", "pt"); /* what transformers asks of the file */
    const float *params = a->rank == 0 ? rl_actor_host_params(a) : NULL;
    if (a->rank == 0 && !params)
        rc = rl_error_code();
    else if (a->rank == 0) {
        rl_checkpoint_data d = {.manifest = rl_model_manifest(a->policy),
                                .params = (float *)params, .param_dtype = RL_F32,
                                .model_metadata = meta,
                                .exp_avg = m, .exp_avg_sq = v, .adamw = a->opt->cfg,
                                .adamw_step = a->opt->step};
        rl_train_state st;
        memset(&st, 0, sizeof st);
        st.step = step;
        st.epoch = epoch;
        st.data_position = pos;
        st.lr_step = a->opt->step;
        st.lr = a->lr;
        st.extra = (json_t *)extra;
        s_extra x = {a->policy, in}; /* config.json and the tokenizer's files, for other tools */
        d.write_extra = s_write_extra;
        d.write_extra_arg = &x;
        rc = rl_checkpoint_save(dir, &d, &st);
    }
    json_decref(meta);
    free(m);
    free(v);
    return rc;
}

static int s_load_checkpoint(rl_worker_ctx *ctx, const rl_dataproto *in, rl_dataproto **out)
{
    s_actor *a = rl_actor_get(ctx, RL_ACTOR_LOAD_CHECKPOINT);
    if (!a)
        return rl_error_code();
    const char *path = rl_dataproto_meta_str(in, RL_ACTOR_PATH, NULL);
    if (!path)
        return rl_error_code();
    float *m = malloc(sizeof(float) * (size_t)a->P), *v = malloc(sizeof(float) * (size_t)a->P);
    if (!m || !v) {
        free(m);
        free(v);
        return rl_error_set(RL_ENOMEM, "actor/%d: out of memory for the optimiser moments", a->rank);
    }
    float *p = a->host_params ? a->host_params : rl_model_params(a->policy);
    rl_checkpoint_data d = {.manifest = rl_model_manifest(a->policy), .params = p,
                            .exp_avg = m, .exp_avg_sq = v};
    rl_train_state st;
    memset(&st, 0, sizeof st);
    char what[4200];
    snprintf(what, sizeof what, "%s/model.safetensors", path);
    if (a->host_params) /* the load writes the host copy; the device's stays the truth until it succeeds */
        a->host_stale = 1;
    int rc = rl_checkpoint_load(path, &d, &st);
    if (!rc)
        rc = rl_model_check_finite(a->policy, p, what);
    if (!rc && d.adamw_step != st.lr_step) /* the actor saves one number into both */
        rc = rl_error_set(RL_EPROTO, "%s/optimizer.safetensors: metadata 'step' = %lld, but "
                                     "trainer_state.json has lr_step %lld", path,
                          (long long)d.adamw_step, (long long)st.lr_step);
    if (!rc && a->host_params && !(rc = rl_model_params_set(a->policy, p)))
        a->host_stale = 0;
    if (!rc)
        rc = rl_adamw_moments_set(a->opt, m + a->begin, v + a->begin);
    if (!rc) {
        a->opt->step = d.adamw_step;
        json_t *extra = st.extra ? st.extra : json_object();
        st.extra = NULL; /* stolen by the reply */
        *out = rl_dataproto_new_meta(json_pack(
            "{s:I, s:I, s:I, s:o}", RL_ACTOR_STEP, (json_int_t)st.step, RL_ACTOR_EPOCH,
            (json_int_t)st.epoch, RL_ACTOR_DATA_POSITION, (json_int_t)st.data_position,
            RL_ACTOR_EXTRA, extra));
        rc = *out ? RL_OK : rl_error_code();
    }
    json_decref(st.extra);
    free(m);
    free(v);
    return rc;
}

static int s_save_model(rl_worker_ctx *ctx, const rl_dataproto *in, rl_dataproto **out)
{
    (void)out;
    s_actor *a = rl_actor_get(ctx, RL_ACTOR_SAVE_MODEL);
    if (!a)
        return rl_error_code();
    const char *dir = rl_dataproto_meta_str(in, RL_ACTOR_PATH, NULL);
    const char *dt = dir ? rl_dataproto_meta_str(in, RL_ACTOR_DTYPE, "float32") : NULL;
    if (!dt)
        return rl_error_code();
    rl_dtype dtype = strcmp(dt, "bfloat16") == 0 ? RL_BF16 : RL_F32;
    if (dtype == RL_F32 && strcmp(dt, "float32") != 0)
        return rl_error_set(RL_EINVAL, "argument '%s' = '%s', expected float32 or bfloat16",
                            RL_ACTOR_DTYPE, dt);
    if (a->rank != 0)
        return RL_OK;
    int rc = rl_model_save_as(a->policy, dir, dtype);
    return rc ? rc : s_put_files(in, dir);
}

#define S_OP_ENTRY(op, method) {method, s_update_##op},
static const rl_method s_methods[] = {
    {RL_ACTOR_COMM_ID_CREATE, s_comm_id_create},
    {RL_ACTOR_INIT_MODEL, s_init_model},
    {RL_ACTOR_COMPUTE_LOG_PROB, s_compute_log_prob},
    {RL_ACTOR_UPDATE_ANY, s_update},
    {RL_ACTOR_WEIGHTS_OPEN, s_weights_open},
    {RL_ACTOR_PUBLISH_WEIGHTS, s_publish_weights},
    {RL_ACTOR_SAVE_CHECKPOINT, s_save_checkpoint},
    {RL_ACTOR_LOAD_CHECKPOINT, s_load_checkpoint},
    {RL_ACTOR_SAVE_MODEL, s_save_model},
    /* the tracks': each loss op under its own name, the embodied values */
    RL_ACTOR_LOSS_OPS(S_OP_ENTRY)
    {RL_ACTOR_FLOW_VALUES, rl_actor_flow_values},
    {NULL, NULL},
};
#undef S_OP_ENTRY

const rl_worker_role rl_role_actor = {RL_ACTOR_ROLE, s_methods, s_init, s_fini};
