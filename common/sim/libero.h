/* common/sim/libero.h — the LIBERO-Object suite simulated in C on MuJoCo.
 *
 * Purpose: the same scenes, initial states, controller, observations and
 * success test as LIBERO (robosuite 1.4, Panda arm, OSC_POSE), with no Python
 * in the loop. The scenes are static files written by `make libero-data`
 * (deploy/libero-data.sh) under a data directory:
 *     <data>/manifest.json                 versions, tasks, sha256 of every file
 *     <data>/libero_object/task_NN/        scene_full.xml, scene_phys.xml,
 *                                          init_states.f64, task.json
 *
 * One task (rl_libero_task) is a loaded mjModel plus its 50 initial states
 * and the names LIBERO uses; it is read-only after loading and shared by any
 * number of environments (rl_libero_env: one mjData each, one thread at a
 * time per env).
 *
 * Semantics, as robosuite 1.4 + LIBERO define them (docs/decisions/libero-equivalence.md
 * lists the details and where they come from):
 *   action (7)   [dx dy dz dax day daz grip] in [-1, 1]: clipped, then scaled
 *                by the OSC output limits (0.05 m, 0.5 rad) into a goal pose
 *                relative to the current end-effector pose; gripper -1 open,
 *                +1 close (the finger command ramps 0.01 per physics step).
 *   step         20 Hz: 25 physics steps of 2 ms; the OSC torques (kp 150,
 *                critically damped, null-space pull to the reset posture,
 *                gravity compensation, clipped to the actuator limits) are
 *                recomputed at every physics step.
 *   observation  RL_LIBERO_PROPRIO_DIM (39): joint_pos 7, cos 7, sin 7,
 *                joint_vel 7, eef_pos 3, eef_quat (xyzw) 4, gripper_qpos 2,
 *                gripper_qvel 2; RL_LIBERO_OBJECT_DIM (98): per object (7, in
 *                LIBERO's order) pos 3, quat xyzw 4, pos and quat in the
 *                gripper frame 3 + 4. Sampled when robosuite samples them
 *                (its observables fire at the first physics step of each
 *                50 ms window, so an observation lags the step's end by up
 *                to 48 ms: we reproduce that, it is what policies see).
 *   success      LIBERO's (In target basket_contain_region): the target
 *                body's position strictly inside the region site's box
 *                (position ± |R·size|, lower z bound lowered by 0.01).
 *   reward       1 on a step that ends in success, else 0 (sparse).
 *
 * Errors: constructors return NULL and functions a negative rl_status, with
 * the message set (rlrt/error.h): a missing or corrupt data file names the
 * file and `make libero-data`; a NaN/Inf action names the component and the
 * step. Nothing here prints. MuJoCo's warning and error hooks are replaced
 * by silent ones that record the message (rl_libero_env_step reports a
 * simulation instability as RL_LIBERO_UNSTABLE, never a process exit).
 */
#ifndef RLRT_SIM_LIBERO_H
#define RLRT_SIM_LIBERO_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define RL_LIBERO_ACTION_DIM 7
#define RL_LIBERO_PROPRIO_DIM 39
#define RL_LIBERO_OBJECT_DIM 98
#define RL_LIBERO_NUM_OBJECTS 7
#define RL_LIBERO_MAX_TASKS 64

/* Scene variants written by `make libero-data`. */
typedef enum rl_libero_scene {
    RL_LIBERO_SCENE_PHYS = 0, /* collision geoms only: fast, same physics */
    RL_LIBERO_SCENE_FULL = 1  /* with visual meshes and textures (rendering) */
} rl_libero_scene;

/* ---- the data directory ------------------------------------------------------------ */

typedef struct rl_libero_suite_info {
    int num_tasks;
    char mujoco_version[32];  /* of the Python side that dumped the scenes */
    char names[RL_LIBERO_MAX_TASKS][128];
    char dirs[RL_LIBERO_MAX_TASKS][64];
} rl_libero_suite_info;

/* Reads <data>/manifest.json. RL_ENOTFOUND / RL_EIO / RL_EPROTO naming the
 * file and `make libero-data`. */
int rl_libero_suite_read(const char *data_dir, rl_libero_suite_info *out);

/* ---- a task: model + initial states + LIBERO's names ------------------------------------ */

typedef struct rl_libero_task rl_libero_task;

