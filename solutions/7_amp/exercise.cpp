// Lesson 7: mixed precision: float16 autocast with a GradScaler, and bfloat16 without one.
#include "exercise.h"

namespace lesson7 {

namespace F = tiny::nn::functional;
using tiny::Tensor;

Tensor amp_forward(tiny::nn::Module& model, const Tensor& x, const Tensor& y) {
  // BEGIN SOLUTION: under tiny::amp::autocast("cuda", tiny::kFloat16): loss = cross_entropy(model(x), y); return it
  tiny::amp::autocast guard("cuda", tiny::kFloat16);  // until the end of this scope
  const Tensor logits = model(x);                      // float16: the matmuls ran in half precision
  return F::cross_entropy(logits, y);                  // float32: autocast runs the loss in full precision
  // END SOLUTION
}

double amp_train_step(tiny::nn::Module& model, tiny::optim::Optimizer& optimizer, tiny::amp::GradScaler& scaler,
                      const Tensor& x, const Tensor& y, double max_grad_norm) {
  // BEGIN SOLUTION: zero_grad; loss = amp_forward; scaler.scale(loss).backward(); unscale_; clip_grad_norm_; scaler.step; scaler.update
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

double bf16_train_step(tiny::nn::Module& model, tiny::optim::Optimizer& optimizer, const Tensor& x, const Tensor& y) {
  // BEGIN SOLUTION: zero_grad; forward and loss under autocast("cuda", tiny::kBFloat16); loss.backward(); optimizer.step()
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
