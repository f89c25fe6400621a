/* bench_flow_selftrain.c — `make bench-flow_selftrain`: why libero_rl has a
 * demonstration anchor (algorithm.demo_coef). A warm-started flow_policy
 * (common/nn/models/flow_policy.h) is trained offline, on the observations of
 * demonstration pairs, with flow matching toward four kinds of targets, side
 * by side from the same weights (AdamW, same lr, same iterations):
 *   demos        the demonstrations' chunks (the warm start's own loss)
 *   own          the policy's own greedy ODE chunks, drawn afresh from new
 *                initial noise every iteration (clipped to [-1, 1] as the
 *                env executes them): what FlowSAR's positive branch,
 *                FlowIPO's target and self-imitation regress toward
 *   own_fixed    one fixed set of its own chunks, drawn once
 *   own+anchor   own plus the same flow matching on the demonstrations
 * and the drift of its greedy actions is measured against the
 * demonstrations: the MSE of the 6 arm dimensions and the share of gripper
 * signs that differ. It prints `bench:` lines:
 *   bench: selftrain_own_vs_demos_arm_mse_ratio     own / demos after N iterations
 *   bench: selftrain_anchor_vs_demos_arm_mse_ratio  own+anchor / demos
 * Usage: bench_flow_selftrain [model_dir [demos [iterations [lr]]]]
 * (defaults runs/libero_warmstart/final, runs/libero_demos/demos.safetensors,
 * 100, 1e-4). Exit 2 when the inputs are missing (RL_RUN=libero make run
 * makes them). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "driver/recipes/embodied/flow_demos.h"
#include "rlrt/dataproto.h"
#include "rlrt/error.h"
#include "common/nn/models/flow_policy.h"
#include "rlrt/nn/model.h"
#include "common/nn/engine/optim.h"
#include "common/core/rng.h"

#define M 512 /* demonstration pairs (rows) */

typedef struct s_rows {
    int64_t D;
    float prop[M * RL_FP_PROPRIO_DIM], obj[M * RL_FP_OBJECT_DIM];
    int64_t task[M];
    float *demo; /* (M, D) */
} s_rows;

static rl_dataproto *s_obs(const s_rows *r)
{
    rl_dataproto *q = rl_dataproto_new();
    rl_tensor *p = q ? rl_dataproto_new_tensor(q, RL_FP_PROPRIO, RL_F32, 2, (int64_t[]){M, RL_FP_PROPRIO_DIM}) : NULL;
    rl_tensor *o = p ? rl_dataproto_new_tensor(q, RL_FP_OBJECT, RL_F32, 2, (int64_t[]){M, RL_FP_OBJECT_DIM}) : NULL;
    rl_tensor *k = o ? rl_dataproto_new_tensor(q, RL_FP_TASK, RL_I64, 1, (int64_t[]){M}) : NULL;
    if (!k) {
        rl_dataproto_free(q);
        return NULL;
    }
    memcpy(rl_tensor_data(p), r->prop, sizeof r->prop);
    memcpy(rl_tensor_data(o), r->obj, sizeof r->obj);
    memcpy(rl_tensor_data(k), r->task, sizeof r->task);
    return q;
}

typedef struct s_fm {
    const float *u;
    double norm;
} s_fm;

static int s_fm_loss(void *arg, const rl_model_io *out, rl_model_io *grad, double *loss)
{
    s_fm *c = arg;
    int64_t D = out->width[RL_Q_VELOCITY], n = out->rows * D;
    const float *v = out->q[RL_Q_VELOCITY], *u = c->u + out->row0 * D;
    for (int64_t i = 0; i < n; i++) {
        double d = (double)v[i] - u[i];
        *loss += d * d / c->norm;
        grad->q[RL_Q_VELOCITY][i] = (float)(2 * d / c->norm);
    }
    return RL_OK;
}

