"""bench_faults.py — `make bench-faults`: N runs of a short GRPO job, each with
worker processes of random roles killed (SIGKILL) at random moments by the
clock; every run must complete and log the same metrics, value for value,
and end with the same weights as a fault-free run of the same job.

Prints `bench: fault_runs_completed = k/N` and
`bench: fault_runs_equal_metrics = k/N` (target N/N for both).
Knobs: RL_BENCH_FAULT_RUNS (default 10), RL_BENCH_FAULT_KILLS (kills per run,
default 2), RL_BENCH_FAULT_SEED (default 1).
"""
import os
import random
import shutil
import signal
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests",
                                "integration"))
import fault_recovery as fr  # noqa: E402  (the job, its settings and the comparison)


def main():
    runs = int(os.environ.get("RL_BENCH_FAULT_RUNS", "10"))
    kills = int(os.environ.get("RL_BENCH_FAULT_KILLS", "2"))
    rng = random.Random(int(os.environ.get("RL_BENCH_FAULT_SEED", "1")))
    work = tempfile.mkdtemp(prefix="rlrt-bench-faults-")
    completed = equal = 0
    try:
        cfile = os.path.join(work, "cluster.yaml")
        fr.cluster(cfile)
        # recoveries allowed per run: the kills plus the collateral ones
        rl = fr.RL + ["trainer.total_steps=40", "trainer.max_recoveries=%d" % (2 * kills + 2)]
        fr.finish(fr.start(work, cfile, "arith_sft.yaml", fr.SFT + ["trainer.output_dir=runs/sft"]),
                  "sft")
        t0 = time.time()
        fr.finish(fr.start(work, cfile, "arith_grpo.yaml", rl + ["trainer.output_dir=runs/ref"]), "ref")
        t_ref = time.time() - t0
        print("fault-free run: %.1f s" % t_ref)
        final = "checkpoints/step_40/model.safetensors"
        for i in range(runs):
            name = "runs/f%d" % i
            p = fr.start(work, cfile, "arith_grpo.yaml", rl + ["trainer.output_dir=" + name])
            t_start = time.time()
            done = []
            for k in range(kills):
                at = rng.uniform(0.05, 0.9) * t_ref
                while time.time() - t_start < at and p.poll() is None:
                    time.sleep(0.01)
                kids = [(pid, cmd) for pid, cmd in fr.children(p.pid) if "--role" in cmd]
                # only while the job trains: once its last checkpoint is written the
                # driver is shutting down, and a worker killed then is (rightly)
                # reported as one that did not exit cleanly
                if not kids or p.poll() is not None or os.path.exists(os.path.join(work, name, final)):
                    break
                pid, cmd = rng.choice(kids)
                role = cmd[cmd.index("--role") + 1] + "/" + cmd[cmd.index("--rank") + 1]
                try:
                    os.kill(pid, signal.SIGKILL)
                    done.append("%s at %.2f s" % (role, time.time() - t_start))
                except ProcessLookupError:
                    pass
            out, _ = p.communicate(timeout=600)
            ok = p.returncode == 0
            completed += ok
            same = False
            if ok:
                try:
                    fr.same(work, "runs/ref", name, final, name)
                    same = True
                except SystemExit as e:
                    print("  " + str(e))
            equal += same
            print("run %d: killed %s; %s in %.1f s%s" % (
                i + 1, ", ".join(done) or "nothing (the job had finished)",
                "completed" if ok else "FAILED (exit %d)" % p.returncode, time.time() - t_start,
                ", metrics and weights equal the fault-free run" if same else ""))
            if not ok:
                print("\n".join("  | " + line for line in out.splitlines()[-40:]))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print("bench: fault_runs_completed = %d/%d" % (completed, runs))
    print("bench: fault_runs_equal_metrics = %d/%d" % (equal, runs))
    return 0 if completed == runs and equal == runs else 1


if __name__ == "__main__":
    sys.exit(main())
