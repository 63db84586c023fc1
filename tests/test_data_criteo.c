/* The Criteo TSV reader: the DLRM transform bit for bit, hashing into
 * vocabularies, each malformed line with its message, files against memory
 * across the read window, the batch API, every truncation of a small file,
 * and allocation failure. The lines are written here by hand. */
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

/* The 40 fields of a line, default values first; tests overwrite some. */
typedef struct fields {
    char f[TL_CRITEO_NUM_FIELDS][64];
} fields;

static fields base(void)
{
    static const char *const cat[TL_CRITEO_NUM_CAT] = {
        "68fd1e64", "80e26c9b", "fb936136", "7b4723c4", "25c83c98", "7e0ccccf", "de7995b8", "1f89b562", "a73ee510",
        "a8cd5504", "b2cb9c98", "37c9c164", "2824a5f6", "1adce6ef", "8ba8b39a", "891b62e7", "e5ba7672", "f54016b9",
        "21ddcdc9", "b1252a9d", "07b5194c", "",         "3a171ecb", "c5c50484", "e8b83407", "9727dd16"};
    fields x;
    snprintf(x.f[0], 64, "1");
    for (int k = 0; k < TL_CRITEO_NUM_DENSE; k++)
        snprintf(x.f[1 + k], 64, "%d", k * 7);
    for (int c = 0; c < TL_CRITEO_NUM_CAT; c++)
        snprintf(x.f[1 + TL_CRITEO_NUM_DENSE + c], 64, "%s", cat[c]);
    return x;
}

/* Appends the line of x (tab-joined, "\n") to buf. */
static void join(char *buf, size_t cap, const fields *x)
{
    size_t n = strlen(buf);
    for (int k = 0; k < TL_CRITEO_NUM_FIELDS; k++)
        n += (size_t)snprintf(buf + n, cap - n, "%s%s", x->f[k], k + 1 < TL_CRITEO_NUM_FIELDS ? "\t" : "\n");
    cr_assert_lt(n, cap);
}

static uint32_t bits(float f)
{
    uint32_t b;
    memcpy(&b, &f, 4);
    return b;
}

/* The documented transform: negatives to 0, then logf((float)x + 1.0f). */
static float dlrm(int64_t x)
{
    return logf((float)(x < 0 ? 0 : x) + 1.0f);
}

/* Reads the single line text with opts (NULL: defaults) into *ex. */
static tl_status read_one(const char *text, const tl_criteo_options *o, tl_criteo_example *ex)
{
    tl_criteo_reader *r;
    tl_status st = tl_criteo_reader_create_memory(text, strlen(text), "t.tsv", o, &r);
    cr_assert_eq(st, TL_OK, "%s", tl_last_error());
    bool got = false;
    st = tl_criteo_reader_next(r, ex, &got);
    if (st == TL_OK)
        cr_assert(got);
    tl_criteo_reader_destroy(r);
    return st;
}

/* The one-line input with field k set to value fails with frag. */
static void field_fails(int k, const char *value, const char *frag)
{
    fields x = base();
    snprintf(x.f[k], 64, "%s", value);
    char buf[4096] = "";
    join(buf, sizeof buf, &x);
    tl_criteo_example ex;
    EXPECT_ERR(read_one(buf, NULL, &ex), TL_EPARSE, frag);
}

Test(data_criteo, values_follow_the_dlrm_transform)
{
    fields x = base();
    char buf[4096] = "";
    join(buf, sizeof buf, &x);
    tl_criteo_example ex;
    cr_assert_eq(read_one(buf, NULL, &ex), TL_OK, "%s", tl_last_error());
    cr_assert_eq(ex.label, 1);
    for (int k = 0; k < TL_CRITEO_NUM_DENSE; k++)
        cr_assert_eq(bits(ex.dense[k]), bits(dlrm(k * 7)), "I%d: %a vs %a", k + 1, ex.dense[k], dlrm(k * 7));
    cr_assert_eq(ex.ids[0], 0x68fd1e64);
    cr_assert_eq(ex.ids[1], 0x80e26c9b); /* above INT32_MAX: kept whole in int64 */
    cr_assert_eq(ex.ids[21], 0, "an empty categorical is id 0");
    cr_assert_eq(ex.ids[25], 0x9727dd16);
    /* a known value: log(1 + 7) in float32 */
    cr_assert_eq(bits(ex.dense[1]), bits(logf(8.0f)));
    cr_assert_float_eq(ex.dense[1], 2.0794415f, 1e-6f);
}

