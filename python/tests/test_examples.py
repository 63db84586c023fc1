"""The Python versions of the main jobs (examples/*.py) train."""
import numpy as np

import tpuloop as tf
from conftest import load_example

cnn = load_example("cnn_fashion_mnist")
transformer = load_example("transformer_sequences")


def test_transformer_learns_the_majority_token(tmp_path):
    est, result = transformer.run(model_dir=str(tmp_path), devices=2, examples=30000)
    assert result["accuracy"] > 0.95, result
    names = est.get_variable_names()
    assert "layer_1/attention/query/kernel" in names and "layer_0/attention_norm/gamma" in names
    assert est.get_variable_value("embedding/embeddings").shape == (16, 32)


def test_cnn_trains_with_batch_norm_state(tmp_path, fashion):
    (x, y), (xt, yt) = fashion
    config = tf.estimator.tpu.RunConfig(model_dir=str(tmp_path), tf_random_seed=42, devices=2,
                                        tpu_config=tf.estimator.tpu.TPUConfig(iterations_per_loop=20))
    est = tf.estimator.tpu.TPUEstimator(model_fn=cnn.model_fn, config=config, params={"decay_steps": 1000},
                                        train_batch_size=64, eval_batch_size=200, progress_bar=False)
    est.train(cnn.make_input_fn(x[:12800], y[:12800], True), steps=200)
    mm = est.get_variable_value("stem/bn/moving_mean")
    assert mm.shape == (16,) and np.any(mm != 0)            # moving statistics move in TRAIN
    ev = est.evaluate(cnn.make_input_fn(xt, yt, False), steps=2)
    assert ev["accuracy"] > 0.5, ev
    assert np.array_equal(est.get_variable_value("stem/bn/moving_mean"), mm)   # and not in EVAL
