#!/usr/bin/python3
"""Generates the PyTorch parity fixtures of the vision layers of issue 23 (item 1):
conv2d, max_pool2d, avg_pool2d, adaptive_avg_pool2d and batch_norm (1d and 2d).

Run with Debian's python3 (torch 1.13, numpy):

    /usr/bin/python3 tests/parity/make_conv_fixtures.py    # rewrites tests/parity/conv_fixtures/

Layout (a contract with tests/framework/test_conv.cpp): one directory per
case, holding each input under its name (float32 `<f4`, or float64 `<f8` for
cases ending in `_f64`), `out.npy`, `grad_out.npy` (backward was
`out.backward(grad_out)`), `grad_<input>.npy` for every differentiable input,
`out_indices.npy` (int64) for max pooling's indices, and `after_<input>.npy`
for an input the op updates in place (batch_norm's running statistics in
training). The computation of each case is in CASES below and repeated in the
C++ test's table (which fails when the two lists differ). Each case seeds torch
with zlib.crc32(<name>) before drawing its inputs; torch runs on one thread, so
the files are the same on every run. Max pooling inputs are pairwise distinct
(no ties, so the indices and gradients are unique).
"""
import os
import shutil
import sys
import zlib

import numpy as np
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, "conv_fixtures")


def distinct(*shape):
    n = int(np.prod(shape))
    v = (torch.arange(n, dtype=torch.float32) - n // 2) * 0.1 + torch.rand(n) * 0.04
    return v[torch.randperm(n)].reshape(shape)


def conv(x, w, b=None, **kw):
    return dict(x=x, w=w, **({} if b is None else dict(b=b))), kw


def bn_inputs(*shape, affine=True):
    c = shape[1]
    d = dict(x=torch.randn(shape) * 2 + 0.5, running_mean=torch.randn(c) * 0.1, running_var=torch.rand(c) + 0.5)
    if affine:
        d["weight"] = torch.rand(c) + 0.5
        d["bias"] = torch.randn(c)
    return d


def bn(training, momentum=0.1, eps=1e-5):
    return lambda a: F.batch_norm(a["x"], a["running_mean"], a["running_var"], a.get("weight"), a.get("bias"),
                                  training=training, momentum=momentum, eps=eps)


# name -> (inputs builder, computation, differentiable input names, inputs updated in place)
CASES = {
    "conv_basic": (lambda: dict(x=torch.randn(2, 3, 7, 6), w=torch.randn(4, 3, 3, 3), b=torch.randn(4)),
                   lambda a: F.conv2d(a["x"], a["w"], a["b"]), ["x", "w", "b"], []),
    "conv_stride_pad": (lambda: dict(x=torch.randn(2, 3, 9, 8), w=torch.randn(5, 3, 3, 2), b=torch.randn(5)),
                        lambda a: F.conv2d(a["x"], a["w"], a["b"], stride=(2, 1), padding=(1, 2)), ["x", "w", "b"], []),
    "conv_dilation_nobias": (lambda: dict(x=torch.randn(1, 2, 10, 9), w=torch.randn(3, 2, 3, 3)),
                             lambda a: F.conv2d(a["x"], a["w"], dilation=(2, 3), padding=1), ["x", "w"], []),
    "conv_groups": (lambda: dict(x=torch.randn(2, 6, 6, 5), w=torch.randn(4, 3, 3, 3), b=torch.randn(4)),
                    lambda a: F.conv2d(a["x"], a["w"], a["b"], stride=2, padding=1, groups=2), ["x", "w", "b"], []),
    "conv_depthwise": (lambda: dict(x=torch.randn(2, 4, 5, 5), w=torch.randn(8, 1, 3, 3)),
                       lambda a: F.conv2d(a["x"], a["w"], padding=1, groups=4), ["x", "w"], []),
    "conv_1x1": (lambda: dict(x=torch.randn(3, 8, 4, 4), w=torch.randn(6, 8, 1, 1), b=torch.randn(6)),
                 lambda a: F.conv2d(a["x"], a["w"], a["b"]), ["x", "w", "b"], []),
    "conv_unbatched": (lambda: dict(x=torch.randn(3, 6, 6), w=torch.randn(2, 3, 3, 3), b=torch.randn(2)),
                       lambda a: F.conv2d(a["x"], a["w"], a["b"], padding=1), ["x", "w", "b"], []),
    "conv_wide": (lambda: dict(x=torch.randn(2, 16, 10, 10), w=torch.randn(32, 16, 3, 3) * 0.1, b=torch.randn(32)),
                  lambda a: F.conv2d(a["x"], a["w"], a["b"], padding=1), ["x", "w", "b"], []),
    "conv_kernel_equals_padded_input": (lambda: dict(x=torch.randn(2, 2, 3, 4), w=torch.randn(3, 2, 5, 6),
                                                     b=torch.randn(3)),
                                        lambda a: F.conv2d(a["x"], a["w"], a["b"], padding=1), ["x", "w", "b"], []),
    "conv_f64": (lambda: dict(x=torch.randn(2, 3, 6, 7, dtype=torch.float64), w=torch.randn(4, 3, 2, 3, dtype=torch.float64),
                              b=torch.randn(4, dtype=torch.float64)),
                 lambda a: F.conv2d(a["x"], a["w"], a["b"], stride=(1, 2), padding=(1, 0)), ["x", "w", "b"], []),
    "maxpool_2": (lambda: dict(x=distinct(2, 3, 8, 8)), lambda a: F.max_pool2d(a["x"], 2), ["x"], []),
    "maxpool_3s2p1": (lambda: dict(x=distinct(2, 3, 9, 7)),
                      lambda a: F.max_pool2d(a["x"], 3, stride=2, padding=1), ["x"], []),
    "maxpool_ceil": (lambda: dict(x=distinct(1, 2, 7, 8)),
                     lambda a: F.max_pool2d(a["x"], 3, stride=2, ceil_mode=True), ["x"], []),
    "maxpool_dilation": (lambda: dict(x=distinct(1, 2, 9, 9)),
                         lambda a: F.max_pool2d(a["x"], (3, 2), stride=1, padding=1, dilation=2), ["x"], []),
    "maxpool_indices": (lambda: dict(x=distinct(2, 2, 6, 5)),
                        lambda a: F.max_pool2d(a["x"], (2, 3), stride=(2, 1), return_indices=True), ["x"], []),
    "maxpool_unbatched": (lambda: dict(x=distinct(3, 6, 6)), lambda a: F.max_pool2d(a["x"], 2), ["x"], []),
    "avgpool_2": (lambda: dict(x=torch.randn(2, 3, 8, 6)), lambda a: F.avg_pool2d(a["x"], 2), ["x"], []),
    "avgpool_3s2p1": (lambda: dict(x=torch.randn(2, 3, 9, 7)),
                      lambda a: F.avg_pool2d(a["x"], 3, stride=2, padding=1), ["x"], []),
    "avgpool_3s2p1_exclude_pad": (lambda: dict(x=torch.randn(2, 3, 9, 7)),
                                  lambda a: F.avg_pool2d(a["x"], 3, stride=2, padding=1, count_include_pad=False),
                                  ["x"], []),
    "avgpool_ceil": (lambda: dict(x=torch.randn(1, 2, 8, 7)),
                     lambda a: F.avg_pool2d(a["x"], 3, stride=2, padding=1, ceil_mode=True), ["x"], []),
    "avgpool_divisor": (lambda: dict(x=torch.randn(1, 2, 6, 6)),
                        lambda a: F.avg_pool2d(a["x"], (2, 3), padding=1, divisor_override=5), ["x"], []),
    "adaptive_1": (lambda: dict(x=torch.randn(2, 3, 7, 5)), lambda a: F.adaptive_avg_pool2d(a["x"], 1), ["x"], []),
    "adaptive_3x2": (lambda: dict(x=torch.randn(2, 3, 7, 5)),
                     lambda a: F.adaptive_avg_pool2d(a["x"], (3, 2)), ["x"], []),
    "adaptive_up": (lambda: dict(x=torch.randn(1, 2, 3, 3)),
                    lambda a: F.adaptive_avg_pool2d(a["x"], (5, 4)), ["x"], []),
    "bn2d_train": (lambda: bn_inputs(4, 3, 5, 5), bn(True), ["x", "weight", "bias"], ["running_mean", "running_var"]),
    "bn2d_train_momentum": (lambda: bn_inputs(3, 4, 2, 3), bn(True, momentum=0.3, eps=1e-3),
                            ["x", "weight", "bias"], ["running_mean", "running_var"]),
    "bn2d_eval": (lambda: bn_inputs(4, 3, 5, 5), bn(False), ["x", "weight", "bias"], []),
    "bn2d_train_no_affine": (lambda: bn_inputs(2, 5, 3, 4, affine=False), bn(True), ["x"],
                             ["running_mean", "running_var"]),
    "bn1d_train": (lambda: bn_inputs(8, 5), bn(True), ["x", "weight", "bias"], ["running_mean", "running_var"]),
    "bn1d_train_3d": (lambda: bn_inputs(4, 3, 6), bn(True), ["x", "weight", "bias"], ["running_mean", "running_var"]),
    "bn1d_eval": (lambda: bn_inputs(6, 4), bn(False), ["x", "weight", "bias"], []),
}


def save(directory, name, tensor):
    arr = tensor.detach().cpu().numpy().copy(order="C")
    assert arr.dtype in (np.float32, np.float64, np.int64), (name, arr.dtype)
    if arr.dtype != np.int64:
        assert np.isfinite(arr).all(), (directory, name)
    path = os.path.join(directory, name + ".npy")
    np.save(path, arr)
    assert np.array_equal(np.load(path), arr)


def run_case(name, build, compute, grads, updated):
    torch.manual_seed(zlib.crc32(name.encode()))
    inputs = build()
    files = {k: v.clone() for k, v in inputs.items()}
    for k in grads:
        inputs[k] = inputs[k].clone().requires_grad_(True)
    out = compute(inputs)
    if isinstance(out, tuple):
        out, files["out_indices"] = out
    files["out"] = out
    for k in updated:
        files["after_" + k] = inputs[k]
    g = torch.randn(out.shape, dtype=out.dtype)
    files["grad_out"] = g
    out.backward(g)
    for k in grads:
        files["grad_" + k] = inputs[k].grad
    return files


def main():
    torch.set_num_threads(1)
    if os.path.isdir(FIXTURES):
        shutil.rmtree(FIXTURES)
    total = 0
    for name, case in CASES.items():
        directory = os.path.join(FIXTURES, name)
        os.makedirs(directory)
        for stem, t in run_case(name, *case).items():
            save(directory, stem, t)
        total += sum(os.path.getsize(os.path.join(directory, f)) for f in os.listdir(directory))
    print("wrote %d cases to %s (%d bytes, torch %s)" % (len(CASES), os.path.relpath(FIXTURES), total,
                                                        torch.__version__))
    assert total < 512 << 10


if __name__ == "__main__":
    sys.exit(main())
