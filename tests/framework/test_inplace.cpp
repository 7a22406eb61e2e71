// In-place ops inside the autograd graph (issue 23, item 2): add_, sub_,
// mul_, div_, clamp_, relu_, sigmoid_, tanh_, zero_, fill_, copy_ on tensors
// that are part of a graph and on views of them (CopySlices), a residual
// block, nn::ReLU(inplace). Checked against PyTorch 1.13
// (tests/parity/inplace_fixtures, written by make_inplace_fixtures.py) forward
// and backward, with contiguous and non-contiguous inputs, on the CPU and the
// emulated GPU; float64 gradient checks; the CPU and the emulated GPU giving
// the same bits; the version-counter error raised exactly where PyTorch raises
// it (version_errors.txt), naming the tensor, the node and both versions; the
// errors for what autograd refuses.
//
// Tolerance against PyTorch: |tiny - torch| <= 1e-5 (1 + |torch|) (float32;
// the same formulas, summed in another order by the matrix products).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "gradcheck.h"
#include "tiny/cuda.h"
#include "tiny/io.h"
#include "tiny/nn/nn.h"
#include "tiny/ops.h"
#include "tiny/optim/optim.h"

#ifndef TINY_PARITY_DIR
#define TINY_PARITY_DIR "tests/parity/fixtures"
#endif

namespace fs = std::filesystem;
namespace F = tiny::nn::functional;
using tiny::Tensor;
using Inputs = std::map<std::string, Tensor>;

