/*
 * tpuloop/criteo_synth.h — synthetic click logs shaped like Criteo's, labelled
 * by a planted model, so that the best reachable AUC is known.
 *
 * A DLRM trained on real Criteo data reaches an AUC of about 0.80, but nobody
 * knows how far that is from the best possible. Here the labels come from a
 * hidden model, so the AUC of the true click probabilities (the "oracle AUC")
 * is the ceiling, and a run can report its eval auc beside oracle_auc.
 *
 * Each example has num_dense non-negative integer features (Criteo's I1..I13)
 * and num_categorical ids (C1..C26), and a label drawn from the planted model:
 *
 *   id_c     = scatter_c(rank),  rank ~ Zipf(zipf_exponent) over [0, V_c):
 *              P(rank r) ∝ (r + 1)^-s, and scatter_c(r) = (r A + o_c) mod V_c
 *              with A = 4294967311 (a prime above every V_c, so the map is a
 *              bijection) and o_c drawn from the seed: hot ids are spread over
 *              the vocabulary rather than being 0, 1, 2, ...
 *   x_j      = floor(expm1(g_j)) for g_j = mu_j + sigma_j N(0, 1) > 0, else 0,
 *              at most 2^24 - 1 (so the float copy is exact); mu_j, sigma_j
 *              drawn from the seed. Many zeros and a heavy tail, as Criteo's.
 *   t_j      = logf(x_j + 1), standardised — what the Criteo reader feeds a
 *              model (text_data.h), so the planted model sees what a DLRM sees.
 *   h_c[id]  ~ U(-√3, √3)^hidden_dim (mean 0, variance 1), a hidden embedding made on the fly
 *              from (seed, c, id) and never stored, so vocabularies may be
 *              huge; u_c a unit vector per feature, w a unit vector.
 *   s        = sqrt(.5) Σ_c <h_c[id_c], u_c> / sqrt(C)
 *            + sqrt(.25) <w, t>
 *            + sqrt(.25) Σ_(a,b) <h_a[id_a], h_b[id_b]> / sqrt(hidden_dim P)
 *              the last a sum over the P = min(4, C / 2) fixed pairs (0, 1),
 *              (2, 3), (4, 5), (6, 7): dot interactions, which DLRM models;
 *   logit    = bias + signal (s - mean s) / std s
 *   label    ~ Bernoulli(sigmoid(logit)).
 *
 * mean s, std s, the dense standardisation and bias are measured when the
 * generator is created, on 16384 calibration examples of its own (a stream no
 * user index reaches): bias is solved so the mean click probability is ctr.
 * So signal is the standard deviation of the logit around its bias.
 *
 * Determinism: everything is a pure function of (seed, example index, field)
 * through tpuloop's counter-based RNG (rng.h): examples may be made in any
 * order, slice or thread with the same bits.
 *
 *     tl_criteo_synth_config c;
 *     tl_criteo_synth_config_default(&c);     // then set what differs
 *     c.seed = 7;
 *     tl_criteo_synth *g;
 *     if (tl_criteo_synth_create(&c, &g) != TL_OK) {
 *         fprintf(stderr, "error: %s\n", tl_last_error());
 *         return 1;
 *     }
 *     tl_criteo_synth_write_tsv(g, "train.tsv", 0, 1000000);
 *     tl_criteo_synth_write_tsv(g, "eval.tsv", 1000000, 100000);
 *     double oracle;
 *     tl_criteo_synth_oracle_auc(g, 1000000, 100000, &oracle);   // ~0.79
 *     tl_criteo_synth_destroy(g);
 *
 * A generator is not modified after it is created: any number of threads may
 * use one at once.
 */
#ifndef TPULOOP_CRITEO_SYNTH_H
#define TPULOOP_CRITEO_SYNTH_H

#include "tpuloop/base.h"
#include "tpuloop/data.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TL_CRITEO_SYNTH_MAX_DENSE 13
#define TL_CRITEO_SYNTH_MAX_CAT 26
#define TL_CRITEO_SYNTH_MAX_VOCAB ((int64_t)1 << 32)
#define TL_CRITEO_SYNTH_MAX_HIDDEN 64

typedef struct tl_criteo_synth_config {
    uint64_t seed;
    int64_t num_examples;  /* N >= 0: the set is examples [0, N); default 4194304 */
    int num_dense;         /* 0..13; default 13 */
    int num_categorical;   /* 0..26 (with num_dense, at least 1 feature); default 26 */
    int64_t vocab_sizes[TL_CRITEO_SYNTH_MAX_CAT]; /* (26) each 1..2^32 (those in use); default:
                                                     Criteo Kaggle's cardinalities capped at 100000 */
    double zipf_exponent;  /* s in [0, 10] (0: uniform ids); default 1.05 */
    int hidden_dim;        /* 1..64; default 4 */
    double ctr;            /* mean click probability, in [0.001, 0.999]; default 0.25 */
    double signal;         /* std of the logit around its bias, in [0, 20]; default 1.3 (oracle AUC ~0.79) */
} tl_criteo_synth_config;

