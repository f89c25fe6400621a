#!/bin/sh
# `make bench-faults`: random kills during short GRPO jobs (bench/bench_faults.py).
exec "${PYTHON:-/usr/bin/python3}" "$(dirname "$0")/bench_faults.py" "$@"
