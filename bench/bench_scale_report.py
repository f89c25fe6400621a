"""bench_scale_report.py — from bench_scale's `bench:` lines: the ratios,
docs/RESULTS.md's bench-scale section (between its markers) and one PNG per
cost against N in docs/ (scale_*.png; skipped without matplotlib).
Usage: bench_scale_report.py SCALE_TXT LOAD0 LOAD1 NPROC COMMIT"""
import datetime
import os
import re
import sys

txt, load0, load1, nproc, commit = sys.argv[1:6]
kv = {}
for line in open(txt):
    m = re.match(r"bench: (\S+) = (\S+)", line)
    if m:
        kv[m.group(1)] = float(m.group(2))
ns = sorted({int(k.rsplit("_", 1)[1]) for k in kv if k.startswith("start_s_")})
if not ns:
    sys.exit("bench_scale_report: no job finished")
big = max(ns)


def v(name, n):
    return kv.get(f"{name}_{n}")


def ratio(a, b):
    return a / b if a is not None and b else None


ratios = {
    "dispatch_p50_256_over_8": ratio(v("dispatch_p50_ms", big), v("dispatch_p50_ms", 8)),
    "driver_rss_per_worker_kib": v("driver_rss_kib_per_worker", big),
    "fanout_256_over_1": ratio(v("fanout_chain_ms", big), v("fanout_chain_ms", 1)),
    "fanout_star_256_over_1": ratio(v("fanout_star_ms", big), v("fanout_star_ms", 1)),
    "fanout_chain_over_star_256": ratio(v("fanout_chain_ms", big), v("fanout_star_ms", big)),
    "driver_cpu_per_worker_256_over_8": ratio(v("driver_cpu_us_per_step_per_worker", big),
                                              v("driver_cpu_us_per_step_per_worker", 8)),
    "recover_s_256": v("recover_s", big),
}
# remote nodes: network namespaces with rate-limited links (bench_scale_netns.sh)
nns = sorted({int(k.rsplit("_", 1)[1]) for k in kv if k.startswith("netns_start_s_")})
nbig = max(nns) if nns else None
star_note = ""
sn = None
if nbig and 1 in nns and kv.get(f"netns_fanout_chain_ms_{nbig}"):
    ratios["fanout_256_over_1_loopback"] = ratios.pop("fanout_256_over_1")
    ratios["fanout_256_over_1"] = ratio(v("netns_fanout_chain_ms", nbig), v("netns_fanout_chain_ms", 1))
    # the star past 32 receivers is not run (N transfers through one link):
    # linear from the largest N it ran at, by the link's arithmetic
    sn = max((n for n in nns if v("netns_fanout_star_ms", n)), default=None)
    if sn and sn != nbig:
        kv[f"netns_fanout_star_ms_{nbig}"] = v("netns_fanout_star_ms", sn) * nbig / sn
        star_note = (f"The star to {nbig} is **extrapolated** ({nbig}/{sn} × its time to {sn}: "
                     f"every copy crosses the sender's link); everything else is measured.")
    else:
        star_note = ""
    ratios["fanout_star_256_over_1_netns"] = ratio(v("netns_fanout_star_ms", nbig),
                                                  v("netns_fanout_star_ms", 1))
    ratios["fanout_chain_over_star_256_netns"] = ratio(v("netns_fanout_chain_ms", nbig),
                                                      v("netns_fanout_star_ms", nbig))
    if 32 in nns and nbig != 32:
        ratios["fanout_32_over_1_netns"] = ratio(v("netns_fanout_chain_ms", 32),
                                                 v("netns_fanout_chain_ms", 1))
# the real LM job (bench_scale_lm.py): driver CPU per step = a + b W, fitted
lws = sorted({int(k.rsplit("_", 1)[1]) for k in kv if k.startswith("lm_workers_")})
lm_fit = None
if len(lws) >= 2:
    xs = lws
    ys = [v("lm_driver_cpu_ms_per_step", w) for w in xs]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
    a = my - b * mx
    lm_fit = (a, b)
    step_big = v("lm_step_s", max(lws))
    ratios[f"driver_overhead_share_{max(lws)}"] = v("lm_driver_share", max(lws))
    # measured where the job had 256 workers or more; else the fit's, extrapolated
    lm_measured_256 = max(lws) >= 256
    ratios["driver_overhead_share_256"] = (v("lm_driver_share", max(lws)) if lm_measured_256
                                           else (a + b * 256) / 1e3 / step_big)
    ratios["driver_cpu_ms_per_lm_step_per_worker"] = b
