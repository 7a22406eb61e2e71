#include "gpu/pinned_allocator.h"

#include <map>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "gpu/device_context.h"
#include "gpu/model/timeline.h"

namespace tiny::gpu {

namespace {

class PinnedHostAllocator final : public Allocator {
 public:
  explicit PinnedHostAllocator(Runtime& rt) : rt_(rt) {}

  void* allocate(size_t nbytes) override {
    if (nbytes == 0) return nullptr;
    const size_t size = round(nbytes);
    std::lock_guard<std::mutex> lock(mutex_);
    reclaim_finished();
    auto it = free_.find(size);
    if (it != free_.end() && !it->second.empty()) {
      void* p = it->second.back();
      it->second.pop_back();
      return p;
    }
    void* p = rt_.pinned_malloc(size);
    TINY_CHECK(p != nullptr, OutOfMemoryError, "cannot allocate ", size, " bytes of pinned host memory");
    return p;
  }

  void deallocate(void* ptr, size_t nbytes) override {
    if (ptr == nullptr) return;
    std::lock_guard<std::mutex> lock(mutex_);
    auto uses = uses_.find(ptr);
    if (uses == uses_.end()) {
      free_[round(nbytes)].push_back(ptr);
      return;
    }
    pending_.push_back({ptr, round(nbytes), std::move(uses->second)});
    uses_.erase(uses);
    reclaim_finished();
  }

  void record_use(const void* block, Stream stream) {
    std::lock_guard<std::mutex> lock(mutex_);
    const Event event = rt_.create_event(stream.device, false);
    rt_.record_event(event, stream);
    uses_[const_cast<void*>(block)].push_back(event);
  }

 private:
  struct Pending {
    void* ptr;
    size_t size;
    std::vector<Event> events;
  };

  static size_t round(size_t n) { return (n + 511) / 512 * 512; }

  // Blocks whose copies have all run go back to the free lists (mutex_ held).
  // The queries are free in modelled time: which blocks are done depends on how
  // far the emulator's workers really got, and so does their number.
  void reclaim_finished() {
    const model::UnmodelledHostWork polling;  // how many blocks are pending depends on real progress
    for (size_t i = 0; i < pending_.size();) {
      bool done = true;
      for (const Event& e : pending_[i].events) done = done && rt_.event_query(e);
      if (!done) {
        ++i;
        continue;
      }
      for (const Event& e : pending_[i].events) rt_.destroy_event(e);
      free_[pending_[i].size].push_back(pending_[i].ptr);
      pending_[i] = pending_.back();
      pending_.pop_back();
    }
  }

  Runtime& rt_;
  std::mutex mutex_;
  std::map<size_t, std::vector<void*>> free_;
  std::unordered_map<void*, std::vector<Event>> uses_;
  std::vector<Pending> pending_;
};

PinnedHostAllocator* instance() {
  static PinnedHostAllocator* allocator =
      device_runtime() ? new PinnedHostAllocator(*device_runtime()) : nullptr;  // never destroyed
  return allocator;
}

}  // namespace

Allocator* pinned_allocator() { return instance(); }

void record_pinned_use(const void* block, Stream stream) {
  if (instance() != nullptr) instance()->record_use(block, stream);
}

}  // namespace tiny::gpu
