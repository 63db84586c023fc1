/*
 * test_config_roundtrip.c — what tl_config_to_json writes (the text of
 * model_dir/config.json) is a configuration file tpuloop reads back: for
 * every kind of option, to_json -> load_json -> resolve -> to_json gives the
 * same text, and the two resolved configurations hold the same values.
 */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

TestSuite(roundtrip, .init = tu_quiet);

static void str_eq(const char *a, const char *b, const char *what)
{
    cr_assert((a == NULL) == (b == NULL), "%s: %s vs %s", what, a ? a : "NULL", b ? b : "NULL");
    if (a != NULL)
        cr_assert_str_eq(a, b, "%s", what);
}

static void opt_eq(tl_opt_int a, tl_opt_int b, const char *what)
{
    cr_assert(a.set == b.set && (!a.set || a.value == b.value), "%s: %d/%lld vs %d/%lld", what, a.set,
              (long long)a.value, b.set, (long long)b.value);
}

static void strings_eq(const char *const *a, int na, const char *const *b, int nb, const char *what)
{
    cr_assert_eq(na, nb, "%s: %d vs %d", what, na, nb);
    cr_assert((a == NULL) == (b == NULL), "%s: NULL-ness", what);
    for (int i = 0; a != NULL && i < na; i++)
        str_eq(a[i], b[i], what);
}

static void ints_eq(const int64_t *a, const int64_t *b, int n, const char *what)
{
    cr_assert((a == NULL) == (b == NULL), "%s: NULL-ness", what);
    for (int i = 0; a != NULL && i < n; i++)
        cr_assert_eq(a[i], b[i], "%s[%d]", what, i);
}

static void features_eq(const tl_input_config *a, const tl_input_config *b)
{
    cr_assert_eq(a->num_features, b->num_features, "num_features");
    cr_assert((a->features == NULL) == (b->features == NULL), "features");
    for (int i = 0; a->features != NULL && i < a->num_features; i++) {
        const tl_feature_spec *x = &a->features[i], *y = &b->features[i];
        str_eq(x->key, y->key, "feature key");
        cr_assert(x->type == y->type && x->dtype == y->dtype && x->rank == y->rank, "feature %s kind", x->key);
        for (int d = 0; d < x->rank; d++)
            cr_assert_eq(x->shape[d], y->shape[d], "feature %s shape", x->key);
        cr_assert_eq(x->default_count, y->default_count, "feature %s default count", x->key);
        cr_assert((x->default_value == NULL) == (y->default_value == NULL), "feature %s default", x->key);
        for (size_t k = 0; x->default_value != NULL && k < x->default_count; k++) {
            if (x->dtype == TL_FEATURE_FLOAT)
                cr_assert_eq(((const float *)x->default_value)[k], ((const float *)y->default_value)[k]);
            else if (x->dtype == TL_FEATURE_INT64)
                cr_assert_eq(((const int64_t *)x->default_value)[k], ((const int64_t *)y->default_value)[k]);
            else {
                const tl_bytes *p = &((const tl_bytes *)x->default_value)[k];
                const tl_bytes *q = &((const tl_bytes *)y->default_value)[k];
                cr_assert(p->len == q->len && memcmp(p->data, q->data, p->len) == 0, "feature %s default", x->key);
            }
        }
    }
}

