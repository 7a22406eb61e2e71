// Lesson 6 demo: train an MLP on the 8x8 digits (data/digits) with your
// DistributedDataParallel training function, one process per GPU; then the
// speed story: one training step on 1 GPU, with DataParallel on 2 and with DDP
// on 2 ranks, and how DDP's bucket size decides how much of its all-reduces
// hides under backward.
//   ./workbook run 6                 (a rank per GPU: 2 on emulated GPUs; 10 epochs, batch size 64 per rank)
//   ./workbook run 6 --speed-only    (only the step times; the README's tables)
// Started without RANK in the environment, the demo starts itself again under
//   tinyrun --nproc-per-node N <this program> <options>
// which is what you would type yourself (and what torchrun does in PyTorch),
// once for the training and once for the step times.
// Options: --nproc N (ranks, default one per real GPU, else 2), --epochs N, --batch-size B, --lr LR, --seed S,
//          --speed-only, --width W (the speed MLP's width, default 1024), --speed-batch B (per GPU, default 1024)
// On the emulated GPU the step times are modelled: how long the steps would
// take on the GPU named by TINY_EMULATED_GPU_MODEL (default h100-sxm; also
// h200, a100-sxm, l4, t4). On a real GPU they are measured.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <algorithm>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include <CLI/CLI.hpp>
#include "../common/demo_flags.h"  // at_least() and positive(): the checks on the flags below

#include "exercise.h"

namespace nn = tiny::nn;
namespace F = tiny::nn::functional;
namespace dist = tiny::distributed;
namespace fs = std::filesystem;

namespace {

struct Options {
  int nproc = 0;  // 0: one rank per real GPU, else 2
  int epochs = 10;
  int64_t batch_size = 64;
  double lr = 0.1;
  uint64_t seed = 0;
  bool speed_only = false;  // only the step times
  bool speed_ranks = false; // (internal) this launch's ranks time the steps instead of training
  int64_t width = 1024;     // the speed MLP: Linear(W, W) x 4, then Linear(W, 10)
  int64_t speed_batch = 1024;  // examples per GPU in the step times
};

// Reads the options into `o`: -1 to go on, else the exit status (--help, or a bad option, which CLI11 names).
// The ranks tinyrun starts read the same words, and --speed-ranks, which the launch adds.
int parse(int argc, char** argv, Options& o) {
  CLI::App app{"Lesson 6 demo: DistributedDataParallel on N ranks (started with tinyrun), and the step times",
               "./workbook run 6"};
  app.add_option("--nproc", o.nproc, "ranks (default: one per real GPU, else 2)")->check(at_least(0));
  app.add_option("--epochs", o.epochs, "passes over the training set")->check(at_least(1))->capture_default_str();
  app.add_option("--batch-size", o.batch_size, "examples per step on each rank")->check(at_least(int64_t{1}))
      ->capture_default_str();
  app.add_option("--lr", o.lr, "SGD's learning rate")->check(positive())->capture_default_str();
  app.add_option("--seed", o.seed, "seed of the initial weights and the data")->capture_default_str();
  app.add_flag("--speed-only", o.speed_only, "only the step times (the README's tables)");
  app.add_option("--width", o.width, "the speed MLP's width")->check(at_least(int64_t{16}))
      ->capture_default_str();
  app.add_option("--speed-batch", o.speed_batch, "examples per GPU in the step times")
      ->check(at_least(int64_t{2}))->capture_default_str();
  app.add_flag("--speed-ranks", o.speed_ranks, "(internal) this launch's ranks time the steps")->group("");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;  // --help: 0; a bad flag: CLI11 names it, and the status is 2 as before
  }
  return -1;
}

// tinyrun: where CMake built it, else beside this program's build folder.
std::string tinyrun_path() {
#ifdef WORKBOOK_TINYRUN
  if (fs::exists(WORKBOOK_TINYRUN)) return WORKBOOK_TINYRUN;
#endif
  const fs::path self = fs::read_symlink("/proc/self/exe");
  return (self.parent_path().parent_path().parent_path() / "framework" / "tinyrun").string();
}

// "1 rank", "2 ranks" (and "1 GPU", "2 GPUs").
std::string count(int n, const char* noun) {
  return std::to_string(n) + " " + noun + (n == 1 ? "" : "s");
}

