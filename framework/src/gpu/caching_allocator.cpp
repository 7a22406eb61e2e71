// The device caching allocator (see caching_allocator.h for the design).
#include "gpu/caching_allocator.h"

#include <algorithm>
#include <cstdio>
#include <limits>
#include <tuple>
#include <unordered_set>

#include "core/op_scope.h"
#include "gpu/model/timeline.h"
#include "runtime/cpu_allocator.h"  // format_bytes
#include "tiny/error.h"

namespace tiny::gpu {

// A piece of a segment: the whole segment, or part of it after a split. The
// blocks of a segment form a doubly linked list in address order, so a freed
// block finds its neighbours in O(1) to merge with them. Every block of a
// segment belongs to the stream the segment was allocated for.
struct CachingAllocator::Block {
  void* ptr = nullptr;
  size_t size = 0;            // rounded bytes
  size_t requested = 0;       // bytes asked for (while allocated)
  Stream stream;              // the stream whose pool it returns to
  bool small = false;         // which pool
  bool allocated = false;
  int event_count = 0;        // record_stream events still pending after free()
  Block* prev = nullptr;      // neighbours in the same segment
  Block* next = nullptr;
  std::vector<Stream> stream_uses;  // streams added by record_stream
  const char* op = nullptr;   // the op that allocated it (while allocated or pending); a literal

