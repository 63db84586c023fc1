/*
 * test_config_input.c — the "input" section's file datasets: files and
 * eval_files, compression, the tf.Example feature spec, feature_keys and
 * label_key, the pipeline's knobs, Criteo's vocab_sizes, CSV's columns and
 * scale: their defaults, their valid values as resolved and as emitted,
 * every error message, the checks across options that a dataset needs, and
 * unwinding when an allocation fails.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#define N_OF(a) (sizeof(a) / sizeof((a)[0]))

TestSuite(input_cfg, .init = tu_quiet);

/* A tfrecord configuration with a two-feature spec, then `extra` keys of the
 * input section (single-quoted JSON, "" for none). */
static tl_config *tfrecord_cfg(const char *extra)
{
    char text[4096];
    snprintf(text, sizeof text,
             "{'input': {'dataset': 'tfrecord', 'files': ['/d/train-*'],"
             " 'features': {'x': {'type': 'FixedLenFeature', 'dtype': 'float32', 'shape': [4]},"
             " 'label': {'type': 'FixedLenFeature', 'dtype': 'int64', 'shape': []}}%s%s}}",
             extra[0] ? ", " : "", extra);
    return tu_from_json(text);
}

static void tfrecord_fails(const char *extra, tl_status want, const char *fragment)
{
    tl_config *cfg = tfrecord_cfg(extra);
    tu_resolve_fails(cfg, want, fragment);
    tl_config_destroy(cfg);
}

/* The resolved configuration's input section as JSON. */
static json_t *input_json(tl_config *cfg)
{
    tu_resolve_ok(cfg);
    char *text = NULL;
    cr_assert_eq(tl_config_to_json(cfg, &text), TL_OK, "to_json: %s", tl_last_error());
    json_t *root = json_loads(text, 0, NULL);
    tl_free_string(text);
    cr_assert_not_null(root);
    json_t *in = json_incref(json_object_get(root, "input"));
    json_decref(root);
    cr_assert(json_is_object(in), "input section");
    return in;
}

/* ---- defaults ------------------------------------------------------------ */

Test(input_cfg, defaults)
{
    tl_config *cfg = tu_new_config();
    const tl_run_config *rc = tu_resolve_ok(cfg);
    const tl_input_config *in = &rc->input;
    cr_assert_str_eq(in->dataset, "fashion_mnist");
    cr_assert_null(in->files);
    cr_assert_eq(in->num_files, 0);
    cr_assert_null(in->eval_files);
    cr_assert_str_eq(in->compression, "AUTO");
    cr_assert_null(in->features);
    cr_assert_null(in->feature_keys);
    cr_assert_str_eq(in->label_key, "label");
    cr_assert_not(in->shuffle_buffer_size.set);
    cr_assert(in->reshuffle_each_iteration);
    cr_assert_eq(in->cycle_length, 1);
    cr_assert_eq(in->block_length, 1);
    cr_assert_eq(in->num_parallel_calls, 1);
    cr_assert_eq(in->prefetch, 2);
    cr_assert_not(in->skip_corrupt_records);
    cr_assert_null(in->vocab_sizes);
    cr_assert_null(in->csv_columns);
    cr_assert_null(in->label_column);
    cr_assert_eq(in->scale, 1.0);

    json_t *j = input_json(cfg);
    cr_assert(json_is_null(json_object_get(j, "files")));
    cr_assert(json_is_null(json_object_get(j, "eval_files")));
    cr_assert_str_eq(json_string_value(json_object_get(j, "compression")), "AUTO");
    cr_assert(json_is_null(json_object_get(j, "features")));
    cr_assert_str_eq(json_string_value(json_object_get(j, "label_key")), "label");
    cr_assert(json_is_null(json_object_get(j, "shuffle_buffer_size")));
    cr_assert(json_is_true(json_object_get(j, "reshuffle_each_iteration")));
    cr_assert_eq(json_integer_value(json_object_get(j, "prefetch")), 2);
    cr_assert(json_is_false(json_object_get(j, "skip_corrupt_records")));
    cr_assert_eq(json_real_value(json_object_get(j, "scale")), 1.0);
    json_decref(j);
    tl_config_destroy(cfg);
}

/* ---- dataset --------------------------------------------------------------- */

Test(input_cfg, dataset_names)
{
    static const char *const ok[] = {"fashion_mnist", "synthetic"};
    for (size_t i = 0; i < 2; i++) {
        tl_config *cfg = tu_new_config();
        tu_set_flag(cfg, "dataset", ok[i]);
        cr_assert_str_eq(tu_resolve_ok(cfg)->input.dataset, ok[i]);
        tl_config_destroy(cfg);
    }
    tl_config *cfg = tu_new_config();
    tu_set_flag(cfg, "dataset", "parquet");
    tu_resolve_fails(cfg, TL_EINVAL, "dataset must be fashion_mnist");
    cr_assert(strstr(tl_last_error(), "tfrecord") && strstr(tl_last_error(), "criteo") &&
                  strstr(tl_last_error(), "csv") && strstr(tl_last_error(), "idx"),
              "%s", tl_last_error());
    cr_assert(strstr(tl_last_error(), "got parquet [from flag --dataset]"), "%s", tl_last_error());
    tl_config_destroy(cfg);
}

