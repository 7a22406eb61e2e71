// tiny's ops on the emulated GPU give the CPU's results: the same kernels run
// on the device's worker, so values match exactly, and random ops draw the
// same Philox numbers for the same seed. Also the behaviour a lesson sees:
// separate memory, asynchrony, errors raised at the next synchronization,
// out-of-memory at the device's capacity.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "gpu/device_context.h"
#include "emulated_mode.h"
#include "gpu/emulated/emulated_runtime.h"
#include "tiny/tiny.h"

namespace {

namespace F = tiny::nn::functional;
using tiny::Device;
using tiny::Tensor;

const Device kGpu("cuda:0");

// Runs `fn` on CPU inputs and on the same inputs moved to cuda:0; the outputs
// and the inputs' gradients must be equal bit for bit.
void expect_same_on_device(const std::string& name, const std::vector<Tensor>& inputs,
                           const std::function<Tensor(const std::vector<Tensor>&)>& fn) {
  std::vector<Tensor> cpu_in, gpu_in;
  for (const Tensor& t : inputs) {
    const bool grad = t.is_floating_point();
    cpu_in.push_back(t.clone().detach().requires_grad_(grad));
    gpu_in.push_back(t.to(kGpu).detach().requires_grad_(grad));
  }
  Tensor cpu_out = fn(cpu_in);
  Tensor gpu_out = fn(gpu_in);
  ASSERT_EQ(gpu_out.device(), kGpu) << name;
  ASSERT_TRUE(tiny::equal(cpu_out, gpu_out.cpu())) << name << "\ncpu: " << cpu_out << "\ngpu: " << gpu_out.cpu();
  if (!cpu_out.requires_grad()) return;
  Tensor upstream = tiny::randn(cpu_out.sizes(), cpu_out.dtype());
  cpu_out.backward(upstream);
  gpu_out.backward(upstream.to(kGpu));
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!cpu_in[i].requires_grad()) continue;
    ASSERT_TRUE(gpu_in[i].grad().defined()) << name << ": input " << i << " got no gradient on the GPU";
    EXPECT_EQ(gpu_in[i].grad().device(), kGpu) << name;
    EXPECT_TRUE(tiny::equal(cpu_in[i].grad(), gpu_in[i].grad().cpu())) << name << ": gradient of input " << i;
  }
}

TEST(EmulatedBackend, OpsMatchTheCpuExactly) {
  if (!tiny::cuda::is_available()) GTEST_SKIP() << "no cuda device (TINY_EMULATED_GPUS=0)";
  tiny::manual_seed(3);
  const Tensor a = tiny::randn({6, 5}), b = tiny::randn({5}), m = tiny::randn({5, 7});
  const Tensor target = tiny::randint(0, 5, {6});
  expect_same_on_device("broadcast add/mul/div", {a, b}, [](auto& x) { return (x[0] + x[1]) * x[0] / (x[1].abs() + 1.0); });
  expect_same_on_device("unary chain", {a}, [](auto& x) { return F::gelu(x[0]).sigmoid() + x[0].tanh() + x[0].relu(); });
  expect_same_on_device("reductions", {a}, [](auto& x) { return x[0].sum({0}) + std::get<0>(x[0].max(0)) + x[0].mean({0}); });
  expect_same_on_device("matmul", {a, m}, [](auto& x) { return tiny::matmul(x[0].t().t(), x[1]); });
  const Tensor bias = tiny::randn({7});
  expect_same_on_device("addmm / linear", {a, m, bias}, [](auto& x) { return F::linear(x[0], x[1].t(), x[2]); });
  expect_same_on_device("log_softmax", {a}, [](auto& x) { return F::log_softmax(x[0], 1); });
  expect_same_on_device("cross_entropy", {a, target},
                        [](auto& x) { return F::cross_entropy(x[0], x[1], {tiny::nn::functional::Reduction::Mean, -100, 0.1}); });
  expect_same_on_device("views", {a}, [](auto& x) { return x[0].t().contiguous().view({-1}).slice(0, 1, 20, 3); });
  expect_same_on_device("where/clamp", {a, b}, [](auto& x) { return tiny::where(x[0] > 0.0, x[0], x[1] * 2.0).clamp(-1.0, 1.0); });
  expect_same_on_device("argmax", {a}, [](auto& x) { return x[0].argmax(1); });
}

