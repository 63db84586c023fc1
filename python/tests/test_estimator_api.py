"""TPUEstimator's API around the steps: predict's options, the progress line, params, RunConfig."""
import numpy as np
import pytest

import tpuloop as tf


def data(n=96):
    rng = np.random.RandomState(2)
    x = rng.randn(n, 3).astype(np.float32)
    return x, (x[:, 0] > 0).astype(np.int32)


def model_fn(features, labels, mode, params):
    assert params["use_tpu"] is True and params["width"] == 4
    h = tf.layers.dense(features, params["width"], activation="relu")
    logits = tf.layers.dense(h, 2)
    if mode == tf.estimator.ModeKeys.PREDICT:
        return tf.estimator.tpu.TPUEstimatorSpec(mode, predictions={"class": tf.argmax(logits, 1, output_type=tf.int32),
                                                                    "logits": logits})
    loss = tf.losses.sparse_softmax_cross_entropy(labels, logits)
    return tf.estimator.tpu.TPUEstimatorSpec(mode, loss=loss, train_op=tf.train.AdamOptimizer(0.01).minimize(loss))


def input_fn(params):
    x, y = data()
    return tf.data.Dataset.from_tensor_slices((x, y)).repeat().batch(params["batch_size"], drop_remainder=True)


def predict_fn(params):
    x, _ = data(50)
    return tf.data.Dataset.from_tensor_slices(x).batch(params["batch_size"])


def make(tmp_path, **kw):
    config = tf.estimator.tpu.RunConfig(model_dir=str(tmp_path), devices=2, log_step_count_steps=10,
                                        tpu_config=tf.estimator.tpu.TPUConfig(iterations_per_loop=10))
    return tf.estimator.tpu.TPUEstimator(model_fn=model_fn, config=config, params={"width": 4}, train_batch_size=16,
                                         predict_batch_size=16, **kw)


def test_predict_keys_and_batches(tmp_path):
    est = make(tmp_path, progress_bar=False)
    est.train(input_fn, steps=20)
    rows = list(est.predict(predict_fn))
    assert len(rows) == 50 and rows[0]["class"].dtype == np.int32 and rows[0]["logits"].shape == (2,)
    only = list(est.predict(predict_fn, predict_keys=["class"]))
    assert set(only[0]) == {"class"} and [r["class"] for r in only] == [r["class"] for r in rows]
    whole = list(est.predict(predict_fn, yield_single_examples=False))
    assert len(whole) == 1 and whole[0]["logits"].shape == (50, 2)
    np.testing.assert_array_equal(whole[0]["logits"], np.stack([r["logits"] for r in rows]))
    with pytest.raises(ValueError, match="Expected to find"):
        list(est.predict(predict_fn, predict_keys=["nope"]))


def test_progress_line_at_each_logging_boundary(tmp_path, capsys):
    est = make(tmp_path, progress_bar=True)
    est.train(input_fn, steps=30)
    err = capsys.readouterr().err
    assert "[" in err and "30/30" in err and "loss" in err


def test_params_are_a_deep_copy_and_runconfig_replace(tmp_path):
    params = {"width": 4}
    est = make(tmp_path, progress_bar=False)
    est.train(input_fn, steps=1)
    assert params == {"width": 4} and est.params == {"width": 4}
    config = tf.estimator.tpu.RunConfig(model_dir=str(tmp_path))
    again = config.replace(tf_random_seed=9)
    assert again.tf_random_seed == 9 and again.model_dir == str(tmp_path) and config.tf_random_seed is None
    with pytest.raises(ValueError, match="model_dir are set both in constructor and RunConfig"):
        tf.estimator.tpu.TPUEstimator(model_fn=model_fn, model_dir=str(tmp_path / "other"), config=config)


def test_session_config_threads_each_device(tmp_path):
    """RunConfig(session_config=ConfigProto(intra_op_parallelism_threads=2)): TensorFlow's way to thread a
    device's kernels; the run trains the bits of one thread and writes the option to its config.json."""
    import json
    import types
    runs = {}
    for name, session in (("one", None), ("two", types.SimpleNamespace(intra_op_parallelism_threads=2))):
        config = tf.estimator.tpu.RunConfig(model_dir=str(tmp_path / name), devices=1, tf_random_seed=3,
                                            session_config=session)
        est = tf.estimator.tpu.TPUEstimator(model_fn=model_fn, config=config, train_batch_size=32,
                                            params={"width": 4}, progress_bar=False)
        est.train(input_fn, steps=5)
        with open(tmp_path / name / "config.json") as f:
            runs[name] = (json.load(f)["intra_op_parallelism_threads"], est.get_variable_value("dense/kernel"))
    assert runs["one"][0] == 1 and runs["two"][0] == 2
    assert runs["one"][1].tobytes() == runs["two"][1].tobytes()


