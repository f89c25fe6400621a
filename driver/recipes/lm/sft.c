/* sft.c — supervised warm start: the actor learns the worked solutions of
 * the task (masked NLL on the response tokens), FSDP over the actor ranks;
 * validation is greedy generation on the rollout ranks scored by the reward
 * ranks. The result is saved as <trainer.output_dir>/final/model.safetensors
 * (+ config.json): the `model.init_from` of the RL jobs.
 *
 * A step is two phases: batch (worked solutions → tokens) and update (one
 * optimiser step on the actor); validation every trainer.val_every steps.
 * With trainer.stop_at_val_accuracy > 0 the run ends at the first validation
 * that reaches it (and saves `final` there): warm starts of one accuracy
 * from different seeds, for benches that compare RL gains over them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "driver/recipes/lm/lm_common.h"
#include "rlrt/error.h"
#include "rlrt/log.h"
#include "rlrt/dtype.h"
#include "common/nn/models/lm/lm_model.h"
#include "rlrt/tensor.h"
#include "rlrt/dataproto.h"
#include "rlrt/config.h"
#include "common/tools/agent_loop.h"
#include "common/data/data.h"
#include "common/metrics/metrics.h"
#include "common/schema/trainer.h"

typedef struct s_sft {
    rl_lm_job j;
    rl_trainer t;
    rl_dataproto *batch; /* this step's rows */
    double stop_at;      /* trainer.stop_at_val_accuracy; 0 = run every step */
    int64_t stopped_at;  /* the step whose validation reached stop_at, or 0 */
} s_sft;

/* With a tokenizer that spells tool markup (common/tools/agent_loop.h), the tool
 * output of a worked solution, <result>…</result>, is the tool's text, not
 * the model's: RL_LM_RESPONSE_MASK leaves it out of the loss, as the
 * multi-turn rollout does. Without the markup nothing is added. */
static int s_mask_results(rl_lm_job *j, rl_dataproto *dp)
{
    rl_agent_tokens at;
    if (rl_agent_tokens_find(j->tok, &at))
        return RL_OK; /* no tool markup in this vocabulary */
    const rl_tensor *t = rl_dataproto_tensor_shaped(dp, RL_LM_RESPONSES, RL_I32, 2, NULL);
    if (!t)
        return rl_error_code();
    int64_t B = t->shape[0], R = t->shape[1];
    rl_tensor *mt = rl_dataproto_new_tensor(dp, RL_LM_RESPONSE_MASK, RL_F32, 2, (int64_t[]){B, R});
    if (!mt)
        return rl_error_code();
    const int32_t *ids = rl_tensor_data(t);
    float *m = rl_tensor_data(mt);
    for (int64_t b = 0; b < B; b++) {
        int in = 0;
        for (int64_t k = 0; k < R; k++) {
            int32_t id = ids[b * R + k];
            if (id == at.result_begin)
                in = 1;
            m[b * R + k] = in ? 0.0f : 1.0f;
            if (id == at.result_end)
                in = 0;
        }
    }
    return RL_OK;
}

/* Training rows with their worked solution (the "solution" field) as the
 * response. */
static int s_phase_batch(void *arg)
{
    s_sft *s = arg;
    rl_lm_job *j = &s->j;
    int64_t *rows = malloc(sizeof(int64_t) * (size_t)j->batch), n = 0;
    rl_dataproto *dp = rl_dataproto_new();
    int rc = rows && dp ? rl_data_iter_next_rows(j->it, j->batch, rows, &n)
                        : rl_error_set(RL_ENOMEM, "out of memory");
    if (!rc)
        rc = rl_dataset_fill(j->train, rows, n, dp);
    rl_column *sol = rc ? NULL : rl_dataproto_new_column(dp, "solution", RL_COL_STRING);
    if (!rc && !sol)
        rc = rl_error_code();
    for (int64_t i = 0; i < n && !rc; i++) {
        const char *text = json_string_value(json_object_get(rl_dataset_extra(j->train, rows[i]),
                                                             "solution"));
        if (!text)
            rc = rl_error_set(RL_ENOTFOUND, "data.train_files line %lld: no 'solution' field for SFT",
                              (long long)rl_dataset_line(j->train, rows[i]));
        else
            rc = rl_column_set_str(sol, i, text);
    }
    if (!rc)
        rc = rl_lm_job_encode_prompts(j, dp);
    if (!rc)
        rc = rl_lm_job_encode_responses(j, dp, "solution");
    if (!rc)
        rc = s_mask_results(j, dp);
    free(rows);
    if (rc) {
        rl_dataproto_free(dp);
        return rc;
    }
    s->batch = dp;
    return RL_OK;
}

/* One optimiser step on the actor ranks: the loss is normalised by the
 * batch's response tokens over all ranks. */
