/* expert.c — the scripted LIBERO-Object expert (common/sim/libero.h): from the
 * observation alone (end-effector position, hand orientation and fingers
 * from the 39 proprio values, target and basket poses from the 98 object
 * values) plus two facts about the target's shape measured at load (its
 * height and which horizontal axis to grasp across), it turns the hand
 * about the vertical to the target's narrow side, reaches above the target,
 * descends, closes the gripper, lifts, carries the object over the basket
 * and opens. Position deltas are proportional to the error (one action unit
 * is 5 cm of goal offset in the OSC); once the yaw is right the rotation
 * delta is exactly zero, so the controller keeps its goal orientation. */
#include <math.h>
#include <string.h>

#include "common/sim/libero.h"

enum { P_ABOVE, P_DESCEND, P_GRASP, P_LIFT, P_CARRY, P_LOWER, P_RELEASE, P_DONE };

#define S_EEF 28       /* proprio: eef_pos */
#define S_HAND_Q 31    /* proprio: hand quaternion xyzw */
#ifndef S_FOLLOW
#define S_FOLLOW 0.3   /* share of a commanded delta the hand moves in a step */
#endif

void rl_libero_expert_reset(rl_libero_expert *x, int target_slot, int basket_slot, double target_height,
                            int grasp_axis)
{
    memset(x, 0, sizeof *x);
    x->target = target_slot;
    x->basket = basket_slot;
    x->height = target_height;
    x->axis = grasp_axis;
}

static float s_clip(double v)
{
    return (float)(v < -1.0 ? -1.0 : v > 1.0 ? 1.0 : v);
}

/* Column c of the rotation of an xyzw quaternion, projected on the floor:
 * its heading. */
static double s_heading(const float *q, int c)
{
    double x = q[0], y = q[1], z = q[2], w = q[3];
    double col[2];
    if (c == 0) {
        col[0] = 1 - 2 * (y * y + z * z);
        col[1] = 2 * (x * y + z * w);
    } else {
        col[0] = 2 * (x * y - z * w);
        col[1] = 1 - 2 * (x * x + z * z);
    }
    return atan2(col[1], col[0]);
}

static double s_wrap_half(double e)
{
    while (e > M_PI / 2)
        e -= M_PI;
    while (e < -M_PI / 2)
        e += M_PI;
    return e;
}

/* The hand's heading for the grasp: the fingers (the hand's y axis) close
 * across the target's grasp axis, give or take 25° (the target still fits
 * the 8 cm opening), or any heading for a round target; among those, the
 * one that keeps the hand (about 10 cm to each side along the finger axis)
 * farthest from the other objects, then the smallest turn. */
static double s_pick_heading(const rl_libero_expert *x, const float *proprio, const float *object)
{
    const float *t = object + 14 * x->target;
    double now = s_heading(proprio + S_HAND_Q, 1);
    double base = x->axis >= 0 ? s_heading(t + 3, x->axis) : now;
    int span = x->axis >= 0 ? 5 : 17; /* 5° steps: ±25° or ±85° */
    double best = now, best_score = -1e9;
    for (int k = -span; k <= span; k++) {
        double h = base + k * M_PI / 36, ux = cos(h), uy = sin(h), clear = 1e9;
        for (int j = 0; j < RL_LIBERO_NUM_OBJECTS; j++) {
            if (j == x->target)
                continue;
            double px = object[14 * j] - t[0], py = object[14 * j + 1] - t[1];
            double along = px * ux + py * uy;
            along = along < -0.10 ? -0.10 : along > 0.10 ? 0.10 : along;
            double c = hypot(px - along * ux, py - along * uy);
            if (c < clear)
                clear = c;
        }
        double turn = fabs(s_wrap_half(h - now));
        double score = (clear > 0.12 ? 0.12 : clear) - 0.01 * turn;
        if (score > best_score)
            best_score = score, best = h;
    }
    return best;
}

/* Action towards `goal` with the given gripper command and yaw turn;
 * returns the distance (xy, z) still to go. */
static void s_towards(const double eef[3], const double goal[3], double gain, double yaw, float grip,
                      float a[RL_LIBERO_ACTION_DIM], double *dxy, double *dz)
{
    for (int i = 0; i < 3; i++)
        a[i] = s_clip(gain * (goal[i] - eef[i]) / 0.05);
    a[3] = a[4] = 0.0f;
    a[5] = fabs(yaw) > 0.02 ? s_clip(yaw / 0.5) : 0.0f;
    a[6] = grip;
    *dxy = hypot(goal[0] - eef[0], goal[1] - eef[1]);
    *dz = fabs(goal[2] - eef[2]);
}

/* One action; phase changes only when `advance` (a real observation, not a
 * prediction inside a chunk). */
