// Autograd behaviour: accumulation, graph lifetime, grad mode, hooks, errors,
// and the thread-local state carried into worker threads.
//
// Expected gradients are worked out by hand from the inputs' values (in
// double), never copied from tiny's output.

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "tiny/autograd.h"
#include "tiny/nn/functional.h"
#include "tiny/ops.h"

namespace {

using tiny::Tensor;
namespace F = tiny::nn::functional;

std::vector<double> vec(const Tensor& t) { return t.to(tiny::kFloat64).to_vector<double>(); }

Tensor leaf(const std::vector<double>& values, const tiny::IntArrayRef& shape) {
  Tensor t = tiny::tensor(values, shape, tiny::kFloat64);
  t.requires_grad_(true);
  return t;
}

void expect_values(const Tensor& t, const std::vector<double>& expected, double tol = 1e-12) {
  ASSERT_TRUE(t.defined()) << "tensor is undefined";
  const std::vector<double> got = vec(t);
  ASSERT_EQ(got.size(), expected.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], expected[i], tol) << "element " << i;
}

// Runs `f` and expects a tiny::Error whose message contains `text`.
template <typename Fn>
void expect_error_containing(Fn&& f, const std::string& text) {
  try {
    f();
    ADD_FAILURE() << "expected an error containing \"" << text << "\", nothing was thrown";
  } catch (const tiny::Error& e) {
    EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << "message was: " << e.what();
  }
}

const std::vector<double> kX = {0.5, -1.25, 2.0};

// ---- accumulation and explicit gradients ----------------------------------------------

TEST(Autograd, GradientsAccumulateAcrossBackwardCalls) {
  Tensor x = leaf(kX, {3});
  (x * x).sum().backward();
  expect_values(x.grad(), {2 * kX[0], 2 * kX[1], 2 * kX[2]});
  (x * x).sum().backward();  // a new graph: adds into the same .grad()
  expect_values(x.grad(), {4 * kX[0], 4 * kX[1], 4 * kX[2]});
  (x * 3.0).sum().backward();
  expect_values(x.grad(), {4 * kX[0] + 3, 4 * kX[1] + 3, 4 * kX[2] + 3});
}

TEST(Autograd, SetGradUndefinedClears) {
  Tensor x = leaf(kX, {3});
  (x * x).sum().backward();
  ASSERT_TRUE(x.grad().defined());
  x.set_grad(Tensor());
  EXPECT_FALSE(x.grad().defined());
  (x * x).sum().backward();  // starts again from nothing, not from 2x
  expect_values(x.grad(), {2 * kX[0], 2 * kX[1], 2 * kX[2]});
}

TEST(Autograd, FirstGradIsNotAliasedWithUserTensors) {
  // The explicit gradient given to backward must not become .grad() itself:
  // a later accumulation would then write into the caller's tensor.
  Tensor x = leaf(kX, {3});
  Tensor g = tiny::tensor({1.0, 2.0, 3.0}, tiny::kFloat64);
  x.clone().backward(g);
  expect_values(x.grad(), {1, 2, 3});
  x.clone().backward(g);
  expect_values(x.grad(), {2, 4, 6});
  expect_values(g, {1, 2, 3});
}

TEST(Autograd, NonScalarBackwardWithoutGradientThrows) {
  Tensor x = leaf(kX, {3});
  Tensor y = x * 2.0;
  expect_error_containing([&] { y.backward(); }, "grad can be implicitly created only for scalar outputs");
  EXPECT_FALSE(x.grad().defined());
  // One element is enough, whatever the shape (as in PyTorch).
  Tensor one = (x * x).sum().reshape({1, 1});
  one.backward();
  expect_values(x.grad(), {2 * kX[0], 2 * kX[1], 2 * kX[2]});
}

TEST(Autograd, BackwardWithExplicitGradient) {
  Tensor x = leaf(kX, {3});
  const std::vector<double> w = {3.0, -2.0, 0.5};
  const std::vector<double> g = {1.0, 10.0, -4.0};
  Tensor y = x * tiny::tensor(w, {3}, tiny::kFloat64);
  y.backward(tiny::tensor(g, {3}, tiny::kFloat64));
  expect_values(x.grad(), {g[0] * w[0], g[1] * w[1], g[2] * w[2]});
  Tensor z = x * 2.0;
  EXPECT_THROW(z.backward(tiny::ones({4}, tiny::kFloat64)), tiny::ShapeError);
}

