"""gen_algo_aepo.py — independent float64 reference for ARES / AEPO entropy
shaping (seed 002, REFERENCES.md "ARES / AEPO"), written from the spec, not
from the C code. Writes tests/golden/algo_aepo/*.safetensors.

Definitions the C library documents and this reference restates:
* token entropy H = logsumexp(z) − Σ softmax(z)·z; its gradient comes from
  torch autograd (−inf logits are probability 0 and get gradient 0).
* window entropy at the k-th valid token (mask != 0, holes skipped) = mean of
  H over the next w valid tokens, only when all w exist; otherwise 0 and not
  valid. Window means are rounded to float32 (the C output type) before any
  later use, so both sides threshold the same numbers.
* per-response percentile: numpy's linear percentile over complete windows;
  batch median with numpy; τ = first median, then 0.99·τ + 0.01·median.
* HWE flag: complete window ≥ τ; count per row.
* buckets: per id, mean accuracy of its rows in the batch (≥ 2/3 easy,
  ≥ 1/3 medium, else hard); per bucket, mean over ids of the id-mean HWE
  count. α_d += 0.05·Δ against the targets from before the batch
  (Δ = mean − target for easy/medium, target − mean for hard), clipped to
  [0, 2]; then targets = round-half-even(bucket mean); an empty bucket keeps
  its target, or takes the batch-wide mean if it never had one.
* entropy reward exactly as REFERENCES.md; correct means accuracy == 1.
* λ_d ← clip(λ_d + 0.01·(KL_d − 0.01), 0, 10) when the bucket has ≥ 8
  non-empty rows; KL_d = mean of per-row masked-mean token KL.
* KL weights = mask·(β + λ_d)·(0.5 at HWE flags, else 1).

Run with /usr/bin/python3 (Debian torch + numpy).
"""
import math
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from golden import write_golden  # noqa: E402

OUT = "tests/golden/algo_aepo"
torch.manual_seed(2002)
rng = np.random.default_rng(2002)

EASY, MEDIUM, HARD = 0, 1, 2
WINDOW = 4
PCT = 95.0
DECAY = 0.99
ALPHA_INIT, ALPHA_LR, ALPHA_MIN, ALPHA_MAX = 0.5, 0.05, 0.0, 2.0
LAMBDA_LR, LAMBDA_MAX, LAMBDA_MIN_ROWS = 0.01, 10.0, 8
KL_BUDGET = 0.01
MARGIN_FRAC = [0.15, 0.25, 0.35]
KAPPA = [2.0, 3.0, 4.0]
TEMP = [2.0, 2.5, 3.0]
CAP_SCALE = [1.0, 1.0, 1.2]
WRONG_SCALE = [0.6, 0.8, 1.0]


# ---- token entropy -----------------------------------------------------------

def entropy_and_grad(logits32, dH):
    z = torch.tensor(logits32, dtype=torch.float64)
    finite = torch.isfinite(z)
    zf = z.clone().requires_grad_(True)
    # −inf entries: replaced by a huge negative number inside the graph so the
    # softmax gives exactly 0 there and torch.where routes no gradient to them.
    zz = torch.where(finite, zf, torch.full_like(zf, -1e300))
    lse = torch.logsumexp(zz, dim=-1)
    p = torch.softmax(zz, dim=-1)
    pz = torch.where(finite, p * zz, torch.zeros_like(zz))
    H = lse - pz.sum(-1)
    (H * torch.tensor(dH, dtype=torch.float64)).sum().backward()
    g = zf.grad.clone()
    g[~finite] = 0.0
    return H.detach().numpy(), g.numpy()


def gen_entropy():
    N, V = 24, 37
    logits = rng.normal(0, 2.0, size=(N, V)).astype(np.float32)
    logits[3] *= 15.0  # sharp rows
    logits[4, :] = -5.0
    logits[4, 7] = 40.0  # almost one-hot
    logits[5, :] = 1.25  # uniform: H = log V
    logits[6, ::3] = -np.inf  # masked vocabulary entries
    logits[7, :] = -np.inf
    logits[7, 11] = 3.0  # exactly one-hot through masking: H = 0
    logits[8] += 1000.0  # shift invariance at large magnitude
    dH = rng.normal(0, 1, size=(N,)).astype(np.float32)
    H, g = entropy_and_grad(logits, dH)
    write_golden(f"{OUT}/entropy.safetensors",
                 {"logits": logits, "dH": dH, "H": H, "dlogits": g},
                 meta={"N": N, "V": V})


