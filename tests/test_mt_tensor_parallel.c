/* Tensor parallelism through the job layer (issue 16): the configuration's
 * layout_map is Keras' ModelParallel over the mesh ("batch", "model") of
 * (replicas, num_cores_per_replica), and the estimator splits the variables
 * it names over each replica's cores (graph/partition.h). The built-in
 * Transformer with Megatron's layout (attention's query, key and value
 * column-split by heads, its output and the feed-forward's second kernel
 * row-split) trains to the parameters of one core per replica with the
 * same replica count, to float tolerance, at C = 2 and 4; with the same
 * bits for any iterations_per_loop; evaluates and predicts as one core
 * does; and its checkpoints, whole, move between core counts. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_mt_ckpt_util.h"
#include "tpuloop/tpuloop.h"

#define BATCH 8   /* per replica */
#define EVAL 32
#define CLASSES 11 /* the transformer's default: the vocabulary */

static const char MEGATRON[] =
    "--layout_map={\".*attention/(query|key|value)/kernel\": [null, \"model\"], "
    "\".*attention/(query|key|value)/bias\": [\"model\"], \".*attention/output/kernel\": [\"model\", null], "
    "\".*ffn/dense/kernel\": [null, \"model\"], \".*ffn/dense/bias\": [\"model\"], "
    "\".*ffn/dense_1/kernel\": [\"model\", null]}";

static const char *const NAMES[] = {"embedding/embeddings", "layer_0/attention/query/kernel",
                                    "layer_0/attention/output/kernel", "layer_1/ffn/dense/bias",
                                    "layer_1/ffn/dense_1/kernel", "logits/kernel"};
static const int64_t SIZES[] = {11 * 16, 16 * 16, 16 * 16, 30, 30 * 16, 16 * CLASSES};
#define NPARAMS (11 * 16 + 2 * 16 * 16 + 30 + 30 * 16 + 16 * CLASSES)

typedef struct run {
    char digest[65];
    float loss, eval_loss;
    float params[NPARAMS]; /* NAMES' variables, one after the other */
    float pred[EVAL * CLASSES];
    int64_t steps;         /* device loops run */
} run;

/* The job's configuration: the Transformer on synthetic sequences at
 * devices, cores per replica (0: unset) and the extra flags. */
static tl_config *config(int devices, int cores, const char *ipl, int nextra, const char *const *extra)
{
    tl_config *cfg;
    cr_assert_eq(tl_config_create(&cfg), TL_OK);
    char dev[48], ncpr[48], bs[48], ipl_flag[48];
    snprintf(dev, sizeof dev, "--devices=%d", devices);
    snprintf(ncpr, sizeof ncpr, "--num_cores_per_replica=%d", cores);
    snprintf(bs, sizeof bs, "--train_batch_size=%d", BATCH * devices / (cores > 0 ? cores : 1));
    snprintf(ipl_flag, sizeof ipl_flag, "--iterations_per_loop=%s", ipl);
    const char *argv[32] = {dev, bs, ipl_flag, "--max_steps=6", "--tf_random_seed=7", "--model_name=transformer",
                            "--dataset=synthetic_sequences", "--synthetic_sequence_length=6",
                            "--synthetic_vocab=11", "--synthetic_examples=128", "--synthetic_eval_examples=32",
                            "--eval_batch_size=16", "--eval_steps=2", "--predict_batch_size=16",
                            "--per_host_input_for_training=PER_HOST_V2", "--save_checkpoints_steps=3",
                            "--params={\"d_model\": 16, \"num_heads\": 4, \"num_layers\": 2, \"d_ff\": 30}"};
    int argc = 17;
    if (cores > 0)
        argv[argc++] = ncpr;
    for (int k = 0; k < nextra; k++)
        argv[argc++] = extra[k];
    cr_assert_eq(tl_config_apply_args(cfg, argc, (char **)argv, NULL, NULL), TL_OK, "%s", tl_last_error());
    cr_assert_eq(tl_config_resolve(cfg), TL_OK, "%s", tl_last_error());
    return cfg;
}

