// tiny::optim (SGD, Adam, AdamW) and tiny::nn::utils::clip_grad_norm_.
//
// Three kinds of checks:
//  - the update rules against torch.optim 1.13's formulas written out below in
//    double (RefSgd / RefAdam), on float64 parameters (tolerance 1e-12
//    relative: the kernel runs the same operations in the same order in double,
//    so only the last bits may differ), plus a few values worked out by hand;
//  - parity with PyTorch itself on the fixtures of
//    tests/parity/make_optim_fixtures.py (float32, see tests/parity/README.md,
//    "Optimizer fixtures", for the tolerance and why);
//  - the machinery: param groups, zero_grad, state_dict round trips and load
//    errors, option validation, skipped parameters, strided parameters.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "kernels/optimizer_ops.h"
#include "tiny/io.h"
#include "tiny/nn/utils.h"
#include "tiny/ops.h"
#include "tiny/optim/optim.h"
#include "tiny/tensor.h"

#ifndef TINY_PARITY_DIR
#define TINY_PARITY_DIR "tests/parity/fixtures"
#endif

namespace fs = std::filesystem;
using tiny::Tensor;
using namespace tiny::optim;

namespace {

const std::string kOptimFixtures = std::string(TINY_PARITY_DIR) + "/../optim_fixtures";

template <typename ErrorType, typename Fn>
void expect_error(Fn&& fn, const std::string& text) {
  try {
    fn();
    ADD_FAILURE() << "expected an error containing \"" << text << "\"";
  } catch (const ErrorType& e) {
    EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << "message: " << e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "wrong error type; message: " << e.what();
  }
}

Tensor param_from(const std::vector<double>& values, tiny::Dtype dtype = tiny::kFloat64) {
  Tensor p = tiny::from_vector(values).to(dtype);
  p.requires_grad_(true);
  return p;
}

void set_grad(const Tensor& p, const std::vector<double>& g) { p.set_grad(tiny::from_vector(g).to(p.dtype())); }

void expect_near_rel(const std::vector<double>& actual, const std::vector<double>& expected, double rtol,
                     double atol, const std::string& what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  for (size_t i = 0; i < actual.size(); ++i) {
    EXPECT_NEAR(actual[i], expected[i], atol + rtol * std::abs(expected[i])) << what << " element " << i;
  }
}

// ---- the formulas of torch/optim/sgd.py and adam.py / adamw.py (1.13), in double ----

struct RefSgd {
  double lr, momentum = 0, dampening = 0, weight_decay = 0;
  bool nesterov = false, maximize = false;
  std::vector<double> buf;
  void step(std::vector<double>& p, const std::vector<double>& g) {
    const bool first = buf.empty();
    if (momentum != 0 && first) buf.resize(p.size());
    for (size_t i = 0; i < p.size(); ++i) {
      double d_p = maximize ? -g[i] : g[i];
      if (weight_decay != 0) d_p += weight_decay * p[i];
      if (momentum != 0) {
        buf[i] = first ? d_p : buf[i] * momentum + (1 - dampening) * d_p;
        d_p = nesterov ? d_p + momentum * buf[i] : buf[i];
      }
      p[i] -= lr * d_p;
    }
  }
};

struct RefAdam {
  double lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0;
  bool amsgrad = false, maximize = false, decoupled = false;
  std::vector<double> m, v, vmax;
  int step_count = 0;
  void step(std::vector<double>& p, const std::vector<double>& g) {
    if (m.empty()) m.assign(p.size(), 0.0), v.assign(p.size(), 0.0), vmax.assign(p.size(), 0.0);
    ++step_count;
    const double bc1 = 1 - std::pow(beta1, step_count), bc2 = 1 - std::pow(beta2, step_count);
    for (size_t i = 0; i < p.size(); ++i) {
      double grad = maximize ? -g[i] : g[i];
      if (decoupled) p[i] *= 1 - lr * weight_decay;
      else if (weight_decay != 0) grad += weight_decay * p[i];
      m[i] = beta1 * m[i] + (1 - beta1) * grad;
      v[i] = beta2 * v[i] + (1 - beta2) * grad * grad;
      double second = v[i];
      if (amsgrad) second = vmax[i] = std::max(vmax[i], v[i]);
      const double denom = std::sqrt(second) / std::sqrt(bc2) + eps;
      p[i] -= lr / bc1 * (m[i] / denom);
    }
  }
};

// Deterministic gradients for step k (mixed signs and sizes).
std::vector<double> grad_at(int k, size_t n) {
  std::vector<double> g(n);
  for (size_t i = 0; i < n; ++i) g[i] = std::sin(1.7 * static_cast<double>(i) + 0.9 * k) * (1.0 + 0.3 * k);
  return g;
}

const std::vector<double> kInit = {0.5, -1.25, 2.0, 0.0, -0.3, 1.1, 3.5};

}  // namespace

// ============================================================== SGD vs formulas

TEST(OptimSGD, HandComputedSteps) {
  // lr 0.1, momentum 0.9: p = 1, g = 0.5 twice.
  // step 1: buf = 0.5 (no dampening on the first step), p = 1 - 0.05 = 0.95
  // step 2: buf = 0.9 * 0.5 + 0.5 = 0.95, p = 0.95 - 0.095 = 0.855
  Tensor p = param_from({1.0});
  SGD opt({p}, SGDOptions{0.1, 0.9});
  set_grad(p, {0.5});
  opt.step();
  EXPECT_DOUBLE_EQ(p.item<double>(), 0.95);
  EXPECT_DOUBLE_EQ(opt.state(0).buffers.at("momentum_buffer").item<double>(), 0.5);
  opt.step();
  EXPECT_DOUBLE_EQ(p.item<double>(), 0.855);
  EXPECT_DOUBLE_EQ(opt.state(0).buffers.at("momentum_buffer").item<double>(), 0.95);

  // nesterov, momentum 0.5: step 1: buf = 0.5, d_p = 0.5 + 0.5 * 0.5 = 0.75, p = 1 - 0.075
  Tensor q = param_from({1.0});
  SGDOptions o{0.1, 0.5};
  o.nesterov = true;
  SGD nesterov({q}, o);
  set_grad(q, {0.5});
  nesterov.step();
  EXPECT_DOUBLE_EQ(q.item<double>(), 0.925);
}

