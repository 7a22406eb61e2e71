// Lesson 6's glue. A check runs an exercise in one runner process (for a
// student, inside the grader's sandbox); the glue there starts the ranks itself:
//
//   tinyrun --nproc-per-node 2 --timeout 5 /bin/sh -c 'exec "$0" "$1" "$2" "$3/rank$RANK"'
//           /proc/self/fd/N rank_<exercise> ranks/in ranks/out
//
// (N: this runner, opened and inherited: its path may be out of a sandbox's
// reach) so every rank is this same program in its hidden rank mode (the exercises
// named rank_*), in the same sandbox, and writes its own results (status,
// values, tensors) to ranks/out/rank<R>. The parent collects them into its own
// results: `ranks` (each rank's status and message), `rank_values` (each
// rank's values), tensors as `rank<R>.<name>`, and what each rank printed
// (`stdout`). A stub in any rank makes the whole exercise "not done yet".
// tinyrun's path comes from the checker (in.values["tinyrun"]).
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <optional>
#include <sstream>
#include <thread>

#include "exercise.h"
#include "harness/runner.h"
#include "model.h"

extern char** environ;

namespace fs = std::filesystem;
namespace dist = tiny::distributed;
namespace F = tiny::nn::functional;
using lesson6_checks::RecordingDataset;

namespace {

constexpr const char* kCollectiveTimeout = "5";  // seconds a collective (or the rendezvous) may wait
constexpr double kLaunchDeadline = 20;           // seconds for a whole launch

// ---- the parent: start the ranks, collect their results --------------------------------

int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  TINY_CHECK(fd >= 0, Error, "lesson 6 glue: cannot open a socket to find a free port");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof addr;
  const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
                  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0;
  ::close(fd);
  TINY_CHECK(ok, Error, "lesson 6 glue: cannot bind a socket on 127.0.0.1 to find a free port");
  return ntohs(addr.sin_port);
}

// Starts argv with stdout and stderr to files; the child stays in our process
// group, so that whoever stops us stops it too.
// The ranks get 2 threads each for tiny's CPU work (tinyrun would give them
// cores / ranks): the model is tiny, and a student's run has a process limit.
pid_t spawn(const std::vector<std::string>& argv, const fs::path& out, const fs::path& err) {
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  std::vector<std::string> env_strings{"TINY_NUM_THREADS=2"};
  for (char** e = environ; *e != nullptr; ++e)
    if (std::string(*e).rfind("TINY_NUM_THREADS=", 0) != 0) env_strings.emplace_back(*e);
  std::vector<char*> envp;
  for (auto& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);
  const pid_t pid = ::fork();
  TINY_CHECK(pid >= 0, Error, "lesson 6 glue: fork failed");
  if (pid == 0) {
    const int o = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int e = ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (o >= 0) ::dup2(o, 1);
    if (e >= 0) ::dup2(e, 2);
    ::execve(args[0], args.data(), envp.data());
    ::_exit(127);
  }
  return pid;
}

std::string read_text(const fs::path& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// The last `count` lines of `text`.
std::string last_lines(const std::string& text, size_t count) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  std::string out;
  for (size_t i = lines.size() > count ? lines.size() - count : 0; i < lines.size(); ++i) out += lines[i] + "\n";
  return out;
}

