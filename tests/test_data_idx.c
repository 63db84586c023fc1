/* The IDX reader: round trips of every dtype (plain and gzip, file and
 * memory), each malformed input with its message, the options, and
 * allocation-failure unwinding. The files are written here with an encoder
 * of the test's own, so the reader is checked against the format, not
 * against itself. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <zlib.h>

#include "testutil.h"
#include "tpuloop/data.h"

/* ---- an independent encoder --------------------------------------------- */

typedef struct bytes {
    unsigned char *p;
    size_t n;
} bytes;

static void put_be(unsigned char *dst, uint64_t v, size_t size)
{
    for (size_t b = 0; b < size; b++)
        dst[b] = (unsigned char)(v >> (8 * (size - 1 - b)));
}

/* An IDX image of count host-order elements of esize bytes each. */
static bytes idx_encode(uint8_t type, int ndim, const uint32_t *dims, const void *elems, size_t esize, size_t count)
{
    bytes b;
    b.n = 4 + 4 * (size_t)ndim + esize * count;
    b.p = malloc(b.n);
    cr_assert_not_null(b.p);
    b.p[0] = b.p[1] = 0;
    b.p[2] = type;
    b.p[3] = (unsigned char)ndim;
    for (int i = 0; i < ndim; i++)
        put_be(b.p + 4 + 4 * i, dims[i], 4);
    unsigned char *d = b.p + 4 + 4 * ndim;
    const unsigned char *src = elems;
    for (size_t i = 0; i < count; i++) {
        uint64_t v = 0;
        if (esize == 1)
            v = src[i];
        else if (esize == 2) {
            uint16_t t;
            memcpy(&t, src + 2 * i, 2);
            v = t;
        } else if (esize == 4) {
            uint32_t t;
            memcpy(&t, src + 4 * i, 4);
            v = t;
        } else {
            memcpy(&v, src + 8 * i, 8);
        }
        put_be(d + esize * i, v, esize);
    }
    return b;
}

/* Raw header bytes followed by nzero zero bytes. */
static bytes raw(const unsigned char *head, size_t nhead, size_t nzero)
{
    bytes b = {calloc(nhead + nzero + 1, 1), nhead + nzero};
    cr_assert_not_null(b.p);
    memcpy(b.p, head, nhead);
    return b;
}

/* gzip (not zlib) compression of b in memory, as one member. */
static bytes gzip_bytes(bytes b)
{
    z_stream zs = {0};
    cr_assert_eq(deflateInit2(&zs, 6, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY), Z_OK);
    bytes out = {malloc(deflateBound(&zs, b.n) + 32), 0};
    cr_assert_not_null(out.p);
    zs.next_in = b.p;
    zs.avail_in = (uInt)b.n;
    zs.next_out = out.p;
    zs.avail_out = (uInt)(deflateBound(&zs, b.n) + 32);
    cr_assert_eq(deflate(&zs, Z_FINISH), Z_STREAM_END);
    out.n = zs.total_out;
    deflateEnd(&zs);
    return out;
}

static bytes concat(bytes a, bytes b)
{
    bytes c = {malloc(a.n + b.n + 1), a.n + b.n};
    cr_assert_not_null(c.p);
    memcpy(c.p, a.p, a.n);
    memcpy(c.p + a.n, b.p, b.n);
    return c;
}

/* Writes b to a new temporary file, plain or gzip (through zlib's gzopen), and
 * returns its path (the caller unlinks and frees). */
static char *write_temp(bytes b, bool gz)
{
    char *path = strdup("/tmp/tl_idx_XXXXXX");
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    if (!gz) {
        cr_assert_eq(write(fd, b.p, b.n), (ssize_t)b.n);
        close(fd);
        return path;
    }
    close(fd);
    gzFile g = gzopen(path, "wb");
    cr_assert_not_null(g);
    cr_assert_eq(gzwrite(g, b.p, (unsigned)b.n), (int)b.n);
    cr_assert_eq(gzclose(g), Z_OK);
    return path;
}

static void remove_temp(char *path)
{
    unlink(path);
    free(path);
}

/* ---- round trips ---------------------------------------------------------- */

