/* model_dir of a training run (spec tpu_estimator.md §2, §3.2, §3.3; issue
 * 4): checkpoints at TensorFlow's save points (T26–T28), retention, what a
 * checkpoint holds (every variable, the slots under TensorFlow's names, the
 * global step, the configuration's identity), config.json, the training and
 * evaluation event files, and warm starting from another run. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <math.h>
#include <sha2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test_mt_ckpt_util.h"

#define ARGC(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* Trains with flags plus --model_dir=<a new directory>, which it returns. */
static char *train_in_new_dir(int argc, const char *const *argv, const tl_labeled_data *d, tl_train_result *tr)
{
    char md[300], *dir = mtck_model_dir(md, sizeof md);
    const char *all[16];
    cr_assert_lt(argc, 16);
    for (int i = 0; i < argc; i++)
        all[i] = argv[i];
    all[argc] = md;
    cr_assert_eq(mtck_train(argc + 1, all, d, tr, NULL), TL_OK, "%s", tl_last_error());
    return dir;
}

static void expect_steps(const char *dir, const int64_t *want, int n)
{
    int64_t got[64];
    int count = mtck_steps(dir, got, 64);
    cr_assert_eq(count, n, "%d checkpoints, expected %d", count, n);
    for (int i = 0; i < n; i++)
        cr_assert_eq(got[i], want[i], "checkpoint %d is at step %lld, expected %lld", i, (long long)got[i],
                     (long long)want[i]);
}

/* Trains mtck_data(128, 4, 1) with the flags into a new model_dir, which it
 * returns, and expects its checkpoints at steps want[0..n). */
static char *saves_at(int argc, const char *const *argv, const int64_t *want, int n)
{
    tl_labeled_data *d = mtck_data(128, 4, 1);
    tl_train_result tr;
    char *dir = train_in_new_dir(argc, argv, d, &tr);
    tl_labeled_data_destroy(d);
    expect_steps(dir, want, n);
    return dir;
}

/* dir's checkpoint index names latest (NULL: not checked) and lists the n
 * paths listed, oldest first. */
static void expect_index(const char *dir, const char *latest, const char *const *listed, int n)
{
    tl_ckpt_state *st;
    cr_assert_eq(tl_ckpt_state_read(dir, &st), TL_OK, "%s", tl_last_error());
    if (latest != NULL)
        cr_assert_str_eq(st->model_checkpoint_path, latest);
    cr_assert_eq(st->num_paths, n);
    for (int i = 0; i < n; i++)
        cr_assert_str_eq(st->all_model_checkpoint_paths[i], listed[i]);
    tl_ckpt_state_destroy(st);
}

/* ---- save points (§3.2) --------------------------------------------------- */

Test(mt_ckpt, save_every_loop_T26)
{
    const char *argv[] = {"--iterations_per_loop=100", "--devices=1", "--train_batch_size=16", "--train_steps=1000",
                          "--save_checkpoints_steps=100", "--keep_checkpoint_max=0", "--tf_random_seed=1"};
    int64_t want[11];
    for (int i = 0; i < 11; i++)
        want[i] = 100 * i;
    char *dir = saves_at(ARGC(argv), argv, want, 11);
    tl_ckpt_state *st;
    cr_assert_eq(tl_ckpt_state_read(dir, &st), TL_OK, "%s", tl_last_error());
    cr_assert_str_eq(st->model_checkpoint_path, "model.ckpt-1000");
    cr_assert_eq(st->num_paths, 1, "keep_checkpoint_max 0 keeps every file and lists the latest, as TF's Saver");
    tl_ckpt_state_destroy(st);
    mtck_drop_dir(dir);
}

Test(mt_ckpt, save_at_the_first_boundary_past_the_period_T27)
{
    const char *argv[] = {"--iterations_per_loop=100", "--devices=1", "--train_batch_size=16", "--train_steps=1000",
                          "--save_checkpoints_steps=250", "--keep_checkpoint_max=0", "--tf_random_seed=1"};
    const int64_t want[] = {0, 300, 600, 900, 1000};
    mtck_drop_dir(saves_at(ARGC(argv), argv, want, 5));
}

Test(mt_ckpt, no_checkpoint_hook_when_both_are_null_T28)
{
    const char *argv[] = {"--iterations_per_loop=10", "--devices=1", "--train_batch_size=16", "--train_steps=50",
                          "--save_checkpoints_steps=null", "--save_checkpoints_secs=null", "--tf_random_seed=1"};
    mtck_log_start();
    char *dir = saves_at(ARGC(argv), argv, NULL, 0);
    mtck_log_stop();
    cr_assert(mtck_log_has("Bypassing TPUEstimator hook", NULL));
    char *cfg = mtck_join(dir, "config.json");
    cr_assert(mtck_exists(cfg), "config.json is written without checkpoints too");
    free(cfg);
    int64_t s[8];
    float v[8];
    cr_assert_gt(mtck_scalars(dir, "loss", s, v, 8), 0, "summaries are written without checkpoints too");
    mtck_drop_dir(dir);
}

Test(mt_ckpt, default_is_every_600_seconds_so_a_short_run_saves_start_and_end)
{
    const char *argv[] = {"--iterations_per_loop=10", "--devices=1", "--train_batch_size=16", "--train_steps=30",
                          "--tf_random_seed=1"};
    const int64_t want[] = {0, 30};
    mtck_drop_dir(saves_at(ARGC(argv), argv, want, 2));
}

/* What keep_checkpoint_max 2 lists after 50 steps saved every 10. */
static const char *const last_two[] = {"model.ckpt-40", "model.ckpt-50"};

Test(mt_ckpt, keep_checkpoint_max_retires_the_oldest)
{
    const char *argv[] = {"--iterations_per_loop=10", "--devices=2", "--train_batch_size=16", "--train_steps=50",
                          "--save_checkpoints_steps=10", "--keep_checkpoint_max=2", "--tf_random_seed=1"};
    const int64_t want[] = {40, 50};
    char *dir = saves_at(ARGC(argv), argv, want, 2);
    expect_index(dir, NULL, last_two, 2);
    mtck_drop_dir(dir);
}

