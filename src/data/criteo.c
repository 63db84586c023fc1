/* criteo.c — the Criteo TSV reader of tpuloop/text_data.h.
 *
 * Files and memory share one line splitter: a memory buffer is simply a
 * window that is already full and at its end, so every check (line cap,
 * field count, values) runs on the same code for both. Files are read
 * through a window of max(max_line + 2, 64 KiB) bytes, compacted before each
 * refill, so memory stays bounded whatever the file holds. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "../base/base_int.h"
#include "tpuloop/text_data.h"

#define MIN_WINDOW ((size_t)1 << 16)
#define SHOW_MAX 40 /* bytes of a bad value quoted in a message */

struct tl_criteo_reader {
    char *name;
    tl_criteo_options opts;
    FILE *f;            /* NULL for memory */
    char *own;          /* (cap) the file window; NULL for memory */
    const char *buf;    /* the window: own, or the caller's bytes */
    size_t cap;         /* own's size */
    size_t start, end;  /* unread bytes are buf[start, end) */
    bool eof;           /* nothing lies beyond buf[end) */
    int64_t line;       /* lines consumed */
    tl_status sticky;   /* TL_OK, or the error every call repeats */
    char *sticky_msg;
};

void tl_criteo_options_init(tl_criteo_options *o)
{
    if (o == NULL)
        return;
    memset(o, 0, sizeof *o);
    o->max_line = TL_CRITEO_DEFAULT_MAX_LINE;
}

static const char *field_name(int k, char tmp[16])
{
    if (k == 0)
        return "label";
    if (k <= TL_CRITEO_NUM_DENSE)
        snprintf(tmp, 16, "I%d", k);
    else
        snprintf(tmp, 16, "C%d", k - TL_CRITEO_NUM_DENSE);
    return tmp;
}

/* A field's bytes as a quoted C-ish literal for messages: printable ASCII as
 * is, anything else as \xNN, cut at SHOW_MAX bytes. */
static void show(tl_strbuf *sb, const char *p, size_t n)
{
    tl_strbuf_append(sb, "\"");
    for (size_t i = 0; i < n && i < SHOW_MAX; i++) {
        unsigned char c = (unsigned char)p[i];
        if (c == '"' || c == '\\')
            tl_strbuf_appendf(sb, "\\%c", c);
        else if (c >= 0x20 && c < 0x7f)
            tl_strbuf_append_n(sb, &p[i], 1);
        else
            tl_strbuf_appendf(sb, "\\x%02x", c);
    }
    tl_strbuf_append(sb, n > SHOW_MAX ? "\"..." : "\"");
}

/* "<name>:<line>: field k (Ix): expected <what> (got "<value>")" */
static tl_status field_error(const tl_criteo_reader *r, int k, const char *what, const char *p, size_t n)
{
    char tmp[16];
    tl_strbuf sb = {0};
    show(&sb, p, n);
    if (sb.failed) {
        tl_strbuf_free(&sb);
        return tl_error_oom();
    }
    tl_status st = tl_error(TL_EPARSE, "%s:%lld: field %d (%s): expected %s (got %s)", r->name,
                            (long long)r->line, k + 1, field_name(k, tmp), what, sb.data);
    tl_strbuf_free(&sb);
    return st;
}

/* Records the thread's current error as the reader's sticky one. */
static tl_status make_sticky(tl_criteo_reader *r, tl_status st)
{
    r->sticky = st;
    tl_free(r->sticky_msg);
    r->sticky_msg = tl_strdup(tl_last_error()); /* NULL when out of memory: then the status alone */
    return st;
}

static tl_status reader_new(const char *name, const tl_criteo_options *opts, tl_criteo_reader **out)
{
    tl_criteo_options o;
    if (opts == NULL)
        tl_criteo_options_init(&o);
    else
        o = *opts;
    if (o.max_line == 0)
        o.max_line = TL_CRITEO_DEFAULT_MAX_LINE;
    if (o.max_line > ((size_t)1 << 30))
        return tl_error(TL_EINVAL, "tl_criteo_options.max_line: must be at most 1 GiB (got %zu)", o.max_line);
    for (int c = 0; c < TL_CRITEO_NUM_CAT; c++)
        if (o.vocab_sizes[c] < 0)
            return tl_error(TL_EINVAL, "tl_criteo_options.vocab_sizes[%d] (C%d): must be >= 0 (got %lld)", c,
                            c + 1, (long long)o.vocab_sizes[c]);
    tl_criteo_reader *r = tl_calloc(1, sizeof *r);
    if (r == NULL)
        return tl_error_oom();
    r->opts = o;
    r->name = tl_strdup(name);
    if (r->name == NULL) {
        tl_free(r);
        return tl_error_oom();
    }
    *out = r;
    return TL_OK;
}

