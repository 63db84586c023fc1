/*
 * tpuloop/config.h — the run configuration: TensorFlow's RunConfig and
 * TPUConfig fields, TPUEstimator's batch sizes, and tpuloop's own (devices,
 * num_hosts), with TensorFlow's defaults and its validation in its order.
 *
 * Values come from these sources; a later one wins:
 *
 *   1. built-in defaults (TensorFlow's),
 *   2. a model_dir's config.json, when the job reuses a model_dir
 *      (tl_config_load_model_dir): below every source that follows, whatever
 *      the order of the calls,
 *   3. a JSON file; TPUConfig fields nest under "tpu_config":
 *          {"model_dir": "/tmp/m", "train_batch_size": 1024,
 *           "tpu_config": {"iterations_per_loop": "1h", "num_cores_per_replica": 2}}
 *   4. environment variables named by the spec or tpuloop (TPULOOP_DEVICE_COUNT
 *      for `devices`; TF_CONFIG's service.tpu_worker_job_name for an unset
 *      tpu_job_name),
 *   5. `--name=value` flags with the leaf names (--iterations_per_loop=1h).
 *
 * Among 3 to 5 the call made last wins (the CLI calls them in this order).
 *
 * One option table drives the file keys, the flags, the defaults, the bounds,
 * the validation and `tpuloop help config` (tl_config_help).
 *
 * Setting a value only records it (an unknown key or a malformed file is an
 * error at once). tl_config_resolve() then checks every value in TensorFlow's
 * order — TPUConfig's constructor checks first, then RunConfig's, then
 * TPUEstimator's constructor checks — so the first failure is the one
 * TensorFlow would report, with TensorFlow's message, the source of the value
 * appended: "num_cores_per_replica must be 1, 2, 4, 8, 16, 32, 64, 128; got 3
 * [from --num_cores_per_replica]".
 *
 *     tl_config *cfg;
 *     tl_config_create(&cfg);
 *     tl_config_load_file(cfg, "run.json");
 *     tl_config_apply_env(cfg, (const char *const *)environ);
 *     tl_config_apply_args(cfg, argc, argv, &nrest, rest);
 *     if (tl_config_resolve(cfg) != TL_OK)
 *         fprintf(stderr, "error: %s\n", tl_last_error());
 *     const tl_run_config *rc = tl_config_get(cfg);
 *     printf("%lld steps per loop\n", (long long)rc->tpu.iterations_per_loop.value);
 *     tl_config_destroy(cfg);
 */
#ifndef TPULOOP_CONFIG_H
#define TPULOOP_CONFIG_H

#include "tpuloop/base.h"
#include "tpuloop/example.h"
#include "tpuloop/text_data.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- iterations_per_loop ------------------------------------------------ */

typedef enum { TL_IPL_COUNT = 0, TL_IPL_SECONDS = 1 } tl_ipl_unit;

typedef struct tl_ipl {
    tl_ipl_unit unit;
    int64_t value; /* steps, or seconds (m and h already multiplied out) */
} tl_ipl;

/*
 * Parses iterations_per_loop with TensorFlow's grammar: a positive decimal
 * count without leading zeros ("1", "123"), or such a number followed by one
 * of s, m, h ("30s", "1m" = 60 s, "1h" = 3600 s). Everything else is
 * TL_EINVAL with a message containing "must be positive": zero, signs,
 * fractions, spaces, upper-case units, and the two Python regex quirks ("5|",
 * a trailing newline), which TensorFlow accepts by accident and tpuloop
 * rejects as the spec recommends. Overflow of int64 (after the unit) is
 * TL_EINVAL too.
 */
TL_API tl_status tl_parse_iterations_per_loop(const char *text, tl_ipl *out);

/* ---- input deployment (TensorFlow's InputPipelineConfig values) --------- */

typedef enum {
    TL_PER_SHARD_V1 = 1,
    TL_PER_HOST_V1 = 2,
    TL_PER_HOST_V2 = 3,
    TL_BROADCAST = 4,
    TL_SLICED = 5
} tl_input_mode;

