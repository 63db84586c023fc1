/*
 * test_cli_config.c — `tpuloop config`: a model_dir's config.json, written
 * by `tpuloop train`, is a configuration file the command (and so every
 * command) reads back as the same configuration; the embedding tables'
 * optimizer parameters in the text and --json output; `tpuloop help config`
 * names where tpuloop is stricter than TensorFlow; the layout of replicas
 * and intra-op threads, and the threads' bounds.
 */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_cli_util.h"
#include "tpuloop/devices.h"

/* `tpuloop config ARGS --json`'s run_config and tpu_config. */
static json_t *resolved(const char *args)
{
    tc_result r = tc_runf("config %s --json", args);
    cr_assert_eq(r.status, 0, "config %s: %s", args, r.err);
    json_t *j = tc_json(&r);
    tc_done(&r);
    json_t *out = json_object();
    json_object_set(out, "run_config", json_object_get(j, "run_config"));
    json_object_set(out, "tpu_config", json_object_get(j, "tpu_config"));
    json_decref(j);
    return out;
}

Test(cli_config, a_model_dirs_config_json_is_read_back, .timeout = 120)
{
    char *data = tc_tmpdir(), *dir = tc_tmpdir();
    tc_write_tiny_mnist(data, 256, 64, 8);
    char flags[1024];
    snprintf(flags, sizeof flags,
             "--data_dir=%s --model_dir=%s --train_batch_size=16 --hidden_units=[8] --devices=2 "
             "--tf_random_seed=7 --iterations_per_loop=1h --train_steps=3 --log_step_count_steps=1000 "
             "--shuffle_buffer_size=null --params='{\"num_classes\":10}'",
             data, dir);
    tc_result r = tc_runf("train %s", flags);
    cr_assert_eq(r.status, 0, "train: %s", r.err);
    tc_done(&r);

    /* The file the run wrote is a configuration `tpuloop config` takes, and
     * it describes the run exactly. */
    char file[600];
    snprintf(file, sizeof file, "%s/config.json", dir);
    json_t *from_file = resolved(file), *from_flags = resolved(flags);
    char *a = json_dumps(from_file, JSON_SORT_KEYS), *b = json_dumps(from_flags, JSON_SORT_KEYS);
    cr_assert_str_eq(a, b, "the config.json of a run resolves as the run's own flags");
    cr_assert_str_eq(json_string_value(json_object_get(json_object_get(from_file, "tpu_config"),
                                                       "iterations_per_loop")),
                     "1h");
    free(a);
    free(b);
    json_decref(from_file);
    json_decref(from_flags);
    tc_rmtree(data);
    tc_rmtree(dir);
    free(data);
    free(dir);
}

Test(cli_config, help_names_where_tpuloop_is_stricter)
{
    tc_result r = tc_run(NULL, "help config");
    cr_assert_eq(r.status, 0);
    cr_assert(strstr(r.out, "stricter than TensorFlow") && strstr(r.out, "booleans for integer options") &&
                  strstr(r.out, "iterations_per_loop \"5|\"") &&
                  strstr(r.out, "experimental_host_call_every_n_steps <= 0"),
              "%s", r.out);
    tc_done(&r);
}

