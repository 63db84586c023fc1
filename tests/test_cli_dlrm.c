/* `tpuloop train` with model_name dlrm on criteo_synthetic
 * (examples/dlrm_synthetic.json): it reaches the planted model's AUC within
 * 0.01, its checkpoints carry the embedding tables (an evaluation from
 * model_dir repeats the training's own), the configurations it cannot run
 * are named errors, and the same model trains from Criteo TSV and from the
 * TFRecord `data convert` makes of it, ids by feature name. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_cli_util.h"
#include "tpuloop/criteo_synth.h"

#define EXAMPLE "examples/dlrm_synthetic.json"

/* The bar: within 0.01 of the oracle. Vocabularies capped at 100
 * rows (every id is seen often enough in 1M examples to be learnt; with
 * 100000 the rare ids' embeddings stay noise at this size), one epoch. */
Test(cli_dlrm, reaches_the_planted_models_auc)
{
    tc_result r = tc_run(NULL, "train " EXAMPLE " --devices=2 --synthetic_vocab_cap=100 --synthetic_examples=1048576 "
                               "--synthetic_eval_examples=65536 --eval_steps=64");
    cr_assert_eq(r.status, 0, "%s", r.err);
    json_t *j = tc_json(&r);
    double auc = tc_eval_num(j, "auc"), oracle = tc_eval_num(j, "oracle_auc");
    cr_assert(oracle > 0.75 && oracle < 0.85, "oracle_auc %.4f", oracle);
    cr_assert(auc >= oracle - 0.01, "eval auc %.4f is not within 0.01 of the planted model's %.4f", auc, oracle);
    cr_assert(strstr(r.err, "(the planted model's: ") != NULL, "%s", r.err);
    json_decref(j);
    tc_done(&r);
}

/* The tables live in the checkpoint: evaluate from model_dir gives the
 * training's evaluation, bit for bit. */
Test(cli_dlrm, checkpoints_hold_the_tables)
{
    char *dir = tc_tmpdir();
    const char *small = "--synthetic_vocab_cap=200 --synthetic_examples=16384 --synthetic_eval_examples=4096 "
                        "--eval_steps=4 --train_batch_size=256 --iterations_per_loop=16";
    tc_result r = tc_runf("train " EXAMPLE " --devices=2 %s --model_dir=%s", small, dir);
    cr_assert_eq(r.status, 0, "%s", r.err);
    json_t *t = tc_json(&r);
    tc_done(&r);
    r = tc_runf("evaluate " EXAMPLE " --devices=2 %s --model_dir=%s", small, dir);
    cr_assert_eq(r.status, 0, "%s", r.err);
    json_t *e = tc_json(&r);
    tc_done(&r);
    json_t *te = json_object_get(t, "eval");
    cr_assert(json_equal(json_object_get(te, "auc"), json_object_get(e, "auc")), "auc differs after the restore");
    cr_assert(json_equal(json_object_get(te, "loss"), json_object_get(e, "loss")), "loss differs after the restore");
    cr_assert_str_eq(json_string_value(json_object_get(t, "params_digest")),
                     json_string_value(json_object_get(e, "params_digest")));
    json_decref(t);
    json_decref(e);
    tc_rmtree(dir);
    free(dir);
}

Test(cli_dlrm, configurations_it_cannot_run)
{
    tc_result r = tc_run(NULL, "train --model_name=dlrm --dataset=criteo_synthetic --train_batch_size=64 "
                               "--train_steps=1 --synthetic_examples=256");
    cr_assert_eq(r.status, 2, "%s", r.err);
    cr_assert(strstr(r.err, "model_name dlrm needs embedding tables") != NULL, "%s", r.err);
    tc_done(&r);
    r = tc_run(NULL, "config --synthetic_examples=10");
    cr_assert_eq(r.status, 2, "%s", r.err);
    cr_assert(strstr(r.err, "synthetic_examples is only read by datasets synthetic, criteo_synthetic and "
                            "synthetic_sequences; dataset is fashion_mnist") != NULL,
              "%s", r.err);
    tc_done(&r);
    r = tc_run(NULL, "config --model_name=dlrm --bottom_mlp='[]'");
    cr_assert_eq(r.status, 2, "%s", r.err);
    cr_assert(strstr(r.err, "bottom_mlp must be a JSON list of 1..16 ints") != NULL, "%s", r.err);
    tc_done(&r);
    /* The tables must cover the data's ids: the engine names the first that does not fit. */
    r = tc_run(NULL, "train " EXAMPLE " --synthetic_vocab_cap=2000 --synthetic_examples=4096 --train_steps=2 "
                     "--synthetic_eval_examples=1024 --eval_steps=1");
    cr_assert_eq(r.status, 2, "%s", r.err);
    cr_assert(strstr(r.err, "is out of range: the vocabulary size is 1000") != NULL, "%s", r.err);
    tc_done(&r);
}

/* The example's 26 tables as Criteo TSV, written by the synthetic
 * generator into dir/day_0.tsv; vocab gets them as a JSON list. */
static const int64_t tables[26] = {1000, 583, 1000, 1000, 305, 24, 1000, 633, 3,  1000, 1000, 1000, 1000,
                                   27,   1000, 1000, 10,   1000, 1000, 4,   1000, 18, 15,   1000, 105,  1000};

