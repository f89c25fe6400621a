/* test_sim_libero.c — the C LIBERO-Object env (common/sim/libero.h) on the
 * real scenes of `make libero-data` (LIBERO_DATA, default build/libero-data):
 * missing and corrupt data, initial states against LIBERO's own positions
 * (tests/golden/libero/init_positions.json, from tests/reference/
 * gen_libero_init.py), determinism, the success predicate on hand-placed
 * states, the controller reaching a commanded pose, bad actions,
 * instability handling and the expert. Without the data every case that
 * needs it is SKIPPED with the command to fix it. */
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
#include <jansson.h>

#include "rlrt/error.h"
#include "common/sim/libero.h"

static rl_libero_task *s_load(int task)
{
    rl_libero_task *t = rl_libero_task_load(rl_test_libero_data(), task, RL_LIBERO_SCENE_PHYS);
    if (!t)
        fail_msg("%s", rl_error_message());
    return t;
}

static void test_missing_data(void **state)
{
    (void)state;
    assert_null(rl_libero_task_load("/nonexistent/libero", 0, RL_LIBERO_SCENE_PHYS));
    assert_int_equal(rl_error_code(), RL_ENOTFOUND);
    assert_non_null(strstr(rl_error_message(), "/nonexistent/libero/manifest.json"));
    assert_non_null(strstr(rl_error_message(), "make libero-data"));
}

/* A copy of task 0 whose init-state file lost its last byte, then one whose
 * scene is garbage: each error names the file and the fix. */
static void test_corrupt_data(void **state)
{
    (void)state;
    RL_NEED_LIBERO_DATA();
    char dir[] = "/tmp/rlrt-libero-XXXXXX", cmd[32768], msg[1024];
    assert_non_null(mkdtemp(dir));
    char real[4096];
    assert_non_null(realpath(rl_test_libero_data(), real));
    snprintf(cmd, sizeof cmd,
             "mkdir -p %s/libero_object/task_00 && cp %s/manifest.json %s/ && ln -s %s/assets %s/assets && "
             "cp %s/libero_object/task_00/* %s/libero_object/task_00/ && "
             "truncate -s -1 %s/libero_object/task_00/init_states.f64",
             dir, real, dir, real, dir, real, dir, dir);
    assert_int_equal(system(cmd), 0);
    assert_null(rl_libero_task_load(dir, 0, RL_LIBERO_SCENE_PHYS));
    snprintf(msg, sizeof msg, "%s", rl_error_message());
    assert_non_null(strstr(msg, "init_states.f64"));
    assert_non_null(strstr(msg, "make libero-data"));
    snprintf(cmd, sizeof cmd, "echo '<mujoco><worldbody><bad' > %s/libero_object/task_00/scene_phys.xml", dir);
    assert_int_equal(system(cmd), 0);
    assert_null(rl_libero_task_load(dir, 0, RL_LIBERO_SCENE_PHYS));
    snprintf(msg, sizeof msg, "%s", rl_error_message());
    assert_non_null(strstr(msg, "scene_phys.xml"));
    assert_non_null(strstr(msg, "make libero-data"));
    assert_null(rl_libero_task_load(dir, 7, RL_LIBERO_SCENE_PHYS)); /* its folder was not copied */
    assert_non_null(strstr(rl_error_message(), "task_07"));
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
}

