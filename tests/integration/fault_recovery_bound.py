"""fault_recovery_bound.py — a rank killed inside the FSDP update or the
weight sync costs seconds, not a collective's or a channel's timeout.

actor/1, then (another run) actor/0, kills itself with SIGKILL
(RL_FAULT_INJECT) as its update_actor call starts, in a small arithmetic GRPO
job with the default actor.comm_timeout_s and rollout.weight_timeout_s
(120 s): its peer is inside the same update, waiting for it in a
collective. Then actor/0 as it is about to publish weights (the rollout
waits for them) and the rollout as it is about to receive them (actor/0
waits for its acknowledgement). The job must end with the metrics and the
weights of a fault-free run, and the first step that completes after the
kill must come within BOUND_S. Before the driver aborted the survivors'
waits it came after the timeout, 120 s (240 s with the wait for the unsent
segments). The heartbeat here is 0.2 s x 3 and the restart waits 1 s, so a
recovery takes about 1.5 s; BOUND_S is generous for a loaded machine.

While it recovers, the driver's /healthz must say "status": "recovering"
and name the dead slot; afterwards /metrics counts the recovery
(rlrt_recoveries_total, rlrt_recovery_seconds).
"""
import calendar
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fault_recovery as fr  # noqa: E402  (the job's settings, the comparison)

BOUND_S = 30.0
# the job of fault_recovery.py, longer, with the default comm and weight timeouts
TINY = [t for t in fr.TINY if "timeout_s" not in t]
RL = fr.RL + ["trainer.total_steps=30", "trainer.save_every=5", "trainer.val_every=10"]


def cluster(path, port):
    with open(path, "w") as f:
        f.write("driver: {bind: 127.0.0.1, port: 5555}\n"
                "heartbeat: {interval_s: 0.2, liveness: 3}\n"
                "restart: {max_restarts: 3, backoff_s: 1.0, backoff_max_s: 1.0}\n"
                "http: {bind: 127.0.0.1, driver_port: %d}\n"
                "nodes: [{name: local, address: 127.0.0.1, launch: local}]\n"
                "roles:\n"
                "  rollout: {count: 1, node: local}\n"
                "  actor: {count: 2, node: local}\n"
                "  reward: {count: 2, node: local}\n" % port)


def free_port():
    # fixed ports below the kernel's ephemeral range (as runtime_http.sh)
    lo = 32768
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            lo = int(f.read().split()[0])
    except OSError:
        pass
    return 12000 + os.getpid() % (lo - 13000 if lo > 14000 else 1000)


def stamp(line):
    """Wall-clock seconds of a log line's ISO time stamp (None if it has none)."""
    try:
        t = time.strptime(line[:19], "%Y-%m-%dT%H:%M:%S")
        return calendar.timegm(t) + int(line[20:23]) / 1000.0
    except (ValueError, IndexError):
        return None


class Poller(threading.Thread):
    """Reads /healthz and /metrics every 20 ms; keeps what it saw."""

    def __init__(self, port):
        super().__init__(daemon=True)
        self.base = "http://127.0.0.1:%d" % port
        self.health, self.metrics = [], []
        self.stop = False

    def run(self):
        while not self.stop:
            for path, keep in (("/healthz", self.health), ("/metrics", self.metrics)):
                try:
                    with urllib.request.urlopen(self.base + path, timeout=2) as r:
                        keep.append((time.time(), r.read().decode()))
                except OSError:
                    pass
            time.sleep(0.02)


