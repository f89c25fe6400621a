#!/usr/bin/python3
"""gen_regressions.py — writes the hand-made regression inputs of the fuzz
targets: each decoder's known edge cases, and inputs of the class of bug
that once crashed the driver (protobuf-c unpacks nested Values recursively
with no limit, so a ~1.6 MB envelope of 200,000 nested lists overflowed the
stack in rl_msg_recv; fixed by the bounded scan of common/wire/wire_decode.c).

    fuzz/gen_regressions.py           (re)write the files
    fuzz/gen_regressions.py --check   exit 1 if a committed file differs

Files are named for what the decoder must do with them:
  accept-*   decodes (and, for the wire, survives a re-encode round trip)
  reject-*   is refused with an error message
The unit tests (tests/unit/test_wire.c, test_nn_safetensors.c) hold the
decoders to that; tests/unit/test_fuzz_corpus.c runs every file through its
fuzz target's own oracles. Files written by libFuzzer (crash-*, hand_*, ...)
sit beside these and only have to pass the oracles.

Input formats: fuzz_wire_decode takes frames packed as (u32 little-endian
length, bytes)...; fuzz_wire_envelope one rl.Envelope frame;
fuzz_safetensors one safetensors file. Standard library only.
"""
import json
import os
import struct
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "fuzz", "regressions")

# The nesting that crashed the driver, and the limit the decoder enforces
# (RL_WIRE_MAX_META_DEPTH in include/rlrt/wire.h). Without the limit, plain
# protobuf-c unpack overflows an 8 MiB stack from about 4,500 nested lists or
# 3,000 nested maps on (measured with Debian's libprotobuf-c 1.4.1, -O2); the
# other deep inputs use about 5 times that, the envelope the original size.
CRASH_DEPTH = 200000
DEEP_LISTS = 25000
DEEP_MAPS = 15000
MAX_DEPTH = 64

# ---- protobuf encoding (proto/rl.proto) ----------------------------------------


def varint(n):
    n &= (1 << 64) - 1  # negative int64 -> 10-byte two's complement
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def zigzag(n):
    return (n << 1) ^ (n >> 63)


def tag(field, wire):
    return varint(field << 3 | wire)


def vi(field, n):
    return tag(field, 0) + varint(n)


def ld(field, payload):
    if isinstance(payload, str):
        payload = payload.encode()
    return tag(field, 2) + varint(len(payload)) + payload


def f64(field, x):
    return tag(field, 1) + struct.pack("<d", x)


def packed(field, items, enc=varint):
    return ld(field, b"".join(enc(x) for x in items))


def tensor(name, dtype, shape, frame, nbytes):
    return (ld(1, name) + vi(2, dtype) + packed(3, shape) + vi(4, frame) + vi(5, nbytes))


def header(tensors=(), columns=(), meta=None, rows=None, version=1, extra=b""):
    h = vi(1, version) if version else b""
    if rows is not None:
        h += vi(2, zigzag(rows))
    h += b"".join(ld(3, t) for t in tensors)
    h += b"".join(ld(4, c) for c in columns)
    if meta is not None:
        h += ld(5, meta)
    return h + extra


def pack_frames(*frames):
    return b"".join(struct.pack("<I", len(f)) + f for f in frames)


# Value / MapValue / ListValue
def v_int(n):
    return vi(3, n)


def v_str(s):
    return ld(5, s)


def v_map(entries):  # entries: [(key bytes, value bytes)]
    return ld(6, b"".join(ld(1, ld(1, k) + ld(2, v)) for k, v in entries))


def v_list(items):
    return ld(7, b"".join(ld(1, x) for x in items))


def deep_lists(levels, leaf=b"\x08\x01"):
    """A Value of `levels` nested single-item lists (depth = levels), built
    from the inside out in linear time."""
    v = leaf  # Value.null_value
    for _ in range(levels - 1):
        item = ld(1, v)        # ListValue.items
        v = ld(7, item)        # Value.list_value
    return v


def deep_maps(levels, leaf=b"\x08\x01"):
    v = leaf
    for _ in range(levels - 1):
        entry = ld(1, b"k") + ld(2, v)  # MapEntry
        v = ld(6, ld(1, entry))         # Value.map_value{entries}
    return v


def meta_map(value):
    """meta = {"m": value} (meta must be a map; the map adds one level)."""
    return v_map([(b"m", value)])


# Envelope (protocol_version 1, call = 13, configure = 11, reply = 14)
def envelope(body_field, body):
    return vi(1, 1) + vi(2, 7) + ld(body_field, body)


# ---- fuzz_wire_decode ----------------------------------------------------------------


