/* libero_task.c — loading a LIBERO-Object task from the data directory that
 * `make libero-data` writes (see common/sim/libero.h): manifest.json,
 * task.json, the scene and the initial states; every name is resolved in the
 * model and every size checked, so the step loop trusts its indices. */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "common/core/util.h"
#include "rlrt/error.h"
#include "common/sim/sim_internal.h"

#define S_FIX "; run: make libero-data"

/* ---- MuJoCo hooks -------------------------------------------------------------------- */

static _Thread_local jmp_buf *s_mj_jump;
static _Thread_local char s_mj_err[256];
static pthread_once_t s_hooks_once = PTHREAD_ONCE_INIT;

static void s_mj_warning(const char *msg)
{
    (void)msg; /* counted in mjData.warning; the step reports it */
}

static void s_mj_error(const char *msg)
{
    snprintf(s_mj_err, sizeof s_mj_err, "%s", msg ? msg : "unknown MuJoCo error");
    if (s_mj_jump)
        longjmp(*s_mj_jump, 1);
    /* Outside an armed section MuJoCo would exit; there is nothing safe to
     * return to, so fail loudly in the one place a library may. */
    abort();
}

static void s_hooks_init(void)
{
    mju_user_warning = s_mj_warning;
    mju_user_error = s_mj_error;
}

void s_mj_hooks_install(void)
{
    pthread_once(&s_hooks_once, s_hooks_init);
}

const char *s_mj_last_error(void)
{
    return s_mj_err;
}

int s_mj_guard(void (*fn)(void *), void *arg)
{
    jmp_buf jb;
    jmp_buf *volatile prev = s_mj_jump;
    if (setjmp(jb)) {
        s_mj_jump = prev;
        return -1;
    }
    s_mj_jump = &jb;
    fn(arg);
    s_mj_jump = prev;
    return 0;
}

typedef struct s_load_args {
    const char *path;
    char *err;
    int errlen;
    mjModel *m;
} s_load_args;

static void s_load(void *arg)
{
    s_load_args *a = arg;
    a->m = mj_loadXML(a->path, NULL, a->err, a->errlen);
}

/* ---- JSON helpers ------------------------------------------------------------------------ */

static int s_num_array(const char *file, json_t *o, const char *key, double *out, size_t n)
{
    json_t *a = json_object_get(o, key);
    if (!json_is_array(a) || json_array_size(a) != n)
        return rl_error_set(RL_EPROTO, "%s: '%s' must be a list of %zu numbers" S_FIX, file, key, n);
    for (size_t i = 0; i < n; i++) {
        json_t *v = json_array_get(a, i);
        if (!json_is_number(v) || !isfinite(json_number_value(v)))
            return rl_error_set(RL_EPROTO, "%s: %s[%zu] must be a finite number" S_FIX, file, key, i);
        out[i] = json_number_value(v);
    }
    return RL_OK;
}

static int s_num(const char *file, json_t *o, const char *key, double *out)
{
    json_t *v = json_object_get(o, key);
    if (!json_is_number(v) || !isfinite(json_number_value(v)))
        return rl_error_set(RL_EPROTO, "%s: '%s' must be a finite number" S_FIX, file, key);
    *out = json_number_value(v);
    return RL_OK;
}

static const char *s_str(const char *file, json_t *o, const char *key)
{
    json_t *v = json_object_get(o, key);
    if (!json_is_string(v)) {
        rl_error_set(RL_EPROTO, "%s: '%s' must be a string" S_FIX, file, key);
        return NULL;
    }
    return json_string_value(v);
}

