/* TensorBoard event files: the reader against a file TensorFlow wrote
 * (lingvo's, checked against its .expected.json), the writer's file name and
 * version event, round trips, decoding tpuloop's output with protoc and
 * TensorFlow's own .proto files, unknown fields, corrupt files, write
 * failures and allocation failures. */
#include <errno.h>
#include <fcntl.h>
#include <float.h>
#include <jansson.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/base_int.h"
#include "io/tfrecord.h"
#include "testutil.h"
#include "tpuloop/summary.h"

#define EXTERNAL "../shared/testdata/external"
#define LINGVO_EVENTS EXTERNAL "/lingvo/events.out.tfevents.test"
#define TF_PROTOS EXTERNAL "/tensorflow-protos"

static uint32_t f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

/* A new empty directory under /tmp; the caller removes it with rm_tree. */
static void make_temp_dir(char *dir, size_t cap)
{
    snprintf(dir, cap, "/tmp/tl_events_XXXXXX");
    cr_assert_not_null(mkdtemp(dir));
}

static void rm_tree(const char *dir)
{
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    cr_assert_eq(system(cmd), 0);
}

/* The next event, which must exist. */
static const tl_event *next_ok(tl_summary_reader *r, const char *what)
{
    const tl_event *ev;
    tl_status st = tl_summary_reader_next(r, &ev);
    cr_assert_eq(st, TL_OK, "%s: %s", what, tl_last_error());
    cr_assert_not_null(ev, "%s: the file ended early", what);
    return ev;
}

static void expect_end(tl_summary_reader *r)
{
    const tl_event *ev;
    ASSERT_OK(tl_summary_reader_next(r, &ev));
    cr_assert_null(ev, "an event after the last one");
}

/* Every event of lingvo's file, TensorFlow 1's writer's output from a real
 * training run, matches the JSON decoded with TensorFlow's protos: wall times
 * and steps exactly, tags in order, values to the bit. */
Test(io_events, reads_the_event_file_tensorflow_wrote)
{
    json_error_t jerr;
    json_t *j = json_load_file(LINGVO_EVENTS ".expected.json", 0, &jerr);
    cr_assert_not_null(j, "%s: %s (the external fixtures live in ../shared/testdata/external)", LINGVO_EVENTS,
                       jerr.text);
    json_t *events = json_object_get(j, "events");
    json_t *scalars = json_object_get(j, "scalars");
    json_t *framing = json_object_get(j, "framing");
    cr_assert_eq(json_array_size(events), 361);
    cr_assert_eq(json_array_size(scalars), 2520);

    tl_summary_reader *r;
    ASSERT_OK(tl_summary_reader_open(LINGVO_EVENTS, &r));
    size_t si = 0;
    for (size_t i = 0; i < json_array_size(events); i++) {
        json_t *je = json_array_get(events, i);
        const tl_event *ev = next_ok(r, "lingvo");
        cr_assert_eq(ev->index, i);
        cr_assert_eq((json_int_t)ev->offset, json_integer_value(json_object_get(json_array_get(framing, i), "offset")));
        cr_assert_eq(ev->wall_time, json_real_value(json_object_get(je, "wall_time")), "event %zu wall_time %.17g", i,
                     ev->wall_time);
        cr_assert_eq(ev->step, json_integer_value(json_object_get(je, "step")), "event %zu step", i);
        const char *what = json_string_value(json_object_get(je, "what"));
        if (strcmp(what, "file_version") == 0) {
            cr_assert_eq(ev->kind, TL_EVENT_FILE_VERSION);
            cr_assert_str_eq(ev->file_version, json_string_value(json_object_get(je, "file_version")));
            cr_assert_eq(ev->num_values, 0);
            continue;
        }
        cr_assert_str_eq(what, "summary");
        cr_assert_eq(ev->kind, TL_EVENT_SUMMARY);
        cr_assert_null(ev->file_version);
        json_t *tags = json_object_get(je, "summary_tags");
        cr_assert_eq(ev->num_values, json_array_size(tags), "event %zu", i);
        for (size_t k = 0; k < ev->num_values; k++, si++) {
            const tl_summary_value *v = &ev->values[k];
            json_t *js = json_array_get(scalars, si);
            cr_assert_str_eq(v->tag, json_string_value(json_array_get(tags, k)));
            cr_assert_eq((size_t)json_integer_value(json_object_get(js, "event_index")), i);
            cr_assert_str_eq(v->tag, json_string_value(json_object_get(js, "tag")));
            cr_assert_str_eq(json_string_value(json_object_get(js, "encoding")), "simple_value");
            cr_assert(v->has_simple_value);
            uint32_t want = (uint32_t)strtoul(json_string_value(json_object_get(js, "value_f32_bits")), NULL, 16);
            cr_assert_eq(f32_bits(v->simple_value), want, "event %zu %s: %.9g", i, v->tag, v->simple_value);
            cr_assert_eq((double)v->simple_value, json_real_value(json_object_get(js, "value")));
        }
    }
    cr_assert_eq(si, 2520);
    expect_end(r);
    tl_summary_reader_close(r);
    json_decref(j);
}

