/*
 * tpuloop/estimator.h — TPUEstimator's train, evaluate and predict on the
 * devices of this process.
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
 * Between loops the host also hands what the devices outfed to the user's
 * callbacks: host_call's fn (training: every experimental_host_call_every_n
 * steps; evaluation: every step) and the eval_metrics metric_fn (options'
 * metric_update per eval step, metric_result once at the end); see
 * tl_host_tensor below and the spec's host_call fields in graph.h.
 *
 * With an embedding engine (TPUEstimator's embedding_config_spec) the
 * infeed also carries each example's embedding ids, typed: int64, named by
 * their embedding feature (tl_input.embedding_keys, tl_labeled_data.ids),
 * never floats among the model's features. Each replica enqueues its
 * batch's ids straight from its infeed buffer, receives the activations
 * before the forward pass and sends their gradients after the backward
 * pass (tl_estimator_options.embedding).
 *
 * Every reduction has a fixed order, every random number comes from the
 * counter-based RNG keyed by (seed, op, replica, step), and the input order is
 * a pure function of (seed, epoch, position), so the trained parameters are
 * the same bits for any iterations_per_loop — params_digest proves it.
 *
 * With a model_dir in the configuration the estimator keeps its state there,
 * as Estimator does (spec §2, §3.2, §3.3):
 *
 *     model_dir/model.ckpt-<step>.safetensors   checkpoints (checkpoint.h): every
 *                                               variable, its optimizer slots under
 *                                               TensorFlow's names ("<var>/Adam",
 *                                               "<var>/Adam_1", ...), "global_step"
 *     model_dir/checkpoint                      TensorFlow's index of them
 *     model_dir/config.json                     the resolved configuration
 *     model_dir/events.out.tfevents.*           training summaries: "loss",
 *                                               "global_step/sec", "examples/sec";
 *                                               SessionLog START at each train's
 *                                               first step (restored step + 1) and
 *                                               CHECKPOINT ("<model_dir>/model.ckpt")
 *                                               at each save, as TensorFlow's hooks:
 *                                               TensorBoard then drops what a
 *                                               crashed run wrote past its last
 *                                               checkpoint
 *     model_dir/.tpuloop.lock                   held by the estimator that trains
 *     model_dir/eval/events.out.tfevents.*      every evaluation metric at its step
 *
 * The first train restores the latest valid checkpoint there (a corrupt one
 * is skipped with a warning), so train_steps count from the restored step and
 * max_steps is absolute; checkpoints are written at loop boundaries only, by
 * the host, while the workers wait — when save_checkpoints_steps or _secs is
 * due, at the start and at the end. Because nothing but the step keys the
 * input order, dropout and the optimizer, training N steps in one run and
 * training K, stopping (even with tl_estimator_request_stop from a signal
 * handler) and resuming to N give the same params_digest.
 *
 *     // a SIGTERM handler: tl_estimator_request_stop(the_estimator);
 *     tl_estimator_train(est, data, &tr);      // tr.stopped: saved at a loop boundary
 *     ...                                      // later, a new process:
 *     tl_estimator_create(cfg, &o, &est);      // same model_dir
 *     tl_estimator_train(est, data, &tr);      // resumes; same bits as never stopped
 *
 *     tl_estimator_restore(est, NULL);         // evaluate the latest checkpoint
 *     tl_estimator_evaluate(est, test_data, &er);
 *
 *     static tl_status progress(int64_t gs, const tl_host_tensor *t, int n, void *user)
 *     {
 *         const float *loss = t[0].data;   // the default host_call: "loss", (R)
 *         fprintf(user, "step %lld: replica 0's loss %g\n", (long long)gs, loss[0]);
 *         return TL_OK;
 *     }
 *
 *     tl_estimator_options o;
 *     tl_estimator_options_init(&o);
 *     o.model_fn = mlp;                               // see graph.h
 *     tl_optimizer_config_default(TL_OPTIM_ADAM, &o.optimizer);
 *     o.optimizer.lr.learning_rate = 1e-3;
 *     o.host_call = progress;                         // at loop boundaries
 *     o.host_call_user = stderr;
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
#include "tpuloop/comm.h"
#include "tpuloop/config.h"
#include "tpuloop/data.h"
#include "tpuloop/distribution.h"
#include "tpuloop/embedding.h"
#include "tpuloop/graph.h"
#include "tpuloop/optim.h"
#include "tpuloop/summary.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tl_estimator tl_estimator;

/*
 * A tensor the devices outfed, as the host sees it: one host_call or
 * eval-metric tensor of the spec (graph.h), concatenated over the replicas
 * along axis 0 in replica order, so shape[0] is R times the per-replica
 * dimension 0 and replica r's values are the r-th block of rows. data is
 * float32 (dtype TL_F32) or int32 (TL_I32), row-major, and valid only during
 * the callback that receives it; copy what you keep.
 */