Test(input_cfg, file_datasets_need_files)
{
    static const char *const sets[] = {"tfrecord", "criteo", "csv", "idx"};
    for (size_t i = 0; i < 4; i++) {
        tl_config *cfg = tu_new_config();
        tu_set_flag(cfg, "dataset", sets[i]);
        tu_resolve_fails(cfg, TL_EINVAL, "reads files: set files");
        tl_config_destroy(cfg);
    }
}

Test(input_cfg, file_options_rejected_for_in_memory_datasets)
{
    static const char *const opts[][2] = {
        {"files", "[\"a\"]"},       {"eval_files", "[\"a\"]"},
        {"features", "{\"x\": {\"type\": \"VarLenFeature\", \"dtype\": \"int64\"}}"},
        {"feature_keys", "[\"x\"]"}, {"shuffle_buffer_size", "10"},
        {"csv_columns", "[{\"name\": \"a\", \"type\": \"int64\"}]"}, {"label_column", "a"},
    };
    for (size_t i = 0; i < N_OF(opts); i++) {
        tl_config *cfg = tu_new_config();
        tu_set_flag(cfg, "dataset", "synthetic");
        tu_set_flag(cfg, opts[i][0], opts[i][1]);
        char want[200];
        snprintf(want, sizeof want, "%s is only read by the file datasets (tfrecord, criteo, csv, idx); dataset is "
                 "synthetic", opts[i][0]);
        tu_resolve_fails(cfg, TL_EINVAL, want);
        tl_config_destroy(cfg);
    }
}

/* ---- files and eval_files --------------------------------------------------- */

Test(input_cfg, files_lists_and_lone_strings)
{
    tl_config *cfg = tfrecord_cfg("'eval_files': ['/d/eval-0', '/d/eval-1']");
    const tl_input_config *in = &tu_resolve_ok(cfg)->input;
    cr_assert_eq(in->num_files, 1);
    cr_assert_str_eq(in->files[0], "/d/train-*");
    cr_assert_eq(in->num_eval_files, 2);
    cr_assert_str_eq(in->eval_files[1], "/d/eval-1");
    /* A flag's text that is not JSON is one pattern, emitted as a list. */
    tu_set_flag(cfg, "files", "/data/train-*-of-00008");
    in = &tu_resolve_ok(cfg)->input;
    cr_assert_eq(in->num_files, 1);
    cr_assert_str_eq(in->files[0], "/data/train-*-of-00008");
    json_t *j = input_json(cfg);
    json_t *f = json_object_get(j, "files");
    cr_assert(json_is_array(f) && json_array_size(f) == 1);
    cr_assert_str_eq(json_string_value(json_array_get(f, 0)), "/data/train-*-of-00008");
    cr_assert_eq(json_array_size(json_object_get(j, "eval_files")), 2);
    json_decref(j);
    tl_config_destroy(cfg);
}

Test(input_cfg, files_errors)
{
#define F(files) "{'input': {'dataset': 'criteo', 'files': " files "}}"
    tu_json_fails(F("3"), TL_ETYPE, "files must be null or a JSON list of paths and glob patterns");
    tu_json_fails(F("3"), TL_ETYPE, "got 3 [from file test.json]");
    tu_json_fails(F("[]"), TL_EINVAL, "files must be null or a JSON list");
    tu_json_fails(F("['a', 7]"), TL_ETYPE, "files[1] must be a non-empty string; got 7");
    tu_json_fails(F("['a', '']"), TL_EINVAL, "files[1] must be a non-empty string; got ''");
#undef F
    tfrecord_fails("'eval_files': {'a': 1}", TL_ETYPE, "eval_files must be null (files) or a JSON list");
    tfrecord_fails("'eval_files': [null]", TL_ETYPE, "eval_files[0] must be a non-empty string; got None");
}

/* ---- compression --------------------------------------------------------- */

Test(input_cfg, compression_values)
{
    static const char *const ok[] = {"AUTO", "", "NONE", "GZIP", "ZLIB"};
    for (size_t i = 0; i < 5; i++) {
        tl_config *cfg = tfrecord_cfg("");
        tu_set_flag(cfg, "compression", ok[i]);
        cr_assert_str_eq(tu_resolve_ok(cfg)->input.compression, ok[i]);
        json_t *j = input_json(cfg);
        cr_assert_str_eq(json_string_value(json_object_get(j, "compression")), ok[i]);
        json_decref(j);
        tl_config_destroy(cfg);
    }
    tfrecord_fails("'compression': 'gzip'", TL_EINVAL,
                   "compression must be AUTO (each file by its first bytes), \"\" or NONE, GZIP, ZLIB; got gzip");
    tfrecord_fails("'compression': 1", TL_ETYPE, "compression must be AUTO");
}

/* ---- features ---------------------------------------------------------------- */