/* The last event, as PROVENANCE.md quotes it. */
Test(io_events, lingvo_last_step_values)
{
    tl_summary_reader *r;
    ASSERT_OK(tl_summary_reader_open(LINGVO_EVENTS, &r));
    const tl_event *ev, *last = NULL;
    int count = 0;
    while (tl_summary_reader_next(r, &ev) == TL_OK && ev != NULL) {
        count++;
        if (ev->step == 185200)
            last = ev;
        if (last != NULL)
            break;
    }
    cr_assert_not_null(last);
    cr_assert_eq(count, 361);
    cr_assert_str_eq(last->values[0].tag, "bleu/dev");
    cr_assert_eq(last->values[0].simple_value, 0.2852171063423157f);
    cr_assert_str_eq(last->values[6].tag, "runtime/sentence/sec");
    cr_assert_eq(last->values[6].simple_value, 10.830163955688477f);
    tl_summary_reader_close(r);
}

/* The name is TensorFlow's EventsWriter's, and the file already holds the
 * durable version event, whose wall time is the name's whole seconds. */
Test(io_events, writer_names_the_file_like_tensorflow)
{
    char dir[64];
    make_temp_dir(dir, sizeof dir);
    char sub[128];
    snprintf(sub, sizeof sub, "%s/model/eval", dir); /* parents are made too */
    time_t before = time(NULL);
    tl_summary_writer *w;
    ASSERT_OK(tl_summary_writer_create(sub, &w));
    time_t after = time(NULL);
    char host[256];
    cr_assert_eq(gethostname(host, sizeof host), 0);
    const char *path = tl_summary_writer_path(w);
    long long secs = -1;
    char name_host[256] = "";
    char prefix[160];
    snprintf(prefix, sizeof prefix, "%s/events.out.tfevents.", sub);
    cr_assert_eq(strncmp(path, prefix, strlen(prefix)), 0, "path %s", path);
    const char *tail = path + strlen(prefix);
    cr_assert_eq(strspn(tail, "0123456789"), 10, "ten digits of seconds (%%010lld): %s", tail);
    cr_assert_eq(sscanf(tail, "%lld.%255s", &secs, name_host), 2, "%s", tail);
    cr_assert_str_eq(name_host, host);
    cr_assert(secs >= (long long)before && secs <= (long long)after);

    /* Read while the writer is still open: the version event is on disk. */
    tl_summary_reader *r;
    ASSERT_OK(tl_summary_reader_open(path, &r));
    const tl_event *ev = next_ok(r, "version");
    cr_assert_eq(ev->kind, TL_EVENT_FILE_VERSION);
    cr_assert_str_eq(ev->file_version, "brain.Event:2");
    cr_assert_eq(ev->wall_time, (double)secs);
    cr_assert_eq(ev->step, 0);
    expect_end(r);
    tl_summary_reader_close(r);
    ASSERT_OK(tl_summary_writer_destroy(w));
    ASSERT_OK(tl_summary_writer_destroy(NULL));
    rm_tree(dir);
}

