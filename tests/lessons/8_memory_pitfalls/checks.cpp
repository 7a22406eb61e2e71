// Lesson 8's checks: a training loop whose memory stays flat, evaluation without
// a graph, gradient accumulation that fits where the whole batch does not, and
// the caching allocator's figures. The emulated GPU runs in blocking mode here
// (each op done before the next is queued), so every memory figure is exact and
// the same on every run; capacities are set with TINY_EMULATED_GPU_MEMORY.
#include <algorithm>
#include <cmath>
#include <sstream>

#include "harness/checker.h"
#include "harness/compare.h"
#include "model.h"

using workbook::Bundle;
using workbook::number_text;
using workbook::values_text;
using workbook::Context;
using workbook::Outcome;
using workbook::Run;
using workbook::RunOptions;

WORKBOOK_LESSON(8, "8_memory_pitfalls");
// What lesson 8 is about: the peak of GPU memory, and allocations the cache did not serve.
WORKBOOK_LESSON_COUNTERS("max_memory_allocated", "device_mallocs");

namespace {

constexpr double kLr = 0.05;
constexpr double kLossRtol = 1e-4, kLossAtol = 1e-6;
constexpr double kParamRtol = 1e-4, kParamAtol = 1e-5;
// The capacity of the accumulation check: the whole batch's first activation
// (450 rows x 4 KiB = 1.8 MiB) is a large-pool request, which needs a 20 MiB
// segment: it can never fit; every request of a 100-row slice (at most
// 400 KiB) comes from the small pool's 2 MiB segments, which fit many times over.
constexpr const char* kCapacity = "16MiB";
constexpr int64_t kBatchRows = 450, kMicroBatch = 100;  // 4 slices of 100 and a short one of 50

bool close(double a, double b, double rtol = kLossRtol, double atol = kLossAtol) {
  return std::fabs(a - b) <= atol + rtol * std::fabs(b);
}


std::string kib(double bytes) {
  std::ostringstream s;
  s.precision(bytes >= 10 * 1024 ? 0 : 1);
  s << std::fixed << bytes / 1024.0 << " KiB";
  return s.str();
}


// Memory figures are exact only when each op has run before the next one is queued.
RunOptions memory_options(const std::string& capacity = "") {
  RunOptions options;
  options.mode = "blocking";
  if (!capacity.empty()) options.env["TINY_EMULATED_GPU_MEMORY"] = capacity;
  return options;
}

// The snapshot both sides start from: the graded MLP initialised from the run's seed.
void put_model(Bundle& in, const Context& ctx, double momentum = 0.0) {
  tiny::manual_seed(ctx.seed);
  lesson8_checks::ProbedMLP model;
  in.put_state("init", model.state_dict());
  in.values["lr"] = kLr;
  in.values["momentum"] = momentum;
}

// `count` batches of `rows` random examples as x.k / y.k.
void put_batches(Bundle& in, const Context& ctx, uint64_t stream, int count, int64_t rows) {
  tiny::Generator g = ctx.generator(stream);
  for (int k = 0; k < count; ++k) {
    in.put("x." + std::to_string(k), tiny::randn({rows, lesson8_checks::kFeatures}, {}, g));
    in.put("y." + std::to_string(k), tiny::randint(0, lesson8_checks::kClasses, {rows}, tiny::TensorOptions(tiny::kInt64), g));
  }
  in.values["batches"] = count;
}

// Why the final weights differ, or nullopt.
std::optional<std::string> weights_differ(const Run& mine, const Run& ref, const std::string& call) {
  return workbook::state_differs("after " + call, mine.out, ref.out, "final", kParamRtol, kParamAtol);
}

bool any_true(const nlohmann::json& flags) {
  return std::any_of(flags.begin(), flags.end(), [](const nlohmann::json& f) { return f.get<bool>(); });
}

size_t as_size(const nlohmann::json& v) { return v.get<size_t>(); }

bool is_oom(const Run& run) {
  return run.status == "error" && (run.error_type.find("OutOfMemory") != std::string::npos ||
                                   run.message.find("out of memory") != std::string::npos);
}

}  // namespace

// ---------------------------------------------------------------- the training loop

namespace {
constexpr int kSteps = 8, kWarmup = 2;
constexpr int64_t kTrainRows = 64;

Bundle train_inputs(const Context& ctx) {
  Bundle in;
  put_model(in, ctx, /*momentum=*/0.9);  // momentum buffers appear at step 1: part of the warm-up
  put_batches(in, ctx, 1, kSteps - 1, kTrainRows);
  // A short last batch: the mean must weight each batch by its size.
  tiny::Generator g = ctx.generator(2);
  in.put("x." + std::to_string(kSteps - 1), tiny::randn({24, lesson8_checks::kFeatures}, {}, g));
  in.put("y." + std::to_string(kSteps - 1), tiny::randint(0, lesson8_checks::kClasses, {24}, tiny::TensorOptions(tiny::kInt64), g));
  in.values["batches"] = kSteps;
  return in;
}
}  // namespace

