// bfloat16 autocast against PyTorch 1.13's CPU autocast: a small MLP's forward
// under torch.autocast("cpu", dtype=torch.bfloat16) and its backward
// (tests/parity/half_fixtures/autocast_mlp_bf16, written by
// tests/parity/make_half_fixtures.py).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "tiny/tiny.h"

namespace {

namespace fs = std::filesystem;
using tiny::Tensor;
namespace F = tiny::nn::functional;

Tensor load(const std::string& name) {
  const fs::path dir = fs::path(TINY_PARITY_DIR).parent_path() / "half_fixtures" / "autocast_mlp_bf16";
  return tiny::io::load_npy((dir / (name + ".npy")).string());
}

// Tolerance: 1e-2 of the reference's largest magnitude, per element. Both
// sides round the same products to bfloat16 (8 significant bits: a relative
// step of 2^-8 = 3.9e-3) but accumulate the GEMMs in float32 in different
// orders (tiny: OpenBLAS; PyTorch: its own bf16 kernels), so an intermediate
// value can land one bfloat16 step apart, and that step propagates through the
// second layer and the backward. Measured (printed by the test): the output
// and the loss are bit-identical; the gradients differ by at most 4.8e-3 of
// their largest magnitude (about one bfloat16 step).
void expect_close(const Tensor& got, const Tensor& want, const std::string& what) {
  ASSERT_EQ(got.dtype(), want.dtype()) << what;
  ASSERT_EQ(got.sizes(), want.sizes()) << what;
  const std::vector<double> g = got.cpu().to(tiny::kFloat64).reshape({-1}).to_vector<double>();
  const std::vector<double> w = want.cpu().to(tiny::kFloat64).reshape({-1}).to_vector<double>();
  double scale = 0, worst = 0;
  for (double v : w) scale = std::max(scale, std::fabs(v));
  for (size_t i = 0; i < g.size(); ++i) {
    worst = std::max(worst, std::fabs(g[i] - w[i]) / scale);
    EXPECT_LE(std::fabs(g[i] - w[i]), 1e-2 * scale) << what << "[" << i << "]: " << g[i] << " vs " << w[i];
  }
  std::printf("  %s: max |tiny - torch| / max |torch| = %.2e\n", what.c_str(), worst);
}

void run_on(const tiny::Device& device) {
  const Tensor x = load("x").to(device), target = load("target").to(device);
  const Tensor w1 = load("w1").to(device).requires_grad_(true), b1 = load("b1").to(device).requires_grad_(true);
  const Tensor w2 = load("w2").to(device).requires_grad_(true), b2 = load("b2").to(device).requires_grad_(true);
  Tensor out, loss;
  {
    tiny::amp::autocast guard(device.is_cpu() ? "cpu" : "cuda", tiny::kBFloat16);
    out = F::linear(tiny::relu(F::linear(x, w1, b1)), w2, b2);
    loss = F::cross_entropy(out, target);
  }
  loss.backward();
  ASSERT_EQ(out.dtype(), tiny::kBFloat16);
  ASSERT_EQ(loss.dtype(), tiny::kFloat32);
  const std::string on = " on " + device.str();
  expect_close(out, load("out"), "out" + on);
  expect_close(loss, load("loss"), "loss" + on);
  expect_close(w1.grad(), load("grad_w1"), "grad_w1" + on);
  expect_close(b1.grad(), load("grad_b1"), "grad_b1" + on);
  expect_close(w2.grad(), load("grad_w2"), "grad_w2" + on);
  expect_close(b2.grad(), load("grad_b2"), "grad_b2" + on);
}

TEST(AmpParity, Bfloat16AutocastMlpMatchesPyTorchOnCpu) { run_on(tiny::Device("cpu")); }

// The same policy on the emulated GPU (a "cuda" guard with bfloat16) gives the same numbers.
TEST(AmpParity, Bfloat16AutocastMlpMatchesPyTorchOnTheEmulatedGpu) {
  if (tiny::cuda::device_count() < 1) GTEST_SKIP() << "needs an (emulated) GPU";
  run_on(tiny::Device("cuda:0"));
}

}  // namespace
