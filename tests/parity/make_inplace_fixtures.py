#!/usr/bin/python3
"""Generates the PyTorch parity fixtures of in-place ops inside the autograd
graph (issue 23, item 2): add_, sub_, mul_, div_, clamp_, relu_, sigmoid_,
tanh_, zero_, fill_, copy_ on tensors that are part of a graph, on views of
them (CopySlices), and a residual block; plus where PyTorch raises the
"modified by an inplace operation" error and where it does not.

Run with Debian's python3 (torch 1.13, numpy):

    /usr/bin/python3 tests/parity/make_inplace_fixtures.py    # rewrites tests/parity/inplace_fixtures/

Layout (a contract with tests/framework/test_inplace.cpp), as make_conv_fixtures.py:
one directory per case, holding each input under its name (float32 `<f4`),
`out.npy`, `grad_out.npy` (backward was `out.backward(grad_out)`) and
`grad_<input>.npy` for every input that requires grad. The computation of each
case is in CASES below and repeated in the C++ test's table (which fails when
the two lists differ). `version_errors.txt` lists, for each scenario of
VERSION_CASES (repeated in the C++ test too), `name raises|fine` and, when it
raises, PyTorch's message. Each case seeds torch with zlib.crc32(<name>); torch
runs on one thread, so the files are the same on every run.
"""
import os
import shutil
import sys
import zlib

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, "inplace_fixtures")


def r(*shape):
    return torch.randn(*shape)


def away(*shape):
    """Values with |v| in [0.5, 1.5]: safe divisors, and no clamp/relu kink within finite-difference reach."""
    return (torch.rand(*shape) + 0.5) * (torch.randint(0, 2, shape) * 2 - 1)


def add_(a):
    h = a["x"] * 2
    h.add_(a["y"], alpha=0.5)
    return h * h


def add_broadcast(a):
    h = a["x"] * 2
    h.add_(a["b"])
    return h.tanh()


def sub_(a):
    h = a["x"] * 1.5
    h.sub_(a["y"], alpha=2)
    return h * h


def mul_(a):
    h = a["x"] * 1.5
    h.mul_(a["y"])
    return h.sigmoid()


def mul_constant_other(a):
    h = a["x"] * 1.5
    h.mul_(a["c"])
    return h * h


def div_(a):
    h = a["x"] + 1
    h.div_(a["y"])
    return h * h


def scalar_chain(a):
    h = a["x"] * 1
    h.mul_(3).add_(1).div_(4).sub_(a["y"])
    return h * h


def clamp_(a):
    h = a["x"] * 2
    h.clamp_(-0.8, 0.6)
    return h * a["w"]


def relu_after_mm(a):
    h = a["x"] @ a["w"]  # MmBackward0 saves its inputs, not its output: changing h is fine
    h.relu_()
    return h


def sigmoid_(a):
    h = a["x"] * 2
    h.sigmoid_()
    return h * a["w"]


def tanh_(a):
    h = a["x"] + a["y"]
    h.tanh_()
    return h * a["w"]


def leaky_relu_inplace(a):
    h = a["x"] * 2
    torch.nn.functional.leaky_relu(h, 0.1, inplace=True)  # LeakyReluBackward1 reads the result
    return h * a["w"]


def zero_(a):
    h = a["x"] * 2
    h.zero_()
    return h + a["y"]


def fill_(a):
    h = a["x"] * 2
    h.fill_(0.5)
    return h * a["y"]


def copy_broadcast(a):
    h = a["x"] * 2
    h.copy_(a["b"])
    return h * h


def view_relu_(a):
    h = a["x"] * 1
    h.t().relu_()  # a view: CopySlices rewrites h's history
    return h * a["w"]


def slice_add_(a):
    h = a["x"] * 1
    h[1:3].add_(a["y"])
    return h.sigmoid()


def column_mul_(a):
    h = a["x"] * 1
    h[:, 2].mul_(a["y"])
    return h * h


def view_used_after_base_changed(a):
    h = a["x"] * 1
    v = h.t()  # made before the in-place op: its history is rebuilt from h's new one
    h.relu_()
    return v * a["w"]


