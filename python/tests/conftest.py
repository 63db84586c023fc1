"""Shared fixtures: the package from this source tree, the library next to it."""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "python"))

FASHION_MNIST = "/usr/share/datasets/fashion-mnist"

import numpy as np  # noqa: E402
import pytest  # noqa: E402


def cli():
    """The tpuloop command of this build (make test passes TPULOOP_CLI)."""
    return os.environ.get("TPULOOP_CLI", os.path.join(ROOT, "build", "bin", "tpuloop"))


@pytest.fixture(scope="session")
def fashion():
    """Fashion-MNIST as the examples use it: float32 images / 255, int32 labels."""
    import tpuloop as tf
    (x, y), (xt, yt) = tf.datasets.fashion_mnist.load_data()
    scale = np.float32(1 / 255)
    return (x.astype(np.float32) * scale, y.astype(np.int32)), (xt.astype(np.float32) * scale, yt.astype(np.int32))


def load_example(name):
    """The module of examples/<name>.py."""
    import importlib.util
    spec = importlib.util.spec_from_file_location(name, os.path.join(ROOT, "examples", name + ".py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod
