// CUPTI's records of a real GPU's work merged into the host's recording (gpu_activity.h).
#include "profiler/gpu_activity.h"

#include <cxxabi.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <unordered_map>

namespace tiny::profiler::detail {

using gpu::model::TraceEvent;

int64_t ClockMap::to_host(uint64_t cupti_ns) const {
  // Differences first, in signed 64 bits: both clocks count nanoseconds
  // since some boot-time origin, far from overflow.
  const int64_t since = static_cast<int64_t>(cupti_ns - cupti_start);
  const int64_t cupti_span = static_cast<int64_t>(cupti_stop - cupti_start);
  const int64_t host_span = host_stop - host_start;
  if (cupti_span <= 0 || host_span <= 0) return host_start + since;  // one sample: an offset alone
  return host_start + static_cast<int64_t>(static_cast<long double>(since) * host_span / cupti_span);
}

std::string demangle(const std::string& name) {
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> out(abi::__cxa_demangle(name.c_str(), nullptr, nullptr, &status), std::free);
  return status == 0 && out != nullptr ? std::string(out.get()) : name;
}

const char* intern(const std::string& text) {
  static std::mutex mutex;
  static auto* texts = new std::set<std::string>();  // never freed: events may outlive static destruction
  std::lock_guard<std::mutex> lock(mutex);
  return texts->insert(text).first->c_str();
}

namespace {

TraceEvent::Kind event_kind(GpuWork::Kind kind) {
  switch (kind) {
    case GpuWork::Kind::kernel: return TraceEvent::Kind::kernel;
    case GpuWork::Kind::memcpy_to_device: return TraceEvent::Kind::memcpy_to_device;
    case GpuWork::Kind::memcpy_to_host: return TraceEvent::Kind::memcpy_to_host;
    case GpuWork::Kind::memcpy_device: return TraceEvent::Kind::memcpy_device;
    case GpuWork::Kind::memset: return TraceEvent::Kind::memset;
  }
  return TraceEvent::Kind::kernel;
}

// Copies and memsets are named as the emulated GPU names them, so that
// key_averages() has the same rows on both.
const char* work_name(const GpuWork& w) {
  switch (w.kind) {
    case GpuWork::Kind::memcpy_to_device: return "HostToDevice";
    case GpuWork::Kind::memcpy_to_host: return "DeviceToHost";
    case GpuWork::Kind::memcpy_device: return "DeviceToDevice";
    case GpuWork::Kind::memset: return "memset";
    case GpuWork::Kind::kernel: break;
  }
  return intern(demangle(w.name));
}

// The calls the trace keeps without GPU work of their own: the waits, as the
// emulated GPU records cudaStreamSynchronize, cudaDeviceSynchronize and
// cudaEventSynchronize. (Driver calls are left out: the runtime's
// synchronizes call the driver's, which would show every wait twice.)
bool is_synchronize(const ApiCall& c) { return c.runtime && c.name.find("Synchronize") != std::string::npos; }

// Where an event sits in the order of issue: a call when it returned, an op
// when it ended (after the calls it made: `second`), as the emulator records them.
std::pair<int64_t, int> issue_order(const TraceEvent& e) {
  if (e.kind == TraceEvent::Kind::cpu_op) return {e.host_end_ns, 1};
  return {e.launch_known ? e.host_end_ns : e.start_ns, 0};
}

// What the merge looks up: the calls by correlation id, the ops by id, and the
// trace's host thread of each CUPTI thread id.
struct Links {
  struct Op {
    const char* name;
    int thread;
  };
  std::unordered_map<uint32_t, const ApiCall*> runtime_call, driver_call;
  std::unordered_map<uint32_t, uint64_t> op_id_of_call;
  std::unordered_map<uint64_t, Op> ops;  // copied: the host's events grow during the merge
  std::map<uint32_t, int> thread_of_id;
  int next_thread = 0;

