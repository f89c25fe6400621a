/* lm_common.c — driver-side pieces of the language-model recipes
 * (see lm_common.h). */
#include "driver/recipes/lm/lm_common.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/core/util.h"
#include "common/nn/models/lm/lm_hf.h"
#include "common/schema/trainer.h"
#include "common/schema/lm.h"
#include "common/tools/agent_loop.h"
#include "common/tools/tools.h"
#include "rlrt/dataproto.h"
#include "rlrt/error.h"
#include "rlrt/log.h"
#include "rlrt/tensor.h"

const char *const rl_lm_roles[] = {RL_ACTOR_ROLE, RL_ROLLOUT_ROLE, RL_REWARD_ROLE, NULL};

_Static_assert(RL_LM_LEVEL_MIN == RL_ARITH_MIN_LEVEL && RL_LM_LEVEL_MAX == RL_ARITH_MAX_LEVEL,
               "the levels' bounds of common/schema/lm.h are the task's");

static const char *s_outcome_name(int k) { return rl_tool_outcome_name((rl_tool_outcome)k); }

static const rl_lm_tool_layout s_tool_layout = {
    .n = RL_TOOL_STATS_N, .turns = RL_TS_TURNS, .calls = RL_TS_CALLS, .outcome0 = RL_TS_OUTCOME0,
    .n_outcomes = RL_TOOL_NOUTCOMES, .bad_calls = RL_TS_BAD_CALLS, .truncated = RL_TS_TRUNCATED,
    .max_turns = RL_TS_MAX_TURNS, .outcome_name = s_outcome_name,
};

const rl_lm_names rl_lm_batch_names = {
    .responses = RL_LM_RESPONSES, .response_lens = RL_LM_RESPONSE_LENS,
    .loss_mask = RL_LM_RESPONSE_MASK, .sampled_mask = RL_LM_SAMPLED_MASK,
    .entropy = RL_LM_RESPONSE_ENTROPY, .rollout_logp = RL_LM_RESPONSE_LOGP,
    .score = RL_REWARD_SCORE, .accuracy = RL_REWARD_ACCURACY, .format = RL_REWARD_FORMAT,
    .old_logp = RL_ACTOR_OLD_LOGP, .ref_logp = RL_ACTOR_REF_LOGP, .advantages = RL_ACTOR_ADVANTAGES,
    .group = RL_DATA_GLOBAL_ID, .guided = RL_LM_GUIDED, .kl_penalty = RL_LM_KL_PENALTY,
    .row_version = RL_ROLLOUT_ROW_VERSION, .tool_stats = RL_ROLLOUT_TOOL_STATS,
    .tools = &s_tool_layout,
};

#define S_DATA(field) RL_CFG_PATH(&rl_lm_data_section, rl_lm_data_config, field)

/* The task's tokenizer (data.tokenizer), or NULL + a located error. */
static rl_tokenizer *s_tokenizer(const rl_config *job, const char *name)
{
    rl_tokenizer *t = rl_task_tokenizer_open(name);
    if (!t)
        RL_CFG_ERROR(job, &rl_lm_data_section, rl_lm_data_config, tokenizer, rl_error_code(), "%s",
                     rl_error_message());
    return t;
}

/* mkdir -p of the directory part of path. */
static int s_mkdirs_for(const char *path)
{
    const char *slash = strrchr(path, '/');
    if (!slash || slash == path)
        return RL_OK;
    char *dir = strndup(path, (size_t)(slash - path));
    if (!dir)
        return rl_error_set(RL_ENOMEM, "mkdir: out of memory");
    int rc = rl_mkdir_p(dir);
    free(dir);
    return rc;
}

/* Every row of a JSONL file checked at load, so a bad row is named by
 * file:line before any worker starts (not by batch row when its batch comes):
 * its prompt must encode and fit data.max_prompt_length, and with
 * `response_field` (SFT's worked solutions) that text must encode and fit
 * rollout.response_length with the stop token. */
