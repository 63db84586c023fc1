/* The CSV reader: typed columns, RFC 4180 quoting (delimiters, doubled
 * quotes and newlines inside quotes, CRLF), the header check, each error with
 * its file, line, column and value, the batch API with a label column, the
 * record cap, files against memory, every truncation of a small file, and
 * allocation failure. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tpuloop/base.h"
#include "tpuloop/text_data.h"

#define EXPECT_ERR(call, status, frag)                                                                  \
    do {                                                                                                \
        tl_status st_ = (call);                                                                         \
        cr_assert_eq(st_, (status), "%s: got %s (%s)", #call, tl_err_name(st_), tl_last_error());      \
        cr_assert(strstr(tl_last_error(), (frag)) != NULL, "message \"%s\" lacks \"%s\"", tl_last_error(), \
                  (frag));                                                                              \
    } while (0)

/* x float32, n int64, s string, y int64 (the label). */
static const tl_csv_column COLS[] = {
    {"x", TL_CSV_FLOAT32}, {"n", TL_CSV_INT64}, {"s", TL_CSV_STRING}, {"y", TL_CSV_INT64}};

static tl_csv_options opts4(void)
{
    tl_csv_options o;
    tl_csv_options_init(&o);
    o.columns = COLS;
    o.num_columns = 4;
    o.label_column = "y";
    return o;
}

static tl_csv_reader *open_text(const char *text, const tl_csv_options *o)
{
    tl_csv_reader *r = NULL;
    tl_status st = tl_csv_reader_create_memory(text, strlen(text), "t.csv", o, &r);
    cr_assert_eq(st, TL_OK, "%s", tl_last_error());
    return r;
}

/* The next record's string column s. */
static const char *next_s(tl_csv_reader *r, size_t *len)
{
    bool got = false;
    tl_status st = tl_csv_reader_next(r, &got);
    cr_assert_eq(st, TL_OK, "%s", tl_last_error());
    cr_assert(got);
    return tl_csv_reader_string(r, 2, len);
}

static void at_end(tl_csv_reader *r)
{
    bool got = true;
    cr_assert_eq(tl_csv_reader_next(r, &got), TL_OK, "%s", tl_last_error());
    cr_assert_not(got);
}

Test(data_csv, typed_values)
{
    tl_csv_options o = opts4();
    tl_csv_reader *r = open_text("x,n,s,y\n1.5,-7,hello,3\n-2e-3,9223372036854775807,,0\nnan,+0,\"a\",1\n", &o);
    cr_assert_eq(tl_csv_reader_line(r), 1);
    cr_assert_eq(tl_csv_reader_num_features(r), 2);
    size_t len;
    cr_assert_str_eq(next_s(r, &len), "hello");
    cr_assert_eq(len, 5);
    cr_assert_eq(tl_csv_reader_float(r, 0), 1.5f);
    cr_assert_eq(tl_csv_reader_int64(r, 1), -7);
    cr_assert_eq(tl_csv_reader_int64(r, 3), 3);
    cr_assert_eq(tl_csv_reader_line(r), 2);
    cr_assert_str_eq(next_s(r, &len), "");
    cr_assert_eq(tl_csv_reader_float(r, 0), strtof("-2e-3", NULL));
    cr_assert_eq(tl_csv_reader_int64(r, 1), INT64_MAX);
    cr_assert_str_eq(next_s(r, NULL), "a");
    cr_assert(isnan(tl_csv_reader_float(r, 0)));
    /* the wrong type or column is the caller's bug: a zero value */
    cr_assert_eq(tl_csv_reader_int64(r, 0), 0);
    cr_assert_eq(tl_csv_reader_float(r, 7), 0.0f);
    cr_assert_null(tl_csv_reader_string(r, 1, NULL));
    at_end(r);
    tl_csv_reader_destroy(r);
}

