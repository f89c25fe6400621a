"""asan_preload.py — a Python test that loads a sanitizer build of
librlrt.so through ctypes needs the ASan runtime loaded before anything
else, and the interpreter is not built with it: reexec_if_needed(so) runs
this script again under the same interpreter with libasan (and libubsan)
in LD_PRELOAD when `so` is such a build. It returns when nothing needs
doing, and exits 77 (skipped, with the reason) when no runtime is found."""
import os
import subprocess
import sys


def reexec_if_needed(so):
    with open(so, "rb") as f:
        asan = b"libasan.so" in f.read()
    if not asan or "libasan" in os.environ.get("LD_PRELOAD", ""):
        return
    pre = []
    for name in ("libasan.so", "libubsan.so"):
        try:
            p = subprocess.run(["gcc", "-print-file-name=" + name], capture_output=True,
                               text=True).stdout.strip()
        except OSError:
            p = ""
        if os.path.isabs(p) and os.path.exists(p):
            pre.append(os.path.realpath(p))
    if not pre:
        print("skipped: sanitizer build and no libasan to preload")
        sys.exit(77)
    env = dict(os.environ, LD_PRELOAD=" ".join(pre),
               ASAN_OPTIONS="detect_leaks=0:" + os.environ.get("ASAN_OPTIONS", ""))
    os.execve(sys.executable, [sys.executable] + sys.argv, env)
