/* test_sim_replay.c — an episode replayed into an animated GIF
 * (common/sim/libero.h rl_libero_replay_gif) on the real scenes of
 * `make libero-data` (LIBERO_DATA, default build/libero-data): a scripted-
 * expert episode run in the physics-only env, its applied actions replayed
 * give the same outcome and the same final object state (determinism), and
 * a GIF that giflib reads back with the expected frames; bad inputs are
 * errors that name the problem. Skipped without the data, without EGL, and
 * under AddressSanitizer (Mesa's software renderer is not instrumented),
 * each with the reason. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/common/libero_data.h"
#include <gif_lib.h>

#include "rlrt/error.h"
#include "common/sim/libero.h"

#define assert_msg_contains(s)                                                          \
    do {                                                                                \
        if (!strstr(rl_error_message(), (s)))                                           \
            fail_msg("message '%s' lacks '%s'", rl_error_message(), (s));              \
    } while (0)

/* A replayer of `task`, or NULL when this build or machine cannot render
 * (the caller skips; the reason is printed). */
static rl_libero_replayer *s_replayer(int task, int size)
{
#if defined(__SANITIZE_ADDRESS__)
    (void)task, (void)size;
    printf("# skip: rendering is not run under AddressSanitizer (Mesa is not instrumented); "
           "run make test without SANITIZE\n");
    return NULL;
#else
    rl_libero_replayer *p = rl_libero_replayer_new(rl_test_libero_data(), task, RL_LIBERO_SCENE_PHYS, size);
    if (!p && rl_error_code() == RL_EUNSUPPORTED)
        printf("# skip: %s\n", rl_error_message());
    else if (!p)
        fail_msg("%s", rl_error_message());
    return p;
#endif
}

/* One episode of the scripted expert in the physics-only env, recorded as
 * the env role reports it: the actions as applied (the six pose components
 * clipped to [-1, 1]) until the first success or `max` steps. */
typedef struct s_episode {
    float *actions; /* (K, 7) */
    int K, success;
    double object[RL_LIBERO_OBJECT_DIM], proprio[RL_LIBERO_PROPRIO_DIM];
} s_episode;

static void s_run_expert(int task, int init, int max, s_episode *ep)
{
    memset(ep, 0, sizeof *ep);
    rl_libero_task *t = rl_libero_task_load(rl_test_libero_data(), task, RL_LIBERO_SCENE_PHYS);
    if (!t)
        fail_msg("%s", rl_error_message());
    rl_libero_env *e = rl_libero_env_new(t);
    assert_non_null(e);
    assert_int_equal(rl_libero_env_reset(e, init), 0);
    rl_libero_expert x;
    rl_libero_expert_reset(&x, rl_libero_task_target_slot(t), rl_libero_task_basket_slot(t),
                           rl_libero_task_target_height(t), rl_libero_task_grasp_axis(t));
    ep->actions = malloc(sizeof(float) * 7 * (size_t)max);
    for (int s = 0; s < max && !ep->success; s++) {
        float p[39], o[98], a[7];
        double ad[7];
        rl_libero_env_obs_f32(e, p, o);
        rl_libero_expert_act(&x, p, o, a);
        for (int i = 0; i < 7; i++) {
            float v = i < 6 && a[i] > 1.0f ? 1.0f : i < 6 && a[i] < -1.0f ? -1.0f : a[i];
            ep->actions[ep->K * 7 + i] = v;
            ad[i] = v;
        }
        rl_libero_step_info info;
        assert_int_equal(rl_libero_env_step(e, ad, &info), 0);
        ep->K++;
        ep->success = (info.flags & RL_LIBERO_SUCCESS) != 0;
    }
    rl_libero_env_obs(e, ep->proprio, ep->object);
    rl_libero_env_free(e);
    rl_libero_task_free(t);
}

static void test_frame_count(void **state)
{
    (void)state;
    assert_int_equal(rl_libero_replay_frames(240, 4), 61);  /* 0, 4, ..., 240 */
    assert_int_equal(rl_libero_replay_frames(241, 4), 62);  /* + the last step */
    assert_int_equal(rl_libero_replay_frames(3, 4), 2);     /* the start and the end */
    assert_int_equal(rl_libero_replay_frames(1, 1), 2);
    assert_int_equal(rl_libero_replay_frames(0, 4), 0);
    assert_int_equal(rl_libero_replay_frames(10, 0), 0);
}

/* Bad tasks and sizes fail before anything is rendered (no EGL needed). */
static void test_bad_replayer(void **state)
{
    (void)state;
    RL_NEED_LIBERO_DATA();
    assert_null(rl_libero_replayer_new(rl_test_libero_data(), 10, RL_LIBERO_SCENE_PHYS, 64));
    assert_int_equal(rl_error_code(), RL_ERANGE);
    assert_msg_contains("task 10");
    assert_null(rl_libero_replayer_new(rl_test_libero_data(), -1, RL_LIBERO_SCENE_PHYS, 64));
    assert_int_equal(rl_error_code(), RL_ERANGE);
    assert_null(rl_libero_replayer_new(rl_test_libero_data(), 0, RL_LIBERO_SCENE_PHYS, 8));
    assert_int_equal(rl_error_code(), RL_EINVAL);
    assert_null(rl_libero_replayer_new("/nonexistent/libero", 0, RL_LIBERO_SCENE_PHYS, 64));
    assert_msg_contains("make libero-data");
}

