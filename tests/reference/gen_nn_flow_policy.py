"""gen_nn_flow_policy.py — float64 PyTorch reference of the flow_policy model
kind (common/nn/models/flow_policy.h), written from the header's formulas and
common/algo/flow/flow.h's SDE step, independently of the C code: the velocity and
value networks with the gradients of a linear loss over them, and the
per-step SDE log-probs of a recorded chain with the gradients of a linear
loss over them. Parameters and inputs are float32 values, outputs float64.
Output: tests/golden/nn_flow_policy/small.safetensors
"""
import math
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(__file__))
from golden import write_golden  # noqa: E402

torch.manual_seed(12001)
f64 = torch.float64
C, A = 2, 7
D = C * A
H, L, E, T = 16, 2, 8, 3
OBS = 39 + 98


def f32(t):
    return t.float().double()


def manifest():
    names = [("obs_norm.mean", (OBS,)), ("obs_norm.std", (OBS,)),
             ("obs_enc.0.weight", (H, OBS)), ("obs_enc.0.bias", (H,)),
             ("obs_enc.1.weight", (H, H)), ("obs_enc.1.bias", (H,)),
             ("task.embedding", (T, H)),
             ("in.weight", (H, D)), ("in.bias", (H,)), ("time.weight", (H, E)), ("time.bias", (H,))]
    for l in range(L):
        names += [(f"blocks.{l}.fc1.weight", (H, H)), (f"blocks.{l}.fc1.bias", (H,)),
                  (f"blocks.{l}.fc2.weight", (H, H)), (f"blocks.{l}.fc2.bias", (H,))]
    names += [("out.weight", (D, H)), ("out.bias", (D,)),
              ("value_head.weight", (1, H)), ("value_head.bias", (1,))]
    return names


def make_params():
    ps = {}
    for name, shape in manifest():
        if name == "obs_norm.mean":
            t = torch.randn(*shape) * 0.5
        elif name == "obs_norm.std":
            t = torch.rand(*shape) + 0.5
        else:
            scale = 1.0 if "embedding" in name else (0.3 if len(shape) == 1 else 1 / math.sqrt(shape[1]))
            t = torch.randn(*shape) * scale
        ps[name] = f32(t).requires_grad_(True)
    return ps


silu = torch.nn.functional.silu


def lin(ps, name, z):
    return z @ ps[name + ".weight"].T + ps[name + ".bias"]


def encode(ps, prop, obj):
    obs = (torch.cat([prop, obj], dim=1) - ps["obs_norm.mean"]) / ps["obs_norm.std"]
    return lin(ps, "obs_enc.1", silu(lin(ps, "obs_enc.0", obs)))


def velocity(ps, prop, obj, task, x, t):
    half = E // 2
    i = torch.arange(half, dtype=f64)
    f = torch.exp(-math.log(10000.0) * i / half)
    arg = 1000.0 * t[:, None] * f[None, :]
    temb = torch.cat([torch.sin(arg), torch.cos(arg)], dim=1)
    c = encode(ps, prop, obj) + ps["task.embedding"][task] + lin(ps, "time", temb)
    h = lin(ps, "in", x) + c
    for l in range(L):
        a = lin(ps, f"blocks.{l}.fc1", silu(h)) + c
        h = h + lin(ps, f"blocks.{l}.fc2", silu(a))
    return lin(ps, "out", silu(h))


def value(ps, prop, obj, task):
    return lin(ps, "value_head", silu(encode(ps, prop, obj) + ps["task.embedding"][task]))


def sde_logp(x, v, xn, t, tn, nl):
    d = t - tn
    x0 = x - v * t
    x1 = x + v * (1 - t)
    tp = tn if t == 1 else t
    sig = nl * math.sqrt(t / (1 - tp))
    mean = x0 * (1 - tn) + x1 * (tn - sig * sig * d / (2 * t))
    std = math.sqrt(d) * sig
    return (-math.log(std) - 0.5 * math.log(2 * math.pi) - 0.5 * ((xn - mean) / std) ** 2).sum()


def grads(ps):
    return {"grad." + k: (p.grad.detach().clone() if p.grad is not None else torch.zeros_like(p))
            for k, p in ps.items()}


def obs(B):
    return f32(torch.randn(B, 39)), f32(torch.randn(B, 98))


def main():
    ps = make_params()
    out = {}
    # --- flow matching + value: 5 rows, loss = Σ coef·v + Σ vcoef·value
    B = 5
    prop, obj = obs(B)
    task = torch.tensor([0, 2, 1, 2, 0])
    x = f32(torch.randn(B, D))
    t = f32(torch.rand(B))
    t[0] = 1.0
    t[1] = 0.0
    v = velocity(ps, prop, obj, task, x, t)
    val = value(ps, prop, obj, task)
    coef, vcoef = f32(torch.randn(B, D)), f32(torch.randn(B, 1))
    ((v * coef).sum() + (val * vcoef).sum()).backward()
    out.update({"fm.proprio": prop.float(), "fm.object": obj.float(), "fm.task": task,
                "fm.x": x.float(), "fm.t": t.float(), "fm.velocity": v.detach(),
                "fm.value": val.detach(), "fm.coef": coef.float(), "fm.vcoef": vcoef.float()})
    out.update({"fm." + k: g for k, g in grads(ps).items()})
    for p in ps.values():
        p.grad = None
    # --- an SDE chain: 3 rows, N = 4 steps on the uniform grid, a step mask
    B, N = 3, 4
    prop, obj = obs(B)
    grid = f32(torch.tensor([1.0 - k / N for k in range(N + 1)], dtype=f64))
    chain = f32(torch.randn(B, N + 1, D))
    task = torch.tensor([1, 0, 2])
    nl = f32(torch.tensor([0.5, 0.7, 1.0], dtype=f64))
    mask = torch.tensor([[1, 1, 0, 1], [0, 1, 1, 1], [1, 0, 0, 0]], dtype=f64)
    coef = f32(torch.randn(B, N))
    logp = torch.zeros(B, N, dtype=f64)
    total = 0
    for b in range(B):
        for k in range(N):
            if not mask[b, k]:
                continue
            vk = velocity(ps, prop[b][None], obj[b][None], task[b][None], chain[b, k][None], grid[k][None])[0]
            lp = sde_logp(chain[b, k], vk, chain[b, k + 1], grid[k].item(), grid[k + 1].item(), nl[b].item())
            logp[b, k] = lp.detach()
            total = total + coef[b, k] * lp
    total.backward()
    out.update({"sde.proprio": prop.float(), "sde.object": obj.float(), "sde.task": task,
                "sde.chain": chain.float(), "sde.times": grid.float().expand(B, N + 1).contiguous(),
                "sde.noise_level": nl.float(), "sde.mask": mask.float(), "sde.coef": coef.float(),
                "sde.logp": logp})
    out.update({"sde." + k: g for k, g in grads(ps).items()})
    flat = torch.cat([ps[n].detach().reshape(-1) for n, _ in manifest()])
    out["params"] = flat.float()
    write_golden("tests/golden/nn_flow_policy/small.safetensors", out,
                 meta={"chunks": C, "hidden": H, "layers": L, "time_dim": E, "tasks": T,
                       "param_names": ",".join(n for n, _ in manifest())})


if __name__ == "__main__":
    main()
