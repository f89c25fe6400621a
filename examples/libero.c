/* rl-libero — the LIBERO-Object env (common/sim/libero.h) on the command line:
 * replays action files, runs the scripted expert, prints task info. The
 * equivalence test (tests/integration/libero_equiv.sh) and people use it.
 *
 *   rl-libero info   --data DIR
 *   rl-libero replay --data DIR --task T --init K --actions A.f64 --out S.f64 [--scene phys|full]
 *   rl-libero expert --data DIR --task T --init K [--steps N] [--actions-out A.f64] [--out S.f64]
 *   rl-libero expert-all --data DIR [--tasks 0-9] [--inits 50] [--steps 300]
 *   rl-libero onestep --data DIR --task T --actions R.f64 --out S.f64
 *   rl-libero render --data DIR --task T --init K --out strip.png [--frames 8] [--every 15]
 *                    [--size 224]   the expert's episode, agent view, as a PNG strip
 *
 * Files are raw little-endian float64. Actions: (N, 7). States: (N + 1,
 * 1 + nq + nv + 39 + 98 + 1) = time, qpos, qvel, proprio, object, success;
 * row 0 is the state after the reset, row i after action i.
 * onestep: R holds records (1 + nq + 2 nv + 2 + 9 + 3 + 7 values: time,
 * qpos, qvel, qacc_warmstart, gripper command, goal orientation, observation
 * clock, sampled flag, stale flag, action); each sets that state, takes one
 * step and writes the resulting state row.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rlrt/error.h"
#include "common/sim/libero.h"

static double s_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int s_write_state(FILE *f, const rl_libero_env *e, int success)
{
    int nq = rl_libero_env_nq(e), nv = rl_libero_env_nv(e);
    size_t n = 1 + (size_t)nq + (size_t)nv + RL_LIBERO_PROPRIO_DIM + RL_LIBERO_OBJECT_DIM + 1;
    double *row = malloc(n * sizeof(double));
    if (!row)
        return -1;
    rl_libero_env_state(e, &row[0], row + 1, row + 1 + nq);
    rl_libero_env_obs(e, row + 1 + nq + nv, row + 1 + nq + nv + RL_LIBERO_PROPRIO_DIM);
    row[n - 1] = success;
    size_t w = fwrite(row, sizeof(double), n, f);
    free(row);
    return w == n ? 0 : -1;
}

static void s_usage(void)
{
    fprintf(stderr, "usage: rl-libero info|replay|expert|expert-all --data DIR [--task T] [--init K]\n"
                    "       [--actions A.f64] [--out S.f64] [--actions-out A.f64] [--steps N]\n"
                    "       [--scene phys|full] [--tasks A-B] [--inits N]\n");
}

static int s_chunk = 1; /* --chunk: actions per expert call (open loop) */

static int s_expert_episode(rl_libero_env *e, int init, int steps, FILE *fa, FILE *fs, int *succ_step)
{
    float chunk[7 * 1000];
    int have = 0, used = 0;
    const rl_libero_task *t = rl_libero_env_task(e);
    rl_libero_expert x;
    if (rl_libero_env_reset(e, init))
        return -1;
    rl_libero_expert_reset(&x, rl_libero_task_target_slot(t), rl_libero_task_basket_slot(t),
                           rl_libero_task_target_height(t), rl_libero_task_grasp_axis(t));
    if (fs && s_write_state(fs, e, 0))
        return -1;
    *succ_step = -1;
    for (int s = 0; s < steps; s++) {
        float p[RL_LIBERO_PROPRIO_DIM], o[RL_LIBERO_OBJECT_DIM], a[RL_LIBERO_ACTION_DIM];
        double ad[RL_LIBERO_ACTION_DIM];
        if (used == have) {
            rl_libero_env_obs_f32(e, p, o);
            rl_libero_expert_act_chunk(&x, p, o, s_chunk, chunk);
            have = s_chunk;
            used = 0;
        }
        memcpy(a, chunk + 7 * used++, sizeof a);
        for (int i = 0; i < RL_LIBERO_ACTION_DIM; i++)
            ad[i] = a[i];
        rl_libero_step_info info;
        if (rl_libero_env_step(e, ad, &info))
            return -1;
        if (fa && fwrite(ad, sizeof(double), RL_LIBERO_ACTION_DIM, fa) != RL_LIBERO_ACTION_DIM)
            return -1;
        if (fs && s_write_state(fs, e, info.flags & RL_LIBERO_SUCCESS))
            return -1;
        if (info.flags & RL_LIBERO_UNSTABLE)
            return 0;
        if ((info.flags & RL_LIBERO_SUCCESS) && *succ_step < 0) {
            *succ_step = s + 1;
            if (!fa && !fs)
                return 0;
        }
        if (*succ_step >= 0 && s + 1 >= *succ_step + 10)
            return 0; /* ten steps past success: enough to see it hold */
    }
    return 0;
}

