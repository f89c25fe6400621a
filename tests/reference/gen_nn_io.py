"""gen_nn_io.py — reference data for the optimiser, safetensors and HF config
tests (tests/unit/test_nn_optim.c, test_nn_safetensors.c).

Writes
  tests/golden/nn_io/adamw.safetensors      torch.optim.AdamW + clip_grad_norm_
                                            + LR schedules, 10 steps per case
  tests/golden/nn_io/st_python.safetensors  written by the `safetensors` package
                                            (bf16, f16, f32, f64, i64, i32, u8,
                                            bool, scalar, empty tensors)
  tests/golden/nn_io/st_python_expected.safetensors   the same values as f64/i64
  tests/golden/nn_io/st_from_c.safetensors  written by librlrt (via ctypes) and
                                            checked here with `safetensors`
  tests/golden/nn_hf/{config.json, model.safetensors}  tiny Qwen2 from
                                            `transformers` (2 layers, hidden 64,
                                            4 heads, 2 kv heads, vocab 97)
  tests/golden/nn_hf/logits.safetensors     input_ids, attention_mask, logits
  tests/golden/nn_hf/param_stats.safetensors per-tensor sum and first values
  tests/golden/nn_hf/llama_config.json      a LlamaConfig from `transformers`

torch / numpy come from /usr/bin/python3 (Debian). `safetensors` and
`transformers` (4.37.2: the first with Qwen2, still fine with torch 1.13) come
from the reference venv, $RL_REF_PYTHON or else <repo>/build/venv-ref made by
`make venv-ref` (tests/reference/requirements-ref.txt); when run by another
interpreter this script re-executes itself there. Without them only
adamw.safetensors is regenerated and the committed files are kept.
"""
import ctypes
import math
import os
import sys

VENV_PY = os.environ.get("RL_REF_PYTHON") or os.path.join(
    os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
    "build", "venv-ref", "bin", "python")
try:
    import safetensors  # noqa: F401
    import transformers  # noqa: F401
    HAVE_HF = True
except ImportError:
    if os.path.exists(VENV_PY) and not os.environ.get("RL_GEN_NO_REEXEC"):
        os.environ["RL_GEN_NO_REEXEC"] = "1"
        os.execv(VENV_PY, [VENV_PY] + sys.argv)
    HAVE_HF = False

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(__file__))
from golden import ROOT, write_golden  # noqa: E402

OUT = os.path.join(ROOT, "tests", "golden", "nn_io")
OUT_HF = os.path.join(ROOT, "tests", "golden", "nn_hf")

# ---------------------------------------------------------------------------
# AdamW trajectories
# ---------------------------------------------------------------------------
SHAPES = [("w1", (4, 3)), ("b1", (3,)), ("w2", (2, 5))]  # b1: no weight decay
STEPS = 10


def lr_lambda(kind, warmup, total, min_ratio):
    """Schedules from transformers where they exist; cosine with a floor is
    the one formula written here (min + (1-min) * HF cosine)."""
    from transformers import optimization as O
    if kind == "constant":
        return (lambda s: O._get_constant_schedule_with_warmup_lr_lambda(s, num_warmup_steps=warmup)) \
            if warmup else (lambda s: 1.0)
    if kind == "linear" and min_ratio == 0.0:
        return lambda s: O._get_linear_schedule_with_warmup_lr_lambda(
            s, num_warmup_steps=warmup, num_training_steps=total)
    if kind == "linear":
        return lambda s: O._get_polynomial_decay_schedule_with_warmup_lr_lambda(
            s, num_warmup_steps=warmup, num_training_steps=total, lr_end=min_ratio,
            power=1.0, lr_init=1.0)
    if kind == "cosine" and min_ratio == 0.0:
        return lambda s: O._get_cosine_schedule_with_warmup_lr_lambda(
            s, num_warmup_steps=warmup, num_training_steps=total, num_cycles=0.5)

    def cos_min(s):
        if s < warmup:
            return s / max(1, warmup)
        p = min(1.0, (s - warmup) / max(1, total - warmup))
        return min_ratio + (1 - min_ratio) * 0.5 * (1 + math.cos(math.pi * p))
    return cos_min


def lr_lambda_fallback(kind, warmup, total, min_ratio):
    def f(s):
        if s < warmup:
            return s / max(1, warmup)
        if kind == "constant":
            return 1.0
        p = min(1.0, (s - warmup) / max(1, total - warmup))
        d = 0.5 * (1 + math.cos(math.pi * p)) if kind == "cosine" else 1 - p
        return min_ratio + (1 - min_ratio) * d
    return f


