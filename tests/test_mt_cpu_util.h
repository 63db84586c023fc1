/*
 * test_mt_cpu_util.h — what the pinning tests share (test_mt_thread.c: a
 * thread pinned to a cpu; test_mt_intra_op.c: a team's helper pinned to
 * one): the cpu to pin to, read from the process's affinity mask rather
 * than from the library under test. Uses only the assertion macros of the
 * TSan stand-in.
 */
#ifndef TPULOOP_TESTS_MT_CPU_UTIL_H
#define TPULOOP_TESTS_MT_CPU_UTIL_H

#include <criterion/criterion.h>
#include <sched.h>

/* The highest cpu of the process's affinity mask (the test fails without one). */
static inline int tmc_last_cpu(void)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    cr_assert_eq(sched_getaffinity(0, sizeof set, &set), 0);
    int last = -1;
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &set))
            last = c;
    cr_assert_geq(last, 0);
    return last;
}

#endif /* TPULOOP_TESTS_MT_CPU_UTIL_H */
