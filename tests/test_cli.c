/* The `tpuloop` command: output, exit codes (0 ok, 2 bad configuration or
 * arguments), and `error: ` messages on stderr. Runs the built binary named by
 * TPULOOP_CLI (the Makefile sets it) through test_cli_util.h. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <sched.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test_cli_util.h"
#include "testutil.h"

Test(cli, config_default_succeeds)
{
    tc_result r = tc_run(NULL, "config");
    cr_assert_eq(r.status, 0, "stderr: %s", r.err);
    cr_assert(strstr(r.out, "iterations_per_loop"));
    cr_assert(strstr(r.out, "topology"));
    cr_assert(strstr(r.out, "input plans"));
    tc_done(&r);
}

Test(cli, config_json_has_the_documented_keys)
{
    tc_result r = tc_run(NULL, "config --devices=8 --num_hosts=4 --iterations_per_loop=1h --train_batch_size=512 "
                             "--per_host_input_for_training=PER_HOST_V2 --num_cores_per_replica=2 --eval_batch_size=64 "
                             "--eval_training_input_configuration=SLICED --num_hosts=4 --json");
    cr_assert_eq(r.status, 0, "stderr: %s", r.err);
    json_error_t e;
    json_t *j = json_loads(r.out, 0, &e);
    cr_assert_not_null(j, "not JSON: %s", e.text);
    json_t *ipl = json_object_get(j, "iterations_per_loop");
    cr_assert_str_eq(json_string_value(json_object_get(ipl, "unit")), "seconds");
    cr_assert_eq(json_integer_value(json_object_get(ipl, "value")), 3600);
    cr_assert_eq(json_integer_value(json_object_get(j, "num_hosts")), 4);
    cr_assert_eq(json_integer_value(json_object_get(j, "num_devices")), 32);
    cr_assert_eq(json_integer_value(json_object_get(j, "devices_per_host")), 8);
    cr_assert_eq(json_integer_value(json_object_get(j, "num_cores_per_replica")), 2);
    cr_assert_eq(json_integer_value(json_object_get(j, "num_replicas")), 16);
    cr_assert_eq(json_integer_value(json_object_get(j, "replicas_per_host")), 4);
    json_t *tpu = json_object_get(j, "tpu_config");
    cr_assert_str_eq(json_string_value(json_object_get(tpu, "per_host_input_for_training")), "PER_HOST_V2");
    cr_assert(json_is_null(json_object_get(tpu, "num_shards")));
    json_t *in = json_object_get(j, "input");
    json_t *train = json_object_get(in, "train");
    cr_assert_str_eq(json_string_value(json_object_get(train, "mode")), "PER_HOST_V2");
    cr_assert_eq(json_integer_value(json_object_get(train, "input_fn_calls")), 4);
    cr_assert_eq(json_integer_value(json_object_get(train, "input_fn_batch_size")), 32);
    cr_assert_eq(json_integer_value(json_object_get(train, "model_fn_batch_size")), 32);
    cr_assert_eq(json_integer_value(json_object_get(train, "replicas_per_call")), 4);
    json_t *eval = json_object_get(in, "eval");
    cr_assert_str_eq(json_string_value(json_object_get(eval, "mode")), "SLICED");
    cr_assert_eq(json_integer_value(json_object_get(eval, "input_fn_calls")), 1);
    cr_assert_eq(json_integer_value(json_object_get(eval, "model_fn_batch_size")), 4);
    cr_assert(json_is_null(json_object_get(in, "predict")), "predict_batch_size unset -> null");
    json_decref(j);
    tc_done(&r);
}

Test(cli, config_json_null_ncpr_when_unset)
{
    tc_result r = tc_run(NULL, "config --devices=3 --json");
    cr_assert_eq(r.status, 0, "stderr: %s", r.err);
    json_t *j = json_loads(r.out, 0, NULL);
    cr_assert_not_null(j);
    cr_assert(json_is_null(json_object_get(j, "num_cores_per_replica")));
    cr_assert_eq(json_integer_value(json_object_get(j, "num_replicas")), 3);
    cr_assert(json_is_null(json_object_get(json_object_get(j, "input"), "train")));
    json_decref(j);
    tc_done(&r);
}

Test(cli, bad_config_value_exits_2_with_error_line)
{
    tc_result r = tc_run(NULL, "config --num_cores_per_replica=3");
    cr_assert_eq(r.status, 2);
    cr_assert(strstr(r.err, "error: num_cores_per_replica must be 1, 2, 4, 8, 16, 32, 64, 128; got 3"), "%s", r.err);
    cr_assert(strstr(r.err, "[from flag --num_cores_per_replica]"), "%s", r.err);
    cr_assert_str_eq(r.out, "");
    tc_done(&r);
}

Test(cli, bad_topology_exits_2)
{
    tc_result r = tc_run(NULL, "config --devices=8 --train_batch_size=127");
    cr_assert_eq(r.status, 2);
    cr_assert(strstr(r.err, "error: train batch size 127 must be divisible by number of replicas 8"), "%s", r.err);
    tc_done(&r);
}

Test(cli, unknown_flag_and_command_exit_2)
{
    tc_result r = tc_run(NULL, "config --no_such_option=1");
    cr_assert_eq(r.status, 2);
    cr_assert(strstr(r.err, "error: unknown option '--no_such_option=1'"), "%s", r.err);
    tc_done(&r);
    r = tc_run(NULL, "frobnicate");
    cr_assert_eq(r.status, 2);
    cr_assert(strstr(r.err, "error: unknown command 'frobnicate'"), "%s", r.err);
    tc_done(&r);
    r = tc_run(NULL, "");
    cr_assert_eq(r.status, 2);
    tc_done(&r);
}

Test(cli, config_file_then_env_then_flags)
{
    char path[] = "/tmp/tpuloop-cli-cfg-XXXXXX";
    tu_write_temp(path,
                  "{\"train_batch_size\": 64, \"devices\": 2,\n \"tpu_config\": {\"iterations_per_loop\": \"30s\"}}\n");
    char args[256];
    snprintf(args, sizeof args, "config %s --json --iterations_per_loop=7", path);
    tc_result r = tc_run("TPULOOP_DEVICE_COUNT=4", args);
    cr_assert_eq(r.status, 0, "stderr: %s", r.err);
    json_t *j = json_loads(r.out, 0, NULL);
    cr_assert_not_null(j);
    cr_assert_eq(json_integer_value(json_object_get(j, "num_devices")), 4, "env beats the file");
    json_t *ipl = json_object_get(j, "iterations_per_loop");
    cr_assert_str_eq(json_string_value(json_object_get(ipl, "unit")), "count", "the flag beats the file");
    cr_assert_eq(json_integer_value(json_object_get(ipl, "value")), 7);
    json_t *train = json_object_get(json_object_get(j, "input"), "train");
    cr_assert_eq(json_integer_value(json_object_get(train, "model_fn_batch_size")), 16);
    json_decref(j);
    tc_done(&r);
    unlink(path);
}

Test(cli, malformed_config_file_names_line_and_column)
{
    char path[] = "/tmp/tpuloop-cli-bad-XXXXXX";
    tu_write_temp(path, "{\n  \"devices\": 2\n  \"num_hosts\": 1\n}\n");
    char args[256], want[300];
    snprintf(args, sizeof args, "config %s", path);
    tc_result r = tc_run(NULL, args);
    cr_assert_eq(r.status, 2);
    snprintf(want, sizeof want, "error: %s:3:", path);
    cr_assert(strstr(r.err, want), "%s", r.err);
    tc_done(&r);
    unlink(path);
    r = tc_run(NULL, "config /nonexistent/tpuloop.json");
    cr_assert_eq(r.status, 2);
    cr_assert(strstr(r.err, "error: cannot open config file /nonexistent/tpuloop.json"), "%s", r.err);
    tc_done(&r);
}

Test(cli, devices_lists_virtual_devices)
{
    tc_result r = tc_run(NULL, "devices --devices=3");
    cr_assert_eq(r.status, 0, "stderr: %s", r.err);
    cr_assert(strstr(r.out, "cpu:0") && strstr(r.out, "cpu:2") && !strstr(r.out, "cpu:3"), "%s", r.out);
    tc_done(&r);
    r = tc_run("TPULOOP_DEVICE_COUNT=5", "devices --json");
    cr_assert_eq(r.status, 0, "stderr: %s", r.err);
    json_t *j = json_loads(r.out, 0, NULL);
    cr_assert_not_null(j);
    cr_assert_eq(json_integer_value(json_object_get(j, "num_devices")), 5);
    json_t *d4 = json_array_get(json_object_get(j, "devices"), 4);
    cr_assert_str_eq(json_string_value(json_object_get(d4, "name")), "cpu:4");
    json_decref(j);
    tc_done(&r);
    r = tc_run(NULL, "devices --devices=-1");
    cr_assert_eq(r.status, 2);
    cr_assert(strstr(r.err, "error: devices must be in [0, 4096], got -1"), "%s", r.err);
    tc_done(&r);
}

Test(cli, devices_default_is_one_per_core)
{
    tc_result r = tc_run(NULL, "devices --json");
    cr_assert_eq(r.status, 0, "stderr: %s", r.err);
    json_t *j = json_loads(r.out, 0, NULL);
    cr_assert_not_null(j);
    cpu_set_t set;
    CPU_ZERO(&set);
    cr_assert_eq(sched_getaffinity(0, sizeof set, &set), 0);
    cr_assert_eq(json_integer_value(json_object_get(j, "num_devices")), CPU_COUNT(&set));
    cr_assert(json_is_false(json_object_get(j, "virtual")));
    json_decref(j);
    tc_done(&r);
}

Test(cli, help_config_lists_options)
{
    tc_result r = tc_run(NULL, "help config");
    cr_assert_eq(r.status, 0);
    cr_assert(strstr(r.out, "--iterations_per_loop") && strstr(r.out, "--num_cores_per_replica") &&
              strstr(r.out, "TPULOOP_DEVICE_COUNT"));
    tc_done(&r);
}

Test(cli, help_lists_every_command)
{
    tc_result r = tc_run(NULL, "help");
    cr_assert_eq(r.status, 0);
    static const char *const cmds[] = {"\n  config ", "\n  train ", "\n  evaluate ", "\n  predict ",
                                       "\n  ckpt list ", "\n  ckpt inspect ", "\n  data inspect ", "\n  data convert ",
                                       "\n  devices ", "\n  help "};
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++)
        cr_assert(strstr(r.out, cmds[i]), "no%s in\n%s", cmds[i], r.out);
    tc_done(&r);
}

Test(cli, train_evaluates_predicts_and_summarises, .timeout = 120)
{
    char pred[] = "/tmp/tpuloop-cli-pred-XXXXXX.csv", summary[] = "/tmp/tpuloop-cli-sum-XXXXXX";
    int fp = mkstemps(pred, 4), fs = mkstemp(summary);
    cr_assert(fp >= 0 && fs >= 0);
    close(fp);
    close(fs);
    char args[512];
    snprintf(args, sizeof args,
             "train configs/mlp_fashion_mnist.json --train_steps=30 --hidden_units=[32] --devices=2 "
             "--predict --predictions_out=%s --summary_json=%s",
             pred, summary);
    tc_result r = tc_run(NULL, args);
    cr_assert_eq(r.status, 0, "stderr: %s", r.err);
    json_t *j = json_loads(r.out, 0, NULL);
    cr_assert_not_null(j, "stdout is one JSON line: %s", r.out);
    cr_assert_eq(json_integer_value(json_object_get(j, "global_step")), 30);
    const char *digest = json_string_value(json_object_get(j, "params_digest"));
    cr_assert(digest != NULL && strlen(digest) == 64, "params_digest");
    double acc = json_real_value(json_object_get(json_object_get(j, "eval"), "accuracy"));
    cr_assert(acc > 0.3 && acc <= 1.0, "30 steps learn something: accuracy %f", acc);
    cr_assert(json_is_false(json_object_get(j, "stopped")) && json_is_false(json_object_get(j, "skipped")));
    cr_assert(json_is_null(json_object_get(j, "model_dir")) && json_is_null(json_object_get(j, "restored_from_step")),
              "no model_dir: nothing restored");
    json_decref(j);
    char *sum = tc_slurp(summary), *csv = tc_slurp(pred);
    cr_assert(sum != NULL && csv != NULL);
    cr_assert_str_eq(sum, r.out, "--summary_json holds the same line");
    int lines = 0;
    for (const char *c = csv; *c; c++)
        lines += *c == '\n';
    cr_assert_eq(lines, 10001, "a header and one row per test example");
    cr_assert(strncmp(csv, "index,class,p0,", 15) == 0);
    free(sum);
    free(csv);
    unlink(pred);
    unlink(summary);
    tc_done(&r);
}

Test(cli, train_needs_a_batch_size_and_predict_needs_its_own)
{
    tc_result r = tc_run(NULL, "train --train_steps=5");
    cr_assert_eq(r.status, 2);
    cr_assert(strstr(r.err, "error: `train_batch_size` cannot be `None`"), "%s", r.err);
    tc_done(&r);
    r = tc_run(NULL, "train --train_batch_size=8 --train_steps=5 --predict");
    cr_assert_eq(r.status, 2);
    cr_assert(strstr(r.err, "--predict needs predict_batch_size"), "%s", r.err);
    tc_done(&r);
}