def wire_decode_inputs():
    f = {}
    f32x6 = struct.pack("<6f", *[0.5 * i for i in range(6)])
    good_t = tensor("x", 1, [2, 3], 1, 24)
    # framing
    f["reject-empty-input"] = b""
    f["reject-truncated-length"] = b"\x05\x00"
    f["reject-length-past-end"] = struct.pack("<I", 100) + b"abc"
    f["reject-trailing-partial-length"] = pack_frames(header(rows=0)) + b"\x01\x00"
    f["accept-minimal-header"] = pack_frames(header())
    f["accept-rows-unset"] = pack_frames(header(rows=-1))
    f["accept-zero-rows-tensor"] = pack_frames(
        header([tensor("e", 2, [0, 3], 1, 0)], rows=0), b"")
    # a valid batch whose f32 frame starts at an odd offset of the input
    f["accept-misaligned-frame"] = pack_frames(header([good_t], rows=2), f32x6)
    f["accept-unknown-field"] = pack_frames(header(rows=0, extra=vi(100, 7)))
    f["accept-every-meta-kind"] = pack_frames(header(rows=0, meta=v_map([
        (b"i", v_int(-5)), (b"s", v_str("h\xe9llo")), (b"d", f64(4, 2.5)),
        (b"b", vi(2, 1)), (b"n", vi(1, 1)), (b"l", v_list([v_int(1), v_str("x")])),
        (b"m", v_map([(b"k", v_int(3))]))])))
    # header fields
    f["reject-version-2"] = pack_frames(header(rows=0, version=2))
    f["reject-rows-below-minus-1"] = pack_frames(header(rows=-2))
    f["reject-rows-unset-with-tensor"] = pack_frames(header([good_t], rows=-1), f32x6)
    f["reject-frame-count-short"] = pack_frames(header([good_t], rows=2))
    f["reject-frame-count-long"] = pack_frames(header([good_t], rows=2), f32x6, b"")
    f["reject-4097-tensors"] = pack_frames(header(
        [tensor("t%d" % i, 6, [0], i + 1, 0) for i in range(4097)], rows=0),
        *([b""] * 4097))
    # tensor specs
    f["reject-dtype-0"] = pack_frames(header([tensor("x", 0, [2, 3], 1, 24)], rows=2), f32x6)
    f["reject-dtype-99"] = pack_frames(header([tensor("x", 99, [2, 3], 1, 24)], rows=2), f32x6)
    f["reject-ndim-0"] = pack_frames(header([ld(1, "x") + vi(2, 1) + vi(4, 1) + vi(5, 0)],
                                            rows=2), b"")
    f["reject-ndim-9"] = pack_frames(header([tensor("x", 6, [2] + [1] * 8, 1, 2)], rows=2),
                                     b"\0\0")
    f["reject-negative-dim"] = pack_frames(header([tensor("x", 1, [2, -3], 1, 24)], rows=2),
                                           f32x6)
    f["reject-shape-overflow"] = pack_frames(
        header([tensor("x", 6, [2, 1 << 40, 1 << 40], 1, 0)], rows=2), b"")
    f["reject-nbytes-overflow"] = pack_frames(
        header([tensor("x", 2, [2, 1 << 61], 1, 0)], rows=2), b"")
    f["reject-nbytes-mismatch"] = pack_frames(header([tensor("x", 1, [2, 3], 1, 20)], rows=2),
                                              f32x6)
    f["reject-frame-length-mismatch"] = pack_frames(header([good_t], rows=2), f32x6[:20])
    f["reject-frame-index-0"] = pack_frames(header([tensor("x", 1, [2, 3], 0, 24)], rows=2),
                                            f32x6)
    f["reject-frame-index-past-end"] = pack_frames(
        header([tensor("x", 1, [2, 3], 7, 24)], rows=2), f32x6)
    f["reject-frame-reused"] = pack_frames(
        header([good_t, tensor("y", 1, [2, 3], 1, 24)], rows=2), f32x6, f32x6)
    f["reject-dim0-not-rows"] = pack_frames(header([good_t], rows=3), f32x6)
    f["reject-empty-tensor-name"] = pack_frames(header([tensor("", 1, [2, 3], 1, 24)],
                                                       rows=2), f32x6)
    f["reject-duplicate-tensor-name"] = pack_frames(
        header([good_t, tensor("x", 1, [2, 3], 2, 24)], rows=2), f32x6, f32x6)
    # columns
    col_i = ld(1, "c") + vi(2, 2) + packed(3, [1, 2])
    f["accept-columns-every-type"] = pack_frames(header(rows=2, columns=[
        ld(1, "s") + vi(2, 1) + ld(5, "a") + ld(5, ""),
        col_i,
        ld(1, "d") + vi(2, 3) + packed(4, [0.5, -1.0], lambda x: struct.pack("<d", x)),
        ld(1, "b") + vi(2, 4) + ld(5, b"\0\xff") + ld(5, b""),
        ld(1, "sl") + vi(2, 5) + ld(5, "p") + ld(5, "q") + ld(5, "r") + packed(6, [2, 1]),
        ld(1, "il") + vi(2, 6) + packed(3, [7]) + packed(6, [0, 1]),
        ld(1, "dl") + vi(2, 7) + packed(4, [1.5], lambda x: struct.pack("<d", x)) +
        packed(6, [1, 0]),
        ld(1, "bl") + vi(2, 8) + ld(5, b"\x00") + packed(6, [1, 0])]))
    f["reject-tensor-column-same-name"] = pack_frames(
        header([good_t], rows=2, columns=[ld(1, "x") + vi(2, 2) + packed(3, [1, 2])]), f32x6)
    f["reject-duplicate-column-name"] = pack_frames(header(rows=2, columns=[col_i, col_i]))
    f["reject-column-type-0"] = pack_frames(header(rows=2, columns=[
        ld(1, "c") + vi(2, 0) + packed(3, [1, 2])]))
    f["reject-column-type-9"] = pack_frames(header(rows=2, columns=[
        ld(1, "c") + vi(2, 9) + packed(3, [1, 2])]))
    f["reject-column-wrong-field"] = pack_frames(header(rows=2, columns=[
        ld(1, "c") + vi(2, 2) + packed(4, [1.0, 2.0], lambda x: struct.pack("<d", x))]))
    f["reject-column-too-few-values"] = pack_frames(header(rows=3, columns=[col_i]))
    f["reject-column-list-len-past-values"] = pack_frames(header(rows=2, columns=[
        ld(1, "l") + vi(2, 6) + packed(3, [1, 2]) + packed(6, [1, (1 << 62)])]))
    f["reject-column-list-len-negative"] = pack_frames(header(rows=2, columns=[
        ld(1, "l") + vi(2, 6) + packed(3, [1, 2]) + packed(6, [3, -1])]))
    f["reject-column-list-len-on-scalar"] = pack_frames(header(rows=2, columns=[
        col_i + packed(6, [1, 1])]))
    f["reject-string-with-nul"] = pack_frames(header(rows=1, columns=[
        ld(1, "s") + vi(2, 1) + ld(5, b"a\0b")]))
    f["reject-4097-columns"] = pack_frames(header(rows=0, columns=[
        ld(1, "c%d" % i) + vi(2, 2) for i in range(4097)]))
    # meta
    f["reject-meta-not-a-map"] = pack_frames(header(rows=0, meta=v_int(3)))
    f["reject-meta-invalid-utf8"] = pack_frames(header(rows=0, meta=v_map([
        (b"k", v_str(b"\xc3\x28"))])))
    f["reject-meta-key-invalid-utf8"] = pack_frames(header(rows=0, meta=v_map([
        (b"\xff", v_int(1))])))
    f["reject-meta-empty-value"] = pack_frames(header(rows=0, meta=v_map([(b"k", b"")])))
    # the meta map is depth 1, so a value nested MAX_DEPTH - 1 deep is the limit
    f["accept-meta-depth-64"] = pack_frames(header(rows=0, meta=meta_map(
        deep_lists(MAX_DEPTH - 1))))
    f["reject-meta-depth-65"] = pack_frames(header(rows=0, meta=meta_map(
        deep_lists(MAX_DEPTH))))
    # the class of the driver crash, in a DataProto header instead of an envelope
    f[f"reject-meta-deep-lists-{DEEP_LISTS}"] = pack_frames(header(rows=0, meta=meta_map(
        deep_lists(DEEP_LISTS))))
    f[f"reject-meta-deep-maps-{DEEP_MAPS}"] = pack_frames(header(rows=0, meta=meta_map(
        deep_maps(DEEP_MAPS))))
    # protobuf garbage
    f["reject-field-number-0"] = pack_frames(b"\x00\x01" + header(rows=0))
    f["reject-wire-type-7"] = pack_frames(header(rows=0) + b"\x0f")
    f["reject-varint-11-bytes"] = pack_frames(b"\x08" + b"\xff" * 10 + b"\x01")
    f["reject-submessage-past-end"] = pack_frames(header(rows=0) + b"\x2a\x10\x30")
    f["reject-invalid-tag-in-tensor"] = pack_frames(header([b"\x00" + good_t], rows=2), f32x6)
    return f