/* "PER_SHARD_V1", ... "SLICED"; "UNKNOWN" for other values. */
TL_API const char *tl_input_mode_name(tl_input_mode m);

/* ---- values ------------------------------------------------------------- */

/* An integer that may be None. */
typedef struct tl_opt_int {
    bool set;
    int64_t value;
} tl_opt_int;

/* input_partition_dims, parsed (see tl_partition_* in topology.h). */
typedef struct tl_partition_dims tl_partition_dims;

typedef struct tl_tpu_config {
    tl_ipl iterations_per_loop;               /* default 2 steps */
    tl_opt_int num_shards;                     /* deprecated; must equal replicas if set */
    tl_opt_int num_cores_per_replica;          /* None: no model parallelism */
    tl_input_mode per_host_input_for_training; /* default PER_HOST_V1 (True) */
    const char *tpu_job_name;                  /* NULL when None and TF_CONFIG names none */
    int64_t initial_infeed_sleep_secs;         /* 0: no sleep */
    const tl_partition_dims *input_partition_dims; /* NULL when None */
    tl_input_mode eval_training_input_configuration; /* PER_HOST_V1 or SLICED */
    int64_t experimental_host_call_every_n_steps;    /* >= 1, default 1 */
    bool experimental_allow_per_host_v2_parallel_get_next;
} tl_tpu_config;

#define TL_MAX_HIDDEN_LAYERS 16

/* The "model" section: the built-in model `tpuloop train` runs. */
typedef struct tl_model_config {
    const char *model_name;       /* "mlp" */
    int num_hidden;
    int64_t hidden_units[TL_MAX_HIDDEN_LAYERS];
    int num_bottom, num_top;      /* dlrm */
    int64_t bottom_mlp[TL_MAX_HIDDEN_LAYERS];
    int64_t top_mlp[TL_MAX_HIDDEN_LAYERS];
    int num_cross;                /* dcn: num_cross_layers, [0, 16] */
    const char *activation;       /* "relu", "sigmoid" or "tanh" */
    double dropout;               /* [0, 1) */
    const char *optimizer;        /* "sgd", "momentum", "adagrad", "adam", "rmsprop" */
    double learning_rate;         /* > 0 */
    const char *learning_rate_decay; /* "none" or "cosine" */
    tl_opt_int decay_steps;       /* >= 1; set exactly when learning_rate_decay is cosine */
    bool reduce_sum;              /* cross_shard_reduction SUM; MEAN by default */
} tl_model_config;

/*
 * The "input" section: the data `tpuloop train`, `evaluate` and `predict`
 * read. fashion_mnist and the synthetic sets are loaded into memory; the file
 * datasets (tfrecord, criteo, csv, idx) are read by a tf.data-style pipeline
 * (dataset.h) built once per input_fn invocation:
 *
 *   files -> shard -> interleave / source -> parse_example -> shuffle
 *         -> repeat (training) -> batch(drop_remainder) -> prefetch
 *
 * Every array below lives in the configuration and stays valid as long as
 * the resolved tl_run_config does.
 */
