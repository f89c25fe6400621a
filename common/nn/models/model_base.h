/* common/nn/models/model_base.h — what the model kinds share (internal;
 * rlrt/nn/model.h is the interface): the base a kind's struct starts with
 * (its ops, the manifest with the parameter and gradient buffers, the
 * config sections it was read from) and the steps every kind repeats
 * around its network: building itself from the job, the fan-in
 * initialisation, config.json, reading and checking the batch's tensors,
 * the rows of a micro-batch, handing one quantity to the loss, and the
 * DataProto it returns.
 *
 * A kind's struct starts with an rl_model_base (so an rl_model * of the kind
 * is its rl_model_base *). clip_flow, flow_policy and image_classifier own
 * their views: the base builds them (rl_model_base_build: the struct, its
 * sections read into it, the kind's views, the buffers) and they name
 * RL_MODEL_BASE_KIND_OPS: the accessors, rl_model_base_init_random and
 * rl_model_base_write_config (config.json from the sections they were read
 * from). The lm kind's transformer owns its buffers and writes a Hugging
 * Face config: the kind lends them to the base (rl_model_base_borrow) and
 * names RL_MODEL_BASE_OPS, the accessors alone.
 *
 * Device: a kind the base built starts on the CPU; rl_model_base_move
 * moves its buffers to another device and b->dev / b->nn say where they
 * are and which kernels run there (rl_model_floats_on allocates its
 * activations there, rl_model_copy_in/out stage its host arrays).
 *
 * Ownership: rl_model_base_free() frees the manifest and the buffers the
 * base built (nothing that was lent), not the kind's struct. */
#ifndef RLRT_NN_MODEL_BASE_H
#define RLRT_NN_MODEL_BASE_H

#include <stddef.h>
#include <stdint.h>

#include "common/nn/engine/device.h"
#include "rlrt/config.h"
#include "rlrt/nn/model.h"
#include "rlrt/nn/params.h"

/* The most sections a kind has after model.* (the base section). */
#define RL_MODEL_BASE_SECTIONS 3

typedef struct rl_model_base {
    rl_model model;               /* ops */
    const rl_param_manifest *man; /* the views */
    float *params, *grads;        /* (man->total) each */
    rl_param_manifest *own;       /* the manifest rl_model_base_build built (= man), freed with
                                   * the buffers; NULL when they are lent (rl_model_base_borrow) */
    /* the kind's sections (model.* first, NULL-terminated) and the structs
     * the ones after model.* were read into (rl_model_base_build) */
    const rl_config_section *const *sections;
    void *cfgs[RL_MODEL_BASE_SECTIONS];
    /* where params/grads live and the kernels of that device (a kind built
     * by rl_model_base_build: the CPU's until rl_model_base_move) */
    rl_device dev;
    const rl_nn_ops *nn;
} rl_model_base;

/* How the base builds a kind that owns its views. */
typedef struct rl_model_base_kind {
    size_t size; /* of the kind's struct */
    const rl_model_ops *ops;
    /* the kind's sections (model.* first, NULL-terminated) and where in the
     * kind's struct the typed struct of each one after model.* is copied
     * (strings in them belong to the job; none of the kinds' has one) */
    const rl_config_section *const *sections;
    size_t cfg_offset[RL_MODEL_BASE_SECTIONS];
    /* With the sections read and an empty manifest: the kind's derived
     * fields and its views (rl_model_base_add, in order). */
    int (*build)(rl_model_base *b);
} rl_model_base_kind;

/* A kind's from_config: its zeroed struct with ops, its sections read from
 * the job (range-checked, located errors), k->build, then the zeroed
 * parameter and gradient buffers (a fixed normalisation's scale, a 1-D view
 * named "*.std", at 1: a usable identity before any initialisation). NULL
 * with the message on error (what was built is freed with ops->free). */
rl_model *rl_model_base_build(const rl_config *job, const rl_model_base_kind *k);
/* The checks of rl_model_base_build's reading without a model: what
 * rl_model_check_config runs for a kind with no check_config of its own. */
int rl_model_sections_check(const rl_config *job, const rl_config_section *const *sections);
/* Appends view `name` of shape (d0) (ndim 1) or (d0, d1) (ndim 2) and gives
 * its offset in the flat buffer. */
int rl_model_base_add(rl_model_base *b, const char *name, int ndim, int64_t d0, int64_t d1,
                      int64_t *offset);

/* For a kind whose network owns its buffers (lm): a zeroed kind struct of
 * `size` bytes with its ops (NULL with RL_ENOMEM naming ops->kind); the
 * network's manifest and buffers, which stay its own (valid for the model's
 * life); the end of from_config: rc == 0 gives the model, otherwise it is
 * freed (ops->free) and NULL returned (the message stays). */
void *rl_model_base_new(size_t size, const rl_model_ops *ops);
void rl_model_base_borrow(rl_model_base *b, const rl_param_manifest *man, float *params, float *grads);
rl_model *rl_model_base_done(rl_model_base *b, int rc);

