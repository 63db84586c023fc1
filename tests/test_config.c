/*
 * test_config.c — iterations_per_loop parsing and TensorFlow's checks of the
 * run configuration, in TensorFlow's order, with TensorFlow's messages
 * (spec §1, §1.1, §2, §4.5 and test vectors T1–T13e, T24, T25, T43, T50,
 * T51, T54). Sources, flags, files, JSON output and allocation failure are in
 * test_config_sources.c.
 *
 * Every failing case checks both the status (TL_EINVAL is Python's
 * ValueError, TL_ETYPE its TypeError) and a distinctive fragment of
 * TensorFlow's message; every accepted case checks the resolved value.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* JSON written with ' for " so the tests stay readable; the result is loaded
 * as the file "test.json". */
static tl_config *from_json(const char *squoted)
{
    char text[2048];
    size_t n = strlen(squoted);
    cr_assert_lt(n, sizeof text, "test JSON too long");
    for (size_t i = 0; i <= n; i++)
        text[i] = squoted[i] == '\'' ? '"' : squoted[i];
    tl_config *cfg = new_config();
    tl_status st = tl_config_load_json(cfg, text, n, "test.json");
    cr_assert_eq(st, TL_OK, "load_json(%s): %s: %s", text, tl_err_name(st), tl_last_error());
    return cfg;
}

static void set_flag(tl_config *cfg, const char *name, const char *text)
{
    tl_status st = tl_config_set(cfg, name, text, TL_SOURCE_FLAG);
    cr_assert_eq(st, TL_OK, "tl_config_set(%s, %s): %s: %s", name, text, tl_err_name(st), tl_last_error());
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

static void resolve_fails(tl_config *cfg, tl_status want, const char *fragment)
{
    expect_error(tl_config_resolve(cfg), want, fragment, "tl_config_resolve");
    cr_assert_null(tl_config_get(cfg), "tl_config_get must stay NULL after a failed resolve");
}

/* Loads the JSON, resolves, expects the error, frees. */
static void json_fails(const char *squoted, tl_status want, const char *fragment)
{
    tl_config *cfg = from_json(squoted);
    resolve_fails(cfg, want, fragment);
    tl_config_destroy(cfg);
}

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
    expect_error(st, TL_EINVAL, "must be positive", what);
    expect_error(st, TL_EINVAL, "Invalid TPUConfig `iterations_per_loop` value.", what);
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
    expect_error(tl_parse_iterations_per_loop("0", &out), TL_EINVAL,
                 "Invalid TPUConfig `iterations_per_loop` value. Value must be positive integer value or "
                 "time-based value `<N><s|m|h>` where <N> is anypositive integer and `s`, `m`, `h` are unit of "
                 "time in seconds, minutes, hours respectively. Examples of valid values: `3600s`, `60m`, `1h`.",
                 "iterations_per_loop 0");
}

/* ---- iterations_per_loop through the configuration: str(value) --------- */

TestSuite(ipl_config, .init = quiet);

static void check_ipl(tl_config *cfg, tl_ipl_unit unit, int64_t value)
{
    const tl_run_config *rc = resolve_ok(cfg);
    cr_assert_eq(rc->tpu.iterations_per_loop.unit, unit, "unit %d, want %d", (int)rc->tpu.iterations_per_loop.unit,
                 (int)unit);
    cr_assert_eq(rc->tpu.iterations_per_loop.value, value, "value %lld, want %lld",
                 (long long)rc->tpu.iterations_per_loop.value, (long long)value);
    tl_config_destroy(cfg);
}

Test(ipl_config, default_is_count_2)
{
    check_ipl(new_config(), TL_IPL_COUNT, 2);
}

Test(ipl_config, T1_json_int)
{
    check_ipl(from_json("{'tpu_config': {'iterations_per_loop': 2}}"), TL_IPL_COUNT, 2);
}

Test(ipl_config, T2_json_string_30s)
{
    check_ipl(from_json("{'tpu_config': {'iterations_per_loop': '30s'}}"), TL_IPL_SECONDS, 30);
}

Test(ipl_config, T3_flag_1h)
{
    tl_config *cfg = new_config();
    set_flag(cfg, "iterations_per_loop", "1h");
    check_ipl(cfg, TL_IPL_SECONDS, 3600);
}

Test(ipl_config, T5_json_real_2_0_rejected)
{
    /* str(2.0) is "2.0". */
    json_fails("{'tpu_config': {'iterations_per_loop': 2.0}}", TL_EINVAL, "must be positive");
}

Test(ipl_config, T5_json_true_rejected)
{
    /* str(True) is "True": not 1. */
    json_fails("{'tpu_config': {'iterations_per_loop': true}}", TL_EINVAL, "must be positive");
}

Test(ipl_config, T5_flag_text_True_rejected)
{
    tl_config *cfg = new_config();
    set_flag(cfg, "iterations_per_loop", "True");
    resolve_fails(cfg, TL_EINVAL, "must be positive");
    tl_config_destroy(cfg);
}

Test(ipl_config, T4_json_zero_and_negative_rejected)
{
    json_fails("{'tpu_config': {'iterations_per_loop': 0}}", TL_EINVAL, "must be positive");
    json_fails("{'tpu_config': {'iterations_per_loop': -1}}", TL_EINVAL, "must be positive");
    json_fails("{'tpu_config': {'iterations_per_loop': '01'}}", TL_EINVAL, "must be positive");
    json_fails("{'tpu_config': {'iterations_per_loop': null}}", TL_EINVAL, "must be positive");
}

