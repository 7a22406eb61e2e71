// Copies between devices (gpu/device_copy.h).
#include "gpu/device_copy.h"

#include "gpu/device_context.h"
#include "gpu/pinned_allocator.h"

namespace tiny::gpu {

Tensor empty_pinned(const IntArrayRef& sizes, Dtype dtype) {
  Allocator* pinned = pinned_allocator();
  TINY_CHECK(pinned != nullptr, DeviceError, "pin_memory() needs a GPU (real or emulated) and none is available "
             "(TINY_EMULATED_GPUS=0?)");
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = std::make_shared<Storage>(static_cast<size_t>(checked_numel(sizes)) * element_size(dtype), Device(),
                                            pinned);
  impl->sizes = sizes;
  impl->strides = contiguous_strides(sizes);
  impl->dtype = dtype;
  return Tensor(std::move(impl));
}

bool storage_is_pinned(const Tensor& t) {
  Runtime* rt = device_runtime();
  return t.is_cpu() && rt != nullptr && t.unsafe_impl()->storage->data != nullptr &&
         rt->is_pinned(t.unsafe_impl()->storage->data);
}

void copy_between_devices(const Tensor& dst, const Tensor& src, bool non_blocking) {
  const size_t nbytes = static_cast<size_t>(src.numel()) * src.element_size();
  if (nbytes == 0) return;
  Runtime* rt = device_runtime();
  TINY_CHECK(rt != nullptr, DeviceError, "cannot copy between ", src.device(), " and ", dst.device(),
             ": no GPU is available");
  CopyKind kind;
  int device;
  if (src.is_cpu()) {
    kind = CopyKind::HostToDevice;
    device = dst.device().index();
  } else if (dst.is_cpu()) {
    kind = CopyKind::DeviceToHost;
    device = src.device().index();
  } else {
    kind = CopyKind::DeviceToDevice;
    device = src.device().index();
  }
  const Stream stream = current_stream(device);
  if (kind == CopyKind::DeviceToDevice && dst.device().index() != device) {
    // The destination block comes from the destination's caching allocator,
    // which may hand out memory that work queued on the destination's stream
    // still reads; the copy runs on the source's stream, so order it after
    // that work (PyTorch's copy_kernel_cuda does the same). The other half of
    // the barrier follows the copy.
    const Stream dst_stream = current_stream(dst.device().index());
    const Event queued = rt->create_event(dst_stream.device, false);
    rt->record_event(queued, dst_stream);
    rt->stream_wait_event(stream, queued);
    rt->destroy_event(queued);  // the wait keeps it alive until it has run
  }
  rt->memcpy_async(dst.unsafe_impl()->data(), src.unsafe_impl()->data(), nbytes, kind, stream);
  if (kind == CopyKind::DeviceToDevice) {
    // A copy between two GPUs runs on the source's stream: the destination's
    // stream waits for it on the GPU, and the host goes on (the other half of
    // PyTorch's two-way barrier in copy_device_to_device; no host wait, so
    // DataParallel's replicas and gathers do not stall the thread that queues them).
    if (dst.device().index() != device) {
      const Event copied = rt->create_event(device, false);
      rt->record_event(copied, stream);
      rt->stream_wait_event(current_stream(dst.device().index()), copied);
      rt->destroy_event(copied);
    }
    return;
  }
  // A blocking copy from the host returns when the data is on the device, as in PyTorch.
  if (!non_blocking && kind == CopyKind::HostToDevice) {
    rt->stream_synchronize(stream);
    return;
  }
  // The pinned block must outlive the queued copy: its allocator reuses it
  // only after this point of the stream has run.
  const Tensor& host = kind == CopyKind::HostToDevice ? src : dst;
  if (storage_is_pinned(host)) record_pinned_use(host.unsafe_impl()->storage->data, stream);
}

}  // namespace tiny::gpu
