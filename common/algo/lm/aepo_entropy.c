/* aepo_entropy.c — AEPO token entropy (forward/backward), forward window
 * entropy, per-response percentile and HWE flags. See common/algo/lm/aepo.h. */
#include "common/algo/lm/aepo.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "rlrt/error.h"

const char *rl_aepo_bucket_name(int bucket)
{
    switch (bucket) {
    case RL_AEPO_EASY: return "easy";
    case RL_AEPO_MEDIUM: return "medium";
    case RL_AEPO_HARD: return "hard";
    default: return "unknown";
    }
}

/* Per-row softmax statistics in double, shifted by the row max m so that
 * exp never overflows: s = Σ e^(z−m), ez = Σ e^(z−m)(z−m) / s.
 * H = log s − ez. Returns the column of a bad logit (NaN/+inf), V if the
 * row is all −inf, or −1 when fine. */
static int64_t s_row_stats(const float *z, int64_t V, double *m_out, double *s_out,
                           double *ez_out)
{
    double m = -INFINITY;
    for (int64_t j = 0; j < V; j++) {
        float v = z[j];
        if (isnan(v) || v == INFINITY)
            return j;
        if (v > m)
            m = v;
    }
    if (m == -INFINITY)
        return V;
    double s = 0, a = 0;
    for (int64_t j = 0; j < V; j++) {
        if (z[j] == -INFINITY)
            continue;
        double d = (double)z[j] - m;
        double e = exp(d);
        s += e;
        a += e * d;
    }
    *m_out = m;
    *s_out = s;
    *ez_out = a / s;
    return -1;
}

static int s_check_nv(const char *fn, int64_t N, int64_t V)
{
    if (N < 0 || V < 1)
        return rl_error_set(RL_EINVAL, "%s: need N >= 0 and V >= 1, got N=%lld V=%lld", fn,
                            (long long)N, (long long)V);
    return 0;
}

/* Rows are independent, so they are split over threads; the first bad row
 * (lowest index) is reported so the message does not depend on scheduling. */
int rl_aepo_token_entropy(const float *logits, int64_t N, int64_t V, float *H)
{
    int rc = s_check_nv("rl_aepo_token_entropy", N, V);
    if (rc)
        return rc;
    if (N > 0 && (!logits || !H))
        return rl_error_set(RL_EINVAL, "rl_aepo_token_entropy: logits and H must be non-NULL");
    int64_t bad_row = N, bad_col = 0;
#pragma omp parallel for schedule(static) if (N * V > (1 << 16))
    for (int64_t n = 0; n < N; n++) {
        double m, s, ez;
        int64_t c = s_row_stats(logits + n * V, V, &m, &s, &ez);
        if (c >= 0) {
#pragma omp critical(rl_aepo_bad)
            if (n < bad_row) {
                bad_row = n;
                bad_col = c;
            }
            H[n] = NAN;
            continue;
        }
        double h = log(s) - ez;
        H[n] = (float)(h > 0 ? h : 0); /* rounding can leave −1e-17 for a one-hot row */
    }
    if (bad_row < N) {
        if (bad_col == V)
            return rl_error_set(RL_ENUMERIC, "rl_aepo_token_entropy: logits row %lld is all -inf",
                                (long long)bad_row);
        return rl_error_set(RL_ENUMERIC, "rl_aepo_token_entropy: logits[%lld,%lld] = %g (NaN/+inf)",
                            (long long)bad_row, (long long)bad_col,
                            (double)logits[bad_row * V + bad_col]);
    }
    return 0;
}

int rl_aepo_token_entropy_backward(const float *logits, const float *dH, int64_t N,
                                   int64_t V, float *dlogits, int accumulate)
{
    int rc = s_check_nv("rl_aepo_token_entropy_backward", N, V);
    if (rc)
        return rc;
    if (N > 0 && (!logits || !dH || !dlogits))
        return rl_error_set(RL_EINVAL,
                            "rl_aepo_token_entropy_backward: logits, dH and dlogits must be non-NULL");
    for (int64_t n = 0; n < N; n++)
        if (!isfinite(dH[n]))
            return rl_error_set(RL_ENUMERIC, "rl_aepo_token_entropy_backward: dH[%lld] = %g",
                                (long long)n, (double)dH[n]);
    int64_t bad_row = N, bad_col = 0;
#pragma omp parallel for schedule(static) if (N * V > (1 << 16))
    for (int64_t n = 0; n < N; n++) {
        const float *z = logits + n * V;
        float *g = dlogits + n * V;
        double m, s, ez;
        int64_t c = s_row_stats(z, V, &m, &s, &ez);
        if (c >= 0) {
#pragma omp critical(rl_aepo_bad)
            if (n < bad_row) {
                bad_row = n;
                bad_col = c;
            }
            continue;
        }
        /* dH/dz_j = −p_j (z_j − E_p[z]); with the shift, z_j − E[z] =
         * (z_j − m) − ez. */
        double scale = -(double)dH[n] / s;
        for (int64_t j = 0; j < V; j++) {
            double gj = 0;
            if (z[j] != -INFINITY) {
                double d = (double)z[j] - m;
                gj = scale * exp(d) * (d - ez);
            }
            g[j] = accumulate ? (float)((double)g[j] + gj) : (float)gj;
        }
    }
    if (bad_row < N) {
        if (bad_col == V)
            return rl_error_set(RL_ENUMERIC,
                                "rl_aepo_token_entropy_backward: logits row %lld is all -inf",
                                (long long)bad_row);
        return rl_error_set(RL_ENUMERIC,
                            "rl_aepo_token_entropy_backward: logits[%lld,%lld] = %g (NaN/+inf)",
                            (long long)bad_row, (long long)bad_col,
                            (double)logits[bad_row * V + bad_col]);
    }
    return 0;
}

