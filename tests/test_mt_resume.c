/* Resuming from model_dir (spec tpu_estimator.md §3.1, T21–T23; issue 4's
 * "Resume"): a run stopped and resumed — by a new estimator, from a
 * checkpoint whose newer sibling is corrupt, after tl_estimator_request_stop
 * from another thread — ends with the params_digest of the run never
 * interrupted, whatever iterations_per_loop each part used; steps count from
 * the restored step, max_steps is absolute; a checkpoint of another model is
 * an error naming the first variable that does not fit. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_mt_ckpt_util.h"

#define ARGC(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* The digest of an uninterrupted run without model_dir. */
static void uninterrupted(const char *ipl, const char *devices, const char *max_steps, const tl_labeled_data *d,
                          char digest[65])
{
    const char *argv[] = {ipl, devices, "--train_batch_size=32", max_steps, "--tf_random_seed=7"};
    tl_train_result tr;
    cr_assert_eq(mtck_train(ARGC(argv), argv, d, &tr, digest), TL_OK, "%s", tl_last_error());
}

static void stop_and_resume(const char *devices)
{
    tl_labeled_data *d = mtck_data(200, 4, 3); /* 6 batches of 32 per epoch: resumes cross epochs */
    char want[65], got[65];
    uninterrupted("--iterations_per_loop=4", devices, "--max_steps=60", d, want);
    char md[300], *dir = mtck_model_dir(md, sizeof md);
    const char *first[] = {"--iterations_per_loop=3", devices, "--train_batch_size=32", "--max_steps=25",
                           "--tf_random_seed=7", md};
    tl_train_result tr;
    cr_assert_eq(mtck_train(ARGC(first), first, d, &tr, NULL), TL_OK, "%s", tl_last_error());
    cr_assert_eq(tr.global_step, 25);
    const char *second[] = {"--iterations_per_loop=7", devices, "--train_batch_size=32", "--max_steps=60",
                            "--tf_random_seed=7", md};
    cr_assert_eq(mtck_train(ARGC(second), second, d, &tr, got), TL_OK, "%s", tl_last_error());
    cr_assert_eq(tr.global_step, 60);
    cr_assert_eq(tr.loops, 5, "35 steps from the restored 25 in loops of 7, got %lld loops", (long long)tr.loops);
    cr_assert_str_eq(got, want, "stopped at 25 and resumed: other bits than the uninterrupted run");
    mtck_drop_dir(dir);
    tl_labeled_data_destroy(d);
}

Test(mt_resume, resumed_run_has_the_uninterrupted_digest)
{
    stop_and_resume("--devices=1");
}

Test(mt_resume, resumed_run_has_the_uninterrupted_digest_on_two_devices)
{
    stop_and_resume("--devices=2");
}

/* A model_dir holding one checkpoint, at step 6. */
static char *dir_at_6(const tl_labeled_data *d)
{
    char md[300], *dir = mtck_model_dir(md, sizeof md);
    const char *argv[] = {"--iterations_per_loop=4", "--devices=1", "--train_batch_size=16", "--max_steps=6",
                          "--tf_random_seed=1", "--save_checkpoints_steps=100", md};
    tl_train_result tr;
    cr_assert_eq(mtck_train(ARGC(argv), argv, d, &tr, NULL), TL_OK, "%s", tl_last_error());
    int64_t steps[4];
    cr_assert_eq(mtck_steps(dir, steps, 4), 2);
    cr_assert_eq(steps[1], 6, "the end saves the last step");
    return dir;
}

Test(mt_resume, steps_count_from_the_restored_step_T21)
{
    tl_labeled_data *d = mtck_data(128, 4, 1);
    char *dir = dir_at_6(d);
    char md[300];
    snprintf(md, sizeof md, "--model_dir=%s", dir);
    const char *argv[] = {"--iterations_per_loop=4", "--devices=1", "--train_batch_size=16", "--train_steps=10",
                          "--tf_random_seed=1", md};
    tl_train_result tr;
    cr_assert_eq(mtck_train(ARGC(argv), argv, d, &tr, NULL), TL_OK, "%s", tl_last_error());
    cr_assert_eq(tr.global_step, 16, "final = 6 + 10");
    cr_assert_eq(tr.loops, 3, "loops of 4, 4, 2");
    mtck_drop_dir(dir);
    tl_labeled_data_destroy(d);
}

