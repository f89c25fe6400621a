#!/usr/bin/env python3
"""bench_gpu_e2e.py — the end-to-end GPU jobs of issue 40, timed side by side
in one run (bench/bench_gpu.sh calls it with RL_GPU_BENCH=1; RL_BENCH_GPU_E2E=0
leaves it out).

Jobs that need no dataset of the GPU machine's (it has neither Fashion-MNIST
nor LIBERO: too big to carry): the arithmetic task is generated, the
diffusion job starts from a random initialisation with the JPEG reward, and
the libero jobs run on the bundle's physics-only scenes of two tasks.
On examples/cluster-gpu.yaml (actor and rollout on GPU 0, the rule-based
reward on the CPU cores), in this order:

  sft          the warm start: examples/arith_sft.yaml on the GPU actor
  sync         examples/arith_grpo.yaml (`make run`'s job) on the GPU,
               trainer.staleness=0 (weights over CUDA IPC)
  async        the same one step off: trainer.staleness=1, TIS cap 2.0
  partial      trainer.staleness=2 with rollout.partial_rollouts (the CUDA IPC
               receiver is polled between decode steps)
  async_2      async again, then sync_2: sync again (the ratio's arms are
               interleaved so a drift of the machine weighs on both)
  sync_bcast   `sync` with rollout.weight_transport=broadcast: the weights by NCCL
               broadcast instead of CUDA IPC (two NCCL ranks on one GPU: NCCL >= 2.30
               with NCCL_MULTI_RANK_GPU_ENABLE=1, set here; not run, naming why, with an
               older NCCL or on the host emulation)
  sync_cpu     `sync` with actor.device=cpu rollout.device=cpu on the same cores
  dif, dif_cpu diffusion GRPO (examples/dance_grpo_jpeg.yaml, clip_flow with its
               MLP trunk, random init, no KL model file, no scorer) on the GPU and
               on the CPU
  libero, libero_cpu
               libero_rl PPO (examples/libero_object_ppo.yaml, the flow policy from a
               random initialisation) on examples/cluster-gpu-libero.yaml: actor and
               both rollout ranks on GPU 0, the two env ranks on the CPU cores,
               against the same job with actor and rollout on the CPU. The scenes:
               the bundle's physics-only tasks 0-1 (BUILD/libero-data, made by
               `make CUDA=1 gpu-bundle` from build/libero-data) or build/libero-data;
               without them both rows say so and the rest runs.

Prints `bench: NAME = VALUE` (step means over the steps after the first two):
  gpu_async_step_time_ratio        mean step of async, async_2 ÷ of sync, sync_2 (≤ 0.65)
  gpu_async_step_time_floor        (sync step − its gen) ÷ sync step: one step off hides the
                                   generation only, so the ratio cannot go below this
  gpu_async_val_acc_delta          final val/accuracy: mean of async runs − of sync runs (≥ −0.03)
  gpu_partial_s2_step_time_ratio   partial ÷ sync; gpu_partial_s2_val_acc_delta likewise
  gpu_partial_s2_partial_rows      mean async/partial_rows a step (rows holding tokens of two
                                   versions: 0 means no switch interrupted a generation)
  gpu_e2e_arith_step_vs_cpu        sync_cpu step ÷ sync step (> 1: the GPU job is faster)
  gpu_e2e_val_acc_vs_cpu           final val/accuracy of sync − of sync_cpu (the same job and
                                   seed on the CPU; issue 39: within noise, |Δ| ≤ 0.05)
  gpu_e2e_diffusion_step_vs_cpu    dif_cpu step ÷ dif step
  gpu_e2e_libero_step_vs_cpu       libero_cpu step ÷ libero step
  gpu_e2e_libero(_cpu)_<phase>_s   its step and phases (rollout: the env and policy
                                   loop, annotate, credit, update_actor, sync_weights)
  gpu_e2e_weight_sync_s_ipc, _bcast  mean perf/weight_sync_s of sync (CUDA IPC) and sync_bcast
  gpu_e2e_<run>_<phase>_s          step and its phases (gen, reward, old_log_prob,
                                   update_actor, sync_weights) of every run
and each run's wall time (`bench_gpu_e2e: RUN: wall S s`), then rewrites its
section of --out (between <!-- bench-gpu-e2e:begin --> and -end -->).

Knobs: RL_BENCH_GPU_E2E_STEPS (RL steps a run, default 10), _SFT_STEPS (default
150), _DIF_STEPS (default 4), _LIBERO_STEPS (default 5), _VAL_SIZE (default 128), _TIMEOUT (one run's
limit, default 180 s: a run past it counts as failed), _DEVICE (cuda; cpu runs
every arm on the CPU: a check of this script on a machine without a GPU),
_OVERRIDES, _DIF_OVERRIDES, _LIBERO_OVERRIDES (config overrides, separated by
spaces, added to the arithmetic runs, the diffusion runs, the libero runs:
tiny models for a dry run). RL_GPU_DRYRUN=1 (tests/gpu_dryrun.sh): cuda is
the host emulation of a `make CUDA=emu` build, and the section says it is a
dry run.
Needs BUILD's rl-driver (a `make CUDA=1` build for cuda); exits 77 naming what
is missing. Standard library only.
"""
import argparse
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests",
                                "integration", "lib"))
