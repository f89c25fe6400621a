/* test_algo_lm_batch.c — the language-model batch transforms
 * (common/batch/lm_{batch,shape,adv,metrics}.h) on small hand-made batches,
 * for what the rlvr golden run does not reach (overlong shaping, online
 * filtering and the groups a step fills, guided rows out of the KL, TIS,
 * tool metrics), and the LM track's config sections (common/schema/{lm,
 * rlvr,sft}.h): their cross-key checks and the estimator choices, which must
 * be the estimator table's names. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "common/algo/offpolicy.h"
#include "common/batch/estimators.h"
#include "common/batch/lm_adv.h"
#include "common/batch/lm_batch.h"
#include "common/batch/lm_metrics.h"
#include "common/batch/lm_shape.h"
#include "common/metrics/metrics.h"
#include "common/schema/lm.h"
#include "common/schema/rlvr.h"
#include "common/schema/sft.h"
#include "common/schema/actor.h"
#include "common/schema/rollout.h"
#include "common/schema/trainer.h"
#include "rlrt/config.h"
#include "rlrt/dataproto.h"
#include "rlrt/error.h"
#include "rlrt/tensor.h"

static const char *s_outcome(int k)
{
    static const char *const names[2] = {"ok", "error"};
    return names[k];
}

/* tool counts: turns, calls, ok, error, bad calls, truncated, max turns */
static const rl_lm_tool_layout s_tools = {.n = 7, .turns = 0, .calls = 1, .outcome0 = 2,
                                           .n_outcomes = 2, .bad_calls = 4, .truncated = 5,
                                           .max_turns = 6, .outcome_name = s_outcome};

static const rl_lm_names N = {
    .responses = "resp", .response_lens = "lens", .loss_mask = "loss", .sampled_mask = "sampled",
    .entropy = "ent", .rollout_logp = "rlogp", .score = "score", .accuracy = "acc",
    .format = "fmt", .old_logp = "old", .ref_logp = "ref", .advantages = "adv", .group = "gid",
    .guided = "guided", .kl_penalty = "klp", .row_version = "ver", .tool_stats = "tools",
    .tools = &s_tools,
};

static float *s_f32(rl_dataproto *dp, const char *name, int64_t rows, int64_t cols,
                    const float *v)
{
    int64_t shape[2] = {rows, cols};
    rl_tensor *t = rl_dataproto_new_tensor(dp, name, RL_F32, cols ? 2 : 1, shape);
    assert_non_null(t);
    memcpy(rl_tensor_data(t), v, sizeof(float) * (size_t)(rows * (cols ? cols : 1)));
    return rl_tensor_data(t);
}

static void s_i32(rl_dataproto *dp, const char *name, int64_t rows, int64_t cols, const int32_t *v)
{
    int64_t shape[2] = {rows, cols};
    rl_tensor *t = rl_dataproto_new_tensor(dp, name, RL_I32, cols ? 2 : 1, shape);
    assert_non_null(t);
    memcpy(rl_tensor_data(t), v, sizeof(int32_t) * (size_t)(rows * (cols ? cols : 1)));
}

static void s_i64col(rl_dataproto *dp, const char *name, int64_t rows, const int64_t *v)
{
    rl_column *c = rl_dataproto_new_column(dp, name, RL_COL_INT64);
    assert_non_null(c);
    for (int64_t i = 0; i < rows; i++)
        assert_int_equal(rl_column_set_i64(c, i, v[i]), RL_OK);
}

static double s_metric(const rl_metric_set *ms, const char *name)
{
    double v = NAN;
    if (rl_metric_set_get(ms, name, &v) != RL_OK)
        fail_msg("metric %s missing", name);
    return v;
}

#define assert_near(a, b) assert_true(fabs((double)(a) - (double)(b)) < 1e-6)

/* ---- config ------------------------------------------------------------------------------------- */

/* algorithm.adv_estimator's choices are the estimator table's names, in
 * order: the choice's index is the estimator. */
