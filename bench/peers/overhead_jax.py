# overhead_jax.py — JAX's host cost per training step on bench_overhead's
# model: a tiny MLP 10-10-2 (ReLU, SGD 0.01, batch 1, mean softmax
# cross-entropy) on synthetic data, where a step's arithmetic is a few hundred
# flops and the time is nearly all overhead. One JSON line per mode.
#
# Data: 65536 random examples (10 normal features, labels 0/1, fixed seed),
# resident on the device; step t takes example t mod 65536, indexed on the
# device (the step counter is carried on the device too, so no step sends
# anything from the host). Kernels Glorot-uniform, biases zero.
#
# Modes (--mode=both, the default, or scan or step):
#   "scan": jax.jit of a lax.scan of --loop (1000) steps per call, as
#     bench_overhead's iterations_per_loop 1000: the host dispatches once per
#     1000 steps.
#   "step": a jitted single step called from Python for every step (one
#     dispatch per step, parameters donated; as iterations_per_loop 1, except
#     that JAX's dispatch is asynchronous and the host does not wait for a
#     step before dispatching the next).
# Timed as bench_overhead: one untimed warm-up of --steps steps (compiles),
# then --reps (5) repetitions of --steps (20000) steps (20 calls of the scan,
# or 20000 calls of the step), each ended by block_until_ready; the value of
# a repetition is its wall microseconds / --steps. Threads: see peer_util.py.
#
# Run: ~/.cache/tpuloop/bench-venv/bin/python bench/peers/overhead_jax.py --threads=1
# Prints, per mode: {"threads": 1, ..., "bench": "overhead_jax", "mode": "scan", "model": "10-10-2",
#   "unit": "us/step", "reps": [...], "median": ..., ...}
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peer_util  # noqa: E402

N_EXAMPLES, LR = 1 << 16, 0.01


def extra(ap):
    ap.add_argument("--mode", choices=["both", "scan", "step"], default="both")
    ap.add_argument("--loop", type=int, default=1000, help="steps per jitted scan in mode scan")


a = peer_util.args("JAX's per-step overhead on bench_overhead's model", steps=20000, reps=5, warmup=20000,
                   extra=extra)
if a.steps % a.loop:
    sys.exit("--steps must be a multiple of --loop")
rec0 = peer_util.limit_threads(a.threads, "jax")

import numpy as np  # noqa: E402
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import jaxlib  # noqa: E402


def init(key):
    params = []
    for k, (fi, fo) in zip(jax.random.split(key, 2), [(10, 10), (10, 2)]):
        lim = np.sqrt(6.0 / (fi + fo))
        params.append({"w": jax.random.uniform(k, (fi, fo), jnp.float32, -lim, lim), "b": jnp.zeros((fo,))})
    return params


def loss_fn(params, x, y):
    h = jax.nn.relu(x @ params[0]["w"] + params[0]["b"])
    logp = jax.nn.log_softmax(h @ params[1]["w"] + params[1]["b"])
    return -jnp.take_along_axis(logp, y[:, None], axis=1).mean()


def sgd_step(carry, x_all, y_all):
    params, t = carry
    i = t % N_EXAMPLES
    xb = jax.lax.dynamic_slice_in_dim(x_all, i, 1)
    yb = jax.lax.dynamic_slice_in_dim(y_all, i, 1)
    loss, grads = jax.value_and_grad(loss_fn)(params, xb, yb)
    params = jax.tree_util.tree_map(lambda p, g: p - LR * g, params, grads)
    return (params, t + 1), loss


def scan_loop(carry, x_all, y_all):
    carry, losses = jax.lax.scan(lambda c, _: sgd_step(c, x_all, y_all), carry, None, length=a.loop)
    return carry, losses[-1]


def main():
    kx, ky, kp = jax.random.split(jax.random.PRNGKey(1), 3)
    x_all = jax.random.normal(kx, (N_EXAMPLES, 10), jnp.float32)
    y_all = jax.random.randint(ky, (N_EXAMPLES,), 0, 2, jnp.int32)
    modes = ["step", "scan"] if a.mode == "both" else [a.mode]
    for mode in modes:
        fn = jax.jit(scan_loop if mode == "scan" else sgd_step, donate_argnums=(0,))
        calls = a.steps // a.loop if mode == "scan" else a.steps
        carry = (init(kp), jnp.zeros((), jnp.int32))

        def run(n):
            nonlocal carry
            loss = None
            for _ in range(n):
                carry, loss = fn(carry, x_all, y_all)
            jax.block_until_ready((carry, loss))
            return loss

        warm = -(-max(a.warmup, 1) // (a.loop if mode == "scan" else 1))  # calls, at least the one that compiles
        run(warm)
        t = peer_util.Reps()
        us = []
        for _ in range(a.reps):
            t.start()
            loss = run(calls)
            t.stop()
            us.append(t.wall[-1] / a.steps * 1e6)
        rec = dict(rec0)
        rec.update({"bench": "overhead_jax", "peer": "jax", "mode": mode, "what": "train_step", "model": "10-10-2",
                    "batch": 1, "devices": 1, "opt": "sgd", "steps_per_call": a.loop if mode == "scan" else 1,
                    "steps_per_rep": a.steps, "calls_per_rep": calls, "unit": "us/step",
                    "last_loss": round(float(loss), 4), **t.fields(),
                    "versions": {"jax": jax.__version__, "jaxlib": jaxlib.__version__, "numpy": np.__version__}})
        peer_util.emit(rec, us, digits=3)


if __name__ == "__main__":
    main()
