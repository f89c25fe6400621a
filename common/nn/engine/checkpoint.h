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
 *                                        used}}, "extra": {caller's object},
 *                                        "checksums": "SHA256SUMS"}
 *   root/step_<N>/...                    what the caller adds (write_extra: the
 *                                        actor's config.json)
 *   root/step_<N>/SHA256SUMS             the sha256 of every other file of the
 *                                        directory, written last (the seal)
 *   root/step_<N>.<name>/                a recipe's state of the same step (the
 *                                        rollout's EMA weights), sealed by its
 *                                        writer with rl_checkpoint_seal
 *   root/latest                          "step_<N>\n", written last
 *
 * Integrity: SHA256SUMS is the checksum manifest, in sha256sum's format
 * ("<64 hex>  <name>" per file, sorted; '#' lines are comments), so
 * `sha256sum -c SHA256SUMS` in the directory checks it by hand; its last line
 * "# sha256 of the lines above: <hex>" protects the manifest itself. Every
 * resume verifies the step it picks (rl_checkpoint_verify, through
 * rl_checkpoint_find): a file whose sha256 differs, a manifest that is
 * damaged, or a manifest that is missing although trainer_state.json says
 * "checksums", makes the step damaged and the resume falls back to the
 * previous intact one, saying which file and the expected and actual sha256.
 * A checkpoint saved before checksums existed (no SHA256SUMS, no
 * "checksums" key) still loads; info->unverified says so. SHA-256 comes from
 * OpenSSL's libcrypto (hardware SHA extensions where the CPU has them;
 * docs/decisions/checkpoints-and-resume.md has the measured cost).
 *
 * Atomicity: the files are written into root/step_<N>.tmp/ (each one
 * atomically, fsynced), SHA256SUMS last, the directory is fsynced and renamed to step_<N>,
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

#include <stddef.h>
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
#define RL_CKPT_SUMS "SHA256SUMS" /* the checksum manifest of a checkpoint directory */

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
    /* save: writes the caller's extra files into `dir` (the step's directory
     * before it is sealed and published, e.g. the model's config.json);
     * NULL for none. Regular files only: the seal lists every file. */
    int (*write_extra)(const char *dir, void *arg);
    void *write_extra_arg;
} rl_checkpoint_data;

/* Saves step state->step under root (created if absent). Replaces an
 * existing step_<N>. Updates root/latest last. */
int rl_checkpoint_save(const char *root, const rl_checkpoint_data *d,
                       const rl_train_state *state);

typedef struct rl_checkpoint_info {
    char dir[RL_CKPT_PATH_MAX]; /* root/step_<N> */
    int64_t step;
    int unverified;  /* directories of the step found that had no checksums */
    char note[4096]; /* what was skipped and why, and what could not be
                      * verified; "" when neither */
} rl_checkpoint_info;

/* Finds the newest intact checkpoint under root: complete and verified
 * (rl_checkpoint_verify). RL_ENOTFOUND (with a message that includes the
 * note) when root or its step_<N> directories do not exist; RL_EPROTO when
 * some exist and none is intact (a step_<N> is renamed into place whole, so
 * those were damaged: a resume must not start afresh over them); RL_EIO when
 * root cannot be read. Reads every file of the step it picks (and of the
 * newer ones it skips). */
int rl_checkpoint_find(const char *root, rl_checkpoint_info *info);

/* True if dir holds all three files and trainer_state.json parses with the
 * expected format; otherwise 0 with a message saying what is wrong. Reads
 * only headers: it does not verify the checksums. */
int rl_checkpoint_is_complete(const char *dir);

/* Checks a step directory whole: complete, every file it lists in
 * SHA256SUMS with that sha256 (model, optimizer and trainer state must be
 * listed), and the sealed directories <dir>.<name> of the same step beside
 * it. RL_OK when intact, *unverified (may be NULL) = the number of
 * directories that have no SHA256SUMS and were not saved with one (written
 * before checksums: taken as they are), and `which` (cap bytes; may be NULL)
 * their paths, ", "-separated. Otherwise RL_EPROTO (RL_ENOTFOUND, RL_EIO) with
 * "<dir>/model.safetensors: damaged: sha256 expected <hex> (SHA256SUMS),
 * got <hex>", or what else is wrong. SHA256SUMS is untrusted input: at most
 * 64 KiB and 256 plain file names of this directory. */
int rl_checkpoint_verify(const char *dir, int *unverified, char *which, size_t cap);

/* Writes dir/SHA256SUMS (atomically): the sha256 of every regular file in
 * dir, sorted by name. Anything else in dir (a subdirectory, a link) is an
 * error: a sealed directory is covered whole. */
int rl_checkpoint_seal(const char *dir);

/* Loads a checkpoint directory: params (must match d->manifest exactly),
 * moments (when the checkpoint has them and d->exp_avg is non-NULL; a
 * checkpoint without moments leaves them untouched and adamw_step = 0), the
 * AdamW config and step, and the trainer state. Every value is checked, but
 * the checksums are not read again: the caller verified the directory (it
 * came from rl_checkpoint_find, or rl_checkpoint_verify). */
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