/* For a kind built by rl_model_base_build that runs on a device (its ops'
 * to_device): checks that `dev`'s table is complete and the device visible,
 * moves params and grads there (the parameters copied, the gradients
 * zeroed) and sets b->dev and b->nn; the kind then drops its activations
 * (they are re-made on the new device). On error nothing changed.
 * RL_EUNSUPPORTED naming the kind without such a device. */
int rl_model_base_move(rl_model_base *b, rl_device dev);
/* rl_model_ops.device of such a kind. */
int rl_model_base_device(const rl_model *m);
/* A kind's activations on its device: rl_model_floats on the CPU (one
 * malloc), one rl_device_alloc_for(RL_MEM_ACTIVATIONS) block elsewhere;
 * freed with rl_model_floats_free(dev, *arrays[0]). */
int rl_model_floats_on(rl_device dev, float **const *arrays, const size_t *counts, int n, const char *who);
void rl_model_floats_free(rl_device dev, float *first);
/* The explicit copies of a kind on a device around its kernels: bytes from
 * the host to dst on dev (in), or from src on dev to the host, then the
 * device's first asynchronous error (out: rl_device_sync), so a kernel's
 * failure surfaces where its result is read. */
int rl_model_copy_in(rl_device dev, void *dst, const void *host, size_t bytes);
int rl_model_copy_out(rl_device dev, void *host, const void *src, size_t bytes);

/* Frees the manifest and the buffers the base built (not lent ones). */
void rl_model_base_free(rl_model_base *b);

const rl_param_manifest *rl_model_base_manifest(const rl_model *m);
float *rl_model_base_params(rl_model *m);
float *rl_model_base_grads(rl_model *m);
/* View i from Philox(seed, i): 1-D views (biases) 0, except the scale of a
 * fixed normalisation (a name ending in ".std") 1; 2-D (out, in) weights
 * N(0, 1/in); views whose name holds "embedding" (lookup tables) N(0, 1). */
int rl_model_base_init_random(rl_model *m, uint64_t seed);
/* config.json of a kind built by rl_model_base_build: {"model": {"type":
 * kind, <key>: <value>, ...}} with the keys of its sections after model.*
 * (each directly under model.), written atomically; rl_model_load_dir reads
 * it back as a job fragment. */
int rl_model_base_write_config(const rl_model *m, const char *path);

/* The accessors of the base. */
#define RL_MODEL_BASE_OPS \
    .manifest = rl_model_base_manifest, .params = rl_model_base_params, .grads = rl_model_base_grads
/* All the base does for a kind it built. */
#define RL_MODEL_BASE_KIND_OPS \
    RL_MODEL_BASE_OPS, .init_random = rl_model_base_init_random, .write_config = rl_model_base_write_config

/* Rows per forward of a pass over B rows (pass->micro_batch; <= 0: all). */
int64_t rl_model_micro_rows(const rl_model_pass *pass, int64_t B);

/* The input tensor `name` of a batch: `dtype`, `ndim` dims matching dims
 * (-1: any), or NULL with the message prefixed by `what` (the call). */
const rl_tensor *rl_model_input(const rl_dataproto *dp, const char *what, const char *name, rl_dtype dtype,
                                int ndim, const int64_t *dims);
/* The index tensor `name` (B) i32 of a batch, every value in [0, K): *B
 * the rows on entry (< 0: any) and on return; `key`, the config key of K,
 * is named in the error (NULL: none). */
int rl_model_input_ids(const rl_dataproto *dp, const char *what, const char *name, int K, const char *key,
                       int64_t *B, const int32_t **ids);
/* RL_ENUMERIC "what: name[i] is x (not finite)" for the first NaN or
 * infinity of x (n), else 0. */
int rl_model_input_finite(const char *what, const char *name, const float *x, int64_t n);

/* A kind's scratch: n float arrays in one allocation, *arrays[i] getting
 * counts[i] floats (consecutive from *arrays[0], so free(*arrays[0]) frees
 * them all); RL_ENOMEM naming `who` (every *arrays[i] NULL then). */
int rl_model_floats(float **const *arrays, const size_t *counts, int n, const char *who);

/* One tensor a call returns. */
typedef struct rl_model_output {
    const char *name;
    rl_dtype dtype;
    int ndim;
    int64_t shape[3];
} rl_model_output;
/* A new DataProto holding the n tensors of spec (zeroed), t[i] the i-th;
 * NULL with the message set. */
rl_dataproto *rl_model_outputs(const rl_model_output *spec, int n, rl_tensor **t);
/* The end of a call that returns `o`: rc == 0 hands it to *out, otherwise
 * it is freed; returns rc. */
int rl_model_give(rl_dataproto *o, int rc, rl_dataproto **out);

/* The loss over one micro-batch of one quantity q: rows [row0, row0 +
 * rows) of `width` positions, values val (rows, width) with mask (NULL:
 * every position); grad (rows, width) is zeroed, then receives dL/dval. */
int rl_model_loss_one(rl_model_loss_fn fn, void *ctx, rl_quantity q, int64_t row0, int64_t rows,
                      int64_t width, float *val, const float *mask, float *grad, double *loss);

#endif
