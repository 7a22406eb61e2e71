// The bad-input sweep: every public op fed wrong shapes, dtypes, devices and
// out-of-range indices. Each case must raise a tiny::Error (of the expected
// kind) whose message names what was wrong; a case that is accepted, throws
// something else, or crashes fails the sweep. The table is the list of ops a
// learner can call: add an op to tiny, add its bad inputs here.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <typeinfo>
#include <vector>

#include "tiny/tiny.h"

namespace {

namespace F = tiny::nn::functional;
using tiny::Tensor;

enum class Kind { Shape, Dtype, Device, Index, Value };

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::Shape: return "shape";
    case Kind::Dtype: return "dtype";
    case Kind::Device: return "device";
    case Kind::Index: return "index";
    case Kind::Value: return "value";
  }
  return "?";
}

struct Case {
  std::string name;
  Kind kind;
  std::function<void()> call;
  std::string says;  // a part of the message (empty: any non-empty message)
};

// The error class a kind of bad input must raise (ValueError also passes for Value).
bool right_class(Kind kind, const tiny::Error& e) {
  switch (kind) {
    case Kind::Shape: return dynamic_cast<const tiny::ShapeError*>(&e) != nullptr;
    case Kind::Dtype: return dynamic_cast<const tiny::DtypeError*>(&e) != nullptr;
    case Kind::Device: return dynamic_cast<const tiny::DeviceError*>(&e) != nullptr;
    case Kind::Index: return dynamic_cast<const tiny::IndexError*>(&e) != nullptr;
    case Kind::Value: return dynamic_cast<const tiny::ValueError*>(&e) != nullptr;
  }
  return false;
}

// Runs every case; returns one line per case that did not raise the right error.
std::vector<std::string> sweep(const std::vector<Case>& cases) {
  std::vector<std::string> problems;
  for (const Case& c : cases) {
    const std::string label = c.name + " [" + kind_name(c.kind) + "]";
    try {
      c.call();
      problems.push_back(label + ": accepted");
    } catch (const tiny::Error& e) {
      const std::string what = e.what();
      if (!right_class(c.kind, e)) problems.push_back(label + ": raised " + typeid(e).name() + ": " + what);
      if (what.size() < 20) problems.push_back(label + ": message too short to help: '" + what + "'");
      if (!c.says.empty() && what.find(c.says) == std::string::npos)
        problems.push_back(label + ": message lacks '" + c.says + "': " + what);
    } catch (const std::exception& e) {
      problems.push_back(label + ": threw a " + typeid(e).name() + " (not a tiny::Error): " + e.what());
    }
  }
  return problems;
}

std::string join(const std::vector<std::string>& lines) {
  std::string out;
  for (const auto& l : lines) out += "  " + l + "\n";
  return out;
}

const std::string kMixed = "Expected all tensors to be on the same device";

}  // namespace

