/*
 * test_config_sources.c — where configuration values come from and how they
 * are reported: TensorFlow's defaults, a JSON file, the environment and
 * --flags (later wins), tl_config_source_of, the "[from ...]" suffix of
 * messages, flag and JSON syntax errors, input_partition_dims given as text,
 * tl_config_to_json, tl_config_help, and unwinding when any allocation fails.
 */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tpuloop/config.h"

/* ---- helpers ------------------------------------------------------------ */

static void quiet(void)
{
    tl_set_log_level(TL_LOG_OFF);
}

static tl_config *new_config(void)
{
    tl_config *cfg = NULL;
    tl_status st = tl_config_create(&cfg);
    cr_assert_eq(st, TL_OK, "tl_config_create: %s: %s", tl_err_name(st), tl_last_error());
    cr_assert_not_null(cfg, "tl_config_create returned TL_OK and no object");
    return cfg;
}

/* JSON written with ' for ", as the file "test.json". */
static tl_status load_squoted(tl_config *cfg, const char *squoted)
{
    char text[2048];
    size_t n = strlen(squoted);
    cr_assert_lt(n, sizeof text, "test JSON too long");
    for (size_t i = 0; i <= n; i++)
        text[i] = squoted[i] == '\'' ? '"' : squoted[i];
    return tl_config_load_json(cfg, text, n, "test.json");
}

static void load(tl_config *cfg, const char *squoted)
{
    tl_status st = load_squoted(cfg, squoted);
    cr_assert_eq(st, TL_OK, "load_json(%s): %s: %s", squoted, tl_err_name(st), tl_last_error());
}

static void set_flag(tl_config *cfg, const char *name, const char *text)
{
    tl_status st = tl_config_set(cfg, name, text, TL_SOURCE_FLAG);
    cr_assert_eq(st, TL_OK, "tl_config_set(%s, %s): %s: %s", name, text, tl_err_name(st), tl_last_error());
}

static void apply_env(tl_config *cfg, const char *const *envp)
{
    tl_status st = tl_config_apply_env(cfg, envp);
    cr_assert_eq(st, TL_OK, "apply_env: %s: %s", tl_err_name(st), tl_last_error());
}

static const tl_run_config *resolve_ok(tl_config *cfg)
{
    tl_status st = tl_config_resolve(cfg);
    cr_assert_eq(st, TL_OK, "tl_config_resolve: %s: %s", tl_err_name(st), tl_last_error());
    const tl_run_config *rc = tl_config_get(cfg);
    cr_assert_not_null(rc, "tl_config_get is NULL after a successful resolve");
    return rc;
}

static void expect_error(tl_status st, tl_status want, const char *fragment, const char *what)
{
    cr_assert_eq(st, want, "%s: got %s, want %s; message: \"%s\"", what, tl_err_name(st), tl_err_name(want),
                 tl_last_error());
    cr_assert_not_null(strstr(tl_last_error(), fragment), "%s: message \"%s\" lacks \"%s\"", what, tl_last_error(),
                       fragment);
}

static void source_is(const tl_config *cfg, const char *name, tl_config_source want, const char *desc)
{
    tl_config_source src = (tl_config_source)-1;
    const char *d = NULL;
    tl_status st = tl_config_source_of(cfg, name, &src, &d);
    cr_assert_eq(st, TL_OK, "source_of(%s): %s: %s", name, tl_err_name(st), tl_last_error());
    cr_assert_eq(src, want, "source_of(%s) = %d, want %d", name, (int)src, (int)want);
    cr_assert_not_null(d, "source_of(%s): no description", name);
    cr_assert_str_eq(d, desc, "source_of(%s) description", name);
}

/* ---- defaults (TensorFlow's) ------------------------------------------- */

TestSuite(defaults, .init = quiet);

Test(defaults, tensorflow_defaults)
{
    tl_config *cfg = new_config();
    const tl_run_config *rc = resolve_ok(cfg);
    const tl_tpu_config *t = &rc->tpu;
    cr_assert_eq(t->iterations_per_loop.unit, TL_IPL_COUNT, "iterations_per_loop unit");
    cr_assert_eq(t->iterations_per_loop.value, 2, "iterations_per_loop 2");
    cr_assert_not(t->num_shards.set, "num_shards None");
    cr_assert_not(t->num_cores_per_replica.set, "num_cores_per_replica None");
    cr_assert_eq(t->per_host_input_for_training, TL_PER_HOST_V1, "per_host True = PER_HOST_V1");
    cr_assert_null(t->tpu_job_name, "tpu_job_name None");
    cr_assert_eq(t->initial_infeed_sleep_secs, 0, "initial_infeed_sleep_secs None");
    cr_assert_null(t->input_partition_dims, "input_partition_dims None");
    cr_assert_eq(t->eval_training_input_configuration, TL_PER_HOST_V1, "eval_training_input_configuration");
    cr_assert_eq(t->experimental_host_call_every_n_steps, 1, "experimental_host_call_every_n_steps");
    cr_assert_not(t->experimental_allow_per_host_v2_parallel_get_next, "allow_per_host_v2_parallel_get_next");
    cr_assert_null(rc->model_dir, "model_dir None");
    cr_assert_str_eq(rc->master, "", "master ''");
    cr_assert_str_eq(rc->evaluation_master, "", "evaluation_master ''");
    cr_assert(rc->use_tpu, "use_tpu True");
    cr_assert(rc->eval_on_tpu, "eval_on_tpu True");
    cr_assert_not(rc->train_batch_size.set, "train_batch_size None");
    cr_assert_not(rc->eval_batch_size.set, "eval_batch_size None");
    cr_assert_not(rc->predict_batch_size.set, "predict_batch_size None");
    cr_assert_not(rc->save_checkpoints_steps.set, "save_checkpoints_steps None");
    cr_assert(rc->save_checkpoints_secs.set && rc->save_checkpoints_secs.value == 600, "save_checkpoints_secs 600");
    cr_assert_eq(rc->keep_checkpoint_max, 5, "keep_checkpoint_max 5");
    cr_assert_float_eq(rc->keep_checkpoint_every_n_hours, 10000.0, 1e-9, "keep_checkpoint_every_n_hours 10000");
    cr_assert(rc->save_summary_steps.set && rc->save_summary_steps.value == 100, "save_summary_steps 100");
    cr_assert(rc->log_step_count_steps.set && rc->log_step_count_steps.value == 100, "log_step_count_steps 100");
    cr_assert_not(rc->tf_random_seed.set, "tf_random_seed None");
    cr_assert_not(rc->train_steps.set, "train_steps None");
    cr_assert_not(rc->max_steps.set, "max_steps None");
    cr_assert_not(rc->eval_steps.set, "eval_steps None");
    cr_assert_eq(rc->devices, 0, "devices 0 (discover)");
    cr_assert_eq(rc->num_hosts, 1, "num_hosts 1");
    cr_assert_str_eq(rc->params_json, "{}", "params {}");
    tl_config_destroy(cfg);
}

