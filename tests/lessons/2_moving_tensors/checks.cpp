// Lesson 2's checks: where tensors are made and moved (device facts and the
// copy counters), computing on a GPU and bringing the answer back, repairing a
// function that mixes devices, and timing GPU work. The timing checks judge by
// the emulator's deferred mode and its counters, never by one clock against
// another: in deferred mode queued GPU work runs only when the host waits, so
// a clock read without waiting measures nothing, every time.
#include <cmath>

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

RunOptions gpus(int n, const std::string& mode = "") {
  RunOptions o;
  o.gpus = n;
  o.mode = mode;
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
    if (auto early = ctx.both("gpu_compute_then_cpu", in, mine, ref)) return *early;
    const std::string call = std::string("gpu_compute_then_cpu(x, w, ") + device + ")";
    const std::string got = mine.out.info("y").device;
    if (got != "cpu") {
      return Outcome::fail(call + " returned a tensor that is still on " + got +
                           ": the caller cannot read it there; bring it back with .cpu() before returning");
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
                        Case{"cuda:1", "cuda:1", "cuda:1"}}) {
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
  }
  return Outcome::pass();
}

WORKBOOK_CHECK(time_matmul_waits, "time_matmul_ms() warms up and waits for the GPU before reading the clock") {
  // On a GPU, in deferred mode: the products run only when the code waits.
  Bundle in;
  in.values["device"] = "cuda:1";
  in.values["n"] = 384;
  in.values["reps"] = 4;
  in.values["generator_seed"] = ctx.seed + 50;
  const Run mine = ctx.student("time_matmul_ms", in, gpus(2, "deferred"));
  if (auto early = ctx.unless_ok(mine)) return *early;
  const nlohmann::json& v = mine.out.values;
  const double ms = v["ms"], call_ms = v["call_ms"], floor_ms = v["floor_ms"];
  const int reps = v["reps"];
  const std::string call = "time_matmul_ms(a, b, " + std::to_string(reps) + ") with a and b on cuda:1";
  ctx.details["time_matmul"] = v;
  if (!std::isfinite(ms) || ms <= 0) {
    return Outcome::fail(call + " returned " + fixed(ms, 4) + " ms: expected a positive time per product");
  }
  const int64_t syncs = counter(mine, "cuda:1", "synchronizations");
  const int64_t launches = counter(mine, "cuda:1", "kernel_launches");
  if (syncs == 0) {
    if (counter(mine, "cuda:0", "synchronizations") > 0) {
      return Outcome::fail(call + ": you synchronized cuda:0, but the matrices are on cuda:1, so the clock never "
                           "waited for their work. Synchronize the device they are on: "
                           "tiny::cuda::synchronize(a.get_device())");
    }
    return Outcome::fail(call + " never waited for the GPU: " + kStoppedEarly);
  }
  if (v.value("emulated", true)) {
    if (!v.value("idle", true)) {
      return Outcome::fail(call + " returned while its products were still queued on the GPU: " + kStoppedEarly);
    }
    if (ms < 0.25 * floor_ms) {
      return Outcome::fail(call + " returned " + fixed(ms, 4) + " ms per product, but one product takes at least " +
                           fixed(floor_ms, 3) + " ms here, so they ran after your clock stopped: " +
                           kStoppedEarly + " (wait first, then read the clock)");
    }
  }
  if (ms * reps > call_ms * 1.01 + 0.05) {
    return Outcome::fail(call + " returned " + fixed(ms, 3) + " ms, but the whole call took " + fixed(call_ms, 3) +
                         " ms for " + std::to_string(reps) + " products: return the time per product, "
                         "that is the elapsed time divided by reps");
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

  // On the CPU, on a machine without a GPU.
  Bundle cpu_in = in;
  cpu_in.values["device"] = "cpu";
  cpu_in.values["n"] = 128;
  cpu_in.values["reps"] = 2;
  const Run cpu = ctx.student("time_matmul_ms", cpu_in, gpus(0));
  if (cpu.status == "error" || cpu.status == "crash") {
    // Typically a synchronize with no GPU to wait for (which tiny can answer with a crash).
    return Outcome::fail("time_matmul_ms(a, b, 2) with a and b on the CPU, on a machine without a GPU, " +
                         std::string(cpu.status == "error" ? "threw" : "failed") + ":\n  " + cpu.message +
                         "\nIf your code calls tiny::cuda::synchronize there: there is no GPU to wait for, so only "
                         "synchronize when a is on a GPU (a.is_cuda(), or a.get_device() >= 0)");
  }
  if (auto early = ctx.unless_ok(cpu)) return *early;
  const double cpu_ms = cpu.out.values["ms"];
  if (!std::isfinite(cpu_ms) || cpu_ms <= 0 || cpu_ms * 2 > double(cpu.out.values["call_ms"]) * 1.01 + 0.05) {
    return Outcome::fail("time_matmul_ms(a, b, 2) on the CPU returned " + fixed(cpu_ms, 4) + " ms, but the call took " +
                         fixed(cpu.out.values["call_ms"], 3) + " ms: expected the time per product");
  }
  return Outcome::pass("yours: " + fixed(ms, 3) + " ms per " + "384x384 product on the emulated cuda:1 (fastest " +
                       fixed(floor_ms, 3) + " ms), " + fixed(cpu_ms, 3) + " ms per 128x128 product on the CPU");
}

WORKBOOK_CHECK(time_matmul_clock_start, "time_matmul_ms() waits for earlier GPU work before starting the clock") {
  // Products are left queued before the call; a clock started without waiting includes them.
  Bundle in;
  in.values["device"] = "cuda:0";
  in.values["n"] = 256;
  in.values["reps"] = 1;
  in.values["queued"] = 1;
  in.values["generator_seed"] = ctx.seed + 60;
  const Run mine = ctx.student("time_matmul_ms", in, gpus(2, "deferred"));
  if (auto early = ctx.unless_ok(mine)) return *early;
  const nlohmann::json& v = mine.out.values;
  ctx.details["time_matmul"] = v;
  if (!v.value("emulated", true)) return Outcome::pass("not judged: this probe needs the emulated GPU");
  const double ms = v["ms"], bound_ms = v["bound_ms"], queued_ms = v["queued_ms"];
  // A correct measurement lies wholly after the queued work finished, so it is
  // at most bound_ms; one that includes the queued work is about queued_ms longer.
  if (ms > bound_ms + 0.5 * queued_ms) {
    return Outcome::fail("time_matmul_ms(a, b, 1) returned " + fixed(ms, 2) + " ms, but " +
                         std::to_string(v["queued_count"].get<int>()) + " products queued on cuda:0 before the call (" +
                         fixed(queued_ms, 2) + " ms of work) were still running when your clock started, and you "
                         "timed them too. The clock started while earlier GPU work was still queued: call "
                         "tiny::cuda::synchronize(device) after the warm-up and before starting the clock");
  }
  return Outcome::pass();
}
