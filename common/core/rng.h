/* common/core/rng.h — counter-based random numbers (Philox4x32-10).
 *
 * Purpose: reproducible randomness that does not depend on batching, thread
 * count or the order in which rows are processed. A draw is a pure function
 * of (seed, stream, counter): sampling row r at step t with
 * rl_rng_init(&g, seed, stream = row id) gives the same numbers whichever
 * batch the row travels in. Same algorithm as Random123 / cuRAND Philox,
 * so a CUDA twin can produce identical streams.
 *
 * Invariants: rl_rng is a plain value (copy it to fork a stream); its state
 * is only (key, counter, buffered lanes). Never locks, never allocates.
 */
#ifndef RLRT_RNG_H
#define RLRT_RNG_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* One Philox4x32-10 block: 4 output words from a 128-bit counter and a
 * 64-bit key. */
void rl_philox4x32(const uint32_t counter[4], const uint32_t key[2],
                   uint32_t out[4]);

typedef struct rl_rng {
    uint32_t key[2];     /* from seed */
    uint32_t counter[4]; /* [0..1] block index, [2..3] stream id */
    uint32_t lanes[4];   /* buffered output of the current block */
    int used;            /* lanes consumed (4 = refill) */
} rl_rng;

/* Stream `stream` of generator `seed`; distinct (seed, stream) pairs are
 * independent. */
void rl_rng_init(rl_rng *g, uint64_t seed, uint64_t stream);
/* Jumps to block `offset` of the stream (4 u32 per block); used to resume. */
void rl_rng_seek(rl_rng *g, uint64_t block);
/* Number of blocks consumed so far (to save with a checkpoint). */
uint64_t rl_rng_tell(const rl_rng *g);

uint32_t rl_rng_u32(rl_rng *g);
uint64_t rl_rng_u64(rl_rng *g);
/* Uniform in [0, 1), 24 random bits. */
float rl_rng_uniform(rl_rng *g);
/* Uniform in [0, 1), 53 random bits. */
double rl_rng_uniform_f64(rl_rng *g);
/* Standard normal (Box-Muller on two uniforms in (0, 1]). */
float rl_rng_normal(rl_rng *g);
/* Uniform integer in [0, n), n > 0, without modulo bias. */
uint64_t rl_rng_below(rl_rng *g, uint64_t n);
/* Fisher-Yates shuffle of idx[0..n). */
void rl_rng_shuffle_i64(rl_rng *g, int64_t *idx, int64_t n);

/* splitmix64 (Steele et al.): a well-mixed 64-bit hash of x, used to derive
 * distinct seeds from (seed, step, round, row) tuples and for hash maps. */
uint64_t rl_splitmix64(uint64_t x);

#ifdef __cplusplus
}
#endif
#endif