namespace {

const std::string kDir = std::string(TINY_PARITY_DIR) + "/../inplace_fixtures";

struct Case {
  std::function<Tensor(const Inputs&)> fn;
  std::vector<std::string> grads;  // inputs that require grad
};

// Mirrors CASES in tests/parity/make_inplace_fixtures.py.
const std::map<std::string, Case>& table() {
  static const std::map<std::string, Case> cases = {
      {"add_", {[](const Inputs& a) {
                  Tensor h = a.at("x") * 2.0;
                  h.add_(a.at("y"), 0.5);
                  return h * h;
                }, {"x", "y"}}},
      {"add_broadcast", {[](const Inputs& a) {
                           Tensor h = a.at("x") * 2.0;
                           h.add_(a.at("b"));
                           return h.tanh();
                         }, {"x", "b"}}},
      {"sub_", {[](const Inputs& a) {
                  Tensor h = a.at("x") * 1.5;
                  h.sub_(a.at("y"), 2);
                  return h * h;
                }, {"x", "y"}}},
      {"mul_", {[](const Inputs& a) {
                  Tensor h = a.at("x") * 1.5;
                  h.mul_(a.at("y"));
                  return h.sigmoid();
                }, {"x", "y"}}},
      {"mul_constant_other", {[](const Inputs& a) {
                                Tensor h = a.at("x") * 1.5;
                                h.mul_(a.at("c"));
                                return h * h;
                              }, {"x"}}},
      {"div_", {[](const Inputs& a) {
                  Tensor h = a.at("x") + 1.0;
                  h.div_(a.at("y"));
                  return h * h;
                }, {"x", "y"}}},
      {"scalar_chain", {[](const Inputs& a) {
                          Tensor h = a.at("x") * 1.0;
                          h.mul_(3).add_(1).div_(4).sub_(a.at("y"));
                          return h * h;
                        }, {"x", "y"}}},
      {"clamp_", {[](const Inputs& a) {
                    Tensor h = a.at("x") * 2.0;
                    h.clamp_(-0.8, 0.6);
                    return h * a.at("w");
                  }, {"x"}}},
      {"relu_after_mm", {[](const Inputs& a) {
                           Tensor h = a.at("x").matmul(a.at("w"));
                           h.relu_();
                           return h;
                         }, {"x", "w"}}},
      {"sigmoid_", {[](const Inputs& a) {
                      Tensor h = a.at("x") * 2.0;
                      h.sigmoid_();
                      return h * a.at("w");
                    }, {"x"}}},
      {"tanh_", {[](const Inputs& a) {
                   Tensor h = a.at("x") + a.at("y");
                   h.tanh_();
                   return h * a.at("w");
                 }, {"x", "y"}}},
      {"leaky_relu_inplace", {[](const Inputs& a) {
                                Tensor h = a.at("x") * 2.0;
                                F::leaky_relu(h, 0.1, true);
                                return h * a.at("w");
                              }, {"x"}}},
      {"zero_", {[](const Inputs& a) {
                   Tensor h = a.at("x") * 2.0;
                   h.zero_();
                   return h + a.at("y");
                 }, {"x", "y"}}},
      {"fill_", {[](const Inputs& a) {
                   Tensor h = a.at("x") * 2.0;
                   h.fill_(0.5);
                   return h * a.at("y");
                 }, {"x", "y"}}},
      {"copy_broadcast", {[](const Inputs& a) {
                            Tensor h = a.at("x") * 2.0;
                            h.copy_(a.at("b"));
                            return h * h;
                          }, {"x", "b"}}},
      {"view_relu_", {[](const Inputs& a) {
                        Tensor h = a.at("x") * 1.0;
                        h.t().relu_();
                        return h * a.at("w");
                      }, {"x"}}},
      {"slice_add_", {[](const Inputs& a) {
                        Tensor h = a.at("x") * 1.0;
                        h.slice(0, 1, 3).add_(a.at("y"));
                        return h.sigmoid();
                      }, {"x", "y"}}},
      {"column_mul_", {[](const Inputs& a) {
                         Tensor h = a.at("x") * 1.0;
                         h.select(1, 2).mul_(a.at("y"));
                         return h * h;
                       }, {"x", "y"}}},
      {"view_used_after_base_changed", {[](const Inputs& a) {
                                          Tensor h = a.at("x") * 1.0;
                                          Tensor v = h.t();
                                          h.relu_();
                                          return v * a.at("w");
                                        }, {"x"}}},
      {"copy_into_constant_slice", {[](const Inputs& a) {
                                      const Tensor& y = a.at("y");
                                      Tensor h = tiny::zeros({3, 4}, tiny::TensorOptions(y.dtype()).device(y.device()));
                                      h.select(0, 1).copy_(y);
                                      return h * a.at("w");
                                    }, {"y"}}},
      {"residual", {[](const Inputs& a) {
                      Tensor out = F::linear(a.at("x"), a.at("w1"), a.at("b1"));
                      out.add_(a.at("x"));
                      out.relu_();
                      return F::linear(out, a.at("w2"));
                    }, {"x", "w1", "b1", "w2"}}},
  };
  return cases;
}

Tensor non_contiguous(const Tensor& t) {
  if (t.dim() < 2) return t;
  return t.transpose(0, t.dim() - 1).contiguous().transpose(0, t.dim() - 1);
}

void expect_close(const Tensor& actual, const Tensor& expected, const std::string& what) {
  ASSERT_TRUE(actual.defined()) << what << " is undefined";
  ASSERT_EQ(actual.sizes(), expected.sizes()) << what;
  const auto a = actual.cpu().to(tiny::kFloat64).contiguous().to_vector<double>();
  const auto e = expected.to(tiny::kFloat64).contiguous().to_vector<double>();
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_NEAR(a[i], e[i], 1e-5 * (1 + std::abs(e[i]))) << what << " element " << i;
  }
}

// The inputs of case `name` in `dtype` on `device`, contiguous or not; those in
// the case's grads require grad.
Inputs load_inputs(const std::string& name, const tiny::Device& device, tiny::Dtype dtype, bool contiguous) {
  Inputs in;
  for (const auto& entry : fs::directory_iterator(kDir + "/" + name)) {
    const std::string stem = entry.path().stem().string();
    if (stem == "out" || stem.rfind("grad_", 0) == 0) continue;
    Tensor t = tiny::io::load_npy(entry.path().string()).to(dtype).to(device);
    in[stem] = contiguous ? t : non_contiguous(t);
  }
  for (const auto& g : table().at(name).grads) in.at(g).requires_grad_(true);
  return in;
}

// Runs case `name` and returns its output followed by the gradients of its inputs.
std::vector<Tensor> run(const std::string& name, const tiny::Device& device, bool contiguous) {
  const Case& c = table().at(name);
  Inputs in = load_inputs(name, device, tiny::kFloat32, contiguous);
  Tensor out = c.fn(in);
  out.backward(tiny::io::load_npy(kDir + "/" + name + "/grad_out.npy").to(device));
  std::vector<Tensor> results{out};
  for (const auto& g : c.grads) results.push_back(in.at(g).grad());
  return results;
}