typedef struct tl_input_config {
    const char *dataset;          /* "fashion_mnist", "synthetic", "criteo_synthetic", "synthetic_sequences",
                                     "tfrecord", "criteo", "csv" or "idx" */
    const char *data_dir;         /* NULL: the Debian package's directory */
    tl_opt_int epochs;
    /* The synthetic datasets' sizes. Each is set exactly when the dataset
     * reads it, to the value given or its default, and unset otherwise. */
    tl_opt_int synthetic_examples;      /* training examples: synthetic (default 60000), criteo_synthetic (1048576) */
    tl_opt_int synthetic_eval_examples; /* evaluation examples, the next ones: synthetic (10000),
                                           criteo_synthetic (131072) */
    tl_opt_int synthetic_vocab_cap;     /* criteo_synthetic: vocabulary c is min(Criteo Kaggle's c, cap) (100000);
                                           unset when synthetic_vocab_sizes is given */
    const int64_t *synthetic_vocab_sizes; /* (26) criteo_synthetic: vocabulary of C1..C26, each in
                                             [1, 2^31 - 1]; NULL when None (the cap applies) */
    tl_opt_int synthetic_num_features;  /* synthetic: features per example (784) */
    tl_opt_int synthetic_sequence_length; /* synthetic_sequences: tokens per sequence (16) */
    tl_opt_int synthetic_vocab;         /* synthetic_sequences: token ids (and labels) in [0, this) (16) */
    const char *const *files;     /* (num_files) paths or glob patterns; NULL when None */
    int num_files;
    const char *const *eval_files;/* (num_eval_files); NULL when None (evaluate reads files) */
    int num_eval_files;
    const char *compression;      /* tfrecord: "AUTO" (by the first bytes), "", "NONE", "GZIP", "ZLIB" */
    const tl_feature_spec *features; /* (num_features) tfrecord, sorted by key; NULL when None */
    int num_features;
    const char *const *feature_keys; /* (num_feature_keys) the model's features, in order; NULL: every
                                        dense numeric tensor but the label */
    int num_feature_keys;
    const char *label_key;        /* the label tensor; "label" */
    tl_opt_int shuffle_buffer_size; /* None: no shuffle */
    bool reshuffle_each_iteration;  /* true */
    int64_t cycle_length;         /* tfrecord files read at once; 1 */
    int64_t block_length;         /* records of one file before the next; 1 */
    int64_t num_parallel_calls;   /* tfrecord parse threads, 1..64; 1 */
    int64_t prefetch;             /* batches read ahead; 0 = none; 2 */
    bool skip_corrupt_records;    /* false */
    const int64_t *vocab_sizes;   /* (26) criteo's per-column modulus (0: none); NULL when None */
    const tl_csv_column *csv_columns; /* (num_csv_columns) csv; NULL when None */
    int num_csv_columns;
    const char *label_column;     /* csv's int64 label column; NULL: label_key */
    double scale;                 /* every dataset: features = (float)value * scale, not label or ids; 1.0 */
} tl_input_config;

typedef struct tl_run_config {
    tl_tpu_config tpu;
    const char *model_dir;         /* NULL when None */
    const char *master;            /* "" by default */
    const char *evaluation_master; /* defaults to master */
    bool use_tpu;                  /* false: plain Estimator path, one input_fn call with G */
    bool eval_on_tpu;
    tl_opt_int train_batch_size;   /* global batch per mode */
    tl_opt_int eval_batch_size;
    tl_opt_int predict_batch_size;
    tl_opt_int save_checkpoints_steps; /* both None: no checkpoint hook */
    tl_opt_int save_checkpoints_secs;  /* 600 when neither is given */
    int64_t keep_checkpoint_max;       /* 0 keeps all */
    double keep_checkpoint_every_n_hours; /* > 0; -1 (TL_CKPT_KEEP_HOURS_NONE) when None */
    tl_opt_int save_summary_steps;
    tl_opt_int log_step_count_steps;   /* None: no logging hooks */
    tl_opt_int tf_random_seed;
    tl_opt_int train_steps;            /* train()'s steps: relative */
    tl_opt_int max_steps;              /* train()'s max_steps: absolute */
    tl_opt_int eval_steps;
    const char *warm_start_from;       /* NULL: no warm start; a checkpoint file or a model_dir */
    const char *warm_start_vars;       /* Python regex (re.match); NULL warm-starts nothing; default ".*" */
    tl_opt_int eval_every_n_steps;     /* train_and_evaluate: save and evaluate every this many steps */
    int64_t throttle_secs;             /* EvalSpec.throttle_secs: >= 0; 600 */
    bool best_exporter;                /* train_and_evaluate: export the best checkpoint by loss */
    int64_t exports_to_keep;           /* best_exporter's newest exports kept; 5 */
    int64_t devices;                   /* per host; 0 discovers one per core */
    int64_t intra_op_parallelism_threads; /* per device; 0: the host's cores shared among its devices */
    int64_t num_hosts;
    int64_t host_timeout_secs;         /* several hosts: the longest wait for another host; 0 waits for ever */
    const char *params_json;           /* the user's params as a JSON object; "{}" by default */
    tl_model_config model;
    tl_input_config input;
    const char *embedding_json;        /* the "embedding" section as compact JSON; NULL when absent */
    const char *embedding_config;      /* a binary TPUEmbeddingConfiguration's path; NULL when absent */
    const char *layout_map_json;       /* the "layout_map" object as compact JSON, in the user's key order; NULL
                                          when absent */
} tl_run_config;

