// Lesson 7 demo: the same MLP trained on the 8x8 digits three ways, from the same
// starting weights: float32, float16 autocast with your GradScaler step, and
// bfloat16 autocast; the activation memory of one forward pass at a large
// batch; then the time of one training step in float32, TF32, float16 and
// bfloat16, on the small MLP and on a wide one whose matrix products dominate.
//   ./workbook run 7                       (60 steps of each)
//   ./workbook run 7 --steps 200           (longer runs)
//   ./workbook run 7 --memory-batch 16384  (the memory comparison at another batch size)
//   ./workbook run 7 --speed-only          (only the step times)
// Options: --steps N, --batch-size B, --lr LR, --max-grad-norm M, --memory-batch B, --seed S,
//          --wide W (the wide MLP's width), --wide-batch B, --speed-only
// On the emulated GPU the step times are modelled: how long the steps would
// take on the GPU named by TINY_EMULATED_GPU_MODEL (default h100-sxm; also
// h200, a100-sxm, l4, t4). On a real GPU they are measured.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>

#include <CLI/CLI.hpp>
#include "../common/demo_flags.h"  // at_least() and positive(): the checks on the flags below

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
  int64_t wide = 1024;        // the wide MLP: wide x wide layers
  int64_t wide_batch = 4096;
  bool speed_only = false;
};

// Reads the options into `o`: -1 to go on, else the exit status (--help, or a bad option, which CLI11 names).
int parse(int argc, char** argv, Options& o) {
  CLI::App app{"Lesson 7 demo: mixed precision (autocast and GradScaler): loss, memory and step time against fp32",
               "./workbook run 7"};
  app.add_option("--steps", o.steps, "training steps of each run")->check(at_least(1))->capture_default_str();
  app.add_option("--batch-size", o.batch_size, "examples per step")->check(at_least(int64_t{1}))->capture_default_str();
  app.add_option("--lr", o.lr, "SGD's learning rate")->check(positive())->capture_default_str();
  app.add_option("--max-grad-norm", o.max_grad_norm, "gradient clipping's max norm")->check(positive())
      ->capture_default_str();
  app.add_option("--memory-batch", o.memory_batch, "batch size of the memory comparison")->check(at_least(int64_t{1}))
      ->capture_default_str();
  app.add_option("--seed", o.seed, "seed of the initial weights and the data")->capture_default_str();
  app.add_option("--wide", o.wide, "the wide MLP's width")->check(at_least(int64_t{1}))->capture_default_str();
  app.add_option("--wide-batch", o.wide_batch, "batch size of the wide MLP's step times")->check(at_least(int64_t{1}))
      ->capture_default_str();
  app.add_flag("--speed-only", o.speed_only, "only the step times");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;  // --help: 0; a bad flag: CLI11 names it, and the status is 2 as before
  }
  return -1;
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

// The digits MLP trained three ways (float32, float16 with your amp_train_step,
// bfloat16 with your bf16_train_step), then what a forward pass keeps for backward.
void train_and_measure(const Options& o, const tiny::Device& device, bool emulated) {
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
  std::printf("\n%-31s %8s %8s %8s %8s %10s %9s\n", "", "step 1", "step 10", "step 30", "last", "scale", "test acc");
  for (const Mode& mode : modes) {
    auto model = make_model(o.seed, device);
    tiny::optim::SGDOptions sgd;
    sgd.lr = o.lr;
    sgd.momentum = 0.9;
    tiny::optim::SGD optimizer(model->parameters(), sgd);
    double first = NAN, tenth = NAN, thirtieth = NAN, last = NAN;
    for (int s = 0; s < o.steps; ++s) {
      last = mode.step(*model, optimizer, batches[static_cast<size_t>(s)]);
      if (s == 0) first = last;
      if (s == 9) tenth = last;
      if (s == 29) thirtieth = last;
    }
    char scale[32] = "-";
    if (std::strncmp(mode.name, "float16", 7) == 0) std::snprintf(scale, sizeof scale, "%.0f", scaler.get_scale());
    std::printf("%-31s %8s %8s %8s %8s %10s %8.2f%%\n", mode.name, loss_text(first, 0, o.steps).c_str(),
                loss_text(tenth, 9, o.steps).c_str(), loss_text(thirtieth, 29, o.steps).c_str(),
                loss_text(last, 0, o.steps).c_str(), scale, 100.0 * accuracy(*model, test_batch));
  }
  std::printf("(loss per step; the scale is the GradScaler's after the last step; steps it skipped: %d)\n", skipped);

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
  std::printf("(%s)\n", emulated ? "the emulated GPU stores float16 and bfloat16 in 2 bytes and rounds as a GPU does"
                                  : "float16 and bfloat16 take 2 bytes");
}

