"""The MLP 784-256-256-10 on Fashion-MNIST, as a TPUEstimator program.

    PYTHONPATH=python python3 examples/mlp_fashion_mnist.py [--model_dir=DIR] [--train_steps=N]

It trains what `tpuloop train configs/mlp_fashion_mnist.json` trains from its
input files (the same `params_digest` for the same steps: the input is
shuffled with tf_random_seed as the configuration's idx input is)."""
import argparse
import sys

import numpy as np

import tpuloop as tf


def model_fn(features, labels, mode, params):
    x = tf.reshape(features, [params["batch_size"], 784])
    h = tf.layers.dense(x, 256, activation=tf.nn.relu)
    h = tf.layers.dense(h, 256, activation=tf.nn.relu)
    logits = tf.layers.dense(h, 10)
    if mode == tf.estimator.ModeKeys.PREDICT:
        return tf.estimator.tpu.TPUEstimatorSpec(mode, predictions={"classes": tf.argmax(logits, axis=1),
                                                                    "probabilities": tf.nn.softmax(logits)})
    loss = tf.losses.sparse_softmax_cross_entropy(labels=labels, logits=logits)
    if mode == tf.estimator.ModeKeys.EVAL:
        def metric_fn(labels, logits):
            return {"accuracy": tf.metrics.accuracy(labels=labels, predictions=tf.argmax(logits, axis=1))}
        return tf.estimator.tpu.TPUEstimatorSpec(mode, loss=loss, eval_metrics=(metric_fn, [labels, logits]))
    optimizer = tf.tpu.CrossShardOptimizer(tf.train.AdamOptimizer(learning_rate=0.001))
    train_op = optimizer.minimize(loss, global_step=tf.train.get_global_step())
    return tf.estimator.tpu.TPUEstimatorSpec(mode, loss=loss, train_op=train_op)


def make_input_fn(images, labels, training, epochs=1):
    def input_fn(params):
        ds = tf.data.Dataset.from_tensor_slices((images, labels))
        if training:
            ds = ds.shuffle(60000).repeat(epochs)
        return ds.batch(params["batch_size"], drop_remainder=True)
    return input_fn


def main(argv):
    p = argparse.ArgumentParser()
    p.add_argument("--model_dir", default=None)
    p.add_argument("--train_steps", type=int, default=None)
    p.add_argument("--epochs", type=int, default=5)
    p.add_argument("--devices", type=int, default=None)
    a = p.parse_args(argv)
    (x_train, y_train), (x_test, y_test) = tf.datasets.fashion_mnist.load_data()
    x_train = x_train.astype(np.float32) * np.float32(1 / 255)
    x_test = x_test.astype(np.float32) * np.float32(1 / 255)
    extra = {"devices": a.devices} if a.devices else {}
    config = tf.estimator.tpu.RunConfig(model_dir=a.model_dir, tf_random_seed=42, log_step_count_steps=200,
                                        tpu_config=tf.estimator.tpu.TPUConfig(iterations_per_loop=100), **extra)
    est = tf.estimator.tpu.TPUEstimator(model_fn=model_fn, config=config, train_batch_size=128,
                                        eval_batch_size=1000, predict_batch_size=1000)
    est.train(make_input_fn(x_train, y_train.astype(np.int32), True, a.epochs), steps=a.train_steps)
    result = est.evaluate(make_input_fn(x_test, y_test.astype(np.int32), False), steps=10)
    print("accuracy %.4f  loss %.4f  global_step %d" % (result["accuracy"], result["loss"], result["global_step"]))
    print("params_digest %s" % est.params_digest())


if __name__ == "__main__":
    main(sys.argv[1:])
