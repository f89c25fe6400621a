/* osc.c — robosuite 1.4's OSC_POSE controller for the Panda arm and its
 * gripper, as LIBERO configures them (kp 150, damping ratio 1, output limits
 * 0.05 m / 0.5 rad, uncoupled position and orientation, control_delta,
 * no interpolator, null-space pull to the reset posture with kp 10).
 *
 * Numerics follow robosuite where it matters for equal trajectories:
 * the goal rotation goes through robosuite's quat2mat, which rounds the
 * quaternion and the matrix to float32; a rotation delta of exactly zero
 * keeps the previous goal orientation; Λ = (J M⁻¹ Jᵀ)⁻¹ (numpy's pinv of a
 * well-conditioned SPD matrix is its inverse); torques are clipped to the
 * actuators' limits; the finger command ramps by speed · sign(action) per
 * physics step and is scaled into the actuators' control range.
 */
#include <math.h>
#include <string.h>

#include "common/sim/sim_internal.h"

/* In-place inverse of the n x n matrix a (row-major) by Gauss-Jordan with
 * partial pivoting; returns -1 when singular. */
static int s_inv(int n, double *a, double *inv)
{
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++)
            inv[i * n + j] = i == j;
    for (int c = 0; c < n; c++) {
        int p = c;
        for (int r = c + 1; r < n; r++)
            if (fabs(a[r * n + c]) > fabs(a[p * n + c]))
                p = r;
        if (a[p * n + c] == 0.0)
            return -1;
        if (p != c)
            for (int j = 0; j < n; j++) {
                double x = a[c * n + j];
                a[c * n + j] = a[p * n + j];
                a[p * n + j] = x;
                x = inv[c * n + j];
                inv[c * n + j] = inv[p * n + j];
                inv[p * n + j] = x;
            }
        double d = 1.0 / a[c * n + c];
        for (int j = 0; j < n; j++) {
            a[c * n + j] *= d;
            inv[c * n + j] *= d;
        }
        for (int r = 0; r < n; r++) {
            if (r == c || a[r * n + c] == 0.0)
                continue;
            double f = a[r * n + c];
            for (int j = 0; j < n; j++) {
                a[r * n + j] -= f * a[c * n + j];
                inv[r * n + j] -= f * inv[c * n + j];
            }
        }
    }
    return 0;
}

/* robosuite transform_utils.quat2mat on an (x, y, z, w) quaternion, with
 * its float32 arithmetic. out: row-major 3x3. */
void s_quat2mat_f32(const double xyzw[4], double out[9]);
void s_quat2mat_f32(const double xyzw[4], double out[9])
{
    float q[4] = {(float)xyzw[3], (float)xyzw[0], (float)xyzw[1], (float)xyzw[2]};
    float n = q[0] * q[0] + q[1] * q[1] + q[2] * q[2] + q[3] * q[3];
    if ((double)n < 4.0 * 2.220446049250313e-16) {
        for (int i = 0; i < 9; i++)
            out[i] = i % 4 == 0;
        return;
    }
    float s = (float)sqrt((double)(2.0f / n));
    for (int i = 0; i < 4; i++)
        q[i] *= s;
    float q2[4][4];
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++)
            q2[i][j] = q[i] * q[j];
    float m[9] = {1.0f - q2[2][2] - q2[3][3], q2[1][2] - q2[3][0], q2[1][3] + q2[2][0],
                  q2[1][2] + q2[3][0], 1.0f - q2[1][1] - q2[3][3], q2[2][3] - q2[1][0],
                  q2[1][3] - q2[2][0], q2[2][3] + q2[1][0], 1.0f - q2[1][1] - q2[2][2]};
    for (int i = 0; i < 9; i++)
        out[i] = m[i];
}

/* The arm's 7 x 7 block of the joint-space inertia, copied from MuJoCo's
 * sparse inertia (the same values mj_fullM would scatter into nv x nv: no
 * arithmetic, so the torques are bitwise those of the full matrix). */
static void s_arm_inertia(const rl_libero_task *t, const mjData *d, double *M, double *full)
{
    const mjModel *m = t->m;
#if mjVERSION_HEADER >= 3017000
    (void)full;
    /* d->M: lower triangle by rows (CSR: M_rowadr, M_rownnz, M_colind) */
    memset(M, 0, sizeof(double) * S_ARM * S_ARM);
    for (int i = 0; i < S_ARM; i++) {
        int r = t->arm_dof[i], adr = m->M_rowadr[r];
        for (int k = 0; k < m->M_rownnz[r]; k++) {
            int c = m->M_colind[adr + k];
            for (int j = 0; j < S_ARM; j++)
                if (t->arm_dof[j] == c) {
                    M[i * S_ARM + j] = d->M[adr + k];
                    M[j * S_ARM + i] = d->M[adr + k];
                }
        }
    }
#else
    int nv = m->nv;
#if mjVERSION_HEADER >= 3000000
    mj_fullM(m, (mjData *)d, full);
#else
    mj_fullM(m, full, d->qM);
#endif
    for (int i = 0; i < S_ARM; i++)
        for (int j = 0; j < S_ARM; j++)
            M[i * S_ARM + j] = full[t->arm_dof[i] * nv + t->arm_dof[j]];
#endif
}