typedef struct tl_host_tensor {
    const char *name;            /* the spec's name, or "host_call_<k>" / "eval_metric_<k>" / "loss" */
    tl_dtype dtype;
    const void *data;            /* (shape[0], ..., shape[rank-1]) */
    int rank;                    /* >= 1 */
    int64_t shape[TL_MAX_RANK];
} tl_host_tensor;

/* One named value of metric_fn's result. */
#define TL_MAX_METRICS 16
typedef struct tl_metric {
    char name[64];               /* NUL-terminated */
    double value;
} tl_metric;

/*
 * What training reports at a logging boundary (spec §3.3): TensorFlow's two
 * hooks fire on their own schedules, LoggingTensorHook's "loss = ..., step =
 * ..." (log_loss) and StepCounterHook's "global_step/sec" (log_rate), and
 * the callback runs when either does.
 */
typedef struct tl_train_log {
    int64_t step;            /* the global step at the boundary */
    bool log_loss;           /* the loss hook fired: loss and loss_mean are new */
    bool log_rate;           /* the rate hook fired: the rates are new */
    double loss;             /* replica 0's loss at step (TensorFlow's) */
    double loss_mean;        /* the mean loss over the replicas and every step since the previous loss log
                                (or the train call's start) */
    int64_t loss_steps;      /* the steps loss_mean covers */
    bool has_rate;           /* a rate was reported in this train call: the rates below are the latest */
    double steps_per_sec;    /* 0 without has_rate */
    double examples_per_sec;
} tl_train_log;

