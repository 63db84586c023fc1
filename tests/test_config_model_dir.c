/*
 * test_config_model_dir.c — reusing a model_dir's configuration:
 * tl_config_load_model_dir reads model_dir/config.json (tl_config_to_json's
 * text) as TL_SOURCE_MODEL_DIR, above the defaults and below a file, the
 * environment and flags whatever the order of the calls; the values a
 * higher source makes void go back to their defaults; the errors of a
 * corrupt or unreadable file; tl_config_model_dir_conflicts.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "testutil.h"

TestSuite(model_dir, .init = tu_quiet);

/* A new directory under /tmp (malloc'd). */
static char *new_dir(void)
{
    char tmpl[] = "/tmp/tpuloop-md-XXXXXX";
    cr_assert_not_null(mkdtemp(tmpl));
    return strdup(tmpl);
}

static void remove_dir(char *dir)
{
    char path[600];
    snprintf(path, sizeof path, "%s/config.json", dir);
    unlink(path);
    rmdir(path); /* when a test made it a directory */
    rmdir(dir);
    free(dir);
}

static void write_config(const char *dir, const char *text)
{
    char path[600];
    snprintf(path, sizeof path, "%s/config.json", dir);
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    fputs(text, f);
    fclose(f);
}

/* What the estimator writes: the resolved configuration of the
 * single-quoted JSON, as tl_config_to_json's text, into dir/config.json. */
static void write_resolved(const char *dir, const char *squoted)
{
    tl_config *cfg = tu_from_json(squoted);
    tu_resolve_ok(cfg);
    char *text = NULL;
    cr_assert_eq(tl_config_to_json(cfg, &text), TL_OK);
    write_config(dir, text);
    tl_free_string(text);
    tl_config_destroy(cfg);
}

static void load_ok(tl_config *cfg, const char *dir, bool want_found)
{
    bool found = !want_found;
    tl_status st = tl_config_load_model_dir(cfg, dir, &found);
    cr_assert_eq(st, TL_OK, "load_model_dir(%s): %s", dir, tl_last_error());
    cr_assert_eq(found, want_found, "found");
}

/* dir/config.json described as a source. */
static const char *md_origin(const char *dir)
{
    static char buf[600];
    snprintf(buf, sizeof buf, "model_dir %s/config.json", dir);
    return buf;
}

static char *conflicts(const tl_config *cfg)
{
    char *text = (char *)"sentinel";
    cr_assert_eq(tl_config_model_dir_conflicts(cfg, &text), TL_OK, "%s", tl_last_error());
    return text;
}

Test(model_dir, without_a_config_json_nothing_changes)
{
    char *dir = new_dir();
    tl_config *cfg = tu_new_config();
    tu_set_flag(cfg, "train_batch_size", "8");
    load_ok(cfg, dir, false);
    char missing[600];
    snprintf(missing, sizeof missing, "%s/not-yet", dir);
    load_ok(cfg, missing, false);
    const tl_run_config *rc = tu_resolve_ok(cfg);
    cr_assert_eq(rc->train_batch_size.value, 8);
    tu_source_is(cfg, "eval_batch_size", TL_SOURCE_DEFAULT, "default");
    cr_assert_null(conflicts(cfg), "no model_dir, no conflicts");
    tl_config_destroy(cfg);
    remove_dir(dir);
}

