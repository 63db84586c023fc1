"""tpuloop: TPUEstimator, TPUEmbedding and Keras' distribution API over a C
training runtime. The module layout is TensorFlow 1.x's, so that porting a
TPUEstimator program is mostly a change of import:

    import tpuloop as tf
    tf.estimator.tpu.TPUEstimator(model_fn, config=tf.estimator.tpu.RunConfig(...), ...)

A model_fn is traced once per mode into a C step program; input_fns build
tf.data-style pipelines that run in C; Python is called only to trace and at
loop boundaries (progress, host_call, metric_fn)."""
from . import errors
from ._graph import DType, Tensor, TensorShape, as_dtype, cast, constant, float32, int32, int64, matmul, reshape
from ._ops import *  # noqa: F401,F403 - tf.* ops
from ._ops import __all__ as _ops_all
from ._vars import (constant_initializer, get_variable, glorot_uniform_initializer, he_normal, name_scope,
                    ones_initializer, random_uniform_initializer, truncated_normal_initializer, variable_scope,
                    zeros_initializer)
from . import data, datasets, io, layers, losses, metrics, nn, train  # noqa: E402
from . import distribution, estimator, tpu  # noqa: E402
from .tpu import experimental as _tpu_experimental  # noqa: E402,F401 - tpuloop.tpu.experimental

__version__ = "0.1.0"
string = "string"
math = __import__("tpuloop._ops", fromlist=["_ops"])

__all__ = ["DType", "Tensor", "TensorShape", "as_dtype", "cast", "constant", "float32", "int32", "int64", "matmul",
           "reshape", "errors", "data", "datasets", "distribution", "io", "layers", "losses", "metrics", "nn", "train",
           "estimator", "tpu", "get_variable", "variable_scope", "name_scope", "constant_initializer",
           "glorot_uniform_initializer", "he_normal", "ones_initializer", "random_uniform_initializer",
           "truncated_normal_initializer", "zeros_initializer"] + [n for n in _ops_all if n not in ("matmul", "cast",
                                                                                                "constant", "reshape")]
