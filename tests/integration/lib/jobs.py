"""jobs.py — what the job-running integration tests share: run rl-driver in
a work folder and fail with the end of its output when it should have
succeeded, read a run's metrics.jsonl, and read a model.safetensors's f32
tensors to compare weights."""
import json
import os
import struct
import subprocess

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))
DRIVER = os.path.join(ROOT, os.environ.get("BUILD", "build"), "bin", "rl-driver")


def run_driver(work, args, expect_ok=True, env=None, preexec_fn=None, timeout=600):
    """rl-driver ARGS in `work`; (exit status, stdout + stderr). With
    expect_ok, a failure prints the output's end and ends the test."""
    p = subprocess.run([DRIVER] + list(args), cwd=work, capture_output=True, text=True,
                       timeout=timeout, preexec_fn=preexec_fn,
                       env=dict(os.environ, **env) if env else None)
    out = p.stdout + p.stderr
    if expect_ok and p.returncode != 0:
        print(out[-4000:])
        raise SystemExit("FAIL: %s exited %d" % (" ".join(a for a in args if "=" in a), p.returncode))
    return p.returncode, out


def gpu_cluster(path):
    """A cluster.yaml at `path`: one rank of each role, the actor and the
    rollout on GPU 0 of the one local node."""
    with open(path, "w") as f:
        f.write("driver: {bind: 127.0.0.1, port: 5555}\n"
                "nodes: [{name: local, address: 127.0.0.1, launch: local, gpus: 1}]\n"
                "roles:\n"
                "  rollout: {count: 1, placement: [{rank: 0, node: local, gpus: [0]}]}\n"
                "  actor: {count: 1, placement: [{rank: 0, node: local, gpus: [0]}]}\n"
                "  reward: {count: 1, node: local}\n")


def metrics(path):
    """The rows of a metrics.jsonl."""
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def safetensors_f32(path):
    """{tensor name: tuple of floats} of an F32 safetensors file."""
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        assert t["dtype"] == "F32", (name, t["dtype"])
        b0, b1 = t["data_offsets"]
        out[name] = struct.unpack("<%df" % ((b1 - b0) // 4), data[8 + n + b0:8 + n + b1])
    return out


def max_diff(a, b):
    """The largest element difference between two safetensors_f32 results."""
    assert a.keys() == b.keys(), (sorted(a)[:3], sorted(b)[:3])
    return max(max(abs(x - y) for x, y in zip(a[k], b[k])) for k in a)