typedef struct tl_estimator_options {
    tl_model_fn model_fn;
    void *user;                    /* handed to model_fn */
    tl_optimizer_config optimizer; /* a TRAIN spec's optimizer (graph.h) replaces it */
    bool reduce_sum;               /* CrossShardOptimizer reduction SUM; default MEAN; as optimizer */
    /* Called at every logging boundary of training (NULL: tl_log at INFO:
     * the loss line when log_loss, the rate line when log_rate). */
    void (*on_log)(const tl_train_log *log, void *log_user);
    void *log_user;
    /*
     * host_call's fn (spec §6), on the host thread at the loop boundary:
     * TRAIN: once per step that outfed — loop-local step i with
     *   i % experimental_host_call_every_n_steps == 0 — in step order, with
     *   the TRAIN spec's host_call tensors (by default one tensor "loss" of
     *   shape (R): every replica's loss) and global_step = the global step
     *   after that step (the post-increment value: 1 for the first step).
     * EVAL: once per eval step, in step order, with the EVAL spec's
     *   host_call tensors (none by default: then it is not called), and
     *   global_step = the step of the evaluated parameters.
     * n is the number of tensors (>= 1). A non-OK return stops: train or
     * evaluate returns that status with "host_call at step N: ..." and runs
     * nothing more (the device loop that produced the values has run, so the
     * global step counts it). NULL: nothing is outfed.
     */
    tl_status (*host_call)(int64_t global_step, const tl_host_tensor *tensors, int n, void *host_call_user);
    void *host_call_user;
    /*
     * eval_metrics' metric_fn (spec §7), split as TensorFlow's metric ops are:
     * metric_update runs the update ops once per eval step, in step order,
     * after host_call, with the EVAL spec's eval_metric_tensors (n may be 0);
     * metric_result reads the values once after the last update, writing up
     * to max metrics into out and their number into *n_out. Either may be
     * NULL (no eval_metric tensors are outfed without metric_update). A
     * non-OK return stops evaluate with that status ("metric_update at eval
     * step N: ..." / "metric_result: ..."). The names "loss" and
     * "global_step" are reserved by Estimator (TL_EINVAL, TensorFlow's
     * message), as are an empty, unterminated or repeated name and
     * *n_out outside [0, max].
     */
    tl_status (*metric_update)(const tl_host_tensor *tensors, int n, void *metric_user);
    tl_status (*metric_result)(tl_metric *out, int max, int *n_out, void *metric_user);
    void *metric_user;
    /* Batches the infeed thread prepares ahead of each replica (its queue
     * depth); 0 means 3. */
    int infeed_depth;
    /*
     * CheckpointSaverListener.after_save (TensorFlow's saving_listeners), on
     * the host thread after every checkpoint train saves in model_dir, with
     * its global step and file. The first call of a train call is the save
     * of the state it starts from, which TensorFlow's listeners see too. It
     * may evaluate on this estimator (tl_estimator_evaluate, _evaluate_input):
     * the evaluation runs between two training loops on its own input, and
     * training then goes on as if it had not run — the same bits, the same
     * input positions. A non-OK return ends train with that status
     * ("after_save: ..."). NULL: none.
     */
    tl_status (*after_save)(tl_estimator *est, int64_t global_step, const char *checkpoint, void *user);
    void *after_save_user;
    /* Also save at the first loop boundary at or after every this many
     * steps since the last save (0: only save_checkpoints_steps / _secs),
     * for a listener that acts every N steps; the configuration's schedule
     * keeps its own cadence. */
    int64_t save_every_n_steps;
    /*
     * The embedding engine (tpuloop/embedding.h; TPUEstimator's
     * embedding_config_spec), borrowed: it must outlive the estimator, and
     * nothing else may step it while the estimator runs. NULL: none.
     * Its num_tensor_cores must be the replica count. Each step and replica
     * the estimator enqueues the ids of every feature, receives the
     * activations into the model's tl_embedding_activations tensors, and
     * after the backward pass sends their gradients (zeros for a feature the
     * loss does not reach), before the dense gradients are reduced; EVAL and
     * PREDICT steps enqueue in "inference" mode at their own batch. The
     * tables and slots are saved in and restored from every checkpoint
     * ("embedding/<table>/parameters", "embedding/<table>/<slot>").
     *
     * The ids travel typed, as int64 named by their feature, beside the
     * features (which hold only the model's dense inputs): feature f of F
     * takes W_f ids per example — max_sequence_length for a sequence
     * feature (position j of the sequence; -1 marks an absent position),
     * Π output_shape for a feature with an output_shape (one id per bag,
     * row-major) and 1 otherwise (one id per example). In-memory data
     * carries them in tl_labeled_data.ids, feature after feature (num_ids =
     * Σ W_f); an input_fn's elements in the tensor named by the feature
     * (tl_input.embedding_keys). An id outside [0, vocabulary_size) is the
     * engine's bounds check (bounds_check_mode; FATAL fails the step naming
     * the feature, the id, the step and the row). Any vocabulary size the
     * engine accepts trains.
     *
     * embedding_learning_rates gives the dynamic values of a step (the
     * engine's tl_emb_num_dynamic of them, by tag) — TPUEmbedding's
     * callable learning rates; required when the engine has any, called on
     * each replica's thread (it must be thread-safe; the values must not
     * depend on the replica).
     */
    tl_emb_engine *embedding;
    /* Or the tables' configuration, which the estimator sizes as
     * TPUEstimator sizes TPUEmbedding from its embedding_config_spec — a
     * tensor core per replica, batch_size_per_tensor_core the replica's
     * training batch (1 without train_batch_size) — and whose engine it owns
     * (tl_estimator_embedding). Copied at create; ignored when embedding is
     * set. */
    const tl_emb_config *embedding_config;
    tl_status (*embedding_learning_rates)(int64_t global_step, float *values, int n, void *user);
    void *embedding_user;
    /*
     * The hosts (TPUEstimator's workers), borrowed: a communicator of the
     * processes that run this estimator together, one rank each
     * (tl_comm_create_mpi(NULL, 1, &hosts) under `mpirun -np H`), which must
     * outlive the estimator. Process p is host p of the configuration's
     * num_hosts, which must equal the process count; it runs the replicas
     * of its own devices (cfg.devices), calls the input_fn invocations of
     * its host (spec §4.1) and reduces its replicas' gradients with the
     * others' in global replica order, so H processes train the same bits
     * as one process with all the replicas. Every process makes the same
     * calls on its estimator, in the same order, with the same
     * configuration (tl_estimator_create compares its digest across the
     * hosts) — creation included, which is collective. BROADCAST and
     * SLICED read on host 0, which sends each batch to the other hosts'
     * replicas. Host 0 writes model_dir (checkpoints, with every host's
     * input positions, summaries, config.json) and runs host_call; every
     * host reads model_dir on resume, so it must be one directory that
     * every host sees. Each host holds the embedding tables whole and plays
     * every replica's part of the engine from the ids and gradients
     * gathered from all hosts. When one host fails, every host's call
     * returns an error naming it, and the estimator's communicators are
     * failed for good (an error every host meets alike — a configuration
     * check — leaves them working). NULL: this process is every host
     * (num_hosts > 1 then runs the hosts' replicas side by side here).
     */
    tl_comm *hosts;
    /*
     * Keras' ModelParallel (tpuloop/distribution.h), borrowed: it must
     * outlive the estimator. Its mesh is (replicas, num_cores_per_replica):
     * the batch axis (batch_dim_name) of the replica count and one model
     * axis of num_cores_per_replica. A variable whose layout (its path is
     * its name, "layer_0/ffn/dense/kernel") names the model axis on a
     * dimension is split along it over the cores of each replica: tensor
     * parallelism (graph/partition.h), with num_cores_per_replica > 1 and
     * no input_partition_dims. Variables stay whole in checkpoints, so one
     * restores at any num_cores_per_replica. NULL: none (a DataParallel
     * is read as none).
     */
    const tl_distribution *distribution;
} tl_estimator_options;