Test(model_dir, its_own_config_json_is_reused)
{
    char *dir = new_dir();
    write_resolved(dir, "{'model_dir': '/where/it/was', 'train_batch_size': 128, 'eval_batch_size': 32,"
                        " 'train_steps': 20, 'tf_random_seed': 5, 'tpu_config': {'iterations_per_loop': '1h',"
                        " 'per_host_input_for_training': 'PER_HOST_V2'}, 'model': {'hidden_units': [16, 8],"
                        " 'learning_rate': 0.05}, 'params': {'num_classes': 3},"
                        " 'input': {'dataset': 'tfrecord', 'files': ['/d/*'], 'features': {'x': {'type':"
                        " 'FixedLenFeature', 'dtype': 'float32', 'shape': [4]}, 'label': {'type': 'FixedLenFeature',"
                        " 'dtype': 'int64'}}, 'shuffle_buffer_size': 64}}");
    tl_config *cfg = tu_new_config();
    load_ok(cfg, dir, true);
    const tl_run_config *rc = tu_resolve_ok(cfg);
    cr_assert_eq(rc->train_batch_size.value, 128);
    cr_assert_eq(rc->eval_batch_size.value, 32);
    cr_assert_eq(rc->train_steps.value, 20);
    cr_assert_eq(rc->tf_random_seed.value, 5);
    cr_assert(rc->tpu.iterations_per_loop.unit == TL_IPL_SECONDS && rc->tpu.iterations_per_loop.value == 3600);
    cr_assert_eq(rc->tpu.per_host_input_for_training, TL_PER_HOST_V2);
    cr_assert(rc->model.num_hidden == 2 && rc->model.hidden_units[1] == 8 && rc->model.learning_rate == 0.05);
    cr_assert_str_eq(rc->params_json, "{\"num_classes\":3}");
    cr_assert_str_eq(rc->input.dataset, "tfrecord");
    cr_assert(rc->input.num_features == 2 && rc->input.shuffle_buffer_size.value == 64);
    cr_assert_null(rc->model_dir, "the key model_dir is never taken from the file");
    tu_source_is(cfg, "model_dir", TL_SOURCE_DEFAULT, "default");
    tu_source_is(cfg, "train_batch_size", TL_SOURCE_MODEL_DIR, md_origin(dir));
    tu_source_is(cfg, "iterations_per_loop", TL_SOURCE_MODEL_DIR, md_origin(dir));
    cr_assert_null(conflicts(cfg), "nothing set above it");
    tl_config_destroy(cfg);
    remove_dir(dir);
}

Test(model_dir, higher_sources_win_in_any_order)
{
    char *dir = new_dir();
    write_resolved(dir, "{'train_batch_size': 128, 'eval_batch_size': 32, 'devices': 2, 'train_steps': 9}");
    char file[] = "/tmp/tpuloop-md-run-XXXXXX";
    tu_write_temp(file, "{\"eval_batch_size\": 16}");
    const char *envp[] = {"TPULOOP_DEVICE_COUNT=4", NULL};
    for (int order = 0; order < 2; order++) {
        tl_config *cfg = tu_new_config();
        if (order == 1)
            load_ok(cfg, dir, true);
        cr_assert_eq(tl_config_load_file(cfg, file), TL_OK);
        tu_apply_env(cfg, envp);
        tu_set_flag(cfg, "train_batch_size", "256");
        if (order == 0)
            load_ok(cfg, dir, true);
        const tl_run_config *rc = tu_resolve_ok(cfg);
        cr_assert_eq(rc->train_batch_size.value, 256, "the flag wins (order %d)", order);
        cr_assert_eq(rc->eval_batch_size.value, 16, "the file wins (order %d)", order);
        cr_assert_eq(rc->devices, 4, "the environment wins (order %d)", order);
        cr_assert_eq(rc->train_steps.value, 9, "the model_dir beats the default (order %d)", order);
        tu_source_is(cfg, "train_batch_size", TL_SOURCE_FLAG, "flag --train_batch_size");
        tu_source_is(cfg, "train_steps", TL_SOURCE_MODEL_DIR, md_origin(dir));
        char *text = conflicts(cfg);
        char want[2000];
        snprintf(want, sizeof want,
                 "train_batch_size: 256 from flag --train_batch_size, %s has 128\n"
                 "eval_batch_size: 16 from file %s, %s has 32\n"
                 "devices: 4 from env TPULOOP_DEVICE_COUNT, %s has 2\n",
                 md_origin(dir), file, md_origin(dir), md_origin(dir));
        cr_assert(text != NULL && strcmp(text, want) == 0, "conflicts (order %d):\n%s\nwant:\n%s", order,
                  text ? text : "(none)", want);
        tl_free_string(text);
        tl_config_destroy(cfg);
    }
    unlink(file);
    remove_dir(dir);
}