# ---- windows, percentile, HWE ------------------------------------------------

def window_entropy(H32, mask, w):
    B, T = H32.shape
    win = np.zeros((B, T), dtype=np.float64)
    valid = np.zeros((B, T), dtype=np.uint8)
    for b in range(B):
        pos = [t for t in range(T) if mask[b, t] != 0]
        L = len(pos)
        for k in range(L):
            if k + w <= L - 1:
                vals = torch.tensor([float(H32[b, pos[k + i]]) for i in range(1, w + 1)],
                                    dtype=torch.float64)
                win[b, pos[k]] = float(np.float32(vals.mean().item()))
                valid[b, pos[k]] = 1
    return win, valid


def row_percentiles(win, valid, q):
    B = win.shape[0]
    pct = np.zeros(B, dtype=np.float64)
    has = np.zeros(B, dtype=np.uint8)
    for b in range(B):
        v = win[b][valid[b] == 1]
        if v.size:
            pct[b] = float(np.float32(np.percentile(v, q)))
            has[b] = 1
    return pct, has


def hwe(win, valid, tau, cand=None):
    f = (valid == 1) & (win >= tau)
    if cand is not None:
        f &= cand == 1
    return f.astype(np.uint8), f.sum(1).astype(np.float64)


def edge_mask(T):
    """Rows: empty, 1 token, w−1, w, w+1 tokens, holes, full, left-padded."""
    rows = []
    for L in (0, 1, WINDOW - 1, WINDOW, WINDOW + 1):
        r = np.zeros(T, np.float32)
        r[:L] = 1
        rows.append(r)
    r = np.ones(T, np.float32)
    r[[2, 3, 7, 11, 12, 13]] = 0  # holes
    r[T - 3:] = 0
    rows.append(r)
    rows.append(np.ones(T, np.float32))
    r = np.zeros(T, np.float32)
    r[5:] = 1
    rows.append(r)
    return np.stack(rows)


def gen_windows():
    T = 24
    mask = np.concatenate([edge_mask(T), (rng.random((4, T)) > 0.2).astype(np.float32)])
    B = mask.shape[0]
    H = rng.gamma(2.0, 0.6, size=(B, T)).astype(np.float32)
    H[mask == 0] = np.nan  # never read at masked positions
    cand = (rng.random((B, T)) > 0.5).astype(np.uint8)
    out = {"H": H, "mask": mask, "cand": cand}
    for w in (WINDOW, 1, 3):
        win, valid = window_entropy(H, mask, w)
        pct, has = row_percentiles(win, valid, PCT)
        out[f"win_w{w}"] = win
        out[f"valid_w{w}"] = valid
        out[f"pct_w{w}"] = pct
        out[f"has_w{w}"] = has
    win, valid = out["win_w4"], out["valid_w4"]
    tau = float(np.median(out["pct_w4"][out["has_w4"] == 1]))
    out["tau"] = np.array(tau)
    out["flags"], out["counts"] = hwe(win, valid, tau)
    out["flags_cand"], out["counts_cand"] = hwe(win, valid, tau, cand)
    # percentile at q = 0 / 50 / 100 for row 6 (full row)
    v = win[6][valid[6] == 1]
    out["row6_q"] = np.array([np.percentile(v, q) for q in (0.0, 50.0, 100.0, 37.5)])
    write_golden(f"{OUT}/windows.safetensors", out, meta={"window": WINDOW, "q": PCT})


# ---- reward -----------------------------------------------------------------------

def huber(x, k):
    x = max(x, 0.0)
    return 0.5 * x * x / k if x <= k else x - 0.5 * k


def sig(x, t):
    return 1.0 / (1.0 + math.exp(-x / t))


