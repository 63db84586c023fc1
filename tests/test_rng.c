/* Philox4x32-10 against the published known-answer vectors (Random123's
 * kat_vectors), and the stream properties tpuloop relies on. */
#include <criterion/criterion.h>
#include <math.h>

#include "tpuloop/rng.h"

Test(rng, philox4x32_10_known_answers)
{
    static const struct {
        uint32_t ctr[4], key[2], out[4];
    } kat[] = {
        {{0, 0, 0, 0}, {0, 0}, {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
        {{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, {0xffffffff, 0xffffffff},
         {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
        {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, {0xa4093822, 0x299f31d0},
         {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
    };
    for (size_t i = 0; i < sizeof kat / sizeof kat[0]; i++) {
        uint32_t out[4];
        tl_philox4x32(kat[i].ctr, kat[i].key, out);
        for (int w = 0; w < 4; w++)
            cr_assert_eq(out[w], kat[i].out[w], "vector %zu word %d: %08x != %08x", i, w, out[w], kat[i].out[w]);
    }
}

Test(rng, seek_matches_sequential_draws)
{
    tl_rng a, b;
    tl_rng_init(&a, 42, 7, 3, 1000);
    uint32_t seq[37];
    for (int i = 0; i < 37; i++)
        seq[i] = tl_rng_u32(&a);
    for (int i = 36; i >= 0; i--) {
        tl_rng_init(&b, 42, 7, 3, 1000);
        tl_rng_seek(&b, (uint64_t)i);
        cr_assert_eq(tl_rng_u32(&b), seq[i], "word %d", i);
        if (i + 1 < 37)
            cr_assert_eq(tl_rng_u32(&b), seq[i + 1], "word %d after seek", i + 1);
    }
}

Test(rng, streams_differ_by_every_name)
{
    tl_rng base, other;
    tl_rng_init(&base, 1, 2, 3, 4);
    uint32_t x = tl_rng_u32(&base);
    const uint64_t v[4][4] = {{9, 2, 3, 4}, {1, 9, 3, 4}, {1, 2, 9, 4}, {1, 2, 3, 9}};
    for (int i = 0; i < 4; i++) {
        tl_rng_init(&other, v[i][0], v[i][1], v[i][2], v[i][3]);
        cr_assert_neq(tl_rng_u32(&other), x, "changing name %d must change the stream", i);
    }
}

Test(rng, uniform_and_normal_moments)
{
    tl_rng r;
    tl_rng_init(&r, 123, 0, 0, 0);
    const int n = 200000;
    double su = 0, sn = 0, sn2 = 0;
    for (int i = 0; i < n; i++) {
        float u = tl_rng_uniform(&r);
        cr_assert(u >= 0.0f && u < 1.0f);
        su += u;
        double z = tl_rng_normal(&r);
        cr_assert(isfinite(z));
        sn += z;
        sn2 += z * z;
    }
    cr_assert(fabs(su / n - 0.5) < 0.005, "uniform mean %f", su / n);
    cr_assert(fabs(sn / n) < 0.01, "normal mean %f", sn / n);
    cr_assert(fabs(sn2 / n - 1.0) < 0.02, "normal variance %f", sn2 / n);
}