/* Every field of two resolved configurations is the same. */
static void same_resolved(const tl_run_config *a, const tl_run_config *b)
{
    const tl_tpu_config *s = &a->tpu, *t = &b->tpu;
    cr_assert(s->iterations_per_loop.unit == t->iterations_per_loop.unit &&
                  s->iterations_per_loop.value == t->iterations_per_loop.value,
              "iterations_per_loop");
    opt_eq(s->num_shards, t->num_shards, "num_shards");
    opt_eq(s->num_cores_per_replica, t->num_cores_per_replica, "num_cores_per_replica");
    cr_assert_eq(s->per_host_input_for_training, t->per_host_input_for_training);
    str_eq(s->tpu_job_name, t->tpu_job_name, "tpu_job_name");
    cr_assert_eq(s->initial_infeed_sleep_secs, t->initial_infeed_sleep_secs);
    cr_assert((s->input_partition_dims == NULL) == (t->input_partition_dims == NULL), "input_partition_dims");
    cr_assert_eq(s->eval_training_input_configuration, t->eval_training_input_configuration);
    cr_assert_eq(s->experimental_host_call_every_n_steps, t->experimental_host_call_every_n_steps);
    cr_assert_eq(s->experimental_allow_per_host_v2_parallel_get_next,
                 t->experimental_allow_per_host_v2_parallel_get_next);

    str_eq(a->model_dir, b->model_dir, "model_dir");
    str_eq(a->master, b->master, "master");
    str_eq(a->evaluation_master, b->evaluation_master, "evaluation_master");
    cr_assert(a->use_tpu == b->use_tpu && a->eval_on_tpu == b->eval_on_tpu, "use_tpu, eval_on_tpu");
    opt_eq(a->train_batch_size, b->train_batch_size, "train_batch_size");
    opt_eq(a->eval_batch_size, b->eval_batch_size, "eval_batch_size");
    opt_eq(a->predict_batch_size, b->predict_batch_size, "predict_batch_size");
    opt_eq(a->save_checkpoints_steps, b->save_checkpoints_steps, "save_checkpoints_steps");
    opt_eq(a->save_checkpoints_secs, b->save_checkpoints_secs, "save_checkpoints_secs");
    cr_assert_eq(a->keep_checkpoint_max, b->keep_checkpoint_max);
    cr_assert_eq(a->keep_checkpoint_every_n_hours, b->keep_checkpoint_every_n_hours);
    opt_eq(a->save_summary_steps, b->save_summary_steps, "save_summary_steps");
    opt_eq(a->log_step_count_steps, b->log_step_count_steps, "log_step_count_steps");
    opt_eq(a->tf_random_seed, b->tf_random_seed, "tf_random_seed");
    opt_eq(a->train_steps, b->train_steps, "train_steps");
    opt_eq(a->max_steps, b->max_steps, "max_steps");
    opt_eq(a->eval_steps, b->eval_steps, "eval_steps");
    str_eq(a->warm_start_from, b->warm_start_from, "warm_start_from");
    str_eq(a->warm_start_vars, b->warm_start_vars, "warm_start_vars");
    cr_assert(a->devices == b->devices && a->num_hosts == b->num_hosts, "devices, num_hosts");
    cr_assert_eq(a->host_timeout_secs, b->host_timeout_secs);
    str_eq(a->params_json, b->params_json, "params");
    str_eq(a->embedding_json, b->embedding_json, "embedding");
    str_eq(a->embedding_config, b->embedding_config, "embedding_config");

    const tl_model_config *m = &a->model, *n = &b->model;
    str_eq(m->model_name, n->model_name, "model_name");
    cr_assert(m->num_hidden == n->num_hidden && m->num_bottom == n->num_bottom && m->num_top == n->num_top);
    ints_eq(m->hidden_units, n->hidden_units, m->num_hidden, "hidden_units");
    ints_eq(m->bottom_mlp, n->bottom_mlp, m->num_bottom, "bottom_mlp");
    ints_eq(m->top_mlp, n->top_mlp, m->num_top, "top_mlp");
    cr_assert_eq(m->num_cross, n->num_cross, "num_cross_layers");
    str_eq(m->activation, n->activation, "activation");
    cr_assert(m->dropout == n->dropout && m->learning_rate == n->learning_rate, "dropout, learning_rate");
    str_eq(m->optimizer, n->optimizer, "optimizer");
    cr_assert_eq(m->reduce_sum, n->reduce_sum);

    const tl_input_config *x = &a->input, *y = &b->input;
    str_eq(x->dataset, y->dataset, "dataset");
    str_eq(x->data_dir, y->data_dir, "data_dir");
    opt_eq(x->epochs, y->epochs, "epochs");
    opt_eq(x->synthetic_examples, y->synthetic_examples, "synthetic_examples");
    opt_eq(x->synthetic_eval_examples, y->synthetic_eval_examples, "synthetic_eval_examples");
    opt_eq(x->synthetic_vocab_cap, y->synthetic_vocab_cap, "synthetic_vocab_cap");
    ints_eq(x->synthetic_vocab_sizes, y->synthetic_vocab_sizes, 26, "synthetic_vocab_sizes");
    opt_eq(x->synthetic_num_features, y->synthetic_num_features, "synthetic_num_features");
    opt_eq(x->synthetic_sequence_length, y->synthetic_sequence_length, "synthetic_sequence_length");
    opt_eq(x->synthetic_vocab, y->synthetic_vocab, "synthetic_vocab");
    strings_eq(x->files, x->num_files, y->files, y->num_files, "files");
    strings_eq(x->eval_files, x->num_eval_files, y->eval_files, y->num_eval_files, "eval_files");
    str_eq(x->compression, y->compression, "compression");
    features_eq(x, y);
    strings_eq(x->feature_keys, x->num_feature_keys, y->feature_keys, y->num_feature_keys, "feature_keys");
    str_eq(x->label_key, y->label_key, "label_key");
    opt_eq(x->shuffle_buffer_size, y->shuffle_buffer_size, "shuffle_buffer_size");
    cr_assert(x->reshuffle_each_iteration == y->reshuffle_each_iteration && x->cycle_length == y->cycle_length &&
              x->block_length == y->block_length && x->num_parallel_calls == y->num_parallel_calls &&
              x->prefetch == y->prefetch && x->skip_corrupt_records == y->skip_corrupt_records,
              "pipeline knobs");
    ints_eq(x->vocab_sizes, y->vocab_sizes, 26, "vocab_sizes");
    cr_assert_eq(x->num_csv_columns, y->num_csv_columns, "num_csv_columns");
    for (int i = 0; x->csv_columns != NULL && i < x->num_csv_columns; i++) {
        str_eq(x->csv_columns[i].name, y->csv_columns[i].name, "csv column");
        cr_assert_eq(x->csv_columns[i].type, y->csv_columns[i].type);
    }
    str_eq(x->label_column, y->label_column, "label_column");
    cr_assert_eq(x->scale, y->scale);
}

