/* learning_rate_decay cosine: tf.compat.v1.train.cosine_decay over
 * decay_steps, reaching 0 there, so training past decay_steps leaves the
 * parameters as they were; and its configuration errors. */
#include <criterion/criterion.h>
#include <string.h>

#include "test_cli_util.h"
#include "testutil.h"

static char *digest_after(const char *decay, int steps)
{
    tc_result r = tc_runf("train configs/mlp_fashion_mnist.json --dataset=synthetic --synthetic_examples=4096 "
                          "--synthetic_eval_examples=256 --eval_steps=null --hidden_units=[16] --epochs=null "
                          "--train_steps=%d --iterations_per_loop=1 %s",
                          steps, decay);
    cr_assert_eq(r.status, 0, "%s", r.err);
    json_t *j = tc_json(&r);
    char *d = strdup(json_string_value(json_object_get(j, "params_digest")));
    json_decref(j);
    tc_done(&r);
    return d;
}

Test(cli_lr_decay, cosine_reaches_zero_at_decay_steps)
{
    char *two = digest_after("--learning_rate_decay=cosine --decay_steps=2", 2);
    char *four = digest_after("--learning_rate_decay=cosine --decay_steps=2", 4);
    cr_assert_str_eq(two, four, "steps 3 and 4 run at learning rate 0");
    char *plain2 = digest_after("", 2), *plain4 = digest_after("", 4);
    cr_assert_str_neq(plain2, plain4, "without the decay the steps move the parameters");
    cr_assert_str_neq(two, plain2, "the decayed rate differs from the constant one at step 2");
    free(two), free(four), free(plain2), free(plain4);
}

Test(cli_lr_decay, configuration_errors)
{
    tu_json_fails("{'model': {'learning_rate_decay': 'cosine'}}", TL_EINVAL,
                  "decay_steps must be an int >= 1 with learning_rate_decay cosine; got null");
    tu_json_fails("{'model': {'decay_steps': 100}}", TL_EINVAL,
                  "decay_steps is only read with learning_rate_decay cosine; learning_rate_decay is none");
    tu_json_fails("{'model': {'learning_rate_decay': 'cosine', 'decay_steps': 0}}", TL_EINVAL,
                  "decay_steps should be > 0 (got 0)");
    tu_json_fails("{'model': {'learning_rate_decay': 'linear'}}", TL_EINVAL, "learning_rate_decay");
}
