#!/usr/bin/python3
"""bench_rl_report.py — writes the results page of `make bench-rl`.

Reads what bench/bench_rl.sh left in --dir:
  env.txt     machine, commit, knobs, load average, total wall time
  runs.tsv    one line per rl-driver run: name, kind (sft|rl|extend),
              estimator, warm start, seed, wall seconds, exit code, the exact
              command (an `extend` line is an rl run's resumed continuation,
              RL_BENCH_EXTEND_STEPS)
  <name>/metrics.jsonl   that run's metrics, one JSON object per step
and writes its section of the page (--out, default docs/RESULTS.md) between
the <!-- bench-rl:begin/end --> markers, leaving the other benchmarks'
sections as they are. Every number on
the page is computed here from those files; the prose around the tables says
only what the numbers mean, and every comparative sentence is computed too.
Prints `bench: name = value` lines for the headline numbers.

With --short-of-target NAME it writes nothing: it exits 0 when the rl run
NAME finished, is below +25 points at its best validation within the budget,
and has RL time left in it (bench_rl.sh then extends it), else 1.

Standard library only (run with /usr/bin/python3).
"""
import argparse
import json
import math
import os
import sys

PHASES = ["gen", "reward", "old_log_prob", "ref", "adv", "update_actor", "sync_weights"]


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


# ---- one run ---------------------------------------------------------------

class Run:
    def __init__(self, d, rec, minutes, ext=None):
        self.rec, self.ext = rec, ext  # ext: the runs.tsv line of its extension, if any
        self.name = rec["name"]
        self.est, self.warm, self.seed = rec["estimator"], rec["warm"], rec["seed"]
        self.ok = rec["rc"] == 0 and (ext is None or ext["rc"] == 0)
        self.rows = read_metrics(os.path.join(d, self.name, "metrics.jsonl"))
        self.curve = val_curve(self.rows)
        self.steps = max([r.get("step", 0) for r in self.rows] or [0])
        # RL seconds at the end of each step: step time plus validation
        t, self.clock = 0.0, {0: 0.0}
        for r in self.rows:
            if r.get("step", 0) >= 1:
                t += r.get("timing_s/step", 0.0) + r.get("timing_s/testing", 0.0)
                self.clock[r["step"]] = t
        self.rl_s = t
        self.budget = 60.0 * minutes

    def before(self):
        v = [a for s, a in self.curve if s == 0]
        return v[0] if v else None

    def after(self):
        return self.curve[-1][1] if len(self.curve) > 1 else None

    def best(self):
        c = [p for p in self.curve if p[0] > 0]
        if not c:
            return None, None
        s, a = max(c, key=lambda p: (p[1], -p[0]))
        return a, s

    def gain(self):
        b, a = self.before(), self.after()
        return a - b if a is not None and b is not None else None

    def best_in_budget(self, upto=None):
        """Best validation accuracy reached within the RL time budget (and by
        step `upto`, if given)."""
        c = [a for s, a in self.curve if s > 0 and self.clock.get(s, 1e30) <= self.budget
             and (upto is None or s <= upto)]
        return max(c) if c else None

    def gain_in_budget(self, upto=None):
        b, a = self.before(), self.best_in_budget(upto)
        return a - b if a is not None and b is not None else None

    def window_means(self, key, n, upto=None):
        """Mean of key over n equal windows of the training steps (the first
        `upto` of them, if given)."""
        last = min(self.steps, upto) if upto else self.steps
        v = [(r["step"], r[key]) for r in self.rows
             if r.get("step", 0) >= 1 and isinstance(r.get(key), (int, float))]
        if not v or not last:
            return [None] * n
        out = []
        for i in range(n):
            lo, hi = i * last / n, (i + 1) * last / n
            seg = [x for s, x in v if lo < s <= hi]
            out.append(mean(seg) if seg else None)
        return out

    def mean(self, key, upto=None):
        return mean(values(self.rows, key, (1, upto) if upto else None))

    def status(self):
        if self.ok:
            return "ok"
        which = self.rec if self.rec["rc"] != 0 else self.ext
        return f"failed (exit {which['rc']})" + (" in its extension" if which is self.ext else "")


def sd(v):
    """Sample standard deviation (n - 1); 0 for one value."""
    if len(v) < 2:
        return 0.0
    m = mean(v)
    return math.sqrt(sum((x - m) ** 2 for x in v) / (len(v) - 1))


def pm(v, nd=3):
    v = [x for x in v if x is not None]
    return f"{mean(v):.{nd}f} ± {sd(v):.{nd}f}" if v else "–"


