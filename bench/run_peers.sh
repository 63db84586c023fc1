#!/bin/sh
# run_peers.sh — the PyTorch peers of tpuloop's benchmarks, run in the same
# `make bench` so that every ratio compares figures taken on this machine at
# the same moment. Prints the peers' own JSON lines (one per figure, with the
# median of their repetitions) and one line of peak resident memory per
# PyTorch MLP, EmbeddingBag or DLRM process. The peers live outside the
# repository, in the shared folder beside it (shared/bench/); where they or
# Debian's python3-torch are missing, one "skipped" line says so and the
# script still succeeds.
#
# Threads: torch_mlp.py sets torch's intra-op threads (--threads); OpenBLAS,
# torch's BLAS here, takes its own count from OPENBLAS_NUM_THREADS, so each
# run names both. One thread is torch 1 + OpenBLAS 1. For two threads both
# splits are run — torch 1 + OpenBLAS 2 (the best one in shared/bench/README.md)
# and torch 2 + OpenBLAS 1 — and summary.py takes the faster as PyTorch's
# two-thread figure; torch 2 + OpenBLAS 2 oversubscribes the two cores and is
# much slower, so it is not run. OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE are
# left as the environment has them; the lines record OPENBLAS_CORETYPE.
#
# EmbeddingBag: torch_embbag.py with sparse SGD and sparse Adagrad on the
# workload of bench/bench_embedding.c (8 tables x 1,000,000 x 64, batch 4096,
# Zipf ids, bags of 1 and 20 ids), one thread, one process per optimizer so
# that each peak RSS is its own. The random-row gather bandwidth these are
# held against is not run here (this script builds no C peers):
# bench_embedding measures it in its own processes, as shared/bench/gather.c's
# mode 0 does.
#
# DLRM: torch_dlrm.py (13 dense features, 26 tables of 100,000 x 64, dot
# interaction, batch 2048) against bench/bench_dlrm.c, one process per
# optimizer (Adagrad, SGD) so that each peak RSS is its own, at one thread
# (torch 1 + OpenBLAS 1) and at both two-thread splits, as for the MLP;
# summary.py takes the faster split as PyTorch's two-thread figure.
#
# Environment: TPULOOP_BENCH_PYTHON (default /usr/bin/python3, Debian's, which
# has torch), TPULOOP_BENCH_PEERS (default: shared/bench beside the repository,
# then /work/shared/bench), TPULOOP_BENCH_EPOCHS (default 6: the first epoch
# is the peer's warm-up, the other 5 its repetitions).
#
# Then the peers of bench/peers/ (PyTorch 2.x and JAX from PyPI, in the venv
# of scripts/install-bench-peers, TPULOOP_BENCH_VENV): cnn_torch.py and
# cnn_jax.py (examples/s on tpuloop's cnn model, batch 128 per device;
# PyTorch in both layouts, NCHW and channels_last, and summary.py takes the
# faster) and transformer_torch.py (ms per step on tpuloop's transformer
# model), each at 1 and 2 threads, one process per figure; each pins itself to that many CPUs
# and sets its library's thread counts (bench/peers/peer_util.py). Where
# `install-bench-peers --check` fails, one "skipped" line says so. Their step
# counts: TPULOOP_BENCH_PEER_STEPS, _REPS, _WARMUP (bench/peers/peer_util.py).
# Then FBGEMM's fused CPU TableBatchedEmbedding (embedding_fbgemm.py, what
# TorchRec wraps on CPU) on bench_embedding's workload at 1 and 2 threads,
# in rounds with bench_embedding (1 and 2 cores); then, in rounds again, the
# MLP, the step overhead and the DLRM beside JAX, Keras 3 and PyTorch 2.x
# (mlp_jax.py, mlp_keras.py, mlp_torch2.py, overhead_jax.py, dlrm_torch2.py).
set -u

here=$(cd "$(dirname "$0")" && pwd)
PY=${TPULOOP_BENCH_PYTHON:-/usr/bin/python3}
EPOCHS=${TPULOOP_BENCH_EPOCHS:-6}
PEERS=${TPULOOP_BENCH_PEERS:-}
if [ -z "$PEERS" ]; then
    for d in "$here/../../shared/bench" "$here/../shared/bench" /work/shared/bench; do
        if [ -f "$d/torch_mlp.py" ]; then
            PEERS=$(cd "$d" && pwd)
            break
        fi
    done
fi

skip() {
    printf '{"bench": "torch_peers", "skipped": "%s"}\n' "$1"
}

