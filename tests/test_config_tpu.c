/*
 * test_config_tpu.c — iterations_per_loop parsing and TensorFlow's checks of
 * TPUConfig, with TensorFlow's messages (spec §1, §1.1 and test vectors
 * T1–T13d). RunConfig, TPUEstimator and the order of the checks are in
 * test_config_run.c; sources, flags, files, JSON output and allocation
 * failure in test_config_sources.c and test_config_json.c.
 *
 * Every failing case checks both the status (TL_EINVAL is Python's
 * ValueError, TL_ETYPE its TypeError) and a distinctive fragment of
 * TensorFlow's message; every accepted case checks the resolved value.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

/* ---- tl_parse_iterations_per_loop (spec §1.1, T1–T6) --------------------- */

static void ipl_ok(const char *text, tl_ipl_unit unit, int64_t value)
{
    tl_ipl out = {TL_IPL_COUNT, -1};
    tl_status st = tl_parse_iterations_per_loop(text, &out);
    cr_assert_eq(st, TL_OK, "\"%s\": %s: %s", text, tl_err_name(st), tl_last_error());
    cr_assert_eq(out.unit, unit, "\"%s\": unit %d, want %d", text, (int)out.unit, (int)unit);
    cr_assert_eq(out.value, value, "\"%s\": value %lld, want %lld", text, (long long)out.value, (long long)value);
}

static void ipl_rejected(const char *text)
{
    tl_ipl out = {TL_IPL_COUNT, 0};
    char what[128];
    snprintf(what, sizeof what, "tl_parse_iterations_per_loop(\"%s\")", text);
    tl_status st = tl_parse_iterations_per_loop(text, &out);
    tu_expect_error(st, TL_EINVAL, "must be positive", what);
    tu_expect_error(st, TL_EINVAL, "Invalid TPUConfig `iterations_per_loop` value.", what);
}

Test(ipl, T1_counts)
{
    ipl_ok("1", TL_IPL_COUNT, 1);
    ipl_ok("2", TL_IPL_COUNT, 2);
    ipl_ok("123", TL_IPL_COUNT, 123);
    ipl_ok("10", TL_IPL_COUNT, 10);
    ipl_ok("1000000", TL_IPL_COUNT, 1000000);
}

Test(ipl, T2_seconds)
{
    ipl_ok("30s", TL_IPL_SECONDS, 30);
    ipl_ok("1s", TL_IPL_SECONDS, 1);
}

Test(ipl, T3_minutes_and_hours_convert_to_seconds)
{
    ipl_ok("1m", TL_IPL_SECONDS, 60);
    ipl_ok("60m", TL_IPL_SECONDS, 3600);
    ipl_ok("1h", TL_IPL_SECONDS, 3600);
    ipl_ok("10h", TL_IPL_SECONDS, 36000);
    ipl_ok("1000m", TL_IPL_SECONDS, 60000);
    ipl_ok("10800s", TL_IPL_SECONDS, 10800);
}

