// Lesson 2's checks: where tensors are made and moved (device facts and the
// copy counters), computing on a GPU and bringing the answer back, repairing a
// function that mixes devices, and timing GPU work. The timing checks judge a
// GPU time by modelled time (docs/performance_model.md): the emulated GPU's
// clock says how long the products take on an H100 SXM whatever this CPU's
// speed and load, so the student's number is compared with the reference's
// on the same products, and a verdict never flips between runs. They run in
// the emulator's deferred mode, where queued GPU work runs only when the host
// waits: a clock read without waiting measures nothing, every time.
#include <cmath>
#include <optional>

#include "harness/checker.h"
#include "harness/compare.h"

using workbook::Bundle;
using workbook::Context;
using workbook::Outcome;
using workbook::Run;
using workbook::RunOptions;

WORKBOOK_LESSON(2, "2_moving_tensors");
// What lesson 2 is about: the copies to the GPU, and the waits that make a timing true.
WORKBOOK_LESSON_COUNTERS("bytes_host_to_device", "synchronizations");

namespace {

// Every run on the modelled clock of one GPU model, whatever the shell says:
// the times a check compares are then the same on every machine.
RunOptions gpus(int n, const std::string& mode = "") {
  RunOptions o;
  o.gpus = n;
  o.mode = mode;
  o.env["TINY_EMULATED_GPU_CLOCK"] = "modelled";
  o.env["TINY_EMULATED_GPU_MODEL"] = "h100-sxm";
  return o;
}

// A tensor of `shape` with values from the check's generator, stored to be placed on `device`.
tiny::Tensor random_on(Context& ctx, uint64_t stream, const tiny::IntArrayRef& shape, const std::string& device,
                       Bundle& in, const std::string& name) {
  const tiny::Tensor t = tiny::randn(shape, {}, ctx.generator(stream));
  in.put(name, t);  // the values travel on the CPU; the runner places them
  in.values["where"][name] = device;
  return t;
}

int64_t counter(const Run& run, const std::string& device, const std::string& name) {
  if (!run.out.values.contains("counters") || !run.out.values["counters"].contains(device)) return 0;
  return run.out.values["counters"][device].value(name, int64_t{0});
}

std::string fixed(double value, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, value);
  return buf;
}

const char* kStoppedEarly =
    "the clock stopped before the GPU finished: call tiny::cuda::synchronize(device) before reading the time";

}  // namespace

WORKBOOK_CHECK(make_on_device, "make_on_device() makes the values from the generator, directly on the device") {
  struct Case {
    tiny::IntArrayRef shape;
    const char* device;
  };
  uint64_t stream = 0;
  for (const Case& c : {Case{{3, 4}, "cuda:1"}, Case{{5}, "cpu"}, Case{{2, 3, 2}, "cuda:0"}}) {
    Bundle in;
    in.values["shape"] = c.shape;
    in.values["device"] = c.device;
    in.values["generator_seed"] = ctx.seed + 1000 + stream++;
    Run mine, ref;
    if (auto early = ctx.both("make_on_device", in, mine, ref)) return *early;
    const std::string call = "make_on_device(" + workbook::shape_text(c.shape) + ", " + c.device + ")";
    const std::string got = mine.out.info("x").device;
    if (got != c.device) {
      return Outcome::fail(call + " made a tensor on " + got + ", expected " + c.device +
                           ": pass the device when you create it, tiny::randn(shape, device, generator)");
    }
    if (auto why = workbook::differ(call, mine.out, ref.out, "x")) {
      return Outcome::fail(*why + "\n(draw the values with tiny::randn from the generator you were given)");
    }
    if (std::string(c.device) != "cpu" && counter(mine, c.device, "bytes_host_to_device") > 0) {
      return Outcome::fail(call + " made the tensor on the CPU and then copied " +
                           std::to_string(counter(mine, c.device, "bytes_host_to_device")) + " bytes to " + c.device +
                           ": make it where it will be used, tiny::randn(shape, device, generator), and skip the copy");
    }
  }
  return Outcome::pass();
}