# peer TORCH_THREADS BLAS_THREADS SCRIPT ARGS... — runs one peer script in its
# own Python process; with RSS=1 also prints that process's ru_maxrss. Under a
# timeout of 30 minutes for the process and what it spawned (torch_ddp.py's
# rank 1 once spun for good after the run's figures were out).
peer() {
    tt=$1 bt=$2 script=$3
    shift 3
    OPENBLAS_NUM_THREADS=$bt OMP_NUM_THREADS=$bt RSS=${RSS:-0} TT=$tt timeout -k 30 1800 "$PY" -c '
import json, os, resource, runpy, sys
script = sys.argv[1]
sys.argv = sys.argv[1:]
runpy.run_path(script, run_name="__main__")
if os.environ["RSS"] == "1":
    kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"bench": os.path.basename(script)[:-3] + "_maxrss", "torch_threads": int(os.environ["TT"]),
                      "OPENBLAS_NUM_THREADS": os.environ["OPENBLAS_NUM_THREADS"], "maxrss_mib": round(kib / 1024, 1),
                      "args": sys.argv[1:]}),
          flush=True)
' "$PEERS/$script" --threads="$tt" "$@" || echo "{\"bench\": \"$script\", \"failed\": \"torch $tt / OpenBLAS $bt\"}"
}

debian_torch_peers() {
    if [ -z "$PEERS" ] || ! [ -f "$PEERS/torch_mlp.py" ]; then
        skip "no shared/bench/torch_mlp.py found (set TPULOOP_BENCH_PEERS)"
        return 0
    fi
    if ! "$PY" -c 'import torch, numpy' 2>/dev/null; then
        skip "$PY cannot import torch and numpy (Debian's python3-torch)"
        return 0
    fi
    RSS=1 peer 1 1 torch_mlp.py --opt=adam --seeds=0 --epochs="$EPOCHS"
    RSS=1 peer 1 2 torch_mlp.py --opt=adam --seeds=0 --epochs="$EPOCHS"
    RSS=1 peer 2 1 torch_mlp.py --opt=adam --seeds=0 --epochs="$EPOCHS"
    peer 1 1 torch_overhead.py --steps=5000 --reps=5
    RSS=1 peer 1 1 torch_embbag.py --opts=sgd --dists=zipf --bags=1,20
    RSS=1 peer 1 1 torch_embbag.py --opts=adagrad --dists=zipf --bags=1,20
    # DDP over 2 processes (gloo on loopback): the all-reduce and the MLP of
    # bench_hosts' 2 x 1 run, 1 thread each.
    peer 1 1 torch_ddp.py --parts=allreduce,mlp --reps=5 --epochs="$EPOCHS"
    for opt in adagrad sgd; do
        RSS=1 peer 1 1 torch_dlrm.py --opts="$opt"
        RSS=1 peer 1 2 torch_dlrm.py --opts="$opt"
        RSS=1 peer 2 1 torch_dlrm.py --opts="$opt"
    done
}

