// The memory of one emulated device. See device_memory.h for the scheme.
#include "gpu/emulated/device_memory.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <iterator>
#include <cstring>
#include <string>

#include "runtime/cpu_allocator.h"
#include "tiny/error.h"

namespace tiny::gpu::emulated {
namespace {

constexpr size_t kRangeGranularity = size_t{2} << 20;  // 2 MiB: keeps the views huge-page friendly

size_t round_up(size_t n, size_t multiple) { return (n + multiple - 1) / multiple * multiple; }

size_t page_size() {
  static const size_t size = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return size;
}

[[noreturn]] void throw_map_error(int device, size_t capacity, const char* step, int error) {
  TINY_THROW(Error, "emulated GPU ", device, ": could not reserve ", runtime::format_bytes(capacity),
             " of device memory (", step, ": ", std::strerror(error),
             "); set TINY_EMULATED_GPU_MEMORY to a smaller size, for example TINY_EMULATED_GPU_MEMORY=1GiB");
}

}  // namespace

DeviceMemory::DeviceMemory(int device, size_t capacity)
    : capacity_(round_up(capacity, kAlignment)), range_(round_up(capacity_ * 2, kRangeGranularity)) {
  const std::string name = "tiny-emulated-gpu" + std::to_string(device);  // shows in /proc/<pid>/maps
  fd_ = memfd_create(name.c_str(), MFD_CLOEXEC);
  if (fd_ < 0) throw_map_error(device, capacity, "memfd_create", errno);
  // A sparse file: no memory is used until a page is written.
  if (ftruncate(fd_, static_cast<off_t>(range_)) != 0) {
    const int error = errno;
    close(fd_);
    throw_map_error(device, capacity, "ftruncate", error);
  }
  void* worker = mmap(nullptr, range_, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, fd_, 0);
  if (worker == MAP_FAILED) {
    const int error = errno;
    close(fd_);
    throw_map_error(device, capacity, "mmap of the worker view", error);
  }
  // The view the program sees: the same pages, but no access at all.
  void* host = mmap(nullptr, range_, PROT_NONE, MAP_SHARED | MAP_NORESERVE, fd_, 0);
  if (host == MAP_FAILED) {
    const int error = errno;
    munmap(worker, range_);
    close(fd_);
    throw_map_error(device, capacity, "mmap of the device-pointer view", error);
  }
  worker_view_ = static_cast<char*>(worker);
  host_view_ = static_cast<char*>(host);
  insert_free(0, range_);
}

DeviceMemory::~DeviceMemory() {
  munmap(host_view_, range_);
  munmap(worker_view_, range_);
  close(fd_);
}

size_t DeviceMemory::used() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return used_;
}

void* DeviceMemory::allocate(size_t nbytes) {
  if (nbytes == 0 || nbytes > capacity_) return nullptr;
  const size_t size = round_up(nbytes, kAlignment);
  std::lock_guard<std::mutex> lock(mutex_);
  if (size > capacity_ - used_) return nullptr;  // the device is full: the caller raises OutOfMemoryError
  // Best fit: the smallest free range that is large enough.
  const auto fit = free_by_size_.lower_bound({size, 0});
  if (fit == free_by_size_.end()) return nullptr;
  const size_t offset = fit->second;
  const size_t free_size = fit->first;
  erase_free(free_by_offset_.find(offset));
  if (free_size > size) insert_free(offset + size, free_size - size);
  allocated_.emplace(offset, size);
  used_ += size;
  return host_view_ + offset;
}

bool DeviceMemory::free(void* ptr, bool give_back_pages) {
  if (!contains(ptr)) return false;
  const size_t block_offset = static_cast<size_t>(static_cast<char*>(ptr) - host_view_);
  size_t offset = block_offset;
  size_t size;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto it = allocated_.find(offset);
    if (it == allocated_.end()) return false;
    size = it->second;
    const size_t block_size = size;
    allocated_.erase(it);
    used_ -= size;
    // Merge with the free neighbours, so the range does not fragment over time.
    auto next = free_by_offset_.lower_bound(offset);
    if (next != free_by_offset_.end() && next->first == offset + size) {
      size += next->second;
      next = std::next(next);
      erase_free(std::prev(next));
    }
    if (next != free_by_offset_.begin()) {
      const auto prev = std::prev(next);
      if (prev->first + prev->second == offset) {
        offset = prev->first;
        size += prev->second;
        erase_free(prev);
      }
    }
    insert_free(offset, size);
    // Pages entirely inside the merged free range hold no live allocation:
    // give back those the freed block touched (the others were given back
    // when their own blocks were freed). Under the lock, so that no
    // allocation can take them meanwhile.
    const size_t page = page_size();
    const size_t begin = std::max(block_offset / page * page, round_up(offset, page));
    const size_t end = std::min(round_up(block_offset + block_size, page), (offset + size) / page * page);
    if (give_back_pages && end > begin) release_pages(begin, end - begin);
  }
  return true;
}

bool DeviceMemory::is_allocated_range(const void* ptr, size_t nbytes) const {
  if (!contains(ptr)) return false;
  const size_t offset = static_cast<size_t>(static_cast<const char*>(ptr) - host_view_);
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = allocated_.upper_bound(offset);  // first allocation starting after ptr
  if (it == allocated_.begin()) return false;
  --it;
  return offset - it->first <= it->second && nbytes <= it->second - (offset - it->first);
}

void DeviceMemory::insert_free(size_t offset, size_t size) {
  free_by_offset_.emplace(offset, size);
  free_by_size_.emplace(size, offset);
}

void DeviceMemory::erase_free(std::map<size_t, size_t>::iterator it) {
  free_by_size_.erase({it->second, it->first});
  free_by_offset_.erase(it);
}

void DeviceMemory::release_pages(size_t offset, size_t size) {
  // Punching a hole in the file frees its pages in both views; they read as
  // zeros if touched again. Failure only means the memory stays in use.
  (void)fallocate(fd_, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, static_cast<off_t>(offset),
                  static_cast<off_t>(size));
}

}  // namespace tiny::gpu::emulated
