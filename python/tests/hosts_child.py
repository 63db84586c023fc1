"""One host of test_hosts.py (argv: model_dir, devices per host, result file prefix): trains a small MLP with
BROADCAST input and writes its digest, step and evaluation loss to <prefix>.<rank>."""
import os
import sys

import numpy as np

import tpuloop as tf


def model_fn(features, labels, mode, params):
    h = tf.layers.dense(features, 32, activation=tf.nn.relu)
    logits = tf.layers.dense(h, 4)
    loss = tf.losses.sparse_softmax_cross_entropy(labels, logits)
    if mode == tf.estimator.ModeKeys.EVAL:
        return tf.estimator.tpu.TPUEstimatorSpec(mode, loss=loss, eval_metrics=(
            lambda y, z: {"accuracy": tf.metrics.accuracy(y, tf.argmax(z, 1))}, [labels, logits]))
    return tf.estimator.tpu.TPUEstimatorSpec(mode, loss=loss, train_op=tf.train.AdamOptimizer(0.01).minimize(loss))


def input_fn(params):
    rng = np.random.RandomState(0)
    x = rng.randn(2048, 16).astype(np.float32)
    y = (np.abs(x[:, :4]).argmax(1)).astype(np.int32)
    return tf.data.Dataset.from_tensor_slices((x, y)).shuffle(2048).repeat().batch(params["batch_size"],
                                                                                  drop_remainder=True)


config = tf.estimator.tpu.RunConfig(model_dir=sys.argv[1], tf_random_seed=3, devices=int(sys.argv[2]),
                                    tpu_config=tf.estimator.tpu.TPUConfig(iterations_per_loop=10,
                                                                          per_host_input_for_training="BROADCAST"))
est = tf.estimator.tpu.TPUEstimator(model_fn=model_fn, config=config, train_batch_size=32, eval_batch_size=32,
                                    progress_bar=False)
est.train(input_fn, steps=60)
ev = est.evaluate(input_fn, steps=4)
# Each process writes its own file: mpirun may interleave the processes' output mid-line.
rank = int(os.environ.get("OMPI_COMM_WORLD_RANK", "0"))
with open(sys.argv[3] + ".%d" % rank, "w") as f:
    f.write("%s %d %.6f\n" % (est.params_digest(), ev["global_step"], ev["loss"]))