/* keep_checkpoint_every_n_hours=None is not 10000 hours: Estimator's Saver
 * gets an unset field (0 hours), so every checkpoint written during the run
 * stays on disk — TF 2.15 keeps model.ckpt-0 — and the index lists the
 * last keep_checkpoint_max. */
Test(mt_ckpt, keep_checkpoint_every_n_hours_none_keeps_what_tensorflow_keeps)
{
    const char *argv[] = {"--iterations_per_loop=10", "--devices=2", "--train_batch_size=16", "--train_steps=50",
                          "--save_checkpoints_steps=10", "--keep_checkpoint_max=2",
                          "--keep_checkpoint_every_n_hours=null", "--tf_random_seed=1"};
    tl_config *cfg = mtck_config(ARGC(argv), argv);
    cr_assert_lt(tl_config_get(cfg)->keep_checkpoint_every_n_hours, 0, "None stays None in the run config");
    char *text;
    cr_assert_eq(tl_config_to_json(cfg, &text), TL_OK);
    cr_assert(strstr(text, "\"keep_checkpoint_every_n_hours\": null") != NULL, "%s", text);
    tl_free_string(text);
    tl_config_destroy(cfg);
    const int64_t want[] = {0, 10, 20, 30, 40, 50};
    char *dir = saves_at(ARGC(argv), argv, want, 6);
    expect_index(dir, NULL, last_two, 2);
    mtck_drop_dir(dir);
}

/* keep_checkpoint_max=0 keeps every file and lists only the latest. */
Test(mt_ckpt, keep_checkpoint_max_0_lists_only_the_latest)
{
    const char *argv[] = {"--iterations_per_loop=10", "--devices=1", "--train_batch_size=16", "--train_steps=30",
                          "--save_checkpoints_steps=10", "--keep_checkpoint_max=0", "--tf_random_seed=1"};
    const int64_t want[] = {0, 10, 20, 30};
    char *dir = saves_at(ARGC(argv), argv, want, 4);
    static const char *const listed[] = {"model.ckpt-30"};
    expect_index(dir, "model.ckpt-30", listed, 1);
    mtck_drop_dir(dir);
}

/* ---- what a checkpoint holds ----------------------------------------------- */

/* params_digest recomputed from a checkpoint's variables. */
static void file_digest(const tl_ckpt_reader *r, char hex[65])
{
    static const char *const vars[] = {"dense/bias", "dense/kernel", "dense_1/bias", "dense_1/kernel"};
    SHA2_CTX ctx;
    SHA256Init(&ctx);
    for (int i = 0; i < 4; i++) {
        tl_ckpt_tensor_info t;
        cr_assert_eq(tl_ckpt_find(r, vars[i], &t), TL_OK, "%s", tl_last_error());
        cr_assert_eq(t.dtype, TL_CKPT_F32);
        SHA256Update(&ctx, t.data, (size_t)t.bytes); /* little-endian float32, as the digest */
    }
    uint8_t digest[SHA256_DIGEST_LENGTH];
    SHA256Final(digest, &ctx);
    for (int i = 0; i < SHA256_DIGEST_LENGTH; i++)
        snprintf(hex + 2 * i, 3, "%02x", digest[i]);
}

Test(mt_ckpt, checkpoint_holds_variables_adam_slots_step_and_identity)
{
    tl_labeled_data *d = mtck_data(128, 4, 1);
    char md[300], *dir = mtck_model_dir(md, sizeof md);
    const char *argv[] = {"--iterations_per_loop=7", "--devices=2", "--train_batch_size=16", "--train_steps=20",
                          "--tf_random_seed=1", md};
    tl_train_result tr;
    char digest[65], from_file[65];
    cr_assert_eq(mtck_train(ARGC(argv), argv, d, &tr, digest), TL_OK, "%s", tl_last_error());
    char *path = mtck_join(dir, "model.ckpt-20.safetensors");
    tl_ckpt_reader *r;
    cr_assert_eq(tl_ckpt_open(path, 0, &r), TL_OK, "%s", tl_last_error());
    file_digest(r, from_file);
    cr_assert_str_eq(from_file, digest, "the checkpoint's variables are the trained parameters");
    tl_ckpt_tensor_info t, m, v;
    cr_assert_eq(tl_ckpt_find(r, "dense/kernel", &t), TL_OK);
    cr_assert_eq(t.rank, 2);
    cr_assert_eq(t.shape[0], MTCK_FEATURES);
    cr_assert_eq(t.shape[1], 16);
    cr_assert_eq(tl_ckpt_find(r, "dense/kernel/Adam", &m), TL_OK, "Adam's m under TensorFlow's name");
    cr_assert_eq(tl_ckpt_find(r, "dense/kernel/Adam_1", &v), TL_OK, "Adam's v under TensorFlow's name");
    cr_assert_eq(m.rank, 2);
    cr_assert_eq(v.shape[1], 16);
    const float *vv = v.data;
    for (int64_t i = 0; i < t.shape[0] * t.shape[1]; i++)
        cr_assert_geq(vv[i], 0.0f, "v is a mean of squares");
    cr_assert_eq(tl_ckpt_find(r, "global_step", &t), TL_OK);
    cr_assert_eq(t.dtype, TL_CKPT_I64);
    cr_assert_eq(t.rank, 0);
    int64_t gs;
    memcpy(&gs, t.data, sizeof gs);
    cr_assert_eq(gs, 20);
    cr_assert_str_eq(tl_ckpt_meta(r, "global_step"), "20");
    cr_assert_str_eq(tl_ckpt_meta(r, "optimizer"), "Adam");
    cr_assert_str_eq(tl_ckpt_meta(r, "input_steps_per_epoch"), "8");
    cr_assert_str_eq(tl_ckpt_meta(r, "input_epoch"), "2");
    cr_assert_str_eq(tl_ckpt_meta(r, "input_batch"), "4");
    cr_assert_str_eq(tl_ckpt_meta(r, "tf_random_seed"), "1");
    cr_assert_eq(strlen(tl_ckpt_meta(r, "config_sha256")), 64);
    cr_assert_str_eq(tl_ckpt_meta(r, "topology"), "{\"cores_per_replica\":1,\"hosts\":1,\"replicas\":2}");
    json_t *id = json_loads(tl_ckpt_meta(r, "config"), 0, NULL);
    cr_assert_not_null(id);
    cr_assert_eq(json_integer_value(json_object_get(id, "train_batch_size")), 16);
    cr_assert_str_eq(json_string_value(json_object_get(json_object_get(id, "optimizer"), "name")), "Adam");
    json_decref(id);
    tl_ckpt_close(r);
    free(path);

    /* config.json: the resolved configuration. */
    char *cj = mtck_join(dir, "config.json");
    json_t *cfg = json_load_file(cj, 0, NULL);
    cr_assert_not_null(cfg, "config.json is JSON");
    cr_assert_str_eq(json_string_value(json_object_get(cfg, "model_dir")), dir);
    cr_assert_eq(json_integer_value(json_object_get(cfg, "train_steps")), 20);
    json_decref(cfg);
    free(cj);
    mtck_drop_dir(dir);
    tl_labeled_data_destroy(d);
}

