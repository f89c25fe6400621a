/* libero_env.c — one LIBERO-Object environment (common/sim/libero.h): reset to
 * an initial state, the 20 Hz control step (25 physics steps, OSC torques at
 * each), robosuite's observation clock and LIBERO's success predicate. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/core/util.h"
#include "rlrt/error.h"
#include "common/sim/sim_internal.h"

void s_quat2mat_f32(const double xyzw[4], double out[9]);

typedef struct s_make_args {
    mjModel *m;
    mjData *d;
} s_make_args;

static void s_make(void *arg)
{
    s_make_args *a = arg;
    a->d = mj_makeData(a->m);
}

static void s_forward(void *arg)
{
    rl_libero_env *e = arg;
    mj_forward(e->t->m, e->d);
}

rl_libero_env *rl_libero_env_new(const rl_libero_task *t)
{
    if (!t) {
        rl_error_set(RL_EINVAL, "rl_libero_env_new: NULL task");
        return NULL;
    }
    rl_libero_env *e = rl_zalloc(sizeof *e, NULL);
    if (!e)
        return NULL;
    e->t = t;
    int nv = t->m->nv;
    e->fullM = malloc(sizeof(double) * (size_t)nv * (size_t)nv);
    e->jacp = malloc(sizeof(double) * 3 * (size_t)nv);
    e->jacr = malloc(sizeof(double) * 3 * (size_t)nv);
    s_make_args ma = {t->m, NULL};
    if (s_mj_guard(s_make, &ma))
        ma.d = NULL;
    e->d = ma.d;
    if (!e->fullM || !e->jacp || !e->jacr || !e->d) {
        rl_libero_env_free(e);
        rl_error_set(RL_ENOMEM, "env for task %d: out of memory (mjData)", t->index);
        return NULL;
    }
    e->broken = 1; /* until the first reset */
    return e;
}

void rl_libero_env_free(rl_libero_env *e)
{
    if (!e)
        return;
    if (e->d)
        mj_deleteData(e->d);
    free(e->fullM);
    free(e->jacp);
    free(e->jacr);
    free(e);
}

/* What robosuite's sensors read, taken now. */
static void s_sample(rl_libero_env *e)
{
    const rl_libero_task *t = e->t;
    const mjData *d = e->d;
    s_obs_sample *o = &e->obs;
    for (int i = 0; i < S_ARM; i++) {
        o->joint_pos[i] = d->qpos[t->arm_qpos[i]];
        o->joint_vel[i] = d->qvel[t->arm_dof[i]];
    }
    memcpy(o->eef_pos, d->site_xpos + 3 * t->eef_site, sizeof o->eef_pos);
    memcpy(o->eef_quat, d->xquat + 4 * t->eef_body, sizeof o->eef_quat);
    for (int i = 0; i < S_GRIP; i++) {
        o->grip_qpos[i] = d->qpos[t->grip_qpos[i]];
        o->grip_qvel[i] = d->qvel[t->grip_dof[i]];
    }
    for (int k = 0; k < RL_LIBERO_NUM_OBJECTS; k++) {
        memcpy(o->obj_pos[k], d->xpos + 3 * t->obj_body[k], sizeof o->obj_pos[k]);
        memcpy(o->obj_quat[k], d->xquat + 4 * t->obj_body[k], sizeof o->obj_quat[k]);
    }
}

/* robosuite Observable.update after one physics step of model_dt: sample
 * at the first step of each window, restart the window once it is full. */
static void s_obs_clock(rl_libero_env *e)
{
    const rl_libero_task *t = e->t;
    e->obs_time += t->model_dt;
    if (!e->obs_sampled && t->obs_period >= e->obs_time) {
        s_sample(e);
        e->obs_sampled = 1;
    }
    if (e->obs_time >= t->obs_period) {
        if (!e->obs_sampled)
            s_sample(e);
        e->obs_time = fmod(e->obs_time, t->obs_period);
        e->obs_sampled = 0;
    }
}

