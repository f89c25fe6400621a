/* replay.c — an episode replayed into an animated GIF (common/sim/libero.h):
 * the env is deterministic, so a task, an initial state and the actions as
 * the env applied them are the episode; it is stepped again in the scene it
 * ran in, and the agent view of the task's full scene is rendered every
 * `every` steps (render.c) into an RGB GIF (common/image/image.h). For people, not
 * for training. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/core/util.h"
#include "rlrt/error.h"
#include "common/image/image.h"
#include "common/sim/sim_internal.h"

#define S_MAX_FRAMES 4096
#define S_MAX_STEPS 100000

struct rl_libero_replayer {
    rl_libero_task *sim;  /* the scene the episode ran in */
    rl_libero_task *full; /* the full scene, when sim is physics-only (else NULL: sim is full) */
    rl_libero_renderer *r;
    int size;
};

rl_libero_replayer *rl_libero_replayer_new(const char *data_dir, int task, rl_libero_scene scene, int size)
{
    if (scene != RL_LIBERO_SCENE_PHYS && scene != RL_LIBERO_SCENE_FULL) {
        rl_error_set(RL_EINVAL, "replay: unknown scene %d", (int)scene);
        return NULL;
    }
    if (size < 16 || size > 1024) {
        rl_error_set(RL_EINVAL, "replay: frames of %d pixels a side (need 16..1024)", size);
        return NULL;
    }
    rl_libero_replayer *p = rl_zalloc(sizeof *p, NULL);
    if (!p)
        return NULL;
    p->size = size;
    /* rl_libero_task_load checks the task against the manifest */
    if (!(p->sim = rl_libero_task_load(data_dir, task, scene)) ||
        (scene == RL_LIBERO_SCENE_PHYS && !(p->full = rl_libero_task_load(data_dir, task, RL_LIBERO_SCENE_FULL)))) {
        rl_error_wrap(rl_error_code(), "replay of task %d", task);
        rl_libero_replayer_free(p);
        return NULL;
    }
    /* The models are the replayer's own, so its renderer may differ from
     * the scene's visual settings: an offscreen buffer of the frame's size
     * without multisampling (Mesa's software renderer: ~2x faster a frame;
     * the GIF's palette hides the jagged edges) */
    mjModel *m = (p->full ? p->full : p->sim)->m;
    m->vis.quality.offsamples = 0;
    m->vis.global.offwidth = m->vis.global.offheight = size;
    if (!(p->r = rl_libero_renderer_new(p->full ? p->full : p->sim, "agentview", size, size))) {
        rl_error_wrap(rl_error_code(), "replay of task %d", task);
        rl_libero_replayer_free(p);
        return NULL;
    }
    return p;
}

void rl_libero_replayer_free(rl_libero_replayer *p)
{
    if (!p)
        return;
    rl_libero_renderer_free(p->r);
    rl_libero_task_free(p->full);
    rl_libero_task_free(p->sim);
    free(p);
}

int rl_libero_replay_frames(int64_t K, int every)
{
    if (K < 1 || every < 1)
        return 0;
    int64_t n = 1 + K / every + (K % every != 0);
    return n > S_MAX_FRAMES ? S_MAX_FRAMES + 1 : (int)n;
}

int rl_libero_replay_gif(rl_libero_replayer *p, int init_index, const float *actions, int64_t K, int every,
                         const char *path, rl_libero_replay_info *info)
{
    if (info)
        memset(info, 0, sizeof *info);
    if (!p || !actions || !path || !*path)
        return rl_error_set(RL_EINVAL, "replay: NULL argument");
    const int task = rl_libero_task_index(p->sim), n_init = rl_libero_task_num_init_states(p->sim);
    if (init_index < 0 || init_index >= n_init)
        return rl_error_set(RL_ERANGE, "replay: initial state %d of task %d (it has %d)", init_index, task, n_init);
    if (K < 1 || K > S_MAX_STEPS)
        return rl_error_set(RL_ERANGE, "replay: %lld steps (need 1..%d)", (long long)K, S_MAX_STEPS);
    if (every < 1 || every > S_MAX_STEPS)
        return rl_error_set(RL_ERANGE, "replay: a frame every %d steps (need 1..%d)", every, S_MAX_STEPS);
    const int n_frames = rl_libero_replay_frames(K, every);
    if (n_frames > S_MAX_FRAMES)
        return rl_error_set(RL_ERANGE, "replay: %lld steps at a frame every %d steps is more than %d frames",
                            (long long)K, every, S_MAX_FRAMES);
    for (int64_t k = 0; k < K; k++) /* before anything is simulated */
        for (int d = 0; d < RL_LIBERO_ACTION_DIM; d++)
            if (!isfinite(actions[k * RL_LIBERO_ACTION_DIM + d]))
                return rl_error_set(RL_ENUMERIC, "replay of task %d, initial state %d: action[%d] of step %lld is %s",
                                    task, init_index, d, (long long)k,
                                    isnan(actions[k * RL_LIBERO_ACTION_DIM + d]) ? "NaN" : "Inf");
    const size_t fbytes = (size_t)p->size * (size_t)p->size * 3;
    unsigned char *frames = malloc(fbytes * (size_t)n_frames);
    rl_libero_env *e = rl_libero_env_new(p->sim);
    int rc = frames && e ? RL_OK : rl_error_set(RL_ENOMEM, "replay: out of memory");
    if (!rc)
        rc = rl_libero_env_reset(e, init_index);
    int nf = 0, success = 0, unstable = 0;
    int64_t k = 0;
    if (!rc)
        rc = rl_libero_render(p->r, e, frames + fbytes * (size_t)nf++);
    for (; !rc && k < K && !unstable; k++) {
        double a[RL_LIBERO_ACTION_DIM];
        for (int d = 0; d < RL_LIBERO_ACTION_DIM; d++)
            a[d] = actions[k * RL_LIBERO_ACTION_DIM + d];
        rl_libero_step_info si;
        if ((rc = rl_libero_env_step(e, a, &si)))
            break;
        success |= (si.flags & RL_LIBERO_SUCCESS) != 0;
        /* an unstable step resets the state (the env role ends the episode as
         * a failure there): the last frame is that step's */
        unstable = (si.flags & RL_LIBERO_UNSTABLE) != 0;
        if (unstable)
            success = 0;
        if (((k + 1) % every == 0 || k + 1 == K || unstable) && nf < n_frames)
            rc = rl_libero_render(p->r, e, frames + fbytes * (size_t)nf++);
    }
    if (!rc) {
        int delay = every * 5; /* 20 Hz control: real time */
        rc = rl_image_gif_write_rgb(path, frames, nf, p->size, p->size, delay > 65535 ? 65535 : delay);
    }
    if (!rc && info) {
        info->steps = (int)k;
        info->frames = nf;
        info->success = success;
        info->unstable = unstable;
        rl_libero_env_obs(e, info->proprio, info->object);
    }
    if (rc)
        rc = rl_error_wrap(rc, "replay of task %d, initial state %d", task, init_index);
    rl_libero_env_free(e);
    free(frames);
    return rc;
}
