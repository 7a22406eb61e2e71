// Lesson 5 demo: train the same MLP on the 8x8 digits (data/digits) on one GPU
// and with your DataParallel over every GPU, from the same starting weights,
// and show that the losses agree, how the batch was split, and the time.
//   ./workbook run 5                 (10 epochs, batch size 128)
// Options: --epochs N, --batch-size B, --lr LR, --seed S
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "exercise.h"

namespace nn = tiny::nn;

namespace {

struct Options {
  int epochs = 10;
  int64_t batch_size = 128;
  double lr = 0.1;
  uint64_t seed = 0;
};

bool parse(int argc, char** argv, Options& o) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "-h" || arg == "--help" || i + 1 >= argc) return false;
    const char* value = argv[++i];
    if (arg == "--epochs") o.epochs = std::atoi(value);
    else if (arg == "--batch-size") o.batch_size = std::atoll(value);
    else if (arg == "--lr") o.lr = std::atof(value);
    else if (arg == "--seed") o.seed = std::strtoull(value, nullptr, 10);
    else return false;
  }
  return o.epochs >= 1 && o.batch_size >= 1 && o.lr > 0;
}

std::shared_ptr<nn::Sequential> make_mlp() {
  return std::make_shared<nn::Sequential>(std::make_shared<nn::Linear>(64, 256), std::make_shared<nn::ReLU>(),
                                          std::make_shared<nn::Linear>(256, 10));
}

// One epoch of plain single-GPU training; returns the mean loss per batch.
double epoch_single(nn::Module& model, tiny::data::DataLoader& loader, tiny::optim::Optimizer& optimizer) {
  const tiny::Device gpu("cuda:0");
  double sum = 0;
  int batches = 0;
  for (const tiny::data::Batch& batch : loader) {
    optimizer.zero_grad();
    const tiny::Tensor loss = nn::functional::cross_entropy(model(batch.data.to(gpu)), batch.target.to(gpu));
    loss.backward();
    optimizer.step();
    sum += loss.item<double>();
    ++batches;
  }
  return sum / batches;
}