Test(input_cfg, features_parsed_sorted_with_defaults)
{
    tl_config *cfg = tu_from_json(
        "{'input': {'dataset': 'tfrecord', 'files': ['f'], 'features': {"
        " 'z': {'type': 'FixedLenFeature', 'dtype': 'float32', 'shape': [2, 2], 'default_value': [1, 2.5, 3, 4]},"
        " 'label': {'type': 'FixedLenFeature', 'dtype': 'int64', 'default_value': 7},"
        " 'tags': {'type': 'VarLenFeature', 'dtype': 'string'},"
        " 'name': {'type': 'FixedLenFeature', 'dtype': 'string', 'shape': [1], 'default_value': 'none'},"
        " 'a': {'type': 'FixedLenFeature', 'dtype': 'int64', 'shape': [3], 'default_value': 0}}}}");
    const tl_input_config *in = &tu_resolve_ok(cfg)->input;
    cr_assert_eq(in->num_features, 5);
    static const char *const order[] = {"a", "label", "name", "tags", "z"};
    for (int i = 0; i < 5; i++)
        cr_assert_str_eq(in->features[i].key, order[i], "features sorted by key");
    const tl_feature_spec *a = &in->features[0], *label = &in->features[1], *name = &in->features[2],
                          *tags = &in->features[3], *z = &in->features[4];
    cr_assert_eq(a->type, TL_SPEC_FIXED_LEN);
    cr_assert_eq(a->dtype, TL_FEATURE_INT64);
    cr_assert_eq(a->rank, 1);
    cr_assert_eq(a->shape[0], 3);
    cr_assert_eq(a->default_count, 1);
    cr_assert_eq(((const int64_t *)a->default_value)[0], 0);
    cr_assert_eq(label->rank, 0, "shape defaults to a scalar");
    cr_assert_eq(((const int64_t *)label->default_value)[0], 7);
    const tl_bytes *nb = name->default_value;
    cr_assert_eq(nb[0].len, 4);
    cr_assert(memcmp(nb[0].data, "none", 4) == 0);
    cr_assert_eq(tags->type, TL_SPEC_VAR_LEN);
    cr_assert_eq(tags->dtype, TL_FEATURE_BYTES);
    cr_assert_null(tags->default_value);
    cr_assert_eq(z->rank, 2);
    cr_assert_eq(z->default_count, 4);
    cr_assert_eq(((const float *)z->default_value)[1], 2.5f);

    /* Emitted in the same form, and loaded back to the same spec. */
    json_t *j = input_json(cfg);
    json_t *f = json_object_get(j, "features");
    json_t *zj = json_object_get(f, "z");
    cr_assert_str_eq(json_string_value(json_object_get(zj, "type")), "FixedLenFeature");
    cr_assert_str_eq(json_string_value(json_object_get(zj, "dtype")), "float32");
    cr_assert_eq(json_array_size(json_object_get(zj, "shape")), 2);
    cr_assert_eq(json_real_value(json_array_get(json_object_get(zj, "default_value"), 1)), 2.5);
    cr_assert(json_is_null(json_object_get(json_object_get(f, "tags"), "shape")) ||
              json_object_get(json_object_get(f, "tags"), "shape") == NULL);
    const char *first;
    void *it = json_object_iter(f);
    first = json_object_iter_key(it);
    cr_assert_str_eq(first, "a", "emitted in key order");
    char *text = json_dumps(f, JSON_COMPACT);
    tl_config *again = tu_new_config();
    tu_set_flag(again, "dataset", "tfrecord");
    tu_set_flag(again, "files", "f");
    tu_set_flag(again, "features", text);
    free(text);
    const tl_input_config *in2 = &tu_resolve_ok(again)->input;
    cr_assert_eq(in2->num_features, 5);
    cr_assert_eq(((const float *)in2->features[4].default_value)[3], 4.0f);
    cr_assert_eq(in2->features[2].default_count, 1);
    json_decref(j);
    tl_config_destroy(again);
    tl_config_destroy(cfg);
}

static void spec_fails(const char *x_spec, tl_status want, const char *fragment)
{
    char extra[1024];
    snprintf(extra, sizeof extra, "'features': {'x': %s, 'label': {'type': 'FixedLenFeature', 'dtype': 'int64'}}",
             x_spec);
    char text[1400];
    snprintf(text, sizeof text, "{'input': {'dataset': 'tfrecord', 'files': ['f'], %s}}", extra);
    tu_json_fails(text, want, fragment);
}

