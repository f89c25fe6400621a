"""rlvr_partial.py — partial rollouts under a staleness bound above one
(rollout.partial_rollouts, trainer.staleness=2) on real daemons (tiny model,
2 actor ranks; docs/decisions/partial-rollouts.md):

1. rollout.partial_rollouts without trainer.staleness is refused before any
   worker starts, naming both keys.
2. trainer.staleness=2 with partial rollouts and TIS: every token of every
   step is at most 2 versions behind the actor (async/token_staleness_max
   and tokens_lag_0..2, which sum to the step's tokens), rows that hold
   tokens of two versions exist (a weight switch interrupted generation and
   the rows went on under the new version), and the rows' version is their
   oldest token's (staleness_max = token_staleness_max).
3. Resume exactness with rows generated ahead in the checkpoint: a run
   resumed from its own checkpoint of step 2 trains steps 3 and 4 on the
   checkpoint's rounds and ends with the same metrics and weights as the
   run that went on from that checkpoint. (Which decode step a switch falls
   on depends on when the weights arrive, so two separate runs differ: the
   comparison is against the run that wrote the checkpoint.)
4. Two rollout ranks on the weight chain, polling between decode steps:
   the job runs and keeps the bound.
5. Partial rollouts switched on (or off) at a resume: the checkpoint's
   rounds, with or without per-token versions, are trained on.
"""
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rlvr_async as base  # noqa: E402  (run, metrics, weights, same, TINY)


def last_by_step(rows):
    out = {}
    for r in rows:
        out[r["step"]] = r
    return out


