// Hyperparameters of the fused optimizer updates, shared by every backend's
// driver. The per-element update structs live beside them (one read and one
// write of each state tensor per step, instead of a chain of pointwise ops).
#pragma once

#include <cstdint>

#include "kernels/macros.h"

namespace tiny::kernels {

// torch.optim.SGD's update for one parameter tensor.
struct SgdParams {
  double lr = 0.0;
  double momentum = 0.0;
  double dampening = 0.0;
  double weight_decay = 0.0;
  bool nesterov = false;
  bool maximize = false;
  bool first_step = false;  // the momentum buffer is initialised from the gradient
};

// torch.optim.Adam / AdamW's update for one parameter tensor.
struct AdamParams {
  double lr = 0.0;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;
  bool decoupled_weight_decay = false;  // AdamW
  bool amsgrad = false;
  bool maximize = false;
  int64_t step = 1;  // after this update (bias corrections use it)
};

}  // namespace tiny::kernels