/* to_json of cfg (resolved here) reads back as the same configuration. */
static void round_trips(tl_config *cfg, const char *what)
{
    const tl_run_config *a = tu_resolve_ok(cfg);
    char *text = NULL, *again = NULL;
    cr_assert_eq(tl_config_to_json(cfg, &text), TL_OK, "%s: to_json: %s", what, tl_last_error());
    tl_config *back = tu_new_config();
    tl_status st = tl_config_load_json(back, text, strlen(text), "config.json");
    cr_assert_eq(st, TL_OK, "%s: its own output does not load: %s\n%s", what, tl_last_error(), text);
    st = tl_config_resolve(back);
    cr_assert_eq(st, TL_OK, "%s: its own output does not resolve: %s\n%s", what, tl_last_error(), text);
    cr_assert_eq(tl_config_to_json(back, &again), TL_OK);
    cr_assert_str_eq(again, text, "%s: the text changed on the way back", what);
    same_resolved(a, tl_config_get(back));
    tl_free_string(text);
    tl_free_string(again);
    tl_config_destroy(back);
    tl_config_destroy(cfg);
}

Test(roundtrip, defaults)
{
    round_trips(tu_new_config(), "defaults");
}

Test(roundtrip, tpu_config_and_time_mode_ipl)
{
    round_trips(tu_from_json("{'tpu_config': {'iterations_per_loop': '90m', 'num_cores_per_replica': 2,"
                             " 'per_host_input_for_training': 3, 'input_partition_dims': [{'x': [1, 2]}, null],"
                             " 'num_shards': 4, 'tpu_job_name': 'w', 'initial_infeed_sleep_secs': 3,"
                             " 'eval_training_input_configuration': 'SLICED',"
                             " 'experimental_host_call_every_n_steps': 5,"
                             " 'experimental_allow_per_host_v2_parallel_get_next': true}, 'devices': 8}"),
                "tpu_config");
    static const char *const ipls[] = {"1h", "3600s", "7s", "61m", "1", "100"};
    for (size_t i = 0; i < sizeof ipls / sizeof ipls[0]; i++) {
        tl_config *cfg = tu_new_config();
        tu_set_flag(cfg, "iterations_per_loop", ipls[i]);
        round_trips(cfg, ipls[i]);
    }
    round_trips(tu_from_json("{'tpu_config': {'per_host_input_for_training': false,"
                             " 'initial_infeed_sleep_secs': 0.0}}"),
                "PER_SHARD_V1 and a float zero");
}

Test(roundtrip, run_config_and_estimator)
{
    round_trips(tu_from_json("{'model_dir': '/tmp/m', 'save_checkpoints_steps': 100, 'keep_checkpoint_max': null,"
                             " 'keep_checkpoint_every_n_hours': 0.5, 'log_step_count_steps': null,"
                             " 'save_summary_steps': 0, 'tf_random_seed': -3, 'master': 'grpc://m',"
                             " 'train_batch_size': 64, 'eval_batch_size': 32, 'predict_batch_size': 16,"
                             " 'train_steps': 10, 'eval_steps': 2, 'warm_start_from': '/w',"
                             " 'warm_start_vars': 'dense/.*', 'devices': 4, 'num_hosts': 2,"
                             " 'use_tpu': false, 'eval_on_tpu': false}"),
                "run config");
    round_trips(tu_from_json("{'save_checkpoints_steps': null, 'save_checkpoints_secs': null, 'max_steps': 7,"
                             " 'warm_start_vars': null, 'evaluation_master': 'e'}"),
                "no checkpoint hook");
    round_trips(tu_from_json("{'save_checkpoints_secs': 30}"), "seconds");
    round_trips(tu_with_env("{}", "{\"service\": {\"tpu_worker_job_name\": \"tw\"}, \"model_dir\": \"/tf\","
                                  " \"session_master\": \"s\"}"),
                "TF_CONFIG's values");
}

