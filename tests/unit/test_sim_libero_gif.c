/* test_sim_libero_gif.c — the driver's GIFs of evaluation episodes
 * (driver/recipes/embodied/libero_gif.h) on interact replies built here the way the
 * env role builds them: the eval.gif_* keys are range-checked with file:line
 * errors; replies of the wrong shape, tasks and initial states out of range
 * and non-finite actions of taken steps are errors naming the env rank and
 * row (before anything is drawn); a scripted-expert episode in a reply
 * becomes <output_dir>/gifs/<tag>/task<T>_init<I>_success.gif, at most
 * eval.gif_episodes_per_task per task over the rounds of one evaluation,
 * only from the first `rows` rows. The drawing cases skip without the
 * scenes, without EGL and under AddressSanitizer, with the reason. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/common/libero_data.h"

#include "driver/recipes/embodied/libero_gif.h"
#include "rlrt/error.h"
#include "rlrt/dtype.h"
#include "rlrt/tensor.h"
#include "rlrt/dataproto.h"
#include "rlrt/config.h"
#include "common/core/util.h"
#include "common/sim/libero.h"
#include "common/schema/env.h"
#include "common/schema/libero.h"
#include "common/schema/trainer.h"
#include "workers/env/env.h"

#define assert_msg_contains(s)                                                    \
    do {                                                                          \
        if (!strstr(rl_error_message(), (s)))                                     \
            fail_msg("message '%s' lacks '%s'", rl_error_message(), (s));        \
    } while (0)

/* `text` (named job.yaml) over the defaults of the trainer's, the env's and
 * the GIF sections. */
static rl_config *s_parse(const char *text)
{
    const rl_config_section *secs[] = {&rl_trainer_section, &rl_env_section, &rl_libero_gif_section};
    rl_config *known = rl_config_schema_defaults(secs, 3, NULL, 0);
    rl_config *job = rl_config_parse_string(text, strlen(text), "job.yaml");
    rl_config *c = known && job ? rl_config_merge(known, job) : NULL;
    rl_config_free(known);
    rl_config_free(job);
    return c;
}

/* The job: the recipes' env and eval.gif defaults, output in `out`. */
static rl_config *s_job(const char *out, const char *extra)
{
    char text[8192];
    snprintf(text, sizeof text, "trainer:\n  seed: 1\n  output_dir: %s\n%s", out, extra ? extra : "");
    rl_config *c = s_parse(text);
    if (!c)
        fail_msg("%s", rl_error_message());
    assert_int_equal(rl_config_set_yaml(c, "env.data_dir", rl_test_libero_data()), 0);
    assert_int_equal(rl_config_set_yaml(c, "env.auto_reset", "false"), 0);
    return c;
}

