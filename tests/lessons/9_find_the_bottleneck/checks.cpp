// Lesson 9's checks: measuring a training program on the GPU's clock (step
// time, GPU-Util, achieved TFLOP/s), each fix of the planted program (no
// .item() per step, non_blocking copies, bfloat16 products, one wait per
// epoch), and the fixed program's speed. Every run is on the modelled clock of
// one GPU, an L4, whatever the shell says: the times are the same on every
// machine and in every run, so a speed verdict never flips. (The L4, not the
// H100 the other lessons use: a program small enough to emulate on a laptop in
// seconds can keep an L4 busy, and no H100; the demo shows both.) A failure
// names a bottleneck only when the counters or the profile show it.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "harness/checker.h"
#include "harness/compare.h"
#include "../../../lessons/9_find_the_bottleneck/program.h"  // the images and the model the program trains

using workbook::Bundle;
using workbook::Context;
using workbook::Outcome;
using workbook::Run;
using workbook::RunOptions;

WORKBOOK_LESSON(9, "9_find_the_bottleneck");
// What lesson 9 is about: waits for the GPU and pageable copies (the loader's waits are in each check's details).
WORKBOOK_LESSON_COUNTERS("synchronizations", "bytes_host_to_device_pageable");

namespace {

constexpr const char* kModel = "l4";
constexpr double kMinUtilization = 0.8;  // the seed's rule: below it, the GPU waits on something

RunOptions gpu(const std::string& mode = "") {
  RunOptions o;
  o.gpus = 1;
  o.mode = mode;
  o.timeout_s = 180;
  o.env["TINY_EMULATED_GPU_CLOCK"] = "modelled";
  o.env["TINY_EMULATED_GPU_MODEL"] = kModel;
  return o;
}

std::string fixed(double value, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, value);
  return buf;
}

double counter(const Run& run, const std::string& name) {
  const nlohmann::json& c = run.out.values["counters"];
  return c.is_object() && c.contains(name) && c[name].is_number() ? c[name].get<double>() : 0.0;
}

bool close(double yours, double expected, double rel) {
  return std::isfinite(yours) && std::fabs(yours - expected) <= rel * std::fabs(expected) + 1e-12;
}

// The model's starting weights, from the check's generator.
void put_init(Context& ctx, Bundle& in, uint64_t stream) {
  tiny::manual_seed(ctx.seed + stream);
  in.put_state("init", lesson9::make_model()->state_dict());
}

std::string linear_types(const Run& run) {
  const nlohmann::json& t = run.out.values["trace"]["linear_input_types"];
  return t.is_array() ? t.dump() : "[]";
}

bool products_in_float32(const Run& run) {
  const nlohmann::json& t = run.out.values["trace"]["linear_input_types"];
  if (!t.is_array()) return false;
  for (const nlohmann::json& type : t) {
    if (type == "float") return true;
  }
  return false;
}

const char* kAutocast =
    "the profile (record_shapes) shows your linear layers' inputs as \"float\": the products ran in float32. Open a "
    "tiny::amp::autocast guard(\"cuda\", tiny::kBFloat16) around the forward pass and the loss, so the products run "
    "in bfloat16 on the tensor cores (the trace then shows \"c10::BFloat16\")";

}  // namespace

