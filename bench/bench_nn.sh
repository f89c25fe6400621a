#!/bin/bash
# bench_nn.sh — rlrt NN engine vs PyTorch CPU on the same LM config, same
# thread count, measured in the same run (see bench/bench_nn.c and
# bench/bench_nn_torch.py). Prints `bench: <name> = <value>` lines, ending with
#   nn_train_vs_torch  (target >= 1.0)
#   nn_gen_vs_torch    (target >= 2.0)
#   nn_gemm_efficiency (target >= 0.6)
set -u
BUILD=${BUILD:-build}
PYTHON=${PYTHON:-/usr/bin/python3}
export RL_BENCH_THREADS=${RL_BENCH_THREADS:-$(nproc)}
export OMP_NUM_THREADS=$RL_BENCH_THREADS
val() { echo "$1" | sed -n "s/^\(bench: \)\?$2 = //p" | head -1; }
# The machine may be shared: ours runs before AND after PyTorch, and the
# better of the two runs is compared, so neither side gets only the quiet or
# only the busy minutes.
ours=$("$BUILD/bench/bench_nn") || { echo "bench_nn failed"; exit 1; }
echo "$ours"
# Debian's PyTorch calls the pthread OpenBLAS through libblas: run it with
# OpenBLAS at the same thread count (its default) and at 1 thread (no second
# pool beside torch's OpenMP one), and compare against the faster of the two.
t_def=$("$PYTHON" "$(dirname "$0")/bench_nn_torch.py" 2>&1)
rc1=$?
t_one=$(OPENBLAS_NUM_THREADS=1 "$PYTHON" "$(dirname "$0")/bench_nn_torch.py" 2>&1)
rc2=$?
ours2=$("$BUILD/bench/bench_nn") || { echo "bench_nn failed"; exit 1; }
echo "$ours2" | sed -n 's/^bench: \(nn_[a-z0-9_]*\) = /bench: \1_run2 = /p'
if [ $rc1 = 0 ] && [ $rc2 = 0 ]; then
    ot=$(awk -v a="$(val "$ours" nn_train_tokens_per_s)" -v b="$(val "$ours2" nn_train_tokens_per_s)" 'BEGIN { print (a > b ? a : b) }')
    og=$(awk -v a="$(val "$ours" nn_gen_tokens_per_s)" -v b="$(val "$ours2" nn_gen_tokens_per_s)" 'BEGIN { print (a > b ? a : b) }')
    for k in train gen; do
        a=$(val "$t_def" torch_${k}_tokens_per_s); b=$(val "$t_one" torch_${k}_tokens_per_s)
        echo "bench: torch_${k}_tokens_per_s_openblas_${RL_BENCH_THREADS}t = $a"
        echo "bench: torch_${k}_tokens_per_s_openblas_1t = $b"
    done
    tt=$(awk -v a="$(val "$t_def" torch_train_tokens_per_s)" -v b="$(val "$t_one" torch_train_tokens_per_s)" 'BEGIN { print (a > b ? a : b) }')
    tg=$(awk -v a="$(val "$t_def" torch_gen_tokens_per_s)" -v b="$(val "$t_one" torch_gen_tokens_per_s)" 'BEGIN { print (a > b ? a : b) }')
    echo "bench: torch_train_tokens_per_s = $tt"
    echo "bench: torch_gen_tokens_per_s = $tg"
    awk -v a="$ot" -v b="$tt" 'BEGIN { printf "bench: nn_train_vs_torch = %.3f\n", a / b }'
    awk -v a="$og" -v b="$tg" 'BEGIN { printf "bench: nn_gen_vs_torch = %.3f\n", a / b }'
else
    echo "bench: nn_train_vs_torch = n/a (PyTorch run failed: $(echo "$t_def$t_one" | tail -1))"
    echo "bench: nn_gen_vs_torch = n/a"
fi
