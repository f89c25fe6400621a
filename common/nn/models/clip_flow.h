/* common/nn/models/clip_flow.h — the rectified-flow clip generator kind of rl_model
 * (model.type: clip_flow), the model of the diffusion track (seed 004).
 *
 * A clip is [F, C, H, W] flattened to D = F·C·H·W floats per row, pixels in
 * [−1, 1]. Conventions are Flow-GRPO's (common/algo/diffusion/diffusion.h): σ = 1 is
 * noise, σ = 0 data, x_σ = (1 − σ)·x0 + σ·ε and the network predicts the
 * velocity v = ε − x0 = dx/dσ.
 *
 * Network (one flat buffer; rows are independent, so micro-batching never
 * changes a result):
 *   temb (N, E)  = [sin(1000σ·f_i), cos(1000σ·f_i)], f_i = 10000^(−i/(E/2))
 *   c    (N, Hd) = time(temb) + prompt.embedding[id]      (a learned table of
 *                  the num_prompts built-in prompts, common/data/clips.h)
 *   h_0          = in(x) + c
 *   h_{l+1}      = h_l + fc2_l(silu(fc1_l(silu(h_l)) + c))     l < num_layers
 *   o    (N, D)  = out(silu(h_L))
 *   v            = o                                  (prediction: velocity)
 *                = (x − o) / max(σ, RL_CLIP_FLOW_SIGMA_MIN)  (prediction: x0)
 * With x0-prediction the network outputs the clean clip and the velocity
 * follows from it: a hidden layer narrower than D cannot carry the noise of
 * x through to a predicted ε or v, but it can carry a clean image (the
 * "let denoising models denoise" argument for pixel-space generators); the
 * ODE's last step then lands exactly on x̂0. The loss stays on v.
 * Linear layers are (out, in) with bias; names: in, time, prompt.embedding,
 * blocks.<l>.fc1, blocks.<l>.fc2, out (".weight" / ".bias").
 * model.trunk conv replaces the residual MLP (in, blocks, out) by a small
 * U-Net of 3×3 convolutions over the frames as channels, each stage
 * conditioned per channel on c (hidden_size is then c's width; views time,
 * prompt.embedding, conv.<k>, cond.<k>; common/nn/models/flow_conv_internal.h);
 * everything else (prediction, the chain, sampling) is the same.
 *
 * Device: rl_model_to_device moves the model with either trunk
 * (model_device.h): the trunk, its time embedding and the prompt rows run
 * through the device's kernel table with the activations there; each
 * network call copies x, σ and the ids in and the output out, and the
 * x0-prediction's division, the chain's SDE log-density, the ODE/SDE steps
 * and their noise stay on the host (so the device draws the same noise as
 * the CPU). The conv trunk's CUDA kernels have run on the host emulation
 * of CUDA only (tests/cuda_emu/), not yet on a GPU.
 *
 * Batch layout (tensors forward / forward_backward / sample read):
 *   RL_CF_PROMPT_IDS  (B) i32        the prompt of each row, in [0, num_prompts)
 *   RL_Q_VELOCITY (flow-matching pretraining), K = D:
 *     RL_CF_X_T       (B, D) f32     the noisy clip x_σ
 *     RL_CF_SIGMA     (B) f32        its σ in [0, 1]
 *   RL_Q_LOGP (GRPO re-scoring of a recorded SDE chain), K = N steps:
 *     RL_CF_LATENTS   (B, N+1, D) f32  x at σ_0 = 1 … σ_N (latents[:, 0] is
 *                                      the initial noise)
 *     RL_CF_SIGMAS    (B, N+1) f32     the grid, strictly decreasing, σ_0 <= 1
 *     RL_CF_NOISE_LEVEL (B) f32        the SDE noise level of the chain, > 0
 *     RL_CF_STEP_MASK (B, N) f32 0/1   optional: the steps to score (the
 *                                      timestep subset); absent = all
 *     logp[b, k] = log N(latents[b, k+1]; mean_k, s_k²) averaged over D
 *     (rl_diffusion_sde_logprob), 0 where the mask is 0.
 *
 * Sampling (rl_model_sample) reads RL_CF_PROMPT_IDS, RL_CF_NOISE_SEEDS (B)
 * i64 (the initial noise: Philox(seed, stream 0); rows that share a seed
 * share their noise — init_same_noise) and RL_CF_ROW_SEEDS (B) i64 (the SDE
 * noise of step k: Philox(seed, stream k + 1)). With the shifted σ grid of
 * sampling->num_steps and sampling->shift it returns RL_CF_LATENTS,
 * RL_CF_SIGMAS, RL_CF_NOISE_LEVEL and RL_CF_SAMPLE_LOGP (B, N) f32: greedy
 * is the ODE (Euler: x ← x + (σ_next − σ)·v; log-probs 0, noise level
 * reported as 0), otherwise the SDE with noise_level > 0 and the per-step
 * log-probs of rl_diffusion_sde_step. The last latent is the sample.
 * It also returns RL_CF_FINAL_MEAN (B, D) f32: the last step's ODE mean
 * x_{N−1} + (σ_N − σ_{N−1})·v(x_{N−1}), the x0-prediction of the last step
 * (σ_N = 0), which is the sample without the last step's SDE noise (the
 * ODE's last latent itself when greedy).
 *
 * Config: model.channels/height/width and model.frames, num_prompts,
 * hidden_size, num_layers, time_embed_dim, prediction, trunk, conv_channels (the sections of
 * common/schema/image_models.h). config.json is {"model": {...}}, a job
 * fragment (rl_model_load_dir loads a directory with it).
 */
