/* driver/recipes/lm/lm_common.h — what the language-model recipes (sft, rlvr)
 * share on the driver: the config they check before any worker starts,
 * tokenizer and data, the actor/rollout/reward groups, prompt encoding,
 * sampling + scoring, and greedy validation.
 *
 * Tokenisation happens on the driver (as in verl's dataset): workers see the
 * token tensors of the LM model kind (common/nn/models/lm/lm_model.h). The role contracts
 * (rlrt/roles/{actor,rollout,reward}.h) name every method, tensor and
 * argument used here.
 *
 * Ownership: rl_lm_job_open() fills a caller's struct whose resources
 * rl_lm_job_close() frees; the groups and the job are the driver's.
 */
#ifndef RLRT_DRIVER_LM_COMMON_H
#define RLRT_DRIVER_LM_COMMON_H

#include "driver/recipes/phases.h"
#include "common/data/data.h"
#include "common/metrics/metrics.h"
#include "common/nn/models/lm/lm_model.h"
#include "common/text/tokenizer.h"
#include "workers/actor/actor.h"
#include "workers/reward/reward.h"
#include "workers/rollout/rollout.h"

typedef struct rl_lm_job {
    rl_driver *d;
    const rl_config *job;
    rl_group *actor, *rollout, *reward;
    rl_tokenizer *tok;
    int32_t eos, pad;
    rl_dataset *train, *val;
    rl_data_iter *it;
    int64_t max_prompt, response_length, batch; /* data.max_prompt_length, rollout.response_length,
                                                   data.train_batch_size */
    rl_actor_config actor_cfg;                  /* the recipe reads the ppo_* keys */
    rl_rollout_config rollout_cfg;
    rl_weight_sync sync;                        /* actor → rollout */
    const char *val_dump_dir;                   /* trainer.validation_data_dir ("": off) */
} rl_lm_job;

/* The roles the LM recipes call. */
extern const char *const rl_lm_roles[];

/* What the LM recipes' prepare hooks share: the tokenizer fixes
 * model.vocab_size/eos/pad; actor.optim.total_training_steps = -1 becomes
 * trainer.total_steps × `updates_per_step` (optimiser steps per training
 * step); every section the job's workers will read (model, actor, rollout,
 * reward) and data.* are checked with located errors; missing data files of
 * the built-in task are generated; and every row of the train and
 * validation files is checked (its prompt, and `response_field` when not
 * NULL, must encode and fit), naming file:line — all before any process
 * starts. */
int rl_lm_recipe_prepare(rl_config *job, int64_t updates_per_step, const char *response_field);
/* Groups, data, models on every rank, first weight sync. */
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
/* Greedy generation on the validation set, scored by the reward group.
 * When ms is not NULL and rows carry an integer "level" (the arithmetic
 * tasks' JSONL does), the accuracy of each level present goes into ms as
 * val/accuracy/level_<k> (levels 0..RL_LM_VAL_MAX_LEVEL; others are counted
 * only in the overall accuracy). With trainer.validation_data_dir set (verl's
 * key) every sample goes to <dir>/<step>.jsonl, written whole and renamed
 * into place: step, global_id, level (when the row has one, >= 0), prompt,
 * response, ground_truth, score, accuracy, format, response_length. */
#define RL_LM_VAL_MAX_LEVEL 15
int rl_lm_job_validate(rl_lm_job *j, int64_t step, double *accuracy, double *format,
                       double *resp_len, rl_metric_set *ms);

/* Every sample of the scored batch dp as one JSON line of <dir>/<step>.jsonl,
 * written whole and renamed into place (trainer.validation_data_dir, and
 * the rlvr recipe's trainer.rollout_data_dir, verl's keys): step,
 * global_id, level (from row i of `levels` when given and the row has
 * one), prompt, response, ground_truth, score, accuracy, format,
 * response_length, weight_version, guided and replayed when dp has those int64
 * columns, and advantage (the mean over the row's loss positions) when it
 * has RL_ACTOR_ADVANTAGES. Errors name `key`. */
#define RL_LM_GUIDED "guided"
/* int64 (B): how many times the row's prompt has been replayed, 0 for a
 * fresh one (rlvr with algorithm.hard_replay) */
