// The two device-side ops of GradScaler, checked here and run by a kernel per
// backend (backend/cpu/amp_kernels.cpp; the emulator queues the same kernel).
#include "backend/define_dispatch.h"
#include "backend/stubs/amp.h"
#include "tiny/amp.h"
#include "tiny/autograd.h"
#include "tiny/ops.h"

// The kernels these ops call, each with the work of one call on the modelled GPU.
namespace tiny {
namespace {
// Every gradient read and written, in one kernel.
KernelWork non_finite_check_and_unscale_work(const std::vector<Tensor>& grads, const Tensor&, const Tensor&) {
  KernelWork w{"_amp_foreach_non_finite_check_and_unscale_", {}};
  for (const Tensor& g : grads) w.cost.bytes += 2 * emulated::moved_bytes(g);
  return w;
}
KernelWork update_scale_work(const Tensor& scale, const Tensor& growth_tracker, const Tensor& found_inf, double,
                             double, int64_t) {
  return {"_amp_update_scale_", cost_of({scale, growth_tracker, found_inf})};
}
}  // namespace

TINY_DEFINE_DISPATCH(non_finite_check_and_unscale_stub, "non_finite_check_and_unscale",
                     non_finite_check_and_unscale_work);
TINY_DEFINE_DISPATCH(update_scale_stub, "update_scale", update_scale_work);
}  // namespace tiny

namespace tiny::amp {

namespace {

void check_scalar(const Tensor& t, Dtype dtype, const char* what, const char* op) {
  TINY_CHECK(t.defined(), ValueError, op, ": ", what, " is undefined");
  TINY_CHECK(t.numel() == 1, ShapeError, op, ": ", what, " must be a 1-element tensor, got shape ",
             shape_str(t.sizes()));
  TINY_CHECK(t.dtype() == dtype, DtypeError, op, ": ", what, " must be a ", dtype_name(dtype), " tensor, got ",
             dtype_name(t.dtype()));
}

}  // namespace

void foreach_non_finite_check_and_unscale_(const std::vector<Tensor>& grads, const Tensor& found_inf,
                                           const Tensor& inv_scale) {
  const char* op = "_amp_foreach_non_finite_check_and_unscale_";
  check_scalar(found_inf, kFloat32, "found_inf", op);
  check_scalar(inv_scale, kFloat32, "inv_scale", op);
  TINY_CHECK(inv_scale.device() == found_inf.device(), DeviceError, op, ": found_inf is on ", found_inf.device(),
             " but inv_scale is on ", inv_scale.device(), "; both must be on the device of the gradients");
  NoGradGuard no_grad;  // gradients are data here, as in PyTorch
  std::vector<Tensor> work;
  std::vector<std::pair<Tensor, Tensor>> write_back;  // (strided original, contiguous copy)
  for (size_t i = 0; i < grads.size(); ++i) {
    const Tensor& g = grads[i];
    if (!g.defined()) continue;
    TINY_CHECK(g.device() == found_inf.device(), DeviceError, op, ": tensor ", i, " is on ", g.device(),
               " but found_inf and inv_scale are on ", found_inf.device(),
               "; call it once per device with that device's found_inf and inv_scale");
    TINY_CHECK(g.is_floating_point(), DtypeError, op, ": tensor ", i, " is ", dtype_name(g.dtype()),
               "; gradients are floating point");
    if (g.is_contiguous()) {
      work.push_back(g);
    } else {
      Tensor c = g.contiguous();
      work.push_back(c);
      write_back.emplace_back(g, c);
    }
  }
  const Tensor flag = found_inf.is_contiguous() ? found_inf : found_inf.contiguous();
  const Tensor inv = inv_scale.is_contiguous() ? inv_scale : inv_scale.contiguous();
  non_finite_check_and_unscale_stub(found_inf.device())(work, flag, inv);
  if (!flag.is_same(found_inf)) found_inf.copy_(flag);
  for (auto& [original, copy] : write_back) original.copy_(copy);
}

void update_scale_(const Tensor& scale, const Tensor& growth_tracker, const Tensor& found_inf, double growth_factor,
                   double backoff_factor, int64_t growth_interval) {
  const char* op = "_amp_update_scale_";
  check_scalar(scale, kFloat32, "scale", op);
  check_scalar(growth_tracker, kInt64, "growth_tracker", op);
  check_scalar(found_inf, kFloat32, "found_inf", op);
  TINY_CHECK(scale.device() == growth_tracker.device() && scale.device() == found_inf.device(), DeviceError, op,
             ": scale (", scale.device(), "), growth_tracker (", growth_tracker.device(), ") and found_inf (",
             found_inf.device(), ") must be on one device");
  TINY_CHECK(scale.is_contiguous() && growth_tracker.is_contiguous() && found_inf.is_contiguous(), ValueError, op,
             ": scale, growth_tracker and found_inf must be contiguous");
  update_scale_stub(scale.device())(scale, growth_tracker, found_inf, growth_factor, backoff_factor,
                                    growth_interval);
}

}  // namespace tiny::amp
