/* sft.c — supervised warm start: the actor learns the worked solutions of
 * the task (masked NLL on the response tokens), FSDP over the actor ranks;
 * validation is greedy generation on the rollout ranks scored by the reward
 * ranks. The result is saved as <trainer.output_dir>/final (model.safetensors,
 * config.json, the tokenizer's files: rl_lm_save_final): the
 * `model.init_from` of the RL jobs.
 *
 * A step is two phases (rl_recipe_run): batch (worked solutions → tokens;
 * with a tokenizer that spells tool markup, the tools' output leaves the
 * loss) and update_actor (one optimiser step); validation every
 * trainer.val_every steps. With trainer.stop_at_val_accuracy > 0 the run
 * ends at the first validation that reaches it (and saves `final` there):
 * warm starts of one accuracy from different seeds, for benches that
 * compare RL gains over them. SFT keeps no checkpoints: a lost worker
 * replays the run from step 1. Config: common/schema/{lm,sft}.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/batch/lm_shape.h"
#include "common/schema/sft.h"
#include "common/schema/trainer.h"
#include "common/tools/agent_loop.h"
#include "driver/recipes/lm/lm_common.h"
#include "rlrt/error.h"
#include "rlrt/log.h"

/* The JSONL field of the worked solutions, and their column. */
#define S_SOLUTION "solution"

typedef struct s_sft {
    rl_trainer *t;       /* the loop's (rl_recipe_run) */
    rl_lm_job j;
    int64_t step;
    rl_dataproto *batch; /* this step's rows */
    double stop_at;      /* trainer.stop_at_val_accuracy; 0 = run every step */
} s_sft;

/* Training rows with their worked solution as the response. */
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
    rl_column *sol = rc ? NULL : rl_dataproto_new_column(dp, S_SOLUTION, RL_COL_STRING);
    if (!rc && !sol)
        rc = rl_error_code();
    for (int64_t i = 0; i < n && !rc; i++) {
        const char *text = json_string_value(json_object_get(rl_dataset_extra(j->train, rows[i]),
                                                             S_SOLUTION));
        if (!text)
            rc = rl_error_set(RL_ENOTFOUND, "%s line %lld: no '%s' field for SFT",
                              RL_CFG_PATH(&rl_lm_data_section, rl_lm_data_config, train_files),
                              (long long)rl_dataset_line(j->train, rows[i]), S_SOLUTION);
        else
            rc = rl_column_set_str(sol, i, text);
    }
    if (!rc)
        rc = rl_lm_job_encode_prompts(j, dp);
    if (!rc)
        rc = rl_lm_job_encode_responses(j, dp, S_SOLUTION);
    /* a worked solution's <result>…</result> is the tool's text, not the
     * model's (as in the multi-turn rollout); without the markup: nothing */
    rl_agent_tokens at;
    if (!rc && rl_agent_tokens_find(j->tok, &at) == RL_OK)
        rc = rl_lm_mask_spans(dp, &rl_lm_batch_names, at.result_begin, at.result_end);
    free(rows);
    s->batch = dp;
    return rc;
}

static int s_phase_update(void *arg)
{
    s_sft *s = arg;
    return rl_lm_sft_step(&s->j, s->batch, s->t->ms);
}

static int s_phases(void *st, int64_t step, rl_phase *out)
{
    ((s_sft *)st)->step = step;
    out[0] = (rl_phase){"batch", s_phase_batch, 0};
    out[1] = (rl_phase){"update_actor", s_phase_update, 0};
    return 2;
}

/* Weights to the rollout ranks, then greedy decoding of the validation set;
 * reaching trainer.stop_at_val_accuracy makes this step the last. */
static int s_validate(void *st)
{
    s_sft *s = st;
    rl_metric_set *ms = s->t->ms;
    double acc, fmt, len, loss = 0, t0 = rl_now_s();
    int rc = rl_lm_job_sync_weights(&s->j);
    if (!rc)
        rc = rl_lm_job_validate(&s->j, s->step, &acc, &fmt, &len, ms);
    if (rc)
        return rc;
    rl_metric_set_put(ms, RL_M_VAL_ACCURACY, acc);
    rl_metric_set_put(ms, "val/format", fmt);
    rl_metric_set_put(ms, "val/response_length", len);
    rl_metric_set_put(ms, "timing_s/val", rl_now_s() - t0);
    rl_metric_set_get(ms, "sft/loss", &loss);
    rl_log_info("sft step %lld: loss %.4f  val accuracy %.3f  format %.3f", (long long)s->step, loss,
                acc, fmt);
    if (s->stop_at > 0 && acc >= s->stop_at) {
        s->t->total_steps = s->step; /* rl_recipe_run ends after this step */
        rl_log_info("sft step %lld: val accuracy %.3f reached %s %.3f: stopping here",
                    (long long)s->step, acc,
                    RL_CFG_PATH(&rl_sft_section, rl_sft_config, stop_at_val_accuracy), s->stop_at);
    }
    return RL_OK;
}

static int s_hooks(void *st, rl_recipe_hook *out)
{
    out[0] = (rl_recipe_hook){((s_sft *)st)->t->val_every, 0, s_validate};
    return 1;
}

static int s_open(void *st, rl_trainer *t)
{
    s_sft *s = st;
    const rl_sft_config *c = rl_config_section_get(t->job, &rl_sft_section);
    s->t = t;
    int rc = c ? rl_lm_job_open(&s->j, t->d, t->job) : rl_error_code();
    s->stop_at = c ? c->stop_at_val_accuracy : 0;
    int W = s->j.a.actor ? rl_group_size(s->j.a.actor) : 1;
    if (!rc && s->j.batch % W)
        rc = RL_CFG_ERROR(t->job, &rl_batch_section, rl_batch_config, train_batch_size,
                          RL_ECONFIG, "%lld must be a multiple of the %d actor ranks",
                          (long long)s->j.batch, W);
    return rc;
}

static void s_step_clear(void *st)
{
    s_sft *s = st;
    rl_dataproto_free(s->batch);
    s->batch = NULL;
}

static void s_close(void *st, int reopen)
{
    s_sft *s = st;
    (void)reopen;
    rl_lm_job_close(&s->j);
    memset(s, 0, sizeof *s);
}

static const rl_recipe_loop s_loop = {
    .state_size = sizeof(s_sft), .open = s_open, .phases = s_phases, .hooks = s_hooks,
    .step_clear = s_step_clear, .close = s_close,
};

/* The run, then the model as <output_dir>/final. */
static int s_run(rl_driver *d, const rl_config *job)
{
    int rc = rl_recipe_run(d, job, &s_loop);
    if (rc || rl_driver_interrupted(d))
        return rc;
    return rl_lm_save_final(d, job);
}

/* One optimiser step per training step. */
static int s_prepare(rl_config *job) { return rl_lm_recipe_prepare(job, 1, S_SOLUTION); }

const rl_recipe rl_recipe_sft = {
    .name = "sft",
    .summary = "supervised warm start on the task's worked solutions",
    .sections = (const rl_config_section *const[]){&rl_trainer_steps_section,
                                                   &rl_trainer_recovery_section, RL_LM_SECTIONS,
                                                   &rl_sft_section, NULL},
    .changes = rl_sft_changes,
    .roles = rl_lm_roles,
    .prepare = s_prepare,
    .run = s_run,
};
