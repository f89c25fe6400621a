/* workers/env/env.h — contract of the env role (workers/env/): vectorised
 * LIBERO-Object environments (common/sim/libero.h) that exchange observations
 * and action chunks with the rollout over a direct data channel
 * (rlrt/runtime/channel.h), never through the driver.
 *
 * Config: the env section (common/schema/env.h: env.*, read once at
 * CONFIGURE with rl_config_section_get(config, &rl_env_section)): the data
 * directory and scene, the tasks and their layout over the envs (global env
 * g runs task_ids[(g / group_size) % n]; the G envs of a group share the
 * task and the initial state of every episode, GRPO's groups, unless an
 * interact call is ungrouped), episode length, action chunks, pipeline
 * stages, auto_reset, terminate_on_success, init_state (cycle | random by
 * trainer.seed), heldout_init_states (a task's last H initial states kept
 * for evaluation: training resets never start from them), clip_actions, the channel timeout, the policy the rollout
 * answers with (expert | model: the rollout's flow_policy, whose
 * model.num_action_chunks must equal env.num_action_chunks), its extra cost,
 * and agent-view PNG strips (render_every, render_size; GIFs of evaluation
 * episodes are drawn by the driver instead: driver/recipes/embodied/
 * libero_gif.h).
 *
 * Methods (dispatch):
 *   open_channel  one_to_all  meta RL_ENV_HOST → meta RL_ENV_ENDPOINT (the
 *                             rank listens; rollout rank r connects to env
 *                             rank r)
 *   interact      one_to_all  meta RL_ENV_CHUNK_STEPS T (policy calls per env),
 *                             RL_ENV_RESET (0/1: reset every env first),
 *                             RL_ENV_ROUND (0 .. INT32_MAX: picks the initial
 *                             states of a reset, so a re-run repeats an
 *                             episode; -1 or absent: the envs' own episode
 *                             counts; anything else is refused naming it),
 *                             optional RL_ENV_UNGROUPED (0/1: with
 *                             env.group_size > 1, per-env initial states),
 *                             optional RL_ENV_HELDOUT (0/1: with
 *                             env.heldout_init_states H > 0, a reset
 *                             starts from a task's last H initial states,
 *                             the held-out split evaluation reports on;
 *                             0: from the others, the training split) →
 *                             the rank's envs as rows, K = T · num_action_chunks:
 *       RL_ENV_PROPRIO  (N, K+1, 39) f32  observation before step k (k = K: after)
 *       RL_ENV_OBJECT   (N, K+1, 98) f32
 *       RL_ENV_ACTIONS  (N, K, 7) f32     actions as applied (clipped)
 *       RL_ENV_REWARDS  (N, K) f32        1 on a step that ends in success
 *       RL_ENV_DONES    (N, K) u8         the episode ended at this step
 *       RL_ENV_VALID    (N, K) u8         a step was taken (0 after the end
 *                                         when auto_reset is off)
 *       RL_ENV_TASK     (N, K+1) i64      task of the episode at step k
 *       RL_ENV_INIT     (N, K+1) i64      its initial state
 *       RL_ENV_SUCCESS  (N, K+1) u8       success_once of the episode so far
 *       column RL_ENV_FRAMES (bytes)      row 0: a PNG strip of the rank's first
 *                                         env when env.render_every > 0, else empty
 *     meta RL_ENV_M_* (steps, clipped, unstable, seconds stepping / waiting)
 *
 * Data channel (env rank r ⇄ rollout rank r, DataProtos):
 *   env → rollout, per stage s and chunk step t: tensors RL_ENV_PROPRIO (n, 39),
 *     RL_ENV_OBJECT (n, 98) f32, RL_ENV_TASK (n) i64, RL_ENV_NEW_EPISODE (n) u8,
 *     RL_ENV_TASK_INFO (n, 4) f32 (target slot, basket slot, target height,
 *     grasp axis: what the scripted expert needs); meta RL_ENV_STAGE, RL_ENV_STEP;
 *     finally a 0-row message with meta RL_ENV_END = 1.
 *   rollout → env: tensor RL_ENV_ACTIONS (n, C, 7) f32, meta RL_ENV_STAGE,
 *     RL_ENV_STEP (checked against what was sent).
 */
#ifndef RLRT_ROLES_ENV_H
#define RLRT_ROLES_ENV_H

#include "common/schema/env.h" /* rl_env_section, rl_env_config, RL_ENV_MAX_TASKS */

#define RL_ENV_ROLE "env"

#define RL_ENV_OPEN_CHANNEL "open_channel"
#define RL_ENV_INTERACT "interact"

#define RL_ENV_HOST "host"
#define RL_ENV_ENDPOINT "endpoint"
#define RL_ENV_CHUNK_STEPS "chunk_steps"
#define RL_ENV_RESET "reset"
#define RL_ENV_ROUND "round"
#define RL_ENV_UNGROUPED "ungrouped"
#define RL_ENV_HELDOUT "heldout"
#define RL_ENV_STAGE "stage"
#define RL_ENV_STEP "step"
#define RL_ENV_END "end"

#define RL_ENV_PROPRIO "proprio"
#define RL_ENV_OBJECT "object"
#define RL_ENV_ACTIONS "actions"
#define RL_ENV_REWARDS "rewards"
#define RL_ENV_DONES "dones"
#define RL_ENV_VALID "valid"
#define RL_ENV_TASK "task_id"
#define RL_ENV_INIT "init_index"
#define RL_ENV_SUCCESS "success_once"
#define RL_ENV_NEW_EPISODE "new_episode"
#define RL_ENV_TASK_INFO "task_info"
#define RL_ENV_FRAMES "frames"

#define RL_ENV_M_STEPS "env_steps"
#define RL_ENV_M_CLIPPED "clipped_actions"
#define RL_ENV_M_UNSTABLE "unstable_episodes"
#define RL_ENV_M_EPISODES "episodes_done"
#define RL_ENV_M_STEP_S "step_s"
#define RL_ENV_M_WAIT_S "wait_s"

/* rollout's side of the channel (workers/rollout/rollout.h lists the method) */
#define RL_ENV_SERVE "serve_env"
#define RL_ENV_M_POLICY_CALLS "policy_calls"
#define RL_ENV_M_POLICY_S "policy_s"

#endif
