#!/usr/bin/env python3
"""verify_data.py DATA_DIR — checks every file listed in DATA_DIR/manifest.json
against its sha256 (exit 1 naming the first missing or changed file)."""
import hashlib
import json
import os
import sys

data = sys.argv[1]
try:
    with open(os.path.join(data, "manifest.json")) as f:
        man = json.load(f)
except (OSError, ValueError) as e:
    sys.exit("%s/manifest.json: %s; run: make libero-data" % (data, e))
for rel, want in man["files"].items():
    p = os.path.join(data, rel)
    h = hashlib.sha256()
    try:
        with open(p, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
    except OSError as e:
        sys.exit("%s: %s; run: make libero-data" % (p, e.strerror))
    if h.hexdigest() != want:
        sys.exit("%s: sha256 differs from manifest.json; run: make libero-data" % p)
print("%s: %d files match manifest.json" % (data, len(man["files"])))
