// flash_emu.cpp — host emulation of the fused attention kernels (run_flash_emu.sh):
// __syncthreads a barrier, xor shuffles through a block array (every call site
// in these kernels is reached by all threads uniformly).
#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>
#include <random>
extern "C" {
#include "common/nn/engine/ops.h"
}
using std::isinf;
struct dim3s { unsigned x = 0, y = 0, z = 0; };
thread_local dim3s threadIdx, blockIdx;
static dim3s gridDim;
static std::barrier<> *g_bar;
alignas(16) static float g_smem[64 * 1024];
struct float4 { float x, y, z, w; };
static float g_shfl[256];
static inline void __syncthreads() { g_bar->arrive_and_wait(); }
static inline float __shfl_xor_sync(unsigned, float v, int o)
{
    g_shfl[threadIdx.x] = v;
    __syncthreads();
    float r = g_shfl[threadIdx.x ^ o];
    __syncthreads();
    return r;
}
#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(x)
#include "fa_extract.inc"

// The grid's blocks one after another on one set of 256 threads.
template <typename F> static void launch(unsigned gx, unsigned gy, unsigned gz, F f)
{
    gridDim = {gx, gy, gz};
    std::barrier<> bar(256);
    g_bar = &bar;
    std::vector<std::thread> th;
    for (unsigned t = 0; t < 256; t++)
        th.emplace_back([t, &f, gx, gy, gz] {
            threadIdx.x = t;
            for (unsigned z = 0; z < gz; z++)
                for (unsigned y = 0; y < gy; y++)
                    for (unsigned x = 0; x < gx; x++) {
                        blockIdx = {x, y, z};
                        if (t == 0) // NaN garbage: reads of unwritten shared memory show
                            memset(g_smem, 0xff, sizeof g_smem);
                        __syncthreads();
                        f();
                        __syncthreads(); // the block done before the next one's fill
                    }
        });
    for (auto &t : th)
        t.join();
}

static std::mt19937 rng(7);
static std::vector<float> randv(size_t n)
{
    std::normal_distribution<float> d;
    std::vector<float> v(n);
    for (auto &x : v) x = d(rng);
    return v;
}
static int fails = 0;
static void check(const char *what, const std::vector<float> &got, const std::vector<float> &want, float atol)
{
    double worst = 0;
    for (size_t i = 0; i < got.size(); i++) {
        if (isinf(want[i]) && got[i] == want[i]) continue;
        double d = fabs(got[i] - want[i]);
        if (!(d <= atol + 1e-4 * fabs(want[i]))) {
            if (fails < 20) printf("  FAIL %s[%zu]: sim %g cpu %g\n", what, i, got[i], want[i]);
            fails++;
        }
        if (d > worst) worst = d;
    }
    printf("  %s: worst |d| %.3g\n", what, worst);
}

template <int D> static void run(int B, int T, int H, int KH, int hd, int masked)
{
    printf("B=%d T=%d H=%d KH=%d hd=%d masked=%d (D=%d)\n", B, T, H, KH, hd, masked, D);
    size_t nq = (size_t)B * T * H * hd, nk = (size_t)B * T * KH * hd, nl = (size_t)B * H * T;
    auto q = randv(nq), k = randv(nk), v = randv(nk), go = randv(nq);
    std::vector<uint8_t> mask((size_t)B * T);
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            mask[(size_t)b * T + t] = b == 0 ? t >= T / 3 : b == 1 ? 0 : (t % 3) != 1;
    const uint8_t *m = masked ? mask.data() : nullptr;
    std::vector<float> out(nq), lse(nl), sout(nq, 7.0f), slse(nl, 7.0f);
    rl_attention_forward(out.data(), lse.data(), q.data(), k.data(), v.data(), m, B, T, H, KH, hd);
    unsigned tiles = (T + 63) / 64;
    float scale = 1.0f / sqrtf((float)hd);
    launch(tiles, H, B, [&] { k_fa_forward<D>(sout.data(), slse.data(), q.data(), k.data(), v.data(), m, T, H, KH, hd, scale); });
    check("out", sout, out, 1e-5f);
    check("lse", slse, lse, 1e-5f);
    auto gq = randv(nq), gk = randv(nk), gv = randv(nk);
    auto g0q = gq, g0k = gk, g0v = gv;
    rl_attention_backward(gq.data(), gk.data(), gv.data(), go.data(), out.data(), lse.data(), q.data(), k.data(), v.data(), m, B, T, H, KH, hd);
    float atol = 1e-5f + 2e-6f * (float)T * (float)(H / KH);
    for (int use_out = 1; use_out >= 0; use_out--) { /* D from the output, then by a sweep */
        auto sq = g0q, sk = g0k, sv = g0v;
        std::vector<float> Dsum(nl, 7.0f);
        const float *o = use_out ? out.data() : nullptr;
        launch(tiles, H, B, [&] { k_fa_backward_dq<D>(sq.data(), Dsum.data(), go.data(), o, lse.data(), q.data(), k.data(), v.data(), m, T, H, KH, hd, scale); });
        if (KH == H) {
            launch(tiles, KH, B, [&] { k_fa_backward_dkdv<D>(sk.data(), sv.data(), nullptr, go.data(), lse.data(), Dsum.data(), q.data(), k.data(), v.data(), m, T, H, KH, hd, scale); });
        } else { /* the launcher's grouped path: shares per query head, then their sum */
            std::vector<float> part(2 * (size_t)B * H * T * hd, NAN);
            launch(tiles, H, B, [&] { k_fa_backward_dkdv<D>(sk.data(), sv.data(), part.data(), go.data(), lse.data(), Dsum.data(), q.data(), k.data(), v.data(), m, T, H, KH, hd, scale); });
            unsigned nb = (unsigned)(((size_t)B * T * KH * hd + 255) / 256);
            launch(nb, 1, 1, [&] { k_fa_reduce_kv(sk.data(), sv.data(), part.data(), B, T, H, KH, hd); });
        }
        printf(" %s:\n", use_out ? "D = dO.O" : "D by a sweep");
        check("dq", sq, gq, atol);
        check("dk", sk, gk, atol);
        check("dv", sv, gv, atol);
    }
}

int main()
{
    run<32>(1, 1, 1, 1, 8, 0);
    run<32>(3, 5, 4, 2, 8, 1);
    run<64>(2, 37, 6, 6, 64, 1);
    run<64>(3, 70, 7, 1, 40, 1);
    run<64>(2, 130, 14, 2, 64, 0);
    run<128>(3, 65, 4, 2, 128, 1);
    run<32>(1, 129, 2, 1, 32, 1);
    printf(fails ? "FAILED (%d)\n" : "all passed\n", fails);
    return fails != 0;
}
