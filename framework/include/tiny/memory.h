/// @file memory.h
/// @brief Who holds the GPU's memory, and how it changes over time: the caching
/// allocator's snapshot (`torch.cuda.memory_snapshot`) and a memory timeline
/// recorder. Included by tiny/cuda.h.
///
/// Every block the caching allocator hands out is tagged with the user-facing
/// op that asked for it ("linear", "randn", "backward", "optimizer.step", or
/// "unknown" outside any op tiny names), so a snapshot answers "which op holds
/// my memory" and a timeline shows which op made the memory grow.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace tiny::cuda {

/// @brief One block of a segment in a memory snapshot (an entry of `torch.cuda.memory_snapshot()[i]["blocks"]`).
struct BlockInfo {
  uintptr_t address = 0;      ///< device address of the block (compare only; never dereference)
  size_t size = 0;            ///< bytes the block occupies (the request rounded up to 512, or more when not split)
  size_t requested_size = 0;  ///< bytes the tensor asked for; 0 for an inactive block
  /// @brief "active_allocated" (a live tensor holds it), "active_pending_free" (freed, but work queued on
  /// another stream through record_stream may still use it) or "inactive" (cached, free for reuse).
  std::string state;
  int64_t stream = 0;  ///< id of the stream whose pool the block belongs to (0: the default stream)
  /// @brief The op that allocated the block ("linear", "zeros", "backward", ...; "unknown" outside any op
  /// tiny names); empty for an inactive block.
  std::string op;
};

/// @brief One segment (one device malloc) in a memory snapshot, with its blocks in address order
/// (an entry of `torch.cuda.memory_snapshot()`).
struct SegmentInfo {
  int device = 0;               ///< the device index
  uintptr_t address = 0;        ///< device address of the segment's start
  size_t total_size = 0;        ///< bytes obtained from the device (sum of the blocks' sizes)
  size_t allocated_size = 0;    ///< bytes of its active_allocated blocks
  size_t active_size = 0;       ///< bytes of its active_allocated and active_pending_free blocks
  size_t requested_size = 0;    ///< bytes the live tensors in it asked for
  int64_t stream = 0;           ///< id of the stream the segment serves
  std::string segment_type;     ///< "small" (2 MiB segments, requests up to 1 MiB) or "large"
  std::vector<BlockInfo> blocks;  ///< every block of the segment, in address order
};

/// @brief The caching allocator's segments and their blocks (`torch.cuda.memory_snapshot()`).
///
/// `device` -1 (the default) lists every device's segments, as PyTorch does;
/// each segment names its device. The sum of all segments' total_size is
/// memory_reserved(), the sum of their allocated_size memory_allocated().
/// Segments come in address order per device. Taking a snapshot does not
/// synchronize: blocks freed by queued work show as they are at that moment.
std::vector<SegmentInfo> memory_snapshot(int device = -1);

/// @brief A readable answer to "who holds my memory" on device `device` (-1: the current device).
///
/// Totals (allocated, reserved, segments), the live bytes per op, largest
/// first, and the `top` largest live blocks with their op, size and requested
/// size.
std::string memory_snapshot_summary(int device = -1, size_t top = 10);

/// @brief One event of a MemoryTimeline: the device's memory just after an allocator event.
struct MemorySample {
  int64_t t_us = 0;       ///< microseconds since start()
  int64_t allocated = 0;  ///< memory_allocated() after the event, bytes
  int64_t reserved = 0;   ///< memory_reserved() after the event, bytes
  /// @brief "start" (the state when recording began), "alloc", "free", "segment_alloc",
  /// "segment_free" or "oom" (an allocation that failed with OutOfMemoryError).
  std::string kind;
  int64_t bytes = 0;  ///< size of the block or segment (rounded, as the allocator holds it); for "oom" the segment asked for
  std::string op;     ///< the op that asked (for "free": the op that had allocated the block)
};

/// @brief A label put on a MemoryTimeline with mark(), e.g. "step 3".
struct MemoryMarker {
  int64_t t_us = 0;   ///< microseconds since start()
  std::string label;  ///< as given to mark()
};

/// @brief Records how a device's memory changes over time: every allocation,
/// free, segment malloc and segment free while recording, plus markers
/// (PyTorch's `torch.cuda.memory._record_memory_history` and its trace).
///
/// Recording is off until start() and costs nothing measurable then (the
/// allocator tests one pointer). At most `max_entries` samples and markers
/// are kept; what comes after is dropped and counted (dropped()), and the
/// saved file says so. One timeline records a device at a time.
///
/// @code
/// tiny::cuda::MemoryTimeline timeline(0);
/// timeline.start();
/// for (int step = 1; step <= 3; ++step) {
///   timeline.mark("step " + std::to_string(step));
///   train_step();
/// }
/// timeline.stop();
/// timeline.save_json("memory_timeline.json");  // schema: docs/memory_timeline.md
/// @endcode
class MemoryTimeline {
 public:
  /// @brief A recorder for device `device` (-1: the current device) keeping at most `max_entries` entries.
  explicit MemoryTimeline(int device = -1, size_t max_entries = 100000);
  /// @brief Stops recording if it still is.
  ~MemoryTimeline();
  MemoryTimeline(const MemoryTimeline&) = delete;
  MemoryTimeline& operator=(const MemoryTimeline&) = delete;

  /// @brief Starts a new recording (earlier samples and markers are discarded); the first sample, "start",
  /// holds the memory in use at that moment. Throws tiny::Error when this or another timeline already
  /// records the device.
  void start();
  /// @brief Stops recording; the samples stay for save_json() and samples(). A no-op when not recording.
  void stop();
  /// @brief True between start() and stop().
  bool is_recording() const;
  /// @brief Adds a marker with the current time (e.g. "step 1" at the start of each training step).
  /// Throws tiny::Error when not recording.
  void mark(const std::string& label);

  /// @brief The samples recorded so far, oldest first.
  std::vector<MemorySample> samples() const;
  /// @brief The markers added so far, oldest first.
  std::vector<MemoryMarker> markers() const;
  /// @brief Samples and markers that did not fit in max_entries and were dropped.
  uint64_t dropped() const;
  /// @brief The device recorded.
  int device() const { return device_; }

  /// @brief Writes the recording as JSON (schema "tiny.memory_timeline/1", described in
  /// docs/memory_timeline.md), atomically: the file at `path` is replaced only once it is complete.
  /// Throws tiny::IOError when it cannot be written. Works while recording too (a copy of that moment).
  void save_json(const std::string& path) const;

  /// @brief Internal: the shared buffer the allocator appends to.
  struct Recording;

 private:
  int device_;
  size_t max_entries_;
  std::shared_ptr<Recording> recording_;
  bool recording_now_ = false;
};

}  // namespace tiny::cuda
