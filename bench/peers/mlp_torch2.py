# mlp_torch2.py — PyTorch 2.x's training examples/s on tpuloop's main job,
# the MLP of bench_mlp (784-256-256-10, ReLU, Adam 1e-3, global batch 128,
# Fashion-MNIST), one JSON line. The torch 2 successor of
# shared/bench/torch_mlp.py (torch 1.13, eager, default init).
#
# Model: nn.Sequential(Linear(784, 256), ReLU, Linear(256, 256), ReLU,
# Linear(256, 10)), weights Glorot-uniform and biases zero (as Keras and the
# other peers; torch's default init differs), mean cross-entropy,
# torch.optim.Adam(lr=1e-3) (torch's eps 1e-8 on sqrt(v_hat)) in its
# --adam implementation: fused (the default: one fused kernel for all
# parameters, on CPU since torch 2.4), foreach (one multi-tensor op per
# state update) or single (a loop over the parameters).
#
# Step: one Python function — gather the batch from the resident split by the
# indices, forward, loss, backward, opt.step(), zero_grad — under
# torch.compile (--compile=1, the default; --compile-mode, default "default")
# or eager (--compile=0). Dynamo breaks the graph at loss.backward() (compiled
# autograd is off by default), inside Optimizer.step's wrappers and at
# zero_grad (TORCH_LOGS=graph_breaks lists them): the gather, forward and
# loss (with their AOT-autograd backward) are one compiled graph, and the
# rest runs as smaller graphs with eager code between them.
# Dynamo does not trace into fused Adam (torch.compiler.disable'd), so with
# --adam=fused the step calls the fused kernel eagerly; foreach is traced
# and compiled by Inductor. Measured on the 2-core bench host, 1 thread,
# examples/s: compiled fused 57-58k, compiled foreach 55-57k, eager fused
# 59-61k, eager foreach 51k; "max-autotune-no-cudagraphs" 57k with foreach,
# no better than "default". Hence fused; torch.compile buys nothing here.
#
# Loop: the training split is one (60000, 784) float32 tensor and one int64
# label tensor before timing. Each epoch draws torch.randperm(60000) from a
# generator seeded once (--seed) and runs 468 steps (drop remainder, 59904
# examples), step i taking perm[128 i : 128 (i+1)]. Timed: --warmup (1)
# untimed epochs (the first compiles), then --reps (5) repetitions of one
# epoch each (--steps, default 468, at most 468), the permutation included;
# the value of a repetition is steps * 128 / wall seconds. --accuracy-epochs=N
# (default 0: skipped) then trains a freshly initialised model N epochs the
# same way (untimed) and adds its accuracy on the t10k split
# ("test_accuracy"). Threads: see peer_util.py.
#
# Run: ~/.cache/tpuloop/bench-venv/bin/python bench/peers/mlp_torch2.py --threads=1 [--compile=0]
# Prints: {"threads": 1, ..., "bench": "mlp_torch2", "peer": "torch", "compile": true, "adam": "fused",
#   "unit": "examples/s", "reps": [...], "median": ..., ...}
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peer_util  # noqa: E402

BATCH, EPOCH_STEPS = 128, 60000 // 128  # 468: drop_remainder


def extra(ap):
    ap.add_argument("--compile", type=int, choices=[0, 1], default=1)
    ap.add_argument("--compile-mode", default="default",
                    help="torch.compile mode: default, reduce-overhead, max-autotune-no-cudagraphs, ...")
    ap.add_argument("--adam", choices=["fused", "foreach", "single"], default="fused")
    ap.add_argument("--accuracy-epochs", type=int, default=0,
                    help="after timing, train a fresh model this many epochs and report test accuracy (0: skip)")
    ap.add_argument("--seed", type=int, default=42)


a = peer_util.args("PyTorch 2 on tpuloop's mlp model", steps=EPOCH_STEPS, reps=5, warmup=1, extra=extra)
if a.steps > EPOCH_STEPS:
    sys.exit("--steps is the steps of one epoch run per repetition, at most %d" % EPOCH_STEPS)
rec = peer_util.limit_threads(a.threads, "torch")

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402


def make():
    model = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10))
    for m in model:
        if isinstance(m, nn.Linear):
            nn.init.xavier_uniform_(m.weight)
            nn.init.zeros_(m.bias)
    kw = {"fused": {"fused": True}, "foreach": {"foreach": True}, "single": {"foreach": False}}[a.adam]
    return model.train(), torch.optim.Adam(model.parameters(), lr=1e-3, **kw)


def main():
    torch.set_num_threads(a.threads)
    torch.set_num_interop_threads(1)
    torch.manual_seed(a.seed)
    x_np, y_np = peer_util.fashion_mnist_train()
    x_all = torch.from_numpy(x_np.reshape(-1, 784))
    y_all = torch.from_numpy(y_np).long()
    g = torch.Generator().manual_seed(a.seed + 1)

    def trainer(model, opt):
        def step(idx):
            loss = F.cross_entropy(model(x_all[idx]), y_all[idx])
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            return loss

        step = torch.compile(step, mode=a.compile_mode) if a.compile else step

        def epoch(steps):
            perm = torch.randperm(60000, generator=g)
            loss = None
            for i in range(steps):
                loss = step(perm[i * BATCH:(i + 1) * BATCH])
            return loss
        return epoch

    model, opt = make()
    run_epoch = trainer(model, opt)
    for _ in range(max(a.warmup, 1)):
        loss = run_epoch(a.steps)
    t = peer_util.Reps()
    eps, loss = t.examples_per_s(a.reps, lambda: run_epoch(a.steps), a.steps * BATCH)
    rec.update({"bench": "mlp_torch2", "peer": "torch", "model": "mlp", "dataset": "fashion_mnist",
                "batch": BATCH, "opt": "adam", "adam": a.adam, "compile": bool(a.compile),
                "compile_mode": a.compile_mode if a.compile else None, "steps_per_rep": a.steps,
                "warmup_epochs": max(a.warmup, 1), "unit": "examples/s",
                "step_ms_median": round(1000 * statistics.median(t.wall) / a.steps, 3),
                "last_loss": round(loss.item(), 4), "params": sum(p.numel() for p in model.parameters()),
                "torch_threads": torch.get_num_threads(), **t.fields(),
                "versions": {"torch": torch.__version__, "numpy": np.__version__}})
    if a.accuracy_epochs > 0:
        torch.manual_seed(a.seed)
        g.manual_seed(a.seed + 1)
        model, opt = make()
        run_epoch = trainer(model, opt)
        for _ in range(a.accuracy_epochs):
            run_epoch(EPOCH_STEPS)
        xt, yt = peer_util.fashion_mnist_test()
        with torch.no_grad():
            acc = (model.eval()(torch.from_numpy(xt)).argmax(1) == torch.from_numpy(yt).long()).float().mean()
        rec["accuracy_epochs"] = a.accuracy_epochs
        rec["test_accuracy"] = round(acc.item(), 4)
    peer_util.emit(rec, eps)


if __name__ == "__main__":
    main()
