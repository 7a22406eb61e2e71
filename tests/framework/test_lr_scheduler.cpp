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

// ===================================================== issue 23: the other schedules
//
// lambdalr_*, linearlr_*, multisteplr_*, onecycle_*, sequentiallr_* and plateau_*
// fixtures (make_optim_fixtures.py, MORE_SCHEDULER_CASES and PLATEAU_CASES).
// Tolerance: 1e-12 relative, as above (the same double arithmetic; libm's cos).

namespace {

// The optimizer the fixture script builds: one single-parameter group per lr.
std::unique_ptr<Optimizer> make_optimizer(const std::string& kind, const std::vector<double>& lrs,
                                          std::vector<Tensor>& params) {
  params.clear();
  for (size_t g = 0; g < lrs.size(); ++g) params.push_back(leaf());
  std::unique_ptr<Optimizer> opt;
  if (kind == "sgd") {
    auto sgd = std::make_unique<SGD>(std::vector<Tensor>{params[0]}, SGDOptions{lrs[0], 0.9});
    for (size_t g = 1; g < lrs.size(); ++g) sgd->add_param_group({params[g]}, SGDOptions{lrs[g], 0.9});
    opt = std::move(sgd);
  } else if (kind == "adam") {
    auto adam = std::make_unique<Adam>(std::vector<Tensor>{params[0]}, AdamOptions{lrs[0]});
    for (size_t g = 1; g < lrs.size(); ++g) adam->add_param_group({params[g]}, AdamOptions{lrs[g]});
    opt = std::move(adam);
  } else {
    auto rms = std::make_unique<RMSprop>(std::vector<Tensor>{params[0]}, RMSpropOptions{lrs[0], 0.99, 1e-8, 0, 0.5});
    for (size_t g = 1; g < lrs.size(); ++g) rms->add_param_group({params[g]}, RMSpropOptions{lrs[g], 0.99, 1e-8, 0, 0.5});
    opt = std::move(rms);
  }
  return opt;
}

std::vector<double> momenta(const Optimizer& opt) {
  std::vector<double> out;
  for (const ParamGroup& g : opt.param_groups()) out.push_back(g.options.count("beta1") ? g.option("beta1") : g.option("momentum"));
  return out;
}

struct MoreCase {
  std::vector<double> lrs;
  std::string kind;
  SchedulerFactory make;
};

using LinearPtr = std::shared_ptr<LRScheduler>;

// Mirrors MORE_SCHEDULER_CASES in tests/parity/make_optim_fixtures.py.
const std::map<std::string, MoreCase>& more_table() {
  static const std::map<std::string, MoreCase> table = {
      {"lambdalr_two_groups",
       {{0.1, 0.05}, "sgd", [](Optimizer& o) {
          return std::make_unique<LambdaLR>(
              o, std::vector<LrLambda>{[](int64_t e) { return std::pow(0.95, static_cast<double>(e)); },
                                       [](int64_t e) { return std::min(1.0, static_cast<double>(e + 1) / 4); }});
        }}},
      {"lambdalr_one_function",
       {{0.1, 0.2}, "sgd", [](Optimizer& o) {
          return std::make_unique<LambdaLR>(o, [](int64_t e) { return 1.0 / static_cast<double>(1 + e); });
        }}},
      {"linearlr_default", {{0.1}, "sgd", [](Optimizer& o) { return std::make_unique<LinearLR>(o); }}},
      {"linearlr_warmup", {{0.1, 0.03}, "sgd", [](Optimizer& o) { return std::make_unique<LinearLR>(o, 0.1, 1.0, 4); }}},
      {"linearlr_decay", {{0.5}, "sgd", [](Optimizer& o) { return std::make_unique<LinearLR>(o, 1.0, 0.2, 6); }}},
      {"multisteplr_repeated",
       {{0.1, 0.3}, "sgd", [](Optimizer& o) {
          return std::make_unique<MultiStepLR>(o, std::vector<int64_t>{2, 5, 5, 9}, 0.5);
        }}},
      {"multisteplr_default",
       {{0.1}, "sgd", [](Optimizer& o) { return std::make_unique<MultiStepLR>(o, std::vector<int64_t>{3, 6}); }}},
      {"onecycle_cos_sgd",
       {{0.01}, "sgd", [](Optimizer& o) {
          OneCycleLROptions opts;
          opts.total_steps = 20;
          return std::make_unique<OneCycleLR>(o, 0.1, opts);
        }}},
      {"onecycle_linear_adam",
       {{0.001, 0.001}, "adam", [](Optimizer& o) {
          OneCycleLROptions opts;
          opts.total_steps = 17;
          opts.anneal_strategy = "linear";
          opts.pct_start = 0.25;
          return std::make_unique<OneCycleLR>(o, std::vector<double>{0.01, 0.02}, opts);
        }}},
      {"onecycle_three_phase",
       {{0.01}, "sgd", [](Optimizer& o) {
          OneCycleLROptions opts;
          opts.epochs = 3;
          opts.steps_per_epoch = 7;
          opts.three_phase = true;
          opts.div_factor = 10.0;
          opts.final_div_factor = 100.0;
          opts.base_momentum = 0.8;
          opts.max_momentum = 0.9;
          return std::make_unique<OneCycleLR>(o, 0.2, opts);
        }}},
      {"onecycle_no_momentum_rmsprop",
       {{0.01}, "rmsprop", [](Optimizer& o) {
          OneCycleLROptions opts;
          opts.total_steps = 12;
          opts.cycle_momentum = false;
          opts.pct_start = 0.5;
          return std::make_unique<OneCycleLR>(o, 0.05, opts);
        }}},
      {"onecycle_cos_rmsprop_momentum",
       {{0.01}, "rmsprop", [](Optimizer& o) {
          OneCycleLROptions opts;
          opts.total_steps = 10;
          return std::make_unique<OneCycleLR>(o, 0.05, opts);
        }}},
      {"sequentiallr_warmup_cosine",
       {{0.1, 0.02}, "sgd", [](Optimizer& o) {
          std::vector<LinearPtr> s = {std::make_shared<LinearLR>(o, 0.1, 1.0, 3),
                                      std::make_shared<CosineAnnealingLR>(o, 8)};
          return std::make_unique<SequentialLR>(o, s, std::vector<int64_t>{3});
        }}},
      {"sequentiallr_three",
       {{0.1}, "sgd", [](Optimizer& o) {
          std::vector<LinearPtr> s = {
              std::make_shared<LambdaLR>(o, [](int64_t e) { return 0.5 + 0.1 * static_cast<double>(e); }),
              std::make_shared<StepLR>(o, 2, 0.5),
              std::make_shared<MultiStepLR>(o, std::vector<int64_t>{1, 3}, 0.3)};
          return std::make_unique<SequentialLR>(o, s, std::vector<int64_t>{4, 9});
        }}},
  };
  return table;
}

void expect_row(const std::vector<double>& got, const Tensor& want_row, const std::string& what) {
  const auto want = want_row.to_vector<double>();
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t g = 0; g < want.size(); ++g) EXPECT_NEAR(got[g], want[g], 1e-12 * std::abs(want[g])) << what << " group " << g;
}

