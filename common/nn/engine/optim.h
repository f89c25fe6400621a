/* common/nn/engine/optim.h — AdamW, global gradient-norm clipping and LR schedules
 * over the flat parameter buffer (rlrt/nn/params.h).
 *
 * Purpose: params, grads and the AdamW moments m, v share one layout, so an
 * optimiser step is one loop over a flat range. An rl_adamw object owns the
 * moments of ONE contiguous range [begin, end) of the flat buffer: the whole
 * model on a single rank, or the rank's FSDP shard (rl_param_shard_range).
 * Buffers passed to rl_adamw_step() are range-local: element 0 is flat
 * element `begin`.
 *
 * Semantics follow torch.optim.AdamW (decoupled weight decay, bias
 * correction), step by step in float32 in the same order of operations:
 *   t += 1                              (scalars below in double, then
 *                                        rounded once to float as torch does)
 *   p *= 1 - lr*wd                      (wd = 0 for no-decay views)
 *   m  = b1*m + (1-b1)*g
 *   v  = b2*v + (1-b2)*g*g
 *   p -= lr/(1-b1^t) * m / (sqrt(v)/sqrt(1-b2^t) + eps)
 *
 * Clipping follows torch.nn.utils.clip_grad_norm_: norm = sqrt(Σ g²) over
 * ALL grads (every rank), coef = max_norm/(norm + 1e-6), grads *= coef when
 * coef < 1. Sharded use: each rank computes rl_grad_sumsq() of its shard,
 * all-reduces the sums (in double), then calls rl_grad_clip_apply().
 * rl_grad_sumsq() sums in double over fixed 64 Ki-element blocks in block
 * order, so its result does not depend on the number of threads.
 *
 * LR schedules are pure functions of the step (the number of optimiser steps
 * already taken, 0 for the first update), like torch LambdaLR driven by
 * scheduler.step() after each optimizer.step():
 *   warmup (step < warmup_steps): base * step / warmup_steps
 *   constant: base
 *   cosine:   base * (min + (1-min) * 0.5 * (1 + cos(pi * progress)))
 *   linear:   base * (min + (1-min) * (1 - progress))
 * with progress = clamp((step - warmup) / max(1, total - warmup), 0, 1) and
 * min = min_ratio. With min_ratio = 0 these are exactly Hugging Face's
 * get_{constant,cosine,linear}_schedule_with_warmup.
 *
 * Devices: rl_adamw_new_on() keeps the moments on a device (the GPU, where
 * the model's flat buffers live): rl_adamw_step() then takes device
 * pointers and runs the device table's adamw_update, and the moments never
 * leave the device except through rl_adamw_moments_get/set (checkpoints).
 * rl_grad_clip_norm_on() is the clip on that device's table: the sum of
 * squares comes back to the host as one double, the scale runs there. The
 * CPU table's entries are the functions of this header, so on the CPU the
 * two paths are the same code.
 *
 * Ownership: rl_adamw_new() returns an object owning its moments (zeroed,
 * (end-begin) floats each, on its device), freed with rl_adamw_free(). It
 * keeps no pointer to the manifest.
 */
#ifndef RLRT_NN_OPTIM_H
#define RLRT_NN_OPTIM_H

#include <stdint.h>

#include "common/nn/engine/device.h"
#include "common/nn/engine/ops.h" /* the kernels: rl_adamw_update, rl_grad_sumsq */
#include "common/nn/engine/ops_elem.h"
#include "rlrt/nn/params.h"

