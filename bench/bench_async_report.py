#!/usr/bin/python3
"""bench_async_report.py — writes the bench-async section of the results
page from what bench/bench_async.sh left in --dir (env.txt, runs.tsv and the
sync/async runs' metrics.jsonl), between the <!-- bench-async:begin/end -->
markers, and prints the `bench:` lines. Every number is computed here.

Standard library only (run with /usr/bin/python3).
"""
import argparse
import math
import re
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_rl_report import (PHASES, Run, code, fmt, mean, pts, read_env, read_runs,  # noqa: E402
                             replace_section, table)

SKIP = 2  # first steps left out of the step-time means (start-up, first prefetch)


def pinned_cores(path):
    """(role, rank, cpus) of every pinned rank of the cluster file that
    bench_async.sh writes (one role key per line at two spaces, placements
    as {rank: R, ..., cpus: "LIST"} or a role shorthand with cpus)."""
    out, role = [], None
    with open(path) as f:
        for ln in f:
            m = re.match(r"^  ([a-z][a-z0-9_]*):", ln)
            if m:
                role = m.group(1)
            c = re.search(r'cpus: "([^"]*)"', ln)
            if c and role:
                r = re.search(r"rank: (\d+)", ln)
                out.append((role, r.group(1) if r else "every rank", c.group(1)))
    return out


