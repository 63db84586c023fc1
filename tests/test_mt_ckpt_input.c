/* The input datasets' positions in checkpoints: a TFRecord input shuffled
 * through a buffer of 100 000 examples is saved (its position, buffer
 * included, a U8 tensor of the checkpoint, so the header stays small) and
 * resumed bit-exactly; checkpoints of earlier versions still restore (the
 * positions as a metadata key; the datasets' states in format
 * tpuloop.dataset/1); damaged positions are refused by name; the variable
 * checks ignore the tensor. Example k of the files has features
 * x = (k % 97, k % 13, ..., 1) and label k % 4. */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/tfrecord.h"
#include "test_mt_ckpt_util.h"
#include "tpuloop/dataset.h"
#include "tpuloop/example.h"

#define ARGC(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* Writes examples [0, n) to path. */
static void write_examples(const char *path, int64_t n)
{
    tl_tfrecord_writer *w;
    cr_assert_eq(tl_tfrecord_writer_open(path, O_CREAT | O_TRUNC, &w), TL_OK, "%s", tl_last_error());
    tl_example_builder *b;
    cr_assert_eq(tl_example_builder_create(&b), TL_OK);
    for (int64_t k = 0; k < n; k++) {
        float x[MTCK_FEATURES];
        for (int j = 0; j < MTCK_FEATURES; j++)
            x[j] = j == MTCK_FEATURES - 1 ? 1.0f : (float)(k % (97 - 7 * j)) / 50.0f;
        int64_t label = k % 4;
        tl_example_builder_reset(b);
        cr_assert_eq(tl_example_builder_add_floats(b, "x", x, MTCK_FEATURES), TL_OK);
        cr_assert_eq(tl_example_builder_add_int64s(b, "label", &label, 1), TL_OK);
        const uint8_t *data;
        size_t len;
        cr_assert_eq(tl_example_builder_serialize(b, &data, &len), TL_OK);
        cr_assert_eq(tl_tfrecord_write(w, data, len), TL_OK);
    }
    tl_example_builder_destroy(b);
    cr_assert_eq(tl_tfrecord_writer_destroy(w), TL_OK);
}

typedef struct input {
    const char *file;
    int64_t shuffle; /* buffer */
} input;

static const tl_feature_spec specs[2] = {
    {.key = "x", .type = TL_SPEC_FIXED_LEN, .dtype = TL_FEATURE_FLOAT, .rank = 1, .shape = {MTCK_FEATURES}},
    {.key = "label", .type = TL_SPEC_FIXED_LEN, .dtype = TL_FEATURE_INT64},
};

/* files -> parse -> shuffle(buffer) -> repeat -> batch */
static tl_status input_fn(const tl_input_context *ctx, void *user, tl_dataset **out)
{
    const input *in = user;
    tl_dataset *ds;
    tl_status st = tl_dataset_tfrecord(&in->file, 1, NULL, &ds);
    if (st == TL_OK)
        st = tl_dataset_parse_example(ds, specs, 2, NULL, &ds);
    if (st == TL_OK)
        st = tl_dataset_shuffle(ds, in->shuffle, 11, true, &ds);
    if (st == TL_OK)
        st = tl_dataset_repeat(ds, -1, &ds);
    if (st == TL_OK)
        st = tl_dataset_batch(ds, ctx->batch_size, true, &ds);
    *out = st == TL_OK ? ds : NULL;
    return st;
}

/* A test's files: under a new directory tmp, the TFRecord file of
 * examples [0, n) and the path of a model_dir, "m". */
typedef struct files {
    char *tmp, *file, *dir;
} files;

static files files_make(int64_t n)
{
    files f = {.tmp = mtck_tmpdir()};
    f.file = mtck_join(f.tmp, "train.tfrecord");
    f.dir = mtck_join(f.tmp, "m");
    write_examples(f.file, n);
    return f;
}

static void files_drop(files *f)
{
    mtck_rmtree(f->tmp);
    free(f->dir);
    free(f->file);
    free(f->tmp);
}

