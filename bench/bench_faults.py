"""bench_faults.py — `make bench-faults`: every role killed (SIGKILL, a real
process, from outside) at a random moment inside every phase of a step, in
the three tracks' training recipes; each run must complete with the metrics
and the final weights of a fault-free run, and the time from the kill to the
next completed step is measured.

How a kill is aimed. The workers of these jobs run with RL_FAULT_ANNOUNCE
(common/runtime/worker.c): each sends a datagram "ROLE/RANK PID METHOD
start|end" to this script when a call's handler starts and ends. A phase is
the call that marks it on one rank (the rollout's `generate`, the actor's
`update_actor`, ...: each recipe's "phases" in RECIPES). For each (victim,
phase) case the script picks an occurrence of the phase's call from the
middle of a fault-free run of the same job, waits for it in the faulty run,
sleeps a random fraction (up to 0.9) of that call's duration in the
fault-free run and, if the call is still running, SIGKILLs the victim's
process (else it tries the next occurrence, up to 8 times). A call whose
median is under 10 ms (a reward, a small weight sync) is held open 100 ms
after its start (RL_FAULT_HOLD, worker.c): timing only. The victim may be
the rank that runs the phase or any other (the reward while the actor
updates, ...): every role in every phase.

Kill to next step: from the kill to the first step the driver completes
with every worker ready again, the victim's replacement included (its log
line "recovered from the loss of ..."; its clock and this one are the wall
clock). A replayed step counts: a recovery replays from the newest
checkpoint.

Prints a line per run, then
  bench: fault_runs_equal_metrics = k/N
  bench: fault_recovery_s_max = X (recipe: victim in phase)
and writes the bench-faults section of docs/RESULTS.md (RL_BENCH_FAULT_OUT).
Knobs: RL_BENCH_FAULT_RECIPES (default "rlvr libero_rl diffusion"; libero_rl
needs `make libero-data`, diffusion Debian's dataset-fashion-mnist: a
recipe that cannot run is skipped and says why), RL_BENCH_FAULT_CASES (a
regex over "recipe victim phase"), RL_BENCH_FAULT_SEED (default 1).
"""
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration"))
import fault_recovery as fr  # noqa: E402  (the comparison with a fault-free run)
import fault_recovery_bound as frb  # noqa: E402  (log time stamps)

ROOT = fr.ROOT
FMNIST = "/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz"
LIBERO = os.path.join(ROOT, "build", "libero-data")
HEARTBEAT = "heartbeat: {interval_s: 1.0, liveness: 3}\n"
DEBUG = os.environ.get("RL_BENCH_FAULT_DEBUG")
HOLD_BELOW_S, HOLD_S = 0.010, 0.100  # RL_FAULT_HOLD: calls shorter than 10 ms held 100 ms
RESTART = "restart: {max_restarts: 3, backoff_s: 1.0, backoff_max_s: 1.0}\n"


def cluster_text(roles):
    return ("driver: {bind: 127.0.0.1, port: 5555}\n" + HEARTBEAT + RESTART +
            "nodes: [{name: local, address: 127.0.0.1, launch: local}]\nroles:\n" +
            "".join("  %s: {count: %d, node: local}\n" % rc for rc in roles))


# ---- the jobs ---------------------------------------------------------------------------

def warm_start(work, cfile, args, what):
    p = subprocess.run([fr.DRIVER, "--cluster", cfile, "--bind", "tcp://127.0.0.1:*",
                        "--log-level", "warn"] + args, cwd=work, capture_output=True, text=True)
    if p.returncode:
        raise SystemExit("%s failed: %s" % (what, (p.stdout + p.stderr)[-2000:]))


def setup_rlvr(work, cfile):
    warm_start(work, cfile, ["--config", os.path.join(ROOT, "examples", "arith_sft.yaml"),
                             "trainer.output_dir=runs/sft"], "the arithmetic warm start")


