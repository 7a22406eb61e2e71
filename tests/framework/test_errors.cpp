// Bad inputs raise the right tiny::Error subclass with a message that names
// the values (DESIGN.md section 8), in PyTorch's words where it has them.

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "tiny/tiny.h"

namespace {

namespace F = tiny::nn::functional;
using tiny::Tensor;

// Runs `fn`, which must throw exactly ErrorType (or a subclass), and returns the message.
template <typename ErrorType>
std::string message_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const ErrorType& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "threw the wrong type; message: " << e.what();
    return {};
  }
  ADD_FAILURE() << "did not throw";
  return {};
}

// Expects `statement` to throw tiny::ErrorType with `substring` in its message.
#define EXPECT_ERROR(ErrorType, statement, substring)                                   \
  do {                                                                                  \
    const std::string msg_ = message_of<tiny::ErrorType>([&] { (void)(statement); });   \
    EXPECT_NE(msg_.find(substring), std::string::npos)                                  \
        << "message: \"" << msg_ << "\"\nexpected to contain: \"" << (substring) << "\""; \
  } while (0)

TEST(Errors, AllErrorTypesDeriveFromTinyError) {
  EXPECT_ERROR(Error, tiny::mm(tiny::zeros({2, 3}), tiny::zeros({2, 3})), "cannot be multiplied");
  EXPECT_ERROR(Error, tiny::zeros({2}).select(0, 5), "out of bounds");
  EXPECT_ERROR(Error, tiny::Device("tpu"), "tpu");
}

// A student's exercise writes the error type as tiny::ValueError as often as ValueError
// (issue 17: the qualified name failed to compile with "'tiny::tiny' has not been declared").
TEST(Errors, TinyCheckTakesTheErrorTypeQualifiedOrNot) {
  const int n = 3;
  EXPECT_ERROR(ValueError, [&] { TINY_CHECK(n == 2, tiny::ValueError, "n must be 2, got ", n); }(), "got 3");
  EXPECT_ERROR(ValueError, [&] { TINY_CHECK(n == 2, ValueError, "n must be 2, got ", n); }(), "got 3");
  EXPECT_ERROR(ShapeError, [&] { TINY_THROW(tiny::ShapeError, "shape ", n); }(), "shape 3");
  EXPECT_ERROR(distributed::DistributedError, [&] { TINY_THROW(tiny::distributed::DistributedError, "rank"); }(),
               "rank");
}

TEST(Errors, MmShapeMismatchNamesBothShapes) {
  const std::string msg =
      message_of<tiny::ShapeError>([] { (void)tiny::mm(tiny::zeros({64, 784}), tiny::zeros({512, 256})); });
  EXPECT_EQ(msg, "mat1 and mat2 shapes cannot be multiplied (64x784 and 512x256)");
  EXPECT_ERROR(ShapeError, tiny::matmul(tiny::zeros({64, 784}), tiny::zeros({512, 256})),
               "mat1 and mat2 shapes cannot be multiplied (64x784 and 512x256)");
  EXPECT_ERROR(ShapeError, tiny::matmul(tiny::zeros({4, 2, 3}), tiny::zeros({5, 7})),
               "mat1 and mat2 shapes cannot be multiplied (2x3 and 5x7)");
  EXPECT_ERROR(ShapeError, F::linear(tiny::zeros({8, 10}), tiny::zeros({4, 12})),
               "mat1 and mat2 shapes cannot be multiplied (8x10 and 12x4)");
  EXPECT_ERROR(ShapeError, tiny::mm(tiny::zeros({3}), tiny::zeros({3, 2})), "got a 1-D tensor of shape [3]");
  EXPECT_ERROR(ShapeError, tiny::matmul(tiny::zeros({3}), tiny::zeros({4})), "got 3 and 4 elements");
  EXPECT_ERROR(DtypeError, tiny::mm(tiny::zeros({2, 2}), tiny::zeros({2, 2}, tiny::kFloat64)),
               "expected mat1 and mat2 to have the same dtype, but got: float32 != float64");
}

