// tiny::optim::RMSprop and nn::utils::clip_grad_value_ (issue 23, item 4) against
// what torch.optim 1.13 computed (tests/parity/optim_fixtures/rmsprop_* and
// clipvalue_*, written by tests/parity/make_optim_fixtures.py), on the CPU and
// on the emulated GPU, plus their bad-input errors.
//
// Tolerance (float32 trajectories): |tiny - torch| <= 2e-6 + 1e-5 |torch| per
// element after each of the 8 steps, as for SGD and Adam (tests/parity/README.md,
// "Optimizer fixtures"): the same float32 operations in the same order, but
// PyTorch's vectorised kernels fuse some multiply-adds.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "tiny/cuda.h"
#include "tiny/io.h"
#include "tiny/nn/utils.h"
#include "tiny/ops.h"
#include "tiny/optim/optim.h"

#ifndef TINY_PARITY_DIR
#define TINY_PARITY_DIR "tests/parity/fixtures"
#endif

namespace fs = std::filesystem;
using tiny::Tensor;
using namespace tiny::optim;

namespace {

const std::string kOptimFixtures = std::string(TINY_PARITY_DIR) + "/../optim_fixtures";

template <typename ErrorType, typename Fn>
void expect_error(Fn&& fn, const std::vector<std::string>& parts) {
  try {
    fn();
    ADD_FAILURE() << "expected an error containing \"" << parts.front() << "\"";
  } catch (const ErrorType& e) {
    for (const auto& part : parts) {
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << "missing \"" << part << "\" in: " << e.what();
    }
  } catch (const std::exception& e) {
    ADD_FAILURE() << "wrong error type; message: " << e.what();
  }
}

Tensor load(const std::string& c, const std::string& stem) {
  return tiny::io::load_npy(kOptimFixtures + "/" + c + "/" + stem + ".npy");
}

// Mirrors the RMSprop cases of OPTIMIZER_CASES in make_optim_fixtures.py.
std::map<std::string, RMSpropOptions> rmsprop_table() {
  std::map<std::string, RMSpropOptions> table;
  for (int wd = 0; wd < 2; ++wd)
    for (int mom = 0; mom < 2; ++mom)
      for (int centered = 0; centered < 2; ++centered)
        for (int maximize = 0; maximize < 2; ++maximize) {
          const std::string name = "rmsprop_wd" + std::to_string(wd) + "_mom" + std::to_string(mom) +
                                   (centered ? "_centered" : "") + (maximize ? "_maximize" : "");
          table[name] = RMSpropOptions{0.01, 0.9, 1e-6, wd ? 0.01 : 0.0, mom ? 0.9 : 0.0, centered != 0,
                                       maximize != 0};
        }
  table["rmsprop_defaults"] = RMSpropOptions{};
  return table;
}

bool have_gpu() { return tiny::cuda::device_count() > 0; }

// Runs one fixture's 8 steps on `device` and compares every step.
void run_case(const std::string& name, const RMSpropOptions& options, const tiny::Device& device) {
  SCOPED_TRACE(name + " on " + device.str());
  constexpr double kRtol = 1e-5, kAtol = 2e-6;
  const Tensor param0 = load(name, "param0"), grads = load(name, "grads"), expected = load(name, "params");
  Tensor p = param0.to(device);
  p.requires_grad_(true);
  RMSprop opt({p}, options);
  for (int64_t k = 0; k < grads.size(0); ++k) {
    p.set_grad(grads[k].contiguous().to(device));
    opt.step();
    const auto actual = p.cpu().to_vector<float>(), want = expected[k].to_vector<float>();
    ASSERT_EQ(actual.size(), want.size());
    for (size_t i = 0; i < actual.size(); ++i) {
      ASSERT_NEAR(actual[i], want[i], kAtol + kRtol * std::abs(want[i])) << "step " << k + 1 << " element " << i;
    }
  }
  EXPECT_EQ(opt.state(0).step, grads.size(0));
  EXPECT_EQ(opt.state(0).buffers.count("momentum_buffer"), options.momentum > 0 ? 1u : 0u);
  EXPECT_EQ(opt.state(0).buffers.count("grad_avg"), options.centered ? 1u : 0u);
}

}  // namespace

TEST(RMSpropParity, TableCoversEveryFixture) {
  std::set<std::string> on_disk, in_table;
  for (const auto& entry : fs::directory_iterator(kOptimFixtures)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("rmsprop_", 0) == 0) on_disk.insert(name);
  }
  for (const auto& [name, o] : rmsprop_table()) in_table.insert(name);
  EXPECT_EQ(on_disk, in_table);
  EXPECT_EQ(in_table.size(), 17u) << "16 option combinations and the defaults";
}

TEST(RMSpropParity, MatchesTorchOptimOnTheCpu) {
  for (const auto& [name, options] : rmsprop_table()) run_case(name, options, tiny::Device("cpu"));
}

