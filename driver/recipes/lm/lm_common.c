/* lm_common.c — driver-side pieces of the language-model recipes
 * (see lm_common.h). */
#include "driver/recipes/lm/lm_common.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "rlrt/error.h"
#include "rlrt/dtype.h"
#include "common/text/tokenizer.h"
#include "common/nn/engine/safetensors.h"
#include "rlrt/nn/model.h"
#include "common/nn/models/lm/lm_model.h"
#include "rlrt/tensor.h"
#include "rlrt/dataproto.h"
#include "rlrt/config.h"
#include "common/core/util.h"
#include "common/tools/agent_loop.h"
#include "common/data/data.h"
#include "common/metrics/metrics.h"

const char *const rl_lm_roles[] = {RL_ACTOR_ROLE, RL_ROLLOUT_ROLE, RL_REWARD_ROLE, NULL};

static rl_tokenizer *s_tokenizer(const rl_config *job)
{
    const char *name;
    if (rl_config_get_string(job, "data.tokenizer", &name))
        return NULL;
    rl_tokenizer *t = rl_task_tokenizer_open(name);
    if (!t)
        rl_config_error_at(job, "data.tokenizer", rl_error_code(), "%s", rl_error_message());
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

/* data.levels as ints, each a level of the built-in task (1..9). */
static int s_levels(const rl_config *job, int *levels, int *n)
{
    size_t nl = 0;
    if (rl_config_list_len(job, "data.levels", &nl))
        return rl_error_code();
    if (nl == 0 || nl > 8)
        return rl_config_error_at(job, "data.levels", RL_ECONFIG, "expected 1..8 levels, got %zu", nl);
    for (size_t i = 0; i < nl; i++) {
        char key[64];
        int64_t v;
        snprintf(key, sizeof key, "data.levels[%zu]", i);
        if (rl_config_get_int_in(job, key, RL_ARITH_MIN_LEVEL, RL_ARITH_MAX_LEVEL, &v))
            return rl_error_code();
        levels[i] = (int)v;
    }
    *n = (int)nl;
    return RL_OK;
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
                rc = rl_error_set(RL_ERANGE, "%s:%lld: the %s is %lld tokens, more than %s %lld", path,
                                  (long long)rl_dataset_line(ds, i), what, (long long)n,
                                  k ? "rollout.response_length - 1 (the stop token) =" : "data.max_prompt_length",
                                  (long long)limit);
            free(ids);
        }
    }
    rl_dataset_free(ds);
    return rc;
}