# node relays (cluster.yaml relay: true): the dispatch and the LM job again
rns = sorted({int(k.rsplit("_", 1)[1]) for k in kv if k.startswith("relay_start_s_")})
if rns:
    rbig = max(rns)
    ratios["dispatch_p50_256_over_8_relay"] = ratio(v("relay_dispatch_p50_ms", rbig),
                                                    v("relay_dispatch_p50_ms", 8))
    ratios["driver_cpu_per_worker_relay_over_direct_256"] = ratio(
        v("relay_driver_cpu_us_per_step_per_worker", rbig),
        v("driver_cpu_us_per_step_per_worker", rbig))
rlws = sorted({int(k.rsplit("_", 1)[1]) for k in kv if k.startswith("lm_relay_workers_")})
if rlws and max(rlws) >= 256:
    ratios["driver_overhead_share_256_relay"] = v("lm_relay_driver_share", max(rlws))
if "restart_rejoin_s" in kv:
    ratios[f"restart_rejoin_s_{int(kv['restart_workers'])}"] = kv["restart_rejoin_s"]
for k, x in ratios.items():
    if x is not None:
        print(f"bench: {k} = {x:.4g}")
if big != 256:
    print(f"bench: the largest N that ran is {big}: the *_256_* ratios are at N = {big}")

rows = [
    ("job start (s)", "start_s", "{:.2f}"),
    ("dp_compute p50 (ms)", "dispatch_p50_ms", "{:.2f}"),
    ("dp_compute p99 (ms)", "dispatch_p99_ms", "{:.2f}"),
    ("driver CPU per step (ms)", "driver_cpu_ms_per_step", "{:.2f}"),
    ("driver CPU per step per worker (µs)", "driver_cpu_us_per_step_per_worker", "{:.1f}"),
    ("worker CPU per call, per worker (µs)", "worker_cpu_us_per_call", "{:.0f}"),
    ("heartbeat messages/s (both ways)", "heartbeat_msgs_per_s", "{:.0f}"),
    ("driver CPU while idle (% of a core)", "driver_idle_cpu_pct", "{:.2f}"),
    ("driver RSS (MiB)", "driver_rss_kib", "{:.1f}"),
    ("driver RSS growth per worker (KiB)", "driver_rss_kib_per_worker", "{:.0f}"),
    ("kill -9 → driver restarts it (s)", "detect_s", "{:.3f}"),
    ("kill -9 → a call on all N succeeds (s)", "recover_s", "{:.2f}"),
    ("10% killed at once during a dp_compute: workers", "mass_kill_workers", "{:.0f}"),
    ("… → the call over all N returns its batch (s)", "mass_recover_s", "{:.2f}"),
    ("… the result equals the fault-free one (1 = yes)", "mass_result_equal", "{:.0f}"),
    (f"broadcast {int(kv.get('fanout_mib', 4))} MiB, star (ms)", "fanout_star_ms", "{:.0f}"),
    (f"broadcast {int(kv.get('fanout_mib', 4))} MiB, chain (ms)", "fanout_chain_ms", "{:.0f}"),
    ("… the receivers' CPU per chain broadcast (ms)", "fanout_chain_workers_cpu_ms", "{:.0f}"),
    ("broadcast 64 MiB, star (ms)", "fanout64_star_ms", "{:.0f}"),
    ("broadcast 64 MiB, chain (ms)", "fanout64_chain_ms", "{:.0f}"),
]
date = datetime.datetime.utcnow().strftime("%Y-%m-%d")
out = ["<!-- bench-scale:begin -->",
       "## The runtime as the job grows (`make bench-scale`, bench/bench_scale.sh)", "",
       f"Produced by `make bench-scale` on {date} at commit `{commit}`, {nproc} CPU cores, load "
       f"average {load0} at the start and {load1} at the end (other jobs shared the machine). "
       f"Every job is N `rl-worker` processes serving the selftest's test methods (fixed small "
       f"work) plus one actor rank, all on this machine; N = {', '.join(map(str, ns))} ran.", "",
       "| measure | " + " | ".join(f"N = {n}" for n in ns) + " |",
       "|---|" + "---|" * len(ns)]