#ifdef __cplusplus
extern "C" {
#endif


/* PyTorch's defaults: beta1 0.9, beta2 0.999, eps 1e-8, weight_decay 0.01. */
rl_adamw_config rl_adamw_config_default(void);

/* A run [begin, end) (range-local element indices) with weight decay on or
 * off and its learning-rate multiplier (the step's lr × lr_scale: 1 unless
 * rl_adamw_set_lr_scale set another for its views, e.g. a value head's own
 * lr); the segments tile the whole range in order. */
typedef struct rl_adamw_segment {
    int64_t begin, end;
    int decay;
    double lr_scale;
} rl_adamw_segment;

typedef struct rl_adamw {
    rl_adamw_config cfg;
    int64_t step;          /* optimiser steps taken (PyTorch's state["step"]) */
    int64_t begin, end;    /* flat range owned (elements) */
    int64_t n;             /* end - begin */
    rl_device dev;         /* where m and v live (rl_adamw_new: the CPU) */
    const rl_nn_ops *ops;  /* dev's kernel table */
    float *m;              /* exp_avg, n floats (CPU: 64-byte aligned); on dev */
    float *v;              /* exp_avg_sq, n floats; on dev */
    rl_adamw_segment *seg; /* weight-decay / lr-scale segments over [0, n) */
    int nseg;
    int nviews;            /* the manifest's views when the object was made */
    uint8_t *no_decay;     /* per view: weight decay off (set_no_decay*) */
    double *lr_scale;      /* per view: lr multiplier (set_lr_scale; 1) */
} rl_adamw;

/* Predicate over views: returns nonzero when the view gets NO weight decay. */
typedef int (*rl_param_pred)(const rl_param_view *v, void *ud);

/* The usual convention: no decay for tensors with ndim <= 1 (norm weights,
 * biases). */
int rl_param_pred_no_decay_1d(const rl_param_view *v, void *ud);

/* New optimiser for the flat range [begin, end) of a buffer laid out by
 * `m` (0 <= begin <= end <= m->total). Weight decay starts on for every
 * view. NULL + message on a bad range or config (betas in [0,1), eps > 0,
 * weight_decay >= 0, all finite). */
rl_adamw *rl_adamw_new(const rl_adamw_config *cfg, const rl_param_manifest *m,
                       int64_t begin, int64_t end);
/* The same with the moments on `dev` (counted as RL_MEM_OPTIM there). NULL +
 * message (RL_EUNSUPPORTED) when this build or machine has no such device. */
rl_adamw *rl_adamw_new_on(const rl_adamw_config *cfg, const rl_param_manifest *m,
                          int64_t begin, int64_t end, rl_device dev);
void rl_adamw_free(rl_adamw *o);

/* Copies the moments to host arrays of o->n floats each (either NULL:
 * skipped), or sets them from host arrays (both required). For checkpoints
 * and the FSDP gather; on the CPU a memcpy. */
int rl_adamw_moments_get(const rl_adamw *o, float *m_host, float *v_host);
int rl_adamw_moments_set(rl_adamw *o, const float *m_host, const float *v_host);

/* Turns weight decay off for the views where pred(view) != 0 (pred NULL:
 * none), recomputing the segments of the owned range (the lr scales set by
 * rl_adamw_set_lr_scale are kept). The manifest must be the one the object
 * was made with (same view count). */
int rl_adamw_set_no_decay(rl_adamw *o, const rl_param_manifest *m,
                          rl_param_pred pred, void *ud);
/* Same with a mask over views: no_decay[i] != 0 turns decay off for view i
 * (m->count entries). */
int rl_adamw_set_no_decay_mask(rl_adamw *o, const rl_param_manifest *m,
                               const uint8_t *no_decay);

/* Gives view i the learning rate lr × scale[i] (m->count entries, each
 * finite and >= 0; NULL: 1 for every view), keeping the weight-decay flags.
 * The moments are untouched, so a scale may change between steps. */
int rl_adamw_set_lr_scale(rl_adamw *o, const rl_param_manifest *m, const double *scale);

/* One step: t = ++o->step, then the update above on params[0..n) with
 * grads[0..n) (both range-local, on the optimiser's device). lr must be
 * finite and >= 0. Grads are not modified. Returns RL_EINVAL for a bad lr.
 * On a GPU the step is queued: its errors surface from rl_device_sync(). */
int rl_adamw_step(rl_adamw *o, double lr, float *params, const float *grads);




/* Given the GLOBAL sum of squares, writes the pre-clip norm to *norm_out (if
 * non-NULL) and scales g[0..n) by max_norm/(norm + 1e-6) when that is < 1.
 * max_norm <= 0 disables clipping (norm still reported). A NaN/Inf norm
 * leaves g untouched and returns RL_ENUMERIC (skip the step). */
int rl_grad_clip_apply(float *g, int64_t n, double total_sumsq, float max_norm,
                       float *norm_out);

/* Single-rank convenience: sumsq + clip over g[0..n). */
int rl_grad_clip_norm(float *g, int64_t n, float max_norm, float *norm_out);
/* The two above with g on `dev` (its table's grad_sumsq and scale_inplace);
 * the norm and the coefficient are formed on the host as on the CPU. */
int rl_grad_clip_apply_on(rl_device dev, float *g, int64_t n, double total_sumsq,
                          float max_norm, float *norm_out);
int rl_grad_clip_norm_on(rl_device dev, float *g, int64_t n, float max_norm, float *norm_out);

typedef enum rl_lr_kind {
    RL_LR_CONSTANT = 0,
    RL_LR_COSINE = 1,
    RL_LR_LINEAR = 2
} rl_lr_kind;

typedef struct rl_lr_schedule {
    rl_lr_kind kind;
    double base_lr;
    int64_t warmup_steps; /* 0: no warmup */
    int64_t total_steps;  /* cosine/linear: steps until min_ratio is reached */
    double min_ratio;     /* final lr = base_lr * min_ratio, in [0, 1] */
} rl_lr_schedule;

/* Checks the fields (non-negative steps, total >= warmup for decaying
 * schedules, finite base >= 0, min_ratio in [0,1]). */
int rl_lr_schedule_check(const rl_lr_schedule *s);
/* Learning rate for the update that follows `step` completed steps. */
double rl_lr_at(const rl_lr_schedule *s, int64_t step);
/* "constant", "cosine", "linear"; parse accepts the same names. */
const char *rl_lr_kind_name(rl_lr_kind k);
int rl_lr_kind_parse(const char *name, rl_lr_kind *out);

#ifdef __cplusplus
}
#endif
#endif
