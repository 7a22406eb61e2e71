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
  rmsprop_* cases: as the optimizer cases (RMSprop, every option combination)
  lambdalr_*, linearlr_*, multisteplr_*, onecycle_*, sequentiallr_* cases, float64:
    lrs.npy, momenta.npy [E + 1, G]   lr and momentum (SGD/RMSprop momentum, Adam beta1) per group
    lrs_resumed.npy      [E + 1, G]   the same run saved (state_dict) and restored at epoch E // 2
  plateau_* cases (ReduceLROnPlateau), float64:
    lrs.npy [E + 1, G], metrics.npy [E] (one NaN: a bad epoch)
  clipvalue_* cases: g1, g2, g1_clipped, g2_clipped (clip_grad_value_)
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
# RMSprop: every combination of its four switches (weight_decay, momentum, centered, maximize).
for _wd in (0.0, 0.01):
    for _mom in (0.0, 0.9):
        for _centered in (False, True):
            for _maximize in (False, True):
                _name = "rmsprop_wd%s_mom%s%s%s" % (int(_wd > 0), int(_mom > 0), "_centered" if _centered else "",
                                                     "_maximize" if _maximize else "")
                OPTIMIZER_CASES[_name] = (torch.optim.RMSprop, dict(lr=0.01, alpha=0.9, eps=1e-6, weight_decay=_wd,
                                                                    momentum=_mom, centered=_centered,
                                                                    maximize=_maximize))
OPTIMIZER_CASES["rmsprop_defaults"] = (torch.optim.RMSprop, dict())

# name -> (scheduler class, keyword arguments, group lrs, epochs)
SCHEDULER_CASES = {
    "steplr_gamma_half": (torch.optim.lr_scheduler.StepLR, dict(step_size=3, gamma=0.5), [0.1], 12),
    "steplr_default_two_groups": (torch.optim.lr_scheduler.StepLR, dict(step_size=2), [0.1, 0.03], 7),
    "cosine_tmax10": (torch.optim.lr_scheduler.CosineAnnealingLR, dict(T_max=10), [0.1], 10),
    "cosine_eta_min_past_tmax": (torch.optim.lr_scheduler.CosineAnnealingLR, dict(T_max=5, eta_min=0.001),
                                 [0.1, 0.02], 23),
}

L = torch.optim.lr_scheduler
# Schedulers added for issue 23. name -> (factory(opt) -> scheduler, group lrs, epochs, optimizer kind).
# Each also checks a state_dict round trip: after `split` epochs the scheduler and the
# optimizer are saved, loaded into fresh ones, and those finish the run (rows after
# `split` come from the restored pair, and must equal an uninterrupted run's).
MORE_SCHEDULER_CASES = {
    "lambdalr_two_groups": (lambda o: L.LambdaLR(o, [lambda e: 0.95 ** e, lambda e: min(1.0, (e + 1) / 4)]),
                            [0.1, 0.05], 12, "sgd"),
    "lambdalr_one_function": (lambda o: L.LambdaLR(o, lambda e: 1.0 / (1 + e)), [0.1, 0.2], 8, "sgd"),
    "linearlr_default": (lambda o: L.LinearLR(o), [0.1], 9, "sgd"),
    "linearlr_warmup": (lambda o: L.LinearLR(o, start_factor=0.1, end_factor=1.0, total_iters=4), [0.1, 0.03], 10,
                        "sgd"),
    "linearlr_decay": (lambda o: L.LinearLR(o, start_factor=1.0, end_factor=0.2, total_iters=6), [0.5], 10, "sgd"),
    "multisteplr_repeated": (lambda o: L.MultiStepLR(o, milestones=[2, 5, 5, 9], gamma=0.5), [0.1, 0.3], 12, "sgd"),
    "multisteplr_default": (lambda o: L.MultiStepLR(o, milestones=[3, 6]), [0.1], 8, "sgd"),
    "onecycle_cos_sgd": (lambda o: L.OneCycleLR(o, max_lr=0.1, total_steps=20), [0.01], 20, "sgd"),
    "onecycle_linear_adam": (lambda o: L.OneCycleLR(o, max_lr=[0.01, 0.02], total_steps=17, anneal_strategy="linear",
                                                    pct_start=0.25), [0.001, 0.001], 17, "adam"),
    "onecycle_three_phase": (lambda o: L.OneCycleLR(o, max_lr=0.2, epochs=3, steps_per_epoch=7, three_phase=True,
                                                    div_factor=10.0, final_div_factor=100.0, base_momentum=0.8,
                                                    max_momentum=0.9), [0.01], 21, "sgd"),
    "onecycle_no_momentum_rmsprop": (lambda o: L.OneCycleLR(o, max_lr=0.05, total_steps=12, cycle_momentum=False,
                                                            pct_start=0.5), [0.01], 12, "rmsprop"),
    "onecycle_cos_rmsprop_momentum": (lambda o: L.OneCycleLR(o, max_lr=0.05, total_steps=10), [0.01], 10, "rmsprop"),
    "sequentiallr_warmup_cosine": (lambda o: L.SequentialLR(o, [L.LinearLR(o, start_factor=0.1, total_iters=3),
                                                                L.CosineAnnealingLR(o, T_max=8)], milestones=[3]),
                                   [0.1, 0.02], 14, "sgd"),
    "sequentiallr_three": (lambda o: L.SequentialLR(o, [L.LambdaLR(o, lambda e: 0.5 + 0.1 * e),
                                                        L.StepLR(o, step_size=2, gamma=0.5),
                                                        L.MultiStepLR(o, milestones=[1, 3], gamma=0.3)],
                                                    milestones=[4, 9]), [0.1], 14, "sgd"),
}