// ms per step: one step to warm up (the allocator's cache, the optimizer's
// state, the scaler's), then `steps` steps between two synchronizes, read on
// tiny::cuda::host_time(): modelled on the emulated GPU, measured on a real
// one. `launches`: the kernels each step launched (the GPU's counters).
double ms_per_step(const std::function<void()>& step, int steps, double& launches) {
  step();
  tiny::cuda::synchronize(0);
  const uint64_t launched = tiny::cuda::device_counters(0).kernel_launches;
  const double start = tiny::cuda::host_time();
  for (int i = 0; i < steps; ++i) step();
  tiny::cuda::synchronize(0);
  launches = static_cast<double>(tiny::cuda::device_counters(0).kernel_launches - launched) / steps;
  return (tiny::cuda::host_time() - start) * 1e3 / steps;
}

// Sets the float32 matmul precision for a scope (torch.set_float32_matmul_precision).
struct PrecisionScope {
  explicit PrecisionScope(const char* precision) : previous(tiny::get_float32_matmul_precision()) {
    tiny::set_float32_matmul_precision(precision);
  }
  ~PrecisionScope() { tiny::set_float32_matmul_precision(previous); }
  std::string previous;
};

// One model's row of the speed table: a step in each precision, none clipping.
struct SpeedRow {
  double ms[4] = {0, 0, 0, 0};      // float32, TF32, float16 AMP, bfloat16 AMP
  double kept_mb[4] = {0, 0, 0, 0};  // activations kept for backward
  double launches[4] = {0, 0, 0, 0}; // kernels launched per step
};

SpeedRow time_steps(const std::shared_ptr<nn::Sequential>& model, const tiny::Tensor& x, const tiny::Tensor& y,
                    double lr, int steps) {
  tiny::optim::SGDOptions sgd;
  sgd.lr = lr;
  sgd.momentum = 0.9;
  tiny::optim::SGD optimizer(model->parameters(), sgd);
  tiny::amp::GradScaler scaler("cuda", tiny::amp::GradScaler::Options{});
  auto float32_step = [&] {
    optimizer.zero_grad();
    const tiny::Tensor loss = F::cross_entropy((*model)(x), y);
    loss.backward();
    optimizer.step();
    (void)loss.item<double>();
  };
  auto float16_step = [&] {  // PyTorch's recipe: your amp_forward, the library's GradScaler
    optimizer.zero_grad();
    const tiny::Tensor loss = lesson7::amp_forward(*model, x, y);
    scaler.scale(loss).backward();
    scaler.step(optimizer);
    scaler.update();
    (void)loss.item<double>();
  };
  SpeedRow row;
  row.ms[0] = ms_per_step(float32_step, steps, row.launches[0]);
  {
    PrecisionScope tf32("high");
    row.ms[1] = ms_per_step(float32_step, steps, row.launches[1]);
  }
  row.ms[2] = ms_per_step(float16_step, steps, row.launches[2]);
  row.ms[3] = ms_per_step([&] { lesson7::bf16_train_step(*model, optimizer, x, y); }, steps, row.launches[3]);
  optimizer.zero_grad();
  row.kept_mb[0] = row.kept_mb[1] = kept_bytes([&] { return F::cross_entropy((*model)(x), y); }) / 1e6;
  row.kept_mb[2] = kept_bytes([&] { return lesson7::amp_forward(*model, x, y); }) / 1e6;
  row.kept_mb[3] = kept_bytes([&] {
    tiny::amp::autocast guard("cuda", tiny::kBFloat16);
    return F::cross_entropy((*model)(x), y);
  }) / 1e6;
  return row;
}

void print_speed_row(const std::string& name, const SpeedRow& r) {
  std::printf("%-40s %9.3f %9.3f %11.3f %12.3f\n", name.c_str(), r.ms[0], r.ms[1], r.ms[2], r.ms[3]);
  std::printf("%-40s %8.2fx %8.2fx %10.2fx %11.2fx\n", "  speedup over float32", 1.0, r.ms[0] / r.ms[1],
              r.ms[0] / r.ms[2], r.ms[0] / r.ms[3]);
  std::printf("%-40s %8.2fx %8.2fx %10.2fx %11.2fx\n", "  speedup over TF32", r.ms[1] / r.ms[0], 1.0,
              r.ms[1] / r.ms[2], r.ms[1] / r.ms[3]);
  std::printf("%-40s %9.0f %9.0f %11.0f %12.0f\n", "  kernels launched per step", r.launches[0], r.launches[1],
              r.launches[2], r.launches[3]);
  std::printf("%-40s %9.2f %9.2f %11.2f %12.2f\n", "  activations kept for backward, MB", r.kept_mb[0], r.kept_mb[1],
              r.kept_mb[2], r.kept_mb[3]);
}