TEST(EmulatedBackend, RandomOpsDrawTheSameNumbersAsTheCpu) {
  if (!tiny::cuda::is_available()) GTEST_SKIP() << "no cuda device (TINY_EMULATED_GPUS=0)";
  tiny::manual_seed(11);
  const Tensor on_cpu = tiny::randn({1000});
  const Tensor mask_cpu = F::dropout(tiny::ones({2000}), 0.3);
  tiny::manual_seed(11);
  const Tensor on_gpu = tiny::randn({1000}, kGpu);
  const Tensor mask_gpu = F::dropout(tiny::ones({2000}, kGpu), 0.3);
  EXPECT_TRUE(tiny::equal(on_cpu, on_gpu.cpu()));
  EXPECT_TRUE(tiny::equal(mask_cpu, mask_gpu.cpu()));
}

TEST(EmulatedBackend, TrainingOnTheDeviceFollowsTheCpu) {
  if (!tiny::cuda::is_available()) GTEST_SKIP() << "no cuda device (TINY_EMULATED_GPUS=0)";
  auto make = [] {
    return std::make_shared<tiny::nn::Sequential>(std::make_shared<tiny::nn::Linear>(20, 32),
                                                  std::make_shared<tiny::nn::ReLU>(),
                                                  std::make_shared<tiny::nn::Linear>(32, 4));
  };
  tiny::manual_seed(5);
  auto cpu_model = make();
  auto gpu_model = make();
  gpu_model->load_state_dict(cpu_model->state_dict());
  gpu_model->to(kGpu);  // after the optimizer exists would work too: to() is in place
  tiny::optim::Adam cpu_opt(cpu_model->parameters(), tiny::optim::AdamOptions{1e-2});
  tiny::optim::Adam gpu_opt(gpu_model->parameters(), tiny::optim::AdamOptions{1e-2});
  const Tensor x = tiny::randn({16, 20});
  const Tensor y = tiny::randint(0, 4, {16});
  const Tensor xg = x.to(kGpu), yg = y.to(kGpu);
  for (int step = 0; step < 10; ++step) {
    cpu_opt.zero_grad();
    gpu_opt.zero_grad();
    Tensor cpu_loss = F::cross_entropy((*cpu_model)(x), y);
    Tensor gpu_loss = F::cross_entropy((*gpu_model)(xg), yg);
    cpu_loss.backward();
    gpu_loss.backward();
    cpu_opt.step();
    gpu_opt.step();
    ASSERT_EQ(cpu_loss.item<float>(), gpu_loss.item<float>()) << "step " << step;
  }
  for (const auto& [name, p] : cpu_model->named_parameters()) {
    EXPECT_TRUE(tiny::equal(p, gpu_model->state_dict().at(name).cpu())) << name;
  }
}

// Each device runs its kernels on threads of its own (see
// EmulatedRuntime's tests), and tiny's kernels chunk their work by a fixed
// grain, never by thread count: so ops with many chunks, run on two devices at
// the same time, give the CPU's bits, whether a device has 1 thread or several.
// (GEMM is OpenBLAS's: its bits depend on OpenBLAS's thread count, which is
// process-wide, so it is compared with the CPU at the same setting.)
TEST(EmulatedBackend, DevicesRunningAtOnceMatchTheCpuBitwise) {
  if (tiny::cuda::device_count() < 2) GTEST_SKIP() << "needs 2 emulated GPUs";
  const int previous_threads = tiny::get_num_threads();
  tiny::manual_seed(21);
  const Tensor x = tiny::randn({300, 1200});  // 360k elements: 11 chunks of a pointwise op, 88 reduce blocks
  const Tensor w = tiny::randn({1200, 200});
  struct Op {
    std::string name;
    bool blas;  // its bits depend on OpenBLAS's thread count
    std::function<Tensor(const Tensor&, const Tensor&)> run;
  };
  const std::vector<Op> ops = {
      {"sum", false, [](const Tensor& a, const Tensor&) { return a.sum(); }},
      {"sum over rows (column strips)", false, [](const Tensor& a, const Tensor&) { return a.sum({0}); }},
      {"mean over columns", false, [](const Tensor& a, const Tensor&) { return a.mean({1}); }},
      {"pointwise", false, [](const Tensor& a, const Tensor&) { return a.exp() * a + 1.0; }},
      {"softmax", false, [](const Tensor& a, const Tensor&) { return F::softmax(a, 1); }},
      {"matmul", true, [](const Tensor& a, const Tensor& b) { return tiny::matmul(a, b); }},
      {"float16 matmul", true, [](const Tensor& a, const Tensor& b) { return tiny::matmul(a.half(), b.half()); }},
  };
  tiny::set_num_threads(1);
  std::vector<Tensor> one_thread;
  for (const Op& op : ops) one_thread.push_back(op.run(x, w));
  const int devices = 2;
  for (int threads : {2 * devices, devices, 3 * devices + 1}) {  // 2, 1 and 3 threads per device
    tiny::set_num_threads(threads);
    std::vector<Tensor> expected;
    for (const Op& op : ops) expected.push_back(op.run(x, w));
    std::vector<Tensor> results[devices];
    std::string failures[devices];
    // One host thread per device, so the devices run at the same time in
    // blocking mode too.
    auto run_on = [&](int d) {
      try {
        const Device device("cuda:" + std::to_string(d));
        const Tensor xd = x.to(device), wd = w.to(device);
        for (const Op& op : ops) results[d].push_back(op.run(xd, wd));
        for (Tensor& r : results[d]) r = r.cpu();
      } catch (const std::exception& e) {
        failures[d] = e.what();
      }
    };
    std::thread first(run_on, 0), second(run_on, 1);
    first.join();
    second.join();
    for (size_t i = 0; i < ops.size(); ++i) {
      if (!ops[i].blas) {
        EXPECT_TRUE(tiny::equal(one_thread[i], expected[i])) << ops[i].name << " on the CPU with " << threads << " threads";
      }
    }
    for (int d = 0; d < devices; ++d) {
      ASSERT_EQ(failures[d], "") << "cuda:" << d;
      ASSERT_EQ(results[d].size(), ops.size());
      for (size_t i = 0; i < ops.size(); ++i) {
        EXPECT_TRUE(tiny::equal(expected[i], results[d][i]))
            << ops[i].name << " on cuda:" << d << " with " << threads << " threads in all";
      }
    }
  }
  tiny::set_num_threads(previous_threads);
}

