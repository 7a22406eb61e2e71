// The buffer behind tiny::cuda::MemoryTimeline: the caching allocator appends
// a sample at each event while a recording is attached to it (under its own
// lock, so samples are in allocator order), and MemoryTimeline reads it.
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "tiny/memory.h"

namespace tiny::cuda {

struct MemoryTimeline::Recording {
  enum Kind : uint8_t { kStart, kAlloc, kFree, kSegmentAlloc, kSegmentFree, kOom };
  // Names in the saved file and in MemorySample::kind.
  static const char* kind_name(Kind kind);

  // Kept small and string-free: op names are literals (core/op_scope.h).
  struct Sample {
    int64_t t_us;
    int64_t allocated;
    int64_t reserved;
    int64_t bytes;
    const char* op;
    Kind kind;
  };

  Recording(size_t max_entries_, std::chrono::steady_clock::time_point start_)
      : max_entries(max_entries_), start(start_) {}

  // Appends a sample, or counts it as dropped when the buffer is full.
  void add(Kind kind, int64_t allocated, int64_t reserved, int64_t bytes, const char* op) {
    std::lock_guard<std::mutex> lock(mutex);
    if (samples.size() + markers.size() >= max_entries) {
      ++dropped;
      return;
    }
    samples.push_back(Sample{now_us(), allocated, reserved, bytes, op, kind});
  }

  void mark(const std::string& label) {
    std::lock_guard<std::mutex> lock(mutex);
    if (samples.size() + markers.size() >= max_entries) {
      ++dropped;
      return;
    }
    markers.push_back(MemoryMarker{now_us(), label});
  }

  // Microseconds since start; read under `mutex`, so times never go back.
  int64_t now_us() const {
    return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - start).count();
  }

  const size_t max_entries;
  const std::chrono::steady_clock::time_point start;
  mutable std::mutex mutex;  // guards everything below
  std::vector<Sample> samples;
  std::vector<MemoryMarker> markers;
  uint64_t dropped = 0;
  int64_t stopped_us = -1;  // when stop() was called, -1 while recording
};

}  // namespace tiny::cuda
