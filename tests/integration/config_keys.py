"""config_keys.py — config keys are named only in the schemas.

Every key a recipe's jobs know (rl-driver config-keys) comes from a section
in common/schema/; recipes and roles read typed sections, never key strings.
Checked on the sources: no string literal in product code (common/, driver/,
workers/, include/) outside common/schema/ names a known key path, not even
inside a message (a message names a key through RL_CFG_PATH), and no recipe
still brings legacy YAML fragments (rl-driver config-doc says so).

  python3 tests/integration/config_keys.py            (BUILD=build by default)
  python3 tests/integration/config_keys.py --report   every offending literal
"""
import os
import re
import subprocess
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
BUILD = os.path.join(ROOT, os.environ.get("BUILD", "build"))
DRIVER = os.path.join(BUILD, "bin", "rl-driver")

keys = sorted(set(subprocess.run([DRIVER, "config-keys"], capture_output=True, text=True,
                                 check=True).stdout.split()), key=len, reverse=True)
# a key path inside a literal, not part of a longer dotted name
pattern = re.compile(r"(?<![\w.])(" + "|".join(re.escape(k) for k in keys) + r")(?![\w])")
files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "common", "driver", "workers",
                        "include"], cwd=ROOT, capture_output=True, text=True).stdout.split()
STRING = re.compile(r'"(?:[^"\\\n]|\\.)*"')
COMMENT = re.compile(r"/\*.*?\*/|//[^\n]*", re.S)
hits = []
for f in files:
    if not f.endswith((".c", ".h")) or f.startswith("common/schema/"):
        continue
    path = os.path.join(ROOT, f)
    if not os.path.exists(path):
        continue
    text = COMMENT.sub(lambda m: "\n" * m.group(0).count("\n"), open(path, encoding="utf-8").read())
    for m in STRING.finditer(text):
        for k in pattern.findall(m.group(0)):
            line = text.count("\n", 0, m.start()) + 1
            hits.append("%s:%d: %s" % (f, line, k))
doc = subprocess.run([DRIVER, "config-doc"], capture_output=True, text=True, check=True).stdout
legacy = [l.split("|")[1].strip() for l in doc.splitlines() if "sections not yet in common/schema" in l]
if "--report" in sys.argv:
    print("\n".join(hits))
    print("recipes with legacy fragments:", ", ".join(legacy) or "none")
for h in hits[:40]:
    print("FAIL: key named outside common/schema:", h)
if len(hits) > 40:
    print("FAIL: ... %d more" % (len(hits) - 40))
if legacy:
    print("FAIL: recipes still bring YAML fragments instead of sections:", ", ".join(legacy))
if hits or legacy:
    sys.exit(1)
print("config keys: %d keys, named only in common/schema" % len(keys))
