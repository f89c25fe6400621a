#!/usr/bin/env python3
"""weight_bcast_job.py — rollout.weight_transport=broadcast on real daemons
(the CPU ring here; NCCL between GPUs: gpu_jobs.py job 8):

1. GRPO with two rollout ranks taking every weight version by the
   broadcast of a communicator with actor rank 0
   (rlrt/runtime/weight_bcast.h) against the same job over the ZeroMQ
   channel: the same metrics step for step (the weights arrive bit for
   bit) and the same final weights; every sync says broadcast
   (perf/weight_sync_broadcast = 1).
2. A rollout rank killed inside its 4th sync_weights (RL_FAULT_INJECT):
   the actor's broadcast ends at the heartbeat's abort, both sides drop the
   communicator, the supervisor restarts the rank, the recipe replays from
   its checkpoint and the ranks join the broadcast again: the job ends with
   the fault-free run's metrics and weights.
3. broadcast with actor.device and rollout.device of different kinds is
   refused before any worker starts, naming rollout.weight_transport.
"""
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
import jobs  # noqa: E402

ROOT = jobs.ROOT
TINY = ["model.hidden_size=32", "model.intermediate_size=64", "model.num_layers=1", "model.num_heads=2",
        "model.num_kv_heads=1", "model.max_seq_len=64", "data.train_size=2000", "data.val_size=16",
        "data.levels=[1]", "data.max_prompt_length=16", "rollout.response_length=40"]


def run(work, cl, config, more, expect_ok=True):
    return jobs.run_driver(work, ["--cluster", cl, "--config", os.path.join(ROOT, "examples", config),
                                  "--bind", "tcp://127.0.0.1:*", "--log-level", "warn"] + TINY + more,
                           expect_ok)


def main():
    if not os.path.exists(jobs.DRIVER):
        raise SystemExit("FAIL: %s not built" % jobs.DRIVER)
    work = tempfile.mkdtemp(prefix="rlrt-wbcast-")
    try:
        cl = os.path.join(work, "cluster.yaml")
        with open(cl, "w") as f:
            f.write("driver: {bind: 127.0.0.1, port: 5555}\n"
                    "heartbeat: {interval_s: 0.2, liveness: 3}\n"
                    "restart: {max_restarts: 3, backoff_s: 0.2, backoff_max_s: 1.0}\n"
                    "nodes: [{name: local, address: 127.0.0.1, launch: local}]\n"
                    "roles:\n  rollout: {count: 2, node: local}\n"
                    "  actor: {count: 1, node: local}\n  reward: {count: 1, node: local}\n")
        run(work, cl, "arith_sft.yaml", ["trainer.total_steps=6", "trainer.val_every=6", "data.train_batch_size=16",
                                         "actor.optim.lr=0.01", "trainer.output_dir=runs/sft"])
        rl = ["model.init_from=runs/sft/final", "data.train_batch_size=4", "rollout.n=4",
              "actor.ppo_mini_batch_size=2", "trainer.val_every=0", "trainer.save_every=3",
              "actor.optim.lr=0.003", "algorithm.online_filtering=false", "trainer.total_steps=3"]
        run(work, cl, "arith_grpo.yaml", rl + ["trainer.output_dir=runs/zmq"])
        run(work, cl, "arith_grpo.yaml", rl + ["trainer.output_dir=runs/bcast", "rollout.weight_transport=broadcast"])
        mz = [r for r in jobs.metrics(os.path.join(work, "runs/zmq/metrics.jsonl")) if r["step"] > 0]
        mb = [r for r in jobs.metrics(os.path.join(work, "runs/bcast/metrics.jsonl")) if r["step"] > 0]
        assert len(mz) == len(mb) == 3, (len(mz), len(mb))
        for a, b in zip(mz, mb):
            for k, v in a.items():
                if k.startswith(("perf/", "timing_s/")) or not isinstance(v, (int, float)):
                    continue
                assert b.get(k) == v, (a["step"], k, v, b.get(k))
        assert [r.get("perf/weight_sync_broadcast") for r in mb] == [1, 1, 1], mb
        assert [r.get("perf/weight_sync_broadcast") for r in mz] == [0, 0, 0], mz
        d = jobs.max_diff(jobs.safetensors_f32(os.path.join(work, "runs/zmq/checkpoints/step_3/model.safetensors")),
                          jobs.safetensors_f32(os.path.join(work, "runs/bcast/checkpoints/step_3/model.safetensors")))
        assert d == 0, d
        print("ok: weights by broadcast to 2 rollout ranks (the CPU ring): 3 steps' metrics and the final weights "
              "as over ZeroMQ (score %s)" % [round(r["critic/score/mean"], 3) for r in mb])
        # 2. a rollout rank killed in the weight sync
        marker = os.path.join(work, "fired")
        rc, out = jobs.run_driver(work, ["--cluster", cl, "--config", os.path.join(ROOT, "examples", "arith_grpo.yaml"),
                                         "--bind", "tcp://127.0.0.1:*", "--log-level", "warn"] + TINY + rl +
                                  ["trainer.output_dir=runs/fault", "rollout.weight_transport=broadcast"],
                                  env={"RL_FAULT_INJECT": "rollout/1:sync_weights:4:before:" + marker})
        assert os.path.exists(marker), "the fault never fired"
        assert "recovery 1 of" in out, out[-3000:]
        mf = [r for r in jobs.metrics(os.path.join(work, "runs/fault/metrics.jsonl")) if r["step"] > 0]
        assert [r["step"] for r in mf] == [1, 2, 3], [r["step"] for r in mf]
        for a, b in zip(mb, mf):
            for k, v in a.items():
                if k.startswith(("perf/", "timing_s/")) or not isinstance(v, (int, float)):
                    continue
                assert b.get(k) == v, (a["step"], k, v, b.get(k))
        d = jobs.max_diff(jobs.safetensors_f32(os.path.join(work, "runs/bcast/checkpoints/step_3/model.safetensors")),
                          jobs.safetensors_f32(os.path.join(work, "runs/fault/checkpoints/step_3/model.safetensors")))
        assert d == 0, d
        print("ok: rollout/1 killed in its 4th sync_weights by broadcast: recovered, the fault-free metrics and "
              "weights")
        rc, out = run(work, cl, "arith_grpo.yaml", rl + ["trainer.output_dir=runs/bad",
                                                         "rollout.weight_transport=broadcast",
                                                         "actor.device=cuda"], expect_ok=False)
        assert rc != 0 and "rollout.weight_transport" in out and "one kind of device" in out, out[-2000:]
        print("ok: broadcast between a CUDA actor and a CPU rollout is refused, naming rollout.weight_transport")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
