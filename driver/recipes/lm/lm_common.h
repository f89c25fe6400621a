/* driver/recipes/lm/lm_common.h — what the language-model recipes (sft, rlvr)
 * share on the driver: the checks before any worker starts, tokenizer and
 * data, the actor/rollout/reward groups, prompt encoding, sampling +
 * scoring, the actor's log-probs, greedy validation and sample dumps; and
 * the names of the LM batch's tensors and columns for the batch transforms
 * (rl_lm_batch_names, common/batch/lm_batch.h).
 *
 * Tokenisation happens on the driver (as in verl's dataset): workers see the
 * token tensors of the LM model kind (common/nn/models/lm/lm_model.h). The role
 * contracts (workers/{actor,rollout,reward}/<role>.h) name every method, tensor and
 * argument used here. Config: the sections of common/schema/lm.h and the
 * roles'.
 *
 * Ownership: rl_lm_job_open() fills a caller's struct whose resources
 * rl_lm_job_close() frees; the groups and the job are the driver's.
 */
#ifndef RLRT_DRIVER_LM_COMMON_H
#define RLRT_DRIVER_LM_COMMON_H

#include "common/batch/lm_batch.h"
#include "common/data/data.h"
#include "common/metrics/metrics.h"
#include "common/nn/models/lm/lm_model.h"
#include "common/schema/lm.h"
#include "common/schema/model.h"
#include "common/text/tokenizer.h"
#include "driver/recipes/actor_job.h"
#include "driver/recipes/phases.h"
#include "workers/actor/actor.h"
#include "workers/reward/reward.h"
#include "workers/rollout/rollout.h"

typedef struct rl_lm_job {
    rl_actor_job a;                 /* groups, the actor's config, the actor → rollout sync */
    rl_rollout_config rollout_cfg;
    rl_tokenizer *tok;
    int32_t eos, pad;
    rl_dataset *train, *val;
    rl_data_iter *it;
    int64_t max_prompt, response_length, batch; /* data.max_prompt_length, rollout.response_length,
                                                   data.train_batch_size */
    const char *val_dump_dir;                   /* trainer.validation_data_dir ("": off) */
    json_t *save_files; /* what a saved model carries beside it (rl_lm_save_files) */
} rl_lm_job;

/* The roles the LM recipes call. */
extern const char *const rl_lm_roles[];
/* The sections every LM recipe has (besides the trainer's and its own). */
#define RL_LM_SECTIONS                                                                              \
    &rl_model_base_section, &rl_lm_model_section, &rl_lm_data_section, &rl_lm_trainer_section,      \
        &rl_actor_section, &rl_rollout_section, &rl_rollout_tokens_section,                         \
        &rl_rollout_multi_turn_section, &rl_reward_section, &rl_batch_section

/* Columns the rlvr recipe adds to its batches (sample dumps write them):
 * int64 (B) 1 for a row off-policy guidance put in (rlvr_guidance.h) */
#define RL_LM_GUIDED "guided"
/* int64 (B): how many times the row's prompt has been replayed, 0 for a
 * fresh one (algorithm.hard_replay) */
#define RL_LM_REPLAYED "replayed"
/* double (B): the KL term subtracted from a row's reward, coefficient and
 * AEPO's token weights included (algorithm.use_kl_in_reward) */
#define RL_LM_KL_PENALTY "kl_penalty"
/* (B, R) f32 0/1, the tokens the policy sampled: RL_LM_RESPONSE_MASK as the
 * rollout returned it (0 at tool output), kept when overlong filtering
 * zeroes whole rows of RL_LM_RESPONSE_MASK. */
#define RL_LM_SAMPLED_MASK "sampled_mask"

/* The LM batch's names for the batch transforms (common/batch/lm_batch.h). */
extern const rl_lm_names rl_lm_batch_names;

/* What the LM recipes' prepare hooks share: a Hugging Face directory in
 * model.init_from (or model.path) gives the architecture, the weights'
 * check and the default tokenizer (rl_lm_hf_job_prepare,
 * common/nn/models/lm/lm_hf.h); the tokenizer fixes model.eos/pad and
 * model.vocab_size when nothing set it (else it must have no more ids than
 * model.vocab_size); actor.optim.total_training_steps = -1 becomes
 * trainer.total_steps × `updates_per_step` (optimiser steps per training
 * step); every section the job's workers will read (model, actor, rollout,
 * reward, the multi-turn tools) is checked with located errors; missing data
 * files of the built-in task are generated; and every row of the train and
 * validation files is checked (its prompt, and `response_field` when not
 * NULL, must encode and fit), naming file:line — all before any process
 * starts. */
int rl_lm_recipe_prepare(rl_config *job, int64_t updates_per_step, const char *response_field);
/* The files a saved model carries (the actor's RL_ACTOR_FILES,
 * workers/actor/actor.h) so that its directory is the start of another job
 * and, with a Hugging Face tokenizer, loads in transformers as it is: a
 * tokenizer.json copied with tokenizer_config.json and
 * special_tokens_map.json from beside it, or a built-in character
 * tokenizer as rlrt_tokenizer.json (common/nn/models/lm/lm_hf.h); and
 * model.init_from's generation_config.json when it has one. A new object,
 * or NULL + message. */
json_t *rl_lm_save_files(const rl_config *job, const rl_tokenizer *tok);
/* <trainer.output_dir>/final: the actor's model (trainer.save_dtype) with
 * rl_lm_save_files, what the LM recipes save after their last step. */
