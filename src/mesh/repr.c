/* repr.c — Python-style text for reprs and error messages, written into a
 * bounded buffer so that an error path never allocates. */
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "mesh_int.h"

tl_sink tl_sink_make(char *buf, size_t cap)
{
    if (buf != NULL && cap > 0)
        buf[0] = '\0';
    return (tl_sink){buf, cap, 0};
}

static void sink_vprintf(tl_sink *s, const char *fmt, va_list ap) TL_PRINTF(2, 0);

static void sink_vprintf(tl_sink *s, const char *fmt, va_list ap)
{
    char *dst = NULL;
    size_t room = 0;
    if (s->buf != NULL && s->len < s->cap) {
        dst = s->buf + s->len;
        room = s->cap - s->len;
    }
    int n = vsnprintf(dst, room, fmt, ap);
    if (n > 0)
        s->len += (size_t)n;
}

void tl_sink_printf(tl_sink *s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    sink_vprintf(s, fmt, ap);
    va_end(ap);
}

void tl_sink_puts(tl_sink *s, const char *str)
{
    tl_sink_printf(s, "%s", str);
}

int tl_sink_result(const tl_sink *s)
{
    return s->len > (size_t)INT_MAX ? INT_MAX : (int)s->len;
}

void tl_sink_pystr(tl_sink *s, const char *str)
{
    char q = '\'';
    if (strchr(str, '\'') != NULL && strchr(str, '"') == NULL)
        q = '"';
    tl_sink_printf(s, "%c", q);
    for (const unsigned char *p = (const unsigned char *)str; *p; p++) {
        if (*p == '\\' || *p == (unsigned char)q)
            tl_sink_printf(s, "\\%c", *p);
        else if (*p == '\n')
            tl_sink_puts(s, "\\n");
        else if (*p == '\t')
            tl_sink_puts(s, "\\t");
        else if (*p == '\r')
            tl_sink_puts(s, "\\r");
        else if (*p < 0x20 || *p == 0x7f)
            tl_sink_printf(s, "\\x%02x", *p);
        else
            tl_sink_printf(s, "%c", *p);
    }
    tl_sink_printf(s, "%c", q);
}

void tl_sink_pytuple(tl_sink *s, const int64_t *v, int n)
{
    tl_sink_puts(s, "(");
    for (int i = 0; i < n; i++)
        tl_sink_printf(s, "%s%lld", i ? ", " : "", (long long)v[i]);
    tl_sink_puts(s, n == 1 ? ",)" : ")");
}

void tl_sink_axis_names(tl_sink *s, const tl_mesh *mesh)
{
    for (int i = 0; i < tl_mesh_ndim(mesh); i++) {
        tl_sink_puts(s, i ? ", " : "");
        tl_sink_pystr(s, tl_mesh_axis_name(mesh, i));
    }
}

void tl_sink_pylist(tl_sink *s, const char *const *v, int n)
{
    tl_sink_puts(s, "[");
    for (int i = 0; i < n; i++) {
        if (i)
            tl_sink_puts(s, ", ");
        if (v[i] == NULL)
            tl_sink_puts(s, "None");
        else
            tl_sink_pystr(s, v[i]);
    }
    tl_sink_puts(s, "]");
}