Test(input_cfg, features_errors_name_key_and_field)
{
    tu_json_fails("{'input': {'dataset': 'tfrecord', 'files': ['f'], 'features': 3}}", TL_ETYPE,
                  "features must be null or {key: {\"type\"");
    tu_json_fails("{'input': {'dataset': 'tfrecord', 'files': ['f'], 'features': {}}}", TL_EINVAL,
                  "features must be null or {key:");
    spec_fails("3", TL_ETYPE, "features[\"x\"] must be an object {\"type\", \"dtype\", \"shape\", \"default_value\"}; "
                              "got <class 'int'>");
    spec_fails("{'type': 'FixedLenFeature', 'dtype': 'float32', 'dflt': 1}", TL_EINVAL,
               "features[\"x\"]: unknown field 'dflt' (allowed: type, dtype, shape, default_value)");
    spec_fails("{'dtype': 'float32'}", TL_EINVAL, "features[\"x\"].type is required: FixedLenFeature or VarLenFeature");
    spec_fails("{'type': 'FixedLen', 'dtype': 'float32'}", TL_EINVAL,
               "features[\"x\"].type must be FixedLenFeature or VarLenFeature; got 'FixedLen'");
    spec_fails("{'type': 'FixedLenFeature'}", TL_EINVAL, "features[\"x\"].dtype is required: float32, int64 or string");
    spec_fails("{'type': 'FixedLenFeature', 'dtype': 'float64'}", TL_EINVAL,
               "features[\"x\"].dtype must be float32, int64 or string; got 'float64'");
    spec_fails("{'type': 'FixedLenFeature', 'dtype': 1}", TL_ETYPE, "features[\"x\"].dtype must be float32");
    spec_fails("{'type': 'FixedLenFeature', 'dtype': 'float32', 'shape': 4}", TL_ETYPE,
               "features[\"x\"].shape must be a list of at most 8 ints >= 0; got 4");
    spec_fails("{'type': 'FixedLenFeature', 'dtype': 'float32', 'shape': [1,1,1,1,1,1,1,1,1]}", TL_EINVAL,
               "features[\"x\"].shape must be a list of at most 8 ints");
    spec_fails("{'type': 'FixedLenFeature', 'dtype': 'float32', 'shape': [2, -1]}", TL_EINVAL,
               "features[\"x\"].shape[1] must be an int >= 0; got -1");
    spec_fails("{'type': 'FixedLenFeature', 'dtype': 'float32', 'shape': [2, 'a']}", TL_ETYPE,
               "features[\"x\"].shape[1] must be an int >= 0; got 'a'");
    spec_fails("{'type': 'FixedLenFeature', 'dtype': 'float32', 'shape': [65536, 65536]}", TL_EINVAL,
               "features[\"x\"].shape [65536, 65536] holds more than 2^31 values");
    spec_fails("{'type': 'FixedLenFeature', 'dtype': 'float32', 'shape': [3], 'default_value': [1, 2]}", TL_EINVAL,
               "features[\"x\"].default_value has 2 values; a FixedLenFeature of 3 values takes 1 (for every value) "
               "or 3");
    spec_fails("{'type': 'FixedLenFeature', 'dtype': 'int64', 'default_value': 1.5}", TL_ETYPE,
               "features[\"x\"].default_value must be an int for dtype int64; got 1.5");
    spec_fails("{'type': 'FixedLenFeature', 'dtype': 'float32', 'shape': [2], 'default_value': [1, 'a']}", TL_ETYPE,
               "features[\"x\"].default_value[i] must be a number for dtype float32; got 'a'");
    spec_fails("{'type': 'FixedLenFeature', 'dtype': 'string', 'default_value': 3}", TL_ETYPE,
               "features[\"x\"].default_value must be a string for dtype string; got 3");
    spec_fails("{'type': 'FixedLenFeature', 'dtype': 'float32', 'default_value': 1e39}", TL_EINVAL,
               "features[\"x\"].default_value: 1e+39 is outside float32's range");
    spec_fails("{'type': 'VarLenFeature', 'dtype': 'int64', 'shape': [2]}", TL_EINVAL,
               "features[\"x\"].shape: a VarLenFeature has no shape (got [2])");
    spec_fails("{'type': 'VarLenFeature', 'dtype': 'int64', 'default_value': 0}", TL_EINVAL,
               "features[\"x\"].default_value: a VarLenFeature has no default (got 0)");
    tl_config *cfg = tu_new_config();
    tu_set_flag(cfg, "dataset", "tfrecord");
    tu_set_flag(cfg, "files", "f");
    tu_set_flag(cfg, "features", "{\"\": {\"type\": \"VarLenFeature\", \"dtype\": \"int64\"}}");
    tu_resolve_fails(cfg, TL_EINVAL, "features: a key must be a non-empty string");
    cr_assert(strstr(tl_last_error(), "[from flag --features]"), "%s", tl_last_error());
    tl_config_destroy(cfg);
    cfg = tu_new_config();
    cr_assert_eq(tl_config_set(cfg, "features", "{\"x\": ", TL_SOURCE_FLAG), TL_EPARSE, "malformed JSON flag");
    tl_config_destroy(cfg);
}

Test(input_cfg, tfrecord_needs_features_and_an_int64_label)
{
    tu_json_fails("{'input': {'dataset': 'tfrecord', 'files': ['f']}}", TL_EINVAL, "dataset tfrecord needs features");
    tfrecord_fails("'label_key': 'y'", TL_EINVAL,
                   "label_key 'y' must name a FixedLenFeature of dtype int64 and one value in features (it has no "
                   "such key)");
    tfrecord_fails("'label_key': 'x'", TL_EINVAL, "label_key 'x' must name a FixedLenFeature of dtype int64");
    tu_json_fails("{'input': {'dataset': 'tfrecord', 'files': ['f'], 'features': "
                  "{'label': {'type': 'VarLenFeature', 'dtype': 'int64'}}}}",
                  TL_EINVAL, "label_key 'label' must name a FixedLenFeature");
    tu_json_fails("{'input': {'dataset': 'tfrecord', 'files': ['f'], 'features': "
                  "{'label': {'type': 'FixedLenFeature', 'dtype': 'int64', 'shape': [2]}}}}",
                  TL_EINVAL, "label_key 'label' must name a FixedLenFeature of dtype int64 and one value");
    /* shape [1] is one value too. */
    tl_config *cfg = tu_from_json("{'input': {'dataset': 'tfrecord', 'files': ['f'], 'label_key': 'y', 'features': "
                                  "{'y': {'type': 'FixedLenFeature', 'dtype': 'int64', 'shape': [1]}}}}");
    cr_assert_str_eq(tu_resolve_ok(cfg)->input.label_key, "y");
    tl_config_destroy(cfg);
    tfrecord_fails("'label_key': ''", TL_EINVAL, "label_key must be a non-empty string");
    tfrecord_fails("'label_key': null", TL_ETYPE, "label_key must be a non-empty string");
}

