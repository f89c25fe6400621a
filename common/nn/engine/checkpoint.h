/* common/nn/engine/checkpoint.h — training-state checkpoints: save, find the latest
 * complete one, load and continue bit-exactly.
 *
 * Layout under a checkpoint root directory:
 *   root/step_<N>/model.safetensors      params, tensor names = view names
 *                                        (Hugging Face names for LMs)
 *   root/step_<N>/optimizer.safetensors  AdamW moments per view, f32:
 *                                        "exp_avg.<view>", "exp_avg_sq.<view>";
 *                                        metadata: format, step, beta1, beta2,
 *                                        eps, weight_decay (as strings)
 *   root/step_<N>/trainer_state.json     {"format": "rlrt-checkpoint-1",
 *                                        "step", "epoch", "data_position",
 *                                        "lr_step", "lr_schedule": {...},
 *                                        "rng": {name: {key, counter, lanes,
 *                                        used}}, "extra": {caller's object}}
 *   root/latest                          "step_<N>\n", written last
 *
 * Atomicity: the files are written into root/step_<N>.tmp/ (each one
 * atomically, fsynced), the directory is fsynced and renamed to step_<N>,
 * root is fsynced, and only then is `latest` replaced. A crash leaves either
 * a step_<N>.tmp directory (ignored, removed by the next save of that step)
 * or a complete step_<N> that `latest` may not name yet; rl_checkpoint_find
 * takes the newest complete step_<N> whichever the case, and reports in
 * info->note the partial or broken checkpoints it skipped.
 *
 * Bit-exact resume: params are saved as f32 by default (param_dtype RL_F32)
 * and moments always as f32, the AdamW step and hyper-parameters travel with
 * the moments, RNG streams are saved as their full state (key, counter,
 * buffered lanes). The moments are saved for the whole buffer: an FSDP run
 * gathers them (or saves from a single-range optimiser) first.
 *
 * Ownership: all pointers in rl_checkpoint_data and rl_train_state are the
 * caller's. On load, state->extra receives a NEW reference (or NULL) that the
 * caller releases with json_decref().
 */
#ifndef RLRT_NN_CHECKPOINT_H
#define RLRT_NN_CHECKPOINT_H

#include <stdint.h>

#include <jansson.h>

#include "rlrt/dtype.h"
#include "common/nn/engine/optim.h"
#include "rlrt/nn/params.h"
#include "common/core/rng.h"

#ifdef __cplusplus
extern "C" {
#endif

#define RL_CKPT_MAX_RNG 8
#define RL_CKPT_NAME_MAX 64
#define RL_CKPT_PATH_MAX 4096

typedef struct rl_ckpt_rng {
    char name[RL_CKPT_NAME_MAX]; /* e.g. "sampler", "dropout" */
    rl_rng rng;                  /* full state, restored exactly */
} rl_ckpt_rng;

typedef struct rl_train_state {
    int64_t step;          /* optimiser steps completed (names step_<N>) */
    int64_t epoch;         /* data epoch */
    int64_t data_position; /* next sample index within the epoch */
    int64_t lr_step;       /* LR schedule position (argument of rl_lr_at) */
    rl_lr_schedule lr;     /* schedule in force */
    int n_rng;
    rl_ckpt_rng rng[RL_CKPT_MAX_RNG];
    json_t *extra; /* save: borrowed object or NULL; load: new reference */
} rl_train_state;

/* What a checkpoint holds besides the trainer state. */
typedef struct rl_checkpoint_data {
    const rl_param_manifest *manifest;
    float *params;       /* manifest->total floats */
    rl_dtype param_dtype; /* save: RL_F32 (exact) or RL_BF16/RL_F16; 0 = f32 */
    const json_t *model_metadata; /* save: extra __metadata__ strings or NULL */
    /* AdamW state over the WHOLE buffer (manifest->total floats each), or
     * NULL/NULL for none. On load, when the checkpoint has moments these
     * must be non-NULL. */
    float *exp_avg;
    float *exp_avg_sq;
    rl_adamw_config adamw; /* save: written with the moments; load: filled */
    int64_t adamw_step;    /* save/load: the optimiser's step count (t) */
} rl_checkpoint_data;

/* Saves step state->step under root (created if absent). Replaces an
 * existing step_<N>. Updates root/latest last. */
int rl_checkpoint_save(const char *root, const rl_checkpoint_data *d,
                       const rl_train_state *state);

typedef struct rl_checkpoint_info {
    char dir[RL_CKPT_PATH_MAX]; /* root/step_<N> */
    int64_t step;
    char note[1024]; /* what was skipped and why; "" when nothing was */
} rl_checkpoint_info;

/* Finds the newest complete checkpoint under root. RL_ENOTFOUND (with a
 * message that includes the note) when root or its step_<N> directories do
 * not exist; RL_EPROTO when some exist and none is complete (a step_<N> is
 * renamed into place whole, so those were damaged: a resume must not start
 * afresh over them); RL_EIO when root cannot be read. */
int rl_checkpoint_find(const char *root, rl_checkpoint_info *info);

/* True if dir holds all three files and trainer_state.json parses with the
 * expected format; otherwise 0 with a message saying what is wrong. */
int rl_checkpoint_is_complete(const char *dir);

/* Loads a checkpoint directory: params (must match d->manifest exactly),
 * moments (when the checkpoint has them and d->exp_avg is non-NULL; a
 * checkpoint without moments leaves them untouched and adamw_step = 0), the
 * AdamW config and step, and the trainer state. */
int rl_checkpoint_load(const char *dir, rl_checkpoint_data *d, rl_train_state *state);

/* Helpers for trainer_state.json and callers that keep RNGs elsewhere. */
json_t *rl_rng_to_json(const rl_rng *g);
int rl_rng_from_json(const json_t *j, rl_rng *g);
/* Adds (or replaces) RNG `name` in state. */
int rl_train_state_set_rng(rl_train_state *s, const char *name, const rl_rng *g);
/* Pointer to RNG `name` in state, or NULL. */
rl_rng *rl_train_state_get_rng(rl_train_state *s, const char *name);

/* Keeps the `keep` newest complete checkpoints under root and removes the
 * older step_<N> directories (never the one `latest` names). */
int rl_checkpoint_prune(const char *root, int keep);

#ifdef __cplusplus
}
#endif
#endif
