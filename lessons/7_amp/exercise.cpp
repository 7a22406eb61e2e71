// Lesson 7: mixed precision: float16 autocast with a GradScaler, and bfloat16 without one.
#include "exercise.h"

namespace lesson7 {

namespace F = tiny::nn::functional;
using tiny::Tensor;

Tensor amp_forward(tiny::nn::Module& model, const Tensor& x, const Tensor& y) {
  TINY_TODO("lesson 7: under tiny::amp::autocast(\"cuda\", tiny::kFloat16): loss = cross_entropy(model(x), y); return it");
}

double amp_train_step(tiny::nn::Module& model, tiny::optim::Optimizer& optimizer, tiny::amp::GradScaler& scaler,
                      const Tensor& x, const Tensor& y, double max_grad_norm) {
  TINY_TODO("lesson 7: zero_grad; loss = amp_forward; scaler.scale(loss).backward(); unscale_; clip_grad_norm_; scaler.step; scaler.update");
}

double bf16_train_step(tiny::nn::Module& model, tiny::optim::Optimizer& optimizer, const Tensor& x, const Tensor& y) {
  TINY_TODO("lesson 7: zero_grad; forward and loss under autocast(\"cuda\", tiny::kBFloat16); loss.backward(); optimizer.step()");
}

}  // namespace lesson7
