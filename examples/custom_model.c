/*
 * custom_model.c — a model of your own, written in C against the public API
 * only, trained by the estimator and evaluated: an MLP-Mixer (Tolstikhin et
 * al., 2021) that reads a 28 x 28 Fashion-MNIST image as 28 tokens, its rows.
 *
 *     build/examples/custom_model                                  # Fashion-MNIST, 2 epochs
 *     build/examples/custom_model --dataset=synthetic --train_steps=50 --synthetic_examples=4096
 *     build/examples/custom_model --train_steps=3000 --learning_rate=0.002 --devices=4
 *
 * Every option of `tpuloop help options` is a flag here: the program's own
 * defaults come in as a configuration file would (DEFAULTS below), then
 * the flags, then TensorFlow's checks (tl_config_resolve). The input
 * section's dataset (fashion_mnist or synthetic), the model section's
 * optimizer, learning_rate and dropout apply; its model_name and
 * hidden_units are the built-in MLP's and play no part.
 *
 * The model uses ops of several families of tpuloop/graph.h (the README's
 * "Ops" lists them all):
 *
 *     x (batch, 28, 28) -> linear  -> (batch, 28, 64)                   the rows as tokens
 *     2 x mixer block:
 *       x += transpose(linear(gelu(linear(transpose(layer_norm(x))))))   mixes the tokens
 *       x += linear(dropout(gelu(linear(layer_norm(x)))))                mixes the channels
 *     layer_norm -> reduce_mean over the tokens -> dense -> logits (batch, 10)
 *     loss: mean of sparse softmax cross-entropy, labels smoothed by 0.1
 *
 * gelu is the tanh form, jax.nn.gelu's default, which the paper's code used.
 *
 * It prints a line at every logging step and ends with the evaluation; by
 * default (2 epochs of batch 128, 936 steps, 70 CPU-seconds on 2 cores here):
 *     accuracy 0.8637 on 10000 test examples (loss 0.8055) after 936 steps
 * (the loss includes the label smoothing, whose floor here is about 0.5).
 *
 * Build it as the Makefile does (public headers and libtpuloop.a), or
 * against an installed tpuloop:
 *     cc -std=c11 -O2 custom_model.c $(pkg-config --cflags --libs tpuloop) -o custom_model
 */
#include <stdio.h>
#include <string.h>

#include <tpuloop/tpuloop.h>

#define TOKENS 28          /* an image's rows */
#define CHANNELS 64
#define TOKEN_HIDDEN 64
#define CHANNEL_HIDDEN 128
#define BLOCKS 2
#define CLASSES 10

static const char DEFAULTS[] =
    "{\"train_batch_size\": 128, \"eval_batch_size\": 500, \"eval_steps\": 20, \"tf_random_seed\": 42,"
    " \"log_step_count_steps\": 100, \"tpu_config\": {\"iterations_per_loop\": 100},"
    " \"model\": {\"optimizer\": \"adam\", \"learning_rate\": 0.001, \"dropout\": 0.1},"
    " \"input\": {\"dataset\": \"fashion_mnist\", \"epochs\": 2}}";

/* Keras' Dense on the last axis of x (..., in), any rank: x·kernel + bias,
 * with variables "<scope>/<name>/kernel" (in, out), Glorot-uniform, and
 * "<scope>/<name>/bias" (out,), zeros. The kernel broadcasts over x's
 * leading dimensions (tl_batch_matmul), the bias over every row (tl_add). */
static tl_t linear(tl_graph *g, tl_t x, int64_t out, const char *scope, const char *name)
{
    int64_t d[TL_MAX_RANK];
    int rank = tl_rank(g, x, d);
    if (rank < 1)
        return TL_T_INVALID; /* x is TL_T_INVALID: the graph holds its error */
    char kernel[128], bias[128];
    snprintf(kernel, sizeof kernel, "%s/%s/kernel", scope, name);
    snprintf(bias, sizeof bias, "%s/%s/bias", scope, name);
    int64_t kshape[2] = {d[rank - 1], out};
    tl_t w = tl_variable(g, kernel, kshape, 2, (tl_initializer){TL_INIT_GLOROT_UNIFORM, 0, 0});
    tl_t b = tl_variable(g, bias, &out, 1, (tl_initializer){TL_INIT_ZEROS, 0, 0});
    return tl_add(g, tl_batch_matmul(g, x, w, false, false), b);
}

/* One mixer block on x (batch, tokens, channels), with pre-norm residuals. */
static tl_t mixer_block(tl_graph *g, tl_t x, double dropout, const char *scope)
{
    static const int swap[3] = {0, 2, 1};
    char name[96];
    snprintf(name, sizeof name, "%s/token_norm", scope);
    tl_t y = tl_transpose(g, tl_layer_norm(g, x, 1e-6, name), swap, 3);   // (batch, channels, tokens)
    y = tl_gelu(g, linear(g, y, TOKEN_HIDDEN, scope, "token_mlp_1"), true);
    y = tl_transpose(g, linear(g, y, TOKENS, scope, "token_mlp_2"), swap, 3);
    x = tl_add(g, x, y);

    snprintf(name, sizeof name, "%s/channel_norm", scope);
    y = tl_gelu(g, linear(g, tl_layer_norm(g, x, 1e-6, name), CHANNEL_HIDDEN, scope, "channel_mlp_1"), true);
    y = linear(g, tl_dropout(g, y, dropout), CHANNELS, scope, "channel_mlp_2");
    return tl_add(g, x, y);
}