/* Accumulates the gradient of flow matching toward `target` (t ~ U(0, 1)). */
static int s_fm_grad(rl_model *m, const s_rows *r, const float *target, uint64_t seed)
{
    const int64_t D = r->D;
    rl_dataproto *q = s_obs(r);
    rl_tensor *tx = q ? rl_dataproto_new_tensor(q, RL_FP_X_T, RL_F32, 2, (int64_t[]){M, D}) : NULL;
    rl_tensor *tt = tx ? rl_dataproto_new_tensor(q, RL_FP_T, RL_F32, 1, (int64_t[]){M}) : NULL;
    float *u = malloc(sizeof(float) * (size_t)(M * D));
    int rc = tt && u ? RL_OK : rl_error_set(RL_ENOMEM, "out of memory");
    if (!rc) {
        float *x = rl_tensor_data(tx), *t = rl_tensor_data(tt);
        for (int64_t b = 0; b < M; b++) {
            rl_rng g;
            rl_rng_init(&g, seed, (uint64_t)b);
            t[b] = (float)rl_rng_uniform_f64(&g);
            for (int64_t j = 0; j < D; j++) {
                float e = rl_rng_normal(&g), a = target[b * D + j];
                x[b * D + j] = (1 - t[b]) * a + t[b] * e;
                u[b * D + j] = e - a;
            }
        }
        s_fm c = {u, (double)M * (double)D};
        double loss = 0;
        rl_model_pass pass = {.temperature = 1, .micro_batch = 0};
        rc = rl_model_forward_backward(m, q, RL_Q_BIT(RL_Q_VELOCITY), &pass, s_fm_loss, &c, &loss);
    }
    free(u);
    rl_dataproto_free(q);
    return rc;
}

/* Greedy ODE chunks from initial noise seeds (seed, row), clipped. */
static int s_sample(rl_model *m, const s_rows *r, uint64_t seed, float *act)
{
    rl_dataproto *q = s_obs(r), *s = NULL;
    rl_tensor *ns = q ? rl_dataproto_new_tensor(q, RL_FP_NOISE_SEEDS, RL_I64, 1, (int64_t[]){M}) : NULL;
    if (!ns) {
        rl_dataproto_free(q);
        return rl_error_code();
    }
    for (int64_t b = 0; b < M; b++)
        ((int64_t *)rl_tensor_data(ns))[b] = (int64_t)(seed * 7919u + (uint64_t)b);
    rl_model_sampling sp = {.greedy = 1, .num_steps = 10};
    int rc = rl_model_sample(m, q, &sp, &s);
    if (!rc) {
        const float *a = rl_tensor_data(rl_dataproto_tensor(s, RL_FP_ACTION));
        for (int64_t i = 0; i < M * r->D; i++)
            act[i] = a[i] > 1 ? 1 : a[i] < -1 ? -1 : a[i];
    }
    rl_dataproto_free(s);
    rl_dataproto_free(q);
    return rc;
}

/* Arm MSE and gripper sign disagreement of greedy chunks vs the demos. */
static int s_drift(rl_model *m, const s_rows *r, float *buf, double *arm, double *grip)
{
    int rc = s_sample(m, r, 1, buf);
    double a = 0, g = 0;
    for (int64_t i = 0; !rc && i < M * r->D; i++) {
        if (i % RL_FP_ACTION_DIM == RL_FP_ACTION_DIM - 1)
            g += (buf[i] > 0) != (r->demo[i] > 0);
        else
            a += (buf[i] - r->demo[i]) * (buf[i] - r->demo[i]);
    }
    int64_t chunks = M * r->D / RL_FP_ACTION_DIM;
    *arm = a / (double)(chunks * (RL_FP_ACTION_DIM - 1));
    *grip = g / (double)chunks;
    return rc;
}

enum { DEMOS, OWN, OWN_FIXED, ANCHOR, ARMS };
static const char *const s_arm[ARMS] = {"demos", "own", "own_fixed", "own+anchor"};

