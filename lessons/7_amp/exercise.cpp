// Lesson 7: mixed precision: float16 autocast with loss scaling (your own, then
// GradScaler's), and bfloat16 without it.
#include "exercise.h"

#include <cmath>

namespace lesson7 {

namespace F = tiny::nn::functional;
using tiny::Tensor;

Tensor amp_forward(tiny::nn::Module& model, const Tensor& x, const Tensor& y) {
  TINY_TODO("lesson 7: the model and its loss inside a float16 autocast region; return the loss");
}

bool unscale_grads_(const std::vector<Tensor>& grads, double scale) {
  TINY_TODO("lesson 7: divide each defined gradient by the scale in place; one read of the GPU says whether any was inf or NaN");
}

void update_scale(ScalerState& state, bool found_inf) {
  TINY_TODO("lesson 7: back off and restart the count after an overflow; grow after growth_interval clean steps in a row");
}

double scaled_train_step(tiny::nn::Module& model, tiny::optim::Optimizer& optimizer, ScalerState& state,
                         const Tensor& x, const Tensor& y) {
  TINY_TODO("lesson 7: one float16 step with your scaler: scaled backward, the optimizer sees true gradients or nothing, the scale updated");
}

double amp_train_step(tiny::nn::Module& model, tiny::optim::Optimizer& optimizer, tiny::amp::GradScaler& scaler,
                      const Tensor& x, const Tensor& y, double max_grad_norm) {
  TINY_TODO("lesson 7: PyTorch's AMP recipe with GradScaler, clipping the unscaled gradients");
}

void save_checkpoint(const std::string& path, const tiny::nn::Module& model, const tiny::optim::Optimizer& optimizer,
                     const tiny::amp::GradScaler& scaler) {
  TINY_TODO("lesson 7: one StateDict holding all three states under prefixes, written with tiny::save");
}

void load_checkpoint(const std::string& path, tiny::nn::Module& model, tiny::optim::Optimizer& optimizer,
                     tiny::amp::GradScaler& scaler) {
  TINY_TODO("lesson 7: the model, the optimizer and the scaler as save_checkpoint saved them");
}

double bf16_train_step(tiny::nn::Module& model, tiny::optim::Optimizer& optimizer, const Tensor& x, const Tensor& y) {
  TINY_TODO("lesson 7: one step whose products run in bfloat16 while the gradients and the update stay float32");
}

}  // namespace lesson7