static void test_estimator_choices(void **state)
{
    (void)state;
    assert_string_equal(RL_ADV_ESTIMATOR_CHOICES, rl_estimator_names());
    const char *path = RL_CFG_PATH(&rl_estimator_section, rl_estimator_config, adv_estimator);
    const rl_config_key *key = NULL;
    for (size_t i = 0; i < rl_estimator_section.n_keys; i++)
        if (strcmp(rl_estimator_section.keys[i].path, path) == 0)
            key = &rl_estimator_section.keys[i];
    assert_non_null(key);
    assert_int_equal(key->type, RL_CFG_ENUM);
    assert_string_equal(key->choices, rl_estimator_names());
    for (int i = 0; i < RL_EST_COUNT; i++)
        assert_int_equal(rl_estimators[i].id, i);
    /* a track looks an estimator up by name: OPO is the LM's only */
    const rl_estimator *opo = rl_estimator_find("opo", RL_TRACK_LM);
    assert_non_null(opo);
    assert_true(opo->id == RL_EST_OPO && opo->run && opo->min_samples == 2);
    assert_null(rl_estimator_find("opo", RL_TRACK_DIFFUSION));
    assert_non_null(strstr(rl_error_message(), "estimator 'opo' is not available to the diffusion track (it has: grpo)"));
    assert_null(rl_estimator_find("opoo", RL_TRACK_LM));
    assert_non_null(strstr(rl_error_message(), "unknown estimator 'opoo' (known: grpo, rloo"));
    /* through the table's run: rows of lengths 1 and 3 scoring 1 and 0 share
     * the baseline (1·1 + 3·0) / 4 = 0.25 */
    const float scores[2] = {1, 0}, mask[2 * 3] = {1, 0, 0, 1, 1, 1};
    const int64_t group[2] = {7, 7};
    rl_adv_input in = {.scores = scores, .mask = mask, .group = group, .B = 2, .R = 3, .n = 2};
    float adv[6];
    rl_metric_set *ms = rl_metric_set_new();
    assert_int_equal(opo->run(&in, adv, ms), RL_OK);
    rl_metric_set_free(ms);
    static const float want[6] = {0.75f, 0, 0, -0.25f, -0.25f, -0.25f};
    for (int i = 0; i < 6; i++)
        assert_near(adv[i], want[i]);
}

/* The LM sections with the roles' sections their checks read, then overrides. */
static rl_config *s_job(int n, const char *const *overrides)
{
    static const rl_config_section *const secs[] = {
        &rl_trainer_section,  &rl_trainer_steps_section,  &rl_lm_data_section,
        &rl_rlvr_section,     &rl_rlvr_guidance_section,  &rl_rlvr_replay_section,
        &rl_sft_section,      &rl_actor_section,          &rl_rollout_section,
        &rl_rollout_tokens_section, &rl_rollout_multi_turn_section, &rl_estimator_section,
        &rl_group_norm_section, &rl_discount_section, &rl_batch_section};
    static const rl_config_default roles[] = {
        {"rollout.n", "4"}, {"rollout.response_length", "16"}, {"actor.ppo_mini_batch_size", "4"}};
    rl_config *known = rl_config_schema_defaults(secs, sizeof secs / sizeof secs[0], roles, 3);
    rl_config *job = known ? rl_config_load_job_tree(known, NULL, n, overrides) : NULL;
    rl_config_free(known);
    if (!job)
        fail_msg("job: %s", rl_error_message());
    return job;
}

/* One override; the section read must fail with `want` in the message
 * (want NULL: it must succeed). */
static void s_check(const char *kv, const rl_config_section *sec, const char *want)
{
    rl_config *job = s_job(1, &kv);
    const void *got = rl_config_section_get(job, sec);
    if (want && (got || !strstr(rl_error_message(), want)))
        fail_msg("%s: expected '%s', got %s", kv, want, got ? "success" : rl_error_message());
    if (!want && !got)
        fail_msg("%s: %s", kv, rl_error_message());
    rl_config_free(job);
}

