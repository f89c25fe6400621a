/* frechet.c — the Fréchet distance of two feature sets' Gaussians (see
 * common/metrics/frechet.h): statistics, then tr((C1·C2)^½) through two
 * symmetric eigen-decompositions (LAPACKE) and cblas_dgemm. */
#include "common/metrics/frechet.h"

#include <cblas.h>
#include <lapacke.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "rlrt/error.h"

int rl_frechet_stats(const float *x, int64_t n, int d, double *mu, double *cov)
{
    if (n < 2 || d < 1)
        return rl_error_set(RL_EINVAL, "frechet statistics: need at least 2 rows of at least 1 feature, "
                                       "got %lld rows of %d", (long long)n, d);
    for (int64_t i = 0; i < n * d; i++)
        if (!isfinite(x[i]))
            return rl_error_set(RL_ENUMERIC, "frechet statistics: row %lld, feature %lld is %g (not finite)",
                                (long long)(i / d), (long long)(i % d), (double)x[i]);
    for (int j = 0; j < d; j++) {
        double s = 0;
        for (int64_t i = 0; i < n; i++)
            s += x[i * d + j];
        mu[j] = s / (double)n;
    }
    memset(cov, 0, sizeof(double) * (size_t)d * (size_t)d);
    double *row = malloc(sizeof(double) * (size_t)d);
    if (!row)
        return rl_error_set(RL_ENOMEM, "frechet statistics: out of memory");
    for (int64_t i = 0; i < n; i++) {
        for (int j = 0; j < d; j++)
            row[j] = x[i * d + j] - mu[j];
        cblas_dsyr(CblasRowMajor, CblasUpper, d, 1.0, row, 1, cov, d);
    }
    free(row);
    for (int a = 0; a < d; a++)
        for (int b = a; b < d; b++) {
            cov[a * d + b] /= (double)(n - 1);
            cov[b * d + a] = cov[a * d + b];
        }
    return RL_OK;
}

/* The eigenvalues w (d) of the symmetric a (d, d), which becomes its
 * eigenvectors (columns, row-major). */
static int s_eig(double *a, double *w, int d, const char *what)
{
    lapack_int info = LAPACKE_dsyevd(LAPACK_ROW_MAJOR, 'V', 'U', d, a, d, w);
    if (info != 0)
        return rl_error_set(RL_ENUMERIC, "frechet distance: the eigen-decomposition of %s failed "
                                         "(LAPACKE_dsyevd info %d)", what, (int)info);
    return RL_OK;
}

int rl_frechet_distance(const double *mu1, const double *cov1, const double *mu2, const double *cov2,
                        int d, double *out)
{
    if (d < 1)
        return rl_error_set(RL_EINVAL, "frechet distance: dimension %d", d);
    size_t dd = (size_t)d * (size_t)d;
    for (size_t i = 0; i < dd; i++)
        if (!isfinite(cov1[i]) || !isfinite(cov2[i]))
            return rl_error_set(RL_ENUMERIC, "frechet distance: covariance %d holds a value that is not finite "
                                             "at (%zu, %zu)", isfinite(cov1[i]) ? 2 : 1, i / (size_t)d,
                                i % (size_t)d);
    double *v = malloc(sizeof(double) * (4 * dd + (size_t)d));
    if (!v)
        return rl_error_set(RL_ENOMEM, "frechet distance: out of memory (d = %d)", d);
    double *s = v + dd, *t = s + dd, *m = t + dd, *w = m + dd;
    memcpy(v, cov1, sizeof(double) * dd);
    int rc = s_eig(v, w, d, "the first covariance");
    if (!rc) {
        /* S = V·diag(√λ⁺)·Vᵀ: t = V·diag(√λ⁺), s = t·Vᵀ */
        for (int i = 0; i < d; i++)
            for (int k = 0; k < d; k++)
                t[i * d + k] = v[i * d + k] * sqrt(w[k] > 0 ? w[k] : 0.0);
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, d, d, d, 1.0, t, d, v, d, 0.0, s, d);
        /* M = S·C2·S, symmetrised against rounding */
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, d, d, d, 1.0, s, d, cov2, d, 0.0, t, d);
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, d, d, d, 1.0, t, d, s, d, 0.0, m, d);
        for (int i = 0; i < d; i++)
            for (int k = i + 1; k < d; k++)
                m[i * d + k] = m[k * d + i] = 0.5 * (m[i * d + k] + m[k * d + i]);
        rc = s_eig(m, w, d, "C1^1/2 C2 C1^1/2");
    }
    if (!rc) {
        double tr_sqrt = 0, tr1 = 0, tr2 = 0, dm = 0;
        for (int i = 0; i < d; i++) {
            tr_sqrt += sqrt(w[i] > 0 ? w[i] : 0.0);
            tr1 += cov1[i * d + i];
            tr2 += cov2[i * d + i];
            dm += (mu1[i] - mu2[i]) * (mu1[i] - mu2[i]);
        }
        *out = dm + tr1 + tr2 - 2.0 * tr_sqrt;
        if (!isfinite(*out))
            rc = rl_error_set(RL_ENUMERIC, "frechet distance: the result is %g (a mean not finite?)", *out);
    }
    free(v);
    return rc;
}
