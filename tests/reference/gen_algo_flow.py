"""gen_algo_flow.py — float64 PyTorch references for common/algo/flow/flow.h.

Written from seeds 000 (FlowSAR) and 001 (FlowIPO) and REFERENCES.md
("Flow policies"), independently of the C code. Inputs are drawn in float32
(stored as F32, exactly what the C test feeds in); every reference output is
computed in float64 and stored as F64. Gradients come from autograd.
Output: tests/golden/algo_flow/flow_*.safetensors
"""
import math
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(__file__))
from golden import write_golden  # noqa: E402

torch.manual_seed(20261122)
OUT = "tests/golden/algo_flow"
f64 = torch.float64


def rnd(*shape, scale=1.0):
    return (torch.randn(*shape) * scale).float()


# ---------------------------------------------------------------- FlowIPO
def ipo_weights(actions, ref, rewards, mask, alpha, eps):
    """actions (S,B,C,A); per-episode z-score of δ across kept steps."""
    S, B = actions.shape[:2]
    delta = (actions.to(f64) - ref.to(f64)).flatten(2).norm(dim=-1)  # (S,B)
    w = torch.zeros(S, B, dtype=f64)
    for b in range(B):
        keep = mask[:, b] != 0
        d = delta[keep, b]
        if d.numel() > 1:
            a = (2 * rewards[b].double() - 1) * (d - d.mean()) / (d.std() + eps)
        else:  # documented: one kept step -> A = 0
            a = torch.zeros_like(d)
        w[keep, b] = torch.sigmoid(alpha * a)
    kept = mask != 0
    return w, w[kept].mean(), delta[kept].mean()


def gen_ipo():
    S, B, C, A = 6, 5, 4, 3
    actions, ref = rnd(S, B, C, A), rnd(S, B, C, A)
    rewards = torch.tensor([1, 0, 1, 0, 1], dtype=torch.float32)
    mask = torch.ones(S, B)
    mask[4:, 1] = 0          # episode 1 ends after 4 steps
    mask[1:, 3] = 0          # episode 3: a single kept step
    w, wmean, dmean = ipo_weights(actions, ref, rewards, mask, 2.0, 1e-8)
    # unmasked run, fully vectorised (the seed's formula as written)
    delta = (actions.to(f64) - ref.to(f64)).flatten(2).norm(dim=-1)
    z = (delta - delta.mean(0)) / (delta.std(0) + 1e-8)
    w_full = torch.sigmoid(2.0 * (2 * rewards.double() - 1) * z)

    # loss: ṽ = w·u + (1 − w)·v_ref, masked MSE with an (N, C) mask
    N = 7
    u, vref, vt = rnd(N, C, A), rnd(N, C, A), rnd(N, C, A)
    wl = torch.rand(N).float()
    lmask = (torch.rand(N, C) > 0.3).float()
    target = wl.double()[:, None, None] * u.double() + (1 - wl.double()[:, None, None]) * vref.double()
    v = vt.double().requires_grad_(True)
    m = lmask.double()[:, :, None].expand(N, C, A)
    mse = (v - target.float().double()).pow(2)
    loss = (mse * m).sum() / m.sum()
    loss.backward()
    write_golden(f"{OUT}/flow_ipo.safetensors", {
        "actions": actions, "ref_actions": ref, "rewards": rewards, "step_mask": mask,
        "w": w, "w_mean": wmean, "delta_mean": dmean, "w_full": w_full,
        "u": u, "v_ref": vref, "w_loss": wl, "v_theta": vt, "loss_mask": lmask,
        "target": target, "loss": loss.detach(), "grad_v": v.grad,
        "velocity_mse": mse.detach().mean(),
    }, meta={"alpha": 2.0, "eps": 1e-8, "S": S, "B": B, "C": C, "A": A, "N": N})