/* ---- the configuration object ------------------------------------------ */

/* A configuration is used by one thread at a time; once resolved, its
 * tl_run_config may be read from any number of threads while nobody changes
 * the configuration. */
typedef struct tl_config tl_config;

/* Creates a configuration holding the defaults. Errors: TL_ENOMEM. */
TL_API tl_status tl_config_create(tl_config **out);

/* Accepts NULL. */
TL_API void tl_config_destroy(tl_config *cfg);

/* Where an option's current value came from. Values are append-only, so
 * they are not the precedence: DEFAULT < MODEL_DIR < FILE, ENV, FLAG. */
typedef enum {
    TL_SOURCE_DEFAULT = 0,
    TL_SOURCE_FILE = 1,
    TL_SOURCE_ENV = 2,
    TL_SOURCE_FLAG = 3,
    TL_SOURCE_MODEL_DIR = 4 /* model_dir/config.json (tl_config_load_model_dir) */
} tl_config_source;

/*
 * Sets option `name` (a leaf name such as "num_shards", or a dotted one such
 * as "tpu_config.num_shards") from text as a flag gives it: integers, reals,
 * true/false/True/False, null/None and JSON arrays and objects are read as
 * such; anything else is a string. String options take the text verbatim.
 * Errors: TL_EUNKNOWN for a name no option has (with "did you mean ...?",
 * see tl_config_suggest); TL_EPARSE for malformed JSON in an option that
 * takes a structure; TL_EINVAL for source TL_SOURCE_MODEL_DIR (only
 * tl_config_load_model_dir sets those) or a value that is no source;
 * TL_ENOMEM.
 */
TL_API tl_status tl_config_set(tl_config *cfg, const char *name, const char *text,
                               tl_config_source source);

/*
 * Loads a JSON object. Top-level keys are RunConfig / TPUEstimator / tpuloop
 * options and "tpu_config", an object of TPUConfig options. `origin` names the
 * source in messages (a file name). Errors: TL_EPARSE for malformed JSON (the
 * message gives origin:line:column) or a top level that is not an object;
 * TL_EUNKNOWN for an unknown key (named with its path, and the nearest
 * option's file key: "did you mean tpu_config.iterations_per_loop?");
 * TL_ETYPE when "tpu_config" is not an object; TL_ENOMEM. Values are
 * type-checked by tl_config_resolve, in TensorFlow's order.
 */
TL_API tl_status tl_config_load_json(tl_config *cfg, const char *text, size_t len, const char *origin);

/* Reads and loads a JSON file. Errors: those of tl_config_load_json, and
 * TL_EIO when the file cannot be read (the message names it and why). */
TL_API tl_status tl_config_load_file(tl_config *cfg, const char *path);

/*
 * Applies the environment: TPULOOP_DEVICE_COUNT sets `devices`, and TF_CONFIG
 * (JSON) is kept for tpu_job_name and evaluation_master. envp is a
 * NULL-terminated array of "NAME=value" strings (environ). Errors: those of
 * tl_config_set.
 */