  bool is_split() const { return prev != nullptr || next != nullptr; }
  // In its pool: neither handed out nor waiting for events.
  bool is_free() const { return !allocated && event_count == 0; }
};

// Pools are ordered by (stream, size, address): lower_bound on (stream, size)
// finds the smallest block of that stream that fits, i.e. the best fit, and
// equal sizes come lowest address first so reuse is deterministic.
bool CachingAllocator::BlockOrder::operator()(const Block* a, const Block* b) const {
  return std::make_tuple(a->stream.device, a->stream.id, a->size, reinterpret_cast<uintptr_t>(a->ptr)) <
         std::make_tuple(b->stream.device, b->stream.id, b->size, reinterpret_cast<uintptr_t>(b->ptr));
}

using Kind = cuda::MemoryTimeline::Recording::Kind;

namespace {

void stat_add(Stat& stat, int64_t amount) {
  stat.current += amount;
  stat.peak = std::max(stat.peak, stat.current);
  if (amount > 0) stat.allocated += amount;
  if (amount < 0) stat.freed -= amount;
}

void* offset(void* ptr, size_t bytes) { return static_cast<char*>(ptr) + bytes; }

}  // namespace

CachingAllocator::CachingAllocator(Runtime& runtime, int device) : runtime_(runtime), device_(device) {}

CachingAllocator::~CachingAllocator() {
  std::lock_guard<std::mutex> lock(mutex_);
  // Every Block object is in a pool, in allocated_, or waiting for events.
  std::unordered_set<Block*> blocks(small_blocks_.begin(), small_blocks_.end());
  blocks.insert(large_blocks_.begin(), large_blocks_.end());
  for (auto& [ptr, block] : allocated_) blocks.insert(block);
  for (auto& pending : pending_events_) {
    blocks.insert(pending.block);
    runtime_.destroy_event(pending.event);
  }
  for (auto& [dev, event] : spare_events_) runtime_.destroy_event(event);
  for (Block* block : blocks) delete block;
  for (auto& [base, size] : segments_) runtime_.raw_free(device_, base);
}

size_t CachingAllocator::round_size(size_t nbytes) {
  if (nbytes < kMinBlockSize) return kMinBlockSize;
  return kMinBlockSize * ((nbytes + kMinBlockSize - 1) / kMinBlockSize);
}

size_t CachingAllocator::segment_size(size_t rounded) {
  if (rounded <= kSmallSize) return kSmallBuffer;
  if (rounded < kMinLargeAlloc) return kLargeBuffer;
  return kRoundLarge * ((rounded + kRoundLarge - 1) / kRoundLarge);
}

void CachingAllocator::update(StatArray& stat, bool small, int64_t amount) {
  stat_add(stat[kAggregatePool], amount);
  stat_add(stat[small ? kSmallPool : kLargePool], amount);
}

void* CachingAllocator::allocate(size_t nbytes, Stream stream) {
  if (nbytes == 0) return nullptr;
  TINY_CHECK(stream.device == device_, DeviceError, "caching allocator of cuda:", device_,
             ": cannot allocate for a stream of cuda:", stream.device);
  std::unique_lock<std::mutex> lock(mutex_);
  process_events();

  // A size no segment can hold (it would overflow the rounding) is an OOM.
  if (nbytes > std::numeric_limits<size_t>::max() - kRoundLarge) throw_oom(nbytes);
  const size_t size = round_size(nbytes);
  const bool small = size <= kSmallSize;
  Block* block = find_free_block(pool_for(small), size, stream);
  if (block != nullptr) {
    pool_erase(block);
  } else {
    const size_t alloc_size = segment_size(size);
    block = alloc_segment(alloc_size, small, stream);
    if (block == nullptr) {
      // The device is full: give back what the cache holds whole and retry
      // once, as PyTorch does. Cached blocks may still be used by queued work
      // (cudaFree waits for the device; a runtime's raw_free need not), so the
      // device is synchronized first; blocks waiting for record_stream events
      // are waited for, so that their segments can go too.
      synchronize_unlocked(lock);
      release_cached_segments();
      ++stats_.num_alloc_retries;
      block = alloc_segment(alloc_size, small, stream);
      if (block == nullptr) throw_oom(alloc_size);
    }
  }

  // Split off what this request does not need when the rest is worth keeping.
  // In the large pool a remainder of 1 MiB or less stays with the allocation:
  // cutting it off would only make a fragment that small requests (served
  // by the small pool) never use.
  const size_t remaining = block->size - size;
  const bool split = small ? remaining >= kMinBlockSize : remaining > kSmallSize;
  if (split) {
    Block* rest = new Block;
    rest->ptr = offset(block->ptr, size);
    rest->size = remaining;
    rest->stream = block->stream;
    rest->small = block->small;
    rest->prev = block;
    rest->next = block->next;
    if (rest->next != nullptr) rest->next->prev = rest;
    block->next = rest;
    block->size = size;
    pool_insert(rest);
  }

  block->allocated = true;
  block->requested = nbytes;
  allocated_.emplace(block->ptr, block);
  update(stats_.allocation, small, 1);
  update(stats_.allocated_bytes, small, static_cast<int64_t>(block->size));
  update(stats_.active, small, 1);
  update(stats_.active_bytes, small, static_cast<int64_t>(block->size));
  update(stats_.requested_bytes, small, static_cast<int64_t>(nbytes));
  block->op = detail::current_op();
  trace(Kind::kAlloc, block->size, block->op);
  return block->ptr;
}

void CachingAllocator::free(void* ptr) {
  if (ptr == nullptr) return;
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = allocated_.find(ptr);
  TINY_CHECK(it != allocated_.end(), Error, "caching allocator of cuda:", device_, ": free of pointer ", ptr,
             " that it did not allocate or that was already freed");
  Block* block = it->second;
  allocated_.erase(it);
  block->allocated = false;
  update(stats_.allocation, block->small, -1);
  update(stats_.allocated_bytes, block->small, -static_cast<int64_t>(block->size));
  update(stats_.requested_bytes, block->small, -static_cast<int64_t>(block->requested));
  block->requested = 0;
  trace(Kind::kFree, block->size, block->op);

  if (block->stream_uses.empty()) {
    // Work queued later on the block's own stream runs after its earlier
    // users, so the stream may reuse the block at once.
    free_block(block);
  } else {
    // Other streams may still have work that reads or writes the block: mark
    // where their queues are now, and keep the block out of its pool until
    // every mark has been passed.
    for (const Stream& use : block->stream_uses) {
      Event event = get_event(use.device);
      runtime_.record_event(event, use);
      pending_events_.push_back({use.device, event, block});
      ++block->event_count;
    }
    block->stream_uses.clear();
  }
  process_events();
}

void CachingAllocator::record_stream(void* ptr, Stream stream) {
  if (ptr == nullptr) return;
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = allocated_.find(ptr);
  TINY_CHECK(it != allocated_.end(), Error, "caching allocator of cuda:", device_, ": record_stream on pointer ",
             ptr, " that it did not allocate or that was already freed");
  Block* block = it->second;
  // The allocating stream is ordered with itself already.
  if (stream == block->stream) return;
  if (std::find(block->stream_uses.begin(), block->stream_uses.end(), stream) == block->stream_uses.end()) {
    block->stream_uses.push_back(stream);
  }
}

void CachingAllocator::empty_cache() {
  std::unique_lock<std::mutex> lock(mutex_);
  // Cached blocks may still be read or written by queued work (a block is
  // reusable by its stream before that stream has run): giving their memory
  // back before the device is idle could hand it to someone else mid-kernel.
  synchronize_unlocked(lock);
  release_cached_segments();
}

void CachingAllocator::synchronize_unlocked(std::unique_lock<std::mutex>& lock) {
  // The wait happens without the lock: queued work frees the tensors it held
  // when it finishes, and that free() needs the lock (waiting while holding
  // it deadlocks). Afterwards every event recorded before has completed, so
  // a non-blocking poll settles the blocks that waited for record_stream.
  lock.unlock();
  runtime_.device_synchronize(device_);
  lock.lock();
  synchronize_and_process_events();
}

CachingAllocator::Block* CachingAllocator::find_free_block(Pool& pool, size_t size, Stream stream) {
  Block key;
  key.stream = stream;
  key.size = size;
  key.ptr = nullptr;
  auto it = pool.lower_bound(&key);
  if (it == pool.end() || (*it)->stream != stream) return nullptr;
  return *it;
}

CachingAllocator::Block* CachingAllocator::alloc_segment(size_t size, bool small, Stream stream) {
  void* ptr = runtime_.raw_malloc(device_, size);
  if (ptr == nullptr) return nullptr;
  ++stats_.num_device_alloc;
  segments_.emplace(ptr, size);
  update(stats_.segment, small, 1);
  update(stats_.reserved_bytes, small, static_cast<int64_t>(size));
  trace(Kind::kSegmentAlloc, size, detail::current_op());
  Block* block = new Block;
  block->ptr = ptr;
  block->size = size;
  block->stream = stream;
  block->small = small;
  return block;
}

// Free blocks inside a split segment are counted as inactive_split: cached
// memory that empty_cache cannot give back. Whether a free block is split
// changes only while it is out of its pool (it is split or merged then), so
// counting on insertion and removal keeps the statistic exact.
void CachingAllocator::pool_insert(Block* block) {
  pool_for(block->small).insert(block);
  if (block->is_split()) {
    update(stats_.inactive_split, block->small, 1);
    update(stats_.inactive_split_bytes, block->small, static_cast<int64_t>(block->size));
  }
}

void CachingAllocator::pool_erase(Block* block) {
  pool_for(block->small).erase(block);
  if (block->is_split()) {
    update(stats_.inactive_split, block->small, -1);
    update(stats_.inactive_split_bytes, block->small, -static_cast<int64_t>(block->size));
  }
}

// Returns a block that is no longer in use to its pool, merged with the free
// neighbours of its segment.
void CachingAllocator::free_block(Block* block) {
  block->op = nullptr;
  update(stats_.active, block->small, -1);
  update(stats_.active_bytes, block->small, -static_cast<int64_t>(block->size));
  if (block->prev != nullptr && block->prev->is_free()) merge_into(block, block->prev);
  if (block->next != nullptr && block->next->is_free()) merge_into(block, block->next);
  pool_insert(block);
}

// Absorbs the free neighbour `src` into `dst` and deletes it.
void CachingAllocator::merge_into(Block* dst, Block* src) {
  pool_erase(src);
  if (src == dst->prev) {
    dst->ptr = src->ptr;
    dst->prev = src->prev;
    if (dst->prev != nullptr) dst->prev->next = dst;
  } else {
    dst->next = src->next;
    if (dst->next != nullptr) dst->next->prev = dst;
  }
  dst->size += src->size;
  delete src;
}

// Gives back every segment that is one free block. Callers synchronize first.
void CachingAllocator::release_cached_segments() {
  for (Pool* pool : {&small_blocks_, &large_blocks_}) {
    std::vector<Block*> whole;
    for (Block* block : *pool) {
      if (!block->is_split()) whole.push_back(block);
    }
    for (Block* block : whole) release_segment(block);
  }
}

void CachingAllocator::release_segment(Block* block) {
  pool_erase(block);
  runtime_.raw_free(device_, block->ptr);
  segments_.erase(block->ptr);
  ++stats_.num_device_free;
  update(stats_.segment, block->small, -1);
  update(stats_.reserved_bytes, block->small, -static_cast<int64_t>(block->size));
  trace(Kind::kSegmentFree, block->size, detail::current_op());
  delete block;
}

void CachingAllocator::event_done(const PendingEvent& pending) {
  spare_events_.emplace_back(pending.device, pending.event);
  if (--pending.block->event_count == 0) free_block(pending.block);
}

// Returns to their pools the blocks whose record_stream events have all
// completed. Polling (not waiting) keeps allocate and free from blocking.
void CachingAllocator::process_events() {
  if (pending_events_.empty()) return;
  const model::UnmodelledHostWork polling;  // how many events are pending depends on real progress
  std::vector<PendingEvent> still_pending;
  for (const PendingEvent& pending : pending_events_) {
    if (runtime_.event_query(pending.event)) {
      event_done(pending);
    } else {
      still_pending.push_back(pending);
    }
  }
  pending_events_ = std::move(still_pending);
}

// Waits for every pending event, so that all freed blocks are back in their
// pools (before the cache is released).
void CachingAllocator::synchronize_and_process_events() {
  std::vector<PendingEvent> pending = std::move(pending_events_);
  pending_events_.clear();
  for (const PendingEvent& p : pending) {
    runtime_.event_synchronize(p.event);
    event_done(p);
  }
}

Event CachingAllocator::get_event(int device) {
  for (auto it = spare_events_.begin(); it != spare_events_.end(); ++it) {
    if (it->first == device) {
      Event event = it->second;
      spare_events_.erase(it);
      return event;
    }
  }
  return runtime_.create_event(device, /*enable_timing=*/false);
}

void CachingAllocator::throw_oom(size_t alloc_size) {
  ++stats_.num_ooms;
  trace(Kind::kOom, alloc_size, detail::current_op());
  const size_t total = runtime_.properties(device_).total_memory;
  const size_t free_bytes = runtime_.free_memory(device_);
  const auto allocated = static_cast<uint64_t>(stats_.allocated_bytes[kAggregatePool].current);
  const auto reserved = static_cast<uint64_t>(stats_.reserved_bytes[kAggregatePool].current);
  using runtime::format_bytes;
  // PyTorch's message, so that what a lesson shows matches what a search for
  // the error finds. Its "Tried to allocate" is the segment asked of the
  // device (20.00 MiB for a 4 MiB tensor), as PyTorch's is.
  TINY_THROW(OutOfMemoryError, "CUDA out of memory. Tried to allocate ", format_bytes(alloc_size), ". GPU ",
             device_, " has a total capacity of ", format_bytes(total), " of which ", format_bytes(free_bytes),
             " is free. Of the allocated memory ", format_bytes(allocated), " is allocated by tiny, and ",
             format_bytes(reserved - allocated),
             " is reserved by tiny but unallocated. If reserved but unallocated memory is large, call "
             "tiny::cuda::empty_cache() to release it.");
}

MemoryStats CachingAllocator::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

void CachingAllocator::reset_peak_stats() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (StatArray* array : {&stats_.allocation, &stats_.segment, &stats_.active, &stats_.inactive_split,
                           &stats_.allocated_bytes, &stats_.reserved_bytes, &stats_.active_bytes,
                           &stats_.inactive_split_bytes, &stats_.requested_bytes}) {
    for (Stat& stat : *array) stat.peak = stat.current;
  }
}