/* The array holds shape (5) of the given elements. */
static void check_array(const tl_idx *a, tl_idx_dtype t, const void *elems, size_t esize, const char *how)
{
    cr_assert_eq(tl_idx_type(a), t, "%s: dtype %d", how, tl_idx_type(a));
    cr_assert_eq(tl_idx_ndim(a), 1, "%s", how);
    cr_assert_eq(tl_idx_dim(a, 0), 5, "%s", how);
    cr_assert_eq(tl_idx_count(a), 5, "%s", how);
    cr_assert_eq(memcmp(tl_idx_data(a), elems, 5 * esize), 0, "%s: %s elements differ", how, tl_idx_dtype_name(t));
}

/* One dtype through memory, a plain file, a gzip file and gzip memory. */
static void round_trip(tl_idx_dtype t, const void *elems, size_t esize)
{
    cr_assert_eq(tl_idx_dtype_size(t), esize);
    uint32_t dims[1] = {5};
    bytes b = idx_encode((uint8_t)t, 1, dims, elems, esize, 5);
    tl_idx *a;
    ASSERT_OK(tl_idx_read_memory(b.p, b.n, "mem", NULL, &a));
    check_array(a, t, elems, esize, "memory");
    tl_idx_destroy(a);

    bytes z = gzip_bytes(b);
    ASSERT_OK(tl_idx_read_memory(z.p, z.n, "mem.gz", NULL, &a));
    check_array(a, t, elems, esize, "gzip memory");
    tl_idx_destroy(a);

    for (int gz = 0; gz < 2; gz++) {
        char *path = write_temp(b, gz);
        ASSERT_OK(tl_idx_read_file(path, NULL, &a));
        check_array(a, t, elems, esize, gz ? "gzip file" : "plain file");
        tl_idx_destroy(a);
        remove_temp(path);
    }
    free(z.p);
    free(b.p);
}

Test(idx, round_trip_u8)
{
    const uint8_t v[5] = {0, 1, 127, 128, 255};
    round_trip(TL_IDX_U8, v, 1);
}

Test(idx, round_trip_i8)
{
    const int8_t v[5] = {-128, -1, 0, 1, 127};
    round_trip(TL_IDX_I8, v, 1);
}

Test(idx, round_trip_i16)
{
    const int16_t v[5] = {-32768, -1, 0, 258, 32767};
    round_trip(TL_IDX_I16, v, 2);
}

Test(idx, round_trip_i32)
{
    const int32_t v[5] = {INT32_MIN, -1, 0, 0x01020304, INT32_MAX};
    round_trip(TL_IDX_I32, v, 4);
}

Test(idx, round_trip_f32)
{
    const float v[5] = {-0.0f, 1.5f, -3.25e-38f, 3.4e38f, INFINITY};
    round_trip(TL_IDX_F32, v, 4);
}

Test(idx, round_trip_f64)
{
    const double v[5] = {-0.0, 0.1, -2.5e-308, 1.7e308, -INFINITY};
    round_trip(TL_IDX_F64, v, 8);
}

Test(idx, dims_row_major_and_eight_dims)
{
    uint8_t v[24];
    for (int i = 0; i < 24; i++)
        v[i] = (uint8_t)i;
    bytes b = idx_encode(0x08, 3, (uint32_t[]){2, 3, 4}, v, 1, 24);
    tl_idx *a;
    ASSERT_OK(tl_idx_read_memory(b.p, b.n, NULL, NULL, &a));
    cr_assert_eq(tl_idx_ndim(a), 3);
    cr_assert_eq(tl_idx_dim(a, 0), 2);
    cr_assert_eq(tl_idx_dim(a, 1), 3);
    cr_assert_eq(tl_idx_dim(a, 2), 4);
    cr_assert_eq(tl_idx_dim(a, 3), -1);
    cr_assert_eq(tl_idx_dim(a, -1), -1);
    cr_assert_eq(((const uint8_t *)tl_idx_data(a))[1 * 12 + 2 * 4 + 3], 23); /* [1][2][3] */
    tl_idx_destroy(a);
    free(b.p);

    uint32_t d8[8] = {1, 2, 1, 1, 1, 1, 1, 3};
    int16_t s[6] = {1, -2, 3, -4, 5, -6};
    b = idx_encode(0x0B, 8, d8, s, 2, 6);
    ASSERT_OK(tl_idx_read_memory(b.p, b.n, NULL, NULL, &a));
    cr_assert_eq(tl_idx_ndim(a), 8);
    cr_assert_eq(tl_idx_count(a), 6);
    cr_assert_eq(((const int16_t *)tl_idx_data(a))[5], -6);
    tl_idx_destroy(a);
    free(b.p);
}