/* A second writer in the same directory never overwrites the first. */
Test(io_events, writers_in_one_directory_never_collide)
{
    char dir[64];
    make_temp_dir(dir, sizeof dir);
    tl_summary_writer *w[3];
    for (int i = 0; i < 3; i++)
        ASSERT_OK(tl_summary_writer_create(dir, &w[i]));
    for (int i = 0; i < 3; i++)
        for (int k = i + 1; k < 3; k++)
            cr_assert_str_neq(tl_summary_writer_path(w[i]), tl_summary_writer_path(w[k]));
    /* Within one second the later ones get ".1", ".2". */
    size_t n0 = strlen(tl_summary_writer_path(w[0]));
    const char *p1 = tl_summary_writer_path(w[1]);
    if (strncmp(p1, tl_summary_writer_path(w[0]), n0) == 0)
        cr_assert_str_eq(p1 + n0, ".1");
    for (int i = 0; i < 3; i++) {
        ASSERT_OK(tl_summary_scalar(w[i], "x", i, (float)i, TL_SUMMARY_NOW));
        ASSERT_OK(tl_summary_writer_destroy(w[i]));
    }
    rm_tree(dir);
}

/* Scalars come back to the bit (NaN, infinities, -0, subnormals), steps and
 * wall times exactly, several values in one event in order, and an empty
 * Summary as an event with no values. */
Test(io_events, round_trip)
{
    char dir[64];
    make_temp_dir(dir, sizeof dir);
    tl_summary_writer *w;
    ASSERT_OK(tl_summary_writer_create(dir, &w));
    const float vals[] = {0.25f, -0.0f, NAN, INFINITY, -INFINITY, FLT_MIN, 1e-45f, FLT_MAX, 3.14159274f};
    const int64_t steps[] = {0, 1, -5, INT64_MAX, INT64_MIN, 1000, 7, 8, 9};
    for (size_t i = 0; i < TL_ARRAY_LEN(vals); i++)
        ASSERT_OK(tl_summary_scalar(w, "loss", steps[i], vals[i], 1534577086.0208557 + (double)i));
    const char *tags[] = {"eval/accuracy", "eval/loss", "m\xc3\xa9trique/\xc3\xbc", "global_step/sec"};
    const float multi[] = {0.91f, 0.27f, 1.5f, 123.25f};
    time_t before = time(NULL);
    ASSERT_OK(tl_summary_scalars(w, 500, TL_SUMMARY_NOW, 4, tags, multi));
    time_t after = time(NULL);
    ASSERT_OK(tl_summary_scalars(w, 501, 0.0, 0, NULL, NULL));
    ASSERT_OK(tl_summary_flush(w));
    char path[256];
    snprintf(path, sizeof path, "%s", tl_summary_writer_path(w));
    ASSERT_OK(tl_summary_writer_destroy(w));

    tl_summary_reader *r;
    ASSERT_OK(tl_summary_reader_open(path, &r));
    const tl_event *ev = next_ok(r, "version");
    cr_assert_eq(ev->kind, TL_EVENT_FILE_VERSION);
    uint64_t offset = ev->offset;
    cr_assert_eq(offset, 0);
    for (size_t i = 0; i < TL_ARRAY_LEN(vals); i++) {
        ev = next_ok(r, "scalar");
        cr_assert_gt(ev->offset, offset);
        offset = ev->offset;
        cr_assert_eq(ev->index, i + 1);
        cr_assert_eq(ev->kind, TL_EVENT_SUMMARY);
        cr_assert_eq(ev->step, steps[i]);
        cr_assert_eq(ev->wall_time, 1534577086.0208557 + (double)i);
        cr_assert_eq(ev->num_values, 1);
        cr_assert_str_eq(ev->values[0].tag, "loss");
        cr_assert(ev->values[0].has_simple_value);
        cr_assert_eq(f32_bits(ev->values[0].simple_value), f32_bits(vals[i]), "value %zu", i);
    }
    ev = next_ok(r, "multi");
    cr_assert_eq(ev->step, 500);
    cr_assert(ev->wall_time >= (double)before && ev->wall_time < (double)after + 1.0, "now: %f", ev->wall_time);
    cr_assert_eq(ev->num_values, 4);
    for (size_t k = 0; k < 4; k++) {
        cr_assert_str_eq(ev->values[k].tag, tags[k]);
        cr_assert_eq(ev->values[k].simple_value, multi[k]);
    }
    ev = next_ok(r, "empty");
    cr_assert_eq(ev->kind, TL_EVENT_SUMMARY);
    cr_assert_eq(ev->step, 501);
    cr_assert_eq(ev->wall_time, 0.0);
    cr_assert_eq(ev->num_values, 0);
    expect_end(r);
    tl_summary_reader_close(r);
    rm_tree(dir);
}