Test(data_criteo, empty_and_negative_dense_are_zero)
{
    fields x = base();
    snprintf(x.f[1], 64, "%s", "");
    snprintf(x.f[2], 64, "%s", "-1");
    snprintf(x.f[3], 64, "%s", "-9223372036854775808");
    snprintf(x.f[4], 64, "%s", "+5");
    snprintf(x.f[5], 64, "%s", "0");
    snprintf(x.f[6], 64, "%s", "-0");
    snprintf(x.f[0], 64, "%s", "0");
    char buf[4096] = "";
    join(buf, sizeof buf, &x);
    tl_criteo_example ex;
    cr_assert_eq(read_one(buf, NULL, &ex), TL_OK, "%s", tl_last_error());
    cr_assert_eq(ex.label, 0);
    cr_assert_eq(bits(ex.dense[0]), 0u, "empty -> +0.0f");
    cr_assert_eq(bits(ex.dense[1]), 0u, "-1 -> 0");
    cr_assert_eq(bits(ex.dense[2]), 0u, "INT64_MIN -> 0");
    cr_assert_eq(bits(ex.dense[3]), bits(logf(6.0f)));
    cr_assert_eq(bits(ex.dense[4]), 0u);
    cr_assert_eq(bits(ex.dense[5]), 0u);
}

Test(data_criteo, big_integers)
{
    fields x = base();
    snprintf(x.f[1], 64, "%s", "9223372036854775807");
    snprintf(x.f[2], 64, "%s", "2147483648");
    snprintf(x.f[3], 64, "%s", "16777217"); /* rounds to 2^24 as a float, then + 1 rounds again */
    char buf[4096] = "";
    join(buf, sizeof buf, &x);
    tl_criteo_example ex;
    cr_assert_eq(read_one(buf, NULL, &ex), TL_OK, "%s", tl_last_error());
    cr_assert_eq(bits(ex.dense[0]), bits(logf(9223372036854775808.0f)));
    cr_assert_float_eq(ex.dense[0], 43.668274f, 1e-4f);
    cr_assert_eq(bits(ex.dense[1]), bits(logf(2147483648.0f + 1.0f)));
    cr_assert_eq(bits(ex.dense[2]), bits(logf(16777216.0f)));
    field_fails(1, "9223372036854775808", "field 2 (I1): expected a decimal integer in int64's range");
    field_fails(13, "-9223372036854775809", "field 14 (I13)");
    field_fails(1, "99999999999999999999999", "(got \"99999999999999999999999\")");
}

Test(data_criteo, ids_hash_into_vocab_sizes)
{
    tl_criteo_options o;
    tl_criteo_options_init(&o);
    o.vocab_sizes[0] = 1000;
    o.vocab_sizes[1] = 1;
    o.vocab_sizes[2] = 10000000; /* DLRM's usual --max-ind-range */
    o.vocab_sizes[3] = 7;
    fields x = base();
    snprintf(x.f[17], 64, "%s", "FFFFFFFFFFFFFFFF"); /* C4: 2^64 - 1 with a modulo is fine */
    snprintf(x.f[18], 64, "%s", "00000000000000000000000000"); /* 26 digits: too many */
    char buf[4096] = "";
    join(buf, sizeof buf, &x);
    tl_criteo_example ex;
    EXPECT_ERR(read_one(buf, &o, &ex), TL_EPARSE,
               "t.tsv:1: field 19 (C5): expected a hexadecimal id of 1 to 16 digits");
    x = base();
    snprintf(x.f[17], 64, "%s", "FFFFFFFFFFFFFFFF");
    buf[0] = '\0';
    join(buf, sizeof buf, &x);
    cr_assert_eq(read_one(buf, &o, &ex), TL_OK, "%s", tl_last_error());
    cr_assert_eq(ex.ids[0], 0x68fd1e64 % 1000);
    cr_assert_eq(ex.ids[1], 0);
    cr_assert_eq(ex.ids[2], 0xfb936136LL % 10000000);
    cr_assert_eq(ex.ids[3], (int64_t)(UINT64_MAX % 7));
    cr_assert_eq(ex.ids[4], 0x25c83c98, "vocab 0: the value itself");
    for (int c = 0; c < 4; c++)
        cr_assert(ex.ids[c] >= 0 && ex.ids[c] < o.vocab_sizes[c]);
    /* without a modulo, a value past INT64_MAX cannot be an id */
    EXPECT_ERR(read_one(buf, NULL, &ex), TL_EPARSE, "field 18 (C4): expected an id at most 7fffffffffffffff");
    /* lower case, upper case and short values all parse as int(x, 16) does */
    x = base();
    snprintf(x.f[14], 64, "%s", "aBcD");
    snprintf(x.f[15], 64, "%s", "7fffffffffffffff");
    buf[0] = '\0';
    join(buf, sizeof buf, &x);
    cr_assert_eq(read_one(buf, NULL, &ex), TL_OK, "%s", tl_last_error());
    cr_assert_eq(ex.ids[0], 0xabcd);
    cr_assert_eq(ex.ids[1], INT64_MAX);
    o.vocab_sizes[5] = -3;
    tl_criteo_reader *r = NULL;
    EXPECT_ERR(tl_criteo_reader_create_memory("", 0, NULL, &o, &r), TL_EINVAL,
               "tl_criteo_options.vocab_sizes[5] (C6): must be >= 0 (got -3)");
    cr_assert_null(r);
}

