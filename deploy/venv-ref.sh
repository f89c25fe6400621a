#!/bin/sh
# venv-ref.sh — `make venv-ref`: the Python venv of the reference generators
# (tests/reference/gen_*.py) and the format cross-checks
# (tests/integration/tensorboard_read.py).
#
#   deploy/venv-ref.sh VENV REQUIREMENTS
#
# Creates VENV with /usr/bin/python3 -m venv --system-site-packages (Debian's
# python3-torch and python3-numpy stay visible), pip-installs REQUIREMENTS,
# checks that every package imports, and only then writes VENV/.requirements
# (the stamp make compares with REQUIREMENTS). Exits 1 with a message when
# python3-venv is missing or PyPI cannot be reached.
set -u
venv=${1:?usage: venv-ref.sh VENV REQUIREMENTS}
req=${2:?usage: venv-ref.sh VENV REQUIREMENTS}
py=${RL_VENV_BASE_PYTHON:-/usr/bin/python3}
t0=$(date +%s)
say() { echo "venv-ref: $*"; }

if [ ! -x "$py" ]; then
    say "$py not found; install python3 (apt-get install python3 python3-venv)"
    exit 1
fi
if ! "$py" -c 'import venv, ensurepip' 2>/dev/null; then
    say "$py cannot create a venv with pip; install python3-venv"
    say "  (deploy/install-deps.sh --ref installs it, with python3-numpy and python3-torch)"
    exit 1
fi

rm -f "$venv/.requirements"
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c 'import sys' 2>/dev/null; then
    say "creating $venv ($py -m venv --system-site-packages)"
    rm -rf "$venv"
    "$py" -m venv --system-site-packages "$venv" || { say "creating the venv failed"; exit 1; }
fi

# The index pip will use (PIP_INDEX_URL or pip.conf), probed first so that a
# machine without network gets one clear line instead of pip's retries.
index=$("$venv/bin/python" -m pip config get global.index-url 2>/dev/null || true)
index=${PIP_INDEX_URL:-${index:-https://pypi.org/simple}}
say "checking that $index is reachable"
if ! "$venv/bin/python" - "$index" <<'PY'
import sys, urllib.request
url = sys.argv[1].rstrip("/") + "/pip/"
try:
    urllib.request.urlopen(url, timeout=20).read(1)
except Exception as e:  # noqa: BLE001 — any failure means: no index
    print(f"venv-ref: cannot reach the package index {url}: {e}", file=sys.stderr)
    sys.exit(1)
PY
then
    say "PyPI is unreachable from here; make venv-ref needs it to install:"
    grep -v '^ *#' "$req" | sed -n 's/^\([^ #]*\).*/    \1/p'
    say "make test needs it: run \`make venv-ref\` again once PyPI is reachable"
    exit 1
fi

say "installing $(grep -v '^ *#' "$req" | sed -n 's/^\([^ #]*\).*/\1/p' | tr '\n' ' ')"
"$venv/bin/python" -m pip install --progress-bar off --disable-pip-version-check \
    -r "$req" || { say "pip install failed (see above)"; exit 1; }

say "checking the imports"
# RL_VENV_IMPORTS: the modules to check (make venv-deploy names its own)
RL_VENV_IMPORTS=${RL_VENV_IMPORTS:-tensorboard tokenizers transformers safetensors numpy} \
"$venv/bin/python" - <<'PY' || { say "a package does not import (see above)"; exit 1; }
import importlib, os
names = os.environ["RL_VENV_IMPORTS"].split()
for name in names:
    m = importlib.import_module(name)
    print(f"venv-ref:   {name} {getattr(m, '__version__', '?')} ({m.__file__})")
try:
    if "numpy" not in names:
        raise SystemExit(0)  # not the reference venv: torch is not wanted
    import torch
    print(f"venv-ref:   torch {torch.__version__} (Debian python3-torch)")
except ImportError:
    print("venv-ref:   torch not installed (python3-torch): the generators need it, "
          "tensorboard_read.py does not")
PY
cp "$req" "$venv/.requirements"
say "ready: $venv/bin/python ($(($(date +%s) - t0)) s)"