Test(io_events, bad_arguments_are_named)
{
    char dir[64];
    make_temp_dir(dir, sizeof dir);
    tl_summary_writer *w;
    ASSERT_ERR(tl_summary_writer_create("", &w), TL_EINVAL, "summary directory: must be a path");
    cr_assert_null(w);
    ASSERT_ERR(tl_summary_writer_create(NULL, &w), TL_EINVAL, "summary directory");
    char file[128];
    snprintf(file, sizeof file, "%s/plain", dir);
    FILE *f = fopen(file, "w");
    cr_assert_not_null(f);
    fclose(f);
    ASSERT_ERR(tl_summary_writer_create(file, &w), TL_EIO, "not a directory");
    cr_assert(strstr(tl_last_error(), file), "%s", tl_last_error());
    char below[160];
    snprintf(below, sizeof below, "%s/sub", file);
    ASSERT_ERR(tl_summary_writer_create(below, &w), TL_EIO, "cannot create");

    ASSERT_OK(tl_summary_writer_create(dir, &w));
    const char *path = tl_summary_writer_path(w);
    ASSERT_ERR(tl_summary_scalar(w, NULL, 1, 1.0f, TL_SUMMARY_NOW), TL_EINVAL, "summary tag 0 must be a non-empty");
    cr_assert(strstr(tl_last_error(), path), "the message names the file: %s", tl_last_error());
    ASSERT_ERR(tl_summary_scalar(w, "", 1, 1.0f, TL_SUMMARY_NOW), TL_EINVAL, "summary tag 0");
    const char *bad_utf8[] = {"\xff", "a\xc3", "\xc0\xaf", "\xed\xa0\x80", "\xf4\x90\x80\x80", "\xe2\x82"};
    for (size_t i = 0; i < TL_ARRAY_LEN(bad_utf8); i++) {
        const char *tags[] = {"ok", bad_utf8[i]};
        const float v[] = {1, 2};
        ASSERT_ERR(tl_summary_scalars(w, 1, TL_SUMMARY_NOW, 2, tags, v), TL_EINVAL, "summary tag 1 is not valid UTF-8");
    }
    ASSERT_ERR(tl_summary_scalar(w, "x", 1, 1.0f, NAN), TL_EINVAL, "wall_time");
    ASSERT_ERR(tl_summary_scalar(w, "x", 1, 1.0f, INFINITY), TL_EINVAL, "wall_time");
    ASSERT_ERR(tl_summary_scalar(w, "x", 1, 1.0f, -2.0), TL_EINVAL, "wall_time");
    /* Rejected events leave nothing behind. */
    ASSERT_OK(tl_summary_scalar(w, "\xf0\x9f\x98\x80", 1, 1.0f, TL_SUMMARY_NOW));
    char saved[256];
    snprintf(saved, sizeof saved, "%s", path);
    ASSERT_OK(tl_summary_writer_destroy(w));
    tl_summary_reader *r;
    ASSERT_OK(tl_summary_reader_open(saved, &r));
    int count = 0;
    const tl_event *ev;
    while (tl_summary_reader_next(r, &ev) == TL_OK && ev != NULL)
        count++;
    cr_assert_eq(count, 2, "the version event and the one good scalar");
    tl_summary_reader_close(r);
    rm_tree(dir);
}

/* protoc's text form of the record data[0..n) as a tensorflow.Event, decoded
 * with TensorFlow's own event.proto (not tpuloop's subset). */