WORKBOOK_CHECK(train_epoch, "train_epoch() trains like the reference and returns the loss of each step and the mean per example") {
  const Bundle in = train_inputs(ctx);
  Run mine, ref;
  // Deferred mode: queued GPU work runs only when the host waits, so a loss read from a
  // non_blocking copy back that nobody waited for is stale every time, not now and then.
  RunOptions options = memory_options();
  options.mode = "deferred";
  if (auto early = ctx.both("train_epoch", in, mine, ref, options)) return *early;
  const nlohmann::json& losses = mine.out.values["losses"];
  const nlohmann::json& want = ref.out.values["losses"];
  ctx.details["curves"]["training loss per step"] = {{"yours", losses}, {"reference", want}};
  if (losses.size() != want.size()) {
    return Outcome::fail("train_epoch returned " + std::to_string(losses.size()) + " losses for " +
                         std::to_string(kSteps) + " batches: push back the loss of every step, as a number "
                         "(loss.item<double>()), in order");
  }
  for (size_t k = 0; k < want.size(); ++k) {
    if (!close(losses[k].get<double>(), want[k].get<double>()) && !mine.out.values.value("idle", true) &&
        mine.out.values.value("bytes_to_pinned", int64_t{0}) > 0) {
      // The probe: a copy into pinned memory, and the GPU still busy when the losses came back.
      const bool same_weights = !weights_differ(mine, ref, "the epoch");
      return Outcome::fail("the loss of step " + std::to_string(k + 1) + " is " + number_text(losses[k].get<double>()) +
                           ", expected " + number_text(want[k].get<double>()) + " (your losses " + values_text(losses) +
                           ", expected " + values_text(want) +
                           (same_weights ? "; your weights at the end are right" : "") + "): you read the host "
                           "copy before the copy finished. A non_blocking copy to the CPU (into pinned memory) returns "
                           "at once, and the GPU writes the value later: your function returned with the copy still "
                           "queued on cuda:0 (in this check's deferred mode nothing queued runs until the host waits; "
                           "on a real GPU it is a race you lose now and then). Read each loss with "
                           "loss.item<double>(), which waits for the GPU itself, or wait before reading the copy, "
                           "tiny::cuda::synchronize() (PyTorch's torch.cuda.synchronize())");
    }
    if (!close(losses[k].get<double>(), want[k].get<double>())) {
      return Outcome::fail("the loss of step " + std::to_string(k + 1) + " is " + number_text(losses[k].get<double>()) +
                           ", expected " + number_text(want[k].get<double>()) + " (your losses " + values_text(losses) +
                           ", expected " + values_text(want) + "): per batch, zero_grad, forward, cross_entropy, backward, "
                           "step, and record that step's loss");
    }
  }
  const double got = mine.out.values["mean_loss"].get<double>(), expected = ref.out.values["mean_loss"].get<double>();
  if (!close(got, expected)) {
    double plain = 0;
    for (const auto& l : losses) plain += l.get<double>();
    plain /= static_cast<double>(losses.size());
    if (close(got, plain)) {
      return Outcome::fail("train_epoch's mean_loss is " + number_text(got) + ", the plain mean of the step losses: the last "
                           "batch has 24 examples, the others 64; weight each loss by its batch size: "
                           "sum(loss * size) / examples = " + number_text(expected));
    }
    return Outcome::fail("train_epoch's mean_loss is " + number_text(got) + ", expected " + number_text(expected) +
                         " (the mean loss per example over the epoch)");
  }
  if (auto why = weights_differ(mine, ref, "the epoch")) return Outcome::fail(*why);
  return Outcome::pass();
}

WORKBOOK_CHECK(memory_flat, "train_epoch() keeps memory_allocated flat from step to step (no graph kept alive)") {
  const Bundle in = train_inputs(ctx);
  Run mine, ref;
  if (auto early = ctx.both("train_epoch", in, mine, ref, memory_options())) return *early;
  const nlohmann::json& mem = mine.out.values["pass_allocated"];
  const nlohmann::json& alive = mine.out.values["pass_older_graphs_alive"];
  if (mem.size() != static_cast<size_t>(kSteps)) {
    return Outcome::fail("train_epoch ran the model " + std::to_string(mem.size()) + " times for " +
                         std::to_string(kSteps) + " batches: one forward pass per batch");
  }
  ctx.details["memory_allocated at each step (bytes)"] = {{"yours", mem}, {"reference", ref.out.values["pass_allocated"]}};
  // The report plots allocated and reserved over the epoch, a marker per step.
  ctx.details["memory"] = {{"yours", mine.out.values["timeline"]}, {"reference", ref.out.values["timeline"]}};
  const size_t first = as_size(mem[kWarmup]), last = as_size(mem[kSteps - 1]);
  const size_t graphs = as_size(alive[kSteps - 1]);
  const std::string figures = "memory_allocated at the start of each step: " +
                              values_text(mem, kSteps, [](const nlohmann::json& v) { return kib(v.get<double>()); });
  if (graphs > 0) {
    const double per_step = last > first ? static_cast<double>(last - first) / (kSteps - 1 - kWarmup) : 0.0;
    return Outcome::fail("your loop keeps the loss tensor of every step alive, and its graph with it: at step " +
                         std::to_string(kSteps) + ", the graphs of " + std::to_string(graphs) + " earlier steps "
                         "were still alive, and memory_allocated grew by " + kib(per_step) + " per step (" + figures +
                         "). That is a running total kept as a tensor, `total = total + loss` (PyTorch's classic "
                         "`total_loss += loss`), or a history of tensors, `history.push_back(loss)`. backward() "
                         "already freed the saved activations, so the GPU figure creeps (each kept loss, each sum), "
                         "while the graph grows on the host at every step; over a long run both add up. Keep "
                         "numbers: v = loss.item<double>(); total += v * n; history.push_back(v)");
  }
  if (last > first) {
    return Outcome::fail("memory_allocated grew by " + kib(static_cast<double>(last - first) / (kSteps - 1 - kWarmup)) +
                         " per step after the warm-up (" + figures + "), though no graph stayed alive: your loop "
                         "keeps a tensor on the GPU at every step (e.g. a history of loss.detach()): keep numbers "
                         "on the host, loss.item<double>(), and memory stays flat over any number of steps");
  }
  return Outcome::pass("memory_allocated " + kib(static_cast<double>(last)) + " at every step from step " +
                       std::to_string(kWarmup + 1) + " on");
}

// ---------------------------------------------------------------- evaluation

