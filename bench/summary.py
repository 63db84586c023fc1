# summary.py — the last line of `make bench`: tpuloop against PyTorch, as
# ratios of figures measured in the same run (the JSON lines in the file named
# on the command line). Prints one JSON line; a figure that is missing (a peer
# skipped) gives null.
#
#   mlp_ratio_1  tpuloop at 1 device / PyTorch at 1 thread (torch 1 + OpenBLAS 1)
#   mlp_ratio_2  tpuloop at 2 devices / PyTorch's faster two-thread split
#   target       the goal: each ratio >= 1.5
#   gemm_floor_1 examples/s that the step's GEMMs alone allow at one thread,
#                and the share of it that tpuloop and PyTorch reach
#   overhead     tpuloop's us/step at iterations_per_loop 1 and 1000, their
#                difference, PyTorch's train step, and PyTorch / tpuloop
#   input_*      bench_input: TFRecord read + CRC (MB/s, target 2000), GZIP,
#                and tf.Example parsing into dense features against Python's
#                protobuf on the same file (records/s, ratio target 5)
#   emb_*        bench_embedding against torch_embbag.py (and FBGEMM's fused
#                TBE, bench/peers/embedding_fbgemm.py, at its better thread
#                count: emb_ratio_vs_fbgemm), per "opt/bag" (sgd,
#                adagrad; bags of 1 and 20 Zipf ids): M lookups/s of both and
#                their ratio (target 10); effective GB/s of both and their
#                share of the random-row gather bandwidth bench_embedding
#                measured in its own process (tpuloop's target 0.5; the
#                lookup share, lookups/s over gathered rows/s, beside it);
#                peak RSS over tables + slots per optimizer (target 1.10,
#                the whole process; the engine's own share beside it)
#   comm_*       bench_comm: tpuloop's all-reduce over MPI (2 processes)
#                against MPI_Allreduce, per transport and size (4, 64 MiB):
#                the median per-round ratio, its min and max (target 0.9)
#   hosts_*      bench_hosts: examples/s of 2 hosts x 1 device (2 MPI
#                processes) over 1 host x 2 devices, for the MLP (target 0.9:
#                within 10%) and DLRM: the median per-round ratio, its min and
#                max; and the MLP on 2 hosts against PyTorch DDP (gloo) on the
#                same 2 processes (torch_ddp.py, the same workload), with
#                tpuloop's all-reduce against gloo's at 4 and 64 MiB
#   python_over_cli_mlp_*  bench/python_front_end.py: the MLP from Python
#                (examples/mlp_fashion_mnist.py's model_fn) over `tpuloop train`
#                of the same configuration (and of the main job's, the data in
#                memory), examples/s, 1 and 2 devices: the median ratio of
#                alternating rounds, min and max (target 0.97)
#   dlrm_*       bench_dlrm against torch_dlrm.py, per optimizer (adagrad,
#                sgd) and thread count ("1": 1 device / torch 1 + OpenBLAS 1;
#                "2": 2 devices / PyTorch's faster two-thread split):
#                examples/s of both, their ratio, the split taken, and the
#                peak RSS of each process
#   models_vs_peers_by_threads  tpuloop's cnn model (bench_models:
#                "tpuloop_cnn" lines with devices 1 and 2, median examples/s)
#                against PyTorch 2.x and JAX from the venv of
#                scripts/install-bench-peers (bench/peers/cnn_torch.py,
#                cnn_jax.py) at 1 and 2 threads, batch 128 per device, in
#                alternating rounds (run_peers.sh): examples/s of each and
#                tpuloop's per-round ratio to the faster peer, to PyTorch
#                (its faster layout, NCHW or channels_last) and to JAX, each
#                as median and min-max over the rounds
#                and tpuloop's transformer model ("tpuloop_transformer" lines,
#                devices 1 and 2, median ms/step) against
#                bench/peers/transformer_torch.py at 1 and 2 threads: ms per
#                training step of each, and PyTorch's over tpuloop's
#   vs_best_peer tpuloop over its strongest modern peer per figure, per
#                alternating round (median, min-max): the embedding engine at
#                its better core count over FBGEMM's fused TBE at its better
#                thread count, the DLRM at 2 devices over PyTorch 2.x's (TBE
#                or EmbeddingBag), the MLP over JAX scan / Keras 3 / torch
#                2.x compile, the step overhead at iterations_per_loop 1000
#                against JAX's scan; with the targets and whether
#                each is met (best_peer_figures)
import json
import statistics
import sys