// Runs the rank mode `rank_<exercise>` on nnodes x nproc ranks (one tinyrun per
// node) and gathers what they wrote into `out`.
void launch(const workbook::Bundle& in, workbook::Bundle& out, const std::string& exercise, int nnodes = 1,
            int nproc = lesson6_checks::kWorld) {
  TINY_CHECK(in.values.contains("tinyrun"), Error, "lesson 6 glue: the checker did not say where tinyrun is");
  const std::string tinyrun = in.values.at("tinyrun").get<std::string>();
  // This program, by a descriptor the ranks inherit: in a student's sandbox its
  // path may be out of reach, and every path must stay relative to our folder
  // (the folders above it are not ours).
  static const int self_fd = ::open("/proc/self/exe", O_RDONLY);
  TINY_CHECK(self_fd >= 0, Error, "lesson 6 glue: cannot open /proc/self/exe to start the ranks");
  const std::string self = "/proc/self/fd/" + std::to_string(self_fd);
  const fs::path base = "ranks";
  fs::remove_all(base);
  fs::create_directories(base / "out");
  workbook::Bundle rank_in = in;
  rank_in.values["ranks_dir"] = base.string();  // relative: the ranks work in our folder too
  rank_in.save(base / "in");

  const std::string port = nnodes > 1 ? std::to_string(free_port()) : "";
  std::vector<pid_t> pids;
  for (int node = 0; node < nnodes; ++node) {
    std::vector<std::string> argv{tinyrun, "--nproc-per-node", std::to_string(nproc), "--timeout", kCollectiveTimeout,
                                  "--stop-grace", "1"};
    if (nnodes > 1) {
      for (const std::string& a : {std::string("--nnodes"), std::to_string(nnodes), std::string("--node-rank"),
                                   std::to_string(node), std::string("--rdzv"), "tcp://127.0.0.1:" + port})
        argv.push_back(a);
    }
    for (const std::string& a : {std::string("/bin/sh"), std::string("-c"),
                                 std::string("exec \"$0\" \"$1\" \"$2\" \"$3/rank$RANK\""), self,
                                 "rank_" + exercise, (base / "in").string(), (base / "out").string()})
      argv.push_back(a);
    const std::string n = std::to_string(node);
    pids.push_back(spawn(argv, base / ("tinyrun" + n + ".out"), base / ("tinyrun" + n + ".err")));
  }

  // Wait for every tinyrun, stopping them at the deadline (a rank stuck outside
  // a collective), or a few seconds after a rank reported an error while
  // another one still runs (tinyrun sees a rank that threw as one that
  // finished: the runner caught the exception).
  using clock = std::chrono::steady_clock;
  auto deadline = clock::now() + std::chrono::duration<double>(kLaunchDeadline);
  auto next_look = clock::now();
  bool timed_out = false, cut_short = false;
  std::vector<int> status(pids.size(), 0);
  std::vector<bool> done(pids.size(), false);
  for (size_t left = pids.size(); left > 0;) {
    for (size_t i = 0; i < pids.size(); ++i) {
      if (done[i] || ::waitpid(pids[i], &status[i], WNOHANG) != pids[i]) continue;
      done[i] = true;
      --left;
    }
    if (left == 0) break;
    const auto now = clock::now();
    if (!cut_short && now >= next_look) {
      next_look = now + std::chrono::milliseconds(200);
      for (int r = 0; r < nnodes * nproc && !cut_short; ++r) {
        std::ifstream results(base / "out" / ("rank" + std::to_string(r)) / "values.json");
        std::string text((std::istreambuf_iterator<char>(results)), std::istreambuf_iterator<char>());
        if (text.find("\"_status\": \"error\"") == std::string::npos) continue;
        cut_short = true;  // the others get longer than a collective's timeout to say why they stopped
        deadline = std::min(deadline, now + std::chrono::duration<double>(std::atof(kCollectiveTimeout) + 2));
      }
    }
    if (now > deadline && !timed_out) {
      timed_out = true;
      for (size_t i = 0; i < pids.size(); ++i)
        if (!done[i]) ::kill(pids[i], SIGTERM);  // tinyrun passes it on to its ranks
    }
    if (now > deadline + std::chrono::seconds(5)) {
      for (size_t i = 0; i < pids.size(); ++i)
        if (!done[i]) ::kill(pids[i], SIGKILL);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }

  std::string launcher_log;
  std::vector<std::vector<std::string>> printed(static_cast<size_t>(nnodes * nproc));
  for (int node = 0; node < nnodes; ++node) {
    const std::string n = std::to_string(node);
    launcher_log += read_text(base / ("tinyrun" + n + ".err"));
    std::istringstream lines(read_text(base / ("tinyrun" + n + ".out")));
    for (std::string line; std::getline(lines, line);) {
      size_t r = 0, end = 0;
      if (line.rfind("[rank", 0) == 0 && (end = line.find("]: ")) != std::string::npos) {
        r = static_cast<size_t>(std::atoi(line.c_str() + 5));
        if (r < printed.size()) printed[r].push_back(line.substr(end + 3));
      }
    }
  }
  launcher_log = last_lines(launcher_log, 12);
  out.values["launcher_log"] = launcher_log;
  out.values["timed_out"] = timed_out;
  out.values["stdout"] = printed;

  nlohmann::json ranks = nlohmann::json::array(), values = nlohmann::json::array();
  std::string todo;
  for (int r = 0; r < nnodes * nproc; ++r) {
    const fs::path dir = base / "out" / ("rank" + std::to_string(r));
    nlohmann::json entry = {{"rank", r}};
    try {
      const workbook::Bundle rank_out = workbook::Bundle::load(dir);
      entry["status"] = rank_out.values.value("_status", "crash");
      entry["message"] = rank_out.values.value("_message", "");
      entry["error_type"] = rank_out.values.value("_error_type", "");
      nlohmann::json v = rank_out.values;
      for (const char* harness : {"_status", "_message", "_error_type", "_counters", "_elapsed_ms", "_tensors"})
        v.erase(harness);
      values.push_back(v);
      for (const std::string& name : rank_out.tensor_names())
        out.put("rank" + std::to_string(r) + "." + name, rank_out.tensor(name));
      if (entry["status"] == "todo" && todo.empty()) todo = entry["message"].get<std::string>();
    } catch (const std::exception&) {
      entry["status"] = "crash";
      entry["message"] = !timed_out ? "ended without writing its results"
                         : cut_short ? "was still running well after another rank had failed (stopped)"
                                     : "did not finish within " + std::to_string(static_cast<int>(kLaunchDeadline)) +
                                           " s (stopped)";
      entry["error_type"] = "";
      values.push_back(nlohmann::json::object());
    }
    ranks.push_back(entry);
  }
  out.values["ranks"] = ranks;
  out.values["rank_values"] = values;
  if (!todo.empty()) throw tiny::NotImplemented(todo);  // "not done yet: ..." as the rank said it
}

// ---- the ranks ----------------------------------------------------------------------------

// Leaves the process group if it is still there (also when an exercise threw),
// so that the other ranks get an error at once instead of waiting for a timeout.
struct LeaveGroup {
  ~LeaveGroup() {
    try {
      if (dist::is_initialized()) dist::destroy_process_group();
    } catch (...) {
    }
  }
};

int env_int(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::atoi(v) : -1;
}

// The glue's own setup, for the exercises that come after setup().
tiny::Device join_group() {
  dist::init_process_group("gloo");
  if (!tiny::cuda::is_available()) return tiny::Device("cpu");
  tiny::cuda::set_device(dist::local_rank());
  return tiny::Device(tiny::kCUDA, dist::local_rank());
}

std::shared_ptr<RecordingDataset> dataset_of(const workbook::Bundle& in) {
  return std::make_shared<RecordingDataset>(in.tensor("features"), in.tensor("labels"));
}

std::shared_ptr<tiny::nn::Sequential> model_of(const workbook::Bundle& in) {
  auto model = lesson6_checks::make_model();
  model->load_state_dict(in.state("init"));
  return model;
}

// What this rank's collectives were since the last reset, by kind: {"all_reduce": {"calls", "bytes"}, ...}.
nlohmann::json collectives() {
  const dist::CollectiveCounts c = dist::collective_counts();
  nlohmann::json out;
  const std::pair<const char*, const dist::CollectiveCount*> kinds[] = {
      {"all_reduce", &c.all_reduce}, {"broadcast", &c.broadcast}, {"all_gather", &c.all_gather},
      {"reduce_scatter", &c.reduce_scatter}, {"barrier", &c.barrier}};
  for (const auto& kind : kinds) out[kind.first] = {{"calls", kind.second->calls}, {"bytes", kind.second->bytes}};
  return out;
}

// This rank's part of the training examples: rows [rank x n, (rank + 1) x n) of n = examples / world.
tiny::data::Batch shard_of(const workbook::Bundle& in, int rank) {
  const int64_t n = lesson6_checks::kExamples / lesson6_checks::kWorld;
  return {in.tensor("features").narrow(0, rank * n, n).contiguous(),
          in.tensor("labels").narrow(0, rank * n, n).contiguous()};
}

// Sum of |g| over every gradient of `params` (the probes compare sizes of gradients).
double abs_sum(const std::vector<tiny::Tensor>& grads) {
  double sum = 0;
  for (const tiny::Tensor& g : grads)
    if (g.defined()) sum += g.abs().sum().item<double>();
  return sum;
}

// SGD that remembers the size of the gradients it stepped with the first time.
class RecordingSGD : public tiny::optim::SGD {
 public:
  RecordingSGD(std::vector<tiny::Tensor> params, double lr) : SGD(params, {lr}), params_(std::move(params)) {}
  void step() override {
    // The allocations that reached the device so far, at every step (the allocator check reads
    // those made between steps).
    if (device_ >= 0) step_mallocs_.push_back(tiny::cuda::device_counters(device_).device_mallocs);
    if (first_step_grads_ < 0) {
      std::vector<tiny::Tensor> grads;
      for (const tiny::Tensor& p : params_) grads.push_back(p.grad());
      first_step_grads_ = abs_sum(grads);
    }
    SGD::step();
  }
  double first_step_grads() const { return first_step_grads_; }
  void count_mallocs_on(int device) { device_ = device; }
  const std::vector<uint64_t>& step_mallocs() const { return step_mallocs_; }

 private:
  std::vector<tiny::Tensor> params_;
  double first_step_grads_ = -1;
  int device_ = -1;
  std::vector<uint64_t> step_mallocs_;
};

}  // namespace

