/* bench_env.c — the C LIBERO-Object env alone (run by bench/bench_env.sh,
 * which adds LIBERO's Python env and the pipeline and writes docs/RESULTS.md).
 *
 *   bench_env DATA ACTIONS_OUT [THREADS [noexpert]]
 *
 * Prints key = value lines:
 *   load_s_phys, load_s_full      task 0 scene load (physics-only / full)
 *   model_mb_phys, model_mb_full  mjModel bytes; data_mb: one env's mjData as
 *                                 reserved (robosuite's njmax/nconmax 5000 size
 *                                 its arena; most of it is never touched)
 *   rss_mb_per_env                resident memory added per env (64 envs)
 *   c_steps_per_s                 one core, physics-only scene, state mode:
 *                                 control steps per CPU second (wall: c_steps_per_wall_s)
 *                                 over 300 seeded random
 *                                 actions from initial state 0 of task 0
 *                                 (written to ACTIONS_OUT for the Python side)
 *   physics_steps_per_s           the same trajectory as bare mj_step calls
 *                                 (the controls the env applied, replayed):
 *                                 physics steps per CPU second; /25:
 *                                 physics_only_control_steps_per_s
 *                                 (the scene as LIBERO steps it: its
 *                                 gripper force/torque sensors on);
 *                                 physics_steps_per_s_sensors_off: the
 *                                 same with them off, as the env runs it
 *   physics_only_same_trajectory  1 when every replay ends at the env's qpos
 *                                 bit for bit (with and without sensors)
 *   env_over_physics_only         c_steps_per_s over the physics-only limit
 *                                 (best of 5 interleaved runs each);
 *                                 env_over_physics_sensors_off: over the
 *                                 bare physics the env itself runs
 *   expert_task_K = s/n           the scripted expert over the 50 initial
 *                                 states of each task (240 steps, success_once)
 *   expert_success                over all 500
 */
#include <pthread.h>
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

/* CPU time of this thread: the steps/s ratio against the Python env is
 * taken per CPU second on one core, so other processes on the machine
 * cannot tilt it either way (wall time is printed too). */
