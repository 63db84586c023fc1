/* alloc.c — every allocation goes through one hook (SQLite's and libuv's
 * habit), so tests can fail the Nth allocation and check clean unwinding. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base_int.h"

static void *libc_malloc(size_t size, void *ud)
{
    (void)ud;
    return malloc(size);
}

static void *libc_realloc(void *ptr, size_t size, void *ud)
{
    (void)ud;
    return realloc(ptr, size);
}

static void libc_free(void *ptr, void *ud)
{
    (void)ud;
    free(ptr);
}

static tl_allocator hook = {libc_malloc, libc_realloc, libc_free, NULL};

void tl_set_allocator(const tl_allocator *a)
{
    if (a == NULL) {
        hook = (tl_allocator){libc_malloc, libc_realloc, libc_free, NULL};
        return;
    }
    hook = *a;
}

void *tl_malloc(size_t size)
{
    return hook.malloc_fn(size ? size : 1, hook.ud);
}

void *tl_realloc(void *ptr, size_t size)
{
    return hook.realloc_fn(ptr, size ? size : 1, hook.ud);
}

void tl_free(void *ptr)
{
    if (ptr != NULL)
        hook.free_fn(ptr, hook.ud);
}

void *tl_alloc_array(size_t n, size_t size)
{
    if (size != 0 && n > SIZE_MAX / size)
        return NULL;
    return tl_malloc(n * size);
}

void *tl_calloc(size_t n, size_t size)
{
    void *p = tl_alloc_array(n, size);
    if (p != NULL)
        memset(p, 0, n * size);
    return p;
}

char *tl_strndup(const char *s, size_t n)
{
    char *d = tl_malloc(n + 1);
    if (d == NULL)
        return NULL;
    memcpy(d, s, n);
    d[n] = '\0';
    return d;
}

char *tl_strdup(const char *s)
{
    return tl_strndup(s, strlen(s));
}

char *tl_asprintf(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0)
        return NULL;
    char *s = tl_malloc((size_t)n + 1);
    if (s == NULL)
        return NULL;
    va_start(ap, fmt);
    vsnprintf(s, (size_t)n + 1, fmt, ap);
    va_end(ap);
    return s;
}

static int strbuf_reserve(tl_strbuf *sb, size_t extra)
{
    if (sb->failed)
        return -1;
    if (sb->len + extra + 1 <= sb->cap)
        return 0;
    size_t cap = sb->cap ? sb->cap : 64;
    while (cap < sb->len + extra + 1) {
        if (cap > SIZE_MAX / 2) {
            sb->failed = 1;
            return -1;
        }
        cap *= 2;
    }
    char *p = tl_realloc(sb->data, cap);
    if (p == NULL) {
        sb->failed = 1;
        return -1;
    }
    sb->data = p;
    sb->cap = cap;
    return 0;
}

void tl_strbuf_appendf(tl_strbuf *sb, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0 || strbuf_reserve(sb, (size_t)n) != 0)
        return;
    va_start(ap, fmt);
    vsnprintf(sb->data + sb->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    sb->len += (size_t)n;
}

void tl_strbuf_append_n(tl_strbuf *sb, const void *data, size_t n)
{
    if (strbuf_reserve(sb, n) != 0)
        return;
    memcpy(sb->data + sb->len, data, n);
    sb->len += n;
    sb->data[sb->len] = '\0';
}

void tl_strbuf_append(tl_strbuf *sb, const char *s)
{
    tl_strbuf_append_n(sb, s, strlen(s));
}

char *tl_strbuf_take(tl_strbuf *sb)
{
    char *s = NULL;
    if (!sb->failed)
        s = sb->data ? sb->data : tl_strdup("");
    else
        tl_free(sb->data);
    *sb = (tl_strbuf){0};
    return s;
}

void tl_strbuf_free(tl_strbuf *sb)
{
    tl_free(sb->data);
    *sb = (tl_strbuf){0};
}