TEST(Autograd, BackwardOnATensorWithoutGradThrows) {
  Tensor x = tiny::tensor(kX, {3}, tiny::kFloat64);
  EXPECT_THROW(x.sum().backward(), tiny::Error);
}

TEST(Autograd, BackwardOfSeveralRoots) {
  Tensor x = leaf(kX, {3});
  Tensor l1 = (x * x).sum();
  Tensor l2 = l1 * 3.0 + x.sum();  // l1 is both a root and on the path from l2
  tiny::autograd::backward({l1, l2});
  // d(l1)/dx + d(l2)/dx = 2x + (3 * 2x + 1)
  expect_values(x.grad(), {8 * kX[0] + 1, 8 * kX[1] + 1, 8 * kX[2] + 1});

  Tensor y = leaf(kX, {3});
  Tensor a = y * 2.0;
  tiny::autograd::backward({a, y}, {tiny::tensor({1.0, 2.0, 3.0}, tiny::kFloat64), tiny::ones({3}, tiny::kFloat64)});
  expect_values(y.grad(), {3, 5, 7});  // 2 * g + 1, a leaf root too
}

// ---- retain_graph and freeing the graph -----------------------------------------------

TEST(Autograd, RetainGraphAllowsASecondBackward) {
  Tensor x = leaf(kX, {3});
  Tensor loss = (x * x).sum();
  loss.backward(Tensor(), /*retain_graph=*/true);
  loss.backward();  // graph still there; this one frees it
  expect_values(x.grad(), {4 * kX[0], 4 * kX[1], 4 * kX[2]});
  expect_error_containing([&] { loss.backward(); }, "Trying to backward through the graph a second time");
}

TEST(Autograd, SecondBackwardWithoutRetainGraphThrows) {
  Tensor x = leaf(kX, {3});
  Tensor loss = (x.exp() * x).sum();
  loss.backward();
  expect_error_containing([&] { loss.backward(); }, "Trying to backward through the graph a second time");
  // autograd::grad frees the graph the same way.
  Tensor loss2 = (x * x).sum();
  tiny::autograd::grad({loss2}, {x});
  expect_error_containing([&] { tiny::autograd::grad({loss2}, {x}); },
                          "Trying to backward through the graph a second time");
}

TEST(Autograd, GraphIsFreedAfterBackward) {
  Tensor x = leaf(kX, {3});
  std::weak_ptr<tiny::TensorImpl> saved;
  Tensor loss;
  {
    Tensor h = x * 2.0;
    loss = (h * h).sum();  // MulBackward0 saves h
    saved = h.impl_ptr();
  }
  EXPECT_FALSE(saved.expired()) << "the graph should hold the saved intermediate until backward";
  loss.backward();
  EXPECT_TRUE(saved.expired()) << "backward without retain_graph should free the saved intermediate";
  expect_values(x.grad(), {8 * kX[0], 8 * kX[1], 8 * kX[2]});
}

TEST(Autograd, HoldingTheLossHoldsTheGraph) {
  // The "accumulating loss leaks memory" behaviour: the loss tensor owns its
  // graph and every saved activation in it until it is dropped.
  Tensor x = leaf(kX, {3});
  std::weak_ptr<tiny::TensorImpl> saved;
  Tensor loss;
  {
    Tensor h = x * 2.0;
    loss = (h * h).sum();
    saved = h.impl_ptr();
  }
  EXPECT_FALSE(saved.expired());
  loss = Tensor();
  EXPECT_TRUE(saved.expired()) << "dropping the loss should free its graph";
}

