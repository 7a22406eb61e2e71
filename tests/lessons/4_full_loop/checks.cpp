// Lesson 4's checks: the loader, the copies, one step, one epoch and the
// evaluation, each run with the student's code and the reference from the same
// snapshot of a small MLP, on digits shipped in data/digits, compared step by step.
#include <algorithm>
#include <cmath>
#include <numeric>
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

WORKBOOK_LESSON(4, "4_full_loop");
// What lesson 4 is about: no needless waits in the loop, batches copied from pinned memory.
WORKBOOK_LESSON_COUNTERS("synchronizations", "bytes_host_to_device_pinned");

namespace {

constexpr double kLr = 0.1;
constexpr double kMomentum = 0.9;
// Student and reference run the same ops, so agreement is usually exact; the
// slack lets a loss written another way (e.g. log_softmax + nll_loss) pass.
constexpr double kLossRtol = 1e-4, kLossAtol = 1e-6;
constexpr double kParamRtol = 1e-4, kParamAtol = 1e-5;

bool close(double a, double b, double rtol = kLossRtol, double atol = kLossAtol) {
  return std::fabs(a - b) <= atol + rtol * std::fabs(b);
}



// The digits shipped in data/digits (train or test split), loaded once.
const tiny::data::Digits& digits(bool train) {
  static const tiny::data::Digits train_split("", true), test_split("", false);
  return train ? train_split : test_split;
}

// `n` random digits of a split, as "features" [n, 64] and "labels" [n] (prefix + name).
void put_digits(Bundle& in, const Context& ctx, uint64_t stream, int64_t n, bool train, const std::string& prefix = "") {
  const tiny::data::Digits& data = digits(train);
  const std::vector<int64_t> order = tiny::randperm(data.size(), ctx.generator(stream)).to_vector<int64_t>();
  const tiny::data::Batch batch = data.get_batch(std::vector<int64_t>(order.begin(), order.begin() + n));
  in.put(prefix + "features", batch.data);
  in.put(prefix + "labels", batch.target);
}

// The snapshot both sides start from: the graded MLP initialised from the run's seed.
void put_model(Bundle& in, const Context& ctx) {
  tiny::manual_seed(ctx.seed);
  lesson4_checks::ProbedMLP model;
  in.put_state("init", model.state_dict());
  in.values["lr"] = kLr;
  in.values["momentum"] = kMomentum;
  in.values["device"] = "cuda:0";
}

// Runs the student, then the reference; an early outcome when either did not return.
std::optional<Outcome> run_both(Context& ctx, const std::string& exercise, const Bundle& in, Run& mine, Run& ref) {
  return ctx.both(exercise, in, mine, ref);
}

// A mixed-device error: the message PyTorch (and tiny) give for tensors on two devices.
bool mixed_devices(const Run& run) {
  return run.status == "error" && run.message.find("same device") != std::string::npos &&
         run.message.find("cpu") != std::string::npos;
}

const char* kLabelsOnCpu = "the labels are still on cpu: move them with .to(device) before the loss";

uint64_t counter(const Run& run, const char* name) {
  const nlohmann::json& c = run.out.values["copy_counters"];
  return c.contains(name) ? c[name].get<uint64_t>() : 0;
}

// The index of the first loss that differs, or -1.
int first_difference(const nlohmann::json& mine, const nlohmann::json& ref) {
  for (size_t k = 0; k < std::min(mine.size(), ref.size()); ++k) {
    if (mine[k].is_null() || ref[k].is_null()) {
      if (mine[k].is_null() != ref[k].is_null()) return static_cast<int>(k);
      continue;
    }
    if (!close(mine[k].get<double>(), ref[k].get<double>())) return static_cast<int>(k);
  }
  return mine.size() == ref.size() ? -1 : static_cast<int>(std::min(mine.size(), ref.size()));
}

// Why the final weights differ, or nullopt.
std::optional<std::string> weights_differ(const Run& mine, const Run& ref, const std::string& call) {
  return workbook::state_differs("after " + call, mine.out, ref.out, "final", kParamRtol, kParamAtol);
}

// Sum of loss * batch size over examples, and the plain mean over batches, of the passes a run recorded.
struct Means {
  double weighted = 0, unweighted = 0;
  bool ok = false;  // every pass matched a batch
};
Means means_of(const Run& run) {
  const nlohmann::json& losses = run.out.values["pass_losses"];
  const nlohmann::json& sizes = run.out.values["batch_sizes"];
  Means m;
  if (losses.empty() || losses.size() != sizes.size()) return m;
  double sum = 0, plain = 0;
  int64_t examples = 0;
  for (size_t k = 0; k < losses.size(); ++k) {
    if (losses[k].is_null()) return m;
    sum += losses[k].get<double>() * sizes[k].get<double>();
    plain += losses[k].get<double>();
    examples += sizes[k].get<int64_t>();
  }
  m.weighted = sum / static_cast<double>(examples);
  m.unweighted = plain / static_cast<double>(losses.size());
  m.ok = true;
  return m;
}

bool any_true(const nlohmann::json& flags) {
  return std::any_of(flags.begin(), flags.end(), [](const nlohmann::json& f) { return f.get<bool>(); });
}

}  // namespace

