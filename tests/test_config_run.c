/*
 * test_config_run.c — TensorFlow's checks of RunConfig and of TPUEstimator's
 * constructor, train() and evaluate(), and the order in which TensorFlow
 * makes all the checks, with TensorFlow's messages (spec §2, §4.5 and test
 * vectors T13e, T24, T25, T28, T43, T50, T51, T54). TPUConfig is in
 * test_config_tpu.c.
 *
 * Every failing case checks both the status (TL_EINVAL is Python's
 * ValueError, TL_ETYPE its TypeError) and a distinctive fragment of
 * TensorFlow's message; every accepted case checks the resolved value.
 */
#include <string.h>

#include "testutil.h"

/* ---- the order of TensorFlow's checks (first failure wins) -------------- */

TestSuite(order, .init = tu_quiet);

Test(order, ipl_before_num_shards)
{
    tu_json_fails("{'tpu_config': {'num_shards': 0, 'iterations_per_loop': 0}}", TL_EINVAL,
                  "Invalid TPUConfig `iterations_per_loop` value.");
}

Test(order, num_shards_before_partition_dims)
{
    tu_json_fails("{'tpu_config': {'input_partition_dims': [[1,2]], 'num_shards': 2.0}}", TL_ETYPE,
                  "TPUConfig num_shards must be int");
}

Test(order, num_shards_before_ncpr)
{
    tu_json_fails("{'tpu_config': {'num_cores_per_replica': 3, 'num_shards': 0}}", TL_EINVAL,
                  "TPUConfig num_shards must be positive, got 0");
}

Test(order, partition_dims_length_before_per_host)
{
    tu_json_fails("{'tpu_config': {'input_partition_dims': [[1], [1], [1]]}}", TL_EINVAL, "one or two elements.");
}

Test(order, partition_dims_per_host_before_ncpr_and_per_host_checks)
{
    /* per_host SLICED is itself invalid (checked at step 6) and ncpr 3 too
     * (step 4), but step 3 reports the partition dims first. */
    tu_json_fails("{'tpu_config': {'input_partition_dims': [[1,2,2,1], null], 'per_host_input_for_training': 'SLICED',"
                  " 'num_cores_per_replica': 3}}",
                  TL_EINVAL, "input_partition_dims is only supported in PER_HOST_V2 mode.");
}

Test(order, ncpr_before_eval_training_input_configuration)
{
    tu_json_fails("{'tpu_config': {'eval_training_input_configuration': 4, 'num_cores_per_replica': 3}}", TL_EINVAL,
                  "num_cores_per_replica must be");
}

Test(order, eval_training_input_before_per_host_and_sleep)
{
    tu_json_fails("{'tpu_config': {'initial_infeed_sleep_secs': -1, 'per_host_input_for_training': 7,"
                  " 'eval_training_input_configuration': 4}}",
                  TL_EINVAL, "eval_training_input_configuration must be PER_HOST_V1 or SLICED; got 4");
}

Test(order, tpu_config_before_run_config)
{
    tu_json_fails("{'keep_checkpoint_max': -1, 'model_dir': '', 'tpu_config': {'num_cores_per_replica': 3}}", TL_EINVAL,
                  "num_cores_per_replica must be");
}

Test(order, run_config_before_estimator)
{
    tu_json_fails("{'params': {'batch_size': 1}, 'train_batch_size': 1.5, 'keep_checkpoint_max': -1}", TL_EINVAL,
                  "keep_checkpoint_max should be >= 0");
}

Test(order, save_checkpoint_conflict_before_model_dir)
{
    tu_json_fails("{'model_dir': '', 'save_checkpoints_steps': 10, 'save_checkpoints_secs': 10}", TL_EINVAL,
                  "cannot be both set.");
}

Test(order, params_before_batch_sizes)
{
    tu_json_fails("{'train_batch_size': 1.5, 'params': {'context': 1}}", TL_EINVAL, "are reserved keys");
}

Test(order, train_batch_size_before_model_parallelism_check)
{
    tu_json_fails("{'train_batch_size': 0, 'tpu_config': {'per_host_input_for_training': false,"
                  " 'num_cores_per_replica': 2}}",
                  TL_EINVAL, "train_batch_size must be positive, got 0");
}

