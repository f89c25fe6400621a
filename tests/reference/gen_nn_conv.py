"""gen_nn_conv.py — float64 PyTorch / numpy+scipy references of the
convolutional kernels (common/nn/engine/ops_conv.h), the image_cnn model kind
(common/nn/models/image_cnn.h) and the Fréchet distance
(common/metrics/frechet.h), written from the headers' formulas, independently
of the C code.

Kernels: torch.nn.functional.conv2d / max_pool2d / relu forward, and the
gradients of a linear loss Σ coef·out by autograd.
Model: the image_cnn network on small images: log-probs of the labels, the
features, and the gradient of Σ coef·logp for every parameter view (the
conv weights as the 2-D views (out, in·9) of the manifest).
Fréchet distance: numpy's mean and covariance (np.cov, 1/(n−1)) and the
formula of pytorch-fid's calculate_frechet_distance with
scipy.linalg.sqrtm(C1·C2) (a different algorithm from the C side's
eigen-decompositions).
Inputs are float32 values (stored F32), outputs float64.
Output: tests/golden/nn_conv/{kernels,image_cnn,frechet}.safetensors
"""
import os
import sys

import numpy as np
import scipy.linalg
import torch
import torch.nn.functional as Fn

sys.path.insert(0, os.path.dirname(__file__))
from golden import write_golden  # noqa: E402

torch.manual_seed(44044)
f64 = torch.float64


def f32(t):
    return t.float().double()


def kernels():
    out = {}
    meta = {}
    # two convolutions: 3x3 padding 1 stride 1, and 2x3 padding 0 stride 2
    for tag, (N, C, H, W, OC, KH, KW, pad, stride) in {
            "a": (2, 3, 6, 5, 4, 3, 3, 1, 1), "b": (3, 2, 7, 8, 5, 2, 3, 0, 2)}.items():
        x = f32(torch.randn(N, C, H, W)).requires_grad_(True)
        w = f32(torch.randn(OC, C, KH, KW) * 0.4).requires_grad_(True)
        b = f32(torch.randn(OC) * 0.3).requires_grad_(True)
        y = Fn.conv2d(x, w, b, stride=stride, padding=pad)
        coef = f32(torch.randn(*y.shape))
        (y * coef).sum().backward()
        out.update({f"conv_{tag}.x": x.detach().float(), f"conv_{tag}.w": w.detach().float(),
                    f"conv_{tag}.b": b.detach().float(), f"conv_{tag}.coef": coef.float(),
                    f"conv_{tag}.y": y.detach(), f"conv_{tag}.dx": x.grad, f"conv_{tag}.dw": w.grad,
                    f"conv_{tag}.db": b.grad})
        meta[f"conv_{tag}"] = ",".join(str(v) for v in (N, C, H, W, OC, KH, KW, pad, stride))
    # max pooling 2x2 with a floor (7 → 3)
    N, C, H, W = 2, 3, 6, 7
    x = f32(torch.randn(N, C, H, W)).requires_grad_(True)
    y = Fn.max_pool2d(x, 2)
    coef = f32(torch.randn(*y.shape))
    (y * coef).sum().backward()
    out.update({"pool.x": x.detach().float(), "pool.y": y.detach(), "pool.coef": coef.float(),
                "pool.dx": x.grad})
    meta["pool"] = "%d,%d,%d,%d,2" % (N, C, H, W)
    # ReLU
    x = f32(torch.randn(50)).requires_grad_(True)
    y = torch.relu(x)
    coef = f32(torch.randn(50))
    (y * coef).sum().backward()
    out.update({"relu.x": x.detach().float(), "relu.y": y.detach(), "relu.coef": coef.float(),
                "relu.dx": x.grad})
    write_golden("tests/golden/nn_conv/kernels.safetensors", out, meta=meta)


