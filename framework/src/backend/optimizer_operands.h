// What the fused optimizer kernels of every backend (backend/cpu/
// optimizer_kernels.cpp, backend/cuda/optimizer.cu) do with their operands
// before the update: check them against the parameter, and make each one
// contiguous for the flat loop. Host code only.
#pragma once

#include "core/tensor_impl.h"
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

}  // namespace tiny::backend
