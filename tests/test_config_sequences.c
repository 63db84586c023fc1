/*
 * test_config_sequences.c — dataset synthetic_sequences' options and model
 * transformer in the configuration: the defaults the option table holds
 * (and the sizes it shares with the other synthetic sets), values kept,
 * bounds and types named in the errors, options given for a dataset that
 * does not read them, `tpuloop config` and its JSON, and the job's errors
 * for a transformer whose params do not fit the data.
 */
#include <jansson.h>
#include <string.h>

#include "test_cli_util.h"
#include "testutil.h"
#include "tpuloop/job.h"

TestSuite(sequences_cfg, .init = tu_quiet);

Test(sequences_cfg, defaults)
{
    tl_config *cfg = tu_from_json("{'input': {'dataset': 'synthetic_sequences'}}");
    const tl_input_config *in = &tu_resolve_ok(cfg)->input;
    cr_assert_str_eq(in->dataset, "synthetic_sequences");
    cr_assert(in->synthetic_examples.set && in->synthetic_examples.value == 60000, "60000 to train");
    cr_assert(in->synthetic_eval_examples.set && in->synthetic_eval_examples.value == 10000, "10000 to test");
    cr_assert(in->synthetic_sequence_length.set && in->synthetic_sequence_length.value == 16);
    cr_assert(in->synthetic_vocab.set && in->synthetic_vocab.value == 16);
    cr_assert_not(in->synthetic_num_features.set || in->synthetic_vocab_cap.set, "not read by synthetic_sequences");
    tl_config_destroy(cfg);

    /* The other datasets hold neither. */
    static const char *const others[] = {"{'input': {'dataset': 'synthetic'}}",
                                         "{'input': {'dataset': 'criteo_synthetic'}}", "{}"};
    for (size_t i = 0; i < sizeof others / sizeof others[0]; i++) {
        cfg = tu_from_json(others[i]);
        in = &tu_resolve_ok(cfg)->input;
        cr_assert_not(in->synthetic_sequence_length.set || in->synthetic_vocab.set, "%s", others[i]);
        tl_config_destroy(cfg);
    }
}

Test(sequences_cfg, values_are_kept_and_null_is_the_default)
{
    tl_config *cfg = tu_from_json("{'model': {'model_name': 'transformer'}, 'input': {'dataset': "
                                  "'synthetic_sequences', 'synthetic_examples': 100, 'synthetic_eval_examples': null, "
                                  "'synthetic_sequence_length': 4096, 'synthetic_vocab': 16777216}}");
    const tl_run_config *r = tu_resolve_ok(cfg);
    cr_assert_str_eq(r->model.model_name, "transformer");
    cr_assert_eq(r->input.synthetic_examples.value, 100);
    cr_assert_eq(r->input.synthetic_eval_examples.value, 10000);
    cr_assert_eq(r->input.synthetic_sequence_length.value, 4096);
    cr_assert_eq(r->input.synthetic_vocab.value, 16777216);
    tl_config_destroy(cfg);
    cfg = tu_from_json("{'input': {'dataset': 'synthetic_sequences', 'synthetic_sequence_length': 1, "
                       "'synthetic_vocab': 2}}");
    cr_assert_eq(tu_resolve_ok(cfg)->input.synthetic_sequence_length.value, 1);
    cr_assert_eq(tu_resolve_ok(cfg)->input.synthetic_vocab.value, 2);
    tl_config_destroy(cfg);
    /* Flags, as `tpuloop train --synthetic_vocab=32` gives them. */
    cfg = tu_new_config();
    tu_set_flag(cfg, "dataset", "synthetic_sequences");
    tu_set_flag(cfg, "synthetic_vocab", "32");
    tu_set_flag(cfg, "synthetic_sequence_length", "8");
    cr_assert_eq(tu_resolve_ok(cfg)->input.synthetic_vocab.value, 32);
    cr_assert_eq(tu_resolve_ok(cfg)->input.synthetic_sequence_length.value, 8);
    tl_config_destroy(cfg);
}

