"""gen_algo_lm.py — golden files for the language-model RL algorithms
(tests/unit/test_algo_lm*.c). Inputs are drawn in float32 (what the C code
receives), the reference (algo_lm_ref.py) runs in float64 on those exact
values, outputs are stored as float64.

Run with /usr/bin/python3 (Debian torch): `make golden`.
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(__file__))
from golden import write_golden  # noqa: E402
import algo_lm_ref as R  # noqa: E402

D = torch.float64
OUT = "tests/golden/algo_lm"
g = torch.Generator().manual_seed(20260122)


def f32(x):
    return x.to(torch.float32)


def randn(*shape, scale=1.0):
    return f32(torch.randn(*shape, generator=g, dtype=D) * scale)


def mask_from_lengths(lengths, T, holes=()):
    m = torch.zeros(len(lengths), T, dtype=torch.float32)
    for b, n in enumerate(lengths):
        m[b, :n] = 1
    for b, t in holes:
        m[b, t] = 0
    return m


def d(x):
    return x.to(D)


def gen_advantages():
    t = {}
    # GAE: trailing padding, one hole, an all-masked row.
    B, T = 6, 9
    m = mask_from_lengths([9, 7, 4, 0, 8, 1], T, holes=[(0, 3), (4, 5)])
    rew, val = randn(B, T), randn(B, T)
    for whiten in (0, 1):
        adv, ret = R.gae(d(rew), d(val), d(m), 0.99, 0.95, whiten)
        t[f"gae.w{whiten}.adv"], t[f"gae.w{whiten}.ret"] = adv, ret
    t.update({"gae.rewards": rew, "gae.values": val, "gae.mask": m})

    # Outcome estimators: shuffled group ids, groups of size 1, an all-equal group,
    # rewards spread over several tokens (score = sum over all T, as verl).
    group = torch.tensor([5, 5, 3, 5, 3, 9, 3, 5, 7, 7, 7, 7, 3, 11], dtype=torch.int64)
    B, T = len(group), 6
    lengths = [6, 3, 5, 1, 6, 4, 2, 6, 5, 3, 6, 2, 4, 6]
    m = mask_from_lengths(lengths, T)
    tr = torch.zeros(B, T, dtype=torch.float32)
    score = f32(torch.randint(0, 2, (B,), generator=g).to(D) + torch.rand(B, generator=g, dtype=D) * 0.5)
    for b in range(B):
        tr[b, lengths[b] - 1] = score[b]
        tr[b, 0] += 0.125  # a small per-token shaping term
    for b in (8, 9, 10, 11):  # group 7: all rows score 1.125
        tr[b] = 0
        tr[b, lengths[b] - 1] = 1.0
        tr[b, 0] += 0.125
    t.update({"out.group": group, "out.mask": m, "out.token_rewards": tr})
    for nb in (0, 1):
        adv, a = R.grpo(d(tr), d(m), group, 1e-6, nb)
        t[f"grpo.n{nb}.adv"], t[f"grpo.n{nb}.scores"] = adv, a
    t["rloo.adv"] = R.rloo(d(tr), d(m), group)
    t["rpp_base.adv"] = R.reinforce_pp_baseline(d(tr), d(m), group)
    t["opo.adv"] = R.opo(d(tr), d(m), group)

    # REINFORCE++ with dense token rewards and holes.
    B, T = 5, 8
    m = mask_from_lengths([8, 5, 8, 2, 0], T, holes=[(0, 2), (2, 6)])
    trd = randn(B, T, scale=0.5)
    adv, ret = R.reinforce_pp(d(trd), d(m), 0.9)
    t.update({"rpp.mask": m, "rpp.token_rewards": trd, "rpp.adv": adv, "rpp.ret": ret})

    # Token rewards with KL and cumulative returns.
    scores = randn(B)
    kl = randn(B, T, scale=0.1)
    t.update({"tr.scores": scores, "tr.kl": kl})
    for i, coef in enumerate((0.05, 0.0, -1.0)):
        t[f"tr.c{i}.out"] = R.token_rewards_kl(d(scores), d(kl), d(m), coef)
    t["tr.coefs"] = torch.tensor([0.05, 0.0, -1.0], dtype=D)
    t["cum.out"] = R.cumulative_returns(d(trd), d(m), 0.95)
    write_golden(f"{OUT}/advantages.safetensors", t,
                 meta={"generator": "tests/reference/gen_algo_lm.py"})


def gen_pro_max():
    t = {}
    cases = []
    n, T = 4, 10
    # case 0: mixed groups, KL shaping, shuffled rows, a zero-length row, an
    # all-correct group (RLOO → 0, KL only).
    B = 16
    r = f32(torch.tensor([1, 0, 0, 1, 0, 0, 0, 1, 1, 1, 1, 1, 0.5, 0.2, 0.9, 0.1], dtype=D))
    lengths = [10, 7, 3, 9, 10, 0, 6, 8, 5, 10, 2, 7, 9, 4, 10, 6]
    cases.append(dict(B=B, r=r, lengths=lengths, kl=randn(B, T, scale=0.05), coef=0.01,
                      uniform=0, shuffle=True))
    # case 1: same inputs, uniform_scale on.
    cases.append(dict(cases[0], uniform=1))
    # case 2: k3-like non-negative KL with an all-equal group → all-negative
    # advantages (same-sign fallback); no shuffle.
    kl_pos = f32(torch.rand(B, T, generator=g, dtype=D) * 0.1)
    r2 = f32(torch.tensor([0, 0, 0, 0, 1, 0, 1, 0, 0.3, 0.3, 0.3, 0.3, 1, 1, 0, 0], dtype=D))
    cases.append(dict(B=B, r=r2, lengths=[10] * 8 + [6] * 8, kl=kl_pos, coef=0.1, uniform=0,
                      shuffle=False))
    # case 3: no KL: tiny differences → α clamped to max_scale; sub-eps sums →
    # small-sum fallback; an all-equal group with kl 0 → all zero (same-sign).
    B = 12
    r3 = f32(torch.tensor([1e-3, 0, 0, 0, 2e-10, 0, 0, 0, 0.7, 0.7, 0.7, 0.7], dtype=D))
    cases.append(dict(B=B, r=r3, lengths=[10, 9, 8, 7, 3, 3, 3, 3, 5, 5, 5, 5], kl=None,
                      coef=0.0, uniform=0, shuffle=True))
    # case 4: random continuous rewards, larger group, shuffled.
    n4, B = 8, 32
    cases.append(dict(B=B, n=n4, r=randn(B), lengths=torch.randint(0, 11, (B,), generator=g).tolist(),
                      kl=randn(B, T, scale=0.2), coef=0.05, uniform=1, shuffle=True))
    for i, c in enumerate(cases):
        B, nn = c["B"], c.get("n", n)
        m = mask_from_lengths(c["lengths"], T)
        idx = torch.arange(B)
        if c["shuffle"]:
            idx = torch.randperm(B, generator=g)
        # rows arrive in a shuffled order: row j holds original sample idx[j]
        r_rows = c["r"][idx]
        m_rows = m[idx]
        kl_rows = c["kl"][idx] if c["kl"] is not None else None
        adv, status = R.pro_max(d(r_rows), d(kl_rows) if kl_rows is not None else None,
                                d(m_rows), idx, nn, c["coef"], c["uniform"])
        p = f"pm{i}."
        t[p + "rewards"] = r_rows
        t[p + "mask"] = m_rows
        if kl_rows is not None:
            t[p + "kl"] = kl_rows
        t[p + "index"] = idx.to(torch.int64)
        t[p + "prompt"] = (idx // nn + 100).to(torch.int64)
        t[p + "cfg"] = torch.tensor([nn, c["coef"], c["uniform"]], dtype=D)
        t[p + "adv"] = adv
        t[p + "status"] = status
    t["pm.count"] = torch.tensor(len(cases), dtype=torch.int64)
    write_golden(f"{OUT}/pro_max.safetensors", t,
                 meta={"generator": "tests/reference/gen_algo_lm.py"})


def gen_kl_ppo():
    t = {}
    B, T = 5, 8
    m = mask_from_lengths([8, 6, 3, 8, 0], T, holes=[(3, 4)])
    logp = f32(-torch.rand(B, T, generator=g, dtype=D) * 3)
    ref = f32(d(logp) + torch.randn(B, T, generator=g, dtype=D) * 1.5)
    ref[0, 0] = logp[0, 0] + 25.0  # k3: ref − logp > 20 (clamp)
    ref[0, 1] = logp[0, 1] - 25.0
    ref[1, 2] = logp[1, 2] + 4.0   # k3 value > 10 (clamp)
    ref[2, 0] = logp[2, 0]         # lr = 0 (abs subgradient 0)
    t.update({"kl.logp": logp, "kl.ref": ref, "kl.mask": m})
    for kind in range(4):
        for ci, clamp in enumerate((0.0, 10.0)):
            lp = d(logp).clone().requires_grad_(True)
            v = R.kl_estimator(lp, d(ref), kind, clamp) * d(m)
            v.sum().backward()
            t[f"kl.k{kind}.c{ci}.val"] = v.detach()
            t[f"kl.k{kind}.c{ci}.grad"] = lp.grad
    # adaptive controller
    kls = [0.5, 0.01, 0.12, 0.1, 10.0, 0.0]
    steps = [256, 256, 128, 64, 512, 256]
    t["klctl.kls"] = torch.tensor(kls, dtype=D)
    t["klctl.steps"] = torch.tensor(steps, dtype=torch.int64)
    t["klctl.values"] = torch.tensor(R.kl_ctl_adaptive(0.2, 0.1, 10000.0, kls, steps), dtype=D)

    # PPO loss
    B, T = 6, 12
    m = mask_from_lengths([12, 9, 5, 12, 0, 7], T, holes=[(0, 4), (3, 10)])
    old = f32(-torch.rand(B, T, generator=g, dtype=D) * 4)
    logp = f32(d(old) + torch.randn(B, T, generator=g, dtype=D) * 0.4)
    logp[0, :3] = old[0, :3]          # ratio exactly 1
    logp[1, 0] = old[1, 0] + 30.0      # clamp of the log-ratio
    logp[1, 1] = old[1, 1] - 30.0
    logp[2, 1] = old[2, 1] + 2.0       # huge ratio with A < 0 → dual-clip
    adv = randn(B, T)
    adv[2, 1] = -1.5
    adv[3, :2] = 0.0
    ent = f32(torch.rand(B, T, generator=g, dtype=D) * 2)
    ref = f32(d(logp) + torch.randn(B, T, generator=g, dtype=D) * 0.3)
    t.update({"ppo.logp": logp, "ppo.old": old, "ppo.adv": adv, "ppo.mask": m,
              "ppo.ent": ent, "ppo.ref": ref})
    cfgs = []
    for agg in range(4):
        for dual in (0, 1):
            cfgs.append(dict(clip_low=0.2, clip_high=0.28, c=3.0 if dual else 0.0, agg=agg,
                             norm=0.0, ent_coef=0.01, kl_coef=0.1, kl_kind=3, kl_clamp=0.0))
    cfgs.append(dict(clip_low=0.2, clip_high=0.2, c=3.0, agg=0, norm=100.0, ent_coef=0.0,
                     kl_coef=0.0, kl_kind=3, kl_clamp=0.0))
    cfgs.append(dict(clip_low=0.1, clip_high=0.3, c=2.0, agg=3, norm=4.0, ent_coef=0.003,
                     kl_coef=0.5, kl_kind=2, kl_clamp=10.0))
    # seq-mean modes with a caller's row count (verl's global_batch_size): the
    # micro-batch is part of a mini-batch of 8 rows
    for agg in (1, 2):
        cfgs.append(dict(clip_low=0.2, clip_high=0.28, c=3.0, agg=agg, norm=8.0, ent_coef=0.01,
                         kl_coef=0.1, kl_kind=3, kl_clamp=0.0))
    keys = ["clip_low", "clip_high", "c", "agg", "norm", "ent_coef", "kl_coef", "kl_kind",
            "kl_clamp"]
    for i, cfg in enumerate(cfgs):
        o = R.ppo_loss(d(logp), d(old), d(adv), d(m), d(ent), d(ref), cfg)
        t[f"ppo.c{i}.cfg"] = torch.tensor([cfg[k] for k in keys], dtype=D)
        for k, v in o.items():
            t[f"ppo.c{i}.{k}"] = v
    t["ppo.count"] = torch.tensor(len(cfgs), dtype=torch.int64)

    # filter
    group = torch.tensor([4, 4, 4, 4, 2, 2, 2, 2, 9, 9, 9, 9, 1, 6, 6, 1], dtype=torch.int64)
    metric = f32(torch.tensor([1, 1, 1, 1, 0, 0, 0, 0, 1, 0, 1, 1, 0.5, 0.01, 0.02, 0.5],
                              dtype=D))
    t.update({"filter.group": group, "filter.metric": metric,
              "filter.keep": R.filter_groups(d(metric), group, 0.01, 0.99)})
    # clipped value loss
    B, T = 4, 7
    m = mask_from_lengths([7, 5, 0, 3], T)
    values = randn(B, T)
    vpred = f32(d(values) + torch.randn(B, T, generator=g, dtype=D) * 0.6)
    returns = randn(B, T)
    t.update({"vl.vpred": vpred, "vl.values": values, "vl.returns": returns, "vl.mask": m})
    for i, (clip, mode) in enumerate(((0.5, 0), (0.2, 2), (0.0, 1), (0.3, 3))):
        L, frac, grad = R.value_loss(d(vpred), d(values), d(returns), d(m), clip, mode, 0.0)
        t[f"vl.c{i}.cfg"] = torch.tensor([clip, mode], dtype=D)
        t[f"vl.c{i}.loss"], t[f"vl.c{i}.clipfrac"], t[f"vl.c{i}.grad"] = L, frac, grad

    # entropy of logits and its backward
    z = randn(5, 11, scale=3.0)
    z[2] = 0.0  # uniform row: H = log V
    up = randn(5)
    zz = d(z).clone().requires_grad_(True)
    H = R.entropy_from_logits(zz)
    (H * d(up)).sum().backward()
    t.update({"ent.logits": z, "ent.up": up, "ent.H": H.detach(), "ent.grad": zz.grad})
    write_golden(f"{OUT}/kl_ppo.safetensors", t,
                 meta={"generator": "tests/reference/gen_algo_lm.py"})


if __name__ == "__main__":
    torch.manual_seed(0)
    gen_advantages()
    gen_pro_max()
    gen_kl_ppo()
    print("wrote", OUT)