// One epoch with your train_step; returns the mean loss per batch.
double epoch_parallel(nn::DataParallel& model, tiny::data::DataLoader& loader, tiny::optim::Optimizer& optimizer) {
  double sum = 0;
  int batches = 0;
  for (const tiny::data::Batch& batch : loader) {
    sum += lesson5::train_step(model, batch, optimizer);
    ++batches;
  }
  return sum / batches;
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (!parse(argc, argv, o)) {
    std::fprintf(stderr, "usage: %s [--epochs N] [--batch-size B] [--lr LR] [--seed S]\n", argv[0]);
    return 2;
  }
  try {
    if (tiny::cuda::device_count() < 2) {
      if (tiny::cuda::device_count() == 1 && !tiny::cuda::is_emulated(0)) {
        std::printf("this demo needs 2 GPUs; this machine has one (%s).\nRun it on 2 emulated GPUs instead: "
                    "TINY_FORCE_EMULATED_GPU=1 ./workbook run 5\n", tiny::cuda::get_device_name(0).c_str());
      } else {
        std::printf("this demo needs 2 GPUs; %d here (leave TINY_EMULATED_GPUS unset to emulate 2)\n",
                    tiny::cuda::device_count());
      }
      return 0;
    }
    std::vector<int> ids;
    for (int d = 0; d < tiny::cuda::device_count(); ++d) {
      ids.push_back(d);
      std::printf("%s\n", tiny::cuda::device_banner(tiny::Device(tiny::kCUDA, d)).c_str());
    }

    // Your scatter and gather on a small batch first.
    const tiny::Tensor demo = tiny::arange(0.0, 7.0, 1.0).reshape({7, 1});
    std::vector<tiny::Device> devices;
    for (int d : ids) devices.emplace_back(tiny::kCUDA, d);
    const auto pieces = lesson5::scatter(demo, devices);
    std::printf("\nscatter of 7 rows:");
    for (const auto& p : pieces) std::printf("  %lld rows on %s", static_cast<long long>(p.size(0)), p.device().str().c_str());
    const tiny::Tensor back = lesson5::gather(pieces, tiny::Device("cuda:0"));
    std::printf("\ngather back on %s: %s\n\n", back.device().str().c_str(),
                tiny::equal(back.cpu(), demo) ? "the same 7 rows, in order" : "NOT the batch we started from");

    auto data = std::make_shared<tiny::data::Digits>("", true);
    tiny::manual_seed(o.seed);
    auto single = make_mlp();
    auto replicated = std::dynamic_pointer_cast<nn::Sequential>(single->clone());  // the same starting weights
    single->to(tiny::Device("cuda:0"));
    auto dp = lesson5::wrap(replicated, ids);
    tiny::optim::SGD opt_single(single->parameters(), {o.lr});
    tiny::optim::SGD opt_dp(replicated->parameters(), {o.lr});
    tiny::data::DataLoaderOptions lo;
    lo.batch_size = o.batch_size;
    lo.shuffle = true;
    lo.generator = tiny::Generator(o.seed);
    tiny::data::DataLoader loader_single(data, lo);
    lo.generator = tiny::Generator(o.seed);  // the same batches in the same order
    tiny::data::DataLoader loader_dp(data, lo);

    std::printf("%d epochs of %lld digits, batch size %lld, SGD lr %g\n", o.epochs,
                static_cast<long long>(data->size()), static_cast<long long>(o.batch_size), o.lr);
    std::printf("epoch   one GPU loss   DataParallel loss   one GPU s   DataParallel s\n");
    double time_single = 0, time_dp = 0;
    for (int epoch = 1; epoch <= o.epochs; ++epoch) {
      auto start = std::chrono::steady_clock::now();
      const double l1 = epoch_single(*single, loader_single, opt_single);
      tiny::cuda::synchronize(0);
      const double t1 = seconds_since(start);
      for (int d : ids) tiny::cuda::reset_device_counters(d);
      start = std::chrono::steady_clock::now();
      const double l2 = epoch_parallel(*dp, loader_dp, opt_dp);
      for (int d : ids) tiny::cuda::synchronize(d);
      const double t2 = seconds_since(start);
      time_single += t1;
      time_dp += t2;
      std::printf("%5d   %12.5f   %17.5f   %9.3f   %14.3f\n", epoch, l1, l2, t1, t2);
    }
    std::printf("\nlast DataParallel epoch, bytes each GPU received from the host:");
    for (int d : ids) {
      const auto c = tiny::cuda::device_counters(d);
      std::printf("  cuda:%d %llu", d, static_cast<unsigned long long>(c.bytes_host_to_device_pageable +
                                                                          c.bytes_host_to_device_pinned));
    }
    std::printf("\nand bytes each GPU sent to other GPUs in that epoch (%lld steps of replicas, outputs and "
                "gradients):", static_cast<long long>(loader_dp.size()));
    for (int d : ids) {
      std::printf("  from cuda:%d %llu", d,
                  static_cast<unsigned long long>(tiny::cuda::device_counters(d).bytes_device_to_device));
    }
    std::printf("\n\ntotal: one GPU %.2f s, DataParallel %.2f s (speedup %.2fx; host timings)\n", time_single, time_dp,
                time_single / time_dp);
    if (tiny::cuda::is_emulated(0)) {
      std::printf("Each emulated GPU owns a share of your CPU's cores, and this model is small: the copies and\n"
                  "threads cost more than the split compute saves. The demo shows the mechanics (split, replicate,\n"
                  "gather, sum the gradients), not the speed. On real GPUs it still\n"
                  "copies the model from cuda:0 and sums every gradient back onto it each step; that is why\n"
                  "DistributedDataParallel (lesson 6) is preferred.\n");
    }
  } catch (const tiny::NotImplemented& e) {
    std::printf("%s\n", e.what());
    return 1;
  } catch (const tiny::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