/* Trains 1 step with optimizer kind into a new directory and opens the
 * checkpoint at step `at` (0: the initial state, 1: after one update). */
static tl_ckpt_reader *one_step(const tl_optimizer_config *oc, const tl_labeled_data *d, int at, char **dir)
{
    char md[300];
    *dir = mtck_model_dir(md, sizeof md);
    const char *argv[] = {"--devices=1", "--train_batch_size=16", "--train_steps=1", "--tf_random_seed=1", md};
    static mtck_model m = {16, 4};
    tl_estimator_options o;
    tl_estimator_options_init(&o);
    o.model_fn = mtck_model_fn;
    o.user = &m;
    o.optimizer = *oc;
    tl_config *cfg;
    tl_estimator *est = mtck_estimator(ARGC(argv), argv, &o, &cfg);
    tl_train_result tr;
    cr_assert_eq(tl_estimator_train(est, d, &tr), TL_OK, "%s", tl_last_error());
    tl_estimator_destroy(est);
    tl_config_destroy(cfg);
    char name[64];
    snprintf(name, sizeof name, "model.ckpt-%d.safetensors", at);
    char *path = mtck_join(*dir, name);
    tl_ckpt_reader *r;
    cr_assert_eq(tl_ckpt_open(path, 0, &r), TL_OK, "%s", tl_last_error());
    free(path);
    return r;
}

Test(mt_ckpt, slots_carry_tensorflow_names)
{
    tl_labeled_data *d = mtck_data(64, 4, 1);
    tl_optimizer_config oc;
    char *dir;
    tl_ckpt_tensor_info t;

    tl_optimizer_config_default(TL_OPTIM_MOMENTUM, &oc);
    oc.lr.learning_rate = 0.01;
    oc.momentum = 0.9;
    tl_ckpt_reader *r = one_step(&oc, d, 1, &dir);
    cr_assert_eq(tl_ckpt_find(r, "dense_1/kernel/Momentum", &t), TL_OK);
    cr_assert_neq(tl_ckpt_find(r, "dense_1/kernel/Momentum_1", &t), TL_OK);
    tl_ckpt_close(r);
    mtck_drop_dir(dir);

    tl_optimizer_config_default(TL_OPTIM_ADAGRAD, &oc);
    oc.lr.learning_rate = 0.01;
    r = one_step(&oc, d, 0, &dir);
    cr_assert_eq(tl_ckpt_find(r, "dense/bias/Adagrad", &t), TL_OK);
    cr_assert_eq(((const float *)t.data)[0], 0.1f, "initial_accumulator_value");
    tl_ckpt_close(r);
    mtck_drop_dir(dir);

    /* Centered RMSProp: TensorFlow makes rms ("RMSProp", ones), then mg
     * ("RMSProp_1"), then momentum ("RMSProp_2"). After one step mg =
     * 0.1 g and mom = lr g / sqrt(ms - mg^2 + eps) ~ 0.0105 g, so |mg| > |mom|
     * wherever g is not 0. */
    tl_optimizer_config_default(TL_OPTIM_RMSPROP, &oc);
    oc.lr.learning_rate = 0.01;
    oc.momentum = 0.5;
    oc.centered = true;
    r = one_step(&oc, d, 0, &dir);
    cr_assert_eq(tl_ckpt_find(r, "dense/kernel/RMSProp", &t), TL_OK);
    cr_assert_eq(((const float *)t.data)[0], 1.0f, "rms starts at ones");
    tl_ckpt_close(r);
    char *p1 = mtck_join(dir, "model.ckpt-1.safetensors");
    cr_assert_eq(tl_ckpt_open(p1, 0, &r), TL_OK, "%s", tl_last_error());
    free(p1);
    tl_ckpt_tensor_info mg, mom;
    cr_assert_eq(tl_ckpt_find(r, "dense_1/bias/RMSProp_1", &mg), TL_OK);
    cr_assert_eq(tl_ckpt_find(r, "dense_1/bias/RMSProp_2", &mom), TL_OK);
    const float *a = mg.data, *b = mom.data;
    int nonzero = 0;
    for (int i = 0; i < 4; i++)
        if (a[i] != 0.0f) {
            nonzero++;
            cr_assert_gt(fabsf(a[i]), fabsf(b[i]), "RMSProp_1 is mg, RMSProp_2 the momentum");
        }
    cr_assert_gt(nonzero, 0);
    tl_ckpt_close(r);
    mtck_drop_dir(dir);
    tl_labeled_data_destroy(d);
}

/* The model of mtck_model_fn whose TRAIN spec sets the optimizer (NULL:
 * none), as a TensorFlow model_fn builds its train_op. */
typedef struct spec_model {
    mtck_model m;
    const tl_optimizer_config *optimizer;
} spec_model;

static tl_status spec_model_fn(tl_graph *g, const tl_model_args *a, tl_model_spec *spec, void *user)
{
    spec_model *sm = user;
    tl_status st = mtck_model_fn(g, a, spec, &sm->m);
    if (a->mode == TL_MODE_TRAIN)
        spec->optimizer = sm->optimizer;
    return st;
}