// The emulated GPU runs the same kernel struct: it must match the same fixtures,
// and the CPU bit for bit.
TEST(RMSpropParity, MatchesTorchOptimOnTheEmulatedGpuAndTheCpuExactly) {
  if (!have_gpu()) GTEST_SKIP() << "needs an (emulated) GPU";
  for (const auto& [name, options] : rmsprop_table()) {
    run_case(name, options, tiny::Device("cuda:0"));
    const Tensor param0 = load(name, "param0"), grads = load(name, "grads");
    Tensor a = param0.clone(), b = param0.to(tiny::Device("cuda:0"));
    a.requires_grad_(true);
    b.requires_grad_(true);
    RMSprop oa({a}, options), ob({b}, options);
    for (int64_t k = 0; k < grads.size(0); ++k) {
      a.set_grad(grads[k].contiguous());
      b.set_grad(grads[k].contiguous().to(b.device()));
      oa.step();
      ob.step();
    }
    EXPECT_TRUE(tiny::equal(a.detach(), b.detach().cpu())) << name;
  }
}

TEST(RMSprop, Float64AndHalfPrecisionAndStridedParameters) {
  // float64 against the formula, a non-contiguous parameter and gradient, and bfloat16 on the way.
  Tensor base = tiny::tensor({1.0, -2.0, 3.0, 0.5, -0.25, 4.0}, tiny::TensorOptions(tiny::kFloat64)).reshape({2, 3});
  Tensor p = base.t();  // [3, 2], not contiguous
  Tensor leaf = p.detach().clone();
  leaf = leaf.t().contiguous().t();  // a non-contiguous leaf
  leaf.requires_grad_(true);
  ASSERT_FALSE(leaf.is_contiguous());
  RMSprop opt({leaf}, RMSpropOptions{0.1, 0.5, 1e-8, 0.0, 0.0, false, false});
  Tensor g = tiny::tensor({0.5, -1.0, 2.0, 1.0, 0.25, -0.5}, tiny::TensorOptions(tiny::kFloat64)).reshape({2, 3}).t();
  leaf.set_grad(g);
  opt.step();
  // square_avg = 0.5 * g^2; p -= 0.1 * g / (sqrt(square_avg) + eps) = 0.1 * sign(g) * sqrt(2)
  const auto before = p.contiguous().to_vector<double>(), gv = g.contiguous().to_vector<double>(),
             after = leaf.detach().contiguous().to_vector<double>();
  for (size_t i = 0; i < before.size(); ++i) {
    const double want = before[i] - 0.1 * gv[i] / (std::sqrt(0.5 * gv[i] * gv[i]) + 1e-8);
    EXPECT_NEAR(after[i], want, 1e-12) << i;
  }
  for (tiny::Dtype dtype : {tiny::kBFloat16, tiny::kFloat16}) {
    Tensor h = tiny::ones({4}).to(dtype);
    h.requires_grad_(true);
    RMSprop oh({h}, RMSpropOptions{0.01, 0.99, 1e-8, 0.0, 0.9, true, false});
    h.set_grad(tiny::full({4}, 0.5).to(dtype));
    oh.step();
    EXPECT_EQ(h.dtype(), dtype);
    // centered, first step: avg = sqrt(0.01*0.25 - (0.01*0.5)^2) = sqrt(0.002475); buf = 0.5/avg; p = 1 - 0.01*buf
    const double want = 1.0 - 0.01 * 0.5 / std::sqrt(0.0025 - 0.000025);
    EXPECT_NEAR(h.to(tiny::kFloat64).to_vector<double>()[0], want, 1e-2) << tiny::dtype_name(dtype);
  }
}

TEST(RMSprop, StateDictRoundTripContinuesLikeAnUninterruptedRun) {
  const std::string name = "rmsprop_wd1_mom1_centered";
  const RMSpropOptions options = rmsprop_table().at(name);
  const Tensor param0 = load(name, "param0"), grads = load(name, "grads"), expected = load(name, "params");
  Tensor p = param0.clone();
  p.requires_grad_(true);
  auto opt = std::make_unique<RMSprop>(std::vector<Tensor>{p}, options);
  for (int64_t k = 0; k < 4; ++k) {
    p.set_grad(grads[k].contiguous());
    opt->step();
  }
  const tiny::StateDict sd = opt->state_dict();
  EXPECT_EQ(sd.metadata.at("optimizer"), "RMSprop");
  EXPECT_EQ(sd.metadata.at("state.0.step"), "4");
  EXPECT_TRUE(sd.contains("state.0.square_avg") && sd.contains("state.0.grad_avg") &&
              sd.contains("state.0.momentum_buffer"));
  opt = std::make_unique<RMSprop>(std::vector<Tensor>{p}, RMSpropOptions{});
  opt->load_state_dict(sd);
  EXPECT_EQ(opt->options().momentum, 0.9) << "the options come back with the state";
  for (int64_t k = 4; k < grads.size(0); ++k) {
    p.set_grad(grads[k].contiguous());
    opt->step();
  }
  const auto actual = p.to_vector<float>(), want = expected[grads.size(0) - 1].to_vector<float>();
  for (size_t i = 0; i < actual.size(); ++i) EXPECT_NEAR(actual[i], want[i], 2e-6 + 1e-5 * std::abs(want[i])) << i;
  // Adam's state does not load into RMSprop.
  Tensor q = param0.clone();
  q.requires_grad_(true);
  Adam adam({q});
  expect_error<tiny::ValueError>([&] { opt->load_state_dict(adam.state_dict()); },
                                 {"saved by Adam", "this optimizer is RMSprop"});
}

