#!/usr/bin/python3
"""bench_embodied_report.py — writes the results page of `make bench-embodied`.

Reads what bench/bench_embodied.sh left in --dir:
  env.txt                machine, commit, load average at the start and end
  <run>/metrics.jsonl    one run's metrics (one JSON object per step)
  <run>.log, <run>.wall  its driver log and wall seconds
where <run> is the method name for seed 1 and <method>-s<seed> for the
other seeds (run_name below); each method has its own seeds (the fourth
field of its BENCH_EMBODIED_METHODS spec, else BENCH_EMBODIED_SEEDS). Writes the section of the page between the
<!-- bench-embodied:begin/end --> markers (--out, default docs/RESULTS.md),
leaving the other benchmarks' sections as they are, and prints
`bench: name = value` lines for the headline numbers. Every number on the
page is computed here from those files.

Sample efficiency (issue 43): beside --out, embodied_sample_efficiency.png
(docs/ for the page) draws the greedy evaluation's success against the env
(control) steps of the training rollouts (rollout/env_steps_total) and
against the training seconds (the sum of timing_s/step; evaluations not
counted), one line per method (the mean over its seeds, each seed faint),
controls dashed; embodied_sample_efficiency.json holds its points. Runs
logged before rollout/env_steps existed are drawn in the seconds panel
only, and the page names them.

Standard library only, but the PNG needs matplotlib: bench_embodied.sh
runs this with the first of $PYTHON (/usr/bin/python3), build/venv-ref and
build/venv-libero that has it; without it the page says the plot was not
drawn and the JSON is still written.
"""
import argparse
import json
import math
import os
import sys

PHASES = ["rollout", "annotate", "credit", "update_actor", "sync_weights", "step"]
BEGIN, END = "<!-- bench-embodied:begin -->", "<!-- bench-embodied:end -->"
EFF = "embodied_sample_efficiency"  # .png and .json beside --out


def run_name(method, seed):
    return method if seed == 1 else "%s-s%d" % (method, seed)


def is_control(method):
    """`anchor` (the sil example with algorithm.rl_coef 0) and `<method>_anchor`
    (that method's own example with rl_coef 0: its epochs, lr and steps)."""
    return method == "anchor" or method.endswith("_anchor")


def control_of(method, methods):
    """The run a method's gain over the control is read against: its own
    `<method>_anchor` when listed, else that of the method it is a variant of
    (`flowsar_mse` → `flowsar_anchor`: at rl_coef 0 the variant trains the
    same anchor), else `anchor` (None when none is listed)."""
    parts = method.split("_")
    for k in range(len(parts), 0, -1):
        own = "_".join(parts[:k]) + "_anchor"
        if own in methods:
            return own
    return "anchor" if "anchor" in methods else None


def read_env(path):
    env = {}
    if os.path.exists(path):
        for line in open(path):
            k, _, v = line.rstrip("\n").partition("=")
            env[k] = v
    return env


def mean(xs):
    return sum(xs) / len(xs)


def std(xs):
    """Sample standard deviation (0 for one value)."""
    if len(xs) < 2:
        return 0.0
    m = mean(xs)
    return math.sqrt(sum((x - m) ** 2 for x in xs) / (len(xs) - 1))


def fmt_pm(xs, digits, sign=False, scale=1.0):
    v = [scale * x for x in xs]
    head = ("%+." if sign else "%.") + "%df" % digits
    s = head % mean(v)
    if len(v) > 1:
        s += (" ± %." + "%df" % digits) % std(v)
    return s


def curve(rows):
    """The evaluations of one run, in order: {step, env_steps, train_s, success}.
    env_steps: rollout/env_steps_total of the step (or the sum of
    rollout/env_steps), None for a run that logged neither (older runs);
    train_s: the sum of timing_s/step up to the step (evaluations excluded)."""
    has = any("rollout/env_steps_total" in x or "rollout/env_steps" in x for x in rows)
    env, t, pts = 0, 0.0, []
    for x in rows:
        if "rollout/env_steps_total" in x:
            env = x["rollout/env_steps_total"]
        elif "rollout/env_steps" in x:
            env += x["rollout/env_steps"]
        t += x.get("timing_s/step", 0.0)
        if "eval/success_rate" in x:
            pts.append({"step": x["step"], "env_steps": int(env) if has else None, "train_s": round(t, 3),
                        "success": x["eval/success_rate"]})
    return pts


