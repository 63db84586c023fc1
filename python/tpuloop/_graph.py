"""Symbolic tensors and the graph a model_fn is traced into.

A model_fn runs once per mode and batch shape, inside the C estimator's
trace: the tpuloop functions it calls record ops in the C graph (graph.h)
and return Tensor handles. An op given a bad shape fails at once, raising
the C message from the user's own line, so the traceback points at it.
"""
import contextlib
import ctypes
import threading

import numpy as np

from . import _lib, errors
from ._lib import lib


class DType:
    """tf.DType: float32, int32, int64."""

    def __init__(self, name, code, np_type):
        self.name, self.code, self.as_numpy_dtype = name, code, np_type

    def __repr__(self):
        return "tpuloop.%s" % self.name

    @property
    def is_floating(self):
        return self.code == _lib.F32

    @property
    def is_integer(self):
        return self.code != _lib.F32


float32 = DType("float32", _lib.F32, np.float32)
int32 = DType("int32", _lib.I32, np.int32)
int64 = DType("int64", _lib.I64, np.int64)
_DTYPES = {"float32": float32, "int32": int32, "int64": int64, np.dtype(np.float32): float32,
           np.dtype(np.int32): int32, np.dtype(np.int64): int64}


def as_dtype(d):
    if isinstance(d, DType):
        return d
    try:
        return _DTYPES[d if isinstance(d, str) else np.dtype(d)]
    except (KeyError, TypeError):
        raise TypeError("tpuloop tensors are float32, int32 or int64; got dtype %r" % (d,)) from None


class TensorShape(tuple):
    """tf.TensorShape of a traced tensor: every dimension is static."""

    def as_list(self):
        return list(self)

    @property
    def ndims(self):
        return len(self)

    @property
    def rank(self):
        return len(self)

    def num_elements(self):
        n = 1
        for d in self:
            n *= d
        return n


class Graph:
    """One trace of the model_fn: the C graph, the variable scopes and the
    layer names used so far (TensorFlow's 'dense', 'dense_1', ...)."""

    def __init__(self, ptr, mode, batch_size, params):
        self.ptr = ptr
        self.mode = mode
        self.batch_size = batch_size
        self.params = params
        self.scopes = []
        self.layer_names = set()
        self.tensors = {}
        self.var_shapes = {}

    def scoped(self, name):
        return "/".join(self.scopes + [name]) if self.scopes else name

    def unique_layer_name(self, base):
        """TensorFlow 1's layer naming: base, base_1, base_2, ... within the
        current variable scope."""
        name, k = base, 0
        while self.scoped(name) in self.layer_names:
            k += 1
            name = "%s_%d" % (base, k)
        self.layer_names.add(self.scoped(name))
        return self.scoped(name)

    def check(self, t, what):
        """Wraps a new tl_t, raising the graph's error when it is invalid."""
        if t == _lib.T_INVALID:
            msg = lib.tl_graph_error(self.ptr)
            msg = msg.decode("utf-8", "replace") if msg else _lib.last_error()
            st = lib.tl_graph_status(self.ptr)
            if not msg.startswith(what.split(" ")[0]):
                msg = "%s: %s" % (what, msg)
            raise errors.from_status(st if st != 0 else errors.EINVAL, msg)
        return Tensor(self, t)


_state = threading.local()


def get_default_graph():
    g = getattr(_state, "graph", None)
    if g is None:
        raise RuntimeError("tpuloop ops run inside a model_fn that a TPUEstimator traces; there is no graph here")
    return g


@contextlib.contextmanager
def graph_scope(g):
    prev = getattr(_state, "graph", None)
    _state.graph = g
    try:
        yield g
    finally:
        _state.graph = prev


