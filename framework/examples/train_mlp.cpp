// Trains an MLP on a real data set, the way the PyTorch tutorials do:
//
//   model = nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Dropout(0.2),
//                         nn.Linear(512, 256), nn.ReLU(), nn.Dropout(0.2),
//                         nn.Linear(256, 10))
//   optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
//   for epoch in range(epochs):
//       for x, y in loader:
//           optimizer.zero_grad()
//           loss = F.cross_entropy(model(x), y)
//           loss.backward()
//           optimizer.step()
//
// Usage: train_mlp [--dataset fashion-mnist|digits] [--epochs N] [--batch-size B]
//                  [--lr LR] [--seed S] [--min-accuracy A] [--device cpu|cuda|cuda:N]
//                  [--profile trace.json]
// With --min-accuracy the program exits with status 1 when the final test
// accuracy is lower (the tests use it to hold the demo to its promise).
// On --device cuda without an NVIDIA GPU the emulated GPU trains, and each
// epoch also prints the modelled time of a real GPU (TINY_EMULATED_GPU_MODEL,
// an H100 SXM by default: docs/performance_model.md). --profile writes a
// Chrome trace of the first 20 training steps with their ops' input shapes
// (open it in https://ui.perfetto.dev), as torch.profiler's
// export_chrome_trace, and beside it the same timeline as a page any browser
// opens (trace.json -> trace.html), with the modelled step time and, for the
// model that was measured on the modelled GPU, the measured ones.

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <regex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tiny/tiny.h"

namespace nn = tiny::nn;
namespace F = tiny::nn::functional;

namespace {

struct Split {
  std::shared_ptr<tiny::data::Dataset> train, test;
  int64_t features = 0;
};

Split load(const std::string& name) {
  if (name == "digits") {
    return {std::make_shared<tiny::data::Digits>("", true), std::make_shared<tiny::data::Digits>("", false), 64};
  }
  return {std::make_shared<tiny::data::FashionMNIST>(tiny::data::FashionMNIST::kDebianRoot, true),
          std::make_shared<tiny::data::FashionMNIST>(tiny::data::FashionMNIST::kDebianRoot, false), 784};
}

double accuracy(nn::Module& model, tiny::data::DataLoader& loader, const tiny::Device& device) {
  tiny::NoGradGuard no_grad;  // with torch.no_grad():
  model.eval();
  int64_t correct = 0, seen = 0;
  for (const tiny::data::Batch& batch : loader) {
    tiny::Tensor predicted = model(batch.data.to(device)).argmax(1);
    correct += (predicted == batch.target.to(device)).sum().item<int64_t>();
    seen += batch.target.size(0);
  }
  model.train();
  return static_cast<double>(correct) / static_cast<double>(std::max<int64_t>(seen, 1));
}

// trace.json -> trace.html; any other name gets ".html" added.
std::string html_beside(const std::string& trace_path) {
  const std::string ext = ".json";
  if (trace_path.size() > ext.size() && trace_path.compare(trace_path.size() - ext.size(), ext.size(), ext) == 0) {
    return trace_path.substr(0, trace_path.size() - ext.size()) + ".html";
  }
  return trace_path + ".html";
}

// The committed measurements of this program's default model (step A of
// bench/training_cases.h: 784-512-256-10, dropout, batch 64, Adam) on the GPU
// the emulator models, a line each for the timeline; none when that GPU has
// none. gpu_models.json maps the modelled GPU's name ("H100 SXM") to its
// measurement files' ("h100-sxm-2026-11-25.json").
std::vector<std::string> measured_step_a(const std::string& modelled_gpu) {
  std::vector<std::string> lines;
#if defined(TRAIN_MLP_GPU_MODELS) && defined(TRAIN_MLP_MEASUREMENTS)
  using nlohmann::json;
  std::ifstream models_in(TRAIN_MLP_GPU_MODELS);
  const json models = json::parse(models_in, nullptr, /*allow_exceptions=*/false);
  std::string key;
  if (models.is_object() && models.contains("models")) {
    for (const auto& [name, m] : models["models"].items()) {
      if (m.is_object() && m.value("display_name", "") == modelled_gpu) key = name;
    }
  }
  if (key.empty()) return lines;
  const std::regex file_name(key + R"(-\d{4}-\d{2}-\d{2}\.json)");
  std::vector<std::filesystem::path> files;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(TRAIN_MLP_MEASUREMENTS, error)) {
    if (std::regex_match(entry.path().filename().string(), file_name)) files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());  // by date
  for (const std::filesystem::path& path : files) {
    std::ifstream in(path);
    const json doc = json::parse(in, nullptr, /*allow_exceptions=*/false);
    if (!doc.is_object() || !doc.contains("rows") || !doc["rows"].contains("tiny/TinyStepCuda/A")) continue;
    const json& row = doc["rows"]["tiny/TinyStepCuda/A"];
    char line[400];
    std::snprintf(line, sizeof line,
                  "measured on a real %s (%s, bench_training_step TinyStepCuda/A: this model, batch 64, Adam, with "
                  "the batch already on the GPU and no .item()): %.0f us per step, median of %d [%.0f, %.0f]",
                  modelled_gpu.c_str(), doc.value("date", "?").c_str(), row.value("median", 0.0),
                  row.value("repetitions", 0), row.value("min", 0.0), row.value("max", 0.0));
    lines.push_back(line);
  }
#else
  (void)modelled_gpu;
#endif
  return lines;
}

