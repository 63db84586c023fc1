/*
 * kernels_int.h — small helpers that several kernel files of src/kernels/
 * share and that are no part of the kernels' interface (kernels.h and the
 * families' headers): static inline functions and macros only, so each file
 * keeps its own copy and nothing here is a symbol of the library.
 */
#ifndef TL_KERNELS_INT_H
#define TL_KERNELS_INT_H

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

#endif /* TL_KERNELS_INT_H */