Test(ipl_config, error_names_its_source)
{
    json_fails("{'tpu_config': {'iterations_per_loop': '5|'}}", TL_EINVAL, "[from file test.json]");
}

/* ---- TPUConfig (spec §1) ------------------------------------------------- */

TestSuite(tpu_config, .init = quiet);

Test(tpu_config, T7_ncpr_3_rejected)
{
    json_fails("{'tpu_config': {'num_cores_per_replica': 3}}", TL_EINVAL,
               "num_cores_per_replica must be 1, 2, 4, 8, 16, 32, 64, 128; got 3");
}

Test(tpu_config, T7_ncpr_7_rejected)
{
    json_fails("{'tpu_config': {'num_cores_per_replica': 7}}", TL_EINVAL,
               "num_cores_per_replica must be 1, 2, 4, 8, 16, 32, 64, 128; got 7");
}

Test(tpu_config, T7_ncpr_flag_message_and_source)
{
    tl_config *cfg = new_config();
    set_flag(cfg, "num_cores_per_replica", "3");
    resolve_fails(cfg, TL_EINVAL,
                  "num_cores_per_replica must be 1, 2, 4, 8, 16, 32, 64, 128; got 3 [from flag --num_cores_per_replica]");
    tl_config_destroy(cfg);
}

Test(tpu_config, T8_every_power_of_two_to_128_accepted)
{
    static const char *const ok[] = {"1", "2", "4", "8", "16", "32", "64", "128"};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        tl_config *cfg = new_config();
        set_flag(cfg, "num_cores_per_replica", ok[i]);
        const tl_run_config *rc = resolve_ok(cfg);
        cr_assert(rc->tpu.num_cores_per_replica.set, "ncpr %s not set", ok[i]);
        cr_assert_eq(rc->tpu.num_cores_per_replica.value, (int64_t)atoll(ok[i]), "ncpr %s resolved to %lld", ok[i],
                     (long long)rc->tpu.num_cores_per_replica.value);
        tl_config_destroy(cfg);
    }
}

Test(tpu_config, T8_256_and_0_rejected)
{
    json_fails("{'tpu_config': {'num_cores_per_replica': 256}}", TL_EINVAL, "128; got 256");
    json_fails("{'tpu_config': {'num_cores_per_replica': 0}}", TL_EINVAL, "128; got 0");
    json_fails("{'tpu_config': {'num_cores_per_replica': -2}}", TL_EINVAL, "128; got -2");
}

Test(tpu_config, ncpr_default_is_none)
{
    tl_config *cfg = new_config();
    cr_assert_not(resolve_ok(cfg)->tpu.num_cores_per_replica.set, "ncpr must default to None");
    tl_config_destroy(cfg);
}

Test(tpu_config, T9_num_shards_zero_is_value_error)
{
    json_fails("{'tpu_config': {'num_shards': 0}}", TL_EINVAL, "TPUConfig num_shards must be positive, got 0");
    json_fails("{'tpu_config': {'num_shards': -3}}", TL_EINVAL, "TPUConfig num_shards must be positive, got -3");
}

Test(tpu_config, T9_num_shards_float_is_type_error)
{
    json_fails("{'tpu_config': {'num_shards': 2.0}}", TL_ETYPE,
               "TPUConfig num_shards must be int, got <class 'float'>");
    json_fails("{'tpu_config': {'num_shards': '2'}}", TL_ETYPE, "TPUConfig num_shards must be int, got <class 'str'>");
}

Test(tpu_config, T9_num_shards_accepted)
{
    tl_config *cfg = from_json("{'tpu_config': {'num_shards': 8}}");
    const tl_run_config *rc = resolve_ok(cfg);
    cr_assert(rc->tpu.num_shards.set, "num_shards 8 not set");
    cr_assert_eq(rc->tpu.num_shards.value, 8, "num_shards %lld", (long long)rc->tpu.num_shards.value);
    tl_config_destroy(cfg);
    cfg = new_config();
    cr_assert_not(resolve_ok(cfg)->tpu.num_shards.set, "num_shards must default to None");
    tl_config_destroy(cfg);
}

Test(tpu_config, T10_partition_dims_need_per_host_v2)
{
    static const char msg[] = "input_partition_dims is only supported in PER_HOST_V2 mode.";
    /* The default (True) fails before True is mapped to PER_HOST_V1. */
    json_fails("{'tpu_config': {'input_partition_dims': [[1,2,2,1], null]}}", TL_EINVAL, msg);
    json_fails("{'tpu_config': {'input_partition_dims': [[1,2,2,1], null], 'per_host_input_for_training': true,"
               " 'num_cores_per_replica': 4}}",
               TL_EINVAL, msg);
    json_fails("{'tpu_config': {'input_partition_dims': [[1,2,2,1], null],"
               " 'per_host_input_for_training': 'PER_HOST_V1', 'num_cores_per_replica': 4}}",
               TL_EINVAL, msg);
    json_fails("{'tpu_config': {'input_partition_dims': [[1,2,2,1]], 'per_host_input_for_training': 4,"
               " 'num_cores_per_replica': 4}}",
               TL_EINVAL, msg);
}

Test(tpu_config, T11_partition_dims_need_ncpr)
{
    json_fails("{'tpu_config': {'input_partition_dims': [[1,2,2,1], null],"
               " 'per_host_input_for_training': 'PER_HOST_V2'}}",
               TL_EINVAL, "input_partition_dims requires setting num_cores_per_replica.");
    json_fails("{'tpu_config': {'input_partition_dims': [[1,2,2,1]], 'per_host_input_for_training': 3}}", TL_EINVAL,
               "input_partition_dims requires setting num_cores_per_replica.");
}

