// Lesson 6's checks: each exercise runs in 2 (or 4) ranks started by tinyrun
// from inside the runner (see runner.cpp). Training is compared with one
// process doing full-batch SGD on the whole data set: 16 examples, 8 per rank
// and batches of 8, so each epoch is one step, and DDP's average of the two
// ranks' gradients is exactly the full batch's gradient. Probes name the
// classic mistakes: the indices each rank's data set served (no sampler, no
// set_epoch), a checkpoint path of its own for every rank (every rank saving),
// a single-process run with the learning rate times the world size (gradients
// summed again on top of DDP) or divided by it (the loss divided by the world
// size, or DDP's mean divided again: the gradients backward produced and those
// the optimizer stepped with tell which), the process group after train() returned.
// Every check counts each rank's collectives (calls and bytes per kind,
// tiny::distributed::collective_counts()) and fails an answer that makes more
// of them than the reference, even when its numbers are right; barriers, which
// move no data, are never held against an answer. all_reduce_mean runs in the
// emulator's deferred mode (queued GPU work runs only when the host waits), so a
// result read from a non_blocking copy nobody waited for is stale every time.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <set>
#include <sstream>

#include "harness/checker.h"
#include "harness/compare.h"
#include "model.h"

using workbook::Bundle;
using workbook::Context;
using workbook::Outcome;
using workbook::Run;
namespace fs = std::filesystem;
using lesson6_checks::kClasses;
using lesson6_checks::kExamples;
using lesson6_checks::kFeatures;
using lesson6_checks::kWorld;

WORKBOOK_LESSON(6, "6_ddp");
// No WORKBOOK_LESSON_COUNTERS: each rank is a process of its own, whose GPU counters the runner does not collect.

