/*
 * tpuloop/emb_spec.h — reading an embedding configuration: TensorFlow's
 * binary TPUEmbeddingConfiguration, or the `embedding` section of a tpuloop
 * JSON config, into the engine's tl_emb_config (tpuloop/embedding.h).
 *
 * A TPUEmbedding program in TensorFlow hands the TPU system one serialized
 * tensorflow.tpu.TPUEmbeddingConfiguration (tables with their
 * OptimizationParameters, features, mode, hosts, cores). tpuloop reads the
 * same bytes (proto/tpuloop/tpu_embedding.proto is wire-compatible), so a
 * configuration dumped from a TensorFlow job, or written as text and encoded
 * with `protoc --encode`, sets up the same engine. The JSON section says the
 * same in the words of tf.tpu.experimental.embedding's Python classes
 * (TableConfig, FeatureConfig, SGD / Adagrad / Adam / FTRL ... with their
 * argument names and defaults).
 *
 *     tl_emb_spec *spec;
 *     if (tl_emb_spec_from_proto_file("emb_config.pb", &spec) != TL_OK) {
 *         fprintf(stderr, "error: %s\n", tl_last_error());
 *         return 1;
 *     }
 *     tl_emb_engine *eng;
 *     tl_status st = tl_emb_engine_create(tl_emb_spec_config(spec), &eng);
 *     tl_emb_spec_destroy(spec);   // the engine copied what it needs
 *
 * The spec owns the config and everything it points to (tables, features,
 * names, the per-table optimizers); the pointer tl_emb_spec_config returns
 * lives as long as the spec. Both readers check what the engine needs of each
 * field and validate every table's optimizer (tl_emb_optimizer_validate), so
 * an error names the field, the value and what was allowed, with the table's
 * name in front of an optimizer's error. The engine still checks what needs
 * the whole config (dynamic tags 0..K-1 without gaps, shards non-empty).
 *
 * ---- The binary proto -------------------------------------------------------
 *
 * TPUEmbeddingConfiguration        → tl_emb_config
 *   table_descriptor[i]            → tables[i]: name ("" → "table_<i>"),
 *                                    vocabulary_size (>= 1), dimension → dim
 *                                    (>= 1), optimization_parameters → the
 *                                    table's own optimizer (below). The proto
 *                                    has no combiner (TPU v2 passes combiners
 *                                    with each enqueue): MEAN, TableConfig's
 *                                    default, which a feature's enqueue
 *                                    combiner overrides. No initializer either
 *                                    (TensorFlow loads tables with Load ops):
 *                                    truncated normal, stddev 1/sqrt(dim).
 *                                    num_features is ignored (TensorFlow fills
 *                                    it itself when features are described).
 *   mode                           → mode; UNSPECIFIED is TensorFlow's error
 *                                    "TPUEmbeddingConfiguration.mode is
 *                                    INVALID.  Must be INFERENCE, TRAINING, or
 *                                    BACKWARD_PASS_ONLY".
 *   num_hosts                      → num_shards (0 → 1; < 0 an error)
 *   num_tensor_cores               → num_tensor_cores (>= 1)
 *   sharding_strategy              → sharding_strategy (DIV_DEFAULT, MOD)
 *   pipeline_execution_with_tensor_core → the same
 *   feature_descriptor[j]          → features[j]: name ("" → "feature_<j>"),
 *                                    table_id (in [0, tables)), input_shape
 *                                    [B] (a feature of one bag per sample) or
 *                                    [B, S] (a sequence feature,
 *                                    max_sequence_length S). Every feature
 *                                    must give the same B, which becomes
 *                                    batch_size_per_tensor_core.
 *   batch_size_per_tensor_core     must be 0 when feature descriptors are
 *                                    given (TensorFlow fills it from them).
 *   profile_data_directory         ignored (lookup statistics for TPU
 *                                    partitioning only).
 *   spmd_sharding                  enabled with num_cores_per_replica > 1
 *                                    is TL_ENOTIMPL; otherwise ignored.
 *
 * Without any feature_descriptor a configuration is in TensorFlow's old
 * per-table layout (one output per table of num_features * B rows). tpuloop's
 * engine has per-feature outputs only, so that layout is TL_ENOTIMPL: write
 * feature descriptors.
 *
 * OptimizationParameters → tl_emb_optimizer: the algorithm of the
 * `parameters` oneof (none: "No optimization algorithm specified") and each of
 * its fields by the header's names (lr_power → learning_rate_power, l1 / l2 →
 * l1_ / l2_regularization_strength, use_non_lazy_adam / _lion → use_non_lazy,
 * frequency_aware_adagrad.step_counter.tag → step_counter_tag);
 * learning_rate constant, or dynamic tag (>= 0) → lr_tag; clipping_limits and
 * gradient_clipping_limits (an absent FloatValue is no bound);
 * weight_decay_factor; multiply_weight_decay_factor_by_learning_rate;
 * gradient_accumulation_status; simulated_quantization;
 * low_dimensional_packing_status; hot_id_replication_configuration.status →
 * hot_id_replication_status. The proto is proto3: a field left out reads as 0
 * (as the TPU reads it), not as the Python default; an absent learning_rate
 * is the constant 0 (and is logged as a warning). What the proto does not
 * carry keeps tl_emb_optimizer_default's value: the initial accumulator 0.1
 * of Adagrad, BoundedAdagrad, FTRL and ProximalAdagrad (ProximalYogi 1e-6),
 * which TensorFlow passes with the Load ops instead. OnlineYogi and
 * MDLAdagradLight are read and then refused by validation (TL_ENOTIMPL);
 * UserDefinedProgram's XLA program cannot run here (TL_ENOTIMPL).
 *
 * Unknown fields are skipped, as protobuf does (groups, wire types 3 and 4,
 * are not supported by the decoder and read as malformed).
 *
 * ---- The JSON section --------------------------------------------------------
 *
 *   {"tables": [{"name": "user", "vocabulary_size": 100000, "dim": 16,
 *                "combiner": "mean", "initializer": {"type": "uniform",
 *                "minval": -0.1, "maxval": 0.1},
 *                "optimizer": {"type": "adagrad", "learning_rate": 0.05}}, ...],
 *    "features": [{"name": "watched", "table": "user", "max_sequence_length": 0}],
 *    "optimizer": {"type": "adam", "learning_rate": 0.001, "beta_1": 0.9},
 *    "mode": "training", "num_tensor_cores": 8, "batch_size_per_tensor_core": 32,
 *    "num_shards": 2, "sharding_strategy": "div_default",
 *    "pipeline_execution_with_tensor_core": false, "bounds_check_mode": "fatal",
 *    "seed": 1}
 *
 * tables (required, non-empty): name (default "table_<i>"), vocabulary_size
 *   and dim (required, >= 1), combiner "mean" (default) | "sum" | "sqrtn",
 *   initializer (a type name, or an object: "truncated_normal" {mean 0,
 *   stddev 0 = 1/sqrt(dim)} (default) | "zeros" | "constant" {value 0} |
 *   "uniform" {minval -0.05, maxval 0.05} | "row_id" {offset 0}), optimizer
 *   (default: the global one), quantization_config {num_buckets, lower, upper}
 *   (all required; sets the table optimizer's simulated_quantization).
 * features (required, non-empty): table (required: a table's name or index),
 *   name (default "feature_<j>"), max_sequence_length (>= 0, default 0),
 *   combiner (the enqueue's, instead of the table's).
 * optimizer: the optimizer of tables without their own. A table without one
 *   while this is absent is an error (TensorFlow's TPUEmbedding needs one or
 *   the other).
 * mode "training" (default) | "inference" | "backward_pass_only";
 * num_tensor_cores, batch_size_per_tensor_core, num_shards (>= 1, default 1);
 * sharding_strategy "div_default" (default) | "mod";
 * pipeline_execution_with_tensor_core (false); bounds_check_mode "fatal"
 * (default) | "warning" | "ignore"; seed (>= 0, default 0). Enum strings
 * are read in any case, except a combiner, which is TensorFlow's exact
 * 'mean', 'sum' or 'sqrtn'.
 *
 * An optimizer object: "type" (required; "sgd", "adagrad",
 * "adagrad_momentum", "bounded_adagrad", "frequency_aware_adagrad", "ftrl",
 * "adam", "momentum", "lion", "rms_prop", "centered_rms_prop", "adadelta",
 * "proximal_adagrad", "proximal_yogi", "frequency_estimator", "assign", or
 * any name tl_emb_algorithm_parse takes) and TensorFlow's Python arguments
 * on top of tl_emb_optimizer_default's values:
 *   all: learning_rate (number) or learning_rate_tag / lr_tag (int >= 0, a
 *     dynamic learning rate), use_gradient_accumulation (bool) or
 *     gradient_accumulation_status ("unspecified" | "enabled" | "disabled"),
 *     clip_weight_min, clip_weight_max (number or null), clipping_limits
 *     {lower, upper}, clipvalue (c → [-c, c], or [min, max] with nulls for no
 *     bound) or gradient_clipping_limits {lower, upper}, weight_decay_factor,
 *     multiply_weight_decay_factor_by_learning_rate, simulated_quantization
 *     {enabled (true), num_buckets, lower, upper}, low_dimensional_packing_status
 *     (bool or "unspecified" | "enabled" | "disabled"), hot_id_replication_status
 *     ("unspecified" | "enabled" | "disabled" | "migration_only");
 *   each algorithm its own: initial_accumulator_value, momentum, use_nesterov,
 *     exponent, beta_1 / beta1, beta_2 / beta2, epsilon, learning_rate_power,
 *     l1_regularization_strength, l2_regularization_strength, beta,
 *     multiply_linear_by_learning_rate / multiply_linear_by_lr,
 *     allow_zero_accumulator (ignored, as in TensorFlow), lazy_adam (false →
 *     use_non_lazy), lazy_lion, use_non_lazy, sum_inside_sqrt /
 *     use_sum_inside_sqrt, rho, update_accumulator_first, max_var_update,
 *     max_accumulator, max_lr_multiplier, probability_exponent,
 *     accumulator_decay, step_counter_tag, tau, max_delta, outlier_threshold,
 *     weight_exponent.
 * A key the chosen algorithm does not take is TL_EUNKNOWN listing the keys
 * it does, as Python refuses an unexpected keyword; two spellings of one
 * field ("beta_1" and "beta1") are TL_EINVAL.
 *
 * Errors of the JSON reader: TL_EPARSE malformed JSON (line and column);
 * TL_EUNKNOWN an unknown key (naming it and listing the allowed ones);
 * TL_ETYPE a value of the wrong JSON type (naming key and type); TL_EINVAL a
 * missing required key or a value out of range; TL_ENOTIMPL a
 * user_defined_program; the optimizer's own errors.
 *
 * Threads: the calls keep no state; a spec is read-only after it is made
 * and may be read from any thread.
 */
