/* pro_max.c — REINFORCE Pro Max advantages (seed 003; see advantage.h).
 *
 * One task per prompt group (OpenMP over groups). A group's rows are visited
 * in index order, so the statistics, and therefore every output bit, are the
 * same however dynamic batching shuffled the rows. Per group: pass 1 writes
 * the KL-shaped returns of each row and accumulates S±, Q±, |P|, |N| in the
 * same sweep; pass 2 rescales. A group of n rows × T tokens is small enough
 * to still be in cache for pass 2. */
#include "common/algo/advantage.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "rlrt/error.h"

/* Selects below evaluate both sides; see policy_loss.c. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-trapping-math")
#endif

#define S_UNIFORM_STD 1e-8 /* reward std below which a group is "all same" */

void rl_pro_max_cfg_default(rl_pro_max_cfg *cfg, int64_t n_samples)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->n_samples = n_samples;
    cfg->gamma = 1.0;
    cfg->kl_coef = 0.0;
    cfg->uniform_scale = 0;
    cfg->eps = 1e-8;
    cfg->max_scale = 10.0;
    cfg->ratio_sq_cap = 1e8;
}

typedef struct s_stats {
    double sp, sn, qp, qn;
    int64_t np, nn, nv; /* positive, negative, valid tokens */
} s_stats;

/* Returns of one row with γ = 1 into out (× mask), statistics into st.
 * Returns nonzero if a kl value at a valid position is not finite. */
static int s_row_returns(const float *kl, const float *m, int64_t T, double c,
                         double shaped, float *out, s_stats *st)
{
    int64_t last = T - 1;
    while (last >= 0 && m[last] == 0.0f)
        out[last--] = 0.0f;
    double run = 0.0, chk = 0.0;
    double sp = 0.0, sn = 0.0, qp = 0.0, qn = 0.0;
    int64_t np = 0, nn = 0, nv = 0;
    if (last >= 0)
        run = shaped;
    for (int64_t t = last; t >= 0; t--) {
        float mt = m[t];
        chk += (double)mt * 0.0;
        if (mt != 0.0f) {
            if (kl) {
                double k = kl[t];
                chk += k * 0.0;
                run -= c * k * mt;
            }
            double a = run * mt;
            out[t] = (float)a;
            nv++;
            if (a > 0.0) {
                sp += a;
                qp += a * a;
                np++;
            } else if (a < 0.0) {
                sn += a;
                qn += a * a;
                nn++;
            }
        } else {
            out[t] = 0.0f;
        }
    }
    st->sp += sp;
    st->sn += sn;
    st->qp += qp;
    st->qn += qn;
    st->np += np;
    st->nn += nn;
    st->nv += nv;
    return !isfinite(chk) || !isfinite(run);
}

/* α/β of seed 003 with its fallbacks; returns the group status. */
static rl_pro_max_group_status s_alpha_beta(const rl_pro_max_cfg *cfg, const s_stats *st,
                                            double *alpha, double *beta)
{
    if (st->np == 0 || st->nn == 0)
        return RL_PM_SAME_SIGN;
    if (fabs(st->sp) < cfg->eps || fabs(st->sn) < cfg->eps)
        return RL_PM_SMALL_SUM;
    double ratio = st->sp / st->sn;
    double rq = ratio * ratio * st->qn;
    if (rq > cfg->ratio_sq_cap)
        rq = cfg->ratio_sq_cap;
    double nnz = (double)(st->np + st->nn);
    double a = sqrt(nnz / (st->qp + rq + cfg->eps));
    double b = -a * ratio;
    if (!isfinite(a) || !isfinite(b))
        return RL_PM_NONFINITE;
    rl_pro_max_group_status s = RL_PM_NORMALIZED;
    if (a < cfg->eps || a > cfg->max_scale) {
        a = a < cfg->eps ? cfg->eps : cfg->max_scale;
        s = RL_PM_CLAMPED;
    }
    if (b < cfg->eps || b > cfg->max_scale) {
        b = b < cfg->eps ? cfg->eps : cfg->max_scale;
        s = RL_PM_CLAMPED;
    }
    *alpha = a;
    *beta = b;
    return s;
}