import jobs  # noqa: E402

ROOT = jobs.ROOT
PHASES = ["gen", "reward", "old_log_prob", "update_actor", "sync_weights"]
LIBERO_PHASES = ["rollout", "annotate", "credit", "update_actor", "sync_weights"]
TIMEOUT_S = int(os.environ.get("RL_BENCH_GPU_E2E_TIMEOUT", 180))  # one run's limit (s)
DRY = os.environ.get("RL_GPU_DRYRUN") == "1"
SKIP = 2  # steps left out of the means (start-up, the first round sent ahead)
BEGIN, END = "<!-- bench-gpu-e2e:begin -->", "<!-- bench-gpu-e2e:end -->"


def env_int(name, default):
    return int(os.environ.get("RL_BENCH_GPU_E2E_" + name, default))


def mean(xs):
    xs = [x for x in xs if x is not None]
    return sum(xs) / len(xs) if xs else None


def fmt(x, f="%.3f"):
    return "n/a" if x is None else f % x


class Runs:
    def __init__(self, work, cluster):
        self.work, self.cluster, self.res, self.wall, self.failed = work, cluster, {}, {}, []

    def run(self, name, config, overrides, env=None, cluster=None):
        args = ["--cluster", cluster or self.cluster, "--config", os.path.join(ROOT, "examples", config),
                "--bind", "tcp://127.0.0.1:*", "--log-level", "warn",
                "trainer.output_dir=runs/" + name] + overrides
        t0 = time.time()
        try:  # a stuck job must not eat the device run
            rc, out = jobs.run_driver(self.work, args, expect_ok=False, timeout=TIMEOUT_S, env=env)
        except subprocess.TimeoutExpired as e:
            got = e.stdout or b""
            got = got.decode(errors="replace") if isinstance(got, bytes) else got
            rc, out = 124, "timed out after %d s\n%s" % (TIMEOUT_S, got[-3000:])
        self.wall[name] = time.time() - t0
        print("bench_gpu_e2e: %s: wall %.1f s%s" % (name, self.wall[name], "" if rc == 0 else
                                                    " FAILED (exit %d)" % rc), flush=True)
        if rc != 0:
            print("\n".join("    | " + ln for ln in out.strip().splitlines()[-15:]))
            self.failed.append(name)
            return None
        path = os.path.join(self.work, "runs", name, "metrics.jsonl")
        rows = jobs.metrics(path) if os.path.exists(path) else []
        self.res[name] = rows
        return rows

    def steps(self, name):
        return [r for r in self.res.get(name, []) if r.get("step", 0) > SKIP and "timing_s/step" in r]

    def phase(self, name, k):
        return mean([r.get("timing_s/" + k) for r in self.steps(name)])

    def last(self, name, key):
        vals = [r[key] for r in self.res.get(name, []) if key in r]
        return vals[-1] if vals else None

    def first(self, name, key):
        vals = [r[key] for r in self.res.get(name, []) if key in r]
        return vals[0] if vals else None

    def mean_key(self, name, key):
        return mean([r.get(key) for r in self.res.get(name, []) if r.get("step", 0) > 0])


def extra(name):
    """RL_BENCH_GPU_E2E_<name>: config overrides separated by spaces."""
    return os.environ.get("RL_BENCH_GPU_E2E_" + name, "").split()


def setting(args, key, default=None):
    """The value the last `key=VALUE` of `args` gives, else `default`."""
    vals = [a.split("=", 1)[1] for a in args if a.startswith(key + "=")]
    return vals[-1] if vals else default


def ratio(a, b):
    return None if a is None or b is None or b == 0 else a / b