void CachingAllocator::reset_accumulated_stats() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (StatArray* array : {&stats_.allocation, &stats_.segment, &stats_.active, &stats_.inactive_split,
                           &stats_.allocated_bytes, &stats_.reserved_bytes, &stats_.active_bytes,
                           &stats_.inactive_split_bytes, &stats_.requested_bytes}) {
    for (Stat& stat : *array) stat.allocated = stat.freed = 0;
  }
  stats_.num_alloc_retries = stats_.num_ooms = 0;
  stats_.num_device_alloc = stats_.num_device_free = 0;
}

size_t CachingAllocator::memory_allocated() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return static_cast<size_t>(stats_.allocated_bytes[kAggregatePool].current);
}

size_t CachingAllocator::max_memory_allocated() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return static_cast<size_t>(stats_.allocated_bytes[kAggregatePool].peak);
}

size_t CachingAllocator::memory_reserved() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return static_cast<size_t>(stats_.reserved_bytes[kAggregatePool].current);
}

size_t CachingAllocator::max_memory_reserved() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return static_cast<size_t>(stats_.reserved_bytes[kAggregatePool].peak);
}

size_t CachingAllocator::allocation_size(void* ptr) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = allocated_.find(ptr);
  TINY_CHECK(it != allocated_.end(), Error, "caching allocator of cuda:", device_, ": pointer ", ptr,
             " is not a live allocation of this allocator");
  return it->second->size;
}

