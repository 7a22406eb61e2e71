// Lesson 9 demo: the planted training program, then one fix at a time, each
// measured with your measure() on the GPU's clock; the last line is your
// make_loader and train_step. With --profile, the profiler's view of each.
//   ./workbook run 9                       (on the modelled GPU TINY_EMULATED_GPU_MODEL names; default H100 SXM)
//   TINY_EMULATED_GPU_MODEL=l4 ./workbook run 9    (the GPU the checks grade on)
//   ./workbook run 9 --profile trace.json  (also writes trace_N.json and trace_N.html for line N, and prints
//                                          each line's key_averages)
// Options: --steps N (timed steps, default 5), --seed S, --profile PATH
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>
#include "../common/demo_flags.h"  // at_least(): the check on the flags below

#include "exercise.h"

namespace F = tiny::nn::functional;
using tiny::data::Batch;

namespace {

const tiny::Device kGpu("cuda:0");
constexpr int kWarmup = 3;

// One version of the program: how its loader and its step are written.
struct Stage {
  std::string what;
  int64_t batch_size = 32;
  int num_workers = 0;
  bool pinned = false;
  bool item_every_step = true;
  bool bf16 = false;
  bool yours = false;  // your make_loader and train_step
};

// The program's step as it was given, with the fixes a stage has made.
void given_step(tiny::nn::Module& model, const Batch& batch, tiny::optim::Optimizer& optimizer, const Stage& s,
                tiny::Tensor& loss_sum, double& loss_host) {
  const tiny::Tensor x = batch.data.to(kGpu, s.pinned), y = batch.target.to(kGpu, s.pinned);
  optimizer.zero_grad();
  tiny::Tensor loss;
  {
    tiny::amp::autocast guard("cuda", tiny::kBFloat16, /*enabled=*/s.bf16);
    loss = F::cross_entropy(model(x), y);
  }
  loss.backward();
  optimizer.step();
  if (s.item_every_step) {
    loss_host += loss.item<double>();  // the host waits for the GPU, every step
  } else {
    loss_sum.add_(loss.detach());
  }
}

struct Result {
  lesson9::Measurement m;
  int64_t batch_size = 0;
  double loss = 0;
  std::string profile;  // key_averages of a profiled stage, printed after the table
};

Result run(const Stage& s, std::shared_ptr<lesson9::AugmentedImages> images, uint64_t seed, int steps,
           const std::string& profile_path) {
  tiny::manual_seed(seed);  // the same starting weights for every stage
  auto model = lesson9::make_model();
  model->to(kGpu);
  tiny::optim::SGDOptions sgd;
  sgd.lr = 0.05;
  sgd.momentum = 0.9;
  tiny::optim::SGD optimizer(model->parameters(), sgd);
  std::unique_ptr<tiny::data::DataLoader> loader;
  if (s.yours) {
    loader = lesson9::make_loader(images, tiny::Generator(seed));
    if (!loader) throw tiny::ValueError("make_loader returned an empty std::unique_ptr instead of a loader");
  } else {
    tiny::data::DataLoaderOptions o;
    o.batch_size = s.batch_size;
    o.num_workers = s.num_workers;
    o.pin_memory = s.pinned;
    o.shuffle = true;
    o.generator = tiny::Generator(seed);
    loader = std::make_unique<tiny::data::DataLoader>(images, o);
  }
  lesson9::Feed feed(*loader);
  tiny::Tensor loss_sum = tiny::zeros({}, kGpu);
  double loss_host = 0;
  int done = 0;
  // The profile covers the timed steps only, as torch.profiler's schedule(wait,
  // warmup, active) leaves the warm-up out: the warm-up's first batch waits for
  // the workers to start and transform a whole batch, a cost paid once.
  std::unique_ptr<tiny::profiler::profile> prof;
  const auto step = [&] {
    if (!profile_path.empty() && !prof && done == kWarmup) {
      prof = std::make_unique<tiny::profiler::profile>(tiny::profiler::ProfileOptions{/*record_shapes=*/true});
    }
    const Batch batch = feed.next();
    if (s.yours) {
      lesson9::train_step(*model, batch, optimizer, kGpu, loss_sum);
    } else {
      given_step(*model, batch, optimizer, s, loss_sum, loss_host);
    }
    ++done;
  };
  Result r;
  r.batch_size = loader->options().batch_size;
  r.m = lesson9::measure(step, kWarmup, steps, lesson9::kFlopsPerImage * static_cast<double>(r.batch_size), 0);
  r.loss = (loss_host + loss_sum.item<double>()) / done;
  if (prof) {
    prof->stop();
    prof->export_chrome_trace(profile_path);
    std::string html = profile_path;
    const size_t dot = html.rfind(".json");
    html = (dot == std::string::npos ? html : html.substr(0, dot)) + ".html";
    tiny::profiler::TimelineOptions t;
    t.title = s.what;
    prof->export_timeline_html(html, t);
    namespace fs = std::filesystem;
    r.profile = "\n" + s.what + ": the trace is " + fs::absolute(profile_path).string() + " (and " +
                fs::absolute(html).string() + "); key_averages over its " + std::to_string(steps) +
                " timed steps, the " + std::to_string(kWarmup) + " warm-up steps left out (divide by " +
                std::to_string(steps) + " for one step):\n" + prof->key_averages();
  }
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  int steps = 5;
  uint64_t seed = 0;
  std::string profile_path;
  CLI::App app{"Lesson 9 demo: each line of the training loop, timed on the modelled clock", "./workbook run 9"};
  app.add_option("--steps", steps, "timed steps")->check(at_least(1))->capture_default_str();
  app.add_option("--seed", seed, "seed of the initial weights and the data")->capture_default_str();
  app.add_option("--profile", profile_path, "also write the profiler's view of each line: PATH, and trace_N.json and "
                                            "trace_N.html beside it");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;  // --help: 0; a bad flag: CLI11 names it, and the status is 2 as before
  }
  if (!profile_path.empty()) {
    // Said now, before a minute of training, rather than as an error after the table.
    const std::filesystem::path folder = std::filesystem::absolute(profile_path).parent_path();
    if (!std::filesystem::is_directory(folder)) {
      std::fprintf(stderr, "--profile %s: the folder %s does not exist; create it first (mkdir -p %s)\n",
                   profile_path.c_str(), folder.string().c_str(), folder.string().c_str());
      return 2;
    }
  }
  if (!tiny::cuda::is_available() || !tiny::cuda::is_emulated(0)) {
    std::printf("this demo reads the emulated GPU's modelled clock (utilization is nvidia-smi's on a real GPU): "
                "run it with the emulated GPU (TINY_FORCE_EMULATED_GPU=1)\n");
    return 0;
  }
  std::printf("%s\n", tiny::cuda::device_banner(kGpu).c_str());
  tiny::Generator data_generator(seed + 1);
  const auto images = lesson9::make_images(int64_t{1024} * (kWarmup + steps) + 1024, data_generator);
  std::printf("data: %lld images of 28x28, a transform of %.0f us per image on the CPU; model 784-2048-10, SGD\n"
              "each line: %d warm-up steps, then %d steps timed by your measure() (modelled time)\n\n",
              static_cast<long long>(images->size()), lesson9::kTransformNsPerImage / 1e3, kWarmup, steps);

