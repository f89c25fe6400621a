/* common/sim/sim_internal.h — private to common/sim: the loaded task, the
 * environment's state and the robosuite OSC_POSE controller they share.
 *
 * Invariants: a task is read-only once loaded (many envs, many threads);
 * all ids and addresses were resolved by name and range-checked at load.
 */
#ifndef RLRT_SIM_INTERNAL_H
#define RLRT_SIM_INTERNAL_H

#include <setjmp.h>

#include <mujoco/mujoco.h>

#include "common/sim/libero.h"

#define S_ARM 7
#define S_GRIP 2

/* The controller's view of the arm (robosuite Controller.update). */
typedef struct s_arm_state {
    double ee_pos[3], ee_R[9], ee_vel[3], ee_angvel[3];
    double q[S_ARM], qd[S_ARM];
    double J[6][S_ARM]; /* rows 0-2 position, 3-5 rotation */
    double M[S_ARM * S_ARM];
    double bias[S_ARM];
} s_arm_state;

struct rl_libero_task {
    mjModel *m;
    int index;
    char name[128], language[160];
    double *init;              /* (n_init, 1 + nq + nv) */
    int n_init, init_cols;
    /* robot */
    int arm_qpos[S_ARM], arm_dof[S_ARM], arm_act[S_ARM];
    int grip_qpos[S_GRIP], grip_dof[S_GRIP], grip_act[S_GRIP];
    int eef_site, eef_body;
    /* objects in LIBERO's object-state order */
    int obj_body[RL_LIBERO_NUM_OBJECTS];
    int target_slot, basket_slot, region_site;
    double region_size[3];
    double target_height;
    int grasp_axis;
    /* controller (robosuite OSC_POSE as LIBERO configures it) */
    double kp[6], kd[6], out_max[6], out_min[6], in_max, in_min;
    double tau_lo[S_ARM], tau_hi[S_ARM];
    double initial_joint[S_ARM], reset_goal_ori[9];
    /* robosuite's controller state cached at reset (reset posture): used,
     * unrefreshed, in the first physics step after an init state is set */
    s_arm_state cache;
    double grip_speed, grip_lo[S_GRIP], grip_hi[S_GRIP];
    int substeps;
    double model_dt;
    /* robosuite observables' clock after reset + set_init_state */
    double obs_time0, obs_period;
    int obs_sampled0;
};

/* The raw quantities robosuite's sensors read when they sample. */
typedef struct s_obs_sample {
    double joint_pos[S_ARM], joint_vel[S_ARM];
    double eef_pos[3], eef_quat[4]; /* wxyz (MuJoCo) */
    double grip_qpos[S_GRIP], grip_qvel[S_GRIP];
    double obj_pos[RL_LIBERO_NUM_OBJECTS][3], obj_quat[RL_LIBERO_NUM_OBJECTS][4];
} s_obs_sample;

struct rl_libero_env {
    const rl_libero_task *t;
    mjData *d;
    /* controller state */
    double goal_pos[3], goal_ori[9];
    double grip_cmd[S_GRIP];
    double *fullM;           /* nv x nv scratch */
    double *jacp, *jacr;     /* 3 x nv scratch */
    /* observation clock and last sample */
    double obs_time;
    int obs_sampled;
    s_obs_sample obs;
    int64_t steps;
    int stale;               /* 1 until the first physics step after reset */
    int broken;              /* a MuJoCo error interrupted a step: reset first */
    double *rec;             /* bench: controls per physics step (borrowed) */
    int rec_n, rec_cap;
};

/* The controller: read the arm's state (once per physics step; the
 * kinematics of d must be current: after mj_step1 / mj_forward), set the
 * goal from a 7-action (first physics step of a control step) and compute
 * + apply the torques for this physics step. */
void s_osc_update(rl_libero_env *e, s_arm_state *st);
void s_osc_set_goal(rl_libero_env *e, const s_arm_state *st, const double action[RL_LIBERO_ACTION_DIM]);
void s_osc_apply(rl_libero_env *e, const s_arm_state *st, double grip_action);

/* Silent MuJoCo hooks: warnings and errors are recorded per thread; an
 * error inside an armed section long-jumps back to it. */
void s_mj_hooks_install(void);
const char *s_mj_last_error(void);
/* Runs fn(arg) with MuJoCo's error hook armed: 0, or -1 when MuJoCo raised
 * an error (message: s_mj_last_error()). */
int s_mj_guard(void (*fn)(void *), void *arg);

#endif