def main():
    recs = []
    with open(sys.argv[1]) as f:
        for line in f:
            line = line.strip()
            if line.startswith("{"):
                try:
                    recs.append(json.loads(line))
                except ValueError:
                    pass

    def pick(bench, **want):
        for r in recs:
            if r.get("bench") == bench and all(r.get(k) == v for k, v in want.items()):
                return r
        return None

    def med(r):
        return None if r is None else r.get("median")

    def ratio(a, b):
        return None if a is None or b is None or b == 0 else round(a / b, 3)

    tl1 = med(pick("tpuloop_mlp", devices=1, test_split_loaded=True))
    tl2 = med(pick("tpuloop_mlp", devices=2, test_split_loaded=True))
    pt1 = med(pick("torch_mlp", torch_threads=1, OPENBLAS_NUM_THREADS="1"))
    two = [r for r in recs if r.get("bench") == "torch_mlp" and
           r.get("torch_threads", 0) + int(r.get("OPENBLAS_NUM_THREADS", "0")) == 3]
    best2 = max(two, key=lambda r: r["median"]) if two else None
    pt2 = med(best2)
    r1, r2 = ratio(tl1, pt1), ratio(tl2, pt2)
    ipl1 = med(pick("tpuloop_overhead", what="train_step", iterations_per_loop=1))
    ipl1000 = med(pick("tpuloop_overhead", what="train_step", iterations_per_loop=1000))
    pts = med(pick("torch_overhead", what="train_step"))
    floor = med(pick("tpuloop_mlp", what="gemm_floor"))
    rss = pick("tpuloop_mlp", devices=1, test_split_loaded=True)
    prss = pick("torch_mlp_maxrss", torch_threads=1, OPENBLAS_NUM_THREADS="1")
    out = {
        "bench": "summary",
        "tpuloop_mlp_examples_per_s": {"1": tl1, "2": tl2},
        "torch_mlp_examples_per_s": {"1": pt1, "2": pt2},
        "torch_2_threads_split": None if best2 is None else
        "torch %d + OpenBLAS %s" % (best2["torch_threads"], best2["OPENBLAS_NUM_THREADS"]),
        "mlp_ratio_1": r1,
        "mlp_ratio_2": r2,
        "target": 1.5,
        "target_met": None if r1 is None or r2 is None else (r1 >= 1.5 and r2 >= 1.5),
        "gemm_floor_1_examples_per_s": floor,
        "tpuloop_1_share_of_gemm_floor": ratio(tl1, floor),
        "torch_1_share_of_gemm_floor": ratio(pt1, floor),
        "tpuloop_us_per_step_ipl1": ipl1,
        "tpuloop_us_per_step_ipl1000": ipl1000,
        "tpuloop_ipl1_minus_ipl1000_us": None if ipl1 is None or ipl1000 is None else round(ipl1 - ipl1000, 3),
        "torch_us_per_train_step": pts,
        "torch_over_tpuloop_step_time_ipl1": ratio(pts, ipl1),
        "torch_over_tpuloop_step_time_ipl1000": ratio(pts, ipl1000),
        "tpuloop_mlp_maxrss_mib": None if rss is None else rss.get("maxrss_mib"),
        "torch_mlp_maxrss_mib": None if prss is None else prss.get("maxrss_mib"),
    }
    out.update(input_figures(pick, med, ratio))
    out.update(embedding_figures(recs, pick, med, ratio))
    out.update(dlrm_figures(recs, pick, med, ratio))
    out.update(comm_figures(pick))
    out.update(hosts_figures(pick, med, ratio))
    out.update(peer_model_figures(recs, pick, med, ratio))
    out.update(spmd_figures(pick))
    out.update(python_figures(pick))
    out.update(best_peer_figures(recs))
    print(json.dumps(out), flush=True)


def spread(v, digits=3):
    """The median, min and max of the figures that are there (None where
    none is)."""
    v = [x for x in v if x is not None]
    return None if not v else {"median": round(statistics.median(v), digits), "min": round(min(v), digits),
                               "max": round(max(v), digits), "rounds": len(v)}