CASES = [
    # name, kind, base_lr, warmup, total, min_ratio, wd, max_norm, betas, eps, grad_scale
    ("const", "constant", 1e-2, 0, 0, 0.0, 0.1, 0.0, (0.9, 0.999), 1e-8, 1.0),
    ("const_warmup", "constant", 3e-3, 3, 0, 0.0, 0.01, 0.0, (0.9, 0.95), 1e-6, 1.0),
    ("cosine_clip", "cosine", 5e-2, 3, 10, 0.0, 0.05, 1.0, (0.9, 0.999), 1e-8, 3.0),
    ("cosine_min", "cosine", 2e-2, 2, 8, 0.1, 0.1, 2.0, (0.8, 0.99), 1e-8, 1.0),
    ("linear_clip", "linear", 1e-2, 2, 10, 0.0, 0.2, 0.5, (0.9, 0.999), 1e-8, 2.0),
    ("linear_min", "linear", 1e-2, 0, 6, 0.25, 0.0, 0.0, (0.9, 0.999), 1e-8, 1.0),
]


def gen_adamw():
    out = {}
    meta = {"cases": ",".join(c[0] for c in CASES), "steps": STEPS,
            "shapes": ";".join(f"{n}:{'x'.join(map(str, s))}" for n, s in SHAPES),
            "schedules": "transformers" if HAVE_HF else "formula"}
    for (name, kind, base, warmup, total, min_ratio, wd, max_norm, betas, eps, gscale) in CASES:
        g = torch.Generator().manual_seed(sum(map(ord, name)))
        params = [torch.nn.Parameter(torch.randn(s, generator=g, dtype=torch.float32))
                  for _, s in SHAPES]
        init = torch.cat([p.detach().flatten() for p in params]).clone()
        groups = [{"params": [params[0], params[2]], "weight_decay": wd},
                  {"params": [params[1]], "weight_decay": 0.0}]
        opt = torch.optim.AdamW(groups, lr=base, betas=betas, eps=eps)
        lam = (lr_lambda if HAVE_HF else lr_lambda_fallback)(kind, warmup, total, min_ratio)
        sched = torch.optim.lr_scheduler.LambdaLR(opt, lam)
        grads, lrs, norms, traj = [], [], [], []
        for _ in range(STEPS):
            gr = [torch.randn(s, generator=g, dtype=torch.float32) * gscale for _, s in SHAPES]
            grads.append(torch.cat([x.flatten() for x in gr]))
            for p, x in zip(params, gr):
                p.grad = x.clone()
            if max_norm > 0:
                n = torch.nn.utils.clip_grad_norm_(params, max_norm)
            else:
                n = torch.norm(torch.stack([torch.norm(p.grad) for p in params]))
            norms.append(float(n))
            lrs.append(opt.param_groups[0]["lr"])
            opt.step()
            sched.step()
            traj.append(torch.cat([p.detach().flatten() for p in params]).clone())
        m = torch.cat([opt.state[p]["exp_avg"].flatten() for p in params])
        v = torch.cat([opt.state[p]["exp_avg_sq"].flatten() for p in params])
        out[f"{name}.init"] = init
        out[f"{name}.grads"] = torch.stack(grads)
        out[f"{name}.lr"] = torch.tensor(lrs, dtype=torch.float64)
        out[f"{name}.norm"] = torch.tensor(norms, dtype=torch.float64)
        out[f"{name}.params"] = torch.stack(traj)
        out[f"{name}.exp_avg"] = m
        out[f"{name}.exp_avg_sq"] = v
        out[f"{name}.hparams"] = torch.tensor(
            [base, warmup, total, min_ratio, wd, max_norm, betas[0], betas[1], eps,
             ["constant", "cosine", "linear"].index(kind)], dtype=torch.float64)
    write_golden(os.path.join(OUT, "adamw.safetensors"), out, meta=meta)


