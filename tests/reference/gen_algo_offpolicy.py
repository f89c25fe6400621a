"""gen_algo_offpolicy.py — golden file for the DAPO toolbox math and
truncated importance sampling (tests/unit/test_algo_offpolicy.c), computed in
float64 PyTorch on float32 inputs, independently of the C code:

  * TIS (verl's truncated importance sampling, token level): w =
    min(exp(clamp(old - rollout, -20, 20)), cap), 0 at masked positions, and
    its statistics;
  * the PPO loss of verl with the TIS weight multiplying the per-token
    policy loss (pg_losses * w, token-mean), with its gradient by autograd:
    the C side gets it by scaling the advantage, which must be the same;
  * DAPO's soft overlong punishment (verl overlong_buffer);
  * dynamic sampling's group filter (verl filter_groups: std > 0 or 1 row).

Run with /usr/bin/python3 (Debian torch): `make golden`.
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(__file__))
from golden import write_golden  # noqa: E402

D = torch.float64
g = torch.Generator().manual_seed(20261123)


def f32(x):
    return x.to(torch.float32)


def main():
    t = {}
    # ---- TIS -------------------------------------------------------------------
    B, T = 7, 9
    lens = [9, 5, 0, 9, 3, 7, 1]
    m = torch.zeros(B, T, dtype=torch.float32)
    for b, n in enumerate(lens):
        m[b, :n] = 1
    m[3, 4] = 0  # a hole (a tool token, say)
    old = f32(-torch.rand(B, T, generator=g, dtype=D) * 3)
    roll = f32(old.to(D) + torch.randn(B, T, generator=g, dtype=D) * 0.7)
    roll[1, 2] = old[1, 2] - 30.0  # ratio beyond the clamp
    roll[5, 0] = old[5, 0] + 25.0  # ratio below it
    cap = 2.0
    d = (old.to(D) - roll.to(D)).clamp(-20, 20)
    raw = torch.exp(d)
    w = torch.clamp(raw, max=cap) * m.to(D)
    valid = m.to(D) > 0
    t.update({"tis.old": old, "tis.rollout": roll, "tis.mask": m, "tis.w": w,
              "tis.cap": torch.tensor(cap, dtype=D),
              "tis.mean": w[valid].mean(), "tis.raw_mean": raw[valid].mean(),
              "tis.raw_max": raw[valid].max(),
              "tis.capped_frac": (raw[valid] > cap).to(D).mean(),
              "tis.mismatch_kl": (roll.to(D) - old.to(D))[valid].mean()})

    # ---- PPO with TIS weights on the per-token loss (verl compute_policy_loss) --
    logp = f32(old.to(D) + torch.randn(B, T, generator=g, dtype=D) * 0.3)
    adv = f32(torch.randn(B, T, generator=g, dtype=D))
    lp = logp.to(D).clone().requires_grad_(True)
    nk = torch.clamp(lp - old.to(D), -20, 20)
    ratio = torch.exp(nk)
    A = adv.to(D)
    l1 = -A * ratio
    l2 = -A * torch.clamp(ratio, 1 - 0.2, 1 + 0.28)
    lc = torch.maximum(l1, l2)
    l3 = -A * 3.0
    pg = torch.where(A < 0, torch.minimum(l3, lc), lc)
    pg = pg * w  # TIS: detached weights on the per-token loss
    loss = (pg * m.to(D)).sum() / m.to(D).sum()
    loss.backward()
    t.update({"ppo.logp": logp, "ppo.adv": adv, "ppo.loss": loss.detach(),
              "ppo.grad": lp.grad})

    # ---- soft overlong punishment ----------------------------------------------
    max_len, buf, factor = 48, 12, 1.5
    ol = torch.tensor([0, 10, 36, 37, 40, 47, 48, 20], dtype=torch.int32)
    exceed = ol.to(D) - (max_len - buf)
    t.update({"overlong.lens": ol, "overlong.penalty":
              torch.clamp(-exceed / buf * factor, max=0.0),
              "overlong.max_len": torch.tensor(max_len, dtype=torch.int64),
              "overlong.buffer": torch.tensor(buf, dtype=torch.int64),
              "overlong.factor": torch.tensor(factor, dtype=D)})

    # ---- dynamic sampling: groups with signal ----------------------------------
    group = torch.tensor([4, 4, 2, 4, 2, 9, 2, 4, 7, 7, 7, 3, 3], dtype=torch.int64)
    metric = torch.tensor([1, 0, 1, 1, 1, 0, 1, 0, 0.5, 0.5, 0.5, 0.25, 0.75],
                          dtype=torch.float32)
    keep = torch.zeros(len(group), dtype=torch.int64)
    for gid in group.unique():
        rows = (group == gid).nonzero().flatten()
        vals = metric[rows].to(D)
        keep[rows] = int(len(rows) == 1 or vals.std(unbiased=False).item() > 0)
    t.update({"filter.group": group, "filter.metric": metric, "filter.keep": keep})
    write_golden("tests/golden/algo_lm/offpolicy.safetensors", t,
                 meta={"generator": "tests/reference/gen_algo_offpolicy.py"})


if __name__ == "__main__":
    main()