/* Trains 3 more steps in the model_dir of flag md with Momentum, given by
 * the TRAIN spec (the options left at Adam) or by the options; returns
 * train's status and the digest. */
static tl_status momentum_steps(const char *md, bool via_spec, char digest[65])
{
    const char *argv[] = {"--devices=2", "--train_batch_size=16", "--train_steps=3", "--iterations_per_loop=2",
                          "--tf_random_seed=1", md};
    tl_optimizer_config mom;
    tl_optimizer_config_default(TL_OPTIM_MOMENTUM, &mom);
    mom.lr.learning_rate = 0.01;
    mom.momentum = 0.9;
    spec_model sm = {{16, 4}, via_spec ? &mom : NULL};
    tl_estimator_options o;
    tl_estimator_options_init(&o);
    o.model_fn = spec_model_fn;
    o.user = &sm;
    if (!via_spec)
        o.optimizer = mom;
    tl_labeled_data *d = mtck_data(64, 4, 1);
    tl_config *cfg;
    tl_estimator *est = mtck_estimator(ARGC(argv), argv, &o, &cfg);
    tl_train_result tr;
    tl_status st = tl_estimator_train(est, d, &tr);
    if (st == TL_OK)
        cr_assert_eq(tl_estimator_params_digest(est, digest), TL_OK);
    tl_estimator_destroy(est);
    tl_config_destroy(cfg);
    tl_labeled_data_destroy(d);
    return st;
}

/* Momentum in the model_fn's TRAIN spec: the checkpoint holds its slots
 * under TensorFlow's names, the configuration's identity is that of the
 * same optimizer in the options, and a resume restores the slots. */
Test(mt_ckpt, spec_optimizer_slots_checkpoint_and_restore)
{
    char md_spec[300], md_opts[300], *dir_spec = mtck_model_dir(md_spec, sizeof md_spec),
                                     *dir_opts = mtck_model_dir(md_opts, sizeof md_opts);
    char d_spec[65], d_opts[65];
    cr_assert_eq(momentum_steps(md_spec, true, d_spec), TL_OK, "%s", tl_last_error());
    cr_assert_eq(momentum_steps(md_opts, false, d_opts), TL_OK, "%s", tl_last_error());
    cr_assert_str_eq(d_spec, d_opts, "the spec's Momentum trained other bits than the options'");

    char *path = mtck_join(dir_spec, "model.ckpt-3.safetensors"), *po = mtck_join(dir_opts, "model.ckpt-3.safetensors");
    tl_ckpt_reader *r, *ro;
    cr_assert_eq(tl_ckpt_open(path, 0, &r), TL_OK, "%s", tl_last_error());
    cr_assert_eq(tl_ckpt_open(po, 0, &ro), TL_OK, "%s", tl_last_error());
    tl_ckpt_tensor_info t;
    cr_assert_eq(tl_ckpt_find(r, "dense/kernel/Momentum", &t), TL_OK, "%s", tl_last_error());
    cr_assert_eq(tl_ckpt_find(r, "dense_1/bias/Momentum", &t), TL_OK, "%s", tl_last_error());
    cr_assert_neq(tl_ckpt_find(r, "dense/kernel/Adam", &t), TL_OK, "no slots of the options' Adam");
    cr_assert_str_eq(tl_ckpt_meta(r, "optimizer"), "Momentum");
    cr_assert_str_eq(tl_ckpt_meta(r, "config_sha256"), tl_ckpt_meta(ro, "config_sha256"),
                     "the identity is the optimizer's, wherever it was given");
    json_t *id = json_loads(tl_ckpt_meta(r, "config"), 0, NULL);
    cr_assert_not_null(id);
    json_t *opt = json_object_get(id, "optimizer");
    cr_assert_str_eq(json_string_value(json_object_get(opt, "name")), "Momentum");
    cr_assert_eq(json_real_value(json_object_get(opt, "momentum")), 0.9);
    json_decref(id);
    tl_ckpt_close(r);
    tl_ckpt_close(ro);
    free(path);
    free(po);

    /* Both resume from step 3, the slots restored, to the same bits, and
     * without a warning of another configuration. */
    mtck_log_start();
    cr_assert_eq(momentum_steps(md_spec, true, d_spec), TL_OK, "%s", tl_last_error());
    cr_assert_eq(momentum_steps(md_opts, false, d_opts), TL_OK, "%s", tl_last_error());
    bool warned = mtck_log_has("another configuration", NULL);
    mtck_log_stop();
    cr_assert_not(warned, "a resume with the spec's optimizer warned of another configuration");
    cr_assert_str_eq(d_spec, d_opts, "resumed from step 3: other bits");
    int64_t steps[8];
    int n = mtck_steps(dir_spec, steps, 8);
    cr_assert(n >= 1 && steps[n - 1] == 6, "the resume trained to step 6 (%d checkpoints)", n);

    /* Without the spec's optimizer the model trains with Adam, whose slots
     * the checkpoint lacks. */
    const char *argv[] = {"--devices=2", "--train_batch_size=16", "--train_steps=1", "--tf_random_seed=1", md_spec};
    spec_model sm = {{16, 4}, NULL};
    tl_estimator_options o;
    tl_estimator_options_init(&o);
    o.model_fn = spec_model_fn;
    o.user = &sm;
    tl_labeled_data *data = mtck_data(64, 4, 1);
    tl_config *cfg;
    tl_estimator *est = mtck_estimator(ARGC(argv), argv, &o, &cfg);
    tl_train_result tr;
    cr_assert_eq(tl_estimator_train(est, data, &tr), TL_EINVAL);
    cr_assert(strstr(tl_last_error(), "it was written by optimizer Momentum; this model trains with Adam") != NULL,
              "%s", tl_last_error());
    tl_estimator_destroy(est);
    tl_config_destroy(cfg);
    tl_labeled_data_destroy(data);
    mtck_drop_dir(dir_spec);
    mtck_drop_dir(dir_opts);
}

