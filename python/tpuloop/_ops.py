"""The ops a model_fn writes, with TensorFlow 1.x's names and arguments.

tpuloop (tf.*), tpuloop.nn (tf.nn.*) and tpuloop.math re-export these."""
import ctypes

import numpy as np

from . import _lib, errors
from ._graph import (Tensor, _graph_of, as_dtype, binary, cast, constant, convert_to_tensor, float32, i64s, ints,
                     int32, int64, matmul, on_host, record, reshape, tids, unary)
from ._lib import lib


def _axes(x, axis):
    r = len(x.shape)
    if axis is None:
        return list(range(r))
    if isinstance(axis, (int, np.integer)):
        axis = [axis]
    return [int(a) % r if r else int(a) for a in axis]


_NP_REDUCE = {"reduce_sum": np.sum, "reduce_mean": np.mean, "reduce_max": np.max, "reduce_min": np.min}


def _reduce(op, x, axis, keepdims):
    if on_host(x):
        a = np.asarray(x)
        if op == "logsumexp":
            m = np.max(a, axis=axis, keepdims=True)
            r = np.log(np.sum(np.exp(a - m), axis=axis, keepdims=True)) + m
            return r if keepdims else np.squeeze(r, axis=axis)
        return _NP_REDUCE[op](a, axis=None if axis is None else tuple(np.atleast_1d(axis)), keepdims=keepdims)
    g = _graph_of(x)
    x = convert_to_tensor(x)
    a, n = ints(_axes(x, axis))
    return record(g, op, getattr(lib, "tl_" + op)(g.ptr, x.id, a, n, bool(keepdims)), x.dtype)


def reduce_sum(input_tensor, axis=None, keepdims=False, name=None):
    return _reduce("reduce_sum", input_tensor, axis, keepdims)


def reduce_mean(input_tensor, axis=None, keepdims=False, name=None):
    return _reduce("reduce_mean", input_tensor, axis, keepdims)


def reduce_max(input_tensor, axis=None, keepdims=False, name=None):
    return _reduce("reduce_max", input_tensor, axis, keepdims)


def reduce_min(input_tensor, axis=None, keepdims=False, name=None):
    return _reduce("reduce_min", input_tensor, axis, keepdims)


def reduce_logsumexp(input_tensor, axis=None, keepdims=False, name=None):
    return _reduce("logsumexp", input_tensor, axis, keepdims)


def add(x, y, name=None): return binary("add", x, y)
def subtract(x, y, name=None): return binary("sub", x, y)
def multiply(x, y, name=None): return binary("mul", x, y)
def divide(x, y, name=None): return binary("div", x, y)
def truediv(x, y, name=None): return binary("div", x, y)
def maximum(x, y, name=None): return binary("maximum", x, y)
def minimum(x, y, name=None): return binary("minimum", x, y)
def pow(x, y, name=None): return binary("pow", x, y)  # noqa: A001 - TensorFlow's name
def equal(x, y, name=None): return binary("equal", x, y)
def not_equal(x, y, name=None): return binary("not_equal", x, y)
def less(x, y, name=None): return binary("less", x, y)
def less_equal(x, y, name=None): return binary("less_equal", x, y)
def greater(x, y, name=None): return binary("greater", x, y)
def greater_equal(x, y, name=None): return binary("greater_equal", x, y)
def negative(x, name=None): return unary("neg", x)
def abs(x, name=None): return unary("abs", x)  # noqa: A001
def exp(x, name=None): return unary("exp", x)
def log(x, name=None): return unary("ln", x)
def sqrt(x, name=None): return unary("sqrt", x)
def rsqrt(x, name=None): return unary("rsqrt", x)
def square(x, name=None): return unary("square", x)
def tanh(x, name=None): return unary("tanh", x)
def sigmoid(x, name=None): return unary("sigmoid", x)


def where(condition, x, y, name=None):
    if on_host(condition, x, y):
        return np.where(np.asarray(condition), x, y)
    g = _graph_of(condition, x, y)
    c, x, y = convert_to_tensor(condition), convert_to_tensor(x, like=y), convert_to_tensor(y, like=x)
    return record(g, "where", lib.tl_where(g.ptr, c.id, x.id, y.id), x.dtype)


def clip_by_value(t, clip_value_min, clip_value_max, name=None):
    g = _graph_of(t)
    return record(g, "clip_by_value", lib.tl_clip(g.ptr, t.id, float(clip_value_min), float(clip_value_max)))


