#!/bin/sh
# The default local job of `make run` (filled in as the project grows).
echo "rlrt: no demo yet"; exit 1
