// Lesson 4 demo: train a 784-512-256-10 MLP on Fashion-MNIST on the GPU, with your loop,
// and show what its epochs are made of on the modelled GPU.
//   ./workbook run 4                          (3 epochs over the 60,000 training images)
//   ./workbook run 4 --epochs 1 --limit 5000  (a quick look: 5,000 training images)
//   ./workbook run 4 --workers 0              (the same loop without DataLoader workers)
//   ./workbook run 4 --trace trace.json       (also traces of 100 steps, your loop's and with the copies
//                                             on a side stream: ui.perfetto.dev, or the .html pages)
//   ./workbook run 4 --device cpu             (the same on the CPU, without pinned memory)
//   ./workbook run 4 --dataset digits         (the small 8x8 digits shipped in data/digits, 20 epochs)
//   ./workbook run 4 --model cnn              (a small convolutional network instead: your loop trains it too)
// Options: --epochs N, --limit N (training examples, 0 = all), --batch-size B, --lr LR,
//          --seed S, --workers N, --device auto|cpu|cuda:N, --dataset fashion-mnist|digits,
//          --model mlp|cnn, --trace FILE, --no-habits (skip the table of what each habit is worth)
// On the emulated GPU the times are modelled: how long the same loop would take
// on the GPU named by TINY_EMULATED_GPU_MODEL (default h100-sxm; also t4, l4, ...).
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <numeric>
#include <optional>
#include <algorithm>
#include <sstream>
#include <string>

#include <CLI/CLI.hpp>
#include "../common/demo_flags.h"  // at_least() and positive(): the checks on the flags below

#include "epoch_profile.h"
#include "exercise.h"

namespace nn = tiny::nn;

namespace {

struct Options {
  int epochs = 0;  // 0: 3 for Fashion-MNIST, 20 for the small digits
  int64_t limit = 0;
  int64_t batch_size = 64;
  double lr = 1e-3;
  uint64_t seed = 0;
  std::string device = "auto";
  std::string dataset = "fashion-mnist";
  std::string model = "mlp";
  int workers = 4;
  std::string trace;
  bool habits = true;
};

// Reads the options into `o`: -1 to go on, else the exit status (--help, or a bad option, which CLI11 names).
int parse(int argc, char** argv, Options& o) {
  CLI::App app{"Lesson 4 demo: your training loop on Fashion-MNIST (or the digits), and what each habit is worth",
               "./workbook run 4"};
  app.add_option("--epochs", o.epochs, "passes over the training set (default: 3 for Fashion-MNIST, 20 for digits)")
      ->check(at_least(0));
  app.add_option("--limit", o.limit, "training examples used, 0 = all")->check(at_least(int64_t{0}))
      ->capture_default_str();
  app.add_option("--batch-size", o.batch_size, "examples per step")->check(at_least(int64_t{1}))->capture_default_str();
  app.add_option("--lr", o.lr, "the optimizer's learning rate")->check(positive())->capture_default_str();
  app.add_option("--seed", o.seed, "seed of the initial weights and the shuffling")->capture_default_str();
  app.add_option("--workers", o.workers, "DataLoader workers (0: load in the training loop)")
      ->check(at_least(0))->capture_default_str();
  app.add_option("--device", o.device, "auto, cpu or cuda:N")->capture_default_str();
  app.add_option("--dataset", o.dataset, "fashion-mnist or digits (the small 8x8 digits in data/digits)")
      ->check(CLI::IsMember({"fashion-mnist", "digits"}))->capture_default_str();
  app.add_option("--model", o.model, "mlp or cnn (a small convolutional network)")
      ->check(CLI::IsMember({"mlp", "cnn"}))->capture_default_str();
  app.add_option("--trace", o.trace, "also write traces of 100 steps, your loop's and with the copies overlapped");
  bool no_habits = false;
  app.add_flag("--no-habits", no_habits, "skip the table of what each habit is worth");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;  // --help: 0; a bad flag: CLI11 names it, and the status is 2 as before
  }
  o.habits = !no_habits;
  return -1;
}

// What producing one training image costs the host, in modelled time: a
// stand-in for decoding and augmenting it (torchvision's transforms), 25 ns
// per pixel, 19.6 us per 28x28 image. An assumed figure, not measured: the demo
// does not do that work, it declares its cost (Dataset::modelled_load_ns), so
// that the DataLoader's workers have something to hide.
constexpr int64_t kLoadNsPerPixel = 25;

