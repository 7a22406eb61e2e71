/// @file autograd.h
/// @brief The autograd graph, gradient mode, and `backward` for several roots.
///
/// Every op on tensors that require gradients records a Node holding what its
/// backward needs. Holding a tensor holds its whole graph (and the saved
/// activations in it): `total_loss += loss` keeps every step's graph alive,
/// `total_loss += loss.item<float>()` does not.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tiny/tensor.h"
#include "tiny/thread_local_state.h"

namespace tiny::autograd {

/// @brief One input slot of a node in the graph: the node and which of its inputs.
struct Edge {
  std::shared_ptr<Node> function;  ///< nullptr when the input needs no gradient
  uint32_t input_nr = 0;           ///< which gradient input of `function`
  /// @brief True when the edge leads somewhere.
  bool is_valid() const { return function != nullptr; }
};

/// @brief A backward function in the graph (PyTorch's `grad_fn`, e.g. `MulBackward0`).
class Node : public std::enable_shared_from_this<Node> {
 public:
  /// @brief Creates a node; its sequence number orders the backward pass (newest first).
  Node();
  virtual ~Node() = default;
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  /// @brief Gradients of the inputs given gradients of the outputs.
  virtual std::vector<Tensor> apply(std::vector<Tensor>&& grad_outputs) = 0;
  /// @brief The name PyTorch would print, e.g. "AddBackward0".
  virtual std::string name() const = 0;
  /// @brief Frees the saved tensors (called after backward unless retain_graph).
  virtual void release_variables() {}
  /// @brief Number of outputs of the forward op (gradient inputs of this node).
  virtual uint32_t num_outputs() const { return 1; }

  /// @brief Where each input's gradient goes (PyTorch's `next_functions`).
  const std::vector<Edge>& next_edges() const { return next_edges_; }
  /// @brief Sets the edges (internal).
  void set_next_edges(std::vector<Edge> edges) { next_edges_ = std::move(edges); }
  /// @brief Creation order: later nodes run first in backward.
  uint64_t sequence_nr() const { return sequence_nr_; }

  /// @brief Hooks on output `output_nr`'s gradient, run before apply (internal).
  std::vector<std::pair<uint32_t, std::pair<int64_t, GradHook>>>& pre_hooks() { return pre_hooks_; }

 protected:
  /// @brief Creates a node with a fixed sequence number (AccumulateGrad runs as soon as it is ready).
  explicit Node(uint64_t sequence_nr) : sequence_nr_(sequence_nr) {}

 private:
  std::vector<Edge> next_edges_;
  std::vector<std::pair<uint32_t, std::pair<int64_t, GradHook>>> pre_hooks_;
  uint64_t sequence_nr_;
};

/// @brief Computes gradients of `tensors` (weighted by `grad_tensors`) into the leaves' `.grad()`.
void backward(const std::vector<Tensor>& tensors, const std::vector<Tensor>& grad_tensors = {},
              bool retain_graph = false);

/// @brief Returns d(outputs)/d(inputs) without touching any `.grad()` (PyTorch's `torch.autograd.grad`).
std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs = {}, bool retain_graph = false);

}  // namespace tiny::autograd

namespace tiny {

// is_grad_enabled() and set_grad_enabled() are declared with the rest of the
// per-thread state in tiny/thread_local_state.h.

/// @brief Disables graph recording in a scope (PyTorch's `with torch.no_grad():`).
class NoGradGuard {
 public:
  /// @brief Turns recording off until destroyed.
  NoGradGuard() : previous_(is_grad_enabled()) { set_grad_enabled(false); }
  /// @brief Restores the previous mode.
  ~NoGradGuard() { set_grad_enabled(previous_); }
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool previous_;
};

/// @brief Enables graph recording in a scope (PyTorch's `with torch.enable_grad():`).
class EnableGradGuard {
 public:
  /// @brief Turns recording on until destroyed.
  EnableGradGuard() : previous_(is_grad_enabled()) { set_grad_enabled(true); }
  /// @brief Restores the previous mode.
  ~EnableGradGuard() { set_grad_enabled(previous_); }
  EnableGradGuard(const EnableGradGuard&) = delete;
  EnableGradGuard& operator=(const EnableGradGuard&) = delete;

 private:
  bool previous_;
};

}  // namespace tiny
