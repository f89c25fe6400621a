/* driver/recipes/lm_common.h — what the language-model recipes (sft, rlvr)
 * share on the driver: tokenizer and data set-up, the actor/rollout/reward
 * groups, prompt batches, weight sync actor → rollout, greedy validation.
 *
 * Tokenisation happens on the driver (as in verl's dataset): workers see
 * token tensors. Keys (defaults in RL_LM_DEFAULTS): data.*, model.*,
 * rollout.*, trainer.*. */
#ifndef RLRT_DRIVER_LM_COMMON_H
#define RLRT_DRIVER_LM_COMMON_H

#include "../recipe.h"
#include "rlrt/data.h"
#include "rlrt/metrics.h"
#include "rlrt/nn/tokenizer.h"

typedef struct rl_lm_job {
    rl_driver *d;
    const rl_config *job;
    rl_group *actor, *rollout, *reward;
    rl_tokenizer *tok;
    int32_t eos, pad;
    rl_dataset *train, *val;
    rl_data_iter *it;
    int64_t max_prompt, response_length;
    char weight_endpoint[256];
    int64_t weight_version;
} rl_lm_job;

/* prepare hook: the tokenizer fixes model.vocab_size/eos/pad; missing data
 * files of the built-in task are generated. */
int rl_lm_prepare(rl_config *job);
/* Groups, data, models on every rank, first weight sync. */
int rl_lm_job_open(rl_lm_job *j, rl_driver *d, const rl_config *job);
void rl_lm_job_close(rl_lm_job *j);
/* Tensors prompts (B,P) i32 and prompt_lens (B) i32 for the batch's
 * "prompt" column (added to dp). */
int rl_lm_job_encode_prompts(rl_lm_job *j, rl_dataproto *dp);
/* Tensors responses (B,R) i32 and response_lens (B) i32 for the texts
 * `texts` (a column name), e.g. worked solutions for SFT. */
int rl_lm_job_encode_responses(rl_lm_job *j, rl_dataproto *dp, const char *texts);
/* String column "response" decoded from responses/response_lens. */
int rl_lm_job_decode(rl_lm_job *j, rl_dataproto *dp);
/* Publishes the actor's weights as the next version and waits until every
 * rollout rank runs it. */
int rl_lm_job_sync_weights(rl_lm_job *j);
/* Greedy generation on the validation set (all of it, or data.val_size
 * rows), scored by the reward group: accuracy and mean response length. */
int rl_lm_job_validate(rl_lm_job *j, double *accuracy, double *format, double *resp_len);
/* Sample and score: generation with sampling over rows already holding
 * prompts/prompt_lens/row_seeds (temperature etc. from rollout.*), then the
 * reward: adds responses, response_lens, response_logp, response_entropy,
 * response, score, accuracy, format. */
int rl_lm_job_rollout(rl_lm_job *j, rl_dataproto **batch, int greedy, double *gen_s,
                      double *reward_s);
double rl_now_s(void);

/* Keys every LM recipe knows. */
#define RL_LM_DEFAULTS \
    "model:\n" \
    "  vocab_size: 0             # set from the tokenizer\n" \
    "  hidden_size: 128\n" \
    "  intermediate_size: 384\n" \
    "  num_layers: 2\n" \
    "  num_heads: 4\n" \
    "  num_kv_heads: 2\n" \
    "  max_seq_len: 96\n" \
    "  rope_theta: 10000.0\n" \
    "  rms_norm_eps: 1.0e-6\n" \
    "  tie_word_embeddings: true\n" \
    "  eos_token_id: -1          # set from the tokenizer\n" \
    "  pad_token_id: 0           # set from the tokenizer\n" \
    "  init_std: 0.02\n" \
    "  init_from: ''             # directory with model.safetensors (warm start)\n" \
    "data:\n" \
    "  tokenizer: arith          # arith (built-in char tokenizer) or a tokenizer.json path\n" \
    "  task: arith               # generate missing files of the built-in task\n" \
    "  train_files: runs/data/arith_train.jsonl\n" \
    "  val_files: runs/data/arith_val.jsonl\n" \
    "  seed: 1\n" \
    "  train_size: 20000\n" \
    "  val_size: 200\n" \
    "  levels: [1, 2]\n" \
    "  max_prompt_length: 24\n" \
    "  train_batch_size: 16\n" \
    "  shuffle: true\n" \
    "  bootstrap: false          # AEPO difficulty pass before training\n" \
    "  bootstrap_size: 64\n" \
    "rollout:\n" \
    "  n: 8\n" \
    "  temperature: 1.0\n" \
    "  top_p: 1.0\n" \
    "  top_k: 0\n" \
    "  response_length: 48\n" \
    "  window_size: 4            # AEPO window entropy\n" \
    "reward:\n" \
    "  format_weight: 0.1\n"

#endif