Test(model_dir, equal_values_are_no_conflict)
{
    char *dir = new_dir();
    write_resolved(dir, "{'train_batch_size': 128, 'tpu_config': {'iterations_per_loop': '1h'},"
                        " 'model': {'learning_rate': 0.5}}");
    tl_config *cfg = tu_new_config();
    load_ok(cfg, dir, true);
    tu_set_flag(cfg, "train_batch_size", "128");
    tu_set_flag(cfg, "iterations_per_loop", "60m"); /* the same loop written another way */
    tu_set_flag(cfg, "learning_rate", "0.5");
    tu_resolve_ok(cfg);
    cr_assert_null(conflicts(cfg));
    tl_config_destroy(cfg);
    remove_dir(dir);
}

Test(model_dir, a_pair_set_above_drops_the_files_other_half)
{
    /* The file holds the default save_checkpoints_secs 600 and train_steps:
     * a flag's save_checkpoints_steps or max_steps replaces the pair, as in
     * a new run, whatever the order. */
    char *dir = new_dir();
    write_resolved(dir, "{'train_steps': 20, 'embedding_config': '/e.pb'}");
    for (int order = 0; order < 2; order++) {
        tl_config *cfg = tu_new_config();
        if (order == 1)
            load_ok(cfg, dir, true);
        tu_set_flag(cfg, "save_checkpoints_steps", "100");
        tu_set_flag(cfg, "max_steps", "40");
        tu_set_flag(cfg, "embedding", "{\"tables\": []}");
        if (order == 0)
            load_ok(cfg, dir, true);
        const tl_run_config *rc = tu_resolve_ok(cfg);
        cr_assert(rc->save_checkpoints_steps.set && rc->save_checkpoints_steps.value == 100);
        cr_assert_not(rc->save_checkpoints_secs.set, "no default 600 s next to steps");
        cr_assert(rc->max_steps.set && rc->max_steps.value == 40 && !rc->train_steps.set);
        cr_assert_null(rc->embedding_config);
        tu_source_is(cfg, "save_checkpoints_secs", TL_SOURCE_DEFAULT, "default");
        char *text = conflicts(cfg);
        cr_assert(text != NULL && strstr(text, "save_checkpoints_steps: 100 from flag --save_checkpoints_steps") &&
                      strstr(text, "max_steps: 40 from flag --max_steps") && strstr(text, "embedding: "),
                  "%s", text ? text : "(none)");
        tl_free_string(text);
        tl_config_destroy(cfg);
    }
    remove_dir(dir);
}

Test(model_dir, evaluation_master_follows_a_new_master)
{
    char *dir = new_dir();
    write_resolved(dir, "{'master': 'grpc://old'}");
    tl_config *cfg = tu_new_config();
    load_ok(cfg, dir, true);
    tu_set_flag(cfg, "master", "grpc://new");
    const tl_run_config *rc = tu_resolve_ok(cfg);
    cr_assert_str_eq(rc->evaluation_master, "grpc://new");
    tl_config_destroy(cfg);
    /* One given apart from master stays. */
    write_resolved(dir, "{'master': 'grpc://old', 'evaluation_master': 'grpc://eval'}");
    cfg = tu_new_config();
    load_ok(cfg, dir, true);
    tu_set_flag(cfg, "master", "grpc://new");
    cr_assert_str_eq(tu_resolve_ok(cfg)->evaluation_master, "grpc://eval");
    tl_config_destroy(cfg);
    remove_dir(dir);
}