Test(mt_ckpt, another_configuration_is_a_warning_naming_what_differs)
{
    tl_labeled_data *d = mtck_data(128, 4, 1);
    char md[300], *dir = mtck_model_dir(md, sizeof md);
    const char *argv[] = {"--devices=1", "--train_batch_size=16", "--train_steps=5", "--tf_random_seed=1", md};
    tl_train_result tr;
    cr_assert_eq(mtck_train(ARGC(argv), argv, d, &tr, NULL), TL_OK, "%s", tl_last_error());
    static mtck_model m = {16, 4};
    tl_estimator_options o;
    tl_estimator_options_init(&o);
    o.model_fn = mtck_model_fn;
    o.user = &m;
    o.optimizer.lr.learning_rate = 0.02; /* the first run used 0.01 */
    tl_config *cfg;
    tl_estimator *est = mtck_estimator(ARGC(argv), argv, &o, &cfg);
    mtck_log_start();
    tl_status st = tl_estimator_train(est, d, &tr);
    mtck_log_stop();
    cr_assert_eq(st, TL_OK, "%s", tl_last_error());
    cr_assert_eq(tr.global_step, 10, "the variables fit: it resumed");
    cr_assert(mtck_log_has("another configuration", "optimizer.lr.learning_rate: 0.01 -> 0.02"));
    tl_estimator_destroy(est);
    tl_config_destroy(cfg);
    mtck_drop_dir(dir);
    tl_labeled_data_destroy(d);
}

/* ---- summaries (§3.3) ------------------------------------------------------ */

static tl_status write_custom(int64_t gs, const tl_host_tensor *t, int n, void *user)
{
    (void)t;
    (void)n;
    tl_estimator **est = user;
    return tl_summary_scalar(tl_estimator_summary_writer(*est), "custom/step", gs, (float)gs, TL_SUMMARY_NOW);
}

Test(mt_ckpt, training_events_hold_loss_rates_and_host_call_scalars)
{
    tl_labeled_data *d = mtck_data(128, 4, 1);
    char md[300], *dir = mtck_model_dir(md, sizeof md);
    const char *argv[] = {"--iterations_per_loop=5", "--devices=2", "--train_batch_size=32", "--train_steps=40",
                          "--save_summary_steps=10", "--log_step_count_steps=10",
                          "--experimental_host_call_every_n_steps=5", "--tf_random_seed=1", md};
    static mtck_model m = {16, 4};
    tl_estimator *est = NULL;
    tl_estimator_options o;
    tl_estimator_options_init(&o);
    o.model_fn = mtck_model_fn;
    o.user = &m;
    o.host_call = write_custom;
    o.host_call_user = &est;
    tl_config *cfg;
    est = mtck_estimator(ARGC(argv), argv, &o, &cfg);
    cr_assert_null(tl_estimator_summary_writer(est), "opened by the first train");
    tl_train_result tr;
    cr_assert_eq(tl_estimator_train(est, d, &tr), TL_OK, "%s", tl_last_error());
    int64_t steps[32];
    float values[32];
    /* SummarySaverHook at loop boundaries: the first loop, then the first
     * boundary at or after each multiple of 10. */
    int n = mtck_scalars(dir, "loss", steps, values, 32);
    const int64_t want_loss[] = {5, 10, 20, 30, 40};
    cr_assert_eq(n, 5, "%d loss events", n);
    for (int i = 0; i < 5; i++) {
        cr_assert_eq(steps[i], want_loss[i]);
        cr_assert(isfinite(values[i]) && values[i] > 0);
    }
    cr_assert_eq(values[4], (float)tr.loss, "the last loss is replica 0's at the last step");
    /* ExamplesPerSecondHook: every 2 global steps, so every loop; the first
     * trigger (step 5) only records. */
    float rate[32], ex[32];
    int64_t rs[32], es[32];
    n = mtck_scalars(dir, "global_step/sec", rs, rate, 32);
    cr_assert_eq(n, 7, "%d rate events", n);
    cr_assert_eq(mtck_scalars(dir, "examples/sec", es, ex, 32), 7);
    for (int i = 0; i < 7; i++) {
        cr_assert_eq(rs[i], 10 + 5 * i);
        cr_assert_eq(es[i], rs[i]);
        cr_assert_leq(fabsf(ex[i] - 32 * rate[i]), 1e-3f * fabsf(ex[i]) + 1e-6f, "examples/sec = G * steps/sec");
    }
    /* host_call wrote through the estimator's writer at loop-local step 0. */
    n = mtck_scalars(dir, "custom/step", steps, values, 32);
    cr_assert_eq(n, 8);
    for (int i = 0; i < 8; i++)
        cr_assert_eq(steps[i], 1 + 5 * i);
    tl_estimator_destroy(est);
    tl_config_destroy(cfg);
    mtck_drop_dir(dir);
    tl_labeled_data_destroy(d);
}

static tl_status count_update(const tl_host_tensor *t, int n, void *user)
{
    (void)t;
    (void)n;
    (*(int *)user)++;
    return TL_OK;
}

static tl_status updates_result(tl_metric *out, int max, int *n_out, void *user)
{
    cr_assert_geq(max, 1);
    snprintf(out[0].name, sizeof out[0].name, "updates");
    out[0].value = *(int *)user;
    *n_out = 1;
    return TL_OK;
}