WORKBOOK_CHECK(measure, "measure() times the steps after the warm-up on the GPU's clock: ms per step, GPU-Util, TFLOP/s") {
  struct Probe {
    const char* name;
    const char* what;
    int warmup, steps;
    bool queued;
  };
  uint64_t stream = 0;
  for (const Probe& p : {Probe{"gpu_bound", "two 512x512 products per step", 2, 4, false},
                         Probe{"host_bound", "twelve tiny kernels per step", 2, 6, false},
                         Probe{"slow_first", "a first step that runs six products, then small ones", 1, 5, false},
                         Probe{"gpu_bound", "two 512x512 products per step, with 4 products still queued before "
                                            "the call", 2, 4, true}}) {
    Bundle in;
    in.values["probe"] = p.name;
    in.values["warmup"] = p.warmup;
    in.values["steps"] = p.steps;
    in.values["queued"] = p.queued;
    in.values["flops_per_step"] = 2 * 2.0 * 512 * 512 * 512;
    in.values["generator_seed"] = ctx.seed + stream++;
    Run mine, ref;
    if (auto early = ctx.both("measure", in, mine, ref, gpu("deferred"))) return *early;
    const std::string call = std::string("measure(step, ") + std::to_string(p.warmup) + ", " +
                             std::to_string(p.steps) + ", ...) on " + p.what;
    const nlohmann::json &v = mine.out.values, &r = ref.out.values;
    ctx.details[std::string("measure_") + p.name + (p.queued ? "_queued" : "")] = {{"yours", v}, {"reference", r}};
    const int calls = v.value("calls", 0);
    if (calls != p.warmup + p.steps) {
      return Outcome::fail(call + " called step " + std::to_string(calls) + " times, expected warmup + steps = " +
                           std::to_string(p.warmup + p.steps));
    }
    if (!v.value("idle", true) || counter(mine, "synchronizations") == 0) {
      return Outcome::fail(call + " returned while the steps' work was still queued on the GPU: the clock stopped "
                           "before the GPU finished. Call tiny::cuda::synchronize(device) after the steps and "
                           "before reading tiny::cuda::host_time() and the counters");
    }
    const double ms = v.value("step_ms", 0.0), util = v.value("utilization", 0.0), tflops = v.value("tflops", 0.0);
    const double ref_ms = r.value("step_ms", 0.0), ref_util = r.value("utilization", 0.0),
                 ref_tflops = r.value("tflops", 0.0);
    const std::string yours = call + " returned " + fixed(ms, 4) + " ms per step, GPU-Util " +
                              fixed(100 * util, 1) + "%, " + fixed(tflops, 3) + " TFLOP/s; the reference: " +
                              fixed(ref_ms, 4) + " ms, " + fixed(100 * ref_util, 1) + "%, " + fixed(ref_tflops, 3) +
                              " TFLOP/s";
    // Within 6%: the GPU's events and the host's clock around synchronizes are
    // both right, and differ by a launch's latency and a wait (4% on the
    // shortest probe); every mistake named below is further off.
    if (!close(ms, ref_ms, 0.06)) {
      // The reference waits twice (after the warm-up, after the steps); a
      // longer time with fewer waits timed work queued before the start.
      const bool waited_less = counter(mine, "synchronizations") < counter(ref, "synchronizations");
      if (ms > ref_ms * 1.1 && (waited_less || std::string(p.name) == "slow_first")) {
        return Outcome::fail(yours + ". The warm-up was timed too: its first step runs six products. Start the "
                             "clock after the warm-up steps, once the GPU has finished them (synchronize first)");
      }
      if (p.queued && ms > ref_ms * 1.2) {
        return Outcome::fail(yours + ". The clock started while earlier GPU work was still queued (4 products "
                             "left by the caller), so you timed it too: call tiny::cuda::synchronize(device) after "
                             "the warm-up and before reading the start time");
      }
      return Outcome::fail(yours + ". Expected the elapsed host_time() between a synchronize after the warm-up "
                           "and one after the steps, in ms, divided by steps");
    }
    if (!std::isfinite(util) || std::fabs(util - ref_util) > 0.05) {
      const double whole = v.value("whole_call_utilization", -1.0);
      if (std::fabs(util - whole) < 0.005) {
        return Outcome::fail(yours + ". Your GPU-Util is tiny::cuda::utilization()'s over the whole call, warm-up "
                             "included: it counts from the last reset of the counters, which is not yours to do. "
                             "Take device_counters(device).modelled_kernel_ms before and after the timed steps, and "
                             "divide the difference by the elapsed milliseconds");
      }
      if (util > 1.0) {
        return Outcome::fail(yours + ". GPU-Util cannot exceed 100%: divide the kernels' milliseconds in your "
                             "window by the window's elapsed milliseconds (both in ms)");
      }
      return Outcome::fail(yours + ". GPU-Util is the kernels' time in the timed stretch over its elapsed time: "
                           "the difference of modelled_kernel_ms before and after, over the elapsed ms");
    }
    if (!close(tflops, ref_tflops, 0.06)) {
      return Outcome::fail(yours + ". Achieved TFLOP/s is flops_per_step x steps / elapsed seconds / 1e12");
    }
  }
  return Outcome::pass();
}

