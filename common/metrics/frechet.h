/* common/metrics/frechet.h — the Fréchet distance between two Gaussians
 * fitted to feature vectors: the formula of the FID (Heusel et al. 2017;
 * pytorch-fid's and clean-fid's calculate_frechet_distance)
 *
 *   d² = ‖μ1 − μ2‖² + tr(C1) + tr(C2) − 2·tr((C1·C2)^½)
 *
 * with μ the mean and C the unbiased covariance (1/(n−1), numpy.cov's) of
 * n feature rows of d floats. tr((C1·C2)^½) is computed through symmetric
 * eigen-decompositions (LAPACKE_dsyevd): S = C1^½ = V·diag(√λ)·Vᵀ, then
 * tr((C1·C2)^½) = Σ √eig(S·C2·S), since S·C2·S is symmetric positive
 * semi-definite and has the eigenvalues of C1·C2. Eigenvalues below 0
 * (rounding in a rank-deficient covariance) count as 0. pytorch-fid takes
 * scipy.linalg.sqrtm of C1·C2 (a Schur form, real part): the same value
 * where that is defined, without its complex and singular cases.
 *
 * Everything is double; features come in as float. With few samples the
 * estimate is biased upwards (a real set against another real set of the
 * same size is > 0): compare distances of equal sample counts only.
 *
 * Library code: errors are rl_status codes with the message set; nothing
 * is printed. Ownership: the caller's buffers; rl_frechet_distance
 * allocates its scratch and frees it.
 */
#ifndef RLRT_METRICS_FRECHET_H
#define RLRT_METRICS_FRECHET_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* mu (d) and cov (d, d) of the n rows of x (n, d): RL_EINVAL for n < 2 or
 * d < 1, RL_ENUMERIC naming the row and column of a value that is not
 * finite. */
int rl_frechet_stats(const float *x, int64_t n, int d, double *mu, double *cov);

/* *out = the squared Fréchet distance of (mu1, cov1) and (mu2, cov2), each
 * of dimension d (covariances symmetric, as rl_frechet_stats gives them).
 * RL_ENUMERIC when LAPACK fails or a value is not finite; RL_ENOMEM. */
int rl_frechet_distance(const double *mu1, const double *cov1, const double *mu2, const double *cov2,
                        int d, double *out);

#ifdef __cplusplus
}
#endif
#endif
