#!/bin/sh
# mujoco-wheel.sh VERSION DEST — MuJoCo's C library and headers from PyPI's
# `mujoco` wheel (the build LIBERO itself runs), for `make MUJOCO=wheel` (the
# default). The wheel is a zip: DEST/lib/libmujoco.so.VERSION and
# DEST/include/mujoco/*.h are taken from it; nothing else of it is used.
# Uses the LIBERO venv's copy when it has the same version (no download).
# Failure says what is missing and how to build with Debian's 2.2.2 instead.
set -eu
V=$1
DEST=$2
PY=${LIBERO_PYTHON:-/usr/bin/python3}
die() { echo "mujoco-wheel: error: $*" >&2; echo "mujoco-wheel: or build with Debian's MuJoCo: apt-get install libmujoco-dev && make MUJOCO=debian" >&2; exit 1; }
[ -f "$DEST/lib/libmujoco.so.$V" ] && [ -f "$DEST/include/mujoco/mujoco.h" ] && exit 0
tmp=$(mktemp -d "${TMPDIR:-/tmp}/rlrt-mujoco.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
src=""
for venv in build/venv-libero; do
    d="$venv/lib/python3.11/site-packages/mujoco"
    if [ -f "$d/libmujoco.so.$V" ] && [ -f "$d/include/mujoco/mujoco.h" ]; then src=$d; fi
done
if [ -z "$src" ]; then
    [ -x "$PY" ] || die "$PY not found (apt-get install python3 python3-venv)"
    echo "mujoco-wheel: downloading PyPI mujoco==$V (the C library only is used)"
    "$PY" -m venv "$tmp/venv" >/dev/null 2>&1 || die "python3 -m venv failed (apt-get install python3-venv)"
    "$tmp/venv/bin/pip" download --disable-pip-version-check -q --no-deps --only-binary=:all: \
        -d "$tmp/wheel" "mujoco==$V" || die "pip could not download mujoco==$V from PyPI"
    whl=$(ls "$tmp"/wheel/mujoco-*.whl | head -1)
    "$PY" - "$whl" "$tmp/x" <<'PY' || die "cannot unpack $whl"
import sys, zipfile
z = zipfile.ZipFile(sys.argv[1])
z.extractall(sys.argv[2], [n for n in z.namelist() if n.startswith("mujoco/libmujoco.so") or n.startswith("mujoco/include/")])
PY
    src="$tmp/x/mujoco"
fi
mkdir -p "$DEST/lib" "$DEST/include"
cp "$src/libmujoco.so.$V" "$DEST/lib/"
rm -rf "$DEST/include/mujoco"
cp -r "$src/include/mujoco" "$DEST/include/"
echo "mujoco-wheel: MuJoCo $V C library in $DEST"
