"""diffusion_golden.py — the diffusion track (seed 004) gives the same
metrics, value for value, as the runs recorded in tests/golden/diffusion/
(recorded before the restructuring of folders, config reading and recipe
phases, so a refactor that changes any number fails here).

Seven jobs on real daemons, from the example jobs with only their length
(and two batch sizes) cut, on the roles of examples/cluster-diffusion.yaml
(rollout, 2 actor ranks: FSDP, reward):
  scorer     fmnist_scorer.yaml: 40 steps of the prompt-match classifier on
             2000 Fashion-MNIST images, then its test-split accuracy;
  judge      the same, 20 steps with trainer.seed 2: the held-out judge;
  flow       fmnist_flow.yaml: 20 steps of flow-matching pretraining of the
             clip generator (frames 1);
  grpo       dance_grpo_scorer.yaml with the rewards prompt_match +
             jpeg_compressibility (weight 0.5) and the judge: 4 GRPO steps,
             validation at steps 0, 2 and 4, online test images every 2
             steps, a checkpoint at steps 2 and 4;
  grpo_kl    dance_grpo_jpeg_onprompt.yaml (jpeg_compressibility with
             prompt_match held at a floor by the multiplier of
             algorithm.constraint) with the KL loss to the pretrained
             generator (actor.use_kl_loss): 3 steps of 8 prompts, one
             mini-batch, validation at steps 0 and 3;
  clip_flow  fmnist_flow_clips.yaml: 10 steps of pretraining of 4-frame
             clips;
  clip_grpo  dance_grpo_scorer.yaml on those 4-frame clips: 2 steps,
             validation at 0 and 2.
The GRPO jobs run without the examples' lr warm-up (5 steps: these few
steps would train at lr 0 and a fifth of it).
Every metric of metrics.jsonl is compared exactly except wall-clock ones
(timing_s/*, perf/*: seconds and CPU use, which depend on the machine and
its load). The kernels are pinned as in rlvr_golden.py: OMP_NUM_THREADS=2
and OPENBLAS_CORETYPE=Haswell.

A sanitizer build (make SANITIZE=...) compiles the kernels differently (its
checks keep the `omp simd reduction` loops scalar, so sums are added in
another order; rlvr_golden.py): measured with make SANITIZE=address,undefined,
the pretraining jobs give the same numbers but the GRPO jobs differ from
their first value on (step 0's val/prompt_match in the 9th digit, with the
same val/jpeg_kb: the scorer's class probabilities of the same samples,
likely the sum of rl_softmax_forward in common/nn/ops_cpu.c; then every
reward and loss), deterministically, so there the jobs run (under ASan/UBSan, which is worth
having) but their values are not compared, and the test reports itself
skipped (exit 77) saying so.

Skipped (77) when Debian's dataset-fashion-mnist is not installed.

  python3 tests/integration/diffusion_golden.py           compare
  python3 tests/integration/diffusion_golden.py --record  rewrite the goldens
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
BUILD = os.path.join(ROOT, os.environ.get("BUILD", "build"))
DRIVER = os.path.join(BUILD, "bin", "rl-driver")
GOLDEN = os.path.join(ROOT, "tests", "golden", "diffusion")
FMNIST = "/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz"

# metrics that measure the machine, not the computation
WALL_PREFIXES = ("timing_s/", "perf/")

# GRPO from those: the examples' warm-up of 5 steps would train these few
# steps at lr 0 and a fifth of it, so the GRPO jobs start at the full rate
GRPO = ["model.init_from=flow/final", "reward.scorer_path=scorer/final", "actor.optim.warmup_steps=0"]
JOBS = [
    ("scorer", "fmnist_scorer.yaml", ["trainer.total_steps=40", "data.train_limit=2000",
                                      "trainer.output_dir=scorer"]),
    ("judge", "fmnist_scorer.yaml", ["trainer.seed=2", "trainer.total_steps=20", "data.train_limit=2000",
                                     "trainer.output_dir=judge"]),
    ("flow", "fmnist_flow.yaml", ["trainer.total_steps=20", "data.train_limit=2000",
                                  "trainer.output_dir=flow"]),
    ("grpo", "dance_grpo_scorer.yaml", GRPO + [
        "reward.reward_model=prompt_match,jpeg_compressibility:0.5", "reward.judge_path=judge/final",
        "trainer.total_steps=4", "trainer.val_every=2", "trainer.save_every=2",
        "rollout.online.step.interval=2", "trainer.output_dir=grpo"]),
    ("grpo_kl", "dance_grpo_jpeg_onprompt.yaml", GRPO + [
        "actor.use_kl_loss=true", "data.train_batch_size=8", "actor.ppo_mini_batch_size=8",
        "trainer.total_steps=3", "trainer.val_every=3", "trainer.save_every=0",
        "rollout.online.test=false", "trainer.output_dir=grpo_kl"]),
    ("clip_flow", "fmnist_flow_clips.yaml", ["trainer.total_steps=10", "data.train_limit=2000",
                                             "trainer.output_dir=clip_flow"]),
    ("clip_grpo", "dance_grpo_scorer.yaml", [
        "model.init_from=clip_flow/final", "reward.scorer_path=scorer/final", "model.frames=4",
        "actor.optim.warmup_steps=0",
        "trainer.total_steps=2", "trainer.val_every=2", "trainer.save_every=0",
        "rollout.online.step.interval=2", "trainer.output_dir=clip_grpo"]),
]
# files each job must leave (so a job that silently skips a part fails here)
EXPECT = {
    "grpo": ["checkpoints/step_2/model.safetensors", "checkpoints/step_4/model.safetensors",
             "online/step_4.png", "online/step_4.gif", "before_after.png"],
    "clip_grpo": ["online/step_2.gif"],
}


def cluster(path):
    # examples/cluster-diffusion.yaml's roles; --bind picks a free port
    with open(path, "w") as f:
        f.write("driver: {bind: 127.0.0.1, port: 5571}\n"
                "nodes: [{name: local, address: 127.0.0.1, launch: local}]\n"
                "roles:\n"
                "  rollout: {count: 1, node: local}\n"
                "  actor: {count: 2, node: local}\n"
                "  reward: {count: 1, node: local}\n")


def comparable(row):
    return {k: v for k, v in row.items() if not k.startswith(WALL_PREFIXES)}


def sanitizer_build():
    with open(DRIVER, "rb") as f:
        data = f.read()
    return b"__asan_init" in data or b"__ubsan_handle" in data


def compare(name, rows, want):
    """The differences of rows from the golden rows, as messages naming the
    job, the step and the metric (empty when they are equal)."""
    if len(rows) != len(want):
        return ["%s: %d metric rows, golden has %d (steps %s, golden %s)" % (
            name, len(rows), len(want), [r.get("step") for r in rows], [r.get("step") for r in want])]
    diffs = []
    for i, (got, exp) in enumerate(zip(rows, want)):
        where = "%s step %s (row %d)" % (name, exp.get("step"), i + 1)
        if got.keys() != exp.keys():
            diffs.append("%s: metric names differ: missing %s, new %s" % (
                where, sorted(exp.keys() - got.keys()), sorted(got.keys() - exp.keys())))
        for k in sorted(exp.keys() & got.keys()):
            if got[k] != exp[k]:
                diffs.append("%s %s: %r, golden %r" % (where, k, got[k], exp[k]))
    return diffs


def main():
    record = "--record" in sys.argv[1:]
    if not os.path.exists(DRIVER):
        raise SystemExit("FAIL: %s not built" % DRIVER)
    if not os.path.exists(FMNIST):
        print("skipped: Debian's dataset-fashion-mnist is not installed")
        sys.exit(77)
    sanitized = sanitizer_build()
    if sanitized and record:
        raise SystemExit("FAIL: record the goldens with a plain build, not %s" % DRIVER)
    env = dict(os.environ, OMP_NUM_THREADS="2", OPENBLAS_CORETYPE="Haswell")
    env.pop("RL_FAULT_INJECT", None)
    work = tempfile.mkdtemp(prefix="rlrt-diffusion-golden-")
    failures = []
    try:
        cfile = os.path.join(work, "cluster.yaml")
        cluster(cfile)
        for name, config, overrides in JOBS:
            cmd = [DRIVER, "--cluster", cfile, "--config", os.path.join(ROOT, "examples", config),
                   "--bind", "tcp://127.0.0.1:*", "--log-level", "warn"] + overrides
            t0 = time.monotonic()
            p = subprocess.run(cmd, cwd=work, env=env, capture_output=True, text=True, timeout=600)
            secs = time.monotonic() - t0
            if p.returncode != 0:
                print((p.stdout + p.stderr)[-4000:])
                raise SystemExit("FAIL: job %s exited %d" % (name, p.returncode))
            out_dir = os.path.join(work, name)
            for f in EXPECT.get(name, []):
                if not os.path.exists(os.path.join(out_dir, f)):
                    raise SystemExit("FAIL: job %s wrote no %s" % (name, f))
            with open(os.path.join(out_dir, "metrics.jsonl")) as f:
                rows = [comparable(json.loads(line)) for line in f if line.strip()]
            golden = os.path.join(GOLDEN, name + ".jsonl")
            if record:
                os.makedirs(GOLDEN, exist_ok=True)
                with open(golden, "w") as f:
                    for r in rows:
                        f.write(json.dumps(r, sort_keys=True) + "\n")
                print("recorded %s: %d rows (%.1f s)" % (golden, len(rows), secs))
                continue
            if sanitized:
                print("ran %s under the sanitizers: %d rows (%.1f s)" % (name, len(rows), secs))
                continue
            with open(golden) as f:
                want = [json.loads(line) for line in f if line.strip()]
            diffs = compare(name, rows, want)
            if diffs:
                for d in diffs[:20]:
                    print("differs: " + d)
                if len(diffs) > 20:
                    print("differs: ... and %d more" % (len(diffs) - 20))
                failures.append("%s (%d difference%s; first: %s)" % (
                    name, len(diffs), "s"[:len(diffs) > 1], diffs[0]))
            else:
                print("ok: %s: %d rows equal the golden run, value for value (%.1f s)" % (
                    name, len(rows), secs))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if failures:
        raise SystemExit("FAIL: " + "; ".join(failures))
    if sanitized:
        print("skipped: sanitizer build: the jobs ran clean, values not compared (its floating "
              "point differs from the plain build the goldens come from)")
        sys.exit(77)


if __name__ == "__main__":
    main()
