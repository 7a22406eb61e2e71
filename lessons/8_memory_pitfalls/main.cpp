// Lesson 8 demo: GPU memory on an emulated GPU with a small capacity, with your code.
//   ./workbook run 8                 (64 MiB GPU unless TINY_EMULATED_GPU_MEMORY is set)
//   ./workbook run 8 --batch 4096    (a bigger batch to fit)
// It shows: memory_allocated per step of your train_epoch (flat) beside a loop that
// keeps its loss tensors; evaluate's peak; a batch too big for the GPU recovered from
// tiny::OutOfMemoryError by halving the micro-batch (your accumulate_and_step);
// and what free / empty_cache do to allocated and reserved (your free_and_measure).
// Then the speed story, in modelled time on the emulated GPU: throughput and peak
// memory against the batch size ("increase the batch until memory runs out,
// then back off"), and what gradient accumulation costs against one big batch.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include "../common/demo_flags.h"  // at_least(): the check on the flags below

#include "exercise.h"

namespace F = tiny::nn::functional;
namespace nn = tiny::nn;

namespace {

double mib(size_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0); }

// The MLP, printing memory_allocated at the start of every forward pass when asked.
struct Watched : nn::Module {
  Watched() {
    fc1 = register_module("fc1", std::make_shared<nn::Linear>(256, 2048));
    fc2 = register_module("fc2", std::make_shared<nn::Linear>(2048, 10));
  }
  tiny::Tensor forward(const tiny::Tensor& x) override {
    if (watch) {
      tiny::cuda::synchronize(0);
      std::printf("    step %d: memory_allocated %8.1f KiB, memory_reserved %6.2f MiB\n", ++step,
                  static_cast<double>(tiny::cuda::memory_allocated(0)) / 1024.0, mib(tiny::cuda::memory_reserved(0)));
    }
    return (*fc2)(tiny::relu((*fc1)(x)));
  }
  std::string name() const override { return "MLP"; }
  std::shared_ptr<nn::Linear> fc1, fc2;
  bool watch = false;
  int step = 0;
};

// One Adam step of `model` on (x, y).
void adam_step(nn::Module& model, tiny::optim::Optimizer& optimizer, const tiny::Tensor& x, const tiny::Tensor& y) {
  optimizer.zero_grad();
  F::cross_entropy(model(x), y).backward();
  optimizer.step();
}

// Step time (modelled ms), images per second and peak memory against the
// batch size, doubling it until a step runs out of memory.
void batch_size_table(const tiny::Device& device, const std::string& gpu) {
  std::printf("6. Throughput and peak memory against the batch size: Adam steps of the MLP, modelled on the %s:\n",
              gpu.c_str());
  std::printf("   %6s %9s %11s %15s %9s\n", "batch", "step ms", "images/s", "peak allocated", "reserved");
  int64_t fits = 0;
  for (int64_t batch = 32; batch <= 8192; batch *= 2) {
    tiny::cuda::empty_cache();  // each row starts from an empty cache: its reserved is its own
    try {
      tiny::manual_seed(1);
      auto model = std::make_shared<Watched>();
      model->to(device);
      tiny::optim::Adam optimizer(model->parameters(), tiny::optim::AdamOptions{1e-3});
      const tiny::Tensor x = tiny::randn({batch, 256}).to(device), y = tiny::randint(0, 10, {batch}).to(device);
      adam_step(*model, optimizer, x, y);  // the first step makes Adam's states
      tiny::cuda::synchronize(0);
      tiny::cuda::reset_peak_memory_stats(0);
      constexpr int kSteps = 5;
      const double start = tiny::cuda::host_time();
      for (int k = 0; k < kSteps; ++k) adam_step(*model, optimizer, x, y);
      tiny::cuda::synchronize(0);  // the clock is read once the GPU is done
      const double ms = (tiny::cuda::host_time() - start) * 1e3 / kSteps;
      std::printf("   %6lld %9.3f %11.0f %11.2f MiB %5.0f MiB\n", static_cast<long long>(batch), ms,
                  static_cast<double>(batch) / ms * 1e3, mib(tiny::cuda::max_memory_allocated(0)),
                  mib(tiny::cuda::memory_reserved(0)));
      fits = batch;
    } catch (const tiny::OutOfMemoryError&) {
      std::printf("   %6lld  out of memory (the allocator freed its cache and retried first)\n",
                  static_cast<long long>(batch));
      break;
    }
  }
  tiny::cuda::empty_cache();
  std::printf("   back off: %lld is the largest batch that fits; leave headroom below it (a longer input, a\n"
              "   fragmented cache), and past the point where images/s stops growing a bigger batch buys nothing.\n",
              static_cast<long long>(fits));
}