std::set<std::string> on_disk_with(const std::vector<std::string>& prefixes) {
  std::set<std::string> out;
  for (const auto& entry : fs::directory_iterator(kOptimFixtures)) {
    const std::string name = entry.path().filename().string();
    for (const auto& p : prefixes)
      if (name.rfind(p, 0) == 0) out.insert(name);
  }
  return out;
}

}  // namespace

TEST(LrSchedulerMore, TableCoversEveryFixture) {
  std::set<std::string> in_table;
  for (const auto& [name, c] : more_table()) in_table.insert(name);
  EXPECT_EQ(on_disk_with({"lambdalr_", "linearlr_", "multisteplr_", "onecycle_", "sequentiallr_"}), in_table);
}

TEST(LrSchedulerMore, MatchesPyTorchLrAndMomentumSequences) {
  for (const auto& [name, c] : more_table()) {
    SCOPED_TRACE(name);
    const Tensor lrs = tiny::io::load_npy(kOptimFixtures + "/" + name + "/lrs.npy");
    const Tensor moms = tiny::io::load_npy(kOptimFixtures + "/" + name + "/momenta.npy");
    std::vector<Tensor> params;
    auto opt = make_optimizer(c.kind, c.lrs, params);
    auto sched = c.make(*opt);
    for (int64_t e = 0; e < lrs.size(0); ++e) {
      if (e > 0) {
        opt->step();
        sched->step();
      }
      expect_row(sched->get_last_lr(), lrs[e], "lr at epoch " + std::to_string(e));
      expect_row(momenta(*opt), moms[e], "momentum at epoch " + std::to_string(e));
    }
  }
}

