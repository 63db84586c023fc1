/* rng.c — Philox4x32-10 and the stream helpers of tpuloop/rng.h. */
#include <math.h>

#include "base_int.h"
#include "tpuloop/rng.h"

#define PHILOX_M0 0xD2511F53u
#define PHILOX_M1 0xCD9E8D57u
#define PHILOX_W0 0x9E3779B9u
#define PHILOX_W1 0xBB67AE85u

void tl_philox4x32(const uint32_t counter[4], const uint32_t key[2], uint32_t out[4])
{
    uint32_t c0 = counter[0], c1 = counter[1], c2 = counter[2], c3 = counter[3];
    uint32_t k0 = key[0], k1 = key[1];
    for (int round = 0; round < 10; round++) {
        uint64_t p0 = (uint64_t)PHILOX_M0 * c0;
        uint64_t p1 = (uint64_t)PHILOX_M1 * c2;
        uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0;
        uint32_t n1 = (uint32_t)p1;
        uint32_t n2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1;
        uint32_t n3 = (uint32_t)p0;
        c0 = n0;
        c1 = n1;
        c2 = n2;
        c3 = n3;
        k0 += PHILOX_W0;
        k1 += PHILOX_W1;
    }
    out[0] = c0;
    out[1] = c1;
    out[2] = c2;
    out[3] = c3;
}

/* SplitMix64's finalizer: a bijective mix used to fold names into the key. */
static uint64_t mix64(uint64_t x)
{
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

void tl_rng_init(tl_rng *r, uint64_t seed, uint64_t op, uint64_t replica, uint64_t step)
{
    uint64_t k = mix64(mix64(mix64(seed) ^ op) ^ replica);
    r->key[0] = (uint32_t)k;
    r->key[1] = (uint32_t)(k >> 32);
    r->ctr[0] = r->ctr[1] = 0;
    r->ctr[2] = (uint32_t)step;
    r->ctr[3] = (uint32_t)(step >> 32);
    r->avail = 0;
}

void tl_rng_seek(tl_rng *r, uint64_t index)
{
    uint64_t block = index / 4;
    r->ctr[0] = (uint32_t)block;
    r->ctr[1] = (uint32_t)(block >> 32);
    tl_philox4x32(r->ctr, r->key, r->buf);
    uint64_t next = block + 1;
    r->ctr[0] = (uint32_t)next;
    r->ctr[1] = (uint32_t)(next >> 32);
    /* tl_rng_u32 reads buf[4 - avail]: word index % 4 comes next. */
    r->avail = 4 - (int)(index % 4);
}

uint32_t tl_rng_u32(tl_rng *r)
{
    if (r->avail == 0) {
        tl_philox4x32(r->ctr, r->key, r->buf);
        if (++r->ctr[0] == 0)
            ++r->ctr[1];
        r->avail = 4;
    }
    return r->buf[4 - r->avail--];
}

float tl_rng_uniform(tl_rng *r)
{
    return (float)(tl_rng_u32(r) >> 8) * (1.0f / 16777216.0f);
}

double tl_rng_uniform_f64(tl_rng *r)
{
    uint64_t hi = tl_rng_u32(r) >> 5, lo = tl_rng_u32(r) >> 6;
    return (double)(hi * 67108864u + lo) * (1.0 / 9007199254740992.0);
}

double tl_rng_normal(tl_rng *r)
{
    /* 1 - u keeps the log argument in (0, 1]. */
    double u1 = 1.0 - (double)tl_rng_u32(r) * (1.0 / 4294967296.0);
    double u2 = (double)tl_rng_u32(r) * (1.0 / 4294967296.0);
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}
