"""embedding_fbgemm.py — FBGEMM's fused CPU TableBatchedEmbedding (what
TorchRec wraps on CPU) on bench/bench_embedding.c's workload: 8 tables of
1,000,000 x 64 float32, batch 4096, bags of 1 and 20 Zipf(1.05) ids (the
ranks scattered over the table by a fixed permutation, as the shared
torch_embbag.py draws them), SUM pooling; a step is the forward and the
backward of a fixed gradient of small values (as bench_embedding sends the
engine a fixed buffer: no dense model on either side), which FBGEMM fuses
with the update (EXACT_SGD, lr 0.01; EXACT_ADAGRAD, element-wise like
tpuloop's Adagrad, lr 0.01, eps 1e-10). In the venv of
scripts/install-bench-peers:

    $TPULOOP_BENCH_VENV/bin/python bench/peers/embedding_fbgemm.py --threads=1 [--opts=sgd,adagrad] [--bags=1,20]

One JSON line per optimizer and bag: M lookups/s per repetition with their
median, min and max; the effective GB/s of the bytes a step must move (one
row read per id, and a read and a write of the row and of each optimizer slot
row per unique id, as torch_embbag.py counts them); the unique rows per step.
"""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peer_util  # noqa: E402

DIM = 64
ROW_BYTES = DIM * 4


def zipf_ids(np, rng, cdf, perm, rows, n):
    k = np.searchsorted(cdf, rng.random(n)).clip(0, rows - 1)
    return perm[k]


def main():
    def extra(ap):
        ap.add_argument("--tables", type=int, default=8)
        ap.add_argument("--rows", type=int, default=1_000_000)
        ap.add_argument("--batch", type=int, default=4096)
        ap.add_argument("--bags", default="1,20")
        ap.add_argument("--opts", default="sgd,adagrad")
    a = peer_util.args("FBGEMM TBE on bench_embedding's workload", steps=10, reps=5, warmup=3, extra=extra)
    rec0 = peer_util.limit_threads(a.threads, "torch")
    import numpy as np
    import torch
    import fbgemm_gpu  # noqa: F401 - registers torch.ops.fbgemm
    from fbgemm_gpu.split_embedding_configs import EmbOptimType as OptimType
    from fbgemm_gpu.split_table_batched_embeddings_ops_common import PoolingMode
    from fbgemm_gpu.split_table_batched_embeddings_ops_training import (ComputeDevice, EmbeddingLocation,
                                                                        SplitTableBatchedEmbeddingBagsCodegen)
    torch.set_num_threads(a.threads)
    torch.set_num_interop_threads(1)
    rng = np.random.default_rng(0)
    ranks = np.arange(1, a.rows + 1, dtype=np.float64)
    w = ranks ** -1.05
    cdf = np.cumsum(w) / w.sum()
    perm = rng.permutation(a.rows)
    opts = {"sgd": (OptimType.EXACT_SGD, 0), "adagrad": (OptimType.EXACT_ADAGRAD, 1)}
    for oname in a.opts.split(","):
        otype, slots = opts[oname]
        t0 = time.perf_counter()
        tbe = SplitTableBatchedEmbeddingBagsCodegen(
            [(a.rows, DIM, EmbeddingLocation.HOST, ComputeDevice.CPU)] * a.tables, optimizer=otype,
            learning_rate=0.01, eps=1e-10, pooling_mode=PoolingMode.SUM)
        init_s = time.perf_counter() - t0
        for bag in [int(b) for b in a.bags.split(",")]:
            nbatches = 8
            batches, uniq = [], []
            for _ in range(nbatches):   # pre-generated, cycled through while timed
                per_table = [zipf_ids(np, rng, cdf, perm, a.rows, a.batch * bag) for _ in range(a.tables)]
                uniq.append(sum(len(np.unique(t)) for t in per_table))
                ids = torch.from_numpy(np.concatenate(per_table))
                offsets = torch.arange(0, a.tables * a.batch * bag + 1, bag, dtype=torch.int64)
                batches.append((ids, offsets))
            grad = torch.randn(a.batch, a.tables * DIM) * 1e-3

            def step(i):
                ids, offsets = batches[i % nbatches]
                tbe(ids, offsets).backward(grad)   # the update is fused into the backward

            for i in range(a.warmup):
                step(i)
            steps = a.steps
            ids_per_step = a.tables * a.batch * bag
            u = float(np.mean(uniq))
            bytes_per_step = ROW_BYTES * (ids_per_step + 2 * (1 + slots) * u)
            lookups, gbs = [], []
            c0 = time.process_time()
            w0 = time.perf_counter()
            for r in range(a.reps):
                t0 = time.perf_counter()
                for i in range(steps):
                    step(a.warmup + r * steps + i)
                dt = (time.perf_counter() - t0) / steps
                lookups.append(ids_per_step / dt / 1e6)
                gbs.append(bytes_per_step / dt / 1e9)
            cpu_util = (time.process_time() - c0) / (time.perf_counter() - w0)
            rec = dict(rec0, bench="fbgemm_tbe", opt=oname, dist="zipf", bag=bag, tables=a.tables, rows=a.rows,
                       dim=DIM, batch=a.batch, ids_per_step=ids_per_step, unique_rows_per_step=round(u),
                       optimizer_slots=slots, steps_per_rep=steps, unit="M lookups/s (fwd+bwd+update)",
                       eff_GBps=[round(x, 3) for x in gbs], eff_GBps_median=round(float(np.median(gbs)), 3),
                       table_init_s=round(init_s, 1), cpu_util=round(cpu_util, 2),
                       versions={"torch": torch.__version__,
                                 "fbgemm_gpu_cpu": __import__("importlib.metadata").metadata.version(
                                     "fbgemm-gpu-cpu")})
            peer_util.emit(rec, lookups, digits=3)
        tbe = None   # frees the tables before the next optimizer's


if __name__ == "__main__":
    main()
