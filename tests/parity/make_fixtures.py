#!/usr/bin/python3
"""Generates the PyTorch parity fixtures that the C++ tests compare `tiny` against.

Run from anywhere with Debian's python3 (it has torch 1.13 and numpy; another
python3 may come first on PATH, so name this one):

    /usr/bin/python3 tests/parity/make_fixtures.py              # rewrite tests/parity/fixtures/
    /usr/bin/python3 tests/parity/make_fixtures.py --markdown   # print the case table for README.md

Layout (a contract with the C++ tests, see README.md): one directory per case,
tests/parity/fixtures/<case>/, holding
  <input>.npy       every input by its name below (a, b, x, target, ...), C order
  out.npy           the forward output (ops with two outputs: values.npy, indices.npy)
  grad_out.npy      the upstream gradient g used as out.backward(g) (values.backward(g));
                    absent when the output is a 0-d scalar: then out.backward() was called
  grad_<input>.npy  the gradient of every differentiable input (every floating-point input)
Integer outputs (argmax) have no gradient files at all.

Determinism: each case seeds torch with zlib.crc32(<case name>) right before it
builds its inputs, so adding a case never changes another; torch runs on one
thread. Inputs are drawn with torch (in the order written below), then saved.

Input helpers used in the table (all float32 unless dtype=f64 is passed):
  randn(*s)           torch.randn(s)
  positive(*s)        torch.rand(s) * 1.5 + 0.5                    values in [0.5, 2)
  nonzero(*s)         r = randn(*s); r + 0.1 * sign(r)             |values| >= 0.1, no zeros
  off_bounds(*s)      randn(*s) * 0.8, values within 0.01 of +-0.5 pushed 0.02 away from the bound
  distinct(*s)        (torch.randperm(n) - n / 2) / n * 4, reshaped  all values differ: no ties
  classes(n, k)       torch.randint(0, k, (n,)) (int64)
  mask(*s)            torch.rand(s) > 0.5 (bool)
The C++ side only needs the saved inputs; the helpers say how they were made.

CASES (name | inputs | computation). F is torch.nn.functional.
  -- pointwise
  add_broadcast            a = randn(3, 1, 4); b = randn(5, 4)            out = a + b
  sub_broadcast            a = randn(4, 1); b = randn(3)                  out = a - b
  mul_broadcast            a = randn(2, 3, 4); b = randn(3, 1)            out = a * b
  div                      a = randn(6, 5); b = nonzero(6, 5) (|b|>=0.1)  out = a / b
  neg                      a = randn(3, 4)                                out = -a
  pow_scalar               a = positive(3, 4)                             out = a ** 2.5
  pow_tensor               a = positive(3, 4); b = randn(3, 4)            out = a ** b
  exp                      a = randn(3, 4)                                out = torch.exp(a)
  log                      a = positive(3, 4)                             out = torch.log(a)
  sqrt                     a = positive(3, 4)                             out = torch.sqrt(a)
  abs                      a = nonzero(3, 4)                              out = torch.abs(a)
  relu                     a = nonzero(3, 4)                              out = torch.relu(a)
  sigmoid                  a = randn(3, 4)                                out = torch.sigmoid(a)
  tanh                     a = randn(3, 4)                                out = torch.tanh(a)
  gelu                     a = randn(3, 4) * 2                            out = F.gelu(a)  (approximate='none': exact erf form)
  clamp                    a = off_bounds(3, 4)                           out = torch.clamp(a, min=-0.5, max=0.5)
  where                    cond = mask(3, 4); a = randn(3, 4); b = randn(3, 4)  out = torch.where(cond, a, b)
  add_scalar               a = randn(3, 4)                                out = a + 2.5
  rsub_scalar              a = randn(3, 4)                                out = 1 - a
  div_scalar               a = randn(3, 4)                                out = a / 4
  sin                      a = randn(3, 4)                                out = torch.sin(a)
  cos                      a = randn(3, 4)                                out = torch.cos(a)
  log1p                    a = positive(3, 4) - 0.9                       out = torch.log1p(a)
  expm1                    a = randn(3, 4)                                out = torch.expm1(a)
  rsqrt                    a = positive(3, 4)                             out = torch.rsqrt(a)
  floor                    a = randn(3, 4) * 3                            out = torch.floor(a)  (gradient zero)
  round_halves             a = torch.tensor([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 0.49, -3.7])  out = torch.round(a)  (halves to even)
  sign                     a = nonzero(3, 4)                              out = torch.sign(a)
  isnan                    a = randn(3, 4)                                out = torch.isnan(torch.log(a))  (bool: no gradient)
  isfinite                 a = randn(3, 4); m = mask(3, 4)                out = torch.isfinite(torch.log(a) / m)
  masked_fill_broadcast    a = randn(4, 5); m = mask(1, 5)                out = a.masked_fill(m, -1.5)
  tril                     a = randn(4, 6)                                out = torch.tril(a, 1)
  triu_batched             a = randn(2, 5, 4)                             out = torch.triu(a, -1)
  linspace                 a = randn(7)                                   out = a * torch.linspace(-1.0, 2.0, 7)
  eye                      a = randn(3, 5)                                out = a * 2 + torch.eye(3, 5)
  softplus                 a = randn(4, 5) * 4                            out = F.softplus(a, beta=2, threshold=5)  (both branches)
  -- indexing
  index_select_dim0        a = randn(5, 4, 3); index = torch.tensor([4, 0, 0, 2])  out = torch.index_select(a, 0, index)
  index_select_dim1        a = randn(3, 6, 2); index = torch.tensor([5, 1, 1])     out = torch.index_select(a, 1, index)
  flip                     a = randn(3, 4, 5)                             out = torch.flip(a, dims=(0, 2))
  unbind                   a = randn(3, 4)                                out = torch.stack(torch.unbind(a, 1)[::-1], 0)
  -- reductions
  sum_all                  a = randn(4, 5, 6)                             out = a.sum()
  sum_dim                  a = randn(4, 5, 6)                             out = a.sum(dim=1)
  sum_dims_keepdim         a = randn(4, 5, 6)                             out = a.sum(dim=(0, 2), keepdim=True)
  mean_all                 a = randn(4, 5, 6)                             out = a.mean()
  mean_dim                 a = randn(4, 5, 6)                             out = a.mean(dim=-1)
  max_all                  a = distinct(5, 6)                             out = a.max()
  max_dim                  a = distinct(4, 7)                             values, indices = a.max(dim=1)
  min_dim                  a = distinct(6, 4)                             values, indices = a.min(dim=0)
  argmax_dim               a = distinct(4, 7)                             out = a.argmax(dim=1)
  argmax_all               a = distinct(5, 6)                             out = a.argmax()
  amax_dims                a = distinct(4, 5, 6)                          out = torch.amax(a, dim=(0, 2))
  amax_ties                a = torch.tensor([[1., 3., 3.], [2., 2., 0.]])  out = torch.amax(a, dim=1)  (ties share the gradient)
  amin_keepdim             a = distinct(4, 5)                             out = torch.amin(a, dim=-1, keepdim=True)
  any_dim                  a = randn(3, 4)                                out = torch.any(a > 1, dim=1)  (bool: no gradient)
  all_full                 a = randn(3, 4)                                out = torch.all(a > -2)
  -- linear algebra
  mm                       a = randn(64, 78); b = randn(78, 32)           out = a @ b
  mm_transposed            a = randn(20, 30); b = randn(20, 10)           out = a.t() @ b   (a.t() is not contiguous)
  matmul_batched           a = randn(2, 3, 4, 5); b = randn(5, 6)         out = torch.matmul(a, b)
  matmul_batched_broadcast a = randn(2, 1, 4, 5); b = randn(3, 5, 6)      out = torch.matmul(a, b)  (batch dims broadcast to [2, 3])
  matmul_vec               a = randn(4, 5); b = randn(5)                  out = torch.matmul(a, b)
  matmul_dot               a = randn(5); b = randn(5)                     out = torch.matmul(a, b)
  addmm                    bias = randn(32); a = randn(16, 20); b = randn(20, 32)  out = torch.addmm(bias, a, b)  (beta=1, alpha=1)
  -- softmax
  softmax_dim1             x = randn(8, 10)                               out = F.softmax(x, dim=1)
  log_softmax_last         x = randn(4, 6, 9)                             out = F.log_softmax(x, dim=-1)
  softmax_dim0_3d          x = randn(5, 3, 4)                             out = F.softmax(x, dim=0)
  softmax_large_values     x = 1000 + 3 * randn(4, 8)                     out = F.softmax(x, dim=-1)
  -- losses
  cross_entropy_mean       x = randn(16, 10); target = classes(16, 10)    out = F.cross_entropy(x, target)
  cross_entropy_sum        x = randn(16, 10); target = classes(16, 10)    out = F.cross_entropy(x, target, reduction='sum')
  cross_entropy_none       x = randn(16, 10); target = classes(16, 10)    out = F.cross_entropy(x, target, reduction='none')
  cross_entropy_label_smoothing  x = randn(16, 10); target = classes(16, 10)  out = F.cross_entropy(x, target, label_smoothing=0.1)
  cross_entropy_ignore_index     x = randn(16, 10); target = classes(16, 10) with target[[1, 5, 6, 12]] = -100
                                                                          out = F.cross_entropy(x, target)  (ignore_index=-100, mean over the 12 others)
  nll_loss_mean            x = F.log_softmax(randn(16, 10), dim=1) (saved as the leaf x); target = classes(16, 10)
                                                                          out = F.nll_loss(x, target)
  mse_loss_mean            x = randn(8, 5); target = randn(8, 5)          out = F.mse_loss(x, target)
  mse_loss_sum             x = randn(8, 5); target = randn(8, 5)          out = F.mse_loss(x, target, reduction='sum')
  -- float64
  gelu_f64                 a = randn(3, 4, dtype=f64) * 2                 out = F.gelu(a)
  mm_f64                   a = randn(16, 24, dtype=f64); b = randn(24, 8, dtype=f64)  out = a @ b
  cross_entropy_f64        x = randn(16, 10, dtype=f64); target = classes(16, 10)     out = F.cross_entropy(x, target)
  -- composite
  mlp_step                 x = randn(8, 12); w1 = randn(12, 16) / sqrt(12); b1 = randn(16) * 0.1;
                           w2 = randn(16, 5) / 4; b2 = randn(5) * 0.1; target = classes(8, 5)
                                                                          out = F.cross_entropy(torch.relu(x @ w1 + b1) @ w2 + b2, target)
"""
import argparse
import math
import os
import shutil
import sys
import zlib