TEST(BadInputSweep, ElementwiseOpsRejectShapesThatDoNotBroadcastAndMixedDevices) {
  const Tensor a = tiny::randn({2, 3}), b = tiny::randn({4});
  using Binary = std::function<Tensor(const Tensor&, const Tensor&)>;
  const std::vector<std::pair<std::string, Binary>> ops = {
      {"add", [](const Tensor& x, const Tensor& y) { return tiny::add(x, y); }},
      {"sub", [](const Tensor& x, const Tensor& y) { return tiny::sub(x, y); }},
      {"mul", [](const Tensor& x, const Tensor& y) { return tiny::mul(x, y); }},
      {"div", [](const Tensor& x, const Tensor& y) { return tiny::div(x, y); }},
      {"pow", [](const Tensor& x, const Tensor& y) { return tiny::pow(x, y); }},
      {"maximum", [](const Tensor& x, const Tensor& y) { return tiny::maximum(x, y); }},
      {"minimum", [](const Tensor& x, const Tensor& y) { return tiny::minimum(x, y); }},
      {"eq", [](const Tensor& x, const Tensor& y) { return tiny::eq(x, y); }},
      {"ne", [](const Tensor& x, const Tensor& y) { return tiny::ne(x, y); }},
      {"lt", [](const Tensor& x, const Tensor& y) { return tiny::lt(x, y); }},
      {"le", [](const Tensor& x, const Tensor& y) { return tiny::le(x, y); }},
      {"gt", [](const Tensor& x, const Tensor& y) { return tiny::gt(x, y); }},
      {"ge", [](const Tensor& x, const Tensor& y) { return tiny::ge(x, y); }},
      {"where(cond, a, b)", [](const Tensor& x, const Tensor& y) { return tiny::where(tiny::gt(x, tiny::zeros_like(x)), x, y); }},
      {"mse_loss", [](const Tensor& x, const Tensor& y) { return F::mse_loss(x, y); }},
  };
  std::vector<Case> cases;
  for (const auto& [name, op] : ops) {
    cases.push_back({name + "({2,3}, {4})", Kind::Shape, [&, op = op] { (void)op(a, b); }, "[2, 3]"});
  }
  if (tiny::cuda::is_available()) {
    const Tensor g = tiny::randn({2, 3}).to(tiny::Device("cuda:0"));
    for (const auto& [name, op] : ops) {
      cases.push_back({name + "(cpu, cuda:0)", Kind::Device, [&, op = op, g] { (void)op(a, g); }, kMixed});
      cases.push_back({name + "(cuda:0, cpu)", Kind::Device, [&, op = op, g] { (void)op(g, a); }, kMixed});
    }
  }
  const auto problems = sweep(cases);
  EXPECT_TRUE(problems.empty()) << problems.size() << " of " << cases.size() << " cases:\n" << join(problems);
}

TEST(BadInputSweep, MatrixProductsAndLinearLayers) {
  const Tensor m23 = tiny::randn({2, 3}), m45 = tiny::randn({4, 5}), v3 = tiny::randn({3});
  const Tensor b3 = tiny::randn({2, 3, 4}), b4 = tiny::randn({2, 5, 6});
  const Tensor ints = tiny::ones({2, 3}, tiny::TensorOptions(tiny::kInt64));
  tiny::nn::Linear layer(3, 4);
  std::vector<Case> cases = {
      {"mm inner sizes", Kind::Shape, [&] { (void)tiny::mm(m23, m45); }, "2x3"},
      {"mm of a vector", Kind::Shape, [&] { (void)tiny::mm(m23, v3); }, ""},
      {"matmul inner sizes", Kind::Shape, [&] { (void)tiny::matmul(m23, m45); }, ""},
      {"matmul of batches", Kind::Shape, [&] { (void)tiny::matmul(b3, b4); }, ""},
      {"addmm bias", Kind::Shape, [&] { (void)tiny::addmm(tiny::randn({7}), m23, tiny::randn({3, 4})); }, ""},
      {"linear weight", Kind::Shape, [&] { (void)F::linear(m23, tiny::randn({4, 5})); }, ""},
      {"linear bias", Kind::Shape, [&] { (void)F::linear(m23, tiny::randn({4, 3}), tiny::randn({5})); }, ""},
      {"Linear(3,4) on 5 features", Kind::Shape, [&] { (void)layer.forward(tiny::randn({2, 5})); }, ""},
      {"mm of int64 by float", Kind::Dtype, [&] { (void)tiny::mm(ints, tiny::randn({3, 2})); }, ""},
  };
  if (tiny::cuda::is_available()) {
    const Tensor g = tiny::randn({3, 4}).to(tiny::Device("cuda:0"));
    cases.push_back({"mm(cpu, cuda:0)", Kind::Device, [&, g] { (void)tiny::mm(m23, g); }, kMixed});
    cases.push_back({"matmul(cpu, cuda:0)", Kind::Device, [&, g] { (void)tiny::matmul(m23, g); }, kMixed});
    cases.push_back({"Linear on cpu, input on cuda:0", Kind::Device,
                     [&] { (void)layer.forward(tiny::randn({2, 3}).to(tiny::Device("cuda:0"))); }, kMixed});
  }
  const auto problems = sweep(cases);
  EXPECT_TRUE(problems.empty()) << problems.size() << " of " << cases.size() << " cases:\n" << join(problems);
}

