/* bench_util.h — what every benchmark program shares: a monotonic clock,
 * a median, and a silent training log. Linked into every benchmark program. */
#ifndef TL_BENCH_UTIL_H
#define TL_BENCH_UTIL_H

#include <stddef.h>
#include <stdint.h>

#include "tpuloop/estimator.h"

/* Seconds on CLOCK_MONOTONIC. */
double bench_now(void);

/* Sorts v[0..n) ascending and returns its middle element (n >= 1). */
double bench_median(double *v, size_t n);

/* An on_log callback that prints nothing (training logs would interleave
 * with the JSON lines). */
void bench_quiet_log(const tl_train_log *log, void *user);

#endif /* TL_BENCH_UTIL_H */