static json_t *s_load_json(const char *path)
{
    json_error_t je;
    FILE *f = fopen(path, "rb");
    if (!f) {
        rl_error_set(errno == ENOENT ? RL_ENOTFOUND : RL_EIO, "%s: %s" S_FIX, path, strerror(errno));
        return NULL;
    }
    json_t *j = json_loadf(f, 0, &je);
    fclose(f);
    if (!j)
        rl_error_set(RL_EPROTO, "%s:%d: %s" S_FIX, path, je.line, je.text);
    else if (!json_is_object(j)) {
        json_decref(j);
        j = NULL;
        rl_error_set(RL_EPROTO, "%s: not a JSON object" S_FIX, path);
    }
    return j;
}

int rl_libero_suite_read(const char *data_dir, rl_libero_suite_info *out)
{
    char path[4096];
    if (!data_dir || !out)
        return rl_error_set(RL_EINVAL, "rl_libero_suite_read: NULL argument");
    snprintf(path, sizeof path, "%s/manifest.json", data_dir);
    json_t *j = s_load_json(path);
    if (!j)
        return rl_error_code();
    memset(out, 0, sizeof *out);
    int rc = RL_OK;
    json_t *tasks = json_object_get(j, "tasks");
    const char *mv = s_str(path, j, "mujoco_version");
    if (!mv)
        rc = rl_error_code();
    else if (!json_is_array(tasks) || json_array_size(tasks) == 0 ||
             json_array_size(tasks) > RL_LIBERO_MAX_TASKS)
        rc = rl_error_set(RL_EPROTO, "%s: 'tasks' must be a list of 1..%d tasks" S_FIX, path,
                          RL_LIBERO_MAX_TASKS);
    else {
        snprintf(out->mujoco_version, sizeof out->mujoco_version, "%s", mv);
        out->num_tasks = (int)json_array_size(tasks);
        for (int i = 0; i < out->num_tasks && !rc; i++) {
            json_t *t = json_array_get(tasks, (size_t)i);
            const char *name = json_is_object(t) ? s_str(path, t, "name") : NULL;
            const char *dir = name ? s_str(path, t, "dir") : NULL;
            if (!dir)
                rc = rl_error_set(RL_EPROTO, "%s: tasks[%d] needs 'name' and 'dir'" S_FIX, path, i);
            else if (strlen(dir) >= sizeof out->dirs[i] || strstr(dir, ".."))
                rc = rl_error_set(RL_EPROTO, "%s: tasks[%d].dir '%.80s' is not a task folder" S_FIX,
                                  path, i, dir);
            else {
                snprintf(out->names[i], sizeof out->names[i], "%s", name);
                snprintf(out->dirs[i], sizeof out->dirs[i], "%s", dir);
            }
        }
    }
    json_decref(j);
    return rc;
}

/* ---- the task ------------------------------------------------------------------------- */

static int s_id(const mjModel *m, int type, const char *file, const char *kind, const char *name,
                int *out)
{
    int id = name ? mj_name2id(m, type, name) : -1;
    if (id < 0)
        return rl_error_set(RL_ENOTFOUND, "%s: %s '%s' is not in the scene" S_FIX, file, kind,
                            name ? name : "(null)");
    *out = id;
    return RL_OK;
}

static int s_name_list(const mjModel *m, int type, const char *file, json_t *o, const char *key,
                       int *ids, int n)
{
    json_t *a = json_object_get(o, key);
    if (!json_is_array(a) || json_array_size(a) != (size_t)n)
        return rl_error_set(RL_EPROTO, "%s: '%s' must list %d names" S_FIX, file, key, n);
    for (int i = 0; i < n; i++) {
        json_t *v = json_array_get(a, (size_t)i);
        int rc = s_id(m, type, file, key, json_is_string(v) ? json_string_value(v) : NULL, &ids[i]);
        if (rc)
            return rc;
    }
    return RL_OK;
}

