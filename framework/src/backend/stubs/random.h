// Random numbers from Philox (kernels/philox.h), the same on every backend
// for the same (seed, offset) (see backend/dispatch.h); ops/creation.cpp
// defines the stub.
#pragma once

#include "backend/dispatch.h"
#include "tiny/generator.h"
#include "tiny/tensor.h"

namespace tiny {

enum class RandomKind : uint8_t { Uniform, Normal, Randint, Bernoulli };

using RandomFn = void (*)(const Tensor& out, RandomKind kind, PhiloxState state, double a, double b);

TINY_DECLARE_DISPATCH(RandomFn, random_stub);

}  // namespace tiny
