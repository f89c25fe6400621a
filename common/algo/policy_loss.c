/* policy_loss.c — PPO clipped policy loss, gradient and metrics (see
 * common/algo/policy_loss.h).
 *
 * Every aggregation mode is a weighted sum Σ_b w_b Σ_t X[b,t]·m[b,t] with a
 * per-row weight w_b, so the gradient of a token is w_b·m·dX and one sweep
 * over a row produces its loss share and its gradient. Only the modes whose
 * weights depend on the mask (token-mean without a given norm, both
 * seq-mean modes) need a first sweep over it.
 *
 * Per-token arithmetic is in float (a vectorisable exp below); every sum is
 * in double, per row, then over rows in row order, so results do not depend
 * on the OpenMP thread count. */
#include "common/algo/policy_loss.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/core/finite.h"
#include "common/core/util.h"
#include "rlrt/error.h"

/* The token loop selects between values computed on every lane; without
 * this GCC keeps a branch per select (a select could hide an FP trap) and
 * the loop does not vectorise. NaN/Inf semantics are unchanged. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-trapping-math")
#endif

int rl_loss_agg_parse(const char *name, rl_loss_agg *out)
{
    static const rl_name_value t[] = {
        {"token-mean", RL_AGG_TOKEN_MEAN},
        {"seq-mean-token-sum", RL_AGG_SEQ_MEAN_TOKEN_SUM},
        {"seq-mean-token-mean", RL_AGG_SEQ_MEAN_TOKEN_MEAN},
        {"seq-mean-token-sum-norm", RL_AGG_SEQ_MEAN_TOKEN_SUM_NORM}};
    int v, rc = rl_name_lookup(t, sizeof t / sizeof t[0], name, out ? &v : NULL, "rl_loss_agg_parse",
                               "loss_agg_mode",
                               "token-mean, seq-mean-token-sum, seq-mean-token-mean, "
                               "seq-mean-token-sum-norm");
    if (!rc)
        *out = (rl_loss_agg)v;
    return rc;
}

void rl_ppo_loss_cfg_default(rl_ppo_loss_cfg *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->clip_ratio_low = 0.2;
    cfg->clip_ratio_high = 0.2;
    cfg->clip_ratio_c = 3.0;
    cfg->agg = RL_AGG_TOKEN_MEAN;
    cfg->kl_kind = RL_KL_K3;
}

/* exp(x) for x in [−20, 20] (the clamped log-ratio), branch-free so that the
 * token loop vectorises: Cody-Waite reduction by ln 2 and a degree-6
 * polynomial on |r| ≤ ln2/2 (relative error below 2e-7). */
static inline float s_expf(float x)
{
    float kf = x * 1.44269504088896341f;
    float k = (kf + 12582912.0f) - 12582912.0f; /* round to nearest */
    float r = x - k * 0.693359375f;
    r = r - k * -2.12194440e-4f;
    float p = 1.0f / 720.0f;
    p = p * r + 1.0f / 120.0f;
    p = p * r + 1.0f / 24.0f;
    p = p * r + 1.0f / 6.0f;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    int32_t ki = (int32_t)k;
    int32_t bits;
    memcpy(&bits, &p, sizeof bits);
    bits += ki * (1 << 23);
    memcpy(&p, &bits, sizeof p);
    return p;
}

typedef struct s_row {
    double pg, ent, kl, clip, lower, ppokl, msum, chk;
} s_row;

/* Loss share and gradient of one row's clipped surrogate. Compiled twice
 * (AVX2 and baseline x86-64, chosen once at load time): the same machine
 * always runs the same code, so results stay bit-reproducible there. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
__attribute__((target_clones("avx2", "default")))
#endif
static void s_pg_row(const float *restrict lp, const float *restrict ol,
                     const float *restrict ad, const float *restrict mk,
                     float *restrict g, int64_t T, float w, float lo, float hi, float c,
                     int dual, s_row *acc)
{
    /* Counts are exact in float (mask is 0/1, T < 2^24); sums are double. */
    double pg = 0.0, ppokl = 0.0;
    float clip = 0.0f, lower = 0.0f, msum = 0.0f;
    float chk = 0.0f;
    /* Branch-free (bitwise conditions, selects) so that the loop vectorises
     * at -O2; dual-clip off is the same code with the flag cleared. */