/* Object and end-effector positions after a reset equal LIBERO's. */
static void test_init_positions(void **state)
{
    (void)state;
    RL_NEED_LIBERO_DATA();
    json_error_t je;
    json_t *g = json_load_file("tests/golden/libero/init_positions.json", 0, &je);
    assert_non_null(g);
    json_t *rows = json_object_get(g, "rows");
    assert_int_equal(json_array_size(rows), 30);
    double worst = 0;
    for (size_t r = 0; r < json_array_size(rows); r++) {
        json_t *row = json_array_get(rows, r);
        int task = (int)json_integer_value(json_object_get(row, "task"));
        int init = (int)json_integer_value(json_object_get(row, "init"));
        rl_libero_task *t = s_load(task);
        rl_libero_env *e = rl_libero_env_new(t);
        assert_non_null(e);
        assert_int_equal(rl_libero_env_reset(e, init), RL_OK);
        double p[RL_LIBERO_PROPRIO_DIM], o[RL_LIBERO_OBJECT_DIM];
        rl_libero_env_obs(e, p, o);
        for (int k = 0; k < RL_LIBERO_NUM_OBJECTS; k++)
            for (int i = 0; i < 3; i++) {
                double want = json_number_value(json_array_get(json_array_get(json_object_get(row, "objects"), k), i));
                double d = fabs(o[14 * k + i] - want);
                worst = d > worst ? d : worst;
            }
        for (int i = 0; i < 3; i++) {
            double d = fabs(p[28 + i] - json_number_value(json_array_get(json_object_get(row, "eef"), i)));
            worst = d > worst ? d : worst;
        }
        rl_libero_env_free(e);
        rl_libero_task_free(t);
    }
    json_decref(g);
    printf("# max |position - LIBERO| over 30 initial states: %.3g m\n", worst);
    assert_true(worst < 1e-9);
}

/* The same initial state and actions give the same states bit for bit, on
 * two envs of one task; another initial state gives another trajectory. */
static void test_determinism(void **state)
{
    (void)state;
    RL_NEED_LIBERO_DATA();
    rl_libero_task *t = s_load(3);
    rl_libero_env *a = rl_libero_env_new(t), *b = rl_libero_env_new(t), *c = rl_libero_env_new(t);
    assert_true(a && b && c);
    assert_int_equal(rl_libero_env_reset(a, 5), 0);
    assert_int_equal(rl_libero_env_reset(b, 5), 0);
    assert_int_equal(rl_libero_env_reset(c, 6), 0);
    int nq = rl_libero_env_nq(a), nv = rl_libero_env_nv(a);
    double *qa = calloc((size_t)(nq + nv), sizeof(double)), *qb = calloc((size_t)(nq + nv), sizeof(double)),
           *qc = calloc((size_t)(nq + nv), sizeof(double));
    unsigned seed = 7;
    for (int s = 0; s < 40; s++) {
        double act[7];
        for (int i = 0; i < 7; i++)
            act[i] = 2.0 * rand_r(&seed) / RAND_MAX - 1.0;
        assert_int_equal(rl_libero_env_step(a, act, NULL), 0);
        assert_int_equal(rl_libero_env_step(b, act, NULL), 0);
        assert_int_equal(rl_libero_env_step(c, act, NULL), 0);
    }
    rl_libero_env_state(a, NULL, qa, qa + nq);
    rl_libero_env_state(b, NULL, qb, qb + nq);
    rl_libero_env_state(c, NULL, qc, qc + nq);
    assert_memory_equal(qa, qb, sizeof(double) * (size_t)(nq + nv));
    assert_memory_not_equal(qa, qc, sizeof(double) * (size_t)(nq + nv));
    free(qa), free(qb), free(qc);
    rl_libero_env_free(a), rl_libero_env_free(b), rl_libero_env_free(c);
    rl_libero_task_free(t);
}

/* LIBERO's In predicate on hand-placed targets: the region's centre, just
 * inside and just outside every face (the lower z bound is 1 cm lower). */
