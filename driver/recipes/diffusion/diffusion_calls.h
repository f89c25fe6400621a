/* driver/recipes/diffusion/diffusion_calls.h — the diffusion recipe's calls
 * to its roles over a batch of rows (the role contracts:
 * workers/{rollout,reward,actor}/<role>.h; the tensors: the clip_flow
 * kind's layout, common/nn/models/clip_flow.h):
 *
 *   rows     prompt ids, noise seeds and SDE seeds (B) to fill, and the
 *            prompt text column filled from the ids
 *   sample   generate on the rollout ranks (greedy: the ODE) → the chains
 *            latents (B, N+1, D), sigmas, noise_level, sample_logp
 *   score    one frame of each final latent (B, 1, 28, 28; data.reward_frame,
 *            0 the first, as the seed scores a video's first frame) with the prompts
 *            on the reward ranks → score and the raw reward columns (B)
 *   eval     the fixed evaluation rows sampled with the ODE and scored
 *   update   one update_diffusion optimiser step per mini-batch and epoch
 *
 * Ownership: the batches are the caller's; each call adds the columns it
 * brings to *rows (rl_dataproto_union_into). Groups are the driver's. */
#ifndef RLRT_DRIVER_DIFFUSION_CALLS_H
#define RLRT_DRIVER_DIFFUSION_CALLS_H

#include <stdint.h>

#include "driver/recipes/actor_job.h"
#include "common/metrics/metrics.h"

/* B rows whose prompt ids, noise seeds and SDE seeds the caller fills
 * through the pointers, then rl_diffusion_prompts. NULL + message. */
rl_dataproto *rl_diffusion_rows(int64_t B, int32_t **ids, int64_t **noise_seed, int64_t **row_seed);
int rl_diffusion_prompts(rl_dataproto *rows);

/* Samples *rows on the rollout ranks (greedy 1: the ODE) and adds the
 * chains of D floats a sample; *N = the chain's steps. */
int rl_diffusion_sample(rl_group *rollout, rl_dataproto **rows, int greedy, int64_t D, int64_t *N);
/* Scores frame `frame` of the final latents of *rows (chains of N steps,
 * D floats a sample; frame·784 < D, the caller's check), or with mean 1 of
 * the rollout's last-step ODE means (RL_CF_FINAL_MEAN, data.reward_image
 * 'mean'), on the reward ranks and adds their columns. */
int rl_diffusion_score(rl_group *reward, rl_dataproto **rows, int64_t N, int64_t D, int64_t frame, int mean);
/* The evaluation: every built-in prompt `per` times with the seeds of
 * rl_diffusion_eval_rows(seed, salt), ODE-sampled and scored → *out. */
int rl_diffusion_eval(const rl_actor_job *j, uint64_t seed, uint64_t salt, int64_t per, int64_t D,
                      int64_t frame, int64_t *N, rl_dataproto **out);

/* The GRPO update over `batch` (B rows with prompt_ids, latents, sigmas,
 * noise_level, step_mask, old_logp, advantages): per epoch the mini-batches
 * of `rows` rows in order, each one update_diffusion step on the actor
 * ranks (meta: its trained steps); the replies' sums become the actor
 * metrics (rl_diffusion_update_metrics; kl_on: actor/kl_loss too). */
int rl_diffusion_update(rl_actor_job *j, const rl_dataproto *batch, int64_t rows, int kl_on,
                        rl_metric_set *ms);

#endif
