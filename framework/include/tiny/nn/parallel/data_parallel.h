/// @file nn/parallel/data_parallel.h
/// @brief Single-process data parallelism (PyTorch's `nn.DataParallel` and `nn.parallel.data_parallel`).
///
/// Each forward pass: scatter the batch across the GPUs along `dim`, replicate
/// the model on each of them, run the replicas on their own threads, and
/// gather the outputs on one device. Scatter, the replication (a broadcast of
/// every parameter) and gather are autograd functions, so `loss.backward()`
/// sums each replica's gradients into the original module's parameters and an
/// optimizer over `model->parameters()` works unchanged.
///
/// PyTorch recommends DistributedDataParallel instead, even on one machine:
/// DataParallel copies the whole model from device 0 to every GPU and sums
/// all gradients back onto device 0 at every step, and its threads share one
/// process. On the emulated GPU all devices share the host's cores, so it
/// shows the mechanics, not a speedup.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tiny/device.h"
#include "tiny/nn/module.h"
#include "tiny/tensor.h"

namespace tiny::nn::parallel {

/// @brief Splits `input` along `dim` into one piece per device and copies piece i to `devices[i]` (PyTorch's `Scatter`).
///
/// Sizes differ by at most one, the first pieces larger (10 samples on 3
/// devices: 4, 3, 3). Differentiable: the gradients of the pieces are gathered
/// back onto `input`'s device ("ScatterBackward"). Throws tiny::ValueError when
/// `input` has fewer elements along `dim` than there are devices.
std::vector<Tensor> scatter(const Tensor& input, const std::vector<int>& devices, int64_t dim = 0);

/// @brief Concatenates `outputs` (one per device) along `dim` on `output_device` (PyTorch's `Gather`).
///
/// Differentiable: the gradient is split by the pieces' sizes and sent back to
/// each piece's device ("GatherBackward"). 0-dimensional outputs (a loss per
/// replica) are stacked into a vector, as PyTorch does.
Tensor gather(const std::vector<Tensor>& outputs, const Device& output_device, int64_t dim = 0);

/// @brief A copy of `module` on each device, whose parameters are differentiable copies of the original's (PyTorch's `replicate`).
///
/// Each replica comes from Module::clone(); with gradients enabled every
/// parameter is then recorded as one output of a broadcast of the original
/// ("BroadcastBackward"), so gradients reaching a replica's parameters are
/// summed onto the original's device and accumulated into the original's
/// `.grad()`. Under a NoGradGuard the replicas are plain copies. Throws
/// tiny::NotImplemented (from clone()) for a module that cannot be copied.
std::vector<std::shared_ptr<Module>> replicate(const std::shared_ptr<Module>& module, const std::vector<int>& devices);

/// @brief Runs `replicas[i]` on `inputs[i]`, each on its own thread, with `devices[i]` current (PyTorch's `parallel_apply`).
///
/// Each thread starts with the caller's grad mode, and with the caller's
/// current stream of its device current. An exception in a replica is rethrown
/// here (the first replica's first) after every thread has finished.
std::vector<Tensor> parallel_apply(const std::vector<std::shared_ptr<Module>>& replicas,
                                   const std::vector<Tensor>& inputs, const std::vector<int>& devices);

/// @brief One data-parallel forward pass of `module` on `input` (PyTorch's `nn.parallel.data_parallel`, LibTorch's `torch::nn::parallel::data_parallel`).
///
/// `devices` defaults to every GPU and `output_device` to `cuda:<devices[0]>`.
/// The module's parameters and buffers must be on `cuda:<devices[0]>`
/// (tiny::DeviceError otherwise). With one device the module runs directly,
/// without threads or replicas.
Tensor data_parallel(const std::shared_ptr<Module>& module, const Tensor& input,
                     std::optional<std::vector<int>> devices = std::nullopt,
                     std::optional<Device> output_device = std::nullopt, int64_t dim = 0);

}  // namespace tiny::nn::parallel

namespace tiny::nn {

/// @brief Runs a module data-parallel over several GPUs of this process (PyTorch's `nn.DataParallel`).
///
/// @code
/// auto model = std::make_shared<nn::Sequential>(...);
/// model->to(Device("cuda:0"));
/// auto dp = std::make_shared<nn::DataParallel>(model);      // every GPU, output on cuda:0
/// optim::SGD opt(model->parameters(), 0.1);
/// Tensor loss = F::cross_entropy((*dp)(x), y.to("cuda:0"));  // labels on the output device
/// loss.backward();                                            // grads land in model's parameters
/// @endcode
/// The wrapped module is its child "module", so state_dict() keys read
/// "module.fc1.weight" as in PyTorch. Without any GPU it calls the module
/// directly, as PyTorch does.
class DataParallel : public Module {
 public:
  /// @brief Wraps `module`; `device_ids` defaults to every GPU, `output_device` to `cuda:<device_ids[0]>`.
  ///
  /// Throws tiny::ValueError for a null module or repeated ids, and
  /// tiny::DeviceError for an id that does not exist.
  explicit DataParallel(std::shared_ptr<Module> module, std::vector<int> device_ids = {},
                        std::optional<Device> output_device = std::nullopt, int64_t dim = 0);
  /// @brief Scatters `input`, runs the replicas in parallel and gathers their outputs on the output device.
  Tensor forward(const Tensor& input) override;
  /// @brief "DataParallel".
  std::string name() const override { return "DataParallel"; }

  /// @brief The wrapped module (PyTorch's `dp.module`).
  const std::shared_ptr<Module>& module() const { return module_; }
  /// @brief The GPUs used, in order (PyTorch's `dp.device_ids`).
  const std::vector<int>& device_ids() const { return device_ids_; }
  /// @brief Where outputs are gathered (PyTorch's `dp.output_device`).
  const Device& output_device() const { return output_device_; }
  /// @brief The dimension the batch is split along (PyTorch's `dp.dim`).
  int64_t dim() const { return dim_; }

 private:
  std::shared_ptr<Module> module_;
  std::vector<int> device_ids_;
  Device output_device_;
  int64_t dim_;
};

}  // namespace tiny::nn