void expect_matches_pytorch(const std::string& name, const tiny::Device& device, bool contiguous) {
  SCOPED_TRACE(name + " on " + device.str() + (contiguous ? "" : " non-contiguous"));
  const std::vector<Tensor> results = run(name, device, contiguous);
  const std::string dir = kDir + "/" + name + "/";
  expect_close(results[0], tiny::io::load_npy(dir + "out.npy"), "out");
  const auto& grads = table().at(name).grads;
  for (size_t i = 0; i < grads.size(); ++i) {
    expect_close(results[i + 1], tiny::io::load_npy(dir + "grad_" + grads[i] + ".npy"), "grad_" + grads[i]);
  }
}

bool have_gpu() { return tiny::cuda::device_count() > 0; }

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const tiny::Error& e) {
    return e.what();
  }
  return "";
}

void expect_error(const std::function<void()>& fn, const std::vector<std::string>& parts) {
  const std::string message = error_of(fn);
  ASSERT_FALSE(message.empty()) << "expected an error containing \"" << parts.front() << "\"";
  for (const auto& p : parts) EXPECT_NE(message.find(p), std::string::npos) << "missing \"" << p << "\" in: " << message;
}

Tensor leaf(const tiny::IntArrayRef& shape) { return tiny::randn(shape).requires_grad_(true); }

}  // namespace

// ---- parity with PyTorch ------------------------------------------------------------------------

TEST(InplaceParity, TableCoversEveryFixture) {
  std::set<std::string> on_disk, in_table;
  for (const auto& entry : fs::directory_iterator(kDir)) {
    if (entry.is_directory()) on_disk.insert(entry.path().filename().string());
  }
  for (const auto& [name, c] : table()) in_table.insert(name);
  EXPECT_EQ(on_disk, in_table);
}

TEST(InplaceParity, MatchesPyTorchOnTheCpuContiguousAndNot) {
  for (const auto& [name, c] : table()) {
    expect_matches_pytorch(name, tiny::Device("cpu"), true);
    expect_matches_pytorch(name, tiny::Device("cpu"), false);
  }
}

TEST(InplaceParity, MatchesPyTorchOnTheEmulatedGpu) {
  if (!have_gpu()) GTEST_SKIP() << "needs an (emulated) GPU";
  for (const auto& [name, c] : table()) {
    expect_matches_pytorch(name, tiny::Device("cuda:0"), true);
    expect_matches_pytorch(name, tiny::Device("cuda:0"), false);
  }
}

TEST(InplaceParity, CpuAndEmulatedGpuGiveTheSameBits) {
  if (!have_gpu()) GTEST_SKIP() << "needs an (emulated) GPU";
  for (const auto& [name, c] : table()) {
    SCOPED_TRACE(name);
    const std::vector<Tensor> cpu = run(name, tiny::Device("cpu"), false);
    const std::vector<Tensor> gpu = run(name, tiny::Device("cuda:0"), false);
    ASSERT_EQ(cpu.size(), gpu.size());
    for (size_t i = 0; i < cpu.size(); ++i) EXPECT_TRUE(tiny::equal(cpu[i], gpu[i].cpu())) << "result " << i;
  }
}

TEST(InplaceParity, Float64GradientsMatchFiniteDifferences) {
  for (const auto& [name, c] : table()) {
    SCOPED_TRACE(name);
    const Inputs in = load_inputs(name, tiny::Device("cpu"), tiny::kFloat64, false);
    std::vector<std::string> keys;
    std::vector<Tensor> inputs;
    for (const auto& [k, t] : in) {
      keys.push_back(k);
      inputs.push_back(t);
    }
    const Case& fn_case = c;
    EXPECT_TRUE(tiny_test::gradcheck([&keys, &fn_case](const std::vector<Tensor>& xs) {
      Inputs a;
      for (size_t i = 0; i < keys.size(); ++i) a[keys[i]] = xs[i];
      return fn_case.fn(a);
    }, inputs));
  }
}

// ---- the version counter: raised where PyTorch raises ---------------------------------------------