/* Defaults: MEAN reduction, no model_fn (required), Adam with lr 1e-3,
 * no host_call or metric callbacks, infeed depth 3, no embedding. */
TL_API void tl_estimator_options_init(tl_estimator_options *o);

/*
 * Creates an estimator for a resolved configuration. The devices are
 * cfg.devices per host (one per core when 0); with options.hosts this
 * process is host tl_comm_process(hosts) of cfg.num_hosts, otherwise it
 * plays all cfg.num_hosts hosts. Errors: TL_EINVAL for a configuration the
 * estimator cannot run (model parallelism, a missing model_fn, an invalid
 * optimizer, num_hosts other than the hosts' process count, embedding
 * tables over several processes), TL_ENOMEM, and the topology's errors.
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
    bool stopped;            /* tl_estimator_request_stop ended it early, after a save */
    bool end_of_input;       /* the input ended (its epochs were read), as Estimator.train ends at OutOfRange */
    /* Seconds the replicas spent waiting for the infeed, summed over the
     * replicas and divided by their number: for the call's first batch
     * (the input starting: files opened, a shuffle buffer filled), and for
     * every later one — 0 when the input kept up. */
    double infeed_start_seconds;
    double infeed_wait_seconds;
} tl_train_result;

/*
 * Trains on data (features (N, D), labels (N) and, with an embedding
 * engine, ids (N, K)) for the configuration's
 * train_steps or max_steps. Batches are the configuration's
 * train_batch_size, drawn without replacement from a permutation of the
 * examples that depends only on (tf_random_seed, epoch); an epoch drops its
 * last partial batch. Errors: those of tl_config_check_train and the input
 * plan, TL_EINVAL when the data does not match the traced shapes, holds
 * another number of ids per example than the engine's features take (or
 * none), or is smaller than a batch, TL_EINVAL for experimental_host_call_every_n_steps
 * < 1, TL_EINVAL "NaN loss during training." and
 * "Gradient for <var> is NaN" (the NaN check of §3.1, at a loop boundary;
 * nothing from the NaN state is kept as the result), a worker's error, and
 * host_call's status ("host_call at step N: ..."). The first train, evaluate
 * or predict traces the model_fn: its errors and the spec's (graph.h) come
 * from that call and every later one (a half-built estimator never runs).
 *
 * With model_dir: the first train of an estimator (unless
 * tl_estimator_restore came first) restores the latest valid checkpoint of
 * model_dir — its variables, optimizer slots and global step; a corrupt newer
 * checkpoint is skipped with a warning naming the file and why — or, when
 * there is none, initialises the variables and then warm-starts those
 * matching warm_start_vars from warm_start_from, logging which. It writes
 * model_dir/config.json, and saves checkpoints as tl_ckpt_schedule decides
 * (save_checkpoints_steps or _secs; with both null explicitly, none but a
 * graceful-shutdown one), keeping keep_checkpoint_max of them. A max_steps
 * already reached trains nothing: res->skipped, "Skipping training since
 * max_steps has already saved." at INFO. Summaries go to model_dir's event
 * file (flushed at every checkpoint and at the end). Further errors: those of
 * restoring (see tl_estimator_restore; TL_EPARSE when model_dir has
 * checkpoints but none is valid — a run never silently starts over), of warm
 * starting (TL_EINVAL naming a matching variable that warm_start_from lacks
 * or holds with another shape or dtype; TL_ENOTFOUND when warm_start_from
 * does not exist or holds no checkpoint), and of writing (TL_EIO naming the
 * file). A skipped train writes no checkpoint and no events.
 *
 * One trainer per model_dir: the first train takes model_dir's lock
 * (tl_ckpt_lock_acquire in checkpoint.h: an flock on model_dir/.tpuloop.lock,
 * which says who holds it) before it restores anything, and the estimator
 * keeps it until tl_estimator_destroy — between trains too. A train of
 * another estimator, in this process or another, on the same model_dir
 * fails at its start with TL_EBUSY "model_dir D is in use by another
 * trainer: pid P on host H, started 2024-05-01T12:00:00Z (it holds
 * D/.tpuloop.lock) ...", having read and written nothing. A trainer that was
 * killed (SIGKILL, a crash) leaves the file unlocked: the next train takes
 * it over. evaluate, predict and tl_estimator_restore take no lock, so a
 * model_dir can be evaluated while it trains, as with TensorFlow.
 *
 * tl_estimator_request_stop makes it stop at the next loop boundary, save a
 * checkpoint (when there is a model_dir) and return TL_OK with res->stopped.
 */
