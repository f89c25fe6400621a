"""golden.py — writes golden files for the C tests.

A golden file uses the safetensors layout (8-byte little-endian header length,
JSON header {name: {dtype, shape, data_offsets}}, raw little-endian data), so
the C side reads it with tests/common/golden.c and no Python is needed in CI.
Supported dtypes: F64, F32, I64, I32, U8, BOOL. Scalars come out as shape [1]
(np.ascontiguousarray makes 0-d arrays 1-d); rl_golden_scalar() accepts
both [] and [1].

Usage from a generator:
    from golden import write_golden
    write_golden("tests/golden/algo/grpo_basic.safetensors",
                 {"scores": torch.tensor(...), "adv": ...},
                 meta={"epsilon": "1e-6"})
"""
import json
import os
import struct

import numpy as np

_DTYPES = {
    np.dtype("float64"): "F64",
    np.dtype("float32"): "F32",
    np.dtype("int64"): "I64",
    np.dtype("int32"): "I32",
    np.dtype("uint8"): "U8",
    np.dtype("bool"): "BOOL",
}

ROOT = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", ".."))


def _to_numpy(x):
    if hasattr(x, "detach"):  # torch tensor
        x = x.detach().cpu().numpy()
    return np.ascontiguousarray(np.asarray(x))


def write_golden(path, tensors, meta=None):
    """Writes {name: array} to path (relative to the repo root if relative)."""
    if not os.path.isabs(path):
        path = os.path.join(ROOT, path)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    header = {}
    blobs = []
    offset = 0
    for name in sorted(tensors):
        arr = _to_numpy(tensors[name])
        if arr.dtype not in _DTYPES:
            raise TypeError(f"{name}: unsupported dtype {arr.dtype}")
        data = arr.astype(arr.dtype.newbyteorder("<"), copy=False).tobytes()
        header[name] = {
            "dtype": _DTYPES[arr.dtype],
            "shape": list(arr.shape),
            "data_offsets": [offset, offset + len(data)],
        }
        blobs.append(data)
        offset += len(data)
    if meta:
        header["__metadata__"] = {k: str(v) for k, v in meta.items()}
    hjson = json.dumps(header, separators=(",", ":")).encode()
    hjson += b" " * ((8 - len(hjson) % 8) % 8)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(hjson)))
        f.write(hjson)
        for b in blobs:
            f.write(b)
    os.replace(tmp, path)