namespace {

// Mirrors VERSION_CASES in tests/parity/make_inplace_fixtures.py; each returns the loss.
const std::map<std::string, std::function<Tensor()>>& version_table() {
  static const std::map<std::string, std::function<Tensor()>> cases = {
      {"relu_after_sigmoid", [] {
         Tensor y = leaf({3}).sigmoid();
         y.relu_();
         return y.sum();
       }},
      {"add_after_mm", [] {
         Tensor y = leaf({2, 3}).matmul(leaf({3, 4}));
         y.add_(1);
         return y.sum();
       }},
      {"sigmoid_after_relu", [] {
         Tensor y = leaf({3}).relu();
         y.sigmoid_();
         return y.sum();
       }},
      {"mul_input_changed", [] {
         Tensor h = leaf({3}) * 2.0;
         Tensor z = h * h;
         h.relu_();
         return z.sum();
       }},
      {"mul_by_constant_input_changed", [] {
         Tensor h = leaf({3}) * 2.0;
         Tensor z = h * tiny::randn({3});
         h.relu_();
         return z.sum();
       }},
      {"add_input_changed", [] {
         Tensor h = leaf({3}) * 2.0;
         Tensor z = h + h;
         h.relu_();
         return z.sum();
       }},
      {"relu_then_mul_scalar", [] {
         Tensor y = leaf({3}) * 1.0;
         y.relu_();
         y.mul_(2);
         return y.sum();
       }},
      {"exp_then_add", [] {
         Tensor y = leaf({3}).exp();
         y.add_(1);
         return y.sum();
       }},
      {"mm_constant_weight_input_changed", [] {
         Tensor h = leaf({2, 3}) * 1.0;
         Tensor z = h.matmul(tiny::randn({3, 4}));
         h.relu_();
         return z.sum();
       }},
      {"mul_other_changed_after_mul_", [] {
         Tensor w = leaf({3}) * 1.0;
         Tensor y = leaf({3}) * 1.0;
         y.mul_(w);
         w.add_(1);
         return y.sum();
       }},
      {"log_softmax_output_changed", [] {
         Tensor z = leaf({2, 3}).log_softmax(1);
         z.mul_(2);
         return z.sum();
       }},
      {"linear_bias_changed", [] {
         Tensor b = leaf({4}) * 1.0;
         Tensor z = F::linear(leaf({2, 3}), leaf({4, 3}), b);
         b.add_(1);
         return z.sum();
       }},
  };
  return cases;
}

// The part of PyTorch's message after the tensor's type: "[3]], which is output 0 of X, is at version 1; ...".
std::string after_type(const std::string& torch_message) {
  const size_t open = torch_message.find("Tensor [");
  return open == std::string::npos ? "" : torch_message.substr(open + 7);
}

}  // namespace

TEST(InplaceVersionCounter, RaisedExactlyWherePyTorchRaisesIt) {
  std::ifstream in(kDir + "/version_errors.txt");
  ASSERT_TRUE(in) << "missing " << kDir << "/version_errors.txt";
  std::set<std::string> seen;
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream words(line);
    std::string name, outcome;
    words >> name >> outcome;
    SCOPED_TRACE(name);
    ASSERT_TRUE(version_table().count(name)) << "no C++ twin for the scenario " << name;
    seen.insert(name);
    Tensor loss = version_table().at(name)();
    const std::string message = error_of([&] { loss.backward(); });
    if (outcome == "fine") {
      EXPECT_EQ(message, "") << "PyTorch runs this backward";
      continue;
    }
    ASSERT_EQ(outcome, "raises");
    const std::string torch_message = line.substr(name.size() + outcome.size() + 2);
    // tiny names the dtype its own way (float32, not torch.FloatTensor); the rest is PyTorch's text.
    EXPECT_NE(message.find("one of the variables needed for gradient computation has been modified by an inplace "
                           "operation: [float32 " + after_type(torch_message)),
              std::string::npos)
        << "tiny: " << message << "\ntorch: " << torch_message;
    EXPECT_NE(message.find("Hint:"), std::string::npos) << message;
  }
  EXPECT_EQ(seen.size(), version_table().size());
}

TEST(InplaceVersionCounter, TheHintNamesTheSavingNodeAndTheFix) {
  Tensor y = leaf({2, 3}).sigmoid();
  y.relu_();
  expect_error([&] { y.sum().backward(); },
               {"[float32 [2, 3]], which is output 0 of SigmoidBackward0, is at version 1; expected version 0",
                "SigmoidBackward0 saved this tensor", "use the out-of-place op", "clone()"});
}