# ---------------------------------------------------------------- FlowSAR
def sar_weights(e, rewards, mask, T, wmin, wmax):
    S, B = e.shape
    w = torch.zeros(S, B, dtype=f64)
    for b in range(B):
        keep = mask[:, b] != 0
        if keep.sum() == 0:
            continue
        sign = 1.0 if rewards[b] >= 0.5 else -1.0
        wb = torch.softmax(sign * e[keep, b].double() / T, dim=0)
        if wmin > 0 or wmax < 1:
            wb = wb.clamp(wmin, wmax)
            wb = wb / wb.sum()
        w[keep, b] = wb
    return w, 2 * rewards.double() - 1


def sar_loss(vt, vo, u, w, y, t, mask, beta, energy, variant, lam, mean_red):
    v = vt.double().requires_grad_(True)
    vo, u, w, y, t, m = vo.double(), u.double(), w.double(), y.double(), t.double(), mask.double()
    D = v[0].numel()
    red = (lambda x: x.flatten(1).mean(1)) if mean_red else (lambda x: x.flatten(1).sum(1))
    vp = (1 - beta) * vo + beta * v
    vn = (1 + beta) * vo - beta * v
    ep, en = red((vp - u) ** 2), red((vn - u) ** 2)
    if energy == "sde":
        ep, en = ep / (2 * t), en / (2 * t)
    R = (1 + y) / 2
    keep = m != 0
    if variant == "mse_branch":
        li = w * (R * ep + (1 - R) * en)
    else:
        con = w * torch.nn.functional.softplus(0.5 * y * (ep - en))
        kl = lam * red((v - vo) ** 2)
        li = con + kl
    loss = (li * m).sum() / m.sum()
    loss.backward()
    met = {
        "loss": loss.detach(), "e_pos": ep[keep].mean().detach(), "e_neg": en[keep].mean().detach(),
        "weight_mean": w[keep].mean(),
    }
    if variant == "mse_branch":
        met["success_ratio"] = R[keep].mean()
    else:
        met["contrastive"] = con[keep].mean().detach()
        met["kl_penalty"] = kl[keep].mean().detach()
    return v.grad, met


def gen_sar():
    S, B = 7, 5
    e = (torch.rand(S, B) * 2).float()
    rewards = torch.tensor([1, 0, 1, 1, 0], dtype=torch.float32)
    mask = torch.ones(S, B)
    mask[5:, 0] = 0
    mask[2:, 4] = 0
    w0, y = sar_weights(e, rewards, mask, 0.5, 0.0, 1.0)
    w1, _ = sar_weights(e, rewards, mask, 0.5, 0.05, 0.5)
    w2, _ = sar_weights(e, rewards, mask, 0.1, 0.1, 0.3)
    out = {"recon_errors": e, "rewards": rewards, "step_mask": mask,
           "w_plain": w0, "w_clip": w1, "w_clip_t01": w2, "labels": y}

    N, C, A = 9, 5, 3
    vt, vo, u = rnd(N, C, A), rnd(N, C, A), rnd(N, C, A)
    # v_old close to v_theta, as after a few steps
    vt = (vo + 0.3 * rnd(N, C, A)).float()
    w = torch.rand(N).float()
    y = torch.tensor([1, -1, 1, 1, -1, -1, 1, -1, 1], dtype=torch.float32)
    t = (0.2 + 0.6 * torch.rand(N)).float()
    t[3] = 1.0
    mask = torch.ones(N)
    mask[5] = 0
    out.update({"v_theta": vt, "v_old": vo, "u": u, "w": w, "y": y, "t": t, "mask": mask})
    for beta in (1.0, 0.7):
        for energy in ("mse", "sde"):
            for variant in ("mse_branch", "softplus_kl"):
                for mean_red in (0, 1):
                    tag = f"{variant}_{energy}_b{int(beta * 10)}_r{mean_red}"
                    g, met = sar_loss(vt, vo, u, w, y, t, mask, beta, energy, variant, 0.5, mean_red)
                    out[f"grad_{tag}"] = g
                    for k, v in met.items():
                        out[f"{k}_{tag}"] = v
    write_golden(f"{OUT}/flow_sar.safetensors", out,
                 meta={"S": S, "B": B, "N": N, "C": C, "A": A, "kl_coeff": 0.5})