// The right losses can still come back the wrong way: read on the host every
// step, or with their graph. Named from what the glue saw of the returned
// tensors and the counters of the steps (before it read anything back).
static Outcome step_habits(const Run& mine, const Run& ref, int steps) {
  const nlohmann::json& where = mine.out.values["loss_devices"];
  const std::string device = ref.out.values["loss_devices"].empty() ? "cuda:0" : ref.out.values["loss_devices"][0].get<std::string>();
  const uint64_t waits = mine.out.values["step_counters"].value("synchronizations", uint64_t{0});
  const uint64_t ref_waits = ref.out.values["step_counters"].value("synchronizations", uint64_t{0});
  for (const nlohmann::json& d : where) {
    if (d.get<std::string>() == "undefined") return Outcome::fail("train_step returned an empty tensor: return the batch's loss");
    if (d.get<std::string>() != device) {
      return Outcome::fail("train_step returned the loss on " + d.get<std::string>() + ", not on " + device +
                           " where it was computed: bringing it to the host (.item(), .cpu()) makes the host wait for "
                           "the GPU at every step (" + std::to_string(waits) + " waits in " + std::to_string(steps) +
                           " steps, the reference " + std::to_string(ref_waits) + "). Return loss.detach() as it is; "
                           "train_one_epoch reads the epoch's sum once");
    }
  }
  if (any_true(mine.out.values["loss_requires_grad"])) {
    return Outcome::fail("train_step returned the loss with its autograd graph (requires_grad is true): return "
                         "loss.detach(). Added up over an epoch, the attached losses keep every step's autograd graph "
                         "alive until the epoch ends");
  }
  if (waits > ref_waits) {
    return Outcome::fail("train_step made the host wait for the GPU " + std::to_string(waits) + " time(s) in " +
                         std::to_string(steps) + " steps (the reference: " + std::to_string(ref_waits) + "), though its "
                         "losses are right: an .item(), .cpu() or synchronize in the step waits for everything queued "
                         "before it, and so does a copy asked to be blocking (to_device(batch, device, false)). Leave "
                         "the loss on the device, copy the pinned batch with non_blocking=true; train_one_epoch reads "
                         "the sum once per epoch");
  }
  return Outcome::pass();
}

WORKBOOK_CHECK(make_loader, "make_loader() batches, shuffles with the generator and pins memory as asked") {
  constexpr int64_t n = 70, batch_size = 16;  // 4 full batches and a short one of 6
  Bundle data;
  // Feature 0 is the example's index, so the order the loader gives can be read back.
  const tiny::Tensor ids = tiny::arange(0.0, static_cast<double>(n), 1.0).reshape({n, 1});
  data.put("features", tiny::cat({ids, tiny::rand({n, 1}, {}, ctx.generator(1))}, 1));
  std::vector<double> labels(n);
  for (int64_t i = 0; i < n; ++i) labels[i] = static_cast<double>(i % 10);
  data.put("labels", tiny::tensor(labels, {n}, tiny::Dtype::Int64));
  const uint64_t seed = ctx.seed % 1000003 + 11;
  struct Case {
    bool shuffle, pin_memory;
    int num_workers;
  };
  for (const Case c : {Case{true, true, 2}, Case{false, false, 0}}) {
    Bundle in = data;
    in.values["batch_size"] = batch_size;
    in.values["shuffle"] = c.shuffle;
    in.values["pin_memory"] = c.pin_memory;
    in.values["num_workers"] = c.num_workers;
    in.values["generator_seed"] = seed;
    Run mine, ref;
    if (auto early = run_both(ctx, "make_loader", in, mine, ref)) return *early;
    const std::string call = std::string("make_loader(70 examples, batch_size=16, shuffle=") +
                             (c.shuffle ? "true" : "false") + ", pin_memory=" + (c.pin_memory ? "true" : "false") +
                             ", num_workers=" + std::to_string(c.num_workers) + ")";
    const nlohmann::json& sizes = mine.out.values["batch_sizes"];
    if (sizes != ref.out.values["batch_sizes"]) {
      std::string why = call + " gave batches of " + values_text(sizes, 10) + " examples, expected " +
                        values_text(ref.out.values["batch_sizes"], 10);
      if (sizes.size() == 4) why += ": keep the short last batch (drop_last stays false)";
      return Outcome::fail(why);
    }
    const int workers = mine.out.values.value("num_workers", -1);
    if (workers != c.num_workers) {
      std::string why = call + " made a loader with " + std::to_string(workers) + " worker thread(s): set "
                        "options.num_workers = num_workers";
      if (workers == 0) {
        why += " (with no workers the training loop prepares every batch itself, and the GPU waits meanwhile; "
               "workers prepare the next batches while the GPU trains on this one)";
      }
      return Outcome::fail(why);
    }
    const bool pinned = any_true(mine.out.values["pinned"]);
    const bool all_pinned = std::all_of(mine.out.values["pinned"].begin(), mine.out.values["pinned"].end(),
                                        [](const nlohmann::json& f) { return f.get<bool>(); });
    if (c.pin_memory && !all_pinned) {
      return Outcome::fail(call + ": the batches are in ordinary (pageable) memory, not pinned memory (copying them "
                           "to cuda:0 with non_blocking moved " + std::to_string(counter(mine, "bytes_host_to_device_pinned")) +
                           " bytes from pinned memory and " + std::to_string(counter(mine, "bytes_host_to_device_pageable")) +
                           " from pageable memory): set options.pin_memory = pin_memory; without it "
                           ".to(device, non_blocking=true) cannot copy asynchronously");
    }
    if (!c.pin_memory && pinned) {
      return Outcome::fail(call + ": the batches are in pinned memory although pin_memory is false: set "
                           "options.pin_memory = pin_memory (pinned memory is scarce, and needs a GPU)");
    }
    const nlohmann::json& order = mine.out.values["order"];
    if (order == ref.out.values["order"]) continue;
    std::vector<int64_t> sorted(n);
    std::iota(sorted.begin(), sorted.end(), 0);
    if (c.shuffle && order == nlohmann::json(sorted)) {
      return Outcome::fail(call + " gave the examples in their stored order " + values_text(order, 10) +
                           ": it did not shuffle; set options.shuffle = shuffle (a model that sees the data in the "
                           "same order every epoch learns that order)");
    }
    if (!c.shuffle) {
      return Outcome::fail(call + " gave the examples in the order " + values_text(order, 10) + ", expected the stored order " +
                           values_text(ref.out.values["order"], 10) + ": shuffle only when asked");
    }
    // A different shuffle: does the student's loader follow the generator at all?
    Bundle other = in;
    other.values["generator_seed"] = seed + 7919;
    const Run again = ctx.student("make_loader", other);
    if (auto early = ctx.unless_ok(again)) return *early;
    if (again.out.values["order"] == order) {
      return Outcome::fail(call + " ignores the generator: two different generators gave the same order " +
                           values_text(order, 10) + "; set options.generator = generator, so that a run can be repeated "
                           "and checked against another one");
    }
    return Outcome::fail(call + " with the same generator gave the order " + values_text(order, 10) +
                         ", the reference gives " + values_text(ref.out.values["order"], 10) +
                         ": let the DataLoader shuffle (options.shuffle, options.generator) rather than shuffling by hand");
  }
  return Outcome::pass();
}