static int s_phase_update(void *arg)
{
    s_sft *s = arg;
    rl_group *actor = s->j.actor;
    const rl_tensor *lens = rl_dataproto_tensor_shaped(s->batch, RL_LM_RESPONSE_LENS, RL_I32, 1, NULL);
    if (!lens)
        return rl_error_code();
    int64_t tokens = 0;
    const rl_tensor *mt = rl_dataproto_tensor(s->batch, RL_LM_RESPONSE_MASK);
    for (int64_t b = 0; b < rl_dataproto_rows(s->batch); b++) {
        int32_t n = ((const int32_t *)rl_tensor_data(lens))[b];
        if (!mt) {
            tokens += n;
            continue;
        }
        const float *m = (const float *)rl_tensor_data(mt) + b * mt->shape[1];
        for (int32_t k = 0; k < n && k < mt->shape[1]; k++)
            tokens += m[k] != 0.0f;
    }
    static const char *const keep[5] = {RL_LM_PROMPTS, RL_LM_PROMPT_LENS, RL_LM_RESPONSES,
                                        RL_LM_RESPONSE_LENS, RL_LM_RESPONSE_MASK};
    rl_dataproto *req = rl_dataproto_request(s->batch, keep, mt ? 5 : 4, NULL, 0,
                                             json_pack("{s:I}", RL_ACTOR_GLOBAL_TOKENS,
                                                       (json_int_t)(tokens > 0 ? tokens : 1)));
    rl_future *f = req ? rl_group_call(actor, RL_ACTOR_SFT_STEP, RL_DISPATCH_DP_COMPUTE, req) : NULL;
    int rc = f ? rl_future_wait(f, -1) : rl_error_code();
    double loss = 0, gnorm = 0, lr = 0;
    for (int r = 0; !rc && r < rl_group_size(actor); r++) {
        rl_dataproto *o = NULL;
        double l;
        rc = rl_future_take_rank(f, r, &o);
        if (!rc && !o)
            rc = rl_error_set(RL_EPROTO, "actor/%d returned no %s result", r, RL_ACTOR_SFT_STEP);
        if (!rc && !(rc = rl_dataproto_meta_get_double(o, RL_ACTOR_M_LOSS, -1e30, 1e30, &l)) &&
            !(rc = rl_dataproto_meta_get_double(o, RL_ACTOR_M_GRAD_NORM, 0, 1e30, &gnorm)))
            rc = rl_dataproto_meta_get_double(o, RL_ACTOR_M_LR, 0, 1e30, &lr);
        if (!rc)
            loss += l;
        else
            rc = rl_error_wrap(rc, "actor/%d", r);
        rl_dataproto_free(o);
    }
    rl_future_free(f);
    rl_dataproto_free(req);
    if (rc)
        return rc;
    rl_metric_set_put(s->t.ms, "sft/loss", loss);
    rl_metric_set_put(s->t.ms, "actor/grad_norm", gnorm);
    rl_metric_set_put(s->t.ms, "actor/lr", lr);
    return RL_OK;
}

static const rl_phase s_step_phases[] = {
    {"batch", s_phase_batch, 0},
    {"update_actor", s_phase_update, 0},
};

/* Weights to the rollout ranks, then greedy decoding of the validation set. */
static int s_validate(s_sft *s, int64_t step)
{
    double acc, fmt, len, t0 = rl_now_s();
    int rc = rl_lm_job_sync_weights(&s->j);
    if (!rc)
        rc = rl_lm_job_validate(&s->j, step, &acc, &fmt, &len, s->t.ms);
    if (rc)
        return rc;
    rl_metric_set_put(s->t.ms, RL_M_VAL_ACCURACY, acc);
    rl_metric_set_put(s->t.ms, "val/format", fmt);
    rl_metric_set_put(s->t.ms, "val/response_length", len);
    rl_metric_set_put(s->t.ms, "timing_s/val", rl_now_s() - t0);
    double loss = 0;
    rl_metric_set_get(s->t.ms, "sft/loss", &loss);
    rl_log_info("sft step %lld: loss %.4f  val accuracy %.3f  format %.3f", (long long)step, loss,
                acc, fmt);
    if (s->stop_at > 0 && acc >= s->stop_at) {
        s->stopped_at = step;
        rl_log_info("sft step %lld: val accuracy %.3f reached trainer.stop_at_val_accuracy %.3f: "
                    "stopping here", (long long)step, acc, s->stop_at);
    }
    return RL_OK;
}

static int s_save_final(s_sft *s)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/final", s->t.out_dir);
    int rc = rl_call_all(s->j.actor, RL_ACTOR_SAVE_MODEL, json_pack("{s:s}", RL_ACTOR_PATH, path));
    if (!rc)
        rl_log_info("saved the warm-start model to %s", path);
    return rc;
}