static void test_section_checks(void **state)
{
    (void)state;
    s_check("data.levels=[]", &rl_lm_data_section, "data.levels: expected 1..8 levels, got 0");
    s_check("data.levels=[1, 12]", &rl_lm_data_section,
            "data.levels[1]: must be in [1, 9], got 12");
    rl_config *job = s_job(1, (const char *const[]){"data.levels=[3, 1, 9]"});
    const rl_lm_data_config *d = rl_config_section_get(job, &rl_lm_data_section);
    assert_non_null(d);
    assert_true(d->n_levels == 3 && d->level[0] == 3 && d->level[1] == 1 && d->level[2] == 9);
    rl_config_free(job);
    s_check("algorithm.filter_low=0.99", &rl_rlvr_section,
            "algorithm.filter_low: algorithm.filter_low (0.99) must be below algorithm.filter_high (0.99)");
    s_check("algorithm.overlong_buffer.enable=true", &rl_rlvr_section, NULL);
    s_check("algorithm.adv_estimator=ppo", &rl_estimator_section, "unknown value 'ppo'");
    s_check("algorithm.hard_replay.below=0", &rl_rlvr_replay_section,
            "expected a mean accuracy in (0, 1], got 0");
    s_check("algorithm.hard_replay.per_step=17", &rl_rlvr_replay_section,
            "algorithm.hard_replay.per_step: algorithm.hard_replay.per_step: expected 1 to data.train_batch_size (16) prompts, got 17");
    s_check("trainer.stop_at_val_accuracy=0.5", &rl_sft_section,
            "trainer.stop_at_val_accuracy: trainer.stop_at_val_accuracy 0.5 needs validation: trainer.val_every must be > 0");
    s_check("algorithm.guidance.enable=true", &rl_rlvr_guidance_section, NULL);
    const char *two[2] = {"algorithm.guidance.enable=true", "algorithm.guidance.samples=4"};
    job = s_job(2, two);
    assert_null(rl_config_section_get(job, &rl_rlvr_guidance_section));
    assert_non_null(strstr(rl_error_message(), "algorithm.guidance.samples: algorithm.guidance.samples (4) must be below rollout.n (4)"));
    rl_config_free(job);
    /* the batch sizes against each other */
    job = s_job(1, (const char *const[]){"data.train_batch_size=6"});
    assert_int_equal(rl_rlvr_check_sizes(job, "grpo", 2, 0), RL_ECONFIG);
    assert_non_null(strstr(rl_error_message(), "data.train_batch_size: actor.ppo_mini_batch_size (4) must divide data.train_batch_size (6)"));
    rl_config_free(job);
    job = s_job(0, NULL);
    assert_int_equal(rl_rlvr_check_sizes(job, "grpo", 2, 0), RL_OK);
    assert_int_equal(rl_rlvr_check_sizes(job, "x", 5, 0), RL_ECONFIG);
    assert_non_null(strstr(rl_error_message(), "rollout.n: rollout.n (4): x needs at least 5 samples"));
    assert_int_equal(rl_rlvr_check_sizes(job, "grpo", 2, 3), RL_ECONFIG);
    assert_non_null(strstr(rl_error_message(), "multiple of the 3 actor ranks"));
    rl_config_free(job);
}

/* ---- masks ----------------------------------------------------------------------------------------- */

/* The loss mask and the mask of the tokens the policy sampled, where the
 * KL to the reference is taken: tool output is out of both; rows that
 * overlong filtering cut are out of the loss only. */
static void test_masks(void **state)
{
    (void)state;
    rl_dataproto *dp = rl_dataproto_new();
    s_i32(dp, "resp", 2, 4, (const int32_t[]){0, 0, 0, 0, 0, 0, 0, 0});
    s_i32(dp, "lens", 2, 0, (const int32_t[]){4, 3});
    int64_t B = 0, R = 0;
    float *m = rl_lm_mask(dp, &N, RL_LM_MASK_SAMPLED, &B, &R); /* no masks: the lengths */
    static const float lengths[8] = {1, 1, 1, 1, 1, 1, 1, 0};
    assert_true(B == 2 && R == 4 && memcmp(m, lengths, sizeof lengths) == 0);
    free(m);
    /* the rollout's mask: 0 at tool output (row 0, positions 1-2) */
    static const float tool[8] = {1, 0, 0, 1, 1, 1, 1, 1};
    float *loss = s_f32(dp, "loss", 2, 4, tool);
    static const float sampled[8] = {1, 0, 0, 1, 1, 1, 1, 0};
    m = rl_lm_mask(dp, &N, RL_LM_MASK_SAMPLED, &B, &R);
    assert_memory_equal(m, sampled, sizeof sampled);
    free(m);
    /* overlong filtering cut row 1: out of the loss, still sampled */
    s_f32(dp, "sampled", 2, 4, tool);
    memset(loss + 4, 0, 4 * sizeof(float));
    m = rl_lm_mask(dp, &N, RL_LM_MASK_SAMPLED, &B, &R);
    assert_memory_equal(m, sampled, sizeof sampled);
    free(m);
    static const float lossm[8] = {1, 0, 0, 1, 0, 0, 0, 0};
    m = rl_lm_mask(dp, &N, RL_LM_MASK_LOSS, &B, &R);
    assert_memory_equal(m, lossm, sizeof lossm);
    free(m);
    int32_t tok[2];
    assert_int_equal(rl_lm_loss_tokens(dp, &N, tok), RL_OK);
    assert_true(tok[0] == 2 && tok[1] == 0);
    /* a (B, R) value's mean over each row's loss positions (none: 0) */
    s_f32(dp, "adv", 2, 4, (const float[]){1, 7, 7, 3, 5, 5, 5, 5});
    double *mean = rl_lm_row_means(dp, &N, "adv");
    assert_true(mean && mean[0] == 2.0 && mean[1] == 0.0);
    free(mean);
    /* a length past the width is named */
    ((int32_t *)rl_tensor_data((rl_tensor *)rl_dataproto_tensor(dp, "lens")))[1] = 5;
    assert_null(rl_lm_mask(dp, &N, RL_LM_MASK_LENGTHS, &B, &R));
    assert_non_null(strstr(rl_error_message(), "lens[1] = 5 outside [0, 4]"));
    rl_dataproto_free(dp);
}