Test(idx, zero_dimension_is_an_empty_array)
{
    bytes b = idx_encode(0x08, 3, (uint32_t[]){0, 28, 28}, NULL, 1, 0);
    tl_idx *a;
    ASSERT_OK(tl_idx_read_memory(b.p, b.n, NULL, NULL, &a));
    cr_assert_eq(tl_idx_count(a), 0);
    cr_assert_eq(tl_idx_dim(a, 1), 28);
    cr_assert_not_null(tl_idx_data(a));
    tl_idx_destroy(a);
    free(b.p);
}

Test(idx, large_file_grows_its_buffer)
{
    /* 3 MB, past the first 1 MiB buffer: two doublings and a final size */
    size_t n = 3000000;
    uint8_t *v = malloc(n);
    for (size_t i = 0; i < n; i++)
        v[i] = (uint8_t)(i * 2654435761u >> 24);
    bytes b = idx_encode(0x08, 2, (uint32_t[]){3000, 1000}, v, 1, n);
    for (int gz = 0; gz < 2; gz++) {
        char *path = write_temp(b, gz);
        tl_idx *a;
        ASSERT_OK(tl_idx_read_file(path, NULL, &a));
        cr_assert_eq(tl_idx_count(a), (int64_t)n);
        cr_assert_eq(memcmp(tl_idx_data(a), v, n), 0, "gz=%d", gz);
        tl_idx_destroy(a);
        remove_temp(path);
    }
    free(b.p);
    free(v);
}

Test(idx, concatenated_gzip_members_are_one_stream)
{
    int32_t v[4] = {1, -2, 3, -4};
    bytes b = idx_encode(0x0C, 1, (uint32_t[]){4}, v, 4, 4);
    bytes h1 = {b.p, 7}, h2 = {b.p + 7, b.n - 7}; /* split inside the header */
    bytes z1 = gzip_bytes(h1), z2 = gzip_bytes(h2);
    bytes z = concat(z1, z2);
    tl_idx *a;
    ASSERT_OK(tl_idx_read_memory(z.p, z.n, NULL, NULL, &a));
    cr_assert_eq(memcmp(tl_idx_data(a), v, sizeof v), 0);
    tl_idx_destroy(a);

    /* and appended with gzopen "ab", as `cat a.gz b.gz` or gzip -a makes */
    char *path = write_temp(h1, true);
    gzFile g = gzopen(path, "ab");
    cr_assert_not_null(g);
    cr_assert_eq(gzwrite(g, h2.p, (unsigned)h2.n), (int)h2.n);
    gzclose(g);
    ASSERT_OK(tl_idx_read_file(path, NULL, &a));
    cr_assert_eq(memcmp(tl_idx_data(a), v, sizeof v), 0);
    tl_idx_destroy(a);
    remove_temp(path);
    free(z.p);
    free(z1.p);
    free(z2.p);
    free(b.p);
}

/* ---- malformed input ------------------------------------------------------ */

/* Reading b from memory as "bad.idx" fails with want and a message naming
 * the input and containing frag; *out stays NULL. */
static void fails(bytes b, tl_status want, const char *frag)
{
    tl_idx *a = (tl_idx *)&a; /* anything not NULL */
    tl_status st = tl_idx_read_memory(b.p, b.n, "bad.idx", NULL, &a);
    cr_assert_null(a);
    tu_expect_error(st, want, frag, "tl_idx_read_memory");
    cr_assert(strncmp(tl_last_error(), "bad.idx: ", 9) == 0, "message \"%s\" does not name the input",
              tl_last_error());
    free(b.p);
}

