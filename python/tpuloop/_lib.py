"""The C library, through ctypes: its structs, its functions and its errors.

Everything here mirrors include/tpuloop/*.h; tests/test_abi.py compiles a C
program that prints each struct's size and field offsets and compares them
with these mirrors, so a header change that is not made here fails a test
instead of corrupting memory.
"""
import ctypes
import os
from ctypes import (CFUNCTYPE, POINTER, Structure, c_bool, c_char, c_char_p, c_double, c_float, c_int,
                    c_int32, c_int64, c_size_t, c_uint64, c_void_p)

from . import errors

MAX_RANK = 8            # TL_MAX_RANK, TL_TENSOR_MAX_RANK, TL_FEATURE_MAX_RANK
MAX_HOST_CALL = 8       # TL_MAX_HOST_CALL
MAX_EVAL_TENSORS = 8    # TL_MAX_EVAL_TENSORS
MAX_METRICS = 16        # TL_MAX_METRICS
MAX_FEATURE_RANK = 4    # TL_MAX_FEATURE_RANK
T_INVALID = -1          # TL_T_INVALID

# tl_mode
MODE_TRAIN, MODE_EVAL, MODE_PREDICT = 0, 1, 2
# tl_dtype (graph) and tl_data_type (datasets)
F32, I32, I64 = 0, 1, 2
DT_FLOAT32, DT_INT64, DT_INT32, DT_BYTES = 1, 2, 3, 4
# tl_feature_kind, tl_feature_spec_type, tl_record_compression
FEATURE_BYTES, FEATURE_FLOAT, FEATURE_INT64 = 1, 2, 3
SPEC_FIXED_LEN, SPEC_VAR_LEN, SPEC_FIXED_LEN_SEQUENCE, SPEC_VAR_LEN_SEQUENCE = 0, 1, 2, 3
RECORD_NONE, RECORD_GZIP, RECORD_ZLIB, RECORD_AUTO = 0, 1, 2, 3
# tl_optimizer_kind, tl_lr_kind
OPTIM_SGD, OPTIM_MOMENTUM, OPTIM_ADAGRAD, OPTIM_ADAM, OPTIM_RMSPROP = 0, 1, 2, 3, 4
LR_CONSTANT, LR_EXPONENTIAL_DECAY, LR_COSINE_DECAY = 0, 1, 2
# tl_init_kind, tl_activation, tl_padding, tl_resize_method
INIT_ZEROS, INIT_CONSTANT, INIT_UNIFORM, INIT_TRUNCATED_NORMAL, INIT_GLOROT_UNIFORM, INIT_HE_NORMAL = range(6)
ACT_NONE, ACT_RELU, ACT_SIGMOID, ACT_TANH = range(4)
PAD_VALID, PAD_SAME = 0, 1
RESIZE_BILINEAR, RESIZE_NEAREST = 0, 1
# tl_config_source
SOURCE_FLAG = 3

tl_t = c_int32
tl_status = c_int


class Initializer(Structure):
    _fields_ = [("kind", c_int), ("a", c_double), ("b", c_double)]


class ModelArgs(Structure):
    _fields_ = [("mode", c_int), ("features", tl_t), ("labels", tl_t), ("batch_size", c_int64),
                ("params_json", c_char_p), ("replica", c_int)]


class LrSchedule(Structure):
    _fields_ = [("kind", c_int), ("learning_rate", c_double), ("decay_steps", c_int64), ("decay_rate", c_double),
                ("staircase", c_bool), ("alpha", c_double), ("warmup_steps", c_int64)]


class OptimizerConfig(Structure):
    _fields_ = [("kind", c_int), ("lr", LrSchedule), ("momentum", c_double), ("use_nesterov", c_bool),
                ("initial_accumulator_value", c_double), ("beta1", c_double), ("beta2", c_double),
                ("epsilon", c_double), ("decay", c_double), ("centered", c_bool)]


class ModelSpec(Structure):
    _fields_ = [("loss", tl_t), ("logits", tl_t), ("predictions", tl_t),
                ("num_host_call", c_int), ("host_call", tl_t * MAX_HOST_CALL),
                ("host_call_names", c_char_p * MAX_HOST_CALL), ("host_call_disabled", c_bool),
                ("num_eval_metric_tensors", c_int), ("eval_metric_tensors", tl_t * MAX_EVAL_TENSORS),
                ("eval_metric_tensor_names", c_char_p * MAX_EVAL_TENSORS),
                ("optimizer", POINTER(OptimizerConfig)), ("optimizer_reduce_sum", c_bool)]


