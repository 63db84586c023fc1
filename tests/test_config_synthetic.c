/*
 * test_config_synthetic.c — the options of the synthetic datasets: their
 * defaults live in the option table (or, where they depend on the dataset,
 * are resolved from it), so the resolved configuration always holds the
 * sizes `synthetic` and `criteo_synthetic` are made with; explicit
 * vocabularies (synthetic_vocab_sizes), up to 2^31 - 1 rows each.
 */
#include <jansson.h>
#include <string.h>

#include "testutil.h"

TestSuite(synthetic_cfg, .init = tu_quiet);

/* 26 copies of v as a JSON list. */
static void list26(char *buf, size_t n, const char *v)
{
    size_t used = (size_t)snprintf(buf, n, "[");
    for (int i = 0; i < 26; i++)
        used += (size_t)snprintf(buf + used, n - used, "%s%s", i ? ", " : "", v);
    snprintf(buf + used, n - used, "]");
}

Test(synthetic_cfg, defaults_by_dataset)
{
    tl_config *cfg = tu_from_json("{'input': {'dataset': 'synthetic'}}");
    const tl_input_config *in = &tu_resolve_ok(cfg)->input;
    cr_assert(in->synthetic_examples.set && in->synthetic_examples.value == 60000, "synthetic: 60000 to train");
    cr_assert(in->synthetic_eval_examples.set && in->synthetic_eval_examples.value == 10000, "10000 to test");
    cr_assert(in->synthetic_num_features.set && in->synthetic_num_features.value == 784, "784 features");
    cr_assert_not(in->synthetic_vocab_cap.set, "no cap: synthetic has no ids");
    cr_assert_null(in->synthetic_vocab_sizes);
    tl_config_destroy(cfg);

    cfg = tu_from_json("{'input': {'dataset': 'criteo_synthetic'}}");
    in = &tu_resolve_ok(cfg)->input;
    cr_assert(in->synthetic_examples.set && in->synthetic_examples.value == 1048576);
    cr_assert(in->synthetic_eval_examples.set && in->synthetic_eval_examples.value == 131072);
    cr_assert(in->synthetic_vocab_cap.set && in->synthetic_vocab_cap.value == 100000);
    cr_assert_not(in->synthetic_num_features.set, "criteo_synthetic's features are Criteo's");
    cr_assert_null(in->synthetic_vocab_sizes);
    tl_config_destroy(cfg);

    /* The datasets that read none of them hold none. */
    cfg = tu_new_config();
    in = &tu_resolve_ok(cfg)->input;
    cr_assert_not(in->synthetic_examples.set || in->synthetic_eval_examples.set || in->synthetic_vocab_cap.set ||
                  in->synthetic_num_features.set);
    tl_config_destroy(cfg);
}

Test(synthetic_cfg, null_is_the_default_and_values_are_kept)
{
    tl_config *cfg = tu_from_json("{'input': {'dataset': 'criteo_synthetic', 'synthetic_examples': null, "
                                  "'synthetic_vocab_cap': null, 'synthetic_eval_examples': 512}}");
    const tl_input_config *in = &tu_resolve_ok(cfg)->input;
    cr_assert_eq(in->synthetic_examples.value, 1048576);
    cr_assert_eq(in->synthetic_vocab_cap.value, 100000);
    cr_assert_eq(in->synthetic_eval_examples.value, 512);
    tl_config_destroy(cfg);
    cfg = tu_from_json("{'input': {'dataset': 'synthetic', 'synthetic_examples': 100, 'synthetic_num_features': 3}}");
    in = &tu_resolve_ok(cfg)->input;
    cr_assert_eq(in->synthetic_examples.value, 100);
    cr_assert_eq(in->synthetic_eval_examples.value, 10000);
    cr_assert_eq(in->synthetic_num_features.value, 3);
    tl_config_destroy(cfg);
}

Test(synthetic_cfg, given_for_a_dataset_that_does_not_read_it)
{
    tu_json_fails("{'input': {'synthetic_examples': 10}}", TL_EINVAL,
                  "synthetic_examples is only read by datasets synthetic, criteo_synthetic and synthetic_sequences; "
                  "dataset is fashion_mnist (set it to null) [from file test.json]");
    tu_json_fails("{'input': {'dataset': 'synthetic', 'synthetic_vocab_cap': 100}}", TL_EINVAL,
                  "synthetic_vocab_cap is only read by dataset criteo_synthetic; dataset is synthetic");
    tu_json_fails("{'input': {'dataset': 'criteo_synthetic', 'synthetic_num_features': 5}}", TL_EINVAL,
                  "synthetic_num_features is only read by dataset synthetic; dataset is criteo_synthetic");
    char text[512], list[200];
    list26(list, sizeof list, "7");
    snprintf(text, sizeof text, "{'input': {'dataset': 'synthetic', 'synthetic_vocab_sizes': %s}}", list);
    tu_json_fails(text, TL_EINVAL, "synthetic_vocab_sizes is only read by dataset criteo_synthetic");
    /* null is fine anywhere. */
    tl_config *cfg = tu_from_json("{'input': {'synthetic_examples': null, 'synthetic_vocab_cap': null}}");
    tu_resolve_ok(cfg);
    tl_config_destroy(cfg);
}