size_t CachingAllocator::num_segments() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return segments_.size();
}

std::vector<cuda::SegmentInfo> CachingAllocator::snapshot() const {
  std::lock_guard<std::mutex> lock(mutex_);
  // Every Block is in a pool, in allocated_, or waiting for events; a
  // segment's first block starts at the segment's base, the rest follow
  // through `next`.
  std::unordered_map<void*, const Block*> first_blocks;
  auto consider = [&](const Block* block) {
    if (block->prev == nullptr) first_blocks.emplace(block->ptr, block);
  };
  for (const Block* block : small_blocks_) consider(block);
  for (const Block* block : large_blocks_) consider(block);
  for (const auto& [ptr, block] : allocated_) consider(block);
  for (const PendingEvent& pending : pending_events_) consider(pending.block);

  std::vector<cuda::SegmentInfo> segments;
  for (const auto& [base, size] : segments_) {
    auto it = first_blocks.find(base);
    TINY_CHECK(it != first_blocks.end(), Error, "internal: caching allocator of cuda:", device_, " lost segment ",
               base);
    const Block* first = it->second;
    cuda::SegmentInfo segment;
    segment.device = device_;
    segment.address = reinterpret_cast<uintptr_t>(base);
    segment.total_size = size;
    segment.stream = first->stream.id;
    segment.segment_type = first->small ? "small" : "large";
    for (const Block* block = first; block != nullptr; block = block->next) {
      cuda::BlockInfo info;
      info.address = reinterpret_cast<uintptr_t>(block->ptr);
      info.size = block->size;
      info.requested_size = block->requested;
      info.stream = block->stream.id;
      if (block->allocated) {
        info.state = "active_allocated";
        segment.allocated_size += block->size;
        segment.active_size += block->size;
        segment.requested_size += block->requested;
      } else if (block->event_count > 0) {
        info.state = "active_pending_free";
        segment.active_size += block->size;
      } else {
        info.state = "inactive";
      }
      if (block->op != nullptr) info.op = block->op;
      segment.blocks.push_back(std::move(info));
    }
    segments.push_back(std::move(segment));
  }
  return segments;
}