constexpr int64_t kProfiledSteps = 20;

struct Args {
  std::string dataset = "fashion-mnist";
  int epochs = 3;
  int64_t batch_size = 64;
  double lr = 1e-3;
  uint64_t seed = 0;
  double min_accuracy = 0.0;
  std::string device_name = "cpu", profile_path;
};

void add_options(CLI::App& app, Args& a) {
  app.option_defaults()->always_capture_default();  // --help shows each default
  app.add_option("--dataset", a.dataset, "fashion-mnist or digits")->check(CLI::IsMember({"fashion-mnist", "digits"}));
  app.add_option("--epochs", a.epochs, "passes over the training set")->check(CLI::Range(1, 1000));
  app.add_option("--batch-size", a.batch_size, "examples per step")->check(CLI::Range(1, 1 << 20));
  app.add_option("--lr", a.lr, "Adam's learning rate")->check(CLI::PositiveNumber);
  app.add_option("--seed", a.seed, "tiny::manual_seed");
  app.add_option("--min-accuracy", a.min_accuracy, "exit with status 1 below this test accuracy")
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--device", a.device_name, "cpu, cuda or cuda:N (the emulated GPU where there is no NVIDIA GPU)");
  app.footer("On the emulated GPU, TINY_EMULATED_GPU_MODEL names the GPU whose time is modelled (h100-sxm by "
             "default; an unknown name lists the others): docs/performance_model.md");
  app.add_option("--profile", a.profile_path,
                 "write a Chrome trace of the first 20 training steps (or of the first epoch, when it is shorter) to "
                 "this file, and their timeline as a page beside it (trace.json -> trace.html)");
}

// The tutorial's MLP (above), narrower for the 8x8 digits.
std::shared_ptr<nn::Sequential> make_model(int64_t features) {
  const int64_t hidden1 = features == 64 ? 128 : 512, hidden2 = features == 64 ? 64 : 256;
  return std::make_shared<nn::Sequential>(
      std::make_shared<nn::Linear>(features, hidden1), std::make_shared<nn::ReLU>(),
      std::make_shared<nn::Dropout>(0.2), std::make_shared<nn::Linear>(hidden1, hidden2),
      std::make_shared<nn::ReLU>(), std::make_shared<nn::Dropout>(0.2), std::make_shared<nn::Linear>(hidden2, 10));
}

