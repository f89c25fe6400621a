"""ckpt_integrity.py — a resume over real daemons verifies the checkpoint it
picks against its checksums (common/nn/engine/checkpoint.h, SHA256SUMS).

A tiny GRPO job saves steps 2 and 4. Then, for every file of step_4 in
turn, damage that keeps the file well-formed (four floats of a safetensors
file's data overwritten, one digit of a JSON number changed, one hex digit of
SHA256SUMS): `--resume` skips step_4 naming the file with the expected and
actual sha256, resumes from step_2 and runs to the end. A step_4 saved before
checksums (no SHA256SUMS, no "checksums" key) still resumes, with the
warning that its files cannot be verified; `sha256sum -c SHA256SUMS` checks
an intact step by hand.

Standard library only.
"""
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
import ckpt  # noqa: E402

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
BUILD = os.path.join(ROOT, os.environ.get("BUILD", "build"))
DRIVER = os.path.join(BUILD, "bin", "rl-driver")

JOB = [
    "model.init_from=''", "model.hidden_size=32", "model.intermediate_size=64",
    "model.num_layers=1", "model.num_heads=2", "model.num_kv_heads=1", "model.max_seq_len=64",
    "data.train_size=200", "data.val_size=16", "data.levels=[1]", "data.max_prompt_length=16",
    "rollout.response_length=40", "data.train_batch_size=4", "actor.ppo_mini_batch_size=4",
    "rollout.n=4", "trainer.val_every=0", "trainer.save_every=2",
]


def run(work, out, steps, resume):
    cmd = [DRIVER, "--cluster", os.path.join(work, "c.yaml"), "--config",
           os.path.join(ROOT, "examples", "arith_grpo.yaml"), "--bind", "tcp://127.0.0.1:*",
           "--log-level", "info", "trainer.output_dir=" + out,
           "trainer.total_steps=%d" % steps] + JOB + (["--resume"] if resume else [])
    p = subprocess.run(cmd, cwd=work, capture_output=True, text=True, timeout=300)
    text = p.stdout + p.stderr
    if p.returncode != 0:
        print(text[-4000:])
        raise SystemExit("FAIL: %s exited %d" % (" ".join(cmd[-6:]), p.returncode))
    return text


def damage(path):
    """Damage a checksum alone can see: the file stays well-formed."""
    with open(path, "rb") as f:
        data = bytearray(f.read())
    name = os.path.basename(path)
    if name.endswith(".safetensors"):
        (n,) = struct.unpack("<Q", data[:8])
        at = 8 + n + (len(data) - 8 - n) // 2 // 4 * 4  # four floats inside the tensor data
        data[at:at + 16] = struct.pack("<4f", 0.25, -0.5, 0.75, 1.5)
    elif name == "SHA256SUMS":
        at = data.index(b"  model.safetensors") - 7
        data[at] = ord("a") if data[at] != ord("a") else ord("b")
    else:  # JSON: the last digit of a number (trainer_state.json: the data position)
        m = re.search(rb'"data_position": *([0-9]+)', data) or re.search(rb': *([0-9]+)', data)
        at = m.end(1) - 1
        data[at] = ord("7") if data[at] != ord("7") else ord("3")
    with open(path, "wb") as f:
        f.write(data)


def main():
    if not os.path.exists(DRIVER):
        print("skipped: %s not built" % DRIVER)
        return 77
    work = tempfile.mkdtemp(prefix="rlrt_ckpt_")
    try:
        return body(work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def body(work):
    with open(os.path.join(work, "c.yaml"), "w") as f:
        f.write("driver: {bind: 127.0.0.1, port: 5555}\n"
                "nodes: [{name: local, address: 127.0.0.1, launch: local}]\n"
                "roles:\n"
                "  rollout: {count: 1, node: local}\n"
                "  actor: {count: 1, node: local}\n"
                "  reward: {count: 1, node: local}\n")
    run(work, "base", 4, False)
    step4 = os.path.join(work, "base", "checkpoints", "step_4")
    files = sorted(os.listdir(step4))
    for need in ("SHA256SUMS", "model.safetensors", "optimizer.safetensors",
                 "trainer_state.json", "config.json"):
        assert need in files, (need, files)
    subprocess.run(["sha256sum", "--strict", "--quiet", "-c", "SHA256SUMS"], cwd=step4,
                   check=True)
    # the tests' forger (lib/ckpt.py) writes the manifest byte for byte as rl-driver does
    with open(os.path.join(step4, "SHA256SUMS"), "rb") as f:
        sums = f.read()
    ckpt.reseal(step4)
    with open(os.path.join(step4, "SHA256SUMS"), "rb") as f:
        assert f.read() == sums, "lib/ckpt.py reseal differs from the checkpoint's SHA256SUMS"
    for name in files:
        out = "damaged_" + name
        shutil.copytree(os.path.join(work, "base"), os.path.join(work, out))
        damage(os.path.join(work, out, "checkpoints", "step_4", name))
        text = run(work, out, 6, True)
        resumed = [l for l in text.splitlines() if "resumed from" in l]
        assert resumed, text[-3000:]
        line = resumed[0]
        want_dir = os.path.join(out, "checkpoints", "step_2")
        if want_dir not in line:
            raise SystemExit("FAIL: %s damaged: %s" % (name, line))
        if name == "SHA256SUMS":
            want = "SHA256SUMS: damaged: sha256 of its lines expected"
        else:
            want = "step_4/%s: damaged: sha256 expected" % name
        if "skipped damaged or incomplete checkpoint" not in line or want not in line or \
                ", got " not in line:
            raise SystemExit("FAIL: %s damaged: the resume does not say why it skipped step_4: %s"
                             % (name, line))
        rows = [json.loads(l) for l in open(os.path.join(work, out, "metrics.jsonl")) if l.strip()]
        assert [r["step"] for r in rows if r["step"] > 0] == list(range(1, 7)), rows
        print("ok: %s damaged: resumed from step_2 (%s)" % (name, want))
    # a checkpoint saved before checksums
    out = "legacy"
    shutil.copytree(os.path.join(work, "base"), os.path.join(work, out))
    old = os.path.join(work, out, "checkpoints", "step_4")
    os.unlink(os.path.join(old, "SHA256SUMS"))
    with open(os.path.join(old, "trainer_state.json")) as f:
        st = json.load(f)
    del st["checksums"]
    with open(os.path.join(old, "trainer_state.json"), "w") as f:
        json.dump(st, f)
    text = run(work, out, 6, True)
    line = [l for l in text.splitlines() if "resumed from" in l][0]
    if os.path.join(out, "checkpoints", "step_4") not in line or "WARN" not in line or \
            "cannot be verified" not in line:
        raise SystemExit("FAIL: a checkpoint without checksums: %s" % line)
    print("ok: a checkpoint without checksums resumes with: %s" % line.split("resumed", 1)[1])
    return 0


if __name__ == "__main__":
    sys.exit(main())