class Tensor:
    """A symbolic tensor of the model_fn's graph (tf.Tensor). Arithmetic
    operators record ops; shapes are static and known while tracing."""

    __slots__ = ("graph", "id")
    __array_priority__ = 100  # numpy scalars on the left defer to these operators

    def __init__(self, graph, tid):
        self.graph, self.id = graph, tid

    @property
    def shape(self):
        dims = (ctypes.c_int64 * _lib.MAX_RANK)()
        r = lib.tl_rank(self.graph.ptr, self.id, dims)
        return TensorShape(int(dims[i]) for i in range(max(r, 0)))

    def get_shape(self):
        return self.shape

    @property
    def dtype(self):
        return self.graph.tensors.get(self.id, float32)

    @property
    def ndim(self):
        return len(self.shape)

    def __repr__(self):
        return "<tpuloop.Tensor %d shape=%s dtype=%s>" % (self.id, tuple(self.shape), self.dtype.name)

    def __bool__(self):
        raise TypeError("a symbolic tpuloop.Tensor has no truth value while tracing; use tpuloop.where")

    def __hash__(self):
        return hash((id(self.graph), self.id))

    # Arithmetic, as TensorFlow's operator overloads (== stays identity, as in TF 1).
    def __add__(self, o): return binary("add", self, o)
    def __radd__(self, o): return binary("add", o, self)
    def __sub__(self, o): return binary("sub", self, o)
    def __rsub__(self, o): return binary("sub", o, self)
    def __mul__(self, o): return binary("mul", self, o)
    def __rmul__(self, o): return binary("mul", o, self)
    def __truediv__(self, o): return binary("div", self, o)
    def __rtruediv__(self, o): return binary("div", o, self)
    def __pow__(self, o): return binary("pow", self, o)
    def __rpow__(self, o): return binary("pow", o, self)
    def __matmul__(self, o): return matmul(self, o)
    def __rmatmul__(self, o): return matmul(o, self)
    def __neg__(self): return unary("neg", self)
    def __abs__(self): return unary("abs", self)
    def __lt__(self, o): return binary("less", self, o)
    def __le__(self, o): return binary("less_equal", self, o)
    def __gt__(self, o): return binary("greater", self, o)
    def __ge__(self, o): return binary("greater_equal", self, o)
    def __eq__(self, o): return self is o
    def __ne__(self, o): return self is not o

    def __getitem__(self, key):
        return getitem(self, key)


def _result_dtype(g, t, dtype):
    if dtype is not None and dtype is not float32:
        g.tensors[t.id] = dtype
    return t


def record(g, name, tid, dtype=None):
    """Checks a tl_t from the C op `name` and wraps it."""
    return _result_dtype(g, g.check(tid, name), dtype)


def constant(value, dtype=None, shape=None, name=None):
    """tf.constant of a scalar (broadcast to shape, default scalar)."""
    del name
    if getattr(_state, "graph", None) is None:   # on the host (metric_fn, host_call): NumPy, as TF's eager
        dt = as_dtype(dtype).as_numpy_dtype if dtype is not None else None
        arr = np.asarray(value, dtype=dt)
        return np.broadcast_to(arr, tuple(shape)).copy() if shape is not None else arr
    g = get_default_graph()
    arr = np.asarray(value)
    if arr.ndim != 0 and np.unique(arr).size != 1:
        raise errors.UnimplementedError("tpuloop.constant takes a scalar (or an array of one repeated value); "
                                        "got an array of shape %s: pass data through the input_fn" % (arr.shape,))
    dims = tuple(shape) if shape is not None else arr.shape
    d = (ctypes.c_int64 * max(len(dims), 1))(*dims)
    t = record(g, "constant", lib.tl_constant(g.ptr, float(arr.flat[0]), d, len(dims)))
    dt = as_dtype(dtype) if dtype is not None else (float32 if arr.dtype.kind == "f" or arr.dtype == bool
                                                    else int32)
    if dt is not float32:
        t = cast(t, dt)
    return t


def convert_to_tensor(x, like=None):
    if isinstance(x, Tensor):
        return x
    if isinstance(x, (int, float, np.number, np.ndarray, bool)):
        dt = like.dtype if isinstance(like, Tensor) else None
        return constant(x, dtype=dt)
    raise TypeError("expected a tpuloop.Tensor or a number, got %r" % (type(x).__name__,))


def on_host(*xs):
    """True outside a trace when no argument is a Tensor: the op then runs
    in NumPy, as TensorFlow's ops run eagerly on a host_call's or
    metric_fn's arrays."""
    return getattr(_state, "graph", None) is None and not any(isinstance(x, Tensor) for x in xs)


_NP_UNARY = {"neg": np.negative, "abs": np.abs, "exp": np.exp, "ln": np.log, "sqrt": np.sqrt,
             "rsqrt": lambda x: 1 / np.sqrt(x), "square": np.square, "tanh": np.tanh,
             "sigmoid": lambda x: 1 / (1 + np.exp(-x)), "relu": lambda x: np.maximum(x, 0),
             "softplus": lambda x: np.logaddexp(0, x)}
_NP_BINARY = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide, "maximum": np.maximum,
              "minimum": np.minimum, "pow": np.power, "equal": np.equal, "not_equal": np.not_equal,
              "less": np.less, "less_equal": np.less_equal, "greater": np.greater,
              "greater_equal": np.greater_equal}


def _graph_of(*xs):
    for x in xs:
        if isinstance(x, Tensor):
            return x.graph
    return get_default_graph()


def unary(op, x):
    if on_host(x):
        return _NP_UNARY[op](np.asarray(x))
    g = _graph_of(x)
    x = convert_to_tensor(x)
    return record(g, op, getattr(lib, "tl_" + op)(g.ptr, x.id), x.dtype)