def copy_into_constant_slice(a):
    h = torch.zeros(3, 4)  # requires no grad until a slice of it gets y
    h[1].copy_(a["y"])
    return h * a["w"]


def residual(a):
    # `out += identity` then an in-place ReLU, as torchvision's ResNet blocks do.
    out = torch.nn.functional.linear(a["x"], a["w1"], a["b1"])
    out.add_(a["x"])
    out.relu_()
    return torch.nn.functional.linear(out, a["w2"])


# name -> (inputs builder, computation, inputs that require grad)
CASES = {
    "add_": (lambda: dict(x=r(3, 4), y=r(3, 4)), add_, ["x", "y"]),
    "add_broadcast": (lambda: dict(x=r(3, 4), b=r(4)), add_broadcast, ["x", "b"]),
    "sub_": (lambda: dict(x=r(4, 3), y=r(4, 3)), sub_, ["x", "y"]),
    "mul_": (lambda: dict(x=r(3, 4), y=r(3, 4)), mul_, ["x", "y"]),
    "mul_constant_other": (lambda: dict(x=r(3, 4), c=r(3, 4)), mul_constant_other, ["x"]),
    "div_": (lambda: dict(x=r(3, 4), y=away(3, 4)), div_, ["x", "y"]),
    "scalar_chain": (lambda: dict(x=r(2, 5), y=r(2, 5)), scalar_chain, ["x", "y"]),
    "clamp_": (lambda: dict(x=away(3, 4) * 0.7, w=r(3, 4)), clamp_, ["x"]),
    "relu_after_mm": (lambda: dict(x=away(3, 4), w=r(4, 5)), relu_after_mm, ["x", "w"]),
    "sigmoid_": (lambda: dict(x=r(3, 4), w=r(3, 4)), sigmoid_, ["x"]),
    "tanh_": (lambda: dict(x=r(3, 4), y=r(3, 4), w=r(3, 4)), tanh_, ["x", "y"]),
    "leaky_relu_inplace": (lambda: dict(x=away(3, 4), w=r(3, 4)), leaky_relu_inplace, ["x"]),
    "zero_": (lambda: dict(x=r(3, 4), y=r(3, 4)), zero_, ["x", "y"]),
    "fill_": (lambda: dict(x=r(3, 4), y=r(3, 4)), fill_, ["x", "y"]),
    "copy_broadcast": (lambda: dict(x=r(3, 4), b=r(4)), copy_broadcast, ["x", "b"]),
    "view_relu_": (lambda: dict(x=away(3, 4), w=r(3, 4)), view_relu_, ["x"]),
    "slice_add_": (lambda: dict(x=r(4, 5), y=r(2, 5)), slice_add_, ["x", "y"]),
    "column_mul_": (lambda: dict(x=r(4, 5), y=r(4)), column_mul_, ["x", "y"]),
    "view_used_after_base_changed": (lambda: dict(x=away(3, 4), w=r(4, 3)), view_used_after_base_changed, ["x"]),
    "copy_into_constant_slice": (lambda: dict(y=r(4), w=r(3, 4)), copy_into_constant_slice, ["y"]),
    "residual": (lambda: dict(x=r(5, 6), w1=r(6, 6) * 0.5, b1=r(6), w2=r(3, 6)), residual, ["x", "w1", "b1", "w2"]),
}


def leaf(*shape):
    return torch.randn(*shape, requires_grad=True)


def v_relu_after_sigmoid():
    y = leaf(3).sigmoid()  # SigmoidBackward0 saves its output
    y.relu_()
    return y.sum()


def v_add_after_mm():
    y = leaf(2, 3) @ leaf(3, 4)  # MmBackward0 saves its inputs only
    y.add_(1)
    return y.sum()


def v_relu_after_relu():
    y = leaf(3).relu()  # ReluBackward0 saves its output
    y.sigmoid_()
    return y.sum()