# ---- the section -------------------------------------------------------------

TITLES = {
    "bench-rl": ("Language-model RLVR", "`bench/bench_rl.sh` runs the jobs"),
    "bench-dapo": ("The DAPO toolbox, one knob at a time",
                   "`bench/bench_dapo.sh` names the variants and runs them with "
                   "`bench/bench_rl.sh`"),
    "bench-guidance": ("Off-policy guidance, off and on",
                       "`bench/bench_guidance.sh` names the two arms and runs them with "
                       "`bench/bench_rl.sh`"),
    "bench-rl-long": ("bench-rl's weakest warm start, 500 steps",
                      "`bench/bench_rl_long.sh` picks the warm start, seeds and steps and runs "
                      "the jobs with `bench/bench_rl.sh`"),
}


def rl_runs(d, runs, minutes):
    """The rl runs of runs.tsv, each with its extension line, if any."""
    ext = {r["name"]: r for r in runs if r["kind"] == "extend"}
    return [Run(d, r, minutes, ext.get(r["name"])) for r in runs if r["kind"] == "rl"]


def short_of_target(d, name, minutes):
    """(True if the finished rl run `name` is below +25 within the budget and
    has RL time left in it, the reason in words)."""
    r = next((r for r in rl_runs(d, read_runs(os.path.join(d, "runs.tsv")), minutes)
              if r.name == name), None)
    if r is None:
        return False, f"no rl run named {name} in runs.tsv"
    g = r.gain_in_budget()
    if not r.ok or g is None:
        return False, f"{name} failed or logged no validation: not extended"
    at = f"{name}: best gain {pts(g)} by step {r.steps}, {r.rl_s:.0f} s of RL of {r.budget:.0f}"
    if g >= 0.25:
        return False, at + ": at the target"
    if r.rl_s >= r.budget:
        return False, at + ": no budget left"
    return True, at + ": short of +25, extended"


