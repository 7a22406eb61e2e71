#!/usr/bin/python3
"""Generates the PyTorch parity fixtures of tiny::optim and clip_grad_norm_.

Run from anywhere with Debian's python3 (it has torch 1.13 and numpy; another
python3 may come first on PATH, so name this one):

    /usr/bin/python3 tests/parity/make_optim_fixtures.py    # rewrites tests/parity/optim_fixtures/

Layout (a contract with tests/framework/test_optim.cpp and
test_lr_scheduler.cpp, see README.md): one directory per case,
tests/parity/optim_fixtures/<case>/, holding

  optimizer cases (sgd_*, adam_*, adamw_*), float32:
    param0.npy   [4, 6]       the initial parameter
    grads.npy    [8, 4, 6]    the gradient given before each of the 8 steps
    params.npy   [8, 4, 6]    the parameter after each step
  scheduler cases (steplr_*, cosine_*), float64:
    lrs.npy      [E + 1, G]   each group's lr right after the scheduler is built
                              (row 0), then after each of E scheduler.step()s
  clip_grad_norm_ cases (clip_*), float32:
    g1.npy [3, 4], g2.npy [5]           the gradients of two parameters
    total_norm.npy []                   what clip_grad_norm_ returned
    g1_clipped.npy, g2_clipped.npy      the gradients afterwards

The hyperparameters of each case are in CASES below; the C++ tests repeat them
in their own tables (and fail when a fixture has no table entry, or an entry no
fixture). Each case seeds torch with zlib.crc32(<case name>) before drawing, and
torch runs on one thread, so running the script again gives identical files.
torch.optim runs its default single-tensor code (foreach=False in 1.13).
"""
import os
import shutil
import sys
import zlib

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, "optim_fixtures")
STEPS = 8
SHAPE = (4, 6)

# name -> (optimizer class, keyword arguments)
OPTIMIZER_CASES = {
    "sgd_plain": (torch.optim.SGD, dict(lr=0.1)),
    "sgd_momentum": (torch.optim.SGD, dict(lr=0.05, momentum=0.9)),
    "sgd_dampening_weight_decay": (torch.optim.SGD, dict(lr=0.05, momentum=0.8, dampening=0.3, weight_decay=0.01)),
    "sgd_nesterov": (torch.optim.SGD, dict(lr=0.05, momentum=0.9, nesterov=True, weight_decay=0.001)),
    "sgd_maximize": (torch.optim.SGD, dict(lr=0.1, momentum=0.5, maximize=True)),
    "adam_default": (torch.optim.Adam, dict(lr=0.01)),
    "adam_weight_decay_amsgrad": (torch.optim.Adam, dict(lr=0.01, betas=(0.8, 0.99), weight_decay=0.1, amsgrad=True)),
    "adam_maximize_eps": (torch.optim.Adam, dict(lr=0.02, eps=1e-3, maximize=True)),
    "adamw_default": (torch.optim.AdamW, dict(lr=0.01)),
    "adamw_amsgrad": (torch.optim.AdamW, dict(lr=0.01, betas=(0.8, 0.99), weight_decay=0.1, amsgrad=True)),
    "adamw_maximize": (torch.optim.AdamW, dict(lr=0.02, weight_decay=0.05, maximize=True)),
}

# name -> (scheduler class, keyword arguments, group lrs, epochs)
SCHEDULER_CASES = {
    "steplr_gamma_half": (torch.optim.lr_scheduler.StepLR, dict(step_size=3, gamma=0.5), [0.1], 12),
    "steplr_default_two_groups": (torch.optim.lr_scheduler.StepLR, dict(step_size=2), [0.1, 0.03], 7),
    "cosine_tmax10": (torch.optim.lr_scheduler.CosineAnnealingLR, dict(T_max=10), [0.1], 10),
    "cosine_eta_min_past_tmax": (torch.optim.lr_scheduler.CosineAnnealingLR, dict(T_max=5, eta_min=0.001),
                                 [0.1, 0.02], 23),
}

# name -> (max_norm, norm_type)
CLIP_CASES = {
    "clip_l2": (1.0, 2.0),
    "clip_l2_no_clipping": (100.0, 2.0),
    "clip_inf": (0.5, float("inf")),
    "clip_l1": (2.0, 1.0),
}


def save(directory, name, tensor):
    arr = tensor.detach().cpu().numpy().copy(order="C")
    assert arr.dtype in (np.float32, np.float64), (name, arr.dtype)
    assert np.isfinite(arr).all(), (directory, name)
    np.save(os.path.join(directory, name + ".npy"), arr)
    assert np.array_equal(np.load(os.path.join(directory, name + ".npy")), arr)


def optimizer_case(name, cls, kwargs):
    torch.manual_seed(zlib.crc32(name.encode()))
    param0 = torch.randn(SHAPE)
    grads = torch.randn((STEPS,) + SHAPE)
    p = param0.clone().requires_grad_(True)
    opt = cls([p], **kwargs)
    params = []
    for k in range(STEPS):
        p.grad = grads[k].clone()
        opt.step()
        params.append(p.detach().clone())
    return {"param0": param0, "grads": grads, "params": torch.stack(params)}


def scheduler_case(name, cls, kwargs, lrs, epochs):
    ps = [torch.zeros(1, requires_grad=True) for _ in lrs]
    opt = torch.optim.SGD([{"params": [p], "lr": lr} for p, lr in zip(ps, lrs)], lr=lrs[0])
    sched = cls(opt, **kwargs)
    rows = [sched.get_last_lr()]
    for _ in range(epochs):
        opt.step()
        sched.step()
        rows.append(sched.get_last_lr())
    return {"lrs": torch.tensor(rows, dtype=torch.float64)}


def clip_case(name, max_norm, norm_type):
    torch.manual_seed(zlib.crc32(name.encode()))
    g1, g2 = torch.randn(3, 4), torch.randn(5)
    p1, p2, p3 = torch.zeros(3, 4, requires_grad=True), torch.zeros(5, requires_grad=True), torch.zeros(2, requires_grad=True)
    p1.grad, p2.grad = g1.clone(), g2.clone()  # p3 has no gradient: skipped
    total = torch.nn.utils.clip_grad_norm_([p1, p3, p2], max_norm, norm_type)
    return {"g1": g1, "g2": g2, "total_norm": total, "g1_clipped": p1.grad, "g2_clipped": p2.grad}


def main():
    torch.set_num_threads(1)
    if os.path.isdir(FIXTURES):
        shutil.rmtree(FIXTURES)
    jobs = [(n, lambda n=n, a=a: optimizer_case(n, *a)) for n, a in OPTIMIZER_CASES.items()]
    jobs += [(n, lambda n=n, a=a: scheduler_case(n, *a)) for n, a in SCHEDULER_CASES.items()]
    jobs += [(n, lambda n=n, a=a: clip_case(n, *a)) for n, a in CLIP_CASES.items()]
    total = 0
    for name, make in jobs:
        directory = os.path.join(FIXTURES, name)
        os.makedirs(directory)
        for stem, t in make().items():
            save(directory, stem, t)
        total += sum(os.path.getsize(os.path.join(directory, f)) for f in os.listdir(directory))
    print("wrote %d cases to %s (%d bytes, torch %s, numpy %s)"
          % (len(jobs), os.path.relpath(FIXTURES), total, torch.__version__, np.__version__))
    assert total < 256 << 10, "optimizer fixtures must stay small"


if __name__ == "__main__":
    sys.exit(main())
