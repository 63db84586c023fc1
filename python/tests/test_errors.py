"""Errors reach Python as exceptions with the C library's message."""
import traceback

import numpy as np
import pytest

import tpuloop as tf
from tpuloop import errors


def tiny_input_fn(params):
    x = np.ones((64, 4), np.float32)
    y = np.zeros((64,), np.int32)
    return tf.data.Dataset.from_tensor_slices((x, y)).repeat().batch(params["batch_size"], drop_remainder=True)


def good_model_fn(features, labels, mode, params):
    logits = tf.layers.dense(features, 2)
    loss = tf.losses.sparse_softmax_cross_entropy(labels, logits)
    return tf.estimator.tpu.TPUEstimatorSpec(mode, loss=loss,
                                             train_op=tf.train.GradientDescentOptimizer(0.1).minimize(loss))


def make(tmp_path, model_fn=good_model_fn, **kw):
    config = tf.estimator.tpu.RunConfig(model_dir=str(tmp_path), devices=2, **kw.pop("run", {}))
    return tf.estimator.tpu.TPUEstimator(model_fn=model_fn, config=config, train_batch_size=8, progress_bar=False,
                                         **kw)


def test_a_bad_config_value_raises_the_c_message(tmp_path):
    with pytest.raises(ValueError) as e:
        tf.estimator.tpu.TPUEstimator(model_fn=good_model_fn, config=tf.estimator.tpu.RunConfig(
            model_dir=str(tmp_path), tpu_config=tf.estimator.tpu.TPUConfig(iterations_per_loop=0)),
            train_batch_size=8)
    assert isinstance(e.value, errors.InvalidArgumentError)
    assert str(e.value).startswith("Invalid TPUConfig `iterations_per_loop` value.")   # TensorFlow's message
    assert "flag" not in str(e.value)                  # the value came from the caller, not a command line
    with pytest.raises(ValueError, match=r"^`save_checkpoints_steps` and `save_checkpoints_secs` cannot be both"):
        tf.estimator.tpu.TPUEstimator(model_fn=good_model_fn, config=tf.estimator.tpu.RunConfig(
            model_dir=str(tmp_path), save_checkpoints_steps=10, save_checkpoints_secs=10), train_batch_size=8)


def test_train_batch_size_not_divisible_by_replicas(tmp_path):
    est = tf.estimator.tpu.TPUEstimator(model_fn=good_model_fn, config=tf.estimator.tpu.RunConfig(
        model_dir=str(tmp_path), devices=2), train_batch_size=7, progress_bar=False)
    with pytest.raises(ValueError) as e:    # as TensorFlow, when the mode's input is planned
        est.train(tiny_input_fn, steps=1)
    print(e.value)
    assert "7" in str(e.value) and "2" in str(e.value)


def test_an_unknown_option_suggests_the_nearest(tmp_path):
    with pytest.raises(errors.UnknownOptionError, match="did you mean"):
        make(tmp_path, run={"iteratons_per_loop": 5})


def test_reserved_params_keys(tmp_path):
    with pytest.raises(ValueError, match=r"\['batch_size'\] are reserved keys but existed in params"):
        make(tmp_path, params={"batch_size": 3})


def test_steps_and_max_steps(tmp_path):
    est = make(tmp_path)
    with pytest.raises(ValueError, match="Can not provide both steps and max_steps."):
        est.train(tiny_input_fn, steps=1, max_steps=2)
    with pytest.raises(ValueError, match=r"Must specify steps > 0, given: 0"):
        est.train(tiny_input_fn, steps=0)


def test_a_shape_error_in_the_model_fn_points_at_the_users_line(tmp_path):
    def model_fn(features, labels, mode, params):
        w = tf.get_variable("w", [5, 2])
        logits = tf.matmul(features, w)   # features are (batch, 4): the error is raised here
        loss = tf.losses.sparse_softmax_cross_entropy(labels, logits)
        return tf.estimator.tpu.TPUEstimatorSpec(mode, loss=loss,
                                                 train_op=tf.train.AdamOptimizer().minimize(loss))
    est = make(tmp_path, model_fn=model_fn)
    with pytest.raises(ValueError) as e:
        est.train(tiny_input_fn, steps=2)
    assert str(e.value).startswith("matmul") and "(4, 4) x (5, 2)" in str(e.value)
    frames = traceback.extract_tb(e.value.__traceback__)
    assert any(f.name == "model_fn" and "tf.matmul(features, w)" in f.line for f in frames)


def test_an_exception_of_the_users_own_reaches_the_caller(tmp_path):
    class Mine(Exception):
        pass

    def model_fn(features, labels, mode, params):
        raise Mine("from the model_fn")
    est = make(tmp_path, model_fn=model_fn)
    with pytest.raises(Mine, match="from the model_fn"):
        est.train(tiny_input_fn, steps=2)


def test_missing_train_op(tmp_path):
    def model_fn(features, labels, mode, params):
        logits = tf.layers.dense(features, 2)
        return tf.estimator.tpu.TPUEstimatorSpec(mode, loss=tf.losses.sparse_softmax_cross_entropy(labels, logits))
    with pytest.raises(ValueError, match="Missing train_op."):
        make(tmp_path, model_fn=model_fn).train(tiny_input_fn, steps=1)


def test_a_missing_file_raises_not_found_with_the_path(tmp_path):
    missing = str(tmp_path / "nope.tfrecord")

    def input_fn(params):
        return tf.data.TFRecordDataset(missing).map(
            lambda r: tf.io.parse_single_example(r, {"x": tf.io.FixedLenFeature([4], tf.float32),
                                                     "label": tf.io.FixedLenFeature([], tf.int64)})
        ).map(lambda d: (d["x"], d["label"])).batch(params["batch_size"], drop_remainder=True)
    with pytest.raises(errors.OpError) as e:
        make(tmp_path / "m").train(input_fn, steps=1)
    assert isinstance(e.value, (FileNotFoundError, LookupError))
    assert "nope.tfrecord" in str(e.value)


def test_invalid_optimizer_values(tmp_path):
    with pytest.raises(ValueError, match="learning_rate"):
        tf.train.GradientDescentOptimizer(-1.0)
    with pytest.raises(ValueError, match="Unsupported reduction"):
        tf.tpu.CrossShardOptimizer(tf.train.AdamOptimizer(), reduction="bogus")


def test_ops_outside_a_model_fn_run_on_numpy():
    assert tf.argmax(np.array([[1, 3, 2]]), axis=1).tolist() == [1]
    assert float(tf.reduce_mean(np.array([1.0, 3.0]))) == 2.0
    with pytest.raises(RuntimeError, match="inside a model_fn"):
        tf.get_variable("v", [2])
