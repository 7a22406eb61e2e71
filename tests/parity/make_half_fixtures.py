#!/usr/bin/python3
"""Generates the float16/bfloat16 parity fixtures that tests/framework/test_half.cpp reads.

Run with Debian's python3 (torch 1.13 and numpy):

    /usr/bin/python3 tests/parity/make_half_fixtures.py     # rewrites tests/parity/half_fixtures/

Layout: tests/parity/half_fixtures/<case>/ holds the inputs by name, out.npy and,
for cases with a backward, grad_out.npy and grad_<input>.npy. Storage in .npy:
  float16   numpy's '<f2'
  bfloat16  uint16 '<u2' holding the raw bits (numpy has no bfloat16); tiny's
            load_npy reads '<u2' as bfloat16, save_npy writes bfloat16 that way
  float32   '<f4', int64 '<i8'
Each case seeds torch with zlib.crc32(<case name>), so adding a case changes no
other; torch runs on one thread.

conversions/: probes.npy (float32) and what torch 1.13 makes of them:
half.npy = probes.half(), bf16.npy = probes.bfloat16(). The probes are the
values where rounding is easy to get wrong (exact ties between neighbouring
16-bit values and the floats just beside them, overflow and subnormal edges)
plus random values over many scales. NaNs are left out: torch 1.13's own CPU
paths disagree on the bfloat16 NaN pattern (0x7FC0 scalar, 0xFFFF vectorised);
test_half.cpp checks NaN handling against tiny's documented patterns instead.

CASES: PyTorch 1.13 on the CPU implements these for bfloat16 (float16 only the
ones marked f16: it has no float16 exp, softmax or addmm on the CPU, so those
are checked against float64 references in test_half.cpp instead).
  add_broadcast   f16 bf16  a[3,1,4] + b[5,4]
  mul             f16 bf16  a[4,5] * b[4,5]
  div             f16 bf16  a[4,5] / b[4,5] (|b| >= 0.5)
  exp                 bf16  exp(a[4,5])
  sigmoid             bf16  sigmoid(a[4,5])
  gelu                bf16  gelu(a[4,5]) (erf form)
  sum_dim         f16 bf16  a[8,300].sum(1)
  mean_all        f16 bf16  a[8,300].mean()
  max_dim         f16 bf16  values, indices = a[6,7].max(1)
  softmax             bf16  softmax(x[6,10], 1), with backward
  log_softmax         bf16  log_softmax(x[6,10], 1), with backward
  cross_entropy       bf16  cross_entropy(x[8,5], target[8]), with backward
  linear              bf16  linear(x[16,32], w[24,32], b[24]), with backward
  mm                  bf16  a[33,70] @ b[70,20]

autocast_mlp_bf16: a small MLP, forward under torch.autocast("cpu",
dtype=torch.bfloat16), backward outside it, read by test_amp_parity.cpp:
  inputs x f32[8,12], w1 f32[16,12], b1 f32[16], w2 f32[5,16], b2 f32[5], target i64[8]
  with torch.autocast("cpu", dtype=torch.bfloat16):
      out = F.linear(torch.relu(F.linear(x, w1, b1)), w2, b2)   # bfloat16 (linear is lower precision)
      loss = F.cross_entropy(out, target)                        # float32 (cross_entropy is fp32)
  loss.backward()
  files: the inputs, out (bf16 as <u2), loss f32[], grad_w1, grad_b1, grad_w2, grad_b2 (float32: the
  gradients come back through the casts to the float32 weights).
  Only ops whose autocast policy torch 1.13's CPU lists share with tiny's
  (linear, relu, cross_entropy) are used: 1.13's CPU lists leave softmax, sum,
  exp... in bfloat16, where tiny follows the CUDA lists for both device types.
"""
import os
import shutil
import zlib

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "half_fixtures")
F = torch.nn.functional


def to_numpy(t):
    t = t.detach()
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().view("<u2")
    return t.numpy()


def save(case, name, t):
    d = os.path.join(OUT, case)
    os.makedirs(d, exist_ok=True)
    np.save(os.path.join(d, name + ".npy"), to_numpy(t) if torch.is_tensor(t) else t)


def seed(case):
    torch.manual_seed(zlib.crc32(case.encode()))


def conversions():
    seed("conversions")
    probes = [0.0, -0.0, float("inf"), float("-inf"), 65504.0, 65519.99, 65520.0, -65520.0, 1e6, 3.4e38,
              2.0 ** -24, 2.0 ** -25, 3 * 2.0 ** -26, 2.0 ** -26, 2.0 ** -14, 2.0 ** -14 - 2.0 ** -25,
              1.0 + 2.0 ** -11, 1.0 + 3 * 2.0 ** -11, 1.0 + 2.0 ** -8, 1.0 + 3 * 2.0 ** -8, 1e-40, -1e-45]
    # Exact ties between neighbouring half values (and bfloat16 values), and
    # the float32 values one ulp either side of each tie.
    h = torch.randint(0, 0x7BFF, (1000,), dtype=torch.int32).to(torch.int16).view(torch.float16).float()
    h_bits = h.half().view(torch.int16).to(torch.int32)
    h_next = (h_bits + 1).to(torch.int16).view(torch.float16).float()
    ties = (h.double() + h_next.double()) / 2
    b = torch.randint(0, 0x7F7F, (1000,), dtype=torch.int32).to(torch.int16).view(torch.bfloat16).float()
    b_next = (b.bfloat16().view(torch.int16).to(torch.int32) + 1).to(torch.int16).view(torch.bfloat16).float()
    bties = (b.double() + b_next.double()) / 2
    t = torch.cat([ties.float(), bties.float()])
    up = torch.nextafter(t, torch.tensor(float("inf")))
    down = torch.nextafter(t, torch.tensor(float("-inf")))
    scales = torch.cat([torch.randn(200) * 10.0 ** k for k in range(-9, 9)])
    all_probes = torch.cat([torch.tensor(probes, dtype=torch.float32), t, up, down, -t, scales])
    save("conversions", "probes", all_probes)
    save("conversions", "half", all_probes.half())
    save("conversions", "bf16", all_probes.bfloat16())


