#!/bin/sh
# mpi.sh BUILD — the estimator over 2 MPI processes of 2 replicas each under
# ThreadSanitizer (make tsan): BROADCAST relays and PER_HOST_V2 evaluation
# through the C API (tests/mpi/estimator_check.c), and DLRM's embedding
# engine over hosts through the command. Each launch is bounded by timeout
# and has no standard input; the script fails when a launch fails or
# ThreadSanitizer reports anything (Open MPI's own set-up is suppressed:
# tests/tsan/mpi.supp).
set -u
B=$1
export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 report_signal_unsafe=0 suppressions=$(pwd)/tests/tsan/mpi.supp"
MPIRUN="mpirun --allow-run-as-root --oversubscribe -np 2"
rc=0
run() {
    echo "-- $*"
    timeout -k 5 600 $MPIRUN "$@" </dev/null || rc=1
}
run "$B/tests/mpi_estimator_check" BROADCAST 2 2 mpi
run "$B/tests/mpi_estimator_check" PER_HOST_V2 2 2 mpi
run "$B/bin/tpuloop" train examples/dlrm_synthetic.json --synthetic_examples=8192 --synthetic_eval_examples=1024 \
    --train_steps=20 --iterations_per_loop=10 --train_batch_size=64 --eval_batch_size=64 --eval_steps=2 \
    --per_host_input_for_training=PER_HOST_V2 --log_step_count_steps=1000 --devices=2
exit $rc
