/* lm_common.c — driver-side pieces of the language-model recipes
 * (see lm_common.h). */
#include "lm_common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "rlrt/rlrt.h"

double rl_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static rl_tokenizer *s_tokenizer(const rl_config *job)
{
    const char *name = "arith";
    rl_config_get_string_or(job, "data.tokenizer", "arith", &name);
    if (strcmp(name, "arith") == 0)
        return rl_arith_tokenizer_new();
    return rl_tokenizer_load(name);
}

/* mkdir -p of the directory part of path. */
static void s_mkdirs_for(const char *path)
{
    char buf[4096];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *p = buf + 1; *p; p++) {
        if (*p == '/') {
            *p = '\0';
            mkdir(buf, 0755);
            *p = '/';
        }
    }
}

static int s_make_task_file(const rl_config *job, const char *path, int64_t n, uint64_t seed)
{
    size_t nl = 0;
    int levels[8];
    if (rl_config_list_len(job, "data.levels", &nl))
        return rl_error_code();
    if (nl == 0 || nl > 8)
        return rl_error_set(RL_ECONFIG, "data.levels: expected 1..8 levels, got %zu", nl);
    for (size_t i = 0; i < nl; i++) {
        char key[64];
        int64_t v;
        snprintf(key, sizeof key, "data.levels[%zu]", i);
        if (rl_config_get_int(job, key, &v))
            return rl_error_code();
        levels[i] = (int)v;
    }
    s_mkdirs_for(path);
    return rl_arith_write_jsonl(path, seed, n, levels, (int)nl);
}

int rl_lm_prepare(rl_config *job)
{
    rl_tokenizer *tok = s_tokenizer(job);
    if (!tok)
        return rl_error_wrap(rl_error_code(), "data.tokenizer");
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
    rl_tokenizer_free(tok);
    if (rc)
        return rc;
    const char *task = "arith", *train = NULL, *val = NULL;
    int64_t seed = 1, ntrain = 0, nval = 0;
    if (rl_config_get_string_or(job, "data.task", "arith", &task) ||
        rl_config_get_string(job, "data.train_files", &train) ||
        rl_config_get_string(job, "data.val_files", &val) ||
        rl_config_get_int_or(job, "data.seed", 1, &seed) ||
        rl_config_get_int_or(job, "data.train_size", 20000, &ntrain) ||
        rl_config_get_int_or(job, "data.val_size", 200, &nval))
        return rl_error_code();
    if (strcmp(task, "arith") != 0)
        return RL_OK;
    /* distinct seeds: validation problems are not training problems */
    if (access(train, F_OK) != 0 && (rc = s_make_task_file(job, train, ntrain, (uint64_t)seed)))
        return rl_error_wrap(rc, "generating %s", train);
    if (access(val, F_OK) != 0 &&
        (rc = s_make_task_file(job, val, nval, (uint64_t)seed + 1000003)))
        return rl_error_wrap(rc, "generating %s", val);
    return RL_OK;
}

int rl_lm_job_sync_weights(rl_lm_job *j)
{
    if (!j->weight_endpoint[0]) {
        rl_dataproto *in = rl_dataproto_new_meta(json_pack("{s:s}", "host", rl_group_address(j->actor, 0))), *out = NULL;
        int rc = rl_group_call_sync(j->actor, "weights_open_actor", RL_DISPATCH_RANK_ZERO, in, &out);
        rl_dataproto_free(in);
        if (rc)
            return rc;
        snprintf(j->weight_endpoint, sizeof j->weight_endpoint, "%s",
                 json_string_value(json_object_get(rl_dataproto_meta(out), "endpoint")));
        rl_dataproto_free(out);
    }
    j->weight_version++;
    rl_dataproto *pub = rl_dataproto_new_meta(json_pack("{s:I, s:i}", "version", (json_int_t)j->weight_version,
                                         "receivers", rl_group_size(j->rollout)));
    rl_dataproto *sub = rl_dataproto_new_meta(json_pack("{s:s, s:I}", "endpoint", j->weight_endpoint, "version",
                                         (json_int_t)j->weight_version));
    rl_future *fp = rl_group_call(j->actor, "publish_weights", RL_DISPATCH_RANK_ZERO, pub);
    rl_future *fs = rl_group_call(j->rollout, "sync_weights", RL_DISPATCH_ONE_TO_ALL, sub);
    int rc = rl_future_wait(fs, -1);
    int rc2 = rl_future_wait(fp, -1);
    rl_future_free(fp);
    rl_future_free(fs);
    rl_dataproto_free(pub);
    rl_dataproto_free(sub);
    return rc ? rc : rc2;
}

