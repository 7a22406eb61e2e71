// float16 and bfloat16 (DESIGN.md sections 4 and 5).
//
// What is proved here:
// - Conversions, bit for bit, against references written independently of
//   tiny/half.h: a value table built with ldexp from the format's definition
//   (all 65,536 patterns of each type decode to it), and round-to-nearest-even
//   encoding as a search in that table (every tie between neighbours, the
//   floats one ulp either side, and a million random floats), plus g++'s own
//   _Float16 where the compiler has it, plus PyTorch 1.13's results on ~10k
//   probe values (tests/parity/half_fixtures/conversions).
// - NaN handling is the documented one (see tiny/half.h).
// - Arithmetic accumulates in float32: sum of 4096 half ones is 4096.
// - float16 results against float64 references with float16 rounding applied;
//   bfloat16/float16 parity with PyTorch 1.13 (tests/parity/make_half_fixtures.py).
// - Promotion, creation, conversions, printing, npy, safetensors, autograd,
//   optimizers, modules, and the emulated GPU (same bits as the CPU).
//
// Tolerances (each says why):
//   pointwise             <= 1 ulp of the 16-bit type: tiny computes in float and
//                            rounds once; the float result is within an ulp of
//                            float32 of the exact one, so only values whose exact
//                            result lies within that of a 16-bit tie can round
//                            the other way.
//   matmul vs float64     <= 1 ulp(ref) + k * 2^-24 * sum_k |a||b|: float32
//                            accumulation (what cuBLAS does with CUBLAS_COMPUTE_32F,
//                            in another order) before the one rounding.
//   vs PyTorch            pointwise 1 ulp; sums/softmax/matmul/losses 1e-2 relative
//                            (+1e-2 absolute), DESIGN.md's fp16/bf16 figure: PyTorch's
//                            CPU kernels sum in other orders and some round
//                            intermediates to 16 bits.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "backend/cpu/half_convert.h"
#include "test_util.h"
#include "tiny/cuda.h"
#include "tiny/generator.h"
#include "tiny/half.h"
#include "tiny/io.h"
#include "tiny/nn/functional.h"
#include "tiny/nn/linear.h"
#include "tiny/ops.h"
#include "tiny/optim/adam.h"
#include "tiny/optim/sgd.h"
#include "tiny/serialize.h"
#include "tiny/tensor.h"

namespace fs = std::filesystem;
namespace F = tiny::nn::functional;
using tiny::BFloat16;
using tiny::Dtype;
using tiny::Half;
using tiny::Tensor;