Test(data_csv, rfc4180_quoting)
{
    tl_csv_options o = opts4();
    const char *text = "x,n,s,y\r\n"
                       "1,2,\"a,b\",0\r\n"          /* a delimiter inside quotes */
                       "1,2,\"say \"\"hi\"\"\",0\n" /* doubled quotes */
                       "1,2,\"two\nlines\",0\n"     /* a newline inside quotes */
                       "1,2,\"crlf\r\nkept\",0\n"   /* CRLF inside quotes is data */
                       "\n\r\n"                     /* blank lines are skipped */
                       "\"1\",\"2\",\"\",\"0\"\n"   /* quoted numbers; an empty quoted string */
                       "1,2,a\rb,0\n"               /* a lone CR in an unquoted field is data */
                       "1,2,last,0";                /* no final newline */
    tl_csv_reader *r = open_text(text, &o);
    size_t len;
    cr_assert_str_eq(next_s(r, &len), "a,b");
    cr_assert_eq(tl_csv_reader_line(r), 2);
    cr_assert_str_eq(next_s(r, &len), "say \"hi\"");
    cr_assert_str_eq(next_s(r, &len), "two\nlines");
    cr_assert_eq(tl_csv_reader_line(r), 4);
    cr_assert_str_eq(next_s(r, &len), "crlf\r\nkept");
    cr_assert_eq(tl_csv_reader_line(r), 6);
    cr_assert_str_eq(next_s(r, &len), "");
    cr_assert_eq(tl_csv_reader_line(r), 10, "after the blank lines 8 and 9");
    cr_assert_eq(tl_csv_reader_int64(r, 1), 2);
    cr_assert_str_eq(next_s(r, &len), "a\rb");
    cr_assert_str_eq(next_s(r, &len), "last");
    cr_assert_eq(tl_csv_reader_line(r), 12);
    at_end(r);
    tl_csv_reader_destroy(r);

    /* a NUL inside a string is kept, and len says so */
    static const char nul[] = "x,n,s,y\n1,2,a\0b,0\n";
    cr_assert_eq(tl_csv_reader_create_memory(nul, sizeof nul - 1, NULL, &o, &r), TL_OK, "%s", tl_last_error());
    const char *s = next_s(r, &len);
    cr_assert_eq(len, 3);
    cr_assert_eq(memcmp(s, "a\0b", 4), 0);
    tl_csv_reader_destroy(r);

    /* another delimiter */
    o.delimiter = ';';
    r = open_text("x;n;s;y\n0.25;1;a,b;1\n", &o);
    cr_assert_str_eq(next_s(r, &len), "a,b");
    cr_assert_eq(tl_csv_reader_float(r, 0), 0.25f);
    tl_csv_reader_destroy(r);
}

/* One bad record between good ones: the message, then reading goes on. */
static void value_fails(const char *record, const char *frag)
{
    tl_csv_options o = opts4();
    char text[512];
    snprintf(text, sizeof text, "x,n,s,y\n1,1,a,1\n%s\n2,2,b,2\n", record);
    tl_csv_reader *r = open_text(text, &o);
    bool got;
    cr_assert_eq(tl_csv_reader_next(r, &got), TL_OK);
    EXPECT_ERR(tl_csv_reader_next(r, &got), TL_EPARSE, frag);
    cr_assert_not(got);
    size_t len;
    cr_assert_str_eq(next_s(r, &len), "b", "reading goes on after %s", record);
    at_end(r);
    tl_csv_reader_destroy(r);
}

Test(data_csv, bad_values_name_file_line_column_and_value)
{
    value_fails("abc,1,a,1", "t.csv:3: column 1 (\"x\", float32): expected a number (got \"abc\")");
    value_fails(",1,a,1", "column 1 (\"x\", float32): expected a number (got \"\")");
    value_fails(" 1,1,a,1", "(got \" 1\")");
    value_fails("1.5x,1,a,1", "(got \"1.5x\")");
    value_fails("1e99,1,a,1", "expected a number in float32's range (got \"1e99\")");
    value_fails("1,1.5,a,1",
                "t.csv:3: column 2 (\"n\", int64): expected a decimal integer in int64's range (got \"1.5\")");
    value_fails("1,9223372036854775808,a,1", "column 2 (\"n\", int64)");
    value_fails("1,,a,1", "(got \"\")");
    value_fails("1,\"7\n\",a,1", "(got \"7\\x0a\")");
    value_fails("1,1,a", "t.csv:3: expected 4 fields, got 3");
    value_fails("1,1,a,1,", "t.csv:3: expected 4 fields, got 5");
    value_fails("1,1,\"a,b\",1,5,6", "got 6");
}

