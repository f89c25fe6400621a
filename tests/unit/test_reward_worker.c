/* test_reward_worker.c — compute_reward through the real daemons: an
 * rl_driver with 2 rl-worker reward ranks, a 7-row batch dispatched with
 * dp_compute (padded to 8, 4 rows per rank, the pad stripped), every score
 * checked; format_weight from the job config only (per-call meta carries no
 * settings); extra_reward; errors naming the missing column / unknown
 * data_source; a NaN extra_reward refused; a bad reward.* value stops the
 * start with a located error. */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "rlrt/error.h"
#include "rlrt/dtype.h"
#include "rlrt/tensor.h"
#include "rlrt/dataproto.h"
#include "rlrt/config.h"
#include "common/schema/job.h"
#include "workers/reward/reward.h"
#include "rlrt/runtime/cluster.h"
#include "rlrt/runtime/driver.h"

static char s_worker[512];

#define assert_msg_contains(msg, s) \
    do { \
        if (!strstr((msg), (s))) \
            fail_msg("message '%s' lacks '%s'", (msg), (s)); \
    } while (0)

typedef struct {
    rl_config *cfg, *job;
    rl_cluster *cl;
    rl_driver *d;
} s_job;

static s_job *s_current;

/* Starts 2 reward ranks with the reward section's defaults and `override`.
 * Returns NULL (message set) when the driver cannot start. */
static s_job *s_start_with(const char *override)
{
    static s_job job;
    s_job *j = &job;
    memset(j, 0, sizeof *j);
    const char *yaml = "driver: {bind: 127.0.0.1, port: 5555}\n"
                       "heartbeat: {interval_s: 0.2, liveness: 5}\n"
                       "restart: {max_restarts: 0, backoff_s: 0.1, backoff_max_s: 0.2}\n"
                       "nodes:\n"
                       "  - {name: local, address: 127.0.0.1, launch: local}\n"
                       "roles: {reward: {count: 2, node: local}}\n";
    j->cfg = rl_config_parse_string(yaml, strlen(yaml), "test-cluster.yaml");
    assert_non_null(j->cfg);
    j->cl = rl_cluster_from_config(j->cfg);
    if (!j->cl)
        fail_msg("cluster: %s", rl_error_message());
    /* The job's reward section reaches the workers' init. */
    const char *ov[1] = {override};
    j->job = rl_schema_job((const rl_config_section *const[]){&rl_reward_section, NULL}, NULL, NULL, 1, ov);
    if (!j->job)
        fail_msg("job: %s", rl_error_message());
    rl_driver_options opt = {.cluster = j->cl, .job = j->job, .worker_binary = s_worker,
                             .bind_override = "tcp://127.0.0.1:*", .worker_log_level = "warn",
                             .ready_timeout_ms = 20000};
    j->d = rl_driver_new(&opt);
    assert_non_null(j->d);
    s_current = j;
    return rl_driver_start(j->d) ? NULL : j;
}

static s_job *s_start(void)
{
    s_job *j = s_start_with("reward.format_weight=0.2");
    if (!j)
        fail_msg("start: %s", rl_error_message());
    return j;
}

static void s_stop(s_job *j)
{
    s_current = NULL;
    rl_driver_shutdown(j->d, 5000);
    rl_driver_free(j->d);
    rl_cluster_free(j->cl);
    rl_config_free(j->cfg);
    rl_config_free(j->job);
}

static int s_teardown(void **state)
{
    (void)state;
    if (s_current)
        s_stop(s_current);
    return 0;
}

/* 7 rows; accuracy / format derived by hand from the rules of common/reward/reward.h. */
static const struct {
    const char *source, *response, *gt;
    double acc, fmt;
} s_rows[7] = {
    {"arith", "<think>2+3=5</think> \\boxed{5}", "5", 1, 1},
    {"arith", "\\boxed{6}", "5", 0, 0},
    {"gsm8k", "<think>1000+234</think> so \\boxed{1,234}", "1234", 1, 1},
    {"gsm8k", "so she earns 18 dollars.\n#### 18", "18", 1, 0},
    {"math", "<think>half</think> \\boxed{\\dfrac{1}{2}}", "0.5", 1, 1},
    {"math", "<think>hmm</think> I think it is 3", "3", 0, 0},
    {"math500", "<think>x</think>\\boxed{-2} no: \\boxed{-3}", "-3", 1, 1},
};

static rl_dataproto *s_batch(int with_gt)
{
    rl_dataproto *dp = rl_dataproto_new();
    assert_int_equal(rl_dataproto_set_rows(dp, 7), 0);
    rl_column *r = rl_dataproto_new_column(dp, "response", RL_COL_STRING);
    rl_column *g = with_gt ? rl_dataproto_new_column(dp, "ground_truth", RL_COL_STRING) : NULL;
    rl_column *s = rl_dataproto_new_column(dp, "data_source", RL_COL_STRING);
    for (int i = 0; i < 7; i++) {
        assert_int_equal(rl_column_set_str(r, i, s_rows[i].response), 0);
        if (g)
            assert_int_equal(rl_column_set_str(g, i, s_rows[i].gt), 0);
        assert_int_equal(rl_column_set_str(s, i, s_rows[i].source), 0);
    }
    return dp;
}