static void write_tsv(const char *dir, char *path, size_t n, char *vocab, size_t vn)
{
    tl_criteo_synth_config c;
    tl_criteo_synth_config_default(&c);
    c.num_examples = 4096;
    memcpy(c.vocab_sizes, tables, sizeof tables);
    tl_criteo_synth *g;
    cr_assert_eq(tl_criteo_synth_create(&c, &g), TL_OK, "%s", tl_last_error());
    snprintf(path, n, "%s/day_0.tsv", dir);
    cr_assert_eq(tl_criteo_synth_write_tsv(g, path, 0, 4096), TL_OK, "%s", tl_last_error());
    tl_criteo_synth_destroy(g);
    int k = snprintf(vocab, vn, "[");
    for (int i = 0; i < 26; i++)
        k += snprintf(vocab + k, vn - (size_t)k, "%s%lld", i ? "," : "", (long long)tables[i]);
    snprintf(vocab + k, vn - (size_t)k, "]");
}

#define NO_SYNTH "--synthetic_examples=null --synthetic_eval_examples=null --synthetic_vocab_cap=null"

/* The same model from Criteo TSV files (dataset criteo): "dense" is the
 * features, and each column's ids ("C1" .. "C26", int64) reach the
 * embedding feature of that name — the example's feature names. */
Test(cli_dlrm, trains_from_criteo_tsv)
{
    char *dir = tc_tmpdir();
    char path[300], vocab[400];
    write_tsv(dir, path, sizeof path, vocab, sizeof vocab);
    tc_result r = tc_runf("train " EXAMPLE " --dataset=criteo --files=%s --vocab_sizes='%s' " NO_SYNTH
                          " --train_steps=4 --eval_steps=2 --devices=2", path, vocab);
    cr_assert_eq(r.status, 0, "%s", r.err);
    json_t *j = tc_json(&r);
    cr_assert_eq(json_integer_value(json_object_get(j, "global_step")), 4);
    cr_assert(tc_eval_num(j, "auc") > 0 && tc_eval_num(j, "auc") <= 1);
    cr_assert_null(json_object_get(json_object_get(j, "eval"), "oracle_auc"), "files have no planted model");
    json_decref(j);
    tc_done(&r);
    tc_rmtree(dir);
    free(dir);
}

/* `tpuloop data convert --from=criteo` writes the same tensors as
 * tf.Example features ("label", "dense", "C1" .. "C26"): a TFRecord dataset
 * parsing them trains the DLRM to the same bits as the TSV it came from,
 * with the default features (the ids are no features). */
Test(cli_dlrm, trains_from_converted_tfrecord_with_the_tsvs_bits)
{
    char *dir = tc_tmpdir();
    char path[300], vocab[400], rec[320], features[4096];
    write_tsv(dir, path, sizeof path, vocab, sizeof vocab);
    snprintf(rec, sizeof rec, "%s/day_0.tfrecord", dir);
    /* The generator's ids are below the tables' sizes: no --vocab_sizes. */
    tc_result r = tc_runf("data convert --from=criteo %s --out=%s", path, rec);
    cr_assert_eq(r.status, 0, "%s", r.err);
    tc_done(&r);
    int n = snprintf(features, sizeof features,
                     "{\"label\": {\"type\": \"FixedLenFeature\", \"dtype\": \"int64\", \"shape\": []}, "
                     "\"dense\": {\"type\": \"FixedLenFeature\", \"dtype\": \"float32\", \"shape\": [13]}");
    for (int k = 1; k <= 26; k++) /* as (batch) or (batch, 1): both are one id per example */
        n += snprintf(features + n, sizeof features - (size_t)n,
                      ", \"C%d\": {\"type\": \"FixedLenFeature\", \"dtype\": \"int64\", \"shape\": [%s]}", k,
                      k % 2 ? "" : "1");
    snprintf(features + n, sizeof features - (size_t)n, "}");
    const char *steps = "--train_steps=8 --eval_steps=2 --devices=2";
    r = tc_runf("train " EXAMPLE " --dataset=criteo --files=%s --vocab_sizes='%s' " NO_SYNTH " %s", path, vocab,
                steps);
    cr_assert_eq(r.status, 0, "%s", r.err);
    json_t *tsv = tc_json(&r);
    tc_done(&r);
    r = tc_runf("train " EXAMPLE " --dataset=tfrecord --files=%s --features='%s' " NO_SYNTH " %s", rec, features,
                steps);
    cr_assert_eq(r.status, 0, "%s", r.err);
    json_t *tfr = tc_json(&r);
    tc_done(&r);
    cr_assert_str_eq(json_string_value(json_object_get(tfr, "params_digest")),
                     json_string_value(json_object_get(tsv, "params_digest")));
    cr_assert(json_equal(json_object_get(json_object_get(tfr, "eval"), "auc"),
                         json_object_get(json_object_get(tsv, "eval"), "auc")));
    json_decref(tsv);
    json_decref(tfr);
    /* Without a column, the feature that reads it is named. */
    char *cut = strstr(features, ", \"C26\"");
    cr_assert_not_null(cut);
    snprintf(cut, sizeof features - (size_t)(cut - features), "}");
    r = tc_runf("train " EXAMPLE " --dataset=tfrecord --files=%s --features='%s' " NO_SYNTH " %s", rec, features,
                steps);
    cr_assert_eq(r.status, 2, "%s", r.err);
    cr_assert(strstr(r.err, "no id tensor \"C26\" for embedding feature 25 (\"C26\")") != NULL, "%s", r.err);
    tc_done(&r);
    tc_rmtree(dir);
    free(dir);
}