static int s_check_dataset(const rl_tokenizer *tok, const char *path, int64_t max_prompt,
                           const char *response_field, int64_t max_response)
{
    rl_dataset *ds = rl_dataset_load_jsonl(path);
    if (!ds)
        return rl_error_code();
    int rc = RL_OK;
    for (int64_t i = 0; !rc && i < rl_dataset_size(ds); i++) {
        const char *texts[2] = {rl_dataset_prompt(ds, i), NULL};
        if (response_field)
            texts[1] = json_string_value(json_object_get(rl_dataset_extra(ds, i), response_field));
        for (int k = 0; !rc && k < (response_field ? 2 : 1); k++) {
            const char *what = k ? response_field : "prompt";
            int64_t limit = k ? max_response - 1 : max_prompt; /* the response keeps a stop token */
            if (!texts[k]) {
                rc = rl_error_set(RL_ENOTFOUND, "%s:%lld: no '%s' field", path,
                                  (long long)rl_dataset_line(ds, i), what);
                break;
            }
            int32_t *ids = NULL;
            int64_t n = 0;
            if (rl_tokenizer_encode(tok, texts[k], strlen(texts[k]), &ids, &n))
                rc = rl_error_wrap(RL_EINVAL, "%s:%lld: %s", path, (long long)rl_dataset_line(ds, i),
                                   what);
            else if (n > limit)
                rc = rl_error_set(RL_ERANGE, "%s:%lld: the %s is %lld tokens, more than %s%s %lld",
                                  path, (long long)rl_dataset_line(ds, i), what, (long long)n,
                                  k ? RL_CFG_PATH(&rl_rollout_tokens_section, rl_rollout_tokens_config, response_length) : S_DATA(max_prompt_length),
                                  k ? " - 1 (the stop token) =" : "", (long long)limit);
            free(ids);
        }
    }
    rl_dataset_free(ds);
    return rc;
}

/* The built-in task's files, generated when missing (distinct seeds:
 * validation problems are not training problems). */
static int s_task_files(const rl_lm_data_config *data)
{
    if (strcmp(data->task, "arith") != 0)
        return RL_OK;
    const char *files[2] = {data->train_files, data->val_files};
    int64_t rows[2] = {data->train_size, data->val_size};
    for (int k = 0; k < 2; k++) {
        int rc = RL_OK;
        if (access(files[k], F_OK) != 0 &&
            ((rc = s_mkdirs_for(files[k])) ||
             (rc = rl_arith_write_jsonl_ex(files[k], (uint64_t)data->seed + (k ? 1000003 : 0),
                                           rows[k], data->level, data->n_levels,
                                           data->tool_solutions))))
            return rl_error_wrap(rc, "generating %s", files[k]);
    }
    return RL_OK;
}

/* model.vocab_size (unless set: by the model directory, which may pad its
 * embedding past the tokenizer, or by the job), eos_token_id and
 * pad_token_id from the tokenizer. */
static int s_set_token_ids(rl_config *job, const rl_tokenizer *tok)
{
    const rl_lm_model_config *mc = rl_config_section_get(job, &rl_lm_model_section);
    if (!mc)
        return rl_error_code();
    int64_t nv = rl_tokenizer_vocab_size(tok), have = mc->vocab_size;
    if (have > 0 && nv > have)
        return RL_CFG_ERROR(job, &rl_lm_model_section, rl_lm_model_config, vocab_size, RL_ECONFIG,
                            "%lld, but the tokenizer (%s) has %lld ids", (long long)have,
                            S_DATA(tokenizer), (long long)nv);
    int32_t pad = rl_tokenizer_special_id(tok, RL_TOK_PAD);
    int64_t v[3] = {have > 0 ? have : nv, rl_tokenizer_special_id(tok, RL_TOK_EOS),
                    pad >= 0 ? pad : 0};
    size_t off[3] = {offsetof(rl_lm_model_config, vocab_size),
                     offsetof(rl_lm_model_config, eos_token_id),
                     offsetof(rl_lm_model_config, pad_token_id)};
    /* derived from data.tokenizer: a value out of range is the tokenizer's */
    const char *const from[] = {RL_CFG_PATH(&rl_lm_data_section, rl_lm_data_config, tokenizer), NULL};
    for (int k = 0; k < 3; k++) {
        char text[32];
        snprintf(text, sizeof text, "%lld", (long long)v[k]);
        if (rl_config_key_derive(job, &rl_lm_model_section, off[k], text, from,
                                 "from the tokenizer"))
            return rl_error_code();
    }
    return RL_OK;
}

