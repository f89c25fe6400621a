#!/usr/bin/env python3
"""scorer_server.py — the reference server of rlrt's remote-scorer protocol
(proto/scorer.proto): ZeroMQ REP, one ScoreRequest in, one ScoreReply out.

Backends:
  hpsv3       the PyPI `hpsv3` model (HPSv3RewardInferencer) on a GPU host.
              Its weights must already be on the host (--checkpoint FILE);
              the server refuses to start otherwise: it never downloads.
  classifier  rlrt's learned prompt-match scorer (model.type
              image_classifier, saved by `rl-driver ... scorer_train`):
              config.json + model.safetensors read with numpy; the score is
              the probability of the prompt's Fashion-MNIST class. Used by
              the protocol test and as a template for other scorers.

Usage:
  deploy/scorer_server.py --backend classifier --model-dir runs/fmnist_scorer/final \
      --bind tcp://127.0.0.1:5600
  deploy/scorer_server.py --backend hpsv3 --checkpoint /models/HPSv3.safetensors \
      --device cuda:0 --bind tcp://0.0.0.0:5600

Needs python3-zmq and python3-numpy (Debian); the hpsv3 backend also needs
`make venv-hpsv3` (PyPI hpsv3 in a venv inside the project tree).
Every request is checked (version, counts, sizes, image decoding); a bad
request or a failing model gets a reply with `error` set, never made-up
scores. SIGTERM/SIGINT stop it.

The protobuf messages are small and fixed, so they are encoded and decoded
here with the standard wire format (varints and length-delimited fields)
rather than with generated code; PNG is decoded with zlib (8-bit gray/RGB,
non-interlaced, the images rlrt sends); other PNGs need Pillow.
"""
import argparse
import json
import math
import os
import signal
import struct
import sys
import zlib

PROTOCOL_VERSION = 1
IMAGE_PNG, IMAGE_RAW = 0, 1
MAX_IMAGES = 65536
MAX_SIDE = 16384
MAX_PIXEL_BYTES = 64 << 20  # per image, decoded
MAX_REQUEST_PIXEL_BYTES = 64 << 20  # per request, decoded: small compressed images must not
                                     # add up to more (8 zero 4096² PNGs of 392 KB took 32 s)
PROMPTS = ["a T-shirt", "a trouser", "a pullover", "a dress", "a coat", "a sandal", "a shirt",
           "a sneaker", "a bag", "an ankle boot"]


class BadRequest(Exception):
    pass


# ---- protobuf wire format ---------------------------------------------------------------

def _varint(buf, i):
    shift = result = 0
    while True:
        if i >= len(buf):
            raise BadRequest("truncated varint")
        b = buf[i]
        i += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, i
        shift += 7
        if shift > 63:
            raise BadRequest("varint longer than 10 bytes")


def _fields(buf):
    i = 0
    while i < len(buf):
        key, i = _varint(buf, i)
        num, wt = key >> 3, key & 7
        if wt == 0:
            v, i = _varint(buf, i)
        elif wt == 2:
            n, i = _varint(buf, i)
            if i + n > len(buf):
                raise BadRequest(f"field {num}: length {n} past the end")
            v, i = buf[i:i + n], i + n
        elif wt == 1:
            v, i = buf[i:i + 8], i + 8
        elif wt == 5:
            v, i = buf[i:i + 4], i + 4
        else:
            raise BadRequest(f"field {num}: wire type {wt} unsupported")
        yield num, wt, v


def decode_request(buf):
    req = {"version": 0, "request_id": 0, "format": 0, "width": 0, "height": 0, "channels": 0,
           "images": [], "prompts": []}
    names = {1: "version", 2: "request_id", 3: "format", 4: "width", 5: "height", 6: "channels"}
    for num, wt, v in _fields(buf):
        if num in names and wt == 0:
            req[names[num]] = v
        elif num == 7 and wt == 2:
            req["images"].append(bytes(v))
        elif num == 8 and wt == 2:
            try:
                req["prompts"].append(bytes(v).decode("utf-8"))
            except UnicodeDecodeError as e:
                raise BadRequest(f"prompt {len(req['prompts'])} is not UTF-8: {e}")
    return req


