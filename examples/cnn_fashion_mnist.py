"""The residual CNN of configs/cnn_fashion_mnist.json as a TPUEstimator
program: conv + batch norm stages, global average pooling, label smoothing,
Adam with a cosine decay.

    PYTHONPATH=python python3 examples/cnn_fashion_mnist.py [--epochs=N] [--train_steps=N]
"""
import argparse
import sys

import numpy as np

import tpuloop as tf

FILTERS = [16, 32, 64]


def conv_bn(x, filters, k, stride, training, name):
    w = tf.get_variable(name + "/conv/kernel", [k, k, x.shape[-1], filters])
    y = tf.nn.conv2d(x, w, strides=stride, padding="SAME")
    return tf.layers.batch_normalization(y, momentum=0.9, epsilon=1e-3, training=training, name=name + "/bn")


def block(x, filters, stride, training, index):
    h = tf.nn.relu(conv_bn(x, filters, 3, stride, training, "block%d/a" % index))
    h = conv_bn(h, filters, 3, 1, training, "block%d/b" % index)
    shortcut = x
    if stride != 1 or x.shape[-1] != filters:
        shortcut = conv_bn(x, filters, 1, stride, training, "block%d/shortcut" % index)
    return tf.nn.relu(h + shortcut)


def model_fn(features, labels, mode, params):
    training = mode == tf.estimator.ModeKeys.TRAIN
    b, height, width = features.shape
    x = tf.reshape(features, [b, height, width, 1])
    h = tf.nn.relu(conv_bn(x, FILTERS[0], 3, 1, training, "stem"))
    for s, f in enumerate(FILTERS):
        h = block(h, f, 1 if s == 0 else 2, training, s + 1)
    h = tf.reduce_mean(h, axis=[1, 2])
    logits = tf.layers.dense(h, 10)
    if mode == tf.estimator.ModeKeys.PREDICT:
        return tf.estimator.tpu.TPUEstimatorSpec(mode, predictions={"classes": tf.argmax(logits, axis=1)})
    loss = tf.losses.softmax_cross_entropy(tf.one_hot(labels, 10), logits, label_smoothing=0.1)
    if mode == tf.estimator.ModeKeys.EVAL:
        return tf.estimator.tpu.TPUEstimatorSpec(mode, loss=loss, eval_metrics=(
            lambda labels, logits: {"accuracy": tf.metrics.accuracy(labels, tf.argmax(logits, axis=1))},
            [labels, logits]))
    lr = tf.train.cosine_decay(0.002, tf.train.get_global_step(), decay_steps=params["decay_steps"])
    optimizer = tf.tpu.CrossShardOptimizer(tf.train.AdamOptimizer(lr))
    return tf.estimator.tpu.TPUEstimatorSpec(mode, loss=loss, train_op=optimizer.minimize(loss))


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
    p.add_argument("--epochs", type=int, default=12)
    p.add_argument("--train_steps", type=int, default=None)
    p.add_argument("--devices", type=int, default=None)
    a = p.parse_args(argv)
    (x_train, y_train), (x_test, y_test) = tf.datasets.fashion_mnist.load_data()
    scale = np.float32(1 / 255)
    x_train, x_test = x_train.astype(np.float32) * scale, x_test.astype(np.float32) * scale
    extra = {"devices": a.devices} if a.devices else {}
    config = tf.estimator.tpu.RunConfig(model_dir=a.model_dir, tf_random_seed=42, log_step_count_steps=500,
                                        tpu_config=tf.estimator.tpu.TPUConfig(iterations_per_loop=100), **extra)
    est = tf.estimator.tpu.TPUEstimator(model_fn=model_fn, config=config, params={"decay_steps": 5616},
                                        train_batch_size=128, eval_batch_size=1000)
    est.train(make_input_fn(x_train, y_train.astype(np.int32), True, a.epochs), steps=a.train_steps)
    result = est.evaluate(make_input_fn(x_test, y_test.astype(np.int32), False), steps=10)
    print("accuracy %.4f  loss %.4f  global_step %d" % (result["accuracy"], result["loss"], result["global_step"]))


if __name__ == "__main__":
    main(sys.argv[1:])