// ---- the exercises as the checks call them (each starts the ranks) ----------------------

WORKBOOK_EXERCISE(setup) { launch(in, out, "setup", in.values.value("nnodes", 1), in.values.value("nproc", 2)); }
WORKBOOK_EXERCISE(make_loader) { launch(in, out, "make_loader"); }
WORKBOOK_EXERCISE(train_one_epoch) { launch(in, out, "train_one_epoch"); }
WORKBOOK_EXERCISE(all_reduce_mean) { launch(in, out, "all_reduce_mean"); }
WORKBOOK_EXERCISE(train) { launch(in, out, "train"); }
WORKBOOK_EXERCISE(average_gradients) { launch(in, out, "average_gradients"); }
WORKBOOK_EXERCISE(accumulation_step) { launch(in, out, "accumulation_step"); }

// The baseline (run with the reference only, one process): full-batch SGD on
// the whole data set, one step per epoch, from the same weights.
WORKBOOK_EXERCISE(train_single) {
  auto model = model_of(in);
  tiny::optim::SGD optimizer(model->parameters(), {in.values.at("lr").get<double>()});
  const tiny::Tensor x = in.tensor("features"), y = in.tensor("labels");
  nlohmann::json losses = nlohmann::json::array();
  for (int e = 0; e < in.values.at("epochs").get<int>(); ++e) {
    optimizer.zero_grad();
    const tiny::Tensor loss = F::cross_entropy((*model)(x), y);
    loss.backward();
    optimizer.step();
    losses.push_back(loss.item<double>());
  }
  out.values["losses"] = losses;
  out.put_state("final", model->state_dict());
}