Test(defaults, get_is_null_until_resolved_and_after_a_change)
{
    tl_config *cfg = new_config();
    cr_assert_null(tl_config_get(cfg), "get before resolve");
    resolve_ok(cfg);
    set_flag(cfg, "num_hosts", "2");
    cr_assert_null(tl_config_get(cfg), "get after a change, before resolving again");
    cr_assert_eq(resolve_ok(cfg)->num_hosts, 2, "num_hosts after re-resolve");
    tl_config_destroy(cfg);
}

Test(defaults, destroy_accepts_null)
{
    tl_config_destroy(NULL);
}

Test(defaults, source_of_default_and_unknown)
{
    tl_config *cfg = new_config();
    source_is(cfg, "num_shards", TL_SOURCE_DEFAULT, "default");
    source_is(cfg, "tpu_config.num_shards", TL_SOURCE_DEFAULT, "default");
    tl_config_source src;
    const char *d;
    expect_error(tl_config_source_of(cfg, "no_such_option", &src, &d), TL_EUNKNOWN, "no_such_option",
                 "source_of(no_such_option)");
    tl_config_destroy(cfg);
}

/* ---- precedence: defaults < file < env < flags -------------------------- */

TestSuite(sources, .init = quiet);

Test(sources, file_then_env_then_flag)
{
    tl_config *cfg = new_config();
    load(cfg, "{'devices': 2, 'num_hosts': 3}");
    cr_assert_eq(resolve_ok(cfg)->devices, 2, "file sets devices");
    source_is(cfg, "devices", TL_SOURCE_FILE, "file test.json");

    const char *envp[] = {"TPULOOP_DEVICE_COUNT=4", NULL};
    apply_env(cfg, envp);
    cr_assert_eq(resolve_ok(cfg)->devices, 4, "env overrides the file");
    source_is(cfg, "devices", TL_SOURCE_ENV, "env TPULOOP_DEVICE_COUNT");

    char a0[] = "--devices=8";
    char *argv[] = {a0};
    cr_assert_eq(tl_config_apply_args(cfg, 1, argv, NULL, NULL), TL_OK, "apply_args: %s", tl_last_error());
    const tl_run_config *rc = resolve_ok(cfg);
    cr_assert_eq(rc->devices, 8, "flag overrides env");
    cr_assert_eq(rc->num_hosts, 3, "the file's other values stay");
    source_is(cfg, "devices", TL_SOURCE_FLAG, "flag --devices");
    source_is(cfg, "num_hosts", TL_SOURCE_FILE, "file test.json");
    source_is(cfg, "num_shards", TL_SOURCE_DEFAULT, "default");
    tl_config_destroy(cfg);
}

Test(sources, nested_file_value_overridden_by_flag)
{
    tl_config *cfg = new_config();
    load(cfg, "{'tpu_config': {'num_cores_per_replica': 2, 'iterations_per_loop': '1h'}}");
    set_flag(cfg, "num_cores_per_replica", "4");
    const tl_run_config *rc = resolve_ok(cfg);
    cr_assert_eq(rc->tpu.num_cores_per_replica.value, 4, "flag wins over the file");
    cr_assert_eq(rc->tpu.iterations_per_loop.value, 3600, "file value kept");
    source_is(cfg, "tpu_config.num_cores_per_replica", TL_SOURCE_FLAG, "flag --num_cores_per_replica");
    source_is(cfg, "iterations_per_loop", TL_SOURCE_FILE, "file test.json");
    tl_config_destroy(cfg);
}

Test(sources, second_file_overrides_first)
{
    tl_config *cfg = new_config();
    load(cfg, "{'train_batch_size': 8, 'eval_batch_size': 4}");
    char text[] = "{\"train_batch_size\": 16}";
    cr_assert_eq(tl_config_load_json(cfg, text, strlen(text), "second.json"), TL_OK, "%s", tl_last_error());
    const tl_run_config *rc = resolve_ok(cfg);
    cr_assert_eq(rc->train_batch_size.value, 16, "second file wins");
    cr_assert_eq(rc->eval_batch_size.value, 4, "first file's other key kept");
    source_is(cfg, "train_batch_size", TL_SOURCE_FILE, "file second.json");
    tl_config_destroy(cfg);
}