int main(int argc, char **argv)
{
    const char *dir = argc > 1 ? argv[1] : "runs/libero_warmstart/final";
    const char *demos = argc > 2 ? argv[2] : "runs/libero_demos/demos.safetensors";
    int iters = argc > 3 ? atoi(argv[3]) : 100;
    double lr = argc > 4 ? atof(argv[4]) : 1e-4;
    if (iters < 1 || !(lr > 0)) {
        fprintf(stderr, "usage: bench_flow_selftrain [model_dir [demos [iterations >= 1 [lr > 0]]]]\n");
        return 2;
    }
    rl_model *probe = rl_model_load_dir(dir);
    if (!probe) {
        fprintf(stderr, "bench_flow_selftrain: %s (RL_RUN=libero make run makes the warm start)\n", rl_error_message());
        return 2;
    }
    const rl_flow_policy_config *fc = rl_flow_policy_get_config(probe);
    rl_flow_demos p;
    if (!fc || rl_flow_demos_load(demos, 10, fc->chunks, fc->num_tasks, &p)) {
        fprintf(stderr, "bench_flow_selftrain: %s\n", fc ? rl_error_message() : "not a flow_policy model");
        rl_model_free(probe);
        return 2;
    }
    static s_rows r;
    r.D = p.D;
    r.demo = malloc(sizeof(float) * (size_t)(M * p.D));
    float *own = malloc(sizeof(float) * (size_t)(M * p.D)), *fixed = malloc(sizeof(float) * (size_t)(M * p.D));
    if (!r.demo || !own || !fixed)
        return 1;
    rl_rng g;
    rl_rng_init(&g, 42, 0);
    for (int64_t b = 0; b < M; b++) { /* M pairs drawn from the demonstrations */
        int64_t i = (int64_t)rl_rng_below(&g, (uint64_t)p.n);
        memcpy(r.prop + b * RL_FP_PROPRIO_DIM, p.prop + i * RL_FP_PROPRIO_DIM, sizeof(float) * RL_FP_PROPRIO_DIM);
        memcpy(r.obj + b * RL_FP_OBJECT_DIM, p.obj + i * RL_FP_OBJECT_DIM, sizeof(float) * RL_FP_OBJECT_DIM);
        memcpy(r.demo + b * p.D, p.act + i * p.D, sizeof(float) * (size_t)p.D);
        r.task[b] = p.task[i];
    }
    printf("warm start %s, %d demonstration pairs, %d AdamW iterations at lr %g, greedy ODE of 10 steps\n", dir, M,
           iters, lr);
    printf("%-12s %10s %10s %10s %10s\n", "targets", "iteration", "arm_mse", "grip_sign", "seconds");
    double final_arm[ARMS] = {0};
    for (int arm = 0; arm < ARMS; arm++) {
        rl_model *m = rl_model_load_dir(dir);
        rl_adamw_config ac = rl_adamw_config_default();
        rl_adamw *opt = m ? rl_adamw_new(&ac, rl_model_manifest(m), 0, rl_model_num_params(m)) : NULL;
        if (!opt) {
            fprintf(stderr, "bench_flow_selftrain: %s\n", rl_error_message());
            return 1;
        }
        if (arm == OWN_FIXED && s_sample(m, &r, 5, fixed))
            return 1;
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        for (int it = 0; it <= iters; it++) {
            if (it % (iters / 2 > 0 ? iters / 2 : 1) == 0 || it == iters) {
                double a, gs;
                if (s_drift(m, &r, own, &a, &gs))
                    return 1;
                clock_gettime(CLOCK_MONOTONIC, &t1);
                printf("%-12s %10d %10.4f %10.3f %10.1f\n", s_arm[arm], it, a, gs,
                       (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec));
                final_arm[arm] = a;
            }
            if (it == iters)
                break;
            const float *target = r.demo;
            if (arm == OWN || arm == ANCHOR) {
                if (s_sample(m, &r, 100 + (uint64_t)it, own))
                    return 1;
                target = own;
            } else if (arm == OWN_FIXED) {
                target = fixed;
            }
            rl_model_zero_grad(m);
            if (s_fm_grad(m, &r, target, 1000 + (uint64_t)it) ||
                (arm == ANCHOR && s_fm_grad(m, &r, r.demo, 5000 + (uint64_t)it)) ||
                rl_adamw_step(opt, lr, rl_model_params(m), rl_model_grads(m))) {
                fprintf(stderr, "bench_flow_selftrain: %s\n", rl_error_message());
                return 1;
            }
        }
        rl_adamw_free(opt);
        rl_model_free(m);
    }
    printf("bench: selftrain_own_vs_demos_arm_mse_ratio = %.2f\n", final_arm[OWN] / final_arm[DEMOS]);
    printf("bench: selftrain_own_fixed_vs_demos_arm_mse_ratio = %.2f\n", final_arm[OWN_FIXED] / final_arm[DEMOS]);
    printf("bench: selftrain_anchor_vs_demos_arm_mse_ratio = %.2f\n", final_arm[ANCHOR] / final_arm[DEMOS]);
    free(r.demo);
    free(own);
    free(fixed);
    rl_flow_demos_free(&p);
    rl_model_free(probe);
    return 0;
}
