/// @file amp.h
/// @brief Automatic mixed precision: `tiny::amp::autocast` and `tiny::amp::GradScaler` (PyTorch's `torch.amp`).
///
/// Inside an autocast guard, matrix products run in a 16-bit float (fast on
/// tensor cores) while the ops that need range or precision (softmax, losses,
/// reductions, exp/log/pow, norms) run in float32. GradScaler multiplies the
/// loss by a large factor before backward so that small float16 gradients do
/// not flush to zero, then divides the gradients back before the optimizer
/// step, skipping steps whose gradients overflowed.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "tiny/dtype.h"
#include "tiny/state_dict.h"
#include "tiny/tensor.h"
#include "tiny/thread_local_state.h"

namespace tiny::optim {
class Optimizer;
}  // namespace tiny::optim

namespace tiny::amp {

/// @brief RAII guard, as `torch.amp.autocast(device_type, dtype=None, enabled=True, cache_enabled=True)`.
///
/// Thread-local and nestable: the destructor restores the previous state of
/// its device type. `device_type` is "cuda" or "cpu" (anything else:
/// tiny::ValueError naming the two). `dtype` defaults to float16 for "cuda" and
/// bfloat16 for "cpu"; only float16 and bfloat16 are accepted (else
/// tiny::ValueError). The "cuda" state applies to ops whose inputs are on cuda
/// devices (real or emulated), the "cpu" state to ops on cpu tensors.
///
/// Op lists (PyTorch's CUDA autocast lists, used for both device types):
///  - lower precision (float32 inputs cast to the autocast dtype): mm, matmul,
///    bmm, addmm, linear;
///  - float32 (16-bit float inputs cast to float32): softmax, log_softmax,
///    cross_entropy, nll_loss, mse_loss, sum, mean, exp, log, pow, layer_norm;
///  - everything else runs in its inputs' dtype (binary ops promote:
///    half + float gives float).
/// Only floating inputs are cast (float64 never is, as in PyTorch), and only
/// those on the guard's device type. Casts go through the differentiable
/// `.to(dtype)`, so gradients reach float32 weights in float32. The lower-
/// precision casts of float32 leaf tensors that require grad (the weights) are
/// cached until the outermost autocast guard of the thread exits
/// (`cache_enabled`), so a weight used twice is cast once.
///
/// Backward formulas run in the dtype of their forward: the casts are not
/// applied inside the autograd engine's formulas even when backward() is
/// called under an enabled guard, while is_autocast_enabled() still reports
/// the guard in gradient hooks and anywhere else.
class autocast {
 public:
  /// @brief Enters autocast for `device_type` ("cuda" or "cpu") with `dtype` (float16 or bfloat16).
  explicit autocast(const std::string& device_type = "cuda", std::optional<Dtype> dtype = std::nullopt,
                    bool enabled = true, bool cache_enabled = true);
  /// @brief Restores the state of this device type (and the cache flag) from before the guard.
  ~autocast();
  /// @brief Not copyable: one guard, one scope.
  autocast(const autocast&) = delete;
  /// @brief Not copyable.
  autocast& operator=(const autocast&) = delete;