Test(sources, env_ignores_unrelated_variables)
{
    tl_config *cfg = new_config();
    const char *envp[] = {"PATH=/usr/bin", "TPULOOP_NOT_AN_OPTION=3", "NOEQUALS", "devices=9", NULL};
    apply_env(cfg, envp);
    cr_assert_eq(resolve_ok(cfg)->devices, 0, "devices untouched");
    source_is(cfg, "devices", TL_SOURCE_DEFAULT, "default");
    cr_assert_eq(tl_config_apply_env(cfg, NULL), TL_OK, "NULL envp is no environment");
    tl_config_destroy(cfg);
}

Test(sources, messages_name_the_source)
{
    tl_config *cfg = new_config();
    set_flag(cfg, "num_shards", "0");
    expect_error(tl_config_resolve(cfg), TL_EINVAL,
                 "TPUConfig num_shards must be positive, got 0 [from flag --num_shards]", "flag num_shards 0");
    tl_config_destroy(cfg);

    cfg = new_config();
    load(cfg, "{'tpu_config': {'num_shards': 0}}");
    expect_error(tl_config_resolve(cfg), TL_EINVAL, "TPUConfig num_shards must be positive, got 0 [from file test.json]",
                 "file num_shards 0");
    tl_config_destroy(cfg);

    cfg = new_config();
    const char *envp[] = {"TPULOOP_DEVICE_COUNT=many", NULL};
    apply_env(cfg, envp);
    expect_error(tl_config_resolve(cfg), TL_ETYPE, "[from env TPULOOP_DEVICE_COUNT]", "env devices");
    tl_config_destroy(cfg);
}

Test(sources, dotted_and_leaf_names_are_the_same_option)
{
    tl_config *cfg = new_config();
    set_flag(cfg, "tpu_config.num_shards", "2");
    cr_assert_eq(resolve_ok(cfg)->tpu.num_shards.value, 2, "dotted name");
    source_is(cfg, "num_shards", TL_SOURCE_FLAG, "flag --num_shards");
    expect_error(tl_config_set(cfg, "no_such_option", "1", TL_SOURCE_FLAG), TL_EUNKNOWN, "no_such_option",
                 "set(no_such_option)");
    expect_error(tl_config_set(cfg, "tpu_config.model_dir", "/x", TL_SOURCE_FLAG), TL_EUNKNOWN, "model_dir",
                 "set(tpu_config.model_dir)");
    tl_config_destroy(cfg);
}

Test(sources, flag_text_types)
{
    tl_config *cfg = new_config();
    set_flag(cfg, "use_tpu", "False");
    set_flag(cfg, "eval_on_tpu", "false");
    set_flag(cfg, "train_batch_size", "64");
    set_flag(cfg, "keep_checkpoint_every_n_hours", "0.25");
    set_flag(cfg, "model_dir", "123");
    set_flag(cfg, "tpu_job_name", "None");
    set_flag(cfg, "params", "{\"lr\": 0.1}");
    const tl_run_config *rc = resolve_ok(cfg);
    cr_assert_not(rc->use_tpu, "False");
    cr_assert_not(rc->eval_on_tpu, "false");
    cr_assert_eq(rc->train_batch_size.value, 64, "64 is an int");
    cr_assert_float_eq(rc->keep_checkpoint_every_n_hours, 0.25, 1e-12, "0.25");
    cr_assert_str_eq(rc->model_dir, "123", "string options keep the text");
    cr_assert_null(rc->tpu.tpu_job_name, "None");
    cr_assert_not_null(strstr(rc->params_json, "lr"), "params %s", rc->params_json);
    tl_config_destroy(cfg);
}

Test(sources, flag_object_malformed_is_parse_error)
{
    tl_config *cfg = new_config();
    expect_error(tl_config_set(cfg, "params", "{\"lr\": }", TL_SOURCE_FLAG), TL_EPARSE, "params", "params flag");
    tl_config_destroy(cfg);
}

static char logged[4096];

static void capture_log(tl_log_level level, const char *msg, void *ud)
{
    (void)ud;
    size_t n = strlen(logged);
    snprintf(logged + n, sizeof logged - n, "%d:%s\n", (int)level, msg);
}

Test(sources, log_names_tf_config_job)
{
    /* TensorFlow logs "Load TPU job name from TF_CONFIG: %s" at INFO. */
    tl_set_log_handler(capture_log, NULL);
    tl_set_log_level(TL_LOG_INFO);
    tl_config *cfg = new_config();
    const char *envp[] = {"TF_CONFIG={\"service\":{\"tpu_worker_job_name\":\"x\"}}", NULL};
    apply_env(cfg, envp);
    cr_assert_str_eq(resolve_ok(cfg)->tpu.tpu_job_name, "x", "job name");
    tl_config_destroy(cfg);
    tl_set_log_handler(NULL, NULL);
    char want[64];
    snprintf(want, sizeof want, "%d:Load TPU job name from TF_CONFIG: x\n", (int)TL_LOG_INFO);
    cr_assert_not_null(strstr(logged, want), "log: %s", logged);
}

Test(sources, malformed_tf_config_is_parse_error)
{
    tl_config *cfg = new_config();
    const char *envp[] = {"TF_CONFIG={not json", NULL};
    apply_env(cfg, envp);
    expect_error(tl_config_resolve(cfg), TL_EPARSE, "TF_CONFIG", "malformed TF_CONFIG");
    tl_config_destroy(cfg);
}

