// The memory of one emulated device: a range that host code cannot read.
//
// How: one shared-memory file (memfd_create) is mapped twice.
//   worker view  read-write: used only by the device's workers (kernels, copies);
//   host view    PROT_NONE:  its addresses are the device pointers tiny hands
//                out, so `*device_ptr` from host code faults (SIGSEGV),
//                as dereferencing GPU memory from the CPU does.
// Both views name the same bytes, so translating a device pointer is one
// subtraction and one addition (worker_address).
//
// The range is reserved once (virtual address space only: a page gets host
// memory when a worker first writes it) and raw allocations are carved out of
// it: best fit among the free ranges, sizes rounded up to 512 bytes (CUDA
// aligns at least to 256), free neighbours merged on free. The range is twice
// the capacity, so that fragmentation of the range almost never refuses a
// request the capacity allows. Freed whole pages are handed back to the system
// (fallocate PUNCH_HOLE), so freed device memory does not keep host memory.
//
// Thread-safe (one mutex); no system call per allocation, so thousands of
// raw_malloc / raw_free calls are cheap and never use more address space.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <set>
#include <utility>

namespace tiny::gpu::emulated {

class DeviceMemory {
 public:
  static constexpr size_t kAlignment = 512;

  // Maps the two views for `capacity` bytes; throws tiny::Error if the system
  // refuses (the message suggests a smaller TINY_EMULATED_GPU_MEMORY).
  DeviceMemory(int device, size_t capacity);
  ~DeviceMemory();
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;

  // A device pointer (host view) to nbytes rounded up to kAlignment, or
  // nullptr when that would go past the capacity (or, rarely, no free range is
  // large enough). nbytes must be > 0.
  void* allocate(size_t nbytes);
  // Frees a pointer from allocate(); returns false for any other pointer.
  // give_back_pages=false keeps the freed pages' contents (a forked child must
  // not punch holes in memory its parent still uses: the file is shared).
  bool free(void* ptr, bool give_back_pages = true);

  size_t capacity() const { return capacity_; }
  size_t used() const;

  // True for an address in the host view's range (allocated or not).
  bool contains(const void* ptr) const {
    const auto p = reinterpret_cast<uintptr_t>(ptr);
    const auto base = reinterpret_cast<uintptr_t>(host_view_);
    return p >= base && p < base + range_;
  }
  // The worker view's address of the same byte. ptr must satisfy contains().
  void* worker_address(const void* ptr) const {
    return worker_view_ + (static_cast<const char*>(ptr) - host_view_);
  }
  // True when [ptr, ptr + nbytes) lies inside one live allocation.
  bool is_allocated_range(const void* ptr, size_t nbytes) const;

 private:
  void insert_free(size_t offset, size_t size);  // mutex_ held
  void erase_free(std::map<size_t, size_t>::iterator it);  // mutex_ held
  void release_pages(size_t offset, size_t size);  // gives pages back; page-aligned arguments

  size_t capacity_;
  size_t range_;  // bytes in each view
  int fd_ = -1;
  char* host_view_ = nullptr;
  char* worker_view_ = nullptr;

  mutable std::mutex mutex_;  // guards everything below
  std::map<size_t, size_t> free_by_offset_;         // offset -> size, for merging neighbours
  std::set<std::pair<size_t, size_t>> free_by_size_;  // (size, offset), for best fit
  std::map<size_t, size_t> allocated_;              // offset -> rounded size
  size_t used_ = 0;                                 // sum of allocated_ sizes
};

}  // namespace tiny::gpu::emulated