TL_API tl_status tl_estimator_train(tl_estimator *est, const tl_labeled_data *data, tl_train_result *res);

/*
 * tl_estimator_train over `epochs` passes of data (0: without end, as
 * tl_estimator_train): the input ends after epochs x (N / train_batch_size)
 * global steps — counted from step 0, so a resumed run ends where the
 * uninterrupted one does — or earlier at train_steps / max_steps. With
 * neither of those set it trains to that end (TPUEstimator needs one of
 * them; a finite input is what makes "until the end" well defined).
 * res->end_of_input says the input ended; a train that starts at or past
 * the end runs no step. Errors: as tl_estimator_train's, and TL_EINVAL for
 * epochs < 0.
 */
TL_API tl_status tl_estimator_train_epochs(tl_estimator *est, const tl_labeled_data *data, int64_t epochs,
                                           tl_train_result *res);

/* ---- input_fn: datasets deployed as TPUEstimator deploys them ------------ */

typedef struct tl_dataset tl_dataset; /* tpuloop/dataset.h */

/*
 * What an input_fn is told (spec tpu_estimator.md §4.1): params['batch_size']
 * and context.current_input_fn_deployment(), the 4-tuple (host, index,
 * total, replicas fed). A dataset usually shards itself with
 * shard(total, index) and batches with batch(batch_size, drop_remainder).
 * first_replica is the first of the num_replicas replicas it feeds.
 */
typedef struct tl_input_context {
    tl_mode mode;
    int64_t batch_size;  /* params['batch_size'] */
    int host;            /* the host that runs this invocation */
    int index;           /* invocation index, in invocation order */
    int total;           /* invocations of the mode */
    int num_replicas;    /* replicas this invocation feeds */
    int first_replica;
} tl_input_context;

/* Called once per invocation of the mode's input plan, in invocation order,
 * on the host thread; returns a new dataset whose elements are batches of
 * ctx->batch_size rows (the estimator destroys it). A non-OK status stops
 * the call with it. */
typedef tl_status (*tl_input_fn)(const tl_input_context *ctx, void *user, tl_dataset **out);

/*
 * An input: the input_fn, and which tensors of its elements the model's
 * features, its labels and its embedding ids are. The features of an
 * example are the listed tensors' values concatenated in order, as float32
 * (int32 and int64 values converted); with one tensor its per-example shape
 * is kept (an image stays (28, 28)). Ragged and bytes tensors cannot be
 * features (TL_EINVAL naming the key). The label is an int32 or int64
 * tensor of one value per example.
 *
 * With an embedding engine (tl_estimator_options.embedding), as
 * TPUEstimator's features dict is keyed by feature name: the ids of
 * embedding feature f are the tensor named embedding_keys[f], or with NULL
 * (or a NULL entry) the feature's name (tl_emb_feature_config.name,
 * "feature_<f>" when unnamed). It is int64 or int32, dense, and shaped
 * (batch) or (batch, W_f) — any (batch, ...) of W_f ids per example, W_f
 * as tl_estimator_options says (-1 marking an absent position of a
 * sequence). The ids reach the engine as int64, never as floats. These
 * tensors are not features unless feature_keys lists them (the features
 * need one value at least: a model of embeddings alone still takes one
 * dense tensor, which it may ignore). Errors of the call that reads the
 * input (TL_EINVAL unless said): no tensor of that key ("the input's elements have no id tensor ... for
 * embedding feature ..."); a float or bytes tensor ("ids must be int64 or
 * int32"); another width ("... has 3 ids per example; embedding feature
 * \"f\" takes 2"); a ragged (VarLen) one, TL_ENOTIMPL (parse it as a
 * FixedLenFeature of W_f values, -1 padded); num_embedding_keys other than
 * the engine's feature count; embedding_keys without an engine.
 */
typedef struct tl_input {
    tl_input_fn input_fn;
    void *user;
    const char *const *feature_keys; /* (num_feature_keys); NULL: every dense numeric tensor but the label and the
                                        embedding ids, in element order */
    int num_feature_keys;
    const char *label_key;           /* NULL: "label" */
    const char *const *embedding_keys; /* (num_embedding_keys) the id tensor of each embedding feature, in the
                                          engine's feature order; NULL: the features' names */
    int num_embedding_keys;          /* the engine's num_features when embedding_keys is set */
    /* Training: the datasets end (they repeat a finite number of times).
     * Training then runs with neither train_steps nor max_steps until the
     * first of them ends, as Estimator.train(steps=None) runs until
     * OutOfRange; TPUEstimator's "one of steps or max_steps must be set"
     * applies only to inputs without an end. Whether or not it is set, a
     * training input that ends stops training at that step (the partial
     * step's batches are dropped; res->end_of_input). */
    bool finite;
} tl_input;