#ifndef TPULOOP_EMB_SPEC_H
#define TPULOOP_EMB_SPEC_H

#include <stddef.h>

#include "tpuloop/base.h"
#include "tpuloop/embedding.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A parsed configuration: owns a tl_emb_config and everything it points to. */
typedef struct tl_emb_spec tl_emb_spec;

/*
 * Reads a serialized TPUEmbeddingConfiguration (len bytes at data; data may
 * be NULL when len is 0) into a new spec at *out (NULL on error). Errors:
 * TL_EPARSE "Malformed tpu_embedding_config." and where the bytes go wrong
 * (byte offset, field path, wire type); TL_EINVAL a field out of range
 * (named with its path, e.g. "feature_descriptor[2].table_id"), the mode
 * UNSPECIFIED, no optimization algorithm, an optimizer's validation (prefixed
 * with the table's name); TL_ENOTIMPL the per-table layout (no
 * feature_descriptor), input shapes of rank > 2, spmd_sharding of more than
 * one core per replica, UserDefinedProgram, OnlineYogi, MDLAdagradLight;
 * TL_ENOMEM.
 */
TL_API tl_status tl_emb_spec_from_proto(const void *data, size_t len, tl_emb_spec **out);

/* The same from a file holding the bytes. Adds TL_EIO when the file cannot
 * be read (naming the path and the system's reason). */