/* Loads task `index` (0-based) of <data>: task.json, the scene variant and
 * the initial states; checks the init-state file's size against its shape
 * and the model's nq/nv. Load time is dominated by the scene (physics-only:
 * tens of ms; full: seconds). */
rl_libero_task *rl_libero_task_load(const char *data_dir, int index, rl_libero_scene scene);
void rl_libero_task_free(rl_libero_task *t);
int rl_libero_task_index(const rl_libero_task *t);
int rl_libero_task_num_init_states(const rl_libero_task *t);
const char *rl_libero_task_language(const rl_libero_task *t);
const char *rl_libero_task_name(const rl_libero_task *t);
/* Which slot of the 7 objects is the task's target / the basket. */
int rl_libero_task_target_slot(const rl_libero_task *t);
int rl_libero_task_basket_slot(const rl_libero_task *t);
/* Sets the constraint solver's tolerance (MuJoCo opt.tolerance; LIBERO
 * runs 1e-8). Tests only: not safe while envs of the task step. */
void rl_libero_task_set_solver_tolerance(rl_libero_task *t, double tol);
/* The scene's sensors (robosuite's gripper force/torque): off after load,
 * since no observation reads them (the trajectories do not depend on them);
 * on: the scene exactly as LIBERO steps it (bench_env's physics-only
 * baseline). Not safe while envs of the task step. */
void rl_libero_task_set_sensors(rl_libero_task *t, int on);
/* Height of the target object's top above its body origin, measured once
 * at load by casting a ray down onto it in initial state 0 (the expert's
 * grasp height). */
double rl_libero_task_target_height(const rl_libero_task *t);
/* The target's horizontal axis (in its body frame) the fingers should close
 * across: 0 = x, 1 = y, -1 = either (its footprint is round or square
 * enough); from its collision geoms' extents, at load. */
int rl_libero_task_grasp_axis(const rl_libero_task *t);
/* qpos address of object `slot`'s free joint (tests place objects by hand),
 * or -1 when it has none. */
int rl_libero_task_object_qposadr(const rl_libero_task *t, int slot);
/* Bytes of the mjModel (for memory accounting). */
size_t rl_libero_task_model_bytes(const rl_libero_task *t);

/* ---- an environment -------------------------------------------------------------------- */

typedef struct rl_libero_env rl_libero_env;

/* Outcome flags of one step. */
#define RL_LIBERO_SUCCESS 1   /* the success predicate holds after this step */
#define RL_LIBERO_UNSTABLE 2  /* MuJoCo reported a bad qpos/qvel/qacc or the
                                 state is not finite: the episode must end as
                                 a failure (the state was reset by MuJoCo) */

typedef struct rl_libero_step_info {
    int flags;            /* RL_LIBERO_SUCCESS | RL_LIBERO_UNSTABLE */
    int clipped;          /* action components outside [-1, 1] (clipped) */
    char warning[128];    /* MuJoCo's warning text when UNSTABLE */
} rl_libero_step_info;

/* A fresh environment over `t` (borrowed: must outlive the env). */
rl_libero_env *rl_libero_env_new(const rl_libero_task *t);
void rl_libero_env_free(rl_libero_env *e);
/* Sets initial state `init_index` in [0, num_init_states) the way LIBERO's
 * set_init_state does after a reset: time, qpos, qvel, a forward pass, the
 * controller's goal and null-space posture as robosuite's reset leaves them,
 * the gripper command at 0 and the observation clock. */
int rl_libero_env_reset(rl_libero_env *e, int init_index);
/* One 20 Hz control step. action: 7 values; NaN/Inf → RL_ENUMERIC naming
 * the component and the env's step count (the state is unchanged). */
int rl_libero_env_step(rl_libero_env *e, const double action[RL_LIBERO_ACTION_DIM],
                       rl_libero_step_info *info);
/* The current observation (what LIBERO's env returned last). */
void rl_libero_env_obs(const rl_libero_env *e, double proprio[RL_LIBERO_PROPRIO_DIM],
                       double object[RL_LIBERO_OBJECT_DIM]);
void rl_libero_env_obs_f32(const rl_libero_env *e, float proprio[RL_LIBERO_PROPRIO_DIM],
                           float object[RL_LIBERO_OBJECT_DIM]);
