"""gen_nn_lm.py — independent PyTorch (float64) reference for the rlrt
language-model policy (common/nn/models/lm/transformer.c).

A from-scratch Llama/Qwen2 decoder written from the Hugging Face modeling
semantics (RMSNorm, rotate_half RoPE, repeat_kv GQA, SwiGLU MLP, optional
q/k/v bias, tied or untied lm_head, optional value head), run on a
right-padded batch. For each config it writes:
  params        (P) f32: the flat parameter buffer in manifest order
  grad.<name>   f32: dL/d<name> for every parameter (HF names)
  tokens (B,T) i64, attn_mask (B,T) u8 (padded slots hold junk tokens)
  coef_logp, coef_ent, value_target (B,T) f64: per-token loss coefficients
  logits (B,T,V), logp, entropy, values (B,T) f64, loss, nll scalars
with L = Σ_valid coef_logp·logp + coef_ent·entropy + ½(values − value_target)²
over valid = (t ≥ 1 and attn_mask[b,t] = 1), logp/entropy/values aligned as in
common/nn/models/lm/transformer.h (entry t is about token t, from position t−1).

Run: /usr/bin/python3 tests/reference/gen_nn_lm.py   (or `make golden`)
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(__file__))
from golden import write_golden  # noqa: E402

torch.set_default_dtype(torch.float64)


def param_specs(cfg):
    d, V, I = cfg["hidden"], cfg["vocab"], cfg["inter"]
    hd = d // cfg["heads"]
    qd, kvd = cfg["heads"] * hd, cfg["kv_heads"] * hd
    specs = [("model.embed_tokens.weight", (V, d))]
    for l in range(cfg["layers"]):
        p = f"model.layers.{l}."
        specs.append((p + "input_layernorm.weight", (d,)))
        specs.append((p + "self_attn.q_proj.weight", (qd, d)))
        if cfg["qkv_bias"]:
            specs.append((p + "self_attn.q_proj.bias", (qd,)))
        specs.append((p + "self_attn.k_proj.weight", (kvd, d)))
        if cfg["qkv_bias"]:
            specs.append((p + "self_attn.k_proj.bias", (kvd,)))
        specs.append((p + "self_attn.v_proj.weight", (kvd, d)))
        if cfg["qkv_bias"]:
            specs.append((p + "self_attn.v_proj.bias", (kvd,)))
        specs.append((p + "self_attn.o_proj.weight", (d, qd)))
        specs.append((p + "post_attention_layernorm.weight", (d,)))
        specs.append((p + "mlp.gate_proj.weight", (I, d)))
        specs.append((p + "mlp.up_proj.weight", (I, d)))
        specs.append((p + "mlp.down_proj.weight", (d, I)))
    specs.append(("model.norm.weight", (d,)))
    if not cfg["tied"]:
        specs.append(("lm_head.weight", (V, d)))
    if cfg["value_head"]:
        specs.append(("value_head.weight", (1, d)))
        specs.append(("value_head.bias", (1,)))
    return specs


def rms_norm(x, w, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat([-x[..., h:], x[..., :h]], dim=-1)


def apply_rope(x, theta):
    # x (B, T, H, hd); position = column index
    T, hd = x.shape[1], x.shape[-1]
    inv = 1.0 / (theta ** (torch.arange(0, hd, 2, dtype=torch.float64) / hd))
    freqs = torch.arange(T, dtype=torch.float64)[:, None] * inv[None, :]
    emb = torch.cat([freqs, freqs], dim=-1)
    cos, sin = emb.cos()[None, :, None, :], emb.sin()[None, :, None, :]
    return x * cos + rotate_half(x) * sin


def model_forward(cfg, P, tokens, mask):
    B, T = tokens.shape
    d, H, KH = cfg["hidden"], cfg["heads"], cfg["kv_heads"]
    hd, eps = d // H, cfg["eps"]
    x = P["model.embed_tokens.weight"][tokens]
    causal = torch.tril(torch.ones(T, T, dtype=torch.bool))
    allowed = causal[None, None] & mask.bool()[:, None, None, :]  # (B,1,T,T)
    for l in range(cfg["layers"]):
        p = f"model.layers.{l}."
        h = rms_norm(x, P[p + "input_layernorm.weight"], eps)

        def proj(name):
            y = h @ P[p + f"self_attn.{name}.weight"].T
            if cfg["qkv_bias"]:
                y = y + P[p + f"self_attn.{name}.bias"]
            return y

        q = apply_rope(proj("q_proj").view(B, T, H, hd), cfg["theta"])
        k = apply_rope(proj("k_proj").view(B, T, KH, hd), cfg["theta"])
        v = proj("v_proj").view(B, T, KH, hd)
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
        k = k.repeat_interleave(H // KH, dim=1)
        v = v.repeat_interleave(H // KH, dim=1)
        s = (q @ k.transpose(-1, -2)) / (hd ** 0.5)
        s = s.masked_fill(~allowed, float("-inf"))
        a = torch.softmax(s, dim=-1) @ v  # (B,H,T,hd)
        a = a.transpose(1, 2).reshape(B, T, H * hd)
        x = x + a @ P[p + "self_attn.o_proj.weight"].T
        h = rms_norm(x, P[p + "post_attention_layernorm.weight"], eps)
        g = h @ P[p + "mlp.gate_proj.weight"].T
        u = h @ P[p + "mlp.up_proj.weight"].T
        x = x + (torch.nn.functional.silu(g) * u) @ P[p + "mlp.down_proj.weight"].T
    h = rms_norm(x, P["model.norm.weight"], eps)
    head = P["model.embed_tokens.weight"] if cfg["tied"] else P["lm_head.weight"]
    logits = h @ head.T
    values = None
    if cfg["value_head"]:
        values = (h @ P["value_head.weight"].T + P["value_head.bias"])[..., 0]
    return logits, values


def make_case(name, cfg, seed):
    g = torch.Generator().manual_seed(seed)
    specs = param_specs(cfg)
    P = {}
    flat = []
    for n, shape in specs:
        if n.endswith("norm.weight"):
            t = 1.0 + 0.1 * torch.randn(shape, generator=g)
        elif n.endswith("bias"):
            t = 0.1 * torch.randn(shape, generator=g)
        else:
            t = cfg["std"] * torch.randn(shape, generator=g)
        t = t.float().double()  # exactly representable in the C float32 buffer
        P[n] = t.clone().requires_grad_(True)
        flat.append(t.reshape(-1))
    flat = torch.cat(flat).float()

    B, T, V = cfg["batch"], cfg["seq"], cfg["vocab"]
    tokens = torch.randint(0, V, (B, T), generator=g)
    mask = torch.zeros(B, T, dtype=torch.uint8)
    for b, n in enumerate(cfg["lens"]):
        mask[b, :n] = 1
    coef_logp = torch.randn(B, T, generator=g)
    coef_ent = 0.3 * torch.randn(B, T, generator=g)
    value_target = torch.randn(B, T, generator=g)

    logits, values_raw = model_forward(cfg, P, tokens, mask)
    a = logits / cfg["temperature"]
    lsm = torch.log_softmax(a, dim=-1)  # (B,T,V), row t predicts t+1
    ent_raw = -(lsm.exp() * lsm).sum(-1)
    lp_raw = lsm[:, :-1].gather(-1, tokens[:, 1:, None])[..., 0]
    zero = torch.zeros(B, 1)
    logp = torch.cat([zero, lp_raw], dim=1)
    entropy = torch.cat([zero, ent_raw[:, :-1]], dim=1)
    valid = mask.double().clone()
    valid[:, 0] = 0
    logp = logp * valid
    entropy = entropy * valid
    loss = (coef_logp * logp * valid).sum() + (coef_ent * entropy * valid).sum()
    out = {}
    if cfg["value_head"]:
        values = torch.cat([zero, values_raw[:, :-1]], dim=1) * valid
        loss = loss + (0.5 * (values - value_target) ** 2 * valid).sum()
        out["values"] = values
    loss.backward()
    nll = -(logp * valid).sum() / valid.sum()

    out.update({
        "params": flat,
        "tokens": tokens,
        "attn_mask": mask,
        "coef_logp": coef_logp,
        "coef_ent": coef_ent,
        "value_target": value_target,
        "logits": logits,
        "logp": logp,
        "entropy": entropy,
        "loss": loss,
        "nll": nll,
    })
    for n, _ in specs:
        out["grad." + n] = P[n].grad.float()
    meta = {k: v for k, v in cfg.items() if k != "lens"}
    meta["param_names"] = ",".join(n for n, _ in specs)
    write_golden(f"tests/golden/nn_lm/{name}.safetensors", out, meta=meta)


BASE = dict(vocab=97, hidden=64, inter=96, layers=2, heads=4, kv_heads=2, seq=16, batch=3,
            theta=10000.0, eps=1e-6, std=0.08, lens=[16, 11, 5])

if __name__ == "__main__":
    torch.manual_seed(0)
    make_case("qkvbias_tied", dict(BASE, qkv_bias=1, tied=1, value_head=0, temperature=1.0,
                                   theta=10000.0), seed=1)
    make_case("untied_value", dict(BASE, qkv_bias=0, tied=0, value_head=1, temperature=0.7,
                                   theta=500.0, lens=[9, 16, 2]), seed=2)
    print("wrote tests/golden/nn_lm/{qkvbias_tied,untied_value}.safetensors")
