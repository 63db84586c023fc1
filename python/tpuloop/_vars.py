"""Variables, variable scopes and initializers (tf.compat.v1.get_variable)."""
import contextlib

from . import _lib
from ._graph import get_default_graph, i64s, record
from ._lib import lib


class Initializer:
    """An initializer tpuloop draws in C from its counter-based RNG, keyed by
    tf_random_seed and the variable's name (so values do not depend on the
    order in which variables are created)."""

    def __init__(self, kind, a=0.0, b=0.0, what=""):
        self.kind, self.a, self.b, self.what = kind, float(a), float(b), what

    def c(self):
        return _lib.Initializer(self.kind, self.a, self.b)

    def __repr__(self):
        return "<tpuloop initializer %s>" % self.what


def zeros_initializer(dtype=None):
    return Initializer(_lib.INIT_ZEROS, what="zeros")


def ones_initializer(dtype=None):
    return Initializer(_lib.INIT_CONSTANT, 1.0, what="ones")


def constant_initializer(value=0, dtype=None):
    return Initializer(_lib.INIT_CONSTANT, float(value), what="constant(%r)" % (value,))


def random_uniform_initializer(minval=-0.05, maxval=0.05, seed=None, dtype=None):
    return Initializer(_lib.INIT_UNIFORM, minval, maxval, what="random_uniform")


def truncated_normal_initializer(mean=0.0, stddev=1.0, seed=None, dtype=None):
    return Initializer(_lib.INIT_TRUNCATED_NORMAL, mean, stddev, what="truncated_normal")


def glorot_uniform_initializer(seed=None, dtype=None):
    return Initializer(_lib.INIT_GLOROT_UNIFORM, what="glorot_uniform")


def he_normal(seed=None):
    return Initializer(_lib.INIT_HE_NORMAL, what="he_normal")


def _as_initializer(init, default):
    if init is None:
        return default
    if isinstance(init, Initializer):
        return init
    if isinstance(init, (int, float)):
        return constant_initializer(init)
    if callable(init):  # a class such as tpuloop.zeros_initializer passed uncalled
        r = init()
        if isinstance(r, Initializer):
            return r
    raise TypeError("initializer must be a tpuloop initializer or a number, got %r" % (init,))


def get_variable(name, shape=None, dtype=None, initializer=None, trainable=True, **kwargs):
    """tf.compat.v1.get_variable: a float32 variable named within the current
    variable scopes; the same name in another mode's graph is the same
    variable. Default initializer: glorot_uniform, as TensorFlow's."""
    if shape is None:
        raise ValueError("get_variable %r: shape is required" % (name,))
    if dtype is not None and getattr(dtype, "name", dtype) != "float32":
        raise TypeError("get_variable %r: tpuloop variables are float32, got %r" % (name, dtype))
    g = get_default_graph()
    full = g.scoped(name)
    init = _as_initializer(initializer, glorot_uniform_initializer())
    g.var_shapes[full] = tuple(int(v) for v in shape)
    d, n = i64s(shape)
    fn = lib.tl_variable if trainable else lib.tl_state_variable
    return record(g, "variable %s" % full, fn(g.ptr, full.encode(), d, n, init.c()))


@contextlib.contextmanager
def variable_scope(name_or_scope, default_name=None, reuse=None, **kwargs):
    """tf.compat.v1.variable_scope: prefixes variable and layer names."""
    g = get_default_graph()
    name = name_or_scope if name_or_scope is not None else default_name
    g.scopes.append(str(name))
    try:
        yield name
    finally:
        g.scopes.pop()


@contextlib.contextmanager
def name_scope(name, default_name=None, values=None):
    """tf.compat.v1.name_scope: names ops, not variables (get_variable and
    the layers' variables keep the variable scope's names, as in
    TensorFlow); tpuloop's ops have no names to prefix, so nothing changes."""
    yield name if name is not None else default_name
