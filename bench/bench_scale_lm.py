#!/usr/bin/env python3
"""bench_scale_lm.py — the driver's share of a step of the real LM job (part
of `make bench-scale`): examples/arith_grpo.yaml (the tiny-model RLVR job of
`make run`, from a random init so that no warm start is needed) on this
machine with R rollout and 2R reward ranks (and the 2 actor ranks), for each
R of RL_BENCH_SCALE_LM_ROLLOUTS (default "1 8 32 85": 85 makes 257 workers, so that
the share at 256 is measured, not extrapolated). The rl-driver process's
CPU time (its recipe and I/O threads; the workers are other processes) is
read from /proc at each step line it logs; over the steps after the first
two it prints
  bench: lm_workers_W = W                    workers of the job
  bench: lm_step_s_W = S                     wall time per step
  bench: lm_driver_cpu_ms_per_step_W = C     driver CPU per step
  bench: lm_driver_share_W = C / S           the driver's share of a step
and the same as lm_relay_* with the workers on nodes of RL_BENCH_SCALE_LM_RELAY
(default 8; 0: not run) each behind a relay (cluster.yaml relay: true).
usage: bench_scale_lm.py BUILD OUT"""
import os
import re
import subprocess
import sys
import tempfile
import time

STEP = re.compile(r"driver INFO step (\d+) \|")


def cpu_s(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            s = f.read()
    except OSError:
        return None
    fields = s[s.rindex(")") + 2:].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cluster_yaml(rollouts, per_relay):
    """The job's cluster.yaml: one node, or (per_relay > 0) nodes of
    per_relay workers each behind a relay (every node is this machine)."""
    head = ("driver: {bind: 127.0.0.1, port: 5561}\n"
            "heartbeat: {interval_s: 1.0, liveness: 3}\n"
            "restart: {max_restarts: 1, backoff_s: 1.0, backoff_max_s: 2.0}\n")
    roles = [("rollout", rollouts), ("actor", 2), ("reward", 2 * rollouts)]
    if not per_relay:
        return head + ("nodes: [{name: local, address: 127.0.0.1, launch: local}]\nroles:\n" +
                       "".join(f"  {r}: {{count: {n}, node: local}}\n" for r, n in roles))
    total = sum(n for _, n in roles)
    nodes = (total + per_relay - 1) // per_relay
    text = head + "nodes:\n" + "".join(
        f"  - {{name: n{i}, address: 127.0.0.1, launch: local, relay: true}}\n"
        for i in range(nodes)) + "roles:\n"
    k = 0
    for r, n in roles:
        text += f"  {r}:\n    count: {n}\n    placement:\n"
        for rank in range(n):
            text += f"      - {{rank: {rank}, node: n{k // per_relay}}}\n"
            k += 1
    return text


def run(build, rollouts, steps, tmp, per_relay=0):
    rewards = 2 * rollouts
    cluster = os.path.join(tmp, f"cluster-{rollouts}-{per_relay}.yaml")
    with open(cluster, "w") as f:
        f.write(cluster_yaml(rollouts, per_relay))
    out = os.path.join(tmp, f"run-{rollouts}-{per_relay}")
    cmd = [f"{build}/bin/rl-driver", "--cluster", cluster, "--config", "examples/arith_grpo.yaml",
           "model.init_from=", f"trainer.total_steps={steps}", "trainer.val_every=0",
           "trainer.save_every=0", f"trainer.output_dir={out}"]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    marks = {}
    tail = []
    for line in p.stdout:
        tail = (tail + [line])[-20:]
        m = STEP.search(line)
        if m:
            c = cpu_s(p.pid)
            if c is not None:
                marks[int(m.group(1))] = (time.monotonic(), c)
    rc = p.wait()
    if rc != 0 or len(marks) < 4:
        sys.stdout.write("".join(tail))
        print(f"bench_scale_lm: the job with {rollouts} rollout ranks exited {rc}")
        return None
    first, last = sorted(marks)[2], max(marks)
    wall = marks[last][0] - marks[first][0]
    cpu = marks[last][1] - marks[first][1]
    n = last - first
    return rollouts + rewards + 2, wall / n, cpu / n


def main():
    build, out = sys.argv[1], sys.argv[2]
    steps = int(os.environ.get("RL_BENCH_SCALE_LM_STEPS", "12"))
    lines = []
    per_relay = int(os.environ.get("RL_BENCH_SCALE_LM_RELAY", "8"))
    with tempfile.TemporaryDirectory(prefix="rlrt-bench-scale-lm.") as tmp:
        for r in os.environ.get("RL_BENCH_SCALE_LM_ROLLOUTS", "1 8 32 85").split():
            # the job as one node, then on nodes of per_relay behind relays
            for tag, per in (("lm", 0), ("lm_relay", per_relay)):
                if tag == "lm_relay" and not per:
                    continue
                res = run(build, int(r), steps, tmp, per)
                if not res:
                    break
                w, step_s, cpu = res
                lines += [f"bench: {tag}_workers_{w} = {w}",
                          f"bench: {tag}_step_s_{w} = {step_s:.3f}",
                          f"bench: {tag}_driver_cpu_ms_per_step_{w} = {cpu * 1e3:.1f}",
                          f"bench: {tag}_driver_share_{w} = {cpu / step_s:.4f}"]
                print("\n".join(lines[-4:]), flush=True)
            if not res:
                break
    with open(out, "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
