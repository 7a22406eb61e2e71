#!/usr/bin/env python3
"""Writes the seed corpus of each fuzz target into fuzz/corpus/<target>/ (run from anywhere).

Names tell the replay tests (tests/*/test_fuzz_corpus.cpp) what to expect:
  ok_*   valid input: the reader must accept it;
  bad_*  invalid input: the reader must reject it with a tiny::Error;
  other  (inputs libFuzzer found, crash regressions): any outcome but a crash.
Only the standard library is used: the files are built byte by byte, the way numpy 1.24,
safetensors and the IDX format write them.
"""
import gzip
import io
import json
import os
import struct
import tarfile
import zipfile

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")


def put(target, name, data):
    d = os.path.join(ROOT, target)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


# ---------------------------------------------------------------- .npy
def npy(descr, shape, data, fortran=False, major=1):
    shape_txt = "(" + ", ".join(str(s) for s in shape) + ("," if len(shape) == 1 else "") + ")"
    d = "{'descr': '%s', 'fortran_order': %s, 'shape': %s, }" % (descr, fortran, shape_txt)
    prefix = 10 if major == 1 else 12
    hlen = len(d) + 1
    pad = 64 - (prefix + hlen) % 64
    header = (d + " " * pad + "\n").encode()
    size = struct.pack("<H", len(header)) if major == 1 else struct.pack("<I", len(header))
    return b"\x93NUMPY" + bytes([major, 0]) + size + header + data


f32 = struct.pack("<6f", 0, 1, 2, 3, 4, 5)
put("npy", "ok_f4_2x3.npy", npy("<f4", [2, 3], f32))
put("npy", "ok_f8_scalar.npy", npy("<f8", [], struct.pack("<d", 3.5)))
put("npy", "ok_i4_fortran.npy", npy("<i4", [2, 2], struct.pack("<4i", 1, 2, 3, 4), fortran=True))
put("npy", "ok_u1_v2.npy", npy("|u1", [3], b"\x01\x02\xff", major=2))
put("npy", "ok_b1.npy", npy("|b1", [4], b"\x00\x01\x02\x00"))
put("npy", "ok_f2_empty.npy", npy("<f2", [0, 5], b""))
put("npy", "ok_u2_bf16.npy", npy("<u2", [2], struct.pack("<2H", 0x3F80, 0x7FC0)))
put("npy", "bad_truncated.npy", npy("<f4", [2, 3], f32)[:-5])
put("npy", "bad_big_endian.npy", npy(">f4", [1], b"\0\0\0\0"))
put("npy", "bad_overflow_shape.npy", npy("<f8", [2**62, 2**62], b""))
put("npy", "bad_header_len.npy", b"\x93NUMPY\x01\x00\xff\xff{'descr'")
put("npy", "bad_npz.npy", b"PK\x03\x04" + b"\0" * 20)

# ---------------------------------------------------------------- safetensors
def safetensors(entries, metadata=None, pad=True):
    header = {}
    blob = b""
    for name, (dtype, shape, data) in entries.items():
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(blob), len(blob) + len(data)]}
        blob += data
    if metadata is not None:
        header["__metadata__"] = metadata
    text = json.dumps(header, separators=(",", ":")).encode()
    if pad:
        text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + blob


put("safetensors", "ok_two.safetensors",
    safetensors({"w": ("F32", [2, 3], f32), "step": ("I64", [], struct.pack("<q", 7))}, {"format": "pt"}))
put("safetensors", "ok_bf16_bool.safetensors",
    safetensors({"h": ("BF16", [2], struct.pack("<2H", 0x3F80, 0)), "m": ("BOOL", [3], b"\x01\x00\x01")}))
put("safetensors", "ok_empty.safetensors", safetensors({}))
put("safetensors", "ok_zero_size.safetensors", safetensors({"z": ("F16", [0, 4], b"")}))
put("safetensors", "bad_overlap.safetensors",
    struct.pack("<Q", 88) + b'{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}'[:88] + b"\0" * 8)
put("safetensors", "bad_huge_len.safetensors", struct.pack("<Q", 2**63) + b"{}")
put("safetensors", "bad_shape_mismatch.safetensors", safetensors({"w": ("F32", [5], f32)}))
put("safetensors", "bad_not_json.safetensors", struct.pack("<Q", 8) + b"{nope!!}")

# ---------------------------------------------------------------- IDX
def idx(shape, data):
    return bytes([0, 0, 8, len(shape)]) + b"".join(struct.pack(">I", s) for s in shape) + data