TL_API tl_status tl_emb_spec_from_proto_file(const char *path, tl_emb_spec **out);

/*
 * Reads the JSON `embedding` section (len bytes of text, a JSON object; see
 * above) into a new spec at *out (NULL on error). Errors: TL_EPARSE,
 * TL_EUNKNOWN, TL_ETYPE, TL_EINVAL, TL_ENOTIMPL, TL_ENOMEM as above; every
 * message names the key by its path ("embedding.tables[1].optimizer.beta_1").
 */
TL_API tl_status tl_emb_spec_from_json(const char *text, size_t len, tl_emb_spec **out);

/*
 * Every parameter of an optimizer as a JSON optimizer object of the syntax
 * above, which tl_emb_spec_from_json reads back as the same optimizer (all
 * but a user_defined_program, which JSON cannot give): "type"; the learning
 * rate, "learning_rate" (constant) or "learning_rate_tag" (dynamic);
 * "gradient_accumulation_status", "clipping_limits" and
 * "gradient_clipping_limits" ({"lower", "upper"}, null for no bound),
 * "weight_decay_factor", "multiply_weight_decay_factor_by_learning_rate",
 * "simulated_quantization", "low_dimensional_packing_status",
 * "hot_id_replication_status"; then each parameter the algorithm takes,
 * under TensorFlow's Python name (initial_accumulator_value, beta_1,
 * beta_2, epsilon, l1_regularization_strength, lazy_adam, tau, ...), in the
 * order of the list above. Floats print as the shortest decimal that reads
 * back as the float ("0.1"); one that is not finite prints null. *out is a
 * compact one-line text, freed with tl_free_string (tpuloop/config.h). For
 * example Adagrad's defaults at learning rate 0.05:
 *
 *     {"type":"adagrad","learning_rate":0.05,"gradient_accumulation_status":"unspecified",
 *      "clipping_limits":{"lower":null,"upper":null}, ..., "initial_accumulator_value":0.1}
 *
 * Errors: TL_EINVAL o or out NULL, or an algorithm out of range; TL_ENOMEM.
 */
TL_API tl_status tl_emb_optimizer_to_json(const tl_emb_optimizer *o, char **out);

/* The config, valid while s lives. NULL for a NULL s. */
TL_API const tl_emb_config *tl_emb_spec_config(const tl_emb_spec *s);

/* Frees s and everything its config points to. Accepts NULL. */
TL_API void tl_emb_spec_destroy(tl_emb_spec *s);

#ifdef __cplusplus
}
#endif
#endif /* TPULOOP_EMB_SPEC_H */
