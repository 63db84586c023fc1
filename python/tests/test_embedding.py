"""TPUEmbedding from Python: TableConfig / FeatureConfig / optimizers, and a DLRM that reaches the planted AUC."""
import numpy as np
import pytest

import tpuloop as tf
from conftest import load_example
from tpuloop.tpu.experimental import embedding as emb

dlrm = load_example("dlrm_synthetic")


def test_table_and_feature_config_check_their_arguments_as_tensorflow():
    with pytest.raises(ValueError, match=r"Argument `vocabulary_size` must be an int and must be >= 1. Received: 0"):
        emb.TableConfig(vocabulary_size=0, dim=4)
    with pytest.raises(ValueError, match=r"Argument `dim` \(embedding dimension\) must be an int"):
        emb.TableConfig(vocabulary_size=10, dim=-1)
    with pytest.raises(ValueError, match="Argument `combiner` must be one of 'mean', 'sum', or 'sqrtn'"):
        emb.TableConfig(vocabulary_size=10, dim=4, combiner="max")
    with pytest.raises(ValueError, match="Argument `table` is not an instance of TableConfig"):
        emb.FeatureConfig(table="t")
    with pytest.raises(ValueError, match="Argument `max_sequence_length` must be an int and must be >= 0"):
        emb.FeatureConfig(emb.TableConfig(10, 4), max_sequence_length=-1)


def test_the_c_library_checks_optimizer_values_naming_the_table():
    t = emb.TableConfig(10, 4, name="users", optimizer=emb.Adam(learning_rate=0.1, beta_1=1.5))
    with pytest.raises(ValueError) as e:
        tf.estimator.tpu.experimental.EmbeddingConfigSpec(feature_config={"u": emb.FeatureConfig(t)})._c_config()
    assert "users" in str(e.value) and "beta" in str(e.value)
    with pytest.raises(ValueError, match="optimizer"):
        tf.estimator.tpu.experimental.EmbeddingConfigSpec(feature_config=emb.FeatureConfig(emb.TableConfig(10, 4)))


def test_features_flatten_in_tensorflows_order_and_share_tables():
    t = emb.TableConfig(50, 8, name="words", initializer=tf.zeros_initializer())
    fc = {"b": emb.FeatureConfig(t), "a": emb.FeatureConfig(t, max_sequence_length=3)}
    names = [n for n, _ in emb.flatten_features(fc)]
    assert names == ["a", "b"]
    import json
    section = json.loads(emb.config_json(fc, emb.SGD(0.5)))
    assert len(section["tables"]) == 1 and section["tables"][0]["initializer"] == {"type": "zeros"}
    assert section["features"][0] == {"name": "a", "table": "words", "max_sequence_length": 3}


def test_embedding_activations_train_in_place(tmp_path):
    """A sum of one embedding row per example learns the label: the table is updated by its own SGD."""
    rng = np.random.RandomState(0)
    ids = rng.randint(0, 20, size=512).astype(np.int64)
    labels = (ids % 2).astype(np.int32)
    dense = np.zeros((512, 1), np.float32)
    spec = tf.estimator.tpu.experimental.EmbeddingConfigSpec(
        feature_config={"item": emb.FeatureConfig(emb.TableConfig(20, 4, name="items"), name="item")},
        optimizer=emb.SGD(learning_rate=0.5))

    def model_fn(features, labels, mode, params):
        assert tuple(features["item"].shape) == (params["batch_size"], 4)
        logits = tf.layers.dense(features["item"], 2)
        if mode == tf.estimator.ModeKeys.PREDICT:
            return tf.estimator.tpu.TPUEstimatorSpec(mode, predictions=logits)
        loss = tf.losses.sparse_softmax_cross_entropy(labels, logits)
        if mode == tf.estimator.ModeKeys.EVAL:
            return tf.estimator.tpu.TPUEstimatorSpec(mode, loss=loss, eval_metrics=(
                lambda l, z: {"accuracy": tf.metrics.accuracy(l, tf.argmax(z, 1))}, [labels, logits]))
        return tf.estimator.tpu.TPUEstimatorSpec(mode, loss=loss,
                                                 train_op=tf.train.GradientDescentOptimizer(0.5).minimize(loss))

    def input_fn(params):
        return tf.data.Dataset.from_tensor_slices(({"x": dense, "item": ids}, labels)).repeat().batch(
            params["batch_size"], drop_remainder=True)
    est = tf.estimator.tpu.TPUEstimator(model_fn=model_fn, config=tf.estimator.tpu.RunConfig(
        model_dir=str(tmp_path), devices=2, tf_random_seed=3), train_batch_size=64, eval_batch_size=64,
        predict_batch_size=64,
        embedding_config_spec=spec, progress_bar=False)
    est.train(input_fn, steps=200)
    ev = est.evaluate(input_fn, steps=4)
    assert ev["accuracy"] == 1.0, ev

    def predict_fn(params):
        return tf.data.Dataset.from_tensor_slices({"x": dense[:100], "item": ids[:100]}).batch(params["batch_size"])
    classes = [int(np.argmax(p)) for p in est.predict(predict_fn)]   # the tables are looked up in PREDICT too
    assert classes == (ids[:100] % 2).tolist()
    table = est.get_variable_value("dense/kernel")
    assert table.shape == (4, 2)


