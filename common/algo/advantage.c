/* advantage.c — GAE, GRPO, RLOO, REINFORCE++ (and -baseline), whitening,
 * KL-shaped token rewards and cumulative returns (see common/algo/advantage.h).
 *
 * Rows are independent, so row loops run under OpenMP; every reduction is
 * kept per row in double and summed over rows in row order afterwards, which
 * makes the results independent of the thread count. */
#include "common/algo/advantage.h"

#include <math.h>
#include <stdlib.h>

#include "common/core/finite.h"
#include "rlrt/error.h"

/* ---- shared helpers --------------------------------------------------------- */

static int s_check_bt(const char *fn, int64_t B, int64_t T)
{
    if (B < 0 || T < 0)
        return rl_error_set(RL_ESHAPE, "%s: B and T must be >= 0 (got B=%lld, T=%lld)",
                            fn, (long long)B, (long long)T);
    if (T > 0 && B > INT64_MAX / T)
        return rl_error_set(RL_ESHAPE, "%s: B*T overflows (B=%lld, T=%lld)", fn,
                            (long long)B, (long long)T);
    return RL_OK;
}

/* NULL pointers (ptrs_ok = 0) are RL_EINVAL; then the shape check. */
static int s_check_args(const char *fn, int ptrs_ok, int64_t B, int64_t T)
{
    if (!ptrs_ok)
        return rl_error_set(RL_EINVAL, "%s: NULL argument", fn);
    return s_check_bt(fn, B, T);
}

/* First non-finite value of x at a valid position (row-major), or mask
 * itself non-finite; reports it as RL_ENUMERIC. Only called on the slow path
 * after a per-row check sum came out non-finite. */
static int s_report_bad(const char *fn, const char *xname, const float *x,
                        const float *mask, int64_t B, int64_t T)
{
    for (int64_t b = 0; b < B; b++)
        for (int64_t t = 0; t < T; t++) {
            int64_t i = b * T + t;
            if (mask && !isfinite(mask[i]))
                return rl_error_set(RL_ENUMERIC, "%s: mask[%lld, %lld] is %g", fn,
                                    (long long)b, (long long)t, (double)mask[i]);
            if (x && (!mask || mask[i] != 0.0f) && !isfinite(x[i]))
                return rl_error_set(RL_ENUMERIC, "%s: %s[%lld, %lld] is %g", fn, xname,
                                    (long long)b, (long long)t, (double)x[i]);
        }
    return RL_OK;
}

typedef struct s_pair { int64_t id, row; } s_pair;

static int s_pair_cmp(const void *a, const void *b)
{
    const s_pair *x = a, *y = b;
    if (x->id != y->id)
        return x->id < y->id ? -1 : 1;
    return (x->row > y->row) - (x->row < y->row);
}

int rl_group_runs(const int64_t *group, int64_t B, int64_t *perm,
                  int64_t *starts, int64_t *n_groups)
{
    if (!group || !perm || !starts || !n_groups)
        return rl_error_set(RL_EINVAL, "rl_group_runs: NULL argument");
    if (B < 0)
        return rl_error_set(RL_ESHAPE, "rl_group_runs: B = %lld < 0", (long long)B);
    s_pair *p = malloc((size_t)(B > 0 ? B : 1) * sizeof *p);
    if (!p)
        return rl_error_set(RL_ENOMEM, "rl_group_runs: %lld rows", (long long)B);
    for (int64_t b = 0; b < B; b++)
        p[b] = (s_pair){group[b], b};
    qsort(p, (size_t)B, sizeof *p, s_pair_cmp);
    int64_t g = 0;
    for (int64_t i = 0; i < B; i++) {
        if (i == 0 || p[i].id != p[i - 1].id)
            starts[g++] = i;
        perm[i] = p[i].row;
    }
    starts[g] = B;
    *n_groups = g;
    free(p);
    return RL_OK;
}