/* Opens the recipe's state for a fresh start (SFT keeps no checkpoints: a
 * recovery replays from step 1). */
static int s_open(s_sft *s, rl_driver *d, const rl_config *job)
{
    int rc = rl_trainer_open(&s->t, d, job);
    if (!rc)
        rc = rl_lm_job_open(&s->j, d, job);
    if (!rc)
        rc = rl_config_get_double_in(job, "trainer.stop_at_val_accuracy", 0, 1, 0, &s->stop_at);
    if (!rc && s->stop_at > 0 && s->t.val_every <= 0)
        rc = rl_config_error_at(job, "trainer.stop_at_val_accuracy", RL_ECONFIG,
                                "%g needs validation: trainer.val_every must be > 0", s->stop_at);
    if (!rc)
        rc = rl_trainer_open_metrics(&s->t, 0);
    int W = s->j.actor ? rl_group_size(s->j.actor) : 1;
    if (!rc && s->j.batch % W)
        rc = rl_config_error_at(job, "data.train_batch_size", RL_ECONFIG,
                                "%lld must be a multiple of the %d actor ranks", (long long)s->j.batch, W);
    return rc;
}

static void s_close(s_sft *s)
{
    rl_dataproto_free(s->batch);
    rl_trainer_close(&s->t);
    rl_lm_job_close(&s->j);
    memset(s, 0, sizeof *s);
}

/* One step: the phases, then validation or a progress line, then metrics. */
static int s_step(s_sft *s, int64_t step)
{
    rl_metric_set_clear(s->t.ms);
    double t0 = rl_now_s();
    int rc = rl_phases_run(s_step_phases, 2, s, s->t.ms);
    rl_dataproto_free(s->batch);
    s->batch = NULL;
    if (rc)
        return rc;
    rl_metric_set_put(s->t.ms, "timing_s/step", rl_now_s() - t0);
    rc = rl_trainer_put_cpu(&s->t);
    if (rc)
        return rc;
    if (rl_trainer_due(&s->t, step, s->t.val_every)) {
        rc = s_validate(s, step);
    } else if (step % 10 == 0) {
        double loss = 0;
        rl_metric_set_get(s->t.ms, "sft/loss", &loss);
        rl_log_info("sft step %lld: loss %.4f", (long long)step, loss);
    }
    if (!rc)
        rl_driver_note_step(s->t.d, step, rl_now_s() - t0);
    if (!rc)
        rc = rl_metrics_log(s->t.sink, step, s->t.ms);
    rl_trainer_cpu_mark(&s->t);
    return rc;
}

static int s_run(rl_driver *d, const rl_config *job)
{
    s_sft s;
    memset(&s, 0, sizeof s);
    rl_recovery rec;
    int rc = rl_recovery_open(&rec, job);
    while (!rc) { /* the start too is repeated when it loses a worker */
        if (!(rc = rl_recovery_mark(&rec, d)) && !(rc = s_open(&s, d, job)))
            break;
        if (!rl_recovery_check(&rec, d, 0))
            break;
        s_close(&s);
        rc = RL_OK;
    }
    for (int64_t step = 1;
         !rc && step <= s.t.total_steps && !s.stopped_at && !rl_driver_interrupted(d); step++) {
        if (!(rc = rl_recovery_mark(&rec, d)))
            rc = s_step(&s, step);
        while (rc && rl_recovery_check(&rec, d, step)) {
            s_close(&s); /* a worker was lost: replay from the start */
            if (!(rc = rl_recovery_mark(&rec, d)))
                rc = s_open(&s, d, job);
            step = 0;
        }
    }
    if (!rc && !rl_driver_interrupted(d))
        rc = s_save_final(&s);
    rl_recovery_close(&rec);
    s_close(&s);
    return rc;
}

/* One optimiser step per training step. */
static int s_prepare(rl_config *job) { return rl_lm_recipe_prepare(job, 1, "solution"); }

const rl_recipe rl_recipe_sft = {
    .name = "sft",
    .summary = "supervised warm start on the task's worked solutions",
    .sections = (const rl_config_section *const[]){&rl_trainer_recovery_section, RL_LM_ROLE_SECTIONS, NULL},
    .defaults = (const char *const[]){RL_LM_SECTIONS,
                                      "actor:\n"
                                      "  optim: {lr: 0.001}\n"
                                      "trainer:\n"
                                      "  total_steps: 300\n"
                                      "  val_every: 50\n"
                                      "  stop_at_val_accuracy: 0.0\n",
                                      NULL},
    .roles = rl_lm_roles,
    .prepare = s_prepare,
    .run = s_run,
};
