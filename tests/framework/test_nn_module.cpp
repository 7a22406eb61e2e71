// tiny::nn::Module: registration and dotted names, traversal order, train/eval,
// zero_grad, state_dict round trips and errors, in-place dtype/device moves,
// and printing in PyTorch's exact format.
//
// Expected strings for printing and load_state_dict errors were produced with
// Debian's PyTorch 1.13 (`print(torch.nn.Sequential(...))`); only the shape
// format differs where noted (tiny prints [2, 3], PyTorch torch.Size([2, 3])).

#include <gtest/gtest.h>

#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "tiny/nn/nn.h"
#include "tiny/tiny.h"

namespace {

namespace nn = tiny::nn;
using tiny::Tensor;

// The custom-module pattern of docs/custom_module.md: register children in the constructor, implement forward.
struct MLP : nn::Module {
  MLP(int64_t in, int64_t hidden, int64_t out) {
    fc1 = register_module("fc1", std::make_shared<nn::Linear>(in, hidden));
    fc2 = register_module("fc2", std::make_shared<nn::Linear>(hidden, out));
  }
  Tensor forward(const Tensor& x) override { return (*fc2)(tiny::relu((*fc1)(x))); }

  std::shared_ptr<nn::Linear> fc1, fc2;
};

// A module with its own parameter and buffers next to a child: checks per-module ordering.
struct WithBuffers : nn::Module {
  WithBuffers() {
    scale = register_parameter("scale", tiny::ones({3}));
    register_buffer("running_mean", tiny::zeros({3}));
    register_buffer("step", tiny::zeros({}, tiny::kInt64));
    register_buffer("scratch", tiny::zeros({2}), /*persistent=*/false);
    inner = register_module("inner", std::make_shared<nn::Linear>(3, 2));
  }
  std::string name() const override { return "WithBuffers"; }
  Tensor scale;
  std::shared_ptr<nn::Linear> inner;
};

std::vector<std::string> names_of(const std::vector<std::pair<std::string, Tensor>>& named) {
  std::vector<std::string> out;
  for (const auto& n : named) out.push_back(n.first);
  return out;
}

std::vector<std::string> keys_of(const tiny::StateDict& sd) {
  std::vector<std::string> out;
  for (const auto& [k, v] : sd) out.push_back(k);
  return out;
}

std::string printed(const nn::Module& m) {
  std::ostringstream s;
  s << m;
  return s.str();
}

std::shared_ptr<nn::Sequential> nested_model() {
  return std::make_shared<nn::Sequential>(
      std::make_shared<nn::Linear>(3, 4), std::make_shared<nn::ReLU>(),
      std::make_shared<nn::Sequential>(std::make_shared<nn::Linear>(4, 2), std::make_shared<nn::Tanh>()));
}

// A thing that holds parameter handles the way an optimizer does, and updates them in place.
struct HandleHolder {
  std::vector<Tensor> params;
  void step(double lr) {
    tiny::NoGradGuard no_grad;
    for (auto& p : params) p.sub_(p.grad(), lr);
  }
};

Tensor input(const tiny::IntArrayRef& shape, uint64_t seed, tiny::Dtype dtype = tiny::kFloat32) {
  tiny::Generator g(seed);
  return tiny::randn(shape, dtype, g);
}

// ---- registration and names ----------------------------------------------------------

TEST(NnModule, CustomModuleRegistersChildrenAndRuns) {
  MLP mlp(4, 8, 2);
  EXPECT_EQ(names_of(mlp.named_parameters()),
            (std::vector<std::string>{"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"}));
  ASSERT_EQ(mlp.parameters().size(), 4u);
  EXPECT_TRUE(mlp.parameters()[0].is_same(mlp.fc1->weight));
  EXPECT_TRUE(mlp.parameters()[3].is_same(mlp.fc2->bias));
  for (const Tensor& p : mlp.parameters()) {
    EXPECT_TRUE(p.requires_grad());
    EXPECT_TRUE(p.is_leaf());
  }

  Tensor x = input({5, 4}, 1);
  Tensor y = mlp(x);
  // The same computation written out by hand.
  Tensor h = tiny::matmul(x, mlp.fc1->weight.t()) + mlp.fc1->bias;
  Tensor want = tiny::matmul(tiny::relu(h), mlp.fc2->weight.t()) + mlp.fc2->bias;
  EXPECT_EQ(y.sizes(), (tiny::IntArrayRef{5, 2}));
  EXPECT_TRUE(tiny::allclose(y, want, 1e-5, 1e-6));

  // Gradients reach every parameter through the registered children.
  y.sum().backward();
  for (const auto& [name, p] : mlp.named_parameters()) EXPECT_TRUE(p.grad().defined()) << name;
}

TEST(NnModule, NestedDottedNamesFollowPyTorch) {
  auto model = nested_model();
  EXPECT_EQ(names_of(model->named_parameters()),
            (std::vector<std::string>{"0.weight", "0.bias", "2.0.weight", "2.0.bias"}));
  EXPECT_EQ(model->parameters().size(), 4u);
  EXPECT_EQ(model->parameters(/*recurse=*/false).size(), 0u);
  EXPECT_EQ(model->children().size(), 3u);
  std::vector<std::string> child_names;
  for (const auto& [n, c] : model->named_children()) child_names.push_back(n);
  EXPECT_EQ(child_names, (std::vector<std::string>{"0", "1", "2"}));
  std::vector<std::string> module_names;
  for (const auto& [n, c] : model->named_modules()) module_names.push_back(n);
  EXPECT_EQ(module_names, (std::vector<std::string>{"0", "1", "2", "2.0", "2.1"}));
}

TEST(NnModule, ParametersThenBuffersPerModule) {
  WithBuffers m;
  EXPECT_EQ(names_of(m.named_parameters()), (std::vector<std::string>{"scale", "inner.weight", "inner.bias"}));
  EXPECT_EQ(names_of(m.named_parameters(false)), (std::vector<std::string>{"scale"}));
  EXPECT_EQ(names_of(m.named_buffers()), (std::vector<std::string>{"running_mean", "step", "scratch"}));
  EXPECT_EQ(m.buffers().size(), 3u);
  for (const Tensor& b : m.buffers()) EXPECT_FALSE(b.requires_grad());
  // PyTorch's order: each module's parameters, then its persistent buffers, then its children.
  EXPECT_EQ(keys_of(m.state_dict()),
            (std::vector<std::string>{"scale", "running_mean", "step", "inner.weight", "inner.bias"}));
}

TEST(NnModule, RegistrationRejectsBadAndDuplicateNames) {
  nn::Module m;
  m.register_parameter("w", tiny::zeros({2}));
  EXPECT_THROW(m.register_parameter("w", tiny::zeros({2})), tiny::ValueError);
  EXPECT_THROW(m.register_buffer("w", tiny::zeros({2})), tiny::ValueError);
  EXPECT_THROW(m.register_module("w", std::make_shared<nn::ReLU>()), tiny::ValueError);
  EXPECT_THROW(m.register_parameter("a.b", tiny::zeros({2})), tiny::ValueError);
  EXPECT_THROW(m.register_parameter("", tiny::zeros({2})), tiny::ValueError);
  EXPECT_THROW(m.register_module("null", std::shared_ptr<nn::ReLU>()), tiny::ValueError);
  // Integer tensors cannot be trained.
  EXPECT_THROW(m.register_parameter("idx", tiny::zeros({2}, tiny::kInt64)), tiny::DtypeError);
  // A frozen parameter is listed but does not require grad.
  Tensor frozen = m.register_parameter("frozen", tiny::zeros({2}), /*requires_grad=*/false);
  EXPECT_FALSE(frozen.requires_grad());
  EXPECT_EQ(m.parameters().size(), 2u);
}

TEST(NnModule, RegisterParameterMakesALeaf) {
  nn::Module m;
  Tensor a = tiny::ones({3}, tiny::TensorOptions().requires_grad(true));
  Tensor computed = a * 2.0;  // not a leaf
  Tensor p = m.register_parameter("p", computed);
  EXPECT_TRUE(p.is_leaf());
  EXPECT_TRUE(p.requires_grad());
  EXPECT_EQ(p.to_vector<float>(), (std::vector<float>{2, 2, 2}));
}

TEST(NnModule, TiedParametersAreListedOnceButSavedUnderEachName) {
  nn::Module tied;
  Tensor w = tiny::ones({2, 2});
  Tensor first = tied.register_parameter("first", w);
  tied.register_parameter("second", first);
  EXPECT_EQ(names_of(tied.named_parameters()), (std::vector<std::string>{"first"}));
  EXPECT_EQ(keys_of(tied.state_dict()), (std::vector<std::string>{"first", "second"}));
}

// ---- modes and gradients ----------------------------------------------------------------

TEST(NnModule, TrainAndEvalRecurse) {
  auto model = std::make_shared<nn::Sequential>(
      std::make_shared<nn::Linear>(6, 6),
      std::make_shared<nn::Sequential>(std::make_shared<nn::Dropout>(0.5), std::make_shared<nn::ReLU>()));
  EXPECT_TRUE(model->is_training());
  model->eval();
  EXPECT_FALSE(model->is_training());
  for (const auto& [name, m] : model->named_modules()) EXPECT_FALSE(m->is_training()) << name;
  model->train();
  for (const auto& [name, m] : model->named_modules()) EXPECT_TRUE(m->is_training()) << name;
  model->train(false);
  EXPECT_FALSE(model->at<nn::Sequential>(1)->at<nn::Dropout>(0)->is_training());
}

TEST(NnModule, DropoutInsideAModelIsTheIdentityInEval) {
  auto drop = std::make_shared<nn::Dropout>(0.5);
  auto model = std::make_shared<nn::Sequential>(std::make_shared<nn::Flatten>(), drop);
  Tensor x = tiny::ones({4, 256});
  tiny::manual_seed(3);
  const std::vector<float> train_out = (*model)(x).to_vector<float>();
  int zeros = 0;
  for (float v : train_out) {
    EXPECT_TRUE(v == 0.0f || v == 2.0f) << v;
    zeros += v == 0.0f;
  }
  EXPECT_GT(zeros, 0);
  EXPECT_LT(zeros, 1024);
  model->eval();
  EXPECT_TRUE(tiny::equal((*model)(x), x));
}

TEST(NnModule, ZeroGradSetToNoneAndToZeros) {
  MLP mlp(3, 4, 2);
  mlp(input({2, 3}, 5)).sum().backward();
  for (const Tensor& p : mlp.parameters()) ASSERT_TRUE(p.grad().defined());

  const Tensor g0 = mlp.fc1->weight.grad();
  mlp.zero_grad(/*set_to_none=*/false);
  for (const Tensor& p : mlp.parameters()) {
    ASSERT_TRUE(p.grad().defined());
    for (float v : p.grad().to_vector<float>()) EXPECT_EQ(v, 0.0f);
  }
  EXPECT_TRUE(mlp.fc1->weight.grad().is_same(g0));  // zeroed in place, same tensor

  mlp(input({2, 3}, 6)).sum().backward();
  mlp.zero_grad();
  for (const Tensor& p : mlp.parameters()) EXPECT_FALSE(p.grad().defined());
}

TEST(NnModule, DefaultForwardNamesTheModule) {
  struct NoForward : nn::Module {};
  NoForward m;
  try {
    m(tiny::ones({1}));
    FAIL() << "expected NotImplemented";
  } catch (const tiny::NotImplemented& e) {
    EXPECT_NE(std::string(e.what()).find("NoForward"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("forward"), std::string::npos) << e.what();
  }
}

// ---- state_dict --------------------------------------------------------------------------

TEST(NnModule, StateDictRoundTripGivesIdenticalOutputs) {
  tiny::manual_seed(1);
  MLP a(4, 8, 3);
  tiny::manual_seed(2);
  MLP b(4, 8, 3);
  Tensor x = input({6, 4}, 11);
  ASSERT_FALSE(tiny::equal(a(x), b(x)));

  const tiny::StateDict sd = a.state_dict();
  EXPECT_EQ(keys_of(sd), (std::vector<std::string>{"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"}));
  for (const auto& [k, v] : sd) EXPECT_FALSE(v.requires_grad()) << k;
  const nn::LoadStateDictResult r = b.load_state_dict(sd);
  EXPECT_TRUE(r.missing_keys.empty());
  EXPECT_TRUE(r.unexpected_keys.empty());
  EXPECT_TRUE(tiny::equal(a(x), b(x)));
  // Copied, not shared: changing a afterwards leaves b alone.
  {
    tiny::NoGradGuard no_grad;
    a.fc1->weight.fill_(0.0);
  }
  EXPECT_FALSE(tiny::equal(a(x), b(x)));
}

TEST(NnModule, StateDictSharesMemoryWithTheModule) {
  nn::Linear lin(2, 2);
  const tiny::StateDict sd = lin.state_dict();
  {
    tiny::NoGradGuard no_grad;
    lin.weight.fill_(7.0);
  }
  for (float v : sd.at("weight").to_vector<float>()) EXPECT_EQ(v, 7.0f);
}

TEST(NnModule, LoadStateDictIsInPlaceForHandleHolders) {
  tiny::manual_seed(4);
  MLP src(3, 5, 2);
  tiny::manual_seed(5);
  MLP dst(3, 5, 2);
  HandleHolder holder{dst.parameters()};
  const Tensor w = dst.fc1->weight;
  const void* data_before = w.raw_data_ptr();

  dst.load_state_dict(src.state_dict());
  EXPECT_TRUE(holder.params[0].is_same(dst.fc1->weight));
  EXPECT_EQ(w.raw_data_ptr(), data_before);  // same memory, new values
  EXPECT_TRUE(tiny::equal(holder.params[0], src.fc1->weight));
  EXPECT_TRUE(holder.params[0].requires_grad());

  // A step through the held handles changes the model.
  Tensor x = input({4, 3}, 8);
  const Tensor before = dst(x).detach().clone();
  dst(x).sum().backward();
  holder.step(0.1);
  EXPECT_FALSE(tiny::equal(dst(x), before));
}

TEST(NnModule, LoadStateDictReportsMissingUnexpectedAndMisshapedKeys) {
  auto model = std::make_shared<nn::Sequential>(std::make_shared<nn::Linear>(3, 2), std::make_shared<nn::ReLU>(),
                                                std::make_shared<nn::Linear>(2, 4));
  const tiny::StateDict good = model->state_dict();
  std::vector<std::vector<float>> before;
  for (const Tensor& p : model->parameters()) before.push_back(p.to_vector<float>());

  tiny::StateDict bad;
  bad.insert("0.weight", tiny::zeros({5, 3}));
  bad.insert("0.bias", tiny::zeros({2}));
  bad.insert("2.weight", tiny::zeros({4, 2}));
  bad.insert("3.weight", tiny::zeros({1}));
  try {
    model->load_state_dict(bad);
    FAIL() << "expected tiny::Error";
  } catch (const tiny::Error& e) {
    // PyTorch 1.13's message, with tiny's shape format.
    EXPECT_EQ(std::string(e.what()),
              "Error(s) in loading state_dict for Sequential:\n"
              "\tMissing key(s) in state_dict: \"2.bias\". \n"
              "\tUnexpected key(s) in state_dict: \"3.weight\". \n"
              "\tsize mismatch for 0.weight: copying a param with shape [5, 3] from checkpoint, the shape in "
              "current model is [2, 3].");
  }
  // Nothing was copied: the valid "2.weight" zeros did not land either.
  const auto params = model->parameters();
  for (size_t i = 0; i < params.size(); ++i) EXPECT_EQ(params[i].to_vector<float>(), before[i]) << i;

  // Not strict: a shape mismatch still throws (as in PyTorch)...
  try {
    model->load_state_dict(bad, /*strict=*/false);
    FAIL() << "expected tiny::Error";
  } catch (const tiny::Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("size mismatch for 0.weight"), std::string::npos) << msg;
    EXPECT_EQ(msg.find("Missing key"), std::string::npos) << msg;
  }
  // ...but missing and unexpected keys are returned, and the rest is loaded.
  tiny::StateDict partial;
  partial.insert("0.weight", tiny::full({2, 3}, 1.5));
  partial.insert("extra", tiny::zeros({1}));
  const nn::LoadStateDictResult r = model->load_state_dict(partial, /*strict=*/false);
  EXPECT_EQ(r.missing_keys, (std::vector<std::string>{"0.bias", "2.weight", "2.bias"}));
  EXPECT_EQ(r.unexpected_keys, (std::vector<std::string>{"extra"}));
  for (float v : model->at<nn::Linear>(0)->weight.to_vector<float>()) EXPECT_EQ(v, 1.5f);
}

TEST(NnModule, LoadStateDictConvertsDtypes) {
  nn::Linear lin(2, 1);
  tiny::StateDict sd;
  sd.insert("weight", tiny::tensor({0.25, -0.5}, tiny::kFloat64).reshape({1, 2}));
  sd.insert("bias", tiny::tensor({2.0}, tiny::kFloat64));
  lin.load_state_dict(sd);
  EXPECT_EQ(lin.weight.dtype(), tiny::kFloat32);
  EXPECT_EQ(lin.weight.to_vector<float>(), (std::vector<float>{0.25f, -0.5f}));
  EXPECT_EQ(lin.bias.to_vector<float>(), (std::vector<float>{2.0f}));
}

// ---- to(dtype) and to(device) -----------------------------------------------------------------

TEST(NnModule, ToFloat64IsInPlace) {
  tiny::manual_seed(9);
  WithBuffers m;
  HandleHolder holder{m.parameters()};
  const Tensor w = m.inner->weight;
  const std::vector<double> values = w.to_vector<double>();  // float32 values, widened exactly
  Tensor x = input({2, 3}, 12);
  (*m.inner)(x).sum().backward();
  ASSERT_EQ(w.grad().dtype(), tiny::kFloat32);

  m.to(tiny::kFloat64);
  for (const Tensor& p : holder.params) {
    EXPECT_EQ(p.dtype(), tiny::kFloat64);
    EXPECT_TRUE(p.requires_grad());
    EXPECT_TRUE(p.is_leaf());
  }
  EXPECT_TRUE(holder.params[1].is_same(m.inner->weight));
  EXPECT_EQ(w.dtype(), tiny::kFloat64);
  EXPECT_EQ(w.grad().dtype(), tiny::kFloat64);  // gradients follow, as in PyTorch
  // The holder reads float64 data that equals the float32 values.
  const double* d = holder.params[1].data_ptr<double>();
  for (size_t i = 0; i < values.size(); ++i) EXPECT_EQ(d[i], values[i]);
  // Floating buffers converted, integer buffers left alone (PyTorch's module.to(dtype)).
  const auto buffers = m.named_buffers();
  EXPECT_EQ(buffers[0].second.dtype(), tiny::kFloat64);
  EXPECT_EQ(buffers[1].second.dtype(), tiny::kInt64);

  // The model now computes in float64, and backward reaches the held handles.
  m.zero_grad();
  Tensor y = (*m.inner)(x.to(tiny::kFloat64));
  EXPECT_EQ(y.dtype(), tiny::kFloat64);
  y.sum().backward();
  ASSERT_TRUE(holder.params[1].grad().defined());
  EXPECT_EQ(holder.params[1].grad().dtype(), tiny::kFloat64);
  // d(sum(x W^T + b))/dW[j, k] = sum_i x[i, k].
  const std::vector<double> xv = x.to_vector<double>();
  const std::vector<double> g = holder.params[1].grad().to_vector<double>();
  for (int64_t j = 0; j < 2; ++j) {
    for (int64_t k = 0; k < 3; ++k) EXPECT_NEAR(g[j * 3 + k], xv[k] + xv[3 + k], 1e-6);
  }
}

TEST(NnModule, ToSameDtypeAndCpuKeepStorage) {
  nn::Linear lin(3, 3);
  const void* data = lin.weight.raw_data_ptr();
  lin.to(tiny::kFloat32);
  lin.to(tiny::Device("cpu"));
  EXPECT_EQ(lin.weight.raw_data_ptr(), data);
  EXPECT_THROW(lin.to(tiny::kInt64), tiny::DtypeError);
  EXPECT_EQ(lin.weight.dtype(), tiny::kFloat32);
}

// PyTorch's model.cuda() / x.cuda() and model.cpu(): the current GPU, and back.
TEST(NnModule, CudaAndCpuMoveTheModuleAndTheTensor) {
  nn::Linear lin(3, 2);
  HandleHolder holder{lin.parameters()};
  lin.cuda();
  for (const Tensor& p : holder.params) EXPECT_EQ(p.device(), tiny::Device("cuda:0"));
  const Tensor x = tiny::ones({1, 3});
  const Tensor on_gpu = x.cuda();
  EXPECT_EQ(on_gpu.device(), tiny::Device("cuda:0"));
  EXPECT_TRUE(x.is_cpu()) << "cuda() returns a copy, as PyTorch's";
  const Tensor y_gpu = lin(on_gpu).cpu();
  lin.cpu();
  EXPECT_TRUE(tiny::equal(y_gpu, lin(x)));
  for (const Tensor& p : holder.params) EXPECT_TRUE(p.is_cpu());
}

TEST(NnModule, ToAnUnusableDeviceThrowsAndLeavesTheModuleAlone) {
  MLP mlp(2, 3, 1);
  HandleHolder holder{mlp.parameters()};
  try {
    mlp.to(tiny::Device("cuda:0"));
    // A build with a GPU backend: the held handles must have moved with the module.
    for (const Tensor& p : holder.params) EXPECT_TRUE(p.is_cuda());
  } catch (const tiny::DeviceError&) {
    for (const Tensor& p : holder.params) EXPECT_TRUE(p.is_cpu());
    EXPECT_NO_THROW(mlp(tiny::ones({1, 2})));
  }
}

// ---- printing -----------------------------------------------------------------------------------

TEST(NnModule, PrintsLikePyTorch) {
  auto seq = std::make_shared<nn::Sequential>(std::make_shared<nn::Linear>(784, 512), std::make_shared<nn::ReLU>(),
                                              std::make_shared<nn::Dropout>(0.2));
  EXPECT_EQ(printed(*seq),
            "Sequential(\n"
            "  (0): Linear(in_features=784, out_features=512, bias=True)\n"
            "  (1): ReLU()\n"
            "  (2): Dropout(p=0.2, inplace=False)\n"
            ")");

  struct Custom : nn::Module {
    Custom() {
      register_module("fc1", std::make_shared<nn::Linear>(4, 8));
      register_module("act", std::make_shared<nn::GELU>());
      register_module("fc2", std::make_shared<nn::Linear>(8, 2, false));
    }
    std::string name() const override { return "MLP"; }
  };
  EXPECT_EQ(printed(Custom()),
            "MLP(\n"
            "  (fc1): Linear(in_features=4, out_features=8, bias=True)\n"
            "  (act): GELU(approximate='none')\n"
            "  (fc2): Linear(in_features=8, out_features=2, bias=False)\n"
            ")");

  auto nested = std::make_shared<nn::Sequential>(
      std::make_shared<nn::Flatten>(),
      std::make_shared<nn::Sequential>(std::make_shared<nn::Linear>(2, 3), std::make_shared<nn::Tanh>()),
      std::make_shared<nn::Sigmoid>(), std::make_shared<nn::GELU>("tanh"));
  EXPECT_EQ(printed(*nested),
            "Sequential(\n"
            "  (0): Flatten(start_dim=1, end_dim=-1)\n"
            "  (1): Sequential(\n"
            "    (0): Linear(in_features=2, out_features=3, bias=True)\n"
            "    (1): Tanh()\n"
            "  )\n"
            "  (2): Sigmoid()\n"
            "  (3): GELU(approximate='tanh')\n"
            ")");
}

template <class T>
struct Wrapper : nn::Module {};

TEST(NnModule, DefaultNameIsTheClassName) {
  // No name() override: the C++ class name without namespaces, as PyTorch prints type(self).__name__.
  EXPECT_EQ(MLP(1, 1, 1).name(), "MLP");
  EXPECT_EQ(printed(MLP(4, 8, 2)),
            "MLP(\n"
            "  (fc1): Linear(in_features=4, out_features=8, bias=True)\n"
            "  (fc2): Linear(in_features=8, out_features=2, bias=True)\n"
            ")");
  EXPECT_EQ(Wrapper<nn::Linear>().name(), "Wrapper<tiny::nn::Linear>");
  EXPECT_EQ(nn::Module().name(), "Module");
  EXPECT_EQ(nn::ReLU().name(), "ReLU");
}

TEST(NnModule, PrintsEachLayerLikePyTorch) {
  EXPECT_EQ(printed(nn::Embedding(10, 3)), "Embedding(10, 3)");
  EXPECT_EQ(printed(nn::Embedding(10, 3, 0)), "Embedding(10, 3, padding_idx=0)");
  EXPECT_EQ(printed(nn::LayerNorm(5)), "LayerNorm((5,), eps=1e-05, elementwise_affine=True)");
  EXPECT_EQ(printed(nn::LayerNorm({4, 5}, 1e-6, false)), "LayerNorm((4, 5), eps=1e-06, elementwise_affine=False)");
  EXPECT_EQ(printed(nn::LayerNorm({2, 3, 4})), "LayerNorm((2, 3, 4), eps=1e-05, elementwise_affine=True)");
  EXPECT_EQ(printed(nn::LayerNorm(5, 1e-3)), "LayerNorm((5,), eps=0.001, elementwise_affine=True)");
  EXPECT_EQ(printed(nn::CrossEntropyLoss()), "CrossEntropyLoss()");
  EXPECT_EQ(printed(nn::MSELoss()), "MSELoss()");
  EXPECT_EQ(printed(nn::NLLLoss()), "NLLLoss()");
  EXPECT_EQ(printed(nn::Dropout()), "Dropout(p=0.5, inplace=False)");
  EXPECT_EQ(printed(nn::Flatten(0, 2)), "Flatten(start_dim=0, end_dim=2)");
  // Pooling prints its sizes as they were given, as PyTorch's does.
  EXPECT_EQ(printed(nn::MaxPool2d(2)), "MaxPool2d(kernel_size=2, stride=2, padding=0, dilation=1, ceil_mode=False)");
  EXPECT_EQ(printed(nn::MaxPool2d(3, 2, 1)),
            "MaxPool2d(kernel_size=3, stride=2, padding=1, dilation=1, ceil_mode=False)");
  EXPECT_EQ(printed(nn::MaxPool2d({3, 2})),
            "MaxPool2d(kernel_size=(3, 2), stride=(3, 2), padding=(0, 0), dilation=(1, 1), ceil_mode=False)");
  EXPECT_EQ(nn::MaxPool2d(3, 2, 1).clone()->extra_repr(), nn::MaxPool2d(3, 2, 1).extra_repr());
  EXPECT_EQ(printed(nn::AvgPool2d(2)), "AvgPool2d(kernel_size=2, stride=2, padding=0)");
  EXPECT_EQ(printed(nn::AvgPool2d({2, 2})), "AvgPool2d(kernel_size=(2, 2), stride=(2, 2), padding=(0, 0))");
  EXPECT_EQ(nn::AvgPool2d(3, 1).clone()->extra_repr(), nn::AvgPool2d(3, 1).extra_repr());
  EXPECT_EQ(printed(nn::Sequential()), "Sequential()");
  EXPECT_EQ(printed(nn::Module()), "Module()");
}

TEST(NnModule, PythonFloatRepr) {
  // Values from Python 3's repr(float).
  const std::vector<std::pair<double, std::string>> cases = {
      {1e-5, "1e-05"},     {0.2, "0.2"},       {0.5, "0.5"},         {0.001, "0.001"},
      {1.0, "1.0"},        {1e-6, "1e-06"},    {0.1, "0.1"},         {1e16, "1e+16"},
      {123.456, "123.456"}, {1.0 / 3.0, "0.3333333333333333"}, {0.0001, "0.0001"}, {2.5e-7, "2.5e-07"},
      {100.0, "100.0"},    {1e22, "1e+22"},    {0.0, "0.0"}};
  for (const auto& [v, want] : cases) EXPECT_EQ(nn::detail::python_float_repr(v), want) << want;
}

}  // namespace
