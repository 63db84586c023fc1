# cnn_jax.py — JAX's training examples/s on tpuloop's `cnn` model (the same
# net, batch, data and cores as bench_cnn), one JSON line.
#
# The model of cnn_torch.py written in plain JAX: NHWC activations, HWIO
# kernels, jax.lax.conv_general_dilated with padding "SAME" (TF's: 0 before
# and 1 after for a 3x3 stride-2 conv on an even input), batch-norm by hand
# (batch statistics, biased variance, eps 1e-3; moving averages with momentum
# 0.99 kept as state), global average pooling, dense 10 with bias, mean
# sparse softmax cross-entropy, and Adam as TF/Keras computes it: lr 1e-3,
# beta1 0.9, beta2 0.999, eps 1e-7 added to sqrt(v), the step size
# lr * sqrt(1 - beta2^t) / (1 - beta1^t). Kernels Glorot-uniform, biases
# zero, gamma 1, beta 0. One jitted step (forward, grad, BN statistics,
# Adam), its buffers donated.
#
# Batch: --batch-per-device (128) times --threads, as tpuloop's global batch
# at that many devices. The training split's batches are on the device
# before timing; each step takes the next (no shuffle), wrapping at the end
# of the epoch. Timed: --warmup steps untimed (the first compiles), then
# --reps repetitions of --steps steps, each ended by block_until_ready;
# examples/s per repetition. Threads: see peer_util.py.
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peer_util  # noqa: E402


def extra(ap):
    ap.add_argument("--batch-per-device", type=int, default=128)


a = peer_util.args("JAX on tpuloop's cnn model", steps=30, reps=5, warmup=5, extra=extra)
rec = peer_util.limit_threads(a.threads, "jax")

import numpy as np  # noqa: E402
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import jaxlib  # noqa: E402

BN_EPS, BN_MOMENTUM = 1e-3, 0.99
LR, B1, B2, EPS = 1e-3, 0.9, 0.999, 1e-7
# (name, in, out, stride) of the three blocks
BLOCKS = [("b1", 16, 16, 1), ("b2", 16, 32, 2), ("b3", 32, 64, 2)]


def glorot(key, shape, fan_in, fan_out):
    lim = np.sqrt(6.0 / (fan_in + fan_out))
    return jax.random.uniform(key, shape, jnp.float32, -lim, lim)


def conv_kernel(key, k, cin, cout):
    return glorot(key, (k, k, cin, cout), k * k * cin, k * k * cout)


def init(key):
    keys = iter(jax.random.split(key, 16))
    params, state = {}, {}

    def bn(name, c):
        params[name] = {"gamma": jnp.ones((c,)), "beta": jnp.zeros((c,))}
        state[name] = {"mean": jnp.zeros((c,)), "var": jnp.ones((c,))}

    params["stem"] = conv_kernel(next(keys), 3, 1, 16)
    bn("stem_bn", 16)
    for name, cin, cout, s in BLOCKS:
        params[name + "_conv1"] = conv_kernel(next(keys), 3, cin, cout)
        bn(name + "_bn1", cout)
        params[name + "_conv2"] = conv_kernel(next(keys), 3, cout, cout)
        bn(name + "_bn2", cout)
        if s != 1 or cin != cout:
            params[name + "_short"] = conv_kernel(next(keys), 1, cin, cout)
            bn(name + "_short_bn", cout)
    params["dense"] = {"w": glorot(next(keys), (64, 10), 64, 10), "b": jnp.zeros((10,))}
    return params, state


def conv(x, w, stride):
    return jax.lax.conv_general_dilated(x, w, (stride, stride), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))