/*
 * tl_estimator_train with the input from in->input_fn, deployed by the
 * configuration's per_host_input_for_training: PER_SHARD_V1 calls it once
 * per replica, PER_HOST_V1 once per host (splitting each host batch into its
 * replicas' contiguous chunks), PER_HOST_V2 once per host and get_next once
 * per replica, BROADCAST once, copying the batch to every replica (feed.h in
 * the runtime says it exactly). The datasets' positions are saved with
 * every checkpoint (the U8 tensor "input_datasets": a JSON array of one
 * tl_dataset_save text per invocation; with several hosts each host's file
 * beside the checkpoint holds its own invocations' texts, null for the
 * others; checkpoints of earlier versions hold it as a metadata key, which
 * restore reads too) and restored with it, so a
 * resumed run reads exactly the
 * examples the uninterrupted one would have. res->infeed_wait_seconds says
 * how long the replicas waited for input. An input that ends stops training
 * at the step where the first invocation's dataset ends, with a checkpoint
 * there (res->end_of_input), as Estimator.train does at OutOfRange. Further
 * errors: the input_fn's status; TL_EINVAL when an element lacks a key or
 * has the wrong number of rows ("features must have static shape": batch
 * with drop_remainder); the datasets' errors, naming the file and record.
 */
TL_API tl_status tl_estimator_train_input(tl_estimator *est, const tl_input *in, tl_train_result *res);

typedef struct tl_eval_result {
    int64_t global_step;  /* of the evaluated parameters */
    int64_t steps;
    double loss;          /* mean over steps and replicas, summed in replica order */
    double loss_replica0; /* TensorFlow's: replica 0's mean over steps */
    double accuracy;      /* argmax(logits) == label, over every evaluated example; NaN when the EVAL spec
                             sets no logits */
    int64_t examples;
    /* For a binary model — 2 classes, or one logit (batch, 1) whose
     * sigmoid is P(class 1) and whose predicted class is logit > 0: the ROC
     * AUC of P(class 1) = softmax of the logits, over every evaluated example (exact: ties between a positive
     * and a negative count one half, as the Mann-Whitney U). has_auc is false
     * (and auc NaN) for other models and when one class is absent. */
    double auc;
    bool has_auc;
    /* What options.metric_result returned, in its order (0 without it). */
    tl_metric metrics[TL_MAX_METRICS];
    int num_metrics;
} tl_eval_result;

/*
 * Evaluates eval_steps batches of eval_batch_size (all in one device loop, as
 * §7) from the start of data, in order. The host_call and eval_metrics
 * tensors of every step are kept until the loop ends (an area sized before
 * it: eval_steps x the replicas' tensors), then handed to the callbacks in
 * step order.
 *
 * On the plain Estimator's path — use_tpu false, or eval_on_tpu false (off
 * the one-core context) — one copy of the model on the host evaluates the
 * global eval_batch_size per step, to eval_steps batches or, without them
 * or sooner, the end of the data, as Estimator.evaluate runs to OutOfRange;
 * a last batch that comes short is evaluated at its own size (the model is
 * traced again for it) and its mean loss counts as one batch's, as
 * tf.metrics.mean over the batches' losses counts it. res->steps says how
 * many batches ran. Embedding tables live on the devices: that path refuses
 * them (TL_EINVAL). use_tpu false trains that way too: one model copy, the
 * global batch, whatever the devices.
 *
 * Errors: those of tl_config_check_eval and the EVAL input plan;
 * TL_EINVAL when data holds fewer than eval_steps * eval_batch_size examples
 * (naming how many batches there are); a callback's status (see
 * tl_estimator_options); TL_EINVAL for a reserved or malformed metric name.
 */
TL_API tl_status tl_estimator_evaluate(tl_estimator *est, const tl_labeled_data *data, tl_eval_result *res);

/* tl_estimator_evaluate with the input from in->input_fn, deployed as the
 * EVAL plan says (PER_HOST_V1, PER_HOST_V2, BROADCAST or SLICED: one call on
 * host 0 with eval_batch_size, sliced into the replicas' batches). Errors:
 * as tl_estimator_train_input's. */
TL_API tl_status tl_estimator_evaluate_input(tl_estimator *est, const tl_input *in, tl_eval_result *res);

typedef struct tl_predict_result {
    float *values;         /* (num_examples, width): one row per real example, in input order */
    int64_t num_examples;
    int64_t width;         /* elements of one example's predictions */
    int64_t device_steps;  /* batches each replica ran: ceil(num_examples / predict_batch_size) + the stop batch */
    int64_t padded_rows;   /* zero rows that filled short batches; their outputs are dropped */
    int64_t global_step;
} tl_predict_result;