int rl_lm_recipe_prepare(rl_config *job, int64_t updates_per_step, const char *response_field)
{
    /* a Hugging Face directory: its architecture, weights and tokenizer */
    if (rl_lm_hf_job_prepare(job))
        return rl_error_code();
    /* a copy: setting keys below drops the sections read (the strings stay) */
    const rl_lm_data_config *dp = rl_config_section_get(job, &rl_lm_data_section);
    if (!dp)
        return rl_error_code();
    rl_lm_data_config data = *dp;
    rl_tokenizer *tok = s_tokenizer(job, data.tokenizer);
    if (!tok)
        return rl_error_code();
    /* every section a worker will read, checked before any process starts */
    rl_reward_config rw;
    int rc = s_set_token_ids(job, tok);
    if (!rc)
        rc = rl_actor_job_prepare(job, updates_per_step);
    /* copies: the sections read before a key is set again are dropped */
    const rl_rollout_tokens_config *rtp = rc ? NULL : rl_config_section_get(job, &rl_rollout_tokens_section);
    const rl_rollout_multi_turn_config *mtp = rtp ? rl_config_section_get(job, &rl_rollout_multi_turn_section) : NULL;
    if (!rc && (!mtp || !rl_config_section_get(job, &rl_rollout_section)))
        rc = rl_error_code();
    rl_rollout_tokens_config ro = rc ? (rl_rollout_tokens_config){0} : *rtp;
    int mt_enable = !rc && mtp->enable;
    if (!rc)
        rc = rl_reward_config_from_job(job, &rw);
    if (!rc && mt_enable) { /* the tools and the markup */
        rl_agent *a = rl_agent_open(job);
        rc = a ? RL_OK : rl_error_code();
        rl_agent_free(a);
    }
    if (!rc)
        rc = s_task_files(&data);
    if (!rc)
        rc = s_check_dataset(tok, data.train_files, data.max_prompt_length, response_field,
                             ro.response_length);
    if (!rc)
        rc = s_check_dataset(tok, data.val_files, data.max_prompt_length, NULL, ro.response_length);
    rl_tokenizer_free(tok);
    return rc;
}

int rl_lm_job_sync_weights(rl_lm_job *j) { return rl_actor_job_sync_weights(&j->a); }

/* files[name] = {"copy": dir/name} when that file exists. */
static int s_copy_if(json_t *files, const char *dir, const char *name)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    if (access(path, F_OK) != 0)
        return RL_OK;
    return json_object_set_new(files, name, json_pack("{s:s}", "copy", path))
               ? rl_error_set(RL_ENOMEM, "out of memory")
               : RL_OK;
}

json_t *rl_lm_save_files(const rl_config *job, const rl_tokenizer *tok)
{
    const rl_lm_data_config *data = rl_config_section_get(job, &rl_lm_data_section);
    const rl_model_base_config *base = data ? rl_config_section_get(job, &rl_model_base_section) : NULL;
    json_t *files = base ? json_object() : NULL;
    if (!files) {
        if (base)
            rl_error_set(RL_ENOMEM, "out of memory");
        return NULL;
    }
    int rc = RL_OK;
    if (rl_tokenizer_kind_of(tok) == RL_TOKENIZER_CHAR) {
        char *text = rl_tokenizer_to_json(tok);
        rc = !text ? rl_error_code()
             : json_object_set_new(files, RL_LM_RLRT_TOKENIZER, json_pack("{s:s}", "text", text))
                 ? rl_error_set(RL_ENOMEM, "out of memory")
                 : RL_OK;
        free(text);
    } else { /* tokenizer.json and its special tokens' files */
        const char *path = data->tokenizer, *slash = strrchr(path, '/');
        char dir[4096];
        snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - path) : 1, slash ? path : ".");
        rc = json_object_set_new(files, "tokenizer.json", json_pack("{s:s}", "copy", path))
                 ? rl_error_set(RL_ENOMEM, "out of memory")
                 : RL_OK;
        if (!rc)
            rc = s_copy_if(files, dir, "tokenizer_config.json");
        if (!rc)
            rc = s_copy_if(files, dir, "special_tokens_map.json");
    }
    if (!rc && base->init_from && *base->init_from)
        rc = s_copy_if(files, base->init_from, "generation_config.json");
    if (rc) {
        json_decref(files);
        return NULL;
    }
    return files;
}