WORKBOOK_CHECK(to_device, "to_device() puts the features and the labels on the device, without waiting when non_blocking") {
  Bundle data;
  put_digits(data, ctx, 2, 8, true);
  struct Case {
    bool pinned, non_blocking;
    const char* device;
  };
  for (const Case c : {Case{true, true, "cuda:0"}, Case{true, false, "cuda:0"}, Case{false, false, "cuda:1"},
                       Case{false, true, "cpu"}}) {
    Bundle in = data;
    in.values["pinned"] = c.pinned;
    in.values["non_blocking"] = c.non_blocking;
    in.values["device"] = c.device;
    Run mine, ref;
    if (auto early = run_both(ctx, "to_device", in, mine, ref)) return *early;
    const std::string call = std::string("to_device(") + (c.pinned ? "pinned" : "pageable") + " batch, " + c.device +
                             ", non_blocking=" + (c.non_blocking ? "true" : "false") + ")";
    const std::string want = ref.out.info("data").device;
    if (mine.out.has("target") && mine.out.info("target").defined && mine.out.info("target").device == "cpu" &&
        want != "cpu") {
      return Outcome::fail(call + ": " + kLabelsOnCpu + " (batch.target, as well as batch.data)");
    }
    if (mine.out.has("data") && mine.out.info("data").defined && mine.out.info("data").device == "cpu" && want != "cpu") {
      return Outcome::fail(call + ": the features (batch.data) are still on cpu: move them with .to(device), or the "
                           "model's weights on " + want + " meet an input on the cpu");
    }
    if (auto why = workbook::differ(call + ".data", mine.out, ref.out, "data", 0, 0)) return Outcome::fail(*why);
    if (auto why = workbook::differ(call + ".target", mine.out, ref.out, "target", 0, 0)) return Outcome::fail(*why);
    if (c.pinned && c.non_blocking) {
      const uint64_t waits = counter(mine, "synchronizations"), ref_waits = counter(ref, "synchronizations");
      if (waits > ref_waits) {
        return Outcome::fail(call + " made the host wait for the GPU " + std::to_string(waits) +
                             " time(s) (the reference: " + std::to_string(ref_waits) +
                             "): pass non_blocking on, .to(device, non_blocking), so a copy from pinned memory is "
                             "queued on the GPU and the host goes on at once");
      }
      if (counter(mine, "bytes_host_to_device_pinned") == 0) {
        return Outcome::fail(call + " copied " + std::to_string(counter(mine, "bytes_host_to_device_pageable")) +
                             " bytes from pageable memory and none from the pinned batch: copy the batch's own "
                             "tensors (batch.data.to(device, non_blocking)), not a fresh copy of them");
      }
    }
    if (c.pinned && !c.non_blocking) {
      // A caller that asks for a blocking copy may reuse the pinned batch as soon as to_device returns.
      const uint64_t waits = counter(mine, "synchronizations"), ref_waits = counter(ref, "synchronizations");
      if (waits < ref_waits) {
        return Outcome::fail(call + " returned before its copies finished (the host waited " + std::to_string(waits) +
                             " time(s), the reference " + std::to_string(ref_waits) + "): the caller asked for a "
                             "blocking copy, which may then refill the pinned batch at once. Pass the non_blocking "
                             "argument on instead of a fixed true");
      }
    }
  }
  return Outcome::pass();
}

