/*
 * test_config_sources.c — where configuration values come from: TensorFlow's
 * defaults, a JSON file, the environment and --flags (later wins),
 * tl_config_source_of, the "[from ...]" suffix of messages, flag syntax and
 * tl_config_apply_args, and input_partition_dims given as text. JSON files,
 * tl_config_to_json, tl_config_help and allocation failure are in
 * test_config_json.c.
 */
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "testutil.h"

/* ---- defaults (TensorFlow's) ------------------------------------------- */

TestSuite(defaults, .init = tu_quiet);

Test(defaults, tensorflow_defaults)
{
    tl_config *cfg = tu_new_config();
    const tl_run_config *rc = tu_resolve_ok(cfg);
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
    tl_config *cfg = tu_new_config();
    cr_assert_null(tl_config_get(cfg), "get before resolve");
    tu_resolve_ok(cfg);
    tu_set_flag(cfg, "num_hosts", "2");
    cr_assert_null(tl_config_get(cfg), "get after a change, before resolving again");
    cr_assert_eq(tu_resolve_ok(cfg)->num_hosts, 2, "num_hosts after re-resolve");
    tl_config_destroy(cfg);
}

Test(defaults, destroy_accepts_null)
{
    tl_config_destroy(NULL);
}

Test(defaults, source_of_default_and_unknown)
{
    tl_config *cfg = tu_new_config();
    tu_source_is(cfg, "num_shards", TL_SOURCE_DEFAULT, "default");
    tu_source_is(cfg, "tpu_config.num_shards", TL_SOURCE_DEFAULT, "default");
    tl_config_source src;
    const char *d;
    tu_expect_error(tl_config_source_of(cfg, "no_such_option", &src, &d), TL_EUNKNOWN, "no_such_option",
                    "source_of(no_such_option)");
    tl_config_destroy(cfg);
}

/* ---- precedence: defaults < file < env < flags -------------------------- */

TestSuite(sources, .init = tu_quiet);

Test(sources, file_then_env_then_flag)
{
    tl_config *cfg = tu_new_config();
    tu_load(cfg, "{'devices': 2, 'num_hosts': 3}");
    cr_assert_eq(tu_resolve_ok(cfg)->devices, 2, "file sets devices");
    tu_source_is(cfg, "devices", TL_SOURCE_FILE, "file test.json");

    const char *envp[] = {"TPULOOP_DEVICE_COUNT=4", NULL};
    tu_apply_env(cfg, envp);
    cr_assert_eq(tu_resolve_ok(cfg)->devices, 4, "env overrides the file");
    tu_source_is(cfg, "devices", TL_SOURCE_ENV, "env TPULOOP_DEVICE_COUNT");

    char a0[] = "--devices=8";
    char *argv[] = {a0};
    cr_assert_eq(tl_config_apply_args(cfg, 1, argv, NULL, NULL), TL_OK, "apply_args: %s", tl_last_error());
    const tl_run_config *rc = tu_resolve_ok(cfg);
    cr_assert_eq(rc->devices, 8, "flag overrides env");
    cr_assert_eq(rc->num_hosts, 3, "the file's other values stay");
    tu_source_is(cfg, "devices", TL_SOURCE_FLAG, "flag --devices");
    tu_source_is(cfg, "num_hosts", TL_SOURCE_FILE, "file test.json");
    tu_source_is(cfg, "num_shards", TL_SOURCE_DEFAULT, "default");
    tl_config_destroy(cfg);
}

Test(sources, nested_file_value_overridden_by_flag)
{
    tl_config *cfg = tu_new_config();
    tu_load(cfg, "{'tpu_config': {'num_cores_per_replica': 2, 'iterations_per_loop': '1h'}}");
    tu_set_flag(cfg, "num_cores_per_replica", "4");
    const tl_run_config *rc = tu_resolve_ok(cfg);
    cr_assert_eq(rc->tpu.num_cores_per_replica.value, 4, "flag wins over the file");
    cr_assert_eq(rc->tpu.iterations_per_loop.value, 3600, "file value kept");
    tu_source_is(cfg, "tpu_config.num_cores_per_replica", TL_SOURCE_FLAG, "flag --num_cores_per_replica");
    tu_source_is(cfg, "iterations_per_loop", TL_SOURCE_FILE, "file test.json");
    tl_config_destroy(cfg);
}

