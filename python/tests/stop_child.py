"""Trains the MLP of test_signals.py in its own process: argv model_dir, steps."""
import signal
import sys

import numpy as np

import tpuloop as tf


def model_fn(features, labels, mode, params):
    h = tf.layers.dense(features, 64, activation=tf.nn.relu)
    loss = tf.losses.sparse_softmax_cross_entropy(labels, tf.layers.dense(h, 4))
    return tf.estimator.tpu.TPUEstimatorSpec(mode, loss=loss, train_op=tf.train.AdamOptimizer(0.01).minimize(loss))


def input_fn(params):
    rng = np.random.RandomState(0)
    x = rng.randn(4096, 32).astype(np.float32)
    y = (np.abs(x[:, :4]).argmax(1)).astype(np.int32)
    return tf.data.Dataset.from_tensor_slices((x, y)).shuffle(4096).repeat().batch(params["batch_size"],
                                                                                  drop_remainder=True)


# As an interactive Python program has it, whatever this process inherited (a job started in the background
# by a non-interactive shell, as a CI run may be, starts with SIGINT ignored).
signal.signal(signal.SIGINT, signal.default_int_handler)

config = tf.estimator.tpu.RunConfig(model_dir=sys.argv[1], tf_random_seed=3, devices=2, log_step_count_steps=50,
                                    save_checkpoints_steps=100000,
                                    tpu_config=tf.estimator.tpu.TPUConfig(iterations_per_loop=50))
est = tf.estimator.tpu.TPUEstimator(model_fn=model_fn, config=config, train_batch_size=64, progress_bar=False)
print("training", flush=True)
est.train(input_fn, max_steps=int(sys.argv[2]))
print("digest", est.params_digest(), est.last_train.global_step, flush=True)
