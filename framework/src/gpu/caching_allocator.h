// The device caching allocator: where GPU tensor storage comes from, for the
// real CUDA runtime and for the emulated GPU alike (DESIGN.md section 3, "One
// allocator design for every GPU"). It sits above gpu::Runtime's raw_malloc /
// raw_free, so both report the same statistics and the memory lessons
// (fragmentation, empty_cache, out-of-memory, record_stream) behave the same.
//
// Why cache: cudaMalloc and cudaFree are slow and cudaFree synchronizes the
// device, so a training loop that went to the driver for every tensor would
// stall. Freed blocks are kept and handed out again; the driver is asked only
// when no cached block fits. The design is PyTorch's CUDACachingAllocator:
//
// - Sizes are rounded up to multiples of 512 bytes (round_size).
// - Requests of at most 1 MiB come from the small pool, whose segments (the
//   unit asked of raw_malloc) are 2 MiB; bigger requests come from the large
//   pool, whose segments are 20 MiB for requests below 10 MiB (so that mid-sized
//   tensors pack into a shared segment) and the request rounded up to 2 MiB
//   above that (segment_size).
// - A request takes the smallest free block of its pool that fits (best fit),
//   among the blocks of its own stream only. A block bigger than needed is
//   split; the remainder stays free when it is worth keeping (at least 512 B in
//   the small pool, more than 1 MiB in the large pool; a smaller remainder stays
//   attached to the allocation, as PyTorch does, so large-pool fragments never
//   hold tiny requests).
// - A freed block merges with free neighbours of the same segment, so a
//   segment whose blocks are all freed is again one free block.
// - Memory is stream-ordered. A block freed while its stream still has queued
//   work is reusable at once by that stream (later work on the stream runs
//   after the earlier users). Use on another stream must be declared with
//   record_stream: at free() an event is recorded on each such stream, and
//   the block returns to its pool only when all those events have completed
//   (polled at the next allocate / free / empty_cache).
// - When raw_malloc fails, the allocator synchronizes the device, gives every
//   cached whole segment (unsplit, unused) back and retries once; if that
//   fails too it throws tiny::OutOfMemoryError with PyTorch's message. Nothing
//   is left half-done: the allocator stays consistent and later requests that
//   fit still succeed.
// - empty_cache() synchronizes the device, then gives back every segment with
//   no allocated block. Segments with a live tensor in them stay (that memory
//   is "non-releasable": the lesson on fragmentation shows it).
//
// Statistics have PyTorch's names and meaning (torch.cuda.memory_stats):
//   allocated_bytes       blocks handed out and not yet freed (rounded sizes)
//   reserved_bytes        segments obtained from raw_malloc
//   active_bytes          allocated + freed blocks still waiting for events
//   inactive_split_bytes  free blocks inside split segments: cached memory
//                         that empty_cache cannot give back
//   requested_bytes       the unrounded sizes that were asked for
// each as current / peak / allocated (cumulative increases) / freed
// (cumulative decreases), for all pools, the small pool and the large pool.
//
// For the memory tools (tiny/memory.h), each block remembers the op that
// allocated it (core/op_scope.h: a pointer to a literal, set under the lock),
// snapshot() lists segments and blocks, and while a MemoryTimeline is attached
// every event appends a sample to it; unattached, the cost is one pointer test.
//
// Thread-safe: one mutex guards everything, and calls into the runtime are made
// under it, so the runtime must never call back into the allocator (its worker
// threads run kernels, they do not free tensors).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "gpu/memory_recording.h"
#include "gpu/runtime.h"
#include "tiny/memory.h"

namespace tiny::gpu {

// One statistic, as PyTorch's c10::CachingAllocator::Stat.
struct Stat {
  int64_t current = 0;
  int64_t peak = 0;       // highest current since creation or reset_peak_stats()
  int64_t allocated = 0;  // sum of all increases
  int64_t freed = 0;      // sum of all decreases
};

// Index into a StatArray: every pool together, or one pool.
enum StatType : int { kAggregatePool = 0, kSmallPool = 1, kLargePool = 2 };
using StatArray = std::array<Stat, 3>;

// torch.cuda.memory_stats(), field by field.
struct MemoryStats {
  StatArray allocation;            // blocks handed out
  StatArray segment;               // segments from raw_malloc
  StatArray active;                // allocated blocks + blocks waiting for events
  StatArray inactive_split;        // free blocks inside split segments
  StatArray allocated_bytes;
  StatArray reserved_bytes;
  StatArray active_bytes;
  StatArray inactive_split_bytes;
  StatArray requested_bytes;
  int64_t num_alloc_retries = 0;   // raw_malloc failures that released the cache and retried
  int64_t num_ooms = 0;            // OutOfMemoryError thrown
  int64_t num_device_alloc = 0;    // raw_malloc calls that succeeded
  int64_t num_device_free = 0;     // raw_free calls
};

class CachingAllocator {
 public:
  // Rounding granularity and minimum block size.
  static constexpr size_t kMinBlockSize = 512;
  // Largest request served by the small pool.
  static constexpr size_t kSmallSize = size_t{1} << 20;
  // Segment size of the small pool.
  static constexpr size_t kSmallBuffer = size_t{2} << 20;
  // Segment size of the large pool for requests below kMinLargeAlloc.
  static constexpr size_t kLargeBuffer = size_t{20} << 20;
  // From here on a large request gets a segment of its own size...
  static constexpr size_t kMinLargeAlloc = size_t{10} << 20;
  // ... rounded up to a multiple of this.
  static constexpr size_t kRoundLarge = size_t{2} << 20;

