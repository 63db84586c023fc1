/*
 * tpuloop/embedding.h — the embedding engine (TPUEmbedding): large tables
 * whose rows are looked up by sparse ids, combined per bag, and updated in
 * place by a fused optimizer, owned row by row by the devices.
 *
 * The calls mirror TensorFlow's ops. Per step and per tensor core (replica):
 *
 *     tl_emb_enqueue(eng, core, inputs, n, "training");   // EnqueueTPUEmbedding*Batch
 *     tl_emb_dedup dd;
 *     tl_emb_recv_dedup(eng, core, &dd);                   // XlaRecvTPUEmbeddingDeduplicationData
 *     tl_emb_recv_activations(eng, core, &dd, outputs, n); // XlaRecvTPUEmbeddingActivations
 *     ... the model computes dL/d(activation) for each output ...
 *     tl_emb_send_gradients(eng, core, &dd, grads, n, lrs, n_lr);  // XlaSendTPUEmbeddingGradients
 *
 * There is one output per feature, in feature order, of shape [B, D] (or
 * [B, S, D] for a sequence feature with max_sequence_length S, or
 * [B, output_shape..., D] for a feature with an output_shape), where B is
 * batch_size_per_tensor_core (or the step's batch, tl_emb_enqueue_batch) and
 * D the table's dim; the gradients have the
 * same list and shapes. Ids are int64.
 *
 * What a step does (tpu_embedding.md §3, §6, §7):
 *   - Bags. A feature's input gives each bag (sample, or sample and sequence
 *     position) a list of ids with weights (1 when none): dense (one id per
 *     bag), COO (sample, position) pairs, or ragged row splits. The combiner
 *     of the table gives each occurrence its gain before anything is merged:
 *     sum w, mean w/Σw, sqrtn w/√Σw². An empty bag gives zeros (and Σw = 0 on a
 *     non-empty bag too, counted in tl_emb_stats.zero_weight_bags).
 *   - Deduplication. Each core looks up each unique (table, id) of its step
 *     once; the dedup data says which unique row each occurrence reads.
 *   - Gradients. Row r's gradient is Σ gain_k · dL/d(out of bag_k) over its
 *     occurrences, summed — not averaged — over cores in ascending core
 *     order, then the table's optimizer (tpuloop/emb_optim.h) runs once on
 *     the row: rows are owned by one shard each and nothing locks them. The
 *     result does not depend on the number of shards or on DIV / MOD
 *     sharding, bit for bit.
 *   - Bad ids. An id < 0 or >= the table's vocabulary_size is, by
 *     bounds_check_mode: FATAL an error naming feature, position, id and
 *     vocabulary size; WARNING dropped (before gains) and counted; IGNORE
 *     dropped.
 *
 * Order. Per core: enqueue(n) → recv_dedup(n) → recv_activations(n) →
 * send_gradients(n) (TRAINING; not in INFERENCE). The step n + 1 activations
 * of any core need every core's step n gradients (unless
 * pipeline_execution_with_tensor_core: then forward n + 1 sees the table
 * before step n's update, which is applied right after it). Calls out of
 * this order, stale dedup data, or wrong counts and shapes are errors
 * (TL_ERUNTIME for order, TL_EINVAL for shapes), never a wait.
 *
 * Threads: the calls of different cores may run on different threads at
 * once; one core's calls must not overlap. The update of a step runs in the
 * send that completes it.
 */
#ifndef TPULOOP_EMBEDDING_H
#define TPULOOP_EMBEDDING_H

#include "tpuloop/base.h"
#include "tpuloop/emb_optim.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { TL_EMB_COMBINER_MEAN = 0, TL_EMB_COMBINER_SUM = 1, TL_EMB_COMBINER_SQRTN = 2 } tl_emb_combiner;

typedef enum {
    TL_EMB_INIT_TRUNCATED_NORMAL = 0, /* mean, stddev (0: 1/√dim), redrawn beyond 2 stddev */
    TL_EMB_INIT_ZEROS = 1,
    TL_EMB_INIT_CONSTANT = 2,         /* value */
    TL_EMB_INIT_UNIFORM = 3,          /* [minval, maxval) */
    TL_EMB_INIT_ROW_ID = 4            /* offset + row in every column (RowIdInitializer) */
} tl_emb_init_kind;