static char *protoc_decode(const uint8_t *data, size_t n, const char *dir)
{
    cr_assert_eq(system("command -v protoc >/dev/null 2>&1"), 0,
                 "protoc is missing: scripts/install-deps installs it (Debian package protobuf-compiler)");
    char in[160], out[160], cmd[800];
    snprintf(in, sizeof in, "%s/record.bin", dir);
    snprintf(out, sizeof out, "%s/record.txt", dir);
    FILE *f = fopen(in, "wb");
    cr_assert_not_null(f);
    cr_assert_eq(fwrite(data, 1, n, f), n);
    fclose(f);
    snprintf(cmd, sizeof cmd, "protoc --decode=tensorflow.Event -I %s tensorflow/core/util/event.proto < %s > %s 2>&1",
             TF_PROTOS, in, out);
    int rc = system(cmd);
    f = fopen(out, "rb");
    cr_assert_not_null(f);
    static char text[4096];
    size_t k = fread(text, 1, sizeof text - 1, f);
    text[k] = '\0';
    fclose(f);
    cr_assert_eq(rc, 0, "protoc failed: %s", text);
    return text;
}

/* tpuloop's event file is TensorFlow's: every record decodes with protoc and
 * TensorFlow's .proto files to exactly the expected Event, with no unknown
 * fields. */
Test(io_events, tensorflow_protos_decode_what_tpuloop_writes)
{
    char dir[64];
    make_temp_dir(dir, sizeof dir);
    tl_summary_writer *w;
    ASSERT_OK(tl_summary_writer_create(dir, &w));
    ASSERT_OK(tl_summary_scalar(w, "loss", 7, 0.25f, 1600000000.5));
    const char *tags[] = {"accuracy", "global_step/sec"};
    const float v[] = {0.5f, -3.0f};
    ASSERT_OK(tl_summary_scalars(w, 1234567890123LL, 1600000001.25, 2, tags, v));
    ASSERT_OK(tl_summary_scalar(w, "zero", 0, 0.0f, 1600000002.0));
    char path[256];
    snprintf(path, sizeof path, "%s", tl_summary_writer_path(w));
    ASSERT_OK(tl_summary_writer_destroy(w));
    long long secs = 0;
    cr_assert_eq(sscanf(strrchr(path, '/'), "/events.out.tfevents.%lld", &secs), 1);

    char want0[128];
    snprintf(want0, sizeof want0, "wall_time: %lld\nfile_version: \"brain.Event:2\"\n", secs);
    const char *want[] = {
        want0,
        "wall_time: 1600000000.5\nstep: 7\nsummary {\n  value {\n    tag: \"loss\"\n    simple_value: 0.25\n  }\n}\n",
        "wall_time: 1600000001.25\nstep: 1234567890123\nsummary {\n  value {\n    tag: \"accuracy\"\n"
        "    simple_value: 0.5\n  }\n  value {\n    tag: \"global_step/sec\"\n    simple_value: -3\n  }\n}\n",
        /* a zero simple_value is still written: it is a oneof member */
        "wall_time: 1600000002\nsummary {\n  value {\n    tag: \"zero\"\n    simple_value: 0\n  }\n}\n",
    };
    tl_tfrecord_reader *r;
    ASSERT_OK(tl_tfrecord_reader_open(path, &r));
    for (size_t i = 0; i < TL_ARRAY_LEN(want); i++) {
        const uint8_t *rec;
        size_t len;
        ASSERT_OK(tl_tfrecord_next(r, &rec, &len));
        cr_assert_not_null(rec);
        cr_assert_str_eq(protoc_decode(rec, len, dir), want[i], "record %zu", i);
    }
    const uint8_t *rec;
    size_t len;
    ASSERT_OK(tl_tfrecord_next(r, &rec, &len));
    cr_assert_null(rec);
    tl_tfrecord_reader_destroy(r);
    rm_tree(dir);
}

/* SessionLogs as TensorFlow's hooks write them: they decode with
 * TensorFlow's event.proto to exactly its SessionLog (status by name,
 * checkpoint_path, msg), and tpuloop's reader gives them back. */
