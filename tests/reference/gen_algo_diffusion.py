"""gen_algo_diffusion.py — float64 PyTorch references for
common/algo/diffusion/diffusion.h, written from seed 004 (MMDanceGRPO) and REFERENCES.md
("Diffusion GRPO", Flow-GRPO conventions), independently of the C code.
Inputs are float32 (stored F32); outputs float64 (F64); gradients by autograd.
Output: tests/golden/algo_flow/diffusion.safetensors
"""
import math
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(__file__))
from golden import write_golden  # noqa: E402

torch.manual_seed(4004)
f64 = torch.float64


def rnd(*shape, scale=1.0):
    return (torch.randn(*shape) * scale).float()


def sigmas(n, shift):
    t = torch.linspace(1, 0, n + 1, dtype=f64)
    return shift * t / (1 + (shift - 1) * t)


def sde_mean_std(x, v, sig, sn, nl):
    sig_, sn_ = sig.double()[:, None], sn.double()[:, None]
    dt = sn_ - sig_
    std_t = nl * torch.sqrt(sig_ / (1 - torch.where(sig_ == 1, sn_, sig_)))
    mean = x * (1 + std_t ** 2 / (2 * sig_) * dt) + v * (1 + std_t ** 2 * (1 - sig_) / (2 * sig_)) * dt
    return mean, std_t * torch.sqrt(-dt)


def logp(xn, mean, s):
    lp = -((xn - mean) ** 2) / (2 * s ** 2) - torch.log(s) - math.log(math.sqrt(2 * math.pi))
    return lp.mean(dim=1)


def grpo_adv(r, group, n_groups, use_group, thr, eps=1e-8):
    r = r.double()
    adv = torch.zeros_like(r)
    if not use_group:
        return (r - r.mean()) / (r.std() + eps) if r.numel() > 1 else adv
    for g in range(n_groups):
        sel = group == g
        rg = r[sel]
        if rg.numel() < 2:   # documented: a group of one gets A = 0
            continue
        if rg.mean() < thr:
            continue
        adv[sel] = (rg - rg.mean()) / (rg.std() + eps)
    return adv


def grpo_loss(lp, old, adv, mask, clip, amax):
    x = lp.double().requires_grad_(True)
    a = adv.double().clamp(-amax, amax)
    ratio = torch.exp(x - old.double())
    un = -a * ratio
    cl = -a * torch.clamp(ratio, 1 - clip, 1 + clip)
    m = mask.double()
    per = torch.max(un, cl)
    loss = (per * m).sum() / m.sum()
    loss.backward()
    keep = m != 0
    clipfrac = (cl > un).double()[keep].mean()
    kl = (0.5 * (x.detach() - old.double()) ** 2)[keep].mean()
    return loss.detach(), x.grad, clipfrac, kl, ratio.detach()[keep].mean()


def main():
    out = {}
    N = 10
    out["sigmas_s1"] = sigmas(N, 1.0)
    out["sigmas_s3"] = sigmas(N, 3.0)
    sg = sigmas(N, 3.0).float()
    B, D = 4, 24
    idx = torch.tensor([0, 2, 6, 9])
    sig, sn = sg[idx], sg[idx + 1]
    x, v, noise = rnd(B, D), rnd(B, D), rnd(B, D)
    nl = 0.7
    mean, s = sde_mean_std(x.double(), v.double(), sig, sn, nl)
    xn = (mean + s * noise.double()).float()
    out.update({"x": x, "v": v, "noise": noise, "sigma": sig, "sigma_next": sn,
                "x_next": xn, "logp_sample": logp(xn.double(), mean, s)})
    v2 = (v + 0.05 * rnd(B, D)).float()
    gl = rnd(B)
    vr = v2.double().requires_grad_(True)
    mean2, s2 = sde_mean_std(x.double(), vr, sig, sn, nl)
    lp = logp(xn.double(), mean2, s2)
    (lp * gl.double()).sum().backward()
    out.update({"v2": v2, "grad_logp": gl, "logp": lp.detach(), "grad_v": vr.grad})

    # advantages: groups 0..2 of 3, group 3 of one row, group 4 below threshold
    r = torch.tensor([0.9, 0.5, 0.7, 2.0, 1.0, 3.0, 0.4, 0.2, 0.1, 0.3, 5.0], dtype=torch.float32)
    group = torch.tensor([0, 0, 0, 1, 1, 1, 2, 2, 2, 4, 3], dtype=torch.int64)
    out.update({"rewards": r, "group": group,
                "adv_group": grpo_adv(r, group, 5, True, -math.inf),
                "adv_group_thr": grpo_adv(r, group, 5, True, 0.5),
                "adv_global": grpo_adv(r, group, 5, False, 0.5)})

    # clipped loss
    n = 12
    old = rnd(n)
    lpn = (old + 0.3 * rnd(n)).float()
    adv = rnd(n, scale=4.0)
    adv[0], adv[1] = 12.0, -15.0
    mask = torch.ones(n)
    mask[4] = 0
    out.update({"old_logp": old, "new_logp": lpn, "adv": adv, "mask": mask})
    for tag, clip, amax in (("c02", 0.2, 10.0), ("c1em4", 1e-4, 5.0)):
        loss, g, cf, kl, rm = grpo_loss(lpn, old, adv, mask, clip, amax)
        out.update({f"loss_{tag}": loss, f"grad_{tag}": g, f"clipfrac_{tag}": cf,
                    f"kl_{tag}": kl, f"ratio_{tag}": rm})
    write_golden("tests/golden/algo_flow/diffusion.safetensors", out,
                 meta={"B": B, "D": D, "noise_level": nl, "n_steps": N})
    print("gen_algo_diffusion: wrote tests/golden/algo_flow/diffusion.safetensors")


if __name__ == "__main__":
    main()