import numpy as np
import torch
import torch.nn.functional as F

f64 = torch.float64


class Case:
    """One fixture: Python statements that make the inputs, and the statement that computes the outputs."""

    def __init__(self, name, inputs, forward):
        self.name, self.inputs, self.forward = name, inputs, forward


# The statements below are executed as written (see run_case): this list is the
# exact computation of each fixture. Inputs are assigned in order; the forward
# statement assigns `out`, or `values, indices` for ops with two outputs.
CASES = [
    # pointwise
    Case("add_broadcast", "a = randn(3, 1, 4); b = randn(5, 4)", "out = a + b"),
    Case("sub_broadcast", "a = randn(4, 1); b = randn(3)", "out = a - b"),
    Case("mul_broadcast", "a = randn(2, 3, 4); b = randn(3, 1)", "out = a * b"),
    Case("div", "a = randn(6, 5); b = nonzero(6, 5)", "out = a / b"),
    Case("neg", "a = randn(3, 4)", "out = -a"),
    Case("pow_scalar", "a = positive(3, 4)", "out = a ** 2.5"),
    Case("pow_tensor", "a = positive(3, 4); b = randn(3, 4)", "out = a ** b"),
    Case("exp", "a = randn(3, 4)", "out = torch.exp(a)"),
    Case("log", "a = positive(3, 4)", "out = torch.log(a)"),
    Case("sqrt", "a = positive(3, 4)", "out = torch.sqrt(a)"),
    Case("abs", "a = nonzero(3, 4)", "out = torch.abs(a)"),
    Case("relu", "a = nonzero(3, 4)", "out = torch.relu(a)"),
    Case("sigmoid", "a = randn(3, 4)", "out = torch.sigmoid(a)"),
    Case("tanh", "a = randn(3, 4)", "out = torch.tanh(a)"),
    Case("gelu", "a = randn(3, 4) * 2", "out = F.gelu(a)"),
    Case("clamp", "a = off_bounds(3, 4)", "out = torch.clamp(a, min=-0.5, max=0.5)"),
    Case("where", "cond = mask(3, 4); a = randn(3, 4); b = randn(3, 4)", "out = torch.where(cond, a, b)"),
    Case("add_scalar", "a = randn(3, 4)", "out = a + 2.5"),
    Case("rsub_scalar", "a = randn(3, 4)", "out = 1 - a"),
    Case("div_scalar", "a = randn(3, 4)", "out = a / 4"),
    Case("sin", "a = randn(3, 4)", "out = torch.sin(a)"),
    Case("cos", "a = randn(3, 4)", "out = torch.cos(a)"),
    Case("log1p", "a = positive(3, 4) - 0.9", "out = torch.log1p(a)"),
    Case("expm1", "a = randn(3, 4)", "out = torch.expm1(a)"),
    Case("rsqrt", "a = positive(3, 4)", "out = torch.rsqrt(a)"),
    Case("floor", "a = randn(3, 4) * 3", "out = torch.floor(a)"),
    Case("round_halves", "a = torch.tensor([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 0.49, -3.7])", "out = torch.round(a)"),
    Case("sign", "a = nonzero(3, 4)", "out = torch.sign(a)"),
    Case("isnan", "a = randn(3, 4)", "out = torch.isnan(torch.log(a))"),
    Case("isfinite", "a = randn(3, 4); m = mask(3, 4)", "out = torch.isfinite(torch.log(a) / m)"),
    Case("masked_fill_broadcast", "a = randn(4, 5); m = mask(1, 5)", "out = a.masked_fill(m, -1.5)"),
    Case("tril", "a = randn(4, 6)", "out = torch.tril(a, 1)"),
    Case("triu_batched", "a = randn(2, 5, 4)", "out = torch.triu(a, -1)"),
    Case("linspace", "a = randn(7)", "out = a * torch.linspace(-1.0, 2.0, 7)"),
    Case("eye", "a = randn(3, 5)", "out = a * 2 + torch.eye(3, 5)"),
    Case("softplus", "a = randn(4, 5) * 4", "out = F.softplus(a, beta=2, threshold=5)"),
    # indexing
    Case("index_select_dim0", "a = randn(5, 4, 3); index = torch.tensor([4, 0, 0, 2])",
         "out = torch.index_select(a, 0, index)"),
    Case("index_select_dim1", "a = randn(3, 6, 2); index = torch.tensor([5, 1, 1])",
         "out = torch.index_select(a, 1, index)"),
    Case("flip", "a = randn(3, 4, 5)", "out = torch.flip(a, dims=(0, 2))"),
    Case("unbind", "a = randn(3, 4)", "out = torch.stack(torch.unbind(a, 1)[::-1], 0)"),
    Case("repeat_more_dims", "a = randn(2, 3)", "out = a.t().repeat(2, 1, 3)"),
    Case("split_size", "a = randn(5, 3)", "out = torch.stack([p.sum(0) * (i + 1) for i, p in enumerate(torch.split(a, 2))], 0)"),
    Case("split_sizes", "a = randn(7, 4)",
         "out = torch.cat([p * (i + 1) for i, p in enumerate(torch.split(a.t(), [1, 2, 4], dim=1))], 1)"),
    Case("chunk", "a = randn(3, 7)", "out = torch.cat(torch.chunk(a, 3, dim=-1)[::-1], 1)"),
    Case("gather_dim1", "a = randn(3, 5); index = torch.tensor([[0, 4, 4, 1], [2, 2, 0, 3], [1, 1, 1, 1]])",
         "out = torch.gather(a, 1, index)"),
    Case("gather_dim0_smaller", "a = randn(4, 3, 2); index = torch.randint(0, 2, (3, 2, 4))",
         "out = torch.gather(a.transpose(0, 2), 0, index)"),
    Case("masked_select_broadcast", "a = randn(3, 4); m = mask(1, 4)", "out = torch.masked_select(a, m)"),
    Case("masked_select_transposed", "a = randn(4, 3); m = mask(3, 4)", "out = a.t().masked_select(m)"),
    Case("nonzero", "a = randn(3, 5) * mask(3, 5)", "out = torch.nonzero(a)"),
    Case("sort_dim1", "a = distinct(4, 6)", "values, indices = torch.sort(a, dim=1)"),
    Case("sort_descending_ties", "a = torch.tensor([[3., 1., 3., 2.], [0., 0., -1., 0.], [5., 5., 5., 5.]])",
         "values, indices = torch.sort(a.t(), dim=0, descending=True, stable=True)"),
    Case("sort_ascending_ties", "a = torch.tensor([[3., 1., 3., 2., 1.], [0., 0., -1., 0., 7.]])",
         "values, indices = torch.sort(a, dim=-1, stable=True)"),
    Case("topk_largest", "a = distinct(5, 8)", "values, indices = torch.topk(a, 3, dim=1)"),
    Case("topk_smallest", "a = distinct(6, 4)", "values, indices = torch.topk(a.t(), 2, dim=1, largest=False)"),
    # reductions
    Case("sum_all", "a = randn(4, 5, 6)", "out = a.sum()"),
    Case("sum_dim", "a = randn(4, 5, 6)", "out = a.sum(dim=1)"),
    Case("sum_dims_keepdim", "a = randn(4, 5, 6)", "out = a.sum(dim=(0, 2), keepdim=True)"),
    Case("mean_all", "a = randn(4, 5, 6)", "out = a.mean()"),
    Case("mean_dim", "a = randn(4, 5, 6)", "out = a.mean(dim=-1)"),
    Case("max_all", "a = distinct(5, 6)", "out = a.max()"),
    Case("max_dim", "a = distinct(4, 7)", "values, indices = a.max(dim=1)"),
    Case("min_dim", "a = distinct(6, 4)", "values, indices = a.min(dim=0)"),
    Case("argmax_dim", "a = distinct(4, 7)", "out = a.argmax(dim=1)"),
    Case("argmax_all", "a = distinct(5, 6)", "out = a.argmax()"),
    Case("amax_dims", "a = distinct(4, 5, 6)", "out = torch.amax(a, dim=(0, 2))"),
    Case("amax_ties", "a = torch.tensor([[1., 3., 3.], [2., 2., 0.]])", "out = torch.amax(a, dim=1)"),
    Case("amin_keepdim", "a = distinct(4, 5)", "out = torch.amin(a, dim=-1, keepdim=True)"),
    Case("any_dim", "a = randn(3, 4)", "out = torch.any(a > 1, dim=1)"),
    Case("all_full", "a = randn(3, 4)", "out = torch.all(a > -2)"),
    Case("cumsum_dim1", "a = randn(3, 7, 2)", "out = torch.cumsum(a, 1)"),
    Case("cumsum_transposed", "a = randn(5, 9)", "out = torch.cumsum(a.t(), -1)"),
    Case("prod_dim", "a = randn(4, 5, 3)", "out = torch.prod(a, 1)"),
    Case("prod_zeros_keepdim", "a = randn(3, 5); a[0, 2] = 0; a[1, 1] = 0; a[1, 3] = 0",
         "out = torch.prod(a.t(), 0, keepdim=True)"),
    Case("prod_all", "a = positive(2, 3, 2)", "out = a.prod()"),
    Case("prod_all_one_zero", "a = randn(7); a[3] = 0", "out = a.prod()"),
    # linear algebra
    Case("mm", "a = randn(64, 78); b = randn(78, 32)", "out = a @ b"),
    Case("mm_transposed", "a = randn(20, 30); b = randn(20, 10)", "out = a.t() @ b"),
    Case("matmul_batched", "a = randn(2, 3, 4, 5); b = randn(5, 6)", "out = torch.matmul(a, b)"),
    Case("matmul_batched_broadcast", "a = randn(2, 1, 4, 5); b = randn(3, 5, 6)", "out = torch.matmul(a, b)"),
    Case("matmul_vec", "a = randn(4, 5); b = randn(5)", "out = torch.matmul(a, b)"),
    Case("matmul_dot", "a = randn(5); b = randn(5)", "out = torch.matmul(a, b)"),
    Case("addmm", "bias = randn(32); a = randn(16, 20); b = randn(20, 32)", "out = torch.addmm(bias, a, b)"),
    # softmax
    Case("softmax_dim1", "x = randn(8, 10)", "out = F.softmax(x, dim=1)"),
    Case("log_softmax_last", "x = randn(4, 6, 9)", "out = F.log_softmax(x, dim=-1)"),
    Case("softmax_dim0_3d", "x = randn(5, 3, 4)", "out = F.softmax(x, dim=0)"),
    Case("softmax_large_values", "x = 1000 + 3 * randn(4, 8)", "out = F.softmax(x, dim=-1)"),
    # losses
    Case("cross_entropy_mean", "x = randn(16, 10); target = classes(16, 10)", "out = F.cross_entropy(x, target)"),
    Case("cross_entropy_sum", "x = randn(16, 10); target = classes(16, 10)",
         "out = F.cross_entropy(x, target, reduction='sum')"),
    Case("cross_entropy_none", "x = randn(16, 10); target = classes(16, 10)",
         "out = F.cross_entropy(x, target, reduction='none')"),
    Case("cross_entropy_label_smoothing", "x = randn(16, 10); target = classes(16, 10)",
         "out = F.cross_entropy(x, target, label_smoothing=0.1)"),
    Case("cross_entropy_ignore_index", "x = randn(16, 10); target = classes(16, 10); target[[1, 5, 6, 12]] = -100",
         "out = F.cross_entropy(x, target)"),
    Case("nll_loss_mean", "x = F.log_softmax(randn(16, 10), dim=1); target = classes(16, 10)",
         "out = F.nll_loss(x, target)"),
    Case("mse_loss_mean", "x = randn(8, 5); target = randn(8, 5)", "out = F.mse_loss(x, target)"),
    Case("mse_loss_sum", "x = randn(8, 5); target = randn(8, 5)", "out = F.mse_loss(x, target, reduction='sum')"),
    # float64
    Case("gelu_f64", "a = randn(3, 4, dtype=f64) * 2", "out = F.gelu(a)"),
    Case("mm_f64", "a = randn(16, 24, dtype=f64); b = randn(24, 8, dtype=f64)", "out = a @ b"),
    Case("cross_entropy_f64", "x = randn(16, 10, dtype=f64); target = classes(16, 10)",
         "out = F.cross_entropy(x, target)"),
    Case("cumsum_f64", "a = randn(4, 6, dtype=f64)", "out = a.cumsum(0)"),
    Case("prod_f64", "a = randn(3, 4, dtype=f64); a[2, 1] = 0", "out = a.prod(-1)"),
    Case("gather_f64", "a = randn(4, 3, dtype=f64); index = torch.tensor([[3, 0, 3], [1, 1, 2]])",
         "out = a.gather(0, index)"),
    # composite
    Case("mlp_step",
         "x = randn(8, 12); w1 = randn(12, 16) / math.sqrt(12); b1 = randn(16) * 0.1; "
         "w2 = randn(16, 5) / 4; b2 = randn(5) * 0.1; target = classes(8, 5)",
         "out = F.cross_entropy(torch.relu(x @ w1 + b1) @ w2 + b2, target)"),
]

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, "fixtures")


