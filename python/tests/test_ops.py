"""The tf.* ops of a model_fn compute what NumPy computes (through predict), and every wrapper reaches its C op."""
import numpy as np
import pytest

import tpuloop as tf

X = (np.arange(8 * 6, dtype=np.float32).reshape(8, 6) - 20) / 7


def ops_of(x):
    """{name: (tpuloop tensor, numpy function of X)}."""
    return {
        "add_mul": (x * 2.0 + 1.0, lambda a: a * 2 + 1),
        "sub_div": ((x - 0.5) / 3.0, lambda a: (a - 0.5) / 3),
        "pow": (tf.abs(x) ** 2.0, lambda a: np.abs(a) ** 2),
        "exp_log": (tf.log(tf.exp(x * 0.1) + 1.0), lambda a: np.log(np.exp(a * 0.1) + 1)),
        "sqrt_rsqrt": (tf.sqrt(tf.abs(x) + 1.0) + tf.rsqrt(tf.abs(x) + 1.0),
                       lambda a: np.sqrt(np.abs(a) + 1) + 1 / np.sqrt(np.abs(a) + 1)),
        "relu_tanh_sigmoid": (tf.nn.relu(x) + tf.tanh(x) + tf.sigmoid(x),
                              lambda a: np.maximum(a, 0) + np.tanh(a) + 1 / (1 + np.exp(-a))),
        "maximum_minimum": (tf.maximum(x, 0.3) + tf.minimum(x, -0.3), lambda a: np.maximum(a, .3) + np.minimum(a, -.3)),
        "clip": (tf.clip_by_value(x, -1.0, 1.0), lambda a: np.clip(a, -1, 1)),
        "where": (tf.where(x > 0.0, x, -x), lambda a: np.where(a > 0, a, -a)),
        "reduce": (tf.reduce_sum(x, axis=1) + tf.reduce_max(x, axis=1) - tf.reduce_min(x, axis=1),
                   lambda a: a.sum(1) + a.max(1) - a.min(1)),
        "reduce_mean_keepdims": (x - tf.reduce_mean(x, axis=1, keepdims=True), lambda a: a - a.mean(1, keepdims=True)),
        "logsumexp": (tf.reduce_logsumexp(x, axis=1), lambda a: np.log(np.exp(a).sum(1))),
        "softmax": (tf.nn.softmax(x), lambda a: np.exp(a) / np.exp(a).sum(1, keepdims=True)),
        "log_softmax": (tf.nn.log_softmax(x), lambda a: a - np.log(np.exp(a).sum(1, keepdims=True))),
        "slice_concat": (tf.concat([x[:, 4:], x[:, :2]], axis=1), lambda a: np.concatenate([a[:, 4:], a[:, :2]], 1)),
        "transpose_reshape": (tf.reshape(tf.transpose(tf.reshape(x, [8, 2, 3]), [0, 2, 1]), [8, 6]),
                              lambda a: a.reshape(8, 2, 3).transpose(0, 2, 1).reshape(8, 6)),
        "stack_split": (tf.stack(tf.split(x, 3, axis=1), axis=2)[:, :, 1],
                        lambda a: np.stack(np.split(a, 3, axis=1), axis=2)[:, :, 1]),
        "pad": (tf.pad(x, [[0, 0], [1, 2]], constant_values=0.5), lambda a: np.pad(a, [[0, 0], [1, 2]],
                                                                                   constant_values=0.5)),
        "tile_expand": (tf.reshape(tf.tile(tf.expand_dims(x[:, 0], 1), [1, 3]), [8, 3]),
                        lambda a: np.tile(a[:, :1], [1, 3])),
        "matmul": (tf.matmul(x, tf.transpose(x)), lambda a: a @ a.T),
        "einsum": (tf.einsum("bi,bi->b", x, x), lambda a: (a * a).sum(1)),
        "one_hot_argmax": (tf.one_hot(tf.argmax(x, axis=1, output_type=tf.int32), 6),
                           lambda a: np.eye(6, dtype=np.float32)[a.argmax(1)]),
        "gelu_softplus": (tf.nn.softplus(x) + tf.nn.elu(x), lambda a: np.log1p(np.exp(a)) + np.where(a > 0, a,
                                                                                                    np.exp(a) - 1)),
        "leaky_relu": (tf.nn.leaky_relu(x, 0.1), lambda a: np.where(a > 0, a, 0.1 * a)),
        "square_neg": (-tf.square(x), lambda a: -a * a),
        "gather": (tf.gather(x, tf.constant(2, dtype=tf.int32, shape=[3]), axis=1), lambda a: a[:, [2, 2, 2]]),
    }


REFS = {}


def model_fn(features, labels, mode, params):
    w = tf.get_variable("w", [6, 2], initializer=tf.zeros_initializer())
    if mode == tf.estimator.ModeKeys.PREDICT:
        table = ops_of(features)
        REFS.update({k: v[1] for k, v in table.items()})
        return tf.estimator.tpu.TPUEstimatorSpec(mode, predictions={k: v[0] for k, v in table.items()})
    loss = tf.losses.sparse_softmax_cross_entropy(labels, tf.matmul(features, w))
    return tf.estimator.tpu.TPUEstimatorSpec(mode, loss=loss,
                                             train_op=tf.train.GradientDescentOptimizer(0.0).minimize(loss))


def train_input(params):
    return tf.data.Dataset.from_tensor_slices((X, np.zeros(8, np.int32))).repeat().batch(8)


def test_ops_compute_what_numpy_computes(tmp_path):
    est = tf.estimator.tpu.TPUEstimator(model_fn=model_fn, config=tf.estimator.tpu.RunConfig(
        model_dir=str(tmp_path), devices=1), train_batch_size=8, predict_batch_size=8, progress_bar=False)
    est.train(train_input, steps=1)
    got = list(est.predict(lambda params: tf.data.Dataset.from_tensor_slices(X).batch(8),
                           yield_single_examples=False))[0]
    assert len(REFS) == len(got) >= 25
    for name, ref in REFS.items():
        want = np.asarray(ref(X.astype(np.float64)), np.float64).reshape(8, -1)
        np.testing.assert_allclose(got[name].reshape(8, -1), want, rtol=3e-5, atol=3e-5, err_msg=name)


def test_shape_errors_name_the_op(tmp_path):
    def bad(features, labels, mode, params):
        tf.concat([features, tf.reshape(features, [4, 12])], axis=1)
    est = tf.estimator.tpu.TPUEstimator(model_fn=bad, config=tf.estimator.tpu.RunConfig(
        model_dir=str(tmp_path), devices=1), train_batch_size=8, progress_bar=False)
    with pytest.raises(ValueError, match="concat"):
        est.train(train_input, steps=1)