/* Trains, evaluates and predicts through the job. */
static void job_run(int devices, int cores, const char *ipl, int nextra, const char *const *extra, run *out)
{
    tl_config *cfg = config(devices, cores, ipl, nextra, extra);
    tl_job *job;
    tl_job_options jo;
    tl_job_options_init(&jo);
    jo.train = true;
    cr_assert_eq(tl_job_create(cfg, &jo, &job), TL_OK, "%s", tl_last_error());
    tl_job_train_result tr;
    cr_assert_eq(tl_job_train(job, &tr), TL_OK, "%s", tl_last_error());
    cr_assert_eq(tr.train.global_step, 6);
    out->loss = (float)tr.train.loss;
    out->steps = tr.train.loops; /* 0 when restored at the last step */
    cr_assert_eq(tl_job_params_digest(job, out->digest), TL_OK);
    float *at = out->params;
    for (size_t k = 0; k < sizeof NAMES / sizeof NAMES[0]; k++) {
        cr_assert_eq(tl_estimator_variable_value(tl_job_estimator(job), NAMES[k], at, SIZES[k]), TL_OK, "%s",
                     tl_last_error());
        at += SIZES[k];
    }
    tl_job_evaluation ev;
    cr_assert_eq(tl_job_evaluate(job, NULL, &ev), TL_OK, "%s", tl_last_error());
    out->eval_loss = (float)ev.result.loss;
    tl_predict_result pr;
    cr_assert_eq(tl_job_predict(job, NULL, &pr), TL_OK, "%s", tl_last_error());
    cr_assert_eq(pr.num_examples, EVAL);
    cr_assert_eq(pr.width, CLASSES);
    memcpy(out->pred, pr.values, sizeof out->pred);
    tl_predict_result_free(&pr);
    tl_job_destroy(job);
    tl_config_destroy(cfg);
}

static void close_to(float a, float b, const char *what, const char *kind, int k)
{
    cr_assert(fabsf(a - b) <= 1e-4f * (1 + fabsf(b)), "%s: %s %d is %.7g, one core %.7g", what, kind, k, (double)a,
              (double)b);
}

static void assert_close(const run *a, const run *b, const char *what)
{
    if (a->steps > 0 && b->steps > 0)
        close_to(a->loss, b->loss, what, "the loss", 0);
    close_to(a->eval_loss, b->eval_loss, what, "the evaluation loss", 0);
    for (int k = 0; k < EVAL * CLASSES; k++)
        close_to(a->pred[k], b->pred[k], what, "prediction", k);
    for (int k = 0; k < NPARAMS; k++)
        close_to(a->params[k], b->params[k], what, "parameter", k);
}

Test(mt_tensor_parallel, cores_splitting_the_variables_train_as_one_core)
{
    static run one, two, four; /* (static: a run is 4 KiB of predictions) */
    const char *const tp[] = {MEGATRON};
    job_run(1, 0, "2", 0, NULL, &one);
    job_run(2, 2, "2", 1, tp, &two);
    assert_close(&two, &one, "2 cores");
    job_run(4, 4, "2", 1, tp, &four);
    assert_close(&four, &one, "4 cores");
}

Test(mt_tensor_parallel, replicas_of_several_cores_train_as_replicas_of_one)
{
    static run one, two;
    const char *const tp[] = {MEGATRON};
    job_run(2, 0, "2", 0, NULL, &one);
    job_run(4, 2, "2", 1, tp, &two);
    assert_close(&two, &one, "2 replicas of 2 cores");
}

Test(mt_tensor_parallel, same_bits_for_any_iterations_per_loop)
{
    static run a, b, c;
    const char *const tp[] = {MEGATRON};
    job_run(2, 2, "1", 1, tp, &a);
    job_run(2, 2, "4", 1, tp, &b);
    job_run(2, 2, "6", 1, tp, &c);
    cr_assert_str_eq(a.digest, b.digest);
    cr_assert_str_eq(a.digest, c.digest);
}

/* Variables are saved whole: C = 4's checkpoint restores at C = 1 and 2
 * (which find every step done and train none). */
Test(mt_tensor_parallel, a_checkpoint_moves_between_core_counts)
{
    char flag[512];
    char *dir = mtck_model_dir(flag, sizeof flag);
    static run four, one, two;
    const char *const tp[] = {MEGATRON, flag}, *const plain[] = {flag};
    job_run(4, 4, "2", 2, tp, &four);
    job_run(1, 0, "2", 1, plain, &one);
    job_run(2, 2, "2", 2, tp, &two);
    cr_assert_str_eq(one.digest, four.digest, "restored at C = 1");
    cr_assert_str_eq(two.digest, four.digest, "restored at C = 2");
    cr_assert(one.steps == 0 && two.steps == 0, "every step was done: none trained");
    assert_close(&one, &four, "C = 1 evaluating C = 4's checkpoint");
    assert_close(&two, &four, "C = 2 evaluating C = 4's checkpoint");
    mtck_drop_dir(dir);
}

/* Creating the job, or its first training (where the variables meet
 * their layouts), fails, naming what. */
