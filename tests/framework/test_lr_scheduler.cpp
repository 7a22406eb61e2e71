// tiny::optim::StepLR and CosineAnnealingLR against the lr sequences PyTorch
// 1.13 produced (tests/parity/optim_fixtures/{steplr,cosine}_*/lrs.npy, written
// by tests/parity/make_optim_fixtures.py) and against the closed forms.
//
// Tolerance: 1e-12 relative. Both sides run the same double recursion
// (PyTorch's chainable get_lr); only libm's cos may differ in the last bit.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "tiny/io.h"
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
constexpr double kPi = 3.14159265358979323846;

Tensor leaf() {
  Tensor p = tiny::zeros({1});
  p.requires_grad_(true);
  return p;
}

// An SGD with one single-parameter group per lr (as the fixture script builds it).
struct Groups {
  std::vector<Tensor> params;
  std::unique_ptr<SGD> opt;
  explicit Groups(const std::vector<double>& lrs) {
    for (size_t g = 0; g < lrs.size(); ++g) params.push_back(leaf());
    opt = std::make_unique<SGD>(std::vector<Tensor>{params[0]}, SGDOptions{lrs[0]});
    for (size_t g = 1; g < lrs.size(); ++g) opt->add_param_group({params[g]}, SGDOptions{lrs[g]});
  }
};

using SchedulerFactory = std::function<std::unique_ptr<LRScheduler>(Optimizer&)>;
struct SchedulerCase {
  std::vector<double> lrs;
  SchedulerFactory make;
};

// Mirrors SCHEDULER_CASES in tests/parity/make_optim_fixtures.py.
const std::map<std::string, SchedulerCase>& scheduler_table() {
  static const std::map<std::string, SchedulerCase> table = {
      {"steplr_gamma_half", {{0.1}, [](Optimizer& o) { return std::make_unique<StepLR>(o, 3, 0.5); }}},
      {"steplr_default_two_groups", {{0.1, 0.03}, [](Optimizer& o) { return std::make_unique<StepLR>(o, 2); }}},
      {"cosine_tmax10", {{0.1}, [](Optimizer& o) { return std::make_unique<CosineAnnealingLR>(o, 10); }}},
      {"cosine_eta_min_past_tmax",
       {{0.1, 0.02}, [](Optimizer& o) { return std::make_unique<CosineAnnealingLR>(o, 5, 0.001); }}},
  };
  return table;
}

}  // namespace

TEST(LrScheduler, TableCoversEveryFixture) {
  std::set<std::string> on_disk, in_table;
  for (const auto& entry : fs::directory_iterator(kOptimFixtures)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("steplr_", 0) == 0 || name.rfind("cosine_", 0) == 0) on_disk.insert(name);
  }
  for (const auto& [name, c] : scheduler_table()) in_table.insert(name);
  EXPECT_EQ(on_disk, in_table);
}

TEST(LrScheduler, MatchesPyTorchSequences) {
  for (const auto& [name, c] : scheduler_table()) {
    SCOPED_TRACE(name);
    const Tensor expected = tiny::io::load_npy(kOptimFixtures + "/" + name + "/lrs.npy");
    ASSERT_EQ(expected.dim(), 2);
    ASSERT_EQ(expected.size(1), static_cast<int64_t>(c.lrs.size()));
    Groups s(c.lrs);
    auto sched = c.make(*s.opt);
    for (int64_t epoch = 0; epoch < expected.size(0); ++epoch) {
      if (epoch > 0) {
        s.opt->step();  // no gradients: nothing to update, as in the script's loop
        sched->step();
      }
      EXPECT_EQ(sched->last_epoch(), epoch);
      const auto want = expected[epoch].to_vector<double>();
      const auto& got = sched->get_last_lr();
      ASSERT_EQ(got.size(), want.size());
      for (size_t g = 0; g < want.size(); ++g) {
        EXPECT_NEAR(got[g], want[g], 1e-12 * std::abs(want[g])) << "epoch " << epoch << " group " << g;
        EXPECT_EQ(s.opt->param_groups()[g].lr(), got[g]) << "the optimizer's lr is the scheduler's";
      }
    }
  }
}

TEST(LrScheduler, StepLRClosedForm) {
  Groups s({0.2});
  StepLR sched(*s.opt, 4, 0.3);
  EXPECT_EQ(sched.base_lrs(), std::vector<double>{0.2});
  for (int epoch = 1; epoch <= 20; ++epoch) {
    sched.step();
    const double closed = 0.2 * std::pow(0.3, epoch / 4);
    EXPECT_NEAR(s.opt->lr(), closed, 1e-12 * closed) << "epoch " << epoch;
  }
}

TEST(LrScheduler, CosineClosedFormAndEtaMinAtTMax) {
  Groups s({0.5});
  CosineAnnealingLR sched(*s.opt, 8, 0.05);
  EXPECT_EQ(sched.get_last_lr(), std::vector<double>{0.5}) << "construction keeps the base lr (epoch 0)";
  for (int epoch = 1; epoch <= 8; ++epoch) {
    sched.step();
    const double closed = 0.05 + (0.5 - 0.05) * (1 + std::cos(kPi * epoch / 8)) / 2;
    EXPECT_NEAR(sched.get_last_lr()[0], closed, 1e-12) << "epoch " << epoch;
  }
  EXPECT_NEAR(s.opt->lr(), 0.05, 1e-15);
}

TEST(LrScheduler, DrivesTheOptimizersUpdates) {
  // SGD with lr 1 halved every epoch: p = 10 - 1 - 0.5 - 0.25 with gradient 1.
  Tensor p = tiny::full({1}, 10.0, tiny::TensorOptions(tiny::kFloat64));
  p.requires_grad_(true);
  SGD opt({p}, SGDOptions{1.0});
  StepLR sched(opt, 1, 0.5);
  for (int epoch = 0; epoch < 3; ++epoch) {
    p.set_grad(tiny::ones({1}, tiny::TensorOptions(tiny::kFloat64)));
    opt.step();
    sched.step();
  }
  EXPECT_DOUBLE_EQ(p.item<double>(), 8.25);
  EXPECT_DOUBLE_EQ(opt.lr(), 0.125);
}

TEST(LrScheduler, InvalidArguments) {
  Groups s({0.1});
  EXPECT_THROW(StepLR(*s.opt, 0), tiny::ValueError);
  EXPECT_THROW(CosineAnnealingLR(*s.opt, 0), tiny::ValueError);
  try {
    StepLR bad(*s.opt, -2);
    FAIL() << "expected an error";
  } catch (const tiny::ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("step_size must be at least 1, got -2"), std::string::npos) << e.what();
  }
}