def test_dlrm_in_python_reaches_the_planted_auc(tmp_path):
    est, result, oracle = dlrm.run(2097152, 65536, 100, str(tmp_path), devices=2)
    assert 0.75 < oracle < 0.85
    assert result["auc"] >= oracle - 0.01, (result, oracle)
    assert result["global_step"] == 2097152 // 512


def _tensor(path, name):
    """A tensor of a safetensors checkpoint (8-byte header length, JSON header, data)."""
    import json
    import struct
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    head = json.loads(raw[8:8 + n])
    a, b = head[name]["data_offsets"]
    return np.frombuffer(raw[8 + n + a:8 + n + b], dtype=np.float32).reshape(head[name]["shape"])


def test_a_callable_learning_rate_is_a_dynamic_one(tmp_path):
    """TensorFlow's callable learning_rate: the tables learn at 0.5 up to step 30, then not at all."""
    rng = np.random.RandomState(1)
    ids = rng.randint(0, 20, size=512).astype(np.int64)
    labels = (ids % 2).astype(np.int32)
    calls = []

    def lr(step):
        calls.append(step)
        return 0.5 if step < 30 else 0.0
    spec = tf.estimator.tpu.experimental.EmbeddingConfigSpec(
        feature_config={"item": emb.FeatureConfig(emb.TableConfig(20, 4, name="items"), name="item")},
        optimizer=emb.SGD(learning_rate=lr))

    def model_fn(features, labels, mode, params):
        logits = tf.layers.dense(features["item"], 2)
        loss = tf.losses.sparse_softmax_cross_entropy(labels, logits)
        return tf.estimator.tpu.TPUEstimatorSpec(mode, loss=loss,
                                                 train_op=tf.train.GradientDescentOptimizer(0.5).minimize(loss))

    def input_fn(params):
        return tf.data.Dataset.from_tensor_slices(({"x": np.zeros((512, 1), np.float32), "item": ids}, labels)) \
            .repeat().batch(params["batch_size"], drop_remainder=True)
    config = tf.estimator.tpu.RunConfig(model_dir=str(tmp_path), devices=2, tf_random_seed=3,
                                        tpu_config=tf.estimator.tpu.TPUConfig(iterations_per_loop=10))
    est = tf.estimator.tpu.TPUEstimator(model_fn=model_fn, config=config, train_batch_size=64,
                                        embedding_config_spec=spec, progress_bar=False)
    est.train(input_fn, steps=10)
    est.train(input_fn, steps=20)
    est.train(input_fn, steps=30)
    t = {s: _tensor(str(tmp_path / ("model.ckpt-%d.safetensors" % s)), "embedding/items/parameters")
         for s in (10, 30, 60)}
    assert not np.array_equal(t[10], t[30])        # learning at 0.5
    assert np.array_equal(t[30], t[60])            # learning rate 0 from step 30
    assert sorted(set(calls)) == list(range(60))   # once per step (on each replica's thread)


@pytest.mark.parametrize("opt", [emb.SGD(0.1), emb.Adagrad(0.1), emb.AdagradMomentum(0.1, momentum=0.9),
                                 emb.Adam(0.01), emb.FTRL(0.1, l1_regularization_strength=0.01)],
                         ids=["SGD", "Adagrad", "AdagradMomentum", "Adam", "FTRL"])
def test_each_optimizer_builds_the_engine(opt):
    spec = tf.estimator.tpu.experimental.EmbeddingConfigSpec(
        feature_config={"f": emb.FeatureConfig(emb.TableConfig(10, 4, name="t"))}, optimizer=opt)
    c = spec._c_config()                    # the C library read and validated it
    assert c.ptr
