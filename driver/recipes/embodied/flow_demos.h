/* driver/recipes/embodied/flow_demos.h — the demonstration pairs of the embodied
 * track's flow policy (common/nn/models/flow_policy.h), shared by the few-shot warm
 * start (flow_warmstart) and the demonstration anchor of libero_rl
 * (algorithm.demo_coef).
 *
 *   data   a libero_collect dataset (docs/ARCHITECTURE.md "Demonstration
 *          datasets"): the first per_task successful episodes of each task;
 *          a pair per step s: the observation before s and the chunk of C
 *          actions s … s+C−1, past the episode's end the last action
 *          repeated (π0 / LIBERO loaders). Every index and length of the
 *          file is checked; a non-finite action is an error.
 *   norm   mean and std over the pairs of the 137 observation floats
 *          (std floored at 0.01): what the warm start sets as obs_norm.
 *   batch  B pairs drawn by Philox(seed ^ 0x77a5, step·1000003 + row),
 *          t ~ U(0, 1) or π0's 0.999·Beta(1.5, 1) + 0.001 (beta_t),
 *          ε ~ N(0, 1), x_t = (1 − t)·a + t·ε, target ε − a: the request of
 *          the actor's flow_matching_step (RL_FP_PROPRIO, RL_FP_OBJECT,
 *          RL_FP_TASK, RL_FP_X_T, RL_FP_T, RL_ACTOR_VELOCITY_TARGET; meta
 *          RL_ACTOR_GLOBAL_ROWS = B). Same arguments, same bits.
 *
 * Ownership: rl_flow_demos_load fills *p (the caller's, rl_flow_demos_free);
 * rl_flow_demos_batch returns a new DataProto (NULL + message). */
#ifndef RLRT_DRIVER_FLOW_DEMOS_H
#define RLRT_DRIVER_FLOW_DEMOS_H

#include <stdint.h>

#include "rlrt/config.h"
#include "rlrt/dataproto.h"
#include "common/nn/models/flow_policy.h"
#include "common/schema/env.h"

#define RL_FLOW_DEMOS_OBS (RL_FP_PROPRIO_DIM + RL_FP_OBJECT_DIM)

/* The dataset's tensors (libero_collect writes demos.safetensors, metadata
 * format rlrt-libero-demos-1, and dataset.json beside it): per step, then
 * per episode. Its metadata also holds the task languages (a JSON list by
 * task id), max_episode_steps, num_action_chunks and the episode count. */
#define RL_DEMOS_PROPRIO "obs/proprio"            /* (steps, 39) f32 */
#define RL_DEMOS_OBJECT "obs/object"              /* (steps, 98) f32 */
#define RL_DEMOS_ACTIONS "actions"                /* (steps, 7) f32 */
#define RL_DEMOS_REWARDS "rewards"                /* (steps) f32 */
#define RL_DEMOS_START "episode/start"            /* (episodes) i64: its first step */
#define RL_DEMOS_LENGTH "episode/length"          /* (episodes) i64 */
#define RL_DEMOS_TASK "episode/task_id"           /* (episodes) i64 */
#define RL_DEMOS_INIT "episode/init_index"        /* (episodes) i64 */
#define RL_DEMOS_SUCCESS "episode/success"        /* (episodes) u8 */
#define RL_DEMOS_FINAL_PROPRIO "episode/final_proprio" /* (episodes, 39) f32: after the last step */
#define RL_DEMOS_FINAL_OBJECT "episode/final_object"   /* (episodes, 98) f32 */

typedef struct rl_flow_demos {
    int64_t n, C, D, eps;    /* pairs, chunk length, C·7, episodes kept */
    float *prop, *obj, *act; /* (n, 39), (n, 98), (n, D) */
    int64_t *task;           /* (n) */
    float mean[RL_FLOW_DEMOS_OBS], std[RL_FLOW_DEMOS_OBS];
    int64_t per_task[RL_ENV_MAX_TASKS];
} rl_flow_demos;

/* The pairs of `path` with chunks of C actions, tasks in [0, num_tasks); a
 * file that cannot be opened says how to make one (libero_collect). */
int rl_flow_demos_load(const char *path, int64_t per_task, int64_t C, int num_tasks, rl_flow_demos *p);
/* The same, an error located at the job's key that names the file (the
 * field at `offset` of section `sec`: warmstart.demos, algorithm.demos). */
int rl_flow_demos_open(const rl_config *job, const rl_config_section *sec, size_t offset, const char *path,
                       int64_t per_task, int64_t C, int num_tasks, rl_flow_demos *p);
void rl_flow_demos_free(rl_flow_demos *p);
rl_dataproto *rl_flow_demos_batch(const rl_flow_demos *p, uint64_t seed, int64_t step, int64_t B, int beta_t);
/* The demonstration anchor of an update_flow request (workers/flow_rl.h):
 * as many pairs as req has rows, drawn as rl_flow_demos_batch(seed, index,
 * beta t), added under the RL_FLOW_DEMO_* names. */
int rl_flow_demos_anchor(const rl_flow_demos *p, uint64_t seed, int64_t index, rl_dataproto *req);

#endif