/* An estimator from the n flags plus --model_dir=dir unless dir is NULL,
 * with options o (NULL: mtck_estimator's). */
static tl_estimator *make_est(const char *dir, const char *const *flags, int n, const tl_estimator_options *o,
                              tl_config **cfg)
{
    char md[512];
    snprintf(md, sizeof md, "--model_dir=%s", dir ? dir : "");
    const char *argv[16];
    cr_assert_lt(n, 16);
    memcpy(argv, flags, (size_t)n * sizeof *flags);
    argv[n] = md;
    return mtck_estimator(n + (dir != NULL), argv, o, cfg);
}

/* Trains est from in's input_fn, x the features: the status. */
static tl_status train_input(tl_estimator *est, input *in, tl_train_result *tr)
{
    static const char *const keys[] = {"x"};
    tl_input inp = {.input_fn = input_fn, .user = in, .feature_keys = keys, .num_feature_keys = 1};
    return tl_estimator_train_input(est, &inp, tr);
}

/* Trains with steps_flag (and --model_dir=dir unless dir is NULL) on in,
 * saving every 3 steps: the status; after TL_OK *step (may be NULL) is the
 * global step and digest (may be NULL) the params_digest. */
static tl_status try_train(const char *dir, const char *steps_flag, input *in, int64_t *step, char digest[65])
{
    const char *flags[] = {"--devices=2", "--train_batch_size=32", "--iterations_per_loop=3",
                           "--save_checkpoints_steps=3", "--tf_random_seed=5", steps_flag};
    tl_config *cfg;
    tl_estimator *est = make_est(dir, flags, ARGC(flags), NULL, &cfg);
    tl_train_result tr;
    tl_status st = train_input(est, in, &tr);
    if (st == TL_OK && step != NULL)
        *step = tr.global_step;
    if (st == TL_OK && digest != NULL)
        cr_assert_eq(tl_estimator_params_digest(est, digest), TL_OK);
    tl_estimator_destroy(est);
    tl_config_destroy(cfg);
    return st;
}

/* try_train, which must reach want_step. */
static void train(const char *dir, const char *steps_flag, input *in, int64_t want_step, char digest[65])
{
    int64_t step;
    cr_assert_eq(try_train(dir, steps_flag, in, &step, digest), TL_OK, "%s", tl_last_error());
    cr_assert_eq(step, want_step);
}

/* The length of the header of the safetensors file at path. */
static uint64_t header_bytes(const char *path)
{
    FILE *f = fopen(path, "rb");
    cr_assert_not_null(f, "%s", path);
    unsigned char b[8];
    cr_assert_eq(fread(b, 1, 8, f), 8u);
    fclose(f);
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--)
        n = n << 8 | b[i];
    return n;
}

/* A host_call that asks its estimator to stop once step stop_at has run. */
typedef struct stopper {
    tl_estimator *est;
    int64_t stop_at;
} stopper;

static tl_status stop_at(int64_t global_step, const tl_host_tensor *t, int n, void *user)
{
    (void)t;
    (void)n;
    stopper *s = user;
    if (global_step == s->stop_at)
        tl_estimator_request_stop(s->est);
    return TL_OK;
}

/* Trains on in to max_steps 8 in loops of 4 with no checkpoint hook: with
 * stop_step > 0 a stop is requested there, so the one checkpoint is the
 * graceful-shutdown save. Each run fills the 100k-element buffer from the
 * file; saving and restoring it costs about what its bytes cost. */