def mean_curve(by_seed):
    """The mean over seeds at each evaluation all of them ran (by index);
    env_steps None unless every seed has it."""
    out = []
    for pts in zip(*by_seed):
        env = [p["env_steps"] for p in pts]
        out.append({"step": pts[0]["step"],
                    "env_steps": round(mean(env), 1) if None not in env else None,
                    "train_s": round(mean([p["train_s"] for p in pts]), 3),
                    "success": mean([p["success"] for p in pts])})
    return out


def efficiency(a, runs, out_path):
    """Writes <dir of out_path>/embodied_sample_efficiency.json (always) and
    .png (with matplotlib); returns what the page says of them."""
    base = os.path.join(os.path.dirname(os.path.abspath(out_path)), EFF)
    first = runs[a.methods[0]][a.seeds_of[a.methods[0]][0]]
    n = int(first[0]["eval/episodes"])
    data = {"suite": "LIBERO-Object", "eval_episodes": n, "episodes_per_task": a.per, "heldout": a.heldout,
            "x": {"env_steps": "rollout/env_steps_total: env (control) steps of the training rollouts",
                  "train_s": "sum of timing_s/step: training seconds, evaluations excluded"},
            "methods": {}, "without_env_steps": []}
    for m in a.methods:
        seeds = {s: curve(runs[m][s]) for s in a.seeds_of[m]}
        data["without_env_steps"] += [run_name(m, s) for s, c in seeds.items() if c[0]["env_steps"] is None]
        data["methods"][m] = {"control": is_control(m), "seeds": {str(s): c for s, c in seeds.items()},
                              "mean": mean_curve(list(seeds.values()))}
    with open(base + ".json", "w") as f:
        json.dump(data, f, indent=1, sort_keys=True)
        f.write("\n")
    info = {"json": base + ".json", "png": None, "data": data, "why": ""}
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        info["why"] = "no matplotlib in %s" % sys.executable
        return info
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.4), dpi=110, sharey=True)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    own = [m for m in a.methods if not is_control(m)]
    for m in a.methods:
        d = data["methods"][m]
        # a control takes the colour of the method it controls (gray: `anchor`)
        of = m[:-len("_anchor")] if m.endswith("_anchor") else None
        color = colors[own.index(of) % len(colors)] if of in own else (
            "0.45" if is_control(m) else colors[own.index(m) % len(colors)])
        ls = "--" if d["control"] else "-"
        many = len(d["seeds"]) > 1
        for ax, key in zip(axes, ("env_steps", "train_s")):
            if many:
                for c in d["seeds"].values():
                    pts = [p for p in c if p[key] is not None]
                    ax.plot([p[key] for p in pts], [p["success"] for p in pts], ls, color=color, lw=0.8, alpha=0.3)
            pts = [p for p in d["mean"] if p[key] is not None]
            if pts:
                ax.plot([p[key] for p in pts], [p["success"] for p in pts], ls, color=color, lw=2, marker="o",
                        ms=3, label="%s%s" % (m, " (mean of %d seeds)" % len(d["seeds"]) if many else ""))
    axes[0].set_xlabel("env (control) steps of the training rollouts (rollout/env_steps_total)")
    axes[1].set_xlabel("training wall-clock seconds (sum of timing_s/step; evaluations excluded)")
    axes[0].set_ylabel("greedy success rate")
    for ax in axes:
        ax.set_ylim(0, 1.02)
        ax.grid(alpha=0.3)
    if data["without_env_steps"]:
        axes[0].text(0.02, 0.02, "no rollout/env_steps (older runs): " + ", ".join(data["without_env_steps"]),
                     transform=axes[0].transAxes, fontsize=7, va="bottom", wrap=True)
    axes[1].legend(fontsize=7, loc="lower right")
    fig.suptitle("LIBERO-Object: greedy ODE success over %d evaluation episodes (%d per task%s)" %
                 (n, a.per, ", held-out initial states" if a.heldout else ""), fontsize=10)
    fig.tight_layout()
    fig.savefig(base + ".png")
    plt.close(fig)
    info["png"] = base + ".png"
    return info


