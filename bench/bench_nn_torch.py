"""bench_nn_torch.py — PyTorch (CPU, float32, eager) twin of bench/bench_nn.c.

Same LM config and batch as the C benchmark; prints
  torch_train_tokens_per_s = X   (forward + backward of the mean log-prob loss)
  torch_gen_tokens_per_s = Y     (manual KV-cache loop, multinomial sampling)
Threads: RL_BENCH_THREADS (default: all CPUs) via torch.set_num_threads.
"""
import os
import time

import torch
import torch.nn.functional as F

V, D, I, L, H, KH, T, B = 512, 256, 768, 4, 8, 2, 256, 16
HD = D // H
STEPS = int(os.environ.get("RL_BENCH_STEPS", "3"))


def rope_tables(Tmax, theta=10000.0):
    inv = 1.0 / (theta ** (torch.arange(0, HD, 2, dtype=torch.float32) / HD))
    f = torch.arange(Tmax, dtype=torch.float32)[:, None] * inv[None]
    e = torch.cat([f, f], -1)
    return e.cos(), e.sin()


def rot(x, cos, sin):  # x (B, h, t, hd); cos/sin (t, hd)
    h = HD // 2
    return x * cos + torch.cat([-x[..., h:], x[..., :h]], -1) * sin


class LM(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(V, D)
        self.layers = torch.nn.ModuleList()
        for _ in range(L):
            m = torch.nn.Module()
            m.n1 = torch.nn.Parameter(torch.ones(D))
            m.q = torch.nn.Linear(D, D, bias=False)
            m.k = torch.nn.Linear(D, KH * HD, bias=False)
            m.v = torch.nn.Linear(D, KH * HD, bias=False)
            m.o = torch.nn.Linear(D, D, bias=False)
            m.n2 = torch.nn.Parameter(torch.ones(D))
            m.g = torch.nn.Linear(D, I, bias=False)
            m.u = torch.nn.Linear(D, I, bias=False)
            m.d = torch.nn.Linear(I, D, bias=False)
            self.layers.append(m)
        self.nf = torch.nn.Parameter(torch.ones(D))
        self.head = torch.nn.Linear(D, V, bias=False)
        for p in self.parameters():
            if p.dim() == 2:
                torch.nn.init.normal_(p, std=0.02)
        self.cos, self.sin = rope_tables(T)

    @staticmethod
    def norm(x, w):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w

    def forward(self, tok, cache=None, start=0):
        b, t = tok.shape
        x = self.emb(tok)
        cos, sin = self.cos[start:start + t], self.sin[start:start + t]
        mask = None
        if t > 1:
            mask = torch.full((t, start + t), float("-inf")).triu(start + 1)
        for i, m in enumerate(self.layers):
            h = self.norm(x, m.n1)
            q = rot(m.q(h).view(b, t, H, HD).transpose(1, 2), cos, sin)
            k = rot(m.k(h).view(b, t, KH, HD).transpose(1, 2), cos, sin)
            v = m.v(h).view(b, t, KH, HD).transpose(1, 2)
            if cache is not None:
                kc, vc = cache[i]
                kc[:, :, start:start + t] = k
                vc[:, :, start:start + t] = v
                k, v = kc[:, :, :start + t], vc[:, :, :start + t]
            k = k.repeat_interleave(H // KH, 1)
            v = v.repeat_interleave(H // KH, 1)
            s = q @ k.transpose(-1, -2) / HD ** 0.5
            if mask is not None:
                s = s + mask
            a = (s.softmax(-1) @ v).transpose(1, 2).reshape(b, t, D)
            x = x + m.o(a)
            h = self.norm(x, m.n2)
            x = x + m.d(F.silu(m.g(h)) * m.u(h))
        return self.head(self.norm(x, self.nf))


def main():
    threads = int(os.environ.get("RL_BENCH_THREADS", str(os.cpu_count())))
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    model = LM()
    tok = torch.randint(0, V, (B, T))

    def step():
        logits = model(tok)
        lp = torch.log_softmax(logits[:, :-1], -1).gather(-1, tok[:, 1:, None])
        loss = -lp.mean()
        model.zero_grad(set_to_none=False)
        loss.backward()

    step()
    best = 1e30
    for _ in range(STEPS):
        t0 = time.perf_counter()
        step()
        best = min(best, time.perf_counter() - t0)
    print(f"torch_train_tokens_per_s = {B * T / best:.1f}")

    P, NEW = 32, 224
    prompts = torch.randint(0, V, (B, P))
    gbest = 1e30
    with torch.no_grad():
        for _ in range(1):  # slow under load; bench_nn.sh runs this script twice
            t0 = time.perf_counter()
            cache = [(torch.zeros(B, KH, P + NEW, HD), torch.zeros(B, KH, P + NEW, HD))
                     for _ in range(L)]
            logits = model(prompts, cache, 0)[:, -1]
            out = []
            for j in range(NEW):
                probs = torch.softmax(logits, -1)
                nxt = torch.multinomial(probs, 1)
                out.append(nxt)
                if j + 1 < NEW:
                    logits = model(nxt, cache, P + j)[:, -1]
            gbest = min(gbest, time.perf_counter() - t0)
    print(f"torch_gen_tokens_per_s = {B * NEW / gbest:.1f}")


if __name__ == "__main__":
    main()