Test(order, model_parallelism_check_before_eval_batch_size)
{
    tu_json_fails("{'eval_batch_size': 0, 'tpu_config': {'per_host_input_for_training': false,"
                  " 'num_cores_per_replica': 2}}",
                  TL_EINVAL, "Model parallelism only supports per host input for training.");
}

/* ---- RunConfig (spec §2) ------------------------------------------------- */

TestSuite(run_config, .init = tu_quiet);

Test(run_config, checkpoint_steps_and_secs_both_set_rejected)
{
    tu_json_fails("{'save_checkpoints_steps': 100, 'save_checkpoints_secs': 60}", TL_EINVAL,
                  "`save_checkpoints_steps` and `save_checkpoints_secs` cannot be both set.");
}

Test(run_config, checkpoint_neither_set_defaults_to_600_secs)
{
    tl_config *cfg = tu_new_config();
    const tl_run_config *rc = tu_resolve_ok(cfg);
    cr_assert(rc->save_checkpoints_secs.set, "save_checkpoints_secs must default to 600");
    cr_assert_eq(rc->save_checkpoints_secs.value, 600, "secs %lld", (long long)rc->save_checkpoints_secs.value);
    cr_assert_not(rc->save_checkpoints_steps.set, "save_checkpoints_steps must default to None");
    tl_config_destroy(cfg);
}

Test(run_config, checkpoint_only_steps_clears_secs)
{
    tl_config *cfg = tu_from_json("{'save_checkpoints_steps': 100}");
    const tl_run_config *rc = tu_resolve_ok(cfg);
    cr_assert(rc->save_checkpoints_steps.set, "steps set");
    cr_assert_eq(rc->save_checkpoints_steps.value, 100, "steps %lld", (long long)rc->save_checkpoints_steps.value);
    cr_assert_not(rc->save_checkpoints_secs.set, "secs must be None when only steps is given (got %lld)",
                  (long long)rc->save_checkpoints_secs.value);
    tl_config_destroy(cfg);
}

Test(run_config, checkpoint_only_secs)
{
    tl_config *cfg = tu_from_json("{'save_checkpoints_secs': 300}");
    const tl_run_config *rc = tu_resolve_ok(cfg);
    cr_assert_eq(rc->save_checkpoints_secs.value, 300, "secs %lld", (long long)rc->save_checkpoints_secs.value);
    cr_assert_not(rc->save_checkpoints_steps.set, "steps None");
    tl_config_destroy(cfg);
}

Test(run_config, T28_checkpoint_both_none_disables_checkpoints)
{
    tl_config *cfg = tu_from_json("{'save_checkpoints_steps': null, 'save_checkpoints_secs': null}");
    const tl_run_config *rc = tu_resolve_ok(cfg);
    cr_assert_not(rc->save_checkpoints_steps.set, "steps None");
    cr_assert_not(rc->save_checkpoints_secs.set, "secs None (no 600 default when both are passed as None)");
    tl_config_destroy(cfg);
}

Test(run_config, checkpoint_steps_zero_valid_negative_rejected)
{
    tl_config *cfg = tu_from_json("{'save_checkpoints_steps': 0}");
    cr_assert_eq(tu_resolve_ok(cfg)->save_checkpoints_steps.value, 0, "steps 0 is valid");
    tl_config_destroy(cfg);
    tu_json_fails("{'save_checkpoints_steps': -1}", TL_EINVAL, "save_checkpoints_steps should be >= 0");
    tu_json_fails("{'save_checkpoints_secs': -1}", TL_EINVAL, "save_checkpoints_secs should be >= 0");
    tu_json_fails("{'save_summary_steps': -1}", TL_EINVAL, "save_summary_steps should be >= 0");
}

Test(run_config, keep_checkpoint_max)
{
    tu_json_fails("{'keep_checkpoint_max': -1}", TL_EINVAL, "keep_checkpoint_max should be >= 0");
    tl_config *cfg = tu_from_json("{'keep_checkpoint_max': 0}");
    cr_assert_eq(tu_resolve_ok(cfg)->keep_checkpoint_max, 0, "0 keeps all");
    tl_config_destroy(cfg);
    cfg = tu_from_json("{'keep_checkpoint_max': 12}");
    cr_assert_eq(tu_resolve_ok(cfg)->keep_checkpoint_max, 12, "12");
    tl_config_destroy(cfg);
}

