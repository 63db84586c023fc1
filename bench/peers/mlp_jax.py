# mlp_jax.py — JAX's training examples/s on tpuloop's main job, the MLP of
# bench_mlp (784-256-256-10, ReLU, Adam 1e-3, global batch 128,
# iterations_per_loop 100, Fashion-MNIST), one JSON line.
#
# Model in plain JAX: dense 784-256-256-10 with bias, ReLU, mean sparse
# softmax cross-entropy, optax.adam(1e-3) (optax's defaults otherwise: betas
# 0.9/0.999, eps 1e-8 added to sqrt(v_hat)). Kernels Glorot-uniform, biases
# zero (Keras' Dense defaults). Global batch 128 at every --threads (as
# bench_mlp: the batch is split across devices there, not grown).
#
# Loop: the training split (60000 x 784 float32, labels int32) is on the
# device before timing. Each epoch draws a permutation of the 60000 indices on
# the device (jax.random.permutation of a fixed key folded with the epoch),
# drops the remainder (468 steps of 128, 59904 examples) and runs the steps
# as jax.jit of a lax.scan over --loop (100) steps, as iterations_per_loop
# 100: each scan step gathers its batch from the resident split by the
# permutation's indices, on the device, inside the scan (tpuloop gathers too),
# then runs forward, gradient and Adam. An epoch is 4 scans of 100 and one of
# 68 (the remainder, a second compiled length; both compile in the warm-up),
# so the loop boundaries are bench_mlp's. Parameters and Adam state are
# carried and donated.
#
# Timed: --warmup (1) untimed epochs, then --reps (5) repetitions of one epoch
# each (--steps, default 468, at most 468: steps of the epoch run), the
# permutation included, each ended by block_until_ready; the value of a
# repetition is steps * 128 / wall seconds. --accuracy-epochs=N (default 0:
# skipped) then trains a freshly initialised model N epochs the same way
# (untimed) and adds its accuracy on the t10k split ("test_accuracy").
# Threads: see peer_util.py.
#
# Run: ~/.cache/tpuloop/bench-venv/bin/python bench/peers/mlp_jax.py --threads=1
# Prints: {"threads": 1, ..., "bench": "mlp_jax", "peer": "jax", "model": "mlp",
#   "unit": "examples/s", "reps": [...], "median": ..., ...}
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peer_util  # noqa: E402

BATCH, LOOP_DEFAULT, EPOCH_STEPS = 128, 100, 60000 // 128  # 468: drop_remainder


def extra(ap):
    ap.add_argument("--loop", type=int, default=LOOP_DEFAULT, help="steps per jitted scan (iterations_per_loop)")
    ap.add_argument("--accuracy-epochs", type=int, default=0,
                    help="after timing, train a fresh model this many epochs and report test accuracy (0: skip)")
    ap.add_argument("--seed", type=int, default=42)


a = peer_util.args("JAX on tpuloop's mlp model", steps=EPOCH_STEPS, reps=5, warmup=1, extra=extra)
if a.steps > EPOCH_STEPS or a.loop < 1:
    sys.exit("--steps is the steps of one epoch run per repetition, at most %d; --loop at least 1" % EPOCH_STEPS)
rec = peer_util.limit_threads(a.threads, "jax")

import numpy as np  # noqa: E402
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import jaxlib  # noqa: E402
import optax  # noqa: E402

SIZES = [784, 256, 256, 10]
opt = optax.adam(1e-3)


def init(key):
    params = []
    for k, (fi, fo) in zip(jax.random.split(key, len(SIZES) - 1), zip(SIZES[:-1], SIZES[1:])):
        lim = np.sqrt(6.0 / (fi + fo))
        params.append({"w": jax.random.uniform(k, (fi, fo), jnp.float32, -lim, lim), "b": jnp.zeros((fo,))})
    return params


def forward(params, x):
    for layer in params[:-1]:
        x = jax.nn.relu(x @ layer["w"] + layer["b"])
    return x @ params[-1]["w"] + params[-1]["b"]


def loss_fn(params, x, y):
    logp = jax.nn.log_softmax(forward(params, x))
    return -jnp.take_along_axis(logp, y[:, None], axis=1).mean()


def train_loop(carry, x_all, y_all, idx):
    """len(idx) steps in one lax.scan; idx (steps, BATCH) indexes the resident split."""
    def step(c, bi):
        params, opt_state = c
        loss, grads = jax.value_and_grad(loss_fn)(params, x_all[bi], y_all[bi])
        updates, opt_state = opt.update(grads, opt_state, params)
        return (optax.apply_updates(params, updates), opt_state), loss

    carry, losses = jax.lax.scan(step, carry, idx)
    return carry, losses[-1]


loop_fn = jax.jit(train_loop, donate_argnums=(0,))


@jax.jit
def epoch_indices(key, epoch):
    perm = jax.random.permutation(jax.random.fold_in(key, epoch), 60000)
    return perm[:EPOCH_STEPS * BATCH].reshape(EPOCH_STEPS, BATCH)


@jax.jit
def accuracy(params, x, y):
    return (forward(params, x).argmax(axis=1) == y).mean()


def main():
    x_np, y_np = peer_util.fashion_mnist_train()
    x_all, y_all = jax.device_put(x_np.reshape(-1, 784)), jax.device_put(y_np)
    shuffle_key = jax.random.PRNGKey(a.seed + 1)

    def fresh():
        params = init(jax.random.PRNGKey(a.seed))
        return (params, opt.init(params))

    carry = fresh()
    epoch = 0

    def run_epoch(carry, steps):
        nonlocal epoch
        idx = epoch_indices(shuffle_key, epoch)
        epoch += 1
        loss = None
        for s in range(0, steps, a.loop):
            carry, loss = loop_fn(carry, x_all, y_all, idx[s:min(s + a.loop, steps)])
        jax.block_until_ready((carry, loss))
        return carry, loss

    for _ in range(max(a.warmup, 1)):  # at least the epoch that compiles both scan lengths
        carry, loss = run_epoch(carry, a.steps)
    t = peer_util.Reps()
    eps = []
    for _ in range(a.reps):
        t.start()
        carry, loss = run_epoch(carry, a.steps)
        t.stop()
        eps.append(a.steps * BATCH / t.wall[-1])
    params = carry[0]
    rec.update({"bench": "mlp_jax", "peer": "jax", "model": "mlp", "dataset": "fashion_mnist",
                "batch": BATCH, "opt": "adam", "loop": a.loop, "steps_per_rep": a.steps,
                "warmup_epochs": max(a.warmup, 1), "gather": "on_device_in_scan", "unit": "examples/s",
                "step_ms_median": round(1000 * statistics.median(t.wall) / a.steps, 3),
                "last_loss": round(float(loss), 4),
                "params": sum(int(np.prod(p.shape)) for p in jax.tree_util.tree_leaves(params)),
                "jax_devices": str(jax.devices()), **t.fields(),
                "versions": {"jax": jax.__version__, "jaxlib": jaxlib.__version__, "optax": optax.__version__,
                             "numpy": np.__version__}})
    if a.accuracy_epochs > 0:
        carry, epoch = fresh(), 0
        for _ in range(a.accuracy_epochs):
            carry, loss = run_epoch(carry, EPOCH_STEPS)
        xt, yt = peer_util.fashion_mnist_test()
        rec["accuracy_epochs"] = a.accuracy_epochs
        rec["test_accuracy"] = round(float(accuracy(carry[0], jax.device_put(xt), jax.device_put(yt))), 4)
    peer_util.emit(rec, eps)


if __name__ == "__main__":
    main()
