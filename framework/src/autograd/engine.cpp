// The backward pass: run every node reachable from the roots once, newest
// first, after all the gradients flowing into it have been summed.
#include <atomic>
#include <map>
#include <queue>
#include <unordered_map>

#include "gpu/model/timeline.h"
#include "autograd/function.h"
#include "core/op_scope.h"
#include "tiny/ops.h"

namespace tiny::autograd {

namespace {
std::atomic<uint64_t> next_sequence_nr{0};
// A thread inside a SequenceRangeGuard numbers its nodes from its own range.
thread_local uint64_t* t_next_sequence_nr = nullptr;
// Each range of reserve_sequence_ranges(): more nodes than one forward pass of a replica records.
constexpr uint64_t kSequenceRange = uint64_t{1} << 32;

// Where autograd::grad wants a gradient captured instead of accumulated.
using CaptureKey = std::pair<Node*, uint32_t>;

struct NodeTask {
  std::shared_ptr<Node> node;
  bool operator<(const NodeTask& other) const { return node->sequence_nr() < other.node->sequence_nr(); }
};

void add_into(Tensor& slot, const Tensor& grad) {
  slot = slot.defined() ? slot + grad : grad;
}

using GradBuffers = std::unordered_map<Node*, std::vector<Tensor>>;  // the gradients summed for each node's outputs

// Puts each root's gradient in its node's buffer; the nodes the pass starts from.
std::vector<std::shared_ptr<Node>> seed_roots(const std::vector<Tensor>& roots, const std::vector<Tensor>& root_grads,
                                              GradBuffers& buffers) {
  std::vector<std::shared_ptr<Node>> starts;
  for (size_t i = 0; i < roots.size(); ++i) {
    const Tensor& root = roots[i];
    TINY_CHECK(root.defined() && root.requires_grad(), Error, "element ", i,
               " of tensors does not require grad and does not have a grad_fn (did you create it under a "
               "NoGradGuard, or call .detach() or .item()?)");
    Edge edge = gradient_edge(root);
    auto& buffer = buffers[edge.function.get()];
    buffer.resize(edge.function->num_outputs());
    add_into(buffer[edge.input_nr], root_grads[i]);
    starts.push_back(edge.function);
  }
  return starts;
}

// Counts, for every node reachable from `starts`, how many edges lead into it.
std::unordered_map<Node*, int> count_dependencies(const std::vector<std::shared_ptr<Node>>& starts) {
  std::unordered_map<Node*, int> dependencies;
  std::vector<Node*> stack;
  std::unordered_map<Node*, bool> seen;
  for (const auto& s : starts) {
    if (!seen[s.get()]) {
      seen[s.get()] = true;
      stack.push_back(s.get());
    }
  }
  while (!stack.empty()) {
    Node* node = stack.back();
    stack.pop_back();
    for (const Edge& e : node->next_edges()) {
      if (!e.is_valid()) continue;
      dependencies[e.function.get()] += 1;
      if (!seen[e.function.get()]) {
        seen[e.function.get()] = true;
        stack.push_back(e.function.get());
      }
    }
  }
  return dependencies;
}

// Runs one node's backward on the gradients of its outputs (after its hooks,
// and storing those `captures` asks for); the gradients of its inputs, none
// when it did not run.
std::vector<Tensor> run_node(Node& node, std::vector<Tensor> grads, bool retain_graph,
                             std::map<CaptureKey, Tensor>* captures) {
  grads.resize(node.num_outputs());
  for (auto& [output_nr, id_hook] : node.pre_hooks()) {
    if (output_nr < grads.size() && grads[output_nr].defined()) {
      Tensor replaced = id_hook.second(grads[output_nr]);
      if (replaced.defined()) grads[output_nr] = replaced;
    }
  }
  bool any_defined = false;
  for (const Tensor& g : grads) any_defined = any_defined || g.defined();

  std::vector<Tensor> input_grads;
  if (captures != nullptr) {
    for (uint32_t k = 0; k < grads.size(); ++k) {
      auto it = captures->find({&node, k});
      if (it != captures->end() && grads[k].defined()) add_into(it->second, grads[k]);
    }
  }
  const bool is_accumulator = dynamic_cast<AccumulateGrad*>(&node) != nullptr;
  if (any_defined && !(captures != nullptr && is_accumulator)) {
    gpu::model::host_advance_autograd();  // running a node's backward costs the host, as recording it did
    input_grads = node.apply(std::move(grads));
  }
  if (!retain_graph) node.release_variables();
  return input_grads;
}

// Runs the graph. With `captures`, gradients reaching those (node, input)
// slots are stored there and leaves' .grad() is left alone.
void execute(const std::vector<Tensor>& roots, const std::vector<Tensor>& root_grads, bool retain_graph,
             std::map<CaptureKey, Tensor>* captures) {
  NoGradGuard no_grad;
  GradBuffers buffers;
  const std::vector<std::shared_ptr<Node>> starts = seed_roots(roots, root_grads, buffers);
  std::unordered_map<Node*, int> dependencies = count_dependencies(starts);

  std::priority_queue<NodeTask> ready;
  for (const auto& s : starts) {
    if (dependencies[s.get()] == 0) {
      dependencies[s.get()] = -1;  // queued
      ready.push({s});
    }
  }

  while (!ready.empty()) {
    std::shared_ptr<Node> node = ready.top().node;
    ready.pop();
    std::vector<Tensor> grads = std::move(buffers[node.get()]);
    buffers.erase(node.get());
    const std::vector<Tensor> input_grads = run_node(*node, std::move(grads), retain_graph, captures);

    // Into the buffers of the nodes it feeds; a node whose every input has come is ready.
    const auto& edges = node->next_edges();
    TINY_CHECK(input_grads.empty() || input_grads.size() == edges.size(), Error, "internal: ", node->name(),
               " returned ", input_grads.size(), " gradients for ", edges.size(), " inputs");
    for (size_t k = 0; k < edges.size(); ++k) {
      const Edge& e = edges[k];
      if (!e.is_valid()) continue;
      if (!input_grads.empty() && input_grads[k].defined()) {
        auto& buffer = buffers[e.function.get()];
        buffer.resize(e.function->num_outputs());
        add_into(buffer[e.input_nr], input_grads[k]);
      }
      if (--dependencies[e.function.get()] == 0) ready.push({e.function});
    }
  }
}

std::vector<Tensor> default_root_grads(const std::vector<Tensor>& tensors, const std::vector<Tensor>& given) {
  TINY_CHECK(given.empty() || given.size() == tensors.size(), ValueError, "got ", tensors.size(), " tensors and ",
             given.size(), " gradients: pass one gradient per tensor, or none");
  std::vector<Tensor> grads;
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (!given.empty() && given[i].defined()) {
      TINY_CHECK(given[i].sizes() == tensors[i].sizes(), ShapeError, "Mismatch in shape: grad_output[", i,
                 "] has a shape of ", shape_str(given[i].sizes()), " and output[", i, "] has a shape of ",
                 shape_str(tensors[i].sizes()), ".");
      TINY_CHECK(given[i].device() == tensors[i].device(), DeviceError, "grad_output[", i, "] is on ",
                 given[i].device(), " but output[", i, "] is on ", tensors[i].device());
      grads.push_back(given[i].to(tensors[i].dtype()));
    } else {
      TINY_CHECK(tensors[i].numel() == 1, Error,
                 "grad can be implicitly created only for scalar outputs (this output has shape ",
                 shape_str(tensors[i].sizes()),
                 "): reduce it first, e.g. loss.mean().backward(), or pass a gradient of the same shape");
      grads.push_back(ones_like(tensors[i]));
    }
  }
  return grads;
}

}  // namespace