/* The model_fn: traced once per mode (TRAIN, EVAL) and batch shape. */
static tl_status mixer(tl_graph *g, const tl_model_args *a, tl_model_spec *spec, void *user)
{
    const tl_model_config *m = user;
    // Images (batch, 28, 28) or flat features (batch, 784), as synthetic data
    // gives them: either way 28 tokens of the pixels of a row.
    int64_t d[TL_MAX_RANK], size = 1;
    int rank = tl_rank(g, a->features, d);
    for (int i = 1; i < rank; i++)
        size *= d[i];
    int64_t tokens[3] = {a->batch_size, TOKENS, size / TOKENS};
    tl_t x = tl_reshape(g, a->features, tokens, 3);   // an error in the graph if size % 28 != 0
    x = linear(g, x, CHANNELS, "stem", "embed");      // (batch, 28, 64)
    for (int b = 0; b < BLOCKS; b++) {
        char scope[32];
        snprintf(scope, sizeof scope, "block_%d", b);
        x = mixer_block(g, x, m->dropout, scope);
    }
    static const int token_axis = 1;
    x = tl_reduce_mean(g, tl_layer_norm(g, x, 1e-6, "head_norm"), &token_axis, 1, false);   // (batch, 64)
    spec->logits = tl_dense(g, x, CLASSES, TL_ACT_NONE, "head");
    if (a->mode != TL_MODE_PREDICT)   // PREDICT has no labels
        spec->loss = tl_reduce_mean(g, tl_sparse_softmax_xent(g, spec->logits, a->labels, 0.1), NULL, 0, false);
    return tl_graph_status(g);
}

static void progress(const tl_train_log *log, void *user)
{
    (void)user;
    if (log->log_loss)
        printf("step %lld: loss %.4f (mean since the last line %.4f)\n", (long long)log->step, log->loss,
               log->loss_mean);
    fflush(stdout);
}

/* The input section's data: Fashion-MNIST's two splits, or synthetic
 * examples of one planted model, the first ones to train and the next ones
 * to test (as `tpuloop train` makes them). owned[] is what to free; train
 * and test may be views into it. */
static tl_status load_data(const tl_run_config *r, tl_labeled_data *owned[2], tl_labeled_data *train,
                           tl_labeled_data *test)
{
    const tl_input_config *in = &r->input;
    tl_status st;
    if (strcmp(in->dataset, "fashion_mnist") == 0) {
        if ((st = tl_mnist_load(in->data_dir, "train", &owned[0])) != TL_OK ||
            (st = tl_mnist_load(in->data_dir, "test", &owned[1])) != TL_OK)
            return st;
        *train = *owned[0];
        *test = *owned[1];
        return TL_OK;
    }
    if (strcmp(in->dataset, "synthetic") != 0)
        return tl_error(TL_EINVAL, "dataset '%s': this example reads fashion_mnist or synthetic", in->dataset);
    int64_t ntrain = in->synthetic_examples.value, ntest = in->synthetic_eval_examples.value;
    tl_synthetic_spec s;
    tl_synthetic_spec_init(&s);
    s.num_examples = ntrain + ntest;
    s.num_features = in->synthetic_num_features.value;
    s.num_classes = CLASSES;
    s.seed = r->tf_random_seed.set ? (uint64_t)r->tf_random_seed.value : 0;
    if ((st = tl_synthetic_load(&s, &owned[0])) != TL_OK)
        return st;
    *train = *test = *owned[0];
    train->num_examples = ntrain;
    test->num_examples = ntest;
    test->features += ntrain * owned[0]->num_features;
    test->labels += ntrain;
    return TL_OK;
}

int main(int argc, char **argv)
{
    tl_config *cfg = NULL;
    tl_labeled_data *owned[2] = {NULL, NULL}, train, test;
    tl_estimator *est = NULL;
    tl_train_result tr;
    tl_eval_result er;
    int status = 1;

    if (tl_config_create(&cfg) != TL_OK ||
        tl_config_load_json(cfg, DEFAULTS, strlen(DEFAULTS), "custom_model's defaults") != TL_OK ||
        tl_config_apply_args(cfg, argc - 1, argv + 1, NULL, NULL) != TL_OK || tl_config_resolve(cfg) != TL_OK)
        goto out;
    const tl_run_config *r = tl_config_get(cfg);
    if (load_data(r, owned, &train, &test) != TL_OK)
        goto out;

    tl_estimator_options o;
    tl_estimator_options_init(&o);
    o.model_fn = mixer;
    o.user = (void *)&r->model;   // dropout, in the model_fn
    tl_optimizer_kind kind;
    if (tl_optimizer_kind_parse(r->model.optimizer, &kind) != TL_OK)
        goto out;
    tl_optimizer_config_default(kind, &o.optimizer);   // TensorFlow's defaults for the rest
    o.optimizer.lr.learning_rate = r->model.learning_rate;
    o.on_log = progress;
    if (tl_estimator_create(cfg, &o, &est) != TL_OK)
        goto out;
    // To train_steps or max_steps, or to the end of `epochs` passes over the data.
    if (tl_estimator_train_epochs(est, &train, r->input.epochs.set ? r->input.epochs.value : 0, &tr) != TL_OK ||
        tl_estimator_evaluate(est, &test, &er) != TL_OK)
        goto out;
    printf("accuracy %.4f on %lld test examples (loss %.4f) after %lld steps\n", er.accuracy, (long long)er.examples,
           er.loss, (long long)tr.global_step);
    status = 0;
out:
    if (status != 0)
        fprintf(stderr, "custom_model: error: %s\n", tl_last_error());
    tl_estimator_destroy(est);
    tl_labeled_data_destroy(owned[0]);
    tl_labeled_data_destroy(owned[1]);
    tl_config_destroy(cfg);
    return status;
}