namespace {

// ---- references, independent of tiny/half.h -----------------------------------

struct Format {
  int mant_bits;   // 10 for half, 7 for bfloat16
  int exp_bits;    // 5, 8
  int bias;        // 15, 127
  uint16_t inf;    // 0x7C00, 0x7F80
};
constexpr Format kHalfFmt{10, 5, 15, 0x7C00};
constexpr Format kBf16Fmt{7, 8, 127, 0x7F80};

// The value of a non-negative, non-NaN pattern from the format's definition.
// The infinity pattern gets the value the next exponent would have (2^16 for
// half, 2^128 for bfloat16): rounding treats it as the neighbour above the
// largest finite value, which is what IEEE overflow with ties-to-even does.
double ref_value(const Format& f, uint32_t bits) {
  const uint32_t e = bits >> f.mant_bits;
  const uint32_t m = bits & ((1u << f.mant_bits) - 1);
  if (e == 0) return std::ldexp(static_cast<double>(m), 1 - f.bias - f.mant_bits);
  return std::ldexp(static_cast<double>((1u << f.mant_bits) + m), static_cast<int>(e) - f.bias - f.mant_bits);
}

const std::vector<double>& value_table(const Format& f) {
  static std::vector<double> half_table, bf16_table;
  std::vector<double>& t = f.mant_bits == 10 ? half_table : bf16_table;
  if (t.empty()) {
    for (uint32_t b = 0; b <= f.inf; ++b) t.push_back(ref_value(f, b));
  }
  return t;
}

// Round to nearest, ties to even, of any non-NaN double: a search in the table.
uint16_t ref_encode(const Format& f, double x) {
  const uint16_t sign = std::signbit(x) ? 0x8000 : 0;
  const double a = std::fabs(x);
  const std::vector<double>& t = value_table(f);
  if (a >= t.back()) return sign | f.inf;
  const auto it = std::lower_bound(t.begin(), t.end(), a);
  const uint32_t hi = static_cast<uint32_t>(it - t.begin());
  if (*it == a || hi == 0) return static_cast<uint16_t>(sign | hi);
  const uint32_t lo = hi - 1;
  const double dlo = a - t[lo], dhi = t[hi] - a;
  const uint32_t pick = dlo < dhi ? lo : dhi < dlo ? hi : ((lo & 1) ? hi : lo);
  return static_cast<uint16_t>(sign | pick);
}

uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
float bits_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
bool is_nan_pattern(const Format& f, uint16_t b) { return (b & 0x7FFF) > f.inf; }

// Distance in ulps between two finite patterns (signs may differ).
int64_t ulp_distance(uint16_t a, uint16_t b) {
  auto ordered = [](uint16_t x) { return (x & 0x8000) ? -static_cast<int64_t>(x & 0x7FFF) : static_cast<int64_t>(x); };
  return std::llabs(ordered(a) - ordered(b));
}

// ---- tensors from and to raw bits ----------------------------------------------

Tensor half_from_bits(const std::vector<uint16_t>& bits, Dtype dtype) {
  Tensor t = tiny::empty({static_cast<int64_t>(bits.size())}, dtype);
  std::memcpy(t.raw_data_ptr(), bits.data(), bits.size() * 2);
  return t;
}

std::vector<uint16_t> bits_of(const Tensor& t) {
  const Tensor c = t.detach().cpu().contiguous();
  EXPECT_TRUE(c.dtype() == tiny::kFloat16 || c.dtype() == tiny::kBFloat16) << c.dtype();
  std::vector<uint16_t> out(static_cast<size_t>(c.numel()));
  if (!out.empty()) std::memcpy(out.data(), c.raw_data_ptr(), out.size() * 2);
  return out;
}

std::vector<double> values_of(const Tensor& t) { return t.detach().cpu().to_vector<double>(); }

const Format& format_of(Dtype d) { return d == tiny::kFloat16 ? kHalfFmt : kBf16Fmt; }

std::vector<std::string> test_devices() {
  std::vector<std::string> d{"cpu"};
  if (tiny::cuda::is_available()) d.push_back("cuda:0");
  return d;
}

// ---- conversions ----------------------------------------------------------------

TEST(HalfConversion, AllHalfPatternsDecodeToTheDefinition) {
  for (uint32_t b = 0; b < 65536; ++b) {
    const uint16_t bits = static_cast<uint16_t>(b);
    const float got = Half::from_bits(bits);
    if (is_nan_pattern(kHalfFmt, bits)) {
      // Payload kept, quiet bit set (c10::Half, F16C and CUDA do the same).
      const uint32_t expected = (static_cast<uint32_t>(bits & 0x8000) << 16) | 0x7F800000u | 0x00400000u |
                                (static_cast<uint32_t>(bits & 0x3FF) << 13);
      ASSERT_EQ(float_bits(got), expected) << "pattern 0x" << std::hex << b;
      continue;
    }
    const double mag = (bits & 0x7FFF) == kHalfFmt.inf ? INFINITY : ref_value(kHalfFmt, bits & 0x7FFF);
    const double expected = (bits & 0x8000) ? -mag : mag;
    ASSERT_EQ(static_cast<double>(got), expected) << "pattern 0x" << std::hex << b;
    ASSERT_EQ(std::signbit(got), (bits & 0x8000) != 0) << "pattern 0x" << std::hex << b;
#ifdef __FLT16_MAX__
    _Float16 h;
    std::memcpy(&h, &bits, 2);
    ASSERT_EQ(float_bits(static_cast<float>(h)), float_bits(got)) << "g++ _Float16 disagrees on 0x" << std::hex << b;
#endif
  }
}

TEST(HalfConversion, AllBFloat16PatternsDecodeToTheTopHalfOfAFloat) {
  for (uint32_t b = 0; b < 65536; ++b) {
    const uint16_t bits = static_cast<uint16_t>(b);
    const float got = BFloat16::from_bits(bits);
    // NaNs included: the 16 bits become the top of the float, payload and all (c10::BFloat16).
    ASSERT_EQ(float_bits(got), b << 16) << "pattern 0x" << std::hex << b;
    if (!is_nan_pattern(kBf16Fmt, bits)) {
      const double mag = (bits & 0x7FFF) == kBf16Fmt.inf ? INFINITY : ref_value(kBf16Fmt, bits & 0x7FFF);
      ASSERT_EQ(static_cast<double>(got), (bits & 0x8000) ? -mag : mag) << "pattern 0x" << std::hex << b;
    }
  }
}

// Every representable value, every tie between neighbours and the floats one
// ulp either side of it, both signs; then a million random float patterns.
template <typename T>
void check_encoding(const Format& fmt) {
  int64_t checked = 0;
  auto check = [&](float x) {
    const uint16_t got = T(x).x;
    const uint16_t expected = ref_encode(fmt, static_cast<double>(x));
    ASSERT_EQ(got, expected) << "value " << std::hexfloat << x << " (bits 0x" << std::hex << float_bits(x) << ")";
#ifdef __FLT16_MAX__
    if constexpr (std::is_same_v<T, Half>) {
      const _Float16 h = static_cast<_Float16>(x);
      uint16_t gcc_bits;
      std::memcpy(&gcc_bits, &h, 2);
      ASSERT_EQ(got, gcc_bits) << "g++ _Float16 disagrees on " << std::hexfloat << x;
    }
#endif
    ++checked;
  };
  const std::vector<double>& t = value_table(fmt);
  for (size_t i = 0; i + 1 < t.size(); ++i) {
    const float v = static_cast<float>(t[i]);
    const float mid = static_cast<float>((t[i] + t[i + 1]) / 2);  // exact: one more bit than the format
    ASSERT_EQ(static_cast<double>(mid), (t[i] + t[i + 1]) / 2);
    for (float x : {v, mid, std::nextafter(mid, INFINITY), std::nextafter(mid, -INFINITY)}) {
      check(x);
      check(-x);
    }
  }
  std::mt19937 rng(12345);
  for (int i = 0; i < 1000000; ++i) {
    const float x = bits_float(static_cast<uint32_t>(rng()));
    if (!std::isnan(x)) check(x);
  }
  for (float x : {0.0f, -0.0f, INFINITY, -INFINITY, std::numeric_limits<float>::max(),
                  std::numeric_limits<float>::denorm_min(), -std::numeric_limits<float>::denorm_min()}) {
    check(x);
  }
  EXPECT_GT(checked, 1000000);
}

TEST(HalfConversion, FloatToHalfRoundsToNearestEven) { check_encoding<Half>(kHalfFmt); }
TEST(HalfConversion, FloatToBFloat16RoundsToNearestEven) { check_encoding<BFloat16>(kBf16Fmt); }

// The CPU kernels convert float16 in bulk (F16C on x86): bit for bit what the
// scalar conversions above give, NaNs and every length's tail included.
TEST(HalfConversion, BulkConversionsMatchTheScalarOnes) {
  std::cout << "bulk float16 conversion: " << (tiny::cpu::half_convert_uses_f16c() ? "F16C" : "portable code")
            << "\n";
  std::vector<Half> halves(65536);
  for (uint32_t b = 0; b < 65536; ++b) halves[b] = Half::from_bits(static_cast<uint16_t>(b));
  std::vector<float> widened(halves.size());
  for (size_t offset : {size_t{0}, size_t{3}}) {  // an unaligned start and a tail of 5
    tiny::cpu::half_to_float(halves.data() + offset, widened.data() + offset,
                             static_cast<int64_t>(halves.size() - offset));
    for (size_t i = offset; i < halves.size(); ++i) {
      ASSERT_EQ(float_bits(widened[i]), float_bits(static_cast<float>(halves[i]))) << "pattern 0x" << std::hex << i;
    }
  }

  // Every float16 value, every tie between neighbours and one float either
  // side, both signs; the float32 edges; then random patterns, NaNs included.
  std::vector<float> floats;
  const std::vector<double>& t = value_table(kHalfFmt);
  for (size_t i = 0; i + 1 < t.size(); ++i) {
    const float mid = static_cast<float>((t[i] + t[i + 1]) / 2);
    for (float x : {static_cast<float>(t[i]), mid, std::nextafter(mid, INFINITY), std::nextafter(mid, -INFINITY)}) {
      floats.push_back(x);
      floats.push_back(-x);
    }
  }
  for (float x : {0.0f, INFINITY, std::numeric_limits<float>::max(), std::numeric_limits<float>::denorm_min(),
                  std::numeric_limits<float>::min(), 65520.0f, 65519.996f, 0x1p-25f, 0x1.8p-24f}) {
    floats.push_back(x);
    floats.push_back(-x);
  }
  for (uint32_t payload : {1u, 0x2000u, 0x3FFFFFu, 0x400000u, 0x400001u, 0x7FFFFFu}) {
    floats.push_back(bits_float(0x7F800000u | payload));
    floats.push_back(bits_float(0xFF800000u | payload));
  }
  std::mt19937 rng(2026);
  for (int i = 0; i < 1000000; ++i) floats.push_back(bits_float(static_cast<uint32_t>(rng())));
  std::vector<Half> narrowed(floats.size());
  for (size_t offset : {size_t{0}, size_t{1}}) {
    tiny::cpu::float_to_half(floats.data() + offset, narrowed.data() + offset,
                             static_cast<int64_t>(floats.size() - offset));
    for (size_t i = offset; i < floats.size(); ++i) {
      ASSERT_EQ(narrowed[i].x, Half(floats[i]).x)
          << "value " << std::hexfloat << floats[i] << " (bits 0x" << std::hex << float_bits(floats[i]) << ")";
    }
  }
}

TEST(HalfConversion, EdgeValues) {
  EXPECT_EQ(Half(65504.0f).x, 0x7BFF);     // largest finite
  EXPECT_EQ(Half(65519.996f).x, 0x7BFF);   // just below the overflow tie
  EXPECT_EQ(Half(65520.0f).x, 0x7C00);     // the tie rounds to even: infinity
  EXPECT_EQ(Half(0x1p-24f).x, 0x0001);     // smallest subnormal
  EXPECT_EQ(Half(0x1p-25f).x, 0x0000);     // half of it: tie to even (zero)
  EXPECT_EQ(Half(0x1.8p-24f).x, 0x0002);   // 1.5 steps: tie to even (2)
  EXPECT_EQ(Half(-0.0f).x, 0x8000);
  EXPECT_EQ(BFloat16(1.0f + 0x1p-8f).x, 0x3F80);       // tie, even below
  EXPECT_EQ(BFloat16(1.0f + 0x3p-8f).x, 0x3F82);       // tie, even above
  EXPECT_EQ(BFloat16(std::numeric_limits<float>::max()).x, 0x7F80);  // rounds past the largest bfloat16
  EXPECT_EQ(BFloat16(0x1.fep127f).x, 0x7F7F);          // the largest bfloat16 itself
}

TEST(HalfConversion, NaNBecomesTheDocumentedQuietNaN) {
  for (uint32_t payload : {1u, 0x2000u, 0x3FFFFFu, 0x400000u, 0x400001u, 0x7FFFFFu}) {
    for (uint32_t sign : {0u, 0x80000000u}) {
      const float nan = bits_float(sign | 0x7F800000u | payload);
      ASSERT_TRUE(std::isnan(nan));
      EXPECT_EQ(Half(nan).x, (sign >> 16) | 0x7E00) << std::hex << payload;  // as c10::Half
      EXPECT_EQ(BFloat16(nan).x, 0x7FC0) << std::hex << payload;             // as c10::BFloat16
    }
  }
}

TEST(HalfConversion, TensorCopiesUseTheSameConversions) {
  // All patterns through the copy kernel (CPU and device), both directions and across the 16-bit types.
  std::vector<uint16_t> all(65536);
  for (uint32_t b = 0; b < 65536; ++b) all[b] = static_cast<uint16_t>(b);
  for (const std::string& dev : test_devices()) {
    SCOPED_TRACE(dev);
    for (Dtype d : {tiny::kFloat16, tiny::kBFloat16}) {
      const Tensor t = half_from_bits(all, d).to(dev);
      const Tensor f = t.to(tiny::kFloat32);
      const std::vector<float> fv = f.cpu().to_vector<float>();
      for (uint32_t b = 0; b < 65536; ++b) {
        const float expected = d == tiny::kFloat16 ? float(Half::from_bits(all[b])) : float(BFloat16::from_bits(all[b]));
        ASSERT_EQ(float_bits(fv[b]), float_bits(expected)) << dtype_name(d) << " 0x" << std::hex << b;
      }
      // float -> 16 bits -> float is the identity on every non-NaN 16-bit value.
      const std::vector<uint16_t> back = bits_of(f.to(d));
      for (uint32_t b = 0; b < 65536; ++b) {
        if (is_nan_pattern(format_of(d), all[b])) continue;
        ASSERT_EQ(back[b], all[b]) << dtype_name(d) << " 0x" << std::hex << b;
      }
    }
    // float16 -> bfloat16 goes through the exact float value: one rounding.
    const Tensor h = half_from_bits(all, tiny::kFloat16).to(dev);
    const std::vector<uint16_t> hb = bits_of(h.to(tiny::kBFloat16));
    for (uint32_t b = 0; b < 65536; ++b) {
      if (is_nan_pattern(kHalfFmt, all[b])) continue;
      const double mag = (b & 0x7FFF) == kHalfFmt.inf ? INFINITY : ref_value(kHalfFmt, b & 0x7FFF);
      ASSERT_EQ(hb[b], ref_encode(kBf16Fmt, (b & 0x8000) ? -mag : mag)) << "0x" << std::hex << b;
    }
  }
}

// ---- fixtures made with PyTorch 1.13 ----------------------------------------------

fs::path fixture_dir() { return fs::path(TINY_PARITY_DIR).parent_path() / "half_fixtures"; }
Tensor load(const std::string& c, const std::string& name) {
  return tiny::io::load_npy((fixture_dir() / c / (name + ".npy")).string());
}

TEST(HalfParity, ConversionsMatchPyTorch) {
  const Tensor probes = load("conversions", "probes");
  const Tensor half = load("conversions", "half");
  const Tensor bf16 = load("conversions", "bf16");
  ASSERT_EQ(half.dtype(), tiny::kFloat16);   // numpy '<f2'
  ASSERT_EQ(bf16.dtype(), tiny::kBFloat16);  // '<u2' bits
  ASSERT_GT(probes.numel(), 5000);
  const std::vector<float> p = probes.to_vector<float>();
  const std::vector<uint16_t> th = bits_of(half), tb = bits_of(bf16);
  const std::vector<uint16_t> mh = bits_of(probes.to(tiny::kFloat16)), mb = bits_of(probes.to(tiny::kBFloat16));
  for (size_t i = 0; i < p.size(); ++i) {
    ASSERT_EQ(mh[i], th[i]) << "float16 of " << std::hexfloat << p[i];
    ASSERT_EQ(mb[i], tb[i]) << "bfloat16 of " << std::hexfloat << p[i];
  }
}

enum class Tol { Ulp, Loose };

void expect_close(const Tensor& got, const Tensor& expected, Tol tol, const std::string& what) {
  ASSERT_EQ(got.dtype(), expected.dtype()) << what;
  ASSERT_EQ(got.sizes(), expected.sizes()) << what;
  if (!expected.is_floating_point()) {
    EXPECT_TRUE(tiny::equal(got.cpu(), expected.cpu())) << what;
    return;
  }
  const std::vector<uint16_t> g = bits_of(got), e = bits_of(expected);
  const std::vector<double> gv = values_of(got), ev = values_of(expected);
  for (size_t i = 0; i < g.size(); ++i) {
    if (tol == Tol::Ulp) {
      EXPECT_LE(ulp_distance(g[i], e[i]), 1) << what << " element " << i << ": " << gv[i] << " vs torch " << ev[i];
    } else {
      EXPECT_LE(std::fabs(gv[i] - ev[i]), 1e-2 + 1e-2 * std::fabs(ev[i]))
          << what << " element " << i << ": " << gv[i] << " vs torch " << ev[i];
    }
  }
}

TEST(HalfParity, OpsMatchPyTorch) {
  for (const std::string& dev : test_devices()) {
    SCOPED_TRACE(dev);
    for (const std::string s : {"_f16", "_bf16"}) {
      auto in = [&](const std::string& c, const std::string& n) { return load(c + s, n).to(dev); };
      auto out = [&](const std::string& c) { return load(c + s, "out"); };
      expect_close(in("add_broadcast", "a") + in("add_broadcast", "b"), out("add_broadcast"), Tol::Ulp, "add" + s);
      expect_close(in("mul", "a") * in("mul", "b"), out("mul"), Tol::Ulp, "mul" + s);
      expect_close(in("div", "a") / in("div", "b"), out("div"), Tol::Ulp, "div" + s);
      expect_close(tiny::sum(in("sum_dim", "a"), {1}), out("sum_dim"), Tol::Loose, "sum_dim" + s);
      expect_close(tiny::mean(in("mean_all", "a")), out("mean_all"), Tol::Loose, "mean_all" + s);
      auto [values, indices] = tiny::max(in("max_dim", "a"), 1);
      expect_close(values, load("max_dim" + s, "values"), Tol::Ulp, "max_dim values" + s);
      expect_close(indices, load("max_dim" + s, "indices"), Tol::Ulp, "max_dim indices" + s);
    }
    auto in = [&](const std::string& c, const std::string& n) { return load(c, n).to(dev); };
    expect_close(tiny::exp(in("exp_bf16", "a")), load("exp_bf16", "out"), Tol::Ulp, "exp");
    expect_close(tiny::sigmoid(in("sigmoid_bf16", "a")), load("sigmoid_bf16", "out"), Tol::Ulp, "sigmoid");
    expect_close(tiny::gelu(in("gelu_bf16", "a")), load("gelu_bf16", "out"), Tol::Ulp, "gelu");
    expect_close(tiny::mm(in("mm_bf16", "a"), in("mm_bf16", "b")), load("mm_bf16", "out"), Tol::Loose, "mm");
  }
}

TEST(HalfParity, BackwardMatchesPyTorch) {
  for (const std::string& dev : test_devices()) {
    SCOPED_TRACE(dev);
    auto leaf = [&](const std::string& c, const std::string& n) {
      Tensor t = load(c, n).to(dev);
      t.requires_grad_(true);
      return t;
    };
    auto check_grads = [&](const std::string& c, const Tensor& out, const std::vector<std::pair<std::string, Tensor>>& ins) {
      expect_close(out, load(c, "out"), Tol::Loose, c + " out");
      if (out.dim() == 0) {
        out.backward();
      } else {
        out.backward(load(c, "grad_out").to(dev));
      }
      for (const auto& [name, t] : ins) {
        ASSERT_TRUE(t.grad().defined()) << c << " " << name;
        EXPECT_EQ(t.grad().dtype(), tiny::kBFloat16) << "gradients of bfloat16 tensors are bfloat16";
        expect_close(t.grad(), load(c, "grad_" + name), Tol::Loose, c + " grad_" + name);
      }
    };
    {
      Tensor x = leaf("softmax_bf16", "x");
      check_grads("softmax_bf16", F::softmax(x, 1), {{"x", x}});
    }
    {
      Tensor x = leaf("log_softmax_bf16", "x");
      check_grads("log_softmax_bf16", F::log_softmax(x, 1), {{"x", x}});
    }
    {
      Tensor x = leaf("cross_entropy_bf16", "x");
      check_grads("cross_entropy_bf16", F::cross_entropy(x, load("cross_entropy_bf16", "target").to(dev)), {{"x", x}});
    }
    {
      Tensor x = leaf("linear_bf16", "x"), w = leaf("linear_bf16", "w"), b = leaf("linear_bf16", "b");
      check_grads("linear_bf16", F::linear(x, w, b), {{"x", x}, {"w", w}, {"b", b}});
    }
  }
}

// ---- accumulation and float64 references -------------------------------------------

TEST(HalfMath, SumOf4096HalfOnesIs4096) {
  for (const std::string& dev : test_devices()) {
    for (Dtype d : {tiny::kFloat16, tiny::kBFloat16}) {
      SCOPED_TRACE(dev + " " + dtype_name(d));
      // Accumulating in 16 bits would stop at 2048 (half) or 256 (bfloat16): 1 is below half an ulp there.
      const Tensor s = tiny::sum(tiny::ones({4096}, tiny::TensorOptions(d).device(dev)));
      EXPECT_EQ(s.dtype(), d);
      EXPECT_EQ(s.item<double>(), 4096.0);
      // Rows too: each of the 3 rows sums 4096 ones.
      const Tensor rows = tiny::sum(tiny::ones({3, 4096}, tiny::TensorOptions(d).device(dev)), {1});
      for (double v : values_of(rows)) EXPECT_EQ(v, 4096.0);
      // mean sums in float32 and rounds once: a float16 sum of 100000 would overflow (65504).
      EXPECT_EQ(tiny::mean(tiny::ones({100000}, tiny::TensorOptions(d).device(dev))).item<double>(), 1.0);
    }
    // The result itself is float16: past 65504 it is inf, as in PyTorch.
    EXPECT_TRUE(std::isinf(tiny::sum(tiny::ones({70000}, tiny::TensorOptions(tiny::kFloat16).device(dev))).item<double>()));
  }
}

// A float16 tensor whose values are exact, from a seeded float32 randn.
Tensor random_half(const tiny::IntArrayRef& shape, double scale, uint64_t seed) {
  tiny::manual_seed(seed);
  return (tiny::randn(shape) * scale).to(tiny::kFloat16);
}

TEST(HalfMath, PointwiseAgainstFloat64RoundedToHalf) {
  const Tensor x = random_half({4000}, 3.0, 1);
  const std::vector<double> xv = values_of(x);
  struct Case {
    const char* name;
    std::function<Tensor(const Tensor&)> op;
    std::function<double(double)> ref;
  };
  const std::vector<Case> cases = {
      {"exp", [](const Tensor& t) { return tiny::exp(t); }, [](double v) { return std::exp(v); }},
      {"tanh", [](const Tensor& t) { return tiny::tanh(t); }, [](double v) { return std::tanh(v); }},
      {"sigmoid", [](const Tensor& t) { return tiny::sigmoid(t); }, [](double v) { return 1 / (1 + std::exp(-v)); }},
      {"sqrt(|x|)", [](const Tensor& t) { return tiny::sqrt(tiny::abs(t)); }, [](double v) { return std::sqrt(std::fabs(v)); }},
      {"x*x+x/3", [](const Tensor& t) { return t * t + t / 3.0; }, nullptr},
  };
  for (const std::string& dev : test_devices()) {
    for (const Case& c : cases) {
      SCOPED_TRACE(dev + " " + c.name);
      if (!c.ref) continue;
      const Tensor y = c.op(x.to(dev));
      ASSERT_EQ(y.dtype(), tiny::kFloat16);
      const std::vector<uint16_t> got = bits_of(y);
      int64_t exact = 0;
      for (size_t i = 0; i < xv.size(); ++i) {
        const uint16_t expected = ref_encode(kHalfFmt, c.ref(xv[i]));
        ASSERT_LE(ulp_distance(got[i], expected), 1) << c.name << "(" << xv[i] << ")";
        exact += got[i] == expected;
      }
      // Off by one only where the exact value is within a float32 rounding of a tie: rare.
      EXPECT_GT(exact, static_cast<int64_t>(xv.size()) * 99 / 100) << c.name;
    }
    // Each binary op rounds once, so x*x + x/3 rounds three times: check each step against float64.
    const Tensor sq = x.to(dev) * x.to(dev);
    const std::vector<uint16_t> sqb = bits_of(sq);
    for (size_t i = 0; i < xv.size(); ++i) ASSERT_EQ(sqb[i], ref_encode(kHalfFmt, xv[i] * xv[i])) << xv[i];
  }
}

TEST(HalfMath, MatmulAgainstFloat64RoundedToHalf) {
  const int64_t m = 37, k = 300, n = 29;
  const Tensor a = random_half({m, k}, 1.0, 2), b = random_half({k, n}, 1.0, 3), bias = random_half({n}, 1.0, 4);
  const std::vector<double> av = values_of(a), bv = values_of(b), cv = values_of(bias);
  for (const std::string& dev : test_devices()) {
    SCOPED_TRACE(dev);
    // addmm with a transposed operand: the column-major path of the GEMM.
    const Tensor bt = b.t().contiguous().to(dev).t();
    const Tensor out = tiny::addmm(bias.to(dev), a.to(dev), bt, 0.5, 2.0);
    ASSERT_EQ(out.dtype(), tiny::kFloat16);
    const std::vector<double> got = values_of(out);
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        double exact = 0, abs_sum = 0;
        for (int64_t p = 0; p < k; ++p) {
          exact += av[i * k + p] * bv[p * n + j];
          abs_sum += std::fabs(av[i * k + p] * bv[p * n + j]);
        }
        exact = 0.5 * cv[j] + 2.0 * exact;
        const double ref = ref_value(kHalfFmt, ref_encode(kHalfFmt, exact) & 0x7FFF) * (exact < 0 ? -1 : 1);
        const double ulp = std::ldexp(1.0, std::max(std::ilogb(std::fabs(ref) + 1e-30), -14) - 10);
        const double float_acc = static_cast<double>(k) * 0x1p-24 * 2.0 * abs_sum;
        ASSERT_LE(std::fabs(got[i * n + j] - ref), ulp + float_acc) << "C[" << i << "," << j << "]";
      }
    }
  }
}

