// Lesson 7: mixed precision: float16 autocast with loss scaling (your own, then
// GradScaler's), and bfloat16 without it.
#include "exercise.h"

#include <cmath>

namespace lesson7 {

namespace F = tiny::nn::functional;
using tiny::Tensor;

Tensor amp_forward(tiny::nn::Module& model, const Tensor& x, const Tensor& y) {
  // BEGIN SOLUTION: the model and its loss inside a float16 autocast region; return the loss
  tiny::amp::autocast guard("cuda", tiny::kFloat16);  // until the end of this scope
  const Tensor logits = model(x);                      // float16: the matmuls ran in half precision
  return F::cross_entropy(logits, y);                  // float32: autocast runs the loss in full precision
  // END SOLUTION
}

bool unscale_grads_(const std::vector<Tensor>& grads, double scale) {
  // BEGIN SOLUTION: divide each defined gradient by the scale in place; one read of the GPU says whether any was inf or NaN
  Tensor worst;  // the largest |gradient| of all, kept on the GPU: inf or NaN when any element is
  for (const Tensor& g : grads) {
    if (!g.defined()) continue;
    const Tensor largest = g.abs().max();
    worst = worst.defined() ? tiny::maximum(worst, largest) : largest;  // maximum keeps a NaN
    g.mul_(1.0 / scale);  // in place: the optimizer reads p.grad()
  }
  return worst.defined() && !std::isfinite(worst.item<double>());  // the one wait for the GPU
  // END SOLUTION
}

void update_scale(ScalerState& state, bool found_inf) {
  // BEGIN SOLUTION: back off and restart the count after an overflow; grow after growth_interval clean steps in a row
  if (found_inf) {
    state.scale *= state.backoff_factor;  // too large: some gradient overflowed
    state.growth_tracker = 0;
    return;
  }
  if (++state.growth_tracker == state.growth_interval) {
    state.scale *= state.growth_factor;  // a long run of clean steps: try a larger scale
    state.growth_tracker = 0;
  }
  // END SOLUTION
}

double scaled_train_step(tiny::nn::Module& model, tiny::optim::Optimizer& optimizer, ScalerState& state,
                         const Tensor& x, const Tensor& y) {
  // BEGIN SOLUTION: one float16 step with your scaler: scaled backward, the optimizer sees true gradients or nothing, the scale updated
  optimizer.zero_grad();
  const Tensor loss = amp_forward(model, x, y);
  (loss * state.scale).backward();  // every gradient state.scale times larger: no float16 underflow
  std::vector<Tensor> grads;
  for (const Tensor& p : model.parameters()) grads.push_back(p.grad());
  const bool found_inf = unscale_grads_(grads, state.scale);
  if (!found_inf) optimizer.step();  // an inf or NaN gradient would ruin the weights: skip the step
  update_scale(state, found_inf);
  return loss.item<double>();
  // END SOLUTION
}

double amp_train_step(tiny::nn::Module& model, tiny::optim::Optimizer& optimizer, tiny::amp::GradScaler& scaler,
                      const Tensor& x, const Tensor& y, double max_grad_norm) {
  // BEGIN SOLUTION: PyTorch's AMP recipe with GradScaler, clipping the unscaled gradients
  optimizer.zero_grad();                           // set_to_none: the previous step's gradients go
  const Tensor loss = amp_forward(model, x, y);    // autocast covers the forward pass and the loss only
  scaler.scale(loss).backward();                   // gradients of loss * scale: no float16 underflow
  scaler.unscale_(optimizer);                      // the true gradients again, before anything reads them
  tiny::nn::utils::clip_grad_norm_(model.parameters(), max_grad_norm);
  scaler.step(optimizer);                          // skipped when a gradient is inf or NaN
  scaler.update();                                 // back off after a skip, grow after a run of clean steps
  return loss.item<double>();
  // END SOLUTION
}

void save_checkpoint(const std::string& path, const tiny::nn::Module& model, const tiny::optim::Optimizer& optimizer,
                     const tiny::amp::GradScaler& scaler) {
  // BEGIN SOLUTION: one StateDict holding all three states under prefixes, written with tiny::save
  tiny::StateDict all;
  for (const auto& [name, t] : model.state_dict()) all.insert("model." + name, t);
  const tiny::StateDict opt = optimizer.state_dict();
  for (const auto& [name, t] : opt) all.insert("optimizer." + name, t);
  for (const auto& [key, value] : opt.metadata) all.metadata["optimizer." + key] = value;
  for (const auto& [key, value] : scaler.state_dict().metadata) all.metadata["scaler." + key] = value;  // numbers only
  tiny::save(all, path);
  // END SOLUTION
}

void load_checkpoint(const std::string& path, tiny::nn::Module& model, tiny::optim::Optimizer& optimizer,
                     tiny::amp::GradScaler& scaler) {
  // BEGIN SOLUTION: the model, the optimizer and the scaler as save_checkpoint saved them
  const tiny::StateDict all = tiny::load(path);
  tiny::StateDict parts[3];  // model, optimizer, scaler
  const std::string prefixes[3] = {"model.", "optimizer.", "scaler."};
  for (int i = 0; i < 3; ++i) {
    for (const auto& [name, t] : all) {
      if (name.rfind(prefixes[i], 0) == 0) parts[i].insert(name.substr(prefixes[i].size()), t);
    }
    for (const auto& [key, value] : all.metadata) {
      if (key.rfind(prefixes[i], 0) == 0) parts[i].metadata[key.substr(prefixes[i].size())] = value;
    }
  }
  model.load_state_dict(parts[0]);      // copied into the weights where they are (cuda:0)
  optimizer.load_state_dict(parts[1]);  // the momentum buffers, moved to their parameters' device
  scaler.load_state_dict(parts[2]);     // the scale and the count of clean steps
  // END SOLUTION
}

double bf16_train_step(tiny::nn::Module& model, tiny::optim::Optimizer& optimizer, const Tensor& x, const Tensor& y) {
  // BEGIN SOLUTION: one step whose products run in bfloat16 while the gradients and the update stay float32
  optimizer.zero_grad();
  Tensor loss;
  {
    tiny::amp::autocast guard("cuda", tiny::kBFloat16);  // bfloat16: float32's exponent range
    loss = F::cross_entropy(model(x), y);
  }
  loss.backward();   // no scaler: bfloat16 gradients do not underflow where float32 ones would not
  optimizer.step();
  return loss.item<double>();
  // END SOLUTION
}

}  // namespace lesson7
