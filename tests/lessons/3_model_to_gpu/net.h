// The small model lesson 3's checks move around: a normalizer's two buffers,
// then two linear layers. Shared by the checker (which makes its state) and
// the glue (which rebuilds it and loads that state), so both agree on the keys.
#pragma once

#include <memory>

#include "tiny/tiny.h"

namespace lesson3_checks {

inline constexpr int64_t kIn = 5, kHidden = 7, kOut = 3;

/// @brief `fc2(relu(fc1((x - mean) / stddev)))`, with mean and stddev as buffers.
struct Net : tiny::nn::Module {
  Net() {
    mean = register_buffer("mean", tiny::zeros({kIn}));
    stddev = register_buffer("stddev", tiny::ones({kIn}));
    fc1 = register_module("fc1", std::make_shared<tiny::nn::Linear>(kIn, kHidden));
    fc2 = register_module("fc2", std::make_shared<tiny::nn::Linear>(kHidden, kOut));
  }
  tiny::Tensor forward(const tiny::Tensor& x) override { return (*fc2)(tiny::relu((*fc1)((x - mean) / stddev))); }
  std::string name() const override { return "Net"; }

  tiny::Tensor mean, stddev;
  std::shared_ptr<tiny::nn::Linear> fc1, fc2;
};

}  // namespace lesson3_checks