TEST(Autograd, AccumulatingLossTensorsKeepsEveryStepsGraph) {
  Tensor x = leaf(kX, {3});
  std::vector<std::weak_ptr<tiny::TensorImpl>> saved;
  Tensor total = tiny::zeros({}, tiny::kFloat64);
  double total_value = 0.0;
  std::vector<std::weak_ptr<tiny::TensorImpl>> saved_item;
  for (int step = 0; step < 3; ++step) {
    {
      Tensor h = x * static_cast<double>(step + 1);
      Tensor loss = (h * h).sum();
      saved.push_back(h.impl_ptr());
      total = total + loss;  // the leak: total's graph holds every step's loss
    }
    {
      Tensor h = x * static_cast<double>(step + 1);
      Tensor loss = (h * h).sum();
      saved_item.push_back(h.impl_ptr());
      total_value += loss.item<double>();  // the fix: a plain number
    }
  }
  for (size_t i = 0; i < saved.size(); ++i) {
    EXPECT_FALSE(saved[i].expired()) << "step " << i << " (total += loss)";
    EXPECT_TRUE(saved_item[i].expired()) << "step " << i << " (total += loss.item())";
  }
  const double sq = kX[0] * kX[0] + kX[1] * kX[1] + kX[2] * kX[2];
  EXPECT_NEAR(total_value, sq * (1 + 4 + 9), 1e-12);
  EXPECT_NEAR(total.item<double>(), sq * (1 + 4 + 9), 1e-12);
  total = Tensor();
  for (size_t i = 0; i < saved.size(); ++i) EXPECT_TRUE(saved[i].expired()) << "step " << i;
}

// ---- grad mode ---------------------------------------------------------------------------

TEST(Autograd, NoGradGuardStopsRecording) {
  Tensor x = leaf(kX, {3});
  ASSERT_TRUE(tiny::is_grad_enabled());
  {
    tiny::NoGradGuard no_grad;
    EXPECT_FALSE(tiny::is_grad_enabled());
    Tensor y = x * 2.0 + x.exp();
    EXPECT_FALSE(y.requires_grad());
    EXPECT_EQ(y.grad_fn(), nullptr);
    EXPECT_TRUE(y.is_leaf());
    Tensor v = x.view({3, 1});
    EXPECT_FALSE(v.requires_grad());
  }
  EXPECT_TRUE(tiny::is_grad_enabled());
  Tensor z = x * 2.0;
  EXPECT_TRUE(z.requires_grad());
  EXPECT_NE(z.grad_fn(), nullptr);
}

TEST(Autograd, NoGradGuardNests) {
  Tensor x = leaf(kX, {3});
  {
    tiny::NoGradGuard outer;
    {
      tiny::NoGradGuard inner;
      EXPECT_FALSE(tiny::is_grad_enabled());
    }
    EXPECT_FALSE(tiny::is_grad_enabled()) << "leaving the inner guard must restore 'off', not turn grad on";
    EXPECT_FALSE((x * 2.0).requires_grad());
  }
  EXPECT_TRUE(tiny::is_grad_enabled());
}

TEST(Autograd, EnableGradGuard) {
  Tensor x = leaf(kX, {3});
  tiny::NoGradGuard no_grad;
  {
    tiny::EnableGradGuard enable;
    EXPECT_TRUE(tiny::is_grad_enabled());
    Tensor y = (x * x).sum();
    EXPECT_TRUE(y.requires_grad());
    y.backward();
    expect_values(x.grad(), {2 * kX[0], 2 * kX[1], 2 * kX[2]});
  }
  EXPECT_FALSE(tiny::is_grad_enabled());
  EXPECT_FALSE((x * 2.0).requires_grad());
}

TEST(Autograd, DetachCutsTheGraph) {
  Tensor x = leaf(kX, {3});
  Tensor y = x * 2.0;
  Tensor d = y.detach();
  EXPECT_FALSE(d.requires_grad());
  EXPECT_EQ(d.grad_fn(), nullptr);
  EXPECT_EQ(d.raw_data_ptr(), y.raw_data_ptr()) << "detach shares the storage";
  // d is a constant: d(sum(d * x))/dx = d = 2x, not 4x.
  (d * x).sum().backward();
  expect_values(x.grad(), {2 * kX[0], 2 * kX[1], 2 * kX[2]});
}

