#!/bin/sh
# The default local job of `make run`: rlrt's first real training run.
#   1. supervised warm start on the built-in arithmetic task
#      (examples/arith_sft.yaml), only when runs/arith_sft/final is missing;
#   2. GRPO from it (examples/arith_grpo.yaml): the driver logs one line per
#      step and the validation accuracy every 25 steps (step 0 = warm start).
# Every role runs as an rl-worker daemon of examples/cluster-local.yaml.
# Metrics: runs/arith_grpo/metrics.jsonl and runs/arith_grpo/tensorboard/.
# `RL_RUN=selftest make run` runs the cluster selftest instead.
# `RL_RUN=diffusion make run` runs the diffusion track (seed 004): the learned
# prompt-match scorer, the FID's convolutional classifier and the clip
# generator's flow-matching pretraining when runs/fmnist_scorer/final,
# runs/fmnist_cnn/final or runs/fmnist_flow/final is missing, then GRPO
# with the prompt-match reward and the KL to the pretrained generator
# (examples/dance_grpo_scorer.yaml); it prints the validation reward, the CNN
# judge's on-prompt accuracy and the FID before and after and saves a
# before/after grid.
# `RL_RUN=libero make run` runs the embodied track (seeds 000/001): the
# LIBERO-Object scenes, expert demonstrations and the few-shot warm start of
# the flow policy when missing, then FlowSAR with the demonstration anchor
# (examples/libero_object_flowsar.yaml, runs/libero_object_flowsar/); it prints
# the evaluation success before and after, and GIFs of an episode per task
# before and after are in runs/libero_object_flowsar/gifs/.
set -e
BUILD=${BUILD:-build}
D="$BUILD/bin/rl-driver --cluster examples/cluster-local.yaml"
if [ "${RL_RUN:-}" = selftest ]; then
    exec $D --config examples/selftest.yaml "$@"
fi
if [ "${RL_RUN:-}" = diffusion ]; then
    DD="$BUILD/bin/rl-driver --cluster examples/cluster-diffusion.yaml"
    if [ ! -f runs/fmnist_scorer/final/model.safetensors ]; then
        echo "== the learned prompt-match scorer (runs/fmnist_scorer/final is missing)"
        $DD --config examples/fmnist_scorer.yaml
    fi
    if [ ! -f runs/fmnist_cnn/final/model.safetensors ]; then
        echo "== the FID's convolutional classifier (runs/fmnist_cnn/final is missing)"
        $DD --config examples/fmnist_cnn.yaml
    fi
    if [ ! -f runs/fmnist_flow/final/model.safetensors ]; then
        echo "== flow-matching pretraining of the clip generator (runs/fmnist_flow/final is missing)"
        $DD --config examples/fmnist_flow.yaml
    fi
    echo "== diffusion GRPO with the prompt-match reward (and the KL to the pretrained generator)"
    $DD --config examples/dance_grpo_scorer.yaml "$@"
    M=runs/dance_grpo_scorer/metrics.jsonl
    # the first and the last validation's value of a metric: "before after"
    v() { grep -o "\"$1\": [0-9.e+-]*" "$M" | sed -n '1p;$p' | awk '{printf "%s ", $2}'; }
    vsteps() { grep '"val/prompt_match"' "$M" | grep -o '"step": [0-9]*' | awk '{print $2}'; }
    show() { # label key
        set -- "$1" $(v "$2")
        printf '  %-62s %8.4f -> %8.4f\n' "$1" "$2" "$3"
    }
    echo "validation before (step $(vsteps | head -1)) and after (step $(vsteps | tail -1)):"
    show "prompt-match reward (the MLP scorer's p(prompt's class))" val/prompt_match
    show "CNN judge's on-prompt accuracy (no run trains against it)" val/cnn_on_prompt
    show "FID to the Fashion-MNIST test images (lower is better)" val/fid
    show "FID of real training images (the floor at this count)" val/fid_floor
    echo "before (top) / after (bottom), one ODE sample per prompt: runs/dance_grpo_scorer/before_after.png"
    exit 0
