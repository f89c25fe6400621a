"""embodied_golden.py — the embodied track (seeds 000/001, LIBERO-Object on
MuJoCo) gives the same numbers, value for value, as the runs recorded in
tests/golden/embodied/ (recorded before the restructuring of folders, config
reading and recipe phases, so a refactor that changes any number fails here).

Six jobs on real daemons and the real LIBERO-Object scenes (make
libero-data), from the example jobs with their sizes cut, tasks 0 and 1:
  collect    libero_collect.yaml (env + rollout): 16 episodes of the scripted
             expert on 4 envs; its dataset is compared instead of metrics
             (there are none): dataset.json's counts and, for every tensor
             of demos.safetensors, its shape and the sha256 of its bytes;
  warmstart  libero_warmstart.yaml (env + rollout + actor): 500 steps of
             flow matching (batch 128, lr 3e-3) of a flow_policy of hidden
             size 128 and 2 layers on those demonstrations, then 4 greedy
             evaluation episodes;
  flowsar, flowipo, grpo, ppo
             examples/libero_object_{flowsar,flowipo,grpo,ppo}.yaml on
             examples/cluster-libero-rl.yaml's roles (2 env ranks, 2 rollout
             ranks, 1 actor): 2 steps of FlowSAR (with its demonstration
             anchor), FlowIPO (anchor, 4 epochs), flow-SDE GRPO (groups of
             4) and PPO (value head, GAE, 4 epochs) from that warm start on
             8 envs of full 240-step episodes, evaluated (EMA weights, 4
             episodes a task: one round of the 8 envs) at steps 0 and 2; a
             checkpoint at step 2 (ppo).
The warm start and trainer.seed 2 (the examples use 1) were picked so that
episodes succeed in GRPO's groups (at step 1: 3 of 8), so its advantages and
loss are not all zero. The evaluation counts all 8 envs of its round (4
episodes a task); the goldens were recorded when libero_rl's evaluation
took env b's task to be b % tasks, wrong with env.group_size > 1 (the grpo
job, whose envs 0-3 are all task 0) when fewer episodes a task are asked
for (fixed since: rl_env_place_of, tested in test_embodied), so these jobs
evaluate every env and give the same numbers either way.

Every metric of metrics.jsonl is compared exactly except wall-clock ones:
timing_s/*, perf/* and eval/wall_s (seconds and CPU use, which depend on the
machine and its load); of dataset.json, wall_s. The kernels are pinned as in
rlvr_golden.py: OMP_NUM_THREADS=2 and OPENBLAS_CORETYPE=Haswell.

Unlike rlvr_golden.py and diffusion_golden.py, the values are compared in a
sanitizer build too: built with make SANITIZE=address,undefined every number
of these jobs equals the plain build's (measured), so a sanitizer build
must give them as well.

Skipped (77) without the LIBERO-Object data ($LIBERO_DATA, default
build/libero-data; make libero-data).

  python3 tests/integration/embodied_golden.py           compare
  python3 tests/integration/embodied_golden.py --record  rewrite the goldens
"""
import hashlib
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
BUILD = os.path.join(ROOT, os.environ.get("BUILD", "build"))
DRIVER = os.path.join(BUILD, "bin", "rl-driver")
GOLDEN = os.path.join(ROOT, "tests", "golden", "embodied")
DATA = os.path.abspath(os.path.join(ROOT, os.environ.get("LIBERO_DATA", "build/libero-data")))

# metrics that measure the machine, not the computation
WALL_PREFIXES = ("timing_s/", "perf/")
WALL_KEYS = {"eval/wall_s"}