  int workers = 12;
  int64_t batch = 1024;
  try {
    const auto yours = lesson9::make_loader(images, tiny::Generator(seed));
    if (yours) {
      workers = yours->options().num_workers;
      batch = yours->options().batch_size;
    }
  } catch (const tiny::NotImplemented& e) {
    std::printf("%s\n(fill in lessons/9_find_the_bottleneck/exercise.cpp, then run ./workbook run 9)\n", e.what());
    return 0;
  }
  std::vector<Stage> stages(6);
  stages[0].what = "as given (batch 32, no workers, pageable, .item(), float32)";
  stages[1] = stages[0];
  // The labels do not say your make_loader's values (the README shows this table): the line after it does.
  stages[1].what = "+ DataLoader workers (your make_loader's)";
  stages[1].num_workers = workers;
  stages[2] = stages[1];
  stages[2].what = "+ a bigger batch (your make_loader's)";
  stages[2].batch_size = batch;
  stages[3] = stages[2];
  stages[3].what = "+ loss kept on the GPU (no .item())";
  stages[3].item_every_step = false;
  stages[4] = stages[3];
  stages[4].what = "+ pinned memory, non_blocking copies";
  stages[4].pinned = true;
  stages[5] = stages[4];
  stages[5].what = "+ bfloat16: your make_loader and train_step";
  stages[5].bf16 = true;
  stages[5].yours = true;

  std::printf("%-60s %9s %9s %8s %8s %7s\n", "program", "step ms", "images/s", "GPU-Util", "TFLOP/s", "loss");
  std::string profiles;
  try {
    for (size_t i = 0; i < stages.size(); ++i) {
      std::string path;  // trace.json -> trace_0.json ... trace_5.json, one per line of the table
      if (!profile_path.empty()) {
        const size_t dot = profile_path.rfind(".json");
        path = (dot == std::string::npos ? profile_path : profile_path.substr(0, dot)) + "_" + std::to_string(i) +
               ".json";
      }
      const Result r = run(stages[i], images, seed, steps, path);
      std::printf("%-60s %9.3f %9.0f %7.1f%% %8.2f %7.3f\n", stages[i].what.c_str(), r.m.step_ms,
                  static_cast<double>(r.batch_size) / (r.m.step_ms * 1e-3), 100 * r.m.utilization, r.m.tflops,
                  r.loss);
      profiles += r.profile;
    }
  } catch (const tiny::NotImplemented& e) {
    std::printf("%s\n(fill in lessons/9_find_the_bottleneck/exercise.cpp, then run ./workbook run 9)\n", e.what());
    return 0;
  } catch (const tiny::IOError& e) {
    std::fprintf(stderr, "%s\n", e.what());  // a trace that could not be written
    return 1;
  }
  std::printf("\n(step ms, GPU-Util and TFLOP/s are modelled on the %s, an estimate; images/s = batch / step)\n",
              tiny::cuda::get_device_properties(0).modelled_gpu.c_str());
  std::printf("(lines 2 and 3 use your make_loader's num_workers %d and batch_size %lld)\n", workers,
              static_cast<long long>(batch));
  std::printf("%s", profiles.c_str());
  return 0;
}
