/* Corrupt checkpoints: every check of the reader, each with its message
 * (hand-made headers), then damage at many offsets of real files —
 * truncation, single bit flips, random overwrites. Every case must end in
 * TL_EPARSE with a message that begins with the file's name: never a crash,
 * never success with wrong data. */
#define _GNU_SOURCE /* memmem */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_io_ckpt_util.h"
#include "testutil.h"
#include "tpuloop/checkpoint.h"

#define LABEL "model.ckpt-100.safetensors"

/* A file of the JSON header (padded to 8 with spaces) and data_len zero
 * bytes of data; *len its size. */
static unsigned char *mk(const char *json, size_t data_len, size_t *len)
{
    size_t j = strlen(json), h = (j + 7) & ~(size_t)7;
    *len = 8 + h + data_len;
    unsigned char *b = calloc(1, *len + 1);
    cr_assert_not_null(b);
    for (int i = 0; i < 8; i++)
        b[i] = (unsigned char)((uint64_t)h >> (8 * i));
    memcpy(b + 8, json, j);
    memset(b + 8 + j, ' ', h - j);
    return b;
}

/* Opening buf fails with TL_EPARSE, no reader, and "LABEL: " + a message
 * containing frag. */
static void expect_bad_buf(const unsigned char *buf, size_t len, unsigned flags, const char *frag)
{
    tl_ckpt_reader *r = (tl_ckpt_reader *)1;
    tl_status st = tl_ckpt_open_memory(buf, len, LABEL, flags, &r);
    cr_assert_eq(st, TL_EPARSE, "got %s (%s), want TL_EPARSE with \"%s\"", tl_err_name(st), tl_last_error(), frag);
    cr_assert_null(r);
    cr_assert_eq(strncmp(tl_last_error(), LABEL ": ", strlen(LABEL) + 2), 0, "message lacks the file: %s",
                 tl_last_error());
    cr_assert(strstr(tl_last_error(), frag) != NULL, "message \"%s\" lacks \"%s\"", tl_last_error(), frag);
}

static void expect_bad(const char *json, size_t data_len, unsigned flags, const char *frag)
{
    size_t len;
    unsigned char *b = mk(json, data_len, &len);
    expect_bad_buf(b, len, flags, frag);
    free(b);
}

#define F TL_CKPT_ALLOW_FOREIGN

Test(io_ckpt_corrupt, the_example_message_exactly)
{
    size_t len;
    unsigned char *b = mk("{\"dense/kernel\":{\"dtype\":\"F32\",\"shape\":[4,5],\"data_offsets\":[0,96]}}", 96, &len);
    tl_ckpt_reader *r;
    cr_assert_eq(tl_ckpt_open_memory(b, len, LABEL, F, &r), TL_EPARSE);
    cr_assert_str_eq(tl_last_error(),
                     LABEL ": tensor 'dense/kernel': data_offsets [0, 96] but F32 [4, 5] needs 80 bytes");
    free(b);
}

Test(io_ckpt_corrupt, framing)
{
    unsigned char b[64] = {0};
    expect_bad_buf(b, 5, F, "5 bytes is too short");
    b[0] = 0xe8, b[1] = 0x03; /* 1000 */
    expect_bad_buf(b, 40, F, "header length 1000 runs past the end of the file (32 bytes follow");
    b[0] = 0x01, b[1] = 0xe1, b[2] = 0xf5, b[3] = 0x05; /* 100000001 */
    expect_bad_buf(b, 40, F, "header length 100000001 is over the limit of 100000000 bytes");
    memset(b, 0, 8);
    expect_bad_buf(b, 40, F, "the header is empty");
    expect_bad("[1, 2]", 0, F, "does not start with '{' (byte 0x5b)");
    expect_bad("{\"a\":", 0, F, "the header is not valid JSON");
    expect_bad("{} x", 0, F, "the header is not valid JSON");
    expect_bad("{\"a\\u0000b\":{}}", 0, F, "not valid JSON");
    expect_bad("{\"a\":{\"dtype\":\"U8\",\"shape\":[],\"data_offsets\":[0,1]},"
               "\"a\":{\"dtype\":\"U8\",\"shape\":[],\"data_offsets\":[1,2]}}",
               2, F, "duplicate");
}

