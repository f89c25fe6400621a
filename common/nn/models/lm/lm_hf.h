/* common/nn/models/lm/lm_hf.h — a Hugging Face model directory as the start
 * of an LM job: `model.init_from: <dir>` (or its alias `model.path`, verl's
 * name) with the architecture, the weights and the tokenizer taken from the
 * directory, so a job restates none of them.
 *
 * A directory is a Hugging Face one when it holds config.json; it is read by
 * rl_lm_config_from_hf_json() (common/nn/models/lm/lm_config.h: the qwen2
 * and llama families, refusing what the transformer does not compute, e.g.
 * rope_scaling). Its weights are model.safetensors or a sharded checkpoint
 * (model.safetensors.index.json, common/nn/engine/safetensors.h), F32, BF16
 * or F16. Its tokenizer is tokenizer.json (Hugging Face's, with the special
 * tokens of tokenizer_config.json / generation_config.json beside it:
 * common/data/data.h rl_task_tokenizer_open) or rlrt_tokenizer.json (the
 * built-in character tokenizer a run saves beside its models).
 *
 * The job's keys versus the directory: a model.* architecture key the job
 * sets itself (its file or an override: a node not from the defaults) must
 * equal the directory's value, else a located error naming both; a key the
 * job leaves at its default takes the directory's value. data.tokenizer, when
 * the job leaves it at its default, becomes the directory's tokenizer file.
 *
 * Everything here runs on the driver before any worker starts (the LM
 * recipes' prepare) and reads only small files and safetensors headers.
 * Errors are located at the job's key (rl_config_error_at) and name the
 * file. No allocation outlives a call.
 */
#ifndef RLRT_NN_LM_HF_H
#define RLRT_NN_LM_HF_H

#include "rlrt/config.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The tokenizer file rlrt saves beside a model whose tokenizer is a
 * built-in character one (arith, arith_ext). */
#define RL_LM_RLRT_TOKENIZER "rlrt_tokenizer.json"

/* The model.* keys of the lm kind from dir/config.json (which must exist):
 * vocab_size, hidden_size, intermediate_size, num_layers, num_heads,
 * num_kv_heads, max_seq_len (max_position_embeddings), rope_theta,
 * rms_norm_eps, tie_word_embeddings, qkv_bias, value_head; eos_token_id and
 * pad_token_id from config.json when it names them (a recipe then sets them
 * from the tokenizer). A key the job set itself that disagrees is
 * RL_ECONFIG at that key naming both values. */
int rl_lm_hf_config_apply(rl_config *job, const char *dir);

/* What the LM recipes run first: model.path (when set) becomes
 * model.init_from (a job that sets both to different directories is an
 * error naming both); then, when model.init_from holds a config.json: the
 * architecture (rl_lm_hf_config_apply), the weights' presence and headers
 * (rl_safetensors_dir_check: a missing shard is named) and, when the job has
 * the LM data section and leaves data.tokenizer at its default, the
 * directory's tokenizer (tokenizer.json, else rlrt_tokenizer.json, else
 * RL_ENOTFOUND at model.init_from saying what to do). A model.init_from
 * that is empty, or a directory without config.json, is left as it is (the
 * load names what is missing). */
int rl_lm_hf_job_prepare(rl_config *job);

#ifdef __cplusplus
}
#endif
#endif
