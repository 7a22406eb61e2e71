// The CPU caching allocator. See cpu_allocator.h for the size classes and the
// cache limit, and why they are what they are.
#include "runtime/cpu_allocator.h"

#include <sys/mman.h>

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <new>
#include <vector>

#include "tiny/error.h"

namespace tiny::runtime {
namespace {

constexpr size_t kAlignment = 64;
constexpr size_t kSmallLimit = 4096;  // up to here, classes step by kAlignment
constexpr int kSmallClasses = kSmallLimit / kAlignment;
constexpr int kClassesPerDoubling = 4;
constexpr int kLog2SmallLimit = 12;
constexpr int kLog2MaxRequest = 62;  // larger requests cannot succeed anyway; rounding must not overflow
constexpr size_t kMaxRequest = size_t{1} << kLog2MaxRequest;
constexpr int kNumClasses = kSmallClasses + (kLog2MaxRequest - kLog2SmallLimit) * kClassesPerDoubling;
constexpr size_t kMmapThreshold = size_t{1} << 20;
constexpr size_t kDefaultCacheLimit = size_t{1} << 30;

struct SizeClass {
  int index;
  size_t bytes;
};

// nbytes must be in [1, kMaxRequest].
SizeClass size_class(size_t nbytes) {
  if (nbytes <= kSmallLimit) {
    const size_t steps = (nbytes + kAlignment - 1) / kAlignment;
    return {static_cast<int>(steps) - 1, steps * kAlignment};
  }
  const int k = 63 - __builtin_clzll(nbytes - 1);  // 2^k < nbytes <= 2^(k+1)
  const size_t base = size_t{1} << k;
  const size_t step = base / kClassesPerDoubling;
  const size_t j = (nbytes - base + step - 1) / step;  // 1..4
  return {kSmallClasses + (k - kLog2SmallLimit) * kClassesPerDoubling + static_cast<int>(j) - 1,
          base + j * step};
}

// Large blocks use mmap/munmap so that giving them back really unmaps them;
// free() could keep them in glibc's heap.
void* system_alloc(size_t bytes) {
  if (bytes >= kMmapThreshold) {
    void* ptr = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return ptr == MAP_FAILED ? nullptr : ptr;
  }
  void* ptr = nullptr;
  return posix_memalign(&ptr, kAlignment, bytes) == 0 ? ptr : nullptr;
}

void system_free(void* ptr, size_t bytes) {
  if (bytes >= kMmapThreshold) {
    munmap(ptr, bytes);
  } else {
    std::free(ptr);
  }
}

struct CachedBlock {
  void* ptr;
  uint64_t freed_at;  // a tick of Allocator::clock_: smaller is older
};

class Allocator {
 public:
  Allocator() {
    const char* env = std::getenv("TINY_CPU_CACHE_LIMIT");
    limit_ = env != nullptr ? parse_byte_size("TINY_CPU_CACHE_LIMIT", env) : kDefaultCacheLimit;
  }

  void* malloc(size_t nbytes) {
    if (nbytes > kMaxRequest) throw_out_of_memory(nbytes);
    const SizeClass cls = size_class(nbytes);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      std::vector<CachedBlock>& blocks = free_[cls.index];
      if (!blocks.empty()) {
        // The most recently freed block: its pages are the likeliest to be in cache.
        void* ptr = blocks.back().ptr;
        blocks.pop_back();
        stats_.cached_bytes -= cls.bytes;
        ++stats_.num_cache_hits;
        count_allocation(cls.bytes);
        return ptr;
      }
    }
    void* ptr = system_alloc(cls.bytes);  // without the lock: mmap can be slow
    if (ptr == nullptr) {
      empty_cache();
      ptr = system_alloc(cls.bytes);
      if (ptr == nullptr) throw_out_of_memory(nbytes);
    }
    std::lock_guard<std::mutex> lock(mutex_);
    ++stats_.num_system_allocs;
    count_allocation(cls.bytes);
    return ptr;
  }

  void free(void* ptr, size_t nbytes) {
    const SizeClass cls = size_class(nbytes);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stats_.allocated_bytes -= cls.bytes;
      if (cls.bytes <= limit_ && keep(ptr, cls)) return;
    }
    system_free(ptr, cls.bytes);
  }