for label, key, fmt in rows:
    cells = []
    for n in ns:
        x = v(key, n)
        if x is not None and key == "driver_rss_kib":
            x = x / 1024
        if key == "worker_cpu_us_per_call" and not x:
            x = None  # under the 10 ms tick of /proc over the calls
        cells.append(fmt.format(x) if x is not None else "–")
    out.append(f"| {label} | " + " | ".join(cells) + " |")
out += ["", "| ratio | value | target |", "|---|---|---|"]
targets = {"dispatch_p50_256_over_8": ("≤ 32", lambda x: x <= 32),
           "dispatch_p50_256_over_8_relay": ("≤ 32", lambda x: x <= 32),
           "driver_overhead_share_256": ("≤ 0.01", lambda x: x <= 0.01),
           "driver_overhead_share_256_relay": ("≤ 0.01", lambda x: x <= 0.01),
           "driver_rss_per_worker_kib": ("≤ 1024", lambda x: x <= 1024),
           "fanout_256_over_1": ("≤ 2", lambda x: x <= 2)}
for k, x in ratios.items():
    if x is None:
        continue
    t = targets.get(k)
    met = f" ({'met' if t[1](x) else 'not met'})" if t else ""
    out.append(f"| `bench: {k}` | **{x:.4g}**{met} | {t[0] if t else ''} |")
if big != 256:
    out += ["", f"The largest N that ran is {big}: the ratios named `_256_` are at N = {big}. "
            + os.environ.get("RL_BENCH_SCALE_NOTE", "")]
out += ["",
        f"N is the number of workers (the actor rank is one more process). dp_compute sends 4 rows of "
        f"16 floats to every worker and concatenates the replies; p50/p99 over "
        f"{int(kv.get('calls', 40))} calls. Driver CPU is this process's (the recipe thread and the "
        f"I/O thread) over those calls; its RSS growth is from before the driver starts to after "
        f"the calls. Heartbeat messages are counted from the interval (1 s, one each way per "
        f"worker). A killed worker is found by its process's exit (local launch); a remote one "
        f"by silence, within interval × liveness (3 s). The broadcast is the actor's weight send "
        f"in 256 KiB buckets until every receiver acknowledged (each receiver checks every "
        f"value of the version it got after that, outside the time: weights_check); the "
        f"receivers' CPU is their summed CPU (/proc, 10 ms ticks) over one chain broadcast. "
        f"64 MiB only at N ≤ 8 (two 64 MiB "
        f"buffers per receiver do not fit this machine's memory at 256). On one machine every "
        f"link shares the same {nproc} cores, so a chain cannot beat a star here: the total copy "
        f"work is N transfers either way; what the chain removes is the sender's N× outgoing "
        f"bytes, which is what limits a star across machines (docs/SCALE.md).",
        "",
        "Worker CPU per call is the summed CPU of the N worker processes (all their threads, from "
        "/proc, 10 ms ticks) over the calls, over N: with N processes on "
        f"{nproc} cores, p50 is bounded below by (driver CPU + N × worker CPU) / {nproc}, which "
        "is what bounds `dispatch_p50_256_over_8` here (docs/SCALE.md)."]
if nns:
    mbit = int(kv.get("netns_link_mbit", 0))
    out += ["", "### Remote nodes: network namespaces (bench/bench_scale_netns.sh)", "",
            f"{int(kv.get('netns_nodes', 0))} network namespaces as nodes, each joined to a bridge "
            f"(where the driver runs) by a veth pair limited to {mbit} Mbit/s each way "
            f"(tc tbf): a NIC per node. The actor is alone on node 0, receivers 8 to a node; "
            f"workers are external (`launch: external`, started with `ip netns exec`). The "
            f"broadcast is {int(kv.get('netns_fanout_mib', 4))} MiB in "
            f"{int(kv.get(f'netns_fanout_bucket_kib_{nbig}', kv.get('netns_fanout_bucket_kib', 64)))} "
            f"KiB buckets, best of 2; the star runs only to N ≤ 32 (it is N transfers long). "
            f"With receivers on several nodes the chain runs over the nodes' heads, each feeding "
            f"its node's ranks (docs/decisions/weight-fanout-chain.md). " + star_note, "",
            "| measure | " + " | ".join(f"N = {n}" for n in nns) + " |",
            "|---|" + "---|" * len(nns)]
    for label, key, fmt in [("job start (s)", "netns_start_s", "{:.2f}"),
                            ("dp_compute p50 (ms)", "netns_dispatch_p50_ms", "{:.2f}"),
                            ("driver CPU per step per worker (µs)",
                             "netns_driver_cpu_us_per_step_per_worker", "{:.1f}"),
                            ("broadcast, star (ms)", "netns_fanout_star_ms", "{:.0f}"),
                            ("broadcast, chain (ms)", "netns_fanout_chain_ms", "{:.0f}"),
                            ("… the receivers' CPU per chain broadcast (ms)",
                             "netns_fanout_chain_workers_cpu_ms", "{:.0f}")]:
        out.append(f"| {label} | " + " | ".join(
            fmt.format(v(key, n)) if v(key, n) is not None else "–" for n in nns) + " |")