TEST(HalfMath, SoftmaxAndCrossEntropyAgainstFloat64) {
  const Tensor x = random_half({16, 50}, 2.0, 5);
  tiny::manual_seed(6);
  const Tensor target = tiny::randint(0, 50, {16});
  const std::vector<double> xv = values_of(x);
  const std::vector<int64_t> tv = target.to_vector<int64_t>();
  for (const std::string& dev : test_devices()) {
    SCOPED_TRACE(dev);
    const Tensor sm = F::softmax(x.to(dev), 1), lsm = F::log_softmax(x.to(dev), 1);
    const Tensor ce = F::cross_entropy(x.to(dev), target.to(dev));
    ASSERT_EQ(sm.dtype(), tiny::kFloat16);
    ASSERT_EQ(ce.dtype(), tiny::kFloat16);
    const std::vector<uint16_t> smb = bits_of(sm), lsmb = bits_of(lsm);
    double ce_ref = 0, max_lp = 0;
    for (int64_t r = 0; r < 16; ++r) {
      double mx = -INFINITY, sum = 0;
      for (int64_t c = 0; c < 50; ++c) mx = std::max(mx, xv[r * 50 + c]);
      for (int64_t c = 0; c < 50; ++c) sum += std::exp(xv[r * 50 + c] - mx);
      for (int64_t c = 0; c < 50; ++c) {
        const double lp = xv[r * 50 + c] - mx - std::log(sum);
        ASSERT_LE(ulp_distance(smb[r * 50 + c], ref_encode(kHalfFmt, std::exp(lp))), 1) << r << "," << c;
        ASSERT_LE(ulp_distance(lsmb[r * 50 + c], ref_encode(kHalfFmt, lp)), 1) << r << "," << c;
        max_lp = std::max(max_lp, std::fabs(lp));
      }
      ce_ref -= (xv[r * 50 + tv[r]] - mx - std::log(sum)) / 16;
    }
    // cross_entropy = nll(log_softmax): the log-probabilities are rounded to
    // float16 before the mean, as in PyTorch, so allow their rounding too.
    EXPECT_NEAR(ce.item<double>(), ce_ref, std::ldexp(max_lp, -11) + std::ldexp(ce_ref, -10));
  }
}