Test(run_config, keep_checkpoint_every_n_hours)
{
    tu_json_fails("{'keep_checkpoint_every_n_hours': 0}", TL_EINVAL, "keep_checkpoint_every_n_hours should be > 0");
    tu_json_fails("{'keep_checkpoint_every_n_hours': -0.5}", TL_EINVAL, "keep_checkpoint_every_n_hours should be > 0");
    tl_config *cfg = tu_from_json("{'keep_checkpoint_every_n_hours': 0.5}");
    cr_assert_float_eq(tu_resolve_ok(cfg)->keep_checkpoint_every_n_hours, 0.5, 1e-12, "0.5 hours");
    tl_config_destroy(cfg);
}

Test(run_config, log_step_count_steps)
{
    tu_json_fails("{'log_step_count_steps': 0}", TL_EINVAL, "log_step_count_steps should be > 0");
    tu_json_fails("{'log_step_count_steps': -3}", TL_EINVAL, "log_step_count_steps should be > 0");
    tl_config *cfg = tu_from_json("{'log_step_count_steps': null}");
    cr_assert_not(tu_resolve_ok(cfg)->log_step_count_steps.set, "None disables logging");
    tl_config_destroy(cfg);
    cfg = tu_from_json("{'log_step_count_steps': 1}");
    cr_assert_eq(tu_resolve_ok(cfg)->log_step_count_steps.value, 1, "1 is > 0");
    tl_config_destroy(cfg);
}

Test(run_config, model_dir_empty_rejected)
{
    tu_json_fails("{'model_dir': ''}", TL_EINVAL, "model_dir should be non-empty.");
    tl_config *cfg = tu_new_config();
    tu_set_flag(cfg, "model_dir", "");
    tu_resolve_fails(cfg, TL_EINVAL, "model_dir should be non-empty. [from flag --model_dir]");
    tl_config_destroy(cfg);
}

Test(run_config, model_dir_kept)
{
    tl_config *cfg = tu_from_json("{'model_dir': '/tmp/m'}");
    cr_assert_str_eq(tu_resolve_ok(cfg)->model_dir, "/tmp/m", "model_dir");
    tl_config_destroy(cfg);
    cfg = tu_new_config();
    cr_assert_null(tu_resolve_ok(cfg)->model_dir, "model_dir defaults to None");
    tl_config_destroy(cfg);
}

Test(run_config, model_dir_from_tf_config)
{
    tl_config *cfg = tu_with_env("{}", "{\"model_dir\": \"/tf/dir\"}");
    cr_assert_str_eq(tu_resolve_ok(cfg)->model_dir, "/tf/dir", "TF_CONFIG model_dir");
    tl_config_destroy(cfg);
    cfg = tu_with_env("{'model_dir': '/other'}", "{\"model_dir\": \"/tf/dir\"}");
    tu_resolve_fails(cfg, TL_EINVAL, "must have the same value as the model_dir in TF_CONFIG");
    tl_config_destroy(cfg);
    cfg = tu_with_env("{}", "{\"model_dir\": \"\"}");
    tu_resolve_fails(cfg, TL_EINVAL, "model_dir in TF_CONFIG should be non-empty.");
    tl_config_destroy(cfg);
}

Test(run_config, tf_random_seed_kept)
{
    tl_config *cfg = tu_from_json("{'tf_random_seed': 42}");
    const tl_run_config *rc = tu_resolve_ok(cfg);
    cr_assert(rc->tf_random_seed.set, "seed set");
    cr_assert_eq(rc->tf_random_seed.value, 42, "seed");
    tl_config_destroy(cfg);
    cfg = tu_new_config();
    tu_set_flag(cfg, "tf_random_seed", "-7");
    cr_assert_eq(tu_resolve_ok(cfg)->tf_random_seed.value, -7, "negative seeds are integers");
    tl_config_destroy(cfg);
}