def entropy_reward(d, correct, n, target, alpha):
    delta = n - target
    m = max(1.0, MARGIN_FRAC[d] * max(target, 1.0))
    k, t, cap = KAPPA[d], TEMP[d], alpha * CAP_SCALE[d]
    if not correct:
        return sig(max(delta - m, 0.0), t) * cap * WRONG_SCALE[d]
    if d == EASY:
        return -min(cap, huber(max(delta - m, 0.0), k) / (m + k) * cap)
    if d == MEDIUM:
        return -min(cap, huber(max(abs(delta) - m, 0.0), k) / (m + k) * cap)
    if delta >= -m:
        return sig(delta + m, t) * cap
    return -min(cap, 0.5 * huber(-delta - m, k) / (m + k) * cap)


def gen_reward_grid():
    rows = []
    for d in (EASY, MEDIUM, HARD):
        for correct in (0, 1):
            for target in (0.0, 1.0, 3.0, 8.0, 20.0, 57.0):
                for n in (0, 1, 2, 3, 5, 8, 9, 12, 15, 20, 23, 30, 45, 60, 80, 200):
                    for alpha in (0.0, 0.5, 1.7):
                        rows.append((d, correct, n, target, alpha,
                                     entropy_reward(d, correct, float(n), target, alpha)))
    a = np.array(rows, dtype=np.float64)
    write_golden(f"{OUT}/reward_grid.safetensors", {
        "bucket": a[:, 0].astype(np.int64), "correct": a[:, 1].astype(np.int64),
        "count": a[:, 2], "target": a[:, 3], "alpha": a[:, 4], "reward": a[:, 5]})


# ---- multi-step simulation ------------------------------------------------------------

class Ref:
    def __init__(self):
        self.tau = None
        self.alpha = [ALPHA_INIT] * 3
        self.lam = [0.0] * 3
        self.target = [None] * 3
        self.bucket = {}

    @staticmethod
    def bucket_of(acc):
        return EASY if acc >= 2.0 / 3.0 else (MEDIUM if acc >= 1.0 / 3.0 else HARD)

    def group(self, gids, acc, cnt):
        order, rows = [], {}
        for i, g in enumerate(gids):
            if g not in rows:
                rows[g] = []
                order.append(g)
            rows[g].append(i)
        per_bucket = {d: [] for d in range(3)}
        allm = []
        for g in order:
            a = float(np.mean([acc[i] for i in rows[g]]))
            h = float(np.mean([cnt[i] for i in rows[g]]))
            d = self.bucket_of(a)
            self.bucket[g] = d
            per_bucket[d].append(h)
            allm.append(h)
        return per_bucket, allm

    def refresh_targets(self, per_bucket, allm):
        for d in range(3):
            if per_bucket[d]:
                self.target[d] = float(round(float(np.mean(per_bucket[d]))))
            elif self.target[d] is None and allm:
                self.target[d] = float(round(float(np.mean(allm))))

    def bootstrap(self, gids, acc, cnt):
        per_bucket, allm = self.group(gids, acc, cnt)
        self.refresh_targets(per_bucket, allm)

    def update(self, gids, acc, cnt):
        per_bucket, allm = self.group(gids, acc, cnt)
        for d in range(3):
            if not per_bucket[d] or self.target[d] is None:
                continue
            mean = float(np.mean(per_bucket[d]))
            delta = self.target[d] - mean if d == HARD else mean - self.target[d]
            self.alpha[d] = min(ALPHA_MAX, max(ALPHA_MIN, self.alpha[d] + ALPHA_LR * delta))
        self.refresh_targets(per_bucket, allm)
        return [self.bucket[g] for g in gids]

    def threshold(self, pct, has):
        v = pct[has == 1]
        if v.size == 0:
            return float("nan")
        med = float(np.median(v))
        self.tau = med if self.tau is None else DECAY * self.tau + (1 - DECAY) * med
        return med

    def lambda_update(self, kl, mask, buckets):
        vals = {d: [] for d in range(3)}
        for b in range(kl.shape[0]):
            m = mask[b] != 0
            if m.sum() == 0:
                continue
            vals[buckets[b]].append(float(torch.tensor(kl[b][m], dtype=torch.float64).mean()))
        out = []
        for d in range(3):
            kd = float(np.mean(vals[d])) if vals[d] else float("nan")
            out.append(kd)
            if len(vals[d]) >= LAMBDA_MIN_ROWS:
                self.lam[d] = min(LAMBDA_MAX, max(0.0, self.lam[d] + LAMBDA_LR * (kd - KL_BUDGET)))
        return out