int rl_lm_save_final(rl_driver *d, const rl_config *job)
{
    const rl_trainer_config *tc = rl_config_section_get(job, &rl_trainer_section);
    const rl_lm_trainer_config *lt = tc ? rl_config_section_get(job, &rl_lm_trainer_section) : NULL;
    const rl_lm_data_config *data = lt ? rl_config_section_get(job, &rl_lm_data_section) : NULL;
    rl_group *actor = data ? rl_driver_group(d, RL_ACTOR_ROLE) : NULL;
    if (!actor)
        return rl_error_code();
    rl_tokenizer *tok = s_tokenizer(job, data->tokenizer);
    json_t *files = tok ? rl_lm_save_files(job, tok) : NULL;
    rl_tokenizer_free(tok);
    if (!files)
        return rl_error_code();
    char path[4096];
    snprintf(path, sizeof path, "%s/final", tc->output_dir);
    const char *dtype = lt->save_dtype == 1 ? "bfloat16" : "float32"; /* trainer.save_dtype */
    int rc = rl_call_all(actor, RL_ACTOR_SAVE_MODEL,
                         json_pack("{s:s, s:s, s:o}", RL_ACTOR_PATH, path, RL_ACTOR_DTYPE, dtype,
                                   RL_ACTOR_FILES, files));
    if (!rc)
        rl_log_info("saved the model (%s) to %s", dtype, path);
    return rc;
}

int rl_lm_job_open(rl_lm_job *j, rl_driver *d, const rl_config *job)
{
    memset(j, 0, sizeof *j);
    /* models: the actor ranks join one communicator; first weight sync */
    if (rl_actor_job_open(&j->a, d, job, 1, 1))
        return rl_error_code();
    const rl_rollout_config *ro = rl_config_section_get(job, &rl_rollout_section);
    const rl_rollout_tokens_config *rt = ro ? rl_config_section_get(job, &rl_rollout_tokens_section) : NULL;
    if (!rt)
        return rl_error_code();
    j->rollout_cfg = *ro;
    const rl_lm_data_config *data = rl_config_section_get(job, &rl_lm_data_section);
    const rl_lm_trainer_config *tc = data ? rl_config_section_get(job, &rl_lm_trainer_section) : NULL;
    if (!tc || !(j->tok = s_tokenizer(job, data->tokenizer)))
        return rl_error_code();
    j->response_length = rt->response_length;
    j->max_prompt = data->max_prompt_length;
    j->batch = data->train_batch_size;
    j->eos = rl_tokenizer_special_id(j->tok, RL_TOK_EOS);
    j->pad = rl_tokenizer_special_id(j->tok, RL_TOK_PAD);
    if (j->pad < 0)
        j->pad = 0;
    j->val_dump_dir = tc->validation_data_dir;
    if (*j->val_dump_dir && rl_mkdir_p(j->val_dump_dir))
        return RL_CFG_ERROR(job, &rl_lm_trainer_section, rl_lm_trainer_config, validation_data_dir,
                            RL_EIO, "%s", rl_error_message());
    if (!(j->save_files = rl_lm_save_files(job, j->tok)))
        return rl_error_code();
    if (!(j->train = rl_dataset_load_jsonl(data->train_files)) ||
        !(j->val = rl_dataset_load_jsonl(data->val_files)) ||
        !(j->it = rl_data_iter_new(j->train, (uint64_t)data->seed, data->shuffle, 1)))
        return rl_error_code();
    return RL_OK;
}

void rl_lm_job_close(rl_lm_job *j)
{
    rl_data_iter_free(j->it);
    rl_dataset_free(j->train);
    rl_dataset_free(j->val);
    rl_tokenizer_free(j->tok);
    json_decref(j->save_files);
    rl_actor_job_close(&j->a);
    memset(j, 0, sizeof *j);
}