tl_status tl_criteo_reader_create_file(const char *path, const tl_criteo_options *opts, tl_criteo_reader **out)
{
    if (out == NULL)
        return tl_error(TL_EINVAL, "tl_criteo_reader_create_file: out is NULL");
    *out = NULL;
    if (path == NULL)
        return tl_error(TL_EINVAL, "tl_criteo_reader_create_file: path is NULL");
    tl_criteo_reader *r;
    tl_status st = reader_new(path, opts, &r);
    if (st != TL_OK)
        return st;
    r->cap = r->opts.max_line + 2 > MIN_WINDOW ? r->opts.max_line + 2 : MIN_WINDOW;
    r->own = tl_malloc(r->cap);
    if (r->own == NULL) {
        size_t cap = r->cap;
        tl_criteo_reader_destroy(r);
        return tl_error(TL_ENOMEM, "%s: out of memory for a %zu-byte read buffer", path, cap);
    }
    r->buf = r->own;
    r->f = fopen(path, "rb");
    if (r->f == NULL) {
        int e = errno;
        tl_criteo_reader_destroy(r);
        return tl_error(TL_EIO, "%s: cannot open: %s", path, strerror(e));
    }
    *out = r;
    return TL_OK;
}

tl_status tl_criteo_reader_create_memory(const void *data, size_t size, const char *name,
                                         const tl_criteo_options *opts, tl_criteo_reader **out)
{
    if (out == NULL)
        return tl_error(TL_EINVAL, "tl_criteo_reader_create_memory: out is NULL");
    *out = NULL;
    if (data == NULL && size > 0)
        return tl_error(TL_EINVAL, "tl_criteo_reader_create_memory: data is NULL with size %zu", size);
    tl_criteo_reader *r;
    tl_status st = reader_new(name != NULL ? name : "<memory>", opts, &r);
    if (st != TL_OK)
        return st;
    r->buf = data != NULL ? data : "";
    r->end = size;
    r->eof = true;
    *out = r;
    return TL_OK;
}

void tl_criteo_reader_destroy(tl_criteo_reader *r)
{
    if (r == NULL)
        return;
    if (r->f != NULL)
        fclose(r->f);
    tl_free(r->own);
    tl_free(r->name);
    tl_free(r->sticky_msg);
    tl_free(r);
}

int64_t tl_criteo_reader_line(const tl_criteo_reader *r)
{
    return r != NULL ? r->line : 0;
}

/* Finds the next line: *p, *n without "\n" or "\r\n"; *have false at the end.
 * Counts the line. */
static tl_status next_line(tl_criteo_reader *r, const char **p, size_t *n, bool *have)
{
    for (;;) {
        size_t avail = r->end - r->start;
        const char *s = r->buf + r->start;
        const char *nl = avail > 0 ? memchr(s, '\n', avail) : NULL;
        size_t len;
        bool cut = false; /* the window filled with no newline */
        if (nl != NULL) {
            len = (size_t)(nl - s);
            r->start += len + 1;
        } else if (r->eof) {
            if (avail == 0) {
                *have = false;
                return TL_OK;
            }
            len = avail;
            r->start = r->end;
        } else if (avail > r->opts.max_line + 1) {
            len = avail; /* already too long, whatever follows */
            cut = true;
        } else {
            /* compact, then refill the window */
            if (r->start > 0) {
                memmove(r->own, r->own + r->start, avail);
                r->start = 0;
                r->end = avail;
            }
            size_t got = fread(r->own + r->end, 1, r->cap - r->end, r->f);
            if (got == 0) {
                if (ferror(r->f))
                    return make_sticky(r, tl_error(TL_EIO, "%s:%lld: read error: %s", r->name,
                                                   (long long)r->line + 1, strerror(errno)));
                r->eof = true;
            }
            r->end += got;
            continue;
        }
        r->line++;
        if (len > 0 && s[len - 1] == '\r')
            len--;
        if (len > r->opts.max_line)
            return make_sticky(r, tl_error(TL_EPARSE,
                                           "%s:%lld: the line is longer than tl_criteo_options.max_line, %zu bytes%s",
                                           r->name, (long long)r->line, r->opts.max_line,
                                           cut ? " (no newline within the limit)" : ""));
        *p = s;
        *n = len;
        *have = true;
        return TL_OK;
    }
}

/* A decimal int64: optional sign, at least one digit, nothing else. */
static bool parse_dec(const char *p, size_t n, int64_t *out)
{
    size_t i = 0;
    bool neg = false;
    if (n > 0 && (p[0] == '-' || p[0] == '+')) {
        neg = p[0] == '-';
        i = 1;
    }
    if (i == n)
        return false;
    uint64_t v = 0;
    uint64_t lim = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
    for (; i < n; i++) {
        unsigned d = (unsigned)(unsigned char)p[i] - '0';
        if (d > 9 || v > (lim - d) / 10)
            return false;
        v = v * 10 + d;
    }
    *out = neg ? (int64_t)(0 - v) : (int64_t)v; /* 0 - v wraps to INT64_MIN's bits for 2^63 */
    return true;
}

/* 1 to 16 hex digits. */
static bool parse_hex(const char *p, size_t n, uint64_t *out)
{
    if (n == 0 || n > 16)
        return false;
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)p[i];
        unsigned d;
        if (c >= '0' && c <= '9')
            d = c - '0';
        else if (c >= 'a' && c <= 'f')
            d = c - 'a' + 10u;
        else if (c >= 'A' && c <= 'F')
            d = c - 'A' + 10u;
        else
            return false;
        v = v << 4 | d;
    }
    *out = v;
    return true;
}