def concat(values, axis, name=None):
    if on_host(*values):
        return np.concatenate([np.asarray(v) for v in values], axis=axis)
    xs = [convert_to_tensor(v) for v in values]
    g = _graph_of(*xs)
    # An op takes at most 32 inputs: longer lists are joined in groups first
    # (the same values; the built-in models join theirs the same way).
    while len(xs) > _CONCAT_FANIN:
        xs = [xs[i] if len(xs[i:i + _CONCAT_FANIN]) == 1 else concat(xs[i:i + _CONCAT_FANIN], axis)
              for i in range(0, len(xs), _CONCAT_FANIN)]
    if len(xs) == 1:
        return xs[0]
    a, n = tids(xs)
    return record(g, "concat", lib.tl_concat(g.ptr, a, n, int(axis)), xs[0].dtype)


_CONCAT_FANIN = 32


def stack(values, axis=0, name=None):
    xs = [convert_to_tensor(v) for v in values]
    g = _graph_of(*xs)
    a, n = tids(xs)
    return record(g, "stack", lib.tl_stack(g.ptr, a, n, int(axis)), xs[0].dtype)


def split(value, num_or_size_splits, axis=0, name=None):
    g = _graph_of(value)
    if not isinstance(num_or_size_splits, (int, np.integer)):
        out, begin = [], 0
        for s in num_or_size_splits:
            out.append(record(g, "split", lib.tl_slice(g.ptr, value.id, int(axis), begin, int(s)), value.dtype))
            begin += int(s)
        return out
    num = int(num_or_size_splits)
    out = (_lib.tl_t * num)()
    st = lib.tl_split(g.ptr, value.id, num, int(axis), out)
    if st != 0:
        g.check(_lib.T_INVALID, "split")
    return [Tensor(g, out[i]) for i in range(num)]


def transpose(a, perm=None, name=None):
    g = _graph_of(a)
    if perm is None:
        perm = list(range(len(a.shape)))[::-1]
    p, n = ints(perm)
    return record(g, "transpose", lib.tl_transpose(g.ptr, a.id, p, n), a.dtype)


def expand_dims(input, axis, name=None):  # noqa: A002
    if on_host(input):
        return np.expand_dims(np.asarray(input), axis)
    g = _graph_of(input)
    return record(g, "expand_dims", lib.tl_expand_dims(g.ptr, input.id, int(axis)), input.dtype)


def squeeze(input, axis=None, name=None):  # noqa: A002
    if on_host(input):
        return np.squeeze(np.asarray(input), axis=None if axis is None else tuple(np.atleast_1d(axis)))
    g = _graph_of(input)
    if axis is None:
        axis = [i for i, d in enumerate(input.shape) if d == 1]
    a, n = ints(_axes(input, axis))
    return record(g, "squeeze", lib.tl_squeeze(g.ptr, input.id, a, n), input.dtype)


def broadcast_to(input, shape, name=None):  # noqa: A002
    g = _graph_of(input)
    d, n = i64s(shape)
    return record(g, "broadcast_to", lib.tl_broadcast_to(g.ptr, input.id, d, n), input.dtype)


def tile(input, multiples, name=None):  # noqa: A002
    g = _graph_of(input)
    if len(multiples) != len(input.shape):
        raise ValueError("tile: multiples has %d entries; the input has rank %d" % (len(multiples), len(input.shape)))
    d, _ = i64s(multiples)
    return record(g, "tile", lib.tl_tile(g.ptr, input.id, d), input.dtype)


def pad(tensor, paddings, mode="CONSTANT", constant_values=0, name=None):
    if mode.upper() != "CONSTANT":
        raise errors.UnimplementedError("pad: mode %r; tpuloop pads with a constant" % (mode,))
    g = _graph_of(tensor)
    flat = [int(v) for row in paddings for v in row]
    if len(flat) != 2 * len(tensor.shape):
        raise ValueError("pad: paddings must be (%d, 2) for a tensor of rank %d" % (len(tensor.shape),
                                                                               len(tensor.shape)))
    d, _ = i64s(flat)
    return record(g, "pad", lib.tl_pad(g.ptr, tensor.id, d, float(constant_values)), tensor.dtype)


def gather(params, indices, axis=0, name=None):
    g = _graph_of(params, indices)
    return record(g, "gather", lib.tl_gather(g.ptr, params.id, indices.id, int(axis)), params.dtype)


def one_hot(indices, depth, on_value=1.0, off_value=0.0, axis=-1, dtype=None, name=None):
    g = _graph_of(indices)
    return record(g, "one_hot", lib.tl_one_hot(g.ptr, indices.id, int(depth), float(on_value), float(off_value),
                                               int(axis)))


def argmax(input, axis=None, output_type=int64, name=None):  # noqa: A002
    dt = as_dtype(output_type)
    if on_host(input):
        return np.argmax(np.asarray(input), axis=0 if axis is None else axis).astype(dt.as_numpy_dtype)
    g = _graph_of(input)
    return record(g, "argmax", lib.tl_argmax(g.ptr, input.id, 0 if axis is None else int(axis), dt.code), dt)


