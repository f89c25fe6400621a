/* flow_chain_internal.h — what the flow model kinds (clip_flow,
 * flow_policy) share around their velocity network (flow_mlp_internal.h):
 * the flow-matching inputs, the recorded SDE chain they re-score with its
 * scored steps, and the checks and noise of sampling (not installed).
 *
 * A chain of B rows holds the states x (B, N+1, D) on a strictly
 * decreasing grid t (B, N+1) (flow_policy: the flow time t; clip_flow: σ),
 * the SDE noise level of each row (B) and an optional step mask (B, N)
 * (absent: every step is scored). The scored steps (mask != 0) of a
 * micro-batch of rows, in row-major order, are its pairs (b, k): the kind's
 * network gives v at (x[b, k], t[b, k]) and the kind's SDE the log-density
 * of x[b, k+1] under it. A micro-batch's quantity is the (rows, N) log-probs
 * with their mask (0 at the steps not scored).
 *
 * Ownership: a chain and the flow-matching inputs borrow the batch's
 * tensors; rl_flow_work owns its buffers (rl_flow_work_free). */
#ifndef RLRT_NN_FLOW_CHAIN_INTERNAL_H
#define RLRT_NN_FLOW_CHAIN_INTERNAL_H

#include <stdint.h>

#include "rlrt/dataproto.h"
#include "rlrt/nn/model.h"

/* The log-density of n SDE steps of d floats and its gradient with respect
 * to v: rl_flow_step_logprob (SDE) or rl_diffusion_sde_logprob. */
typedef int (*rl_flow_chain_step_fn)(const float *x, const float *v, const float *x_next,
                                     const float *t, const float *t_next, double noise_level,
                                     int64_t n, int64_t d, float *logp, const float *grad_logp,
                                     float *grad_v);

/* The kind's network: v (n, D) at the states x (n, D) and times t (n) of
 * the batch rows rows[i], keeping its activations for its backward. */
typedef int (*rl_flow_chain_vel_fn)(void *kind, int64_t n, const int64_t *rows, const float *x,
                                    const float *t, float *v);

/* How a kind records its chains: the tensor names and its SDE. */
typedef struct rl_flow_chain_kind {
    const char *x, *t, *noise, *mask;
    rl_flow_chain_step_fn step;
} rl_flow_chain_kind;

typedef struct rl_flow_chain {
    const rl_flow_chain_kind *kind;
    int64_t B, N, D;
    const float *x, *t, *noise; /* (B, N+1, D), (B, N+1), (B) */
    const float *mask;          /* (B, N) or NULL: every step */
} rl_flow_chain;

/* The chain of B rows of D floats in a batch: t (B, N+1) f32 with N in [1,
 * 10000], x (B, N+1, D) f32 and finite, noise (B) f32, the mask (B, N) f32
 * when present. The kind checks its grid, noise levels and mask values. */
int rl_flow_chain_read(const rl_dataproto *in, const char *what, const rl_flow_chain_kind *kind,
                       int64_t B, int64_t D, rl_flow_chain *c);

/* The buffers of one micro-batch of rows of a chain. */
typedef struct rl_flow_work {
    int64_t *pb, *pk;            /* (pairs) the row and step of each scored step */
    float *x, *t, *v, *gv, *lp;  /* (pairs, D) or (pairs) */
    float *q, *gq, *qmask;       /* (rows, N) the quantity, its gradient and mask */
} rl_flow_work;

/* Buffers for up to `rows` rows of N steps of D floats; RL_ENOMEM naming
 * `who`. */
int rl_flow_work_alloc(rl_flow_work *w, int64_t rows, int64_t N, int64_t D, const char *who);
void rl_flow_work_free(rl_flow_work *w);

/* The scored steps of rows [r0, r0 + rows): their velocities from `vel`
 * (w->v) and log-probs (w->lp; *npairs of them), and the micro-batch's
 * quantity w->q with its mask w->qmask. */
int rl_flow_chain_forward(const rl_flow_chain *c, rl_flow_chain_vel_fn vel, void *kind, int64_t r0,
                          int64_t rows, rl_flow_work *w, int64_t *npairs);
/* dL/dv (w->gv) of the n scored steps of the last forward from the
 * quantity's gradient w->gq; the kind then back-propagates w->gv. */
int rl_flow_chain_backward(const rl_flow_chain *c, int64_t r0, int64_t n, rl_flow_work *w);

/* The flow-matching inputs of B rows: x_t (B, D) f32, finite, and its time
 * t (B) f32 in [0, 1]. */
int rl_flow_fm_read(const rl_dataproto *in, const char *what, const char *x_name, const char *t_name,
                    int64_t B, int64_t D, const float **x, const float **t);

/* The SDE noise level of a sampling call (0 when greedy): num_steps in [1,
 * 10000], and a finite noise level > 0 unless greedy. */
int rl_flow_sample_noise(const rl_model_sampling *sp, const char *what, double *noise);
/* out (n) = n draws of N(0, 1) from Philox(seed, stream). */
void rl_flow_normal(uint64_t seed, uint64_t stream, int64_t n, float *out);

#endif