Test(cli_config, embedding_optimizer_parameters_are_shown)
{
    static const char emb[] =
        "--embedding='{\"tables\": [{\"name\": \"user\", \"vocabulary_size\": 1000, \"dim\": 16, \"optimizer\": "
        "{\"type\": \"adam\", \"learning_rate\": 0.01, \"beta_1\": 0.8, \"clipvalue\": 2}}, {\"name\": \"item\", "
        "\"vocabulary_size\": 300, \"dim\": 8}], \"features\": [{\"name\": \"u\", \"table\": \"user\"}, "
        "{\"name\": \"i\", \"table\": \"item\"}], \"optimizer\": {\"type\": \"ftrl\", \"learning_rate_tag\": 0, "
        "\"l1_regularization_strength\": 0.5, \"weight_decay_factor\": 0.001}}'";
    tc_result r = tc_runf("config --json %s", emb);
    cr_assert_eq(r.status, 0, "stderr: %s", r.err);
    json_t *j = tc_json(&r);
    tc_done(&r);
    json_t *tables = json_object_get(json_object_get(j, "embedding"), "tables");
    json_t *user = json_object_get(json_array_get(tables, 0), "optimizer_parameters");
    json_t *item = json_object_get(json_array_get(tables, 1), "optimizer_parameters");
    cr_assert(json_is_object(user) && json_is_object(item), "each table's optimizer_parameters");
    cr_assert_str_eq(json_string_value(json_object_get(user, "type")), "adam");
    cr_assert_eq(json_real_value(json_object_get(user, "learning_rate")), 0.01, "the value written, exactly");
    cr_assert_eq(json_real_value(json_object_get(user, "beta_1")), 0.8);
    cr_assert_eq(json_real_value(json_object_get(user, "beta_2")), 0.999, "a default is shown too");
    cr_assert_eq(json_real_value(json_object_get(user, "epsilon")), 1e-7);
    cr_assert(json_is_true(json_object_get(user, "lazy_adam")));
    json_t *gclip = json_object_get(user, "gradient_clipping_limits");
    cr_assert(json_real_value(json_object_get(gclip, "lower")) == -2 &&
              json_real_value(json_object_get(gclip, "upper")) == 2);
    /* The shared optimizer, on the table without its own. */
    cr_assert_str_eq(json_string_value(json_object_get(item, "type")), "ftrl");
    cr_assert_eq(json_integer_value(json_object_get(item, "learning_rate_tag")), 0);
    cr_assert_null(json_object_get(item, "learning_rate"), "a dynamic rate has no constant");
    cr_assert_eq(json_real_value(json_object_get(item, "l1_regularization_strength")), 0.5);
    cr_assert_eq(json_real_value(json_object_get(item, "learning_rate_power")), -0.5);
    cr_assert_eq(json_real_value(json_object_get(item, "initial_accumulator_value")), 0.1);
    cr_assert_eq(json_real_value(json_object_get(item, "weight_decay_factor")), 0.001);
    cr_assert_str_eq(json_string_value(json_object_get(json_array_get(tables, 1), "optimizer")), "FTRL");
    json_decref(j);

    /* The text names the key ones under each table. */
    r = tc_runf("config %s", emb);
    cr_assert_eq(r.status, 0, "stderr: %s", r.err);
    cr_assert(strstr(r.out, "learning_rate 0.01, beta_1 0.8, beta_2 0.999, epsilon 1e-7, lazy_adam true") &&
                  strstr(r.out, "clip gradients [-2.0, 2.0]"),
              "%s", r.out);
    cr_assert(strstr(r.out, "learning_rate dynamic (tag 0), initial_accumulator_value 0.1, "
                            "l1_regularization_strength 0.5") &&
                  strstr(r.out, "weight_decay_factor 0.001"),
              "%s", r.out);
    tc_done(&r);

    /* A binary TPUEmbeddingConfiguration's too. */
    r = tc_run(NULL, "config --json --embedding_config=tests/data/emb_config.pb");
    cr_assert_eq(r.status, 0, "stderr: %s", r.err);
    j = tc_json(&r);
    tc_done(&r);
    tables = json_object_get(json_object_get(j, "embedding"), "tables");
    size_t i;
    json_t *t;
    json_array_foreach(tables, i, t) {
        json_t *p = json_object_get(t, "optimizer_parameters");
        cr_assert(json_is_string(json_object_get(p, "type")), "table %zu", i);
        cr_assert(json_object_get(p, "learning_rate") != NULL || json_object_get(p, "learning_rate_tag") != NULL);
    }
    json_decref(j);
}

/* A replica of several cores: `tpuloop config` traces and partitions the
 * training program before anything runs and shows which core holds which
 * share and the collectives the partitioner put in. Tensor parallelism
 * from layout_map (the Transformer's Megatron layout): each split
 * variable's chunks, the sums after row-split kernels, no gather. */
#define SEQ_ARGS                                                                                                    \
    "--model_name=transformer --dataset=synthetic_sequences --synthetic_examples=64 --synthetic_eval_examples=16 " \
    "--train_batch_size=16 --devices=2 --num_cores_per_replica=2 --per_host_input_for_training=PER_HOST_V2 "       \
    "--params='{\"d_model\": 16, \"num_heads\": 4, \"num_layers\": 1, \"d_ff\": 30}' "