Test(mt_resume, max_steps_is_absolute_T22_T23)
{
    tl_labeled_data *d = mtck_data(128, 4, 1);
    char *dir = dir_at_6(d);
    char md[300];
    snprintf(md, sizeof md, "--model_dir=%s", dir);
    const char *argv[] = {"--iterations_per_loop=4", "--devices=1", "--train_batch_size=16", "--max_steps=10",
                          "--tf_random_seed=1", md};
    tl_train_result tr;
    cr_assert_eq(mtck_train(ARGC(argv), argv, d, &tr, NULL), TL_OK, "%s", tl_last_error());
    cr_assert_eq(tr.global_step, 10);
    cr_assert_eq(tr.loops, 1, "T22: one loop of 4");
    cr_assert_not(tr.skipped);
    /* T23: the checkpoint is now at 10. */
    mtck_log_start();
    tl_status st = mtck_train(ARGC(argv), argv, d, &tr, NULL);
    mtck_log_stop();
    cr_assert_eq(st, TL_OK, "%s", tl_last_error());
    cr_assert(tr.skipped);
    cr_assert_eq(tr.loops, 0);
    cr_assert_eq(tr.global_step, 10);
    cr_assert(mtck_log_has("Skipping training since max_steps has already saved.", NULL));
    int64_t steps[8];
    cr_assert_eq(mtck_steps(dir, steps, 8), 3, "no checkpoint when skipped: 0, 6, 10");
    mtck_drop_dir(dir);
    tl_labeled_data_destroy(d);
}

Test(mt_resume, corrupt_newest_checkpoint_falls_back_with_a_warning)
{
    tl_labeled_data *d = mtck_data(256, 4, 5);
    char want[65], got[65];
    uninterrupted("--iterations_per_loop=5", "--devices=2", "--max_steps=40", d, want);
    char md[300], *dir = mtck_model_dir(md, sizeof md);
    const char *first[] = {"--iterations_per_loop=5", "--devices=2", "--train_batch_size=32", "--max_steps=20",
                           "--tf_random_seed=7", "--save_checkpoints_steps=10", md};
    tl_train_result tr;
    cr_assert_eq(mtck_train(ARGC(first), first, d, &tr, NULL), TL_OK, "%s", tl_last_error());
    int64_t steps[8];
    cr_assert_eq(mtck_steps(dir, steps, 8), 3);
    cr_assert_eq(steps[2], 20);
    char *newest = mtck_join(dir, "model.ckpt-20.safetensors");
    mtck_flip_byte(newest, 3); /* in the data section: only the checksum can tell */
    const char *second[] = {"--iterations_per_loop=5", "--devices=2", "--train_batch_size=32", "--max_steps=40",
                            "--tf_random_seed=7", "--save_checkpoints_steps=10", md};
    mtck_log_start();
    tl_status st = mtck_train(ARGC(second), second, d, &tr, got);
    mtck_log_stop();
    cr_assert_eq(st, TL_OK, "%s", tl_last_error());
    cr_assert(mtck_log_has(newest, "checksum"), "the warning names the file and why");
    cr_assert(mtck_log_has("falling back to the previous checkpoint", NULL));
    cr_assert_eq(tr.loops, 6, "resumed at 10: 30 steps in loops of 5");
    cr_assert_str_eq(got, want, "resumed from 10 past a corrupt 20: other bits than the uninterrupted run");
    free(newest);
    mtck_drop_dir(dir);
    tl_labeled_data_destroy(d);
}

