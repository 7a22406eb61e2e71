// Lesson 5's checks: scatter and gather by hand, wrapping a model in
// DataParallel, and a DataParallel training step that must match training on
// one GPU, with the batch really split and the labels on the output device.
#include <cmath>
#include <optional>
#include <sstream>

#include "harness/checker.h"
#include "harness/compare.h"
#include "model.h"

using workbook::Bundle;
using workbook::Context;
using workbook::Outcome;
using workbook::Run;

WORKBOOK_LESSON(5, "5_data_parallel");
// What lesson 5 is about: the batch and the replicas copied from GPU to GPU.
WORKBOOK_LESSON_COUNTERS("bytes_device_to_device");

namespace {

constexpr double kLr = 0.2;
// DataParallel sums the replicas' gradients in another order than one GPU
// does: float32 rounding differs in the last bits, so compare with slack.
constexpr double kRtol = 1e-4, kAtol = 1e-5;

std::string join(const std::vector<int64_t>& values) {
  std::ostringstream s;
  for (size_t i = 0; i < values.size(); ++i) s << (i ? ", " : "") << values[i];
  return s.str();
}

// The sizes scatter must give: as equal as possible, the larger first.
std::vector<int64_t> expected_sizes(int64_t rows, int64_t parts) {
  std::vector<int64_t> sizes(static_cast<size_t>(parts), rows / parts);
  for (int64_t i = 0; i < rows % parts; ++i) ++sizes[static_cast<size_t>(i)];
  return sizes;
}

uint64_t counter(const nlohmann::json& counters, const std::string& name) {
  uint64_t total = 0;
  for (const nlohmann::json& device : counters) total += device.value(name, uint64_t{0});
  return total;
}

// The host round trip in `mine`'s copy counters that `ref`'s have not (bytes to
// the host beyond the reference's, and back), in words; empty when there is none.
std::string host_round_trip(const nlohmann::json& mine, const nlohmann::json& ref) {
  const uint64_t out_pageable = counter(mine, "bytes_device_to_host_pageable"),
                 out_pinned = counter(mine, "bytes_device_to_host_pinned"),
                 in_pageable = counter(mine, "bytes_host_to_device_pageable"),
                 in_pinned = counter(mine, "bytes_host_to_device_pinned");
  const uint64_t ref_out = counter(ref, "bytes_device_to_host_pageable") + counter(ref, "bytes_device_to_host_pinned"),
                 ref_in = counter(ref, "bytes_host_to_device_pageable") + counter(ref, "bytes_host_to_device_pinned");
  if (out_pageable + out_pinned <= ref_out || in_pageable + in_pinned <= ref_in) return "";
  return "the GPUs sent " + std::to_string(out_pageable + out_pinned) + " bytes to the host (" +
         std::to_string(out_pageable) + " pageable, " + std::to_string(out_pinned) + " pinned) and received " +
         std::to_string(in_pageable + in_pinned) + " from it (" + std::to_string(in_pageable) + " pageable, " +
         std::to_string(in_pinned) + " pinned), where the reference sends " + std::to_string(ref_out) +
         " and receives " + std::to_string(ref_in) + ": data went from a GPU through the CPU and back";
}

void put_model(Bundle& in, const Context& ctx) {
  tiny::manual_seed(ctx.seed);
  in.put_state("init", lesson5_checks::make_model()->state_dict());
}

}  // namespace