TEST(BadInputSweep, ReductionsAndSoftmaxRejectDimensionsOutOfRange) {
  const Tensor x = tiny::randn({2, 3});
  using Unary = std::function<void(int64_t)>;
  const std::vector<std::pair<std::string, Unary>> ops = {
      {"sum", [&](int64_t d) { (void)tiny::sum(x, {d}); }},
      {"mean", [&](int64_t d) { (void)tiny::mean(x, {d}); }},
      {"max", [&](int64_t d) { (void)tiny::max(x, d); }},
      {"min", [&](int64_t d) { (void)tiny::min(x, d); }},
      {"argmax", [&](int64_t d) { (void)tiny::argmax(x, d); }},
      {"argmin", [&](int64_t d) { (void)tiny::argmin(x, d); }},
      {"softmax", [&](int64_t d) { (void)F::softmax(x, d); }},
      {"log_softmax", [&](int64_t d) { (void)F::log_softmax(x, d); }},
      {"transpose", [&](int64_t d) { (void)x.transpose(0, d); }},
      {"unsqueeze", [&](int64_t d) { (void)x.unsqueeze(d < 0 ? d - 1 : d + 1); }},  // it has one more place
      {"squeeze", [&](int64_t d) { (void)x.squeeze(d); }},
      {"narrow", [&](int64_t d) { (void)x.narrow(d, 0, 1); }},
      {"select", [&](int64_t d) { (void)x.select(d, 0); }},
      {"flatten", [&](int64_t d) { (void)x.flatten(0, d); }},
      {"cat", [&](int64_t d) { (void)tiny::cat({x, x}, d); }},
      {"stack", [&](int64_t d) { (void)tiny::stack({x, x}, d < 0 ? d - 1 : d + 1); }},
  };
  std::vector<Case> cases;
  for (const auto& [name, op] : ops) {
    for (int64_t d : {2, -3, 7}) {
      cases.push_back({name + " dim " + std::to_string(d), Kind::Index, [op = op, d] { op(d); }, "out of range"});
    }
  }
  const auto problems = sweep(cases);
  EXPECT_TRUE(problems.empty()) << problems.size() << " of " << cases.size() << " cases:\n" << join(problems);
}

TEST(BadInputSweep, ViewsAndIndicesOutOfRange) {
  const Tensor x = tiny::randn({2, 3});
  const std::vector<Case> cases = {
      {"view to 7 elements", Kind::Shape, [&] { (void)x.view({7}); }, "invalid for input of size 6"},
      {"reshape to 4x2", Kind::Shape, [&] { (void)x.reshape({4, 2}); }, "invalid for input of size 6"},
      {"view with two -1", Kind::Shape, [&] { (void)x.view({-1, -1}); }, ""},
      {"view of a transpose", Kind::Shape, [&] { (void)x.t().view({6}); }, ""},
      {"expand 3 to 4", Kind::Shape, [&] { (void)x.expand({2, 4}); }, ""},
      {"permute of two dims", Kind::Shape, [&] { (void)x.permute({0}); }, ""},
      {"permute repeats a dim", Kind::Value, [&] { (void)x.permute({0, 0}); }, ""},
      {"select index 2 of 2", Kind::Index, [&] { (void)x.select(0, 2); }, "out of bounds"},
      {"select index -3", Kind::Index, [&] { (void)x.select(0, -3); }, "out of bounds"},
      {"narrow past the end", Kind::Index, [&] { (void)x.narrow(1, 2, 2); }, ""},
      {"slice step 0", Kind::Value, [&] { (void)x.slice(1, 0, 3, 0); }, ""},
      {"cat of different sizes", Kind::Shape, [&] { (void)tiny::cat({x, tiny::randn({2, 4})}, 0); }, ""},
      {"stack of different shapes", Kind::Shape, [&] { (void)tiny::stack({x, tiny::randn({3, 2})}); }, ""},
      {"cat of nothing", Kind::Value, [&] { (void)tiny::cat({}, 0); }, ""},
      {"item of 6 elements", Kind::Value, [&] { (void)x.item<float>(); }, ""},
      {"embedding index 10 of 10", Kind::Index,
       [&] { (void)F::embedding(tiny::full({2}, 10, tiny::TensorOptions(tiny::kInt64)), tiny::randn({10, 4})); }, "10"},
      {"embedding index -1", Kind::Index,
       [&] { (void)F::embedding(tiny::full({2}, -1, tiny::TensorOptions(tiny::kInt64)), tiny::randn({10, 4})); }, ""},
      {"embedding float indices", Kind::Dtype, [&] { (void)F::embedding(tiny::ones({2}), tiny::randn({10, 4})); }, ""},
  };
  const auto problems = sweep(cases);
  EXPECT_TRUE(problems.empty()) << problems.size() << " of " << cases.size() << " cases:\n" << join(problems);
}

