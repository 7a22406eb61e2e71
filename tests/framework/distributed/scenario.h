// What the multi-process tests train: the model, the data and the training
// loop, shared by the rank program (worker.cpp) and the single-process
// reference in test_distributed.cpp, so that both run exactly the same steps.
#pragma once

#include <memory>
#include <vector>

#include "tiny/tiny.h"

namespace dist_scenario {

constexpr int64_t kExamples = 24;  // divides evenly by 1, 2, 3 and 4 ranks
constexpr int64_t kIn = 8, kHidden = 32, kOut = 4;
constexpr int kSteps = 4;
constexpr double kLr = 0.1;

inline std::shared_ptr<tiny::nn::Sequential> make_model(uint64_t seed) {
  tiny::manual_seed(seed);
  return std::make_shared<tiny::nn::Sequential>(std::make_shared<tiny::nn::Linear>(kIn, kHidden),
                                                std::make_shared<tiny::nn::Tanh>(),
                                                std::make_shared<tiny::nn::Linear>(kHidden, kHidden),
                                                std::make_shared<tiny::nn::Tanh>(),
                                                std::make_shared<tiny::nn::Linear>(kHidden, kOut));
}

struct Data {
  tiny::Tensor x, y;
};

inline Data make_data() {
  tiny::Generator g;
  g.manual_seed(1234);
  return {tiny::randn({kExamples, kIn}, {}, g), tiny::randn({kExamples, kOut}, {}, g)};
}

// Rows `indices` of `t`.
inline tiny::Tensor rows(const tiny::Tensor& t, const std::vector<int64_t>& indices) {
  std::vector<tiny::Tensor> picked;
  for (int64_t i : indices) picked.push_back(t.select(0, i));
  return tiny::stack(picked);
}

// Every parameter, flattened, in order.
inline std::vector<float> flat_parameters(tiny::nn::Module& model) {
  std::vector<float> out;
  for (const tiny::Tensor& p : model.parameters()) {
    auto v = p.detach().cpu().contiguous().to_vector<float>();
    out.insert(out.end(), v.begin(), v.end());
  }
  return out;
}

}  // namespace dist_scenario