#define HDR(...) (const unsigned char[]){__VA_ARGS__}, sizeof((const unsigned char[]){__VA_ARGS__})

Test(idx_errors, empty_and_short_header)
{
    fails(raw((const unsigned char *)"", 0, 0), TL_EPARSE, "empty file");
    fails(raw(HDR(0, 0, 8), 0), TL_EPARSE, "ends after 3 bytes, inside the 4-byte IDX header");
}

Test(idx_errors, bad_magic)
{
    fails(raw(HDR(0x01, 0x00, 0x08, 0x01), 8), TL_EPARSE, "bad magic 01 00 08 01");
    fails(raw(HDR('P', 'K', 3, 4), 8), TL_EPARSE, "begins with two zero bytes");
}

Test(idx_errors, unknown_type)
{
    fails(raw(HDR(0, 0, 0x0A, 1, 0, 0, 0, 1), 1), TL_EPARSE, "unknown IDX type byte 0x0a");
    fails(raw(HDR(0, 0, 0x00, 1, 0, 0, 0, 1), 1), TL_EPARSE, "unknown IDX type byte 0x00");
}

Test(idx_errors, ndim_zero_and_above_eight)
{
    fails(raw(HDR(0, 0, 8, 0), 4), TL_EPARSE, "gives 0 dimensions; 1 to 8 are allowed");
    fails(raw(HDR(0, 0, 8, 9), 40), TL_EPARSE, "gives 9 dimensions; 1 to 8 are allowed");
    fails(raw(HDR(0, 0, 8, 255), 40), TL_EPARSE, "gives 255 dimensions");
}

Test(idx_errors, header_cut_short)
{
    fails(raw(HDR(0, 0, 8, 3, 0, 0, 0, 2, 0, 0), 0), TL_EPARSE,
          "declares 3 dimensions (16 header bytes) but the file ends after 10");
}

Test(idx_errors, data_cut_short_says_expected_and_read)
{
    fails(raw(HDR(0, 0, 8, 2, 0, 0, 0, 2, 0, 0, 0, 3), 4), TL_EPARSE,
          "declares 2 x 3 of u8, 6 data bytes (18 with the header), but only 4 data bytes (16 in all) could be read");
    fails(raw(HDR(0, 0, 0x0E, 1, 0, 0, 0, 2), 15), TL_EPARSE, "2 of f64, 16 data bytes (24 with the header), but "
                                                             "only 15 data bytes");
    /* after gzip, the counts are of decompressed bytes and say so */
    bytes b = raw(HDR(0, 0, 0x0C, 1, 0, 0, 0, 3), 5);
    fails(gzip_bytes(b), TL_EPARSE, "12 data bytes (20 with the header), but only 5 data bytes (13 in all) could be "
                                    "read after gzip decompression");
    free(b.p);
}

Test(idx_errors, trailing_bytes)
{
    fails(raw(HDR(0, 0, 8, 1, 0, 0, 0, 2), 3), TL_EPARSE,
          "1 trailing bytes after the 10 bytes the IDX header declares");
    bytes b = raw(HDR(0, 0, 8, 1, 0, 0, 0, 2), 5000);
    fails(gzip_bytes(b), TL_EPARSE, "4998 trailing bytes after the 10 bytes the IDX header declares");
    free(b.p);
}

Test(idx_errors, dimension_overflow)
{
    fails(raw(HDR(0, 0, 8, 3, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF), 0), TL_EINVAL,
          "4294967295 x 4294967295 x 4294967295 of u8 overflow 64 bits");
    /* a zero anywhere makes the array empty, however large the others */
    bytes b = raw(HDR(0, 0, 8, 3, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0, 0, 0, 0), 0);
    tl_idx *a;
    ASSERT_OK(tl_idx_read_memory(b.p, b.n, NULL, NULL, &a));
    cr_assert_eq(tl_idx_count(a), 0);
    tl_idx_destroy(a);
    free(b.p);
}