#pragma omp simd reduction(+ : pg, clip, lower, ppokl, msum, chk)
    for (int64_t t = 0; t < T; t++) {
        float m = mk[t];
        int valid = m != 0.0f;
        float A = ad[t];
        float nk = lp[t] - ol[t];
        float chk_t = nk * 0.0f + A * 0.0f; /* NaN iff nk or A is not finite */
        chk += m * 0.0f + (valid ? chk_t : 0.0f);
        int inr = (nk >= -20.0f) & (nk <= 20.0f);
        /* clamp; NaN (possible in padding) maps to −20 so exp stays finite */
        float nkc = nk >= -20.0f ? (nk <= 20.0f ? nk : 20.0f) : -20.0f;
        float r = s_expf(nkc);
        float dr = inr ? r : 0.0f;
        float rc = r < lo ? lo : r;
        rc = rc > hi ? hi : rc;
        float L1 = -A * r, L2 = -A * rc;
        /* L2 > L1 only when the ratio is outside [lo, hi], where L2 is
         * constant; on a tie both branches have the same slope (or A = 0),
         * so torch's half/half split equals the unclipped slope. */
        int c2 = L2 > L1;
        float Lc = c2 ? L2 : L1;
        float dL1 = -A * dr;
        float L3 = -A * c;
        int neg = dual & (A < 0.0f);
        int low = neg & (Lc > L3);
        int tie = neg & (Lc == L3);
        float L = low ? L3 : Lc;
        float dsel = tie ? 0.5f * dL1 : dL1;
        float dL = (c2 | low) ? 0.0f : dsel;
        float mv = valid ? m : 0.0f;
        g[t] = w * mv * dL;
        pg += (double)(valid ? L : 0.0f) * mv;
        clip += c2 ? mv : 0.0f;
        lower += low ? mv : 0.0f;
        ppokl += (double)(-nkc * mv);
        msum += mv;
    }
    acc->pg = pg;
    acc->clip = clip;
    acc->lower = lower;
    acc->ppokl = ppokl;
    acc->msum = msum;
    acc->chk = chk;
}

/* Per-row weights of an aggregation mode; rowm (B) are the mask row sums
 * (only read by the modes that need them). */
static void s_weights(rl_loss_agg agg, double norm, const double *rowm, int64_t B,
                      int64_t T, double *w)
{
    if (agg == RL_AGG_TOKEN_MEAN) {
        double n = norm;
        if (!(n > 0.0)) {
            n = 0.0;
            for (int64_t b = 0; b < B; b++)
                n += rowm[b];
        }
        for (int64_t b = 0; b < B; b++)
            w[b] = n > 0.0 ? 1.0 / n : 0.0;
    } else if (agg == RL_AGG_SEQ_MEAN_TOKEN_SUM || agg == RL_AGG_SEQ_MEAN_TOKEN_MEAN) {
        /* verl's agg_loss: rows without a valid token are left out of the
         * sequence mean; a given norm (verl's global_batch_size) replaces
         * the count of the other rows. */
        double n = norm;
        if (!(n > 0.0)) {
            n = 0.0;
            for (int64_t b = 0; b < B; b++)
                n += rowm[b] > 0.0;
        }
        for (int64_t b = 0; b < B; b++)
            w[b] = !(rowm[b] > 0.0) ? 0.0
                   : agg == RL_AGG_SEQ_MEAN_TOKEN_SUM ? 1.0 / n
                                                      : 1.0 / (n * (rowm[b] + 1e-8));
    } else {
        double n = norm > 0.0 ? norm : (double)T;
        for (int64_t b = 0; b < B; b++)
            w[b] = 1.0 / n;
    }
}

static int s_check_args(const char *fn, rl_loss_agg agg, double norm, int64_t B, int64_t T)
{
    if (B < 0 || T < 0 || (T > 0 && B > INT64_MAX / T))
        return rl_error_set(RL_ESHAPE, "%s: bad shape B=%lld T=%lld", fn, (long long)B,
                            (long long)T);
    if ((unsigned)agg > RL_AGG_SEQ_MEAN_TOKEN_SUM_NORM)
        return rl_error_set(RL_EINVAL, "%s: unknown aggregation mode %d", fn, (int)agg);
    if (!(norm >= 0.0) || !isfinite(norm))
        return rl_error_set(RL_EINVAL, "%s: norm=%g must be finite and >= 0", fn, norm);
    return RL_OK;
}