WORKBOOK_CHECK(scatter, "scatter() gives each device its own rows, sizes differing by at most one") {
  struct Case {
    int64_t rows;
    int gpus;
  };
  for (const Case c : {Case{10, 2}, Case{9, 2}, Case{10, 3}}) {
    Bundle in;
    in.put("batch", tiny::randn({c.rows, 3}, {}, ctx.generator(static_cast<uint64_t>(c.rows * 10 + c.gpus))));
    std::vector<std::string> names;
    for (int d = 0; d < c.gpus; ++d) names.push_back("cuda:" + std::to_string(d));
    in.values["devices"] = names;
    workbook::RunOptions options;
    options.gpus = c.gpus;
    const std::string call = "scatter(" + std::to_string(c.rows) + " rows, " + std::to_string(c.gpus) + " devices)";
    options.call = call;
    Run mine, ref;
    if (auto early = ctx.both("scatter", in, mine, ref, options)) return *early;
    const auto want = expected_sizes(c.rows, c.gpus);
    const size_t count = mine.out.values["pieces"].get<size_t>();
    if (count != want.size()) {
      return Outcome::fail(call + " returned " + std::to_string(count) + " pieces, expected one per device (" +
                           std::to_string(want.size()) + ")");
    }
    std::vector<int64_t> got;
    for (size_t i = 0; i < count; ++i) {
      const auto& shape = mine.out.info("piece." + std::to_string(i)).shape;
      got.push_back(shape.empty() ? -1 : shape[0]);
    }
    if (got != want) {
      return Outcome::fail(call + " gave pieces of " + join(got) + " rows, expected " + join(want) +
                           ": sizes must differ by at most one, the larger first (rows / n, plus one for the first "
                           "rows % n pieces)");
    }
    for (size_t i = 0; i < count; ++i) {
      const std::string name = "piece." + std::to_string(i);
      const std::string& device = mine.out.info(name).device;
      if (device != names[i]) {
        return Outcome::fail(call + ": piece " + std::to_string(i) + " is on " + device + ", expected " + names[i] +
                             " (piece i goes to devices[i])");
      }
      if (auto why = workbook::differ(call + ", piece " + std::to_string(i), mine.out, ref.out, name, 0, 0)) {
        return Outcome::fail(*why + "\n(piece 0 holds the first rows, piece 1 the next ones, in order)");
      }
    }
    const auto& bytes = mine.out.values["host_to_device"];
    const auto& expected_bytes = ref.out.values["host_to_device"];
    for (size_t d = 0; d < expected_bytes.size(); ++d) {
      const uint64_t b = bytes[d].get<uint64_t>(), e = expected_bytes[d].get<uint64_t>();
      if (b > e) {
        return Outcome::fail(call + ": cuda:" + std::to_string(d) + " received " + std::to_string(b) +
                             " bytes from the host for a piece of " + std::to_string(e) +
                             " bytes: you copied the whole batch to every device and cut it there; narrow first, "
                             "then copy only the piece (batch.narrow(0, start, length).to(device))");
      }
    }
  }
  return Outcome::pass();
}

WORKBOOK_CHECK(scatter_too_small, "scatter() refuses a batch with fewer rows than devices, with a tiny::ValueError") {
  Bundle in;
  in.put("batch", tiny::randn({1, 3}, {}, ctx.generator(7)));
  in.values["devices"] = std::vector<std::string>{"cuda:0", "cuda:1"};
  workbook::RunOptions options;
  options.call = "scatter(1 row, 2 devices)";
  const Run mine = ctx.student("scatter", in, options);
  if (mine.status == "todo") return Outcome::todo(mine.message);
  if (mine.ok()) {
    return Outcome::fail("scatter(1 row, 2 devices) returned " + mine.out.values["pieces"].dump() +
                         " pieces: with fewer rows than devices one device gets nothing to do; throw tiny::ValueError "
                         "saying so (TINY_CHECK(rows >= n, ValueError, ...))");
  }
  if (mine.status != "error" || mine.error_type != "tiny::ValueError") {
    return Outcome::fail("scatter(1 row, 2 devices) should throw tiny::ValueError, but " +
                         (mine.status == "error" ? "it threw " + mine.error_type + ": " + mine.message
                                                 : "it " + mine.message));
  }
  return Outcome::pass();
}