typedef struct tl_emb_initializer {
    tl_emb_init_kind kind;
    double mean, stddev, value, minval, maxval, offset;
} tl_emb_initializer;

/* TableConfig. */
typedef struct tl_emb_table_config {
    const char *name;             /* unique; NULL: "table_<i>" */
    int64_t vocabulary_size;      /* >= 1 */
    int dim;                      /* >= 1 */
    tl_emb_initializer initializer;
    const tl_emb_optimizer *optimizer; /* NULL: the config's */
    tl_emb_combiner combiner;     /* MEAN by default, as TensorFlow */
} tl_emb_table_config;

/* Dims of an output_shape after the batch. */
#define TL_EMB_MAX_OUTPUT_DIMS 4

/* FeatureConfig. */
typedef struct tl_emb_feature_config {
    const char *name;            /* NULL: "feature_<i>" */
    int table;                   /* index into the tables */
    int max_sequence_length;     /* >= 0; > 0 makes a sequence feature [B, S, D] */
    bool has_combiner;           /* the enqueue's per-input combiner instead of the table's */
    tl_emb_combiner combiner;
    /* FeatureConfig.output_shape without its batch dimension: each sample
     * has P = Π output_shape bags and the output is [B, output_shape..., D]
     * (0 dims: one bag per sample, [B, D]). Not with max_sequence_length. */
    int num_output_dims;         /* 0..TL_EMB_MAX_OUTPUT_DIMS */
    int64_t output_shape[TL_EMB_MAX_OUTPUT_DIMS]; /* (num_output_dims) each >= 1 */
} tl_emb_feature_config;

/* TPUEmbeddingConfiguration.Mode and the enqueue's mode_override. */
typedef enum {
    TL_EMB_MODE_UNSPECIFIED = 0,
    TL_EMB_MODE_INFERENCE = 1,
    TL_EMB_MODE_TRAINING = 2,
    TL_EMB_MODE_BACKWARD_PASS_ONLY = 3
} tl_emb_mode;

typedef enum { TL_EMB_DIV_DEFAULT = 0, TL_EMB_MOD = 1 } tl_emb_sharding;

typedef enum { TL_EMB_BOUNDS_FATAL = 0, TL_EMB_BOUNDS_WARNING = 1, TL_EMB_BOUNDS_IGNORE = 2 } tl_emb_bounds_check;

typedef struct tl_emb_config {
    const tl_emb_table_config *tables;     /* (num_tables) */
    int num_tables;
    const tl_emb_feature_config *features; /* (num_features) */
    int num_features;
    tl_emb_optimizer optimizer;            /* for tables without their own */
    tl_emb_mode mode;                      /* TRAINING or INFERENCE or BACKWARD_PASS_ONLY */
    int num_tensor_cores;                  /* C >= 1: the replicas that enqueue */
    int batch_size_per_tensor_core;        /* B >= 1 */
    int num_shards;                        /* owners of rows (devices, over all hosts), >= 1 */
    tl_emb_sharding sharding_strategy;
    /* Several processes (hosts): rows go to num_hosts host shards by the
     * sharding strategy (§8.1), then to the host's num_shards / num_hosts
     * shards the same way. This engine holds host shard `host` only; the
     * others' rows reach it by tl_emb_export_rows / tl_emb_import_rows. */
    int num_hosts;                         /* >= 1, dividing num_shards; 0 means 1 */
    int host;                              /* [0, num_hosts) */
    bool pipeline_execution_with_tensor_core;
    tl_emb_bounds_check bounds_check_mode;
    uint64_t seed;                         /* the initializers' */
} tl_emb_config;

/* Fills *c: no tables, mode TRAINING, 1 core, batch 1, 1 shard, DIV, one
 * host, FATAL, the global optimizer SGD at 0.01, seed 0. */
TL_API void tl_emb_config_default(tl_emb_config *c);

/* ---- sharding (§8) -------------------------------------------------------- */