CLUSTERS = {  # the roles of examples/cluster-libero{,-train,-rl}.yaml; --bind picks a free port
    "collect": {"env": 1, "rollout": 1},
    "train": {"env": 1, "rollout": 1, "actor": 1},
    "rl": {"env": 2, "rollout": 2, "actor": 1},
}
ENV = ["env.data_dir=" + DATA, "env.task_ids=0-1"]
MODEL = ["model.hidden_size=128", "model.num_layers=2"]
RL = ENV + MODEL + [
    "model.init_from=ws/final", "algorithm.demos=collect/demos.safetensors", "trainer.seed=2",
    "env.total_num_envs=8", "trainer.total_steps=2", "trainer.val_every=2", "trainer.save_every=0",
    "eval.episodes_per_task=4", "eval.gif_episodes_per_task=0"]
JOBS = [
    ("collect", "collect", "libero_collect.yaml", ENV + [
        "env.total_num_envs=4", "collect.episodes=16", "collect.output=collect",
        "trainer.output_dir=collect"]),
    ("warmstart", "train", "libero_warmstart.yaml", ENV + MODEL + [
        "env.total_num_envs=4", "warmstart.demos=collect/demos.safetensors", "warmstart.demos_per_task=8",
        "warmstart.steps=500", "warmstart.batch_size=128", "actor.optim.lr=3e-3", "eval.episodes=4",
        "eval.gif_episodes_per_task=0", "trainer.output_dir=ws"]),
    ("flowsar", "rl", "libero_object_flowsar.yaml", RL + ["trainer.output_dir=flowsar"]),
    ("flowipo", "rl", "libero_object_flowipo.yaml", RL + ["trainer.output_dir=flowipo"]),
    ("grpo", "rl", "libero_object_grpo.yaml", RL + ["trainer.output_dir=grpo"]),
    ("ppo", "rl", "libero_object_ppo.yaml", RL + ["trainer.save_every=2", "trainer.output_dir=ppo"]),
]
# files each job must leave (so a job that silently skips a part fails here)
EXPECT = {
    "collect": ["demos.safetensors", "dataset.json"],
    "warmstart": ["final/model.safetensors"],
    "ppo": ["checkpoints/step_2/model.safetensors"],
}


def cluster(path, roles):
    with open(path, "w") as f:
        f.write("driver: {bind: 127.0.0.1, port: 5557}\n"
                "heartbeat: {interval_s: 1.0, liveness: 10}\n"
                "nodes: [{name: local, address: 127.0.0.1, launch: local, gpus: 0}]\n"
                "roles:\n")
        for role, count in roles.items():
            f.write("  %s: {count: %d, node: local}\n" % (role, count))


def comparable(row):
    return {k: v for k, v in row.items() if not k.startswith(WALL_PREFIXES) and k not in WALL_KEYS}


def dataset_row(out_dir):
    """libero_collect's dataset as one row: dataset.json's numbers (not its
    wall_s) and each tensor's shape and sha256."""
    with open(os.path.join(out_dir, "dataset.json")) as f:
        summary = json.load(f)
    row = {"episodes": summary["episodes"], "steps": summary["steps"],
           "success_rate": summary["success_rate"]}
    for t in summary["per_task"]:
        for k in ("episodes", "successes"):
            row["task_%d/%s" % (t["task_id"], k)] = t[k]
    with open(os.path.join(out_dir, "demos.safetensors"), "rb") as f:
        raw = f.read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    meta = header.pop("__metadata__", {})
    for k in ("format", "max_episode_steps", "num_action_chunks", "episodes"):
        row["meta/" + k] = meta.get(k)
    for name in sorted(header):
        b, e = header[name]["data_offsets"]
        row["tensor/%s/dtype" % name] = header[name]["dtype"]
        row["tensor/%s/shape" % name] = header[name]["shape"]
        row["tensor/%s/sha256" % name] = hashlib.sha256(raw[8 + n + b:8 + n + e]).hexdigest()
    return [row]


def sanitizer_build():
    with open(DRIVER, "rb") as f:
        data = f.read()
    return b"__asan_init" in data or b"__ubsan_handle" in data