def best_peer_figures(recs):
    """tpuloop against its strongest modern peer per figure, from the
    alternating rounds of run_peers.sh: in each round tpuloop's figure over
    the best peer's of that round (at the peer's better thread count where
    the issue says so), then the median and min-max over the rounds, against
    the targets:

      embedding  bench_embedding at its better core count (1 or 2) over
                 FBGEMM's fused TBE at its better thread count, per
                 optimizer and bag (target 2); and tpuloop's effective GB/s
                 over the same-run random-row gather at that core count
                 (target 0.6)
      dlrm       bench_dlrm at 2 devices over the best of PyTorch 2.x's DLRM
                 with FBGEMM's TBE and with nn.EmbeddingBag at 2 threads, per
                 optimizer (target 2); beside it, the share of the same
                 round's GEMM-only ceiling (bench_dlrm's gemm_floor: the
                 step's dense GEMMs alone, one thread per replica) that
                 tpuloop reaches and that twice the best peer would need,
                 and the same of the ceiling with the least traffic of the
                 step's table rows added (gemm_and_rows)
      mlp        bench_models mlp at its better layout of the cores
                 (replicas x intra-op threads; each layout's figures too)
                 over the best of JAX (lax.scan), Keras 3
                 (steps_per_execution) and PyTorch 2.x (torch.compile), at 1
                 and 2 cores (target 1.3 at 2)
      overhead   JAX's us/step in a lax.scan of 1000 steps over tpuloop's at
                 iterations_per_loop 1000 (target 1: tpuloop no slower)"""
    ours = ("tpuloop_embedding", "fbgemm_tbe", "tpuloop_dlrm", "dlrm_torch2", "tpuloop_mlp_rounds", "mlp_jax",
            "mlp_keras", "mlp_torch2", "tpuloop_overhead", "overhead_jax")
    rounds = sorted({r["round"] for r in recs if isinstance(r.get("round"), int) and r.get("bench") in ours})

    def runs(bench, rnd, **want):
        return [r for r in recs if r.get("bench") == bench and r.get("round") == rnd and "median" in r and
                all(r.get(k) == v for k, v in want.items())]

    def best(rs, key="median"):
        return max(rs, key=lambda r: r[key]) if rs else None

    def ratio(a, b):
        return None if a is None or b is None or b == 0 else a / b

    def label(r, *keys):
        return None if r is None else "/".join([r["bench"]] + ["%s=%s" % (k, r.get(k)) for k in keys])

    out = {}
    emb = {}
    for o in ("sgd", "adagrad"):
        for b in (1, 20):
            rat, frac, names = [], [], []
            for k in rounds:
                mine = best(runs("tpuloop_embedding", k, opt=o, bag=b, dist="zipf"))
                theirs = best(runs("fbgemm_tbe", k, opt=o, bag=b))
                rat.append(ratio(mine and mine["median"], theirs and theirs["median"]))
                frac.append(None if mine is None else mine.get("eff_fraction_of_gather"))
                names.append((label(mine, "cores"), label(theirs, "threads")))
            emb["%s/%d" % (o, b)] = {"ratio": spread(rat), "fraction_of_gather": spread(frac),
                                     "tpuloop_and_peer_per_round": names}
    dlrm = {}
    for o in ("adagrad", "sgd"):
        rat, names, ours_floor, twice_floor, ours_rows, twice_rows = [], [], [], [], [], []
        for k in rounds:
            mine = best(runs("tpuloop_dlrm", k, opt=o, devices=2))
            theirs = best(runs("dlrm_torch2", k, opt=o, threads=2))
            floor = best(runs("tpuloop_dlrm", k, what="gemm_floor", devices=2))
            rat.append(ratio(mine and mine["median"], theirs and theirs["median"]))
            names.append(label(theirs, "emb", "compile"))
            # The step's GEMMs alone, same round: what share of that ceiling
            # tpuloop reaches, and what share twice the best peer would need.
            ours_floor.append(ratio(mine and mine["median"], floor and floor["median"]))
            twice_floor.append(ratio(theirs and 2 * theirs["median"], floor and floor["median"]))
            # The same with the least traffic of the step's table rows added
            # (records before it have none).
            rows = floor and floor.get("gemm_and_rows_median")
            ours_rows.append(ratio(mine and mine["median"], rows))
            twice_rows.append(ratio(theirs and 2 * theirs["median"], rows))
        dlrm[o] = {"ratio": spread(rat), "best_peer_per_round": names,
                   "tpuloop_share_of_gemm_floor": spread(ours_floor),
                   "twice_best_peer_share_of_gemm_floor": spread(twice_floor),
                   "tpuloop_share_of_gemm_and_rows_floor": spread(ours_rows),
                   "twice_best_peer_share_of_gemm_and_rows_floor": spread(twice_rows)}
    mlp = {}
    for t in (1, 2):
        rat, names, tl, lay = [], [], [], {}
        for k in rounds:
            # tpuloop's best layout of t cores (replicas x intra-op threads;
            # records before the layouts have only devices, one thread each).
            ours = [r for r in runs("tpuloop_mlp_rounds", k) if r.get("threads", r.get("devices")) == t]
            for r in ours:
                lay.setdefault(r.get("layout", "%dx1" % r["devices"]), []).append(r["median"])
            mine = best(ours)
            theirs = best([r for p in ("mlp_jax", "mlp_keras", "mlp_torch2") for r in runs(p, k, threads=t)])
            rat.append(ratio(mine and mine["median"], theirs and theirs["median"]))
            tl.append(None if mine is None else mine["median"])
            names.append((label(mine, "layout"), label(theirs)))
        peers = {p: spread([None if not runs(p, k, threads=t) else best(runs(p, k, threads=t))["median"]
                            for k in rounds], 1) for p in ("mlp_jax", "mlp_keras", "mlp_torch2")}
        mlp[str(t)] = {"ratio": spread(rat), "tpuloop_and_peer_per_round": names,
                       "examples_per_s": dict(peers, tpuloop=spread(tl, 1)),
                       "tpuloop_layouts": {k: spread(v, 1) for k, v in sorted(lay.items())}}
    ovh, us = [], {"tpuloop": [], "jax_scan": []}
    for k in rounds:
        mine = best(runs("tpuloop_overhead", k, what="train_step", iterations_per_loop=1000))
        theirs = runs("overhead_jax", k, mode="scan")
        a = None if mine is None else mine["median"]
        b = None if not theirs else min(r["median"] for r in theirs)
        ovh.append(ratio(b, a))
        us["tpuloop"].append(a)
        us["jax_scan"].append(b)
    targets = {"embedding": 2.0, "embedding_fraction_of_gather": 0.6, "dlrm": 2.0, "mlp_2": 1.3, "overhead": 1.0}

    def met(v, bound):
        return None if v is None else v["median"] >= bound

    emb_met = [met(e["ratio"], 2.0) for e in emb.values()] + [met(e["fraction_of_gather"], 0.6)
                                                              for e in emb.values()]
    out["vs_best_peer"] = {
        "rounds": len(rounds),
        "embedding": emb,
        "dlrm_2": dlrm,
        "mlp": mlp,
        "overhead_ipl1000": {"jax_scan_over_tpuloop_us_per_step": spread(ovh),
                             "us_per_step": {k: spread(v) for k, v in us.items()}},
        "targets": targets,
        "targets_met": {
            "embedding": None if None in emb_met else all(emb_met),
            "dlrm": None if None in [met(d["ratio"], 2.0) for d in dlrm.values()] else
            all(met(d["ratio"], 2.0) for d in dlrm.values()),
            "mlp_2": met(mlp["2"]["ratio"], 1.3),
            "overhead": met(spread(ovh), 1.0),
        },
    }
    return out