static void test_config_errors(void **state)
{
    (void)state;
    rl_config *c = s_job("/tmp", NULL);
    assert_int_equal(rl_libero_gif_check(c), 0);
    rl_config_free(c);
    /* a bad value in the file: its line */
    const char *text = "eval:\n  gif_episodes_per_task: 1\n  gif_every: 4\n  gif_size: 128\n"
                       "env:\n  max_episode_steps: 240\n";
    static const struct {
        const char *key, *value, *want;
    } bad[] = {
        {"eval.gif_episodes_per_task", "51", "job.yaml:2:26: eval.gif_episodes_per_task: must be in [0, 50], got 51"},
        {"eval.gif_episodes_per_task", "-1", "eval.gif_episodes_per_task: must be in [0, 50], got -1"},
        {"eval.gif_every", "0", "job.yaml:3:14: eval.gif_every: must be in [1, 1000], got 0"},
        {"eval.gif_size", "8", "job.yaml:4:13: eval.gif_size: must be in [16, 512], got 8"},
        {"eval.gif_size", "big", "eval.gif_size: expected an integer"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char t[512];
        snprintf(t, sizeof t, "%s", text);
        /* replace the key's value in the text so the error is located in it */
        const char *leaf = strrchr(bad[i].key, '.') + 1;
        char *at = strstr(t, leaf);
        assert_non_null(at);
        char *colon = strchr(at, ':'), *eol = strchr(at, '\n');
        char rest[512];
        snprintf(rest, sizeof rest, "%s", eol);
        snprintf(colon + 2, sizeof t - (size_t)(colon + 2 - t), "%s%s", bad[i].value, rest);
        c = s_parse(t);
        assert_non_null(c);
        assert_int_equal(rl_libero_gif_check(c), RL_ECONFIG);
        assert_msg_contains(bad[i].want);
        rl_config_free(c);
    }
    /* more frames than a GIF holds: located at eval.gif_every */
    const char *many = "eval:\n  gif_episodes_per_task: 1\n  gif_every: 1\n  gif_size: 128\n"
                       "env:\n  max_episode_steps: 5000\n";
    c = s_parse(many);
    assert_non_null(c);
    assert_int_equal(rl_libero_gif_check(c), RL_ECONFIG);
    assert_msg_contains("job.yaml:3:14: eval.gif_every: eval.gif_every 1 gives more than 4096 frames");
    rl_config_free(c);
}

/* An interact reply of n envs and K steps; every env runs task[i] from
 * init[i] for len[i] steps (then done), actions 0 except the gripper. */
static rl_dataproto *s_reply(int n, int64_t K, const int64_t *task, const int64_t *init, const int64_t *len)
{
    rl_dataproto *dp = rl_dataproto_new();
    int64_t k1[2] = {n, K + 1}, k0[2] = {n, K}, ka[3] = {n, K, 7};
    rl_tensor *tt = rl_dataproto_new_tensor(dp, RL_ENV_TASK, RL_I64, 2, k1);
    rl_tensor *ti = rl_dataproto_new_tensor(dp, RL_ENV_INIT, RL_I64, 2, k1);
    rl_tensor *ta = rl_dataproto_new_tensor(dp, RL_ENV_ACTIONS, RL_F32, 3, ka);
    rl_tensor *tv = rl_dataproto_new_tensor(dp, RL_ENV_VALID, RL_U8, 2, k0);
    rl_tensor *td = rl_dataproto_new_tensor(dp, RL_ENV_DONES, RL_U8, 2, k0);
    rl_tensor *ts = rl_dataproto_new_tensor(dp, RL_ENV_SUCCESS, RL_U8, 2, k1);
    assert_non_null(ts);
    int64_t *T = rl_tensor_data(tt), *I = rl_tensor_data(ti);
    float *A = rl_tensor_data(ta);
    uint8_t *V = rl_tensor_data(tv), *D = rl_tensor_data(td), *S = rl_tensor_data(ts);
    memset(A, 0, sizeof(float) * (size_t)(n * K * 7));
    memset(V, 0, (size_t)(n * K));
    memset(D, 0, (size_t)(n * K));
    memset(S, 0, (size_t)(n * (K + 1)));
    for (int i = 0; i < n; i++) {
        for (int64_t k = 0; k <= K; k++) {
            T[i * (K + 1) + k] = task[i];
            I[i * (K + 1) + k] = init[i];
        }
        for (int64_t k = 0; k < len[i] && k < K; k++) {
            V[i * K + k] = 1;
            A[(i * K + k) * 7 + 6] = -1.0f;
        }
        if (len[i] > 0 && len[i] <= K)
            D[i * K + len[i] - 1] = 1;
    }
    return dp;
}

static void test_bad_replies(void **state)
{
    (void)state;
    /* an output directory that cannot be made (its parent is a file, so not
     * even root can): the drawing stops at it with a warning */
    char file[] = "/tmp/rlrt_gifs_file_XXXXXX", out[64];
    int fd = mkstemp(file);
    assert_true(fd >= 0);
    close(fd);
    snprintf(out, sizeof out, "%s/out", file);
    rl_config *job = s_job(out, NULL);
    int64_t done[RL_ENV_MAX_TASKS] = {0};
    int64_t task[2] = {0, 1}, init[2] = {0, 3}, len[2] = {8, 8};
    rl_dataproto *r[2];

    /* a reply without the env's tensors */
    r[0] = s_reply(2, 8, task, init, len);
    r[1] = rl_dataproto_new();
    assert_int_equal(rl_libero_eval_gifs(job, "t", 0, r, 2, -1, done), RL_EPROTO);
    assert_msg_contains("env/1 interact reply");
    rl_dataproto_free(r[1]);

    /* actions of the wrong shape */
    r[1] = rl_dataproto_new();
    int64_t k1[2] = {1, 9}, k0[2] = {1, 8}, ka[3] = {1, 8, 6};
    rl_dataproto_new_tensor(r[1], RL_ENV_TASK, RL_I64, 2, k1);
    rl_dataproto_new_tensor(r[1], RL_ENV_INIT, RL_I64, 2, k1);
    rl_dataproto_new_tensor(r[1], RL_ENV_ACTIONS, RL_F32, 3, ka);
    rl_dataproto_new_tensor(r[1], RL_ENV_VALID, RL_U8, 2, k0);
    memset(rl_tensor_data(rl_dataproto_tensor(r[1], RL_ENV_TASK)), 0, 9 * 8);
    memset(rl_tensor_data(rl_dataproto_tensor(r[1], RL_ENV_INIT)), 0, 9 * 8);
    assert_int_equal(rl_libero_eval_gifs(job, "t", 0, r, 2, -1, done), RL_EPROTO);
    assert_msg_contains("env/1 interact reply");
    assert_msg_contains("actions");
    rl_dataproto_free(r[1]);

    /* a task out of range, an initial state out of range */
    int64_t bad_task[1] = {64}, bad_init[1] = {-2}, zero[1] = {0}, one[1] = {8};
    r[1] = s_reply(1, 8, bad_task, zero, one);
    assert_int_equal(rl_libero_eval_gifs(job, "t", 0, r, 2, -1, done), RL_EPROTO);
    assert_msg_contains("env/1 row 0: task 64");
    rl_dataproto_free(r[1]);
    r[1] = s_reply(1, 8, zero, bad_init, one);
    assert_int_equal(rl_libero_eval_gifs(job, "t", 0, r, 2, -1, done), RL_EPROTO);
    assert_msg_contains("initial state -2");
    rl_dataproto_free(r[1]);

    /* a NaN in a taken step is an error; after the episode's end it is not
     * read (rows 1 of rank 0: task 1 ends after 4 steps) */
    len[1] = 4;
    rl_dataproto_free(r[0]);
    r[0] = s_reply(2, 8, task, init, len);
    float *A = rl_tensor_data(rl_dataproto_tensor(r[0], RL_ENV_ACTIONS));
    A[(8 + 2) * 7 + 3] = NAN;
    assert_int_equal(rl_libero_eval_gifs(job, "t", 0, r, 1, -1, done), RL_EPROTO);
    assert_msg_contains("env/0 row 1: action[3] of step 2 is not finite");
    A[(8 + 2) * 7 + 3] = 0;
    A[(8 + 5) * 7 + 3] = INFINITY;
    /* nothing wrong any more: this reaches the drawing, which cannot make
     * its directory (a warning, not an error) */
    assert_int_equal(rl_libero_eval_gifs(job, "t", 0, r, 1, -1, done), 0);
    /* ... and gives up on this evaluation: its later rounds do not retry */
    assert_int_equal(done[0], 1);
    assert_int_equal(done[RL_ENV_MAX_TASKS - 1], 1);
    /* 0 rows, or GIFs off: nothing is read */
    memset(done, 0, sizeof done);
    A[(8 + 2) * 7 + 3] = NAN;
    assert_int_equal(rl_libero_eval_gifs(job, "t", 0, r, 1, 0, done), 0);
    /* only the first row counts: row 1's NaN is not read */
    assert_int_equal(rl_libero_eval_gifs(job, "t", 0, r, 1, 1, done), 0);
    assert_int_equal(rl_config_set_yaml(job, "eval.gif_episodes_per_task", "0"), 0);
    assert_int_equal(rl_libero_eval_gifs(job, "t", 0, r, 1, -1, done), 0);
    rl_dataproto_free(r[0]);
    rl_config_free(job);
    unlink(file);
}

/* The scripted expert on task `task` from `init`: its applied actions in row
 * `row` of `dp` (the rest of the row as the env leaves it after the end). */
static int64_t s_expert_into(rl_dataproto *dp, int row, int task, int init, int64_t K)
{
    rl_libero_task *t = rl_libero_task_load(rl_test_libero_data(), task, RL_LIBERO_SCENE_PHYS);
    if (!t)
        fail_msg("%s", rl_error_message());
    rl_libero_env *e = rl_libero_env_new(t);
    assert_int_equal(rl_libero_env_reset(e, init), 0);
    rl_libero_expert x;
    rl_libero_expert_reset(&x, rl_libero_task_target_slot(t), rl_libero_task_basket_slot(t),
                           rl_libero_task_target_height(t), rl_libero_task_grasp_axis(t));
    float *A = rl_tensor_data(rl_dataproto_tensor(dp, RL_ENV_ACTIONS));
    uint8_t *V = rl_tensor_data(rl_dataproto_tensor(dp, RL_ENV_VALID));
    uint8_t *D = rl_tensor_data(rl_dataproto_tensor(dp, RL_ENV_DONES));
    uint8_t *S = rl_tensor_data(rl_dataproto_tensor(dp, RL_ENV_SUCCESS));
    memset(V + row * K, 0, (size_t)K);
    memset(D + row * K, 0, (size_t)K);
    int64_t k = 0;
    for (int win = 0; k < K && !win; k++) {
        float p[39], o[98], a[7];
        double ad[7];
        rl_libero_env_obs_f32(e, p, o);
        rl_libero_expert_act(&x, p, o, a);
        for (int i = 0; i < 7; i++) {
            float v = i < 6 && a[i] > 1.0f ? 1.0f : i < 6 && a[i] < -1.0f ? -1.0f : a[i];
            A[(row * K + k) * 7 + i] = v;
            ad[i] = v;
        }
        rl_libero_step_info info;
        assert_int_equal(rl_libero_env_step(e, ad, &info), 0);
        win = (info.flags & RL_LIBERO_SUCCESS) != 0;
        V[row * K + k] = 1;
        S[row * (K + 1) + k + 1] = (uint8_t)win;
        if (win || k + 1 == K)
            D[row * K + k] = 1;
    }
    for (int64_t j = k; j < K; j++)
        S[row * (K + 1) + j + 1] = S[row * (K + 1) + k];
    rl_libero_env_free(e);
    rl_libero_task_free(t);
    return k;
}

static void test_expert_episode_gif(void **state)
{
    (void)state;
    if (!rl_test_have_libero_data()) {
        skip();
        return;
    }
#if defined(__SANITIZE_ADDRESS__)
    printf("# skip: rendering is not run under AddressSanitizer (Mesa is not instrumented); "
           "run make test without SANITIZE\n");
    skip();
    return;
#endif
    char out[] = "/tmp/rlrt_gifs_XXXXXX";
    assert_non_null(mkdtemp(out));
    rl_config *job = s_job(out, NULL);
    assert_int_equal(rl_config_set_yaml(job, "eval.gif_size", "64"), 0);
    assert_int_equal(rl_config_set_yaml(job, "eval.gif_every", "8"), 0);
    /* round 1: task 3 from state 7 by the expert (succeeds); task 4 from
     * state 2 for 12 steps of nothing (fails); round 2: task 3 again */
    const int64_t K = 240;
    int64_t task[2] = {3, 4}, init[2] = {7, 2}, len[2] = {K, 12};
    rl_dataproto *r1 = s_reply(2, K, task, init, len);
    int64_t steps = s_expert_into(r1, 0, 3, 7, K);
    assert_true(steps < K);
    uint8_t *S = rl_tensor_data(rl_dataproto_tensor(r1, RL_ENV_SUCCESS));
    assert_int_equal(S[steps], 1);
    int64_t done[RL_ENV_MAX_TASKS] = {0};
    if (rl_libero_eval_gifs(job, NULL, 0, &r1, 1, -1, done))
        fail_msg("%s", rl_error_message());
    char p[4200];
    struct stat st;
    snprintf(p, sizeof p, "%s/gifs/step_0/task3_init7_success.gif", out);
    if (stat(p, &st) != 0) { /* no EGL here: the function warned and went on */
        printf("# skip: no GIF written (no EGL/OpenGL on this machine?)\n");
        rl_dataproto_free(r1);
        rl_config_free(job);
        skip();
        return;
    }
    assert_true(st.st_size > 1000);
    size_t len_gif = 0;
    char *gif = rl_file_read_all(p, &len_gif);
    assert_non_null(gif);
    assert_memory_equal(gif, "GIF89a", 6);
    free(gif);
    snprintf(p, sizeof p, "%s/gifs/step_0/task4_init2_fail.gif", out);
    assert_int_equal(stat(p, &st), 0);
    snprintf(p, sizeof p, "%s/gifs/step_0/task3_init7_replay.gif", out);
    assert_int_not_equal(stat(p, &st), 0); /* renamed to its outcome */
    assert_int_equal(done[3], 1);
    assert_int_equal(done[4], 1);
    /* the next round of the same evaluation: task 3 has its GIF */
    int64_t init2[2] = {9, 9};
    rl_dataproto *r2 = s_reply(2, K, task, init2, len);
    assert_int_equal(rl_libero_eval_gifs(job, NULL, 0, &r2, 1, -1, done), 0);
    snprintf(p, sizeof p, "%s/gifs/step_0/task3_init9_fail.gif", out);
    assert_int_not_equal(stat(p, &st), 0);
    /* a tag, and rows: only the first row is an evaluated episode */
    memset(done, 0, sizeof done);
    assert_int_equal(rl_libero_eval_gifs(job, "warmstart", 0, &r2, 1, 1, done), 0);
    snprintf(p, sizeof p, "%s/gifs/warmstart/task3_init9_fail.gif", out);
    assert_int_equal(stat(p, &st), 0);
    snprintf(p, sizeof p, "%s/gifs/warmstart/task4_init9_fail.gif", out);
    assert_int_not_equal(stat(p, &st), 0);
    assert_int_equal(done[4], 0);
    rl_dataproto_free(r1);
    rl_dataproto_free(r2);
    rl_config_free(job);
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", out);
    assert_int_equal(system(cmd), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_config_errors),
        cmocka_unit_test(test_bad_replies),
        cmocka_unit_test(test_expert_episode_gif),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