# ---------------------------------------------------------------- input helpers

def randn(*shape, dtype=torch.float32):
    return torch.randn(shape, dtype=dtype)


def positive(*shape, dtype=torch.float32):
    return torch.rand(shape, dtype=dtype) * 1.5 + 0.5


def nonzero(*shape, dtype=torch.float32):
    r = torch.randn(shape, dtype=dtype)
    return torch.where(r >= 0, r + 0.1, r - 0.1)


def off_bounds(*shape, dtype=torch.float32):
    r = torch.randn(shape, dtype=dtype) * 0.8
    near = (r.abs() - 0.5).abs() < 0.01
    return torch.where(near, r + 0.02 * torch.sign(r.abs() - 0.5) * torch.sign(r), r)


def distinct(*shape, dtype=torch.float32):
    n = math.prod(shape)
    return ((torch.randperm(n).to(dtype) - n / 2) / n * 4).reshape(shape)


def classes(n, k):
    return torch.randint(0, k, (n,), dtype=torch.int64)


def mask(*shape):
    return torch.rand(shape) > 0.5


HELPERS = dict(torch=torch, F=F, math=math, f64=f64, randn=randn, positive=positive, nonzero=nonzero,
               off_bounds=off_bounds, distinct=distinct, classes=classes, mask=mask)


