#!/bin/sh
# The default local job of `make run`: until the first training recipe exists,
# a driver process and a forked worker exchange DataProto batches over
# tcp://127.0.0.1 and the worker computes GRPO group-normalised advantages.
set -e
BUILD=${BUILD:-build}
exec "$BUILD/bin/rl-wire-demo" "${RL_DEMO_STEPS:-3}"