int rl_lm_job_open(rl_lm_job *j, rl_driver *d, const rl_config *job)
{
    memset(j, 0, sizeof *j);
    j->d = d;
    j->job = job;
    j->actor = rl_driver_group(d, "actor");
    j->rollout = j->actor ? rl_driver_group(d, "rollout") : NULL;
    j->reward = j->rollout ? rl_driver_group(d, "reward") : NULL;
    if (!j->reward)
        return rl_error_wrap(RL_ECONFIG, "the LM recipes need actor, rollout and reward ranks");
    j->tok = s_tokenizer(job);
    if (!j->tok)
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
        rl_config_get_int(job, "data.max_prompt_length", &j->max_prompt) ||
        rl_config_get_int(job, "rollout.response_length", &j->response_length) ||
        rl_config_get_int_or(job, "data.seed", 1, &seed) ||
        rl_config_get_bool_or(job, "data.shuffle", 1, &shuffle))
        return rl_error_code();
    j->train = rl_dataset_load_jsonl(train);
    j->val = j->train ? rl_dataset_load_jsonl(val) : NULL;
    if (!j->val)
        return rl_error_code();
    j->it = rl_data_iter_new(j->train, (uint64_t)seed, shuffle, 1);
    if (!j->it)
        return rl_error_code();
    /* models: the actor ranks join one communicator (rank 0 makes the id) */
    rl_dataproto *init = NULL;
    if (rl_group_size(j->actor) > 1) {
        rl_dataproto *req = rl_dataproto_new_meta(json_pack("{s:s}", "host", rl_group_address(j->actor, 0))), *res = NULL;
        int rc = rl_group_call_sync(j->actor, "comm_id_create", RL_DISPATCH_RANK_ZERO, req, &res);
        rl_dataproto_free(req);
        if (rc)
            return rc;
        init = rl_dataproto_new_meta(json_pack("{s:s}", "comm_id",
                                json_string_value(json_object_get(rl_dataproto_meta(res), "comm_id"))));
        rl_dataproto_free(res);
    }
    rl_future *fa = rl_group_call(j->actor, "init_model", RL_DISPATCH_ONE_TO_ALL, init);
    rl_future *fr = rl_group_call(j->rollout, "init_model", RL_DISPATCH_ONE_TO_ALL, NULL);
    int rc = rl_future_wait(fa, -1);
    int rc2 = rl_future_wait(fr, -1);
    rl_future_free(fa);
    rl_future_free(fr);
    rl_dataproto_free(init);
    if (rc || rc2)
        return rc ? rc : rc2;
    return rl_lm_job_sync_weights(j);
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
    if (!c)
        return rl_error_set(RL_ENOTFOUND, "column '%s' missing", col);
    int64_t B = rl_dataproto_rows(dp);
    int64_t shape[2] = {B, width};
    rl_tensor *t = rl_dataproto_new_tensor(dp, name, RL_I32, 2, shape);
    rl_tensor *l = t ? rl_dataproto_new_tensor(dp, lens_name, RL_I32, 1, shape) : NULL;
    if (!l)
        return rl_error_code();
    int32_t *ids = rl_tensor_data(t), *lens = rl_tensor_data(l);
    for (int64_t b = 0; b < B; b++) {
        int32_t *tok = NULL;
        int64_t n = 0;
        const char *text = rl_column_str(c, b);
        if (rl_tokenizer_encode(j->tok, text, strlen(text), &tok, &n))
            return rl_error_wrap(rl_error_code(), "row %lld '%s'", (long long)b, text);
        int64_t total = n + (append_eos && j->eos >= 0);
        if (total > width) {
            free(tok);
            return rl_error_set(RL_ERANGE, "row %lld: '%s' is %lld tokens, limit %lld (%s)",
                                (long long)b, text, (long long)total, (long long)width,
                                append_eos ? "rollout.response_length" : "data.max_prompt_length");
        }
        for (int64_t i = 0; i < width; i++)
            ids[b * width + i] = i < n ? tok[i] : (i == n && append_eos && j->eos >= 0) ? j->eos : j->pad;
        lens[b] = (int32_t)total;
        free(tok);
    }
    return RL_OK;
}

int rl_lm_job_encode_prompts(rl_lm_job *j, rl_dataproto *dp)
{
    return s_encode(j, dp, "prompt", "prompts", "prompt_lens", j->max_prompt, 0);
}

int rl_lm_job_encode_responses(rl_lm_job *j, rl_dataproto *dp, const char *texts)
{
    return s_encode(j, dp, texts, "responses", "response_lens", j->response_length, 1);
}

int rl_lm_job_decode(rl_lm_job *j, rl_dataproto *dp)
{
    const rl_tensor *t = rl_dataproto_tensor_typed(dp, "responses", RL_I32);
    const rl_tensor *l = t ? rl_dataproto_tensor_typed(dp, "response_lens", RL_I32) : NULL;
    if (!l)
        return rl_error_code();
    rl_column *c = rl_dataproto_new_column(dp, "response", RL_COL_STRING);
    if (!c)
        return rl_error_code();
    int64_t B = t->shape[0], R = t->shape[1];
    const int32_t *ids = rl_tensor_data(t), *lens = rl_tensor_data(l);
    for (int64_t b = 0; b < B; b++) {
        int64_t n = lens[b];
        if (n > 0 && ids[b * R + n - 1] == j->eos)
            n--; /* the stop token is not part of the text */
        char *text = NULL;
        size_t len = 0;
        if (rl_tokenizer_decode_opts(j->tok, ids + b * R, n, 0 /* keep <think> etc.: the reward reads them */, &text, &len))
            return rl_error_code();
        rl_column_set_str(c, b, text);
        free(text);
    }
    return RL_OK;
}