TEST(Autograd, RequiresGradOnNonLeafFails) {
  Tensor x = leaf(kX, {3});
  Tensor y = x * 2.0;
  expect_error_containing([&] { y.requires_grad_(false); },
                          "you can only change requires_grad flags of leaf variables");
  EXPECT_TRUE(y.requires_grad());
  Tensor ints = tiny::arange(3);
  EXPECT_THROW(ints.requires_grad_(true), tiny::DtypeError);
  // A leaf can be switched off and on.
  x.requires_grad_(false);
  EXPECT_FALSE((x * 2.0).requires_grad());
  x.requires_grad_(true);
  EXPECT_TRUE((x * 2.0).requires_grad());
}

// ---- in-place checks ------------------------------------------------------------------------

TEST(Autograd, InplaceOnLeafRequiringGradFails) {
  Tensor x = leaf(kX, {3});
  const std::string msg = "a leaf Variable that requires grad is being used in an in-place operation";
  expect_error_containing([&] { x.add_(1.0); }, msg);
  expect_error_containing([&] { x.mul_(2.0); }, msg);
  expect_error_containing([&] { x.zero_(); }, msg);
  expect_error_containing([&] { x.copy_(tiny::ones({3}, tiny::kFloat64)); }, msg);
  expect_values(x, kX);  // unchanged by the refused ops
  {
    tiny::NoGradGuard no_grad;  // how an optimizer updates parameters
    x.add_(1.0);
  }
  expect_values(x, {kX[0] + 1, kX[1] + 1, kX[2] + 1});
}

TEST(Autograd, ModifyingASavedTensorInPlaceIsDetected) {
  Tensor a = leaf(kX, {3});
  Tensor b = leaf({1.0, 2.0, 3.0}, {3});
  Tensor loss = (a * b).sum();  // MulBackward0 saves a and b
  {
    tiny::NoGradGuard no_grad;
    b.mul_(2.0);
  }
  expect_error_containing([&] { loss.backward(); }, "modified by an inplace operation");
}

TEST(Autograd, ModifyingASavedOutputThroughAViewIsDetected) {
  Tensor x = leaf(kX, {3});
  Tensor e = x.exp();  // ExpBackward0 saves its output
  Tensor loss = e.sum();
  {
    tiny::NoGradGuard no_grad;
    e.view({3, 1}).add_(1.0);  // through a view: the version lives in the shared storage
  }
  expect_error_containing([&] { loss.backward(); }, "modified by an inplace operation");
}

// ---- hooks --------------------------------------------------------------------------------

TEST(Autograd, HookOnLeafSeesReplacesAndIsRemoved) {
  Tensor x = leaf(kX, {3});
  std::vector<double> seen;
  int calls = 0;
  tiny::HookHandle h = x.register_hook([&](const Tensor& g) {
    ++calls;
    seen = vec(g);
    return Tensor();  // keep the gradient
  });
  (x * x).sum().backward();
  EXPECT_EQ(calls, 1);
  ASSERT_EQ(seen.size(), 3u);
  for (size_t i = 0; i < 3; ++i) EXPECT_NEAR(seen[i], 2 * kX[i], 1e-12);
  expect_values(x.grad(), {2 * kX[0], 2 * kX[1], 2 * kX[2]});
  x.remove_hook(h);
  x.set_grad(Tensor());

  tiny::HookHandle r = x.register_hook([](const Tensor& g) { return g * 10.0; });
  (x * x).sum().backward();
  expect_values(x.grad(), {20 * kX[0], 20 * kX[1], 20 * kX[2]});
  EXPECT_EQ(calls, 1) << "a removed hook must not run";
  x.remove_hook(r);
  x.set_grad(Tensor());
  (x * x).sum().backward();
  expect_values(x.grad(), {2 * kX[0], 2 * kX[1], 2 * kX[2]});
}

