/* test_nn_cuda.c — CUDA kernels against the CPU kernels (parity).
 *
 * Skips (with the reason) when the build has no CUDA (`make CUDA=1`) or no
 * GPU is visible (cudaGetDeviceCount fails or returns 0). Tolerance:
 * atol 1e-5 + rtol 1e-4, the linear's atol growing with its reduction
 * length C (cuBLAS sums in another order; TF32 is not enabled). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "common/core/rng.h"
#include "common/nn/engine/ops.h"
#include "common/nn/engine/device.h"

static int s_need_gpu(void)
{
#ifndef RL_CUDA
    print_message("skip: built without CUDA (rebuild with make CUDA=1)\n");
    return 0;
#else
    if (rl_device_count(RL_DEVICE_CUDA) <= 0) {
        print_message("skip: no CUDA GPU visible (cudaGetDeviceCount failed or returned 0)\n");
        return 0;
    }
    return 1;
#endif
}

#ifdef RL_CUDA
static float *s_up(const float *h, size_t n)
{
    float *d = rl_device_alloc(RL_DEVICE_CUDA, n * sizeof(float));
    assert_non_null(d);
    assert_int_equal(rl_device_copy(RL_DEVICE_CUDA, d, RL_DEVICE_CPU, h, n * sizeof(float)), 0);
    return d;
}

/* |cuda - cpu| <= atol + 1e-4 |cpu|; atol grows with a reduction's length. */
static void s_check(const char *what, const float *dev, const float *want, size_t n, float atol)
{
    float *h = malloc(n * sizeof(float));
    assert_int_equal(rl_device_sync(RL_DEVICE_CUDA), 0);
    assert_int_equal(rl_device_copy(RL_DEVICE_CPU, h, RL_DEVICE_CUDA, dev, n * sizeof(float)), 0);
    for (size_t i = 0; i < n; i++)
        if (fabsf(h[i] - want[i]) > atol + 1e-4f * fabsf(want[i]))
            fail_msg("%s[%zu]: cuda %g vs cpu %g", what, i, h[i], want[i]);
    free(h);
}

static float *s_rand(rl_rng *g, size_t n)
{
    float *p = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++)
        p[i] = rl_rng_normal(g);
    return p;
}
#endif

#ifdef RL_CUDA
/* Every CUDA op against its CPU kernel on x [N, C], w [OC, C], b [OC]. */
static void s_parity(int N, int C, int OC, uint64_t seed)
{
    const rl_nn_ops *cu = rl_nn_ops_get(RL_DEVICE_CUDA);
    assert_non_null(cu);
    rl_rng g;
    rl_rng_init(&g, seed, 0);
    float *x = s_rand(&g, (size_t)N * C), *w = s_rand(&g, (size_t)OC * C);
    float *b = s_rand(&g, OC), *nw = s_rand(&g, C);
    float *want = malloc(sizeof(float) * (size_t)N * (C > OC ? C : OC));
    float *rstd = malloc(sizeof(float) * N);
    float *dx = s_up(x, (size_t)N * C), *dw = s_up(w, (size_t)OC * C), *db = s_up(b, OC);
    float *dnw = s_up(nw, C);
    float *dout = rl_device_alloc(RL_DEVICE_CUDA, sizeof(float) * (size_t)N * (C > OC ? C : OC));
    float *drstd = rl_device_alloc(RL_DEVICE_CUDA, sizeof(float) * N);

    rl_linear_forward(want, x, w, b, N, C, OC);
    cu->linear_forward(dout, dx, dw, db, N, C, OC);
    /* C products of unit normals: rounding grows with C (fp32 eps 6e-8). */
    s_check("linear", dout, want, (size_t)N * OC, 1e-5f + 2e-7f * (float)C);

    rl_rmsnorm_forward(want, rstd, x, nw, 1e-6f, N, C);
    cu->rmsnorm_forward(dout, drstd, dx, dnw, 1e-6f, N, C);
    s_check("rmsnorm", dout, want, (size_t)N * C, 1e-5f);
    s_check("rmsnorm rstd", drstd, rstd, N, 1e-5f);

    rl_softmax_forward(want, x, N, C);
    cu->softmax_forward(dout, dx, N, C);
    s_check("softmax", dout, want, (size_t)N * C, 1e-5f);

    /* gate and up are the two halves of x; the output (N*C/2) fits the
     * [N, max(C, OC)] buffers. */
    int64_t half = (int64_t)N * C / 2;
    rl_swiglu_forward(want, x, x + half, half);
    cu->swiglu_forward(dout, dx, dx + half, half);
    s_check("swiglu", dout, want, (size_t)half, 1e-5f);

    rl_add_forward(want, x, x, (int64_t)N * C);
    cu->add_forward(dout, dx, dx, (int64_t)N * C);
    s_check("add", dout, want, (size_t)N * C, 1e-5f);

    /* A model cannot run on CUDA yet: it names the missing op. */
    assert_non_null(rl_nn_ops_missing(cu));

    rl_device_free(RL_DEVICE_CUDA, dx);
    rl_device_free(RL_DEVICE_CUDA, dw);
    rl_device_free(RL_DEVICE_CUDA, db);
    rl_device_free(RL_DEVICE_CUDA, dnw);
    rl_device_free(RL_DEVICE_CUDA, dout);
    rl_device_free(RL_DEVICE_CUDA, drstd);
    free(x); free(w); free(b); free(nw); free(want); free(rstd);
}
#endif

/* Small rows (one pass per thread) and wide rows (C > 1024 threads, so
 * the strided loops and the block reductions run more than once; OC not a
 * multiple of any tile size). */
static void test_cuda_parity(void **state)
{
    (void)state;
    if (!s_need_gpu()) {
        skip();
        return;
    }
#ifdef RL_CUDA
    s_parity(37, 300, 129, 5);
    s_parity(1031, 2500, 771, 6);
#endif
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cuda_parity),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