// ---- dtype rules -----------------------------------------------------------------

TEST(HalfDtype, NamesSizesAndPromotion) {
  using tiny::promote_types;
  EXPECT_STREQ(tiny::dtype_name(tiny::kFloat16), "float16");
  EXPECT_STREQ(tiny::dtype_name(tiny::kBFloat16), "bfloat16");
  EXPECT_EQ(tiny::kHalf, tiny::kFloat16);
  EXPECT_EQ(tiny::element_size(tiny::kFloat16), 2u);
  EXPECT_EQ(tiny::element_size(tiny::kBFloat16), 2u);
  EXPECT_TRUE(tiny::is_floating_point(tiny::kFloat16));
  EXPECT_TRUE(tiny::is_floating_point(tiny::kBFloat16));
  EXPECT_EQ(tiny::dtype_of<Half>(), tiny::kFloat16);
  EXPECT_EQ(tiny::dtype_of<BFloat16>(), tiny::kBFloat16);
  // torch.promote_types
  EXPECT_EQ(promote_types(tiny::kFloat16, tiny::kBFloat16), tiny::kFloat32);
  EXPECT_EQ(promote_types(tiny::kBFloat16, tiny::kFloat16), tiny::kFloat32);
  EXPECT_EQ(promote_types(tiny::kFloat16, tiny::kFloat32), tiny::kFloat32);
  EXPECT_EQ(promote_types(tiny::kBFloat16, tiny::kFloat64), tiny::kFloat64);
  EXPECT_EQ(promote_types(tiny::kFloat16, tiny::kInt64), tiny::kFloat16);
  EXPECT_EQ(promote_types(tiny::kBool, tiny::kBFloat16), tiny::kBFloat16);
  EXPECT_EQ(promote_types(tiny::kFloat16, tiny::kFloat16), tiny::kFloat16);

  const Tensor h = tiny::ones({3}, tiny::kFloat16), b = tiny::ones({3}, tiny::kBFloat16);
  EXPECT_EQ((h + b).dtype(), tiny::kFloat32);
  EXPECT_EQ((h + tiny::ones({3})).dtype(), tiny::kFloat32);
  EXPECT_EQ((h + tiny::ones({3}, tiny::kInt64)).dtype(), tiny::kFloat16);
  // Scalars, and 0-d tensors of the same category, do not promote.
  EXPECT_EQ((h * 2.5).dtype(), tiny::kFloat16);
  EXPECT_EQ((b + 1).dtype(), tiny::kBFloat16);
  EXPECT_EQ((h + tiny::scalar_tensor(2.0, tiny::kFloat64)).dtype(), tiny::kFloat16);
  EXPECT_EQ((tiny::ones({3}, tiny::kInt64) * tiny::scalar_tensor(2.0, tiny::kBFloat16)).dtype(), tiny::kBFloat16);
  EXPECT_EQ((h / tiny::ones({3}, tiny::kInt64)).dtype(), tiny::kFloat16);
  EXPECT_EQ((h < 0.5).dtype(), tiny::kBool);
  // 1e5 does not fit a float16: the product is inf, as in PyTorch.
  EXPECT_TRUE(std::isinf((h * 1e5).sum().item<double>()));
}

