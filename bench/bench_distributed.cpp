// Several processes on one machine: DistributedDataParallel's training step and
// the all-reduce bandwidth of tiny's Gloo path against Gloo called directly.
//
// Every benchmark forks N rank processes of this program (hidden mode
// `--rank MODE BYTES RANK WORLD DIR OUT`, a fresh file:// rendezvous directory
// per run); rank 0 times the work itself and writes seconds per iteration to
// OUT, which the parent reports as manual time (one Google Benchmark iteration
// per run: the repetitions happen inside the ranks). A rank that fails or runs
// past kRunLimit is killed and the benchmark is skipped with its stderr, never
// a hang (the ranks' collectives also time out, after kGlooTimeout); after one
// failure every later benchmark is skipped with that message, so a broken build
// costs one kRunLimit at most, not one per benchmark.
//
// Benchmarks:
//   PlainStep/B              MLP B (bench/training_cases.h: 1024-2048-512-10, batch 128, Adam)
//                            without DDP, in one forked process: the baseline
//   DdpStep/B/ranks:N        the same step under DistributedDataParallel, N = 1, 2 ranks,
//                            each with its own batch of 128 (per-rank batch fixed: weak scaling);
//                            samples/s counts every rank's samples
//   TinyAllReduce/bytes:S    tiny::distributed::all_reduce (SUM) of a float32 CPU tensor of S bytes
//   GlooRing/bytes:S         gloo::AllreduceRing<float> on the same bytes, with its own Gloo
//                            context (FileStore rendezvous, TCP on 127.0.0.1), 2 ranks
//   GlooAllreduce/bytes:S    gloo::allreduce (the algorithm tiny's path calls) the same way:
//                            TinyAllReduce minus it is tiny's own overhead
// Each benchmark forks its ranks 3 times (repetitions) and reports mean, median,
// stddev and cv; read the median on a shared machine.
// Bandwidth: GB/s = bytes / time (algorithm bandwidth); busGB/s = 2 (N-1)/N of it,
// the bytes each rank really sends (NCCL's convention).
//
// Threads: every rank gets TINY_NUM_THREADS=1 unless the variable is set, so that
// 2 ranks fit on 2 cores; set it to compare other splits.
#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gloo/allreduce.h>
#include <gloo/allreduce_ring.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/transport/tcp/device.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tiny/distributed/distributed.h"
#include "tiny/nn/nn.h"
#include "tiny/nn/parallel/distributed.h"
#include "tiny/ops.h"
#include "tiny/optim/optim.h"
#include "tiny/tensor.h"
#include "training_cases.h"