Test(data_criteo, bad_fields_name_line_column_and_value)
{
    field_fails(0, "2", "t.tsv:1: field 1 (label): expected a label of 0 or 1 (got \"2\")");
    field_fails(0, "", "field 1 (label): expected a label of 0 or 1 (got \"\")");
    field_fails(0, "01", "(got \"01\")");
    field_fails(0, "-1", "(got \"-1\")");
    field_fails(3, "1.5",
                "t.tsv:1: field 4 (I3): expected a decimal integer in int64's range, or nothing (got \"1.5\")");
    field_fails(3, "abc", "field 4 (I3)");
    field_fails(3, " 1", "(got \" 1\")");
    field_fails(3, "0x10", "(got \"0x10\")");
    field_fails(3, "-", "(got \"-\")");
    field_fails(3, "1\r", "(got \"1\\x0d\")");
    field_fails(14, "xyz",
                "t.tsv:1: field 15 (C1): expected a hexadecimal id of 1 to 16 digits, or nothing (got \"xyz\")");
    field_fails(39, "0x1f", "field 40 (C26)");
    field_fails(39, "-1", "field 40 (C26)");
    field_fails(20, "12345678901234567", "field 21 (C7)"); /* 17 digits */
    field_fails(20, "\"q\"", "(got \"\\\"q\\\"\")");
    field_fails(20, "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "\"...");
}

Test(data_criteo, wrong_field_counts)
{
    tl_criteo_example ex;
    EXPECT_ERR(read_one("\n", NULL, &ex), TL_EPARSE,
               "t.tsv:1: expected 40 tab-separated fields (label, I1..I13, C1..C26), got 1");
    EXPECT_ERR(read_one("1\t2\t3", NULL, &ex), TL_EPARSE, "got 3");
    fields x = base();
    char buf[4096] = "";
    join(buf, sizeof buf, &x);
    buf[strlen(buf) - 1] = '\t'; /* a 41st, empty field */
    EXPECT_ERR(read_one(buf, NULL, &ex), TL_EPARSE, "got 41");
    /* 39 fields: drop the last tab and field */
    buf[0] = '\0';
    join(buf, sizeof buf, &x);
    *strrchr(buf, '\t') = '\0';
    EXPECT_ERR(read_one(buf, NULL, &ex), TL_EPARSE, "got 39");
}

/* Three good lines around a bad one: the error names line 3, and reading goes
 * on after it. CRLF endings and a last line without a newline are fine. */
