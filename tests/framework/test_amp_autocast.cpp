// tiny::amp::autocast (torch.autocast): the dtype policy of every listed op
// on cpu (bfloat16) and on the emulated cuda:0 (float16 and bfloat16), nesting,
// thread-locality, the weight-cast cache, gradients, backward under a guard,
// DataParallel threads, and float16 numerics against a float64 reference.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "amp/autocast_policy.h"
#include "core/tensor_impl.h"
#include "test_util.h"
#include "tiny/tiny.h"

namespace {

using tiny::Device;
using tiny::Dtype;
using tiny::Tensor;
namespace amp = tiny::amp;
namespace F = tiny::nn::functional;
namespace nn = tiny::nn;

bool have_gpu() { return tiny::cuda::device_count() >= 1; }
#define REQUIRE_GPU() \
  if (!have_gpu()) GTEST_SKIP() << "needs an (emulated) GPU"

// One autocast configuration: the device type, a device of that type, the dtype.
struct Config {
  std::string device_type;
  Device device;
  Dtype dtype;
  std::string name() const { return device.str() + "/" + tiny::dtype_name(dtype); }
};

std::vector<Config> configs() {
  std::vector<Config> out{{"cpu", Device("cpu"), tiny::kBFloat16}};
  if (have_gpu()) {
    out.push_back({"cuda", Device("cuda:0"), tiny::kFloat16});
    out.push_back({"cuda", Device("cuda:0"), tiny::kBFloat16});
  }
  return out;
}

Tensor randn_on(const tiny::IntArrayRef& shape, const Device& device, Dtype dtype = tiny::kFloat32) {
  return tiny::randn(shape).to(dtype).to(device);
}

Tensor positive_on(const tiny::IntArrayRef& shape, const Device& device, Dtype dtype = tiny::kFloat32) {
  return (tiny::rand(shape) + 0.5).to(dtype).to(device);
}

Tensor classes_on(int64_t n, int64_t k, const Device& device) { return tiny::randint(0, k, {n}).to(device); }

// The ops of autocast's lower-precision list, each given float32 inputs of `in_dtype`.
std::vector<std::pair<std::string, std::function<Tensor(Dtype)>>> lower_ops(const Device& d) {
  return {
      {"mm", [d](Dtype t) { return tiny::mm(randn_on({4, 5}, d, t), randn_on({5, 3}, d, t)); }},
      {"matmul", [d](Dtype t) { return tiny::matmul(randn_on({2, 4, 5}, d, t), randn_on({5, 3}, d, t)); }},
      {"bmm", [d](Dtype t) { return tiny::bmm(randn_on({2, 4, 5}, d, t), randn_on({2, 5, 3}, d, t)); }},
      {"addmm",
       [d](Dtype t) { return tiny::addmm(randn_on({3}, d, t), randn_on({4, 5}, d, t), randn_on({5, 3}, d, t)); }},
      {"linear",
       [d](Dtype t) { return F::linear(randn_on({4, 5}, d, t), randn_on({3, 5}, d, t), randn_on({3}, d, t)); }},
      {"conv2d",
       [d](Dtype t) {
         return F::conv2d(randn_on({2, 3, 5, 5}, d, t), randn_on({4, 3, 3, 3}, d, t), randn_on({4}, d, t));
       }},
  };
}

// The ops of autocast's float32 list, each given inputs of `in_dtype`.
std::vector<std::pair<std::string, std::function<Tensor(Dtype)>>> fp32_ops(const Device& d) {
  return {
      {"softmax", [d](Dtype t) { return F::softmax(randn_on({4, 6}, d, t), 1); }},
      {"log_softmax", [d](Dtype t) { return F::log_softmax(randn_on({4, 6}, d, t), 1); }},
      {"cross_entropy", [d](Dtype t) { return F::cross_entropy(randn_on({4, 6}, d, t), classes_on(4, 6, d)); }},
      {"nll_loss",
       [d](Dtype t) { return F::nll_loss(F::log_softmax(randn_on({4, 6}, d), 1).to(t), classes_on(4, 6, d)); }},
      {"mse_loss", [d](Dtype t) { return F::mse_loss(randn_on({4, 6}, d, t), randn_on({4, 6}, d, t)); }},
      {"sum", [d](Dtype t) { return tiny::sum(randn_on({4, 6}, d, t)); }},
      {"sum_dim", [d](Dtype t) { return tiny::sum(randn_on({4, 6}, d, t), {1}); }},
      {"mean", [d](Dtype t) { return tiny::mean(randn_on({4, 6}, d, t)); }},
      {"mean_dim", [d](Dtype t) { return tiny::mean(randn_on({4, 6}, d, t), {0}, true); }},
      {"exp", [d](Dtype t) { return tiny::exp(randn_on({4, 6}, d, t)); }},
      {"log", [d](Dtype t) { return tiny::log(positive_on({4, 6}, d, t)); }},
      {"pow_scalar", [d](Dtype t) { return tiny::pow(positive_on({4, 6}, d, t), 2.5); }},
      {"pow_tensor", [d](Dtype t) { return tiny::pow(positive_on({4, 6}, d, t), randn_on({4, 6}, d, t)); }},
      {"layer_norm", [d](Dtype t) { return F::layer_norm(randn_on({4, 6}, d, t), {6}); }},
      {"Tensor::sum", [d](Dtype t) { return randn_on({4, 6}, d, t).sum(); }},
      {"Tensor::exp", [d](Dtype t) { return randn_on({4, 6}, d, t).exp(); }},
  };
}

TEST(AutocastPolicy, LowerPrecisionOpsRunInTheAutocastDtype) {
  for (const Config& c : configs()) {
    amp::autocast guard(c.device_type, c.dtype);
    for (const auto& [name, op] : lower_ops(c.device)) {
      EXPECT_EQ(op(tiny::kFloat32).dtype(), c.dtype) << name << " on " << c.name();
      // A 16-bit input of the other kind is cast too (it is eligible and not the autocast dtype).
      const Dtype other = c.dtype == tiny::kFloat16 ? tiny::kBFloat16 : tiny::kFloat16;
      EXPECT_EQ(op(other).dtype(), c.dtype) << name << " on " << c.name() << " from " << tiny::dtype_name(other);
      // float64 is never cast, as in PyTorch.
      EXPECT_EQ(op(tiny::kFloat64).dtype(), tiny::kFloat64) << name << " on " << c.name();
    }
  }
}

TEST(AutocastPolicy, Fp32OpsRunInFloat32) {
  for (const Config& c : configs()) {
    amp::autocast guard(c.device_type, c.dtype);
    for (const auto& [name, op] : fp32_ops(c.device)) {
      EXPECT_EQ(op(c.dtype).dtype(), tiny::kFloat32) << name << " on " << c.name();
      EXPECT_EQ(op(tiny::kFloat32).dtype(), tiny::kFloat32) << name << " on " << c.name();
      EXPECT_EQ(op(tiny::kFloat64).dtype(), tiny::kFloat64) << name << " on " << c.name();
    }
  }
}

TEST(AutocastPolicy, OtherOpsKeepTheirInputsDtypeAndBinaryOpsPromote) {
  for (const Config& c : configs()) {
    amp::autocast guard(c.device_type, c.dtype);
    const Tensor h = randn_on({3, 4}, c.device, c.dtype);
    const Tensor f = randn_on({3, 4}, c.device);
    EXPECT_EQ(tiny::relu(h).dtype(), c.dtype) << c.name();
    EXPECT_EQ(tiny::tanh(h).dtype(), c.dtype) << c.name();
    EXPECT_EQ((h * 2.0).dtype(), c.dtype) << c.name();
    EXPECT_EQ((h + f).dtype(), tiny::kFloat32) << "half + float -> float on " << c.name();
    EXPECT_EQ(tiny::relu(f).dtype(), tiny::kFloat32) << c.name();
  }
}

TEST(AutocastPolicy, IntegerTensorsAreLeftAlone) {
  for (const Config& c : configs()) {
    amp::autocast guard(c.device_type, c.dtype);
    const Tensor i = tiny::arange(12).reshape({3, 4}).to(c.device);
    EXPECT_EQ(tiny::sum(i).dtype(), tiny::kInt64) << c.name();
    EXPECT_EQ(tiny::mm(i, i.t()).dtype(), tiny::kInt64) << c.name();
    // Class indices of a loss stay int64 (the loss itself runs in float32).
    EXPECT_EQ(F::cross_entropy(randn_on({3, 5}, c.device, c.dtype), classes_on(3, 5, c.device)).dtype(),
              tiny::kFloat32);
  }
}

TEST(AutocastPolicy, TensorsOnTheOtherDeviceTypeAreLeftAlone) {
  REQUIRE_GPU();
  const Device gpu("cuda:0");
  {
    amp::autocast guard("cuda");
    EXPECT_EQ(tiny::mm(randn_on({4, 5}, Device("cpu")), randn_on({5, 3}, Device("cpu"))).dtype(), tiny::kFloat32)
        << "a cuda guard does not touch cpu tensors";
    EXPECT_EQ(tiny::sum(randn_on({4}, Device("cpu"), tiny::kBFloat16)).dtype(), tiny::kBFloat16);
    EXPECT_EQ(tiny::mm(randn_on({4, 5}, gpu), randn_on({5, 3}, gpu)).dtype(), tiny::kFloat16);
  }
  {
    amp::autocast guard("cpu");
    EXPECT_EQ(tiny::mm(randn_on({4, 5}, gpu), randn_on({5, 3}, gpu)).dtype(), tiny::kFloat32)
        << "a cpu guard does not touch cuda tensors";
    EXPECT_EQ(tiny::mm(randn_on({4, 5}, Device("cpu")), randn_on({5, 3}, Device("cpu"))).dtype(), tiny::kBFloat16);
  }
}

// Outside autocast (and under a disabled guard) the ops are exactly what they were:
// same dtypes, same values bit for bit, and no extra kernels queued.
TEST(AutocastPolicy, OutsideAutocastNothingChanges) {
  for (const Config& c : configs()) {
    for (const Dtype in : {tiny::kFloat32, c.dtype}) {
      auto all_ops = lower_ops(c.device);
      const auto more = fp32_ops(c.device);
      all_ops.insert(all_ops.end(), more.begin(), more.end());
      for (const auto& [name, op] : all_ops) {
        tiny::manual_seed(7);
        const Tensor plain = op(in);
        EXPECT_EQ(plain.dtype(), in) << name << " on " << c.name() << ": no autocast, no cast";
        tiny::manual_seed(7);
        Tensor disabled;
        {
          amp::autocast off(c.device_type, c.dtype, /*enabled=*/false);
          disabled = op(in);
        }
        EXPECT_EQ(disabled.dtype(), in) << name;
        EXPECT_TRUE(tiny::equal(plain.cpu(), disabled.cpu())) << name << " on " << c.name();
      }
    }
  }
  REQUIRE_GPU();
  // A guard for the other device type queues nothing more on the GPU.
  const Tensor a = randn_on({16, 16}, Device("cuda:0")), b = randn_on({16, 16}, Device("cuda:0"));
  tiny::cuda::synchronize(0);
  tiny::cuda::reset_device_counters(0);
  (void)tiny::mm(a, b).sum();
  const uint64_t plain = tiny::cuda::device_counters(0).kernel_launches;
  tiny::cuda::reset_device_counters(0);
  {
    amp::autocast cpu_only("cpu");
    (void)tiny::mm(a, b).sum();
  }
  EXPECT_EQ(tiny::cuda::device_counters(0).kernel_launches, plain);
}

TEST(Autocast, StateDefaultsAndBadArguments) {
  EXPECT_FALSE(amp::is_autocast_enabled("cuda"));
  EXPECT_FALSE(amp::is_autocast_enabled("cpu"));
  EXPECT_EQ(amp::get_autocast_dtype("cuda"), tiny::kFloat16);
  EXPECT_EQ(amp::get_autocast_dtype("cpu"), tiny::kBFloat16);
  {
    amp::autocast guard;  // "cuda", float16
    EXPECT_TRUE(amp::is_autocast_enabled());
    EXPECT_FALSE(amp::is_autocast_enabled("cpu"));
  }
  EXPECT_FALSE(amp::is_autocast_enabled());
  tiny_test::expect_error<tiny::ValueError>([] { amp::autocast g("cuda:0"); }, {"cuda:0", "\"cuda\" or \"cpu\""});
  tiny_test::expect_error<tiny::ValueError>([] { amp::autocast g("mps"); }, {"'mps'"});
  tiny_test::expect_error<tiny::ValueError>([] { amp::autocast g("cuda", tiny::kFloat32); },
                                            {"float32", "kFloat16", "kBFloat16"});
  tiny_test::expect_error<tiny::ValueError>([] { (void)amp::is_autocast_enabled("gpu"); }, {"'gpu'"});
  EXPECT_FALSE(amp::is_autocast_enabled()) << "a guard that threw leaves no state behind";
}

TEST(Autocast, NestedGuardsRestoreTheOuterState) {
  const Tensor a = tiny::randn({3, 4}), b = tiny::randn({4, 2});
  amp::autocast outer("cpu");
  EXPECT_EQ(tiny::mm(a, b).dtype(), tiny::kBFloat16);
  {
    amp::autocast off("cpu", std::nullopt, /*enabled=*/false);
    EXPECT_FALSE(amp::is_autocast_enabled("cpu"));
    EXPECT_EQ(tiny::mm(a, b).dtype(), tiny::kFloat32) << "an inner enabled=false guard turns autocast off";
    {
      amp::autocast half("cpu", tiny::kFloat16);
      EXPECT_EQ(tiny::mm(a, b).dtype(), tiny::kFloat16);
    }
    EXPECT_EQ(tiny::mm(a, b).dtype(), tiny::kFloat32);
    EXPECT_EQ(amp::get_autocast_dtype("cpu"), tiny::kBFloat16);
  }
  EXPECT_TRUE(amp::is_autocast_enabled("cpu")) << "restored after the inner guard";
  EXPECT_EQ(amp::get_autocast_dtype("cpu"), tiny::kBFloat16);
  EXPECT_EQ(tiny::mm(a, b).dtype(), tiny::kBFloat16);
  {
    amp::autocast cuda_guard("cuda", tiny::kBFloat16);
    EXPECT_TRUE(amp::is_autocast_enabled("cpu")) << "device types are independent";
  }
  EXPECT_FALSE(amp::is_autocast_enabled("cuda"));
  EXPECT_EQ(amp::get_autocast_dtype("cuda"), tiny::kFloat16) << "the cuda dtype is restored too";
}

TEST(Autocast, IsThreadLocal) {
  amp::autocast guard("cpu");
  bool other_enabled = true;
  Dtype other_dtype = tiny::kBFloat16;
  std::thread worker([&] {
    other_enabled = amp::is_autocast_enabled("cpu");
    other_dtype = tiny::mm(tiny::randn({2, 3}), tiny::randn({3, 2})).dtype();
  });
  worker.join();
  EXPECT_FALSE(other_enabled) << "another thread does not see this thread's guard";
  EXPECT_EQ(other_dtype, tiny::kFloat32);
  EXPECT_TRUE(amp::is_autocast_enabled("cpu"));
}

TEST(Autocast, StateGuardCarriesTheStateIntoAThread) {
  amp::AutocastState state;
  {
    amp::autocast guard("cpu", tiny::kFloat16);
    state = amp::current_state();
  }
  EXPECT_TRUE(state.cpu_enabled);
  EXPECT_EQ(state.cpu_dtype, tiny::kFloat16);
  EXPECT_EQ(state.nesting, 1);
  bool inside = false, after = true;
  Dtype mm_dtype = tiny::kFloat32;
  std::thread worker([&] {
    {
      amp::StateGuard carry(state);
      inside = amp::is_autocast_enabled("cpu");
      mm_dtype = tiny::mm(tiny::randn({2, 3}), tiny::randn({3, 2})).dtype();
    }
    after = amp::is_autocast_enabled("cpu");
  });
  worker.join();
  EXPECT_TRUE(inside);
  EXPECT_EQ(mm_dtype, tiny::kFloat16);
  EXPECT_FALSE(after) << "the guard restores the thread's own state";
}

// ---- the weight-cast cache ---------------------------------------------------------------------

TEST(AutocastCache, WeightCastsAreReusedWithinTheOutermostGuardAndDroppedAfter) {
  for (const Config& c : configs()) {
    const Tensor w = randn_on({3, 5}, c.device).requires_grad_(true);  // a float32 leaf that requires grad
    const Tensor x = randn_on({4, 5}, c.device);
    Tensor first;
    {
      amp::autocast outer(c.device_type, c.dtype);
      first = amp::detail::lower(w);
      EXPECT_EQ(first.dtype(), c.dtype);
      EXPECT_TRUE(amp::detail::lower(w).is_same(first)) << "the same cast tensor within the guard, " << c.name();
      {
        amp::autocast inner(c.device_type, c.dtype);
        EXPECT_TRUE(amp::detail::lower(w).is_same(first)) << "nested guards share the outermost's cache";
      }
      EXPECT_TRUE(amp::detail::lower(w).is_same(first)) << "an inner guard's exit keeps the cache";
      // Activations (no grad) and non-leaves are cast every time.
      EXPECT_FALSE(amp::detail::lower(x).is_same(amp::detail::lower(x)));
      const Tensor nonleaf = w * 1.0;
      EXPECT_FALSE(amp::detail::lower(nonleaf).is_same(amp::detail::lower(nonleaf)));
      // Two linears on the same weight: the cast is queued once.
      if (c.device.is_cuda()) {
        tiny::cuda::synchronize(0);
        tiny::cuda::reset_device_counters(0);
        (void)F::linear(x.to(c.dtype), w);
        const uint64_t one = tiny::cuda::device_counters(0).kernel_launches;
        tiny::cuda::reset_device_counters(0);
        (void)F::linear(x.to(c.dtype), w);
        (void)F::linear(x.to(c.dtype), w);
        EXPECT_EQ(tiny::cuda::device_counters(0).kernel_launches, 2 * one) << "no new cast of the cached weight";
      }
    }
    {
      amp::autocast again(c.device_type, c.dtype);
      const Tensor second = amp::detail::lower(w);
      EXPECT_FALSE(second.is_same(first)) << "the cache was dropped when the outermost guard exited";
      EXPECT_FALSE(second.unsafe_impl()->storage == first.unsafe_impl()->storage);
      EXPECT_TRUE(tiny::equal(second.cpu(), first.cpu()));
    }
    {
      amp::autocast no_cache(c.device_type, c.dtype, true, /*cache_enabled=*/false);
      EXPECT_FALSE(amp::is_autocast_cache_enabled());
      EXPECT_FALSE(amp::detail::lower(w).is_same(amp::detail::lower(w)));
    }
    EXPECT_TRUE(amp::is_autocast_cache_enabled());
  }
}

TEST(AutocastCache, ACastMadeWithoutGradModeIsNotReusedForTraining) {
  const Tensor w = tiny::randn({3, 5}).requires_grad_(true);
  amp::autocast guard("cpu");
  {
    tiny::NoGradGuard no_grad;
    (void)F::linear(tiny::randn({2, 5}), w);
  }
  const Tensor y = F::linear(tiny::randn({2, 5}), w);
  ASSERT_TRUE(y.requires_grad()) << "the weight's cast must carry its gradient edge";
  y.to(tiny::kFloat32).sum().backward();
  ASSERT_TRUE(w.grad().defined());
  EXPECT_EQ(w.grad().dtype(), tiny::kFloat32);
}

// ---- gradients ---------------------------------------------------------------------------------

struct MlpRun {
  Tensor out, loss, grad_w1, grad_b1, grad_w2;
};

// Forward under autocast; backward inside an enabled guard or outside any.
MlpRun run_mlp(const Config& c, bool backward_under_guard) {
  tiny::manual_seed(11);
  const Tensor x = randn_on({8, 12}, c.device);
  const Tensor w1 = (randn_on({16, 12}, c.device) * 0.3).detach().requires_grad_(true);
  const Tensor b1 = (randn_on({16}, c.device) * 0.1).detach().requires_grad_(true);
  const Tensor w2 = (randn_on({5, 16}, c.device) * 0.3).detach().requires_grad_(true);
  const Tensor target = classes_on(8, 5, c.device);
  MlpRun run;
  {
    amp::autocast guard(c.device_type, c.dtype);
    run.out = F::linear(tiny::relu(F::linear(x, w1, b1)), w2);
    run.loss = F::cross_entropy(run.out, target);
    if (backward_under_guard) run.loss.backward();
  }
  if (!backward_under_guard) run.loss.backward();
  run.grad_w1 = w1.grad();
  run.grad_b1 = b1.grad();
  run.grad_w2 = w2.grad();
  return run;
}

TEST(AutocastGrad, Float32WeightsGetFloat32GradientsThroughTheCasts) {
  for (const Config& c : configs()) {
    const MlpRun r = run_mlp(c, false);
    EXPECT_EQ(r.out.dtype(), c.dtype) << c.name();
    EXPECT_EQ(r.loss.dtype(), tiny::kFloat32) << c.name();
    for (const Tensor& g : {r.grad_w1, r.grad_b1, r.grad_w2}) {
      ASSERT_TRUE(g.defined()) << c.name();
      EXPECT_EQ(g.dtype(), tiny::kFloat32) << c.name();
      EXPECT_EQ(g.device(), c.device);
      EXPECT_GT(g.abs().sum().item<double>(), 0.0) << "gradients flow back through the casts";
    }
  }
}

TEST(AutocastGrad, BackwardUnderAnEnabledGuardGivesTheSameGradients) {
  for (const Config& c : configs()) {
    const MlpRun outside = run_mlp(c, false);
    const MlpRun inside = run_mlp(c, true);
    EXPECT_EQ(inside.grad_w1.dtype(), tiny::kFloat32);
    EXPECT_TRUE(tiny::equal(outside.grad_w1.cpu(), inside.grad_w1.cpu())) << c.name();
    EXPECT_TRUE(tiny::equal(outside.grad_b1.cpu(), inside.grad_b1.cpu())) << c.name();
    EXPECT_TRUE(tiny::equal(outside.grad_w2.cpu(), inside.grad_w2.cpu())) << c.name();
  }
}

// A lesson probe calls is_autocast_enabled() in hooks to see whether a student
// wrapped backward (or the optimizer step) in autocast: it must see the guard.
TEST(AutocastGrad, HooksAndOptimizerStepsSeeTheUsersGuard) {
  for (bool wrapped : {false, true}) {
    const Tensor w = tiny::randn({3, 4}).requires_grad_(true);
    std::vector<bool> seen_in_tensor_hook, seen_in_leaf_hook;
    Tensor y;
    {
      amp::autocast guard("cpu");
      y = F::linear(tiny::randn({2, 4}), w);
    }
    y.register_hook([&](const Tensor& g) {
      seen_in_tensor_hook.push_back(amp::is_autocast_enabled("cpu"));
      return g;
    });
    w.register_post_accumulate_grad_hook([&](Tensor&) {
      seen_in_leaf_hook.push_back(amp::is_autocast_enabled("cpu"));
    });
    const Tensor loss = y.to(tiny::kFloat32).sum();
    if (wrapped) {
      amp::autocast guard("cpu");
      loss.backward();
    } else {
      loss.backward();
    }
    ASSERT_EQ(seen_in_tensor_hook.size(), 1u);
    ASSERT_EQ(seen_in_leaf_hook.size(), 1u);
    EXPECT_EQ(seen_in_tensor_hook[0], wrapped);
    EXPECT_EQ(seen_in_leaf_hook[0], wrapped);
    EXPECT_EQ(w.grad().dtype(), tiny::kFloat32);

    // An optimizer step is ordinary code: under a guard the state is visible there too.
    tiny::optim::SGD sgd({w}, tiny::optim::SGDOptions{0.1});
    if (wrapped) {
      amp::autocast guard("cpu");
      EXPECT_TRUE(amp::is_autocast_enabled("cpu"));
      sgd.step();
    } else {
      sgd.step();
    }
    EXPECT_EQ(w.dtype(), tiny::kFloat32) << "the step keeps float32 master weights";
  }
}

// ---- DataParallel ------------------------------------------------------------------------------

struct AutocastProbe : nn::Cloneable<AutocastProbe> {
  AutocastProbe() { fc = register_module("fc", std::make_shared<nn::Linear>(3, 2)); }
  Tensor forward(const Tensor& x) override {
    {
      std::lock_guard<std::mutex> lock(mutex());
      seen().push_back(amp::is_autocast_enabled("cuda"));
    }
    return (*fc)(x);
  }
  static std::mutex& mutex() {
    static std::mutex m;
    return m;
  }
  static std::vector<bool>& seen() {
    static std::vector<bool> v;
    return v;
  }
  std::shared_ptr<nn::Linear> fc;
};

TEST(AutocastDataParallel, ReplicaThreadsRunUnderTheCallersAutocast) {
  if (tiny::cuda::device_count() < 2) GTEST_SKIP() << "needs 2 GPUs (TINY_EMULATED_GPUS >= 2)";
  auto model = std::make_shared<AutocastProbe>();
  model->to(Device("cuda:0"));
  nn::DataParallel dp(model, {0, 1});
  for (bool enabled : {true, false}) {
    AutocastProbe::seen().clear();
    Tensor out;
    {
      amp::autocast guard("cuda", std::nullopt, enabled);
      out = dp(tiny::randn({6, 3}));
    }
    ASSERT_EQ(AutocastProbe::seen().size(), 2u);
    for (bool s : AutocastProbe::seen()) EXPECT_EQ(s, enabled) << "the replica thread sees the caller's guard";
    EXPECT_EQ(out.dtype(), enabled ? tiny::kFloat16 : tiny::kFloat32);
    out.to(tiny::kFloat32).sum().backward();
    EXPECT_EQ(model->fc->weight.grad().dtype(), tiny::kFloat32);
    model->fc->weight.set_grad(Tensor());
    model->fc->bias.set_grad(Tensor());
  }
  // The backward's kernels finish before the test returns: the emulated GPUs'
  // workers are never joined, and one still inside OpenBLAS while the process
  // unloads its libraries at exit crashed the test binary now and then.
  for (int d = 0; d < 2; ++d) tiny::cuda::synchronize(d);
}

// ---- float16 numerics ----------------------------------------------------------------------------

// One float16 ulp at |v| (subnormals: 2^-24).
double half_ulp(double v) {
  const double a = std::fabs(v);
  if (a < std::ldexp(1.0, -14)) return std::ldexp(1.0, -24);
  return std::ldexp(1.0, static_cast<int>(std::floor(std::log2(a))) - 10);
}

// linear under float16 autocast on the emulated GPU against float64 math on
// the float16-rounded inputs, rounded to float16 at the end. Tolerance: one
// float16 ulp of the reference per element. Both sides round the same exact
// value once to float16, except that tiny accumulates the 64-term dot products
// and the bias in float32 (as tensor cores do): its pre-rounding value differs
// from the float64 one by ~1e-6 relative, which changes the float16 result only
// where the exact value lies that close to a rounding boundary, by one ulp.
TEST(AutocastNumerics, Float16LinearMatchesAFloat64ReferenceWithFloat16Rounding) {
  REQUIRE_GPU();
  const Device gpu("cuda:0");
  tiny::manual_seed(5);
  const Tensor x = tiny::randn({32, 64});
  const Tensor w = tiny::randn({24, 64}) * 0.125;
  const Tensor b = tiny::randn({24});
  Tensor y;
  {
    amp::autocast guard("cuda", tiny::kFloat16);
    y = F::linear(x.to(gpu), w.to(gpu), b.to(gpu));
  }
  ASSERT_EQ(y.dtype(), tiny::kFloat16);
  const auto round16 = [](const Tensor& t) { return t.to(tiny::kFloat16).to(tiny::kFloat64); };
  const Tensor ref = (tiny::mm(round16(x), round16(w).t()) + round16(b)).to(tiny::kFloat16).to(tiny::kFloat64);
  const std::vector<double> got = y.cpu().to(tiny::kFloat64).to_vector<double>();
  const std::vector<double> want = ref.to_vector<double>();
  ASSERT_EQ(got.size(), want.size());
  int exact = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_LE(std::fabs(got[i] - want[i]), half_ulp(want[i])) << "element " << i << ": " << got[i] << " vs " << want[i];
    exact += got[i] == want[i];
  }
  EXPECT_GT(exact, static_cast<int>(got.size() * 9 / 10)) << "nearly every element rounds to the same float16";
  // Without the float16 rounding of the inputs the result is measurably different:
  // the test would see a missing cast.
  const Tensor unrounded = (tiny::mm(x.to(tiny::kFloat64), w.to(tiny::kFloat64).t()) + b.to(tiny::kFloat64));
  EXPECT_FALSE(tiny::allclose(unrounded, y.cpu().to(tiny::kFloat64), 0, 1e-6));
}

}  // namespace
