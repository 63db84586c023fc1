/* fuzz_csv.c — libFuzzer target for the CSV reader: the input is a CSV file
 * read from memory. The first byte picks the options (one of four column
 * schemas, ',' or ';' or tab, a small or the default record cap), the rest is
 * the text. Records are read one by one, going on after errors that leave
 * the reader usable, every value read back, then again through the batch API.
 * Everything must end in a status, never a crash, a leak or undefined
 * behaviour; string values must be NUL-terminated at their length. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tpuloop/base.h"
#include "tpuloop/text_data.h"

static const tl_csv_column S0[] = {
    {"x", TL_CSV_FLOAT32}, {"n", TL_CSV_INT64}, {"s", TL_CSV_STRING}, {"y", TL_CSV_INT64}};
static const tl_csv_column S1[] = {{"a", TL_CSV_STRING}};
static const tl_csv_column S2[] = {{"label", TL_CSV_INT64}, {"f1", TL_CSV_FLOAT32}, {"f2", TL_CSV_FLOAT32}};
static const tl_csv_column S3[] = {{"", TL_CSV_STRING}, {"q\"x", TL_CSV_INT64}};

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
    uint8_t mode = data[0];
    data++;
    size--;
    tl_csv_options o;
    tl_csv_options_init(&o);
    switch (mode & 3) {
    case 0:
        o.columns = S0, o.num_columns = 4, o.label_column = "y";
        break;
    case 1:
        o.columns = S1, o.num_columns = 1;
        break;
    case 2:
        o.columns = S2, o.num_columns = 3, o.label_column = "label";
        break;
    default:
        o.columns = S3, o.num_columns = 2, o.label_column = "q\"x";
        break;
    }
    static const char delims[4] = {',', ';', '\t', ','};
    o.delimiter = delims[(mode >> 2) & 3];
    if (mode & 16)
        o.max_record = 8 + (mode >> 5) * 4;

    tl_csv_reader *r = NULL;
    tl_status st = tl_csv_reader_create_memory(data, size, "fuzz", &o, &r);
    if (st != TL_OK) {
        if (r != NULL || tl_last_error()[0] == '\0')
            __builtin_trap();
        return 0;
    }
    for (int it = 0; it < 100000; it++) {
        bool got = false;
        int64_t before = tl_csv_reader_line(r);
        st = tl_csv_reader_next(r, &got);
        if (st != TL_OK) {
            if (got || tl_last_error()[0] == '\0' || (st != TL_EPARSE && st != TL_ENOMEM))
                __builtin_trap();
            if (tl_csv_reader_line(r) == before)
                break; /* sticky, or at the end */
            continue;
        }
        if (!got)
            break;
        for (int k = 0; k < o.num_columns; k++) {
            if (o.columns[k].type == TL_CSV_STRING) {
                size_t len = 0;
                const char *s = tl_csv_reader_string(r, k, &len);
                if (s == NULL || s[len] != '\0')
                    __builtin_trap();
            } else if (o.columns[k].type == TL_CSV_FLOAT32) {
                volatile float f = tl_csv_reader_float(r, k);
                (void)f;
            } else {
                volatile int64_t v = tl_csv_reader_int64(r, k);
                (void)v;
            }
        }
    }
    tl_csv_reader_destroy(r);

    if (o.label_column == NULL || tl_csv_reader_create_memory(data, size, "fuzz", &o, &r) != TL_OK)
        return 0;
    int d = tl_csv_reader_num_features(r);
    float feats[4 * 4];
    int32_t labels[4];
    if (d < 0 || d > 4)
        __builtin_trap();
    for (int it = 0; it < 100000; it++) {
        int64_t got = -1;
        st = tl_csv_reader_next_batch(r, 4, feats, labels, &got);
        if (got < 0 || got > 4)
            __builtin_trap();
        if (st != TL_OK || got < 4)
            break;
    }
    tl_csv_reader_destroy(r);
    return 0;
}