TEST(HalfDtype, MismatchedMatmulDtypesAreDtypeErrors) {
  const Tensor h = tiny::ones({2, 2}, tiny::kFloat16), b = tiny::ones({2, 2}, tiny::kBFloat16);
  tiny_test::expect_error<tiny::DtypeError>([&] { (void)tiny::mm(h, b); }, {"float16", "bfloat16"});
  tiny_test::expect_error<tiny::DtypeError>([&] { (void)tiny::mm(h, tiny::ones({2, 2})); }, {"float16", "float32"});
  tiny_test::expect_error<tiny::DtypeError>([&] { (void)h.data_ptr<float>(); }, {"float16", "float32"});
}

// ---- creation, conversion, printing -----------------------------------------------

TEST(HalfTensor, CreationWithDtype) {
  for (const std::string& dev : test_devices()) {
    for (Dtype d : {tiny::kFloat16, tiny::kBFloat16}) {
      SCOPED_TRACE(dev + " " + dtype_name(d));
      const auto opt = tiny::TensorOptions(d).device(dev);
      EXPECT_EQ(tiny::zeros({2, 3}, opt).dtype(), d);
      EXPECT_EQ(values_of(tiny::full({2}, 0.1, opt)),
                std::vector<double>(2, static_cast<float>(d == tiny::kFloat16 ? float(Half(0.1f)) : float(BFloat16(0.1f)))));
      EXPECT_EQ(values_of(tiny::arange(0.0, 5.0, 1.0, opt)), (std::vector<double>{0, 1, 2, 3, 4}));
      EXPECT_EQ(values_of(tiny::tensor({1.5, -2.25}, opt)), (std::vector<double>{1.5, -2.25}));
      // randn: the float32 draws rounded; rand: the float32 draw cut to the
      // type's precision (11 or 8 bits), so it stays in [0, 1).
      tiny::manual_seed(7);
      const Tensor r16 = tiny::randn({1000}, opt);
      tiny::manual_seed(7);
      const Tensor r32 = tiny::randn({1000}, tiny::TensorOptions(tiny::kFloat32).device(dev));
      EXPECT_EQ(bits_of(r16), bits_of(r32.to(d)));
      const int digits = d == tiny::kFloat16 ? 11 : 8;
      for (double u : values_of(tiny::rand({5000}, opt))) {
        ASSERT_GE(u, 0.0);
        ASSERT_LT(u, 1.0);
        ASSERT_EQ(std::ldexp(u, digits), std::floor(std::ldexp(u, digits))) << u;
      }
    }
  }
}