 private:
  bool is_cuda_;
  bool prev_enabled_;
  Dtype prev_dtype_;
  bool prev_cache_enabled_;
};

/// @brief True inside an enabled autocast guard for `device_type` on this thread (`torch.is_autocast_enabled()`).
///
/// `device_type` "cuda" is PyTorch's `torch.is_autocast_enabled()`, "cpu" its
/// `torch.is_autocast_cpu_enabled()`; anything else throws tiny::ValueError.
bool is_autocast_enabled(const std::string& device_type = "cuda");
/// @brief The dtype autocast casts to for `device_type` (`torch.get_autocast_gpu_dtype()` / `get_autocast_cpu_dtype()`).
Dtype get_autocast_dtype(const std::string& device_type = "cuda");
/// @brief Whether autocast caches weight casts on this thread (`torch.is_autocast_cache_enabled()`).
bool is_autocast_cache_enabled();
/// @brief Drops this thread's cached weight casts (`torch.clear_autocast_cache()`).
void clear_autocast_cache();

/// @brief Everything autocast keeps per thread: the same type as tiny::AutocastState (tiny/thread_local_state.h).
///
/// It is one field of tiny::ThreadLocalState, which carries grad mode, the
/// current device and autocast into another thread with one guard.
using AutocastState = ::tiny::AutocastState;

/// @brief The calling thread's autocast state: `tiny::ThreadLocalState::capture().autocast`.
///
/// A thin wrapper kept for code written before ThreadLocalState carried autocast.
AutocastState current_state();

/// @brief Applies a captured AutocastState to this thread for a scope, restoring the thread's own after.
///
/// A thin wrapper kept for compatibility: the autocast part of
/// tiny::ThreadLocalStateGuard alone, with the same rule (the cached weight
/// casts are dropped when the restored state is outside any autocast guard).
/// Grad mode and the current device are left alone. To carry everything into
/// a worker thread, use tiny::ThreadLocalStateGuard.
class StateGuard {
 public:
  /// @brief Applies `state`, remembering this thread's own.
  explicit StateGuard(const AutocastState& state);
  /// @brief Restores this thread's own state (and drops the cache when that state is outside any guard).
  ~StateGuard();
  /// @brief Not copyable.
  StateGuard(const StateGuard&) = delete;
  /// @brief Not copyable.
  StateGuard& operator=(const StateGuard&) = delete;

 private:
  AutocastState previous_;
};

/// @brief `torch._amp_foreach_non_finite_check_and_unscale_`: one fused pass per device.
///
/// Multiplies every defined tensor of `grads` in place by `inv_scale` (a
/// one-element float32 tensor on their device, read by the kernel, not by the
/// host) and sets `found_inf` (one-element float32, same device) to 1.0 when
/// any element was inf or NaN before scaling; it never resets it to 0. The
/// grads may be float32, float64, float16 or bfloat16, on one device. Queued
/// like any op: no synchronization.
void foreach_non_finite_check_and_unscale_(const std::vector<Tensor>& grads, const Tensor& found_inf,
                                           const Tensor& inv_scale);

/// @brief `torch._amp_update_scale_`: the GradScaler's growth/backoff rule, in place on the device.
///
/// `scale` is a one-element float32 tensor, `growth_tracker` a one-element
/// int64 tensor (int32 in PyTorch: tiny has no int32) and `found_inf` a
/// one-element float32 tensor, all on one device. If found_inf > 0: scale *=
/// backoff_factor and the tracker resets to 0; otherwise the tracker counts one
/// more clean step and, when it reaches growth_interval, scale *= growth_factor
/// (kept only if finite) and the tracker resets. Queued: no synchronization.
void update_scale_(const Tensor& scale, const Tensor& growth_tracker, const Tensor& found_inf, double growth_factor,
                   double backoff_factor, int64_t growth_interval);

/// @brief `torch.amp.GradScaler` / `torch.cuda.amp.GradScaler`: dynamic loss scaling, PyTorch's algorithm and defaults.
///
/// Typical step: `scaler.scale(loss).backward(); scaler.step(optimizer); scaler.update();`
/// (with `scaler.unscale_(optimizer)` before gradient clipping). The scale
/// lives as a one-element float32 tensor on the device of the first scaled
/// output; the inf/NaN flags are kept per device, and step() reads them once
/// (one synchronization per device, as PyTorch's `.item()`).
class GradScaler {
 public:
  /// @brief The constructor's keyword arguments, with PyTorch's defaults.
  struct Options {
    double init_scale = 65536.0;   ///< the first scale (2**16)
    double growth_factor = 2.0;    ///< scale multiplier after growth_interval clean steps (must be > 1)
    double backoff_factor = 0.5;   ///< scale multiplier after a step with inf/NaN gradients (must be < 1)
    int64_t growth_interval = 2000;  ///< clean steps between growths (must be > 0)
    bool enabled = true;           ///< false: scale() returns its input, step() just steps, update() does nothing
  };
  /// @brief A scaler for "cuda" with the default options (`torch.cuda.amp.GradScaler()`).
  GradScaler();
  /// @brief A scaler for "cuda" with `options`.
  explicit GradScaler(Options options);
  /// @brief A scaler for `device` ("cuda" or "cpu") with `options` (`torch.amp.GradScaler("cuda", ...)`).
  ///
  /// As in PyTorch, a "cuda" scaler on a machine without a GPU (real or
  /// emulated) is disabled, with a warning on stderr.
  GradScaler(const std::string& device, Options options);

