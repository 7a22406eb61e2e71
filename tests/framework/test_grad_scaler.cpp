// tiny::amp::GradScaler (torch.cuda.amp.GradScaler) against hand-computed
// sequences, on cpu and on the emulated GPUs: scale, unscale_, step skipping,
// growth and backoff (_amp_update_scale_), the error messages, state_dict, the
// fused unscale + inf/NaN kernel, several devices, and its synchronizations.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "test_util.h"
#include "tiny/tiny.h"

namespace {

using tiny::Device;
using tiny::Dtype;
using tiny::Tensor;
namespace amp = tiny::amp;
namespace optim = tiny::optim;

constexpr double kInf = std::numeric_limits<double>::infinity();

bool have_gpus(int n) { return tiny::cuda::device_count() >= n; }

std::vector<Device> devices() {
  std::vector<Device> out{Device("cpu")};
  if (have_gpus(1)) out.emplace_back("cuda:0");
  return out;
}

std::string type_of(const Device& d) { return d.is_cpu() ? "cpu" : "cuda"; }

amp::GradScaler::Options options(double init_scale, int64_t growth_interval) {
  amp::GradScaler::Options o;
  o.init_scale = init_scale;
  o.growth_interval = growth_interval;
  return o;
}

// A parameter with a given gradient, on `device`.
Tensor param_with_grad(const std::vector<double>& value, const std::vector<double>& grad, const Device& device,
                       Dtype dtype = tiny::kFloat32) {
  const int64_t n = static_cast<int64_t>(value.size());
  Tensor p = tiny::tensor(value, {n}).to(dtype).to(device).requires_grad_(true);
  p.set_grad(tiny::tensor(grad, {n}).to(dtype).to(device));
  return p;
}

std::vector<uint8_t> bytes_of(const Tensor& t) {
  const Tensor c = t.cpu().contiguous();
  std::vector<uint8_t> out(static_cast<size_t>(c.numel()) * tiny::element_size(c.dtype()));
  std::memcpy(out.data(), c.raw_data_ptr(), out.size());
  return out;
}

std::vector<double> values(const Tensor& t) { return t.cpu().to(tiny::kFloat64).to_vector<double>(); }

TEST(GradScaler, DefaultsArePyTorchs) {
  amp::GradScaler s("cpu", {});
  EXPECT_TRUE(s.is_enabled());
  EXPECT_EQ(s.get_scale(), 65536.0);
  EXPECT_EQ(s.get_growth_factor(), 2.0);
  EXPECT_EQ(s.get_backoff_factor(), 0.5);
  EXPECT_EQ(s.get_growth_interval(), 2000);
  EXPECT_EQ(s.growth_tracker(), 0);
  if (have_gpus(1)) {
    amp::GradScaler cuda;  // "cuda" by default
    EXPECT_TRUE(cuda.is_enabled());
    EXPECT_EQ(cuda.get_scale(), 65536.0);
  }
}

TEST(GradScaler, BadOptionsAreValueErrors) {
  amp::GradScaler::Options o;
  o.growth_factor = 1.0;
  tiny_test::expect_error<tiny::ValueError>([&] { amp::GradScaler s("cpu", o); }, {"The growth factor must be > 1.0."});
  o = {};
  o.backoff_factor = 1.5;
  tiny_test::expect_error<tiny::ValueError>([&] { amp::GradScaler s("cpu", o); }, {"The backoff factor must be < 1.0."});
  o = {};
  o.growth_interval = 0;
  tiny_test::expect_error<tiny::ValueError>([&] { amp::GradScaler s("cpu", o); }, {"growth interval must be > 0"});
  tiny_test::expect_error<tiny::ValueError>([&] { amp::GradScaler s("cuda:0", {}); }, {"'cuda:0'", "\"cuda\" or \"cpu\""});
  amp::GradScaler s("cpu", {});
  tiny_test::expect_error<tiny::ValueError>([&] { s.set_growth_factor(0.5); }, {"growth factor"});
  tiny_test::expect_error<tiny::ValueError>([&] { s.set_backoff_factor(2.0); }, {"backoff factor"});
  s.set_growth_factor(4.0);
  s.set_backoff_factor(0.25);
  s.set_growth_interval(7);
  EXPECT_EQ(s.get_growth_factor(), 4.0);
  EXPECT_EQ(s.get_backoff_factor(), 0.25);
  EXPECT_EQ(s.get_growth_interval(), 7);
}

TEST(GradScaler, ScaleMultipliesByAFloat32ScaleOnTheOutputsDevice) {
  for (const Device& d : devices()) {
    amp::GradScaler s(type_of(d), options(1024.0, 10));
    const Tensor loss = tiny::scalar_tensor(0.375).to(d);
    const Tensor scaled = s.scale(loss);
    EXPECT_EQ(scaled.device(), d);
    EXPECT_EQ(scaled.dtype(), tiny::kFloat32);
    EXPECT_EQ(scaled.sizes(), tiny::IntArrayRef{1}) << "the scale has shape [1], as PyTorch's";
    EXPECT_EQ(values(scaled)[0], 384.0);
    // A float16 loss is scaled too (float32 result: the loss is 0-d, the scale [1]).
    EXPECT_EQ(values(s.scale(tiny::scalar_tensor(2.0).to(tiny::kFloat16).to(d)))[0], 2048.0);
  }
}

TEST(GradScaler, UnscaledGradientsAreTheGradientsOverTheScale) {
  for (const Device& d : devices()) {
    for (const Dtype dtype : {tiny::kFloat32, tiny::kFloat16, tiny::kBFloat16}) {
      // 3 is not a power of two: inv_scale = float(1 / 3.0) and each grad * inv_scale rounds.
      amp::GradScaler s(type_of(d), options(3.0, 10));
      const std::vector<double> g{3.0, -1.5, 0.25, 96.0, 1e-3};
      Tensor p = param_with_grad({1, 2, 3, 4, 5}, g, d, dtype);
      optim::SGD opt({p}, optim::SGDOptions{0.5});
      (void)s.scale(tiny::scalar_tensor(1.0).to(d));
      s.unscale_(opt);
      ASSERT_EQ(p.grad().dtype(), dtype);
      const float inv = static_cast<float>(1.0 / 3.0);
      const Tensor expected = (tiny::tensor(g, {5}).to(dtype).to(tiny::kFloat32) * static_cast<double>(inv)).to(dtype);
      EXPECT_EQ(bytes_of(p.grad()), bytes_of(expected)) << d << " " << tiny::dtype_name(dtype);
      EXPECT_TRUE(s.step(opt));
      const std::vector<double> pv = values(p), gv = values(expected);
      for (size_t i = 0; i < pv.size(); ++i) {
        EXPECT_NEAR(pv[i], (i + 1.0) - 0.5 * gv[i], dtype == tiny::kFloat32 ? 1e-6 : 0.05) << i;
      }
    }
  }
}

// scale 4, growth_interval 3: clean, clean, clean (x2), inf (x0.5), NaN (x0.5), clean ...
TEST(GradScaler, GrowthAfterCleanStepsAndBackoffOnInfAndNaN) {
  for (const Device& d : devices()) {
    amp::GradScaler s(type_of(d), options(4.0, 3));
    Tensor p = param_with_grad({1.0, 2.0}, {0.0, 0.0}, d);
    optim::SGD opt({p}, optim::SGDOptions{0.25});
    struct Step {
      double grad0;  // the second element's scaled gradient is always 8
      bool steps;
      double scale_after;
      int64_t tracker_after;
    };
    const std::vector<Step> plan{
        {4.0, true, 4.0, 1},  {4.0, true, 4.0, 2},    {4.0, true, 8.0, 0},   {kInf, false, 4.0, 0},
        {NAN, false, 2.0, 0}, {-kInf, false, 1.0, 0}, {4.0, true, 1.0, 1},   {4.0, true, 1.0, 2},
        {4.0, true, 2.0, 0},  {4.0, true, 2.0, 1},    {kInf, false, 1.0, 0},
    };
    double scale = 4.0;
    for (size_t k = 0; k < plan.size(); ++k) {
      const Step& st = plan[k];
      (void)s.scale(tiny::scalar_tensor(1.0).to(d));
      p.set_grad(tiny::tensor({st.grad0, 8.0}).to(d));
      const std::vector<uint8_t> before = bytes_of(p);
      const std::vector<double> pv = values(p);
      EXPECT_EQ(s.step(opt), st.steps) << "step " << k << " on " << d;
      if (st.steps) {
        const std::vector<double> after = values(p);
        EXPECT_DOUBLE_EQ(after[0], pv[0] - 0.25 * st.grad0 / scale) << "step " << k;
        EXPECT_DOUBLE_EQ(after[1], pv[1] - 0.25 * 8.0 / scale) << "step " << k;
      } else {
        EXPECT_EQ(bytes_of(p), before) << "a skipped step leaves the parameters bit for bit, step " << k;
      }
      s.update();
      EXPECT_EQ(s.get_scale(), st.scale_after) << "step " << k << " on " << d;
      EXPECT_EQ(s.growth_tracker(), st.tracker_after) << "step " << k << " on " << d;
      scale = st.scale_after;
    }
  }
}

TEST(GradScaler, ASkippedStepLeavesParametersAndOptimizerStateUntouched) {
  for (const Device& d : devices()) {
    amp::GradScaler s(type_of(d), options(8.0, 100));
    Tensor p = param_with_grad({1.0, 2.0, 3.0}, {8.0, 8.0, 8.0}, d);
    Tensor q = param_with_grad({4.0}, {NAN}, d);  // one bad gradient anywhere skips the whole step
    optim::SGD opt({p, q}, optim::SGDOptions{0.1, 0.9});
    (void)s.scale(tiny::scalar_tensor(1.0).to(d));
    const std::vector<uint8_t> pb = bytes_of(p), qb = bytes_of(q);
    EXPECT_FALSE(s.step(opt));
    EXPECT_EQ(bytes_of(p), pb);
    EXPECT_EQ(bytes_of(q), qb);
    EXPECT_TRUE(opt.state(0).empty()) << "no momentum buffer was created: the optimizer did not run";
    s.update();
    EXPECT_EQ(s.get_scale(), 4.0);
  }
}

TEST(GradScaler, ErrorsInPyTorchsWords) {
  for (const Device& d : devices()) {
    amp::GradScaler s(type_of(d), options(2.0, 10));
    Tensor p = param_with_grad({1.0}, {1.0}, d);
    optim::SGD opt({p}, optim::SGDOptions{0.1});
    tiny_test::expect_error<tiny::RuntimeError>(
        [&] { s.step(opt); }, {"Attempted step but _scale is None.", "scaler.scale(loss or outputs)"});
    tiny_test::expect_error<tiny::RuntimeError>([&] { s.unscale_(opt); }, {"Attempted unscale_ but _scale is None."});
    tiny_test::expect_error<tiny::RuntimeError>([&] { s.update(); }, {"Attempted update but _scale is None."});
    (void)s.scale(tiny::scalar_tensor(1.0).to(d));
    s.unscale_(opt);
    tiny_test::expect_error<tiny::RuntimeError>(
        [&] { s.unscale_(opt); }, {"unscale_() has already been called on this optimizer since the last update()."});
    EXPECT_TRUE(s.step(opt));
    tiny_test::expect_error<tiny::RuntimeError>([&] { s.step(opt); },
                                                {"step() has already been called since the last update()."});
    tiny_test::expect_error<tiny::RuntimeError>([&] { s.unscale_(opt); }, {"unscale_() is being called after step()."});
    s.update();
    // After update() the cycle starts again.
    p.set_grad(tiny::tensor({2.0}).to(d));
    s.unscale_(opt);
    EXPECT_TRUE(s.step(opt));
    s.update();
    // An optimizer without any gradient: PyTorch's assertion, as an error.
    Tensor r = tiny::zeros({2}).to(d).requires_grad_(true);
    optim::SGD empty({r}, optim::SGDOptions{0.1});
    tiny_test::expect_error<tiny::RuntimeError>([&] { s.step(empty); }, {"No inf checks were recorded for this optimizer."});
  }
}

TEST(GradScaler, UndefinedGradientsAreSkipped) {
  for (const Device& d : devices()) {
    amp::GradScaler s(type_of(d), options(2.0, 10));
    Tensor p = param_with_grad({1.0, 1.0}, {2.0, 4.0}, d);
    Tensor frozen = tiny::ones({3}).to(d).requires_grad_(true);  // no gradient this step
    optim::SGD opt({frozen, p}, optim::SGDOptions{1.0});
    (void)s.scale(tiny::scalar_tensor(1.0).to(d));
    EXPECT_TRUE(s.step(opt));
    EXPECT_FALSE(frozen.grad().defined());
    EXPECT_EQ(values(p), (std::vector<double>{0.0, -1.0}));
    EXPECT_EQ(values(frozen), (std::vector<double>{1.0, 1.0, 1.0}));
  }
}

TEST(GradScaler, DisabledScalerIsATransparentWrapper) {
  amp::GradScaler::Options o;
  o.enabled = false;
  o.growth_factor = 0.5;  // not validated when disabled, as in PyTorch
  amp::GradScaler s("cpu", o);
  EXPECT_FALSE(s.is_enabled());
  const Tensor loss = tiny::scalar_tensor(3.0);
  EXPECT_TRUE(s.scale(loss).is_same(loss));
  Tensor p = param_with_grad({1.0}, {NAN}, Device("cpu"));
  optim::SGD opt({p}, optim::SGDOptions{0.1});
  s.unscale_(opt);  // nothing
  EXPECT_TRUE(std::isnan(values(p.grad())[0]));
  EXPECT_TRUE(s.step(opt)) << "disabled: step() just steps";
  EXPECT_TRUE(std::isnan(values(p)[0]));
  s.update();
  EXPECT_EQ(s.get_scale(), 1.0);
  EXPECT_EQ(s.growth_tracker(), 0);
  EXPECT_TRUE(s.state_dict().metadata.empty());
  // A disabled scaler's (empty) state cannot be loaded into an enabled one.
  amp::GradScaler enabled("cpu", {});
  tiny_test::expect_error<tiny::RuntimeError>([&] { enabled.load_state_dict(s.state_dict()); },
                                              {"The source state dict is empty"});
}

TEST(GradScaler, StateDictRoundTrip) {
  for (const Device& d : devices()) {
    amp::GradScaler a(type_of(d), options(16.0, 4));
    a.set_growth_factor(3.0);
    Tensor p = param_with_grad({1.0}, {1.0}, d);
    optim::SGD opt({p}, optim::SGDOptions{0.1});
    for (int k = 0; k < 6; ++k) {  // 4 clean steps grow once (x3), then 2 more
      (void)a.scale(tiny::scalar_tensor(1.0).to(d));
      p.set_grad(tiny::tensor({1.0}).to(d));
      a.step(opt);
      a.update();
    }
    EXPECT_EQ(a.get_scale(), 48.0);
    EXPECT_EQ(a.growth_tracker(), 2);
    const tiny::StateDict sd = a.state_dict();
    EXPECT_EQ(sd.metadata.at("scale"), "48");
    EXPECT_EQ(sd.metadata.at("growth_factor"), "3");
    EXPECT_EQ(sd.metadata.at("backoff_factor"), "0.5");
    EXPECT_EQ(sd.metadata.at("growth_interval"), "4");
    EXPECT_EQ(sd.metadata.at("_growth_tracker"), "2");
    EXPECT_EQ(sd.size(), 0u) << "PyTorch's state_dict holds numbers, not tensors";

    // Into a fresh scaler (scale not created yet) and into one that has a scale tensor.
    amp::GradScaler fresh(type_of(d), {});
    fresh.load_state_dict(sd);
    amp::GradScaler used(type_of(d), options(2.0, 1000));
    (void)used.scale(tiny::scalar_tensor(1.0).to(d));
    used.load_state_dict(sd);
    for (amp::GradScaler* b : {&fresh, &used}) {
      EXPECT_EQ(b->get_scale(), 48.0);
      EXPECT_EQ(b->growth_tracker(), 2);
      EXPECT_EQ(b->get_growth_factor(), 3.0);
      EXPECT_EQ(b->get_growth_interval(), 4);
      // Both continue as the original: two more clean steps reach the interval.
      for (int k = 0; k < 2; ++k) {
        (void)b->scale(tiny::scalar_tensor(1.0).to(d));
        p.set_grad(tiny::tensor({1.0}).to(d));
        b->step(opt);
        b->update();
      }
      EXPECT_EQ(b->get_scale(), 144.0);
      EXPECT_EQ(b->growth_tracker(), 0);
    }
    tiny::StateDict broken = sd;
    broken.metadata.erase("_growth_tracker");
    tiny_test::expect_error<tiny::ValueError>([&] { fresh.load_state_dict(broken); }, {"'_growth_tracker'"});
    broken = sd;
    broken.metadata["scale"] = "big";
    tiny_test::expect_error<tiny::ValueError>([&] { fresh.load_state_dict(broken); }, {"'scale'", "big"});
  }
}

TEST(GradScaler, UpdateWithANewScale) {
  amp::GradScaler s("cpu", options(8.0, 2));
  (void)s.scale(tiny::scalar_tensor(1.0));
  s.update(100.0);
  EXPECT_EQ(s.get_scale(), 100.0);
  EXPECT_EQ(values(s.scale(tiny::scalar_tensor(0.5)))[0], 50.0);
}

// Gradients on two GPUs and the CPU, the scale on cuda:0: each device gets one
// fused unscale, found_inf is per device, and an inf on any device skips the step.
TEST(GradScaler, ParametersOnSeveralDevices) {
  if (!have_gpus(2)) GTEST_SKIP() << "needs 2 GPUs (TINY_EMULATED_GPUS >= 2)";
  for (int bad : {-1, 0, 1, 2, 3}) {  // which parameter gets an inf (-1: none; 3: GPUs only, none)
    const bool with_cpu = bad != 3;
    if (bad == 3) bad = -1;
    amp::GradScaler s("cuda", options(4.0, 1));
    std::vector<Tensor> params;
    params.reserve(3);
    params.push_back(param_with_grad({1.0, 1.0}, {4.0, 8.0}, Device("cuda:0")));
    params.push_back(param_with_grad({2.0}, {12.0}, Device("cuda:1")));
    if (with_cpu) params.push_back(param_with_grad({3.0}, {-4.0}, Device("cpu")));
    if (bad >= 0) params[static_cast<size_t>(bad)].set_grad(tiny::full({params[bad].numel()}, kInf).to(params[bad].device()));
    optim::SGD opt(params, optim::SGDOptions{1.0});
    (void)s.scale(tiny::scalar_tensor(1.0).to(Device("cuda:0")));
    tiny::cuda::synchronize(0);
    tiny::cuda::synchronize(1);
    tiny::cuda::reset_device_counters(0);
    tiny::cuda::reset_device_counters(1);
    s.unscale_(opt);
    // inv_scale reaches cuda:1 by a peer copy, which the host does not wait
    // for (cuda:1's stream waits for it, as in PyTorch); a CPU gradient needs
    // inv_scale on the host, the one wait for cuda:0. Nothing waits for cuda:1,
    // whose only work is found_inf's zeros and one fused unscale of all its gradients.
    EXPECT_EQ(tiny::cuda::device_counters(0).synchronizations, with_cpu ? 1u : 0u);
    EXPECT_EQ(tiny::cuda::device_counters(1).synchronizations, 0u) << "unscale_ does not wait for cuda:1";
    EXPECT_EQ(tiny::cuda::device_counters(1).kernel_launches, 2u) << "cuda:1: found_inf's zeros and one fused unscale";
    if (bad < 0) {
      EXPECT_EQ(values(params[0].grad()), (std::vector<double>{1.0, 2.0}));
      EXPECT_EQ(values(params[1].grad()), (std::vector<double>{3.0}));
      if (with_cpu) {
        EXPECT_EQ(values(params[2].grad()), (std::vector<double>{-1.0}));
      }
    }
    const bool stepped = s.step(opt);
    EXPECT_EQ(stepped, bad < 0) << "inf on parameter " << bad;
    s.update();
    EXPECT_EQ(s.get_scale(), bad < 0 ? 8.0 : 2.0) << "found_inf of every device counts, parameter " << bad;
    if (bad < 0) {
      EXPECT_EQ(values(params[0]), (std::vector<double>{0.0, -1.0}));
      EXPECT_EQ(values(params[1]), (std::vector<double>{-1.0}));
      if (with_cpu) {
        EXPECT_EQ(values(params[2]), (std::vector<double>{4.0}));
      }
    } else {
      EXPECT_EQ(values(params[1]), (std::vector<double>{2.0}));
    }
  }
}

// PyTorch synchronizes once per step (found_inf.item() in step); scale(),
// unscale_() and update() only queue work. On the emulated GPU that is
// checkable with its counters.
TEST(GradScaler, AnIterationSynchronizesOnceOnTheGpu) {
  if (!have_gpus(1)) GTEST_SKIP() << "needs an (emulated) GPU";
  const Device gpu("cuda:0");
  auto model = std::make_shared<tiny::nn::Linear>(8, 4);
  model->to(gpu);
  optim::SGD opt(model->parameters(), optim::SGDOptions{0.01});
  amp::GradScaler scaler;
  const Tensor x = tiny::randn({16, 8}).to(gpu);
  const Tensor y = tiny::randint(0, 4, {16}).to(gpu);
  for (int it = 0; it < 3; ++it) {
    tiny::cuda::synchronize(0);
    tiny::cuda::reset_device_counters(0);
    opt.zero_grad();
    Tensor loss;
    {
      amp::autocast guard("cuda");
      loss = tiny::nn::functional::cross_entropy((*model)(x), y);
    }
    scaler.scale(loss).backward();
    const uint64_t before_step = tiny::cuda::device_counters(0).synchronizations;
    EXPECT_TRUE(scaler.step(opt));
    scaler.update();
    const auto c = tiny::cuda::device_counters(0);
    EXPECT_EQ(c.synchronizations - before_step, 1u) << "step() reads found_inf once; update() does not wait";
    EXPECT_EQ(model->weight.grad().dtype(), tiny::kFloat32);
  }
  EXPECT_EQ(scaler.get_scale(), 65536.0);
  EXPECT_EQ(scaler.growth_tracker(), 3);
}

// ---- the fused kernel and the update rule, directly ------------------------------------------

TEST(AmpKernels, NonFiniteCheckAndUnscaleIsOneFusedPassPerDevice) {
  for (const Device& d : devices()) {
    // More elements than one CPU chunk (32768), with the inf in the last chunk only.
    Tensor big = tiny::ones({100000}).to(d);
    Tensor half = tiny::full({7}, 6.0).to(tiny::kFloat16).to(d);
    Tensor strided = tiny::arange(0.0, 12.0).reshape({3, 4}).to(d).t();  // a transposed view
    const Tensor found = tiny::zeros({1}).to(d);
    const Tensor inv = tiny::full({1}, 0.5).to(d);
    if (d.is_cuda()) {
      tiny::cuda::synchronize(0);
      tiny::cuda::reset_device_counters(0);
    }
    amp::foreach_non_finite_check_and_unscale_({big, half, Tensor(), big.narrow(0, 0, 0)}, found, inv);
    if (d.is_cuda()) {
      EXPECT_EQ(tiny::cuda::device_counters(0).kernel_launches, 1u) << "one launch for every contiguous grad";
      EXPECT_EQ(tiny::cuda::device_counters(0).synchronizations, 0u);
    }
    EXPECT_EQ(values(found)[0], 0.0);
    EXPECT_EQ(values(big.sum())[0], 50000.0);
    EXPECT_EQ(values(half), std::vector<double>(7, 3.0));

    amp::foreach_non_finite_check_and_unscale_({strided}, found, inv);
    const std::vector<double> sv = values(strided.contiguous());
    const std::vector<double> want = values((tiny::arange(0.0, 12.0).reshape({3, 4}).t() * 0.5).contiguous());
    EXPECT_EQ(sv, want) << "a strided gradient is unscaled in place";

    Tensor nan_grad = tiny::ones({100000}).to(d);
    nan_grad.narrow(0, 99999, 1).fill_(NAN);
    amp::foreach_non_finite_check_and_unscale_({nan_grad}, found, inv);
    EXPECT_EQ(values(found)[0], 1.0) << "NaN in the last chunk found on " << d;
    amp::foreach_non_finite_check_and_unscale_({tiny::ones({3}).to(d)}, found, inv);
    EXPECT_EQ(values(found)[0], 1.0) << "found_inf is never reset by the kernel";

    const Tensor found2 = tiny::zeros({1}).to(d);
    amp::foreach_non_finite_check_and_unscale_({tiny::full({4}, -kInf).to(tiny::kBFloat16).to(d)}, found2, inv);
    EXPECT_EQ(values(found2)[0], 1.0) << "-inf in a bfloat16 gradient";

    tiny_test::expect_error<tiny::DtypeError>(
        [&] { amp::foreach_non_finite_check_and_unscale_({big}, tiny::zeros({1}, tiny::kFloat64).to(d), inv); },
        {"found_inf", "float32"});
    if (d.is_cuda()) {
      tiny_test::expect_error<tiny::DeviceError>(
          [&] { amp::foreach_non_finite_check_and_unscale_({tiny::ones({2})}, found, inv); }, {"cpu", "cuda:0"});
    }
  }
}

TEST(AmpKernels, UpdateScaleFollowsAmpUpdateScale) {
  for (const Device& d : devices()) {
    const Tensor scale = tiny::full({1}, 3.0e38).to(d);
    const Tensor tracker = tiny::zeros({1}, tiny::kInt64).to(d);
    const Tensor clean = tiny::zeros({1}).to(d);
    const Tensor inf = tiny::ones({1}).to(d);
    amp::update_scale_(scale, tracker, clean, 2.0, 0.5, 2);
    EXPECT_EQ(values(tracker)[0], 1.0);
    amp::update_scale_(scale, tracker, clean, 2.0, 0.5, 2);
    EXPECT_EQ(values(scale)[0], static_cast<double>(3.0e38f)) << "a growth that overflows float32 is not taken";
    EXPECT_EQ(values(tracker)[0], 0.0) << "but the tracker resets";
    amp::update_scale_(scale, tracker, clean, 2.0, 0.5, 2);
    amp::update_scale_(scale, tracker, inf, 2.0, 0.5, 2);
    EXPECT_EQ(values(scale)[0], static_cast<double>(static_cast<float>(3.0e38f * 0.5)));
    EXPECT_EQ(values(tracker)[0], 0.0);
    // A found_inf count above 1 (several devices summed) is still a backoff.
    const Tensor two = tiny::full({1}, 2.0).to(d);
    amp::update_scale_(scale, tracker, two, 2.0, 0.25, 2);
    EXPECT_EQ(values(scale)[0], static_cast<double>(static_cast<float>(3.0e38f * 0.5) * 0.25f));
  }
}

}  // namespace
