// Lesson 7 demo: the same MLP trained on the 8x8 digits three ways, from the same
// starting weights: float32, float16 autocast with your GradScaler step, and
// bfloat16 autocast; then the activation memory of one forward pass at a large batch.
//   ./workbook run 7                       (60 steps of each)
//   ./workbook run 7 --steps 200           (longer runs)
//   ./workbook run 7 --memory-batch 16384  (the memory comparison at another batch size)
// Options: --steps N, --batch-size B, --lr LR, --max-grad-norm M, --memory-batch B, --seed S
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>

#include "exercise.h"

namespace nn = tiny::nn;
namespace F = tiny::nn::functional;

namespace {

struct Options {
  int steps = 60;
  int64_t batch_size = 128;
  double lr = 0.05;
  double max_grad_norm = 1.0;
  int64_t memory_batch = 4096;
  uint64_t seed = 0;
};

bool parse(int argc, char** argv, Options& o) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "-h" || arg == "--help") return false;
    if (i + 1 >= argc) {
      std::fprintf(stderr, "%s needs a value\n", arg.c_str());
      return false;
    }
    const char* value = argv[++i];
    if (arg == "--steps") o.steps = std::atoi(value);
    else if (arg == "--batch-size") o.batch_size = std::atoll(value);
    else if (arg == "--lr") o.lr = std::atof(value);
    else if (arg == "--max-grad-norm") o.max_grad_norm = std::atof(value);
    else if (arg == "--memory-batch") o.memory_batch = std::atoll(value);
    else if (arg == "--seed") o.seed = std::strtoull(value, nullptr, 10);
    else {
      std::fprintf(stderr, "unknown option %s\n", arg.c_str());
      return false;
    }
  }
  if (o.steps < 1 || o.batch_size < 1 || o.memory_batch < 1 || !(o.lr > 0) || !(o.max_grad_norm > 0)) {
    std::fprintf(stderr, "--steps, --batch-size, --memory-batch must be >= 1; --lr and --max-grad-norm > 0\n");
    return false;
  }
  return true;
}

std::shared_ptr<nn::Sequential> make_model(uint64_t seed, const tiny::Device& device) {
  tiny::manual_seed(seed);  // the same starting weights for every run
  auto model = std::make_shared<nn::Sequential>(
      std::make_shared<nn::Linear>(64, 256), std::make_shared<nn::ReLU>(), std::make_shared<nn::Linear>(256, 256),
      std::make_shared<nn::ReLU>(), std::make_shared<nn::Linear>(256, 10));
  model->to(device);
  return model;
}

double accuracy(nn::Module& model, const tiny::data::Batch& test) {
  tiny::NoGradGuard no_grad;
  const tiny::Tensor logits = model(test.data);
  return (logits.argmax(1) == test.target).sum().item<double>() / static_cast<double>(test.target.size(0));
}

// A loss for the table: "-" for a step the run did not reach, "inf/nan" for a skipped one.
std::string loss_text(double loss, int step, int steps) {
  if (step >= steps) return "-";
  char text[32];
  std::snprintf(text, sizeof text, "%.4f", loss);
  return text;
}