TEST(HalfTensor, ConversionsItemAndPrinting) {
  const Tensor x = tiny::tensor({0.1, 1.0, 65504.0, 70000.0});
  const Tensor h = x.half(), b = x.bfloat16();
  EXPECT_EQ(h.dtype(), tiny::kFloat16);
  EXPECT_EQ(b.dtype(), tiny::kBFloat16);
  EXPECT_EQ(h.float32().dtype(), tiny::kFloat32);
  const std::vector<double> hv = values_of(h);
  EXPECT_EQ(hv[0], static_cast<double>(0x1.998p-4f));  // 0.0999755859375
  EXPECT_EQ(hv[2], 65504.0);
  EXPECT_TRUE(std::isinf(hv[3]));
  EXPECT_EQ(values_of(b)[3], 70144.0);  // bfloat16 keeps float32's range, with 8 bits
  EXPECT_EQ(h[1].item().to_double(), 1.0);
  EXPECT_TRUE(h[1].item().is_floating_point());
  EXPECT_EQ(h.to_vector<Half>()[0].x, Half(0.1f).x);
  EXPECT_EQ(h[0].item<Half>().x, Half(0.1f).x);
  EXPECT_EQ(tiny::full({1}, Half(0.1f), tiny::kFloat32).item<double>(), static_cast<double>(0x1.998p-4f));
  std::ostringstream s;
  s << tiny::tensor({1.5, 2.0}, tiny::kFloat16) << "\n" << tiny::tensor({0.1}, tiny::kBFloat16);
  EXPECT_EQ(s.str(), "tensor([1.5000, 2.0000], dtype=tiny.float16)\ntensor([0.1001], dtype=tiny.bfloat16)");
}