/*
 * Predicts every example of data (labels unused) with the configuration's
 * predict_batch_size, as §8: the infeed thread cuts the data into batches,
 * pads the last one with zero rows (padding_mask 1), then appends the stop
 * batch — a copy of the first batch marked stopping — and the workers run
 * batches until that one, which runs as a device step too and whose outputs
 * are dropped with the padded rows'. values holds exactly one row per example
 * in input order. T58: 10 examples, predict_batch_size 4, 2 replicas → 4
 * device steps (4 real, 4 real, 2 real + 2 padded, stop). Data with no
 * examples gives an empty result (values a valid pointer to nothing,
 * num_examples 0, device_steps 0): there is no first batch to repeat, and
 * nothing runs. The predictions are the model_fn's spec->predictions
 * (spec->logits when unset). The estimator must have been created with
 * predict_batch_size set. Free values with tl_predict_result_free.
 * Errors: the PREDICT input plan's, TL_EINVAL without predict_batch_size,
 * TL_ENOMEM, a worker's error.
 */
TL_API tl_status tl_estimator_predict(tl_estimator *est, const tl_labeled_data *data, tl_predict_result *res);

/* tl_estimator_predict with the input from in->input_fn (labels not read),
 * deployed as the PREDICT plan says, in device loops of
 * iterations_per_loop steps (100 in time mode): the input ends where every
 * invocation's dataset ends — a short last batch is padded, an invocation
 * that ended first gives padding while others still read — and the stop
 * batch follows. values holds the real rows in input order: step by step,
 * replica by replica (BROADCAST: replica 0's). Errors: as
 * tl_estimator_train_input's, and tl_estimator_predict's. */
TL_API tl_status tl_estimator_predict_input(tl_estimator *est, const tl_input *in, tl_predict_result *res);
TL_API void tl_predict_result_free(tl_predict_result *res);

/* SHA-256 over every variable in name order as little-endian float32, then
 * (with an embedding engine) every table's parameters in table and id
 * order, as 64 hex digits and a NUL. Errors: TL_ENOMEM (a table's copy). */
TL_API tl_status tl_estimator_params_digest(const tl_estimator *est, char hex[65]);

/*
 * How the cores of a replica split the training program
 * (num_cores_per_replica > 1): prepares the estimator for the training data
 * (or input; give one) as its first train does — the model traced and
 * partitioned, nothing trained — and describes what each core runs as one
 * line of JSON (free with tl_free_string):
 *
 *   cores, kind        C, "spatial" (input_partition_dims) or "tensor" (ModelParallel layouts)
 *   batch              the replica's training batch
 *   activation_bytes   (C) each core's activations and gradients of one step
 *   gathered           values gathered whole where no rule keeps them split
 *   collectives        per kind (halo, gather, sum, slice, fanout): the count in a core's
 *                      program and the ops they come before ({"conv2d": 4})
 *   spatial            features (the shape), grid, tiles (per core: offset and size)
 *   variables          (tensor) each split variable: name, shape, split_dim, chunks (per core)
 *
 * Errors: TL_EINVAL for one core per replica, or neither or both of data
 * and input; those of the first train's preparation.
 */
TL_API tl_status tl_estimator_partition_plan(tl_estimator *est, const tl_labeled_data *data, const tl_input *input,
                                             char **json);

/*
 * Estimator.get_variable_value: copies variable `name` (trainable or state,
 * such as "bn/moving_mean") into out, n floats in row-major order, n being
 * the variable's element count. The model is built (and a restore takes
 * effect) at the first train, evaluate or predict, so call it after one.
 * Errors: TL_ENOTFOUND ("no variable named dense/kernl; the model has 4
 * variables"), TL_EINVAL (n is not its element count, or no model built yet).
 */
TL_API tl_status tl_estimator_variable_value(const tl_estimator *est, const char *name, float *out, int64_t n);

/* The global step. */
TL_API int64_t tl_estimator_global_step(const tl_estimator *est);

/*
 * A graceful stop on SIGINT and SIGTERM around a train call, as `tpuloop
 * train` and the Python package have it: installs process-wide handlers that
 * call tl_estimator_request_stop(est) (train then stops at its next loop
 * boundary, after a checkpoint: res->stopped) and write one line to stderr.
 * The first SIGINT restores SIGINT's default action, so a second one quits
 * at once; SIGTERM always asks. A signal the process ignores stays ignored.
 * tl_estimator_stop_signals_remove restores the handlers installed before
 * and returns the signal that asked for the stop since the install (0:
 * none). Call both from one thread. Errors: TL_EINVAL est NULL; TL_EBUSY
 * installed already (one train call at a time per process).
 */