TEST(BadInputSweep, LossesRejectWrongTargets) {
  const Tensor logits = tiny::randn({4, 5});
  const auto longs = tiny::TensorOptions(tiny::kInt64);
  std::vector<Case> cases = {
      {"cross_entropy target 5 of 5 classes", Kind::Index, [&] { (void)F::cross_entropy(logits, tiny::full({4}, 5, longs)); }, "5"},
      {"cross_entropy target -2", Kind::Index, [&] { (void)F::cross_entropy(logits, tiny::full({4}, -2, longs)); }, ""},
      {"cross_entropy float target of wrong shape", Kind::Dtype, [&] { (void)F::cross_entropy(logits, tiny::zeros({4})); }, ""},
      {"cross_entropy batch 4 vs 3", Kind::Shape, [&] { (void)F::cross_entropy(logits, tiny::zeros({3}, longs)); }, ""},
      {"nll_loss batch 4 vs 2", Kind::Shape, [&] { (void)F::nll_loss(F::log_softmax(logits, 1), tiny::zeros({2}, longs)); }, ""},
      {"nll_loss target 9", Kind::Index, [&] { (void)F::nll_loss(F::log_softmax(logits, 1), tiny::full({4}, 9, longs)); }, ""},
      {"mse_loss of int64", Kind::Dtype, [&] { (void)F::mse_loss(tiny::ones({4}, longs), tiny::ones({4}, longs)); }, ""},
  };
  if (tiny::cuda::is_available()) {
    const tiny::Device gpu("cuda:0");
    cases.push_back({"cross_entropy logits cuda:0, target cpu", Kind::Device,
                     [&, gpu] { (void)F::cross_entropy(logits.to(gpu), tiny::zeros({4}, longs)); }, kMixed});
    cases.push_back({"mse_loss cuda:0 vs cpu", Kind::Device, [&, gpu] { (void)F::mse_loss(logits.to(gpu), logits); }, kMixed});
  }
  const auto problems = sweep(cases);
  EXPECT_TRUE(problems.empty()) << problems.size() << " of " << cases.size() << " cases:\n" << join(problems);
}