/* The expert's episode on the full scene, a frame every `every` steps. */
static int s_render(const char *data, int task, int init, const char *out, int frames, int every, int size)
{
    if (!out || frames < 1 || frames > 64 || every < 1 || size < 16 || size > 1024) {
        fprintf(stderr, "rl-libero: render needs --out, --frames in [1, 64], --every >= 1, --size in [16, 1024]\n");
        return 64;
    }
    rl_libero_task *t = rl_libero_task_load(data, task, RL_LIBERO_SCENE_FULL);
    rl_libero_env *e = t ? rl_libero_env_new(t) : NULL;
    rl_libero_renderer *r = e ? rl_libero_renderer_new(t, "agentview", size, size) : NULL;
    unsigned char **px = calloc((size_t)frames, sizeof *px);
    int rc = r && px && !rl_libero_env_reset(e, init) ? 0 : 1;
    rl_libero_expert x;
    if (!rc)
        rl_libero_expert_reset(&x, rl_libero_task_target_slot(t), rl_libero_task_basket_slot(t),
                               rl_libero_task_target_height(t), rl_libero_task_grasp_axis(t));
    int n = 0;
    for (int s = 0; !rc && n < frames; s++) {
        if (s % every == 0) {
            if (!(px[n] = malloc((size_t)size * (size_t)size * 3)) || rl_libero_render(r, e, px[n]))
                rc = 1;
            n++;
        }
        float p[RL_LIBERO_PROPRIO_DIM], o[RL_LIBERO_OBJECT_DIM], a[RL_LIBERO_ACTION_DIM];
        double ad[RL_LIBERO_ACTION_DIM];
        rl_libero_env_obs_f32(e, p, o);
        rl_libero_expert_act(&x, p, o, a);
        for (int i = 0; i < RL_LIBERO_ACTION_DIM; i++)
            ad[i] = a[i];
        if (!rc && rl_libero_env_step(e, ad, NULL))
            rc = 1;
    }
    if (!rc && rl_png_write_strip(out, (const unsigned char *const *)px, n, size, size))
        rc = 1;
    if (!rc)
        printf("wrote %d frames of task %d, initial state %d to %s\n", n, task, init, out);
    for (int i = 0; px && i < frames; i++)
        free(px[i]);
    free(px);
    rl_libero_renderer_free(r);
    rl_libero_env_free(e);
    rl_libero_task_free(t);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        s_usage();
        return 64;
    }
    const char *cmd = argv[1], *data = NULL, *actions = NULL, *out = NULL, *aout = NULL, *tasks = "0-9";
    int task = 0, init = 0, steps = 300, inits = 50;
    rl_libero_scene scene = RL_LIBERO_SCENE_PHYS;
    static const struct option opts[] = {
        {"data", 1, 0, 'd'},  {"task", 1, 0, 't'},        {"init", 1, 0, 'i'},
        {"actions", 1, 0, 'a'}, {"out", 1, 0, 'o'},       {"actions-out", 1, 0, 'A'},
        {"steps", 1, 0, 'n'}, {"scene", 1, 0, 's'},       {"tasks", 1, 0, 'T'},
        {"inits", 1, 0, 'I'}, {"solver-tol", 1, 0, 'S'}, {"chunk", 1, 0, 'C'},
        {"frames", 1, 0, 'F'}, {"every", 1, 0, 'E'}, {"size", 1, 0, 'Z'}, {0, 0, 0, 0}};
    int frames = 8, every = 15, size = 224;
    double solver_tol = -1;
    int c;
    optind = 2;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'd': data = optarg; break;
        case 't': task = atoi(optarg); break;
        case 'i': init = atoi(optarg); break;
        case 'a': actions = optarg; break;
        case 'o': out = optarg; break;
        case 'A': aout = optarg; break;
        case 'n': steps = atoi(optarg); break;
        case 'T': tasks = optarg; break;
        case 'I': inits = atoi(optarg); break;
        case 'S': solver_tol = atof(optarg); break;
        case 'F': frames = atoi(optarg); break;
        case 'E': every = atoi(optarg); break;
        case 'Z': size = atoi(optarg); break;
        case 'C':
            s_chunk = atoi(optarg);
            if (s_chunk < 1 || s_chunk > 1000) {
                fprintf(stderr, "rl-libero: --chunk must be in [1, 1000]\n");
                return 64;
            }
            break;
        case 's':
            if (strcmp(optarg, "full") == 0)
                scene = RL_LIBERO_SCENE_FULL;
            else if (strcmp(optarg, "phys") != 0) {
                fprintf(stderr, "rl-libero: --scene must be phys or full, got '%s'\n", optarg);
                return 64;
            }
            break;
        default: s_usage(); return 64;
        }
    }
    if (!data) {
        fprintf(stderr, "rl-libero: --data DIR is required (make libero-data writes build/libero-data)\n");
        return 64;
    }
    if (strcmp(cmd, "info") == 0) {
        rl_libero_suite_info si;
        if (rl_libero_suite_read(data, &si)) {
            fprintf(stderr, "rl-libero: %s\n", rl_error_message());
            return 1;
        }
        printf("%d tasks (dumped with mujoco %s)\n", si.num_tasks, si.mujoco_version);
        for (int i = 0; i < si.num_tasks; i++)
            printf("  %d  %s\n", i, si.names[i]);
        return 0;
    }
    if (strcmp(cmd, "expert-all") == 0) {
        int a = 0, b = 9;
        if (sscanf(tasks, "%d-%d", &a, &b) < 1) {
            fprintf(stderr, "rl-libero: --tasks must be A-B\n");
            return 64;
        }
        if (b < a)
            b = a;
        int total = 0, ok = 0;
        for (int ti = a; ti <= b; ti++) {
            rl_libero_task *t = rl_libero_task_load(data, ti, scene);
            rl_libero_env *e = t ? rl_libero_env_new(t) : NULL;
            if (!e) {
                fprintf(stderr, "rl-libero: %s\n", rl_error_message());
                return 1;
            }
            int n = inits < rl_libero_task_num_init_states(t) ? inits : rl_libero_task_num_init_states(t);
            int k = 0;
            double t0 = s_now(), len = 0;
            char fails[512] = "";
            for (int i = 0; i < n; i++) {
                int ss;
                if (s_expert_episode(e, i, steps, NULL, NULL, &ss)) {
                    fprintf(stderr, "rl-libero: %s\n", rl_error_message());
                    return 1;
                }
                if (ss >= 0) {
                    k++;
                    len += ss;
                } else if (strlen(fails) < sizeof fails - 8)
                    snprintf(fails + strlen(fails), sizeof fails - strlen(fails), " %d", i);
            }
            printf("task %d (top %.3f axis %d) %-58s %2d/%d  mean steps %.0f  %.1f s%s%s\n", ti,
                   rl_libero_task_target_height(t), rl_libero_task_grasp_axis(t), rl_libero_task_name(t), k, n,
                   k ? len / k : 0.0, s_now() - t0, *fails ? "  failed:" : "", fails);
            fflush(stdout);
            total += n;
            ok += k;
            rl_libero_env_free(e);
            rl_libero_task_free(t);
        }
        printf("expert success %d/%d = %.3f\n", ok, total, total ? (double)ok / total : 0.0);
        return 0;
    }
    rl_libero_task *t = rl_libero_task_load(data, task, scene);
    rl_libero_env *e = t ? rl_libero_env_new(t) : NULL;
    if (!e) {
        fprintf(stderr, "rl-libero: %s\n", rl_error_message());
        return 1;
    }
    if (solver_tol >= 0)
        rl_libero_task_set_solver_tolerance(t, solver_tol);
    int rc = 0;
    if (strcmp(cmd, "replay") == 0) {
        FILE *fa = actions ? fopen(actions, "rb") : NULL;
        FILE *fs = out ? fopen(out, "wb") : NULL;
        if (!fa || !fs) {
            fprintf(stderr, "rl-libero: replay needs readable --actions and writable --out\n");
            return 64;
        }
        if (rl_libero_env_reset(e, init) || s_write_state(fs, e, 0))
            rc = 1;
        double a[RL_LIBERO_ACTION_DIM];
        while (!rc && fread(a, sizeof(double), RL_LIBERO_ACTION_DIM, fa) == RL_LIBERO_ACTION_DIM) {
            rl_libero_step_info info;
            if (rl_libero_env_step(e, a, &info) || s_write_state(fs, e, info.flags & RL_LIBERO_SUCCESS))
                rc = 1;
        }
        fclose(fa);
        if (fclose(fs))
            rc = 1;
    } else if (strcmp(cmd, "onestep") == 0) {
        FILE *fa = actions ? fopen(actions, "rb") : NULL;
        FILE *fs = out ? fopen(out, "wb") : NULL;
        int nq = rl_libero_env_nq(e), nv = rl_libero_env_nv(e);
        size_t n = 1 + (size_t)nq + 2 * (size_t)nv + 2 + 9 + 3 + RL_LIBERO_ACTION_DIM;
        double *r = malloc(n * sizeof(double));
        if (!fa || !fs || !r) {
            fprintf(stderr, "rl-libero: onestep needs readable --actions and writable --out\n");
            return 64;
        }
        if (rl_libero_env_reset(e, 0))
            rc = 1;
        while (!rc && fread(r, sizeof(double), n, fa) == n) {
            const double *x = r + 1 + nq + 2 * nv;
            rl_libero_sim_state st = {r[0], r + 1, r + 1 + nq, r + 1 + nq + nv, {x[0], x[1]}, {0},
                                      x[11], x[12] != 0, x[13] != 0};
            memcpy(st.goal_ori, x + 2, sizeof st.goal_ori);
            rl_libero_step_info info;
            if (rl_libero_env_set_sim_state(e, &st) || rl_libero_env_step(e, x + 14, &info) ||
                s_write_state(fs, e, info.flags & RL_LIBERO_SUCCESS))
                rc = 1;
        }
        free(r);
        fclose(fa);
        if (fclose(fs))
            rc = 1;
    } else if (strcmp(cmd, "render") == 0) {
        rc = s_render(data, task, init, out, frames, every, size);
    } else if (strcmp(cmd, "expert") == 0) {
        FILE *fa = aout ? fopen(aout, "wb") : NULL, *fs = out ? fopen(out, "wb") : NULL;
        int ss;
        rc = s_expert_episode(e, init, steps, fa, fs, &ss) ? 1 : 0;
        if (fa && fclose(fa))
            rc = 1;
        if (fs && fclose(fs))
            rc = 1;
        printf("task %d init %d: %s at step %d\n", task, init, ss >= 0 ? "success" : "failure", ss);
    } else {
        s_usage();
        rc = 64;
    }
    if (rc == 1)
        fprintf(stderr, "rl-libero: %s\n", rl_error_message());
    rl_libero_env_free(e);
    rl_libero_task_free(t);
    return rc;
}