/* Rows of shard s of S: floor(V/S) + (s < V % S). Both strategies. */
TL_API int64_t tl_emb_shard_rows(int64_t vocabulary_size, int num_shards, int shard);

/* The shard and the row inside it of id (0 <= id < V). DIV_DEFAULT:
 * contiguous ranges, the first V % S shards one row longer; MOD: id % S and
 * id / S. */
TL_API void tl_emb_shard_of(tl_emb_sharding strategy, int64_t vocabulary_size, int num_shards, int64_t id, int *shard,
                            int64_t *local);

/* The inverse: the id of row `local` of shard `shard` (0 <= local <
 * tl_emb_shard_rows(vocabulary_size, num_shards, shard)). */
TL_API int64_t tl_emb_shard_id(tl_emb_sharding strategy, int64_t vocabulary_size, int num_shards, int shard,
                               int64_t local);

/* ---- the engine ------------------------------------------------------------ */

typedef struct tl_emb_engine tl_emb_engine;

/*
 * Builds the engine: checks the config (TensorFlow's words where it has
 * them: "Multiple tables with name X found.", "TPUEmbeddingConfiguration.mode
 * is INVALID.  Must be INFERENCE, TRAINING, or BACKWARD_PASS_ONLY", "All
 * embedding shards must be non-empty, shard ID: s is empty, vocabulary size:
 * V, number of shards: S", every optimizer's tl_emb_optimizer_validate),
 * allocates each table shard's rows and slots in one block and initializes
 * them. The config is copied. Errors: TL_EINVAL, TL_ENOTIMPL, TL_ENOMEM.
 */
TL_API tl_status tl_emb_engine_create(const tl_emb_config *cfg, tl_emb_engine **out);
TL_API void tl_emb_engine_destroy(tl_emb_engine *eng);

/*
 * What cfg's engine would need, without building it: *table_bytes the
 * tables and slots it holds (its host shard's rows), Σ rows × dim × 4 ×
 * (1 + slots); *bytes_per_id the
 * per-step workspace for each id a core enqueues in a step (an upper bound:
 * every id taken as a unique row of the widest table, with the hashes at
 * load 1/2 and the accumulation of several cores), so a step of n ids on C
 * cores holds at most n × C × *bytes_per_id. Errors: as tl_emb_engine_create's
 * checks of cfg (no allocation).
 */
TL_API tl_status tl_emb_config_bytes(const tl_emb_config *cfg, int64_t *table_bytes, int64_t *bytes_per_id);

/* The engine's copy of its configuration: every table's name and
 * optimizer filled in (the config's or the global one), every feature's
 * name. Valid until the engine is destroyed; NULL for a NULL engine. */
TL_API const tl_emb_config *tl_emb_engine_config(const tl_emb_engine *eng);

/* How many dynamic values each send must pass (learning_rates[0..n)): one
 * more than the highest learning-rate tag, or FrequencyAwareAdagrad's
 * step_counter tag, of any table; 0 when every value is constant. */
TL_API int tl_emb_num_dynamic(const tl_emb_engine *eng);

/* Bytes of the tables and slots this engine holds: Σ rows × dim × 4 ×
 * (1 + slots), the rows of its host shard. */
TL_API int64_t tl_emb_table_bytes(const tl_emb_engine *eng);
/* The largest per-step workspace the engine holds at the configured batch
 * (ids, dedup, gradients), an upper bound. */
TL_API int64_t tl_emb_workspace_bytes(const tl_emb_engine *eng);

/* ---- inputs (§6.2, §6.3) ---------------------------------------------------- */

/* For a feature with an output_shape (P bags per sample) a "sample" below
 * is a bag: B * P of them, in row-major order of [B, output_shape...]
 * (TensorFlow's bag key of a higher-rank SparseTensor, flattened). */
typedef enum {
    TL_EMB_INPUT_DENSE = 0,  /* ids[n]: one id per bag; n = B (B*S for a sequence feature, B*P with an output_shape) */
    TL_EMB_INPUT_COO = 1,    /* indices[n][2] = (sample, position), ids[n], weights[n] or NULL */
    TL_EMB_INPUT_RAGGED = 2  /* row_splits[B + 1], ids[row_splits[B]], weights or NULL */
} tl_emb_input_kind;