static int s_read_init(rl_libero_task *t, const char *dir, json_t *meta, const char *file)
{
    json_t *is = json_object_get(meta, "init_states");
    json_t *rows = json_object_get(is, "rows"), *cols = json_object_get(is, "cols");
    if (!json_is_integer(rows) || !json_is_integer(cols) || json_integer_value(rows) < 1 ||
        json_integer_value(rows) > 100000 || json_integer_value(cols) != 1 + t->m->nq + t->m->nv)
        return rl_error_set(RL_EPROTO,
                            "%s: init_states needs rows in [1, 100000] and cols = 1 + nq + nv = %d" S_FIX,
                            file, (int)(1 + t->m->nq + t->m->nv));
    t->n_init = (int)json_integer_value(rows);
    t->init_cols = (int)json_integer_value(cols);
    char path[4200];
    snprintf(path, sizeof path, "%s/init_states.f64", dir);
    FILE *f = fopen(path, "rb");
    if (!f)
        return rl_error_set(errno == ENOENT ? RL_ENOTFOUND : RL_EIO, "%s: %s" S_FIX, path, strerror(errno));
    size_t n = (size_t)t->n_init * (size_t)t->init_cols;
    t->init = malloc(n * sizeof(double));
    if (!t->init) {
        fclose(f);
        return rl_error_set(RL_ENOMEM, "%s: out of memory", path);
    }
    size_t got = fread(t->init, sizeof(double), n, f);
    int extra = fgetc(f);
    fclose(f);
    if (got != n || extra != EOF)
        return rl_error_set(RL_EPROTO, "%s: expected exactly %zu float64 values (%d x %d)" S_FIX, path,
                            n, t->n_init, t->init_cols);
    for (size_t i = 0; i < n; i++)
        if (!isfinite(t->init[i]))
            return rl_error_set(RL_EPROTO, "%s: value %zu is not finite" S_FIX, path, i);
    return RL_OK;
}

