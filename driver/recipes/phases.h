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

#include <stddef.h>
#include <stdint.h>

#include "driver/recipe.h"
#include "common/metrics/metrics.h"

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
    /* The start of the interval perf/cpu_cores_busy measures
     * (rl_trainer_cpu_mark): the job's CPU reading, the wall clock and the
     * restart count then. */
    rl_driver_cpu cpu_mark;
    double cpu_mark_wall_s;
    int cpu_mark_restarts;
    /* Files every checkpoint carries beside the model (the actor's
     * RL_ACTOR_FILES, workers/actor/actor.h), or NULL; borrowed: a recipe
     * sets it in open and clears it in close. */
    const json_t *save_files;
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

/* perf/cpu_cores_busy: how many cores the job kept busy over a step — the
 * CPU seconds of the driver and its local workers (rl_driver_cpu_usage)
 * since rl_trainer_cpu_mark, over the wall seconds since then — and
 * perf/cpu_cores, the cores those processes may run on. Together they say
 * how much of the machine a step leaves idle (what overlapping roles, as
 * trainer.staleness does, can win at most). Put only when every rank was
 * counted and no worker restarted since the mark. rl_trainer_open_metrics
 * and every step of rl_recipe_run set the mark; a recipe that logs its
 * steps itself calls both. */
void rl_trainer_cpu_mark(rl_trainer *t);
int rl_trainer_put_cpu(rl_trainer *t);

/* ---- weight sync --------------------------------------------------------------------
 * One choreography for every recipe: the sender's rank 0 opens the weight
 * channel once (method `open`, meta {host} → {endpoint}), then each sync
 * publishes version + 1 from it (method `publish`, meta {version,
 * receivers}) while every receiver rank waits for that version (method
 * `receive`, meta {endpoint, version, host}: host is the rank's node
 * address, where a chained receiver binds its input); it returns when both
 * sides are done.
 * Same GPU: the receiver ranks placed on the sender rank 0's GPU (same node,
 * same first entry of cluster.yaml `gpus:`) are counted to `open`
 * (ipc_receivers); when the sender answers with an ipc_endpoint, those
 * ranks get it in `receive` and take the version over CUDA IPC, and
 * `publish` is told how many go each way (receivers: ZeroMQ,
 * ipc_receivers: CUDA IPC; docs/decisions/gpu-weight-transport.md). What
 * the sender measured is kept per sync (sync_*: 0 / "" when it said
 * nothing). */
typedef struct rl_weight_sync {
    rl_group *sender, *receivers;
    const char *open, *publish, *receive;
    int timeout_ms;  /* per sync; <= 0: no limit */
    char endpoint[256];
    char ipc_endpoint[400]; /* "" : no CUDA IPC */
    /* rollout.weight_transport: 0 auto, 1 zeromq, 2 broadcast; both_cuda:
     * actor.device and rollout.device are cuda (auto broadcasts over NCCL
     * to the ranks on other GPUs then) */
    int transport, both_cuda;
    char bcast_id[256]; /* the broadcast communicator's id from the sender ("": none) */
    int64_t version; /* the last version published (0: none yet) */
    double sync_bytes, sync_s, sync_gbps;
    char sync_transport[48];
    /* Partial rollouts (docs/decisions/partial-rollouts.md): a sync returns
     * once the sender's publish is done, i.e. every receiver acknowledged
     * the version (a rollout switches it in between two decode steps while
     * it generates), without waiting for the receivers' own calls, queued
     * behind their generation; those replies (`pending`, owned) are checked
     * at the start of the next sync. */
    int detach;
    rl_future *pending;
} rl_weight_sync;

/* `args` (may be NULL) adds keys to both calls' meta; `replies` (may be
 * NULL) receives the receivers' one_to_all future (the caller frees it;
 * the sync then waits for them even with detach). */
int rl_weight_sync_run(rl_weight_sync *s, const json_t *args, rl_future **replies);
/* The last sync's measures into ms (wall-clock, so under perf/, which the
 * golden runs skip): perf/weight_sync_bytes, _s, _gbps, and
 * perf/weight_sync_cuda_ipc (1 when some receivers took CUDA IPC),
 * perf/weight_sync_broadcast (1 when some took the broadcast). Nothing
 * when the sender measured nothing. */
int rl_weight_sync_metrics(const rl_weight_sync *s, rl_metric_set *ms);

/* The models of the actor–rollout pair (workers/actor/actor.h, workers/rollout/rollout.h): the
 * actor ranks join one FSDP communicator (rank 0 makes its id), every actor
 * and rollout rank (rollout may be NULL) builds its model at once, and the
 * sync is set up for actor → rollout and run once, so the rollout samples
 * with the actor's weights. */
int rl_actor_rollout_open(rl_group *actor, rl_group *rollout, int transport, int both_cuda, rl_weight_sync *sync);

/* ---- calls ------------------------------------------------------------------------------ */

/* Calls `method` on every rank (one_to_all) with meta `args` (stolen) and
 * waits; results dropped. */
int rl_call_all(rl_group *g, const char *method, json_t *args);