def python_figures(pick):
    """bench/python_front_end.py: the MLP trained from Python over `tpuloop
    train` of the same configuration, examples/s, per device count: the
    median ratio over the alternating rounds, its min and max (target 0.97:
    within 3 %)."""
    out = {}
    for d in (1, 2):
        r = pick("python_front_end", devices=d)
        out["python_over_cli_mlp_%d" % d] = None if r is None else {
            "ratio_median": r.get("ratio_median"), "ratio_min": r.get("ratio_min"), "ratio_max": r.get("ratio_max"),
            "python_examples_per_s": r.get("python_examples_per_s_median"),
            "cli_examples_per_s": r.get("cli_examples_per_s_median"),
            "main_config": {"ratio_median": r.get("ratio_main_config_median"),
                            "ratio_min": r.get("ratio_main_config_min"), "ratio_max": r.get("ratio_main_config_max"),
                            "examples_per_s": r.get("main_config_examples_per_s_median")}}
    met = [None if out["python_over_cli_mlp_%d" % d] is None else out["python_over_cli_mlp_%d" % d]["ratio_median"]
           >= 0.97 for d in (1, 2)]
    out["python_over_cli_target"] = 0.97
    out["python_over_cli_target_met"] = None if None in met else all(met)
    return out


def peer_model_figures(recs, pick, med, ratio):
    """tpuloop's cnn and transformer models against PyTorch 2.x and JAX
    (bench/peers/*.py in the venv of scripts/install-bench-peers), run in
    alternating rounds by run_peers.sh: per round and thread count, tpuloop's
    examples/s over the faster peer's (PyTorch's faster layout, or JAX), and
    PyTorch's transformer step time over tpuloop's; each as the median over
    the rounds with its min and max."""
    def fig(bench, rnd, t, key="threads"):
        runs = [r for r in recs if r.get("bench") == bench and r.get("round") == rnd and
                r.get(key) == t and "median" in r]
        return max(r["median"] for r in runs) if runs else None  # torch: the faster layout

    def spread(v):
        v = [x for x in v if x is not None]
        return None if not v else {"median": round(statistics.median(v), 3), "min": round(min(v), 3),
                                   "max": round(max(v), 3), "rounds": len(v)}

    rounds = sorted({r["round"] for r in recs if isinstance(r.get("round"), int)})
    out = {}
    for t in (1, 2):
        tl = [fig("tpuloop_cnn", k, t, "devices") for k in rounds]
        pt = [fig("cnn_torch", k, t) for k in rounds]
        jx = [fig("cnn_jax", k, t) for k in rounds]
        best = [None if a is None and b is None else max(x for x in (a, b) if x is not None) for a, b in zip(pt, jx)]
        tt = [fig("tpuloop_transformer", k, t, "devices") for k in rounds]
        ptt = [fig("transformer_torch", k, t) for k in rounds]
        out[str(t)] = {
            "cnn_examples_per_s": {"tpuloop": spread(tl), "torch": spread(pt), "jax": spread(jx)},
            "cnn_ratio_vs_faster_peer": spread([ratio(a, b) for a, b in zip(tl, best)]),
            "cnn_ratio_vs_torch": spread([ratio(a, b) for a, b in zip(tl, pt)]),
            "cnn_ratio_vs_jax": spread([ratio(a, b) for a, b in zip(tl, jx)]),
            "transformer_step_ms": {"tpuloop": spread(tt), "torch": spread(ptt)},
            "transformer_torch_over_tpuloop_step_time": spread([ratio(b, a) for a, b in zip(tt, ptt)]),
        }
    versions = {}
    for b in ("cnn_torch", "cnn_jax", "transformer_torch"):
        r = pick(b)
        if r is not None:
            versions.update(r.get("versions", {}))
    return {"models_vs_peers_by_threads": out, "models_vs_peers_rounds": len(rounds),
            "cnn_target": "ratio_vs_faster_peer >= 1.2 at 2 threads", "peer_versions": versions or None}