Test(run_config, tf_random_seed_not_int_is_value_error)
{
    tl_config *cfg = tu_new_config();
    tu_set_flag(cfg, "tf_random_seed", "abc");
    tl_status st = tl_config_resolve(cfg);
    tl_config_destroy(cfg);
    tu_expect_error(st, TL_EINVAL, "tf_random_seed must be integer.", "tf_random_seed \"abc\"");
}

Test(run_config, tf_random_seed_not_int_message)
{
    tl_config *cfg = tu_new_config();
    tu_set_flag(cfg, "tf_random_seed", "abc");
    cr_assert_neq(tl_config_resolve(cfg), TL_OK, "seed \"abc\" accepted");
    cr_assert_not_null(strstr(tl_last_error(), "tf_random_seed must be integer."), "message: %s", tl_last_error());
    cr_assert_not_null(strstr(tl_last_error(), "[from flag --tf_random_seed]"), "message: %s", tl_last_error());
    tu_set_flag(cfg, "tf_random_seed", "1.5");
    cr_assert_neq(tl_config_resolve(cfg), TL_OK, "seed 1.5 accepted");
    cr_assert_not_null(strstr(tl_last_error(), "tf_random_seed must be integer."), "message: %s", tl_last_error());
    tl_config_destroy(cfg);
}

static tl_config *master_config(const char *squoted_json, const char *tf_config)
{
    return tf_config ? tu_with_env(squoted_json, tf_config) : tu_from_json(squoted_json);
}