Test(mt_resume, checkpoint_of_another_model_names_the_first_variable)
{
    tl_labeled_data *d = mtck_data(128, 4, 2);
    char md[300], *dir = mtck_model_dir(md, sizeof md);
    const char *argv[] = {"--iterations_per_loop=5", "--devices=1", "--train_batch_size=16", "--max_steps=5",
                          "--eval_batch_size=16", "--eval_steps=2", "--tf_random_seed=1", md};
    tl_train_result tr;
    cr_assert_eq(mtck_train(ARGC(argv), argv, d, &tr, NULL), TL_OK, "%s", tl_last_error());
    char want[600];
    snprintf(want, sizeof want, "checkpoint %s/model.ckpt-5.safetensors: variable 'dense/bias' has shape [16], the "
                                "model needs [8]", dir);

    /* Another model (8 hidden units, not 16) on the same model_dir: restore
     * before the model is traced checks the file now and loads it at the
     * first evaluate, which fails — and keeps failing. */
    static mtck_model narrow = {8, 4};
    tl_estimator_options o;
    tl_estimator_options_init(&o);
    o.model_fn = mtck_model_fn;
    o.user = &narrow;
    tl_config *cfg;
    tl_estimator *est = mtck_estimator(ARGC(argv), argv, &o, &cfg);
    cr_assert_eq(tl_estimator_restore(est, NULL), TL_OK, "%s", tl_last_error());
    tl_eval_result er;
    for (int i = 0; i < 2; i++) {
        cr_assert_eq(tl_estimator_evaluate(est, d, &er), TL_EINVAL);
        cr_assert_str_eq(tl_last_error(), want);
    }
    tl_estimator_destroy(est);
    tl_config_destroy(cfg);

    /* The first train restores by itself: the same error, nothing trained. */
    est = mtck_estimator(ARGC(argv), argv, &o, &cfg);
    cr_assert_eq(tl_estimator_train(est, d, &tr), TL_EINVAL);
    cr_assert_str_eq(tl_last_error(), want);
    cr_assert_eq(tl_estimator_global_step(est), 0);
    tl_estimator_destroy(est);
    tl_config_destroy(cfg);

    /* Once traced, restore loads at once: the error comes from the call
     * and the parameters stay as they were. */
    char *other = mtck_tmpdir();
    char md2[300];
    snprintf(md2, sizeof md2, "--model_dir=%s", other);
    const char *argv2[] = {"--iterations_per_loop=5", "--devices=1", "--train_batch_size=16", "--max_steps=3",
                           "--tf_random_seed=1", md2};
    est = mtck_estimator(ARGC(argv2), argv2, &o, &cfg);
    cr_assert_eq(tl_estimator_train(est, d, &tr), TL_OK, "%s", tl_last_error());
    char before[65], after[65];
    tl_estimator_params_digest(est, before);
    cr_assert_eq(tl_estimator_restore(est, dir), TL_EINVAL);
    cr_assert_str_eq(tl_last_error(), want);
    tl_estimator_params_digest(est, after);
    cr_assert_str_eq(before, after, "a failed restore changed the parameters");
    cr_assert_eq(tl_estimator_global_step(est), 3);
    tl_estimator_destroy(est);
    tl_config_destroy(cfg);
    mtck_drop_dir(other);
    mtck_drop_dir(dir);
    tl_labeled_data_destroy(d);
}

Test(mt_resume, restore_without_a_checkpoint_is_not_found)
{
    char md[300], *dir = mtck_model_dir(md, sizeof md);
    const char *argv[] = {"--devices=1", "--train_batch_size=16", "--max_steps=3", md};
    tl_config *cfg;
    tl_estimator *est = mtck_estimator(ARGC(argv), argv, NULL, &cfg);
    cr_assert_eq(tl_estimator_restore(est, NULL), TL_ENOTFOUND);
    char want[400];
    snprintf(want, sizeof want, "Could not find trained model in model_dir: %s.", dir);
    cr_assert_str_eq(tl_last_error(), want);
    char *missing = mtck_join(dir, "model.ckpt-9.safetensors");
    cr_assert_eq(tl_estimator_restore(est, missing), TL_ENOTFOUND);
    cr_assert(strstr(tl_last_error(), missing) != NULL, "%s", tl_last_error());
    free(missing);
    tl_estimator_destroy(est);
    tl_config_destroy(cfg);
    const char *no_dir[] = {"--devices=1", "--train_batch_size=16", "--max_steps=3"};
    est = mtck_estimator(ARGC(no_dir), no_dir, NULL, &cfg);
    cr_assert_eq(tl_estimator_restore(est, NULL), TL_EINVAL);
    cr_assert(strstr(tl_last_error(), "model_dir") != NULL, "%s", tl_last_error());
    tl_estimator_destroy(est);
    tl_config_destroy(cfg);
    mtck_drop_dir(dir);
}

/* ---- request_stop from another thread ------------------------------------ */

/* host_call (on the training thread) hands step `at` to a stopper thread
 * and waits until it has asked the estimator to stop, so the stop lands on
 * the boundary of the loop that ran step `at`, whatever the scheduling. */
typedef struct stopper {
    tl_estimator *est;
    int64_t at;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int phase; /* 0 waiting, 1 host_call reached `at`, 2 stop requested */
} stopper;