static void refused(int nflags, const char *const *flags, const char *fragment)
{
    tl_config *cfg = config(2, 2, "2", nflags, flags);
    tl_job *job = NULL;
    tl_job_options jo;
    tl_job_options_init(&jo);
    jo.train = true;
    tl_status st = tl_job_create(cfg, &jo, &job);
    if (st == TL_OK) {
        tl_job_train_result tr;
        st = tl_job_train(job, &tr);
        tl_job_destroy(job);
    }
    cr_assert_eq(st, TL_EINVAL, "%s", nflags > 0 ? flags[0] : "no flag");
    cr_assert(strstr(tl_last_error(), fragment) != NULL, "%s", tl_last_error());
    tl_config_destroy(cfg);
}

static void refused1(const char *flag, const char *fragment)
{
    refused(1, &flag, fragment);
}

Test(mt_tensor_parallel, a_layout_that_cannot_split_is_refused_by_name)
{
    refused1("--layout_map={\"logits/kernel\": [\"batch\", null]}",
             "variable logits/kernel's layout puts dimension 0 on the mesh axis 'batch'");
    refused1("--layout_map={\"logits/kernel\": [\"model\", \"model\"]}", "splits dimensions 0 and 1 over 'model'");
    refused1("--layout_map={\"logits/kernel\": [null, null, \"model\"]}",
             "variable logits/kernel has 2 dimensions; its layout has 3 entries");
    refused1("--layout_map={\"logits/kernel\": [null, \"seq\"]}", "seq");
    refused1("--layout_map={\"(logits\": [null, \"model\"]}", "layout_map['(logits']");
    refused(0, NULL, "neither is given");
    const char *both[] = {MEGATRON, "--input_partition_dims=[[1, 2, 1], null]"};
    refused(2, both, "with both input_partition_dims and ModelParallel layouts");
}

/* The estimator's own check of a ModelParallel given through the C API
 * (tl_estimator_options.distribution): its mesh must be the replicas along
 * the batch axis and the cores of a replica along one other. */
static void mesh_refused(int devices, int cores, const int64_t *shape, int ndim, const char *const *names,
                         int nids, const char *fragment)
{
    tl_devices *devs;
    cr_assert_eq(tl_devices_create(devices, 1, 0, &devs), TL_OK);
    int ids[8] = {0, 1, 2, 3, 4, 5, 6, 7};
    tl_mesh *mesh;
    cr_assert_eq(tl_mesh_create(devs, shape, ndim, names, ndim, ids, nids, &mesh), TL_OK, "%s", tl_last_error());
    tl_layout_map *map;
    cr_assert_eq(tl_layout_map_create(mesh, TL_MATCH_FULL, &map), TL_OK);
    tl_model_parallel_options mo;
    tl_model_parallel_options_init(&mo);
    mo.layout_map = map;
    mo.batch_dim_name = "batch";
    tl_distribution *d;
    cr_assert_eq(tl_model_parallel_create(&mo, &d), TL_OK, "%s", tl_last_error());
    tl_config *cfg = config(devices, cores, "2", 0, NULL);
    tl_estimator_options o;
    tl_estimator_options_init(&o);
    o.model_fn = tl_model_transformer;
    o.distribution = d;
    tl_estimator *est = NULL;
    cr_assert_eq(tl_estimator_create(cfg, &o, &est), TL_EINVAL);
    cr_assert(strstr(tl_last_error(), fragment) != NULL, "%s", tl_last_error());
    tl_config_destroy(cfg);
    tl_distribution_destroy(d);
    tl_layout_map_destroy(map);
    tl_mesh_destroy(mesh);
    tl_devices_destroy(devs);
}

Test(mt_tensor_parallel, a_mesh_that_is_not_replicas_by_cores_is_refused)
{
    static const char *const bm[] = {"batch", "model"}, *const dm[] = {"data", "model"};
    static const char *const three[] = {"batch", "seq", "model"};
    mesh_refused(2, 2, (int64_t[]){1, 2}, 2, dm, 2, "batch axis 'batch' must be a mesh axis of the 1 replicas");
    mesh_refused(2, 2, (int64_t[]){2, 1}, 2, bm, 2, "batch axis 'batch' must be a mesh axis of the 1 replicas");
    mesh_refused(2, 2, (int64_t[]){1, 1, 2}, 3, three, 2, "mesh must have two axes");
    mesh_refused(8, 4, (int64_t[]){2, 2}, 2, bm, 4,
                 "model axis 'model' must have num_cores_per_replica (4) devices; the mesh is <DeviceMesh");
}