static int s_gif_frames(const char *path, int *w, int *h, double *diff_first_last)
{
    int err = 0;
    GifFileType *g = DGifOpenFileName(path, &err);
    if (!g)
        fail_msg("%s: %s", path, GifErrorString(err));
    assert_int_equal(DGifSlurp(g), GIF_OK);
    int n = g->ImageCount;
    *w = g->SWidth;
    *h = g->SHeight;
    /* the share of pixels whose colour differs between the first and last frame */
    const SavedImage *a = &g->SavedImages[0], *b = &g->SavedImages[n - 1];
    long diff = 0, px = (long)*w * *h;
    for (long i = 0; i < px; i++) {
        const GifColorType *ca = &a->ImageDesc.ColorMap->Colors[a->RasterBits[i]];
        const GifColorType *cb = &b->ImageDesc.ColorMap->Colors[b->RasterBits[i]];
        diff += abs(ca->Red - cb->Red) + abs(ca->Green - cb->Green) + abs(ca->Blue - cb->Blue) > 30;
    }
    *diff_first_last = (double)diff / (double)px;
    DGifCloseFile(g, &err);
    return n;
}

/* The expert's episode replayed: same success, same final state to the
 * bit, and a GIF of the expected frames in which the scene changes. */
static void test_replay_expert_episode(void **state)
{
    (void)state;
    RL_NEED_LIBERO_DATA();
    const int task = 2, init = 5, every = 4, size = 64;
    s_episode ep;
    s_run_expert(task, init, 240, &ep);
    if (!ep.success)
        fail_msg("the expert failed task %d initial state %d", task, init);
    rl_libero_replayer *p = s_replayer(task, size);
    if (!p) {
        free(ep.actions);
        skip();
        return;
    }
    char path[] = "/tmp/rlrt_replay_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    rl_libero_replay_info info;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    if (rl_libero_replay_gif(p, init, ep.actions, ep.K, every, path, &info))
        fail_msg("%s", rl_error_message());
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double dt = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    int want = 1 + ep.K / every + (ep.K % every != 0);
    printf("# task %d init %d: %d expert steps, %d frames, %.2f s to replay and write\n", task, init, ep.K,
           info.frames, dt);
    assert_int_equal(info.steps, ep.K);
    assert_int_equal(info.frames, want);
    assert_int_equal(info.success, 1);
    assert_int_equal(info.unstable, 0);
    assert_memory_equal(info.object, ep.object, sizeof ep.object);
    assert_memory_equal(info.proprio, ep.proprio, sizeof ep.proprio);
    int w, h;
    double moved;
    assert_int_equal(s_gif_frames(path, &w, &h, &moved), want);
    assert_int_equal(w, size);
    assert_int_equal(h, size);
    printf("# %.1f%% of the pixels changed between the first and last frame\n", 100 * moved);
    assert_true(moved > 0.01);

    /* a prefix of the episode: the object has not reached the basket */
    const int half = 20;
    if (rl_libero_replay_gif(p, init, ep.actions, half, every, path, &info))
        fail_msg("%s", rl_error_message());
    assert_int_equal(info.steps, half);
    assert_int_equal(info.success, 0);
    assert_int_equal(info.frames, 1 + half / every);
    assert_memory_not_equal(info.object, ep.object, sizeof ep.object);

    /* bad inputs: errors naming the problem, the GIF left as it was */
    struct stat before, after;
    assert_int_equal(stat(path, &before), 0);
    assert_int_equal(rl_libero_replay_gif(p, 50, ep.actions, ep.K, every, path, &info), RL_ERANGE);
    assert_msg_contains("initial state 50");
    assert_int_equal(rl_libero_replay_gif(p, -1, ep.actions, ep.K, every, path, &info), RL_ERANGE);
    assert_int_equal(rl_libero_replay_gif(p, init, ep.actions, 0, every, path, &info), RL_ERANGE);
    assert_int_equal(rl_libero_replay_gif(p, init, ep.actions, ep.K, 0, path, &info), RL_ERANGE);
    assert_int_equal(rl_libero_replay_gif(p, init, ep.actions, 8, 1, NULL, &info), RL_EINVAL);
    ep.actions[5 * 7 + 3] = NAN;
    assert_int_equal(rl_libero_replay_gif(p, init, ep.actions, ep.K, every, path, &info), RL_ENUMERIC);
    assert_msg_contains("action[3] of step 5 is NaN");
    ep.actions[5 * 7 + 3] = INFINITY;
    assert_int_equal(rl_libero_replay_gif(p, init, ep.actions, ep.K, every, path, &info), RL_ENUMERIC);
    assert_msg_contains("is Inf");
    assert_int_equal(stat(path, &after), 0);
    assert_int_equal(before.st_size, after.st_size);
    assert_int_equal(before.st_mtim.tv_nsec, after.st_mtim.tv_nsec);
    unlink(path);
    rl_libero_replayer_free(p);
    free(ep.actions);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_frame_count),
        cmocka_unit_test(test_bad_replayer),
        cmocka_unit_test(test_replay_expert_episode),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
