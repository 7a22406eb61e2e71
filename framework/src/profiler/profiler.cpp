// tiny::profiler: the recording of gpu/model/trace.h, exported as a Chrome
// trace (Kineto's shape, as PyTorch writes it) and summed as key_averages.
// On the emulated GPU every time is modelled; on a real GPU the host's side is
// timed with the host's clock and the GPU's comes from CUPTI
// (cupti_recorder.h), merged in when the profile stops (gpu_activity.h).
#include "tiny/profiler.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <iostream>
#include <map>
#include <mutex>
#include <sstream>
#include <vector>

#include <nlohmann/json.hpp>

#include "gpu/device_context.h"
#include "gpu/model/timeline.h"
#include "gpu/model/trace.h"
#include "io/atomic_file.h"
#include "profiler/cupti_recorder.h"
#include "tiny/cuda.h"
#include "tiny/error.h"

namespace tiny::profiler {

using gpu::model::TraceEvent;
using Kind = TraceEvent::Kind;

// The name of prof.step()'s ranges; compared by address.
constexpr const char* kProfilerStep = "ProfilerStep";
// The clock of a profile on the emulated GPU that recorded no GPU work.
constexpr const char* kHostMeasured =
    "measured on the host's clock: this profile recorded no GPU work, so there was nothing to model";

struct profile::Recording {
  bool recording = true;
  bool real_gpu = false;      // on a real GPU: the host's clock, and the GPU's rows from CUPTI
  bool cupti = false;         // CUPTI records (or recorded) the GPU's work
  std::string gpu_missing;    // on a real GPU without the GPU's rows: why, and how to fix it
  uint64_t dropped = 0;       // records CUPTI dropped
  bool host_measured = false;  // emulated, but no GPU work recorded: the host's steady clock, as torch.profiler's
  gpu::model::HostStamp step_start;  // where the current step began
  std::vector<TraceEvent> events;
};

namespace {

std::atomic<bool> g_pretend_real_gpu{false};
std::atomic<bool> g_said_gpu_missing{false};
std::mutex g_fake_mutex;
detail::FakeGpuRecorder g_fake;  // guarded by g_fake_mutex

detail::FakeGpuRecorder fake_recorder() {
  std::lock_guard<std::mutex> lock(g_fake_mutex);
  return g_fake;
}

// Once per process, as a warning should be: the trace's metadata says it every time.
void say_gpu_rows_missing(const std::string& why) {
  if (g_said_gpu_missing.exchange(true)) return;
  std::cerr << "tiny::profiler: the GPU's kernels, copies and memsets are not in this profile (only the host's "
               "ops are): "
            << why << "\n";
}

}  // namespace

namespace detail {
void pretend_real_gpu_for_testing(bool pretend) {
  g_pretend_real_gpu.store(pretend);
  g_said_gpu_missing.store(false);
}
void fake_gpu_recorder_for_testing(FakeGpuRecorder fake) {
  std::lock_guard<std::mutex> lock(g_fake_mutex);
  g_fake = std::move(fake);
}
}  // namespace detail

profile::profile() : profile(ProfileOptions{}) {}

profile::profile(const ProfileOptions& options) : recording_(std::make_shared<Recording>()) {
  Recording& r = *recording_;
  r.real_gpu = g_pretend_real_gpu.load() || gpu::device_runtime_is_cuda();
  if (!r.real_gpu) {
    gpu::model::start_trace(options.record_shapes);
  } else {
    gpu::model::start_trace(options.record_shapes, detail::cupti_op_hooks());  // throws if one is open
    r.gpu_missing = fake_recorder() ? "" : detail::cupti_start();
    r.cupti = r.gpu_missing.empty();
    if (!r.cupti) say_gpu_rows_missing(r.gpu_missing);
  }
  r.step_start = gpu::model::host_stamp();
}

profile::~profile() {
  if (!recording_->recording) return;
  gpu::model::stop_trace();
  if (recording_->cupti && !fake_recorder()) (void)detail::cupti_stop();
}

void profile::stop() {
  Recording& r = *recording_;
  if (!r.recording) return;
  r.events = gpu::model::stop_trace();
  r.recording = false;
  // A CPU-only program's modelled host time counts dispatch alone, none of the
  // CPU's arithmetic: with no GPU work to model, show what the host measured.
  r.host_measured = !r.real_gpu && std::all_of(r.events.begin(), r.events.end(),
                                               [](const TraceEvent& e) { return e.kind == Kind::cpu_op; });
  if (r.host_measured) {
    for (TraceEvent& e : r.events) {
      e.host_start_ns = e.real_start_ns;
      e.host_end_ns = e.real_end_ns;
    }
  }
  if (!r.cupti) return;
  const detail::FakeGpuRecorder fake = fake_recorder();
  detail::CuptiRecording gpu = fake ? fake(r.events) : detail::cupti_stop();
  if (!gpu.error.empty()) {
    r.cupti = false;
    r.gpu_missing = gpu.error;
    say_gpu_rows_missing(gpu.error);
    return;
  }
  r.dropped = gpu.activities.dropped;
  r.events = detail::merge_gpu_activities(std::move(r.events), gpu.activities, gpu.clock);
  if (r.dropped > 0) {
    std::cerr << "tiny::profiler: CUPTI dropped " << r.dropped
              << " records (its buffers were full): the trace misses some of the GPU's work; profile fewer steps\n";
  }
}

void profile::step() {
  if (!recording_->recording) return;
  TraceEvent e;
  e.kind = Kind::cpu_op;
  e.name = kProfilerStep;
  gpu::model::end_host_range(e, recording_->step_start);
  recording_->step_start = {e.host_end_ns, e.real_end_ns};
  gpu::model::trace(std::move(e));
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
int64_t device_track(const TraceEvent& e, bool real_gpu) {
  if (real_gpu) return e.stream;  // a real GPU's work, copies too, on its stream's track (CUPTI's stream id), as Kineto
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

namespace {

// Kineto's "Input Dims" and "Input type" of a cpu_op recorded with record_shapes.
void add_inputs(const TraceEvent& e, nlohmann::json& args) {
  if (e.input_dims.empty()) return;
  args["Input Dims"] = e.input_dims;
  nlohmann::json types = nlohmann::json::array();
  for (const char* t : e.input_types) types.push_back(t);
  args["Input type"] = types;
}

// The shapes as PyTorch's table prints them: [[64, 784], [512, 784], []].
std::string shapes_string(const TraceEvent& e) {
  std::string out = "[";
  for (size_t i = 0; i < e.input_dims.size(); ++i) {
    out += i ? ", [" : "[";
    for (size_t j = 0; j < e.input_dims[i].size(); ++j) out += (j ? ", " : "") + std::to_string(e.input_dims[i][j]);
    out += "]";
  }
  return out + "]";
}

// "cuda:0 NVIDIA H200" for each real device the recording used.
std::string real_devices(const std::vector<TraceEvent>& recorded) {
  std::map<int, bool> used;
  for (const TraceEvent& e : recorded) {
    if (e.kind != Kind::cpu_op && e.kind != Kind::synchronize) used[e.device] = true;
  }
  std::string out;
  for (const auto& [device, seen] : used) {
    if (device < 0 || device >= cuda::device_count()) continue;
    out += (out.empty() ? "" : ", ") + std::string("cuda:") + std::to_string(device) + " " +
           cuda::get_device_name(device);
  }
  return out;
}

// "cuda:0 modelled on the H100 SXM" for each emulated device the recording used.
std::string modelled_devices(const std::vector<TraceEvent>& recorded) {
  std::map<int, bool> used;
  for (const TraceEvent& e : recorded) {
    if (e.kind != Kind::cpu_op && e.kind != Kind::synchronize) used[e.device] = true;
  }
  std::string out;
  for (const auto& [device, seen] : used) {
    if (device < 0 || device >= cuda::device_count() || !cuda::is_emulated(device)) continue;
    out += (out.empty() ? "" : ", ") + std::string("cuda:") + std::to_string(device) + " modelled on the " +
           cuda::get_device_properties(device).modelled_gpu;
  }
  return out;
}

// A host-side event as Kineto writes it: prof.step()'s range (the `step`th),
// an op's range or a synchronize call; false for work on a GPU.
bool add_host_event(nlohmann::json& events, const TraceEvent& e, int64_t& step) {
  using json = nlohmann::json;
  if (e.kind == Kind::cpu_op && e.name == kProfilerStep) {  // prof.step()'s range, as Kineto writes it
    events.push_back({{"ph", "X"}, {"cat", "user_annotation"}, {"name", "ProfilerStep#" + std::to_string(step++)},
                      {"pid", kHostPid}, {"tid", e.thread}, {"ts", us(e.host_start_ns)},
                      {"dur", us(e.host_end_ns - e.host_start_ns)}});
    return true;
  }
  if (e.kind == Kind::cpu_op) {  // an op's host range, around the launches it made
    json op = {{"ph", "X"}, {"cat", "cpu_op"}, {"name", e.name}, {"pid", kHostPid}, {"tid", e.thread},
               {"ts", us(e.host_start_ns)}, {"dur", us(e.host_end_ns - e.host_start_ns)}};
    json args = json::object();
    add_inputs(e, args);
    if (e.correlation != 0) args["External id"] = e.correlation;  // what its launches carry in CUPTI
    if (!args.empty()) op["args"] = args;
    events.push_back(std::move(op));
    return true;
  }
  if (e.kind == Kind::synchronize) {
    json args = json::object();
    if (e.device >= 0) args["device"] = e.device;  // (a real GPU's synchronize calls do not say)
    if (e.correlation != 0) args["correlation"] = e.correlation;
    events.push_back({{"ph", "X"}, {"cat", "cuda_runtime"}, {"name", e.name}, {"pid", kHostPid}, {"tid", e.thread},
                      {"ts", us(e.start_ns)}, {"dur", us(e.end_ns - e.start_ns)}, {"args", args}});
    return true;
  }
  return false;
}

// Work on a GPU, on track (pid, tid): the runtime call that launched it (when
// known), the work, and the arrow between them, the trace's `flow`th.
void add_device_event(nlohmann::json& events, const TraceEvent& e, int pid, int64_t tid, int64_t flow) {
  using json = nlohmann::json;
  // The flow's id is the trace's own count; "correlation" is CUPTI's id of the call on a real GPU.
  const uint64_t correlation = e.correlation != 0 ? e.correlation : static_cast<uint64_t>(flow);
  json args = {{"device", e.device}, {"stream", e.stream}, {"correlation", correlation}, {"bytes", e.bytes}};
  if (e.op[0] != '\0') args["op"] = e.op;
  if (e.flops > 0) args["flops"] = e.flops;
  if (e.kind == Kind::memcpy_to_device || e.kind == Kind::memcpy_to_host) args["pinned"] = e.pinned;
  if (e.launch_known) {
    events.push_back({{"ph", "X"}, {"cat", "cuda_runtime"}, {"name", e.call != nullptr ? e.call : runtime_call(e.kind)},
                      {"pid", kHostPid}, {"tid", e.thread}, {"ts", us(e.host_start_ns)},
                      {"dur", us(e.host_end_ns - e.host_start_ns)}, {"args", {{"correlation", correlation}}}});
  }
  events.push_back({{"ph", "X"}, {"cat", category(e.kind)}, {"name", e.name}, {"pid", pid}, {"tid", tid},
                    {"ts", us(e.start_ns)}, {"dur", us(e.end_ns - e.start_ns)}, {"args", args}});
  if (!e.launch_known) return;  // CUPTI reported the work without its call: no launch to draw an arrow from
  // The arrow from the launch to the work (Kineto's "ac2g" flow).
  events.push_back({{"ph", "s"}, {"cat", "ac2g"}, {"name", "ac2g"}, {"id", flow}, {"pid", kHostPid},
                    {"tid", e.thread}, {"ts", us(e.host_start_ns)}});
  events.push_back({{"ph", "f"}, {"bp", "e"}, {"cat", "ac2g"}, {"name", "ac2g"}, {"id", flow}, {"pid", pid},
                    {"tid", tid}, {"ts", us(e.start_ns)}});
}

// Names of the processes and tracks, as Perfetto shows them.
void add_track_names(nlohmann::json& events, const std::map<int, bool>& threads,
                     const std::map<std::pair<int, int64_t>, bool>& tracks, bool real, bool host_measured) {
  events.push_back({{"ph", "M"}, {"name", "process_name"}, {"pid", kHostPid},
                    {"args", {{"name", host_measured ? "host" : "host (modelled)"}}}});
  for (const auto& [thread, seen] : threads) {
    events.push_back({{"ph", "M"}, {"name", "thread_name"}, {"pid", kHostPid}, {"tid", thread},
                      {"args", {{"name", "host thread " + std::to_string(thread)}}}});
  }
  std::map<int, bool> devices;
  for (const auto& [track, seen] : tracks) {
    if (!devices[track.first]) {
      devices[track.first] = true;
      const int device = track.first - 1;
      const std::string what =
          !real ? "(modelled)"
                : device < cuda::device_count() ? "(" + cuda::get_device_name(device) + ", measured by CUPTI)" : "";
      events.push_back({{"ph", "M"}, {"name", "process_name"}, {"pid", track.first},
                        {"args", {{"name", "cuda:" + std::to_string(device) + " " + what}}}});
    }
    events.push_back({{"ph", "M"}, {"name", "thread_name"}, {"pid", track.first}, {"tid", track.second},
                      {"args", {{"name", track_name(track.second)}}}});
  }
}

}  // namespace

namespace {
// torch.profiler's results are read once its `with` block has ended; so are these.
void check_stopped(bool recording, const char* call) {
  TINY_CHECK(!recording, Error, call, ": the profile is still recording; call prof.stop() first (torch.profiler "
             "gives its results once its `with` block has ended, and raises \"Profiler didn't finish running\" "
             "before)");
}
}  // namespace

std::string profile::chrome_trace() const {
  check_stopped(recording_->recording, "chrome_trace");
  using json = nlohmann::json;
  json events = json::array();
  int64_t step = 0;
  std::map<std::pair<int, int64_t>, bool> tracks;  // (pid, tid) seen
  std::map<int, bool> threads;
  int64_t flow = 0;
  const bool real = recording_->real_gpu;
  const bool measured = real || recording_->host_measured;
  for (const TraceEvent& e : recording_->events) {
    threads[e.thread] = true;
    if (add_host_event(events, e, step)) continue;
    const int pid = device_pid(e.device);
    const int64_t tid = device_track(e, real);
    tracks[{pid, tid}] = true;
    add_device_event(events, e, pid, tid, ++flow);
  }
  add_track_names(events, threads, tracks, real, measured);
  json other = {{"clock", recording_->host_measured ? kHostMeasured
                                                   : "modelled (tiny's emulated GPU: docs/performance_model.md)"}};
  const std::string modelled = real ? real_devices(recording_->events) : modelled_devices(recording_->events);
  if (!modelled.empty()) other["devices"] = modelled;
  if (real) {
    other["clock"] = "measured: the host's steady clock, from the process's first reading; the GPU's times from "
                     "CUPTI, put on the host's clock (cuptiGetTimestamp read against it when the profile started "
                     "and stopped)";
    if (!recording_->gpu_missing.empty()) other["gpu_rows_missing"] = recording_->gpu_missing;
    if (recording_->dropped > 0) other["cupti_dropped_records"] = recording_->dropped;
  }
  const json trace = {{"traceEvents", events}, {"displayTimeUnit", "ms"}, {"otherData", other}};
  return trace.dump();
}

void profile::export_chrome_trace(const std::string& path) const {
  check_stopped(recording_->recording, "export_chrome_trace");
  const std::string text = chrome_trace();
  try {
    io::detail::AtomicFileWriter out(path, "Chrome trace", "trace.json");
    out.write(text.data(), text.size());
    out.commit();
  } catch (const Error& e) {
    TINY_THROW(IOError, "export_chrome_trace: ", e.what());
  }
}

void profile::export_timeline_html(const std::string& path, const TimelineOptions& options) const {
  check_stopped(recording_->recording, "export_timeline_html");
  const std::string text = timeline_html(chrome_trace(), options);
  try {
    io::detail::AtomicFileWriter out(path, "timeline page", "trace.html");
    out.write(text.data(), text.size());
    out.commit();
  } catch (const Error& e) {
    TINY_THROW(IOError, "export_timeline_html: ", e.what());
  }
}

std::string profile::key_averages(bool group_by_input_shape) const {
  check_stopped(recording_->recording, "key_averages");
  struct Row {
    int64_t calls = 0, host_ns = 0, device_ns = 0;
  };
  // Rows by (name, input shapes); the shapes are "" unless grouped by them. A
  // kernel's or copy's row, and its op's row too (as PyTorch's aten::linear
  // counts its kernels' device time); grouped, to the row of the op's call
  // that launched it, with that call's shapes.
  using Key = std::pair<std::string, std::string>;
  std::map<Key, Row> rows;
  // An op's cpu_op event is recorded when it ends, after its launches: look ahead for its shapes.
  std::vector<const TraceEvent*> op_of(recording_->events.size(), nullptr);
  if (group_by_input_shape) {
    std::map<int, std::vector<size_t>> pending;  // per thread: launches whose op has not ended yet
    for (size_t i = 0; i < recording_->events.size(); ++i) {
      const TraceEvent& e = recording_->events[i];
      if (e.kind == Kind::cpu_op) {
        for (size_t j : pending[e.thread]) {
          if (recording_->events[j].op == e.name) op_of[j] = &e;
        }
        pending[e.thread].clear();
      } else if (e.op[0] != '\0') {
        pending[e.thread].push_back(i);
      }
    }
  }
  for (size_t i = 0; i < recording_->events.size(); ++i) {
    const TraceEvent& e = recording_->events[i];
    const std::string name = e.name == kProfilerStep ? "ProfilerStep*" : e.name;
    const std::string shapes = group_by_input_shape ? shapes_string(e) : "";
    Row& r = rows[{name, shapes}];
    ++r.calls;
    r.host_ns += e.host_end_ns - e.host_start_ns;
    if (e.kind == Kind::synchronize || e.kind == Kind::cpu_op) continue;
    r.device_ns += e.end_ns - e.start_ns;
    if (e.op[0] == '\0') continue;
    const std::string op_shapes = op_of[i] != nullptr ? shapes_string(*op_of[i]) : (group_by_input_shape ? "[]" : "");
    rows[{e.op, op_shapes}].device_ns += e.end_ns - e.start_ns;
  }
  std::vector<std::pair<Key, Row>> sorted(rows.begin(), rows.end());
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const auto& a, const auto& b) { return a.second.device_ns > b.second.device_ns; });
  std::ostringstream out;
  char line[256];
  std::snprintf(line, sizeof line, "%-44s %8s %14s %14s %14s %14s", "Name", "# Calls", "Host total", "Host avg",
                "Device total", "Device avg");
  out << line << (group_by_input_shape ? "  Input Shapes" : "") << "\n"
      << std::string(group_by_input_shape ? 150 : 113, '-') << "\n";
  for (const auto& [key, r] : sorted) {
    if (r.calls == 0) continue;  // an op whose scope opened before the recording
    // A name wider than its column is cut as PyTorch's table cuts it ("...").
    const std::string name = key.first.size() > 44 ? key.first.substr(0, 41) + "..." : key.first;
    std::snprintf(line, sizeof line, "%-44s %8lld %11.3f us %11.3f us %11.3f us %11.3f us", name.c_str(),
                  static_cast<long long>(r.calls), us(r.host_ns), us(r.host_ns) / r.calls, us(r.device_ns),
                  us(r.device_ns) / r.calls);
    out << line << (group_by_input_shape ? "  " + key.second : "") << "\n";
  }
  if (recording_->host_measured) {
    out << "(" << kHostMeasured << ")\n";
  } else if (!recording_->real_gpu) {
    out << "(modelled times on the emulated GPU: docs/performance_model.md)\n";
  } else if (recording_->cupti) {
    out << "(measured: host times on the host's clock, device times by CUPTI)\n";
  } else {
    out << "(host times on the host's clock; no device times, the GPU's work was not recorded: "
        << recording_->gpu_missing << ")\n";
  }
  return out.str();
}

}  // namespace tiny::profiler