// ---- files --------------------------------------------------------------------------

TEST(HalfFiles, NpyRoundTripAndNumpyFiles) {
  tiny_test::TempDir dir;
  std::vector<uint16_t> bits = {0x0000, 0x8000, 0x3C00, 0x7BFF, 0x0001, 0x7C00, 0xFC00, 0x7E00, 0x1234, 0xABCD};
  for (Dtype d : {tiny::kFloat16, tiny::kBFloat16}) {
    SCOPED_TRACE(dtype_name(d));
    const Tensor t = half_from_bits(bits, d).view({2, 5});
    tiny::io::save_npy(dir.file("t.npy"), t);
    const Tensor back = tiny::io::load_npy(dir.file("t.npy"));
    EXPECT_EQ(back.dtype(), d);
    EXPECT_EQ(back.sizes(), t.sizes());
    EXPECT_EQ(bits_of(back), bits);  // bit for bit, NaN and -0 included
    const std::vector<char> bytes = tiny_test::slurp(dir.file("t.npy"));
    const std::string header(bytes.begin(), bytes.begin() + 128);
    EXPECT_NE(header.find(d == tiny::kFloat16 ? "'<f2'" : "'<u2'"), std::string::npos) << header;
  }
  // Files numpy wrote (tests/framework/data/npy/make_npy_files.py): float16 [[0,1,2],[3,4,5]];
  // uint16 0..5 is read as bfloat16 bit patterns.
  const std::string npy = std::string(TINY_TEST_DATA_DIR) + "/npy/";
  const Tensor f2 = tiny::io::load_npy(npy + "dtype_f2.npy");
  EXPECT_EQ(f2.dtype(), tiny::kFloat16);
  EXPECT_EQ(values_of(f2), (std::vector<double>{0, 1, 2, 3, 4, 5}));
  const Tensor u2 = tiny::io::load_npy(npy + "dtype_u2.npy");
  EXPECT_EQ(u2.dtype(), tiny::kBFloat16);
  EXPECT_EQ(bits_of(u2), (std::vector<uint16_t>{0, 1, 2, 3, 4, 5}));
}

