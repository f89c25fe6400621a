/* common/nn/models/model_base.h — what the model kinds over one flat buffer
 * share (internal; rlrt/nn/model.h is the interface): the manifest with its
 * parameter and gradient buffers and the rl_model_ops accessors over them,
 * the fan-in initialisation, the rows of a micro-batch, and config.json
 * written from the kind's config sections.
 *
 * A kind's struct starts with an rl_model_base (so an rl_model * of the kind
 * is its rl_model_base *); its ops table names RL_MODEL_BASE_OPS and, when
 * they fit, rl_model_base_init_random. clip_flow and image_classifier are
 * built on it; flow_policy's manifest, accessors, free and config.json are
 * the same pattern (its init adds obs_norm.std = 1 after the base rule).
 *
 * Ownership: rl_model_base_free() frees the manifest and the buffers, not
 * the kind's struct. */
#ifndef RLRT_NN_MODEL_BASE_H
#define RLRT_NN_MODEL_BASE_H

#include <stdint.h>

#include "rlrt/config.h"
#include "rlrt/nn/model.h"
#include "rlrt/nn/params.h"

typedef struct rl_model_base {
    rl_model model; /* ops */
    rl_param_manifest *man;
    float *params, *grads; /* (man->total) each */
} rl_model_base;

/* An empty manifest for the views; `who` names the kind in errors. */
int rl_model_base_open(rl_model_base *b, const rl_model_ops *ops, const char *who);
/* Appends view `name` of shape (d0) (ndim 1) or (d0, d1) (ndim 2) and gives
 * its offset in the flat buffer. */
int rl_model_base_add(rl_model_base *b, const char *name, int ndim, int64_t d0, int64_t d1,
                      int64_t *offset);
/* The zeroed parameter and gradient buffers of the manifest's views. */
int rl_model_base_alloc(rl_model_base *b, const char *who);
void rl_model_base_free(rl_model_base *b);

const rl_param_manifest *rl_model_base_manifest(const rl_model *m);
float *rl_model_base_params(rl_model *m);
float *rl_model_base_grads(rl_model *m);
#define RL_MODEL_BASE_OPS \
    .manifest = rl_model_base_manifest, .params = rl_model_base_params, .grads = rl_model_base_grads

/* View i from Philox(seed, i): 1-D views (biases) 0; 2-D (out, in) weights
 * N(0, 1/in); views whose name holds "embedding" (lookup tables) N(0, 1). */
int rl_model_base_init_random(rl_model *m, uint64_t seed);

/* Rows per forward of a pass over B rows (pass->micro_batch; <= 0: all). */
int64_t rl_model_micro_rows(const rl_model_pass *pass, int64_t B);

/* The input tensor `name` of a batch: `dtype`, `ndim` dims matching dims
 * (-1: any), or NULL with the message prefixed by `what` (the call). */
const rl_tensor *rl_model_input(const rl_dataproto *dp, const char *what, const char *name, rl_dtype dtype,
                                int ndim, const int64_t *dims);

/* The loss over one micro-batch of one quantity q: rows [row0, row0 +
 * rows) of `width` positions, values val (rows, width) with mask (NULL:
 * every position); grad (rows, width) is zeroed, then receives dL/dval. */
int rl_model_loss_one(rl_model_loss_fn fn, void *ctx, rl_quantity q, int64_t row0, int64_t rows,
                      int64_t width, float *val, const float *mask, float *grad, double *loss);

/* config.json of a kind whose model.* keys are sections: {"model": {"type":
 * kind, <key>: <value>, ...}} with the keys of secs[0..n) (each directly
 * under model.) from the structs cfgs[i] they were read into, written
 * atomically; rl_model_load_dir reads it back as a job fragment. */
int rl_model_write_sections(const char *path, const char *kind, const rl_config_section *const *secs,
                            const void *const *cfgs, int n);

#endif
