/* emit.c — the resolved configuration as JSON, and the option table as help. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config_int.h"

static json_t *opt_int(tl_opt_int v)
{
    return v.set ? json_integer(v.value) : json_null();
}

static json_t *opt_str(const char *s)
{
    return s ? json_string(s) : json_null();
}

/* iterations_per_loop as TensorFlow takes it: a count as an int, a time as
 * "<N>h", "<N>m" or "<N>s" in the largest unit that divides it, so that the
 * text reads back as the same value ("1h" and "60m" both print "1h"). */
static json_t *ipl_json(tl_ipl ipl)
{
    if (ipl.unit == TL_IPL_COUNT)
        return json_integer(ipl.value);
    char text[32];
    if (ipl.value % 3600 == 0)
        snprintf(text, sizeof text, "%lldh", (long long)(ipl.value / 3600));
    else if (ipl.value % 60 == 0)
        snprintf(text, sizeof text, "%lldm", (long long)(ipl.value / 60));
    else
        snprintf(text, sizeof text, "%llds", (long long)ipl.value);
    return json_string(text);
}

json_t *tl_config_value_json(const tl_config *cfg, int id)
{
    const tl_run_config *rc = &cfg->rc;
    const tl_tpu_config *t = &rc->tpu;
    switch ((tl_opt_id)id) {
    case TL_OPT_ID_iterations_per_loop: return ipl_json(t->iterations_per_loop);
    case TL_OPT_ID_num_shards: return opt_int(t->num_shards);
    case TL_OPT_ID_input_partition_dims:
        return cfg->pdims ? tl_partition_dims_to_json(cfg->pdims) : json_null();
    case TL_OPT_ID_num_cores_per_replica: return opt_int(t->num_cores_per_replica);
    case TL_OPT_ID_eval_training_input_configuration:
        return json_string(tl_input_mode_name(t->eval_training_input_configuration));
    case TL_OPT_ID_per_host_input_for_training:
        return json_string(tl_input_mode_name(t->per_host_input_for_training));
    case TL_OPT_ID_initial_infeed_sleep_secs: return json_integer(t->initial_infeed_sleep_secs);
    case TL_OPT_ID_tpu_job_name: return opt_str(t->tpu_job_name);
    case TL_OPT_ID_experimental_host_call_every_n_steps:
        return json_integer(t->experimental_host_call_every_n_steps);
    case TL_OPT_ID_experimental_allow_per_host_v2_parallel_get_next:
        return json_boolean(t->experimental_allow_per_host_v2_parallel_get_next);
    case TL_OPT_ID_model_dir: return opt_str(rc->model_dir);
    case TL_OPT_ID_save_summary_steps: return opt_int(rc->save_summary_steps);
    case TL_OPT_ID_save_checkpoints_steps: return opt_int(rc->save_checkpoints_steps);
    case TL_OPT_ID_save_checkpoints_secs: return opt_int(rc->save_checkpoints_secs);
    case TL_OPT_ID_keep_checkpoint_max: return json_integer(rc->keep_checkpoint_max);
    case TL_OPT_ID_keep_checkpoint_every_n_hours:
        return rc->keep_checkpoint_every_n_hours < 0 ? json_null() : json_real(rc->keep_checkpoint_every_n_hours);
    case TL_OPT_ID_log_step_count_steps: return opt_int(rc->log_step_count_steps);
    case TL_OPT_ID_tf_random_seed: return opt_int(rc->tf_random_seed);
    case TL_OPT_ID_master: return opt_str(rc->master);
    case TL_OPT_ID_evaluation_master: return opt_str(rc->evaluation_master);
    case TL_OPT_ID_params: return json_loads(rc->params_json, 0, NULL);
    case TL_OPT_ID_use_tpu: return json_boolean(rc->use_tpu);
    case TL_OPT_ID_eval_on_tpu: return json_boolean(rc->eval_on_tpu);
    case TL_OPT_ID_train_batch_size: return opt_int(rc->train_batch_size);
    case TL_OPT_ID_eval_batch_size: return opt_int(rc->eval_batch_size);
    case TL_OPT_ID_predict_batch_size: return opt_int(rc->predict_batch_size);
    case TL_OPT_ID_train_steps: return opt_int(rc->train_steps);
    case TL_OPT_ID_max_steps: return opt_int(rc->max_steps);
    case TL_OPT_ID_eval_steps: return opt_int(rc->eval_steps);
    case TL_OPT_ID_warm_start_from: return opt_str(rc->warm_start_from);
    case TL_OPT_ID_warm_start_vars: return opt_str(rc->warm_start_vars);
    case TL_OPT_ID_eval_every_n_steps: return opt_int(rc->eval_every_n_steps);
    case TL_OPT_ID_throttle_secs: return json_integer(rc->throttle_secs);
    case TL_OPT_ID_best_exporter: return json_boolean(rc->best_exporter);
    case TL_OPT_ID_exports_to_keep: return json_integer(rc->exports_to_keep);
    case TL_OPT_ID_devices: return json_integer(rc->devices);
    case TL_OPT_ID_intra_op_parallelism_threads: return json_integer(rc->intra_op_parallelism_threads);
    case TL_OPT_ID_num_hosts: return json_integer(rc->num_hosts);
    case TL_OPT_ID_host_timeout_secs: return json_integer(rc->host_timeout_secs);
    case TL_OPT_ID_model_name: return json_string(rc->model.model_name);
    case TL_OPT_ID_hidden_units: {
        json_t *a = json_array();
        for (int i = 0; a && i < rc->model.num_hidden; i++)
            json_array_append_new(a, json_integer(rc->model.hidden_units[i]));
        return a;
    }
    case TL_OPT_ID_bottom_mlp:
    case TL_OPT_ID_top_mlp: {
        bool bottom = id == TL_OPT_ID_bottom_mlp;
        json_t *a = json_array();
        for (int i = 0; a && i < (bottom ? rc->model.num_bottom : rc->model.num_top); i++)
            json_array_append_new(a, json_integer(bottom ? rc->model.bottom_mlp[i] : rc->model.top_mlp[i]));
        return a;
    }
    case TL_OPT_ID_num_cross_layers: return json_integer(rc->model.num_cross);
    case TL_OPT_ID_activation: return json_string(rc->model.activation);
    case TL_OPT_ID_dropout: return json_real(rc->model.dropout);
    case TL_OPT_ID_optimizer: return json_string(rc->model.optimizer);
    case TL_OPT_ID_learning_rate: return json_real(rc->model.learning_rate);
    case TL_OPT_ID_learning_rate_decay: return json_string(rc->model.learning_rate_decay);
    case TL_OPT_ID_decay_steps: return opt_int(rc->model.decay_steps);
    case TL_OPT_ID_cross_shard_reduction: return json_string(rc->model.reduce_sum ? "SUM" : "MEAN");
    case TL_OPT_ID_dataset: return json_string(rc->input.dataset);
    case TL_OPT_ID_data_dir: return opt_str(rc->input.data_dir);
    case TL_OPT_ID_epochs: return opt_int(rc->input.epochs);
    case TL_OPT_ID_synthetic_examples:
    case TL_OPT_ID_synthetic_eval_examples:
    case TL_OPT_ID_synthetic_vocab_cap:
    case TL_OPT_ID_synthetic_vocab_sizes:
    case TL_OPT_ID_synthetic_num_features:
    case TL_OPT_ID_synthetic_sequence_length:
    case TL_OPT_ID_synthetic_vocab:
    case TL_OPT_ID_files:
    case TL_OPT_ID_eval_files:
    case TL_OPT_ID_compression:
    case TL_OPT_ID_features:
    case TL_OPT_ID_feature_keys:
    case TL_OPT_ID_label_key:
    case TL_OPT_ID_shuffle_buffer_size:
    case TL_OPT_ID_reshuffle_each_iteration:
    case TL_OPT_ID_cycle_length:
    case TL_OPT_ID_block_length:
    case TL_OPT_ID_num_parallel_calls:
    case TL_OPT_ID_prefetch:
    case TL_OPT_ID_skip_corrupt_records:
    case TL_OPT_ID_vocab_sizes:
    case TL_OPT_ID_csv_columns:
    case TL_OPT_ID_label_column:
    case TL_OPT_ID_scale: return tl_input_value_json(cfg, (tl_opt_id)id);
    case TL_OPT_ID_embedding: return rc->embedding_json ? json_loads(rc->embedding_json, 0, NULL) : json_null();
    case TL_OPT_ID_embedding_config: return opt_str(rc->embedding_config);
    case TL_OPT_ID_layout_map: return rc->layout_map_json ? json_loads(rc->layout_map_json, 0, NULL) : json_null();
    case TL_NUM_OPTIONS: break;
    }
    return json_null();
}

