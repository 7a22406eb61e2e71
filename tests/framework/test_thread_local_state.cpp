// tiny::ThreadLocalState (PyTorch's at::ThreadLocalState): grad mode, the
// current device and the autocast state, captured on one thread as one value,
// applied in full on another by one ThreadLocalStateGuard and restored in full
// after it, with the autocast weight-cast cache dropped when the restored state
// is outside any autocast guard. amp::StateGuard, the autocast-only wrapper,
// leaves the rest alone.
#include <gtest/gtest.h>

#include <thread>

#include "amp/autocast_policy.h"
#include "tiny/tiny.h"

namespace {

using tiny::Device;
using tiny::Dtype;
using tiny::Tensor;
namespace amp = tiny::amp;

bool have_two_gpus() { return tiny::cuda::device_count() >= 2; }

// The dtype autocast gives a matrix product of float32 inputs on `device`
// (what the ops see, not only what is_autocast_enabled reports).
Dtype mm_dtype_on(const Device& device) {
  const Tensor a = tiny::randn({2, 3}).to(device), b = tiny::randn({3, 2}).to(device);
  return tiny::mm(a, b).dtype();
}

// Every field of the calling thread's state, read through the public API.
struct Seen {
  bool grad = false;
  int device = -1;
  bool cuda_autocast = false;
  Dtype cuda_dtype = tiny::kFloat32;
  bool cpu_autocast = false;
  bool cache = false;
  int nesting = -1;
  Dtype cuda_mm = tiny::kFloat64;
  Dtype cpu_mm = tiny::kFloat64;
};

Seen look(const Device& gpu) {
  Seen s;
  s.grad = tiny::is_grad_enabled();
  s.device = tiny::cuda::current_device();
  s.cuda_autocast = amp::is_autocast_enabled("cuda");
  s.cuda_dtype = amp::get_autocast_dtype("cuda");
  s.cpu_autocast = amp::is_autocast_enabled("cpu");
  s.cache = amp::is_autocast_cache_enabled();
  s.nesting = tiny::ThreadLocalState::capture().autocast.nesting;
  s.cuda_mm = mm_dtype_on(gpu);
  s.cpu_mm = mm_dtype_on(Device("cpu"));
  return s;
}

TEST(ThreadLocalState, OneGuardAppliesEveryFieldOnAnotherThreadAndRestoresEveryField) {
  if (!have_two_gpus()) GTEST_SKIP() << "needs 2 GPUs (TINY_EMULATED_GPUS >= 2)";
  const Device gpu1("cuda:1");
  tiny::ThreadLocalState state;
  {
    tiny::NoGradGuard no_grad;
    tiny::cuda::DeviceGuard on_1(1);
    amp::autocast cuda_bf16("cuda", tiny::kBFloat16, /*enabled=*/true, /*cache_enabled=*/false);
    state = tiny::ThreadLocalState::capture();
  }
  EXPECT_FALSE(state.grad_enabled);
  EXPECT_EQ(state.current_device, 1);
  EXPECT_TRUE(state.autocast.cuda_enabled);
  EXPECT_EQ(state.autocast.cuda_dtype, tiny::kBFloat16);
  EXPECT_FALSE(state.autocast.cpu_enabled);
  EXPECT_FALSE(state.autocast.cache_enabled);
  EXPECT_EQ(state.autocast.nesting, 1);

  Seen before, inside, after;
  std::thread worker([&] {
    // The worker's own state differs from the captured one in every field:
    // grad on, device 0, cpu autocast on (cache on, nesting 1), cuda autocast off.
    amp::autocast own_cpu("cpu", tiny::kBFloat16);
    before = look(gpu1);
    {
      tiny::ThreadLocalStateGuard guard(state);
      inside = look(gpu1);
    }
    after = look(gpu1);
  });
  worker.join();

  EXPECT_TRUE(before.grad);
  EXPECT_EQ(before.device, 0);
  EXPECT_TRUE(before.cpu_autocast);
  EXPECT_FALSE(before.cuda_autocast);

  EXPECT_FALSE(inside.grad) << "grad mode carried";
  EXPECT_EQ(inside.device, 1) << "current device carried";
  EXPECT_TRUE(inside.cuda_autocast) << "cuda autocast carried";
  EXPECT_EQ(inside.cuda_dtype, tiny::kBFloat16);
  EXPECT_FALSE(inside.cpu_autocast) << "the captured state replaces the worker's, it is not merged into it";
  EXPECT_FALSE(inside.cache) << "cache_enabled carried";
  EXPECT_EQ(inside.nesting, 1);
  EXPECT_EQ(inside.cuda_mm, tiny::kBFloat16) << "the ops see the carried autocast, not only the getters";
  EXPECT_EQ(inside.cpu_mm, tiny::kFloat32) << "the ops stop seeing the worker's own cpu autocast";

  EXPECT_TRUE(after.grad) << "grad mode restored";
  EXPECT_EQ(after.device, 0) << "device restored";
  EXPECT_FALSE(after.cuda_autocast) << "cuda autocast restored";
  EXPECT_TRUE(after.cpu_autocast) << "the worker's cpu autocast restored";
  EXPECT_TRUE(after.cache) << "cache_enabled restored";
  EXPECT_EQ(after.nesting, 1);
  EXPECT_EQ(after.cuda_mm, tiny::kFloat32);
  EXPECT_EQ(after.cpu_mm, tiny::kBFloat16) << "the ops see the restored state again";
}

TEST(ThreadLocalState, RestoringAStateOutsideAutocastDropsTheWeightCastCache) {
  const Tensor w = tiny::randn({3, 5}).requires_grad_(true);  // a float32 leaf: its casts are cached
  tiny::ThreadLocalState state;
  {
    amp::autocast cpu_guard("cpu");
    state = tiny::ThreadLocalState::capture();
  }
  ASSERT_EQ(state.autocast.nesting, 1);
  bool casts_inside = false, casts_after = true, cached_inside = false, cached_after = true;
  Dtype cast_dtype = tiny::kFloat32;
  std::thread worker([&] {  // a fresh thread: outside autocast until the guard
    Tensor first;
    {
      tiny::ThreadLocalStateGuard guard(state);
      casts_inside = amp::detail::casts_active;
      first = amp::detail::lower(w);
      cast_dtype = first.dtype();
      cached_inside = amp::detail::lower(w).is_same(first);
    }
    casts_after = amp::detail::casts_active;
    amp::autocast again("cpu");
    cached_after = amp::detail::lower(w).is_same(first);
  });
  worker.join();
  EXPECT_TRUE(casts_inside) << "applying an autocast state turns on amp's fast-path flag";
  EXPECT_FALSE(casts_after) << "restoring a state outside autocast turns it off (each op is one flag test again)";
  EXPECT_EQ(cast_dtype, tiny::kBFloat16) << "the carried cpu autocast casts the weight";
  EXPECT_TRUE(cached_inside) << "the carried state caches weight casts";
  EXPECT_FALSE(cached_after) << "leaving for nesting 0 drops the cache, as the outermost autocast guard's exit";
}

TEST(ThreadLocalState, RestoringAStateInsideAutocastKeepsTheWeightCastCache) {
  const Tensor w = tiny::randn({3, 5}).requires_grad_(true);
  tiny::ThreadLocalState state;
  {
    amp::autocast cpu_guard("cpu");
    state = tiny::ThreadLocalState::capture();
  }
  bool kept = false;
  std::thread worker([&] {
    amp::autocast own("cpu");  // the worker's own outermost guard owns the cache
    const Tensor first = amp::detail::lower(w);
    { tiny::ThreadLocalStateGuard guard(state); }
    kept = amp::detail::lower(w).is_same(first);
  });
  worker.join();
  EXPECT_TRUE(kept) << "the worker is still inside its own guard (nesting 1): its cache stays";
}

TEST(ThreadLocalState, AmpStateGuardCarriesOnlyTheAutocastState) {
  tiny::ThreadLocalState state;
  {
    tiny::NoGradGuard no_grad;
    amp::autocast cpu_guard("cpu");
    state = tiny::ThreadLocalState::capture();
  }
  ASSERT_FALSE(state.grad_enabled);
  bool autocast_inside = false, grad_inside = false, grad_after = true, autocast_after = true;
  std::thread worker([&] {
    {
      amp::StateGuard carry(state.autocast);
      autocast_inside = amp::is_autocast_enabled("cpu");
      grad_inside = tiny::is_grad_enabled();
      tiny::set_grad_enabled(false);  // not the wrapper's to restore
    }
    grad_after = tiny::is_grad_enabled();
    autocast_after = amp::is_autocast_enabled("cpu");
  });
  worker.join();
  EXPECT_TRUE(autocast_inside);
  EXPECT_TRUE(grad_inside) << "amp::StateGuard leaves grad mode alone";
  EXPECT_FALSE(grad_after) << "and does not restore it either";
  EXPECT_FALSE(autocast_after);
}

}  // namespace
