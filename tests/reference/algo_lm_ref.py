"""algo_lm_ref.py — float64 PyTorch reference of the language-model RL
estimators, written from seed 003 and REFERENCES.md ("Language-model
estimators"), independently of the C code. Used by gen_algo_lm.py.

Every function takes and returns torch float64 tensors; masks are 0/1 float.
"""
import math

import torch

D = torch.float64


def masked_whiten(x, m):
    n = m.sum()
    mean = (x * m).sum() / n
    var = (((x - mean) ** 2) * m).sum() / n
    if n > 1:
        var = var * n / (n - 1)
    else:
        var = torch.zeros((), dtype=D)
    return (x - mean) * torch.rsqrt(var + 1e-8) * m


def gae(rewards, values, m, gamma, lam, whiten):
    B, T = rewards.shape
    nextv = torch.zeros(B, dtype=D)
    last = torch.zeros(B, dtype=D)
    out = [None] * T
    for t in reversed(range(T)):
        delta = rewards[:, t] + gamma * nextv - values[:, t]
        l_new = delta + gamma * lam * last
        nextv = values[:, t] * m[:, t] + (1 - m[:, t]) * nextv
        last = l_new * m[:, t] + (1 - m[:, t]) * last
        out[t] = last
    adv = torch.stack(out, dim=1)
    ret = (adv + values) * m
    adv = masked_whiten(adv, m) if whiten else adv * m
    return adv, ret


def _groups(group):
    ids = {}
    for b, g in enumerate(group.tolist()):
        ids.setdefault(g, []).append(b)
    return ids


def grpo(token_rewards, m, group, eps, norm_by_std):
    s = token_rewards.sum(-1)
    a = torch.zeros_like(s)
    for rows in _groups(group).values():
        x = s[rows]
        if len(rows) == 1:
            mean, std = torch.tensor(0.0, dtype=D), torch.tensor(1.0, dtype=D)
        else:
            mean, std = x.mean(), x.std(unbiased=True)
        a[rows] = (x - mean) / (std + eps) if norm_by_std else x - mean
    return a[:, None] * m, a


def rloo(token_rewards, m, group):
    s = token_rewards.sum(-1)
    a = s.clone()
    for rows in _groups(group).values():
        n = len(rows)
        if n > 1:
            x = s[rows]
            a[rows] = x - (x.sum() - x) / (n - 1)
    return a[:, None] * m


def opo(token_rewards, m, group):
    """OPO (arXiv 2505.23585): baseline sum(len*s)/sum(len) over a group of
    two or more rows, 0 for a single row."""
    s = token_rewards.sum(-1)
    length = m.sum(-1)
    a = s.clone()
    for rows in _groups(group).values():
        if len(rows) > 1 and length[rows].sum() > 0:
            a[rows] = s[rows] - (length[rows] * s[rows]).sum() / length[rows].sum()
    return a[:, None] * m


def reinforce_pp(token_rewards, m, gamma):
    B, T = token_rewards.shape
    ret = torch.zeros_like(token_rewards)
    run = torch.zeros(B, dtype=D)
    for t in reversed(range(T)):
        run = token_rewards[:, t] + gamma * run
        ret[:, t] = run
        run = run * m[:, t]
    return masked_whiten(ret, m), ret * m


def reinforce_pp_baseline(token_rewards, m, group):
    s = token_rewards.sum(-1)
    a = s.clone()
    for rows in _groups(group).values():
        if len(rows) > 1:
            a[rows] = s[rows] - s[rows].mean()
    return masked_whiten(a[:, None] * m, m)


def token_rewards_kl(scores, kl, m, kl_coef):
    """OpenRLHF compute_reward: r at the last valid token, −coef·kl on all."""
    B, T = m.shape
    coef = kl_coef if kl_coef > 0 else 0.0
    out = -coef * kl * m if kl is not None else torch.zeros_like(m)
    for b in range(B):
        valid = torch.nonzero(m[b]).flatten()
        if len(valid):
            out[b, valid[-1]] += scores[b]
    return out


def cumulative_returns(rewards, m, gamma):
    rewards = rewards * m
    B, T = rewards.shape
    out = torch.zeros_like(rewards)
    run = torch.zeros(B, dtype=D)
    for t in reversed(range(T)):
        run = rewards[:, t] + gamma * run
        out[:, t] = run
    return out * m


# group status codes (same numbering as the C enum)
NORMALIZED, UNIFORM, SAME_SIGN, SMALL_SUM, NONFINITE, CLAMPED = range(6)


def pro_max(rewards, kl, m, index, n, kl_coef, uniform_scale, eps=1e-8,
            max_scale=10.0, cap=1e8):
    """Seed 003. Rows arrive in any order; index gives the original position."""
    B, T = m.shape
    assert sorted(index.tolist()) == list(range(B))
    inv = torch.argsort(index)  # inv[k] = row holding original index k
    r = rewards[inv].view(-1, n)
    mm = m[inv]
    kk = kl[inv] if kl is not None else None
    G = B // n
    shaped = torch.zeros_like(r)
    uniform = [False] * G
    for g in range(G):
        x = r[g]
        if uniform_scale and x.std(unbiased=True) < 1e-8:
            uniform[g] = True
            shaped[g] = x / n
        else:
            shaped[g] = x - (x.sum() - x) / (n - 1)
    tr = token_rewards_kl(shaped.flatten(), kk, mm, kl_coef)
    A = cumulative_returns(tr, mm, 1.0)
    status = []
    for g in range(G):
        if uniform[g]:
            status.append(UNIFORM)
            continue
        rows = slice(g * n, g * n + n)
        a = A[rows]
        valid = mm[rows] != 0
        vals = a[valid]
        P, N = vals[vals > 0], vals[vals < 0]
        if len(P) == 0 or len(N) == 0:
            status.append(SAME_SIGN)
            continue
        Sp, Sn = P.sum().item(), N.sum().item()
        if abs(Sp) < eps or abs(Sn) < eps:
            status.append(SMALL_SUM)
            continue
        Qp, Qn = (P ** 2).sum().item(), (N ** 2).sum().item()
        ratio = Sp / Sn
        alpha = math.sqrt((len(P) + len(N)) / (Qp + min(ratio * ratio * Qn, cap) + eps))
        beta = -alpha * ratio
        if not (math.isfinite(alpha) and math.isfinite(beta)):
            status.append(NONFINITE)
            continue
        st = NORMALIZED
        ca = min(max(alpha, eps), max_scale)
        cb = min(max(beta, eps), max_scale)
        if ca != alpha or cb != beta:
            st = CLAMPED
        status.append(st)
        A[rows] = torch.where(a > 0, ca * a, torch.where(a < 0, cb * a, a))
    A = A * mm
    out = torch.zeros_like(A)
    out[inv] = A
    return out, torch.tensor(status, dtype=torch.uint8)


