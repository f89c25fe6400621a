/* driver/recipes/phases.h — what every training recipe is made of, whatever
 * its track (language model, embodied, diffusion): a short loop of named
 * phase functions, the trainer's cadence and metrics, one weight-sync
 * choreography, and checkpoints through the actor contract.
 *
 * A recipe's step is a table of rl_phase {name, fn} run in order by
 * rl_phases_run(): each phase is a function a reader takes in at a glance,
 * its wall time lands in the step's metrics as timing_s/<name>, and an
 * error names the phase it came from.
 *
 * rl_trainer holds what the loop around the phases needs: trainer.* keys
 * (range-checked), the metrics sink (metrics.jsonl + TensorBoard), the
 * step's metric set, and the checkpoint root. Recipes own their own state
 * and pass it to the phases as `ctx`.
 *
 * Ownership: rl_trainer_open() allocates what rl_trainer_close() frees; the
 * groups and the job are borrowed from the driver. Nothing here prints: the
 * console line is rl_trainer_log_step()'s (through rl_log).
 */
#ifndef RLRT_DRIVER_RECIPES_PHASES_H
#define RLRT_DRIVER_RECIPES_PHASES_H

#include <stdint.h>

#include "../recipe.h"
#include "rlrt/metrics.h"

/* ---- phases ------------------------------------------------------------------------ */

typedef struct rl_phase {
    const char *name;      /* timing_s/<name>; also named in errors */
    int (*run)(void *ctx); /* 0 or an error code with the message set */
    int untimed;           /* 1: the phase records its own timings */
} rl_phase;

/* Runs phases[0..n) in order with `ctx`, putting each one's wall time into
 * ms as timing_s/<name>. Stops at the first error: "phase <name>: ...". */
int rl_phases_run(const rl_phase *phases, int n, void *ctx, rl_metric_set *ms);

/* Monotonic seconds. */
double rl_now_s(void);

/* ---- the trainer --------------------------------------------------------------------- */

typedef struct rl_trainer {
    rl_driver *d;
    const rl_config *job;
    int64_t total_steps, val_every, save_every; /* trainer.*; 0 = never */
    int resume;
    uint64_t seed;
    const char *out_dir;
    char ckpt_dir[4096];  /* <out_dir>/checkpoints */
    rl_metrics *sink;
    rl_metric_set *ms;    /* this step's metrics */
} rl_trainer;

/* Reads trainer.{total_steps, val_every, save_every, resume, seed,
 * output_dir} (keys the recipe lacks are treated as 0 / false). */
int rl_trainer_open(rl_trainer *t, rl_driver *d, const rl_config *job);
/* Opens the metrics sink: resuming at step `start` (> 0) drops what was
 * logged after it; a fresh start (0) drops everything. */
int rl_trainer_open_metrics(rl_trainer *t, int64_t start);
void rl_trainer_close(rl_trainer *t);
/* 1 when `step` is a multiple of `every` (> 0) or the last step. */
int rl_trainer_due(const rl_trainer *t, int64_t step, int64_t every);
/* The console line (rl_log_info) and the metrics sink for this step. */
int rl_trainer_log_step(rl_trainer *t, int64_t step);

/* ---- weight sync --------------------------------------------------------------------
 * One choreography for every recipe: the sender's rank 0 opens the weight
 * channel once (method `open`, meta {host} → {endpoint}), then each sync
 * publishes version + 1 from it (method `publish`, meta {version,
 * receivers}) while every receiver rank waits for that version (method
 * `receive`, meta {endpoint, version}); it returns when both sides are done. */
typedef struct rl_weight_sync {
    rl_group *sender, *receivers;
    const char *open, *publish, *receive;
    int timeout_ms;  /* per sync; <= 0: no limit */
    char endpoint[256];
    int64_t version; /* the last version published (0: none yet) */
} rl_weight_sync;

/* `args` (may be NULL) adds keys to both calls' meta; `replies` (may be
 * NULL) receives the receivers' one_to_all future (the caller frees it). */
int rl_weight_sync_run(rl_weight_sync *s, const json_t *args, rl_future **replies);

/* ---- calls ------------------------------------------------------------------------------ */

/* Calls `method` on every rank (one_to_all) with meta `args` (stolen) and
 * waits; results dropped. */
int rl_call_all(rl_group *g, const char *method, json_t *args);

/* ---- checkpoints through the actor contract (rlrt/roles/actor.h) ---------------------------- */

/* Saves step `step` under t->ckpt_dir: the actor ranks write the model and
 * the optimiser; `extra` (borrowed JSON object) carries the recipe's state. */
int rl_trainer_save(rl_trainer *t, rl_group *actor, int64_t step, int64_t epoch,
                    int64_t data_position, const json_t *extra);
/* Restores the latest complete checkpoint under t->ckpt_dir into the actor
 * ranks: *step (0 when there is none: a fresh start, logged), the data
 * position and *extra (a new reference, or NULL). */
int rl_trainer_restore(rl_trainer *t, rl_group *actor, int64_t *step, int64_t *epoch,
                       int64_t *data_position, json_t **extra);

#endif