int rl_libero_env_reset(rl_libero_env *e, int init_index)
{
    const rl_libero_task *t = e->t;
    if (init_index < 0 || init_index >= t->n_init)
        return rl_error_set(RL_ERANGE, "task %d: initial state %d is not in [0, %d)", t->index, init_index,
                            t->n_init);
    const mjModel *m = t->m;
    mjData *d = e->d;
    const double *row = t->init + (size_t)init_index * (size_t)t->init_cols;
    mj_resetData(m, d);
    d->time = row[0];
    memcpy(d->qpos, row + 1, sizeof(double) * (size_t)m->nq);
    memcpy(d->qvel, row + 1 + m->nq, sizeof(double) * (size_t)m->nv);
    if (s_mj_guard(s_forward, e)) {
        e->broken = 1;
        return rl_error_set(RL_ESTATE, "task %d: MuJoCo error on reset: %s", t->index, s_mj_last_error());
    }
    memcpy(e->goal_ori, t->reset_goal_ori, sizeof e->goal_ori);
    memcpy(e->goal_pos, d->site_xpos + 3 * t->eef_site, sizeof e->goal_pos);
    e->grip_cmd[0] = e->grip_cmd[1] = 0.0;
    s_sample(e);
    e->obs_time = t->obs_time0;
    e->obs_sampled = t->obs_sampled0;
    e->steps = 0;
    e->stale = 1;
    e->broken = 0;
    return RL_OK;
}

static int s_unstable(const mjData *d, const int before[3], char *msg, size_t len)
{
    static const int kinds[3] = {mjWARN_BADQPOS, mjWARN_BADQVEL, mjWARN_BADQACC};
    for (int i = 0; i < 3; i++)
        if (d->warning[kinds[i]].number != before[i]) {
            snprintf(msg, len, "%s", mju_warningText(kinds[i], (size_t)d->warning[kinds[i]].lastinfo));
            return 1;
        }
    return 0;
}

typedef struct s_step_args {
    rl_libero_env *e;
    const double *action;
    rl_libero_step_info *info;
    const int *before;
} s_step_args;

/* The physics steps of one control step (robosuite MujocoEnv.step). */
static void s_substeps(void *arg)
{
    s_step_args *a = arg;
    rl_libero_env *e = a->e;
    const rl_libero_task *t = e->t;
    for (int k = 0; k < t->substeps; k++) {
        mj_step1(t->m, e->d);
        s_arm_state st;
        s_osc_update(e, &st);
        if (k == 0)
            s_osc_set_goal(e, &st, a->action);
        s_osc_apply(e, &st, a->action[6]);
        if (e->rec && e->rec_n < e->rec_cap)
            memcpy(e->rec + (size_t)e->rec_n++ * (size_t)t->m->nu, e->d->ctrl, sizeof(double) * (size_t)t->m->nu);
        mj_step2(t->m, e->d);
        if (s_unstable(e->d, a->before, a->info->warning, sizeof a->info->warning)) {
            a->info->flags |= RL_LIBERO_UNSTABLE;
            break;
        }
        s_obs_clock(e);
    }
}

int rl_libero_env_step(rl_libero_env *e, const double action[RL_LIBERO_ACTION_DIM],
                       rl_libero_step_info *info)
{
    const rl_libero_task *t = e->t;
    rl_libero_step_info local;
    if (!info)
        info = &local;
    memset(info, 0, sizeof *info);
    if (e->broken)
        return rl_error_set(RL_ESTATE, "task %d: the env needs a reset before it can step", t->index);
    for (int i = 0; i < RL_LIBERO_ACTION_DIM; i++) {
        if (!isfinite(action[i]))
            return rl_error_set(RL_ENUMERIC, "task %d: action[%d] is %s at step %lld", t->index, i,
                                isnan(action[i]) ? "NaN" : "Inf", (long long)e->steps);
        if (i < 6 && (action[i] < t->in_min || action[i] > t->in_max))
            info->clipped++;
    }
    const mjModel *m = t->m;
    mjData *d = e->d;
    static const int kinds[3] = {mjWARN_BADQPOS, mjWARN_BADQVEL, mjWARN_BADQACC};
    int before[3];
    for (int i = 0; i < 3; i++)
        before[i] = d->warning[kinds[i]].number;
    s_step_args sa = {e, action, info, before};
    if (s_mj_guard(s_substeps, &sa)) {
        e->broken = 1;
        info->flags |= RL_LIBERO_UNSTABLE;
        snprintf(info->warning, sizeof info->warning, "MuJoCo error: %s", s_mj_last_error());
        e->steps++;
        return RL_OK;
    }
    if (!(info->flags & RL_LIBERO_UNSTABLE)) {
        for (int i = 0; i < m->nq; i++)
            if (!isfinite(d->qpos[i])) {
                info->flags |= RL_LIBERO_UNSTABLE;
                snprintf(info->warning, sizeof info->warning, "qpos[%d] is not finite", i);
                break;
            }
        for (int i = 0; i < m->nv && !(info->flags & RL_LIBERO_UNSTABLE); i++)
            if (!isfinite(d->qvel[i])) {
                info->flags |= RL_LIBERO_UNSTABLE;
                snprintf(info->warning, sizeof info->warning, "qvel[%d] is not finite", i);
            }
    }
    e->steps++;
    if (info->flags & RL_LIBERO_UNSTABLE)
        e->broken = 1;
    else if (rl_libero_env_success(e))
        info->flags |= RL_LIBERO_SUCCESS;
    return RL_OK;
}