static int s_read_meta(rl_libero_task *t, json_t *meta, const char *file)
{
    const mjModel *m = t->m;
    int rc;
    const char *s;
    if (!(s = s_str(file, meta, "name")))
        return rl_error_code();
    snprintf(t->name, sizeof t->name, "%s", s);
    if (!(s = s_str(file, meta, "language")))
        return rl_error_code();
    snprintf(t->language, sizeof t->language, "%s", s);
    int joints[S_ARM], gj[S_GRIP];
    if ((rc = s_name_list(m, mjOBJ_JOINT, file, meta, "arm_joints", joints, S_ARM)) ||
        (rc = s_name_list(m, mjOBJ_JOINT, file, meta, "gripper_joints", gj, S_GRIP)) ||
        (rc = s_name_list(m, mjOBJ_ACTUATOR, file, meta, "arm_actuators", t->arm_act, S_ARM)) ||
        (rc = s_name_list(m, mjOBJ_ACTUATOR, file, meta, "gripper_actuators", t->grip_act, S_GRIP)) ||
        (rc = s_name_list(m, mjOBJ_BODY, file, meta, "object_bodies", t->obj_body,
                          RL_LIBERO_NUM_OBJECTS)) ||
        (rc = s_id(m, mjOBJ_SITE, file, "eef_site", s_str(file, meta, "eef_site"), &t->eef_site)) ||
        (rc = s_id(m, mjOBJ_BODY, file, "eef_body", s_str(file, meta, "eef_body"), &t->eef_body)) ||
        (rc = s_id(m, mjOBJ_SITE, file, "region_site", s_str(file, meta, "region_site"),
                   &t->region_site)))
        return rc;
    for (int i = 0; i < S_ARM; i++) {
        if (m->jnt_type[joints[i]] != mjJNT_HINGE)
            return rl_error_set(RL_EPROTO, "%s: arm joint %d is not a hinge" S_FIX, file, i);
        t->arm_qpos[i] = m->jnt_qposadr[joints[i]];
        t->arm_dof[i] = m->jnt_dofadr[joints[i]];
    }
    for (int i = 0; i < S_GRIP; i++) {
        t->grip_qpos[i] = m->jnt_qposadr[gj[i]];
        t->grip_dof[i] = m->jnt_dofadr[gj[i]];
        t->grip_lo[i] = m->actuator_ctrlrange[2 * t->grip_act[i]];
        t->grip_hi[i] = m->actuator_ctrlrange[2 * t->grip_act[i] + 1];
    }
    int target_body = -1;
    if ((rc = s_id(m, mjOBJ_BODY, file, "target_body", s_str(file, meta, "target_body"), &target_body)))
        return rc;
    const char *region = s_str(file, meta, "region_site");
    json_t *objs = json_object_get(meta, "objects");
    t->target_slot = t->basket_slot = -1;
    for (int i = 0; i < RL_LIBERO_NUM_OBJECTS; i++) {
        json_t *o = json_array_get(objs, (size_t)i);
        const char *on = json_is_string(o) ? json_string_value(o) : "";
        if (t->obj_body[i] == target_body)
            t->target_slot = i;
        if (*on && strncmp(region, on, strlen(on)) == 0)
            t->basket_slot = i;
    }
    if (t->target_slot < 0 || t->basket_slot < 0)
        return rl_error_set(RL_EPROTO, "%s: the target or the region's object is not among 'objects'" S_FIX,
                            file);
    double v;
    json_t *tl = json_object_get(meta, "torque_limits");
    if ((rc = s_num_array(file, meta, "region_size", t->region_size, 3)) ||
        (rc = s_num_array(file, meta, "kp", t->kp, 6)) || (rc = s_num_array(file, meta, "kd", t->kd, 6)) ||
        (rc = s_num_array(file, meta, "output_max", t->out_max, 6)) ||
        (rc = s_num_array(file, meta, "output_min", t->out_min, 6)) ||
        (rc = s_num(file, meta, "input_max", &t->in_max)) ||
        (rc = s_num(file, meta, "input_min", &t->in_min)) ||
        (rc = s_num_array(file, meta, "initial_joint", t->initial_joint, S_ARM)) ||
        (rc = s_num_array(file, meta, "reset_goal_ori", t->reset_goal_ori, 9)) ||
        (rc = s_num(file, meta, "gripper_speed", &t->grip_speed)) ||
        (rc = s_num(file, meta, "obs_time_after_init", &t->obs_time0)) ||
        (rc = s_num(file, meta, "obs_sampling_timestep", &t->obs_period)) ||
        (rc = s_num(file, meta, "model_timestep", &t->model_dt)) ||
        (rc = s_num(file, meta, "control_freq", &v)))
        return rc;
    if (!json_is_array(tl) || json_array_size(tl) != 2)
        return rl_error_set(RL_EPROTO, "%s: torque_limits must be [[7 lows], [7 highs]]" S_FIX, file);
    {
        json_t *lo = json_array_get(tl, 0), *hi = json_array_get(tl, 1);
        json_t *wrap = json_pack("{sOsO}", "lo", lo ? lo : json_null(), "hi", hi ? hi : json_null());
        if (!wrap)
            return rl_error_set(RL_ENOMEM, "out of memory");
        rc = s_num_array(file, wrap, "lo", t->tau_lo, S_ARM);
        if (!rc)
            rc = s_num_array(file, wrap, "hi", t->tau_hi, S_ARM);
        json_decref(wrap);
        if (rc)
            return rl_error_set(RL_EPROTO, "%s: torque_limits must be [[7 lows], [7 highs]]" S_FIX, file);
    }
    json_t *cc = json_object_get(meta, "controller_cache");
    s_arm_state *cs = &t->cache;
    double jp[3 * S_ARM], jr[3 * S_ARM];
    if (!json_is_object(cc))
        return rl_error_set(RL_EPROTO, "%s: 'controller_cache' must be an object" S_FIX, file);
    if ((rc = s_num_array(file, cc, "ee_pos", cs->ee_pos, 3)) ||
        (rc = s_num_array(file, cc, "ee_ori_mat", cs->ee_R, 9)) ||
        (rc = s_num_array(file, cc, "ee_pos_vel", cs->ee_vel, 3)) ||
        (rc = s_num_array(file, cc, "ee_ori_vel", cs->ee_angvel, 3)) ||
        (rc = s_num_array(file, cc, "joint_pos", cs->q, S_ARM)) ||
        (rc = s_num_array(file, cc, "joint_vel", cs->qd, S_ARM)) ||
        (rc = s_num_array(file, cc, "J_pos", jp, 3 * S_ARM)) ||
        (rc = s_num_array(file, cc, "J_ori", jr, 3 * S_ARM)) ||
        (rc = s_num_array(file, cc, "mass_matrix", cs->M, S_ARM * S_ARM)))
        return rc;
    for (int r = 0; r < 3; r++)
        for (int j = 0; j < S_ARM; j++) {
            cs->J[r][j] = jp[r * S_ARM + j];
            cs->J[r + 3][j] = jr[r * S_ARM + j];
        }
    json_t *sampled = json_object_get(meta, "obs_sampled_after_init");
    if (!json_is_boolean(sampled))
        return rl_error_set(RL_EPROTO, "%s: 'obs_sampled_after_init' must be a boolean" S_FIX, file);
    t->obs_sampled0 = json_is_true(sampled);
    if (v <= 0 || t->model_dt <= 0 || t->obs_period <= 0 || t->in_max <= t->in_min)
        return rl_error_set(RL_EPROTO, "%s: control_freq, model_timestep, obs_sampling_timestep must be > 0 "
                            "and input_max > input_min" S_FIX, file);
    /* robosuite: int(control_timestep / model_timestep), control_timestep = 1 / freq */
    double steps = (1.0 / v) / t->model_dt;
    if (steps < 1 || steps > 10000)
        return rl_error_set(RL_EPROTO, "%s: %g physics steps per control step" S_FIX, file, steps);
    t->substeps = (int)steps;
    if (fabs(m->opt.timestep - t->model_dt) > 1e-15)
        return rl_error_set(RL_EPROTO, "%s: model_timestep %g differs from the scene's %g" S_FIX, file,
                            t->model_dt, m->opt.timestep);
    return RL_OK;
}

