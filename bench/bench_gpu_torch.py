"""bench_gpu_torch.py — the PyTorch side of `make bench-gpu` (bench/bench_gpu.sh):
Hugging Face transformers' Qwen2ForCausalLM in the Qwen2.5-0.5B shape (hidden
896, 24 layers, 14 heads, 2 KV heads, intermediate 4864, vocab 151936, tied
embeddings, random init) on the GPU, with torch's AdamW, timed the way
bench/bench_gpu_train.c times rlrt on the same GPU in the same run.

Prints `bench: <name> = <value>` lines:
  torch_gpu_train_tokens_per_s_fp32        fp32, TF32 off (rlrt's parity mode)
  torch_gpu_train_tokens_per_s_bf16        bf16 autocast over fp32 master weights
  torch_gpu_train_tokens_per_s_bf16_compile   the same under torch.compile
  torch_gpu_gen_tokens_per_s               HF generate, KV cache, sampling
A step is forward, the mean token cross-entropy, backward and one AdamW step.
Sizes: RL_BENCH_GPU_B × RL_BENCH_GPU_T tokens (default 8 × 1024),
RL_BENCH_GPU_LAYERS (default 24), RL_BENCH_GPU_STEPS timed steps after two
warm-up steps (default 5); generation: RL_BENCH_GPU_GEN_PROMPTS prompts of 32
tokens × RL_BENCH_GPU_GEN_TOKENS new tokens (default 64 × 256), temperature 1,
top-p 1, no stop token (every row runs to the end). RL_BENCH_GPU_COMPILE=0
skips the compiled run (its compile takes a minute). RL_BENCH_GPU_HIDDEN,
_INTERMEDIATE, _VOCAB shrink the shape (as bench_gpu_train's: the dry run,
tests/gpu_dryrun.sh, which also sets RL_BENCH_GPU_TORCH_DEVICE=cpu and
RL_BENCH_GPU_ATTN=eager, Debian's torch 1.13 having no SDPA for transformers).

Runs with the GPU machine's python3 (torch and transformers there).
"""
import os
import sys
import time

import torch


def env_int(name, default):
    return int(os.environ.get(name, str(default)))


B = env_int("RL_BENCH_GPU_B", 8)
T = env_int("RL_BENCH_GPU_T", 1024)
LAYERS = env_int("RL_BENCH_GPU_LAYERS", 24)
STEPS = env_int("RL_BENCH_GPU_STEPS", 5)
GEN_P = env_int("RL_BENCH_GPU_GEN_PROMPTS", 64)
GEN_N = env_int("RL_BENCH_GPU_GEN_TOKENS", 256)
COMPILE = env_int("RL_BENCH_GPU_COMPILE", 1)
# the shape (Qwen2.5-0.5B's unless shrunk for a dry run, as bench_gpu_train.c's)
HIDDEN = env_int("RL_BENCH_GPU_HIDDEN", 896)
INTER = env_int("RL_BENCH_GPU_INTERMEDIATE", 4864)
VOCAB = env_int("RL_BENCH_GPU_VOCAB", 151936)
# cpu only for a smoke test of this script with tiny sizes on a machine
# without a GPU (RL_BENCH_GPU_TORCH_DEVICE: this script's alone, so that the
# dry run on the host emulation, tests/gpu_dryrun.sh, keeps bench_gpu_train on cuda)
DEV = os.environ.get("RL_BENCH_GPU_TORCH_DEVICE") or os.environ.get("RL_BENCH_GPU_DEVICE", "cuda")


def out(name, value):
    print(f"bench: {name} = {value}", flush=True)


def sync():
    if DEV == "cuda":
        torch.cuda.synchronize()


def model(dtype=torch.float32):
    from transformers import Qwen2Config, Qwen2ForCausalLM

    cfg = Qwen2Config(hidden_size=HIDDEN, num_hidden_layers=LAYERS, num_attention_heads=14,
                      num_key_value_heads=2, intermediate_size=INTER, vocab_size=VOCAB,
                      tie_word_embeddings=True, rope_theta=1e6, rms_norm_eps=1e-6,
                      max_position_embeddings=max(T, 32 + GEN_N), use_cache=True,
                      attn_implementation=os.environ.get("RL_BENCH_GPU_ATTN", "sdpa"))
    torch.manual_seed(0)
    return Qwen2ForCausalLM(cfg).to(device=DEV, dtype=dtype)


def train(m, autocast, steps):
    kw = {"fused": True} if DEV == "cuda" else {}
    opt = torch.optim.AdamW(m.parameters(), lr=1e-5, betas=(0.9, 0.999), eps=1e-8,
                            weight_decay=0.01, **kw)
    g = torch.Generator(device=DEV).manual_seed(1)
    ids = torch.randint(0, VOCAB, (B, T), device=DEV, generator=g)

    def step():
        with torch.autocast(DEV, dtype=torch.bfloat16, enabled=autocast):
            logits = m(input_ids=ids).logits
        loss = torch.nn.functional.cross_entropy(logits[:, :-1].float().reshape(-1, logits.shape[-1]),
                                                 ids[:, 1:].reshape(-1))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss

    for _ in range(2):
        step()
    sync()
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    sync()
    dt = time.perf_counter() - t0
    return B * T * steps / dt, dt / steps


def main():
    if DEV == "cuda" and not torch.cuda.is_available():
        print("bench_gpu_torch: no CUDA device", file=sys.stderr)
        return 77
    out("torch_gpu_name", torch.cuda.get_device_name(0).replace(" ", "_") if DEV == "cuda" else DEV)
    out("torch_version", torch.__version__)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    m = model()
    n = sum(p.numel() for p in m.parameters())
    out("torch_gpu_params", n)
    tps, s = train(m, False, STEPS)
    out("torch_gpu_train_tokens_per_s_fp32", f"{tps:.1f}")
    out("torch_gpu_train_step_s_fp32", f"{s:.4f}")
    torch.backends.cuda.matmul.allow_tf32 = True
    tps, s = train(m, True, STEPS)
    out("torch_gpu_train_tokens_per_s_bf16", f"{tps:.1f}")
    out("torch_gpu_train_step_s_bf16", f"{s:.4f}")
    if DEV == "cuda":
        out("torch_gpu_peak_mem_gib_train", f"{torch.cuda.max_memory_allocated() / 2**30:.2f}")
    if COMPILE:
        mc = torch.compile(m)
        t0 = time.perf_counter()
        tps, s = train(mc, True, STEPS)
        out("torch_gpu_train_tokens_per_s_bf16_compile", f"{tps:.1f}")
        out("torch_gpu_compile_and_run_s", f"{time.perf_counter() - t0:.1f}")
        del mc
    del m
    if DEV == "cuda":
        torch.cuda.empty_cache()
    # generation: bf16 weights, the KV cache, multinomial sampling
    m = model(torch.bfloat16).eval()
    g = torch.Generator(device=DEV).manual_seed(2)
    prompts = torch.randint(0, VOCAB, (GEN_P, 32), device=DEV, generator=g)
    kw = dict(max_new_tokens=GEN_N, min_new_tokens=GEN_N, do_sample=True, temperature=1.0, top_p=1.0,
              top_k=0, pad_token_id=0, eos_token_id=None)
    with torch.no_grad():
        m.generate(prompts[:, :8], max_new_tokens=8, do_sample=True, pad_token_id=0)
        sync()
        t0 = time.perf_counter()
        o = m.generate(prompts, **kw)
        sync()
        dt = time.perf_counter() - t0
    out("torch_gpu_gen_tokens_per_s", f"{(o.shape[1] - 32) * GEN_P / dt:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