uint64_t reserve_sequence_ranges(size_t count) {
  return next_sequence_nr.fetch_add(kSequenceRange * count, std::memory_order_relaxed);
}

SequenceRangeGuard::SequenceRangeGuard(uint64_t first, size_t index)
    : previous_(t_next_sequence_nr), next_(first + kSequenceRange * index) {
  t_next_sequence_nr = &next_;
}

SequenceRangeGuard::~SequenceRangeGuard() { t_next_sequence_nr = previous_; }

Node::Node()
    : sequence_nr_(t_next_sequence_nr != nullptr ? (*t_next_sequence_nr)++
                                                 : next_sequence_nr.fetch_add(1, std::memory_order_relaxed)) {
  gpu::model::host_advance_autograd();  // recording an op for backward costs the host (modelled time)
}

void backward(const std::vector<Tensor>& tensors, const std::vector<Tensor>& grad_tensors, bool retain_graph) {
  TINY_OP_SCOPE("backward");
  execute(tensors, default_root_grads(tensors, grad_tensors), retain_graph, nullptr);
}

std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs, bool retain_graph) {
  TINY_OP_SCOPE("backward");
  std::map<CaptureKey, Tensor> captures;
  std::vector<CaptureKey> keys;
  for (size_t i = 0; i < inputs.size(); ++i) {
    TINY_CHECK(inputs[i].defined() && inputs[i].requires_grad(), Error, "One of the differentiated Tensors (input ",
               i, ") does not require grad");
    Edge e = gradient_edge(inputs[i]);
    keys.push_back({e.function.get(), e.input_nr});
    captures[keys.back()] = Tensor();
  }
  // Keep the accumulators alive while the engine looks them up.
  std::vector<std::shared_ptr<Node>> keep;
  for (const Tensor& t : inputs) keep.push_back(gradient_edge(t).function);
  execute(outputs, default_root_grads(outputs, grad_outputs), retain_graph, &captures);
  std::vector<Tensor> result;
  for (const auto& k : keys) result.push_back(captures[k]);
  return result;
}

}  // namespace tiny::autograd