def efficiency_text(eff, out_path):
    """The page's paragraph on the sample-efficiency plot and its data."""
    def rel(p):  # from the page (a link)
        return os.path.relpath(p, os.path.dirname(os.path.abspath(out_path)))

    def shown(p):  # from the repository (docs/...), else the file's name
        r = os.path.relpath(p)
        return os.path.basename(p) if r.startswith("..") else r
    d = eff["data"]
    out = []
    if eff["png"]:
        out.append("Sample efficiency (issue 43): greedy success against the env (control) steps of the training "
                   "rollouts (`rollout/env_steps_total`) and against the training seconds (the sum of "
                   "`timing_s/step`, evaluations excluded), the mean over a method's seeds (each seed faint), "
                   "controls dashed; its points are in `%s`." % shown(eff["json"]))
        out.append("")
        out.append("![sample efficiency on LIBERO-Object](%s)" % rel(eff["png"]))
    else:
        out.append("Sample efficiency (issue 43): the plot `%s` was not drawn (%s); its points (success "
                   "against `rollout/env_steps_total` and against the training seconds) are in `%s`." %
                   (shown(eff["json"])[:-len(".json")] + ".png", eff["why"], shown(eff["json"])))
    if d["without_env_steps"]:
        out.append("")
        out.append("Runs without `rollout/env_steps` (logged before the metric existed), drawn against the "
                   "training seconds only: %s." % ", ".join(d["without_env_steps"]))
    out.append("")
    out.append("| method | env steps | training s | success |")
    out.append("|---|---|---|---|")
    for m, v in d["methods"].items():
        last = v["mean"][-1]
        out.append("| %s | %s | %.0f | %.3f |" % (m, "-" if last["env_steps"] is None else "%.0f" % last["env_steps"],
                                                  last["train_s"], last["success"]))
    out.append("")
    out.append("(at the last evaluation every seed of the method ran; means over its seeds)")
    return out