class HostTensor(Structure):
    _fields_ = [("name", c_char_p), ("dtype", c_int), ("data", c_void_p), ("rank", c_int),
                ("shape", c_int64 * MAX_RANK)]


class Metric(Structure):
    _fields_ = [("name", c_char * 64), ("value", c_double)]


class TrainLog(Structure):
    _fields_ = [("step", c_int64), ("log_loss", c_bool), ("log_rate", c_bool), ("loss", c_double),
                ("loss_mean", c_double), ("loss_steps", c_int64), ("has_rate", c_bool),
                ("steps_per_sec", c_double), ("examples_per_sec", c_double)]


MODEL_FN = CFUNCTYPE(tl_status, c_void_p, POINTER(ModelArgs), POINTER(ModelSpec), c_void_p)
ON_LOG = CFUNCTYPE(None, POINTER(TrainLog), c_void_p)
HOST_CALL = CFUNCTYPE(tl_status, c_int64, POINTER(HostTensor), c_int, c_void_p)
METRIC_UPDATE = CFUNCTYPE(tl_status, POINTER(HostTensor), c_int, c_void_p)
METRIC_RESULT = CFUNCTYPE(tl_status, POINTER(Metric), c_int, POINTER(c_int), c_void_p)
AFTER_SAVE = CFUNCTYPE(tl_status, c_void_p, c_int64, c_char_p, c_void_p)
EMB_LR = CFUNCTYPE(tl_status, c_int64, POINTER(c_float), c_int, c_void_p)


class EstimatorOptions(Structure):
    _fields_ = [("model_fn", MODEL_FN), ("user", c_void_p), ("optimizer", OptimizerConfig),
                ("reduce_sum", c_bool), ("on_log", ON_LOG), ("log_user", c_void_p),
                ("host_call", HOST_CALL), ("host_call_user", c_void_p),
                ("metric_update", METRIC_UPDATE), ("metric_result", METRIC_RESULT), ("metric_user", c_void_p),
                ("infeed_depth", c_int), ("after_save", AFTER_SAVE), ("after_save_user", c_void_p),
                ("save_every_n_steps", c_int64), ("embedding", c_void_p), ("embedding_config", c_void_p),
                ("embedding_learning_rates", EMB_LR), ("embedding_user", c_void_p), ("hosts", c_void_p),
                ("distribution", c_void_p)]


class TrainResult(Structure):
    _fields_ = [("global_step", c_int64), ("loops", c_int64), ("loss", c_double), ("loss_mean", c_double),
                ("examples_per_sec", c_double), ("seconds", c_double), ("skipped", c_bool), ("stopped", c_bool),
                ("end_of_input", c_bool), ("infeed_start_seconds", c_double), ("infeed_wait_seconds", c_double)]


class EvalResult(Structure):
    _fields_ = [("global_step", c_int64), ("steps", c_int64), ("loss", c_double), ("loss_replica0", c_double),
                ("accuracy", c_double), ("examples", c_int64), ("auc", c_double), ("has_auc", c_bool),
                ("metrics", Metric * MAX_METRICS), ("num_metrics", c_int)]


class PredictResult(Structure):
    _fields_ = [("values", POINTER(c_float)), ("num_examples", c_int64), ("width", c_int64),
                ("device_steps", c_int64), ("padded_rows", c_int64), ("global_step", c_int64)]


class InputContext(Structure):
    _fields_ = [("mode", c_int), ("batch_size", c_int64), ("host", c_int), ("index", c_int), ("total", c_int),
                ("num_replicas", c_int), ("first_replica", c_int)]


INPUT_FN = CFUNCTYPE(tl_status, POINTER(InputContext), c_void_p, POINTER(c_void_p))


class Input(Structure):
    _fields_ = [("input_fn", INPUT_FN), ("user", c_void_p), ("feature_keys", POINTER(c_char_p)),
                ("num_feature_keys", c_int), ("label_key", c_char_p), ("embedding_keys", POINTER(c_char_p)),
                ("num_embedding_keys", c_int), ("finite", c_bool)]


class Tensor(Structure):
    _fields_ = [("key", c_char_p), ("dtype", c_int), ("rank", c_int), ("shape", c_int64 * MAX_RANK),
                ("data", c_void_p), ("ragged", c_bool), ("num_values", c_int64), ("num_rows", c_int64),
                ("row_lengths", POINTER(c_int64))]