/* A worked solution's tool output leaves the loss. */
static void test_mask_spans(void **state)
{
    (void)state;
    rl_dataproto *dp = rl_dataproto_new();
    s_i32(dp, "resp", 1, 7, (const int32_t[]){4, 8, 5, 9, 4, 8, 9});
    assert_int_equal(rl_lm_mask_spans(dp, &N, 8, 9), RL_OK);
    static const float want[7] = {1, 0, 0, 0, 1, 0, 0};
    assert_memory_equal(rl_tensor_data((rl_tensor *)rl_dataproto_tensor(dp, "loss")), want,
                        sizeof want);
    rl_dataproto_free(dp);
}

/* ---- overlong shaping --------------------------------------------------------------------------------- */

/* Rows: stopped at 3 tokens; cut at the budget (no stop token); the stop
 * token as the budget's last. The buffer of 2 punishes lengths 3 and 4. */
static rl_dataproto *s_overlong_batch(void)
{
    rl_dataproto *dp = rl_dataproto_new();
    s_i32(dp, "resp", 3, 4, (const int32_t[]){5, 6, 2, 0, 5, 6, 7, 8, 5, 6, 7, 2});
    s_i32(dp, "lens", 3, 0, (const int32_t[]){3, 4, 4});
    s_f32(dp, "score", 3, 0, (const float[]){1, 1, 1});
    return dp;
}

static void test_overlong(void **state)
{
    (void)state;
    rl_metric_set *ms = rl_metric_set_new();
    rl_dataproto *dp = s_overlong_batch();
    rl_lm_overlong off = {0, 0, 2, 1.0, 2};
    assert_int_equal(rl_lm_overlong_shape(dp, &N, &off, ms), RL_OK);
    assert_int_equal(rl_metric_set_count(ms), 0);
    rl_lm_overlong o = {1, 1, 2, 1.0, 2};
    assert_int_equal(rl_lm_overlong_shape(dp, &N, &o, ms), RL_OK);
    const float *score = rl_lm_rows_f32(dp, "score");
    assert_true(score[0] == 0.5f && score[1] == 0.0f && score[2] == 0.0f);
    assert_near(s_metric(ms, "batch/overlong_penalty_mean"), -2.5 / 3);
    assert_near(s_metric(ms, "batch/truncated_frac"), 1.0 / 3);
    /* the cut row leaves the loss, the sampled positions stay */
    static const float loss[12] = {1, 1, 1, 0, 0, 0, 0, 0, 1, 1, 1, 1};
    static const float sampled[12] = {1, 1, 1, 0, 1, 1, 1, 1, 1, 1, 1, 1};
    assert_memory_equal(rl_tensor_data((rl_tensor *)rl_dataproto_tensor(dp, "loss")), loss,
                        sizeof loss);
    assert_memory_equal(rl_tensor_data((rl_tensor *)rl_dataproto_tensor(dp, "sampled")), sampled,
                        sizeof sampled);
    rl_dataproto_free(dp);
    rl_metric_set_free(ms);
}

/* ---- online filtering and the step's groups ----------------------------------------------------------- */

