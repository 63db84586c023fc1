"""tpuloop.layers: tf.compat.v1.layers, with TensorFlow 1's layer and
variable names ('dense/kernel', 'dense_1/bias', 'conv2d/kernel',
'batch_normalization/moving_mean'), so checkpoints read like TensorFlow's."""
from . import _ops
from ._graph import get_default_graph, i64s, record, reshape
from ._lib import lib
from ._vars import _as_initializer, glorot_uniform_initializer, ones_initializer, zeros_initializer


def _activate(x, activation):
    if activation is None:
        return x
    if isinstance(activation, str):
        activation = {"relu": _ops.relu, "sigmoid": _ops.sigmoid, "tanh": _ops.tanh, "gelu": _ops.gelu,
                      "softplus": _ops.softplus, "elu": _ops.elu, "swish": _ops.silu}[activation]
    return activation(x)


def dense(inputs, units, activation=None, use_bias=True, kernel_initializer=None, bias_initializer=None,
          name=None, **kwargs):
    """tf.compat.v1.layers.dense: inputs (..., in) to (..., units); the kernel
    is 'NAME/kernel' (glorot_uniform), the bias 'NAME/bias' (zeros)."""
    g = get_default_graph()
    scope = g.unique_layer_name(name or "dense")
    shape = inputs.shape
    if len(shape) < 2:
        raise ValueError("dense %s: inputs must have rank >= 2, got shape %s" % (scope, tuple(shape)))
    w = get_variable_abs(g, scope + "/kernel", [shape[-1], units],
                         _as_initializer(kernel_initializer, glorot_uniform_initializer()))
    x = inputs if len(shape) == 2 else reshape(inputs, [-1, shape[-1]])
    y = _ops.matmul(x, w)
    if use_bias:
        b = get_variable_abs(g, scope + "/bias", [units], _as_initializer(bias_initializer, zeros_initializer()))
        y = _ops.bias_add(y, b)
    if len(shape) > 2:
        y = reshape(y, list(shape[:-1]) + [units])
    return _activate(y, activation)


def get_variable_abs(g, full, shape, init, trainable=True):
    g.var_shapes[full] = tuple(int(v) for v in shape)
    d, n = i64s(shape)
    fn = lib.tl_variable if trainable else lib.tl_state_variable
    return record(g, "variable %s" % full, fn(g.ptr, full.encode(), d, n, init.c()))


def conv2d(inputs, filters, kernel_size, strides=(1, 1), padding="valid", data_format="channels_last",
           dilation_rate=(1, 1), activation=None, use_bias=True, kernel_initializer=None, bias_initializer=None,
           name=None, **kwargs):
    """tf.compat.v1.layers.conv2d (NHWC): 'NAME/kernel' (kh, kw, in, filters), 'NAME/bias'."""
    if data_format != "channels_last":
        raise ValueError("conv2d: data_format must be 'channels_last' in tpuloop, got %r" % (data_format,))
    g = get_default_graph()
    scope = g.unique_layer_name(name or "conv2d")
    ks = (kernel_size, kernel_size) if isinstance(kernel_size, int) else tuple(kernel_size)
    cin = inputs.shape[-1]
    w = get_variable_abs(g, scope + "/kernel", [ks[0], ks[1], cin, filters],
                         _as_initializer(kernel_initializer, glorot_uniform_initializer()))
    y = _ops.conv2d(inputs, w, strides=strides, padding=padding, dilations=dilation_rate)
    if use_bias:
        b = get_variable_abs(g, scope + "/bias", [filters], _as_initializer(bias_initializer, zeros_initializer()))
        y = _ops.bias_add(y, b)
    return _activate(y, activation)


def batch_normalization(inputs, axis=-1, momentum=0.99, epsilon=0.001, center=True, scale=True, training=False,
                        name=None, **kwargs):
    """tf.compat.v1.layers.batch_normalization over the last axis: 'NAME/gamma',
    'NAME/beta' and the state 'NAME/moving_mean', 'NAME/moving_variance'.
    training=True normalises by the batch and updates the moving statistics
    once per step (no UPDATE_OPS to run: tpuloop applies them with the step)."""
    if axis not in (-1, len(inputs.shape) - 1):
        raise ValueError("batch_normalization: tpuloop normalises the last axis (channels_last), got axis %r"
                         % (axis,))
    if not (center and scale):
        raise ValueError("batch_normalization: center and scale must be True in tpuloop")
    g = get_default_graph()
    scope = g.unique_layer_name(name or "batch_normalization")
    c = [inputs.shape[-1]]
    gamma = get_variable_abs(g, scope + "/gamma", c, ones_initializer())
    beta = get_variable_abs(g, scope + "/beta", c, zeros_initializer())
    mm = get_variable_abs(g, scope + "/moving_mean", c, zeros_initializer(), trainable=False)
    mv = get_variable_abs(g, scope + "/moving_variance", c, ones_initializer(), trainable=False)
    return record(g, "batch_normalization %s" % scope,
                  lib.tl_batch_norm_op(g.ptr, inputs.id, gamma.id, beta.id, mm.id, mv.id, float(momentum),
                                       float(epsilon), bool(training)))


def layer_normalization(inputs, epsilon=1e-3, name=None, **kwargs):
    """Keras' LayerNormalization over the last axis: 'NAME/gamma' (ones) and
    'NAME/beta' (zeros), epsilon 1e-3 by default."""
    g = get_default_graph()
    scope = g.unique_layer_name(name or "layer_normalization")
    c = (inputs.shape[-1],)
    g.var_shapes[scope + "/gamma"] = c
    g.var_shapes[scope + "/beta"] = c
    return record(g, "layer_normalization %s" % scope, lib.tl_layer_norm(g.ptr, inputs.id, float(epsilon),
                                                                         scope.encode()))


def max_pooling2d(inputs, pool_size, strides, padding="valid", data_format="channels_last", name=None):
    return _ops.max_pool2d(inputs, pool_size, strides, padding)


def average_pooling2d(inputs, pool_size, strides, padding="valid", data_format="channels_last", name=None):
    return _ops.avg_pool2d(inputs, pool_size, strides, padding)


def dropout(inputs, rate=0.5, noise_shape=None, seed=None, training=False, name=None):
    """tf.compat.v1.layers.dropout: drops only with training=True (the C op
    drops in the TRAIN graph alone, where training is True)."""
    if not training:
        return inputs
    return _ops.dropout(inputs, rate=rate)


def flatten(inputs, name=None, data_format="channels_last"):
    shape = inputs.shape
    n = 1
    for d in shape[1:]:
        n *= d
    return reshape(inputs, [shape[0], n])

