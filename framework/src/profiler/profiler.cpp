// tiny::profiler: the recording of gpu/model/trace.h, exported as a Chrome
// trace (Kineto's shape, as PyTorch writes it) and summed as key_averages.
#include "tiny/profiler.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <sstream>
#include <vector>

#include <nlohmann/json.hpp>

#include "gpu/model/trace.h"
#include "io/atomic_file.h"
#include "tiny/error.h"

namespace tiny::profiler {

using gpu::model::TraceEvent;
using Kind = TraceEvent::Kind;

struct profile::Recording {
  bool recording = true;
  std::vector<TraceEvent> events;
};

profile::profile() : recording_(std::make_shared<Recording>()) { gpu::model::start_trace(); }

profile::~profile() {
  if (recording_->recording) gpu::model::stop_trace();
}

void profile::stop() {
  if (!recording_->recording) return;
  recording_->events = gpu::model::stop_trace();
  recording_->recording = false;
}

size_t profile::num_events() const { return recording_->events.size(); }

namespace {

const char* category(Kind kind) {
  switch (kind) {
    case Kind::kernel:
    case Kind::collective: return "kernel";  // Kineto files NCCL's kernels as kernels
    case Kind::memset: return "gpu_memset";
    case Kind::synchronize: return "cuda_runtime";
    default: return "gpu_memcpy";
  }
}

// The name of the host call that queued the work, as CUDA's runtime API names it.
const char* runtime_call(Kind kind) {
  switch (kind) {
    case Kind::kernel:
    case Kind::collective: return "cudaLaunchKernel";
    case Kind::memset: return "cudaMemsetAsync";
    default: return "cudaMemcpyAsync";
  }
}

double us(int64_t ns) { return static_cast<double>(ns) * 1e-3; }

// Track numbers within a device: streams from 0; each copy engine after them,
// then the collective engine (NCCL's kernels run on a stream of their own, and
// overlap the compute stream's kernels: Perfetto draws overlapping slices
// only on separate tracks).
int64_t device_track(const TraceEvent& e) {
  if (e.kind == Kind::memcpy_to_device) return 1000;
  if (e.kind == Kind::memcpy_to_host) return 1001;
  if (e.kind == Kind::collective) return 1002;
  return e.stream;
}

std::string track_name(int64_t track) {
  if (track == 1000) return "copy engine: host to device";
  if (track == 1001) return "copy engine: device to host";
  if (track == 1002) return "collectives (NCCL)";
  return "stream " + std::to_string(track);
}

constexpr int kHostPid = 0;
int device_pid(int device) { return 1 + device; }

}  // namespace

void profile::export_chrome_trace(const std::string& path) const {
  using json = nlohmann::json;
  json events = json::array();
  std::map<std::pair<int, int64_t>, bool> tracks;  // (pid, tid) seen
  std::map<int, bool> threads;
  int64_t flow = 0;
  for (const TraceEvent& e : recording_->events) {
    threads[e.thread] = true;
    if (e.kind == Kind::cpu_op) {  // an op's host range, around the launches it made
      events.push_back({{"ph", "X"}, {"cat", "cpu_op"}, {"name", e.name}, {"pid", kHostPid}, {"tid", e.thread},
                        {"ts", us(e.host_start_ns)}, {"dur", us(e.host_end_ns - e.host_start_ns)}});
      continue;
    }
    if (e.kind == Kind::synchronize) {
      events.push_back({{"ph", "X"}, {"cat", "cuda_runtime"}, {"name", e.name}, {"pid", kHostPid}, {"tid", e.thread},
                        {"ts", us(e.start_ns)}, {"dur", us(e.end_ns - e.start_ns)},
                        {"args", {{"device", e.device}}}});
      continue;
    }
    const int pid = device_pid(e.device);
    const int64_t tid = device_track(e);
    tracks[{pid, tid}] = true;
    ++flow;
    json args = {{"device", e.device}, {"stream", e.stream}, {"correlation", flow}, {"bytes", e.bytes}};
    if (e.op[0] != '\0') args["op"] = e.op;
    if (e.flops > 0) args["flops"] = e.flops;
    if (e.kind == Kind::memcpy_to_device || e.kind == Kind::memcpy_to_host) args["pinned"] = e.pinned;
    events.push_back({{"ph", "X"}, {"cat", "cuda_runtime"}, {"name", runtime_call(e.kind)}, {"pid", kHostPid},
                      {"tid", e.thread}, {"ts", us(e.host_start_ns)}, {"dur", us(e.host_end_ns - e.host_start_ns)},
                      {"args", {{"correlation", flow}}}});
    events.push_back({{"ph", "X"}, {"cat", category(e.kind)}, {"name", e.name}, {"pid", pid}, {"tid", tid},
                      {"ts", us(e.start_ns)}, {"dur", us(e.end_ns - e.start_ns)}, {"args", args}});
    // The arrow from the launch to the work (Kineto's "ac2g" flow).
    events.push_back({{"ph", "s"}, {"cat", "ac2g"}, {"name", "ac2g"}, {"id", flow}, {"pid", kHostPid},
                      {"tid", e.thread}, {"ts", us(e.host_start_ns)}});
    events.push_back({{"ph", "f"}, {"bp", "e"}, {"cat", "ac2g"}, {"name", "ac2g"}, {"id", flow}, {"pid", pid},
                      {"tid", tid}, {"ts", us(e.start_ns)}});
  }
  // Names of the processes and tracks, as Perfetto shows them.
  events.push_back({{"ph", "M"}, {"name", "process_name"}, {"pid", kHostPid}, {"args", {{"name", "host (modelled)"}}}});
  for (const auto& [thread, seen] : threads) {
    events.push_back({{"ph", "M"}, {"name", "thread_name"}, {"pid", kHostPid}, {"tid", thread},
                      {"args", {{"name", "host thread " + std::to_string(thread)}}}});
  }
  std::map<int, bool> devices;
  for (const auto& [track, seen] : tracks) {
    if (!devices[track.first]) {
      devices[track.first] = true;
      events.push_back({{"ph", "M"}, {"name", "process_name"}, {"pid", track.first},
                        {"args", {{"name", "cuda:" + std::to_string(track.first - 1) + " (modelled)"}}}});
    }
    events.push_back({{"ph", "M"}, {"name", "thread_name"}, {"pid", track.first}, {"tid", track.second},
                      {"args", {{"name", track_name(track.second)}}}});
  }
  const json trace = {{"traceEvents", events}, {"displayTimeUnit", "ms"},
                      {"otherData", {{"clock", "modelled (tiny's emulated GPU: docs/performance_model.md)"}}}};
  const std::string text = trace.dump();
  try {
    io::detail::AtomicFileWriter out(path, "Chrome trace", "trace.json");
    out.write(text.data(), text.size());
    out.commit();
  } catch (const Error& e) {
    TINY_THROW(IOError, "export_chrome_trace: cannot write the trace to '", path, "': ", e.what());
  }
}

std::string profile::key_averages() const {
  struct Row {
    int64_t calls = 0, host_ns = 0, device_ns = 0;
  };
  // A kernel's or copy's row, and its op's row too (as PyTorch's aten::linear counts its kernels' device time).
  std::map<std::string, Row> rows;
  for (const TraceEvent& e : recording_->events) {
    Row& r = rows[e.name];
    ++r.calls;
    r.host_ns += e.host_end_ns - e.host_start_ns;
    if (e.kind == Kind::synchronize || e.kind == Kind::cpu_op) continue;
    r.device_ns += e.end_ns - e.start_ns;
    if (e.op[0] != '\0') rows[e.op].device_ns += e.end_ns - e.start_ns;
  }
  std::vector<std::pair<std::string, Row>> sorted(rows.begin(), rows.end());
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const auto& a, const auto& b) { return a.second.device_ns > b.second.device_ns; });
  std::ostringstream out;
  char line[200];
  std::snprintf(line, sizeof line, "%-44s %8s %14s %14s %14s %14s\n", "Name", "# Calls", "Host total", "Host avg",
                "Device total", "Device avg");
  out << line << std::string(113, '-') << "\n";
  for (const auto& [name, r] : sorted) {
    if (r.calls == 0) continue;  // an op whose scope opened before the recording
    std::snprintf(line, sizeof line, "%-44s %8lld %11.3f us %11.3f us %11.3f us %11.3f us\n", name.c_str(),
                  static_cast<long long>(r.calls), us(r.host_ns), us(r.host_ns) / r.calls, us(r.device_ns),
                  us(r.device_ns) / r.calls);
    out << line;
  }
  out << "(modelled times on the emulated GPU: docs/performance_model.md)\n";
  return out.str();
}

}  // namespace tiny::profiler