/* Three groups of two: all wrong, one right, all right; column "row" says
 * where a row came from. */
static rl_dataproto *s_groups(void)
{
    rl_dataproto *dp = rl_dataproto_new();
    s_f32(dp, "acc", 6, 0, (const float[]){0, 0, 1, 0, 1, 1});
    s_i64col(dp, "gid", 6, (const int64_t[]){7, 7, 8, 8, 9, 9});
    s_i64col(dp, "row", 6, (const int64_t[]){0, 1, 2, 3, 4, 5});
    return dp;
}

static void s_rows_are(const rl_dataproto *dp, int64_t n, const int64_t *want)
{
    assert_int_equal(rl_dataproto_rows(dp), n);
    const rl_column *c = rl_dataproto_column(dp, "row");
    for (int64_t i = 0; i < n; i++)
        assert_int_equal(rl_column_i64(c, i), want[i]);
}

static void test_filter_groups(void **state)
{
    (void)state;
    rl_lm_filter f = {"acc", "the key", 0, 0.01, 0.99, 2};
    for (int mode = 0; mode < 2; mode++) { /* range, then std: group 8 either way */
        f.std_mode = mode;
        rl_dataproto *dp = s_groups(), *rejected = NULL;
        int64_t kept = -1;
        assert_int_equal(rl_lm_filter_groups(&dp, &N, &f, &kept, &rejected), RL_OK);
        assert_int_equal(kept, 1);
        s_rows_are(dp, 2, (const int64_t[]){2, 3});
        s_rows_are(rejected, 4, (const int64_t[]){0, 1, 4, 5});
        rl_dataproto_free(dp);
        rl_dataproto_free(rejected);
    }
    f.key = "format";
    rl_dataproto *dp = s_groups();
    int64_t kept;
    assert_int_not_equal(rl_lm_filter_groups(&dp, &N, &f, &kept, NULL), RL_OK);
    assert_non_null(strstr(rl_error_message(), "the key: "));
    rl_dataproto_free(dp);
}

static void test_group_batch(void **state)
{
    (void)state;
    rl_lm_filter f = {"acc", "acc", 0, 0.01, 0.99, 2};
    rl_lm_group_batch gb = {.want = 2, .n = 2};
    int64_t filled = -1, kept;
    /* round 1 keeps one group and sets two aside */
    rl_dataproto *part = s_groups(), *rejected = NULL;
    assert_int_equal(rl_lm_filter_groups(&part, &N, &f, &kept, &rejected), RL_OK);
    assert_int_equal(rl_lm_group_batch_add(&gb, part, kept, rejected), RL_OK);
    assert_int_equal(gb.groups, 1);
    /* out of tries: the first rejected group completes the batch */
    assert_int_equal(rl_lm_group_batch_fill(&gb, &filled), RL_OK);
    assert_int_equal(filled, 1);
    assert_int_equal(gb.groups, 2);
    s_rows_are(gb.batch, 4, (const int64_t[]){2, 3, 0, 1});
    rl_dataproto_free(gb.batch);
    rl_lm_group_batch_drop_spare(&gb);
    /* a round with more groups than the batch lacks: whole groups up to it */
    gb = (rl_lm_group_batch){.want = 2, .n = 2};
    assert_int_equal(rl_lm_group_batch_add(&gb, s_groups(), 3, NULL), RL_OK);
    assert_int_equal(gb.groups, 2);
    s_rows_are(gb.batch, 4, (const int64_t[]){0, 1, 2, 3});
    /* nothing aside: nothing to fill with */
    gb.want = 3;
    assert_int_equal(rl_lm_group_batch_fill(&gb, &filled), RL_OK);
    assert_int_equal(filled, 0);
    rl_dataproto_free(gb.batch);
}

/* ---- KL, advantages, TIS ---------------------------------------------------------------------------------- */