WORKBOOK_CHECK(train_step, "train_step() matches the reference step by step: loss of each step, final weights") {
  constexpr int steps = 4;
  constexpr int64_t batch_size = 24;
  Bundle run_in, all;
  put_model(run_in, ctx);
  put_digits(all, ctx, 3, steps * batch_size, true);
  const tiny::Tensor x = all.tensor("features"), y = all.tensor("labels");
  for (int k = 0; k < steps; ++k) {
    run_in.put("x." + std::to_string(k), x.narrow(0, k * batch_size, batch_size).contiguous());
    run_in.put("y." + std::to_string(k), y.narrow(0, k * batch_size, batch_size).contiguous());
  }
  // The model arrives with the gradients a previous step left behind.
  tiny::Generator g = ctx.generator(4);
  for (const auto& [name, t] : run_in.state("init")) run_in.put("stale." + name, tiny::randn(t.sizes(), {}, g));
  run_in.values["stale_grads"] = true;
  run_in.values["steps"] = steps;

  const Run mine = ctx.student("train_step", run_in);
  if (mixed_devices(mine)) {
    Bundle probe = run_in;
    probe.values["labels_on_device"] = true;
    if (ctx.student("train_step", probe).ok()) {
      return Outcome::fail(std::string("train_step threw: ") + kLabelsOnCpu +
                           " (it works once the glue moves the labels for you):\n  " + mine.message);
    }
  }
  if (auto early = ctx.unless_ok(mine)) return *early;
  const Run ref = ctx.reference("train_step", run_in);
  if (!ref.ok()) return Outcome::error("the reference solution failed on these inputs (a bug in the workbook): " + ref.message);

  const nlohmann::json& losses = mine.out.values["losses"];
  const nlohmann::json& want = ref.out.values["losses"];
  ctx.details["curves"]["training loss per step"] = {{"yours", losses}, {"reference", want}};  // pass or fail
  if (mine.out.values["forward_passes"] != ref.out.values["forward_passes"]) {
    return Outcome::fail("train_step ran the model " + mine.out.values["forward_passes"].dump() + " times in " +
                         std::to_string(steps) + " steps: one forward pass per step (each pass also draws new "
                         "dropout masks)");
  }
  const int k = first_difference(losses, want);
  std::optional<std::string> weights = k < 0 ? weights_differ(mine, ref, std::to_string(steps) + " steps") : std::nullopt;
  if (k < 0 && !weights) return step_habits(mine, ref, steps);

  // Probe: one step from gradients left in .grad; without zero_grad they add to the new ones.
  if (k != 0) {
    Bundle probe = run_in;
    probe.values["steps"] = 1;
    Run one, one_ref;
    if (auto early = ctx.both("train_step", probe, one, one_ref)) return *early;
    // SGD's first step (momentum starts from the gradient) is p -= lr * grad: read back the gradient the
    // student's step used, and see whether it is the stale one plus the fresh one.
    bool used_stale = true, cleared_after = true;
    const tiny::StateDict init = run_in.state("init");
    for (const auto& [name, stale] : run_in.state("stale")) {
      const std::string key = "grad." + name;
      if (!one.out.has("final." + name) || !one_ref.out.info(key).defined) return Outcome::error("the train_step probe lacks " + key);
      const tiny::Tensor used = (init.at(name) - one.out.tensor("final." + name)) / kLr;
      if (workbook::differ(key, used, stale + one_ref.out.tensor(key), 1e-3, 1e-4)) used_stale = false;
      if (!one.out.has(key) || one.out.info(key).defined) cleared_after = false;
    }
    if (used_stale && cleared_after) {
      return Outcome::fail("train_step clears the gradients after the step instead of before backward(): the model "
                           "arrives with the previous step's gradients still in .grad, so your first backward() added "
                           "to them; call optimizer.zero_grad() first");
    }
    if (used_stale) {
      std::string why = "the gradients were not cleared: call optimizer.zero_grad() before loss.backward(); "
                        "backward() adds to what is in .grad, so each step also used the gradients of the step before";
      if (k > 0) {
        why += " (your losses " + values_text(losses) + ", expected " + values_text(want) + ": they part from step " +
               std::to_string(k + 1) + " on)";
      }
      return Outcome::fail(why);
    }
  }
  if (k >= 0) {
    std::string why = "the loss of step " + std::to_string(k + 1) + " is " +
                      (k < static_cast<int>(losses.size()) ? losses[k].dump() : std::string("missing")) +
                      ", expected " + (k < static_cast<int>(want.size()) ? want[k].dump() : std::string("none")) +
                      " (your losses " + values_text(losses) + ", expected " + values_text(want) + ")";
    if (k == 0) why += ": the first step starts from the same weights, so the forward pass or the loss differs "
                       "(cross_entropy of the model's output and the labels, averaged over the batch)";
    if (k > 0) why += ": the steps before it match, so an update went wrong (one optimizer.step() per step, after backward())";
    return Outcome::fail(why);
  }
  return Outcome::fail(*weights + "\n(the losses match: the update differs; call optimizer.step() once, after backward())");
}