fi
# `RL_RUN=gpu make CUDA=1 run`: the same job with the actor and the rollout on
# GPU 0 (examples/cluster-gpu.yaml; the reward on the CPU cores; weights over
# CUDA IPC), from a warm start trained on the GPU (runs/arith_sft_gpu);
# `RL_RUN=gpu-async`: one step off (trainer.staleness=1 with TIS);
# `RL_RUN=gpu-diffusion`: diffusion GRPO of the clip generator (MLP trunk)
# with the JPEG compressibility reward from a random initialisation (no
# dataset, no scorer). Each prints the mean step time and its phases.
# `RL_RUN=gpu-libero`: libero_rl PPO (examples/libero_object_ppo.yaml) with
# the flow policy's actor and rollout ranks on GPU 0 and the env ranks on the
# CPU cores (examples/cluster-gpu-libero.yaml), from runs/libero_warmstart/final
# when there is one (`RL_RUN=libero make run` makes it), else from a random
# initialisation; the scenes from $BUILD/libero-data (the GPU bundle's
# physics-only tasks 0-1: no GIFs) or build/libero-data (all ten tasks).
case ${RL_RUN:-} in
gpu | gpu-async | gpu-diffusion | gpu-libero)
    nvidia-smi -L >/dev/null 2>&1 || { echo "RL_RUN=$RL_RUN: no NVIDIA GPU (nvidia-smi -L failed)"; exit 1; }
    # a bundle of `make CUDA=1 gpu-bundle` brings its libraries (deploy/gpu-bundle.sh)
    [ -f "$BUILD/bundle.tar.gz" ] && [ ! -d "$BUILD/lib" ] && tar -xzf "$BUILD/bundle.tar.gz" -C "$BUILD"
    [ -d "$BUILD/lib" ] && LD_LIBRARY_PATH="$(cd "$BUILD/lib" && pwd)${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" &&
        export LD_LIBRARY_PATH
    G="$BUILD/bin/rl-driver --cluster examples/cluster-gpu.yaml"
    if [ "$RL_RUN" = gpu-libero ]; then
        data=$BUILD/libero-data
        [ -f "$data/manifest.json" ] || data=build/libero-data
        [ -f "$data/manifest.json" ] || { echo "RL_RUN=gpu-libero: no LIBERO-Object scenes in $BUILD/libero-data or build/libero-data (make libero-data)"; exit 1; }
        more="env.data_dir=$data"
        # the bundle's subset has the physics-only scenes of a few tasks
        [ -f "$data/libero_object/task_09/scene_full.xml" ] ||
            more="$more env.task_ids=0-1 eval.gif_episodes_per_task=0"
        init=model.init_from=
        [ -f runs/libero_warmstart/final/model.safetensors ] && init=model.init_from=runs/libero_warmstart/final
        out=runs/libero_object_ppo_gpu
        echo "== libero_rl PPO, the flow policy on the GPU and the envs on the CPU cores ($out, $init)"
        # shellcheck disable=SC2086
        $BUILD/bin/rl-driver --cluster examples/cluster-gpu-libero.yaml --config examples/libero_object_ppo.yaml \
            $init actor.device=cuda rollout.device=cuda trainer.output_dir=$out $more "$@"
    elif [ "$RL_RUN" = gpu-diffusion ]; then
        out=runs/dance_grpo_jpeg_gpu
        $G --config examples/dance_grpo_jpeg.yaml model.init_from= data.fid_model= reward.scorer_path= \
            actor.device=cuda rollout.device=cuda trainer.output_dir=$out "$@"
    else
        if [ ! -f runs/arith_sft_gpu/final/model.safetensors ]; then
            echo "== supervised warm start on the GPU (runs/arith_sft_gpu/final is missing)"
            $G --config examples/arith_sft.yaml actor.device=cuda trainer.output_dir=runs/arith_sft_gpu
        fi
        out=runs/arith_grpo_gpu more=
        [ "$RL_RUN" = gpu-async ] && out=runs/arith_grpo_gpu_async more="trainer.staleness=1 algorithm.tis_imp_ratio_cap=2.0"
        echo "== GRPO on the GPU from the warm start ($out)"
        # shellcheck disable=SC2086
        $G --config examples/arith_grpo.yaml model.init_from=runs/arith_sft_gpu/final actor.device=cuda \
            rollout.device=cuda trainer.output_dir=$out $more "$@"
        grep -h '"val/accuracy"' $out/metrics.jsonl | sed -n '1p;$p' | \
            sed 's/.*"step": \([0-9]*\).*"val\/accuracy": \([0-9.e-]*\).*/validation accuracy at step \1: \2/'
    fi
    ${PYTHON:-python3} - "$out/metrics.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
