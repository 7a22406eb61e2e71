// The data behind a Tensor handle: storage, layout, dtype and autograd state.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "tiny/device.h"
#include "tiny/dtype.h"
#include "tiny/tensor.h"

namespace tiny {

// Hands out and takes back raw memory of one device.
class Allocator {
 public:
  virtual ~Allocator() = default;
  virtual void* allocate(size_t nbytes) = 0;
  virtual void deallocate(void* ptr, size_t nbytes) = 0;
};

// The allocator for tensors on `device` (throws DeviceError for unusable devices).
Allocator* allocator_for(const Device& device);

// A block of memory shared by a tensor and all its views. The version counter
// lives here, not in the tensor, so that an in-place change through any view
// is seen by every saved tensor that aliases the same memory (as in PyTorch).
struct Storage {
  Storage(size_t nbytes, Device device);
  // Memory from a given allocator (pinned host memory).
  Storage(size_t nbytes, Device device, Allocator* allocator);
  // A view of memory owned by `base` at another address (the emulated GPU's
  // workers reach device memory through their own mapping): frees nothing,
  // keeps `base` alive.
  Storage(void* alias, size_t nbytes, Device device, std::shared_ptr<Storage> base);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data = nullptr;
  size_t nbytes = 0;
  Device device;
  Allocator* allocator = nullptr;  // nullptr for an alias
  std::shared_ptr<Storage> base;   // the owner, for an alias
  std::atomic<uint32_t> version{0};
};

// What autograd knows about one tensor; absent for tensors that never took part.
struct AutogradMeta {
  bool requires_grad = false;
  bool retains_grad = false;
  Tensor grad;
  std::shared_ptr<autograd::Node> grad_fn;  // set for non-leaves
  uint32_t output_nr = 0;                   // which output of grad_fn this is
  std::weak_ptr<autograd::Node> grad_accumulator;  // leaves only; the graph owns it
  std::vector<std::pair<int64_t, GradHook>> leaf_hooks;  // leaves: run before accumulation
  std::vector<std::pair<int64_t, PostAccumulateGradHook>> post_accumulate_hooks;
};

struct TensorImpl {
  std::shared_ptr<Storage> storage;
  IntArrayRef sizes;
  IntArrayRef strides;
  int64_t offset = 0;
  Dtype dtype = kFloat32;
  std::unique_ptr<AutogradMeta> autograd;
  // Set on the outputs of view ops (view, t, select, ...): the tensor that is
  // not itself a view and whose memory this one shows (PyTorch's `._base`).
  // An in-place op on a view rewrites the base's history (CopySlices).
  std::shared_ptr<TensorImpl> view_base;
  // The storage version when this view's grad_fn was last set: when another
  // in-place change of the base moved it on, the grad_fn is rebuilt from the
  // base's history (PyTorch regenerates it the same way).
  uint32_t view_version = 0;
  // The view was made while its base required grad but grad mode was off:
  // PyTorch forbids changing it in place with grad mode on (ambiguous).
  bool view_made_in_no_grad = false;

  int64_t numel() const;
  AutogradMeta& autograd_meta();  // creates it on first use
  // Address of element 0 (host address; for device tensors only the backend may use it).
  char* data() const { return static_cast<char*>(storage->data) + offset * static_cast<int64_t>(element_size(dtype)); }
};

// The TensorImpl behind a Tensor handle; throws tiny::ValueError, naming `call`
// (e.g. "cpu()") when given and saying how to make one, when the tensor is
// undefined (default-constructed).
const TensorImpl& defined_impl(const std::shared_ptr<TensorImpl>& impl, const char* call = nullptr);

// Row-major strides for `sizes`.
IntArrayRef contiguous_strides(const IntArrayRef& sizes);
// Product of sizes, with an overflow check that names the shape.
int64_t checked_numel(const IntArrayRef& sizes);
// Normalises a possibly negative dimension against `ndim` (PyTorch's message when out of range).
int64_t wrap_dim(int64_t dim, int64_t ndim);

// `device` with its index filled in ("cuda" -> the current cuda:N), validated.
Device canonical_device(const Device& device);
// A new tensor with fresh contiguous storage on `device`.
Tensor make_tensor(const IntArrayRef& sizes, Dtype dtype, Device device);
// A view sharing `base`'s storage with the given layout (no autograd).
Tensor make_view(const Tensor& base, IntArrayRef sizes, IntArrayRef strides, int64_t offset);
// Marks `t` as modified in place (bumps the shared version counter).
void bump_version(const Tensor& t);

}  // namespace tiny
