/* rlrt/nn/model.h — the interface every trainable model implements.
 *
 * Purpose: the actor and rollout roles program against rl_model, never
 * against a concrete network, so a new model (the flow-matching action
 * policy, the clip generator) is one new file plus one line in the kind
 * table (common/nn/kinds.c). The job's `model.type` picks the kind.
 *
 * What every model offers:
 *   * parameters: ONE flat float buffer with a manifest of named views and a
 *     gradient buffer of the same layout (rlrt/nn/params.h), so FSDP shards,
 *     AdamW, weight sync, EMA copies and checkpoints are buffer operations
 *     that do not depend on the kind;
 *   * forward: the quantities a recipe asks for over a batch;
 *   * forward_backward: the same quantities, one micro-batch at a time,
 *     handed to a loss callback that returns their gradients; the model
 *     back-propagates them and ACCUMULATES into the gradient buffer;
 *   * sample: what the rollout role generates;
 *   * save/load: `model.safetensors` (+ `config.json`) in a directory.
 *
 * Batches are DataProtos in the kind's layout (documented in the kind's
 * header, e.g. common/nn/models/lm/lm_model.h): the model checks every tensor it reads
 * (presence, dtype, shape, ranges) and names the bad one in its error.
 *
 * Quantities are f32 arrays of shape (B, K) with a (B, K) 0/1 mask of the
 * positions that exist. K and the positions are the kind's "action
 * positions": for the LM the R response tokens of each row; for a flow
 * policy the denoising steps of its chain (log-probs) or the flattened action
 * chunk (velocities). forward() returns them as tensors named by
 * rl_quantity_name() plus "<name>_mask".
 *
 * Determinism: a kind is bit-reproducible for a given thread count (the LM:
 * common/nn/models/lm/transformer.h); micro-batching never changes a forward result.
 *
 * Ownership: rl_model_build()/a kind's from_config return a model freed with
 * rl_model_free(); manifest, parameter and gradient pointers are the model's
 * and stay valid for its life. A model is not thread-safe: one call at a
 * time. DataProtos returned through `out` are the caller's.
 */
#ifndef RLRT_NN_MODEL_H
#define RLRT_NN_MODEL_H

#include <stdint.h>

#include "rlrt/config.h"
#include "rlrt/dtype.h"
#include "rlrt/dataproto.h"
#include "rlrt/nn/params.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum rl_quantity {
    RL_Q_LOGP = 0,     /* log π(action at position k | context), (B, K) */
    RL_Q_ENTROPY = 1,  /* entropy of the action distribution at k, (B, K) */
    RL_Q_VALUE = 2,    /* value-head estimate at k, (B, K) */
    RL_Q_VELOCITY = 3, /* flow velocity v(x_t, t | obs), (B, D) */
    RL_Q_COUNT = 4
} rl_quantity;

#define RL_Q_BIT(q) (1u << (unsigned)(q))

/* The views of a kind's value head (RL_Q_VALUE) are named with this prefix
 * ("value_head.weight", "value_head.bias"): the actor gives them their own
 * learning rate (actor.optim.value_lr). */
#define RL_MODEL_VALUE_HEAD_PREFIX "value_head."

/* "logp", "entropy", "value", "velocity" (the tensor names of forward()). */
const char *rl_quantity_name(rl_quantity q);

/* One micro-batch of quantities: rows [row0, row0 + rows) of the call's
 * batch. q[k] is (rows, width[k]) row-major or NULL when not computed (in a
 * gradient: when there is none); mask[k] is (rows, width[k]) 1/0 or NULL
 * (every position exists). */
typedef struct rl_model_io {
    int64_t row0, rows;
    int64_t width[RL_Q_COUNT];
    float *q[RL_Q_COUNT];
    const float *mask[RL_Q_COUNT];
} rl_model_io;

/* A loss over one micro-batch: reads `out`, writes dL/dq into `grad` (its
 * arrays come zeroed, exactly for the quantities that were asked for) and
 * adds the loss to *loss. 0 or a negative rl_status with the message set. */
typedef int (*rl_model_loss_fn)(void *ctx, const rl_model_io *out, rl_model_io *grad,
                                double *loss);

/* How a forward pass runs. */
typedef struct rl_model_pass {
    double temperature;  /* LM: log-probs of softmax(logits / T); <= 0 means 1 */
    int64_t micro_batch; /* rows per forward; <= 0: the whole batch at once */
} rl_model_pass;

/* How to sample (the rollout role fills it from rollout.* at init). */
typedef struct rl_model_sampling {
    int greedy;             /* argmax (LM) / deterministic ODE (flow) */
    double temperature;     /* LM */
    double top_p;           /* LM, (0, 1] */
    int64_t top_k;          /* LM, 0 = off */
    int64_t max_new_tokens; /* LM */
    int64_t max_batch;      /* LM: rows holding a KV-cache slot at once (0: all) */
    int64_t num_steps;      /* flow / diffusion integration steps */
    double noise_level;     /* flow / diffusion SDE noise */
    double shift;           /* diffusion: σ-schedule shift s (common/algo/diffusion/diffusion.h);
                             * <= 0 means 1, the unshifted grid */
    /* Partial rollouts (LM kinds' own sampler; other kinds ignore it): NULL,
     * or called between decode steps; it may replace the model's weights in
     * place (rl_model_params_set) and then returns 1 with their version in
     * *version (greater than the one before), else 0; < 0 is an error that
     * ends the call. `version` is the version of the weights at the call's
     * start. With it the LM output has a per-token version tensor (the LM
     * kind's RL_LM_TOKEN_VERSION). */
    int (*poll_weights)(void *ctx, uint64_t *version);
    void *poll_ctx;
    uint64_t version;
} rl_model_sampling;