  void empty_cache() {
    std::lock_guard<std::mutex> lock(mutex_);
    for (std::vector<CachedBlock>& blocks : free_) {
      for (const CachedBlock& block : blocks) system_free(block.ptr, class_bytes(blocks));
      blocks.clear();
    }
    stats_.cached_bytes = 0;
  }

  CpuAllocatorStats stats() {
    std::lock_guard<std::mutex> lock(mutex_);
    return stats_;
  }

  void reset_peak() {
    std::lock_guard<std::mutex> lock(mutex_);
    stats_.peak_allocated_bytes = stats_.allocated_bytes;
  }

  size_t limit() {
    std::lock_guard<std::mutex> lock(mutex_);
    return limit_;
  }

  void set_limit(size_t bytes) {
    std::lock_guard<std::mutex> lock(mutex_);
    limit_ = bytes;
    while (stats_.cached_bytes > limit_) evict_oldest();
  }

 private:
  // Caches a freed block, evicting older ones to stay under the limit. Holds
  // mutex_. Returns false if the block could not be recorded.
  bool keep(void* ptr, SizeClass cls) {
    while (stats_.cached_bytes + cls.bytes > limit_) evict_oldest();
    try {
      free_[cls.index].push_back({ptr, ++clock_});
    } catch (const std::bad_alloc&) {
      return false;  // no memory for the bookkeeping: the caller frees the block instead
    }
    stats_.cached_bytes += cls.bytes;
    return true;
  }

  // Returns the least recently freed cached block to the system. Holds
  // mutex_; there is at least one cached block. Each class's list is in
  // freeing order, so the oldest block is at the front of one of them.
  void evict_oldest() {
    std::vector<CachedBlock>* oldest = nullptr;
    for (std::vector<CachedBlock>& blocks : free_) {
      if (!blocks.empty() && (oldest == nullptr || blocks.front().freed_at < oldest->front().freed_at)) {
        oldest = &blocks;
      }
    }
    const size_t bytes = class_bytes(*oldest);
    system_free(oldest->front().ptr, bytes);
    oldest->erase(oldest->begin());
    stats_.cached_bytes -= bytes;
  }

  // The block size of the class whose free list this is.
  size_t class_bytes(const std::vector<CachedBlock>& blocks) const {
    return class_sizes_[&blocks - free_];
  }

  void count_allocation(size_t bytes) {
    ++stats_.num_allocs;
    stats_.allocated_bytes += bytes;
    if (stats_.allocated_bytes > stats_.peak_allocated_bytes) {
      stats_.peak_allocated_bytes = stats_.allocated_bytes;
    }
  }

  [[noreturn]] void throw_out_of_memory(size_t nbytes) {
    const CpuAllocatorStats now = stats();
    TINY_THROW(Error, "CPU out of memory: tried to allocate ", format_bytes(nbytes), " (tiny already holds ",
               format_bytes(now.allocated_bytes), " in CPU tensors and ", format_bytes(now.cached_bytes),
               " cached). Free tensors you no longer need (for example a loss kept for logging holds its whole "
               "graph: keep loss.item() instead) or use a smaller batch size.");
  }

  static std::vector<size_t> all_class_sizes() {
    std::vector<size_t> sizes(kNumClasses);
    for (int i = 0; i < kSmallClasses; ++i) sizes[i] = (i + 1) * kAlignment;
    for (int k = kLog2SmallLimit; k < kLog2MaxRequest; ++k) {
      const size_t base = size_t{1} << k;
      for (int j = 1; j <= kClassesPerDoubling; ++j) {
        sizes[kSmallClasses + (k - kLog2SmallLimit) * kClassesPerDoubling + j - 1] =
            base + j * (base / kClassesPerDoubling);
      }
    }
    return sizes;
  }

  std::mutex mutex_;  // guards everything below
  std::vector<CachedBlock> free_[kNumClasses];
  const std::vector<size_t> class_sizes_ = all_class_sizes();
  size_t limit_;
  uint64_t clock_ = 0;
  CpuAllocatorStats stats_{};
};