typedef struct tl_criteo_synth tl_criteo_synth;

/* The defaults above. c NULL is ignored. */
TL_API void tl_criteo_synth_config_default(tl_criteo_synth_config *c);

/*
 * Checks c, draws the planted model, calibrates it (tens of milliseconds) and
 * returns a generator in *out, freed with tl_criteo_synth_destroy. c is copied.
 * Errors: TL_EINVAL a field out of range (the message names the field, the
 * value and the range), c or out NULL; TL_ENOMEM.
 */
TL_API tl_status tl_criteo_synth_create(const tl_criteo_synth_config *c, tl_criteo_synth **out);

/* Frees a generator; NULL is ignored. */
TL_API void tl_criteo_synth_destroy(tl_criteo_synth *g);

/* The (copied) config of g. */
TL_API const tl_criteo_synth_config *tl_criteo_synth_get_config(const tl_criteo_synth *g);

/* The calibrated bias of the logit. */
TL_API double tl_criteo_synth_bias(const tl_criteo_synth *g);

/*
 * Example `index` (0 <= index < N): dense (num_dense) the raw integers as
 * floats (exact, below 2^24), ids (num_categorical) in [0, vocab_sizes[c]),
 * *label 0 or 1, *prob its true click probability. Any output may be NULL to
 * skip it. Allocates nothing.
 * Errors: TL_EINVAL g NULL, index outside [0, N).
 */
TL_API tl_status tl_criteo_synth_example(const tl_criteo_synth *g, int64_t index, float *dense, int64_t *ids,
                                         int32_t *label, double *prob);

/*
 * Examples [first, first + count) into dense (count, num_dense), ids (count,
 * num_categorical), labels (count) and probs (count); any may be NULL.
 * Errors: TL_EINVAL g NULL, first < 0, count < 0, first + count > N.
 */
TL_API tl_status tl_criteo_synth_generate(const tl_criteo_synth *g, int64_t first, int64_t count, float *dense,
                                          int64_t *ids, int32_t *labels, double *probs);

/*
 * Writes examples [first, first + count) to path (created or truncated) as
 * Criteo TSV: label, the 13 integers in decimal, the 26 ids in lowercase hex
 * without leading zeros, tab-separated, one line each ending "\n". The Criteo
 * reader (text_data.h, tl_dataset_criteo) reads back the label, dense =
 * logf(x + 1) and the ids exactly, with vocab_sizes unset or equal to the
 * generator's (an id below V is its own residue).
 * Errors: TL_EINVAL g or path NULL, a range as tl_criteo_synth_generate, a
 * generator whose num_dense is not 13 or num_categorical not 26 (the format
 * has exactly those); TL_EIO the file cannot be created or written ("<path>:
 * ..."); on an error the file may hold part of the lines.
 */
TL_API tl_status tl_criteo_synth_write_tsv(const tl_criteo_synth *g, const char *path, int64_t first,
                                           int64_t count);

/*
 * Examples [first, first + count) as labeled data in memory, what a DLRM
 * reads of Criteo (the Criteo reader's transform): the features of a row
 * are the num_dense values log(1 + x) (feature_shape (num_dense)), its ids
 * the num_categorical ids C1, C2, ... as int64 (num_ids = num_categorical;
 * an embedding engine with one feature per categorical column, in column
 * order, reads them: see tl_labeled_data), any vocabulary size; labels 0
 * or 1, num_classes 2. Free *out with tl_labeled_data_destroy.
 * Errors: TL_EINVAL g or out NULL, a range outside [0, N); TL_ENOMEM.
 */
TL_API tl_status tl_criteo_synth_load(const tl_criteo_synth *g, int64_t first, int64_t count, tl_labeled_data **out);

/*
 * *auc = the ROC AUC of the true probabilities against the drawn labels of
 * examples [first, first + count): what a model that knew the planted model
 * would score on those same examples, the ceiling for any model's eval auc
 * on them (up to the sampling noise both share).
 * Errors: as tl_criteo_synth_generate; TL_EINVAL when the examples hold only
 * one class (no AUC exists; *auc NaN); TL_ENOMEM.
 */
TL_API tl_status tl_criteo_synth_oracle_auc(const tl_criteo_synth *g, int64_t first, int64_t count, double *auc);

/*
 * The ROC AUC of score against label over n examples: the probability that
 * a random positive (label 1; any other label counts as 0) scores above a
 * random negative, a tie counting one half (the Mann-Whitney U from average
 * ranks; exact, O(n log n)). The arrays are only read.
 * Returns NaN, with an error set (tl_last_error), when no AUC exists or it
 * cannot be computed: n < 1 or a class absent, a NaN score, score or label
 * NULL (TL_EINVAL); out of memory (TL_ENOMEM).
 * (The estimator's eval auc uses the same definition, through an internal
 * twin in src/runtime/eval_metrics.c.)
 */
TL_API double tl_auc(const double *score, const int32_t *label, int64_t n);

#ifdef __cplusplus
}
#endif
#endif /* TPULOOP_CRITEO_SYNTH_H */