#if mjVERSION_HEADER >= 3000000
#define S_RAYMESH(m, d, g, p, v) mj_rayMesh(m, d, g, p, v, NULL)
#define S_RAYGEOM(pos, mat, size, p, v, type) mju_rayGeom(pos, mat, size, p, v, type, NULL)
#else
#define S_RAYMESH(m, d, g, p, v) mj_rayMesh(m, d, g, p, v)
#define S_RAYGEOM(pos, mat, size, p, v, type) mju_rayGeom(pos, mat, size, p, v, type)
#endif

typedef struct s_probe_args {
    rl_libero_task *t;
    double height;
    int ok;
} s_probe_args;

/* The target's top above its origin: a ray cast straight down onto it,
 * from 0.5 m above, in initial state 0 (only the target's own geoms
 * count, so nothing above it can hide it). */
static void s_probe(void *arg)
{
    s_probe_args *a = arg;
    rl_libero_task *t = a->t;
    mjModel *m = t->m;
    mjData *d = mj_makeData(m);
    if (!d)
        return;
    memcpy(d->qpos, t->init + 1, sizeof(double) * (size_t)m->nq);
    mj_forward(m, d);
    int body = t->obj_body[t->target_slot];
    const double *o = d->xpos + 3 * body;
    double top = -1;
    for (int dx = -2; dx <= 2; dx++)
        for (int dy = -2; dy <= 2; dy++) {
            mjtNum from[3] = {o[0] + 0.004 * dx, o[1] + 0.004 * dy, o[2] + 0.5}, dir[3] = {0, 0, -1};
            for (int g = 0; g < m->ngeom; g++) {
                if ((m->geom_bodyid[g] != body && m->body_rootid[m->geom_bodyid[g]] != body) ||
                    (!m->geom_contype[g] && !m->geom_conaffinity[g]))
                    continue;
                mjtNum dist = m->geom_type[g] == mjGEOM_MESH
                                  ? S_RAYMESH(m, d, g, from, dir)
                                  : S_RAYGEOM(d->geom_xpos + 3 * g, d->geom_xmat + 9 * g,
                                              m->geom_size + 3 * g, from, dir, m->geom_type[g]);
                if (dist >= 0 && o[2] + 0.5 - dist > top)
                    top = o[2] + 0.5 - dist;
            }
        }
    if (top > -1) {
        a->height = top - o[2];
        a->ok = 1;
    }
    mj_deleteData(d);
}