  const Op* op_of(uint32_t correlation) const {
    const auto id = op_id_of_call.find(correlation);
    if (id == op_id_of_call.end()) return nullptr;
    const auto op = ops.find(id->second);
    return op == ops.end() ? nullptr : &op->second;
  }
  int thread_of(const ApiCall& c) {
    const auto found = thread_of_id.find(c.thread);
    return found != thread_of_id.end() ? found->second : (thread_of_id[c.thread] = next_thread++);
  }
  // The call that launched `w`: the runtime's, else the driver's.
  const ApiCall* call_of(const GpuWork& w) const {
    const ApiCall* call = nullptr;
    if (w.runtime_correlation != 0) {
      const auto found = runtime_call.find(w.runtime_correlation);
      if (found != runtime_call.end()) call = found->second;
    }
    for (auto* calls : {&runtime_call, &driver_call}) {
      const auto found = calls->find(w.correlation);
      if (call == nullptr && found != calls->end()) call = found->second;
    }
    return call;
  }
};

Links links_of(const std::vector<TraceEvent>& host, const GpuActivities& gpu) {
  Links l;
  for (const ApiCall& c : gpu.calls) (c.runtime ? l.runtime_call : l.driver_call)[c.correlation] = &c;
  for (const ExternalLink& x : gpu.links) l.op_id_of_call[x.correlation] = x.op_id;
  for (const TraceEvent& e : host) {
    if (e.kind == TraceEvent::Kind::cpu_op && e.correlation != 0) l.ops[e.correlation] = {e.name, e.thread};
    l.next_thread = std::max(l.next_thread, e.thread + 1);
  }
  // CUPTI's thread ids as the trace's host threads: the thread of an op that
  // made a call on it; a thread that made calls outside every op gets a track
  // of its own after tiny's threads.
  for (const ApiCall& c : gpu.calls) {
    if (const Links::Op* op = l.op_of(c.correlation)) l.thread_of_id.emplace(c.thread, op->thread);
  }
  return l;
}

// GPU work as the trace's event: on the host's clock, with the call that
// launched it and the op that made the call, where CUPTI says.
TraceEvent work_event(const GpuWork& w, Links& links, const ClockMap& clock) {
  const ApiCall* call = links.call_of(w);
  const Links::Op* op = call != nullptr ? links.op_of(call->correlation) : nullptr;
  if (op == nullptr) op = links.op_of(w.correlation);
  TraceEvent e;
  e.kind = event_kind(w.kind);
  e.name = work_name(w);
  e.op = op != nullptr ? op->name : "";
  e.device = w.device;
  e.stream = static_cast<int64_t>(w.stream);
  e.start_ns = clock.to_host(w.start_ns);
  e.end_ns = clock.to_host(w.end_ns);
  e.bytes = w.bytes;
  e.pinned = w.pinned;
  if (call != nullptr) {
    e.host_start_ns = clock.to_host(call->start_ns);
    e.host_end_ns = clock.to_host(call->end_ns);
    e.call = intern(call->name);
    e.correlation = call->correlation;
    e.thread = op != nullptr ? op->thread : links.thread_of(*call);
  } else {
    e.launch_known = false;
    e.host_start_ns = e.host_end_ns = e.start_ns;
    e.correlation = w.correlation;
    e.thread = op != nullptr ? op->thread : 0;
  }
  return e;
}

// A synchronize call as the trace's event, in the thread of its op.
TraceEvent synchronize_event(const ApiCall& c, Links& links, const ClockMap& clock) {
  TraceEvent e;
  e.kind = TraceEvent::Kind::synchronize;
  e.name = intern(c.name);
  const Links::Op* op = links.op_of(c.correlation);
  e.op = op != nullptr ? op->name : "";
  e.device = -1;  // CUPTI's API records do not say which device a call waited for
  e.stream = -1;
  e.start_ns = e.host_start_ns = clock.to_host(c.start_ns);
  e.end_ns = e.host_end_ns = clock.to_host(c.end_ns);
  e.call = e.name;
  e.correlation = c.correlation;
  e.thread = op != nullptr ? op->thread : links.thread_of(c);
  return e;
}

}  // namespace

std::vector<TraceEvent> merge_gpu_activities(std::vector<TraceEvent> host, const GpuActivities& gpu,
                                             const ClockMap& clock) {
  Links links = links_of(host, gpu);
  for (const GpuWork& w : gpu.work) {
    if (w.end_ns < w.start_ns) continue;  // never completed (the recorder waits for the GPU: not expected)
    host.push_back(work_event(w, links, clock));
  }
  for (const ApiCall& c : gpu.calls) {
    if (is_synchronize(c)) host.push_back(synchronize_event(c, links, clock));
  }
  std::stable_sort(host.begin(), host.end(),
                   [](const TraceEvent& a, const TraceEvent& b) { return issue_order(a) < issue_order(b); });
  return host;
}

}  // namespace tiny::profiler::detail
