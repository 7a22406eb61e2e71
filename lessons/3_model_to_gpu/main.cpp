// Lesson 3 demo: move a model to the GPU, check every piece went, predict, and
// take a checkpoint from the GPU to the CPU and back.
//   ./workbook run 3            (cuda:0 when there is a GPU, else the CPU)
//   ./workbook run 3 cuda:1     (another device)
#include <cstdio>
#include <filesystem>
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

}  // namespace

int main(int argc, char** argv) {
  try {
    const bool gpu = tiny::cuda::is_available();
    const tiny::Device device(argc > 1 ? std::string(argv[1]) : gpu ? "cuda:0" : "cpu");
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
  } catch (const tiny::NotImplemented& e) {
    std::printf("%s\n(fill in lessons/3_model_to_gpu/exercise.cpp, then run ./workbook check 3)\n", e.what());
    return 1;
  } catch (const tiny::Error& e) {
    std::printf("error: %s\n", e.what());
    return 1;
  }
  return 0;
}