TEST(Autograd, HookOnNonLeafSeesReplacesAndIsRemoved) {
  Tensor x = leaf(kX, {3});
  std::vector<double> seen;
  int calls = 0;
  {
    Tensor y = x * 3.0;
    tiny::HookHandle h = y.register_hook([&](const Tensor& g) {
      ++calls;
      seen = vec(g);
      return Tensor();
    });
    (y * y).sum().backward();
    EXPECT_EQ(calls, 1);
    ASSERT_EQ(seen.size(), 3u);
    for (size_t i = 0; i < 3; ++i) EXPECT_NEAR(seen[i], 2 * 3 * kX[i], 1e-12) << "dL/dy = 2y";
    expect_values(x.grad(), {18 * kX[0], 18 * kX[1], 18 * kX[2]});
    y.remove_hook(h);
  }
  x.set_grad(Tensor());
  {
    Tensor y = x * 3.0;
    tiny::HookHandle h = y.register_hook([](const Tensor& g) { return g * 0.5; });
    (y * y).sum().backward(Tensor(), /*retain_graph=*/true);
    expect_values(x.grad(), {9 * kX[0], 9 * kX[1], 9 * kX[2]});
    y.remove_hook(h);
    x.set_grad(Tensor());
  }
  {
    Tensor y = x * 3.0;
    int count = 0;
    tiny::HookHandle h = y.register_hook([&](const Tensor&) {
      ++count;
      return Tensor();
    });
    Tensor loss = (y * y).sum();
    y.remove_hook(h);
    loss.backward();
    EXPECT_EQ(count, 0);
    expect_values(x.grad(), {18 * kX[0], 18 * kX[1], 18 * kX[2]});
  }
}

TEST(Autograd, RetainGradKeepsANonLeafsGradient) {
  Tensor x = leaf(kX, {3});
  Tensor y = x * 3.0;
  Tensor z = x * 3.0;
  y.retain_grad();
  Tensor loss = (y * y).sum() + (z * z).sum();
  loss.backward(Tensor(), /*retain_graph=*/true);
  expect_values(y.grad(), {6 * kX[0], 6 * kX[1], 6 * kX[2]});  // 2y = 6x
  EXPECT_FALSE(z.grad().defined()) << "non-leaves do not keep .grad() unless asked";
  loss.backward();
  expect_values(y.grad(), {12 * kX[0], 12 * kX[1], 12 * kX[2]});  // accumulates like a leaf's
  expect_values(x.grad(), {72 * kX[0], 72 * kX[1], 72 * kX[2]});  // 2 * (6 * 3x + 6 * 3x)
}

TEST(Autograd, PostAccumulateGradHookFiresOncePerBackwardAfterUpdate) {
  Tensor x = leaf(kX, {3});
  int calls = 0;
  std::vector<double> seen;
  x.register_post_accumulate_grad_hook([&](Tensor& p) {
    ++calls;
    EXPECT_TRUE(p.is_same(x));
    seen = vec(p.grad());
  });
  // x reaches the loss along three paths: still one accumulation, one call.
  Tensor loss = (x * x + x * 2.0).sum();
  loss.backward();
  EXPECT_EQ(calls, 1);
  ASSERT_EQ(seen.size(), 3u);
  for (size_t i = 0; i < 3; ++i) EXPECT_NEAR(seen[i], 2 * kX[i] + 2, 1e-12) << "the hook sees the updated .grad()";
  (x * x + x * 2.0).sum().backward();
  EXPECT_EQ(calls, 2);
  for (size_t i = 0; i < 3; ++i) EXPECT_NEAR(seen[i], 2 * (2 * kX[i] + 2), 1e-12) << "the accumulated value";
}

TEST(Autograd, PostAccumulateGradHookRejectsNonLeaves) {
  Tensor x = leaf(kX, {3});
  Tensor y = x * 2.0;
  EXPECT_THROW(y.register_post_accumulate_grad_hook([](Tensor&) {}), tiny::Error);
}

TEST(Autograd, RemovedPostAccumulateGradHookDoesNotFire) {
  Tensor x = leaf(kX, {3});
  int calls = 0;
  tiny::HookHandle h = x.register_post_accumulate_grad_hook([&](Tensor&) { ++calls; });
  x.remove_hook(h);
  (x * x).sum().backward();
  EXPECT_EQ(calls, 0);
}