/* ---- feature_keys ------------------------------------------------------------ */

Test(input_cfg, feature_keys)
{
    tl_config *cfg = tfrecord_cfg("'feature_keys': ['x']");
    const tl_input_config *in = &tu_resolve_ok(cfg)->input;
    cr_assert_eq(in->num_feature_keys, 1);
    cr_assert_str_eq(in->feature_keys[0], "x");
    tu_set_flag(cfg, "feature_keys", "x");
    cr_assert_eq(tu_resolve_ok(cfg)->input.num_feature_keys, 1, "a flag's plain name is a list of one");
    tl_config_destroy(cfg);
    tfrecord_fails("'feature_keys': ['x', 'x']", TL_EINVAL, "feature_keys[1] 'x' repeats feature_keys[0]");
    tfrecord_fails("'feature_keys': ['label']", TL_EINVAL,
                   "feature_keys[0] 'label' is the label (label_key): it cannot be a feature too");
    tfrecord_fails("'feature_keys': ['w']", TL_EINVAL, "feature_keys[0] 'w' is not a key of features");
    tfrecord_fails("'feature_keys': 5", TL_ETYPE, "feature_keys must be null or a JSON list of tensor names");
    tfrecord_fails("'feature_keys': [5]", TL_ETYPE, "feature_keys[0] must be a non-empty string; got 5");
    tu_json_fails("{'input': {'dataset': 'tfrecord', 'files': ['f'], 'feature_keys': ['t'], 'features': "
                  "{'t': {'type': 'VarLenFeature', 'dtype': 'float32'},"
                  " 'label': {'type': 'FixedLenFeature', 'dtype': 'int64'}}}}",
                  TL_EINVAL, "feature_keys[0] 't' is a VarLenFeature: a ragged tensor cannot be a model feature");
    tu_json_fails("{'input': {'dataset': 'tfrecord', 'files': ['f'], 'feature_keys': ['s'], 'features': "
                  "{'s': {'type': 'FixedLenFeature', 'dtype': 'string'},"
                  " 'label': {'type': 'FixedLenFeature', 'dtype': 'int64'}}}}",
                  TL_EINVAL, "feature_keys[0] 's' has dtype string: model features must be float32 or int64");
    tu_json_fails("{'input': {'dataset': 'criteo', 'files': ['f'], 'feature_keys': ['ids']}}", TL_EINVAL,
                  "feature_keys[0] 'ids' is not a criteo tensor (dense: float32 (13), C1 .. C26: int64)");
    tu_json_fails("{'input': {'dataset': 'criteo', 'files': ['f'], 'feature_keys': ['dense', 'C27']}}", TL_EINVAL,
                  "feature_keys[1] 'C27' is not a criteo tensor");
    tu_json_fails("{'input': {'dataset': 'idx', 'files': ['i', 'l'], 'feature_keys': ['image']}}", TL_EINVAL,
                  "feature_keys[0] 'image' is not an idx tensor (features)");
}

/* ---- the pipeline's numbers ---------------------------------------------------- */

Test(input_cfg, pipeline_knobs)
{
    tl_config *cfg = tfrecord_cfg("'shuffle_buffer_size': 1000, 'reshuffle_each_iteration': false, "
                                  "'cycle_length': 4, 'block_length': 16, 'num_parallel_calls': 8, 'prefetch': 0");
    tu_set_flag(cfg, "skip_corrupt_records", "true");
    const tl_input_config *in = &tu_resolve_ok(cfg)->input;
    cr_assert(in->shuffle_buffer_size.set);
    cr_assert_eq(in->shuffle_buffer_size.value, 1000);
    cr_assert_not(in->reshuffle_each_iteration);
    cr_assert_eq(in->cycle_length, 4);
    cr_assert_eq(in->block_length, 16);
    cr_assert_eq(in->num_parallel_calls, 8);
    cr_assert_eq(in->prefetch, 0);
    cr_assert(in->skip_corrupt_records);
    json_t *j = input_json(cfg);
    cr_assert_eq(json_integer_value(json_object_get(j, "shuffle_buffer_size")), 1000);
    cr_assert(json_is_false(json_object_get(j, "reshuffle_each_iteration")));
    cr_assert_eq(json_integer_value(json_object_get(j, "cycle_length")), 4);
    cr_assert_eq(json_integer_value(json_object_get(j, "block_length")), 16);
    cr_assert_eq(json_integer_value(json_object_get(j, "num_parallel_calls")), 8);
    cr_assert_eq(json_integer_value(json_object_get(j, "prefetch")), 0);
    cr_assert(json_is_true(json_object_get(j, "skip_corrupt_records")));
    json_decref(j);
    /* A bare boolean flag is true, as every boolean flag. */
    tl_config *c2 = tfrecord_cfg("");
    char *argv[] = {(char *)"--skip_corrupt_records"};
    cr_assert_eq(tl_config_apply_args(c2, 1, argv, NULL, NULL), TL_OK, "%s", tl_last_error());
    cr_assert(tu_resolve_ok(c2)->input.skip_corrupt_records);
    tl_config_destroy(c2);
    tl_config_destroy(cfg);
}