static void s_check(const rl_dataproto *out, double fw, const float *extra)
{
    assert_int_equal(rl_dataproto_rows(out), 7);
    const float *score = rl_tensor_data(rl_dataproto_tensor_typed(out, "score", RL_F32));
    const float *acc = rl_tensor_data(rl_dataproto_tensor_typed(out, "accuracy", RL_F32));
    const float *fmt = rl_tensor_data(rl_dataproto_tensor_typed(out, "format", RL_F32));
    for (int i = 0; i < 7; i++) {
        double want = (1.0 - fw) * s_rows[i].acc + fw * s_rows[i].fmt + (extra ? extra[i] : 0.0);
        if (acc[i] != (float)s_rows[i].acc || fmt[i] != (float)s_rows[i].fmt ||
            fabsf(score[i] - (float)want) > 1e-6f)
            fail_msg("row %d: score %g acc %g fmt %g, expected %g %g %g", i, score[i], acc[i],
                     fmt[i], want, s_rows[i].acc, s_rows[i].fmt);
    }
}

static void test_compute_reward_two_ranks(void **state)
{
    (void)state;
    s_job *j = s_start();
    rl_group *g = rl_driver_group(j->d, "reward");
    assert_int_equal(rl_group_size(g), 2);

    /* a meta format_weight is not a setting: the job's 0.2 holds */
    rl_dataproto *in = s_batch(1), *out = NULL;
    json_object_set_new(rl_dataproto_meta(in), "format_weight", json_real(0.9));
    if (rl_group_call_sync(g, "compute_reward", RL_DISPATCH_DP_COMPUTE, in, &out))
        fail_msg("compute_reward: %s", rl_error_message());
    s_check(out, 0.2, NULL);
    rl_dataproto_free(out);

    /* extra_reward is added */
    json_object_del(rl_dataproto_meta(in), "format_weight");
    static const float extra[7] = {0.5f, -0.25f, 0.0f, 0.0f, 0.0f, 0.125f, 0.0f};
    int64_t shape[1] = {7};
    float *x = rl_tensor_data(rl_dataproto_new_tensor(in, "extra_reward", RL_F32, 1, shape));
    memcpy(x, extra, sizeof extra);
    if (rl_group_call_sync(g, "compute_reward", RL_DISPATCH_DP_COMPUTE, in, &out))
        fail_msg("compute_reward: %s", rl_error_message());
    s_check(out, 0.2, extra);
    rl_dataproto_free(out);
    /* a NaN extra_reward is refused, naming the row (it made the score NaN) */
    x[5] = NAN;
    assert_int_equal(rl_group_call_sync(g, "compute_reward", RL_DISPATCH_DP_COMPUTE, in, &out),
                     RL_ENUMERIC);
    assert_msg_contains(rl_error_message(), "tensor 'extra_reward': row 1 holds nan");
    rl_dataproto_free(in);

    /* a missing column: the error names it and the expected type */
    in = s_batch(0);
    assert_int_equal(rl_group_call_sync(g, "compute_reward", RL_DISPATCH_DP_COMPUTE, in, &out),
                     RL_ENOTFOUND);
    assert_msg_contains(rl_error_message(), "missing column 'ground_truth'");
    assert_msg_contains(rl_error_message(), "string");
    /* a column of the wrong type */
    rl_column *gt = rl_dataproto_new_column(in, "ground_truth", RL_COL_INT64);
    assert_non_null(gt);
    assert_int_equal(rl_group_call_sync(g, "compute_reward", RL_DISPATCH_DP_COMPUTE, in, &out),
                     RL_EDTYPE);
    assert_msg_contains(rl_error_message(), "column 'ground_truth' is int64, expected string");
    rl_dataproto_free(in);

    /* an unknown data_source names it */
    in = s_batch(1);
    assert_int_equal(rl_column_set_str(rl_dataproto_column(in, "data_source"), 5, "chess"), 0);
    assert_int_equal(rl_group_call_sync(g, "compute_reward", RL_DISPATCH_DP_COMPUTE, in, &out),
                     RL_ENOTFOUND);
    assert_msg_contains(rl_error_message(), "unknown data_source 'chess'");
    rl_dataproto_free(in);
    s_stop(j);
}

/* A value out of range stops the start: the worker's check names the key,
 * the override that set it, the bound and the value. */
static void test_bad_config_stops_start(void **state)
{
    (void)state;
    assert_null(s_start_with("reward.format_weight=1.5"));
    assert_msg_contains(rl_error_message(), "role reward cannot start");
    assert_msg_contains(rl_error_message(), "override reward.format_weight=1.5: "
                                            "reward.format_weight: must be in [0, 1], got 1.5");
    s_stop(s_current);
}

int main(void)
{
    const char *build = getenv("BUILD");
    snprintf(s_worker, sizeof s_worker, "%s/bin/rl-worker", build ? build : "build");
    if (access(s_worker, X_OK) != 0) {
        fprintf(stderr, "test_reward_worker: %s not built\n", s_worker);
        return 1;
    }
    signal(SIGPIPE, SIG_IGN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_compute_reward_two_ranks, s_teardown),
        cmocka_unit_test_teardown(test_bad_config_stops_start, s_teardown),
    };
    return cmocka_run_group_tests_name("reward_worker", tests, NULL, NULL);
}