// Stops the profiler after the profiled steps (`steps` of them, from
// `started` on tiny::cuda::host_time()), writes their trace and, beside it,
// their timeline page, and says where, with the step time and the ops' table.
void save_profile(tiny::profiler::profile& profile, const Args& a, const tiny::Device& device, bool emulated,
                  int64_t steps, double started) {
  const double step_us = 1e6 * (tiny::cuda::host_time() - started) / static_cast<double>(steps);
  profile.stop();
  profile.export_chrome_trace(a.profile_path);
  tiny::profiler::TimelineOptions timeline;
  const std::string first = "the first " + std::to_string(steps) + " step" + (steps == 1 ? "" : "s");
  timeline.title = "train_mlp on " + device.str() + ": " + first + " (" + a.dataset + ", batch " +
                   std::to_string(a.batch_size) + ")";
  const std::string profiled = steps == 1 ? "the one profiled step"
                                           : "the mean of the " + std::to_string(steps) + " profiled steps";
  std::string step_line;  // the step time, modelled or measured here
  char text[200];
  if (emulated) {
    const std::string gpu = tiny::cuda::get_device_properties(device.index()).modelled_gpu;
    std::snprintf(text, sizeof text, "modelled on the %s: %.1f us per step (%s)", gpu.c_str(), step_us,
                  profiled.c_str());
    step_line = text;
    const bool step_a = a.dataset == "fashion-mnist" && a.batch_size == 64;
    timeline.notes = step_a ? measured_step_a(gpu) : std::vector<std::string>{};
    if (!timeline.notes.empty()) {
      timeline.notes.push_back("each step here also copies its batch to the GPU (pageable) and reads the loss "
                               "with .item(); the model's error per row: docs/performance_model.md");
    }
  } else if (device.is_cuda()) {
    std::snprintf(text, sizeof text, "measured on this GPU: %.1f us per step (%s)", step_us, profiled.c_str());
    step_line = text;
  }
  const std::string html_path = html_beside(a.profile_path);
  profile.export_timeline_html(html_path, timeline);
  std::cout << "\ntrace of " << first << ": " << a.profile_path << " (open it in https://ui.perfetto.dev)\nits "
            << "timeline: " << html_path << " (open it in any browser)\n";
  if (!step_line.empty()) std::cout << step_line << "\n";
  for (const std::string& note : timeline.notes) std::cout << note << "\n";
  std::cout << profile.key_averages();
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Train an MLP with tiny"};
  Args a;
  add_options(app, a);
  CLI11_PARSE(app, argc, argv);

  try {
    tiny::manual_seed(a.seed);
    const Split data = load(a.dataset);
    tiny::data::DataLoaderOptions train_options;
    train_options.batch_size = a.batch_size;
    train_options.shuffle = true;
    tiny::data::DataLoader train_loader(data.train, train_options);
    tiny::data::DataLoaderOptions test_options;
    test_options.batch_size = 1000;
    tiny::data::DataLoader test_loader(data.test, test_options);

    auto model = make_model(data.features);
    const tiny::Device device(a.device_name);
    model->to(device);
    tiny::optim::Adam optimizer(model->parameters(), tiny::optim::AdamOptions{a.lr});
    const bool emulated = device.is_cuda() && tiny::cuda::is_emulated(device.index());

    std::cout << "device: "
              << (device.is_cpu() ? "cpu (" + std::to_string(tiny::get_num_threads()) + " threads)"
                                  : tiny::cuda::device_banner(device))
              << ", data: " << a.dataset << " (" << data.train->size() << " train / " << data.test->size()
              << " test)\n"
              << *model << "\n";
    std::unique_ptr<tiny::profiler::profile> profile;
    double profile_started = 0;
    if (!a.profile_path.empty()) {
      profile = std::make_unique<tiny::profiler::profile>(tiny::profiler::ProfileOptions{/*record_shapes=*/true});
      profile_started = tiny::cuda::host_time();
    }
    double final_accuracy = 0.0;
    for (int epoch = 1; epoch <= a.epochs; ++epoch) {
      const auto start = std::chrono::steady_clock::now();
      const double modelled_start = tiny::cuda::host_time();
      double loss_sum = 0.0;
      int64_t steps = 0;
      tiny::ProgressBar bar(train_loader.size(), "epoch " + std::to_string(epoch));  // drawn on a terminal only
      for (const tiny::data::Batch& batch : train_loader) {
        optimizer.zero_grad();
        tiny::Tensor loss = F::cross_entropy((*model)(batch.data.to(device)), batch.target.to(device));
        loss.backward();
        optimizer.step();
        loss_sum += loss.item<double>();  // .item(): a number, not a tensor that keeps the graph alive
        ++steps;
        bar.update(steps, "loss " + std::to_string(loss_sum / steps).substr(0, 6));
        if (profile) profile->step();  // prof.step(): ProfilerStep#N in the trace
        if (profile && steps == kProfiledSteps) {
          save_profile(*profile, a, device, emulated, steps, profile_started);
          profile.reset();
        }
      }
      if (profile) {  // an epoch shorter than kProfiledSteps: all of its steps
        save_profile(*profile, a, device, emulated, std::max<int64_t>(steps, 1), profile_started);
        profile.reset();
      }
      if (device.is_cuda()) tiny::cuda::synchronize(device.index());
      const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      const double modelled = tiny::cuda::host_time() - modelled_start;
      final_accuracy = accuracy(*model, test_loader, device);
      bar.finish();
      std::printf("epoch %d/%d  loss %.4f  test accuracy %.2f%%  %.1f s (%.2f ms/step)\n", epoch, a.epochs,
                  loss_sum / std::max<int64_t>(steps, 1), 100.0 * final_accuracy, seconds,
                  1000.0 * seconds / std::max<int64_t>(steps, 1));
      if (emulated) {
        std::printf("         modelled %s: %.2f s (%.3f ms/step, an estimate: docs/performance_model.md)\n",
                    tiny::cuda::get_device_properties(device.index()).modelled_gpu.c_str(), modelled,
                    1000.0 * modelled / std::max<int64_t>(steps, 1));
      }
    }
    if (final_accuracy < a.min_accuracy) {
      std::fprintf(stderr, "test accuracy %.2f%% is below the required %.2f%%\n", 100.0 * final_accuracy,
                   100.0 * a.min_accuracy);
      return 1;
    }
  } catch (const tiny::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  }
  return 0;
}
