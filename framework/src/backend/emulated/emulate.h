// The emulated GPU's kernels are the CPU kernels, queued on the device's
// current stream and run by its worker on the worker's view of device memory
// (host code only ever sees a PROT_NONE address). One template makes the
// emulated kernel of every stub (TINY_DEFINE_DISPATCH, backend/define_dispatch.h):
// it asks the stub's work function what the call costs on the modelled GPU
// (a KernelWork: its name in traces, bytes moved, FLOPs), captures worker
// views of the device operands (they do not own the memory, as a CUDA
// kernel's pointers do not) and CPU operands by value, and queues the CPU
// kernel. A stub cannot be defined without its work, so no kernel runs untimed.
#pragma once

#include <functional>
#include <initializer_list>
#include <tuple>
#include <type_traits>
#include <vector>

#include "backend/dispatch.h"
#include "core/tensor_iterator.h"
#include "gpu/model/cost.h"

namespace tiny::emulated {

using gpu::model::KernelCost;
using gpu::model::Work;

// What one call of a kernel costs: its name in the profiler's trace and its work.
struct KernelWork {
  const char* name;
  KernelCost cost;
};

// The bytes a kernel moves reading or writing `t`: each stored element once
// (a broadcast dimension, of stride 0, is read once), at least 4 bytes each
// (tiny's kernels move one element per thread).
int64_t moved_bytes(const Tensor& t);
// A kernel that reads or writes each of `tensors` once (list one twice when
// it is read and written).
KernelCost cost_of(std::initializer_list<Tensor> tensors, Work work = Work::pointwise);
// A kernel that reads or writes each of the iterator's operands once.
KernelCost cost_of(const TensorIter& iter, Work work = Work::pointwise);

// A CPU tensor over the worker's view of a device tensor's memory (a CPU
// tensor is returned as it is). It does not own that memory: as on CUDA, a
// device tensor whose last handle goes while its kernels are still queued
// returns its block to the caching allocator at once, and the stream order
// keeps the block's next user behind those kernels.
Tensor worker_view(const Tensor& t);
TensorIter worker_iter(const TensorIter& iter);
ReduceIter worker_iter(const ReduceIter& iter);
// The worker's address of a device pointer (a GEMM's operands), and its device.
void* worker_address(const void* device_pointer);
int device_of_address(const void* device_pointer);
// Queues `work` on the current stream of emulated device `device`, timed by `cost`.
void launch(int device, const char* name, const KernelCost& cost, std::function<void()> work);

// The device an operand lives on, or -1 (a CPU tensor, a number).
int device_of(const Tensor& t);
template <typename T>
int device_of_operand(const T& x) {
  if constexpr (std::is_same_v<T, Tensor>) {
    return device_of(x);
  } else if constexpr (std::is_same_v<T, TensorIter>) {
    for (int k = 0; k < x.num_operands; ++k) {
      if (device_of(x.operands[k]) >= 0) return device_of(x.operands[k]);
    }
    return -1;
  } else if constexpr (std::is_same_v<T, ReduceIter>) {
    return device_of(x.input);
  } else if constexpr (std::is_same_v<T, std::vector<Tensor>>) {
    for (const Tensor& t : x) {
      if (device_of(t) >= 0) return device_of(t);
    }
    return -1;
  } else if constexpr (std::is_pointer_v<T>) {
    return device_of_address(x);
  } else {
    return -1;
  }
}

// What the worker gets for an operand: worker views of device memory, a copy of anything else.
template <typename T>
T worker_operand(const T& x) {
  if constexpr (std::is_same_v<T, Tensor>) {
    return worker_view(x);
  } else if constexpr (std::is_same_v<T, TensorIter> || std::is_same_v<T, ReduceIter>) {
    return worker_iter(x);
  } else if constexpr (std::is_same_v<T, std::vector<Tensor>>) {
    std::vector<Tensor> views;
    views.reserve(x.size());
    for (const Tensor& t : x) views.push_back(worker_view(t));
    return views;
  } else if constexpr (std::is_pointer_v<T>) {
    return static_cast<T>(worker_address(x));
  } else {
    return x;
  }
}

int device_of_call(std::initializer_list<int> operand_devices, const char* name);

// The emulated kernel of `stub`: its CPU kernel, queued, timed by `work`.
template <typename Stub, const Stub* stub, auto work>
struct Kernel;
template <typename... Args, const DispatchStub<void (*)(Args...)>* stub, auto work>
struct Kernel<DispatchStub<void (*)(Args...)>, stub, work> {
  static void run(Args... args) {
    const KernelWork w = work(args...);
    const int device = device_of_call({device_of_operand<std::decay_t<Args>>(args)...}, w.name);
    launch(device, w.name, w.cost,
           [cpu = (*stub)(Backend::CPU),
            operands = std::make_tuple(worker_operand<std::decay_t<Args>>(args)...)]() mutable {
             std::apply(cpu, operands);
           });
  }
};

}  // namespace tiny::emulated
