"""fault_recovery.py — no step is lost when a worker dies.

Each case kills one worker with SIGKILL at a precise point of a step (the
worker's fault-injection hook, RL_FAULT_INJECT: the N-th call of a method,
before its handler runs or after it ran and before the reply leaves), or at
a moment chosen by the clock while it sits between calls. The supervisor
restarts it, the recipe restores its newest checkpoint of the run and
replays the steps since; the job must exit 0 with metrics.jsonl equal, value
for value (wall-clock metrics aside), to a fault-free run with the same
seed, and the same final weights.

Cases: an actor rank inside the FSDP update (its peer waits in a
collective), the policy log-probs, the rollout in generation and in the
weight sync, the actor publishing weights, the actor writing a checkpoint,
a reward rank (retry-safe: the call is re-sent), an actor rank while the job
starts, an actor rank during SFT (no checkpoints: replayed from step 1), the
rollout killed by the clock between calls, the rollout and reward ranks
behind a node relay (the same run) and that relay killed by the clock, and
the driver itself killed (its workers leave by themselves; --resume ends
where a fault-free run does).
"""
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
BUILD = os.path.join(ROOT, os.environ.get("BUILD", "build"))
DRIVER = os.path.join(BUILD, "bin", "rl-driver")

TINY = [
    "model.hidden_size=32", "model.intermediate_size=64", "model.num_layers=1",
    "model.num_heads=2", "model.num_kv_heads=1", "model.max_seq_len=64",
    "data.train_size=2000", "data.val_size=16", "data.levels=[1]",
    "data.max_prompt_length=16", "rollout.response_length=40",
]
# the settings the example jobs had before DAPO's keys were switched on
PLAIN = ["algorithm.filter_mode=range", "algorithm.online_filtering=false",
         "actor.clip_ratio_high=0.2"]
RL = ["model.init_from=runs/sft/final", "data.train_batch_size=4", "rollout.n=4",
      "actor.ppo_mini_batch_size=2", "actor.optim.lr=0.001", "trainer.total_steps=8",
      "trainer.val_every=4", "trainer.save_every=3"] + PLAIN
SFT = ["trainer.total_steps=12", "trainer.val_every=6", "data.train_batch_size=16",
       "actor.optim.lr=0.01"]


def cluster(path, relay=False):
    """relay: the rollout and reward ranks on a second node behind a relay."""
    other = "n1" if relay else "local"
    with open(path, "w") as f:
        f.write("driver: {bind: 127.0.0.1, port: 5555}\n"
                "heartbeat: {interval_s: 0.2, liveness: 3}\n"
                "restart: {max_restarts: 3, backoff_s: 0.2, backoff_max_s: 1.0}\n"
                "nodes:\n  - {name: local, address: 127.0.0.1, launch: local}\n" +
                ("  - {name: n1, address: 127.0.0.1, launch: local, relay: true}\n"
                 if relay else "") +
                "roles:\n"
                f"  rollout: {{count: 1, node: {other}}}\n"
                "  actor: {count: 2, node: local}\n"
                f"  reward: {{count: 2, node: {other}}}\n")


def start(work, cfile, config, overrides, env_extra=None):
    env = dict(os.environ, **(env_extra or {}))
    cmd = [DRIVER, "--cluster", cfile, "--config", os.path.join(ROOT, "examples", config),
           "--bind", "tcp://127.0.0.1:*", "--log-level", "warn"] + TINY + overrides
    return subprocess.Popen(cmd, cwd=work, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)


def finish(p, name):
    out, _ = p.communicate(timeout=300)
    if p.returncode != 0:
        print(out[-4000:])
        raise SystemExit("FAIL: %s: rl-driver exited %d" % (name, p.returncode))
    return out


def metrics(path):
    rows = []
    with open(path) as f:
        for line in f:
            r = json.loads(line)
            rows.append({k: v for k, v in r.items()
                         if not k.startswith("timing_s/") and not k.startswith("perf/")})
    return rows