// Right numbers, and every step's graph still alive: a running sum of losses
// that kept their graphs (added without .detach() or .item()) is itself part of
// the graph, so it holds each step's nodes until the epoch ends. Named only when
// the probe saw it: at each forward pass the glue counted the earlier passes whose
// output node still had an owner, and that count grew step over step.
static std::optional<std::string> graphs_kept(const Run& mine, const Run& ref) {
  const nlohmann::json& alive = mine.out.values["pass_graphs_alive"];
  const nlohmann::json& ref_alive = ref.out.values["pass_graphs_alive"];
  if (!alive.is_array() || alive.size() < 3) return std::nullopt;
  const int64_t last = alive.back().get<int64_t>();
  const int64_t ref_last = ref_alive.is_array() && !ref_alive.empty() ? ref_alive.back().get<int64_t>() : 0;
  bool growing = true;
  for (size_t k = 1; k < alive.size(); ++k) growing = growing && alive[k].get<int64_t>() > alive[k - 1].get<int64_t>();
  if (!growing || last <= ref_last) return std::nullopt;
  const size_t steps = alive.size();
  std::string why = "your running loss keeps every step's graph alive: when step " + std::to_string(steps) +
                    " began, the autograd graphs of " + std::to_string(last) + " earlier steps were still held (the "
                    "reference's: " + std::to_string(ref_last) + "), one more each step";
  const nlohmann::json& bytes = mine.out.values["pass_memory_allocated"];
  const nlohmann::json& ref_bytes = ref.out.values["pass_memory_allocated"];
  if (bytes.is_array() && bytes.size() == steps && ref_bytes.is_array() && ref_bytes.size() == steps &&
      bytes.back().get<int64_t>() > ref_bytes.back().get<int64_t>()) {
    why += ", and memory_allocated() at the start of the last step was " + std::to_string(bytes.back().get<int64_t>()) +
           " bytes, the reference's " + std::to_string(ref_bytes.back().get<int64_t>());
  }
  return why + ". The numbers are right, but a loss that still requires grad, added to a running sum, makes the sum "
               "part of its graph: the sum then holds every step's nodes (and whatever they saved) until the epoch "
               "ends. Add each loss without its graph: loss.detach(), what train_step returns (PyTorch: "
               "`total += loss.detach()`)";
}

WORKBOOK_CHECK(train_one_epoch, "train_one_epoch() trains like the reference and returns the loss per example, weighted by batch size") {
  Bundle in;
  put_model(in, ctx);
  put_digits(in, ctx, 5, 200, true);  // 200 = 6 batches of 32 and a short one of 8
  in.values["batch_size"] = 32;
  in.values["generator_seed"] = ctx.seed % 999983 + 5;
  // Deferred mode: queued GPU work runs only when the host waits, so a sum read from a
  // non_blocking copy back that nobody waited for is stale every time, not now and then.
  workbook::RunOptions options;
  options.mode = "deferred";
  const Run mine = ctx.student("train_one_epoch", in, options);
  if (mixed_devices(mine)) {
    return Outcome::fail("train_one_epoch threw a mixed-device error: a tensor is still on the cpu; move every batch, "
                         "features and labels, with to_device(batch, device, true) before using it:\n  " + mine.message);
  }
  if (auto early = ctx.unless_ok(mine)) return *early;
  const Run ref = ctx.reference("train_one_epoch", in, options);
  if (!ref.ok()) return Outcome::error("the reference solution failed on these inputs (a bug in the workbook): " + ref.message);

  const nlohmann::json& losses = mine.out.values["pass_losses"];
  const nlohmann::json& want = ref.out.values["pass_losses"];
  const size_t batches = ref.out.values["batch_sizes"].size();
  ctx.details["curves"]["training loss per step"] = {{"yours", losses}, {"reference", want}};  // the report plots it
  if (losses.size() != want.size()) {
    return Outcome::fail("over one epoch of " + std::to_string(batches) + " batches (200 examples, batch size 32) your "
                         "loop ran the model " + std::to_string(losses.size()) + " times: one train_step per batch of "
                         "the loader, and nothing else");
  }
  const int k = first_difference(losses, want);
  if (k >= 0) {
    std::string why = "the loss of step " + std::to_string(k + 1) + " is " + losses[k].dump() + ", expected " +
                      want[k].dump() + " (your steps " + values_text(losses) + ", expected " + values_text(want) + ")";
    if (k > 0) {
      why += ": the steps before it match, so an update went wrong (clear the gradients first, use the loss averaged "
             "over the batch, one optimizer.step() per batch)";
    }
    return Outcome::fail(why);
  }
  const Means m = means_of(mine);
  const double got = mine.out.values["mean_loss"].get<double>();
  // The probe: a copy into pinned memory, and the GPU still busy when the answer came back.
  if (m.ok && !close(got, m.weighted, 1e-5, 1e-7) && !mine.out.values.value("idle", true) &&
      mine.out.values.value("bytes_to_pinned", int64_t{0}) > 0) {
    return Outcome::fail("train_one_epoch returned " + number_text(got) + ", expected " + number_text(m.weighted) +
                         " (the mean loss per example of its steps, which are all right): you read the host copy "
                         "before the copy finished. A non_blocking copy to the CPU (into pinned memory) returns at "
                         "once, and the GPU writes the sum later, after every step queued before it: your function "
                         "returned with the copy still queued on cuda:0 (in this check's deferred mode nothing queued "
                         "runs until the host waits; on a real GPU it is a race you lose now and then). Wait before "
                         "reading it, tiny::cuda::synchronize() (PyTorch's torch.cuda.synchronize()), or read the sum "
                         "with .item(), which waits for the GPU itself: it is the epoch's one wait");
  }
  if (m.ok && !close(got, m.weighted, 1e-5, 1e-7)) {
    const int64_t last = mine.out.values["batch_sizes"].back().get<int64_t>();
    if (close(got, m.unweighted, 1e-5, 1e-7)) {
      return Outcome::fail("train_one_epoch returned " + number_text(got) + ", the plain mean of its " + std::to_string(batches) +
                           " batch losses: you averaged per batch, so the short last batch (" + std::to_string(last) +
                           " examples) counts as much as a full one (32). Weight each batch's loss by its size: "
                           "sum(loss * batch size) / 200 = " + number_text(m.weighted));
    }
    return Outcome::fail("train_one_epoch returned " + number_text(got) + ", expected the mean loss per example of its steps, " +
                         "sum(loss * batch size) / 200 = " + number_text(m.weighted) + " (the reference returned " +
                         number_text(ref.out.values["mean_loss"].get<double>()) + ")");
  }
  if (auto why = weights_differ(mine, ref, "one epoch")) return Outcome::fail(*why);
  if (auto why = graphs_kept(mine, ref)) return Outcome::fail(*why);
  return Outcome::pass();
}

