/*
 * test_config_json.c — configuration as JSON: files and their errors (origin,
 * line and column), tl_config_to_json, tl_config_help, and unwinding when any
 * allocation fails. Where values come from is in test_config_sources.c.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"

/* ---- JSON files ---------------------------------------------------------- */

TestSuite(json, .init = tu_quiet);

Test(json, tpu_config_fields_nest)
{
    tl_config *cfg = tu_new_config();
    tu_load(cfg, "{'model_dir': '/tmp/m', 'train_batch_size': 1024,"
                 " 'tpu_config': {'iterations_per_loop': '1h', 'num_cores_per_replica': 2}}");
    const tl_run_config *rc = tu_resolve_ok(cfg);
    cr_assert_str_eq(rc->model_dir, "/tmp/m", "model_dir");
    cr_assert_eq(rc->train_batch_size.value, 1024, "train_batch_size");
    cr_assert_eq(rc->tpu.iterations_per_loop.value, 3600, "1h");
    cr_assert_eq(rc->tpu.num_cores_per_replica.value, 2, "ncpr");
    tl_config_destroy(cfg);
}

Test(json, tpu_field_at_top_level_asks_to_nest_it)
{
    tl_config *cfg = tu_new_config();
    tl_status st = tu_load_squoted(cfg, "{'num_shards': 2}");
    tu_expect_error(st, TL_EUNKNOWN, "num_shards", "top-level num_shards");
    cr_assert_not_null(strstr(tl_last_error(), "tpu_config"), "no hint to nest it: %s", tl_last_error());
    cr_assert_not_null(strstr(tl_last_error(), "test.json"), "no origin: %s", tl_last_error());
    tl_config_destroy(cfg);
}

Test(json, run_config_field_inside_tpu_config_rejected)
{
    tl_config *cfg = tu_new_config();
    tu_expect_error(tu_load_squoted(cfg, "{'tpu_config': {'model_dir': '/x'}}"), TL_EUNKNOWN, "model_dir",
                    "tpu_config.model_dir");
    tl_config_destroy(cfg);
}

Test(json, unknown_keys_named)
{
    tl_config *cfg = tu_new_config();
    tu_expect_error(tu_load_squoted(cfg, "{'model_dir': '/x', 'bogus_key': 1}"), TL_EUNKNOWN, "bogus_key", "bogus_key");
    tu_expect_error(tu_load_squoted(cfg, "{'tpu_config': {'bogus_nested': 1}}"), TL_EUNKNOWN, "tpu_config.bogus_nested",
                    "tpu_config.bogus_nested");
    tl_config_destroy(cfg);
}

Test(json, tpu_config_not_an_object_is_type_error)
{
    tl_config *cfg = tu_new_config();
    tu_expect_error(tu_load_squoted(cfg, "{'tpu_config': 3}"), TL_ETYPE, "tpu_config", "tpu_config 3");
    tu_expect_error(tu_load_squoted(cfg, "{'tpu_config': [1]}"), TL_ETYPE, "tpu_config", "tpu_config [1]");
    tl_config_destroy(cfg);
}

Test(json, malformed_gives_origin_line_column)
{
    /* The comma after 2 is missing; jansson stops at the end of the next
     * token, "c", which ends on line 3, column 12. */
    static const char text[] = "{\n  \"a\": 1,\n  \"b\": 2 \"c\": 3\n}\n";
    tl_config *cfg = tu_new_config();
    tu_expect_error(tl_config_load_json(cfg, text, strlen(text), "test.json"), TL_EPARSE, "test.json:3:12",
                    "missing comma");
    static const char text2[] = "{\n  \"model_dir\": \"/tmp/m\",\n  \"train_batch_size\": 8\n  \"eval_batch_size\": 4\n}\n";
    tu_expect_error(tl_config_load_json(cfg, text2, strlen(text2), "run.json"), TL_EPARSE, "run.json:4:",
                    "missing comma at the end of line 3");
    tl_config_destroy(cfg);
}

Test(json, duplicate_keys_rejected)
{
    tl_config *cfg = tu_new_config();
    tu_expect_error(tu_load_squoted(cfg, "{'train_batch_size': 1, 'train_batch_size': 2}"), TL_EPARSE, "test.json:1:",
                    "duplicate top-level key");
    cr_assert_not_null(strstr(tl_last_error(), "duplicate"), "message: %s", tl_last_error());
    tu_expect_error(tu_load_squoted(cfg, "{'tpu_config': {'num_shards': 1, 'num_shards': 2}}"), TL_EPARSE, "duplicate",
                    "duplicate nested key");
    tl_config_destroy(cfg);
}