// ---- the rank mode: one rank each, started by launch() -----------------------------------

// setup(backend): the device it chose, the group it joined, the current device.
WORKBOOK_EXERCISE(rank_setup) {
  LeaveGroup leave;
  out.values["env_rank"] = env_int("RANK");
  out.values["env_local_rank"] = env_int("LOCAL_RANK");
  const tiny::Device device = lesson6::setup(in.values.at("backend").get<std::string>());
  out.values["device"] = device.str();
  out.values["initialized"] = dist::is_initialized();
  if (dist::is_initialized()) {
    out.values["rank"] = dist::get_rank();
    out.values["world_size"] = dist::get_world_size();
  }
  out.values["current_device"] = tiny::cuda::is_available() ? tiny::cuda::current_device() : -1;
  out.values["collectives"] = collectives();  // init_process_group reset them
}

// average_gradients(model) after backward on this rank's half of the examples, then one SGD step;
// then, from the same weights on the same data, one step of DDP (the reference mechanism).
WORKBOOK_EXERCISE(rank_average_gradients) {
  LeaveGroup leave;
  const tiny::Device device = join_group();
  const int rank = dist::get_rank();
  const tiny::data::Batch shard = shard_of(in, rank);
  const tiny::Tensor x = shard.data.to(device), y = shard.target.to(device);
  const double lr = in.values.at("lr").get<double>();
  auto model = model_of(in);
  model->to(device);
  F::cross_entropy((*model)(x), y).backward();
  for (const auto& named : model->named_parameters()) out.put("local." + named.first, named.second.grad().cpu());
  dist::reset_collective_counts();
  if (device.is_cuda()) {  // the copies between this rank's GPU and the host, its own and gloo's staging
    tiny::cuda::synchronize(device.index());
    workbook::reset_device_counters(device.index());
  }
  lesson6::average_gradients(*model);
  out.values["collectives"] = collectives();
  if (device.is_cuda()) {
    const tiny::cuda::DeviceCounters c = tiny::cuda::device_counters(device.index());
    out.values["bytes_to_host"] = c.bytes_device_to_host_pageable + c.bytes_device_to_host_pinned;
    out.values["bytes_to_device"] = c.bytes_host_to_device_pageable + c.bytes_host_to_device_pinned;
  }
  out.values["parameters"] = static_cast<int64_t>(model->parameters().size());
  int64_t grad_bytes = 0;
  for (const auto& named : model->named_parameters()) {
    const tiny::Tensor g = named.second.grad();
    if (!g.defined()) continue;
    grad_bytes += g.numel() * static_cast<int64_t>(g.element_size());
    out.put("averaged." + named.first, g.cpu());
  }
  out.values["grad_bytes"] = grad_bytes;
  tiny::optim::SGD(model->parameters(), {lr}).step();
  out.put_state("manual", model->state_dict());

  auto replica = model_of(in);
  replica->to(device);
  tiny::nn::parallel::DistributedDataParallel ddp(replica);
  F::cross_entropy(ddp(x), y).backward();
  tiny::optim::SGD(ddp.parameters(), {lr}).step();
  out.put_state("ddp", replica->state_dict());
}

