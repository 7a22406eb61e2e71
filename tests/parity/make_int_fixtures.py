#!/usr/bin/python3
"""PyTorch 1.13 fixtures for the int32 and uint8 dtypes (issue 23, item 5).

Run with Debian's python3 (torch 1.13, numpy):

    /usr/bin/python3 tests/parity/make_int_fixtures.py    # rewrites tests/parity/int_fixtures/

Layout: int_fixtures/<case>/ holds each input as <name>.npy and the result as
out.npy, every array in its own dtype ('|u1' uint8, '<i4' int32, '<i8' int64,
'<f4' float32, '|b1' bool), so the C++ test (IntDtypeParity in
tests/framework/test_int_dtypes.cpp) checks the result's dtype as well as its
values. Integer ops have no gradient, so there are no gradient files.
int_fixtures/promote_types/out.npy is torch.promote_types over every pair of
tiny's dtypes, as tiny's dtype codes (the order of CODES below).

Each case seeds torch with zlib.crc32(<case name>), so adding a case never
changes the others; running the script twice writes the same bytes.
"""
import os
import shutil
import sys
import zlib

import numpy as np
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, "int_fixtures")

# tiny's dtype codes (framework/include/tiny/dtype.h): stable, never reordered.
CODES = [torch.bool, torch.int64, torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int32,
         torch.uint8]

u8 = torch.uint8
i32 = torch.int32


def ints(*shape, low=-100, high=100, dtype=i32):
    return torch.randint(low, high, shape, dtype=dtype)


def bytes_(*shape):
    return torch.randint(0, 256, shape, dtype=u8)


def mask(*shape):
    return torch.rand(shape) < 0.5


def nonzero_ints(*shape):
    x = ints(*shape, low=1, high=50)
    return torch.where(torch.rand(shape) < 0.5, -x, x)


def distinct(*shape, dtype):
    n = int(np.prod(shape))
    return torch.randperm(n).to(dtype).view(shape)