# ---------------------------------------------------------------- running a case

def save(directory, name, tensor):
    arr = tensor.detach().cpu().numpy().copy(order="C")  # always C order (ascontiguousarray would make 0-d 1-d)
    assert arr.dtype in (np.float32, np.float64, np.int64, np.bool_), (name, arr.dtype)
    np.save(os.path.join(directory, name + ".npy"), arr)
    return arr


def run_case(case):
    """Builds the inputs, runs forward and backward, and returns {file stem: tensor}."""
    torch.manual_seed(zlib.crc32(case.name.encode()))
    env = dict(HELPERS)
    before = set(env)
    exec(case.inputs, env)
    input_names = [k for k in env if k not in before and not k.startswith('_')]
    inputs = {k: env[k] for k in input_names}
    for name, t in inputs.items():
        assert isinstance(t, torch.Tensor), (case.name, name)
        if t.is_floating_point():
            inputs[name] = env[name] = t.detach().clone().requires_grad_(True)
    files = {name: t for name, t in inputs.items()}

    exec(case.forward, env)
    if "values" in env:
        files["values"], files["indices"] = env["values"], env["indices"]
        out = env["values"]
    else:
        out = files["out"] = env["out"]

    if out.is_floating_point():
        if out.dim() == 0:
            out.backward()  # a scalar: no grad_out.npy
        else:
            grad_out = torch.randn(out.shape, dtype=out.dtype)
            files["grad_out"] = grad_out
            out.backward(grad_out)
        for name, t in inputs.items():
            if t.requires_grad:
                assert t.grad is not None, (case.name, name)
                files["grad_" + name] = t.grad
    return files