int rl_loss_aggregate(const float *value, const float *mask, int64_t B, int64_t T,
                      rl_loss_agg agg, double norm, double *result, float *weights)
{
    const char *fn = "rl_loss_aggregate";
    if (!value || !mask || !result)
        return rl_error_set(RL_EINVAL, "%s: NULL argument", fn);
    int rc = s_check_args(fn, agg, norm, B, T);
    if (rc)
        return rc;
    double *rowm = malloc((size_t)(B > 0 ? B : 1) * 3 * sizeof *rowm);
    if (!rowm)
        return rl_error_set(RL_ENOMEM, "%s: %lld rows", fn, (long long)B);
    double *w = rowm + B, *rs = w + B;
    rl__row_sums(mask, B, T, rowm);
    s_weights(agg, norm, rowm, B, T, w);
    int bad = 0;
#pragma omp parallel for schedule(static) reduction(| : bad)
    for (int64_t b = 0; b < B; b++) {
        double s = 0.0, chk = 0.0;
        for (int64_t t = 0; t < T; t++) {
            float m = mask[b * T + t];
            chk += (double)m * 0.0;
            if (m != 0.0f) {
                chk += (double)value[b * T + t] * 0.0;
                s += (double)value[b * T + t] * m;
            }
            if (weights)
                weights[b * T + t] = (float)(w[b] * m);
        }
        rs[b] = s;
        bad |= !isfinite(chk);
    }
    if (bad) {
        for (int64_t i = 0; i < B * T; i++)
            if (!isfinite(mask[i]) || (mask[i] != 0.0f && !isfinite(value[i]))) {
                int mb = !isfinite(mask[i]);
                rc = rl_error_set(RL_ENUMERIC, "%s: %s[%lld, %lld] is %g", fn,
                                  mb ? "mask" : "value", (long long)(i / T),
                                  (long long)(i % T), mb ? (double)mask[i] : (double)value[i]);
                break;
            }
    } else {
        double tot = 0.0;
        for (int64_t b = 0; b < B; b++)
            tot += w[b] * rs[b];
        *result = tot;
    }
    free(rowm);
    return rc;
}

/* Names the first NaN/Inf of the loss inputs at a valid position. */
static int s_report(const char *fn, const float *logp, const float *old_logp,
                    const float *adv, const float *mask, const float *entropy,
                    const float *ref_logp, int64_t B, int64_t T)
{
    for (int64_t i = 0; i < B * T; i++) {
        const char *what = NULL;
        double v = 0.0;
        if (!isfinite(mask[i]))
            what = "mask", v = mask[i];
        else if (mask[i] == 0.0f)
            continue;
        else if (!isfinite(logp[i]))
            what = "logp", v = logp[i];
        else if (!isfinite(old_logp[i]))
            what = "old_logp", v = old_logp[i];
        else if (!isfinite(adv[i]))
            what = "advantages", v = adv[i];
        else if (entropy && !isfinite(entropy[i]))
            what = "entropy", v = entropy[i];
        else if (ref_logp && !isfinite(ref_logp[i]))
            what = "ref_logp", v = ref_logp[i];
        if (what)
            return rl_error_set(RL_ENUMERIC, "%s: %s[%lld, %lld] is %g", fn, what,
                                (long long)(i / T), (long long)(i % T), v);
    }
    return rl_error_set(RL_ENUMERIC, "%s: the loss overflowed to a non-finite value", fn);
}

