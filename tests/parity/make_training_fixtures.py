#!/usr/bin/python3
"""Generates the training-parity fixtures: 20 PyTorch training steps of an MLP.

Run from anywhere with Debian's python3 (torch 1.13 + numpy; another python3
may come first on PATH, so name this one):

    /usr/bin/python3 tests/parity/make_training_fixtures.py   # rewrites tests/parity/training_fixtures/

The model is nn.Sequential(Linear(784, 512), ReLU(), Linear(512, 256), ReLU(),
Linear(256, 10)), trained for 20 steps on batches of 64 with F.cross_entropy
(mean), once with SGD(lr=0.05, momentum=0.9) and once with Adam(lr=1e-3), both
runs from the same initial weights and on the same 20 batches.

Only the results are committed (see README.md, "Training fixtures"): the initial
weights and the batches are NOT stored; both this script and the C++ test
(tests/framework/test_training_parity.cpp) compute them with the same
deterministic generator, bit for bit:

  splitmix64(seed, i)  = mix(seed + (i + 1) * 0x9E3779B97F4A7C15)   (mod 2^64), i = 0, 1, 2, ...
      mix(z): z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
              z = (z ^ (z >> 27)) * 0x94D049BB133111EB
              z ^ (z >> 31)
    (this is Vigna's splitmix64 stream: the i-th output of a generator whose
    state starts at `seed`)
  uniform(z)           = float32((z >> 40) * 2^-24)           in [0, 1), exact in float32
  weight/bias value    = float32(2 * uniform - 1) * float32(1 / sqrt(fan_in))
                         (2u - 1 is exact in float32; the product is one float32 rounding,
                         so it is the same in numpy and C++): uniform in [-b, b), b = 1/sqrt(fan_in),
                         the bound of PyTorch's default Linear init
  label                = (z >> 32) % 10

Streams:
  parameters  seed 0x5EED0001: drawn in state_dict order 0.weight [512, 784] (row-major),
              0.bias [512], 2.weight [256, 512], 2.bias [256], 4.weight [10, 256], 4.bias [10],
              one stream continuing across the six tensors (fan_in = 784, 784, 512, 512, 256, 256)
  inputs      seed 0xDA7A0001: batch s (s = 0..19) is x[64, 784] = uniform, elements
              s*64*784 .. (s+1)*64*784 - 1 of the stream, row-major
  labels      seed 0x1ABE0001: batch s's labels are elements s*64 .. s*64+63, int64

Files written (all float32 `<f4` unless said, C order):
  generator_check.npy   f64[8]: sums (in float64, math.fsum) of the six initial parameters, of all
                        20*64*784 inputs and of all 20*64 labels: the C++ test checks its generator
                        against these before training
  sgd/losses.npy        f32[20]: loss.item() of each step, computed before that step's update
  sgd/<name>.npy        the parameters after the 20th update, names as in state_dict
                        (0.weight, 0.bias, 2.weight, 2.bias, 4.weight, 4.bias)
  adam/...              the same for Adam
  noise_floor.json      how far PyTorch's own float32 run lies from the same run in float64
                        (max |loss| and |param| differences), printed too: the scale of rounding
                        noise after 20 steps, which sets the C++ test's tolerance

Determinism: torch runs on one thread; no random op is used anywhere.
"""
import json
import math
import os
import shutil

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "training_fixtures")

SIZES = [784, 512, 256, 10]
BATCH = 64
STEPS = 20
CLASSES = 10
PARAM_SEED = 0x5EED0001
INPUT_SEED = 0xDA7A0001
LABEL_SEED = 0x1ABE0001

GOLDEN = np.uint64(0x9E3779B97F4A7C15)
M1 = np.uint64(0xBF58476D1CE4E5B9)
M2 = np.uint64(0x94D049BB133111EB)


def splitmix64(seed, start, count):
    """Elements start .. start+count-1 of the splitmix64 stream of `seed` (uint64, vectorised)."""
    i = np.arange(start + 1, start + count + 1, dtype=np.uint64)
    with np.errstate(over="ignore"):
        z = np.uint64(seed) + i * GOLDEN
        z = (z ^ (z >> np.uint64(30))) * M1
        z = (z ^ (z >> np.uint64(27))) * M2
    return z ^ (z >> np.uint64(31))