def run_case(work, cfile, port, spec, name):
    marker = os.path.join(work, "fired-" + name)
    env = dict(os.environ, RL_FAULT_INJECT="%s:%s" % (spec, marker))
    cmd = [fr.DRIVER, "--cluster", cfile, "--config", os.path.join(fr.ROOT, "examples", "arith_grpo.yaml"),
           "--bind", "tcp://127.0.0.1:*", "--log-level", "info"] + TINY + RL + \
          ["trainer.output_dir=runs/" + name]
    p = subprocess.Popen(cmd, cwd=work, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         text=True, start_new_session=True)
    lines = []
    reader = threading.Thread(target=lambda: lines.extend(p.stdout), daemon=True)
    reader.start()
    poll = Poller(port)
    poll.start()
    killed = None
    try:
        while p.poll() is None:
            if killed is None and os.path.exists(marker):
                killed = time.time()  # (a file's mtime may come from another clock)
            if killed is not None and time.time() - killed > BOUND_S + 5:
                steps = [stamp(l) for l in list(lines) if " driver INFO step " in l and " | " in l]
                if not any(t is not None and t > killed for t in steps):
                    os.killpg(p.pid, signal.SIGKILL)
                    p.wait()
                    print("".join(lines[-30:]))
                    raise SystemExit("FAIL: %s: no step completed within %.0f s of the kill (a "
                                     "survivor waits for its timeout)" % (spec, BOUND_S + 5))
            time.sleep(0.05)
    finally:
        poll.stop = True
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
        p.wait()
        reader.join(5)
        poll.join(5)
    out = "".join(lines)
    if p.returncode != 0:
        print(out[-4000:])
        raise SystemExit("FAIL: %s: rl-driver exited %d" % (spec, p.returncode))
    fired = [stamp(l) for l in lines if "fault injection: SIGKILL at call" in l]
    if killed is None or not fired or fired[0] is None:
        raise SystemExit("FAIL: %s: the fault never fired" % spec)
    killed = fired[0]  # the worker's own log line, on the driver's clock
    if "recovery 1 of" not in out:
        print(out[-3000:])
        raise SystemExit("FAIL: %s: no recovery was logged" % spec)
    after = [(stamp(l), l) for l in lines if " driver INFO step " in l and " | " in l]
    after = [(t, l) for t, l in after if t is not None and t > killed]
    if not after:
        raise SystemExit("FAIL: %s: no step line after the kill" % spec)
    took = after[0][0] - killed
    if took > BOUND_S:
        raise SystemExit("FAIL: %s: the next step completed %.1f s after the kill (bound %.0f s)"
                         % (spec, took, BOUND_S))
    fr.same(work, "runs/ref", "runs/" + name, "checkpoints/step_30/model.safetensors", spec)
    victim = spec.split(":")[0]
    recovering = [json.loads(b) for t, b in poll.health if '"recovering"' in b]
    if not any(h.get("status") == "recovering" and victim in (h.get("recovery") or {}).get("slots", "")
               for h in recovering):
        seen = sorted({json.loads(b).get("status") for t, b in poll.health})
        raise SystemExit("FAIL: %s: /healthz never said \"recovering\" with the slot %s (saw %s in "
                         "%d reads)" % (spec, victim, seen, len(poll.health)))
    counted = [b for t, b in poll.metrics if "\nrlrt_recoveries_total{" in b and
               any(l.startswith("rlrt_recoveries_total{") and float(l.split()[-1]) >= 1
                   for l in b.splitlines())]
    if not counted:
        raise SystemExit("FAIL: %s: /metrics never counted the recovery (rlrt_recoveries_total; "
                         "%d reads)" % (spec, len(poll.metrics)))
    print("ok: killed %s: the next step completed %.2f s after the kill (bound %.0f s); /healthz said "
          "recovering; the job equals the fault-free run" % (spec, took, BOUND_S))


def main():
    if not os.path.exists(fr.DRIVER):
        raise SystemExit("FAIL: %s not built" % fr.DRIVER)
    work = tempfile.mkdtemp(prefix="rlrt-fault-bound-")
    try:
        port = free_port()
        cfile = os.path.join(work, "cluster.yaml")
        cluster(cfile, port)
        fr.TINY[:] = TINY
        fr.finish(fr.start(work, cfile, "arith_sft.yaml", fr.SFT + ["trainer.output_dir=runs/sft"]), "sft")
        fr.finish(fr.start(work, cfile, "arith_grpo.yaml", RL + ["trainer.output_dir=runs/ref"]), "ref")
        # 2 update_actor calls per step (4 prompts, mini-batches of 2): call 13 is step 7's
        # first, 14 its second; one weight sync per step after the first at the start:
        # call 8 is step 7's. The newest checkpoint then is step 5.
        run_case(work, cfile, port, "actor/1:update_actor:13:before", "a1")
        run_case(work, cfile, port, "actor/0:update_actor:14:before", "a0")
        # the weight channel: the rollout waits for a dead actor's weights, the actor
        # for a dead rollout's acknowledgement
        run_case(work, cfile, port, "actor/0:publish_weights:8:before", "pub")
        run_case(work, cfile, port, "rollout/0:sync_weights:8:before", "sync")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