  /// @brief `outputs * scale` (`scaler.scale(loss)`); disabled: returns `outputs` unchanged.
  ///
  /// The scale tensor is created on the device of the first outputs it sees and
  /// copied (without synchronizing) to the device of later ones. As in PyTorch
  /// the scale has shape [1], so a 0-d loss gives a [1] result.
  Tensor scale(const Tensor& outputs);
  /// @brief Divides every gradient of `optimizer` by the scale, in place, recording inf/NaN per device (`scaler.unscale_(opt)`).
  ///
  /// One fused kernel per device (see foreach_non_finite_check_and_unscale_);
  /// undefined gradients are skipped. A second call before update() throws
  /// tiny::RuntimeError "unscale_() has already been called on this optimizer
  /// since the last update().", a call after step() "unscale_() is being called
  /// after step().". Unlike PyTorch (which refuses float16 gradients here),
  /// 16-bit gradients are accepted.
  void unscale_(optim::Optimizer& optimizer);
  /// @brief Unscales if not done yet, then runs `optimizer.step()` unless a gradient was inf/NaN (`scaler.step(opt)`).
  ///
  /// Returns true when the optimizer stepped (a tiny addition: PyTorch returns
  /// the step's return value). A second step() before update() throws
  /// tiny::RuntimeError "step() has already been called since the last update().".
  /// Disabled: just `optimizer.step()`.
  bool step(optim::Optimizer& optimizer);
  /// @brief Updates the scale from this iteration's inf/NaN flags (`scaler.update()`), on the device, without synchronizing.
  void update();
  /// @brief Sets the scale to `new_scale` (`scaler.update(new_scale)`).
  void update(double new_scale);

  /// @brief The current scale (`scaler.get_scale()`; reading it synchronizes); 1.0 when disabled.
  double get_scale() const;
  /// @brief `scaler.get_growth_factor()`.
  double get_growth_factor() const;
  /// @brief `scaler.get_backoff_factor()`.
  double get_backoff_factor() const;
  /// @brief `scaler.get_growth_interval()`.
  int64_t get_growth_interval() const;
  /// @brief `scaler.set_growth_factor(f)` (tiny::ValueError unless > 1).
  void set_growth_factor(double growth_factor);
  /// @brief `scaler.set_backoff_factor(f)` (tiny::ValueError unless < 1).
  void set_backoff_factor(double backoff_factor);
  /// @brief `scaler.set_growth_interval(n)` (tiny::ValueError unless > 0).
  void set_growth_interval(int64_t growth_interval);
  /// @brief `scaler.is_enabled()`.
  bool is_enabled() const { return enabled_; }
  /// @brief Clean steps since the last growth or backoff (PyTorch's `_growth_tracker`; synchronizes); 0 when disabled.
  int64_t growth_tracker() const;

  /// @brief `scaler.state_dict()`: metadata "scale", "growth_factor", "backoff_factor", "growth_interval",
  /// "_growth_tracker" (no tensors); empty when disabled.
  StateDict state_dict() const;
  /// @brief `scaler.load_state_dict(state)`; tiny::RuntimeError for an empty dict (saved by a disabled scaler),
  /// tiny::ValueError for a missing or malformed key.
  void load_state_dict(const StateDict& state);

 private:
  enum class Stage { Ready, Unscaled, Stepped };
  struct PerOptimizer {
    Stage stage = Stage::Ready;
    std::map<std::string, Tensor> found_inf_per_device;  // by device string, e.g. "cuda:0"
  };
  void lazy_init(const Device& device);
  void check_scale_initialized(const char* funcname) const;
  PerOptimizer& state_of(const optim::Optimizer& optimizer);

  std::string device_;
  bool enabled_;
  double init_scale_;
  double growth_factor_;
  double backoff_factor_;
  int64_t growth_interval_;
  int64_t init_growth_tracker_ = 0;
  Tensor scale_;           // float32 [1] on the device of the first scaled output
  Tensor growth_tracker_;  // int64 [1] beside it
  std::map<const optim::Optimizer*, PerOptimizer> per_optimizer_;
};

}  // namespace tiny::amp
