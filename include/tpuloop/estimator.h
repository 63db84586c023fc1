/*
 * tpuloop/estimator.h — TPUEstimator's train and evaluate on the devices of
 * this process.
 *
 * An estimator traces the model_fn once per mode, compiles each graph into a
 * step program and starts one worker thread per replica. An input thread
 * cuts the global batches into the replicas' slices and queues them a few
 * batches ahead of the workers (the infeed); the device loop itself
 * allocates nothing. Training runs in
 * device loops of iterations_per_loop steps (spec tpu_estimator.md §3.1):
 * the host tells every worker "run n steps"; each runs them without returning
 * — take its slice of the global batch, forward, backward, reduce-scatter the
 * gradient over the replicas in replica order, apply the optimizer to the
 * parameter chunk it owns, wait for the others — and the host acts only at the
 * loop boundary (logging, the NaN check, the next n). The parameters are one
 * slab shared by the replicas of the process, so the reduced gradient is
 * never gathered: each replica updates its own chunk in place.
 *
 * Every reduction has a fixed order, every random number comes from the
 * counter-based RNG keyed by (seed, op, replica, step), and the input order is
 * a pure function of (seed, epoch, position), so the trained parameters are
 * the same bits for any iterations_per_loop — params_digest proves it.
 *
 *     tl_estimator_options o;
 *     tl_estimator_options_init(&o);
 *     o.model_fn = mlp;                               // see graph.h
 *     tl_optimizer_config_default(TL_OPTIMIZER_ADAM, &o.optimizer);
 *     o.optimizer.lr.learning_rate = 1e-3;
 *     tl_estimator *est;
 *     if (tl_estimator_create(cfg, &o, &est) != TL_OK) ...     // cfg resolved
 *     tl_train_result tr;
 *     tl_estimator_train(est, train_data, &tr);                // train_steps or max_steps
 *     tl_eval_result er;
 *     tl_estimator_evaluate(est, test_data, &er);              // eval_steps
 *     char digest[65];
 *     tl_estimator_params_digest(est, digest);
 *     tl_estimator_destroy(est);
 */
#ifndef TPULOOP_ESTIMATOR_H
#define TPULOOP_ESTIMATOR_H

#include "tpuloop/base.h"
#include "tpuloop/config.h"
#include "tpuloop/data.h"
#include "tpuloop/graph.h"
#include "tpuloop/optim.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tl_estimator tl_estimator;

typedef struct tl_estimator_options {
    tl_model_fn model_fn;
    void *user;                    /* handed to model_fn */
    tl_optimizer_config optimizer;
    bool reduce_sum;               /* CrossShardOptimizer reduction SUM; default MEAN */
    /* Called at every logging boundary of training (NULL: tl_log at INFO). */
    void (*on_log)(int64_t step, double loss, double steps_per_sec, double examples_per_sec, void *log_user);
    void *log_user;
    /*
     * The host_call of training (spec §6), here the default one: at every
     * loop-local step i with i % experimental_host_call_every_n_steps == 0
     * each replica outfeeds its loss as a (1) tensor; at the loop boundary
     * they are concatenated in replica order and this is called once per such
     * step, in step order, with values (R) and the global step after that
     * step (the post-increment value). NULL: the losses are outfed but not
     * handed on. values is valid only during the call.
     */
    void (*host_call)(int64_t global_step, const float *values, int R, void *host_call_user);
    void *host_call_user;
    /* Batches the infeed thread prepares ahead of each replica (its queue
     * depth); 0 means 3. */
    int infeed_depth;
} tl_estimator_options;

/* Defaults: MEAN reduction, no model_fn (required), Adam with lr 1e-3,
 * no host_call callback, infeed depth 3. */
TL_API void tl_estimator_options_init(tl_estimator_options *o);

/*
 * Creates an estimator for a resolved configuration. The devices are
 * cfg.devices per host (one per core when 0); this process is host 0 of
 * cfg.num_hosts == 1 (multi-host runs come with the MPI backend).
 * Errors: TL_EINVAL for a configuration the estimator cannot run (several
 * hosts, model parallelism, a missing model_fn, an invalid optimizer),
 * TL_ENOMEM, and the topology's errors.
 */