Test(input_cfg, pipeline_knob_errors)
{
    tfrecord_fails("'shuffle_buffer_size': 0", TL_EINVAL, "shuffle_buffer_size must be null (no shuffle) or an int "
                                                          ">= 1; got 0");
    tfrecord_fails("'shuffle_buffer_size': 2.5", TL_ETYPE, "shuffle_buffer_size must be null (no shuffle)");
    tfrecord_fails("'reshuffle_each_iteration': 1", TL_ETYPE, "reshuffle_each_iteration must be true or false; got 1");
    tfrecord_fails("'cycle_length': 0", TL_EINVAL, "cycle_length must be an int in [1, 65536]; got 0");
    tfrecord_fails("'cycle_length': 65537", TL_EINVAL, "cycle_length must be an int in [1, 65536]; got 65537");
    tfrecord_fails("'block_length': 0", TL_EINVAL, "block_length must be an int >= 1; got 0");
    tfrecord_fails("'block_length': '2'", TL_ETYPE, "block_length must be an int >= 1; got 2");
    tfrecord_fails("'num_parallel_calls': 65", TL_EINVAL, "num_parallel_calls must be an int in [1, 64]; got 65");
    tfrecord_fails("'num_parallel_calls': 0", TL_EINVAL, "num_parallel_calls must be an int in [1, 64]; got 0");
    tfrecord_fails("'prefetch': -1", TL_EINVAL, "prefetch must be an int in [0, 1048576]; 0 = no prefetch; got -1");
    tfrecord_fails("'skip_corrupt_records': 'yes'", TL_ETYPE, "skip_corrupt_records must be true or false; got yes");
    tl_config *cfg = tfrecord_cfg("");
    tu_set_flag(cfg, "prefetch", "-3");
    tu_resolve_fails(cfg, TL_EINVAL, "got -3 [from flag --prefetch]");
    tl_config_destroy(cfg);
}

/* ---- criteo ------------------------------------------------------------------- */

Test(input_cfg, criteo_vocab_sizes)
{
    tl_config *cfg = tu_from_json("{'input': {'dataset': 'criteo', 'files': ['day_*'], 'vocab_sizes': "
                                  "[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,0]}}");
    const tl_input_config *in = &tu_resolve_ok(cfg)->input;
    cr_assert_not_null(in->vocab_sizes);
    cr_assert_eq(in->vocab_sizes[0], 1);
    cr_assert_eq(in->vocab_sizes[24], 25);
    cr_assert_eq(in->vocab_sizes[25], 0);
    json_t *j = input_json(cfg);
    cr_assert_eq(json_array_size(json_object_get(j, "vocab_sizes")), 26);
    cr_assert_eq(json_integer_value(json_array_get(json_object_get(j, "vocab_sizes"), 24)), 25);
    json_decref(j);
    tl_config_destroy(cfg);
    cfg = tu_from_json("{'input': {'dataset': 'criteo', 'files': ['day_*']}}");
    cr_assert_null(tu_resolve_ok(cfg)->input.vocab_sizes);
    tl_config_destroy(cfg);
    tu_json_fails("{'input': {'dataset': 'criteo', 'files': ['d'], 'vocab_sizes': [1, 2]}}", TL_EINVAL,
                  "vocab_sizes must be null or a JSON list of 26 ints >= 0 (0: no modulo); got a list of 2");
    tu_json_fails("{'input': {'dataset': 'criteo', 'files': ['d'], 'vocab_sizes': 5}}", TL_ETYPE,
                  "vocab_sizes must be null or a JSON list of 26 ints");
    tu_json_fails("{'input': {'dataset': 'criteo', 'files': ['d'], 'vocab_sizes': "
                  "[1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,-5]}}",
                  TL_EINVAL, "vocab_sizes[25] (C26) must be an int >= 0; got -5");
    tu_json_fails("{'input': {'dataset': 'criteo', 'files': ['d'], 'label_key': 'click'}}", TL_EINVAL,
                  "label_key must be 'label' for dataset criteo (its tensors are label, dense and cat); got 'click'");
    tu_json_fails("{'input': {'dataset': 'criteo', 'files': ['d'], 'features': "
                  "{'label': {'type': 'FixedLenFeature', 'dtype': 'int64'}}}}",
                  TL_EINVAL, "features is only read by dataset tfrecord; dataset is criteo (set it to null)");
    tfrecord_fails("'vocab_sizes': [1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1]", TL_EINVAL,
                   "vocab_sizes is only read by dataset criteo; dataset is tfrecord");
}

/* ---- csv ------------------------------------------------------------------------ */