#ifndef RLRT_NN_CLIP_FLOW_H
#define RLRT_NN_CLIP_FLOW_H

#include "common/schema/image_models.h"
#include "rlrt/nn/model.h"

#ifdef __cplusplus
extern "C" {
#endif

#define RL_CF_PROMPT_IDS "prompt_ids"
#define RL_CF_X_T "x_t"
#define RL_CF_SIGMA "sigma"
#define RL_CF_LATENTS "latents"
#define RL_CF_SIGMAS "sigmas"
#define RL_CF_NOISE_LEVEL "noise_level"
#define RL_CF_STEP_MASK "step_mask"
/* optional (B, N) f32 0/1 of a diffusion_grpo batch: the steps the KL to the
 * reference covers when they differ from RL_CF_STEP_MASK (data.reward_image
 * 'mean' leaves the last step out of the policy gradient, not the KL) */
#define RL_CF_KL_STEP_MASK "kl_step_mask"
#define RL_CF_NOISE_SEEDS "noise_seeds"
#define RL_CF_ROW_SEEDS "row_seeds"
#define RL_CF_SAMPLE_LOGP "sample_logp"
#define RL_CF_FINAL_MEAN "final_mean"

extern const rl_model_kind rl_model_kind_clip_flow;

/* The floor of σ in the x0-prediction's division. */
#define RL_CLIP_FLOW_SIGMA_MIN 0.05f

/* The architecture: the model's two sections as read (model.prediction is
 * RL_CLIP_FLOW_PREDICT_X0 or _VELOCITY). */
typedef struct rl_clip_flow_config {
    rl_image_size_config size;
    rl_clip_flow_model_config net;
} rl_clip_flow_config;

/* The architecture of a clip_flow model (NULL for another kind). */
const rl_clip_flow_config *rl_clip_flow_get_config(const rl_model *m);
/* D = frames·channels·height·width. */
int64_t rl_clip_flow_dim(const rl_clip_flow_config *c);

/* v (n, D) = the network at (x (n, D), sigma (n), ids (n)): no checks
 * beyond ids in range; for tools and tests. */
int rl_clip_flow_velocity(rl_model *m, int64_t n, const float *x, const float *sigma,
                          const int32_t *ids, float *v);

#ifdef __cplusplus
}
#endif
#endif