def section(a, env, langs, runs, eff=None):
    """runs[method][seed] = list of metric rows of that run (seeds: a.seeds_of[method])."""
    methods, sof = a.methods, a.seeds_of
    all_seeds = sorted({s for m in methods for s in sof[m]})
    many = any(len(sof[m]) > 1 for m in methods)
    out = [BEGIN, "## Embodied RL on LIBERO-Object (`make bench-embodied`)", ""]
    first = runs[methods[0]][sof[methods[0]][0]]
    n = int(first[0]["eval/episodes"])
    later = ["%s %s" % (run_name(m, s), c) for m in methods for s, c in a.commits[m].items()
             if c and c != env.get("commit", "?")]
    out.append(
        "Produced by `BENCH_EMBODIED_STEPS=%d BENCH_EMBODIED_EPISODES_PER_TASK=%d BENCH_EMBODIED_EVAL_EVERY=%d "
        "BENCH_EMBODIED_METHODS=\"%s\" BENCH_EMBODIED_SEEDS=\"%s\"%s make bench-embodied` on %s at commit `%s`%s: "
        "each method from the same warm start (`%s`), the training steps of the table's `steps` column "
        "(`method:steps:every:seeds` in BENCH_EMBODIED_METHODS; default %d), greedy ODE evaluation over "
        "%d episodes (%d per task%s) at step 0 and every `every` steps (default %d); %d CPU cores (%s), "
        "1/5/15-minute load average %s at the start and %s at the end (step times depend on what else runs); "
        "%s. The initial noise of an evaluation episode is drawn per env, so a method whose envs map to tasks "
        "differently (GRPO's env.group_size) starts from a slightly different step-0 number on the same "
        "initial states." %
        (a.steps, a.per, a.every, " ".join(a.specs), " ".join(map(str, a.seeds)),
         " BENCH_EMBODIED_HELDOUT=%d" % a.heldout if a.heldout else "", env.get("date_utc", "?"),
         env.get("commit", "?"),
         " (runs started at a later commit: %s)" % ", ".join(later) if later else "",
         a.warmstart, a.steps, n, a.per,
         ", from the %d held-out initial states of each task (`env.heldout_init_states`), which no training "
         "episode starts from" % a.heldout if a.heldout else " over its initial states",
         a.every, os.cpu_count(), env.get("cpu", "?"),
         env.get("loadavg_start", "?"), env.get("loadavg_end", "?"),
         "RL seed %d (one seed per method)" % all_seeds[0] if not many and len(all_seeds) == 1 else
         "RL seeds (`trainer.seed`) of the table's `seeds` column; a method with several gives the mean ± "
         "sample standard deviation over them, and its gain over its control pairs the seeds both ran"))
    out.append("")
    logs = {m: [open(os.path.join(a.dir, run_name(m, s) + ".log")).read() for s in sof[m]] for m in methods}
    ema = [m for m in methods if all("evaluation (EMA weights)" in t for t in logs[m])]
    if ema == methods:
        out.append("Every evaluation acts with the EMA of the weights (`eval.ema_decay` of the example jobs, "
                   "docs/decisions/eval-ema.md), not the live weights.")
    elif ema:
        out.append("Evaluations act with the EMA of the weights for %s, with the live weights for the others."
                   % ", ".join(ema))
    else:
        out.append("Every evaluation acts with the live weights (`eval.ema_decay` 0).")
    out.append("")

    def evals(m, s):
        return [x for x in runs[m][s] if "eval/success_rate" in x]

    # per method: {seed: value}
    before = {m: {s: evals(m, s)[0]["eval/success_rate"] for s in sof[m]} for m in methods}
    after = {m: {s: evals(m, s)[-1]["eval/success_rate"] for s in sof[m]} for m in methods}
    best = {m: {s: max(x["eval/success_rate"] for x in evals(m, s)) for s in sof[m]} for m in methods}
    gain = {m: {s: 100 * (after[m][s] - before[m][s]) for s in sof[m]} for m in methods}
    wall = {m: {s: float(open(os.path.join(a.dir, run_name(m, s) + ".wall")).read()) for s in sof[m]}
            for m in methods}
    def V(by_seed):
        return list(by_seed.values())

    warm = mean(V(before[methods[0]]))
    print("bench: embodied_warmstart_success = %.4f" % warm, file=sys.stderr)
    out.append("| method | steps | every | seeds | success before | success after | gain (points) | %sbest | "
               "gain over its control (points) | wall s |" % ("lowest gain | " if many else ""))
    out.append("|---|---|---|---|---|---|---|---|---|---|" + ("---|" if many else ""))
    for m in methods:
        over = "-"
        ctl = None if is_control(m) else control_of(m, methods)
        both = [s for s in sof[m] if ctl and s in after[ctl]]
        if both:
            over = fmt_pm([100 * (after[m][s] - after[ctl][s]) for s in both], 1, sign=True)
            over += " (`%s`%s)" % (ctl, "" if both == sof[m] else
                                   ", seed%s %s" % ("s" if len(both) > 1 else "", ", ".join(map(str, both))))
        out.append("| %s | %d | %d | %s | %s | %s | %s | %s%s | %s | %s |" %
                   (m, a.steps_of[m], a.every_of[m], ", ".join(map(str, sof[m])), fmt_pm(V(before[m]), 3),
                    fmt_pm(V(after[m]), 3), fmt_pm(V(gain[m]), 1, sign=True),
                    "%+.1f | " % min(V(gain[m])) if many else "", fmt_pm(V(best[m]), 3), over, fmt_pm(V(wall[m]), 0)))
        print("bench: embodied_%s_success = %.4f" % (m, mean(V(after[m]))), file=sys.stderr)
        if len(sof[m]) > 1:
            print("bench: embodied_%s_success_std = %.4f" % (m, std(V(after[m]))), file=sys.stderr)
        print("bench: embodied_%s_gain_points = %.1f" % (m, mean(V(gain[m]))), file=sys.stderr)
        if len(sof[m]) > 1:
            print("bench: embodied_%s_gain_points_min = %.1f" % (m, min(V(gain[m]))), file=sys.stderr)
        print("bench: embodied_%s_wall_s = %.0f" % (m, mean(V(wall[m]))), file=sys.stderr)
    out.append("")
    rl = [m for m in methods if not is_control(m)]
    # the best method: the highest final success on its lowest seed (read per seed, like the +20)
    best_all, best_m = max((min(V(after[m])), m) for m in rl or methods)
    per_seed = " on every seed" if many else ""
    out.append(
        "Targets (issue 12): every method at least +20 points over the warm start within 60 minutes%s: %s (%s); "
        "the best method at 95%% or more%s: %s (%s, final %.3f%s). `anchor` is the control: flow matching on the "
        "demonstrations alone (the sil example with `algorithm.rl_coef` 0); `<method>_anchor` is a method's own "
        "control (its example with `algorithm.rl_coef` 0: the anchor alone with that method's epochs, learning rate "
        "and steps), which the method's gain is read against where it is listed. A method that carries the anchor "
        "(its example's `algorithm.demo_coef`) owes only its gain over its control to the RL signal. Controls are "
        "not methods: the targets skip them. The evaluation of %d episodes "
        "has a standard error of about %.0f points." %
        (per_seed,
         "met" if rl and all(min(V(gain[m])) >= 20 for m in rl) and all(max(V(wall[m])) <= 3600 for m in rl)
         else "**not met**",
         ", ".join("%s %+.1f" % (m, min(V(gain[m]))) for m in rl), per_seed,
         "met" if best_all >= 0.95 else "**not met**", best_m, best_all, " on its lowest seed" if many else "",
         n, 100 * (0.25 / max(n, 1)) ** 0.5))
    out.append("")
    out.append("Success per task (before → after%s):" % (", mean over a method's seeds" if many else ""))
    out.append("")
    out.append("| task | " + " | ".join(methods) + " |")
    out.append("|---|" + "---|" * len(methods))
    for k, lang in enumerate(langs):
        key = "eval/success_task_%d" % k
        cells = []
        for m in methods:
            r = [[x for x in runs[m][s] if key in x] for s in sof[m]]
            if all(r):
                cells.append("%.2f → %.2f" % (mean([x[0][key] for x in r]), mean([x[-1][key] for x in r])))
            else:
                cells.append("-")
        out.append("| %d %s | %s |" % (k, lang, " | ".join(cells)))
    out.append("")
    out.append("Success over training (step: success, cumulative step seconds):")
    out.append("")
    for m in methods:
        for s in sof[m]:
            t, pts = 0.0, []
            for x in runs[m][s]:
                t += x.get("timing_s/step", 0.0) + x.get("timing_s/eval", 0.0)
                if "eval/success_rate" in x:
                    pts.append("%d: %.3f (%.0f s)" % (x["step"], x["eval/success_rate"], t))
            out.append("- %s%s: %s" % (m, " seed %d" % s if many else "", ", ".join(pts)))
    out.append("")
    if eff:
        out += efficiency_text(eff, a.out)
        out.append("")
    out.append("Where a training step's time goes (mean seconds per step%s):" %
               (" over its seeds" if many else ""))
    out.append("")
    out.append("| method | " + " | ".join(PHASES) + " |")
    out.append("|---|" + "---|" * len(PHASES))
    for m in methods:
        r = [x for s in sof[m] for x in runs[m][s] if x["step"] > 0 and "timing_s/step" in x]
        cells = ["%.2f" % (sum(x.get("timing_s/" + p, 0) for x in r) / max(len(r), 1)) for p in PHASES]
        out.append("| %s | %s |" % (m, " | ".join(cells)))
    out.append(END)
    return "\n".join(out)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--dir", required=True)
    p.add_argument("--manifest", required=True)
    p.add_argument("--methods", required=True)
    p.add_argument("--seeds", default="1")
    p.add_argument("--steps", type=int, required=True)
    p.add_argument("--per", type=int, required=True)
    p.add_argument("--every", type=int, required=True)
    p.add_argument("--warmstart", required=True)
    p.add_argument("--heldout", type=int, default=0)
    p.add_argument("--out", default="docs/RESULTS.md")
    a = p.parse_args()
    a.specs = a.methods.split()
    if not all(x.isdigit() for x in a.seeds.split()):
        sys.exit("bench_embodied_report: --seeds '%s' is not a list of seeds" % a.seeds)
    a.seeds = [int(x) for x in a.seeds.split()]
    a.methods, a.steps_of, a.every_of, a.seeds_of = [], {}, {}, {}
    for spec in a.specs:   # name[:steps[:every[:seeds]]], seeds comma-separated (bench_embodied.sh)
        f = spec.split(":")
        sd = f[3].split(",") if len(f) > 3 else []
        if len(f) > 4 or not f[0] or not all(x.isdigit() for x in f[1:3] + sd):
            sys.exit("bench_embodied_report: method '%s' is not name[:steps[:every[:seed,seed...]]]" % spec)
        if f[0] in a.steps_of:
            sys.exit("bench_embodied_report: method '%s' is listed twice" % f[0])
        a.methods.append(f[0])
        a.steps_of[f[0]] = int(f[1]) if len(f) > 1 else a.steps
        a.every_of[f[0]] = int(f[2]) if len(f) > 2 else a.every
        a.seeds_of[f[0]] = sorted({int(x) for x in sd}) if sd else a.seeds
    if not a.methods or not all(a.seeds_of.values()):
        sys.exit("bench_embodied_report: no methods or no seeds")
    langs = [t["language"] for t in json.load(open(a.manifest))["tasks"]]
    runs, a.commits = {}, {}
    for m in a.methods:
        runs[m] = {}
        for s in a.seeds_of[m]:
            path = os.path.join(a.dir, run_name(m, s), "metrics.jsonl")
            for need in (path, os.path.join(a.dir, run_name(m, s) + ".log"),
                         os.path.join(a.dir, run_name(m, s) + ".wall")):
                if not os.path.exists(need):
                    sys.exit("bench_embodied_report: %s is missing (method %s, seed %d did not finish)"
                             % (need, m, s))
            rows = [json.loads(l) for l in open(path) if l.strip()]
            if not [x for x in rows if "eval/success_rate" in x]:
                sys.exit("bench_embodied_report: %s has no evaluation" % path)
            runs[m][s] = rows
            cpath = os.path.join(a.dir, run_name(m, s) + ".commit")
            a.commits.setdefault(m, {})[s] = open(cpath).read().strip() if os.path.exists(cpath) else ""
    eff = efficiency(a, runs, a.out)
    sec = section(a, read_env(os.path.join(a.dir, "env.txt")), langs, runs, eff)
    text = open(a.out).read() if os.path.exists(a.out) else ""
    if BEGIN in text and END in text:
        i, j = text.index(BEGIN), text.index(END) + len(END)
        text = text[:i] + sec + text[j:]
    else:
        text = text.rstrip("\n") + "\n\n" + sec + "\n"
    open(a.out, "w").write(text)
    print("wrote the bench-embodied section of %s" % a.out)
    print("wrote %s" % (eff["png"] or "no %s.png (%s)" % (EFF, eff["why"])))
    print("wrote %s" % eff["json"])


if __name__ == "__main__":
    main()