WORKBOOK_CHECK(to_device, "to_device() returns every tensor moved to the device, and leaves the inputs alone") {
  struct Case {
    std::vector<std::string> from;
    const char* device;
  };
  uint64_t stream = 10;
  for (const Case& c : {Case{{"cpu", "cpu"}, "cuda:1"}, Case{{"cuda:0", "cpu", "cuda:1"}, "cpu"},
                        Case{{"cuda:1", "cpu"}, "cuda:1"}}) {
    Bundle in;
    in.values["device"] = c.device;
    in.values["count"] = c.from.size();
    for (size_t i = 0; i < c.from.size(); ++i) {
      if (i == 1) {  // labels: int64, as a batch has them
        const tiny::Tensor labels = tiny::randint(0, 10, {4}, tiny::kInt64, ctx.generator(stream++));
        in.put("t1", labels);
        in.values["where"]["t1"] = c.from[i];
      } else {
        random_on(ctx, stream++, {4, 3}, c.from[i], in, "t" + std::to_string(i));
      }
    }
    Run mine, ref;
    if (auto early = ctx.both("to_device", in, mine, ref)) return *early;
    std::string inputs;
    for (const std::string& f : c.from) inputs += (inputs.empty() ? "" : ", ") + std::string("a tensor on ") + f;
    const std::string call = "to_device({" + inputs + "}, " + c.device + ")";
    if (mine.out.values["count"] != ref.out.values["count"]) {
      return Outcome::fail(call + " returned " + mine.out.values["count"].dump() + " tensors, expected " +
                           ref.out.values["count"].dump() + ": one per input, in the same order");
    }
    for (size_t i = 0; i < c.from.size(); ++i) {
      const std::string name = "moved" + std::to_string(i);
      const std::string got = mine.out.info(name).device;
      if (got != c.device && got == c.from[i]) {
        return Outcome::fail(call + ": tensor " + std::to_string(i) + " is still on " + got +
                             ". .to() does not move a tensor, it returns a new one on the device and leaves the "
                             "original where it was: keep what it returns, moved.push_back(t.to(device)) "
                             "(and note that `for (tiny::Tensor t : v) t = t.to(device);` only changes a copy)");
      }
      if (auto why = workbook::differ(call + ", tensor " + std::to_string(i), mine.out, ref.out, name)) {
        return Outcome::fail(*why);
      }
    }
    if (mine.out.values["input_devices"] != ref.out.values["input_devices"]) {
      return Outcome::fail(call + " changed where its inputs live: " + mine.out.values["input_devices"].dump() +
                           ", expected them left on " + ref.out.values["input_devices"].dump());
    }
  }
  return Outcome::pass();
}

WORKBOOK_CHECK(where_is, "where_is() gives the GPU index of a tensor, -1 on the CPU") {
  uint64_t stream = 20;
  for (const char* device : {"cuda:1", "cpu", "cuda:0"}) {
    Bundle in;
    random_on(ctx, stream++, {2, 2}, device, in, "x");
    Run mine, ref;
    if (auto early = ctx.both("where_is", in, mine, ref)) return *early;
    if (mine.out.values["index"] != ref.out.values["index"]) {
      return Outcome::fail(std::string("where_is(a tensor on ") + device + ") returned " +
                           mine.out.values["index"].dump() + ", expected " + ref.out.values["index"].dump() +
                           " (x.get_device(): the GPU's index, -1 for the CPU)");
    }
  }
  return Outcome::pass();
}