Test(mt_ckpt, evaluation_events_hold_every_metric_in_eval)
{
    tl_labeled_data *d = mtck_data(128, 2, 4);
    char md[300], *dir = mtck_model_dir(md, sizeof md);
    const char *argv[] = {"--iterations_per_loop=5", "--devices=2", "--train_batch_size=16", "--train_steps=15",
                          "--eval_batch_size=16", "--eval_steps=3", "--tf_random_seed=1", md};
    static mtck_model m = {16, 2};
    int updates = 0;
    tl_estimator_options o;
    tl_estimator_options_init(&o);
    o.model_fn = mtck_model_fn;
    o.user = &m;
    o.metric_update = count_update;
    o.metric_result = updates_result;
    o.metric_user = &updates;
    tl_config *cfg;
    tl_estimator *est = mtck_estimator(ARGC(argv), argv, &o, &cfg);
    tl_train_result tr;
    cr_assert_eq(tl_estimator_train(est, d, &tr), TL_OK, "%s", tl_last_error());
    tl_eval_result er;
    cr_assert_eq(tl_estimator_evaluate(est, d, &er), TL_OK, "%s", tl_last_error());
    cr_assert(er.has_auc);
    char *eval = mtck_join(dir, "eval");
    static const char *const tags[] = {"loss", "accuracy", "auc", "updates"};
    const double want[] = {er.loss, er.accuracy, er.auc, 3};
    for (int i = 0; i < 4; i++) {
        int64_t s[4];
        float v[4];
        cr_assert_eq(mtck_scalars(eval, tags[i], s, v, 4), 1, "eval/ has one %s", tags[i]);
        cr_assert_eq(s[0], 15, "at the evaluated global step");
        cr_assert_eq(v[0], (float)want[i], "%s", tags[i]);
    }
    int64_t s[4];
    float v[4];
    cr_assert_eq(mtck_scalars(dir, "accuracy", s, v, 4), 0, "evaluation writes into eval/ only");
    free(eval);
    tl_estimator_destroy(est);
    tl_config_destroy(cfg);
    mtck_drop_dir(dir);
    tl_labeled_data_destroy(d);
}

/* ---- warm start -------------------------------------------------------------- */

/* A copy of tensor name of the checkpoint at path (malloc'd; *n floats). */
static float *tensor_of(const char *path, const char *name, int64_t *n)
{
    tl_ckpt_reader *r;
    cr_assert_eq(tl_ckpt_open(path, 0, &r), TL_OK, "%s", tl_last_error());
    tl_ckpt_tensor_info t;
    cr_assert_eq(tl_ckpt_find(r, name, &t), TL_OK, "%s", tl_last_error());
    float *out = malloc(t.bytes);
    memcpy(out, t.data, t.bytes);
    *n = (int64_t)(t.bytes / sizeof(float));
    tl_ckpt_close(r);
    return out;
}

static bool same(const float *a, const float *b, int64_t n)
{
    return memcmp(a, b, (size_t)n * sizeof *a) == 0;
}

Test(mt_ckpt, warm_start_loads_only_the_matching_variables)
{
    tl_labeled_data *d = mtck_data(128, 4, 1);
    const char *base[] = {"--devices=1", "--train_batch_size=16", "--train_steps=20", "--tf_random_seed=1"};
    tl_train_result tr;
    char *src = train_in_new_dir(ARGC(base), base, d, &tr);
    char *src_ckpt = mtck_join(src, "model.ckpt-20.safetensors");
    /* A fresh run with another seed: its step-0 checkpoint is the fresh
     * initialisation. */
    const char *fresh_argv[] = {"--devices=1", "--train_batch_size=16", "--train_steps=1", "--tf_random_seed=2"};
    char *fresh = train_in_new_dir(ARGC(fresh_argv), fresh_argv, d, &tr);
    char *fresh0 = mtck_join(fresh, "model.ckpt-0.safetensors");

    char from_dir[300], from_file[400];
    snprintf(from_dir, sizeof from_dir, "--warm_start_from=%s", src);
    snprintf(from_file, sizeof from_file, "--warm_start_from=%s", src_ckpt);
    const char *froms[] = {from_dir, from_file};
    for (int k = 0; k < 2; k++) {
        const char *argv[] = {"--devices=1", "--train_batch_size=16", "--train_steps=1", "--tf_random_seed=2",
                              froms[k], "--warm_start_vars=dense/"};
        /* at WARN: `tpuloop train` shows warnings */
        mtck_log_start_at(TL_LOG_WARN);
        char *dir = train_in_new_dir(ARGC(argv), argv, d, &tr);
        mtck_log_stop();
        char want[600];
        snprintf(want, sizeof want, "Warm-started 2 of 4 variables from %s: dense/bias, dense/kernel", src_ckpt);
        cr_assert(mtck_log_has(want, NULL), "no '%s' logged at WARN", want);
        char *init = mtck_join(dir, "model.ckpt-0.safetensors");
        static const char *const names[] = {"dense/kernel", "dense/bias", "dense_1/kernel", "dense_1/bias"};
        for (int i = 0; i < 4; i++) {
            int64_t n1, n2, n3;
            float *got = tensor_of(init, names[i], &n1);
            float *trained = tensor_of(src_ckpt, names[i], &n2);
            float *fresh_v = tensor_of(fresh0, names[i], &n3);
            if (i < 2)
                cr_assert(same(got, trained, n1), "%s comes from warm_start_from", names[i]);
            else
                cr_assert(same(got, fresh_v, n1) && !same(got, trained, n1), "%s is freshly initialised",
                          names[i]);
            free(got);
            free(trained);
            free(fresh_v);
        }
        int64_t n;
        float *m = tensor_of(init, "dense/kernel/Adam", &n);
        for (int64_t i = 0; i < n; i++)
            cr_assert_eq(m[i], 0.0f, "slots are not warm-started");
        free(m);
        free(init);
        mtck_drop_dir(dir);
    }
    free(fresh0);
    mtck_drop_dir(fresh);

    /* A matching variable of another shape is an error naming it. */
    static mtck_model narrow = {8, 4};
    tl_estimator_options o;
    tl_estimator_options_init(&o);
    o.model_fn = mtck_model_fn;
    o.user = &narrow;
    const char *argv[] = {"--devices=1", "--train_batch_size=16", "--train_steps=1", from_file};
    tl_config *cfg;
    tl_estimator *est = mtck_estimator(ARGC(argv), argv, &o, &cfg);
    cr_assert_eq(tl_estimator_train(est, d, &tr), TL_EINVAL);
    char want[600];
    snprintf(want, sizeof want, "warm_start_from %s: variable 'dense/bias' has shape [16], the model needs [8]",
             src_ckpt);
    cr_assert_str_eq(tl_last_error(), want);
    tl_estimator_destroy(est);
    tl_config_destroy(cfg);
    free(src_ckpt);
    mtck_drop_dir(src);
    tl_labeled_data_destroy(d);
}

