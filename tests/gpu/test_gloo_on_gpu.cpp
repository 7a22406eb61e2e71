// Backend "gloo" with tensors on a real GPU: two ranks sharing cuda:0, which
// NCCL refuses, so one GPU runs the multi-rank path of DDP with CUDA tensors
// (the worker of tests/framework/distributed). Skips without a GPU.
#include <gtest/gtest.h>

#include "backend/cuda/probe.h"
#include "distributed/ranks.h"

TEST(GlooOnGpu, TwoRanksSharingOneGpuRunCollectivesAndDdp) {
  const int found = tiny::cuda_backend::real_device_count();
  if (found < 1) GTEST_SKIP() << "needs an NVIDIA GPU, found none: run ./workbook test --gpu on a GPU machine";
  dist_test::expect_two_ranks_sharing_cuda0_work();
}