/* The success predicate on the current state. */
int rl_libero_env_success(const rl_libero_env *e);
/* Control steps since the last reset. */
int64_t rl_libero_env_steps(const rl_libero_env *e);
const rl_libero_task *rl_libero_env_task(const rl_libero_env *e);
/* Raw state for tests: nq / nv and copies of time, qpos, qvel. */
int rl_libero_env_nq(const rl_libero_env *e);
int rl_libero_env_nv(const rl_libero_env *e);
void rl_libero_env_state(const rl_libero_env *e, double *time, double *qpos, double *qvel);
/* Overwrites qpos/qvel (tests: hand-placed states) and runs a forward pass. */
int rl_libero_env_set_state(rl_libero_env *e, const double *qpos, const double *qvel);
/* World position of body/site (tests): RL_ENOTFOUND naming it. */
int rl_libero_env_body_pos(const rl_libero_env *e, const char *body, double pos[3]);
/* The end-effector (grip site) position and rotation (row-major 3x3) now. */
void rl_libero_env_eef(const rl_libero_env *e, double pos[3], double rot[9]);
/* The basket region's box now: center, half extents |R·size| (axis-aligned). */
void rl_libero_env_region(const rl_libero_env *e, double center[3], double half[3]);
/* Bytes of the mjData (memory accounting). */
size_t rl_libero_env_data_bytes(const rl_libero_env *e);
/* The whole simulator state one control step depends on (tests: the
 * equivalence test sets LIBERO's state before every step and compares one
 * step, so chaotic contact dynamics cannot hide or fake a difference). */
typedef struct rl_libero_sim_state {
    double time;
    const double *qpos, *qvel, *qacc_warmstart; /* nq, nv, nv */
    double grip_cmd[2];      /* robosuite PandaGripper.current_action */
    double goal_ori[9];      /* the OSC's goal orientation (row-major) */
    double obs_time;         /* robosuite observables' clock */
    int obs_sampled;
    int stale;               /* 1: the controller still holds its reset cache */
} rl_libero_sim_state;
int rl_libero_env_set_sim_state(rl_libero_env *e, const rl_libero_sim_state *s);

/* Forces a NaN into the arm's velocity (tests of instability handling). */
void rl_libero_env_poison(rl_libero_env *e);

/* The physics-only limit (bench_env): record the actuator controls the env
 * applies at each physics step, then replay them through bare mj_step calls
 * from the same initial state, so the same trajectory is integrated without
 * the controller, observations or checks around it.
 * rl_libero_env_record_ctrl: from now on the env writes the nu controls of
 * each physics step to buf (borrowed; cap steps, further steps unrecorded);
 * NULL stops. Returns how many steps were recorded so far (before a NULL
 * call: the count of the recording it ends). */
int rl_libero_env_nu(const rl_libero_env *e);
int rl_libero_env_record_ctrl(rl_libero_env *e, double *buf, int cap);
/* Resets to init_index, then n bare mj_step calls, step i with the controls
 * ctrl + i * nu. RL_ESTATE on a MuJoCo error. */
int rl_libero_env_physics_only(rl_libero_env *e, int init_index, const double *ctrl, int n);

/* ---- the scripted expert ----------------------------------------------------------------
 * Reach above the target, descend, grasp, lift, carry over the basket,
 * release, through the same controller: a pure function of the observation
 * (LIBERO's 39 + 98 vectors), the task's target/basket slots and its own
 * small state (phase and counters), so it runs wherever the observation is
 * (the env or a policy worker). */
typedef struct rl_libero_expert {
    int phase;      /* 0 .. RL_LIBERO_EXPERT_DONE */
    int ticks;      /* steps spent in the phase */
    int target, basket;
    double height;     /* target's top above its origin */
    int axis;          /* rl_libero_task_grasp_axis() */
    double heading;    /* the hand's heading chosen for the grasp */
    int heading_set;
    double grasp[3];   /* target position when the grasp closed */
} rl_libero_expert;

/* target_height, grasp_axis: rl_libero_task_target_height() and
 * rl_libero_task_grasp_axis() of the task. */
void rl_libero_expert_reset(rl_libero_expert *x, int target_slot, int basket_slot, double target_height,
                            int grasp_axis);
/* One action from the observation (float or double vectors). */
void rl_libero_expert_act(rl_libero_expert *x, const float proprio[RL_LIBERO_PROPRIO_DIM],
                          const float object[RL_LIBERO_OBJECT_DIM],
                          float action[RL_LIBERO_ACTION_DIM]);