WORKBOOK_CHECK(train_step, "train_step() trains in bfloat16 with non_blocking copies, and never waits for the GPU") {
  Bundle in;
  put_init(ctx, in, 100);
  tiny::Generator g = ctx.generator(101);
  const auto images = lesson9::make_images(3 * 64, g);
  for (int k = 0; k < 3; ++k) {
    std::vector<int64_t> idx;
    for (int64_t i = 0; i < 64; ++i) idx.push_back(k * 64 + i);
    const tiny::data::Batch b = images->get_batch(idx);
    in.put("x." + std::to_string(k), b.data);
    in.put("y." + std::to_string(k), b.target);
  }
  Run mine, ref;
  if (auto early = ctx.both("train_step", in, mine, ref, gpu())) return *early;
  const std::string call = "train_step on three pinned batches of 64";
  const double syncs = counter(mine, "synchronizations");
  if (counter(mine, "bytes_host_to_device_pageable") > 0) {
    return Outcome::fail(call + " copied " + fixed(counter(mine, "bytes_host_to_device_pageable"), 0) +
                         " bytes from pageable memory: copy the batch itself, which is pinned, with "
                         ".to(device, /*non_blocking=*/true)");
  }
  // Probe: a value read back (.item(), .cpu()) is a copy to the host; without one, the waits are elsewhere.
  if (syncs > 0 && counter(mine, "bytes_device_to_host") == 0 && mine.out.values["counters"].contains("bytes_device_to_host")) {
    return Outcome::fail(call + ": the host waited for the GPU " + fixed(syncs, 0) + " times (the synchronization "
                         "counter; the reference: 0), and no value came back to the host, so no .item() or .cpu() "
                         "is to blame: a copy without non_blocking (.to(device, /*non_blocking=*/true), the batch is "
                         "pinned), a tiny::cuda::synchronize(), or a tiny::cuda::empty_cache(), which waits for the "
                         "GPU before it frees the cache. Each makes the host wait for every step to finish before it "
                         "can queue the next, and nothing in a step needs them");
  }
  if (syncs > 0) {
    return Outcome::fail(call + ": the host waited for the GPU " + fixed(syncs, 0) + " times (the synchronization "
                         "counter; the reference: 0), and " + fixed(counter(mine, "bytes_device_to_host"), 0) +
                         " bytes came back to the host: a value read in the step (.item() or .cpu() of the loss, "
                         "printing it) makes the host wait for every step to finish before it can queue the next. "
                         "Keep the loss on the GPU (loss_sum.add_(loss.detach())); train_epoch reads the sum once");
  }
  if (counter(mine, "bytes_host_to_device_pinned") == 0) {
    return Outcome::fail(call + " copied nothing to the GPU: move batch.data and batch.target to the device");
  }
  if (products_in_float32(mine)) return Outcome::fail(call + ": " + kAutocast);
  if (mine.out.values.value("loss_sum_has_graph", false)) {
    return Outcome::fail(call + ": loss_sum requires grad after it, so it holds the autograd graph of every step "
                         "you added to it (and all the memory the graphs keep, lesson 8). Add the loss without its "
                         "graph: loss_sum.add_(loss.detach())");
  }
  // Probes from the glue: was autocast on when the gradients were made, and when the optimizer stepped?
  const int backward_in = mine.out.values.value("backward_under_autocast", 0);
  const int steps_in = mine.out.values.value("steps_under_autocast", 0);
  if (backward_in > 0 || steps_in > 0) {
    const std::string what = backward_in > 0 && steps_in > 0 ? "backward() and optimizer.step()"
                             : backward_in > 0                ? "backward()"
                                                              : "optimizer.step()";
    return Outcome::fail(call + ": your autocast guard was still open during " + what + ". Autocast is for the "
                         "forward pass and the loss: backward() already runs each op in the dtype its forward chose, "
                         "and the optimizer updates the float32 weights. Close the guard's scope right after the loss "
                         "(PyTorch's docs: \"backward passes under autocast are not recommended\")");
  }
  if (auto why = workbook::differ(call + ", loss_sum", mine.out, ref.out, "loss_sum", 2e-2, 2e-2)) {
    return Outcome::fail(*why + "\n(add each step's loss, detached, to loss_sum: loss_sum.add_(loss.detach()))");
  }
  if (auto why = workbook::state_differs(call + ", the weights after", mine.out, ref.out, "final", 3e-2, 3e-3)) {
    return Outcome::fail(*why + "\n(zero_grad, forward and loss under autocast, backward and step outside it)");
  }
  return Outcome::pass("the products in " + linear_types(mine) + ", 0 waits for the GPU");
}

