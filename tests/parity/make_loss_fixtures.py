#!/usr/bin/python3
"""Generates the PyTorch parity fixtures of the losses added for issue 23 (item 3), and of its first ops (item 5).

Run with Debian's python3 (torch 1.13, numpy):

    /usr/bin/python3 tests/parity/make_loss_fixtures.py    # rewrites tests/parity/loss_fixtures/ and op_fixtures/

Layout (a contract with tests/framework/test_losses.cpp): one directory per
case, holding each input under its name (float32 `<f4`, class indices int64
`<i8`), `out.npy`, `grad_out.npy` when the output is not a scalar (backward
was `out.backward(grad_out)`, else `out.backward()`), and `grad_<input>.npy`
for every input listed as differentiable (none for integer outputs: one_hot).
OP_CASES go to op_fixtures/ in the same layout. The computation of each case is in
CASES below and repeated in the C++ test's table (which fails when the two
lists differ). Each case seeds torch with zlib.crc32(<name>) before drawing
its inputs; torch runs on one thread, so the files are the same on every run.
"""
import os
import shutil
import sys
import zlib

import numpy as np
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, "loss_fixtures")


def classes(*shape, k):
    return torch.randint(0, k, shape)


def probs(*shape, dim=1):
    return torch.softmax(torch.randn(shape) * 2, dim=dim)


def nonzero(*shape):
    r = torch.randn(shape)
    return torch.where(r >= 0, r + 0.1, r - 0.1)


def away_from(*shape, edge):
    # differences |x - t| kept at least 0.05 away from `edge`, where the loss changes formula
    d = torch.randn(shape) * 1.5
    d = torch.where((d.abs() - edge).abs() < 0.05, d + 0.1 * torch.sign(d), d)
    return d


def with_ignored(t, idx, value=-100):
    t = t.clone()
    t.view(-1)[idx] = value
    return t