WORKBOOK_CHECK(evaluate, "evaluate() records no graph: right loss and accuracy, peak memory of a no-grad pass") {
  Bundle in;
  put_model(in, ctx);
  put_batches(in, ctx, 3, 2, 200);
  // A short last batch: the mean per example weighs each batch's mean loss by its size. Its labels
  // are the classes the initial model finds least likely, so its mean loss is well above the full
  // batches' and the plain mean of the three batch means misses the answer by far more than the
  // tolerance, whatever the seed (with random labels, 9 seeds in 150 put it within 1e-4 and such
  // code passed).
  tiny::Generator g = ctx.generator(9);
  const tiny::Tensor short_x = tiny::randn({56, lesson8_checks::kFeatures}, {}, g);
  {
    tiny::manual_seed(ctx.seed);
    lesson8_checks::ProbedMLP initial;  // the weights put_model() stored
    tiny::NoGradGuard no_grad;
    in.put("x.2", short_x);
    in.put("y.2", tiny::argmin(initial(short_x), 1));
  }
  in.values["batches"] = 3;
  const std::string examples = "456 examples (batches of 200, 200 and 56)";
  Run mine, ref;
  // Deferred mode: queued GPU work runs only when the host waits, so a count or a loss read from
  // a non_blocking copy back that nobody waited for is stale every time, not now and then.
  RunOptions options = memory_options();
  options.mode = "deferred";
  if (auto early = ctx.both("evaluate", in, mine, ref, options)) return *early;
  const nlohmann::json& v = mine.out.values;
  if (v["pass_grad_enabled"].empty()) return Outcome::fail("evaluate never ran the model over the batches");
  const size_t peak = as_size(v["peak_above_start"]), ref_peak = as_size(ref.out.values["peak_above_start"]);
  const double graph = static_cast<double>(as_size(v["pass_held"][0]));
  if (any_true(v["pass_grad_enabled"]) || any_true(v["pass_requires_grad"])) {
    return Outcome::fail("evaluate recorded an autograd graph at every forward pass: each one kept " + kib(graph) +
                         " of activations alive after it, for a backward() that never comes (with "
                         "a running total kept as a tensor, they would pile up batch after batch). Switch gradient "
                         "recording off while evaluate runs (what PyTorch's `with torch.no_grad():` does)");
  }
  if (!v["grad_mode_after"].get<bool>()) {
    return Outcome::fail("evaluate left gradient recording switched off, so the next training step cannot call "
                         "backward(): use a tiny::NoGradGuard, which switches it back on when it goes out of scope, "
                         "rather than tiny::set_grad_enabled(false)");
  }
  if (peak > ref_peak + 64 * 1024) {
    return Outcome::fail("evaluate's peak memory is " + kib(static_cast<double>(peak)) + " above the model and data, "
                         "the reference's " + kib(static_cast<double>(ref_peak)) + ": keep one batch's tensors at a "
                         "time (the loss and the count as numbers, .item())");
  }
  const double acc = v["accuracy"].get<double>(), want_acc = ref.out.values["accuracy"].get<double>();
  const double loss = v["loss"].get<double>(), want = ref.out.values["loss"].get<double>();
  // The probe: a copy into pinned memory, and the GPU still busy when the answer came back.
  if ((std::fabs(acc - want_acc) > 1e-9 || !close(loss, want)) && !v.value("idle", true) &&
      v.value("bytes_to_pinned", int64_t{0}) > 0) {
    return Outcome::fail("evaluate returned loss " + number_text(loss) + " and accuracy " + number_text(acc) +
                         ", expected " + number_text(want) + " and " + number_text(want_acc) + ": you read the host "
                         "copy before the copy finished. A non_blocking copy to the CPU (into pinned memory) returns "
                         "at once, and the GPU writes the value later: your function returned with the copy still "
                         "queued on cuda:0 (in this check's deferred mode nothing queued runs until the host waits; "
                         "on a real GPU it is a race you lose now and then). Read with .item(), which waits for the "
                         "GPU itself, or wait before reading the copy, tiny::cuda::synchronize() (PyTorch's "
                         "torch.cuda.synchronize())");
  }
  if (std::fabs(acc - want_acc) > 1e-9) {
    return Outcome::fail("evaluate's accuracy is " + number_text(acc) + ", expected " + number_text(want_acc) +
                         " (the fraction of the " + examples + " whose largest logit is at the label)");
  }
  if (!close(loss, want)) {
    // Probe: the plain mean of the batches' mean losses (right only when every batch has the same size).
    double sum = 0.0;
    for (const nlohmann::json& b : ref.out.values["batch_losses"]) sum += b.get<double>();
    const double per_batch = sum / static_cast<double>(ref.out.values["batch_losses"].size());
    if (close(loss, per_batch)) {
      return Outcome::fail("evaluate's loss is " + number_text(loss) + ", the mean of the 3 batches' mean losses; "
                           "expected " + number_text(want) + ", the mean per example over the " + examples +
                           ". The short last batch counts as much as a full one in your mean: weigh each batch's "
                           "mean loss by its number of rows, then divide by the number of examples");
    }
    return Outcome::fail("evaluate's loss is " + number_text(loss) + ", expected " + number_text(want) +
                         " (the mean cross-entropy per example over the " + examples + ")");
  }
  return Outcome::pass("peak " + kib(static_cast<double>(peak)) + " above the model and data");
}

// ---------------------------------------------------------------- gradient accumulation

namespace {

Bundle accumulation_inputs(const Context& ctx) {
  Bundle in;
  put_model(in, ctx);
  tiny::Generator g = ctx.generator(4);
  in.put("inputs", tiny::randn({kBatchRows, lesson8_checks::kFeatures}, {}, g));
  in.put("targets", tiny::randint(0, lesson8_checks::kClasses, {kBatchRows}, tiny::TensorOptions(tiny::kInt64), g));
  in.values["micro_batch"] = kMicroBatch;
  return in;
}

// A combination of the slices' gradients: sum of weight[k] * slice k.
tiny::StateDict combine(const Bundle& grads, const std::vector<std::string>& names, const std::vector<double>& weights) {
  tiny::StateDict out;
  for (const std::string& name : names) {
    tiny::Tensor sum;
    for (size_t k = 0; k < weights.size(); ++k) {
      if (weights[k] == 0) continue;
      const tiny::Tensor term = grads.tensor("slice" + std::to_string(k) + "." + name) * weights[k];
      sum = sum.defined() ? sum + term : term;
    }
    out.insert(name, sum);
  }
  return out;
}

}  // namespace

