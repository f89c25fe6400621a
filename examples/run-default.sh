#!/bin/sh
# The default local job of `make run`. Until the first training recipe lands
# it runs the most complete demo there is:
#   1. the cluster selftest: rl-driver spawns every role of
#      examples/cluster-local.yaml as rl-worker daemons and checks every
#      dispatch mode, errors and overlap over the real control plane;
#   2. the wire demo: DataProto batches to a forked worker that computes GRPO
#      group-normalised advantages.
set -e
BUILD=${BUILD:-build}
"$BUILD/bin/rl-driver" --cluster examples/cluster-local.yaml --config examples/selftest.yaml \
    --log-level warn "$@"
exec "$BUILD/bin/rl-wire-demo" "${RL_DEMO_STEPS:-3}"