TL_API tl_status tl_estimator_create(const tl_config *cfg, const tl_estimator_options *o, tl_estimator **out);

/* Stops the workers and frees everything. Accepts NULL. */
TL_API void tl_estimator_destroy(tl_estimator *est);

typedef struct tl_train_result {
    int64_t global_step;     /* after training */
    int64_t loops;           /* device loops run */
    double loss;             /* TensorFlow's: replica 0's loss at the last step */
    double loss_mean;        /* the mean over replicas of their last-step loss */
    double examples_per_sec;
    double seconds;
    bool skipped;            /* max_steps already reached ("Skipping training ...") */
} tl_train_result;

/*
 * Trains on data (features (N, D), labels (N)) for the configuration's
 * train_steps or max_steps. Batches are the configuration's
 * train_batch_size, drawn without replacement from a permutation of the
 * examples that depends only on (tf_random_seed, epoch); an epoch drops its
 * last partial batch. Errors: those of tl_config_check_train and the input
 * plan, TL_EINVAL when the data does not match the traced shapes or is
 * smaller than a batch, TL_EINVAL for experimental_host_call_every_n_steps
 * < 1, TL_EINVAL "NaN loss during training." and
 * "Gradient for <var> is NaN" (the NaN check of §3.1, at a loop boundary;
 * nothing from the NaN state is kept as the result), and a worker's error.
 */
TL_API tl_status tl_estimator_train(tl_estimator *est, const tl_labeled_data *data, tl_train_result *res);

typedef struct tl_eval_result {
    int64_t global_step;  /* of the evaluated parameters */
    int64_t steps;
    double loss;          /* mean over steps and replicas, summed in replica order */
    double loss_replica0; /* TensorFlow's: replica 0's mean over steps */
    double accuracy;      /* argmax(logits) == label, over every evaluated example */
    int64_t examples;
    /* For a model with 2 classes: the ROC AUC of P(class 1) = softmax of the
     * logits, over every evaluated example (exact: ties between a positive
     * and a negative count one half, as the Mann-Whitney U). has_auc is false
     * (and auc NaN) for other models and when one class is absent. */
    double auc;
    bool has_auc;
} tl_eval_result;

/*
 * Evaluates eval_steps batches of eval_batch_size (all in one device loop, as
 * §7) from the start of data, in order. Errors: those of tl_config_check_eval
 * and the EVAL input plan; TL_EINVAL when data holds fewer than
 * eval_steps * eval_batch_size examples (naming how many batches there are).
 */
TL_API tl_status tl_estimator_evaluate(tl_estimator *est, const tl_labeled_data *data, tl_eval_result *res);

typedef struct tl_predict_result {
    float *values;         /* (num_examples, width): one row per real example, in input order */
    int64_t num_examples;
    int64_t width;         /* elements of one example's predictions */
    int64_t device_steps;  /* batches run: ceil(num_examples / predict_batch_size) */
    int64_t padded_rows;   /* zero rows that filled the last batch; their outputs are dropped */
    int64_t global_step;
} tl_predict_result;

/*
 * Predicts every example of data (labels unused) with the configuration's
 * predict_batch_size, as §8: the last batch is padded with zero rows whose
 * predictions are dropped, so values holds exactly one row per example in
 * input order. The predictions are the model_fn's spec->predictions
 * (spec->logits when unset). The estimator must have been created with
 * predict_batch_size set. Free values with tl_predict_result_free.
 * Errors: the PREDICT input plan's, TL_EINVAL without predict_batch_size,
 * TL_ENOMEM.
 */
TL_API tl_status tl_estimator_predict(tl_estimator *est, const tl_labeled_data *data, tl_predict_result *res);
TL_API void tl_predict_result_free(tl_predict_result *res);

/* SHA-256 over every variable in name order as little-endian float32, as 64
 * hex digits and a NUL. */
TL_API tl_status tl_estimator_params_digest(const tl_estimator *est, char hex[65]);

/* The global step. */
TL_API int64_t tl_estimator_global_step(const tl_estimator *est);

#ifdef __cplusplus
}
#endif
#endif /* TPULOOP_ESTIMATOR_H */
