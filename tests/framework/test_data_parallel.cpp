// DataParallel on the emulated GPUs (torch.nn.DataParallel): Module::clone,
// the differentiable scatter / replicate / gather, the replica threads and
// what they inherit, and training equivalence with a single device.
#include <gtest/gtest.h>

#include <mutex>
#include <thread>
#include <vector>

#include "test_util.h"
#include "tiny/tiny.h"

namespace {

using tiny::Device;
using tiny::Tensor;
namespace nn = tiny::nn;
namespace F = tiny::nn::functional;
namespace parallel = tiny::nn::parallel;

bool have_two_gpus() { return tiny::cuda::device_count() >= 2; }
#define REQUIRE_TWO_GPUS() \
  if (!have_two_gpus()) GTEST_SKIP() << "needs 2 GPUs (TINY_EMULATED_GPUS >= 2)"

const Device kGpu0("cuda:0");
const Device kGpu1("cuda:1");

std::shared_ptr<nn::Sequential> small_mlp() {
  return std::make_shared<nn::Sequential>(std::make_shared<nn::Linear>(6, 16), std::make_shared<nn::Tanh>(),
                                          std::make_shared<nn::Linear>(16, 3));
}

// A user-defined model with a default constructor: Cloneable gives it clone().
struct TwoLayer : nn::Cloneable<TwoLayer> {
  TwoLayer() {
    fc1 = register_module("fc1", std::make_shared<nn::Linear>(4, 8));
    fc2 = register_module("fc2", std::make_shared<nn::Linear>(8, 2));
  }
  Tensor forward(const Tensor& x) override { return (*fc2)(tiny::relu((*fc1)(x))); }
  std::shared_ptr<nn::Linear> fc1, fc2;
};

// A user-defined model that never said how to copy itself.
struct NoClone : nn::Module {
  NoClone() { fc = register_module("fc", std::make_shared<nn::Linear>(4, 2)); }
  Tensor forward(const Tensor& x) override { return (*fc)(x); }
  std::shared_ptr<nn::Linear> fc;
};

// Records, for each call, the thread and what it saw.
struct Probe : nn::Cloneable<Probe> {
  struct Call {
    std::thread::id thread;
    bool grad_enabled;
    int current_device;
    Device input_device;
    int64_t rows;
  };
  Probe() { fc = register_module("fc", std::make_shared<nn::Linear>(3, 3)); }
  Tensor forward(const Tensor& x) override {
    {
      std::lock_guard<std::mutex> lock(mutex());
      calls().push_back({std::this_thread::get_id(), tiny::is_grad_enabled(), tiny::cuda::current_device(),
                         x.device(), x.size(0)});
    }
    return (*fc)(x);
  }
  static std::mutex& mutex() { static std::mutex m; return m; }
  static std::vector<Call>& calls() { static std::vector<Call> c; return c; }
  std::shared_ptr<nn::Linear> fc;
};

// ---- clone -------------------------------------------------------------------------------

TEST(ModuleClone, CopiesValuesIntoNewStorageWithoutDrawingRandomNumbers) {
  tiny::manual_seed(3);
  auto model = std::make_shared<nn::Sequential>(std::make_shared<nn::Linear>(5, 4), std::make_shared<nn::GELU>("tanh"),
                                                std::make_shared<nn::Dropout>(0.25), std::make_shared<nn::LayerNorm>(4),
                                                std::make_shared<nn::Flatten>(), std::make_shared<nn::ReLU>());
  model->eval();
  const tiny::PhiloxState before = tiny::default_cpu_generator().get_state();
  auto copy = std::dynamic_pointer_cast<nn::Sequential>(model->clone());
  const tiny::PhiloxState after = tiny::default_cpu_generator().get_state();
  EXPECT_EQ(before.offset, after.offset) << "clone() must not move the random stream";
  ASSERT_NE(copy, nullptr);
  EXPECT_EQ(nn::repr(*copy), nn::repr(*model));
  EXPECT_FALSE(copy->is_training());
  EXPECT_FALSE((*copy)[2]->is_training());
  const auto originals = model->named_parameters();
  const auto copies = copy->named_parameters();
  ASSERT_EQ(copies.size(), originals.size());
  for (size_t i = 0; i < copies.size(); ++i) {
    EXPECT_EQ(copies[i].first, originals[i].first);
    EXPECT_TRUE(tiny::equal(copies[i].second, originals[i].second));
    EXPECT_NE(copies[i].second.raw_data_ptr(), originals[i].second.raw_data_ptr()) << copies[i].first;
    EXPECT_TRUE(copies[i].second.is_leaf());
    EXPECT_TRUE(copies[i].second.requires_grad());
  }
  // The typed fields see the copied values.
  auto lin = copy->at<nn::Linear>(0);
  EXPECT_EQ(lin->in_features, 5);
  EXPECT_TRUE(lin->weight.is_same(copies[0].second));
  const Tensor x = tiny::randn({2, 5});
  EXPECT_TRUE(tiny::allclose((*copy)(x), (*model)(x)));
  // Changing the copy leaves the original alone.
  {
    tiny::NoGradGuard no_grad;
    lin->weight.fill_(0);
  }
  EXPECT_FALSE(tiny::equal(model->at<nn::Linear>(0)->weight, lin->weight));
}

TEST(ModuleClone, ToADeviceAndForUserModules) {
  REQUIRE_TWO_GPUS();
  auto model = std::make_shared<TwoLayer>();
  auto emb = std::make_shared<nn::Embedding>(10, 3, 0);
  auto copy = std::dynamic_pointer_cast<TwoLayer>(model->clone(kGpu1));
  ASSERT_NE(copy, nullptr);
  EXPECT_EQ(copy->fc1->weight.device(), kGpu1);
  EXPECT_TRUE(tiny::equal(copy->fc2->bias.cpu(), model->fc2->bias));
  auto emb_copy = std::dynamic_pointer_cast<nn::Embedding>(emb->clone(kGpu0));
  ASSERT_NE(emb_copy, nullptr);
  EXPECT_EQ(emb_copy->padding_idx, 0);
  EXPECT_EQ(emb_copy->num_embeddings, 10);
  EXPECT_TRUE(tiny::equal(emb_copy->weight.cpu(), emb->weight));
}

TEST(ModuleClone, AModuleWithoutCloneSaysHowToAddIt) {
  auto model = std::make_shared<NoClone>();
  tiny_test::expect_error<tiny::NotImplemented>([&] { model->clone(); },
                                                {"NoClone does not implement clone()", "tiny::nn::Cloneable<NoClone>",
                                                 "copy_state_into"});
  // Inside a Sequential, the message still names the module that lacks it.
  auto seq = std::make_shared<nn::Sequential>(std::make_shared<nn::ReLU>(), std::make_shared<NoClone>());
  tiny_test::expect_error<tiny::NotImplemented>([&] { seq->clone(); }, {"NoClone does not implement clone()"});
}

// ---- scatter, gather, replicate --------------------------------------------------------------

TEST(DataParallelPieces, ScatterSplitsUnevenlyAndItsBackwardGathers) {
  REQUIRE_TWO_GPUS();
  const Tensor x = tiny::randn({5, 2}).requires_grad_();
  const std::vector<Tensor> pieces = parallel::scatter(x, {0, 1});
  ASSERT_EQ(pieces.size(), 2u);
  EXPECT_EQ(pieces[0].size(0), 3);
  EXPECT_EQ(pieces[1].size(0), 2);
  EXPECT_EQ(pieces[1].device(), kGpu1);
  ASSERT_NE(pieces[0].grad_fn(), nullptr);
  EXPECT_EQ(pieces[0].grad_fn()->name(), "ScatterBackward");
  // d/dx of 2*sum(piece0) + 3*sum(piece1): 2 on the first 3 rows, 3 on the last 2.
  const Tensor loss = pieces[0].sum().mul(2.0).cpu() + pieces[1].sum().mul(3.0).cpu();
  loss.backward();
  EXPECT_TRUE(tiny::equal(x.grad(), tiny::tensor({2, 2, 2, 2, 2, 2, 3, 3, 3, 3}, {5, 2})));
}

TEST(DataParallelPieces, ScatterOfTooSmallABatchFailsClearly) {
  REQUIRE_TWO_GPUS();
  tiny_test::expect_error<tiny::ValueError>([] { parallel::scatter(tiny::zeros({1, 3}), {0, 1}); },
                                            {"cannot split 1 sample across 2 devices", "at least 2 samples"});
  auto dp = std::make_shared<nn::DataParallel>(small_mlp()->clone(kGpu0), std::vector<int>{0, 1});
  tiny_test::expect_error<tiny::ValueError>([&] { (*dp)(tiny::zeros({1, 6})); },
                                            {"cannot split 1 sample across 2 devices"});
}

TEST(DataParallelPieces, GatherConcatenatesOnTheOutputDeviceAndSendsGradientsBack) {
  REQUIRE_TWO_GPUS();
  const Tensor a = tiny::randn({2, 3}, kGpu0).requires_grad_();
  const Tensor b = tiny::randn({1, 3}, kGpu1).requires_grad_();
  const Tensor out = parallel::gather({a, b}, kGpu1);
  EXPECT_EQ(out.device(), kGpu1);
  EXPECT_EQ(out.sizes(), (tiny::IntArrayRef{3, 3}));
  ASSERT_NE(out.grad_fn(), nullptr);
  EXPECT_EQ(out.grad_fn()->name(), "GatherBackward");
  out.sum().backward();
  EXPECT_EQ(a.grad().device(), kGpu0);
  EXPECT_EQ(b.grad().device(), kGpu1);
  EXPECT_TRUE(tiny::equal(a.grad().cpu(), tiny::ones({2, 3})));
  // Scalars (a loss per replica) become a vector.
  const Tensor s = parallel::gather({tiny::scalar_tensor(1.0, kGpu0), tiny::scalar_tensor(2.0, kGpu1)}, kGpu0);
  EXPECT_TRUE(tiny::equal(s.cpu(), tiny::tensor({1.0, 2.0})));
}

TEST(DataParallelPieces, ReplicasAreBroadcastOutputsWhoseGradientsReachTheOriginal) {
  REQUIRE_TWO_GPUS();
  auto model = std::make_shared<TwoLayer>();
  model->to(kGpu0);
  const auto replicas = parallel::replicate(model, {0, 1});
  ASSERT_EQ(replicas.size(), 2u);
  auto r1 = std::dynamic_pointer_cast<TwoLayer>(replicas[1]);
  ASSERT_NE(r1, nullptr);
  EXPECT_EQ(r1->fc1->weight.device(), kGpu1);
  EXPECT_FALSE(r1->fc1->weight.is_leaf());
  ASSERT_NE(r1->fc1->weight.grad_fn(), nullptr);
  EXPECT_EQ(r1->fc1->weight.grad_fn()->name(), "BroadcastBackward");
  // Each replica's loss contributes to the original's gradient.
  const Tensor x = tiny::randn({3, 4});
  const Tensor loss = (*replicas[0])(x.to(kGpu0)).sum() + (*replicas[1])(x.to(kGpu1)).sum().to(kGpu0);
  loss.backward();
  EXPECT_FALSE(r1->fc1->weight.grad().defined()) << "replica parameters are not leaves: no .grad() of their own";
  ASSERT_TRUE(model->fc1->weight.grad().defined());
  auto single = std::dynamic_pointer_cast<TwoLayer>(model->clone());
  (*single)(x.to(kGpu0)).sum().mul(2.0).backward();
  EXPECT_TRUE(tiny::allclose(model->fc1->weight.grad().cpu(), single->fc1->weight.grad().cpu(), 1e-5, 1e-6));
  // Under no_grad the replicas are plain copies.
  tiny::NoGradGuard no_grad;
  const auto plain = parallel::replicate(model, {0, 1});
  EXPECT_TRUE(plain[1]->parameters()[0].is_leaf());
}

// ---- threads ----------------------------------------------------------------------------------

TEST(DataParallelThreads, ReplicasRunOnTheirOwnThreadsWithGradModeAndTheirDevice) {
  REQUIRE_TWO_GPUS();
  auto model = std::make_shared<Probe>();
  model->to(kGpu0);
  nn::DataParallel dp(model, {0, 1});
  for (bool grad : {true, false}) {
    Probe::calls().clear();
    {
      tiny::NoGradGuard no_grad;
      tiny::set_grad_enabled(grad);
      const Tensor out = dp(tiny::randn({5, 3}));
      EXPECT_EQ(out.requires_grad(), grad);
      EXPECT_EQ(out.device(), kGpu0);
    }
    ASSERT_EQ(Probe::calls().size(), 2u);
    for (const Probe::Call& call : Probe::calls()) {
      EXPECT_NE(call.thread, std::this_thread::get_id()) << "each replica runs on a thread of its own";
      EXPECT_EQ(call.grad_enabled, grad) << "the caller's grad mode must be carried into the replica thread";
      EXPECT_EQ(call.current_device, call.input_device.index()) << "the replica's device is current in its thread";
    }
    EXPECT_NE(Probe::calls()[0].thread, Probe::calls()[1].thread);
    EXPECT_EQ(Probe::calls()[0].rows + Probe::calls()[1].rows, 5);
  }
}

TEST(DataParallelThreads, ThreadLocalStateCarriesTheCurrentDevice) {
  REQUIRE_TWO_GPUS();
  tiny::cuda::DeviceGuard on_1(1);
  tiny::NoGradGuard no_grad;
  const tiny::ThreadLocalState state = tiny::ThreadLocalState::capture();
  EXPECT_EQ(state.current_device, 1);
  int inside = -1, after = -1;
  bool grad_inside = true;
  std::thread worker([&] {
    {
      tiny::ThreadLocalStateGuard guard(state);
      inside = tiny::cuda::current_device();
      grad_inside = tiny::is_grad_enabled();
    }
    after = tiny::cuda::current_device();
  });
  worker.join();
  EXPECT_EQ(inside, 1);
  EXPECT_FALSE(grad_inside);
  EXPECT_EQ(after, 0) << "the guard restores the thread's own device";
}

TEST(DataParallelThreads, AnErrorInAReplicaReachesTheCaller) {
  REQUIRE_TWO_GPUS();
  auto model = std::make_shared<TwoLayer>();
  model->to(kGpu0);
  nn::DataParallel dp(model);
  tiny_test::expect_error<tiny::ShapeError>([&] { dp(tiny::randn({4, 5})); }, {"5"});
}

// ---- DataParallel ---------------------------------------------------------------------------------

TEST(DataParallel, TrainsLikeASingleDevice) {
  REQUIRE_TWO_GPUS();
  tiny::manual_seed(11);
  auto single = small_mlp();
  single->to(kGpu0);
  auto replicated = std::dynamic_pointer_cast<nn::Sequential>(single->clone());
  auto dp = std::make_shared<nn::DataParallel>(replicated, std::vector<int>{0, 1});
  EXPECT_EQ(dp->output_device(), kGpu0);
  tiny::optim::SGD opt_single(single->parameters(), {0.1});
  tiny::optim::SGD opt_dp(dp->parameters(), {0.1});
  EXPECT_EQ(dp->parameters().size(), single->parameters().size());
  for (int step = 0; step < 5; ++step) {
    const Tensor x = tiny::randn({9, 6});  // 9 rows: 5 on cuda:0, 4 on cuda:1
    const Tensor y = tiny::randn({9, 3});
    tiny::cuda::synchronize(0);
    tiny::cuda::synchronize(1);
    tiny::cuda::reset_device_counters(1);
    opt_dp.zero_grad();
    const Tensor out_dp = (*dp)(x);
    EXPECT_EQ(tiny::cuda::device_counters(1).bytes_host_to_device_pageable, 4u * 6u * 4u)
        << "cuda:1 should receive its 4 rows of the batch, and only those";
    EXPECT_EQ(out_dp.device(), kGpu0);
    const Tensor loss_dp = F::mse_loss(out_dp, y.to(kGpu0));
    loss_dp.backward();
    opt_dp.step();

    opt_single.zero_grad();
    const Tensor loss_single = F::mse_loss((*single)(x.to(kGpu0)), y.to(kGpu0));
    loss_single.backward();
    opt_single.step();
    EXPECT_NEAR(loss_dp.item<float>(), loss_single.item<float>(), 1e-5) << "step " << step;
  }
  const auto a = single->named_parameters();
  const auto b = replicated->named_parameters();
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(b[i].second.device(), kGpu0);
    EXPECT_TRUE(tiny::allclose(a[i].second.cpu(), b[i].second.cpu(), 1e-5, 1e-6)) << a[i].first;
  }
  EXPECT_EQ(dp->state_dict().begin()->first, "module.0.weight");
}