int rl_ppo_policy_loss(const rl_ppo_loss_cfg *cfg, const float *logp, const float *old_logp,
                       const float *adv, const float *mask, const float *entropy,
                       const float *ref_logp, int64_t B, int64_t T, float *grad_logp,
                       float *grad_entropy, rl_ppo_loss_out *out)
{
    const char *fn = "rl_ppo_policy_loss";
    if (!cfg || !logp || !old_logp || !adv || !mask || !grad_logp || !out)
        return rl_error_set(RL_EINVAL,
                            "%s: NULL argument (cfg, logp, old_logp, adv, mask, grad_logp, out)",
                            fn);
    int rc = s_check_args(fn, cfg->agg, cfg->norm, B, T);
    if (rc)
        return rc;
    if (!(cfg->clip_ratio_low >= 0.0 && cfg->clip_ratio_low < 1.0) ||
        !(cfg->clip_ratio_high >= 0.0) || !isfinite(cfg->clip_ratio_high))
        return rl_error_set(RL_EINVAL, "%s: clip_ratio_low=%g must be in [0, 1) and "
                                       "clip_ratio_high=%g finite and >= 0",
                            fn, cfg->clip_ratio_low, cfg->clip_ratio_high);
    int dual = cfg->clip_ratio_c != 0.0;
    if (dual && !(cfg->clip_ratio_c > 1.0 && isfinite(cfg->clip_ratio_c)))
        return rl_error_set(RL_EINVAL,
                            "%s: clip_ratio_c=%g must be > 1 for dual-clip (0 disables it)", fn,
                            cfg->clip_ratio_c);
    if (cfg->entropy_coeff != 0.0 && !entropy)
        return rl_error_set(RL_EINVAL, "%s: entropy_coeff=%g needs the entropy array", fn,
                            cfg->entropy_coeff);
    if (grad_entropy && !entropy)
        return rl_error_set(RL_EINVAL, "%s: grad_entropy given without entropy", fn);
    if (cfg->kl_loss_coef != 0.0 && !ref_logp)
        return rl_error_set(RL_EINVAL, "%s: kl_loss_coef=%g needs ref_logp", fn,
                            cfg->kl_loss_coef);
    if (!isfinite(cfg->entropy_coeff) || !isfinite(cfg->kl_loss_coef) ||
        (unsigned)cfg->kl_kind > RL_KL_K3 || !(cfg->kl_clamp >= 0.0))
        return rl_error_set(RL_EINVAL, "%s: bad entropy_coeff=%g, kl_loss_coef=%g, kl_kind=%d "
                                       "or kl_clamp=%g",
                            fn, cfg->entropy_coeff, cfg->kl_loss_coef, (int)cfg->kl_kind,
                            cfg->kl_clamp);

    size_t nb = (size_t)(B > 0 ? B : 1);
    double *rowm = malloc(nb * 2 * sizeof *rowm);
    s_row *acc = malloc(nb * sizeof *acc);
    if (!rowm || !acc) {
        free(rowm);
        free(acc);
        return rl_error_set(RL_ENOMEM, "%s: %lld rows", fn, (long long)B);
    }
    double *w = rowm + B;
    rl_loss_agg agg = cfg->agg;
    int need_rowm = (agg == RL_AGG_TOKEN_MEAN && !(cfg->norm > 0.0)) ||
                    agg == RL_AGG_SEQ_MEAN_TOKEN_SUM || agg == RL_AGG_SEQ_MEAN_TOKEN_MEAN;
    if (need_rowm)
        rl__row_sums(mask, B, T, rowm);
    s_weights(agg, cfg->norm, rowm, B, T, w);
    float lo = (float)(1.0 - cfg->clip_ratio_low), hi = (float)(1.0 + cfg->clip_ratio_high);
    float c = (float)cfg->clip_ratio_c;
    double ec = cfg->entropy_coeff, kc = cfg->kl_loss_coef;
    int use_ent = entropy != NULL, use_kl = ref_logp != NULL;

#pragma omp parallel for schedule(static)
    for (int64_t b = 0; b < B; b++) {
        const float *m = mask + b * T;
        float *g = grad_logp + b * T;
        double wb = w[b];
        s_row *a = &acc[b];
        s_pg_row(logp + b * T, old_logp + b * T, adv + b * T, m, g, T, (float)wb, lo, hi, c,
                 dual, a);
        a->ent = 0.0;
        a->kl = 0.0;
        if (use_ent) {
            /* The row is still in cache: a second short sweep keeps the
             * main loop free of optional terms. */
            const float *e = entropy + b * T;
            float *ge = grad_entropy ? grad_entropy + b * T : NULL;
            double s = 0.0, chk = 0.0;
            float gw = (float)(-ec * wb);
            for (int64_t t = 0; t < T; t++) {
                int valid = m[t] != 0.0f;
                s += valid ? (double)e[t] * m[t] : 0.0;
                chk += valid ? (double)e[t] * 0.0 : 0.0;
                if (ge)
                    ge[t] = valid ? gw * m[t] : 0.0f;
            }
            a->ent = s;
            a->chk += chk;
        }
        if (use_kl) {
            const float *lp = logp + b * T, *rf = ref_logp + b * T;
            double s = 0.0, chk = 0.0;
            double kw = kc * wb;
            for (int64_t t = 0; t < T; t++) {
                if (m[t] == 0.0f)
                    continue;
                double d;
                double v = rl_kl_token(cfg->kl_kind, lp[t], rf[t], cfg->kl_clamp, &d);
                chk += (double)rf[t] * 0.0;
                s += v * m[t];
                if (kw != 0.0)
                    g[t] = (float)((double)g[t] + kw * m[t] * d);
            }
            a->kl = s;
            a->chk += chk;
        }
    }

    double pg = 0.0, ent = 0.0, kl = 0.0, clip = 0.0, lower = 0.0, ppokl = 0.0, msum = 0.0;
    int bad = 0;
    for (int64_t b = 0; b < B; b++) {
        const s_row *a = &acc[b];
        bad |= !isfinite(a->chk) || !isfinite(a->pg);
        pg += w[b] * a->pg;
        ent += w[b] * a->ent;
        kl += w[b] * a->kl;
        clip += a->clip;
        lower += a->lower;
        ppokl += a->ppokl;
        msum += a->msum;
    }
    if (bad) {
        rc = s_report(fn, logp, old_logp, adv, mask, entropy, ref_logp, B, T);
    } else {
        memset(out, 0, sizeof *out);
        out->pg_loss = pg;
        out->entropy = ent;
        out->kl_loss = kl;
        out->loss = pg - ec * ent + kc * kl;
        out->n_tokens = msum;
        out->clipfrac = msum > 0.0 ? clip / msum : 0.0;
        out->clipfrac_lower = msum > 0.0 ? lower / msum : 0.0;
        out->ppo_kl = msum > 0.0 ? ppokl / msum : 0.0;
    }
    free(rowm);
    free(acc);
    return rc;
}

