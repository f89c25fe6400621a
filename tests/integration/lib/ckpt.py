"""ckpt.py — for tests that forge a checkpoint on purpose: reseal(dir)
rewrites dir/SHA256SUMS for the files as they now are, as a forger who can
write the directory would (common/nn/engine/checkpoint.h), so the resume's
own checks of the values are what refuses the forgery, not the checksums."""
import hashlib
import os


def reseal(step_dir):
    names = sorted(n for n in os.listdir(step_dir)
                   if n != "SHA256SUMS" and ".tmp." not in n
                   and os.path.isfile(os.path.join(step_dir, n)))
    text = "# rlrt checkpoint: the sha256 of every file here (check: sha256sum -c SHA256SUMS)\n"
    for n in names:
        with open(os.path.join(step_dir, n), "rb") as f:
            text += "%s  %s\n" % (hashlib.sha256(f.read()).hexdigest(), n)
    text += "# sha256 of the lines above: %s\n" % hashlib.sha256(text.encode()).hexdigest()
    with open(os.path.join(step_dir, "SHA256SUMS"), "w") as f:
        f.write(text)
