/* fuzz_tfrecord_gz.c — libFuzzer target for the decompressing TFRecord
 * reader (compress.h). The first byte chooses the compression (GZIP, ZLIB or
 * AUTO) and a chunk size; the rest is the compressed file, read twice:
 *   1. from memory, all input at once;
 *   2. as a stream handing out at most `chunk` compressed bytes a call.
 * Both must agree record for record and on the status and the fault at the
 * end, since how the input arrives must not change what it means. When the
 * file reads cleanly its records are written again through the compressing
 * writer and must read back the same. Everything must end in a status,
 * never a crash, a leak or undefined behaviour; every failure must say why. */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "io/compress.h"
#include "io/tfrecord.h"
#include "tpuloop/base.h"

typedef struct chunks {
    const uint8_t *data;
    size_t size, pos, chunk;
} chunks;

static tl_status chunk_read(void *ud, void *buf, size_t n, size_t *got)
{
    chunks *c = ud;
    size_t k = c->size - c->pos;
    if (k > n)
        k = n;
    if (k > c->chunk)
        k = c->chunk;
    memcpy(buf, c->data + c->pos, k);
    c->pos += k;
    *got = k;
    return TL_OK;
}

/* A failure must leave a message that names the file, and a fault. */
static void check_failure(tl_status st, tl_tfrecord_reader *r)
{
    if (st == TL_OK)
        return;
    if (strstr(tl_last_error(), "fuzz.gz") == NULL)
        __builtin_trap();
    if (st == TL_EPARSE && tl_tfrecord_reader_fault(r) == TL_TFRECORD_FAULT_NONE)
        __builtin_trap();
}

/* Rewrites the records read from the memory reader (kept in recs) with
 * compression c and checks they read back identically. */
static void rewrite(tl_tfrecord_compression c, uint8_t **recs, size_t *lens, size_t n)
{
    FILE *tmp = tmpfile();
    if (tmp == NULL)
        return;
    int fd = dup(fileno(tmp));
    tl_tfrecord_zwriter *w;
    if (fd < 0 || tl_tfrecord_zwriter_create_fd(fd, "fuzz.gz", true, c, 1, &w) != TL_OK) {
        if (fd >= 0)
            close(fd);
        fclose(tmp);
        return;
    }
    for (size_t i = 0; i < n; i++)
        if (tl_tfrecord_zwriter_write(w, recs[i], lens[i]) != TL_OK)
            __builtin_trap();
    if (tl_tfrecord_zwriter_destroy(w) != TL_OK)
        __builtin_trap();
    rewind(tmp);
    tl_tfrecord_zreader *z;
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fileno(tmp));
    if (tl_tfrecord_zreader_open(path, TL_TFRECORD_AUTO, &z) != TL_OK)
        __builtin_trap();
    if (tl_tfrecord_zreader_compression(z) != c && n > 0)
        __builtin_trap();
    tl_tfrecord_reader *r = tl_tfrecord_zreader_records(z);
    for (size_t i = 0; i <= n; i++) {
        const uint8_t *p;
        size_t len;
        if (tl_tfrecord_next(r, &p, &len) != TL_OK)
            __builtin_trap();
        if (i == n ? p != NULL : p == NULL || len != lens[i] || (len > 0 && memcmp(p, recs[i], len) != 0))
            __builtin_trap();
    }
    tl_tfrecord_zreader_destroy(z);
    fclose(tmp);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int quiet;
    if (!quiet) {
        tl_set_log_level(TL_LOG_OFF);
        quiet = 1;
    }
    if (size == 0)
        return 0;
    static const tl_tfrecord_compression modes[] = {TL_TFRECORD_GZIP, TL_TFRECORD_ZLIB, TL_TFRECORD_AUTO};
    tl_tfrecord_compression c = modes[data[0] % 3];
    chunks ch = {data + 1, size - 1, 0, (size_t)(data[0] / 3) % 23 + 1};
    tl_clear_error();
    tl_tfrecord_zreader *m = NULL, *s = NULL;
    if (tl_tfrecord_zreader_create_memory(data + 1, size - 1, "fuzz.gz", c, &m) != TL_OK ||
        tl_tfrecord_zreader_create_stream(chunk_read, &ch, "fuzz.gz", c, &s) != TL_OK) {
        tl_tfrecord_zreader_destroy(m);
        tl_tfrecord_zreader_destroy(s);
        return 0;
    }
    tl_tfrecord_reader *rm = tl_tfrecord_zreader_records(m), *rs = tl_tfrecord_zreader_records(s);
    tl_tfrecord_reader_set_max_record(rm, 1 << 20);
    tl_tfrecord_reader_set_max_record(rs, 1 << 20);
    enum { KEEP = 64 };
    uint8_t *recs[KEEP];
    size_t lens[KEEP], kept = 0;
    bool clean = false, all_kept = true;
    for (;;) {
        const uint8_t *a, *b;
        size_t na, nb;
        tl_status sa = tl_tfrecord_next(rm, &a, &na);
        check_failure(sa, rm);
        tl_status sb = tl_tfrecord_next(rs, &b, &nb);
        check_failure(sb, rs);
        if (sa != sb || tl_tfrecord_reader_fault(rm) != tl_tfrecord_reader_fault(rs) ||
            tl_tfrecord_reader_offset(rm) != tl_tfrecord_reader_offset(rs))
            __builtin_trap();
        if (sa != TL_OK || a == NULL) {
            if (b != NULL)
                __builtin_trap();
            clean = sa == TL_OK;
            break;
        }
        if (b == NULL || na != nb || (na > 0 && memcmp(a, b, na) != 0))
            __builtin_trap();
        if (all_kept && kept < KEEP && (recs[kept] = malloc(na > 0 ? na : 1)) != NULL) {
            memcpy(recs[kept], a, na);
            lens[kept++] = na;
        } else {
            all_kept = false; /* too many to rewrite */
        }
    }
    tl_tfrecord_compression got = tl_tfrecord_zreader_compression(m);
    if (tl_tfrecord_zreader_compression(s) != got) /* both sniffed the same first bytes */
        __builtin_trap();
    tl_tfrecord_zreader_destroy(m);
    tl_tfrecord_zreader_destroy(s);
    if (clean && all_kept && got != TL_TFRECORD_NONE)
        rewrite(got, recs, lens, kept);
    for (size_t i = 0; i < kept; i++)
        free(recs[i]);
    return 0;
}