/* Half extents along the target body's x and y of its collision geoms
 * (each geom's box in its own frame — the mesh's bounding box where MuJoCo
 * keeps one — turned into the body frame). */
static void s_grasp_axis(rl_libero_task *t)
{
    const mjModel *m = t->m;
    int body = t->obj_body[t->target_slot];
    double ext[2] = {0, 0};
    for (int g = 0; g < m->ngeom; g++) {
        if (m->geom_bodyid[g] != body || (!m->geom_contype[g] && !m->geom_conaffinity[g]))
            continue;
        const mjtNum *sz = m->geom_size + 3 * g;
        double h[3] = {sz[0], sz[1], sz[2]}, c[3] = {0, 0, 0};
        switch (m->geom_type[g]) {
        case mjGEOM_SPHERE: h[1] = h[2] = sz[0]; break;
        case mjGEOM_CAPSULE: h[2] = sz[1] + sz[0]; h[1] = sz[0]; break;
        case mjGEOM_CYLINDER: h[2] = sz[1]; h[1] = sz[0]; break;
        case mjGEOM_MESH:
#if mjVERSION_HEADER >= 3000000
            for (int i = 0; i < 3; i++)
                c[i] = m->geom_aabb[6 * g + i], h[i] = m->geom_aabb[6 * g + 3 + i];
#else
            h[0] = h[1] = h[2] = m->geom_rbound[g];
#endif
            break;
        default: break;
        }
        double R[9];
        mju_quat2Mat(R, m->geom_quat + 4 * g);
        for (int a = 0; a < 2; a++) {
            double center = m->geom_pos[3 * g + a] + R[3 * a] * c[0] + R[3 * a + 1] * c[1] + R[3 * a + 2] * c[2];
            double half = fabs(R[3 * a]) * h[0] + fabs(R[3 * a + 1]) * h[1] + fabs(R[3 * a + 2]) * h[2];
            if (fabs(center) + half > ext[a])
                ext[a] = fabs(center) + half;
        }
    }
    t->grasp_axis = -1;
    if (ext[0] > 1.3 * ext[1])
        t->grasp_axis = 1;
    else if (ext[1] > 1.3 * ext[0])
        t->grasp_axis = 0;
}

static int s_probe_height(rl_libero_task *t)
{
    s_grasp_axis(t);
    s_probe_args a = {t, 0, 0};
    if (s_mj_guard(s_probe, &a) || !a.ok)
        return rl_error_set(RL_EPROTO, "task %d: cannot find the target's top in its scene" S_FIX, t->index);
    t->target_height = a.height;
    return RL_OK;
}

