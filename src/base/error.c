/* error.c — the thread-local last error. The detail lives beside the status
 * so that a caller several frames up can print what went wrong without every
 * layer threading a message buffer through. */
#include <stdio.h>
#include <string.h>

#include "base_int.h"

#define TL_ERRMSG_MAX 1024

static _Thread_local char errmsg[TL_ERRMSG_MAX];
static _Thread_local tl_status errstatus = TL_OK;

static void set_message(const char *fmt, va_list ap) __attribute__((format(printf, 1, 0)));

/* Formats through a local buffer: callers may pass tl_last_error() itself as
 * an argument, to wrap the detail of a lower call in their own context. */
static void set_message(const char *fmt, va_list ap)
{
    char buf[TL_ERRMSG_MAX];
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    if (n < 0)
        buf[0] = '\0';
    memcpy(errmsg, buf, sizeof errmsg);
}

tl_status tl_error(tl_status st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    set_message(fmt, ap);
    va_end(ap);
    errstatus = st;
    return st;
}

tl_status tl_error_oom(void)
{
    return tl_error(TL_ENOMEM, "out of memory");
}

const char *tl_last_error(void)
{
    return errmsg;
}

tl_status tl_last_status(void)
{
    return errstatus;
}

void tl_clear_error(void)
{
    errmsg[0] = '\0';
    errstatus = TL_OK;
}

void tl_assert_fail(const char *expr, const char *file, int line)
{
    fprintf(stderr, "tpuloop: internal error: %s:%d: assertion failed: %s\n", file, line, expr);
    fflush(stderr);
    __builtin_trap();
}