def spmd_figures(pick):
    """bench_spmd: one replica's cnn step on large images at C = 2 and 4
    cores against C = 1 (per-core activations, step time) and the issue's
    targets; the Transformer's step split by Megatron's layout at C = 2."""
    c = {k: pick("spmd", cores_per_replica=k) for k in (2, 4)}
    act4 = None if c[4] is None else c[4].get("activations_vs_c1")
    step2 = None if c[2] is None else c[2].get("step_vs_c1")
    tp, tp1 = pick("spmd_tp", cores_per_replica=2), pick("spmd_tp", cores_per_replica=1)
    return {
        "spmd_activations_vs_c1": {str(k): None if c[k] is None else c[k].get("activations_vs_c1") for k in c},
        "spmd_step_vs_c1": {str(k): None if c[k] is None else c[k].get("step_vs_c1") for k in c},
        "spmd_targets": {"activations_vs_c1_at_4": 0.3, "step_vs_c1_at_2": 0.6},
        "spmd_target_met": {"activations": None if act4 is None else act4 <= 0.3,
                            "step": None if step2 is None else step2 <= 0.6},
        # Tensor parallelism: the Transformer with Megatron's layout at C = 2.
        "spmd_tp_step_vs_c1": None if tp is None else tp.get("step_vs_c1"),
        "spmd_tp_activations_mib_per_core": None if tp is None or tp1 is None else
        {"1": tp1.get("activations_mib_per_core"), "2": tp.get("activations_mib_per_core")},
    }