Test(io_events, session_logs_are_tensorflows)
{
    char dir[64];
    make_temp_dir(dir, sizeof dir);
    tl_summary_writer *w;
    ASSERT_OK(tl_summary_writer_create(dir, &w));
    ASSERT_OK(tl_summary_session_log(w, 101, TL_SESSION_START, NULL, NULL, 1600000000.5));
    ASSERT_OK(tl_summary_session_log(w, 100, TL_SESSION_CHECKPOINT, "/m/model.ckpt", NULL, 1600000001.0));
    ASSERT_OK(tl_summary_session_log(w, 300, TL_SESSION_STOP, "", "m\xc3\xa9ssage", 1600000002.0));
    ASSERT_ERR(tl_summary_session_log(w, 1, TL_SESSION_STATUS_UNSPECIFIED, NULL, NULL, TL_SUMMARY_NOW), TL_EINVAL,
               "session log status must be TL_SESSION_START, TL_SESSION_STOP or TL_SESSION_CHECKPOINT, got 0");
    ASSERT_ERR(tl_summary_session_log(w, 1, (tl_session_status)9, NULL, NULL, TL_SUMMARY_NOW), TL_EINVAL, "got 9");
    ASSERT_ERR(tl_summary_session_log(w, 1, TL_SESSION_CHECKPOINT, "\xff", NULL, TL_SUMMARY_NOW), TL_EINVAL,
               "session log checkpoint_path is not valid UTF-8");
    ASSERT_ERR(tl_summary_session_log(w, 1, TL_SESSION_START, NULL, "\xc3", TL_SUMMARY_NOW), TL_EINVAL,
               "session log msg is not valid UTF-8");
    ASSERT_ERR(tl_summary_session_log(w, 1, TL_SESSION_START, NULL, NULL, NAN), TL_EINVAL, "wall_time");
    char path[256];
    snprintf(path, sizeof path, "%s", tl_summary_writer_path(w));
    ASSERT_OK(tl_summary_writer_destroy(w));

    const char *want[] = {
        "wall_time: 1600000000.5\nstep: 101\nsession_log {\n  status: START\n}\n",
        "wall_time: 1600000001\nstep: 100\nsession_log {\n  status: CHECKPOINT\n  checkpoint_path: \"/m/model.ckpt\"\n}\n",
        "wall_time: 1600000002\nstep: 300\nsession_log {\n  status: STOP\n  msg: \"m\\303\\251ssage\"\n}\n",
    };
    tl_tfrecord_reader *rr;
    ASSERT_OK(tl_tfrecord_reader_open(path, &rr));
    const uint8_t *rec;
    size_t len;
    ASSERT_OK(tl_tfrecord_next(rr, &rec, &len)); /* the version */
    for (size_t i = 0; i < TL_ARRAY_LEN(want); i++) {
        ASSERT_OK(tl_tfrecord_next(rr, &rec, &len));
        cr_assert_not_null(rec);
        cr_assert_str_eq(protoc_decode(rec, len, dir), want[i], "record %zu", i + 1);
    }
    ASSERT_OK(tl_tfrecord_next(rr, &rec, &len));
    cr_assert_null(rec, "the rejected ones left nothing");
    tl_tfrecord_reader_destroy(rr);

    tl_summary_reader *r;
    ASSERT_OK(tl_summary_reader_open(path, &r));
    const tl_event *ev = next_ok(r, "version");
    cr_assert_eq(ev->kind, TL_EVENT_FILE_VERSION);
    cr_assert_null(ev->checkpoint_path);
    ev = next_ok(r, "start");
    cr_assert_eq(ev->kind, TL_EVENT_SESSION_LOG);
    cr_assert_eq(ev->step, 101);
    cr_assert_eq(ev->wall_time, 1600000000.5);
    cr_assert_eq(ev->session_status, TL_SESSION_START);
    cr_assert_str_eq(ev->checkpoint_path, "");
    cr_assert_str_eq(ev->session_msg, "");
    cr_assert_eq(ev->num_values, 0);
    ev = next_ok(r, "checkpoint");
    cr_assert_eq(ev->session_status, TL_SESSION_CHECKPOINT);
    cr_assert_eq(ev->step, 100);
    cr_assert_str_eq(ev->checkpoint_path, "/m/model.ckpt");
    ev = next_ok(r, "stop");
    cr_assert_eq(ev->session_status, TL_SESSION_STOP);
    cr_assert_str_eq(ev->session_msg, "m\xc3\xa9ssage");
    expect_end(r);
    tl_summary_reader_close(r);
    rm_tree(dir);
}