// The step in four precisions on the small MLP (launch bound: its products
// are tiny) and on a wide one (its products dominate the step).
void speed_table(const Options& o, const tiny::Device& device, bool emulated) {
  if (emulated) {
    std::printf("\none training step (SGD with momentum), ms, modelled on the %s (an estimate):\n",
                tiny::cuda::get_device_properties(device.index()).modelled_gpu.c_str());
  } else {
    std::printf("\none training step (SGD with momentum), ms, measured on this GPU:\n");
  }
  std::printf("%-40s %9s %9s %11s %12s\n", "", "float32", "TF32", "float16 AMP", "bfloat16 AMP");
  const tiny::Tensor small_x = tiny::randn({o.batch_size, 64}, {}, tiny::Generator(o.seed + 3)).to(device);
  const tiny::Tensor small_y = tiny::randint(0, 10, {o.batch_size}, tiny::TensorOptions(tiny::kInt64),
                                             tiny::Generator(o.seed + 4)).to(device);
  print_speed_row("small MLP 64-256-256-10, batch " + std::to_string(o.batch_size),
                  time_steps(make_model(o.seed, device), small_x, small_y, o.lr, 3));

  tiny::manual_seed(o.seed);
  const int64_t w = o.wide;
  auto wide = std::make_shared<nn::Sequential>(
      std::make_shared<nn::Linear>(w, w), std::make_shared<nn::ReLU>(), std::make_shared<nn::Linear>(w, w),
      std::make_shared<nn::ReLU>(), std::make_shared<nn::Linear>(w, w), std::make_shared<nn::ReLU>(),
      std::make_shared<nn::Linear>(w, w), std::make_shared<nn::ReLU>(), std::make_shared<nn::Linear>(w, 10));
  wide->to(device);
  const tiny::Tensor wide_x = tiny::randn({o.wide_batch, w}, {}, tiny::Generator(o.seed + 5)).to(device);
  const tiny::Tensor wide_y = tiny::randint(0, 10, {o.wide_batch}, tiny::TensorOptions(tiny::kInt64),
                                            tiny::Generator(o.seed + 6)).to(device);
  print_speed_row("wide MLP " + std::to_string(w) + " x 4 layers, batch " + std::to_string(o.wide_batch),
                  time_steps(wide, wide_x, wide_y, o.lr, 1));
  std::printf("(TF32: tiny::set_float32_matmul_precision(\"high\"), float32 products on tensor cores%s.\n"
              " float16 AMP: your amp_forward with GradScaler; bfloat16 AMP: your bf16_train_step; none clips.\n"
              " A step gains only where its matrix products dominate. The small MLP is launch bound: each op waits\n"
              " for its launch, and autocast's casts and GradScaler's kernels are more launches. On the wide MLP\n"
              " float32's products dominate; on tensor cores they shrink until the launches dominate again.)\n",
              emulated && tiny::cuda::get_device_properties(device.index()).modelled_gpu == "T4"
                  ? "; a T4 has none, so here TF32 is float32"
                  : "");
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  const int parsed = parse(argc, argv, o);
  if (parsed >= 0) return parsed;
  try {
    if (!tiny::cuda::is_available()) {
      std::printf("this lesson needs a GPU (an emulated one will do: unset TINY_EMULATED_GPUS=0)\n");
      return 1;
    }
    const tiny::Device device("cuda:0");
    const bool emulated = tiny::cuda::is_emulated(0);
    std::printf("%s\n", tiny::cuda::device_banner(device).c_str());
    if (!o.speed_only) train_and_measure(o, device, emulated);
    speed_table(o, device, emulated);
  } catch (const tiny::NotImplemented& e) {
    std::printf("%s\n(fill in lessons/7_amp/exercise.cpp, then run ./workbook check 7)\n", e.what());
    return 1;
  } catch (const tiny::Error& e) {
    std::printf("error: %s\n", e.what());
    return 1;
  }
  return 0;
}