/* Row statistics of softmax(z): max, Σ exp(z − max) and Σ exp(z − max)·z. */
static void s_softmax_stats(const float *z, int64_t V, double *mx, double *se, double *sez)
{
    double m = -INFINITY;
    for (int64_t v = 0; v < V; v++)
        m = z[v] > m ? z[v] : m;
    double a = 0.0, b = 0.0;
    for (int64_t v = 0; v < V; v++) {
        double e = exp((double)z[v] - m);
        a += e;
        b += e * z[v];
    }
    *mx = m;
    *se = a;
    *sez = b;
}

/* NULL pointers (ptrs_ok = 0), the shape, then every logit finite. */
static int s_check_logits(const char *fn, int ptrs_ok, const float *logits, int64_t N, int64_t V)
{
    if (!ptrs_ok)
        return rl_error_set(RL_EINVAL, "%s: NULL argument", fn);
    if (N < 0 || V < 1 || (N > 0 && V > INT64_MAX / N))
        return rl_error_set(RL_ESHAPE, "%s: bad shape N=%lld V=%lld", fn, (long long)N,
                            (long long)V);
    for (int64_t i = 0; i < N * V; i++)
        if (!isfinite(logits[i]))
            return rl_error_set(RL_ENUMERIC, "%s: logits[%lld, %lld] is %g", fn,
                                (long long)(i / V), (long long)(i % V), (double)logits[i]);
    return RL_OK;
}

int rl_entropy_from_logits(const float *logits, int64_t N, int64_t V, float *entropy)
{
    const char *fn = "rl_entropy_from_logits";
    int rc = s_check_logits(fn, logits && entropy, logits, N, V);
    if (rc)
        return rc;
#pragma omp parallel for schedule(static)
    for (int64_t n = 0; n < N; n++) {
        double m, se, sez;
        s_softmax_stats(logits + n * V, V, &m, &se, &sez);
        /* logsumexp = m + log(se); Σ p·z = sez / se */
        entropy[n] = (float)(m + log(se) - sez / se);
    }
    return RL_OK;
}