Test(sources, second_file_overrides_first)
{
    tl_config *cfg = tu_new_config();
    tu_load(cfg, "{'train_batch_size': 8, 'eval_batch_size': 4}");
    char text[] = "{\"train_batch_size\": 16}";
    cr_assert_eq(tl_config_load_json(cfg, text, strlen(text), "second.json"), TL_OK, "%s", tl_last_error());
    const tl_run_config *rc = tu_resolve_ok(cfg);
    cr_assert_eq(rc->train_batch_size.value, 16, "second file wins");
    cr_assert_eq(rc->eval_batch_size.value, 4, "first file's other key kept");
    tu_source_is(cfg, "train_batch_size", TL_SOURCE_FILE, "file second.json");
    tl_config_destroy(cfg);
}

Test(sources, env_ignores_unrelated_variables)
{
    tl_config *cfg = tu_new_config();
    const char *envp[] = {"PATH=/usr/bin", "TPULOOP_NOT_AN_OPTION=3", "NOEQUALS", "devices=9", NULL};
    tu_apply_env(cfg, envp);
    cr_assert_eq(tu_resolve_ok(cfg)->devices, 0, "devices untouched");
    tu_source_is(cfg, "devices", TL_SOURCE_DEFAULT, "default");
    cr_assert_eq(tl_config_apply_env(cfg, NULL), TL_OK, "NULL envp is no environment");
    tl_config_destroy(cfg);
}

Test(sources, messages_name_the_source)
{
    tl_config *cfg = tu_new_config();
    tu_set_flag(cfg, "num_shards", "0");
    tu_expect_error(tl_config_resolve(cfg), TL_EINVAL,
                    "TPUConfig num_shards must be positive, got 0 [from flag --num_shards]", "flag num_shards 0");
    tl_config_destroy(cfg);

    cfg = tu_new_config();
    tu_load(cfg, "{'tpu_config': {'num_shards': 0}}");
    tu_expect_error(tl_config_resolve(cfg), TL_EINVAL,
                    "TPUConfig num_shards must be positive, got 0 [from file test.json]", "file num_shards 0");
    tl_config_destroy(cfg);

    cfg = tu_new_config();
    const char *envp[] = {"TPULOOP_DEVICE_COUNT=many", NULL};
    tu_apply_env(cfg, envp);
    tu_expect_error(tl_config_resolve(cfg), TL_ETYPE, "[from env TPULOOP_DEVICE_COUNT]", "env devices");
    tl_config_destroy(cfg);
}

Test(sources, dotted_and_leaf_names_are_the_same_option)
{
    tl_config *cfg = tu_new_config();
    tu_set_flag(cfg, "tpu_config.num_shards", "2");
    cr_assert_eq(tu_resolve_ok(cfg)->tpu.num_shards.value, 2, "dotted name");
    tu_source_is(cfg, "num_shards", TL_SOURCE_FLAG, "flag --num_shards");
    tu_expect_error(tl_config_set(cfg, "no_such_option", "1", TL_SOURCE_FLAG), TL_EUNKNOWN, "no_such_option",
                    "set(no_such_option)");
    tu_expect_error(tl_config_set(cfg, "tpu_config.model_dir", "/x", TL_SOURCE_FLAG), TL_EUNKNOWN, "model_dir",
                    "set(tpu_config.model_dir)");
    tl_config_destroy(cfg);
}

Test(sources, flag_text_types)
{
    tl_config *cfg = tu_new_config();
    tu_set_flag(cfg, "use_tpu", "False");
    tu_set_flag(cfg, "eval_on_tpu", "false");
    tu_set_flag(cfg, "train_batch_size", "64");
    tu_set_flag(cfg, "keep_checkpoint_every_n_hours", "0.25");
    tu_set_flag(cfg, "model_dir", "123");
    tu_set_flag(cfg, "tpu_job_name", "None");
    tu_set_flag(cfg, "params", "{\"lr\": 0.1}");
    const tl_run_config *rc = tu_resolve_ok(cfg);
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
    tl_config *cfg = tu_new_config();
    tu_expect_error(tl_config_set(cfg, "params", "{\"lr\": }", TL_SOURCE_FLAG), TL_EPARSE, "params", "params flag");
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
    tl_config *cfg = tu_new_config();
    const char *envp[] = {"TF_CONFIG={\"service\":{\"tpu_worker_job_name\":\"x\"}}", NULL};
    tu_apply_env(cfg, envp);
    cr_assert_str_eq(tu_resolve_ok(cfg)->tpu.tpu_job_name, "x", "job name");
    tl_config_destroy(cfg);
    tl_set_log_handler(NULL, NULL);
    char want[64];
    snprintf(want, sizeof want, "%d:Load TPU job name from TF_CONFIG: x\n", (int)TL_LOG_INFO);
    cr_assert_not_null(strstr(logged, want), "log: %s", logged);
}

