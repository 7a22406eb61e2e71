// Lesson 6 demo: train an MLP on the 8x8 digits (data/digits) with your
// DistributedDataParallel training function, one process per GPU.
//   ./workbook run 6                 (a rank per GPU: 2 on emulated GPUs; 10 epochs, batch size 64 per rank)
// Started without RANK in the environment, the demo starts itself again under
//   tinyrun --nproc-per-node N <this program> <options>
// which is what you would type yourself (and what torchrun does in PyTorch).
// Options: --nproc N (ranks, default one per real GPU, else 2), --epochs N, --batch-size B, --lr LR, --seed S
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "exercise.h"

namespace nn = tiny::nn;
namespace fs = std::filesystem;

namespace {

struct Options {
  int nproc = 0;  // 0: one rank per real GPU, else 2
  int epochs = 10;
  int64_t batch_size = 64;
  double lr = 0.1;
  uint64_t seed = 0;
};

bool parse(int argc, char** argv, Options& o) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "-h" || arg == "--help" || i + 1 >= argc) return false;
    const char* value = argv[++i];
    if (arg == "--nproc") o.nproc = std::atoi(value);
    else if (arg == "--epochs") o.epochs = std::atoi(value);
    else if (arg == "--batch-size") o.batch_size = std::atoll(value);
    else if (arg == "--lr") o.lr = std::atof(value);
    else if (arg == "--seed") o.seed = std::strtoull(value, nullptr, 10);
    else return false;
  }
  return o.nproc >= 0 && o.epochs >= 1 && o.batch_size >= 1 && o.lr > 0;
}

// tinyrun: where CMake built it, else beside this program's build folder.
std::string tinyrun_path() {
#ifdef WORKBOOK_TINYRUN
  if (fs::exists(WORKBOOK_TINYRUN)) return WORKBOOK_TINYRUN;
#endif
  const fs::path self = fs::read_symlink("/proc/self/exe");
  return (self.parent_path().parent_path().parent_path() / "framework" / "tinyrun").string();
}

// Not started by tinyrun: start this program again under it, N ranks.
int relaunch(int argc, char** argv, const Options& o) {
  const std::string tinyrun = tinyrun_path();
  const std::string self = fs::read_symlink("/proc/self/exe").string();
  std::vector<std::string> args{tinyrun, "--nproc-per-node", std::to_string(o.nproc), "--timeout", "60", self};
  for (int i = 1; i < argc; ++i) args.emplace_back(argv[i]);
  std::printf("starting %d ranks:", o.nproc);
  for (const auto& a : args) std::printf(" %s", a.c_str());
  std::printf("\n\n");
  std::fflush(stdout);
  std::vector<char*> c_args;
  for (auto& a : args) c_args.push_back(a.data());
  c_args.push_back(nullptr);
  ::execv(tinyrun.c_str(), c_args.data());
  std::fprintf(stderr, "cannot start %s: build it with `cmake --build build/default --target tinyrun`\n", tinyrun.c_str());
  return 1;
}

std::shared_ptr<nn::Module> make_mlp() {
  return std::make_shared<nn::Sequential>(std::make_shared<nn::Linear>(64, 128), std::make_shared<nn::ReLU>(),
                                          std::make_shared<nn::Linear>(128, 10));
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (!parse(argc, argv, o)) {
    std::fprintf(stderr, "usage: %s [--nproc N] [--epochs N] [--batch-size B] [--lr LR] [--seed S]\n", argv[0]);
    return 2;
  }
  if (std::getenv("RANK") == nullptr) {
    // Each rank takes the GPU of its LOCAL_RANK: on real GPUs, one rank per GPU
    // (as torchrun users pass --nproc-per-node with their GPU count); emulated
    // GPUs can be as many as the ranks.
    const bool real = tiny::cuda::is_available() && !tiny::cuda::is_emulated(0);
    const int gpus = real ? tiny::cuda::device_count() : 0;
    if (o.nproc == 0) {
      o.nproc = real ? gpus : 2;
      if (real && gpus < 2) {
        std::printf("this machine has one GPU (%s): starting 1 rank. For 2 ranks on 2 emulated GPUs: "
                    "TINY_FORCE_EMULATED_GPU=1 ./workbook run 6\n", tiny::cuda::get_device_name(0).c_str());
      }
    } else if (real && o.nproc > gpus) {
      std::fprintf(stderr, "--nproc %d: each rank needs a GPU of its own and this machine has %d (%s). Use --nproc %d, "
                           "or 2 emulated GPUs: TINY_FORCE_EMULATED_GPU=1 ./workbook run 6 --nproc %d\n",
                   o.nproc, gpus, tiny::cuda::get_device_name(0).c_str(), gpus, o.nproc);
      return 2;
    }
    return relaunch(argc, argv, o);
  }

  const int rank = std::atoi(std::getenv("RANK"));
  const int world = std::atoi(std::getenv("WORLD_SIZE") ? std::getenv("WORLD_SIZE") : "1");
  try {
    auto train_set = std::make_shared<tiny::data::Digits>("", true);
    const std::string checkpoint = (fs::temp_directory_path() / "lesson6_ddp_digits.safetensors").string();
    if (rank == 0) {
      std::printf("%d ranks, %lld training digits: each rank trains on its own %lld per epoch, batch size %lld per "
                  "rank (%lld in all)\n",
                  world, static_cast<long long>(train_set->size()),
                  static_cast<long long>((train_set->size() + world - 1) / world),
                  static_cast<long long>(o.batch_size), static_cast<long long>(o.batch_size * world));
      std::fflush(stdout);
    }
    lesson6::TrainOptions options;
    options.dataset = train_set;
    options.make_model = [&o]() {
      tiny::manual_seed(o.seed);  // DDP copies rank 0's weights anyway
      return make_mlp();
    };
    options.epochs = o.epochs;
    options.batch_size = o.batch_size;
    options.lr = o.lr;
    options.seed = o.seed;
    options.checkpoint = checkpoint;
    const auto start = std::chrono::steady_clock::now();
    const std::vector<double> losses = lesson6::train(options);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

    if (rank == 0) {
      // Load the checkpoint into a plain model, without DDP or a process group, and evaluate it.
      auto model = make_mlp();
      model->load_state_dict(tiny::load(checkpoint));
      model->eval();
      tiny::data::Digits test_set("", false);
      tiny::NoGradGuard no_grad;
      const tiny::Tensor predictions = (*model)(test_set.data()).argmax(1);
      const double accuracy = predictions.eq(test_set.targets()).to(tiny::kFloat64).mean().item<double>();
      std::printf("\ntrained in %.2f s (host timing); loss %.4f -> %.4f\n", seconds, losses.front(), losses.back());
      std::printf("rank 0 saved %s; loaded into a plain model: test accuracy %.1f%% on %lld digits\n",
                  checkpoint.c_str(), 100 * accuracy, static_cast<long long>(test_set.size()));
    }
  } catch (const tiny::NotImplemented& e) {
    if (rank == 0) std::printf("%s\nFill in lessons/6_ddp/exercise.cpp.\n", e.what());
    return 0;  // every rank stops at the same stub: nothing failed
  } catch (const tiny::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