WORKBOOK_CHECK(gpu_compute_then_cpu, "gpu_compute_then_cpu() computes on the device and returns the answer on the CPU") {
  uint64_t stream = 30;
  for (const char* device : {"cuda:1", "cuda:0", "cpu"}) {
    Bundle in;
    in.values["device"] = device;
    random_on(ctx, stream++, {5, 4}, "cpu", in, "x");
    random_on(ctx, stream++, {4, 3}, "cpu", in, "w");
    Run mine, ref;
    // Deferred mode: queued GPU work runs only when the host waits, so an answer copied back
    // with non_blocking and never waited for is unwritten every time, not now and then.
    if (auto early = ctx.both("gpu_compute_then_cpu", in, mine, ref, gpus(2, "deferred"))) return *early;
    const std::string call = std::string("gpu_compute_then_cpu(x, w, ") + device + ")";
    const std::string got = mine.out.info("y").device;
    if (got != "cpu") {
      return Outcome::fail(call + " returned a tensor that is still on " + got +
                           ": the caller cannot read it there; bring it back with .cpu() before returning");
    }
    if (!mine.out.values.value("idle", true)) {
      return Outcome::fail(call + " returned while " + device + " still had work queued: the answer's copy back "
                           "to the CPU had not run, so the caller read memory the GPU had not written yet (a "
                           "non_blocking copy returns at once; in this check's deferred mode nothing queued runs "
                           "until someone waits, on a real GPU it is a race you lose now and then). Copy back "
                           "with .cpu(), which waits, or wait for the GPU (tiny::cuda::synchronize) before "
                           "returning");
    }
    if (std::string(device) != "cpu" && counter(mine, device, "kernel_launches") == 0) {
      if (counter(mine, device, "bytes_host_to_device") > 0) {
        // x.to(device); alone: the copy happened, and the result was dropped.
        return Outcome::fail(call + ": your code copied " + std::to_string(counter(mine, device, "bytes_host_to_device")) +
                             " bytes to " + device + " but computed nothing there (no kernel was launched): .to() "
                             "returns a new tensor on the device and leaves x where it was, so keep what it returns "
                             "(auto x_dev = x.to(device); PyTorch: x = x.to(device)) and compute with that. The "
                             "compiler warns about a dropped .to() result (nodiscard): see its warning above");
      }
      return Outcome::fail(call + ": nothing ran on " + device +
                           " (no kernel was launched there). Move x and w with .to(device) and compute there");
    }
    if (auto why = workbook::differ(call, mine.out, ref.out, "y")) return Outcome::fail(*why);
  }
  return Outcome::pass();
}

WORKBOOK_CHECK(linear_relu, "linear_relu() works wherever its parameters are, computing on x's device") {
  struct Case {
    const char *x, *w, *b;
  };
  uint64_t stream = 40;
  for (const Case& c : {Case{"cuda:0", "cuda:0", "cpu"}, Case{"cuda:1", "cpu", "cpu"}, Case{"cpu", "cuda:1", "cuda:1"},
                        Case{"cuda:1", "cuda:1", "cuda:1"}, Case{"cuda:0", "cuda:1", "cuda:1"}}) {
    Bundle in;
    random_on(ctx, stream++, {6, 4}, c.x, in, "x");
    random_on(ctx, stream++, {4, 3}, c.w, in, "w");
    random_on(ctx, stream++, {3}, c.b, in, "b");
    const std::string call = std::string("linear_relu(x on ") + c.x + ", w on " + c.w + ", b on " + c.b + ")";
    const Run mine = ctx.student("linear_relu", in);
    if (mine.status == "error" && mine.message.find("same device") != std::string::npos) {
      // The devices named in the error show what the code did.
      for (const char* gpu : {"cuda:0", "cuda:1"}) {
        const bool in_inputs = std::string(c.x) == gpu || std::string(c.w) == gpu || std::string(c.b) == gpu;
        if (!in_inputs && mine.message.find(gpu) != std::string::npos) {
          return Outcome::fail(call + " mixed devices:\n  " + mine.message + "\nnone of the inputs is on " + gpu +
                               ": your code moved something there. Move w and b to x.device(), not to a fixed "
                               "device such as \"cuda\" or cuda:0");
        }
      }
      return Outcome::fail(call + " still mixes devices:\n  " + mine.message +
                           "\nmove w and b to x's device (x.device()) before using them");
    }
    if (auto early = ctx.unless_ok(mine)) return *early;
    const Run ref = ctx.reference("linear_relu", in);
    if (!ref.ok()) return Outcome::error("the reference solution failed: " + ref.message);
    const std::string got = mine.out.info("y").device;
    if (got != c.x) {
      if (got == "cpu") {
        return Outcome::fail(call + " returned its result on cpu, but x is on " + c.x +
                             ": move the parameters to x.device(), not x to the CPU (the work belongs on the GPU)");
      }
      return Outcome::fail(call + " returned its result on " + got + ", expected it on x's device, " + c.x);
    }
    if (auto why = workbook::differ(call, mine.out, ref.out, "y")) return Outcome::fail(*why);
    // Right values, and still a trip through the host: bytes copied out of a GPU and
    // back into one, beyond the reference's (which copies GPU to GPU, or not at all).
    int64_t out_bytes = 0, in_bytes = 0, ref_out = 0, ref_in = 0;
    for (const char* gpu : {"cuda:0", "cuda:1"}) {
      out_bytes += counter(mine, gpu, "bytes_device_to_host");
      in_bytes += counter(mine, gpu, "bytes_host_to_device");
      ref_out += counter(ref, gpu, "bytes_device_to_host");
      ref_in += counter(ref, gpu, "bytes_host_to_device");
    }
    if (out_bytes > ref_out && in_bytes > ref_in) {
      return Outcome::fail(call + ": the result is right, but the parameters went from a GPU through the CPU to " +
                           c.x + ": " + std::to_string(out_bytes) + " bytes copied to the host and " +
                           std::to_string(in_bytes) + " back, the reference " + std::to_string(ref_out) + " and " +
                           std::to_string(ref_in) + ". Each trip through the host is two copies and a wait for the "
                           "GPU; .to(x.device()) copies straight from one GPU to the other (and does nothing for a "
                           "tensor already there)");
    }
  }
  return Outcome::pass();
}