def argmin(input, axis=None, output_type=int64, name=None):  # noqa: A002
    dt = as_dtype(output_type)
    if on_host(input):
        return np.argmin(np.asarray(input), axis=0 if axis is None else axis).astype(dt.as_numpy_dtype)
    g = _graph_of(input)
    return record(g, "argmin", lib.tl_argmin(g.ptr, input.id, 0 if axis is None else int(axis), dt.code), dt)


def einsum(equation, *inputs, **kwargs):
    xs = [convert_to_tensor(v) for v in inputs]
    g = _graph_of(*xs)
    a, n = tids(xs)
    return record(g, "einsum", lib.tl_einsum(g.ptr, equation.encode(), a, n))


def zeros(shape, dtype=float32, name=None):
    return constant(0, dtype=dtype, shape=shape)


def ones(shape, dtype=float32, name=None):
    return constant(1, dtype=dtype, shape=shape)


def zeros_like(t, dtype=None, name=None):
    if on_host(t):
        return np.zeros_like(np.asarray(t), dtype=None if dtype is None else as_dtype(dtype).as_numpy_dtype)
    return constant(0, dtype=dtype or t.dtype, shape=t.shape)


def ones_like(t, dtype=None, name=None):
    if on_host(t):
        return np.ones_like(np.asarray(t), dtype=None if dtype is None else as_dtype(dtype).as_numpy_dtype)
    return constant(1, dtype=dtype or t.dtype, shape=t.shape)


def identity(x, name=None):
    return x


def shape(x, name=None):
    """The static shape, as a Python list (tpuloop's shapes are all static)."""
    return list(x.shape)


# ---- tf.nn ---------------------------------------------------------------------------


def relu(features, name=None): return unary("relu", features)
def softplus(features, name=None): return unary("softplus", features)
def silu(features, name=None): return unary("silu", features)


swish = silu


def relu6(features, name=None):
    return clip_by_value(features, 0.0, 6.0)


def gelu(features, approximate=False, name=None):
    g = _graph_of(features)
    return record(g, "gelu", lib.tl_gelu(g.ptr, features.id, bool(approximate)))


def leaky_relu(features, alpha=0.2, name=None):
    g = _graph_of(features)
    return record(g, "leaky_relu", lib.tl_leaky_relu(g.ptr, features.id, float(alpha)))


def elu(features, name=None):
    g = _graph_of(features)
    return record(g, "elu", lib.tl_elu(g.ptr, features.id, 1.0))


def softmax(logits, axis=-1, name=None):
    if on_host(logits):
        z = np.asarray(logits)
        e = np.exp(z - np.max(z, axis=axis, keepdims=True))
        return e / np.sum(e, axis=axis, keepdims=True)
    g = _graph_of(logits)
    return record(g, "softmax", lib.tl_softmax(g.ptr, logits.id, int(axis)))


def log_softmax(logits, axis=-1, name=None):
    g = _graph_of(logits)
    return record(g, "log_softmax", lib.tl_log_softmax(g.ptr, logits.id, int(axis)))


def bias_add(value, bias, data_format=None, name=None):
    g = _graph_of(value, bias)
    return record(g, "bias_add", lib.tl_bias_add(g.ptr, value.id, bias.id))


def dropout(x, rate=None, keep_prob=None, name=None):
    """tf.nn.dropout: identity outside TRAIN; rate = 1 - keep_prob."""
    if rate is None:
        if keep_prob is None:
            raise ValueError("dropout: give rate (or keep_prob)")
        rate = 1.0 - keep_prob
    if not 0 <= rate < 1:
        raise ValueError("dropout: rate must be in [0, 1), got %r" % (rate,))
    g = _graph_of(x)
    return record(g, "dropout", lib.tl_dropout(g.ptr, x.id, float(rate)))


def sparse_softmax_cross_entropy_with_logits(labels=None, logits=None, name=None):
    """Per-example cross entropy of int labels (batch,) and logits (batch, classes)."""
    g = _graph_of(logits)
    return record(g, "sparse_softmax_cross_entropy_with_logits",
                  lib.tl_softmax_xent(g.ptr, logits.id, cast(labels, int32).id))


def softmax_cross_entropy_with_logits(labels=None, logits=None, axis=-1, name=None):
    g = _graph_of(logits)
    return record(g, "softmax_cross_entropy_with_logits",
                  lib.tl_softmax_xent_dense(g.ptr, logits.id, convert_to_tensor(labels).id, 0.0))


def sigmoid_cross_entropy_with_logits(labels=None, logits=None, name=None):
    g = _graph_of(logits)
    lab = convert_to_tensor(labels)
    # int labels (batch,) beside logits (batch, 1): TensorFlow's binary head, one loss per example.
    lab = cast(lab, int32) if lab.dtype is not float32 and len(lab.shape) == 1 else cast(lab, float32)
    return record(g, "sigmoid_cross_entropy_with_logits", lib.tl_sigmoid_xent(g.ptr, logits.id, lab.id))