namespace {

constexpr double kLr = 0.5;
constexpr int kEpochs = 3;
constexpr int64_t kBatch = kExamples / kWorld;  // one step per epoch on each rank
constexpr int64_t kUnevenBatch = 3;             // 8 examples a rank: batches of 3, 3 and 2
/// The allocator check's batch per rank: its hidden activations (32768 x 16 floats, 2 MiB) are
/// large-pool blocks, in a segment of their own that empty_cache() can give back.
constexpr int64_t kCacheBatch = 32768;
constexpr int64_t kCacheSteps = 3;  // batches in the allocator check's epoch
// DDP adds the two halves' gradients in another order than one process: compare with slack.
constexpr double kRtol = 1e-4, kAtol = 1e-5;

// tinyrun, built beside the lessons: the path CMake gave (tests/lessons/CMakeLists.txt
// defines WORKBOOK_TINYRUN), else <build>/framework/tinyrun found from this
// checker's own place (<build>/tests/lessons/lesson_6_checks).
fs::path tinyrun_path() {
#ifdef WORKBOOK_TINYRUN
  if (fs::exists(WORKBOOK_TINYRUN)) return WORKBOOK_TINYRUN;
#endif
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  return ec ? fs::path() : self.parent_path().parent_path().parent_path() / "framework" / "tinyrun";
}

// The inputs every check starts from; nullopt-like error outcome when tinyrun is missing.
std::optional<Outcome> base_inputs(Context& ctx, Bundle& in) {
  const fs::path tinyrun = tinyrun_path();
  if (tinyrun.empty() || !fs::exists(tinyrun)) {
    return Outcome::error("tinyrun is not built (looked for " + tinyrun.string() +
                          "): build it with `cmake --build build/default --target tinyrun`");
  }
  // Linked beside the work folder: the student's sandbox may not reach the build tree.
  const fs::path shared = ctx.share(tinyrun);
  in.values["tinyrun"] = (shared.empty() ? tinyrun : shared).string();
  return std::nullopt;
}

workbook::RunOptions options_for(const std::string& call) {
  workbook::RunOptions options;
  options.call = call;
  options.timeout_s = 40;  // the glue stops its ranks after 25 s; collectives give up after 5 s
  return options;
}

// The first rank that did not finish normally, as a failure (nullopt when all did).
// A rank that died comes first: the others' errors ("rank 1 is gone") follow from it.
std::optional<Outcome> rank_failure(const Run& run) {
  std::vector<nlohmann::json> failed;
  for (const auto& r : run.out.values["ranks"])
    if (r["status"] == "crash") failed.push_back(r);
  for (const auto& r : run.out.values["ranks"])
    if (r["status"] != "crash" && r["status"] != "ok") failed.push_back(r);
  for (const auto& r : failed) {
    const std::string status = r["status"].get<std::string>();
    if (r["message"].get<std::string>().find("Network is unreachable") != std::string::npos) {
      return Outcome::error(run.call + ": rank " + std::to_string(r["rank"].get<int>()) + " could not reach the "
                            "other ranks over 127.0.0.1 (Network is unreachable): the sandbox these checks run in "
                            "has no loopback network, which a multi-process run needs. Not your code: please "
                            "report it.\n  " + r["message"].get<std::string>());
    }
    const auto describe = [](const nlohmann::json& rank) {
      return "rank " + std::to_string(rank["rank"].get<int>()) + " " +
             (rank["status"] == "error"
                  ? "threw " + rank["error_type"].get<std::string>() + ":\n  " + rank["message"].get<std::string>()
                  : rank["message"].get<std::string>());
    };
    std::string why = run.call + ": " + describe(r);
    if (status == "crash" && failed.size() > 1) why += "\nwhile " + describe(failed[1]);
    const std::string log = run.out.values.value("launcher_log", "");
    if (!log.empty()) why += "\ntinyrun said:\n" + log;
    return Outcome::fail(why);
  }
  return std::nullopt;
}

// Student and reference on the same inputs, every rank of both finished.
std::optional<Outcome> run_both(Context& ctx, const std::string& exercise, const Bundle& in, Run& mine, Run& ref,
                                const workbook::RunOptions& options) {
  if (auto early = ctx.both(exercise, in, mine, ref, options)) return early;
  if (auto bad = rank_failure(ref)) {
    return Outcome::error("the reference solution failed (a bug in the workbook, not in your code: please report it "
                          "with the seed)\n" + bad->message);
  }
  return rank_failure(mine);
}

const nlohmann::json& rank_values(const Run& run, int rank) {
  return run.out.values["rank_values"][static_cast<size_t>(rank)];
}

std::string list(const nlohmann::json& values, size_t limit = 16) {
  std::ostringstream s;
  s << "[";
  for (size_t i = 0; i < values.size() && i < limit; ++i) s << (i ? ", " : "") << values[i].dump();
  if (values.size() > limit) s << ", ...";
  s << "]";
  return s.str();
}

bool close(double a, double b) { return std::fabs(a - b) <= kAtol + kRtol * std::fabs(b); }

// The model, the data and the training settings of the training checks.
void put_training(Bundle& in, const Context& ctx) {
  tiny::manual_seed(ctx.seed);
  in.put_state("init", lesson6_checks::make_model()->state_dict());
  in.put("features", tiny::randn({kExamples, kFeatures}, {}, ctx.generator(11)));
  in.put("labels", tiny::randint(0, kClasses, {kExamples}, tiny::kInt64, ctx.generator(12)));
  in.values["lr"] = kLr;
  in.values["epochs"] = kEpochs;
  in.values["batch_size"] = kBatch;
  in.values["seed"] = ctx.seed % 1000;
}

// One process, full-batch SGD on all the examples (the reference), optionally with another learning rate.
Run single_process(Context& ctx, Bundle in, double lr) {
  in.values["lr"] = lr;
  return ctx.reference("train_single", in, options_for("one process, full batch, lr " + std::to_string(lr)));
}

// Why the weights `prefix.*` of `mine` differ from the single-process run's (nullopt when they match).
std::optional<std::string> weights_differ(const std::string& what, const Bundle& mine, const std::string& prefix,
                                          const Run& single) {
  for (const auto& [name, expected] : single.out.state("final")) {
    if (!mine.has(prefix + name)) return what + ": there is no " + name + " among the weights";
    if (auto why = workbook::differ(what + ", " + name + " (compared with one process on the full batch)",
                                    mine.tensor(prefix + name), expected, kRtol, kAtol)) {
      return why;
    }
  }
  return std::nullopt;
}

// ---- collectives ------------------------------------------------------------------------

// The kinds an answer may not make more of than the reference (barrier() moves no data: not counted against).
const char* const kKinds[] = {"all_reduce", "broadcast", "all_gather", "reduce_scatter"};

int64_t calls(const nlohmann::json& c, const char* kind) { return c.at(kind).at("calls").get<int64_t>(); }
int64_t bytes(const nlohmann::json& c, const char* kind) { return c.at(kind).at("bytes").get<int64_t>(); }

// "2 all_reduce (3.1 KB), 1 broadcast (64 B)", or "no collective".
std::string counts_text(const nlohmann::json& c) {
  std::string out;
  for (const char* kind : kKinds) {
    if (calls(c, kind) == 0) continue;
    out += (out.empty() ? "" : ", ") + std::to_string(calls(c, kind)) + " " + kind + " (" +
           std::to_string(bytes(c, kind)) + " bytes)";
  }
  return out.empty() ? "no collective" : out;
}

// Why `mine` made more collectives than `ref` (more calls of a kind, or more all-reduced bytes); nullopt if not.
std::optional<std::string> more_collectives(const nlohmann::json& mine, const nlohmann::json& ref) {
  for (const char* kind : kKinds) {
    if (calls(mine, kind) > calls(ref, kind) || bytes(mine, kind) > bytes(ref, kind)) {
      return "yours made " + counts_text(mine) + ", the reference " + counts_text(ref);
    }
  }
  return std::nullopt;
}

// The failure for an answer that made more collectives than the reference, with `advice` on what to remove.
std::optional<Outcome> extra_collectives(const std::string& call, const Run& mine, const Run& ref,
                                         const std::string& advice) {
  auto why = more_collectives(rank_values(mine, 0)["collectives"], rank_values(ref, 0)["collectives"]);
  if (!why) return std::nullopt;
  return Outcome::fail(call + ": more collectives than needed (on rank 0, " + *why + "). Every collective makes every "
                       "rank wait for the slowest and moves its bytes over the network: " + advice);
}

// Why `mine` all-reduced fewer bytes than `ref` (nullopt if not): a rank that
// trains alone, on all the data, computes the right weights with none.
std::optional<std::string> fewer_all_reduced_bytes(const nlohmann::json& mine, const nlohmann::json& ref) {
  if (bytes(mine, "all_reduce") >= bytes(ref, "all_reduce")) return std::nullopt;
  return "yours made " + counts_text(mine) + ", the reference " + counts_text(ref);
}

// The collectives of rank 0, for the report.
void note_collectives(Context& ctx, const Run& mine) { ctx.details["collectives"] = rank_values(mine, 0)["collectives"]; }

}  // namespace