# ---------------------------------------------------------------------------
# safetensors interoperability
# ---------------------------------------------------------------------------
def gen_safetensors():
    from safetensors import safe_open
    from safetensors.torch import save_file
    g = torch.Generator().manual_seed(7)
    t = {
        "a.f32": torch.randn(3, 4, generator=g),
        "b.bf16": (torch.randn(5, generator=g) * 100).to(torch.bfloat16),
        "c.f16": (torch.randn(2, 3, generator=g) * 10).to(torch.float16),
        "d.f64": torch.randn(2, generator=g, dtype=torch.float64),
        "e.i64": torch.tensor([-3, 0, 2 ** 40], dtype=torch.int64),
        "f.i32": torch.tensor([[1, -2], [3, 2 ** 30]], dtype=torch.int32),
        "g.u8": torch.tensor([0, 1, 200, 255], dtype=torch.uint8),
        "h.bool": torch.tensor([True, False, True]),
        "scalar": torch.tensor(2.5),
        "empty": torch.zeros(0, 3),
        "model.layers.0.bf16": (torch.randn(4, 6, generator=g)).to(torch.bfloat16),
    }
    # special values survive the conversions
    t["b.bf16"][0] = float("inf")
    t["c.f16"][0, 0] = -0.0
    t["c.f16"][1, 2] = 6.0e-8  # f16 subnormal
    save_file(t, os.path.join(OUT, "st_python.safetensors"),
              metadata={"format": "pt", "note": "written by safetensors " + safetensors.__version__})
    exp = {}
    for k, x in t.items():
        if x.dtype in (torch.int64, torch.int32, torch.uint8, torch.bool):
            exp[k] = x.to(torch.int64)
        else:
            exp[k] = x.to(torch.float64)
    write_golden(os.path.join(OUT, "st_python_expected.safetensors"), exp)
    # sanity: the library reads back what it wrote
    with safe_open(os.path.join(OUT, "st_python.safetensors"), framework="pt") as f:
        assert sorted(f.keys()) == sorted(t)


def librlrt():
    p = os.path.join(ROOT, "build", "lib", "librlrt.so")  # not a sanitizer build
    return ctypes.CDLL(p) if os.path.exists(p) else None


def c_written_params():
    """The manifest + values the C test writes too (see test_nn_safetensors.c:
    test_write_matches_golden): views w (2,3) = i*0.25-0.5, norm (3,) = 1+i/8,
    big (4,) = [1e30, -1e-30, 65504, 3.14159]."""
    return [("w", (2, 3), [i * 0.25 - 0.5 for i in range(6)]),
            ("norm", (3,), [1 + i / 8 for i in range(3)]),
            ("big", (4,), [1e30, -1e-30, 65504.0, 3.14159])]


def gen_c_roundtrip():
    """librlrt writes a file (f32 and bf16); the safetensors package must read
    it with the same values. The f32 file is committed: the C test writes the
    same thing and compares bytes."""
    from safetensors.torch import load_file
    lib = librlrt()
    if lib is None:
        print("gen_nn_io: build/lib/librlrt.so missing: C->Python check skipped "
              "(run `make lib` first)")
        return
    lib.rl_param_manifest_new.restype = ctypes.c_void_p
    lib.rl_param_buffer_new.restype = ctypes.c_void_p
    lib.rl_param_manifest_add.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int,
                                          ctypes.POINTER(ctypes.c_int64)]
    lib.rl_safetensors_write_params.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.c_void_p,
                                                ctypes.c_int, ctypes.c_void_p]
    lib.rl_error_message.restype = ctypes.c_char_p
    views = c_written_params()
    m = lib.rl_param_manifest_new()
    flat = []
    for name, shape, vals in views:
        sh = (ctypes.c_int64 * len(shape))(*shape)
        assert lib.rl_param_manifest_add(ctypes.c_void_p(m), name.encode(), len(shape), sh) >= 0
        flat += vals
    buf = (ctypes.c_float * len(flat))(*flat)
    for dt, code, fname in (("f32", 1, "st_from_c.safetensors"), ("bf16", 4, None)):
        path = os.path.join(OUT, fname) if fname else os.path.join(OUT, "tmp_from_c_bf16.safetensors")
        rc = lib.rl_safetensors_write_params(path.encode(), ctypes.c_void_p(m), buf, code, None)
        assert rc == 0, lib.rl_error_message()
        got = load_file(path)
        want_dtype = torch.float32 if dt == "f32" else torch.bfloat16
        for name, shape, vals in views:
            ref = torch.tensor(vals, dtype=torch.float32).reshape(shape).to(want_dtype)
            assert got[name].dtype == want_dtype and tuple(got[name].shape) == shape, name
            assert torch.equal(got[name], ref), (dt, name, got[name], ref)
        if not fname:
            os.remove(path)
    lib.rl_param_manifest_free(ctypes.c_void_p(m))
    print("gen_nn_io: safetensors read the files librlrt wrote (f32, bf16): values equal")


