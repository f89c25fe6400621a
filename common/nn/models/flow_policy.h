/* common/nn/models/flow_policy.h — the flow-matching action-chunk policy kind of
 * rl_model (model.type: flow_policy), the model of the embodied track
 * (seeds 000 FlowSAR and 001 FlowIPO; π0's action expert, sized for CPUs).
 *
 * Conventions are RLinf / π0's and common/algo/flow/flow.h's: t = 0 is data, t = 1
 * is noise; x_t = (1 − t)·a + t·ε; the network predicts the velocity
 * v = ε − a = −dx/d(1−t), and sampling integrates from t = 1 to t = 0:
 * x_{t_next} = x_t − (t − t_next)·v (Euler, ODE). An action chunk is
 * C = num_action_chunks actions of A = 7 floats (LIBERO's OSC_POSE deltas and
 * gripper, in [−1, 1]); D = C·A.
 *
 * Network (one flat buffer; rows independent, so micro-batching never
 * changes a result):
 *   obs  (N, 137)  = [proprio (39) | object (98)] normalised by the fixed
 *                    buffers obs_norm.mean / obs_norm.std (set from the
 *                    demonstrations at warm start; never trained: their
 *                    gradient is always 0), then clamped to ±model.obs_clip
 *                    when it is > 0: an object the demonstrations never
 *                    moved has std at the 0.01 floor, and a policy that
 *                    nudges it would otherwise feed the network inputs of
 *                    hundreds and get velocities (and gradients) to match
 *   c    (N, H)    = obs_enc(obs) + task.embedding[task]   (obs_enc: a
 *                    two-layer SiLU MLP)
 *   temb (N, E)    = sinusoidal embedding of t, time(temb) added to c
 *   h_0            = in(x_t) + c
 *   h_{l+1}        = h_l + fc2_l(silu(fc1_l(silu(h_l)) + c))      l < num_layers
 *   v    (N, D)    = out(silu(h_L))
 *   value (N, 1)   = value_head(silu(obs_enc(obs) + task.embedding[task]))
 *                    (PPO's critic: it knows its task; shares
 *                    nothing trainable with v but obs_enc and the task table,
 *                    and with model.detach_critic_input, the default, its
 *                    gradient stops at its input: only value_head learns
 *                    from the value loss, so the critic cannot move the
 *                    policy's features)
 *
 * Batch layout (the tensors forward / forward_backward / sample read;
 * every one is checked: presence, dtype, shape, finiteness, task range):
 *   RL_FP_PROPRIO   (B, 39) f32     robot0_proprio-state
 *   RL_FP_OBJECT    (B, 98) f32     object-state
 *   RL_FP_TASK      (B) i64         task id in [0, num_tasks)
 *   RL_Q_VELOCITY, K = D (flow matching; FlowIPO; FlowSAR):
 *     RL_FP_X_T     (B, D) f32      the noisy chunk x_t
 *     RL_FP_T       (B) f32         its t in [0, 1]
 *   RL_Q_LOGP, K = N denoising steps (flow-SDE GRPO/PPO re-scoring of a
 *   recorded chain, rl_flow_step_logprob with RL_FLOW_STEP_SDE; a step whose
 *   mask is 0 is reported 0):
 *     RL_FP_CHAIN   (B, N+1, D) f32 x at t_0 = 1 … t_N = 0 (chain[:, 0] is
 *                                   the initial noise, chain[:, N] the action)
 *     RL_FP_TIMES   (B, N+1) f32    the grid, strictly decreasing from 1 to 0
 *     RL_FP_NOISE_LEVEL (B) f32     the SDE noise level of the chain
 *     RL_FP_STEP_MASK (B, N) f32    the steps that were stochastic (the one
 *                                   random SDE step, or all for a joint
 *                                   log-prob); absent = all
 *   RL_Q_VALUE, K = 1: the observation tensors only.
 *
 * Sampling (rl_model_sample) reads the observation tensors and either
 * RL_FP_INITIAL_NOISE (B, D) f32 (FlowIPO's reference actions from the same
 * noise) or RL_FP_NOISE_SEEDS (B) i64 (the initial noise is Philox(seed,
 * stream 0)), plus RL_FP_ROW_SEEDS (B) i64 for SDE noise (step k:
 * Philox(seed, stream k + 1)). The uniform grid of sampling->num_steps N.
 * greedy: the ODE, every step deterministic. Otherwise flow-SDE with
 * sampling->noise_level: every step (sde_mode joint) or one step per row
 * drawn from its row seed (sde_mode one, RLinf's default) is stochastic.
 * Returns RL_FP_ACTION (B, C, 7) f32 (chain[:, N] reshaped; not clipped —
 * the env clips and counts), RL_FP_INITIAL_NOISE (B, D), RL_FP_CHAIN,
 * RL_FP_TIMES, RL_FP_NOISE_LEVEL, RL_FP_STEP_MASK and RL_FP_SAMPLE_LOGP (B, N)
 * f32 (0 on deterministic steps). Same inputs and seeds → the same bits.
 *
 * Device: rl_model_to_device moves it (model_device.h): the observation
 * encoder (standardisation and clamp included), the trunk and the value
 * head run through the device's kernel table with the activations there.
 * The observations are gathered on the host and copied in with x_t, t
 * and the tasks; v and the value come out; the loss, the chain's SDE
 * log-density and its gradient, the ODE/SDE sampling steps and their noise
 * stay on the host (the same code and draws as on the CPU), and dL/dv and
 * dL/dvalue go back in for the backward. rl_flow_policy_set_obs_norm
 * writes to the model's device.
 *
 * Config: the kind's model section (common/schema/flow_policy.h, after the
 * base model.type / model.init_from); config.json is {"model": {...}}, a job
 * fragment (rl_model_load_dir loads the directory with it).
 *
 * As built (common/nn/models/flow_policy.c; refinements of the contract):
 *   * views, in order: obs_norm.mean, obs_norm.std (137), obs_enc.0 (H, 137),
 *     obs_enc.1 (H, H), task.embedding (num_tasks, H), in (H, D),
 *     time (H, E), blocks.<l>.fc1/fc2 (H, H), out (D, H), value_head (1, H)
 *     (".weight"/".bias"); the trunk (time embedding sin/cos(1000·t·f_i),
 *     in, blocks, out) is clip_flow's (common/nn/models/flow_mlp_internal.h);
 *   * a pass computes RL_Q_VELOCITY or RL_Q_LOGP, either with or without
 *     RL_Q_VALUE (value: (B, 1)); forward() adds "logp_mask" (B, N) with
 *     RL_Q_LOGP;
 *   * init_random: linear weights N(0, 1/fan_in), biases 0, the task table
 *     N(0, 1), obs_norm mean 0 / std 1 (also before any initialisation);
 *   * sampling with RL_FP_INITIAL_NOISE or RL_FP_NOISE_SEEDS; RL_FP_ROW_SEEDS
 *     is needed only for the SDE; sde_mode one picks step
 *     rl_rng_below(Philox(row seed, stream 0), N); deterministic steps are
 *     the ODE (rl_flow_step_sample, noise 0); RL_FP_NOISE_LEVEL is 0 when
 *     greedy.
 */