/* ---- tl_config_apply_args ----------------------------------------------- */

TestSuite(args, .init = quiet);

Test(args, equals_and_space_forms)
{
    tl_config *cfg = new_config();
    char a0[] = "--iterations_per_loop=30s", a1[] = "--num_hosts", a2[] = "2", a3[] = "--tf_random_seed", a4[] = "-5";
    char *argv[] = {a0, a1, a2, a3, a4};
    int nrest = -1;
    char *rest[5];
    cr_assert_eq(tl_config_apply_args(cfg, 5, argv, &nrest, rest), TL_OK, "%s", tl_last_error());
    cr_assert_eq(nrest, 0, "nothing left over, got %d", nrest);
    const tl_run_config *rc = resolve_ok(cfg);
    cr_assert_eq(rc->tpu.iterations_per_loop.unit, TL_IPL_SECONDS, "30s unit");
    cr_assert_eq(rc->tpu.iterations_per_loop.value, 30, "30s");
    cr_assert_eq(rc->num_hosts, 2, "--num_hosts 2");
    cr_assert_eq(rc->tf_random_seed.value, -5, "--tf_random_seed -5 takes the negative number");
    tl_config_destroy(cfg);
}

Test(args, bare_bool_flag_is_true)
{
    tl_config *cfg = new_config();
    set_flag(cfg, "use_tpu", "false");
    set_flag(cfg, "experimental_allow_per_host_v2_parallel_get_next", "false");
    char a0[] = "--use_tpu", a1[] = "--experimental_allow_per_host_v2_parallel_get_next";
    char *argv[] = {a0, a1};
    cr_assert_eq(tl_config_apply_args(cfg, 2, argv, NULL, NULL), TL_OK, "%s", tl_last_error());
    const tl_run_config *rc = resolve_ok(cfg);
    cr_assert(rc->use_tpu, "--use_tpu");
    cr_assert(rc->tpu.experimental_allow_per_host_v2_parallel_get_next, "bare bool");
    char b0[] = "--use_tpu=false";
    char *argv2[] = {b0};
    cr_assert_eq(tl_config_apply_args(cfg, 1, argv2, NULL, NULL), TL_OK, "%s", tl_last_error());
    cr_assert_not(resolve_ok(cfg)->use_tpu, "--use_tpu=false");
    tl_config_destroy(cfg);
}

Test(args, dotted_flag)
{
    tl_config *cfg = new_config();
    char a0[] = "--tpu_config.num_shards=2";
    char *argv[] = {a0};
    cr_assert_eq(tl_config_apply_args(cfg, 1, argv, NULL, NULL), TL_OK, "%s", tl_last_error());
    const tl_run_config *rc = resolve_ok(cfg);
    cr_assert(rc->tpu.num_shards.set && rc->tpu.num_shards.value == 2, "num_shards 2");
    tl_config_destroy(cfg);
}

Test(args, rest_gets_non_flags_and_unknown_flags_in_order)
{
    tl_config *cfg = new_config();
    char a0[] = "train", a1[] = "--num_hosts=2", a2[] = "--verbose", a3[] = "-x", a4[] = "file.txt",
         a5[] = "--train_batch_size", a6[] = "32", a7[] = "--", a8[] = "--num_hosts=9", a9[] = "tail";
    char *argv[] = {a0, a1, a2, a3, a4, a5, a6, a7, a8, a9};
    char *rest[10] = {0};
    int nrest = -1;
    cr_assert_eq(tl_config_apply_args(cfg, 10, argv, &nrest, rest), TL_OK, "%s", tl_last_error());
    static const char *const want[] = {"train", "--verbose", "-x", "file.txt", "--num_hosts=9", "tail"};
    cr_assert_eq(nrest, 6, "nrest %d", nrest);
    for (int i = 0; i < 6; i++)
        cr_assert_str_eq(rest[i], want[i], "rest[%d]", i);
    const tl_run_config *rc = resolve_ok(cfg);
    cr_assert_eq(rc->num_hosts, 2, "a flag after \"--\" is not applied");
    cr_assert_eq(rc->train_batch_size.value, 32, "--train_batch_size 32");
    tl_config_destroy(cfg);
}

Test(args, unknown_flag_without_rest_is_an_error)
{
    tl_config *cfg = new_config();
    char a0[] = "--num_hosts=2", a1[] = "--bogus_flag=1";
    char *argv[] = {a0, a1};
    expect_error(tl_config_apply_args(cfg, 2, argv, NULL, NULL), TL_EUNKNOWN, "bogus_flag", "--bogus_flag");
    tl_config_destroy(cfg);
}

Test(args, flag_without_value)
{
    tl_config *cfg = new_config();
    char a0[] = "--num_shards";
    char *argv[] = {a0};
    int nrest = -1;
    char *rest[1];
    expect_error(tl_config_apply_args(cfg, 1, argv, &nrest, rest), TL_EINVAL, "num_shards", "--num_shards at the end");
    char b0[] = "--num_shards", b1[] = "--num_hosts=2";
    char *argv2[] = {b0, b1};
    char *rest2[2];
    expect_error(tl_config_apply_args(cfg, 2, argv2, &nrest, rest2), TL_EINVAL, "num_shards",
                 "--num_shards followed by a flag");
    tl_config_destroy(cfg);
}