/* Quoting errors are sticky: every later call repeats them. */
static void quoting_fails(const char *text, const char *frag)
{
    tl_csv_options o = opts4();
    tl_csv_reader *r = open_text(text, &o);
    bool got;
    EXPECT_ERR(tl_csv_reader_next(r, &got), TL_EPARSE, frag);
    EXPECT_ERR(tl_csv_reader_next(r, &got), TL_EPARSE, frag);
    tl_csv_reader_destroy(r);
}

Test(data_csv, quoting_errors)
{
    quoting_fails("x,n,s,y\n1,2,ab\"c,0\n", "t.csv:2: field 3: a quote inside an unquoted field");
    quoting_fails("x,n,s,y\n1,2,\"ab\"c,0\n", "t.csv:2: field 3: expected a delimiter or the end of the record "
                                             "after a closing quote (got 'c')");
    quoting_fails("x,n,s,y\n1,2,\"ab\"\r0\n", "after a closing quote (got \\x0d)");
    quoting_fails("x,n,s,y\n1,2,\"a\nb\nc,0\n", "t.csv:5: field 3: the quoted field that begins on line 2 has no "
                                               "closing quote");
}

Test(data_csv, header_and_options)
{
    tl_csv_options o = opts4();
    tl_csv_reader *r = NULL;
    EXPECT_ERR(tl_csv_reader_create_memory("", 0,
               "e.csv", &o, &r), TL_EPARSE, "e.csv: empty input; expected a header line");
    cr_assert_null(r);
    EXPECT_ERR(tl_csv_reader_create_memory("\n\n", 2, "e.csv", &o, &r), TL_EPARSE, "empty input");
    EXPECT_ERR(tl_csv_reader_create_memory("x,n,b,y\n", 8, "h.csv", &o, &r), TL_EPARSE,
               "h.csv:1: header column 3 is \"b\"; expected \"s\"");
    EXPECT_ERR(tl_csv_reader_create_memory("x,n,s\n", 6, "h.csv", &o, &r), TL_EPARSE,
               "h.csv:1: the header has 3 fields; expected 4");
    /* a quoted header name matches */
    r = open_text("\"x\",n,\"s\",y\n", &o);
    at_end(r);
    tl_csv_reader_destroy(r);

    o.label_column = "s";
    EXPECT_ERR(tl_csv_reader_create_memory("", 0, NULL, &o, &r), TL_EINVAL,
               "tl_csv_options.label_column: \"s\" must be TL_CSV_INT64 (it is string)");
    o.label_column = "zz";
    EXPECT_ERR(tl_csv_reader_create_memory("", 0, NULL, &o, &r), TL_EINVAL, "\"zz\" is not one of the columns");
    o = opts4();
    o.delimiter = '"';
    EXPECT_ERR(tl_csv_reader_create_memory("", 0, NULL, &o, &r), TL_EINVAL, "tl_csv_options.delimiter");
    o = opts4();
    o.num_columns = 0;
    EXPECT_ERR(tl_csv_reader_create_memory("", 0, NULL, &o, &r), TL_EINVAL,
               "tl_csv_options.num_columns: must be 1..65536");
    static const tl_csv_column dup[] = {{"a", TL_CSV_INT64}, {"a", TL_CSV_STRING}};
    o.columns = dup;
    o.num_columns = 2;
    o.label_column = NULL;
    EXPECT_ERR(tl_csv_reader_create_memory("", 0, NULL, &o, &r), TL_EINVAL,
               "tl_csv_options.columns[1].name: \"a\" is also column 0");
    EXPECT_ERR(tl_csv_reader_create_memory("", 0, NULL, NULL, &r), TL_EINVAL, "tl_csv_options: NULL");
    o = opts4();
    EXPECT_ERR(tl_csv_reader_create_file("/nonexistent/a.csv", &o, &r), TL_EIO, "/nonexistent/a.csv: cannot open");
    cr_assert_null(r);
}