// A first model's two usual slips: images not flattened, and integer data.
TEST(Errors, LinearNamesItsInFeaturesAndTheFix) {
  tiny::nn::Linear layer(784, 512);
  const std::string msg = message_of<tiny::ShapeError>([&] { (void)layer(tiny::zeros({64, 1, 28, 28})); });
  EXPECT_NE(msg.find("mat1 and mat2 shapes cannot be multiplied (1792x28 and 784x512)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("in_features=784 takes an input of shape [..., 784], got [64, 1, 28, 28]"), std::string::npos)
      << msg;
  EXPECT_NE(msg.find("x.flatten(1)"), std::string::npos) << msg;
  // A width that flattening would not fix gets no such advice.
  const std::string narrow = message_of<tiny::ShapeError>([&] { (void)layer(tiny::zeros({64, 100})); });
  EXPECT_EQ(narrow.find("flatten"), std::string::npos) << narrow;
  EXPECT_ERROR(DtypeError, layer(tiny::zeros({2, 784}, tiny::kInt64)),
               "int64 != float32 (convert the int64 one with .to(tiny::kFloat32))");
  EXPECT_ERROR(DtypeError, tiny::mm(tiny::zeros({2, 2}, tiny::kFloat64), tiny::zeros({2, 2}, tiny::kFloat16)),
               "(convert the float16 one with .to(tiny::kFloat64))");
  EXPECT_ERROR(IndexError, tiny::nn::Flatten()(tiny::zeros({784})),
               "Flatten(start_dim=1, end_dim=-1) got an input of shape [784], which has no dimension 1");
  EXPECT_ERROR(IndexError, tiny::nn::Flatten()(tiny::zeros({784})), "x.unsqueeze(0) makes it [1, 784]");
  EXPECT_EQ(tiny::nn::Flatten()(tiny::zeros({2, 3, 4})).sizes(), (tiny::IntArrayRef{2, 12}));
}

TEST(Errors, BroadcastFailureNamesBothSizes) {
  EXPECT_ERROR(ShapeError, tiny::zeros({2, 3}) + tiny::zeros({4}),
               "The size of tensor a (3) must match the size of tensor b (4) at non-singleton dimension 1");
  EXPECT_ERROR(ShapeError, tiny::zeros({5, 2}) * tiny::zeros({3, 1}),
               "The size of tensor a (5) must match the size of tensor b (3) at non-singleton dimension 0");
  EXPECT_ERROR(ShapeError, tiny::broadcast_shapes({2, 3}, {3, 2}), "[2, 3] and [3, 2]");
  EXPECT_ERROR(ShapeError, tiny::zeros({3}).expand({2, 4}),
               "The expanded size of the tensor (4) must match the existing size (3)");
}

TEST(Errors, DimOutOfRange) {
  EXPECT_ERROR(IndexError, tiny::zeros({2, 3}).sum({2}),
               "Dimension out of range (expected to be in range of [-2, 1], but got 2)");
  EXPECT_ERROR(IndexError, tiny::zeros({2, 3}).transpose(0, -3),
               "Dimension out of range (expected to be in range of [-2, 1], but got -3)");
  EXPECT_ERROR(IndexError, tiny::zeros({2, 3}).size(5), "but got 5");
  EXPECT_ERROR(IndexError, tiny::zeros({2, 3}).size(5), "the tensor has 2 dimensions");
  EXPECT_ERROR(IndexError, F::softmax(tiny::zeros({3}), 1), "softmax: Dimension out of range");
  EXPECT_ERROR(IndexError, F::softmax(tiny::zeros({2, 3}), 2), "[-2, 1], but got 2");
  EXPECT_ERROR(IndexError, tiny::zeros({2, 3}).unsqueeze(3), "[-3, 2], but got 3");
  EXPECT_ERROR(IndexError, tiny::argmax(tiny::zeros({4}), 1), "[-1, 0], but got 1");
}

TEST(Errors, SelectIndexOutOfRange) {
  EXPECT_ERROR(IndexError, tiny::zeros({3, 4}).select(0, 3), "index 3 is out of bounds for dimension 0 with size 3");
  EXPECT_ERROR(IndexError, tiny::zeros({3, 4})[-4], "index -4 is out of bounds for dimension 0 with size 3");
  EXPECT_ERROR(IndexError, tiny::zeros({3, 4}).select(1, 9), "index 9 is out of bounds for dimension 1 with size 4");
  EXPECT_ERROR(IndexError, tiny::zeros({3}).narrow(0, 2, 5), "exceeds dimension size (3)");
  EXPECT_ERROR(IndexError, tiny::scalar_tensor(1.0).select(0, 0), "0-dim");
}

TEST(Errors, CrossEntropyTargetOutOfBounds) {
  const Tensor logits = tiny::zeros({2, 3});
  const std::string msg =
      message_of<tiny::IndexError>([&] { (void)F::cross_entropy(logits, tiny::from_vector<int64_t>({1, 7})); });
  EXPECT_NE(msg.find("Target 7 is out of bounds"), std::string::npos) << msg;
  EXPECT_NE(msg.find("3 classes"), std::string::npos) << msg;
  EXPECT_ERROR(IndexError, F::cross_entropy(logits, tiny::from_vector<int64_t>({-1, 0})), "Target -1 is out of bounds");
  EXPECT_ERROR(IndexError, F::nll_loss(logits, tiny::from_vector<int64_t>({0, 3})), "Target 3 is out of bounds");
  EXPECT_ERROR(ShapeError, F::cross_entropy(logits, tiny::from_vector<int64_t>({0, 1, 2})),
               "Expected input batch_size (2) to match target batch_size (3)");
}

TEST(Errors, CrossEntropyFloatTarget) {
  EXPECT_ERROR(DtypeError, F::cross_entropy(tiny::zeros({2, 3}), tiny::tensor({0.0, 1.0})),
               "expected target of dtype int64 (class indices) but got float32");
  EXPECT_ERROR(DtypeError, F::cross_entropy(tiny::zeros({2, 3}, tiny::kInt64), tiny::from_vector<int64_t>({0, 1})),
               "expected a floating-point input, got int64");
  // The labels first and the logits second: say so.
  EXPECT_ERROR(DtypeError, F::cross_entropy(tiny::from_vector<int64_t>({0, 1}), tiny::zeros({2, 3})),
               "got int64 while the target is float32: are the arguments swapped?");
  const F::CrossEntropyOptions too_smooth{F::Reduction::Mean, -100, 1.5};
  EXPECT_ERROR(ValueError, F::cross_entropy(tiny::zeros({2, 3}), tiny::from_vector<int64_t>({0, 1}), too_smooth),
               "label_smoothing must be between 0.0 and 1.0. Got: 1.5");
}

TEST(Errors, ItemOnManyElements) {
  EXPECT_ERROR(ValueError, tiny::zeros({2, 3}).item(), "a Tensor with 6 elements cannot be converted to Scalar");
  EXPECT_ERROR(ValueError, tiny::zeros({0}).item<float>(), "a Tensor with 0 elements");
}

TEST(Errors, DataPtrOfTheWrongType) {
  EXPECT_ERROR(DtypeError, tiny::arange(3).data_ptr<float>(),
               "expected a tensor of dtype float32 but this one is int64");
  EXPECT_ERROR(DtypeError, tiny::zeros({2}).data_ptr<double>(), "float64 but this one is float32");
}

TEST(Errors, RequiresGradOnIntegerTensor) {
  EXPECT_ERROR(DtypeError, tiny::arange(3).requires_grad_(),
               "only Tensors of floating point dtype can require gradients (this one is int64)");
  EXPECT_ERROR(DtypeError, tiny::zeros({2}, tiny::TensorOptions(tiny::kInt64).requires_grad(true)),
               "floating point dtype can require gradients");
}

TEST(Errors, BadDeviceStrings) {
  EXPECT_ERROR(ValueError, tiny::Device("gpu"),
               "Expected one of cpu, cuda device type at start of device string: 'gpu'");
  EXPECT_ERROR(ValueError, tiny::Device("cuda:x"), "Invalid device string: 'cuda:x'");
  EXPECT_ERROR(ValueError, tiny::Device("cuda:"), "Invalid device string: 'cuda:'");
  EXPECT_ERROR(ValueError, tiny::Device("cuda:99999999999"),
               "Could not parse device index '99999999999' in device string 'cuda:99999999999'");
  EXPECT_ERROR(ValueError, tiny::Device("cuda:-1"), "'cuda:-1'");
  EXPECT_ERROR(ValueError, tiny::Device("cpu:1"), "'cpu:1'");
  EXPECT_ERROR(ValueError, tiny::Device(""), "''");
}

TEST(Errors, CudaDeviceThatDoesNotExist) {
  // The emulated GPU has 2 devices by default (TINY_EMULATED_GPUS): cuda:7 is
  // out of range, and the message names the devices that exist.
  EXPECT_ERROR(DeviceError, tiny::zeros({2}, tiny::Device("cuda:7")), "invalid device ordinal");
  EXPECT_ERROR(DeviceError, tiny::zeros({2}, tiny::Device("cuda:7")), "cuda:0, cuda:1");
  EXPECT_ERROR(DeviceError, tiny::zeros({2}).to(tiny::Device("cuda:7")), "cuda:7 does not exist");
}

// Lesson 6's classic mistake: a rank of a multi-machine job uses its global rank as
// the GPU index. The message names it, not "emulate more GPUs" (issue 17).
TEST(Errors, GlobalRankUsedAsTheGpuIndex) {
  struct Env {  // RANK and LOCAL_RANK as tinyrun sets them for rank 2 on a second machine
    Env() { ::setenv("RANK", "2", 1), ::setenv("LOCAL_RANK", "0", 1); }
    ~Env() { ::unsetenv("RANK"), ::unsetenv("LOCAL_RANK"); }
  } env;
  EXPECT_ERROR(DeviceError, tiny::zeros({2}, tiny::Device("cuda:2")), "the GPU index is the local rank");
  EXPECT_ERROR(DeviceError, tiny::zeros({2}, tiny::Device("cuda:2")), "Use cuda:0");
  // Another index past the end: too many processes for this machine's GPUs.
  EXPECT_ERROR(DeviceError, tiny::zeros({2}, tiny::Device("cuda:5")), "--nproc-per-node 2");
}

TEST(Errors, DeviceTensorElementsAreNotReadableFromHostCode) {
  const Tensor d = tiny::ones({2}, tiny::Device("cuda:0"));
  EXPECT_ERROR(DeviceError, d.data_ptr<float>(), ".cpu()");
  EXPECT_ERROR(DeviceError, d + tiny::ones({2}), "Expected all tensors to be on the same device, but found at "
                                                 "least two devices, cuda:0 and cpu!");
  // The fix named is the one GPU training wants, whichever side the CPU tensor is on.
  EXPECT_ERROR(DeviceError, d + tiny::ones({2}), "move the cpu tensor with .to(cuda:0)");
  EXPECT_ERROR(DeviceError, tiny::ones({2}) + d, "move the cpu tensor with .to(cuda:0)");
}

TEST(Errors, UndefinedTensor) {
  const Tensor undefined;
  EXPECT_FALSE(undefined.defined());
  EXPECT_ERROR(ValueError, undefined.sizes(), "this tensor is undefined");
  EXPECT_ERROR(ValueError, undefined + tiny::ones({2}), "this tensor is undefined");
  EXPECT_ERROR(ValueError, undefined.numel(), "undefined");
  EXPECT_ERROR(ValueError, undefined.item(), "undefined");
  EXPECT_ERROR(ValueError, tiny::sum(undefined), "undefined");
}

// The undefined tensor a learner meets first is a .grad() read before backward():
// the message names the call made on it and says why a gradient can be missing.
TEST(Errors, UndefinedGradientNamesTheCallAndTheCause) {
  auto w = tiny::ones({2}).requires_grad_();
  const Tensor grad = w.grad();
  ASSERT_FALSE(grad.defined());
  EXPECT_ERROR(ValueError, grad.cpu(), "cpu() on an undefined tensor");
  EXPECT_ERROR(ValueError, grad.to(tiny::Device("cuda:0")), "to(device) on an undefined tensor");
  EXPECT_ERROR(ValueError, grad.to(tiny::kFloat16), "to(dtype) on an undefined tensor");
  EXPECT_ERROR(ValueError, grad.item(), "item() on an undefined tensor");
  EXPECT_ERROR(ValueError, grad.data_ptr<float>(), "data_ptr on an undefined tensor");
  EXPECT_ERROR(ValueError, grad.cpu(), "A .grad() stays undefined until backward() reaches its tensor");
  const Tensor hidden = w * 2;  // a non-leaf: backward reaches it, but keeps no gradient without retain_grad()
  hidden.sum().backward();
  EXPECT_ERROR(ValueError, hidden.grad().cpu(), "keeps one only after .retain_grad()");
}

TEST(Errors, ViewIncompatible) {
  EXPECT_ERROR(ShapeError, tiny::zeros({3, 4}).t().view({12}),
               "view size is not compatible with input tensor's size and stride");
  EXPECT_ERROR(ShapeError, tiny::zeros({3, 4}).view({5, -1}), "shape '[5, -1]' is invalid for input of size 12");
  EXPECT_ERROR(ShapeError, tiny::zeros({3, 4}).reshape({7}), "shape '[7]' is invalid for input of size 12");
  EXPECT_ERROR(ShapeError, tiny::zeros({3, 4}).view({-1, -1}), "only one dimension can be inferred");
}

TEST(Errors, NegativeSize) {
  EXPECT_ERROR(ValueError, tiny::zeros({2, -1}), "Trying to create tensor with negative dimension -1: [2, -1]");
  EXPECT_ERROR(ValueError, tiny::empty({-5}), "negative dimension -5");
  EXPECT_ERROR(ValueError, tiny::rand({3, -2}), "negative dimension -2");
  EXPECT_ERROR(ValueError, tiny::randperm(-3), "n must be non-negative, got -3");
}

TEST(Errors, ArangeStepSign) {
  EXPECT_ERROR(ValueError, tiny::arange(0, 10, -1), "upper bound and larger bound inconsistent with step sign");
  EXPECT_ERROR(ValueError, tiny::arange(5, 1, 2), "(start 5, end 1, step 2)");
  EXPECT_ERROR(ValueError, tiny::arange(0, 1, 0), "step must be nonzero");
  EXPECT_ERROR(ValueError, tiny::arange(-3), "inconsistent with step sign");
}

TEST(Errors, RandintLowNotBelowHigh) {
  EXPECT_ERROR(ValueError, tiny::randint(5, 5, {3}),
               "random_ expects 'from' to be less than 'to', but got from=5 >= to=5");
  EXPECT_ERROR(ValueError, tiny::randint(9, 2, {3}), "from=9 >= to=2");
  EXPECT_ERROR(DtypeError, tiny::rand({2}, tiny::kInt64), "\"rand\" not implemented for 'int64'");
}

TEST(Errors, DropoutProbability) {
  EXPECT_ERROR(ValueError, F::dropout(tiny::ones({4}), 1.5),
               "dropout probability has to be between 0 and 1, but got 1.5");
  EXPECT_ERROR(ValueError, F::dropout(tiny::ones({4}), -0.1), "but got -0.1");
  // Checked even when dropout is a no-op.
  EXPECT_ERROR(ValueError, F::dropout(tiny::ones({4}), 2.0, /*training=*/false), "but got 2");
}

TEST(Errors, MeanOfIntegerTensor) {
  EXPECT_ERROR(DtypeError, tiny::arange(4).mean(), "mean(): could not infer output dtype");
  EXPECT_ERROR(DtypeError, tiny::arange(4).mean({0}), "Got: int64");
  EXPECT_ERROR(DtypeError, tiny::from_vector<bool>({true}).mean(), "Got: bool");
}

TEST(Errors, ExpOfBoolPromotesToFloat) {
  // PyTorch computes float ops on bool tensors in the default float dtype; tiny does the same.
  const Tensor e = tiny::exp(tiny::from_vector<bool>({true, false}));
  EXPECT_EQ(e.dtype(), tiny::kFloat32);
  const std::vector<float> v = e.to_vector<float>();
  EXPECT_FLOAT_EQ(v[0], static_cast<float>(std::exp(1.0)));
  EXPECT_EQ(v[1], 1.0f);
}

TEST(Errors, BoolArithmeticThatPyTorchRejects) {
  const Tensor b = tiny::from_vector<bool>({true, false});
  EXPECT_ERROR(DtypeError, -b, "Negation, the `-` operator, on a bool tensor is not supported");
  EXPECT_ERROR(DtypeError, b - b, "Subtraction, the `-` operator, with two bool tensors is not supported");
  EXPECT_ERROR(DtypeError, tiny::max(b), "not implemented for 'bool'");
  EXPECT_ERROR(ValueError, tiny::arange(3).pow(-1), "Integers to negative integer powers are not allowed");
}

TEST(Errors, EmptyReductions) {
  EXPECT_ERROR(ValueError, tiny::zeros({0}).max(), "Expected reduction dim to be specified for input.numel() == 0");
  EXPECT_ERROR(IndexError, tiny::zeros({2, 0}).max(1), "Expected reduction dim 1 to have non-zero size");
  EXPECT_ERROR(ValueError, tiny::argmax(tiny::zeros({0})), "numel() == 0");
}

TEST(Errors, ClampNeedsABound) {
  EXPECT_ERROR(ValueError, tiny::clamp(tiny::ones({2}), std::nullopt, std::nullopt),
               "At least one of 'min' or 'max' must not be None");
  EXPECT_ERROR(ValueError, tiny::gelu(tiny::ones({2}), "fast"), "approximate argument must be either none or tanh");
}

TEST(Errors, InPlaceOnLeafThatRequiresGrad) {
  const Tensor w = tiny::ones({2}, tiny::TensorOptions().requires_grad(true));
  EXPECT_ERROR(Error, w.add_(1.0), "a leaf Variable that requires grad is being used in an in-place operation");
  tiny::NoGradGuard no_grad;
  w.add_(1.0);  // allowed without gradient recording
  EXPECT_EQ(w.to_vector<float>(), (std::vector<float>{2.0f, 2.0f}));
}

}  // namespace
