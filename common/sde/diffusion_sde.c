/* diffusion_sde.c — the rectified-flow SDE step of diffusion / flow image
 * generators with its Gaussian log-prob and KL (common/sde/diffusion_sde.h):
 * the step math the clip generator samples with and the diffusion GRPO loss
 * re-scores. */
#include "common/sde/diffusion_sde.h"

#include <math.h>
#include <stddef.h>

#include "rlrt/error.h"
#include "common/core/finite.h"

#define S_LOG_SQRT_2PI 0.91893853320467274178

int rl_diffusion_sigmas(int64_t n_steps, double shift, float *sigmas)
{
    static const char fn[] = "rl_diffusion_sigmas";
    if (n_steps <= 0 || !sigmas)
        return rl_error_set(RL_EINVAL, "%s: need n_steps > 0 and a sigmas buffer, got n_steps=%lld",
                            fn, (long long)n_steps);
    if (!(shift > 0.0) || !isfinite(shift))
        return rl_error_set(RL_EINVAL, "%s: shift=%g must be finite and > 0", fn, shift);
    for (int64_t k = 0; k <= n_steps; k++) {
        /* linspace(1, 0, N+1) written so both ends are exact. */
        const double t = (double)(n_steps - k) / (double)n_steps;
        sigmas[k] = (float)(shift * t / (1.0 + (shift - 1.0) * t));
    }
    return 0;
}

/* Per-row SDE coefficients: mean = cx·x + cv·v, s = std_t·sqrt(−dt). */
typedef struct s_coef {
    double cx, cv, s;
} s_coef;

static int s_coef_of(const char *fn, double sig, double sn, double noise_level, int64_t i,
                     s_coef *c)
{
    if (!(sig <= 1.0 && sn >= 0.0 && sn < sig))
        return rl_error_set(RL_ERANGE,
                            "%s: row %lld: need 0 <= sigma_next < sigma <= 1, got sigma=%g sigma_next=%g",
                            fn, (long long)i, sig, sn);
    const double dt = sn - sig;
    /* σ = 1 would divide by zero; Flow-GRPO uses the next grid point. */
    const double den = 1.0 - (sig == 1.0 ? sn : sig);
    const double std_t = noise_level * sqrt(sig / den);
    const double v2 = std_t * std_t;
    c->cx = 1.0 + v2 / (2.0 * sig) * dt;
    c->cv = (1.0 + v2 * (1.0 - sig) / (2.0 * sig)) * dt;
    c->s = std_t * sqrt(-dt);
    return 0;
}

static int s_check_step(const char *fn, const float *sigma, const float *sigma_next,
                        double noise_level, int64_t b, int64_t d)
{
    if (b < 0 || d <= 0)
        return rl_error_set(RL_ESHAPE, "%s: need B >= 0 and D > 0, got B=%lld D=%lld", fn,
                            (long long)b, (long long)d);
    if (!sigma || !sigma_next)
        return rl_error_set(RL_EINVAL, "%s: sigma and sigma_next must not be NULL", fn);
    if (!(noise_level > 0.0) || !isfinite(noise_level))
        return rl_error_set(RL_EINVAL, "%s: noise_level=%g must be finite and > 0", fn,
                            noise_level);
    int rc;
    if ((rc = rl__first_nonfinite(fn, "sigma", sigma, 0, b)) ||
        (rc = rl__first_nonfinite(fn, "sigma_next", sigma_next, 0, b)))
        return rc;
    return 0;
}

int rl_diffusion_sde_step(const float *x, const float *v, const float *sigma,
                          const float *sigma_next, double noise_level,
                          const float *noise, int64_t b, int64_t d,
                          float *x_next, float *logp)
{
    static const char fn[] = "rl_diffusion_sde_step";
    int rc = s_check_step(fn, sigma, sigma_next, noise_level, b, d);
    if (rc)
        return rc;
    if (!x || !v || !noise || !x_next)
        return rl_error_set(RL_EINVAL, "%s: x, v, noise and x_next must not be NULL", fn);
    for (int64_t i = 0; i < b; i++) {
        s_coef c;
        if ((rc = s_coef_of(fn, sigma[i], sigma_next[i], noise_level, i, &c)))
            return rc;
        double acc = 0.0;
        for (int64_t j = 0; j < d; j++) {
            const int64_t k = i * d + j;
            const double mean = c.cx * x[k] + c.cv * v[k];
            const float xn = (float)(mean + c.s * noise[k]);
            x_next[k] = xn;
            const double e = ((double)xn - mean) / c.s;
            acc += e * e;
        }
        if (!isfinite(acc)) {
            const rl__named_array in[] = {{"x", x}, {"v", v}, {"noise", noise}};
            return rl__row_overflow(fn, "step of row", i, i * d, d, in, 3);
        }
        if (logp)
            logp[i] = (float)(-0.5 * acc / (double)d - log(c.s) - S_LOG_SQRT_2PI);
    }
    return 0;
}

