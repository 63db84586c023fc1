/* fuzz_tfrecord.c — libFuzzer target for the TFRecord reader and the event
 * decoder. The input is read three ways:
 *   1. as a TFRecord file from memory, and again as a stream handed out in
 *      chunks whose size comes from the input's first byte: both must agree
 *      record for record, and on the status and the fault at the end,
 *      stepping over records whose data CRC fails (skip_corrupt_records);
 *   2. as an event file (framing, then each record as a tensorflow.Event,
 *      a SessionLog's fields included);
 *   3. as the payload of one well-framed record, so that the Event decoder
 *      sees arbitrary bytes (random bytes rarely pass two CRCs).
 * Everything must end in a status, never a crash, a leak or undefined
 * behaviour; every failure must say why. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "io/tfrecord.h"
#include "tpuloop/base.h"
#include "tpuloop/summary.h"

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

/* A failure must leave a message, and a parse failure its fault. */
static void check_failure(tl_status st, tl_tfrecord_reader *r)
{
    if (st == TL_OK)
        return;
    if (tl_last_error()[0] == '\0')
        __builtin_trap();
    if (st == TL_EPARSE && tl_tfrecord_reader_fault(r) == TL_TFRECORD_FAULT_NONE)
        __builtin_trap();
}

static void framing(const uint8_t *data, size_t size)
{
    tl_tfrecord_reader *m = NULL, *s = NULL;
    chunks c = {data, size, 0, size > 0 ? (size_t)data[0] % 17 + 1 : 1};
    if (tl_tfrecord_reader_create_memory(data, size, "fuzz", &m) != TL_OK ||
        tl_tfrecord_reader_create_stream(chunk_read, &c, "fuzz", &s) != TL_OK) {
        tl_tfrecord_reader_destroy(m);
        tl_tfrecord_reader_destroy(s);
        return;
    }
    tl_tfrecord_reader_set_max_record(m, 1 << 20);
    tl_tfrecord_reader_set_max_record(s, 1 << 20);
    for (;;) {
        const uint8_t *a, *b;
        size_t na, nb;
        tl_status sa = tl_tfrecord_next(m, &a, &na);
        tl_status sb = tl_tfrecord_next(s, &b, &nb);
        check_failure(sa, m);
        check_failure(sb, s);
        if (sa != sb || tl_tfrecord_reader_fault(m) != tl_tfrecord_reader_fault(s) ||
            tl_tfrecord_reader_offset(m) != tl_tfrecord_reader_offset(s))
            __builtin_trap();
        if (sa != TL_OK && tl_tfrecord_reader_fault(m) == TL_TFRECORD_FAULT_BAD_DATA_CRC) {
            /* skip_corrupt_records: both step over the bad record alike and
             * read on; any other state cannot be skipped. */
            if (tl_tfrecord_reader_skip_record(m) != TL_OK || tl_tfrecord_reader_skip_record(s) != TL_OK ||
                tl_tfrecord_reader_offset(m) != tl_tfrecord_reader_offset(s))
                __builtin_trap();
            continue;
        }
        if (sa != TL_OK && tl_tfrecord_reader_skip_record(m) == TL_OK)
            __builtin_trap();
        if (sa != TL_OK || a == NULL) {
            if (b != NULL)
                __builtin_trap();
            break;
        }
        if (b == NULL || na != nb || memcmp(a, b, na) != 0)
            __builtin_trap();
    }
    tl_tfrecord_reader_destroy(m);
    tl_tfrecord_reader_destroy(s);
}

/* Reads every event, touching every byte it points to. */
static void events(const uint8_t *data, size_t size)
{
    tl_summary_reader *r;
    if (tl_summary_reader_open_memory(data, size, "fuzz.tfevents", &r) != TL_OK)
        return;
    const tl_event *ev;
    tl_status st;
    volatile size_t acc = 0;
    while ((st = tl_summary_reader_next(r, &ev)) == TL_OK && ev != NULL) {
        if ((ev->kind == TL_EVENT_FILE_VERSION) != (ev->file_version != NULL))
            __builtin_trap();
        if (ev->kind != TL_EVENT_SUMMARY && ev->num_values != 0)
            __builtin_trap();
        /* a SessionLog has its path and message ("" when unset), nothing else does */
        if ((ev->kind == TL_EVENT_SESSION_LOG) != (ev->checkpoint_path != NULL) ||
            (ev->checkpoint_path != NULL) != (ev->session_msg != NULL) ||
            (ev->kind != TL_EVENT_SESSION_LOG && ev->session_status != TL_SESSION_STATUS_UNSPECIFIED))
            __builtin_trap();
        if (ev->checkpoint_path != NULL)
            acc += strlen(ev->checkpoint_path) + strlen(ev->session_msg);
        if (ev->file_version != NULL)
            acc += strlen(ev->file_version);
        for (size_t i = 0; i < ev->num_values; i++) {
            acc += strlen(ev->values[i].tag);
            if (!ev->values[i].has_simple_value && ev->values[i].simple_value != 0.0f)
                __builtin_trap();
        }
    }
    if (st != TL_OK && (ev != NULL || tl_last_error()[0] == '\0'))
        __builtin_trap();
    tl_summary_reader_close(r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int quiet;
    if (!quiet) {
        tl_set_log_level(TL_LOG_OFF);
        quiet = 1;
    }
    tl_clear_error();
    framing(data, size);
    events(data, size);

    uint8_t *rec = malloc(size + TL_TFRECORD_HEADER_SIZE + TL_TFRECORD_FOOTER_SIZE);
    if (rec == NULL)
        return 0;
    tl_tfrecord_encode_header(rec, size);
    if (size > 0)
        memcpy(rec + TL_TFRECORD_HEADER_SIZE, data, size);
    uint32_t crc = tl_tfrecord_data_crc(data, size);
    for (int i = 0; i < 4; i++)
        rec[TL_TFRECORD_HEADER_SIZE + size + (size_t)i] = (uint8_t)(crc >> (8 * i));
    events(rec, size + TL_TFRECORD_HEADER_SIZE + TL_TFRECORD_FOOTER_SIZE);
    free(rec);
    return 0;
}