def hosts_figures(pick, med, ratio):
    """bench/bench_hosts.c and torch_ddp.py: 2 hosts x 1 device over 1 x 2,
    and against DDP."""
    out = {}
    for name in ("mlp", "dlrm"):
        r = pick("hosts_" + name)
        out["hosts_%s_2x1_over_1x2" % name] = None if r is None else {
            "ratio_median": r.get("ratio_median"), "ratio_min": r.get("ratio_min"), "ratio_max": r.get("ratio_max"),
            "two_hosts_examples_per_s": r.get("two_hosts_median"),
            "one_host_examples_per_s": r.get("one_host_median")}
    r = pick("hosts_mlp")
    out["hosts_mlp_target"] = 0.9
    out["hosts_mlp_target_met"] = None if r is None else r.get("ratio_median", 0) >= 0.9
    ddp = med(pick("ddp_mlp"))
    out["ddp_mlp_examples_per_s"] = ddp
    out["hosts_mlp_2x1_over_ddp"] = ratio(None if r is None else r.get("two_hosts_median"), ddp)
    for mib in (4, 64):
        ours = pick("comm_allreduce", transport="tcp_loopback", mib=mib)
        gloo = med(pick("gloo_allreduce", mib=mib))
        mine = None if ours is None or not ours.get("tpuloop") else statistics.median(ours["tpuloop"])
        out["comm_allreduce_tcp_%dmib_over_gloo" % mib] = ratio(mine, gloo)
    return out


def comm_figures(pick):
    """bench/bench_comm.c: tpuloop's all-reduce over MPI against MPI_Allreduce,
    per transport and size: the median ratio of alternating rounds and its
    min/max, against the target 0.9."""
    out, met = {}, []
    for transport in ("shared_memory", "tcp_loopback"):
        for mib in (4, 64):
            r = pick("comm_allreduce", transport=transport, mib=mib)
            key = "comm_allreduce_%s_%dmib" % (transport, mib)
            if r is None:
                out[key] = None
                met.append(None)
                continue
            out[key] = {"ratio_median": r.get("ratio_median"), "ratio_min": r.get("ratio_min"),
                        "ratio_max": r.get("ratio_max")}
            met.append(r.get("ratio_median") is not None and r["ratio_median"] >= 0.9)
    out["comm_allreduce_target"] = 0.9
    out["comm_allreduce_target_met"] = None if None in met else all(met)
    return out


def input_figures(pick, med, ratio):
    """The input pipeline's figures (bench/bench_input.c, bench/py_input.py)."""
    def field(r, key):
        return None if r is None else r.get(key)

    crc = {f: med(pick("tpuloop_input", what="read_crc", file=f)) for f in ("large_64KiB", "criteo")}
    gz = pick("tpuloop_input", what="read_crc_gzip", file="criteo")
    tl = med(pick("tpuloop_input", what="parse_features", file="criteo"))
    py = pick("py_input", what="parse_features", file="criteo")
    r = ratio(tl, med(py))
    tf = {d: pick("tpuloop_mlp_tfrecord", devices=d, pipeline="repeat_then_shuffle") for d in (1, 2)}
    ep = pick("tpuloop_mlp_tfrecord", devices=1, pipeline="shuffle_each_epoch")
    return {
        "mlp_from_tfrecord_examples_per_s": {str(d): med(tf[d]) for d in tf},
        "mlp_from_tfrecord_infeed_wait_fraction": {str(d): field(tf[d], "infeed_wait_fraction_median") for d in tf},
        "mlp_from_tfrecord_infeed_start_fraction": {str(d): field(tf[d], "infeed_start_fraction_median")
                                                    for d in tf},
        "mlp_from_tfrecord_shuffle_each_epoch_1": {"examples_per_s": med(ep),
                                                   "infeed_wait_fraction": field(ep, "infeed_wait_fraction_median")},
        "input_read_crc_MB_per_s": crc,
        "input_read_crc_target_MB_per_s": 2000,
        "input_read_crc_target_met": None if None in crc.values() else min(crc.values()) >= 2000,
        "input_gzip_MB_per_s": {"uncompressed": med(gz), "compressed": field(gz, "compressed_MB_per_s")},
        "input_gzip_records_per_s": field(gz, "records_per_s"),
        "input_parse_records_per_s": {"tpuloop": tl, "python": med(py)},
        "input_python_protobuf": field(py, "api_implementation"),
        "input_parse_ratio": r,
        "input_parse_target": 5,
        "input_parse_target_met": None if r is None else r >= 5,
    }