#ifndef RLRT_NN_FLOW_POLICY_H
#define RLRT_NN_FLOW_POLICY_H

#include "rlrt/nn/model.h"

#ifdef __cplusplus
extern "C" {
#endif

#define RL_FP_PROPRIO "proprio"
#define RL_FP_OBJECT "object"
#define RL_FP_TASK "task"
#define RL_FP_X_T "x_t"
#define RL_FP_T "t"
#define RL_FP_CHAIN "chain"
#define RL_FP_TIMES "times"
#define RL_FP_NOISE_LEVEL "noise_level"
#define RL_FP_STEP_MASK "step_mask"
#define RL_FP_INITIAL_NOISE "initial_noise"
#define RL_FP_NOISE_SEEDS "noise_seeds"
#define RL_FP_ROW_SEEDS "row_seeds"
#define RL_FP_ACTION "action"
#define RL_FP_SAMPLE_LOGP "sample_logp"

#define RL_FP_PROPRIO_DIM 39
#define RL_FP_OBJECT_DIM 98
#define RL_FP_ACTION_DIM 7

extern const rl_model_kind rl_model_kind_flow_policy;

typedef struct rl_flow_policy_config {
    int chunks, num_tasks, hidden, layers, time_dim;
    int sde_joint;   /* model.sde_mode: joint */
    double obs_clip; /* model.obs_clip: 0 = off */
    int detach_critic; /* model.detach_critic_input */
} rl_flow_policy_config;

/* The architecture of a flow_policy model (NULL for another kind). */
const rl_flow_policy_config *rl_flow_policy_get_config(const rl_model *m);
/* D = num_action_chunks · 7. */
int64_t rl_flow_policy_dim(const rl_flow_policy_config *c);

/* Sets the observation normalisation buffers: mean, std (137) f32, std > 0
 * (the warm start computes them from the demonstrations). */
int rl_flow_policy_set_obs_norm(rl_model *m, const float *mean, const float *std);

#ifdef __cplusplus
}
#endif
#endif