Test(json, empty_or_trailing_text_rejected)
{
    tl_config *cfg = tu_new_config();
    tu_expect_error(tu_load_squoted(cfg, ""), TL_EPARSE, "test.json", "empty text");
    tu_expect_error(tu_load_squoted(cfg, "{} {}"), TL_EPARSE, "test.json", "trailing text");
    tu_expect_error(tu_load_squoted(cfg, "3"), TL_EPARSE, "test.json", "a bare number");
    tl_config_destroy(cfg);
}

Test(json, top_level_array_rejected)
{
    tl_config *cfg = tu_new_config();
    tu_expect_error(tu_load_squoted(cfg, "[1, 2]"), TL_EPARSE, "test.json", "top-level array");
    cr_assert_not_null(strstr(tl_last_error(), "<class 'list'>"), "message: %s", tl_last_error());
    tl_config_destroy(cfg);
}

Test(json, bad_file_changes_nothing)
{
    tl_config *cfg = tu_new_config();
    tu_load(cfg, "{'train_batch_size': 8}");
    /* The first key is fine and the second unknown: the first must not apply. */
    cr_assert_eq(tu_load_squoted(cfg, "{'train_batch_size': 16, 'eval_batch_size': 4, 'no_such_key': 1}"), TL_EUNKNOWN,
                 "%s", tl_last_error());
    cr_assert_eq(tu_load_squoted(cfg, "{'train_batch_size': 32, 'tpu_config': {'no_such_key': 1}}"), TL_EUNKNOWN, "%s",
                 tl_last_error());
    cr_assert_eq(tu_load_squoted(cfg, "{'train_batch_size': 64, 'tpu_config': 7}"), TL_ETYPE, "%s", tl_last_error());
    const tl_run_config *rc = tu_resolve_ok(cfg);
    cr_assert_eq(rc->train_batch_size.value, 8, "a rejected file changed train_batch_size to %lld",
                 (long long)rc->train_batch_size.value);
    cr_assert_not(rc->eval_batch_size.set, "a rejected file set eval_batch_size");
    tu_source_is(cfg, "eval_batch_size", TL_SOURCE_DEFAULT, "default");
    tl_config_destroy(cfg);
}

Test(json, values_type_checked_at_resolve_in_tensorflow_order)
{
    tl_config *cfg = tu_new_config();
    tu_load(cfg, "{'train_batch_size': '8'}");
    tu_expect_error(tl_config_resolve(cfg), TL_ETYPE, "train_batch_size must be int, got <class 'str'>",
                    "train_batch_size '8'");
    tl_config_destroy(cfg);
}

Test(json, load_file_missing_path_is_io_error)
{
    tl_config *cfg = tu_new_config();
    tu_expect_error(tl_config_load_file(cfg, "/nonexistent/dir/run.json"), TL_EIO, "/nonexistent/dir/run.json",
                    "missing file");
    tl_config_destroy(cfg);
}

Test(json, load_file_reads_and_names_it)
{
    char path[] = "/tmp/tpuloop_cfg_XXXXXX";
    tu_write_temp(path, "{\"eval_batch_size\": 16,\n \"tpu_config\": {\"num_shards\": 0}}\n");
    tl_config *cfg = tu_new_config();
    tl_status st = tl_config_load_file(cfg, path);
    cr_assert_eq(st, TL_OK, "load_file: %s", tl_last_error());
    char desc[300];
    snprintf(desc, sizeof desc, "file %s", path);
    tu_source_is(cfg, "eval_batch_size", TL_SOURCE_FILE, desc);
    char suffix[320];
    snprintf(suffix, sizeof suffix, "got 0 [from file %s]", path);
    tu_expect_error(tl_config_resolve(cfg), TL_EINVAL, suffix, "num_shards 0 from a file");
    tl_config_destroy(cfg);
    unlink(path);
}

Test(json, load_file_malformed_names_path_line_column)
{
    char path[] = "/tmp/tpuloop_cfg_XXXXXX";
    tu_write_temp(path, "{\n  \"a\": 1,\n  \"b\": 2 \"c\": 3\n}\n");
    tl_config *cfg = tu_new_config();
    char where[320];
    snprintf(where, sizeof where, "%s:3:12", path);
    tu_expect_error(tl_config_load_file(cfg, path), TL_EPARSE, where, "malformed file");
    tl_config_destroy(cfg);
    unlink(path);
}

/* ---- tl_config_to_json and tl_config_help ------------------------------- */

TestSuite(emit, .init = tu_quiet);