def forward(params, state, x):
    new_state = {}

    def bn(name, h):
        mean = h.mean(axis=(0, 1, 2))
        var = jnp.square(h - mean).mean(axis=(0, 1, 2))
        s = state[name]
        new_state[name] = {"mean": BN_MOMENTUM * s["mean"] + (1 - BN_MOMENTUM) * mean,
                           "var": BN_MOMENTUM * s["var"] + (1 - BN_MOMENTUM) * var}
        p = params[name]
        return (h - mean) * (jax.lax.rsqrt(var + BN_EPS) * p["gamma"]) + p["beta"]

    h = jax.nn.relu(bn("stem_bn", conv(x, params["stem"], 1)))
    for name, cin, cout, s in BLOCKS:
        m = jax.nn.relu(bn(name + "_bn1", conv(h, params[name + "_conv1"], s)))
        m = bn(name + "_bn2", conv(m, params[name + "_conv2"], 1))
        short = h
        if name + "_short" in params:
            short = bn(name + "_short_bn", conv(h, params[name + "_short"], s))
        h = jax.nn.relu(m + short)
    logits = h.mean(axis=(1, 2)) @ params["dense"]["w"] + params["dense"]["b"]
    return logits, new_state


def loss_fn(params, state, x, y):
    logits, new_state = forward(params, state, x)
    logp = jax.nn.log_softmax(logits)
    return -jnp.take_along_axis(logp, y[:, None], axis=1).mean(), new_state


def adam(params, grads, opt):
    t = opt["t"] + 1
    m = jax.tree_util.tree_map(lambda m, g: B1 * m + (1 - B1) * g, opt["m"], grads)
    v = jax.tree_util.tree_map(lambda v, g: B2 * v + (1 - B2) * g * g, opt["v"], grads)
    tf = t.astype(jnp.float32)
    lr_t = LR * jnp.sqrt(1 - B2 ** tf) / (1 - B1 ** tf)
    params = jax.tree_util.tree_map(lambda p, m, v: p - lr_t * m / (jnp.sqrt(v) + EPS), params, m, v)
    return params, {"t": t, "m": m, "v": v}


def train_step(params, state, opt, x, y):
    (loss, new_state), grads = jax.value_and_grad(loss_fn, has_aux=True)(params, state, x, y)
    params, opt = adam(params, grads, opt)
    return params, new_state, opt, loss


def main():
    x_np, y_np = peer_util.fashion_mnist_train()
    B = a.batch_per_device * a.threads
    nb = x_np.shape[0] // B
    batches = [(jax.device_put(x_np[i * B:(i + 1) * B]), jax.device_put(y_np[i * B:(i + 1) * B])) for i in range(nb)]
    params, state = init(jax.random.PRNGKey(0))
    zeros = jax.tree_util.tree_map(jnp.zeros_like, params)
    opt = {"t": jnp.zeros((), jnp.int32), "m": zeros, "v": jax.tree_util.tree_map(jnp.zeros_like, params)}
    step_fn = jax.jit(train_step, donate_argnums=(0, 1, 2))
    step = 0

    def train(n):
        nonlocal params, state, opt, step
        loss = None
        for _ in range(n):
            xb, yb = batches[step % nb]
            step += 1
            params, state, opt, loss = step_fn(params, state, opt, xb, yb)
        jax.block_until_ready((params, loss))
        return loss

    train(max(a.warmup, 1))  # at least the step that compiles
    t = peer_util.Reps()
    eps, loss = t.examples_per_s(a.reps, lambda: train(a.steps), a.steps * B)
    rec.update({"bench": "cnn_jax", "peer": "jax", "model": "cnn", "dataset": "fashion_mnist",
                "batch": B, "batch_per_device": a.batch_per_device, "layout": "nhwc", "opt": "adam",
                "steps_per_rep": a.steps, "warmup_steps": max(a.warmup, 1), "unit": "examples/s",
                "step_ms_median": round(1000 * statistics.median(t.wall) / a.steps, 2),
                "last_loss": round(float(loss), 4),
                "params": sum(int(np.prod(p.shape)) for p in jax.tree_util.tree_leaves(params)),
                "jax_devices": str(jax.devices()), **t.fields(),
                "versions": {"jax": jax.__version__, "jaxlib": jaxlib.__version__, "numpy": np.__version__}})
    peer_util.emit(rec, eps)


if __name__ == "__main__":
    main()