def setup_diffusion(work, cfile):
    tiny = ["model.hidden_size=32", "model.num_layers=1", "model.time_embed_dim=8"]
    warm_start(work, cfile, ["trainer.recipe=scorer_train", "trainer.output_dir=runs/scorer",
                             "trainer.total_steps=40", "model.hidden_size=32", "data.train_limit=2000",
                             "data.train_batch_size=64"], "the diffusion scorer")
    warm_start(work, cfile, ["trainer.recipe=flow_pretrain", "trainer.output_dir=runs/flow",
                             "trainer.total_steps=30", "data.train_limit=2000", "data.train_batch_size=32"]
               + tiny, "the diffusion generator")


RECIPES = {
    "rlvr": {
        "roles": [("rollout", 1), ("actor", 2), ("reward", 2)],
        "config": "arith_grpo.yaml",
        "overrides": ["model.init_from=runs/sft/final", "trainer.total_steps=12", "trainer.save_every=3",
                      "trainer.val_every=0"],
        "final": "checkpoints/step_12/model.safetensors",
        "setup": setup_rlvr,
        "victims": ["rollout/0", "actor/0", "actor/1", "reward/0"],
        "phases": [("generation", "rollout/0", "generate"), ("reward", "reward/0", "compute_reward"),
                   ("old_log_prob", "actor/0", "compute_log_prob"), ("update", "actor/1", "update_actor"),
                   ("weight_sync", "actor/0", "publish_weights"),
                   ("checkpoint", "actor/1", "save_checkpoint")],
    },
    "libero_rl": {
        "roles": [("env", 2), ("rollout", 2), ("actor", 2)],
        "config": "libero_object_flowsar.yaml",
        "overrides": ["env.data_dir=" + LIBERO, "model.init_from=", "env.total_num_envs=2", "env.group_size=1",
                      "env.task_ids=0-1", "env.max_episode_steps=60", "algorithm.demo_coef=0",
                      "trainer.val_every=0", "eval.episodes_per_task=1", "eval.gif_episodes_per_task=0",
                      "trainer.total_steps=12", "trainer.save_every=3"],
        "final": "checkpoints/step_12/model.safetensors",
        "needs": (os.path.join(LIBERO, "manifest.json"), "make libero-data"),
        "victims": ["env/0", "rollout/0", "actor/0", "actor/1"],
        "phases": [("env_rollout", "env/0", "interact"), ("annotate", "rollout/1", "flow_annotate"),
                   ("update", "actor/1", "update_flow"), ("weight_sync", "actor/0", "publish_weights"),
                   ("checkpoint", "actor/1", "save_checkpoint")],
    },
    "diffusion": {
        "roles": [("rollout", 1), ("actor", 2), ("reward", 1)],
        "config": None,
        "overrides": ["trainer.recipe=diffusion", "model.init_from=runs/flow/final",
                      "reward.scorer_path=runs/scorer/final", "data.train_batch_size=4", "rollout.n=4",
                      "actor.ppo_mini_batch_size=2", "rollout.num_steps=4", "data.val_per_prompt=2",
                      "actor.optim.lr=1e-3", "actor.timestep_fraction=0.5", "model.hidden_size=32",
                      "model.num_layers=1", "model.time_embed_dim=8", "trainer.total_steps=12",
                      "trainer.save_every=3", "trainer.val_every=0"],
        "final": "checkpoints/step_12/model.safetensors",
        "needs": (FMNIST, "Debian's dataset-fashion-mnist (deploy/install-deps.sh)"),
        "setup": setup_diffusion,
        "victims": ["rollout/0", "actor/0", "actor/1", "reward/0"],
        "phases": [("generation", "rollout/0", "generate"), ("reward", "reward/0", "compute_image_reward"),
                   ("update", "actor/1", "update_diffusion"), ("weight_sync", "actor/0", "publish_weights"),
                   ("checkpoint", "actor/1", "save_checkpoint")],
    },
}