Test(io_ckpt_corrupt, tensor_entries)
{
    expect_bad("{\"a\":5}", 0, F, "tensor 'a': its entry is an integer, not an object");
    expect_bad("{\"a\":\"x\"}", 0, F, "tensor 'a': its entry is a string, not an object");
    expect_bad("{\"\":{\"dtype\":\"U8\",\"shape\":[],\"data_offsets\":[0,1]}}", 1, F, "a tensor has an empty name");
    expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[0,4],\"x\":1}}", 4, F,
               "tensor 'a': unknown field 'x' (expected dtype, shape and data_offsets)");
    expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[]}}", 0, F, "tensor 'a': missing field 'data_offsets'");
    expect_bad("{\"a\":{\"shape\":[],\"data_offsets\":[0,4]}}", 4, F, "tensor 'a': missing field 'dtype'");
    expect_bad("{\"a\":{\"dtype\":\"F31\",\"shape\":[],\"data_offsets\":[0,4]}}", 4, F, "tensor 'a': unknown dtype 'F31'");
    expect_bad("{\"a\":{\"dtype\":5,\"shape\":[],\"data_offsets\":[0,4]}}", 4, F, "dtype must be a string, got an integer");
    expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":3,\"data_offsets\":[0,4]}}", 4, F, "shape must be an array of integers");
    expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[2,-1],\"data_offsets\":[0,4]}}", 4, F,
               "tensor 'a': shape[1] must be an integer >= 0");
    expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[1.0],\"data_offsets\":[0,4]}}", 4, F, "shape[0] must be an integer");
    expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[[1]],\"data_offsets\":[0,4]}}", 4, F, "shape[0] must be an integer");
    char json[1024];
    int n = snprintf(json, sizeof json, "{\"a\":{\"dtype\":\"U8\",\"shape\":[");
    for (int i = 0; i < 65; i++)
        n += snprintf(json + n, sizeof json - (size_t)n, "%s1", i ? "," : "");
    snprintf(json + n, sizeof json - (size_t)n, "],\"data_offsets\":[0,1]}}");
    expect_bad(json, 1, F, "tensor 'a': rank 65 is over the limit of 64");
    expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[4,0]}}", 4, F,
               "tensor 'a': data_offsets [4, 0] end before they begin");
    expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[0]}}", 4, F,
               "data_offsets must be [begin, end], two integers >= 0");
    expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[-4,0]}}", 4, F, "two integers >= 0");
    expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[0,99999999999999999999]}}", 4, F,
               "not valid JSON"); /* an integer past 64 bits */
    expect_bad("{\"a\":{\"dtype\":\"F64\",\"shape\":[4611686018427387904,8],\"data_offsets\":[0,0]}}", 0, F,
               "tensor 'a': F64 [4611686018427387904, 8] is more than 2^64 bytes");
    /* a product that wraps to exactly the offsets' span must not pass */
    expect_bad("{\"a\":{\"dtype\":\"U8\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,0]}}", 0, F,
               "more than 2^64 bytes");
    expect_bad("{\"a\":{\"dtype\":\"BF16\",\"shape\":[3],\"data_offsets\":[0,8]}}", 8, F,
               "data_offsets [0, 8] but BF16 [3] needs 6 bytes");
}

Test(io_ckpt_corrupt, coverage)
{
    expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[4,8]}}", 8, F,
               "tensor 'a': data_offsets [4, 8] leave a gap of 4 bytes at the start of the data section");
    expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[0,4]},"
               "\"b\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[8,12]}}",
               12, F, "tensor 'b': data_offsets [8, 12] leave a gap of 4 bytes after tensor 'a' [0, 4]");
    expect_bad("{\"b\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[4,8]},"
               "\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}",
               8, F, "tensor 'b': data_offsets [4, 8] overlap tensor 'a' [0, 8]");
    expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[0,4]},"
               "\"b\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[0,4]}}",
               4, F, "overlap tensor 'a' [0, 4]");
    expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[0,4]}}", 8, F,
               "the tensors end at byte 4 of the data section but it has 8 bytes (bytes no tensor owns)");
    expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 4, F,
               "the tensors end at byte 8 of the data section but it has 4 bytes (the file is truncated)");
    expect_bad("{}", 3, F, "the tensors end at byte 0 of the data section but it has 3 bytes");
    /* empty tensors may share an offset, as the reference reader allows */
    size_t len;
    unsigned char *b = mk("{\"z\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[4,4]},"
                          "\"a\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[0,4]},"
                          "\"y\":{\"dtype\":\"I64\",\"shape\":[0,9],\"data_offsets\":[4,4]}}",
                          4, &len);
    tl_ckpt_reader *r;
    ASSERT_OK(tl_ckpt_open_memory(b, len, LABEL, F, &r));
    tl_ckpt_tensor_info t;
    ASSERT_OK(tl_ckpt_tensor(r, 0, &t));
    cr_assert_str_eq(t.name, "a");
    ASSERT_OK(tl_ckpt_tensor(r, 2, &t));
    cr_assert_str_eq(t.name, "z");
    tl_ckpt_close(r);
    free(b);
}