class Element(Structure):
    _fields_ = [("num_tensors", c_int), ("tensors", POINTER(Tensor))]


class FeatureSpec(Structure):
    _fields_ = [("key", c_char_p), ("type", c_int), ("dtype", c_int), ("rank", c_int),
                ("shape", c_int64 * MAX_RANK), ("default_value", c_void_p), ("default_count", c_size_t),
                ("allow_missing", c_bool)]


class TfrecordOptions(Structure):
    _fields_ = [("compression", c_int), ("cycle_length", c_int64), ("block_length", c_int64),
                ("skip_corrupt_records", c_bool)]


class ParseOptions(Structure):
    _fields_ = [("record_key", c_char_p), ("sequence_example", c_bool), ("skip_corrupt_records", c_bool),
                ("num_parallel_calls", c_int)]


class RecordWriterOptions(Structure):
    _fields_ = [("compression", c_int), ("compression_level", c_int), ("atomic", c_bool)]


class Bytes(Structure):
    _fields_ = [("data", c_void_p), ("len", c_size_t)]


class Conv2dAttrs(Structure):
    _fields_ = [("strides", c_int64 * 2), ("dilations", c_int64 * 2), ("padding", c_int), ("groups", c_int64)]


class LabeledData(Structure):
    _fields_ = [("num_examples", c_int64), ("num_features", c_int64), ("num_classes", c_int32),
                ("feature_rank", c_int), ("feature_shape", c_int64 * MAX_FEATURE_RANK),
                ("features", POINTER(c_float)), ("labels", POINTER(c_int32)), ("ids", POINTER(c_int64)),
                ("num_ids", c_int64)]


class SyntheticSequencesSpec(Structure):
    _fields_ = [("num_examples", c_int64), ("sequence_length", c_int64), ("vocab_size", c_int64),
                ("seed", c_uint64)]


class CriteoSynthConfig(Structure):
    _fields_ = [("seed", c_uint64), ("num_examples", c_int64), ("num_dense", c_int), ("num_categorical", c_int),
                ("vocab_sizes", c_int64 * 26), ("zipf_exponent", c_double), ("hidden_dim", c_int),
                ("ctr", c_double), ("signal", c_double)]


# The structs tests/test_abi.py checks against the C compiler: C name -> mirror.
STRUCTS = {
    "tl_initializer": Initializer, "tl_model_args": ModelArgs, "tl_lr_schedule": LrSchedule,
    "tl_optimizer_config": OptimizerConfig, "tl_model_spec": ModelSpec, "tl_host_tensor": HostTensor,
    "tl_metric": Metric, "tl_train_log": TrainLog, "tl_estimator_options": EstimatorOptions,
    "tl_train_result": TrainResult, "tl_eval_result": EvalResult, "tl_predict_result": PredictResult,
    "tl_input_context": InputContext, "tl_input": Input, "tl_tensor": Tensor, "tl_element": Element,
    "tl_feature_spec": FeatureSpec, "tl_tfrecord_options": TfrecordOptions, "tl_parse_options": ParseOptions,
    "tl_conv2d_attrs": Conv2dAttrs, "tl_labeled_data": LabeledData, "tl_criteo_synth_config": CriteoSynthConfig,
    "tl_synthetic_sequences_spec": SyntheticSequencesSpec, "tl_record_writer_options": RecordWriterOptions,
    "tl_bytes": Bytes,
}


def _find_library():
    """libtpuloop.so: $TPULOOP_LIBRARY, the source tree's build/lib (this
    file is python/tpuloop/_lib.py there), then beside an installed package
    (<prefix>/lib/python3/dist-packages/tpuloop -> <prefix>/lib), then the
    system's search path."""
    env = os.environ.get("TPULOOP_LIBRARY")
    if env:
        return env
    here = os.path.dirname(os.path.realpath(__file__))   # through the source tree's ./tpuloop link too
    for cand in (os.path.join(here, "..", "..", "build", "lib", "libtpuloop.so"),
                 os.path.join(here, "..", "..", "..", "libtpuloop.so"),
                 os.path.join(here, "..", "..", "..", "..", "lib", "libtpuloop.so")):
        if os.path.exists(cand):
            return os.path.normpath(cand)
    return "libtpuloop.so.0"


