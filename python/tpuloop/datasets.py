"""tpuloop.datasets: the data sets the examples train on, as NumPy arrays
(tf.keras.datasets' layout)."""
import gzip
import os
import struct

import numpy as np

FASHION_MNIST_DIR = "/usr/share/datasets/fashion-mnist"  # Debian's dataset-fashion-mnist


def read_idx(path):
    """An IDX file (optionally gzipped) as a NumPy array."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        raw = f.read()
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0:
        raise ValueError("%s: not an IDX file (bad magic)" % path)
    types = {0x08: np.uint8, 0x09: np.int8, 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}
    if raw[2] not in types:
        raise ValueError("%s: unknown IDX element type 0x%02x" % (path, raw[2]))
    ndim = raw[3]
    dims = struct.unpack(">%dI" % ndim, raw[4:4 + 4 * ndim])
    arr = np.frombuffer(raw, dtype=types[raw[2]], offset=4 + 4 * ndim)
    count = int(np.prod(dims, dtype=np.int64))
    if arr.size != count:
        raise ValueError("%s: %d values for dims %s" % (path, arr.size, dims))
    return arr.reshape(dims).astype(np.dtype(types[raw[2]]).newbyteorder("="))


class fashion_mnist:  # noqa: N801 - Keras' module name
    @staticmethod
    def load_data(path=None):
        """((x_train, y_train), (x_test, y_test)): uint8 images (N, 28, 28) and labels (N,)."""
        d = path or FASHION_MNIST_DIR

        def one(split):
            stem = "train" if split == "train" else "t10k"
            files = []
            for kind in ("images-idx3-ubyte", "labels-idx1-ubyte"):
                p = os.path.join(d, "%s-%s" % (stem, kind))
                files.append(p + ".gz" if os.path.exists(p + ".gz") else p)
            return read_idx(files[0]), read_idx(files[1])
        return one("train"), one("test")


def criteo_synthetic(num_examples, eval_examples, vocab_cap=1000, seed=0, vocab_sizes=None):
    """The synthetic Criteo set `tpuloop train` reads as `dataset: criteo_synthetic`
    (criteo_synth.h): examples [0, num_examples) to train and the next
    eval_examples to evaluate, each {'dense': (13,) float32 log(1 + x),
    'C1'..'C26': int64 id} and an int32 click label, and the planted model's
    AUC on the evaluation examples (the best any model can reach).

    Returns ((train_features, train_labels), (eval_features, eval_labels), oracle_auc)."""
    import ctypes
    from . import _lib
    from ._lib import lib
    c = _lib.CriteoSynthConfig()
    lib.tl_criteo_synth_config_default(ctypes.byref(c))
    c.seed = int(seed)
    c.num_examples = int(num_examples) + int(eval_examples)
    for k in range(c.num_categorical):
        c.vocab_sizes[k] = int(vocab_sizes[k]) if vocab_sizes is not None else min(c.vocab_sizes[k], int(vocab_cap))
    g = ctypes.c_void_p()
    _lib.check(lib.tl_criteo_synth_create(ctypes.byref(c), ctypes.byref(g)), "criteo_synthetic")
    try:
        d = ctypes.POINTER(_lib.LabeledData)()
        _lib.check(lib.tl_criteo_synth_load(g, 0, c.num_examples, ctypes.byref(d)), "criteo_synthetic")
        try:
            n, nd, k = d.contents.num_examples, d.contents.num_features, d.contents.num_ids
            dense = np.ctypeslib.as_array(d.contents.features, shape=(n, nd)).copy()
            ids = np.ctypeslib.as_array(d.contents.ids, shape=(n, k)).copy()
            labels = np.ctypeslib.as_array(d.contents.labels, shape=(n,)).copy()
        finally:
            lib.tl_labeled_data_destroy(d)
        auc = ctypes.c_double()
        _lib.check(lib.tl_criteo_synth_oracle_auc(g, int(num_examples), int(eval_examples), ctypes.byref(auc)),
                   "criteo_synthetic")
    finally:
        lib.tl_criteo_synth_destroy(g)
    vocab = [int(c.vocab_sizes[j]) for j in range(k)]

    def split(a, b):
        feats = {"dense": dense[a:b]}
        for j in range(k):
            feats["C%d" % (j + 1)] = ids[a:b, j]
        return feats, labels[a:b]
    tr, ev = split(0, num_examples), split(num_examples, num_examples + eval_examples)
    criteo_synthetic.vocab_sizes = vocab
    return tr, ev, auc.value


def synthetic_sequences(num_examples, eval_examples, sequence_length=16, vocab_size=16, seed=0):
    """The token sequences `tpuloop train` reads as `dataset: synthetic_sequences`
    (data.h): each labelled by the token it holds most often. Examples
    [0, num_examples) train and the next eval_examples evaluate.

    Returns ((train_tokens, train_labels), (eval_tokens, eval_labels)): int32 (N, S) and (N,)."""
    import ctypes
    from . import _lib
    from ._lib import lib
    s = _lib.SyntheticSequencesSpec()
    lib.tl_synthetic_sequences_spec_init(ctypes.byref(s))
    s.num_examples = int(num_examples) + int(eval_examples)
    s.sequence_length = int(sequence_length)
    s.vocab_size = int(vocab_size)
    s.seed = int(seed)
    tokens = np.zeros((s.num_examples, s.sequence_length), np.float32)
    labels = np.zeros((s.num_examples,), np.int32)
    _lib.check(lib.tl_synthetic_sequences_generate(ctypes.byref(s), 0, s.num_examples,
                                                   tokens.ctypes.data_as(ctypes.POINTER(ctypes.c_float)),
                                                   labels.ctypes.data_as(ctypes.POINTER(ctypes.c_int32))),
               "synthetic_sequences")
    tokens = tokens.astype(np.int32)
    n = int(num_examples)
    return (tokens[:n], labels[:n]), (tokens[n:], labels[n:])