static double s_cpu(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double s_rss_mb(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    long pages = 0, rss = 0;
    if (f) {
        if (fscanf(f, "%ld %ld", &pages, &rss) != 2)
            rss = 0;
        fclose(f);
    }
    return (double)rss * 4096.0 / 1e6;
}

static const char *s_data;
static int s_ok[10];

static void *s_expert_task(void *arg)
{
    int task = (int)(intptr_t)arg;
    rl_libero_task *t = rl_libero_task_load(s_data, task, RL_LIBERO_SCENE_PHYS);
    rl_libero_env *e = t ? rl_libero_env_new(t) : NULL;
    if (!e) {
        fprintf(stderr, "bench_env: %s\n", rl_error_message());
        exit(1);
    }
    for (int init = 0; init < rl_libero_task_num_init_states(t); init++) {
        rl_libero_expert x;
        rl_libero_env_reset(e, init);
        rl_libero_expert_reset(&x, rl_libero_task_target_slot(t), rl_libero_task_basket_slot(t),
                               rl_libero_task_target_height(t), rl_libero_task_grasp_axis(t));
        for (int s = 0; s < 240; s++) {
            float p[39], o[98], a[7];
            double ad[7];
            rl_libero_env_obs_f32(e, p, o);
            rl_libero_expert_act(&x, p, o, a);
            for (int i = 0; i < 7; i++)
                ad[i] = a[i];
            rl_libero_step_info info;
            if (rl_libero_env_step(e, ad, &info))
                break;
            if (info.flags & RL_LIBERO_SUCCESS) {
                s_ok[task]++;
                break;
            }
            if (info.flags & RL_LIBERO_UNSTABLE)
                break;
        }
    }
    rl_libero_env_free(e);
    rl_libero_task_free(t);
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: bench_env DATA ACTIONS_OUT [THREADS]\n");
        return 64;
    }
    s_data = argv[1];
    int threads = argc > 3 ? atoi(argv[3]) : 2;
    if (threads < 1 || threads > 64)
        threads = 2;
    double t0 = s_now();
    rl_libero_task *t = rl_libero_task_load(s_data, 0, RL_LIBERO_SCENE_PHYS);
    double load_phys = s_now() - t0;
    if (!t) {
        fprintf(stderr, "bench_env: %s\n", rl_error_message());
        return 1;
    }
    t0 = s_now();
    rl_libero_task *tf = rl_libero_task_load(s_data, 0, RL_LIBERO_SCENE_FULL);
    double load_full = s_now() - t0;
    if (!tf) {
        fprintf(stderr, "bench_env: %s\n", rl_error_message());
        return 1;
    }
    printf("load_s_phys = %.4f\nload_s_full = %.3f\n", load_phys, load_full);
    printf("model_mb_phys = %.2f\nmodel_mb_full = %.1f\n", rl_libero_task_model_bytes(t) / 1e6,
           rl_libero_task_model_bytes(tf) / 1e6);
    rl_libero_task_free(tf);

    /* memory per env: 64 envs over one task, resident after a reset and a step */
    enum { NE = 64 };
    rl_libero_env *many[NE];
    double rss0 = s_rss_mb();
    for (int i = 0; i < NE; i++) {
        many[i] = rl_libero_env_new(t);
        double z[7] = {0};
        if (!many[i] || rl_libero_env_reset(many[i], i % 50) || rl_libero_env_step(many[i], z, NULL)) {
            fprintf(stderr, "bench_env: %s\n", rl_error_message());
            return 1;
        }
    }
    printf("data_mb = %.2f\nrss_mb_per_env = %.2f\n", rl_libero_env_data_bytes(many[0]) / 1e6,
           (s_rss_mb() - rss0) / NE);
    for (int i = 1; i < NE; i++)
        rl_libero_env_free(many[i]);

    /* steps/s on one core with seeded random actions (also for the Python side) */
    rl_libero_env *e = many[0];
    enum { STEPS = 300 };
    static double acts[STEPS][7];
    unsigned seed = 12345;
    for (int s = 0; s < STEPS; s++)
        for (int i = 0; i < 7; i++)
            acts[s][i] = 2.0 * rand_r(&seed) / RAND_MAX - 1.0;
    FILE *f = fopen(argv[2], "wb");
    if (!f || fwrite(acts, sizeof acts, 1, f) != 1 || fclose(f)) {
        fprintf(stderr, "bench_env: cannot write %s\n", argv[2]);
        return 1;
    }
    /* the physics-only limit: the controls the env applied at each of its
     * physics steps, replayed through bare mj_step calls (same trajectory) */
    int nu = rl_libero_env_nu(e), nphys = STEPS * 25;
    double *ctrl = malloc(sizeof(double) * (size_t)nphys * (size_t)nu);
    int nq = rl_libero_env_nq(e);
    double *q_env = malloc(sizeof(double) * (size_t)nq), *q_bare = malloc(sizeof(double) * (size_t)nq);
    if (!ctrl || !q_env || !q_bare) {
        fprintf(stderr, "bench_env: out of memory\n");
        return 1;
    }
    rl_libero_env_reset(e, 0);
    rl_libero_env_record_ctrl(e, ctrl, nphys);
    for (int s = 0; s < STEPS; s++)
        rl_libero_env_step(e, acts[s], NULL);
    if (rl_libero_env_record_ctrl(e, NULL, 0) != nphys) {
        fprintf(stderr, "bench_env: the env did not run %d physics steps\n", nphys);
        return 1;
    }
    rl_libero_env_state(e, NULL, q_env, NULL);
    /* best of 5 interleaved runs each: the env, the bare physics of the
     * scene as LIBERO steps it (sensors on), the bare physics the env runs
     * (sensors off: no observation reads them) */
    double best = 0, best_wall = 0, best_phys = 0, best_phys_env = 0;
    int same = 1;
    for (int rep = 0; rep < 5; rep++) {
        rl_libero_env_reset(e, 0);
        t0 = s_now();
        double c0 = s_cpu();
        for (int s = 0; s < STEPS; s++)
            rl_libero_env_step(e, acts[s], NULL);
        double sps = STEPS / (s_cpu() - c0), wps = STEPS / (s_now() - t0);
        best = sps > best ? sps : best;
        best_wall = wps > best_wall ? wps : best_wall;
        for (int on = 1; on >= 0; on--) {
            rl_libero_task_set_sensors(t, on);
            c0 = s_cpu();
            if (rl_libero_env_physics_only(e, 0, ctrl, nphys)) {
                fprintf(stderr, "bench_env: %s\n", rl_error_message());
                return 1;
            }
            double pps = nphys / (s_cpu() - c0);
            double *b = on ? &best_phys : &best_phys_env;
            *b = pps > *b ? pps : *b;
            rl_libero_env_state(e, NULL, q_bare, NULL);
            same &= memcmp(q_env, q_bare, sizeof(double) * (size_t)nq) == 0;
        }
        rl_libero_task_set_sensors(t, 0);
    }
    printf("c_steps_per_s = %.1f\nc_steps_per_wall_s = %.1f\n", best, best_wall);
    printf("physics_steps_per_s = %.0f\nphysics_only_control_steps_per_s = %.1f\n", best_phys, best_phys / 25);
    printf("physics_steps_per_s_sensors_off = %.0f\n", best_phys_env);
    printf("physics_only_same_trajectory = %d\n", same);
    printf("env_over_physics_only = %.3f\n", best / (best_phys / 25));
    printf("env_over_physics_sensors_off = %.3f\n", best / (best_phys_env / 25));
    free(ctrl);
    free(q_env);
    free(q_bare);
    rl_libero_env_free(e);
    rl_libero_task_free(t);
    fflush(stdout);
    if (argc > 4 && strcmp(argv[4], "noexpert") == 0)
        return 0;

    /* the expert over 10 x 50 initial states, `threads` tasks at a time */
    t0 = s_now();
    for (int b = 0; b < 10; b += threads) {
        pthread_t th[64];
        int n = 0;
        for (int k = b; k < 10 && k < b + threads; k++)
            if (pthread_create(&th[n++], NULL, s_expert_task, (void *)(intptr_t)k)) {
                fprintf(stderr, "bench_env: pthread_create failed\n");
                return 1;
            }
        for (int i = 0; i < n; i++)
            pthread_join(th[i], NULL);
    }
    int total = 0;
    for (int k = 0; k < 10; k++) {
        printf("expert_task_%d = %d/50\n", k, s_ok[k]);
        total += s_ok[k];
    }
    printf("expert_success = %.4f\nexpert_wall_s = %.1f\n", total / 500.0, s_now() - t0);
    return 0;
}