int rl_libero_env_success(const rl_libero_env *e)
{
    double c[3], h[3];
    rl_libero_env_region(e, c, h);
    const double *p = e->d->xpos + 3 * e->t->obj_body[e->t->target_slot];
    for (int i = 0; i < 3; i++) {
        double lb = c[i] - h[i], ub = c[i] + h[i];
        if (i == 2)
            lb -= 0.01;
        if (!(p[i] > lb && p[i] < ub))
            return 0;
    }
    return 1;
}

void rl_libero_env_region(const rl_libero_env *e, double center[3], double half[3])
{
    const rl_libero_task *t = e->t;
    const double *R = e->d->site_xmat + 9 * t->region_site;
    memcpy(center, e->d->site_xpos + 3 * t->region_site, 3 * sizeof(double));
    for (int i = 0; i < 3; i++)
        half[i] = fabs(R[i * 3] * t->region_size[0] + R[i * 3 + 1] * t->region_size[1] +
                       R[i * 3 + 2] * t->region_size[2]);
}

/* robosuite mat2quat (x, y, z, w with w >= 0) of a float32-rounded matrix. */
static void s_mat2quat(const double R[9], double xyzw[4])
{
    double m[9];
    for (int i = 0; i < 9; i++)
        m[i] = (float)R[i];
    double tr = m[0] + m[4] + m[8], w, x, y, z;
    if (tr > 0) {
        double s = sqrt(tr + 1.0) * 2;
        w = 0.25 * s;
        x = (m[7] - m[5]) / s;
        y = (m[2] - m[6]) / s;
        z = (m[3] - m[1]) / s;
    } else if (m[0] > m[4] && m[0] > m[8]) {
        double s = sqrt(1.0 + m[0] - m[4] - m[8]) * 2;
        w = (m[7] - m[5]) / s;
        x = 0.25 * s;
        y = (m[1] + m[3]) / s;
        z = (m[2] + m[6]) / s;
    } else if (m[4] > m[8]) {
        double s = sqrt(1.0 + m[4] - m[0] - m[8]) * 2;
        w = (m[2] - m[6]) / s;
        x = (m[1] + m[3]) / s;
        y = 0.25 * s;
        z = (m[5] + m[7]) / s;
    } else {
        double s = sqrt(1.0 + m[8] - m[0] - m[4]) * 2;
        w = (m[3] - m[1]) / s;
        x = (m[2] + m[6]) / s;
        y = (m[5] + m[7]) / s;
        z = 0.25 * s;
    }
    double n = sqrt(w * w + x * x + y * y + z * z), sg = w < 0 ? -1.0 : 1.0;
    xyzw[0] = sg * x / n;
    xyzw[1] = sg * y / n;
    xyzw[2] = sg * z / n;
    xyzw[3] = sg * w / n;
}

