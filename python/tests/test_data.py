"""tpuloop.data pipelines, run in C, read from Python and by the estimator."""
import json
import os

import numpy as np
import pytest

import tpuloop as tf
from conftest import ROOT

PENGUIN = os.path.join(ROOT, "..", "shared", "testdata", "external", "tfx",
                       "penguin-Split-eval-data_tfrecord-00000-of-00001.gz")
FEATURES = ["culmen_length_mm", "culmen_depth_mm", "flipper_length_mm", "body_mass_g"]


def penguin_spec():
    spec = {k: tf.io.FixedLenFeature([], tf.float32) for k in FEATURES}
    spec["species"] = tf.io.FixedLenFeature([], tf.int64)
    return spec


def parse(record):
    d = tf.io.parse_single_example(record, penguin_spec())
    label = d.pop("species")
    return d, label


def test_from_tensor_slices_batch_take_skip():
    x = np.arange(20, dtype=np.float32).reshape(10, 2)
    y = np.arange(10, dtype=np.int64)
    ds = tf.data.Dataset.from_tensor_slices((x, y)).skip(1).take(7).batch(3)
    got = list(ds)
    assert [b[0].shape for b in got] == [(3, 2), (3, 2), (1, 2)]
    np.testing.assert_array_equal(np.concatenate([b[1] for b in got]), y[1:8])
    assert list(tf.data.Dataset.from_tensor_slices((x, y)).batch(3, drop_remainder=True))[-1][1].tolist() == [6, 7, 8]


def test_dict_elements_and_map_scale():
    d = {"a": np.arange(6, dtype=np.int32), "b": np.ones((6, 2, 2), np.float32)}
    ds = tf.data.Dataset.from_tensor_slices(d).map(lambda e: {"a": tf.cast(e["a"], tf.float32) * 0.5, "b": e["b"]})
    first = next(iter(ds))
    assert first["a"].dtype == np.float32 and float(first["a"]) == 0.0
    assert [float(e["a"]) for e in ds] == [0.0, 0.5, 1.0, 1.5, 2.0, 2.5]
    assert first["b"].shape == (2, 2)


def test_shuffle_is_deterministic_and_reshuffles_each_epoch():
    x = np.arange(100, dtype=np.int64)
    ds = tf.data.Dataset.from_tensor_slices(x).shuffle(100, seed=3).repeat(2)
    a, b = [int(v) for v in ds], [int(v) for v in ds]
    assert a == b
    assert sorted(a[:100]) == list(range(100)) and a[:100] != list(range(100)) and a[:100] != a[100:]


def test_from_tensor_slices_errors():
    with pytest.raises(ValueError, match="dimension 0"):
        tf.data.Dataset.from_tensor_slices((np.zeros(3), np.zeros(4)))
    with pytest.raises(TypeError, match="dtype"):
        tf.data.Dataset.from_tensor_slices(np.array(["a", "b"]))
    with pytest.raises(NotImplementedError, match="map function runs in C"):
        tf.data.Dataset.from_tensor_slices(np.zeros((3, 2), np.float32)).map(lambda e: e + 1)


def test_tfrecord_gzip_of_tensorflow_parses_to_its_decoded_values():
    expected = json.load(open(PENGUIN + ".expected.json"))["records"]
    ds = tf.data.TFRecordDataset(PENGUIN, compression_type="GZIP").map(parse)
    rows = list(ds)
    assert len(rows) == len(expected) == 100
    for (feats, label), want in zip(rows, expected):
        assert int(label) == want["features"]["species"]["value"][0]
        for k in FEATURES:
            bits = int(want["features"][k]["value_f32_bits"][0], 16)
            assert np.float32(feats[k]).view(np.uint32) == bits


def test_interleave_of_list_files():
    ds = tf.data.Dataset.list_files(PENGUIN).interleave(
        lambda f: tf.data.TFRecordDataset(f, compression_type="GZIP"), cycle_length=1).map(parse).batch(
        10, drop_remainder=True)
    batches = list(ds)
    assert len(batches) == 10 and batches[0][0]["body_mass_g"].shape == (10,)


def test_estimator_trains_on_dict_features_from_tfrecord(tmp_path):
    """A classifier of the penguin records: features is a dict keyed as the specs."""
    seen = {}

    def model_fn(features, labels, mode, params):
        seen["keys"] = sorted(features)
        seen["shape"] = tuple(features["body_mass_g"].shape)
        x = tf.stack([features[k] for k in FEATURES], axis=1)
        h = tf.layers.dense(x, 16, activation=tf.nn.relu)
        logits = tf.layers.dense(h, 3)
        loss = tf.losses.sparse_softmax_cross_entropy(labels, logits)
        if mode == tf.estimator.ModeKeys.EVAL:
            return tf.estimator.tpu.TPUEstimatorSpec(mode, loss=loss, eval_metrics=(
                lambda labels, logits: {"accuracy": tf.metrics.accuracy(labels, tf.argmax(logits, 1))},
                [labels, logits]))
        opt = tf.tpu.CrossShardOptimizer(tf.train.AdamOptimizer(0.05))
        return tf.estimator.tpu.TPUEstimatorSpec(mode, loss=loss, train_op=opt.minimize(loss))

    def input_fn(params):
        ds = tf.data.TFRecordDataset(PENGUIN, compression_type="GZIP").map(parse)
        return ds.shuffle(100).repeat().batch(params["batch_size"], drop_remainder=True)

    def eval_fn(params):
        return tf.data.TFRecordDataset(PENGUIN, compression_type="GZIP").map(parse).batch(
            params["batch_size"], drop_remainder=True)
    config = tf.estimator.tpu.RunConfig(model_dir=str(tmp_path), tf_random_seed=1, devices=2,
                                        tpu_config=tf.estimator.tpu.TPUConfig(iterations_per_loop=50))
    est = tf.estimator.tpu.TPUEstimator(model_fn=model_fn, config=config, train_batch_size=20, eval_batch_size=20,
                                        progress_bar=False)
    est.train(input_fn, steps=300)
    ev = est.evaluate(eval_fn, steps=5)
    assert seen["keys"] == sorted(FEATURES) and seen["shape"] == (10,)
    assert ev["accuracy"] > 0.9, ev