// ---- autograd::grad -------------------------------------------------------------------------

TEST(Autograd, GradReturnsGradientsWithoutTouchingLeaves) {
  Tensor x = leaf(kX, {3});
  Tensor w = leaf({1.0, -1.0, 0.5}, {3});
  Tensor old = tiny::full({3}, 7.0, tiny::kFloat64);
  w.set_grad(old);
  Tensor loss = (x * x * w).sum();
  std::vector<Tensor> g = tiny::autograd::grad({loss}, {x, w});
  ASSERT_EQ(g.size(), 2u);
  expect_values(g[0], {2 * kX[0] * 1.0, 2 * kX[1] * -1.0, 2 * kX[2] * 0.5});
  expect_values(g[1], {kX[0] * kX[0], kX[1] * kX[1], kX[2] * kX[2]});
  EXPECT_FALSE(x.grad().defined()) << "autograd::grad must not write .grad()";
  ASSERT_TRUE(w.grad().defined());
  EXPECT_TRUE(w.grad().is_same(old));
  expect_values(w.grad(), {7, 7, 7});
}

TEST(Autograd, GradOfOnlySomeLeavesAndOfAnIntermediate) {
  Tensor x = leaf(kX, {3});
  Tensor w = leaf({1.0, -1.0, 0.5}, {3});
  Tensor h = x * w;
  Tensor loss = (h * h).sum();
  std::vector<Tensor> g = tiny::autograd::grad({loss}, {h, x}, {}, /*retain_graph=*/true);
  expect_values(g[0], {2 * kX[0] * 1.0, 2 * kX[1] * -1.0, 2 * kX[2] * 0.5});                 // 2h
  expect_values(g[1], {2 * kX[0] * 1.0 * 1.0, 2 * kX[1] * 1.0, 2 * kX[2] * 0.25});          // 2 x w^2
  EXPECT_FALSE(x.grad().defined());
  EXPECT_FALSE(w.grad().defined());
  // With an explicit output gradient on a non-scalar output.
  std::vector<Tensor> gv = tiny::autograd::grad({h}, {w}, {tiny::tensor({1.0, 2.0, 3.0}, tiny::kFloat64)});
  expect_values(gv[0], {1 * kX[0], 2 * kX[1], 3 * kX[2]});
  EXPECT_FALSE(w.grad().defined());
}

// ---- how gradients flow -----------------------------------------------------------------------

TEST(Autograd, SharedSubexpressionsSumTheirGradients) {
  Tensor x = leaf(kX, {3});
  Tensor h = x * 2.0;                      // used three times below
  Tensor loss = (h * h + h + h.exp()).sum();  // d/dx = (2h + 1 + e^h) * 2
  loss.backward();
  std::vector<double> expected;
  for (double v : kX) expected.push_back((2 * (2 * v) + 1 + std::exp(2 * v)) * 2);
  expect_values(x.grad(), expected, 1e-10);

  Tensor y = leaf(kX, {3});
  (y * y * y).sum().backward();  // x used twice in one op and again in the next
  expect_values(y.grad(), {3 * kX[0] * kX[0], 3 * kX[1] * kX[1], 3 * kX[2] * kX[2]});
}

TEST(Autograd, GradientsFlowThroughViewsOfLeaves) {
  // x = [[a, b, c], [d, e, f]]
  const std::vector<double> xs = {1.0, -2.0, 0.5, 3.0, 0.25, -1.5};
  Tensor x = leaf(xs, {2, 3});
  const std::vector<double> ws = {1.0, 2.0, 3.0, 4.0, 5.0, 6.0};
  Tensor w = tiny::tensor(ws, {3, 2}, tiny::kFloat64);
  // sum(x.t() * w) + sum(x[1]^2) + sum(x[:, ::2]) + x.view(-1)[4] * 10
  Tensor loss = (x.t() * w).sum() + (x[1] * x[1]).sum() + x.slice(1, 0, 3, 2).sum() +
                x.view({-1}).select(0, 4) * 10.0;
  loss.backward();
  std::vector<double> expected(6, 0.0);
  for (int i = 0; i < 2; ++i) {
    for (int j = 0; j < 3; ++j) expected[i * 3 + j] += ws[j * 2 + i];  // x.t()[j][i] meets w[j][i]
  }
  for (int j = 0; j < 3; ++j) expected[3 + j] += 2 * xs[3 + j];
  for (int i = 0; i < 2; ++i) {
    expected[i * 3 + 0] += 1;
    expected[i * 3 + 2] += 1;
  }
  expected[4] += 10;
  expect_values(x.grad(), expected);
  EXPECT_EQ(x.grad().sizes(), (tiny::IntArrayRef{2, 3}));
}