_BOOL_OPS = ("equal", "not_equal", "less", "less_equal", "greater", "greater_equal")


def binary(op, x, y):
    if on_host(x, y):
        return _NP_BINARY[op](np.asarray(x), np.asarray(y))
    g = _graph_of(x, y)
    x = convert_to_tensor(x, like=y)
    y = convert_to_tensor(y, like=x)
    return record(g, op, getattr(lib, "tl_" + op)(g.ptr, x.id, y.id), None if op in _BOOL_OPS else x.dtype)


def cast(x, dtype):
    if _is_step(x):
        return x
    dt = as_dtype(dtype)
    from .data import Column
    if isinstance(x, Column):
        return Column(x.key, dt.name, x.scale, dt.name) if dt.name == "float32" else x
    if on_host(x):
        return np.asarray(x).astype(dt.as_numpy_dtype)
    g = _graph_of(x)
    x = convert_to_tensor(x)
    if x.dtype is dt:
        return x
    return record(g, "cast", lib.tl_cast(g.ptr, x.id, dt.code), dt)


def matmul(a, b, transpose_a=False, transpose_b=False):
    if on_host(a, b):
        a, b = np.asarray(a), np.asarray(b)
        return np.matmul(np.swapaxes(a, -1, -2) if transpose_a else a, np.swapaxes(b, -1, -2) if transpose_b else b)
    g = _graph_of(a, b)
    a, b = convert_to_tensor(a), convert_to_tensor(b)
    if len(a.shape) > 2 or len(b.shape) > 2:
        return record(g, "matmul", lib.tl_batch_matmul(g.ptr, a.id, b.id, transpose_a, transpose_b))
    return record(g, "matmul", lib.tl_matmul(g.ptr, a.id, b.id, transpose_a, transpose_b))


def i64s(vals):
    vals = [int(v) for v in vals]
    return (ctypes.c_int64 * max(len(vals), 1))(*vals), len(vals)


def ints(vals):
    vals = [int(v) for v in vals]
    return (ctypes.c_int * max(len(vals), 1))(*vals), len(vals)


def tids(xs):
    return (_lib.tl_t * max(len(xs), 1))(*[x.id for x in xs]), len(xs)


def _is_step(x):
    from .train import _GlobalStep
    return isinstance(x, _GlobalStep)


def reshape(x, shape):
    if _is_step(x):
        return x   # the global step lives on the host; host_call receives it (see get_global_step)
    if on_host(x):
        return np.reshape(np.asarray(x), [int(v) for v in shape])
    g = _graph_of(x)
    x = convert_to_tensor(x)
    shape = [int(s) for s in shape]
    if shape.count(-1) > 1:
        raise ValueError("reshape: at most one dimension may be -1, got %s" % (shape,))
    if -1 in shape:
        known = 1
        for s in shape:
            if s != -1:
                known *= s
        total = x.shape.num_elements()
        if known == 0 or total % known:
            raise ValueError("reshape: cannot reshape a tensor of %d elements (shape %s) into %s"
                             % (total, tuple(x.shape), shape))
        shape[shape.index(-1)] = total // known
    d, n = i64s(shape)
    return record(g, "reshape", lib.tl_reshape(g.ptr, x.id, d, n), x.dtype)


def getitem(x, key):
    """Basic indexing: integers and slices with step 1, per axis."""
    if not isinstance(key, tuple):
        key = (key,)
    g = x.graph
    t = x
    squeeze_axes = []
    axis = 0
    for k in key:
        if k is Ellipsis:
            raise errors.UnimplementedError("tpuloop tensors take integers and slices, not Ellipsis")
        dim = t.shape[axis]
        if isinstance(k, slice):
            if k.step not in (None, 1):
                raise errors.UnimplementedError("tpuloop tensor slices have step 1, got %r" % (k.step,))
            start, stop, _ = k.indices(dim)
            if (start, stop) != (0, dim):
                t = record(g, "slice", lib.tl_slice(g.ptr, t.id, axis, start, max(stop - start, 0)), t.dtype)
        else:
            i = int(k)
            if i < -dim or i >= dim:
                raise IndexError("index %d is out of bounds for axis %d with size %d" % (i, axis, dim))
            t = record(g, "slice", lib.tl_slice(g.ptr, t.id, axis, i % dim, 1), t.dtype)
            squeeze_axes.append(axis)
        axis += 1
    if squeeze_axes:
        a, n = ints(squeeze_axes)
        t = record(g, "squeeze", lib.tl_squeeze(g.ptr, t.id, a, n), t.dtype)
    return t