WORKBOOK_CHECK(accumulate_matches_big_batch, "accumulate_and_step() makes the same update as one step on the whole batch") {
  const Bundle in = accumulation_inputs(ctx);
  const Run mine = ctx.student("accumulate_and_step", in, memory_options());
  if (auto early = ctx.unless_ok(mine)) return *early;
  const Run grads = ctx.reference("gradients", in, memory_options());
  if (!grads.ok()) return Outcome::error("the workbook's gradients failed (a bug in the workbook): " + grads.message);

  const tiny::StateDict init = in.state("init");
  std::vector<std::string> names;
  for (const auto& [name, t] : init) names.push_back(name);
  const std::vector<double> rows = grads.out.values["slice_rows"].get<std::vector<double>>();
  const size_t slices = rows.size();
  const double total = static_cast<double>(kBatchRows);

  // The gradient the student's step used: SGD without momentum moved each parameter by -lr * grad.
  const auto matches = [&](const tiny::StateDict& expected, double rtol, double atol) -> std::optional<std::string> {
    for (const std::string& name : names) {
      if (!mine.out.has("final." + name)) return "no parameter " + name;
      const tiny::Tensor used = (init.at(name) - mine.out.tensor("final." + name)) / kLr;
      if (auto why = workbook::differ("the gradient of " + name + " your step used", used, expected.at(name), rtol, atol)) {
        return why;
      }
    }
    return std::nullopt;
  };
  tiny::StateDict full;
  for (const std::string& name : names) full.insert(name, grads.out.tensor("full." + name));
  const std::optional<std::string> wrong = matches(full, 2e-3, 2e-5);
  const std::string setup = "one step on " + std::to_string(kBatchRows) + " examples in micro-batches of " +
                            std::to_string(kMicroBatch) + " (4 of 100 and a last one of 50)";

  if (wrong) {
    std::vector<double> sizes(slices), ones(slices, 1.0), by_count(slices, 1.0 / static_cast<double>(slices)),
        last_sized(slices, 0.0), last_count(slices, 0.0), last_alone(slices, 0.0), full_sized(slices), full_count(slices);
    for (size_t k = 0; k < slices; ++k) sizes[k] = rows[k] / total;
    last_sized.back() = rows.back() / total;
    last_count.back() = 1.0 / static_cast<double>(slices);
    last_alone.back() = 1.0;
    const size_t full_slices = slices - 1;
    for (size_t k = 0; k < slices; ++k) {
      full_sized[k] = k < full_slices ? rows[k] / total : 0.0;
      full_count[k] = k < full_slices ? 1.0 / static_cast<double>(full_slices) : 0.0;
    }
    const auto is = [&](const std::vector<double>& weights) { return !matches(combine(grads.out, names, weights), 2e-3, 2e-5); };
    if (is(ones)) {
      return Outcome::fail(setup + ": your update is " + std::to_string(slices) + " times too large: backward() adds "
                           "each micro-batch's gradient into .grad, so the sum of " + std::to_string(slices) +
                           " mean losses was used; scale each micro-batch's loss by its share of the batch, "
                           "rows / batch size (1 / number of micro-batches when they are equal), before backward()");
    }
    if (is(last_sized) || is(last_count) || is(last_alone)) {
      return Outcome::fail(setup + ": only the last micro-batch's gradient reached the step: zero_grad() inside "
                           "the loop wipes what the earlier micro-batches added to .grad; call optimizer.zero_grad() "
                           "once, before the loop");
    }
    if (is(full_sized) || is(full_count)) {
      return Outcome::fail(setup + ": the last, shorter micro-batch (50 rows) is missing from the update: loop while "
                           "start < batch size and take std::min(micro_batch, batch size - start) rows, so every "
                           "example counts");
    }
    if (is(by_count)) {
      return Outcome::fail(setup + ": each micro-batch's loss was divided by the number of micro-batches (5), but the "
                           "last one holds 50 rows, not 100: weight each by rows / batch size (100/450 and 50/450), "
                           "so that the gradients add up to those of the mean loss over all 450 examples");
    }
    return Outcome::fail(setup + ": " + *wrong + "\n(expected the gradient of the whole batch's mean loss: zero_grad "
                         "once, backward of loss * rows / batch size for each micro-batch, one optimizer.step())");
  }
  const double loss = mine.out.values["loss"].get<double>(), want = grads.out.values["full_loss"].get<double>();
  if (!close(loss, want, 1e-4, 1e-6)) {
    return Outcome::fail(setup + ": the update is right, but the returned loss is " + number_text(loss) + ", expected " +
                         number_text(want) + ", the mean loss over all " + std::to_string(kBatchRows) +
                         " examples: sum of loss.item<double>() * rows / batch size");
  }
  return Outcome::pass();
}