// Saved half way (scheduler and optimizer state dicts), restored into freshly
// built ones, the run goes on exactly as PyTorch's restored run (lrs_resumed.npy).
TEST(LrSchedulerMore, StateDictRoundTripMatchesPyTorchsResumedRun) {
  for (const auto& [name, c] : more_table()) {
    SCOPED_TRACE(name);
    const Tensor lrs = tiny::io::load_npy(kOptimFixtures + "/" + name + "/lrs_resumed.npy");
    const int64_t epochs = lrs.size(0) - 1, split = epochs / 2;
    std::vector<Tensor> params;
    auto opt = make_optimizer(c.kind, c.lrs, params);
    auto sched = c.make(*opt);
    for (int64_t e = 1; e <= epochs; ++e) {
      opt->step();
      sched->step();
      if (e == split) {
        const tiny::StateDict sd_sched = sched->state_dict(), sd_opt = opt->state_dict();
        EXPECT_EQ(sd_sched.metadata.at("scheduler"), sched->name());
        sched.reset();
        opt = make_optimizer(c.kind, c.lrs, params);
        sched = c.make(*opt);
        opt->load_state_dict(sd_opt);
        sched->load_state_dict(sd_sched);
        EXPECT_EQ(sched->last_epoch(), split);
      }
      expect_row(sched->get_last_lr(), lrs[e], "lr at epoch " + std::to_string(e));
    }
  }
}

namespace {
struct PlateauCase {
  std::vector<double> lrs;
  ReduceLROnPlateauOptions options;
};

// Mirrors PLATEAU_CASES in tests/parity/make_optim_fixtures.py.
const std::map<std::string, PlateauCase>& plateau_table() {
  static const std::map<std::string, PlateauCase> table = [] {
    std::map<std::string, PlateauCase> t;
    ReduceLROnPlateauOptions a;
    a.patience = 2;
    t["plateau_min_rel"] = {{0.1}, a};
    ReduceLROnPlateauOptions b;
    b.patience = 1;
    b.threshold = 0.01;
    b.threshold_mode = "abs";
    b.cooldown = 2;
    b.factor = 0.5;
    t["plateau_min_abs_cooldown"] = {{0.1, 0.05}, b};
    ReduceLROnPlateauOptions c;
    c.mode = "max";
    c.patience = 1;
    c.factor = 0.3;
    c.min_lr = {0.01, 0.004};
    t["plateau_max_rel_min_lr"] = {{0.1, 0.05}, c};
    ReduceLROnPlateauOptions d;
    d.mode = "max";
    d.patience = 0;
    d.threshold = 0.005;
    d.threshold_mode = "abs";
    d.factor = 0.5;
    d.eps = 0.004;
    d.min_lr = {0.001};
    t["plateau_max_abs_eps"] = {{0.1}, d};
    return t;
  }();
  return table;
}
}  // namespace