Test(sources, malformed_tf_config_is_parse_error)
{
    tl_config *cfg = tu_new_config();
    const char *envp[] = {"TF_CONFIG={not json", NULL};
    tu_apply_env(cfg, envp);
    tu_expect_error(tl_config_resolve(cfg), TL_EPARSE, "TF_CONFIG", "malformed TF_CONFIG");
    tl_config_destroy(cfg);
}

/* ---- tl_config_apply_args ----------------------------------------------- */

TestSuite(args, .init = tu_quiet);

Test(args, equals_and_space_forms)
{
    tl_config *cfg = tu_new_config();
    char a0[] = "--iterations_per_loop=30s", a1[] = "--num_hosts", a2[] = "2", a3[] = "--tf_random_seed", a4[] = "-5";
    char *argv[] = {a0, a1, a2, a3, a4};
    int nrest = -1;
    char *rest[5];
    cr_assert_eq(tl_config_apply_args(cfg, 5, argv, &nrest, rest), TL_OK, "%s", tl_last_error());
    cr_assert_eq(nrest, 0, "nothing left over, got %d", nrest);
    const tl_run_config *rc = tu_resolve_ok(cfg);
    cr_assert_eq(rc->tpu.iterations_per_loop.unit, TL_IPL_SECONDS, "30s unit");
    cr_assert_eq(rc->tpu.iterations_per_loop.value, 30, "30s");
    cr_assert_eq(rc->num_hosts, 2, "--num_hosts 2");
    cr_assert_eq(rc->tf_random_seed.value, -5, "--tf_random_seed -5 takes the negative number");
    tl_config_destroy(cfg);
}

Test(args, bare_bool_flag_is_true)
{
    tl_config *cfg = tu_new_config();
    tu_set_flag(cfg, "use_tpu", "false");
    tu_set_flag(cfg, "experimental_allow_per_host_v2_parallel_get_next", "false");
    char a0[] = "--use_tpu", a1[] = "--experimental_allow_per_host_v2_parallel_get_next";
    char *argv[] = {a0, a1};
    cr_assert_eq(tl_config_apply_args(cfg, 2, argv, NULL, NULL), TL_OK, "%s", tl_last_error());
    const tl_run_config *rc = tu_resolve_ok(cfg);
    cr_assert(rc->use_tpu, "--use_tpu");
    cr_assert(rc->tpu.experimental_allow_per_host_v2_parallel_get_next, "bare bool");
    char b0[] = "--use_tpu=false";
    char *argv2[] = {b0};
    cr_assert_eq(tl_config_apply_args(cfg, 1, argv2, NULL, NULL), TL_OK, "%s", tl_last_error());
    cr_assert_not(tu_resolve_ok(cfg)->use_tpu, "--use_tpu=false");
    tl_config_destroy(cfg);
}

Test(args, dotted_flag)
{
    tl_config *cfg = tu_new_config();
    char a0[] = "--tpu_config.num_shards=2";
    char *argv[] = {a0};
    cr_assert_eq(tl_config_apply_args(cfg, 1, argv, NULL, NULL), TL_OK, "%s", tl_last_error());
    const tl_run_config *rc = tu_resolve_ok(cfg);
    cr_assert(rc->tpu.num_shards.set && rc->tpu.num_shards.value == 2, "num_shards 2");
    tl_config_destroy(cfg);
}

Test(args, rest_gets_non_flags_and_unknown_flags_in_order)
{
    tl_config *cfg = tu_new_config();
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
    const tl_run_config *rc = tu_resolve_ok(cfg);
    cr_assert_eq(rc->num_hosts, 2, "a flag after \"--\" is not applied");
    cr_assert_eq(rc->train_batch_size.value, 32, "--train_batch_size 32");
    tl_config_destroy(cfg);
}

