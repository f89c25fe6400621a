"""bench_async_report.py — the page that `make bench-async` writes.

Runs bench/bench_async_report.py on a bench directory written here the way
bench/bench_async.sh leaves it (env.txt, runs.tsv, cluster-pinned.yaml and
each run's metrics.jsonl), with step times and cores busy chosen so that
every printed number is known:
  * the step-time ratios (async, pinned_sync, async_shared over sync) and
    the validation deltas;
  * the cores busy: the sync run's core utilisation (perf/cpu_cores_busy /
    perf/cpu_cores) and the async arm's floor (its CPU seconds a step over
    all the cores, over the sync step), with the page saying the target is
    below the floor when it is, and not when it is not;
  * runs of before perf/cpu_cores_busy (no such metric) give no utilisation
    lines and no cores-busy paragraph;
  * --split-cores: the rollout's share of the cores from the sync run;
  * the text outside the section's markers is kept.
Exit 0 = pass.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "bench", "bench_async_report.py")
ORDER = ["sync", "pinned_sync", "async", "async_shared", "async_shared_2", "async_2",
         "pinned_sync_2", "sync_2"]


def write_run(d, name, step_s, busy, cores, gen_s, accs):
    """10 steps of step_s seconds (gen_s of them in gen), busy cores of
    `cores` (None: no perf/cpu_* metrics); validation at 0, 5 and 10."""
    os.makedirs(os.path.join(d, name))
    rows = [{"step": 0, "val/accuracy": accs[0]}]
    for s in range(1, 11):
        r = {"step": s, "timing_s/step": step_s if s > 2 else 9.0, "timing_s/gen": gen_s,
             "timing_s/update_actor": 0.1}
        if busy is not None:
            r["perf/cpu_cores_busy"], r["perf/cpu_cores"] = (busy if s > 2 else 0.1), cores
        if name.startswith("async"):
            r.update({"async/staleness_mean": 1.0, "tis/ratio_mean": 1.0, "tis/capped_frac": 0.0,
                      "tis/mismatch_kl": 0.001, "async/rounds_from_queue": 2.0,
                      "async/unused_rounds": 0.0})
        if s in (5, 10):
            r["val/accuracy"] = accs[s // 5]
        rows.append(r)
    with open(os.path.join(d, name, "metrics.jsonl"), "w") as f:
        f.write("".join(json.dumps(r) + "\n" for r in rows))


def write_bench(d, times, busy, cores=2):
    """times/busy: arm -> s/step / cores busy (None: no perf metrics)."""
    os.makedirs(d)
    with open(os.path.join(d, "env.txt"), "w") as f:
        f.write("date_utc=2026-11-27T00:00:00Z\ncommit=abc1234\ndirty=0\nnproc=%d\ncpu=test\n"
                "loadavg_start=0 0 0\ntis=2.0\nrollout_cores_used=1\nloadavg_end=0 0 0\n"
                "bench_wall_s=10\n" % cores)
    with open(os.path.join(d, "cluster-pinned.yaml"), "w") as f:
        f.write('roles:\n  rollout:\n    placement:\n      - {rank: 0, node: local, cpus: "0"}\n'
                '  actor:\n    placement:\n      - {rank: 0, node: local, cpus: "1"}\n')
    with open(os.path.join(d, "runs.tsv"), "w") as f:
        f.write("name\tkind\testimator\twarm\tseed\twall_s\trc\tcommand\n")
        for n in ["sft"] + ORDER:
            f.write("%s\trl\tgrpo\t1\t1\t1.0\t0\trl-driver %s\n" % (n, n))
    os.makedirs(os.path.join(d, "sft"))
    for n in ORDER:
        arm = n[:-2] if n.endswith("_2") else n
        accs = (0.6, 0.8, 0.9) if arm != "async" else (0.6, 0.8, 0.88)
        write_run(d, n, times[arm], busy.get(arm) if busy else None, cores, 0.05, accs)


def report(d, out, *extra):
    return subprocess.run([sys.executable, SCRIPT, "--dir", d, "--out", out] + list(extra),
                          capture_output=True, text=True)


def bench_lines(stdout):
    return {l.split()[1]: float(l.split("=")[1]) for l in stdout.splitlines()
            if l.startswith("bench: ")}


def check(cond, what):
    if not cond:
        raise SystemExit("FAIL: " + what)


def main():
    work = tempfile.mkdtemp(prefix="rlrt-bar-")
    try:
        times = {"sync": 0.2, "pinned_sync": 0.3, "async": 0.25, "async_shared": 0.19}
        busy = {"sync": 1.8, "pinned_sync": 1.0, "async": 1.3, "async_shared": 1.9}
        d, out = os.path.join(work, "b1"), os.path.join(work, "page.md")
        write_bench(d, times, busy)
        with open(out, "w") as f:
            f.write("before\n<!-- bench-async:begin -->\nold\n<!-- bench-async:end -->\nafter\n")
        p = report(d, out)
        check(p.returncode == 0, "report failed: " + p.stderr)
        b = bench_lines(p.stdout)
        want = {"async_step_time_ratio": 0.25 / 0.2, "async_step_time_ratio_pinned_sync": 0.25 / 0.3,
                "async_shared_step_time_ratio": 0.19 / 0.2, "async_val_acc_delta": -0.02,
                "async_shared_val_acc_delta": 0.0, "async_update_time_control": 1.0,
                "sync_core_utilisation": 0.9,
                "async_step_time_ratio_floor": 1.3 * 0.25 / (2 * 0.2)}
        for k, v in want.items():
            check(k in b and abs(b[k] - v) < 1.5e-3, "%s = %s, expected %.3f" % (k, b.get(k), v))
        page = open(out).read()
        check(page.startswith("before\n<!-- bench-async:begin -->") and page.endswith(
            "<!-- bench-async:end -->\nafter\n") and "\nold\n" not in page, "markers: " + page[:200])
        check("kept 1.80 of the 2 cores busy" in page, "the utilisation sentence")
        check("could not go below 0.813 of the synchronous step" in page, "the floor sentence")
        check("The target 0.65 is below that floor" in page, "the floor verdict")
        check("| async | 1.30 | 0.325 | 0.250 | 0.163 |" in page, "the cores-busy row of async")
        print("ok: ratios, deltas, utilisation 0.900 and floor 0.813 (target below it)")

        # a machine with idle cores: the floor is below the target
        d = os.path.join(work, "b2")
        write_bench(d, {"sync": 0.4, "pinned_sync": 0.45, "async": 0.24, "async_shared": 0.3},
                    {"sync": 8.0, "pinned_sync": 7.0, "async": 12.0, "async_shared": 10.0}, cores=16)
        p = report(d, out)
        b = bench_lines(p.stdout)
        check(p.returncode == 0 and abs(b["sync_core_utilisation"] - 0.5) < 1e-3
              and abs(b["async_step_time_ratio_floor"] - 12 * 0.24 / (16 * 0.4)) < 1e-3,
              "16 cores: %s %s" % (b, p.stderr))
        page = open(out).read()
        check("below that floor" not in page and "kept 8.00 of the 16 cores busy" in page,
              "16 cores page")
        print("ok: 16 cores half idle: utilisation 0.500, floor 0.450 (no verdict)")

        # runs from before perf/cpu_cores_busy: no cores-busy lines
        d = os.path.join(work, "b3")
        write_bench(d, times, None)
        p = report(d, out)
        b = bench_lines(p.stdout)
        check(p.returncode == 0 and "async_step_time_ratio" in b
              and "sync_core_utilisation" not in b and "async_step_time_ratio_floor" not in b,
              "old runs: %s %s" % (b, p.stderr))
        check("Cores busy" not in open(out).read(), "old runs: a cores-busy paragraph")
        print("ok: runs without perf/cpu_cores_busy: no utilisation lines")

        p = report(os.path.join(work, "b2"), out, "--split-cores", "16")
        check(p.returncode == 0 and p.stdout.strip() == "2", "split: %r %s" % (p.stdout, p.stderr))
        print("ok: --split-cores 16 gives the rollout round(16 × 0.05 / 0.4) = 2 cores")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