TEST(Autograd, GradFnNamesMatchPyTorch) {
  Tensor x = leaf({1.0, 2.0, 3.0, 4.0}, {2, 2});
  Tensor y = leaf({0.5, 0.5, 0.5, 0.5}, {2, 2});
  EXPECT_EQ(x.grad_fn(), nullptr);
  Tensor s = x + y;
  ASSERT_NE(s.grad_fn(), nullptr);
  EXPECT_EQ(s.grad_fn()->name(), "AddBackward0");
  EXPECT_EQ((x * y).grad_fn()->name(), "MulBackward0");
  EXPECT_EQ(tiny::mm(x, y).grad_fn()->name(), "MmBackward0");
  EXPECT_EQ((x - y).grad_fn()->name(), "SubBackward0");
  EXPECT_EQ((x / y).grad_fn()->name(), "DivBackward0");
  EXPECT_EQ(x.exp().grad_fn()->name(), "ExpBackward0");
  EXPECT_EQ(x.view({4}).grad_fn()->name(), "ViewBackward0");
  EXPECT_EQ(F::log_softmax(x, 1).grad_fn()->name(), "LogSoftmaxBackward0");
  // next_functions of a sum of two leaves: their gradient accumulators.
  const auto& edges = s.grad_fn()->next_edges();
  ASSERT_EQ(edges.size(), 2u);
  ASSERT_TRUE(edges[0].is_valid());
  EXPECT_EQ(edges[0].function->name(), "AccumulateGrad");
  EXPECT_EQ(edges[1].function->name(), "AccumulateGrad");
}

TEST(Autograd, LaterLayersFinishBeforeEarlierOnes) {
  // DDP launches a bucket's all-reduce as soon as its gradients are ready,
  // which works only if the last layer's parameters are done first.
  Tensor x = tiny::tensor({0.1, -0.2, 0.3, 0.4, -0.5, 0.6, 0.7, 0.8}, {2, 4}, tiny::kFloat64);
  std::vector<Tensor> weights, biases;
  for (int i = 0; i < 3; ++i) {
    Tensor w = tiny::full({4, 4}, 0.1 * (i + 1), tiny::kFloat64);
    Tensor b = tiny::full({4}, 0.01 * (i + 1), tiny::kFloat64);
    w.requires_grad_(true);
    b.requires_grad_(true);
    weights.push_back(w);
    biases.push_back(b);
  }
  std::vector<std::string> order;
  for (int i = 0; i < 3; ++i) {
    weights[i].register_post_accumulate_grad_hook([&order, i](Tensor&) { order.push_back("w" + std::to_string(i)); });
    biases[i].register_post_accumulate_grad_hook([&order, i](Tensor&) { order.push_back("b" + std::to_string(i)); });
  }
  std::vector<int> tensor_hook_layers;
  for (int i = 0; i < 3; ++i) {
    weights[i].register_hook([&tensor_hook_layers, i](const Tensor&) {
      tensor_hook_layers.push_back(i);
      return Tensor();
    });
  }
  Tensor h = x;
  for (int i = 0; i < 3; ++i) h = F::linear(h, weights[i], biases[i]).tanh();
  h.sum().backward();
  ASSERT_EQ(order.size(), 6u);
  auto pos = [&](const std::string& name) {
    for (size_t k = 0; k < order.size(); ++k) {
      if (order[k] == name) return static_cast<int>(k);
    }
    return -1;
  };
  for (int i = 0; i < 2; ++i) {
    const std::string later = std::to_string(i + 1), earlier = std::to_string(i);
    EXPECT_LT(pos("w" + later), pos("w" + earlier));
    EXPECT_LT(pos("b" + later), pos("w" + earlier));
    EXPECT_LT(pos("w" + later), pos("b" + earlier));
    EXPECT_LT(pos("b" + later), pos("b" + earlier));
  }
  EXPECT_EQ(tensor_hook_layers, (std::vector<int>{2, 1, 0}));
}