def split_cores(d, n):
    """The rollout's share of n cores: n × (gen / step) of the sync run,
    with the means taken as for the step times."""
    runs = {r["name"]: r for r in read_runs(os.path.join(d, "runs.tsv"))}
    rows = Run(d, runs["sync"], 1e9).rows
    late = [x for x in rows if x.get("step", 0) > SKIP and "timing_s/step" in x]
    gen = mean([x["timing_s/gen"] for x in late if "timing_s/gen" in x])
    step = mean([x["timing_s/step"] for x in late])
    if not (math.isfinite(gen) and math.isfinite(step) and step > 0):
        print("bench_async_report: the sync run has no step times", file=sys.stderr)
        return 1
    print(min(max(round(n * gen / step), 1), n - 1))
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dir", required=True)
    ap.add_argument("--out", default="docs/RESULTS.md")
    ap.add_argument("--split-cores", type=int, metavar="N",
                    help="print the rollout's cores of N for the pinned cluster (N × gen / step "
                         "of the sync run in --dir, rounded, within 1 .. N−1) and exit")
    ap.add_argument("--section", default="bench-async",
                    help="the page section's marker name (bench_async.sh: bench-async-<n>cores)")
    a = ap.parse_args()
    if a.split_cores:
        return split_cores(a.dir, a.split_cores)
    env = read_env(os.path.join(a.dir, "env.txt"))
    runs = {r["name"]: r for r in read_runs(os.path.join(a.dir, "runs.tsv"))}
    # the bench order: sync, pinned_sync, async, async_shared, async_shared_2,
    # async_2, pinned_sync_2, sync_2 (older benches: without async_shared, or
    # sync, async, async_2, sync_2, or the first two only)
    order = [n for n in ("sync", "pinned_sync", "async", "async_shared", "async_shared_2",
                         "async_2", "pinned_sync_2", "sync_2") if n in runs]
    run = {n: Run(a.dir, runs[n], 1e9) for n in order}

    def arm_of(n):
        return n[:-2] if n.endswith("_2") else n

    arms = {}
    for n in order:
        arms.setdefault(arm_of(n), []).append(run[n])

    def steptime(r):
        v = [x["timing_s/step"] for x in r.rows if x.get("step", 0) > SKIP and "timing_s/step" in x]
        return mean(v)

    def arm_mean(arm, f):
        v = [f(r) for r in arms.get(arm, [])]
        return mean([x for x in v if math.isfinite(x)])

    def late(r, key):
        return [x[key] for x in r.rows if x.get("step", 0) > SKIP and key in x]

    def busy(r):  # cores kept busy over a step (perf/cpu_cores_busy)
        return mean(late(r, "perf/cpu_cores_busy"))

    def cpu_per_step(r):  # CPU seconds of a step: cores busy × its wall time
        return mean([x["perf/cpu_cores_busy"] * x["timing_s/step"] for x in r.rows
                     if x.get("step", 0) > SKIP and "perf/cpu_cores_busy" in x
                     and "timing_s/step" in x])

    ts, ta, tp = arm_mean("sync", steptime), arm_mean("async", steptime), arm_mean("pinned_sync", steptime)
    ratio = ta / ts if ts and math.isfinite(ts) else float("nan")
    ratio_p = ta / tp if tp and math.isfinite(tp) else float("nan")
    tsh = arm_mean("async_shared", steptime)
    ratio_sh = tsh / ts if ts and math.isfinite(ts) else float("nan")
    shared = "async_shared" in arms
    pinned = "pinned_sync" in arms
    sync, asy = run["sync"], run["async"]
    fs, fa = sync.after(), asy.after()
    delta = fa - fs if fs is not None and fa is not None else float("nan")
    fsh = run["async_shared"].after() if shared else None
    delta_sh = fsh - fs if fs is not None and fsh is not None else float("nan")
    stale, partial = env.get("staleness", "1"), env.get("partial", "0") == "1"
    tag = "async" if stale == "1" and not partial else ("partial_" if partial else "") + f"s{stale}"
    title = ("One-step-off asynchronous training" if tag == "async" else
             f"{'Partial rollouts at' if partial else 'Asynchronous training at'} staleness {stale}")
    out = [f"## {title} (`make bench-async`, {env.get('nproc')} cores)\n"]
    out.append(
        "This section is generated in full by `make bench-async` (`bench/bench_async.sh` runs the "
        "jobs, `bench/bench_async_report.py` writes the section); do not edit it by hand. Run on "
        f"{env.get('date_utc')} at commit `{env.get('commit')}`"
        + (" (with uncommitted changes)" if env.get("dirty", "0") not in ("", "0") else "")
        + f", {env.get('nproc')} CPU cores ({env.get('cpu')}), load average "
        f"{env.get('loadavg_start')} at the start and {env.get('loadavg_end')} at the end (a shared "
        f"machine). The whole bench took {env.get('bench_wall_s')} s.\n")
    cpus = ""
    if pinned:
        try:
            cpus = "; ".join(f"{role} {rank}: cores {c}" for role, rank, c in
                             pinned_cores(os.path.join(a.dir, "cluster-pinned.yaml")))
        except OSError:
            cpus = "(cluster-pinned.yaml missing)"
    out.append(
        "The same GRPO job from one SFT warm start, run synchronously (`trainer.staleness=0`, "
        "verl's order) and one step off (`trainer.staleness=1`: the rollout generates the next "
        "step's samples, with `trainer.async_rounds` at its default (as many filter rounds as the "
        "step before needed), with the weights it holds while the actor trains this step, "
        f"corrected by TIS with cap {env.get('tis')}). "
        + (f"{'Four' if shared else 'Three'} arms: `sync` on the cluster where every role may use "
           "every core (each phase has them all in turn), `pinned_sync` and `async` on a cluster "
           f"that gives rollout and actor cores of their own (cluster.yaml `cpus:`; here {cpus}"
           + (f"; the rollout's {env.get('rollout_cores_used')} of {env.get('nproc')} cores are "
              "its share of the first sync run's step, n × gen / step, rounded"
              if env.get("rollout_cores_used") and not env.get("rollout_cores") else "")
           + ")"
           + (", and `async_shared`, one step off on the cluster of `sync`, where rollout and "
              "actor share every core" if shared else "") + ". " if pinned else "")
        + ("Each arm ran twice, in the order " + ", ".join(order) + ": an arm's step time is the "
           "mean of its runs, so a steady drift of the machine's speed over the bench weighs on "
           "every arm alike" if len(order) >= 4 else "")
        + f". Step times are means of `timing_s/step` after the first {SKIP} steps."
        + ("" if tag == "async" else
           f" Here the async arms ran with `trainer.staleness={stale}`"
           + (" and `rollout.partial_rollouts=true` (a weight version that arrives while rows "
              "decode is switched in between two decode steps; the rows keep their tokens; "
              "docs/decisions/partial-rollouts.md)" if partial else "")
           + f" (`RL_BENCH_ASYNC_STALENESS={stale}"
           + (" RL_BENCH_ASYNC_PARTIAL=1" if partial else "") + "`).")
        + "\n")
    out.append(code([runs[n]["command"] for n in ["sft"] + order]) + "\n")
    rows = []
    for i, n in enumerate(order):
        r = run[n]
        a_, s_ = r.best()
        on = arm_of(n) in ("async", "async_shared")
        rows.append([i + 1, n, r.steps, fmt(steptime(r)), fmt(r.before()), fmt(r.after()),
                     f"{fmt(a_)} (step {s_})" if a_ is not None else "–",
                     fmt(r.mean("async/staleness_mean")) if on else "0",
                     fmt(r.mean("tis/ratio_mean"), 4) if on else "–",
                     fmt(r.mean("tis/capped_frac"), 4) if on else "–",
                     fmt(r.mean("tis/mismatch_kl"), 5) if on else "–",
                     (f'{fmt(r.mean("async/rounds_from_queue"), 2)} / '
                      f'{fmt(r.mean("async/unused_rounds"), 2)}') if on else "–",
                     fmt(r.mean("batch/filter_rounds"), 2), r.status()])
    out.append(table(["#", "run", "steps", "s / step", "val acc before", "final", "best",
                      "staleness (mean)", "TIS ratio (mean)", "TIS capped share",
                      "mismatch KL", "rounds from queue / dropped", "filter rounds", "status"],
                     rows) + "\n")
    if len(order) >= 4:
        same = {arm: rs[0].curve == rs[1].curve for arm, rs in arms.items() if len(rs) == 2}
        said = {True: "reproduced its first run's validation accuracy at every validation step",
                False: "differs from its first run"}
        out.append("The repeats: " + "; ".join(f"{arm}, {said[ok]}" for arm, ok in same.items())
                   + ".\n")
    if partial:  # how stale the tokens were, and how many rows a switch interrupted
        trow = [[n, fmt(run[n].mean("async/token_staleness_mean")),
                 fmt(run[n].mean("async/token_staleness_max"), 2),
                 fmt(run[n].mean("async/partial_rows"), 2),
                 " / ".join(fmt(run[n].mean(f"async/tokens_lag_{k}"), 1)
                            for k in range(int(stale) + 1))]
                for n in order if arm_of(n) in ("async", "async_shared")]
        out.append("Per token (means over all steps): how many versions behind the actor each "
                   "trained token was, the rows per step that hold tokens of two versions or more "
                   "(a weight switch interrupted them), and the tokens per step at each lag:\n")
        out.append(table(["run", "token staleness (mean)", "token staleness (max)",
                          "rows with two versions / step",
                          "tokens at lag " + " / ".join(str(k) for k in range(int(stale) + 1))],
                         trow) + "\n")
    prow = []
    for n in order:
        prow.append([n] + [fmt(run[n].mean("timing_s/" + p)) for p in PHASES + ["step"]])
    out.append("Seconds per step by phase (means over all steps; in the async runs `gen` is the "
               "wait for samples generated during the previous step, and `sync_weights` includes "
               "waiting for the rollout to finish the next step's samples):\n")
    out.append(table(["run"] + PHASES + ["step"], prow) + "\n")
    # Cores busy: what one step off can win at most. Overlap fills cores
    # the synchronous step leaves idle; it does not make the work smaller.
    ncores = mean(late(run["sync"], "perf/cpu_cores"))
    if not math.isfinite(ncores):
        ncores = float(env.get("nproc") or "nan")
    util = arm_mean("sync", busy) / ncores
    floor = arm_mean("async", cpu_per_step) / (ncores * ts) if ts else float("nan")
    floor_sh = arm_mean("async_shared", cpu_per_step) / (ncores * ts) if ts else float("nan")
    measured = math.isfinite(util)  # runs of before perf/cpu_cores_busy have none
    crow = [[n, fmt(busy(run[n]), 2), fmt(cpu_per_step(run[n])), fmt(steptime(run[n])),
             fmt(cpu_per_step(run[n]) / ncores)] for n in order]
    cores_busy = []
    cores_busy.append(f"Cores busy (`perf/cpu_cores_busy`: the CPU seconds of the driver and its workers "
               f"over a step's wall seconds, all {ncores:.0f} cores counted; means after the first "
               f"{SKIP} steps). A step cannot take less wall time than its CPU seconds spread over "
               "every core (the last column):\n")
    cores_busy.append(table(["run", "cores busy", "CPU s / step", "s / step",
                             f"CPU s / step ÷ {ncores:.0f}"], crow) + "\n")
    cores_busy.append(
        f"The synchronous step kept {util * ncores:.2f} of the {ncores:.0f} cores busy "
        f"(`bench: sync_core_utilisation = {util:.3f}`). One step off wins by filling the cores "
        "that the synchronous step leaves idle, while the work of a step stays the same: the "
        f"async runs needed {arm_mean('async', cpu_per_step):.3f} CPU seconds a step, so even with "
        f"every core busy their step could not go below {floor:.3f} of the synchronous step "
        f"(`bench: {tag}_step_time_ratio_floor = {floor:.3f}`"
        + (f"; async_shared: {floor_sh:.3f}" if shared else "") + ")"
        + (". The target 0.65 is below that floor: this machine cannot meet it with this job; "
           "only a machine on which the synchronous step leaves more of its cores idle could."
           if floor > 0.65 else ".") + "\n")
    if measured:
        out += cores_busy
    # a control: the actor's update does the same work in every arm, so its
    # time ratio shows how much the machine's speed (or the cores the
    # update had) differed between them
    base = "pinned_sync" if pinned else "sync"
    cu = (arm_mean("async", lambda r: r.mean("timing_s/update_actor"))
          / arm_mean(base, lambda r: r.mean("timing_s/update_actor")))
    out.append(f"Control: `update_actor`, the same work in both arms, took {cu:.3f} times as long in "
               f"the async runs as in the {base} runs"
               + (" — the machine's speed differed between the arms (a shared machine), or the "
                  "overlapped generation competed with the update for the cores, so the "
                  "step-time ratio below mixes that with the overlap." if abs(cu - 1) > 0.1
                  else ", so the arms saw about the same machine.") + "\n")
    out.append(f"`bench: {tag}_step_time_ratio = {ratio:.3f}` (async over sync, target ≤ 0.65: "
               + ("met" if ratio <= 0.65 else "not met") + ")"
               + (f"; `bench: {tag}_step_time_ratio_pinned_sync = {ratio_p:.3f}` (async over "
                  "pinned_sync: the same cluster)" if pinned else "")
               + (f"; `bench: {tag}_shared_step_time_ratio = {ratio_sh:.3f}` (async_shared over "
                  "sync: the same cluster, " + ("≤ 0.65" if ratio_sh <= 0.65 else "above 0.65")
                  + ")" if shared else "")
               + f"; `bench: {tag}_val_acc_delta = {delta:+.3f}` (target ≥ −0.03: "
               + ("met" if delta >= -0.03 else "not met") + f", {pts(delta)} points; the first "
               "run of each arm"
               + (f"; async_shared: {delta_sh:+.3f}" if shared else "") + ").\n")
    page = replace_section(a.out, a.section, "\n".join(out))
    with open(a.out + ".tmp", "w") as f:
        f.write(page)
    os.replace(a.out + ".tmp", a.out)
    print(f"bench: {tag}_step_time_ratio = {ratio:.3f}")
    if pinned:
        print(f"bench: {tag}_step_time_ratio_pinned_sync = {ratio_p:.3f}")
    if shared:
        print(f"bench: {tag}_shared_step_time_ratio = {ratio_sh:.3f}")
        print(f"bench: {tag}_shared_val_acc_delta = {delta_sh:.3f}")
    print(f"bench: {tag}_val_acc_delta = {delta:.3f}")
    print(f"bench: {tag}_update_time_control = {cu:.3f}")
    if measured:
        print(f"bench: sync_core_utilisation = {util:.3f}")
        print(f"bench: {tag}_step_time_ratio_floor = {floor:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