# ---- the announcements and the kill --------------------------------------------------------

class Listener(threading.Thread):
    """Receives the workers' announcements; records every call (for the
    fault-free run) and kills the victim when the target call runs."""

    def __init__(self, path, rng):
        super().__init__(daemon=True)
        self.path = path
        self.rng = rng
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(path)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 22)
        self.t0 = time.time()
        self.pids = {}       # slot -> pid
        self.count = {}      # (slot, method) -> starts so far
        self.open = {}       # (slot, method) -> (occurrence, wall time of its start): running now
        self.calls = []      # (slot, method, k, start, end), seconds since t0
        self.target = None   # slot, method, ks (occurrences to try), delays, victim, tries
        self.kill_at = None  # wall time of the kill aimed at the running target call
        self.killed = None   # (wall time, occurrence, tries)
        self.stop = False

    def arm(self, slot, method, ks, delays, victim):
        self.target = {"slot": slot, "method": method, "ks": list(ks), "delays": list(delays),
                       "victim": victim, "tries": 0}

    def _aim(self):
        """Aims at the target occurrence if it runs; drops the ones past."""
        t = self.target
        if not t or self.killed:
            self.kill_at = None
            return
        key = (t["slot"], t["method"])
        cur = self.open.get(key)
        while t["ks"] and (self.count.get(key, 0) > t["ks"][0]) and not (cur and cur[0] == t["ks"][0]):
            t["ks"].pop(0)  # it ran and ended before its moment: the next one
            t["delays"].pop(0)
            self.kill_at = None
        if not t["ks"]:
            self.target = self.kill_at = None
        elif cur and cur[0] == t["ks"][0]:
            if self.kill_at is None:
                t["tries"] += 1
                self.kill_at = cur[1] + t["delays"][0]
        else:
            self.kill_at = None

    def _fire(self):
        t = self.target
        key = (t["slot"], t["method"])
        cur, pid = self.open.get(key), self.pids.get(t["victim"])
        if DEBUG:
            print("  fire: target %s, running %s, victim pid %s, late %.1f ms" % (
                t["ks"][0], cur, pid, 1e3 * (time.time() - self.kill_at)), flush=True)
        if cur and cur[0] == t["ks"][0] and pid:
            now = time.time()
            try:
                os.kill(pid, signal.SIGKILL)
                self.killed = (now, cur[0], t["tries"])
            except ProcessLookupError:
                pass
        self.kill_at = None
        if not self.killed:
            t["ks"].pop(0)
            t["delays"].pop(0)
        self._aim()

    def run(self):
        while not self.stop:
            if self.kill_at is not None and self.kill_at <= time.time():
                self._fire()
                continue
            self.sock.settimeout(0.2 if self.kill_at is None else max(self.kill_at - time.time(), 0))
            try:
                msg = self.sock.recv(512).decode(errors="replace").split()
            except socket.timeout:
                continue
            except OSError:
                break
            if len(msg) != 4:
                continue
            slot, pid, method, what = msg
            self.pids[slot] = int(pid)
            key = (slot, method)
            now = time.time()
            if what == "start":
                k = self.count.get(key, 0) + 1
                self.count[key] = k
                self.open[key] = (k, now)
            elif key in self.open:
                k, start = self.open.pop(key)
                self.calls.append((slot, method, k, start - self.t0, now - self.t0))
            self._aim()

    def close(self):
        self.stop = True
        self.sock.close()
        self.join(2)
        try:
            os.unlink(self.path)
        except OSError:
            pass


def cmd_of(spec, cfile, out):
    cmd = [fr.DRIVER, "--cluster", cfile, "--bind", "tcp://127.0.0.1:*", "--log-level", "info"]
    if spec["config"]:
        cmd += ["--config", os.path.join(ROOT, "examples", spec["config"])]
    return cmd + spec["overrides"] + ["trainer.output_dir=" + out]


