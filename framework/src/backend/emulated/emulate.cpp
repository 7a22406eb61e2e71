// What the emulated kernels of backend/emulated/emulate.h need from the
// emulator: worker views of device memory, the device of an operand, and a
// timed launch on the device's current stream. The emulator itself is
// created on first use, so a machine where it cannot start still runs every
// CPU op (registration never touches it).
#include "backend/emulated/emulate.h"

#include "core/tensor_impl.h"
#include "gpu/device_context.h"
#include "gpu/emulated/emulated_runtime.h"

namespace tiny::emulated {

namespace {
gpu::EmulatedRuntime& emu() { return *gpu::emulated_runtime(); }
}  // namespace

int64_t moved_bytes(const Tensor& t) {
  if (!t.defined()) return 0;
  int64_t elements = 1;
  for (int64_t d = 0; d < t.dim(); ++d) {
    if (t.strides()[d] != 0) elements *= t.sizes()[d];
  }
  return elements * gpu::model::element_bytes(t.dtype());
}

KernelCost cost_of(std::initializer_list<Tensor> tensors, Work work) {
  KernelCost c;
  c.work = work;
  for (const Tensor& t : tensors) c.bytes += moved_bytes(t);
  return c;
}

KernelCost cost_of(const TensorIter& iter, Work work) {
  KernelCost c;
  c.work = work;
  for (int k = 0; k < iter.num_operands; ++k) c.bytes += moved_bytes(iter.operands[k]);
  c.threads = iter.numel;  // the CUDA backend's pointwise launch: one thread per element
  return c;
}

Tensor worker_view(const Tensor& t) {
  if (!t.defined() || t.is_cpu()) return t;
  const auto& storage = t.unsafe_impl()->storage;
  void* alias = storage->data == nullptr ? nullptr : emu().worker_address(storage->data);
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = std::make_shared<Storage>(alias, storage->nbytes, Device(), nullptr);
  impl->sizes = t.sizes();
  impl->strides = t.strides();
  impl->offset = t.storage_offset();
  impl->dtype = t.dtype();
  return Tensor(std::move(impl));
}

TensorIter worker_iter(const TensorIter& iter) {
  TensorIter out = iter;
  for (int k = 0; k < iter.num_operands; ++k) {
    out.operands[k] = worker_view(iter.operands[k]);
    out.data[k] = out.operands[k].unsafe_impl()->data();
  }
  return out;
}

ReduceIter worker_iter(const ReduceIter& iter) {
  ReduceIter out = iter;
  out.input = worker_view(iter.input);
  for (int k = 0; k < iter.num_outputs; ++k) out.outputs[k] = worker_view(iter.outputs[k]);
  return out;
}

void* worker_address(const void* device_pointer) { return emu().worker_address(device_pointer); }

int device_of_address(const void* device_pointer) { return emu().device_of(device_pointer); }

int device_of(const Tensor& t) { return !t.defined() || t.is_cpu() ? -1 : t.device().index(); }

int device_of_call(std::initializer_list<int> operand_devices, const char* name) {
  for (const int device : operand_devices) {
    if (device >= 0) return device;
  }
  TINY_THROW(DeviceError, "the emulated kernel '", name, "' was called with no operand on an emulated device");
}

void launch(int device, const char* name, const KernelCost& cost, std::function<void()> work) {
  emu().launch(gpu::current_stream(device), std::move(work), name, cost);
}

}  // namespace tiny::emulated