def same(work, ref, run, final, name):
    a = metrics(os.path.join(work, ref, "metrics.jsonl"))
    b = metrics(os.path.join(work, run, "metrics.jsonl"))
    if [r["step"] for r in a] != [r["step"] for r in b]:
        raise SystemExit("FAIL: %s: steps %s, fault-free %s" % (name, [r["step"] for r in b],
                                                                 [r["step"] for r in a]))
    for x, y in zip(a, b):
        if x != y:
            diff = {k: (x.get(k), y.get(k)) for k in set(x) | set(y) if x.get(k) != y.get(k)}
            raise SystemExit("FAIL: %s: step %d differs from the fault-free run: %s"
                             % (name, x["step"], diff))
    with open(os.path.join(work, ref, final), "rb") as f:
        wa = f.read()
    with open(os.path.join(work, run, final), "rb") as f:
        wb = f.read()
    if wa != wb:
        raise SystemExit("FAIL: %s: the final weights differ from the fault-free run" % name)


def children(pid):
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % d) as f:
                fields = f.read().rsplit(")", 1)[1].split()
            with open("/proc/%s/cmdline" % d, "rb") as f:
                cmd = f.read().split(b"\0")
        except OSError:
            continue
        if int(fields[1]) == pid:
            out.append((int(d), [c.decode(errors="replace") for c in cmd]))
    return out


def kill_after_step(p, mpath, match, lines=3):
    """SIGKILL to the first child of driver p whose argv matches, once its
    metrics.jsonl has `lines` lines (by the clock, between calls); its pid,
    or None when none was found within 60 s."""
    deadline = time.time() + 60
    while time.time() < deadline and p.poll() is None:
        if os.path.exists(mpath) and len(open(mpath).read().splitlines()) >= lines:
            kids = [pid for pid, cmd in children(p.pid) if match(cmd)]
            if kids:
                os.kill(kids[0], signal.SIGKILL)
                return kids[0]
        time.sleep(0.01)
    return None


