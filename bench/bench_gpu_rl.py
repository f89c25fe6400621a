#!/usr/bin/env python3
"""bench_gpu_rl.py — one RL job, its roles on the CPU and then on the GPU.

The arithmetic GRPO job (examples/arith_grpo.yaml) with a mid-size model
(hidden 512, 8 layers, 8 heads over 2 kv heads by default), 16 prompts × 8
samples a step, from a one-step SFT warm start made here: once with
actor.device and rollout.device cpu, once with both cuda (the reward stays
on the CPU), the same seed. Prints `bench: <name> = <value>`:
  gpu_rl_step_s_cpu, gpu_rl_step_s_gpu   mean timing_s/step over the steps after the first
  gpu_rl_<phase>_s_cpu / _gpu            the same for gen, old_log_prob, update_actor, sync_weights
  gpu_rl_step_vs_cpu                     CPU step time ÷ GPU step time (> 1: the GPU is faster)
Sizes: RL_BENCH_GPU_RL_HIDDEN, _LAYERS, _STEPS (default 4), _PROMPTS
(default 16), _SAMPLES (default 8); the CPU run's threads: OMP_NUM_THREADS
(default all cores). Needs BUILD's rl-driver built with
CUDA=1 and a GPU; exits 77 naming what is missing.
"""
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests",
                                "integration", "lib"))
import jobs  # noqa: E402

ROOT = jobs.ROOT
PHASES = ["gen", "old_log_prob", "update_actor", "sync_weights"]


def env_int(name, default):
    return int(os.environ.get(name, default))


def main():
    if not os.path.exists(jobs.DRIVER):
        print("bench_gpu_rl: skipped: %s not built" % jobs.DRIVER)
        return 77
    dev = os.environ.get("RL_BENCH_GPU_RL_DEVICE", "cuda")  # cpu: a check of this script
    # RL_GPU_DRYRUN=1 (tests/gpu_dryrun.sh): cuda is the host emulation of a make CUDA=emu build
    if dev == "cuda" and os.environ.get("RL_GPU_DRYRUN") != "1" and \
            subprocess.run(["sh", "-c", "nvidia-smi -L"], capture_output=True).returncode:
        print("bench_gpu_rl: skipped: no NVIDIA GPU (nvidia-smi -L failed)")
        return 77
    hidden, layers = env_int("RL_BENCH_GPU_RL_HIDDEN", 512), env_int("RL_BENCH_GPU_RL_LAYERS", 8)
    steps = env_int("RL_BENCH_GPU_RL_STEPS", 4)
    prompts, samples = env_int("RL_BENCH_GPU_RL_PROMPTS", 16), env_int("RL_BENCH_GPU_RL_SAMPLES", 8)
    if steps < 2:
        print("bench_gpu_rl: RL_BENCH_GPU_RL_STEPS must be >= 2 (the first step is not timed)")
        return 2
    model = ["model.hidden_size=%d" % hidden, "model.intermediate_size=%d" % (hidden * 11 // 4),
             "model.num_layers=%d" % layers, "model.num_heads=8", "model.num_kv_heads=2",
             "model.max_seq_len=128", "data.train_size=4000", "data.val_size=16",
             "data.max_prompt_length=32", "rollout.response_length=48"]
    work = tempfile.mkdtemp(prefix="rlrt-bench-gpu-rl-")
    cl = os.path.join(work, "cluster.yaml")
    jobs.gpu_cluster(cl)
    base = ["--cluster", cl, "--bind", "tcp://127.0.0.1:*", "--log-level", "warn"] + model
    jobs.run_driver(work, base + ["--config", os.path.join(ROOT, "examples", "arith_sft.yaml"),
                                  "trainer.total_steps=1", "trainer.output_dir=runs/init"])
    rl = base + ["--config", os.path.join(ROOT, "examples", "arith_grpo.yaml"),
                 "model.init_from=runs/init/final", "trainer.val_every=0", "trainer.save_every=0",
                 "algorithm.online_filtering=false", "trainer.total_steps=%d" % steps,
                 "data.train_batch_size=%d" % prompts, "rollout.n=%d" % samples,
]
    if prompts % 8:  # the config's mini-batch of 8 prompts must divide the batch
        rl.append("actor.ppo_mini_batch_size=%d" % prompts)
    res = {}
    for label, where in (("cpu", "cpu"), ("gpu", dev)):
        out = "runs/" + label
        jobs.run_driver(work, rl + ["actor.device=" + where, "rollout.device=" + where,
                                    "trainer.output_dir=" + out])
        rows = [r for r in jobs.metrics(os.path.join(work, out, "metrics.jsonl"))
                if r.get("step", 0) > 1 and "timing_s/step" in r]
        if not rows:
            print("bench_gpu_rl: %s: no timed steps in %s" % (where, out))
            return 1
        res[label] = {k: sum(r.get("timing_s/" + k, 0.0) for r in rows) / len(rows)
                      for k in ["step"] + PHASES}
    cpu, gpu = res["cpu"], res["gpu"]
    print("bench: gpu_rl_model = hidden %d, %d layers; %d prompts x %d samples, 48 tokens; %d steps, "
          "the first untimed" % (hidden, layers, prompts, samples, steps))
    for k in ["step"] + PHASES:
        print("bench: gpu_rl_%s_s_cpu = %.4f" % (k, cpu[k]))
        print("bench: gpu_rl_%s_s_gpu = %.4f" % (k, gpu[k]))
    print("bench: gpu_rl_step_vs_cpu = %.3f (CPU step %.3f s over GPU step %.3f s)"
          % (cpu["step"] / gpu["step"], cpu["step"], gpu["step"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
