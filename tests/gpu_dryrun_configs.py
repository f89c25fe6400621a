#!/usr/bin/env python3
"""gpu_dryrun_configs.py — the jobs of bench/bench_gpu_rl.py and
bench/bench_gpu_e2e.py at their device sizes, through `rl-driver --check`
(keys, ranges, the recipe's own checks; nothing starts), for
tests/gpu_dryrun.sh: the dry run shrinks those jobs with overrides, so their
default sizes would otherwise meet the driver for the first time on the
device.

Each script's main() runs with jobs.run_driver replaced: a job is checked
with `rl-driver --check` instead of run, except the SFT warm starts, which
run for real for one step on the CPU (the RL jobs' model.init_from must hold
a saved model); the metrics the scripts read are stand-ins. Needs BUILD's
rl-driver (any build). Prints one line a job; exits 1 when any check
failed.
"""
import importlib
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "integration", "lib"))
sys.path.insert(0, os.path.join(ROOT, "bench"))
import jobs  # noqa: E402

failed = []


def check(work, args, expect_ok=True, env=None, preexec_fn=None, timeout=600):
    a, i = [], 0
    while i < len(args):  # --check takes neither
        if args[i] in ("--bind", "--log-level"):
            i += 2
            continue
        a.append(args[i])
        i += 1
    cfg = " ".join(os.path.basename(x) for x in a if x.endswith(".yaml") and "cluster" not in x)
    out = [x for x in a if x.startswith("trainer.output_dir=")]
    p = subprocess.run([jobs.DRIVER, "--check"] + a, cwd=work, capture_output=True, text=True)
    msg = (p.stdout + p.stderr).strip().splitlines()
    print("gpu_dryrun_configs: %s %s (%s)%s" % ("ok" if p.returncode == 0 else "FAILED", cfg, out[-1] if out else "",
                                                ": " + " | ".join(msg[-5:]) if p.returncode else ""), file=sys.__stdout__)
    if p.returncode:
        failed.append(cfg)
    if cfg == "arith_sft.yaml":  # the RL jobs start from its model
        q = subprocess.run([jobs.DRIVER] + list(args) + ["actor.device=cpu", "trainer.total_steps=1"], cwd=work,
                           capture_output=True, text=True, timeout=timeout)
        if q.returncode:
            print("gpu_dryrun_configs: the one-step SFT warm start failed:\n" + (q.stdout + q.stderr)[-2000:],
                  file=sys.__stdout__)
            failed.append("sft (one step)")
    return 0, ""


def main():
    if not os.path.exists(jobs.DRIVER):
        print("gpu_dryrun_configs: %s not built" % jobs.DRIVER)
        return 1
    jobs.run_driver = check
    jobs.metrics = lambda path: [{"step": s, "timing_s/step": 1.0} for s in range(1, 6)]
    # the device's sizes: none of the dry run's shrinking
    for k in list(os.environ):
        if k.startswith(("RL_BENCH_GPU_RL_", "RL_BENCH_GPU_E2E_")):
            del os.environ[k]
    os.environ["RL_BENCH_GPU_RL_DEVICE"] = os.environ["RL_BENCH_GPU_E2E_DEVICE"] = "cpu"  # no nvidia-smi probe
    real_exists = os.path.exists
    os.path.exists = lambda f: f.endswith("metrics.jsonl") or real_exists(f)
    out = tempfile.mkdtemp(prefix="rlrt-gpu-dryrun-configs-")
    rc = 0
    for name in ("bench_gpu_rl", "bench_gpu_e2e"):
        sys.argv = [name, "--out", os.path.join(out, "e2e.md")]
        devnull = open(os.devnull, "w")
        real_stdout, sys.stdout = sys.stdout, devnull  # the scripts' own figures are stand-ins
        try:
            r = importlib.import_module(name).main()
        finally:
            sys.stdout = real_stdout
        if name == "bench_gpu_rl" and r not in (0, None):
            print("gpu_dryrun_configs: bench_gpu_rl.main() returned %s" % r)
            rc = 1
    os.path.exists = real_exists
    print("gpu_dryrun_configs: %s" % ("FAILED: " + ", ".join(failed) if failed else
                                     "every job of bench_gpu_rl.py and bench_gpu_e2e.py at its device sizes passes rl-driver --check"))
    return 1 if failed or rc else 0


if __name__ == "__main__":
    sys.exit(main())
