#!/bin/bash
# bench_gpu.sh — `make bench-gpu`: rlrt's GPU engine against PyTorch on the
# same GPU in the same run (bench/bench_gpu_train.c, bench/bench_gpu_torch.py),
# the Qwen2.5-0.5B shape, random init. Prints `bench: <name> = <value>`:
#   gpu_train_tokens_per_s_vs_torch_fp32  rlrt fp32 ÷ torch fp32 (TF32 off both)
#   gpu_train_tokens_per_s_vs_torch_bf16  rlrt bf16 ÷ torch bf16 autocast (both bf16
#                                         GEMMs with fp32 accumulation, fp32 master weights)
#   gpu_train_tokens_per_s_vs_torch       rlrt's best (bf16 when it ran, else fp32) ÷
#                                         torch bf16 eager (the issue's target ≥ 1.0)
#   gpu_train_tokens_per_s_vs_torch_compile  the same over torch.compile's bf16
#   rlrt_gpu_train_flash_vs_cublas_bf16   (bench_gpu_train's row) the bf16 step with the default
#                                         attention (bf16 tensor-core kernels) ÷ with the cuBLAS
#                                         attention (RL_CUDA_ATTENTION=cublas); _vs_flash32_bf16
#                                         ÷ with the float32 fused kernels; with
#                                         rlrt_gpu_attention_flash_speedup, the pair alone
#   gpu_train_mfu                         rlrt's best model FLOP/s ÷ the bf16 dense peak
#                                         (989 TFLOP/s, H100/H200 SXM; target ≥ 0.40)
#   gpu_gen_tokens_per_s_vs_hf            rlrt's generation (KV cache and sampling on the
#                                         GPU; bf16 when run, else fp32) over HF generate
#   gpu_rl_step_vs_cpu                    the GRPO job's step on the CPU ÷ the same job with
#                                         its actor and rollout on the GPU (bench_gpu_rl.py;
#                                         RL_BENCH_GPU_RL=0: not run)
#   gpu_weight_sync_GBps_over_d2d         the 0.5B model's bf16 bytes (~0.99 GB) actor → rollout
#                                         over CUDA IPC (two processes, rlrt/runtime/channel_ipc.h)
#                                         ÷ cudaMemcpy device-to-device of the same bytes
#                                         (bench_gpu_weight_sync.c; target ≥ 0.8)
#   gpu_weight_sync_0p5b_s                that sync's median seconds (verl publishes 7B in 0.02 s
#                                         with its checkpoint engine on H20)
#   gpu_async_step_time_ratio, gpu_async_val_acc_delta, gpu_partial_s2_*,
#   gpu_e2e_arith_step_vs_cpu, gpu_e2e_diffusion_step_vs_cpu
#                                         the end-to-end GPU jobs (bench_gpu_e2e.py, its
#                                         own section bench-gpu-e2e; RL_BENCH_GPU_E2E=0: not run)
# and rewrites its own section of RL_BENCH_GPU_OUT (default docs/RESULTS.md),
# between <!-- bench-gpu:begin --> and <!-- bench-gpu:end -->, with the GPU,
# its driver and the date. On the GPU machine run it from the bundle:
#   BUILD=build-gpu PYTHON=python3 RL_BENCH_GPU_OUT=$OUT/RESULTS.md bench/bench_gpu.sh
# Sizes: the RL_BENCH_GPU_* variables of both programs (B, T, LAYERS, STEPS,
# GEN_PROMPTS, GEN_TOKENS, COMPILE; HIDDEN, INTERMEDIATE, VOCAB shrink the
# shape). RL_GPU_DRYRUN=1: a dry run on the host emulation (tests/gpu_dryrun.sh).
# Exits 77 without a GPU.
set -u
BUILD=${BUILD:-build}
PYTHON=${PYTHON:-python3}
# not OUT: the device tool exports OUT (its output folder)
res=${RL_BENCH_GPU_OUT:-docs/RESULTS.md}
PEAK_TFLOPS=${RL_BENCH_GPU_PEAK_TFLOPS:-989}
# the bundle's libraries (deploy/gpu-bundle.sh), absolute: the jobs run in their own folders
[ -f "$BUILD/bundle.tar.gz" ] && [ ! -d "$BUILD/lib" ] && tar -xzf "$BUILD/bundle.tar.gz" -C "$BUILD"
[ -d "$BUILD/lib" ] && export LD_LIBRARY_PATH="$(cd "$BUILD/lib" && pwd)${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
here=$(dirname "$0")
val() { echo "$1" | sed -n "s/^bench: $2 = //p" | head -1; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "" || b == "" || b + 0 == 0) print "n/a"; else printf "%.3f", a / b }'; }

