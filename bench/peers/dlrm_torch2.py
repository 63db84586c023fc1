# dlrm_torch2.py — PyTorch 2.x's training examples/s on bench_dlrm.c's DLRM
# (the workload of the old torch 1.13 peer, shared/bench/torch_dlrm.py), one
# JSON line per run.
#
# Model, as bench_dlrm's: 13 dense features into the bottom MLP 13-512-256-64
# (ReLU after each layer); 26 tables of 100,000 x 64 float32, one id per
# example, sum pooling; the dot interaction of the 27 vectors (bottom output
# and 26 pooled rows): the 351 pairwise dots of the upper triangle without the
# diagonal, concatenated with the bottom output (415); the top MLP
# 415-512-256-1 (ReLU but on the logit); mean BCE-with-logits. Global batch
# 2048. Dense kernels Glorot uniform, biases zero, tables uniform in
# [-1/8, 1/8), as tpuloop's (values change no work).
#
# Embedding back end, --emb:
#   tbe     FBGEMM's fused CPU SplitTableBatchedEmbeddingBagsCodegen holding
#           all 26 tables (what TorchRec wraps on CPU), the table update fused
#           into its backward: EXACT_ADAGRAD (element-wise, lr 0.01, eps 1e-10)
#           or EXACT_SGD (lr 0.1);
#   embbag  26 nn.EmbeddingBag(mode="sum", sparse=True), updated from their
#           sparse gradients by a torch.optim.Adagrad (lr 0.01, eps 1e-10) or
#           SGD (lr 0.1) of their own.
# The dense variables: torch.optim.Adagrad lr 0.01 / SGD lr 0.1 (--opt), in
# torch's default implementation (foreach).
#
# --compile=1 (the default) torch.compiles (inductor) the dense part of the
# step: the bottom MLP, the interaction, the top MLP and the loss, forward
# and backward, as one graph taking the pooled embeddings; the lookups, their
# backward and update, and the optimizers stay eager; --compile=0 is all
# eager. See COMPILE below.
#
# Data, as torch_dlrm.py's: 8 pre-generated batches (numpy default_rng(0)),
# cycled in order: per example 13 values log1p(exponential(10)), 26 ids
# uniform in [0, 100000) (int64), a label 1 with probability 0.25.
#
# Timed, as bench_dlrm: --warmup steps untimed (10, as bench_dlrm's warm-up
# train of STEPS; the compile happens there), then --reps (5) repetitions of
# --steps (10) steps; examples/s = steps x 2048 / seconds per repetition. The
# record has the first step's loss and the last: with Adagrad the model
# memorizes the 16,384 examples (0.67 to about 0 within 30 steps), with SGD
# it falls to about the labels' entropy (0.67 to 0.56 in 300 steps). A
# default run takes about 10 s (30 s with a cold compile). In the venv of
# scripts/install-bench-peers:
#
#     $TPULOOP_BENCH_VENV/bin/python bench/peers/dlrm_torch2.py --threads=1 --emb=tbe --opt=adagrad
#
# COMPILE, as measured on the 2-core development machine (quiet, inductor's
# cache warm), --steps 10 --reps 5: --compile=1 was faster in all 8 (emb, opt,
# threads) runs, by 3 to 10% (e.g. tbe adagrad at 1 thread 103.9 against
# 115.5 ms a step), hence the default. Compiling the whole forward instead
# changes nothing for tbe: Dynamo breaks the graph at FBGEMM's CPU op
# (fbgemm.split_embedding_codegen_forward_unweighted_pt2_wrapper has no fake
# tensor kernel), which then runs eagerly as here; for embbag it traces the
# 26 lookups (sparse gradients kept) but was no faster than compiling the
# dense part only. The first run on a machine compiles cold (15 to 30 s of
# warm-up, untimed); later runs reuse inductor's cache
# (/tmp/torchinductor_$USER) and warm up in about 1 s. In the same runs tbe
# was the faster back end at 1 thread (by 8 to 15%); at 2 threads embbag was
# ahead by 2 to 7%: FBGEMM's CPU kernels keep the second core less busy
# (cpu_util 1.6 to 1.9 against 2.0).
#
# Two threads on a loaded machine: when other work holds one of the two
# cores, torch's OpenMP threads wait on each other at every parallel region
# and a step can take ten times as long; cpu_util_median (below 2) and
# step_cpu_ms_median in the record show it.
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peer_util  # noqa: E402