int rl_entropy_backward(const float *logits, const float *grad_entropy, int64_t N, int64_t V,
                        float *grad_logits)
{
    const char *fn = "rl_entropy_backward";
    int rc = s_check_logits(fn, logits && grad_entropy && grad_logits, logits, N, V);
    if (rc)
        return rc;
#pragma omp parallel for schedule(static)
    for (int64_t n = 0; n < N; n++) {
        const float *z = logits + n * V;
        double m, se, sez;
        s_softmax_stats(z, V, &m, &se, &sez);
        double ez = sez / se, g = grad_entropy[n];
        for (int64_t v = 0; v < V; v++) {
            double p = exp((double)z[v] - m) / se;
            grad_logits[n * V + v] = (float)(-g * p * ((double)z[v] - ez));
        }
    }
    return RL_OK;
}

int rl_value_loss(const float *vpred, const float *values, const float *returns,
                  const float *mask, int64_t B, int64_t T, double cliprange, rl_loss_agg agg,
                  double norm, double *loss, double *clipfrac, float *grad_vpred)
{
    const char *fn = "rl_value_loss";
    if (!vpred || !values || !returns || !mask || !loss || !grad_vpred)
        return rl_error_set(RL_EINVAL, "%s: NULL argument", fn);
    int rc = s_check_args(fn, agg, norm, B, T);
    if (rc)
        return rc;
    if (!isfinite(cliprange))
        return rl_error_set(RL_EINVAL, "%s: cliprange=%g must be finite", fn, cliprange);
    size_t nb = (size_t)(B > 0 ? B : 1);
    double *rowm = malloc(nb * 5 * sizeof *rowm);
    if (!rowm)
        return rl_error_set(RL_ENOMEM, "%s: %lld rows", fn, (long long)B);
    double *w = rowm + B, *rl = w + B, *rc2 = rl + B, *rchk = rc2 + B;
    rl__row_sums(mask, B, T, rowm);
    s_weights(agg, norm, rowm, B, T, w);
    int clip = cliprange > 0.0;
#pragma omp parallel for schedule(static)
    for (int64_t b = 0; b < B; b++) {
        double s = 0.0, nc = 0.0, chk = 0.0;
        for (int64_t t = 0; t < T; t++) {
            int64_t i = b * T + t;
            double m = mask[i];
            chk += m * 0.0;
            if (m == 0.0) {
                grad_vpred[i] = 0.0f;
                continue;
            }
            double vp = vpred[i], v = values[i], R = returns[i];
            chk += vp * 0.0 + v * 0.0 + R * 0.0;
            double vc = vp, dvc = 1.0;
            if (clip && (vp < v - cliprange || vp > v + cliprange)) {
                vc = vp < v - cliprange ? v - cliprange : v + cliprange;
                dvc = 0.0;
            }
            double e1 = vp - R, e2 = vc - R;
            double l1 = e1 * e1, l2 = e2 * e2;
            /* ½·max(l1, l2); torch.max splits a tie in half */
            double d = l2 > l1 ? e2 * dvc : (l1 > l2 ? e1 : 0.5 * (e1 + e2 * dvc));
            s += 0.5 * (l2 > l1 ? l2 : l1) * m;
            nc += (l2 > l1) * m;
            grad_vpred[i] = (float)(w[b] * m * d);
        }
        rl[b] = s;
        rc2[b] = nc;
        rchk[b] = chk;
    }
    double tot = 0.0, nclip = 0.0, ntok = 0.0;
    for (int64_t b = 0; b < B; b++) {
        if (!isfinite(rchk[b])) {
            for (int64_t t = 0; t < T; t++) {
                int64_t i = b * T + t;
                const char *what = !isfinite(mask[i]) ? "mask"
                                   : mask[i] == 0.0f ? NULL
                                   : !isfinite(vpred[i]) ? "vpred"
                                   : !isfinite(values[i]) ? "values"
                                   : !isfinite(returns[i]) ? "returns" : NULL;
                if (what) {
                    rc = rl_error_set(RL_ENUMERIC, "%s: %s[%lld, %lld] is not finite", fn,
                                      what, (long long)b, (long long)t);
                    break;
                }
            }
            if (!rc)
                rc = rl_error_set(RL_ENUMERIC, "%s: row %lld overflows", fn, (long long)b);
            break;
        }
        tot += w[b] * rl[b];
        nclip += rc2[b];
        ntok += rowm[b];
    }
    if (!rc) {
        *loss = tot;
        if (clipfrac)
            *clipfrac = ntok > 0.0 ? nclip / ntok : 0.0;
    }
    free(rowm);
    return rc;
}