// The training set as a real pipeline delivers it: each example costs
// kLoadNsPerPixel per feature to load, and the batches taken are counted, so
// that a progress bar (drawn on a terminal only) follows your train_one_epoch.
class TrainingImages : public tiny::data::Dataset {
 public:
  TrainingImages(std::shared_ptr<tiny::data::Dataset> inner, int64_t features)
      : inner_(std::move(inner)), ns_per_example_(kLoadNsPerPixel * features) {}
  int64_t size() const override { return inner_->size(); }
  tiny::data::Example get(int64_t index) const override { return inner_->get(index); }
  tiny::data::Batch get_batch(const std::vector<int64_t>& indices) const override {
    if (tiny::ProgressBar* bar = bar_) bar->step();
    return inner_->get_batch(indices);
  }
  int64_t modelled_load_ns(const std::vector<int64_t>& indices) const override {
    return ns_per_example_ * static_cast<int64_t>(indices.size());
  }
  double load_us_per_example() const { return static_cast<double>(ns_per_example_) / 1e3; }
  void show(tiny::ProgressBar* bar) { bar_ = bar; }

 private:
  std::shared_ptr<tiny::data::Dataset> inner_;
  int64_t ns_per_example_;
  std::atomic<tiny::ProgressBar*> bar_{nullptr};
};

// Lays each flat image [B, side * side] out as [B, 1, side, side] for the
// convolutions (PyTorch: x.view(-1, 1, 28, 28) at the top of forward).
class ToImages : public nn::Module {
 public:
  explicit ToImages(int64_t side) : side_(side) {}
  tiny::Tensor forward(const tiny::Tensor& x) override { return x.view({-1, 1, side_, side_}); }
  std::string name() const override { return "ToImages"; }
  std::string extra_repr() const override { return "side=" + std::to_string(side_); }

 private:
  int64_t side_;
};

// conv 3x3 -> BatchNorm2d -> ReLU (-> MaxPool2d 2), as in PyTorch's CNN tutorials.
void conv_block(nn::Sequential& net, int64_t in, int64_t out, bool pool) {
  net.push_back(std::make_shared<nn::Conv2d>(in, out, 3, nn::Conv2dOptions().set_padding(1)));
  net.push_back(std::make_shared<nn::BatchNorm2d>(out));
  net.push_back(std::make_shared<nn::ReLU>());
  if (pool) net.push_back(std::make_shared<nn::MaxPool2d>(2));
}

// 28x28: 16, 32, 64 channels at 28, 14, 7 pixels; 8x8: the second pooling is left out.
std::shared_ptr<nn::Sequential> make_cnn(int64_t features) {
  const int64_t side = features == 784 ? 28 : 8;
  auto net = std::make_shared<nn::Sequential>();
  net->push_back(std::make_shared<ToImages>(side));
  conv_block(*net, 1, 16, true);
  conv_block(*net, 16, 32, side > 8);
  conv_block(*net, 32, 64, false);
  net->push_back(std::make_shared<nn::AdaptiveAvgPool2d>(1));
  net->push_back(std::make_shared<nn::Flatten>());
  net->push_back(std::make_shared<nn::Linear>(64, 10));
  return net;
}

struct Data {
  std::string name;
  std::shared_ptr<tiny::data::Dataset> train, test;
  int64_t features = 0;
};

Data load(const std::string& wanted) {
  if (wanted == "fashion-mnist") {
    try {
      const tiny::data::Normalize norm{tiny::data::FashionMNIST::kMean, tiny::data::FashionMNIST::kStd};
      return {"Fashion-MNIST",
              std::make_shared<tiny::data::FashionMNIST>(tiny::data::FashionMNIST::kDebianRoot, true, norm),
              std::make_shared<tiny::data::FashionMNIST>(tiny::data::FashionMNIST::kDebianRoot, false, norm), 784};
    } catch (const tiny::IOError& e) {
      std::printf("Fashion-MNIST is not here (%s)\n  install it with: sudo apt-get install dataset-fashion-mnist\n"
                  "  training on the 8x8 digits of data/digits instead\n\n", e.what());
    }
  }
  return {"digits (8x8)", std::make_shared<tiny::data::Digits>("", true), std::make_shared<tiny::data::Digits>("", false),
          tiny::data::Digits::kNumFeatures};
}

