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


LINGVO = os.path.join(ROOT, "..", "shared", "testdata", "external", "lingvo", "wmt14_ende_wpm_32k_test.tfrecord")


def test_varlen_features_of_tensorflows_file():
    expected = json.load(open(LINGVO + ".expected.json"))["records"]
    ds = tf.data.TFRecordDataset(LINGVO).map(lambda r: tf.io.parse_single_example(
        r, {"source_id": tf.io.VarLenFeature(tf.int64), "example_index": tf.io.FixedLenFeature([], tf.int64)}))
    rows = list(ds)
    assert len(rows) == 100
    for got, want in zip(rows, expected):
        assert got["source_id"].tolist() == want["features"]["source_id"]["value"]
        assert int(got["example_index"]) == want["features"]["example_index"]["value"][0]


def test_a_record_that_does_not_fit_its_spec_is_named():
    ds = tf.data.TFRecordDataset(LINGVO).map(lambda r: tf.io.parse_single_example(
        r, {"source_id": tf.io.FixedLenFeature([3], tf.int64)}))
    with pytest.raises(ValueError) as e:
        list(ds)
    assert "source_id" in str(e.value) and "wmt14_ende_wpm_32k_test.tfrecord" in str(e.value)


def test_tfrecord_writer_and_examples_round_trip(tmp_path):
    path = str(tmp_path / "data.tfrecord.gz")
    with tf.io.TFRecordWriter(path, tf.io.TFRecordOptions("GZIP")) as w:
        for i in range(50):
            w.write(tf.io.serialize_example({"x": np.arange(3, dtype=np.float32) + i, "label": [i % 4],
                                             "name": b"row%d" % i}))
    spec = {"x": tf.io.FixedLenFeature([3], tf.float32), "label": tf.io.FixedLenFeature([], tf.int64)}
    ds = tf.data.TFRecordDataset(path, "GZIP").shard(2, 1).map(
        lambda r: tf.io.parse_single_example(r, spec)).map(lambda d: (d["x"], d["label"])).batch(5)
    batches = list(ds)
    xs = np.concatenate([b[0] for b in batches])
    assert xs[:, 0].tolist() == list(range(1, 50, 2))
    assert np.concatenate([b[1] for b in batches]).tolist() == [i % 4 for i in range(1, 50, 2)]


def _varint(n):
    out = b""
    while True:
        b = n & 0x7F
        n >>= 7
        out += bytes([b | (0x80 if n else 0)])
        if not n:
            return out


def _field(num, payload):
    return _varint(num << 3 | 2) + _varint(len(payload)) + payload


def _int64_feature(values):
    packed = b"".join(_varint(v) for v in values)
    return _field(3, _field(1, packed))                      # Feature.int64_list = 3, Int64List.value = 1


def _sequence_example(length, tokens):
    """A tf.train.SequenceExample: context {"length": int64}, feature_lists {"tokens": one int64 per step}."""
    context = _field(1, _field(1, b"length") + _field(2, _int64_feature([length])))
    steps = b"".join(_field(1, _int64_feature([t])) for t in tokens)
    lists = _field(1, _field(1, b"tokens") + _field(2, steps))
    return _field(1, context) + _field(2, lists)


def test_parse_single_sequence_example(tmp_path):
    path = str(tmp_path / "seq.tfrecord")
    with tf.io.TFRecordWriter(path) as w:
        for i in range(6):
            w.write(_sequence_example(4, [10 * i + k for k in range(4)]))
    ds = tf.data.TFRecordDataset(path).map(lambda r: tf.io.parse_single_sequence_example(
        r, context_features={"length": tf.io.FixedLenFeature([], tf.int64)},
        sequence_features={"tokens": tf.io.FixedLenSequenceFeature([], tf.int64)}))
    rows = list(ds.batch(3))
    assert len(rows) == 2
    ctx, seq = rows[1]
    assert ctx["length"].tolist() == [4, 4, 4]
    assert seq["tokens"].tolist() == [[30, 31, 32, 33], [40, 41, 42, 43], [50, 51, 52, 53]]


@pytest.mark.parametrize("mode,want", [
    ("PER_SHARD_V1", [(0, 0, 2, 1), (0, 1, 2, 1)]),
    ("PER_HOST_V1", [(0, 0, 1, 2)]),
    ("PER_HOST_V2", [(0, 0, 1, 2)]),
    ("BROADCAST", [(0, 0, 1, 2)]),
])
def test_input_fn_deployment_as_tensorflow(tmp_path, mode, want):
    seen = []

    def input_fn(params):
        seen.append((params["context"].current_input_fn_deployment(), params["batch_size"]))
        x = np.ones((64, 2), np.float32)
        y = np.zeros((64,), np.int32)
        return tf.data.Dataset.from_tensor_slices((x, y)).repeat().batch(params["batch_size"], drop_remainder=True)

    def model_fn(features, labels, mode, params):
        loss = tf.losses.sparse_softmax_cross_entropy(labels, tf.layers.dense(features, 2))
        return tf.estimator.tpu.TPUEstimatorSpec(mode, loss=loss,
                                                 train_op=tf.train.GradientDescentOptimizer(0.1).minimize(loss))
    config = tf.estimator.tpu.RunConfig(model_dir=str(tmp_path), devices=2, tpu_config=tf.estimator.tpu.TPUConfig(
        per_host_input_for_training=mode))
    tf.estimator.tpu.TPUEstimator(model_fn=model_fn, config=config, train_batch_size=16,
                                  progress_bar=False).train(input_fn, steps=2)
    # Once per invocation, as in TensorFlow (the estimator's first training reads the input's shape from
    # invocation 0's pipeline first: a second build of the same Dataset, not a second call).
    assert [d for d, _ in seen] == want
    batch = {"PER_SHARD_V1": 8, "PER_HOST_V1": 16, "PER_HOST_V2": 8, "BROADCAST": 16}[mode]
    assert all(b == batch for _, b in seen)