WORKBOOK_CHECK(accumulate_fits, "accumulate_and_step() fits a batch whose activations do not fit on the GPU at once") {
  const Bundle in = accumulation_inputs(ctx);
  const RunOptions limited = memory_options(kCapacity);
  Run mine, ref;
  mine = ctx.student("accumulate_and_step", in, limited);
  if (mine.status == "todo" || mine.status == "crash") return *ctx.unless_ok(mine);
  // The premise: the whole batch at once does not fit in this capacity.
  const Run big = ctx.reference("big_batch_step", in, limited);
  if (!is_oom(big)) return Outcome::error("the whole batch fitted in " + std::string(kCapacity) + " (a bug in the workbook): " + big.message);
  ref = ctx.reference("accumulate_and_step", in, limited);
  if (!ref.ok()) return Outcome::error("the reference failed under the " + std::string(kCapacity) + " limit (a bug in the workbook): " + ref.message);
  const size_t ref_peak = as_size(ref.out.values["peak_above_start"]);

  // Probe: the same step without a limit, with micro-batches of 100 and of 50.
  // Keeping every micro-batch's graph until the end keeps all 450 rows'
  // activations, whatever the slice size; a correct step's peak shrinks with the slices.
  struct Probe {
    bool ran = false, whole_batch = false, keeps_all_graphs = false;
    size_t peak100 = 0, peak50 = 0;
  };
  const auto probe = [&]() {
    Probe p;
    Bundle again = in;
    const Run a = ctx.student("accumulate_and_step", again, memory_options());
    again.values["micro_batch"] = kMicroBatch / 2;
    const Run b = ctx.student("accumulate_and_step", again, memory_options());
    if (!a.ok() || !b.ok()) return p;
    p.ran = true;
    p.peak100 = as_size(a.out.values["peak_above_start"]);
    p.peak50 = as_size(b.out.values["peak_above_start"]);
    const nlohmann::json& rows = a.out.values["pass_rows"];
    p.whole_batch = !rows.empty() && rows[0].get<int64_t>() >= kBatchRows;
    p.keeps_all_graphs = !p.whole_batch && p.peak100 > ref_peak * 3 / 2 && p.peak50 * 10 > p.peak100 * 8;
    return p;
  };
  const std::string limit = "under a " + std::string(kCapacity) + " capacity (TINY_EMULATED_GPU_MEMORY)";
  const auto all_graphs = [&](const Probe& p) {
    return "it keeps every micro-batch's graph until one backward() at the end (peak " +
           kib(static_cast<double>(p.peak100)) + " with micro-batches of 100, " + kib(static_cast<double>(p.peak50)) +
           " with 50, the reference " + kib(static_cast<double>(ref_peak)) + " with 100: yours does not shrink with "
           "the slices, it is the whole batch's). Call backward() on each micro-batch's scaled loss right away: its "
           "activations are freed at once, and the peak is one micro-batch's";
  };
  if (is_oom(mine)) {
    const Probe p = probe();
    if (p.whole_batch) {
      return Outcome::fail(limit + " your step ran out of memory: the model got all " + std::to_string(kBatchRows) +
                           " rows at once; run it on slices of micro_batch rows, inputs.narrow(0, start, rows):\n  " +
                           mine.message);
    }
    if (p.keeps_all_graphs) return Outcome::fail(limit + " your step ran out of memory: " + all_graphs(p));
    return Outcome::fail(limit + " your step ran out of memory, the reference fits (peak " +
                         kib(static_cast<double>(ref_peak)) + " above the model and data):\n  " + mine.message);
  }
  if (auto early = ctx.unless_ok(mine)) return *early;
  const size_t peak = as_size(mine.out.values["peak_above_start"]);
  if (peak > ref_peak * 5 / 4 + 64 * 1024) {
    const Probe p = probe();
    if (p.keeps_all_graphs) return Outcome::fail(limit + " your step fits, just: " + all_graphs(p));
    return Outcome::fail(limit + " your step's peak memory is " + kib(static_cast<double>(peak)) +
                         " above the model and data, the reference's " + kib(static_cast<double>(ref_peak)) +
                         ": hold one micro-batch's tensors at a time");
  }
  return Outcome::pass("peak " + kib(static_cast<double>(peak)) + " above the model and data; the whole batch at once "
                       "runs out of memory");
}

// ---------------------------------------------------------------- reading the allocator

WORKBOOK_CHECK(free_and_measure, "free_and_measure() reads memory_allocated and memory_reserved of the tensor's device, before and after") {
  Bundle data;
  // 3 MiB of float32: a large-pool block in a 20 MiB segment.
  data.put("tensor", tiny::randn({768, 1024}, {}, ctx.generator(5)));
  for (const char* device : {"cuda:0", "cuda:1"}) {
    Bundle in = data;
    in.values["device"] = device;
    Run mine, ref;
    if (auto early = ctx.both("free_and_measure", in, mine, ref, memory_options())) return *early;
    const nlohmann::json& v = mine.out.values;
    const nlohmann::json& w = ref.out.values;
    const std::string call = std::string("free_and_measure(a 3 MiB tensor on ") + device + ")";
    const auto text = [](const nlohmann::json& r) {
      return "allocated " + kib(r["allocated"].get<double>()) + ", reserved " + kib(r["reserved"].get<double>());
    };
    const std::string figures = "\n  yours:    before: " + text(v["before"]) + "; after the free: " + text(v["after_free"]) +
                                "; after empty_cache: " + text(v["after_empty_cache"]) + "\n  expected: before: " +
                                text(w["before"]) + "; after the free: " + text(w["after_free"]) +
                                "; after empty_cache: " + text(w["after_empty_cache"]);
    bool same = true;
    for (const char* when : {"before", "after_free", "after_empty_cache"}) {
      same = same && v[when] == w[when];
    }
    if (same) continue;
    bool other_device = true, swapped = true;
    for (const char* when : {"before", "after_free", "after_empty_cache"}) {
      other_device = other_device && v[when] == v["other_device"];
      swapped = swapped && v[when]["allocated"] == w[when]["reserved"] && v[when]["reserved"] == w[when]["allocated"];
    }
    if (other_device && w["before"] != v["other_device"]) {
      return Outcome::fail(call + ": these are the figures of the other GPU: memory_allocated() without an index reads "
                           "the current device; pass the tensor's, tensor.device().index(), and read it before the "
                           "tensor goes" + figures);
    }
    if (swapped) {
      return Outcome::fail(call + ": allocated and reserved are swapped: memory_allocated is what live tensors hold, "
                           "memory_reserved what the caching allocator holds from the device (live plus cached), so "
                           "reserved >= allocated" + figures);
    }
    if (v["after_free"]["allocated"] == v["before"]["allocated"] && w["after_free"]["allocated"] != w["before"]["allocated"]) {
      return Outcome::fail(call + ": memory_allocated did not go down after the free: the tensor is still alive; a "
                           "Tensor is a shared handle, so drop the last one, tensor = tiny::Tensor() (PyTorch's "
                           "`del tensor`), before reading" + figures);
    }
    if (v["after_empty_cache"]["reserved"] == v["after_free"]["reserved"] &&
        w["after_empty_cache"]["reserved"] != w["after_free"]["reserved"]) {
      return Outcome::fail(call + ": memory_reserved did not go down after empty_cache: free the tensor first, then "
                           "call tiny::cuda::empty_cache() (it gives back only segments with no live tensor), then read" +
                           figures);
    }
    return Outcome::fail(call + ": the readings differ from the expected ones" + figures);
  }
  return Outcome::pass();
}