WORKBOOK_CHECK(gather, "gather() puts the pieces back in order on the output device") {
  for (const std::string output : {"cuda:0", "cuda:1"}) {
    Bundle in;
    in.put("piece.0", tiny::randn({3, 4}, {}, ctx.generator(21)));
    in.put("piece.1", tiny::randn({2, 4}, {}, ctx.generator(22)));
    in.values["devices"] = std::vector<std::string>{"cuda:0", "cuda:1"};
    in.values["output_device"] = output;
    workbook::RunOptions options;
    options.call = "gather(pieces on cuda:0 and cuda:1, output_device=" + output + ")";
    Run mine, ref;
    if (auto early = ctx.both("gather", in, mine, ref, options)) {
      if (early->verdict == workbook::Verdict::fail && mine.message.find("same device") != std::string::npos) {
        return Outcome::fail(options.call + ": tiny::cat got pieces on different devices: move every piece to "
                             "output_device first (piece.to(output_device))");
      }
      return *early;
    }
    if (auto why = workbook::differ(options.call, mine.out, ref.out, "out", 0, 0)) return Outcome::fail(*why);
    const std::string trip = host_round_trip(mine.out.values["copy_counters"], ref.out.values["copy_counters"]);
    if (!trip.empty()) {
      return Outcome::fail(options.call + ": right values, but " + trip + ". A piece goes straight from its GPU "
                           "to the other (piece.to(output_device)), with no stop on the host: .cpu() waits for "
                           "the GPU and copies twice");
    }
  }
  return Outcome::pass();
}

WORKBOOK_CHECK(wrap, "wrap() moves the model to the first device, then wraps it in DataParallel") {
  Bundle in;
  put_model(in, ctx);
  in.put("x", tiny::randn({6, lesson5_checks::kFeatures}, {}, ctx.generator(31)));
  in.values["device_ids"] = std::vector<int>{1, 0};
  workbook::RunOptions options;
  options.call = "wrap(model, device_ids={1, 0})";
  Run mine, ref;
  if (auto early = ctx.both("wrap", in, mine, ref, options)) {
    if (early->verdict == workbook::Verdict::fail && mine.message.find("module must have its parameters") != std::string::npos) {
      return Outcome::fail(options.call + ": the model was not on cuda:1 when the wrapper ran it. DataParallel "
                           "copies the model from device_ids[0] at every step: move it there first "
                           "(model->to(Device(kCUDA, device_ids[0]))), then wrap it.\n  " + mine.message);
    }
    return *early;
  }
  if (!mine.out.values["wraps_model"].get<bool>()) {
    return Outcome::fail(options.call + ": the DataParallel does not wrap the model you were given (dp->module() "
                         "is another module): pass `model` itself, so that training updates it");
  }
  if (mine.out.values["device_ids"] != ref.out.values["device_ids"]) {
    return Outcome::fail(options.call + ": the wrapper uses device_ids " + mine.out.values["device_ids"].dump() +
                         ", expected " + ref.out.values["device_ids"].dump() + ": pass device_ids on");
  }
  if (mine.out.values["module_device"] != "cuda:1") {
    return Outcome::fail(options.call + ": the model is on " + mine.out.values["module_device"].get<std::string>() +
                         ", expected cuda:1 (device_ids[0])");
  }
  if (auto why = workbook::differ(options.call + ", then a forward pass", mine.out, ref.out, "out", kRtol, kAtol)) {
    return Outcome::fail(*why);
  }
  return Outcome::pass();
}