def uniform(z):
    """float32 in [0, 1) from the top 24 bits: exact (24-bit integers times 2^-24)."""
    return ((z >> np.uint64(40)).astype(np.float32) * np.float32(2.0 ** -24)).astype(np.float32)


def initial_parameters():
    """[(name, float32 array)] in state_dict order."""
    params, offset = [], 0
    for layer in range(len(SIZES) - 1):
        fan_in, fan_out = SIZES[layer], SIZES[layer + 1]
        bound = np.float32(1.0 / math.sqrt(fan_in))
        for suffix, shape in (("weight", (fan_out, fan_in)), ("bias", (fan_out,))):
            n = int(np.prod(shape))
            u = uniform(splitmix64(PARAM_SEED, offset, n))
            offset += n
            centred = np.float32(2.0) * u - np.float32(1.0)  # exact
            params.append((f"{2 * layer}.{suffix}", (centred * bound).astype(np.float32).reshape(shape)))
    return params


def batch(step):
    n = BATCH * SIZES[0]
    x = uniform(splitmix64(INPUT_SEED, step * n, n)).reshape(BATCH, SIZES[0])
    labels = (splitmix64(LABEL_SEED, step * BATCH, BATCH) >> np.uint64(32)) % np.uint64(CLASSES)
    return x, labels.astype(np.int64)


def make_model(params, dtype):
    model = nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 256), nn.ReLU(), nn.Linear(256, 10))
    model.load_state_dict({name: torch.from_numpy(value.copy()) for name, value in params})
    return model.to(dtype)


def train(optimizer_name, params, batches, dtype):
    model = make_model(params, dtype)
    if optimizer_name == "sgd":
        opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    else:
        opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    losses = []
    for x, y in batches:
        opt.zero_grad()
        loss = F.cross_entropy(model(torch.from_numpy(x).to(dtype)), torch.from_numpy(y))
        loss.backward()
        opt.step()
        losses.append(loss.item())
    final = {name: p.detach().numpy().copy() for name, p in model.state_dict().items()}
    return np.array(losses), final


def save(path, array):
    np.save(path, np.ascontiguousarray(array))
    back = np.load(path)
    assert back.dtype == array.dtype and back.shape == array.shape and np.array_equal(back, array), path


def main():
    torch.set_num_threads(1)
    params = initial_parameters()
    batches = [batch(s) for s in range(STEPS)]

    if os.path.isdir(OUT):
        shutil.rmtree(OUT)
    os.makedirs(OUT)

    check = [math.fsum(p.astype(np.float64).ravel()) for _, p in params]
    check.append(math.fsum(np.concatenate([x.ravel() for x, _ in batches]).astype(np.float64)))
    check.append(float(sum(int(v) for _, y in batches for v in y)))
    save(os.path.join(OUT, "generator_check.npy"), np.array(check, dtype=np.float64))

    noise = {}
    for name in ("sgd", "adam"):
        losses, final = train(name, params, batches, torch.float32)
        losses64, final64 = train(name, params, batches, torch.float64)
        assert np.all(np.isfinite(losses)), name
        directory = os.path.join(OUT, name)
        os.makedirs(directory)
        save(os.path.join(directory, "losses.npy"), losses.astype(np.float32))
        for pname, value in final.items():
            assert value.dtype == np.float32
            save(os.path.join(directory, f"{pname}.npy"), value)
        noise[name] = {
            "max_abs_loss_f32_vs_f64": float(np.max(np.abs(losses - losses64))),
            "max_abs_param_f32_vs_f64": float(max(np.max(np.abs(final[k].astype(np.float64) - final64[k]))
                                                  for k in final)),
            "first_loss": float(losses[0]),
            "last_loss": float(losses[-1]),
        }
        print(f"{name}: losses {losses[0]:.6f} -> {losses[-1]:.6f}; float32 vs float64: "
              f"loss {noise[name]['max_abs_loss_f32_vs_f64']:.2e}, params {noise[name]['max_abs_param_f32_vs_f64']:.2e}")
    with open(os.path.join(OUT, "noise_floor.json"), "w") as f:
        json.dump(noise, f, indent=2, sort_keys=True)
        f.write("\n")

    total = sum(os.path.getsize(os.path.join(d, f)) for d, _, files in os.walk(OUT) for f in files)
    print(f"wrote {OUT}: {total / 2**20:.2f} MiB")
    assert total < 5 << 20, "training fixtures must stay under 5 MiB"


if __name__ == "__main__":
    main()