namespace {

namespace dist = tiny::distributed;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr auto kRunLimit = std::chrono::seconds(20);     // per run, all ranks
constexpr auto kGlooTimeout = std::chrono::seconds(15);  // rendezvous and collectives
constexpr int kWarmSteps = 3, kTimedSteps = 10;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// ---- the ranks ------------------------------------------------------------------
const bench::TrainingCase& case_b() {
  for (const auto& c : bench::training_cases())
    if (c.name == 'B') return c;
  throw std::runtime_error("training case B is missing from bench/training_cases.h");
}

// Seconds per training step of MLP B, with DDP when `ddp`.
double run_step(bool ddp) {
  const bench::TrainingCase& c = case_b();
  tiny::manual_seed(0);
  auto model = std::make_shared<tiny::nn::Sequential>();
  for (size_t i = 0; i + 1 < c.sizes.size(); ++i) {
    model->push_back(std::make_shared<tiny::nn::Linear>(c.sizes[i], c.sizes[i + 1]));
    if (i + 2 < c.sizes.size()) model->push_back(std::make_shared<tiny::nn::ReLU>());
  }
  std::shared_ptr<tiny::nn::Module> net = model;
  if (ddp) net = std::make_shared<tiny::nn::parallel::DistributedDataParallel>(model);
  tiny::optim::AdamOptions options;
  options.lr = bench::kAdamLr;
  tiny::optim::Adam optimizer(net->parameters(), options);
  tiny::nn::CrossEntropyLoss criterion;
  tiny::Tensor x = tiny::from_vector(bench::case_inputs(c), {c.batch, c.sizes.front()});
  tiny::Tensor y = tiny::from_vector(bench::case_labels(c), {c.batch});
  auto step = [&] {
    optimizer.zero_grad();
    criterion(net->forward(x), y).backward();
    optimizer.step();
  };
  for (int i = 0; i < kWarmSteps; ++i) step();
  if (ddp) dist::barrier();
  const auto start = Clock::now();
  for (int i = 0; i < kTimedSteps; ++i) step();
  return seconds_since(start) / kTimedSteps;
}

int reps_for(size_t bytes) { return bytes <= (1u << 20) ? 50 : 10; }

// Seconds per tiny::distributed::all_reduce of `bytes` bytes of float32.
double run_tiny_all_reduce(size_t bytes) {
  tiny::Tensor t = tiny::ones({static_cast<int64_t>(bytes / sizeof(float))});
  for (int i = 0; i < 3; ++i) dist::all_reduce(t);
  dist::barrier();
  const int reps = reps_for(bytes);
  const auto start = Clock::now();
  for (int i = 0; i < reps; ++i) dist::all_reduce(t);
  return seconds_since(start) / reps;
}

// Seconds per all-reduce of `bytes` bytes of float32 straight through Gloo, on a
// context of its own: gloo::AllreduceRing<float> (`ring`), else gloo::allreduce
// (the algorithm tiny's all_reduce calls, without tiny around it).
double run_gloo(bool ring, size_t bytes, int rank, int world, const std::string& dir) {
  gloo::rendezvous::FileStore store(dir + "/gloo_ring");
  auto context = std::make_shared<gloo::rendezvous::Context>(rank, world);
  context->setTimeout(kGlooTimeout);
  gloo::transport::tcp::attr attr;
  attr.hostname = "127.0.0.1";  // as tiny does for a rendezvous on this machine
  auto device = gloo::transport::tcp::CreateDevice(attr);
  context->connectFullMesh(store, device);
  std::vector<float> data(bytes / sizeof(float), 1.0f);
  std::function<void()> run;
  std::unique_ptr<gloo::AllreduceRing<float>> algorithm;
  gloo::AllreduceOptions options(context);
  if (ring) {
    algorithm = std::make_unique<gloo::AllreduceRing<float>>(context, std::vector<float*>{data.data()},
                                                             static_cast<int>(data.size()));
    run = [&] { algorithm->run(); };
  } else {
    options.setOutput(data.data(), data.size());
    options.setReduceFunction([](void* c, const void* a, const void* b, size_t n) { gloo::sum<float>(c, a, b, n); });
    options.setTag(1);
    options.setTimeout(kGlooTimeout);
    run = [&] { gloo::allreduce(options); };
  }
  for (int i = 0; i < 3; ++i) run();
  const int reps = reps_for(bytes);
  const auto start = Clock::now();
  for (int i = 0; i < reps; ++i) run();
  return seconds_since(start) / reps;
}

// The hidden `--rank` mode: argv = --rank MODE BYTES RANK WORLD DIR OUT.
int rank_main(int argc, char** argv) {
  if (argc != 8) {
    std::cerr << "usage: " << argv[0] << " --rank MODE BYTES RANK WORLD DIR OUT (started by the benchmark itself)\n";
    return 2;
  }
  const std::string mode = argv[2], dir = argv[6], out = argv[7];
  const size_t bytes = std::stoull(argv[3]);
  const int rank = std::stoi(argv[4]), world = std::stoi(argv[5]);
  try {
    double seconds = 0;
    if (mode == "plain") {
      seconds = run_step(false);
    } else if (mode == "gloo_ring" || mode == "gloo_allreduce") {
      seconds = run_gloo(mode == "gloo_ring", bytes, rank, world, dir);
    } else {
      dist::init_process_group("gloo", "file://" + dir + "/tiny", world, rank,
                               std::chrono::duration_cast<std::chrono::milliseconds>(kGlooTimeout));
      seconds = mode == "ddp" ? run_step(true) : run_tiny_all_reduce(bytes);
      dist::barrier();
      dist::destroy_process_group();
    }
    if (rank == 0) std::ofstream(out) << seconds << "\n";
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "rank " << rank << ": " << e.what() << "\n";
    return 1;
  }
}

// ---- the parent -----------------------------------------------------------------
std::string read_text(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Starts `world` ranks of MODE and returns rank 0's seconds per iteration, or
// sets `error` (a rank failed, or they ran past kRunLimit and were killed).
double run_ranks(const std::string& mode, size_t bytes, int world, std::string& error) {
  static int run = 0;
  const fs::path dir = fs::temp_directory_path() /
                       ("tiny_bench_dist_" + std::to_string(::getpid()) + "_" + std::to_string(run++));
  fs::remove_all(dir);
  fs::create_directories(dir / "tiny");
  fs::create_directories(dir / "gloo_ring");
  const fs::path out = dir / "result";
  std::vector<pid_t> pids;
  for (int r = 0; r < world; ++r) {
    std::vector<std::string> args = {"/proc/self/exe", "--rank", mode, std::to_string(bytes), std::to_string(r),
                                     std::to_string(world), dir.string(), out.string()};
    const std::string err = (dir / ("rank" + std::to_string(r) + ".err")).string();
    pid_t pid = ::fork();
    if (pid == 0) {
      int fd = ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (fd >= 0) ::dup2(fd, 2);
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
    if (pid < 0) {
      error = std::string("fork failed: ") + std::strerror(errno);
      break;
    }
    pids.push_back(pid);
  }
  // Wait for every rank; past the limit, kill the rest.
  const auto deadline = Clock::now() + kRunLimit;
  std::vector<bool> done(pids.size(), false);
  size_t left = pids.size();
  while (left > 0) {
    for (size_t i = 0; i < pids.size(); ++i) {
      if (done[i]) continue;
      int status = 0;
      if (::waitpid(pids[i], &status, WNOHANG) == pids[i]) {
        done[i] = true;
        --left;
        if (!(WIFEXITED(status) && WEXITSTATUS(status) == 0) && error.empty()) {
          std::string text = read_text(dir / ("rank" + std::to_string(i) + ".err"));
          error = "rank " + std::to_string(i) + " failed: " + (text.empty() ? "(no message)" : text);
        }
      }
    }
    if (left == 0) break;
    if (Clock::now() >= deadline) {
      for (size_t i = 0; i < pids.size(); ++i)
        if (!done[i]) {
          ::kill(pids[i], SIGKILL);
          ::waitpid(pids[i], nullptr, 0);
        }
      if (error.empty())
        error = mode + " with " + std::to_string(world) + " ranks ran past " + std::to_string(kRunLimit.count()) +
                " s and was killed";
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  double seconds = 0;
  if (error.empty()) {
    std::ifstream in(out);
    if (!(in >> seconds) || seconds <= 0) error = "rank 0 wrote no time to " + out.string();
  }
  std::error_code ignored;
  fs::remove_all(dir, ignored);
  return seconds;
}

// Runs the ranks once per benchmark iteration (the benchmark is registered with
// one iteration) and reports rank 0's time per step or per all-reduce.
bool measure(benchmark::State& state, const std::string& mode, size_t bytes, int world, double& seconds) {
  static std::string first_error;  // of any earlier run: skip the rest
  bool ok = true;
  for (auto _ : state) {
    std::string error;
    if (first_error.empty()) {
      try {
        seconds = run_ranks(mode, bytes, world, error);
      } catch (const std::exception& e) {  // the rendezvous directory, fork
        error = e.what();
      }
    } else {
      error = "skipped after an earlier failure: " + first_error;
    }
    if (!error.empty()) {
      if (first_error.empty()) first_error = error;
      state.SkipWithError(error.c_str());
      ok = false;
      break;
    }
    state.SetIterationTime(seconds);
  }
  state.counters["ranks"] = world;
  return ok;
}

void step_benchmark(benchmark::State& state, const std::string& mode, int world) {
  double seconds = 0;
  if (!measure(state, mode, 0, world, seconds)) return;
  state.counters["samples/s"] = static_cast<double>(case_b().batch) * world / seconds;
}

void all_reduce_benchmark(benchmark::State& state, const std::string& mode, size_t bytes, int world) {
  double seconds = 0;
  if (!measure(state, mode, bytes, world, seconds)) return;
  const double algbw = static_cast<double>(bytes) / seconds / 1e9;
  state.counters["GB/s"] = algbw;
  state.counters["busGB/s"] = algbw * 2.0 * (world - 1) / world;
}

void register_all() {
  auto add = [](const std::string& name, auto fn) {
    benchmark::RegisterBenchmark(name.c_str(), fn)->Iterations(1)->Repetitions(3)->ReportAggregatesOnly(true)->UseManualTime()->Unit(
        benchmark::kMillisecond);
  };
  add("PlainStep/B", [](benchmark::State& s) { step_benchmark(s, "plain", 1); });
  for (int world : {1, 2})
    add("DdpStep/B/ranks:" + std::to_string(world), [world](benchmark::State& s) { step_benchmark(s, "ddp", world); });
  for (size_t mib : {1, 25}) {
    const size_t bytes = mib << 20;
    add("TinyAllReduce/bytes:" + std::to_string(bytes),
        [bytes](benchmark::State& s) { all_reduce_benchmark(s, "tiny_all_reduce", bytes, 2); });
    add("GlooRing/bytes:" + std::to_string(bytes),
        [bytes](benchmark::State& s) { all_reduce_benchmark(s, "gloo_ring", bytes, 2); });
    add("GlooAllreduce/bytes:" + std::to_string(bytes),
        [bytes](benchmark::State& s) { all_reduce_benchmark(s, "gloo_allreduce", bytes, 2); });
  }
}

}  // namespace

int main(int argc, char** argv) {
  ::setenv("TINY_NUM_THREADS", "1", /*overwrite=*/0);
  ::setenv("TINY_DIST_TIMEOUT", "15", 0);
  if (argc > 1 && std::strcmp(argv[1], "--rank") == 0) return rank_main(argc, argv);
  register_all();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