Test(cli_config, the_partition_of_a_replica_is_shown)
{
    tc_result r = tc_run(NULL, "config " SEQ_ARGS
                               "--layout_map='{\".*query/kernel\": [null, \"model\"], \".*key/kernel\": [null, "
                               "\"model\"], \".*value/kernel\": [null, \"model\"], \".*output/kernel\": [\"model\", "
                               "null], \".*ffn/dense/kernel\": [null, \"model\"], \".*dense_1/kernel\": [\"model\", "
                               "null]}' --json");
    cr_assert_eq(r.status, 0, "stderr: %s", r.err);
    json_t *j = json_loads(r.out, 0, NULL);
    json_t *p = json_object_get(j, "partition");
    cr_assert_str_eq(json_string_value(json_object_get(p, "kind")), "tensor", "%s", r.out);
    cr_assert_eq(json_integer_value(json_object_get(p, "cores")), 2);
    cr_assert_eq(json_integer_value(json_object_get(p, "gathered")), 0);
    json_t *vars = json_object_get(p, "variables");
    cr_assert_eq(json_array_size(vars), 6);
    json_t *ffn = json_array_get(vars, 4);
    cr_assert_str_eq(json_string_value(json_object_get(ffn, "name")), "layer_0/ffn/dense/kernel");
    cr_assert_eq(json_integer_value(json_object_get(ffn, "split_dim")), 1);
    cr_assert_eq(json_integer_value(json_array_get(json_object_get(ffn, "chunks"), 0)), 15);
    json_t *sum = json_object_get(json_object_get(p, "collectives"), "sum");
    cr_assert_eq(json_integer_value(json_object_get(sum, "count")), 2, "one sum per row-split kernel");
    cr_assert_eq(json_array_size(json_object_get(p, "activation_bytes")), 2);
    json_decref(j);
    tc_done(&r);

    /* The text, and a configuration the partitioner cannot run: named. */
    r = tc_run(NULL, "config " SEQ_ARGS "--layout_map='{\"logits/kernel\": [\"batch\", null]}'");
    cr_assert_eq(r.status, 0, "stderr: %s", r.err);
    cr_assert(strstr(r.out, "partition\n  not shown: ") != NULL, "%s", r.out);
    cr_assert(strstr(r.out, "puts dimension 0 on the mesh axis 'batch'") != NULL, "%s", r.out);
    tc_done(&r);
    r = tc_run(NULL, "config " SEQ_ARGS "--layout_map='{\".*ffn/dense/kernel\": [null, \"model\"]}'");
    cr_assert_eq(r.status, 0, "stderr: %s", r.err);
    cr_assert(strstr(r.out, "layer_0/ffn/dense/kernel") && strstr(r.out, "[15, 15]"), "%s", r.out);
    cr_assert(strstr(r.out, "gather    1 (matmul x 1)") != NULL, "the column-split output meets a whole kernel: %s",
              r.out);
    tc_done(&r);
}

Test(cli_config, the_layout_of_replicas_and_intra_op_threads_is_shown)
{
    /* One replica of one device on 2 intra-op threads; the text says how
     * many cores the host's threads take. */
    tc_result r = tc_run(NULL, "config --devices=1 --intra_op_parallelism_threads=2 --json");
    cr_assert_eq(r.status, 0, "stderr: %s", r.err);
    json_t *j = tc_json(&r);
    tc_done(&r);
    cr_assert_eq(json_integer_value(json_object_get(j, "intra_op_threads")), 2);
    const char *layout = json_string_value(json_object_get(j, "layout"));
    cr_assert(layout != NULL && strncmp(layout, "1 replica x 1 device x 2 intra-op threads per host = 2 threads on ",
                                        66) == 0, "%s", layout ? layout : "(none)");
    json_decref(j);

    /* 0: the cores of the affinity mask shared among the host's devices,
     * at least one each. */
    r = tc_run(NULL, "config --devices=1 --intra_op_parallelism_threads=0 --json");
    cr_assert_eq(r.status, 0, "stderr: %s", r.err);
    j = tc_json(&r);
    tc_done(&r);
    cr_assert_eq(json_integer_value(json_object_get(j, "intra_op_threads")), tl_available_cpus());
    json_decref(j);
    r = tc_run(NULL, "config --devices=4096 --intra_op_parallelism_threads=0 --json");
    cr_assert_eq(r.status, 0, "stderr: %s", r.err);
    j = tc_json(&r);
    tc_done(&r);
    cr_assert_eq(json_integer_value(json_object_get(j, "intra_op_threads")), 1);
    json_decref(j);

    /* More threads than cores: said, not refused. */
    r = tc_run(NULL, "config --devices=8 --intra_op_parallelism_threads=2");
    cr_assert_eq(r.status, 0, "stderr: %s", r.err);
    cr_assert(strstr(r.out, "  layout: 8 replicas x 1 device x 2 intra-op threads per host = 16 threads on ") != NULL,
              "%s", r.out);
    if (tl_available_cpus() < 16)
        cr_assert(strstr(r.out, "(oversubscribed)") != NULL, "%s", r.out);
    tc_done(&r);

    /* Out of range: the field, the value and what is allowed. */
    r = tc_run(NULL, "config --intra_op_parallelism_threads=257");
    cr_assert_neq(r.status, 0);
    cr_assert(strstr(r.err, "intra_op_parallelism_threads must be in [0, 256], got 257") != NULL, "%s", r.err);
    tc_done(&r);
}
