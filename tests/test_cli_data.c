/* `tpuloop data inspect` and `tpuloop data convert`, run as the built
 * binary: inspect of every external TFRecord file (../shared/testdata/
 * external) against its .expected.json — counts, compression, the schema,
 * and every record's values through --records, float bits included; a
 * corrupt file's error (file and byte offset) and exit status; convert of
 * IDX, CSV and Criteo input to plain, GZIP and ZLIB TFRecord (and shards),
 * read back with inspect; that a failed convert leaves no output; and the
 * errors for bad arguments. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <zlib.h>

#include "test_cli_util.h"
#include "tpuloop/tfrecord.h"

#define EXTERNAL "../shared/testdata/external"
#define SINGLES EXTERNAL "/pwnall-tfrecord/singles.tfrecords"
#define LINGVO EXTERNAL "/lingvo/wmt14_ende_wpm_32k_test.tfrecord"
#define PENGUIN EXTERNAL "/tfx/penguin-Split-eval-data_tfrecord-00000-of-00001.gz"
#define SEQUENCE EXTERNAL "/tfx/tfrecord_sequence-Split-eval-data_tfrecord_eval.gz"
#define EVENTS EXTERNAL "/lingvo/events.out.tfevents.test"

/* ---- helpers -------------------------------------------------------------- */

static json_t *load_json(const char *path)
{
    json_error_t e;
    json_t *j = json_load_file(path, 0, &e);
    cr_assert_not_null(j, "%s: %s (the external fixtures live in ../shared/testdata/external)", path, e.text);
    return j;
}