TABLES, ROWS, DIM, DENSE, BATCH, NBATCH = 26, 100_000, 64, 13, 2048, 8


def extra(ap):
    ap.add_argument("--emb", choices=["tbe", "embbag"], default="tbe")
    ap.add_argument("--opt", choices=["adagrad", "sgd"], default="adagrad")
    ap.add_argument("--compile", type=int, choices=[0, 1], default=1)


a = peer_util.args("PyTorch 2 on bench_dlrm's DLRM", steps=10, reps=5, warmup=10, extra=extra)
rec = peer_util.limit_threads(a.threads, "torch")

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402


def mlp(sizes, last_relu):
    layers = []
    for i in range(len(sizes) - 1):
        lin = nn.Linear(sizes[i], sizes[i + 1])
        nn.init.xavier_uniform_(lin.weight)
        nn.init.zeros_(lin.bias)
        layers.append(lin)
        if i < len(sizes) - 2 or last_relu:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


class Dense(nn.Module):
    """Everything but the lookups: bottom MLP, interaction, top MLP, loss."""

    def __init__(self):
        super().__init__()
        self.bot = mlp([DENSE, 512, 256, DIM], last_relu=True)
        n = TABLES + 1
        li, lj = torch.triu_indices(n, n, offset=1)   # 351 pairs i < j
        self.register_buffer("pairs", li * n + lj, persistent=False)
        self.top = mlp([DIM + n * (n - 1) // 2, 512, 256, 1], last_relu=False)

    def forward(self, dense, emb, y):
        x = self.bot(dense)                                   # [B, 64]
        t = torch.cat([x.unsqueeze(1), emb], dim=1)           # [B, 27, 64]
        z = torch.bmm(t, t.transpose(1, 2)).flatten(1)[:, self.pairs]   # [B, 351]
        logit = self.top(torch.cat([x, z], dim=1)).squeeze(1)
        return F.binary_cross_entropy_with_logits(logit, y)


def make_tbe(adagrad):
    # importing fbgemm_gpu's modules registers torch.ops.fbgemm
    from fbgemm_gpu.split_embedding_configs import EmbOptimType as OptimType
    from fbgemm_gpu.split_table_batched_embeddings_ops_common import PoolingMode
    from fbgemm_gpu.split_table_batched_embeddings_ops_training import (ComputeDevice, EmbeddingLocation,
                                                                        SplitTableBatchedEmbeddingBagsCodegen)
    tbe = SplitTableBatchedEmbeddingBagsCodegen(
        [(ROWS, DIM, EmbeddingLocation.HOST, ComputeDevice.CPU)] * TABLES,
        optimizer=OptimType.EXACT_ADAGRAD if adagrad else OptimType.EXACT_SGD,
        learning_rate=0.01 if adagrad else 0.1, eps=1e-10, pooling_mode=PoolingMode.SUM)
    with torch.no_grad():
        for w in tbe.split_embedding_weights():
            w.uniform_(-0.125, 0.125)
    return tbe


def main():
    torch.set_num_threads(a.threads)
    torch.set_num_interop_threads(1)
    torch.manual_seed(0)
    adagrad = a.opt == "adagrad"
    rng = np.random.default_rng(0)
    data = []
    for _ in range(NBATCH):
        dense = torch.from_numpy(np.log1p(rng.exponential(10.0, size=(BATCH, DENSE))).astype(np.float32))
        ids = rng.integers(0, ROWS, size=(TABLES, BATCH), dtype=np.int64)   # table-major
        y = torch.from_numpy((rng.random(BATCH) < 0.25).astype(np.float32))
        if a.emb == "tbe":
            data.append((dense, torch.from_numpy(ids.reshape(-1)), y))
        else:
            data.append((dense, [torch.from_numpy(ids[t]) for t in range(TABLES)], y))

    t0 = time.perf_counter()
    model = Dense()
    if adagrad:
        opt = torch.optim.Adagrad(model.parameters(), lr=0.01, eps=1e-10)
    else:
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
    sparse_opt = None
    if a.emb == "tbe":
        tbe = make_tbe(adagrad)
        offsets = torch.arange(0, TABLES * BATCH + 1, dtype=torch.int64)   # one id per bag

        def lookup(ids):
            return tbe(ids, offsets).view(BATCH, TABLES, DIM)
    else:
        tables = nn.ModuleList([nn.EmbeddingBag(ROWS, DIM, mode="sum", sparse=True) for _ in range(TABLES)])
        with torch.no_grad():
            for e in tables:
                e.weight.uniform_(-0.125, 0.125)
        if adagrad:
            sparse_opt = torch.optim.Adagrad(tables.parameters(), lr=0.01, eps=1e-10)
        else:
            sparse_opt = torch.optim.SGD(tables.parameters(), lr=0.1)
        offsets = torch.arange(BATCH, dtype=torch.int64)
        torch.sparse.check_sparse_tensor_invariants.disable()   # as by default, but said: no warning

        def lookup(ids):
            return torch.stack([e(i, offsets) for e, i in zip(tables, ids)], dim=1)
    init_s = time.perf_counter() - t0
    fwd = torch.compile(model) if a.compile else model
    step_no, first_loss = 0, []

    def train(n):
        nonlocal step_no
        for _ in range(n):
            dense, ids, y = data[step_no % NBATCH]
            step_no += 1
            loss = fwd(dense, lookup(ids), y)
            if step_no == 1:
                first_loss.append(loss.item())
            opt.zero_grad(set_to_none=True)
            if sparse_opt is not None:
                sparse_opt.zero_grad(set_to_none=True)
            loss.backward()        # with tbe, the tables' update happens here
            opt.step()
            if sparse_opt is not None:
                sparse_opt.step()
        return loss

    t0 = time.perf_counter()
    if a.warmup:
        train(a.warmup)
    warmup_s = time.perf_counter() - t0
    t = peer_util.Reps()
    eps, loss = t.examples_per_s(a.reps, lambda: train(a.steps), a.steps * BATCH)
    versions = {"torch": torch.__version__, "numpy": np.__version__}
    if a.emb == "tbe":
        versions["fbgemm_gpu_cpu"] = __import__("importlib.metadata").metadata.version("fbgemm-gpu-cpu")
    rec.update({"bench": "dlrm_torch2", "peer": "torch", "model": "dlrm", "emb": a.emb, "opt": a.opt,
                "compile": a.compile, "batch": BATCH, "tables": TABLES, "rows": ROWS, "dim": DIM,
                "bottom": "13-512-256-64", "top": "415-512-256-1", "steps_per_rep": a.steps,
                "warmup_steps": a.warmup, "warmup_s": round(warmup_s, 2), "init_s": round(init_s, 2),
                "unit": "examples/s", "step_ms_median": round(1000 * statistics.median(t.wall) / a.steps, 2),
                "step_cpu_ms_median": round(1000 * statistics.median(t.cpu) / a.steps, 2),
                "first_loss": round(first_loss[0], 4), "last_loss": round(loss.item(), 4),
                "global_step": step_no, "dense_params": sum(p.numel() for p in model.parameters()),
                "torch_threads": torch.get_num_threads(), **t.fields(), "versions": versions})
    peer_util.emit(rec, eps)


if __name__ == "__main__":
    main()