/* Writes the given records as a TFRecord file at path. */
static void write_records(const char *path, size_t n, const char *const *recs, const size_t *lens)
{
    tl_tfrecord_writer *w;
    ASSERT_OK(tl_tfrecord_writer_open(path, O_CREAT | O_TRUNC, &w));
    for (size_t i = 0; i < n; i++)
        ASSERT_OK(tl_tfrecord_write(w, recs[i], lens[i]));
    ASSERT_OK(tl_tfrecord_writer_destroy(w));
}

/* Fields tpuloop does not declare are skipped: a graph_def event, newer
 * TensorFlow's source_metadata (field 10), a Value's tensor (field 8) and
 * metadata (field 9). */
Test(io_events, unknown_fields_are_skipped)
{
    char dir[64];
    make_temp_dir(dir, sizeof dir);
    char path[128];
    snprintf(path, sizeof path, "%s/events.out.tfevents.hand", dir);
    /* wall_time 1.0 (field 1, fixed64), step 3 (field 2, varint) */
#define WT1 "\x09\x00\x00\x00\x00\x00\x00\xf0\x3f"
    const char graph[] = WT1 "\x10\x03" "\x22\x03" "abc";
    const char version[] = WT1 "\x1a\x0d" "brain.Event:2" "\x52\x08\x0a\x06" "writer";
    /* summary { value { tag "t" tensor {...} } value { tag "s" simple 2.0 metadata {} } } */
    const char summ[] = WT1 "\x10\x03" "\x2a\x17"
                        "\x0a\x07" "\x0a\x01t" "\x42\x02\x08\x01"
                        "\x0a\x0c" "\x0a\x01s" "\x15\x00\x00\x00\x40" "\x4a\x00" "\x3a\x00";
    const char *recs[] = {version, graph, summ};
    const size_t lens[] = {sizeof version - 1, sizeof graph - 1, sizeof summ - 1};
    write_records(path, 3, recs, lens);

    tl_summary_reader *r;
    ASSERT_OK(tl_summary_reader_open(path, &r));
    const tl_event *ev = next_ok(r, "version");
    cr_assert_eq(ev->kind, TL_EVENT_FILE_VERSION);
    cr_assert_str_eq(ev->file_version, "brain.Event:2");
    cr_assert_eq(ev->wall_time, 1.0);
    ev = next_ok(r, "graph");
    cr_assert_eq(ev->kind, TL_EVENT_OTHER);
    cr_assert_eq(ev->step, 3);
    cr_assert_null(ev->file_version);
    cr_assert_eq(ev->num_values, 0);
    ev = next_ok(r, "summary");
    cr_assert_eq(ev->kind, TL_EVENT_SUMMARY);
    cr_assert_eq(ev->num_values, 2);
    cr_assert_str_eq(ev->values[0].tag, "t");
    cr_assert_not(ev->values[0].has_simple_value);
    cr_assert_eq(ev->values[0].simple_value, 0.0f);
    cr_assert_str_eq(ev->values[1].tag, "s");
    cr_assert(ev->values[1].has_simple_value);
    cr_assert_eq(ev->values[1].simple_value, 2.0f);
    expect_end(r);
    tl_summary_reader_close(r);
    rm_tree(dir);
}

/* A record whose framing is sound but whose bytes are no Event, and a
 * truncated file: both name the file and the offset, and stick. */