def check_case(case, directory, files):
    """Reloads every saved file with numpy and compares it with what was saved."""
    on_disk = sorted(f[:-4] for f in os.listdir(directory))
    assert on_disk == sorted(files), (case.name, on_disk, sorted(files))
    for stem, t in files.items():
        arr = np.load(os.path.join(directory, stem + ".npy"))
        expected = t.detach().numpy()
        assert arr.shape == expected.shape and arr.dtype == expected.dtype, (case.name, stem)
        assert arr.flags.c_contiguous
        assert np.array_equal(arr, expected), (case.name, stem)
        if arr.dtype.kind == "f":
            assert np.isfinite(arr).all(), (case.name, stem)


def describe(arr):
    kind = {"float32": "f32", "float64": "f64", "int64": "i64", "bool": "bool"}[str(arr.dtype)]
    return "%s[%s]" % (kind, ",".join(str(d) for d in arr.shape))


def markdown_table():
    lines = ["| case | inputs | computation | files |", "|---|---|---|---|"]
    for case in CASES:
        directory = os.path.join(FIXTURES, case.name)
        names = sorted(os.listdir(directory)) if os.path.isdir(directory) else []
        listed = ", ".join("`%s` %s" % (n[:-4], describe(np.load(os.path.join(directory, n)))) for n in names)
        lines.append("| `%s` | `%s` | `%s` | %s |" % (case.name, case.inputs, case.forward, listed))
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--markdown", action="store_true", help="print the case table (from the written fixtures)")
    args = parser.parse_args()
    if args.markdown:
        print(markdown_table())
        return

    torch.set_num_threads(1)
    names = [c.name for c in CASES]
    assert len(names) == len(set(names)), "duplicate case names"
    if os.path.isdir(FIXTURES):
        shutil.rmtree(FIXTURES)
    total = 0
    for case in CASES:
        directory = os.path.join(FIXTURES, case.name)
        os.makedirs(directory)
        files = run_case(case)
        for stem, t in files.items():
            save(directory, stem, t)
        check_case(case, directory, files)
        total += sum(os.path.getsize(os.path.join(directory, f)) for f in os.listdir(directory))
    print("wrote %d cases to %s (%d bytes, torch %s, numpy %s)"
          % (len(CASES), os.path.relpath(FIXTURES), total, torch.__version__, np.__version__))
    assert total < 1 << 20, "fixtures must stay under 1 MiB"


if __name__ == "__main__":
    sys.exit(main())
