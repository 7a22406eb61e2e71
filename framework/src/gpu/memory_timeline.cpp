// tiny::cuda::MemoryTimeline: attaches a buffer to a device's caching
// allocator, which appends a sample at each event; save_json writes the
// "tiny.memory_timeline/1" file described in docs/memory_timeline.md.
#include <nlohmann/json.hpp>

#include "gpu/caching_allocator.h"
#include "gpu/device_context.h"
#include "gpu/memory_recording.h"
#include "io/atomic_file.h"
#include "tiny/cuda.h"
#include "tiny/error.h"

namespace tiny::cuda {

const char* MemoryTimeline::Recording::kind_name(Kind kind) {
  switch (kind) {
    case kStart: return "start";
    case kAlloc: return "alloc";
    case kFree: return "free";
    case kSegmentAlloc: return "segment_alloc";
    case kSegmentFree: return "segment_free";
    case kOom: return "oom";
  }
  return "unknown";
}

MemoryTimeline::MemoryTimeline(int device, size_t max_entries)
    : device_(gpu::resolve_index(device < 0 ? Device(DeviceType::CUDA) : Device(DeviceType::CUDA, device))),
      max_entries_(max_entries) {
  TINY_CHECK(max_entries > 0, ValueError, "MemoryTimeline: max_entries must be at least 1, got ", max_entries);
}

MemoryTimeline::~MemoryTimeline() { stop(); }

void MemoryTimeline::start() {
  TINY_CHECK(!recording_now_, Error, "MemoryTimeline::start: this timeline already records cuda:", device_,
             "; call stop() first");
  auto recording = std::make_shared<Recording>(max_entries_, std::chrono::steady_clock::now());
  gpu::device_allocator(device_).attach_timeline(recording);  // throws when another timeline records
  recording_ = std::move(recording);
  recording_now_ = true;
}

void MemoryTimeline::stop() {
  if (!recording_now_) return;
  gpu::device_allocator(device_).detach_timeline(recording_.get());
  {
    std::lock_guard<std::mutex> lock(recording_->mutex);
    recording_->stopped_us = recording_->now_us();
  }
  recording_now_ = false;
}

bool MemoryTimeline::is_recording() const { return recording_now_; }

void MemoryTimeline::mark(const std::string& label) {
  TINY_CHECK(recording_now_, Error, "MemoryTimeline::mark(\"", label,
             "\"): the timeline is not recording; call start() first");
  recording_->mark(label);
}

std::vector<MemorySample> MemoryTimeline::samples() const {
  std::vector<MemorySample> out;
  if (!recording_) return out;
  std::lock_guard<std::mutex> lock(recording_->mutex);
  out.reserve(recording_->samples.size());
  for (const Recording::Sample& s : recording_->samples) {
    out.push_back(MemorySample{s.t_us, s.allocated, s.reserved, Recording::kind_name(s.kind), s.bytes, s.op});
  }
  return out;
}

std::vector<MemoryMarker> MemoryTimeline::markers() const {
  if (!recording_) return {};
  std::lock_guard<std::mutex> lock(recording_->mutex);
  return recording_->markers;
}

uint64_t MemoryTimeline::dropped() const {
  if (!recording_) return 0;
  std::lock_guard<std::mutex> lock(recording_->mutex);
  return recording_->dropped;
}

void MemoryTimeline::save_json(const std::string& path) const {
  TINY_CHECK(recording_ != nullptr, Error, "MemoryTimeline::save_json(\"", path,
             "\"): nothing was recorded; call start() first");
  const DeviceProperties properties = get_device_properties(device_);
  using nlohmann::json;
  // Written by hand around nlohmann's escaping so that the header comes first
  // in the documented order and each sample and marker is one line: a large
  // file stays readable, diffable and easy to grep.
  std::string text = "{\n";
  auto field = [&text](const char* key, const json& value) {
    text += "  \"" + std::string(key) + "\": " + value.dump() + ",\n";
  };
  field("schema", "tiny.memory_timeline/1");
  field("device", device_);
  field("device_name", properties.name);
  field("capacity", properties.total_memory);
  field("max_entries", max_entries_);
  {
    std::lock_guard<std::mutex> lock(recording_->mutex);
    const int64_t end = recording_->stopped_us >= 0 ? recording_->stopped_us : recording_->now_us();
    field("duration_us", end);
    field("recording", recording_->stopped_us < 0);
    field("dropped", recording_->dropped);
    field("note", recording_->dropped == 0
                      ? "complete: every allocator event while recording is in samples"
                      : "incomplete: max_entries (" + std::to_string(max_entries_) + ") was reached and " +
                            std::to_string(recording_->dropped) +
                            " later samples and markers were dropped; raise max_entries to keep them");
    field("sample_fields", json{"t_us", "allocated", "reserved", "kind", "bytes", "op"});
    text += "  \"samples\": [";
    const char* sep = "\n    ";
    for (const Recording::Sample& s : recording_->samples) {
      text += sep;
      text += json{s.t_us, s.allocated, s.reserved, Recording::kind_name(s.kind), s.bytes, s.op}.dump();
      sep = ",\n    ";
    }
    text += recording_->samples.empty() ? "],\n" : "\n  ],\n";
    text += "  \"markers\": [";
    sep = "\n    ";
    for (const MemoryMarker& m : recording_->markers) {
      text += sep;
      text += json{m.t_us, m.label}.dump();
      sep = ",\n    ";
    }
    text += recording_->markers.empty() ? "]\n" : "\n  ]\n";
  }
  text += "}\n";
  io::detail::AtomicFileWriter writer(path, "json", "memory_timeline.json");
  writer.write(text.data(), text.size());
  writer.commit();
}

}  // namespace tiny::cuda
