"""gen_reward.py — independent reference for the format reward and the last
\\boxed{} extraction of common/reward/reward.h, written from the public semantics
(REFERENCES.md "Math verifiers"), not from the C code. Writes
tests/golden/reward/format_boxed.safetensors.

* format: EasyR1's rule, run with Python's own regex engine: whitespace next
  to '<', '>' or '/' is removed (re.sub(r"\\s*(<|>|/)\\s*", r"\\1", s)), then
  re.fullmatch(r"<think>.*</think>.*\\\\boxed\\{.*\\}.*", s, re.DOTALL).
* boxed: the text after the LAST "\\boxed{", cut at its matching '}' by
  depth counting, stripped; no answer when that brace never closes.

Responses are random concatenations of tokens (fixed seed) chosen to hit the
corner cases: spaces around tags, tags out of order, nested and unbalanced
braces, newlines. Strings are stored as concatenated UTF-8 bytes plus
offsets (i64, N+1). Run with /usr/bin/python3.
"""
import os
import random
import re
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from golden import write_golden  # noqa: E402

TOKENS = ["<think>", "</think>", "< think >", "</ think>", "<", ">", "/", " ", "  ",
          "\n", "\t", "\\boxed{", "{", "}", "a", "5", "x/y", "think", "\\frac{1}{2}",
          "boxed", "\\", "$", "#### 3"]
FORMAT_RE = re.compile(r"<think>.*</think>.*\\boxed\{.*\}.*", re.DOTALL)


def format_reward(s):
    s = re.sub(r"\s*(<|>|/)\s*", r"\1", s)
    return 1.0 if FORMAT_RE.fullmatch(s) else 0.0


def last_boxed(s):
    at = s.rfind("\\boxed{")
    if at < 0:
        return None
    rest = s[at + len("\\boxed{"):]
    depth = 0
    for i, ch in enumerate(rest):
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth < 0:
                return rest[:i].strip()
    return None


def pack(strings):
    blobs = [s.encode() for s in strings]
    off = np.zeros(len(blobs) + 1, dtype=np.int64)
    off[1:] = np.cumsum([len(b) for b in blobs])
    data = np.frombuffer(b"".join(blobs) or b"\0", dtype=np.uint8).copy()
    return data, off


def main():
    rng = random.Random(20261122)
    responses = []
    # Structured cases first: a good skeleton with one token perturbed, so
    # that about half the rows are positive.
    for _ in range(300):
        parts = ["<think>", "a", "</think>", " ", "\\boxed{", "5", "}"]
        if rng.random() < 0.3:
            parts[0] = rng.choice(["< think>", "<think >", " <think> ", "< think >", "\n<think>"])
        if rng.random() < 0.3:
            parts[2] = rng.choice(["</ think>", "< /think>", "</think >", "< / think >",
                                   "</ thin k>"])
        for _ in range(rng.randrange(0, 3)):
            parts.insert(rng.randrange(0, len(parts) + 1), rng.choice(TOKENS))
        if rng.random() < 0.3:
            del parts[rng.randrange(0, len(parts))]
        responses.append("".join(parts))
    for _ in range(300):
        responses.append("".join(rng.choice(TOKENS) for _ in range(rng.randrange(0, 14))))
    fmt = np.array([format_reward(s) for s in responses], dtype=np.float64)
    boxed = [last_boxed(s) for s in responses]
    found = np.array([b is not None for b in boxed], dtype=np.int64)
    rb, ro = pack(responses)
    bb, bo = pack([b or "" for b in boxed])
    write_golden("tests/golden/reward/format_boxed.safetensors",
                 {"resp_bytes": rb, "resp_off": ro, "format": fmt,
                  "boxed_found": found, "boxed_bytes": bb, "boxed_off": bo},
                 meta={"n": len(responses), "positives": int(fmt.sum()),
                       "boxed": int(found.sum())})
    print(f"reward: {len(responses)} responses, {int(fmt.sum())} well formatted, "
          f"{int(found.sum())} with a closed last \\boxed{{}}")


if __name__ == "__main__":
    main()
