#!/usr/bin/python3
"""bench_async_report.py — writes the bench-async section of the results
page from what bench/bench_async.sh left in --dir (env.txt, runs.tsv and the
sync/async runs' metrics.jsonl), between the <!-- bench-async:begin/end -->
markers, and prints the `bench:` lines. Every number is computed here.

Standard library only (run with /usr/bin/python3).
"""
import argparse
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_rl_report import (PHASES, Run, code, fmt, mean, pts, read_env, read_runs,  # noqa: E402
                             replace_section, table)

SKIP = 2  # first steps left out of the step-time means (start-up, first prefetch)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dir", required=True)
    ap.add_argument("--out", default="docs/RESULTS.md")
    a = ap.parse_args()
    env = read_env(os.path.join(a.dir, "env.txt"))
    runs = {r["name"]: r for r in read_runs(os.path.join(a.dir, "runs.tsv"))}
    sync, asy = Run(a.dir, runs["sync"], 1e9), Run(a.dir, runs["async"], 1e9)

    def steptime(run):
        v = [r["timing_s/step"] for r in run.rows if r.get("step", 0) > SKIP and "timing_s/step" in r]
        return mean(v)

    ts, ta = steptime(sync), steptime(asy)
    ratio = ta / ts if ts and math.isfinite(ts) else float("nan")
    fs, fa = sync.after(), asy.after()
    delta = fa - fs if fs is not None and fa is not None else float("nan")
    out = ["## One-step-off asynchronous training (`make bench-async`)\n"]
    out.append(
        "This section is generated in full by `make bench-async` (`bench/bench_async.sh` runs the "
        "jobs, `bench/bench_async_report.py` writes the section); do not edit it by hand. Run on "
        f"{env.get('date_utc')} at commit `{env.get('commit')}`"
        + (" (with uncommitted changes)" if env.get("dirty", "0") not in ("", "0") else "")
        + f", {env.get('nproc')} CPU cores ({env.get('cpu')}), load average "
        f"{env.get('loadavg_start')} at the start and {env.get('loadavg_end')} at the end (a shared "
        f"machine). The whole bench took {env.get('bench_wall_s')} s.\n")
    out.append(
        "The same GRPO job from one SFT warm start, run twice in this bench: synchronously "
        "(`trainer.staleness=0`, verl's order) and one step off (`trainer.staleness=1`: the rollout "
        "generates step k+1's samples with the weights it holds while the actor trains step k, "
        f"corrected by TIS with cap {env.get('tis')}). Step times are means of `timing_s/step` "
        f"after the first {SKIP} steps.\n")
    out.append(code([runs[n]["command"] for n in ("sft", "sync", "async")]) + "\n")
    rows = []
    for name, run in (("sync", sync), ("async", asy)):
        a_, s_ = run.best()
        rows.append([name, run.steps, fmt(steptime(run)), fmt(run.before()), fmt(run.after()),
                     f"{fmt(a_)} (step {s_})" if a_ is not None else "–",
                     fmt(run.mean("async/staleness_mean")) if name == "async" else "0",
                     fmt(run.mean("tis/ratio_mean"), 4) if name == "async" else "–",
                     fmt(run.mean("tis/capped_frac"), 4) if name == "async" else "–",
                     fmt(run.mean("tis/mismatch_kl"), 5) if name == "async" else "–", run.status()])
    out.append(table(["run", "steps", "s / step", "val acc before", "final", "best",
                      "staleness (mean)", "TIS ratio (mean)", "TIS capped share",
                      "mismatch KL", "status"], rows) + "\n")
    prow = []
    for name, run in (("sync", sync), ("async", asy)):
        prow.append([name] + [fmt(run.mean("timing_s/" + p)) for p in PHASES + ["step"]])
    out.append("Seconds per step by phase (means over all steps; in the async run `gen` is the wait "
               "for samples generated during the previous step, and `sync_weights` includes waiting "
               "for the rollout to finish the next step's samples):\n")
    out.append(table(["run"] + PHASES + ["step"], prow) + "\n")
    # a control: the actor's update does the same work in both runs, so its
    # time ratio shows how much the machine's speed changed between them
    cu = asy.mean("timing_s/update_actor") / sync.mean("timing_s/update_actor")
    out.append(f"Control: `update_actor`, the same work in both runs, took {cu:.3f} times as long in "
               "the async run as in the sync run"
               + (" — the machine's speed changed between the two runs (a shared machine), so "
                  "the step-time ratio below mixes that change with the overlap; the overlap "
                  "itself can at most hide the async run's generation." if abs(cu - 1) > 0.1
                  else ", so the runs saw about the same machine.") + "\n")
    out.append(f"`bench: async_step_time_ratio = {ratio:.3f}` (target ≤ 0.65: "
               + ("met" if ratio <= 0.65 else "not met")
               + f"); `bench: async_val_acc_delta = {delta:+.3f}` (target ≥ −0.03: "
               + ("met" if delta >= -0.03 else "not met") + f", {pts(delta)} points).\n")
    page = replace_section(a.out, "bench-async", "\n".join(out))
    with open(a.out + ".tmp", "w") as f:
        f.write(page)
    os.replace(a.out + ".tmp", a.out)
    print(f"bench: async_step_time_ratio = {ratio:.3f}")
    print(f"bench: async_val_acc_delta = {delta:.3f}")
    print(f"bench: async_update_time_control = {cu:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
