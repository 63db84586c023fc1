/* `tpuloop train` with model_name dcn on criteo_synthetic
 * (examples/dcn_synthetic.json): it reaches the planted model's AUC within
 * 0.01, as the DLRM does (test_cli_dlrm.c), its checkpoints carry the cross
 * layers and the embedding tables (an evaluation from model_dir repeats the
 * training's own), `tpuloop config` shows num_cross_layers, and the
 * configurations it cannot run are named errors. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_cli_util.h"

#define EXAMPLE "examples/dcn_synthetic.json"

/* The bar: within 0.01 of the oracle, on the DLRM test's data
 * (vocabularies capped at 100 rows). The planted interactions are DLRM's dot
 * products, which DCN has to learn as blocks of its cross kernels, and it
 * needs about twice the DLRM's examples: after 1M it is 0.013 to 0.015
 * short with 1, 2 or 3 cross layers, after 2M within 0.008 with 1 or 3.
 * One cross layer keeps 2M examples in time: a full-rank layer of width
 * 13 + 26 * 16 = 429 costs more than the rest of the model (1M examples:
 * 32 CPU-seconds with one, 72 with three). */
Test(cli_dcn, reaches_the_planted_models_auc)
{
    tc_result r = tc_run(NULL, "train " EXAMPLE " --devices=2 --synthetic_vocab_cap=100 --synthetic_examples=2097152 "
                               "--num_cross_layers=1 --synthetic_eval_examples=65536 --eval_steps=64");
    cr_assert_eq(r.status, 0, "%s", r.err);
    json_t *j = tc_json(&r);
    double auc = tc_eval_num(j, "auc"), oracle = tc_eval_num(j, "oracle_auc");
    cr_assert(oracle > 0.75 && oracle < 0.85, "oracle_auc %.4f", oracle);
    cr_assert(auc >= oracle - 0.01, "eval auc %.4f is not within 0.01 of the planted model's %.4f", auc, oracle);
    cr_assert(strstr(r.err, "training dcn on 2097152 examples") != NULL, "%s", r.err);
    json_decref(j);
    tc_done(&r);
}

/* The cross kernels and the tables live in the checkpoint: evaluate from
 * model_dir gives the training's evaluation, bit for bit. */
Test(cli_dcn, checkpoints_round_trip)
{
    char *dir = tc_tmpdir();
    const char *small = "--synthetic_vocab_cap=200 --synthetic_examples=16384 --synthetic_eval_examples=4096 "
                        "--eval_steps=4 --train_batch_size=256 --iterations_per_loop=16";
    tc_result r = tc_runf("train " EXAMPLE " --devices=2 %s --model_dir=%s", small, dir);
    cr_assert_eq(r.status, 0, "%s", r.err);
    json_t *t = tc_json(&r);
    tc_done(&r);
    cr_assert_eq(json_integer_value(json_object_get(t, "global_step")), 64);
    r = tc_runf("evaluate " EXAMPLE " --devices=2 %s --model_dir=%s", small, dir);
    cr_assert_eq(r.status, 0, "%s", r.err);
    json_t *e = tc_json(&r);
    tc_done(&r);
    json_t *te = json_object_get(t, "eval");
    cr_assert(json_equal(json_object_get(te, "auc"), json_object_get(e, "auc")), "auc differs after the restore");
    cr_assert(json_equal(json_object_get(te, "loss"), json_object_get(e, "loss")), "loss differs after the restore");
    cr_assert_str_eq(json_string_value(json_object_get(t, "params_digest")),
                     json_string_value(json_object_get(e, "params_digest")));
    /* A model of more cross layers than the checkpoint holds is named the
     * variable it misses. */
    r = tc_runf("evaluate " EXAMPLE " --devices=2 %s --model_dir=%s --num_cross_layers=4", small, dir);
    cr_assert_neq(r.status, 0, "a checkpoint of 3 cross layers read by a model of 4");
    cr_assert(strstr(r.err, "variable 'cross_3/dense/") && strstr(r.err, "is missing"), "%s", r.err);
    tc_done(&r);
    json_decref(t);
    json_decref(e);
    tc_rmtree(dir);
    free(dir);
}

/* `tpuloop config --json`'s model section of the run config. */
static json_t *model_of(const char *args)
{
    tc_result r = tc_runf("config %s --json", args);
    cr_assert_eq(r.status, 0, "config %s: %s", args, r.err);
    json_t *j = tc_json(&r);
    tc_done(&r);
    json_t *m = json_object_get(json_object_get(j, "run_config"), "model");
    cr_assert(json_is_object(m), "config %s: no run_config.model", args);
    json_incref(m);
    json_decref(j);
    return m;
}

Test(cli_dcn, config_shows_num_cross_layers)
{
    json_t *m = model_of(EXAMPLE " --num_cross_layers=5");
    cr_assert_str_eq(json_string_value(json_object_get(m, "model_name")), "dcn");
    cr_assert_eq(json_integer_value(json_object_get(m, "num_cross_layers")), 5);
    json_decref(m);
    m = model_of(EXAMPLE);
    cr_assert_eq(json_integer_value(json_object_get(m, "num_cross_layers")), 3, "the example's");
    json_decref(m);
    m = model_of("");
    cr_assert_eq(json_integer_value(json_object_get(m, "num_cross_layers")), 3, "the default");
    json_decref(m);
    tc_result r = tc_run(NULL, "help config");
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_assert(strstr(r.out, "--num_cross_layers") && strstr(r.out, "file key: model.num_cross_layers   default: 3"),
              "%s", r.out);
    tc_done(&r);
}

Test(cli_dcn, configurations_it_cannot_run)
{
    tc_result r = tc_run(NULL, "train --model_name=dcn --dataset=criteo_synthetic --train_batch_size=64 "
                               "--train_steps=1 --synthetic_examples=256");
    cr_assert_eq(r.status, 2, "%s", r.err);
    cr_assert(strstr(r.err, "model_name dcn needs embedding tables: set embedding (a JSON section) or "
                            "embedding_config") != NULL, "%s", r.err);
    tc_done(&r);
    r = tc_run(NULL, "config " EXAMPLE " --num_cross_layers=17");
    cr_assert_eq(r.status, 2, "%s", r.err);
    cr_assert(strstr(r.err, "num_cross_layers must be in [0, 16], got 17") != NULL, "%s", r.err);
    tc_done(&r);
    r = tc_run(NULL, "config --num_cross_layers=-1");
    cr_assert_eq(r.status, 2, "%s", r.err);
    cr_assert(strstr(r.err, "num_cross_layers must be in [0, 16], got -1") != NULL, "%s", r.err);
    tc_done(&r);
    r = tc_run(NULL, "config --num_cross_layers=2.5");
    cr_assert_eq(r.status, 2, "%s", r.err);
    cr_assert(strstr(r.err, "num_cross_layers must be int, got <class 'float'> (allowed: an int in [0, 16])") !=
                  NULL, "%s", r.err);
    tc_done(&r);
    r = tc_run(NULL, "config --model_name=dcnv2");
    cr_assert_eq(r.status, 2, "%s", r.err);
    cr_assert(strstr(r.err, "model_name must be ") && strstr(r.err, "dcn") && strstr(r.err, "got dcnv2"), "%s", r.err);
    tc_done(&r);
}