def compare(name, rows, want):
    """The differences of rows from the golden rows, as messages naming the
    job, the step and the metric (empty when they are equal)."""
    if len(rows) != len(want):
        return ["%s: %d metric rows, golden has %d (steps %s, golden %s)" % (
            name, len(rows), len(want), [r.get("step") for r in rows], [r.get("step") for r in want])]
    diffs = []
    for i, (got, exp) in enumerate(zip(rows, want)):
        where = ("%s step %s (row %d)" % (name, exp["step"], i + 1) if "step" in exp
                 else "%s dataset" % name)
        if got.keys() != exp.keys():
            diffs.append("%s: metric names differ: missing %s, new %s" % (
                where, sorted(exp.keys() - got.keys()), sorted(got.keys() - exp.keys())))
        for k in sorted(exp.keys() & got.keys()):
            if got[k] != exp[k]:
                diffs.append("%s %s: %r, golden %r" % (where, k, got[k], exp[k]))
    return diffs


def main():
    record = "--record" in sys.argv[1:]
    if not os.path.exists(DRIVER):
        raise SystemExit("FAIL: %s not built" % DRIVER)
    if not os.path.exists(os.path.join(DATA, "manifest.json")):
        print("skipped: no LIBERO-Object data in %s; run: make libero-data" % DATA)
        sys.exit(77)
    if record and sanitizer_build():
        raise SystemExit("FAIL: record the goldens with a plain build, not %s" % DRIVER)
    env = dict(os.environ, OMP_NUM_THREADS="2", OPENBLAS_CORETYPE="Haswell")
    env.pop("RL_FAULT_INJECT", None)
    work = tempfile.mkdtemp(prefix="rlrt-embodied-golden-")
    failures = []
    try:
        for cname, roles in CLUSTERS.items():
            cluster(os.path.join(work, cname + ".yaml"), roles)
        for name, cname, config, overrides in JOBS:
            cmd = [DRIVER, "--cluster", os.path.join(work, cname + ".yaml"),
                   "--config", os.path.join(ROOT, "examples", config),
                   "--bind", "tcp://127.0.0.1:*", "--log-level", "warn"] + overrides
            t0 = time.monotonic()
            p = subprocess.run(cmd, cwd=work, env=env, capture_output=True, text=True, timeout=600)
            secs = time.monotonic() - t0
            if p.returncode != 0:
                print((p.stdout + p.stderr)[-4000:])
                raise SystemExit("FAIL: job %s exited %d" % (name, p.returncode))
            out_dir = os.path.join(work, [o.split("=", 1)[1] for o in overrides
                                          if o.startswith("trainer.output_dir=")][0])
            for f in EXPECT.get(name, []):
                if not os.path.exists(os.path.join(out_dir, f)):
                    raise SystemExit("FAIL: job %s wrote no %s" % (name, f))
            if name == "collect":
                rows = dataset_row(out_dir)
            else:
                with open(os.path.join(out_dir, "metrics.jsonl")) as f:
                    rows = [comparable(json.loads(line)) for line in f if line.strip()]
            golden = os.path.join(GOLDEN, name + ".jsonl")
            if record:
                os.makedirs(GOLDEN, exist_ok=True)
                with open(golden, "w") as f:
                    for r in rows:
                        f.write(json.dumps(r, sort_keys=True) + "\n")
                print("recorded %s: %d rows (%.1f s)" % (golden, len(rows), secs))
                continue
            with open(golden) as f:
                want = [json.loads(line) for line in f if line.strip()]
            diffs = compare(name, rows, want)
            if diffs:
                for d in diffs[:20]:
                    print("differs: " + d)
                if len(diffs) > 20:
                    print("differs: ... and %d more" % (len(diffs) - 20))
                failures.append("%s (%d difference%s; first: %s)" % (
                    name, len(diffs), "s"[:len(diffs) > 1], diffs[0]))
            else:
                print("ok: %s: %d rows equal the golden run, value for value (%.1f s)" % (
                    name, len(rows), secs))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if failures:
        raise SystemExit("FAIL: " + "; ".join(failures))


if __name__ == "__main__":
    main()
