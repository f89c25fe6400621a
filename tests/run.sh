#!/bin/bash
# tests/run.sh — runs every test and ends with "N passed, N failed, N skipped".
#
# * build/tests/test_*: cmocka binaries, run with TAP output; each test case
#   counts. A binary that dies before reporting all its cases counts the
#   missing ones as failed.
# * tests/integration/*.sh and *.py: one case each; exit 0 = pass,
#   77 = skipped (the script prints why), anything else = fail.
# * EMU_BUILD (a `make CUDA=emu` tree): the GPU tests on the host emulation
#   of CUDA, as emu_* (see the end of this file).
#
# RL_TEST_FILTER=regex runs only matching binaries/scripts.
set -u
BUILD=${BUILD:-build}
PYTHON=${PYTHON:-/usr/bin/python3}
export BUILD PYTHON
filter=${RL_TEST_FILTER:-.}
passed=0 failed=0 skipped=0
failures=()
logdir="$BUILD/test-logs"
mkdir -p "$logdir"

run_tap() {
    local bin=$1 name log plan=0 seen=0 p=0 f=0 s=0
    name=${2:-$(basename "$bin")}
    log="$logdir/$name.log"
    CMOCKA_MESSAGE_OUTPUT=TAP timeout "${RL_TEST_TIMEOUT:-600}" "$bin" >"$log" 2>&1
    local rc=$?
    while IFS= read -r line; do
        case "$line" in
        1..*) plan=$((plan + ${line#1..})) ;;
        "not ok "*"# SKIP"*) s=$((s + 1)); seen=$((seen + 1)) ;;
        "not ok "*) f=$((f + 1)); seen=$((seen + 1)); failures+=("$name: ${line#not ok }") ;;
        "ok "*) p=$((p + 1)); seen=$((seen + 1)) ;;
        esac
    done <"$log"
    if [ "$seen" -lt "$plan" ]; then
        f=$((f + plan - seen))
        failures+=("$name: died after $seen of $plan cases (exit $rc)")
    elif [ "$plan" = 0 ] && [ "$rc" != 0 ]; then
        f=$((f + 1))
        failures+=("$name: exit $rc before reporting")
    fi
    passed=$((passed + p)); failed=$((failed + f)); skipped=$((skipped + s))
    printf '%-40s %3d passed %3d failed %3d skipped\n' "$name" "$p" "$f" "$s"
    if [ "$f" -gt 0 ]; then sed 's/^/    | /' "$log" | grep -v '^    | ok ' | tail -40; fi
}

run_script() {
    local script=$1 name log rc
    name=${2:-$(basename "$script")}
    log="$logdir/$name.log"
    case "$script" in
    *.py)
        if [ ! -x "$PYTHON" ]; then
            echo "$name: skipped ($PYTHON not found)"; skipped=$((skipped + 1)); return
        fi
        timeout "${RL_TEST_TIMEOUT:-600}" "$PYTHON" "$script" >"$log" 2>&1 ;;
    *.sh) timeout "${RL_TEST_TIMEOUT:-600}" bash "$script" >"$log" 2>&1 ;;
    *) timeout "${RL_TEST_TIMEOUT:-600}" "$script" >"$log" 2>&1 ;;
    esac
    rc=$?
    if [ $rc = 0 ]; then
        passed=$((passed + 1)); printf '%-40s pass\n' "$name"
    elif [ $rc = 77 ]; then
        skipped=$((skipped + 1)); printf '%-40s skipped: %s\n' "$name" "$(tail -1 "$log")"
    else
        failed=$((failed + 1)); failures+=("$name: exit $rc")
        printf '%-40s FAIL (exit %d)\n' "$name" $rc; sed 's/^/    | /' "$log" | tail -40
    fi
}

for bin in "$BUILD"/tests/test_*; do
    [ -x "$bin" ] || continue
    [[ $(basename "$bin") =~ $filter ]] || continue
    run_tap "$bin"
done
for script in tests/integration/*.sh tests/integration/*.py; do
    [ -f "$script" ] || continue
    [[ $(basename "$script") =~ $filter ]] || continue
    run_script "$script"
done

# The GPU tests again on the host emulation of CUDA (tests/cuda_emu/; `make
# test` builds EMU_BUILD with `make CUDA=emu`): the kernels, the device
# table, CUDA IPC and the GPU jobs run here without a GPU, named emu_*.
emu_tests="test_nn_cuda test_nn_lm_cuda test_nn_flow_cuda test_nn_conv_cuda test_nn_cuda_ipc test_channel_ipc"
if [[ emu_selftest =~ $filter ]] || [[ $emu_tests =~ $filter ]] || [[ gpu_jobs.py =~ $filter ]]; then
    if [ -z "${EMU_BUILD:-}" ] || [ ! -f "$EMU_BUILD/CUDA_EMU" ]; then
        skipped=$((skipped + 1))
        printf '%-40s skipped: %s\n' "emu_*" "no host-emulation build (EMU_BUILD=${EMU_BUILD:-}; make test builds it, not the SANITIZE or CUDA=1 flavours)"
    else
        [[ emu_selftest =~ $filter ]] && run_script "$EMU_BUILD/tests/emu_selftest" emu_selftest
        for t in $emu_tests; do
            [[ $t =~ $filter ]] && run_tap "$EMU_BUILD/tests/$t" "emu_$t"
        done
        # the threads of a block the other way round between barriers: an
        # unsynchronised read of another thread's write changes its value
        [[ test_nn_cuda =~ $filter ]] &&
            RL_CUDA_EMU_ORDER=reverse run_tap "$EMU_BUILD/tests/test_nn_cuda" emu_test_nn_cuda_reverse
        [[ test_nn_conv_cuda =~ $filter ]] &&
            RL_CUDA_EMU_ORDER=reverse run_tap "$EMU_BUILD/tests/test_nn_conv_cuda" emu_test_nn_conv_cuda_reverse
        [[ gpu_jobs.py =~ $filter ]] && BUILD=$EMU_BUILD run_script tests/integration/gpu_jobs.py emu_gpu_jobs.py
    fi
fi

if [ ${#failures[@]} -gt 0 ]; then
    echo "failures:"
    printf '  %s\n' "${failures[@]}"
fi
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" = 0 ]