Test(mt_ckpt, warm_start_vars_must_be_a_supported_regex)
{
    /* The configuration refuses it when resolved, before any estimator. */
    const char *argv[] = {"--devices=1", "--train_batch_size=16", "--train_steps=1", "--warm_start_from=/nowhere",
                          "--warm_start_vars=(dense"};
    tl_config *cfg;
    cr_assert_eq(tl_config_create(&cfg), TL_OK);
    cr_assert_eq(tl_config_apply_args(cfg, ARGC(argv), (char *const *)argv, NULL, NULL), TL_OK);
    cr_assert_eq(tl_config_resolve(cfg), TL_EINVAL);
    cr_assert(strstr(tl_last_error(), "warm_start_vars '(dense' is not a supported regular expression") != NULL, "%s",
              tl_last_error());
    tl_config_destroy(cfg);
}

/* ---- one trainer per model_dir ---------------------------------------------- */

/* A second estimator training into a model_dir that another one trains
 * into is refused at its start, naming the holder; evaluation is not
 * (TensorFlow evaluates while it trains); once the first is destroyed the
 * second trains, resuming from the first one's checkpoint. */
Test(mt_ckpt, a_second_trainer_of_a_model_dir_is_refused_while_the_first_lives)
{
    tl_labeled_data *d = mtck_data(128, 4, 1);
    char md[300], *dir = mtck_model_dir(md, sizeof md);
    const char *argv[] = {"--iterations_per_loop=2", "--devices=1", "--train_batch_size=16", "--train_steps=4",
                          "--eval_batch_size=16", "--eval_steps=2", "--tf_random_seed=1", md};
    tl_config *cfg1, *cfg2;
    tl_estimator *first = mtck_estimator(ARGC(argv), argv, NULL, &cfg1);
    tl_estimator *second = mtck_estimator(ARGC(argv), argv, NULL, &cfg2);
    tl_train_result tr;
    cr_assert_eq(tl_estimator_train(first, d, &tr), TL_OK, "%s", tl_last_error());
    cr_assert_eq(tr.global_step, 4);
    /* still held after train returns: the estimator may train again */
    cr_assert_eq(tl_estimator_train(second, d, &tr), TL_EBUSY);
    char want[512];
    snprintf(want, sizeof want, "model_dir %s is in use by another trainer: pid %d (this process: another estimator)",
             dir, (int)getpid());
    cr_assert(strstr(tl_last_error(), want) != NULL, "%s", tl_last_error());
    cr_assert(strstr(tl_last_error(), ", started 20") != NULL, "%s", tl_last_error());
    cr_assert_eq(tl_estimator_global_step(second), 0, "a refused trainer restores nothing");
    int64_t steps[4];
    cr_assert_eq(mtck_steps(dir, steps, 4), 2, "and writes nothing");
    tl_eval_result er;
    cr_assert_eq(tl_estimator_restore(second, NULL), TL_OK, "%s", tl_last_error());
    cr_assert_eq(tl_estimator_evaluate(second, d, &er), TL_OK, "evaluation takes no lock: %s", tl_last_error());
    cr_assert_eq(er.global_step, 4);
    /* the first one trains on: it still holds the lock */
    cr_assert_eq(tl_estimator_train(first, d, &tr), TL_OK, "%s", tl_last_error());
    cr_assert_eq(tr.global_step, 8);
    tl_estimator_destroy(first);
    tl_config_destroy(cfg1);
    tl_estimator_destroy(second);
    tl_config_destroy(cfg2);
    /* released: a new estimator resumes at 8 */
    tl_estimator *third = mtck_estimator(ARGC(argv), argv, NULL, &cfg2);
    cr_assert_eq(tl_estimator_train(third, d, &tr), TL_OK, "%s", tl_last_error());
    cr_assert_eq(tr.global_step, 12);
    tl_estimator_destroy(third);
    tl_config_destroy(cfg2);
    mtck_drop_dir(dir);
    tl_labeled_data_destroy(d);
}

/* ---- SessionLogs: what TensorBoard needs to draw a resumed run once ------ */

/* A run that died after its checkpoint at 3 (its file of step 6 lost) left
 * losses at 4, 5 and 6; the run resumed from 3 writes them again. Every
 * train() writes START at the step after the one it starts from, every save
 * a CHECKPOINT with the save path, and TensorBoard, dropping at a START what
 * it read of the run at that step and after, draws each step once. */