elif "netns_skipped" in kv:
    out += ["", "Remote nodes (network namespaces) were not run: "
            + open(txt).read().split("netns_skipped = 1", 1)[1].split("\n", 1)[0].strip() + "."]
if rns:
    per = int(os.environ.get("RL_BENCH_SCALE_RELAY", "8"))
    out += ["", "### Node relays (cluster.yaml `relay: true`; rlrt/runtime/relay.h)", "",
            f"The dispatch above again with the workers (and the actor) on nodes of {per}, each "
            f"node behind a relay: one `rl-worker --relay` per node that its workers connect to "
            f"(a Unix socket) and that forwards both ways over one connection to the driver, "
            f"sending the replies to one method's calls together when the last one comes "
            f"(docs/decisions/node-relay.md). Every node is this machine, so the relays' CPU "
            f"shares the same {nproc} cores: what they save is the driver's, not the machine's.",
            "", "| measure | " + " | ".join(f"N = {n}" for n in rns) + " |",
            "|---|" + "---|" * len(rns)]
    for label, key, fmt in [("dp_compute p50, direct (ms)", "dispatch_p50_ms", "{:.2f}"),
                            ("dp_compute p50, relays (ms)", "relay_dispatch_p50_ms", "{:.2f}"),
                            ("driver CPU per step per worker, direct (µs)",
                             "driver_cpu_us_per_step_per_worker", "{:.1f}"),
                            ("driver CPU per step per worker, relays (µs)",
                             "relay_driver_cpu_us_per_step_per_worker", "{:.1f}"),
                            ("worker CPU per call, relays (µs)", "relay_worker_cpu_us_per_call",
                             "{:.0f}"),
                            ("job start, relays (s)", "relay_start_s", "{:.2f}")]:
        out.append(f"| {label} | " + " | ".join(
            fmt.format(v(key, n)) if v(key, n) is not None else "–" for n in rns) + " |")
if "restart_workers" in kv:
    rw = int(kv["restart_workers"])
    out += ["", "### A driver restart with external workers running (bench/bench_scale_restart.sh)", "",
            f"The LM job below with {rw} reward ranks started outside the driver (`launch: "
            f"external`) and its actor and rollout spawned by the driver; at step 4 the driver is "
            f"killed with SIGKILL and `rl-driver --resume` starts at once, under the job id of "
            f"the run it resumes (OUTPUT_DIR/job_id).", "",
            "| measure | value |", "|---|---|",
            f"| external workers alive when the new driver is ready | {int(kv.get('restart_alive', 0))} of {rw} |"]
    if "restart_rejoin_s" in kv:
        out.append(f"| new driver's start → every worker READY (s) | {kv['restart_rejoin_s']:.2f} |")
    if "restart_first_step_s" in kv:
        out.append(f"| new driver's start → its first step done (s) | {kv['restart_first_step_s']:.2f} |")
    out += [f"| first step of the new driver (checkpoint every 2) | {int(kv.get('restart_resumed_step', 0))} |",
            f"| the resumed job ran to its last step (1 = yes) | {int(kv.get('restart_finished', 0))} |"]