WORKBOOK_CHECK(average_gradients, "average_gradients() leaves every rank the mean of the ranks' gradients, one all-reduce per gradient, and its step equals DDP's") {
  Bundle in;
  if (auto missing = base_inputs(ctx, in)) return *missing;
  put_training(in, ctx);
  const std::string call = "average_gradients(model) on 2 ranks, each after backward on its own 8 examples";
  Run mine, ref;
  if (auto early = run_both(ctx, "average_gradients", in, mine, ref, options_for(call))) return *early;
  const std::string local = "rank0.local.";
  for (const std::string& name : ref.out.tensor_names()) {
    if (name.rfind(local, 0) != 0) continue;
    const std::string param = name.substr(local.size());
    const tiny::Tensor g0 = mine.out.tensor("rank0.local." + param), g1 = mine.out.tensor("rank1.local." + param);
    const tiny::Tensor sum = g0.add(g1), mean = sum.div(static_cast<double>(kWorld));
    for (int r = 0; r < kWorld; ++r) {
      const std::string key = "rank" + std::to_string(r) + ".averaged." + param;
      const std::string what = call + ": rank " + std::to_string(r) + "'s gradient of " + param;
      if (!mine.out.has(key)) return Outcome::fail(what + " is gone: average it in place, keep p.grad()");
      const tiny::Tensor got = mine.out.tensor(key);
      auto why = workbook::differ(what + " (expected the mean of the 2 ranks' gradients)", got, mean, kRtol, kAtol);
      if (!why) continue;
      const tiny::Tensor own = r == 0 ? g0 : g1;
      if (!workbook::differ("", got, sum, kRtol, kAtol)) {
        return Outcome::fail(what + " is the sum of the ranks' gradients, not their mean: all_reduce adds "
                             "(ReduceOp::SUM). Divide by tiny::distributed::get_world_size() afterwards");
      }
      if (!workbook::differ("", got, mean.div(static_cast<double>(kWorld)), kRtol, kAtol)) {
        return Outcome::fail(what + " is the mean divided by the world size once more: you divided twice (an "
                             "all_reduce with ReduceOp::AVG already divides; after a SUM, divide once)");
      }
      const bool own_divided = !workbook::differ("", got, own.div(static_cast<double>(kWorld)), kRtol, kAtol);
      if (own_divided || !workbook::differ("", got, own, kRtol, kAtol)) {
        return Outcome::fail(what + " is still this rank's own gradient" + (own_divided ? ", divided by the world "
                             "size" : "") + ": nothing reached it from the other rank. "
                             "all_reduce works in place on the tensor you pass: pass p.grad() itself (or copy the "
                             "result back into it), not a copy that you then drop");
      }
      return Outcome::fail(*why);
    }
  }
  const nlohmann::json& counts = rank_values(mine, 0)["collectives"];
  if (auto extra = more_collectives(counts, rank_values(ref, 0)["collectives"])) {
    const int64_t params = rank_values(mine, 0)["parameters"].get<int64_t>();
    const int64_t grad_bytes = rank_values(mine, 0)["grad_bytes"].get<int64_t>();
    std::string why = call + ": the gradients are right, but " + *extra + ". The model has " + std::to_string(params) +
                      " gradients of " + std::to_string(grad_bytes) + " bytes in all: each needs to cross the "
                      "network once, in one all_reduce (or all of them in one flattened buffer), and nothing else does";
    if (bytes(counts, "all_reduce") >= 2 * grad_bytes) {
      why += ". Yours all-reduced twice those bytes: the weights too? They are the same on every rank already "
             "(the same start, the same averaged step); only the gradients differ";
    } else if (calls(counts, "all_reduce") > params) {
      why += ". More all-reduces than gradients: the world size needs no collective (get_world_size())";
    }
    return Outcome::fail(why);
  }
  // Right gradients, right collectives, and still a trip through the host: the
  // copies between the rank's GPU and the host, beyond what the reference's
  // all_reduce makes (gloo stages a GPU tensor through the host itself; NCCL
  // would make none), named when they are at least the gradients' bytes.
  const nlohmann::json& mine0 = rank_values(mine, 0);
  const nlohmann::json& ref0 = rank_values(ref, 0);
  if (mine0.contains("bytes_to_host") && ref0.contains("bytes_to_host")) {
    const int64_t grad_bytes = mine0["grad_bytes"].get<int64_t>();
    const int64_t out_bytes = mine0["bytes_to_host"].get<int64_t>(), in_bytes = mine0["bytes_to_device"].get<int64_t>();
    const int64_t ref_out = ref0["bytes_to_host"].get<int64_t>(), ref_in = ref0["bytes_to_device"].get<int64_t>();
    if (out_bytes - ref_out >= grad_bytes && in_bytes - ref_in >= grad_bytes) {
      return Outcome::fail(call + ": the gradients are right, but they went from the GPU to the host and back: "
                           "rank 0 copied " + std::to_string(out_bytes) + " bytes to the host and " +
                           std::to_string(in_bytes) + " back, the reference " + std::to_string(ref_out) + " and " +
                           std::to_string(ref_in) + " (the gradients are " + std::to_string(grad_bytes) + " bytes" +
                           (ref_out > 0 ? std::string("; the reference's are the backend staging them") : std::string()) +
                           "). Each trip through the "
                           "host costs two copies and a wait for the GPU. all_reduce takes the GPU tensor itself: "
                           "reduce p.grad() where it is, and divide it there");
    }
  }
  // The mechanism: a step after your average is DDP's step.
  for (const auto& [name, expected] : mine.out.state("rank0.ddp")) {
    const std::string key = "rank0.manual." + name;
    if (!mine.out.has(key)) return Outcome::fail(call + ": there is no " + name + " among the weights after the step");
    if (auto why = workbook::differ(call + ": one SGD step after your average, compared with one DDP step on the "
                                    "same data, " + name, mine.out.tensor(key), expected, kRtol, kAtol)) {
      return Outcome::fail(*why);
    }
  }
  note_collectives(ctx, mine);
  return Outcome::pass();
}