Test(synthetic_cfg, bounds)
{
    tu_json_fails("{'input': {'dataset': 'criteo_synthetic', 'synthetic_examples': 0}}", TL_EINVAL,
                  "synthetic_examples must be null (the dataset's default");
    tu_json_fails("{'input': {'dataset': 'criteo_synthetic', 'synthetic_vocab_cap': 2147483648}}", TL_EINVAL,
                  "synthetic_vocab_cap must be null (100000) or an int in [1, 2147483647]; not used when "
                  "synthetic_vocab_sizes is given; got 2147483648");
    tu_json_fails("{'input': {'dataset': 'criteo_synthetic', 'synthetic_vocab_cap': 1.5}}", TL_ETYPE,
                  "synthetic_vocab_cap must be");
    tu_json_fails("{'input': {'dataset': 'synthetic', 'synthetic_num_features': 0}}", TL_EINVAL,
                  "synthetic_num_features must be null (784) or an int in [1, 1048576]; got 0");
}

Test(synthetic_cfg, a_vocabulary_of_2_to_the_26_rows)
{
    /* The cap no longer stops at 100000, and explicit vocabularies go to 2^31 - 1. */
    tl_config *cfg = tu_from_json("{'input': {'dataset': 'criteo_synthetic', 'synthetic_vocab_cap': 67108864}}");
    cr_assert_eq(tu_resolve_ok(cfg)->input.synthetic_vocab_cap.value, 67108864);
    tl_config_destroy(cfg);

    char text[1024], list[600];
    list26(list, sizeof list, "67108864");
    snprintf(text, sizeof text, "{'input': {'dataset': 'criteo_synthetic', 'synthetic_vocab_sizes': %s}}", list);
    cfg = tu_from_json(text);
    const tl_input_config *in = &tu_resolve_ok(cfg)->input;
    cr_assert_not_null(in->synthetic_vocab_sizes);
    for (int c = 0; c < 26; c++)
        cr_assert_eq(in->synthetic_vocab_sizes[c], 67108864, "C%d", c + 1);
    cr_assert_not(in->synthetic_vocab_cap.set, "explicit vocabularies: the cap does not apply");
    tl_config_destroy(cfg);

    list26(list, sizeof list, "2147483647");
    snprintf(text, sizeof text, "{'input': {'dataset': 'criteo_synthetic', 'synthetic_vocab_sizes': %s}}", list);
    cfg = tu_from_json(text);
    cr_assert_eq(tu_resolve_ok(cfg)->input.synthetic_vocab_sizes[25], 2147483647);
    tl_config_destroy(cfg);
}

Test(synthetic_cfg, vocab_sizes_errors)
{
    tu_json_fails("{'input': {'dataset': 'criteo_synthetic', 'synthetic_vocab_sizes': [1, 2]}}", TL_EINVAL,
                  "synthetic_vocab_sizes must be null or a JSON list of 26 ints in [1, 2147483647] (2^26 = 67108864 "
                  "rows is fine); got a list of 2");
    tu_json_fails("{'input': {'dataset': 'criteo_synthetic', 'synthetic_vocab_sizes': 'big'}}", TL_ETYPE,
                  "synthetic_vocab_sizes must be null or a JSON list");
    char text[1024], list[600];
    list26(list, sizeof list, "5");
    list[strlen(list) - 2] = '0'; /* C26 = 0 */
    snprintf(text, sizeof text, "{'input': {'dataset': 'criteo_synthetic', 'synthetic_vocab_sizes': %s}}", list);
    tu_json_fails(text, TL_EINVAL, "synthetic_vocab_sizes[25] (C26) must be an int in [1, 2147483647]; got 0");
    list26(list, sizeof list, "2147483648");
    snprintf(text, sizeof text, "{'input': {'dataset': 'criteo_synthetic', 'synthetic_vocab_sizes': %s}}", list);
    tu_json_fails(text, TL_EINVAL, "synthetic_vocab_sizes[0] (C1) must be an int in [1, 2147483647]; got 2147483648");
}

Test(synthetic_cfg, defaults_in_help_and_json)
{
    char *help = NULL;
    cr_assert_eq(tl_config_help(&help), TL_OK);
    cr_assert_not_null(strstr(help, "60000 for synthetic, 1048576 for criteo_synthetic"), "the dataset's defaults");
    cr_assert_not_null(strstr(help, "10000 for synthetic, 131072 for criteo_synthetic"));
    cr_assert_not_null(strstr(help, "--synthetic_vocab_sizes"));
    cr_assert_not_null(strstr(help, "default: 784"));
    cr_assert_not_null(strstr(help, "default: 100000"));
    tl_free_string(help);

    tl_config *cfg = tu_from_json("{'input': {'dataset': 'criteo_synthetic'}}");
    tu_resolve_ok(cfg);
    char *text = NULL;
    cr_assert_eq(tl_config_to_json(cfg, &text), TL_OK);
    json_t *root = json_loads(text, 0, NULL), *in = json_object_get(root, "input");
    cr_assert_eq(json_integer_value(json_object_get(in, "synthetic_examples")), 1048576, "the resolved default");
    cr_assert_eq(json_integer_value(json_object_get(in, "synthetic_vocab_cap")), 100000);
    cr_assert(json_is_null(json_object_get(in, "synthetic_vocab_sizes")));
    cr_assert(json_is_null(json_object_get(in, "synthetic_num_features")), "not read by criteo_synthetic");
    json_decref(root);
    tl_free_string(text);
    tl_config_destroy(cfg);
}