// Bytes a forward pass and its loss keep for backward: memory_allocated after minus before.
double kept_bytes(const std::function<tiny::Tensor()>& forward) {
  tiny::cuda::synchronize(0);
  const size_t before = tiny::cuda::memory_allocated(0);
  const tiny::Tensor loss = forward();
  const size_t after = tiny::cuda::memory_allocated(0);
  return static_cast<double>(after) - static_cast<double>(before);
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (!parse(argc, argv, o)) {
    std::fprintf(stderr, "usage: %s [--steps N] [--batch-size B] [--lr LR] [--max-grad-norm M] [--memory-batch B] "
                         "[--seed S]\n", argv[0]);
    return 2;
  }
  try {
    if (!tiny::cuda::is_available()) {
      std::printf("this lesson needs a GPU (an emulated one will do: unset TINY_EMULATED_GPUS=0)\n");
      return 1;
    }
    const tiny::Device device("cuda:0");
    const bool emulated = tiny::cuda::is_emulated(0);
    std::printf("%s\n", tiny::cuda::device_banner(device).c_str());

    const tiny::data::Digits train("", true), test("", false);
    std::vector<int64_t> all(static_cast<size_t>(test.size()));
    for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int64_t>(i);
    tiny::data::Batch test_batch = test.get_batch(all);
    test_batch = {test_batch.data.to(device), test_batch.target.to(device)};
    std::printf("data: 8x8 digits, %lld train / %lld test images, batch size %lld, %d steps, SGD lr %g momentum 0.9\n",
                static_cast<long long>(train.size()), static_cast<long long>(test.size()),
                static_cast<long long>(o.batch_size), o.steps, o.lr);

    // The same batches for the three runs.
    std::vector<tiny::data::Batch> batches;
    tiny::Generator g(o.seed);
    for (int s = 0; s < o.steps; ++s) {
      const std::vector<int64_t> order = tiny::randperm(train.size(), g).to_vector<int64_t>();
      const int64_t n = std::min<int64_t>(o.batch_size, train.size());
      const tiny::data::Batch b = train.get_batch(std::vector<int64_t>(order.begin(), order.begin() + n));
      batches.push_back({b.data.to(device), b.target.to(device)});
    }

    struct Mode {
      const char* name;
      std::function<double(nn::Module&, tiny::optim::Optimizer&, const tiny::data::Batch&)> step;
    };
    tiny::amp::GradScaler scaler("cuda", tiny::amp::GradScaler::Options{});
    int skipped = 0;
    const Mode modes[] = {
        {"float32", [&](nn::Module& m, tiny::optim::Optimizer& opt, const tiny::data::Batch& b) {
           opt.zero_grad();
           const tiny::Tensor loss = F::cross_entropy(m(b.data), b.target);
           loss.backward();
           tiny::nn::utils::clip_grad_norm_(m.parameters(), o.max_grad_norm);
           opt.step();
           return loss.item<double>();
         }},
        {"float16 autocast + GradScaler", [&](nn::Module& m, tiny::optim::Optimizer& opt, const tiny::data::Batch& b) {
           const double scale = scaler.get_scale();
           const double loss = lesson7::amp_train_step(m, opt, scaler, b.data, b.target, o.max_grad_norm);
           if (scaler.get_scale() < scale) ++skipped;  // update() backs off only after a skipped step
           return loss;
         }},
        {"bfloat16 autocast", [&](nn::Module& m, tiny::optim::Optimizer& opt, const tiny::data::Batch& b) {
           return lesson7::bf16_train_step(m, opt, b.data, b.target);
         }},
    };
    std::printf("\n%-31s %8s %8s %8s %8s %10s %9s %10s\n", "", "step 1", "step 10", "step 30", "last", "scale", "test acc",
                "host time");
    for (const Mode& mode : modes) {
      auto model = make_model(o.seed, device);
      tiny::optim::SGDOptions sgd;
      sgd.lr = o.lr;
      sgd.momentum = 0.9;
      tiny::optim::SGD optimizer(model->parameters(), sgd);
      double first = NAN, tenth = NAN, thirtieth = NAN, last = NAN;
      const auto start = std::chrono::steady_clock::now();
      for (int s = 0; s < o.steps; ++s) {
        last = mode.step(*model, optimizer, batches[static_cast<size_t>(s)]);
        if (s == 0) first = last;
        if (s == 9) tenth = last;
        if (s == 29) thirtieth = last;
      }
      const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      char scale[32] = "-";
      if (std::strncmp(mode.name, "float16", 7) == 0) std::snprintf(scale, sizeof scale, "%.0f", scaler.get_scale());
      std::printf("%-31s %8s %8s %8s %8s %10s %8.2f%% %8.2f s\n", mode.name, loss_text(first, 0, o.steps).c_str(),
                  loss_text(tenth, 9, o.steps).c_str(), loss_text(thirtieth, 29, o.steps).c_str(),
                  loss_text(last, 0, o.steps).c_str(), scale, 100.0 * accuracy(*model, test_batch), seconds);
    }
    std::printf("(loss per step; the scale is the GradScaler's after the last step; steps it skipped: %d;\n"
                " host time: %s)\n", skipped,
                emulated ? "the emulator computes on your CPU, where 16-bit math is no faster"
                         : "layers this small keep a GPU waiting for kernel launches, so 16-bit math saves little");

    // Activation memory: what one forward pass and its loss keep for backward.
    auto model = make_model(o.seed, device);
    const tiny::Tensor x = tiny::randn({o.memory_batch, 64}, {}, tiny::Generator(o.seed + 1)).to(device);
    const tiny::Tensor y = tiny::randint(0, 10, {o.memory_batch}, tiny::TensorOptions(tiny::kInt64),
                                         tiny::Generator(o.seed + 2)).to(device);
    const double fp32 = kept_bytes([&] { return F::cross_entropy((*model)(x), y); });
    const double fp16 = kept_bytes([&] { return lesson7::amp_forward(*model, x, y); });
    const double bf16 = kept_bytes([&] {
      tiny::amp::autocast guard("cuda", tiny::kBFloat16);
      return F::cross_entropy((*model)(x), y);
    });
    std::printf("\nactivation memory of one forward pass at a batch of %lld (kept for backward):\n",
                static_cast<long long>(o.memory_batch));
    std::printf("  float32           %8.2f MB\n", fp32 / 1e6);
    std::printf("  float16 autocast  %8.2f MB  (%.0f%% of float32)\n", fp16 / 1e6, 100.0 * fp16 / fp32);
    std::printf("  bfloat16 autocast %8.2f MB  (%.0f%% of float32)\n", bf16 / 1e6, 100.0 * bf16 / fp32);
    if (emulated) {
      std::printf("(the emulated GPU stores float16 and bfloat16 in 2 bytes and rounds as a GPU does; it has no tensor "
                  "cores, so here mixed precision saves memory, not time)\n");
    } else {
      std::printf("(float16 and bfloat16 take 2 bytes; their matrix products run on the tensor cores, which pays off "
                  "in time on layers much larger than these)\n");
    }
  } catch (const tiny::NotImplemented& e) {
    std::printf("%s\n(fill in lessons/7_amp/exercise.cpp, then run ./workbook check 7)\n", e.what());
    return 1;
  } catch (const tiny::Error& e) {
    std::printf("error: %s\n", e.what());
    return 1;
  }
  return 0;
}