WORKBOOK_CHECK(setup, "setup() joins the process group and picks cuda:LOCAL_RANK (the CPU without GPUs)") {
  struct Case {
    int nnodes, nproc, gpus;
    std::string call;
  };
  const Case cases[] = {
      {2, 2, 2, "setup(\"gloo\") on 2 machines with 2 GPUs each (4 ranks)"},
      {1, 2, 0, "setup(\"gloo\") on a machine without GPUs (2 ranks)"},
  };
  for (const Case& c : cases) {
    Bundle in;
    if (auto missing = base_inputs(ctx, in)) return *missing;
    in.values["backend"] = "gloo";
    in.values["nnodes"] = c.nnodes;
    in.values["nproc"] = c.nproc;
    workbook::RunOptions options = options_for(c.call);
    options.gpus = c.gpus;
    Run mine, ref;
    if (auto early = run_both(ctx, "setup", in, mine, ref, options)) return *early;
    for (int r = 0; r < c.nnodes * c.nproc; ++r) {
      const nlohmann::json& v = rank_values(mine, r);
      const std::string rank = "rank " + std::to_string(r);
      if (!v.value("initialized", false)) {
        return Outcome::fail(c.call + ": on " + rank + " the process group is not initialized after setup(): call "
                             "tiny::distributed::init_process_group(backend) first");
      }
      if (v["world_size"].get<int>() != c.nnodes * c.nproc || v["rank"].get<int>() != v["env_rank"].get<int>()) {
        return Outcome::fail(c.call + ": " + rank + " joined as rank " + v["rank"].dump() + " of " +
                             v["world_size"].dump() + ": let init_process_group read RANK and WORLD_SIZE from the "
                             "environment (leave world_size and rank at -1)");
      }
      const int local = v["env_local_rank"].get<int>(), global = v["env_rank"].get<int>();
      const std::string want = c.gpus == 0 ? "cpu" : "cuda:" + std::to_string(local);
      const std::string got = v["device"].get<std::string>();
      if (got == want) {
        if (c.gpus > 0 && v["current_device"].get<int>() != local) {
          return Outcome::fail(c.call + ": on " + rank + " (LOCAL_RANK " + std::to_string(local) +
                               ") the current device is cuda:" + v["current_device"].dump() +
                               ": make the rank's GPU the current one too (tiny::cuda::set_device(local_rank)), as "
                               "torch.cuda.set_device does, so that nothing lands on cuda:0 by default");
        }
        continue;
      }
      if (c.gpus > 0 && local != global && got == "cuda:" + std::to_string(global)) {
        return Outcome::fail(c.call + ": " + rank + " (LOCAL_RANK " + std::to_string(local) + ") chose " + got +
                             ": you picked the GPU from the global rank. Ranks count GPUs over every machine, and "
                             "each machine numbers its own GPUs from 0: use tiny::distributed::local_rank()");
      }
      return Outcome::fail(c.call + ": " + rank + " (RANK " + std::to_string(global) + ", LOCAL_RANK " +
                           std::to_string(local) + ") chose " + got + ", expected " + want +
                           (c.gpus == 0 ? " (no GPU here: tiny::cuda::is_available() is false)"
                                        : " (cuda:LOCAL_RANK, from tiny::distributed::local_rank())"));
    }
    if (auto extra = extra_collectives(c.call, mine, ref, "joining the group needs none")) return *extra;
  }
  return Outcome::pass();
}

WORKBOOK_CHECK(all_reduce_mean, "all_reduce_mean() returns the mean over the ranks on every rank") {
  Bundle in;
  if (auto missing = base_inputs(ctx, in)) return *missing;
  tiny::Generator g = ctx.generator(31);
  std::vector<double> values;
  for (int r = 0; r < kWorld; ++r) {
    // A float32 holds about 7 significant digits: these need a double's 16
    // (a tenth of a millionth added to values near 10), so a mean taken in
    // float32 is off by more than the 1e-9 the check allows, as exercise.h says.
    values.push_back(std::round(tiny::rand({1}, {}, g).item<double>() * 640.0 + 64.0 * r) / 64.0 + 1e-7 * (r + 1) / 3.0);
  }
  in.values["values"] = values;
  const std::string call = "all_reduce_mean(" + workbook::number_text(values[0], 10) + " on rank 0, " +
                           workbook::number_text(values[1], 10) + " on rank 1)";
  Run mine, ref;
  // Deferred mode: queued GPU work runs only when the host waits, so a value read from a
  // non_blocking copy back that nobody waited for is stale every time, not now and then.
  workbook::RunOptions options = options_for(call);
  options.mode = "deferred";
  if (auto early = run_both(ctx, "all_reduce_mean", in, mine, ref, options)) return *early;
  double sum = 0;
  for (double v : values) sum += v;
  const double mean = sum / kWorld;
  for (int r = 0; r < kWorld; ++r) {
    const nlohmann::json& v = rank_values(mine, r);
    const double got = v["result"].get<double>();
    if (std::fabs(got - mean) <= 1e-9 * std::fabs(mean) + 1e-12) continue;
    // Ten digits: a float32 mean differs from the right one in the seventh.
    std::string why = call + ": rank " + std::to_string(r) + " got " + workbook::number_text(got, 10) +
                      ", expected the mean " + workbook::number_text(mean, 10);
    // The probe: a copy into pinned memory, and the GPU still busy when the answer came back.
    if (!v.value("idle", true) && v.value("bytes_to_pinned", int64_t{0}) > 0) {
      return Outcome::fail(why + ": you read the host copy before the copy finished. A non_blocking copy to the "
                           "CPU (into pinned memory) returns at once, and the GPU writes the value later: rank " +
                           std::to_string(r) + " returned with the copy still queued on cuda:" + std::to_string(r) +
                           " (in this check's deferred mode nothing queued runs until the host waits; on a real GPU "
                           "it is a race you lose now and then). Wait before reading it, "
                           "tiny::cuda::synchronize() (PyTorch's torch.cuda.synchronize()), or use a blocking copy: "
                           ".item() or .cpu() wait for the GPU themselves");
    }
    if (std::fabs(got - sum) <= 1e-9 * std::fabs(sum)) {
      why += ": that is the sum over the ranks. all_reduce adds by default (ReduceOp::SUM): divide by "
             "tiny::distributed::get_world_size(), or all-reduce with ReduceOp::AVG";
    } else if (std::fabs(got - static_cast<double>(static_cast<float>(mean))) <= 4e-7 * std::fabs(mean)) {
      why += ": that is the mean rounded to float32, which keeps about 7 significant digits. Make the tensor "
             "float64 (tiny::kFloat64, PyTorch's torch.float64), as a double's precision is asked for";
    } else if (std::fabs(got - values[static_cast<size_t>(r)]) <= 1e-9 * std::fabs(values[static_cast<size_t>(r)])) {
      why += ": that is this rank's own value. Put it in a tensor and tiny::distributed::all_reduce() that tensor; "
             "the result is in the tensor afterwards";
    }
    return Outcome::fail(why);
  }
  if (auto extra = extra_collectives(call, mine, ref, "one all_reduce of a one-element tensor is enough")) return *extra;
  note_collectives(ctx, mine);
  return Outcome::pass();
}

