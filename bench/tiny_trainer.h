// The training steps the benchmarks time and the performance model's
// calibration predicts (tests/framework/test_perf_model.cpp): the cases of
// training_cases.h in tiny, and lesson 7's three steps on case B.
#pragma once

#include <memory>

#include "tiny/amp.h"
#include "tiny/nn/nn.h"
#include "tiny/ops.h"
#include "tiny/optim/optim.h"
#include "tiny/tensor.h"
#include "training_cases.h"

namespace bench {

using tiny::Tensor;

// One case's model, optimizer and batch; step() = zero_grad, forward, loss, backward, optimizer step.
struct TinyTrainer {
  std::shared_ptr<tiny::nn::Sequential> model = std::make_shared<tiny::nn::Sequential>();
  std::unique_ptr<tiny::optim::Optimizer> optimizer;
  tiny::nn::CrossEntropyLoss criterion;
  Tensor x, y;

  explicit TinyTrainer(const TrainingCase& c, const tiny::Device& device = tiny::Device()) {
    tiny::manual_seed(0);
    for (size_t i = 0; i + 1 < c.sizes.size(); ++i) {
      model->push_back(std::make_shared<tiny::nn::Linear>(c.sizes[i], c.sizes[i + 1]));
      if (i + 2 < c.sizes.size()) {
        model->push_back(std::make_shared<tiny::nn::ReLU>());
        if (c.dropout > 0) model->push_back(std::make_shared<tiny::nn::Dropout>(c.dropout));
      }
    }
    model->train();
    model->to(device);
    if (c.adam) {
      tiny::optim::AdamOptions options;
      options.lr = bench::kAdamLr;
      optimizer = std::make_unique<tiny::optim::Adam>(model->parameters(), options);
    } else {
      tiny::optim::SGDOptions options;
      options.lr = bench::kSgdLr;
      options.momentum = bench::kSgdMomentum;
      optimizer = std::make_unique<tiny::optim::SGD>(model->parameters(), options);
    }
    x = tiny::from_vector(bench::case_inputs(c), {c.batch, c.sizes.front()}).to(device);
    y = tiny::from_vector(bench::case_labels(c), {c.batch}).to(device);
  }

  Tensor forward() { return criterion(model->forward(x), y); }

  void step() {
    optimizer->zero_grad();
    forward().backward();
    optimizer->step();
  }
};

// Lesson 7's step on case B: float32; float16 autocast with a GradScaler; bfloat16 autocast.
struct AmpTrainer {
  tiny::Dtype dtype;
  std::shared_ptr<tiny::nn::Sequential> model = std::make_shared<tiny::nn::Sequential>();
  std::unique_ptr<tiny::optim::Adam> optimizer;
  tiny::amp::GradScaler scaler;
  tiny::nn::CrossEntropyLoss criterion;
  Tensor x, y;

  AmpTrainer(tiny::Dtype d, const tiny::Device& device) : dtype(d) {
    const TrainingCase& c = training_cases()[1];
    tiny::manual_seed(0);
    for (size_t i = 0; i + 1 < c.sizes.size(); ++i) {
      model->push_back(std::make_shared<tiny::nn::Linear>(c.sizes[i], c.sizes[i + 1]));
      if (i + 2 < c.sizes.size()) model->push_back(std::make_shared<tiny::nn::ReLU>());
    }
    model->to(device);
    tiny::optim::AdamOptions options;
    options.lr = kAdamLr;
    optimizer = std::make_unique<tiny::optim::Adam>(model->parameters(), options);
    x = tiny::from_vector(case_inputs(c), {c.batch, c.sizes.front()}).to(device);
    y = tiny::from_vector(case_labels(c), {c.batch}).to(device);
  }

  void step() {
    optimizer->zero_grad();
    if (dtype == tiny::kFloat32) {
      criterion(model->forward(x), y).backward();
      optimizer->step();
      return;
    }
    Tensor loss;
    {
      tiny::amp::autocast guard("cuda", dtype);
      loss = criterion(model->forward(x), y);
    }
    if (dtype == tiny::kFloat16) {
      scaler.scale(loss).backward();
      scaler.step(*optimizer);
      scaler.update();
    } else {
      loss.backward();
      optimizer->step();
    }
  }
};

}  // namespace bench