// PyTorch's optim.SGD(params, 0.1) and Adam(params, 1e-2): a learning rate alone, every other option at its default.
TEST(OptimConstruction, ALearningRateAloneKeepsEveryOtherDefault) {
  Tensor p = param_from({1.0});
  SGD sgd({p}, 0.1);
  EXPECT_DOUBLE_EQ(sgd.options().lr, 0.1);
  EXPECT_DOUBLE_EQ(sgd.options().momentum, 0.0);
  set_grad(p, {0.5});
  sgd.step();
  EXPECT_DOUBLE_EQ(p.item<double>(), 0.95);
  const tiny::optim::AdamOptions adam_defaults;
  const tiny::optim::Adam adam({param_from({1.0})}, 1e-2);
  EXPECT_DOUBLE_EQ(adam.options().lr, 1e-2);
  EXPECT_EQ(adam.options().betas, adam_defaults.betas);
  EXPECT_DOUBLE_EQ(adam.options().eps, adam_defaults.eps);
  const tiny::optim::AdamWOptions adamw_defaults;
  const tiny::optim::AdamW adamw({param_from({1.0})}, 3e-4);
  EXPECT_DOUBLE_EQ(adamw.options().lr, 3e-4);
  EXPECT_DOUBLE_EQ(adamw.options().weight_decay, adamw_defaults.weight_decay);
  const tiny::optim::RMSprop rmsprop({param_from({1.0})}, 1);  // an integer is a learning rate too
  EXPECT_DOUBLE_EQ(rmsprop.options().lr, 1.0);
  // An empty brace is still the default options, never a learning rate of 0.
  const tiny::optim::Adam braced({param_from({1.0})}, {});
  EXPECT_DOUBLE_EQ(braced.options().lr, adam_defaults.lr);
}

TEST(OptimSGD, MatchesFormulaOverOptions) {
  struct Case {
    std::string name;
    SGDOptions options;
  };
  std::vector<Case> cases;
  cases.push_back({"plain", SGDOptions{0.1}});
  cases.push_back({"momentum", SGDOptions{0.05, 0.9}});
  cases.push_back({"momentum_dampening", SGDOptions{0.05, 0.9, 0.25}});
  cases.push_back({"weight_decay", SGDOptions{0.1, 0.0, 0.0, 0.02}});
  cases.push_back({"momentum_weight_decay", SGDOptions{0.05, 0.8, 0.1, 0.01}});
  cases.push_back({"nesterov", SGDOptions{0.05, 0.9, 0.0, 0.01, true}});
  cases.push_back({"maximize", SGDOptions{0.1, 0.0, 0.0, 0.0, false, true}});
  cases.push_back({"maximize_momentum_nesterov", SGDOptions{0.02, 0.7, 0.0, 0.05, true, true}});
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    Tensor p = param_from(kInit);
    SGD opt({p}, c.options);
    RefSgd ref{c.options.lr, c.options.momentum, c.options.dampening, c.options.weight_decay, c.options.nesterov,
               c.options.maximize, {}};
    std::vector<double> expected = kInit;
    for (int k = 0; k < 6; ++k) {
      const auto g = grad_at(k, kInit.size());
      set_grad(p, g);
      opt.step();
      ref.step(expected, g);
      expect_near_rel(p.to_vector<double>(), expected, 1e-12, 1e-14, "param after step " + std::to_string(k + 1));
    }
    if (c.options.momentum != 0) {
      expect_near_rel(opt.state(0).buffers.at("momentum_buffer").to_vector<double>(), ref.buf, 1e-12, 1e-14,
                      "momentum_buffer");
    } else {
      EXPECT_TRUE(opt.state(0).buffers.empty()) << "no momentum buffer without momentum (PyTorch keeps None)";
    }
  }
}

TEST(OptimSGD, Float32ComputesInFloat) {
  // A float32 parameter is updated in float32: close to the double formula
  // (relative 1e-6 over 6 steps), and its state is float32 too.
  Tensor p = param_from(kInit, tiny::kFloat32);
  SGD opt({p}, SGDOptions{0.05, 0.9, 0.0, 0.01, true});
  RefSgd ref{0.05, 0.9, 0.0, 0.01, true, false, {}};
  std::vector<double> expected;
  for (float v : tiny::from_vector(kInit).to(tiny::kFloat32).to_vector<float>()) expected.push_back(v);
  for (int k = 0; k < 6; ++k) {
    auto g = grad_at(k, kInit.size());
    for (double& x : g) x = static_cast<float>(x);  // the float32 gradient the optimizer sees
    set_grad(p, g);
    opt.step();
    ref.step(expected, g);
  }
  EXPECT_EQ(p.dtype(), tiny::kFloat32);
  EXPECT_EQ(opt.state(0).buffers.at("momentum_buffer").dtype(), tiny::kFloat32);
  expect_near_rel(p.to_vector<double>(), expected, 1e-6, 1e-6, "float32 param");
}

// ============================================================== Adam / AdamW vs formulas

TEST(OptimAdam, HandComputedFirstStep) {
  // Step 1: m / (1 - beta1) = g and sqrt(v / (1 - beta2)) = |g|, so p -= lr * g / (|g| + eps).
  Tensor p = param_from({1.0, -2.0});
  Adam opt({p}, AdamOptions{0.1});
  set_grad(p, {0.5, -4.0});
  opt.step();
  const auto v = p.to_vector<double>();
  EXPECT_NEAR(v[0], 1.0 - 0.1 * 0.5 / (0.5 + 1e-8), 1e-15);
  EXPECT_NEAR(v[1], -2.0 + 0.1 * 4.0 / (4.0 + 1e-8), 1e-15);
  EXPECT_EQ(opt.state(0).step, 1);
  EXPECT_NEAR(opt.state(0).buffers.at("exp_avg").to_vector<double>()[0], 0.05, 1e-16);
  EXPECT_NEAR(opt.state(0).buffers.at("exp_avg_sq").to_vector<double>()[1], 0.001 * 16.0, 1e-16);
}

