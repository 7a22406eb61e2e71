// Prepares a pointwise or reduction op for a backend driver: broadcasting,
// output allocation, per-operand element strides, and coalescing of
// dimensions so that contiguous tensors become one flat loop.
#pragma once

#include <vector>

#include "core/tensor_impl.h"
#include "kernels/offset_calculator.h"

namespace tiny {

// Operand 0 is the output; up to three inputs follow.
struct TensorIter {
  static constexpr int kMaxOperands = 4;
  int num_operands = 0;
  Tensor operands[kMaxOperands];
  char* data[kMaxOperands] = {};
  int64_t numel = 0;
  kernels::OffsetCalculator<kMaxOperands> calc;  // strides in elements, dim 0 fastest

  Tensor& output() { return operands[0]; }
  Dtype dtype(int k) const { return operands[k].dtype(); }
  Device device() const { return operands[0].device(); }
  // True when every operand moves by 0 or 1 element along the single remaining dim.
  bool is_flat() const;
};

// Builds an iterator for out = f(inputs...). `out` must already have the
// broadcast shape of the inputs; an input that shares memory with `out` in a
// different layout is copied first so the op never reads what it already wrote.
TensorIter make_tensor_iter(const Tensor& out, const std::vector<Tensor>& inputs);

// Broadcast shape of all inputs, with PyTorch's error when they do not fit.
IntArrayRef broadcast_all(const std::vector<Tensor>& inputs);

// Reduction of `input` over some dims into `outputs` (values, and indices for
// arg-reductions), all shaped like the result with keepdim=true.
struct ReduceIter {
  Tensor input;
  Tensor outputs[2];
  int num_outputs = 1;
  int64_t num_out = 0;      // elements of the result
  int64_t reduce_size = 0;  // elements folded into each result element
  // Over kept dims: operand 0 = input offset, 1.. = output offsets.
  kernels::OffsetCalculator<3> out_calc;
  // Over reduced dims: operand 0 = input offset (dim 0 fastest, i.e. the innermost reduced dim).
  kernels::OffsetCalculator<1> red_calc;
};

// `dims` are already wrapped and unique; outputs shaped with keepdim=true.
ReduceIter make_reduce_iter(const Tensor& input, const std::vector<bool>& reduced, const Tensor& out0,
                            const Tensor& out1 = Tensor());

}  // namespace tiny