ev = [r for r in rows if "eval/success_rate" in r]
for r in (ev[:1] + ev[-1:] if len(ev) > 1 else ev):
    print("evaluation success at step %d: %.3f" % (r["step"], r["eval/success_rate"]))
rows = [r for r in rows if r.get("step", 0) > 1 and "timing_s/step" in r]
ks = ["step", "gen", "reward", "old_log_prob", "update_actor", "sync_weights"]
if any("timing_s/rollout" in r for r in rows):  # libero_rl's phases
    ks = ["step", "rollout", "annotate", "credit", "update_actor", "sync_weights"]
if rows:
    print("mean over steps 2..%d (s): " % rows[-1]["step"] + ", ".join(
        "%s %.3f" % (k, sum(r.get("timing_s/" + k, 0.0) for r in rows) / len(rows)) for k in ks))
PY
    exit 0
    ;;
esac
if [ "${RL_RUN:-}" = libero ]; then
    LD="$BUILD/bin/rl-driver --cluster examples/cluster-libero.yaml"
    LT="$BUILD/bin/rl-driver --cluster examples/cluster-libero-rl.yaml"
    mkdir -p runs
    if [ ! -f "$BUILD/libero-data/manifest.json" ]; then
        echo "== the LIBERO-Object scenes ($BUILD/libero-data is missing)"
        make --no-print-directory libero-data
    fi
    if [ ! -f runs/libero_warmstart/final/model.safetensors ]; then
        if [ ! -f runs/libero_demos/demos.safetensors ]; then
            echo "== expert demonstrations (runs/libero_demos is missing)"
            $LD --config examples/libero_collect.yaml
        fi
        echo "== few-shot warm start of the flow policy (runs/libero_warmstart/final is missing)"
        # 100 evaluation episodes here (the example's 500 take minutes); the
        # RL job evaluates the warm start again at its step 0
        $LT --config examples/libero_warmstart.yaml eval.episodes=100
    fi
    echo "== FlowSAR from the warm start"
    $LT --config examples/libero_object_flowsar.yaml "$@"
    grep -h '"eval/success_rate"' runs/libero_object_flowsar/metrics.jsonl | sed -n '1p;$p' | \
        sed 's/.*"step": \([0-9]*\).*"eval\/success_rate": \([0-9.e-]*\).*/evaluation success at step \1: \2/'
    exit 0
fi
if [ ! -f runs/arith_sft/final/model.safetensors ]; then
    echo "== supervised warm start (runs/arith_sft/final is missing)"
    $D --config examples/arith_sft.yaml
fi
echo "== GRPO from the warm start"
$D --config examples/arith_grpo.yaml "$@"
grep -h '"val/accuracy"' runs/arith_grpo/metrics.jsonl | sed -n '1p;$p' | \
    sed 's/.*"step": \([0-9]*\).*"val\/accuracy": \([0-9.e-]*\).*/validation accuracy at step \1: \2/'
