#!/bin/sh
# `make bench-faults`: every role killed inside every phase of the rlvr, libero_rl and
# diffusion recipes; writes its section of docs/RESULTS.md (bench/bench_faults.py).
exec "${PYTHON:-/usr/bin/python3}" "$(dirname "$0")/bench_faults.py" "$@"