def _key(num, wt):
    return _enc_varint(num << 3 | wt)


def _enc_varint(v):
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def encode_reply(request_id, scores=(), info=(), error=""):
    out = bytearray()
    out += _key(1, 0) + _enc_varint(PROTOCOL_VERSION)
    out += _key(2, 0) + _enc_varint(request_id)
    if scores:
        packed = b"".join(struct.pack("<f", float(s)) for s in scores)
        out += _key(3, 2) + _enc_varint(len(packed)) + packed
    for s in info:
        b = s.encode("utf-8")
        out += _key(4, 2) + _enc_varint(len(b)) + b
    if error:
        b = error.encode("utf-8")
        out += _key(5, 2) + _enc_varint(len(b)) + b
    return bytes(out)


# ---- images ------------------------------------------------------------------------------

def _paeth(a, b, c):
    p = a + b - c
    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
    return a if pa <= pb and pa <= pc else (b if pb <= pc else c)


def decode_png(data, budget=MAX_PIXEL_BYTES):
    """8-bit gray or RGB, non-interlaced → (height, width, channels, bytes);
    refused before inflating when it decodes to more than `budget` bytes."""
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise BadRequest("not a PNG (bad signature)")
    i, idat, hdr = 8, bytearray(), None
    while i + 8 <= len(data):
        n, kind = struct.unpack(">I4s", data[i:i + 8])
        body = data[i + 8:i + 8 + n]
        if len(body) != n or i + 12 + n > len(data):
            raise BadRequest("PNG chunk past the end")
        if zlib.crc32(kind + body) & 0xFFFFFFFF != struct.unpack(">I", data[i + 8 + n:i + 12 + n])[0]:
            raise BadRequest(f"PNG chunk {kind!r}: bad CRC")
        if kind == b"IHDR":
            hdr = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        elif kind == b"IEND":
            break
        i += 12 + n
    if hdr is None:
        raise BadRequest("PNG without IHDR")
    w, h, depth, ctype, _, _, interlace = hdr
    if depth != 8 or ctype not in (0, 2) or interlace or not (0 < w <= MAX_SIDE and 0 < h <= MAX_SIDE):
        raise BadRequest(f"PNG {w}x{h} depth {depth} type {ctype} interlace {interlace}: "
                         "only 8-bit gray/RGB, non-interlaced")
    ch = 1 if ctype == 0 else 3
    stride = w * ch
    want = h * (stride + 1)
    if want > MAX_PIXEL_BYTES:
        raise BadRequest(f"PNG of {w}x{h}x{ch} is larger than {MAX_PIXEL_BYTES} bytes")
    if want > budget:
        raise BadRequest(f"PNG of {w}x{h}x{ch}: the request's images decode to more than "
                         f"{MAX_REQUEST_PIXEL_BYTES} bytes")
    try:  # never inflate more than the header promises (a zlib bomb stops here)
        z = zlib.decompressobj()
        raw = z.decompress(bytes(idat), want + 1)
    except zlib.error as e:
        raise BadRequest(f"PNG data: {e}")
    if len(raw) != want:
        raise BadRequest(f"PNG data holds {len(raw)}+ bytes, expected {want}")
    out, prev = bytearray(), bytearray(stride)
    for y in range(h):
        f, row = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for x in range(stride):
            a = row[x - ch] if x >= ch else 0
            b, c = prev[x], prev[x - ch] if x >= ch else 0
            if f == 1:
                row[x] = (row[x] + a) & 255
            elif f == 2:
                row[x] = (row[x] + b) & 255
            elif f == 3:
                row[x] = (row[x] + ((a + b) >> 1)) & 255
            elif f == 4:
                row[x] = (row[x] + _paeth(a, b, c)) & 255
            elif f != 0:
                raise BadRequest(f"PNG row {y}: filter {f}")
        out += row
        prev = row
    return h, w, ch, bytes(out)