def write_section(out, text):
    sec = BEGIN + "\n" + text.rstrip("\n") + "\n" + END
    old = open(out).read() if os.path.exists(out) else ""
    if BEGIN in old and END in old:
        a, b = old.index(BEGIN), old.index(END) + len(END)
        new = old[:a] + sec + old[b:]
    else:
        new = old + ("\n" if old else "") + sec + "\n"
    with open(out, "w") as f:
        f.write(new)


def nccl_too_old():
    """Why the NCCL broadcast arm cannot run here, or "": the actor and the
    rollout share GPU 0, two NCCL ranks on one GPU, which NCCL allows from
    2.30 (with NCCL_MULTI_RANK_GPU_ENABLE=1); 2.28 answers "invalid usage"."""
    import ctypes
    try:
        lib = ctypes.CDLL("libnccl.so.2")
    except OSError as e:
        return "no libnccl.so.2 on the loader's path (%s)" % e
    v = ctypes.c_int(0)
    lib.ncclGetVersion(ctypes.byref(v))
    if v.value < 23000:
        return "NCCL %d.%d.%d: two ranks on one GPU need 2.30 or later" % (
            v.value // 10000, v.value // 100 % 100, v.value % 100)
    return ""


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.environ.get("RL_BENCH_GPU_OUT", os.path.join(ROOT, "docs", "RESULTS.md")))
    a = ap.parse_args()
    if DRY and os.path.realpath(a.out) == os.path.realpath(os.path.join(ROOT, "docs", "RESULTS.md")):
        print("bench_gpu_e2e: a dry run writes to a copy of docs/RESULTS.md, never the file itself: set --out "
              "or RL_BENCH_GPU_OUT")
        return 2
    if not os.path.exists(jobs.DRIVER):
        print("bench_gpu_e2e: skipped: %s not built" % jobs.DRIVER)
        return 77
    dev = os.environ.get("RL_BENCH_GPU_E2E_DEVICE", "cuda")
    # RL_GPU_DRYRUN=1 (tests/gpu_dryrun.sh): cuda is the host emulation of a make CUDA=emu build
    if dev == "cuda" and os.environ.get("RL_GPU_DRYRUN") != "1" and \
            subprocess.run(["sh", "-c", "nvidia-smi -L"], capture_output=True).returncode:
        print("bench_gpu_e2e: skipped: no NVIDIA GPU (nvidia-smi -L failed)")
        return 77
    steps, sft_steps = env_int("STEPS", 10), env_int("SFT_STEPS", 150)
    dif_steps, val_size = env_int("DIF_STEPS", 4), env_int("VAL_SIZE", 128)
    if steps <= SKIP or dif_steps <= SKIP:
        print("bench_gpu_e2e: RL_BENCH_GPU_E2E_STEPS and _DIF_STEPS must be > %d (the first %d steps are "
              "not timed)" % (SKIP, SKIP))
        return 2
    t_all = time.time()
    work = tempfile.mkdtemp(prefix="rlrt-bench-gpu-e2e-")
    R = Runs(work, os.path.join(ROOT, "examples", "cluster-gpu.yaml"))
    on = ["actor.device=" + dev, "rollout.device=" + dev]
    oncpu = ["actor.device=cpu", "rollout.device=cpu"]
    R.run("sft", "arith_sft.yaml", ["actor.device=" + dev, "trainer.total_steps=%d" % sft_steps,
                                    "trainer.val_every=0", "data.val_size=%d" % val_size] + extra("OVERRIDES"))
    grpo = ["model.init_from=runs/sft/final", "trainer.total_steps=%d" % steps, "trainer.val_every=%d" % steps,
            "trainer.save_every=0", "data.val_size=%d" % val_size] + extra("OVERRIDES")
    tis = ["algorithm.tis_imp_ratio_cap=2.0"]
    arms = [("sync", on + ["trainer.staleness=0"]),
            ("async", on + ["trainer.staleness=1"] + tis),
            ("partial", on + ["trainer.staleness=2", "rollout.partial_rollouts=true"] + tis),
            ("async_2", on + ["trainer.staleness=1"] + tis),
            ("sync_2", on + ["trainer.staleness=0"]),
            ("sync_bcast", on + ["trainer.staleness=0", "rollout.weight_transport=broadcast"]),
            ("sync_cpu", oncpu + ["trainer.staleness=0"])]
    bcast_skip = ""
    if os.path.exists(os.path.join(ROOT, os.environ.get("BUILD", "build"), "CUDA_EMU")):
        bcast_skip = "the host emulation of CUDA (make CUDA=emu) has no NCCL"
    elif dev == "cuda":
        bcast_skip = nccl_too_old()
    if bcast_skip:
        arms = [x for x in arms if x[0] != "sync_bcast"]
        print("bench_gpu_e2e: sync_bcast: not run: %s" % bcast_skip)
    if "sft" in R.res:
        for name, o in arms:
            R.run(name, "arith_grpo.yaml", grpo + o,
                  env={"NCCL_MULTI_RANK_GPU_ENABLE": "1"} if name == "sync_bcast" else None)
    dif = ["model.init_from=", "data.fid_model=", "reward.scorer_path=", "model.hidden_size=256",
           "model.num_layers=3", "trainer.val_every=0", "trainer.save_every=0",
           "trainer.total_steps=%d" % dif_steps, "data.train_batch_size=4", "rollout.n=8",
           "actor.ppo_mini_batch_size=4", "rollout.num_steps=10"] + extra("DIF_OVERRIDES")
    R.run("dif", "dance_grpo_jpeg.yaml", dif + on)
    R.run("dif_cpu", "dance_grpo_jpeg.yaml", dif + oncpu)
    lib_steps = env_int("LIBERO_STEPS", 5)
    lib = ["model.init_from=", "env.task_ids=0-1", "env.total_num_envs=16",
           "env.max_episode_steps=60", "trainer.total_steps=%d" % lib_steps, "trainer.val_every=0",
           "trainer.save_every=0", "eval.gif_episodes_per_task=0", "actor.ppo_mini_batch_size=32"] + \
        extra("LIBERO_OVERRIDES")
    lib_data = None
    for d in (os.path.join(ROOT, os.environ.get("BUILD", "build"), "libero-data"), os.path.join(ROOT, "build", "libero-data")):
        if all(os.path.exists(os.path.join(d, "libero_object", "task_%02d" % t, "scene_phys.xml")) for t in (0, 1)) \
                and os.path.exists(os.path.join(d, "manifest.json")):
            lib_data = d
            break
    if lib_data is None:
        print("bench_gpu_e2e: libero, libero_cpu: not run: no LIBERO-Object scenes of tasks 0-1 in BUILD/libero-data "
              "or build/libero-data (make libero-data; make CUDA=1 gpu-bundle carries them)")
    else:
        lib = ["env.data_dir=" + lib_data] + lib
        lcl = os.path.join(ROOT, "examples", "cluster-gpu-libero.yaml")
        R.run("libero", "libero_object_ppo.yaml", lib + on, cluster=lcl)
        R.run("libero_cpu", "libero_object_ppo.yaml", lib + oncpu, cluster=lcl)
    r_lib = ratio(R.phase("libero_cpu", "step"), R.phase("libero", "step"))
    total = time.time() - t_all

    def step(n):
        return R.phase(n, "step")
    sync_s = mean([step("sync"), step("sync_2")])
    async_s = mean([step("async"), step("async_2")])
    acc = {n: R.last(n, "val/accuracy") for n in ("sync", "async", "partial", "async_2", "sync_2", "sync_bcast", "sync_cpu")}
    acc_sync, acc_async = mean([acc["sync"], acc["sync_2"]]), mean([acc["async"], acc["async_2"]])
    r_async = ratio(async_s, sync_s)
    # one step off can hide the generation and nothing else: the best ratio
    # this job allows is (step - gen) / step of the synchronous runs
    gen_s = mean([R.phase("sync", "gen"), R.phase("sync_2", "gen")])
    r_floor = None if sync_s is None or gen_s is None else ratio(sync_s - gen_s, sync_s)
    d_async = None if acc_sync is None or acc_async is None else acc_async - acc_sync
    r_part = ratio(step("partial"), sync_s)
    d_part = None if acc_sync is None or acc["partial"] is None else acc["partial"] - acc_sync
    prows = R.mean_key("partial", "async/partial_rows")
    r_cpu = ratio(step("sync_cpu"), sync_s)
    d_cpu = None if acc["sync"] is None or acc["sync_cpu"] is None else acc["sync"] - acc["sync_cpu"]
    r_dif = ratio(step("dif_cpu"), step("dif"))
    names = ["sync", "async", "partial", "async_2", "sync_2", "sync_bcast", "sync_cpu", "dif", "dif_cpu"]
    ws_ipc, ws_b = R.mean_key("sync", "perf/weight_sync_s"), R.mean_key("sync_bcast", "perf/weight_sync_s")
    for n in names:
        for k in ["step"] + PHASES:
            v = R.phase(n, k)
            if v is not None:
                print("bench: gpu_e2e_%s_%s_s = %.4f" % (n, k, v))
    print("bench: gpu_async_step_time_ratio = %s (one step off %s s over synchronous %s s a step, on %s)"
          % (fmt(r_async), fmt(async_s), fmt(sync_s), dev))
    print("bench: gpu_async_step_time_floor = %s (the synchronous step without its generation, over the step: "
          "the lowest ratio one step off can reach on this job)" % fmt(r_floor))
    print("bench: gpu_async_val_acc_delta = %s (final val/accuracy %s against %s)"
          % (fmt(d_async, "%+.3f"), fmt(acc_async), fmt(acc_sync)))
    print("bench: gpu_partial_s2_step_time_ratio = %s" % fmt(r_part))
    print("bench: gpu_partial_s2_val_acc_delta = %s" % fmt(d_part, "%+.3f"))
    print("bench: gpu_partial_s2_partial_rows = %s (rows a step holding tokens of two versions)" % fmt(prows, "%.2f"))
    print("bench: gpu_e2e_weight_sync_s_ipc = %s" % fmt(ws_ipc, "%.5f"))
    print("bench: gpu_e2e_weight_sync_s_bcast = %s" % fmt(ws_b, "%.5f"))
    print("bench: gpu_e2e_arith_step_vs_cpu = %s" % fmt(r_cpu))
    print("bench: gpu_e2e_val_acc_vs_cpu = %s (final val/accuracy %s on the GPU, %s on the CPU)"
          % (fmt(d_cpu, "%+.3f"), fmt(acc["sync"]), fmt(acc["sync_cpu"])))
    print("bench: gpu_e2e_diffusion_step_vs_cpu = %s" % fmt(r_dif))
    for n in ("libero", "libero_cpu"):
        for k in ["step"] + LIBERO_PHASES:
            v = R.phase(n, k)
            if v is not None:
                print("bench: gpu_e2e_%s_%s_s = %.4f" % (n, k, v))
    print("bench: gpu_e2e_libero_step_vs_cpu = %s" % fmt(r_lib))
    print("bench_gpu_e2e: total wall %.1f s (%s)" % (total, ", ".join("%s %.1f" % kv for kv in R.wall.items())))

    gpu = subprocess.run(["sh", "-c", "nvidia-smi --query-gpu=name,driver_version --format=csv,noheader"],
                         capture_output=True, text=True).stdout.strip().splitlines()
    if not gpu and DRY:
        gpu = ["host emulation (make CUDA=emu), no GPU"]
    lines = ["## GPU jobs end to end (`RL_GPU_BENCH=1 tests/gpu_check.sh`, bench/bench_gpu_e2e.py)%s"
             % (" — DRY RUN, not GPU figures" if DRY else ""), ""]
    if DRY:
        lines += ["**Dry run** (`RL_GPU_DRYRUN=1`, tests/gpu_dryrun.sh): a check that the device run's scripts "
                  "work end to end, with tiny sizes (overrides: %s; diffusion: %s; libero: %s), on %s: none of "
                  "these figures is a GPU's." % (" ".join(extra("OVERRIDES")) or "none",
                                                 " ".join(extra("DIF_OVERRIDES")) or "none",
                                                 " ".join(extra("LIBERO_OVERRIDES")) or "none", gpu[0]), ""]
    lines.append("Produced on %s: %s, %d cores; device %s. Jobs without a dataset (the device machine has "
                 "neither Fashion-MNIST nor LIBERO's own data): the generated arithmetic task (`make run`'s "
                 "job, warm start %d SFT steps on the device, %d GRPO steps a run, %d validation rows) and "
                 "diffusion GRPO of clip_flow (MLP trunk, hidden %s, %s layers) from a random "
                 "initialisation with the JPEG reward (%d steps). Actor and rollout on GPU 0 "
                 "(examples/cluster-gpu.yaml), reward on the CPU cores; step means over steps %d.. ."
                 % (time.strftime("%Y-%m-%d", time.gmtime()), gpu[0] if gpu else "no GPU", os.cpu_count(),
                    dev, sft_steps, steps, val_size, setting(dif, "model.hidden_size"),
                    setting(dif, "model.num_layers"), dif_steps, SKIP + 1))
    lines += ["", "| run | s / step | " + " | ".join(PHASES) + " | final val/accuracy | wall s |",
              "|---" * (len(PHASES) + 4) + "|"]
    for n in names:
        if n in R.failed or n not in R.wall:
            lines.append("| %s | %s |%s" % (n, "failed" if n in R.failed else "not run (the warm start failed)",
                                            " |" * (len(PHASES) + 2)))
            continue
        lines.append("| %s | %s | %s | %s | %s |" % (n, fmt(step(n)), " | ".join(fmt(R.phase(n, k)) for k in PHASES),
                                                     fmt(acc.get(n)), fmt(R.wall.get(n), "%.1f")))
    lines += ["", "libero_rl PPO (flow policy from a random initialisation, tasks 0-1, %s envs of %s steps, %d steps; "
              "examples/cluster-gpu-libero.yaml: actor and rollout on GPU 0 for `libero`, on the CPU for "
              "`libero_cpu`, the two env ranks on the CPU cores in both; the physics-only scenes of "
              "BUILD/libero-data):" % (setting(lib, "env.total_num_envs"), setting(lib, "env.max_episode_steps"),
                                       lib_steps), "",
              "| run | s / step | " + " | ".join(LIBERO_PHASES) + " | wall s |", "|---" * (len(LIBERO_PHASES) + 3) + "|"]
    for n in ("libero", "libero_cpu"):
        if n not in R.wall:
            lines.append("| %s | not run (no LIBERO-Object scenes) |%s" % (n, " |" * (len(LIBERO_PHASES) + 1)))
        elif n in R.failed:
            lines.append("| %s | failed |%s" % (n, " |" * (len(LIBERO_PHASES) + 1)))
        else:
            lines.append("| %s | %s | %s | %s |" % (n, fmt(R.phase(n, "step")),
                                                   " | ".join(fmt(R.phase(n, k)) for k in LIBERO_PHASES),
                                                   fmt(R.wall.get(n), "%.1f")))
    lines += ["", "| measure | value |", "|---|---|",
              "| `bench: gpu_async_step_time_ratio` (one step off ÷ synchronous, two runs each; target ≤ 0.65) "
              "| **%s** (the floor this job allows, a step without its generation ÷ the step: %s) |"
              % (fmt(r_async), fmt(r_floor)),
              "| `bench: gpu_async_val_acc_delta` (target ≥ −0.03) | **%s** |" % fmt(d_async, "%+.3f"),
              "| `bench: gpu_partial_s2_step_time_ratio`; `_val_acc_delta`; rows a step with two versions "
              "| %s; %s; %s |" % (fmt(r_part), fmt(d_part, "%+.3f"), fmt(prows, "%.2f")),
              "| `bench: gpu_e2e_arith_step_vs_cpu` (CPU step ÷ GPU step, same cores) | **%s** |" % fmt(r_cpu),
              "| `bench: gpu_e2e_val_acc_vs_cpu` (GPU − CPU final val/accuracy, same seed; within noise: "
              "abs ≤ 0.05) | **%s** |" % fmt(d_cpu, "%+.3f"),
              "| `bench: gpu_e2e_diffusion_step_vs_cpu` | **%s** |" % fmt(r_dif),
              "| `bench: gpu_e2e_libero_step_vs_cpu` (libero_rl PPO, envs on the CPU in both) | **%s** |" % fmt(r_lib),
              "| weight syncs over CUDA IPC (sync run); GB/s | %s; %s |"
              % (fmt(R.mean_key("sync", "perf/weight_sync_cuda_ipc"), "%.2f"),
                 fmt(R.mean_key("sync", "perf/weight_sync_gbps"), "%.2f")),
              "| a weight sync of the arithmetic model (s): CUDA IPC (sync); broadcast (sync_bcast) | %s; %s |"
              % (fmt(ws_ipc, "%.5f"), fmt(ws_b, "%.5f") if not bcast_skip else "not run (%s)" % bcast_skip),
              "| the bench's wall time (s) | %.0f |" % total]
    if R.failed:
        lines.append("")
        lines.append("Failed runs: %s (their output's end is in the device run's log)." % ", ".join(R.failed))
    write_section(a.out, "\n".join(lines))
    print("bench_gpu_e2e: wrote the bench-gpu-e2e section of %s" % a.out)
    return 1 if R.failed else 0


if __name__ == "__main__":
    sys.exit(main())
