// Lesson 3 demo: move a model to the GPU, check every piece went, predict, and
// take a checkpoint from the GPU to the CPU and back; then what moving costs:
// predictions with the model moved once, moved for every batch, and a row at a
// time, on the GPU and on the CPU.
//   ./workbook run 3              (cuda:0 when there is a GPU, else the CPU)
//   ./workbook run 3 cuda:1       (another device)
//   ./workbook run 3 --gpu-only   (the speed table without the CPU column)
// On the emulated GPU the GPU columns are modelled time: how long the same
// work would take on the GPU named by TINY_EMULATED_GPU_MODEL (default
// h100-sxm; also h200, a100-sxm, l4, t4). The CPU column is this CPU's clock.
#include <chrono>
#include <cstdio>

#include <CLI/CLI.hpp>
#include <cstring>
#include <filesystem>
#include <functional>
#include <iostream>
#include <memory>

#include "exercise.h"

namespace {

void show(const char* when, const std::vector<std::string>& names, const tiny::Device& device) {
  std::printf("%-34s", when);
  if (names.empty()) {
    std::printf("everything is on %s\n", device.str().c_str());
    return;
  }
  std::printf("not on %s:", device.str().c_str());
  for (const std::string& n : names) std::printf(" %s", n.c_str());
  std::printf("\n");
}

std::shared_ptr<tiny::nn::Sequential> make_model() {
  const tiny::Tensor mean = tiny::tensor({0.5, -1.0, 2.0, 0.0, 1.5});
  const tiny::Tensor stddev = tiny::tensor({1.0, 2.0, 0.5, 1.0, 3.0});
  return std::make_shared<tiny::nn::Sequential>(
      std::make_shared<lesson3::Normalizer>(mean, stddev), std::make_shared<lesson3::PositionalOffset>(0.1),
      std::make_shared<tiny::nn::Linear>(5, 8), std::make_shared<tiny::nn::ReLU>(),
      std::make_shared<tiny::nn::Linear>(8, 3));
}

// What a plain member does: the same layer with its statistics kept outside the module's registry.
struct PlainNormalizer : tiny::nn::Module {
  PlainNormalizer() : mean(tiny::zeros({5})), stddev(tiny::ones({5})) {}
  tiny::Tensor forward(const tiny::Tensor& x) override { return (x - mean) / stddev; }
  tiny::Tensor mean, stddev;  // not registered: .to() never sees them
};

double max_difference(const tiny::Tensor& a, const tiny::Tensor& b) { return (a - b).abs().max().item<double>(); }

// A plain MLP of the given widths, large enough for its products to matter.
std::shared_ptr<tiny::nn::Sequential> make_mlp(const std::vector<int64_t>& widths) {
  auto mlp = std::make_shared<tiny::nn::Sequential>();
  for (size_t i = 0; i + 1 < widths.size(); ++i) {
    mlp->push_back(std::make_shared<tiny::nn::Linear>(widths[i], widths[i + 1]));
    if (i + 2 < widths.size()) mlp->push_back(std::make_shared<tiny::nn::ReLU>());
  }
  return mlp;
}

// ms per batch of `batch` rows, predicting `inputs` (on the CPU) in batches, on `device`'s clock:
// tiny::cuda::host_time() around the work, after a synchronize (modelled on the emulated GPU).
// Before each batch, `before_batch` runs (the model moved there, or nothing).
template <typename Predict>
double gpu_ms_per_batch(const tiny::Device& device, const tiny::Tensor& inputs, int64_t batch, Predict predict) {
  tiny::cuda::synchronize(device.index());
  const double start = tiny::cuda::host_time();
  const int64_t batches = inputs.size(0) / batch;
  for (int64_t b = 0; b < batches; ++b) {
    const tiny::Tensor y = predict(inputs.narrow(0, b * batch, batch));
  }
  tiny::cuda::synchronize(device.index());
  return (tiny::cuda::host_time() - start) * 1e3 / static_cast<double>(batches);
}

// What moving costs: the same predictions with the model moved to the GPU once, moved again
// for every batch (a server that loads its model per request), and one row at a time (a .cpu()
// per row); the CPU column is the same predictions with the model left on the CPU.
void speed_table(const tiny::Device& device, bool gpu_only) {
  constexpr int64_t kRows = 1024, kBatch = 256;
  const bool emulated = tiny::cuda::is_emulated(device.index());
  const std::string clock = emulated ? "modelled on the " + tiny::cuda::get_device_properties(device.index()).modelled_gpu
                                     : "measured on this GPU";
  std::printf("\nwhat moving costs: ms per batch of %lld rows (%lld rows in all), float32\n",
              static_cast<long long>(kBatch), static_cast<long long>(kRows));
  std::printf("  %s: %s (host_time after a synchronize); cpu: this CPU's clock (std::chrono)\n",
              device.str().c_str(), clock.c_str());
  std::printf("%-18s %12s %14s %12s %10s\n", "model", "moved once", "every batch", "row by row", "cpu");
  struct Case {
    std::string name;
    std::function<std::shared_ptr<tiny::nn::Module>()> make;
    int64_t in;
  };
  const Case cases[] = {{"5-8-3", [] { return std::static_pointer_cast<tiny::nn::Module>(make_model()); }, 5},
                        {"512-2048-2048-10",
                         [] { return std::static_pointer_cast<tiny::nn::Module>(make_mlp({512, 2048, 2048, 10})); },
                         512}};
  for (const Case& c : cases) {
    tiny::manual_seed(2);
    auto model = c.make();
    const tiny::StateDict state = model->state_dict();  // CPU tensors: what a checkpoint holds
    const tiny::Tensor inputs = tiny::randn({kRows, c.in});
    model->to(device);
    tiny::NoGradGuard no_grad;
    lesson3::predict(*model, inputs.narrow(0, 0, kBatch));  // warm-up: the allocator's cache fills
    const double once = gpu_ms_per_batch(device, inputs, kBatch, [&](const tiny::Tensor& x) {
      return lesson3::predict(*model, x);
    });
    auto fresh = c.make();
    const double every = gpu_ms_per_batch(device, inputs, kBatch, [&](const tiny::Tensor& x) {
      fresh->load_state_dict(state);  // back on the CPU, as loaded from a file
      fresh->to(device);
      return lesson3::predict(*fresh, x);
    });
    const double by_row = gpu_ms_per_batch(device, inputs.narrow(0, 0, kBatch), kBatch, [&](const tiny::Tensor& x) {
      std::vector<tiny::Tensor> rows;
      for (int64_t i = 0; i < x.size(0); ++i) rows.push_back(lesson3::predict(*model, x.narrow(0, i, 1)));
      return tiny::cat(rows, 0);
    });
    std::string cpu = "-";
    if (!gpu_only) {
      auto on_cpu = c.make();
      on_cpu->load_state_dict(state);
      const auto start = std::chrono::steady_clock::now();
      for (int64_t b = 0; b < kRows / kBatch; ++b) lesson3::predict(*on_cpu, inputs.narrow(0, b * kBatch, kBatch));
      const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
      char text[32];
      std::snprintf(text, sizeof text, "%.3f", ms / static_cast<double>(kRows / kBatch));
      cpu = text;
    }
    std::printf("%-18s %12.3f %14.3f %12.3f %10s\n", c.name.c_str(), once, every, by_row, cpu.c_str());
  }
}

}  // namespace