TEST(OptimAdam, MatchesFormulaOverOptions) {
  struct Case {
    std::string name;
    AdamOptions options;
  };
  std::vector<Case> cases;
  cases.push_back({"default_lr", AdamOptions{0.01}});
  cases.push_back({"betas_eps", AdamOptions{0.02, {0.8, 0.95}, 1e-3}});
  cases.push_back({"weight_decay", AdamOptions{0.01, {0.9, 0.999}, 1e-8, 0.1}});
  cases.push_back({"amsgrad", AdamOptions{0.01, {0.9, 0.99}, 1e-8, 0.0, true}});
  cases.push_back({"maximize_amsgrad_wd", AdamOptions{0.01, {0.85, 0.9}, 1e-6, 0.05, true, true}});
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    Tensor p = param_from(kInit);
    Adam opt({p}, c.options);
    RefAdam ref;
    ref.lr = c.options.lr, ref.beta1 = c.options.betas.first, ref.beta2 = c.options.betas.second;
    ref.eps = c.options.eps, ref.weight_decay = c.options.weight_decay, ref.amsgrad = c.options.amsgrad;
    ref.maximize = c.options.maximize;
    std::vector<double> expected = kInit;
    for (int k = 0; k < 7; ++k) {
      // Shrinking gradients late on make amsgrad's max differ from v.
      auto g = grad_at(k, kInit.size());
      if (k >= 4) for (double& x : g) x *= 0.1;
      set_grad(p, g);
      opt.step();
      ref.step(expected, g);
      expect_near_rel(p.to_vector<double>(), expected, 1e-12, 1e-14, "param after step " + std::to_string(k + 1));
    }
    const ParamState& s = opt.state(0);
    EXPECT_EQ(s.step, 7);
    expect_near_rel(s.buffers.at("exp_avg").to_vector<double>(), ref.m, 1e-12, 1e-15, "exp_avg");
    expect_near_rel(s.buffers.at("exp_avg_sq").to_vector<double>(), ref.v, 1e-12, 1e-15, "exp_avg_sq");
    EXPECT_EQ(s.buffers.count("max_exp_avg_sq"), c.options.amsgrad ? 1u : 0u);
    if (c.options.amsgrad) {
      expect_near_rel(s.buffers.at("max_exp_avg_sq").to_vector<double>(), ref.vmax, 1e-12, 1e-15, "max_exp_avg_sq");
      bool some_max_differs = false;
      for (size_t i = 0; i < ref.v.size(); ++i) some_max_differs |= ref.vmax[i] > ref.v[i];
      EXPECT_TRUE(some_max_differs) << "the case should exercise amsgrad's maximum";
    }
  }
}

TEST(OptimAdamW, DecoupledWeightDecayMatchesFormulaAndDiffersFromAdam) {
  for (bool amsgrad : {false, true}) {
    SCOPED_TRACE(amsgrad ? "amsgrad" : "plain");
    AdamWOptions wo{0.01, {0.9, 0.999}, 1e-8, 0.1, amsgrad};
    Tensor pw = param_from(kInit), pa = param_from(kInit);
    AdamW adamw({pw}, wo);
    Adam adam({pa}, AdamOptions{0.01, {0.9, 0.999}, 1e-8, 0.1, amsgrad});
    RefAdam ref;
    ref.lr = 0.01, ref.weight_decay = 0.1, ref.amsgrad = amsgrad, ref.decoupled = true;
    std::vector<double> expected = kInit;
    for (int k = 0; k < 5; ++k) {
      const auto g = grad_at(k, kInit.size());
      set_grad(pw, g);
      set_grad(pa, g);
      adamw.step();
      adam.step();
      ref.step(expected, g);
    }
    expect_near_rel(pw.to_vector<double>(), expected, 1e-12, 1e-14, "AdamW param");
    // Adam puts the decay into the gradient (where the moments normalise it away):
    // the results must differ by far more than rounding.
    double max_diff = 0;
    const auto a = pa.to_vector<double>(), w = pw.to_vector<double>();
    for (size_t i = 0; i < a.size(); ++i) max_diff = std::max(max_diff, std::abs(a[i] - w[i]));
    EXPECT_GT(max_diff, 1e-4);
  }
  // The default weight decay of AdamW is 1e-2, Adam's 0.
  EXPECT_EQ(AdamWOptions{}.weight_decay, 1e-2);
  EXPECT_EQ(AdamOptions{}.weight_decay, 0.0);
  // With weight_decay = 0 the two are the same optimizer, bit for bit.
  Tensor pw = param_from(kInit), pa = param_from(kInit);
  AdamWOptions no_decay;
  no_decay.weight_decay = 0.0;
  AdamW adamw({pw}, no_decay);
  Adam adam({pa});
  for (int k = 0; k < 4; ++k) {
    set_grad(pw, grad_at(k, kInit.size()));
    set_grad(pa, grad_at(k, kInit.size()));
    adamw.step();
    adam.step();
  }
  EXPECT_TRUE(tiny::equal(pw.detach(), pa.detach()));
  EXPECT_EQ(adamw.name(), "AdamW");
  EXPECT_EQ(adam.name(), "Adam");
}

TEST(OptimAdam, LargeParameterSplitIntoChunks) {
  // 100003 elements: several chunks of the thread pool, and a ragged last one.
  const int64_t n = 100003;
  std::vector<double> init(n), g(n);
  for (int64_t i = 0; i < n; ++i) init[i] = std::cos(0.001 * i), g[i] = std::sin(0.37 * i);
  Tensor p = param_from(init);
  Adam opt({p}, AdamOptions{0.01, {0.9, 0.999}, 1e-8, 0.0, true});
  RefAdam ref;
  ref.lr = 0.01, ref.amsgrad = true;
  std::vector<double> expected = init;
  for (int k = 0; k < 2; ++k) {
    set_grad(p, g);
    opt.step();
    ref.step(expected, g);
  }
  expect_near_rel(p.to_vector<double>(), expected, 1e-12, 1e-14, "param");
}

// ============================================================== the CPU's vector loops

// The CPU backend runs its optimizer loops in a copy compiled for the widest
// vector unit the CPU has (AVX2 where present, backend/cpu/optimizer_kernels.cpp).
// Every float32 element must still be exactly the per-element update
// (kernels/optimizer_ops.h) applied one at a time, as this file compiles it for
// baseline x86-64: no fused multiply-add, no reordering, whatever the CPU.
std::vector<float> odd_floats(int64_t n, double phase) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[i] = static_cast<float>(std::sin(phase + 0.731 * static_cast<double>(i)));
  return v;
}

TEST(OptimAdam, EveryFloat32ElementIsBitwiseTheOneAtATimeUpdate) {
  const int64_t n = 1003;  // vector bodies and a scalar tail
  std::vector<float> p_ref = odd_floats(n, 0.1), m_ref(n, 0.0f), v_ref(n, 0.0f);
  Tensor p = tiny::from_vector(p_ref).requires_grad_(true);
  Adam opt({p}, AdamOptions{0.01, {0.9, 0.999}, 1e-8, 0.01, false});
  for (int64_t step = 1; step <= 3; ++step) {
    const std::vector<float> g = odd_floats(n, 0.5 * static_cast<double>(step));
    p.set_grad(tiny::from_vector(g));
    opt.step();
    tiny::kernels::AdamParams k;
    k.lr = 0.01, k.weight_decay = 0.01, k.step = step;
    using Update = tiny::kernels::AdamUpdate<float>;
    const Update update(k);
    tiny::kernels::with_flags<Update::kNumFlags>(update.flags(), [&](auto flags) {
      constexpr int F = decltype(flags)::value;
      for (int64_t i = 0; i < n; ++i) {
        float scratch = 0;
        update.template apply<F>(p_ref[i], g[i], m_ref[i], v_ref[i], scratch);
      }
    });
  }
  const std::vector<float> got = p.to_vector<float>();
  const std::vector<float> m_got = opt.state(0).buffers.at("exp_avg").to_vector<float>();
  const std::vector<float> v_got = opt.state(0).buffers.at("exp_avg_sq").to_vector<float>();
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_EQ(got[i], p_ref[i]) << "param element " << i;
    ASSERT_EQ(m_got[i], m_ref[i]) << "exp_avg element " << i;
    ASSERT_EQ(v_got[i], v_ref[i]) << "exp_avg_sq element " << i;
  }
}