typedef struct tl_emb_input {
    tl_emb_input_kind kind;
    const int64_t *ids;     /* (n) */
    int64_t n;
    const int64_t *indices; /* COO: (n, 2) */
    const int64_t *row_splits; /* RAGGED: (B + 1) */
    const float *weights;   /* (n) or NULL (all 1); not with DENSE */
} tl_emb_input;

/*
 * Enqueues core's inputs of its next step, one per feature in order.
 * mode_override: NULL or "unspecified" (the config's mode), "inference",
 * "training" (or "train"), "backward_pass_only". Errors: TL_EINVAL for a
 * wrong count ("expected 3 inputs, one per feature, got 2"), a bad shape
 * or sample index, an out-of-range id under FATAL (naming feature,
 * position, id, vocabulary size), weights on a dense input ("Weight
 * specified for dense input ..."), a bad mode, 2^30 or more ids in one
 * step; TL_ERUNTIME when core already has 4 steps in flight (enqueued,
 * received or sent, and not yet applied).
 */
TL_API tl_status tl_emb_enqueue(tl_emb_engine *eng, int core, const tl_emb_input *inputs, int n,
                                const char *mode_override);

/*
 * tl_emb_enqueue for a step of `batch` samples instead of
 * batch_size_per_tensor_core (0: that one), as TensorFlow builds a
 * TPUEmbedding per mode with the mode's batch over the same tables (an
 * evaluation batch differs from the training one): this step's inputs,
 * outputs and gradients are [batch, D] (or [batch, S, D]). The workspace
 * grows to fit and is kept. Errors: as tl_emb_enqueue; TL_EINVAL for a
 * batch outside [1, 2^30) or one that makes 2^30 bags of a feature.
 */
TL_API tl_status tl_emb_enqueue_batch(tl_emb_engine *eng, int core, const tl_emb_input *inputs, int n,
                                      const char *mode_override, int64_t batch);

/* ---- deduplication data (§7.1, §7.2) ----------------------------------------- */

/* A core's step as the TensorCore sees it: integers (unique rows per
 * table, bag offsets, the unique index of each occurrence) and floats (the
 * gain of each occurrence), opaque apart from round-tripping through
 * tl_emb_dedup_split / _merge. Owned by the engine until the step's send
 * (or, in INFERENCE, the core's next recv_dedup). */
typedef struct tl_emb_dedup {
    int core;
    int64_t step;
    const int32_t *ints; /* (num_ints) */
    int64_t num_ints;
    const float *floats; /* (num_floats) */
    int64_t num_floats;
} tl_emb_dedup;

/* Pops core's oldest enqueued step. Errors: TL_ERUNTIME when nothing is
 * enqueued, or the previous TRAINING step was not sent. */
TL_API tl_status tl_emb_recv_dedup(tl_emb_engine *eng, int core, tl_emb_dedup *out);

/*
 * Writes the activations: outputs[f] gets feature f's [B, D] (or [B, S, D])
 * floats. outputs NULL with n 0 receives the step without computing them,
 * for a core whose model runs in another process (which computes them
 * there): its gradients may then be sent. With several hosts, the rows
 * other hosts hold must be imported first (tl_emb_import_rows). Errors:
 * TL_EINVAL for n != num_features or a NULL output; TL_ERUNTIME for rows
 * not imported;
 * TL_ERUNTIME for stale or foreign dedup data, a step whose previous step
 * some core has not sent (non-pipelined), or BACKWARD_PASS_ONLY.
 */
TL_API tl_status tl_emb_recv_activations(tl_emb_engine *eng, int core, const tl_emb_dedup *dd, float *const *outputs,
                                         int n);

/*
 * Sends core's gradients for dd's step: grads[f] has the shape of output
 * f. learning_rates[0..n_lr) are the dynamic learning rates and
 * hyperparameters by tag. The step's update runs when the last core sends
 * (or, pipelined, after the next step's activations). Errors: TL_ERUNTIME
 * in INFERENCE ("Only in training mode gradients need to be sent"), for a
 * send before the activations, a second send, or stale dedup data;
 * TL_EINVAL for n != num_features, or tags out of range.
 */