namespace {

// The reference's time_matmul_ms on the same inputs and options: the modelled
// GPU's milliseconds per product, timed with events.
// With `trace`, also the reference's GPU trace (null when it sent none).
std::optional<double> reference_ms(Context& ctx, const Bundle& in, const RunOptions& options, std::string& error,
                                   nlohmann::json* trace = nullptr) {
  const Run ref = ctx.reference("time_matmul_ms", in, options);
  if (!ref.ok()) {
    error = "the reference solution failed: " + ref.message;
    return std::nullopt;
  }
  if (trace) *trace = ref.out.values.value("trace", nlohmann::json());
  return ref.out.values["ms"].get<double>();
}

// An event read before it completed: CUDA's "device not ready", named as the mistake it is.
std::optional<Outcome> read_too_early(const Run& mine, const std::string& call) {
  if (mine.status != "error" || mine.message.find("device not ready") == std::string::npos) return std::nullopt;
  return Outcome::fail(call + " read elapsed_time before the stop event had completed:\n  " + mine.message + "\n" +
                       kStoppedEarly + " (with events: stop.synchronize() before start.elapsed_time(stop))");
}

// A time far longer than the modelled GPU's: this CPU's clock around the emulation.
std::string host_clock_message(const std::string& yours) {
  return yours + ". Your time is this CPU's: std::chrono reads the host's real clock, and here the GPU is emulated "
                 "by your CPU, so it timed the emulation, not the GPU (on a real GPU it would have been right). "
                 "Read the GPU's own clock, which works on both: tiny::cuda::Event (record, synchronize, "
                 "elapsed_time), or tiny::cuda::host_time() with a synchronize";
}

}  // namespace

