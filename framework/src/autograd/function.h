// How ops record themselves in the autograd graph.
//
// An op that may need gradients calls `record(...)` with its inputs, its
// outputs, the tensors its backward needs (saved), and the backward formula as
// a lambda. Everything else a formula needs (shapes, dims, scalars) is captured
// by value in the lambda.
#pragma once

#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "core/tensor_impl.h"
#include "tiny/autograd.h"

namespace tiny::autograd {

// A tensor kept for backward. An op's own output is kept without its grad_fn
// (that would be a reference cycle); the version counter catches in-place
// changes made between forward and backward.
class SavedTensor {
 public:
  SavedTensor() = default;
  SavedTensor(const Tensor& tensor, bool is_output);
  Tensor unpack(const std::string& node_name) const;
  void release() { data_ = Tensor(); released_ = true; }

 private:
  Tensor data_;
  uint32_t version_ = 0;
  bool defined_ = false;
  bool is_output_ = false;
  bool released_ = false;
};

// Saves an input of the op.
inline SavedTensor save(const Tensor& t) { return SavedTensor(t, false); }
// Saves an input only when `needed` (PyTorch saves mm's and mul's operands only
// for the other operand's gradient), so that changing it in place afterwards
// is fine when that gradient is not wanted.
inline SavedTensor save_if(const Tensor& t, bool needed) { return needed ? SavedTensor(t, false) : SavedTensor(); }
// Saves an output of the op.
inline SavedTensor save_output(const Tensor& t) { return SavedTensor(t, true); }

struct BackwardArgs {
  const std::vector<Tensor>& grads;  // one per op output; undefined when that output got no gradient
  const std::vector<Tensor>& saved;  // unpacked saved tensors, in the order given to record()
  std::vector<bool> needs;           // needs[i]: input i wants a gradient
  const Tensor& grad() const { return grads[0]; }
};
using BackwardFn = std::function<std::vector<Tensor>(const BackwardArgs& args)>;

class FunctionNode final : public Node {
 public:
  FunctionNode(std::string name, uint32_t num_outputs, std::vector<SavedTensor> saved, BackwardFn fn)
      : name_(std::move(name)), num_outputs_(num_outputs), saved_(std::move(saved)), fn_(std::move(fn)) {}
  std::vector<Tensor> apply(std::vector<Tensor>&& grad_outputs) override;
  std::string name() const override { return name_; }
  void release_variables() override;
  uint32_t num_outputs() const override { return num_outputs_; }

 private:
  std::string name_;
  uint32_t num_outputs_;
  std::vector<SavedTensor> saved_;
  BackwardFn fn_;
};

// Accumulates into a leaf's `.grad()` (PyTorch's AccumulateGrad).
//
// A leaf has one AccumulateGrad while any graph uses it (gradient_edge creates
// it under a lock), so its mutex serialises backward passes that run on
// several threads at once and meet at a shared parameter, as in PyTorch.
class AccumulateGrad final : public Node {
 public:
  explicit AccumulateGrad(Tensor variable);
  std::vector<Tensor> apply(std::vector<Tensor>&& grad_outputs) override;
  std::string name() const override { return "AccumulateGrad"; }
  const Tensor& variable() const { return variable_; }

 private:
  Tensor variable_;
  std::mutex mutex_;
};

// True when grad mode is on and any input requires grad.
bool should_record(const std::vector<Tensor>& inputs);
// The edge a gradient for `t` must flow along (invalid when t needs none).
Edge gradient_edge(const Tensor& t);
// Creates a FunctionNode for `outputs` = op(`inputs`).
void record(const std::string& name, const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs,
            std::vector<SavedTensor> saved, BackwardFn fn);

// ---- in-place ops (autograd/inplace.cpp) ----------------------------------------------

// Whether an in-place op on `self` that reads `others` must be recorded
// (grad mode on and self, its base or an other requires grad). Throws
// PyTorch's errors for what cannot be recorded: a leaf that requires grad, a
// view of one, a view made under no_grad, a view whose elements overlap. Call
// it before the kernel writes.
bool inplace_needs_record(const Tensor& self, const std::vector<Tensor>& others);
// Rebases `self`'s history after an in-place op wrote into it (and bumped its
// version): a node `name` with inputs (self's previous value, others...)
// becomes self's grad_fn, as in PyTorch. For a view, the node goes into a
// CopySlices that becomes the base's grad_fn, and the view's grad_fn becomes
// its slice of that (AsStridedBackward0). Saved outputs must be saved after the write.
void record_inplace(const std::string& name, const Tensor& self, const std::vector<Tensor>& others,
                    std::vector<SavedTensor> saved, BackwardFn fn);
// A view whose base was changed in place since its grad_fn was set gets its
// grad_fn rebuilt from the base's new history (PyTorch does it lazily too).
void refresh_view_grad_fn(TensorImpl& view);

// Sums `grad` over broadcast dimensions so it has `shape` (the backward of broadcasting).
Tensor sum_to(const Tensor& grad, const IntArrayRef& shape);

/// @brief Reserves `count` ranges of node sequence numbers, one for each thread
/// of a fork (DataParallel's replicas); returns the first number of the first range.
/// Numbers recorded after the fork, by any thread, are above every range.
uint64_t reserve_sequence_ranges(size_t count);

/// @brief While alive, the nodes the calling thread records are numbered from
/// `first` + kSequenceRange * `index` on, not from the shared counter: the
/// backward pass then runs the replicas' nodes in the same order on every run,
/// whichever replica thread recorded first (so their modelled time is the same,
/// as DESIGN.md section 4a promises). PyTorch's sequence numbers are per thread too.
class SequenceRangeGuard {
 public:
  /// @brief Numbers this thread's nodes from range `index` of reserve_sequence_ranges()'s `first`.
  SequenceRangeGuard(uint64_t first, size_t index);
  ~SequenceRangeGuard();
  SequenceRangeGuard(const SequenceRangeGuard&) = delete;
  SequenceRangeGuard& operator=(const SequenceRangeGuard&) = delete;

 private:
  uint64_t* previous_;
  uint64_t next_;
};

}  // namespace tiny::autograd