Test(idx_errors, size_cap)
{
    /* 65536 x 65537 bytes is just over the default 4 GiB */
    fails(raw(HDR(0, 0, 8, 2, 0, 1, 0, 0, 0, 1, 0, 1), 0), TL_EINVAL,
          "65536 x 65537 of u8 make 4295032832 data bytes, more than the limit of 4294967296");
    fails(raw(HDR(0, 0, 0x0D, 2, 0, 1, 0, 0, 0, 0, 0x40, 0x01), 0), TL_EINVAL, "tl_idx_options.max_bytes");

    tl_idx_options o;
    tl_idx_options_init(&o);
    cr_assert_eq(o.max_bytes, TL_IDX_DEFAULT_MAX_BYTES);
    cr_assert_not(o.allow_trailing);
    o.max_bytes = 10;
    bytes ok = raw(HDR(0, 0, 8, 1, 0, 0, 0, 10), 10), big = raw(HDR(0, 0, 8, 1, 0, 0, 0, 11), 11);
    tl_idx *a;
    ASSERT_OK(tl_idx_read_memory(ok.p, ok.n, NULL, &o, &a));
    tl_idx_destroy(a);
    ASSERT_ERR(tl_idx_read_memory(big.p, big.n, NULL, &o, &a), TL_EINVAL, "11 data bytes, more than the limit of 10");
    free(ok.p);
    free(big.p);
}

/* Records the largest single allocation, to show a lying header costs little. */
static size_t largest;
static void *big_malloc(size_t n, void *ud)
{
    (void)ud;
    largest = n > largest ? n : largest;
    return malloc(n);
}
static void *big_realloc(void *p, size_t n, void *ud)
{
    (void)ud;
    largest = n > largest ? n : largest;
    return realloc(p, n);
}
static void big_free(void *p, void *ud)
{
    (void)ud;
    free(p);
}

Test(idx_errors, lying_header_allocates_only_what_arrives)
{
    /* a header promising 3 GiB over 100 bytes of data */
    tl_set_allocator(&(tl_allocator){big_malloc, big_realloc, big_free, NULL});
    largest = 0;
    bytes b = raw(HDR(0, 0, 8, 2, 0, 0, 0xC0, 0, 0, 1, 0, 0), 100); /* 49152 x 65536 */
    tl_idx *a;
    tl_status st = tl_idx_read_memory(b.p, b.n, "liar", NULL, &a);
    tl_set_allocator(NULL);
    tu_expect_error(st, TL_EPARSE, "only 100 data bytes", "lying header");
    cr_assert_leq(largest, (size_t)1 << 20, "largest allocation %zu", largest);
    free(b.p);
}

Test(idx_errors, gzip_truncated_corrupt_and_garbage)
{
    uint8_t v[64];
    for (int i = 0; i < 64; i++)
        v[i] = (uint8_t)(i * 7);
    bytes b = idx_encode(0x08, 1, (uint32_t[]){64}, v, 1, 64);
    bytes z = gzip_bytes(b);

    bytes cut = {malloc(z.n), z.n - 4}; /* the ISIZE field of the trailer is gone */
    memcpy(cut.p, z.p, z.n);
    fails(cut, TL_EPARSE, "the gzip stream is truncated");

    bytes bad = {malloc(z.n), z.n};
    memcpy(bad.p, z.p, z.n);
    bad.p[z.n - 6] ^= 0xFF; /* the CRC-32 of the trailer */
    fails(bad, TL_EPARSE, "corrupt gzip data: incorrect data check");

    bytes hdr = {malloc(z.n), z.n};
    memcpy(hdr.p, z.p, z.n);
    hdr.p[2] = 7; /* compression method other than deflate */
    fails(hdr, TL_EPARSE, "corrupt gzip data: unknown compression method");

    fails(concat(z, (bytes){(unsigned char *)"junk", 4}), TL_EPARSE,
          "4 bytes of trailing garbage after the gzip stream");

    /* a gzip of something that is not IDX is judged by its content */
    bytes png = raw(HDR(0x89, 'P', 'N', 'G'), 20);
    fails(gzip_bytes(png), TL_EPARSE, "bad magic 89 50 4e 47");
    free(png.p);
    free(z.p);
    free(b.p);
}

/* Counts warnings, to see allow_trailing log one. */
static int warnings;
static void count_warnings(tl_log_level level, const char *msg, void *ud)
{
    (void)msg;
    (void)ud;
    warnings += level == TL_LOG_WARN;
}