// One update on `total` examples: one batch, then micro-batches (your accumulate_and_step), in modelled time.
void accumulation_cost(const tiny::Device& device, const std::string& gpu, int64_t total) {
  std::printf("\n7. One update on %lld examples, one batch against micro-batches (your accumulate_and_step), "
              "modelled on the %s:\n", static_cast<long long>(total), gpu.c_str());
  std::printf("   %12s %11s %9s %15s\n", "micro-batch", "update ms", "vs one", "peak allocated");
  double one = 0;
  for (int64_t micro = total; micro >= total / 16; micro /= 4) {
    tiny::manual_seed(1);
    auto model = std::make_shared<Watched>();
    model->to(device);
    tiny::optim::Adam optimizer(model->parameters(), tiny::optim::AdamOptions{1e-3});
    const tiny::Tensor x = tiny::randn({total, 256}).to(device), y = tiny::randint(0, 10, {total}).to(device);
    lesson8::accumulate_and_step(*model, optimizer, x, y, micro);  // Adam's states
    tiny::cuda::synchronize(0);
    tiny::cuda::reset_peak_memory_stats(0);
    const double start = tiny::cuda::host_time();
    lesson8::accumulate_and_step(*model, optimizer, x, y, micro);
    tiny::cuda::synchronize(0);
    const double ms = (tiny::cuda::host_time() - start) * 1e3;
    if (micro == total) one = ms;
    std::printf("   %5lld x %-4lld %11.3f %8.2fx %11.2f MiB\n", static_cast<long long>(total / micro),
                static_cast<long long>(micro), ms, ms / one, mib(tiny::cuda::max_memory_allocated(0)));
  }
}

std::vector<tiny::data::Batch> make_batches(int count, int64_t rows, const tiny::Device& device) {
  std::vector<tiny::data::Batch> batches;
  for (int k = 0; k < count; ++k) {
    batches.push_back({tiny::randn({rows, 256}).to(device), tiny::randint(0, 10, {rows}).to(device)});
  }
  return batches;
}

}  // namespace