TEST(DataParallel, FunctionalFormWithAnotherOutputDeviceAndDimension) {
  REQUIRE_TWO_GPUS();
  auto model = std::make_shared<nn::Linear>(4, 2);
  model->to(kGpu0);
  // Batch along dim 1 (e.g. time-major data): the module sees [2, n, 4] pieces.
  const Tensor x = tiny::randn({2, 3, 4});
  const Tensor out = parallel::data_parallel(model, x, std::vector<int>{0, 1}, kGpu1, 1);
  EXPECT_EQ(out.device(), kGpu1);
  EXPECT_EQ(out.sizes(), (tiny::IntArrayRef{2, 3, 2}));
  EXPECT_TRUE(tiny::allclose(out.cpu(), (*model)(x.to(kGpu0)).cpu(), 1e-5, 1e-6));
  // One device: no replicas or threads, same result.
  EXPECT_TRUE(tiny::allclose(parallel::data_parallel(model, x, std::vector<int>{0}, {}, 1).cpu(), out.cpu(), 1e-5, 1e-6));
}

TEST(DataParallel, TheModuleMustBeOnTheFirstDevice) {
  REQUIRE_TWO_GPUS();
  auto model = std::make_shared<nn::Linear>(4, 2);  // still on the CPU
  nn::DataParallel dp(model);
  tiny_test::expect_error<tiny::DeviceError>([&] { dp(tiny::randn({4, 4})); },
                                             {"module must have its parameters and buffers on device cuda:0",
                                              "found one of them on device: cpu", "weight"});
  tiny_test::expect_error<tiny::DeviceError>([&] { nn::DataParallel(model, {0, 5}); }, {"device id 5 does not exist"});
  tiny_test::expect_error<tiny::ValueError>([&] { nn::DataParallel(nullptr); }, {"the module is null"});
}

}  // namespace