// ---------------------------------------------------------------- the allocator's cache

WORKBOOK_CHECK(cache_reused, "train_epoch() lets the caching allocator reuse its blocks (no empty_cache() in the loop)") {
  // Batches of 512: each activation (2 MiB) is a large-pool block, in a 20 MiB
  // segment of its own that the cache keeps from step to step (with batches of
  // 64 every block fits beside the weights, and nothing could be given back).
  Bundle in;
  put_model(in, ctx, /*momentum=*/0.9);
  put_batches(in, ctx, 8, 6, 512);
  in.values["keep_trace"] = true;
  Run mine, ref;
  if (auto early = ctx.both("train_epoch", in, mine, ref, memory_options())) return *early;
  if (mine.out.values.contains("trace") && ref.out.values.contains("trace")) {  // the report's two GPU timelines
    ctx.details["timelines"] = {{"yours", mine.out.values["trace"]}, {"reference", ref.out.values["trace"]}};
  }
  // Allocations the cache could not serve went to the device (cudaMalloc on a
  // real GPU: slow, and it synchronizes); segments given back show as drops of
  // memory_reserved in the timeline.
  const uint64_t mallocs = mine.counters().value("device_mallocs", uint64_t{0});
  const uint64_t ref_mallocs = ref.counters().value("device_mallocs", uint64_t{0});
  const int64_t frees = mine.out.values.value("segment_frees", int64_t{0});
  ctx.details["device mallocs (allocations the cache did not serve)"] = {{"yours", mallocs}, {"reference", ref_mallocs}};
  if (frees > 0 && mallocs > ref_mallocs) {
    return Outcome::fail("your loop gave " + std::to_string(frees) + " segments back to the GPU during the epoch, and " +
                         std::to_string(mallocs) + " allocations went to the device instead of the cache (the "
                         "reference: " + std::to_string(ref_mallocs) + "): that is "
                         "empty_cache() every step. It lowers memory_reserved and nothing else: the next step asks the "
                         "device again for the same memory (cudaMalloc, which is slow and synchronizes). Let the "
                         "cache keep its blocks; call tiny::cuda::empty_cache() only to hand memory to another "
                         "process, or to read memory_reserved after freeing");
  }
  if (mallocs > ref_mallocs + 2) {
    return Outcome::fail(std::to_string(mallocs) + " allocations went to the device, not the cache (the reference: " +
                         std::to_string(ref_mallocs) + "): something in your loop keeps asking for new memory; "
                         "memory_summary() shows which sizes");
  }
  return Outcome::pass(std::to_string(mallocs) + " device mallocs, none given back: the cache served every step");
}

// ---------------------------------------------------------------- a step's memory from its parts

namespace {

// The prediction must be within this of the measured peak. The prediction
// counts what is alive at the end of the forward pass; the real peak comes in
// backward(), where short-lived tensors (the gradient flowing back through a
// layer, before and after its ReLU) take the place of the activations already
// freed, and the allocator rounds each block up to 512 bytes: here the two
// differ by about 2%. Each part is at least 9 MiB of a 48 MiB step, so a part
// left out is always seen.
constexpr double kPredictTolerance = 0.05;

std::string mib(double bytes) {
  std::ostringstream s;
  s.precision(bytes >= 10 * 1024 * 1024 ? 1 : 2);
  s << std::fixed << bytes / (1024.0 * 1024.0) << " MiB";
  return s.str();
}

}  // namespace