Test(tpu_config, T12_partition_dims_one_or_two_elements)
{
    static const char msg[] = "input_partition_dims must be a list/tuple with one or two elements.";
    json_fails("{'tpu_config': {'input_partition_dims': [[1], [1], [1]], 'per_host_input_for_training': 3,"
               " 'num_cores_per_replica': 1}}",
               TL_EINVAL, msg);
    json_fails("{'tpu_config': {'input_partition_dims': [], 'per_host_input_for_training': 3,"
               " 'num_cores_per_replica': 1}}",
               TL_EINVAL, msg);
}

Test(tpu_config, T12_partition_dims_accepted_with_v2_and_ncpr)
{
    tl_config *cfg = from_json("{'tpu_config': {'input_partition_dims': [[1,2,2,1], null],"
                               " 'per_host_input_for_training': 3, 'num_cores_per_replica': 4}}");
    const tl_run_config *rc = resolve_ok(cfg);
    cr_assert_not_null(rc->tpu.input_partition_dims, "input_partition_dims not kept");
    cr_assert_eq(rc->tpu.per_host_input_for_training, TL_PER_HOST_V2, "per_host %d",
                 (int)rc->tpu.per_host_input_for_training);
    tl_config_destroy(cfg);
    cfg = new_config();
    cr_assert_null(resolve_ok(cfg)->tpu.input_partition_dims, "input_partition_dims must default to None");
    tl_config_destroy(cfg);
}

Test(tpu_config, T13_eval_input_broadcast_rejected)
{
    static const char msg[] = "eval_training_input_configuration must be PER_HOST_V1 or SLICED; got 4";
    json_fails("{'tpu_config': {'eval_training_input_configuration': 4}}", TL_EINVAL, msg);
    json_fails("{'tpu_config': {'eval_training_input_configuration': 'BROADCAST'}}", TL_EINVAL, msg);
    json_fails("{'tpu_config': {'eval_training_input_configuration': 'PER_HOST_V2'}}", TL_EINVAL,
               "must be PER_HOST_V1 or SLICED; got 3");
    json_fails("{'tpu_config': {'eval_training_input_configuration': 1}}", TL_EINVAL,
               "must be PER_HOST_V1 or SLICED; got 1");
    json_fails("{'tpu_config': {'eval_training_input_configuration': 'bogus'}}", TL_EINVAL,
               "must be PER_HOST_V1 or SLICED; got bogus");
}

Test(tpu_config, T13_eval_input_per_host_v1_and_sliced_accepted)
{
    tl_config *cfg = from_json("{'tpu_config': {'eval_training_input_configuration': 'SLICED'}}");
    cr_assert_eq(resolve_ok(cfg)->tpu.eval_training_input_configuration, TL_SLICED, "SLICED by name");
    tl_config_destroy(cfg);
    cfg = from_json("{'tpu_config': {'eval_training_input_configuration': 5}}");
    cr_assert_eq(resolve_ok(cfg)->tpu.eval_training_input_configuration, TL_SLICED, "SLICED as 5");
    tl_config_destroy(cfg);
    cfg = from_json("{'tpu_config': {'eval_training_input_configuration': 2}}");
    cr_assert_eq(resolve_ok(cfg)->tpu.eval_training_input_configuration, TL_PER_HOST_V1, "PER_HOST_V1 as 2");
    tl_config_destroy(cfg);
}

Test(tpu_config, T13b_infeed_sleep_zero_means_no_sleep)
{
    tl_config *cfg = from_json("{'tpu_config': {'initial_infeed_sleep_secs': 0}}");
    cr_assert_eq(resolve_ok(cfg)->tpu.initial_infeed_sleep_secs, 0, "sleep 0");
    tl_config_destroy(cfg);
    cfg = from_json("{'tpu_config': {'initial_infeed_sleep_secs': null}}");
    cr_assert_eq(resolve_ok(cfg)->tpu.initial_infeed_sleep_secs, 0, "sleep None");
    tl_config_destroy(cfg);
    cfg = from_json("{'tpu_config': {'initial_infeed_sleep_secs': 30}}");
    cr_assert_eq(resolve_ok(cfg)->tpu.initial_infeed_sleep_secs, 30, "sleep 30");
    tl_config_destroy(cfg);
}

Test(tpu_config, T13b_infeed_sleep_negative_is_value_error)
{
    json_fails("{'tpu_config': {'initial_infeed_sleep_secs': -5}}", TL_EINVAL,
               "TPUConfig initial_infeed_sleep_secs must be positive, got -5");
}

Test(tpu_config, T13b_infeed_sleep_float_is_type_error)
{
    json_fails("{'tpu_config': {'initial_infeed_sleep_secs': 2.5}}", TL_ETYPE,
               "TPUConfig initial_infeed_sleep_secs must be int, got <class 'float'>");
}

static void per_host_is(const char *squoted, tl_input_mode want)
{
    tl_config *cfg = from_json(squoted);
    tl_input_mode got = resolve_ok(cfg)->tpu.per_host_input_for_training;
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
    tl_config *cfg = new_config();
    set_flag(cfg, "per_host_input_for_training", "False");
    cr_assert_eq(resolve_ok(cfg)->tpu.per_host_input_for_training, TL_PER_SHARD_V1, "--per_host...=False");
    set_flag(cfg, "per_host_input_for_training", "PER_HOST_V2");
    cr_assert_eq(resolve_ok(cfg)->tpu.per_host_input_for_training, TL_PER_HOST_V2, "--per_host...=PER_HOST_V2");
    tl_config_destroy(cfg);
}

