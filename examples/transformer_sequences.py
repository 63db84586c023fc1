"""The Transformer encoder of configs/transformer_sequences.json as a
TPUEstimator program: token and position embeddings, post-LN encoder layers
of multi-head self-attention and a gelu feed-forward block, mean pooling and
a classifier of the majority token.

    PYTHONPATH=python python3 examples/transformer_sequences.py [--train_steps=N]
"""
import argparse
import math
import sys

import tpuloop as tf

D_MODEL, HEADS, LAYERS, D_FF, VOCAB, SEQ = 32, 2, 2, 128, 16, 16


def attention(x, batch, layer):
    def heads(t):                                   # (batch * S, d) -> (batch, heads, S, d / heads)
        return tf.transpose(tf.reshape(t, [batch, SEQ, HEADS, D_MODEL // HEADS]), [0, 2, 1, 3])
    with tf.variable_scope("layer_%d/attention" % layer):
        q = heads(tf.layers.dense(x, D_MODEL, name="query"))
        k = heads(tf.layers.dense(x, D_MODEL, name="key"))
        v = heads(tf.layers.dense(x, D_MODEL, name="value"))
        scores = tf.matmul(q * (1.0 / math.sqrt(D_MODEL // HEADS)), k, transpose_b=True)   # (batch, h, S, S)
        out = tf.matmul(tf.nn.softmax(scores, axis=3), v)                                    # (batch, h, S, d/h)
        merged = tf.reshape(tf.transpose(out, [0, 2, 1, 3]), [batch * SEQ, D_MODEL])
        return tf.layers.dense(merged, D_MODEL, name="output")


def model_fn(features, labels, mode, params):
    batch = params["batch_size"]
    uniform = tf.random_uniform_initializer(-0.05, 0.05)          # Keras' Embedding
    table = tf.get_variable("embedding/embeddings", [VOCAB, D_MODEL], initializer=uniform)
    positions = tf.get_variable("position_embedding/embeddings", [SEQ, D_MODEL], initializer=uniform)
    x = tf.reshape(tf.gather(table, features) + positions, [batch * SEQ, D_MODEL])
    for i in range(LAYERS):
        x = tf.layers.layer_normalization(x + attention(x, batch, i), name="layer_%d/attention_norm" % i)
        with tf.variable_scope("layer_%d/ffn" % i):
            f = tf.layers.dense(tf.nn.gelu(tf.layers.dense(x, D_FF)), D_MODEL)
        x = tf.layers.layer_normalization(x + f, name="layer_%d/ffn_norm" % i)
    pooled = tf.reduce_mean(tf.reshape(x, [batch, SEQ, D_MODEL]), axis=1)
    logits = tf.layers.dense(pooled, VOCAB, name="logits")
    if mode == tf.estimator.ModeKeys.PREDICT:
        return tf.estimator.tpu.TPUEstimatorSpec(mode, predictions={"token": tf.argmax(logits, axis=1)})
    loss = tf.losses.sparse_softmax_cross_entropy(labels, logits)
    if mode == tf.estimator.ModeKeys.EVAL:
        return tf.estimator.tpu.TPUEstimatorSpec(mode, loss=loss, eval_metrics=(
            lambda labels, logits: {"accuracy": tf.metrics.accuracy(labels, tf.argmax(logits, axis=1))},
            [labels, logits]))
    optimizer = tf.tpu.CrossShardOptimizer(tf.train.AdamOptimizer(0.001))
    return tf.estimator.tpu.TPUEstimatorSpec(mode, loss=loss, train_op=optimizer.minimize(loss))


def make_input_fn(tokens, labels, training):
    def input_fn(params):
        ds = tf.data.Dataset.from_tensor_slices((tokens, labels))
        if training:
            ds = ds.shuffle(10000)
        return ds.batch(params["batch_size"], drop_remainder=True)
    return input_fn


def run(train_steps=None, model_dir=None, devices=None, examples=60000):
    (x, y), (xt, yt) = tf.datasets.synthetic_sequences(examples, 10000, SEQ, VOCAB, seed=42)
    extra = {"devices": devices} if devices else {}
    config = tf.estimator.tpu.RunConfig(model_dir=model_dir, tf_random_seed=42, log_step_count_steps=200,
                                        tpu_config=tf.estimator.tpu.TPUConfig(iterations_per_loop=100), **extra)
    est = tf.estimator.tpu.TPUEstimator(model_fn=model_fn, config=config, train_batch_size=64,
                                        eval_batch_size=1000)
    est.train(make_input_fn(x, y, True), steps=train_steps)     # one epoch, or train_steps
    return est, est.evaluate(make_input_fn(xt, yt, False), steps=10)


def main(argv):
    p = argparse.ArgumentParser()
    p.add_argument("--model_dir", default=None)
    p.add_argument("--train_steps", type=int, default=None)
    p.add_argument("--devices", type=int, default=None)
    a = p.parse_args(argv)
    _, result = run(a.train_steps, a.model_dir, a.devices)
    print("accuracy %.4f  loss %.4f  global_step %d" % (result["accuracy"], result["loss"], result["global_step"]))


if __name__ == "__main__":
    main(sys.argv[1:])