/* robosuite Controller.update: the arm state now, or — in the first
 * physics step after a reset — the state robosuite cached at its reset
 * (its update() is skipped until run_controller has run once); the gravity
 * compensation is always read live (a property in robosuite). The caller
 * runs it once per physics step (the goal and the torques share it). */
void s_osc_update(rl_libero_env *e, s_arm_state *st)
{
    const rl_libero_task *t = e->t;
    const mjModel *m = t->m;
    mjData *d = e->d;
    int nv = m->nv;
    if (e->stale) {
        *st = t->cache;
        for (int i = 0; i < S_ARM; i++)
            st->bias[i] = d->qfrc_bias[t->arm_dof[i]];
        return;
    }
    memcpy(st->ee_pos, d->site_xpos + 3 * t->eef_site, sizeof st->ee_pos);
    memcpy(st->ee_R, d->site_xmat + 9 * t->eef_site, sizeof st->ee_R);
    mj_jacSite(m, d, e->jacp, e->jacr, t->eef_site);
    for (int r = 0; r < 3; r++) {
        double vp = 0, vr = 0;
        for (int k = 0; k < nv; k++) {
            vp += e->jacp[r * nv + k] * d->qvel[k];
            vr += e->jacr[r * nv + k] * d->qvel[k];
        }
        st->ee_vel[r] = vp;
        st->ee_angvel[r] = vr;
        for (int j = 0; j < S_ARM; j++) {
            st->J[r][j] = e->jacp[r * nv + t->arm_dof[j]];
            st->J[r + 3][j] = e->jacr[r * nv + t->arm_dof[j]];
        }
    }
    s_arm_inertia(t, d, st->M, e->fullM);
    for (int i = 0; i < S_ARM; i++) {
        st->q[i] = d->qpos[t->arm_qpos[i]];
        st->qd[i] = d->qvel[t->arm_dof[i]];
        st->bias[i] = d->qfrc_bias[t->arm_dof[i]];
    }
}

void s_osc_set_goal(rl_libero_env *e, const s_arm_state *st, const double action[RL_LIBERO_ACTION_DIM])
{
    const rl_libero_task *t = e->t;
    const double *ee_pos = st->ee_pos, *R = st->ee_R;
    double scaled[6];
    for (int i = 0; i < 6; i++) {
        double scale = fabs(t->out_max[i] - t->out_min[i]) / fabs(t->in_max - t->in_min);
        double out_tr = (t->out_max[i] + t->out_min[i]) / 2.0, in_tr = (t->in_max + t->in_min) / 2.0;
        double a = action[i] < t->in_min ? t->in_min : action[i] > t->in_max ? t->in_max : action[i];
        scaled[i] = (a - in_tr) * scale + out_tr;
    }
    if (scaled[3] != 0.0 || scaled[4] != 0.0 || scaled[5] != 0.0) {
        double angle = sqrt(scaled[3] * scaled[3] + scaled[4] * scaled[4] + scaled[5] * scaled[5]);
        double q[4] = {0, 0, 0, 1};
        if (angle != 0.0) {
            double s = sin(angle / 2.0);
            for (int i = 0; i < 3; i++)
                q[i] = scaled[3 + i] / angle * s;
            q[3] = cos(angle / 2.0);
        }
        double Rd[9];
        s_quat2mat_f32(q, Rd);
        for (int i = 0; i < 3; i++)
            for (int j = 0; j < 3; j++)
                e->goal_ori[i * 3 + j] = Rd[i * 3] * R[j] + Rd[i * 3 + 1] * R[3 + j] + Rd[i * 3 + 2] * R[6 + j];
    }
    for (int i = 0; i < 3; i++)
        e->goal_pos[i] = ee_pos[i] + scaled[i];
}

static void s_cross_add(const double a[3], const double b[3], double out[3])
{
    out[0] += a[1] * b[2] - a[2] * b[1];
    out[1] += a[2] * b[0] - a[0] * b[2];
    out[2] += a[0] * b[1] - a[1] * b[0];
}