static tl_status stop_host_call(int64_t gs, const tl_host_tensor *t, int n, void *user)
{
    (void)t;
    (void)n;
    stopper *s = user;
    if (gs != s->at)
        return TL_OK;
    pthread_mutex_lock(&s->mu);
    s->phase = 1;
    pthread_cond_broadcast(&s->cv);
    while (s->phase != 2)
        pthread_cond_wait(&s->cv, &s->mu);
    pthread_mutex_unlock(&s->mu);
    return TL_OK;
}

static void *stopper_main(void *arg)
{
    stopper *s = arg;
    pthread_mutex_lock(&s->mu);
    while (s->phase != 1)
        pthread_cond_wait(&s->cv, &s->mu);
    tl_estimator_request_stop(s->est);
    s->phase = 2;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

Test(mt_resume, request_stop_saves_at_a_loop_boundary_and_resumes_exactly)
{
    tl_labeled_data *d = mtck_data(256, 4, 9);
    char want[65], got[65];
    uninterrupted("--iterations_per_loop=5", "--devices=2", "--max_steps=120", d, want);
    char md[300], *dir = mtck_model_dir(md, sizeof md);
    /* No checkpoint hook (T28): the graceful-shutdown save is the only one. */
    const char *argv[] = {"--iterations_per_loop=5", "--devices=2", "--train_batch_size=32", "--max_steps=120",
                          "--tf_random_seed=7", "--save_checkpoints_steps=null", "--save_checkpoints_secs=null", md};
    static mtck_model m = {16, 4};
    stopper s = {.at = 48, .mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
    tl_estimator_options o;
    tl_estimator_options_init(&o);
    o.model_fn = mtck_model_fn;
    o.user = &m;
    o.optimizer.lr.learning_rate = 0.01;
    o.host_call = stop_host_call;
    o.host_call_user = &s;
    tl_config *cfg;
    tl_estimator *est = mtck_estimator(ARGC(argv), argv, &o, &cfg);
    s.est = est;
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, stopper_main, &s), 0);
    tl_train_result tr;
    cr_assert_eq(tl_estimator_train(est, d, &tr), TL_OK, "%s", tl_last_error());
    pthread_join(th, NULL);
    cr_assert(tr.stopped);
    cr_assert_eq(tr.global_step, 50, "step 48 runs in the loop 45..50; the stop takes effect after it");
    int64_t steps[4];
    cr_assert_eq(mtck_steps(dir, steps, 4), 1, "only the graceful-shutdown checkpoint");
    cr_assert_eq(steps[0], 50);
    tl_estimator_destroy(est);
    tl_config_destroy(cfg);

    cr_assert_eq(mtck_train(ARGC(argv), argv, d, &tr, got), TL_OK, "%s", tl_last_error());
    cr_assert_not(tr.stopped);
    cr_assert_eq(tr.global_step, 120);
    cr_assert_eq(tr.loops, 14);
    cr_assert_str_eq(got, want, "stopped at 50 and resumed: other bits than the uninterrupted run");
    int64_t all[4];
    cr_assert_eq(mtck_steps(dir, all, 4), 1, "without a checkpoint hook a run that is not stopped saves nothing");
    mtck_drop_dir(dir);
    tl_labeled_data_destroy(d);
}

Test(mt_resume, stop_requested_before_train_stops_at_the_start)
{
    tl_labeled_data *d = mtck_data(128, 4, 9);
    char md[300], *dir = mtck_model_dir(md, sizeof md);
    const char *argv[] = {"--iterations_per_loop=5", "--devices=1", "--train_batch_size=16", "--max_steps=20",
                          "--tf_random_seed=7", md};
    tl_config *cfg;
    tl_estimator *est = mtck_estimator(ARGC(argv), argv, NULL, &cfg);
    tl_estimator_request_stop(est);
    tl_train_result tr;
    cr_assert_eq(tl_estimator_train(est, d, &tr), TL_OK, "%s", tl_last_error());
    cr_assert(tr.stopped);
    cr_assert_eq(tr.loops, 0);
    cr_assert_eq(tr.global_step, 0);
    /* The request was honoured: the next train runs to the end. */
    cr_assert_eq(tl_estimator_train(est, d, &tr), TL_OK, "%s", tl_last_error());
    cr_assert_not(tr.stopped);
    cr_assert_eq(tr.global_step, 20);
    tl_estimator_destroy(est);
    tl_config_destroy(cfg);
    mtck_drop_dir(dir);
    tl_labeled_data_destroy(d);
}