/* Encodes the string column `col` into tensors (B, width) `name` and lens. */
static int s_encode(rl_lm_job *j, rl_dataproto *dp, const char *col, const char *name,
                    const char *lens_name, int64_t width, int append_eos)
{
    const rl_column *c = rl_dataproto_column(dp, col);
    if (!c || rl_column_get_type(c) != RL_COL_STRING)
        return rl_error_set(RL_ENOTFOUND, "string column '%s' missing", col);
    int64_t B = rl_dataproto_rows(dp);
    int64_t shape[2] = {B, width};
    rl_tensor *t = rl_dataproto_new_tensor(dp, name, RL_I32, 2, shape);
    rl_tensor *l = t ? rl_dataproto_new_tensor(dp, lens_name, RL_I32, 1, shape) : NULL;
    if (!l)
        return rl_error_code();
    int32_t *ids = rl_tensor_data(t), *lens = rl_tensor_data(l);
    int eos = append_eos && j->eos >= 0;
    for (int64_t b = 0; b < B; b++) {
        int32_t *tok = NULL;
        int64_t n = 0;
        const char *text = rl_column_str(c, b);
        if (rl_tokenizer_encode(j->tok, text, strlen(text), &tok, &n))
            return rl_error_wrap(rl_error_code(), "row %lld '%s'", (long long)b, text);
        int64_t total = n + eos;
        if (total > width) {
            free(tok);
            return rl_error_set(RL_ERANGE, "row %lld: '%s' is %lld tokens, limit %lld (%s)",
                                (long long)b, text, (long long)total, (long long)width,
                                append_eos ? RL_CFG_PATH(&rl_rollout_tokens_section, rl_rollout_tokens_config, response_length) : S_DATA(max_prompt_length));
        }
        for (int64_t i = 0; i < width; i++)
            ids[b * width + i] = i < n ? tok[i] : (i == n && eos) ? j->eos : j->pad;
        lens[b] = (int32_t)total;
        free(tok);
    }
    return RL_OK;
}

int rl_lm_job_encode_prompts(rl_lm_job *j, rl_dataproto *dp)
{
    return s_encode(j, dp, RL_DATA_PROMPT, RL_LM_PROMPTS, RL_LM_PROMPT_LENS, j->max_prompt, 0);
}

int rl_lm_job_encode_responses(rl_lm_job *j, rl_dataproto *dp, const char *texts)
{
    return s_encode(j, dp, texts, RL_LM_RESPONSES, RL_LM_RESPONSE_LENS, j->response_length, 1);
}

/* String column RL_REWARD_RESPONSE decoded from the responses. */
static int s_decode(rl_lm_job *j, rl_dataproto *dp)
{
    const rl_tensor *t = rl_dataproto_tensor_shaped(dp, RL_LM_RESPONSES, RL_I32, 2, NULL);
    const rl_tensor *l = t ? rl_dataproto_tensor_shaped(dp, RL_LM_RESPONSE_LENS, RL_I32, 1, NULL) : NULL;
    rl_column *c = l ? rl_dataproto_new_column(dp, RL_REWARD_RESPONSE, RL_COL_STRING) : NULL;
    if (!c)
        return rl_error_code();
    int64_t B = t->shape[0], R = t->shape[1];
    const int32_t *ids = rl_tensor_data(t), *lens = rl_tensor_data(l);
    int32_t *keep = malloc(sizeof(int32_t) * (size_t)(R ? R : 1));
    if (!keep)
        return rl_error_set(RL_ENOMEM, "decoding: out of memory");
    for (int64_t b = 0; b < B; b++) {
        int64_t n = lens[b];
        if (n < 0 || n > R) {
            free(keep);
            return rl_error_set(RL_ERANGE, "%s[%lld] = %lld outside [0, %lld]", RL_LM_RESPONSE_LENS,
                                (long long)b, (long long)n, (long long)R);
        }
        if (n > 0 && ids[b * R + n - 1] == j->eos)
            n--; /* the stop token is not part of the text */
        char *text = NULL;
        size_t len = 0;
        /* a model's vocabulary may be padded past the tokenizer's (Qwen2's
         * is): such an id decodes to nothing, as in transformers */
        int64_t k = 0, nv = rl_tokenizer_vocab_size(j->tok);
        for (int64_t i = 0; i < n; i++)
            if (ids[b * R + i] < nv)
                keep[k++] = ids[b * R + i];
        /* keep <think> etc.: the reward reads them */
        if (rl_tokenizer_decode_opts(j->tok, keep, k, 0, &text, &len)) {
            free(keep);
            return rl_error_wrap(rl_error_code(), "decoding row %lld", (long long)b);
        }
        int rc = rl_column_set_str(c, b, text);
        free(text);
        if (rc) {
            free(keep);
            return rc;
        }
    }
    free(keep);
    return RL_OK;
}

