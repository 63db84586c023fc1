"""The MLP of examples/mlp_fashion_mnist.py against `tpuloop train` of the same configuration."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import tpuloop as tf
from conftest import FASHION_MNIST, cli, load_example

mlp = load_example("mlp_fashion_mnist")

CONFIG = {
    "train_batch_size": 128, "tf_random_seed": 42, "log_step_count_steps": 100,
    "tpu_config": {"iterations_per_loop": 100},
    "model": {"model_name": "mlp", "hidden_units": [256, 256], "activation": "relu", "optimizer": "adam",
              "learning_rate": 0.001},
    "input": {"dataset": "idx", "files": [FASHION_MNIST + "/train-images-idx3-ubyte.gz",
                                          FASHION_MNIST + "/train-labels-idx1-ubyte.gz"],
              "scale": 1 / 255, "shuffle_buffer_size": 60000, "epochs": 1},
}


def estimator(model_dir, ipl=100, devices=2, **kw):
    config = tf.estimator.tpu.RunConfig(model_dir=str(model_dir), tf_random_seed=42, devices=devices,
                                        tpu_config=tf.estimator.tpu.TPUConfig(iterations_per_loop=ipl))
    return tf.estimator.tpu.TPUEstimator(model_fn=mlp.model_fn, config=config, train_batch_size=128,
                                         eval_batch_size=500, predict_batch_size=250, progress_bar=False, **kw)


def cli_digest(tmp_path, steps, devices=2):
    cfg = tmp_path / "mlp.json"
    cfg.write_text(json.dumps(CONFIG))
    out = subprocess.run([cli(), "train", str(cfg), "--model_dir=%s" % (tmp_path / "cli"), "--devices=%d" % devices,
                          "--train_steps=%d" % steps], capture_output=True, text=True, stdin=subprocess.DEVNULL,
                         timeout=300)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])["params_digest"]


def test_python_model_fn_trains_the_bits_of_tpuloop_train(tmp_path, fashion):
    (x, y), _ = fashion
    est = estimator(tmp_path / "py")
    est.train(mlp.make_input_fn(x, y, True, 1), steps=300)
    assert est.params_digest() == cli_digest(tmp_path, 300)
    assert est.get_variable_names() == ["dense/bias", "dense/kernel", "dense_1/bias", "dense_1/kernel",
                                        "dense_2/bias", "dense_2/kernel"]
    assert est.get_variable_value("dense_2/kernel").shape == (256, 10)


def test_same_bits_for_any_iterations_per_loop_and_after_a_resume(tmp_path, fashion):
    (x, y), _ = fashion
    a = estimator(tmp_path / "a", ipl=100)
    a.train(mlp.make_input_fn(x, y, True, 1), steps=120)
    b = estimator(tmp_path / "b", ipl=7)
    b.train(mlp.make_input_fn(x, y, True, 1), steps=50)
    b.close()
    c = estimator(tmp_path / "b", ipl=7)       # a new process would do the same: it restores step 50
    c.train(mlp.make_input_fn(x, y, True, 1), max_steps=120)
    assert c.params_digest() == a.params_digest()
    assert os.path.exists(os.path.join(str(tmp_path / "b"), "model.ckpt-120.safetensors"))


def test_evaluate_and_predict(tmp_path, fashion):
    (x, y), (xt, yt) = fashion
    est = estimator(tmp_path / "m")
    est.train(mlp.make_input_fn(x, y, True, 1), steps=200)
    ev = est.evaluate(mlp.make_input_fn(xt, yt, False), steps=4)
    assert set(ev) == {"loss", "global_step", "accuracy"}
    assert ev["global_step"] == 200
    assert 0.7 < ev["accuracy"] < 1.0 and 0 < ev["loss"] < 1.0

    def predict_input_fn(params):
        return tf.data.Dataset.from_tensor_slices(xt[:600]).batch(params["batch_size"])
    preds = list(est.predict(predict_input_fn))
    assert len(preds) == 600                                # the short last batch is padded and dropped
    assert set(preds[0]) == {"classes", "probabilities"}
    assert preds[0]["classes"].dtype == np.int64 and preds[0]["probabilities"].shape == (10,)
    probs = np.stack([p["probabilities"] for p in preds])
    np.testing.assert_allclose(probs.sum(axis=1), 1.0, rtol=1e-5)
    classes = np.array([p["classes"] for p in preds])
    np.testing.assert_array_equal(classes, probs.argmax(axis=1))
    # The first 500 examples are the evaluation's first batch: its accuracy agrees with predict.
    acc500 = float(np.mean(classes[:500] == yt[:500]))
    ev1 = est.evaluate(mlp.make_input_fn(xt, yt, False), steps=1)
    assert ev1["accuracy"] == pytest.approx(acc500, abs=1e-6)


def test_a_new_estimator_evaluates_the_latest_checkpoint(tmp_path, fashion):
    (x, y), (xt, yt) = fashion
    est = estimator(tmp_path / "m")
    est.train(mlp.make_input_fn(x, y, True, 1), steps=100)
    ev = est.evaluate(mlp.make_input_fn(xt, yt, False), steps=2)
    est.close()
    again = estimator(tmp_path / "m")
    ev2 = again.evaluate(mlp.make_input_fn(xt, yt, False), steps=2)
    assert ev2 == ev


def test_example_script_runs(tmp_path):
    out = subprocess.run([sys.executable, os.path.join(os.path.dirname(mlp.__file__), "mlp_fashion_mnist.py"),
                          "--model_dir=%s" % tmp_path, "--train_steps=100", "--devices=2"],
                         capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=300,
                         env=dict(os.environ, PYTHONPATH=os.path.join(os.path.dirname(tf.__file__), "..")))
    assert out.returncode == 0, out.stderr
    assert "accuracy" in out.stdout and "params_digest" in out.stdout