def main():
    if not os.path.exists(DRIVER):
        raise SystemExit("FAIL: %s not built" % DRIVER)
    work = tempfile.mkdtemp(prefix="rlrt-faults-")
    try:
        cfile = os.path.join(work, "cluster.yaml")
        cluster(cfile)
        # the warm start and the fault-free references
        finish(start(work, cfile, "arith_sft.yaml", SFT + ["trainer.output_dir=runs/sft"]), "sft")
        finish(start(work, cfile, "arith_grpo.yaml", RL + ["trainer.output_dir=runs/ref"]), "ref")
        final = "checkpoints/step_8/model.safetensors"
        cases = [
            ("actor/1:update_actor:5:before", "an actor rank inside the FSDP update"),
            ("actor/0:compute_log_prob:4:after", "the policy log-probs, before the reply"),
            ("rollout/0:generate:5:before", "the rollout generating"),
            ("rollout/0:sync_weights:4:before", "the rollout in the weight sync"),
            ("actor/0:publish_weights:5:after", "the actor publishing weights"),
            ("actor/0:save_checkpoint:2:before", "the actor writing a checkpoint"),
            ("reward/1:compute_reward:6:before", "a reward rank (retry-safe)"),
            ("actor/1:init_model:1:after", "an actor rank while the job starts"),
        ]
        for i, (spec, what) in enumerate(cases):
            marker = os.path.join(work, "fired-%d" % i)
            run = "runs/case%d" % i
            t0 = time.time()
            out = finish(start(work, cfile, "arith_grpo.yaml", RL + ["trainer.output_dir=" + run],
                               {"RL_FAULT_INJECT": "%s:%s" % (spec, marker)}), spec)
            if not os.path.exists(marker):
                raise SystemExit("FAIL: %s: the fault never fired" % spec)
            retried = "retry-safe" in what
            if not retried and "recovery 1 of" not in out:
                print(out[-3000:])
                raise SystemExit("FAIL: %s: no recovery was logged" % spec)
            same(work, "runs/ref", run, final, spec)
            print("ok: killed %s (%s): the job recovered in %.1f s and equals the fault-free run"
                  % (spec, what, time.time() - t0))
        # SFT keeps no checkpoints: it replays from step 1
        marker = os.path.join(work, "fired-sft")
        finish(start(work, cfile, "arith_sft.yaml", SFT + ["trainer.output_dir=runs/sft2"],
                     {"RL_FAULT_INJECT": "actor/1:sft_step:7:before:" + marker}), "sft")
        if not os.path.exists(marker):
            raise SystemExit("FAIL: sft: the fault never fired")
        same(work, "runs/sft", "runs/sft2", "final/model.safetensors", "sft")
        print("ok: killed actor/1 in SFT step 7: replayed from step 1, same metrics and weights")
        # the clock: the rollout killed between calls, while the actor trains
        p = start(work, cfile, "arith_grpo.yaml", RL + ["trainer.output_dir=runs/clock"])
        victim = kill_after_step(p, os.path.join(work, "runs/clock/metrics.jsonl"),
                                 lambda cmd: "--role" in cmd and "rollout" in cmd)
        out = finish(p, "clock")
        if victim is None:
            raise SystemExit("FAIL: clock: found no rollout to kill")
        same(work, "runs/ref", "runs/clock", final, "clock")
        print("ok: the rollout killed by the clock (pid %d) after step 2: same metrics and weights"
              % victim)
        # a node relay (cluster.yaml relay: true) in front of the rollout and
        # reward ranks: the same metrics and weights as without it; and killed
        # by the clock, it is started again, its workers reconnect through it
        # and the job still ends where the fault-free run does
        rfile = os.path.join(work, "cluster-relay.yaml")
        cluster(rfile, relay=True)
        finish(start(work, rfile, "arith_grpo.yaml", RL + ["trainer.output_dir=runs/relay"]),
               "relay")
        same(work, "runs/ref", "runs/relay", final, "relay")
        print("ok: rollout and reward behind a relay: the fault-free metrics and weights")
        p = start(work, rfile, "arith_grpo.yaml", RL + ["trainer.output_dir=runs/relaykill"])
        victim = kill_after_step(p, os.path.join(work, "runs/relaykill/metrics.jsonl"),
                                 lambda cmd: "--relay" in cmd)
        out = finish(p, "relay killed")
        if victim is None:
            raise SystemExit("FAIL: relay: found no relay to kill")
        if "the relay of node n1 exited" not in out:
            print(out[-3000:])
            raise SystemExit("FAIL: relay killed: its restart was not logged")
        same(work, "runs/ref", "runs/relaykill", final, "relay killed")
        print("ok: the relay killed by the clock (pid %d) after step 2: started again, same "
              "metrics and weights" % victim)
        # the driver itself killed: its workers leave by themselves; --resume
        # continues from the last checkpoint to the same end
        p = start(work, cfile, "arith_grpo.yaml", RL + ["trainer.output_dir=runs/driver"])
        ckpt = os.path.join(work, "runs/driver/checkpoints/step_6")
        deadline = time.time() + 60
        while time.time() < deadline and p.poll() is None and not os.path.exists(ckpt):
            time.sleep(0.01)
        kids = [pid for pid, cmd in children(p.pid) if "--role" in cmd]
        os.kill(p.pid, signal.SIGKILL)
        p.wait()
        t0 = time.time()
        while time.time() - t0 < 30 and any(os.path.exists("/proc/%d" % k) and
                                            "Z" not in open("/proc/%d/stat" % k).read().split()[2]
                                            for k in kids):
            time.sleep(0.05)
        left = [k for k in kids if os.path.exists("/proc/%d" % k) and
                "Z" not in open("/proc/%d/stat" % k).read().split()[2]]
        if left:
            raise SystemExit("FAIL: driver killed: workers %s still run after 30 s" % left)
        gone = time.time() - t0
        finish(start(work, cfile, "arith_grpo.yaml", RL + ["trainer.output_dir=runs/driver",
                                                           "trainer.resume=true"]), "resume")
        same(work, "runs/ref", "runs/driver", final, "driver killed + resume")
        print("ok: the driver killed after step 6: its %d workers left within %.1f s; --resume "
              "ends with the fault-free metrics and weights" % (len(kids), gone))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    random.seed(1)
    main()
