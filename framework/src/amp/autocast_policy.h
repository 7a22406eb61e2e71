// The casts autocast applies at the top of the public ops (PyTorch's
// aten/src/ATen/autocast_mode.cpp: lower_precision_fp and fp32 policies).
//
//   Tensor mm(const Tensor& a_in, const Tensor& b_in) {
//     const Tensor a = amp::detail::lower(a_in), b = amp::detail::lower(b_in);
//
// Outside autocast each helper is one thread-local bool test and returns its
// input. The flag is false also while the autograd engine runs a backward
// formula (BackwardFormulaGuard), so backward ops keep their forward dtypes
// while is_autocast_enabled() still reports the user's guard (hooks see it).
#pragma once

#include "tiny/amp.h"
#include "tiny/tensor.h"

namespace tiny::amp::detail {

// True when some device type has autocast on and no backward formula is running.
extern thread_local bool casts_active;

// The calling thread's state (autocast.cpp); call state_changed() after changing it.
AutocastState& thread_state();
void state_changed();

Tensor lower_slow(const Tensor& t);
Tensor upcast_slow(const Tensor& t);

// lower_precision_fp: a floating input (not float64) on an autocast device type becomes the autocast dtype.
inline Tensor lower(const Tensor& t) { return casts_active ? lower_slow(t) : t; }
// fp32: a 16-bit float input on an autocast device type becomes float32.
inline Tensor upcast(const Tensor& t) { return casts_active ? upcast_slow(t) : t; }

// Turns the casts off (not the reported state) for the scope of one backward formula.
class BackwardFormulaGuard {
 public:
  BackwardFormulaGuard();
  ~BackwardFormulaGuard();
  BackwardFormulaGuard(const BackwardFormulaGuard&) = delete;
  BackwardFormulaGuard& operator=(const BackwardFormulaGuard&) = delete;

 private:
  bool previous_;
};

}  // namespace tiny::amp::detail