TEST(OptimSGD, EveryFloat32ElementIsBitwiseTheOneAtATimeUpdate) {
  const int64_t n = 1003;
  std::vector<float> p_ref = odd_floats(n, 0.2), b_ref(n, 0.0f);
  Tensor p = tiny::from_vector(p_ref).requires_grad_(true);
  SGD opt({p}, SGDOptions{0.05, 0.9, 0.0, 0.01, true});
  for (int64_t step = 1; step <= 3; ++step) {
    const std::vector<float> g = odd_floats(n, 0.3 * static_cast<double>(step));
    p.set_grad(tiny::from_vector(g));
    opt.step();
    tiny::kernels::SgdParams k;
    k.lr = 0.05, k.momentum = 0.9, k.weight_decay = 0.01, k.nesterov = true, k.first_step = step == 1;
    using Update = tiny::kernels::SgdUpdate<float>;
    const Update update(k);
    tiny::kernels::with_flags<Update::kNumFlags>(update.flags(), [&](auto flags) {
      constexpr int F = decltype(flags)::value;
      for (int64_t i = 0; i < n; ++i) update.template apply<F>(p_ref[i], g[i], b_ref[i]);
    });
  }
  const std::vector<float> got = p.to_vector<float>();
  const std::vector<float> b_got = opt.state(0).buffers.at("momentum_buffer").to_vector<float>();
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_EQ(got[i], p_ref[i]) << "param element " << i;
    ASSERT_EQ(b_got[i], b_ref[i]) << "momentum_buffer element " << i;
  }
}

// ============================================================== parity with PyTorch

namespace {

using OptimizerFactory = std::function<std::unique_ptr<Optimizer>(const Tensor& param)>;

// Mirrors OPTIMIZER_CASES in tests/parity/make_optim_fixtures.py.
const std::map<std::string, OptimizerFactory>& optimizer_table() {
  static const std::map<std::string, OptimizerFactory> table = {
      {"sgd_plain", [](const Tensor& p) { return std::make_unique<SGD>(std::vector<Tensor>{p}, SGDOptions{0.1}); }},
      {"sgd_momentum",
       [](const Tensor& p) { return std::make_unique<SGD>(std::vector<Tensor>{p}, SGDOptions{0.05, 0.9}); }},
      {"sgd_dampening_weight_decay",
       [](const Tensor& p) {
         return std::make_unique<SGD>(std::vector<Tensor>{p}, SGDOptions{0.05, 0.8, 0.3, 0.01});
       }},
      {"sgd_nesterov",
       [](const Tensor& p) {
         return std::make_unique<SGD>(std::vector<Tensor>{p}, SGDOptions{0.05, 0.9, 0.0, 0.001, true});
       }},
      {"sgd_maximize",
       [](const Tensor& p) {
         return std::make_unique<SGD>(std::vector<Tensor>{p}, SGDOptions{0.1, 0.5, 0.0, 0.0, false, true});
       }},
      {"adam_default", [](const Tensor& p) { return std::make_unique<Adam>(std::vector<Tensor>{p}, AdamOptions{0.01}); }},
      {"adam_weight_decay_amsgrad",
       [](const Tensor& p) {
         return std::make_unique<Adam>(std::vector<Tensor>{p}, AdamOptions{0.01, {0.8, 0.99}, 1e-8, 0.1, true});
       }},
      {"adam_maximize_eps",
       [](const Tensor& p) {
         return std::make_unique<Adam>(std::vector<Tensor>{p}, AdamOptions{0.02, {0.9, 0.999}, 1e-3, 0.0, false, true});
       }},
      {"adamw_default",
       [](const Tensor& p) { return std::make_unique<AdamW>(std::vector<Tensor>{p}, AdamWOptions{0.01}); }},
      {"adamw_amsgrad",
       [](const Tensor& p) {
         return std::make_unique<AdamW>(std::vector<Tensor>{p}, AdamWOptions{0.01, {0.8, 0.99}, 1e-8, 0.1, true});
       }},
      {"adamw_maximize",
       [](const Tensor& p) {
         return std::make_unique<AdamW>(std::vector<Tensor>{p},
                                        AdamWOptions{0.02, {0.9, 0.999}, 1e-8, 0.05, false, true});
       }},
  };
  return table;
}

std::set<std::string> fixture_cases(const std::string& prefix_a, const std::string& prefix_b = "",
                                    const std::string& prefix_c = "") {
  std::set<std::string> out;
  for (const auto& entry : fs::directory_iterator(kOptimFixtures)) {
    const std::string name = entry.path().filename().string();
    auto starts = [&](const std::string& p) { return !p.empty() && name.rfind(p, 0) == 0; };
    if (starts(prefix_a) || starts(prefix_b) || starts(prefix_c)) out.insert(name);
  }
  return out;
}

Tensor load(const std::string& c, const std::string& stem) {
  return tiny::io::load_npy(kOptimFixtures + "/" + c + "/" + stem + ".npy");
}

}  // namespace

TEST(OptimParity, TableCoversEveryFixture) {
  std::set<std::string> in_table;
  for (const auto& [name, factory] : optimizer_table()) in_table.insert(name);
  EXPECT_EQ(fixture_cases("sgd_", "adam_", "adamw_"), in_table);
}