tiny::Device pick_device(const std::string& requested) {
  if (requested == "cpu" || !tiny::cuda::is_available()) return tiny::Device("cpu");
  if (requested == "auto" || requested == "cuda") return tiny::Device("cuda:0");
  return tiny::Device(requested);
}

// The tutorial's MLP for 28x28 images, a smaller one sized to the 8x8 digits;
// or, with kind "cnn", the small CNN of make_cnn.
std::shared_ptr<nn::Sequential> make_model(int64_t features, const tiny::Device& device,
                                           const std::string& kind = "mlp") {
  if (kind == "cnn") {
    auto cnn = make_cnn(features);
    cnn->to(device);
    return cnn;
  }
  const int64_t h1 = features == 784 ? 512 : 128, h2 = features == 784 ? 256 : 64;
  auto model = std::make_shared<nn::Sequential>(
      std::make_shared<nn::Linear>(features, h1), std::make_shared<nn::ReLU>(), std::make_shared<nn::Dropout>(0.2),
      std::make_shared<nn::Linear>(h1, h2), std::make_shared<nn::ReLU>(), std::make_shared<nn::Dropout>(0.2),
      std::make_shared<nn::Linear>(h2, 10));
  model->to(device);
  return model;
}

// One loop of the table of habits: the loader's settings, and whether the
// loop reads the loss every step.
struct Habit {
  std::string name;
  bool pin_memory;
  int num_workers;
  bool item_every_step;
  bool side_stream = false;  // copy the next batch on a side stream while this one trains
};

// Your train_step on every batch, each batch copied ahead on a side stream (as
// NVIDIA's data_prefetcher does): the copy of batch k+1 is queued there after
// step k, so the GPU's copy engine runs it beside step k's kernels; the main
// stream waits for it before step k+1, and the batch is recorded as used there.
void train_with_side_stream_copies(nn::Module& model, tiny::data::DataLoader& loader,
                                   tiny::optim::Optimizer& optimizer, const tiny::Device& device) {
  const tiny::cuda::Stream main = tiny::cuda::current_stream(device.index()), side(device.index());
  tiny::Tensor loss_sum = tiny::zeros({}, device);  // the same running sum as the reference's loop
  std::optional<tiny::data::Batch> ready;           // on the device, copied on the side stream
  auto train_ready = [&] {
    main.wait_stream(side);
    ready->data.record_stream(main);
    ready->target.record_stream(main);
    // train_step's own to_device finds the batch on the device already: no copy there
    loss_sum.add_(lesson4::train_step(model, *ready, optimizer, device), static_cast<double>(ready->target.size(0)));
  };
  for (const tiny::data::Batch& b : loader) {
    if (ready) train_ready();
    tiny::cuda::StreamGuard on_side(side);
    ready = lesson4::to_device(b, device, /*non_blocking=*/true);
  }
  if (ready) train_ready();
  (void)loss_sum.item<double>();  // one wait, as the reference's epoch
}

// The modelled time of one epoch over `data` (a fresh model), in ms: your
// make_loader and train_one_epoch, or your train_step with an .item() per step.
// With a `trace` path, the epoch's trace is written there (and a page beside it).
double habit_epoch_ms(const Habit& h, const std::shared_ptr<tiny::data::Dataset>& data, int64_t features,
                      const Options& o, const tiny::Device& device, const std::string& trace = "") {
  tiny::manual_seed(o.seed);
  auto model = make_model(features, device, o.model);
  tiny::optim::Adam optimizer(model->parameters(), tiny::optim::AdamOptions{o.lr});
  auto loader = lesson4::make_loader(data, o.batch_size, /*shuffle=*/true, h.pin_memory, h.num_workers,
                                     tiny::Generator(o.seed));
  tiny::cuda::synchronize(device.index());
  std::optional<tiny::profiler::profile> prof;
  if (!trace.empty()) prof.emplace();
  const double start = tiny::cuda::host_time();
  if (h.side_stream) {
    train_with_side_stream_copies(*model, *loader, optimizer, device);
  } else if (!h.item_every_step) {
    lesson4::train_one_epoch(*model, *loader, optimizer, device);
  } else {
    double sum = 0;  // the tutorials' loop: the loss read on the host at every step
    for (const tiny::data::Batch& b : *loader) {
      sum += lesson4::train_step(*model, b, optimizer, device).item<double>() * static_cast<double>(b.target.size(0));
    }
  }
  tiny::cuda::synchronize(device.index());
  const double ms = (tiny::cuda::host_time() - start) * 1e3;
  if (prof) {
    prof->stop();
    prof->export_chrome_trace(trace);
    const std::string page = trace.substr(0, trace.rfind('.')) + ".html";
    prof->export_timeline_html(page);
    std::printf("    (its trace: %s, open it in ui.perfetto.dev; %s in any browser)\n", trace.c_str(), page.c_str());
  }
  return ms;
}