/* ---- checkpoints through the actor contract (workers/actor/actor.h) ---------------------------- */

/* Saves step `step` under t->ckpt_dir: the actor ranks write the model and
 * the optimiser (and t->save_files); `extra` (borrowed JSON object) carries
 * the recipe's state. */
int rl_trainer_save(rl_trainer *t, rl_group *actor, int64_t step, int64_t epoch,
                    int64_t data_position, const json_t *extra);
/* Restores a checkpoint under t->ckpt_dir into the actor ranks: step
 * `want` (> 0: exactly step_<want>, an error if it is not complete; -1: the
 * newest complete one, none being a fresh start that is logged). Gives *step
 * (0 for a fresh start), the data position and *extra (a new reference, or
 * NULL). */
int rl_trainer_restore(rl_trainer *t, rl_group *actor, int64_t want, int64_t *step,
                       int64_t *epoch, int64_t *data_position, json_t **extra);

/* ---- recovery: no step is lost when a worker dies ------------------------------------
 * A recipe marks every rank's incarnation before a step (rl_recovery_mark).
 * When the step fails, rl_recovery_check() waits until the supervisor has
 * every started role READY again and tells whether a rank was replaced
 * meanwhile: then it aborts every group's waits on lost peers
 * (rl_group_abort) and drains them, and the recipe closes its state, reopens it (models rebuilt,
 * communicators joined again), restores its newest checkpoint of this run
 * (saved_step; 0: from the start) and replays the steps since. Everything a
 * step does is a function of (seed, step, round, row) and the restored
 * state, so the replayed steps log the same metrics and the job ends as a
 * fault-free run would. A step that failed without a lost worker is a real
 * error and ends the job, as does a role the supervisor cannot restore. */
typedef struct rl_recovery {
    int64_t max;        /* trainer.max_recoveries (0: fail on a lost worker, as verl) */
    int64_t count;
    int64_t saved_step; /* this run's newest checkpoint (0: none) */
    int64_t *mark;      /* incarnation of every rank of every started group */
    int n_mark;
} rl_recovery;

int rl_recovery_open(rl_recovery *r, const rl_config *job);
void rl_recovery_close(rl_recovery *r);
int rl_recovery_mark(rl_recovery *r, rl_driver *d);
/* After a failed step (its error message set): 1 = recover (logged with the
 * original error), 0 = not recoverable (the original error is restored). */
int rl_recovery_check(rl_recovery *r, rl_driver *d, int64_t step);

/* ---- one trainer loop for every training recipe ------------------------------------
 * A training recipe is its state, the phases of a step and these hooks;
 * rl_recipe_run does the rest, the same for every recipe:
 *
 *   open the trainer (trainer.* sections, the step's metric set) and the
 *   recipe (open), restore the newest checkpoint when trainer.resume
 *   (restore) or start fresh (fresh, then every hook marked at_start: the
 *   step-0 validation, logged as step 0); then for each step: the phases
 *   (timing_s/<phase>), the step's own metrics (step_metrics), every hook
 *   whose cadence is due, the console line and metrics.jsonl, a checkpoint
 *   when trainer.save_every is due (save); a step that loses a worker
 *   closes the recipe (close with reopen = 1), reopens it and restores the
 *   run's newest checkpoint (rl_recovery); at the end close (reopen = 0).
 *
 * Hooks get the recipe's state; the optional ones may be NULL. The
 * trainer is the loop's: open() keeps the pointer until close(). */
#define RL_MAX_PHASES 16
#define RL_MAX_HOOKS 4

typedef struct rl_recipe_hook {
    int64_t every;  /* run after steps that are multiples of it, and after the last (0: never) */
    int at_start;   /* 1: also before step 1 of a fresh start */
    int (*run)(void *st);
} rl_recipe_hook;

typedef struct rl_recipe_loop {
    size_t state_size; /* the recipe's state: rl_recipe_run allocates it zeroed */
    int (*open)(void *st, rl_trainer *t);
    /* checkpoint `want` (-1: the newest complete one; k > 0: step k) into
     * the state, *start = its step (0: nothing to restore); NULL: the
     * recipe does not checkpoint */
    int (*restore)(void *st, int64_t want, int64_t *start);
    int (*fresh)(void *st);                                  /* optional */
    /* the phases of `step` into out[0 .. RL_MAX_PHASES): their count */
    int (*phases)(void *st, int64_t step, rl_phase *out);
    int (*step_metrics)(void *st, double t_step);           /* optional */
    /* the cadenced hooks into out[0 .. RL_MAX_HOOKS): their count */
    int (*hooks)(void *st, rl_recipe_hook *out);            /* optional */
    int (*save)(void *st);                                   /* optional with restore NULL */
    void (*step_clear)(void *st);                           /* optional */
    void (*close)(void *st, int reopen);
} rl_recipe_loop;

/* Runs the loop over a zeroed state of loop->state_size bytes (freed at the
 * end, after close). rl-driver calls it for a recipe with a `loop`. */
int rl_recipe_run(rl_driver *d, const rl_config *job, const rl_recipe_loop *loop);


#endif
