/* common/schema/lm.h — the sections of the language-model track that are
 * not a role's: the model kind lm's keys (model.*, besides model.type and
 * model.init_from of common/schema/model.h), the task's data (data.*) and
 * the validation dumps (trainer.validation_data_dir). The sft and rlvr
 * recipes name them (driver/recipes/lm/); the model kind reads its section
 * when it builds a model (common/nn/models/lm/lm_model.c), the agent loop
 * data.tokenizer (common/tools/agent_loop.c).
 *
 * Derived fields (filled by the checks): the data section's levels as ints.
 */
#ifndef RLRT_SCHEMA_LM_H
#define RLRT_SCHEMA_LM_H

#include <stddef.h>
#include <stdint.h>

#include "common/schema/algorithm.h"
#include "rlrt/config.h"

/* ---- model.* of the lm kind --------------------------------------------------------------
 * vocab_size, eos_token_id and pad_token_id are set from data.tokenizer by
 * the LM recipes before any worker starts (their prepare); 0 / -1 are their
 * "not set" values. The network's own checks (head size, divisibility)
 * come when the kind builds it (rl_lm_config_validate). */
#define RL_LM_MODEL_KEYS(X)                                                                         \
    X(INT, vocab_size, "model.vocab_size", "0", 0, 1 << 24, 0, NULL,                                \
      "vocabulary size; the LM recipes set it from data.tokenizer")                                \
    X(INT, hidden_size, "model.hidden_size", "128", 1, 1 << 16, 0, NULL, "the residual width")     \
    X(INT, intermediate_size, "model.intermediate_size", "384", 1, 1 << 18, 0, NULL,                \
      "the SwiGLU MLP's inner width")                                                              \
    X(INT, num_layers, "model.num_layers", "2", 1, 1024, 0, NULL, "transformer blocks")             \
    X(INT, num_heads, "model.num_heads", "4", 1, 1024, 0, NULL,                                     \
      "attention heads (hidden_size / num_heads: an even head size <= 1024)")                      \
    X(INT, num_kv_heads, "model.num_kv_heads", "2", 1, 1024, 0, NULL,                               \
      "key/value heads (grouped-query attention; divides num_heads)")                              \
    X(INT, max_seq_len, "model.max_seq_len", "96", 2, 1 << 20, 0, NULL,                             \
      "prompt plus response tokens at most")                                                       \
    X(NUM, rope_theta, "model.rope_theta", "10000.0", 0, 1e12, RL_CFG_MIN_OPEN, NULL, "RoPE base") \
    X(NUM, rms_norm_eps, "model.rms_norm_eps", "1.0e-6", 0, 1, RL_CFG_MIN_OPEN, NULL,               \
      "RMSNorm epsilon")                                                                           \
    X(BOOL, tie_word_embeddings, "model.tie_word_embeddings", "true", 0, 0, 0, NULL,                \
      "the output projection is the embedding matrix")                                             \
    X(BOOL, qkv_bias, "model.qkv_bias", "false", 0, 0, 0, NULL,                                     \
      "biases on the q, k, v projections (Qwen2)")                                                 \
    X(BOOL, value_head, "model.value_head", "false", 0, 0, 0, NULL,                                 \
      "a scalar value head (the value quantity)")                                                  \
    X(INT, eos_token_id, "model.eos_token_id", "-1", -1, (1 << 24) - 1, 0, NULL,                    \
      "the stop token (-1: none); the LM recipes set it from data.tokenizer")                      \
    X(INT, pad_token_id, "model.pad_token_id", "0", 0, (1 << 24) - 1, 0, NULL,                      \
      "the padding token; the LM recipes set it from data.tokenizer")                              \
    X(NUM, init_std, "model.init_std", "0.02", 0, 10, 0, NULL,                                      \
      "standard deviation of the random init's normal weights")

typedef struct rl_lm_model_config {
    RL_LM_MODEL_KEYS(RL_CFG_FIELD)
} rl_lm_model_config;

extern const rl_config_section rl_lm_model_section;

/* ---- data.* of the LM recipes ----------------------------------------------------------------- */

/* data.levels: 1..RL_LM_MAX_LEVELS levels, each in [RL_LM_LEVEL_MIN,
 * RL_LM_LEVEL_MAX] (the built-in task's, common/data/data.h RL_ARITH_*_LEVEL;
 * driver/recipes/lm/lm_common.c asserts they agree). */
#define RL_LM_MAX_LEVELS 8
#define RL_LM_LEVEL_MIN 1
#define RL_LM_LEVEL_MAX 9

#define RL_LM_DATA_KEYS(X)                                                                          \
    X(STR, tokenizer, "data.tokenizer", "arith", 0, 0, 0, NULL,                                     \
      "arith, arith_ext (letters and tool markup) or a tokenizer.json path")                       \
    X(STR, task, "data.task", "arith", 0, 0, 0, NULL,                                               \
      "arith: the files below are generated when missing (anything else: they must exist)")        \
    X(STR, train_files, "data.train_files", "runs/data/arith_train.jsonl", 0, 0, 0, NULL,           \
      "the training rows, JSONL (prompt, ground_truth, data_source, global_id, ...)")              \
    X(STR, val_files, "data.val_files", "runs/data/arith_val.jsonl", 0, 0, 0, NULL,                 \
      "the validation rows, JSONL (greedy decoding, every trainer.val_every steps)")               \
    X(INT, seed, "data.seed", "1", 0, INT64_MAX, 0, NULL,                                           \
      "the shuffle's seed and the generated task's (validation: seed + 1000003)")                  \
    X(INT, train_size, "data.train_size", "20000", 1, 1e9, 0, NULL, "rows of a generated training file") \
    X(INT, val_size, "data.val_size", "200", 1, 1e9, 0, NULL, "rows of a generated validation file") \
    X(LIST, levels, "data.levels", "[1, 2]", 0, 0, 0, NULL,                                         \
      "the generated task's levels: 1 to 8 of 1..9 (common/data/data.h)")                          \
    X(BOOL, tool_solutions, "data.tool_solutions", "false", 0, 0, 0, NULL,                          \
      "generated worked solutions call the calculator (needs data.tokenizer arith_ext)")           \
    X(INT, max_prompt_length, "data.max_prompt_length", "24", 1, 1 << 20, 0, NULL,                  \
      "prompt tokens at most (every row is checked at load)")                                      \
    X(BOOL, shuffle, "data.shuffle", "true", 0, 0, 0, NULL, "a new row order every epoch (false: file order)")

typedef struct rl_lm_data_config {
    RL_LM_DATA_KEYS(RL_CFG_FIELD)
    int64_t train_batch_size; /* data.train_batch_size (common/schema/algorithm.h), copied by the check */
    int level[RL_LM_MAX_LEVELS]; /* data.levels, n_levels of them */
    int n_levels;
} rl_lm_data_config;

extern const rl_config_section rl_lm_data_section;

/* ---- trainer.* of the LM recipes ---------------------------------------------------------------- */

#define RL_LM_TRAINER_KEYS(X)                                                                       \
    X(STR, validation_data_dir, "trainer.validation_data_dir", "''", 0, 0, 0, NULL,                 \
      "a directory: every validation's samples as <step>.jsonl ('': off)")

typedef struct rl_lm_trainer_config {
    RL_LM_TRAINER_KEYS(RL_CFG_FIELD)
} rl_lm_trainer_config;

extern const rl_config_section rl_lm_trainer_section;

#endif