/* Two groups of two rows, R = 3; row 3 was put in by guidance. */
static rl_dataproto *s_adv_batch(void)
{
    rl_dataproto *dp = rl_dataproto_new();
    s_i32(dp, "resp", 4, 3, (const int32_t[]){1, 1, 1, 1, 1, 0, 1, 1, 1, 1, 1, 1});
    s_i32(dp, "lens", 4, 0, (const int32_t[]){3, 2, 3, 3});
    s_f32(dp, "score", 4, 0, (const float[]){1, 0, 0, 1});
    s_i64col(dp, "gid", 4, (const int64_t[]){5, 5, 6, 6});
    s_i64col(dp, "guided", 4, (const int64_t[]){0, 0, 0, 1});
    s_f32(dp, "old", 4, 3, (const float[]){-1, -1, -1, -2, -2, 0, -1, -1, -1, -3, -3, -3});
    s_f32(dp, "ref", 4, 3, (const float[]){-1.5f, -1, -1, -2, -2.5f, 0, -1, -1, -2, -1, -1, -1});
    s_f32(dp, "rlogp", 4, 3, (const float[]){-1, -2, -1, -2, -1, 0, -3, -1, -1, -3, -3, -3});
    /* tool output at row 2, position 1: out of the loss and of the KL */
    s_f32(dp, "loss", 4, 3, (const float[]){1, 1, 1, 1, 1, 1, 1, 0, 1, 1, 1, 1});
    return dp;
}

static void test_kl_tokens(void **state)
{
    (void)state;
    rl_metric_set *ms = rl_metric_set_new();
    rl_dataproto *dp = s_adv_batch();
    rl_lm_kl kl;
    assert_int_equal(rl_lm_kl_tokens(dp, &N, RL_KL_K1, &kl, ms), RL_OK);
    /* counted: rows 0-2 at their sampled positions (8); row 3 is guided */
    assert_true(kl.B == 4 && kl.R == 3 && kl.n == 7);
    assert_true(kl.mask[9] == 0 && kl.mask[10] == 0 && kl.sampled[9] == 1 && kl.mask[7] == 0);
    assert_near(kl.sum, 0.5 + 0.5 + 1.0); /* k1: old − ref */
    assert_near(s_metric(ms, RL_M_KL_PENALTY), 2.0 / 7);
    rl_lm_kl_free(&kl);
    rl_dataproto_free(dp);
    rl_metric_set_free(ms);
}

static float *s_advantages(double tis_cap, int with_kl, rl_metric_set *ms, double *klp_row0)
{
    rl_dataproto *dp = s_adv_batch();
    rl_lm_kl kl = {0};
    if (with_kl)
        assert_int_equal(rl_lm_kl_tokens(dp, &N, RL_KL_K1, &kl, ms), RL_OK);
    rl_lm_adv_cfg cfg = {&rl_estimators[RL_EST_GRPO], 2, 1.0, 1, 0, with_kl, tis_cap, "tis"};
    if (rl_lm_advantages(dp, &N, &cfg, with_kl ? &kl : NULL, 0.1, ms))
        fail_msg("advantages: %s", rl_error_message());
    const rl_column *c = rl_dataproto_column(dp, "klp");
    assert_true(with_kl == (c != NULL));
    if (c)
        *klp_row0 = rl_column_f64(c, 0);
    float *adv = malloc(sizeof(float) * 12);
    memcpy(adv, rl_tensor_data((rl_tensor *)rl_dataproto_tensor(dp, "adv")), sizeof(float) * 12);
    rl_lm_kl_free(&kl);
    rl_dataproto_free(dp);
    return adv;
}

static void test_advantages(void **state)
{
    (void)state;
    rl_metric_set *ms = rl_metric_set_new();
    double klp = 0;
    float *a = s_advantages(0, 0, ms, &klp);
    /* out of the loss: 0; past the length: 0; a GRPO group of {1, 0}: ±a */
    assert_true(a[7] == 0 && a[5] == 0);
    assert_true(a[0] > 0 && a[3] < 0 && a[0] == -a[3] && a[0] == a[1]);
    double mean = 0;
    int n = 0;
    static const int in_loss[12] = {1, 1, 1, 1, 1, 0, 1, 0, 1, 1, 1, 1};
    for (int i = 0; i < 12; i++)
        if (in_loss[i]) {
            mean += a[i];
            n++;
        }
    assert_near(s_metric(ms, "critic/advantages/mean"), mean / n);
    /* TIS: each token's advantage times min(exp(old − rollout), cap) */
    rl_metric_set_clear(ms);
    float *t = s_advantages(1.5, 0, ms, &klp), w[12];
    rl_dataproto *dp = s_adv_batch();
    static const float lmask[12] = {1, 1, 1, 1, 1, 0, 1, 0, 1, 1, 1, 1};
    assert_int_equal(rl_tis_weights(rl_lm_tokens_f32(dp, "old", 3), rl_lm_tokens_f32(dp, "rlogp", 3),
                                    lmask, 4, 3, 1.5, w, NULL),
                     RL_OK);
    for (int i = 0; i < 12; i++)
        assert_true(t[i] == a[i] * w[i]);
    assert_true(s_metric(ms, "tis/capped_frac") > 0);
    rl_dataproto_free(dp);
    /* the KL in the reward: the row's term is coef × its KL over the sampled
     * positions (row 0: 0.1 × 0.5) */
    free(s_advantages(0, 1, ms, &klp));
    assert_near(klp, 0.05);
    free(a);
    free(t);
    rl_metric_set_free(ms);
}