// Tolerance: see tests/parity/README.md, "Optimizer fixtures".
TEST(OptimParity, MatchesTorchOptimOnFixtures) {
  constexpr double kRtol = 1e-5, kAtol = 2e-6;
  for (const auto& [name, factory] : optimizer_table()) {
    SCOPED_TRACE(name);
    ASSERT_TRUE(fs::is_directory(kOptimFixtures + "/" + name)) << "missing fixture; run make_optim_fixtures.py";
    const Tensor param0 = load(name, "param0"), grads = load(name, "grads"), expected = load(name, "params");
    ASSERT_EQ(param0.dtype(), tiny::kFloat32);
    Tensor p = param0.clone();
    p.requires_grad_(true);
    auto opt = factory(p);
    for (int64_t k = 0; k < grads.size(0); ++k) {
      p.set_grad(grads[k].contiguous());
      opt->step();
      const auto actual = p.to_vector<float>(), want = expected[k].to_vector<float>();
      ASSERT_EQ(actual.size(), want.size());
      for (size_t i = 0; i < actual.size(); ++i) {
        ASSERT_NEAR(actual[i], want[i], kAtol + kRtol * std::abs(want[i])) << "step " << k + 1 << " element " << i;
      }
    }
  }
}

// ============================================================== machinery

TEST(OptimZeroGrad, SetToNoneAndZero) {
  Tensor a = param_from({1, 2, 3}), b = param_from({4, 5});
  SGD opt({a, b}, SGDOptions{0.1});
  set_grad(a, {1, 1, 1});
  set_grad(b, {2, 2});
  opt.zero_grad();  // default: set_to_none = true
  EXPECT_FALSE(a.grad().defined());
  EXPECT_FALSE(b.grad().defined());

  set_grad(a, {1, 1, 1});
  const Tensor grad_before = a.grad();
  opt.zero_grad(/*set_to_none=*/false);
  ASSERT_TRUE(a.grad().defined());
  EXPECT_EQ(a.grad().to_vector<double>(), (std::vector<double>{0, 0, 0}));
  EXPECT_EQ(grad_before.to_vector<double>(), (std::vector<double>{0, 0, 0})) << "zeroed in place";
  EXPECT_FALSE(b.grad().defined()) << "an absent gradient stays absent";
}

TEST(OptimZeroGrad, GradientsComeFromBackward) {
  // The usual loop: backward fills .grad(), step uses it, zero_grad clears it.
  Tensor w = param_from({1.0, -1.0});
  SGD opt({w}, SGDOptions{0.5});
  for (int k = 0; k < 2; ++k) {
    opt.zero_grad();
    Tensor loss = (w * w).sum();  // grad = 2w
    loss.backward();
    opt.step();  // w -= 0.5 * 2w = 0
  }
  EXPECT_EQ(w.to_vector<double>(), (std::vector<double>{0.0, 0.0}));
}

TEST(OptimSGD, SkipsParametersWithoutGradient) {
  Tensor a = param_from({1, 2}), b = param_from({3, 4});
  SGD sgd({a, b}, SGDOptions{0.1, 0.9});
  set_grad(a, {1, 1});
  sgd.step();
  EXPECT_EQ(b.to_vector<double>(), (std::vector<double>{3, 4}));
  EXPECT_TRUE(sgd.state(1).empty());
  EXPECT_FALSE(sgd.state(0).empty());

  Tensor c = param_from({1, 2}), d = param_from({3, 4});
  Adam adam({c, d});
  set_grad(d, {1, -1});
  adam.step();
  adam.step();
  EXPECT_EQ(c.to_vector<double>(), (std::vector<double>{1, 2}));
  EXPECT_EQ(adam.state(0).step, 0);
  EXPECT_TRUE(adam.state(0).buffers.empty());
  EXPECT_EQ(adam.state(1).step, 2);
}

TEST(OptimSGD, StepBumpsTheParameterVersion) {
  Tensor p = param_from({1, 2});
  SGD opt({p}, SGDOptions{0.1});
  set_grad(p, {1, 1});
  const auto before = p.version();
  opt.step();
  EXPECT_GT(p.version(), before) << "saved tensors must see that the optimizer changed the parameter";
}

TEST(OptimSGD, StridedParameterAndGradient) {
  // A parameter that is a transposed view, with a transposed gradient: same
  // result as with contiguous ones, written back into the view's storage.
  const std::vector<double> values = {1, 2, 3, 4, 5, 6};
  Tensor base = tiny::from_vector(values, {2, 3});
  Tensor strided = base.t();  // [3, 2], not contiguous, a leaf (base needs no grad)
  strided.requires_grad_(true);
  ASSERT_FALSE(strided.is_contiguous());
  Tensor contiguous = strided.detach().contiguous();
  contiguous.requires_grad_(true);
  const Tensor g = tiny::from_vector(std::vector<double>{0.5, -1, 2, 0.25, -0.75, 1.5}, {2, 3}).t();
  for (const bool adam : {false, true}) {
    SCOPED_TRACE(adam ? "Adam" : "SGD");
    std::unique_ptr<Optimizer> o1, o2;
    if (adam) {
      o1 = std::make_unique<Adam>(std::vector<Tensor>{strided}, AdamOptions{0.1});
      o2 = std::make_unique<Adam>(std::vector<Tensor>{contiguous}, AdamOptions{0.1});
    } else {
      o1 = std::make_unique<SGD>(std::vector<Tensor>{strided}, SGDOptions{0.1, 0.9});
      o2 = std::make_unique<SGD>(std::vector<Tensor>{contiguous}, SGDOptions{0.1, 0.9});
    }
    for (int k = 0; k < 3; ++k) {
      strided.set_grad(g);
      contiguous.set_grad(g.contiguous());
      o1->step();
      o2->step();
    }
    EXPECT_EQ(strided.to_vector<double>(), contiguous.to_vector<double>());
    EXPECT_EQ(base.t().to_vector<double>(), contiguous.to_vector<double>()) << "written back into the storage";
  }
}

TEST(OptimConstruction, RejectsBadParameterLists) {
  expect_error<tiny::ValueError>([] { SGD({}, SGDOptions{0.1}); }, "empty parameter list");
  Tensor no_grad = tiny::zeros({3});
  expect_error<tiny::ValueError>([&] { SGD({no_grad}, SGDOptions{0.1}); }, "does not require grad");
  Tensor p = param_from({1, 2});
  expect_error<tiny::ValueError>([&] { SGD({p, p}, SGDOptions{0.1}); }, "same tensor twice");
  Tensor non_leaf = p * 2.0;
  expect_error<tiny::ValueError>([&] { Adam({non_leaf}); }, "non-leaf");
  Tensor q = param_from({3});
  SGD opt({p}, SGDOptions{0.1});
  expect_error<tiny::ValueError>([&] { opt.add_param_group({q, p}, SGDOptions{0.2}); }, "same tensor twice");
  EXPECT_EQ(opt.param_groups().size(), 1u) << "a rejected group is not added";
}

