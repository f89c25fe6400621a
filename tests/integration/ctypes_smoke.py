"""ctypes_smoke.py — the public C API is callable from another language.

Loads $BUILD/lib/librlrt.so (BUILD defaults to "build") with ctypes, builds two
DataProtos (an f32 tensor "x" of shape (rows, 2) and an int64 column "id"),
concatenates them, checks rows and values, then sends the result through the
wire format (encode to packed bytes, decode) and checks it again.
Exit 0 = pass, 77 = skipped (library not built), anything else = fail.
"""
import ctypes as C
import os
import sys

build = os.environ.get("BUILD", "build")
path = os.path.join(build, "lib", "librlrt.so")
if not os.path.exists(path):
    print(f"skipped: {path} not built")
    sys.exit(77)

# a sanitizer build of the library: the ASan runtime first (re-runs this script)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
import asan_preload  # noqa: E402
asan_preload.reexec_if_needed(path)

lib = C.CDLL(os.path.abspath(path))

RL_F32 = 1
RL_COL_INT64 = 2
vp = C.c_void_p
lib.rl_dataproto_new.restype = vp
lib.rl_dataproto_free.argtypes = [vp]
lib.rl_dataproto_rows.argtypes = [vp]
lib.rl_dataproto_rows.restype = C.c_int64
lib.rl_dataproto_new_tensor.argtypes = [vp, C.c_char_p, C.c_int, C.c_int, C.POINTER(C.c_int64)]
lib.rl_dataproto_new_tensor.restype = vp
lib.rl_dataproto_tensor.argtypes = [vp, C.c_char_p]
lib.rl_dataproto_tensor.restype = vp
lib.rl_dataproto_new_column.argtypes = [vp, C.c_char_p, C.c_int]
lib.rl_dataproto_new_column.restype = vp
lib.rl_dataproto_column.argtypes = [vp, C.c_char_p]
lib.rl_dataproto_column.restype = vp
lib.rl_column_set_i64.argtypes = [vp, C.c_int64, C.c_int64]
lib.rl_column_set_i64.restype = C.c_int
lib.rl_column_i64.argtypes = [vp, C.c_int64]
lib.rl_column_i64.restype = C.c_int64
lib.rl_dataproto_concat.argtypes = [C.POINTER(vp), C.c_int]
lib.rl_dataproto_concat.restype = vp
lib.rl_tensor_nbytes.argtypes = [vp]
lib.rl_tensor_nbytes.restype = C.c_size_t
lib.rl_error_message.restype = C.c_char_p
lib.rl_wire_encode_packed.argtypes = [vp, C.POINTER(vp), C.POINTER(C.c_size_t)]
lib.rl_wire_encode_packed.restype = C.c_int
lib.rl_wire_decode_packed.argtypes = [vp, C.c_size_t, C.POINTER(vp)]
lib.rl_wire_decode_packed.restype = C.c_int
lib.rl_dataproto_equal.argtypes = [vp, vp]
lib.rl_dataproto_equal.restype = C.c_int
libc = C.CDLL(None)
libc.free.argtypes = [vp]


class Storage(C.Structure):
    # leading fields of rl_storage (include/rlrt/tensor.h)
    _fields_ = [("data", vp), ("nbytes", C.c_size_t)]


class Tensor(C.Structure):
    # leading fields of rl_tensor: storage, offset, dtype, ndim, shape[8]
    _fields_ = [("storage", C.POINTER(Storage)), ("offset", C.c_size_t), ("dtype", C.c_int),
                ("ndim", C.c_int), ("shape", C.c_int64 * 8)]


def tensor_floats(t):
    tt = C.cast(t, C.POINTER(Tensor)).contents
    n = lib.rl_tensor_nbytes(t) // 4
    addr = tt.storage.contents.data + tt.offset
    return (C.c_float * n).from_address(addr), [tt.shape[i] for i in range(tt.ndim)]


def check(cond, what):
    if not cond:
        print("FAIL:", what, "| rl_error_message:", lib.rl_error_message().decode())
        sys.exit(1)


def make(rows, base):
    dp = lib.rl_dataproto_new()
    shape = (C.c_int64 * 2)(rows, 2)
    t = lib.rl_dataproto_new_tensor(dp, b"x", RL_F32, 2, shape)
    check(t, "new_tensor")
    x, _ = tensor_floats(t)
    for i in range(rows * 2):
        x[i] = base + i * 0.5
    c = lib.rl_dataproto_new_column(dp, b"id", RL_COL_INT64)
    check(c, "new_column")
    for r in range(rows):
        check(lib.rl_column_set_i64(c, r, base * 100 + r) == 0, "set_i64")
    return dp


a = make(3, 1)
b = make(2, 7)
items = (vp * 2)(a, b)
cat = lib.rl_dataproto_concat(items, 2)
check(cat, "concat")
check(lib.rl_dataproto_rows(cat) == 5, "rows 5")
x, shape = tensor_floats(lib.rl_dataproto_tensor(cat, b"x"))
expect = [1 + i * 0.5 for i in range(6)] + [7 + i * 0.5 for i in range(4)]
check(shape == [5, 2], f"shape {shape}")
xs = list(x)
check(xs == expect, f"x {xs} != {expect}")
col = lib.rl_dataproto_column(cat, b"id")
ids = [lib.rl_column_i64(col, r) for r in range(5)]
check(ids == [100, 101, 102, 700, 701], f"id {ids}")

# through the wire format and back
buf = vp()
n = C.c_size_t()
check(lib.rl_wire_encode_packed(cat, C.byref(buf), C.byref(n)) == 0, "encode")
back = vp()
check(lib.rl_wire_decode_packed(buf, n, C.byref(back)) == 0, "decode")
check(lib.rl_dataproto_equal(cat, back) == 1, "wire round trip equal")
libc.free(buf)

# a decoder error comes back as a code and a message
bad = vp()
junk = C.create_string_buffer(b"\x03\x00\x00\x00\xff\xff\xff", 7)
rc = lib.rl_wire_decode_packed(junk, 7, C.byref(bad))
check(rc == -4 and not bad.value, f"junk decode rc {rc}")
msg = lib.rl_error_message().decode()
check("header" in msg, f"error message {msg!r}")

for dp in (a, b, cat, back):
    lib.rl_dataproto_free(dp)
print(f"ctypes smoke ok: rows 5, x {xs[:4]}..., id {ids}; junk -> {msg!r}")