tl_status tl_config_to_json(const tl_config *cfg, char **out)
{
    *out = NULL;
    if (!cfg->resolved)
        return tl_error(TL_EINVAL, "the configuration is not resolved: call tl_config_resolve first");
    json_t *root = json_object();
    if (root == NULL)
        goto oom;
    for (int i = 0; i < TL_NUM_OPTIONS; i++) {
        json_t *v = tl_config_value_json(cfg, i);
        if (v == NULL)
            goto oom;
        json_t *dst = root;
        if (tl_options[i].section != NULL) {
            dst = json_object_get(root, tl_options[i].section);
            if (dst == NULL) {
                dst = json_object();
                if (dst == NULL || json_object_set_new(root, tl_options[i].section, dst) != 0) {
                    json_decref(v);
                    goto oom;
                }
            }
        }
        json_object_set_new(dst, tl_options[i].name, v);
    }
    char *text = json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    json_decref(root);
    if (text == NULL)
        return tl_error_oom();
    *out = tl_strdup(text);
    free(text);
    return *out ? TL_OK : tl_error_oom();
oom:
    json_decref(root);
    return tl_error_oom();
}

/* What tpuloop refuses although TensorFlow takes it, and why: each is a
 * value TensorFlow accepts by accident of Python and then misreads or fails
 * on later, never one a working TensorFlow program relies on. */