static void train_big(const char *dir, input *in, int64_t stop_step, int64_t want_step, char digest[65])
{
    const char *flags[] = {"--devices=2", "--train_batch_size=32", "--iterations_per_loop=4", "--max_steps=8",
                           "--save_checkpoints_steps=null", "--save_checkpoints_secs=null", "--tf_random_seed=5"};
    static mtck_model model = {16, 4};
    stopper s = {NULL, stop_step};
    tl_estimator_options o;
    tl_estimator_options_init(&o);
    o.model_fn = mtck_model_fn;
    o.user = &model;
    o.optimizer.lr.learning_rate = 0.01;
    o.host_call = stop_at;
    o.host_call_user = &s;
    tl_config *cfg;
    tl_estimator *est = make_est(dir, flags, ARGC(flags), &o, &cfg);
    s.est = est;
    tl_train_result tr;
    cr_assert_eq(train_input(est, in, &tr), TL_OK, "%s", tl_last_error());
    cr_assert_eq(tr.global_step, want_step);
    cr_assert_eq(tr.stopped, stop_step > 0);
    cr_assert_eq(tl_estimator_params_digest(est, digest), TL_OK);
    tl_estimator_destroy(est);
    tl_config_destroy(cfg);
}

Test(mt_ckpt_input, a_shuffle_buffer_of_100k_examples_resumes_exactly_with_a_small_header)
{
    files f = files_make(100100); /* more than the buffer: it is full when saved */
    input in = {f.file, 100000};
    char whole[65], split[65];
    train_big(NULL, &in, 0, 8, whole);
    const char *dir = f.dir;
    train_big(dir, &in, 4, 4, split);
    /* The checkpoint holds the full buffer, as a tensor. */
    int64_t steps[4];
    cr_assert_eq(mtck_steps(dir, steps, 4), 1);
    cr_assert_eq(steps[0], 4);
    char path[600];
    cr_assert_eq(tl_ckpt_path(dir, 4, path, sizeof path), TL_OK);
    cr_assert_lt(header_bytes(path), 64u * 1024, "a %llu-byte header", (unsigned long long)header_bytes(path));
    tl_ckpt_reader *r;
    cr_assert_eq(tl_ckpt_open(path, 0, &r), TL_OK, "%s", tl_last_error());
    tl_ckpt_tensor_info t;
    cr_assert_eq(tl_ckpt_find(r, "input_datasets", &t), TL_OK, "%s", tl_last_error());
    cr_assert_eq(t.dtype, TL_CKPT_U8);
    cr_assert_eq(t.rank, 1);
    /* 100 000 buffered examples of 12 floats and a label, as base64 */
    cr_assert_gt(t.bytes, 100000u * (MTCK_FEATURES * 4 + 8), "%llu bytes", (unsigned long long)t.bytes);
    cr_assert_eq(((const char *)t.data)[0], '[', "the positions are a JSON array");
    cr_assert_eq(((const char *)t.data)[t.bytes - 1], ']');
    cr_assert_null(tl_ckpt_meta(r, "input_datasets"), "no longer in the header");
    tl_ckpt_close(r);
    /* and the resumed run reads exactly what the uninterrupted one read */
    train_big(dir, &in, 0, 8, split);
    cr_assert_str_eq(split, whole, "resumed from a 100k-example shuffle buffer: other bits");
    files_drop(&f);
}

/* Rewrites the checkpoint at path with the positions text (NULL: its own)
 * as the "input_datasets" tensor or, with in_metadata, as the previous
 * version wrote them: the metadata key of that name. */