def main():
    if not os.path.exists(base.DRIVER):
        raise SystemExit("FAIL: %s not built" % base.DRIVER)
    work = tempfile.mkdtemp(prefix="rlrt-partial-")
    run, metrics, weights = base.run, base.metrics, base.weights
    try:
        cfile = os.path.join(work, "cluster.yaml")
        with open(cfile, "w") as f:
            f.write("driver: {bind: 127.0.0.1, port: 5555}\n"
                    "nodes: [{name: local, address: 127.0.0.1, launch: local}]\n"
                    "roles:\n  rollout: {count: 1, node: local}\n"
                    "  actor: {count: 2, node: local}\n  reward: {count: 1, node: local}\n")
        # 1. refused without staleness
        rc, out = run(work, cfile, "arith_grpo.yaml", ["rollout.partial_rollouts=true",
                                                       "trainer.total_steps=1",
                                                       "trainer.output_dir=runs/bad"], expect_ok=False)
        assert rc != 0 and "rollout.partial_rollouts" in out and "trainer.staleness" in out and \
            "partial rollouts need trainer.staleness >= 1" in out, out[-2000:]
        print("ok: rollout.partial_rollouts without trainer.staleness is refused, naming both keys")
        run(work, cfile, "arith_sft.yaml", ["trainer.total_steps=16", "trainer.val_every=16",
                                            "data.train_batch_size=16", "actor.optim.lr=0.01",
                                            "trainer.output_dir=runs/sft"])
        # rows decode one at a time (one KV-cache slot), 32 a round: the
        # generation of a round sent ahead can outlast the actor's update, so
        # weight versions can arrive mid-generation. Whether one does depends
        # on the two sides' timing: up to 5 runs, the first whose checkpoint
        # of step 2 holds rows of two versions (steps 3-4) is kept, else the
        # last one with any.
        rl = ["model.init_from=runs/sft/final", "data.train_batch_size=4", "rollout.n=8",
              "actor.ppo_mini_batch_size=2", "trainer.val_every=2", "trainer.save_every=2",
              "reward.format_weight=1.0", "actor.optim.lr=0.003", "algorithm.online_filtering=false",
              "algorithm.guidance.enable=false", "rollout.max_num_seqs=1",
              "trainer.staleness=2", "rollout.partial_rollouts=true",
              "algorithm.tis_imp_ratio_cap=2.0"]
        # 2. the bound per token, rows of two versions
        kept = None
        for attempt in range(5):
            out_dir = "runs/p%d" % attempt
            run(work, cfile, "arith_grpo.yaml", rl + ["trainer.total_steps=6", "trainer.output_dir=" + out_dir])
            m = [r for r in metrics(work, out_dir) if "async/token_staleness_max" in r]
            assert [r["step"] for r in m] == [1, 2, 3, 4, 5, 6], [r["step"] for r in m]
            for r in m:
                lags = [r["async/tokens_lag_%d" % k] for k in range(3)]
                assert r["async/token_staleness_max"] <= 2 and r["async/staleness_max"] <= 2, r
                assert r["async/staleness_max"] == r["async/token_staleness_max"], r
                assert sum(lags) == round(r["response_length/mean"] * 32), (lags, r["response_length/mean"])
                assert r["tis/ratio_max"] > 0, r
            assert m[0]["async/token_staleness_max"] == 0, m[0]  # step 1: on-policy
            partial = [r["async/partial_rows"] for r in m]
            print("   run %d: rows with two versions per step %s" % (attempt, partial))
            if sum(partial) > 0:
                kept = (out_dir, m)
            if partial[2] + partial[3] > 0:
                break
        assert kept, "no run of 5 had a weight switch interrupt generation"
        out_dir, m = kept
        print("ok: trainer.staleness=2 with partial rollouts: token staleness max %s, mean %s; "
              "rows with two versions per step %s; tokens per lag 0/1/2 (step 6) %s"
              % ([r["async/token_staleness_max"] for r in m],
                 ["%.2f" % r["async/token_staleness_mean"] for r in m],
                 [r["async/partial_rows"] for r in m],
                 [m[-1]["async/tokens_lag_%d" % k] for k in range(3)]))
        # 3. resume from the checkpoint of step 2 (rows for steps 3 and 4 in it)
        src, dst = os.path.join(work, out_dir), os.path.join(work, "runs/r")
        shutil.copytree(src, dst)
        ck = os.path.join(dst, "checkpoints")
        for d in os.listdir(ck):
            if d.startswith("step_") and d != "step_2":
                shutil.rmtree(os.path.join(ck, d))
        with open(os.path.join(ck, "latest"), "w") as f:
            f.write("step_2\n")
        shutil.rmtree(os.path.join(dst, "final"), ignore_errors=True)
        run(work, cfile, "arith_grpo.yaml", rl + ["trainer.total_steps=4", "trainer.resume=true",
                                                  "trainer.output_dir=runs/r"])
        a, b = last_by_step(metrics(work, out_dir)), last_by_step(metrics(work, "runs/r"))
        base.same([a[3], a[4]], [b[3], b[4]], "resume from step 2 with partial rollouts")
        assert weights(work, out_dir, 4) == weights(work, "runs/r", 4)
        print("ok: resumed from step 2, steps 3-4 (rows of the checkpoint, %s of them partial) and "
              "the weights of step 4 equal the run that wrote it"
              % [b[3]["async/partial_rows"], b[4]["async/partial_rows"]])
        # 4. two rollout ranks (the weights reach the second down the first's
        #    chain, actor.weight_fanout's default) that poll without waiting
        c2 = os.path.join(work, "cluster2.yaml")
        with open(c2, "w") as f:
            f.write("driver: {bind: 127.0.0.1, port: 5555}\n"
                    "nodes: [{name: local, address: 127.0.0.1, launch: local}]\n"
                    "roles:\n  rollout: {count: 2, node: local}\n"
                    "  actor: {count: 2, node: local}\n  reward: {count: 1, node: local}\n")
        run(work, c2, "arith_grpo.yaml", rl + ["trainer.total_steps=6", "trainer.save_every=0",
                                               "trainer.output_dir=runs/p2"])
        m = [r for r in metrics(work, "runs/p2") if "async/token_staleness_max" in r]
        assert [r["step"] for r in m] == [1, 2, 3, 4, 5, 6], [r["step"] for r in m]
        assert all(r["async/token_staleness_max"] <= 2 for r in m), m
        print("ok: two rollout ranks on a weight chain: 6 steps, token staleness max %s, rows with "
              "two versions per step %s" % ([r["async/token_staleness_max"] for r in m],
                                            [r["async/partial_rows"] for r in m]))
        # 5. switching partial rollouts on or off at a resume: the rounds of
        #    the checkpoint are trained on either way (rows without per-token
        #    versions get their row's for every token; with them in a job
        #    without partial rollouts, the versions are dropped)
        whole = [a for a in rl if a != "rollout.partial_rollouts=true"]
        run(work, cfile, "arith_grpo.yaml", whole + ["trainer.total_steps=2", "trainer.output_dir=runs/on"])
        run(work, cfile, "arith_grpo.yaml", rl + ["trainer.total_steps=4", "trainer.resume=true",
                                                  "trainer.output_dir=runs/on"])
        b = last_by_step(metrics(work, "runs/on"))
        assert "async/token_staleness_max" not in b[2] and b[3]["async/partial_rows"] == 0 and \
            b[4]["async/partial_rows"] == 0 and b[4]["async/token_staleness_max"] <= 2, (b[3], b[4])
        shutil.copytree(os.path.join(work, "runs/r"), os.path.join(work, "runs/off"))
        run(work, cfile, "arith_grpo.yaml", whole + ["trainer.total_steps=6", "trainer.resume=true",
                                                     "trainer.output_dir=runs/off"])
        b = last_by_step(metrics(work, "runs/off"))
        assert 6 in b and "async/token_staleness_max" not in b[5] and b[5]["async/staleness_max"] <= 2, b[5]
        print("ok: partial rollouts switched on (and off) at a resume: the checkpoint's rounds are "
              "trained on")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