Test(model_dir, another_dataset_drops_the_files_input_section)
{
    char *dir = new_dir();
    write_resolved(dir, "{'input': {'dataset': 'criteo', 'files': ['/d/day_*'], 'vocab_sizes': "
                        "[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,0], 'prefetch': 5}}");
    tl_config *cfg = tu_new_config();
    load_ok(cfg, dir, true);
    tu_set_flag(cfg, "dataset", "criteo_synthetic");
    const tl_run_config *rc = tu_resolve_ok(cfg);
    cr_assert_null(rc->input.files);
    cr_assert_null(rc->input.vocab_sizes);
    cr_assert_eq(rc->input.prefetch, 2, "the whole section goes, to the defaults");
    cr_assert_eq(rc->input.synthetic_examples.value, 1048576);
    tl_config_destroy(cfg);
    /* The same dataset keeps the file's section. */
    cfg = tu_new_config();
    load_ok(cfg, dir, true);
    tu_set_flag(cfg, "dataset", "criteo");
    cr_assert_eq(tu_resolve_ok(cfg)->input.prefetch, 5);
    tl_config_destroy(cfg);
    remove_dir(dir);
}

Test(model_dir, a_bad_value_in_the_file_names_it)
{
    char *dir = new_dir();
    write_config(dir, "{\"train_batch_size\": 0}");
    tl_config *cfg = tu_new_config();
    load_ok(cfg, dir, true);
    char want[700];
    snprintf(want, sizeof want, "train_batch_size must be positive, got 0 [from %s]", md_origin(dir));
    tu_resolve_fails(cfg, TL_EINVAL, want);
    tl_config_destroy(cfg);
    remove_dir(dir);
}

Test(model_dir, corrupt_unreadable_and_unknown)
{
    char *dir = new_dir();
    char path[600], want[700];
    snprintf(path, sizeof path, "%s/config.json", dir);
    tl_config *cfg = tu_new_config();
    tu_set_flag(cfg, "eval_batch_size", "4");
    bool found = true;

    write_config(dir, "{\"train_batch_size\": 12,\n  \"eval_batch_size\": ");
    snprintf(want, sizeof want, "%s:2:", path);
    tu_expect_error(tl_config_load_model_dir(cfg, dir, &found), TL_EPARSE, want, "truncated file");
    cr_assert_not(found);
    tu_expect_error(tl_config_load_model_dir(cfg, dir, NULL), TL_EPARSE, "malformed JSON", "found may be NULL");
    write_config(dir, "[1, 2]");
    tu_expect_error(tl_config_load_model_dir(cfg, dir, &found), TL_EPARSE, "must be a JSON object", "a list");
    write_config(dir, "{\"train_batch_size\": 12, \"train_batch_sise\": 4}");
    tu_expect_error(tl_config_load_model_dir(cfg, dir, &found), TL_EUNKNOWN, "did you mean train_batch_size?",
                    "unknown key");
    tu_expect_error(tl_config_load_model_dir(cfg, path, &found), TL_EIO, "Not a directory", "a file as model_dir");
    unlink(path);
    cr_assert_eq(mkdir(path, 0700), 0);
    snprintf(want, sizeof want, "cannot read %s", path);
    tu_expect_error(tl_config_load_model_dir(cfg, dir, &found), TL_EIO, want, "a directory");
    tu_expect_error(tl_config_load_model_dir(cfg, "", &found), TL_EINVAL, "non-empty", "empty");
    tu_expect_error(tl_config_load_model_dir(cfg, NULL, &found), TL_EINVAL, "non-empty", "NULL");

    /* None of them changed anything. */
    const tl_run_config *rc = tu_resolve_ok(cfg);
    cr_assert_not(rc->train_batch_size.set);
    cr_assert_eq(rc->eval_batch_size.value, 4);
    cr_assert_null(conflicts(cfg));
    tl_config_destroy(cfg);
    remove_dir(dir);
}

