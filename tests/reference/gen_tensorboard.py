"""gen_tensorboard.py — TensorBoard event files: golden file and cross-check.

1. Writes tests/golden/metrics/tb_reference.tfevents with the real
   `tensorboard` package (its RecordWriter for the TFRecord framing and its
   event_pb2/summary_pb2 protobufs), fixed wall times so the file is
   reproducible, and tests/golden/metrics/tb_reference.json listing the
   events (step, wall_time, tags, float32 values). test_metrics.c writes the
   same events with rl_tb_writer and requires identical bytes, and parses
   the golden file with rl_tb_read_scalars.
2. Cross-check the other way: loads $BUILD/lib/librlrt.so (build it first:
   `make lib`) with ctypes, writes events through rl_metrics (the sink, with
   a resume that truncates) and rl_tb_writer, reads them with TensorBoard's
   LegacyEventFileLoader (which verifies the CRCs) and EventAccumulator, and
   asserts every scalar. Records the result in
   tests/golden/metrics/tb_crosscheck.json.

Needs `tensorboard` from the reference venv (`make venv-ref`). Run by
`make golden` with /usr/bin/python3: without the package it re-executes
itself with $RL_REF_PYTHON or <repo>/build/venv-ref/bin/python, and
otherwise skips (exit 0) leaving the committed files as they are.
"""
import ctypes as C
import hashlib
import json
import os
import shutil
import struct
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

try:
    import tensorboard  # noqa: F401
except ImportError:
    alt = os.environ.get("RL_REF_PYTHON") or os.path.join(
        os.path.dirname(os.path.dirname(HERE)), "build", "venv-ref", "bin", "python")
    if os.path.exists(alt) and not os.environ.get("RL_GEN_REEXEC"):
        os.environ["RL_GEN_REEXEC"] = "1"
        os.execv(alt, [alt] + sys.argv)
    print("gen_tensorboard: skipped (python package 'tensorboard' not installed; "
          "create the reference venv with `make venv-ref`)")
    sys.exit(0)

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from tensorboard.backend.event_processing.event_file_loader import LegacyEventFileLoader
from tensorboard.compat.proto import event_pb2, summary_pb2
from tensorboard.summary.writer.record_writer import RecordWriter

ROOT = os.path.dirname(os.path.dirname(HERE))
OUT = os.path.join(ROOT, "tests", "golden", "metrics")


def f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


# Events of the golden file: (step, wall_time, [(tag, value), ...]).
# Values cover 0 (must still be written: simple_value is in a oneof),
# negatives, a value float32 cannot hold exactly, tiny/huge magnitudes,
# a large step (multi-byte varint) and a UTF-8 tag.
EVENTS = [
    (0, 1700000001.25, [("critic/score/mean", 0.0), ("actor/pg_loss", -0.125)]),
    (1, 1700000002.5, [("critic/score/mean", 0.1), ("timing_s/gen", 1.5),
                       ("val/accuracy", 1e-8)]),
    (7, 1700000003.75, [("actor/entropy", 3.0e38), ("perf/throughput", 12345.678)]),
    (2 ** 40 + 3, 1700000004.0, [("métrique/é", -2.5)]),
]
FILE_VERSION_TIME = 1700000000.5


def write_golden():
    os.makedirs(OUT, exist_ok=True)
    path = os.path.join(OUT, "tb_reference.tfevents")
    with open(path, "wb") as fh:
        w = RecordWriter(fh)
        ev = event_pb2.Event(wall_time=FILE_VERSION_TIME, file_version="brain.Event:2")
        w.write(ev.SerializeToString())
        for step, wt, vals in EVENTS:
            s = summary_pb2.Summary(value=[summary_pb2.Summary.Value(tag=t, simple_value=v)
                                           for t, v in vals])
            w.write(event_pb2.Event(wall_time=wt, step=step, summary=s).SerializeToString())
    meta = {
        "tensorboard": tensorboard.__version__,
        "file_version_wall_time": FILE_VERSION_TIME,
        "events": [{"step": st, "wall_time": wt, "tags": [t for t, _ in vals],
                    "values": [v for _, v in vals], "float32": [f32(v) for _, v in vals]}
                   for st, wt, vals in EVENTS],
    }
    with open(os.path.join(OUT, "tb_reference.json"), "w") as fh:
        json.dump(meta, fh, indent=1, ensure_ascii=False)
        fh.write("\n")
    # sanity: tensorboard reads back its own file
    got = [(e.step, v.tag, v.simple_value) for e in LegacyEventFileLoader(path).Load()
           if e.HasField("summary") for v in e.summary.value]
    want = [(st, t, f32(v)) for st, _, vals in EVENTS for t, v in vals]
    assert got == want, (got, want)
    return path


def load_lib():
    build = os.environ.get("BUILD", "build")
    so = os.path.join(ROOT, build, "lib", "librlrt.so")
    if not os.path.exists(so):
        # golden written; the committed cross-check marker stays as it is
        print(f"gen_tensorboard: golden written; cross-check skipped: {so} not built "
              "(run `make lib` first)")
        sys.exit(0)
    lib = C.CDLL(so)
    vp = C.c_void_p
    lib.rl_error_message.restype = C.c_char_p
    lib.rl_tb_writer_open.argtypes = [C.c_char_p, C.c_double]
    lib.rl_tb_writer_open.restype = vp
    lib.rl_tb_writer_scalars.argtypes = [vp, C.c_int64, C.c_double, C.POINTER(C.c_char_p),
                                         C.POINTER(C.c_double), C.c_int]
    lib.rl_tb_writer_close.argtypes = [vp]
    lib.rl_metric_set_new.restype = vp
    lib.rl_metric_set_put.argtypes = [vp, C.c_char_p, C.c_double]
    lib.rl_metric_set_clear.argtypes = [vp]
    lib.rl_metric_set_free.argtypes = [vp]
    lib.rl_metrics_open.argtypes = [C.c_char_p, C.c_int64, C.c_int]
    lib.rl_metrics_open.restype = vp
    lib.rl_metrics_log_at.argtypes = [vp, C.c_int64, C.c_double, vp]
    lib.rl_metrics_close.argtypes = [vp]
    return lib


