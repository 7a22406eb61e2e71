// LibTorch (C++ frontend, eager) peer of bench/bench_training_step.cpp: the
// same three training steps (bench/training_cases.h), timed like
// bench/peers/bench_torch.py. With --device cuda (a LibTorch built with CUDA,
// e.g. the one inside PyTorch's wheel) it is the peer of TinyStepCuda: each
// step ends with torch::cuda::synchronize(), as TinyStepCuda's does.
//
//   bench_libtorch [--cases ABC] [--threads 2] [--warmup 20] [--repetitions 5] [--min-time 1.0] [--device cpu|cuda]
//
// Prints one JSON object per case:
//   {"impl": "libtorch", "case": "A", "ms_per_step": ..., "ms_min": ..., "ms_runs": [...], ...}
// ms_per_step is the median over the repetitions of each run's mean step time.
#include <torch/cuda.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "training_cases.h"

namespace {

struct Args {
  std::string cases = "ABC";
  int threads = 2;
  int warmup = 20;
  int repetitions = 5;
  double min_time = 1.0;
  std::string device = "cpu";
};

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void run_case(const bench::TrainingCase& c, const Args& args) {
  torch::manual_seed(0);
  torch::nn::Sequential model;
  for (size_t i = 0; i + 1 < c.sizes.size(); ++i) {
    model->push_back(torch::nn::Linear(c.sizes[i], c.sizes[i + 1]));
    if (i + 2 < c.sizes.size()) {
      model->push_back(torch::nn::ReLU());
      if (c.dropout > 0) model->push_back(torch::nn::Dropout(c.dropout));
    }
  }
  model->train();
  const torch::Device device(args.device);
  model->to(device);
  std::unique_ptr<torch::optim::Optimizer> opt;
  if (c.adam) {
    opt = std::make_unique<torch::optim::Adam>(model->parameters(), torch::optim::AdamOptions(bench::kAdamLr));
  } else {
    opt = std::make_unique<torch::optim::SGD>(model->parameters(),
                                              torch::optim::SGDOptions(bench::kSgdLr).momentum(bench::kSgdMomentum));
  }
  std::vector<float> xs = bench::case_inputs(c);
  std::vector<int64_t> ys = bench::case_labels(c);
  torch::Tensor x = torch::from_blob(xs.data(), {c.batch, c.sizes.front()}, torch::kFloat32).to(device);
  torch::Tensor y = torch::from_blob(ys.data(), {c.batch}, torch::kInt64).to(device);
  const bool cuda = device.is_cuda();

  auto step = [&] {
    opt->zero_grad();
    torch::Tensor loss = torch::nn::functional::cross_entropy(model->forward(x), y);
    loss.backward();
    opt->step();
    if (cuda) torch::cuda::synchronize();
  };
  for (int i = 0; i < args.warmup; ++i) step();
  double t0 = now();
  int n = 0;
  while (now() - t0 < 0.1) {
    step();
    ++n;
  }
  const int steps = std::max(20, static_cast<int>(args.min_time / ((now() - t0) / n)));
  std::vector<double> runs;
  for (int r = 0; r < args.repetitions; ++r) {
    t0 = now();
    for (int i = 0; i < steps; ++i) step();
    runs.push_back((now() - t0) / steps * 1e3);
  }
  std::vector<double> sorted = runs;
  std::sort(sorted.begin(), sorted.end());
  const size_t m = sorted.size();
  const double median = m % 2 ? sorted[m / 2] : (sorted[m / 2 - 1] + sorted[m / 2]) / 2;
  std::printf("{\"impl\": \"libtorch\", \"case\": \"%c\", \"ms_per_step\": %.6f, \"ms_min\": %.6f, \"ms_runs\": [",
              c.name, median, sorted.front());
  for (size_t i = 0; i < runs.size(); ++i) std::printf("%s%.6f", i ? ", " : "", runs[i]);
  std::printf("], \"steps_per_run\": %d, \"threads\": %d, \"device\": \"%s\"}\n", steps, torch::get_num_threads(),
              args.device.c_str());
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  Args args;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "bench_libtorch: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--cases") {
      args.cases = value();
    } else if (a == "--threads") {
      args.threads = std::atoi(value());
    } else if (a == "--warmup") {
      args.warmup = std::atoi(value());
    } else if (a == "--repetitions") {
      args.repetitions = std::max(1, std::atoi(value()));
    } else if (a == "--min-time") {
      args.min_time = std::atof(value());
    } else if (a == "--device") {
      args.device = value();
      if (args.device != "cpu" && args.device != "cuda") {
        std::fprintf(stderr, "bench_libtorch: --device is cpu or cuda, not '%s'\n", args.device.c_str());
        return 2;
      }
      if (args.device == "cuda" && !torch::cuda::is_available()) {
        std::fprintf(stderr, "bench_libtorch: --device cuda, but this LibTorch sees no GPU (built without CUDA, "
                             "or no GPU here)\n");
        return 2;
      }
    } else {
      std::fprintf(stderr,
                   "usage: bench_libtorch [--cases ABC] [--threads N] [--warmup N] [--repetitions N] [--min-time S] "
                   "[--device cpu|cuda]\n");
      return 2;
    }
  }
  torch::set_num_threads(args.threads);
  for (char name : args.cases) {
    const auto& all = bench::training_cases();
    auto it = std::find_if(all.begin(), all.end(), [&](const bench::TrainingCase& c) { return c.name == name; });
    if (it == all.end()) {
      std::fprintf(stderr, "bench_libtorch: unknown case '%c' (cases are ABC)\n", name);
      return 2;
    }
    run_case(*it, args);
  }
  return 0;
}