int rl_lm_job_rollout_start(rl_lm_job *j, const rl_dataproto *batch, int greedy, rl_future **f)
{
    static const char *const gen_in[3] = {RL_LM_PROMPTS, RL_LM_PROMPT_LENS, RL_LM_ROW_SEEDS};
    rl_dataproto *req = rl_dataproto_request(batch, gen_in, 3, NULL, 0,
                                             json_pack("{s:i}", RL_ROLLOUT_GREEDY, greedy));
    *f = req ? rl_group_call(j->a.rollout, RL_ROLLOUT_GENERATE, RL_DISPATCH_DP_COMPUTE, req) : NULL;
    rl_dataproto_free(req);
    return *f ? RL_OK : rl_error_code();
}

int rl_lm_job_rollout_finish(rl_lm_job *j, rl_dataproto **batch, rl_future *f, double *gen_s,
                             double *reward_s)
{
    rl_dataproto *gen = NULL;
    double t0 = rl_now_s();
    int rc = rl_future_wait(f, -1);
    if (!rc)
        rc = rl_future_take(f, &gen);
    rl_future_free(f);
    *gen_s = rl_now_s() - t0;
    if (!rc && !gen)
        rc = rl_error_set(RL_EPROTO, "%s returned no samples", RL_ROLLOUT_GENERATE);
    if (rc || (rc = rl_dataproto_union_into(batch, gen)))
        return rc;
    return rl_lm_job_score(j, batch, reward_s);
}

int rl_lm_job_score(rl_lm_job *j, rl_dataproto **batch, double *reward_s)
{
    int rc = s_decode(j, *batch);
    if (rc)
        return rc;
    /* only these columns travel to the reward ranks (an empty tensor list) */
    static const char *const rcols[3] = {RL_REWARD_RESPONSE, RL_REWARD_GROUND_TRUTH,
                                         RL_REWARD_DATA_SOURCE};
    rl_dataproto *req = rl_dataproto_request(*batch, rcols, 0, rcols, 3, NULL);
    rl_dataproto *scored = NULL;
    double t0 = rl_now_s();
    rc = req ? rl_group_call_sync(j->a.reward, RL_REWARD_COMPUTE, RL_DISPATCH_DP_COMPUTE, req, &scored)
             : rl_error_code();
    rl_dataproto_free(req);
    *reward_s = rl_now_s() - t0;
    return rc ? rc : rl_dataproto_union_into(batch, scored);
}

int rl_lm_job_rollout(rl_lm_job *j, rl_dataproto **batch, int greedy, double *gen_s,
                      double *reward_s)
{
    rl_future *f = NULL;
    int rc = rl_lm_job_rollout_start(j, *batch, greedy, &f);
    return rc ? rc : rl_lm_job_rollout_finish(j, batch, f, gen_s, reward_s);
}

int rl_lm_step_perf(rl_trainer *t, const rl_dataproto *batch, double t0, double call_wall0,
                    double call_comp0)
{
    double ntok = 0, t_adv = 0, call_wall, call_comp;
    const rl_tensor *lt = rl_dataproto_tensor(batch, RL_LM_RESPONSE_LENS);
    for (int64_t b = 0; lt && b < rl_dataproto_rows(batch); b++)
        ntok += ((const int32_t *)rl_tensor_data((rl_tensor *)lt))[b];
    double t_all = rl_now_s() - t0;
    rl_metric_set_get(t->ms, "timing_s/adv", &t_adv);
    rl_metric_set_put(t->ms, "timing_s/step", t_all);
    rl_metric_set_put(t->ms, RL_M_THROUGHPUT, ntok / t_all);
    /* driver + transfer share: call wall time not spent in handlers, plus
     * driver-side work (advantages etc.), over the step */
    rl_driver_call_time(t->d, &call_wall, &call_comp, NULL);
    double overhead = (call_wall - call_wall0) - (call_comp - call_comp0);
    rl_metric_set_put(t->ms, "perf/dispatch_transfer_s", overhead);
    rl_metric_set_put(t->ms, "perf/driver_compute_s", t_adv);
    rl_metric_set_put(t->ms, "perf/driver_transfer_share", (overhead + t_adv) / t_all);
    return RL_OK;
}