/* ---- metrics -------------------------------------------------------------------------------------------------- */

static void test_batch_metrics(void **state)
{
    (void)state;
    rl_metric_set *ms = rl_metric_set_new();
    rl_dataproto *dp = rl_dataproto_new();
    s_i32(dp, "resp", 4, 2, (const int32_t[]){1, 1, 1, 1, 1, 1, 1, 1});
    s_i32(dp, "lens", 4, 0, (const int32_t[]){2, 1, 2, 2});
    s_f32(dp, "score", 4, 0, (const float[]){1, 1, -1, 0.5f});
    s_f32(dp, "acc", 4, 0, (const float[]){1, 1, 0, 0});
    s_f32(dp, "fmt", 4, 0, (const float[]){1, 0, 1, 1});
    s_f32(dp, "ent", 4, 2, (const float[]){1, 2, 3, 9, 1, 1, 1, 1});
    s_i64col(dp, "gid", 4, (const int64_t[]){3, 3, 4, 4});
    assert_int_equal(rl_lm_batch_metrics(dp, &N, ms), RL_OK);
    assert_near(s_metric(ms, "batch/solve_all"), 0.5);
    assert_near(s_metric(ms, "batch/solve_none"), 0.5);
    assert_near(s_metric(ms, RL_M_SCORE_MEAN), 1.5 / 4);
    assert_near(s_metric(ms, "critic/score/max"), 1);
    assert_near(s_metric(ms, "critic/score/min"), -1);
    assert_near(s_metric(ms, RL_M_ACCURACY), 0.5);
    assert_near(s_metric(ms, "critic/format/mean"), 0.75);
    assert_near(s_metric(ms, RL_M_RESPONSE_LEN), 7.0 / 4);
    assert_near(s_metric(ms, RL_M_ENTROPY), 10.0 / 7); /* row 1's second position: no token */
    assert_int_not_equal(rl_metric_set_get(ms, "tools/calls_mean", &(double){0}), RL_OK);
    /* multi-turn counts: turns, calls, ok, error, bad calls, truncated, max turns */
    int32_t tools[4 * 7] = {2, 1, 1, 0, 0, 0, 0, 3, 2, 1, 1, 0, 1, 0,
                            1, 0, 0, 0, 0, 0, 0, 1, 1, 0, 0, 1, 0, 1};
    s_i32(dp, "tools", 4, 7, tools);
    rl_metric_set_clear(ms);
    assert_int_equal(rl_lm_tool_metrics(dp, &N, ms), RL_OK);
    assert_near(s_metric(ms, "tools/turns_mean"), 7.0 / 4);
    assert_near(s_metric(ms, "tools/calls_mean"), 1.0);
    assert_near(s_metric(ms, "tools/used_frac"), 0.75);
    assert_near(s_metric(ms, "tools/ok_frac"), 0.5);
    assert_near(s_metric(ms, "tools/error_frac"), 0.25);
    assert_near(s_metric(ms, "tools/bad_call_frac"), 0.25);
    assert_near(s_metric(ms, "tools/truncated_frac"), 0.25);
    assert_near(s_metric(ms, "tools/max_turns_frac"), 0.25);
    rl_dataproto_free(dp);
    rl_metric_set_free(ms);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_estimator_choices), cmocka_unit_test(test_section_checks),
        cmocka_unit_test(test_masks),             cmocka_unit_test(test_mask_spans),
        cmocka_unit_test(test_overlong),          cmocka_unit_test(test_filter_groups),
        cmocka_unit_test(test_group_batch),       cmocka_unit_test(test_kl_tokens),
        cmocka_unit_test(test_advantages),        cmocka_unit_test(test_batch_metrics),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