WORKBOOK_CHECK(make_loader, "make_loader() gives each rank its own shuffled half of the data through a DistributedSampler") {
  Bundle in;
  if (auto missing = base_inputs(ctx, in)) return *missing;
  put_training(in, ctx);
  constexpr int64_t kLoaderBatch = 3;  // 8 examples per rank: batches of 3, 3, 2
  in.values["batch_size"] = kLoaderBatch;
  const std::string call = "make_loader(16 examples, batch_size=3, seed) on 2 ranks";
  Run mine, ref;
  if (auto early = run_both(ctx, "make_loader", in, mine, ref, options_for(call))) return *early;
  std::vector<std::set<int64_t>> seen(kWorld);
  for (int r = 0; r < kWorld; ++r) {
    const nlohmann::json& v = rank_values(mine, r);
    if (!v["has_sampler"].get<bool>() || !v["has_loader"].get<bool>()) {
      return Outcome::fail(call + ": the ShardedLoader you returned has no " +
                           std::string(v["has_loader"].get<bool>() ? "sampler" : "loader") +
                           ": return both, the loop needs the sampler for set_epoch");
    }
    for (const auto& i : v["served"]) seen[static_cast<size_t>(r)].insert(i.get<int64_t>());
  }
  // Probe: both ranks loaded (some of) the same examples.
  std::vector<int64_t> common;
  std::set_intersection(seen[0].begin(), seen[0].end(), seen[1].begin(), seen[1].end(), std::back_inserter(common));
  if (!common.empty()) {
    return Outcome::fail(call + ": every rank loaded the same examples (rank 0 " + std::to_string(seen[0].size()) +
                         " and rank 1 " + std::to_string(seen[1].size()) + " distinct examples, " +
                         std::to_string(common.size()) + " of them in common): each rank trains on the whole data "
                         "set, so an epoch does the work twice. Give the DataLoader a DistributedSampler "
                         "(options.sampler), which hands each rank its own part");
  }
  for (int r = 0; r < kWorld; ++r) {
    if (!rank_values(mine, r)["loader_uses_sampler"].get<bool>()) {
      return Outcome::fail(call + ": on rank " + std::to_string(r) + " the DataLoader does not use the sampler you "
                           "returned: set_epoch on it would change nothing. Put that same sampler in "
                           "DataLoaderOptions::sampler");
    }
  }
  for (int r = 0; r < kWorld; ++r) {
    const nlohmann::json& got = rank_values(mine, r)["served"];
    const nlohmann::json& want = rank_values(ref, r)["served"];
    if (got != want) {
      return Outcome::fail(call + ": rank " + std::to_string(r) + " loaded the examples " + list(got) +
                           ", expected " + list(want) + " (DistributedSampler(dataset->size(), get_world_size(), "
                           "get_rank(), shuffle=true, seed): every rank the same seed)");
    }
    const nlohmann::json& sizes = rank_values(mine, r)["batch_sizes"];
    if (sizes != rank_values(ref, r)["batch_sizes"]) {
      return Outcome::fail(call + ": rank " + std::to_string(r) + " got batches of " + list(sizes) + ", expected " +
                           list(rank_values(ref, r)["batch_sizes"]) + " (batch_size examples per batch)");
    }
  }
  if (auto extra = extra_collectives(call, mine, ref, "the sampler splits the data by rank without talking to "
                                     "the other ranks (every rank computes the same permutation from the seed)")) {
    return *extra;
  }
  return Outcome::pass();
}

// The report's loss curve of a training check, rank 0's losses beside the reference's rank 0's,
// recorded as soon as both ran so that a failing check shows it too.
static void plot_losses(Context& ctx, const std::string& name, const Run& mine, const Run& ref) {
  const nlohmann::json& yours = rank_values(mine, 0);
  const nlohmann::json& reference = rank_values(ref, 0);
  if (!yours.is_object() || !reference.is_object() || !yours.contains("losses") || !reference.contains("losses")) return;
  ctx.details["curves"][name] = {{"yours", yours["losses"]}, {"reference", reference["losses"]}};
}

// Right steps that give the allocator's cache back every step, seen on each rank: segments
// returned to the device (the timeline's segment_free events) and allocations that reached the
// device between the second step and the last, which the reference's cache serves. Counted
// between steps, so an empty_cache() once an epoch (after the last step) is not blamed. Without
// a GPU (the ranks on the CPU) there is nothing to compare.
std::optional<std::string> cache_churn(const Run& mine, const Run& ref) {
  for (int r = 0; r < kWorld; ++r) {
    const nlohmann::json& v = rank_values(mine, r);
    const nlohmann::json& w = rank_values(ref, r);
    if (!v.contains("step_mallocs") || !w.contains("step_mallocs")) return std::nullopt;
    const auto between = [](const nlohmann::json& at_step) {  // from the second step to the last
      return at_step.size() < 2 ? uint64_t{0} : at_step.back().get<uint64_t>() - at_step[1].get<uint64_t>();
    };
    const uint64_t later = between(v["step_mallocs"]), ref_later = between(w["step_mallocs"]);
    const int64_t frees = v.value("segment_frees", int64_t{0});
    if (frees == 0 || later <= ref_later) continue;
    const auto mib = [](const nlohmann::json& bytes) {
      return workbook::number_text(bytes.get<double>() / (1 << 20), 3) + " MiB";
    };
    return "right losses and weights, but rank " + std::to_string(r) + "'s loop gave " + std::to_string(frees) +
           " segments back to its GPU, and from its second step to its last " + std::to_string(later) +
           " allocations went to the device instead of the caching allocator (the reference: " +
           std::to_string(ref_later) + "; memory_reserved at the end " + mib(v["reserved_after"]) +
           ", the reference's " + mib(w["reserved_after"]) + "): that is empty_cache() every step. It lowers "
           "memory_reserved and saves nothing: the next step asks the device for the same memory again "
           "(cudaMalloc, which is slow and synchronizes). Let the cache keep its blocks (PyTorch's "
           "torch.cuda.empty_cache() is for handing memory to another process, not for a training loop)";
  }
  return std::nullopt;
}

