"""diffusion_golden.py — the diffusion track (seed 004) gives the same
metrics, value for value, as the runs recorded in tests/golden/diffusion/
(recorded before the restructuring of folders, config reading and recipe
phases, so a refactor that changes any number fails here).

Seven jobs on real daemons, from the example jobs with only their length
(and two batch sizes) cut, on the roles of examples/cluster-diffusion.yaml
(rollout, 2 actor ranks: FSDP, reward):
  scorer     fmnist_scorer.yaml: 40 steps of the prompt-match classifier on
             2000 Fashion-MNIST images, then its test-split accuracy;
  judge      the same, 20 steps with trainer.seed 2: the held-out judge;
  flow       fmnist_flow.yaml: 20 steps of flow-matching pretraining of the
             clip generator (frames 1);
  grpo       dance_grpo_scorer.yaml with the rewards prompt_match +
             jpeg_compressibility (weight 0.5) and the judge: 4 GRPO steps,
             validation at steps 0, 2 and 4, online test images every 2
             steps, a checkpoint at steps 2 and 4;
  grpo_kl    dance_grpo_jpeg_onprompt.yaml (jpeg_compressibility with
             prompt_match held at a floor by the multiplier of
             algorithm.constraint) with the KL loss to the pretrained
             generator (actor.use_kl_loss): 3 steps of 8 prompts, one
             mini-batch, validation at steps 0 and 3;
  clip_flow  fmnist_flow_clips.yaml: 10 steps of pretraining of 4-frame
             clips (model.frames=4: the example has 8 frames since);
  clip_grpo  dance_grpo_scorer.yaml on those 4-frame clips: 2 steps,
             validation at 0 and 2 (with val/frame_consistency, recorded
             after the runs themselves).
The GRPO jobs run with the KL to the pretrained generator as recorded
(the examples have turned it on at actor.kl_loss_coef 0.03 since: grpo and
clip_grpo without it, grpo_kl at the then default coefficient 0.001), and
without the examples' lr warm-up (5 steps: these few
steps would train at lr 0 and a fifth of it) and without their FID
(data.fid_model='': the recorded runs predate it, and it only adds val/
metrics; tests/integration/diffusion_fid.py checks it).
Every metric of metrics.jsonl is compared exactly except wall-clock ones
(timing_s/*, perf/*: seconds and CPU use, which depend on the machine and
its load). The kernels are pinned as in rlvr_golden.py: OMP_NUM_THREADS=2
and OPENBLAS_CORETYPE=Haswell.

A sanitizer build (make SANITIZE=...) compiles the kernels differently (its
checks keep the `omp simd reduction` loops scalar, so sums are added in
another order; rlvr_golden.py): measured with make SANITIZE=address,undefined,
the pretraining jobs give the same numbers but the GRPO jobs differ from
their first value on (step 0's val/prompt_match in the 9th digit, with the
same val/jpeg_kb: the scorer's class probabilities of the same samples,
likely the sum of rl_softmax_forward in common/nn/ops_cpu.c; then every
reward and loss), deterministically, so there the jobs run (under ASan/UBSan, which is worth
having) but their values are not compared, and the test reports itself
skipped (exit 77) saying so.

Skipped (77) when Debian's dataset-fashion-mnist is not installed.

  python3 tests/integration/diffusion_golden.py           compare
  python3 tests/integration/diffusion_golden.py --record  rewrite the goldens
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
import golden_runs  # noqa: E402

FMNIST = "/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz"

# GRPO from those: the examples' warm-up of 5 steps would train these few
# steps at lr 0 and a fifth of it, so the GRPO jobs start at the full rate
GRPO = ["model.init_from=flow/final", "reward.scorer_path=scorer/final", "actor.optim.warmup_steps=0",
        "data.fid_model=", "actor.use_kl_loss=false"]
JOBS = [
    ("scorer", "fmnist_scorer.yaml", ["trainer.total_steps=40", "data.train_limit=2000",
                                      "trainer.output_dir=scorer"]),
    ("judge", "fmnist_scorer.yaml", ["trainer.seed=2", "trainer.total_steps=20", "data.train_limit=2000",
                                     "trainer.output_dir=judge"]),
    ("flow", "fmnist_flow.yaml", ["trainer.total_steps=20", "data.train_limit=2000",
                                  "trainer.output_dir=flow"]),
    ("grpo", "dance_grpo_scorer.yaml", GRPO + [
        "reward.reward_model=prompt_match,jpeg_compressibility:0.5", "reward.judge_path=judge/final",
        "trainer.total_steps=4", "trainer.val_every=2", "trainer.save_every=2",
        "rollout.online.step.interval=2", "trainer.output_dir=grpo"]),
    ("grpo_kl", "dance_grpo_jpeg_onprompt.yaml", GRPO + [
        "reward.jpeg_contrast=as_is", "data.reward_image=sample", "actor.optim.lr=1e-4",  # as recorded
                                                                                     # (the example's since)
        "actor.use_kl_loss=true", "actor.kl_loss_coef=0.001", "data.train_batch_size=8",
        "actor.ppo_mini_batch_size=8",
        "trainer.total_steps=3", "trainer.val_every=3", "trainer.save_every=0",
        "rollout.online.test=false", "trainer.output_dir=grpo_kl"]),
    ("clip_flow", "fmnist_flow_clips.yaml", ["trainer.total_steps=10", "data.train_limit=2000", "model.frames=4",
                                             "trainer.output_dir=clip_flow"]),
    ("clip_grpo", "dance_grpo_scorer.yaml", [
        "model.init_from=clip_flow/final", "reward.scorer_path=scorer/final", "model.frames=4", "data.fid_model=",
        "actor.use_kl_loss=false",
        "actor.optim.warmup_steps=0",
        "trainer.total_steps=2", "trainer.val_every=2", "trainer.save_every=0",
        "rollout.online.step.interval=2", "trainer.output_dir=clip_grpo"]),
]
# files each job must leave (so a job that silently skips a part fails here)
EXPECT = {
    "grpo": ["checkpoints/step_2/model.safetensors", "checkpoints/step_4/model.safetensors",
             "online/step_4.png", "online/step_4.gif", "before_after.png"],
    "clip_grpo": ["online/step_2.gif"],
}


if __name__ == "__main__":
    if not os.path.exists(FMNIST):
        print("skipped: Debian's dataset-fashion-mnist is not installed")
        sys.exit(77)
    # examples/cluster-diffusion.yaml's roles
    golden_runs.run("diffusion", [
        {"name": name, "cluster": "cluster.yaml", "config": config, "overrides": overrides,
         "out": name, "expect": EXPECT.get(name, [])} for name, config, overrides in JOBS],
        {"cluster.yaml": {"roles": {"rollout": 1, "actor": 2, "reward": 1}, "port": 5571}},
        compare_sanitized=False)
