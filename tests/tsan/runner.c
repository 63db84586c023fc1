/* runner.c — runs the tests registered through the Criterion shim
 * (criterion/criterion.h beside this file) in one process, in name order, and
 * ends with "N passed, N failed". */
#include <setjmp.h>
#include <stdarg.h>
#include <stdlib.h>

#include "criterion/criterion.h"

#define MAX_TESTS 512

typedef struct {
    const char *suite, *name;
    tu_shim_fn fn;
} shim_test;

static shim_test tests[MAX_TESTS];
static int ntests;
static jmp_buf on_failure;

void tu_shim_register(const char *suite, const char *name, tu_shim_fn fn)
{
    if (ntests == MAX_TESTS) {
        fprintf(stderr, "tsan runner: more than %d tests\n", MAX_TESTS);
        exit(2);
    }
    tests[ntests++] = (shim_test){suite, name, fn};
}

void tu_shim_fail(const char *file, int line, const char *expr, const char *fmt, ...)
{
    fprintf(stderr, "  %s:%d: assertion failed: %s", file, line, expr);
    if (fmt[0] != '\0') {
        va_list ap;
        va_start(ap, fmt);
        fprintf(stderr, ": ");
        vfprintf(stderr, fmt, ap);
        va_end(ap);
    }
    fprintf(stderr, "\n");
    longjmp(on_failure, 1);
}

static int by_name(const void *a, const void *b)
{
    const shim_test *x = a, *y = b;
    int c = strcmp(x->suite, y->suite);
    return c ? c : strcmp(x->name, y->name);
}

int main(void)
{
    qsort(tests, (size_t)ntests, sizeof tests[0], by_name);
    int passed = 0, failed = 0;
    for (int i = 0; i < ntests; i++) {
        if (setjmp(on_failure) == 0) {
            tests[i].fn();
            passed++;
        } else {
            fprintf(stderr, "[FAIL] %s::%s\n", tests[i].suite, tests[i].name);
            failed++;
        }
    }
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
