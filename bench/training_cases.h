// The three training-step benchmark cases, shared by bench_training_step.cpp
// (tiny and the GEMM floor) and the LibTorch peer (bench/peers/libtorch/); the
// PyTorch peer (bench/peers/bench_torch.py) spells the same table in Python.
//
//   A  784-512-256-10, Dropout(0.2) after each ReLU (train mode), batch 64,  Adam(lr 1e-3)
//   B  1024-2048-512-10,                                          batch 128, Adam(lr 1e-3)
//   C  784-256-10,                                                batch 32,  SGD(lr 0.01, momentum 0.9)
//
// One step = zero_grad, forward, cross_entropy (mean), backward, optimizer step.
// The data is one batch, drawn once per run with splitmix64 (inputs uniform in
// [0, 1) from the top 24 bits, labels = (z >> 32) % classes), the same values in
// every program; the step reuses it, so no data loading is timed.
#pragma once

#include <cstdint>
#include <vector>

namespace bench {

struct TrainingCase {
  char name;                 // 'A', 'B', 'C'
  std::vector<int64_t> sizes;  // layer widths, input first
  int64_t batch;
  double dropout;            // probability after each hidden ReLU; 0 = no Dropout module
  bool adam;                 // else SGD with momentum
};

inline const std::vector<TrainingCase>& training_cases() {
  static const std::vector<TrainingCase> cases = {
      {'A', {784, 512, 256, 10}, 64, 0.2, true},
      {'B', {1024, 2048, 512, 10}, 128, 0.0, true},
      {'C', {784, 256, 10}, 32, 0.0, false},
  };
  return cases;
}

constexpr double kAdamLr = 1e-3;
constexpr double kSgdLr = 0.01;
constexpr double kSgdMomentum = 0.9;

// The i-th output (i = 0, 1, ...) of Vigna's splitmix64 stream started at `seed`.
inline uint64_t splitmix64(uint64_t seed, uint64_t i) {
  uint64_t z = seed + (i + 1) * 0x9E3779B97F4A7C15ULL;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

// A float in [0, 1) from the top 24 bits (exact in float32).
inline float uniform01(uint64_t z) { return static_cast<float>(z >> 40) * (1.0f / 16777216.0f); }

constexpr uint64_t kInputSeed = 0xB0B0001;
constexpr uint64_t kLabelSeed = 0xB0B0002;

// The batch's inputs, row-major [batch, sizes[0]].
inline std::vector<float> case_inputs(const TrainingCase& c) {
  std::vector<float> x(static_cast<size_t>(c.batch * c.sizes.front()));
  for (size_t i = 0; i < x.size(); ++i) x[i] = uniform01(splitmix64(kInputSeed, i));
  return x;
}

// The batch's labels in [0, sizes.back()).
inline std::vector<int64_t> case_labels(const TrainingCase& c) {
  std::vector<int64_t> y(static_cast<size_t>(c.batch));
  for (size_t i = 0; i < y.size(); ++i)
    y[i] = static_cast<int64_t>((splitmix64(kLabelSeed, i) >> 32) % static_cast<uint64_t>(c.sizes.back()));
  return y;
}

}  // namespace bench