WORKBOOK_CHECK(train_one_epoch, "train_one_epoch() with DDP on 2 ranks trains like one process on the full batch, reshuffling every epoch") {
  Bundle in;
  if (auto missing = base_inputs(ctx, in)) return *missing;
  put_training(in, ctx);
  const std::string call = "3 epochs of train_one_epoch on 2 ranks, 8 examples each";
  Run mine, ref;
  if (auto early = run_both(ctx, "train_one_epoch", in, mine, ref, options_for(call))) return *early;
  plot_losses(ctx, "rank 0's loss per epoch", mine, ref);
  if (rank_values(mine, 0).contains("trace") && rank_values(ref, 0).contains("trace")) {  // the report's timelines
    ctx.details["timelines"] = {{"yours", rank_values(mine, 0)["trace"]}, {"reference", rank_values(ref, 0)["trace"]}};
  }
  // Probe: the same order every epoch means the sampler's epoch never changed.
  for (int r = 0; r < kWorld; ++r) {
    const nlohmann::json& served = rank_values(mine, r)["served"];
    bool all_same = served.size() > 1;
    for (size_t e = 1; e < served.size(); ++e) all_same = all_same && served[e] == served[0];
    if (all_same) {
      return Outcome::fail(call + ": rank " + std::to_string(r) + " loaded the same examples in the same order in "
                           "every epoch (" + list(served[0]) + "). The DistributedSampler shuffles with seed + "
                           "epoch, and only your code tells it the epoch (set_epoch), so every epoch repeated the "
                           "first");
    }
  }
  // Collectives per step (one step per epoch here): DDP's bucket all-reduces are all a step needs.
  const nlohmann::json& counts = rank_values(mine, 0)["collectives"];
  const nlohmann::json& ref_counts = rank_values(ref, 0)["collectives"];
  if (auto extra = more_collectives(counts, ref_counts)) {
    // Probe: the extra all-reduced bytes hold every gradient again (DDP's own all-reduces carry each gradient once).
    const int64_t extra_bytes = bytes(counts, "all_reduce") - bytes(ref_counts, "all_reduce");
    if (extra_bytes >= bytes(ref_counts, "all_reduce")) {
      return Outcome::fail(call + ": DDP already averaged the gradients in backward(); your loop all-reduced them "
                           "again (on rank 0 over " + std::to_string(kEpochs) + " steps, " + *extra + "). Even when "
                           "you divide again and the numbers come out right, every step pays a second all-reduce of "
                           "the whole model: remove the all_reduce of the gradients");
    }
    return Outcome::fail(call + ": more collectives per step than needed (on rank 0 over " + std::to_string(kEpochs) +
                         " steps, " + *extra + "). DDP's backward() makes the only collectives a step needs; a "
                         "collective every step (an all_reduce of the loss, to log it) waits for every rank each "
                         "time: sum the loss locally and average it once per epoch (all_reduce_mean, in train())");
  }
  const Run single = single_process(ctx, in, kLr);
  if (!single.ok()) return Outcome::error("the single-process reference failed: " + single.message);
  if (auto why = weights_differ("after 3 epochs, rank 0's weights", mine.out, "rank0.final.", single)) {
    // Probe: the gradients came out world-size times too large (summed again on top of DDP's average).
    const Run doubled = single_process(ctx, in, kLr * kWorld);
    if (doubled.ok() && !weights_differ("", mine.out, "rank0.final.", doubled)) {
      return Outcome::fail(call + ": the weights are those of one process with the learning rate times 2: the "
                           "gradients you stepped with were twice the mean. DDP already leaves every rank with the "
                           "mean of the ranks' gradients when backward() returns: step with them as they are");
    }
    // Probe: world-size times too small. Which gradients were small tells where the division happened.
    const Run halved = single_process(ctx, in, kLr / kWorld);
    if (halved.ok() && !weights_differ("", mine.out, "rank0.final.", halved)) {
      const auto ratio = [&](const char* key) {
        const double want = rank_values(ref, 0)[key].get<double>();
        return want > 0 ? rank_values(mine, 0)[key].get<double>() / want : 1.0;
      };
      const auto is_halved = [](double r) { return std::fabs(r * kWorld - 1.0) < 1e-3; };
      if (is_halved(ratio("raw_grads"))) {
        return Outcome::fail(call + ": the weights are those of one process with half the learning rate, and the "
                             "gradients backward produced on each rank were already half their size: you divided "
                             "the loss by the world size. DDP averages (divides the sum by the world size) for you: "
                             "use the mean loss of the batch as it is");
      }
      if (is_halved(ratio("step_grads"))) {
        return Outcome::fail(call + ": the weights are those of one process with half the learning rate: backward "
                             "produced the right gradients, but the optimizer stepped with half of DDP's mean. You "
                             "divided the gradients by the world size after backward(); DDP's mean is already "
                             "divided: remove your division");
      }
      return Outcome::fail(call + ": the weights are those of one process with half the learning rate: the "
                           "gradients you stepped with were half the mean of the ranks'. Step with the gradients "
                           "DDP leaves after backward(), from the plain mean loss");
    }
    return Outcome::fail(*why + "\n(per batch: to device, zero_grad, forward through the DDP model, cross_entropy, "
                         "backward, step)");
  }
  for (int r = 0; r < kWorld; ++r) {
    const nlohmann::json& got = rank_values(mine, r)["losses"];
    const nlohmann::json& want = rank_values(ref, r)["losses"];
    for (size_t e = 0; e < want.size(); ++e) {
      if (!close(got[e].get<double>(), want[e].get<double>())) {
        return Outcome::fail(call + ": on rank " + std::to_string(r) + " epoch " + std::to_string(e) + " returned " +
                             got[e].dump() + ", expected " + want[e].dump() + " (this rank's mean loss per example: "
                             "sum of loss * batch size, divided by the examples it saw)");
      }
    }
  }
  // Again with batches of 3, 3 and 2 examples on each rank: a plain mean of the
  // batches' losses equals the mean per example only while every batch has the same size.
  Bundle uneven = in;
  uneven.values["batch_size"] = kUnevenBatch;
  const std::string uneven_call = "3 epochs of train_one_epoch on 2 ranks, 8 examples each in batches of 3, 3 and 2";
  Run mine_uneven, ref_uneven;
  if (auto early = run_both(ctx, "train_one_epoch", uneven, mine_uneven, ref_uneven, options_for(uneven_call))) {
    return *early;
  }
  for (int r = 0; r < kWorld; ++r) {
    const nlohmann::json& got = rank_values(mine_uneven, r)["losses"];
    const nlohmann::json& want = rank_values(ref_uneven, r)["losses"];
    for (size_t e = 0; e < want.size(); ++e) {
      if (close(got[e].get<double>(), want[e].get<double>())) continue;
      // Probe: the same weights as the reference's (training was right) and the right losses with one batch an
      // epoch (above): only the way the batches' losses were averaged differs.
      if (!workbook::state_differs("", mine_uneven.out, ref_uneven.out, "rank0.final", kRtol, kAtol)) {
        return Outcome::fail(uneven_call + ": on rank " + std::to_string(r) + " epoch " + std::to_string(e) +
                             " returned " + got[e].dump() + ", expected " + want[e].dump() + ". Your model trained "
                             "exactly as the reference's, and your losses were right while an epoch was one batch: "
                             "the short last batch counts as much as a full one in your mean. The mean loss per "
                             "example weighs each batch's mean loss by its number of examples, then divides by the "
                             "examples this rank saw");
      }
      return Outcome::fail(uneven_call + ": on rank " + std::to_string(r) + " epoch " + std::to_string(e) +
                           " returned " + got[e].dump() + ", expected " + want[e].dump() +
                           " (this rank's mean loss per example)");
    }
  }
  // Again with batches large enough for the caching allocator to give something back: with 8
  // examples a step's every block fits in the small segment that holds the weights, and
  // empty_cache() has nothing to free. At 32768 examples a batch, the activations (2 MiB each)
  // get a large segment of their own, which a loop that empties the cache every step gives
  // back and asks for again; the reference's cache, warm after the first step, serves them.
  Bundle large = in;
  large.put("features", tiny::randn({kWorld * kCacheSteps * kCacheBatch, kFeatures}, {}, ctx.generator(13)));
  large.put("labels", tiny::randint(0, kClasses, {kWorld * kCacheSteps * kCacheBatch}, tiny::kInt64, ctx.generator(14)));
  large.values["batch_size"] = kCacheBatch;
  large.values["epochs"] = 1;
  const std::string large_call = "1 epoch of train_one_epoch on 2 ranks, " + std::to_string(kCacheSteps) +
                                 " batches of " + std::to_string(kCacheBatch) + " examples each";
  Run mine_large, ref_large;
  if (auto early = run_both(ctx, "train_one_epoch", large, mine_large, ref_large, options_for(large_call))) {
    return *early;
  }
  if (auto churn = cache_churn(mine_large, ref_large)) return Outcome::fail(large_call + ": " + *churn);
  note_collectives(ctx, mine);
  return Outcome::pass();
}