# ---- fuzz_wire_envelope ----------------------------------------------------------------


def wire_envelope_inputs():
    f = {}
    call = lambda args: vi(1, 3) + ld(2, "generate") + ld(4, args)  # noqa: E731
    f["accept-empty"] = b""
    f["accept-heartbeat"] = envelope(16, vi(1, 123456789))
    f["accept-call-args-depth-64"] = envelope(13, call(deep_lists(MAX_DEPTH)))
    f["reject-call-args-depth-65"] = envelope(13, call(deep_lists(MAX_DEPTH + 1)))
    # the input class that crashed the driver: ~1.6 MB, 200,000 nested lists
    f["reject-call-args-deep-lists-200000"] = envelope(13, call(deep_lists(CRASH_DEPTH)))
    f[f"reject-configure-extra-deep-maps-{DEEP_MAPS}"] = envelope(
        11, ld(1, "lr: 1") + ld(2, "yaml") + ld(5, deep_maps(DEEP_MAPS)))
    f[f"reject-reply-result-deep-lists-{DEEP_LISTS}"] = envelope(
        14, vi(1, 3) + ld(3, deep_lists(DEEP_LISTS)))
    f["reject-truncated-body"] = envelope(13, call(v_int(1)))[:-3]
    f["reject-field-number-0-in-body"] = envelope(12, b"\x00\x00" + ld(1, "m"))
    # field 0 written as a two-byte varint, inside every body the envelope can
    # carry: protobuf-c accepts it and then cannot read its own re-encoding
    # (found by CI's fuzz run in Challenge, a body the scan once skipped)
    for field in range(10, 20):
        f[f"reject-noncanonical-field-0-in-body-{field}"] = envelope(
            field, b"\x80\x00\x9a\xef\x3a")
    f["reject-wire-type-6"] = vi(1, 1) + b"\x0e"
    f["reject-varint-11-bytes"] = b"\x10" + b"\xff" * 10 + b"\x01"
    return f