# name -> (inputs builder, computation, differentiable input names)
CASES = {
    # cross_entropy with class indices on (N, C, d1, ...)
    "ce_nd_mean": (lambda: dict(x=torch.randn(2, 5, 3, 4), target=classes(2, 3, 4, k=5)),
                   lambda a: F.cross_entropy(a["x"], a["target"]), ["x"]),
    "ce_nd_none": (lambda: dict(x=torch.randn(3, 4, 5), target=classes(3, 5, k=4)),
                   lambda a: F.cross_entropy(a["x"], a["target"], reduction="none"), ["x"]),
    "ce_nd_weight_sum": (lambda: dict(x=torch.randn(2, 3, 7), target=classes(2, 7, k=3), weight=torch.rand(3) + 0.2),
                         lambda a: F.cross_entropy(a["x"], a["target"], weight=a["weight"], reduction="sum"), ["x"]),
    "ce_weight_ignore_mean": (lambda: dict(x=torch.randn(9, 6), target=with_ignored(classes(9, k=6), [1, 4]),
                                           weight=torch.rand(6) + 0.2),
                              lambda a: F.cross_entropy(a["x"], a["target"], weight=a["weight"]), ["x"]),
    "ce_nd_weight_smoothing_mean": (lambda: dict(x=torch.randn(2, 4, 3, 3), target=with_ignored(classes(2, 3, 3, k=4), [0, 7]),
                                                 weight=torch.rand(4) + 0.2),
                                    lambda a: F.cross_entropy(a["x"], a["target"], weight=a["weight"],
                                                              label_smoothing=0.15), ["x"]),
    "ce_nd_smoothing_none": (lambda: dict(x=torch.randn(2, 5, 3), target=classes(2, 3, k=5)),
                             lambda a: F.cross_entropy(a["x"], a["target"], label_smoothing=0.2, reduction="none"),
                             ["x"]),
    "ce_single_sample": (lambda: dict(x=torch.randn(7), target=torch.tensor(3)),
                         lambda a: F.cross_entropy(a["x"], a["target"]), ["x"]),
    # cross_entropy with class probabilities
    "ce_prob_mean": (lambda: dict(x=torch.randn(5, 6), target=probs(5, 6)),
                     lambda a: F.cross_entropy(a["x"], a["target"]), ["x", "target"]),
    "ce_prob_weight_smoothing_sum": (lambda: dict(x=torch.randn(4, 3), target=probs(4, 3), weight=torch.rand(3) + 0.2),
                                     lambda a: F.cross_entropy(a["x"], a["target"], weight=a["weight"],
                                                               label_smoothing=0.1, reduction="sum"), ["x", "target"]),
    "ce_prob_nd_none": (lambda: dict(x=torch.randn(2, 4, 3), target=probs(2, 4, 3)),
                        lambda a: F.cross_entropy(a["x"], a["target"], reduction="none"), ["x", "target"]),
    "ce_prob_nd_weight_mean": (lambda: dict(x=torch.randn(3, 4, 2, 2), target=probs(3, 4, 2, 2), weight=torch.rand(4) + 0.2),
                               lambda a: F.cross_entropy(a["x"], a["target"], weight=a["weight"]), ["x", "target"]),
    # nll_loss with weight
    "nll_weight_mean": (lambda: dict(x=torch.log_softmax(torch.randn(8, 5), 1), target=classes(8, k=5),
                                     weight=torch.rand(5) + 0.2),
                        lambda a: F.nll_loss(a["x"], a["target"], weight=a["weight"]), ["x"]),
    "nll_nd_weight_ignore_none": (lambda: dict(x=torch.log_softmax(torch.randn(2, 3, 4), 1),
                                               target=with_ignored(classes(2, 4, k=3), [2], value=-1),
                                               weight=torch.rand(3) + 0.2),
                                  lambda a: F.nll_loss(a["x"], a["target"], weight=a["weight"], ignore_index=-1,
                                                       reduction="none"), ["x"]),
    # binary_cross_entropy_with_logits
    "bce_logits_mean": (lambda: dict(x=torch.randn(3, 5) * 3, target=torch.rand(3, 5)),
                        lambda a: F.binary_cross_entropy_with_logits(a["x"], a["target"]), ["x", "target"]),
    "bce_logits_weights_sum": (lambda: dict(x=torch.randn(4, 3) * 3, target=(torch.rand(4, 3) > 0.5).float(),
                                            weight=torch.rand(4, 1) + 0.5, pos_weight=torch.rand(3) * 3),
                               lambda a: F.binary_cross_entropy_with_logits(a["x"], a["target"], weight=a["weight"],
                                                                            pos_weight=a["pos_weight"],
                                                                            reduction="sum"), ["x", "target"]),
    "bce_logits_none": (lambda: dict(x=torch.randn(2, 3, 2) * 20, target=torch.rand(2, 3, 2)),
                        lambda a: F.binary_cross_entropy_with_logits(a["x"], a["target"], reduction="none"),
                        ["x", "target"]),
    # l1, smooth_l1, huber
    "l1_mean": (lambda: dict(x=torch.randn(4, 3, 2), target=torch.randn(4, 3, 2)),
                lambda a: F.l1_loss(a["x"], a["target"]), ["x", "target"]),
    "l1_none": (lambda: dict(x=nonzero(5, 3), target=torch.zeros(5, 3)),
                lambda a: F.l1_loss(a["x"], a["target"], reduction="none"), ["x", "target"]),
    "smooth_l1_beta_half_mean": (lambda: dict(x=away_from(6, 4, edge=0.5), target=torch.zeros(6, 4)),
                                 lambda a: F.smooth_l1_loss(a["x"], a["target"], beta=0.5), ["x", "target"]),
    "smooth_l1_none": (lambda: dict(x=away_from(3, 5, edge=1.0), target=torch.zeros(3, 5)),
                       lambda a: F.smooth_l1_loss(a["x"], a["target"], reduction="none"), ["x", "target"]),
    "smooth_l1_beta0_sum": (lambda: dict(x=nonzero(7), target=torch.zeros(7)),
                            lambda a: F.smooth_l1_loss(a["x"], a["target"], beta=0.0, reduction="sum"),
                            ["x", "target"]),
    "huber_delta_mean": (lambda: dict(x=away_from(5, 4, edge=0.7), target=torch.zeros(5, 4)),
                         lambda a: F.huber_loss(a["x"], a["target"], delta=0.7), ["x", "target"]),
    "huber_none": (lambda: dict(x=away_from(2, 3, 3, edge=2.0) * 2, target=torch.zeros(2, 3, 3)),
                   lambda a: F.huber_loss(a["x"], a["target"], delta=2.0, reduction="none"), ["x", "target"]),
    # kl_div
    "kl_div_batchmean": (lambda: dict(x=torch.log_softmax(torch.randn(4, 6), 1),
                                      target=probs(4, 6) * (torch.rand(4, 6) > 0.2)),
                         lambda a: F.kl_div(a["x"], a["target"], reduction="batchmean"), ["x"]),  # log(0): no target grad
    "kl_div_mean": (lambda: dict(x=torch.log_softmax(torch.randn(3, 5), 1), target=probs(3, 5)),
                    lambda a: F.kl_div(a["x"], a["target"], reduction="mean"), ["x", "target"]),
    "kl_div_log_target_sum": (lambda: dict(x=torch.log_softmax(torch.randn(3, 4), 1),
                                           target=torch.log_softmax(torch.randn(3, 4), 1)),
                              lambda a: F.kl_div(a["x"], a["target"], reduction="sum", log_target=True),
                              ["x", "target"]),
    "kl_div_none": (lambda: dict(x=torch.log_softmax(torch.randn(2, 3, 4), 2), target=probs(2, 3, 4, dim=2)),
                    lambda a: F.kl_div(a["x"], a["target"], reduction="none"), ["x", "target"]),
}

