"""diffusion_e2e.py — the diffusion track (seed 004) end to end over real
daemons, with tiny models:

1. scorer_train and flow_pretrain on Fashion-MNIST (a few steps each).
2. GRPO with combined rewards (prompt_match + jpeg_compressibility): every
   daemon exits 0, metrics for every step, validation and online-test files
   (PNG, animated GIF, before/after grid), a checkpoint. Then the KL loss to
   the reference (actor.use_kl_loss): a large coefficient keeps the policy
   closer to the pretrained generator than a negligible one; the scores are
   the weighted sums of the rewards (prompt_match, on_prompt, JPEG kB); the
   judge's verdicts (reward.judge_path) are reported and never scored; a
   scorer ensemble (two directories) averages its members' probabilities;
   a convolutional scorer (model.type image_cnn) serves as the scorer too.
   algorithm.constraint: the on_prompt term is paid the multiplier λ, which
   moves after every step by the PI rule on (min − the batch's on-prompt rate).
3. Resume: 2 steps + resume to 4 equals 4 uninterrupted steps (metrics of
   steps 3-4, the constraint's multiplier among them, and the final
   weights, bit for bit).
4. The video path: 2-frame clips through pretraining and GRPO.
5. A bad reward_model, judge, constraint or estimator is a located config
   error.
6. The remote scorer through the reward role, served by the reference Python
   server (deploy/scorer_server.py) with the same learned scorer: its scores
   equal the in-process prompt-match scores; with the server killed the step
   fails with the timeout message (skipped without python3-zmq/numpy).

Skipped (77) when Debian's dataset-fashion-mnist is not installed.
"""
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
import jobs  # noqa: E402

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
BUILD = os.path.join(ROOT, os.environ.get("BUILD", "build"))
DRIVER = os.path.join(BUILD, "bin", "rl-driver")
FMNIST = "/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz"

TINY_FLOW = ["model.hidden_size=32", "model.num_layers=1", "model.time_embed_dim=8"]


def cluster(path, actors):
    with open(path, "w") as f:
        f.write("driver: {bind: 127.0.0.1, port: 5571}\n"
                "nodes: [{name: local, address: 127.0.0.1, launch: local}]\n"
                "roles:\n"
                "  rollout: {count: 1, node: local}\n"
                "  actor: {count: %d, node: local}\n"
                "  reward: {count: 1, node: local}\n" % actors)


def run(work, cl, overrides, expect_ok=True, env=None):
    return jobs.run_driver(work, ["--cluster", cl, "--bind", "tcp://127.0.0.1:*", "--log-level", "warn"]
                           + overrides, expect_ok, env=env)


metrics = jobs.metrics


def file_bytes(path):
    with open(path, "rb") as f:
        return f.read()


def grpo_args(out, flow, scorer, extra=()):
    return (["trainer.recipe=diffusion", "trainer.output_dir=" + out, "model.init_from=" + flow,
             "reward.scorer_path=" + scorer, "data.train_batch_size=4", "rollout.n=4",
             "actor.ppo_mini_batch_size=2", "rollout.num_steps=4", "data.val_per_prompt=2",
             "actor.optim.lr=1e-3", "actor.timestep_fraction=0.5"] + TINY_FLOW + list(extra))