static const char stricter[] =
    "\nWhere tpuloop is stricter than TensorFlow, on purpose (each value below is refused\n"
    "when the configuration is resolved; TensorFlow takes it by accident of Python):\n"
    "  - booleans for integer options (num_shards, num_cores_per_replica, the batch sizes,\n"
    "    steps, seeds, ...): Python's bool is an int, so TensorFlow reads True as 1; tpuloop\n"
    "    refuses a boolean with TensorFlow's TypeError, as it is always a slip.\n"
    "  - floats for integer options (2.0 for num_cores_per_replica, 2.5 for\n"
    "    save_checkpoints_steps): TensorFlow checks some only by comparison or list\n"
    "    membership; tpuloop needs an int. (0.0 for initial_infeed_sleep_secs is no sleep,\n"
    "    as in TensorFlow.)\n"
    "  - iterations_per_loop \"5|\" and a trailing newline (\"5\\n\"): Python's regex takes\n"
    "    them by accident ([s|m|h] admits '|', `$` matches before a final newline); refused\n"
    "    as the TPUEstimator spec recommends.\n"
    "  - experimental_host_call_every_n_steps <= 0: TensorFlow does not check it and divides\n"
    "    by it in the outfeed thread; refused at once.\n"
    "  - per_host_input_for_training other than true, false or 1..4 (a name or number):\n"
    "    TensorFlow stores any value unchecked; refused.\n"
    "  - initial_infeed_sleep_secs false, '', [] or {}: TensorFlow skips its check for a\n"
    "    falsy value; refused (null, 0 and 0.0 mean no sleep, as in TensorFlow).\n";

tl_status tl_config_help(char **out)
{
    tl_strbuf sb = {0};
    tl_strbuf_append(&sb,
                     "Configuration options. Sources, later wins: defaults, a JSON file (TPUConfig fields\n"
                     "nested under \"tpu_config\"), environment variables, --name=value flags.\n\n");
    for (int i = 0; i < TL_NUM_OPTIONS; i++) {
        const tl_option *o = &tl_options[i];
        char key[128];
        snprintf(key, sizeof key, "%s%s%s", o->section ? o->section : "", o->section ? "." : "", o->name);
        tl_strbuf_appendf(&sb, "  --%s\n      file key: %s   default: %s%s%s\n      %s\n      allowed: %s\n",
                          o->name, key, o->default_json, o->env ? "   env: " : "", o->env ? o->env : "",
                          o->help, o->allowed);
    }
    tl_strbuf_append(&sb, "\nTF_CONFIG (JSON) supplies tpu_job_name (service.tpu_worker_job_name), model_dir,\n"
                          "session_master and eval_session_master as in TensorFlow.\n");
    tl_strbuf_append(&sb, stricter);
    *out = tl_strbuf_take(&sb);
    return *out ? TL_OK : tl_error_oom();
}