// What an epoch's modelled time was made of, from its trace and the counters.
void print_epoch_time(double ms, int64_t steps, const lesson4_checks::EpochProfile& p,
                      const tiny::cuda::DeviceCounters& c, const std::string& gpu) {
  std::printf("    modelled epoch on the %s: %.1f ms, %lld steps of %.3f ms\n", gpu.c_str(), ms,
              static_cast<long long>(steps), ms / static_cast<double>(std::max<int64_t>(steps, 1)));
  std::printf("      host: %.1f ms taking batches from the loader, %.1f ms waiting for the GPU (%d waits), "
              "%.1f ms held by pageable copies, %.1f ms launching the work\n",
              p.loader_ms, p.sync_ms, p.syncs, p.pageable_copy_ms,
              std::max(0.0, ms - p.loader_ms - p.sync_ms - p.pageable_copy_ms));
  std::printf("      GPU:  kernels %.1f ms (busy %.0f%% of the epoch); copied in %.1f MB from pinned memory, %.1f MB "
              "from pageable\n",
              p.kernel_ms, 100.0 * p.kernel_ms / std::max(ms, 1e-9), c.bytes_host_to_device_pinned / 1e6,
              c.bytes_host_to_device_pageable / 1e6);
}

// The same epoch over the first `images` training images with one habit
// changed at a time, each from the same fresh model: what each habit is worth.
void print_habits(const std::shared_ptr<tiny::data::Dataset>& train, int64_t features, const Options& o,
                  const tiny::Device& device, const std::string& gpu) {
  const int64_t images = std::min<int64_t>(train->size(), 100 * o.batch_size);
  std::vector<int64_t> first(static_cast<size_t>(images));
  std::iota(first.begin(), first.end(), 0);
  const auto subset = std::make_shared<tiny::data::Subset>(train, first);
  const std::string workers = std::to_string(o.workers);
  const std::vector<Habit> habits = {
      {"your loop: pinned memory, " + workers + " workers, the loss read once", true, o.workers, false},
      {"pin_memory=false (pageable copies)", false, o.workers, false},
      {"num_workers=0 (the loop loads every batch)", true, 0, false},
      {"num_workers=" + std::to_string(o.workers / 2) + " (half as many workers)", true, o.workers / 2, false},
      {".item() every step (the tutorials' loop)", true, o.workers, true},
      {"the copies on a side stream (a prefetcher)", true, o.workers, false, true},
  };
  std::printf("\nwhat each habit is worth: one epoch over %lld images (%lld steps), modelled on the %s\n",
              static_cast<long long>(images), static_cast<long long>((images + o.batch_size - 1) / o.batch_size),
              gpu.c_str());
  double yours = 0;
  for (size_t i = 0; i < habits.size(); ++i) {
    if (i == 3 && o.workers < 2) continue;  // half of 0 or 1 worker is no new row
    std::string trace;  // the traces of your loop and of the side stream's, with --trace
    if (!o.trace.empty() && i == 0) trace = o.trace;
    if (!o.trace.empty() && habits[i].side_stream) trace = o.trace.substr(0, o.trace.rfind('.')) + "-side-stream.json";
    const double ms = habit_epoch_ms(habits[i], subset, features, o, device, trace);
    if (i == 0) yours = ms;
    std::printf("    %-56s %8.2f ms  %5.2fx\n", habits[i].name.c_str(), ms, ms / yours);
  }
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  const int parsed = parse(argc, argv, o);
  if (parsed >= 0) return parsed;
  try {
    tiny::manual_seed(o.seed);
    const tiny::Device device = pick_device(o.device);
    if (device.is_cuda()) std::printf("%s\n", tiny::cuda::device_banner(device).c_str());
    else std::printf("device: cpu (%d threads)\n", tiny::get_num_threads());
    const bool modelled = device.is_cuda() && tiny::cuda::is_emulated(device.index());
    const std::string gpu = modelled ? tiny::cuda::get_device_properties(device.index()).modelled_gpu : "";

    Data data = load(o.dataset);
    if (o.epochs == 0) o.epochs = data.features == 784 ? 3 : 20;
    if (o.limit > 0 && o.limit < data.train->size()) {
      std::vector<int64_t> first(static_cast<size_t>(o.limit));
      std::iota(first.begin(), first.end(), 0);
      data.train = std::make_shared<tiny::data::Subset>(data.train, first);
    }
    auto model = make_model(data.features, device, o.model);
    tiny::optim::Adam optimizer(model->parameters(), tiny::optim::AdamOptions{o.lr});

    auto images = std::make_shared<TrainingImages>(data.train, data.features);
    data.train = images;
    const bool pin = device.is_cuda();  // pinned memory only helps copies to a GPU
    auto train_loader =
        lesson4::make_loader(data.train, o.batch_size, /*shuffle=*/true, pin, o.workers, tiny::Generator(o.seed));
    auto test_loader = lesson4::make_loader(data.test, 1000, /*shuffle=*/false, pin, 0, tiny::Generator(o.seed));
    std::printf("data: %s, %lld train / %lld test images, batch size %lld, pin_memory=%s, num_workers=%d\n"
                "      loading a training image costs the host %.1f us (declared: decoding and augmenting it)\n%s\n",
                data.name.c_str(), static_cast<long long>(data.train->size()),
                static_cast<long long>(data.test->size()), static_cast<long long>(o.batch_size), pin ? "true" : "false",
                o.workers, images->load_us_per_example(),
                [&] { std::ostringstream s; s << *model; return s.str(); }().c_str());

    const lesson4::EvalResult before = lesson4::evaluate(*model, *test_loader, device);
    std::printf("before training     test loss %.4f  test accuracy %5.2f%%\n", before.loss, 100.0 * before.accuracy);
    for (int epoch = 1; epoch <= o.epochs; ++epoch) {
      if (device.is_cuda()) {
        tiny::cuda::synchronize(device.index());
        tiny::cuda::reset_device_counters(device.index());
      }
      const auto cpu_start = std::chrono::steady_clock::now();
      std::optional<tiny::profiler::profile> prof;
      if (modelled) prof.emplace();  // to say what the modelled time was made of
      const double start = device.is_cuda() ? tiny::cuda::host_time() : 0.0;
      tiny::ProgressBar bar(static_cast<int64_t>(train_loader->size()), "epoch " + std::to_string(epoch));
      images->show(&bar);
      const double train_loss = lesson4::train_one_epoch(*model, *train_loader, optimizer, device);
      images->show(nullptr);
      bar.finish();
      const tiny::cuda::DeviceCounters c =
          device.is_cuda() ? tiny::cuda::device_counters(device.index()) : tiny::cuda::DeviceCounters{};
      if (device.is_cuda()) tiny::cuda::synchronize(device.index());
      const double ms = device.is_cuda() ? (tiny::cuda::host_time() - start) * 1e3 : 0.0;
      if (prof) prof->stop();
      const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - cpu_start).count();
      const lesson4::EvalResult test = lesson4::evaluate(*model, *test_loader, device);
      std::printf("epoch %d/%d  train loss %.4f  test loss %.4f  test accuracy %5.2f%%  (this CPU: %.1f s)\n", epoch,
                  o.epochs, train_loss, test.loss, 100.0 * test.accuracy, seconds);
      if (prof) {
        print_epoch_time(ms, train_loader->size(), lesson4_checks::epoch_profile(prof->chrome_trace()), c, gpu);
      } else if (device.is_cuda()) {
        std::printf("    %.1f ms on %s (host time); copied in %.1f MB from pinned memory, %.1f MB from pageable; "
                    "the host waited for the GPU %llu times\n",
                    ms, device.str().c_str(), c.bytes_host_to_device_pinned / 1e6,
                    c.bytes_host_to_device_pageable / 1e6, static_cast<unsigned long long>(c.synchronizations));
      }
    }
    if (modelled && o.habits) print_habits(images, data.features, o, device, gpu);
  } catch (const tiny::NotImplemented& e) {
    std::printf("%s\n(fill in lessons/4_full_loop/exercise.cpp, then run ./workbook check 4)\n", e.what());
    return 1;
  } catch (const tiny::Error& e) {
    std::printf("error: %s\n", e.what());
    return 1;
  }
  return 0;
}