Test(idx_errors, allow_trailing_warns)
{
    tl_idx_options o;
    tl_idx_options_init(&o);
    o.allow_trailing = true;
    tl_set_log_handler(count_warnings, NULL);
    bytes b = raw(HDR(0, 0, 8, 1, 0, 0, 0, 2, 5, 6, 7, 8), 0);
    tl_idx *a;
    ASSERT_OK(tl_idx_read_memory(b.p, b.n, NULL, &o, &a));
    cr_assert_eq(warnings, 1);
    cr_assert_eq(tl_idx_count(a), 2);
    cr_assert_eq(((const uint8_t *)tl_idx_data(a))[1], 6);
    tl_idx_destroy(a);

    bytes head = gzip_bytes((bytes){b.p, 10});
    bytes z = concat(head, (bytes){(unsigned char *)"junk", 4});
    free(head.p);
    ASSERT_OK(tl_idx_read_memory(z.p, z.n, NULL, &o, &a));
    cr_assert_eq(warnings, 2);
    tl_idx_destroy(a);
    tl_set_log_handler(NULL, NULL);
    free(z.p);
    free(b.p);
}

Test(idx_errors, missing_file_and_bad_args)
{
    tl_idx *a;
    ASSERT_ERR(tl_idx_read_file("/nonexistent/x-idx1-ubyte", NULL, &a), TL_EIO,
               "/nonexistent/x-idx1-ubyte: cannot open: No such file or directory");
    cr_assert_null(a);
    ASSERT_ERR(tl_idx_read_file("/tmp", NULL, &a), TL_EIO, "/tmp: read error: Is a directory");
    ASSERT_ERR(tl_idx_read_memory(NULL, 3, NULL, NULL, &a), TL_EINVAL, "data is NULL but size is 3");
    ASSERT_ERR(tl_idx_read_memory(NULL, 0, NULL, NULL, &a), TL_EPARSE, "<memory>: empty file");
    ASSERT_ERR(tl_idx_read_file(NULL, NULL, &a), TL_EINVAL, "path is NULL");
    fails(raw((const unsigned char *)"", 0, 0), TL_EPARSE, "empty file");
    cr_assert_str_eq(tl_idx_dtype_name((tl_idx_dtype)0x0A), "unknown");
    cr_assert_eq(tl_idx_dtype_size((tl_idx_dtype)0x0A), 0);
    tl_idx_destroy(NULL);
}

/* ---- allocation failure --------------------------------------------------- */

static tl_status oom_read_file(void *ctx)
{
    tl_idx *a;
    tl_status st = tl_idx_read_file(ctx, NULL, &a);
    if (st == TL_OK && tl_idx_count(a) != 1500000)
        st = TL_ERUNTIME;
    tl_idx_destroy(a);
    return st;
}

static tl_status oom_read_memory(void *ctx)
{
    const bytes *b = ctx;
    tl_idx *a;
    tl_status st = tl_idx_read_memory(b->p, b->n, NULL, NULL, &a);
    tl_idx_destroy(a);
    return st;
}

Test(idx_oom, every_allocation_failure_unwinds)
{
    /* i16 (1500, 1000): 3 MB of data, so the buffer grows twice */
    int16_t *v = calloc(1500000, 2);
    for (int i = 0; i < 1500000; i++)
        v[i] = (int16_t)(i % 20000 - 10000);
    bytes b = idx_encode(0x0B, 2, (uint32_t[]){1500, 1000}, v, 2, 1500000);
    for (int gz = 0; gz < 2; gz++) {
        char *path = write_temp(b, gz);
        long runs = tu_oom_sweep(oom_read_file, path, gz ? "tl_idx_read_file (gzip)" : "tl_idx_read_file");
        cr_assert_geq(runs, gz ? 6 : 4, "only %ld allocations", runs);
        remove_temp(path);
    }
    bytes z = gzip_bytes(b);
    tu_oom_sweep(oom_read_memory, &z, "tl_idx_read_memory (gzip)");
    tu_oom_sweep(oom_read_memory, &b, "tl_idx_read_memory");
    free(z.p);
    free(b.p);
    free(v);
}