WORKBOOK_CHECK(predict_step_memory, "predict_step_memory() predicts an Adam step's peak memory from its parts") {
  using namespace lesson8_checks;
  Bundle in;
  tiny::manual_seed(ctx.seed);
  in.put_state("init", make_predict_mlp()->state_dict());
  tiny::Generator g = ctx.generator(6);
  in.put("inputs", tiny::randn({kPredictBatch, kPredictFeatures}, {}, g));
  in.put("targets", tiny::randint(0, kClasses, {kPredictBatch}, tiny::TensorOptions(tiny::kInt64), g));
  in.values["batch_size"] = kPredictBatch;
  const Run mine = ctx.student("predict_step_memory", in, memory_options());
  if (auto early = ctx.unless_ok(mine)) return *early;
  Bundle measured = in;
  measured.values["measure"] = true;
  const Run ref = ctx.reference("predict_step_memory", measured, memory_options());
  if (!ref.ok()) return Outcome::error("the workbook's measured step failed (a bug in the workbook): " + ref.message);
  const nlohmann::json& v = mine.out.values;
  const nlohmann::json& w = ref.out.values;
  const double peak = w["measured_peak"].get<double>();
  const double params = w["parameters"].get<double>();
  const std::string model = "the 256-1024-1024-1024-10 MLP with Adam, a batch of " + std::to_string(kPredictBatch);
  ctx.details["step memory (bytes)"] = {{"yours", v}, {"reference", w}};

  const double ref_error = (w["total"].get<double>() - peak) / peak;
  if (std::fabs(ref_error) > kPredictTolerance) {
    return Outcome::error("the reference's prediction, " + mib(w["total"].get<double>()) + ", is not within " +
                          "5% of the measured peak, " + mib(peak) + " (a bug in the workbook: the model or tiny's "
                          "memory use changed)");
  }
  const auto got = [&](const char* part) { return v[part].get<double>(); };
  const auto want = [&](const char* part) { return w[part].get<double>(); };
  const auto near = [](double a, double b) { return std::fabs(a - b) <= 0.02 * b + 4096; };
  if (!near(got("parameters"), want("parameters"))) {
    return Outcome::fail(model + ": you predicted " + mib(got("parameters")) + " of parameters, they hold " +
                         mib(params) + ": sum numel() * element_size() over model.parameters(), weights and biases");
  }
  if (got("gradients") == 0) {
    return Outcome::fail(model + ": you left out the gradients: backward() gives every parameter a .grad() of its "
                         "own size, " + mib(params) + " here, alive until the next zero_grad()");
  }
  if (!near(got("gradients"), want("gradients"))) {
    return Outcome::fail(model + ": you predicted " + mib(got("gradients")) + " of gradients, expected " +
                         mib(want("gradients")) + ": one .grad() per parameter, the parameter's size");
  }
  if (got("optimizer_states") == 0) {
    return Outcome::fail(model + ": you left out Adam's two states: 2 x " + mib(params) + " (exp_avg and exp_avg_sq, "
                         "each the size of the parameters, kept from step to step; SGD without momentum keeps none)");
  }
  if (near(got("optimizer_states"), params)) {
    return Outcome::fail(model + ": you counted one optimizer state, " + mib(params) + "; Adam keeps two per "
                         "parameter (exp_avg and exp_avg_sq, PyTorch's optimizer.state[p]): 2 x " + mib(params));
  }
  if (!near(got("optimizer_states"), want("optimizer_states"))) {
    return Outcome::fail(model + ": you predicted " + mib(got("optimizer_states")) + " of optimizer states, expected " +
                         mib(want("optimizer_states")) + ": what does Adam keep per parameter?");
  }
  const double acts = want("activations"), one_layer = acts / kPredictLayers;
  if (got("activations") == 0) {
    return Outcome::fail(model + ": you left out the activations kept for backward: " + mib(acts) + " here (" +
                         std::to_string(kPredictLayers) + " hidden layers x " + mib(one_layer) + "), the largest "
                         "part, and the one that grows with the batch");
  }
  if (!near(got("activations"), acts)) {
    std::string why = "count one batch x width float tensor per hidden layer: each ReLU's output, which the next "
                      "Linear saves too (one tensor, not two); the output before the ReLU is freed once the ReLU "
                      "has run, and the logits are batch x 10";
    if (near(got("activations"), 2 * acts)) why = "you counted each hidden layer twice, before and after its ReLU: " + why;
    return Outcome::fail(model + ": you predicted " + mib(got("activations")) + " of activations, expected " +
                         mib(acts) + ": " + why);
  }
  const double total = got("total");
  const double error = (total - peak) / peak;
  if (std::fabs(error) > kPredictTolerance) {
    return Outcome::fail(model + ": your parts add up to " + mib(total) + ", the measured peak "
                         "(max_memory_allocated, less the batch) is " + mib(peak) + ": total() must be their sum");
  }
  // A second case the lesson does not name: another width and batch, from
  // the seed. Each part must follow the model and the batch, not the numbers
  // of the first case (a constant that fits the first passes nothing here).
  Bundle other;
  tiny::Generator g2 = ctx.generator(8);
  const int64_t hidden = 384 + 128 * tiny::randint(0, 4, {1}, tiny::TensorOptions(tiny::kInt64), g2).item<int64_t>();
  const int64_t batch = 200 + tiny::randint(0, 600, {1}, tiny::TensorOptions(tiny::kInt64), g2).item<int64_t>();
  other.put_state("init", make_predict_mlp(hidden)->state_dict());
  other.values["hidden"] = hidden;
  other.values["batch_size"] = batch;
  const Run mine2 = ctx.student("predict_step_memory", other, memory_options());
  if (auto early = ctx.unless_ok(mine2)) return *early;
  const Run ref2 = ctx.reference("predict_step_memory", other, memory_options());
  if (!ref2.ok()) return Outcome::error("the reference's prediction failed (a bug in the workbook): " + ref2.message);
  const std::string model2 = "the 256-" + std::to_string(hidden) + "-" + std::to_string(hidden) + "-" +
                             std::to_string(hidden) + "-10 MLP with Adam, a batch of " + std::to_string(batch);
  ctx.details["step memory, second case (bytes)"] = {{"yours", mine2.out.values}, {"reference", ref2.out.values}};
  for (const char* part : {"parameters", "gradients", "optimizer_states", "activations", "total"}) {
    const double yours = mine2.out.values[part].get<double>(), expected = ref2.out.values[part].get<double>();
    if (!near(yours, expected)) {
      return Outcome::fail(model2 + " (a second case): you predicted " + mib(yours) + " of " + part + ", expected " +
                           mib(expected) + "; the first case was right, so compute each part from the model and the "
                           "batch you are given, not from that case's numbers");
    }
  }
  std::ostringstream pct;
  pct.precision(1);
  pct << std::fixed << 100 * error;
  return Outcome::pass("predicted " + mib(total) + ", max_memory_allocated " + mib(peak) + " (" + pct.str() +
                       "%), and " + mib(mine2.out.values["total"].get<double>()) + " for " + model2);
}

