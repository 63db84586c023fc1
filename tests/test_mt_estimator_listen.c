/* A CheckpointSaverListener (tl_estimator_options.after_save) that
 * evaluates between training loops, as TensorFlow's train_and_evaluate does
 * locally: training goes on with the same bits and input positions, and each
 * evaluation equals a separate evaluation of the checkpoint it follows. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_mt_ckpt_util.h"
#include "tpuloop/dataset.h"
#include "tpuloop/tpuloop.h"

#define ARGS(...) (int)(sizeof((const char *[]){__VA_ARGS__}) / sizeof(const char *)), (const char *[]){__VA_ARGS__}

typedef struct listen {
    const tl_labeled_data *eval_data; /* in memory, or */
    const tl_input *eval_in;          /* an input_fn */
    int calls;
    int64_t steps[16];
    char paths[16][512];
    tl_eval_result results[16];
} listen;

static tl_status after_save(tl_estimator *est, int64_t step, const char *path, void *user)
{
    listen *l = user;
    cr_assert(l->calls < 16);
    l->steps[l->calls] = step;
    snprintf(l->paths[l->calls], sizeof l->paths[0], "%s", path);
    tl_status st = l->eval_in != NULL ? tl_estimator_evaluate_input(est, l->eval_in, &l->results[l->calls])
                                      : tl_estimator_evaluate(est, l->eval_data, &l->results[l->calls]);
    l->calls++;
    return st;
}

static mtck_model model = {16, 4};

static tl_estimator *make(int argc, const char *const *argv, listen *l, int64_t every, tl_config **cfg)
{
    tl_estimator_options o;
    tl_estimator_options_init(&o);
    o.model_fn = mtck_model_fn;
    o.user = &model;
    o.optimizer.lr.learning_rate = 0.01;
    o.after_save = l != NULL ? after_save : NULL;
    o.after_save_user = l;
    o.save_every_n_steps = every;
    return mtck_estimator(argc, argv, &o, cfg);
}

static tl_status shard_fn(const tl_input_context *ctx, void *user, tl_dataset **out)
{
    tl_dataset *ds;
    tl_status st = tl_dataset_labeled(user, &ds);
    if (st == TL_OK)
        st = tl_dataset_shard(ds, ctx->total, ctx->index, &ds);
    if (st == TL_OK && ctx->mode == TL_MODE_TRAIN)
        st = tl_dataset_shuffle(ds, 64, 3, true, &ds);
    if (st == TL_OK && ctx->mode == TL_MODE_TRAIN)
        st = tl_dataset_repeat(ds, -1, &ds);
    if (st == TL_OK)
        st = tl_dataset_batch(ds, ctx->batch_size, true, &ds);
    *out = st == TL_OK ? ds : NULL;
    return st;
}

static void run(bool files, bool listening, int64_t every, char hex[65], listen *l)
{
    tl_labeled_data *d = mtck_data(800, 4, 21), *e = mtck_data(256, 4, 22);
    char md[600], *dir = mtck_model_dir(md, sizeof md);
    tl_config *cfg;
    tl_estimator *est = make(ARGS("--devices=2", "--train_batch_size=32", "--train_steps=30", "--iterations_per_loop=4",
                                  "--eval_batch_size=64", "--eval_steps=2", "--save_checkpoints_steps=10",
                                  "--keep_checkpoint_max=10", "--tf_random_seed=5", md),
                             listening ? l : NULL, every, &cfg);
    tl_input tin = {.input_fn = shard_fn, .user = d}, ein = {.input_fn = shard_fn, .user = e};
    if (l != NULL) {
        l->eval_data = e;
        l->eval_in = files ? &ein : NULL;
    }
    tl_train_result tr;
    tl_status st = files ? tl_estimator_train_input(est, &tin, &tr) : tl_estimator_train(est, d, &tr);
    cr_assert_eq(st, TL_OK, "%s", tl_last_error());
    cr_assert_eq(tr.global_step, 30);
    cr_assert_eq(tl_estimator_params_digest(est, hex), TL_OK);
    tl_estimator_destroy(est);
    tl_config_destroy(cfg);
    /* Each evaluation is that of its checkpoint, evaluated alone. */
    for (int k = 0; l != NULL && listening && k < l->calls; k++) {
        tl_config *c2;
        tl_estimator *ev = make(ARGS("--devices=2", "--train_batch_size=32", "--eval_batch_size=64", "--eval_steps=2",
                                     "--tf_random_seed=5"),
                                NULL, 0, &c2);
        cr_assert_eq(tl_estimator_restore(ev, l->paths[k]), TL_OK, "%s", tl_last_error());
        tl_eval_result er;
        st = files ? tl_estimator_evaluate_input(ev, &ein, &er) : tl_estimator_evaluate(ev, e, &er);
        cr_assert_eq(st, TL_OK, "%s", tl_last_error());
        cr_assert_eq(er.global_step, l->steps[k]);
        cr_assert_eq(er.loss, l->results[k].loss, "checkpoint %lld: %.17g vs %.17g", (long long)l->steps[k], er.loss,
                     l->results[k].loss);
        cr_assert_eq(er.accuracy, l->results[k].accuracy);
        tl_estimator_destroy(ev);
        tl_config_destroy(c2);
    }
    mtck_drop_dir(dir);
    tl_labeled_data_destroy(d);
    tl_labeled_data_destroy(e);
}

Test(mt_estimator_listen, evaluating_at_every_checkpoint_changes_no_bit)
{
    for (int files = 0; files < 2; files++) {
        char plain[65], evaluated[65];
        listen l = {0};
        run(files, false, 0, plain, NULL);
        run(files, true, 0, evaluated, &l);
        cr_assert_str_eq(plain, evaluated, "files %d", files);
        /* Saves at 0 (the start), 12, 24 (loops of 4: the first boundary
         * 10 steps or more after the last save), 30 (the end). */
        cr_assert_eq(l.calls, 4, "files %d: %d calls", files, l.calls);
        int64_t want[] = {0, 12, 24, 30};
        for (int k = 0; k < 4; k++)
            cr_assert_eq(l.steps[k], want[k], "files %d: call %d at %lld", files, k, (long long)l.steps[k]);
    }
}

Test(mt_estimator_listen, save_every_n_steps_adds_saves_beside_the_schedule)
{
    char plain[65], evaluated[65];
    listen l = {0};
    run(true, false, 0, plain, NULL);
    run(true, true, 8, evaluated, &l);
    cr_assert_str_eq(plain, evaluated);
    /* The schedule's 0, 12, 24, 30 (its cadence unchanged), and a save
     * wherever 8 steps passed since the last one: 8 and 20. */
    int64_t want[] = {0, 8, 12, 20, 24, 30};
    cr_assert_eq(l.calls, 6, "%d calls", l.calls);
    for (int k = 0; k < 6; k++)
        cr_assert_eq(l.steps[k], want[k], "call %d at %lld", k, (long long)l.steps[k]);
}
