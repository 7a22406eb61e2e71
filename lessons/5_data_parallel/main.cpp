// Lesson 5 demo: train the same MLP on the 8x8 digits (data/digits) on one GPU
// and with your DataParallel over every GPU, from the same starting weights,
// and show that the losses agree, how the batch was split, what travelled
// between the GPUs, and when two GPUs pay: the modelled step time of a small
// and a large model on one GPU and with DataParallel.
//   ./workbook run 5                        (5 epochs, batch size 128, then the speed table)
//   ./workbook run 5 --trace dp.json        (also a trace of 2 DataParallel steps of the large model:
//                                            ui.perfetto.dev, or dp.html in any browser)
// Options: --epochs N, --batch-size B, --lr LR, --seed S, --trace FILE
// On the emulated GPUs the step times are modelled: how long the same steps
// would take on the GPU named by TINY_EMULATED_GPU_MODEL (default h100-sxm).
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include <CLI/CLI.hpp>
#include "../common/demo_flags.h"  // at_least() and positive(): the checks on the flags below

#include "exercise.h"

namespace nn = tiny::nn;

namespace {

struct Options {
  int epochs = 5;
  int64_t batch_size = 128;
  double lr = 0.1;
  uint64_t seed = 0;
  std::string trace;
};

// Reads the options into `o`: -1 to go on, else the exit status (--help, or a bad option, which CLI11 names).
int parse(int argc, char** argv, Options& o) {
  CLI::App app{"Lesson 5 demo: DataParallel on 2 GPUs, and one training step's time on 1 and 2", "./workbook run 5"};
  app.add_option("--epochs", o.epochs, "passes over the training set")->check(at_least(1))->capture_default_str();
  app.add_option("--batch-size", o.batch_size, "examples per step")->check(at_least(int64_t{1}))->capture_default_str();
  app.add_option("--lr", o.lr, "SGD's learning rate")->check(positive())->capture_default_str();
  app.add_option("--seed", o.seed, "seed of the initial weights and the data")->capture_default_str();
  app.add_option("--trace", o.trace, "also write a trace of 2 DataParallel steps of the large model here");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;  // --help: 0; a bad flag: CLI11 names it, and the status is 2 as before
  }
  return -1;
}

// An MLP of the given widths: Linear, ReLU, Linear, ..., Linear.
std::shared_ptr<nn::Sequential> make_mlp(const std::vector<int64_t>& widths) {
  auto mlp = std::make_shared<nn::Sequential>();
  for (size_t i = 0; i + 1 < widths.size(); ++i) {
    mlp->push_back(std::make_shared<nn::Linear>(widths[i], widths[i + 1]));
    if (i + 2 < widths.size()) mlp->push_back(std::make_shared<nn::ReLU>());
  }
  return mlp;
}

std::string widths_text(const std::vector<int64_t>& widths) {
  std::string s;
  for (int64_t w : widths) s += (s.empty() ? "" : "-") + std::to_string(w);
  return s;
}

// One step on one GPU, as lesson 4 writes it: the batch and labels to cuda:0, the loss read back.
double single_step(nn::Module& model, const tiny::data::Batch& batch, tiny::optim::Optimizer& optimizer) {
  const tiny::Device gpu("cuda:0");
  optimizer.zero_grad();
  const tiny::Tensor loss = nn::functional::cross_entropy(model(batch.data.to(gpu)), batch.target.to(gpu));
  loss.backward();
  optimizer.step();
  return loss.item<double>();
}

// One epoch; returns the mean loss per batch.
template <typename Step>
double epoch(tiny::data::DataLoader& loader, Step step) {
  double sum = 0;
  int batches = 0;
  for (const tiny::data::Batch& batch : loader) {
    sum += step(batch);
    ++batches;
  }
  return sum / batches;
}

void synchronize_all(const std::vector<int>& ids) {
  for (int d : ids) tiny::cuda::synchronize(d);
}

// Each GPU's busy time in a trace (ms): kernels and copies on its tracks.
std::map<int, double> busy_ms(const std::string& chrome_trace, int gpus) {
  const nlohmann::json trace = nlohmann::json::parse(chrome_trace);
  std::map<int, std::string> names;  // pid -> "cuda:N (modelled)"
  for (const nlohmann::json& e : trace.at("traceEvents")) {
    if (e.value("ph", "") == "M" && e.value("name", "") == "process_name") {
      names[e.value("pid", 0)] = e["args"].value("name", "");
    }
  }
  std::map<int, double> busy;
  for (int d = 0; d < gpus; ++d) busy[d] = 0;
  for (const nlohmann::json& e : trace.at("traceEvents")) {
    const std::string cat = e.value("cat", "");
    if (e.value("ph", "") != "X" || (cat != "kernel" && cat != "gpu_memcpy" && cat != "gpu_memset")) continue;
    const std::string& name = names[e.value("pid", 0)];
    for (int d = 0; d < gpus; ++d) {
      if (name.rfind("cuda:" + std::to_string(d) + " ", 0) == 0) busy[d] += e.value("dur", 0.0) / 1e3;
    }
  }
  return busy;
}

struct Timing {
  double single_ms = 0, parallel_ms = 0;
  std::map<int, double> busy_ms;  // each GPU's kernels and copies in a DataParallel step
  std::string trace_written;      // where the trace went, to print after the table ("" without --trace)
};

