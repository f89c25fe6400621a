"""fuzz_regressions_generated.py — the committed accept-*/reject-* fuzz
regression inputs are exactly what fuzz/gen_regressions.py writes (a changed
generator must be re-run and its output committed). Exit 0 = pass."""
import os
import subprocess
import sys

root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
gen = os.path.join(root, "fuzz", "gen_regressions.py")
rc = subprocess.run([sys.executable, gen, "--check"]).returncode
if rc != 0:
    print("fuzz regression inputs are stale: run fuzz/gen_regressions.py and commit its output")
sys.exit(1 if rc else 0)