#define RL_LM_REPLAYED "replayed"
/* double (B): the KL term subtracted from a row's reward, coefficient and
 * AEPO's token weights included (rlvr with algorithm.use_kl_in_reward) */
#define RL_LM_KL_PENALTY "kl_penalty"
int rl_lm_dump_samples(const char *dir, const char *key, int64_t step, const rl_dataproto *dp,
                       const rl_dataset *levels);

/* (B, R) 0/1 mask of the response tokens from RL_LM_RESPONSES/_LENS, times
 * RL_LM_RESPONSE_MASK when the batch has one (tool output, filtered rows),
 * as a new array the caller frees; or NULL + a message naming the bad tensor. */
float *rl_lm_response_mask(const rl_dataproto *dp, int64_t *B, int64_t *R);
/* (B, R) f32 0/1, the tokens the policy sampled: RL_LM_RESPONSE_MASK as the
 * rollout returned it (0 at tool output), kept by the recipe when overlong
 * filtering zeroes whole rows of RL_LM_RESPONSE_MASK. */
#define RL_LM_SAMPLED_MASK "sampled_mask"
/* The same mask for the tokens the policy sampled (where a KL to the
 * reference is an estimate of it): the lengths times RL_LM_SAMPLED_MASK, or
 * without one RL_LM_RESPONSE_MASK (then only tool output is out of it). */
float *rl_lm_sampled_mask(const rl_dataproto *dp, int64_t *B, int64_t *R);
/* The same from the lengths alone (every sampled position): where outcome
 * rewards sit and group baselines are taken, whatever leaves the loss. */
float *rl_lm_length_mask(const rl_dataproto *dp, int64_t *B, int64_t *R);
/* (B) group ids from the RL_DATA_GLOBAL_ID column (new array), or NULL. */
int64_t *rl_lm_group_ids(const rl_dataproto *dp);
/* The f32 (B) tensor `name` of dp, or NULL + a message naming it. */
float *rl_lm_row_values(const rl_dataproto *dp, const char *name);

/* The rows of a dataset by global id (guidance finds a sample's solution,
 * hard-prompt replay its prompt): ids sorted ascending, rows[i] the row of
 * ids[i]. Owns both arrays (rl_lm_id_index_free). */
typedef struct rl_lm_id_index {
    int64_t *ids, *rows, n;
} rl_lm_id_index;
int rl_lm_id_index_build(rl_lm_id_index *x, const rl_dataset *ds);
/* The row with global id `id`, or -1. */
int64_t rl_lm_id_index_find(const rl_lm_id_index *x, int64_t id);
void rl_lm_id_index_free(rl_lm_id_index *x);

/* The data section of the LM recipes (the task and its batches). */
#define RL_LM_DATA_DEFAULTS \
    "data:\n" \
    "  tokenizer: arith          # arith, arith_ext (letters + tool markup) or a tokenizer.json path\n" \
    "  task: arith               # generate missing files of the built-in task\n" \
    "  train_files: runs/data/arith_train.jsonl\n" \
    "  val_files: runs/data/arith_val.jsonl\n" \
    "  seed: 1\n" \
    "  train_size: 20000\n" \
    "  val_size: 200\n" \
    "  levels: [1, 2]\n" \
    "  tool_solutions: false     # arith: generated worked solutions call the calculator\n" \
    "  max_prompt_length: 24\n" \
    "  train_batch_size: 16\n" \
    "  shuffle: true\n"

#define RL_LM_TRAINER_DEFAULTS \
    "trainer:\n" \
    "  validation_data_dir: \"\"    # a directory: every validation's samples as <step>.jsonl\n"

/* Every fragment an LM recipe's known keys start from. */
#define RL_LM_SECTIONS RL_LM_MODEL_DEFAULTS, RL_LM_DATA_DEFAULTS, RL_LM_TRAINER_DEFAULTS
/* The roles' sections of an LM recipe (common/schema/). */
#define RL_LM_ROLE_SECTIONS &rl_actor_section, &rl_rollout_section, &rl_rollout_tokens_section, \
    &rl_rollout_multi_turn_section, &rl_reward_section

#endif
