/* data.c — the job's in-memory datasets: Fashion-MNIST (Debian's
 * dataset-fashion-mnist, or data_dir), the synthetic set of a planted model
 * shaped like it, Criteo-shaped click logs of a planted model
 * (criteo_synth.h) with its oracle AUC, and token sequences labelled by their
 * majority token (data.h). Missing data is an error: synthetic
 * data only when the configuration asks for it. */
#include <string.h>

#include "job_int.h"

/* dataset `synthetic`'s classes, as Fashion-MNIST's. */
#define SYNTH_CLASSES 10

static uint64_t seed_of(const tl_run_config *r)
{
    return r->tf_random_seed.set ? (uint64_t)r->tf_random_seed.value : 0;
}

static tl_status fashion_mnist(tl_job *job)
{
    const char *dir = job->r->input.data_dir;
    tl_status st = job->opt.train ? tl_mnist_load(dir, "train", &job->owned[0]) : TL_OK;
    if (st == TL_OK)
        st = tl_mnist_load(dir, "test", &job->owned[1]);
    if (st != TL_OK) {
        if (st == TL_EIO)
            return tl_error(st, "dataset fashion_mnist: %s (data_dir %s%s; install Debian's dataset-fashion-mnist, "
                                "point data_dir at the IDX files, or set dataset to synthetic for made-up data)",
                            tl_last_error(), dir != NULL ? dir : TL_FASHION_MNIST_DIR,
                            dir != NULL ? "" : ", the default");
        return st;
    }
    if (job->opt.train)
        job->train = *job->owned[0];
    job->test = *job->owned[1];
    return TL_OK;
}

/* synthetic_examples to train and synthetic_eval_examples after them to
 * test, of one planted model shaped like Fashion-MNIST. The whole set is
 * made, so the test examples are the same ones whether or not the job
 * trains. */
static tl_status synthetic(tl_job *job)
{
    const tl_input_config *in = &job->r->input;
    int64_t ntrain = in->synthetic_examples.value, neval = in->synthetic_eval_examples.value;
    tl_synthetic_spec s;
    tl_synthetic_spec_init(&s);
    s.num_examples = ntrain + neval;
    s.num_features = in->synthetic_num_features.value;
    s.num_classes = SYNTH_CLASSES;
    s.seed = seed_of(job->r);
    tl_status st = tl_synthetic_load(&s, &job->owned[0]);
    if (st != TL_OK)
        return st;
    const tl_labeled_data *all = job->owned[0];
    job->train = job->test = *all;
    job->train.num_examples = job->opt.train ? ntrain : 0;
    job->test.num_examples = neval;
    job->test.features += ntrain * all->num_features;
    job->test.labels += ntrain;
    return TL_OK;
}

/* synthetic_examples sequences to train and synthetic_eval_examples after
 * them to test, of synthetic_sequence_length tokens from synthetic_vocab,
 * each labelled by its majority token. As synthetic's, the whole set is
 * made. */
static tl_status synthetic_sequences(tl_job *job)
{
    const tl_input_config *in = &job->r->input;
    int64_t ntrain = in->synthetic_examples.value, neval = in->synthetic_eval_examples.value;
    tl_synthetic_sequences_spec s;
    tl_synthetic_sequences_spec_init(&s);
    s.num_examples = ntrain + neval;
    s.sequence_length = in->synthetic_sequence_length.value;
    s.vocab_size = in->synthetic_vocab.value;
    s.seed = seed_of(job->r);
    tl_status st = tl_synthetic_sequences_load(&s, &job->owned[0]);
    if (st != TL_OK)
        return st;
    const tl_labeled_data *all = job->owned[0];
    job->train = job->test = *all;
    job->train.num_examples = job->opt.train ? ntrain : 0;
    job->test.num_examples = neval;
    job->test.features += ntrain * all->num_features;
    job->test.labels += ntrain;
    return TL_OK;
}

/* synthetic_examples to train (when the job trains) and
 * synthetic_eval_examples to evaluate: 13 log(1 + x) dense values and 26
 * ids each, and the planted model's AUC on the evaluation examples. */
static tl_status criteo_synthetic(tl_job *job)
{
    const tl_input_config *in = &job->r->input;
    tl_criteo_synth_config c;
    tl_criteo_synth_config_default(&c);
    c.seed = seed_of(job->r);
    int64_t ntrain = in->synthetic_examples.value, neval = in->synthetic_eval_examples.value;
    c.num_examples = ntrain + neval;
    /* Criteo Kaggle's cardinalities capped, or the vocabularies given. */
    for (int k = 0; k < c.num_categorical; k++)
        c.vocab_sizes[k] = in->synthetic_vocab_sizes != NULL ? in->synthetic_vocab_sizes[k]
                           : c.vocab_sizes[k] < in->synthetic_vocab_cap.value ? c.vocab_sizes[k]
                                                                               : in->synthetic_vocab_cap.value;
    tl_criteo_synth *g;
    tl_status st = tl_criteo_synth_create(&c, &g);
    if (st != TL_OK)
        return st;
    bool train = job->opt.train;
    int64_t first = train ? 0 : ntrain;
    tl_labeled_data *d = NULL;
    st = tl_criteo_synth_load(g, first, train ? ntrain + neval : neval, &d);
    if (st == TL_OK)
        st = tl_criteo_synth_oracle_auc(g, ntrain, neval, &job->oracle_auc);
    tl_criteo_synth_destroy(g);
    if (st != TL_OK) {
        tl_labeled_data_destroy(d);
        return st;
    }
    int64_t skip = train ? ntrain : 0;
    job->owned[0] = d;
    job->has_oracle = true;
    job->train = job->test = *d;
    job->train.num_examples = train ? ntrain : 0;
    job->test.num_examples = neval;
    job->test.features += skip * d->num_features;
    job->test.labels += skip;
    job->test.ids += skip * d->num_ids;
    return TL_OK;
}

tl_status tl_job_data_load(tl_job *job)
{
    const char *d = job->r->input.dataset;
    tl_status st;
    if (strcmp(d, "fashion_mnist") == 0)
        st = fashion_mnist(job);
    else if (strcmp(d, "synthetic") == 0)
        st = synthetic(job);
    else if (strcmp(d, "criteo_synthetic") == 0)
        st = criteo_synthetic(job);
    else if (strcmp(d, "synthetic_sequences") == 0)
        st = synthetic_sequences(job);
    else
        return tl_error(TL_EINVAL, "input.dataset: '%s' is not an in-memory dataset (fashion_mnist, synthetic, "
                                   "criteo_synthetic, synthetic_sequences)", d);
    /* The input section's scale, as tl_dataset_scale applies it to files:
     * the features (not labels, not ids), as the float product. */
    float s = (float)job->r->input.scale;
    for (int k = 0; st == TL_OK && s != 1.0f && k < 2; k++) {
        tl_labeled_data *o = job->owned[k];
        for (int64_t i = 0; o != NULL && i < o->num_examples * o->num_features; i++)
            o->features[i] *= s;
    }
    return st;
}

void tl_job_data_free(tl_job *job)
{
    tl_labeled_data_destroy(job->owned[0]);
    tl_labeled_data_destroy(job->owned[1]);
    job->owned[0] = job->owned[1] = NULL;
}