def gen_sim():
    S, n, P, T = 6, 4, 5, 20
    B = n * P
    beta = 0.04
    ref = Ref()
    # ids 0..9 with a latent solve rate; 10 and 11 are never bootstrapped
    solve = {g: p for g, p in zip(range(12), rng.random(12))}
    # bootstrap: two batches of 3 rollouts per id (accuracy k/3 hits the 1/3
    # and 2/3 boundaries exactly), HWE counts given directly
    boot_gid, boot_acc, boot_hwe = [], [], []
    for g in range(10):
        for _ in range(3):
            boot_gid.append(g)
            boot_acc.append(float(rng.random() < solve[g]))
            boot_hwe.append(float(rng.integers(0, 9)))
    boot_gid = np.array(boot_gid, np.int64)
    boot_acc = np.array(boot_acc, np.float32)
    boot_hwe = np.array(boot_hwe, np.float32)
    ref.bootstrap(list(boot_gid), list(map(float, boot_acc)), list(map(float, boot_hwe)))
    boot_target = np.array(ref.target, np.float64)
    boot_bucket = np.array([ref.bucket[g] for g in range(10)], np.int64)

    rec = {k: [] for k in ("gid", "acc", "H", "mask", "kl", "median", "tau", "counts",
                           "flags", "bucket", "alpha", "target", "ent", "overall",
                           "kl_bucket", "lambda", "klw")}
    for s in range(S):
        prompts = rng.choice(12, size=P, replace=False)
        if s == 2:
            prompts[0] = 10  # an id never seen before (not bootstrapped)
        gids = np.repeat(prompts, n).astype(np.int64)
        acc = np.array([float(rng.random() < solve[g]) for g in gids], np.float32)
        lens = rng.integers(0, T + 1, size=B)
        lens[0] = 0
        lens[1] = 2
        mask = (np.arange(T)[None, :] < lens[:, None]).astype(np.float32)
        H = rng.gamma(2.0, 0.5 + 0.1 * s, size=(B, T)).astype(np.float32)
        kl = rng.gamma(2.0, 0.004 + 0.004 * s, size=(B, T)).astype(np.float32)
        win, valid = window_entropy(H, mask, WINDOW)
        pct, has = row_percentiles(win, valid, PCT)
        med = ref.threshold(pct, has)
        flags, counts = hwe(win, valid, ref.tau)
        buckets = ref.update(list(gids), list(map(float, acc)), list(counts))
        tgt = [ref.target[d] if ref.target[d] is not None else 0.0 for d in range(3)]
        ent = np.array([entropy_reward(buckets[b], acc[b] >= 1.0, counts[b], tgt[buckets[b]],
                                       ref.alpha[buckets[b]]) for b in range(B)])
        klb = ref.lambda_update(kl, mask, buckets)
        lam_row = np.array([ref.lam[d] for d in buckets])
        klw = mask * (beta + lam_row)[:, None] * np.where(flags == 1, 0.5, 1.0)
        for k, v in (("gid", gids), ("acc", acc), ("H", H), ("mask", mask), ("kl", kl),
                     ("median", med), ("tau", ref.tau), ("counts", counts), ("flags", flags),
                     ("bucket", np.array(buckets, np.int64)), ("alpha", list(ref.alpha)),
                     ("target", tgt), ("ent", ent), ("overall", acc.astype(np.float64) + ent),
                     ("kl_bucket", klb), ("lambda", list(ref.lam)), ("klw", klw)):
            rec[k].append(v)
    out = {k: np.array(v) for k, v in rec.items()}
    for k in ("median", "tau", "alpha", "target", "ent", "overall", "kl_bucket", "lambda",
              "klw", "counts"):
        out[k] = out[k].astype(np.float64)
    out["flags"] = out["flags"].astype(np.uint8)
    out.update({"boot_gid": boot_gid, "boot_acc": boot_acc, "boot_hwe": boot_hwe,
                "boot_target": boot_target, "boot_bucket": boot_bucket})
    write_golden(f"{OUT}/sim.safetensors", out,
                 meta={"S": S, "B": B, "T": T, "beta": beta, "window": WINDOW})


if __name__ == "__main__":
    gen_entropy()
    gen_windows()
    gen_reward_grid()
    gen_sim()
    print("wrote", OUT)