Test(args, unknown_flag_without_rest_is_an_error)
{
    tl_config *cfg = tu_new_config();
    char a0[] = "--num_hosts=2", a1[] = "--bogus_flag=1";
    char *argv[] = {a0, a1};
    tu_expect_error(tl_config_apply_args(cfg, 2, argv, NULL, NULL), TL_EUNKNOWN, "bogus_flag", "--bogus_flag");
    tl_config_destroy(cfg);
}

Test(args, flag_without_value)
{
    tl_config *cfg = tu_new_config();
    char a0[] = "--num_shards";
    char *argv[] = {a0};
    int nrest = -1;
    char *rest[1];
    tu_expect_error(tl_config_apply_args(cfg, 1, argv, &nrest, rest), TL_EINVAL, "num_shards",
                    "--num_shards at the end");
    char b0[] = "--num_shards", b1[] = "--num_hosts=2";
    char *argv2[] = {b0, b1};
    char *rest2[2];
    tu_expect_error(tl_config_apply_args(cfg, 2, argv2, &nrest, rest2), TL_EINVAL, "num_shards",
                    "--num_shards followed by a flag");
    tl_config_destroy(cfg);
}

Test(args, bad_value_is_reported_at_resolve_with_its_flag)
{
    tl_config *cfg = tu_new_config();
    char a0[] = "--num_cores_per_replica=3";
    char *argv[] = {a0};
    cr_assert_eq(tl_config_apply_args(cfg, 1, argv, NULL, NULL), TL_OK, "%s", tl_last_error());
    tu_expect_error(tl_config_resolve(cfg), TL_EINVAL,
                    "num_cores_per_replica must be 1, 2, 4, 8, 16, 32, 64, 128; got 3 "
                    "[from flag --num_cores_per_replica]",
                    "ncpr 3");
    tl_config_destroy(cfg);
}

Test(args, empty_argv)
{
    tl_config *cfg = tu_new_config();
    int nrest = -1;
    cr_assert_eq(tl_config_apply_args(cfg, 0, NULL, &nrest, NULL), TL_OK, "%s", tl_last_error());
    cr_assert_eq(nrest, 0, "nrest");
    tl_config_destroy(cfg);
}

/* ---- input_partition_dims as text --------------------------------------- */

TestSuite(partition_dims, .init = tu_quiet);

static tl_config *pdims_config(const char *dims, const char *ncpr)
{
    tl_config *cfg = tu_new_config();
    tu_set_flag(cfg, "per_host_input_for_training", "PER_HOST_V2");
    tu_set_flag(cfg, "num_cores_per_replica", ncpr);
    tu_set_flag(cfg, "input_partition_dims", dims);
    return cfg;
}

Test(partition_dims, flag_text_resolves)
{
    tl_config *cfg = pdims_config("[[1,2,2,1],null]", "4");
    const tl_run_config *rc = tu_resolve_ok(cfg);
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
    tl_config *cfg = tu_new_config();
    tu_expect_error(tl_config_set(cfg, "input_partition_dims", "[[1,2,2,1],", TL_SOURCE_FLAG), TL_EPARSE,
                    "input_partition_dims", "malformed dims");
    tl_config_destroy(cfg);
}

Test(partition_dims, product_must_equal_ncpr)
{
    tl_config *cfg = pdims_config("[[1,2,2,2]]", "4");
    tu_expect_error(tl_config_resolve(cfg), TL_EINVAL,
                    "The product of each input partition dim should equal to num_cores_per_replica", "product 8 vs 4");
    tl_config_destroy(cfg);
    cfg = pdims_config("[[1,4], [2,1]]", "4");
    tu_expect_error(tl_config_resolve(cfg), TL_EINVAL,
                    "The product of each input partition dim should equal to num_cores_per_replica", "label product 2");
    tl_config_destroy(cfg);
}

Test(partition_dims, dims_at_least_one)
{
    tl_config *cfg = pdims_config("[[0,4]]", "4");
    tu_expect_error(tl_config_resolve(cfg), TL_EINVAL, "All input partition dims must be >= 1.", "dim 0");
    tl_config_destroy(cfg);
    cfg = pdims_config("[[-2,-2]]", "4");
    tu_expect_error(tl_config_resolve(cfg), TL_EINVAL, "All input partition dims must be >= 1.", "negative dims");
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
        tu_expect_error(tl_config_resolve(cfg), TL_EINVAL,
                        "The product of each input partition dim should equal to num_cores_per_replica", huge[i]);
        tl_config_destroy(cfg);
    }
}