// ---- what autograd refuses ------------------------------------------------------------------------

TEST(InplaceErrors, LeafAndViewOfLeafThatRequireGrad) {
  Tensor w = leaf({3, 4});
  const std::vector<float> before = w.to_vector<float>();
  expect_error([&] { w.relu_(); }, {"a leaf Variable that requires grad is being used in an in-place operation.",
                                    "[3, 4]", "NoGradGuard"});
  expect_error([&] { w.select(0, 1).add_(1); },
               {"a view of a leaf Variable that requires grad is being used in an in-place operation.", "[4]"});
  EXPECT_EQ(w.to_vector<float>(), before);  // refused before writing
  tiny::NoGradGuard no_grad;  // how optimizers change parameters
  w.select(0, 1).zero_();
  w.relu_();
}

TEST(InplaceErrors, AViewMadeUnderNoGradCannotBeChangedWithGradOn) {
  Tensor h = leaf({3, 4}) * 1.0;
  Tensor v;
  {
    tiny::NoGradGuard no_grad;
    v = h.select(0, 0);
  }
  expect_error([&] { v.mul_(2); }, {"A view was created in no_grad mode and is being modified inplace with grad mode "
                                    "enabled"});
}

TEST(InplaceErrors, AnExpandedViewIsRefused) {
  Tensor h = leaf({1, 4}) * 1.0;
  expect_error([&] { h.expand({3, 4}).add_(1); }, {"more than one element of the written-to tensor refers to a "
                                                   "single memory location", "clone()"});
}

TEST(InplaceErrors, BackwardTwiceThroughAnInplaceOpSaysRetainGraph) {
  Tensor x = leaf({3});
  Tensor y = x * 1.0;
  y.relu_();
  Tensor loss = y.sum();
  loss.backward();
  expect_error([&] { loss.backward(); }, {"retain_graph"});
}

// ---- the graph an in-place op leaves -----------------------------------------------------------------

TEST(InplaceGraph, TheOpBecomesTheTensorsGradFnAndBumpsItsVersion) {
  Tensor x = leaf({3});
  Tensor y = x * 2.0;
  EXPECT_EQ(y.grad_fn()->name(), "MulBackward0");
  const uint32_t v0 = y.version();
  y.relu_();
  EXPECT_EQ(y.version(), v0 + 1);
  EXPECT_EQ(y.grad_fn()->name(), "ReluBackward0");
  ASSERT_EQ(y.grad_fn()->next_edges().size(), 1u);
  EXPECT_EQ(y.grad_fn()->next_edges()[0].function->name(), "MulBackward0");
  Tensor c = tiny::zeros({3});
  c.add_(y);  // a tensor outside the graph joins it
  EXPECT_TRUE(c.requires_grad());
  EXPECT_EQ(c.grad_fn()->name(), "AddBackward0");
  Tensor h = x * 1.0;
  h.select(0, 1).mul_(3);
  EXPECT_EQ(h.grad_fn()->name(), "CopySlices");
}

TEST(InplaceGraph, NoGradInplaceIsNotRecorded) {
  Tensor x = leaf({3});
  Tensor y = x * 2.0;
  {
    tiny::NoGradGuard no_grad;
    y.add_(1);
  }
  EXPECT_EQ(y.grad_fn()->name(), "MulBackward0");
  Tensor plain = tiny::ones({3});
  plain.mul_(tiny::ones({3}));
  EXPECT_FALSE(plain.requires_grad());
}

// ---- nn::ReLU(inplace) and a residual block --------------------------------------------------------------

TEST(InplaceModules, ReluInplaceOverwritesItsInputAndPrintsLikePyTorch) {
  tiny::nn::ReLU relu(true);
  Tensor x = tiny::tensor({-1.0f, 2.0f, -3.0f});
  Tensor y = relu.forward(x);
  EXPECT_TRUE(y.is_same(x));
  EXPECT_EQ(x.to_vector<float>(), (std::vector<float>{0.0f, 2.0f, 0.0f}));
  EXPECT_EQ(tiny::nn::repr(relu), "ReLU(inplace=True)");
  EXPECT_EQ(tiny::nn::repr(tiny::nn::ReLU()), "ReLU()");
  auto copy = std::dynamic_pointer_cast<tiny::nn::ReLU>(relu.clone());
  ASSERT_TRUE(copy);
  EXPECT_TRUE(copy->inplace);
}

