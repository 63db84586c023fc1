/*
 * test_config_suggest.c — "did you mean": tl_config_suggest for misspelt
 * flags and file keys, and the suggestion in the configuration's own
 * unknown-option and unknown-key errors.
 */
#include <string.h>

#include "testutil.h"

TestSuite(suggest, .init = tu_quiet);

/* tl_config_suggest(name) is want (NULL: no suggestion). */
static void suggests(const char *name, const char *want)
{
    const char *got = (const char *)"sentinel";
    cr_assert_eq(tl_config_suggest(name, &got), TL_OK, "%s: %s", name, tl_last_error());
    if (want == NULL)
        cr_assert_null(got, "%s: suggested %s, want none", name, got);
    else
        cr_assert(got != NULL && strcmp(got, want) == 0, "%s: suggested %s, want %s", name, got ? got : "(none)",
                  want);
}

Test(suggest, typos_of_flags)
{
    suggests("train_batch_sise", "train_batch_size");       /* substitution */
    suggests("--train_batch_sise", "train_batch_size");     /* as a flag */
    suggests("--train_batch_sise=256", "train_batch_size"); /* with its value */
    suggests("iterations_per_lop", "iterations_per_loop");  /* deletion */
    suggests("num_shardss", "num_shards");                  /* insertion */
    suggests("eval_batch_szie", "eval_batch_size");         /* swap of neighbours */
    suggests("Train_Batch_Size", "train_batch_size");       /* case */
    suggests("devics", "devices");
    suggests("tpu_config.iterations_per_lop", "iterations_per_loop"); /* a file key */
    suggests("input.shufle_buffer_size", "shuffle_buffer_size");
}

Test(suggest, only_when_close_enough)
{
    suggests("no_such_option", NULL);
    suggests("xyz", NULL);
    suggests("", NULL);
    suggests("--", NULL);
    /* max(2, n/4) edits: 4 edits in a 16-letter name are close enough, 5 are not. */
    suggests("train_batch_xxxx", "train_batch_size");
    suggests("train_xxxxx_size", NULL);
    char longname[400];
    memset(longname, 'a', sizeof longname - 1);
    longname[sizeof longname - 1] = '\0';
    suggests(longname, NULL);
}

Test(suggest, bad_arguments)
{
    const char *out;
    cr_assert_eq(tl_config_suggest(NULL, &out), TL_EINVAL);
    cr_assert_eq(tl_config_suggest("x", NULL), TL_EINVAL);
}

Test(suggest, in_the_errors_of_files_and_flags)
{
    tl_config *cfg = tu_new_config();
    tu_expect_error(tu_load_squoted(cfg, "{'train_batch_sise': 256}"), TL_EUNKNOWN,
                    "unknown option 'train_batch_sise' in test.json; did you mean train_batch_size?", "top level");
    tu_expect_error(tu_load_squoted(cfg, "{'tpu_config': {'iterations_per_lop': 5}}"), TL_EUNKNOWN,
                    "unknown option 'tpu_config.iterations_per_lop' in test.json; did you mean "
                    "tpu_config.iterations_per_loop?",
                    "in tpu_config");
    tu_expect_error(tu_load_squoted(cfg, "{'input': {'shufle_buffer_size': 5}}"), TL_EUNKNOWN,
                    "did you mean input.shuffle_buffer_size?", "in input");
    tu_expect_error(tl_config_set(cfg, "num_shardss", "2", TL_SOURCE_FLAG), TL_EUNKNOWN,
                    "unknown option 'num_shardss'; did you mean num_shards?", "set");
    char *argv[] = {"--devics=2"};
    tu_expect_error(tl_config_apply_args(cfg, 1, argv, NULL, NULL), TL_EUNKNOWN, "did you mean devices?", "args");
    tu_expect_error(tu_load_squoted(cfg, "{'bogus_key': 1}"), TL_EUNKNOWN, "unknown option 'bogus_key' in test.json; "
                    "`tpuloop help config`", "no suggestion");
    tl_config_destroy(cfg);
}