void rl_libero_env_obs(const rl_libero_env *e, double proprio[RL_LIBERO_PROPRIO_DIM],
                       double object[RL_LIBERO_OBJECT_DIM])
{
    const s_obs_sample *o = &e->obs;
    double *p = proprio;
    for (int i = 0; i < S_ARM; i++) {
        p[i] = o->joint_pos[i];
        p[7 + i] = cos(o->joint_pos[i]);
        p[14 + i] = sin(o->joint_pos[i]);
        p[21 + i] = o->joint_vel[i];
    }
    double eq[4] = {o->eef_quat[1], o->eef_quat[2], o->eef_quat[3], o->eef_quat[0]};
    memcpy(p + 28, o->eef_pos, 3 * sizeof(double));
    memcpy(p + 31, eq, 4 * sizeof(double));
    p[35] = o->grip_qpos[0];
    p[36] = o->grip_qpos[1];
    p[37] = o->grip_qvel[0];
    p[38] = o->grip_qvel[1];
    /* world pose in the gripper frame: inverse of pose2mat(eef) (float32) */
    double Re[9], pe[3], Ri[9], ti[3];
    s_quat2mat_f32(eq, Re);
    for (int i = 0; i < 3; i++)
        pe[i] = (float)o->eef_pos[i];
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++)
            Ri[i * 3 + j] = Re[j * 3 + i];
    for (int i = 0; i < 3; i++)
        ti[i] = -(Ri[i * 3] * pe[0] + Ri[i * 3 + 1] * pe[1] + Ri[i * 3 + 2] * pe[2]);
    for (int k = 0; k < RL_LIBERO_NUM_OBJECTS; k++) {
        double *q = object + 14 * k;
        double oq[4] = {o->obj_quat[k][1], o->obj_quat[k][2], o->obj_quat[k][3], o->obj_quat[k][0]};
        memcpy(q, o->obj_pos[k], 3 * sizeof(double));
        memcpy(q + 3, oq, 4 * sizeof(double));
        double Ro[9], po[3], Rr[9];
        s_quat2mat_f32(oq, Ro);
        for (int i = 0; i < 3; i++)
            po[i] = (float)o->obj_pos[k][i];
        for (int i = 0; i < 3; i++) {
            for (int j = 0; j < 3; j++)
                Rr[i * 3 + j] = Ri[i * 3] * Ro[j] + Ri[i * 3 + 1] * Ro[3 + j] + Ri[i * 3 + 2] * Ro[6 + j];
            q[7 + i] = Ri[i * 3] * po[0] + Ri[i * 3 + 1] * po[1] + Ri[i * 3 + 2] * po[2] + ti[i];
        }
        s_mat2quat(Rr, q + 10);
    }
}

void rl_libero_env_obs_f32(const rl_libero_env *e, float proprio[RL_LIBERO_PROPRIO_DIM],
                           float object[RL_LIBERO_OBJECT_DIM])
{
    double p[RL_LIBERO_PROPRIO_DIM], o[RL_LIBERO_OBJECT_DIM];
    rl_libero_env_obs(e, p, o);
    for (int i = 0; i < RL_LIBERO_PROPRIO_DIM; i++)
        proprio[i] = (float)p[i];
    for (int i = 0; i < RL_LIBERO_OBJECT_DIM; i++)
        object[i] = (float)o[i];
}

int64_t rl_libero_env_steps(const rl_libero_env *e) { return e->steps; }
const rl_libero_task *rl_libero_env_task(const rl_libero_env *e) { return e->t; }
int rl_libero_env_nq(const rl_libero_env *e) { return e->t->m->nq; }
int rl_libero_env_nv(const rl_libero_env *e) { return e->t->m->nv; }
size_t rl_libero_env_data_bytes(const rl_libero_env *e)
{
#if mjVERSION_HEADER >= 3000000
    return (size_t)e->d->nbuffer + (size_t)e->d->narena;
#else
    return (size_t)e->d->nbuffer + (size_t)e->d->nstack * sizeof(mjtNum);
#endif
}

void rl_libero_env_state(const rl_libero_env *e, double *time, double *qpos, double *qvel)
{
    if (time)
        *time = e->d->time;
    if (qpos)
        memcpy(qpos, e->d->qpos, sizeof(double) * (size_t)e->t->m->nq);
    if (qvel)
        memcpy(qvel, e->d->qvel, sizeof(double) * (size_t)e->t->m->nv);
}

