"""rlvr_e2e.py — end-to-end language-model RL over real daemons (tiny model).

1. SFT warm start (tiny model, few steps: it rarely writes the format yet).
2. The trivially learnable variant (reward = format, reward.format_weight=1):
   GRPO raises the mean reward within a dozen steps.
3. Every estimator (grpo, rloo, reinforce_plus_plus,
   reinforce_plus_plus_baseline, reinforce_pro_max, + uniform_scale) runs a
   few RL steps; every daemon exits 0; metrics.jsonl has every step.
4. The actor on 2 ranks (FSDP), and on 1 rank in micro-batches, computes the
   same update and loss metrics as on 1 rank (and the update is not empty).
5. Resume: 2 steps + resume to 4 equals 4 uninterrupted steps (with AEPO,
   the adaptive KL controller and hard-prompt replay, whose states travel in
   the checkpoint).
6. Online filtering that can never fill the batch stops with its message.
Also: off-policy guidance (algorithm.guidance) replaces the last sample of
each all-wrong group with the row's worked solution, as the per-step
samples of trainer.rollout_data_dir show; bad guidance settings are refused.
Also: hard-prompt replay (algorithm.hard_replay) brings back the prompts a
model replay of its queue predicts, step by step; bad settings are refused.
Also: trainer.validation_data_dir holds the validation samples, agreeing
with the logged val/accuracy and val/accuracy/level_1.
Also: perf/cpu_cores_busy accounts for the CPU the driver and its workers
spend in the steps (bounded by what the run used), and perf/cpu_cores is
the cores they may use (1 when the driver is pinned to one core).

Standard library only (the checkpoints are read as safetensors by hand).
"""
import json
import os
import resource
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
import ckpt  # noqa: E402
import jobs  # noqa: E402

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
BUILD = os.path.join(ROOT, os.environ.get("BUILD", "build"))
DRIVER = os.path.join(BUILD, "bin", "rl-driver")

TINY = [
    "model.hidden_size=32", "model.intermediate_size=64", "model.num_layers=1",
    "model.num_heads=2", "model.num_kv_heads=1", "model.max_seq_len=64",
    "data.train_size=2000", "data.val_size=16", "data.levels=[1]",
    "data.max_prompt_length=16", "rollout.response_length=40",
]


def cluster(path, actors):
    with open(path, "w") as f:
        f.write("driver: {bind: 127.0.0.1, port: 5555}\n"
                "nodes: [{name: local, address: 127.0.0.1, launch: local}]\n"
                "roles:\n"
                "  rollout: {count: 1, node: local}\n"
                "  actor: {count: %d, node: local}\n"
                "  reward: {count: 1, node: local}\n" % actors)


def run(work, cluster_file, config, overrides, expect_ok=True, cores=None):
    """cores: the set of cores the driver (and so its workers) may use."""
    pin = (lambda: os.sched_setaffinity(0, cores)) if cores else None
    return jobs.run_driver(work, ["--cluster", cluster_file, "--config",
                                  os.path.join(ROOT, "examples", config), "--bind", "tcp://127.0.0.1:*",
                                  "--log-level", "warn"] + TINY + overrides, expect_ok, preexec_fn=pin)


metrics, safetensors_f32, max_diff = jobs.metrics, jobs.safetensors_f32, jobs.max_diff


def cores_busy(rows, run_cpu_s, cores):
    """perf/cpu_cores_busy × the step's seconds is the CPU the driver and its
    workers spent on the step: over all steps at most what the whole run
    used (they are this process's reaped descendants), and a good part of it
    (what is left is start-up, step 0's validation and the shut-down; a metric
    that missed the workers would see the driver's few per cent). perf/cpu_cores:
    the cores they may use."""
    steps = [r for r in rows if r["step"] > 0]
    assert all("perf/cpu_cores_busy" in r for r in steps), steps[0]
    assert all(r["perf/cpu_cores"] == cores for r in steps), (cores, steps[0])
    busy = [r["perf/cpu_cores_busy"] for r in steps]
    assert all(0 < b <= cores * 1.05 for b in busy), (cores, busy)
    in_steps = sum(r["perf/cpu_cores_busy"] * r["timing_s/step"] for r in steps)
    assert 0.2 * run_cpu_s < in_steps <= run_cpu_s * 1.02, (in_steps, run_cpu_s)
    print("ok: perf/cpu_cores_busy %.2f..%.2f of %d cores; %.2f CPU s in the steps of the %.2f "
          "the run used" % (min(busy), max(busy), cores, in_steps, run_cpu_s))