rl_libero_task *rl_libero_task_load(const char *data_dir, int index, rl_libero_scene scene)
{
    s_mj_hooks_install();
    rl_libero_suite_info info;
    if (!data_dir) {
        rl_error_set(RL_EINVAL, "env: no data directory" S_FIX);
        return NULL;
    }
    if (rl_libero_suite_read(data_dir, &info))
        return NULL;
    if (index < 0 || index >= info.num_tasks) {
        rl_error_set(RL_ERANGE, "task %d is not in %s/manifest.json (it lists %d tasks)", index, data_dir,
                     info.num_tasks);
        return NULL;
    }
    rl_libero_task *t = rl_zalloc(sizeof *t, NULL);
    if (!t)
        return NULL;
    t->index = index;
    char dir[4096], path[4200], err[1024] = "";
    snprintf(dir, sizeof dir, "%s/%s", data_dir, info.dirs[index]);
    snprintf(path, sizeof path, "%s/%s", dir, scene == RL_LIBERO_SCENE_FULL ? "scene_full.xml" : "scene_phys.xml");
    FILE *probe = fopen(path, "rb");
    if (!probe) {
        rl_error_set(errno == ENOENT ? RL_ENOTFOUND : RL_EIO, "%s: %s" S_FIX, path, strerror(errno));
        free(t);
        return NULL;
    }
    fclose(probe);
    s_load_args la = {path, err, (int)sizeof err, NULL};
    if (s_mj_guard(s_load, &la)) {
        rl_error_set(RL_EPROTO, "%s: MuJoCo: %s" S_FIX, path, s_mj_last_error());
        free(t);
        return NULL;
    }
    t->m = la.m;
    if (!t->m) {
        rl_error_set(RL_EPROTO, "%s: MuJoCo cannot load it: %s" S_FIX, path, err);
        free(t);
        return NULL;
    }
    char tpath[4200];
    snprintf(tpath, sizeof tpath, "%s/task.json", dir);
    json_t *meta = s_load_json(tpath);
    int rc = meta ? s_read_meta(t, meta, tpath) : rl_error_code();
    if (!rc)
        rc = s_read_init(t, dir, meta, tpath);
    json_decref(meta);
    if (!rc)
        rc = s_probe_height(t);
    if (rc) {
        rl_libero_task_free(t);
        return NULL;
    }
    /* robosuite's force/torque sensors at the gripper feed no observation
     * LIBERO returns; off, each physics step skips their acceleration-stage
     * pass (mj_rnePostConstraint). Sensors only read the state: the
     * trajectories are unchanged (bench_env checks it bit for bit). */
    t->m->opt.disableflags |= mjDSBL_SENSOR;
    return t;
}

void rl_libero_task_set_sensors(rl_libero_task *t, int on)
{
    if (on)
        t->m->opt.disableflags &= ~mjDSBL_SENSOR;
    else
        t->m->opt.disableflags |= mjDSBL_SENSOR;
}

void rl_libero_task_free(rl_libero_task *t)
{
    if (!t)
        return;
    if (t->m)
        mj_deleteModel(t->m);
    free(t->init);
    free(t);
}

int rl_libero_task_index(const rl_libero_task *t) { return t->index; }
int rl_libero_task_num_init_states(const rl_libero_task *t) { return t->n_init; }
const char *rl_libero_task_language(const rl_libero_task *t) { return t->language; }
const char *rl_libero_task_name(const rl_libero_task *t) { return t->name; }
int rl_libero_task_target_slot(const rl_libero_task *t) { return t->target_slot; }
int rl_libero_task_basket_slot(const rl_libero_task *t) { return t->basket_slot; }
size_t rl_libero_task_model_bytes(const rl_libero_task *t) { return (size_t)t->m->nbuffer; }

void rl_libero_task_set_solver_tolerance(rl_libero_task *t, double tol)
{
    t->m->opt.tolerance = tol;
}

double rl_libero_task_target_height(const rl_libero_task *t)
{
    return t->target_height;
}

int rl_libero_task_grasp_axis(const rl_libero_task *t)
{
    return t->grasp_axis;
}

int rl_libero_task_object_qposadr(const rl_libero_task *t, int slot)
{
    if (slot < 0 || slot >= RL_LIBERO_NUM_OBJECTS)
        return -1;
    int b = t->obj_body[slot];
    for (int j = 0; j < t->m->njnt; j++)
        if (t->m->jnt_bodyid[j] == b && t->m->jnt_type[j] == mjJNT_FREE)
            return t->m->jnt_qposadr[j];
    return -1;
}