// accumulation_step, `steps` times, on this rank's half of the examples cut into `micro` micro-batches.
WORKBOOK_EXERCISE(rank_accumulation_step) {
  LeaveGroup leave;
  const tiny::Device device = join_group();
  const tiny::data::Batch shard = shard_of(in, dist::get_rank());
  const int64_t micro = in.values.at("micro_batches").get<int64_t>(), size = shard.data.size(0) / micro;
  std::vector<tiny::data::Batch> batches;
  for (int64_t i = 0; i < micro; ++i)
    batches.push_back({shard.data.narrow(0, i * size, size).contiguous(), shard.target.narrow(0, i * size, size).contiguous()});
  auto model = model_of(in);
  model->to(device);
  tiny::nn::parallel::DistributedDataParallel ddp(model);
  tiny::optim::SGD optimizer(ddp.parameters(), {in.values.at("lr").get<double>()});
  out.values["buckets"] = static_cast<int64_t>(ddp.bucket_indices().size());
  nlohmann::json losses = nlohmann::json::array(), per_step = nlohmann::json::array();
  for (int step = 0; step < in.values.at("epochs").get<int>(); ++step) {
    dist::reset_collective_counts();
    losses.push_back(lesson6::accumulation_step(ddp, batches, optimizer, device));
    per_step.push_back(collectives());
  }
  out.values["losses"] = losses;
  out.values["step_collectives"] = per_step;
  out.put_state("final", model->state_dict());
}