static json_t *resolved_json(tl_config *cfg)
{
    tu_resolve_ok(cfg);
    char *text = NULL;
    tl_status st = tl_config_to_json(cfg, &text);
    cr_assert_eq(st, TL_OK, "to_json: %s", tl_last_error());
    cr_assert_not_null(text, "to_json text");
    json_error_t err;
    json_t *root = json_loads(text, 0, &err);
    cr_assert_not_null(root, "to_json output does not parse: %s at %d:%d\n%s", err.text, err.line, err.column, text);
    tl_free_string(text);
    cr_assert(json_is_object(root), "to_json output is not an object");
    return root;
}

Test(emit, ipl_time_mode_and_layout)
{
    tl_config *cfg = tu_new_config();
    tu_set_flag(cfg, "iterations_per_loop", "1h");
    tu_set_flag(cfg, "train_batch_size", "1024");
    json_t *root = resolved_json(cfg);
    json_t *tpu = json_object_get(root, "tpu_config");
    cr_assert(json_is_object(tpu), "\"tpu_config\" object");
    /* In TensorFlow's syntax, so that the output loads back. */
    cr_assert_str_eq(json_string_value(json_object_get(tpu, "iterations_per_loop")), "1h", "time mode");
    cr_assert_eq(json_integer_value(json_object_get(root, "train_batch_size")), 1024, "train_batch_size");
    cr_assert_null(json_object_get(root, "iterations_per_loop"), "TPUConfig fields nest only under tpu_config");
    cr_assert_null(json_object_get(tpu, "train_batch_size"), "top-level fields stay at the top");
    cr_assert(json_is_null(json_object_get(root, "model_dir")), "None prints as null");
    cr_assert_str_eq(json_string_value(json_object_get(tpu, "per_host_input_for_training")), "PER_HOST_V1",
                     "input mode by name");
    json_decref(root);
    tl_config_destroy(cfg);
}

Test(emit, ipl_count_mode)
{
    tl_config *cfg = tu_new_config();
    json_t *root = resolved_json(cfg);
    json_t *ipl = json_object_get(json_object_get(root, "tpu_config"), "iterations_per_loop");
    cr_assert(json_is_integer(ipl) && json_integer_value(ipl) == 2, "a count is an int");
    json_decref(root);
    tl_config_destroy(cfg);
}

Test(emit, ipl_time_in_the_largest_exact_unit)
{
    static const char *const cases[][2] = {{"3600s", "1h"}, {"60m", "1h"}, {"90m", "90m"}, {"120s", "2m"},
                                           {"90s", "90s"}, {"7201s", "7201s"}, {"5", NULL}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tl_config *cfg = tu_new_config();
        tu_set_flag(cfg, "iterations_per_loop", cases[i][0]);
        json_t *root = resolved_json(cfg);
        json_t *ipl = json_object_get(json_object_get(root, "tpu_config"), "iterations_per_loop");
        if (cases[i][1] == NULL)
            cr_assert(json_is_integer(ipl) && json_integer_value(ipl) == 5, "the count \"5\" is the int 5");
        else
            cr_assert(json_is_string(ipl) && strcmp(json_string_value(ipl), cases[i][1]) == 0, "%s -> %s, want %s",
                      cases[i][0], json_is_string(ipl) ? json_string_value(ipl) : "(not a string)", cases[i][1]);
        json_decref(root);
        tl_config_destroy(cfg);
    }
}

Test(emit, output_loads_back)
{
    /* The resolved configuration loads back as a configuration file. */
    tl_config *cfg = tu_new_config();
    tu_set_flag(cfg, "model_dir", "/tmp/m");
    tu_set_flag(cfg, "num_cores_per_replica", "2");
    json_t *root = resolved_json(cfg);
    char *text = json_dumps(root, 0);
    json_decref(root);
    tl_config *again = tu_new_config();
    tl_status st = tl_config_load_json(again, text, strlen(text), "resolved.json");
    free(text);
    cr_assert_eq(st, TL_OK, "reload: %s", tl_last_error());
    const tl_run_config *rc = tu_resolve_ok(again);
    cr_assert_str_eq(rc->model_dir, "/tmp/m", "model_dir");
    cr_assert_eq(rc->tpu.num_cores_per_replica.value, 2, "ncpr");
    tl_config_destroy(again);
    tl_config_destroy(cfg);
}

/* layout_map (Keras' LayoutMap for the job's ModelParallel) is kept in the
 * user's key order, written back as given, and checked for its shape: an
 * object of lists of null or axis names. */