static uint32_t bits_of(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

/* A float of a record line as its float32 bits: numbers are read as double
 * and rounded to float, the strings "nan", "inf", "-inf" as themselves. */
static uint32_t json_f32_bits(const json_t *v)
{
    if (json_is_string(v)) {
        const char *s = json_string_value(v);
        if (strcmp(s, "inf") == 0)
            return 0x7f800000u;
        if (strcmp(s, "-inf") == 0)
            return 0xff800000u;
        cr_assert_str_eq(s, "nan");
        return 0x7fc00000u;
    }
    cr_assert(json_is_real(v), "a float_list value is not a JSON real");
    return bits_of((float)json_real_value(v));
}

static int b64val(char c)
{
    const char *tab = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    const char *p = strchr(tab, c);
    cr_assert(c != '\0' && p != NULL, "bad base64 character '%c'", c);
    return (int)(p - tab);
}

/* Decodes padded base64 s into hex (malloc'd), to compare with value_hex. */
static char *b64_hex(const char *s)
{
    size_t n = strlen(s);
    cr_assert_eq(n % 4, 0u, "base64 '%s' is not padded", s);
    char *h = malloc(n / 4 * 6 + 1), *p = h;
    cr_assert_not_null(h);
    for (size_t i = 0; i < n; i += 4) {
        int pad = (s[i + 2] == '=') + (s[i + 3] == '=');
        uint32_t v = (uint32_t)b64val(s[i]) << 18 | (uint32_t)b64val(s[i + 1]) << 12 |
                     (uint32_t)(s[i + 2] == '=' ? 0 : b64val(s[i + 2])) << 6 |
                     (uint32_t)(s[i + 3] == '=' ? 0 : b64val(s[i + 3]));
        for (int k = 0; k < 3 - pad; k++, p += 2)
            snprintf(p, 3, "%02x", (v >> (16 - 8 * k)) & 0xff);
    }
    *p = '\0';
    return h;
}

/* Compares one Feature of a record line, {"float_list": [...]} or {}, with
 * the expected.json one, {"kind": ..., "value"/"value_f32_bits"/"value_hex"}. */
static void check_feature(const json_t *got, const json_t *want, const char *where)
{
    const json_t *kind = json_object_get(want, "kind");
    if (json_is_null(kind)) {
        cr_assert_eq(json_object_size(got), 0u, "%s: an empty Feature should be {}", where);
        return;
    }
    const char *k = json_string_value(kind);
    cr_assert_eq(json_object_size(got), 1u, "%s", where);
    const json_t *vals = json_object_get(got, k);
    cr_assert(json_is_array(vals), "%s: no %s", where, k);
    if (strcmp(k, "float_list") == 0) {
        const json_t *bits = json_object_get(want, "value_f32_bits");
        cr_assert_eq(json_array_size(vals), json_array_size(bits), "%s", where);
        for (size_t i = 0; i < json_array_size(bits); i++) {
            uint32_t w = (uint32_t)strtoul(json_string_value(json_array_get(bits, i)), NULL, 16);
            cr_assert_eq(json_f32_bits(json_array_get(vals, i)), w, "%s[%zu]", where, i);
        }
    } else if (strcmp(k, "int64_list") == 0) {
        const json_t *v = json_object_get(want, "value");
        cr_assert_eq(json_array_size(vals), json_array_size(v), "%s", where);
        for (size_t i = 0; i < json_array_size(v); i++) {
            cr_assert(json_is_integer(json_array_get(vals, i)), "%s[%zu] is not a JSON integer", where, i);
            cr_assert_eq(json_integer_value(json_array_get(vals, i)), json_integer_value(json_array_get(v, i)),
                         "%s[%zu]", where, i);
        }
    } else {
        const json_t *hx = json_object_get(want, "value_hex");
        cr_assert_eq(json_array_size(vals), json_array_size(hx), "%s", where);
        for (size_t i = 0; i < json_array_size(hx); i++) {
            char *h = b64_hex(json_string_value(json_array_get(vals, i)));
            cr_assert_str_eq(h, json_string_value(json_array_get(hx, i)), "%s[%zu]", where, i);
            free(h);
        }
    }
}

static void check_features(const json_t *got, const json_t *want, const char *where)
{
    cr_assert_eq(json_object_size(got), json_object_size(want), "%s: key count", where);
    /* Keys sorted: the line's object order (kept by jansson) is strcmp's. */
    const char *key, *prev = NULL;
    json_t *v;
    json_object_foreach((json_t *)got, key, v) {
        cr_assert(prev == NULL || strcmp(prev, key) < 0, "%s: keys not sorted (%s, %s)", where, prev, key);
        prev = key;
        char w[256];
        snprintf(w, sizeof w, "%s.%s", where, key);
        const json_t *e = json_object_get(want, key);
        cr_assert_not_null(e, "%s: unexpected key", w);
        check_feature(v, e, w);
    }
}

/* Schema statistics the expected records imply for one key. */
typedef struct want_stats {
    char key[64];
    long records, min_values, max_values, min_steps, max_steps;
    bool seen_values;
} want_stats;

typedef struct want_table {
    want_stats s[16];
    int n;
} want_table;

static want_stats *want_get(want_table *t, const char *key)
{
    for (int i = 0; i < t->n; i++)
        if (strcmp(t->s[i].key, key) == 0)
            return &t->s[i];
    cr_assert_lt(t->n, 16);
    want_stats *s = &t->s[t->n++];
    memset(s, 0, sizeof *s);
    snprintf(s->key, sizeof s->key, "%s", key);
    return s;
}

static void want_values(want_stats *s, const json_t *feature)
{
    const json_t *v = json_object_get(feature, "value");
    long c = (long)json_array_size(v ? v : json_object_get(feature, "value_hex"));
    if (!s->seen_values || c < s->min_values)
        s->min_values = c;
    if (!s->seen_values || c > s->max_values)
        s->max_values = c;
    s->seen_values = true;
}

static void check_schema(const json_t *table, const want_table *t, bool list, const char *file)
{
    cr_assert_eq(json_object_size(table), (size_t)t->n, "%s: schema keys", file);
    for (int i = 0; i < t->n; i++) {
        const want_stats *s = &t->s[i];
        const json_t *e = json_object_get(table, s->key);
        cr_assert_not_null(e, "%s: schema lacks %s", file, s->key);
        cr_assert_eq(json_integer_value(json_object_get(e, "records")), s->records, "%s %s", file, s->key);
        cr_assert_eq(json_integer_value(json_object_get(e, "min_values")), s->min_values, "%s %s", file, s->key);
        cr_assert_eq(json_integer_value(json_object_get(e, "max_values")), s->max_values, "%s %s", file, s->key);
        if (list) {
            cr_assert_eq(json_integer_value(json_object_get(e, "min_steps")), s->min_steps, "%s %s", file, s->key);
            cr_assert_eq(json_integer_value(json_object_get(e, "max_steps")), s->max_steps, "%s %s", file, s->key);
        }
    }
}

/* inspect --json --records=ALL of an external file against its
 * .expected.json: the file's facts, the schema, every record. */
static void check_external(const char *path)
{
    char wpath[512];
    snprintf(wpath, sizeof wpath, "%s.expected.json", path);
    json_t *want = load_json(wpath);
    long n = (long)json_integer_value(json_object_get(want, "record_count"));
    bool seq = strcmp(json_string_value(json_object_get(want, "message_type")), "tensorflow.SequenceExample") == 0;
    const char *fkey = seq ? "context" : "features";
    tc_result r = tc_runf("data inspect %s --json --records=%ld", path, n);
    cr_assert_eq(r.status, 0, "stderr: %s", r.err);
    json_t *j = tc_json(&r);
    cr_assert(json_is_true(json_object_get(j, "valid")));
    json_t *f = json_array_get(json_object_get(j, "files"), 0);
    cr_assert_str_eq(json_string_value(json_object_get(f, "compression")),
                     json_string_value(json_object_get(want, "compression")));
    cr_assert_eq(json_integer_value(json_object_get(f, "records")), n);
    cr_assert_eq(json_integer_value(json_object_get(f, "file_bytes")),
                 json_integer_value(json_object_get(want, "file_size")));
    long payload = 0;
    json_t *framing = json_object_get(want, "framing");
    for (size_t i = 0; i < json_array_size(framing); i++)
        payload += (long)json_integer_value(json_object_get(json_array_get(framing, i), "length"));
    cr_assert_eq(json_integer_value(json_object_get(f, "record_bytes")), payload);
    cr_assert(json_is_true(json_object_get(f, "valid")));
    cr_assert_str_eq(json_string_value(json_object_get(f, "message_type")), seq ? "tf.SequenceExample" : "tf.Example");
    cr_assert_eq(json_integer_value(json_object_get(f, "unparsed_records")), 0);

    json_t *recs = json_object_get(f, "first_records"), *wrecs = json_object_get(want, "records");
    cr_assert_eq(json_array_size(recs), (size_t)n);
    want_table fstats = {.n = 0}, lstats = {.n = 0};
    for (long i = 0; i < n; i++) {
        json_t *g = json_array_get(recs, (size_t)i), *w = json_array_get(wrecs, (size_t)i);
        char where[64];
        snprintf(where, sizeof where, "%s record %ld", seq ? "sequence" : "example", i);
        check_features(json_object_get(g, fkey), json_object_get(w, fkey), where);
        const char *key;
        json_t *v;
        json_object_foreach(json_object_get(w, fkey), key, v) {
            want_stats *s = want_get(&fstats, key);
            want_values(s, v);
            s->records++;
        }
        if (!seq) {
            cr_assert_null(json_object_get(g, "feature_lists"));
            continue;
        }
        json_t *gl = json_object_get(g, "feature_lists"), *wl = json_object_get(w, "feature_lists");
        cr_assert_eq(json_object_size(gl), json_object_size(wl), "%s", where);
        json_object_foreach(wl, key, v) {
            json_t *steps = json_object_get(gl, key);
            cr_assert_eq(json_array_size(steps), json_array_size(v), "%s list %s", where, key);
            want_stats *s = want_get(&lstats, key);
            long ns = (long)json_array_size(v);
            if (s->records == 0 || ns < s->min_steps)
                s->min_steps = ns;
            if (s->records == 0 || ns > s->max_steps)
                s->max_steps = ns;
            s->records++;
            for (size_t k = 0; k < json_array_size(v); k++) {
                char w2[128];
                snprintf(w2, sizeof w2, "%s.%s[%zu]", where, key, k);
                check_feature(json_array_get(steps, k), json_array_get(v, k), w2);
                want_values(s, json_array_get(v, k));
            }
        }
    }
    check_schema(json_object_get(f, fkey), &fstats, false, path);
    if (seq)
        check_schema(json_object_get(f, "feature_lists"), &lstats, true, path);
    json_decref(j);
    json_decref(want);
    tc_done(&r);
}

/* ---- inspect --------------------------------------------------------------- */

Test(cli_data, inspect_singles_matches_expected)
{
    check_external(SINGLES);
}

Test(cli_data, inspect_lingvo_matches_expected)
{
    check_external(LINGVO);
}

Test(cli_data, inspect_penguin_gzip_matches_expected)
{
    check_external(PENGUIN);
}

Test(cli_data, inspect_sequence_examples_match_expected)
{
    check_external(SEQUENCE);
    /* The kinds of the context keys: int64 or float in 4050 records, an
     * empty Feature in 450. */
    tc_result r = tc_runf("data inspect %s --json", SEQUENCE);
    json_t *j = tc_json(&r);
    json_t *i = json_object_get(json_object_get(json_array_get(json_object_get(j, "files"), 0), "context"), "i");
    cr_assert_str_eq(json_string_value(json_object_get(i, "kind")), "int64_list");
    cr_assert_eq(json_integer_value(json_object_get(json_object_get(i, "kinds"), "int64_list")), 4050);
    cr_assert_eq(json_integer_value(json_object_get(json_object_get(i, "kinds"), "empty")), 450);
    json_decref(j);
    tc_done(&r);
}

/* The record lines, exactly, in the default (text) output. */
Test(cli_data, inspect_text_prints_record_lines_exactly)
{
    tc_result r = tc_runf("data inspect %s --records=3", SINGLES);
    cr_assert_eq(r.status, 0, "stderr: %s", r.err);
    cr_assert(strstr(r.out, "compression NONE, 130 bytes on disk; 3 records, 82 bytes of records"), "%s", r.out);
    cr_assert(strstr(r.out, "every record's CRCs are valid"));
    cr_assert(strstr(r.out, "message type tf.Example"));
    cr_assert(strstr(r.out, "\n{\"features\": {\"int_feature\": {\"int64_list\": [42]}}}\n"
                            "{\"features\": {\"float_feature\": {\"float_list\": [3.1400001]}}}\n"
                            "{\"features\": {\"byte_feature\": {\"bytes_list\": [\"QEFCQ0Q=\"]}}}\n"),
              "%s", r.out);
    tc_done(&r);
    /* --records=1 stops at one line; --records=0 prints none. */
    r = tc_runf("data inspect %s --records=1", SINGLES);
    cr_assert(strstr(r.out, "int_feature\": {\"int64_list") && !strstr(r.out, "{\"features\": {\"float_feature"));
    tc_done(&r);
    r = tc_runf("data inspect %s", SINGLES);
    cr_assert_null(strstr(r.out, "{\"features\""));
    tc_done(&r);
}

Test(cli_data, inspect_several_files_and_forced_compression)
{
    tc_result r = tc_runf("data inspect %s %s --json", SINGLES, PENGUIN);
    cr_assert_eq(r.status, 0, "stderr: %s", r.err);
    json_t *j = tc_json(&r);
    json_t *files = json_object_get(j, "files");
    cr_assert_eq(json_array_size(files), 2u);
    cr_assert_str_eq(json_string_value(json_object_get(json_array_get(files, 1), "compression")), "GZIP");
    json_decref(j);
    tc_done(&r);
    /* Forcing the wrong compression reads a gzip file as framing: not
     * TFRecord data, a file that cannot be used (exit 1), and the error
     * says what the bytes are. */
    r = tc_runf("data inspect %s --compression=NONE", PENGUIN);
    cr_assert_eq(r.status, 1, "stdout %s stderr %s", r.out, r.err);
    cr_assert(strstr(r.err, "error: ") && strstr(r.err, PENGUIN) && strstr(r.err, "not a TFRecord file") &&
                  strstr(r.err, "read it with compression GZIP or AUTO"),
              "%s", r.err);
    tc_done(&r);
    r = tc_runf("data inspect %s --compression=GZIP --json", PENGUIN);
    cr_assert_eq(r.status, 0);
    tc_done(&r);
}

/* An event file is valid framing whose records are not Examples: reported,
 * not a failure. */
Test(cli_data, inspect_event_file_is_not_examples)
{
    tc_result r = tc_runf("data inspect %s --json --records=1", EVENTS);
    cr_assert_eq(r.status, 0, "stderr: %s", r.err);
    json_t *j = tc_json(&r);
    json_t *f = json_array_get(json_object_get(j, "files"), 0);
    cr_assert_eq(json_integer_value(json_object_get(f, "records")), 361);
    cr_assert_str_eq(json_string_value(json_object_get(f, "message_type")), "unknown");
    cr_assert_eq(json_integer_value(json_object_get(f, "unparsed_records")), 361);
    json_t *first = json_array_get(json_object_get(f, "first_records"), 0);
    cr_assert(strstr(json_string_value(json_object_get(first, "error")), "record 0"));
    json_decref(j);
    tc_done(&r);
}

static char *copy_file(const char *dir, const char *src, const char *name)
{
    char *path;
    cr_assert(asprintf(&path, "%s/%s", dir, name) > 0);
    char *cmd;
    cr_assert(asprintf(&cmd, "cp %s %s && chmod u+w %s", src, path, path) > 0);
    cr_assert_eq(system(cmd), 0);
    free(cmd);
    return path;
}

static void flip_byte(const char *path, long offset)
{
    FILE *f = fopen(path, "r+b");
    cr_assert_not_null(f);
    cr_assert_eq(fseek(f, offset, SEEK_SET), 0);
    int c = fgetc(f);
    cr_assert_eq(fseek(f, offset, SEEK_SET), 0);
    fputc(c ^ 0x20, f);
    cr_assert_eq(fclose(f), 0);
}

Test(cli_data, inspect_corrupt_file_names_file_and_offset)
{
    char *dir = tc_tmpdir();
    /* Record 1 of singles starts at byte 40; flip a byte of its data. */
    char *bad = copy_file(dir, SINGLES, "bad.tfrecord");
    flip_byte(bad, 40 + 12 + 5);
    tc_result r = tc_runf("data inspect %s --json --records=3", bad);
    cr_assert_eq(r.status, 1, "a corrupt file cannot be used (exit 1, as a corrupt checkpoint); got %d", r.status);
    cr_assert(strstr(r.err, "error: ") && strstr(r.err, bad) && strstr(r.err, "byte offset 40"), "%s", r.err);
    json_t *j = tc_json(&r);
    json_t *f = json_array_get(json_object_get(j, "files"), 0);
    cr_assert(json_is_false(json_object_get(j, "valid")));
    cr_assert(json_is_false(json_object_get(f, "valid")));
    cr_assert_eq(json_integer_value(json_object_get(f, "records")), 1, "the good record before it is counted");
    cr_assert(strstr(json_string_value(json_object_get(f, "error")), "byte offset 40"));
    json_decref(j);
    tc_done(&r);
    /* A flipped length (record 2 at byte 85) and the text output. */
    char *bad2 = copy_file(dir, SINGLES, "bad2.tfrecord");
    flip_byte(bad2, 85 + 1);
    r = tc_runf("data inspect %s", bad2);
    cr_assert_eq(r.status, 1);
    cr_assert(strstr(r.out, "INVALID after 2 good records"), "%s", r.out);
    cr_assert(strstr(r.err, "error: ") && strstr(r.err, "record 2 at byte offset 85: bad length CRC"), "%s", r.err);
    cr_assert_null(strstr(r.out, "bad length CRC"), "the error is printed once, on stderr: %s", r.out);
    tc_done(&r);
    /* A truncated gzip file; the good file after it is still reported. */
    char *cut = copy_file(dir, PENGUIN, "cut.gz");
    cr_assert_eq(truncate(cut, 1500), 0);
    r = tc_runf("data inspect %s %s --json", cut, SINGLES);
    cr_assert_eq(r.status, 1);
    cr_assert(strstr(r.err, cut), "%s", r.err);
    j = tc_json(&r);
    cr_assert(json_is_true(json_object_get(json_array_get(json_object_get(j, "files"), 1), "valid")));
    json_decref(j);
    tc_done(&r);
    /* A missing file cannot be read: a runtime failure, exit 1. */
    r = tc_runf("data inspect %s/none.tfrecord", dir);
    cr_assert_eq(r.status, 1);
    cr_assert(strstr(r.err, "none.tfrecord"), "%s", r.err);
    tc_done(&r);
    free(bad);
    free(bad2);
    free(cut);
    tc_rmtree(dir);
    free(dir);
}

Test(cli_data, inspect_bad_arguments)
{
    static const struct {
        const char *args, *frag;
    } cases[] = {
        {"data", "needs a subcommand"},
        {"data frob", "unknown subcommand 'data frob'"},
        {"data inspect", "needs at least one TFRecord FILE"},
        {"data inspect x --records=-1", "--records must be a whole number"},
        {"data inspect x --records=2x", "--records must be a whole number"},
        {"data inspect x --compression=BZIP2", "--compression must be AUTO, GZIP, ZLIB or NONE"},
        {"data inspect x --frob", "unknown option '--frob'"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        tc_result r = tc_run(NULL, cases[i].args);
        cr_assert_eq(r.status, 2, "%s: exit %d", cases[i].args, r.status);
        cr_assert(strstr(r.err, cases[i].frag), "%s: %s", cases[i].args, r.err);
        tc_done(&r);
    }
}

Test(cli_data, help_lists_the_data_commands)
{
    tc_result r = tc_run(NULL, "help");
    cr_assert_eq(r.status, 0);
    cr_assert(strstr(r.out, "\n  data inspect FILE...") && strstr(r.out, "\n  data convert --from=idx|csv|criteo"),
              "%s", r.out);
    tc_done(&r);
}

/* A record whose field 2 is not FeatureLists is still an Example (field 2
 * is unknown to it); bytes that are neither are counted, not fatal. */
Test(cli_data, inspect_example_with_unknown_field_and_garbage)
{
    char *dir = tc_tmpdir();
    char path[512];
    snprintf(path, sizeof path, "%s/mixed.tfrecord", dir);
    tl_record_writer *w;
    cr_assert_eq(tl_record_writer_open(path, NULL, &w), TL_OK);
    /* features {feature {key "k" value {int64_list {value: 5}}}}, then field 2 as a varint. */
    static const uint8_t rec0[] = {0x0a, 0x0c, 0x0a, 0x0a, 0x0a, 0x01, 'k', 0x12, 0x05, 0x1a, 0x03, 0x0a,
                                   0x01, 0x05, 0x10, 0x01};
    static const uint8_t rec1[] = {0xff, 0xff, 0xff};
    cr_assert_eq(tl_record_writer_write(w, rec0, sizeof rec0), TL_OK);
    cr_assert_eq(tl_record_writer_write(w, rec1, sizeof rec1), TL_OK);
    cr_assert_eq(tl_record_writer_close(w), TL_OK);
    tc_result r = tc_runf("data inspect %s --json --records=2", path);
    cr_assert_eq(r.status, 0, "%s", r.err);
    json_t *j = tc_json(&r);
    json_t *f = json_array_get(json_object_get(j, "files"), 0);
    cr_assert_str_eq(json_string_value(json_object_get(f, "message_type")), "tf.Example");
    cr_assert_eq(json_integer_value(json_object_get(f, "unparsed_records")), 1);
    cr_assert(strstr(json_string_value(json_object_get(f, "parse_error")), "record 1"));
    json_t *recs = json_object_get(f, "first_records");
    json_t *k = json_object_get(json_object_get(json_array_get(recs, 0), "features"), "k");
    cr_assert_eq(json_integer_value(json_array_get(json_object_get(k, "int64_list"), 0)), 5);
    cr_assert_not_null(json_object_get(json_array_get(recs, 1), "error"));
    json_decref(j);
    tc_done(&r);
    tc_rmtree(dir);
    free(dir);
}

/* ---- files that are not TFRecord data ------------------------------------- */

/* How often needle occurs in hay. */
static int count_of(const char *hay, const char *needle)
{
    int n = 0;
    for (const char *p = hay; (p = strstr(p, needle)) != NULL; p += strlen(needle))
        n++;
    return n;
}

/* inspect of path (text, then --json): exit 1, and one error, printed once,
 * on stderr, naming the file, the byte and what a TFRecord file holds
 * there; `where` is what the message says of the bytes ("" for the file's
 * own, " of the decompressed GZIP data"). */
static void expect_not_tfrecord(const char *path, const char *where)
{
    char want[1024];
    snprintf(want, sizeof want,
             "error: %s: not a TFRecord file: the first record's length CRC does not match at byte 0%s (a TFRecord "
             "file starts with a record's 8-byte length and its masked CRC-32C; stored 0x",
             path, where);
    tc_result r = tc_runf("data inspect %s", path);
    cr_assert_eq(r.status, 1, "%s: a file that cannot be used is exit 1; got %d (%s)", path, r.status, r.err);
    cr_assert(strncmp(r.err, want, strlen(want)) == 0, "%s: stderr:\n%s\nwant it to start with:\n%s", path, r.err,
              want);
    cr_assert_eq(count_of(r.err, "error: "), 1, "%s: one error: %s", path, r.err);
    cr_assert_eq(count_of(r.err, "\n"), 1, "%s: on one line: %s", path, r.err);
    cr_assert_eq(count_of(r.out, "not a TFRecord"), 0, "%s: printed once (stderr), not again in the report: %s",
                 path, r.out);
    cr_assert(strstr(r.out, "INVALID after 0 good records"), "%s", r.out);
    tc_done(&r);
    /* --json: the report's "error" holds it; stderr has it once. */
    r = tc_runf("data inspect %s --json", path);
    cr_assert_eq(r.status, 1);
    cr_assert_eq(count_of(r.err, "error: "), 1, "%s", r.err);
    json_t *j = tc_json(&r);
    json_t *f = json_array_get(json_object_get(j, "files"), 0);
    cr_assert(json_is_false(json_object_get(j, "valid")));
    cr_assert_eq(json_integer_value(json_object_get(f, "records")), 0);
    const char *msg = json_string_value(json_object_get(f, "error"));
    cr_assert_not_null(msg);
    size_t n = strlen(msg);
    cr_assert(strncmp(r.err, "error: ", 7) == 0 && strncmp(r.err + 7, msg, n) == 0 && strcmp(r.err + 7 + n, "\n") == 0,
              "the report's error is stderr's: %s / %s", msg, r.err);
    json_decref(j);
    tc_done(&r);
}

Test(cli_data, inspect_text_file_is_not_a_tfrecord)
{
    char *dir = tc_tmpdir();
    char path[512];
    snprintf(path, sizeof path, "%s/notes.txt", dir);
    FILE *f = fopen(path, "wb");
    cr_assert_not_null(f);
    fputs("These are notes, not records: a text file someone passed by mistake.\n", f);
    cr_assert_eq(fclose(f), 0);
    expect_not_tfrecord(path, "");
    tc_rmtree(dir);
    free(dir);
}

Test(cli_data, inspect_random_bytes_are_not_a_tfrecord)
{
    char *dir = tc_tmpdir();
    char path[512];
    snprintf(path, sizeof path, "%s/noise.bin", dir);
    uint8_t b[4096];
    uint64_t x = 0x9e3779b97f4a7c15u; /* a fixed xorshift stream: the same bytes every run */
    for (size_t i = 0; i < sizeof b; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        b[i] = (uint8_t)(x >> 32);
    }
    /* Neither GZIP's magic nor a ZLIB header, which AUTO would try to inflate. */
    cr_assert(!(b[0] == 0x1f && b[1] == 0x8b) && ((unsigned)b[0] << 8 | b[1]) % 31 != 0, "pick another seed");
    FILE *f = fopen(path, "wb");
    cr_assert_not_null(f);
    cr_assert_eq(fwrite(b, 1, sizeof b, f), sizeof b);
    cr_assert_eq(fclose(f), 0);
    expect_not_tfrecord(path, "");
    tc_rmtree(dir);
    free(dir);
}

Test(cli_data, inspect_gzip_of_other_data_is_not_a_tfrecord)
{
    char *dir = tc_tmpdir();
    char path[512];
    snprintf(path, sizeof path, "%s/table.csv.gz", dir);
    gzFile g = gzopen(path, "wb");
    cr_assert_not_null(g);
    static const char csv[] = "a,b,c\n1,2,3\n4,5,6\n7,8,9\n";
    cr_assert_eq(gzwrite(g, csv, (unsigned)strlen(csv)), (int)strlen(csv));
    cr_assert_eq(gzclose(g), Z_OK);
    /* AUTO finds GZIP; what is wrong is in the decompressed bytes. */
    expect_not_tfrecord(path, " of the decompressed GZIP data");
    tc_rmtree(dir);
    free(dir);
}