def image_cnn():
    B, C, H, W, C1, C2, F, K = 5, 1, 8, 9, 3, 4, 6, 4
    H4, W4 = H // 2 // 2, W // 2 // 2
    views = [("conv1.weight", (C1, C * 9)), ("conv1.bias", (C1,)), ("conv2.weight", (C2, C1 * 9)),
             ("conv2.bias", (C2,)), ("fc.weight", (F, C2 * H4 * W4)), ("fc.bias", (F,)),
             ("out.weight", (K, F)), ("out.bias", (K,))]
    ps = {n: f32(torch.randn(*s) * (0.5 if len(s) == 1 else 1.0 / np.sqrt(s[1]))).requires_grad_(True)
          for n, s in views}
    x = f32(torch.rand(B, C * H * W) * 2 - 1)
    y = torch.randint(0, K, (B,))
    h = x.view(B, C, H, W)
    h = Fn.max_pool2d(torch.relu(Fn.conv2d(h, ps["conv1.weight"].view(C1, C, 3, 3), ps["conv1.bias"],
                                           padding=1)), 2)
    h = Fn.max_pool2d(torch.relu(Fn.conv2d(h, ps["conv2.weight"].view(C2, C1, 3, 3), ps["conv2.bias"],
                                           padding=1)), 2)
    feats = torch.relu(h.reshape(B, -1) @ ps["fc.weight"].T + ps["fc.bias"])
    logits = feats @ ps["out.weight"].T + ps["out.bias"]
    logp = torch.log_softmax(logits, dim=1).gather(1, y[:, None])[:, 0]
    coef = f32(torch.randn(B))
    (logp * coef).sum().backward()
    flat = torch.cat([ps[n].detach().reshape(-1) for n, _ in views]).float()
    out = {"params": flat, "images": x.float(), "labels": y.to(torch.int32), "coef": coef.float(),
           "logp": logp.detach(), "features": feats.detach(),
           "probs": torch.softmax(logits, dim=1).detach()}
    for n, _ in views:
        out["grad." + n] = ps[n].grad.reshape(-1)
    write_golden("tests/golden/nn_conv/image_cnn.safetensors", out,
                 meta={"batch": str(B), "channels": str(C), "height": str(H), "width": str(W),
                       "conv1": str(C1), "conv2": str(C2), "features": str(F), "classes": str(K)})


def fid(x1, x2):
    """pytorch-fid's formula (calculate_frechet_distance) on numpy statistics."""
    mu1, mu2 = x1.mean(0), x2.mean(0)
    s1, s2 = np.cov(x1, rowvar=False), np.cov(x2, rowvar=False)
    covmean = scipy.linalg.sqrtm(s1.dot(s2))
    if np.iscomplexobj(covmean):
        covmean = covmean.real
    d = mu1 - mu2
    return mu1, s1, mu2, s2, d.dot(d) + np.trace(s1) + np.trace(s2) - 2 * np.trace(covmean)


def frechet():
    rng = np.random.default_rng(4404)
    d = 6
    a = rng.standard_normal((d, d))
    x1 = (rng.standard_normal((300, d)) @ a * 0.5 + 1.0).astype(np.float32)
    b = rng.standard_normal((d, d))
    x2 = (rng.standard_normal((200, d)) @ b * 0.8 - 0.5).astype(np.float32)
    x3 = (rng.standard_normal((40, d)) @ a * 0.5 + 1.1).astype(np.float32)  # close to x1
    out = {"x1": x1, "x2": x2, "x3": x3}
    for tag, (p, q) in {"12": (x1, x2), "13": (x1, x3)}.items():
        mu1, s1, mu2, s2, v = fid(p.astype(np.float64), q.astype(np.float64))
        out.update({f"fid{tag}": np.array([v])})
    mu1, s1, _, _, _ = fid(x1.astype(np.float64), x2.astype(np.float64))
    out.update({"mu1": mu1, "cov1": s1})
    write_golden("tests/golden/nn_conv/frechet.safetensors", out, meta={"dim": str(d)})


if __name__ == "__main__":
    kernels()
    image_cnn()
    frechet()