# ---- fuzz_safetensors ---------------------------------------------------------------


def st_file(hdr, data=b"", raw_header=None):
    h = raw_header if raw_header is not None else json.dumps(hdr).encode()
    return struct.pack("<Q", len(h)) + h + data


def safetensors_inputs():
    f = {}
    f["reject-empty"] = b""
    f["reject-header-length-only"] = struct.pack("<Q", 0)
    f["accept-empty-object"] = st_file({})
    f["accept-f32-and-bf16"] = st_file({
        "__metadata__": {"format": "pt"},
        "a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
        "b": {"dtype": "BF16", "shape": [1, 2], "data_offsets": [8, 12]}},
        struct.pack("<2f", 1.5, -2.0) + b"\x80\x3f\x00\xc0")
    # jansson refuses nesting past its own limit instead of recursing without one
    f["reject-deep-json-100000"] = st_file(None, raw_header=b"[" * 100000 + b"]" * 100000)
    f["reject-not-an-object"] = st_file([1, 2])
    f["reject-offsets-reversed"] = st_file(
        {"a": {"dtype": "F32", "shape": [1], "data_offsets": [4, 0]}}, b"\0" * 4)
    f["reject-gap-between-tensors"] = st_file(
        {"a": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]},
         "b": {"dtype": "U8", "shape": [1], "data_offsets": [2, 3]}}, b"\0" * 3)
    f["reject-unknown-dtype"] = st_file(
        {"a": {"dtype": "F8_E4M3X", "shape": [1], "data_offsets": [0, 1]}}, b"\0")
    f["reject-negative-shape"] = st_file(
        {"a": {"dtype": "U8", "shape": [-1], "data_offsets": [0, 0]}})
    f["reject-metadata-not-strings"] = st_file({"__metadata__": {"k": 1}})
    return f


TARGETS = {
    "fuzz_wire_decode": wire_decode_inputs,
    "fuzz_wire_envelope": wire_envelope_inputs,
    "fuzz_safetensors": safetensors_inputs,
}


def main():
    check = "--check" in sys.argv[1:]
    bad = 0
    for target, make in TARGETS.items():
        d = os.path.join(OUT, target)
        os.makedirs(d, exist_ok=True)
        for name, data in sorted(make().items()):
            path = os.path.join(d, name)
            if check:
                try:
                    with open(path, "rb") as fh:
                        same = fh.read() == data
                except OSError:
                    same = False
                if not same:
                    print(f"gen_regressions: {os.path.relpath(path, ROOT)} is missing or "
                          "differs from what fuzz/gen_regressions.py writes")
                    bad = 1
                continue
            with open(path, "wb") as fh:
                fh.write(data)
        if not check:
            print(f"gen_regressions: {target}: {len(make())} files in "
                  f"{os.path.relpath(d, ROOT)}")
    return bad


if __name__ == "__main__":
    sys.exit(main())