// ---------------------------------------------------------------- activation checkpointing

namespace {

// Under this capacity the checkpointing MLP's step does not fit without
// checkpointing (it reserves 48 MiB) and fits with it (28 MiB).
constexpr const char* kCheckpointCapacity = "40MiB";

Bundle checkpoint_inputs(const Context& ctx) {
  using namespace lesson8_checks;
  Bundle in;
  tiny::manual_seed(ctx.seed);
  in.put_state("init", make_checkpoint_mlp()->state_dict());
  tiny::Generator g = ctx.generator(7);
  in.put("inputs", tiny::randn({kCheckpointBatch, kCheckpointFeatures}, {}, g));
  in.put("targets", tiny::randint(0, kClasses, {kCheckpointBatch}, tiny::TensorOptions(tiny::kInt64), g));
  return in;
}

}  // namespace

WORKBOOK_CHECK(checkpoint_gradients, "checkpointed_forward() gives exactly the gradients of the model without checkpointing") {
  const Bundle in = checkpoint_inputs(ctx);
  const Run mine = ctx.student("checkpointed_step", in, memory_options());
  if (auto early = ctx.unless_ok(mine)) return *early;
  const Run plain = ctx.reference("plain_step", in, memory_options());
  if (!plain.ok()) return Outcome::error("the workbook's step without checkpointing failed (a bug in the workbook): " + plain.message);
  const double loss = mine.out.values["loss"].get<double>(), want = plain.out.values["loss"].get<double>();
  if (!close(loss, want)) {
    return Outcome::fail("the loss of your forward is " + number_text(loss) + ", model(x)'s " + number_text(want) +
                         ": run every block, in order, and return the output layer's logits");
  }
  const tiny::StateDict init = in.state("init");
  for (const auto& entry : init) {
    const std::string& name = entry.first;
    if (!mine.out.has("grad." + name)) {
      return Outcome::fail(name + " got no gradient from backward(): the chain from the loss back to it is cut. A "
                           "checkpointed block must get the previous block's output itself (not a .detach()ed copy) "
                           "and run with grad mode on, or backward() cannot reach the blocks before it");
    }
    if (auto why = workbook::differ("the gradient of " + name, mine.out.tensor("grad." + name),
                                    plain.out.tensor("grad." + name), 1e-5, 1e-7)) {
      return Outcome::fail(*why + "\n(checkpointing recomputes the same forward: the gradients are those of model(x))");
    }
  }
  return Outcome::pass();
}

WORKBOOK_CHECK(checkpoint_fits, "checkpointed_forward() fits a step that runs out of memory without checkpointing") {
  const Bundle in = checkpoint_inputs(ctx);
  const RunOptions limited = memory_options(kCheckpointCapacity);
  const Run mine = ctx.student("checkpointed_step", in, limited);
  if (mine.status == "todo" || mine.status == "crash") return *ctx.unless_ok(mine);
  const Run plain = ctx.reference("plain_step", in, limited);
  if (!is_oom(plain)) {
    return Outcome::error("the step without checkpointing fitted in " + std::string(kCheckpointCapacity) +
                          " (a bug in the workbook): " + plain.message);
  }
  const Run ref = ctx.reference("checkpointed_step", in, limited);
  if (!ref.ok()) return Outcome::error("the reference failed under the " + std::string(kCheckpointCapacity) + " limit (a bug in the workbook): " + ref.message);
  const size_t ref_peak = as_size(ref.out.values["peak_above_start"]);
  const std::string limit = "a batch of " + std::to_string(lesson8_checks::kCheckpointBatch) + " under a " +
                            std::string(kCheckpointCapacity) + " capacity (TINY_EMULATED_GPU_MEMORY)";
  // The probe: the same step with no limit, yours beside model(x)'s.
  const auto keeps_everything = [&](size_t* peak, size_t* plain_peak) {
    const Run a = ctx.student("checkpointed_step", in, memory_options());
    const Run b = ctx.reference("plain_step", in, memory_options());
    if (!a.ok() || !b.ok()) return false;
    *peak = as_size(a.out.values["peak_above_start"]);
    *plain_peak = as_size(b.out.values["peak_above_start"]);
    return *peak * 10 >= *plain_peak * 9;
  };
  const auto peaks = [&](size_t peak, size_t plain_peak) {
    return "peak " + mib(static_cast<double>(peak)) + " above the model and batch, model(x)'s " +
           mib(static_cast<double>(plain_peak)) + ", the reference's " + mib(static_cast<double>(ref_peak));
  };
  const std::string advice = "wrap each deep block in tiny::utils::checkpoint (it keeps the block's input only and "
                             "runs the block again in backward()); the first block's input needs no grad, so "
                             "checkpoint cannot reach its parameters there";
  size_t peak = 0, plain_peak = 0;
  if (is_oom(mine)) {
    if (keeps_everything(&peak, &plain_peak)) {
      return Outcome::fail(limit + ": your step ran out of memory, as model(x) does: your forward keeps every "
                           "block's activations (" + peaks(peak, plain_peak) + "); " + advice);
    }
    return Outcome::fail(limit + ": your step ran out of memory, the reference's fits (peak " +
                         mib(static_cast<double>(ref_peak)) + "):\n  " + mine.message);
  }
  if (auto early = ctx.unless_ok(mine)) return *early;
  const size_t mine_peak = as_size(mine.out.values["peak_above_start"]);
  if (mine_peak > ref_peak * 5 / 4 + 64 * 1024) {
    return Outcome::fail(limit + ": your step fits, just: its peak is " + mib(static_cast<double>(mine_peak)) +
                         ", the reference's " + mib(static_cast<double>(ref_peak)) + "; " + advice);
  }
  return Outcome::pass("peak " + mib(static_cast<double>(mine_peak)) + " above the model and batch; without "
                       "checkpointing the step runs out of memory");
}