TEST(HalfFiles, SafetensorsAndStateDicts) {
  tiny_test::TempDir dir;
  tiny::manual_seed(8);
  tiny::nn::Linear layer(6, 4);
  layer.to(tiny::kBFloat16);
  tiny::StateDict state = layer.state_dict();
  state.insert("h", tiny::randn({3, 2}).half());
  for (const auto& [k, v] : state) EXPECT_TRUE(v.dtype() == tiny::kBFloat16 || k == "h") << k;
  tiny::save(state, dir.file("m.safetensors"));
  const std::vector<char> bytes = tiny_test::slurp(dir.file("m.safetensors"));
  const std::string text(bytes.begin(), bytes.end());
  EXPECT_NE(text.find("\"BF16\""), std::string::npos);
  EXPECT_NE(text.find("\"F16\""), std::string::npos);
  const tiny::StateDict back = tiny::load(dir.file("m.safetensors"));
  for (const auto& [k, v] : state) {
    ASSERT_TRUE(back.contains(k)) << k;
    EXPECT_EQ(back.at(k).dtype(), v.dtype()) << k;
    EXPECT_EQ(bits_of(back.at(k)), bits_of(v)) << k;
  }
  tiny::nn::Linear other(6, 4);
  other.to(tiny::kBFloat16);
  other.load_state_dict(back, /*strict=*/false);
  EXPECT_EQ(bits_of(other.state_dict().at("weight")), bits_of(state.at("weight")));
}

// ---- autograd, modules and optimizers ---------------------------------------------

TEST(HalfAutograd, GradientsOf16BitTensorsAre16Bit) {
  for (const std::string& dev : test_devices()) {
    SCOPED_TRACE(dev);
    Tensor x = tiny::tensor({0.5, -1.25, 3.0}, tiny::TensorOptions(tiny::kFloat16).device(dev));
    x.requires_grad_(true);
    (x * x).sum().backward();
    ASSERT_EQ(x.grad().dtype(), tiny::kFloat16);
    EXPECT_EQ(values_of(x.grad()), (std::vector<double>{1.0, -2.5, 6.0}));
    // A float32 leaf used through .half() gets a float32 gradient (ToCopyBackward).
    Tensor w = tiny::tensor({1.0, 2.0}, tiny::TensorOptions().device(dev));
    w.requires_grad_(true);
    (w.half() * 3.0).sum().backward();
    ASSERT_EQ(w.grad().dtype(), tiny::kFloat32);
    EXPECT_EQ(values_of(w.grad()), (std::vector<double>{3.0, 3.0}));
  }
}

TEST(HalfOptim, SgdStepComputesInFloatAndRoundsOnce) {
  for (Dtype d : {tiny::kFloat16, tiny::kBFloat16}) {
    SCOPED_TRACE(dtype_name(d));
    tiny::manual_seed(9);
    Tensor p = tiny::randn({64}).to(d);
    p.requires_grad_(true);
    const Tensor g = tiny::randn({64}).to(d);
    const std::vector<double> p0 = values_of(p), g0 = values_of(g);
    p.set_grad(g);
    tiny::optim::SGD opt({p}, tiny::optim::SGDOptions{0.01});
    opt.step();
    const std::vector<uint16_t> got = bits_of(p);
    for (size_t i = 0; i < p0.size(); ++i) {
      // param + (-lr) * grad in float, rounded once (kernels::SgdUpdate with opmath float).
      const float expected = static_cast<float>(p0[i]) + (-0.01f) * static_cast<float>(g0[i]);
      ASSERT_EQ(got[i], d == tiny::kFloat16 ? Half(expected).x : BFloat16(expected).x) << i;
    }
  }
}

TEST(HalfOptim, AdamTrainsABFloat16LinearModel) {
  for (const std::string& dev : test_devices()) {
    SCOPED_TRACE(dev);
    tiny::manual_seed(10);
    tiny::nn::Linear model(8, 1);
    model.to(tiny::kBFloat16);
    model.to(tiny::Device(dev));
    const Tensor x = tiny::randn({64, 8}).to(dev).bfloat16();
    const Tensor y = tiny::sum(x * tiny::arange(0.0, 8.0, 1.0).to(dev).bfloat16() * 0.25, {1}, true);
    tiny::optim::Adam opt(model.parameters(), tiny::optim::AdamOptions{0.05});
    double first = 0, last = 0;
    for (int step = 0; step < 150; ++step) {
      opt.zero_grad();
      const Tensor loss = F::mse_loss(model.forward(x), y);
      ASSERT_EQ(loss.dtype(), tiny::kBFloat16);
      loss.backward();
      for (const Tensor& p : model.parameters()) ASSERT_EQ(p.grad().dtype(), tiny::kBFloat16);
      opt.step();
      (step == 0 ? first : last) = loss.item<double>();
    }
    EXPECT_LT(last, first * 0.02) << "first loss " << first << ", last " << last;
  }
}

TEST(HalfOps, DropoutKeepsTheDtype) {
  tiny::manual_seed(11);
  const Tensor x = tiny::ones({10000}, tiny::kFloat16);
  const Tensor y = F::dropout(x, 0.5, true);
  ASSERT_EQ(y.dtype(), tiny::kFloat16);
  int64_t kept = 0;
  for (double v : values_of(y)) {
    ASSERT_TRUE(v == 0.0 || v == 2.0) << v;
    kept += v == 2.0;
  }
  EXPECT_NEAR(static_cast<double>(kept) / 10000, 0.5, 0.03);
}

TEST(HalfOps, EmulatedGpuGivesTheCpuBits) {
  if (!tiny::cuda::is_available()) GTEST_SKIP() << "no GPU (TINY_EMULATED_GPUS=0)";
  for (Dtype d : {tiny::kFloat16, tiny::kBFloat16}) {
    SCOPED_TRACE(dtype_name(d));
    tiny::manual_seed(12);
    const Tensor a = tiny::randn({40, 70}).to(d), b = tiny::randn({70, 30}).to(d);
    auto run = [&](const tiny::Device& dev) {
      const Tensor x = a.to(dev), y = b.to(dev);
      return std::vector<Tensor>{tiny::mm(x, y), tiny::sum(x, {0}), F::softmax(x, 1), tiny::gelu(x),
                                 tiny::mean(x, {1}), std::get<0>(tiny::max(x, 1))};
    };
    const auto cpu = run(tiny::Device("cpu")), gpu = run(tiny::Device("cuda:0"));
    for (size_t i = 0; i < cpu.size(); ++i) {
      EXPECT_EQ(gpu[i].device(), tiny::Device("cuda:0"));
      EXPECT_EQ(bits_of(gpu[i]), bits_of(cpu[i])) << "result " << i;
    }
  }
}

}  // namespace