def main():
    if not os.path.exists(DRIVER):
        print("skipped: %s not built" % DRIVER)
        return 77
    if not os.path.exists(FMNIST):
        print("skipped: Debian's dataset-fashion-mnist is not installed")
        return 77
    work = tempfile.mkdtemp(prefix="rlrt_diff_")
    try:
        return body(work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def body(work):
    cl1, cl2 = os.path.join(work, "c1.yaml"), os.path.join(work, "c2.yaml")
    cluster(cl1, 1)
    cluster(cl2, 2)
    # 1. pretraining
    run(work, cl2, ["trainer.recipe=scorer_train", "trainer.output_dir=scorer",
                    "trainer.total_steps=40", "model.hidden_size=32", "data.train_limit=2000",
                    "data.train_batch_size=64"])
    m = metrics(os.path.join(work, "scorer", "metrics.jsonl"))
    acc = [r["val/accuracy"] for r in m if "val/accuracy" in r]
    assert acc and acc[-1] > 0.5, "scorer accuracy %s" % acc
    run(work, cl2, ["trainer.recipe=flow_pretrain", "trainer.output_dir=flow",
                    "trainer.total_steps=30", "data.train_limit=2000", "data.train_batch_size=32"]
        + TINY_FLOW)
    assert os.path.exists(os.path.join(work, "flow", "final", "model.safetensors"))
    print("pretraining: scorer accuracy %.3f" % acc[-1])

    # 2. GRPO with two rewards
    args = grpo_args("g", "flow/final", "scorer/final",
                     ["reward.reward_model=prompt_match,jpeg_compressibility:0.5",
                      "reward.judge_path=scorer/final",
                      "trainer.total_steps=4", "trainer.val_every=2",
                      "rollout.online.step.interval=2", "trainer.save_every=4"])
    rc, out = run(work, cl2, args)
    m = metrics(os.path.join(work, "g", "metrics.jsonl"))
    assert [r["step"] for r in m] == [0, 1, 2, 3, 4], [r["step"] for r in m]
    for r in m[1:]:
        for k in ("critic/score/mean", "reward/prompt_match", "reward/jpeg_kb", "reward/on_prompt",
                  "actor/pg_loss", "actor/grad_norm", "timing_s/update_actor"):
            assert k in r, (k, r)
        assert r["actor/trained_steps"] == 16 * 2, r  # 16 rows × half of 4 steps
    for k in ("val/prompt_match", "val/jpeg_kb", "val/on_prompt"):
        assert k in m[0] and k in m[2] and k in m[4], k
    online = os.path.join(work, "g", "online")
    for s in (0, 2, 4):
        assert file_bytes(os.path.join(online, "step_%d.png" % s))[:8] == b"\x89PNG\r\n\x1a\n"
        assert file_bytes(os.path.join(online, "step_%d.gif" % s))[:6] == b"GIF89a"
    assert file_bytes(os.path.join(work, "g", "before_after.png"))[:4] == b"\x89PNG"
    assert os.path.exists(os.path.join(work, "g", "checkpoints", "step_4", "model.safetensors"))
    print("grpo: 4 steps, score %.4f -> %.4f" % (m[1]["critic/score/mean"], m[4]["critic/score/mean"]))

    assert all("actor/kl_loss" not in r for r in m), "a KL metric without actor.use_kl_loss"
    for r in m[1:]:  # score = reward_coeff · Σ weight · reward (the judge is not in it)
        want = 0.1 * (r["reward/prompt_match"] - 0.5 * r["reward/jpeg_kb"])
        assert abs(r["critic/score/mean"] - want) < 1e-5, (r["critic/score/mean"], want)
        # the judge here is the scorer itself, so its verdicts are the scorer's
        assert r["reward/judge_on_prompt"] == r["reward/on_prompt"], r
    for r in (m[0], m[2], m[4]):
        assert r["val/judge_on_prompt"] == r["val/on_prompt"], r

    # 2b. the KL loss to the pretrained reference (actor.use_kl_loss): measured
    # with a negligible coefficient, the policy drifts from the reference; with
    # a large one the gradient pulls it back, so the KL stays far smaller
    kl = {}
    for c in ("1e-6", "100"):
        run(work, cl2, grpo_args("kl_" + c, "flow/final", "scorer/final",
                                 ["reward.reward_model=jpeg_compressibility,on_prompt:1",
                                  "trainer.total_steps=6", "actor.optim.lr=3e-4",
                                  "trainer.val_every=0", "rollout.online.test=false",
                                  "trainer.save_every=0", "actor.optim.lr_schedule=constant",
                                  "actor.use_kl_loss=true", "actor.kl_loss_coef=" + c]))
        mk = metrics(os.path.join(work, "kl_" + c, "metrics.jsonl"))[1:]
        kl[c] = [r["actor/kl_loss"] for r in mk]
        assert len(kl[c]) == 6 and all(k >= 0 for k in kl[c]), kl[c]
        for r in mk:  # the on_prompt reward: 1 when the scorer's argmax is the class
            want = 0.1 * (r["reward/on_prompt"] - r["reward/jpeg_kb"])
            assert abs(r["critic/score/mean"] - want) < 1e-5, (r["critic/score/mean"], want)
    # two updates a step: the first one of step 1 is at the reference (KL 0)
    # (measured: the sums over steps 2-6 differ ~3x, the last step's KL ~6x)
    assert kl["1e-6"][0] > 0 and kl["1e-6"][5] > kl["1e-6"][0], kl
    assert sum(kl["100"][1:]) < 0.5 * sum(kl["1e-6"][1:]), kl
    assert kl["100"][5] < 0.5 * kl["1e-6"][5], kl
    print("kl: KL to the reference over steps 1-6: coef 1e-6 %s, coef 100 %s" %
          (["%.2e" % k for k in kl["1e-6"]], ["%.2e" % k for k in kl["100"]]))

    # 2b'. reward.jpeg_contrast matched: the score pays the kB of each image
    # brought up to the ink level (test_image.c checks the matching itself),
    # jpeg_kb stays the image's own; an image already at full ink is scored
    # as it is (this tiny generator's samples saturate: ink 255)
    run(work, cl2, grpo_args("match", "flow/final", "scorer/final",
                             ["reward.reward_model=jpeg_compressibility,on_prompt:1",
                              "reward.jpeg_contrast=matched", "trainer.total_steps=2",
                              "trainer.val_every=2", "rollout.online.test=false",
                              "trainer.save_every=0"]))
    mm = metrics(os.path.join(work, "match", "metrics.jsonl"))
    for r in mm[1:]:
        want = 0.1 * (r["reward/on_prompt"] - r["reward/jpeg_kb_matched"])
        assert abs(r["critic/score/mean"] - want) < 1e-5, (r["critic/score/mean"], want)
        assert 0 <= r["reward/ink"] <= 255, r
        if r["reward/ink"] == 255:
            assert r["reward/jpeg_kb_matched"] == r["reward/jpeg_kb"], r
    assert "val/jpeg_kb_matched" in mm[0] and "val/ink" in mm[0], mm[0]
    print("jpeg_contrast matched: kB %.3f, matched %.3f, ink %.1f" %
          (mm[1]["reward/jpeg_kb"], mm[1]["reward/jpeg_kb_matched"], mm[1]["reward/ink"]))

    # 2c. algorithm.constraint: on_prompt held at a floor by a multiplier λ
    # that starts at its reward_model weight and moves after every step
    con = ["algorithm.constraint.reward=on_prompt", "algorithm.constraint.min=0.99",
           "algorithm.constraint.ki=3", "algorithm.constraint.kp=2"]
    run(work, cl2, grpo_args("con", "flow/final", "scorer/final",
                             ["reward.reward_model=jpeg_compressibility,on_prompt:0.5",
                              "trainer.total_steps=4", "trainer.val_every=0",
                              "rollout.online.test=false", "trainer.save_every=0"] + con))
    mc = metrics(os.path.join(work, "con", "metrics.jsonl"))[1:]
    integral, lam, lams = 0.5, 0.5, []
    for r in mc:
        assert abs(r["constraint/lambda"] - lam) < 1e-6, (r["constraint/lambda"], lam)
        assert abs(r["constraint/mean"] - r["reward/on_prompt"]) < 1e-6, r
        want = 0.1 * (lam * r["reward/on_prompt"] - r["reward/jpeg_kb"])
        assert abs(r["critic/score/mean"] - want) < 1e-5, (r["critic/score/mean"], want)
        lams.append(lam)
        e = 0.99 - r["reward/on_prompt"]
        integral = min(max(integral + 3 * e, 0.0), 100.0)
        lam = min(max(integral + 2 * e, 0.0), 100.0)
    assert len(mc) == 4 and lams[-1] > lams[0], lams  # the tiny generator is under 0.99
    print("constraint: lambda %s, on-prompt %s" %
          (["%.3f" % x for x in lams], ["%.3f" % r["reward/on_prompt"] for r in mc]))

    # a checkpoint of a run without the constraint resumes with it on: a
    # warning, and the multiplier starts at the term's weight (prompt_match: 1)
    rc, out = run(work, cl2, args + ["trainer.total_steps=5", "trainer.resume=true",
                                     "algorithm.constraint.reward=prompt_match"])
    assert "has no algorithm.constraint state" in out, out[-2000:]
    m5 = metrics(os.path.join(work, "g", "metrics.jsonl"))
    assert m5[-1]["step"] == 5 and m5[-1]["constraint/lambda"] == 1.0, m5[-1]

    # 2d. a scorer ensemble (reward.scorer_path a,b): the class probabilities of
    # its members averaged. The step-0 validation scores the same ODE samples,
    # so the ensemble's prompt-match is the mean of the members' own.
    run(work, cl2, ["trainer.recipe=scorer_train", "trainer.output_dir=scorer2", "trainer.seed=2",
                    "trainer.total_steps=40", "model.hidden_size=32", "data.train_limit=2000",
                    "data.train_batch_size=64"])
    pm0 = {}
    for tag, sc in (("a", "scorer/final"), ("b", "scorer2/final"),
                    ("ab", "scorer/final,scorer2/final")):
        run(work, cl1, grpo_args("ens_" + tag, "flow/final", sc,
                                 ["trainer.total_steps=1", "trainer.val_every=0",
                                  "rollout.online.test=false", "trainer.save_every=0"]))
        pm0[tag] = metrics(os.path.join(work, "ens_" + tag, "metrics.jsonl"))[0]["val/prompt_match"]
    assert pm0["a"] != pm0["b"], pm0  # two different scorers
    assert abs(pm0["ab"] - 0.5 * (pm0["a"] + pm0["b"])) < 1e-6, pm0
    print("ensemble: val/prompt_match %.4f and %.4f, together %.4f" % (pm0["a"], pm0["b"], pm0["ab"]))
    # 2e. a convolutional scorer (model.type image_cnn) as the reward's scorer,
    # alone and in an ensemble with the MLP one (the same averaging)
    run(work, cl2, ["trainer.recipe=scorer_train", "trainer.output_dir=cnn", "model.type=image_cnn",
                    "model.conv1_channels=4", "model.conv2_channels=4", "model.hidden_size=16",
                    "trainer.total_steps=40", "data.train_limit=2000", "data.train_batch_size=64"])
    for tag, sc in (("c", "cnn/final"), ("ac", "scorer/final,cnn/final")):
        run(work, cl1, grpo_args("ens_" + tag, "flow/final", sc,
                                 ["trainer.total_steps=1", "trainer.val_every=0",
                                  "rollout.online.test=false", "trainer.save_every=0",
                                  "reward.judge_path=cnn/final"]))
        r0 = metrics(os.path.join(work, "ens_" + tag, "metrics.jsonl"))[0]
        pm0[tag] = r0["val/prompt_match"]
        if tag == "c":  # the judge is the scorer itself here
            assert r0["val/judge_on_prompt"] == r0["val/on_prompt"], r0
    assert pm0["c"] != pm0["a"], pm0
    assert abs(pm0["ac"] - 0.5 * (pm0["a"] + pm0["c"])) < 1e-6, pm0
    print("cnn scorer: val/prompt_match %.4f; with the MLP scorer %.4f" % (pm0["c"], pm0["ac"]))

    # 3. resume exactness (constant LR so the schedule does not depend on the length),
    # with the constraint's multiplier as state to carry
    base = grpo_args("r_full", "flow/final", "scorer/final",
                     ["trainer.val_every=0", "rollout.online.test=false",
                      "actor.optim.lr_schedule=constant", "trainer.save_every=2",
                      "reward.reward_model=prompt_match,on_prompt:0.5"] + con)
    run(work, cl2, base + ["trainer.total_steps=4"])
    half = [a.replace("r_full", "r_half") for a in base]
    run(work, cl2, half + ["trainer.total_steps=2"])
    run(work, cl2, half + ["trainer.total_steps=4", "trainer.resume=true"])
    full = metrics(os.path.join(work, "r_full", "metrics.jsonl"))
    part = metrics(os.path.join(work, "r_half", "metrics.jsonl"))
    strip = lambda r: {k: v for k, v in r.items() if not k.startswith(("timing_s/", "perf/cpu_"))}
    assert [r["step"] for r in part] == [0, 1, 2, 3, 4], [r["step"] for r in part]
    assert full[3]["constraint/lambda"] != 0.5, full[3]  # the resumed run must restore it
    for a, b in zip(full, part):
        assert strip(a) == strip(b), (strip(a), strip(b))
    wa = file_bytes(os.path.join(work, "r_full", "checkpoints", "step_4", "model.safetensors"))
    wb = file_bytes(os.path.join(work, "r_half", "checkpoints", "step_4", "model.safetensors"))
    assert wa == wb, "resumed weights differ"
    print("resume: metrics and weights identical")
    # 3b. an actor rank killed inside the diffusion update: the job restores
    # its checkpoint, replays, and ends as the fault-free run
    marker = os.path.join(work, "fired")
    fault = [a.replace("r_full", "r_fault") for a in base] + ["trainer.total_steps=4",
                                                              "actor.comm_timeout_s=4"]
    rc, out = run(work, cl2, fault,
                  env={"RL_FAULT_INJECT": "actor/1:update_diffusion:3:before:" + marker})
    assert os.path.exists(marker), "the fault never fired"
    assert "recovery 1 of" in out, out[-3000:]
    part = metrics(os.path.join(work, "r_fault", "metrics.jsonl"))
    assert [strip(r) for r in full] == [strip(r) for r in part], "metrics after the recovery differ"
    wb = file_bytes(os.path.join(work, "r_fault", "checkpoints", "step_4", "model.safetensors"))
    assert wa == wb, "weights after the recovery differ"
    print("fault: actor/1 killed in update_diffusion; recovered, metrics and weights identical")

    # 4. the video path: 2-frame clips
    run(work, cl1, ["trainer.recipe=flow_pretrain", "trainer.output_dir=flow2", "model.frames=2",
                    "trainer.total_steps=10", "data.train_limit=2000", "data.train_batch_size=16"]
        + TINY_FLOW)
    run(work, cl1, grpo_args("g2", "flow2/final", "scorer/final",
                             ["model.frames=2", "trainer.total_steps=2", "trainer.val_every=2",
                              "rollout.online.step.interval=2", "data.reward_frame=1"]))
    m2 = metrics(os.path.join(work, "g2", "metrics.jsonl"))
    assert [r["step"] for r in m2] == [0, 1, 2]
    assert file_bytes(os.path.join(work, "g2", "online", "step_2.gif"))[:6] == b"GIF89a"
    assert file_bytes(os.path.join(work, "g2", "online", "step_2_frames.png"))[:8] == b"\x89PNG\r\n\x1a\n"
    cons = [r["val/frame_consistency"] for r in m2 if "val/frame_consistency" in r]
    assert len(cons) == 2 and all(-1.0 <= c <= 1.0 for c in cons), m2
    rc, out = run(work, cl1, grpo_args("bad", "flow2/final", "scorer/final",
                                       ["model.frames=2", "data.reward_frame=2"]), expect_ok=False)
    assert rc != 0 and "data.reward_frame 2 is not a frame of the 2-frame clips" in out, out
    assert "ready" not in out
    print("clips: 2-frame GRPO ran, the reward on frame 1, val/frame_consistency %s" % cons)

    # 5. a bad reward is named before any worker starts
    rc, out = run(work, cl1, grpo_args("bad", "flow/final", "scorer/final",
                                       ["reward.reward_model=hps"]), expect_ok=False)
    assert rc != 0 and "override reward.reward_model=hps" in out and "unknown reward 'hps'" in out, out
    assert "ready" not in out
    rc, out = run(work, cl1, grpo_args("bad", "flow/final", "scorer/final",
                                       ["algorithm.constraint.reward=on_prompt"]), expect_ok=False)
    assert rc != 0 and "override algorithm.constraint.reward=on_prompt" in out and \
        "on_prompt is not a term of reward.reward_model 'prompt_match'" in out, out
    rc, out = run(work, cl1, grpo_args("bad", "flow/final", "scorer/final,,scorer/final", []),
                  expect_ok=False)
    assert rc != 0 and "reward.scorer_path" in out and "an empty path in the list" in out, out
    rc, out = run(work, cl1, grpo_args("bad", "flow/final", "scorer/final",
                                       ["reward.judge_path=flow/final"]), expect_ok=False)
    assert rc != 0 and "reward.judge_path" in out and "not an image classifier" in out, out
    rc, out = run(work, cl1, grpo_args("bad", "flow/final", "scorer/final",
                                       ["algorithm.constraint.init=-2"]), expect_ok=False)
    assert rc != 0 and "algorithm.constraint.init" in out and "got -2" in out, out
    rc, out = run(work, cl1, grpo_args("bad", "flow/final", "scorer/final",
                                       ["algorithm.adv_estimator=gae"]), expect_ok=False)
    assert rc != 0 and "override algorithm.adv_estimator=gae: algorithm.adv_estimator: estimator 'gae' " \
        "is not available to the diffusion track (it has: grpo)" in out, out
    assert "ready" not in out

    # 6. the remote scorer through the reward role
    py = os.environ.get("PYTHON", "/usr/bin/python3")
    probe = subprocess.run([py, "-c", "import zmq, numpy"], capture_output=True)
    if probe.returncode != 0:
        print("remote scorer part skipped: python3-zmq / python3-numpy missing")
        return 0
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    ep = "tcp://127.0.0.1:%d" % port
    srv = subprocess.Popen([py, os.path.join(ROOT, "deploy", "scorer_server.py"), "--backend",
                            "classifier", "--model-dir", os.path.join(work, "scorer", "final"),
                            "--bind", ep], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        time.sleep(0.5)
        remote = ["reward.reward_model=remote,prompt_match:0", "reward.remote.endpoint=" + ep,
                  "reward.remote.timeout_ms=3000", "reward.remote.retries=2",
                  "trainer.total_steps=2", "trainer.val_every=2", "rollout.online.test=false"]
        run(work, cl1, grpo_args("rem", "flow/final", "scorer/final", remote))
        mr = metrics(os.path.join(work, "rem", "metrics.jsonl"))
        for r in mr[1:]:
            assert abs(r["reward/remote"] - r["reward/prompt_match"]) < 1e-5, r
        assert abs(mr[-1]["val/remote"] - mr[-1]["val/prompt_match"]) < 1e-5, mr[-1]
        print("remote: the server's scores equal the in-process ones")
    finally:
        srv.send_signal(signal.SIGKILL)
        srv.wait()
    rc, out = run(work, cl1, grpo_args("rem2", "flow/final", "scorer/final",
                                       [a.replace("timeout_ms=3000", "timeout_ms=300") for a in remote]),
                  expect_ok=False)
    assert rc != 0 and "no reply within 300 ms after 3 attempts" in out, out[-2000:]
    print("remote: a dead scorer fails the step with the timeout message")
    return 0


if __name__ == "__main__":
    sys.exit(main())