static void test_success_predicate(void **state)
{
    (void)state;
    RL_NEED_LIBERO_DATA();
    rl_libero_task *t = s_load(0);
    rl_libero_env *e = rl_libero_env_new(t);
    assert_non_null(e);
    assert_int_equal(rl_libero_env_reset(e, 0), 0);
    assert_int_equal(rl_libero_env_success(e), 0);
    int adr = rl_libero_task_object_qposadr(t, rl_libero_task_target_slot(t));
    assert_true(adr >= 0);
    int nq = rl_libero_env_nq(e);
    double *q0 = calloc((size_t)nq, sizeof(double)), *q = calloc((size_t)nq, sizeof(double));
    rl_libero_env_state(e, NULL, q0, NULL);
    double c[3], h[3];
    rl_libero_env_region(e, c, h);
    assert_true(h[0] > 0.02 && h[1] > 0.02 && h[2] > 0.02);
    struct {
        int axis;
        double offset; /* from the centre, in units of the half extent plus a margin */
        double margin;
        int inside;
    } cases[] = {
        {0, 0, 0, 1},      {0, 1, -0.002, 1}, {0, 1, 0.002, 0},  {0, -1, 0.002, 1}, {0, -1, -0.002, 0},
        {1, 1, -0.002, 1}, {1, 1, 0.002, 0},  {1, -1, 0.002, 1}, {1, -1, -0.002, 0}, {2, 1, -0.002, 1},
        {2, 1, 0.002, 0},  {2, -1, -0.005, 1}, /* below the box but within the lowered 1 cm */
        {2, -1, -0.012, 0},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        memcpy(q, q0, sizeof(double) * (size_t)nq);
        double p[3] = {c[0], c[1], c[2]};
        int a = cases[k].axis;
        p[a] += cases[k].offset * h[a] + (cases[k].offset >= 0 ? cases[k].margin : -cases[k].margin);
        if (cases[k].offset < 0)
            p[a] = c[a] - h[a] + cases[k].margin;
        memcpy(q + adr, p, sizeof p);
        assert_int_equal(rl_libero_env_set_state(e, q, NULL), 0);
        double got[3];
        assert_int_equal(rl_libero_env_body_pos(e, "alphabet_soup_1_main", got), 0);
        for (int i = 0; i < 3; i++)
            assert_true(fabs(got[i] - p[i]) < 1e-12);
        if (rl_libero_env_success(e) != cases[k].inside)
            fail_msg("case %zu: axis %d at %+.4f from the centre (half %.4f): success %d, expected %d", k, a,
                     p[a] - c[a], h[a], rl_libero_env_success(e), cases[k].inside);
    }
    free(q0), free(q);
    rl_libero_env_free(e);
    rl_libero_task_free(t);
}

/* Proportional position deltas reach a pose 12 cm away within 5 mm and
 * keep the orientation (rotation deltas exactly 0). */
static void test_controller_reaches_pose(void **state)
{
    (void)state;
    RL_NEED_LIBERO_DATA();
    rl_libero_task *t = s_load(0);
    rl_libero_env *e = rl_libero_env_new(t);
    assert_int_equal(rl_libero_env_reset(e, 0), 0);
    double p0[3], R0[9], p[3], R[9];
    rl_libero_env_eef(e, p0, R0);
    double goal[3] = {p0[0] + 0.06, p0[1] - 0.06, p0[2] + 0.08};
    for (int s = 0; s < 60; s++) {
        rl_libero_env_eef(e, p, NULL);
        double a[7] = {0};
        for (int i = 0; i < 3; i++)
            a[i] = fmax(-1, fmin(1, (goal[i] - p[i]) / 0.05));
        assert_int_equal(rl_libero_env_step(e, a, NULL), 0);
    }
    rl_libero_env_eef(e, p, R);
    double err = sqrt(pow(p[0] - goal[0], 2) + pow(p[1] - goal[1], 2) + pow(p[2] - goal[2], 2));
    double rot = 0;
    for (int i = 0; i < 9; i++)
        rot = fmax(rot, fabs(R[i] - R0[i]));
    printf("# commanded pose reached within %.4f m, orientation within %.4f\n", err, rot);
    assert_true(err < 0.005);
    assert_true(rot < 0.1);
    rl_libero_env_free(e);
    rl_libero_task_free(t);
}

/* NaN/Inf: an error naming the component and the step, and nothing moves;
 * out of range: clipped and counted. */
