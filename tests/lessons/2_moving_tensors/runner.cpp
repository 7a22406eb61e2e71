// Lesson 2's glue: puts the inputs where the check asked, calls each exercise,
// and writes down what came back, with the device counters of the call alone.
#include <chrono>
#include <optional>

#include "exercise.h"
#include "harness/runner.h"

namespace {

using Clock = std::chrono::steady_clock;

int gpu_count() { return tiny::cuda::is_available() ? tiny::cuda::device_count() : 0; }

double ms_between(Clock::time_point t0, Clock::time_point t1) {
  return std::chrono::duration<double, std::milli>(t1 - t0).count();
}

// The input tensor `name`, on the device the check asked for.
tiny::Tensor placed(const workbook::Bundle& in, const std::string& name) {
  return in.tensor(name).to(tiny::Device(in.values.at("where").at(name).get<std::string>()));
}

// Waits for every GPU, then starts their counters from zero: what is counted
// next is the exercise's own work, not the glue's.
void start_counting() {
  for (int d = 0; d < gpu_count(); ++d) tiny::cuda::synchronize(d);
  for (int d = 0; d < gpu_count(); ++d) workbook::reset_device_counters(d);
}

// The counters right after the exercise returned (before the glue does anything).
void record_counters(workbook::Bundle& out) {
  for (int d = 0; d < gpu_count(); ++d) {
    const tiny::cuda::DeviceCounters c = tiny::cuda::device_counters(d);
    out.values["counters"]["cuda:" + std::to_string(d)] = {
        {"synchronizations", c.synchronizations},
        {"kernel_launches", c.kernel_launches},
        {"bytes_host_to_device", c.bytes_host_to_device_pageable + c.bytes_host_to_device_pinned},
        {"bytes_device_to_host", c.bytes_device_to_host_pageable + c.bytes_device_to_host_pinned},
        {"bytes_device_to_device", c.bytes_device_to_device}};
  }
}

}  // namespace

WORKBOOK_EXERCISE(make_on_device) {
  tiny::Generator generator(in.values.at("generator_seed").get<uint64_t>());
  const tiny::IntArrayRef shape = in.values.at("shape").get<std::vector<int64_t>>();
  start_counting();
  const tiny::Tensor x = lesson2::make_on_device(shape, tiny::Device(in.values.at("device").get<std::string>()),
                                                 generator);
  record_counters(out);
  out.put("x", x);
}

WORKBOOK_EXERCISE(to_device) {
  std::vector<tiny::Tensor> tensors;
  for (int i = 0; i < in.values.at("count").get<int>(); ++i) tensors.push_back(placed(in, "t" + std::to_string(i)));
  start_counting();
  const std::vector<tiny::Tensor> moved =
      lesson2::to_device(tensors, tiny::Device(in.values.at("device").get<std::string>()));
  record_counters(out);
  out.values["count"] = moved.size();
  for (size_t i = 0; i < moved.size(); ++i) out.put("moved" + std::to_string(i), moved[i]);
  // The inputs must not have changed place (a tiny::Tensor handle cannot, but say so if it did).
  for (size_t i = 0; i < tensors.size(); ++i) out.values["input_devices"].push_back(tensors[i].device().str());
}

WORKBOOK_EXERCISE(where_is) { out.values["index"] = lesson2::where_is(placed(in, "x")); }

WORKBOOK_EXERCISE(gpu_compute_then_cpu) {
  const tiny::Tensor x = placed(in, "x"), w = placed(in, "w");
  start_counting();
  const tiny::Device device(in.values.at("device").get<std::string>());
  const tiny::Tensor y = lesson2::gpu_compute_then_cpu(x, w, device);
  record_counters(out);
  // Whether the GPU still had work queued when the answer was handed back (a
  // non_blocking copy back nobody waited for): in deferred mode it has not run.
  out.values["idle"] = device.is_cpu() || tiny::cuda::current_stream(device.index()).query();
  out.put("y", y);
}

WORKBOOK_EXERCISE(linear_relu) {
  const tiny::Tensor x = placed(in, "x"), w = placed(in, "w"), b = placed(in, "b");
  start_counting();
  const tiny::Tensor y = lesson2::linear_relu(x, w, b);
  record_counters(out);
  out.put("y", y);
}

// Calls the student's time_matmul_ms and keeps what is needed to judge the
// number, which is modelled time on the emulated GPU (the check compares it
// with the reference's, on the same products):
//  - idle: whether the GPU's stream had nothing left queued when the call
//    returned (in deferred mode queued work runs only when someone waits);
//  - call_ms: how long the whole call took on this CPU's clock (on the CPU,
//    a mean times reps cannot exceed it);
//  - with "queued" > 0, that many kernels are left queued, unsynchronized,
//    before the call (each adds 1 to a 16M-element tensor: long on the GPU,
//    quick to queue, so most of them are still waiting when the call starts);
//    queued_ms is their GPU time, from events around them: a clock started
//    without waiting for them times them too.
WORKBOOK_EXERCISE(time_matmul_ms) {
  const tiny::Device device(in.values.at("device").get<std::string>());
  const int64_t n = in.values.at("n").get<int64_t>();
  const int reps = in.values.at("reps").get<int>();
  const int queued = in.values.value("queued", 0);
  tiny::Generator generator(in.values.at("generator_seed").get<uint64_t>());
  const tiny::Tensor a = tiny::randn({n, n}, device, generator), b = tiny::randn({n, n}, device, generator);
  const int gpu = a.get_device();
  tiny::cuda::Event queued_start(true), queued_end(true);
  if (gpu >= 0 && queued > 0) {
    for (int d = 0; d < gpu_count(); ++d) tiny::cuda::synchronize(d);
    const tiny::Tensor big = tiny::zeros({int64_t{1} << 24}, device);
    queued_start.record(tiny::cuda::current_stream(gpu));
    for (int i = 0; i < queued; ++i) big.add_(1);
    queued_end.record(tiny::cuda::current_stream(gpu));
    for (int d = 0; d < gpu_count(); ++d) workbook::reset_device_counters(d);
  } else {
    start_counting();
  }

  // On the emulated GPU the call is profiled: the grader's report draws its GPU timeline beside the reference's.
  std::optional<tiny::profiler::profile> prof;
  if (gpu >= 0 && tiny::cuda::is_emulated(gpu)) prof.emplace();
  const Clock::time_point t0 = Clock::now();
  const double ms = lesson2::time_matmul_ms(a, b, reps);
  const Clock::time_point t1 = Clock::now();
  record_counters(out);
  if (prof) {
    prof->stop();
    out.values["trace"] = nlohmann::json::parse(prof->chrome_trace());
  }
  out.values["idle"] = gpu < 0 || tiny::cuda::current_stream(gpu).query();
  out.values["ms"] = ms;
  out.values["call_ms"] = ms_between(t0, t1);
  out.values["reps"] = reps;
  out.values["emulated"] = gpu >= 0 && tiny::cuda::is_emulated(gpu);
  for (int d = 0; d < gpu_count(); ++d) tiny::cuda::synchronize(d);
  if (gpu >= 0 && queued > 0) out.values["queued_ms"] = queued_start.elapsed_time(queued_end);
}
