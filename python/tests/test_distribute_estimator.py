"""Keras' distribution API driving a TPUEstimator: DataParallel over 8 virtual devices, ModelParallel layouts."""
import numpy as np

import tpuloop as tf
from conftest import load_example

mlp = load_example("mlp_fashion_mnist")


def small_fashion(fashion, n=4096):
    (x, y), _ = fashion
    return x[:n], y[:n]


def make(model_dir, **run):
    config = tf.estimator.tpu.RunConfig(model_dir=str(model_dir), tf_random_seed=5,
                                        tpu_config=tf.estimator.tpu.TPUConfig(iterations_per_loop=10), **run)
    return tf.estimator.tpu.TPUEstimator(model_fn=mlp.model_fn, config=config, train_batch_size=64,
                                         progress_bar=False)


def test_data_parallel_over_8_virtual_devices(tmp_path, fashion, monkeypatch):
    monkeypatch.setenv("TPULOOP_DEVICE_COUNT", "8")
    x, y = small_fashion(fashion)
    devices = tf.distribution.list_devices()
    assert len(devices) == 8
    dp = tf.distribution.DataParallel(devices=devices)
    assert dp.device_mesh.shape == (8,) and dp.batch_dim_name == "batch"
    with dp.scope():
        est = make(tmp_path / "dp")              # the scope's distribution: 8 replicas of 8 rows
    est.train(mlp.make_input_fn(x, y, True, 1), steps=30)
    monkeypatch.delenv("TPULOOP_DEVICE_COUNT")
    plain = make(tmp_path / "plain", devices=8)
    plain.train(mlp.make_input_fn(x, y, True, 1), steps=30)
    assert est.params_digest() == plain.params_digest()
    four = make(tmp_path / "four", devices=4)
    four.train(mlp.make_input_fn(x, y, True, 1), steps=30)
    np.testing.assert_allclose(four.get_variable_value("dense/kernel"), est.get_variable_value("dense/kernel"),
                               atol=1e-4)


def test_model_parallel_layouts_split_the_dense_kernels(tmp_path, fashion, monkeypatch):
    monkeypatch.setenv("TPULOOP_DEVICE_COUNT", "2")
    x, y = small_fashion(fashion)
    mesh = tf.distribution.DeviceMesh((1, 2), ["batch", "model"], devices=tf.distribution.list_devices())
    layouts = tf.distribution.LayoutMap(mesh)
    layouts["dense/kernel"] = (None, "model")       # column-split, then row-split: one sum (Megatron)
    layouts["dense_1/kernel"] = ("model", None)
    mp = tf.distribution.ModelParallel(layout_map=layouts, batch_dim_name="batch")
    est = tf.estimator.tpu.TPUEstimator(
        model_fn=mlp.model_fn, config=tf.estimator.tpu.RunConfig(model_dir=str(tmp_path / "mp"), tf_random_seed=5),
        train_batch_size=64, progress_bar=False, distribution=mp)
    est.train(mlp.make_input_fn(x, y, True, 1), steps=20)
    monkeypatch.delenv("TPULOOP_DEVICE_COUNT")
    one = make(tmp_path / "one", devices=1)
    one.train(mlp.make_input_fn(x, y, True, 1), steps=20)
    for name in one.get_variable_names():
        np.testing.assert_allclose(est.get_variable_value(name), one.get_variable_value(name), atol=1e-4,
                                   err_msg=name)


def test_model_parallel_layouts_reach_the_partitioner(tmp_path, monkeypatch):
    monkeypatch.setenv("TPULOOP_DEVICE_COUNT", "2")
    mesh = tf.distribution.DeviceMesh((1, 2), ["batch", "model"], devices=tf.distribution.list_devices())
    layouts = tf.distribution.LayoutMap(mesh)
    layouts["dense/kernel"] = ("batch", None)       # a variable cannot be split over the replicas
    mp = tf.distribution.ModelParallel(layout_map=layouts, batch_dim_name="batch")
    est = tf.estimator.tpu.TPUEstimator(
        model_fn=mlp.model_fn, config=tf.estimator.tpu.RunConfig(model_dir=str(tmp_path)), train_batch_size=64,
        progress_bar=False, distribution=mp)
    x = np.zeros((256, 28, 28), np.float32)
    y = np.zeros((256,), np.int32)
    try:
        est.train(mlp.make_input_fn(x, y, True, 1), steps=1)
    except ValueError as e:
        assert "dense/kernel" in str(e) and "batch" in str(e)
    else:
        raise AssertionError("a layout on the batch axis trained")