def v_mul_input_changed():
    h = leaf(3) * 2
    z = h * h  # MulBackward0 saves both inputs (both need gradients)
    h.relu_()
    return z.sum()


def v_mul_by_constant_input_changed():
    h = leaf(3) * 2
    z = h * torch.randn(3)  # the constant's gradient is not wanted: h is not saved
    h.relu_()
    return z.sum()


def v_add_input_changed():
    h = leaf(3) * 2
    z = h + h  # AddBackward0 saves nothing
    h.relu_()
    return z.sum()


def v_relu_then_mul_scalar():
    y = leaf(3) * 1
    y.relu_()
    y.mul_(2)  # changes relu_'s saved result
    return y.sum()


def v_exp_then_add():
    y = leaf(3).exp()
    y.add_(1)
    return y.sum()


def v_mm_constant_weight_input_changed():
    h = leaf(2, 3) * 1
    z = h @ torch.randn(3, 4)  # the constant weight's gradient is not wanted: h is not saved
    h.relu_()
    return z.sum()


def v_mul_other_changed_after_mul_():
    w = leaf(3) * 1
    y = leaf(3) * 1
    y.mul_(w)  # saves w
    w.add_(1)
    return y.sum()


def v_softmax_output_changed():
    z = leaf(2, 3).log_softmax(1)
    z.mul_(2)
    return z.sum()


def v_linear_bias_changed():
    b = leaf(4) * 1
    z = torch.nn.functional.linear(leaf(2, 3), leaf(4, 3), b)  # the bias is not saved
    b.add_(1)
    return z.sum()


VERSION_CASES = {
    "relu_after_sigmoid": v_relu_after_sigmoid,
    "add_after_mm": v_add_after_mm,
    "sigmoid_after_relu": v_relu_after_relu,
    "mul_input_changed": v_mul_input_changed,
    "mul_by_constant_input_changed": v_mul_by_constant_input_changed,
    "add_input_changed": v_add_input_changed,
    "relu_then_mul_scalar": v_relu_then_mul_scalar,
    "exp_then_add": v_exp_then_add,
    "mm_constant_weight_input_changed": v_mm_constant_weight_input_changed,
    "mul_other_changed_after_mul_": v_mul_other_changed_after_mul_,
    "log_softmax_output_changed": v_softmax_output_changed,
    "linear_bias_changed": v_linear_bias_changed,
}


def save(directory, name, tensor):
    arr = tensor.detach().cpu().numpy().copy(order="C")
    assert arr.dtype == np.float32, (name, arr.dtype)
    assert np.isfinite(arr).all(), (directory, name)
    path = os.path.join(directory, name + ".npy")
    np.save(path, arr)
    assert np.array_equal(np.load(path), arr)


def run_case(name, build, compute, grads):
    torch.manual_seed(zlib.crc32(name.encode()))
    inputs = build()
    files = {k: v.clone() for k, v in inputs.items()}
    for k in grads:
        inputs[k] = inputs[k].clone().requires_grad_(True)
    out = compute(inputs)
    files["out"] = out
    g = torch.randn(out.shape, dtype=out.dtype)
    files["grad_out"] = g
    out.backward(g)
    for k in grads:
        files["grad_" + k] = inputs[k].grad
    return files


def version_outcomes():
    lines = []
    for name, fn in VERSION_CASES.items():
        torch.manual_seed(zlib.crc32(name.encode()))
        try:
            fn().backward()
            lines.append("%s fine" % name)
        except RuntimeError as e:
            assert "modified by an inplace operation" in str(e), str(e)
            lines.append("%s raises %s" % (name, str(e).split(" Hint:")[0]))
    return "\n".join(lines) + "\n"


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
    with open(os.path.join(FIXTURES, "version_errors.txt"), "w") as f:
        f.write(version_outcomes())
    print("wrote %d cases and %d version scenarios to %s (%d bytes, torch %s)" % (
        len(CASES), len(VERSION_CASES), os.path.relpath(FIXTURES), total, torch.__version__))
    assert total < 256 << 10


if __name__ == "__main__":
    sys.exit(main())
