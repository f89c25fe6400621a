#!/bin/bash
# The C LIBERO-Object env against LIBERO's own Python env (robosuite 1.4):
# random and expert action sequences from the same initial states of three
# tasks, compared step by step (tests/reference/libero_equiv.py says how and
# with which tolerances). Needs the scenes and the LIBERO venv.
. "$(dirname "$0")/lib.bash"
DATA=${LIBERO_DATA:-build/libero-data}
VENV=${LIBERO_VENV:-build/venv-libero}
[ -f "$DATA/manifest.json" ] || skip "no LIBERO-Object data in $DATA; run: make libero-data"
[ -x "$VENV/bin/python" ] || skip "no LIBERO venv in $VENV; run: make libero-data"
[ -x "$BIN/rl-libero" ] || fail "$BIN/rl-libero is not built"
MUJOCO_GL=disable "$VENV/bin/python" tests/reference/libero_equiv.py "$BUILD" "$DATA" \
    --tasks "${LIBERO_EQUIV_TASKS:-0,4,9}" --inits "${LIBERO_EQUIV_INITS:-0,23}" 2>&1 |
    grep -v -e 'robosuite WARNING' -e '^\[info\]'
exit "${PIPESTATUS[0]}"
