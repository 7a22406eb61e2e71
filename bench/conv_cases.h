// The convolution shapes bench_conv.cpp and its PyTorch peer
// (bench/peers/bench_torch_conv.py) time: keep the two lists in step.
#pragma once

#include <cstdint>

namespace bench {

struct ConvCase {
  const char* name;
  int64_t batch, in_channels, out_channels, size, kernel, stride, padding;
};

// name, N, C_in, C_out, H = W, k, stride, padding
inline constexpr ConvCase kConvCases[] = {
    {"fashion1", 64, 1, 32, 28, 3, 1, 1},    // train_cnn's first layer on Fashion-MNIST
    {"fashion2", 64, 32, 64, 14, 3, 1, 1},   // its second
    {"resnet", 8, 64, 64, 56, 3, 1, 1},      // a ResNet-18/34 stage-1 convolution
    {"resnet_s2", 8, 64, 128, 56, 3, 2, 1},  // the stride-2 convolution opening stage 2
};

}  // namespace bench