TL_API tl_status tl_emb_send_gradients(tl_emb_engine *eng, int core, const tl_emb_dedup *dd, const float *const *grads,
                                       int n, const float *learning_rates, int n_lr);

/*
 * Owner apply: the update of a step is split over the cores instead of
 * running in the send that completes it. Each core, once every core has
 * sent the step (the caller knows: after a collective), calls
 * tl_emb_apply_owned and updates the rows it owns (ids with id mod C ==
 * core), in parallel with the others; the last one ends the step. The bits
 * are the same as the serial apply's: each row is summed over cores in
 * ascending order and updated once. Set it between steps. Errors:
 * TL_EINVAL with pipeline_execution_with_tensor_core; TL_ERUNTIME while a
 * training step is in flight.
 */
TL_API tl_status tl_emb_set_owner_apply(tl_emb_engine *eng, bool on);

/* Core's part of its last received training step's update (owner apply).
 * Errors: TL_ERUNTIME without owner apply, when some core has not sent the
 * step yet (never a wait), or when core already applied it; TL_ENOMEM. */
TL_API tl_status tl_emb_apply_owned(tl_emb_engine *eng, int core);

/* ---- rows held by other hosts (num_hosts > 1) ------------------------------------
 *
 * With several hosts each engine holds its host shard of every table, and
 * plays every core: its own host's cores from their inputs, the others'
 * from the same ids (gathered), so every engine knows every core's unique
 * rows and which host holds each. A core's activations read rows that
 * other hosts hold: before them, each holding host exports the core's rows
 * it holds, and the core's engine imports them, host by host:
 *
 *     // on host h, playing core c (after its recv_dedup):
 *     tl_emb_rows_floats(eng, &dd_c, h, &n);  tl_emb_export_rows(eng, &dd_c, buf, n);
 *     // on core c's host, for each other host h (same order of rows):
 *     tl_emb_import_rows(eng, &dd, h, buf_from_h, n);
 *     tl_emb_recv_activations(eng, c, &dd, outputs, F);
 *
 * After its send, a core's per-row gradient sums go to the hosts that hold
 * the rows, the same way, and each of them sends them there for the core:
 *
 *     // on core c's host, for each other host h:
 *     tl_emb_export_gradients(eng, &dd, h, buf, n);   // n: tl_emb_rows_floats(eng, &dd, h, &n)
 *     // on host h:
 *     tl_emb_send_row_gradients(eng, c, &dd_c, buf, n, lrs, n_lr);
 *
 * An engine updates only the rows it holds, each once per step from every
 * core's sums in ascending core order, so the tables are the bits of one
 * engine holding everything.
 */

/* *floats: the floats of dd's step's unique rows held by `host` (each its
 * table's dim). Errors: TL_EINVAL for a host outside [0, num_hosts);
 * TL_ERUNTIME for stale dedup data. */
TL_API tl_status tl_emb_rows_floats(tl_emb_engine *eng, const tl_emb_dedup *dd, int host, int64_t *floats);

/* Writes the parameters of dd's step's unique rows this engine holds, in
 * the step's order of unique rows, into out (floats of them, as
 * tl_emb_rows_floats for this host). Every earlier training step must be
 * applied, as for the activations. Errors: TL_EINVAL for another count;
 * TL_ERUNTIME for stale dedup data or an earlier step not applied. */
TL_API tl_status tl_emb_export_rows(tl_emb_engine *eng, const tl_emb_dedup *dd, float *out, int64_t floats);

/* Takes the rows of dd's step held by `host`, as that host's engine
 * exported them (floats of them), for the step's activations. Errors:
 * TL_EINVAL for another count or this engine's own host; TL_ERUNTIME for
 * stale dedup data, or rows of host imported already. */
TL_API tl_status tl_emb_import_rows(tl_emb_engine *eng, const tl_emb_dedup *dd, int host, const float *rows,
                                    int64_t floats);