def in_top_k(predictions, targets, k, name=None):
    g = _graph_of(predictions)
    return record(g, "in_top_k", lib.tl_in_top_k(g.ptr, predictions.id, cast(targets, int32).id, int(k)))


def moments(x, axes, keepdims=False, name=None):
    mean = reduce_mean(x, axes, keepdims=True)
    var = reduce_mean(square(x - mean), axes, keepdims=keepdims)
    return (mean if keepdims else squeeze(mean, axes)), var


def _conv_attrs(strides, padding, dilations, rank4=True):
    def pair(v, what):
        if v is None:
            return (1, 1)
        if isinstance(v, (int, np.integer)):
            return (int(v), int(v))
        v = list(v)
        if len(v) == 4:
            if v[0] != 1 or v[3] != 1:
                raise ValueError("%s must be 1 on the batch and channel dimensions (NHWC), got %s" % (what, v))
            return (v[1], v[2])
        if len(v) == 2:
            return tuple(v)
        raise ValueError("%s must be an int or a list of 2 or 4 ints, got %s" % (what, v))
    p = padding.upper() if isinstance(padding, str) else padding
    if p not in ("SAME", "VALID"):
        raise ValueError("padding must be 'SAME' or 'VALID', got %r" % (padding,))
    a = _lib.Conv2dAttrs()
    a.strides[:] = pair(strides, "strides")
    a.dilations[:] = pair(dilations, "dilations")
    a.padding = _lib.PAD_SAME if p == "SAME" else _lib.PAD_VALID
    a.groups = 1
    return a


def conv2d(input, filters=None, strides=1, padding="VALID", data_format="NHWC", dilations=None,  # noqa: A002
           name=None, filter=None):  # noqa: A002
    if data_format != "NHWC":
        raise errors.UnimplementedError("conv2d: data_format %r; tpuloop is NHWC" % (data_format,))
    f = filters if filters is not None else filter
    g = _graph_of(input, f)
    a = _conv_attrs(strides, padding, dilations)
    return record(g, "conv2d", lib.tl_conv2d(g.ptr, input.id, f.id, ctypes.byref(a)))


def depthwise_conv2d(input, filter, strides, padding, rate=None, name=None, data_format=None,  # noqa: A002
                     dilations=None):
    g = _graph_of(input, filter)
    a = _conv_attrs(strides, padding, dilations or rate)
    return record(g, "depthwise_conv2d", lib.tl_depthwise_conv2d(g.ptr, input.id, filter.id, ctypes.byref(a)))


def _pool(op, value, ksize, strides, padding):
    g = _graph_of(value)
    k = _conv_attrs(ksize, "VALID", None).strides
    s = _conv_attrs(strides, "VALID", None).strides
    p = _conv_attrs(None, padding, None).padding
    kk, _ = i64s(list(k))
    ss, _ = i64s(list(s))
    return record(g, op, getattr(lib, "tl_" + op)(g.ptr, value.id, kk, ss, p))


def max_pool2d(input, ksize, strides, padding, data_format="NHWC", name=None):  # noqa: A002
    return _pool("max_pool2d", input, ksize, strides, padding)


def avg_pool2d(input, ksize, strides, padding, data_format="NHWC", name=None):  # noqa: A002
    return _pool("avg_pool2d", input, ksize, strides, padding)


max_pool = max_pool2d
avg_pool = avg_pool2d


def pairwise_dot(x, name=None):
    """DLRM's dot interaction (TorchRec's, FBGEMM's): x (batch, F, D) to the
    strictly lower triangle of x·xᵀ, (batch, F(F-1)/2), row by row.
    TensorFlow programs write it as matmul(x, x, transpose_b=True) and a
    gather of the triangle; tpuloop runs it as one op."""
    g = _graph_of(x)
    return record(g, "pairwise_dot", lib.tl_pairwise_dot(g.ptr, x.id))


def l2_loss(t, name=None):
    return reduce_sum(square(t)) * 0.5


# matmul, reshape, cast, constant and the dtypes are tf.* names too (imported above).


def embedding_lookup(params, ids, name=None, max_norm=None):
    """tf.nn.embedding_lookup of one dense table: rows of params by int ids."""
    if max_norm is not None:
        raise errors.UnimplementedError("embedding_lookup: max_norm")
    return gather(params, cast(ids, int32), axis=0)


# The tf.* ops (not this module's helpers, which stay internal).
__all__ = [n for n in dir() if not n.startswith("_") and n not in (
    "ctypes", "np", "errors", "lib", "Tensor", "as_dtype", "binary", "convert_to_tensor", "i64s", "ints", "on_host",
    "record", "tids", "unary")]