/* Per-row sums of x over all T (the verl score); RL_ENUMERIC on NaN/Inf. */
static int s_row_scores(const char *fn, const float *x, int64_t B, int64_t T, double *s)
{
    rl__row_sums(x, B, T, s);
    int bad = 0;
    for (int64_t b = 0; b < B; b++)
        bad |= !isfinite(s[b]);
    if (!bad)
        return RL_OK;
    for (int64_t i = 0; i < B * T; i++)
        if (!isfinite(x[i]))
            return rl_error_set(RL_ENUMERIC, "%s: token_rewards[%lld, %lld] is %g", fn,
                                (long long)(i / T), (long long)(i % T), (double)x[i]);
    return rl_error_set(RL_ENUMERIC, "%s: a row score overflows to Inf", fn);
}

/* adv[b, t] = a[b]·mask[b, t]; checks the mask is finite. */
static int s_broadcast(const char *fn, const double *a, const float *mask, int64_t B,
                       int64_t T, float *adv)
{
    int bad = 0;
#pragma omp parallel for schedule(static) reduction(| : bad)
    for (int64_t b = 0; b < B; b++) {
        const float *m = mask + b * T;
        float *o = adv + b * T;
        float v = (float)a[b];
        float chk = 0.0f;
#pragma omp simd reduction(+ : chk)
        for (int64_t t = 0; t < T; t++) {
            o[t] = v * m[t];
            chk += m[t] * 0.0f;
        }
        bad |= (chk != 0.0f);
    }
    return bad ? s_report_bad(fn, NULL, NULL, mask, B, T) : RL_OK;
}

typedef struct s_groups {
    int64_t *perm, *starts, n;
} s_groups;

static int s_groups_build(const char *fn, const int64_t *group, int64_t B, s_groups *g)
{
    g->perm = malloc((size_t)(B > 0 ? B : 1) * sizeof *g->perm);
    g->starts = malloc((size_t)(B + 1) * sizeof *g->starts);
    if (!g->perm || !g->starts) {
        free(g->perm);
        free(g->starts);
        return rl_error_set(RL_ENOMEM, "%s: group scratch for %lld rows", fn, (long long)B);
    }
    int rc = rl_group_runs(group, B, g->perm, g->starts, &g->n);
    if (rc) {
        free(g->perm);
        free(g->starts);
        return rl_error_wrap(rc, "%s", fn);
    }
    return RL_OK;
}

static void s_groups_free(s_groups *g)
{
    free(g->perm);
    free(g->starts);
}

/* Masked whitening of x in place over valid positions; x is already zero at
 * masked-out positions or not, mask decides. Unbiased variance (verl). */
static int s_whiten(const char *fn, float *x, const float *mask, int64_t B, int64_t T)
{
    double *rs = malloc((size_t)(B > 0 ? B : 1) * 2 * sizeof *rs);
    if (!rs)
        return rl_error_set(RL_ENOMEM, "%s: whitening scratch", fn);
    double *rc = rs + B;
#pragma omp parallel for schedule(static)
    for (int64_t b = 0; b < B; b++) {
        const float *xr = x + b * T, *m = mask + b * T;
        double s = 0.0, c = 0.0;
        for (int64_t t = 0; t < T; t++)
            if (m[t] != 0.0f) {
                s += (double)xr[t] * m[t];
                c += m[t];
            }
        rs[b] = s;
        rc[b] = c;
    }
    double sum = 0.0, cnt = 0.0;
    for (int64_t b = 0; b < B; b++) {
        sum += rs[b];
        cnt += rc[b];
    }
    double mean = cnt > 0 ? sum / cnt : 0.0;
#pragma omp parallel for schedule(static)
    for (int64_t b = 0; b < B; b++) {
        const float *xr = x + b * T, *m = mask + b * T;
        double s = 0.0;
        for (int64_t t = 0; t < T; t++)
            if (m[t] != 0.0f) {
                double d = (double)xr[t] - mean;
                s += d * d * m[t];
            }
        rs[b] = s;
    }
    double ss = 0.0;
    for (int64_t b = 0; b < B; b++)
        ss += rs[b];
    double var = cnt > 1 ? ss / cnt * (cnt / (cnt - 1.0)) : 0.0;
    double rstd = 1.0 / sqrt(var + RL_WHITEN_EPS);
#pragma omp parallel for schedule(static)
    for (int64_t b = 0; b < B; b++) {
        float *xr = x + b * T;
        const float *m = mask + b * T;
        for (int64_t t = 0; t < T; t++)
            xr[t] = m[t] != 0.0f ? (float)(((double)xr[t] - mean) * rstd * m[t]) : 0.0f;
    }
    free(rs);
    return RL_OK;
}