TL_API tl_status tl_estimator_stop_signals_install(tl_estimator *est);
TL_API int tl_estimator_stop_signals_remove(void);

/*
 * The steps of the next train and evaluate calls, replacing the
 * configuration's train_steps, max_steps and eval_steps, as
 * Estimator.train(steps=, max_steps=) and evaluate(steps=) take them per
 * call; a negative value is None. train_steps count from the restored step,
 * max_steps is absolute (spec §3.2). Errors (TL_EINVAL, TensorFlow's
 * messages): "Can not provide both steps and max_steps.", and a 0 ("Must
 * specify steps > 0, given: 0", "Must specify max_steps > 0, given: 0").
 * Every host makes the same call.
 */
TL_API tl_status tl_estimator_set_steps(tl_estimator *est, int64_t train_steps, int64_t max_steps,
                                        int64_t eval_steps);

/* Whether mode's input plan can be made for the estimator's configuration
 * and topology — TensorFlow's deployment rules for the mode (several hosts
 * evaluate only with BROADCAST or PER_HOST_V2, ...), which it checks when
 * the mode runs, not before: training never fails on the rules of a mode it
 * does not run. Errors: the input plan's (topology.h). */
TL_API tl_status tl_estimator_check_mode(const tl_estimator *est, tl_mode mode);

/* The embedding engine the estimator drives (options.embedding, or the one
 * it made from options.embedding_config); NULL without one. Borrowed. */
TL_API tl_emb_engine *tl_estimator_embedding(const tl_estimator *est);

/*
 * Loads a checkpoint: every variable, its optimizer slots and the global
 * step, as the evaluate and predict commands (and a train that should start
 * from a given checkpoint) need. checkpoint_path NULL: the latest valid
 * checkpoint of the configuration's model_dir (corrupt newer ones skipped
 * with a warning); else that checkpoint file (or TensorFlow's prefix of it,
 * "model_dir/model.ckpt-200"), or a directory's latest valid one. The variables are the hard check: each of the model's variables in
 * name order, then their slots, must be in the file as F32 of the same shape,
 * and "global_step" an I64 scalar; the first that is not is the error, and
 * nothing changes. A checkpoint written with another configuration
 * (config_sha256) or topology is a warning naming what differs.
 *
 * The variables exist once the model is traced, at the first train, evaluate
 * or predict. Before that this call opens and checks the file (the
 * not-found and corrupt-file errors come from here) and the first of those
 * calls loads it, returning the variable errors below (and every later call
 * too, until a restore succeeds: an estimator never runs on parameters it
 * was asked to replace). The first train's own restore is then skipped.
 * Errors: TL_ENOTFOUND "Could not find trained model in model_dir: DIR."
 * when model_dir has no checkpoint, or the file does not exist; TL_EINVAL
 * without a path and without model_dir; TL_EPARSE for a corrupt file, or a
 * model_dir whose checkpoints are all corrupt; TL_EINVAL "checkpoint FILE:
 * variable 'dense_1/kernel' has shape [256, 128], the model needs [256,
 * 256]" (or "is missing", or "is I32, the model needs F32"); TL_EIO,
 * TL_ENOMEM.
 */
TL_API tl_status tl_estimator_restore(tl_estimator *est, const char *checkpoint_path);

/*
 * Asks a running (or the next) tl_estimator_train to stop at its next loop
 * boundary: it saves a checkpoint there (the graceful-shutdown save: also
 * without a checkpoint hook; none without model_dir), flushes the summaries
 * and returns TL_OK with stopped set. Only stores an atomic flag, so it is
 * async-signal-safe and may be called from any thread or a SIGTERM / SIGINT
 * handler. A request made between trains stops the next one at its start;
 * every train clears the request when it returns (one that arrives during
 * the last loop is met by the end itself).
 */
TL_API void tl_estimator_request_stop(tl_estimator *est);

/*
 * The event writer of training (model_dir/events.out.tfevents.*), so that a
 * host_call fn or the on_log callback can add its own scalars:
 *     tl_summary_scalar(tl_estimator_summary_writer(est), "lr", gs, lr, TL_SUMMARY_NOW);
 * NULL without model_dir, and before the first train opens it. Borrowed:
 * valid during train — from the host_call and on_log callbacks, which run on
 * the thread that called train — and until tl_estimator_destroy; not for use
 * from other threads while training runs.
 */
TL_API tl_summary_writer *tl_estimator_summary_writer(tl_estimator *est);

#ifdef __cplusplus
}
#endif
#endif /* TPULOOP_ESTIMATOR_H */