int rl_lm_recipe_prepare(rl_config *job, int64_t updates_per_step, const char *response_field)
{
    int64_t total, sched;
    if (rl_config_get_int_in(job, "trainer.total_steps", 0, 1000000000, &total) ||
        rl_config_get_int_in(job, "actor.optim.total_training_steps", -1, 1000000000000, &sched))
        return rl_error_code();
    if (sched == -1) {
        char v[32];
        snprintf(v, sizeof v, "%lld", (long long)(total * updates_per_step));
        if (rl_config_set_yaml(job, "actor.optim.total_training_steps", v))
            return rl_error_code();
    }
    rl_tokenizer *tok = s_tokenizer(job);
    if (!tok)
        return rl_error_code();
    char v[64];
    snprintf(v, sizeof v, "%lld", (long long)rl_tokenizer_vocab_size(tok));
    int rc = rl_config_set_yaml(job, "model.vocab_size", v);
    snprintf(v, sizeof v, "%d", (int)rl_tokenizer_special_id(tok, RL_TOK_EOS));
    if (!rc)
        rc = rl_config_set_yaml(job, "model.eos_token_id", v);
    int32_t pad = rl_tokenizer_special_id(tok, RL_TOK_PAD);
    snprintf(v, sizeof v, "%d", pad >= 0 ? (int)pad : 0);
    if (!rc)
        rc = rl_config_set_yaml(job, "model.pad_token_id", v);
    /* every section a worker will read, checked before any process starts */
    const rl_rollout_tokens_config *ro = NULL;
    const rl_rollout_multi_turn_config *mt = NULL;
    rl_reward_config rw;
    if (rc || (rc = rl_model_check_config(job)) || !rl_config_section_get(job, &rl_actor_section) ||
        !rl_config_section_get(job, &rl_rollout_section) ||
        !(ro = rl_config_section_get(job, &rl_rollout_tokens_section)) ||
        !(mt = rl_config_section_get(job, &rl_rollout_multi_turn_section)) ||
        (rc = rl_reward_config_from_job(job, &rw))) {
        rl_tokenizer_free(tok);
        return rc ? rc : rl_error_code();
    }
    if (mt->enable) { /* the tools and the markup, checked before any worker starts */
        rl_agent *a = rl_agent_open(job);
        if (!a) {
            rl_tokenizer_free(tok);
            return rl_error_code();
        }
        rl_agent_free(a);
    }
    const char *task, *train, *val;
    int64_t seed, ntrain, nval, max_prompt, x;
    int shuffle, tools = 0, levels[8], nl = 0;
    if (rl_config_get_string(job, "data.task", &task) ||
        rl_config_get_string(job, "data.train_files", &train) ||
        rl_config_get_string(job, "data.val_files", &val) ||
        rl_config_get_int_in(job, "data.seed", 0, INT64_MAX, &seed) ||
        rl_config_get_int_in(job, "data.train_size", 1, 1000000000, &ntrain) ||
        rl_config_get_int_in(job, "data.val_size", 1, 1000000000, &nval) ||
        rl_config_get_int_in(job, "data.max_prompt_length", 1, 1 << 20, &max_prompt) ||
        rl_config_get_int_in(job, "data.train_batch_size", 1, 1 << 20, &x) ||
        rl_config_get_bool(job, "data.shuffle", &shuffle) ||
        rl_config_get_bool(job, "data.tool_solutions", &tools) || s_levels(job, levels, &nl)) {
        rl_tokenizer_free(tok);
        return rl_error_code();
    }
    /* the built-in task's files are generated when missing; distinct seeds:
     * validation problems are not training problems */
    if (strcmp(task, "arith") == 0 && access(train, F_OK) != 0 &&
        ((rc = s_mkdirs_for(train)) || (rc = rl_arith_write_jsonl_ex(train, (uint64_t)seed, ntrain, levels, nl, tools))))
        rc = rl_error_wrap(rc, "generating %s", train);
    if (!rc && strcmp(task, "arith") == 0 && access(val, F_OK) != 0 &&
        ((rc = s_mkdirs_for(val)) ||
         (rc = rl_arith_write_jsonl_ex(val, (uint64_t)seed + 1000003, nval, levels, nl, tools))))
        rc = rl_error_wrap(rc, "generating %s", val);
    if (!rc)
        rc = s_check_dataset(tok, train, max_prompt, response_field, ro->response_length);
    if (!rc)
        rc = s_check_dataset(tok, val, max_prompt, NULL, ro->response_length);
    rl_tokenizer_free(tok);
    return rc;
}

int rl_lm_job_sync_weights(rl_lm_job *j) { return rl_weight_sync_run(&j->sync, NULL, NULL); }

int rl_lm_job_open(rl_lm_job *j, rl_driver *d, const rl_config *job)
{
    memset(j, 0, sizeof *j);
    j->d = d;
    j->job = job;
    if (!(j->actor = rl_driver_group(d, RL_ACTOR_ROLE)) ||
        !(j->rollout = rl_driver_group(d, RL_ROLLOUT_ROLE)) ||
        !(j->reward = rl_driver_group(d, RL_REWARD_ROLE)))
        return rl_error_code();
    const rl_actor_config *ac = rl_config_section_get(job, &rl_actor_section);
    const rl_rollout_config *ro = ac ? rl_config_section_get(job, &rl_rollout_section) : NULL;
    const rl_rollout_tokens_config *rt = ro ? rl_config_section_get(job, &rl_rollout_tokens_section) : NULL;
    if (!rt)
        return rl_error_code();
    j->actor_cfg = *ac;
    j->rollout_cfg = *ro;
    j->response_length = rt->response_length;
    if (!(j->tok = s_tokenizer(job)))
        return rl_error_code();
    j->eos = rl_tokenizer_special_id(j->tok, RL_TOK_EOS);
    j->pad = rl_tokenizer_special_id(j->tok, RL_TOK_PAD);
    if (j->pad < 0)
        j->pad = 0;
    const char *train, *val;
    int64_t seed;
    int shuffle;
    if (rl_config_get_string(job, "data.train_files", &train) ||
        rl_config_get_string(job, "data.val_files", &val) ||
        rl_config_get_int_in(job, "data.max_prompt_length", 1, 1 << 20, &j->max_prompt) ||
        rl_config_get_int_in(job, "data.train_batch_size", 1, 1 << 20, &j->batch) ||
        rl_config_get_int_in(job, "data.seed", 0, INT64_MAX, &seed) ||
        rl_config_get_bool(job, "data.shuffle", &shuffle) ||
        rl_config_get_string(job, "trainer.validation_data_dir", &j->val_dump_dir))
        return rl_error_code();
    if (*j->val_dump_dir && rl_mkdir_p(j->val_dump_dir))
        return rl_config_error_at(job, "trainer.validation_data_dir", RL_EIO, "%s",
                                  rl_error_message());
    if (!(j->train = rl_dataset_load_jsonl(train)) || !(j->val = rl_dataset_load_jsonl(val)) ||
        !(j->it = rl_data_iter_new(j->train, (uint64_t)seed, shuffle, 1)))
        return rl_error_code();
    /* models: the actor ranks join one communicator; first weight sync */
    return rl_actor_rollout_open(j->actor, j->rollout, &j->sync);
}

