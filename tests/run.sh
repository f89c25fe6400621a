#!/bin/bash
# tests/run.sh — runs every test and ends with "N passed, N failed, N skipped".
#
# * build/tests/test_*: cmocka binaries, run with TAP output; each test case
#   counts. A binary that dies before reporting all its cases counts the
#   missing ones as failed.
# * tests/integration/*.sh and *.py: one case each; exit 0 = pass,
#   77 = skipped (the script prints why), anything else = fail.
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
    name=$(basename "$bin")
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
    name=$(basename "$script")
    log="$logdir/$name.log"
    case "$script" in
    *.py)
        if [ ! -x "$PYTHON" ]; then
            echo "$name: skipped ($PYTHON not found)"; skipped=$((skipped + 1)); return
        fi
        timeout "${RL_TEST_TIMEOUT:-600}" "$PYTHON" "$script" >"$log" 2>&1 ;;
    *) timeout "${RL_TEST_TIMEOUT:-600}" bash "$script" >"$log" 2>&1 ;;
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

if [ ${#failures[@]} -gt 0 ]; then
    echo "failures:"
    printf '  %s\n' "${failures[@]}"
fi
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" = 0 ]