def request_images(req):
    n = len(req["images"])
    if req["version"] != PROTOCOL_VERSION:
        raise BadRequest(f"version {req['version']}, this server speaks {PROTOCOL_VERSION}")
    if n == 0 or n > MAX_IMAGES:
        raise BadRequest(f"{n} images (1..{MAX_IMAGES})")
    if len(req["prompts"]) != n:
        raise BadRequest(f"{n} images but {len(req['prompts'])} prompts")
    imgs, left = [], MAX_REQUEST_PIXEL_BYTES
    for k, data in enumerate(req["images"]):
        try:
            if req["format"] == IMAGE_PNG:
                imgs.append(decode_png(data, left))
                left -= imgs[-1][0] * (imgs[-1][1] * imgs[-1][2] + 1)
            elif req["format"] == IMAGE_RAW:
                w, h, ch = req["width"], req["height"], req["channels"]
                if ch not in (1, 3) or not (0 < w <= MAX_SIDE and 0 < h <= MAX_SIDE) \
                        or w * h * ch > MAX_PIXEL_BYTES:
                    raise BadRequest(f"RAW {w}x{h}x{ch}")
                if len(data) != w * h * ch:
                    raise BadRequest(f"RAW image of {len(data)} bytes, expected {w * h * ch}")
                imgs.append((h, w, ch, data))  # bounded by the message size itself
            else:
                raise BadRequest(f"format {req['format']} unknown")
        except BadRequest as e:
            raise BadRequest(f"image {k}: {e}")
    return imgs


# ---- backends ------------------------------------------------------------------------------

class ClassifierBackend:
    """rlrt's image_classifier kind (common/nn/models/image_classifier.h) in numpy."""

    def __init__(self, model_dir):
        import numpy as np
        self.np = np
        with open(os.path.join(model_dir, "config.json")) as f:
            cfg = json.load(f)["model"]
        if cfg.get("type") != "image_classifier":
            raise SystemExit(f"{model_dir}: model.type is {cfg.get('type')!r}, not image_classifier")
        self.c, self.h, self.w = cfg["channels"], cfg["height"], cfg["width"]
        self.k = cfg["num_classes"]
        self.p = self._safetensors(os.path.join(model_dir, "model.safetensors"))
        for name in ("fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias", "out.weight", "out.bias"):
            if name not in self.p:
                raise SystemExit(f"{model_dir}/model.safetensors: tensor {name} missing")

    def _safetensors(self, path):
        np = self.np
        with open(path, "rb") as f:
            data = f.read()
        n = struct.unpack("<Q", data[:8])[0]
        header = json.loads(data[8:8 + n])
        out = {}
        for name, spec in header.items():
            if name == "__metadata__":
                continue
            if spec["dtype"] != "F32":
                raise SystemExit(f"{path}: {name} is {spec['dtype']}, expected F32")
            a, b = spec["data_offsets"]
            out[name] = np.frombuffer(data[8 + n + a:8 + n + b], dtype="<f4").reshape(spec["shape"])
        return out

    def score(self, imgs, prompts):
        np, p = self.np, self.p
        x = []
        for (h, w, ch, px), prompt in zip(imgs, prompts):
            if (h, w) != (self.h, self.w):
                raise BadRequest(f"image of {w}x{h}, the classifier takes {self.w}x{self.h}")
            a = np.frombuffer(px, dtype=np.uint8).reshape(h, w, ch).astype(np.float32)
            if ch != self.c:  # RGB → gray by the mean, gray → RGB by repetition
                a = a.mean(axis=2, keepdims=True) if self.c == 1 else np.repeat(a, self.c, axis=2)
            x.append(a.transpose(2, 0, 1).reshape(-1) / np.float32(127.5) - np.float32(1.0))
        x = np.stack(x)
        silu = lambda z: z / (1.0 + np.exp(-z))
        h1 = silu(x @ p["fc1.weight"].T + p["fc1.bias"])
        h2 = silu(h1 @ p["fc2.weight"].T + p["fc2.bias"])
        z = h2 @ p["out.weight"].T + p["out.bias"]
        z = z - z.max(axis=1, keepdims=True)
        prob = np.exp(z) / np.exp(z).sum(axis=1, keepdims=True)
        scores, info = [], []
        for i, prompt in enumerate(prompts):
            if prompt not in PROMPTS:
                raise BadRequest(f"prompt {i} {prompt!r} is not one of the classifier's prompts")
            c = PROMPTS.index(prompt)
            scores.append(float(prob[i, c]))
            info.append(json.dumps({"class": c, "argmax": int(prob[i].argmax())}))
        return scores, info


