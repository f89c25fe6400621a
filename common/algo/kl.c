/* kl.c — KL estimators with gradients and KL controllers (see common/algo/kl.h). */
#include "common/algo/kl.h"

#include <math.h>
#include <string.h>

#include "common/core/util.h"
#include "rlrt/error.h"

int rl_kl_kind_parse(const char *name, rl_kl_kind *out)
{
    static const rl_name_value t[] = {
        {"kl", RL_KL_K1},  {"k1", RL_KL_K1},         {"abs", RL_KL_ABS},
        {"mse", RL_KL_K2}, {"k2", RL_KL_K2},         {"low_var_kl", RL_KL_K3},
        {"k3", RL_KL_K3}};
    int v, rc = rl_name_lookup(t, sizeof t / sizeof t[0], name, out ? &v : NULL, "rl_kl_kind_parse",
                               "KL estimator", "kl/k1, abs, mse/k2, low_var_kl/k3");
    if (!rc)
        *out = (rl_kl_kind)v;
    return rc;
}

const char *rl_kl_kind_name(rl_kl_kind kind)
{
    switch (kind) {
    case RL_KL_K1: return "k1";
    case RL_KL_ABS: return "abs";
    case RL_KL_K2: return "k2";
    case RL_KL_K3: return "k3";
    }
    return "?";
}

double rl_kl_token(rl_kl_kind kind, double logp, double ref_logp, double clamp,
                   double *dlogp)
{
    double v, d;
    double lr = logp - ref_logp;
    switch (kind) {
    case RL_KL_K1:
        v = lr;
        d = 1.0;
        break;
    case RL_KL_ABS:
        v = fabs(lr);
        d = lr > 0.0 ? 1.0 : (lr < 0.0 ? -1.0 : 0.0);
        break;
    case RL_KL_K2:
        v = 0.5 * lr * lr;
        d = lr;
        break;
    default: {
        double k = -lr;
        double dk = -1.0; /* d k / d logp */
        if (k < -20.0 || k > 20.0) {
            k = k < -20.0 ? -20.0 : 20.0;
            dk = 0.0;
        }
        double e = exp(k);
        v = e - k - 1.0;
        d = (e - 1.0) * dk;
        if (v < -10.0 || v > 10.0) {
            v = v < -10.0 ? -10.0 : 10.0;
            d = 0.0;
        }
        break;
    }
    }
    if (clamp > 0.0 && (v < -clamp || v > clamp)) {
        v = v < -clamp ? -clamp : clamp;
        d = 0.0;
    }
    if (dlogp)
        *dlogp = d;
    return v;
}

int rl_kl_penalty(const float *logp, const float *ref_logp, const float *mask, int64_t B,
                  int64_t T, rl_kl_kind kind, double clamp, float *kl, float *grad)
{
    const char *fn = "rl_kl_penalty";
    if (!logp || !ref_logp || !kl)
        return rl_error_set(RL_EINVAL, "%s: NULL argument (logp, ref_logp, kl)", fn);
    if (B < 0 || T < 0 || (T > 0 && B > INT64_MAX / T))
        return rl_error_set(RL_ESHAPE, "%s: bad shape B=%lld T=%lld", fn, (long long)B,
                            (long long)T);
    if ((unsigned)kind > RL_KL_K3)
        return rl_error_set(RL_EINVAL, "%s: unknown estimator %d", fn, (int)kind);
    if (!(clamp >= 0.0))
        return rl_error_set(RL_EINVAL, "%s: clamp=%g must be >= 0", fn, clamp);
    int bad = 0;
#pragma omp parallel for schedule(static) reduction(| : bad)
    for (int64_t b = 0; b < B; b++) {
        double chk = 0.0;
        for (int64_t t = 0; t < T; t++) {
            int64_t i = b * T + t;
            float m = mask ? mask[i] : 1.0f;
            chk += (double)m * 0.0;
            if (m != 0.0f) {
                chk += (double)logp[i] * 0.0 + (double)ref_logp[i] * 0.0;
                double d;
                double v = rl_kl_token(kind, logp[i], ref_logp[i], clamp, &d);
                kl[i] = (float)(v * m);
                if (grad)
                    grad[i] = (float)(d * m);
            } else {
                kl[i] = 0.0f;
                if (grad)
                    grad[i] = 0.0f;
            }
        }
        bad |= !isfinite(chk);
    }
    if (!bad)
        return RL_OK;
    for (int64_t i = 0; i < B * T; i++) {
        float m = mask ? mask[i] : 1.0f;
        const char *what = !isfinite(m) ? "mask"
                           : m == 0.0f ? NULL
                           : !isfinite(logp[i]) ? "logp"
                           : !isfinite(ref_logp[i]) ? "ref_logp" : NULL;
        if (what) {
            double val = what[0] == 'm' ? m : what[0] == 'l' ? logp[i] : ref_logp[i];
            return rl_error_set(RL_ENUMERIC, "%s: %s[%lld, %lld] is %g", fn, what,
                                (long long)(i / T), (long long)(i % T), val);
        }
    }
    return rl_error_set(RL_ENUMERIC, "%s: non-finite input", fn);
}

int rl_kl_ctl_init_fixed(rl_kl_ctl *ctl, double value)
{
    if (!ctl)
        return rl_error_set(RL_EINVAL, "rl_kl_ctl_init_fixed: NULL controller");
    if (!isfinite(value))
        return rl_error_set(RL_EINVAL, "rl_kl_ctl_init_fixed: value=%g must be finite", value);
    *ctl = (rl_kl_ctl){.adaptive = 0, .value = value, .target = 0.0, .horizon = 0.0};
    return RL_OK;
}

int rl_kl_ctl_init_adaptive(rl_kl_ctl *ctl, double init_value, double target, double horizon)
{
    if (!ctl)
        return rl_error_set(RL_EINVAL, "rl_kl_ctl_init_adaptive: NULL controller");
    if (!isfinite(init_value) || !(target > 0.0) || !isfinite(target) || !(horizon > 0.0) ||
        !isfinite(horizon))
        return rl_error_set(RL_EINVAL,
                            "rl_kl_ctl_init_adaptive: need finite init_value (%g), target > 0 "
                            "(%g) and horizon > 0 (%g)",
                            init_value, target, horizon);
    *ctl = (rl_kl_ctl){.adaptive = 1, .value = init_value, .target = target,
                       .horizon = horizon};
    return RL_OK;
}

int rl_kl_ctl_update(rl_kl_ctl *ctl, double current_kl, int64_t n_steps)
{
    if (!ctl)
        return rl_error_set(RL_EINVAL, "rl_kl_ctl_update: NULL controller");
    if (!isfinite(current_kl))
        return rl_error_set(RL_ENUMERIC, "rl_kl_ctl_update: current_kl is %g", current_kl);
    if (!ctl->adaptive)
        return RL_OK;
    double err = current_kl / ctl->target - 1.0;
    if (err < -0.2)
        err = -0.2;
    if (err > 0.2)
        err = 0.2;
    ctl->value *= 1.0 + err * (double)n_steps / ctl->horizon;
    return RL_OK;
}