TEST(BadInputSweep, CreationOptionsAndDevices) {
  const std::vector<Case> cases = {
      {"zeros of size -1", Kind::Value, [] { (void)tiny::zeros({2, -1}); }, "-1"},
      {"randn of size -3", Kind::Value, [] { (void)tiny::randn({-3}); }, ""},
      {"randint low 5 high 5", Kind::Value, [] { (void)tiny::randint(5, 5, {2}); }, ""},
      {"arange step 0", Kind::Value, [] { (void)tiny::arange(0.0, 1.0, 0.0); }, ""},
      {"arange step of the wrong sign", Kind::Value, [] { (void)tiny::arange(0.0, 1.0, -1.0); }, ""},
      {"randperm -1", Kind::Value, [] { (void)tiny::randperm(-1); }, ""},
      {"dropout p 1.5", Kind::Value, [] { (void)F::dropout(tiny::ones({3}), 1.5); }, "1.5"},
      {"device 'gpu:0'", Kind::Value, [] { (void)tiny::Device("gpu:0"); }, "gpu:0"},
      {"device 'cuda:-2'", Kind::Value, [] { (void)tiny::Device("cuda:-2"); }, ""},
      {"cuda:99", Kind::Device, [] { (void)tiny::ones({2}).to(tiny::Device("cuda:99")); }, "cuda:99"},
      {"requires_grad on int64", Kind::Dtype,
       [] { (void)tiny::ones({2}, tiny::TensorOptions(tiny::kInt64)).requires_grad_(true); }, ""},
      {"clamp without bounds", Kind::Value, [] { (void)tiny::clamp(tiny::ones({2}), std::nullopt, std::nullopt); }, ""},
  };
  const auto problems = sweep(cases);
  EXPECT_TRUE(problems.empty()) << problems.size() << " of " << cases.size() << " cases:\n" << join(problems);
}

TEST(BadInputSweep, DeviceTensorsAreNotReadFromHostCode) {
  if (!tiny::cuda::is_available()) GTEST_SKIP() << "needs the emulated GPU (TINY_EMULATED_GPUS >= 1)";
  const Tensor g = tiny::ones({3}).to(tiny::Device("cuda:0"));
  // (item() and to_vector() copy to the host first, as PyTorch's item() and tolist() do.)
  const std::vector<Case> cases = {
      {"data_ptr of a cuda tensor read as float", Kind::Device, [&] { (void)g.data_ptr<float>()[0]; }, ".cpu()"},
      {"data_ptr of a cuda tensor as int64", Kind::Device, [&] { (void)g.data_ptr<int64_t>(); }, ""},
  };
  const auto problems = sweep(cases);
  EXPECT_TRUE(problems.empty()) << problems.size() << " of " << cases.size() << " cases:\n" << join(problems);
}

TEST(BadInputSweep, OptimizersAndDataOptions) {
  tiny::nn::Linear layer(3, 2);
  auto data = std::make_shared<tiny::data::TensorDataset>(tiny::randn({8, 3}), tiny::zeros({8}));
  const std::vector<Case> cases = {
      {"SGD without lr", Kind::Value, [&] { tiny::optim::SGD(layer.parameters(), tiny::optim::SGDOptions{}); }, "lr"},
      {"SGD lr -1", Kind::Value,
       [&] {
         tiny::optim::SGDOptions o;
         o.lr = -1;
         tiny::optim::SGD(layer.parameters(), o);
       },
       "-1"},
      {"Adam beta1 1.0", Kind::Value,
       [&] {
         tiny::optim::AdamOptions o;
         o.betas = {1.0, 0.999};
         tiny::optim::Adam(layer.parameters(), o);
       },
       ""},
      {"Adam eps -1", Kind::Value,
       [&] {
         tiny::optim::AdamOptions o;
         o.eps = -1;
         tiny::optim::Adam(layer.parameters(), o);
       },
       ""},
      {"DataLoader batch_size 0", Kind::Value,
       [&] {
         tiny::data::DataLoaderOptions o;
         o.batch_size = 0;
         tiny::data::DataLoader(data, o);
       },
       "batch_size"},
      {"TensorDataset of 8 inputs and 7 targets", Kind::Shape,
       [&] { tiny::data::TensorDataset(tiny::randn({8, 3}), tiny::zeros({7})); }, ""},
      {"DistributedSampler rank 2 of 2", Kind::Value, [&] { tiny::data::DistributedSampler(8, 2, 2); }, ""},
      {"Linear(-1, 2)", Kind::Value, [&] { tiny::nn::Linear(-1, 2); }, "-1"},
  };
  const auto problems = sweep(cases);
  EXPECT_TRUE(problems.empty()) << problems.size() << " of " << cases.size() << " cases:\n" << join(problems);
}
