// Lesson 7's graded model and optimizer, shared by the checker (which makes the
// initial weights) and the glue (which loads them and watches, with probes, what
// the student's step does: where autocast is on, the dtypes, what the optimizer
// is handed).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "tiny/tiny.h"

namespace lesson7_checks {

/// @brief in-hidden-hidden-classes MLP with ReLUs that remembers what every forward pass saw.
struct ProbedMLP : tiny::nn::Module {
  /// @brief What one forward pass saw.
  struct Call {
    bool autocast = false;        ///< tiny::amp::is_autocast_enabled("cuda") during the pass
    std::string autocast_dtype;   ///< tiny::amp::get_autocast_dtype("cuda") then ("" when autocast was off)
    std::string weight_dtype;     ///< fc1.weight's dtype then
    std::string output_dtype;     ///< the logits' dtype
  };

  ProbedMLP(int64_t in, int64_t hidden, int64_t classes) {
    fc1 = register_module("fc1", std::make_shared<tiny::nn::Linear>(in, hidden));
    fc2 = register_module("fc2", std::make_shared<tiny::nn::Linear>(hidden, hidden));
    fc3 = register_module("fc3", std::make_shared<tiny::nn::Linear>(hidden, classes));
  }

  tiny::Tensor forward(const tiny::Tensor& x) override {
    tiny::Tensor y = (*fc3)(tiny::relu((*fc2)(tiny::relu((*fc1)(x)))));
    Call call;
    call.autocast = tiny::amp::is_autocast_enabled("cuda");
    call.autocast_dtype = call.autocast ? tiny::dtype_name(tiny::amp::get_autocast_dtype("cuda")) : "";
    call.weight_dtype = tiny::dtype_name(fc1->weight.dtype());
    call.output_dtype = tiny::dtype_name(y.dtype());
    calls.push_back(call);
    return y;
  }
  std::string name() const override { return "MLP"; }

  std::shared_ptr<tiny::nn::Linear> fc1, fc2, fc3;
  std::vector<Call> calls;
};

/// @brief SGD that writes down every step(): whether autocast was on, and the gradients it was handed.
class ProbedSGD : public tiny::optim::SGD {
 public:
  /// @brief What one step() saw.
  struct Step {
    int train_step = -1;               ///< the glue's step counter when it ran
    bool autocast = false;             ///< tiny::amp::is_autocast_enabled("cuda") inside step()
    std::vector<tiny::Tensor> grads;   ///< clones of the gradients (undefined where none), parameters() order
  };

  ProbedSGD(std::vector<tiny::Tensor> params, const tiny::optim::SGDOptions& options)
      : SGD(std::move(params), options) {}

  void step() override {
    Step s;
    s.train_step = current_step;
    s.autocast = tiny::amp::is_autocast_enabled("cuda");
    for (const tiny::Tensor& p : parameters()) {
      const tiny::Tensor g = p.grad();
      s.grads.push_back(g.defined() ? g.detach().clone() : tiny::Tensor());
    }
    steps.push_back(std::move(s));
    SGD::step();
  }

  int current_step = -1;    ///< set by the glue before each training step
  std::vector<Step> steps;  ///< every step() call, in order
};

}  // namespace lesson7_checks