TEST(OptimOptions, InvalidValuesThrowWithTheValue) {
  Tensor p = param_from({1});
  auto sgd = [&](SGDOptions o) { return [o, &p] { SGD({p}, o); }; };
  expect_error<tiny::ValueError>(sgd(SGDOptions{-0.1}), "Invalid learning rate: -0.1");
  expect_error<tiny::ValueError>(sgd(SGDOptions{0.1, -0.5}), "Invalid momentum value: -0.5");
  expect_error<tiny::ValueError>(sgd(SGDOptions{0.1, 0.9, 0.0, -0.01}), "Invalid weight_decay value: -0.01");
  expect_error<tiny::ValueError>(sgd(SGDOptions{0.1, 0.0, 0.0, 0.0, true}),
                                 "Nesterov momentum requires a momentum and zero dampening");
  expect_error<tiny::ValueError>(sgd(SGDOptions{0.1, 0.9, 0.1, 0.0, true}), "dampening=0.1");
  expect_error<tiny::ValueError>(sgd(SGDOptions{}), "learning rate is required");

  auto adam = [&](AdamOptions o) { return [o, &p] { Adam({p}, o); }; };
  expect_error<tiny::ValueError>(adam(AdamOptions{-0.001}), "Invalid learning rate: -0.001");
  expect_error<tiny::ValueError>(adam(AdamOptions{0.001, {1.0, 0.999}}), "Invalid beta parameter at index 0: 1");
  expect_error<tiny::ValueError>(adam(AdamOptions{0.001, {0.9, -0.1}}), "Invalid beta parameter at index 1: -0.1");
  expect_error<tiny::ValueError>(adam(AdamOptions{0.001, {0.9, 0.999}, -1e-8}), "Invalid epsilon value: -1e-08");
  expect_error<tiny::ValueError>(adam(AdamOptions{0.001, {0.9, 0.999}, 1e-8, -0.5}),
                                 "Invalid weight_decay value: -0.5");
  expect_error<tiny::ValueError>([&] { AdamW({p}, AdamWOptions{0.001, {0.9, 0.999}, 1e-8, -0.01}); },
                                 "Invalid weight_decay value: -0.01");
  // Groups added later are checked too, and unknown option names are named.
  SGD opt({p}, SGDOptions{0.1});
  Tensor q = param_from({2});
  expect_error<tiny::ValueError>([&] { opt.add_param_group({q}, {{"lr", -2.0}}); }, "Invalid learning rate: -2");
  expect_error<tiny::ValueError>([&] { opt.add_param_group({q}, {{"betas", 0.9}}); }, "has no option 'betas'");
  expect_error<tiny::ValueError>([&] { opt.set_lr(-1.0); }, "Invalid learning rate: -1");
}

TEST(OptimParamGroups, EachGroupUsesItsOwnOptions) {
  Tensor a = param_from({1.0}), b = param_from({1.0}), c = param_from({1.0});
  SGD opt({a}, SGDOptions{0.1});
  opt.add_param_group({b}, SGDOptions{0.01, 0.9});
  opt.add_param_group({c}, {{"lr", 0.5}});  // the other options from the defaults
  ASSERT_EQ(opt.param_groups().size(), 3u);
  EXPECT_EQ(opt.options(1).momentum, 0.9);
  EXPECT_EQ(opt.options(2).lr, 0.5);
  EXPECT_EQ(opt.options(2).momentum, 0.0);
  EXPECT_EQ(opt.num_params(), 3u);
  for (const Tensor& p : {a, b, c}) set_grad(p, {1.0});
  opt.step();
  EXPECT_DOUBLE_EQ(a.item<double>(), 0.9);
  EXPECT_DOUBLE_EQ(b.item<double>(), 0.99);
  EXPECT_DOUBLE_EQ(c.item<double>(), 0.5);
  EXPECT_TRUE(opt.state(0).empty());
  EXPECT_FALSE(opt.state(1).empty());

  expect_error<tiny::ValueError>([&] { (void)opt.lr(); }, "different learning rates");
  opt.set_lr(0.25);
  EXPECT_EQ(opt.lr(), 0.25);
  for (const auto& g : opt.param_groups()) EXPECT_EQ(g.lr(), 0.25);
  opt.param_groups()[1].set_lr(0.125);
  EXPECT_EQ(opt.param_groups()[1].option("lr"), 0.125);
  expect_error<tiny::IndexError>([&] { (void)opt.param_groups()[0].option("beta1"); }, "no option 'beta1'");
  EXPECT_EQ(opt.defaults().at("lr"), 0.1);
}

// ============================================================== state_dict

namespace {

// Runs `steps` steps of `opt` on `p` with grad_at(k) for k in [first, first + steps).
void run_steps(Optimizer& opt, const Tensor& p, int first, int steps) {
  for (int k = first; k < first + steps; ++k) {
    set_grad(p, grad_at(k, static_cast<size_t>(p.numel())));
    opt.step();
  }
}

}  // namespace

TEST(OptimStateDict, RoundTripContinuesLikeAnUninterruptedRun) {
  using Factory = std::function<std::unique_ptr<Optimizer>(const Tensor&)>;
  const std::map<std::string, Factory> factories = {
      {"SGD nesterov", [](const Tensor& p) {
         return std::make_unique<SGD>(std::vector<Tensor>{p}, SGDOptions{0.05, 0.9, 0.0, 0.01, true});
       }},
      {"Adam amsgrad", [](const Tensor& p) {
         return std::make_unique<Adam>(std::vector<Tensor>{p}, AdamOptions{0.01, {0.9, 0.99}, 1e-8, 0.0, true});
       }},
      {"AdamW", [](const Tensor& p) { return std::make_unique<AdamW>(std::vector<Tensor>{p}, AdamWOptions{0.02}); }},
  };
  for (const auto& [name, make] : factories) {
    SCOPED_TRACE(name);
    for (tiny::Dtype dtype : {tiny::kFloat64, tiny::kFloat32}) {
      Tensor p = param_from(kInit, dtype);
      auto uninterrupted = make(p);
      run_steps(*uninterrupted, p, 0, 3);
      const tiny::StateDict sd = uninterrupted->state_dict();
      Tensor resumed_param = p.detach().clone();
      resumed_param.requires_grad_(true);
      run_steps(*uninterrupted, p, 3, 4);

      // A fresh optimizer with the same hyperparameters except lr, which the state dict restores.
      auto resumed = make(resumed_param);
      resumed->set_lr(123.0);
      resumed->load_state_dict(sd);
      run_steps(*resumed, resumed_param, 3, 4);
      EXPECT_TRUE(tiny::equal(resumed_param.detach(), p.detach())) << "bitwise identical continuation";
      EXPECT_EQ(resumed->state(0).step, uninterrupted->state(0).step);
    }
  }
}