# name -> (inputs, computation). Every arithmetic case keeps int32 values far
# from overflow (PyTorch wraps there, but C++ signed overflow is undefined);
# uint8 cases do wrap, as they do in PyTorch.
CASES = {
    "add_u8_wraps": (lambda: dict(a=bytes_(4, 5), b=bytes_(4, 5)), lambda a: a["a"] + a["b"]),
    "sub_u8_wraps": (lambda: dict(a=bytes_(3, 4), b=bytes_(3, 4)), lambda a: a["a"] - a["b"]),
    "mul_u8_broadcast": (lambda: dict(a=bytes_(3, 1), b=bytes_(1, 4)), lambda a: a["a"] * a["b"]),
    "neg_u8": (lambda: dict(a=bytes_(7)), lambda a: -a["a"]),
    "add_u8_i32": (lambda: dict(a=bytes_(2, 3), b=ints(2, 3)), lambda a: a["a"] + a["b"]),
    "add_i32_i64": (lambda: dict(a=ints(5), b=ints(5, dtype=torch.int64)), lambda a: a["a"] + a["b"]),
    "add_u8_bool": (lambda: dict(a=bytes_(6), b=mask(6)), lambda a: a["a"] + a["b"]),
    "mul_i32_f32": (lambda: dict(a=ints(3, 4), b=torch.randn(3, 4)), lambda a: a["a"] * a["b"]),
    "add_u8_int_scalar": (lambda: dict(a=bytes_(8)), lambda a: a["a"] + 7),
    "mul_i32_int_scalar": (lambda: dict(a=ints(6)), lambda a: a["a"] * -3),
    "mul_i32_float_scalar": (lambda: dict(a=ints(6)), lambda a: a["a"] * 2.5),
    "add_u8_i64_0d": (lambda: dict(a=bytes_(5), b=torch.tensor(9)), lambda a: a["a"] + a["b"]),
    "div_i32_true": (lambda: dict(a=ints(4, 3), b=nonzero_ints(4, 3)), lambda a: a["a"] / a["b"]),
    "div_u8_scalar": (lambda: dict(a=bytes_(6)), lambda a: a["a"] / 4),
    "abs_i32": (lambda: dict(a=ints(9)), lambda a: a["a"].abs()),
    "abs_u8": (lambda: dict(a=bytes_(5)), lambda a: a["a"].abs()),
    "sign_i32": (lambda: dict(a=ints(9)), lambda a: a["a"].sign()),
    "relu_i32": (lambda: dict(a=ints(9)), lambda a: torch.relu(a["a"])),
    "clamp_i32": (lambda: dict(a=ints(3, 3)), lambda a: a["a"].clamp(-20, 30)),
    "pow_i32_scalar": (lambda: dict(a=ints(7, low=-30, high=30)), lambda a: a["a"] ** 3),
    "pow_u8_scalar_wraps": (lambda: dict(a=bytes_(7)), lambda a: a["a"] ** 2),
    "maximum_u8": (lambda: dict(a=bytes_(2, 5), b=bytes_(2, 5)), lambda a: torch.maximum(a["a"], a["b"])),
    "minimum_i32": (lambda: dict(a=ints(2, 5), b=ints(2, 5)), lambda a: torch.minimum(a["a"], a["b"])),
    "lt_i32_u8": (lambda: dict(a=ints(8), b=bytes_(8)), lambda a: a["a"] < a["b"]),
    "eq_u8_scalar": (lambda: dict(a=torch.randint(0, 3, (9,), dtype=u8)), lambda a: a["a"] == 1),
    "where_u8_i32": (lambda: dict(cond=mask(2, 4), a=bytes_(2, 4), b=ints(2, 4)),
                     lambda a: torch.where(a["cond"], a["a"], a["b"])),
    "sum_u8_all": (lambda: dict(a=bytes_(5, 7)), lambda a: a["a"].sum()),
    "sum_i32_dim": (lambda: dict(a=ints(3, 4, 2)), lambda a: a["a"].sum(dim=1)),
    "prod_u8_dim": (lambda: dict(a=torch.randint(0, 6, (3, 4), dtype=u8)), lambda a: a["a"].prod(dim=1)),
    "cumsum_i32": (lambda: dict(a=ints(2, 6)), lambda a: a["a"].cumsum(dim=1)),
    "amax_u8_dim": (lambda: dict(a=bytes_(4, 5)), lambda a: a["a"].amax(dim=0)),
    "max_i32_all": (lambda: dict(a=ints(3, 5)), lambda a: a["a"].max()),
    "argmax_u8_dim": (lambda: dict(a=distinct(3, 6, dtype=u8)), lambda a: a["a"].argmax(dim=1)),
    "sort_i32": (lambda: dict(a=distinct(2, 7, dtype=i32) - 5), lambda a: torch.sort(a["a"], dim=1)[0]),
    "to_f32_from_u8": (lambda: dict(a=bytes_(6)), lambda a: a["a"].to(torch.float32)),
    "to_i32_from_f32_truncates": (lambda: dict(a=torch.randn(8) * 50), lambda a: a["a"].to(i32)),
    "to_u8_from_i32_wraps": (lambda: dict(a=ints(8, low=-300, high=300)), lambda a: a["a"].to(u8)),
    "to_u8_from_f32": (lambda: dict(a=torch.rand(8) * 255), lambda a: a["a"].to(u8)),
    "to_i32_from_bool": (lambda: dict(a=mask(5)), lambda a: a["a"].to(i32)),
    "to_i64_from_u8": (lambda: dict(a=bytes_(5)), lambda a: a["a"].to(torch.int64)),
    "mm_i32": (lambda: dict(a=ints(3, 4, low=-50, high=50), b=ints(4, 2, low=-50, high=50)),
               lambda a: torch.mm(a["a"], a["b"])),
    "mm_u8_wraps": (lambda: dict(a=bytes_(2, 3), b=bytes_(3, 4)), lambda a: torch.mm(a["a"], a["b"])),
    "index_select_i32_index": (lambda: dict(x=torch.randn(5, 3), index=torch.tensor([4, 0, 4, 2], dtype=i32)),
                               lambda a: torch.index_select(a["x"], 0, a["index"])),
    "embedding_i32_indices": (lambda: dict(weight=torch.randn(6, 3), index=torch.tensor([[5, 1], [0, 5]], dtype=i32)),
                              lambda a: F.embedding(a["index"], a["weight"])),
    "arange_u8": (lambda: dict(), lambda a: torch.arange(7, dtype=u8)),
    "arange_i32_step": (lambda: dict(), lambda a: torch.arange(-4, 9, 3, dtype=i32)),
}

KINDS = {np.dtype(np.uint8), np.dtype(np.int32), np.dtype(np.int64), np.dtype(np.float32), np.dtype(np.bool_)}


def save(directory, name, tensor):
    arr = tensor.detach().cpu().numpy().copy(order="C")
    assert arr.dtype in KINDS, (directory, name, arr.dtype)
    path = os.path.join(directory, name + ".npy")
    np.save(path, arr)
    back = np.load(path)
    assert back.dtype == arr.dtype and np.array_equal(back, arr), (directory, name)


def main():
    torch.set_num_threads(1)
    if os.path.isdir(FIXTURES):
        shutil.rmtree(FIXTURES)
    total = 0
    for name, (build, compute) in CASES.items():
        torch.manual_seed(zlib.crc32(name.encode()))
        inputs = build()
        files = dict(inputs)
        files["out"] = compute(inputs)
        directory = os.path.join(FIXTURES, name)
        os.makedirs(directory)
        for stem, t in files.items():
            save(directory, stem, t)
    promote = torch.tensor([[CODES.index(torch.promote_types(a, b)) for b in CODES] for a in CODES])
    os.makedirs(os.path.join(FIXTURES, "promote_types"))
    save(os.path.join(FIXTURES, "promote_types"), "out", promote)
    for root, _, names in os.walk(FIXTURES):
        total += sum(os.path.getsize(os.path.join(root, f)) for f in names)
    print("wrote %d cases to %s (%d bytes, torch %s)" % (len(CASES) + 1, os.path.relpath(FIXTURES), total,
                                                       torch.__version__))
    assert total < 128 << 10


if __name__ == "__main__":
    sys.exit(main())