static void rewrite_positions(const char *path, const char *text, bool in_metadata)
{
    tl_ckpt_reader *r;
    cr_assert_eq(tl_ckpt_open(path, 0, &r), TL_OK, "%s", tl_last_error());
    tl_ckpt_writer *w;
    cr_assert_eq(tl_ckpt_writer_create(&w), TL_OK);
    char *positions = NULL;
    for (int i = 0; i < tl_ckpt_num_tensors(r); i++) {
        tl_ckpt_tensor_info t;
        cr_assert_eq(tl_ckpt_tensor(r, i, &t), TL_OK);
        if (strcmp(t.name, "input_datasets") == 0) {
            positions = text != NULL ? strdup(text) : strndup(t.data, (size_t)t.bytes);
            continue;
        }
        cr_assert_eq(tl_ckpt_writer_add(w, t.name, t.dtype, t.shape, t.rank, t.data), TL_OK, "%s", tl_last_error());
    }
    cr_assert_not_null(positions, "the checkpoint has no input_datasets tensor");
    static const char *const own[] = {"format", "format_version", "crc32c", "header_crc32c"};
    for (int i = 0; i < tl_ckpt_num_meta(r); i++) {
        const char *k, *v;
        tl_ckpt_meta_at(r, i, &k, &v);
        bool skip = false;
        for (size_t j = 0; j < sizeof own / sizeof own[0]; j++)
            skip = skip || strcmp(k, own[j]) == 0;
        if (!skip)
            cr_assert_eq(tl_ckpt_writer_set_meta(w, k, v), TL_OK);
    }
    int64_t len = (int64_t)strlen(positions);
    if (in_metadata)
        cr_assert_eq(tl_ckpt_writer_set_meta(w, "input_datasets", positions), TL_OK);
    else
        cr_assert_eq(tl_ckpt_writer_add(w, "input_datasets", TL_CKPT_U8, &len, 1, positions), TL_OK);
    char copy[700];
    snprintf(copy, sizeof copy, "%s.old", path);
    cr_assert_eq(tl_ckpt_writer_write(w, copy), TL_OK, "%s", tl_last_error());
    tl_ckpt_writer_destroy(w);
    tl_ckpt_close(r);
    cr_assert_eq(rename(copy, path), 0);
    free(positions);
}

/* Trains 12 steps on 500 examples shuffled through buffer, then 6 into a
 * model_dir, whose checkpoint (at path; the examples' file is file) edit
 * changes, then on to 12 from it, its log caught (mtck_log_has): the same
 * bits as the 12 uninterrupted steps, or the test fails with message what. */
static void resume_edited(int64_t buffer, void (*edit)(const char *path, const char *file), const char *what)
{
    files f = files_make(500);
    input in = {f.file, buffer};
    char whole[65], split[65];
    train(NULL, "--max_steps=12", &in, 12, whole);
    train(f.dir, "--max_steps=6", &in, 6, split);
    char path[600];
    cr_assert_eq(tl_ckpt_path(f.dir, 6, path, sizeof path), TL_OK);
    edit(path, f.file);
    mtck_log_start();
    train(f.dir, "--max_steps=12", &in, 12, split);
    mtck_log_stop();
    cr_assert_str_eq(split, whole, "%s", what);
    files_drop(&f);
}

/* The positions as the previous version wrote them: a metadata key. */
static void to_previous_format(const char *path, const char *file)
{
    (void)file;
    rewrite_positions(path, NULL, true);
    tl_ckpt_reader *r;
    cr_assert_eq(tl_ckpt_open(path, 0, &r), TL_OK, "%s", tl_last_error());
    tl_ckpt_tensor_info t;
    cr_assert_neq(tl_ckpt_find(r, "input_datasets", &t), TL_OK);
    cr_assert_not_null(tl_ckpt_meta(r, "input_datasets"));
    tl_ckpt_close(r);
}

Test(mt_ckpt_input, a_checkpoint_of_the_previous_format_restores_its_positions)
{
    resume_edited(200, to_previous_format, "resumed from a checkpoint of the previous format: other bits");
    cr_assert_not(mtck_log_has("holds no input dataset positions", NULL), "the metadata key was not read");
}

/* tests/data/dataset_state_v1/estimator_input_datasets_step_6.json is the
 * "input_datasets" tpuloop wrote (commit 9150d45, the datasets' states in
 * format tpuloop.dataset/1, elements as JSON) at step 6 of train() on 500
 * examples shuffled through a buffer of 3, the file's path replaced by
 * @FILE@. */
static void to_format_1(const char *path, const char *file)
{
    char *v1 = mtck_read_replacing("tests/data/dataset_state_v1/estimator_input_datasets_step_6.json", "@FILE@",
                                   file);
    cr_assert(strstr(v1, "\"format\":\"tpuloop.dataset/1\"") != NULL);
    rewrite_positions(path, v1, false);
    free(v1);
}

/* In place of this version's positions, format 1's resume the same. */
Test(mt_ckpt_input, positions_of_dataset_state_format_1_restore)
{
    resume_edited(3, to_format_1, "resumed from format-1 positions: other bits");
}