Test(args, bad_value_is_reported_at_resolve_with_its_flag)
{
    tl_config *cfg = new_config();
    char a0[] = "--num_cores_per_replica=3";
    char *argv[] = {a0};
    cr_assert_eq(tl_config_apply_args(cfg, 1, argv, NULL, NULL), TL_OK, "%s", tl_last_error());
    expect_error(tl_config_resolve(cfg), TL_EINVAL,
                 "num_cores_per_replica must be 1, 2, 4, 8, 16, 32, 64, 128; got 3 [from flag --num_cores_per_replica]",
                 "ncpr 3");
    tl_config_destroy(cfg);
}

Test(args, empty_argv)
{
    tl_config *cfg = new_config();
    int nrest = -1;
    cr_assert_eq(tl_config_apply_args(cfg, 0, NULL, &nrest, NULL), TL_OK, "%s", tl_last_error());
    cr_assert_eq(nrest, 0, "nrest");
    tl_config_destroy(cfg);
}

/* ---- JSON files ---------------------------------------------------------- */

TestSuite(json, .init = quiet);

Test(json, tpu_config_fields_nest)
{
    tl_config *cfg = new_config();
    load(cfg, "{'model_dir': '/tmp/m', 'train_batch_size': 1024,"
              " 'tpu_config': {'iterations_per_loop': '1h', 'num_cores_per_replica': 2}}");
    const tl_run_config *rc = resolve_ok(cfg);
    cr_assert_str_eq(rc->model_dir, "/tmp/m", "model_dir");
    cr_assert_eq(rc->train_batch_size.value, 1024, "train_batch_size");
    cr_assert_eq(rc->tpu.iterations_per_loop.value, 3600, "1h");
    cr_assert_eq(rc->tpu.num_cores_per_replica.value, 2, "ncpr");
    tl_config_destroy(cfg);
}

Test(json, tpu_field_at_top_level_asks_to_nest_it)
{
    tl_config *cfg = new_config();
    tl_status st = load_squoted(cfg, "{'num_shards': 2}");
    expect_error(st, TL_EUNKNOWN, "num_shards", "top-level num_shards");
    cr_assert_not_null(strstr(tl_last_error(), "tpu_config"), "no hint to nest it: %s", tl_last_error());
    cr_assert_not_null(strstr(tl_last_error(), "test.json"), "no origin: %s", tl_last_error());
    tl_config_destroy(cfg);
}

Test(json, run_config_field_inside_tpu_config_rejected)
{
    tl_config *cfg = new_config();
    expect_error(load_squoted(cfg, "{'tpu_config': {'model_dir': '/x'}}"), TL_EUNKNOWN, "model_dir",
                 "tpu_config.model_dir");
    tl_config_destroy(cfg);
}

Test(json, unknown_keys_named)
{
    tl_config *cfg = new_config();
    expect_error(load_squoted(cfg, "{'model_dir': '/x', 'bogus_key': 1}"), TL_EUNKNOWN, "bogus_key", "bogus_key");
    expect_error(load_squoted(cfg, "{'tpu_config': {'bogus_nested': 1}}"), TL_EUNKNOWN, "tpu_config.bogus_nested",
                 "tpu_config.bogus_nested");
    tl_config_destroy(cfg);
}

Test(json, tpu_config_not_an_object_is_type_error)
{
    tl_config *cfg = new_config();
    expect_error(load_squoted(cfg, "{'tpu_config': 3}"), TL_ETYPE, "tpu_config", "tpu_config 3");
    expect_error(load_squoted(cfg, "{'tpu_config': [1]}"), TL_ETYPE, "tpu_config", "tpu_config [1]");
    tl_config_destroy(cfg);
}

Test(json, malformed_gives_origin_line_column)
{
    /* The comma after 2 is missing; jansson stops at the end of the next
     * token, "c", which ends on line 3, column 12. */
    static const char text[] = "{\n  \"a\": 1,\n  \"b\": 2 \"c\": 3\n}\n";
    tl_config *cfg = new_config();
    expect_error(tl_config_load_json(cfg, text, strlen(text), "test.json"), TL_EPARSE, "test.json:3:12",
                 "missing comma");
    static const char text2[] = "{\n  \"model_dir\": \"/tmp/m\",\n  \"train_batch_size\": 8\n  \"eval_batch_size\": 4\n}\n";
    expect_error(tl_config_load_json(cfg, text2, strlen(text2), "run.json"), TL_EPARSE, "run.json:4:",
                 "missing comma at the end of line 3");
    tl_config_destroy(cfg);
}

Test(json, duplicate_keys_rejected)
{
    tl_config *cfg = new_config();
    expect_error(load_squoted(cfg, "{'train_batch_size': 1, 'train_batch_size': 2}"), TL_EPARSE, "test.json:1:",
                 "duplicate top-level key");
    cr_assert_not_null(strstr(tl_last_error(), "duplicate"), "message: %s", tl_last_error());
    expect_error(load_squoted(cfg, "{'tpu_config': {'num_shards': 1, 'num_shards': 2}}"), TL_EPARSE, "duplicate",
                 "duplicate nested key");
    tl_config_destroy(cfg);
}

Test(json, empty_or_trailing_text_rejected)
{
    tl_config *cfg = new_config();
    expect_error(load_squoted(cfg, ""), TL_EPARSE, "test.json", "empty text");
    expect_error(load_squoted(cfg, "{} {}"), TL_EPARSE, "test.json", "trailing text");
    expect_error(load_squoted(cfg, "3"), TL_EPARSE, "test.json", "a bare number");
    tl_config_destroy(cfg);
}