Test(io_ckpt_corrupt, metadata_and_checksums)
{
    expect_bad("{\"__metadata__\":[]}", 0, F, "__metadata__ must be an object of strings, got an array");
    expect_bad("{\"__metadata__\":{\"k\":1}}", 0, F, "__metadata__ 'k' must be a string, got an integer");
    expect_bad("{}", 0, 0, "__metadata__ has no 'format': not a tpuloop checkpoint");
    expect_bad("{\"__metadata__\":{\"format\":\"other\"}}", 0, 0, "__metadata__ format is 'other', expected 'tpuloop-ckpt'");
    expect_bad("{\"__metadata__\":{\"format\":\"tpuloop-ckpt\"}}", 0, 0, "no 'format_version'");
    expect_bad("{\"__metadata__\":{\"format\":\"tpuloop-ckpt\",\"format_version\":\"2\"}}", 0, 0,
               "format_version '2' is not supported (this tpuloop reads version 1)");
    expect_bad("{\"__metadata__\":{\"format\":\"tpuloop-ckpt\",\"format_version\":\"1\"}}", 0, 0,
               "__metadata__ has no 'crc32c' checksum");
    expect_bad("{\"__metadata__\":{\"crc32c\":\"ABCDEF01\"}}", 0, F, "crc32c 'ABCDEF01' is not 8 lowercase hex digits");
    expect_bad("{\"__metadata__\":{\"crc32c\":\"0000000\"}}", 0, F, "not 8 lowercase hex digits");
    expect_bad("{\"__metadata__\":{\"crc32c\":\"00000001\"}}", 0, F,
               "data checksum mismatch: crc32c says 00000001, the 0 data bytes have 00000000");
    expect_bad("{\"__metadata__\":{\"header_crc32c\": \"00000000\"}}", 0, F,
               "header_crc32c is not written as tpuloop writes it");
    /* a foreign file with a correct data checksum is verified and opens */
    size_t len;
    unsigned char *b = mk("{\"__metadata__\":{\"crc32c\":\"00000000\"}}", 0, &len);
    tl_ckpt_reader *r;
    ASSERT_OK(tl_ckpt_open_memory(b, len, NULL, F, &r));
    cr_assert_eq(tl_ckpt_checksums(r), 1u);
    cr_assert_eq(tl_ckpt_num_tensors(r), 0);
    tl_ckpt_close(r);
    free(b);
}

/* A real file, damaged by hand: a changed data byte, a renamed tensor. */
Test(io_ckpt_corrupt, checksums_catch_what_parses)
{
    char *dir = ck_tmpdir();
    char *path = ck_join(dir, "c.safetensors");
    ck_sample_write(path, 1);
    size_t len;
    unsigned char *b = ck_read(path, &len);
    b[len - 3] ^= 0x10;
    expect_bad_buf(b, len, 0, "data checksum mismatch: crc32c says");
    b[len - 3] ^= 0x10;
    unsigned char *m = memmem(b, len, "\"mask\"", 6);
    cr_assert_not_null(m);
    m[4] = 'K'; /* "masK": still valid JSON, same length */
    expect_bad_buf(b, len, 0, "header checksum mismatch: header_crc32c says");
    m[4] = 'k';
    tl_ckpt_reader *r;
    ASSERT_OK(tl_ckpt_open_memory(b, len, LABEL, 0, &r));
    ck_sample_check(r, 1);
    tl_ckpt_close(r);
    /* the same through a file: the message names the path */
    b[len - 1] ^= 1;
    ck_write(path, b, len);
    ASSERT_ERR(tl_ckpt_open(path, 0, &r), TL_EPARSE, "data checksum mismatch");
    cr_assert_eq(strncmp(tl_last_error(), path, strlen(path)), 0, "%s", tl_last_error());
    free(b);
    ck_rmtree(dir);
    free(path);
    free(dir);
}