put("idx", "ok_images.idx", idx([2, 3, 3], bytes(range(18))))
put("idx", "ok_labels.idx", idx([5], bytes([0, 1, 2, 9, 3])))
put("idx", "ok_images.idx.gz", gzip.compress(idx([1, 4, 4], bytes(range(16))), mtime=0))
put("idx", "ok_labels.idx.gz", gzip.compress(idx([3], b"\x01\x02\x03"), mtime=0))
put("idx", "bad_magic.idx", b"\x00\x00\x0d\x01" + struct.pack(">I", 1) + b"\0\0\0\0")
put("idx", "bad_truncated.idx", idx([4, 4], bytes(10)))
put("idx", "bad_trailing.idx", idx([2], b"\x01\x02\x03"))
put("idx", "bad_corrupt.idx.gz", gzip.compress(idx([8], bytes(8)), mtime=0)[:-6])
# The product of the dimensions is 2^64, which wraps to 0 in 64 bits, and no data follows:
# read_idx must not take the wrapped count for the real one.
put("idx", "bad_overflowing_dims.idx", idx([2**22, 2**21, 2**21], b""))
put("idx", "bad_overflowing_dims4.idx", idx([2**16] * 4, b""))

# ---------------------------------------------------------------- digits CSV
with open(os.path.join(os.path.dirname(ROOT), "..", "data", "digits", "digits.csv"), "rb") as f:
    lines = f.read().split(b"\n")
put("digits_csv", "bad_five_rows.csv", b"\n".join(lines[:5]) + b"\n")
put("digits_csv", "bad_crlf_blank_lines.csv", b"\r\n".join(lines[:3]) + b"\r\n\r\n\n")
put("digits_csv", "bad_label_10.csv", lines[0].rsplit(b",", 1)[0] + b",10\n")
put("digits_csv", "bad_pixel_17.csv", b"17," + lines[0].split(b",", 1)[1] + b"\n")
put("digits_csv", "bad_66_values.csv", lines[0] + b",3\n")
put("digits_csv", "bad_64_values.csv", lines[0].rsplit(b",", 1)[0] + b"\n")
put("digits_csv", "bad_not_integer.csv", b"a," * 64 + b"1\n")
put("digits_csv", "bad_empty.csv", b"")

# ---------------------------------------------------------------- Bundle (values.json)
def tensor(name, file, shape, **kw):
    e = {"name": name, "defined": True, "file": file, "device": "cpu", "dtype": "float32", "shape": shape,
         "requires_grad": False, "is_pinned": False}
    e.update(kw)
    return e


put("bundle", "ok_values_only.json", json.dumps({"answer": 42, "text": "hi", "_message": ""}))
put("bundle", "ok_tensors.json", json.dumps({"loss": 0.5, "_tensors": [
    tensor("model.weight", "t0.npy", [2, 3], device="cuda:0", requires_grad=True),
    tensor("labels", "t1.npy", [4], dtype="int64"),
    tensor("mask", "t2.npy", [2, 2], dtype="bool", is_pinned=True),
    {"name": "grad", "defined": False}]}, indent=1))
put("bundle", "bad_not_object.json", "[1, 2, 3]")
put("bundle", "bad_not_json.json", '{"a": ')
put("bundle", "bad_missing_field.json", json.dumps({"_tensors": [{"name": "x", "defined": True}]}))
put("bundle", "bad_damaged_npy.json", json.dumps({"_tensors": [tensor("x", "bad.npy", [1])]}))
put("bundle", "bad_npy_is_folder.json", json.dumps({"_tensors": [tensor("x", "folder.npy", [1])]}))
put("bundle", "bad_path_out_of_folder.json", json.dumps({"_tensors": [tensor("x", "../bundle/t0.npy", [2, 3])]}))
put("bundle", "bad_device_file.json", json.dumps({"_tensors": [tensor("x", "/dev/zero", [2, 3])]}))
put("bundle", "bad_float_shape.json", '{"_tensors": [{"name": "x", "defined": true, "file": "t0.npy", "device": "cpu", '
    '"dtype": "float32", "shape": [1e300, 3], "requires_grad": false, "is_pinned": false}]}')
put("bundle", "bad_shape_differs.json", json.dumps({"_tensors": [tensor("x", "t0.npy", [3, 2])]}))
put("bundle", "bad_twice.json", json.dumps({"_tensors": [tensor("x", "t0.npy", [2, 3]), {"name": "x", "defined": False}]}))

# ---------------------------------------------------------------- Recipe + lesson.json
def recipe(lessons):
    return json.dumps({"source_dir": "@SRC@", "build_dir": "/nonexistent/build", "student_dir": "/nonexistent/student",
                       "launcher": "", "cxx": "c++", "flags": ["-O2"], "defines": ["A=1"], "include_dirs": ["/x"],
                       "link": ["-lm"], "lessons": lessons})


LESSON = {"number": 1, "folder": "1_a", "glue": ["g.o"], "reference": "ref", "checks": "chk", "demo_target": "demo"}
with open(os.path.join(os.path.dirname(ROOT), "..", "lessons", "1_device_check", "lesson.json"), "rb") as f:
    real_lesson = f.read()