void rl_lm_job_close(rl_lm_job *j)
{
    rl_data_iter_free(j->it);
    rl_dataset_free(j->train);
    rl_dataset_free(j->val);
    rl_tokenizer_free(j->tok);
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
                                append_eos ? "rollout.response_length" : "data.max_prompt_length");
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
    for (int64_t b = 0; b < B; b++) {
        int64_t n = lens[b];
        if (n < 0 || n > R)
            return rl_error_set(RL_ERANGE, "%s[%lld] = %lld outside [0, %lld]", RL_LM_RESPONSE_LENS,
                                (long long)b, (long long)n, (long long)R);
        if (n > 0 && ids[b * R + n - 1] == j->eos)
            n--; /* the stop token is not part of the text */
        char *text = NULL;
        size_t len = 0;
        /* keep <think> etc.: the reward reads them */
        if (rl_tokenizer_decode_opts(j->tok, ids + b * R, n, 0, &text, &len))
            return rl_error_wrap(rl_error_code(), "decoding row %lld", (long long)b);
        int rc = rl_column_set_str(c, b, text);
        free(text);
        if (rc)
            return rc;
    }
    return RL_OK;
}

int rl_lm_job_rollout_start(rl_lm_job *j, const rl_dataproto *batch, int greedy, rl_future **f)
{
    static const char *const gen_in[3] = {RL_LM_PROMPTS, RL_LM_PROMPT_LENS, RL_LM_ROW_SEEDS};
    rl_dataproto *req = rl_dataproto_request(batch, gen_in, 3, NULL, 0,
                                             json_pack("{s:i}", RL_ROLLOUT_GREEDY, greedy));
    *f = req ? rl_group_call(j->rollout, RL_ROLLOUT_GENERATE, RL_DISPATCH_DP_COMPUTE, req) : NULL;
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
    rc = req ? rl_group_call_sync(j->reward, RL_REWARD_COMPUTE, RL_DISPATCH_DP_COMPUTE, req, &scored)
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

/* The integer "level" of dataset row i, or -1 when it has none. */
static json_int_t s_row_level(const rl_dataset *ds, int64_t i)
{
    const json_t *lv = json_object_get(rl_dataset_extra(ds, i), "level");
    return json_is_integer(lv) ? json_integer_value(lv) : -1;
}

/* Per-level accuracy of the validation rows into ms (see the header). */
static int s_put_level_accuracy(const rl_dataset *ds, const float *acc, int64_t n,
                                rl_metric_set *ms)
{
    double sum[RL_LM_VAL_MAX_LEVEL + 1] = {0};
    int64_t cnt[RL_LM_VAL_MAX_LEVEL + 1] = {0};
    for (int64_t i = 0; i < n; i++) {
        json_int_t k = s_row_level(ds, i);
        if (k < 0 || k > RL_LM_VAL_MAX_LEVEL)
            continue;
        sum[k] += acc[i];
        cnt[k]++;
    }
    for (int k = 0; k <= RL_LM_VAL_MAX_LEVEL; k++) {
        char name[48];
        snprintf(name, sizeof name, "val/accuracy/level_%d", k);
        if (cnt[k] && rl_metric_set_put(ms, name, sum[k] / (double)cnt[k]))
            return rl_error_code();
    }
    return RL_OK;
}

int rl_lm_dump_samples(const char *dir, const char *key, int64_t step, const rl_dataproto *dp,
                       const rl_dataset *levels)
{
    int64_t n = rl_dataproto_rows(dp);
    const rl_tensor *score = rl_dataproto_tensor_shaped(dp, RL_REWARD_SCORE, RL_F32, 1, (int64_t[]){n});
    const rl_tensor *acc = score ? rl_dataproto_tensor_shaped(dp, RL_REWARD_ACCURACY, RL_F32, 1, (int64_t[]){n}) : NULL;
    const rl_tensor *fmt = acc ? rl_dataproto_tensor_shaped(dp, RL_REWARD_FORMAT, RL_F32, 1, (int64_t[]){n}) : NULL;
    const rl_tensor *len = fmt ? rl_dataproto_tensor_shaped(dp, RL_LM_RESPONSE_LENS, RL_I32, 1, (int64_t[]){n}) : NULL;
    if (!len)
        return rl_error_wrap(rl_error_code(), "%s", key);
    static const char *const names[4] = {RL_DATA_PROMPT, RL_REWARD_RESPONSE, RL_DATA_GROUND_TRUTH,
                                         RL_DATA_GLOBAL_ID};
    const rl_column *c[4];
    for (int k = 0; k < 4; k++) {
        c[k] = rl_dataproto_column(dp, names[k]);
        if (!c[k] || rl_column_get_type(c[k]) != (k == 3 ? RL_COL_INT64 : RL_COL_STRING))
            return rl_error_set(RL_EPROTO, "%s: the samples have no %s column '%s'", key,
                                k == 3 ? "int64" : "string", names[k]);
    }
    /* optional columns, written when present: int64, int64, double */
    static const char *const opt[4] = {RL_ROLLOUT_ROW_VERSION, RL_LM_GUIDED, RL_LM_KL_PENALTY,
                                       RL_LM_REPLAYED};
    const rl_column *oc[4];
    for (int k = 0; k < 4; k++) {
        oc[k] = rl_dataproto_column(dp, opt[k]);
        if (oc[k] && rl_column_get_type(oc[k]) != (k == 2 ? RL_COL_DOUBLE : RL_COL_INT64))
            oc[k] = NULL;
    }
    /* the mean advantage over each row's loss positions, when the batch has
     * advantages (the rlvr recipe dumps after its adv phase) */
    const rl_tensor *at = rl_dataproto_tensor(dp, RL_ACTOR_ADVANTAGES);
    double *adv = NULL;
    if (at) {
        int64_t mB, mR;
        float *m = rl_lm_response_mask(dp, &mB, &mR);
        at = m ? rl_dataproto_tensor_shaped(dp, RL_ACTOR_ADVANTAGES, RL_F32, 2, (int64_t[]){n, mR}) : NULL;
        adv = at ? malloc(sizeof(double) * (size_t)(n > 0 ? n : 1)) : NULL;
        for (int64_t i = 0; adv && i < n; i++) {
            double sum = 0, cnt = 0;
            for (int64_t t = 0; t < mR; t++) {
                sum += (double)m[i * mR + t] * ((const float *)rl_tensor_data(at))[i * mR + t];
                cnt += m[i * mR + t];
            }
            adv[i] = cnt > 0 ? sum / cnt : 0;
        }
        free(m);
        if (!adv)
            return rl_error_wrap(at ? RL_ENOMEM : rl_error_code(), "%s: advantages", key);
    }
    char *buf = NULL;
    size_t size = 0;
    FILE *mem = open_memstream(&buf, &size);
    if (!mem) {
        free(adv);
        return rl_error_set(RL_ENOMEM, "%s: out of memory", key);
    }
    const float *ps = rl_tensor_data(score), *pa = rl_tensor_data(acc), *pf = rl_tensor_data(fmt);
    const int32_t *pl = rl_tensor_data(len);
    int rc = RL_OK;
    for (int64_t i = 0; !rc && i < n; i++) {
        json_t *o = json_pack("{s:I, s:I}", "step", (json_int_t)step, "global_id",
                              (json_int_t)rl_column_i64(c[3], i));
        json_int_t level = levels ? s_row_level(levels, i) : -1;
        if (o && level >= 0)
            json_object_set_new(o, "level", json_integer(level));
        if (o) {
            json_object_set_new(o, "prompt", json_string(rl_column_str(c[0], i)));
            json_object_set_new(o, "response", json_string(rl_column_str(c[1], i)));
            json_object_set_new(o, "ground_truth", json_string(rl_column_str(c[2], i)));
            json_object_set_new(o, "score", json_real(ps[i]));
            json_object_set_new(o, "accuracy", json_real(pa[i]));
            json_object_set_new(o, "format", json_real(pf[i]));
            json_object_set_new(o, "response_length", json_integer(pl[i]));
            for (int k = 0; k < 4; k++)
                if (oc[k])
                    json_object_set_new(o, opt[k], k == 2 ? json_real(rl_column_f64(oc[k], i))
                                                          : json_integer(rl_column_i64(oc[k], i)));
            if (adv)
                json_object_set_new(o, "advantage", json_real(adv[i]));
        }
        char *line = o ? json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
        if (!line || fprintf(mem, "%s\n", line) < 0)
            rc = rl_error_set(RL_ENOMEM, "%s: out of memory", key);
        free(line);
        json_decref(o);
    }
    free(adv);
    if (fclose(mem) != 0 && !rc)
        rc = rl_error_set(RL_ENOMEM, "%s: out of memory", key);
    char path[4200];
    if (!rc && snprintf(path, sizeof path, "%s/%lld.jsonl", dir, (long long)step) >= (int)sizeof path)
        rc = rl_error_set(RL_ERANGE, "%s: path too long", key);
    if (!rc)
        rc = rl_file_write_atomic(path, buf, size);
    free(buf);
    return rc;
}

int rl_lm_job_validate(rl_lm_job *j, int64_t step, double *accuracy, double *format,
                       double *resp_len, rl_metric_set *ms)
{
    int64_t n = rl_dataset_size(j->val);
    int64_t *rows = malloc(sizeof(int64_t) * (size_t)(n ? n : 1));
    rl_dataproto *dp = rl_dataproto_new();
    if (!rows || !dp) {
        free(rows);
        rl_dataproto_free(dp);
        return rl_error_set(RL_ENOMEM, "validation: out of memory");
    }
    for (int64_t i = 0; i < n; i++)
        rows[i] = i;
    int rc = rl_dataset_fill(j->val, rows, n, dp);
    free(rows);
    if (!rc)
        rc = rl_lm_job_encode_prompts(j, dp);
    int64_t shape[1] = {n};
    if (!rc && !rl_dataproto_new_tensor(dp, RL_LM_ROW_SEEDS, RL_I64, 1, shape))
        rc = rl_error_code();
    double g, r;
    if (!rc)
        rc = rl_lm_job_rollout(j, &dp, 1, &g, &r);
    const rl_tensor *acc = NULL, *fmt = NULL, *len = NULL;
    if (!rc && (!(acc = rl_dataproto_tensor_shaped(dp, RL_REWARD_ACCURACY, RL_F32, 1, NULL)) ||
                !(fmt = rl_dataproto_tensor_shaped(dp, RL_REWARD_FORMAT, RL_F32, 1, NULL)) ||
                !(len = rl_dataproto_tensor_shaped(dp, RL_LM_RESPONSE_LENS, RL_I32, 1, NULL))))
        rc = rl_error_code();
    if (!rc) {
        const float *pa = rl_tensor_data(acc), *pf = rl_tensor_data(fmt);
        const int32_t *pl = rl_tensor_data(len);
        double a = 0, f = 0, l = 0;
        for (int64_t i = 0; i < n; i++) {
            a += pa[i];
            f += pf[i];
            l += pl[i];
        }
        *accuracy = n ? a / n : 0;
        *format = n ? f / n : 0;
        *resp_len = n ? l / n : 0;
        if (ms)
            rc = s_put_level_accuracy(j->val, pa, n, ms);
        if (!rc && j->val_dump_dir && *j->val_dump_dir)
            rc = rl_lm_dump_samples(j->val_dump_dir, "trainer.validation_data_dir", step, dp, j->val);
    }
    rl_dataproto_free(dp);
    return rc ? rl_error_wrap(rc, "validation") : RL_OK;
}

/* The lengths' mask times tensor `extra_name` when the batch has it (NULL:
 * none). */
static float *s_mask(const rl_dataproto *dp, int64_t *B, int64_t *R, const char *extra_name);

float *rl_lm_response_mask(const rl_dataproto *dp, int64_t *B, int64_t *R)
{
    return s_mask(dp, B, R, RL_LM_RESPONSE_MASK);
}

float *rl_lm_length_mask(const rl_dataproto *dp, int64_t *B, int64_t *R)
{
    return s_mask(dp, B, R, NULL);
}

float *rl_lm_sampled_mask(const rl_dataproto *dp, int64_t *B, int64_t *R)
{
    return s_mask(dp, B, R, rl_dataproto_tensor(dp, RL_LM_SAMPLED_MASK) ? RL_LM_SAMPLED_MASK
                                                                        : RL_LM_RESPONSE_MASK);
}

static float *s_mask(const rl_dataproto *dp, int64_t *B, int64_t *R, const char *extra_name)
{
    const rl_tensor *t = rl_dataproto_tensor_shaped(dp, RL_LM_RESPONSES, RL_I32, 2, NULL);
    const rl_tensor *l = t ? rl_dataproto_tensor_shaped(dp, RL_LM_RESPONSE_LENS, RL_I32, 1, NULL) : NULL;
    if (!l)
        return NULL;
    *B = t->shape[0];
    *R = t->shape[1];
    float *mask = calloc((size_t)((*B) * (*R) > 0 ? (*B) * (*R) : 1), sizeof(float));
    if (!mask) {
        rl_error_set(RL_ENOMEM, "out of memory for a (%lld, %lld) mask", (long long)*B, (long long)*R);
        return NULL;
    }
    const int32_t *len = rl_tensor_data(l);
    const rl_tensor *mt = extra_name ? rl_dataproto_tensor(dp, extra_name) : NULL;
    if (mt && !(mt = rl_dataproto_tensor_shaped(dp, extra_name, RL_F32, 2,
                                                (int64_t[]){*B, *R}))) {
        free(mask);
        return NULL;
    }
    const float *extra = mt ? rl_tensor_data(mt) : NULL;
    for (int64_t b = 0; b < *B; b++) {
        if (len[b] < 0 || len[b] > *R) {
            free(mask);
            rl_error_set(RL_ERANGE, "%s[%lld] = %d outside [0, %lld]", RL_LM_RESPONSE_LENS,
                         (long long)b, len[b], (long long)*R);
            return NULL;
        }
        for (int64_t k = 0; k < len[b]; k++)
            mask[b * *R + k] = extra ? extra[b * *R + k] : 1.0f;
    }
    return mask;
}

int64_t *rl_lm_group_ids(const rl_dataproto *dp)
{
    const rl_column *c = rl_dataproto_column(dp, RL_DATA_GLOBAL_ID);
    if (!c || rl_column_get_type(c) != RL_COL_INT64) {
        rl_error_set(RL_ENOTFOUND, "missing int64 column '%s'", RL_DATA_GLOBAL_ID);
        return NULL;
    }
    int64_t B = rl_dataproto_rows(dp);
    int64_t *g = malloc(sizeof(int64_t) * (size_t)(B > 0 ? B : 1));
    if (!g) {
        rl_error_set(RL_ENOMEM, "out of memory");
        return NULL;
    }
    for (int64_t b = 0; b < B; b++)
        g[b] = rl_column_i64(c, b);
    return g;
}

float *rl_lm_row_values(const rl_dataproto *dp, const char *name)
{
    rl_tensor *t = rl_dataproto_tensor_shaped(dp, name, RL_F32, 1, NULL);
    return t ? rl_tensor_data(t) : NULL;
}

static int s_cmp_id(const void *a, const void *b, void *ids)
{
    int64_t x = ((const int64_t *)ids)[*(const int64_t *)a],
            y = ((const int64_t *)ids)[*(const int64_t *)b];
    return (x > y) - (x < y);
}

int rl_lm_id_index_build(rl_lm_id_index *x, const rl_dataset *ds)
{
    memset(x, 0, sizeof *x);
    int64_t n = rl_dataset_size(ds);
    int64_t *ids = malloc(sizeof(int64_t) * (size_t)(n > 0 ? n : 1));
    x->rows = malloc(sizeof(int64_t) * (size_t)(n > 0 ? n : 1));
    x->ids = malloc(sizeof(int64_t) * (size_t)(n > 0 ? n : 1));
    if (!ids || !x->rows || !x->ids) {
        free(ids);
        rl_lm_id_index_free(x);
        return rl_error_set(RL_ENOMEM, "global id index: out of memory");
    }
    for (int64_t i = 0; i < n; i++) {
        ids[i] = rl_dataset_global_id(ds, i);
        x->rows[i] = i;
    }
    qsort_r(x->rows, (size_t)n, sizeof(int64_t), s_cmp_id, ids);
    for (int64_t i = 0; i < n; i++)
        x->ids[i] = ids[x->rows[i]];
    free(ids);
    x->n = n;
    return RL_OK;
}

int64_t rl_lm_id_index_find(const rl_lm_id_index *x, int64_t id)
{
    int64_t lo = 0, hi = x->n;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (x->ids[mid] < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < x->n && x->ids[lo] == id ? x->rows[lo] : -1;
}

void rl_lm_id_index_free(rl_lm_id_index *x)
{
    free(x->ids);
    free(x->rows);
    memset(x, 0, sizeof *x);
}
