"""diffusion_fid.py — the diffusion track's held-out quality metric (issue 44)
over real daemons:

1. The FID's feature network: examples/fmnist_cnn.yaml (model.type
   image_cnn, the scorer_train recipe) trained briefly; its test accuracy
   is well above chance.
2. The FID itself (build/bench/bench_fid --check): real test images against
   the other half of the test split are near 0, blurred or noised ones are
   clearly worse, and it grows with the blur's σ and the noise's std.
3. A GRPO job with data.fid_model logs val/fid, val/fid_floor and the CNN's
   judgement (val/cnn_on_prompt, val/cnn_prompt_match) at every validation,
   and the log line names the FID; the tiny generator's FID is above the
   floor of real images of its sample count.
4. data.fid_model naming a model of another kind (the MLP scorer) or no
   directory is a located config error.

Skipped (77) when Debian's dataset-fashion-mnist is not installed.
"""
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
BUILD = os.path.join(ROOT, os.environ.get("BUILD", "build"))
DRIVER = os.path.join(BUILD, "bin", "rl-driver")
BENCH = os.path.join(BUILD, "bench", "bench_fid")
FMNIST = "/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz"
TINY_FLOW = ["model.hidden_size=32", "model.num_layers=1", "model.time_embed_dim=8"]


def run(work, cl, overrides, expect_ok=True):
    cmd = [DRIVER, "--cluster", cl, "--bind", "tcp://127.0.0.1:*", "--log-level", "info"] + overrides
    p = subprocess.run(cmd, cwd=work, capture_output=True, text=True, timeout=600)
    out = p.stdout + p.stderr
    if expect_ok and p.returncode != 0:
        print(out[-4000:])
        raise SystemExit("FAIL: %s exited %d" % (" ".join(overrides), p.returncode))
    return p.returncode, out


def metrics(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def main():
    for path, what in ((DRIVER, "rl-driver"), (BENCH, "bench_fid")):
        if not os.path.exists(path):
            print("skipped: %s not built (%s)" % (what, path))
            return 77
    if not os.path.exists(FMNIST):
        print("skipped: Debian's dataset-fashion-mnist is not installed")
        return 77
    work = tempfile.mkdtemp(prefix="rlrt_fid_")
    try:
        return body(work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def body(work):
    cl = os.path.join(work, "c.yaml")
    with open(cl, "w") as f:
        f.write("driver: {bind: 127.0.0.1, port: 5571}\n"
                "nodes: [{name: local, address: 127.0.0.1, launch: local}]\n"
                "roles:\n"
                "  rollout: {count: 1, node: local}\n"
                "  actor: {count: 2, node: local}\n"
                "  reward: {count: 1, node: local}\n")
    # 1. the feature network, briefly
    run(work, cl, ["--config", os.path.join(ROOT, "examples", "fmnist_cnn.yaml"),
                   "trainer.output_dir=cnn", "trainer.total_steps=300", "data.train_batch_size=64"])
    acc = [r["val/accuracy"] for r in metrics(os.path.join(work, "cnn", "metrics.jsonl"))
           if "val/accuracy" in r]
    assert acc and acc[-1] > 0.75, "CNN test accuracy %s" % acc
    print("feature network: test accuracy %.4f" % acc[-1])

    # 2. the FID of degraded real images
    p = subprocess.run([BENCH, "--model", os.path.join(work, "cnn", "final"), "--n", "1000", "--check"],
                       capture_output=True, text=True, timeout=600)
    print(p.stdout, end="")
    assert p.returncode == 0, "bench_fid --check exited %d: %s" % (p.returncode, p.stderr)
    vals = dict(l[len("bench: "):].split(" = ") for l in p.stdout.splitlines() if l.startswith("bench: "))
    real, blur, noise = float(vals["fid_real"]), float(vals["fid_blur_1.0"]), float(vals["fid_noise_0.4"])
    assert real < 0.25 * min(blur, noise), (real, blur, noise)

    # 3. GRPO with the FID at every validation
    run(work, cl, ["trainer.recipe=scorer_train", "trainer.output_dir=scorer", "trainer.total_steps=20",
                   "model.hidden_size=32", "data.train_limit=2000", "data.train_batch_size=64"])
    run(work, cl, ["trainer.recipe=flow_pretrain", "trainer.output_dir=flow", "trainer.total_steps=20",
                   "data.train_limit=2000", "data.train_batch_size=32"] + TINY_FLOW)
    grpo = ["trainer.recipe=diffusion", "model.init_from=flow/final", "reward.scorer_path=scorer/final",
            "data.train_batch_size=2", "rollout.n=4", "actor.ppo_mini_batch_size=2", "rollout.num_steps=4",
            "data.val_per_prompt=3", "data.fid_real=2000", "trainer.total_steps=2", "trainer.val_every=1",
            "rollout.online.test=false"] + TINY_FLOW
    rc, out = run(work, cl, grpo + ["trainer.output_dir=g", "data.fid_model=cnn/final"])
    m = metrics(os.path.join(work, "g", "metrics.jsonl"))
    for r in m:
        for k in ("val/fid", "val/fid_floor", "val/cnn_on_prompt", "val/cnn_prompt_match"):
            assert k in r and r[k] is not None and math.isfinite(r[k]), (k, r)
        assert r["val/fid"] > r["val/fid_floor"] > 0, r
        assert 0 <= r["val/cnn_on_prompt"] <= 1 and 0 <= r["val/cnn_prompt_match"] <= 1, r
    assert [r["step"] for r in m] == [0, 1, 2], [r["step"] for r in m]
    assert "validation:" in out and " fid " in out, out[-2000:]
    print("GRPO: val/fid %s (floor %.2f)" % (", ".join("%.2f" % r["val/fid"] for r in m), m[0]["val/fid_floor"]))

    # 4. bad feature networks
    rc, out = run(work, cl, grpo + ["trainer.output_dir=b1", "data.fid_model=scorer/final"], expect_ok=False)
    assert rc != 0 and "data.fid_model" in out and "needs an image_cnn" in out, out[-2000:]
    rc, out = run(work, cl, grpo + ["trainer.output_dir=b2", "data.fid_model=nowhere"], expect_ok=False)
    assert rc != 0 and "data.fid_model: nowhere: no such directory" in out, out[-2000:]
    assert "examples/fmnist_cnn.yaml" in out, out[-2000:]
    print("bad feature networks: located errors")
    return 0


if __name__ == "__main__":
    sys.exit(main())