// Not started by tinyrun: run this program under it, N ranks (with `extra`
// arguments), and wait for it; returns its exit status.
int launch(int argc, char** argv, const Options& o, const std::string& extra) {
  const std::string tinyrun = tinyrun_path();
  const std::string self = fs::read_symlink("/proc/self/exe").string();
  std::vector<std::string> args{tinyrun, "--nproc-per-node", std::to_string(o.nproc), "--timeout", "60", self};
  for (int i = 1; i < argc; ++i) args.emplace_back(argv[i]);
  if (!extra.empty()) args.push_back(extra);
  std::printf("starting %s:", count(o.nproc, "rank").c_str());
  for (const auto& a : args) std::printf(" %s", a.c_str());
  std::printf("\n\n");
  std::fflush(stdout);
  std::vector<char*> c_args;
  for (auto& a : args) c_args.push_back(a.data());
  c_args.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::execv(tinyrun.c_str(), c_args.data());
    std::fprintf(stderr, "cannot start %s: build it with `cmake --build build/default --target tinyrun`\n",
                 tinyrun.c_str());
    ::_exit(127);
  }
  int status = 0;
  if (pid < 0 || ::waitpid(pid, &status, 0) != pid) return 1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

std::shared_ptr<nn::Module> make_mlp() {
  return std::make_shared<nn::Sequential>(std::make_shared<nn::Linear>(64, 128), std::make_shared<nn::ReLU>(),
                                          std::make_shared<nn::Linear>(128, 10));
}

// ---- the step times: 1 GPU, DataParallel on 2, DDP on 2 ranks -----------------------------

// The speed MLP: four Linear(W, W) with ReLU (16 MiB of weights at W = 1024), then Linear(W, 10).
std::shared_ptr<nn::Module> make_wide(int64_t width) {
  tiny::manual_seed(0);
  auto model = std::make_shared<nn::Sequential>();
  for (int i = 0; i < 4; ++i) {
    model->push_back(std::make_shared<nn::Linear>(width, width));
    model->push_back(std::make_shared<nn::ReLU>());
  }
  model->push_back(std::make_shared<nn::Linear>(width, 10));
  return model;
}

// ms of one step on tiny::cuda::host_time() (modelled on the emulated GPU:
// deterministic, so one step tells), after one step to warm up (the
// allocator's cache), ended by a synchronize of `devices`. With `trace`, the
// step's Chrome trace too.
double ms_per_step(const std::function<void()>& step, const std::vector<int>& devices, std::string* trace = nullptr) {
  step();
  for (int d : devices) tiny::cuda::synchronize(d);
  std::optional<tiny::profiler::profile> prof;
  if (trace != nullptr) prof.emplace();
  const double start = tiny::cuda::host_time();
  step();
  for (int d : devices) tiny::cuda::synchronize(d);
  const double ms = (tiny::cuda::host_time() - start) * 1e3;
  if (prof) {
    prof->stop();
    *trace = prof->chrome_trace();
  }
  return ms;
}

// One training step of `model` (plain, DataParallel or DDP) on x, y.
std::function<void()> train_step(nn::Module& model, tiny::optim::SGD& optimizer, const tiny::Tensor& x,
                                 const tiny::Tensor& y) {
  return [&model, &optimizer, x, y] {
    optimizer.zero_grad();
    F::cross_entropy(model(x), y).backward();
    optimizer.step();
  };
}

struct Overlap {
  double all_reduce_us = 0;  // the all-reduces' time, per step
  double hidden_us = 0;      // the part of it during which a compute kernel ran (backward, mostly)
};

// From one step's Chrome trace: how long the all-reduces ran, and how much of
// that the compute stream was busy too (sum of their intersections).
Overlap overlap_of(const std::string& chrome_trace, int steps) {
  const nlohmann::json trace = nlohmann::json::parse(chrome_trace);
  std::vector<std::pair<double, double>> reduces, kernels;
  for (const nlohmann::json& e : trace.at("traceEvents")) {
    if (e.value("ph", "") != "X" || e.value("cat", "") != "kernel") continue;
    const double ts = e.value("ts", 0.0), end = ts + e.value("dur", 0.0);
    (e.value("name", "").find("AllReduce") != std::string::npos ? reduces : kernels).emplace_back(ts, end);
  }
  Overlap o;
  for (const auto& r : reduces) {
    o.all_reduce_us += r.second - r.first;
    for (const auto& k : kernels) o.hidden_us += std::max(0.0, std::min(r.second, k.second) - std::max(r.first, k.first));
  }
  o.all_reduce_us /= steps;
  o.hidden_us /= steps;
  return o;
}

struct DdpRow {
  std::string label;
  size_t buckets = 0;
  double ms = 0;
  Overlap overlap;
};