static void test_bad_actions(void **state)
{
    (void)state;
    RL_NEED_LIBERO_DATA();
    rl_libero_task *t = s_load(0);
    rl_libero_env *e = rl_libero_env_new(t);
    assert_int_equal(rl_libero_env_reset(e, 0), 0);
    double ok[7] = {0.1, 0, 0, 0, 0, 0, -1};
    assert_int_equal(rl_libero_env_step(e, ok, NULL), 0);
    int nq = rl_libero_env_nq(e);
    double *a = calloc((size_t)nq, sizeof(double)), *b = calloc((size_t)nq, sizeof(double));
    rl_libero_env_state(e, NULL, a, NULL);
    double bad[7] = {0, 0, 0, NAN, 0, 0, 0};
    assert_int_equal(rl_libero_env_step(e, bad, NULL), RL_ENUMERIC);
    assert_non_null(strstr(rl_error_message(), "action[3] is NaN at step 1"));
    bad[3] = 0, bad[6] = -INFINITY;
    assert_int_equal(rl_libero_env_step(e, bad, NULL), RL_ENUMERIC);
    assert_non_null(strstr(rl_error_message(), "action[6] is Inf"));
    rl_libero_env_state(e, NULL, b, NULL);
    assert_memory_equal(a, b, sizeof(double) * (size_t)nq);
    assert_int_equal(rl_libero_env_steps(e), 1);
    double big[7] = {3, -2, 0.5, 1.5, 0, 0, 9};
    rl_libero_step_info info;
    assert_int_equal(rl_libero_env_step(e, big, &info), 0);
    assert_int_equal(info.clipped, 3);
    assert_int_equal(rl_libero_env_reset(e, 50), RL_ERANGE);
    assert_non_null(strstr(rl_error_message(), "initial state 50 is not in [0, 50)"));
    free(a), free(b);
    rl_libero_env_free(e);
    rl_libero_task_free(t);
}

/* A NaN in the state: MuJoCo's warning ends the episode as unstable, the
 * env refuses to step until reset, and a reset brings it back. */
static void test_instability(void **state)
{
    (void)state;
    RL_NEED_LIBERO_DATA();
    rl_libero_task *t = s_load(0);
    rl_libero_env *e = rl_libero_env_new(t);
    assert_int_equal(rl_libero_env_reset(e, 0), 0);
    rl_libero_env_poison(e);
    double a[7] = {0};
    rl_libero_step_info info;
    assert_int_equal(rl_libero_env_step(e, a, &info), 0);
    assert_true(info.flags & RL_LIBERO_UNSTABLE);
    assert_false(info.flags & RL_LIBERO_SUCCESS);
    assert_true(strlen(info.warning) > 0);
    printf("# unstable: %s\n", info.warning);
    assert_int_equal(rl_libero_env_step(e, a, &info), RL_ESTATE);
    assert_int_equal(rl_libero_env_reset(e, 0), 0);
    assert_int_equal(rl_libero_env_step(e, a, &info), 0);
    assert_int_equal(info.flags, 0);
    rl_libero_env_free(e);
    rl_libero_task_free(t);
}

/* The scripted expert solves one initial state of every task (the whole
 * 10 x 50 table is `make bench-env`'s). */
static void test_expert(void **state)
{
    (void)state;
    RL_NEED_LIBERO_DATA();
    for (int task = 0; task < 10; task++) {
        rl_libero_task *t = s_load(task);
        rl_libero_env *e = rl_libero_env_new(t);
        int init = (task * 7) % 50, done = 0;
        assert_int_equal(rl_libero_env_reset(e, init), 0);
        rl_libero_expert x;
        rl_libero_expert_reset(&x, rl_libero_task_target_slot(t), rl_libero_task_basket_slot(t),
                               rl_libero_task_target_height(t), rl_libero_task_grasp_axis(t));
        for (int s = 0; s < 240 && !done; s++) {
            float p[39], o[98], a[7];
            double ad[7];
            rl_libero_env_obs_f32(e, p, o);
            rl_libero_expert_act(&x, p, o, a);
            for (int i = 0; i < 7; i++)
                ad[i] = a[i];
            rl_libero_step_info info;
            assert_int_equal(rl_libero_env_step(e, ad, &info), 0);
            done = info.flags & RL_LIBERO_SUCCESS;
        }
        if (!done)
            fail_msg("the expert failed task %d initial state %d", task, init);
        rl_libero_env_free(e);
        rl_libero_task_free(t);
    }
}