/* Parses the 40 fields of one line into *ex. */
static tl_status parse_line(const tl_criteo_reader *r, const char *p, size_t n, tl_criteo_example *ex)
{
    const char *f[TL_CRITEO_NUM_FIELDS];
    size_t fl[TL_CRITEO_NUM_FIELDS];
    size_t nf = 0, pos = 0;
    for (;;) {
        const char *tab = memchr(p + pos, '\t', n - pos);
        size_t e = tab != NULL ? (size_t)(tab - p) : n;
        if (nf < TL_CRITEO_NUM_FIELDS) {
            f[nf] = p + pos;
            fl[nf] = e - pos;
        }
        nf++;
        if (tab == NULL)
            break;
        pos = e + 1;
    }
    if (nf != TL_CRITEO_NUM_FIELDS)
        return tl_error(TL_EPARSE,
                        "%s:%lld: expected %d tab-separated fields (label, I1..I13, C1..C26), got %zu",
                        r->name, (long long)r->line, TL_CRITEO_NUM_FIELDS, nf);

    if (fl[0] != 1 || (f[0][0] != '0' && f[0][0] != '1'))
        return field_error(r, 0, "a label of 0 or 1", f[0], fl[0]);
    tl_criteo_example e;
    e.label = f[0][0] - '0';
    for (int k = 0; k < TL_CRITEO_NUM_DENSE; k++) {
        int64_t v = 0;
        if (fl[1 + k] > 0 && !parse_dec(f[1 + k], fl[1 + k], &v))
            return field_error(r, 1 + k, "a decimal integer in int64's range, or nothing", f[1 + k], fl[1 + k]);
        if (v < 0)
            v = 0;
        e.dense[k] = logf((float)v + 1.0f);
    }
    for (int c = 0; c < TL_CRITEO_NUM_CAT; c++) {
        int k = 1 + TL_CRITEO_NUM_DENSE + c;
        uint64_t v = 0;
        if (fl[k] > 0 && !parse_hex(f[k], fl[k], &v))
            return field_error(r, k, "a hexadecimal id of 1 to 16 digits, or nothing", f[k], fl[k]);
        int64_t m = r->opts.vocab_sizes[c];
        if (m > 0)
            v %= (uint64_t)m;
        else if (v > (uint64_t)INT64_MAX)
            return field_error(r, k, "an id at most 7fffffffffffffff (set tl_criteo_options.vocab_sizes)", f[k],
                               fl[k]);
        e.ids[c] = (int64_t)v;
    }
    *ex = e;
    return TL_OK;
}

static tl_status next_one(tl_criteo_reader *r, tl_criteo_example *ex, bool *got)
{
    *got = false;
    if (r->sticky != TL_OK)
        return r->sticky_msg != NULL ? tl_error(r->sticky, "%s", r->sticky_msg) : tl_error_oom();
    const char *p = NULL;
    size_t n = 0;
    bool have = false;
    tl_status st = next_line(r, &p, &n, &have);
    if (st != TL_OK || !have)
        return st;
    st = parse_line(r, p, n, ex);
    if (st == TL_OK)
        *got = true;
    return st;
}

tl_status tl_criteo_reader_next(tl_criteo_reader *r, tl_criteo_example *ex, bool *got)
{
    if (r == NULL || ex == NULL || got == NULL)
        return tl_error(TL_EINVAL, "tl_criteo_reader_next: %s is NULL", r == NULL ? "r" : ex == NULL ? "ex" : "got");
    return next_one(r, ex, got);
}

tl_status tl_criteo_reader_next_batch(tl_criteo_reader *r, int64_t batch, float *dense, int64_t *ids,
                                      int32_t *labels, int64_t *got)
{
    if (got != NULL)
        *got = 0;
    if (r == NULL || got == NULL)
        return tl_error(TL_EINVAL, "tl_criteo_reader_next_batch: %s is NULL", r == NULL ? "r" : "got");
    if (batch < 0)
        return tl_error(TL_EINVAL, "tl_criteo_reader_next_batch: batch must be >= 0 (got %lld)", (long long)batch);
    if (batch > 0 && (dense == NULL || ids == NULL || labels == NULL))
        return tl_error(TL_EINVAL, "tl_criteo_reader_next_batch: %s is NULL",
                        dense == NULL ? "dense" : ids == NULL ? "ids" : "labels");
    for (int64_t i = 0; i < batch; i++) {
        tl_criteo_example ex;
        bool have;
        tl_status st = next_one(r, &ex, &have);
        if (st != TL_OK || !have)
            return st;
        labels[i] = ex.label;
        memcpy(dense + i * TL_CRITEO_NUM_DENSE, ex.dense, sizeof ex.dense);
        memcpy(ids + i * TL_CRITEO_NUM_CAT, ex.ids, sizeof ex.ids);
        *got = i + 1;
    }
    return TL_OK;
}