Test(sequences_cfg, bounds_and_types)
{
    tu_json_fails("{'input': {'dataset': 'synthetic_sequences', 'synthetic_sequence_length': 0}}", TL_EINVAL,
                  "synthetic_sequence_length must be null (16) or an int in [1, 4096]; got 0");
    tu_json_fails("{'input': {'dataset': 'synthetic_sequences', 'synthetic_sequence_length': 4097}}", TL_EINVAL,
                  "synthetic_sequence_length must be null (16) or an int in [1, 4096]; got 4097");
    tu_json_fails("{'input': {'dataset': 'synthetic_sequences', 'synthetic_sequence_length': '16'}}", TL_ETYPE,
                  "synthetic_sequence_length must be null (16) or an int in [1, 4096]; got 16");
    tu_json_fails("{'input': {'dataset': 'synthetic_sequences', 'synthetic_vocab': 1}}", TL_EINVAL,
                  "synthetic_vocab must be null (16) or an int in [2, 16777216]; got 1");
    tu_json_fails("{'input': {'dataset': 'synthetic_sequences', 'synthetic_vocab': 16777217}}", TL_EINVAL,
                  "synthetic_vocab must be null (16) or an int in [2, 16777216]; got 16777217");
    tu_json_fails("{'input': {'dataset': 'synthetic_sequences', 'synthetic_vocab': 2.5}}", TL_ETYPE,
                  "synthetic_vocab must be null (16) or an int in [2, 16777216]; got 2.5");
    tu_json_fails("{'input': {'dataset': 'synthetic_sequences', 'synthetic_examples': 0}}", TL_EINVAL,
                  "synthetic_examples must be null (the dataset's default: 60000 for synthetic, 1048576 for "
                  "criteo_synthetic, 60000 for synthetic_sequences) or an int in [1, 268435456]; got 0");
    tu_json_fails("{'input': {'dataset': 'sequences'}}", TL_EINVAL, "synthetic_sequences (token sequences");
    tu_json_fails("{'model': {'model_name': 'bert'}}", TL_EINVAL,
                  "model_name must be mlp, cnn (images; params filters, num_classes, batch_norm_momentum, "
                  "label_smoothing), transformer (token ids; params d_model, num_heads, num_layers, d_ff, vocab_size, num_classes), "
                  "dlrm or dcn");
}

Test(sequences_cfg, given_for_a_dataset_that_does_not_read_it)
{
    tu_json_fails("{'input': {'dataset': 'synthetic', 'synthetic_sequence_length': 8}}", TL_EINVAL,
                  "synthetic_sequence_length is only read by dataset synthetic_sequences; dataset is synthetic (set "
                  "it to null)");
    tu_json_fails("{'input': {'synthetic_vocab': 8}}", TL_EINVAL,
                  "synthetic_vocab is only read by dataset synthetic_sequences; dataset is fashion_mnist");
    tu_json_fails("{'input': {'dataset': 'synthetic_sequences', 'synthetic_num_features': 8}}", TL_EINVAL,
                  "synthetic_num_features is only read by dataset synthetic; dataset is synthetic_sequences");
    tu_json_fails("{'input': {'dataset': 'synthetic_sequences', 'synthetic_vocab_cap': 8}}", TL_EINVAL,
                  "synthetic_vocab_cap is only read by dataset criteo_synthetic; dataset is synthetic_sequences");
    tu_json_fails("{'input': {'dataset': 'criteo_synthetic', 'synthetic_vocab': 8}}", TL_EINVAL,
                  "synthetic_vocab is only read by dataset synthetic_sequences; dataset is criteo_synthetic");
    /* null is fine anywhere. */
    tl_config *cfg = tu_from_json("{'input': {'synthetic_sequence_length': null, 'synthetic_vocab': null}}");
    tu_resolve_ok(cfg);
    tl_config_destroy(cfg);
}