void CachingAllocator::attach_timeline(std::shared_ptr<cuda::MemoryTimeline::Recording> recording) {
  std::lock_guard<std::mutex> lock(mutex_);
  TINY_CHECK(timeline_ == nullptr, Error, "a MemoryTimeline is already recording cuda:", device_,
             "; stop() it before starting another one");
  timeline_ = std::move(recording);
  trace(Kind::kStart, 0, "");
}

void CachingAllocator::detach_timeline(const cuda::MemoryTimeline::Recording* recording) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (timeline_.get() == recording) timeline_ = nullptr;
}

void CachingAllocator::trace_slow(Kind kind, size_t bytes, const char* op) {
  timeline_->add(kind, stats_.allocated_bytes[kAggregatePool].current, stats_.reserved_bytes[kAggregatePool].current,
                 static_cast<int64_t>(bytes), op);
}

namespace {

// torch.cuda.memory_summary's cells: integers in a unit chosen by the
// reference value (the column's all-pools value), so the pool rows below it
// share its unit. 10 characters wide.
std::string format_size_cell(int64_t value, int64_t reference) {
  const char* units[] = {"B  ", "KiB", "MiB", "GiB", "TiB", "PiB"};
  int unit = 0;
  while (unit < 5 && reference >= 768 * 1024) {
    value /= 1024;
    reference /= 1024;
    ++unit;
  }
  char text[32];
  std::snprintf(text, sizeof(text), "%6lld %s", static_cast<long long>(value), units[unit]);
  return text;
}

std::string format_count_cell(int64_t value, int64_t reference) {
  const char* units[] = {" ", "K", "M"};
  int unit = 0;
  while (unit < 2 && reference >= 750 * 1000) {
    value /= 1000;
    reference /= 1000;
    ++unit;
  }
  char text[32];
  std::snprintf(text, sizeof(text), "%7lld %s ", static_cast<long long>(value), units[unit]);
  return text;
}

std::string centered(const std::string& text, size_t width) {
  if (text.size() >= width) return text;
  const size_t left = (width - text.size()) / 2;
  return std::string(left, ' ') + text + std::string(width - text.size() - left, ' ');
}

std::string padded(const std::string& text, size_t width) {
  return text.size() >= width ? text : text + std::string(width - text.size(), ' ');
}

}  // namespace