// The epoch both epoch checks run: 200 digits (6 batches of 32 and one of 8) whose
// examples cost host time to load (model.h), through the student's make_loader with
// pinned memory and 2 workers, then train_one_epoch.
static Bundle epoch_bundle(const Context& ctx) {
  Bundle in;
  put_model(in, ctx);
  put_digits(in, ctx, 6, 200, true);
  in.values["batch_size"] = 32;
  in.values["num_workers"] = 2;
  in.values["load_ns_per_example"] = lesson4_checks::kLoadNsPerExample;
  in.values["generator_seed"] = ctx.seed % 999979 + 3;
  return in;
}

static const nlohmann::json& profile_of(const Run& run) { return run.out.values["profile"]; }
static double profiled(const Run& run, const char* key) { return profile_of(run).value(key, 0.0); }
static std::string ms_text(double ms) { return number_text(ms, 3) + " ms"; }

WORKBOOK_CHECK(epoch_copies_and_waits, "an epoch with your loader copies every batch from pinned memory and waits for the GPU once") {
  const Bundle in = epoch_bundle(ctx);
  Run mine, ref;
  if (auto early = run_both(ctx, "epoch_pipeline", in, mine, ref)) return *early;
  const uint64_t pinned = counter(mine, "bytes_host_to_device_pinned");
  const uint64_t pageable = counter(mine, "bytes_host_to_device_pageable");
  const bool traced = profile_of(mine).is_object() && profile_of(ref).is_object();
  if (pageable > 0 && counter(ref, "bytes_host_to_device_pageable") == 0) {
    std::string why = "your epoch copied " + std::to_string(pinned) + " bytes to cuda:0 from pinned memory and " +
                      std::to_string(pageable) + " from pageable memory; the reference copies " +
                      std::to_string(counter(ref, "bytes_host_to_device_pinned")) + " from pinned memory";
    if (traced) {
      why += ". Each pageable copy held the host until it was done: " + ms_text(profiled(mine, "pageable_copy_ms")) +
             " over " + std::to_string(profile_of(mine).value("pageable_copies", 0)) + " copies in the trace";
    }
    return Outcome::fail(why + ": non_blocking alone does not make a copy asynchronous, the batch must be pinned too; "
                               "make_loader must set options.pin_memory = pin_memory");
  }
  if (pinned != counter(ref, "bytes_host_to_device_pinned")) {
    return Outcome::fail("your epoch copied " + std::to_string(pinned) + " bytes to cuda:0 from pinned memory, the "
                         "reference " + std::to_string(counter(ref, "bytes_host_to_device_pinned")) +
                         ": every example of the data set should be copied once (one pass of the loader, all its batches)");
  }
  const uint64_t waits = counter(mine, "synchronizations"), ref_waits = counter(ref, "synchronizations");
  const size_t batches = mine.out.values["batches"].get<size_t>();
  if (waits > ref_waits) {
    std::string why = "your epoch of " + std::to_string(batches) + " steps made the host wait for the GPU " +
                      std::to_string(waits) + " times; the reference waits " + std::to_string(ref_waits) +
                      " time(s), to read the epoch's loss once at the end";
    if (traced) why += " (waiting: yours " + ms_text(profiled(mine, "sync_ms")) + ", the reference's " +
                       ms_text(profiled(ref, "sync_ms")) + ", in the trace)";
    // Probe: a value read back on the host is a copy to the host; a blocking copy to the GPU is not.
    const int back = profile_of(mine).value("copies_to_host", 0), ref_back = profile_of(ref).value("copies_to_host", 0);
    if (traced && back > ref_back) {
      return Outcome::fail(why + ". The trace shows " + std::to_string(back) + " copies back to the host (the "
                           "reference " + std::to_string(ref_back) + "): a value read every step (.item(), .cpu()) "
                           "waits for all the work queued before it, so the host can never run ahead of the GPU. Keep "
                           "the running loss on the device (a tensor you add each batch's loss to) and read it once, "
                           "after the loop");
    }
    // Probe: the glue ran your to_device alone on a pinned batch, so a blocking copy is named only when it waits.
    const uint64_t copy_waits = mine.out.values.value("to_device_synchronizations", uint64_t{0});
    if (copy_waits == 0 && mine.out.values.contains("to_device_synchronizations")) {
      return Outcome::fail(why + ". No value came back to the host, and your to_device does not wait (the glue "
                           "ran it alone on a pinned batch: 0 waits), so the waits are in the loop itself: a "
                           "tiny::cuda::synchronize(), or tiny::cuda::empty_cache(), which waits for the GPU before "
                           "it frees the cache (PyTorch's torch.cuda.empty_cache()), or a copy the loop asks to be "
                           "blocking (to_device(batch, device, false) in train_step waits at every batch). Nothing in "
                           "a training loop needs any of them: the GPU runs the steps in order, the cache is reused, "
                           "not leaked, and a pinned batch can be copied with non_blocking=true");
    }
    return Outcome::fail(why + ". No value came back to the host, and your to_device made the host wait " +
                         std::to_string(copy_waits) + " time(s) alone on one pinned batch: a copy with "
                         "non_blocking=false waits for the GPU; copy the batches with to_device(batch, device, "
                         "/*non_blocking=*/true)");
  }
  const double got = mine.out.values["mean_loss"].get<double>(), expected = ref.out.values["mean_loss"].get<double>();
  if (!close(got, expected)) {
    return Outcome::fail("with your loader, the epoch's mean loss is " + number_text(got) + ", expected " + number_text(expected) +
                         " (same data, generator and starting weights)");
  }
  ctx.details["copies"] = {{"pinned_bytes", pinned}, {"pageable_bytes", pageable}, {"synchronizations", waits}};
  return Outcome::pass("copied " + std::to_string(pinned) + " bytes from pinned memory; " + std::to_string(waits) +
                       " host wait(s) in " + std::to_string(batches) + " steps");
}