Test(mt_ckpt, session_logs_let_tensorboard_drop_what_a_crashed_run_wrote_after_its_checkpoint)
{
    tl_labeled_data *d = mtck_data(128, 4, 1);
    char md[300], *dir = mtck_model_dir(md, sizeof md);
    const char *first[] = {"--iterations_per_loop=1", "--devices=1", "--train_batch_size=16", "--save_summary_steps=1",
                           "--save_checkpoints_steps=3", "--tf_random_seed=1", "--max_steps=6", md};
    tl_train_result tr;
    cr_assert_eq(mtck_train(ARGC(first), first, d, &tr, NULL), TL_OK, "%s", tl_last_error());
    char path[400];
    cr_assert_eq(tl_ckpt_path(dir, 6, path, sizeof path), TL_OK);
    cr_assert_eq(unlink(path), 0, "the crash: step 6's checkpoint never became durable");
    const char *second[] = {"--iterations_per_loop=1", "--devices=1", "--train_batch_size=16", "--save_summary_steps=1",
                            "--save_checkpoints_steps=3", "--tf_random_seed=1", "--max_steps=9", md};
    cr_assert_eq(mtck_train(ARGC(second), second, d, &tr, NULL), TL_OK, "%s", tl_last_error());
    cr_assert_eq(tr.global_step, 9);

    mtck_event ev[64];
    int n = mtck_events(dir, ev, 64);
    cr_assert_leq(n, 64);
    char save_path[400];
    snprintf(save_path, sizeof save_path, "%s/model.ckpt", dir);
    /* the SessionLogs, file by file */
    static const struct {
        int file, status;
        int64_t step;
    } logs[] = {
        {0, TL_SESSION_START, 1}, {0, TL_SESSION_CHECKPOINT, 0}, {0, TL_SESSION_CHECKPOINT, 3},
        {0, TL_SESSION_CHECKPOINT, 6}, {1, TL_SESSION_START, 4}, {1, TL_SESSION_CHECKPOINT, 3},
        {1, TL_SESSION_CHECKPOINT, 6}, {1, TL_SESSION_CHECKPOINT, 9},
    };
    size_t k = 0;
    int losses = 0;
    for (int i = 0; i < n; i++) {
        if (ev[i].status == 0) {
            losses++;
            continue;
        }
        cr_assert_lt(k, sizeof logs / sizeof logs[0], "an extra SessionLog: status %d at %lld", ev[i].status,
                     (long long)ev[i].step);
        cr_assert_eq(ev[i].file, logs[k].file, "SessionLog %zu", k);
        cr_assert_eq(ev[i].status, logs[k].status, "SessionLog %zu", k);
        cr_assert_eq(ev[i].step, logs[k].step, "SessionLog %zu", k);
        cr_assert_str_eq(ev[i].path, ev[i].status == TL_SESSION_CHECKPOINT ? save_path : "", "SessionLog %zu", k);
        k++;
    }
    cr_assert_eq(k, sizeof logs / sizeof logs[0], "SessionLogs missing");
    cr_assert_eq(losses, 12, "1..6 by the crashed run, 4..9 by the resumed one");
    /* TensorBoard's purge (event_accumulator: at a START, keep step < its) */
    int64_t kept[64];
    int nk = 0;
    for (int i = 0; i < n; i++) {
        if (ev[i].status == TL_SESSION_START)
            while (nk > 0 && kept[nk - 1] >= ev[i].step)
                nk--;
        else if (ev[i].status == 0)
            kept[nk++] = ev[i].step;
    }
    cr_assert_eq(nk, 9, "%d losses drawn", nk);
    for (int i = 0; i < nk; i++)
        cr_assert_eq(kept[i], i + 1, "drawn loss %d is at step %lld", i, (long long)kept[i]);
    mtck_drop_dir(dir);
    tl_labeled_data_destroy(d);
}

/* ---- the warm start's log ---------------------------------------------------- */

/* 12 dense layers "layer_with_a_rather_long_name_NN": 24 variables. */
static tl_status deep_model_fn(tl_graph *g, const tl_model_args *a, tl_model_spec *spec, void *user)
{
    (void)user;
    tl_t h = a->features;
    for (int i = 0; i < 12; i++) {
        char name[64];
        snprintf(name, sizeof name, "layer_with_a_rather_long_name_%02d", i);
        h = tl_dense(g, h, i == 11 ? 4 : 8, i == 11 ? TL_ACT_NONE : TL_ACT_RELU, name);
    }
    spec->loss = tl_mean(g, tl_softmax_xent(g, h, a->labels));
    spec->logits = h;
    return tl_graph_status(g);
}

/* The warm start says at WARN (what `tpuloop train` shows) how many of the
 * variables it loaded from which file, names as many as fit a line and
 * counts the rest; each at INFO as TensorFlow's "Warm-starting variable:";
 * and says so when warm_start_vars matched none. warm_start_from takes
 * TensorFlow's checkpoint prefix too. */
Test(mt_ckpt, warm_start_logs_what_it_loaded_from_where)
{
    tl_labeled_data *d = mtck_data(64, 4, 1);
    tl_estimator_options o;
    tl_estimator_options_init(&o);
    o.model_fn = deep_model_fn;
    char md[300], *src = mtck_model_dir(md, sizeof md);
    const char *base[] = {"--devices=1", "--train_batch_size=16", "--train_steps=2", "--tf_random_seed=1", md};
    tl_config *cfg;
    tl_estimator *est = mtck_estimator(ARGC(base), base, &o, &cfg);
    tl_train_result tr;
    cr_assert_eq(tl_estimator_train(est, d, &tr), TL_OK, "%s", tl_last_error());
    tl_estimator_destroy(est);
    tl_config_destroy(cfg);

    char from[400], file[400];
    snprintf(from, sizeof from, "--warm_start_from=%s/model.ckpt-2", src); /* the prefix */
    snprintf(file, sizeof file, "%s/model.ckpt-2.safetensors", src);
    const char *vars[] = {"--warm_start_vars=.*", "--warm_start_vars=nothing_matches"};
    for (int k = 0; k < 2; k++) {
        char *dir = mtck_model_dir(md, sizeof md);
        const char *argv[] = {"--devices=1", "--train_batch_size=16", "--train_steps=1", "--tf_random_seed=2", from,
                              vars[k], md};
        est = mtck_estimator(ARGC(argv), argv, &o, &cfg);
        mtck_log_start_at(k == 0 ? TL_LOG_INFO : TL_LOG_WARN);
        cr_assert_eq(tl_estimator_train(est, d, &tr), TL_OK, "%s", tl_last_error());
        mtck_log_stop();
        char want[700];
        if (k == 0) {
            snprintf(want, sizeof want, "Warm-started 24 of 24 variables from %s: layer_with_a_rather_long_name_00/bias, "
                                        "layer_with_a_rather_long_name_00/kernel, ", file);
            cr_assert(mtck_log_has(want, "layer_with_a_rather_long_name_07/bias, ... and 9 more"), "no '%s...' logged", want);
            cr_assert(mtck_log_has("Warm-starting variable: layer_with_a_rather_long_name_11/kernel; prev_var_name: "
                                   "Unchanged", NULL));
        } else {
            snprintf(want, sizeof want, "Warm-started 0 of 24 variables from %s: none matched warm_start_vars "
                                        "'nothing_matches'", file);
            cr_assert(mtck_log_has(want, NULL), "no '%s' logged at WARN", want);
        }
        tl_estimator_destroy(est);
        tl_config_destroy(cfg);
        mtck_drop_dir(dir);
    }
    mtck_drop_dir(src);
    tl_labeled_data_destroy(d);
}
