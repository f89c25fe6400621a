"""docs_paths.py — the documents name only files that exist.

Every token of README.md, the folder READMEs and docs/ (decisions too) that
looks like a repo path (a top-level folder followed by a path, or dir/file
with a source or document extension; {a,b} groups expanded) must exist,
relative to the repo root, the document's folder, or include/ for rlrt/...
Sections the benches write into docs/RESULTS.md are theirs and skipped.

  python3 tests/integration/docs_paths.py
"""
import glob
import os
import re
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
TOP = ("common/", "driver/", "workers/", "include/", "proto/", "deploy/", "tests/", "bench/",
       "examples/", "docs/", "fuzz/", ".ci/")
EXT = r"(?:c|h|py|sh|cu|proto|yaml|yml|md|txt|json|pc\.in|service|bash)"
TOKEN = re.compile(r"[A-Za-z0-9_.\-/{},*<>@]+")
IGNORE = re.compile(r"[<>*]|NAME|\.\.\.|^\.\./shared|^fuzz/pending/")  # pending/: made when needed


def expand(tok):
    m = re.search(r"\{([^{}]*)\}", tok)
    if not m:
        return [tok]
    out = []
    for alt in m.group(1).split(","):
        out += expand(tok[:m.start()] + alt + tok[m.end():])
    return out


docs = [os.path.join(ROOT, "README.md")] + sorted(glob.glob(os.path.join(ROOT, "*", "README.md")))
docs += sorted(glob.glob(os.path.join(ROOT, "docs", "*.md")) +
               glob.glob(os.path.join(ROOT, "docs", "decisions", "*.md")))
bad = checked = 0
for f in docs:
    text = open(f, encoding="utf-8").read()
    text = re.sub(r"<!-- (bench-[a-z0-9-]+):begin -->.*?<!-- \1:end -->",
                  lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)
    here = os.path.dirname(f)
    for ln, line in enumerate(text.splitlines(), 1):
        for tok in TOKEN.findall(line):
            for p in expand(tok.strip(".,;:()")):
                p = p.strip(".,;:()")
                if not p or IGNORE.search(p) or ("/" not in p and not re.search(r"\." + EXT + "$", p)):
                    continue
                if not (p.startswith(TOP) or re.search(r"^[A-Za-z0-9_./-]+/[A-Za-z0-9_.-]+\." + EXT + "$", p)):
                    continue
                if p.startswith(("http", "runs/", "build/", "/")):
                    continue
                checked += 1
                cands = [os.path.join(ROOT, p), os.path.join(here, p)]
                if p.startswith("rlrt/"):
                    cands.append(os.path.join(ROOT, "include", p))
                if not any(os.path.exists(c) for c in cands):
                    bad += 1
                    print("FAIL: %s:%d: %s does not exist" % (os.path.relpath(f, ROOT), ln, p))
print("docs paths: %d checked in %d documents, %d missing" % (checked, len(docs), bad))
sys.exit(1 if bad else 0)