// Right steps that give the allocator's cache back every step: the segment of
// cuda:1's replica returned to the device (memory_reserved after the step below
// the reference's) and asked for again at the next step (allocations that reached
// the device after the first step, which the reference's cache serves).
static std::optional<std::string> cache_churn(const Run& mine, const Run& ref) {
  const nlohmann::json& mallocs = mine.out.values["device_mallocs"];
  const nlohmann::json& ref_mallocs = ref.out.values["device_mallocs"];
  const nlohmann::json& reserved = mine.out.values["reserved_after_step"];
  const nlohmann::json& ref_reserved = ref.out.values["reserved_after_step"];
  uint64_t later = 0, ref_later = 0;  // allocations that reached a device in the steps after the first
  for (size_t k = 1; k < mallocs.size() && k < ref_mallocs.size(); ++k) {
    for (const nlohmann::json& m : mallocs[k]) later += m.get<uint64_t>();
    for (const nlohmann::json& m : ref_mallocs[k]) ref_later += m.get<uint64_t>();
  }
  bool dropped = false;  // memory_reserved of some GPU below the reference's after some step: segments given back
  std::string figures;
  for (size_t k = 0; k < reserved.size() && k < ref_reserved.size(); ++k) {
    for (size_t d = 0; d < reserved[k].size() && d < ref_reserved[k].size(); ++d) {
      dropped = dropped || reserved[k][d].get<uint64_t>() < ref_reserved[k][d].get<uint64_t>();
    }
  }
  for (size_t d = 0; !reserved.empty() && d < reserved.back().size(); ++d) {
    const auto mib = [](const nlohmann::json& bytes) {
      return workbook::number_text(bytes.get<double>() / (1 << 20), 3) + " MiB";
    };
    figures += std::string(d ? ", " : "") + "cuda:" + std::to_string(d) + " " + mib(reserved.back()[d]) +
               " (the reference's " + mib(ref_reserved.back()[d]) + ")";
  }
  if (!dropped || later <= ref_later) return std::nullopt;
  return "right losses and weights, but after the first step " + std::to_string(later) +
         " allocations went to the GPUs instead of the caching allocator (the reference: " + std::to_string(ref_later) +
         "), and memory_reserved after the last step is " + figures + ": that is empty_cache() every step. It "
         "gives the free segments back (the one cuda:1's replica used), and the next step asks the device for the "
         "same memory again (cudaMalloc, which is slow and synchronizes): it lowers memory_reserved and saves "
         "nothing. Let the cache keep its blocks (PyTorch's torch.cuda.empty_cache() is for handing memory to "
         "another process, not for a training loop)";
}