TL_API tl_status tl_config_apply_env(tl_config *cfg, const char *const *envp);

/*
 * Applies `--name=value` flags (also `--name value`) from argv[0..argc).
 * Arguments that are not flags (no leading "--"), and flags that are not
 * config options when `rest` is given, are copied in order into rest (room for
 * argc entries) and counted in *nrest; with rest NULL an unknown flag is
 * TL_EUNKNOWN. A bare "--" stops flag parsing; what follows goes to rest.
 * Errors: TL_EUNKNOWN, TL_EINVAL for a flag without a value, TL_EPARSE,
 * TL_ENOMEM.
 */
TL_API tl_status tl_config_apply_args(tl_config *cfg, int argc, char *const *argv, int *nrest,
                                      char **rest);

/*
 * Checks every value in TensorFlow's order and computes the resolved values.
 * Errors: TL_EINVAL (ValueError), TL_ETYPE (TypeError), TL_ENOMEM.
 */
TL_API tl_status tl_config_resolve(tl_config *cfg);

/* The resolved values; valid after a successful tl_config_resolve and until
 * the next change to cfg or its destruction. NULL before. */
TL_API const tl_run_config *tl_config_get(const tl_config *cfg);

/* Where option `name` got its value, and a printable description of that
 * source ("default", "file run.json", "env TPULOOP_DEVICE_COUNT",
 * "flag --num_shards", "model_dir /tmp/m/config.json"). After
 * tl_config_resolve, a value from a model_dir that a higher source made
 * void (see tl_config_load_model_dir) reads as "default". TL_EUNKNOWN for an
 * unknown name. */
TL_API tl_status tl_config_source_of(const tl_config *cfg, const char *name, tl_config_source *source,
                                     const char **description);

/*
 * Train-time checks of train()'s steps and max_steps: TL_EINVAL "For TPU
 * training, one of `steps` or `max_steps` must be set. Cannot be both `None`."
 * when neither is set with use_tpu (the others are checked at resolve time).
 */
TL_API tl_status tl_config_check_train(const tl_config *cfg);

/* Evaluate-time check: TL_EINVAL "Evaluate `steps` must be set on TPU. Cannot
 * be `None`." when eval_steps is None with use_tpu. */
TL_API tl_status tl_config_check_eval(const tl_config *cfg);

/*
 * The resolved configuration as a JSON object (a tl_malloc'd string the caller
 * frees with tl_free_string): every option under its file key, TPUConfig
 * fields under "tpu_config" and the sections under "model" and "input", each
 * value in the syntax tl_config_load_json reads: iterations_per_loop as
 * TensorFlow takes it (a count as an int, 100; a time as "<N>h", "<N>m" or
 * "<N>s" in the largest unit that divides it), input modes by name, the
 * input, model and embedding sections as given, with their defaults filled
 * in. So the text is a configuration file: loaded and resolved it prints the
 * same text, with the same resolved values. The estimator writes it to
 * model_dir/config.json. Errors: TL_EINVAL before tl_config_resolve;
 * TL_ENOMEM.
 */
TL_API tl_status tl_config_to_json(const tl_config *cfg, char **out);