Test(data_criteo, errors_leave_the_reader_after_the_line)
{
    fields x = base();
    char buf[8192] = "";
    join(buf, sizeof buf, &x);
    join(buf, sizeof buf, &x);
    snprintf(x.f[5], 64, "%s", "z");
    join(buf, sizeof buf, &x);
    x = base();
    snprintf(x.f[0], 64, "%s", "0");
    join(buf, sizeof buf, &x);
    buf[strlen(buf) - 1] = '\0'; /* no final newline */
    /* the second line with CRLF */
    char crlf[8192];
    char *nl = strchr(buf, '\n');
    size_t head = (size_t)(nl - buf) + 1;
    char *nl2 = strchr(nl + 1, '\n');
    size_t l2 = (size_t)(nl2 - (nl + 1));
    memcpy(crlf, buf, head + l2);
    crlf[head + l2] = '\r';
    strcpy(crlf + head + l2 + 1, nl2);

    tl_criteo_reader *r;
    cr_assert_eq(tl_criteo_reader_create_memory(crlf, strlen(crlf), "day_0", NULL, &r), TL_OK);
    tl_criteo_example ex;
    bool got;
    cr_assert_eq(tl_criteo_reader_next(r, &ex, &got), TL_OK, "%s", tl_last_error());
    cr_assert_eq(tl_criteo_reader_next(r, &ex, &got), TL_OK, "%s", tl_last_error());
    cr_assert_eq(ex.ids[25], 0x9727dd16, "\\r is not part of the last field");
    EXPECT_ERR(tl_criteo_reader_next(r, &ex, &got), TL_EPARSE, "day_0:3: field 6 (I5)");
    cr_assert_not(got);
    cr_assert_eq(tl_criteo_reader_line(r), 3);
    cr_assert_eq(tl_criteo_reader_next(r, &ex, &got), TL_OK, "%s", tl_last_error());
    cr_assert(got);
    cr_assert_eq(ex.label, 0);
    cr_assert_eq(tl_criteo_reader_line(r), 4);
    cr_assert_eq(tl_criteo_reader_next(r, &ex, &got), TL_OK);
    cr_assert_not(got);
    cr_assert_eq(tl_criteo_reader_next(r, &ex, &got), TL_OK);
    cr_assert_not(got);
    tl_criteo_reader_destroy(r);
}

/* Writes text to a new temporary file; the caller unlinks path. */
static void write_temp(char *path, const char *text, size_t n)
{
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    FILE *f = fdopen(fd, "wb");
    cr_assert_not_null(f);
    cr_assert_eq(fwrite(text, 1, n, f), n);
    cr_assert_eq(fclose(f), 0);
}

/* 3000 lines (about 450 KiB, several read windows) read from a file equal
 * those read from memory. */
Test(data_criteo, file_matches_memory_across_windows)
{
    size_t cap = 3000 * 400;
    char *text = calloc(cap, 1);
    cr_assert_not_null(text);
    for (int i = 0; i < 3000; i++) {
        fields x = base();
        snprintf(x.f[0], 64, "%d", i % 2);
        snprintf(x.f[1 + i % 13], 64, "%d", i * 1000 - 5000);
        snprintf(x.f[14 + i % 26], 64, "%x", (unsigned)i * 2654435761u);
        join(text, cap, &x);
    }
    size_t n = strlen(text);
    char path[] = "/tmp/tl_criteo_XXXXXX";
    write_temp(path, text, n);
    tl_criteo_reader *a, *b;
    cr_assert_eq(tl_criteo_reader_create_file(path, NULL, &a), TL_OK, "%s", tl_last_error());
    cr_assert_eq(tl_criteo_reader_create_memory(text, n, NULL, NULL, &b), TL_OK);
    int count = 0;
    for (;;) {
        tl_criteo_example ea, eb;
        bool ga, gb;
        cr_assert_eq(tl_criteo_reader_next(a, &ea, &ga), TL_OK, "%s", tl_last_error());
        cr_assert_eq(tl_criteo_reader_next(b, &eb, &gb), TL_OK, "%s", tl_last_error());
        cr_assert_eq(ga, gb);
        if (!ga)
            break;
        cr_assert_eq(memcmp(&ea, &eb, sizeof ea), 0, "example %d differs", count);
        count++;
    }
    cr_assert_eq(count, 3000);
    cr_assert_eq(tl_criteo_reader_line(a), 3000);
    tl_criteo_reader_destroy(a);
    tl_criteo_reader_destroy(b);
    tl_criteo_reader *r = NULL;
    EXPECT_ERR(tl_criteo_reader_create_file("/nonexistent/day_0", NULL, &r), TL_EIO,
               "/nonexistent/day_0: cannot open");
    cr_assert_null(r);
    unlink(path);
    free(text);
}