WORKBOOK_CHECK(train_step, "train_step() with DataParallel trains like one GPU, splitting the batch, labels on the output device") {
  constexpr int kSteps = 3;
  constexpr int64_t kRows = 9;  // uneven: 5 rows on cuda:0, 4 on cuda:1
  Bundle in;
  put_model(in, ctx);
  in.values["lr"] = kLr;
  in.values["steps"] = kSteps;
  for (int k = 0; k < kSteps; ++k) {
    in.put("x." + std::to_string(k),
           tiny::randn({kRows, lesson5_checks::kFeatures}, {}, ctx.generator(100 + static_cast<uint64_t>(k))));
    in.put("y." + std::to_string(k),
           tiny::randint(0, lesson5_checks::kClasses, {kRows}, tiny::kInt64, ctx.generator(200 + static_cast<uint64_t>(k))));
  }
  workbook::RunOptions options;
  options.call = "train_step(DataParallel over cuda:0 and cuda:1, batches of 9)";
  // Deferred mode: queued GPU work runs only when the host waits, so a loss read from a
  // non_blocking copy back that nobody waited for is stale every time, not now and then.
  options.mode = "deferred";
  Run mine, ref;
  if (auto early = ctx.both("train_step", in, mine, ref, options)) {
    const std::string& m = mine.message;
    if (early->verdict == workbook::Verdict::fail && m.find("same device") != std::string::npos &&
        m.find("cpu") != std::string::npos) {
      return Outcome::fail("the labels are still on cpu: the output is gathered on model.output_device() (cuda:0), "
                           "so move the labels there before the loss (batch.target.to(model.output_device()))\n  " + m);
    }
    return *early;
  }
  // The report plots the losses whatever the verdict (the reference's DataParallel steps equal one GPU's).
  ctx.details["curves"]["training loss per step"] = {{"yours", mine.out.values["losses"]},
                                                     {"reference", ref.out.values["losses"]}};
  // The batch must be split: one pass per replica, 5 rows on cuda:0 and 4 on cuda:1.
  const nlohmann::json& passes = mine.out.values["passes"][0];
  if (passes.size() != 2) {
    std::string why = "the batch was not split: the first step made " + std::to_string(passes.size()) +
                      " forward pass(es) (" + passes.dump() + ") instead of one per GPU (5 rows on cuda:0, 4 on cuda:1)";
    if (passes.size() == 1) why += ": call the DataParallel itself, model(batch.data), not model.module()";
    return Outcome::fail(why);
  }
  // Nothing goes from a GPU to the host and back (the loss's .item() excepted: the reference reads it too).
  const std::string trip =
      host_round_trip(mine.out.values["copy_counters"][0], ref.out.values["copy_counters"][0]);
  if (!trip.empty()) {
    return Outcome::fail("right losses, but in the first step " + trip + ". The output is already gathered on "
                         "model.output_device(): compute the loss there, with no .cpu() on the way (a round trip "
                         "waits for the GPU and copies twice; see the step_speed check's time)");
  }
  // Each GPU receives only its rows from the host (and cuda:0 the labels).
  const auto& bytes = mine.out.values["host_to_device"][0];
  const auto& expected = ref.out.values["host_to_device"][0];
  if (bytes[0].get<uint64_t>() > expected[0].get<uint64_t>()) {
    return Outcome::fail("cuda:0 received " + bytes[0].dump() + " bytes from the host in one step, expected " +
                         expected[0].dump() + ": the whole batch went to cuda:0 first and was scattered from there. "
                         "Give the CPU batch to the DataParallel as it is: it copies each GPU's rows straight to it");
  }
  // Same losses and weights as the same steps on one GPU.
  const Run single = ctx.reference("train_single", in, options);
  if (!single.ok()) return Outcome::error("the single-GPU reference failed: " + single.message);
  const nlohmann::json& losses = mine.out.values["losses"];
  const nlohmann::json& want = single.out.values["losses"];
  for (size_t k = 0; k < want.size(); ++k) {
    const double a = losses[k].get<double>(), b = want[k].get<double>();
    const bool right = std::fabs(a - b) <= kAtol + kRtol * std::fabs(b);
    // The probe: a copy into pinned memory in this step, and cuda:0 still busy when the loss came back.
    const nlohmann::json& idle = mine.out.values["idle"];
    if (!right && k < idle.size() && !idle[k].get<bool>() &&
        counter(mine.out.values["copy_counters"][k], "bytes_device_to_host_pinned") > 0) {
      return Outcome::fail("step " + std::to_string(k + 1) + " returned a loss of " + std::to_string(a) +
                           ", but the same step on one GPU gives " + std::to_string(b) + ": you read the host copy "
                           "before the copy finished. A non_blocking copy to the CPU (into pinned memory) returns at "
                           "once, and the GPU writes the value later: your step returned with the copy still queued "
                           "on cuda:0 (in this check's deferred mode nothing queued runs until the host waits; on a "
                           "real GPU it is a race you lose now and then). Return loss.item<double>(), which waits for "
                           "the GPU itself, or wait before reading the copy, tiny::cuda::synchronize() (PyTorch's "
                           "torch.cuda.synchronize())");
    }
    if (!right) {
      return Outcome::fail("step " + std::to_string(k + 1) + " returned a loss of " + std::to_string(a) +
                           ", but the same step on one GPU gives " + std::to_string(b) +
                           " (order: zero_grad, forward, cross_entropy, backward, step; return loss.item())");
    }
  }
  for (const auto& [name, tensor] : single.out.state("final")) {
    (void)tensor;
    if (auto why = workbook::differ("after " + std::to_string(kSteps) + " steps, " + name + " (compared with one GPU)",
                                    mine.out, single.out, "final." + name, kRtol, kAtol, false)) {
      return Outcome::fail(*why);
    }
  }
  ctx.details["losses"] = {{"data_parallel", losses}, {"one_gpu", want}};
  if (auto why = cache_churn(mine, ref)) return Outcome::fail(*why);
  return Outcome::pass();
}

