"""rlvr_tools.py — multi-turn tool use on real daemons (tiny model, 2 actor
ranks, the calculator through rollout.multi_turn):

1. A tool-format SFT warm start (data.tool_solutions) and a GRPO job with
   rollout.multi_turn on run; the tools/* metrics are present and sane
   (turns <= 1 + answered calls, calls within max_turns, outcome shares sum
   to 1, fractions in [0, 1]) and the model does call the tool.
2. Resume with multi-turn and trainer.staleness=1 on: 2 steps + resume to 4
   equals 4 uninterrupted steps (metrics and weights), so tool transcripts
   are deterministic per seed.
3. Bad set-ups fail before any worker starts, naming the key: a tokenizer
   without the tool markup, an unknown tool.
"""
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rlvr_async as ra  # noqa: E402  (run, metrics, weights, same)

TOOLS = ["data.tokenizer=arith_ext", "data.tool_solutions=true", "data.levels=[4]",
         "data.train_files=runs/data/tools_train.jsonl", "data.val_files=runs/data/tools_val.jsonl"]
MT = ["rollout.multi_turn.enable=true", "rollout.multi_turn.max_turns=2",
      "rollout.multi_turn.tool_timeout_ms=2000"]


def main():
    if not os.path.exists(ra.DRIVER):
        raise SystemExit("FAIL: %s not built" % ra.DRIVER)
    work = tempfile.mkdtemp(prefix="rlrt-tools-")
    try:
        cfile = os.path.join(work, "cluster.yaml")
        with open(cfile, "w") as f:
            f.write("driver: {bind: 127.0.0.1, port: 5555}\n"
                    "heartbeat: {interval_s: 1.0, liveness: 20}\n"
                    "nodes: [{name: local, address: 127.0.0.1, launch: local}]\n"
                    "roles:\n  rollout: {count: 1, node: local}\n"
                    "  actor: {count: 2, node: local}\n  reward: {count: 1, node: local}\n")
        ra.run(work, cfile, "arith_sft.yaml", TOOLS + MT + [
            "trainer.total_steps=120", "trainer.val_every=120", "data.train_batch_size=16",
            "actor.optim.lr=0.01", "trainer.output_dir=runs/sft"])
        sft = ra.metrics(work, "runs/sft")
        print("ok: tool-format SFT: val accuracy %.3f with the tools on" % sft[-1]["val/accuracy"])
        rl = TOOLS + MT + ["model.init_from=runs/sft/final", "data.train_batch_size=4",
                           "rollout.n=4", "actor.ppo_mini_batch_size=2", "trainer.val_every=2",
                           "trainer.save_every=2", "actor.optim.lr=0.003",
                           "algorithm.online_filtering=false",
                           # guidance is refused with multi-turn rollouts
                           "algorithm.guidance.enable=false"]
        # 1. the job runs; its metrics
        ra.run(work, cfile, "arith_grpo.yaml", rl + ["trainer.total_steps=3",
                                                     "trainer.output_dir=runs/grpo"])
        m = [r for r in ra.metrics(work, "runs/grpo") if "tools/turns_mean" in r]
        assert len(m) == 3, "tools/* metrics missing: %r" % ra.metrics(work, "runs/grpo")[-1]
        outs = ["ok", "error", "garbage", "timeout", "unknown"]
        called = 0
        for r in m:
            t, c = r["tools/turns_mean"], r["tools/calls_mean"]
            assert 1 <= t <= 3 and 0 <= c <= 2, r
            # an answered call is followed by one more turn unless the
            # budget ran out (truncated rows, rows that end on a result)
            assert t <= 1 + c + 1e-9 and t >= 1 + c - r["tools/truncated_frac"] - 1e-9 - 2 * (1 - r["tools/used_frac"]), r
            for k in ["tools/used_frac", "tools/truncated_frac", "tools/max_turns_frac",
                      "tools/bad_call_frac"] + ["tools/%s_frac" % o for o in outs]:
                assert 0 <= r[k] <= 1, (k, r)
            if c > 0:
                assert abs(sum(r["tools/%s_frac" % o] for o in outs) + r["tools/bad_call_frac"] - 1) < 1e-9, r
            called += c > 0
            assert r["tools/timeout_frac"] == 0, r  # the calculator answers at once
        assert called >= 1, "the warm-started model never called the calculator: %r" % m
        assert "val/accuracy" in ra.metrics(work, "runs/grpo")[-1]
        print("ok: multi-turn GRPO: turns %.2f, calls %.2f, ok share %.2f, val accuracy %.3f"
              % (m[-1]["tools/turns_mean"], m[-1]["tools/calls_mean"], m[-1]["tools/ok_frac"],
                 ra.metrics(work, "runs/grpo")[-1]["val/accuracy"]))
        # 2. resume exactness with multi-turn and one-step-off on
        extra = ["trainer.staleness=1", "algorithm.tis_imp_ratio_cap=2.0"]
        ra.run(work, cfile, "arith_grpo.yaml", rl + extra + ["trainer.total_steps=4",
                                                             "trainer.output_dir=runs/straight"])
        ra.run(work, cfile, "arith_grpo.yaml", rl + extra + ["trainer.total_steps=2",
                                                             "trainer.output_dir=runs/resumed"])
        ra.run(work, cfile, "arith_grpo.yaml", rl + extra + ["trainer.total_steps=4", "trainer.resume=true",
                                                             "trainer.output_dir=runs/resumed"])
        ra.same(ra.metrics(work, "runs/straight"), ra.metrics(work, "runs/resumed"),
                "resume with multi-turn and staleness 1")
        assert ra.weights(work, "runs/straight", 4) == ra.weights(work, "runs/resumed", 4)
        print("ok: resume with multi-turn tools and trainer.staleness=1 equals an uninterrupted run")
        # KL in the reward with tools and overlong filtering: the KL is taken
        # over the sampled tokens (the recipe keeps the tool mask when overlong
        # filtering zeroes cut rows of the loss mask); the rounds concatenate
        ra.run(work, cfile, "arith_grpo.yaml", rl + [
            "trainer.total_steps=2", "trainer.output_dir=runs/kl", "algorithm.use_kl_in_reward=true",
            "algorithm.kl_ctrl.kl_coef=0.05", "algorithm.overlong_filter=true",
            "rollout.response_length=24", "trainer.rollout_data_dir=runs/kl_samples"])
        m = [r for r in ra.metrics(work, "runs/kl") if r["step"] > 0]
        assert len(m) == 2 and all("actor/reward_kl_penalty" in r and r["batch/truncated_frac"] >= 0
                                   for r in m), m
        print("ok: KL in the reward with tools and overlong filtering (KL %s, cut %s)"
              % ([round(r["actor/reward_kl_penalty"], 6) for r in m],
                 [r["batch/truncated_frac"] for r in m]))
        # 3. bad set-ups, named before any worker starts
        off = ["algorithm.guidance.enable=false"]
        rc, out = ra.run(work, cfile, "arith_grpo.yaml", MT + off + [
            "trainer.total_steps=1", "trainer.output_dir=runs/bad1"], expect_ok=False)
        assert rc != 0 and "data.tokenizer" in out and "<call>" in out, out[-2000:]
        rc, out = ra.run(work, cfile, "arith_grpo.yaml", TOOLS + MT + off + [
            "rollout.multi_turn.tools=[calc, web_search]", "trainer.total_steps=1",
            "trainer.output_dir=runs/bad2"], expect_ok=False)
        assert rc != 0 and "rollout.multi_turn.tools[1]" in out and "web_search" in out, out[-2000:]
        # the example job's off-policy guidance would train a worked
        # solution's tool output as the model's own text
        rc, out = ra.run(work, cfile, "arith_grpo.yaml", TOOLS + MT + [
            "trainer.total_steps=1", "trainer.output_dir=runs/bad3"], expect_ok=False)
        # located at the key the user wrote last (the override), naming both
        assert rc != 0 and "override rollout.multi_turn.enable=true: rollout.multi_turn.enable: " \
            "algorithm.guidance.enable does not combine with rollout.multi_turn.enable" in out, out[-2000:]
        print("ok: a tokenizer without tool markup, an unknown tool and guidance with tools are named")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print("PASS rlvr_tools")


if __name__ == "__main__":
    main()