TEST(RMSprop, InvalidOptionsSayWhichInPyTorchsWords) {
  Tensor p = tiny::zeros({2});
  p.requires_grad_(true);
  expect_error<tiny::ValueError>([&] { RMSprop({p}, RMSpropOptions{-0.1}); }, {"Invalid learning rate: -0.1"});
  expect_error<tiny::ValueError>([&] { RMSprop({p}, RMSpropOptions{0.1, 0.99, -1e-8}); },
                                 {"Invalid epsilon value: -1e-08"});
  expect_error<tiny::ValueError>([&] { RMSprop({p}, RMSpropOptions{0.1, 0.99, 1e-8, 0.0, -0.9}); },
                                 {"Invalid momentum value: -0.9"});
  expect_error<tiny::ValueError>([&] { RMSprop({p}, RMSpropOptions{0.1, 0.99, 1e-8, -0.01}); },
                                 {"Invalid weight_decay value: -0.01"});
  expect_error<tiny::ValueError>([&] { RMSprop({p}, RMSpropOptions{0.1, -0.5}); }, {"Invalid alpha value: -0.5"});
  expect_error<tiny::ValueError>([&] { RMSprop({p}, RMSpropOptions{NAN}); }, {"Invalid learning rate: nan"});
  RMSprop opt({p});
  Tensor q = tiny::zeros({3});
  q.requires_grad_(true);
  expect_error<tiny::ValueError>([&] { opt.add_param_group({q}, {{"betas", 0.9}}); },
                                 {"RMSprop has no option 'betas'", "alpha", "centered"});
}

TEST(ClipGradValue, MatchesPyTorchOnFixtures) {
  const std::map<std::string, double> table = {{"clipvalue_half", 0.5}, {"clipvalue_large", 10.0}};
  std::set<std::string> on_disk, in_table;
  for (const auto& entry : fs::directory_iterator(kOptimFixtures)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("clipvalue_", 0) == 0) on_disk.insert(name);
  }
  for (const auto& [name, v] : table) in_table.insert(name);
  EXPECT_EQ(on_disk, in_table);
  std::vector<tiny::Device> devices = {tiny::Device("cpu")};
  if (have_gpu()) devices.push_back(tiny::Device("cuda:0"));
  for (const auto& device : devices) {
    for (const auto& [name, clip_value] : table) {
      SCOPED_TRACE(name + " on " + device.str());
      Tensor p1 = tiny::zeros({3, 4}).to(device), p2 = tiny::zeros({5}).to(device), p3 = tiny::zeros({2}).to(device);
      for (Tensor* p : {&p1, &p2, &p3}) p->requires_grad_(true);
      p1.set_grad(load(name, "g1").to(device));
      p2.set_grad(load(name, "g2").to(device));
      tiny::nn::utils::clip_grad_value_({p1, p3, p2}, clip_value);
      EXPECT_TRUE(tiny::equal(p1.grad().cpu(), load(name, "g1_clipped")));
      EXPECT_TRUE(tiny::equal(p2.grad().cpu(), load(name, "g2_clipped")));
      EXPECT_FALSE(p3.grad().defined()) << "a parameter without a gradient is skipped";
    }
  }
}

TEST(ClipGradValue, RejectsANegativeOrNanClipValue) {
  Tensor p = tiny::zeros({2});
  p.requires_grad_(true);
  p.set_grad(tiny::ones({2}));
  expect_error<tiny::ValueError>([&] { tiny::nn::utils::clip_grad_value_({p}, -1.0); },
                                 {"clip_value must be >= 0, got -1", "clip_grad_value_(params, 1)"});
  expect_error<tiny::ValueError>([&] { tiny::nn::utils::clip_grad_value_({p}, NAN); }, {"clip_value must be >= 0"});
  EXPECT_EQ(p.grad().to_vector<float>(), (std::vector<float>{1.f, 1.f})) << "nothing changed";
}