def case_binary(name, fn, dtypes, shape_a, shape_b, b_transform=None):
    for dt, suffix in dtypes:
        case = name + suffix
        seed(case)
        a = torch.randn(shape_a).to(dt)
        b = torch.randn(shape_b)
        if b_transform:
            b = b_transform(b)
        b = b.to(dt)
        save(case, "a", a)
        save(case, "b", b)
        save(case, "out", fn(a, b))


def case_unary(name, fn, dtypes, shape, values=None):
    for dt, suffix in dtypes:
        case = name + suffix
        seed(case)
        a = (values(shape) if values else torch.randn(shape)).to(dt)
        save(case, "a", a)
        out = fn(a)
        if isinstance(out, tuple):
            save(case, "values", out[0])
            save(case, "indices", out[1])
        else:
            save(case, "out", out)


def case_backward(case, inputs, fn):
    seed(case)
    made = {k: v() for k, v in inputs}
    for k, v in made.items():
        save(case, k, v)
        if v.is_floating_point():
            v.requires_grad_(True)
    out = fn(**made)
    save(case, "out", out)
    if out.dim() == 0:
        out.backward()
    else:
        g = torch.randn(out.shape).to(out.dtype)
        save(case, "grad_out", g)
        out.backward(g)
    for k, v in made.items():
        if v.is_floating_point():
            save(case, "grad_" + k, v.grad)


def main():
    torch.set_num_threads(1)
    shutil.rmtree(OUT, ignore_errors=True)
    both = [(torch.float16, "_f16"), (torch.bfloat16, "_bf16")]
    bf = [(torch.bfloat16, "_bf16")]
    conversions()
    case_binary("add_broadcast", lambda a, b: a + b, both, (3, 1, 4), (5, 4))
    case_binary("mul", lambda a, b: a * b, both, (4, 5), (4, 5))
    case_binary("div", lambda a, b: a / b, both, (4, 5), (4, 5), lambda b: b.sign() * (b.abs() + 0.5))
    case_unary("exp", torch.exp, bf, (4, 5))
    case_unary("sigmoid", torch.sigmoid, bf, (4, 5))
    case_unary("gelu", F.gelu, bf, (4, 5), lambda s: torch.randn(s) * 2)
    case_unary("sum_dim", lambda a: a.sum(1), both, (8, 300))
    case_unary("mean_all", lambda a: a.mean(), both, (8, 300))
    case_unary("max_dim", lambda a: a.max(1), both, (6, 7),
               lambda s: ((torch.randperm(42) - 21) / 8.0).reshape(s))  # distinct, exact in 16 bits
    bf16 = torch.bfloat16
    case_backward("softmax_bf16", [("x", lambda: torch.randn(6, 10).to(bf16))], lambda x: F.softmax(x, 1))
    case_backward("log_softmax_bf16", [("x", lambda: torch.randn(6, 10).to(bf16))], lambda x: F.log_softmax(x, 1))
    case_backward("cross_entropy_bf16",
                  [("x", lambda: torch.randn(8, 5).to(bf16)), ("target", lambda: torch.randint(0, 5, (8,)))],
                  lambda x, target: F.cross_entropy(x, target))
    case_backward("linear_bf16",
                  [("x", lambda: torch.randn(16, 32).to(bf16)), ("w", lambda: (torch.randn(24, 32) * 0.2).to(bf16)),
                   ("b", lambda: torch.randn(24).to(bf16))],
                  lambda x, w, b: F.linear(x, w, b))
    case_binary("mm", lambda a, b: a @ b, bf, (33, 70), (70, 20))
    autocast_mlp()


def autocast_mlp():
    case = "autocast_mlp_bf16"
    seed(case)
    x = torch.randn(8, 12)
    w1 = (torch.randn(16, 12) / 12 ** 0.5).requires_grad_(True)
    b1 = (torch.randn(16) * 0.1).requires_grad_(True)
    w2 = (torch.randn(5, 16) / 4).requires_grad_(True)
    b2 = (torch.randn(5) * 0.1).requires_grad_(True)
    target = torch.randint(0, 5, (8,))
    for name, t in [("x", x), ("w1", w1), ("b1", b1), ("w2", w2), ("b2", b2), ("target", target)]:
        save(case, name, t)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = F.linear(torch.relu(F.linear(x, w1, b1)), w2, b2)
        loss = F.cross_entropy(out, target)
    assert out.dtype == torch.bfloat16 and loss.dtype == torch.float32
    loss.backward()
    save(case, "out", out)
    save(case, "loss", loss)
    for name, t in [("w1", w1), ("b1", b1), ("w2", w2), ("b2", b2)]:
        assert t.grad.dtype == torch.float32
        save(case, "grad_" + name, t.grad)


if __name__ == "__main__":
    main()