int main(int argc, char** argv) {
  const bool gpu = tiny::cuda::is_available();
  bool gpu_only = false;
  std::string device_name = gpu ? "cuda:0" : "cpu";
  CLI::App app{"Lesson 3 demo: a model moved to the GPU, checked, checkpointed; then what moving costs",
               "./workbook run 3"};
  app.add_option("device", device_name, "where the model goes (default cuda:0 when there is a GPU, else cpu)");
  app.add_flag("--gpu-only", gpu_only, "the speed table without the CPU column");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;  // --help: 0; a bad flag: CLI11 names it, and the status is 2 as before
  }
  try {
    const tiny::Device device(device_name);
    if (device.is_cuda()) std::printf("%s\n", tiny::cuda::device_banner(device).c_str());
    tiny::manual_seed(0);

    auto model = make_model();
    std::cout << *model << "\n";
    show("before model->to(device):", lesson3::left_behind(*model, device), device);
    model->to(device);
    show("after model->to(device):", lesson3::left_behind(*model, device), device);

    PlainNormalizer plain;
    plain.to(device);
    std::printf("\na layer whose mean is a plain member: left_behind() cannot even see it (%zu buffers)\n",
                plain.named_buffers().size());
    try {
      plain(tiny::randn({2, 5}).to(device));
      std::printf("  its forward() ran (the device is the CPU, so nothing had to move)\n");
    } catch (const tiny::Error& e) {
      std::printf("  and its forward() fails: %s\n", e.what());
    }

    const tiny::Tensor inputs = tiny::randn({4, 5});  // data arrives on the CPU
    const tiny::Tensor outputs = lesson3::predict(*model, inputs);
    std::cout << "\npredict(model, inputs on cpu) -> outputs on " << outputs.device() << ":\n" << outputs << "\n";

    const std::string path = (std::filesystem::temp_directory_path() / "lesson3_demo.safetensors").string();
    lesson3::save_checkpoint(*model, path);
    std::printf("\nsaved the model from %s to %s (%ju bytes)\n", device.str().c_str(), path.c_str(),
                static_cast<uintmax_t>(std::filesystem::file_size(path)));

    tiny::manual_seed(1);  // a fresh model starts from other random weights
    auto on_cpu = make_model();
    lesson3::load_checkpoint(*on_cpu, path, tiny::Device("cpu"));
    show("loaded into a fresh model:", lesson3::left_behind(*on_cpu, tiny::Device("cpu")), tiny::Device("cpu"));
    std::printf("  its predictions differ from the original's by at most %g\n",
                max_difference(lesson3::predict(*on_cpu, inputs), outputs));

    lesson3::load_checkpoint(*on_cpu, path, device);
    show("loaded again, onto the device:", lesson3::left_behind(*on_cpu, device), device);
    std::printf("  its predictions differ from the original's by at most %g\n",
                max_difference(lesson3::predict(*on_cpu, inputs), outputs));
    std::filesystem::remove(path);
    if (device.is_cuda()) speed_table(device, gpu_only);
  } catch (const tiny::NotImplemented& e) {
    std::printf("%s\n(fill in lessons/3_model_to_gpu/exercise.cpp, then run ./workbook check 3)\n", e.what());
    return 1;
  } catch (const tiny::Error& e) {
    std::printf("error: %s\n", e.what());
    return 1;
  }
  return 0;
}