def embedding_figures(recs, pick, med, ratio):
    """The embedding engine's figures (bench/bench_embedding.c, torch_embbag.py)."""
    def field(r, key):
        return None if r is None else r.get(key)

    def all_at_least(d, bound):
        v = list(d.values())
        return None if not v or None in v else min(v) >= bound

    def all_at_most(d, bound):
        v = list(d.values())
        return None if not v or None in v else max(v) <= bound

    keys = [(o, b) for o in ("sgd", "adagrad") for b in (1, 20)]
    tl = {"%s/%d" % k: pick("tpuloop_embedding", opt=k[0], bag=k[1], dist="zipf", cores=1) for k in keys}
    pt = {"%s/%d" % k: pick("torch_embbag", opt=k[0], bag=k[1], dist="zipf") for k in keys}
    trss = {}
    for o in ("sgd", "adagrad"):
        r = [x for x in recs if x.get("bench") == "torch_embbag_maxrss" and "--opts=%s" % o in x.get("args", [])]
        trss[o] = r[0].get("maxrss_mib") if r else None
    tl_lk = {k: med(tl[k]) for k in tl}
    pt_lk = {k: med(pt[k]) for k in pt}
    vs_torch = {k: ratio(tl_lk[k], pt_lk[k]) for k in tl}
    # FBGEMM's fused TBE (bench/peers/embedding_fbgemm.py) at its better thread count, and per alternating
    # round against bench_embedding's run of that round: the median ratio with its min and max.
    fb, vs_fb = {}, {}
    for o, b in keys:
        runs = [x for x in recs if x.get("bench") == "fbgemm_tbe" and x.get("opt") == o and x.get("bag") == b]
        fb["%s/%d" % (o, b)] = max(runs, key=lambda x: x.get("median", 0)) if runs else None
        per_round = []
        for rnd in sorted({x.get("round") for x in runs if x.get("round") is not None}):
            mine = [x for x in recs if x.get("bench") == "tpuloop_embedding" and x.get("round") == rnd and
                    x.get("opt") == o and x.get("bag") == b and x.get("dist") == "zipf" and x.get("cores") == 1]
            theirs = [x.get("median", 0) for x in runs if x.get("round") == rnd]
            if mine and theirs and max(theirs) > 0:
                per_round.append(mine[0].get("median", 0) / max(theirs))
        vs_fb["%s/%d" % (o, b)] = None if not per_round else {
            "ratio_median": round(statistics.median(per_round), 3), "ratio_min": round(min(per_round), 3),
            "ratio_max": round(max(per_round), 3), "rounds": len(per_round)}
    fb_lk = {k: med(fb[k]) for k in fb}
    gather = {k: field(tl[k], "gather_GBps") for k in tl}
    frac = {k: field(tl[k], "eff_fraction_of_gather") for k in tl}
    rss = {o: field(tl["%s/1" % o], "rss_over_tables") for o in ("sgd", "adagrad")}
    return {
        "emb_lookups_M_per_s": {"tpuloop": tl_lk, "torch": pt_lk, "fbgemm": fb_lk},
        "emb_ratio_vs_torch": vs_torch,
        "emb_ratio_vs_fbgemm": {k: ratio(tl_lk[k], fb_lk[k]) for k in tl},
        "emb_ratio_vs_fbgemm_rounds": vs_fb,
        "emb_fbgemm_target": 2.0,
        "emb_fbgemm_target_met": None if None in vs_fb.values() or not vs_fb else
        all(v["ratio_median"] >= 2.0 for v in vs_fb.values()),
        "emb_fbgemm_threads": {k: field(fb[k], "threads") for k in fb},
        "emb_fbgemm_fraction_of_gather": {k: ratio(field(fb[k], "eff_GBps_median"), gather[k]) for k in fb},
        "emb_eff_GBps": {"tpuloop": {k: field(tl[k], "eff_GBps_median") for k in tl},
                         "torch": {k: field(pt[k], "eff_GBps_median") for k in pt}},
        "emb_gather_GBps": gather,
        "emb_gather_4k_pages_Mrows_per_s": {k: field(tl[k], "gather_4k_pages_Mrows_per_s") for k in tl},
        "emb_fraction_of_gather": frac,
        "emb_lookup_fraction_of_gather": {k: field(tl[k], "lookup_fraction_of_gather") for k in tl},
        "emb_torch_fraction_of_gather": {k: ratio(field(pt[k], "eff_GBps_median"), gather[k]) for k in pt},
        "emb_unique_rows_per_step": {"tpuloop": {k: field(tl[k], "unique_rows_per_step") for k in tl},
                                     "torch": {k: field(pt[k], "unique_rows_per_step") for k in pt}},
        "emb_maxrss_mib": {"tpuloop": {o: field(tl["%s/1" % o], "maxrss_mib") for o in rss}, "torch": trss},
        "emb_table_mib": {o: field(tl["%s/1" % o], "table_mib") for o in rss},
        "emb_rss_over_tables": rss,
        "emb_engine_rss_over_tables": {o: field(tl["%s/1" % o], "engine_rss_over_tables") for o in rss},
        "emb_workspace_mib": {o: field(tl["%s/1" % o], "workspace_mib") for o in rss},
        "emb_targets": {"fraction_of_gather": 0.5, "ratio_vs_torch": 10, "rss_over_tables": 1.10},
        "emb_target_met": {"fraction_of_gather": all_at_least(frac, 0.5),
                           "ratio_vs_torch": all_at_least(vs_torch, 10),
                           "rss_over_tables": all_at_most(rss, 1.10)},
    }