int rl_lm_save_final(rl_driver *d, const rl_config *job);
/* Groups, models on every rank, first weight sync, tokenizer, data. */
int rl_lm_job_open(rl_lm_job *j, rl_driver *d, const rl_config *job);
void rl_lm_job_close(rl_lm_job *j);
/* Tensors RL_LM_PROMPTS (B, P) and RL_LM_PROMPT_LENS (B) for the batch's
 * prompt column (added to dp). */
int rl_lm_job_encode_prompts(rl_lm_job *j, rl_dataproto *dp);
/* Tensors RL_LM_RESPONSES (B, R) and RL_LM_RESPONSE_LENS (B) for the texts of
 * column `texts` (e.g. worked solutions for SFT), with the stop token. */
int rl_lm_job_encode_responses(rl_lm_job *j, rl_dataproto *dp, const char *texts);
/* Publishes the actor's weights as the next version and waits until every
 * rollout rank runs it. */
int rl_lm_job_sync_weights(rl_lm_job *j);
/* Sampling (greedy or not) over rows holding prompts, prompt_lens and
 * row_seeds, then the reward: adds the rollout's samples, the decoded
 * RL_REWARD_RESPONSE column and RL_REWARD_SCORE/ACCURACY/FORMAT. */
int rl_lm_job_rollout(rl_lm_job *j, rl_dataproto **batch, int greedy, double *gen_s,
                      double *reward_s);
/* The same in two halves, so generation can overlap other work (one-step-off
 * training): start issues the generate call for the rows' prompts
 * (*f: the future, NULL on error); finish waits for it (*gen_s: the wait),
 * adds the samples and the decoded text to *batch, and scores them. finish
 * frees f whatever happens. */
int rl_lm_job_rollout_start(rl_lm_job *j, const rl_dataproto *batch, int greedy, rl_future **f);
int rl_lm_job_rollout_finish(rl_lm_job *j, rl_dataproto **batch, rl_future *f, double *gen_s,
                             double *reward_s);
/* The second half of finish: the decoded RL_REWARD_RESPONSE column of the
 * batch's responses and the reward ranks' scores, added to *batch
 * (*reward_s: the reward call's wall time). */
int rl_lm_job_score(rl_lm_job *j, rl_dataproto **batch, double *reward_s);
/* The actor's log-probs of the batch's responses under `which`
 * (RL_ACTOR_WHICH_POLICY or _REF), added to dp as (B, R) tensor `logp_as`;
 * with `entropy_as` (may be NULL) the entropies too (lm_actor.c). */
int rl_lm_job_log_prob(rl_lm_job *j, rl_dataproto *dp, const char *which, const char *logp_as,
                       const char *entropy_as);
/* ppo_epochs × mini-batches (actor.ppo_mini_batch_size × rollout.n rows,
 * in order) of the batch, one actor update each, normalised by the
 * mini-batch's loss tokens, rows and sequences over all ranks; metrics
 * actor/{pg_loss, pg_clipfrac, ppo_kl, pg_clipfrac_lower, kl_loss (with
 * the KL loss), grad_norm (the ranks' mean), lr} (lm_actor.c). */
int rl_lm_ppo_update(rl_lm_job *j, const rl_dataproto *batch, rl_metric_set *ms);
/* One supervised step (masked NLL of the responses) normalised by the
 * batch's loss tokens over all ranks; metrics sft/loss (the ranks' sum),
 * actor/grad_norm, actor/lr (lm_actor.c). */
int rl_lm_sft_step(rl_lm_job *j, const rl_dataproto *batch, rl_metric_set *ms);
/* The wall-clock metrics of a finished step (t0: its start; call_wall0,
 * call_comp0: rl_driver_call_time then): timing_s/step, the throughput of
 * the batch's response tokens, and the driver's dispatch, transfer and own
 * (timing_s/adv) share of the step (perf/...). */
int rl_lm_step_perf(rl_trainer *t, const rl_dataproto *batch, double t0, double call_wall0,
                    double call_comp0);
/* Greedy generation on the validation set, scored by the reward group.
 * When ms is not NULL and rows carry an integer "level" (the arithmetic
 * tasks' JSONL does), the accuracy of each level present goes into ms as
 * val/accuracy/level_<k> (levels 0..RL_LM_VAL_MAX_LEVEL; others are counted
 * only in the overall accuracy). With trainer.validation_data_dir set (verl's
 * key) every sample goes to <dir>/<step>.jsonl (rl_lm_dump_samples). */
#define RL_LM_VAL_MAX_LEVEL 15
/* (lm_validate.c, with rl_lm_dump_samples) */
int rl_lm_job_validate(rl_lm_job *j, int64_t step, double *accuracy, double *format,
                       double *resp_len, rl_metric_set *ms);

/* Every sample of the scored batch dp as one JSON line of <dir>/<step>.jsonl,
 * written whole and renamed into place (trainer.validation_data_dir, and
 * the rlvr recipe's trainer.rollout_data_dir, verl's keys): step,
 * global_id, level (from row i of `levels` when given and the row has
 * one), prompt, response, ground_truth, score, accuracy, format,
 * response_length, weight_version, guided and replayed when dp has those int64
 * columns, kl_penalty when it has that double column, and advantage (the
 * mean over the row's loss positions) when it has RL_ACTOR_ADVANTAGES.
 * Errors name `key`. */
int rl_lm_dump_samples(const char *dir, const char *key, int64_t step, const rl_dataproto *dp,
                       const rl_dataset *levels);

#endif
