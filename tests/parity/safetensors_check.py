#!/usr/bin/python3
"""Safetensors interoperability between tiny and PyTorch, in both directions.

Run with Debian's python3 (torch 1.13, numpy); there is no `safetensors` Python
package here, so this script reads and writes the format itself (it is small:
see read_safetensors / write_safetensors).

    /usr/bin/python3 tests/parity/safetensors_check.py            # check both committed files
    /usr/bin/python3 tests/parity/safetensors_check.py --write    # rewrite from_torch.* (byte-identical)
    /usr/bin/python3 tests/parity/safetensors_check.py --tiny-file PATH   # check a file tiny::save wrote

(a) tiny -> PyTorch: `from_tiny.safetensors` was written by tiny::save (the C++
    test SafetensorsParity.WritesTheFileForPyTorch writes it and checks the
    committed copy is byte-identical). This script reads it and compares every
    tensor and the metadata with TINY_EXPECTED(), built here with torch.
(b) PyTorch -> tiny: `from_torch.safetensors` is written here from torch tensors,
    laid out as Hugging Face's `safetensors.torch.save_file` lays it out (data
    sorted by dtype alignment, then name; compact JSON, `__metadata__` first).
    Each tensor is also saved with numpy as `from_torch_expected/<name>.npy`; the
    C++ test SafetensorsParity.LoadsTheFileWrittenByPyTorch loads both and compares.
"""
import argparse
import json
import os
import struct
import sys
from collections import OrderedDict

import numpy as np
import torch

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "safetensors")
DTYPES = {"F32": torch.float32, "F64": torch.float64, "I64": torch.int64, "I32": torch.int32, "U8": torch.uint8,
          "BOOL": torch.bool}
NAMES = {v: k for k, v in DTYPES.items()}
ITEMSIZE = {"F32": 4, "F64": 8, "I64": 8, "I32": 4, "U8": 1, "BOOL": 1}
# The reference's dtype order (safetensors/src/tensor.rs `enum Dtype`), used to sort like save_file.
RANK = {"BOOL": 0, "U8": 1, "I32": 9, "F32": 11, "F64": 12, "I64": 13}


def read_safetensors(path):
    """Returns (OrderedDict name -> tensor in header order, metadata dict), checking the format."""
    raw = open(path, "rb").read()
    assert len(raw) >= 8, f"{path}: shorter than 8 bytes"
    (n,) = struct.unpack("<Q", raw[:8])
    assert 8 + n <= len(raw), f"{path}: header length {n} larger than the file"
    text = raw[8:8 + n].decode("utf-8")
    decoder = json.JSONDecoder(object_pairs_hook=lambda kv: kv)  # keeps key order and duplicates
    pairs, stop = decoder.raw_decode(text)
    assert n % 8 == 0 and text[stop:].strip(" ") == "", f"{path}: header not space-padded to 8 bytes"
    keys = [k for k, _ in pairs]
    assert len(keys) == len(set(keys)), f"{path}: duplicate keys"
    data = raw[8 + n:]
    tensors, metadata, entries = {}, {}, []
    for name, info in pairs:
        if name == "__metadata__":
            metadata = dict(info)
            assert all(isinstance(v, str) for v in metadata.values()), metadata
            continue
        info = dict(info)
        assert sorted(info) == ["data_offsets", "dtype", "shape"], info
        entries.append((info["data_offsets"], name, info))
    end = 0
    for (begin, stop), name, info in sorted(entries, key=lambda e: e[0]):  # data order
        shape = info["shape"]
        assert begin == end, f"{name}: hole or overlap at {begin} (expected {end})"
        assert stop - begin == int(np.prod(shape, dtype=np.int64)) * ITEMSIZE[info["dtype"]], name
        buf = bytearray(data[begin:stop])
        dtype = DTYPES[info["dtype"]]
        t = torch.frombuffer(buf, dtype=dtype) if buf else torch.empty(0, dtype=dtype)
        tensors[name] = t.reshape(shape).clone()
        end = stop
    assert end == len(data), f"{path}: {len(data) - end} bytes after the last tensor"
    order = [k for k in keys if k != "__metadata__"]
    return OrderedDict((k, tensors[k]) for k in order), metadata


def write_safetensors(path, tensors, metadata):
    """Writes `tensors` (name -> tensor) the way safetensors.torch.save_file does."""
    items = sorted(tensors.items(), key=lambda kv: (-RANK[NAMES[kv[1].dtype]], kv[0]))
    header, chunks, offset = OrderedDict(), [], 0
    if metadata:
        header["__metadata__"] = metadata
    for name, t in items:
        b = t.contiguous().numpy().tobytes()
        header[name] = {"dtype": NAMES[t.dtype], "shape": list(t.shape), "data_offsets": [offset, offset + len(b)]}
        chunks.append(b)
        offset += len(b)
    text = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(chunks))