WORKBOOK_CHECK(time_matmul_waits, "time_matmul_ms() times the GPU's work with the GPU's clock, after a warm-up") {
  // On a GPU, in deferred mode: the products run only when the code waits.
  Bundle in;
  in.values["device"] = "cuda:1";
  in.values["n"] = 1024;
  in.values["reps"] = 4;
  in.values["generator_seed"] = ctx.seed + 50;
  const RunOptions options = gpus(2, "deferred");
  const Run mine = ctx.student("time_matmul_ms", in, options);
  const int reps = in.values["reps"];
  const std::string call = "time_matmul_ms(a, b, " + std::to_string(reps) + ") with 1024x1024 a and b on cuda:1";
  if (auto early = read_too_early(mine, call)) return *early;
  if (auto early = ctx.unless_ok(mine)) return *early;
  const nlohmann::json& v = mine.out.values;
  const double ms = v["ms"];
  ctx.details["time_matmul"] = v;
  ctx.details["time_matmul"].erase("trace");  // drawn below, not listed
  if (!std::isfinite(ms) || ms <= 0) {
    return Outcome::fail(call + " returned " + fixed(ms, 4) + " ms: expected a positive time per product");
  }
  const int64_t syncs = counter(mine, "cuda:1", "synchronizations");
  const int64_t launches = counter(mine, "cuda:1", "kernel_launches");
  if (syncs == 0) {
    if (counter(mine, "cuda:0", "synchronizations") > 0) {
      return Outcome::fail(call + ": you waited on cuda:0 (a synchronize, or an event recorded on the current "
                           "device's stream), but the matrices are on cuda:1, so the clock never waited for their "
                           "work. Wait on the device they are on: tiny::cuda::synchronize(a.get_device()), or record "
                           "the events on tiny::cuda::current_stream(a.get_device())");
    }
    return Outcome::fail(call + " never waited for the GPU: " + kStoppedEarly);
  }
  if (v.value("emulated", true) && !v.value("idle", true)) {
    return Outcome::fail(call + " returned while its products were still queued on the GPU: " + kStoppedEarly);
  }

  std::string error;
  nlohmann::json ref_trace;
  const std::optional<double> expected = reference_ms(ctx, in, options, error, &ref_trace);
  if (v.contains("trace") && ref_trace.is_object()) {  // the report's two GPU timelines
    ctx.details["timelines"] = {{"yours", v["trace"]}, {"reference", ref_trace}};
  }
  if (!expected) return Outcome::error(error);
  ctx.details["reference_ms"] = *expected;
  const double ratio = ms / *expected;
  const std::string yours = call + " returned " + fixed(ms, 4) + " ms per product; the modelled H100 took " +
                            fixed(*expected, 4) + " ms (the reference, timed with events on the same products)";
  if (ratio < 0.5) {
    return Outcome::fail(yours + ". Your clock read only how long the host took to queue the products: " +
                         kStoppedEarly + " (wait first, then read the clock)");
  }
  if (counter(mine, "cuda:1", "bytes_device_to_host") > 0) {
    return Outcome::fail(yours + ". Your timing includes copying " +
                         std::to_string(counter(mine, "cuda:1", "bytes_device_to_host")) +
                         " bytes back to the CPU: .cpu() (or .item()) waits for the GPU, but it also copies, and the "
                         "copy is not the product. Wait with tiny::cuda::synchronize(device) or an event instead");
  }
  if (ratio > 10) return Outcome::fail(host_clock_message(yours));
  if (ratio > 0.8 * reps && ratio < 1.25 * reps) {
    return Outcome::fail(yours + ": about " + std::to_string(reps) +
                         " times too long. Return the time per product, that is the elapsed time divided by reps");
  }
  if (syncs >= reps && ratio > 1.05) {
    return Outcome::fail(yours + ". You waited for the GPU " + std::to_string(syncs) + " times, after every "
                         "product: each wait adds a launch and the wait itself to the time, which a program that "
                         "queues its work never pays. Queue all " + std::to_string(reps) +
                         " products, then wait once");
  }
  if (launches == reps + 1 && ratio > 1.15 && ratio < 1.4) {
    return Outcome::fail(yours + ": about (reps + 1) / reps of it. Your clock started before the warm-up had "
                         "finished, so the warm-up was timed too: start the clock after it (with a host clock: after "
                         "waiting for it; with events: record the start event after it)");
  }
  if (ratio < 0.9 || ratio > 1.1) {
    return Outcome::fail(yours + ": expected within 10% of it. Warm up, wait for the GPU, then time only the " +
                         std::to_string(reps) + " products with the GPU's clock");
  }
  if (launches < reps) {
    return Outcome::fail(call + " ran " + std::to_string(launches) + " products on the GPU, expected reps = " +
                         std::to_string(reps) + " timed ones (and a warm-up)");
  }
  if (launches == reps) {
    return Outcome::fail(call + " ran exactly reps = " + std::to_string(reps) +
                         " products: there was no warm-up. Run one product before starting the clock, so that "
                         "one-off setup (on a real GPU: cuBLAS handles, memory) is not timed");
  }

  // On the CPU: this CPU's clock, with and without GPUs on the machine.
  double cpu_ms = 0;
  for (const int gpu_count : {0, 2}) {
    Bundle cpu_in = in;
    cpu_in.values["device"] = "cpu";
    cpu_in.values["n"] = 128;
    cpu_in.values["reps"] = 2;
    const Run cpu = ctx.student("time_matmul_ms", cpu_in, gpus(gpu_count));
    const std::string cpu_call = "time_matmul_ms(a, b, 2) with a and b on the CPU, on a machine with " +
                                 std::string(gpu_count == 0 ? "no GPU" : "2 GPUs");
    if (cpu.status == "error" || cpu.status == "crash") {
      // Typically a synchronize or an event with no GPU to wait for.
      return Outcome::fail(cpu_call + ", " + std::string(cpu.status == "error" ? "threw" : "failed") + ":\n  " +
                           cpu.message + "\nIf your code synchronizes or records events there: the products ran on "
                           "the CPU, so there is no GPU to wait for; only do that when a is on a GPU (a.is_cuda())");
    }
    if (auto early = ctx.unless_ok(cpu)) return *early;
    cpu_ms = cpu.out.values["ms"];
    const double call_ms = cpu.out.values["call_ms"];
    if (!std::isfinite(cpu_ms) || cpu_ms * 2 > call_ms * 1.01 + 0.05) {
      return Outcome::fail(cpu_call + " returned " + fixed(cpu_ms, 4) + " ms, but the call took " +
                           fixed(call_ms, 3) + " ms: expected the time per product");
    }
    // Two 128 x 128 products (4 MFLOP) take microseconds on any CPU; the modelled
    // host clock, which counts only GPU work, reads exactly 0 around them.
    if (cpu_ms * 2 < 1e-4) {
      return Outcome::fail(cpu_call + " returned " + fixed(cpu_ms, 6) + " ms: the products took no time on your "
                           "clock. " +
                           (gpu_count > 0 ? "tiny::cuda::host_time() is the modelled GPU's host clock, where work "
                                            "on the CPU costs nothing: time the CPU's products with this CPU's "
                                            "clock, std::chrono::steady_clock"
                                          : "Time the products themselves, after the warm-up"));
    }
  }
  return Outcome::pass("yours: " + fixed(ms, 4) + " ms per 1024x1024 product on the modelled H100 (reference " +
                       fixed(*expected, 4) + " ms), " + fixed(cpu_ms, 3) + " ms per 128x128 product on this CPU");
}