Test(emit, layout_map_kept_in_order)
{
    tl_config *cfg = tu_from_json("{'layout_map': {'z.*kernel': [null, 'model'], 'a.*bias': ['model']}}");
    const tl_run_config *rc = tu_resolve_ok(cfg);
    cr_assert_str_eq(rc->layout_map_json, "{\"z.*kernel\":[null,\"model\"],\"a.*bias\":[\"model\"]}");
    json_t *root = resolved_json(cfg);
    const char *first = json_object_iter_key(json_object_iter(json_object_get(root, "layout_map")));
    cr_assert_str_eq(first, "z.*kernel", "the first key stays first");
    json_decref(root);
    tl_config_destroy(cfg);
    tu_json_fails("{'layout_map': [1]}", TL_ETYPE, "layout_map must be null or a JSON object");
    tu_json_fails("{'layout_map': {'k': 'model'}}", TL_ETYPE,
                  "layout_map['k'] must be a list of null or mesh axis names, one per dimension; got <class 'str'>");
    tu_json_fails("{'layout_map': {'k': [null, 2]}}", TL_ETYPE,
                  "layout_map['k'][1] must be null or a mesh axis name");
}

Test(emit, to_json_needs_resolve)
{
    tl_config *cfg = tu_new_config();
    char *text = (char *)"sentinel";
    cr_assert_neq(tl_config_to_json(cfg, &text), TL_OK, "to_json before resolve");
    cr_assert_null(text, "out is NULL on failure");
    tl_config_destroy(cfg);
}

Test(emit, help_mentions_every_option)
{
    static const char *const names[] = {
        "iterations_per_loop", "num_shards", "input_partition_dims", "num_cores_per_replica",
        "eval_training_input_configuration", "per_host_input_for_training", "initial_infeed_sleep_secs",
        "tpu_job_name", "experimental_host_call_every_n_steps", "experimental_allow_per_host_v2_parallel_get_next",
        "model_dir", "save_summary_steps", "save_checkpoints_steps", "save_checkpoints_secs", "keep_checkpoint_max",
        "keep_checkpoint_every_n_hours", "log_step_count_steps", "tf_random_seed", "master", "evaluation_master",
        "params", "use_tpu", "eval_on_tpu", "train_batch_size", "eval_batch_size", "predict_batch_size",
        "train_steps", "max_steps", "eval_steps", "warm_start_from", "warm_start_vars", "eval_every_n_steps",
        "throttle_secs", "best_exporter", "exports_to_keep", "devices", "intra_op_parallelism_threads", "num_hosts",
        "host_timeout_secs",
        "model_name", "hidden_units", "bottom_mlp", "top_mlp", "num_cross_layers", "activation", "dropout",
        "optimizer", "learning_rate", "learning_rate_decay", "decay_steps", "cross_shard_reduction", "dataset",
        "synthetic_examples", "synthetic_eval_examples", "synthetic_vocab_cap", "synthetic_vocab_sizes",
        "synthetic_num_features", "synthetic_sequence_length", "synthetic_vocab", "data_dir",
        "epochs", "files", "eval_files", "compression", "features", "feature_keys", "label_key",
        "shuffle_buffer_size", "reshuffle_each_iteration", "cycle_length", "block_length", "num_parallel_calls",
        "prefetch", "skip_corrupt_records", "vocab_sizes", "csv_columns", "label_column", "scale", "embedding",
        "embedding_config", "layout_map"};
    static const char *const sections[] = {"tpu_config", "model", "input"};
    char *help = NULL;
    cr_assert_eq(tl_config_help(&help), TL_OK, "help: %s", tl_last_error());
    cr_assert_not_null(help, "help text");
    tl_config *cfg = tu_new_config();
    json_t *root = resolved_json(cfg);
    size_t nopts = json_object_size(root);
    for (size_t k = 0; k < 3; k++)
        nopts += json_object_size(json_object_get(root, sections[k])) - 1;
    cr_assert_eq(nopts, sizeof names / sizeof names[0], "to_json has %zu options, this list %zu", nopts,
                 sizeof names / sizeof names[0]);
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char flag[128];
        snprintf(flag, sizeof flag, "--%s", names[i]);
        cr_assert_not_null(strstr(help, flag), "help lacks %s", flag);
        const char *section = NULL;
        for (size_t k = 0; k < 3 && json_object_get(root, names[i]) == NULL; k++)
            if (json_object_get(json_object_get(root, sections[k]), names[i]) != NULL)
                section = sections[k];
        if (section) {
            char key[128];
            snprintf(key, sizeof key, "%s.%s", section, names[i]);
            cr_assert_not_null(strstr(help, key), "help lacks the file key %s", key);
        }
    }
    cr_assert_not_null(strstr(help, "TPULOOP_DEVICE_COUNT"), "help names the environment variable");
    json_decref(root);
    tl_config_destroy(cfg);
    tl_free_string(help);
}

