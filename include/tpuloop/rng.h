/*
 * tpuloop/rng.h — counter-based random numbers (Philox4x32-10).
 *
 * Every random number tpuloop draws is a pure function of (seed, stream,
 * counter): there is no generator state to save, share or race on. A stream
 * is named by what draws from it — (op, replica) — and its counter by when and
 * which element: (step, index). The same seed and config therefore give the
 * same bits whatever the thread timing, iterations_per_loop or a stop and
 * resume, which is what ARCHITECTURE.md's "Determinism is a feature" asks.
 *
 *     tl_rng r;
 *     tl_rng_init(&r, seed, op_id, replica, step);   // a stream at one step
 *     for (int64_t i = 0; i < n; i++)
 *         mask[i] = tl_rng_uniform(&r) >= rate;         // element i of that stream
 *
 * Philox4x32-10 is the generator of Salmon et al., "Parallel Random Numbers:
 * As Easy as 1, 2, 3" (SC'11), also used by JAX, TensorFlow and cuRAND; it
 * passes BigCrush.
 */
#ifndef TPULOOP_RNG_H
#define TPULOOP_RNG_H

#include "tpuloop/base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One Philox4x32-10 block: 4 random words from a 128-bit counter and a 64-bit key. */
TL_API void tl_philox4x32(const uint32_t counter[4], const uint32_t key[2], uint32_t out[4]);

/* A position in a stream. Plain data: copy it freely; it is not shared state. */
typedef struct tl_rng {
    uint32_t key[2];  /* from (seed, op, replica) */
    uint32_t ctr[4];  /* [0..1] block index, [2..3] step */
    uint32_t buf[4];  /* the current block */
    int avail;        /* words of buf not yet used */
} tl_rng;

/* Starts the stream of (seed, op, replica) at step `step`, element 0. */
TL_API void tl_rng_init(tl_rng *r, uint64_t seed, uint64_t op, uint64_t replica, uint64_t step);

/* Moves to 32-bit word `index` of the stream (so element i of a vector can be
 * drawn directly, in any order or thread). */
TL_API void tl_rng_seek(tl_rng *r, uint64_t index);

TL_API uint32_t tl_rng_u32(tl_rng *r);
/* Uniform in [0, 1), 24 random bits. */
TL_API float tl_rng_uniform(tl_rng *r);
/* Uniform in [0, 1), 53 random bits. */
TL_API double tl_rng_uniform_f64(tl_rng *r);
/* Standard normal (Box-Muller on two uniform draws; uses two words). */
TL_API double tl_rng_normal(tl_rng *r);

#ifdef __cplusplus
}
#endif
#endif /* TPULOOP_RNG_H */
