// Lesson 4 demo: train a 784-512-256-10 MLP on Fashion-MNIST on the GPU, with your loop.
//   ./workbook run 4                          (3 epochs over the 60,000 training images)
//   ./workbook run 4 --epochs 1 --limit 5000  (a quick look: 5,000 training images)
//   ./workbook run 4 --device cpu             (the same on the CPU, without pinned memory)
//   ./workbook run 4 --dataset digits         (the small 8x8 digits shipped in data/digits, 20 epochs)
//   ./workbook run 4 --model cnn              (a small convolutional network instead: your loop trains it too)
// Options: --epochs N, --limit N (training examples, 0 = all), --batch-size B, --lr LR,
//          --seed S, --device auto|cpu|cuda:N, --dataset fashion-mnist|digits, --model mlp|cnn
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <numeric>
#include <sstream>
#include <string>

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
    if (arg == "--epochs") o.epochs = std::atoi(value);
    else if (arg == "--limit") o.limit = std::atoll(value);
    else if (arg == "--batch-size") o.batch_size = std::atoll(value);
    else if (arg == "--lr") o.lr = std::atof(value);
    else if (arg == "--seed") o.seed = std::strtoull(value, nullptr, 10);
    else if (arg == "--device") o.device = value;
    else if (arg == "--dataset") o.dataset = value;
    else if (arg == "--model") o.model = value;
    else {
      std::fprintf(stderr, "unknown option %s\n", arg.c_str());
      return false;
    }
  }
  if (o.epochs < 0 || o.batch_size < 1 || o.limit < 0 || !(o.lr > 0)) {
    std::fprintf(stderr, "--epochs and --batch-size must be >= 1, --limit >= 0, --lr > 0\n");
    return false;
  }
  if (o.model != "mlp" && o.model != "cnn") {
    std::fprintf(stderr, "--model is mlp or cnn\n");
    return false;
  }
  if (o.dataset != "fashion-mnist" && o.dataset != "digits") {
    std::fprintf(stderr, "--dataset is fashion-mnist or digits\n");
    return false;
  }
  return true;
}

// The training set, counting the batches the loader takes from it, so that a
// progress bar (drawn on a terminal only) follows your train_one_epoch.
class WithProgress : public tiny::data::Dataset {
 public:
  explicit WithProgress(std::shared_ptr<tiny::data::Dataset> inner) : inner_(std::move(inner)) {}
  int64_t size() const override { return inner_->size(); }
  tiny::data::Example get(int64_t index) const override { return inner_->get(index); }
  tiny::data::Batch get_batch(const std::vector<int64_t>& indices) const override {
    if (tiny::ProgressBar* bar = bar_) bar->step();
    return inner_->get_batch(indices);
  }
  void show(tiny::ProgressBar* bar) { bar_ = bar; }

 private:
  std::shared_ptr<tiny::data::Dataset> inner_;
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

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (!parse(argc, argv, o)) {
    std::fprintf(stderr, "usage: %s [--epochs N] [--limit N] [--batch-size B] [--lr LR] [--seed S] "
                         "[--device auto|cpu|cuda:N] [--dataset fashion-mnist|digits] [--model mlp|cnn]\n", argv[0]);
    return 2;
  }
  try {
    tiny::manual_seed(o.seed);
    const tiny::Device device = pick_device(o.device);
    if (device.is_cuda()) std::printf("%s\n", tiny::cuda::device_banner(device).c_str());
    else std::printf("device: cpu (%d threads)\n", tiny::get_num_threads());

    Data data = load(o.dataset);
    if (o.epochs == 0) o.epochs = data.features == 784 ? 3 : 20;
    if (o.limit > 0 && o.limit < data.train->size()) {
      std::vector<int64_t> first(static_cast<size_t>(o.limit));
      std::iota(first.begin(), first.end(), 0);
      data.train = std::make_shared<tiny::data::Subset>(data.train, first);
    }
    // The tutorial's MLP for 28x28 images; a smaller one sized to the 8x8 digits.
    const int64_t h1 = data.features == 784 ? 512 : 128, h2 = data.features == 784 ? 256 : 64;
    auto model = o.model == "cnn"
                     ? make_cnn(data.features)
                     : std::make_shared<nn::Sequential>(
                           std::make_shared<nn::Linear>(data.features, h1), std::make_shared<nn::ReLU>(),
                           std::make_shared<nn::Dropout>(0.2), std::make_shared<nn::Linear>(h1, h2),
                           std::make_shared<nn::ReLU>(), std::make_shared<nn::Dropout>(0.2),
                           std::make_shared<nn::Linear>(h2, 10));
    model->to(device);
    tiny::optim::Adam optimizer(model->parameters(), tiny::optim::AdamOptions{o.lr});

    auto counted = std::make_shared<WithProgress>(data.train);
    data.train = counted;
    const bool pin = device.is_cuda();  // pinned memory only helps copies to a GPU
    auto train_loader = lesson4::make_loader(data.train, o.batch_size, /*shuffle=*/true, pin, tiny::Generator(o.seed));
    auto test_loader = lesson4::make_loader(data.test, 1000, /*shuffle=*/false, pin, tiny::Generator(o.seed));
    std::printf("data: %s, %lld train / %lld test images, batch size %lld, pin_memory=%s\n%s\n", data.name.c_str(),
                static_cast<long long>(data.train->size()), static_cast<long long>(data.test->size()),
                static_cast<long long>(o.batch_size), pin ? "true" : "false",
                [&] { std::ostringstream s; s << *model; return s.str(); }().c_str());

    const lesson4::EvalResult before = lesson4::evaluate(*model, *test_loader, device);
    std::printf("before training     test loss %.4f  test accuracy %5.2f%%\n", before.loss, 100.0 * before.accuracy);
    for (int epoch = 1; epoch <= o.epochs; ++epoch) {
      if (device.is_cuda()) tiny::cuda::reset_device_counters(device.index());
      const auto start = std::chrono::steady_clock::now();
      tiny::ProgressBar bar(static_cast<int64_t>(train_loader->size()), "epoch " + std::to_string(epoch));
      counted->show(&bar);
      const double train_loss = lesson4::train_one_epoch(*model, *train_loader, optimizer, device);
      counted->show(nullptr);
      bar.finish();
      const tiny::cuda::DeviceCounters c =
          device.is_cuda() ? tiny::cuda::device_counters(device.index()) : tiny::cuda::DeviceCounters{};
      if (device.is_cuda()) tiny::cuda::synchronize(device.index());
      const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      const lesson4::EvalResult test = lesson4::evaluate(*model, *test_loader, device);
      std::printf("epoch %d/%d  train loss %.4f  test loss %.4f  test accuracy %5.2f%%  %.1f s (host time)\n", epoch,
                  o.epochs, train_loss, test.loss, 100.0 * test.accuracy, seconds);
      if (device.is_cuda()) {
        std::printf("    training copied to %s: %.1f MB from pinned memory, %.1f MB from pageable memory; "
                    "the host waited for the GPU %llu times\n",
                    device.str().c_str(), c.bytes_host_to_device_pinned / 1e6, c.bytes_host_to_device_pageable / 1e6,
                    static_cast<unsigned long long>(c.synchronizations));
      }
    }
  } catch (const tiny::NotImplemented& e) {
    std::printf("%s\n(fill in lessons/4_full_loop/exercise.cpp, then run ./workbook check 4)\n", e.what());
    return 1;
  } catch (const tiny::Error& e) {
    std::printf("error: %s\n", e.what());
    return 1;
  }
  return 0;
}