def kl_estimator(logp, ref, kind, clamp):
    lr = logp - ref
    if kind == 0:
        v = lr
    elif kind == 1:
        v = lr.abs()
    elif kind == 2:
        v = 0.5 * lr ** 2
    else:
        k = torch.clamp(ref - logp, -20, 20)
        v = torch.clamp(torch.exp(k) - k - 1, -10, 10)
    if clamp > 0:
        v = torch.clamp(v, -clamp, clamp)
    return v


def aggregate(L, m, mode, norm):
    """verl's agg_loss (verl/trainer/ppo/core_algos.py) with dp_size = 1:
    norm > 0 is its batch_num_tokens (token-mean), global_batch_size
    (seq-mean modes) or loss_scale_factor (seq-mean-token-sum-norm); rows
    without a valid token are excluded from the sequence means."""
    if mode == 0:
        n = norm if norm > 0 else m.sum()
        return (L * m).sum() / n if n > 0 else (L * m).sum() * 0
    row = (L * m).sum(-1)
    rm = m.sum(-1)
    if mode in (1, 2):
        if mode == 2:
            row = row / (rm + 1e-8)
        seq_mask = (rm > 0).to(D)
        n = norm if norm > 0 else seq_mask.sum()
        return (row * seq_mask).sum() / n if n > 0 else (row * seq_mask).sum() * 0
    return row.sum() / (norm if norm > 0 else L.shape[1])


def ppo_loss(logp, old, adv, m, ent, ref, cfg):
    """cfg: dict with clip_low, clip_high, c, agg, norm, ent_coef, kl_coef,
    kl_kind, kl_clamp. Returns dict of outputs (grads by autograd)."""
    logp = logp.clone().requires_grad_(True)
    ent = ent.clone().requires_grad_(True)
    nk = torch.clamp(logp - old, -20, 20)
    ratio = torch.exp(nk)
    L1 = -adv * ratio
    L2 = -adv * torch.clamp(ratio, 1 - cfg["clip_low"], 1 + cfg["clip_high"])
    Lc = torch.maximum(L1, L2)
    clip = (L2 > L1).to(D)
    if cfg["c"] > 0:
        L3 = -adv * cfg["c"]
        Ld = torch.minimum(L3, Lc)
        L = torch.where(adv < 0, Ld, Lc)
        lower = ((Lc > L3) & (adv < 0)).to(D)
    else:
        L = Lc
        lower = torch.zeros_like(L)
    mode, norm = cfg["agg"], cfg["norm"]
    pg = aggregate(L, m, mode, norm)
    e = aggregate(ent, m, mode, norm)
    kl = aggregate(kl_estimator(logp, ref, cfg["kl_kind"], cfg["kl_clamp"]), m, mode, norm)
    loss = pg - cfg["ent_coef"] * e + cfg["kl_coef"] * kl
    loss.backward()
    n = m.sum()
    mmean = (lambda x: (x * m).sum() / n if n > 0 else torch.zeros((), dtype=D))
    return {
        "loss": loss.detach(), "pg": pg.detach(), "ent": e.detach(), "kl": kl.detach(),
        "clipfrac": mmean(clip), "ppo_kl": mmean(-nk.detach()),
        "lower": mmean(lower), "grad_logp": logp.grad, "grad_ent": ent.grad,
    }


def kl_ctl_adaptive(init, target, horizon, kls, steps):
    v = init
    out = []
    for cur, n in zip(kls, steps):
        err = min(max(cur / target - 1.0, -0.2), 0.2)
        v *= 1 + err * n / horizon
        out.append(v)
    return out


def filter_groups(metric, group, low, high):
    keep = torch.zeros(len(metric), dtype=torch.uint8)
    for rows in _groups(group).values():
        mu = metric[rows].mean().item()
        if low < mu < high:
            keep[rows] = 1
    return keep


def entropy_from_logits(z):
    """H = logsumexp(z) − Σ softmax(z)·z per row."""
    p = torch.softmax(z, dim=-1)
    return torch.logsumexp(z, dim=-1) - (p * z).sum(-1)


def value_loss(vpred, values, returns, m, cliprange, mode, norm):
    vpred = vpred.clone().requires_grad_(True)
    if cliprange > 0:
        vclip = torch.clamp(vpred, values - cliprange, values + cliprange)
    else:
        vclip = vpred
    l1 = (vpred - returns) ** 2
    l2 = (vclip - returns) ** 2
    L = 0.5 * aggregate(torch.maximum(l1, l2), m, mode, norm)
    L.backward()
    n = m.sum()
    frac = ((l2 > l1).to(D) * m).sum() / n
    return L.detach(), frac.detach(), vpred.grad