int rl_lm_job_rollout(rl_lm_job *j, rl_dataproto **batch, int greedy, double *gen_s,
                      double *reward_s)
{
    rl_dataproto *dp = *batch;
    double temp, top_p, fw;
    int64_t top_k;
    if (rl_config_get_double(j->job, "rollout.temperature", &temp) ||
        rl_config_get_double(j->job, "rollout.top_p", &top_p) ||
        rl_config_get_int(j->job, "rollout.top_k", &top_k) ||
        rl_config_get_double(j->job, "reward.format_weight", &fw))
        return rl_error_code();
    json_t *meta = rl_dataproto_meta(dp);
    json_object_set_new(meta, "temperature", json_real(temp));
    json_object_set_new(meta, "top_p", json_real(top_p));
    json_object_set_new(meta, "top_k", json_integer(top_k));
    json_object_set_new(meta, "greedy", json_integer(greedy));
    json_object_set_new(meta, "max_new_tokens", json_integer(j->response_length));
    json_object_set_new(meta, "format_weight", json_real(fw));
    const char *gen_in[3] = {"prompts", "prompt_lens", "row_seeds"};
    rl_dataproto *req = rl_dataproto_select(dp, gen_in, 3, NULL, 0), *gen = NULL;
    double t0 = rl_now_s();
    int rc = req ? rl_group_call_sync(j->rollout, "generate", RL_DISPATCH_DP_COMPUTE, req, &gen)
                 : rl_error_code();
    rl_dataproto_free(req);
    *gen_s = rl_now_s() - t0;
    if (rc)
        return rc;
    rl_dataproto *u = rl_dataproto_union(dp, gen);
    rl_dataproto_free(gen);
    if (!u)
        return rl_error_code();
    if ((rc = rl_lm_job_decode(j, u))) {
        rl_dataproto_free(u);
        return rc;
    }
    /* only these columns travel to the reward ranks (an empty tensor list) */
    const char *rcols[3] = {"response", "ground_truth", "data_source"};
    req = rl_dataproto_select(u, rcols, 0, rcols, 3);
    rl_dataproto *scored = NULL;
    t0 = rl_now_s();
    rc = req ? rl_group_call_sync(j->reward, "compute_reward", RL_DISPATCH_DP_COMPUTE, req, &scored)
             : rl_error_code();
    rl_dataproto_free(req);
    *reward_s = rl_now_s() - t0;
    if (rc) {
        rl_dataproto_free(u);
        return rc;
    }
    rl_dataproto *all = rl_dataproto_union(u, scored);
    rl_dataproto_free(u);
    rl_dataproto_free(scored);
    if (!all)
        return rl_error_code();
    rl_dataproto_free(*batch);
    *batch = all;
    return RL_OK;
}

int rl_lm_job_validate(rl_lm_job *j, double *accuracy, double *format, double *resp_len)
{
    int64_t n = rl_dataset_size(j->val);
    int64_t *rows = malloc(sizeof(int64_t) * (size_t)n);
    for (int64_t i = 0; i < n; i++)
        rows[i] = i;
    rl_dataproto *dp = rl_dataproto_new();
    int rc = rl_dataset_fill(j->val, rows, n, dp);
    free(rows);
    if (!rc)
        rc = rl_lm_job_encode_prompts(j, dp);
    if (!rc) {
        int64_t shape[1] = {n};
        rl_tensor *sd = rl_dataproto_new_tensor(dp, "row_seeds", RL_I64, 1, shape);
        rc = sd ? RL_OK : rl_error_code();
    }
    double g, r;
    if (!rc)
        rc = rl_lm_job_rollout(j, &dp, 1, &g, &r);
    if (!rc) {
        const float *acc = rl_tensor_data(rl_dataproto_tensor(dp, "accuracy"));
        const float *fmt = rl_tensor_data(rl_dataproto_tensor(dp, "format"));
        const int32_t *len = rl_tensor_data(rl_dataproto_tensor(dp, "response_lens"));
        double a = 0, f = 0, l = 0;
        for (int64_t i = 0; i < n; i++) {
            a += acc[i];
            f += fmt[i];
            l += len[i];
        }
        *accuracy = n ? a / n : 0;
        *format = n ? f / n : 0;
        *resp_len = n ? l / n : 0;
    }
    rl_dataproto_free(dp);
    return rc;
}