/*
 * Reuses a model_dir's configuration: loads model_dir/config.json (what the
 * estimator wrote there, tl_config_to_json's text) as the source
 * TL_SOURCE_MODEL_DIR, above the built-in defaults and below a file, the
 * environment and flags, whatever the order of the calls: an option a
 * higher source has set keeps its value, and a later one replaces the
 * file's. The key model_dir itself is never taken from the file. *found
 * (may be NULL) tells whether the file exists; a model_dir without one (or
 * that does not exist yet) is TL_OK and changes nothing. Loading a second
 * model_dir replaces the first's values. The iterations_per_loop object
 * {"unit", "value"} of files written before this format is read as the
 * count or "<N>s".
 *
 * At tl_config_resolve, a value from the file that a higher source's choice
 * makes void goes back to its default instead of clashing with it: the
 * other half of save_checkpoints_steps / _secs, train_steps / max_steps and
 * embedding / embedding_config; evaluation_master when it only followed the
 * file's master and master is set; the file's input section when the
 * dataset is set to another one. A value from the file that fails a check
 * is reported as such: "... [from model_dir /tmp/m/config.json]".
 *
 * Errors (the configuration is unchanged): TL_EINVAL model_dir NULL or "";
 * TL_EIO the file exists but cannot be read (naming it and the system's
 * reason); TL_EPARSE it is not JSON ("D/config.json:line:column: malformed
 * JSON ...") or not an object; TL_EUNKNOWN a key no option has; TL_ETYPE a
 * section that is not an object; TL_ENOMEM.
 *
 *     tl_config *cfg;
 *     tl_config_create(&cfg);
 *     tl_config_load_file(cfg, "run.json");
 *     tl_config_apply_args(cfg, argc, argv, NULL, NULL);
 *     bool found;
 *     if (tl_config_load_model_dir(cfg, "/tmp/m", &found) != TL_OK ||
 *         tl_config_resolve(cfg) != TL_OK)
 *         fprintf(stderr, "error: %s\n", tl_last_error());
 *     char *conflicts;
 *     if (found && tl_config_model_dir_conflicts(cfg, &conflicts) == TL_OK && conflicts != NULL) {
 *         fprintf(stderr, "warning: the run differs from its model_dir:\n%s", conflicts);
 *         tl_free_string(conflicts);
 *     }
 *
 * (The model_dir to reuse is the one the file and flags give: read it with
 * a first tl_config_resolve, or from the arguments.)
 */
TL_API tl_status tl_config_load_model_dir(tl_config *cfg, const char *model_dir, bool *found);

/*
 * After tl_config_resolve: the options a file, the environment or a flag set
 * to another value than model_dir/config.json holds (compared as resolved,
 * so "60m" and "1h" agree), one line each, in the order of `tpuloop help
 * config`, each ending in a newline:
 *
 *     train_batch_size: 256 from flag --train_batch_size, model_dir /tmp/m/config.json has 128
 *
 * Values print as compact JSON (strings quoted, long values cut with
 * "..."). *text is NULL when there is none or no model_dir was loaded; free
 * it with tl_free_string. Errors: TL_EINVAL text NULL or cfg not resolved;
 * TL_ENOMEM.
 */
TL_API tl_status tl_config_model_dir_conflicts(const tl_config *cfg, char **text);

/* The option table as help text: every option, its file key, flag, default,
 * allowed values and meaning, then where tpuloop is deliberately stricter
 * than TensorFlow and why. Caller frees with tl_free_string. */
TL_API tl_status tl_config_help(char **out);

/*
 * The option nearest to a name no option has, for "did you mean" messages.
 * name may be a flag ("--train_batch_sise", also "--train_batch_sise=256")
 * or a file key ("tpu_config.iterations_per_lop"); its last part is compared,
 * ignoring case, with every option's name by edit distance (an insertion, a
 * deletion, a substitution or a swap of two neighbours is one edit). *out is
 * the nearest option's name (static storage; ties go to the earlier option
 * of `tpuloop help config`) when it is at most max(2, n / 4) edits away for
 * a name of n characters, else NULL. A name that is an option's in another
 * case suggests that option. The configuration's own unknown-key and
 * unknown-option errors (TL_EUNKNOWN) end with the same suggestion.
 * Errors: TL_EINVAL when name or out is NULL.
 *
 *     const char *near;
 *     if (tl_config_suggest("--train_batch_sise", &near) == TL_OK && near != NULL)
 *         fprintf(stderr, "unknown option '--train_batch_sise'; did you mean --%s?\n", near);
 */
TL_API tl_status tl_config_suggest(const char *name, const char **out);

TL_API void tl_free_string(char *s);

#ifdef __cplusplus
}
#endif
#endif /* TPULOOP_CONFIG_H */
