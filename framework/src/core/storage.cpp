#include <limits>
#include <memory>

#include "core/device_hooks.h"
#include "core/tensor_impl.h"
#include "runtime/cpu_allocator.h"

namespace tiny {

namespace {
class CpuAllocator final : public Allocator {
 public:
  void* allocate(size_t nbytes) override { return runtime::cpu_malloc(nbytes); }
  void deallocate(void* ptr, size_t nbytes) override { runtime::cpu_free(ptr, nbytes); }
};
}  // namespace

Allocator* allocator_for(const Device& device) {
  if (device.is_cpu()) {
    static CpuAllocator* cpu = new CpuAllocator();  // never destroyed: tensors may die during exit
    return cpu;
  }
  const detail::GpuHooks& gpu = detail::gpu_hooks();
  return gpu.allocator(gpu.resolve_index(device));
}

Device canonical_device(const Device& device) {
  if (device.is_cpu()) return device;
  return Device(DeviceType::CUDA, detail::gpu_hooks().resolve_index(device));
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