TEST(ReduceLROnPlateauParity, MatchesPyTorchIncludingANanMetricAndAStateDictRoundTrip) {
  std::set<std::string> in_table;
  for (const auto& [name, c] : plateau_table()) in_table.insert(name);
  EXPECT_EQ(on_disk_with({"plateau_"}), in_table);
  for (const auto& [name, c] : plateau_table()) {
    SCOPED_TRACE(name);
    const Tensor lrs = tiny::io::load_npy(kOptimFixtures + "/" + name + "/lrs.npy");
    const auto metrics = tiny::io::load_npy(kOptimFixtures + "/" + name + "/metrics.npy").to_vector<double>();
    for (bool resume : {false, true}) {
      std::vector<Tensor> params;
      auto opt = make_optimizer("sgd", c.lrs, params);
      auto sched = std::make_unique<ReduceLROnPlateau>(*opt, c.options);
      expect_row(sched->get_last_lr(), lrs[0], "before any step");
      for (size_t e = 0; e < metrics.size(); ++e) {
        opt->step();
        sched->step(metrics[e]);
        if (resume && e + 1 == metrics.size() / 2) {
          const tiny::StateDict sd = sched->state_dict(), so = opt->state_dict();
          sched.reset();
          opt = make_optimizer("sgd", c.lrs, params);
          sched = std::make_unique<ReduceLROnPlateau>(*opt, c.options);
          opt->load_state_dict(so);
          sched->load_state_dict(sd);
        }
        expect_row(sched->get_last_lr(), lrs[static_cast<int64_t>(e) + 1],
                   "epoch " + std::to_string(e + 1) + (resume ? " (resumed)" : ""));
      }
    }
  }
}