WORKBOOK_CHECK(time_matmul_clock_start, "time_matmul_ms() does not time GPU work queued before it was called") {
  // The same call twice: on an idle GPU, then with products left queued before
  // it. A clock started without waiting for them times them too.
  Bundle in;
  in.values["device"] = "cuda:0";
  in.values["n"] = 512;
  in.values["reps"] = 2;
  in.values["generator_seed"] = ctx.seed + 60;
  const RunOptions options = gpus(2, "deferred");
  const std::string call = "time_matmul_ms(a, b, 2) with 512x512 a and b on cuda:0";
  const Run idle = ctx.student("time_matmul_ms", in, options);
  if (auto early = read_too_early(idle, call)) return *early;
  if (auto early = ctx.unless_ok(idle)) return *early;
  if (!idle.out.values.value("emulated", true)) return Outcome::pass("not judged: this probe needs the emulated GPU");
  const int queued = 8;  // kernels on a 16M-element tensor (runner.cpp)
  Bundle busy_in = in;
  busy_in.values["queued"] = queued;
  const Run busy = ctx.student("time_matmul_ms", busy_in, options);
  if (auto early = read_too_early(busy, call)) return *early;
  if (auto early = ctx.unless_ok(busy)) return *early;
  ctx.details["time_matmul"] = busy.out.values;
  std::string error;
  const std::optional<double> expected = reference_ms(ctx, busy_in, options, error);
  if (!expected) return Outcome::error(error);
  const double idle_ms = idle.out.values["ms"], busy_ms = busy.out.values["ms"];
  const double queued_ms = busy.out.values.value("queued_ms", 0.0);
  if (idle_ms > 10 * *expected) {
    return Outcome::fail(host_clock_message(call + " returned " + fixed(idle_ms, 4) + " ms per product; the modelled "
                                            "H100 took " + fixed(*expected, 4) + " ms"));
  }
  // The queued kernels add up to queued_ms / reps to a time per product that
  // includes them (less what ran while the host was still queueing them).
  if (busy_ms - idle_ms > 0.25 * queued_ms / 2) {
    return Outcome::fail(call + " returned " + fixed(idle_ms, 4) + " ms per product on an idle GPU, but " +
                         fixed(busy_ms, 4) + " ms when " + std::to_string(queued) + " kernels (" + fixed(queued_ms, 3) +
                         " ms of GPU work) were still queued on cuda:0 before the call (the modelled H100: " +
                         fixed(*expected, 4) + " ms per product): you timed them too. The clock started while earlier GPU work was still queued: call "
                         "tiny::cuda::synchronize(device) after the warm-up and before reading the start time (an "
                         "event recorded on the stream needs no wait: it is stamped after the work queued before it)");
  }
  return Outcome::pass();
}
