// Writes a grader HTML report with every kind of chart the report draws (loss
// curves, timing bars, GPU memory over time, GPU timelines) and a counters table, for the
// browser test (report_in_browser.sh):  docs_report_sample OUT.html
// The results are built by hand, as tests/grader/test_report.cpp does, so the
// page is the same on every machine and needs no lesson to be built.
#include <algorithm>
#include <cmath>
#include <fstream>
#include <iostream>

#include "report.h"

namespace {

using nlohmann::json;

workbook::CheckResult check(const std::string& name, const std::string& verdict, const std::string& message,
                            json details = json::object()) {
  workbook::CheckResult c;
  c.name = name;
  c.summary = "checks " + name;
  c.verdict = verdict;
  c.message = message;
  c.seconds = 0.8;
  c.details = std::move(details);
  return c;
}

// A loss curve falling from 2.3 like a classifier's over `steps` steps.
json loss_curve(int steps, double speed) {
  json values = json::array();
  for (int i = 0; i < steps; ++i) values.push_back(0.3 + 2.0 * std::exp(-speed * i));
  return values;
}

// A Chrome trace as tiny::profiler writes it: three steps of a launch and a 60 us kernel
// each; with `sync_every_step`, a cudaStreamSynchronize after each kernel.
json sample_trace(bool sync_every_step) {
  json events = json::array();
  double host = 0, device = 0;
  for (int step = 0; step < 3; ++step) {
    const double step_start = host;
    events.push_back({{"ph", "X"}, {"cat", "cpu_op"}, {"name", "linear"}, {"pid", 0}, {"tid", 0}, {"ts", host},
                      {"dur", 12}});
    events.push_back({{"ph", "X"}, {"cat", "cuda_runtime"}, {"name", "cudaLaunchKernel"}, {"pid", 0}, {"tid", 0},
                      {"ts", host + 2}, {"dur", 6}});
    device = std::max(device, host + 8);
    events.push_back({{"ph", "X"}, {"cat", "kernel"}, {"name", "gemm"}, {"pid", 1}, {"tid", 0}, {"ts", device},
                      {"dur", 60}});
    device += 60;
    host += 12;
    if (sync_every_step) {
      events.push_back({{"ph", "X"}, {"cat", "cuda_runtime"}, {"name", "cudaStreamSynchronize"}, {"pid", 0},
                        {"tid", 0}, {"ts", host}, {"dur", device - host}});
      host = device;
    }
    events.push_back({{"ph", "X"}, {"cat", "user_annotation"}, {"name", "ProfilerStep#" + std::to_string(step)},
                      {"pid", 0}, {"tid", 0}, {"ts", step_start}, {"dur", host - step_start}});
  }
  events.push_back({{"ph", "M"}, {"name", "process_name"}, {"pid", 0}, {"args", {{"name", "host (modelled)"}}}});
  events.push_back({{"ph", "M"}, {"name", "process_name"}, {"pid", 1}, {"args", {{"name", "cuda:0 (modelled)"}}}});
  events.push_back({{"ph", "M"}, {"name", "thread_name"}, {"pid", 1}, {"tid", 0}, {"args", {{"name", "stream 0"}}}});
  return {{"traceEvents", events}, {"otherData", {{"clock", "modelled"}}}};
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: docs_report_sample OUT.html\n";
    return 2;
  }
  workbook::Lesson loop, memory;
  loop.number = 4;
  loop.title = "the full training loop";
  memory.number = 8;
  memory.title = "memory pitfalls";

  workbook::LessonResult r;
  r.lesson = &loop;
  r.status = "passed";
  json trains;
  trains["curves"]["loss per step"] = {{"yours", loss_curve(40, 0.09)}, {"reference", loss_curve(40, 0.1)}};
  r.checks.push_back(check("loss_falls", "pass", "", trains));
  workbook::CheckResult timed = check("fast_enough", "pass", "time: yours 12.1 ms, reference 11.4 ms");
  timed.timed = true;
  timed.details["timing"] = {{"yours_ms", {12.0, 12.1, 12.4, 11.9, 12.2}},
                             {"reference_ms", {11.3, 11.4, 11.6, 11.2, 11.5}},
                             {"ratio", 1.06}, {"ratio_low", 1.03}, {"ratio_high", 1.09}};
  r.checks.push_back(timed);
  json device = {{"synchronizations", 2}, {"kernel_launches", 415}, {"bytes_host_to_device_pinned", 802816},
                 {"memory_allocated", 1 << 22}};
  json counters;
  counters["counters"] = {{"yours", {{"cuda:0", device}}}, {"reference", {{"cuda:0", device}}}};
  // The GPU timelines, the student's and the reference's: yours reads the loss with .item() every
  // step (the host waits, the GPU idles), the reference once at the end.
  counters["timelines"] = {{"yours", sample_trace(true)}, {"reference", sample_trace(false)}};
  r.checks.push_back(check("few_synchronizations", "pass", "", counters));
  r.passed = r.total = 3;
  r.seconds = 6.5;

  workbook::LessonResult m;
  m.lesson = &memory;
  m.status = "in progress";
  json timeline_yours = json::array(), timeline_reference = json::array();
  for (int t = 0; t <= 10; ++t) {
    const int64_t leaking = (int64_t{1} << 20) * (1 + t), flat = int64_t{1} << 20;
    timeline_yours.push_back({{"t", t}, {"allocated", leaking}, {"reserved", leaking + (1 << 20)}});
    timeline_reference.push_back({{"t", t}, {"allocated", flat}, {"reserved", 2 * flat}});
  }
  timeline_yours[5]["marker"] = "epoch 2";
  json leak;
  leak["memory"] = {{"yours", timeline_yours}, {"reference", timeline_reference}};
  m.checks.push_back(check("memory_stays_flat", "fail",
                           "memory_allocated grows by 1.00 MiB per step: the loss is accumulated as a tensor, "
                           "which keeps every step's graph alive; accumulate loss.item() instead", leak));
  m.checks.push_back(check("frees_the_cache", "todo", "lesson 8: call tiny::cuda::empty_cache()"));
  m.passed = 0;
  m.total = 2;
  m.todo = 1;
  m.seconds = 4.0;

  std::ofstream out(argv[1]);
  out << workbook::html_report({r, m}, 20240101, "Sample report: every chart the grader draws");
  if (!out) {
    std::cerr << "docs_report_sample: cannot write " << argv[1] << "\n";
    return 1;
  }
  return 0;
}