Test(json, top_level_array_rejected)
{
    tl_config *cfg = new_config();
    expect_error(load_squoted(cfg, "[1, 2]"), TL_EPARSE, "test.json", "top-level array");
    cr_assert_not_null(strstr(tl_last_error(), "<class 'list'>"), "message: %s", tl_last_error());
    tl_config_destroy(cfg);
}

Test(json, bad_file_changes_nothing)
{
    tl_config *cfg = new_config();
    load(cfg, "{'train_batch_size': 8}");
    /* The first key is fine and the second unknown: the first must not apply. */
    cr_assert_eq(load_squoted(cfg, "{'train_batch_size': 16, 'eval_batch_size': 4, 'no_such_key': 1}"), TL_EUNKNOWN,
                 "%s", tl_last_error());
    cr_assert_eq(load_squoted(cfg, "{'train_batch_size': 32, 'tpu_config': {'no_such_key': 1}}"), TL_EUNKNOWN, "%s",
                 tl_last_error());
    cr_assert_eq(load_squoted(cfg, "{'train_batch_size': 64, 'tpu_config': 7}"), TL_ETYPE, "%s", tl_last_error());
    const tl_run_config *rc = resolve_ok(cfg);
    cr_assert_eq(rc->train_batch_size.value, 8, "a rejected file changed train_batch_size to %lld",
                 (long long)rc->train_batch_size.value);
    cr_assert_not(rc->eval_batch_size.set, "a rejected file set eval_batch_size");
    source_is(cfg, "eval_batch_size", TL_SOURCE_DEFAULT, "default");
    tl_config_destroy(cfg);
}

Test(json, values_type_checked_at_resolve_in_tensorflow_order)
{
    tl_config *cfg = new_config();
    load(cfg, "{'train_batch_size': '8'}");
    expect_error(tl_config_resolve(cfg), TL_ETYPE, "train_batch_size must be int, got <class 'str'>",
                 "train_batch_size '8'");
    tl_config_destroy(cfg);
}

Test(json, load_file_missing_path_is_io_error)
{
    tl_config *cfg = new_config();
    expect_error(tl_config_load_file(cfg, "/nonexistent/dir/run.json"), TL_EIO, "/nonexistent/dir/run.json",
                 "missing file");
    tl_config_destroy(cfg);
}

static void write_temp(char *path, const char *text)
{
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0, "mkstemp %s", path);
    size_t n = strlen(text);
    cr_assert_eq(write(fd, text, n), (ssize_t)n, "write %s", path);
    close(fd);
}

Test(json, load_file_reads_and_names_it)
{
    char path[] = "/tmp/tpuloop_cfg_XXXXXX";
    write_temp(path, "{\"eval_batch_size\": 16,\n \"tpu_config\": {\"num_shards\": 0}}\n");
    tl_config *cfg = new_config();
    tl_status st = tl_config_load_file(cfg, path);
    cr_assert_eq(st, TL_OK, "load_file: %s", tl_last_error());
    char desc[300];
    snprintf(desc, sizeof desc, "file %s", path);
    source_is(cfg, "eval_batch_size", TL_SOURCE_FILE, desc);
    char suffix[320];
    snprintf(suffix, sizeof suffix, "got 0 [from file %s]", path);
    expect_error(tl_config_resolve(cfg), TL_EINVAL, suffix, "num_shards 0 from a file");
    tl_config_destroy(cfg);
    unlink(path);
}

Test(json, load_file_malformed_names_path_line_column)
{
    char path[] = "/tmp/tpuloop_cfg_XXXXXX";
    write_temp(path, "{\n  \"a\": 1,\n  \"b\": 2 \"c\": 3\n}\n");
    tl_config *cfg = new_config();
    char where[320];
    snprintf(where, sizeof where, "%s:3:12", path);
    expect_error(tl_config_load_file(cfg, path), TL_EPARSE, where, "malformed file");
    tl_config_destroy(cfg);
    unlink(path);
}

/* ---- input_partition_dims as text --------------------------------------- */

TestSuite(partition_dims, .init = quiet);

static tl_config *pdims_config(const char *dims, const char *ncpr)
{
    tl_config *cfg = new_config();
    set_flag(cfg, "per_host_input_for_training", "PER_HOST_V2");
    set_flag(cfg, "num_cores_per_replica", ncpr);
    set_flag(cfg, "input_partition_dims", dims);
    return cfg;
}

Test(partition_dims, flag_text_resolves)
{
    tl_config *cfg = pdims_config("[[1,2,2,1],null]", "4");
    const tl_run_config *rc = resolve_ok(cfg);
    cr_assert_not_null(rc->tpu.input_partition_dims, "dims kept");
    cr_assert_eq(rc->tpu.per_host_input_for_training, TL_PER_HOST_V2, "PER_HOST_V2");
    char *text = NULL;
    cr_assert_eq(tl_config_to_json(cfg, &text), TL_OK, "%s", tl_last_error());
    json_t *root = json_loads(text, 0, NULL);
    cr_assert_not_null(root, "to_json output parses");
    json_t *pd = json_object_get(json_object_get(root, "tpu_config"), "input_partition_dims");
    json_t *want = json_loads("[[1,2,2,1],null]", 0, NULL);
    cr_assert(json_equal(pd, want), "input_partition_dims printed back as [[1,2,2,1],null]");
    json_decref(want);
    json_decref(root);
    tl_free_string(text);
    tl_config_destroy(cfg);
}