/* ---- public functions ---------------------------------------------------------- */

int rl_masked_whiten(const float *x, const float *mask, int64_t B, int64_t T, float *out)
{
    const char *fn = "rl_masked_whiten";
    int rc = s_check_args(fn, x && mask && out, B, T);
    if (rc)
        return rc;
    int bad = 0;
#pragma omp parallel for schedule(static) reduction(| : bad)
    for (int64_t b = 0; b < B; b++) {
        float chk = 0.0f;
        for (int64_t t = 0; t < T; t++) {
            int64_t i = b * T + t;
            float v = mask[i] != 0.0f ? x[i] : 0.0f;
            chk += v * 0.0f + mask[i] * 0.0f;
            out[i] = v;
        }
        bad |= (chk != 0.0f);
    }
    if (bad)
        return s_report_bad(fn, "x", x, mask, B, T);
    return s_whiten(fn, out, mask, B, T);
}

int rl_adv_gae(const float *rewards, const float *values, const float *mask, int64_t B,
               int64_t T, double gamma, double lam, int whiten, float *adv, float *ret)
{
    const char *fn = "rl_adv_gae";
    int rc = s_check_args(fn, rewards && values && mask && adv && ret, B, T);
    if (rc)
        return rc;
    if (!isfinite(gamma) || !isfinite(lam))
        return rl_error_set(RL_EINVAL, "%s: gamma=%g lam=%g must be finite", fn, gamma, lam);
    int bad = 0;
#pragma omp parallel for schedule(static) reduction(| : bad)
    for (int64_t b = 0; b < B; b++) {
        const float *r = rewards + b * T, *v = values + b * T, *m = mask + b * T;
        float *a = adv + b * T, *g = ret + b * T;
        double nextv = 0.0, last = 0.0, chk = 0.0;
        for (int64_t t = T - 1; t >= 0; t--) {
            double mt = m[t];
            chk += mt * 0.0;
            if (mt != 0.0) {
                chk += (double)r[t] * 0.0 + (double)v[t] * 0.0;
                double delta = r[t] + gamma * nextv - v[t];
                double l = delta + gamma * lam * last;
                /* verl blends with the mask so that masked tokens carry the
                 * value and the GAE over unchanged; m is 0/1 here. */
                nextv = v[t] * mt + (1.0 - mt) * nextv;
                last = l * mt + (1.0 - mt) * last;
                a[t] = (float)(last * mt);
                g[t] = (float)((last + v[t]) * mt);
            } else {
                a[t] = 0.0f;
                g[t] = 0.0f;
            }
        }
        bad |= !isfinite(chk);
    }
    if (bad) {
        rc = s_report_bad(fn, "rewards", rewards, mask, B, T);
        return rc ? rc : s_report_bad(fn, "values", values, mask, B, T);
    }
    return whiten ? s_whiten(fn, adv, mask, B, T) : RL_OK;
}

/* Shared body of GRPO / RLOO / REINFORCE++-baseline: per-row score, then a
 * per-group transform into the scalar advantage a[b]. */
typedef enum { S_GRPO, S_RLOO, S_RPP_BASE } s_outcome_kind;