# RL_GPU_DRYRUN=1 (tests/gpu_dryrun.sh): a dry run on the host emulation
# (make CUDA=emu) with tiny sizes, PyTorch on the CPU; its section says so
dry=${RL_GPU_DRYRUN:-0}
if [ "$dry" = 1 ] && [ "$(realpath -m "$res")" = "$(realpath -m "$here/../docs/RESULTS.md")" ]; then
    echo "bench_gpu: a dry run writes to a copy of docs/RESULTS.md, never the file itself: set RL_BENCH_GPU_OUT"; exit 2
fi
if nvidia-smi -L >/dev/null 2>&1; then
    gpu=$(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | head -1)
elif [ "$dry" = 1 ]; then
    gpu="host emulation (make CUDA=emu), no GPU"
else
    echo "bench_gpu: skipped: no NVIDIA GPU (nvidia-smi -L failed)"; exit 77
fi
echo "bench: gpu = $gpu"
ours=$("$BUILD/bench/bench_gpu_train" 2>&1); rc=$?
echo "$ours"
[ $rc = 0 ] || echo "bench_gpu: bench_gpu_train failed (exit $rc)"
# RL_BENCH_GPU_TORCH_PYTHON: the Python with torch and transformers, when not PYTHON
torch=$("${RL_BENCH_GPU_TORCH_PYTHON:-$PYTHON}" "$here/bench_gpu_torch.py" 2>&1); trc=$?
echo "$torch" | grep "^bench:"
[ $trc = 0 ] || { echo "bench_gpu: bench_gpu_torch.py failed (exit $trc):"; echo "$torch" | tail -5; }

o32=$(val "$ours" rlrt_gpu_train_tokens_per_s_fp32)
t32=$(val "$torch" torch_gpu_train_tokens_per_s_fp32)
t16=$(val "$torch" torch_gpu_train_tokens_per_s_bf16)
tc=$(val "$torch" torch_gpu_train_tokens_per_s_bf16_compile)
o16=$(val "$ours" rlrt_gpu_train_tokens_per_s_bf16)
tfl=$(val "$ours" rlrt_gpu_train_tflops_fp32); tfl16=$(val "$ours" rlrt_gpu_train_tflops_bf16)
best=$o32; bestp=fp32; btfl=$tfl
if [ -n "$o16" ]; then best=$o16; bestp=bf16; btfl=$tfl16; fi
r32=$(ratio "$o32" "$t32"); rb16=$(ratio "$o16" "$t16")
r16=$(ratio "$best" "$t16"); rc16=$(ratio "$best" "$tc")
mfu=$(ratio "$btfl" "$PEAK_TFLOPS")
echo "bench: gpu_train_tokens_per_s_vs_torch_fp32 = $r32"
echo "bench: gpu_train_tokens_per_s_vs_torch_bf16 = $rb16 (rlrt bf16 vs torch bf16 autocast)"
echo "bench: gpu_train_tokens_per_s_vs_torch = $r16 (rlrt $bestp vs torch bf16)"
echo "bench: gpu_train_tokens_per_s_vs_torch_compile = $rc16 (rlrt $bestp vs torch.compile bf16)"
echo "bench: gpu_train_mfu = $mfu (rlrt $bestp model FLOP/s over the ${PEAK_TFLOPS} TFLOP/s bf16 peak)"
g32=$(val "$ours" rlrt_gpu_gen_tokens_per_s_fp32); g16=$(val "$ours" rlrt_gpu_gen_tokens_per_s_bf16)
gbest=${g16:-$g32}; gp=$([ -n "$g16" ] && echo bf16 || echo fp32)
hfg=$(val "$torch" torch_gpu_gen_tokens_per_s)
rgen=$(ratio "$gbest" "$hfg")
echo "bench: gpu_gen_tokens_per_s_vs_hf = $rgen (rlrt $gp ${gbest:-failed} vs HF generate bf16 ${hfg:-failed} tokens/s)"
rlb=""; rrc=0
if [ "${RL_BENCH_GPU_RL:-1}" != 0 ]; then
    rlb=$(BUILD=$BUILD "$PYTHON" "$here/bench_gpu_rl.py" 2>&1); rrc=$?
    [ $rrc = 0 ] || { echo "bench_gpu: bench_gpu_rl.py failed (exit $rrc):"; echo "$rlb" | tail -15; }
    echo "$rlb" | grep "^bench:"