def test_an_estimator_without_model_dir_uses_a_temporary_one():
    est = tf.estimator.tpu.TPUEstimator(model_fn=model_fn, params={"width": 4}, train_batch_size=16,
                                        config=tf.estimator.tpu.RunConfig(devices=2), progress_bar=False)
    est.train(input_fn, steps=2)
    assert est.model_dir and est.latest_checkpoint().endswith("model.ckpt-2")


def test_variable_scope_names_variables_and_name_scope_does_not(tmp_path):
    names = {}

    def model_fn(features, labels, mode, params):
        with tf.variable_scope("tower"):
            h = tf.layers.dense(features, 4)
            with tf.name_scope("ops"):
                h = tf.layers.dense(h, 4)
            w = tf.get_variable("w", [4, 2], initializer=tf.truncated_normal_initializer(stddev=0.1))
        logits = tf.matmul(h, w)
        loss = tf.losses.sparse_softmax_cross_entropy(labels, logits)
        names["shape"] = tuple(logits.shape)
        return tf.estimator.tpu.TPUEstimatorSpec(mode, loss=loss, train_op=tf.train.AdamOptimizer().minimize(loss))
    est = tf.estimator.tpu.TPUEstimator(model_fn=model_fn, config=tf.estimator.tpu.RunConfig(
        model_dir=str(tmp_path), devices=2), train_batch_size=16, progress_bar=False)
    est.train(input_fn, steps=2)
    assert est.get_variable_names() == ["tower/dense/bias", "tower/dense/kernel", "tower/dense_1/bias",
                                        "tower/dense_1/kernel", "tower/w"]
    assert names["shape"] == (8, 2)


def test_the_plain_estimator_path(tmp_path):
    """use_tpu=False: one input_fn call of the global batch, no context; training ends with the input and
    evaluation reads all of it, the short last batch included, as Estimator does."""
    x, y = data(100)
    seen = []

    def model(features, labels, mode, params):
        logits = tf.layers.dense(features, 2)
        loss = tf.losses.sparse_softmax_cross_entropy(labels, logits)
        if mode == tf.estimator.ModeKeys.EVAL:
            return tf.estimator.tpu.TPUEstimatorSpec(mode, loss=loss, eval_metrics=(
                lambda labels, logits: {"n": tf.metrics.mean(tf.ones_like(labels))}, [labels, logits]))
        return tf.estimator.tpu.TPUEstimatorSpec(mode, loss=loss, train_op=tf.train.AdamOptimizer(0.05).minimize(loss))

    def eval_fn(params):
        seen.append((params["batch_size"], "context" in params))
        return tf.data.Dataset.from_tensor_slices((x, y)).batch(params["batch_size"])
    est = tf.estimator.tpu.TPUEstimator(model, config=tf.estimator.tpu.RunConfig(model_dir=str(tmp_path), devices=2),
                                        use_tpu=False, train_batch_size=16, eval_batch_size=16, progress_bar=False)
    est.train(lambda params: tf.data.Dataset.from_tensor_slices((x, y)).repeat(3).batch(params["batch_size"],
                                                                                        drop_remainder=True))
    assert est.last_train.global_step == 300 // 16 and est.last_train.end_of_input
    ev = est.evaluate(eval_fn)
    assert ev["global_step"] == 18 and est.last_eval.examples == 100
    assert seen and all(s == (16, False) for s in seen)


@pytest.mark.parametrize("opt,slots", [
    (lambda: tf.train.MomentumOptimizer(0.1, momentum=0.9), ["Momentum"]),
    (lambda: tf.train.AdagradOptimizer(0.1), ["Adagrad"]),
    (lambda: tf.train.RMSPropOptimizer(0.01), ["RMSProp", "RMSProp_1"]),
    (lambda: tf.train.AdamOptimizer(0.01), ["Adam", "Adam_1"]),
], ids=["Momentum", "Adagrad", "RMSProp", "Adam"])
def test_the_train_op_optimizer_and_its_checkpoint_slots(tmp_path, opt, slots):
    import json
    import struct

    def model(features, labels, mode, params):
        logits = tf.layers.dense(features, 2)
        loss = tf.losses.sparse_softmax_cross_entropy(labels, logits)
        return tf.estimator.tpu.TPUEstimatorSpec(mode, loss=loss, train_op=tf.tpu.CrossShardOptimizer(opt()).minimize(
            loss, global_step=tf.train.get_global_step()))
    est = tf.estimator.tpu.TPUEstimator(model, config=tf.estimator.tpu.RunConfig(model_dir=str(tmp_path), devices=2),
                                        train_batch_size=16, progress_bar=False)
    est.train(input_fn, steps=3)
    raw = open(est.latest_checkpoint() + ".safetensors", "rb").read()
    names = set(json.loads(raw[8:8 + struct.unpack("<Q", raw[:8])[0]]))
    for s in slots:
        assert "dense/kernel/" + s in names, sorted(names)