Test(input_cfg, csv_columns_and_label_column)
{
    tl_config *cfg = tu_from_json("{'input': {'dataset': 'csv', 'files': ['t.csv'], 'label_column': 'y',"
                                  " 'csv_columns': [{'name': 'a', 'type': 'float32'}, {'name': 'n', 'type': 'string'},"
                                  " {'name': 'b', 'type': 'int64'}, {'name': 'y', 'type': 'int64'}]}}");
    const tl_input_config *in = &tu_resolve_ok(cfg)->input;
    cr_assert_eq(in->num_csv_columns, 4);
    cr_assert_str_eq(in->csv_columns[1].name, "n");
    cr_assert_eq(in->csv_columns[0].type, TL_CSV_FLOAT32);
    cr_assert_eq(in->csv_columns[1].type, TL_CSV_STRING);
    cr_assert_eq(in->csv_columns[2].type, TL_CSV_INT64);
    cr_assert_str_eq(in->label_column, "y");
    json_t *j = input_json(cfg);
    json_t *cols = json_object_get(j, "csv_columns");
    cr_assert_eq(json_array_size(cols), 4);
    cr_assert_str_eq(json_string_value(json_object_get(json_array_get(cols, 1), "type")), "string");
    cr_assert_str_eq(json_string_value(json_object_get(j, "label_column")), "y");
    json_decref(j);
    tl_config_destroy(cfg);
    /* Without label_column the label is label_key's column. */
    cfg = tu_from_json("{'input': {'dataset': 'csv', 'files': ['t.csv'],"
                       " 'csv_columns': [{'name': 'a', 'type': 'float32'}, {'name': 'label', 'type': 'int64'}]}}");
    cr_assert_null(tu_resolve_ok(cfg)->input.label_column);
    tl_config_destroy(cfg);
}

Test(input_cfg, csv_errors)
{
#define CSV(cols, extra) "{'input': {'dataset': 'csv', 'files': ['t.csv'], 'csv_columns': " cols extra "}}"
    tu_json_fails("{'input': {'dataset': 'csv', 'files': ['t.csv']}}", TL_EINVAL, "dataset csv needs csv_columns");
    tu_json_fails(CSV("{}", ""), TL_ETYPE, "csv_columns must be null or a JSON list of {\"name\": string");
    tu_json_fails(CSV("[]", ""), TL_EINVAL, "csv_columns must be null or a JSON list");
    tu_json_fails(CSV("[3]", ""), TL_ETYPE, "csv_columns[0] must be an object {\"name\", \"type\"}; got 3");
    tu_json_fails(CSV("[{'name': 'a', 'type': 'int64', 'width': 3}]", ""), TL_EINVAL,
                  "csv_columns[0]: unknown field 'width' (allowed: name, type)");
    tu_json_fails(CSV("[{'type': 'int64'}]", ""), TL_EINVAL, "csv_columns[0].name must be a non-empty string; got nothing");
    tu_json_fails(CSV("[{'name': 4, 'type': 'int64'}]", ""), TL_ETYPE, "csv_columns[0].name must be a non-empty string; got 4");
    tu_json_fails(CSV("[{'name': 'a', 'type': 'double'}]", ""), TL_EINVAL,
                  "csv_columns[0].type (column 'a') must be float32, int64 or string; got 'double'");
    tu_json_fails(CSV("[{'name': 'label', 'type': 'int64'}, {'name': 'label', 'type': 'int64'}]", ""), TL_EINVAL,
                  "csv_columns[1].name 'label' repeats csv_columns[0]");
    tu_json_fails(CSV("[{'name': 'a', 'type': 'float32'}]", ""), TL_EINVAL,
                  "label_key 'label' must name an int64 column of csv_columns (it has no such column)");
    tu_json_fails(CSV("[{'name': 'a', 'type': 'float32'}, {'name': 'label', 'type': 'int64'}]", ", 'label_column': 'a'"),
                  TL_EINVAL, "label_column 'a' must name an int64 column of csv_columns");
    tu_json_fails(CSV("[{'name': 'a', 'type': 'float32'}, {'name': 'label', 'type': 'int64'}]", ", 'label_column': ''"),
                  TL_EINVAL, "label_column must be null (label_key) or the name of an int64 column");
    tu_json_fails(CSV("[{'name': 's', 'type': 'string'}, {'name': 'label', 'type': 'int64'}]",
                      ", 'feature_keys': ['s']"),
                  TL_EINVAL, "feature_keys[0] 's' is a string column: model features must be float32 or int64");
    tu_json_fails(CSV("[{'name': 'a', 'type': 'float32'}, {'name': 'label', 'type': 'int64'}]",
                      ", 'feature_keys': ['b']"),
                  TL_EINVAL, "feature_keys[0] 'b' is not a column of csv_columns");
    tfrecord_fails("'label_column': 'y'", TL_EINVAL, "label_column is only read by dataset csv; dataset is tfrecord");
    tfrecord_fails("'csv_columns': [{'name': 'a', 'type': 'int64'}]", TL_EINVAL,
                   "csv_columns is only read by dataset csv; dataset is tfrecord");
#undef CSV
}

/* ---- idx ------------------------------------------------------------------------ */

