// The casts behind amp::detail::lower / upcast, and the cache of weight casts
// (PyTorch's cached_cast in aten/src/ATen/autocast_mode.cpp).
#include <map>
#include <memory>
#include <utility>

#include "amp/autocast_policy.h"
#include "core/tensor_impl.h"
#include "tiny/autograd.h"

namespace tiny::amp {

namespace {

// A cached cast, keyed by the source's TensorImpl and the target dtype. The
// weak pointer tells whether the key still names the same tensor: a freed
// source whose address was reused must not hit (PyTorch keeps a weakref for
// the same reason).
struct CachedCast {
  std::weak_ptr<TensorImpl> source;
  Tensor cast;
};
thread_local std::map<std::pair<const TensorImpl*, Dtype>, CachedCast> cast_cache;

// Whether autocast applies to `t` (PyTorch's is_eligible): defined, a
// floating dtype other than float64, on a device type whose autocast is on.
// Returns the autocast dtype of that device type.
bool eligible(const Tensor& t, Dtype* autocast_dtype) {
  if (!t.defined() || !t.is_floating_point() || t.dtype() == kFloat64) return false;
  const AutocastState& s = detail::thread_state();
  if (t.is_cpu()) {
    *autocast_dtype = s.cpu_dtype;
    return s.cpu_enabled;
  }
  *autocast_dtype = s.cuda_dtype;
  return s.cuda_enabled;
}

// Weights (float32 leaves that require grad) are cast once per outermost
// guard. Only with grad mode on: a cast made under NoGradGuard has no
// ToCopyBackward and would break a later forward that needs gradients.
bool cacheable(const Tensor& t) {
  return detail::thread_state().cache_enabled && t.dtype() == kFloat32 && t.requires_grad() && t.is_leaf() &&
         is_grad_enabled();
}

Tensor cached_cast(const Tensor& t, Dtype to) {
  if (!cacheable(t)) return t.to(to);
  const auto key = std::make_pair(static_cast<const TensorImpl*>(t.unsafe_impl()), to);
  auto it = cast_cache.find(key);
  if (it != cast_cache.end() && it->second.source.lock() == t.impl_ptr()) return it->second.cast;
  Tensor cast = t.to(to);
  cast_cache[key] = CachedCast{t.impl_ptr(), cast};
  return cast;
}

}  // namespace

void clear_autocast_cache() { cast_cache.clear(); }

namespace detail {

Tensor lower_slow(const Tensor& t) {
  Dtype to = kFloat32;
  if (!eligible(t, &to) || t.dtype() == to) return t;
  return cached_cast(t, to);
}

Tensor upcast_slow(const Tensor& t) {
  Dtype unused = kFloat32;
  if (!eligible(t, &unused) || t.dtype() == kFloat32) return t;
  return t.to(kFloat32);
}

}  // namespace detail

}  // namespace tiny::amp