Test(data_csv, batches_with_a_label)
{
    tl_csv_options o = opts4();
    tl_csv_reader *r = open_text("x,n,s,y\n0.5,10,a,1\n1.5,20,b,0\n2.5,30,c,4\n", &o);
    float f[2 * 2];
    int32_t y[2];
    int64_t got;
    cr_assert_eq(tl_csv_reader_next_batch(r, 2, f, y, &got), TL_OK, "%s", tl_last_error());
    cr_assert_eq(got, 2);
    cr_assert_eq(f[0], 0.5f);
    cr_assert_eq(f[1], 10.0f);
    cr_assert_eq(f[2], 1.5f);
    cr_assert_eq(f[3], 20.0f);
    cr_assert_eq(y[0], 1);
    cr_assert_eq(y[1], 0);
    cr_assert_eq(tl_csv_reader_next_batch(r, 2, f, y, &got), TL_OK);
    cr_assert_eq(got, 1);
    cr_assert_eq(f[0], 2.5f);
    cr_assert_eq(y[0], 4);
    cr_assert_eq(tl_csv_reader_next_batch(r, 2, f, y, &got), TL_OK);
    cr_assert_eq(got, 0);
    tl_csv_reader_destroy(r);

    r = open_text("x,n,s,y\n0.5,10,a,1\n1,1,a,2147483648\n", &o);
    EXPECT_ERR(tl_csv_reader_next_batch(r, 2, f, y, &got), TL_EPARSE,
               "t.csv:3: column 4 (\"y\", int64): expected a label in int32's range (got \"2147483648\")");
    cr_assert_eq(got, 1);
    tl_csv_reader_destroy(r);

    o.label_column = NULL;
    r = open_text("x,n,s,y\n", &o);
    EXPECT_ERR(tl_csv_reader_next_batch(r, 2, f, y, &got), TL_EINVAL, "no tl_csv_options.label_column");
    cr_assert_eq(tl_csv_reader_num_features(r), 3);
    tl_csv_reader_destroy(r);
}

static void write_temp(char *path, const char *text, size_t n)
{
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    FILE *f = fdopen(fd, "wb");
    cr_assert_not_null(f);
    cr_assert_eq(fwrite(text, 1, n, f), n);
    cr_assert_eq(fclose(f), 0);
}

/* 20000 records (several read windows, with quoted fields across window
 * edges) from a file equal those from memory. */
Test(data_csv, file_matches_memory)
{
    size_t cap = 20000 * 64;
    char *text = calloc(cap, 1);
    cr_assert_not_null(text);
    size_t n = (size_t)snprintf(text, cap, "x,n,s,y\n");
    for (int i = 0; i < 20000; i++)
        n += (size_t)snprintf(text + n, cap - n, "%d.25,%d,\"q,%d\n\"\"z\"\"\",%d\r\n", i, -i, i, i % 10);
    char path[] = "/tmp/tl_csv_XXXXXX";
    write_temp(path, text, n);
    tl_csv_options o = opts4();
    tl_csv_reader *a, *b;
    cr_assert_eq(tl_csv_reader_create_file(path, &o, &a), TL_OK, "%s", tl_last_error());
    cr_assert_eq(tl_csv_reader_create_memory(text, n, NULL, &o, &b), TL_OK);
    int count = 0;
    for (;;) {
        bool ga, gb;
        cr_assert_eq(tl_csv_reader_next(a, &ga), TL_OK, "%s", tl_last_error());
        cr_assert_eq(tl_csv_reader_next(b, &gb), TL_OK, "%s", tl_last_error());
        cr_assert_eq(ga, gb);
        if (!ga)
            break;
        char want[64];
        snprintf(want, sizeof want, "q,%d\n\"z\"", count);
        cr_assert_str_eq(tl_csv_reader_string(a, 2, NULL), want);
        cr_assert_str_eq(tl_csv_reader_string(b, 2, NULL), want);
        cr_assert_eq(tl_csv_reader_float(a, 0), (float)count + 0.25f);
        cr_assert_eq(tl_csv_reader_int64(a, 1), -count);
        cr_assert_eq(tl_csv_reader_line(a), tl_csv_reader_line(b));
        cr_assert_eq(tl_csv_reader_line(a), 2 + 2 * count);
        count++;
    }
    cr_assert_eq(count, 20000);
    tl_csv_reader_destroy(a);
    tl_csv_reader_destroy(b);
    unlink(path);
    free(text);
}

