"""tensorboard_read.py — TensorBoard reads what rlrt's metrics sink writes.

Loads $BUILD/lib/librlrt.so with ctypes, runs the rl_metrics sink in a
temporary output directory (steps 1..6 with real wall-clock times, then a
resume from step 3 that logs 4..8), and reads <dir>/tensorboard with
TensorBoard's EventAccumulator and LegacyEventFileLoader (CRC-checked):
every scalar must be the float32 of what was logged, each step once, and
metrics.jsonl must hold the same values. Also checks the event file name
(events.out.tfevents.<seconds>.<host>) and the first record's file_version.

Exit 0 = pass, 77 = skipped (librlrt.so not built, or the `tensorboard`
package is available neither to this Python nor in the reference venv:
$RL_REF_PYTHON, else <repo>/build/venv-ref made by `make venv-ref`).
"""
import ctypes as C
import json
import os
import re
import shutil
import socket
import struct
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
try:
    import tensorboard  # noqa: F401
except ImportError:
    alt = os.environ.get("RL_REF_PYTHON") or os.path.join(ROOT, "build", "venv-ref", "bin",
                                                          "python")
    if os.path.exists(alt) and not os.environ.get("RL_TB_REEXEC"):
        os.environ["RL_TB_REEXEC"] = "1"
        os.execv(alt, [alt] + sys.argv)
    print(f"skipped: python package 'tensorboard' not installed here nor in {alt}; "
          "create the reference venv with `make venv-ref`")
    sys.exit(77)

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from tensorboard.backend.event_processing.event_file_loader import LegacyEventFileLoader

build = os.environ.get("BUILD", "build")
so = os.path.join(build, "lib", "librlrt.so")
if not os.path.exists(so):
    print(f"skipped: {so} not built")
    sys.exit(77)
# A sanitizer build (BUILD=build-asan) needs the ASan runtime loaded first:
# re-run this script with it preloaded (leak checks off: Python itself leaks).
with open(so, "rb") as fh:
    needs_asan = b"libasan.so" in fh.read()
if needs_asan and "libasan" not in os.environ.get("LD_PRELOAD", ""):
    import subprocess
    rt = subprocess.run(["gcc", "-print-file-name=libasan.so"], capture_output=True,
                        text=True).stdout.strip()
    if not os.path.isabs(rt):
        print(f"skipped: {so} is a sanitizer build and libasan.so was not found")
        sys.exit(77)
    env = dict(os.environ, LD_PRELOAD=os.path.realpath(rt),
               ASAN_OPTIONS="detect_leaks=0:" + os.environ.get("ASAN_OPTIONS", ""))
    os.execve(sys.executable, [sys.executable] + sys.argv, env)
lib = C.CDLL(os.path.abspath(so))
vp = C.c_void_p
lib.rl_error_message.restype = C.c_char_p
lib.rl_metric_set_new.restype = vp
lib.rl_metric_set_put.argtypes = [vp, C.c_char_p, C.c_double]
lib.rl_metric_set_clear.argtypes = [vp]
lib.rl_metric_set_free.argtypes = [vp]
lib.rl_metrics_open.argtypes = [C.c_char_p, C.c_int64, C.c_int]
lib.rl_metrics_open.restype = vp
lib.rl_metrics_log.argtypes = [vp, C.c_int64, vp]
lib.rl_metrics_close.argtypes = [vp]
lib.rl_metrics_event_path.argtypes = [vp]
lib.rl_metrics_event_path.restype = C.c_char_p
lib.rl_metrics_format_console.argtypes = [vp, C.c_int64, C.c_char_p, C.c_size_t]

TAGS = ["critic/score/mean", "actor/pg_loss", "actor/entropy", "timing_s/gen",
        "val/accuracy"]


def f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


def value(step, k):
    return (step * 0.37 - 1.1) * (k + 1) / 7.0


def check(cond, what):
    if not cond:
        print("FAIL:", what, "| rl_error_message:", lib.rl_error_message().decode())
        sys.exit(1)


def run(out, resume, steps):
    m = lib.rl_metrics_open(out.encode(), resume, 0)
    check(m, "rl_metrics_open")
    name = os.path.basename(lib.rl_metrics_event_path(m).decode())
    host = socket.gethostname().replace("/", "_")
    check(re.fullmatch(r"events\.out\.tfevents\.\d+\." + re.escape(host) + r"(\.\d+)?", name),
          f"event file name {name!r}")
    s = lib.rl_metric_set_new()
    for st in steps:
        lib.rl_metric_set_clear(s)
        for k, tag in enumerate(TAGS):
            check(lib.rl_metric_set_put(s, tag.encode(), value(st, k)) == 0, "put")
        check(lib.rl_metrics_log(m, st, s) == 0, f"log step {st}")
    line = C.create_string_buffer(256)
    lib.rl_metrics_format_console(s, steps[-1], line, 256)
    lib.rl_metric_set_free(s)
    check(lib.rl_metrics_close(m) == 0, "rl_metrics_close")
    return line.value.decode()


tmp = tempfile.mkdtemp(prefix="rl_tb_read_")
try:
    t0 = time.time()
    run(tmp, -1, list(range(1, 7)))
    console = run(tmp, 3, list(range(4, 9)))
    t1 = time.time()
    check(console.startswith("step 8 | reward ") and " gen " in console, f"console {console!r}")

    tbdir = os.path.join(tmp, "tensorboard")
    ea = EventAccumulator(tbdir, size_guidance={"scalars": 0})
    ea.Reload()
    check(sorted(ea.Tags()["scalars"]) == sorted(TAGS), f"tags {ea.Tags()['scalars']}")
    n = 0
    for k, tag in enumerate(TAGS):
        got = ea.Scalars(tag)
        check([e.step for e in got] == list(range(1, 9)), f"{tag} steps {[e.step for e in got]}")
        for e in got:
            check(e.value == f32(value(e.step, k)), f"{tag} step {e.step}: {e.value}")
            check(t0 - 1 <= e.wall_time <= t1 + 1, f"wall_time {e.wall_time} not in run")
            n += 1
    files = sorted(os.listdir(tbdir))
    check(len(files) == 2, f"event files {files}")
    for f in files:
        evs = list(LegacyEventFileLoader(os.path.join(tbdir, f)).Load())
        check(evs[0].file_version == "brain.Event:2", f"{f}: first record {evs[0]}")
    rows = [json.loads(x) for x in open(os.path.join(tmp, "metrics.jsonl"))]
    check([r["step"] for r in rows] == list(range(1, 9)), "jsonl steps")
    for r in rows:
        for k, tag in enumerate(TAGS):
            check(r[tag] == value(r["step"], k), f"jsonl {tag} at {r['step']}")
finally:
    shutil.rmtree(tmp)
print(f"tensorboard {tensorboard.__version__} read {n} scalars from rlrt event files "
      f"(2 files, resumed at step 3); console: {console}")