try:
    # RTLD_GLOBAL: Open MPI's plugins, which it loads itself, look up libmpi's symbols globally.
    lib = ctypes.CDLL(_find_library(), mode=ctypes.RTLD_GLOBAL)
except OSError as e:  # pragma: no cover - the message is the point
    raise ImportError("tpuloop: cannot load libtpuloop.so (%s); run `make` in the source tree, "
                      "`make install`, or set TPULOOP_LIBRARY" % e) from None


def _sig(name, restype, *argtypes):
    f = getattr(lib, name)
    f.restype = restype
    f.argtypes = list(argtypes)
    return f


P = c_void_p
I64P = POINTER(c_int64)
IP = POINTER(c_int)
TP = POINTER(tl_t)
_sig("tl_last_error", c_char_p)
_sig("tl_last_status", c_int)
_sig("tl_clear_error", None)
_sig("tl_error", c_int, c_int, c_char_p, c_char_p)
_sig("tl_err_name", c_char_p, c_int)
_sig("tl_free_string", None, P)
# config
_sig("tl_config_create", c_int, POINTER(P))
_sig("tl_config_destroy", None, P)
_sig("tl_config_set", c_int, P, c_char_p, c_char_p, c_int)
_sig("tl_config_load_json", c_int, P, c_char_p, c_size_t, c_char_p)
_sig("tl_config_load_file", c_int, P, c_char_p)
_sig("tl_config_resolve", c_int, P)
_sig("tl_config_apply_env", c_int, P, POINTER(c_char_p))
_sig("tl_config_to_json", c_int, P, POINTER(c_void_p))
_sig("tl_config_check_train", c_int, P)
_sig("tl_config_check_eval", c_int, P)
# optimizers
_sig("tl_optimizer_config_default", None, c_int, POINTER(OptimizerConfig))
_sig("tl_optimizer_config_validate", c_int, POINTER(OptimizerConfig))
_sig("tl_lr_schedule_value", c_double, POINTER(LrSchedule), c_int64)
# graph
_sig("tl_graph_status", c_int, P)
_sig("tl_graph_error", c_char_p, P)
_sig("tl_graph_fail", c_int, P, c_int, c_char_p)
_sig("tl_rank", c_int, P, tl_t, I64P)
_sig("tl_variable", tl_t, P, c_char_p, I64P, c_int, Initializer)
_sig("tl_state_variable", tl_t, P, c_char_p, I64P, c_int, Initializer)
_sig("tl_embedding_activations", tl_t, P, c_int, I64P, c_int)
_sig("tl_constant", tl_t, P, c_double, I64P, c_int)
for _n in ("relu", "sigmoid", "tanh", "neg", "abs", "exp", "ln", "sqrt", "rsqrt", "square", "silu", "softplus",
           "sum", "mean", "pairwise_dot"):
    _sig("tl_" + _n, tl_t, P, tl_t)
for _n in ("add", "sub", "mul", "div", "maximum", "minimum", "pow", "equal", "not_equal", "less", "less_equal",
           "greater", "greater_equal", "bias_add", "softmax_xent", "sigmoid_xent", "mse"):
    _sig("tl_" + _n, tl_t, P, tl_t, tl_t)
_sig("tl_matmul", tl_t, P, tl_t, tl_t, c_bool, c_bool)
_sig("tl_batch_matmul", tl_t, P, tl_t, tl_t, c_bool, c_bool)
_sig("tl_dropout", tl_t, P, tl_t, c_double)
_sig("tl_clip", tl_t, P, tl_t, c_double, c_double)
_sig("tl_gelu", tl_t, P, tl_t, c_bool)
_sig("tl_leaky_relu", tl_t, P, tl_t, c_double)
_sig("tl_elu", tl_t, P, tl_t, c_double)
_sig("tl_where", tl_t, P, tl_t, tl_t, tl_t)
_sig("tl_cast", tl_t, P, tl_t, c_int)
_sig("tl_concat", tl_t, P, TP, c_int, c_int)
_sig("tl_stack", tl_t, P, TP, c_int, c_int)
_sig("tl_reshape", tl_t, P, tl_t, I64P, c_int)
_sig("tl_slice", tl_t, P, tl_t, c_int, c_int64, c_int64)
_sig("tl_transpose", tl_t, P, tl_t, IP, c_int)
_sig("tl_expand_dims", tl_t, P, tl_t, c_int)
_sig("tl_squeeze", tl_t, P, tl_t, IP, c_int)
_sig("tl_broadcast_to", tl_t, P, tl_t, I64P, c_int)
_sig("tl_gather", tl_t, P, tl_t, tl_t, c_int)
_sig("tl_one_hot", tl_t, P, tl_t, c_int64, c_double, c_double, c_int)
_sig("tl_split", c_int, P, tl_t, c_int, c_int, TP)
_sig("tl_pad", tl_t, P, tl_t, I64P, c_double)
_sig("tl_tile", tl_t, P, tl_t, I64P)
for _n in ("reduce_sum", "reduce_mean", "reduce_max", "reduce_min", "logsumexp"):
    _sig("tl_" + _n, tl_t, P, tl_t, IP, c_int, c_bool)