TEST(Autograd, ConcurrentBackwardIntoASharedLeafAccumulatesEverything) {
  // Worker threads (DataParallel-style, hogwild) run forward and backward at
  // the same time on one parameter; every contribution must land, as in
  // PyTorch, whose AccumulateGrad holds a lock.
  constexpr int kThreads = 4, kSteps = 50;
  for (int64_t n : {64, 50000}) {
    SCOPED_TRACE("numel " + std::to_string(n));
    Tensor x = tiny::full({n}, 1.5, tiny::kFloat64);
    x.requires_grad_(true);
    std::atomic<int> hook_calls{0};
    x.register_post_accumulate_grad_hook([&](Tensor&) { hook_calls.fetch_add(1); });
    std::vector<std::thread> workers;
    for (int t = 0; t < kThreads; ++t) {
      workers.emplace_back([&x] {
        for (int i = 0; i < kSteps; ++i) (x * x).sum().backward();
      });
    }
    for (auto& w : workers) w.join();
    EXPECT_EQ(hook_calls.load(), kThreads * kSteps);
    ASSERT_TRUE(x.grad().defined());
    const std::vector<double> g = vec(x.grad());
    int64_t wrong = 0;
    for (double v : g) wrong += v != 2 * 1.5 * kThreads * kSteps;
    EXPECT_EQ(wrong, 0) << "first element " << g[0] << ", expected " << 2 * 1.5 * kThreads * kSteps;
  }
}

// ---- thread-local state -------------------------------------------------------------------------

TEST(Autograd, ThreadLocalStateCarriesGradModeIntoAThread) {
  Tensor x = leaf(kX, {3});
  tiny::ThreadLocalState state;
  {
    tiny::NoGradGuard no_grad;
    state = tiny::ThreadLocalState::capture();
  }
  EXPECT_FALSE(state.grad_enabled);
  ASSERT_TRUE(tiny::is_grad_enabled());

  bool before = false, inside = true, recorded = true, after = false;
  std::thread worker([&] {
    before = tiny::is_grad_enabled();  // a new thread starts with grad on
    {
      tiny::ThreadLocalStateGuard guard(state);
      inside = tiny::is_grad_enabled();
      recorded = (x * 2.0).requires_grad();
    }
    after = tiny::is_grad_enabled();
  });
  worker.join();
  EXPECT_TRUE(before);
  EXPECT_FALSE(inside);
  EXPECT_FALSE(recorded);
  EXPECT_TRUE(after) << "the guard must restore the worker's own state";
  EXPECT_TRUE(tiny::is_grad_enabled()) << "the main thread's mode is its own";
}

TEST(Autograd, ThreadLocalStateGuardAlsoTurnsGradOn) {
  Tensor x = leaf(kX, {3});
  const tiny::ThreadLocalState state = tiny::ThreadLocalState::capture();  // grad on
  bool inside = false, recorded = false, after = true;
  std::thread worker([&] {
    tiny::set_grad_enabled(false);
    {
      tiny::ThreadLocalStateGuard guard(state);
      inside = tiny::is_grad_enabled();
      recorded = (x * 2.0).requires_grad();
    }
    after = tiny::is_grad_enabled();
  });
  worker.join();
  EXPECT_TRUE(inside);
  EXPECT_TRUE(recorded);
  EXPECT_FALSE(after);
}

TEST(Autograd, GradModeIsPerThread) {
  tiny::NoGradGuard no_grad;  // on the main thread only
  bool other = false;
  std::thread worker([&] { other = tiny::is_grad_enabled(); });
  worker.join();
  EXPECT_TRUE(other);
  EXPECT_FALSE(tiny::is_grad_enabled());
}

}  // namespace