Test(data_csv, record_cap)
{
    tl_csv_options o = opts4();
    o.max_record = 16; /* bytes, line end included */
    tl_csv_reader *r = open_text("x,n,s,y\n1,2,abcdefghi,3\n1,2,abcdefghij,3\n", &o);
    size_t len;
    cr_assert_str_eq(next_s(r, &len), "abcdefghi"); /* 15 bytes + "\n" */
    bool got;
    EXPECT_ERR(tl_csv_reader_next(r, &got), TL_EPARSE,
               "t.csv:3: the record is longer than tl_csv_options.max_record, 16 bytes");
    EXPECT_ERR(tl_csv_reader_next(r, &got), TL_EPARSE, "t.csv:3: the record is longer");
    tl_csv_reader_destroy(r);
    /* an unterminated quote runs into the cap, not through the whole input */
    r = open_text("x,n,s,y\n1,2,\"abcdefghijklmnopqrstuvwxyz\n", &o);
    EXPECT_ERR(tl_csv_reader_next(r, &got), TL_EPARSE, "longer than tl_csv_options.max_record");
    tl_csv_reader_destroy(r);
}

/* Every prefix of a small file ends in records and then statuses. */
Test(data_csv, truncation_at_every_offset)
{
    const char *text = "x,n,s,y\r\n1.5,2,\"a,\"\"b\"\"\nc\",3\n\n-1,-2,plain,4\r\n";
    size_t n = strlen(text);
    tl_csv_options o = opts4();
    for (size_t cut = 0; cut <= n; cut++) {
        char *copy = malloc(cut + 1);
        cr_assert_not_null(copy);
        memcpy(copy, text, cut);
        tl_csv_reader *r = NULL;
        tl_status st = tl_csv_reader_create_memory(copy, cut, NULL, &o, &r);
        if (st != TL_OK) {
            cr_assert_eq(st, TL_EPARSE, "cut %zu: %s", cut, tl_last_error());
            cr_assert_null(r);
            free(copy);
            continue;
        }
        int good = 0;
        for (int it = 0; it < 10; it++) {
            bool got;
            st = tl_csv_reader_next(r, &got);
            if (st != TL_OK) {
                cr_assert_eq(st, TL_EPARSE, "cut %zu: %s", cut, tl_last_error());
                continue;
            }
            if (!got)
                break;
            good++;
        }
        if (cut == n)
            cr_assert_eq(good, 2);
        tl_csv_reader_destroy(r);
        free(copy);
    }
}

static long calls, fail_at = -1, live;
static void *cnt_malloc(size_t n, void *ud)
{
    (void)ud;
    if (calls++ == fail_at)
        return NULL;
    void *p = malloc(n);
    live += p != NULL;
    return p;
}
static void *cnt_realloc(void *p, size_t n, void *ud)
{
    (void)ud;
    if (calls++ == fail_at)
        return NULL;
    live += p == NULL;
    return realloc(p, n);
}
static void cnt_free(void *p, void *ud)
{
    (void)ud;
    live -= p != NULL;
    free(p);
}

Test(data_csv, allocation_failure_unwinds)
{
    static const tl_allocator a = {cnt_malloc, cnt_realloc, cnt_free, NULL};
    const char *text = "x,n,s,y\n1,2,\"quoted, long enough to grow the record buffer past 256 bytes ................"
                       "......................................................................................."
                       "......................................................................................."
                       "\",3\n";
    char path[] = "/tmp/tl_csv_XXXXXX";
    write_temp(path, text, strlen(text));
    tl_csv_options o = opts4();
    for (fail_at = 0;; fail_at++) {
        calls = 0;
        live = 0;
        tl_set_allocator(&a);
        tl_csv_reader *r = NULL;
        tl_status st = tl_csv_reader_create_file(path, &o, &r); /* leaves r NULL when it fails */
        bool got = false;
        if (st == TL_OK)
            st = tl_csv_reader_next(r, &got);
        tl_csv_reader_destroy(r);
        tl_set_allocator(NULL);
        cr_assert_eq(live, 0, "leak with allocation %ld failing", fail_at);
        if (st == TL_OK) {
            cr_assert(got);
            if (calls <= fail_at)
                break;
            continue;
        }
        cr_assert_eq(st, TL_ENOMEM, "allocation %ld: %s", fail_at, tl_last_error());
    }
    cr_assert_geq(fail_at, 8);
    unlink(path);
}