/* The sample and the many-dtype file of a writer with 40 tensors. */
static unsigned char *sample_bytes(int big, size_t *len)
{
    char *dir = ck_tmpdir();
    char *path = ck_join(dir, "s.safetensors");
    if (!big) {
        ck_sample_write(path, 2);
    } else {
        static double v[40][5];
        tl_ckpt_writer *w;
        ASSERT_OK(tl_ckpt_writer_create(&w));
        char name[32];
        for (int i = 0; i < 40; i++) {
            for (int j = 0; j < 5; j++)
                v[i][j] = i * 0.1 + j;
            snprintf(name, sizeof name, "layer_%02d/kernel", i);
            tl_ckpt_dtype dt = (tl_ckpt_dtype)(i % TL_CKPT_NUM_DTYPES);
            int64_t n = (int64_t)(40 / tl_ckpt_dtype_size(dt)); /* 40 bytes each */
            ASSERT_OK(tl_ckpt_writer_add(w, name, dt, &n, 1, v[i]));
        }
        ASSERT_OK(tl_ckpt_writer_write(w, path));
        tl_ckpt_writer_destroy(w);
    }
    unsigned char *b = ck_read(path, len);
    ck_rmtree(dir);
    free(path);
    free(dir);
    return b;
}

Test(io_ckpt_corrupt, truncation_at_every_length)
{
    for (int big = 0; big < 2; big++) {
        size_t len;
        unsigned char *b = sample_bytes(big, &len);
        size_t step = big ? 97 : 1, cases = 0;
        for (size_t cut = 0; cut < len; cut += step, cases++)
            expect_bad_buf(b, cut, 0, "");
        for (size_t cut = len - 8; cut < len; cut++) /* the last bytes of the data */
            expect_bad_buf(b, cut, 0, "the file is truncated");
        cr_log_info("%s file of %zu bytes: %zu truncations rejected", big ? "40-tensor" : "sample", len, cases);
        free(b);
    }
}

Test(io_ckpt_corrupt, one_bit_flips_anywhere)
{
    for (int big = 0; big < 2; big++) {
        size_t len;
        unsigned char *b = sample_bytes(big, &len);
        uint64_t hlen = 0;
        for (int i = 7; i >= 0; i--)
            hlen = (hlen << 8) | b[i];
        size_t header_cases = 0, data_cases = 0, sums = 0;
        for (size_t off = 0; off < len; off++) {
            bool in_header = off < 8 + hlen;
            if (!in_header && off % 5 != 0 && off != len - 1)
                continue; /* every byte of the header, every 5th of the data */
            for (int k = 0; k < 2; k++) {
                int bit = k == 0 ? (int)(off % 8) : (int)((off * 3 + 5) % 8);
                b[off] ^= (unsigned char)(1u << bit);
                expect_bad_buf(b, len, 0, "");
                sums += strstr(tl_last_error(), "checksum mismatch") != NULL;
                b[off] ^= (unsigned char)(1u << bit);
                *(in_header ? &header_cases : &data_cases) += 1;
            }
        }
        cr_log_info("%s file: %zu header and %zu data bit flips rejected, %zu of them by a checksum",
                    big ? "40-tensor" : "sample", header_cases, data_cases, sums);
        free(b);
    }
}

Test(io_ckpt_corrupt, random_overwrites)
{
    size_t len;
    unsigned char *b = sample_bytes(0, &len);
    unsigned char *c = malloc(len);
    uint64_t s = 0x9e3779b97f4a7c15ull;
    int rejected = 0;
    for (int it = 0; it < 3000; it++) {
        memcpy(c, b, len);
        int k = 1 + it % 4;
        for (int j = 0; j < k; j++) {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            c[(s >> 33) % len] = (unsigned char)(s >> 20);
        }
        if (memcmp(b, c, len) == 0)
            continue;
        expect_bad_buf(c, len, 0, "");
        rejected++;
    }
    cr_log_info("%d random overwrites rejected", rejected);
    free(c);
    free(b);
}
