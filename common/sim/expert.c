/* expert.c — the scripted LIBERO-Object expert (rlrt/sim/libero.h): from the
 * observation alone (end-effector position and fingers from the 39 proprio
 * values, target and basket positions from the 98 object values) it reaches
 * above the target, descends, closes the gripper, lifts, carries the object
 * over the basket and opens. Position deltas are proportional to the error
 * (one action unit = 5 cm of goal offset in the OSC), the rotation delta is
 * exactly zero so the controller keeps its top-down goal orientation. */
#include <math.h>
#include <string.h>

#include "rlrt/sim/libero.h"

enum { P_ABOVE, P_DESCEND, P_GRASP, P_LIFT, P_CARRY, P_LOWER, P_RELEASE, P_DONE };

#define S_EEF 28       /* proprio: eef_pos */
#define S_FINGERS 35   /* proprio: gripper_qpos (2) */

void rl_libero_expert_reset(rl_libero_expert *x, int target_slot, int basket_slot)
{
    memset(x, 0, sizeof *x);
    x->target = target_slot;
    x->basket = basket_slot;
}

static float s_clip(double v)
{
    return (float)(v < -1.0 ? -1.0 : v > 1.0 ? 1.0 : v);
}

/* Action towards `goal` with the given gripper command; returns the
 * distance (xy, z) still to go. */
static void s_towards(const double eef[3], const double goal[3], double gain, float grip,
                      float a[RL_LIBERO_ACTION_DIM], double *dxy, double *dz)
{
    for (int i = 0; i < 3; i++)
        a[i] = s_clip(gain * (goal[i] - eef[i]) / 0.05);
    a[3] = a[4] = a[5] = 0.0f;
    a[6] = grip;
    *dxy = hypot(goal[0] - eef[0], goal[1] - eef[1]);
    *dz = fabs(goal[2] - eef[2]);
}

void rl_libero_expert_act(rl_libero_expert *x, const float proprio[RL_LIBERO_PROPRIO_DIM],
                          const float object[RL_LIBERO_OBJECT_DIM], float a[RL_LIBERO_ACTION_DIM])
{
    double eef[3], obj[3], bsk[3], goal[3], dxy, dz;
    for (int i = 0; i < 3; i++) {
        eef[i] = proprio[S_EEF + i];
        obj[i] = object[14 * x->target + i];
        bsk[i] = object[14 * x->basket + i];
    }
    double fingers = proprio[S_FINGERS] - proprio[S_FINGERS + 1];
    x->ticks++;
    switch (x->phase) {
    case P_ABOVE:
        goal[0] = obj[0], goal[1] = obj[1], goal[2] = obj[2] + 0.12;
        s_towards(eef, goal, 1.0, -1.0f, a, &dxy, &dz);
        if (dxy < 0.008 && dz < 0.02)
            x->phase = P_DESCEND, x->ticks = 0;
        break;
    case P_DESCEND:
        goal[0] = obj[0], goal[1] = obj[1], goal[2] = obj[2] + 0.01;
        s_towards(eef, goal, 1.0, -1.0f, a, &dxy, &dz);
        if ((dz < 0.008 && dxy < 0.01) || x->ticks > 60)
            x->phase = P_GRASP, x->ticks = 0;
        break;
    case P_GRASP:
        goal[0] = eef[0], goal[1] = eef[1], goal[2] = eef[2];
        s_towards(eef, goal, 0.0, 1.0f, a, &dxy, &dz);
        if (x->ticks > 12) {
            x->phase = P_LIFT, x->ticks = 0;
            memcpy(x->grasp, obj, sizeof x->grasp);
        }
        break;
    case P_LIFT:
        goal[0] = x->grasp[0], goal[1] = x->grasp[1], goal[2] = x->grasp[2] + 0.20;
        s_towards(eef, goal, 1.0, 1.0f, a, &dxy, &dz);
        if (dz < 0.02 || x->ticks > 80)
            x->phase = P_CARRY, x->ticks = 0;
        break;
    case P_CARRY:
        goal[0] = bsk[0], goal[1] = bsk[1], goal[2] = x->grasp[2] + 0.20;
        s_towards(eef, goal, 1.0, 1.0f, a, &dxy, &dz);
        if (dxy < 0.01 || x->ticks > 120)
            x->phase = P_LOWER, x->ticks = 0;
        break;
    case P_LOWER:
        goal[0] = bsk[0], goal[1] = bsk[1], goal[2] = bsk[2] + 0.14;
        s_towards(eef, goal, 1.0, 1.0f, a, &dxy, &dz);
        if (dz < 0.015 || x->ticks > 60)
            x->phase = P_RELEASE, x->ticks = 0;
        break;
    case P_RELEASE:
    default:
        goal[0] = eef[0], goal[1] = eef[1], goal[2] = eef[2];
        s_towards(eef, goal, 0.0, -1.0f, a, &dxy, &dz);
        if (x->ticks > 20)
            x->phase = P_DONE;
        break;
    }
    (void)fingers;
}