Test(partition_dims, features_only_and_dicts_resolve)
{
    static const char *const ok[] = {"[[1,4]]", "[[1,1,1,1]]", "[{\"x\": [1,4], \"y\": null}, [4]]",
                                     "[[[2,2],[1,1]], null]"};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        tl_config *cfg = pdims_config(ok[i], "4");
        tl_status st = tl_config_resolve(cfg);
        cr_assert_eq(st, TL_OK, "%s: %s", ok[i], tl_last_error());
        tl_config_destroy(cfg);
    }
}

Test(partition_dims, malformed_flag_is_parse_error)
{
    tl_config *cfg = new_config();
    expect_error(tl_config_set(cfg, "input_partition_dims", "[[1,2,2,1],", TL_SOURCE_FLAG), TL_EPARSE,
                 "input_partition_dims", "malformed dims");
    tl_config_destroy(cfg);
}

Test(partition_dims, product_must_equal_ncpr)
{
    tl_config *cfg = pdims_config("[[1,2,2,2]]", "4");
    expect_error(tl_config_resolve(cfg), TL_EINVAL,
                 "The product of each input partition dim should equal to num_cores_per_replica", "product 8 vs 4");
    tl_config_destroy(cfg);
    cfg = pdims_config("[[1,4], [2,1]]", "4");
    expect_error(tl_config_resolve(cfg), TL_EINVAL,
                 "The product of each input partition dim should equal to num_cores_per_replica", "label product 2");
    tl_config_destroy(cfg);
}

Test(partition_dims, dims_at_least_one)
{
    tl_config *cfg = pdims_config("[[0,4]]", "4");
    expect_error(tl_config_resolve(cfg), TL_EINVAL, "All input partition dims must be >= 1.", "dim 0");
    tl_config_destroy(cfg);
    cfg = pdims_config("[[-2,-2]]", "4");
    expect_error(tl_config_resolve(cfg), TL_EINVAL, "All input partition dims must be >= 1.", "negative dims");
    tl_config_destroy(cfg);
}

Test(partition_dims, feature_dims_must_not_be_none)
{
    tl_config *cfg = pdims_config("[null, [4]]", "4");
    cr_assert_eq(tl_config_resolve(cfg), TL_EINVAL, "None feature dims accepted: %s", tl_last_error());
    tl_config_destroy(cfg);
}

Test(partition_dims, huge_dims_are_a_wrong_product_not_an_overflow)
{
    static const char *const huge[] = {"[[2,4611686018427387904]]", "[[3,3074457345618258603]]",
                                       "[[1,2,9223372036854775807]]"};
    for (size_t i = 0; i < sizeof huge / sizeof huge[0]; i++) {
        tl_config *cfg = pdims_config(huge[i], "4");
        expect_error(tl_config_resolve(cfg), TL_EINVAL,
                     "The product of each input partition dim should equal to num_cores_per_replica", huge[i]);
        tl_config_destroy(cfg);
    }
}

/* ---- tl_config_to_json and tl_config_help ------------------------------- */

TestSuite(emit, .init = quiet);

static json_t *resolved_json(tl_config *cfg)
{
    resolve_ok(cfg);
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
    tl_config *cfg = new_config();
    set_flag(cfg, "iterations_per_loop", "1h");
    set_flag(cfg, "train_batch_size", "1024");
    json_t *root = resolved_json(cfg);
    json_t *tpu = json_object_get(root, "tpu_config");
    cr_assert(json_is_object(tpu), "\"tpu_config\" object");
    json_t *ipl = json_object_get(tpu, "iterations_per_loop");
    cr_assert_str_eq(json_string_value(json_object_get(ipl, "unit")), "seconds", "unit");
    cr_assert_eq(json_integer_value(json_object_get(ipl, "value")), 3600, "value");
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
    tl_config *cfg = new_config();
    json_t *root = resolved_json(cfg);
    json_t *ipl = json_object_get(json_object_get(root, "tpu_config"), "iterations_per_loop");
    cr_assert_str_eq(json_string_value(json_object_get(ipl, "unit")), "count", "unit");
    cr_assert_eq(json_integer_value(json_object_get(ipl, "value")), 2, "value");
    json_decref(root);
    tl_config_destroy(cfg);
}

Test(emit, output_loads_back)
{
    /* The resolved configuration, minus the printed iterations_per_loop
     * object, loads back as a configuration file. */
    tl_config *cfg = new_config();
    set_flag(cfg, "model_dir", "/tmp/m");
    set_flag(cfg, "num_cores_per_replica", "2");
    json_t *root = resolved_json(cfg);
    json_object_del(json_object_get(root, "tpu_config"), "iterations_per_loop");
    char *text = json_dumps(root, 0);
    json_decref(root);
    tl_config *again = new_config();
    tl_status st = tl_config_load_json(again, text, strlen(text), "resolved.json");
    free(text);
    cr_assert_eq(st, TL_OK, "reload: %s", tl_last_error());
    const tl_run_config *rc = resolve_ok(again);
    cr_assert_str_eq(rc->model_dir, "/tmp/m", "model_dir");
    cr_assert_eq(rc->tpu.num_cores_per_replica.value, 2, "ncpr");
    tl_config_destroy(again);
    tl_config_destroy(cfg);
}

