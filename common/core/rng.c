/* rng.c — Philox4x32-10 counter-based generator (see common/core/rng.h). */
#include "common/core/rng.h"

#include <math.h>

#define PHILOX_M0 0xD2511F53u
#define PHILOX_M1 0xCD9E8D57u
#define PHILOX_W0 0x9E3779B9u
#define PHILOX_W1 0xBB67AE85u

static inline uint32_t s_mulhilo(uint32_t a, uint32_t b, uint32_t *hi)
{
    uint64_t p = (uint64_t)a * b;
    *hi = (uint32_t)(p >> 32);
    return (uint32_t)p;
}

void rl_philox4x32(const uint32_t counter[4], const uint32_t key[2],
                   uint32_t out[4])
{
    uint32_t c0 = counter[0], c1 = counter[1], c2 = counter[2], c3 = counter[3];
    uint32_t k0 = key[0], k1 = key[1];
    for (int round = 0; round < 10; round++) {
        uint32_t hi0, hi1;
        uint32_t lo0 = s_mulhilo(PHILOX_M0, c0, &hi0);
        uint32_t lo1 = s_mulhilo(PHILOX_M1, c2, &hi1);
        uint32_t n0 = hi1 ^ c1 ^ k0;
        uint32_t n1 = lo1;
        uint32_t n2 = hi0 ^ c3 ^ k1;
        uint32_t n3 = lo0;
        c0 = n0, c1 = n1, c2 = n2, c3 = n3;
        k0 += PHILOX_W0;
        k1 += PHILOX_W1;
    }
    out[0] = c0, out[1] = c1, out[2] = c2, out[3] = c3;
}

void rl_rng_init(rl_rng *g, uint64_t seed, uint64_t stream)
{
    g->key[0] = (uint32_t)seed;
    g->key[1] = (uint32_t)(seed >> 32);
    g->counter[0] = 0;
    g->counter[1] = 0;
    g->counter[2] = (uint32_t)stream;
    g->counter[3] = (uint32_t)(stream >> 32);
    g->used = 4;
}

void rl_rng_seek(rl_rng *g, uint64_t block)
{
    g->counter[0] = (uint32_t)block;
    g->counter[1] = (uint32_t)(block >> 32);
    g->used = 4;
}

uint64_t rl_rng_tell(const rl_rng *g)
{
    return ((uint64_t)g->counter[1] << 32) | g->counter[0];
}

uint32_t rl_rng_u32(rl_rng *g)
{
    if (g->used == 4) {
        rl_philox4x32(g->counter, g->key, g->lanes);
        if (++g->counter[0] == 0)
            ++g->counter[1];
        g->used = 0;
    }
    return g->lanes[g->used++];
}

uint64_t rl_rng_u64(rl_rng *g)
{
    uint64_t hi = rl_rng_u32(g);
    return (hi << 32) | rl_rng_u32(g);
}

float rl_rng_uniform(rl_rng *g)
{
    return (float)(rl_rng_u32(g) >> 8) * (1.0f / 16777216.0f);
}

double rl_rng_uniform_f64(rl_rng *g)
{
    return (double)(rl_rng_u64(g) >> 11) * (1.0 / 9007199254740992.0);
}

float rl_rng_normal(rl_rng *g)
{
    /* u1 in (0, 1] so log() is finite. */
    double u1 = 1.0 - rl_rng_uniform_f64(g);
    double u2 = rl_rng_uniform_f64(g);
    return (float)(sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2));
}

uint64_t rl_rng_below(rl_rng *g, uint64_t n)
{
    uint64_t limit = UINT64_MAX - UINT64_MAX % n;
    uint64_t x;
    do {
        x = rl_rng_u64(g);
    } while (x >= limit);
    return x % n;
}

void rl_rng_shuffle_i64(rl_rng *g, int64_t *idx, int64_t n)
{
    for (int64_t i = n - 1; i > 0; i--) {
        int64_t j = (int64_t)rl_rng_below(g, (uint64_t)i + 1);
        int64_t t = idx[i];
        idx[i] = idx[j];
        idx[j] = t;
    }
}

uint64_t rl_splitmix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}
