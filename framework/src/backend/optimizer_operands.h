// What the fused optimizer kernels of every backend (backend/cpu/
// optimizer_kernels.cpp, backend/cuda/optimizer.cu) do with their operands
// before the update: check them against the parameter, and make each one
// contiguous for the flat loop. Host code only.
#pragma once

#include "core/tensor_impl.h"
#include "kernels/optimizer_ops.h"
#include "tiny/error.h"
#include "tiny/tensor.h"

namespace tiny::backend {

// A contiguous stand-in for `original`: itself when already contiguous, else a
// copy that finish() writes back (only for operands the update writes).
struct ContiguousOperand {
  ContiguousOperand(const Tensor& original, bool written)
      : original_(original), work_(original.is_contiguous() ? original : original.contiguous()),
        write_back_(written && !original.is_contiguous()) {}
  // The first element's address (a device address on a GPU: never dereferenced by the host there).
  template <typename T>
  T* data() const {
    return reinterpret_cast<T*>(work_.unsafe_impl()->data());
  }
  void finish() const {
    if (write_back_) original_.copy_(work_);
  }

 private:
  Tensor original_;
  Tensor work_;
  bool write_back_;
};

// `t` (the gradient or a state tensor of `op`) has the parameter's shape, dtype and device.
inline void check_operand(const Tensor& t, const Tensor& param, const char* what, const char* op) {
  TINY_CHECK(t.defined(), ValueError, op, ": the ", what, " is undefined");
  TINY_CHECK(t.sizes() == param.sizes(), ShapeError, op, ": the ", what, " has shape ", shape_str(t.sizes()),
             " but the parameter has shape ", shape_str(param.sizes()));
  TINY_CHECK(t.dtype() == param.dtype(), DtypeError, op, ": the ", what, " is ", dtype_name(t.dtype()),
             " but the parameter is ", dtype_name(param.dtype()));
  TINY_CHECK(t.device() == param.device(), DeviceError, op, ": the ", what, " is on ", t.device(),
             " but the parameter is on ", param.device());
}

// The operands of one fused SGD step (the momentum buffer only when momentum is on).
inline void check_sgd_operands(const Tensor& param, const Tensor& grad, const Tensor& momentum_buffer,
                               const kernels::SgdParams& params) {
  check_operand(grad, param, "gradient", "sgd_step");
  if (params.momentum != 0.0) check_operand(momentum_buffer, param, "momentum buffer", "sgd_step");
}

// The operands of one fused Adam step (max_exp_avg_sq only with amsgrad), and its step count.
inline void check_adam_operands(const Tensor& param, const Tensor& grad, const Tensor& exp_avg,
                                const Tensor& exp_avg_sq, const Tensor& max_exp_avg_sq,
                                const kernels::AdamParams& params) {
  check_operand(grad, param, "gradient", "adam_step");
  check_operand(exp_avg, param, "exp_avg state", "adam_step");
  check_operand(exp_avg_sq, param, "exp_avg_sq state", "adam_step");
  if (params.amsgrad) check_operand(max_exp_avg_sq, param, "max_exp_avg_sq state", "adam_step");
  TINY_CHECK(params.step >= 1, ValueError, "adam_step: the step count after the update must be >= 1, got ",
             params.step);
}

// The operands of one fused RMSprop step (grad_avg only when centered, the buffer only with momentum).
inline void check_rmsprop_operands(const Tensor& param, const Tensor& grad, const Tensor& square_avg,
                                   const Tensor& grad_avg, const Tensor& momentum_buffer,
                                   const kernels::RmspropParams& params) {
  check_operand(grad, param, "gradient", "rmsprop_step");
  check_operand(square_avg, param, "square_avg state", "rmsprop_step");
  if (params.centered) check_operand(grad_avg, param, "grad_avg state", "rmsprop_step");
  if (params.momentum > 0.0) check_operand(momentum_buffer, param, "momentum_buffer state", "rmsprop_step");
}

}  // namespace tiny::backend
