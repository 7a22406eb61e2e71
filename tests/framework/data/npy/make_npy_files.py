#!/usr/bin/python3
"""Writes the small .npy files that tests/framework/test_npy_format.cpp reads.

Regenerate (from the repository root) with Debian's python3, which has numpy:
    /usr/bin/python3 tests/framework/data/npy/make_npy_files.py
Every value is a simple function of the element index so that the C++ test can
recompute it: element i of a numeric array is i (bool: i % 2 == 0), reshaped.
"""
import os

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


def save(name, arr, version=None):
    path = os.path.join(HERE, name)
    if version is None:
        np.save(path, arr)
    else:
        with open(path, "wb") as f:
            np.lib.format.write_array(f, arr, version=version)


# One file per supported dtype: arange(6) reshaped to (2, 3).
for code in ["f2", "f4", "f8", "i1", "i2", "i4", "i8", "u1", "u2", "u4", "u8"]:
    save(f"dtype_{code}.npy", np.arange(6).astype("<" + code).reshape(2, 3))
save("dtype_b1.npy", (np.arange(6) % 2 == 0).reshape(2, 3))

save("scalar_f8.npy", np.array(3.25, dtype="<f8"))              # 0-d
save("empty_f4.npy", np.zeros((0, 3), dtype="<f4"))              # no elements
save("vector_i8.npy", np.arange(5, dtype="<i8"))                 # 1-d: shape (5,)
save("fortran_f4.npy", np.asfortranarray(np.arange(6, dtype="<f4").reshape(2, 3)))  # fortran_order True
save("v2_i4.npy", np.arange(6, dtype="<i4").reshape(3, 2), version=(2, 0))
save("v3_f4.npy", np.arange(4, dtype="<f4"), version=(3, 0))

# Files the reader must refuse with a helpful message.
save("big_endian_f4.npy", np.arange(3, dtype=">f4"))
save("complex_c8.npy", np.arange(3).astype("<c8"))
save("structured.npy", np.zeros(2, dtype=[("x", "<f4"), ("y", "<i4")]))