WORKBOOK_CHECK(evaluate, "evaluate() measures in eval mode without a graph, then puts the model back in train mode") {
  Bundle in;
  put_model(in, ctx);
  put_digits(in, ctx, 7, 150, false);  // 150 = 2 batches of 64 and a short one of 22
  in.values["batch_size"] = 64;
  const Run mine = ctx.student("evaluate", in);
  if (auto early = ctx.unless_ok(mine)) return *early;
  const Run ref = ctx.reference("evaluate", in);
  if (!ref.ok()) return Outcome::error("the reference solution failed on these inputs (a bug in the workbook): " + ref.message);
  const nlohmann::json& v = mine.out.values;
  if (v["pass_training"].empty()) return Outcome::fail("evaluate never ran the model over the loader's batches");
  if (any_true(v["pass_training"])) {
    return Outcome::fail("evaluate ran the model in training mode: call model.eval() before the loop, so dropout keeps "
                         "every unit (in training mode it zeroes 20% of them at random and the loss is noisy)");
  }
  if (any_true(v["pass_grad_enabled"]) || any_true(v["pass_requires_grad"])) {
    return Outcome::fail("evaluate recorded an autograd graph at every forward pass: evaluation never calls "
                         "backward(), yet the graph holds every activation in memory. Switch gradient recording off "
                         "while evaluate runs (what PyTorch's `with torch.no_grad():` does)");
  }
  if (!v["training_after"].get<bool>()) {
    return Outcome::fail("evaluate left the model in eval mode: call model.train() before returning, or the next "
                         "epoch trains with dropout switched off");
  }
  if (!v["grad_mode_after"].get<bool>()) {
    return Outcome::fail("evaluate left gradient recording switched off, so the next training step cannot call "
                         "backward(): use a tiny::NoGradGuard, which switches it back on when it goes out of scope, "
                         "rather than tiny::set_grad_enabled(false)");
  }
  if (v["grads_defined"].get<int>() != 0) {
    return Outcome::fail("evaluate changed the parameters' gradients: evaluation measures, it never calls backward()");
  }
  const double acc = v["accuracy"].get<double>(), want_acc = ref.out.values["accuracy"].get<double>();
  // A percentage is named as such even when it looks like a fraction (1 of 150 right: 0.67 for 0.0067).
  if (want_acc > 0.0 && std::fabs(acc - 100.0 * want_acc) < 1e-6) {
    return Outcome::fail("evaluate's accuracy is " + number_text(acc) + ": that is a percentage; return the fraction " +
                         number_text(want_acc) + " (correct / examples, in [0, 1])");
  }
  if (!(acc >= 0.0 && acc <= 1.0)) {
    return Outcome::fail("evaluate's accuracy is " + number_text(acc) + ": a fraction in [0, 1] was expected (" + number_text(want_acc) + ")");
  }
  if (std::fabs(acc - want_acc) > 1e-9) {
    return Outcome::fail("evaluate's accuracy is " + number_text(acc) + ", expected " + number_text(want_acc) + " (" +
                         number_text(std::round(want_acc * 150)) + " of 150 examples right): count the examples whose "
                         "largest logit is at the label, logits.argmax(1) == labels, over every batch");
  }
  const double loss = v["loss"].get<double>(), want = ref.out.values["loss"].get<double>();
  if (!close(loss, want)) {
    const Means m = means_of(mine);
    if (m.ok && close(loss, m.unweighted, 1e-5, 1e-7) && !close(m.unweighted, m.weighted, 1e-5, 1e-7)) {
      return Outcome::fail("evaluate's loss is " + number_text(loss) + ", the plain mean of its batch losses: you averaged per "
                           "batch, so the short last batch (22 examples) counts as much as a full one (64). Weight "
                           "each batch's loss by its size: sum(loss * batch size) / 150 = " + number_text(want));
    }
    return Outcome::fail("evaluate's loss is " + number_text(loss) + ", expected " + number_text(want) +
                         " (the mean cross-entropy per example over the 150 examples)");
  }
  // Right numbers, read too often: a .item() per batch makes the host wait for
  // the GPU at every batch (the counters see it, the values cannot).
  const uint64_t waits = counter(mine, "synchronizations"), ref_waits = counter(ref, "synchronizations");
  if (waits > ref_waits) {
    return Outcome::fail("evaluate made the host wait for the GPU " + std::to_string(waits) + " times over 3 batches "
                         "(the reference: " + std::to_string(ref_waits) + "): a .item() or .cpu() inside the loop waits "
                         "for every batch to finish. Keep the sums on the device, as tensors, and read them as numbers "
                         "once, after the loop");
  }
  return Outcome::pass("loss " + number_text(want, 4) + ", accuracy " + number_text(want_acc, 4) + " (untrained model)");
}

