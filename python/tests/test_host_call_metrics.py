"""host_call's fn and eval_metrics' metric_fn run on the host with NumPy arrays."""
import numpy as np
import pytest

import tpuloop as tf


def data(n=256):
    rng = np.random.RandomState(1)
    x = rng.randn(n, 3).astype(np.float32)
    y = (x[:, 0] > 0).astype(np.int32)
    return x, y


def input_fn(params):
    x, y = data()
    return tf.data.Dataset.from_tensor_slices((x, y)).repeat().batch(params["batch_size"], drop_remainder=True)


def test_host_call_receives_every_outfed_step(tmp_path):
    calls = []

    def host_fn(gs, loss, logits):
        calls.append((gs.copy(), loss.copy(), logits.shape))

    def model_fn(features, labels, mode, params):
        logits = tf.layers.dense(features, 2)
        loss = tf.losses.sparse_softmax_cross_entropy(labels, logits)
        gs = tf.reshape(tf.train.get_global_step(), [1])
        return tf.estimator.tpu.TPUEstimatorSpec(
            mode, loss=loss, train_op=tf.train.GradientDescentOptimizer(0.1).minimize(loss),
            host_call=(host_fn, [gs, tf.reshape(loss, [1]), logits]))
    config = tf.estimator.tpu.RunConfig(model_dir=str(tmp_path), devices=2, tpu_config=tf.estimator.tpu.TPUConfig(
        iterations_per_loop=5, experimental_host_call_every_n_steps=2))
    est = tf.estimator.tpu.TPUEstimator(model_fn=model_fn, config=config, train_batch_size=16, progress_bar=False)
    est.train(input_fn, steps=10)
    steps = [int(c[0][0]) for c in calls]
    assert steps == [1, 3, 5, 6, 8, 10]               # loop-local steps 0, 2, 4 of each loop of 5
    assert all(c[0].shape == (2,) and c[1].shape == (2,) and c[2] == (16, 2) for c in calls)
    assert all(np.isfinite(c[1]).all() and (c[1] > 0).all() for c in calls)


def test_host_call_errors_stop_training(tmp_path):
    def host_fn(loss):
        raise ValueError("the host_call failed")

    def model_fn(features, labels, mode, params):
        logits = tf.layers.dense(features, 2)
        loss = tf.losses.sparse_softmax_cross_entropy(labels, logits)
        return tf.estimator.tpu.TPUEstimatorSpec(
            mode, loss=loss, train_op=tf.train.GradientDescentOptimizer(0.1).minimize(loss),
            host_call=(host_fn, {"loss": tf.reshape(loss, [1])}))
    est = tf.estimator.tpu.TPUEstimator(model_fn=model_fn, config=tf.estimator.tpu.RunConfig(
        model_dir=str(tmp_path), devices=2), train_batch_size=16, progress_bar=False)
    with pytest.raises(ValueError, match="the host_call failed"):
        est.train(input_fn, steps=4)


def test_metrics_stream_over_the_evaluation_like_tensorflows(tmp_path):
    seen = []

    def metric_fn(labels, logits, probs):
        seen.append(labels.shape)
        pred = tf.argmax(logits, 1)
        return {"accuracy": tf.metrics.accuracy(labels, pred),
                "precision": tf.metrics.precision(labels, pred),
                "recall": tf.metrics.recall(labels, pred),
                "auc": tf.metrics.auc(labels, probs[:, 1]),
                "mean_p": tf.metrics.mean(probs[:, 1])}

    def model_fn(features, labels, mode, params):
        logits = tf.layers.dense(features, 2)
        loss = tf.losses.sparse_softmax_cross_entropy(labels, logits)
        if mode == tf.estimator.ModeKeys.EVAL:
            return tf.estimator.tpu.TPUEstimatorSpec(mode, loss=loss, eval_metrics=(
                metric_fn, [labels, logits, tf.nn.softmax(logits)]))
        return tf.estimator.tpu.TPUEstimatorSpec(mode, loss=loss,
                                                 train_op=tf.train.AdamOptimizer(0.05).minimize(loss))

    def predict_fn(params):
        x, _ = data()
        return tf.data.Dataset.from_tensor_slices(x).batch(params["batch_size"])

    def eval_fn(params):
        x, y = data()
        return tf.data.Dataset.from_tensor_slices((x, y)).batch(params["batch_size"], drop_remainder=True)
    est = tf.estimator.tpu.TPUEstimator(
        model_fn=lambda features, labels, mode, params: model_fn(features, labels, mode, params) if
        mode != tf.estimator.ModeKeys.PREDICT else tf.estimator.tpu.TPUEstimatorSpec(
            mode, predictions=tf.nn.softmax(tf.layers.dense(features, 2))),
        config=tf.estimator.tpu.RunConfig(model_dir=str(tmp_path), devices=2), train_batch_size=32,
        eval_batch_size=64, predict_batch_size=64, progress_bar=False)
    est.train(input_fn, steps=60)
    ev = est.evaluate(eval_fn, steps=4)
    assert seen == [(64,)] * 4                       # once per step, every replica's rows
    x, y = data()
    p = np.stack(list(est.predict(predict_fn)))      # the same parameters, on the host
    pred = p.argmax(1)
    assert ev["accuracy"] == pytest.approx(np.mean(pred == y), abs=1e-6)
    assert ev["precision"] == pytest.approx(np.sum((pred == 1) & (y == 1)) / np.sum(pred == 1), abs=1e-6)
    assert ev["recall"] == pytest.approx(np.sum((pred == 1) & (y == 1)) / np.sum(y == 1), abs=1e-6)
    assert ev["mean_p"] == pytest.approx(p[:, 1].mean(), abs=1e-5)
    order = np.argsort(p[:, 1])                      # the exact AUC: TensorFlow's 200 thresholds are close
    ranks = np.empty(len(order))
    ranks[order] = np.arange(1, len(order) + 1)
    exact = (ranks[y == 1].sum() - np.sum(y == 1) * (np.sum(y == 1) + 1) / 2) / (np.sum(y == 1) * np.sum(y == 0))
    assert ev["auc"] == pytest.approx(exact, abs=0.01)


def test_metric_functions_outside_metric_fn_say_where_they_run():
    with pytest.raises(RuntimeError, match="metric_fn"):
        tf.metrics.accuracy(np.zeros(3), np.zeros(3))