// Never destroyed: tensors freed during exit, after static destructors have
// run, must still find a working allocator. If the constructor throws (bad
// TINY_CPU_CACHE_LIMIT), the next call tries again.
Allocator& allocator() {
  static Allocator* const instance = new Allocator();
  return *instance;
}

bool iequals(const std::string& a, const char* b) {
  size_t i = 0;
  for (; i < a.size() && b[i] != '\0'; ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) != b[i]) return false;
  }
  return i == a.size() && b[i] == '\0';
}

// The multiplier of a unit, or 0 if it is not one.
size_t unit_bytes(const std::string& unit) {
  if (unit.empty() || iequals(unit, "b")) return 1;
  const char* prefixes = "kmgt";
  for (int i = 0; i < 4; ++i) {
    const std::string p(1, prefixes[i]);
    if (iequals(unit, p.c_str()) || iequals(unit, (p + "b").c_str()) || iequals(unit, (p + "ib").c_str())) {
      return size_t{1} << (10 * (i + 1));
    }
  }
  return 0;
}

}  // namespace

void* cpu_malloc(size_t nbytes) { return nbytes == 0 ? nullptr : allocator().malloc(nbytes); }

void cpu_free(void* ptr, size_t nbytes) {
  if (ptr == nullptr) return;
  // A wrong size would file the block under another class and corrupt memory later.
  TINY_CHECK(nbytes != 0 && nbytes <= kMaxRequest, Error, "cpu_free: ", nbytes,
             " bytes cannot be the size of a block from cpu_malloc; pass the size it was allocated with");
  allocator().free(ptr, nbytes);
}

void cpu_empty_cache() { allocator().empty_cache(); }

CpuAllocatorStats cpu_allocator_stats() { return allocator().stats(); }

void cpu_reset_peak_stats() { allocator().reset_peak(); }

size_t cpu_round_size(size_t nbytes) {
  return nbytes == 0 || nbytes > kMaxRequest ? nbytes : size_class(nbytes).bytes;
}

size_t cpu_cache_limit() { return allocator().limit(); }

void cpu_set_cache_limit(size_t bytes) { allocator().set_limit(bytes); }

std::string format_bytes(uint64_t bytes) {
  if (bytes < 1024) return std::to_string(bytes) + " bytes";
  const char* units[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double value = static_cast<double>(bytes) / 1024;
  int unit = 0;
  while (value >= 1024 && unit < 5) {
    value /= 1024;
    ++unit;
  }
  char text[32];
  std::snprintf(text, sizeof(text), "%.2f %s", value, units[unit]);
  return text;
}

size_t parse_byte_size(const std::string& variable, const std::string& value) {
  // Parsed by hand: strtod would accept "1e3", "inf" and a locale's decimal comma.
  size_t i = 0;
  auto skip_spaces = [&] {
    while (i < value.size() && std::isspace(static_cast<unsigned char>(value[i]))) ++i;
  };
  auto is_digit = [&] { return i < value.size() && value[i] >= '0' && value[i] <= '9'; };
  skip_spaces();
  long double number = 0;  // exact for whole numbers below 2^64
  int digits = 0;
  for (; is_digit(); ++i, ++digits) number = number * 10 + (value[i] - '0');
  if (i < value.size() && value[i] == '.') {
    ++i;
    for (long double scale = 0.1L; is_digit(); ++i, ++digits, scale /= 10) number += scale * (value[i] - '0');
  }
  skip_spaces();
  std::string unit = value.substr(i);
  while (!unit.empty() && std::isspace(static_cast<unsigned char>(unit.back()))) unit.pop_back();
  const size_t multiplier = unit_bytes(unit);
  const long double bytes = number * multiplier;
  TINY_CHECK(digits > 0 && multiplier != 0, ValueError, variable, "=\"", value,
             "\" is not a size: expected a number of bytes with an optional unit B, KiB, MiB, GiB or TiB "
             "(for example 512MiB or 2GiB)");
  TINY_CHECK(bytes < 18446744073709551616.0L, ValueError, variable, "=\"", value, "\" is too large: at most 16 EiB");
  return static_cast<size_t>(bytes);
}

}  // namespace tiny::runtime