/* A line of exactly max_line bytes passes; one byte more is an error that
 * sticks, from a file (where it is found before the window fills) and from
 * memory. */
Test(data_criteo, line_cap)
{
    fields x = base();
    char line[4096] = "";
    join(line, sizeof line, &x);
    size_t len = strlen(line) - 1;
    char text[3 * 4096] = "";
    strcat(text, line);
    strcat(text, line);
    snprintf(x.f[14], 64, "%s", "068fd1e64"); /* one byte longer */
    join(text, sizeof text, &x);
    tl_criteo_options o;
    tl_criteo_options_init(&o);
    o.max_line = len;
    char path[] = "/tmp/tl_criteo_XXXXXX";
    write_temp(path, text, strlen(text));
    for (int src = 0; src < 2; src++) {
        tl_criteo_reader *r;
        if (src == 0)
            cr_assert_eq(tl_criteo_reader_create_file(path, &o, &r), TL_OK);
        else
            cr_assert_eq(tl_criteo_reader_create_memory(text, strlen(text), path, &o, &r), TL_OK);
        tl_criteo_example ex;
        bool got;
        cr_assert_eq(tl_criteo_reader_next(r, &ex, &got), TL_OK, "%s", tl_last_error());
        cr_assert_eq(tl_criteo_reader_next(r, &ex, &got), TL_OK, "%s", tl_last_error());
        char want[256];
        snprintf(want, sizeof want, "%s:3: the line is longer than tl_criteo_options.max_line, %zu bytes", path,
                 len);
        EXPECT_ERR(tl_criteo_reader_next(r, &ex, &got), TL_EPARSE, want);
        EXPECT_ERR(tl_criteo_reader_next(r, &ex, &got), TL_EPARSE, want);
        tl_criteo_reader_destroy(r);
    }
    /* a 200 KiB line with no newline: the file reader stops at its window */
    size_t big = 200 * 1024;
    char *blob = malloc(big);
    cr_assert_not_null(blob);
    memset(blob, '7', big);
    char path2[] = "/tmp/tl_criteo_XXXXXX";
    write_temp(path2, blob, big);
    tl_criteo_reader *r;
    cr_assert_eq(tl_criteo_reader_create_file(path2, NULL, &r), TL_OK);
    tl_criteo_example ex;
    bool got;
    EXPECT_ERR(tl_criteo_reader_next(r, &ex, &got), TL_EPARSE,
               ":1: the line is longer than tl_criteo_options.max_line, 65536 bytes (no newline within the limit)");
    tl_criteo_reader_destroy(r);
    unlink(path);
    unlink(path2);
    free(blob);
}

Test(data_criteo, batches)
{
    char text[5 * 4096] = "";
    for (int i = 0; i < 5; i++) {
        fields x = base();
        snprintf(x.f[0], 64, "%d", i & 1);
        snprintf(x.f[1], 64, "%d", i);
        snprintf(x.f[14], 64, "%x", i + 10);
        join(text, sizeof text, &x);
    }
    tl_criteo_options o;
    tl_criteo_options_init(&o);
    o.vocab_sizes[0] = 12;
    tl_criteo_reader *r;
    cr_assert_eq(tl_criteo_reader_create_memory(text, strlen(text), NULL, &o, &r), TL_OK);
    float dense[2 * 13];
    int64_t ids[2 * 26];
    int32_t labels[2];
    int64_t got;
    int64_t want[] = {2, 2, 1, 0};
    int seen = 0;
    for (int call = 0; call < 4; call++) {
        cr_assert_eq(tl_criteo_reader_next_batch(r, 2, dense, ids, labels, &got), TL_OK, "%s", tl_last_error());
        cr_assert_eq(got, want[call]);
        for (int64_t i = 0; i < got; i++, seen++) {
            cr_assert_eq(labels[i], seen & 1);
            cr_assert_eq(bits(dense[i * 13]), bits(dlrm(seen)));
            cr_assert_eq(bits(dense[i * 13 + 1]), bits(dlrm(7)));
            cr_assert_eq(ids[i * 26], (seen + 10) % 12);
            cr_assert_eq(ids[i * 26 + 1], 0x80e26c9b);
        }
    }
    cr_assert_eq(seen, 5);
    EXPECT_ERR(tl_criteo_reader_next_batch(r, -1, dense, ids, labels, &got), TL_EINVAL, "batch must be >= 0 (got -1)");
    EXPECT_ERR(tl_criteo_reader_next_batch(r, 1, dense, NULL, labels, &got), TL_EINVAL, "ids is NULL");
    tl_criteo_reader_destroy(r);

    /* an error mid-batch: got counts the good rows before it */
    fields x = base();
    char two[3 * 4096] = "";
    join(two, sizeof two, &x);
    snprintf(x.f[0], 64, "%s", "7");
    join(two, sizeof two, &x);
    cr_assert_eq(tl_criteo_reader_create_memory(two, strlen(two), NULL, NULL, &r), TL_OK);
    EXPECT_ERR(tl_criteo_reader_next_batch(r, 2, dense, ids, labels, &got), TL_EPARSE, "<memory>:2: field 1 (label)");
    cr_assert_eq(got, 1);
    tl_criteo_reader_destroy(r);
}