def section(d, env, runs, minutes):
    name = env.get("section", "bench-rl")
    title, how = TITLES.get(name, (name, "`bench/bench_rl.sh` runs the jobs"))
    sft = [r for r in runs if r["kind"] == "sft"]
    rl = rl_runs(d, runs, minutes)
    steps = int(env.get("steps") or 0)
    extend = int(env.get("extend_steps") or 0)
    extended = [r for r in rl if r.ext]
    cap = steps if extend else None  # windows and phase means: the steps every run has
    planned = (len(env.get("estimators", "").split()) * len(env.get("warm", "").split())
               * len(env.get("seeds", "").split()))
    ests = []
    for r in rl:
        if r.est not in ests:
            ests.append(r.est)
    warm_acc = {}
    out, bench = [], []
    out.append(f"## {title} (`make {name}`)\n")
    out.append(
        f"This section is generated in full by `make {name}` ({how}, "
        "`bench/bench_rl_report.py` writes the section from their `metrics.jsonl`); do not edit it "
        f"by hand, rerun the bench. Run on {env.get('date_utc')} at commit `{env.get('commit')}`"
        + (" (with uncommitted changes)" if env.get("dirty", "0") not in ("", "0") else "")
        + f", {env.get('nproc')} CPU cores ({env.get('cpu')}), 1/5/15-minute load average "
        f"{env.get('loadavg_start')} at the start"
        + (f" and {env.get('loadavg_end')} at the end" if "loadavg_end" in env else "")
        + " (the machine is shared: step times depend on what else runs). "
        + (f"The whole bench took {env.get('bench_wall_s')} s.\n" if "bench_wall_s" in env else
           f"**The bench was stopped before it finished**: this section covers the {len(rl)} RL "
           f"runs it completed of the {planned} its knobs ask for.\n"))
    out.append(
        "Every job runs on `" + env.get("cluster", "examples/cluster-local.yaml") + "` with the "
        "built-in arithmetic task. Validation accuracy is greedy decoding on the held-out set of "
        "the job, logged as `val/accuracy`; a difference of accuracies is in percentage points. "
        f"RL time is the sum of the step and validation times the run logged; the targets are read "
        f"at {minutes} minutes of it: every warm start × seed at least +25 points over its warm "
        "start (best validation accuracy within the budget), and no run of any estimator below "
        "+15.\n")
    if extend:
        out.append(
            f"Every run trains {steps} steps. A run whose best validation accuracy by then is "
            f"below +25 points over its warm start, with RL time left in the {minutes}-minute "
            f"budget, goes on to step {extend} (`RL_BENCH_EXTEND_STEPS`): the same job resumed "
            f"from its checkpoint at step {steps} with `trainer.total_steps={extend}`, which "
            "continues bit for bit as the uninterrupted longer run would (resume is exact: "
            "docs/decisions/checkpoints-and-resume.md). The target asks whether each "
            f"run gets there within {minutes} minutes of RL, and {steps} steps take only part "
            f"of them. {len(extended)} of the {len(rl)} runs were extended; their final accuracy "
            f"is at step {extend}, and the summary also counts the runs at +25 by step "
            f"{steps}.\n")
    out.append(table(["knob", "value"], [
        ["`RL_BENCH_SFT_STEPS`", env.get("sft_steps")],
        ["`RL_BENCH_SFT_STOP_AT`", env.get("sft_stop_at", "(not recorded)")],
        ["`RL_BENCH_STEPS`", env.get("steps")],
        ["`RL_BENCH_EXTEND_STEPS`", env.get("extend_steps", "(not recorded: none)")],
        ["`RL_BENCH_WARM`", "`%s`" % env.get("warm")], ["`RL_BENCH_SEEDS`", "`%s`" % env.get("seeds")],
        ["`RL_BENCH_ESTIMATORS`", "`%s`" % env.get("estimators")],
        ["`RL_BENCH_MINUTES`", env.get("minutes")],
        ["`RL_BENCH_EXTRA`", "`%s`" % env.get("extra") if env.get("extra") else "(none)"]]) + "\n")

    # -- summary per estimator
    missing = [e for e in env.get("estimators", "").split() if e not in ests]
    rows, all_ok = [], not missing
    for e in ests:
        rs = [r for r in rl if r.est == e]
        gains = [r.gain_in_budget() for r in rs]
        gv = [g for g in gains if g is not None]
        n25 = sum(1 for g in gv if g >= 0.25)
        n25_cap = sum(1 for r in rs if (r.gain_in_budget(cap) or 0) >= 0.25)
        mn = min(gv) if gv else None
        per_est = len(env.get("warm", "").split()) * len(env.get("seeds", "").split())
        full = len(rs) >= per_est
        ok25 = full and len(gv) == len(rs) and n25 == len(rs)
        ok15 = full and len(gv) == len(rs) and mn is not None and mn >= 0.15
        all_ok = all_ok and ok25 and ok15
        verdict = (lambda ok: "met" if ok else "not met") if full else \
            (lambda ok: f"open ({len(rs)} of {per_est} runs)")
        rows.append([e, len(rs), pm([r.before() for r in rs]), pm([r.after() for r in rs]),
                     pm([r.best()[0] for r in rs]), pts(mean(gv)) if gv else "–", pts(mn)]
                    + ([f"{n25_cap}/{len(rs)}"] if extend else [])
                    + [f"{n25}/{len(rs)}", verdict(ok25), verdict(ok15)])
        tag = "".join(c if c.isalnum() or c == "_" else "_" for c in e)
        bench.append(f"bench: rl_{tag}_min_gain_points = {100 * mn:.1f}" if mn is not None else
                     f"bench: rl_{tag}_min_gain_points = nan")
        bench.append(f"bench: rl_{tag}_runs_at_25_points = {n25 / max(len(rs), 1):.3f}")
        if extend:
            bench.append(f"bench: rl_{tag}_runs_at_25_points_by_step_{steps} = "
                         f"{n25_cap / max(len(rs), 1):.3f}")
    out.append("### Summary\n")
    out.append(table(["estimator", "runs", "warm start acc", "final acc (mean ± sd)",
                      "best acc (mean ± sd)", f"mean gain in {minutes} min", "min gain"]
                     + ([f"runs ≥ +25 by step {steps}"] if extend else [])
                     + ["runs ≥ +25", "target: all ≥ +25", "target: none < +15"], rows) + "\n")
    if missing:
        out.append("Not run (the bench stopped first): " + ", ".join(f"`{e}`" for e in missing)
                   + ".\n")
    out.append("Both targets are " + ("met by every estimator." if all_ok else
               "not met by every estimator: the rows above say which.") + " Gains are the best "
               f"validation accuracy within {minutes} minutes of RL minus the warm start's.\n")

    # -- warm starts
    out.append("### Warm starts (SFT)\n")
    if env.get("sft_from"):
        out.append(f"The warm starts were not trained by this run: they are copies of those of "
                   f"`{env['sft_from']}` (`RL_BENCH_SFT_FROM`), made by the commands below.\n")
    out.append(code([r["command"] for r in sft]) + "\n")
    wrows = []
    for r in sft:
        run = Run(d, dict(r, estimator="-"), minutes)
        c = [(s, a) for s, a in run.curve]
        warm_acc[r["warm"]] = c[-1][1] if c else None
        shown = [(s, a) for i, (s, a) in enumerate(c) if s % 50 == 0 or i == len(c) - 1]
        wrows.append([r["warm"], " ".join(f"{s}:{a:.3f}" for s, a in shown), f"{r['wall_s']:.0f}",
                      fmt(run.window_means("sft/loss", 1)[0]), run.status()])
    if float(env.get("sft_stop_at") or 0) > 0:
        out.append(f"Each warm start is the SFT job stopped at its first validation (every 10 "
                   f"steps) at or above {env['sft_stop_at']} (`trainer.stop_at_val_accuracy`, "
                   f"`RL_BENCH_SFT_STOP_AT`), at most {env.get('sft_steps')} steps: warm starts "
                   f"of one accuracy from different seeds, each with the same headroom for the "
                   f"+25 target. The table shows every 50th step and the last.\n")
    out.append(table(["SFT trainer.seed", "val accuracy (step:acc)", "wall s", "mean sft/loss",
                      "status"], wrows) + "\n")

    # -- every run
    out.append("### Every run\n")
    out.append("Each run: the estimator's example job (`examples/arith_<name>.yaml`) from warm start "
               "`w` with `trainer.seed=s`, unchanged apart from the overrides on its command line "
               "(the first run of each estimator is shown; the others differ in the warm start, "
               "the seed and the output directory).\n")
    out.append(code([next(r for r in rl if r.est == e).rec["command"] for e in ests]) + "\n")
    if extended:
        out.append(f"An extended run goes on from its checkpoint at step {steps} with the same "
                   "command plus the overrides at its end (the first one):\n")
        out.append(code([extended[0].ext["command"]]) + "\n")
    rows = []
    for r in rl:
        a, s = r.best()
        g = r.gain_in_budget()
        b = r.before()
        room = (f"{100 * g / (1 - b):.0f}%" if g is not None and b is not None and b < 1
                else "–")
        rows.append([r.est, r.warm, r.seed, fmt(b), fmt(r.after()),
                     f"{fmt(a)} (step {s})" if a is not None else "–", pts(r.gain()), pts(g),
                     room, f"{r.rl_s:.0f}", f"{r.steps} (extended)" if r.ext else r.steps,
                     "yes" if g is not None and g >= 0.25 else "no",
                     # stopped (Ctrl-C) during its extension: no extend line yet
                     f"extension stopped at step {r.steps}"
                     if extend and not r.ext and r.steps > steps else r.status()])
    out.append(table(["estimator", "warm", "seed", "before", "final", "best", "final gain",
                      f"gain in {minutes} min", "headroom closed", "RL s", "steps", "≥ +25",
                      "status"], rows) + "\n")
    out.append("Headroom closed is the gain within the budget over what was left to gain, "
               "(best − before) / (1 − before): a warm start at 0.75 can gain at most +25 "
               "points.\n")

    # -- accuracy over steps and by level
    out.append("### Validation accuracy over steps and by level\n")
    out.append("Mean `val/accuracy` over each estimator's runs at each validation step, then the "
               "accuracy per task level (`val/accuracy/level_<k>`, logged when the validation "
               "rows carry a level) at the warm start, at the best step and at the last step.\n")
    vsteps = sorted({s for r in rl for s, _ in r.curve})
    if len(vsteps) > 12:  # at most 12 columns: every k-th validation, always the last
        k = math.ceil(len(vsteps) / 12)
        vsteps = vsteps[::k] + ([vsteps[-1]] if (len(vsteps) - 1) % k else [])
    rows = []
    for e in ests:
        rs = [r for r in rl if r.est == e]
        cols = []
        for st in vsteps:
            v = [a for r in rs for s2, a in r.curve if s2 == st]
            cols.append(fmt(mean(v)) if v else "–")
        rows.append([e] + cols)
    late = bool(extend and any(s > steps for s in vsteps))
    out.append(table(["estimator"] + [f"step {s}" + ("*" if late and s > steps else "")
                                      for s in vsteps], rows) + "\n")
    if late:
        out.append(f"\\* Past step {steps}, the means are over the extended runs only.\n")
    levels = sorted({int(k.rsplit("_", 1)[1]) for r in rl for row in r.rows for k in row
                     if k.startswith("val/accuracy/level_")})
    if levels:
        rows = []
        for e in ests:
            rs = [r for r in rl if r.est == e]
            for lv in levels:
                key = f"val/accuracy/level_{lv}"
                at = {"warm start": [], "best step": [], "last step": []}
                for r in rs:
                    lv_rows = [x for x in r.rows if isinstance(x.get(key), (int, float))]
                    if not lv_rows:
                        continue
                    a, s = r.best()
                    at["warm start"] += [x[key] for x in lv_rows if x.get("step") == 0]
                    at["best step"] += [x[key] for x in lv_rows if x.get("step") == s]
                    at["last step"].append(lv_rows[-1][key])
                rows.append([e, lv] + [pm(v) for v in at.values()])
        out.append(table(["estimator", "level", "warm start", "best step", "last step"], rows)
                   + "\n")
    else:
        out.append("(No run logged per-level accuracy.)\n")

    # -- entropy and group signal
    nw = 5
    out.append("### Entropy and group signal\n")
    out.append(f"Means over each estimator's runs, in {nw} equal windows of the training steps"
               + (f" (the first {steps}, which every run has)" if extend else "") + ": "
               "`actor/entropy` (nats per sampled token, from the rollout), `batch/solve_all` and "
               "`batch/solve_none` (share of prompt groups whose samples are all correct / all "
               "wrong: no signal for a group baseline), `actor/pg_clipfrac`, "
               "`batch/filter_rounds` (generation rounds per step with dynamic sampling), "
               "`batch/truncated_frac` (share of samples cut at `rollout.response_length`, "
               "logged with overlong shaping on) and `batch/guided_groups` (share of groups "
               "given the worked solution, logged with `algorithm.guidance` on; `solve_none` "
               "counts the groups as sampled, before guidance).\n")
    rows = []
    for e in ests:
        rs = [r for r in rl if r.est == e]
        for key in ["actor/entropy", "batch/solve_all", "batch/solve_none", "actor/pg_clipfrac",
                    "batch/filter_rounds", "batch/truncated_frac", "batch/guided_groups"]:
            w = [r.window_means(key, nw, cap) for r in rs]
            if all(x is None for ws in w for x in ws):
                continue  # not logged by this job (truncated_frac: overlong shaping off, ...)
            cols = []
            for i in range(nw):
                v = [x[i] for x in w if x[i] is not None]
                cols.append(fmt(mean(v)) if v else "–")
            rows.append([e, f"`{key}`"] + cols)
    out.append(table(["estimator", "metric"] + [f"window {i + 1}" for i in range(nw)], rows) + "\n")

    # -- step breakdown
    out.append("### Seconds per step by phase\n")
    out.append("Means over every training step of each estimator's runs"
               + (f" up to step {steps}" if extend else "") + " (`timing_s/*`; `step` is "
               "the whole step, validation excluded).\n")
    rows = []
    for e in ests:
        rs = [r for r in rl if r.est == e]
        rows.append([e] + [fmt(mean([r.mean("timing_s/" + p, cap) for r in rs
                                     if math.isfinite(r.mean("timing_s/" + p, cap))]))
                           for p in PHASES + ["step"]])
    out.append(table(["estimator"] + PHASES + ["step"], rows) + "\n")
    return "\n".join(out), bench


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dir", required=True, help="RL_BENCH_DIR of the bench")
    ap.add_argument("--out", default="docs/RESULTS.md")
    ap.add_argument("--section", default=None,
                    help="the page section to write (default: env.txt's, else bench-rl)")
    ap.add_argument("--short-of-target", metavar="NAME",
                    help="exit 0 if rl run NAME should be extended (see above), else 1")
    a = ap.parse_args()
    env = read_env(os.path.join(a.dir, "env.txt"))
    if a.short_of_target:
        short, why = short_of_target(a.dir, a.short_of_target, float(env.get("minutes", "10")))
        print("bench-rl: " + why)
        return 0 if short else 1
    if a.section:
        env["section"] = a.section
    runs = read_runs(os.path.join(a.dir, "runs.tsv"))
    minutes = float(env.get("minutes", "10"))
    text, bench = section(a.dir, env, runs, minutes)
    page = replace_section(a.out, env.get("section", "bench-rl"), text)
    with open(a.out + ".tmp", "w") as f:
        f.write(page)
    os.replace(a.out + ".tmp", a.out)
    for line in bench:
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