# PyTorch 2.x and JAX from the venv of scripts/install-bench-peers.
venv_peers() {
    venv=${TPULOOP_BENCH_VENV:-$HOME/.cache/tpuloop/bench-venv}
    if ! TPULOOP_BENCH_VENV=$venv "$here/../scripts/install-bench-peers" --check; then
        printf '{"bench": "venv_peers", "skipped": "%s"}\n' \
            "no complete venv at $venv: run scripts/install-bench-peers (PyTorch 2.x and JAX from PyPI)"
        return 0
    fi
    models=${TPULOOP_BENCH_MODELS:-}
    [ -x "$models" ] || echo '{"bench": "tpuloop_models", "skipped": "TPULOOP_BENCH_MODELS is not bench_models (make bench sets it)"}'
    # Alternating rounds: in each, at 1 then 2 threads, tpuloop then every
    # peer on the same model, so a drift of the machine hits them alike; the
    # lines carry "round" and summary.py reports each ratio's median and its
    # min-max over the rounds.
    rounds=${TPULOOP_BENCH_ROUNDS:-3}
    # The peers' step counts, when set, hold for tpuloop too (else each side's defaults).
    counts=""
    if [ -n "${TPULOOP_BENCH_PEER_STEPS:-}" ]; then
        counts="$TPULOOP_BENCH_PEER_STEPS ${TPULOOP_BENCH_PEER_REPS:-5} 1"
    fi
    r=1
    while [ "$r" -le "$rounds" ]; do
        for threads in 1 2; do
            for run in "tpuloop cnn" "cnn_torch.py --layout=nchw" "cnn_torch.py --layout=nhwc" cnn_jax.py \
                       "tpuloop transformer" transformer_torch.py; do
                script=${run%% *}
                if [ "$script" = tpuloop ]; then
                    [ -x "$models" ] || continue
                    # pinned to the first CPUs, as the peers pin themselves
                    # shellcheck disable=SC2086
                    taskset -c "0-$((threads - 1))" "$models" "${run#tpuloop }" "$threads" $counts ||
                        echo "{\"bench\": \"tpuloop_models\", \"failed\": \"${run#tpuloop } $threads\"}"
                else
                    # shellcheck disable=SC2086
                    "$venv/bin/python" "$here/peers/"$run --threads="$threads" ||
                        echo "{\"bench\": \"${script%.py}\", \"failed\": \"$run --threads=$threads\"}"
                fi
            done
        done | sed "s/^{/{\"round\": $r, /"
        r=$((r + 1))
    done
    # FBGEMM's fused TBE on bench_embedding's workload, at 1 and 2 threads
    # (summary.py takes its better one per optimizer and bag), one process
    # per optimizer so that each peak RSS is its own; in alternating rounds
    # with bench_embedding itself (beside bench_models in the build), whose
    # lines carry the round too.
    emb="$(dirname "${models:-.}")/bench_embedding"
    r=1
    while [ "$r" -le "$rounds" ]; do
        {
            if [ -x "$emb" ]; then
                "$emb" | grep '"tpuloop_embedding"' ||
                    echo '{"bench": "tpuloop_embedding", "failed": "bench_embedding"}'
            fi
            for threads in 1 2; do
                for opt in sgd adagrad; do
                    "$venv/bin/python" "$here/peers/embedding_fbgemm.py" --threads="$threads" --opts="$opt" ||
                        printf '{"bench": "fbgemm_tbe", "failed": "--threads=%s --opts=%s"}\n' "$threads" "$opt"
                done
            done
        } | sed "s/^{/{\"round\": $r, /"
        r=$((r + 1))
    done
    # The MLP, the step overhead and the DLRM beside their strongest modern
    # peers, in alternating rounds (summary.py's vs_best_peer): tpuloop's MLP
    # (bench_models mlp: one epoch per call, global batch 128) at 1 and 2
    # cores (2 as 2 replicas and as 1 replica on 2 intra-op threads), then
    # JAX (jit of lax.scan), Keras 3 (steps_per_execution) and PyTorch 2.x
    # (torch.compile) at 1 and 2 threads; bench_overhead and JAX's
    # scan of 1000 tiny steps; bench_dlrm at 2 devices and PyTorch 2.x's DLRM
    # with FBGEMM's fused TBE and with nn.EmbeddingBag at 2 threads.
    dir=$(dirname "${models:-.}")
    r=1
    while [ "$r" -le "$rounds" ]; do
        {
            for threads in 1 2; do
                # At 2 cores both layouts: 2 replicas of 1 thread, and 1
                # replica on 2 intra-op threads.
                layouts=$threads
                [ "$threads" -eq 2 ] && layouts="2 1x2"
                for layout in $layouts; do
                    if [ -x "$models" ]; then
                        taskset -c "0-$((threads - 1))" "$models" mlp "$layout" ||
                            echo "{\"bench\": \"tpuloop_mlp_rounds\", \"failed\": \"mlp $layout\"}"
                    fi
                done
                for p in mlp_jax.py mlp_keras.py mlp_torch2.py; do
                    "$venv/bin/python" "$here/peers/$p" --threads="$threads" ||
                        echo "{\"bench\": \"${p%.py}\", \"failed\": \"--threads=$threads\"}"
                done
            done
            if [ -x "$dir/bench_overhead" ]; then
                "$dir/bench_overhead" || echo '{"bench": "tpuloop_overhead", "failed": "bench_overhead"}'
            fi
            "$venv/bin/python" "$here/peers/overhead_jax.py" --threads=1 ||
                echo '{"bench": "overhead_jax", "failed": "--threads=1"}'
            if [ -x "$dir/bench_dlrm" ]; then
                "$dir/bench_dlrm" --devices=2 || echo '{"bench": "tpuloop_dlrm", "failed": "--devices=2"}'
            fi
            for opt in adagrad sgd; do
                for e in tbe embbag; do
                    "$venv/bin/python" "$here/peers/dlrm_torch2.py" --threads=2 --opt="$opt" --emb="$e" ||
                        echo "{\"bench\": \"dlrm_torch2\", \"failed\": \"--threads=2 --opt=$opt --emb=$e\"}"
                done
            done
        } | sed "s/^{/{\"round\": $r, /"
        r=$((r + 1))
    done
}

debian_torch_peers
venv_peers
exit 0