WORKBOOK_CHECK(accumulation_step, "accumulation_step() over 4 micro-batches equals one step on all of them, and all-reduces once per step (no_sync)") {
  Bundle in;
  if (auto missing = base_inputs(ctx, in)) return *missing;
  put_training(in, ctx);
  constexpr int kMicro = 4, kSteps = 2;
  in.values["micro_batches"] = kMicro;
  in.values["epochs"] = kSteps;  // steps: the single-process reference takes as many full-batch steps
  const std::string call = "2 calls of accumulation_step on 2 ranks, 4 micro-batches of 2 examples each";
  Run mine, ref;
  if (auto early = run_both(ctx, "accumulation_step", in, mine, ref, options_for(call))) return *early;
  plot_losses(ctx, "rank 0's loss per step", mine, ref);
  for (int step = 0; step < kSteps; ++step) {
    const nlohmann::json& counts = rank_values(mine, 0)["step_collectives"][static_cast<size_t>(step)];
    const nlohmann::json& want = rank_values(ref, 0)["step_collectives"][static_cast<size_t>(step)];
    const std::string which = call + ": step " + std::to_string(step + 1) + " made ";
    if (calls(counts, "all_reduce") == 0 && calls(want, "all_reduce") > 0) {
      return Outcome::fail(which + "no all-reduce: every micro-batch, the last too, ran inside no_sync(), so the "
                           "ranks never averaged their gradients and their weights drift apart. Leave the last "
                           "micro-batch's forward and backward outside the guard: that backward all-reduces what "
                           "the micro-batches accumulated");
    }
    if (calls(counts, "all_reduce") >= kMicro * calls(want, "all_reduce") && calls(want, "all_reduce") > 0) {
      return Outcome::fail(which + std::to_string(calls(counts, "all_reduce")) + " all-reduces, DDP's buckets " +
                           std::to_string(calls(want, "all_reduce")) + " time(s): you all-reduced on every "
                           "micro-batch. The result is right (the sum of the averages is the average of the sums) but "
                           "each micro-batch paid a whole all-reduce. Only the last micro-batch's backward needs to "
                           "synchronize: DDP's no_sync() lets the others add their gradients up locally (and it must "
                           "cover the forward too: the forward is where DDP decides whether this backward "
                           "synchronizes)");
    }
    if (auto extra = more_collectives(counts, want)) {
      return Outcome::fail(which + "more collectives than needed (on rank 0, " + *extra + "): one all-reduce per "
                           "bucket, on the last micro-batch's backward, is all a step needs");
    }
  }
  const Run single = single_process(ctx, in, kLr);
  if (!single.ok()) return Outcome::error("the single-process reference failed: " + single.message);
  if (auto why = weights_differ("after 2 steps, rank 0's weights", mine.out, "rank0.final.", single)) {
    const Run times = single_process(ctx, in, kLr * kMicro);
    if (times.ok() && !weights_differ("", mine.out, "rank0.final.", times)) {
      return Outcome::fail(call + ": the weights are those of one process with the learning rate times 4: the 4 "
                           "micro-batches' gradients added up to 4 times the mean. Divide each micro-batch's loss by "
                           "the number of micro-batches before backward, so that the sum is the mean");
    }
    return Outcome::fail(*why + "\n(zero_grad once, then each micro-batch's forward and backward, then one step)");
  }
  for (int r = 0; r < kWorld; ++r) {
    const nlohmann::json& got = rank_values(mine, r)["losses"];
    const nlohmann::json& want = rank_values(ref, r)["losses"];
    for (size_t e = 0; e < want.size(); ++e) {
      if (!close(got[e].get<double>(), want[e].get<double>())) {
        return Outcome::fail(call + ": on rank " + std::to_string(r) + " step " + std::to_string(e + 1) +
                             " returned " + got[e].dump() + ", expected " + want[e].dump() +
                             " (the mean over the micro-batches of their losses)");
      }
    }
  }
  ctx.details["step_collectives"] = rank_values(mine, 0)["step_collectives"];
  return Outcome::pass();
}