def dlrm_figures(recs, pick, med, ratio):
    """The DLRM's figures (bench/bench_dlrm.c, torch_dlrm.py)."""
    def field(r, key):
        return None if r is None else r.get(key)

    def torch_runs(opt):
        """PyTorch's 1-thread record and its faster two-thread split."""
        runs = [r for r in recs if r.get("bench") == "torch_dlrm" and r.get("opt") == opt]
        one = [r for r in runs if r.get("torch_threads") == 1 and r.get("OPENBLAS_NUM_THREADS") == "1"]
        two = [r for r in runs if r.get("torch_threads", 0) + int(r.get("OPENBLAS_NUM_THREADS", "0")) == 3]
        return (one[0] if one else None), (max(two, key=lambda r: r["median"]) if two else None)

    def torch_rss(opt, tt, bt):
        for r in recs:
            if (r.get("bench") == "torch_dlrm_maxrss" and "--opts=%s" % opt in r.get("args", []) and
                    r.get("torch_threads") == tt and r.get("OPENBLAS_NUM_THREADS") == bt):
                return r.get("maxrss_mib")
        return None

    opts = ("adagrad", "sgd")
    tl = {o: {d: pick("tpuloop_dlrm", opt=o, devices=d) for d in (1, 2)} for o in opts}
    pt = {o: torch_runs(o) for o in opts}
    tl_eps = {o: {str(d): med(tl[o][d]) for d in (1, 2)} for o in opts}
    pt_eps = {o: {"1": med(pt[o][0]), "2": med(pt[o][1])} for o in opts}
    split = {o: None if pt[o][1] is None else
             "torch %d + OpenBLAS %s" % (pt[o][1]["torch_threads"], pt[o][1]["OPENBLAS_NUM_THREADS"]) for o in opts}
    return {
        "dlrm_examples_per_s": {"tpuloop": tl_eps, "torch": pt_eps},
        "dlrm_ratio_vs_torch": {o: {k: ratio(tl_eps[o][k], pt_eps[o][k]) for k in ("1", "2")} for o in opts},
        "dlrm_torch_2_threads_split": split,
        "dlrm_maxrss_mib": {"tpuloop": {o: {str(d): field(tl[o][d], "maxrss_mib") for d in (1, 2)} for o in opts},
                            "torch": {o: {"1": torch_rss(o, 1, "1")} for o in opts}},
    }


if __name__ == "__main__":
    main()