Test(emit, help_lists_where_tpuloop_is_stricter)
{
    /* Each deliberate difference from TensorFlow is named with the value it
     * refuses and why. */
    static const char *const says[] = {
        "stricter than TensorFlow",
        "booleans for integer options",
        "reads True as 1",
        "floats for integer options",
        "iterations_per_loop \"5|\" and a trailing newline",
        "experimental_host_call_every_n_steps <= 0",
        "divides\n    by it",
        "per_host_input_for_training other than",
        "initial_infeed_sleep_secs false, '', [] or {}",
        "0.0 mean no sleep",
    };
    char *help = NULL;
    cr_assert_eq(tl_config_help(&help), TL_OK, "help: %s", tl_last_error());
    for (size_t i = 0; i < sizeof says / sizeof says[0]; i++)
        cr_assert_not_null(strstr(help, says[i]), "help lacks \"%s\"", says[i]);
    tl_free_string(help);
}

/* ---- allocation failure -------------------------------------------------- */

static tl_status oom_full_sequence(void *ctx)
{
    (void)ctx;
    static const char *const flags[][2] = {
        {"iterations_per_loop", "1h"},
        {"num_cores_per_replica", "4"},
        {"per_host_input_for_training", "PER_HOST_V2"},
        {"input_partition_dims", "[{\"x\": [1,2,2,1], \"y\": null}, null]"},
        {"model_dir", "/tmp/model"},
    };
    static const char file[] = "{\"train_batch_size\": 64, \"params\": {\"lr\": 0.1},"
                               " \"tpu_config\": {\"num_shards\": 2, \"tpu_job_name\": \"w\"}}";
    tl_config *cfg = NULL;
    char *json = NULL;
    tl_status st = tl_config_create(&cfg);
    if (st != TL_OK)
        return st;
    for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++)
        if ((st = tl_config_set(cfg, flags[i][0], flags[i][1], TL_SOURCE_FLAG)) != TL_OK)
            goto out;
    if ((st = tl_config_load_json(cfg, file, strlen(file), "test.json")) != TL_OK)
        goto out;
    const char *envp[] = {"TPULOOP_DEVICE_COUNT=8", "TF_CONFIG={\"model_dir\": \"/tmp/model\"}", NULL};
    if ((st = tl_config_apply_env(cfg, envp)) != TL_OK)
        goto out;
    if ((st = tl_config_resolve(cfg)) != TL_OK)
        goto out;
    st = tl_config_to_json(cfg, &json);
out:
    tl_free_string(json);
    tl_config_destroy(cfg);
    return st;
}

static tl_status oom_help(void *ctx)
{
    (void)ctx;
    char *help = NULL;
    tl_status st = tl_config_help(&help);
    tl_free_string(help);
    return st;
}

/* Loads the file named ctx into a new configuration. */
static tl_status oom_load_file(void *ctx)
{
    tl_config *cfg = NULL;
    tl_status st = tl_config_create(&cfg);
    if (st == TL_OK)
        st = tl_config_load_file(cfg, ctx);
    tl_config_destroy(cfg);
    return st;
}

TestSuite(oom, .init = tu_quiet, .timeout = 120);

Test(oom, config_lifecycle_every_allocation)
{
    tu_oom_sweep(oom_full_sequence, NULL, "create/set/load/env/resolve/to_json/destroy");
}

Test(oom, help_every_allocation)
{
    tu_oom_sweep(oom_help, NULL, "tl_config_help");
}

Test(oom, load_file_every_allocation)
{
    char path[] = "/tmp/tpuloop_oom_XXXXXX";
    tu_write_temp(path, "{\"eval_batch_size\": 16, \"tpu_config\": {\"num_shards\": 2}}");
    tu_oom_sweep(oom_load_file, path, "tl_config_load_file");
    unlink(path);
}

Test(oom, allocator_hook_is_used_and_restored)
{
    tu_alloc_count c;
    tu_alloc_hook(&c, -1);
    tl_config *cfg = NULL;
    tl_status st = tl_config_create(&cfg);
    tl_config_destroy(cfg);
    tu_alloc_unhook();
    cr_assert_eq(st, TL_OK, "create: %s", tl_last_error());
    cr_assert_gt(c.calls, 0, "tl_config_create did not allocate through the hook");
    cr_assert_eq(c.live, 0, "%ld blocks leaked", c.live);
    long before = c.calls;
    cfg = tu_new_config();
    tl_config_destroy(cfg);
    cr_assert_eq(c.calls, before, "the hook is still called after tl_set_allocator(NULL)");
}