TEST(OptimStateDict, ContentsAndSnapshot) {
  Tensor a = param_from({1, 2, 3}), b = param_from({4, 5});
  Adam opt({a}, AdamOptions{0.001, {0.9, 0.999}, 1e-8, 0.0, true});
  opt.add_param_group({b}, AdamOptions{0.01});
  set_grad(a, {1, 2, 3});
  opt.step();
  opt.step();
  const tiny::StateDict sd = opt.state_dict();
  EXPECT_EQ(sd.metadata.at("optimizer"), "Adam");
  EXPECT_EQ(sd.metadata.at("num_params"), "2");
  EXPECT_EQ(sd.metadata.at("param_groups"), "2");
  EXPECT_EQ(sd.metadata.at("param_groups.0.params"), "0");
  EXPECT_EQ(sd.metadata.at("param_groups.1.params"), "1");
  EXPECT_EQ(sd.metadata.at("param_groups.0.lr"), "0.001");
  EXPECT_EQ(sd.metadata.at("param_groups.1.lr"), "0.01");
  EXPECT_EQ(sd.metadata.at("param_groups.0.beta2"), "0.999");
  EXPECT_EQ(sd.metadata.at("param_groups.0.eps"), "1e-08");
  EXPECT_EQ(sd.metadata.at("param_groups.0.amsgrad"), "1");
  EXPECT_EQ(sd.metadata.at("params.1.shape"), "[2]");
  EXPECT_EQ(sd.metadata.at("state.0.step"), "2");
  EXPECT_EQ(sd.metadata.count("state.1.step"), 0u) << "b never had a gradient";
  EXPECT_TRUE(sd.contains("state.0.exp_avg"));
  EXPECT_TRUE(sd.contains("state.0.exp_avg_sq"));
  EXPECT_TRUE(sd.contains("state.0.max_exp_avg_sq"));
  EXPECT_EQ(sd.size(), 3u);
  // A snapshot: later steps do not change it.
  const auto saved = sd.at("state.0.exp_avg").to_vector<double>();
  opt.step();
  EXPECT_EQ(sd.at("state.0.exp_avg").to_vector<double>(), saved);

  Tensor s = param_from({1.0});
  SGD sgd({s}, SGDOptions{0.1, 0.9});
  set_grad(s, {1.0});
  sgd.step();
  const tiny::StateDict ssd = sgd.state_dict();
  EXPECT_TRUE(ssd.contains("state.0.momentum_buffer"));
  EXPECT_EQ(ssd.metadata.at("param_groups.0.nesterov"), "0");
  EXPECT_EQ(ssd.metadata.count("state.0.step"), 0u);
}

TEST(OptimStateDict, LoadConvertsStateToTheParameterDtype) {
  Tensor p64 = param_from({1, 2});
  SGD a({p64}, SGDOptions{0.1, 0.9});
  set_grad(p64, {1, 1});
  a.step();
  Tensor p32 = param_from({1, 2}, tiny::kFloat32);
  SGD b({p32}, SGDOptions{0.1, 0.9});
  b.load_state_dict(a.state_dict());
  EXPECT_EQ(b.state(0).buffers.at("momentum_buffer").dtype(), tiny::kFloat32);
}

TEST(OptimStateDict, LoadErrorsSayWhatDiffers) {
  Tensor a = param_from({1, 2, 3}), b = param_from({4, 5});
  SGD opt({a, b}, SGDOptions{0.1, 0.9});
  set_grad(a, {1, 1, 1});
  opt.step();
  const tiny::StateDict good = opt.state_dict();

  Tensor c = param_from({1, 2, 3});
  SGD fewer({c}, SGDOptions{0.1});
  expect_error<tiny::ValueError>([&] { fewer.load_state_dict(good); }, "different number of parameters: 2 saved, 1");

  Tensor d = param_from({1, 2, 3}), e = param_from({4, 5, 6});
  SGD reshaped({d, e}, SGDOptions{0.1});
  expect_error<tiny::ValueError>([&] { reshaped.load_state_dict(good); },
                                 "parameter 1 has shape [2] in the state dict but [3]");

  Tensor f = param_from({1, 2, 3}), g = param_from({4, 5});
  SGD grouped({f}, SGDOptions{0.1});
  grouped.add_param_group({g}, SGDOptions{0.1});
  expect_error<tiny::ValueError>([&] { grouped.load_state_dict(good); }, "different number of parameter groups");

  Adam adam({f, g});
  expect_error<tiny::ValueError>([&] { adam.load_state_dict(good); }, "saved by SGD, but this optimizer is Adam");

  Tensor h = param_from({1, 2, 3}), i = param_from({4, 5});
  SGD target({h, i}, SGDOptions{0.3});
  tiny::StateDict renamed = good;
  renamed.metadata.erase("param_groups.0.dampening");
  renamed.metadata["param_groups.0.damping"] = "0";
  expect_error<tiny::ValueError>([&] { target.load_state_dict(renamed); }, "(missing: dampening) (unexpected: damping)");

  tiny::StateDict bad_value = good;
  bad_value.metadata["param_groups.0.momentum"] = "-1";
  expect_error<tiny::ValueError>([&] { target.load_state_dict(bad_value); }, "Invalid momentum value: -1");

  tiny::StateDict bad_shape = good;
  bad_shape.metadata["params.0.shape"] = "[3]";  // keep the metadata consistent, break the tensor
  tiny::StateDict wrong_tensor;
  wrong_tensor.metadata = good.metadata;
  wrong_tensor.insert("state.0.momentum_buffer", tiny::zeros({4}, tiny::TensorOptions(tiny::kFloat64)));
  expect_error<tiny::ValueError>([&] { target.load_state_dict(wrong_tensor); },
                                 "'state.0.momentum_buffer' has shape [4] but parameter 0 has shape [3]");
  tiny::StateDict unknown_state;
  unknown_state.metadata = good.metadata;
  unknown_state.insert("state.1.exp_avg", tiny::zeros({2}, tiny::TensorOptions(tiny::kFloat64)));
  expect_error<tiny::ValueError>([&] { target.load_state_dict(unknown_state); }, "keeps no state named 'exp_avg'");

  // A failed load changes nothing.
  EXPECT_EQ(target.lr(), 0.3);
  EXPECT_TRUE(target.state(0).empty());
  target.load_state_dict(good);
  EXPECT_EQ(target.lr(), 0.1);
  EXPECT_FALSE(target.state(0).empty());
}

// ============================================================== float64 end to end