# ---------------------------------------------------- EMA, interp, recon
def gen_misc():
    n = 37
    ref, cur = rnd(n), rnd(n)
    betas = [min(0.001 * i, 0.5) for i in (0, 1, 250, 499, 500, 501, 10000)]
    out = {"ref": ref, "cur": cur, "linear_betas": torch.tensor(betas, dtype=f64)}
    for k, bt in enumerate((0.995, 0.5, 0.0, 1.0)):
        out[f"ema_{k}"] = bt * ref.double() + (1 - bt) * cur.double()
    N, D = 6, 10
    a, eps = rnd(N, D), rnd(N, D)
    t = torch.rand(N).float()
    t[0], t[1] = 0.0, 1.0
    x_t = (1 - t.double()[:, None]) * a.double() + t.double()[:, None] * eps.double()
    u = eps.double() - a.double()
    v = rnd(N, D)
    tm = 0.5
    xm = ((1 - tm) * a.double() + tm * eps.double()).float()
    ahat = xm.double() - v.double() * tm
    e = ((a.double() - ahat) ** 2).sum(1)
    out.update({"a": a, "eps": eps, "t": t, "x_t": x_t, "u": u, "v": v, "x_mid": xm, "recon": e})
    write_golden(f"{OUT}/flow_misc.safetensors", out, meta={"N": N, "D": D, "t_mid": tm})


# ------------------------------------------------------- flow SDE / ODE step
def flow_step(method, xt, v, t, tn, nl, noise):
    """RLinf openpi step; returns mean, std (per-sample)."""
    t_, tn_ = t.double()[:, None, None], tn.double()[:, None, None]
    dt = t_ - tn_
    x0 = xt - v * t_
    x1 = xt + v * (1 - t_)
    if method == "sde":
        den = 1 - torch.where(t_ == 1, tn_, t_)
        sig = nl * torch.sqrt(t_ / den)
        mean = x0 * (1 - tn_) + x1 * (tn_ - sig ** 2 * dt / (2 * t_))
        std = torch.sqrt(dt) * sig
    else:
        mean = xt - dt * v
        std = nl * torch.sqrt(dt)
    return mean, std.expand_as(mean)


def logp_of(x, mean, std):
    lp = -torch.log(std) - 0.5 * math.log(2 * math.pi) - 0.5 * ((x - mean) / std) ** 2
    return lp.flatten(1).sum(1)


def gen_step():
    N, C, A, K = 5, 4, 2, 10
    grid = torch.linspace(1, 0, K + 1, dtype=f64)
    idx = torch.tensor([0, 3, 5, 8, 9])
    t, tn = grid[idx].float(), grid[idx + 1].float()
    xt, v, noise = rnd(N, C, A), rnd(N, C, A), rnd(N, C, A)
    gl = rnd(N)
    out = {"x_t": xt, "v": v, "noise": noise, "t": t, "t_next": tn, "grad_logp": gl}
    for method, nl in (("sde", 0.5), ("ode", 0.3)):
        vv = v.double()
        mean, std = flow_step(method, xt.double(), vv, t, tn, nl, noise)
        xn = (mean + std * noise.double()).float()
        out[f"{method}_x_next"] = xn
        out[f"{method}_logp_sample"] = logp_of(xn.double(), mean, std)
        # re-scoring with a different velocity, and its gradient
        v2 = (v + 0.1 * rnd(N, C, A)).float()
        vr = v2.double().requires_grad_(True)
        mean2, std2 = flow_step(method, xt.double(), vr, t, tn, nl, None)
        lp = logp_of(xn.double(), mean2, std2)
        (lp * gl.double()).sum().backward()
        out[f"{method}_v2"] = v2
        out[f"{method}_logp"] = lp.detach()
        out[f"{method}_grad_v"] = vr.grad
    write_golden(f"{OUT}/flow_step.safetensors", out,
                 meta={"N": N, "C": C, "A": A, "sde_noise_level": 0.5, "ode_noise_level": 0.3})


if __name__ == "__main__":
    gen_ipo()
    gen_sar()
    gen_misc()
    gen_step()
    print("gen_algo_flow: wrote", OUT)