TEST(LrSchedulerMore, BadArgumentsSayWhatAndHowToFix) {
  auto check = [](const std::function<void()>& fn, const std::string& part) {
    try {
      fn();
      ADD_FAILURE() << "expected an error containing \"" << part << "\"";
    } catch (const tiny::ValueError& e) {
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
    }
  };
  Groups s({0.1, 0.05});
  Optimizer& o = *s.opt;
  check([&] { LambdaLR(o, std::vector<LrLambda>{[](int64_t) { return 1.0; }}); }, "Expected 2 lr_lambdas, but got 1");
  check([&] { LambdaLR(o, LrLambda()); }, "lr_lambda 0 is empty");
  check([&] { LinearLR(o, 0.0); }, "Starting multiplicative factor expected to be greater than 0");
  check([&] { LinearLR(o, 1.5); }, "start_factor=1.5");
  check([&] { LinearLR(o, 0.5, -0.1); }, "Ending multiplicative factor expected to be between 0 and 1, got end_factor=-0.1");
  check([&] { LinearLR(o, 0.5, 1.0, 0); }, "total_iters must be at least 1, got 0");
  OneCycleLROptions none;
  check([&] { OneCycleLR(o, 0.1, none); }, "You must define either total_steps OR (epochs AND steps_per_epoch)");
  OneCycleLROptions neg;
  neg.total_steps = -5;
  check([&] { OneCycleLR(o, 0.1, neg); }, "Expected positive integer total_steps, but got -5");
  OneCycleLROptions ep;
  ep.epochs = 3;
  check([&] { OneCycleLR(o, 0.1, ep); }, "Expected positive integer steps_per_epoch, but got 0");
  OneCycleLROptions bad;
  bad.total_steps = 10;
  bad.pct_start = 1.5;
  check([&] { OneCycleLR(o, 0.1, bad); }, "Expected float between 0 and 1 pct_start, but got 1.5");
  bad.pct_start = 0.3;
  bad.anneal_strategy = "exp";
  check([&] { OneCycleLR(o, 0.1, bad); }, "anneal_strategy must by one of 'cos' or 'linear', instead got exp");
  bad.anneal_strategy = "cos";
  check([&] { OneCycleLR(o, std::vector<double>{0.1, 0.2, 0.3}, bad); }, "expected 2 values for max_lr, got 3");
  bad.div_factor = 0;
  check([&] { OneCycleLR(o, 0.1, bad); }, "div_factor and final_div_factor must be > 0");
  // Stepping past total_steps: PyTorch's message, and nothing changes.
  {
    Groups t({0.1});
    OneCycleLROptions few;
    few.total_steps = 3;
    OneCycleLR sched(*t.opt, 0.1, few);
    for (int i = 0; i < 3; ++i) sched.step();
    const double lr = t.opt->lr();
    check([&] { sched.step(); }, "Tried to step 5 times. The specified number of total steps is 3");
    EXPECT_EQ(t.opt->lr(), lr);
    EXPECT_EQ(sched.last_epoch(), 3);
  }
  // cycle_momentum on an optimizer without momentum: a hand-made optimizer with only "lr".
  struct Plain : Optimizer {
    explicit Plain(std::vector<Tensor> p) : Optimizer(std::move(p), {{"lr", 0.1}}) {}
    void step() override {}
    std::string name() const override { return "Plain"; }
    std::vector<std::string> state_names() const override { return {}; }
    void check_options(const OptionMap&) const override {}
  };
  Plain plain({leaf()});
  OneCycleLROptions cyc;
  cyc.total_steps = 5;
  check([&] { OneCycleLR(plain, 0.1, cyc); }, "optimizer must support momentum with `cycle_momentum` option enabled");
  // SequentialLR: schedulers on another optimizer, wrong number of milestones.
  Groups other({0.1, 0.05});
  auto mine = std::make_shared<StepLR>(o, 2);
  auto theirs = std::make_shared<StepLR>(*other.opt, 2);
  check([&] { SequentialLR(o, {mine, theirs}, {3}); },
        "Sequential Schedulers expects all schedulers to belong to the same optimizer, but got schedulers at index 1");
  check([&] { SequentialLR(o, {mine, std::make_shared<StepLR>(o, 3)}, {}); },
        "number of schedulers 2 and the number of milestones to be equal to 0");
  // ReduceLROnPlateau.
  ReduceLROnPlateauOptions p;
  p.factor = 1.0;
  check([&] { ReduceLROnPlateau(o, p); }, "Factor should be < 1.0.");
  p = {};
  p.mode = "maximum";
  check([&] { ReduceLROnPlateau(o, p); }, "mode maximum is unknown!");
  p = {};
  p.threshold_mode = "relative";
  check([&] { ReduceLROnPlateau(o, p); }, "threshold mode relative is unknown!");
  p = {};
  p.min_lr = {0.1, 0.2, 0.3};
  check([&] { ReduceLROnPlateau(o, p); }, "expected 2 min_lrs, got 3");
  p = {};
  p.patience = -1;
  check([&] { ReduceLROnPlateau(o, p); }, "patience must be >= 0, got -1");
  ReduceLROnPlateau plateau(o);
  check([&] { plateau.step(); }, "missing 1 required positional argument: 'metrics'");
  // state dicts of another kind of scheduler, or for another number of groups.
  StepLR step(o, 2);
  check([&] { step.load_state_dict(plateau.state_dict()); }, "saved by a ReduceLROnPlateau but this scheduler is a StepLR");
  Groups one({0.1});
  StepLR single(*one.opt, 2);
  check([&] { step.load_state_dict(single.state_dict()); }, "drove 1 param groups but this one drives 2");
  check([&] { plateau.load_state_dict(step.state_dict()); }, "saved by a StepLR");
}

TEST(LrSchedulerMore, SecondSchedulerStartsFromInitialLr) {
  // PyTorch's group.setdefault('initial_lr'): a scheduler built after another one
  // changed the lr still takes the original lr as its base.
  Groups s({0.1});
  LinearLR warm(*s.opt, 0.5, 1.0, 2);
  EXPECT_DOUBLE_EQ(s.opt->lr(), 0.05);
  StepLR step(*s.opt, 3);
  EXPECT_EQ(step.base_lrs(), std::vector<double>{0.1});
  EXPECT_EQ(s.opt->param_groups()[0].initial_lr, 0.1);
}
