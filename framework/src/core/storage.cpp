#include <limits>
#include <memory>
#include <mutex>
#include <vector>

#include "core/tensor_impl.h"
#include "gpu/device_context.h"
#include "runtime/cpu_allocator.h"

namespace tiny {

namespace {
class CpuAllocator final : public Allocator {
 public:
  void* allocate(size_t nbytes) override { return runtime::cpu_malloc(nbytes); }
  void deallocate(void* ptr, size_t nbytes) override { runtime::cpu_free(ptr, nbytes); }
};

// GPU memory comes from the device's caching allocator, on the device's
// current stream (the stream that will use it first).
class DeviceAllocator final : public Allocator {
 public:
  explicit DeviceAllocator(int device) : device_(device) {}
  void* allocate(size_t nbytes) override {
    return gpu::device_allocator(device_).allocate(nbytes, gpu::current_stream(device_));
  }
  void deallocate(void* ptr, size_t) override {
    if (ptr != nullptr) gpu::device_allocator(device_).free(ptr);
  }

 private:
  int device_;
};

}  // namespace

Allocator* allocator_for(const Device& device) {
  if (device.is_cpu()) {
    static CpuAllocator* cpu = new CpuAllocator();  // never destroyed: tensors may die during exit
    return cpu;
  }
  const int index = gpu::resolve_index(device);
  static std::mutex mutex;
  static auto* allocators = new std::vector<std::unique_ptr<DeviceAllocator>>();
  std::lock_guard<std::mutex> lock(mutex);
  if (allocators->size() <= static_cast<size_t>(index)) allocators->resize(static_cast<size_t>(index) + 1);
  auto& slot = (*allocators)[static_cast<size_t>(index)];
  if (!slot) slot = std::make_unique<DeviceAllocator>(index);
  return slot.get();
}

Device canonical_device(const Device& device) {
  if (device.is_cpu()) return device;
  return Device(DeviceType::CUDA, gpu::resolve_index(device));
}

Storage::Storage(size_t nbytes_, Device device_) : Storage(nbytes_, device_, allocator_for(device_)) {}

Storage::Storage(size_t nbytes_, Device device_, Allocator* allocator_)
    : nbytes(nbytes_), device(device_), allocator(allocator_) {
  data = allocator->allocate(nbytes);
}

Storage::Storage(void* alias, size_t nbytes_, Device device_, std::shared_ptr<Storage> base_)
    : data(alias), nbytes(nbytes_), device(device_), base(std::move(base_)) {}

Storage::~Storage() {
  if (allocator != nullptr) allocator->deallocate(data, nbytes);
}

int64_t TensorImpl::numel() const {
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  return n;
}

AutogradMeta& TensorImpl::autograd_meta() {
  if (!autograd) autograd = std::make_unique<AutogradMeta>();
  return *autograd;
}

IntArrayRef contiguous_strides(const IntArrayRef& sizes) {
  IntArrayRef strides(sizes.size());
  int64_t running = 1;
  for (size_t i = sizes.size(); i-- > 0;) {
    strides[i] = running;
    running *= std::max<int64_t>(sizes[i], 1);
  }
  return strides;
}

int64_t checked_numel(const IntArrayRef& sizes) {
  int64_t n = 1;
  for (int64_t s : sizes) {
    TINY_CHECK(s >= 0, ValueError, "Trying to create tensor with negative dimension ", s, ": ", shape_str(sizes));
    if (s != 0 && n > std::numeric_limits<int64_t>::max() / s) {
      TINY_THROW(ValueError, "a tensor of shape ", shape_str(sizes), " has more elements than fit in int64");
    }
    n *= s;
  }
  return n;
}

int64_t wrap_dim(int64_t dim, int64_t ndim) {
  const int64_t lo = ndim == 0 ? -1 : -ndim;
  const int64_t hi = ndim == 0 ? 0 : ndim - 1;
  TINY_CHECK(dim >= lo && dim <= hi, IndexError, "Dimension out of range (expected to be in range of [", lo, ", ", hi,
             "], but got ", dim, ")");
  return dim < 0 ? dim + std::max<int64_t>(ndim, 1) : dim;
}

Tensor make_tensor(const IntArrayRef& sizes, Dtype dtype, Device device) {
  const int64_t n = checked_numel(sizes);
  const size_t esize = element_size(dtype);
  TINY_CHECK(static_cast<uint64_t>(n) <= std::numeric_limits<size_t>::max() / esize, ValueError,
             "a tensor of shape ", shape_str(sizes), " is too large to allocate");
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = std::make_shared<Storage>(static_cast<size_t>(n) * esize, canonical_device(device));
  impl->sizes = sizes;
  impl->strides = contiguous_strides(sizes);
  impl->dtype = dtype;
  return Tensor(std::move(impl));
}

Tensor make_view(const Tensor& base, IntArrayRef sizes, IntArrayRef strides, int64_t offset) {
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = base.unsafe_impl()->storage;
  impl->sizes = std::move(sizes);
  impl->strides = std::move(strides);
  impl->offset = offset;
  impl->dtype = base.dtype();
  return Tensor(std::move(impl));
}

void bump_version(const Tensor& t) { t.unsafe_impl()->storage->version.fetch_add(1, std::memory_order_relaxed); }

}  // namespace tiny
