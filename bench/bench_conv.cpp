// tiny's conv2d on the CPU (im2col + OpenBLAS sgemm), on the shapes of
// bench/conv_cases.h, beside PyTorch's (bench/peers/bench_torch_conv.py, which
// uses oneDNN): bench/compare_conv.sh runs both and prints the ratio.
//
//   Conv2d/<case>/forward          y = conv2d(x, w, b), no autograd
//   Conv2d/<case>/forward_backward y = conv2d(x, w, b); y.backward(g): the
//                                  gradients of x, w and b, as in training
// float32, TINY_NUM_THREADS threads (default: all). Items are images.
#include <benchmark/benchmark.h>

#include <string>

#include "conv_cases.h"
#include "tiny/autograd.h"
#include "tiny/nn/nn.h"
#include "tiny/ops.h"
#include "tiny/tensor.h"

namespace {

using tiny::Tensor;

void run(benchmark::State& state, const bench::ConvCase& c, bool backward) {
  tiny::manual_seed(1);
  Tensor x = tiny::randn({c.batch, c.in_channels, c.size, c.size});
  Tensor w = tiny::randn({c.out_channels, c.in_channels, c.kernel, c.kernel}) * 0.1;
  Tensor b = tiny::randn({c.out_channels});
  tiny::nn::Conv2dOptions o;
  o.set_stride(c.stride).set_padding(c.padding);
  if (backward) {
    x.requires_grad_(true);
    w.requires_grad_(true);
    b.requires_grad_(true);
  }
  const Tensor g = tiny::randn(tiny::nn::functional::conv2d(x.detach(), w.detach(), b.detach(), o).sizes());
  for (auto _ : state) {
    if (backward) {
      for (const Tensor* t : {&x, &w, &b}) t->set_grad(Tensor());  // zero_grad(set_to_none=True)
      Tensor y = tiny::nn::functional::conv2d(x, w, b, o);
      y.backward(g);
      benchmark::DoNotOptimize(w.grad().data_ptr<float>());
    } else {
      tiny::NoGradGuard no_grad;
      Tensor y = tiny::nn::functional::conv2d(x, w, b, o);
      benchmark::DoNotOptimize(y.data_ptr<float>());
    }
  }
  state.SetItemsProcessed(state.iterations() * c.batch);
}

[[maybe_unused]] const bool registered = [] {
  for (const bench::ConvCase& c : bench::kConvCases) {
    for (const bool backward : {false, true}) {
      const std::string name = std::string("Conv2d/") + c.name + (backward ? "/forward_backward" : "/forward");
      benchmark::RegisterBenchmark(name.c_str(), [c, backward](benchmark::State& s) { run(s, c, backward); })
          ->Unit(benchmark::kMillisecond)
          ->UseRealTime();
    }
  }
  return true;
}();

}  // namespace