def check(ok, what, lib=None):
    if not ok:
        extra = f" | rl_error_message: {lib.rl_error_message().decode()}" if lib else ""
        sys.exit(f"gen_tensorboard: FAIL {what}{extra}")


def c_write_events(lib, path):
    w = lib.rl_tb_writer_open(path.encode(), FILE_VERSION_TIME)
    check(w, "rl_tb_writer_open", lib)
    for step, wt, vals in EVENTS:
        tags = (C.c_char_p * len(vals))(*[t.encode() for t, _ in vals])
        values = (C.c_double * len(vals))(*[v for _, v in vals])
        check(lib.rl_tb_writer_scalars(w, step, wt, tags, values, len(vals)) == 0,
              "rl_tb_writer_scalars", lib)
    check(lib.rl_tb_writer_close(w) == 0, "rl_tb_writer_close", lib)


def sink_run(lib, out, steps, resume):
    """Logs steps through the rl_metrics sink; metric k at step s = s * 0.5 + k."""
    m = lib.rl_metrics_open(out.encode(), resume, 0)
    check(m, "rl_metrics_open", lib)
    s = lib.rl_metric_set_new()
    for st in steps:
        lib.rl_metric_set_clear(s)
        for k, tag in enumerate(("critic/score/mean", "actor/pg_loss", "timing_s/gen")):
            check(lib.rl_metric_set_put(s, tag.encode(), st * 0.5 + k) == 0, "put", lib)
        check(lib.rl_metrics_log_at(m, st, 1700000000.0 + st, s) == 0, f"log {st}", lib)
    lib.rl_metric_set_free(s)
    check(lib.rl_metrics_close(m) == 0, "rl_metrics_close", lib)


def cross_check(golden_path):
    lib = load_lib()
    tmp = tempfile.mkdtemp(prefix="rl_gen_tb_")
    try:
        # (a) rl_tb_writer: byte-identical to tensorboard's file, and readable
        cpath = os.path.join(tmp, "events.out.tfevents.1700000000.c")
        c_write_events(lib, cpath)
        cbytes = open(cpath, "rb").read()
        check(cbytes == open(golden_path, "rb").read(), "C event file differs from golden")
        evs = list(LegacyEventFileLoader(cpath).Load())
        check(evs[0].file_version == "brain.Event:2", "file_version")
        n_checked = 0
        for ev, (step, wt, vals) in zip(evs[1:], EVENTS):
            check(ev.step == step and ev.wall_time == wt, f"event step {ev.step}")
            check([(v.tag, v.simple_value) for v in ev.summary.value] ==
                  [(t, f32(v)) for t, v in vals], f"values at step {step}")
            n_checked += len(vals)
        # (b) the sink: run to step 9, "crash", resume at step 5, run to 9
        run = os.path.join(tmp, "run")
        sink_run(lib, run, range(0, 10), -1)
        sink_run(lib, run, range(6, 10), 5)
        ea = EventAccumulator(os.path.join(run, "tensorboard"), size_guidance={"scalars": 0})
        ea.Reload()
        tags = sorted(ea.Tags()["scalars"])
        check(tags == ["actor/pg_loss", "critic/score/mean", "timing_s/gen"], f"tags {tags}")
        for k, tag in enumerate(("critic/score/mean", "actor/pg_loss", "timing_s/gen")):
            got = [(e.step, e.value, e.wall_time) for e in ea.Scalars(tag)]
            want = [(st, f32(st * 0.5 + k), 1700000000.0 + st) for st in range(10)]
            check(got == want, f"accumulator {tag}: {got}")
            n_checked += len(got)
        # every file in the directory still parses and each step appears once
        steps = []
        for name in sorted(os.listdir(os.path.join(run, "tensorboard"))):
            for ev in LegacyEventFileLoader(os.path.join(run, "tensorboard", name)).Load():
                if ev.HasField("summary"):
                    steps.append(ev.step)
        check(steps == list(range(10)), f"steps across files {steps}")
        rows = [json.loads(x) for x in open(os.path.join(run, "metrics.jsonl"))]
        check([r["step"] for r in rows] == list(range(10)), "jsonl steps")
        check(all(r["timing_s/gen"] == r["step"] * 0.5 + 2 for r in rows), "jsonl values")
    finally:
        shutil.rmtree(tmp)
    marker = {
        "tensorboard": tensorboard.__version__,
        "golden_sha256": hashlib.sha256(open(golden_path, "rb").read()).hexdigest(),
        "c_writer_byte_identical": True,
        "scalars_checked": n_checked,
        "readers": ["LegacyEventFileLoader (CRC-checked raw events)", "EventAccumulator"],
    }
    with open(os.path.join(OUT, "tb_crosscheck.json"), "w") as fh:
        json.dump(marker, fh, indent=1)
        fh.write("\n")
    print(f"gen_tensorboard: ok, {n_checked} scalars checked with tensorboard "
          f"{tensorboard.__version__}")


if __name__ == "__main__":
    cross_check(write_golden())