WORKBOOK_CHECK(train, "train() on 2 ranks: the losses and rank 0's checkpoint match one process; only rank 0 logs and saves; clean shutdown") {
  Bundle in;
  if (auto missing = base_inputs(ctx, in)) return *missing;
  put_training(in, ctx);
  const std::string call = "train(3 epochs, 16 examples, batch_size 8) on 2 ranks";
  Run mine, ref;
  if (auto early = run_both(ctx, "train", in, mine, ref, options_for(call))) return *early;
  plot_losses(ctx, "rank 0's loss per epoch", mine, ref);
  const nlohmann::json& printed = mine.out.values["stdout"];
  for (int r = 0; r < kWorld; ++r) {
    const nlohmann::json& v = rank_values(mine, r);
    if (v["initialized_after"].get<bool>()) {
      return Outcome::fail(call + ": on rank " + std::to_string(r) + " the process group is still initialized after "
                           "train() returned: call tiny::distributed::destroy_process_group() at the end, which "
                           "closes the connections to the other ranks cleanly");
    }
  }
  for (int r = 0; r < kWorld; ++r) {
    const size_t loaded = rank_values(mine, r)["served"].size(), share = rank_values(ref, r)["served"].size();
    if (loaded > share) {
      return Outcome::fail(call + ": rank " + std::to_string(r) + " loaded " + std::to_string(loaded) +
                           " examples in " + std::to_string(kEpochs) + " epochs, the reference's " +
                           std::to_string(share) + ": the weights can come out right with every rank going through "
                           "all the data, but that is one GPU's work done on each. Each rank should see only its "
                           "share of the examples, and the gradients should be averaged over the ranks at every step");
    }
  }
  if (auto extra = extra_collectives(call, mine, ref, "DDP's backward() averages the gradients, and the epoch's "
                                     "loss needs one all_reduce_mean per epoch, no more")) {
    return *extra;
  }
  if (auto why = fewer_all_reduced_bytes(rank_values(mine, 0)["collectives"], rank_values(ref, 0)["collectives"])) {
    return Outcome::fail(call + ": the ranks did not train together (on rank 0, " + *why + "). The weights can come "
                         "out right with every rank training alone on all the data, but that is one GPU's work done "
                         "on each: each rank should see only its share of the examples, and the gradients should be "
                         "averaged over the ranks at every step");
  }
  if (rank_values(mine, 1)["saved"].get<bool>()) {
    return Outcome::fail(call + ": rank 1 saved a checkpoint too (each rank was given its own path, to see who "
                         "saves). Every rank holds the same weights, and with one shared path the ranks would write "
                         "one file at once and could corrupt it: save only on rank 0 (get_rank() == 0)");
  }
  const nlohmann::json& rank0 = rank_values(mine, 0);
  if (!rank0["saved"].get<bool>()) {
    return Outcome::fail(call + ": rank 0 saved nothing to options.checkpoint: tiny::save(model->state_dict(), "
                         "options.checkpoint) on rank 0, after the last epoch");
  }
  if (rank0.contains("checkpoint_error")) {
    return Outcome::fail(call + ": rank 0's checkpoint cannot be read: " + rank0["checkpoint_error"].get<std::string>());
  }
  for (const std::string& name : mine.out.tensor_names()) {
    if (name.rfind("rank0.checkpoint.module.", 0) == 0) {
      return Outcome::fail(call + ": the checkpoint's keys start with \"module.\" (" + name.substr(17) +
                           "): you saved the DDP wrapper's state_dict. Save the plain model's "
                           "(model->state_dict() or ddp->module()->state_dict()), which loads without DDP");
    }
  }
  const Run single = single_process(ctx, in, kLr);
  if (!single.ok()) return Outcome::error("the single-process reference failed: " + single.message);
  if (auto why = weights_differ("rank 0's checkpoint after 3 epochs", mine.out, "rank0.checkpoint.", single)) {
    return Outcome::fail(*why);
  }
  const nlohmann::json& want = single.out.values["losses"];
  for (int r = 0; r < kWorld; ++r) {
    const nlohmann::json& got = rank_values(mine, r)["losses"];
    bool same = got.size() == want.size();
    for (size_t e = 0; same && e < want.size(); ++e) same = close(got[e].get<double>(), want[e].get<double>());
    if (!same) {
      return Outcome::fail(call + ": rank " + std::to_string(r) + " returned the losses " + list(got) +
                           ", expected " + list(want) + " (one per epoch: the all_reduce_mean of train_one_epoch's "
                           "loss, the same on every rank)");
    }
  }
  if (!printed[1].empty()) {
    return Outcome::fail(call + ": rank 1 printed " + std::to_string(printed[1].size()) + " line(s), e.g. \"" +
                         printed[1][0].get<std::string>() + "\": only rank 0 logs, or every line shows up once per "
                         "rank");
  }
  if (printed[0].size() < static_cast<size_t>(kEpochs)) {
    return Outcome::fail(call + ": rank 0 printed " + std::to_string(printed[0].size()) + " line(s) for " +
                         std::to_string(kEpochs) + " epochs: print one line per epoch with the epoch and its mean "
                         "loss on rank 0");
  }
  ctx.details["losses"] = rank0["losses"];
  ctx.details["rank0_log"] = printed[0];
  return Outcome::pass();
}