/* Positions that are not a JSON array of one state per input_fn invocation
 * fail the restore with a message that says what is wrong. */
Test(mt_ckpt_input, damaged_positions_are_refused)
{
    files f = files_make(300);
    input in = {f.file, 20};
    char digest[65];
    const char *dir = f.dir;
    train(dir, "--max_steps=6", &in, 6, digest);
    char path[600];
    cr_assert_eq(tl_ckpt_path(dir, 6, path, sizeof path), TL_OK);
    tl_ckpt_reader *r;
    cr_assert_eq(tl_ckpt_open(path, 0, &r), TL_OK, "%s", tl_last_error());
    tl_ckpt_tensor_info t;
    cr_assert_eq(tl_ckpt_find(r, "input_datasets", &t), TL_OK);
    char *own = strndup(t.data, (size_t)t.bytes);
    tl_ckpt_close(r);
    size_t n = strlen(own);
    cr_assert(n > 2 && own[0] == '[' && own[n - 1] == ']');
    /* the one state twice: "[S,S]" */
    char *twice = malloc(2 * n);
    snprintf(twice, 2 * n, "%.*s,%s", (int)(n - 1), own, own + 1);
    static const struct {
        const char *text;
        tl_status st;
        const char *frag;
    } cases[] = {
        {"{}", TL_EPARSE, "input_datasets is not a JSON array: it does not start with '['"},
        {"[{\"format\": \"tpuloop.dataset/2\"", TL_EPARSE, "the text ends inside an element"},
        {"[{} {}]", TL_EPARSE, "elements are not separated by ','"},
        {"[{}] x", TL_EPARSE, "text follows the array"},
        {"[]", TL_EINVAL, "holds the positions of 0 input datasets; this input plan has 1 invocations"},
        {"[{\"format\": 1}]", TL_EINVAL, "restoring input dataset 0: tl_dataset_restore: not a saved dataset state"},
        {NULL, TL_EINVAL, "holds the positions of 2 input datasets; this input plan has 1 invocations"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        rewrite_positions(path, cases[c].text != NULL ? cases[c].text : twice, false);
        tl_status st = try_train(dir, "--max_steps=12", &in, NULL, NULL);
        cr_assert_eq(st, cases[c].st, "case %zu: %s", c, tl_last_error());
        cr_assert(strstr(tl_last_error(), cases[c].frag) != NULL, "case %zu: \"%s\" lacks \"%s\"", c,
                  tl_last_error(), cases[c].frag);
    }
    /* and its own positions still resume */
    rewrite_positions(path, own, false);
    cr_assert_eq(try_train(dir, "--max_steps=12", &in, NULL, NULL), TL_OK, "%s", tl_last_error());
    free(twice);
    free(own);
    files_drop(&f);
}

/* The positions are not a variable: evaluation and a restore with
 * in-memory data load such a checkpoint (the variables are the check). */
Test(mt_ckpt_input, the_variable_checks_ignore_the_positions_tensor)
{
    files f = files_make(300);
    input in = {f.file, 50};
    char digest[65], restored[65];
    train(f.dir, "--max_steps=3", &in, 3, digest);
    const char *flags[] = {"--devices=2", "--train_batch_size=32", "--eval_batch_size=32", "--eval_steps=2",
                           "--tf_random_seed=5"};
    tl_config *cfg;
    tl_estimator *est = make_est(f.dir, flags, ARGC(flags), NULL, &cfg);
    cr_assert_eq(tl_estimator_restore(est, NULL), TL_OK, "%s", tl_last_error());
    tl_labeled_data *d = mtck_data(64, 4, 1);
    tl_eval_result er;
    cr_assert_eq(tl_estimator_evaluate(est, d, &er), TL_OK, "%s", tl_last_error());
    cr_assert_eq(er.global_step, 3);
    cr_assert_eq(tl_estimator_params_digest(est, restored), TL_OK);
    cr_assert_str_eq(restored, digest);
    tl_estimator_destroy(est);
    tl_config_destroy(cfg);
    tl_labeled_data_destroy(d);
    files_drop(&f);
}