OP_FIXTURES = os.path.join(HERE, "op_fixtures")

# Ops of issue 23 item 5 (the first few), in the same layout, written to op_fixtures/.
OP_CASES = {
    "var_dims": (lambda: dict(x=torch.randn(3, 4, 5)), lambda a: a["x"].var(dim=(0, 2)), ["x"]),
    "var_all_population": (lambda: dict(x=torch.randn(4, 6)), lambda a: torch.var(a["x"], unbiased=False), ["x"]),
    "var_keepdim": (lambda: dict(x=torch.randn(2, 7)), lambda a: a["x"].var(dim=-1, keepdim=True), ["x"]),
    "std_dim": (lambda: dict(x=torch.randn(5, 3)), lambda a: a["x"].std(dim=0), ["x"]),
    "std_all": (lambda: dict(x=torch.randn(3, 2, 2)), lambda a: a["x"].std(), ["x"]),
    "logsumexp_dim": (lambda: dict(x=torch.randn(4, 9) * 5), lambda a: torch.logsumexp(a["x"], dim=1), ["x"]),
    "logsumexp_dims_keepdim": (lambda: dict(x=torch.randn(3, 4, 5) + 50),
                               lambda a: torch.logsumexp(a["x"], dim=(0, 2), keepdim=True), ["x"]),
    "silu": (lambda: dict(x=torch.randn(3, 5) * 3), lambda a: F.silu(a["x"]), ["x"]),
    "leaky_relu": (lambda: dict(x=nonzero(4, 5)), lambda a: F.leaky_relu(a["x"], 0.2), ["x"]),
    "leaky_relu_default": (lambda: dict(x=nonzero(6)), lambda a: F.leaky_relu(a["x"]), ["x"]),
    "one_hot": (lambda: dict(target=classes(2, 3, k=4)), lambda a: F.one_hot(a["target"], 6), []),
    "one_hot_inferred": (lambda: dict(target=classes(5, k=4)), lambda a: F.one_hot(a["target"]), []),
}


def save(directory, name, tensor):
    arr = tensor.detach().cpu().numpy().copy(order="C")
    assert arr.dtype in (np.float32, np.int64), (name, arr.dtype)
    if arr.dtype == np.float32:
        assert np.isfinite(arr).all(), (directory, name)
    path = os.path.join(directory, name + ".npy")
    np.save(path, arr)
    assert np.array_equal(np.load(path), arr)


def run_case(name, build, compute, grads):
    torch.manual_seed(zlib.crc32(name.encode()))
    inputs = build()
    files = dict(inputs)
    for k in grads:
        inputs[k] = inputs[k].clone().requires_grad_(True)
    out = compute(inputs)
    files["out"] = out
    if not out.is_floating_point():
        return files
    if out.dim() > 0:
        g = torch.randn(out.shape)
        files["grad_out"] = g
        out.backward(g)
    else:
        out.backward()
    for k in grads:
        files["grad_" + k] = inputs[k].grad
    return files


def main():
    torch.set_num_threads(1)
    if os.path.isdir(FIXTURES):
        shutil.rmtree(FIXTURES)
    if os.path.isdir(OP_FIXTURES):
        shutil.rmtree(OP_FIXTURES)
    total = 0
    jobs = [(FIXTURES, n, c) for n, c in CASES.items()] + [(OP_FIXTURES, n, c) for n, c in OP_CASES.items()]
    for folder, name, (build, compute, grads) in jobs:
        directory = os.path.join(folder, name)
        os.makedirs(directory)
        for stem, t in run_case(name, build, compute, grads).items():
            save(directory, stem, t)
        total += sum(os.path.getsize(os.path.join(directory, f)) for f in os.listdir(directory))
    print("wrote %d cases to %s and op_fixtures/ (%d bytes, torch %s)" % (len(jobs), os.path.relpath(FIXTURES), total,
                                                         torch.__version__))
    assert total < 256 << 10


if __name__ == "__main__":
    sys.exit(main())