WORKBOOK_CHECK(train_epoch, "train_epoch() returns the mean loss per batch, waiting for the GPU once an epoch") {
  Bundle in;
  put_init(ctx, in, 200);
  tiny::Generator g = ctx.generator(201);
  const auto images = lesson9::make_images(320, g);
  std::vector<int64_t> all(320);
  for (int64_t i = 0; i < 320; ++i) all[static_cast<size_t>(i)] = i;
  const tiny::data::Batch b = images->get_batch(all);
  in.put("x", b.data);
  in.put("y", b.target);
  in.values["batch_size"] = 64;
  in.values["generator_seed"] = ctx.seed + 202;
  Run mine, ref;
  if (auto early = ctx.both("train_epoch", in, mine, ref, gpu("deferred"))) return *early;
  const std::string call = "train_epoch over 5 batches of 64";
  const double syncs = counter(mine, "synchronizations"), ref_syncs = counter(ref, "synchronizations");
  const double step_syncs = mine.out.values.value("step_synchronizations", 0.0);
  if (syncs >= 5 && step_syncs > 0) {
    return Outcome::fail(call + ": the host waited for the GPU " + fixed(syncs, 0) + " times (the reference: " +
                         fixed(ref_syncs, 0) + "), and one call of your train_step alone made it wait " +
                         fixed(step_syncs, 0) + " times: the waits are in train_step (a .item(), .cpu() or a "
                         "copy without non_blocking), not in this loop. Fix train_step first (its check names what)");
  }
  if (syncs >= 5) {
    return Outcome::fail(call + ": the host waited for the GPU " + fixed(syncs, 0) + " times, once a batch or "
                         "more (the reference: " + fixed(ref_syncs, 0) + "). Read the loss once, after the loop: "
                         "keep loss_sum on the GPU and call loss_sum.item<double>() at the end");
  }
  const double mean = mine.out.values.value("mean_loss", 0.0), ref_mean = ref.out.values.value("mean_loss", 0.0);
  // The probe: a copy into pinned memory, and the GPU still busy when the answer came back.
  if (!close(mean, ref_mean, 1e-3) && !mine.out.values.value("idle", true) &&
      mine.out.values.value("bytes_to_pinned", int64_t{0}) > 0) {
    return Outcome::fail(call + " returned " + fixed(mean, 5) + ", expected " + fixed(ref_mean, 5) +
                         ": you read the host copy before the copy finished. A non_blocking copy to the CPU (into "
                         "pinned memory) returns at once, and the GPU writes the sum later, after every step queued "
                         "before it: your function returned with the copy still queued on cuda:0 (in this check's "
                         "deferred mode nothing queued runs until the host waits; on a real GPU it is a race you lose "
                         "now and then). Read the sum with loss_sum.item<double>(), which waits for the GPU itself: "
                         "it is the epoch's one wait");
  }
  if (!close(mean, ref_mean, 1e-3)) {
    return Outcome::fail(call + " returned " + fixed(mean, 5) + ", expected " + fixed(ref_mean, 5) +
                         ": the sum of the batches' losses divided by the number of batches (5)");
  }
  if (syncs > ref_syncs) {
    return Outcome::fail(call + ": the host waited for the GPU " + fixed(syncs, 0) + " times, the reference " +
                         fixed(ref_syncs, 0) + ": one .item() after the loop is all it needs");
  }
  if (auto why = workbook::state_differs(call + ", the weights after", mine.out, ref.out, "final", 3e-2, 3e-3)) {
    return Outcome::fail(*why + "\n(call train_step on every batch of the loader, in order)");
  }
  return Outcome::pass();
}