// make_loader(dataset, batch_size, seed), then one pass over the loader.
WORKBOOK_EXERCISE(rank_make_loader) {
  LeaveGroup leave;
  join_group();
  auto dataset = dataset_of(in);
  dist::reset_collective_counts();
  lesson6::ShardedLoader data =
      lesson6::make_loader(dataset, in.values.at("batch_size").get<int64_t>(), in.values.at("seed").get<uint64_t>());
  out.values["collectives"] = collectives();
  out.values["has_sampler"] = data.sampler != nullptr;
  out.values["has_loader"] = data.loader != nullptr;
  if (!data.loader) return;
  out.values["loader_uses_sampler"] = data.sampler != nullptr && data.loader->sampler().get() == data.sampler.get();
  for (const tiny::data::Batch& batch : *data.loader) (void)batch;
  out.values["served"] = dataset->take();
  out.values["batch_sizes"] = dataset->batch_sizes();
}

// train_one_epoch on `epochs` epochs, with the DDP model, optimizer and sharded loader made here.
WORKBOOK_EXERCISE(rank_train_one_epoch) {
  LeaveGroup leave;
  const tiny::Device device = join_group();
  auto dataset = dataset_of(in);
  auto model = model_of(in);
  model->to(device);
  tiny::nn::parallel::DistributedDataParallel ddp(model);
  RecordingSGD optimizer(ddp.parameters(), in.values.at("lr").get<double>());
  // The gradients backward produces on this rank, before DDP averages them (the first backward's).
  std::vector<tiny::Tensor> raw;
  std::mutex raw_mutex;  // hooks may run on backward's worker threads
  std::vector<tiny::HookHandle> hooks;
  const std::vector<tiny::Tensor> params = model->parameters();
  for (const tiny::Tensor& p : params) {
    hooks.push_back(p.register_hook([&raw, &raw_mutex](const tiny::Tensor& grad) {
      std::lock_guard<std::mutex> lock(raw_mutex);
      if (raw.size() < lesson6_checks::kParameterTensors) raw.push_back(grad.detach().clone());
      return grad;
    }));
  }
  lesson6::ShardedLoader data;
  data.sampler = std::make_shared<tiny::data::DistributedSampler>(
      dataset->size(), dist::get_world_size(), dist::get_rank(), true, in.values.at("seed").get<uint64_t>());
  tiny::data::DataLoaderOptions options;
  options.batch_size = in.values.at("batch_size").get<int64_t>();
  options.sampler = data.sampler;
  data.loader = std::make_unique<tiny::data::DataLoader>(dataset, options);
  nlohmann::json losses = nlohmann::json::array(), served = nlohmann::json::array();
  dist::reset_collective_counts();
  // Rank 0's epochs on the emulated GPU are profiled: the grader's report draws its timeline beside the reference's.
  std::optional<tiny::profiler::profile> prof;
  if (dist::get_rank() == 0 && device.is_cuda() && tiny::cuda::is_emulated(device.index())) prof.emplace();
  // The caching allocator: the allocations it could not serve (they reached the device), counted
  // at every optimizer step, memory_reserved at the end, and the segments it gave back to the
  // device (the timeline's segment_free events). empty_cache() every step shows there: segments
  // given back after a step and asked for again by the next one, where the reference's cache,
  // warm after the first step, serves every allocation.
  std::optional<tiny::cuda::MemoryTimeline> timeline;
  if (device.is_cuda()) {
    optimizer.count_mallocs_on(device.index());
    timeline.emplace(device.index());
    timeline->start();
  }
  for (int e = 0; e < in.values.at("epochs").get<int>(); ++e) {
    losses.push_back(lesson6::train_one_epoch(ddp, data, optimizer, device, e));
    served.push_back(dataset->take());
  }
  if (timeline) {
    timeline->stop();
    int64_t segment_frees = 0;
    for (const tiny::cuda::MemorySample& s : timeline->samples()) segment_frees += s.kind == "segment_free" ? 1 : 0;
    out.values["segment_frees"] = segment_frees;
    out.values["step_mallocs"] = optimizer.step_mallocs();
    out.values["reserved_after"] = tiny::cuda::memory_reserved(device.index());
  }
  if (prof) {
    tiny::cuda::synchronize(device.index());
    prof->stop();
    out.values["trace"] = nlohmann::json::parse(prof->chrome_trace());
  }
  out.values["collectives"] = collectives();
  for (size_t i = 0; i < params.size(); ++i) params[i].remove_hook(hooks[i]);
  out.values["raw_grads"] = abs_sum(raw);
  out.values["step_grads"] = optimizer.first_step_grads();
  out.values["losses"] = losses;
  out.values["served"] = served;
  out.put_state("final", model->state_dict());
}