static int s_check_bt(const char *fn, int64_t B, int64_t T)
{
    if (B < 0 || T < 0)
        return rl_error_set(RL_EINVAL, "%s: need B >= 0 and T >= 0, got B=%lld T=%lld", fn,
                            (long long)B, (long long)T);
    return 0;
}

int rl_aepo_window_entropy(const float *H, const float *mask, int64_t B, int64_t T,
                           int window, float *win, uint8_t *win_valid)
{
    const char *fn = "rl_aepo_window_entropy";
    int rc = s_check_bt(fn, B, T);
    if (rc)
        return rc;
    if (window < 1)
        return rl_error_set(RL_EINVAL, "%s: window must be >= 1, got %d", fn, window);
    if (B * T > 0 && (!H || !mask || !win || !win_valid))
        return rl_error_set(RL_EINVAL, "%s: H, mask, win and win_valid must be non-NULL", fn);
    int64_t *pos = malloc(sizeof *pos * (size_t)(T > 0 ? T : 1));
    if (!pos)
        return rl_error_set(RL_ENOMEM, "%s: out of memory", fn);
    for (int64_t b = 0; b < B; b++) {
        const float *h = H + b * T, *mk = mask + b * T;
        float *o = win + b * T;
        uint8_t *ov = win_valid + b * T;
        memset(ov, 0, (size_t)T);
        int64_t L = 0;
        for (int64_t t = 0; t < T; t++) {
            o[t] = 0;
            if (mk[t] != 0) {
                if (!isfinite(h[t])) {
                    free(pos);
                    return rl_error_set(RL_ENUMERIC, "%s: H[%lld,%lld] = %g at a valid position", fn,
                                        (long long)b, (long long)t, (double)h[t]);
                }
                pos[L++] = t;
            }
        }
        /* Sliding sum over the valid tokens k+1..k+w, recomputed per window
         * (w is small) so each mean has the same summation order as a
         * direct evaluation. */
        for (int64_t k = 0; k + window <= L - 1; k++) {
            double acc = 0;
            for (int i = 1; i <= window; i++)
                acc += h[pos[k + i]];
            o[pos[k]] = (float)(acc / window);
            ov[pos[k]] = 1;
        }
    }
    free(pos);
    return 0;
}

static int s_cmp_float(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

int rl_aepo_window_percentile(const float *win, const uint8_t *win_valid, int64_t B,
                              int64_t T, double q, float *pct, uint8_t *has_pct)
{
    const char *fn = "rl_aepo_window_percentile";
    int rc = s_check_bt(fn, B, T);
    if (rc)
        return rc;
    if (!(q >= 0 && q <= 100))
        return rl_error_set(RL_EINVAL, "%s: q must be in [0, 100], got %g", fn, q);
    if (B > 0 && (!pct || !has_pct || (T > 0 && (!win || !win_valid))))
        return rl_error_set(RL_EINVAL, "%s: NULL array", fn);
    float *buf = malloc(sizeof *buf * (size_t)(T > 0 ? T : 1));
    if (!buf)
        return rl_error_set(RL_ENOMEM, "%s: out of memory", fn);
    for (int64_t b = 0; b < B; b++) {
        int64_t n = 0;
        for (int64_t t = 0; t < T; t++)
            if (win_valid[b * T + t]) {
                float v = win[b * T + t];
                if (!isfinite(v)) {
                    free(buf);
                    return rl_error_set(RL_ENUMERIC, "%s: win[%lld,%lld] = %g", fn, (long long)b,
                                        (long long)t, (double)v);
                }
                buf[n++] = v;
            }
        if (n == 0) {
            pct[b] = 0;
            has_pct[b] = 0;
            continue;
        }
        qsort(buf, (size_t)n, sizeof *buf, s_cmp_float);
        double p = q / 100.0 * (double)(n - 1);
        int64_t lo = (int64_t)floor(p);
        if (lo > n - 1)
            lo = n - 1;
        int64_t hi = lo + 1 < n ? lo + 1 : n - 1;
        double frac = p - (double)lo;
        double v = (double)buf[lo] + ((double)buf[hi] - (double)buf[lo]) * frac;
        pct[b] = (float)v;
        has_pct[b] = 1;
    }
    free(buf);
    return 0;
}

int rl_aepo_hwe(const float *win, const uint8_t *win_valid, const uint8_t *cand,
                int64_t B, int64_t T, double tau, uint8_t *flags, float *counts)
{
    const char *fn = "rl_aepo_hwe";
    int rc = s_check_bt(fn, B, T);
    if (rc)
        return rc;
    if (!isfinite(tau))
        return rl_error_set(RL_ENUMERIC, "%s: tau = %g must be finite", fn, tau);
    if (B * T > 0 && (!win || !win_valid))
        return rl_error_set(RL_EINVAL, "%s: win and win_valid must be non-NULL", fn);
    for (int64_t b = 0; b < B; b++) {
        int64_t c = 0;
        for (int64_t t = 0; t < T; t++) {
            int64_t i = b * T + t;
            int f = win_valid[i] && (!cand || cand[i]) && (double)win[i] >= tau;
            c += f;
            if (flags)
                flags[i] = (uint8_t)f;
        }
        if (counts)
            counts[b] = (float)c;
    }
    return 0;
}