int rl_adv_pro_max(const rl_pro_max_cfg *cfg_in, const float *rewards, const float *kl,
                   const float *mask, const int64_t *index, const int64_t *prompt_id,
                   int64_t B, int64_t T, float *adv, uint8_t *group_status,
                   rl_pro_max_result *res)
{
    const char *fn = "rl_adv_pro_max";
    if (!cfg_in || !rewards || !mask || !adv)
        return rl_error_set(RL_EINVAL, "%s: NULL argument (cfg, rewards, mask, adv)", fn);
    rl_pro_max_cfg cfg = *cfg_in;
    if (cfg.eps == 0.0)
        cfg.eps = 1e-8;
    if (cfg.max_scale == 0.0)
        cfg.max_scale = 10.0;
    if (cfg.ratio_sq_cap == 0.0)
        cfg.ratio_sq_cap = 1e8;
    if (!(cfg.eps > 0.0) || !(cfg.max_scale >= cfg.eps) || !(cfg.ratio_sq_cap > 0.0) ||
        !isfinite(cfg.max_scale) || !isfinite(cfg.kl_coef))
        return rl_error_set(RL_EINVAL,
                            "%s: bad config eps=%g max_scale=%g ratio_sq_cap=%g kl_coef=%g",
                            fn, cfg.eps, cfg.max_scale, cfg.ratio_sq_cap, cfg.kl_coef);
    int64_t n = cfg.n_samples;
    if (B < 0 || T < 0 || (T > 0 && B > INT64_MAX / T))
        return rl_error_set(RL_ESHAPE, "%s: bad shape B=%lld T=%lld", fn, (long long)B,
                            (long long)T);
    if (n < 2)
        return rl_error_set(RL_ESHAPE, "%s: n_samples_per_prompt must be > 1 (got %lld)", fn,
                            (long long)n);
    if (B % n != 0)
        return rl_error_set(RL_ESHAPE,
                            "%s: batch of %lld rows is not a multiple of n_samples_per_prompt=%lld",
                            fn, (long long)B, (long long)n);
    unsigned warnings = 0;
    if (cfg.gamma != 1.0)
        warnings |= RL_PM_WARN_GAMMA_FORCED;
    for (int64_t b = 0; b < B; b++)
        if (!isfinite(rewards[b]))
            return rl_error_set(RL_ENUMERIC, "%s: rewards[%lld] is %g", fn, (long long)b,
                                (double)rewards[b]);

    int64_t G = B / n;
    size_t nb = (size_t)(B > 0 ? B : 1);
    int64_t *order = malloc(nb * sizeof *order);   /* order[index] = row */
    double *shaped = malloc(nb * sizeof *shaped);  /* by index */
    uint8_t *status = malloc((size_t)(G > 0 ? G : 1));
    int *badkl = malloc((size_t)(G > 0 ? G : 1) * sizeof *badkl);
    double *mom = malloc((size_t)(G > 0 ? G : 1) * 3 * sizeof *mom); /* Σ, Σ², n */
    if (!order || !shaped || !status || !badkl || !mom) {
        free(mom);
        free(order);
        free(shaped);
        free(status);
        free(badkl);
        return rl_error_set(RL_ENOMEM, "%s: scratch for %lld rows", fn, (long long)B);
    }
    int rc = RL_OK;
    for (int64_t b = 0; b < B; b++)
        order[b] = -1;
    for (int64_t b = 0; b < B && !rc; b++) {
        int64_t i = index ? index[b] : b;
        if (i < 0 || i >= B)
            rc = rl_error_set(RL_EINVAL,
                              "%s: indices must be a permutation of 0..%lld: index[%lld] = %lld "
                              "is out of range",
                              fn, (long long)(B - 1), (long long)b, (long long)i);
        else if (order[i] >= 0)
            rc = rl_error_set(RL_EINVAL,
                              "%s: indices must be a permutation of 0..%lld: index %lld appears "
                              "twice (rows %lld and %lld)",
                              fn, (long long)(B - 1), (long long)i, (long long)order[i],
                              (long long)b);
        else
            order[i] = b;
    }
    for (int64_t g = 0; g < G && !rc && prompt_id; g++) {
        int64_t r0 = order[g * n];
        for (int64_t j = 1; j < n; j++) {
            int64_t rj = order[g * n + j];
            if (prompt_id[rj] != prompt_id[r0]) {
                rc = rl_error_set(RL_EINVAL,
                                  "%s: group %lld (indices %lld..%lld) holds two prompts: row "
                                  "%lld has prompt_id %lld, row %lld has prompt_id %lld",
                                  fn, (long long)g, (long long)(g * n),
                                  (long long)(g * n + n - 1), (long long)r0,
                                  (long long)prompt_id[r0], (long long)rj,
                                  (long long)prompt_id[rj]);
                break;
            }
        }
    }
    if (rc)
        goto out;

    /* Step 1: RLOO shaping (or r/n for uniform groups with uniform_scale). */
    for (int64_t g = 0; g < G; g++) {
        double sum = 0.0;
        for (int64_t j = 0; j < n; j++)
            sum += rewards[order[g * n + j]];
        double mean = sum / (double)n, ss = 0.0;
        for (int64_t j = 0; j < n; j++) {
            double d = rewards[order[g * n + j]] - mean;
            ss += d * d;
        }
        int uniform = cfg.uniform_scale && sqrt(ss / (double)(n - 1)) < S_UNIFORM_STD;
        status[g] = uniform ? RL_PM_UNIFORM : RL_PM_NORMALIZED;
        for (int64_t j = 0; j < n; j++) {
            double r = rewards[order[g * n + j]];
            shaped[g * n + j] = uniform ? r / (double)n : r - (sum - r) / (double)(n - 1);
        }
    }

    /* Steps 2-3: token returns, statistics, adaptive normalisation. */
    double c = (kl && cfg.kl_coef > 0.0) ? cfg.kl_coef : 0.0;
    const float *klp = c != 0.0 ? kl : NULL;
#pragma omp parallel for schedule(dynamic, 1)
    for (int64_t g = 0; g < G; g++) {
        s_stats st = {0};
        int bad = 0;
        for (int64_t j = 0; j < n; j++) {
            int64_t row = order[g * n + j];
            bad |= s_row_returns(klp ? klp + row * T : NULL, mask + row * T, T, c,
                                 shaped[g * n + j], adv + row * T, &st);
        }
        badkl[g] = bad;
        /* moments of the final advantages over valid tokens, for metrics */
        mom[3 * g] = st.sp + st.sn;
        mom[3 * g + 1] = st.qp + st.qn;
        mom[3 * g + 2] = (double)st.nv;
        if (bad || status[g] == RL_PM_UNIFORM)
            continue;
        double alpha = 1.0, beta = 1.0;
        status[g] = (uint8_t)s_alpha_beta(&cfg, &st, &alpha, &beta);
        if (status[g] != RL_PM_NORMALIZED && status[g] != RL_PM_CLAMPED)
            continue;
        mom[3 * g] = alpha * st.sp + beta * st.sn;
        mom[3 * g + 1] = alpha * alpha * st.qp + beta * beta * st.qn;
        float fa = (float)alpha, fb = (float)beta;
        for (int64_t j = 0; j < n; j++) {
            float *o = adv + order[g * n + j] * T;
#pragma omp simd
            for (int64_t t = 0; t < T; t++) {
                float a = o[t];
                o[t] = a > 0.0f ? fa * a : fb * a;
            }
        }
    }
    for (int64_t g = 0; g < G; g++)
        if (badkl[g]) {
            /* Slow path: name the first bad kl value in row-major order. */
            for (int64_t i = 0; i < B * T; i++)
                if (!isfinite(mask[i]) || (klp && mask[i] != 0.0f && !isfinite(klp[i]))) {
                    int m_bad = !isfinite(mask[i]);
                    rc = rl_error_set(RL_ENUMERIC, "%s: %s[%lld, %lld] is %g", fn,
                                      m_bad ? "mask" : "kl", (long long)(i / T),
                                      (long long)(i % T),
                                      m_bad ? (double)mask[i] : (double)klp[i]);
                    break;
                }
            if (!rc)
                rc = rl_error_set(RL_ENUMERIC, "%s: returns of group %lld overflow", fn,
                                  (long long)g);
            goto out;
        }

    if (group_status)
        memcpy(group_status, status, (size_t)G);
    if (res) {
        memset(res, 0, sizeof *res);
        res->warnings = warnings;
        res->n_groups = G;
        double s1 = 0.0, s2 = 0.0, nv = 0.0, rs = 0.0;
        for (int64_t g = 0; g < G; g++) {
            s1 += mom[3 * g];
            s2 += mom[3 * g + 1];
            nv += mom[3 * g + 2];
        }
        for (int64_t k = 0; k < B; k++)
            rs += shaped[k];
        res->adv_mean = nv > 0 ? s1 / nv : 0.0;
        double var = nv > 0 ? s2 / nv - res->adv_mean * res->adv_mean : 0.0;
        res->adv_std = var > 0 ? sqrt(var) : 0.0;
        res->reward_mean = B > 0 ? rs / (double)B : 0.0;
        for (int64_t g = 0; g < G; g++) {
            switch (status[g]) {
            case RL_PM_NORMALIZED: res->n_normalized++; break;
            case RL_PM_CLAMPED: res->n_normalized++; res->n_clamped++; break;
            case RL_PM_UNIFORM: res->n_uniform++; break;
            case RL_PM_SAME_SIGN: res->n_same_sign++; break;
            case RL_PM_SMALL_SUM: res->n_small_sum++; break;
            default: res->n_nonfinite++; break;
            }
        }
    }
out:
    free(mom);
    free(order);
    free(shaped);
    free(status);
    free(badkl);
    return rc;
}