/* Writes the gradient sums of dd's step's unique rows held by `host`, in
 * the step's order of unique rows (floats as tl_emb_rows_floats), after
 * the core's send. Errors: TL_EINVAL for another count; TL_ERUNTIME before
 * the send or for stale dedup data. */
TL_API tl_status tl_emb_export_gradients(tl_emb_engine *eng, const tl_emb_dedup *dd, int host, float *out,
                                         int64_t floats);

/* The send of core's dd step on an engine that plays it for another host:
 * grads are the sums of the step's rows this engine holds, as the core's
 * host exported them (floats of them). Otherwise as tl_emb_send_gradients:
 * the same order checks, learning rates and update. */
TL_API tl_status tl_emb_send_row_gradients(tl_emb_engine *eng, int core, const tl_emb_dedup *dd, const float *grads,
                                           int64_t floats, const float *learning_rates, int n_lr);

/* Applies a pipelined step's pending update now (before a retrieve or a
 * checkpoint). Does nothing when none is pending. */
TL_API tl_status tl_emb_flush(tl_emb_engine *eng);

/* ---- load / retrieve (§4) ---------------------------------------------------- */

/*
 * The rows of host shard shard_id of num_shards (the config's sharding
 * strategy; rows in local order) of table (by index, or by name when
 * table < 0; exactly one given): state[0] the parameters, state[1..] the
 * slots in tl_emb_slot_name order, each rows × dim floats. Retrieve flushes
 * a pending update first. With several hosts an engine has the rows of its
 * own host shard only: (num_hosts, host), or any shard inside it. Errors:
 * TL_EINVAL "exactly one of table_id or table_name must be non-default",
 * "The number of shards for the embedding layer must be > 0. Currently set
 * to: S", "The value of shard_id must be >= 0 and < S", a wrong n_state or
 * rows, a shard with rows another host holds (nothing is loaded then).
 */
TL_API tl_status tl_emb_load(tl_emb_engine *eng, int table, const char *table_name, int num_shards, int shard_id,
                             const float *const *state, int n_state, int64_t rows);
TL_API tl_status tl_emb_retrieve(tl_emb_engine *eng, int table, const char *table_name, int num_shards, int shard_id,
                                 float *const *state, int n_state, int64_t rows);

/* ---- counters -------------------------------------------------------------- */

typedef struct tl_emb_stats {
    int64_t steps_applied;
    int64_t dropped_ids;       /* out of range under WARNING / IGNORE */
    int64_t zero_weight_bags;  /* mean / sqrtn bags with Σw (Σw²) = 0 */
    int64_t lookups;           /* occurrences looked up */
    int64_t unique_rows;       /* unique (table, id) per core and step, summed */
} tl_emb_stats;

TL_API void tl_emb_get_stats(const tl_emb_engine *eng, tl_emb_stats *out);

/* ---- dedup tuples (SplitDedupData / MergeDedupData, §7.1) --------------------- */

/*
 * TensorFlow's tuple_mask of a tuple whose element i is an integer
 * (is_float[i] false) or a float: a row [type, length] per run of
 * same-typed elements, type 0 integer and 1 float; (1, 2, 0.1, 3) gives
 * [[0, 2], [1, 1], [0, 1]]. Writes up to cap rows of mask (int32[2] each)
 * and returns the number of rows.
 */
TL_API int tl_emb_tuple_mask(const bool *is_float, int n, int32_t (*mask)[2], int cap);

/* SplitDedupData: the integers of a tuple in order into ints and the
 * floats into floats (values[i] is element i as double). Returns TL_EINVAL
 * if the mask does not cover n elements. */
TL_API tl_status tl_emb_dedup_split(const double *values, int n, const int32_t (*mask)[2], int mask_rows,
                                    int64_t *ints, double *floats);
/* MergeDedupData: the inverse. */
TL_API tl_status tl_emb_dedup_merge(const int64_t *ints, const double *floats, const int32_t (*mask)[2], int mask_rows,
                                    double *values, int n);

#ifdef __cplusplus
}
#endif
#endif /* TPULOOP_EMBEDDING_H */