def same_metrics(a, b, steps):
    for ra, rb in zip(a, b):
        if ra["step"] not in steps:
            continue
        for k, v in ra.items():
            if k.startswith("timing_s/") or k.startswith("perf/"):
                continue
            if rb.get(k) != v:
                raise SystemExit("FAIL: step %d %s: %r vs %r" % (ra["step"], k, v, rb.get(k)))


def main():
    if not os.path.exists(DRIVER):
        raise SystemExit("FAIL: %s not built" % DRIVER)
    work = tempfile.mkdtemp(prefix="rlrt-rlvr-")
    try:
        c1, c2 = os.path.join(work, "c1.yaml"), os.path.join(work, "c2.yaml")
        cluster(c1, 1)
        cluster(c2, 2)
        # 1. warm start
        run(work, c2, "arith_sft.yaml", ["trainer.total_steps=16", "trainer.val_every=16",
                                          "data.train_batch_size=16", "actor.optim.lr=0.01",
                                          "trainer.output_dir=runs/sft"])
        warm = os.path.join(work, "runs/sft/final/model.safetensors")
        assert os.path.exists(warm)
        # without the example jobs' dynamic sampling: the tiny model is never
        # right, so no group would have signal (rlvr_async.py tests it)
        rl = ["model.init_from=runs/sft/final", "data.train_batch_size=4", "rollout.n=4",
              "actor.ppo_mini_batch_size=2", "trainer.val_every=0", "trainer.save_every=0",
              "reward.format_weight=1.0", "actor.optim.lr=0.003", "algorithm.online_filtering=false",
              "algorithm.filter_mode=range", "algorithm.filter_exhausted=error",
              "actor.clip_ratio_high=0.2"]
        # 2. the reward rises on the learnable variant
        used0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        run(work, c2, "arith_grpo.yaml", rl + ["data.train_batch_size=8", "rollout.n=8",
                                               "actor.ppo_mini_batch_size=4", "trainer.total_steps=12",
                                               "trainer.output_dir=runs/rise", "trainer.val_every=12",
                                               "trainer.validation_data_dir=runs/rise_val"])
        used1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        rows = metrics(os.path.join(work, "runs/rise/metrics.jsonl"))
        sc = [r["critic/score/mean"] for r in rows[1:]]
        early, late = sum(sc[:3]) / 3, sum(sc[-3:]) / 3
        print("ok: reward %.3f (steps 1-3) -> %.3f (steps 10-12)" % (early, late))
        assert late > early + 0.2, sc
        cores_busy(rows, used1.ru_utime + used1.ru_stime - used0.ru_utime - used0.ru_stime,
                   len(os.sched_getaffinity(0)))
        # a driver that may use one core only: its workers inherit it
        run(work, c2, "arith_grpo.yaml", rl + ["trainer.total_steps=3",
                                               "trainer.output_dir=runs/one_core"], cores={0})
        rows = metrics(os.path.join(work, "runs/one_core/metrics.jsonl"))
        assert [r["perf/cpu_cores"] for r in rows[1:]] == [1] * 3, rows
        assert all(0 < r["perf/cpu_cores_busy"] <= 1.05 for r in rows[1:]), rows
        print("ok: pinned to one core, perf/cpu_cores = 1 and perf/cpu_cores_busy <= 1 (%s)"
              % ", ".join("%.2f" % r["perf/cpu_cores_busy"] for r in rows[1:]))
        # trainer.validation_data_dir: the validation's samples, which agree
        # with the logged accuracy (overall and per level)
        with open(os.path.join(work, "runs/rise_val/12.jsonl")) as f:
            samples = [json.loads(line) for line in f]
        assert len(samples) == 16 and [s["global_id"] for s in samples] == list(range(16)), samples
        assert all(s["step"] == 12 and s["level"] == 1 and s["prompt"].startswith("Q: ")
                   and isinstance(s["response"], str) for s in samples), samples[0]
        logged = [r for r in metrics(os.path.join(work, "runs/rise/metrics.jsonl"))
                  if "val/accuracy" in r][-1]
        acc = sum(s["accuracy"] for s in samples) / 16
        assert abs(acc - logged["val/accuracy"]) < 1e-9, (acc, logged)
        assert abs(acc - logged["val/accuracy/level_1"]) < 1e-9, (acc, logged)
        fmt = sum(s["format"] for s in samples) / 16
        assert abs(fmt - logged["val/format"]) < 1e-9, (fmt, logged)
        for s in samples:  # each row's accuracy is its own response's: \boxed{answer}
            boxed = s["response"].rsplit("\\boxed{", 1)
            answer = boxed[1].split("}", 1)[0] if len(boxed) == 2 else None
            assert s["accuracy"] == (1.0 if answer == s["ground_truth"] else 0.0), s
        with open(os.path.join(work, "a_file"), "w") as f:
            f.write("x")
        rc, log = run(work, c2, "arith_sft.yaml", ["trainer.total_steps=1",
                                                    "trainer.output_dir=runs/sft_bad",
                                                    "trainer.validation_data_dir=a_file/val"],
                      expect_ok=False)
        assert rc != 0 and "trainer.validation_data_dir" in log, log[-2000:]
        print("ok: validation samples in trainer.validation_data_dir match val/accuracy (%.3f) "
              "and val/format (%.3f)" % (acc, fmt))
        # trainer.stop_at_val_accuracy: SFT ends at the first validation at or
        # above it and saves final there (the bench's warm starts of one accuracy)
        run(work, c2, "arith_sft.yaml", ["trainer.total_steps=80", "trainer.val_every=4",
                                          "data.train_batch_size=16", "actor.optim.lr=0.01",
                                          "trainer.stop_at_val_accuracy=0.1",
                                          "trainer.output_dir=runs/sft_stop"])
        rows = metrics(os.path.join(work, "runs/sft_stop/metrics.jsonl"))
        vals = [(r["step"], r["val/accuracy"]) for r in rows if "val/accuracy" in r]
        first = next((st for st, a in vals if a >= 0.1), None)
        assert first is not None and first < 80, vals
        assert rows[-1]["step"] == first and all(st % 4 == 0 for st, _ in vals), (first, vals)
        assert os.path.exists(os.path.join(work, "runs/sft_stop/final/model.safetensors"))
        rc, log = run(work, c2, "arith_sft.yaml", ["trainer.total_steps=4", "trainer.val_every=0",
                                                    "trainer.stop_at_val_accuracy=0.5",
                                                    "trainer.output_dir=runs/sft_stop_bad"],
                      expect_ok=False)
        assert rc != 0 and "trainer.stop_at_val_accuracy: trainer.stop_at_val_accuracy 0.5 needs validation: " \
            "trainer.val_every must be > 0" in log, log[-2000:]
        print("ok: trainer.stop_at_val_accuracy=0.1 stopped SFT at step %d of 80 (%s)" %
              (first, " ".join("%d:%.3f" % v for v in vals)))
        # 3. every estimator
        for est, extra in [("grpo", []), ("rloo", []), ("reinforce_plus_plus", []),
                           ("reinforce_plus_plus_baseline", []), ("reinforce_pro_max", []),
                           ("reinforce_pro_max", ["algorithm.uniform_scale=true"]),
                           ("grpo", ["actor.use_kl_loss=true"]),
                           ("rloo", ["algorithm.use_kl_in_reward=true"]),
                           ("grpo", ["algorithm.aepo.enable=true", "data.bootstrap=true",
                                     "data.bootstrap_size=8", "algorithm.use_kl_in_reward=true"])]:
            out_dir = "runs/%s%d" % (est, len(extra))
            _, log = run(work, c2, "arith_grpo.yaml", rl + extra + [
                "algorithm.adv_estimator=" + est, "trainer.total_steps=3",
                "trainer.output_dir=" + out_dir])
            m = metrics(os.path.join(work, out_dir, "metrics.jsonl"))
            steps = [r["step"] for r in m]
            assert steps == [0, 1, 2, 3], (est, steps)
            for r in m[1:]:
                for k in ("critic/score/mean", "actor/pg_loss", "actor/grad_norm"):
                    assert k in r and r[k] is not None, (est, k, r)
            # exit 0 means every daemon exited 0 (rl-driver fails otherwise)
            print("ok: %-30s %s score %.3f" % (est, " ".join(extra), m[-1]["critic/score/mean"]))
        # 3b. off-policy guidance: the tiny warm start is almost never right,
        #     so most groups are all-wrong and get the row's worked solution
        #     as their last sample; trainer.rollout_data_dir shows each row
        run(work, c2, "arith_grpo.yaml", rl + [
            "trainer.total_steps=2", "trainer.output_dir=runs/guided", "algorithm.guidance.enable=true",
            "trainer.rollout_data_dir=runs/guided_rollouts", "actor.ppo_mini_batch_size=4",
            "data.train_batch_size=8", "rollout.n=4", "algorithm.guidance.samples=1"])
        with open(os.path.join(work, "runs/data/arith_train.jsonl")) as f:
            solution = {r["global_id"]: r["solution"] for r in map(json.loads, f)}
        gm = metrics(os.path.join(work, "runs/guided/metrics.jsonl"))
        total_guided = 0
        for step in (1, 2):
            with open(os.path.join(work, "runs/guided_rollouts/%d.jsonl" % step)) as f:
                rows = [json.loads(line) for line in f]
            assert len(rows) == 32 and all(r["step"] == step for r in rows), len(rows)
            groups = {}
            for r in rows:
                groups.setdefault(r["global_id"], []).append(r)
            assert len(groups) == 8 and all(len(g) == 4 for g in groups.values()), groups.keys()
            guided = 0
            for gid, g in groups.items():
                marks = [r["guided"] for r in g]
                if marks == [0, 0, 0, 1]:  # the group's last sample, the worked solution
                    guided += 1
                    assert g[3]["response"] == solution[gid], (g[3], solution[gid])
                    # the best score of its group (reward = format here, so a
                    # well-formed wrong sample ties): the largest advantage, above 0
                    assert g[3]["advantage"] > 0 and all(r["advantage"] <= g[3]["advantage"]
                                                         for r in g[:3]), g
                    assert g[3]["accuracy"] == 1.0 and g[3]["weight_version"] == g[0]["weight_version"]
                    assert all(r["accuracy"] == 0.0 for r in g[:3]), g
                else:  # left alone: it had a correct sample of its own
                    assert marks == [0, 0, 0, 0] and any(r["accuracy"] > 0 for r in g), g
            assert abs(gm[step]["batch/guided_groups"] - guided / 8) < 1e-12, (gm[step], guided)
            assert gm[step]["batch/guided_rows"] == sum(r["guided"] for r in rows), gm[step]
            if guided:
                assert gm[step]["batch/guided_accuracy"] == 1.0, gm[step]
            total_guided += guided
        assert total_guided > 0, "no group was guided"
        print("ok: guidance: %d of 16 groups had no correct sample and got the worked solution as "
              "their last row" % total_guided)
        # with AEPO the guided rows stay out of its statistics: no entropy
        # reward on text the policy did not write (the dump's scores are the
        # shaped ones; with reward.format_weight=1 the raw score is format);
        # with the KL in the reward they get no KL term either (their tokens
        # are not samples of the policy), and every row's advantage is its
        # group's z-score of score - kl_penalty (what the dump says entered
        # the reward)
        run(work, c2, "arith_grpo.yaml", rl + [
            "trainer.total_steps=2", "trainer.output_dir=runs/guided_aepo",
            "algorithm.guidance.enable=true", "algorithm.aepo.enable=true", "data.bootstrap=true",
            "data.bootstrap_size=8", "trainer.rollout_data_dir=runs/guided_aepo_rollouts",
            "algorithm.use_kl_in_reward=true", "algorithm.kl_ctrl.kl_coef=0.5",
            "algorithm.norm_adv_by_std_in_grpo=true"])
        shaped = penalised = 0
        for step in (1, 2):
            with open(os.path.join(work, "runs/guided_aepo_rollouts/%d.jsonl" % step)) as f:
                rows = [json.loads(line) for line in f]
            assert any(r["guided"] for r in rows), "no guided row"
            groups = {}
            for r in rows:
                groups.setdefault(r["global_id"], []).append(r)
                if r["guided"]:
                    assert r["score"] == r["format"] == 1.0 and r["kl_penalty"] == 0.0, r
                else:
                    shaped += r["score"] != r["format"]
                    penalised += step == 2 and r["kl_penalty"] != 0.0
            for g in groups.values():
                s = [r["score"] - r["kl_penalty"] for r in g]
                mean = sum(s) / len(s)
                std = (sum((x - mean) ** 2 for x in s) / (len(s) - 1)) ** 0.5
                for r, x in zip(g, s):
                    assert abs(r["advantage"] - (x - mean) / (std + 1e-6)) < 1e-3 * max(1, abs(r["advantage"])), (r, s)
        assert shaped > 0, "AEPO gave no entropy reward to any sample: the check above shows nothing"
        assert penalised > 0, "no policy sample had a KL term at step 2: the check above shows nothing"
        print("ok: guidance with AEPO: guided rows get no entropy reward and no KL term (%d policy "
              "samples get the reward, %d the KL)" % (shaped, penalised))
        rc, log = run(work, c2, "arith_grpo.yaml", rl + [
            "trainer.total_steps=1", "trainer.output_dir=runs/bad", "algorithm.guidance.enable=true",
            "algorithm.guidance.samples=4"], expect_ok=False)
        assert rc != 0 and "algorithm.guidance.samples" in log and "must be below rollout.n (4)" in log, log[-2000:]
        with open(os.path.join(work, "nosol.jsonl"), "w") as f:
            f.write('{"prompt": "Q: 1+2=?\\nA: ", "ground_truth": "3", "solution": "<think>1+2=3</think>\\\\boxed{3}"}\n'
                    '{"prompt": "Q: 1+3=?\\nA: ", "ground_truth": "4"}\n')
        rc, log = run(work, c2, "arith_grpo.yaml", rl + [
            "trainer.total_steps=1", "trainer.output_dir=runs/bad", "algorithm.guidance.enable=true",
            "data.train_files=nosol.jsonl"], expect_ok=False)
        assert rc != 0 and "nosol.jsonl:2: no 'solution' field" in log, log[-2000:]
        assert "started " not in log, "a worker was started for a bad dataset"
        print("ok: guidance: samples >= rollout.n and a row without a solution are refused")
        # 3c. hard-prompt replay: the tiny warm start is almost never right,
        #     so nearly every group is queued; a queue of 5 drops its oldest
        #     entries, a prompt returns at most twice, 2 a step. The dumps of
        #     trainer.rollout_data_dir (without filtering: the whole first
        #     round) let this test replay the queue itself and predict each
        #     step's replayed prompts and metrics
        T, PER, TIMES, CAP = 6, 2, 2, 5
        run(work, c2, "arith_grpo.yaml", rl + [
            "trainer.total_steps=%d" % T, "trainer.output_dir=runs/replay",
            "trainer.rollout_data_dir=runs/replay_rollouts", "algorithm.guidance.enable=false",
            "algorithm.hard_replay.enable=true", "algorithm.hard_replay.per_step=%d" % PER,
            "algorithm.hard_replay.times=%d" % TIMES, "algorithm.hard_replay.capacity=%d" % CAP,
            "algorithm.hard_replay.below=0.5"])
        with open(os.path.join(work, "runs/data/arith_train.jsonl")) as f:
            prompt_of = {r["global_id"]: r["prompt"] for r in map(json.loads, f)}
        rm = metrics(os.path.join(work, "runs/replay/metrics.jsonl"))
        queue, replayed_total, expired_total, dropped_total = [], 0, 0, 0
        for step in range(1, T + 1):
            with open(os.path.join(work, "runs/replay_rollouts/%d.jsonl" % step)) as f:
                rows = [json.loads(line) for line in f]
            groups, order = {}, []
            for r in rows:
                if r["global_id"] not in groups:
                    order.append(r["global_id"])
                groups.setdefault(r["global_id"], []).append(r)
            assert len(order) == 4 and all(len(g) == 4 for g in groups.values()), order
            for gid, g in groups.items():
                assert all(r["prompt"] == prompt_of[gid] for r in g), (gid, g[0])
                assert len({r["replayed"] for r in g}) == 1, g
            # the queue's oldest PER entries come first, with their count
            want = [(gid, done + 1) for gid, done in queue[:PER]]
            queue = queue[PER:]
            got = [(gid, groups[gid][0]["replayed"]) for gid in order if groups[gid][0]["replayed"]]
            assert got == want and order[:len(want)] == [g for g, _ in want], (step, got, want)
            m = rm[step]
            assert m["replay/prompts"] == len(want) and m["replay/merged"] == 0, m
            queued = solved = expired = dropped = 0
            for gid in sorted(groups):  # groups are looked at by global id
                done = groups[gid][0]["replayed"]
                if sum(r["accuracy"] for r in groups[gid]) / 4 >= 0.5:
                    solved += done > 0
                elif done == TIMES:
                    expired += 1
                else:
                    if len(queue) == CAP:
                        queue.pop(0)
                        dropped += 1
                    queue.append((gid, done))
                    queued += 1
            assert (m["replay/queued"], m["replay/solved"], m["replay/expired"], m["replay/dropped"],
                    m["replay/queue"]) == (queued, solved, expired, dropped, len(queue)), (step, m)
            replayed_total += len(want)
            expired_total += expired
            dropped_total += dropped
        # the run must have shown each path, or the checks above show nothing
        assert replayed_total >= 2 * (T - 1) and expired_total > 0 and dropped_total > 0, \
            (replayed_total, expired_total, dropped_total)
        print("ok: hard-prompt replay: %d prompts replayed over %d steps as the queue predicts "
              "(%d expired, %d dropped)" % (replayed_total, T, expired_total, dropped_total))
        # a training set of 8 prompts: the iterator keeps drawing prompts that
        # are queued; each stays one group of rollout.n rows (merged)
        run(work, c2, "arith_grpo.yaml", rl + [
            "trainer.total_steps=6", "trainer.output_dir=runs/replay_small",
            "trainer.rollout_data_dir=runs/replay_small_rollouts", "algorithm.guidance.enable=false",
            "data.train_files=runs/data/small_train.jsonl", "data.train_size=8",
            "algorithm.hard_replay.enable=true", "algorithm.hard_replay.per_step=2"])
        merged = sum(r.get("replay/merged", 0) for r in metrics(
            os.path.join(work, "runs/replay_small/metrics.jsonl")))
        for step in range(1, 7):
            with open(os.path.join(work, "runs/replay_small_rollouts/%d.jsonl" % step)) as f:
                ids = [json.loads(line)["global_id"] for line in f]
            assert len(ids) == 16 and all(ids.count(i) == 4 for i in ids), (step, ids)
        assert merged > 0, "no queued prompt was drawn fresh: the check above shows nothing"
        print("ok: hard_replay: a queued prompt the iterator draws again is one group (%d merged)"
              % merged)
        for key, val, want in [("below", "0", "expected a mean accuracy in (0, 1], got 0"),
                               ("per_step", "5", "expected 1 to data.train_batch_size (4) prompts, got 5"),
                               ("times", "0", "algorithm.hard_replay.times")]:
            rc, log = run(work, c2, "arith_grpo.yaml", rl + [
                "trainer.total_steps=1", "trainer.output_dir=runs/bad",
                "algorithm.hard_replay.enable=true", "algorithm.hard_replay.%s=%s" % (key, val)],
                expect_ok=False)
            # the message names where the value came from (here the override)
            assert rc != 0 and want in log and "override algorithm.hard_replay." + key in log, log[-2000:]
            assert "started " not in log, "a worker was started for a bad hard_replay setting"
        print("ok: hard_replay: below, per_step and times out of range are refused, naming the setting")
        # 4. 1 vs 2 actor ranks, and 1 rank in micro-batches of 3 rows, for
        #    every loss aggregation (the divisors are the whole mini-batch's,
        #    so the update and the loss metrics depend on neither). AdamW's eps
        #    is raised from 1e-8 to 1e-6: the first steps move every weight by
        #    about lr · g / (|g| + eps), so a gradient entry at float-noise
        #    level (worked solutions reach rarely used weights) would move by
        #    up to lr in one run and not in the other
        for agg in ["token-mean", "seq-mean-token-mean", "seq-mean-token-sum",
                    "seq-mean-token-sum-norm"]:
            for c, name, extra in [(c1, "w1", []), (c2, "w2", []),
                                   (c1, "mb", ["actor.ppo_micro_batch_size=3"])]:
                run(work, c, "arith_grpo.yaml", rl + extra + [
                    "trainer.total_steps=2", "trainer.save_every=2", "actor.loss_agg_mode=" + agg,
                    "actor.optim.eps=1e-6",
                    "trainer.output_dir=runs/%s-%s" % (agg, name)])
            ck = lambda name: safetensors_f32(os.path.join(
                work, "runs/%s-%s/checkpoints/step_2/model.safetensors" % (agg, name)))
            p1, p2, pm = ck("w1"), ck("w2"), ck("mb")
            d, dm = max_diff(p1, p2), max_diff(p1, pm)
            moved = max_diff(p1, safetensors_f32(warm))
            m = {name: metrics(os.path.join(work, "runs/%s-%s/metrics.jsonl" % (agg, name)))
                 for name in ("w1", "w2", "mb")}
            for name in ("w2", "mb"):
                for r1, r2 in zip(m["w1"][1:], m[name][1:]):
                    for k in ("actor/pg_loss", "actor/grad_norm", "actor/pg_clipfrac"):
                        assert abs(r1[k] - r2[k]) <= 1e-4 * max(1.0, abs(r1[k])), (agg, name, k, r1[k], r2[k])
            print("ok: %s: max |param diff| after 2 steps: 1 vs 2 actor ranks %.3g, whole vs "
                  "micro-batches %.3g (update size %.3g); pg_loss and grad_norm agree"
                  % (agg, d, dm, moved))
            assert moved > 1e-3, moved
            assert d < 1e-4 and dm < 1e-4, (d, dm)
        # 5. resume (with AEPO, so its difficulty state must survive too)
        rl = rl + ["algorithm.aepo.enable=true", "algorithm.use_kl_in_reward=true",
                   "algorithm.kl_ctrl.type=adaptive", "algorithm.kl_ctrl.horizon=100"]
        run(work, c2, "arith_grpo.yaml", rl + ["trainer.total_steps=4", "trainer.save_every=2",
                                               "trainer.output_dir=runs/straight"])
        run(work, c2, "arith_grpo.yaml", rl + ["trainer.total_steps=2", "trainer.save_every=2",
                                               "trainer.output_dir=runs/resumed"])
        run(work, c2, "arith_grpo.yaml", rl + ["trainer.total_steps=4", "trainer.save_every=2",
                                               "trainer.output_dir=runs/resumed", "trainer.resume=true"])
        with open(os.path.join(work, "runs/resumed/checkpoints/step_2/trainer_state.json")) as f:
            state = json.load(f)

        def find(o, key):
            if isinstance(o, dict):
                return o[key] if key in o else next((v for v in (find(x, key) for x in o.values())
                                                     if v is not None), None)
            return None
        # the example job's hard-prompt replay is on: its queue must travel
        queue = find(state, "hard_replay")
        assert isinstance(queue, list) and queue and all(len(e) == 2 for e in queue), state
        a = metrics(os.path.join(work, "runs/straight/metrics.jsonl"))
        b = metrics(os.path.join(work, "runs/resumed/metrics.jsonl"))
        assert [r["step"] for r in a] == [r["step"] for r in b] == [0, 1, 2, 3, 4]
        same_metrics(a, b, {1, 2, 3, 4})
        d = max_diff(safetensors_f32(os.path.join(work, "runs/straight/checkpoints/step_4/model.safetensors")),
                     safetensors_f32(os.path.join(work, "runs/resumed/checkpoints/step_4/model.safetensors")))
        assert d == 0.0, d
        print("ok: resume equals an uninterrupted run (metrics and weights; AEPO, the adaptive "
              "KL controller and the hard-prompt replay queue restored)")
        assert any("aepo/tau" in r for r in b), "AEPO metrics missing"
        # a checkpoint whose replay queue names a prompt the training set
        # does not have, or is not a list of pairs, is refused by name
        for bad, want in [([[99999999, 0]], "no training row with global_id 99999999"),
                          ([[1, 0, 3]], "hard_replay entry 0: expected [global_id, replays done]")]:
            shutil.rmtree(os.path.join(work, "runs/badq"), ignore_errors=True)
            shutil.copytree(os.path.join(work, "runs/resumed"), os.path.join(work, "runs/badq"))
            for step in (2, 4):
                path = os.path.join(work, "runs/badq/checkpoints/step_%d/trainer_state.json" % step)
                if not os.path.exists(path):
                    continue
                with open(path) as f:
                    text = f.read()
                old = json.dumps(find(json.loads(text), "hard_replay"))
                parsed = json.loads(text)
                target = parsed
                while "hard_replay" not in target:
                    target = next(v for v in target.values()
                                  if isinstance(v, dict) and find(v, "hard_replay") is not None)
                target["hard_replay"] = bad
                with open(path, "w") as f:
                    json.dump(parsed, f)
                ckpt.reseal(os.path.dirname(path))  # a forger's checksums: the values are refused
            rc, log = run(work, c2, "arith_grpo.yaml", rl + [
                "trainer.total_steps=6", "trainer.save_every=2", "trainer.output_dir=runs/badq",
                "trainer.resume=true"], expect_ok=False)
            assert rc != 0 and want in log, (old, log[-2000:])
        print("ok: resume: a checkpoint's bad replay queue is refused by name")
        # 6a. datasets are checked row by row at load, before any worker starts
        with open(os.path.join(work, "bad.jsonl"), "w") as f:
            f.write('{"prompt": "Q: 1+2=?\\nA: ", "ground_truth": "3"}\n'
                    '{"prompt": "Q: 1+x=?\\nA: ", "ground_truth": "3"}\n'
                    '{"prompt": "Q: 11111111111111111111+2=?\\nA: ", "ground_truth": "3"}\n')
        rc, log = run(work, c2, "arith_grpo.yaml", rl + ["data.train_files=bad.jsonl",
                                                         "algorithm.guidance.enable=false",
                                                         "trainer.output_dir=runs/bad"], expect_ok=False)
        want = "bad.jsonl:2: prompt: char tokenizer: character 'x' (U+0078) at byte offset 5 is not in the vocabulary"
        assert rc != 0 and want in log, log[-2000:]
        assert "started " not in log, "a worker was started for a bad dataset"
        with open(os.path.join(work, "long.jsonl"), "w") as f:
            f.write('{"prompt": "Q: 1+2=?\\nA: ", "ground_truth": "3"}\n'
                    '{"prompt": "Q: 11111111111111111111+2=?\\nA: ", "ground_truth": "3"}\n')
        rc, log = run(work, c2, "arith_grpo.yaml", rl + ["data.val_files=long.jsonl",
                                                         "trainer.output_dir=runs/bad"], expect_ok=False)
        want = "long.jsonl:2: the prompt is 31 tokens, more than data.max_prompt_length 16"
        assert rc != 0 and want in log, log[-2000:]
        print("ok: bad dataset rows are named by file:line before any worker starts")
        # 6. online filtering that cannot succeed
        rc, log = run(work, c2, "arith_grpo.yaml", rl + [
            "trainer.total_steps=1", "trainer.output_dir=runs/filter", "algorithm.online_filtering=true",
            "algorithm.filter_low=0.99", "algorithm.filter_high=1.0", "algorithm.max_try_make_batch=2"],
            expect_ok=False)
        assert rc != 0
        want = "online filtering: only 0 of 4 prompt groups had accuracy mean in (0.99, 1) after 2 tries"
        assert want in log, log[-2000:]
        print("ok: online filtering stops after the maximum tries")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
