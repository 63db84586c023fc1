# check_cnn.py — checks that cnn_torch.py and cnn_jax.py are one model: the
# torch net's weights copied into the JAX parameters (OIHW -> HWIO), both in
# float64 on one batch of 128 Fashion-MNIST images in training mode, give the
# same logits, loss and gradients to 1e-9 (float32 differs by rounding only).
# Also checks that torch's symmetric padding=1 at stride 2 would not (TF's
# SAME pads 0 before and 1 after). Not a benchmark: run_peers.sh does not run
# it. Prints one JSON line; exits 1 when a check fails.
#
#   $TPULOOP_BENCH_VENV/bin/python bench/peers/check_cnn.py
import json
import os
import sys

sys.argv = sys.argv[:1] + ["--threads=1"]
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cnn_torch as T  # noqa: E402  (parses the arguments, pins 1 CPU)
import cnn_jax as J  # noqa: E402

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402


def main():
    jax.config.update("jax_enable_x64", True)
    torch.set_default_dtype(torch.float64)
    torch.manual_seed(1)
    m = T.CNN()
    m.apply(T.glorot)
    m.train()
    x_np, y_np = T.peer_util.fashion_mnist_train()
    xb, yb = x_np[:128].astype(np.float64), y_np[:128]

    def arr(t, perm=None):
        a = t.detach().numpy()
        return jnp.asarray(a if perm is None else a.transpose(perm), dtype=jnp.float64)

    def kernel(c):
        return arr(c.conv.weight, (2, 3, 1, 0))

    def bn(b):
        return {"gamma": arr(b.weight), "beta": arr(b.bias)}

    params, state = J.init(jax.random.PRNGKey(0))
    state = jax.tree_util.tree_map(lambda v: v.astype(jnp.float64), state)
    # JAX kernel name -> (torch conv, torch BN, JAX BN name)
    names = {"stem": (m.stem, m.bn, "stem_bn")}
    for (name, *_), blk in zip(J.BLOCKS, m.blocks):
        names[name + "_conv1"] = (blk.conv1, blk.bn1, name + "_bn1")
        names[name + "_conv2"] = (blk.conv2, blk.bn2, name + "_bn2")
        if blk.short is not None:
            names[name + "_short"] = (blk.short[0], blk.short[1], name + "_short_bn")
    if set(names) | {v[2] for v in names.values()} | {"dense"} != set(params):
        sys.exit("check_cnn: the two models' parameters differ: %s" % sorted(params))
    for name, (c, b, bname) in names.items():
        params[name] = kernel(c)
        params[bname] = bn(b)
    params["dense"] = {"w": arr(m.dense.weight, (1, 0)), "b": arr(m.dense.bias)}

    xt = torch.from_numpy(np.ascontiguousarray(xb.transpose(0, 3, 1, 2)))
    logits_t = m(xt)
    loss_t = F.cross_entropy(logits_t, torch.from_numpy(yb).long())
    loss_t.backward()
    (loss_j, _), grads = jax.value_and_grad(J.loss_fn, has_aux=True)(params, state, jnp.asarray(xb), jnp.asarray(yb))
    logits_j, _ = J.forward(params, state, jnp.asarray(xb))

    def rel(a, b):
        return float(np.abs(np.asarray(a) - np.asarray(b)).max() / max(np.abs(np.asarray(b)).max(), 1e-30))

    out = {"bench": "check_cnn", "logits_rel": rel(logits_t.detach().numpy(), logits_j),
           "loss_rel": rel(loss_t.item(), float(loss_j))}
    worst = 0.0
    for name, (c, b, bname) in names.items():
        worst = max(worst, rel(c.conv.weight.grad.numpy().transpose(2, 3, 1, 0), grads[name]))
    worst = max(worst, rel(m.dense.weight.grad.numpy().T, grads["dense"]["w"]))
    out["grad_rel_max"] = worst
    for blk in m.blocks:  # torch's own padding at stride 2: another model
        if blk.conv1.pad:
            blk.conv1.pad = False
            blk.conv1.conv.padding = (1, 1)
    out["symmetric_padding_logits_rel"] = rel(m(xt).detach().numpy(), logits_j)
    out["ok"] = (max(out["logits_rel"], out["loss_rel"], worst) < 1e-9 and out["symmetric_padding_logits_rel"] > 1e-3)
    print(json.dumps(out), flush=True)
    sys.exit(0 if out["ok"] else 1)


if __name__ == "__main__":
    main()
