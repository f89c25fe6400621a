"""embodied_golden.py — the embodied track (seeds 000/001, LIBERO-Object on
MuJoCo) gives the same numbers, value for value, as the runs recorded in
tests/golden/embodied/ (recorded before the restructuring of folders, config
reading and recipe phases, so a refactor that changes any number fails here; re-recorded once since, to
add libero_rl's rollout/env_steps and rollout/env_steps_total, issue 43,
every other value as it was).

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
import struct
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
import golden_runs  # noqa: E402

ROOT = golden_runs.ROOT
DATA = os.path.abspath(os.path.join(ROOT, os.environ.get("LIBERO_DATA", "build/libero-data")))

# metrics that measure the machine, not the computation (besides timing_s/*, perf/*)
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


if __name__ == "__main__":
    if not os.path.exists(os.path.join(DATA, "manifest.json")):
        print("skipped: no LIBERO-Object data in %s; run: make libero-data" % DATA)
        sys.exit(77)
    golden_runs.run("embodied", [
        {"name": name, "cluster": cname + ".yaml", "config": config, "overrides": overrides,
         "out": [o.split("=", 1)[1] for o in overrides if o.startswith("trainer.output_dir=")][0],
         "expect": EXPECT.get(name, []),
         "rows": dataset_row if name == "collect" else lambda d: golden_runs.metrics_rows(d, WALL_KEYS)}
        for name, cname, config, overrides in JOBS],
        {cname + ".yaml": {"roles": roles, "port": 5557, "node": ", gpus: 0",
                           "extra": "heartbeat: {interval_s: 1.0, liveness: 10}\n"}
         for cname, roles in CLUSTERS.items()},
        compare_sanitized=True)