TEST(OptimFloat64, SgdAndAdamKeepFloat64) {
  Tensor p = param_from({1e-9, 1.0});  // a value float32 would round
  SGD sgd({p}, SGDOptions{1e-10, 0.9});
  set_grad(p, {1.0, 1.0});
  sgd.step();
  EXPECT_EQ(p.dtype(), tiny::kFloat64);
  EXPECT_DOUBLE_EQ(p.to_vector<double>()[0], 1e-9 - 1e-10);
  EXPECT_EQ(sgd.state(0).buffers.at("momentum_buffer").dtype(), tiny::kFloat64);

  Tensor q = param_from({0.1, 0.2});
  Adam adam({q});
  set_grad(q, {1.0, -1.0});
  adam.step();
  EXPECT_EQ(adam.state(0).buffers.at("exp_avg_sq").dtype(), tiny::kFloat64);
  EXPECT_NEAR(q.to_vector<double>()[0], 0.1 - 1e-3 / (1.0 + 1e-8), 1e-17);
}

// ============================================================== clip_grad_norm_

namespace {
Tensor with_grad(const std::vector<double>& grad, tiny::Dtype dtype = tiny::kFloat32) {
  Tensor p = tiny::zeros({static_cast<int64_t>(grad.size())}, tiny::TensorOptions(dtype));
  p.requires_grad_(true);
  p.set_grad(tiny::from_vector(grad).to(dtype));
  return p;
}
}  // namespace

TEST(ClipGrad, TwoNormScalesInPlace) {
  Tensor a = with_grad({3, 4}, tiny::kFloat64), b = with_grad({0, 12}, tiny::kFloat64);
  Tensor none = tiny::zeros({3});
  none.requires_grad_(true);  // no gradient: skipped
  const Tensor grad_a = a.grad();
  const Tensor total = tiny::nn::utils::clip_grad_norm_({a, none, b}, 6.5);
  EXPECT_EQ(total.dim(), 0);
  EXPECT_EQ(total.dtype(), tiny::kFloat64);
  EXPECT_DOUBLE_EQ(total.item<double>(), 13.0);  // sqrt(9 + 16 + 144)
  const double coef = 6.5 / (13.0 + 1e-6);
  EXPECT_DOUBLE_EQ(grad_a.to_vector<double>()[0], 3 * coef) << "the gradient tensor itself is scaled";
  EXPECT_TRUE(a.grad().is_same(grad_a));
  EXPECT_DOUBLE_EQ(b.grad().to_vector<double>()[1], 12 * coef);
  EXPECT_FALSE(none.grad().defined());
}

TEST(ClipGrad, InfNormIsTheLargestMagnitude) {
  Tensor a = with_grad({0.5, -3.0, 1.0}), b = with_grad({2.0});
  const Tensor total = tiny::nn::utils::clip_grad_norm_({a, b}, 1.5, INFINITY);
  EXPECT_FLOAT_EQ(total.item<float>(), 3.0f);
  const float coef = 1.5f / (3.0f + 1e-6f);
  EXPECT_FLOAT_EQ(a.grad().to_vector<float>()[1], -3.0f * coef);
  EXPECT_FLOAT_EQ(b.grad().to_vector<float>()[0], 2.0f * coef);
}

TEST(ClipGrad, NoClippingBelowMaxNorm) {
  const std::vector<double> g = {0.1, -0.2, 0.3};
  Tensor a = with_grad(g);
  const auto before = a.grad().to_vector<float>();
  const Tensor total = tiny::nn::utils::clip_grad_norm_({a}, 1.0);
  EXPECT_NEAR(total.item<float>(), std::sqrt(0.14), 1e-7);
  EXPECT_EQ(a.grad().to_vector<float>(), before) << "coef >= 1: values unchanged, bit for bit";
  // A norm equal to max_norm is still scaled, by max_norm / (max_norm + 1e-6), just below 1.
  Tensor b = with_grad({3, 4}, tiny::kFloat64);
  tiny::nn::utils::clip_grad_norm_({b}, 5.0);
  EXPECT_DOUBLE_EQ(b.grad().to_vector<double>()[0], 3 * 5.0 / (5.0 + 1e-6));
}

TEST(ClipGrad, OtherNormsAndNoGradients) {
  Tensor a = with_grad({1, -2}, tiny::kFloat64), b = with_grad({-3}, tiny::kFloat64);
  EXPECT_DOUBLE_EQ(tiny::nn::utils::clip_grad_norm_({a, b}, 100.0, 1.0).item<double>(), 6.0);
  EXPECT_NEAR(tiny::nn::utils::clip_grad_norm_({a, b}, 100.0, 3.0).item<double>(), std::cbrt(36.0), 1e-12);
  Tensor none = tiny::zeros({2});
  none.requires_grad_(true);
  const Tensor zero = tiny::nn::utils::clip_grad_norm_({none}, 1.0);
  EXPECT_EQ(zero.dim(), 0);
  EXPECT_EQ(zero.item<float>(), 0.0f);
  expect_error<tiny::ValueError>([&] { tiny::nn::utils::clip_grad_norm_({a}, 1.0, -1.0); }, "norm_type");
}

TEST(ClipGrad, MatchesPyTorchOnFixtures) {
  const std::map<std::string, std::pair<double, double>> table = {
      {"clip_l2", {1.0, 2.0}},
      {"clip_l2_no_clipping", {100.0, 2.0}},
      {"clip_inf", {0.5, INFINITY}},
      {"clip_l1", {2.0, 1.0}},
  };
  std::set<std::string> in_table;
  for (const auto& [name, args] : table) in_table.insert(name);
  EXPECT_EQ(fixture_cases("clip_"), in_table);
  for (const auto& [name, args] : table) {
    SCOPED_TRACE(name);
    Tensor p1 = tiny::zeros({3, 4}), p2 = tiny::zeros({5}), p3 = tiny::zeros({2});
    for (Tensor* p : {&p1, &p2, &p3}) p->requires_grad_(true);
    p1.set_grad(load(name, "g1"));
    p2.set_grad(load(name, "g2"));
    const Tensor total = tiny::nn::utils::clip_grad_norm_({p1, p3, p2}, args.first, args.second);
    const float want = load(name, "total_norm").item<float>();
    EXPECT_NEAR(total.item<float>(), want, 1e-5 * std::abs(want));
    EXPECT_TRUE(tiny::allclose(p1.grad(), load(name, "g1_clipped"), 1e-5, 1e-6));
    EXPECT_TRUE(tiny::allclose(p2.grad(), load(name, "g2_clipped"), 1e-5, 1e-6));
  }
}
