/* log.c — one logging entry point with a replaceable handler. */
#include <stdio.h>

#include "base_int.h"

static void default_handler(tl_log_level level, const char *msg, void *ud)
{
    static const char tag[] = "DIWE";
    (void)ud;
    fprintf(stderr, "%c tpuloop: %s\n", tag[level < TL_LOG_OFF ? level : TL_LOG_ERROR], msg);
}

static tl_log_fn handler = default_handler;
static void *handler_ud = NULL;
static tl_log_level min_level = TL_LOG_WARN;

void tl_set_log_handler(tl_log_fn fn, void *ud)
{
    handler = fn ? fn : default_handler;
    handler_ud = fn ? ud : NULL;
}

void tl_set_log_level(tl_log_level level)
{
    min_level = level;
}

void tl_log(tl_log_level level, const char *fmt, ...)
{
    if (level < min_level)
        return;
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    handler(level, msg, handler_ud);
}