TEST(EmulatedBackend, KernelErrorsSurfaceAtTheNextSynchronization) {
  tiny_test::ThreadedMode threaded;  // the error waits for the next synchronization
  if (!tiny::cuda::is_available()) GTEST_SKIP() << "no cuda device (TINY_EMULATED_GPUS=0)";
  auto* emu = tiny::gpu::emulated_runtime();
  ASSERT_NE(emu, nullptr);
  const Tensor logits = tiny::randn({3, 4}, kGpu);
  const Tensor bad_target = tiny::from_vector<int64_t>({0, 9, 1}).to(kGpu);
  Tensor loss;
  // Queuing the op does not fail: the bad class index is found by the kernel...
  EXPECT_NO_THROW(loss = F::cross_entropy(logits, bad_target));
  // ...and raised where the host waits for the device, naming what went wrong.
  try {
    (void)loss.item<float>();
    ADD_FAILURE() << "expected the kernel's error at item()";
  } catch (const tiny::Error& e) {
    EXPECT_NE(std::string(e.what()).find("Target 9 is out of bounds"), std::string::npos) << e.what();
  }
  emu->clear_error(0);
  EXPECT_NO_THROW((void)tiny::ones({2}, kGpu).sum().item<float>());
}

TEST(EmulatedBackend, OutOfMemoryAtTheCapacityAndRecovery) {
  if (!tiny::cuda::is_available()) GTEST_SKIP() << "no cuda device (TINY_EMULATED_GPUS=0)";
  auto* rt = tiny::gpu::device_runtime();
  ASSERT_NE(rt, nullptr);
  const size_t capacity = rt->properties(0).total_memory;
  const int64_t too_many = static_cast<int64_t>(capacity / sizeof(float)) + 1024;
  try {
    (void)tiny::empty({too_many}, kGpu);
    ADD_FAILURE() << "expected tiny::OutOfMemoryError";
  } catch (const tiny::OutOfMemoryError& e) {
    EXPECT_NE(std::string(e.what()).find("CUDA out of memory. Tried to allocate"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("GPU 0"), std::string::npos) << e.what();
  }
  // The program goes on: smaller allocations still succeed.
  const Tensor small = tiny::ones({1024}, kGpu);
  EXPECT_EQ(small.sum().item<float>(), 1024.0f);
}

TEST(EmulatedBackend, CopiesCountBytesAndSynchronizations) {
  if (!tiny::cuda::is_available()) GTEST_SKIP() << "no cuda device (TINY_EMULATED_GPUS=0)";
  auto* rt = tiny::gpu::device_runtime();
  rt->device_synchronize(0);
  rt->reset_counters(0);
  const Tensor host = tiny::ones({256});  // 1 KiB
  const Tensor dev = host.to(kGpu);
  const Tensor back = dev.cpu();
  const tiny::gpu::Counters c = rt->counters(0);
  EXPECT_EQ(c.bytes_host_to_device_pageable, 1024u);
  EXPECT_EQ(c.bytes_device_to_host_pageable, 1024u);
  EXPECT_GE(c.synchronizations, 1u);  // .cpu() waits for the stream
  EXPECT_TRUE(tiny::equal(host, back));
}

}  // namespace