/* ---- rendering, for people (not for training) --------------------------------------------
 * MuJoCo's offscreen renderer in a headless EGL context (Mesa's software
 * renderer without a GPU). Use a task loaded with RL_LIBERO_SCENE_FULL (the
 * physics-only scene has no visual meshes or textures). One renderer per
 * thread. RL_EUNSUPPORTED with the reason when no EGL/OpenGL is available. */
typedef struct rl_libero_renderer rl_libero_renderer;
/* camera: e.g. "agentview" (LIBERO's agent view), "robot0_eye_in_hand". */
rl_libero_renderer *rl_libero_renderer_new(const rl_libero_task *t, const char *camera, int width, int height);
void rl_libero_renderer_free(rl_libero_renderer *r);
/* The env's current state as RGB, height x width x 3 bytes, rows top-down.
 * The env may be of the physics-only scene of the same task: its pose is
 * then drawn in the renderer's full scene (same joints). */
int rl_libero_render(rl_libero_renderer *r, const rl_libero_env *e, unsigned char *rgb);
/* n frames (height x width x 3 each) side by side as one PNG (atomic). */
int rl_png_write_strip(const char *path, const unsigned char *const *frames, int n, int width, int height);
/* The same PNG in memory: *out (malloc'd, the caller frees) of *len bytes. */
int rl_png_encode_strip(const unsigned char *const *frames, int n, int width, int height, unsigned char **out,
                        size_t *len);

/* ---- an episode replayed into an animated GIF (for people) --------------------------------
 * The env is deterministic: a task, an initial state and the actions as the
 * env applied them (the env role's RL_ENV_ACTIONS, clipped, over its
 * RL_ENV_VALID steps) are the whole episode. A replayer steps it again in
 * the scene it ran in and draws the agent view of the task's full scene
 * (the renderer above), so evaluation episodes get pictures afterwards
 * without rendering while they run. One replayer per thread (it owns a
 * renderer); it owns its tasks. */
typedef struct rl_libero_replayer rl_libero_replayer;
/* Loads task `task` of <data_dir> in `scene` (the one the episode ran in:
 * the physics must be the same), the task's full scene too when that is
 * phys (seconds), and an agent-view renderer of size x size (16..1024).
 * NULL with RL_ERANGE for a task not in the manifest, the loader's errors
 * for missing data, RL_EUNSUPPORTED without EGL. */
rl_libero_replayer *rl_libero_replayer_new(const char *data_dir, int task, rl_libero_scene scene, int size);
void rl_libero_replayer_free(rl_libero_replayer *p);

typedef struct rl_libero_replay_info {
    int steps;     /* actions applied: K, or fewer when the sim became unstable */
    int frames;    /* frames in the GIF */
    int success;   /* the success predicate held after some step (success_once;
                      0 when the episode ended unstable, as the env role counts it) */
    int unstable;  /* a step was unstable: the replay ended there */
    double proprio[RL_LIBERO_PROPRIO_DIM], object[RL_LIBERO_OBJECT_DIM]; /* after the last step */
} rl_libero_replay_info;

/* Frames of a replay of K steps at a frame every `every` steps: the state
 * after the reset, after every every-th step and after the last one
 * (1 + floor(K / every) + (K mod every != 0)); 0 for K or every < 1. */
int rl_libero_replay_frames(int64_t K, int every);
/* Replays one episode of the replayer's task from initial state
 * `init_index` with `actions` (K x 7 floats, as applied) and writes its
 * frames (rl_libero_replay_frames) as an RGB GIF at `path` (atomic;
 * rl_image_gif_write_rgb) that plays in real time (every · 5 cs a frame).
 * Checked before anything runs: init_index in [0, num_init_states)
 * (RL_ERANGE), K in [1, 100000], every in [1, 100000] and at most 4096
 * frames (RL_ERANGE), every action finite (RL_ENUMERIC naming the step and
 * the component). info (may be NULL) receives the outcome. */
int rl_libero_replay_gif(rl_libero_replayer *p, int init_index, const float *actions, int64_t K, int every,
                         const char *path, rl_libero_replay_info *info);

/* A chunk of n actions (n x 7) planned open-loop from one observation: each
 * action is planned with the hand moved by the chunk's earlier deltas. */
void rl_libero_expert_act_chunk(rl_libero_expert *x, const float proprio[RL_LIBERO_PROPRIO_DIM],
                                const float object[RL_LIBERO_OBJECT_DIM], int n, float *actions);

#ifdef __cplusplus
}
#endif
#endif