static std::string ms_text(double ms) { return workbook::number_text(ms, 4) + " ms"; }

WORKBOOK_TIMED_CHECK(step_speed, "train_step() of a large model: DataParallel on 2 GPUs beats one, within 1.1x of the reference's modelled time") {
  // A 1024-1024-1024-10 MLP on a batch of 4096: on two modelled GPUs the halved
  // compute outweighs the replicas and the gather. The modelled clock is the
  // same on every run and machine, so 1.1x is a fair limit.
  constexpr double kLimit = 1.1;
  Bundle in;
  in.values["seed"] = ctx.seed;
  in.values["lr"] = 0.01;
  in.values["devices"] = 2;
  workbook::RunOptions options;
  options.call = "train_step(DataParallel over cuda:0 and cuda:1, a 1024-1024-1024-10 MLP, a batch of 4096)";
  options.timeout_s = 180;  // real matrix products of a large model on this CPU
  Run mine, ref;
  if (auto early = ctx.both("step_speed", in, mine, ref, options)) return *early;
  const std::string gpu = ref.out.values.value("modelled_gpu", "");
  Bundle single_in = in;
  single_in.values["devices"] = 1;
  const Run single = ctx.reference("step_speed", single_in, options);
  if (!single.ok()) return Outcome::error("the single-GPU reference failed: " + single.message);
  const double yours = mine.out.values["step_ms"].get<double>(), theirs = ref.out.values["step_ms"].get<double>(),
               one_gpu = single.out.values["step_ms"].get<double>();
  const double ratio = yours / std::max(theirs, 1e-9);
  ctx.details["timing"] = {{"yours_ms", {yours}}, {"reference_ms", {theirs}}, {"ratio", ratio},
                           {"ratio_low", ratio},  {"ratio_high", ratio},
                           {"clock", gpu.empty() ? "host" : "modelled " + gpu}};
  ctx.details["one_gpu_ms"] = one_gpu;
  if (mine.out.values.contains("trace") && ref.out.values.contains("trace")) {  // the report's two GPU timelines
    ctx.details["timelines"] = {{"yours", mine.out.values["trace"]}, {"reference", ref.out.values["trace"]}};
  }
  const std::string figures = "your DataParallel step took " + ms_text(yours) + ", the reference's " +
                              ms_text(theirs) + ", one GPU alone " + ms_text(one_gpu) +
                              (gpu.empty() ? " (host time)" : " on the modelled " + gpu);
  const std::string trip = host_round_trip(mine.out.values["copy_counters"], ref.out.values["copy_counters"]);
  if (!trip.empty()) {
    return Outcome::fail("your step is right in its numbers but makes a round trip through the host: " + trip +
                         ". " + figures + ". The output is already gathered on model.output_device(): compute the "
                         "loss there, with no .cpu() on the way");
  }
  if (gpu.empty()) return Outcome::pass("host time, advisory: " + figures);
  if (ratio > kLimit) {
    return Outcome::fail("your DataParallel step is slower than the reference's: " + figures + ": " +
                         workbook::number_text(ratio, 3) + "x, over the 1.1x limit. Modelled time is the same on "
                         "every run, so this is your step's doing, not noise: profile it (tiny::profiler, the "
                         "demo's --trace) and compare the host's track with the reference's order: zero_grad, the "
                         "DataParallel on the CPU batch, the labels to the output device, the loss, backward, step");
  }
  if (yours >= one_gpu) {
    return Outcome::fail("your DataParallel step is no faster than one GPU: " + figures);
  }
  // Measured as the demo's table measures it (one warm-up step, then the mean of 2): the same figures.
  return Outcome::pass("modelled time: " + figures + ": two GPUs " + workbook::number_text(one_gpu / yours, 3) +
                       "x faster than one (the mean of 2 steps after a warm-up, as the demo's table)");
}