if lws:
    out += ["", "### The driver's share of a step of the real LM job (bench/bench_scale_lm.py)", "",
            "examples/arith_grpo.yaml (the tiny-model RLVR job of `make run`, from a random init) "
            "with R rollout, 2R reward and 2 actor ranks on this machine; the driver process's "
            "CPU (recipe and I/O threads) over the steps after the first two.", "",
            "| workers | step (s) | driver CPU per step (ms) | driver share of a step | "
            "with relays: step (s) | driver CPU per step (ms) | driver share |",
            "|---|---|---|---|---|---|---|"]

    def cell(key, w, fmt):
        x = v(key, w)
        return fmt.format(x) if x is not None else "–"
    for w in lws:
        out.append(f"| {w} | {v('lm_step_s', w):.3f} | {v('lm_driver_cpu_ms_per_step', w):.1f} | "
                   f"{v('lm_driver_share', w):.4f} | {cell('lm_relay_step_s', w, '{:.3f}')} | "
                   f"{cell('lm_relay_driver_cpu_ms_per_step', w, '{:.1f}')} | "
                   f"{cell('lm_relay_driver_share', w, '{:.4f}')} |")
    if rlws:
        out += ["", f"With relays the job's ranks are placed {int(os.environ.get('RL_BENCH_SCALE_LM_RELAY', '8'))} "
                "to a node (rollout, actor, reward in that order), every node behind its relay; "
                "`driver_overhead_share_256_relay` is measured at the largest job."]
    if lm_fit:
        a, b = lm_fit
        if max(lws) >= 256:
            out += ["", f"Fitted: driver CPU per step ≈ {a:.1f} ms + {b * 1e3:.0f} µs × workers. "
                    f"`driver_overhead_share_256` is **measured**: the job with {max(lws)} workers "
                    f"(its driver CPU per step over its step time)."]
        else:
            out += ["", f"Fitted: driver CPU per step ≈ {a:.1f} ms + {b * 1e3:.0f} µs × workers. "
                    f"`driver_overhead_share_256` is **extrapolated**: ({a:.1f} + {b:.3f} × 256) ms over "
                    f"the step at the largest W measured ({v('lm_step_s', max(lws)):.2f} s); "
                    f"`driver_overhead_share_{max(lws)}` is measured."]
out += ["",
        "Plots: " + ", ".join(f"docs/scale_{k}.png" for k in ("dispatch", "driver_cpu", "rss",
                                                           "start_recovery", "fanout")) +
        (", docs/scale_fanout_netns.png" if nns else "") + (", docs/scale_lm_driver.png" if lws else "") + ".",
        "<!-- bench-scale:end -->"]
section = "\n".join(out)
res = "docs/RESULTS.md"
text = open(res).read()
a, b = "<!-- bench-scale:begin -->", "<!-- bench-scale:end -->"
if a in text:
    text = text[:text.index(a)] + section + text[text.index(b) + len(b):]
else:
    text = text.rstrip("\n") + "\n\n" + section + "\n"
open(res, "w").write(text)
print(f"wrote the bench-scale section of {res}")

try:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
except ImportError:
    sys.exit(0)


def plot(name, title, ylabel, series, logy=False):
    fig, ax = plt.subplots(figsize=(5, 3.4), dpi=110)
    for label, key in series:
        pts = [(n, v(key, n)) for n in ns if v(key, n) is not None]
        if pts:
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=label)
    ax.set_xscale("log", base=2)
    if logy:
        ax.set_yscale("log")
    ax.set_xlabel("workers N")
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(f"docs/scale_{name}.png")
    plt.close(fig)


plot("dispatch", "dp_compute across N workers", "ms",
     [("p50", "dispatch_p50_ms"), ("p99", "dispatch_p99_ms"),
      ("p50, relays", "relay_dispatch_p50_ms")])
plot("driver_cpu", "driver CPU per dp_compute step", "ms",
     [("per step", "driver_cpu_ms_per_step"), ("per step, relays", "relay_driver_cpu_ms_per_step")])
plot("rss", "driver resident memory", "KiB", [("RSS", "driver_rss_kib")])
plot("start_recovery", "job start and recovery", "s",
     [("start", "start_s"), ("kill → restarted", "detect_s"), ("kill → all answer", "recover_s")])
plot("fanout", f"weight broadcast of {int(kv.get('fanout_mib', 4))} MiB", "ms",
     [("star", "fanout_star_ms"), ("chain", "fanout_chain_ms")])
if nns:
    ns_keep = ns
    ns = nns
    plot("fanout_netns", f"broadcast across nodes ({int(kv.get('netns_link_mbit', 0))} Mbit/s links)",
         "ms", [("star" + (f" (past {sn}: extrapolated)" if star_note else ""),
                 "netns_fanout_star_ms"), ("chain", "netns_fanout_chain_ms")], logy=True)
    ns = ns_keep
if lws:
    ns_keep = ns
    ns = lws
    plot("lm_driver", "driver CPU per step of the LM job", "ms",
         [("driver CPU per step", "lm_driver_cpu_ms_per_step"),
          ("with relays", "lm_relay_driver_cpu_ms_per_step")])
    ns = ns_keep
print("wrote docs/scale_*.png")