class HPSv3Backend:
    def __init__(self, checkpoint, device):
        if not checkpoint or not os.path.isfile(checkpoint):
            raise SystemExit(
                f"hpsv3: the weights are not on this host (--checkpoint {checkpoint!r} is not a "
                "file). Download HPSv3.safetensors beforehand and pass its path; this server "
                "never fetches weights.")
        try:
            from hpsv3 import HPSv3RewardInferencer
            from PIL import Image
            import torch
        except ImportError as e:
            raise SystemExit(f"hpsv3: {e}; run `make venv-hpsv3` and start the server with "
                             "build/venv-hpsv3/bin/python")
        self.Image, self.torch = Image, torch
        self.model = HPSv3RewardInferencer(checkpoint_path=checkpoint, device=device)

    def score(self, imgs, prompts):
        pil = []
        for h, w, ch, px in imgs:
            mode = "L" if ch == 1 else "RGB"
            pil.append(self.Image.frombytes(mode, (w, h), px).convert("RGB"))
        with self.torch.no_grad():
            rewards = self.model.reward(prompts=list(prompts), image_paths=pil)
        scores = []
        for r in rewards:  # each reward is (mu, sigma); the score is mu
            v = r[0] if hasattr(r, "__len__") else r
            scores.append(float(v))
        return scores, []


# ---- the loop ----------------------------------------------------------------------------

def serve(backend, bind, max_requests):
    import zmq
    ctx = zmq.Context()
    sock = ctx.socket(zmq.REP)
    sock.setsockopt(zmq.LINGER, 0)
    sock.setsockopt(zmq.MAXMSGSIZE, 256 << 20)
    sock.bind(bind)
    stop = []
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.append(1))
    print(f"scorer_server: serving {type(backend).__name__} on {bind}", flush=True)
    served = 0
    while not stop and (max_requests <= 0 or served < max_requests):
        if not sock.poll(200):
            continue
        msg = sock.recv()
        rid = 0
        try:
            req = decode_request(msg)
            rid = req["request_id"]
            imgs = request_images(req)
            scores, info = backend.score(imgs, req["prompts"])
            if len(scores) != len(imgs) or not all(math.isfinite(s) for s in scores):
                raise RuntimeError("the model returned a wrong count or a non-finite score")
            reply = encode_reply(rid, scores, info)
        except BadRequest as e:
            reply = encode_reply(rid, error=f"bad request: {e}")
        except Exception as e:  # the model failed: say so, never invent scores
            reply = encode_reply(rid, error=f"{type(e).__name__}: {e}")
        sock.send(reply)
        served += 1
    sock.close()
    ctx.term()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--backend", choices=["hpsv3", "classifier"], required=True)
    ap.add_argument("--bind", default="tcp://127.0.0.1:5600")
    ap.add_argument("--model-dir", help="classifier: a directory saved by rlrt")
    ap.add_argument("--checkpoint", help="hpsv3: the HPSv3 weights file on this host")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--max-requests", type=int, default=0, help="exit after N requests (tests)")
    a = ap.parse_args()
    if a.backend == "classifier":
        if not a.model_dir or not os.path.isdir(a.model_dir):
            raise SystemExit(f"classifier: --model-dir {a.model_dir!r} is not a directory")
        backend = ClassifierBackend(a.model_dir)
    else:
        backend = HPSv3Backend(a.checkpoint, a.device)
    serve(backend, a.bind, a.max_requests)


if __name__ == "__main__":
    main()
