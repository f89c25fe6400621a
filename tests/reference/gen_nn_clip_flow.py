"""gen_nn_clip_flow.py — float64 PyTorch reference of the clip_flow model kind
(common/nn/models/clip_flow.h), written from the header's formulas, independently of
the C code: the velocity network, the gradients of a linear loss over the
velocity, and the per-step SDE log-probs of a recorded chain (REFERENCES.md,
Flow-GRPO) with the gradients of a linear loss over them.
Parameters and inputs are float32 values (stored F32), outputs float64.
Both parametrisations: prediction "velocity" (the output is v) and "x0" (the
output is x̂0 and v = (x − x̂0)/max(σ, 0.05)).
Output: tests/golden/nn_clip_flow/small_{velocity,x0}.safetensors
"""
import math
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(__file__))
from golden import write_golden  # noqa: E402

torch.manual_seed(13004)
f64 = torch.float64

FRAMES, CH, H, W = 2, 1, 4, 5
D = FRAMES * CH * H * W
HD, L, E, P = 16, 2, 8, 3


def f32(t):
    return t.float().double()


def manifest():
    names = [("in.weight", (HD, D)), ("in.bias", (HD,)), ("time.weight", (HD, E)),
             ("time.bias", (HD,)), ("prompt.embedding", (P, HD))]
    for l in range(L):
        names += [(f"blocks.{l}.fc1.weight", (HD, HD)), (f"blocks.{l}.fc1.bias", (HD,)),
                  (f"blocks.{l}.fc2.weight", (HD, HD)), (f"blocks.{l}.fc2.bias", (HD,))]
    names += [("out.weight", (D, HD)), ("out.bias", (D,))]
    return names


def make_params():
    ps = {}
    for name, shape in manifest():
        scale = 1.0 if "embedding" in name else (0.3 if len(shape) == 1 else 1 / math.sqrt(shape[1]))
        ps[name] = f32(torch.randn(*shape) * scale).requires_grad_(True)
    return ps


SIGMA_MIN = 0.05
PRED = "velocity"


def velocity(ps, x, sig, ids):
    half = E // 2
    i = torch.arange(half, dtype=f64)
    f = torch.exp(-math.log(10000.0) * i / half)
    arg = 1000.0 * sig[:, None] * f[None, :]
    temb = torch.cat([torch.sin(arg), torch.cos(arg)], dim=1)
    lin = lambda name, z: z @ ps[name + ".weight"].T + ps[name + ".bias"]
    c = lin("time", temb) + ps["prompt.embedding"][ids]
    h = lin("in", x) + c
    silu = torch.nn.functional.silu
    for l in range(L):
        a = lin(f"blocks.{l}.fc1", silu(h)) + c
        h = h + lin(f"blocks.{l}.fc2", silu(a))
    o = lin("out", silu(h))
    if PRED == "x0":
        return (x - o) / torch.clamp(sig, min=SIGMA_MIN)[:, None]
    return o


def sde_logp(x, v, xn, sig, sn, nl):
    dt = sn - sig
    std_t = nl * math.sqrt(sig / (1 - (sn if sig == 1 else sig)))
    mean = x * (1 + std_t ** 2 / (2 * sig) * dt) + v * (1 + std_t ** 2 * (1 - sig) / (2 * sig)) * dt
    s = std_t * math.sqrt(-dt)
    lp = -((xn - mean) ** 2) / (2 * s ** 2) - math.log(s) - math.log(math.sqrt(2 * math.pi))
    return lp.mean()


def grads(ps):
    return {"grad." + k: p.grad.detach().clone() for k, p in ps.items()}


def main():
    global PRED
    for PRED in ("velocity", "x0"):
        torch.manual_seed(13004)
        one()


def one():
    ps = make_params()
    out = {}
    # --- flow matching: velocity of 5 rows, loss = Σ coef·v
    B = 5
    x = f32(torch.randn(B, D))
    sig = f32(torch.rand(B))
    sig[0] = 1.0
    sig[1] = 0.0
    sig[2] = 0.03  # below σ_min: the x0 division uses 0.05
    ids = torch.tensor([0, 2, 1, 2, 0])
    v = velocity(ps, x, sig, ids)
    coef = f32(torch.randn(B, D))
    (v * coef).sum().backward()
    out.update({"fm.x": x.float(), "fm.sigma": sig.float(), "fm.ids": ids.int(),
                "fm.velocity": v.detach(), "fm.coef": coef.float()})
    out.update({"fm." + k: g for k, g in grads(ps).items()})
    for p in ps.values():
        p.grad = None
    # --- an SDE chain: 3 rows, N = 4 steps, shifted grid, a step mask
    B, N, nl = 3, 4, 0.7
    t = torch.linspace(1, 0, N + 1, dtype=f64)
    grid = f32(3.0 * t / (1 + 2.0 * t))
    lat = f32(torch.randn(B, N + 1, D))
    ids = torch.tensor([1, 0, 2])
    mask = torch.tensor([[1, 1, 0, 1], [0, 1, 1, 1], [1, 0, 0, 0]], dtype=f64)
    coef = f32(torch.randn(B, N))
    logp = torch.zeros(B, N, dtype=f64)
    total = 0
    for b in range(B):
        for k in range(N):
            if not mask[b, k]:
                continue
            vk = velocity(ps, lat[b, k][None], grid[k][None], ids[b][None])[0]
            lp = sde_logp(lat[b, k], vk, lat[b, k + 1], grid[k].item(), grid[k + 1].item(), nl)
            logp[b, k] = lp.detach()
            total = total + coef[b, k] * lp
    total.backward()
    out.update({"sde.latents": lat.float(), "sde.sigmas": grid.float(), "sde.ids": ids.int(),
                "sde.mask": mask.float(), "sde.coef": coef.float(), "sde.logp": logp})
    out.update({"sde." + k: g for k, g in grads(ps).items()})
    flat = torch.cat([ps[n].detach().reshape(-1) for n, _ in manifest()])
    out["params"] = flat.float()
    write_golden("tests/golden/nn_clip_flow/small_%s.safetensors" % PRED, out,
                 meta={"prediction": PRED, "frames": FRAMES, "channels": CH, "height": H, "width": W, "hidden": HD,
                       "layers": L, "time_dim": E, "prompts": P, "noise_level": nl,
                       "param_names": ",".join(n for n, _ in manifest())})


if __name__ == "__main__":
    main()
