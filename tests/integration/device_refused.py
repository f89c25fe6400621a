#!/usr/bin/env python3
"""device_refused.py — actor.device=cuda / rollout.device=cuda where there is no GPU.

On a machine without a visible NVIDIA GPU (or with a build without CUDA) a
job asking for the actor or the rollout on the GPU fails at init_model with
an error located at the key that says why, and no training step runs. With
a GPU present this exits 77: gpu_jobs.py runs them on the GPU there.
A bad choice of device is refused by the config schema before any worker
starts."""
import os
import subprocess
import sys
import tempfile
import shutil

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.environ.get("BUILD", "build")
DRIVER = os.path.join(ROOT, BUILD, "bin", "rl-driver")
TINY = ["model.hidden_size=32", "model.intermediate_size=64", "model.num_layers=1",
        "model.num_heads=2", "model.num_kv_heads=1", "model.max_seq_len=64",
        "data.train_size=200", "data.val_size=16", "data.levels=[1]",
        "data.max_prompt_length=16", "rollout.response_length=40",
        "trainer.total_steps=2", "trainer.val_every=0", "data.train_batch_size=8"]


# the diffusion job of gpu_jobs.py (clip_flow, MLP trunk; no dataset needed)
DIFFUSION = ["model.init_from=", "model.hidden_size=32", "model.num_layers=1", "data.fid_model=",
             "reward.scorer_path=", "trainer.val_every=0", "trainer.save_every=0", "trainer.total_steps=2",
             "data.train_batch_size=2", "rollout.n=4", "actor.ppo_mini_batch_size=2", "rollout.num_steps=4"]


def run(work, extra, config="arith_sft.yaml", tiny=TINY):
    cl = os.path.join(work, "c.yaml")
    with open(cl, "w") as f:
        f.write("driver: {bind: 127.0.0.1, port: 5555}\n"
                "nodes: [{name: local, address: 127.0.0.1, launch: local}]\n"
                "roles:\n  rollout: {count: 1, node: local}\n"
                "  actor: {count: %d, node: local}\n  reward: {count: 1, node: local}\n"
                % extra.pop(0))
    p = subprocess.run([DRIVER, "--cluster", cl, "--config", os.path.join(ROOT, "examples", config),
                        "--bind", "tcp://127.0.0.1:*", "--log-level", "warn"] + tiny + extra,
                       cwd=work, capture_output=True, text=True, timeout=300)
    return p.returncode, p.stdout + p.stderr


def main():
    if not os.path.exists(DRIVER):
        raise SystemExit("FAIL: %s not built" % DRIVER)
    work = tempfile.mkdtemp(prefix="rlrt-actor-dev-")
    try:
        rc, log = run(work, [1, "actor.device=tpu", "trainer.output_dir=runs/bad"])
        assert rc != 0 and "actor.device" in log and "tpu" in log and "cpu,cuda" in log, log[-2000:]
        assert not os.path.exists(os.path.join(work, "runs/bad/metrics.jsonl")), log
        print("ok: actor.device=tpu refused by the schema: %s" % log.strip().splitlines()[-1][:160])
        if subprocess.run(["sh", "-c", "nvidia-smi -L"], capture_output=True).returncode == 0:
            print("skipped: a GPU is present (gpu_jobs.py checks the GPU roles)")
            sys.exit(77)
        rc, log = run(work, [1, "actor.device=cuda", "trainer.output_dir=runs/nogpu"])
        assert rc != 0, log[-2000:]
        assert "actor.device" in log and ("no CUDA" in log or "no such device" in log), log[-2000:]
        rows = os.path.join(work, "runs/nogpu/metrics.jsonl")
        assert not os.path.exists(rows) or '"sft/loss"' not in open(rows).read(), log
        line = [l for l in log.splitlines() if "actor.device" in l][0]
        print("ok: actor.device=cuda without a GPU: %s" % line.strip()[:200])
        # two actor ranks on the GPU: FSDP runs on the host, refused by name
        rc, log = run(work, [2, "actor.device=cuda", "trainer.output_dir=runs/two"])
        assert rc != 0 and "actor.device" in log, log[-2000:]
        print("ok: refused with 2 actor ranks too")
        rc, log = run(work, [1, "rollout.device=cuda", "trainer.output_dir=runs/roll"])
        assert rc != 0 and "rollout.device" in log and ("no CUDA" in log or "no such device" in log), \
            log[-2000:]
        line = [l for l in log.splitlines() if "rollout.device" in l][0]
        print("ok: rollout.device=cuda without a GPU: %s" % line.strip()[:200])
        # a flow kind (clip_flow, which moves to a GPU) is refused the same way
        for key in ("actor.device", "rollout.device"):
            rc, log = run(work, [1, key + "=cuda", "trainer.output_dir=runs/dif"], "dance_grpo_jpeg.yaml",
                          DIFFUSION)
            assert rc != 0 and key in log and "clip_flow" in log and \
                ("no CUDA" in log or "no such device" in log), log[-2000:]
            rows = os.path.join(work, "runs/dif/metrics.jsonl")
            assert not os.path.exists(rows) or '"actor/grad_norm"' not in open(rows).read(), log
            line = [l for l in log.splitlines() if key in l][0]
            print("ok: diffusion (clip_flow) %s=cuda without a GPU: %s" % (key, line.strip()[:200]))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