static int s_outcome(const char *fn, s_outcome_kind kind, const float *token_rewards,
                     const int64_t *group, int64_t B, int64_t T, double eps, int norm_by_std,
                     double *a)
{
    int rc = s_row_scores(fn, token_rewards, B, T, a);
    if (rc)
        return rc;
    s_groups g;
    if ((rc = s_groups_build(fn, group, B, &g)))
        return rc;
    for (int64_t k = 0; k < g.n; k++) {
        const int64_t *rows = g.perm + g.starts[k];
        int64_t n = g.starts[k + 1] - g.starts[k];
        double sum = 0.0;
        for (int64_t i = 0; i < n; i++)
            sum += a[rows[i]];
        double mean = sum / (double)n;
        if (kind == S_GRPO) {
            double std = 1.0;
            if (n > 1) {
                double ss = 0.0;
                for (int64_t i = 0; i < n; i++) {
                    double d = a[rows[i]] - mean;
                    ss += d * d;
                }
                std = sqrt(ss / (double)(n - 1));
            } else {
                mean = 0.0;
            }
            for (int64_t i = 0; i < n; i++) {
                double s = a[rows[i]];
                a[rows[i]] = norm_by_std ? (s - mean) / (std + eps) : s - mean;
            }
        } else if (kind == S_RLOO) {
            if (n > 1)
                for (int64_t i = 0; i < n; i++) {
                    double s = a[rows[i]];
                    a[rows[i]] = s - (sum - s) / (double)(n - 1);
                }
        } else if (n > 1) {
            for (int64_t i = 0; i < n; i++)
                a[rows[i]] -= mean;
        }
    }
    s_groups_free(&g);
    return RL_OK;
}

/* The outcome estimators end to end: arguments, the per-row scalar, its
 * broadcast over the valid tokens, and (REINFORCE++-baseline) whitening. */
static int s_outcome_adv(const char *fn, s_outcome_kind kind, const float *token_rewards,
                         const float *mask, const int64_t *group, int64_t B, int64_t T,
                         double eps, int norm_by_std, float *adv, float *scores_out)
{
    int rc = s_check_args(fn, token_rewards && mask && group && adv, B, T);
    if (rc)
        return rc;
    if (kind == S_GRPO && (!(eps >= 0.0) || !isfinite(eps)))
        return rl_error_set(RL_EINVAL, "%s: eps=%g must be finite and >= 0", fn, eps);
    double *a = malloc((size_t)(B > 0 ? B : 1) * sizeof *a);
    if (!a)
        return rl_error_set(RL_ENOMEM, "%s: %lld rows", fn, (long long)B);
    rc = s_outcome(fn, kind, token_rewards, group, B, T, eps, norm_by_std, a);
    if (!rc)
        rc = s_broadcast(fn, a, mask, B, T, adv);
    if (!rc && scores_out)
        for (int64_t b = 0; b < B; b++)
            scores_out[b] = (float)a[b];
    if (!rc && kind == S_RPP_BASE)
        rc = s_whiten(fn, adv, mask, B, T);
    free(a);
    return rc;
}

int rl_adv_grpo(const float *token_rewards, const float *mask, const int64_t *group,
                int64_t B, int64_t T, double eps, int norm_by_std, float *adv,
                float *scores_out)
{
    return s_outcome_adv("rl_adv_grpo", S_GRPO, token_rewards, mask, group, B, T, eps,
                         norm_by_std, adv, scores_out);
}

int rl_adv_rloo(const float *token_rewards, const float *mask, const int64_t *group,
                int64_t B, int64_t T, float *adv)
{
    return s_outcome_adv("rl_adv_rloo", S_RLOO, token_rewards, mask, group, B, T, 0.0, 0, adv,
                         NULL);
}

int rl_adv_reinforce_pp_baseline(const float *token_rewards, const float *mask,
                                 const int64_t *group, int64_t B, int64_t T, float *adv)
{
    return s_outcome_adv("rl_adv_reinforce_pp_baseline", S_RPP_BASE, token_rewards, mask, group,
                         B, T, 0.0, 0, adv, NULL);
}