int main(int argc, char** argv) {
  int64_t big_batch = 2048;
  CLI::App app{"Lesson 8 demo: the memory pitfalls on a small (64 MiB) GPU, and the fixes", "./workbook run 8"};
  app.add_option("--batch", big_batch, "the bigger batch to fit")->check(at_least(int64_t{1}))->capture_default_str();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;  // --help: 0; a bad flag: CLI11 names it, with status 2 as the other demos
  }
  // Before the first GPU call: a small GPU, so that its limits show, and each op
  // done before the next is queued, so that every memory figure is the same on
  // every run (the modelled times are the same in every mode).
  setenv("TINY_EMULATED_GPU_MEMORY", "64MiB", /*overwrite=*/0);
  setenv("TINY_LAUNCH_BLOCKING", "1", /*overwrite=*/0);
  try {
    tiny::manual_seed(0);
    if (!tiny::cuda::is_available()) {
      std::printf("no GPU (TINY_EMULATED_GPUS=0?): this lesson needs one\n");
      return 1;
    }
    const tiny::Device device("cuda:0");
    std::printf("%s\n\n", tiny::cuda::device_banner(device).c_str());
    auto model = std::make_shared<Watched>();
    model->to(device);
    tiny::optim::SGD optimizer(model->parameters(), tiny::optim::SGDOptions{0.05});

    std::printf("1. A loop that keeps its loss tensors (history.push_back(loss)), 6 steps:\n");
    {
      const auto batches = make_batches(6, 256, device);
      std::vector<tiny::Tensor> history;  // the mistake: tensors, each with its graph
      model->watch = true;
      model->step = 0;
      for (const auto& b : batches) {
        optimizer.zero_grad();
        tiny::Tensor loss = F::cross_entropy((*model)(b.data), b.target);
        loss.backward();
        optimizer.step();
        history.push_back(loss);
      }
      model->watch = false;
      std::printf("   ... +0.5 KiB a step (each kept loss), and every step's graph stays alive on the host.\n");
    }
    std::printf("\n2. Your train_epoch, 6 steps:\n");
    {
      const auto batches = make_batches(6, 256, device);
      model->watch = true;
      model->step = 0;
      const lesson8::TrainLog log = lesson8::train_epoch(*model, optimizer, batches);
      model->watch = false;
      std::printf("   mean loss %.4f over %zu steps: flat from the second step on.\n", log.mean_loss, log.losses.size());
    }

    std::printf("\n3. Your evaluate over 4 batches of 1024:\n");
    {
      const auto batches = make_batches(4, 1024, device);
      tiny::cuda::synchronize(0);
      tiny::cuda::reset_peak_memory_stats(0);
      const size_t base = tiny::cuda::memory_allocated(0);
      const lesson8::EvalResult r = lesson8::evaluate(*model, batches);
      std::printf("   loss %.4f, accuracy %.2f%%, peak %.2f MiB above the model and data\n", r.loss, 100 * r.accuracy,
                  mib(tiny::cuda::max_memory_allocated(0) - base));
    }

    std::printf("\n4. One step on a batch of %lld: micro-batches halved until they fit (your accumulate_and_step):\n",
                static_cast<long long>(big_batch));
    {
      const tiny::Tensor x = tiny::randn({big_batch, 256}).to(device);
      const tiny::Tensor y = tiny::randint(0, 10, {big_batch}).to(device);
      for (int64_t micro = big_batch; micro >= 1; micro /= 2) {
        try {
          tiny::cuda::reset_peak_memory_stats(0);
          const double loss = lesson8::accumulate_and_step(*model, optimizer, x, y, micro);
          std::printf("   micro-batch %5lld: fits, loss %.4f, peak allocated %.2f MiB, reserved %.2f MiB\n",
                      static_cast<long long>(micro), loss, mib(tiny::cuda::max_memory_allocated(0)),
                      mib(tiny::cuda::memory_reserved(0)));
          break;
        } catch (const tiny::OutOfMemoryError& e) {
          std::printf("   micro-batch %5lld: out of memory, halving (%.60s...)\n", static_cast<long long>(micro), e.what());
          optimizer.zero_grad();  // a half-done accumulation: start the step again
        }
      }
    }

    std::printf("\n5. Your free_and_measure on a 16 MiB tensor:\n");
    {
      tiny::Tensor big = tiny::zeros({4096, 1024}, tiny::TensorOptions(device));
      tiny::cuda::synchronize(0);  // the emulator frees a block only once the work queued on it has run
      const lesson8::FreeReport r = lesson8::free_and_measure(std::move(big));
      const auto show = [](const char* when, const lesson8::MemoryReading& m) {
        std::printf("   %-20s allocated %6.2f MiB   reserved %6.2f MiB\n", when, mib(m.allocated), mib(m.reserved));
      };
      show("before", r.before);
      show("after the free", r.after_free);
      show("after empty_cache", r.after_empty_cache);
    }
    std::printf("\n%s", tiny::cuda::memory_summary(0).c_str());

    if (tiny::cuda::is_emulated(0)) {
      const std::string gpu = tiny::cuda::get_device_properties(0).modelled_gpu;
      std::printf("\n");
      batch_size_table(device, gpu);
      accumulation_cost(device, gpu, 1024);
    }
  } catch (const tiny::NotImplemented& e) {
    std::printf("%s\n(fill in lessons/8_memory_pitfalls/exercise.cpp, then run ./workbook check 8)\n", e.what());
    return 1;
  } catch (const tiny::Error& e) {
    std::printf("error: %s\n", e.what());
    return 1;
  }
  return 0;
}