# ReduceLROnPlateau: name -> (keyword arguments, group lrs, metric per epoch).
PLATEAU_METRICS = [1.0, 0.9, 0.85, 0.86, 0.851, 0.87, 0.84, 0.84, 0.845, 0.9, 0.91, 0.8, 0.80001, 0.81, 0.82, 0.83,
                   0.79, 0.795, 0.8, 0.81, float("nan"), 0.5, 0.6, 0.7, 0.71, 0.72]
PLATEAU_CASES = {
    "plateau_min_rel": (dict(patience=2), [0.1], PLATEAU_METRICS),
    "plateau_min_abs_cooldown": (dict(patience=1, threshold=0.01, threshold_mode="abs", cooldown=2, factor=0.5),
                                 [0.1, 0.05], PLATEAU_METRICS),
    "plateau_max_rel_min_lr": (dict(mode="max", patience=1, factor=0.3, min_lr=[0.01, 0.004]), [0.1, 0.05],
                               PLATEAU_METRICS),
    "plateau_max_abs_eps": (dict(mode="max", patience=0, threshold=0.005, threshold_mode="abs", factor=0.5,
                                 eps=0.004, min_lr=0.001), [0.1], PLATEAU_METRICS),
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
    assert np.isfinite(arr).all() or name == "metrics", (directory, name)
    np.save(os.path.join(directory, name + ".npy"), arr)
    assert np.array_equal(np.load(os.path.join(directory, name + ".npy")), arr, equal_nan=True)


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


def make_optimizer(kind, lrs):
    ps = [torch.zeros(1, requires_grad=True) for _ in lrs]
    groups = [{"params": [p], "lr": lr} for p, lr in zip(ps, lrs)]
    if kind == "sgd":
        return torch.optim.SGD(groups, lr=lrs[0], momentum=0.9)
    if kind == "adam":
        return torch.optim.Adam(groups, lr=lrs[0])
    return torch.optim.RMSprop(groups, lr=lrs[0], momentum=0.5)


def momenta(opt):
    return [g["betas"][0] if "betas" in g else g["momentum"] for g in opt.param_groups]


def more_scheduler_case(name, make, lrs, epochs, kind):
    """lrs.npy and momenta.npy [E + 1, G]; lrs_resumed.npy: the same run, saved and restored at epoch E // 2."""
    def run(split):
        opt = make_optimizer(kind, lrs)
        sched = make(opt)
        rows, moms = [sched.get_last_lr()], [momenta(opt)]
        for e in range(1, epochs + 1):
            opt.step()
            sched.step()
            if e == split:
                sd_sched, sd_opt = sched.state_dict(), opt.state_dict()
                opt = make_optimizer(kind, lrs)
                sched = make(opt)
                opt.load_state_dict(sd_opt)
                sched.load_state_dict(sd_sched)
            rows.append(sched.get_last_lr())
            moms.append(momenta(opt))
        return rows, moms
    rows, moms = run(split=-1)
    resumed, _ = run(split=epochs // 2)
    return {"lrs": torch.tensor(rows, dtype=torch.float64), "momenta": torch.tensor(moms, dtype=torch.float64),
            "lrs_resumed": torch.tensor(resumed, dtype=torch.float64)}


def plateau_case(name, kwargs, lrs, metrics):
    """lrs.npy [E + 1, G] (row 0: before any step), metrics.npy [E]."""
    opt = make_optimizer("sgd", lrs)
    sched = L.ReduceLROnPlateau(opt, **kwargs)
    rows = [[g["lr"] for g in opt.param_groups]]
    for m in metrics:
        opt.step()
        sched.step(m)
        rows.append([g["lr"] for g in opt.param_groups])
    return {"lrs": torch.tensor(rows, dtype=torch.float64), "metrics": torch.tensor(metrics, dtype=torch.float64)}


# name -> clip_value
CLIP_VALUE_CASES = {"clipvalue_half": 0.5, "clipvalue_large": 10.0}


def clip_value_case(name, clip_value):
    torch.manual_seed(zlib.crc32(name.encode()))
    g1, g2 = torch.randn(3, 4), torch.randn(5)
    p1, p2, p3 = torch.zeros(3, 4, requires_grad=True), torch.zeros(5, requires_grad=True), torch.zeros(2, requires_grad=True)
    p1.grad, p2.grad = g1.clone(), g2.clone()
    torch.nn.utils.clip_grad_value_([p1, p3, p2], clip_value)
    return {"g1": g1, "g2": g2, "g1_clipped": p1.grad, "g2_clipped": p2.grad}


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
    jobs += [(n, lambda n=n, a=a: more_scheduler_case(n, *a)) for n, a in MORE_SCHEDULER_CASES.items()]
    jobs += [(n, lambda n=n, a=a: plateau_case(n, *a)) for n, a in PLATEAU_CASES.items()]
    jobs += [(n, lambda n=n, a=a: clip_value_case(n, a)) for n, a in CLIP_VALUE_CASES.items()]
    total = 0
    for name, make in jobs:
        directory = os.path.join(FIXTURES, name)
        os.makedirs(directory)
        for stem, t in make().items():
            save(directory, stem, t)
        total += sum(os.path.getsize(os.path.join(directory, f)) for f in os.listdir(directory))
    print("wrote %d cases to %s (%d bytes, torch %s, numpy %s)"
          % (len(jobs), os.path.relpath(FIXTURES), total, torch.__version__, np.__version__))
    assert total < 512 << 10, "optimizer fixtures must stay small"


if __name__ == "__main__":
    sys.exit(main())
