// The autocast guard (PyTorch: torch.autocast's __enter__/__exit__). Its
// per-thread state is stored in core with the rest of tiny::ThreadLocalState
// (core/thread_local_state.h); this file keeps what amp derives from it (the
// fast-path flag casts_active) in step, through the hook it registers there.
#include "amp/autocast_policy.h"
#include "core/thread_local_state.h"
#include "tiny/error.h"

namespace tiny::amp {

namespace detail {

thread_local bool casts_active = false;

namespace {
thread_local bool in_backward_formula = false;

void refresh_casts_active() {
  const AutocastState& state = ::tiny::detail::autocast_state();
  casts_active = (state.cuda_enabled || state.cpu_enabled) && !in_backward_formula;
}

// Called after something outside amp (a ThreadLocalStateGuard, or StateGuard
// below) wrote the whole state: leaving for a state outside any autocast guard
// drops the weight casts cached under the applied one, as the outermost
// autocast guard does when it exits.
void carried_state_changed(::tiny::detail::AutocastChange change) {
  if (change == ::tiny::detail::AutocastChange::Restored && ::tiny::detail::autocast_state().nesting == 0) {
    clear_autocast_cache();
  }
  refresh_casts_active();
}

// Core calls this whenever a ThreadLocalStateGuard applies or restores a state
// (registered when the library loads; core never includes amp).
[[maybe_unused]] const bool hook_registered = (::tiny::detail::set_autocast_state_hook(&carried_state_changed), true);
}  // namespace

BackwardFormulaGuard::BackwardFormulaGuard() : previous_(in_backward_formula) {
  in_backward_formula = true;
  refresh_casts_active();
}

BackwardFormulaGuard::~BackwardFormulaGuard() {
  in_backward_formula = previous_;
  refresh_casts_active();
}

AutocastState& thread_state() { return ::tiny::detail::autocast_state(); }
void state_changed() { refresh_casts_active(); }

}  // namespace detail

namespace {

bool parse_device_type(const std::string& device_type) {
  TINY_CHECK(device_type == "cuda" || device_type == "cpu", ValueError,
             "User specified an unsupported autocast device_type '", device_type,
             "': expected \"cuda\" or \"cpu\" (the device type, without an index such as \"cuda:0\")");
  return device_type == "cuda";
}

}  // namespace

autocast::autocast(const std::string& device_type, std::optional<Dtype> dtype, bool enabled, bool cache_enabled)
    : is_cuda_(parse_device_type(device_type)) {
  const Dtype fast = dtype.value_or(is_cuda_ ? kFloat16 : kBFloat16);
  TINY_CHECK(fast == kFloat16 || fast == kBFloat16, ValueError, "autocast: dtype ", dtype_name(fast),
             " is not supported for device_type '", device_type,
             "': autocast runs ops in a 16-bit float, use tiny::kFloat16 or tiny::kBFloat16");
  AutocastState& s = detail::thread_state();
  prev_enabled_ = is_cuda_ ? s.cuda_enabled : s.cpu_enabled;
  prev_dtype_ = is_cuda_ ? s.cuda_dtype : s.cpu_dtype;
  prev_cache_enabled_ = s.cache_enabled;
  if (is_cuda_) {
    s.cuda_enabled = enabled;
    s.cuda_dtype = fast;
  } else {
    s.cpu_enabled = enabled;
    s.cpu_dtype = fast;
  }
  s.cache_enabled = cache_enabled;
  // Every guard counts, enabled or not, as torch.autocast_increment_nesting().
  ++s.nesting;
  detail::state_changed();
}

autocast::~autocast() {
  AutocastState& s = detail::thread_state();
  // The outermost guard drops the cached weight casts (torch.clear_autocast_cache()).
  if (--s.nesting == 0) clear_autocast_cache();
  if (is_cuda_) {
    s.cuda_enabled = prev_enabled_;
    s.cuda_dtype = prev_dtype_;
  } else {
    s.cpu_enabled = prev_enabled_;
    s.cpu_dtype = prev_dtype_;
  }
  s.cache_enabled = prev_cache_enabled_;
  detail::state_changed();
}

bool is_autocast_enabled(const std::string& device_type) {
  const AutocastState& s = detail::thread_state();
  return parse_device_type(device_type) ? s.cuda_enabled : s.cpu_enabled;
}

Dtype get_autocast_dtype(const std::string& device_type) {
  const AutocastState& s = detail::thread_state();
  return parse_device_type(device_type) ? s.cuda_dtype : s.cpu_dtype;
}

bool is_autocast_cache_enabled() { return detail::thread_state().cache_enabled; }

AutocastState current_state() { return detail::thread_state(); }

StateGuard::StateGuard(const AutocastState& state) : previous_(detail::thread_state()) {
  detail::thread_state() = state;
  detail::carried_state_changed(::tiny::detail::AutocastChange::Applied);
}

StateGuard::~StateGuard() {
  detail::thread_state() = previous_;
  detail::carried_state_changed(::tiny::detail::AutocastChange::Restored);
}

}  // namespace tiny::amp