typedef struct rl_model rl_model;

typedef struct rl_model_ops {
    const char *kind; /* the model.type that builds it */
    void (*free)(rl_model *m);
    const rl_param_manifest *(*manifest)(const rl_model *m);
    float *(*params)(rl_model *m);
    float *(*grads)(rl_model *m);
    /* The kind's random initialisation (its own scale from the config). */
    int (*init_random)(rl_model *m, uint64_t seed);
    /* Quantities `want` (RL_Q_BIT mask) over `batch` → *out. */
    int (*forward)(rl_model *m, const rl_dataproto *batch, unsigned want,
                   const rl_model_pass *pass, rl_dataproto **out);
    /* The same one micro-batch at a time through fn (loss: never NULL, 0
     * on entry). */
    int (*forward_backward)(rl_model *m, const rl_dataproto *batch, unsigned want,
                            const rl_model_pass *pass, rl_model_loss_fn fn, void *ctx,
                            double *loss);
    int (*sample)(rl_model *m, const rl_dataproto *in, const rl_model_sampling *s,
                  rl_dataproto **out);
    /* Writes the kind's config file (e.g. HF config.json) to `path`. */
    int (*write_config)(const rl_model *m, const char *path);
    /* Optional: the device the buffers live on, an rl_device of
     * common/nn/engine/device.h (NULL: the CPU), and moving them to another
     * (NULL: the kind runs on the CPU only). common/nn/models/model_device.h
     * has the typed calls. */
    int (*device)(const rl_model *m);
    int (*to_device)(rl_model *m, int dev);
} rl_model_ops;

/* Every implementation starts with this header. */
struct rl_model {
    const rl_model_ops *ops;
};

/* A row of the kind table. */
typedef struct rl_model_kind {
    const char *name;          /* model.type */
    /* its model.* keys: the config sections, NULL-terminated, starting with
     * the base (model.type, model.init_from: common/schema/model.h) */
    const rl_config_section *const *sections;
    /* The architecture from the job's model.* keys (range-checked, located
     * errors); parameters are zero until initialised or loaded. */
    rl_model *(*from_config)(const rl_config *job);
    /* The same checks as from_config without building anything (the driver
     * runs them before it starts any worker); NULL: reading the sections is
     * all from_config checks. */
    int (*check_config)(const rl_config *job);
    /* 1: from_config honours model.precision bf16; 0: the kind runs in
     * fp32 only and a job asking bf16 of it is refused naming the kind */
    int bf16;
} rl_model_kind;

/* The kind named `type`, or NULL with RL_ENOTFOUND listing the known ones. */
const rl_model_kind *rl_model_kind_find(const char *type);

/* model.type → kind → check_config: every model.* value checked, with
 * located errors, and nothing allocated. */
int rl_model_check_config(const rl_config *job);
/* The model of a job: model.type → kind → from_config, then the weights from
 * model.init_from (a directory; rl_model_load) when it is set, else the
 * kind's random initialisation with `seed`. NULL + message on error. */
rl_model *rl_model_build(const rl_config *job, uint64_t seed);
void rl_model_free(rl_model *m);

const char *rl_model_kind_name(const rl_model *m);
const rl_param_manifest *rl_model_manifest(const rl_model *m);
int64_t rl_model_num_params(const rl_model *m);
float *rl_model_params(rl_model *m); /* (num_params) */
float *rl_model_grads(rl_model *m);  /* (num_params), same layout */
void rl_model_zero_grad(rl_model *m);
int rl_model_init_random(rl_model *m, uint64_t seed);

int rl_model_forward(rl_model *m, const rl_dataproto *batch, unsigned want,
                     const rl_model_pass *pass, rl_dataproto **out);
int rl_model_forward_backward(rl_model *m, const rl_dataproto *batch, unsigned want,
                              const rl_model_pass *pass, rl_model_loss_fn fn, void *ctx,
                              double *loss);
int rl_model_sample(rl_model *m, const rl_dataproto *in, const rl_model_sampling *s,
                    rl_dataproto **out);

/* dir/model.safetensors (f32, the manifest's names, metadata "format":
 * "pt" as transformers' from_pretrained wants) and dir/config.json, each
 * written atomically; the directory is created if missing. */
int rl_model_save(const rl_model *m, const char *dir);
/* The same with the weights as `dtype` (RL_F32, RL_BF16 or RL_F16; else
 * RL_EDTYPE); config.json's "torch_dtype", when it has one, says which. */
int rl_model_save_as(const rl_model *m, const char *dir, rl_dtype dtype);
int rl_model_write_config(const rl_model *m, const char *path);
/* Reads dir/model.safetensors, or without it the shards of
 * dir/model.safetensors.index.json (Hugging Face's sharded checkpoints),
 * into the parameters (names and shapes must match the manifest; F32, BF16,
 * F16 or F64) and checks that every value is finite: RL_ENUMERIC
 * "dir/model.safetensors: tensor 'model.norm.weight' holds nan at [3]". On
 * error the parameters are unspecified. */
int rl_model_load(rl_model *m, const char *dir);
/* A saved model directory: when its config.json is a {"model": {...}} job
 * fragment naming its kind (the diffusion and embodied kinds write it so),
 * the kind's from_config; when it is a Hugging Face config.json (a
 * "model_type": qwen2 or llama), the lm kind with that architecture; then
 * rl_model_load. NULL + a message naming the file on error. */
rl_model *rl_model_load_dir(const char *dir);
/* RL_ENUMERIC naming `what`, the view and the flat index of the first NaN or
 * infinity in `buf` (a buffer in the manifest's layout), else 0. */
int rl_model_check_finite(const rl_model *m, const float *buf, const char *what);

#ifdef __cplusplus
}
#endif
#endif
