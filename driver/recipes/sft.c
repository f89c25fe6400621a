/* sft.c — supervised warm start: the actor learns the worked solutions of
 * the task (masked NLL on the response tokens), FSDP over the actor ranks;
 * validation is greedy generation on the rollout ranks scored by the reward
 * ranks. The result is saved as <trainer.output_dir>/final/model.safetensors
 * (+ config.json): the `model.init_from` of the RL jobs. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lm_common.h"
#include "rlrt/rlrt.h"

static int s_sft_batch(rl_lm_job *j, int64_t batch, rl_dataproto **out)
{
    int64_t *rows = malloc(sizeof(int64_t) * (size_t)batch), n = 0;
    int rc = rl_data_iter_next_rows(j->it, batch, rows, &n);
    rl_dataproto *dp = rl_dataproto_new();
    if (!rc)
        rc = rl_dataset_fill(j->train, rows, n, dp);
    if (!rc) { /* the worked solution of each row: the "solution" field */
        rl_column *sol = rl_dataproto_new_column(dp, "solution", RL_COL_STRING);
        for (int64_t i = 0; i < n && !rc; i++) {
            const char *s = json_string_value(json_object_get(rl_dataset_extra(j->train, rows[i]),
                                                              "solution"));
            if (!s)
                rc = rl_error_set(RL_ENOTFOUND, "%s line %lld: no 'solution' field for SFT",
                                  "data.train_files", (long long)rl_dataset_line(j->train, rows[i]));
            else
                rl_column_set_str(sol, i, s);
        }
    }
    if (!rc)
        rc = rl_lm_job_encode_prompts(j, dp);
    if (!rc)
        rc = rl_lm_job_encode_responses(j, dp, "solution");
    free(rows);
    if (rc) {
        rl_dataproto_free(dp);
        return rc;
    }
    *out = dp;
    return RL_OK;
}

static int s_run(rl_driver *d, const rl_config *job)
{
    rl_lm_job j;
    int rc = rl_lm_job_open(&j, d, job);
    int64_t steps, batch, val_every;
    const char *out_dir;
    if (!rc && (rl_config_get_int(job, "trainer.total_steps", &steps) ||
                rl_config_get_int(job, "data.train_batch_size", &batch) ||
                rl_config_get_int(job, "trainer.val_every", &val_every) ||
                rl_config_get_string(job, "trainer.output_dir", &out_dir)))
        rc = rl_error_code();
    rl_metrics *sink = rc ? NULL : rl_metrics_open(out_dir, -1, 0);
    if (!rc && !sink)
        rc = rl_error_code();
    rl_metric_set *ms = rl_metric_set_new();
    int W = j.actor ? rl_group_size(j.actor) : 1;
    if (!rc && batch % W)
        rc = rl_error_set(RL_ECONFIG, "data.train_batch_size %lld must be a multiple of the %d "
                                      "actor ranks", (long long)batch, W);
    for (int64_t step = 1; !rc && step <= steps && !rl_driver_interrupted(d); step++) {
        double t0 = rl_now_s();
        rl_dataproto *dp = NULL;
        if ((rc = s_sft_batch(&j, batch, &dp)))
            break;
        int64_t tokens = 0;
        const int32_t *rl = rl_tensor_data(rl_dataproto_tensor(dp, "response_lens"));
        for (int64_t b = 0; b < rl_dataproto_rows(dp); b++)
            tokens += rl[b];
        const char *keep[4] = {"prompts", "prompt_lens", "responses", "response_lens"};
        rl_dataproto *req = rl_dataproto_select(dp, keep, 4, NULL, 0);
        json_object_set_new(rl_dataproto_meta(req), "global_tokens", json_integer(tokens));
        rl_future *f = rl_group_call(j.actor, "sft_step", RL_DISPATCH_DP_COMPUTE, req);
        rc = rl_future_wait(f, -1);
        double loss = 0, gnorm = 0, lr = 0;
        for (int r = 0; !rc && r < W; r++) {
            rl_dataproto *o = NULL;
            rl_future_take_rank(f, r, &o);
            json_t *m = rl_dataproto_meta(o);
            loss += json_real_value(json_object_get(m, "loss"));
            gnorm = json_real_value(json_object_get(m, "grad_norm"));
            lr = json_real_value(json_object_get(m, "lr"));
            rl_dataproto_free(o);
        }
        rl_future_free(f);
        rl_dataproto_free(req);
        rl_dataproto_free(dp);
        if (rc)
            break;
        rl_metric_set_clear(ms);
        rl_metric_set_put(ms, "sft/loss", loss);
        rl_metric_set_put(ms, "actor/grad_norm", gnorm);
        rl_metric_set_put(ms, "actor/lr", lr);
        rl_metric_set_put(ms, "timing_s/step", rl_now_s() - t0);
        if (step % val_every == 0 || step == steps) {
            double acc, fmt, len, tv = rl_now_s();
            if ((rc = rl_lm_job_sync_weights(&j)) || (rc = rl_lm_job_validate(&j, &acc, &fmt, &len)))
                break;
            rl_metric_set_put(ms, RL_M_VAL_ACCURACY, acc);
            rl_metric_set_put(ms, "val/format", fmt);
            rl_metric_set_put(ms, "val/response_length", len);
            rl_metric_set_put(ms, "timing_s/val", rl_now_s() - tv);
            rl_log_info("sft step %lld: loss %.4f  val accuracy %.3f  format %.3f", (long long)step,
                        loss, acc, fmt);
        } else if (step % 10 == 0) {
            rl_log_info("sft step %lld: loss %.4f", (long long)step, loss);
        }
        rl_metrics_log(sink, step, ms);
    }
    if (!rc && !rl_driver_interrupted(d)) {
        char path[4096];
        snprintf(path, sizeof path, "%s/final", out_dir);
        rl_dataproto *req = rl_dataproto_new();
        rl_dataproto_set_rows(req, 0);
        json_object_set_new(rl_dataproto_meta(req), "path", json_string(path));
        rc = rl_group_call_sync(j.actor, "save_model", RL_DISPATCH_ONE_TO_ALL, req, NULL);
        rl_dataproto_free(req);
        if (!rc)
            rl_log_info("saved the warm-start model to %s", path);
    }
    if (sink)
        rl_metrics_close(sink);
    rl_metric_set_free(ms);
    rl_lm_job_close(&j);
    return rc;
}

const rl_recipe rl_recipe_sft = {
    .name = "sft",
    .summary = "supervised warm start on the task's worked solutions",
    .defaults = (const char *const[]){RL_LM_DEFAULTS
    "actor:\n"
    "  optim: {lr: 0.001, weight_decay: 0.0, beta1: 0.9, beta2: 0.999, eps: 1.0e-8,\n"
    "          warmup_steps: 0, lr_schedule: constant}\n"
    "  grad_clip: 1.0\n"
    "  ppo_micro_batch_size: 0\n"
    "env: {}\n"
    "trainer:\n"
    "  total_steps: 300\n"
    "  val_every: 50\n", NULL},
    .prepare = rl_lm_prepare,
    .run = s_run,
};