def run_job(work, spec, cfile, out, listener, hold=None):
    env = dict(os.environ, RL_FAULT_ANNOUNCE=listener.path)
    if hold:
        env["RL_FAULT_HOLD"] = hold
    p = subprocess.Popen(cmd_of(spec, cfile, out), cwd=work, env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True, start_new_session=True)
    listener.t0 = time.time()
    lines = []
    reader = threading.Thread(target=lambda: lines.extend(p.stdout), daemon=True)
    reader.start()
    try:
        p.wait(timeout=900)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()
    reader.join(5)
    return p.returncode, lines


# ---- one recipe -------------------------------------------------------------------------------

def bench_recipe(name, spec, work, rng, case_filter, results):
    need = spec.get("needs")
    if need and not os.path.exists(need[0]):
        print("%s: skipped: %s is missing (%s)" % (name, need[0], need[1]))
        results["skipped"].append("%s (%s)" % (name, need[1]))
        return
    cfile = os.path.join(work, "cluster-%s.yaml" % name)
    with open(cfile, "w") as f:
        f.write(cluster_text(spec["roles"]))
    if spec.get("setup"):
        spec["setup"](work, cfile)
    # the fault-free run: the reference and the calls' timeline
    lis = Listener(os.path.join(work, "announce-%s-ref" % name), rng)
    lis.start()
    t0 = time.time()
    rc, lines = run_job(work, spec, cfile, "runs/%s-ref" % name, lis)
    lis.close()
    ref_s = time.time() - t0
    if rc:
        print("".join(lines[-40:]))
        raise SystemExit("%s: the fault-free run failed (exit %d)" % (name, rc))
    print("%s: fault-free run %.1f s, %d calls announced" % (name, ref_s, len(lis.calls)))
    calls = lis.calls
    for victim in spec["victims"]:
        for phase, slot, method in spec["phases"]:
            case = "%s %s %s" % (name, victim, phase)
            if not re.search(case_filter, case):
                continue
            occ = sorted((k, s, e) for sl, m, k, s, e in calls if sl == slot and m == method)
            if not occ:
                raise SystemExit("%s: the fault-free run has no call %s on %s" % (name, method, slot))
            # an occurrence in the middle of the job, then the next ones as fall-backs
            mid = [o for o in occ if 0.25 * ref_s <= o[1] <= 0.7 * ref_s] or occ[len(occ) // 2:]
            chosen = mid[rng.randrange(len(mid))][0]
            # fall-backs, not in the last tenth (a kill after the last checkpoint
            # would need no recovery)
            tries = [o for o in occ if o[0] == chosen or (o[0] > chosen and o[1] <= 0.9 * ref_s)][:8]
            # a call too short to be hit from outside is held open (timing only)
            durs = sorted(o[2] - o[1] for o in occ)
            hold = HOLD_S if durs[len(durs) // 2] < HOLD_BELOW_S else 0
            lis = Listener(os.path.join(work, "announce-%s-%d" % (name, len(results["runs"]))), rng)
            lis.arm(slot, method, [o[0] for o in tries],
                    [rng.uniform(0, 0.9 * (max(o[2] - o[1], 0.0005) + hold)) for o in tries], victim)
            if DEBUG:
                print("  %s: tries %s, hold %s" % (case, tries, hold), flush=True)
            lis.start()
            out = "runs/%s-%s-%s" % (name, victim.replace("/", ""), phase)
            rc, lines = run_job(work, spec, cfile, out, lis,
                                "%s:%s:%d" % (slot, method, hold * 1000) if hold else None)
            lis.close()
            r = {"recipe": name, "victim": victim, "phase": phase, "marker": "%s %s" % (slot, method),
                 "completed": rc == 0, "equal": False, "recovery_s": None, "killed": lis.killed is not None,
                 "held": bool(hold)}
            why = ""
            if lis.killed:
                at, k, n = lis.killed
                r["occurrence"], r["tries"] = k, n
                # the driver's line for the first step completed with the victim back
                rec = [frb.stamp(l) for l in lines if " driver WARN recovered from the loss of " in l]
                rec = [t for t in rec if t is not None and t > at]
                if rec:
                    r["recovery_s"] = rec[0] - at
            else:
                why = "; never killed: the marked call always ended first"
            if rc == 0:
                try:
                    fr.same(work, "runs/%s-ref" % name, out, spec["final"], case)
                    r["equal"] = True
                except SystemExit as e:
                    why += "; " + str(e)
            else:
                why += "; exit %d" % rc
                print("\n".join("  | " + l.rstrip() for l in lines[-30:]))
            results["runs"].append(r)
            print("%s: killed %s inside %s (call %d of %s, try %s): %s%s%s" % (
                name, victim, phase, r.get("occurrence", 0), r["marker"], r.get("tries", "-"),
                "recovered %.2f s after the kill" % r["recovery_s"] if r["recovery_s"] is not None
                else "no recovery logged after the kill",
                ", metrics and weights equal the fault-free run" if r["equal"] else "", why), flush=True)
            shutil.rmtree(os.path.join(work, out), ignore_errors=True)


# ---- the page -------------------------------------------------------------------------------------

def commit():
    try:
        rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                             text=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                               capture_output=True, text=True).stdout.strip()
        return rev + ("-dirty" if dirty else "")
    except OSError:
        return "?"


def section(results, load0, load1, seed, equal, total, worst):
    L = ["<!-- bench-faults:begin -->",
         "## Faults: every role killed inside every phase (`make bench-faults`, bench/bench_faults.py)",
         "",
         "Produced by `make bench-faults` on %s at commit `%s`, seed %d, %d CPU cores, load average %s "
         "at the start and %s at the end. Every worker of these jobs is a real process: the bench "
         "SIGKILLs the victim from outside at a random moment inside the call that marks the phase "
         "(aimed with the workers' RL_FAULT_ANNOUNCE datagrams; the call occurrence is picked from the "
         "middle of a fault-free run and the moment uniformly within the first 90%% of that call's "
         "duration there; a call "
         "whose median there is under 10 ms is held open 100 ms after it starts (RL_FAULT_HOLD, marked "
         "(held): such a kill lands in that pause or in the few ms of the call's work, and the "
         "other ranks are inside the phase; timing only, the metrics are compared all the same). The "
         "cluster has the production heartbeat (1 s x 3) and restarts after 1 s; checkpoints every 3 "
         "steps of 12. Recovery is the time from the kill to the first step the driver completes with "
         "every worker ready again, the victim's replacement included (a replayed step counts). Target: every run ends with the fault-free run's metrics and "
         "weights; recovery <= 10 s."
         % (time.strftime("%Y-%m-%d", time.gmtime()), commit(), seed, os.cpu_count(), load0, load1),
         "",
         "| measure | value | target |", "|---|---|---|",
         "| `bench: fault_runs_equal_metrics` | **%d/%d** (%s) | N/N |"
         % (equal, total, "met" if equal == total and total else "not met"),
         "| `bench: fault_recovery_s_max` | **%s** (%s) | <= 10 s |"
         % ("%.2f" % worst[0] if worst else "-",
            ("%s: %s killed in %s; " % worst[1:] if worst else "") +
            ("met" if worst and worst[0] <= 10 else "not met")),
         ""]
    for name in [n for n in RECIPES if any(r["recipe"] == n for r in results["runs"])]:
        runs = [r for r in results["runs"] if r["recipe"] == name]
        phases = [p[0] for p in RECIPES[name]["phases"]]
        L += ["**%s** (%s; phase: the call that marks it): seconds from the kill to the next step; "
              "= equal metrics and weights, x not, ! not killed." % (
                  name, ", ".join("%s: %s" % (p, m) for p, _, m in
                                  [(p[0], p[1], "`%s` of %s" % (p[2], p[1])) for p in RECIPES[name]["phases"]])),
              "", "| victim | " + " | ".join(phases) + " |", "|---|" + "---|" * len(phases)]
        for v in RECIPES[name]["victims"]:
            cells = []
            for p in phases:
                r = next((r for r in runs if r["victim"] == v and r["phase"] == p), None)
                if not r:
                    cells.append("")
                elif not r["killed"]:
                    cells.append("!")
                else:
                    cells.append("%s %s%s" % ("%.2f" % r["recovery_s"] if r["recovery_s"] is not None else "-",
                                              "=" if r["equal"] else "x", " (held)" if r["held"] else ""))
            L.append("| %s | %s |" % (v, " | ".join(cells)))
        L.append("")
    if results["skipped"]:
        L += ["Skipped: %s." % "; ".join(results["skipped"]), ""]
    L.append("<!-- bench-faults:end -->")
    return "\n".join(L)


def write_section(path, text):
    page = open(path).read() if os.path.exists(path) else ""
    a, b = "<!-- bench-faults:begin -->", "<!-- bench-faults:end -->"
    if a in page and b in page:
        page = page[:page.index(a)] + text + page[page.index(b) + len(b):]
    else:
        # before the hand-made measurements, after the benches' sections
        mark = "\n## Measured by hand"
        i = page.find(mark)
        page = page[:i] + "\n" + text + "\n" + page[i:] if i >= 0 else page + "\n" + text + "\n"
    with open(path, "w") as f:
        f.write(page)


def main():
    if not os.path.exists(fr.DRIVER):
        raise SystemExit("%s not built (make)" % fr.DRIVER)
    seed = int(os.environ.get("RL_BENCH_FAULT_SEED", "1"))
    names = os.environ.get("RL_BENCH_FAULT_RECIPES", "rlvr libero_rl diffusion").split()
    case_filter = os.environ.get("RL_BENCH_FAULT_CASES", ".")
    out = os.environ.get("RL_BENCH_FAULT_OUT", os.path.join(ROOT, "docs", "RESULTS.md"))
    rng = random.Random(seed)
    load0 = " ".join(open("/proc/loadavg").read().split()[:3])
    work = tempfile.mkdtemp(prefix="rlrt-bench-faults-")
    results = {"runs": [], "skipped": []}
    try:
        for name in names:
            if name not in RECIPES:
                raise SystemExit("RL_BENCH_FAULT_RECIPES: unknown recipe '%s' (known: %s)"
                                 % (name, " ".join(RECIPES)))
            bench_recipe(name, RECIPES[name], work, rng, case_filter, results)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    load1 = " ".join(open("/proc/loadavg").read().split()[:3])
    runs = results["runs"]
    equal = sum(r["equal"] and r["killed"] for r in runs)
    timed = [(r["recovery_s"], r["recipe"], r["victim"], r["phase"]) for r in runs
             if r["recovery_s"] is not None]
    worst = max(timed) if timed else None
    for name in names:
        mine = [r for r in runs if r["recipe"] == name]
        if mine:
            print("bench: fault_runs_equal_metrics_%s = %d/%d" % (
                name, sum(r["equal"] and r["killed"] for r in mine), len(mine)))
    print("bench: fault_runs_equal_metrics = %d/%d" % (equal, len(runs)))
    if worst:
        print("bench: fault_recovery_s_max = %.2f (%s: %s killed in %s)" % worst)
    else:
        print("bench: fault_recovery_s_max = - (no run was timed)")
    if runs:
        write_section(out, section(results, load0, load1, seed, equal, len(runs), worst))
        print("wrote the bench-faults section of %s" % out)
    return 0 if runs and equal == len(runs) and worst and worst[0] <= 10 else 1


if __name__ == "__main__":
    sys.exit(main())