Test(roundtrip, params_and_model)
{
    round_trips(tu_from_json("{'params': {'num_classes': 3, 'nested': {'a': [1, 2.5, 'x', null, true]}, 'lr': 0.1},"
                             " 'model': {'model_name': 'dlrm', 'bottom_mlp': [32, 8], 'top_mlp': [],"
                             " 'num_cross_layers': 5,"
                             " 'hidden_units': [7],"
                             " 'activation': 'tanh', 'dropout': 0.25, 'optimizer': 'momentum',"
                             " 'learning_rate': 0.05, 'cross_shard_reduction': 'SUM'}}"),
                "params and model");
}

Test(roundtrip, input_tfrecord_features)
{
    round_trips(tu_from_json("{'input': {'dataset': 'tfrecord', 'files': ['/d/train-*', '/e/x'], 'eval_files': '/d/t',"
                             " 'compression': 'GZIP', 'features': {"
                             "  'x': {'type': 'FixedLenFeature', 'dtype': 'float32', 'shape': [2, 2],"
                             "        'default_value': [0.1, 2, 3.5, -4]},"
                             "  'z': {'type': 'FixedLenFeature', 'dtype': 'float32', 'default_value': 0.3},"
                             "  's': {'type': 'FixedLenFeature', 'dtype': 'string', 'default_value': 'q'},"
                             "  'v': {'type': 'VarLenFeature', 'dtype': 'int64'},"
                             "  'n': {'type': 'FixedLenFeature', 'dtype': 'int64', 'shape': [3], 'default_value': 9},"
                             "  'label': {'type': 'FixedLenFeature', 'dtype': 'int64'}},"
                             " 'feature_keys': ['x', 'n'], 'shuffle_buffer_size': 100,"
                             " 'reshuffle_each_iteration': false, 'cycle_length': 4, 'block_length': 2,"
                             " 'num_parallel_calls': 3, 'prefetch': 0, 'skip_corrupt_records': true, 'epochs': 2}}"),
                "tfrecord");
}

Test(roundtrip, input_csv_criteo_idx_synthetic)
{
    round_trips(tu_from_json("{'input': {'dataset': 'csv', 'files': 'a.csv', 'csv_columns': [{'name': 'a', 'type':"
                             " 'float32'}, {'name': 'w', 'type': 'string'}, {'name': 'y', 'type': 'int64'}],"
                             " 'label_column': 'y'}}"),
                "csv");
    round_trips(tu_from_json("{'input': {'dataset': 'criteo', 'files': ['day_*'], 'vocab_sizes': "
                             "[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,0]}}"),
                "criteo");
    round_trips(tu_from_json("{'input': {'dataset': 'idx', 'files': ['i', 'l'], 'scale': 0.00392156862745098}}"),
                "idx");
    round_trips(tu_from_json("{'input': {'dataset': 'criteo_synthetic', 'synthetic_examples': 4096,"
                             " 'synthetic_vocab_sizes': [67108864,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,"
                             "21,22,23,24,25,26]}}"),
                "criteo_synthetic");
    round_trips(tu_from_json("{'input': {'dataset': 'synthetic', 'synthetic_num_features': 12}}"), "synthetic");
    round_trips(tu_from_json("{'model': {'model_name': 'transformer'}, 'input': {'dataset': 'synthetic_sequences', "
                             "'synthetic_sequence_length': 9, 'synthetic_vocab': 33}}"),
                "synthetic_sequences");
}

Test(roundtrip, embedding)
{
    round_trips(tu_from_json("{'model': {'model_name': 'dlrm'}, 'embedding': {'tables': [{'name': 'user',"
                             " 'vocabulary_size': 1000, 'dim': 64, 'combiner': 'sum', 'optimizer': {'type': 'adam',"
                             " 'learning_rate': 0.01, 'beta_1': 0.8}}, {'name': 'item', 'vocabulary_size': 300,"
                             " 'dim': 64}], 'features': [{'name': 'u', 'table': 'user', 'max_sequence_length': 4},"
                             " {'name': 'i', 'table': 'item'}], 'optimizer': {'type': 'adagrad',"
                             " 'learning_rate': 0.1, 'clipvalue': 5}, 'batch_size_per_tensor_core': 64}}"),
                "embedding section");
    round_trips(tu_from_json("{'embedding_config': 'tests/data/emb_config.pb'}"), "embedding_config");
}
