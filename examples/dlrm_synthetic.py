"""DLRM on synthetic Criteo data, as a TPUEstimator program with TPUEmbedding
tables (tpuloop.tpu.experimental.embedding's TableConfig and FeatureConfig).

    PYTHONPATH=python python3 examples/dlrm_synthetic.py [--examples=N] [--vocab_cap=V]

The model is the one of `tpuloop train examples/dlrm_synthetic.json`: a
bottom MLP over the 13 dense inputs, 26 embedding tables of dim 16 updated in
place by Adagrad, the pairwise dot interaction and a top MLP; the data comes
from the same generator, whose planted model's AUC is the best any model can
reach."""
import argparse
import sys

import tpuloop as tf
from tpuloop.tpu.experimental import embedding as tpu_embedding

DIM = 16


def model_fn(features, labels, mode, params):
    x = features["dense"]
    with tf.variable_scope("bottom_mlp"):
        x = tf.layers.dense(x, 64, activation=tf.nn.relu)
        x = tf.layers.dense(x, DIM, activation=tf.nn.relu)
    embedded = [features["C%d" % (i + 1)] for i in range(26)]     # (batch, 16) activations each
    stack = tf.reshape(tf.concat([x] + embedded, axis=1), [params["batch_size"], 27, DIM])
    h = tf.concat([x, tf.nn.pairwise_dot(stack)], axis=1)
    with tf.variable_scope("top_mlp"):
        h = tf.layers.dense(h, 64, activation=tf.nn.relu)
        h = tf.layers.dense(h, 32, activation=tf.nn.relu)
        logits = tf.layers.dense(h, 1, name="logits")
    if mode == tf.estimator.ModeKeys.PREDICT:
        return tf.estimator.tpu.TPUEstimatorSpec(mode, predictions={"probability": tf.sigmoid(logits)})
    loss = tf.losses.sigmoid_cross_entropy(labels, logits)
    if mode == tf.estimator.ModeKeys.EVAL:
        def metric_fn(labels, logits):
            return {"auc": tf.metrics.auc(labels, tf.sigmoid(logits), num_thresholds=1000)}
        return tf.estimator.tpu.TPUEstimatorSpec(mode, loss=loss, eval_metrics=(metric_fn, [labels, logits]))
    optimizer = tf.tpu.CrossShardOptimizer(tf.train.AdamOptimizer(learning_rate=0.001))
    return tf.estimator.tpu.TPUEstimatorSpec(mode, loss=loss, train_op=optimizer.minimize(loss))


def embedding_spec(vocab_sizes):
    tables = [tpu_embedding.TableConfig(vocabulary_size=v, dim=DIM, combiner="sum", name="C%d" % (i + 1))
              for i, v in enumerate(vocab_sizes)]
    features = {"C%d" % (i + 1): tpu_embedding.FeatureConfig(t, name="C%d" % (i + 1)) for i, t in enumerate(tables)}
    return tf.estimator.tpu.experimental.EmbeddingConfigSpec(
        feature_config=features, optimizer=tpu_embedding.Adagrad(learning_rate=0.2, initial_accumulator_value=1e-6))


def make_input_fn(features, labels, training):
    def input_fn(params):
        ds = tf.data.Dataset.from_tensor_slices((features, labels))
        if training:
            ds = ds.shuffle(4096)
        return ds.batch(params["batch_size"], drop_remainder=True).prefetch(4)
    return input_fn


def run(examples, eval_examples, vocab_cap, model_dir=None, devices=None, seed=7):
    train, test, oracle = tf.datasets.criteo_synthetic(examples, eval_examples, vocab_cap=vocab_cap, seed=seed)
    extra = {"devices": devices} if devices else {}
    config = tf.estimator.tpu.RunConfig(model_dir=model_dir, tf_random_seed=seed, log_step_count_steps=1000,
                                        tpu_config=tf.estimator.tpu.TPUConfig(iterations_per_loop=100), **extra)
    est = tf.estimator.tpu.TPUEstimator(model_fn=model_fn, config=config, train_batch_size=512,
                                        eval_batch_size=1024, embedding_config_spec=embedding_spec(
                                            tf.datasets.criteo_synthetic.vocab_sizes))
    est.train(make_input_fn(train[0], train[1], True))                  # one epoch: the input ends
    result = est.evaluate(make_input_fn(test[0], test[1], False), steps=eval_examples // 1024)
    return est, result, oracle


def main(argv):
    p = argparse.ArgumentParser()
    p.add_argument("--examples", type=int, default=2097152)
    p.add_argument("--eval_examples", type=int, default=65536)
    p.add_argument("--vocab_cap", type=int, default=100)
    p.add_argument("--model_dir", default=None)
    p.add_argument("--devices", type=int, default=None)
    a = p.parse_args(argv)
    est, result, oracle = run(a.examples, a.eval_examples, a.vocab_cap, a.model_dir, a.devices)
    print("auc %.4f (the planted model's: %.4f)  loss %.4f  global_step %d"
          % (result["auc"], oracle, result["loss"], result["global_step"]))


if __name__ == "__main__":
    main(sys.argv[1:])