# ---------------------------------------------------------------------------
# tiny Hugging Face Qwen2 checkpoint
# ---------------------------------------------------------------------------
def gen_hf():
    from transformers import LlamaConfig, Qwen2Config, Qwen2ForCausalLM
    torch.manual_seed(1234)
    cfg = Qwen2Config(vocab_size=97, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
                      rope_theta=10000.0, rms_norm_eps=1e-6, tie_word_embeddings=False,
                      bos_token_id=1, eos_token_id=[2, 3], pad_token_id=0,
                      torch_dtype="float32")
    model = Qwen2ForCausalLM(cfg).eval()
    # the default init leaves biases/norms at 0/1: perturb them so the test
    # catches a loader that ignores them
    with torch.no_grad():
        for n, p in model.named_parameters():
            if n.endswith("bias") or "norm" in n:
                p.add_(torch.randn_like(p) * 0.1)
    model.save_pretrained(OUT_HF, safe_serialization=True)
    for extra in ("generation_config.json",):
        p = os.path.join(OUT_HF, extra)
        if os.path.exists(p):
            os.remove(p)
    ids = torch.tensor([[1, 5, 17, 42, 96, 3, 8], [1, 60, 61, 62, 2, 0, 0]], dtype=torch.int64)
    mask = torch.tensor([[1] * 7, [1, 1, 1, 1, 1, 0, 0]], dtype=torch.int64)
    with torch.no_grad():
        logits = model(input_ids=ids, attention_mask=mask).logits
    write_golden(os.path.join(OUT_HF, "logits.safetensors"),
                 {"input_ids": ids, "attention_mask": mask, "logits": logits.float()},
                 meta={"transformers": transformers.__version__, "torch": torch.__version__,
                       "model": "Qwen2ForCausalLM", "note": "logits at padded positions are "
                       "whatever HF computes there; compare only where attention_mask is 1"})
    stats = {}
    for n, p in model.state_dict().items():
        flat = p.detach().double().flatten()
        stats[n + ".sum"] = flat.sum()
        stats[n + ".head"] = flat[:4].clone()
        stats[n + ".shape"] = torch.tensor(list(p.shape), dtype=torch.int64)
    write_golden(os.path.join(OUT_HF, "param_stats.safetensors"), stats)
    LlamaConfig(vocab_size=1000, hidden_size=128, intermediate_size=344, num_hidden_layers=3,
                num_attention_heads=8, num_key_value_heads=4, max_position_embeddings=512,
                rope_theta=500000.0, rms_norm_eps=1e-5, tie_word_embeddings=True,
                bos_token_id=128000, eos_token_id=128001,
                attention_bias=False).to_json_file(os.path.join(OUT_HF, "llama_config.json"))
    # librlrt's config.json writer must be readable by transformers
    lib = librlrt()
    if lib is not None and hasattr(lib, "rl_lm_config_to_hf_json"):
        class Cfg(ctypes.Structure):
            _fields_ = [(n, ctypes.c_int) for n in (
                "vocab_size", "hidden_size", "intermediate_size", "num_layers", "num_heads",
                "num_kv_heads", "max_seq_len")] + [("rope_theta", ctypes.c_float),
                                                   ("rms_norm_eps", ctypes.c_float)] + \
                [(n, ctypes.c_int) for n in ("tie_word_embeddings", "qkv_bias", "value_head",
                                             "bos_token_id", "eos_token_id", "pad_token_id")]
        import tempfile
        from transformers import AutoConfig
        for qkv in (1, 0):
            c = Cfg(97, 64, 128, 2, 4, 2, 128, 10000.0, 1e-6, 0, qkv, 0, 1, 2, -1)
            with tempfile.TemporaryDirectory() as d:
                rc = lib.rl_lm_config_to_hf_json(ctypes.byref(c),
                                                 os.path.join(d, "config.json").encode())
                assert rc == 0
                a = AutoConfig.from_pretrained(d)
                assert a.model_type == ("qwen2" if qkv else "llama"), a.model_type
                assert (a.hidden_size, a.num_hidden_layers, a.num_key_value_heads,
                        a.vocab_size, a.pad_token_id) == (64, 2, 2, 97, None)
                assert abs(a.rms_norm_eps - 1e-6) < 1e-12
        print("gen_nn_io: transformers read the config.json files librlrt wrote")


def main():
    os.makedirs(OUT, exist_ok=True)
    gen_adamw()
    if not HAVE_HF:
        print("gen_nn_io: safetensors/transformers not importable (see the docstring): kept the "
              "committed st_python*, st_from_c and nn_hf files; regenerated adamw only")
        return
    os.makedirs(OUT_HF, exist_ok=True)
    gen_safetensors()
    gen_c_roundtrip()
    gen_hf()


if __name__ == "__main__":
    main()