Test(sequences_cfg, help_and_json)
{
    char *help = NULL;
    cr_assert_eq(tl_config_help(&help), TL_OK);
    cr_assert_not_null(strstr(help, "--synthetic_sequence_length"));
    cr_assert_not_null(strstr(help, "--synthetic_vocab\n"));
    cr_assert_not_null(strstr(help, "synthetic_sequences: the tokens of each sequence"));
    cr_assert_not_null(strstr(help, "60000 for synthetic_sequences"));
    tl_free_string(help);

    tl_config *cfg = tu_from_json("{'input': {'dataset': 'synthetic_sequences', 'synthetic_vocab': 40}}");
    tu_resolve_ok(cfg);
    char *text = NULL;
    cr_assert_eq(tl_config_to_json(cfg, &text), TL_OK);
    json_t *root = json_loads(text, 0, NULL), *in = json_object_get(root, "input");
    cr_assert_eq(json_integer_value(json_object_get(in, "synthetic_sequence_length")), 16, "the table's default");
    cr_assert_eq(json_integer_value(json_object_get(in, "synthetic_vocab")), 40);
    cr_assert_eq(json_integer_value(json_object_get(in, "synthetic_examples")), 60000);
    cr_assert(json_is_null(json_object_get(in, "synthetic_num_features")), "not read by synthetic_sequences");
    json_decref(root);
    tl_free_string(text);
    tl_config_destroy(cfg);

    cfg = tu_from_json("{'input': {'dataset': 'synthetic'}}");
    tu_resolve_ok(cfg);
    cr_assert_eq(tl_config_to_json(cfg, &text), TL_OK);
    root = json_loads(text, 0, NULL);
    in = json_object_get(root, "input");
    cr_assert(json_is_null(json_object_get(in, "synthetic_sequence_length")));
    cr_assert(json_is_null(json_object_get(in, "synthetic_vocab")));
    json_decref(root);
    tl_free_string(text);
    tl_config_destroy(cfg);
}

/* `tpuloop config` prints the resolved options; a mistake exits 2 naming
 * the option, the value and what is allowed. */
Test(sequences_cfg, the_config_command)
{
    tc_result r = tc_run(NULL, "config --json --model_name=transformer --dataset=synthetic_sequences "
                               "--synthetic_vocab=24 --synthetic_sequence_length=12");
    cr_assert_eq(r.status, 0, "%s", r.err);
    json_t *j = tc_json(&r), *rc = json_object_get(j, "run_config");
    json_t *in = json_object_get(rc, "input");
    cr_assert_str_eq(json_string_value(json_object_get(json_object_get(rc, "model"), "model_name")), "transformer");
    cr_assert_str_eq(json_string_value(json_object_get(in, "dataset")), "synthetic_sequences");
    cr_assert_eq(json_integer_value(json_object_get(in, "synthetic_vocab")), 24);
    cr_assert_eq(json_integer_value(json_object_get(in, "synthetic_sequence_length")), 12);
    json_decref(j);
    tc_done(&r);
    r = tc_run(NULL, "config --dataset=synthetic_sequences --synthetic_vocab=1");
    cr_assert_eq(r.status, 2, "%s", r.err);
    cr_assert(strstr(r.err, "synthetic_vocab must be null (16) or an int in [2, 16777216]; got 1"), "%s", r.err);
    tc_done(&r);
}

/* Makes the job and trains it: the model is traced on the first train. */
static tl_status job_train(const char *squoted)
{
    tl_config *cfg = tu_from_json(squoted);
    tu_resolve_ok(cfg);
    tl_job_options o;
    tl_job_options_init(&o);
    o.train = true;
    tl_job *job = NULL;
    tl_status st = tl_job_create(cfg, &o, &job);
    cr_assert_eq(st, TL_OK, "%s", tl_last_error());
    tl_job_train_result tr;
    st = tl_job_train(job, &tr);
    tl_job_destroy(job);
    tl_config_destroy(cfg);
    return st;
}

/* The job gives the model the data's vocabulary: params may not shrink it;
 * a params mistake is named when the model is traced. */
#define JOB_JSON(params)                                                                                   \
    "{'train_batch_size': 8, 'train_steps': 1, 'eval_steps': 1, 'eval_batch_size': 8, "                    \
    "'model': {'model_name': 'transformer'}, 'input': {'dataset': 'synthetic_sequences', "                 \
    "'synthetic_examples': 64, 'synthetic_eval_examples': 16, 'synthetic_vocab': 20}, 'params': " params "}"

Test(sequences_cfg, the_job_checks_the_params_against_the_data)
{
    tu_expect_error(job_train(JOB_JSON("{'vocab_size': 12}")), TL_EINVAL,
                    "transformer: params vocab_size 12 is below the data's 20 (its token ids reach 19)", "vocab_size");
    tu_expect_error(job_train(JOB_JSON("{'d_model': 30, 'num_heads': 4}")), TL_EINVAL,
                    "transformer: params d_model 30 is not divisible by num_heads 4", "d_model");
    ASSERT_OK(job_train(JOB_JSON("{'d_model': 8, 'num_heads': 2, 'num_layers': 1, 'vocab_size': 24}")));
}
