/* flow_step.c — one flow SDE / ODE denoising step with its Gaussian
 * log-prob and the log-prob's gradient w.r.t. the velocity
 * (common/sde/flow_step.h). The step is affine in v, so mean = base + c_v·v with
 * per-sample scalars and ∂logp/∂v = c_v·(x − mean)/std². */
#include "common/sde/flow_step.h"

#include <math.h>
#include <stddef.h>

#include "rlrt/error.h"
#include "common/core/finite.h"

#define S_HALF_LOG_2PI 0.91893853320467274178

/* Per-sample step coefficients: mean = cx·x_t + cv·v, std. */
typedef struct s_coef {
    double cx, cv, std;
} s_coef;

static int s_coef_of(const char *fn, rl_flow_step_method method, double t, double tn,
                     double noise_level, int64_t i, s_coef *c)
{
    if (!(t <= 1.0 && tn >= 0.0 && tn < t))
        return rl_error_set(RL_ERANGE, "%s: sample %lld: need 0 <= t_next < t <= 1, got t=%g t_next=%g",
                            fn, (long long)i, t, tn);
    const double dt = t - tn;
    if (method == RL_FLOW_STEP_ODE) {
        c->cx = 1.0;
        c->cv = -dt;
        c->std = noise_level * sqrt(dt);
        return 0;
    }
    /* σ at t = 1 would divide by zero; RLinf uses the next grid point. */
    const double den = 1.0 - (t == 1.0 ? tn : t);
    const double sig = noise_level * sqrt(t / den);
    const double w0 = 1.0 - tn, w1 = tn - sig * sig * dt / (2.0 * t);
    /* mean = (x − v·t)·w0 + (x + v·(1 − t))·w1 */
    c->cx = w0 + w1;
    c->cv = -t * w0 + (1.0 - t) * w1;
    c->std = sqrt(dt) * sig;
    return 0;
}

static int s_check_args(const char *fn, rl_flow_step_method method, double noise_level,
                        const float *t, const float *tn, int64_t n, int64_t d)
{
    if (n < 0 || d <= 0)
        return rl_error_set(RL_ESHAPE, "%s: need n >= 0 and d > 0, got n=%lld d=%lld", fn,
                            (long long)n, (long long)d);
    if (method != RL_FLOW_STEP_ODE && method != RL_FLOW_STEP_SDE)
        return rl_error_set(RL_EINVAL, "%s: unknown step method %d", fn, (int)method);
    if (!(noise_level >= 0.0) || !isfinite(noise_level))
        return rl_error_set(RL_EINVAL, "%s: noise_level=%g must be finite and >= 0", fn,
                            noise_level);
    if (!t || !tn)
        return rl_error_set(RL_EINVAL, "%s: t and t_next must not be NULL", fn);
    for (int64_t i = 0; i < n; i++) {
        if (!isfinite(t[i]))
            return rl_error_set(RL_ENUMERIC, "%s: t[%lld] is %g (not finite)", fn, (long long)i, (double)t[i]);
        if (!isfinite(tn[i]))
            return rl_error_set(RL_ENUMERIC, "%s: t_next[%lld] is %g (not finite)", fn, (long long)i,
                                (double)tn[i]);
    }
    return 0;
}


int rl_flow_step_sample(rl_flow_step_method method, const float *x_t,
                        const float *v, const float *t, const float *t_next,
                        double noise_level, const float *noise, int64_t n,
                        int64_t d, float *x_next, float *logp)
{
    static const char fn[] = "rl_flow_step_sample";
    int rc = s_check_args(fn, method, noise_level, t, t_next, n, d);
    if (rc)
        return rc;
    if (!x_t || !v || !x_next)
        return rl_error_set(RL_EINVAL, "%s: x_t, v and x_next must not be NULL", fn);
    for (int64_t i = 0; i < n; i++) {
        s_coef c;
        if ((rc = s_coef_of(fn, method, t[i], t_next[i], noise_level, i, &c)))
            return rc;
        if (c.std > 0.0 && !noise)
            return rl_error_set(RL_EINVAL, "%s: sample %lld has std %g > 0 but noise is NULL",
                                fn, (long long)i, c.std);
        double acc = 0.0;
        for (int64_t j = 0; j < d; j++) {
            const int64_t k = i * d + j;
            const double mean = c.cx * x_t[k] + c.cv * v[k];
            const double z = c.std > 0.0 ? (double)noise[k] : 0.0;
            const float xn = (float)(mean + c.std * z);
            x_next[k] = xn;
            /* Score the stored f32 value, so re-scoring gives the same logp. */
            if (c.std > 0.0) {
                const double e = ((double)xn - mean) / c.std;
                acc += e * e;
            } else {
                acc += mean;  /* only to catch NaN/Inf */
            }
        }
        if (!isfinite(acc)) {
            /* the noise enters only where the step has a spread */
            const rl__named_array in[] = {{"x_t", x_t}, {"v", v},
                                          {"noise", c.std > 0.0 ? noise : NULL}};
            return rl__row_overflow(fn, "step of sample", i, i * d, d, in, 3);
        }
        if (logp)
            logp[i] = c.std > 0.0
                ? (float)(-(double)d * (log(c.std) + S_HALF_LOG_2PI) - 0.5 * acc) : 0.0f;
    }
    return 0;
}

int rl_flow_step_logprob(rl_flow_step_method method, const float *x_t,
                         const float *v, const float *x_next, const float *t,
                         const float *t_next, double noise_level, int64_t n,
                         int64_t d, float *logp, const float *grad_logp,
                         float *grad_v)
{
    static const char fn[] = "rl_flow_step_logprob";
    int rc = s_check_args(fn, method, noise_level, t, t_next, n, d);
    if (rc)
        return rc;
    if (!x_t || !v || !x_next || !logp)
        return rl_error_set(RL_EINVAL, "%s: x_t, v, x_next and logp must not be NULL", fn);
    for (int64_t i = 0; i < n; i++) {
        s_coef c;
        if ((rc = s_coef_of(fn, method, t[i], t_next[i], noise_level, i, &c)))
            return rc;
        const double gl = grad_logp ? grad_logp[i] : 1.0;
        if (!isfinite(gl))
            return rl_error_set(RL_ENUMERIC, "%s: grad_logp[%lld] is %g (not finite)", fn,
                                (long long)i, gl);
        double acc = 0.0;
        if (c.std > 0.0) {
            const double inv_var = 1.0 / (c.std * c.std);
            for (int64_t j = 0; j < d; j++) {
                const int64_t k = i * d + j;
                const double diff = (double)x_next[k] - (c.cx * x_t[k] + c.cv * v[k]);
                acc += diff * diff * inv_var;
                if (grad_v)
                    grad_v[i * d + j] = (float)(gl * c.cv * diff * inv_var);
            }
        } else {
            /* Deterministic step: logp is defined as 0 and carries no
             * gradient (RLinf's gaussian_logprob). */
            for (int64_t j = 0; j < d; j++) {
                const int64_t k = i * d + j;
                acc += (double)x_next[k] + x_t[k] + v[k];
                if (grad_v)
                    grad_v[k] = 0.0f;
            }
        }
        if (!isfinite(acc)) {
            const rl__named_array in[] = {{"x_t", x_t}, {"v", v}, {"x_next", x_next}};
            return rl__row_overflow(fn, "log-prob of sample", i, i * d, d, in, 3);
        }
        logp[i] = c.std > 0.0
            ? (float)(-(double)d * (log(c.std) + S_HALF_LOG_2PI) - 0.5 * acc) : 0.0f;
    }
    return 0;
}