fi
rstep=$(val "$rlb" gpu_rl_step_vs_cpu)
wsync=$("$BUILD/bench/bench_gpu_weight_sync" 2>&1); wrc=$?
echo "$wsync" | grep "^bench:"
[ $wrc = 0 ] || { echo "bench_gpu: bench_gpu_weight_sync failed (exit $wrc):"; echo "$wsync" | tail -5; }
rlrow() { echo "$(val "$rlb" gpu_rl_${1}_s_cpu) / $(val "$rlb" gpu_rl_${1}_s_gpu)"; }

section=$(mktemp)
{
    echo "<!-- bench-gpu:begin -->"
    echo "## GPU engine against PyTorch (\`make bench-gpu\`, bench/bench_gpu.sh)$([ "$dry" = 1 ] && echo " — DRY RUN, not GPU figures")"
    echo
    [ "$dry" = 1 ] && echo "**Dry run** (\`RL_GPU_DRYRUN=1\`, tests/gpu_dryrun.sh): a check that the device run's scripts work end to end, with tiny sizes, on $gpu, PyTorch on $(val "$torch" torch_gpu_name): none of these figures is a GPU's." && echo
    echo "Produced by \`make bench-gpu\` on $(date -u +%Y-%m-%d): $gpu; torch $(val "$torch" torch_version)."
    echo "Model: $([ "${RL_BENCH_GPU_HIDDEN:-896}/${RL_BENCH_GPU_INTERMEDIATE:-4864}/${RL_BENCH_GPU_VOCAB:-151936}" = 896/4864/151936 ] && echo "the Qwen2.5-0.5B shape" || echo "Qwen2.5-0.5B's layout shrunk to hidden ${RL_BENCH_GPU_HIDDEN:-896}, intermediate ${RL_BENCH_GPU_INTERMEDIATE:-4864}, vocab ${RL_BENCH_GPU_VOCAB:-151936}"), ${RL_BENCH_GPU_LAYERS:-24} layers ($(val "$ours" rlrt_gpu_params) parameters, tied embeddings, random init); a step is forward, mean next-token NLL, backward and AdamW over ${RL_BENCH_GPU_B:-8} × ${RL_BENCH_GPU_T:-1024} tokens, ${RL_BENCH_GPU_STEPS:-5} steps timed after 2 warm-up steps. PyTorch: transformers' Qwen2ForCausalLM ($([ "${RL_BENCH_GPU_ATTN:-sdpa}" = sdpa ] && echo SDPA || echo "${RL_BENCH_GPU_ATTN}") attention) with $([ "$(val "$torch" torch_gpu_name)" = cpu ] && echo "AdamW (on the CPU)" || echo "fused AdamW")."
    echo
    echo "| measure | value |"
    echo "|---|---|"
    echo "| rlrt fp32 (TF32 off) tokens/s; step s | ${o32:-failed}; $(val "$ours" rlrt_gpu_train_step_s_fp32) |"
    echo "| rlrt bf16 (model.precision bf16) tokens/s; step s | ${o16:-not run}; $(val "$ours" rlrt_gpu_train_step_s_bf16) |"
    echo "| rlrt bf16 with the cuBLAS attention (RL_CUDA_ATTENTION=cublas) tokens/s; step s; the fused flash attention (the default) ÷ it | $(val "$ours" rlrt_gpu_train_tokens_per_s_bf16_cublas || true); $(val "$ours" rlrt_gpu_train_step_s_bf16_cublas); **$(val "$ours" rlrt_gpu_train_flash_vs_cublas_bf16 | cut -d' ' -f1)** |"
    echo "| rlrt bf16 with the float32 fused attention (RL_CUDA_ATTENTION=flash32) tokens/s; step s; the bf16 tensor-core attention (the default) ÷ it | $(val "$ours" rlrt_gpu_train_tokens_per_s_bf16_flash32 || true); $(val "$ours" rlrt_gpu_train_step_s_bf16_flash32); **$(val "$ours" rlrt_gpu_train_flash_vs_flash32_bf16 | cut -d' ' -f1)** |"
    echo "| rlrt bf16 step's longest kernel-table entries (one profiled step): default — flash32 — cuBLAS attention | $(val "$ours" rlrt_gpu_prof_bf16_top) — $(val "$ours" rlrt_gpu_prof_bf16_flash32_top) — $(val "$ours" rlrt_gpu_prof_bf16_cublas_top) |"
    echo "| attention alone (B × T, 14/2 heads, hd $(( ${RL_BENCH_GPU_HIDDEN:-896} / 14 )), forward + backward): cuBLAS ms; flash ms; speedup; largest difference | $(val "$ours" rlrt_gpu_attention_ms_cublas | cut -d' ' -f1); $(val "$ours" rlrt_gpu_attention_ms_flash); **$(val "$ours" rlrt_gpu_attention_flash_speedup | cut -d' ' -f1)**; $(val "$ours" rlrt_gpu_attention_flash_vs_cublas_maxdiff | cut -d' ' -f1) |"
    echo "| attention alone, the bf16 pair (tensor cores): ms; speedup over the float32 fused kernels; largest difference from them | $(val "$ours" rlrt_gpu_attention_ms_bf16 | cut -d' ' -f1); **$(val "$ours" rlrt_gpu_attention_bf16_speedup | cut -d' ' -f1)**; $(val "$ours" rlrt_gpu_attention_bf16_vs_flash_maxdiff | cut -d' ' -f1) |"
    echo "| torch fp32 (TF32 off) tokens/s; step s | ${t32:-failed}; $(val "$torch" torch_gpu_train_step_s_fp32) |"
    echo "| torch bf16 autocast tokens/s; torch.compile | ${t16:-failed}; ${tc:-not run} |"
    echo "| \`bench: gpu_train_tokens_per_s_vs_torch_fp32\` | **$r32** |"
    echo "| \`bench: gpu_train_tokens_per_s_vs_torch_bf16\` (rlrt bf16 / torch bf16 autocast) | **$rb16** |"
    echo "| \`bench: gpu_train_tokens_per_s_vs_torch\` (rlrt $bestp / torch bf16; target ≥ 1.0) | **$r16** (torch.compile: $rc16) |"
    echo "| \`bench: gpu_train_mfu\` (rlrt $bestp over ${PEAK_TFLOPS} TFLOP/s bf16; target ≥ 0.40) | **$mfu** ($btfl TFLOP/s) |"
    echo "| rlrt device memory at the end: params, grads, optim, activations, scratch; peak (GiB) | $(val "$ours" rlrt_gpu_mem_gib_params), $(val "$ours" rlrt_gpu_mem_gib_grads), $(val "$ours" rlrt_gpu_mem_gib_optim), $(val "$ours" rlrt_gpu_mem_gib_activations), $(val "$ours" rlrt_gpu_mem_gib_scratch); $(val "$ours" rlrt_gpu_mem_peak_gib) |"
    echo "| \`bench: gpu_gen_tokens_per_s_vs_hf\` (target ≥ 3; ${RL_BENCH_GPU_GEN_PROMPTS:-64} prompts × ${RL_BENCH_GPU_GEN_TOKENS:-256} sampled tokens) | **$rgen** (rlrt $gp ${gbest:-failed}, fp32 ${g32:-not run} tokens/s; HF generate bf16 ${hfg:-failed} tokens/s) |"
    if [ -n "$rstep" ]; then
        echo "| \`bench: gpu_rl_step_vs_cpu\` (arith GRPO, $(val "$rlb" gpu_rl_model); CPU step ÷ GPU step, $(nproc) cores) | **$(echo "$rstep" | cut -d' ' -f1)** |"
        echo "| that job's step, gen, old_log_prob, update_actor, sync_weights: CPU / GPU (s) | $(rlrow step); $(rlrow gen); $(rlrow old_log_prob); $(rlrow update_actor); $(rlrow sync_weights) |"
    else
        echo "| \`bench: gpu_rl_step_vs_cpu\` | $([ "${RL_BENCH_GPU_RL:-1}" = 0 ] && echo "not run (RL_BENCH_GPU_RL=0)" || { [ $rrc = 77 ] && echo "skipped: $(echo "$rlb" | tail -1)" || echo "failed (exit $rrc)"; }) |"
    fi
    echo "| \`bench: gpu_weight_sync_GBps_over_d2d\` (the 0.5B bf16 bytes, $(val "$wsync" gpu_weight_sync_bytes) B, actor → rollout over CUDA IPC ÷ cudaMemcpy device-to-device; target ≥ 0.8) | **$(val "$wsync" gpu_weight_sync_GBps_over_d2d)** ($(val "$wsync" gpu_weight_sync_GBps) GB/s against $(val "$wsync" gpu_weight_sync_d2d_GBps) GB/s) |"
    echo "| \`bench: gpu_weight_sync_0p5b_s\` (median of $(( ${RL_BENCH_IPC_VERSIONS:-6} - 1 )) syncs; verl: 7B in 0.02 s on H20, its checkpoint engine) | **$(val "$wsync" gpu_weight_sync_0p5b_s)** s (cudaMemcpy: $(val "$wsync" gpu_weight_sync_d2d_s) s; of the sync, the receiver's own copy: $(val "$wsync" gpu_weight_sync_recv_copy_s | cut -d" " -f1) s) |"
    echo "<!-- bench-gpu:end -->"
} >"$section"
if [ -f "$res" ] && grep -q "<!-- bench-gpu:begin -->" "$res"; then
    "$PYTHON" - "$res" "$section" <<'PY'
import sys
res, sec = sys.argv[1], open(sys.argv[2]).read()
text = open(res).read()
a = text.index("<!-- bench-gpu:begin -->")
b = text.index("<!-- bench-gpu:end -->") + len("<!-- bench-gpu:end -->")
open(res, "w").write(text[:a] + sec.rstrip("\n") + text[b:])
PY
else
    { [ -f "$res" ] && echo; cat "$section"; } >>"$res"
fi
rm -f "$section"
echo "bench_gpu: wrote the bench-gpu section of $res"
# the end-to-end GPU jobs (issue 40): their own section of $res
erc=0
if [ "${RL_BENCH_GPU_E2E:-1}" != 0 ]; then
    t0=$(date +%s)
    BUILD=$BUILD "$PYTHON" "$here/bench_gpu_e2e.py" --out "$res"; erc=$?
    echo "bench_gpu: bench_gpu_e2e.py: exit $erc, $(( $(date +%s) - t0 )) s"
fi
# bench_gpu_rl.py's skip (77: no rl-driver in BUILD) is not a failure
[ $rc = 0 ] && [ $trc = 0 ] && { [ $rrc = 0 ] || [ $rrc = 77 ]; } && [ $wrc = 0 ] && [ $erc = 0 ]