// The modelled time of one training step, on one GPU and with your train_step over every GPU,
// from the same weights on the same random batch (the mean of `steps` after a warm-up step).
Timing time_steps(const std::vector<int64_t>& widths, int64_t batch_size, const std::vector<int>& ids, int steps,
                  const std::string& trace) {
  tiny::manual_seed(1);
  auto single = make_mlp(widths);
  auto replicated = std::dynamic_pointer_cast<nn::Sequential>(single->clone());
  single->to(tiny::Device("cuda:0"));
  auto dp = lesson5::wrap(replicated, ids);
  tiny::optim::SGD opt_single(single->parameters(), {0.01});
  tiny::optim::SGD opt_dp(replicated->parameters(), {0.01});
  tiny::Generator g(2);
  const tiny::data::Batch batch{tiny::randn({batch_size, widths.front()}, {}, g).pin_memory(),
                                tiny::randint(0, widths.back(), {batch_size}, tiny::kInt64, g).pin_memory()};
  Timing t;
  single_step(*single, batch, opt_single);  // warm-up: the allocator's cache fills
  synchronize_all(ids);
  double start = tiny::cuda::host_time();
  for (int i = 0; i < steps; ++i) single_step(*single, batch, opt_single);
  synchronize_all(ids);
  t.single_ms = (tiny::cuda::host_time() - start) * 1e3 / steps;

  lesson5::train_step(*dp, batch, opt_dp);
  synchronize_all(ids);
  for (int d : ids) tiny::cuda::reset_device_counters(d);
  tiny::profiler::profile prof;
  start = tiny::cuda::host_time();
  for (int i = 0; i < steps; ++i) {
    lesson5::train_step(*dp, batch, opt_dp);
    prof.step();
  }
  synchronize_all(ids);
  t.parallel_ms = (tiny::cuda::host_time() - start) * 1e3 / steps;
  prof.stop();
  for (const auto& [device, ms] : busy_ms(prof.chrome_trace(), static_cast<int>(ids.size()))) {
    t.busy_ms[device] = ms / steps;
  }
  if (!trace.empty()) {
    // Absolute paths: ./workbook runs the demo from the repository's root, not from where you typed.
    const std::filesystem::path json = std::filesystem::absolute(trace);
    std::filesystem::path html = json;
    html.replace_extension(".html");
    prof.export_chrome_trace(json.string());
    prof.export_timeline_html(html.string());
    t.trace_written = "(trace of " + std::to_string(steps) + " DataParallel steps of " + widths_text(widths) +
                      ": " + json.string() + " for ui.perfetto.dev, " + html.string() + " for any browser)";
  }
  return t;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  const int parsed = parse(argc, argv, o);
  if (parsed >= 0) return parsed;
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

    // The same training on one GPU and with your DataParallel: the same losses.
    auto data = std::make_shared<tiny::data::Digits>("", true);
    tiny::manual_seed(o.seed);
    auto single = make_mlp({64, 256, 10});
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

    std::printf("%d epochs of %lld digits, a 64-256-10 MLP, batch size %lld, SGD lr %g\n", o.epochs,
                static_cast<long long>(data->size()), static_cast<long long>(o.batch_size), o.lr);
    std::printf("epoch   one GPU loss   DataParallel loss\n");
    for (int epoch_index = 1; epoch_index <= o.epochs; ++epoch_index) {
      const double l1 = epoch(loader_single, [&](const tiny::data::Batch& b) { return single_step(*single, b, opt_single); });
      synchronize_all(ids);
      for (int d : ids) tiny::cuda::reset_device_counters(d);
      const double l2 = epoch(loader_dp, [&](const tiny::data::Batch& b) { return lesson5::train_step(*dp, b, opt_dp); });
      synchronize_all(ids);
      std::printf("%5d   %12.5f   %17.5f\n", epoch_index, l1, l2);
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
    std::printf("\n");

    // When do two GPUs pay? The modelled step time of a small and a large model.
    const bool modelled = tiny::cuda::is_emulated(0);
    const std::string clock = modelled ? "modelled on the " + tiny::cuda::get_device_properties(0).modelled_gpu
                                       : "measured on this machine's GPUs";
    std::printf("\none training step, one GPU against DataParallel on %zu (ms, %s):\n", ids.size(), clock.c_str());
    std::printf("model               batch   one GPU   DataParallel   speedup   busy in a DataParallel step\n");
    struct Case {
      std::vector<int64_t> widths;
      int64_t batch;
    };
    const Case cases[] = {{{64, 256, 10}, 128}, {{1024, 1024, 1024, 10}, 4096}};
    std::string trace_written;
    for (const Case& c : cases) {
      const bool large = &c == &cases[1];
      const Timing t = time_steps(c.widths, c.batch, ids, 2, large ? o.trace : "");
      std::printf("%-18s %6lld   %7.3f   %12.3f   %6.2fx  ", widths_text(c.widths).c_str(),
                  static_cast<long long>(c.batch), t.single_ms, t.parallel_ms, t.single_ms / t.parallel_ms);
      for (const auto& [device, ms] : t.busy_ms) std::printf(" cuda:%d %.3f", device, ms);
      std::printf("\n");
      if (!t.trace_written.empty()) trace_written = t.trace_written;
    }
    if (!trace_written.empty()) std::printf("\n%s\n", trace_written.c_str());
  } catch (const tiny::NotImplemented& e) {
    std::printf("%s\n", e.what());
    return 1;
  } catch (const tiny::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