namespace {

// Trains a two-layer MLP with a residual connection for a few SGD steps, the
// residual and the ReLU in place or not; returns the losses then the final weights.
std::vector<float> train_residual(bool inplace, const tiny::Device& device) {
  tiny::manual_seed(7);
  auto fc1 = std::make_shared<tiny::nn::Linear>(8, 8);
  auto fc2 = std::make_shared<tiny::nn::Linear>(8, 3);
  tiny::nn::Sequential model(fc1, fc2);
  model.to(device);
  tiny::nn::ReLU relu(inplace);
  tiny::optim::SGDOptions options;
  options.lr = 0.1;
  tiny::optim::SGD sgd(model.parameters(), options);
  const Tensor x = tiny::randn({16, 8}).to(device);
  const Tensor target = tiny::randint(0, 3, {16}).to(device);
  std::vector<float> record;
  for (int step = 0; step < 5; ++step) {
    sgd.zero_grad();
    Tensor h = fc1->forward(x);
    if (inplace) {
      h.add_(x);  // torchvision's `out += identity`
    } else {
      h = h + x;
    }
    h = relu.forward(h);
    Tensor loss = F::cross_entropy(fc2->forward(h), target);
    loss.backward();
    sgd.step();
    record.push_back(loss.item<float>());
  }
  for (const Tensor& p : model.parameters()) {
    for (float v : p.cpu().to_vector<float>()) record.push_back(v);
  }
  return record;
}

}  // namespace

TEST(InplaceModules, AResidualBlockTrainsTheSameInPlaceOrNot) {
  const std::vector<float> inplace = train_residual(true, tiny::Device("cpu"));
  const std::vector<float> out_of_place = train_residual(false, tiny::Device("cpu"));
  EXPECT_EQ(inplace, out_of_place);
  EXPECT_LT(inplace[4], inplace[0]);  // and it learns
  if (have_gpu()) EXPECT_EQ(train_residual(true, tiny::Device("cuda:0")), inplace);
}

TEST(InplaceModules, LeakyReluAndDropoutInplaceGiveTheOutOfPlaceGradients) {
  for (const bool dropout : {false, true}) {
    SCOPED_TRACE(dropout ? "Dropout(0.3, inplace)" : "LeakyReLU(0.2, inplace)");
    std::vector<std::vector<float>> grads;
    for (const bool inplace : {false, true}) {
      tiny::manual_seed(3);
      Tensor x = tiny::randn({4, 5}).requires_grad_(true);
      std::shared_ptr<tiny::nn::Module> layer;
      if (dropout) {
        layer = std::make_shared<tiny::nn::Dropout>(0.3, inplace);
      } else {
        layer = std::make_shared<tiny::nn::LeakyReLU>(0.2, inplace);
      }
      Tensor h = x * 1.5;
      Tensor y = layer->forward(h);
      EXPECT_EQ(y.is_same(h), inplace);
      (y * y).sum().backward();
      grads.push_back(x.grad().to_vector<float>());
    }
    EXPECT_EQ(grads[0], grads[1]);
  }
  EXPECT_EQ(tiny::nn::repr(tiny::nn::Dropout(0.5, true)), "Dropout(p=0.5, inplace=True)");
  Tensor h = tiny::randn({3}).requires_grad_(true) * 1.0;
  expect_error([&] { F::leaky_relu(h, -0.5, true); }, {"In-place leakyReLu backward calculation is triggered with a "
                                                       "negative slope which is not supported"});
}

TEST(InplaceGraph, RetainGradFollowsTheTensorToItsNewValue) {
  Tensor x = tiny::tensor({-1.0, 2.0, 3.0}).requires_grad_(true);
  Tensor y = x * 2.0;
  y.retain_grad();
  y.mul_(3);  // y's gradient is now the gradient of its new value (PyTorch: y.grad is ones)
  y.sum().backward();
  EXPECT_EQ(y.grad().to_vector<float>(), (std::vector<float>{1.0f, 1.0f, 1.0f}));
  EXPECT_EQ(x.grad().to_vector<float>(), (std::vector<float>{6.0f, 6.0f, 6.0f}));
}
