/*
 * kernels_int.h — small helpers that several kernel files of src/kernels/
 * share and that are no part of the kernels' interface (kernels.h and the
 * families' headers): static inline functions and macros only, so each file
 * keeps its own copy and nothing here is a symbol of the library.
 */
#ifndef TL_KERNELS_INT_H
#define TL_KERNELS_INT_H

#include <stdint.h>
#include <string.h>

#include "kernels.h"

/* The larger (smaller) of a and b, NaN winning: a NaN a stays, a NaN b
 * replaces a. */
static inline double max_nan(double a, double b)
{
    return (b > a || b != b) ? b : a;
}

static inline double min_nan(double a, double b)
{
    return (b < a || b != b) ? b : a;
}

/* Runs BODY (an expression statement using i) for i in [0, n), in blocks of
 * TL_K_LANES and a scalar tail. */
#define EACH(n, BODY)                                                   \
    do {                                                                \
        int64_t i_ = 0;                                                 \
        for (; i_ + TL_K_LANES <= (n); i_ += TL_K_LANES)                \
            for (int l_ = 0; l_ < TL_K_LANES; l_++) {                   \
                const int64_t i = i_ + l_;                              \
                BODY;                                                   \
            }                                                           \
        for (int64_t i = i_; i < (n); i++) {                            \
            BODY;                                                       \
        }                                                               \
    } while (0)

/* n floats from src to dst (nothing when n is 0), and n copies of v. */
static inline void copy_run(float *restrict dst, const float *restrict src, int64_t n)
{
    if (n > 0)
        memcpy(dst, src, (size_t)n * sizeof(float));
}

static inline void fill_run(float *restrict dst, float v, int64_t n)
{
    int64_t i = 0;
    for (; i + TL_K_LANES <= n; i += TL_K_LANES)
        for (int l = 0; l < TL_K_LANES; l++)
            dst[i + l] = v;
    for (; i < n; i++)
        dst[i] = v;
}

#endif /* TL_KERNELS_INT_H */