/* The agent view of the full scene: a picture with content, which changes
 * when the arm moves. Skipped without EGL, and under AddressSanitizer (Mesa's
 * software renderer is not instrumented and keeps allocations to exit). */
static void test_render(void **state)
{
    (void)state;
    RL_NEED_LIBERO_DATA();
#if defined(__SANITIZE_ADDRESS__)
    printf("# skip: rendering is not run under AddressSanitizer (Mesa is not instrumented); "
           "run make test without SANITIZE\n");
    skip();
    return;
#endif
    rl_libero_task *t = rl_libero_task_load(rl_test_libero_data(), 0, RL_LIBERO_SCENE_FULL);
    assert_non_null(t);
    rl_libero_env *e = rl_libero_env_new(t);
    assert_int_equal(rl_libero_env_reset(e, 0), 0);
    assert_null(rl_libero_renderer_new(t, "no_such_camera", 64, 64));
    assert_non_null(strstr(rl_error_message(), "no_such_camera"));
    rl_libero_renderer *r = rl_libero_renderer_new(t, "agentview", 96, 96);
    if (!r) {
        printf("# skip: %s\n", rl_error_message());
        rl_libero_env_free(e);
        rl_libero_task_free(t);
        skip();
        return;
    }
    unsigned char *a = malloc(96 * 96 * 3), *b = malloc(96 * 96 * 3);
    assert_int_equal(rl_libero_render(r, e, a), 0);
    double mean = 0, var = 0;
    for (int i = 0; i < 96 * 96 * 3; i++)
        mean += a[i];
    mean /= 96 * 96 * 3;
    for (int i = 0; i < 96 * 96 * 3; i++)
        var += (a[i] - mean) * (a[i] - mean);
    var /= 96 * 96 * 3;
    printf("# agent view: mean %.1f, std %.1f\n", mean, sqrt(var));
    assert_true(mean > 20 && mean < 235 && var > 100);
    double up[7] = {0, 0, 1, 0, 0, 0, 1};
    for (int s = 0; s < 15; s++)
        assert_int_equal(rl_libero_env_step(e, up, NULL), 0);
    assert_int_equal(rl_libero_render(r, e, b), 0);
    long diff = 0;
    for (int i = 0; i < 96 * 96 * 3; i++)
        diff += a[i] != b[i];
    assert_true(diff > 100);
    char path[] = "/tmp/rlrt-strip-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    const unsigned char *frames[2] = {a, b};
    assert_int_equal(rl_png_write_strip(path, frames, 2, 96, 96), 0);
    unsigned char sig[8];
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    assert_int_equal(fread(sig, 1, 8, f), 8);
    fclose(f);
    assert_memory_equal(sig, "\x89PNG\r\n\x1a\n", 8);
    remove(path);
    free(a), free(b);
    rl_libero_renderer_free(r);
    rl_libero_env_free(e);
    rl_libero_task_free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_missing_data),      cmocka_unit_test(test_corrupt_data),
        cmocka_unit_test(test_init_positions),    cmocka_unit_test(test_determinism),
        cmocka_unit_test(test_success_predicate), cmocka_unit_test(test_controller_reaches_pose),
        cmocka_unit_test(test_bad_actions),       cmocka_unit_test(test_instability),
        cmocka_unit_test(test_expert),            cmocka_unit_test(test_render),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