void s_osc_apply(rl_libero_env *e, const s_arm_state *stp, double grip_action)
{
    const rl_libero_task *t = e->t;
    mjData *d = e->d;
    const s_arm_state st = *stp;
    const int n = S_ARM;

    double df[3], dt[3], ori_err[3] = {0, 0, 0};
    for (int c = 0; c < 3; c++) {
        double rc[3] = {st.ee_R[c], st.ee_R[3 + c], st.ee_R[6 + c]};
        double rd[3] = {e->goal_ori[c], e->goal_ori[3 + c], e->goal_ori[6 + c]};
        s_cross_add(rc, rd, ori_err);
    }
    for (int i = 0; i < 3; i++) {
        ori_err[i] *= 0.5;
        df[i] = (e->goal_pos[i] - st.ee_pos[i]) * t->kp[i] + (-st.ee_vel[i]) * t->kd[i];
        dt[i] = ori_err[i] * t->kp[3 + i] + (-st.ee_angvel[i]) * t->kd[3 + i];
    }

    double Mw[S_ARM * S_ARM], Minv[S_ARM * S_ARM];
    memcpy(Mw, st.M, sizeof Mw);
    if (s_inv(n, Mw, Minv)) {
        memset(Minv, 0, sizeof Minv); /* a singular mass matrix: no arm torque */
    }
    /* MJt = M⁻¹ Jᵀ (7 x 6) */
    double MJt[S_ARM][6];
    for (int i = 0; i < n; i++)
        for (int k = 0; k < 6; k++) {
            double s = 0;
            for (int j = 0; j < n; j++)
                s += Minv[i * n + j] * st.J[k][j];
            MJt[i][k] = s;
        }
    double Lf_inv[36], Lf[36], Lp_inv[9], Lp[9], Lo_inv[9], Lo[9];
    for (int a = 0; a < 6; a++)
        for (int b = 0; b < 6; b++) {
            double s = 0;
            for (int j = 0; j < n; j++)
                s += st.J[a][j] * MJt[j][b];
            Lf_inv[a * 6 + b] = s;
        }
    for (int a = 0; a < 3; a++)
        for (int b = 0; b < 3; b++) {
            Lp_inv[a * 3 + b] = Lf_inv[a * 6 + b];
            Lo_inv[a * 3 + b] = Lf_inv[(a + 3) * 6 + b + 3];
        }
    if (s_inv(6, Lf_inv, Lf))
        memset(Lf, 0, sizeof Lf);
    if (s_inv(3, Lp_inv, Lp))
        memset(Lp, 0, sizeof Lp);
    if (s_inv(3, Lo_inv, Lo))
        memset(Lo, 0, sizeof Lo);

    double wrench[6];
    for (int a = 0; a < 3; a++) {
        wrench[a] = Lp[a * 3] * df[0] + Lp[a * 3 + 1] * df[1] + Lp[a * 3 + 2] * df[2];
        wrench[a + 3] = Lo[a * 3] * dt[0] + Lo[a * 3 + 1] * dt[1] + Lo[a * 3 + 2] * dt[2];
    }
    double tau[S_ARM];
    for (int j = 0; j < n; j++) {
        double s = 0;
        for (int k = 0; k < 6; k++)
            s += st.J[k][j] * wrench[k];
        tau[j] = s + st.bias[j];
    }
    /* null space: N = I − Jbar J, Jbar = M⁻¹ Jᵀ Λ; τ += Nᵀ M (kp (q0 − q) − kv q̇) */
    double Jbar[S_ARM][6], N[S_ARM * S_ARM], pose[S_ARM], tgt[S_ARM];
    for (int i = 0; i < n; i++)
        for (int k = 0; k < 6; k++) {
            double s = 0;
            for (int l = 0; l < 6; l++)
                s += MJt[i][l] * Lf[l * 6 + k];
            Jbar[i][k] = s;
        }
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            double s = 0;
            for (int k = 0; k < 6; k++)
                s += Jbar[i][k] * st.J[k][j];
            N[i * n + j] = (i == j) - s;
        }
    const double jkp = 10.0, jkv = sqrt(10.0) * 2;
    for (int j = 0; j < n; j++)
        tgt[j] = jkp * (t->initial_joint[j] - st.q[j]) - jkv * st.qd[j];
    for (int i = 0; i < n; i++) {
        double s = 0;
        for (int j = 0; j < n; j++)
            s += st.M[i * n + j] * tgt[j];
        pose[i] = s;
    }
    for (int j = 0; j < n; j++) {
        double s = 0;
        for (int i = 0; i < n; i++)
            s += N[i * n + j] * pose[i];
        tau[j] += s;
        double lo = t->tau_lo[j], hi = t->tau_hi[j];
        d->ctrl[t->arm_act[j]] = tau[j] < lo ? lo : tau[j] > hi ? hi : tau[j];
    }
    e->stale = 0;
    /* gripper: -1 open, +1 close; the command ramps per physics step */
    double sg = grip_action > 0 ? 1.0 : grip_action < 0 ? -1.0 : 0.0;
    static const double dir[S_GRIP] = {-1.0, 1.0};
    for (int i = 0; i < S_GRIP; i++) {
        double c = e->grip_cmd[i] + dir[i] * t->grip_speed * sg;
        e->grip_cmd[i] = c < -1.0 ? -1.0 : c > 1.0 ? 1.0 : c;
        double bias = 0.5 * (t->grip_hi[i] + t->grip_lo[i]), w = 0.5 * (t->grip_hi[i] - t->grip_lo[i]);
        d->ctrl[t->grip_act[i]] = bias + w * e->grip_cmd[i];
    }
}
