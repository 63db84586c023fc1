# mlp_keras.py — Keras 3's training examples/s on tpuloop's main job, the MLP
# of bench_mlp (784-256-256-10, ReLU, Adam 1e-3, batch 128,
# steps_per_execution 100 as iterations_per_loop 100, Fashion-MNIST), one
# JSON line.
#
# The model as a Keras user writes it: keras.Sequential of Dense(256, relu),
# Dense(256, relu), Dense(10) (Glorot-uniform kernels, zero biases),
# compile(optimizer=Adam(1e-3) (Keras' eps 1e-7), loss
# SparseCategoricalCrossentropy(from_logits=True), steps_per_execution=100,
# jit_compile=True), then model.fit on the numpy arrays with batch_size=128,
# shuffle=True, verbose=0. Backend: --backend=jax (the default) or torch
# (KERAS_BACKEND, set before keras is imported). Keras' torch trainer
# refuses steps_per_execution other than 1, so the torch backend runs 1; its
# jit_compile=True is torch.compile, --jit-compile=0 runs eager (measured at
# 1 thread: 26k examples/s eager, 36k compiled; the jax backend 80k). Seed:
# keras.utils.set_random_seed(--seed).
#
# Keras does not drop the remainder: an epoch is 469 steps, the last of 96
# examples, so the value counts the 60000 examples an epoch trains. One
# model.fit call of --warmup + --reps epochs; a callback times each epoch
# after the warm-up ones (on_epoch_begin to on_epoch_end, where it waits for
# the epoch's loss, which depends on every step), so the per-epoch shuffle,
# Keras' slicing of the numpy arrays and their conversion to the backend's
# arrays are timed, as a Keras user pays them; fit's one-off setup is not.
# --steps is unused (an epoch is the training split). --accuracy-epochs=N
# (default 0: skipped) then trains a freshly built model N epochs (untimed)
# and adds its accuracy on the t10k split ("test_accuracy"). Threads: see
# peer_util.py (the backend's framework gets the limit).
#
# Run: ~/.cache/tpuloop/bench-venv/bin/python bench/peers/mlp_keras.py --threads=1 [--backend=torch]
# Prints: {"threads": 1, ..., "bench": "mlp_keras", "peer": "keras", "backend": "jax",
#   "unit": "examples/s", "reps": [...], "median": ..., ...}
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peer_util  # noqa: E402

BATCH, EXAMPLES = 128, 60000


def extra(ap):
    ap.add_argument("--backend", choices=["jax", "torch"], default="jax")
    ap.add_argument("--jit-compile", type=int, choices=[0, 1], default=1)
    ap.add_argument("--accuracy-epochs", type=int, default=0,
                    help="after timing, train a fresh model this many epochs and report test accuracy (0: skip)")
    ap.add_argument("--seed", type=int, default=42)


a = peer_util.args("Keras 3 on tpuloop's mlp model", steps=469, reps=5, warmup=1, extra=extra)
rec = peer_util.limit_threads(a.threads, a.backend)
os.environ["KERAS_BACKEND"] = a.backend

import numpy as np  # noqa: E402
import keras  # noqa: E402

if a.backend == "torch":
    import torch  # noqa: E402
    torch.set_num_threads(a.threads)
    torch.set_num_interop_threads(1)
    fw_version = {"torch": torch.__version__}
    loop = 1  # "`steps_per_execution` must be 1 with the PyTorch backend"
else:
    import jax  # noqa: E402
    fw_version = {"jax": jax.__version__}
    loop = 100


def build():
    model = keras.Sequential([keras.Input((784,)), keras.layers.Dense(256, activation="relu"),
                              keras.layers.Dense(256, activation="relu"), keras.layers.Dense(10)])
    model.compile(optimizer=keras.optimizers.Adam(1e-3),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  steps_per_execution=loop, jit_compile=bool(a.jit_compile))
    return model


class EpochTimer(keras.callbacks.Callback):
    def __init__(self, reps, skip):
        super().__init__()
        self.reps, self.skip, self.losses = reps, skip, []

    def on_epoch_begin(self, epoch, logs=None):
        if epoch >= self.skip:
            self.reps.start()

    def on_epoch_end(self, epoch, logs=None):
        self.losses.append(float(logs["loss"]))  # waits for the epoch's last step
        if epoch >= self.skip:
            self.reps.stop()


def main():
    x_np, y_np = peer_util.fashion_mnist_train()
    x_np = x_np.reshape(-1, 784)
    keras.utils.set_random_seed(a.seed)
    model = build()
    warmup = max(a.warmup, 1)  # at least the epoch that compiles
    t = peer_util.Reps()
    timer = EpochTimer(t, warmup)
    model.fit(x_np, y_np, batch_size=BATCH, epochs=warmup + a.reps, shuffle=True, verbose=0, callbacks=[timer])
    eps = [EXAMPLES / w for w in t.wall]
    steps = -(-EXAMPLES // BATCH)
    rec.update({"bench": "mlp_keras", "peer": "keras", "backend": a.backend, "jit_compile": bool(a.jit_compile),
                "model": "mlp", "dataset": "fashion_mnist", "batch": BATCH, "opt": "adam",
                "steps_per_execution": loop, "steps_per_rep": steps, "examples_per_rep": EXAMPLES,
                "warmup_epochs": warmup, "unit": "examples/s",
                "step_ms_median": round(1000 * statistics.median(t.wall) / steps, 3),
                "last_loss": round(timer.losses[-1], 4), "params": model.count_params(), **t.fields(),
                "versions": {"keras": keras.__version__, **fw_version, "numpy": np.__version__}})
    if a.accuracy_epochs > 0:
        keras.utils.set_random_seed(a.seed)
        model = build()
        model.fit(x_np, y_np, batch_size=BATCH, epochs=a.accuracy_epochs, shuffle=True, verbose=0)
        xt, yt = peer_util.fashion_mnist_test()
        pred = model.predict(xt, batch_size=1000, verbose=0).argmax(axis=1)
        rec["accuracy_epochs"] = a.accuracy_epochs
        rec["test_accuracy"] = round(float((pred == yt).mean()), 4)
    peer_util.emit(rec, eps)


if __name__ == "__main__":
    main()