// What made an epoch slower than the reference's, each cause named only where
// the run's own figures show it (the loader's settings, the counters, the trace).
static std::string slow_causes(const Run& mine, const Run& ref) {
  std::string causes;
  const int workers = mine.out.values.value("num_workers", -1), ref_workers = ref.out.values.value("num_workers", -1);
  if (workers == 0 && ref_workers > 0 && profiled(mine, "loader_ms") > profiled(ref, "loader_ms")) {
    causes += "\n  - no workers: your loop loaded every batch itself, " + ms_text(profiled(mine, "loader_ms")) +
              " in the trace's enumerate(DataLoader) ranges (the reference, with " + std::to_string(ref_workers) +
              " workers, waited " + ms_text(profiled(ref, "loader_ms")) + " for its batches); set options.num_workers = "
              "num_workers, so the next batches load while the GPU trains";
  }
  if (counter(mine, "bytes_host_to_device_pageable") > 0 && counter(ref, "bytes_host_to_device_pageable") == 0) {
    causes += "\n  - pageable copies: " + std::to_string(profile_of(mine).value("pageable_copies", 0)) +
              " copies from pageable memory held the host " + ms_text(profiled(mine, "pageable_copy_ms")) +
              " (pinned ones free it at once); pin the batches (options.pin_memory)";
  }
  if (counter(mine, "synchronizations") > counter(ref, "synchronizations") &&
      profiled(mine, "sync_ms") > profiled(ref, "sync_ms")) {
    causes += "\n  - waits for the GPU: " + std::to_string(counter(mine, "synchronizations")) + " (the reference " +
              std::to_string(counter(ref, "synchronizations")) + "), " + ms_text(profiled(mine, "sync_ms")) +
              " of waiting; read the loss once per epoch, not every step";
  }
  return causes;
}

WORKBOOK_TIMED_CHECK(epoch_speed, "an epoch of your loop takes no more than 1.1x the reference's modelled time") {
  // The same epoch as epoch_copies_and_waits. On the emulated GPU both epochs are
  // timed by its modelled clock, the same on every run and machine, so 1.1x is a
  // fair limit. On a real GPU the host's clock is noisy: 5 alternating rounds,
  // and only a clear, consistent 3x slowdown fails.
  constexpr double kLimit = 1.1;
  const Bundle in = epoch_bundle(ctx);
  Run mine, ref;
  if (auto early = run_both(ctx, "epoch_pipeline", in, mine, ref)) return *early;
  const std::string gpu = ref.out.values.value("modelled_gpu", "");
  if (gpu.empty()) return Context::judge(ctx.time("epoch_pipeline", in), 3.0);
  if (!mine.out.values.contains("profile")) {
    return Outcome::fail("your code's run sent no modelled epoch time though the reference's did (its results are not to be trusted)");
  }
  const double yours = mine.out.values["epoch_ms"].get<double>(), theirs = ref.out.values["epoch_ms"].get<double>();
  const double ratio = yours / std::max(theirs, 1e-9);
  ctx.details["timing"] = {{"yours_ms", {yours}}, {"reference_ms", {theirs}}, {"ratio", ratio}, {"ratio_low", ratio},
                           {"ratio_high", ratio}, {"clock", "modelled " + gpu}};
  if (mine.out.values.contains("trace") && ref.out.values.contains("trace")) {  // the report's two timelines
    ctx.details["timelines"] = {{"yours", mine.out.values["trace"]}, {"reference", ref.out.values["trace"]}};
  }
  const std::string figures = "one epoch of " + mine.out.values["batches"].dump() + " steps took " + ms_text(yours) +
                              ", the reference " + ms_text(theirs) + " on the modelled " + gpu + ": " +
                              number_text(ratio, 3) + "x (GPU busy " +
                              number_text(100 * mine.out.values.value("utilization", 0.0), 3) + "% of yours, " +
                              number_text(100 * ref.out.values.value("utilization", 0.0), 3) + "% of the reference's)";
  if (ratio <= kLimit) return Outcome::pass("modelled time: " + figures);
  const std::string causes = slow_causes(mine, ref);
  return Outcome::fail("your epoch is slower than the reference's: " + figures + ", over the 1.1x limit. Modelled "
                       "time is the same on every run, so this is your loop's doing, not noise." +
                       (causes.empty() ? std::string(" Profile it (tiny::profiler, the demo's --trace) to see where the time goes")
                                       : " Where it went:" + causes));
}