_sig("tl_argmax", tl_t, P, tl_t, c_int, c_int)
_sig("tl_argmin", tl_t, P, tl_t, c_int, c_int)
_sig("tl_softmax", tl_t, P, tl_t, c_int)
_sig("tl_log_softmax", tl_t, P, tl_t, c_int)
_sig("tl_softmax_xent_dense", tl_t, P, tl_t, tl_t, c_double)
_sig("tl_sparse_softmax_xent", tl_t, P, tl_t, tl_t, c_double)
_sig("tl_huber", tl_t, P, tl_t, tl_t, c_double)
_sig("tl_in_top_k", tl_t, P, tl_t, tl_t, c_int)
_sig("tl_layer_norm_op", tl_t, P, tl_t, tl_t, tl_t, c_int, c_double)
_sig("tl_layer_norm", tl_t, P, tl_t, c_double, c_char_p)
_sig("tl_batch_norm", tl_t, P, tl_t, c_double, c_double, c_char_p)
_sig("tl_batch_norm_op", tl_t, P, tl_t, tl_t, tl_t, tl_t, tl_t, c_double, c_double, c_bool)
_sig("tl_einsum", tl_t, P, c_char_p, TP, c_int)
_sig("tl_conv2d", tl_t, P, tl_t, tl_t, POINTER(Conv2dAttrs))
_sig("tl_depthwise_conv2d", tl_t, P, tl_t, tl_t, POINTER(Conv2dAttrs))
_sig("tl_max_pool2d", tl_t, P, tl_t, I64P, I64P, c_int)
_sig("tl_avg_pool2d", tl_t, P, tl_t, I64P, I64P, c_int)
_sig("tl_global_avg_pool2d", tl_t, P, tl_t, c_bool)
_sig("tl_resize", tl_t, P, tl_t, c_int64, c_int64, c_int)
# hosts (MPI)
_sig("tl_comm_create_mpi", c_int, c_void_p, c_int, POINTER(P))
_sig("tl_comm_processes", c_int, P)
_sig("tl_comm_process", c_int, P)
_sig("tl_comm_set_timeout", c_int, P, c_double)
# estimator
_sig("tl_estimator_options_init", None, POINTER(EstimatorOptions))
_sig("tl_estimator_create", c_int, P, POINTER(EstimatorOptions), POINTER(P))
_sig("tl_estimator_destroy", None, P)
_sig("tl_estimator_train_input", c_int, P, POINTER(Input), POINTER(TrainResult))
_sig("tl_estimator_evaluate_input", c_int, P, POINTER(Input), POINTER(EvalResult))
_sig("tl_estimator_predict_input", c_int, P, POINTER(Input), POINTER(PredictResult))
_sig("tl_predict_result_free", None, POINTER(PredictResult))
_sig("tl_estimator_params_digest", c_int, P, c_char * 65)
_sig("tl_estimator_variable_value", c_int, P, c_char_p, POINTER(c_float), c_int64)
_sig("tl_estimator_global_step", c_int64, P)
_sig("tl_estimator_restore", c_int, P, c_char_p)
_sig("tl_estimator_request_stop", None, P)
_sig("tl_estimator_set_steps", c_int, P, c_int64, c_int64, c_int64)
_sig("tl_estimator_stop_signals_install", c_int, P)
_sig("tl_estimator_stop_signals_remove", c_int)
# datasets
_sig("tl_dataset_destroy", None, P)
_sig("tl_dataset_next", c_int, P, POINTER(POINTER(Element)))
_sig("tl_dataset_from_tensor_slices", c_int, POINTER(Tensor), c_int, POINTER(P))
_sig("tl_dataset_from_files", c_int, POINTER(c_char_p), c_int, POINTER(P))
_sig("tl_tfrecord_options_init", None, POINTER(TfrecordOptions))
_sig("tl_dataset_tfrecord_interleave", c_int, P, POINTER(TfrecordOptions), POINTER(P))
_sig("tl_dataset_tfrecord", c_int, POINTER(c_char_p), c_int, POINTER(TfrecordOptions), POINTER(P))
_sig("tl_dataset_idx", c_int, c_char_p, c_char_p, c_float, POINTER(P))
_sig("tl_dataset_shard", c_int, P, c_int64, c_int64, POINTER(P))
_sig("tl_dataset_shuffle", c_int, P, c_int64, c_uint64, c_bool, POINTER(P))
_sig("tl_dataset_repeat", c_int, P, c_int64, POINTER(P))
_sig("tl_dataset_take", c_int, P, c_int64, POINTER(P))
_sig("tl_dataset_skip", c_int, P, c_int64, POINTER(P))
_sig("tl_dataset_batch", c_int, P, c_int64, c_bool, POINTER(P))
_sig("tl_dataset_parse_example", c_int, P, POINTER(FeatureSpec), c_int, POINTER(ParseOptions), POINTER(P))
_sig("tl_dataset_prefetch", c_int, P, c_int64, POINTER(P))
_sig("tl_dataset_scale", c_int, P, c_double, POINTER(c_char_p), c_int, POINTER(c_char_p), c_int, POINTER(P))
# TFRecord files and tf.Example
_sig("tl_record_writer_options_init", None, POINTER(RecordWriterOptions))
_sig("tl_record_writer_open", c_int, c_char_p, POINTER(RecordWriterOptions), POINTER(P))
_sig("tl_record_writer_write", c_int, P, c_void_p, c_size_t)
_sig("tl_record_writer_flush", c_int, P, c_bool)
_sig("tl_record_writer_close", c_int, P)
_sig("tl_record_writer_destroy", None, P)
_sig("tl_example_builder_create", c_int, POINTER(P))
_sig("tl_example_builder_destroy", None, P)
_sig("tl_example_builder_add_floats", c_int, P, c_char_p, POINTER(c_float), c_size_t)
_sig("tl_example_builder_add_int64s", c_int, P, c_char_p, POINTER(c_int64), c_size_t)
_sig("tl_example_builder_add_bytes", c_int, P, c_char_p, POINTER(Bytes), c_size_t)
_sig("tl_example_builder_serialize", c_int, P, POINTER(c_void_p), POINTER(c_size_t))
# embedding configuration, synthetic Criteo
_sig("tl_emb_spec_from_json", c_int, c_char_p, c_size_t, POINTER(P))
_sig("tl_emb_spec_config", P, P)
_sig("tl_emb_spec_destroy", None, P)
_sig("tl_labeled_data_destroy", None, POINTER(LabeledData))
_sig("tl_synthetic_sequences_spec_init", None, POINTER(SyntheticSequencesSpec))
_sig("tl_synthetic_sequences_generate", c_int, POINTER(SyntheticSequencesSpec), c_int64, c_int64, POINTER(c_float),
     POINTER(c_int32))
_sig("tl_criteo_synth_config_default", None, POINTER(CriteoSynthConfig))
_sig("tl_criteo_synth_create", c_int, POINTER(CriteoSynthConfig), POINTER(P))
_sig("tl_criteo_synth_destroy", None, P)
_sig("tl_criteo_synth_load", c_int, P, c_int64, c_int64, POINTER(POINTER(LabeledData)))
_sig("tl_criteo_synth_oracle_auc", c_int, P, c_int64, c_int64, POINTER(c_double))


def last_error():
    m = lib.tl_last_error()
    return m.decode("utf-8", "replace") if m else ""


def check(st, what=None):
    """Raises the exception of a failed call's status with the C message."""
    if st == 0:
        return
    msg = last_error()
    if what:
        msg = "%s: %s" % (what, msg)
    raise errors.from_status(st, msg)


def cstr(s):
    return None if s is None else s.encode("utf-8")


def fail_status(exc):
    """Records a Python exception raised in a callback as the C library's
    last error and returns the status to hand back."""
    st = errors.status_of(exc)
    lib.tl_error(st, b"%s", ("%s: %s" % (type(exc).__name__, exc)).encode("utf-8", "replace"))
    return st