def torch_source():
    """The tensors of from_torch.safetensors (seeded: the file is byte-identical on every run)."""
    g = torch.Generator().manual_seed(20240611)
    base = torch.randn(4, 3, generator=g)
    return OrderedDict([
        ("encoder.weight", torch.randn(5, 3, generator=g)),
        ("encoder.bias", torch.randn(5, generator=g, dtype=torch.float64)),
        ("head.weight_t", base.t()),  # a non-contiguous view, saved contiguous (as save_file requires)
        ("steps", torch.tensor(123456789012345, dtype=torch.int64)),  # 0-d
        ("labels", torch.tensor([-(2 ** 63), -1, 0, 7, 2 ** 63 - 1], dtype=torch.int64)),
        ("mask", torch.rand(2, 3, generator=g) > 0.5),
        ("empty", torch.zeros(0, 4)),
        ("temperature", torch.tensor(0.25, dtype=torch.float32)),
        ("pixels", torch.tensor([[0, 1, 127], [128, 200, 255]], dtype=torch.uint8)),
        ("token_ids", torch.tensor([-(2 ** 31), -1, 0, 2 ** 31 - 1], dtype=torch.int32)),
    ]), {"framework": "pt", "epoch": "7", "note": "written by PyTorch \u2192 tiny"}


def tiny_expected():
    """What SafetensorsParity.WritesTheFileForPyTorch saves with tiny (same values, built with torch)."""
    weight = (torch.arange(6, dtype=torch.float32) - 2.5).reshape(2, 3) * 0.5
    return OrderedDict([
        ("weight", weight),
        ("weight_t", weight.t()),
        ("bias", torch.tensor([0.1, -2.0, 1e300], dtype=torch.float64)),
        ("step", torch.tensor(1234567890123, dtype=torch.int64)),
        ("ids", torch.tensor([-(2 ** 63), -1, 0, 2 ** 63 - 1], dtype=torch.int64)),
        ("mask", torch.tensor([[True, False], [False, True]])),
        ("empty", torch.zeros(0, 3)),
        ("scale", torch.tensor(0.1, dtype=torch.float32)),
        ("pixels", torch.tensor([255, 0, 128], dtype=torch.uint8)),
        ("counts", torch.tensor([[-(2 ** 31), 5]], dtype=torch.int32)),
    ]), {"epoch": "3", "note": "tiny \u2192 torch \"ok\"\n"}


def same(a, b):
    return a.dtype == b.dtype and a.shape == b.shape and bytes(a.contiguous().numpy().tobytes()) == bytes(
        b.contiguous().numpy().tobytes())


def check_tiny_file(path):
    tensors, metadata = read_safetensors(path)
    expected, expected_meta = tiny_expected()
    assert list(tensors) == list(expected), f"order {list(tensors)} != {list(expected)}"
    for name, t in expected.items():
        assert same(tensors[name], t), f"{name}: {tensors[name]} != {t}"
    assert metadata == expected_meta, metadata
    print(f"ok: {path}: {len(tensors)} tensors and the metadata match what torch computes")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--write", action="store_true", help="rewrite from_torch.safetensors and from_torch_expected/")
    ap.add_argument("--tiny-file", default=os.path.join(HERE, "from_tiny.safetensors"))
    args = ap.parse_args()
    torch.set_num_threads(1)

    source, meta = torch_source()
    target = os.path.join(HERE, "from_torch.safetensors")
    if args.write:
        os.makedirs(os.path.join(HERE, "from_torch_expected"), exist_ok=True)
        write_safetensors(target, source, meta)
        for name, t in source.items():
            np.save(os.path.join(HERE, "from_torch_expected", name + ".npy"), t.contiguous().numpy())
        print(f"wrote {target} ({os.path.getsize(target)} bytes) and {len(source)} .npy files")
    # The committed PyTorch file reads back as the tensors it came from, and rewriting it changes nothing.
    tensors, metadata = read_safetensors(target)
    assert metadata == meta and sorted(tensors) == sorted(source)
    for name, t in source.items():
        assert same(tensors[name], t.contiguous()), name
        assert same(torch.from_numpy(np.load(os.path.join(HERE, "from_torch_expected", name + ".npy"))), t), name
    tmp = target + ".check"
    write_safetensors(tmp, source, meta)
    identical = open(tmp, "rb").read() == open(target, "rb").read()
    os.remove(tmp)
    assert identical, f"{target} is stale: run with --write"
    print(f"ok: {target} matches its torch source")
    check_tiny_file(args.tiny_file)


if __name__ == "__main__":
    sys.exit(main())