std::string CachingAllocator::memory_summary() const {
  const MemoryStats s = stats();
  const std::string kind = runtime_.kind();
  constexpr size_t kWidth = 75;
  const std::string rule_double = "|" + std::string(kWidth, '=') + "|\n";
  const std::string rule_single = "|" + std::string(kWidth, '-') + "|\n";

  std::string out;
  out += rule_double;
  out += "|" + centered("tiny CUDA memory summary, device ID " + std::to_string(device_) + " (" + kind + " runtime)",
                        kWidth) + "|\n";
  out += rule_single;
  out += "|" + centered("CUDA OOMs: " + std::to_string(s.num_ooms), 37) + "|" +
         centered("raw_malloc retries: " + std::to_string(s.num_alloc_retries), 37) + "|\n";
  out += rule_double;
  out += "| " + centered("Metric", 21) + " | " + centered("Cur Usage", 10) + " | " + centered("Peak Usage", 10) +
         " | " + centered("Tot Alloc", 10) + " | " + centered("Tot Freed", 10) + " |\n";

  struct Metric {
    const StatArray* stat;
    const char* name;
    bool bytes;
  };
  const Metric metrics[] = {
      {&s.allocated_bytes, "Allocated memory", true},     {&s.active_bytes, "Active memory", true},
      {&s.requested_bytes, "Requested memory", true},     {&s.reserved_bytes, "Reserved memory", true},
      {&s.inactive_split_bytes, "Non-releasable memory", true}, {&s.allocation, "Allocations", false},
      {&s.active, "Active allocs", false},                {&s.segment, "Reserved segments", false},
      {&s.inactive_split, "Non-releasable allocs", false},
  };
  for (const Metric& metric : metrics) {
    out += rule_single;
    const Stat& all = (*metric.stat)[kAggregatePool];
    const std::pair<StatType, const char*> rows[] = {
        {kAggregatePool, metric.name}, {kLargePool, "      from large pool"}, {kSmallPool, "      from small pool"}};
    for (const auto& [type, label] : rows) {
      const Stat& st = (*metric.stat)[type];
      auto cell = [&](int64_t value, int64_t reference) {
        return metric.bytes ? format_size_cell(value, reference) : format_count_cell(value, reference);
      };
      out += "| " + padded(label, 21) + " | " + cell(st.current, all.current) + " | " + cell(st.peak, all.peak) +
             " | " + cell(st.allocated, all.allocated) + " | " + cell(st.freed, all.freed) + " |\n";
    }
  }
  out += rule_double;
  return out;
}

}  // namespace tiny::gpu