Test(model_dir, the_old_iterations_per_loop_object_is_read)
{
    char *dir = new_dir();
    write_config(dir, "{\"tpu_config\": {\"iterations_per_loop\": {\"unit\": \"seconds\", \"value\": 3600}},"
                      " \"train_batch_size\": 64}");
    tl_config *cfg = tu_new_config();
    load_ok(cfg, dir, true);
    const tl_run_config *rc = tu_resolve_ok(cfg);
    cr_assert(rc->tpu.iterations_per_loop.unit == TL_IPL_SECONDS && rc->tpu.iterations_per_loop.value == 3600);
    tl_config_destroy(cfg);
    write_config(dir, "{\"tpu_config\": {\"iterations_per_loop\": {\"unit\": \"count\", \"value\": 7}}}");
    cfg = tu_new_config();
    load_ok(cfg, dir, true);
    rc = tu_resolve_ok(cfg);
    cr_assert(rc->tpu.iterations_per_loop.unit == TL_IPL_COUNT && rc->tpu.iterations_per_loop.value == 7);
    tl_config_destroy(cfg);
    remove_dir(dir);
}

Test(model_dir, a_second_model_dir_replaces_the_first)
{
    char *a = new_dir(), *b = new_dir();
    write_resolved(a, "{'train_batch_size': 128}");
    write_config(b, "{\"eval_batch_size\": 8}");
    tl_config *cfg = tu_new_config();
    load_ok(cfg, a, true);
    load_ok(cfg, b, true);
    const tl_run_config *rc = tu_resolve_ok(cfg);
    cr_assert_not(rc->train_batch_size.set, "a's value went with a");
    cr_assert_eq(rc->eval_batch_size.value, 8);
    tu_source_is(cfg, "eval_batch_size", TL_SOURCE_MODEL_DIR, md_origin(b));
    tl_config_destroy(cfg);
    remove_dir(a);
    remove_dir(b);
}

Test(model_dir, the_source_is_set_only_by_loading)
{
    tl_config *cfg = tu_new_config();
    tu_expect_error(tl_config_set(cfg, "train_batch_size", "8", TL_SOURCE_MODEL_DIR), TL_EINVAL,
                    "tl_config_load_model_dir", "set as model_dir");
    tu_expect_error(tl_config_set(cfg, "train_batch_size", "8", (tl_config_source)9), TL_EINVAL, "source 9",
                    "no source");
    char *text = (char *)"sentinel";
    tu_expect_error(tl_config_model_dir_conflicts(cfg, &text), TL_EINVAL, "not resolved", "before resolve");
    cr_assert_null(text);
    tl_config_destroy(cfg);
}

/* ---- allocation failure ---------------------------------------------------- */

static tl_status oom_model_dir(void *ctx)
{
    const char *dir = ctx;
    tl_config *cfg = NULL;
    char *text = NULL;
    bool found;
    tl_status st = tl_config_create(&cfg);
    if (st == TL_OK)
        st = tl_config_set(cfg, "train_batch_size", "256", TL_SOURCE_FLAG);
    if (st == TL_OK)
        st = tl_config_load_model_dir(cfg, dir, &found);
    if (st == TL_OK)
        st = tl_config_load_model_dir(cfg, dir, &found); /* replacing */
    if (st == TL_OK)
        st = tl_config_set(cfg, "save_checkpoints_steps", "10", TL_SOURCE_FLAG);
    if (st == TL_OK)
        st = tl_config_resolve(cfg);
    if (st == TL_OK)
        st = tl_config_model_dir_conflicts(cfg, &text);
    tl_free_string(text);
    tl_config_destroy(cfg);
    return st;
}

Test(model_dir, every_allocation_can_fail, .timeout = 120)
{
    char *dir = new_dir();
    write_resolved(dir, "{'train_batch_size': 128, 'tpu_config': {'iterations_per_loop': '1h'},"
                        " 'input': {'dataset': 'csv', 'files': 'a.csv', 'csv_columns': [{'name': 'label', 'type':"
                        " 'int64'}]}}");
    tu_oom_sweep(oom_model_dir, dir, "load_model_dir/resolve/conflicts");
    remove_dir(dir);
}
