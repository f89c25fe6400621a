#!/usr/bin/python3
"""arith_error_kinds.py — accuracy of the built-in arithmetic task by kind of
problem, from the validation samples a job wrote with
trainer.validation_data_dir=DIR (one <step>.jsonl per validation).

Kinds: level 1 (one-digit sums), level 2 split by operation and by whether
the columns need a carry (+) or a borrow (-), other levels by level. It
shows which sub-skills a warm start lacks and how RL changes them, e.g.

  rl-driver ... --config examples/arith_grpo.yaml \\
      model.init_from=runs/bench/sft_w2/final trainer.validation_data_dir=runs/val_w2
  bench/arith_error_kinds.py runs/val_w2            # one row per validation step
  bench/arith_error_kinds.py --wrong 200 runs/val_w2  # the wrong answers at step 200

Standard library only.
"""
import argparse
import json
import os
import re
import sys

KINDS = ["level 1", "+ no carry", "+ carry", "- no borrow", "- borrow"]


def kind(row):
    """The kind of one validation sample (a string)."""
    level = row.get("level")
    m = re.match(r"Q: (\d+)([+-])(\d+)=", row.get("prompt", ""))
    if level == 2 and m:
        a, op, b = int(m.group(1)), m.group(2), int(m.group(3))
        if op == "+":
            return "+ carry" if a % 10 + b % 10 >= 10 else "+ no carry"
        return "- borrow" if a % 10 < b % 10 else "- no borrow"
    return "level %s" % level


def read(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def steps(d):
    out = []
    for name in os.listdir(d):
        if name.endswith(".jsonl") and name[:-6].isdigit():
            out.append(int(name[:-6]))
    return sorted(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dirs", nargs="+", help="trainer.validation_data_dir of a job")
    ap.add_argument("--wrong", type=int, default=None, metavar="STEP",
                    help="list the wrong answers of this validation step instead")
    a = ap.parse_args()
    for d in a.dirs:
        st = steps(d)
        if not st:
            print("%s: no <step>.jsonl files" % d, file=sys.stderr)
            return 1
        if a.wrong is not None:
            if a.wrong not in st:
                print("%s: no validation at step %d (have %s)" % (d, a.wrong, st), file=sys.stderr)
                return 1
            for r in read(os.path.join(d, "%d.jsonl" % a.wrong)):
                if r.get("accuracy", 0) < 1:
                    print("%-12s %-22s want %-5s got %s" % (kind(r), r["prompt"].split("\n")[0],
                                                            r["ground_truth"], r["response"]))
            continue
        rows = {s: read(os.path.join(d, "%d.jsonl" % s)) for s in st}
        kinds = KINDS + sorted({kind(r) for rs in rows.values() for r in rs} - set(KINDS))
        print("%s\n| step | all | %s |" % (d, " | ".join(kinds)))
        print("|---|---|" + "---|" * len(kinds))
        for s in st:
            cells = []
            for k in kinds:
                rs = [r for r in rows[s] if kind(r) == k]
                ok = sum(1 for r in rs if r.get("accuracy", 0) >= 1)
                cells.append("%d/%d" % (ok, len(rs)) if rs else "–")
            acc = sum(r.get("accuracy", 0) for r in rows[s]) / max(len(rows[s]), 1)
            print("| %d | %.3f | %s |" % (s, acc, " | ".join(cells)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