int rl_diffusion_sde_logprob(const float *x, const float *v,
                             const float *x_next, const float *sigma,
                             const float *sigma_next, double noise_level,
                             int64_t b, int64_t d, float *logp,
                             const float *grad_logp, float *grad_v)
{
    static const char fn[] = "rl_diffusion_sde_logprob";
    int rc = s_check_step(fn, sigma, sigma_next, noise_level, b, d);
    if (rc)
        return rc;
    if (!x || !v || !x_next || !logp)
        return rl_error_set(RL_EINVAL, "%s: x, v, x_next and logp must not be NULL", fn);
    for (int64_t i = 0; i < b; i++) {
        s_coef c;
        if ((rc = s_coef_of(fn, sigma[i], sigma_next[i], noise_level, i, &c)))
            return rc;
        const double gl = grad_logp ? grad_logp[i] : 1.0;
        if (!isfinite(gl))
            return rl_error_set(RL_ENUMERIC, "%s: grad_logp[%lld] is %g (not finite)", fn,
                                (long long)i, gl);
        const double inv_var = 1.0 / (c.s * c.s);
        const double gscale = gl * c.cv * inv_var / (double)d;
        double acc = 0.0;
        for (int64_t j = 0; j < d; j++) {
            const int64_t k = i * d + j;
            const double diff = (double)x_next[k] - (c.cx * x[k] + c.cv * v[k]);
            acc += diff * diff;
            if (grad_v)
                grad_v[k] = (float)(gscale * diff);
        }
        if (!isfinite(acc)) {
            const rl__named_array in[] = {{"x", x}, {"v", v}, {"x_next", x_next}};
            return rl__row_overflow(fn, "log-prob of row", i, i * d, d, in, 3);
        }
        logp[i] = (float)(-0.5 * acc * inv_var / (double)d - log(c.s) - S_LOG_SQRT_2PI);
    }
    return 0;
}

int rl_diffusion_sde_kl(const float *v, const float *v_ref, const float *sigma,
                        const float *sigma_next, double noise_level, int64_t b, int64_t d,
                        float *kl, const float *grad_kl, float *grad_v)
{
    static const char fn[] = "rl_diffusion_sde_kl";
    int rc = s_check_step(fn, sigma, sigma_next, noise_level, b, d);
    if (rc)
        return rc;
    if (!v || !v_ref || !kl)
        return rl_error_set(RL_EINVAL, "%s: v, v_ref and kl must not be NULL", fn);
    for (int64_t i = 0; i < b; i++) {
        s_coef c;
        if ((rc = s_coef_of(fn, sigma[i], sigma_next[i], noise_level, i, &c)))
            return rc;
        const double gk = grad_kl ? grad_kl[i] : 1.0;
        if (!isfinite(gk))
            return rl_error_set(RL_ENUMERIC, "%s: grad_kl[%lld] is %g (not finite)", fn,
                                (long long)i, gk);
        /* (mean − mean_ref)/s = cv·(v − v_ref)/s */
        const double scale = c.cv * c.cv / (c.s * c.s);
        const double gscale = gk * scale / (double)d;
        double acc = 0.0;
        for (int64_t j = 0; j < d; j++) {
            const int64_t k = i * d + j;
            const double diff = (double)v[k] - (double)v_ref[k];
            acc += diff * diff;
            if (grad_v)
                grad_v[k] = (float)(gscale * diff);
        }
        if (!isfinite(acc)) {
            const rl__named_array in[] = {{"v", v}, {"v_ref", v_ref}};
            return rl__row_overflow(fn, "KL of row", i, i * d, d, in, 2);
        }
        kl[i] = (float)(0.5 * scale * acc / (double)d);
    }
    return 0;
}
