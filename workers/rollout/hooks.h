/* workers/rollout/hooks.h — what the rollout role (rollout.c) lends the
 * code of a track, and the hooks a track registers on it.
 *
 * The role is generic: it builds the job's model, receives its weights and
 * samples (generate), or answers an env rank's observations (serve_env,
 * serve_env.c). A track that needs more registers one rl_rollout_hooks in
 * rollout.c's table (one line) and keeps its code in its own file:
 *   multi_turn.c  the language-model track: generate with tool calls
 *                 (rollout.multi_turn)
 *   flow_ema.c    the embodied track: the EMA reference θ_ref of FlowSAR /
 *                 FlowIPO and its annotation, the evaluation EMA θ_eval
 *                 (contract: workers/flow_rl.h)
 * The role calls a hook set's callbacks only when its open said the job
 * uses it; generate, annotate, save_state, load_state and eval_weights go
 * to the first such set that has the callback. Hooks never call back into
 * the role: everything they use comes in rl_rollout_policy.
 *
 * Ownership: a hook set's state is its own (one per process: a worker
 * serves one role, one call at a time), made by open and freed by close. */
#ifndef RLRT_WORKERS_ROLLOUT_HOOKS_H
#define RLRT_WORKERS_ROLLOUT_HOOKS_H

#include <stdint.h>

#include "rlrt/nn/model.h"
#include "rlrt/runtime/worker.h"

/* The rollout's model and settings (borrowed for one call). */
typedef struct rl_rollout_policy {
    rl_model *model;            /* NULL until init_model */
    rl_model_sampling sampling; /* the job's sampling settings; greedy as the call asks */
    uint64_t seed;              /* trainer.seed */
    uint64_t version;           /* the active weight version (0: none yet) */
} rl_rollout_policy;

/* A method of a track on the rollout (p->model may be NULL: say so). */
typedef int (*rl_rollout_hook_fn)(rl_worker_ctx *ctx, const rl_rollout_policy *p, const rl_dataproto *in,
                                  rl_dataproto **out);

typedef struct rl_rollout_hooks {
    const char *name; /* the track, for messages */
    /* At CONFIGURE: reads the track's sections; *active = 0 when the job
     * does not use the track (then no other callback is called). */
    int (*open)(rl_worker_ctx *ctx, int *active);
    void (*close)(void);
    /* A new model was built: drop what came from the old one. */
    void (*reset)(void);
    /* After a completed weight sync (p->model holds the new weights). */
    int (*on_sync)(rl_worker_ctx *ctx, const rl_rollout_policy *p);
    /* Sampling in the track's own way (instead of rl_model_sample); the
     * role adds the weight version. */
    rl_rollout_hook_fn generate;
    /* The rollout's methods of the same names (workers/rollout/rollout.h). */
    rl_rollout_hook_fn annotate, save_state, load_state, eval_weights;
} rl_rollout_hooks;

extern const rl_rollout_hooks rl_rollout_multi_turn_hooks; /* multi_turn.c */
extern const rl_rollout_hooks rl_rollout_flow_ema_hooks;   /* flow_ema.c */

#endif
