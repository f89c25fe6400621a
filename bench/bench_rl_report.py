#!/usr/bin/python3
"""bench_rl_report.py — writes the results page of `make bench-rl`.

Reads what bench/bench_rl.sh left in --dir:
  env.txt     machine, commit, knobs, load average, total wall time
  runs.tsv    one line per rl-driver run: name, kind (sft|estimator|seed),
              seed, wall seconds, exit code, the exact command
  <name>/metrics.jsonl   that run's metrics, one JSON object per step
and writes its section of the page (--out, default docs/RESULTS.md) between
the <!-- bench-rl:begin/end --> markers, leaving the other benchmarks'
sections as they are. Every number on
the page is computed here from those files; the prose around the tables says
only what the numbers mean, and every comparative sentence is computed too.
Prints `bench: name = value` lines for the headline numbers.

Standard library only (run with /usr/bin/python3).
"""
import argparse
import json
import math
import os
import sys

PHASES = ["gen", "reward", "old_log_prob", "ref", "adv", "update_actor", "sync_weights"]
BUCKETS = ["easy", "medium", "hard"]


# ---- reading ---------------------------------------------------------------

def read_env(path):
    env = {}
    with open(path) as f:
        for line in f:
            k, _, v = line.rstrip("\n").partition("=")
            env[k] = v
    return env


def read_runs(path):
    runs = []
    with open(path) as f:
        header = f.readline().rstrip("\n").split("\t")
        for line in f:
            row = dict(zip(header, line.rstrip("\n").split("\t", len(header) - 1)))
            row["wall_s"] = float(row["wall_s"])
            row["rc"] = int(row["rc"])
            runs.append(row)
    return runs


def read_metrics(path):
    rows = []
    if not os.path.exists(path):
        return rows
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line:
                rows.append(json.loads(line))
    return rows


# ---- statistics ------------------------------------------------------------

def values(rows, key, steps=None):
    """Values of key over training steps (step >= 1), optionally in a range."""
    out = []
    for r in rows:
        if r.get("step", 0) < 1 or key not in r:
            continue
        if steps and not (steps[0] <= r["step"] <= steps[1]):
            continue
        v = r[key]
        if isinstance(v, (int, float)) and math.isfinite(v):
            out.append(float(v))
    return out


def mean(v):
    return sum(v) / len(v) if v else float("nan")


def val_curve(rows):
    """[(step, val/accuracy)] in step order (step 0 is before training)."""
    return [(r["step"], r["val/accuracy"]) for r in rows if "val/accuracy" in r]


def fmt(x, nd=3):
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "–"
    return f"{x:.{nd}f}"


def pts(x):
    """A difference of accuracies in percentage points, signed."""
    return "–" if x is None or not math.isfinite(x) else f"{100 * x:+.1f}"


def table(header, rows):
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(out)


def code(lines):
    return "```sh\n" + "\n".join(lines) + "\n```"


# ---- one run ---------------------------------------------------------------

class Run:
    def __init__(self, d, rec):
        self.rec = rec
        self.name = rec["name"]
        self.ok = rec["rc"] == 0
        self.rows = read_metrics(os.path.join(d, self.name, "metrics.jsonl"))
        self.curve = val_curve(self.rows)
        self.steps = max([r.get("step", 0) for r in self.rows] or [0])

    def before(self):
        v = [a for s, a in self.curve if s == 0]
        return v[0] if v else None

    def after(self):
        return self.curve[-1][1] if self.curve else None

    def best(self):
        if not self.curve:
            return None, None
        s, a = max(self.curve, key=lambda p: (p[1], -p[0]))
        return a, s

    def gain(self):
        b, a = self.before(), self.after()
        return a - b if a is not None and b is not None else None

    def mean(self, key):
        return mean(values(self.rows, key))

    def status(self):
        return "ok" if self.ok else f"failed (exit {self.rec['rc']})"


# ---- the page ----------------------------------------------------------------

PAGE_HEAD = ("# Results\n\n"
             "Each section of this page is generated in full by the benchmark it names, between "
             "its `<!-- bench-NAME:begin -->` and `<!-- bench-NAME:end -->` markers; a benchmark "
             "rewrites only its own section. Do not edit the sections by hand: rerun the "
             "benchmark.\n")