WORKBOOK_CHECK(fixed_program, "your make_loader and train_step keep the GPU busy (GPU-Util >= 80%) at the reference's speed") {
  Bundle in;
  put_init(ctx, in, 300);
  in.values["data_seed"] = ctx.seed + 301;
  in.values["generator_seed"] = ctx.seed + 302;
  in.values["images"] = 1024 * 9;
  in.values["warmup"] = 3;
  in.values["steps"] = 5;
  in.values["keep_trace"] = true;
  Run mine, ref;
  if (auto early = ctx.both("program", in, mine, ref, gpu())) return *early;
  const nlohmann::json &v = mine.out.values, &r = ref.out.values;
  const int64_t batch = v.value("batch_size", int64_t{0});
  const int workers = v.value("num_workers", 0);
  if (batch > 1024) {
    return Outcome::fail("make_loader chose batch_size " + std::to_string(batch) + ": at most 1024 here (a larger "
                         "batch changes the training itself: fewer, larger steps)");
  }
  // The traces as JSON objects (the report cuts long strings): drawn side by side in the HTML report.
  const auto trace_of = [](const nlohmann::json& values) {
    return nlohmann::json::parse(values.value("chrome_trace", ""), nullptr, /*allow_exceptions=*/false);
  };
  ctx.details["timelines"] = {{"yours", trace_of(v)}, {"reference", trace_of(r)}};
  const double ms = v.value("step_ms", 0.0), util = v.value("utilization", 0.0),
               rate = v.value("images_per_s", 0.0);
  const double ref_util = r.value("utilization", 0.0), ref_rate = r.value("images_per_s", 0.0);
  const std::string yours = "the program with your make_loader (batch " + std::to_string(batch) + ", " +
                            std::to_string(workers) + " workers, pin_memory " +
                            (v.value("pin_memory", false) ? "true" : "false") + ") and train_step: " +
                            fixed(ms, 3) + " ms a step, " + fixed(rate, 0) + " images/s, GPU-Util " +
                            fixed(100 * util, 1) + "% on the modelled L4 (the reference: " +
                            fixed(r.value("step_ms", 0.0), 3) + " ms, " + fixed(ref_rate, 0) + " images/s, " +
                            fixed(100 * ref_util, 1) + "%)";
  // The scoreboard's speed column: the time per image against the reference's (a step's time for 1024 images),
  // as the verdict below compares images/s.
  const int64_t ref_batch = r.value("batch_size", int64_t{0});
  if (batch > 0 && ref_batch > 0 && ms > 0) {
    const double yours_ms = ms * 1024.0 / static_cast<double>(batch);
    const double ref_ms = r.value("step_ms", 0.0) * 1024.0 / static_cast<double>(ref_batch);
    ctx.details["timing"] = {{"yours_ms", {yours_ms}}, {"reference_ms", {ref_ms}},
                             {"ratio", yours_ms / std::max(ref_ms, 1e-9)}, {"clock", "modelled L4"},
                             {"what", "ms per 1024 images (a step of a batch of 1024)"}};
  }
  ctx.details["program"] = {{"yours", v}, {"reference", r}};
  ctx.details["program"]["yours"].erase("chrome_trace");
  ctx.details["program"]["reference"].erase("chrome_trace");
  // What kept the GPU waiting, as the counters and the profile show it. Pageable
  // copies and waits fail even when the program is fast enough: on another GPU,
  // or with more host work between steps, they are what costs the time.
  const double pageable = counter(mine, "bytes_host_to_device_pageable"), syncs = counter(mine, "synchronizations");
  if (util >= kMinUtilization && rate >= ref_rate / 1.1 && pageable == 0 && syncs == 0) return Outcome::pass(yours);

  const double wait_ms = v["trace"].value("loader_wait_ms", 0.0), span_ms = ms * in.values["steps"].get<int>();
  if (!v.value("pin_memory", false) || pageable > 0) {
    return Outcome::fail(yours + ". The batches were in pageable memory (" + fixed(pageable, 0) + " bytes copied "
                         "from it): each copy holds the host until it is done, where a copy from pinned "
                         "(page-locked) memory lets the host run ahead. Which of the loader's options decides where "
                         "a batch lands?");
  }
  if (syncs > 0) {
    return Outcome::fail(yours + ". The host waited for the GPU " + fixed(syncs, 0) + " times in " +
                         std::to_string(in.values["steps"].get<int>()) + " steps (the reference: 0): a .item() or .cpu() in the step, or a copy without non_blocking");
  }
  if (wait_ms > 0.1 * span_ms) {
    const double per_batch_ms = static_cast<double>(batch) * lesson9::kTransformNsPerImage / 1e6;
    return Outcome::fail(yours + ". The loop waited for the DataLoader " + fixed(wait_ms, 2) + " ms of " +
                         fixed(span_ms, 2) + " (in the trace: enumerate(DataLoader)#...__next__ on the host's "
                         "track, while the GPU's track is empty). A batch of " + std::to_string(batch) +
                         " images takes " + fixed(per_batch_ms, 2) + " ms to transform; " +
                         (workers == 0 ? std::string("with no workers the loop does it itself, every step")
                                       : "each worker transforms a whole batch and the " + std::to_string(workers) +
                                             " work side by side, so their batches arrive in bursts of " +
                                             std::to_string(workers) + " every " + fixed(per_batch_ms, 2) +
                                             " ms (one every " + fixed(per_batch_ms / workers, 2) +
                                             " ms on average): the loop takes a burst in a few steps, then waits "
                                             "for the next") +
                         ", and the GPU needs one every step (" + fixed(ms, 3) + " ms now, and less once the "
                         "loop stops waiting): use more num_workers");
  }
  if (products_in_float32(mine)) return Outcome::fail(yours + ". " + kAutocast);
  if (batch < r.value("batch_size", int64_t{0})) {
    const double tflops = rate * lesson9::kFlopsPerImage / 1e12, ref_tflops = ref_rate * lesson9::kFlopsPerImage / 1e12;
    return Outcome::fail(
        yours + ". Nothing waits on data or on the host's reads, yet the GPU does " + fixed(tflops, 2) +
        " TFLOP/s of the products' work (the reference " + fixed(ref_tflops, 2) + "): every step costs a price " +
        "that does not grow with the batch (launching some forty kernels, updating all the weights), and a batch " +
        "of " + std::to_string(batch) + " shares it among fewer images than the reference's " +
        std::to_string(r.value("batch_size", int64_t{0})) +
        (util < kMinUtilization ? std::string(" (launch-bound: the GPU idles between tiny kernels)")
                                : std::string(" (GPU-Util counts those fixed kernels as busy time)")) +
        ". A larger batch gives each step more work for the same price: raise batch_size");
  }
  return Outcome::fail(yours + ". Expected GPU-Util >= 80% and at least " + fixed(ref_rate / 1.1, 0) +
                       " images/s (the reference's speed within 10%)");
}