Test(input_cfg, idx_files_and_scale)
{
    tl_config *cfg = tu_from_json("{'input': {'dataset': 'idx', 'files': ['img', 'lab'], 'scale': 0.00392156862745098,"
                                  " 'eval_files': ['ti', 'tl']}}");
    const tl_input_config *in = &tu_resolve_ok(cfg)->input;
    cr_assert_eq(in->num_files, 2);
    cr_assert_eq(in->scale, 0.00392156862745098);
    tl_config_destroy(cfg);
    tu_json_fails("{'input': {'dataset': 'idx', 'files': ['img']}}", TL_EINVAL,
                  "files must be [images, labels] (two IDX files) for dataset idx; got 1");
    tu_json_fails("{'input': {'dataset': 'idx', 'files': ['i', 'l'], 'eval_files': ['a', 'b', 'c']}}", TL_EINVAL,
                  "eval_files must be null or [images, labels] (two IDX files) for dataset idx; got 3");
    tu_json_fails("{'input': {'dataset': 'idx', 'files': ['i', 'l'], 'scale': 0}}", TL_EINVAL,
                  "scale must be a finite number > 0 (1/255 = 0.00392156862745098 for pixels 0..255); got 0");
    tu_json_fails("{'input': {'dataset': 'idx', 'files': ['i', 'l'], 'scale': -1.5}}", TL_EINVAL,
                  "scale must be a finite number > 0 (1/255 = 0.00392156862745098 for pixels 0..255); got -1.5");
    tu_json_fails("{'input': {'dataset': 'idx', 'files': ['i', 'l'], 'scale': 'x'}}", TL_ETYPE,
                  "scale must be a finite number > 0 (1/255 = 0.00392156862745098 for pixels 0..255); got x");
    tu_json_fails("{'input': {'dataset': 'idx', 'files': ['i', 'l'], 'scale': 1e300}}", TL_EINVAL,
                  "scale must be a finite number > 0");
}

/* ---- the help and the file keys ----------------------------------------------- */

Test(input_cfg, help_and_file_keys)
{
    static const char *const names[] = {"files", "eval_files", "compression", "features", "feature_keys",
                                        "label_key", "shuffle_buffer_size", "reshuffle_each_iteration",
                                        "cycle_length", "block_length", "num_parallel_calls", "prefetch",
                                        "skip_corrupt_records", "vocab_sizes", "csv_columns", "label_column",
                                        "scale"};
    char *help = NULL;
    cr_assert_eq(tl_config_help(&help), TL_OK);
    for (size_t i = 0; i < N_OF(names); i++) {
        char key[128];
        snprintf(key, sizeof key, "file key: input.%s", names[i]);
        cr_assert_not_null(strstr(help, key), "help lacks %s", key);
        /* The dotted name is a flag too. */
        tl_config *cfg = tu_new_config();
        char dotted[128];
        snprintf(dotted, sizeof dotted, "input.%s", names[i]);
        const char *desc;
        cr_assert_eq(tl_config_source_of(cfg, dotted, NULL, &desc), TL_OK, "%s", dotted);
        tl_config_destroy(cfg);
    }
    tl_free_string(help);
    /* At the top level of a file they belong under "input". */
    tl_config *cfg = tu_new_config();
    tu_expect_error(tu_load_squoted(cfg, "{'shuffle_buffer_size': 4}"), TL_EUNKNOWN, "it belongs under \"input\"",
                    "top-level shuffle_buffer_size");
    tl_config_destroy(cfg);
}

/* ---- allocation failure ------------------------------------------------------- */

static tl_status oom_input(void *ctx)
{
    (void)ctx;
    static const char text[] =
        "{\"input\": {\"dataset\": \"tfrecord\", \"files\": [\"a-*\", \"b\"], \"eval_files\": \"c\","
        " \"feature_keys\": [\"x\", \"z\"], \"shuffle_buffer_size\": 8,"
        " \"features\": {\"x\": {\"type\": \"FixedLenFeature\", \"dtype\": \"float32\", \"shape\": [2],"
        " \"default_value\": [1, 2]}, \"s\": {\"type\": \"FixedLenFeature\", \"dtype\": \"string\","
        " \"default_value\": \"q\"}, \"t\": {\"type\": \"VarLenFeature\", \"dtype\": \"int64\"},"
        " \"z\": {\"type\": \"FixedLenFeature\", \"dtype\": \"int64\", \"default_value\": 3},"
        " \"label\": {\"type\": \"FixedLenFeature\", \"dtype\": \"int64\"}}}}";
    static const char csv[] = "{\"input\": {\"dataset\": \"csv\", \"files\": \"t.csv\", \"csv_columns\":"
                              " [{\"name\": \"a\", \"type\": \"float32\"}, {\"name\": \"label\", \"type\": \"int64\"}]}}";
    tl_config *cfg = NULL;
    char *json = NULL;
    tl_status st = tl_config_create(&cfg);
    if (st == TL_OK)
        st = tl_config_load_json(cfg, text, strlen(text), "in.json");
    if (st == TL_OK)
        st = tl_config_resolve(cfg);
    if (st == TL_OK)
        st = tl_config_to_json(cfg, &json);
    tl_free_string(json);
    json = NULL;
    if (st == TL_OK)
        st = tl_config_load_json(cfg, csv, strlen(csv), "csv.json");
    if (st == TL_OK)
        st = tl_config_set(cfg, "features", "null", TL_SOURCE_FLAG);
    if (st == TL_OK)
        st = tl_config_set(cfg, "feature_keys", "null", TL_SOURCE_FLAG);
    if (st == TL_OK)
        st = tl_config_resolve(cfg);
    if (st == TL_OK)
        st = tl_config_to_json(cfg, &json);
    tl_free_string(json);
    tl_config_destroy(cfg);
    return st;
}

TestSuite(input_oom, .init = tu_quiet, .timeout = 120);

Test(input_oom, resolve_and_emit_every_allocation)
{
    tu_oom_sweep(oom_input, NULL, "input section resolve/to_json");
}