// all_reduce_mean(values[rank], device).
WORKBOOK_EXERCISE(rank_all_reduce_mean) {
  LeaveGroup leave;
  const tiny::Device device = join_group();
  const double value = in.values.at("values").at(static_cast<size_t>(dist::get_rank())).get<double>();
  dist::reset_collective_counts();
  if (device.is_cuda()) {
    tiny::cuda::synchronize(device.index());
    workbook::reset_device_counters(device.index());
  }
  out.values["result"] = lesson6::all_reduce_mean(value, device);
  out.values["collectives"] = collectives();
  if (device.is_cuda()) {
    // A copy back into pinned memory (a non_blocking one) and work still queued when the answer
    // came back: the answer was read before the copy ran (in the check's deferred mode queued
    // work runs only when the host waits, so such a read is stale every time).
    out.values["idle"] = tiny::cuda::current_stream(device.index()).query();
    out.values["bytes_to_pinned"] = tiny::cuda::device_counters(device.index()).bytes_device_to_host_pinned;
    tiny::cuda::synchronize(device.index());  // the queued collective runs now, while the group is still there
  }
}

// train(options): each rank is given its own checkpoint path, so a save by rank 1 shows.
WORKBOOK_EXERCISE(rank_train) {
  LeaveGroup leave;
  const int rank = env_int("RANK");
  const fs::path checkpoint =
      fs::path(in.values.at("ranks_dir").get<std::string>()) / ("checkpoint_rank" + std::to_string(rank) + ".safetensors");
  fs::remove(checkpoint);
  auto dataset = dataset_of(in);
  lesson6::TrainOptions options;
  options.dataset = dataset;
  options.make_model = [&in]() -> std::shared_ptr<tiny::nn::Module> { return model_of(in); };
  options.epochs = in.values.at("epochs").get<int>();
  options.batch_size = in.values.at("batch_size").get<int64_t>();
  options.lr = in.values.at("lr").get<double>();
  options.seed = in.values.at("seed").get<uint64_t>();
  options.checkpoint = checkpoint.string();
  options.backend = "gloo";
  const std::vector<double> losses = lesson6::train(options);
  out.values["collectives"] = collectives();  // since train()'s init_process_group
  out.values["losses"] = losses;
  out.values["initialized_after"] = dist::is_initialized();
  out.values["served"] = dataset->take();
  out.values["saved"] = fs::exists(checkpoint);
  if (fs::exists(checkpoint)) {
    try {
      out.put_state("checkpoint", tiny::load(checkpoint.string()));
    } catch (const std::exception& e) {
      out.values["checkpoint_error"] = e.what();
    }
  }
}