int rl_libero_env_set_state(rl_libero_env *e, const double *qpos, const double *qvel)
{
    const mjModel *m = e->t->m;
    for (int i = 0; i < m->nq; i++)
        if (!isfinite(qpos[i]))
            return rl_error_set(RL_ENUMERIC, "qpos[%d] is not finite", i);
    for (int i = 0; qvel && i < m->nv; i++)
        if (!isfinite(qvel[i]))
            return rl_error_set(RL_ENUMERIC, "qvel[%d] is not finite", i);
    memcpy(e->d->qpos, qpos, sizeof(double) * (size_t)m->nq);
    if (qvel)
        memcpy(e->d->qvel, qvel, sizeof(double) * (size_t)m->nv);
    if (s_mj_guard(s_forward, e))
        return rl_error_set(RL_ESTATE, "MuJoCo error: %s", s_mj_last_error());
    s_sample(e);
    e->broken = 0;
    return RL_OK;
}

int rl_libero_env_set_sim_state(rl_libero_env *e, const rl_libero_sim_state *s)
{
    const mjModel *m = e->t->m;
    mjData *d = e->d;
    if (!s || !s->qpos || !s->qvel || !s->qacc_warmstart)
        return rl_error_set(RL_EINVAL, "rl_libero_env_set_sim_state: NULL state");
    mj_resetData(m, d);
    d->time = s->time;
    memcpy(d->qpos, s->qpos, sizeof(double) * (size_t)m->nq);
    memcpy(d->qvel, s->qvel, sizeof(double) * (size_t)m->nv);
    memcpy(d->qacc_warmstart, s->qacc_warmstart, sizeof(double) * (size_t)m->nv);
    if (s_mj_guard(s_forward, e))
        return rl_error_set(RL_ESTATE, "MuJoCo error: %s", s_mj_last_error());
    memcpy(e->grip_cmd, s->grip_cmd, sizeof e->grip_cmd);
    memcpy(e->goal_ori, s->goal_ori, sizeof e->goal_ori);
    memcpy(e->goal_pos, d->site_xpos + 3 * e->t->eef_site, sizeof e->goal_pos);
    e->obs_time = s->obs_time;
    e->obs_sampled = s->obs_sampled;
    e->stale = s->stale;
    s_sample(e);
    e->broken = 0;
    return RL_OK;
}

int rl_libero_env_body_pos(const rl_libero_env *e, const char *body, double pos[3])
{
    int id = mj_name2id(e->t->m, mjOBJ_BODY, body);
    if (id < 0)
        return rl_error_set(RL_ENOTFOUND, "body '%s' is not in task %d's scene", body, e->t->index);
    memcpy(pos, e->d->xpos + 3 * id, 3 * sizeof(double));
    return RL_OK;
}

void rl_libero_env_eef(const rl_libero_env *e, double pos[3], double rot[9])
{
    memcpy(pos, e->d->site_xpos + 3 * e->t->eef_site, 3 * sizeof(double));
    if (rot)
        memcpy(rot, e->d->site_xmat + 9 * e->t->eef_site, 9 * sizeof(double));
}

int rl_libero_env_nu(const rl_libero_env *e) { return e->t->m->nu; }

int rl_libero_env_record_ctrl(rl_libero_env *e, double *buf, int cap)
{
    int n = e->rec_n;
    e->rec = buf;
    e->rec_cap = buf ? cap : 0;
    if (buf)
        e->rec_n = 0;
    return n;
}

typedef struct s_bare_args {
    rl_libero_env *e;
    const double *ctrl;
    int n;
} s_bare_args;

static void s_bare(void *arg)
{
    s_bare_args *a = arg;
    const mjModel *m = a->e->t->m;
    mjData *d = a->e->d;
    for (int i = 0; i < a->n; i++) {
        memcpy(d->ctrl, a->ctrl + (size_t)i * (size_t)m->nu, sizeof(double) * (size_t)m->nu);
        mj_step(m, d);
    }
}

int rl_libero_env_physics_only(rl_libero_env *e, int init_index, const double *ctrl, int n)
{
    int rc = rl_libero_env_reset(e, init_index);
    if (rc)
        return rc;
    s_bare_args a = {e, ctrl, n};
    e->broken = 1; /* the controller's state no longer matches: reset first */
    if (s_mj_guard(s_bare, &a))
        return rl_error_set(RL_ESTATE, "task %d: MuJoCo error in bare steps: %s", e->t->index, s_mj_last_error());
    return RL_OK;
}

void rl_libero_env_poison(rl_libero_env *e)
{
    e->d->qvel[e->t->arm_dof[0]] = NAN;
}