// DDP's step with buckets of `cap_mb` (the first of `first_mb`), every rank on its own x, y.
DdpRow time_ddp(const std::string& label, double first_mb, double cap_mb, const Options& o,
                const tiny::Device& device, const tiny::Tensor& x, const tiny::Tensor& y) {
  auto model = make_wide(o.width);
  model->to(device);
  nn::parallel::DistributedDataParallelOptions options;
  options.first_bucket_cap_mb = first_mb;
  options.bucket_cap_mb = cap_mb;
  nn::parallel::DistributedDataParallel ddp(model, options);
  tiny::optim::SGD optimizer(ddp.parameters(), {0.01});
  const auto step = train_step(ddp, optimizer, x, y);
  std::string trace;
  DdpRow row{label, ddp.bucket_indices().size(), ms_per_step(step, {device.index()}, &trace), {}};
  row.overlap = overlap_of(trace, 1);
  return row;
}

// In every rank: DDP's step with three bucket sizes; then rank 0 alone times
// one GPU and DataParallel on two, and prints the tables.
int speed_ranks(const Options& o) {
  dist::init_process_group("gloo");
  const int rank = dist::get_rank(), world = dist::get_world_size();
  if (!tiny::cuda::is_available()) {
    if (rank == 0) std::printf("no GPU, real or emulated: the step times need one per rank\n");
    dist::destroy_process_group();
    return 0;
  }
  const tiny::Device device(tiny::kCUDA, dist::local_rank());
  tiny::cuda::set_device(device.index());
  tiny::Generator g(100 + static_cast<uint64_t>(rank));  // every rank its own examples
  const tiny::Tensor x = tiny::randn({o.speed_batch, o.width}, {}, g).to(device);
  const tiny::Tensor y = tiny::randint(0, 10, {o.speed_batch}, tiny::TensorOptions(tiny::kInt64), g).to(device);
  const double model_mb = static_cast<double>(4 * (o.width * o.width + o.width) + 10 * o.width + 10) * 4 / (1 << 20);
  std::vector<DdpRow> rows;
  rows.push_back(time_ddp("default (first 1 MiB, then 25 MiB)", 1, 25, o, device, x, y));
  rows.push_back(time_ddp("bucket_cap_mb=1", 1, 1, o, device, x, y));
  rows.push_back(time_ddp("one bucket (bucket_cap_mb=100)", 100, 100, o, device, x, y));
  dist::destroy_process_group();
  if (rank != 0) return 0;

  // Rank 0, on its own: the same step on one GPU, and DataParallel over this process's GPUs.
  const double one_ms = [&] {
    auto model = make_wide(o.width);
    model->to(device);
    tiny::optim::SGD optimizer(model->parameters(), {0.01});
    return ms_per_step(train_step(*model, optimizer, x, y), {device.index()});
  }();
  const int gpus = tiny::cuda::device_count();
  double dp_ms = 0;
  if (gpus >= world) {
    std::vector<int> ids;
    for (int d = 0; d < world; ++d) ids.push_back(d);
    auto model = make_wide(o.width);
    model->to(tiny::Device(tiny::kCUDA, 0));
    auto dp = std::make_shared<nn::DataParallel>(model, ids);
    tiny::optim::SGD optimizer(dp->parameters(), {0.01});
    tiny::Generator gd(7);
    const tiny::Tensor big_x = tiny::randn({o.speed_batch * world, o.width}, {}, gd).to(tiny::Device(tiny::kCUDA, 0));
    const tiny::Tensor big_y =
        tiny::randint(0, 10, {o.speed_batch * world}, tiny::TensorOptions(tiny::kInt64), gd).to(tiny::Device(tiny::kCUDA, 0));
    dp_ms = ms_per_step(train_step(*dp, optimizer, big_x, big_y), ids);
  }

  const std::string gpu = tiny::cuda::get_device_properties(device.index()).modelled_gpu;
  std::printf("one training step (SGD), ms, %s:\n",
              gpu.empty() ? "measured on this GPU" : ("modelled on the " + gpu + " (an estimate)").c_str());
  std::printf("MLP %lldx4 (%.1f MiB of weights), batch %lld per GPU\n", static_cast<long long>(o.width), model_mb,
              static_cast<long long>(o.speed_batch));
  std::printf("%-36s %9s %12s %9s\n", "", "ms/step", "examples/ms", "scaling");
  const double one_rate = static_cast<double>(o.speed_batch) / one_ms;
  const auto line = [&](const std::string& what, double ms, int64_t examples) {
    const double rate = static_cast<double>(examples) / ms;
    std::printf("%-36s %9.3f %12.1f %8.2fx\n", what.c_str(), ms, rate, rate / one_rate);
  };
  line("1 GPU", one_ms, o.speed_batch);
  if (dp_ms > 0) line("DataParallel, " + count(world, "GPU") + ", 1 process", dp_ms, o.speed_batch * world);
  line("DDP, " + count(world, "rank") + " (default buckets)", rows[0].ms, o.speed_batch * world);
  std::printf("\nDDP's buckets: each all-reduce starts when its bucket is full\n");
  std::printf("%-36s %7s %8s %11s %12s\n", "", "buckets", "ms/step", "all-reduce", "hidden under");
  std::printf("%-36s %7s %8s %11s %12s\n", "", "", "", "us/step", "backward, us");
  for (const DdpRow& r : rows) {
    std::printf("%-36s %7zu %8.3f %11.1f %12.1f\n", r.label.c_str(), r.buckets, r.ms, r.overlap.all_reduce_us,
                r.overlap.hidden_us);
  }
  std::fflush(stdout);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  const int parsed = parse(argc, argv, o);
  if (parsed >= 0) return parsed;
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
    } else if (!real && tiny::cuda::is_available() && o.nproc > tiny::cuda::device_count()) {
      // Each rank takes cuda:LOCAL_RANK, so --nproc N needs N emulated GPUs.
      const int emulated = tiny::cuda::device_count();
      std::fprintf(stderr,
                   "--nproc %d: each rank takes the GPU of its LOCAL_RANK (cuda:0 to cuda:%d) and there are %s "
                   "(TINY_EMULATED_GPUS=%d%s). Set TINY_EMULATED_GPUS to the number of ranks: "
                   "TINY_EMULATED_GPUS=%d ./workbook run 6 --nproc %d\n",
                   o.nproc, o.nproc - 1, count(emulated, "emulated GPU").c_str(), emulated,
                   std::getenv("TINY_EMULATED_GPUS") == nullptr ? ", the default" : "", o.nproc, o.nproc);
      return 2;
    } else if (real && o.nproc > gpus) {
      std::fprintf(stderr, "--nproc %d: each rank needs a GPU of its own and this machine has %d (%s). Use --nproc %d, "
                           "or 2 emulated GPUs: TINY_FORCE_EMULATED_GPU=1 ./workbook run 6 --nproc %d\n",
                   o.nproc, gpus, tiny::cuda::get_device_name(0).c_str(), gpus, o.nproc);
      return 2;
    }
    if (!o.speed_only) {
      const int status = launch(argc, argv, o, "");
      if (status != 0) return status;
      std::printf("\n");
    }
    return launch(argc, argv, o, "--speed-ranks");
  }
  if (o.speed_ranks) {
    try {
      return speed_ranks(o);
    } catch (const tiny::Error& e) {
      std::fprintf(stderr, "error: %s\n", e.what());
      return 1;
    }
  }

  const int rank = std::atoi(std::getenv("RANK"));
  const int world = std::atoi(std::getenv("WORLD_SIZE") ? std::getenv("WORLD_SIZE") : "1");
  try {
    auto train_set = std::make_shared<tiny::data::Digits>("", true);
    // One file per user: two students on one machine do not overwrite each other's.
    const std::string checkpoint =
        (fs::temp_directory_path() / ("lesson6_ddp_digits-" + std::to_string(::getuid()) + ".safetensors")).string();
    if (rank == 0) {
      std::printf("%s, %lld training digits: each rank trains on its own %lld per epoch, batch size %lld per "
                  "rank (%lld in all)\n",
                  count(world, "rank").c_str(), static_cast<long long>(train_set->size()),
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
    // On the modelled clock, as the step times above: tiny::cuda::host_time() after the GPU finished.
    const bool gpu = tiny::cuda::is_available() && tiny::cuda::device_count() > 0;
    const double start = tiny::cuda::host_time();
    const std::vector<double> losses = lesson6::train(options);
    if (gpu) tiny::cuda::synchronize();
    const double seconds = tiny::cuda::host_time() - start;
    const std::string clock = !gpu                        ? "this CPU's clock"
                              : tiny::cuda::is_emulated(0) ? "modelled on the " + tiny::cuda::get_device_properties(0).modelled_gpu
                                                           : "measured on the GPU's host";

    if (rank == 0) {
      // Load the checkpoint into a plain model, without DDP or a process group, and evaluate it.
      auto model = make_mlp();
      model->load_state_dict(tiny::load(checkpoint));
      model->eval();
      tiny::data::Digits test_set("", false);
      tiny::NoGradGuard no_grad;
      const tiny::Tensor predictions = (*model)(test_set.data()).argmax(1);
      const double accuracy = predictions.eq(test_set.targets()).to(tiny::kFloat64).mean().item<double>();
      std::printf("\ntrained in %.3f s (%s); loss %.4f -> %.4f\n", seconds, clock.c_str(), losses.front(),
                  losses.back());
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