Test(ipl, T4_zero_sign_leading_zero_rejected)
{
    /* -0o12 is str()'d by Python as "-10". */
    static const char *const bad[] = {"0",  "-1", "01",  "012", "001", "0s",  "0m",
                                      "0h", "-1s", "-1h", "-10", "+5", "00", "010"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        ipl_rejected(bad[i]);
}

Test(ipl, T5_fraction_space_case_bool_rejected)
{
    static const char *const bad[] = {"1.5h", "2.0", "30S", " 5", "5 ", "True", "30sec",
                                      "",     "s",   "h",   "5hh", "5ms", "1e3", "0x10", "5\t"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        ipl_rejected(bad[i]);
}

Test(ipl, T6_python_regex_quirks_rejected)
{
    /* TensorFlow accepts these by accident; the spec recommends rejecting. */
    ipl_rejected("5|");
    ipl_rejected("5\n");
    ipl_rejected("5s\n");
    ipl_rejected("5|\n");
    ipl_rejected("|");
}

Test(ipl, int64_limits)
{
    ipl_ok("9223372036854775807", TL_IPL_COUNT, INT64_MAX);
    ipl_rejected("9223372036854775808");
    ipl_rejected("99999999999999999999999999");
    ipl_ok("9223372036854775807s", TL_IPL_SECONDS, INT64_MAX);
    ipl_ok("153722867280912930m", TL_IPL_SECONDS, INT64_C(153722867280912930) * 60);
    ipl_rejected("153722867280912931m");
    ipl_ok("2562047788015215h", TL_IPL_SECONDS, INT64_C(2562047788015215) * 3600);
    ipl_rejected("2562047788015216h");
}

Test(ipl, T4_message_is_tensorflows_text)
{
    tl_ipl out;
    tu_expect_error(tl_parse_iterations_per_loop("0", &out), TL_EINVAL,
                    "Invalid TPUConfig `iterations_per_loop` value. Value must be positive integer value or "
                    "time-based value `<N><s|m|h>` where <N> is anypositive integer and `s`, `m`, `h` are unit of "
                    "time in seconds, minutes, hours respectively. Examples of valid values: `3600s`, `60m`, `1h`.",
                    "iterations_per_loop 0");
}

/* ---- iterations_per_loop through the configuration: str(value) --------- */

TestSuite(ipl_config, .init = tu_quiet);

static void check_ipl(tl_config *cfg, tl_ipl_unit unit, int64_t value)
{
    const tl_run_config *rc = tu_resolve_ok(cfg);
    cr_assert_eq(rc->tpu.iterations_per_loop.unit, unit, "unit %d, want %d", (int)rc->tpu.iterations_per_loop.unit,
                 (int)unit);
    cr_assert_eq(rc->tpu.iterations_per_loop.value, value, "value %lld, want %lld",
                 (long long)rc->tpu.iterations_per_loop.value, (long long)value);
    tl_config_destroy(cfg);
}

Test(ipl_config, default_is_count_2)
{
    check_ipl(tu_new_config(), TL_IPL_COUNT, 2);
}

Test(ipl_config, T1_json_int)
{
    check_ipl(tu_from_json("{'tpu_config': {'iterations_per_loop': 2}}"), TL_IPL_COUNT, 2);
}

Test(ipl_config, T2_json_string_30s)
{
    check_ipl(tu_from_json("{'tpu_config': {'iterations_per_loop': '30s'}}"), TL_IPL_SECONDS, 30);
}

Test(ipl_config, T3_flag_1h)
{
    tl_config *cfg = tu_new_config();
    tu_set_flag(cfg, "iterations_per_loop", "1h");
    check_ipl(cfg, TL_IPL_SECONDS, 3600);
}

Test(ipl_config, T5_json_real_2_0_rejected)
{
    /* str(2.0) is "2.0". */
    tu_json_fails("{'tpu_config': {'iterations_per_loop': 2.0}}", TL_EINVAL, "must be positive");
}

Test(ipl_config, T5_json_true_rejected)
{
    /* str(True) is "True": not 1. */
    tu_json_fails("{'tpu_config': {'iterations_per_loop': true}}", TL_EINVAL, "must be positive");
}

Test(ipl_config, T5_flag_text_True_rejected)
{
    tl_config *cfg = tu_new_config();
    tu_set_flag(cfg, "iterations_per_loop", "True");
    tu_resolve_fails(cfg, TL_EINVAL, "must be positive");
    tl_config_destroy(cfg);
}

Test(ipl_config, T4_json_zero_and_negative_rejected)
{
    tu_json_fails("{'tpu_config': {'iterations_per_loop': 0}}", TL_EINVAL, "must be positive");
    tu_json_fails("{'tpu_config': {'iterations_per_loop': -1}}", TL_EINVAL, "must be positive");
    tu_json_fails("{'tpu_config': {'iterations_per_loop': '01'}}", TL_EINVAL, "must be positive");
    tu_json_fails("{'tpu_config': {'iterations_per_loop': null}}", TL_EINVAL, "must be positive");
}

Test(ipl_config, error_names_its_source)
{
    tu_json_fails("{'tpu_config': {'iterations_per_loop': '5|'}}", TL_EINVAL, "[from file test.json]");
}

/* ---- TPUConfig (spec §1) ------------------------------------------------- */

TestSuite(tpu_config, .init = tu_quiet);

Test(tpu_config, T7_ncpr_3_rejected)
{
    tu_json_fails("{'tpu_config': {'num_cores_per_replica': 3}}", TL_EINVAL,
                  "num_cores_per_replica must be 1, 2, 4, 8, 16, 32, 64, 128; got 3");
}

Test(tpu_config, T7_ncpr_7_rejected)
{
    tu_json_fails("{'tpu_config': {'num_cores_per_replica': 7}}", TL_EINVAL,
                  "num_cores_per_replica must be 1, 2, 4, 8, 16, 32, 64, 128; got 7");
}

Test(tpu_config, T7_ncpr_flag_message_and_source)
{
    tl_config *cfg = tu_new_config();
    tu_set_flag(cfg, "num_cores_per_replica", "3");
    tu_resolve_fails(cfg, TL_EINVAL,
                     "num_cores_per_replica must be 1, 2, 4, 8, 16, 32, 64, 128; got 3 "
                     "[from flag --num_cores_per_replica]");
    tl_config_destroy(cfg);
}

Test(tpu_config, T8_every_power_of_two_to_128_accepted)
{
    static const char *const ok[] = {"1", "2", "4", "8", "16", "32", "64", "128"};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        tl_config *cfg = tu_new_config();
        tu_set_flag(cfg, "num_cores_per_replica", ok[i]);
        const tl_run_config *rc = tu_resolve_ok(cfg);
        cr_assert(rc->tpu.num_cores_per_replica.set, "ncpr %s not set", ok[i]);
        cr_assert_eq(rc->tpu.num_cores_per_replica.value, (int64_t)atoll(ok[i]), "ncpr %s resolved to %lld", ok[i],
                     (long long)rc->tpu.num_cores_per_replica.value);
        tl_config_destroy(cfg);
    }
}

Test(tpu_config, T8_256_and_0_rejected)
{
    tu_json_fails("{'tpu_config': {'num_cores_per_replica': 256}}", TL_EINVAL, "128; got 256");
    tu_json_fails("{'tpu_config': {'num_cores_per_replica': 0}}", TL_EINVAL, "128; got 0");
    tu_json_fails("{'tpu_config': {'num_cores_per_replica': -2}}", TL_EINVAL, "128; got -2");
}

Test(tpu_config, ncpr_default_is_none)
{
    tl_config *cfg = tu_new_config();
    cr_assert_not(tu_resolve_ok(cfg)->tpu.num_cores_per_replica.set, "ncpr must default to None");
    tl_config_destroy(cfg);
}

Test(tpu_config, T9_num_shards_zero_is_value_error)
{
    tu_json_fails("{'tpu_config': {'num_shards': 0}}", TL_EINVAL, "TPUConfig num_shards must be positive, got 0");
    tu_json_fails("{'tpu_config': {'num_shards': -3}}", TL_EINVAL, "TPUConfig num_shards must be positive, got -3");
}

Test(tpu_config, T9_num_shards_float_is_type_error)
{
    tu_json_fails("{'tpu_config': {'num_shards': 2.0}}", TL_ETYPE,
                  "TPUConfig num_shards must be int, got <class 'float'>");
    tu_json_fails("{'tpu_config': {'num_shards': '2'}}", TL_ETYPE,
                  "TPUConfig num_shards must be int, got <class 'str'>");
}

Test(tpu_config, T9_num_shards_accepted)
{
    tl_config *cfg = tu_from_json("{'tpu_config': {'num_shards': 8}}");
    const tl_run_config *rc = tu_resolve_ok(cfg);
    cr_assert(rc->tpu.num_shards.set, "num_shards 8 not set");
    cr_assert_eq(rc->tpu.num_shards.value, 8, "num_shards %lld", (long long)rc->tpu.num_shards.value);
    tl_config_destroy(cfg);
    cfg = tu_new_config();
    cr_assert_not(tu_resolve_ok(cfg)->tpu.num_shards.set, "num_shards must default to None");
    tl_config_destroy(cfg);
}

Test(tpu_config, T10_partition_dims_need_per_host_v2)
{
    static const char msg[] = "input_partition_dims is only supported in PER_HOST_V2 mode.";
    /* The default (True) fails before True is mapped to PER_HOST_V1. */
    tu_json_fails("{'tpu_config': {'input_partition_dims': [[1,2,2,1], null]}}", TL_EINVAL, msg);
    tu_json_fails("{'tpu_config': {'input_partition_dims': [[1,2,2,1], null], 'per_host_input_for_training': true,"
                  " 'num_cores_per_replica': 4}}",
                  TL_EINVAL, msg);
    tu_json_fails("{'tpu_config': {'input_partition_dims': [[1,2,2,1], null],"
                  " 'per_host_input_for_training': 'PER_HOST_V1', 'num_cores_per_replica': 4}}",
                  TL_EINVAL, msg);
    tu_json_fails("{'tpu_config': {'input_partition_dims': [[1,2,2,1]], 'per_host_input_for_training': 4,"
                  " 'num_cores_per_replica': 4}}",
                  TL_EINVAL, msg);
}

Test(tpu_config, T11_partition_dims_need_ncpr)
{
    tu_json_fails("{'tpu_config': {'input_partition_dims': [[1,2,2,1], null],"
                  " 'per_host_input_for_training': 'PER_HOST_V2'}}",
                  TL_EINVAL, "input_partition_dims requires setting num_cores_per_replica.");
    tu_json_fails("{'tpu_config': {'input_partition_dims': [[1,2,2,1]], 'per_host_input_for_training': 3}}", TL_EINVAL,
                  "input_partition_dims requires setting num_cores_per_replica.");
}

Test(tpu_config, T12_partition_dims_one_or_two_elements)
{
    static const char msg[] = "input_partition_dims must be a list/tuple with one or two elements.";
    tu_json_fails("{'tpu_config': {'input_partition_dims': [[1], [1], [1]], 'per_host_input_for_training': 3,"
                  " 'num_cores_per_replica': 1}}",
                  TL_EINVAL, msg);
    tu_json_fails("{'tpu_config': {'input_partition_dims': [], 'per_host_input_for_training': 3,"
                  " 'num_cores_per_replica': 1}}",
                  TL_EINVAL, msg);
}

Test(tpu_config, T12_partition_dims_accepted_with_v2_and_ncpr)
{
    tl_config *cfg = tu_from_json("{'tpu_config': {'input_partition_dims': [[1,2,2,1], null],"
                                  " 'per_host_input_for_training': 3, 'num_cores_per_replica': 4}}");
    const tl_run_config *rc = tu_resolve_ok(cfg);
    cr_assert_not_null(rc->tpu.input_partition_dims, "input_partition_dims not kept");
    cr_assert_eq(rc->tpu.per_host_input_for_training, TL_PER_HOST_V2, "per_host %d",
                 (int)rc->tpu.per_host_input_for_training);
    tl_config_destroy(cfg);
    cfg = tu_new_config();
    cr_assert_null(tu_resolve_ok(cfg)->tpu.input_partition_dims, "input_partition_dims must default to None");
    tl_config_destroy(cfg);
}

Test(tpu_config, T13_eval_input_broadcast_rejected)
{
    static const char msg[] = "eval_training_input_configuration must be PER_HOST_V1 or SLICED; got 4";
    tu_json_fails("{'tpu_config': {'eval_training_input_configuration': 4}}", TL_EINVAL, msg);
    tu_json_fails("{'tpu_config': {'eval_training_input_configuration': 'BROADCAST'}}", TL_EINVAL, msg);
    tu_json_fails("{'tpu_config': {'eval_training_input_configuration': 'PER_HOST_V2'}}", TL_EINVAL,
                  "must be PER_HOST_V1 or SLICED; got 3");
    tu_json_fails("{'tpu_config': {'eval_training_input_configuration': 1}}", TL_EINVAL,
                  "must be PER_HOST_V1 or SLICED; got 1");
    tu_json_fails("{'tpu_config': {'eval_training_input_configuration': 'bogus'}}", TL_EINVAL,
                  "must be PER_HOST_V1 or SLICED; got bogus");
}

Test(tpu_config, T13_eval_input_per_host_v1_and_sliced_accepted)
{
    tl_config *cfg = tu_from_json("{'tpu_config': {'eval_training_input_configuration': 'SLICED'}}");
    cr_assert_eq(tu_resolve_ok(cfg)->tpu.eval_training_input_configuration, TL_SLICED, "SLICED by name");
    tl_config_destroy(cfg);
    cfg = tu_from_json("{'tpu_config': {'eval_training_input_configuration': 5}}");
    cr_assert_eq(tu_resolve_ok(cfg)->tpu.eval_training_input_configuration, TL_SLICED, "SLICED as 5");
    tl_config_destroy(cfg);
    cfg = tu_from_json("{'tpu_config': {'eval_training_input_configuration': 2}}");
    cr_assert_eq(tu_resolve_ok(cfg)->tpu.eval_training_input_configuration, TL_PER_HOST_V1, "PER_HOST_V1 as 2");
    tl_config_destroy(cfg);
}

Test(tpu_config, T13b_infeed_sleep_zero_means_no_sleep)
{
    tl_config *cfg = tu_from_json("{'tpu_config': {'initial_infeed_sleep_secs': 0}}");
    cr_assert_eq(tu_resolve_ok(cfg)->tpu.initial_infeed_sleep_secs, 0, "sleep 0");
    tl_config_destroy(cfg);
    cfg = tu_from_json("{'tpu_config': {'initial_infeed_sleep_secs': null}}");
    cr_assert_eq(tu_resolve_ok(cfg)->tpu.initial_infeed_sleep_secs, 0, "sleep None");
    tl_config_destroy(cfg);
    cfg = tu_from_json("{'tpu_config': {'initial_infeed_sleep_secs': 30}}");
    cr_assert_eq(tu_resolve_ok(cfg)->tpu.initial_infeed_sleep_secs, 30, "sleep 30");
    tl_config_destroy(cfg);
}

Test(tpu_config, T13b_infeed_sleep_negative_is_value_error)
{
    tu_json_fails("{'tpu_config': {'initial_infeed_sleep_secs': -5}}", TL_EINVAL,
                  "TPUConfig initial_infeed_sleep_secs must be positive, got -5");
}

Test(tpu_config, T13b_infeed_sleep_float_is_type_error)
{
    tu_json_fails("{'tpu_config': {'initial_infeed_sleep_secs': 2.5}}", TL_ETYPE,
                  "TPUConfig initial_infeed_sleep_secs must be int, got <class 'float'>");
    tu_json_fails("{'tpu_config': {'initial_infeed_sleep_secs': 30.0}}", TL_ETYPE,
                  "TPUConfig initial_infeed_sleep_secs must be int, got <class 'float'>");
}

Test(tpu_config, T13b_infeed_sleep_zero_float_is_falsy)
{
    /* TensorFlow checks the value only `if initial_infeed_sleep_secs:`, so
     * 0.0 (as a flag, a file or -0.0) passes unchecked and means no sleep. */
    static const char *const zeros[] = {"{'tpu_config': {'initial_infeed_sleep_secs': 0.0}}",
                                        "{'tpu_config': {'initial_infeed_sleep_secs': -0.0}}"};
    for (size_t i = 0; i < sizeof zeros / sizeof zeros[0]; i++) {
        tl_config *cfg = tu_from_json(zeros[i]);
        cr_assert_eq(tu_resolve_ok(cfg)->tpu.initial_infeed_sleep_secs, 0, "%s", zeros[i]);
        tl_config_destroy(cfg);
    }
    tl_config *cfg = tu_new_config();
    tu_set_flag(cfg, "initial_infeed_sleep_secs", "0.0");
    cr_assert_eq(tu_resolve_ok(cfg)->tpu.initial_infeed_sleep_secs, 0, "--initial_infeed_sleep_secs=0.0");
    tl_config_destroy(cfg);
}

Test(tpu_config, T13b_infeed_sleep_falsy_non_numbers_are_type_errors)
{
    /* TensorFlow lets False, '' and [] pass unchecked; tpuloop refuses them
     * (a documented difference, `tpuloop help config`). */
    tu_json_fails("{'tpu_config': {'initial_infeed_sleep_secs': false}}", TL_ETYPE,
                  "TPUConfig initial_infeed_sleep_secs must be int, got <class 'bool'>");
    tu_json_fails("{'tpu_config': {'initial_infeed_sleep_secs': ''}}", TL_ETYPE,
                  "TPUConfig initial_infeed_sleep_secs must be int, got <class 'str'>");
    tu_json_fails("{'tpu_config': {'initial_infeed_sleep_secs': []}}", TL_ETYPE,
                  "TPUConfig initial_infeed_sleep_secs must be int, got <class 'list'>");
}

static void per_host_is(const char *squoted, tl_input_mode want)
{
    tl_config *cfg = tu_from_json(squoted);
    tl_input_mode got = tu_resolve_ok(cfg)->tpu.per_host_input_for_training;
    cr_assert_eq(got, want, "%s: per_host %s, want %s", squoted, tl_input_mode_name(got), tl_input_mode_name(want));
    tl_config_destroy(cfg);
}

Test(tpu_config, T13c_per_host_legacy_booleans)
{
    per_host_is("{'tpu_config': {'per_host_input_for_training': false}}", TL_PER_SHARD_V1);
    per_host_is("{'tpu_config': {'per_host_input_for_training': true}}", TL_PER_HOST_V1);
    per_host_is("{}", TL_PER_HOST_V1);
    cr_assert_eq(TL_PER_SHARD_V1, 1, "InputPipelineConfig.PER_SHARD_V1 is 1");
    cr_assert_eq(TL_PER_HOST_V1, 2, "InputPipelineConfig.PER_HOST_V1 is 2");
}

Test(tpu_config, T13c_per_host_modes_by_name_and_value)
{
    per_host_is("{'tpu_config': {'per_host_input_for_training': 'PER_HOST_V2'}}", TL_PER_HOST_V2);
    per_host_is("{'tpu_config': {'per_host_input_for_training': 3}}", TL_PER_HOST_V2);
    per_host_is("{'tpu_config': {'per_host_input_for_training': 'BROADCAST'}}", TL_BROADCAST);
    per_host_is("{'tpu_config': {'per_host_input_for_training': 4}}", TL_BROADCAST);
    per_host_is("{'tpu_config': {'per_host_input_for_training': 'PER_SHARD_V1'}}", TL_PER_SHARD_V1);
    cr_assert_eq((int)TL_PER_HOST_V2, 3, "PER_HOST_V2 is 3");
    cr_assert_eq((int)TL_BROADCAST, 4, "BROADCAST is 4");
    cr_assert_eq((int)TL_SLICED, 5, "SLICED is 5");
}

Test(tpu_config, T13c_per_host_flag_text)
{
    tl_config *cfg = tu_new_config();
    tu_set_flag(cfg, "per_host_input_for_training", "False");
    cr_assert_eq(tu_resolve_ok(cfg)->tpu.per_host_input_for_training, TL_PER_SHARD_V1, "--per_host...=False");
    tu_set_flag(cfg, "per_host_input_for_training", "PER_HOST_V2");
    cr_assert_eq(tu_resolve_ok(cfg)->tpu.per_host_input_for_training, TL_PER_HOST_V2, "--per_host...=PER_HOST_V2");
    tl_config_destroy(cfg);
}

Test(tpu_config, T13c_per_host_sliced_and_unknown_rejected)
{
    tu_json_fails("{'tpu_config': {'per_host_input_for_training': 'SLICED'}}", TL_EINVAL,
                  "per_host_input_for_training");
    tu_json_fails("{'tpu_config': {'per_host_input_for_training': 5}}", TL_EINVAL, "SLICED");
    tu_json_fails("{'tpu_config': {'per_host_input_for_training': 7}}", TL_EINVAL, "per_host_input_for_training");
}

Test(tpu_config, input_mode_names)
{
    cr_assert_str_eq(tl_input_mode_name(TL_PER_SHARD_V1), "PER_SHARD_V1", "name of 1");
    cr_assert_str_eq(tl_input_mode_name(TL_PER_HOST_V1), "PER_HOST_V1", "name of 2");
    cr_assert_str_eq(tl_input_mode_name(TL_PER_HOST_V2), "PER_HOST_V2", "name of 3");
    cr_assert_str_eq(tl_input_mode_name(TL_BROADCAST), "BROADCAST", "name of 4");
    cr_assert_str_eq(tl_input_mode_name(TL_SLICED), "SLICED", "name of 5");
    cr_assert_str_eq(tl_input_mode_name((tl_input_mode)0), "UNKNOWN", "name of 0");
    cr_assert_str_eq(tl_input_mode_name((tl_input_mode)9), "UNKNOWN", "name of 9");
}

Test(tpu_config, T13d_tpu_job_name_from_tf_config)
{
    tl_config *cfg = tu_new_config();
    const char *envp[] = {"TF_CONFIG={\"service\":{\"tpu_worker_job_name\":\"x\"}}", NULL};
    cr_assert_eq(tl_config_apply_env(cfg, envp), TL_OK, "apply_env: %s", tl_last_error());
    const tl_run_config *rc = tu_resolve_ok(cfg);
    cr_assert_not_null(rc->tpu.tpu_job_name, "tpu_job_name not read from TF_CONFIG");
    cr_assert_str_eq(rc->tpu.tpu_job_name, "x", "tpu_job_name");
    tl_config_destroy(cfg);
}

Test(tpu_config, T13d_explicit_tpu_job_name_wins)
{
    tl_config *cfg =
        tu_with_env("{'tpu_config': {'tpu_job_name': 'mine'}}", "{\"service\":{\"tpu_worker_job_name\":\"x\"}}");
    cr_assert_str_eq(tu_resolve_ok(cfg)->tpu.tpu_job_name, "mine", "explicit tpu_job_name");
    tl_config_destroy(cfg);
}

Test(tpu_config, T13d_no_tf_config_leaves_job_name_none)
{
    tl_config *cfg = tu_new_config();
    cr_assert_null(tu_resolve_ok(cfg)->tpu.tpu_job_name, "tpu_job_name without TF_CONFIG");
    tl_config_destroy(cfg);
    cfg = tu_with_env("{}", "{\"service\":{}}");
    cr_assert_null(tu_resolve_ok(cfg)->tpu.tpu_job_name, "tpu_job_name with an empty service");
    tl_config_destroy(cfg);
}

Test(tpu_config, T13d_service_not_a_dict_is_type_error)
{
    tl_config *cfg = tu_with_env("{}", "{\"service\": 3}");
    tu_resolve_fails(cfg, TL_ETYPE, "If \"service\" is set in TF_CONFIG, it must be a dict.");
    tl_config_destroy(cfg);
}

Test(tpu_config, host_call_every_n_steps_zero_rejected)
{
    tu_json_fails("{'tpu_config': {'experimental_host_call_every_n_steps': 0}}", TL_EINVAL, ">= 1");
    tu_json_fails("{'tpu_config': {'experimental_host_call_every_n_steps': -4}}", TL_EINVAL, ">= 1");
    tu_json_fails("{'tpu_config': {'experimental_host_call_every_n_steps': 1.5}}", TL_ETYPE, "must be int");
}

Test(tpu_config, host_call_every_n_steps_accepted)
{
    tl_config *cfg = tu_from_json("{'tpu_config': {'experimental_host_call_every_n_steps': 4}}");
    cr_assert_eq(tu_resolve_ok(cfg)->tpu.experimental_host_call_every_n_steps, 4, "every_n 4");
    tl_config_destroy(cfg);
}