static void s_act(rl_libero_expert *x, const float *proprio, const float *object, float *a, int advance)
{
    double eef[3], obj[3], bsk[3], goal[3], dxy, dz;
    for (int i = 0; i < 3; i++) {
        eef[i] = proprio[S_EEF + i];
        obj[i] = object[14 * x->target + i];
        bsk[i] = object[14 * x->basket + i];
    }
    /* the grip site 2.5 cm below the top, between the origin and 5 cm above
     * it: flat boxes at their middle (the finger pads reach 4 mm below the
     * site), cans low, bottles by the neck */
    double grasp_dz = x->height - 0.025;
    grasp_dz = grasp_dz < 0.0 ? 0.0 : grasp_dz > 0.05 ? 0.05 : grasp_dz;
    double yaw = 0.0;
    x->ticks++;
    switch (x->phase) {
    case P_ABOVE:
        if (x->ticks == 1 || !x->heading_set)
            x->heading_set = 1, x->heading = s_pick_heading(x, proprio, object);
        /* the yaw is not predicted inside a chunk: turn on real observations only */
        yaw = advance ? s_wrap_half(x->heading - s_heading(proprio + S_HAND_Q, 1)) : 0.0;
        goal[0] = obj[0], goal[1] = obj[1], goal[2] = obj[2] + grasp_dz + 0.10;
        s_towards(eef, goal, 1.0, yaw, -1.0f, a, &dxy, &dz);
        if (advance && dxy < 0.008 && dz < 0.02 && fabs(yaw) < 0.04)
            x->phase = P_DESCEND, x->ticks = 0;
        break;
    case P_DESCEND:
        goal[0] = obj[0], goal[1] = obj[1], goal[2] = obj[2] + grasp_dz;
        s_towards(eef, goal, 1.0, 0.0, -1.0f, a, &dxy, &dz);
        if (advance && ((dz < 0.008 && dxy < 0.01) || x->ticks > 60))
            x->phase = P_GRASP, x->ticks = 0;
        break;
    case P_GRASP:
        goal[0] = eef[0], goal[1] = eef[1], goal[2] = eef[2];
        s_towards(eef, goal, 0.0, 0.0, 1.0f, a, &dxy, &dz);
        if (advance && x->ticks > 12) {
            x->phase = P_LIFT, x->ticks = 0;
            memcpy(x->grasp, obj, sizeof x->grasp);
        }
        break;
    case P_LIFT:
        goal[0] = x->grasp[0], goal[1] = x->grasp[1], goal[2] = x->grasp[2] + 0.20;
        s_towards(eef, goal, 1.0, 0.0, 1.0f, a, &dxy, &dz);
        if (advance && (dz < 0.02 || x->ticks > 80))
            x->phase = P_CARRY, x->ticks = 0;
        break;
    case P_CARRY:
        goal[0] = bsk[0], goal[1] = bsk[1], goal[2] = x->grasp[2] + 0.20;
        s_towards(eef, goal, 1.0, 0.0, 1.0f, a, &dxy, &dz);
        if (advance && (dxy < 0.01 || x->ticks > 120))
            x->phase = P_LOWER, x->ticks = 0;
        break;
    case P_LOWER:
        goal[0] = bsk[0], goal[1] = bsk[1], goal[2] = bsk[2] + 0.14;
        s_towards(eef, goal, 1.0, 0.0, 1.0f, a, &dxy, &dz);
        if (advance && (dz < 0.015 || x->ticks > 60))
            x->phase = P_RELEASE, x->ticks = 0;
        break;
    case P_RELEASE:
    default:
        goal[0] = eef[0], goal[1] = eef[1], goal[2] = eef[2];
        s_towards(eef, goal, 0.0, 0.0, -1.0f, a, &dxy, &dz);
        if (advance && x->ticks > 20)
            x->phase = P_DONE;
        break;
    }
}

void rl_libero_expert_act_chunk(rl_libero_expert *x, const float proprio[RL_LIBERO_PROPRIO_DIM],
                                const float object[RL_LIBERO_OBJECT_DIM], int n, float *actions)
{
    const double follow = S_FOLLOW;
    float p[RL_LIBERO_PROPRIO_DIM];
    memcpy(p, proprio, sizeof p);
    for (int j = 0; j < n; j++) {
        s_act(x, p, object, actions + 7 * j, j == 0);
        for (int d = 0; d < 3; d++)
            p[S_EEF + d] += (float)(follow * 0.05 * actions[7 * j + d]);
    }
}

void rl_libero_expert_act(rl_libero_expert *x, const float proprio[RL_LIBERO_PROPRIO_DIM],
                          const float object[RL_LIBERO_OBJECT_DIM], float a[RL_LIBERO_ACTION_DIM])
{
    s_act(x, proprio, object, a, 1);
}