/* Every prefix of a three-line input, from memory and from a file with a
 * small line cap, ends in examples and then a status, never a crash. */
Test(data_criteo, truncation_at_every_offset)
{
    char text[3 * 4096] = "";
    fields x = base();
    join(text, sizeof text, &x);
    snprintf(x.f[3], 64, "%s", "-12");
    snprintf(x.f[16], 64, "%s", "");
    join(text, sizeof text, &x);
    join(text, sizeof text, &x);
    size_t n = strlen(text);
    size_t last_tab = 0;
    for (size_t i = 0; text[i] != '\n'; i++)
        if (text[i] == '\t')
            last_tab = i;
    tl_criteo_options o;
    tl_criteo_options_init(&o);
    o.max_line = 300;
    for (size_t cut = 0; cut <= n; cut++) {
        char *copy = malloc(cut + 1); /* exactly cut bytes readable, so ASan sees any overread */
        cr_assert_not_null(copy);
        memcpy(copy, text, cut);
        tl_criteo_reader *r;
        cr_assert_eq(tl_criteo_reader_create_memory(copy, cut, NULL, &o, &r), TL_OK);
        int good = 0;
        for (int it = 0; it < 10; it++) { /* at most 3 lines: errors included, 10 calls reach the end */
            tl_criteo_example ex;
            bool got;
            tl_status st = tl_criteo_reader_next(r, &ex, &got);
            if (st != TL_OK) {
                cr_assert_eq(st, TL_EPARSE, "cut %zu: %s", cut, tl_last_error());
                continue;
            }
            if (!got)
                break;
            good++;
        }
        /* a cut before line 1's last tab leaves it short of 40 fields (a cut
         * inside the last field may leave a shorter id, which is valid) */
        if (cut <= last_tab)
            cr_assert_eq(good, 0, "cut %zu", cut);
        if (cut == n)
            cr_assert_eq(good, 3);
        tl_criteo_reader_destroy(r);
        free(copy);
    }
}

/* Counting allocator: fails allocation number fail_at. */
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

Test(data_criteo, allocation_failure_unwinds)
{
    static const tl_allocator a = {cnt_malloc, cnt_realloc, cnt_free, NULL};
    char path[] = "/tmp/tl_criteo_XXXXXX";
    write_temp(path, "1", 1);
    for (fail_at = 0;; fail_at++) {
        calls = 0;
        live = 0;
        tl_set_allocator(&a);
        tl_criteo_reader *r;
        tl_status st = tl_criteo_reader_create_file(path, NULL, &r);
        tl_criteo_example ex;
        bool got;
        if (st == TL_OK) {
            st = tl_criteo_reader_next(r, &ex, &got); /* a bad line: the message may allocate */
            tl_criteo_reader_destroy(r);
            tl_set_allocator(NULL);
            cr_assert_eq(live, 0, "leak with allocation %ld failing", fail_at);
            if (calls <= fail_at)
                break;
            continue;
        }
        tl_set_allocator(NULL);
        cr_assert_eq(st, TL_ENOMEM, "allocation %ld: %s", fail_at, tl_last_error());
        cr_assert_null(r);
        cr_assert_eq(live, 0, "leak with allocation %ld failing", fail_at);
    }
    cr_assert_geq(fail_at, 2);
    unlink(path);
}