Test(io_events, corrupt_files_are_named)
{
    char dir[64];
    make_temp_dir(dir, sizeof dir);
    char path[128];
    snprintf(path, sizeof path, "%s/events.out.tfevents.bad", dir);
    const char version[] = "\x1a\x0d" "brain.Event:2";
    const char garbage[] = "\x0a\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01";
    const char *recs[] = {version, garbage};
    const size_t lens[] = {sizeof version - 1, sizeof garbage - 1};
    write_records(path, 2, recs, lens);
    tl_summary_reader *r;
    ASSERT_OK(tl_summary_reader_open(path, &r));
    next_ok(r, "version");
    const tl_event *ev;
    char where[64];
    snprintf(where, sizeof where, "record 1 at byte offset %zu", sizeof version - 1 + 16);
    ASSERT_ERR(tl_summary_reader_next(r, &ev), TL_EPARSE, "are not a tensorflow.Event");
    cr_assert(strstr(tl_last_error(), where) && strstr(tl_last_error(), path), "%s", tl_last_error());
    cr_assert_null(ev);
    ASSERT_ERR(tl_summary_reader_next(r, &ev), TL_EPARSE, "are not a tensorflow.Event");
    tl_summary_reader_close(r);

    /* lingvo's file cut inside its third record */
    FILE *f = fopen(LINGVO_EVENTS, "rb");
    cr_assert_not_null(f);
    static uint8_t buf[600];
    cr_assert_eq(fread(buf, 1, sizeof buf, f), sizeof buf);
    fclose(f);
    ASSERT_OK(tl_summary_reader_open_memory(buf, 300, "cut.tfevents", &r));
    next_ok(r, "0");
    next_ok(r, "1");
    ASSERT_ERR(tl_summary_reader_next(r, &ev), TL_EPARSE, "cut.tfevents: record 2 at byte offset 262");
    cr_assert(strstr(tl_last_error(), "runs past the end of the file"), "%s", tl_last_error());
    ASSERT_ERR(tl_summary_reader_next(r, &ev), TL_EPARSE, "runs past the end of the file");
    tl_summary_reader_close(r);
    tl_summary_reader_close(NULL);

    ASSERT_ERR(tl_summary_reader_open("/nonexistent/events.out.tfevents.1", &r), TL_EIO,
               "/nonexistent/events.out.tfevents.1");
    cr_assert_null(r);
    rm_tree(dir);
}

/* A full disk (here the file-size limit) fails the flush with the file's
 * name; the writer stays failed, and destroy reports it. */
Test(io_events, write_failure_sticks)
{
    char dir[64];
    make_temp_dir(dir, sizeof dir);
    tl_summary_writer *w;
    ASSERT_OK(tl_summary_writer_create(dir, &w));
    signal(SIGXFSZ, SIG_IGN);
    struct rlimit lim = {4096, 4096};
    cr_assert_eq(setrlimit(RLIMIT_FSIZE, &lim), 0);
    tl_status st = TL_OK;
    for (int i = 0; i < 1000 && st == TL_OK; i++)
        st = tl_summary_scalar(w, "loss", i, 1.0f, TL_SUMMARY_NOW);
    if (st == TL_OK)
        st = tl_summary_flush(w);
    cr_assert_eq(st, TL_EIO, "%s", tl_last_error());
    cr_assert(strstr(tl_last_error(), tl_summary_writer_path(w)) && strstr(tl_last_error(), strerror(EFBIG)), "%s",
              tl_last_error());
    ASSERT_ERR(tl_summary_scalar(w, "loss", 1, 1.0f, TL_SUMMARY_NOW), TL_EIO, "write failed");
    ASSERT_ERR(tl_summary_flush(w), TL_EIO, "write failed");
    ASSERT_ERR(tl_summary_writer_destroy(w), TL_EIO, "write failed");
    rm_tree(dir);
}

static int oom_run;

static tl_status oom_writer(void *ctx)
{
    char sub[128];
    snprintf(sub, sizeof sub, "%s/run%d", (const char *)ctx, oom_run++);
    tl_summary_writer *w;
    tl_status st = tl_summary_writer_create(sub, &w);
    if (st != TL_OK)
        return st;
    const char *tags[] = {"a", "b", "c"};
    const float v[] = {1, 2, 3};
    st = tl_summary_scalars(w, 3, 1.0, 3, tags, v);
    if (st == TL_OK)
        st = tl_summary_scalar(w, "loss", 4, 0.5f, TL_SUMMARY_NOW);
    tl_status st2 = tl_summary_writer_destroy(w);
    return st != TL_OK ? st : st2;
}

static tl_status oom_reader(void *ctx)
{
    (void)ctx;
    tl_summary_reader *r;
    tl_status st = tl_summary_reader_open(LINGVO_EVENTS, &r);
    if (st != TL_OK)
        return st;
    const tl_event *ev;
    for (int i = 0; i < 3 && st == TL_OK; i++)
        st = tl_summary_reader_next(r, &ev);
    tl_summary_reader_close(r);
    return st;
}

Test(io_events, allocation_failures_unwind)
{
    char dir[64];
    make_temp_dir(dir, sizeof dir);
    tu_oom_sweep(oom_writer, dir, "summary writer");
    tu_oom_sweep(oom_reader, NULL, "summary reader");
    rm_tree(dir);
}