put("recipe", "ok_one_lesson.json", recipe([LESSON]).encode() + b"\0" + real_lesson)
put("recipe", "ok_no_lessons.json", recipe([]))
put("recipe", "ok_minimal_lesson.json", recipe([LESSON]).encode() + b"\0" + b'{"title": "t"}')
put("recipe", "bad_missing_lesson_json.json", recipe([LESSON]))
put("recipe", "bad_float_number.json", recipe([dict(LESSON, number=1e300)]).encode() + b"\0" + real_lesson)
put("recipe", "bad_float_minutes.json", recipe([LESSON]).encode() + b'\0{"title": "t", "minutes": -1e300}')
put("recipe", "bad_big_gpus.json", recipe([LESSON]).encode() + b'\0{"title": "t", "requires": {"gpus": 99999999999}}')
put("recipe", "bad_requires_not_object.json", recipe([LESSON]).encode() + b'\0{"title": "t", "requires": 2}')
put("recipe", "bad_not_json.json", b"{")
put("recipe", "bad_lesson_not_json.json", recipe([LESSON]).encode() + b"\0\xff\xfe")

# ---------------------------------------------------------------- submission folder
put("submission", "ok_repo_copy.txt",
    "=== lessons/1_a/exercise.cpp\n#include \"exercise.h\"\nint f() { return 1; }\n=== lessons/quiz.txt\n1. b\n2. a\n")
put("submission", "ok_lessons_copy.txt", "=== 1_a/exercise.cpp\nint x;\n=== quiz.txt\nanswers\n=== README.md\nhi\n")
put("submission", "ok_empty.txt", "")
put("submission", "ok_quiz_not_utf8.txt", b"=== quiz.txt\n\xff\xfe caf\xe9 \xc3\x28\n")
put("submission", "ok_quiz_device.txt", "=== quiz.txt -> /dev/zero\n")
put("submission", "ok_quiz_symlink_out.txt", "=== quiz.txt -> /etc/passwd\n")
put("submission", "ok_quiz_folder.txt", "=== quiz.txt/\n")
put("submission", "ok_lessons_loop.txt", "=== lessons -> lessons\n=== quiz.txt\nq\n")
put("submission", "ok_lessons_is_file.txt", "=== lessons\nnot a folder\n=== quiz.txt\nq\n")
put("submission", "ok_escapes.txt", "=== ../outside.txt\nno\n=== /abs\nno\n=== quiz.txt\n<script>\x1b[31m</script>\n")

# ---------------------------------------------------------------- submission archives (.zip, .tar.gz)
def zip_of(files):
    b = io.BytesIO()
    with zipfile.ZipFile(b, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in files:
            z.writestr(zipfile.ZipInfo(name, (2026, 1, 1, 0, 0, 0)), data)
    return b.getvalue()


def tgz_of(members):
    """members: (name, data) for a file, (name, None) for a folder, (name, ("sym"|"hard", target)) for a link."""
    b = io.BytesIO()
    with tarfile.open(fileobj=b, mode="w:gz", format=tarfile.PAX_FORMAT) as t:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.mtime = 0
            if data is None:
                info.type = tarfile.DIRTYPE
                t.addfile(info)
            elif isinstance(data, tuple):
                info.type = tarfile.SYMTYPE if data[0] == "sym" else tarfile.LNKTYPE
                info.linkname = data[1]
                t.addfile(info)
            else:
                info.size = len(data)
                t.addfile(info, io.BytesIO(data))
    return gzip.compress(gzip.decompress(b.getvalue()), mtime=0)


LESSON_FILES = [("lessons/1_a/exercise.cpp", b"int f() { return 1; }\n"), ("lessons/quiz.txt", b"1. b\n")]
put("archive", "ok_lessons.zip", zip_of(LESSON_FILES))
put("archive", "ok_lessons.tar.gz", tgz_of([("lessons", None)] + LESSON_FILES))
put("archive", "ok_empty.zip", zip_of([]))
put("archive", "bad_absolute.tar.gz", tgz_of([("/tmp/outside", b"no")]))
put("archive", "bad_dotdot.zip", zip_of([("lessons/../../outside", b"no")]))
put("archive", "bad_symlink.tar.gz", tgz_of([("lessons", ("sym", "/"))]))
put("archive", "bad_hardlink.tar.gz", tgz_of([("lessons/1_a/exercise.cpp", ("hard", "/etc/passwd"))]))
put("archive", "bad_ratio.tar.gz", tgz_of([("zeros", bytes(8 << 20))]))
put("archive", "bad_cut.zip", zip_of(LESSON_FILES)[:40])
put("archive", "bad_not_an_archive.zip", b"PK\x03\x04 not a zip")