Test(tpu_config, T13c_per_host_sliced_and_unknown_rejected)
{
    json_fails("{'tpu_config': {'per_host_input_for_training': 'SLICED'}}", TL_EINVAL, "per_host_input_for_training");
    json_fails("{'tpu_config': {'per_host_input_for_training': 5}}", TL_EINVAL, "SLICED");
    json_fails("{'tpu_config': {'per_host_input_for_training': 7}}", TL_EINVAL, "per_host_input_for_training");
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

static tl_config *with_env(const char *squoted_json, const char *tf_config)
{
    tl_config *cfg = from_json(squoted_json);
    char var[1024];
    snprintf(var, sizeof var, "TF_CONFIG=%s", tf_config);
    const char *envp[] = {"HOME=/nonexistent", var, "PATH=/bin", NULL};
    tl_status st = tl_config_apply_env(cfg, envp);
    cr_assert_eq(st, TL_OK, "apply_env: %s: %s", tl_err_name(st), tl_last_error());
    return cfg;
}

Test(tpu_config, T13d_tpu_job_name_from_tf_config)
{
    tl_config *cfg = new_config();
    const char *envp[] = {"TF_CONFIG={\"service\":{\"tpu_worker_job_name\":\"x\"}}", NULL};
    cr_assert_eq(tl_config_apply_env(cfg, envp), TL_OK, "apply_env: %s", tl_last_error());
    const tl_run_config *rc = resolve_ok(cfg);
    cr_assert_not_null(rc->tpu.tpu_job_name, "tpu_job_name not read from TF_CONFIG");
    cr_assert_str_eq(rc->tpu.tpu_job_name, "x", "tpu_job_name");
    tl_config_destroy(cfg);
}

Test(tpu_config, T13d_explicit_tpu_job_name_wins)
{
    tl_config *cfg = with_env("{'tpu_config': {'tpu_job_name': 'mine'}}", "{\"service\":{\"tpu_worker_job_name\":\"x\"}}");
    cr_assert_str_eq(resolve_ok(cfg)->tpu.tpu_job_name, "mine", "explicit tpu_job_name");
    tl_config_destroy(cfg);
}

Test(tpu_config, T13d_no_tf_config_leaves_job_name_none)
{
    tl_config *cfg = new_config();
    cr_assert_null(resolve_ok(cfg)->tpu.tpu_job_name, "tpu_job_name without TF_CONFIG");
    tl_config_destroy(cfg);
    cfg = with_env("{}", "{\"service\":{}}");
    cr_assert_null(resolve_ok(cfg)->tpu.tpu_job_name, "tpu_job_name with an empty service");
    tl_config_destroy(cfg);
}

Test(tpu_config, T13d_service_not_a_dict_is_type_error)
{
    tl_config *cfg = with_env("{}", "{\"service\": 3}");
    resolve_fails(cfg, TL_ETYPE, "If \"service\" is set in TF_CONFIG, it must be a dict.");
    tl_config_destroy(cfg);
}

Test(tpu_config, host_call_every_n_steps_zero_rejected)
{
    json_fails("{'tpu_config': {'experimental_host_call_every_n_steps': 0}}", TL_EINVAL, ">= 1");
    json_fails("{'tpu_config': {'experimental_host_call_every_n_steps': -4}}", TL_EINVAL, ">= 1");
    json_fails("{'tpu_config': {'experimental_host_call_every_n_steps': 1.5}}", TL_ETYPE, "must be int");
}

Test(tpu_config, host_call_every_n_steps_accepted)
{
    tl_config *cfg = from_json("{'tpu_config': {'experimental_host_call_every_n_steps': 4}}");
    cr_assert_eq(resolve_ok(cfg)->tpu.experimental_host_call_every_n_steps, 4, "every_n 4");
    tl_config_destroy(cfg);
}

/* ---- the order of TensorFlow's checks (first failure wins) -------------- */

TestSuite(order, .init = quiet);

Test(order, ipl_before_num_shards)
{
    json_fails("{'tpu_config': {'num_shards': 0, 'iterations_per_loop': 0}}", TL_EINVAL,
               "Invalid TPUConfig `iterations_per_loop` value.");
}

Test(order, num_shards_before_partition_dims)
{
    json_fails("{'tpu_config': {'input_partition_dims': [[1,2]], 'num_shards': 2.0}}", TL_ETYPE,
               "TPUConfig num_shards must be int");
}

Test(order, num_shards_before_ncpr)
{
    json_fails("{'tpu_config': {'num_cores_per_replica': 3, 'num_shards': 0}}", TL_EINVAL,
               "TPUConfig num_shards must be positive, got 0");
}

Test(order, partition_dims_length_before_per_host)
{
    json_fails("{'tpu_config': {'input_partition_dims': [[1], [1], [1]]}}", TL_EINVAL, "one or two elements.");
}

Test(order, partition_dims_per_host_before_ncpr_and_per_host_checks)
{
    /* per_host SLICED is itself invalid (checked at step 6) and ncpr 3 too
     * (step 4), but step 3 reports the partition dims first. */
    json_fails("{'tpu_config': {'input_partition_dims': [[1,2,2,1], null], 'per_host_input_for_training': 'SLICED',"
               " 'num_cores_per_replica': 3}}",
               TL_EINVAL, "input_partition_dims is only supported in PER_HOST_V2 mode.");
}

Test(order, ncpr_before_eval_training_input_configuration)
{
    json_fails("{'tpu_config': {'eval_training_input_configuration': 4, 'num_cores_per_replica': 3}}", TL_EINVAL,
               "num_cores_per_replica must be");
}

Test(order, eval_training_input_before_per_host_and_sleep)
{
    json_fails("{'tpu_config': {'initial_infeed_sleep_secs': -1, 'per_host_input_for_training': 7,"
               " 'eval_training_input_configuration': 4}}",
               TL_EINVAL, "eval_training_input_configuration must be PER_HOST_V1 or SLICED; got 4");
}

Test(order, tpu_config_before_run_config)
{
    json_fails("{'keep_checkpoint_max': -1, 'model_dir': '', 'tpu_config': {'num_cores_per_replica': 3}}", TL_EINVAL,
               "num_cores_per_replica must be");
}

Test(order, run_config_before_estimator)
{
    json_fails("{'params': {'batch_size': 1}, 'train_batch_size': 1.5, 'keep_checkpoint_max': -1}", TL_EINVAL,
               "keep_checkpoint_max should be >= 0");
}

Test(order, save_checkpoint_conflict_before_model_dir)
{
    json_fails("{'model_dir': '', 'save_checkpoints_steps': 10, 'save_checkpoints_secs': 10}", TL_EINVAL,
               "cannot be both set.");
}

Test(order, params_before_batch_sizes)
{
    json_fails("{'train_batch_size': 1.5, 'params': {'context': 1}}", TL_EINVAL, "are reserved keys");
}

Test(order, train_batch_size_before_model_parallelism_check)
{
    json_fails("{'train_batch_size': 0, 'tpu_config': {'per_host_input_for_training': false,"
               " 'num_cores_per_replica': 2}}",
               TL_EINVAL, "train_batch_size must be positive, got 0");
}

Test(order, model_parallelism_check_before_eval_batch_size)
{
    json_fails("{'eval_batch_size': 0, 'tpu_config': {'per_host_input_for_training': false,"
               " 'num_cores_per_replica': 2}}",
               TL_EINVAL, "Model parallelism only supports per host input for training.");
}

/* ---- RunConfig (spec §2) ------------------------------------------------- */

TestSuite(run_config, .init = quiet);

Test(run_config, checkpoint_steps_and_secs_both_set_rejected)
{
    json_fails("{'save_checkpoints_steps': 100, 'save_checkpoints_secs': 60}", TL_EINVAL,
               "`save_checkpoints_steps` and `save_checkpoints_secs` cannot be both set.");
}

Test(run_config, checkpoint_neither_set_defaults_to_600_secs)
{
    tl_config *cfg = new_config();
    const tl_run_config *rc = resolve_ok(cfg);
    cr_assert(rc->save_checkpoints_secs.set, "save_checkpoints_secs must default to 600");
    cr_assert_eq(rc->save_checkpoints_secs.value, 600, "secs %lld", (long long)rc->save_checkpoints_secs.value);
    cr_assert_not(rc->save_checkpoints_steps.set, "save_checkpoints_steps must default to None");
    tl_config_destroy(cfg);
}

Test(run_config, checkpoint_only_steps_clears_secs)
{
    tl_config *cfg = from_json("{'save_checkpoints_steps': 100}");
    const tl_run_config *rc = resolve_ok(cfg);
    cr_assert(rc->save_checkpoints_steps.set, "steps set");
    cr_assert_eq(rc->save_checkpoints_steps.value, 100, "steps %lld", (long long)rc->save_checkpoints_steps.value);
    cr_assert_not(rc->save_checkpoints_secs.set, "secs must be None when only steps is given (got %lld)",
                  (long long)rc->save_checkpoints_secs.value);
    tl_config_destroy(cfg);
}

Test(run_config, checkpoint_only_secs)
{
    tl_config *cfg = from_json("{'save_checkpoints_secs': 300}");
    const tl_run_config *rc = resolve_ok(cfg);
    cr_assert_eq(rc->save_checkpoints_secs.value, 300, "secs %lld", (long long)rc->save_checkpoints_secs.value);
    cr_assert_not(rc->save_checkpoints_steps.set, "steps None");
    tl_config_destroy(cfg);
}

Test(run_config, T28_checkpoint_both_none_disables_checkpoints)
{
    tl_config *cfg = from_json("{'save_checkpoints_steps': null, 'save_checkpoints_secs': null}");
    const tl_run_config *rc = resolve_ok(cfg);
    cr_assert_not(rc->save_checkpoints_steps.set, "steps None");
    cr_assert_not(rc->save_checkpoints_secs.set, "secs None (no 600 default when both are passed as None)");
    tl_config_destroy(cfg);
}

Test(run_config, checkpoint_steps_zero_valid_negative_rejected)
{
    tl_config *cfg = from_json("{'save_checkpoints_steps': 0}");
    cr_assert_eq(resolve_ok(cfg)->save_checkpoints_steps.value, 0, "steps 0 is valid");
    tl_config_destroy(cfg);
    json_fails("{'save_checkpoints_steps': -1}", TL_EINVAL, "save_checkpoints_steps should be >= 0");
    json_fails("{'save_checkpoints_secs': -1}", TL_EINVAL, "save_checkpoints_secs should be >= 0");
    json_fails("{'save_summary_steps': -1}", TL_EINVAL, "save_summary_steps should be >= 0");
}

Test(run_config, keep_checkpoint_max)
{
    json_fails("{'keep_checkpoint_max': -1}", TL_EINVAL, "keep_checkpoint_max should be >= 0");
    tl_config *cfg = from_json("{'keep_checkpoint_max': 0}");
    cr_assert_eq(resolve_ok(cfg)->keep_checkpoint_max, 0, "0 keeps all");
    tl_config_destroy(cfg);
    cfg = from_json("{'keep_checkpoint_max': 12}");
    cr_assert_eq(resolve_ok(cfg)->keep_checkpoint_max, 12, "12");
    tl_config_destroy(cfg);
}

Test(run_config, keep_checkpoint_every_n_hours)
{
    json_fails("{'keep_checkpoint_every_n_hours': 0}", TL_EINVAL, "keep_checkpoint_every_n_hours should be > 0");
    json_fails("{'keep_checkpoint_every_n_hours': -0.5}", TL_EINVAL, "keep_checkpoint_every_n_hours should be > 0");
    tl_config *cfg = from_json("{'keep_checkpoint_every_n_hours': 0.5}");
    cr_assert_float_eq(resolve_ok(cfg)->keep_checkpoint_every_n_hours, 0.5, 1e-12, "0.5 hours");
    tl_config_destroy(cfg);
}

Test(run_config, log_step_count_steps)
{
    json_fails("{'log_step_count_steps': 0}", TL_EINVAL, "log_step_count_steps should be > 0");
    json_fails("{'log_step_count_steps': -3}", TL_EINVAL, "log_step_count_steps should be > 0");
    tl_config *cfg = from_json("{'log_step_count_steps': null}");
    cr_assert_not(resolve_ok(cfg)->log_step_count_steps.set, "None disables logging");
    tl_config_destroy(cfg);
    cfg = from_json("{'log_step_count_steps': 1}");
    cr_assert_eq(resolve_ok(cfg)->log_step_count_steps.value, 1, "1 is > 0");
    tl_config_destroy(cfg);
}

Test(run_config, model_dir_empty_rejected)
{
    json_fails("{'model_dir': ''}", TL_EINVAL, "model_dir should be non-empty.");
    tl_config *cfg = new_config();
    set_flag(cfg, "model_dir", "");
    resolve_fails(cfg, TL_EINVAL, "model_dir should be non-empty. [from flag --model_dir]");
    tl_config_destroy(cfg);
}

Test(run_config, model_dir_kept)
{
    tl_config *cfg = from_json("{'model_dir': '/tmp/m'}");
    cr_assert_str_eq(resolve_ok(cfg)->model_dir, "/tmp/m", "model_dir");
    tl_config_destroy(cfg);
    cfg = new_config();
    cr_assert_null(resolve_ok(cfg)->model_dir, "model_dir defaults to None");
    tl_config_destroy(cfg);
}

Test(run_config, model_dir_from_tf_config)
{
    tl_config *cfg = with_env("{}", "{\"model_dir\": \"/tf/dir\"}");
    cr_assert_str_eq(resolve_ok(cfg)->model_dir, "/tf/dir", "TF_CONFIG model_dir");
    tl_config_destroy(cfg);
    cfg = with_env("{'model_dir': '/other'}", "{\"model_dir\": \"/tf/dir\"}");
    resolve_fails(cfg, TL_EINVAL, "must have the same value as the model_dir in TF_CONFIG");
    tl_config_destroy(cfg);
    cfg = with_env("{}", "{\"model_dir\": \"\"}");
    resolve_fails(cfg, TL_EINVAL, "model_dir in TF_CONFIG should be non-empty.");
    tl_config_destroy(cfg);
}

Test(run_config, tf_random_seed_kept)
{
    tl_config *cfg = from_json("{'tf_random_seed': 42}");
    const tl_run_config *rc = resolve_ok(cfg);
    cr_assert(rc->tf_random_seed.set, "seed set");
    cr_assert_eq(rc->tf_random_seed.value, 42, "seed");
    tl_config_destroy(cfg);
    cfg = new_config();
    set_flag(cfg, "tf_random_seed", "-7");
    cr_assert_eq(resolve_ok(cfg)->tf_random_seed.value, -7, "negative seeds are integers");
    tl_config_destroy(cfg);
}

Test(run_config, tf_random_seed_not_int_is_value_error)
{
    tl_config *cfg = new_config();
    set_flag(cfg, "tf_random_seed", "abc");
    tl_status st = tl_config_resolve(cfg);
    tl_config_destroy(cfg);
    expect_error(st, TL_EINVAL, "tf_random_seed must be integer.", "tf_random_seed \"abc\"");
}

Test(run_config, tf_random_seed_not_int_message)
{
    tl_config *cfg = new_config();
    set_flag(cfg, "tf_random_seed", "abc");
    cr_assert_neq(tl_config_resolve(cfg), TL_OK, "seed \"abc\" accepted");
    cr_assert_not_null(strstr(tl_last_error(), "tf_random_seed must be integer."), "message: %s", tl_last_error());
    cr_assert_not_null(strstr(tl_last_error(), "[from flag --tf_random_seed]"), "message: %s", tl_last_error());
    set_flag(cfg, "tf_random_seed", "1.5");
    cr_assert_neq(tl_config_resolve(cfg), TL_OK, "seed 1.5 accepted");
    cr_assert_not_null(strstr(tl_last_error(), "tf_random_seed must be integer."), "message: %s", tl_last_error());
    tl_config_destroy(cfg);
}

static tl_config *master_config(const char *squoted_json, const char *tf_config)
{
    return tf_config ? with_env(squoted_json, tf_config) : from_json(squoted_json);
}

static void masters_are(const char *squoted_json, const char *tf_config, const char *master, const char *eval_master)
{
    tl_config *cfg = master_config(squoted_json, tf_config);
    const tl_run_config *rc = resolve_ok(cfg);
    cr_assert_not_null(rc->master, "master is NULL");
    cr_assert_not_null(rc->evaluation_master, "evaluation_master is NULL");
    cr_assert_str_eq(rc->master, master, "%s / %s: master", squoted_json, tf_config ? tf_config : "-");
    cr_assert_str_eq(rc->evaluation_master, eval_master, "%s / %s: evaluation_master", squoted_json,
                     tf_config ? tf_config : "-");
    tl_config_destroy(cfg);
}

#define EVALUATOR_TF_CONFIG \
    "{\"cluster\": {\"chief\": [\"h0:1\"], \"evaluator\": [\"h1:1\"]}, \"task\": {\"type\": \"evaluator\", \"index\": 0}}"

Test(run_config, T13e_evaluation_master_follows_master)
{
    masters_are("{'master': 'm'}", NULL, "m", "m");
}

Test(run_config, T13e_defaults_are_empty)
{
    masters_are("{}", NULL, "", "");
}

Test(run_config, T13e_explicit_evaluation_master_wins)
{
    masters_are("{'master': 'm', 'evaluation_master': 'e'}", NULL, "m", "e");
    masters_are("{'evaluation_master': 'e'}", NULL, "", "e");
    /* '' counts as set. */
    masters_are("{'master': 'm', 'evaluation_master': ''}", NULL, "m", "");
}

Test(run_config, T13e_evaluator_keeps_evaluation_master_empty)
{
    masters_are("{'master': 'm'}", EVALUATOR_TF_CONFIG, "m", "");
    masters_are("{}", EVALUATOR_TF_CONFIG, "", "");
}

Test(run_config, T13e_tf_config_session_masters)
{
    masters_are("{}", "{\"session_master\": \"s\"}", "s", "s");
    masters_are("{}", "{\"session_master\": \"s\", \"eval_session_master\": \"es\"}", "s", "es");
    masters_are("{'master': 'm'}", "{\"session_master\": \"s\"}", "m", "m");
}

/* ---- TPUEstimator's constructor, train() and evaluate() (§4.5, §7) ------- */

TestSuite(estimator, .init = quiet);

Test(estimator, T50_reserved_params_keys)
{
    json_fails("{'params': {'batch_size': 1}}", TL_EINVAL,
               "['batch_size', 'context'] are reserved keys but existed in params {'batch_size': 1}.");
    json_fails("{'params': {'context': 'x', 'lr': 0.5}}", TL_EINVAL,
               "['batch_size', 'context'] are reserved keys but existed in params");
}

Test(estimator, params_kept_as_json_object)
{
    tl_config *cfg = from_json("{'params': {'lr': 0.5, 'use_tpu': true}}");
    const tl_run_config *rc = resolve_ok(cfg);
    cr_assert_not_null(strstr(rc->params_json, "\"lr\""), "params_json %s", rc->params_json);
    cr_assert_not_null(strstr(rc->params_json, "\"use_tpu\""), "use_tpu is not reserved: %s", rc->params_json);
    tl_config_destroy(cfg);
    cfg = new_config();
    cr_assert_str_eq(resolve_ok(cfg)->params_json, "{}", "params default");
    tl_config_destroy(cfg);
    json_fails("{'params': [1, 2]}", TL_ETYPE, "params must be a dict");
}

Test(estimator, T51_train_batch_size_float_is_type_error)
{
    json_fails("{'train_batch_size': 1.0}", TL_ETYPE, "train_batch_size must be int, got <class 'float'>");
}

Test(estimator, T51_batch_sizes_positive)
{
    json_fails("{'train_batch_size': 0}", TL_EINVAL, "train_batch_size must be positive, got 0");
    json_fails("{'eval_batch_size': 0}", TL_EINVAL, "eval_batch_size must be positive, got 0");
    json_fails("{'predict_batch_size': -8}", TL_EINVAL, "predict_batch_size must be positive, got -8");
    json_fails("{'eval_batch_size': 2.5}", TL_ETYPE, "eval_batch_size must be int, got <class 'float'>");
    json_fails("{'predict_batch_size': '8'}", TL_ETYPE, "predict_batch_size must be int, got <class 'str'>");
}

Test(estimator, T51_batch_sizes_kept)
{
    tl_config *cfg = from_json("{'train_batch_size': 1024, 'eval_batch_size': 64}");
    const tl_run_config *rc = resolve_ok(cfg);
    cr_assert(rc->train_batch_size.set && rc->train_batch_size.value == 1024, "train_batch_size");
    cr_assert(rc->eval_batch_size.set && rc->eval_batch_size.value == 64, "eval_batch_size");
    cr_assert_not(rc->predict_batch_size.set, "predict_batch_size None");
    tl_config_destroy(cfg);
}

Test(estimator, T43_model_parallelism_needs_per_host_input)
{
    json_fails("{'tpu_config': {'per_host_input_for_training': false, 'num_cores_per_replica': 2}}", TL_EINVAL,
               "Model parallelism only supports per host input for training. "
               "Please adjust TPURunconfig.per_host_input_for_training.");
    json_fails("{'tpu_config': {'per_host_input_for_training': 'PER_SHARD_V1', 'num_cores_per_replica': 1}}",
               TL_EINVAL, "Model parallelism only supports per host input for training.");
}

Test(estimator, T43_not_checked_without_tpu)
{
    tl_config *cfg =
        from_json("{'use_tpu': false, 'tpu_config': {'per_host_input_for_training': false, 'num_cores_per_replica': 2}}");
    cr_assert_not(resolve_ok(cfg)->use_tpu, "use_tpu false");
    tl_config_destroy(cfg);
}

Test(estimator, T24_train_needs_steps_or_max_steps)
{
    tl_config *cfg = new_config();
    resolve_ok(cfg);
    expect_error(tl_config_check_train(cfg), TL_EINVAL,
                 "For TPU training, one of `steps` or `max_steps` must be set. Cannot be both `None`.",
                 "check_train");
    tl_config_destroy(cfg);
}

Test(estimator, T24_train_steps_or_max_steps_suffices)
{
    tl_config *cfg = from_json("{'train_steps': 10}");
    resolve_ok(cfg);
    cr_assert_eq(tl_config_check_train(cfg), TL_OK, "train_steps 10: %s", tl_last_error());
    tl_config_destroy(cfg);
    cfg = from_json("{'max_steps': 10}");
    resolve_ok(cfg);
    cr_assert_eq(tl_config_check_train(cfg), TL_OK, "max_steps 10: %s", tl_last_error());
    tl_config_destroy(cfg);
    cfg = from_json("{'use_tpu': false}");
    resolve_ok(cfg);
    cr_assert_eq(tl_config_check_train(cfg), TL_OK, "use_tpu false trains without steps: %s", tl_last_error());
    tl_config_destroy(cfg);
}

Test(estimator, T25_train_steps_zero_base_check_first)
{
    json_fails("{'train_steps': 0}", TL_EINVAL, "Must specify steps > 0, given: 0");
    json_fails("{'train_steps': -5}", TL_EINVAL, "Must specify steps > 0, given: -5");
    json_fails("{'max_steps': 0}", TL_EINVAL, "Must specify max_steps > 0, given: 0");
}

Test(estimator, T25_train_steps_float_is_type_error)
{
    json_fails("{'train_steps': 2.5}", TL_ETYPE, "Train steps must be int");
    json_fails("{'train_steps': 2.5}", TL_ETYPE, "Train steps must be int, got <class 'float'>");
    json_fails("{'max_steps': 2.5}", TL_ETYPE, "Train max_steps must be int, got <class 'float'>");
}

Test(estimator, T25_steps_and_max_steps_both_rejected)
{
    json_fails("{'train_steps': 10, 'max_steps': 20}", TL_EINVAL, "Can not provide both steps and max_steps.");
}

Test(estimator, T25_steps_kept)
{
    tl_config *cfg = from_json("{'train_steps': 10}");
    const tl_run_config *rc = resolve_ok(cfg);
    cr_assert(rc->train_steps.set && rc->train_steps.value == 10, "train_steps");
    cr_assert_not(rc->max_steps.set, "max_steps None");
    tl_config_destroy(cfg);
}

Test(estimator, T54_eval_steps_float_is_type_error)
{
    json_fails("{'eval_steps': 12.3}", TL_ETYPE, "Eval steps must be int");
    json_fails("{'eval_steps': 12.3}", TL_ETYPE, "Eval steps must be int, got <class 'float'>");
}

Test(estimator, T54_eval_steps_negative_is_value_error)
{
    json_fails("{'eval_steps': -321}", TL_EINVAL, "Eval steps must be positive, got -321");
    json_fails("{'eval_steps': 0}", TL_EINVAL, "Eval steps must be positive, got 0");
}

Test(estimator, T54_eval_steps_none_rejected_on_device)
{
    tl_config *cfg = new_config();
    resolve_ok(cfg);
    expect_error(tl_config_check_eval(cfg), TL_EINVAL, "Evaluate `steps` must be set on TPU. Cannot be `None`.",
                 "check_eval");
    tl_config_destroy(cfg);
    cfg = from_json("{'eval_steps': 6}");
    resolve_ok(cfg);
    cr_assert_eq(tl_config_check_eval(cfg), TL_OK, "eval_steps 6: %s", tl_last_error());
    tl_config_destroy(cfg);
}

Test(estimator, T54_plain_path_uses_base_messages)
{
    tl_config *cfg = from_json("{'eval_on_tpu': false}");
    resolve_ok(cfg);
    cr_assert_eq(tl_config_check_eval(cfg), TL_OK, "None is fine off the device: %s", tl_last_error());
    tl_config_destroy(cfg);
    json_fails("{'eval_on_tpu': false, 'eval_steps': -3}", TL_EINVAL, "Must specify steps > 0, given: -3");
    json_fails("{'use_tpu': false, 'eval_steps': 0}", TL_EINVAL, "Must specify steps > 0, given: 0");
}

Test(estimator, checks_need_a_resolved_config)
{
    tl_config *cfg = new_config();
    cr_assert_eq(tl_config_check_train(cfg), TL_EINVAL, "check_train before resolve");
    cr_assert_eq(tl_config_check_eval(cfg), TL_EINVAL, "check_eval before resolve");
    tl_config_destroy(cfg);
}

Test(estimator, devices_and_num_hosts_bounds)
{
    json_fails("{'devices': -1}", TL_EINVAL, "devices");
    json_fails("{'devices': 4097}", TL_EINVAL, "devices");
    json_fails("{'num_hosts': 0}", TL_EINVAL, "num_hosts");
    json_fails("{'devices': 'eight'}", TL_ETYPE, "devices must be int");
    tl_config *cfg = from_json("{'devices': 8, 'num_hosts': 2}");
    const tl_run_config *rc = resolve_ok(cfg);
    cr_assert_eq(rc->devices, 8, "devices");
    cr_assert_eq(rc->num_hosts, 2, "num_hosts");
    tl_config_destroy(cfg);
}

Test(estimator, use_tpu_must_be_bool)
{
    json_fails("{'use_tpu': 1}", TL_ETYPE, "use_tpu");
}
