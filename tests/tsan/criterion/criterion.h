/*
 * A minimal stand-in for <criterion/criterion.h>, used only to run the
 * threaded tests (tests/test_mt_*.c) under ThreadSanitizer: Criterion itself
 * cannot start under TSan (its inheritable arena collides with TSan's shadow
 * memory: Snaipe/Criterion#274). The tests are the same Criterion source files;
 * this header gives the macros they use the same meaning, and runner.c runs
 * them one after another in a single process.
 */
#ifndef TL_TSAN_CRITERION_SHIM_H
#define TL_TSAN_CRITERION_SHIM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

typedef void (*tu_shim_fn)(void);
void tu_shim_register(const char *suite, const char *name, tu_shim_fn fn);
_Noreturn void tu_shim_fail(const char *file, int line, const char *expr, const char *fmt, ...);

#define Test(suite, name, ...)                                                   \
    static void suite##_##name##_impl(void);                                     \
    __attribute__((constructor)) static void suite##_##name##_reg(void)          \
    {                                                                            \
        tu_shim_register(#suite, #name, suite##_##name##_impl);                  \
    }                                                                            \
    static void suite##_##name##_impl(void)

#define TU_SHIM_CHECK(cond, expr, ...)                                           \
    do {                                                                         \
        if (!(cond))                                                             \
            tu_shim_fail(__FILE__, __LINE__, expr, "" __VA_ARGS__);              \
    } while (0)

#define cr_assert(cond, ...) TU_SHIM_CHECK((cond), #cond, __VA_ARGS__)
#define cr_assert_not(cond, ...) TU_SHIM_CHECK(!(cond), "!(" #cond ")", __VA_ARGS__)
#define cr_assert_eq(a, b, ...) TU_SHIM_CHECK((a) == (b), #a " == " #b, __VA_ARGS__)
#define cr_assert_neq(a, b, ...) TU_SHIM_CHECK((a) != (b), #a " != " #b, __VA_ARGS__)
#define cr_assert_lt(a, b, ...) TU_SHIM_CHECK((a) < (b), #a " < " #b, __VA_ARGS__)
#define cr_assert_leq(a, b, ...) TU_SHIM_CHECK((a) <= (b), #a " <= " #b, __VA_ARGS__)
#define cr_assert_gt(a, b, ...) TU_SHIM_CHECK((a) > (b), #a " > " #b, __VA_ARGS__)
#define cr_assert_geq(a, b, ...) TU_SHIM_CHECK((a) >= (b), #a " >= " #b, __VA_ARGS__)
#define cr_assert_null(p, ...) TU_SHIM_CHECK((p) == NULL, #p " == NULL", __VA_ARGS__)
#define cr_assert_not_null(p, ...) TU_SHIM_CHECK((p) != NULL, #p " != NULL", __VA_ARGS__)
#define cr_assert_str_eq(a, b, ...) TU_SHIM_CHECK(strcmp((a), (b)) == 0, #a " == " #b, __VA_ARGS__)
#define cr_assert_str_neq(a, b, ...) TU_SHIM_CHECK(strcmp((a), (b)) != 0, #a " != " #b, __VA_ARGS__)

#endif /* TL_TSAN_CRITERION_SHIM_H */