Test(emit, to_json_needs_resolve)
{
    tl_config *cfg = new_config();
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
        "train_steps", "max_steps", "eval_steps", "devices", "num_hosts"};
    char *help = NULL;
    cr_assert_eq(tl_config_help(&help), TL_OK, "help: %s", tl_last_error());
    cr_assert_not_null(help, "help text");
    tl_config *cfg = new_config();
    json_t *root = resolved_json(cfg);
    size_t nopts = json_object_size(root) - 1 + json_object_size(json_object_get(root, "tpu_config"));
    cr_assert_eq(nopts, sizeof names / sizeof names[0], "to_json has %zu options, this list %zu", nopts,
                 sizeof names / sizeof names[0]);
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char flag[128];
        snprintf(flag, sizeof flag, "--%s", names[i]);
        cr_assert_not_null(strstr(help, flag), "help lacks %s", flag);
        const char *section = json_object_get(root, names[i]) ? NULL : "tpu_config";
        if (section) {
            char key[128];
            snprintf(key, sizeof key, "tpu_config.%s", names[i]);
            cr_assert_not_null(strstr(help, key), "help lacks the file key %s", key);
        }
    }
    cr_assert_not_null(strstr(help, "TPULOOP_DEVICE_COUNT"), "help names the environment variable");
    json_decref(root);
    tl_config_destroy(cfg);
    tl_free_string(help);
}

/* ---- allocation failure -------------------------------------------------- */

typedef struct oom_state {
    long calls;   /* malloc and realloc calls so far */
    long fail_at; /* the call that fails (0-based) */
    long live;    /* blocks handed out and not yet freed */
} oom_state;

static void *oom_malloc(size_t size, void *ud)
{
    oom_state *s = ud;
    if (s->calls++ == s->fail_at)
        return NULL;
    void *p = malloc(size);
    if (p != NULL)
        s->live++;
    return p;
}

static void *oom_realloc(void *ptr, size_t size, void *ud)
{
    oom_state *s = ud;
    if (s->calls++ == s->fail_at)
        return NULL;
    void *p = realloc(ptr, size);
    if (p != NULL && ptr == NULL)
        s->live++;
    return p;
}

static void oom_free(void *ptr, void *ud)
{
    oom_state *s = ud;
    if (ptr != NULL)
        s->live--;
    free(ptr);
}

static tl_status oom_full_sequence(void)
{
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

static tl_status oom_help(void)
{
    char *help = NULL;
    tl_status st = tl_config_help(&help);
    tl_free_string(help);
    return st;
}

static char oom_path[64];

static tl_status oom_load_file(void)
{
    tl_config *cfg = NULL;
    tl_status st = tl_config_create(&cfg);
    if (st == TL_OK)
        st = tl_config_load_file(cfg, oom_path);
    tl_config_destroy(cfg);
    return st;
}

/* Fails allocation 0, 1, 2, ... of the sequence until it runs through. Every
 * run that meets a failure must report TL_ENOMEM and free every block. */
static void oom_sweep(tl_status (*sequence)(void), const char *name)
{
    cr_assert_eq(sequence(), TL_OK, "%s fails without any allocation failure: %s", name, tl_last_error());
    long n;
    for (n = 0; n < 100000; n++) {
        oom_state s = {0, n, 0};
        tl_allocator a = {oom_malloc, oom_realloc, oom_free, &s};
        tl_clear_error();
        tl_set_allocator(&a);
        tl_status st = sequence();
        tl_set_allocator(NULL);
        cr_assert_eq(s.live, 0, "%s, allocation %ld failed: %ld blocks leaked (status %s)", name, n, s.live,
                     tl_err_name(st));
        if (s.calls <= n) {
            cr_assert_eq(st, TL_OK, "%s with no failure injected: %s: %s", name, tl_err_name(st), tl_last_error());
            break;
        }
        cr_assert_eq(st, TL_ENOMEM, "%s, allocation %ld of %ld failed: got %s (\"%s\"), want TL_ENOMEM", name, n,
                     s.calls, tl_err_name(st), tl_last_error());
        cr_assert_not_null(strstr(tl_last_error(), "out of memory"), "%s, allocation %ld: message \"%s\"", name, n,
                           tl_last_error());
    }
    cr_assert_gt(n, 0, "%s made no allocation through the hook", name);
    cr_assert_lt(n, 100000, "%s never ran through", name);
}

TestSuite(oom, .init = quiet, .timeout = 120);

Test(oom, config_lifecycle_every_allocation)
{
    oom_sweep(oom_full_sequence, "create/set/load/env/resolve/to_json/destroy");
}

Test(oom, help_every_allocation)
{
    oom_sweep(oom_help, "tl_config_help");
}

Test(oom, load_file_every_allocation)
{
    snprintf(oom_path, sizeof oom_path, "/tmp/tpuloop_oom_XXXXXX");
    write_temp(oom_path, "{\"eval_batch_size\": 16, \"tpu_config\": {\"num_shards\": 2}}");
    oom_sweep(oom_load_file, "tl_config_load_file");
    unlink(oom_path);
}

Test(oom, allocator_hook_is_used_and_restored)
{
    oom_state s = {0, -1, 0};
    tl_allocator a = {oom_malloc, oom_realloc, oom_free, &s};
    tl_set_allocator(&a);
    tl_config *cfg = NULL;
    tl_status st = tl_config_create(&cfg);
    tl_config_destroy(cfg);
    tl_set_allocator(NULL);
    cr_assert_eq(st, TL_OK, "create: %s", tl_last_error());
    cr_assert_gt(s.calls, 0, "tl_config_create did not allocate through the hook");
    cr_assert_eq(s.live, 0, "%ld blocks leaked", s.live);
    long before = s.calls;
    cfg = new_config();
    tl_config_destroy(cfg);
    cr_assert_eq(s.calls, before, "the hook is still called after tl_set_allocator(NULL)");
}
