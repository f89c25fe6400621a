#!/usr/bin/env python3
"""bench_words_report.py — writes the bench-words section of docs/RESULTS.md
from the runs bench/bench_words.sh made (their metrics.jsonl, runs.tsv and
env.txt); prints `bench: name = value` lines. Nothing here is typed by hand."""
import argparse
import json
import os
import re


def load(path):
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(l) for l in f if l.strip()]


def vals(rows, key):
    return [(r["step"], r[key]) for r in rows if key in r]


def mean(xs):
    return sum(xs) / len(xs) if xs else float("nan")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", required=True)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    env = {}
    with open(os.path.join(a.dir, "env.txt")) as f:
        for line in f:
            if "=" in line:
                k, v = line.rstrip("\n").split("=", 1)
                env[k] = v
    cmds = []
    with open(os.path.join(a.dir, "runs.tsv")) as f:
        next(f)
        for line in f:
            name, wall, rc, cmd = line.rstrip("\n").split("\t", 3)
            cmds.append((name, float(wall), int(rc), cmd))
    out = ["## Word problems and tool use (`make bench-words`)", "",
           "This section is generated in full by `make bench-words` (`bench/bench_words.sh` runs the "
           "jobs, `bench/bench_words_report.py` writes it from their `metrics.jsonl`); do not edit it by "
           "hand. Run on %s at commit `%s`, %s CPU cores (%s), load average %s at the start and %s at "
           "the end (a shared machine: step times depend on what else runs)."
           % (env.get("date_utc"), env.get("commit"), env.get("nproc"), env.get("cpu"),
              env.get("loadavg_start"), env.get("loadavg_end", "?")), "",
           "The task: levels 8 and 9 of the built-in generator (`Q: Ann has 17 cups and buys 3 bags of 6 "
           "cups. How many cups now?`, two steps), the default model (2 layers, hidden 128) with the "
           "`arith_ext` tokenizer. `words` solves them by hand (`<think>6*3=18 8+7=15 1+1+1=3</think>\\boxed{35}`: the product, then the second step by columns); "
           "`tools` was warm-started on solutions that call the calculator for each of the two steps (the product, then the sum or difference) and "
           "samples with `rollout.multi_turn` on (the result tokens are outside the loss). Validation "
           "accuracy is greedy, on 200 held-out problems, with the tools on for `tools`."]
    if env.get("skip_sft") == "1":
        out += ["", "The warm starts were made before this run (`RL_WORDS_SKIP_SFT=1`) by the example "
                "jobs `examples/arith_<pair>_sft.yaml` with trainer.total_steps=%s; the commands of the runs "
                "made here:" % env.get("sft_steps")]
    else:
        out += ["", "The commands:"]
    out += ["", "```sh"] + [c for _, _, _, c in cmds] + ["```", ""]
    out += ["| pair | SFT steps | warm start val acc | RL steps | val acc at RL step 0 | final | best | "
            "gain (final) | s / RL step | tool calls / sample | tool ok share | status |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    bench = []
    for p in ["words", "tools"]:
        sft = load(os.path.join(a.dir, p + "_sft", "metrics.jsonl"))
        rl = load(os.path.join(a.dir, p + "_grpo", "metrics.jsonl"))
        if not sft and not rl:
            continue
        sv = vals(sft, "val/accuracy")
        rv = vals(rl, "val/accuracy")
        steps = [r for r in rl if r.get("step", 0) > 0 and "timing_s/step" in r]
        rc = [c[2] for c in cmds if c[0] == p + "_grpo"]
        status = "ok" if rc and rc[-1] == 0 else ("failed (exit %d)" % rc[-1] if rc else "not run")
        before = rv[0][1] if rv and rv[0][0] == 0 else float("nan")
        final = rv[-1][1] if rv else float("nan")
        best = max(rv, key=lambda x: x[1]) if rv else (0, float("nan"))
        calls = mean([r["tools/calls_mean"] for r in steps if "tools/calls_mean" in r])
        okf = mean([r["tools/ok_frac"] for r in steps if "tools/ok_frac" in r])
        out.append("| %s | %s | %s | %d | %.3f | %.3f | %.3f (step %d) | %+.3f | %.2f | %s | %s | %s |" % (
            p, sft[-1]["step"] if sft else "–", "%.3f" % sv[-1][1] if sv else "–",
            steps[-1]["step"] if steps else 0, before, final, best[1], best[0], final - before,
            mean([r["timing_s/step"] for r in steps]),
            "%.2f" % calls if calls == calls else "–", "%.2f" % okf if okf == okf else "–", status))
        bench += ["bench: words_%s_warm_val_acc = %.4f" % (p, sv[-1][1] if sv else float("nan")),
                  "bench: words_%s_rl_gain = %.4f" % (p, final - before)]
    out.append("")
    for p in ["words", "tools"]:
        rl = load(os.path.join(a.dir, p + "_grpo", "metrics.jsonl"))
        rv = vals(rl, "val/accuracy")
        if rv:
            out.append("`%s` validation accuracy by RL step: %s." % (
                p, ", ".join("%d: %.3f" % (s, v) for s, v in rv)))
    section = "\n".join(out).rstrip() + "\n"
    begin, end = "<!-- bench-words:begin -->", "<!-- bench-words:end -->"
    page = open(a.out).read() if os.path.exists(a.out) else "# Results\n"
    block = begin + "\n" + section + end
    if begin in page and end in page:
        page = re.sub(re.escape(begin) + ".*?" + re.escape(end), lambda m: block, page, flags=re.S)
    else:
        page = page.rstrip("\n") + "\n\n" + block + "\n"
    with open(a.out, "w") as f:
        f.write(page)
    for b in bench:
        print(b)


if __name__ == "__main__":
    main()