/* Discounted returns right to left over the valid tokens: REINFORCE++
 * (reset = 1) restarts the return at a masked position, as verl does (it
 * stores r_t + γ·G there and then resets; the stored value is masked away,
 * so only the reset matters); the cumulative returns (reset = 0) weigh each
 * reward by its mask and decay the return through masked positions. */
static int s_returns(const char *fn, const char *xname, const float *rewards, const float *mask,
                     int64_t B, int64_t T, double gamma, int reset, float *out, float *ret)
{
    if (!isfinite(gamma))
        return rl_error_set(RL_EINVAL, "%s: gamma=%g must be finite", fn, gamma);
    int bad = 0;
#pragma omp parallel for schedule(static) reduction(| : bad)
    for (int64_t b = 0; b < B; b++) {
        const float *r = rewards + b * T, *m = mask + b * T;
        float *o = out + b * T;
        double run = 0.0, chk = 0.0;
        for (int64_t t = T - 1; t >= 0; t--) {
            double mt = m[t];
            chk += mt * 0.0;
            if (mt != 0.0) {
                chk += (double)r[t] * 0.0;
                run = reset ? r[t] + gamma * run : r[t] * mt + gamma * run;
            } else {
                run = reset ? 0.0 : gamma * run;
            }
            o[t] = (float)(run * mt);
            if (ret)
                ret[b * T + t] = o[t];
        }
        bad |= !isfinite(chk);
    }
    return bad ? s_report_bad(fn, xname, rewards, mask, B, T) : RL_OK;
}

int rl_adv_reinforce_pp(const float *token_rewards, const float *mask, int64_t B,
                        int64_t T, double gamma, float *adv, float *ret)
{
    const char *fn = "rl_adv_reinforce_pp";
    int rc = s_check_args(fn, token_rewards && mask && adv, B, T);
    if (!rc)
        rc = s_returns(fn, "token_rewards", token_rewards, mask, B, T, gamma, 1, adv, ret);
    return rc ? rc : s_whiten(fn, adv, mask, B, T);
}

int rl_token_rewards_kl(const float *scores, const float *kl, const float *mask, int64_t B,
                        int64_t T, double kl_coef, float *out)
{
    const char *fn = "rl_token_rewards_kl";
    int rc = s_check_args(fn, scores && mask && out, B, T);
    if (rc)
        return rc;
    if (!isfinite(kl_coef))
        return rl_error_set(RL_EINVAL, "%s: kl_coef=%g must be finite", fn, kl_coef);
    for (int64_t b = 0; b < B; b++)
        if (!isfinite(scores[b]))
            return rl_error_set(RL_ENUMERIC, "%s: scores[%lld] is %g", fn, (long long)b,
                                (double)scores[b]);
    double c = (kl && kl_coef > 0.0) ? kl_coef : 0.0;
    int bad = 0;
#pragma omp parallel for schedule(static) reduction(| : bad)
    for (int64_t b = 0; b < B; b++) {
        const float *m = mask + b * T;
        float *o = out + b * T;
        int64_t last = -1;
        float chk = 0.0f;
        for (int64_t t = 0; t < T; t++) {
            chk += m[t] * 0.0f;
            if (m[t] != 0.0f) {
                last = t;
                float k = c != 0.0 ? kl[b * T + t] : 0.0f;
                chk += k * 0.0f;
                o[t] = (float)(-c * k * m[t]);
            } else {
                o[t] = 0.0f;
            }
        }
        if (last >= 0)
            o[last] = (float)((double)o[last] + scores[b]);
        bad |= (chk != 0.0f);
    }
    if (bad)
        return s_report_bad(fn, "kl", kl, mask, B, T);
    return RL_OK;
}

int rl_cumulative_returns(const float *rewards, const float *mask, int64_t B, int64_t T,
                          double gamma, float *out)
{
    const char *fn = "rl_cumulative_returns";
    int rc = s_check_args(fn, rewards && mask && out, B, T);
    return rc ? rc : s_returns(fn, "rewards", rewards, mask, B, T, gamma, 0, out, NULL);
}