def replace_section(path, name, section):
    """The page at `path` with the section of benchmark `name` replaced (or
    appended); a page without markers (an older layout) is replaced whole."""
    begin, end = "<!-- %s:begin -->" % name, "<!-- %s:end -->" % name
    block = begin + "\n\n" + section + "\n" + end + "\n"
    try:
        with open(path) as f:
            page = f.read()
    except FileNotFoundError:
        page = ""
    if "<!-- bench-" not in page:
        return PAGE_HEAD + "\n" + block
    if begin in page and end in page:
        a = page.index(begin)
        b = page.index(end) + len(end)
        return page[:a] + block.rstrip("\n") + page[b:]
    return page.rstrip("\n") + "\n\n" + block


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dir", required=True, help="RL_BENCH_DIR of the bench")
    ap.add_argument("--out", default="docs/RESULTS.md")
    args = ap.parse_args()
    env = read_env(os.path.join(args.dir, "env.txt"))
    recs = read_runs(os.path.join(args.dir, "runs.tsv"))
    runs = {r["name"]: Run(args.dir, r) for r in recs}
    sft = runs.get("sft")
    est = [runs[r["name"]] for r in recs if r["kind"] == "estimator"]
    seeds = [runs[r["name"]] for r in recs if r["kind"] == "seed"]
    grpo = runs.get("grpo")
    aepo = runs.get("aepo")
    steps = int(env.get("steps", "0"))
    bench = []  # (name, value) lines for stdout

    P = []  # page paragraphs
    P.append("## Language-model RLVR (`make bench-rl`)")
    dirty = int(env.get("dirty", "0") or 0)
    P.append(
        "This section is generated in full by `make bench-rl` (`bench/bench_rl.sh` runs the "
        "jobs, `bench/bench_rl_report.py` writes the section from their `metrics.jsonl`); do "
        "not edit it by hand, rerun the bench. "
        f"Run on {env.get('date_utc', '?')} at commit `{env.get('commit', '?')}`"
        + (f" with {dirty} uncommitted change(s) to tracked files" if dirty else "")
        + f", {env.get('nproc', '?')} CPU cores ({env.get('cpu', '?')}), "
        f"1/5/15-minute load average {env.get('loadavg_start', '?')} at the start and "
        f"{env.get('loadavg_end', '?')} at the end. The whole bench took "
        f"{env.get('bench_wall_s', '?')} s.")
    P.append(
        "Every job runs on `" + env.get("cluster", "?") + "` with the built-in arithmetic task "
        "and the model of the LM recipes; each section shows the exact commands. Validation "
        "accuracy is greedy decoding on the held-out set of the job (`data.val_files`, "
        "`data.val_size`), logged as `val/accuracy`. A difference of accuracies is given in "
        "percentage points.")
    P.append(table(["knob", "value"], [
        ["`RL_BENCH_SFT_STEPS`", env.get("sft_steps", "")],
        ["`RL_BENCH_STEPS`", env.get("steps", "")],
        ["`RL_BENCH_ESTIMATORS`", f"`{env.get('estimators', '')}`"],
        ["`RL_BENCH_SEEDS`", f"`{env.get('seeds', '')}`" if env.get("seeds") else "(none)"],
        ["`RL_BENCH_EXTRA`", f"`{env.get('extra')}`" if env.get("extra") else "(none)"],
    ]))
    failed = [r for r in runs.values() if not r.ok]
    if failed:
        P.append("**Failed runs:** " + ", ".join(f"`{r.name}` ({r.status()}, see "
                                                 f"`{r.name}.log` in the bench directory)"
                                                 for r in failed) + ".")

    # ---- summary sentences, all computed ----
    S = []
    if sft and sft.curve:
        S.append(f"The SFT warm start reaches validation accuracy {fmt(sft.after())} after "
                 f"{sft.steps} steps in {sft.rec['wall_s']:.0f} s.")
    ok_est = [r for r in est if r.ok and r.after() is not None]
    for r in ok_est:
        if r.name == "grpo" and r.gain() is not None:
            verb = "gains" if r.gain() >= 0 else "loses"
            S.append(f"From it, GRPO {verb} {pts(abs(r.gain()))[1:]} points ({fmt(r.before())} → "
                     f"{fmt(r.after())} after {r.steps} steps, best {fmt(r.best()[0])}) in "
                     f"{r.rec['wall_s']:.0f} s of wall time.")
    if len(ok_est) > 1:
        hi = max(ok_est, key=lambda r: r.after())
        lo = min(ok_est, key=lambda r: r.after())
        S.append(f"Across the {len(ok_est)} estimators the final accuracy ranges from "
                 f"{fmt(lo.after())} ({lo.name}) to {fmt(hi.after())} ({hi.name}), a spread of "
                 f"{100 * (hi.after() - lo.after()):.1f} points, each from one run with "
                 f"trainer.seed=1.")
    gs = [r for r in ([grpo] if grpo else []) + seeds if r.ok and r.gain() is not None]
    if len(gs) > 1:
        g = [r.gain() for r in gs]
        S.append(f"GRPO over {len(gs)} seeds gains {pts(min(g))} to {pts(max(g))} points "
                 f"(final accuracy {fmt(min(r.after() for r in gs))}–"
                 f"{fmt(max(r.after() for r in gs))}), so a difference between estimators "
                 f"smaller than {100 * (max(g) - min(g)):.1f} points is within the seed-to-seed "
                 "spread measured here.")
    if grpo and grpo.ok:
        sh = values(grpo.rows, "perf/driver_transfer_share")
        if sh:
            S.append(f"In GRPO the driver's own computation plus dispatch and transfer take "
                     f"{100 * mean(sh):.1f} % of step time on average over {len(sh)} steps.")
    if S:
        P.append("### Summary")
        P.append(" ".join(S))

    # ---- warm start ----
    if sft:
        P.append("### Warm start (SFT)")
        P.append(code([sft.rec["command"]]))
        if sft.curve:
            P.append(table(["SFT step"] + [str(s) for s, _ in sft.curve],
                           [["val accuracy"] + [fmt(a) for _, a in sft.curve]]))
        loss = values(sft.rows, "sft/loss")
        st = values(sft.rows, "timing_s/step")
        vt = values(sft.rows, "timing_s/val")
        P.append(f"Status: {sft.status()}. Wall time {sft.rec['wall_s']:.1f} s for "
                 f"{sft.steps} steps (worker start-up and validation included); "
                 f"{fmt(mean(st))} s per training step on average, {fmt(mean(vt))} s per "
                 f"validation; `sft/loss` {fmt(loss[0] if loss else None)} at step 1 and "
                 f"{fmt(loss[-1] if loss else None)} at step {sft.steps}.")
        bench.append(("sft_val_accuracy", fmt(sft.after())))
        bench.append(("sft_wall_s", f"{sft.rec['wall_s']:.0f}"))

    # ---- estimators ----
    if est:
        P.append("### RL estimators from the warm start")
        P.append(f"Each run: {steps} steps from the warm start above, trainer.seed=1, the "
                 "estimator's example job (`examples/arith_<name>.yaml`) unchanged apart from "
                 "the overrides on its command line.")
        P.append(code([r.rec["command"] for r in est]))
        rows = []
        for r in est:
            b, bs = r.best()
            rows.append([r.name, fmt(r.before()), fmt(r.after()),
                         f"{fmt(b)} (step {bs})" if b is not None else "–", pts(r.gain()),
                         f"{r.rec['wall_s']:.0f}", r.steps, r.status()])
            bench += [(f"{r.name}_val_accuracy_before", fmt(r.before())),
                      (f"{r.name}_val_accuracy_after", fmt(r.after())),
                      (f"{r.name}_wall_s", f"{r.rec['wall_s']:.0f}")]
        P.append(table(["estimator", "val acc before", "val acc after", "best (at step)",
                        "gain (points)", "wall s", "steps", "status"], rows))
        P.append("### Seconds per step by phase")
        P.append("Means over all training steps of each run's `timing_s/*` metrics; `step` is "
                 "the whole step (validation excluded), throughput is `perf/throughput` "
                 "(response tokens per second of step time).")
        rows = []
        for r in est:
            rows.append([r.name] + [fmt(r.mean("timing_s/" + p)) for p in PHASES] +
                        [fmt(r.mean("timing_s/step")), fmt(r.mean("perf/throughput"), 0)])
        P.append(table(["estimator"] + PHASES + ["step", "tokens/s"], rows))

    # ---- GRPO step breakdown ----
    if grpo and grpo.ok and grpo.rows:
        P.append("### Where a GRPO step goes")
        P.append(f"From the `grpo` run above: the mean of each `timing_s/*` metric over its "
                 f"{grpo.steps} steps and its share of the mean step.")
        tot = grpo.mean("timing_s/step")
        rows, shares = [], []
        for p in PHASES:
            m = grpo.mean("timing_s/" + p)
            rows.append([p, fmt(m), fmt(100 * m / tot, 1) if tot > 0 else "–"])
            if math.isfinite(m):
                shares.append((m, p))
        rest = tot - sum(m for m, _ in shares)
        rows.append(["(between phases)", fmt(rest), fmt(100 * rest / tot, 1) if tot > 0 else "–"])
        rows.append(["**step**", f"**{fmt(tot)}**", "100"])
        P.append(table(["phase", "mean s", "% of step"], rows))
        if shares and tot > 0:
            m, p = max(shares)
            val = values(grpo.rows, "timing_s/testing")
            P.append(f"The largest phase is `{p}` at {100 * m / tot:.1f} % of the step. "
                     f"Throughput is {grpo.mean('perf/throughput'):.0f} response tokens/s. "
                     f"Validation (`timing_s/testing`, not part of the step) took "
                     f"{fmt(mean(val))} s on average over {len(val)} validation"
                     f"{'s' if len(val) != 1 else ''}.")
        bench.append(("grpo_s_per_step", fmt(tot)))

    # ---- driver share ----
    ok = [r for r in est + seeds if r.ok and values(r.rows, "perf/driver_transfer_share")]
    if ok:
        P.append("### Driver and transfer share")
        P.append("`perf/driver_transfer_share` is, per step, (dispatch + transfer + queueing "
                 "time + the driver's own computation) / step time. Dispatch + transfer is a "
                 "call's wall time minus the slowest rank's handler time as the workers report "
                 "it in each REPLY (`perf/dispatch_transfer_s`); the driver's computation is "
                 "advantages and KL (`perf/driver_compute_s`).")
        rows = []
        for r in ok:
            sh = values(r.rows, "perf/driver_transfer_share")
            rows.append([r.name, fmt(100 * mean(sh), 2), fmt(100 * min(sh), 2),
                         fmt(100 * max(sh), 2), fmt(r.mean("perf/dispatch_transfer_s"), 4),
                         fmt(r.mean("perf/driver_compute_s"), 4)])
        P.append(table(["run", "share mean %", "min %", "max %", "dispatch+transfer s/step",
                        "driver compute s/step"], rows))
        m = [mean(values(r.rows, "perf/driver_transfer_share")) for r in ok]
        P.append(f"Over these {len(ok)} runs the mean share lies between "
                 f"{100 * min(m):.2f} % and {100 * max(m):.2f} %.")
        if grpo in ok:
            bench.append(("grpo_driver_transfer_share",
                          fmt(mean(values(grpo.rows, "perf/driver_transfer_share")), 4)))

    # ---- learning curves ----
    curves = [r for r in est + seeds if r.curve]
    if curves:
        P.append("### Learning curves")
        P.append("`val/accuracy` at every validation of each run (step 0 is the warm start, "
                 "validated by the RL job itself; validation every `trainer.val_every` steps "
                 "and at the last step).")
        cols = sorted({s for r in curves for s, _ in r.curve})
        rows = []
        for r in curves:
            d = dict(r.curve)
            label = r.name if r.rec["kind"] == "estimator" else f"grpo (seed {r.rec['seed']})"
            rows.append([label] + [fmt(d.get(s)) for s in cols])
        P.append(table(["run \\ step"] + [str(s) for s in cols], rows))

    # ---- seeds ----
    if seeds:
        P.append("### GRPO across seeds")
        P.append("The same GRPO job from the same warm start with other `trainer.seed` values "
                 "(sampling of prompts and responses changes; the warm start does not).")
        P.append(code([r.rec["command"] for r in seeds]))
        rows = []
        for r in ([grpo] if grpo else []) + seeds:
            b, bs = r.best()
            rows.append([r.rec["seed"], fmt(r.before()), fmt(r.after()),
                         f"{fmt(b)} (step {bs})" if b is not None else "–", pts(r.gain()),
                         f"{r.rec['wall_s']:.0f}", r.status()])
        P.append(table(["trainer.seed", "val acc before", "after", "best (at step)",
                        "gain (points)", "wall s", "status"], rows))
        gs2 = [r for r in ([grpo] if grpo else []) + seeds if r.ok and r.after() is not None]
        if len(gs2) > 1:
            a = [r.after() for r in gs2]
            mu = mean(a)
            sd = math.sqrt(sum((x - mu) ** 2 for x in a) / (len(a) - 1))
            P.append(f"Final accuracy over the {len(a)} seeds: mean {fmt(mu)}, sample standard "
                     f"deviation {fmt(sd)}.")
            bench.append(("grpo_seeds_val_accuracy_after_mean", fmt(mu)))

    # ---- AEPO ----
    if aepo and aepo.ok and aepo.rows:
        keys = sorted({k for r in aepo.rows for k in r if k.startswith("aepo/")})
        n = aepo.steps
        w = max(1, n // 10)
        mid = max(1, (n - w) // 2 + 1)
        windows = []
        for lo in (1, mid, n - w + 1):
            win = (lo, lo + w - 1)
            if win not in windows and lo >= 1:
                windows.append(win)
        P.append("### AEPO: high-window-entropy (HWE) counts against their targets")
        P.append(f"From the `aepo` run above. Means over windows of {w} steps of "
                 "`aepo/hwe_<bucket>_mean` (mean HWE tokens per response of that difficulty "
                 "bucket; only steps with rows in the bucket count), `aepo/target_<bucket>`, "
                 "`aepo/alpha_<bucket>` and the threshold `aepo/tau`.")
        rows = []
        gaps = {b: [] for b in BUCKETS}
        for win in windows:
            row = [f"{win[0]}–{win[1]}" if win[1] > win[0] else str(win[0])]
            for b in BUCKETS:
                h = mean(values(aepo.rows, f"aepo/hwe_{b}_mean", win))
                t = mean(values(aepo.rows, f"aepo/target_{b}", win))
                a = mean(values(aepo.rows, f"aepo/alpha_{b}", win))
                row.append(f"{fmt(h, 2)} / {fmt(t, 2)} ({fmt(a, 2)})")
                if math.isfinite(h) and math.isfinite(t):
                    gaps[b].append(abs(h - t))
            row.append(fmt(mean(values(aepo.rows, "aepo/tau", win))))
            rows.append(row)
        P.append(table(["steps"] + [f"{b} HWE / target (α)" for b in BUCKETS] + ["τ"], rows))
        S = []
        g = [x for b in BUCKETS for x in gaps[b]]
        if g:
            S.append(f"In these windows the mean HWE count is within {max(g):.2f} of its "
                     "bucket's mean target.")
        er = values(aepo.rows, "aepo/entropy_reward_mean")
        if er:
            S.append(f"The entropy reward adds {mean(er):.3f} to the mean score on average "
                     f"(between {min(er):.3f} and {max(er):.3f} per step).")
        kc = values(aepo.rows, "actor/reward_kl_coef")
        if grpo and grpo.ok and aepo.after() is not None and grpo.after() is not None:
            rel = "higher than" if aepo.after() > grpo.after() else (
                "lower than" if aepo.after() < grpo.after() else "equal to")
            gk = values(grpo.rows, "actor/reward_kl_coef")
            S.append(f"AEPO ends {rel} GRPO ({fmt(aepo.after())} vs {fmt(grpo.after())}); "
                     f"besides the entropy shaping, its job puts a KL term in the reward with "
                     f"coefficient {fmt(mean(kc), 3)} (mean of `actor/reward_kl_coef`), which "
                     + ("the GRPO job does not log." if not gk else
                        f"is {fmt(mean(gk), 3)} in the GRPO job."))
        if S:
            P.append(" ".join(S))
        P.append("Every `aepo/*` metric over all steps:")
        rows = []
        for k in keys:
            v = values(aepo.rows, k)
            if not v:
                continue
            rows.append([f"`{k}`", len(v), fmt(v[0], 4), fmt(mean(v), 4), fmt(min(v), 4),
                         fmt(max(v), 4), fmt(v[-1], 4)])
        P.append(table(["metric", "steps", "first", "mean", "min", "max", "last"], rows))

    section = "\n\n".join(P) + "\n"
    out_dir = os.path.dirname(args.out)
    if out_dir:
        os.makedirs(out_dir, exist_ok=True)
    tmp = args.out + ".tmp"
    with open(tmp, "w") as f:
        f.write(replace_section(args.out, "bench-rl", section))
    os.replace(tmp, args.out)
    for k, v in bench:
        print(f"bench: {k} = {v}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