static void masters_are(const char *squoted_json, const char *tf_config, const char *master, const char *eval_master)
{
    tl_config *cfg = master_config(squoted_json, tf_config);
    const tl_run_config *rc = tu_resolve_ok(cfg);
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

TestSuite(estimator, .init = tu_quiet);

Test(estimator, T50_reserved_params_keys)
{
    tu_json_fails("{'params': {'batch_size': 1}}", TL_EINVAL,
                  "['batch_size', 'context'] are reserved keys but existed in params {'batch_size': 1}.");
    tu_json_fails("{'params': {'context': 'x', 'lr': 0.5}}", TL_EINVAL,
                  "['batch_size', 'context'] are reserved keys but existed in params");
}

Test(estimator, params_kept_as_json_object)
{
    tl_config *cfg = tu_from_json("{'params': {'lr': 0.5, 'use_tpu': true}}");
    const tl_run_config *rc = tu_resolve_ok(cfg);
    cr_assert_not_null(strstr(rc->params_json, "\"lr\""), "params_json %s", rc->params_json);
    cr_assert_not_null(strstr(rc->params_json, "\"use_tpu\""), "use_tpu is not reserved: %s", rc->params_json);
    tl_config_destroy(cfg);
    cfg = tu_new_config();
    cr_assert_str_eq(tu_resolve_ok(cfg)->params_json, "{}", "params default");
    tl_config_destroy(cfg);
    tu_json_fails("{'params': [1, 2]}", TL_ETYPE, "params must be a dict");
}

Test(estimator, T51_train_batch_size_float_is_type_error)
{
    tu_json_fails("{'train_batch_size': 1.0}", TL_ETYPE, "train_batch_size must be int, got <class 'float'>");
}

Test(estimator, T51_batch_sizes_positive)
{
    tu_json_fails("{'train_batch_size': 0}", TL_EINVAL, "train_batch_size must be positive, got 0");
    tu_json_fails("{'eval_batch_size': 0}", TL_EINVAL, "eval_batch_size must be positive, got 0");
    tu_json_fails("{'predict_batch_size': -8}", TL_EINVAL, "predict_batch_size must be positive, got -8");
    tu_json_fails("{'eval_batch_size': 2.5}", TL_ETYPE, "eval_batch_size must be int, got <class 'float'>");
    tu_json_fails("{'predict_batch_size': '8'}", TL_ETYPE, "predict_batch_size must be int, got <class 'str'>");
}

Test(estimator, T51_batch_sizes_kept)
{
    tl_config *cfg = tu_from_json("{'train_batch_size': 1024, 'eval_batch_size': 64}");
    const tl_run_config *rc = tu_resolve_ok(cfg);
    cr_assert(rc->train_batch_size.set && rc->train_batch_size.value == 1024, "train_batch_size");
    cr_assert(rc->eval_batch_size.set && rc->eval_batch_size.value == 64, "eval_batch_size");
    cr_assert_not(rc->predict_batch_size.set, "predict_batch_size None");
    tl_config_destroy(cfg);
}

Test(estimator, T43_model_parallelism_needs_per_host_input)
{
    tu_json_fails("{'tpu_config': {'per_host_input_for_training': false, 'num_cores_per_replica': 2}}", TL_EINVAL,
                  "Model parallelism only supports per host input for training. "
                  "Please adjust TPURunconfig.per_host_input_for_training.");
    tu_json_fails("{'tpu_config': {'per_host_input_for_training': 'PER_SHARD_V1', 'num_cores_per_replica': 1}}",
                  TL_EINVAL, "Model parallelism only supports per host input for training.");
}

Test(estimator, T43_not_checked_without_tpu)
{
    tl_config *cfg = tu_from_json("{'use_tpu': false, 'tpu_config': {'per_host_input_for_training': false,"
                                  " 'num_cores_per_replica': 2}}");
    cr_assert_not(tu_resolve_ok(cfg)->use_tpu, "use_tpu false");
    tl_config_destroy(cfg);
}

Test(estimator, T24_train_needs_steps_or_max_steps)
{
    tl_config *cfg = tu_new_config();
    tu_resolve_ok(cfg);
    tu_expect_error(tl_config_check_train(cfg), TL_EINVAL,
                    "For TPU training, one of `steps` or `max_steps` must be set. Cannot be both `None`.",
                    "check_train");
    tl_config_destroy(cfg);
}

Test(estimator, T24_train_steps_or_max_steps_suffices)
{
    tl_config *cfg = tu_from_json("{'train_steps': 10}");
    tu_resolve_ok(cfg);
    cr_assert_eq(tl_config_check_train(cfg), TL_OK, "train_steps 10: %s", tl_last_error());
    tl_config_destroy(cfg);
    cfg = tu_from_json("{'max_steps': 10}");
    tu_resolve_ok(cfg);
    cr_assert_eq(tl_config_check_train(cfg), TL_OK, "max_steps 10: %s", tl_last_error());
    tl_config_destroy(cfg);
    cfg = tu_from_json("{'use_tpu': false}");
    tu_resolve_ok(cfg);
    cr_assert_eq(tl_config_check_train(cfg), TL_OK, "use_tpu false trains without steps: %s", tl_last_error());
    tl_config_destroy(cfg);
}

Test(estimator, T25_train_steps_zero_base_check_first)
{
    tu_json_fails("{'train_steps': 0}", TL_EINVAL, "Must specify steps > 0, given: 0");
    tu_json_fails("{'train_steps': -5}", TL_EINVAL, "Must specify steps > 0, given: -5");
    tu_json_fails("{'max_steps': 0}", TL_EINVAL, "Must specify max_steps > 0, given: 0");
}

Test(estimator, T25_train_steps_float_is_type_error)
{
    tu_json_fails("{'train_steps': 2.5}", TL_ETYPE, "Train steps must be int");
    tu_json_fails("{'train_steps': 2.5}", TL_ETYPE, "Train steps must be int, got <class 'float'>");
    tu_json_fails("{'max_steps': 2.5}", TL_ETYPE, "Train max_steps must be int, got <class 'float'>");
}

Test(estimator, T25_steps_and_max_steps_both_rejected)
{
    tu_json_fails("{'train_steps': 10, 'max_steps': 20}", TL_EINVAL, "Can not provide both steps and max_steps.");
}

Test(estimator, T25_steps_kept)
{
    tl_config *cfg = tu_from_json("{'train_steps': 10}");
    const tl_run_config *rc = tu_resolve_ok(cfg);
    cr_assert(rc->train_steps.set && rc->train_steps.value == 10, "train_steps");
    cr_assert_not(rc->max_steps.set, "max_steps None");
    tl_config_destroy(cfg);
}

Test(estimator, T54_eval_steps_float_is_type_error)
{
    tu_json_fails("{'eval_steps': 12.3}", TL_ETYPE, "Eval steps must be int");
    tu_json_fails("{'eval_steps': 12.3}", TL_ETYPE, "Eval steps must be int, got <class 'float'>");
}

Test(estimator, T54_eval_steps_negative_is_value_error)
{
    tu_json_fails("{'eval_steps': -321}", TL_EINVAL, "Eval steps must be positive, got -321");
    tu_json_fails("{'eval_steps': 0}", TL_EINVAL, "Eval steps must be positive, got 0");
}

Test(estimator, T54_eval_steps_none_rejected_on_device)
{
    tl_config *cfg = tu_new_config();
    tu_resolve_ok(cfg);
    tu_expect_error(tl_config_check_eval(cfg), TL_EINVAL, "Evaluate `steps` must be set on TPU. Cannot be `None`.",
                    "check_eval");
    tl_config_destroy(cfg);
    cfg = tu_from_json("{'eval_steps': 6}");
    tu_resolve_ok(cfg);
    cr_assert_eq(tl_config_check_eval(cfg), TL_OK, "eval_steps 6: %s", tl_last_error());
    tl_config_destroy(cfg);
}

Test(estimator, T54_plain_path_uses_base_messages)
{
    tl_config *cfg = tu_from_json("{'eval_on_tpu': false}");
    tu_resolve_ok(cfg);
    cr_assert_eq(tl_config_check_eval(cfg), TL_OK, "None is fine off the device: %s", tl_last_error());
    tl_config_destroy(cfg);
    tu_json_fails("{'eval_on_tpu': false, 'eval_steps': -3}", TL_EINVAL, "Must specify steps > 0, given: -3");
    tu_json_fails("{'use_tpu': false, 'eval_steps': 0}", TL_EINVAL, "Must specify steps > 0, given: 0");
}

Test(estimator, checks_need_a_resolved_config)
{
    tl_config *cfg = tu_new_config();
    cr_assert_eq(tl_config_check_train(cfg), TL_EINVAL, "check_train before resolve");
    cr_assert_eq(tl_config_check_eval(cfg), TL_EINVAL, "check_eval before resolve");
    tl_config_destroy(cfg);
}

Test(estimator, devices_and_num_hosts_bounds)
{
    tu_json_fails("{'devices': -1}", TL_EINVAL, "devices");
    tu_json_fails("{'devices': 4097}", TL_EINVAL, "devices");
    tu_json_fails("{'num_hosts': 0}", TL_EINVAL, "num_hosts");
    tu_json_fails("{'devices': 'eight'}", TL_ETYPE, "devices must be int");
    tl_config *cfg = tu_from_json("{'devices': 8, 'num_hosts': 2}");
    const tl_run_config *rc = tu_resolve_ok(cfg);
    cr_assert_eq(rc->devices, 8, "devices");
    cr_assert_eq(rc->num_hosts, 2, "num_hosts");
    tl_config_destroy(cfg);
}

Test(estimator, use_tpu_must_be_bool)
{
    tu_json_fails("{'use_tpu': 1}", TL_ETYPE, "use_tpu");
}

Test(estimator, warm_start_vars_checked_at_resolve)
{
    /* The pattern the estimator would fail to compile is refused when the
     * configuration is resolved, naming the option, the value and why. */
    tu_json_fails("{'warm_start_vars': '(dense'}", TL_EINVAL,
                  "warm_start_vars '(dense' is not a supported regular expression: missing ), unterminated "
                  "subpattern at position 6 [from file test.json]");
    tu_json_fails("{'warm_start_vars': 'dense(?=x)'}", TL_EINVAL, "'(?' groups");
    tu_json_fails("{'warm_start_vars': 'a{70000}'}", TL_EINVAL, "warm_start_vars 'a{70000}' is not a supported");
    tu_json_fails("{'warm_start_vars': 3}", TL_ETYPE, "warm_start_vars must be a string or None");
    static const char *const ok[] = {"{'warm_start_vars': 'dense/.*'}", "{'warm_start_vars': null}",
                                     "{'warm_start_vars': '[a-z_]+/kernel|bias'}"};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        tl_config *cfg = tu_from_json(ok[i]);
        tu_resolve_ok(cfg);
        tl_config_destroy(cfg);
    }
}
