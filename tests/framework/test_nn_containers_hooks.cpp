// ModuleList, ModuleDict, forward hooks, Module::apply and the Softplus,
// Softmax and LogSoftmax modules (issue 23, item 5): names, order, removal,
// clones and errors as PyTorch's.

#include <gtest/gtest.h>

#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "test_util.h"
#include "tiny/nn/nn.h"
#include "tiny/ops.h"

namespace {

using tiny::Tensor;
using tiny_test::expect_error;
namespace nn = tiny::nn;
namespace F = tiny::nn::functional;

std::vector<std::string> parameter_names(const nn::Module& m) {
  std::vector<std::string> names;
  for (const auto& p : m.named_parameters()) names.push_back(p.first);
  return names;
}

// A residual stack kept in a ModuleList, with two heads in a ModuleDict.
struct Tower : nn::Module {
  std::shared_ptr<nn::ModuleList> blocks = register_module("blocks", std::make_shared<nn::ModuleList>());
  std::shared_ptr<nn::ModuleDict> heads = register_module("heads", std::make_shared<nn::ModuleDict>());
  Tower() {
    blocks->append(std::make_shared<nn::Linear>(4, 4));
    blocks->append(std::make_shared<nn::Linear>(4, 4));
    heads->insert("digits", std::make_shared<nn::Linear>(4, 10));
    heads->insert("parity", std::make_shared<nn::Linear>(4, 2));
  }
  Tensor forward(const Tensor& x) override {
    Tensor h = x;
    for (const auto& block : *blocks) h = h + (*block)(h);
    return (*(*heads)["digits"])(h);
  }
};

TEST(ModuleContainers, ParametersAreNamedAsInPyTorch) {
  Tower tower;
  EXPECT_EQ(parameter_names(tower),
            (std::vector<std::string>{"blocks.0.weight", "blocks.0.bias", "blocks.1.weight", "blocks.1.bias",
                                      "heads.digits.weight", "heads.digits.bias", "heads.parity.weight",
                                      "heads.parity.bias"}));
  EXPECT_EQ(tower(tiny::randn({3, 4})).sizes(), (tiny::IntArrayRef{3, 10}));
  EXPECT_EQ(tower.heads->keys(), (std::vector<std::string>{"digits", "parity"}));
  EXPECT_TRUE(tower.heads->contains("parity"));
  EXPECT_FALSE(tower.heads->contains("letters"));
  EXPECT_EQ((*tower.blocks)[-1], (*tower.blocks)[1]);
}

TEST(ModuleContainers, CloneCopiesValuesNotHandles) {
  Tower tower;
  auto copy = std::dynamic_pointer_cast<nn::ModuleDict>(tower.heads->clone());
  ASSERT_NE(copy, nullptr);
  EXPECT_EQ(copy->keys(), tower.heads->keys());
  const Tensor w = (*tower.heads)["digits"]->parameters()[0];
  const Tensor w_copy = (*copy)["digits"]->parameters()[0];
  EXPECT_TRUE(tiny::equal(w, w_copy));
  w_copy.detach().fill_(0);
  EXPECT_FALSE(tiny::equal(w, w_copy));  // its own memory
  auto list_copy = std::dynamic_pointer_cast<nn::ModuleList>(tower.blocks->clone());
  ASSERT_NE(list_copy, nullptr);
  EXPECT_EQ(list_copy->size(), 2u);
}

TEST(ModuleContainers, MisuseNamesTheFix) {
  Tower tower;
  expect_error<tiny::NotImplemented>([&] { (void)(*tower.blocks)(tiny::ones({1, 4})); },
                                     {"ModuleList has no forward", "nn::Sequential"});
  expect_error<tiny::NotImplemented>([&] { (void)(*tower.heads)(tiny::ones({1, 4})); }, {"ModuleDict has no forward"});
  expect_error<tiny::IndexError>([&] { (void)(*tower.heads)["letters"]; },
                                 {"no module named 'letters'", "'digits', 'parity'"});
  expect_error<tiny::ValueError>([&] { tower.heads->insert("digits", std::make_shared<nn::ReLU>()); },
                                 {"'digits' already exists"});
  expect_error<tiny::IndexError>([&] { (void)(*tower.blocks)[2]; }, {"index 2 is out of range", "2 modules"});
}

TEST(ForwardHooks, RunInOrderAndMayReplaceInputAndOutput) {
  auto relu = std::make_shared<nn::ReLU>();
  std::vector<std::string> calls;
  Tensor seen_output;
  nn::Module::RemovableHandle pre = relu->register_forward_pre_hook([&](nn::Module& m, const Tensor& x) {
    calls.push_back("pre:" + m.name());
    return std::optional<Tensor>(x - 1.0);  // replaces the input
  });
  nn::Module::RemovableHandle post1 = relu->register_forward_hook([&](nn::Module&, const Tensor&, const Tensor& y) {
    calls.push_back("post1");
    seen_output = y.detach();
    return std::optional<Tensor>();  // keeps the output
  });
  relu->register_forward_hook([&](nn::Module&, const Tensor&, const Tensor& y) {
    calls.push_back("post2");
    return std::optional<Tensor>(y * 10.0);
  });
  const Tensor x = tiny::tensor({0.5, 2.0, 3.0});
  const Tensor y = (*relu)(x);
  EXPECT_EQ(calls, (std::vector<std::string>{"pre:ReLU", "post1", "post2"}));
  EXPECT_TRUE(tiny::allclose(seen_output, tiny::tensor({0.0, 1.0, 2.0})));
  EXPECT_TRUE(tiny::allclose(y, tiny::tensor({0.0, 10.0, 20.0})));
  // forward() itself runs no hooks, as in PyTorch.
  calls.clear();
  (void)relu->forward(x);
  EXPECT_TRUE(calls.empty());
  // Removed hooks stop; removing twice is harmless.
  pre.remove();
  post1.remove();
  post1.remove();
  calls.clear();
  (void)(*relu)(x);
  EXPECT_EQ(calls, (std::vector<std::string>{"post2"}));
}

TEST(ForwardHooks, SequentialRunsEachChildsHooks) {
  auto seq = std::make_shared<nn::Sequential>(std::make_shared<nn::Linear>(3, 5), std::make_shared<nn::ReLU>(),
                                              std::make_shared<nn::Linear>(5, 2));
  std::vector<tiny::IntArrayRef> shapes;
  for (const auto& m : *seq) {
    m->register_forward_hook([&](nn::Module&, const Tensor&, const Tensor& out) {
      shapes.push_back(out.sizes());
      return std::optional<Tensor>();
    });
  }
  (void)(*seq)(tiny::randn({4, 3}));
  EXPECT_EQ(shapes, (std::vector<tiny::IntArrayRef>{{4, 5}, {4, 5}, {4, 2}}));
}

TEST(ModuleApply, VisitsChildrenBeforeParents) {
  Tower tower;
  std::vector<std::string> order;
  tower.apply([&](nn::Module& m) { order.push_back(m.name()); });
  EXPECT_EQ(order, (std::vector<std::string>{"Linear", "Linear", "ModuleList", "Linear", "Linear", "ModuleDict",
                                             "Tower"}));
  // The usual use: initialise every Linear.
  tower.apply([](nn::Module& m) {
    if (auto* linear = dynamic_cast<nn::Linear*>(&m)) linear->weight.detach().fill_(0.5);
  });
  for (const auto& p : tower.named_parameters()) {
    if (p.first.find("weight") != std::string::npos) EXPECT_EQ(p.second.mean().item<double>(), 0.5) << p.first;
  }
}

TEST(ActivationModules, MatchTheFunctionsAndPrintAsPyTorch) {
  const Tensor x = tiny::randn({3, 4}) * 5;
  EXPECT_TRUE(tiny::equal(nn::Softplus(2.0, 5.0)(x), F::softplus(x, 2.0, 5.0)));
  EXPECT_TRUE(tiny::equal(nn::Softmax(1)(x), F::softmax(x, 1)));
  EXPECT_TRUE(tiny::equal(nn::LogSoftmax(0)(x), F::log_softmax(x, 0)));
  std::ostringstream out;
  out << nn::Sequential{std::make_shared<nn::Softplus>(), std::make_shared<nn::LogSoftmax>(1)};
  EXPECT_NE(out.str().find("Softplus(beta=1.0, threshold=20.0)"), std::string::npos) << out.str();
  EXPECT_NE(out.str().find("LogSoftmax(dim=1)"), std::string::npos) << out.str();
  // Large inputs take the linear branch, with a finite gradient of 1 (no 0 * inf).
  Tensor big = tiny::tensor({100.0, -100.0, 0.0});
  big.requires_grad_(true);
  F::softplus(big).sum().backward();
  EXPECT_TRUE(tiny::allclose(big.grad(), tiny::tensor({1.0, 0.0, 0.5})));
}

}  // namespace
