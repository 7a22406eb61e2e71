// DataParallel: scatter the batch, replicate the module, run the replicas on
// threads, gather the outputs (PyTorch's torch/nn/parallel/data_parallel.py).
// The data movement is comm's; this file adds the autograd nodes that make
// scatter, replicate and gather differentiable, and the threads.
#include "tiny/nn/parallel/data_parallel.h"

#include <exception>
#include <set>
#include <thread>

#include "autograd/function.h"
#include "gpu/model/timeline.h"
#include "tiny/autograd.h"
#include "tiny/cuda.h"
#include "tiny/nn/parallel/comm.h"
#include "tiny/ops.h"
#include "tiny/thread_local_state.h"

namespace tiny::nn::parallel {

using autograd::BackwardArgs;

namespace {

int64_t wrap_dim(int64_t dim, int64_t ndim) { return dim < 0 ? dim + ndim : dim; }

std::vector<int> all_devices() {
  std::vector<int> devices;
  for (int i = 0; i < cuda::device_count(); ++i) devices.push_back(i);
  return devices;
}

void check_device_ids(const char* what, const std::vector<int>& devices) {
  TINY_CHECK(!devices.empty(), ValueError, what, ": device_ids is empty and no GPU is available; DataParallel needs "
             "at least one GPU (or leave TINY_EMULATED_GPUS unset to emulate two)");
  const int count = cuda::device_count();
  std::set<int> seen;
  for (int d : devices) {
    TINY_CHECK(d >= 0 && d < count, DeviceError, what, ": device id ", d, " does not exist; this machine has ", count,
               " GPU", count == 1 ? "" : "s", " (cuda:0 to cuda:", count - 1, ")");
    TINY_CHECK(seen.insert(d).second, ValueError, what, ": device id ", d, " appears more than once in device_ids");
  }
}

// PyTorch's check at the start of DataParallel.forward.
void check_module_on(const Module& module, int device) {
  const Device expected(kCUDA, device);
  auto check = [&](const std::string& name, const Tensor& t, const char* what) {
    TINY_CHECK(t.device() == expected, DeviceError, "module must have its parameters and buffers on device ", expected,
               " (device_ids[0]) but found one of them on device: ", t.device(), " (", what, " '", name,
               "'). Move the model first: model->to(Device(\"", expected, "\")).");
  };
  for (const auto& [name, p] : module.named_parameters()) check(name, p, "parameter");
  for (const auto& [name, b] : module.named_buffers()) check(name, b, "buffer");
}

}  // namespace

std::vector<Tensor> scatter(const Tensor& input, const std::vector<int>& devices, int64_t dim) {
  std::vector<Tensor> pieces = comm::scatter(input, devices, {}, dim);  // checks everything
  if (autograd::should_record({input})) {
    const int64_t d = wrap_dim(dim, input.dim());
    const Device source = input.device();
    std::vector<IntArrayRef> shapes;
    for (const Tensor& p : pieces) shapes.push_back(p.sizes());
    const Dtype dtype = input.dtype();
    autograd::record("ScatterBackward", {input}, pieces, {},
                     [source, d, shapes, dtype, devices](const BackwardArgs& args) {
                       std::vector<Tensor> grads;
                       for (size_t i = 0; i < shapes.size(); ++i) {
                         grads.push_back(args.grads[i].defined()
                                             ? args.grads[i]
                                             : zeros(shapes[i], TensorOptions(dtype).device(Device(kCUDA, devices[i]))));
                       }
                       return std::vector<Tensor>{comm::gather(grads, d, source)};
                     });
  }
  return pieces;
}

Tensor gather(const std::vector<Tensor>& outputs, const Device& output_device, int64_t dim) {
  TINY_CHECK(!outputs.empty(), ValueError, "gather: expected at least one output, got an empty list");
  std::vector<Tensor> pieces = outputs;
  bool scalars = true;
  for (const Tensor& t : outputs) scalars = scalars && t.defined() && t.dim() == 0;
  if (scalars) {
    // PyTorch warns and returns a vector: "all input tensors were scalars; will instead unsqueeze".
    for (Tensor& t : pieces) t = t.unsqueeze(0);
    dim = 0;
  }
  Tensor out = comm::gather(pieces, dim, output_device);  // checks everything
  if (autograd::should_record(pieces)) {
    const int64_t d = wrap_dim(dim, pieces[0].dim());
    std::vector<int64_t> sizes;
    std::vector<Device> sources;
    for (const Tensor& p : pieces) {
      sizes.push_back(p.size(d));
      sources.push_back(p.device());
    }
    autograd::record("GatherBackward", pieces, {out}, {}, [d, sizes, sources](const BackwardArgs& args) {
      std::vector<Tensor> grads;
      int64_t start = 0;
      for (size_t i = 0; i < sizes.size(); ++i) {
        grads.push_back(args.needs[i] ? args.grad().narrow(d, start, sizes[i]).to(sources[i]) : Tensor());
        start += sizes[i];
      }
      return grads;
    });
  }
  return out;
}

std::vector<std::shared_ptr<Module>> replicate(const std::shared_ptr<Module>& module, const std::vector<int>& devices) {
  TINY_CHECK(module != nullptr, ValueError, "replicate: the module is null");
  TINY_CHECK(!devices.empty(), ValueError, "replicate: expected at least one device, got an empty list");
  std::vector<std::shared_ptr<Module>> replicas;
  for (int d : devices) replicas.push_back(module->clone(Device(kCUDA, d)));  // the copies: the broadcast's data
  if (!is_grad_enabled()) return replicas;  // PyTorch: detached replicas under no_grad
  // One broadcast node per parameter: its outputs are that parameter in every
  // replica, its backward sums their gradients onto the original's device.
  const auto originals = module->named_parameters();
  std::vector<std::vector<std::pair<std::string, Tensor>>> copies;
  for (const auto& r : replicas) copies.push_back(r->named_parameters());
  for (size_t i = 0; i < originals.size(); ++i) {
    const Tensor& original = originals[i].second;
    if (!original.requires_grad()) continue;
    std::vector<Tensor> outputs;
    for (const auto& c : copies) {
      TINY_CHECK(i < c.size() && c[i].first == originals[i].first, Error, "replicate: ", module->name(),
                 "::clone() made a module whose parameters differ from the original's (parameter '",
                 originals[i].first, "'): clone() must build the same structure");
      outputs.push_back(c[i].second);
    }
    const Device destination = original.device();
    autograd::record("BroadcastBackward", {original}, outputs, {}, [destination](const BackwardArgs& args) {
      std::vector<Tensor> grads;
      for (const Tensor& g : args.grads) {
        if (g.defined()) grads.push_back(g);
      }
      if (grads.empty()) return std::vector<Tensor>{Tensor()};
      return std::vector<Tensor>{comm::reduce_add(grads, destination)};
    });
  }
  return replicas;
}

std::vector<Tensor> parallel_apply(const std::vector<std::shared_ptr<Module>>& replicas,
                                   const std::vector<Tensor>& inputs, const std::vector<int>& devices) {
  TINY_CHECK(replicas.size() == inputs.size() && inputs.size() == devices.size(), ValueError,
             "parallel_apply: expected as many replicas, inputs and devices, got ", replicas.size(), ", ",
             inputs.size(), " and ", devices.size());
  // The caller's grad mode, current device and autocast state, carried into every replica.
  const ThreadLocalState state = ThreadLocalState::capture();
  // Each replica works on the stream that is current on its device in the
  // caller's thread, so the gather that follows (queued by the caller on that
  // stream) sees its results, as PyTorch's parallel_apply does.
  std::vector<cuda::Stream> streams;
  for (int d : devices) streams.push_back(cuda::current_stream(d));
  std::vector<Tensor> outputs(replicas.size());
  std::vector<std::exception_ptr> errors(replicas.size());
  // Each replica's thread starts at the caller's modelled time; the caller
  // resumes at the latest of theirs (DESIGN.md section 4a).
  gpu::model::HostClockFork clock;
  // Each replica numbers its autograd nodes from its own range, so backward
  // visits them in the same order whichever thread recorded first.
  const uint64_t sequence_ranges = autograd::reserve_sequence_ranges(replicas.size());
  auto run = [&](size_t i) {
    clock.enter();
    autograd::SequenceRangeGuard numbering(sequence_ranges, i);
    try {
      ThreadLocalStateGuard carry(state);  // a forward under no_grad or autocast runs under it in every replica
      cuda::StreamGuard on_device(streams[i]);  // then the replica's device and stream
      outputs[i] = replicas[i]->forward(inputs[i]);
    } catch (...) {
      errors[i] = std::current_exception();
    }
    clock.leave();
  };
  if (replicas.size() == 1) {
    run(0);
  } else {
    std::vector<std::thread> threads;
    for (size_t i = 0; i < replicas.size(); ++i) threads.emplace_back(run, i);
    for (std::thread& t : threads) t.join();
  }
  clock.join();
  for (const std::exception_ptr& e : errors) {
    if (e) std::rethrow_exception(e);
  }
  return outputs;
}

Tensor data_parallel(const std::shared_ptr<Module>& module, const Tensor& input, std::optional<std::vector<int>> devices,
                     std::optional<Device> output_device, int64_t dim) {
  TINY_CHECK(module != nullptr, ValueError, "data_parallel: the module is null");
  const std::vector<int> ids = devices ? *devices : all_devices();
  check_device_ids("data_parallel", ids);
  const Device out_device = output_device ? *output_device : Device(kCUDA, ids[0]);
  check_module_on(*module, ids[0]);
  const std::vector<Tensor> inputs = scatter(input, ids, dim);
  if (ids.size() == 1) {
    cuda::DeviceGuard on_device(ids[0]);
    return gather({module->forward(inputs[0])}, out_device, dim);
  }
  const auto replicas = replicate(module, ids);
  return gather(parallel_apply(replicas, inputs, ids), out_device, dim);
}

}  // namespace tiny::nn::parallel

namespace tiny::nn {

DataParallel::DataParallel(std::shared_ptr<Module> module, std::vector<int> device_ids,
                           std::optional<Device> output_device, int64_t dim)
    : module_(std::move(module)), device_ids_(std::move(device_ids)), dim_(dim) {
  TINY_CHECK(module_ != nullptr, ValueError, "DataParallel: the module is null");
  register_module("module", module_);
  if (!cuda::is_available()) return;  // PyTorch: without GPUs, forward calls the module
  if (device_ids_.empty()) device_ids_ = parallel::all_devices();
  parallel::check_device_ids("DataParallel", device_ids_);
  output_device_ = output_device ? *output_device : Device(kCUDA, device_ids_[0]);
}

Tensor DataParallel::forward(const Tensor& input) {
  if (device_ids_.empty()) return module_->forward(input);
  return parallel::data_parallel(module_, input, device_ids_, output_device_, dim_);
}

}  // namespace tiny::nn