  // The allocator for one device of `runtime`. The runtime must outlive it.
  CachingAllocator(Runtime& runtime, int device);
  // Gives every segment back to the runtime, including ones with live blocks:
  // destroy an allocator only when nothing uses its memory any more.
  ~CachingAllocator();
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  // A block of at least nbytes for use on `stream` (nullptr for 0 bytes).
  // Throws tiny::OutOfMemoryError when the device has no room even after the
  // cache was released, tiny::DeviceError for a stream of another device.
  void* allocate(size_t nbytes, Stream stream);
  // Gives back a block from allocate(); nullptr is a no-op. Throws tiny::Error
  // for a pointer this allocator did not hand out (or already freed).
  void free(void* ptr);
  // Declares that the block at `ptr` is used by work queued on `stream` too,
  // so that after free() it is not reused before that work is done. A no-op
  // for the stream the block was allocated on.
  void record_stream(void* ptr, Stream stream);
  // Synchronizes the device, then gives every segment with no allocated
  // block back to the runtime.
  void empty_cache();

  MemoryStats stats() const;
  // Sets every peak to its current value (torch.cuda.reset_peak_memory_stats).
  void reset_peak_stats();
  // Sets every allocated/freed total, retry and OOM count to zero
  // (torch.cuda.reset_accumulated_memory_stats).
  void reset_accumulated_stats();
  // torch.cuda.memory_allocated() and friends, in bytes.
  size_t memory_allocated() const;
  size_t max_memory_allocated() const;
  size_t memory_reserved() const;
  size_t max_memory_reserved() const;
  // A table in the spirit of torch.cuda.memory_summary().
  std::string memory_summary() const;

  // The bytes really held for the live block at `ptr` (its rounded, possibly
  // unsplit size). Throws tiny::Error for an unknown pointer.
  size_t allocation_size(void* ptr) const;
  // Segments currently held from the runtime (each is one raw_malloc).
  size_t num_segments() const;

  // Every segment with its blocks in address order (tiny::cuda::memory_snapshot).
  std::vector<cuda::SegmentInfo> snapshot() const;
  // Attaches a MemoryTimeline's buffer: from now on every allocator event
  // appends a sample to it, starting with a "start" sample of the current
  // memory. Throws tiny::Error when one is attached already.
  void attach_timeline(std::shared_ptr<cuda::MemoryTimeline::Recording> recording);
  // Detaches `recording` if it is the one attached (else a no-op).
  void detach_timeline(const cuda::MemoryTimeline::Recording* recording);

  int device() const { return device_; }
  Runtime& runtime() const { return runtime_; }

  // The bytes a request of nbytes occupies: nbytes rounded up to 512.
  static size_t round_size(size_t nbytes);
  // The segment asked of raw_malloc when no cached block fits a request of
  // `rounded` bytes (already rounded).
  static size_t segment_size(size_t rounded);

 private:
  struct Block;
  struct BlockOrder {
    bool operator()(const Block* a, const Block* b) const;
  };
  using Pool = std::set<Block*, BlockOrder>;
  struct PendingEvent {
    int device;  // the device of the stream it was recorded on
    Event event;
    Block* block;
  };

  Pool& pool_for(bool small) { return small ? small_blocks_ : large_blocks_; }
  Block* find_free_block(Pool& pool, size_t size, Stream stream);
  Block* alloc_segment(size_t size, bool small, Stream stream);
  void pool_insert(Block* block);
  void pool_erase(Block* block);
  void free_block(Block* block);
  void merge_into(Block* dst, Block* src);
  void release_cached_segments();
  void release_segment(Block* block);
  void process_events();
  void synchronize_and_process_events();
  // Waits for the device with the lock released, then settles events (lock held on return).
  void synchronize_unlocked(std::unique_lock<std::mutex>& lock);
  void event_done(const PendingEvent& pending);
  Event get_event(int device);
  [[noreturn]] void throw_oom(size_t alloc_size);
  void update(StatArray& stat, bool small, int64_t amount);
  // Appends a timeline sample when a timeline is attached (lock held).
  void trace(cuda::MemoryTimeline::Recording::Kind kind, size_t bytes, const char* op) {
    if (__builtin_expect(timeline_ != nullptr, 0)) trace_slow(kind, bytes, op);
  }
  void trace_slow(cuda::MemoryTimeline::Recording::Kind kind, size_t bytes, const char* op);

  Runtime& runtime_;
  const int device_;

  mutable std::mutex mutex_;  // guards everything below
  Pool small_blocks_;         // free blocks, ordered by (stream, size, address)
  Pool large_blocks_;
  std::unordered_map<void*, Block*> allocated_;   // live blocks by address
  std::map<void*, size_t> segments_;              // segment base -> size
  std::vector<PendingEvent> pending_events_;      // blocks waiting for record_stream events
  std::vector<std::pair<int, Event>> spare_events_;  // (device, event): completed, kept for reuse
  MemoryStats stats_;
  std::shared_ptr<cuda::MemoryTimeline::Recording> timeline_;  // null unless a MemoryTimeline records
};

}  // namespace tiny::gpu
